//! The summary reads of the store ([`super::super::summary`]) against the records they stand
//! for: totals, baseline, best, rows in flight, streamed rows, points and their texts.

use super::*;

/// A run's records with every status, costs, holdouts and one experiment in flight.
fn mixed_run(s: &Store, run_id: i64) -> Vec<ExperimentRecord> {
    let exps: Vec<ExperimentRecord> = (0..40u64)
        .map(|n| {
            let status = match n {
                0 => Status::Baseline,
                39 => Status::Running,
                n if n % 10 == 3 => Status::Crash,
                n if n % 7 == 0 => Status::Keep,
                _ => Status::Discard,
            };
            ExperimentRecord {
                n,
                parent_commit: "abc".into(),
                status: Some(status),
                objective: matches!(status, Status::Baseline | Status::Keep | Status::Discard)
                    .then_some(100.0 - (n as f64 * 7.0) % 13.0),
                description: format!("change {n}"),
                reason: format!("why {n}"),
                verify_ms: 1000 + n * 37,
                cost_usd: 0.1 * n as f64 / 3.0,
                holdout: (n % 9 == 0).then_some(n as f64),
                config: Some(serde_json::json!({ "n": n })),
                started_at: n as f64,
                ..Default::default()
            }
        })
        .collect();
    s.in_transaction(|s| {
        for e in &exps {
            s.put_experiment(run_id, e)?;
        }
        Ok(())
    })
    .unwrap();
    exps
}

/// Records compared as the JSON they serialize to (they have no `PartialEq`).
fn json<T: serde::Serialize + ?Sized>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap()
}

pub(super) fn summaries_read_what_the_records_say(b: &Backend) {
    let s = b.open();
    let run = new_run(&s, "t");
    let other = new_run(&s, "u");
    let exps = mixed_run(&s, run.id);
    mixed_run(&s, other.id);
    let ro = b.read_only();
    let exps_read = ro.experiments(run.id).unwrap();

    let totals = ro.run_totals(run.id).unwrap();
    assert_eq!(totals, RunTotals::of(&exps_read));
    assert_eq!(totals.experiments, 40);
    assert_eq!(totals.counts["running"], 1);
    assert!(totals.any_holdout && totals.any_cost);
    assert_eq!(ro.run_columns(run.id).unwrap(), (true, true));
    let empty = new_run(&s, "empty");
    assert_eq!(ro.run_totals(empty.id).unwrap(), RunTotals::of(&[]));
    assert_eq!(ro.run_columns(empty.id).unwrap(), (false, false));

    let baseline = ro.first_with_status(run.id, Status::Baseline).unwrap();
    assert_eq!(baseline.map(|e| e.n), Some(0));
    let best = ro.best_of_run(run.id).unwrap().unwrap();
    assert_eq!(json(&best), json(best_experiment(&exps_read).unwrap()));
    assert_eq!(best.n, 35);
    assert_eq!(best.config, exps[35].config);
    let running = ro.experiments_with_status(run.id, Status::Running).unwrap();
    assert_eq!(running.iter().map(|e| e.n).collect::<Vec<_>>(), vec![39]);

    let mut streamed = Vec::new();
    ro.for_each_experiment(run.id, &mut |e| {
        streamed.push(e);
        Ok(std::ops::ControlFlow::Continue(()))
    })
    .unwrap();
    assert_eq!(json(&streamed), json(&exps_read));

    let mut points = ro.experiment_points(run.id).unwrap();
    assert_eq!(points.len(), 40);
    assert!(points.iter().all(|p| p.description.is_empty()));
    assert_eq!(RunTotals::of(&points), totals);
    for (p, e) in points.iter().zip(&exps_read) {
        assert_eq!(
            (p.n, p.status, p.objective, p.holdout),
            (e.n, e.status, e.objective, e.holdout)
        );
    }
    ro.fill_texts(run.id, &mut points, &[3, 35]).unwrap();
    assert_eq!(points[3].reason, "why 3");
    assert_eq!(points[35].description, "change 35");
    assert!(points[4].description.is_empty());

    // A keep decided after a newer number (in a parallel run, a candidate made on an older
    // best kept on top of a newer one) is the best, in the store as in the records.
    let mut late = exps[14].clone();
    late.finished_at = Some(1.0e9);
    s.put_experiment(run.id, &late).unwrap();
    let best = ro.best_of_run(run.id).unwrap().unwrap();
    assert_eq!(best.n, 14);
    let exps_read = ro.experiments(run.id).unwrap();
    assert_eq!(best_experiment(&exps_read).map(|e| e.n), Some(14));
}

/// `for_each_experiment` reads by key, a page per statement: a reader blocked between rows
/// (`hone log` into a pager) holds no snapshot, so another connection's write and a full
/// checkpoint go through at once and a row written meanwhile is streamed too; and it stops
/// where the caller says.
pub(super) fn streaming_holds_no_snapshot_and_stops(b: &Backend) {
    use std::ops::ControlFlow::{Break, Continue};
    let s = b.open();
    let run = new_run(&s, "t");
    let rows = STREAM_PAGE + 10;
    s.in_transaction(|s| {
        for n in 0..rows {
            s.put_experiment(
                run.id,
                &ExperimentRecord {
                    n,
                    parent_commit: "abc".into(),
                    status: Some(Status::Discard),
                    ..Default::default()
                },
            )?;
        }
        Ok(())
    })
    .unwrap();
    let ro = b.read_only();
    let mut seen = Vec::new();
    ro.for_each_experiment(run.id, &mut |e| {
        if e.n == 0 {
            // The writer, while the reader waits on its first row.
            let late = ExperimentRecord {
                n: rows,
                parent_commit: "abc".into(),
                status: Some(Status::Keep),
                ..Default::default()
            };
            s.put_experiment(run.id, &late)?;
            if !s.is_shared() {
                let busy = s.query("PRAGMA wal_checkpoint(TRUNCATE)", &[], |r| {
                    r.req_int("busy")
                })?;
                assert_eq!(busy, vec![0], "a reader held the WAL");
            }
        }
        seen.push(e.n);
        Ok(Continue(()))
    })
    .unwrap();
    assert_eq!(seen, (0..=rows).collect::<Vec<_>>(), "the late row is read");
    let mut calls = 0;
    ro.for_each_experiment(run.id, &mut |e| {
        calls += 1;
        Ok(if e.n == 3 { Break(()) } else { Continue(()) })
    })
    .unwrap();
    assert_eq!(calls, 4, "stops where told");
}

