//! Offline Level 2: a portfolio controller that turns the built-in mechanisms on and off by
//! credit assignment, with no model involved.
//!
//! Each experiment is credited to the mechanisms that shaped it: the one whose candidate was
//! proposed, or else those that gave the proposer guidance, and any filter that rejected or
//! modified a proposal on the way (a cancelled or invalid experiment or a rule violation counts
//! for no one). At the end of every segment each active mechanism's reward is the fraction of the
//! experiments it shaped that were kept ([`reward`]; 0 when it shaped none, so an inert
//! mechanism loses its place). The next segment runs the half of the
//! mechanisms (rounded up) with the highest UCB1 score (bonus weighted by [`EXPLORATION`]) over
//! their credited segments: a mechanism never yet credited comes first, then the highest upper
//! bound, ties to the one credited less often, then to the configured order. Each switch is
//! recorded as a call of `portfolio` and as an event. A resumed run rebuilds the credit, the
//! current segment's tally and which mechanisms are on from the recorded calls
//! (`Outer::restore`).

use std::collections::BTreeMap;

/// The weight of UCB1's exploration bonus: segment rewards (keep rates) are small, so the
/// textbook weight of 1 would keep cycling through mechanisms long after one proved itself.
pub const EXPLORATION: f64 = 0.5;

#[derive(Clone, Copy, Debug, Default)]
struct Credit {
    segments: u64,
    reward: f64,
}

#[derive(Clone, Debug, Default)]
pub struct Portfolio {
    credit: BTreeMap<String, Credit>,
    segments: u64,
}

/// A mechanism's reward for one segment from its tally (experiments it shaped, of which kept).
pub fn reward(tally: Option<&(u64, u64)>) -> f64 {
    match tally {
        Some(&(shaped, kept)) if shaped > 0 => kept as f64 / shaped as f64,
        _ => 0.0,
    }
}

impl Portfolio {
    /// Credits each active arm (`Some(reward)`; `None`: it was off) and returns the names to
    /// run next.
    pub fn decide(&mut self, arms: &[(String, Option<f64>)]) -> Vec<String> {
        self.segments += 1;
        for (name, reward) in arms {
            if let Some(r) = reward {
                let c = self.credit.entry(name.clone()).or_default();
                c.segments += 1;
                c.reward += r;
            }
        }
        let k = arms.len().div_ceil(2);
        let total = self.segments.max(1) as f64;
        let mut scored: Vec<(f64, u64, usize, &String)> = arms
            .iter()
            .enumerate()
            .map(|(i, (name, _))| {
                let c = self.credit.get(name).copied().unwrap_or_default();
                let score = if c.segments == 0 {
                    f64::INFINITY
                } else {
                    c.reward / c.segments as f64
                        + EXPLORATION * (2.0 * total.ln() / c.segments as f64).sqrt()
                };
                (score, c.segments, i, name)
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        scored
            .into_iter()
            .take(k)
            .map(|(.., n)| n.clone())
            .collect()
    }

    /// A mechanism's record, for messages.
    pub fn describe(&self, name: &str) -> String {
        match self.credit.get(name) {
            Some(c) if c.segments > 0 => format!(
                "mean reward {:.3} over {} segment(s)",
                c.reward / c.segments as f64,
                c.segments
            ),
            _ => "not credited yet".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credit_moves_the_portfolio_to_the_mechanism_that_pays() {
        let names = ["tabu", "bandit", "explore", "plateau"];
        let mut p = Portfolio::default();
        let mut active: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut explore_on = 0;
        for _ in 0..30 {
            // Half of what `explore` shapes is kept; a tenth of what the others shape.
            let arms: Vec<(String, Option<f64>)> = names
                .iter()
                .map(|n| {
                    let on = active.iter().any(|a| a == n);
                    let r = if *n == "explore" { 0.5 } else { 0.1 };
                    (n.to_string(), on.then_some(r))
                })
                .collect();
            active = p.decide(&arms);
            assert_eq!(active.len(), 2);
            if active.iter().any(|n| n == "explore") {
                explore_on += 1;
            }
        }
        assert!(
            explore_on >= 25,
            "explore chosen in {explore_on} of 30 segments"
        );
        assert!(p.describe("explore").contains("mean reward"));
        assert!(p.describe("nothing").contains("not credited"));
    }

    #[test]
    fn the_reward_is_the_keep_rate_of_what_it_shaped() {
        assert_eq!(reward(Some(&(4, 1))), 0.25);
        assert_eq!(reward(Some(&(0, 0))), 0.0);
        assert_eq!(
            reward(None),
            0.0,
            "an active mechanism that shaped nothing earns 0"
        );
    }
}
