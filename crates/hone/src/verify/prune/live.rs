//! A run's curve as it arrives. The verifier's output is the candidate's code, so it may
//! print any number of points; what hone does with them is bounded:
//!
//! - **Kept in memory**: the best value so far and the last point read, never the curve.
//! - **Stored** (one row each): the first [`STORED_IN_FULL`] (10,000) points as they come;
//!   after that the `i`-th point read (from 0) is stored, and the next one stored is
//!   `⌊i² / 10,000²⌋` points later (every 2nd from 14,143 points, every 100th at 100,000,
//!   every 10,000th at a million). However long it prints, a run stores fewer than
//!   [`MAX_STORED`] (22,000) points (about 20,800 for 100,000 points read), plus the last
//!   point read, written when the run ends, so a stored curve always ends where the run did.
//! - **Judged** (the pruner's rule run): only a point whose step is beyond the last judged
//!   step, and then only when it is stored (every point of a normal curve) or at least
//!   [`JUDGE_INTERVAL`] (10 ms) after the last judgement: fewer than 22,000 judgements plus
//!   100 a second, however fast the points come.

use std::time::Duration;

use crate::verify::Direction;

/// The first points of a run stored as they come, before the stored points thin out.
pub const STORED_IN_FULL: u64 = 10_000;

/// A bound on the points of one run stored while it runs (the last point read is stored
/// when it ends, beyond this): the thinning's sum converges below it.
pub const MAX_STORED: u64 = 22_000;

/// Beyond the stored points, a run is judged at most this often.
pub const JUDGE_INTERVAL: Duration = Duration::from_millis(10);

/// What to do with a point just read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    /// The run's best value so far, this point's included.
    pub best: f64,
    /// Whether to store it.
    pub store: bool,
    /// Whether to judge the run now.
    pub judge: bool,
}

/// A run's curve as it arrives: its best value so far, and which points to store and judge.
#[derive(Clone, Debug)]
pub struct LiveCurve {
    direction: Direction,
    best: Option<f64>,
    /// Points read so far.
    read: u64,
    /// The index (in points read) of the next point to store.
    next_stored: u64,
    /// The last point read, while it is not stored.
    unstored_last: Option<(f64, f64)>,
    /// The step and time of the last judgement.
    judged: Option<(f64, Duration)>,
}

impl LiveCurve {
    pub fn new(direction: Direction) -> LiveCurve {
        LiveCurve {
            direction,
            best: None,
            read: 0,
            next_stored: 0,
            unstored_last: None,
            judged: None,
        }
    }

    /// Takes a point read `elapsed` after the run started.
    pub fn push(&mut self, step: f64, value: f64, elapsed: Duration) -> Point {
        let best = match self.best {
            Some(b) if !self.direction.better(value, b) => b,
            _ => value,
        };
        self.best = Some(best);
        let i = self.read;
        self.read += 1;
        let store = i == self.next_stored;
        if store {
            self.next_stored = i.saturating_add(stride(i));
            self.unstored_last = None;
        } else {
            self.unstored_last = Some((step, value));
        }
        let judge = match self.judged {
            None => true,
            Some((s, at)) => step > s && (store || elapsed.saturating_sub(at) >= JUDGE_INTERVAL),
        };
        if judge {
            self.judged = Some((step, elapsed));
        }
        Point { best, store, judge }
    }

    /// The last point read, if it was not stored: to store when the run ends.
    pub fn unstored_last(&self) -> Option<(f64, f64)> {
        self.unstored_last
    }
}