/// `configurations` reads what the knobs' crash narrowings need: on a run where crashes lie
/// beyond a knob's finished values (with timeouts, experiments in flight, one without a
/// configuration and another run beside it), the narrowings it gives, over the whole run and
/// up to an experiment, are those of the whole records.
pub(super) fn configurations_give_the_narrowings_of_the_records(b: &Backend) {
    use crate::propose::optimizer::{narrowed_ranges, narrowings};
    let s = b.open();
    let run = new_run(&s, "t");
    let other = new_run(&s, "u");
    let exps: Vec<ExperimentRecord> = (0..60u64)
        .map(|n| {
            let lr = (n * 37 % 100) as f64 / 100.0;
            let status = match n {
                0 => Status::Baseline,
                _ if n % 11 == 5 => Status::Running,
                _ if lr > 0.7 && n % 3 == 0 => Status::Timeout,
                _ if lr > 0.7 => Status::Crash,
                _ if n % 5 == 0 => Status::Keep,
                _ => Status::Discard,
            };
            ExperimentRecord {
                n,
                parent_commit: "abc".into(),
                status: Some(status),
                description: format!("change {n}"),
                metrics: [("m".to_string(), n as f64)].into_iter().collect(),
                config: (n != 7).then(|| serde_json::json!({ "LR": lr, "DEPTH": n % 4 + 1 })),
                started_at: n as f64,
                ..Default::default()
            }
        })
        .collect();
    s.in_transaction(|s| {
        for e in &exps {
            s.put_experiment(run.id, e)?;
            s.put_experiment(
                other.id,
                &ExperimentRecord {
                    config: None,
                    ..e.clone()
                },
            )?;
        }
        Ok(())
    })
    .unwrap();
    let ro = b.read_only();
    let whole = ro.experiments(run.id).unwrap();
    let read = ro.configurations(run.id, None).unwrap();
    assert_eq!(read.len(), 60);
    for (r, e) in read.iter().zip(&whole) {
        assert_eq!((r.n, r.status, &r.config), (e.n, e.status, &e.config));
        assert!(r.description.is_empty() && r.metrics.is_empty());
    }
    let events = narrowings(&read);
    assert!(!events.is_empty(), "the run narrows LR");
    assert_eq!(events, narrowings(&whole));
    for upto in [20, 45, 59] {
        let head = ro.configurations(run.id, Some(upto)).unwrap();
        assert_eq!(head.last().map(|e| e.n), Some(upto));
        let prefix: Vec<ExperimentRecord> = whole.iter().filter(|e| e.n <= upto).cloned().collect();
        assert_eq!(narrowed_ranges(&head), narrowed_ranges(&prefix));
        assert_eq!(narrowings(&head), narrowings(&prefix));
    }
    assert!(!narrowed_ranges(&read).is_empty());
    // The other run's rows (without configurations) are not this run's.
    assert!(ro
        .configurations(other.id, None)
        .unwrap()
        .iter()
        .all(|e| e.config.is_none()));
}

/// `read_consistent` reads one moment of the store: a write by another connection between two
/// of its statements is not seen by the second (it is outside), and it works on a store
/// opened read-only.
pub(super) fn a_consistent_read_sees_one_moment(b: &Backend) {
    let s = b.open();
    let run = new_run(&s, "t");
    let row = |n: u64| ExperimentRecord {
        n,
        parent_commit: "abc".into(),
        status: Some(Status::Discard),
        objective: Some(n as f64),
        ..Default::default()
    };
    s.put_experiment(run.id, &row(0)).unwrap();
    let ro = b.read_only();
    let (before, after) = ro
        .read_consistent(|r| {
            let before = r.run_totals(run.id)?.experiments;
            s.put_experiment(run.id, &row(1))?;
            let points = r.experiment_points(run.id)?.len() as u64;
            Ok::<_, StoreError>((before, points))
        })
        .unwrap();
    assert_eq!((before, after), (1, 1), "the write in between is not seen");
    assert_eq!(ro.run_totals(run.id).unwrap().experiments, 2);
    // Outside it, the second statement sees the write.
    let before = ro.run_totals(run.id).unwrap().experiments;
    s.put_experiment(run.id, &row(2)).unwrap();
    assert_eq!(
        (before, ro.experiment_points(run.id).unwrap().len()),
        (2, 3)
    );
    // A write inside it fails (it would otherwise be rolled back unseen at the end), and the
    // connection writes again afterwards.
    let w = b.open();
    let inside = w.read_consistent(|r| r.put_experiment(run.id, &row(3)));
    assert!(
        inside.is_err(),
        "a write inside a consistent read must fail"
    );
    assert_eq!(w.run_totals(run.id).unwrap().experiments, 3);
    w.put_experiment(run.id, &row(3)).unwrap();
    assert_eq!(w.run_totals(run.id).unwrap().experiments, 4);
}
