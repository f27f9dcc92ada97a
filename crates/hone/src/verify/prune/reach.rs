//! `reach`: a run is hopeless when, at a step, it is behind every place a finished run that
//! ends level with the best objective has been seen to be. Each finished run's curve is
//! shifted to end at the best objective (its value at the step, less its own objective, plus
//! the best); a candidate worse than those shifted values (the `P`-th most lenient of them)
//! would have to fall further from there than any finished run did to be kept.

use super::{quantile, Direction};

/// The threshold at a step from each reference's (value there, objective): the `p`-th
/// percentile, from the strictest, of `value - objective + best objective`. `None` when no
/// reference has a finite objective. Worked in "lower is better" (negated when maximizing).
pub(super) fn threshold(direction: Direction, at: &[(f64, Option<f64>)], p: f64) -> Option<f64> {
    let sign = match direction {
        Direction::Minimize => 1.0,
        Direction::Maximize => -1.0,
    };
    let pairs: Vec<(f64, f64)> = at
        .iter()
        .filter_map(|(v, o)| o.filter(|o| o.is_finite()).map(|o| (v * sign, o * sign)))
        .collect();
    let best = pairs.iter().map(|p| p.1).reduce(f64::min)?;
    let mut shifted: Vec<f64> = pairs.iter().map(|(v, o)| v - o + best).collect();
    shifted.sort_by(f64::total_cmp);
    Some(quantile(&shifted, p / 100.0) * sign)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::{Curve, PruneRule, Pruner, Reference, Warmup};
    use super::*;

    fn refs(runs: &[(&[f64], f64)]) -> Vec<Reference> {
        runs.iter()
            .map(|(c, o)| Reference {
                curve: c
                    .iter()
                    .enumerate()
                    .map(|(i, v)| ((i as f64 + 1.0) * 10.0, *v))
                    .collect::<Curve>(),
                objective: Some(*o),
            })
            .collect()
    }

    fn reach(p: f64, direction: Direction) -> Pruner {
        Pruner {
            rule: PruneRule::Reach(p),
            direction,
            warmup: Warmup::Steps(20.0),
            min_runs: 3,
        }
    }

    #[test]
    fn a_run_behind_every_shifted_curve_is_pruned_and_one_ahead_of_any_is_not() {
        // Minimize. The best objective is 1.0. At step 20 the runs fell from there by 1.0,
        // 2.0 and 0.5 to their ends: shifted to end at 1.0 they were at 2.0, 3.0 and 1.5.
        let r = refs(&[
            (&[4.0, 2.0, 1.5, 1.0], 1.0),
            (&[6.0, 4.0, 3.0, 2.0], 2.0),
            (&[3.0, 2.5, 2.2, 2.0], 2.0),
        ]);
        let t = Duration::ZERO;
        let p = reach(100.0, Direction::Minimize);
        let pruned = p.judge(&r, 3.1, 20.0, t).unwrap();
        assert_eq!((pruned.threshold, pruned.runs), (3.0, 3));
        assert_eq!(pruned.rule, PruneRule::Reach(100.0));
        // Behind the median and the best runs, but level with a curve that fell as far as
        // it must: not hopeless.
        assert_eq!(p.judge(&r, 3.0, 20.0, t), None);
        assert_eq!(p.judge(&r, 2.9, 20.0, t), None);
        // reach:50 compares with the median of the shifted values (2.0).
        let half = reach(50.0, Direction::Minimize);
        assert_eq!(half.judge(&r, 2.1, 20.0, t).unwrap().threshold, 2.0);
        assert_eq!(half.judge(&r, 1.9, 20.0, t), None);
        // The warm-up and min_runs as for the other rules.
        assert_eq!(p.judge(&r, 100.0, 10.0, t), None);
        assert_eq!(Pruner { min_runs: 4, ..p }.judge(&r, 100.0, 20.0, t), None);
        // No reference with an objective: nothing to compare with.
        let bare: Vec<Reference> = r
            .iter()
            .map(|x| Reference {
                objective: None,
                ..x.clone()
            })
            .collect();
        assert_eq!(p.judge(&bare, 100.0, 20.0, t), None);
    }

    #[test]
    fn maximizing_shifts_the_curves_the_other_way() {
        // The same runs negated: the best objective is -1.0, the most lenient shifted value
        // -3.0, and lower is worse.
        let r = refs(&[
            (&[-4.0, -2.0, -1.5, -1.0], -1.0),
            (&[-6.0, -4.0, -3.0, -2.0], -2.0),
            (&[-3.0, -2.5, -2.2, -2.0], -2.0),
        ]);
        let p = reach(100.0, Direction::Maximize);
        let t = Duration::ZERO;
        assert_eq!(p.judge(&r, -3.1, 20.0, t).unwrap().threshold, -3.0);
        assert_eq!(p.judge(&r, -2.9, 20.0, t), None);
        assert_eq!(
            threshold(Direction::Maximize, &[(-2.0, Some(-1.0))], 100.0),
            Some(-2.0)
        );
    }
}
