//! Offline Level 2: a portfolio controller that turns the built-in mechanisms on and off by
//! credit assignment, with no model involved.
//!
//! At the end of every segment, the segment's reward (the fraction of its experiments that
//! were kept) is credited to each mechanism that was active during it. The next segment runs
//! the half of the mechanisms (rounded up) with the highest UCB1 score (bonus weighted by
//! [`EXPLORATION`]) over their credited
//! segments: a mechanism never yet credited comes first, then the highest upper bound, ties to
//! the one credited less often, then to the configured order. Each switch is recorded as a
//! call of `portfolio` and as an event.

use std::collections::BTreeMap;

use crate::store::{ExperimentRecord, Status};

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

/// The reward of the segment that just ended: the fraction of its experiments kept.
pub fn segment_reward(history: &[ExperimentRecord], segment: u64) -> f64 {
    let recent: Vec<&ExperimentRecord> = history
        .iter()
        .rev()
        .take(segment as usize)
        .filter(|e| e.n > 0)
        .collect();
    if recent.is_empty() {
        return 0.0;
    }
    recent.iter().filter(|e| e.status() == Status::Keep).count() as f64 / recent.len() as f64
}

impl Portfolio {
    /// Credits the active arms with `reward` and returns the names to run next.
    pub fn decide(&mut self, arms: &[(String, bool)], reward: f64) -> Vec<String> {
        self.segments += 1;
        for (name, active) in arms {
            if *active {
                let c = self.credit.entry(name.clone()).or_default();
                c.segments += 1;
                c.reward += reward;
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
        let mut active: Vec<(String, bool)> = names.iter().map(|n| (n.to_string(), true)).collect();
        let mut explore_on = 0;
        for _ in 0..30 {
            // Segments with `explore` on keep half their experiments; others keep none.
            let on = active.iter().any(|(n, a)| n == "explore" && *a);
            let reward = if on { 0.5 } else { 0.0 };
            let next = p.decide(&active, reward);
            assert_eq!(next.len(), 2);
            for (n, a) in active.iter_mut() {
                *a = next.contains(n);
            }
            if next.iter().any(|n| n == "explore") {
                explore_on += 1;
            }
        }
        assert!(
            explore_on >= 25,
            "explore chosen in {explore_on} of 30 segments"
        );
        assert!(p.describe("explore").contains("mean reward"));
    }

    #[test]
    fn the_reward_is_the_segment_keep_rate() {
        let rec = |n, s| ExperimentRecord {
            n,
            status: Some(s),
            ..Default::default()
        };
        let h = vec![
            rec(0, Status::Baseline),
            rec(1, Status::Keep),
            rec(2, Status::Discard),
            rec(3, Status::Keep),
            rec(4, Status::Crash),
        ];
        assert_eq!(segment_reward(&h, 4), 0.5);
        assert_eq!(segment_reward(&h[..1], 4), 0.0);
    }
}
