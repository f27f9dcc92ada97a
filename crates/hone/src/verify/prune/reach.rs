//! `reach`: a run is hopeless when, at a step, it is behind every place a finished run that
//! ends level with the best finished curve has been seen to be. Each finished curve is
//! shifted by its own last value to end at the best last value among them (its value at the
//! step, less its last value, plus the best last value); a candidate worse than those
//! shifted values (the `P`-th most lenient of them) would have to improve further after the
//! step than any finished run did to be kept. All in the curve's own units: the progress
//! value need not be the objective (a training loss beside a validation metric), and the
//! objective is not read. `reach~A` picks the `k`-th most lenient of the `n` shifted values,
//! `k = max(1, floor(A (n + 1)))`: a bar that tightens as the finished curves accumulate.

use super::{quantile, Direction, Reference};

/// Which of the shifted values (see [`threshold`]) is the bar.
#[derive(Clone, Copy, Debug)]
pub(super) enum Bar {
    /// `reach:P`: the `P`-th percentile, from the strictest.
    Percentile(f64),
    /// `reach~A`: the `k`-th most lenient of the `n`, `k = max(1, floor(A (n + 1)))` (never
    /// past the strictest).
    Tightened(f64),
}

/// The threshold at a step from each reference's (value there, curve), and how many
/// references it was worked from: the `bar` among the values `value - last value + best last
/// value` (the best in `direction`). A reference's last point is where it ended: the store
/// keeps the last point of a thinned curve. `None` when no reference has a finite value and
/// last value. Worked in "lower is better" (negated when maximizing).
pub(super) fn threshold(
    direction: Direction,
    at: &[(f64, &Reference)],
    bar: Bar,
) -> Option<(f64, usize)> {
    let (shifted, sign) = shifted(direction, at)?;
    let n = shifted.len();
    let value = match bar {
        Bar::Percentile(p) => quantile(&shifted, p / 100.0),
        Bar::Tightened(a) => {
            // `a (n + 1)` is finite and at most `n + 1`: the cast cannot wrap.
            let k = ((a * (n as f64 + 1.0)).floor() as usize).clamp(1, n);
            shifted[n - k]
        }
    };
    Some((value * sign, n))
}

