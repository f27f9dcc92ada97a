//! Curves: points read back in step order, and the bounded, thinned reference curves.

use super::*;
use crate::store::curves::{Reference, REFERENCE_KEEPS, REFERENCE_POINTS, REFERENCE_RECENT};

pub(super) const CASES: &[(&str, Case)] = &[
    ("curves_and_their_references", curves_and_their_references),
    (
        "references_are_bounded_and_keep_each_curve_s_end",
        references_are_bounded_and_keep_each_curve_s_end,
    ),
];

/// Curve points read back in step order (a step written twice keeps its last value); only
/// experiments judged to the end (never a pruned, running or failed one) are references; the
/// status `pruned` reads back.
fn curves_and_their_references(b: &Backend) {
    let s = b.open();
    let run = new_run(&s, "c");
    let statuses = [
        Status::Baseline,
        Status::Discard,
        Status::Pruned,
        Status::Running,
        Status::Crash,
    ];
    for (n, st) in statuses.iter().enumerate() {
        let e = ExperimentRecord {
            n: n as u64,
            parent_commit: "abc".into(),
            status: Some(*st),
            objective: (n == 1).then_some(0.25),
            started_at: now(),
            ..Default::default()
        };
        s.put_experiment(run.id, &e).unwrap();
        for step in [20.0, 10.0, 20.0] {
            s.put_curve_point(run.id, n as u64, step, step + n as f64)
                .unwrap();
        }
    }
    s.put_curve_point(run.id, 1, 20.0, 0.5).unwrap();
    drop(s);
    let s = b.read_only();
    let all = s.curves(run.id).unwrap();
    assert_eq!(all.len(), 5);
    assert_eq!(all[&0], vec![(10.0, 10.0), (20.0, 20.0)]);
    assert_eq!(all[&1], vec![(10.0, 11.0), (20.0, 0.5)]);
    let refs = s.reference_curves(run.id, false).unwrap();
    let curves: Vec<_> = refs.iter().map(|r| r.curve.clone()).collect();
    assert_eq!(curves, vec![all[&0].clone(), all[&1].clone()]);
    let objectives: Vec<_> = refs.iter().map(|r| r.objective).collect();
    assert_eq!(objectives, vec![None, Some(0.25)]);
    assert_eq!(
        s.experiment(run.id, 2).unwrap().unwrap().status,
        Some(Status::Pruned)
    );
}

/// Only the baseline, the most recent keeps and the most recent judged experiments are
/// references, each curve thinned to at most `REFERENCE_POINTS` points that keep its first
/// and last; with `accepted_only` (a sealed evaluator), only the baseline and the keeps.
fn references_are_bounded_and_keep_each_curve_s_end(b: &Backend) {
    const { assert!(REFERENCE_KEEPS >= 2 && REFERENCE_POINTS < 2_500) };
    let s = b.open();
    let run = new_run(&s, "r");
    let total = REFERENCE_RECENT as u64 + 30;
    for n in 0..=total {
        let status = match n {
            0 => Status::Baseline,
            1 | 5 => Status::Keep,
            n if n == total => Status::Pruned,
            _ => Status::Discard,
        };
        let e = ExperimentRecord {
            n,
            parent_commit: "abc".into(),
            status: Some(status),
            objective: Some(n as f64),
            started_at: now(),
            ..Default::default()
        };
        s.put_experiment(run.id, &e).unwrap();
        if n != 1 {
            s.put_curve_point(run.id, n, 1.0, n as f64).unwrap();
        }
    }
    // #1 (a keep) printed 2,500 points, out of order.
    for i in (0..2_500u64).rev() {
        s.put_curve_point(run.id, 1, i as f64, 1e4 + i as f64)
            .unwrap();
    }
    assert_eq!(s.curve(run.id, 1).unwrap().len(), 2_500);
    let first = |r: &Reference| r.curve[0].1;
    let refs = s.reference_curves(run.id, false).unwrap();
    let ns: Vec<f64> = refs.iter().map(first).collect();
    let mut want = vec![0.0, 1e4, 5.0];
    want.extend((30..total).map(|n| n as f64));
    assert_eq!(ns, want, "the baseline, the keeps and the 200 most recent");
    let objectives: Vec<Option<f64>> = refs.iter().take(3).map(|r| r.objective).collect();
    assert_eq!(objectives, [Some(0.0), Some(1.0), Some(5.0)]);
    let long = &refs[1].curve;
    assert!(long.len() <= REFERENCE_POINTS, "{}", long.len());
    assert!(long.len() >= REFERENCE_POINTS / 2, "{}", long.len());
    assert_eq!(long.first(), Some(&(0.0, 1e4)));
    assert_eq!(
        long.last(),
        Some(&(2_499.0, 1e4 + 2_499.0)),
        "its last point kept"
    );
    let gap = long[1].0 - long[0].0;
    assert!(long[..long.len() - 1]
        .windows(2)
        .all(|w| w[1].0 - w[0].0 == gap));
    assert!(long.iter().all(|(st, v)| *v == 1e4 + st));
    // A sealed evaluator: only the curves it accepted.
    let accepted = s.reference_curves(run.id, true).unwrap();
    let ns: Vec<f64> = accepted.iter().map(first).collect();
    assert_eq!(ns, [0.0, 1e4, 5.0]);
    assert_eq!(accepted[1].curve, *long);
}
