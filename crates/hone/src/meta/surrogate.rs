//! `surrogate`: a response-surface step for the knobs optimizer. Every
//! [`EVERY`]-th experiment (once enough have been measured) it fits a quadratic model of the
//! objective to the best measured configurations that share the incumbent's choices, in the
//! unit cube of the numeric knobs (log-scaled where the domain is), and offers the model's
//! minimum inside a trust region around the incumbent as a candidate.
//!
//! The model, its step and the choice swap are the knobs' response surface
//! (`crate::propose::knobs::surface`, which the sampler's own refinement step also uses). The
//! region's radius starts at [`RADIUS`] of each range, grows by half after a candidate of its
//! own was kept and halves after one was not (between [`MIN_RADIUS`] and [`MAX_RADIUS`]); when
//! it is so small that the step rounds back onto a measured configuration it starts again at
//! [`RADIUS`].
//!
//! A model only refines the incumbent's choices, so one offer in [`SWAP_EVERY`] is instead the
//! incumbent with one categorical or boolean knob changed ([`swap`]): a run whose numbers were
//! tuned under a poor early choice gets to try the others. Agents are not helped: it only acts
//! on knobs. A resumed run takes up the radius its last recorded result left.

use super::{Mechanism, Outcome, View};
use crate::propose::knobs::surface::{step as propose, swap};
pub use crate::propose::knobs::surface::{MAX_RADIUS, MIN_RADIUS, RADIUS, SWAP_EVERY};
use crate::propose::knobs::{config_of, Config};
use crate::spec::Direction;
use crate::store::{ExperimentRecord, Hook, MechanismCall};

/// It offers a candidate on one experiment in this many.
pub const EVERY: u64 = 2;
pub struct Surrogate {
    radius: f64,
    /// The configuration it offered for the experiment in flight.
    offered: Option<(u64, Config)>,
}

impl Default for Surrogate {
    fn default() -> Self {
        Surrogate {
            radius: RADIUS,
            offered: None,
        }
    }
}

impl Surrogate {
    fn measured(view: &View<'_>) -> Vec<(Config, f64)> {
        let sign = match view.direction {
            Direction::Minimize => 1.0,
            Direction::Maximize => -1.0,
        };
        view.history
            .iter()
            .filter_map(|e| Some((View::config_of(e)?, sign * e.objective?)))
            .collect()
    }
}

impl Mechanism for Surrogate {
    fn name(&self) -> &str {
        "surrogate"
    }

    fn candidates(&mut self, view: &View<'_>) -> Vec<Config> {
        if !view.knobs_proposer || view.n % EVERY != 0 {
            return Vec::new();
        }
        let incumbent = view
            .best()
            .and_then(View::config_of)
            .unwrap_or_else(|| config_of(view.knobs));
        let measured = Surrogate::measured(view);
        // One offer in SWAP_EVERY changes a choice instead (when one is left to try).
        if (view.n / EVERY) % SWAP_EVERY == 1 {
            let tried: Vec<Config> = view.history.iter().filter_map(View::config_of).collect();
            if let Some(c) = swap(view.knobs, &measured, |c| tried.contains(c), &incumbent) {
                return vec![c];
            }
        }
        let mut candidate = propose(view.knobs, &measured, &incumbent, self.radius);
        // A region so small that the step rounds back onto a measured configuration (integer
        // knobs) would keep the mechanism quiet for good: start it afresh instead.
        if let Some(c) = &candidate {
            if self.radius < RADIUS && measured.iter().any(|(m, _)| m == c) {
                self.radius = RADIUS;
                candidate = propose(view.knobs, &measured, &incumbent, self.radius);
            }
        }
        match candidate {
            Some(c) => {
                self.offered = Some((view.n, c.clone()));
                vec![c]
            }
            None => Vec::new(),
        }
    }

    fn on_result(&mut self, outcome: &Outcome<'_>) -> Option<String> {
        let (n, offered) = self.offered.take()?;
        if n != outcome.record.n || View::config_of(outcome.record).as_ref() != Some(&offered) {
            return None;
        }
        let before = self.radius;
        self.radius = if outcome.improved() {
            (before * 1.5).min(MAX_RADIUS)
        } else {
            (before * 0.5).max(MIN_RADIUS)
        };
        Some(format!("trust radius {before:.3} -> {:.3}", self.radius))
    }