/// Each reference's value at the step shifted to end at the best last value, sorted from
/// the strictest, in "lower is better" units, and the sign that converts back. `None` when
/// no reference has a finite value and last value.
fn shifted(direction: Direction, at: &[(f64, &Reference)]) -> Option<(Vec<f64>, f64)> {
    let sign = match direction {
        Direction::Minimize => 1.0,
        Direction::Maximize => -1.0,
    };
    let pairs: Vec<(f64, f64)> = at
        .iter()
        .filter_map(|(v, r)| r.curve.last().map(|last| (v * sign, last.1 * sign)))
        .filter(|(v, last)| v.is_finite() && last.is_finite())
        .collect();
    let best = pairs.iter().map(|p| p.1).reduce(f64::min)?;
    let mut shifted: Vec<f64> = pairs.iter().map(|(v, last)| v - last + best).collect();
    shifted.sort_by(f64::total_cmp);
    Some((shifted, sign))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::{Curve, PruneRule, Pruner, Warmup};
    use super::*;

    /// References from (curve, objective), the curve's points at steps 10, 20, ...
    fn refs(runs: &[(&[f64], Option<f64>)]) -> Vec<Reference> {
        runs.iter()
            .map(|(c, o)| Reference {
                curve: c
                    .iter()
                    .enumerate()
                    .map(|(i, v)| ((i as f64 + 1.0) * 10.0, *v))
                    .collect::<Curve>(),
                objective: *o,
            })
            .collect()
    }

    /// Three runs whose objective is `scale` times their curve's end (`None`: no objective).
    fn three(scale: Option<f64>) -> Vec<Reference> {
        let curves: [&[f64]; 3] = [
            &[4.0, 2.0, 1.5, 1.0],
            &[6.0, 4.0, 3.0, 2.0],
            &[3.0, 2.5, 2.2, 2.0],
        ];
        let runs: Vec<(&[f64], Option<f64>)> = curves
            .iter()
            .map(|c| (*c, scale.map(|k| k * c[c.len() - 1])))
            .collect();
        refs(&runs)
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
        // Minimize. The best last value is 1.0. At step 20 the runs fell from there by 1.0,
        // 2.0 and 0.5 to their ends: shifted to end at 1.0 they were at 2.0, 3.0 and 1.5.
        let r = three(Some(1.0));
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
    }

    #[test]
    fn the_objective_is_not_read_so_its_units_do_not_matter() {
        // The progress value is a loss and the objective another quantity (here 1000 times
        // the curve's end, or none at all): the same runs are pruned, at the same bar, as
        // when the objective is the curve's end.
        let t = Duration::ZERO;
        let p = reach(100.0, Direction::Minimize);
        let half = reach(50.0, Direction::Minimize);
        for scale in [Some(1.0), Some(1000.0), Some(-0.001), None] {
            let r = three(scale);
            let pruned = p.judge(&r, 3.1, 20.0, t).unwrap();
            assert_eq!((pruned.threshold, pruned.runs), (3.0, 3), "{scale:?}");
            assert_eq!(p.judge(&r, 2.9, 20.0, t), None, "{scale:?}");
            assert_eq!(half.judge(&r, 2.1, 20.0, t).unwrap().threshold, 2.0);
            assert_eq!(half.judge(&r, 1.9, 20.0, t), None, "{scale:?}");
        }
    }

    #[test]
    fn runs_counts_and_min_runs_gates_the_curves_actually_shifted() {
        // A fourth curve reaches step 20 but ends on a value that is not finite: it cannot
        // be shifted, so it is neither in the count nor in `min_runs`.
        let mut r = three(None);
        r.extend(refs(&[(&[5.0, 5.0, f64::NAN], None)]));
        let t = Duration::ZERO;
        let p = reach(100.0, Direction::Minimize);
        let pruned = p.judge(&r, 3.1, 20.0, t).unwrap();
        assert_eq!((pruned.threshold, pruned.runs), (3.0, 3));
        assert_eq!(Pruner { min_runs: 4, ..p }.judge(&r, 100.0, 20.0, t), None);
    }

    #[test]
    fn reach_tight_uses_the_most_lenient_curve_while_few_and_tightens_as_they_grow() {
        // Minimize, `n` curves all ending at 1; curve `i` is at `1 + i` at step 20, so the
        // shifted values there are 1, 2, ..., n.
        let curves = |n: usize| -> Vec<Reference> {
            (0..n)
                .map(|i| Reference {
                    curve: vec![(10.0, 9.0), (20.0, 1.0 + i as f64), (40.0, 1.0)],
                    objective: None,
                })
                .collect()
        };
        let t = Duration::ZERO;
        let p = Pruner {
            rule: PruneRule::ReachTight(0.1),
            ..reach(100.0, Direction::Minimize)
        };
        // 5 curves: k = max(1, floor(0.6)) = 1, the most lenient (5.0), as `reach`.
        let few = curves(5);
        let pruned = p.judge(&few, 5.1, 20.0, t).unwrap();
        assert_eq!((pruned.threshold, pruned.runs), (5.0, 5));
        assert_eq!(pruned.rule, PruneRule::ReachTight(0.1));
        assert_eq!(p.judge(&few, 4.9, 20.0, t), None, "ahead of one: kept on");
        assert_eq!(
            reach(100.0, Direction::Minimize)
                .judge(&few, 5.1, 20.0, t)
                .map(|p| p.threshold),
            Some(5.0)
        );
        // 39 curves: k = floor(4.0) = 4, the 4th most lenient (36.0): a run at 37 (behind
        // three curves) is stopped, where `reach` keeps it on.
        let many = curves(39);
        assert_eq!(p.judge(&many, 37.0, 20.0, t).unwrap().threshold, 36.0);
        assert_eq!(p.judge(&many, 36.0, 20.0, t), None, "a tie is not worse");
        assert_eq!(
            reach(100.0, Direction::Minimize).judge(&many, 37.0, 20.0, t),
            None
        );
        // Maximize: the same curves negated.
        let neg: Vec<Reference> = many
            .iter()
            .map(|r| Reference {
                curve: r.curve.iter().map(|(s, v)| (*s, -v)).collect(),
                objective: None,
            })
            .collect();
        let q = Pruner {
            direction: Direction::Maximize,
            ..p
        };
        assert_eq!(q.judge(&neg, -37.0, 20.0, t).unwrap().threshold, -36.0);
        assert_eq!(q.judge(&neg, -36.0, 20.0, t), None);
        // k never passes the strictest: A close to 1 with 3 curves (at 1, 2 and 3) gives the
        // strictest bar, the curve at 1.
        let strict = Pruner {
            rule: PruneRule::ReachTight(0.99),
            ..p
        };
        assert_eq!(
            strict.judge(&curves(3), 1.5, 20.0, t).unwrap().threshold,
            1.0
        );
        // The warm-up and min_runs as for `reach`.
        assert_eq!(p.judge(&many, 100.0, 10.0, t), None);
        assert_eq!(
            Pruner { min_runs: 6, ..p }.judge(&few, 100.0, 20.0, t),
            None
        );
    }

    #[test]
    fn maximizing_shifts_the_curves_the_other_way() {
        // The same runs negated: the best last value is -1.0, the most lenient shifted value
        // -3.0, and lower is worse.
        let r = refs(&[
            (&[-4.0, -2.0, -1.5, -1.0], Some(-1.0)),
            (&[-6.0, -4.0, -3.0, -2.0], Some(-2.0)),
            (&[-3.0, -2.5, -2.2, -2.0], Some(-2.0)),
        ]);
        let p = reach(100.0, Direction::Maximize);
        let t = Duration::ZERO;
        assert_eq!(p.judge(&r, -3.1, 20.0, t).unwrap().threshold, -3.0);
        assert_eq!(p.judge(&r, -2.9, 20.0, t), None);
        let one = refs(&[(&[-3.0, -2.0, -1.0], None)]);
        assert_eq!(
            threshold(
                Direction::Maximize,
                &[(-2.0, &one[0])],
                Bar::Percentile(100.0)
            ),
            Some((-2.0, 1))
        );
    }
}