/// How many points after the `i`-th read the next one is stored: 1 for the first
/// [`STORED_IN_FULL`], then `⌊i² / STORED_IN_FULL²⌋` (at least 1).
fn stride(i: u64) -> u64 {
    let full = u128::from(STORED_IN_FULL);
    let q = u128::from(i) * u128::from(i) / (full * full);
    u64::try_from(q).unwrap_or(u64::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::super::{PruneRule, Pruner, Reference, Warmup};
    use super::*;

    #[test]
    fn a_live_curve_keeps_its_best_value() {
        let t = Duration::ZERO;
        let mut c = LiveCurve::new(Direction::Minimize);
        assert_eq!(c.push(1.0, 3.0, t).best, 3.0);
        assert_eq!(c.push(2.0, 2.0, t).best, 2.0);
        assert_eq!(c.push(3.0, 2.5, t).best, 2.0);
        let mut c = LiveCurve::new(Direction::Maximize);
        c.push(1.0, 3.0, t);
        assert_eq!(c.push(2.0, 2.0, t).best, 3.0);
    }

    /// Feeds `points` (steps increasing) to a live curve, all at time 0: the stored curve,
    /// with the last point written at the end. Without time passing, exactly the stored
    /// points are judged.
    fn feed(points: impl Iterator<Item = (f64, f64)>) -> Vec<(f64, f64)> {
        let mut c = LiveCurve::new(Direction::Minimize);
        let mut stored = Vec::new();
        for (s, v) in points {
            let p = c.push(s, v, Duration::ZERO);
            assert_eq!(p.judge, p.store, "{s}");
            if p.store {
                stored.push((s, v));
            }
        }
        stored.extend(c.unstored_last());
        stored
    }

    #[test]
    fn a_hundred_thousand_points_store_a_bounded_curve_that_ends_where_the_run_did() {
        let n = 100_000;
        let stored = feed((0..n).map(|i| (i as f64, 1.0 / (1.0 + i as f64))));
        assert!(stored.len() as u64 <= MAX_STORED + 1, "{}", stored.len());
        assert!(stored.len() < 21_000, "{}", stored.len());
        // The first points are all there, then they thin out; the last one ends the curve.
        assert_eq!(stored[..STORED_IN_FULL as usize].len(), 10_000);
        assert_eq!(stored[9_999], (9_999.0, 1.0 / 10_000.0));
        assert_eq!(stored.last(), Some(&((n - 1) as f64, 1.0 / n as f64)));
        assert!(stored.windows(2).all(|w| w[0].0 < w[1].0));
        // However many points are read, the stored ones stay under the bound.
        let (mut i, mut count) = (0u64, 0u64);
        while i < u64::MAX / 2 {
            i = i.saturating_add(stride(i));
            count += 1;
        }
        assert!(count <= MAX_STORED, "{count}");
    }

    #[test]
    fn beyond_the_stored_points_a_run_is_judged_when_time_passed_and_its_step_moved_on() {
        let mut c = LiveCurve::new(Direction::Minimize);
        let t = |ms: u64| Duration::from_millis(ms);
        for i in 0..STORED_IN_FULL + 20_000 {
            c.push(i as f64, 1.0, t(0));
        }
        // Past 30,000 points every 9th is stored: after a stored one, the next is not, and is
        // judged only once 10 ms passed since the last judgement.
        let mut s = (STORED_IN_FULL + 20_000) as f64;
        while !c.push(s, 1.0, t(0)).store {
            s += 1.0;
        }
        let p = c.push(s + 1.0, 1.0, t(9));
        assert!(!p.store && !p.judge, "{p:?}");
        assert!(c.push(s + 2.0, 1.0, t(10)).judge);
        // The same step again, however late, is not judged again; nor is an earlier one.
        assert!(!c.push(s + 2.0, 0.5, t(1_000)).judge);
        assert!(!c.push(s - 5.0, 0.5, t(2_000)).judge);
        assert!(c.push(s + 3.0, 0.5, t(2_000)).judge);
        assert_eq!(c.unstored_last(), Some((s + 3.0, 0.5)));
        // A stored point with the same step is not judged twice either.
        let mut c = LiveCurve::new(Direction::Minimize);
        assert!(c.push(1.0, 1.0, t(0)).judge);
        assert!(!c.push(1.0, 0.5, t(0)).judge);
    }

    #[test]
    fn the_pruner_decides_on_a_live_curve_as_on_every_point() {
        // References: 5 curves of 200 steps, their median 2 + 10/s; a candidate at 2.1 + 5/s is
        // ahead until step 50, behind from step 51.
        let refs: Vec<Reference> = (0..5)
            .map(|r| Reference {
                curve: (1..=200)
                    .map(|s| (s as f64, 10.0 / s as f64 + r as f64))
                    .collect(),
                objective: None,
            })
            .collect();
        let p = Pruner {
            rule: PruneRule::Percentile(50.0),
            direction: Direction::Minimize,
            warmup: Warmup::Steps(10.0),
            min_runs: 3,
        };
        let cand = |s: f64| 2.1 + 5.0 / s;
        let every = (1..=200)
            .map(|s| s as f64)
            .find(|s| p.judge(&refs, cand(*s), *s, Duration::ZERO).is_some());
        assert_eq!(every, Some(51.0));
        let mut live = LiveCurve::new(Direction::Minimize);
        let on_live = (1..=200).map(|s| s as f64).find(|s| {
            let pt = live.push(*s, cand(*s), Duration::ZERO);
            assert!(
                pt.store && pt.judge,
                "a normal curve is stored and judged whole"
            );
            p.judge(&refs, pt.best, *s, Duration::ZERO).is_some()
        });
        assert_eq!(on_live, every);
        // Against thinned references (100,000 points each), the same decisions.
        let long = |r: f64| feed((1..=100_000).map(move |s| (s as f64, 10.0 / s as f64 + r)));
        let thinned: Vec<Reference> = (0..5)
            .map(|r| Reference {
                curve: long(r as f64),
                objective: None,
            })
            .collect();
        for (s, v) in [
            (50_000.0, 2.1),
            (50_000.0, 1.9),
            (99_999.0, 2.1),
            (99_999.0, 1.9),
        ] {
            let full: Vec<Reference> = (0..5)
                .map(|r| Reference {
                    curve: vec![(1.0, 10.0 + r as f64), (s, 10.0 / s + r as f64), (1e5, 0.0)],
                    objective: None,
                })
                .collect();
            assert_eq!(
                p.judge(&thinned, v, s, Duration::ZERO).is_some(),
                p.judge(&full, v, s, Duration::ZERO).is_some(),
                "{s} {v}"
            );
        }
        assert!(p.judge(&thinned, 2.1, 50_000.0, Duration::ZERO).is_some());
        assert!(p.judge(&thinned, 1.9, 50_000.0, Duration::ZERO).is_none());
    }
}