    /// The radius its last recorded result left (recorded to three decimals). A restart of the
    /// region after that result is not recorded; the next candidates call repeats it.
    fn resume(&mut self, calls: &[MechanismCall], _history: &[ExperimentRecord]) {
        let last = calls
            .iter()
            .filter(|c| c.hook == Hook::OnResult)
            .filter_map(|c| c.detail.strip_prefix("trust radius "))
            .filter_map(|d| d.split(" -> ").nth(1)?.parse::<f64>().ok())
            .next_back();
        if let Some(r) = last {
            self.radius = r.clamp(MIN_RADIUS, MAX_RADIUS);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::testing::knobs;
    use crate::store::Effect;

    #[test]
    fn a_resumed_surrogate_takes_up_its_last_recorded_radius() {
        use crate::meta::testing::{config, exp, finish};
        use crate::store::Status;
        let k = knobs("W = 2  # hone: int 1..20\n");
        let mut history = vec![exp(0, Status::Baseline, Some(5.0), None)];
        let mut s = Surrogate::default();
        let mut calls = Vec::new();
        // Its own candidates, kept once and then discarded twice, as the live run records them.
        for (n, status) in [
            (1, Status::Keep),
            (2, Status::Discard),
            (3, Status::Discard),
        ] {
            let c = config(&[("W", n + 2)]);
            s.offered = Some((n as u64, c.clone()));
            let rec = exp(n as u64, status, Some(4.0), Some(&c));
            let detail = finish(&mut s, &mut history, rec, &k, &[]).unwrap_or_default();
            calls.push(MechanismCall {
                experiment: n as u64,
                mechanism: "surrogate".into(),
                hook: Hook::OnResult,
                effect: Effect::Changed,
                detail,
            });
        }
        assert_eq!(s.radius, RADIUS * 1.5 * 0.25);
        let mut resumed = Surrogate::default();
        resumed.resume(&calls, &history);
        // Recorded to three decimals.
        assert!(
            (resumed.radius - s.radius).abs() < 5e-4,
            "{}",
            resumed.radius
        );
        let mut fresh = Surrogate::default();
        fresh.resume(&[], &history);
        assert_eq!(fresh.radius, RADIUS);
    }

    #[test]
    fn a_region_too_small_for_an_integer_step_starts_again() {
        use crate::meta::testing::{exp, view};
        use crate::store::Status;
        let k = knobs("W = 2  # hone: int 1..20\nD = 9  # hone: int 1..20\n");
        let f = |w: i64, d: i64| ((w - 13) * (w - 13) + (d - 4) * (d - 4)) as f64;
        let mut history = Vec::new();
        let points = [
            (2, 9),
            (5, 6),
            (8, 12),
            (11, 3),
            (14, 8),
            (17, 5),
            (6, 15),
            (9, 7),
            (12, 10),
            (15, 2),
            (3, 4),
            (10, 5),
            (7, 9),
            (16, 11),
        ];
        for (n, (w, d)) in points.iter().enumerate() {
            let c = crate::meta::testing::config(&[("W", *w), ("D", *d)]);
            let status = if n == 0 {
                Status::Baseline
            } else {
                Status::Discard
            };
            history.push(exp(n as u64, status, Some(f(*w, *d)), Some(&c)));
        }
        let view = view(&history, &k, &[]);
        assert_eq!(view.n % EVERY, 0);
        let measured = Surrogate::measured(&view);
        let incumbent = crate::meta::testing::config(&[("W", 12), ("D", 10)]);
        let incumbent = measured
            .iter()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|m| m.0.clone())
            .unwrap_or(incumbent);
        // At the smallest radius the step rounds back onto the (measured) incumbent.
        let tiny = propose(&k, &measured, &incumbent, MIN_RADIUS);
        assert_eq!(tiny.as_ref(), Some(&incumbent));
        let mut s = Surrogate {
            radius: MIN_RADIUS,
            offered: None,
        };
        let offered = s.candidates(&view);
        assert_eq!(s.radius, RADIUS, "the region starts again");
        assert_eq!(offered.len(), 1);
        assert!(
            !measured.iter().any(|(m, _)| *m == offered[0]),
            "{:?} was measured",
            offered[0]
        );
    }
}
