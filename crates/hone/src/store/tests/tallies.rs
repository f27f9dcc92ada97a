//! A run's tallies (SQLite schema 10, PostgreSQL 4) against the rows they count: after every
//! way an experiment is written, a transaction rolled back, one cut off by a connection that
//! went away uncommitted (a killed process), a row deleted or given a status no hone knows;
//! and a store of the schema before, filled once when it is brought up to date.

use super::*;

/// One status's tally: count, verification milliseconds, cost in nano-dollars, holdouts, paid.
type TallyRow = (String, i64, i64, i64, i64, i64);

fn tally_row(r: &dyn Cells) -> Result<TallyRow, StoreError> {
    Ok((
        r.req_text("status")?,
        r.req_int("experiments")?,
        r.req_int("verify_ms")?,
        r.req_int("cost_nanos")?,
        r.req_int("holdouts")?,
        r.req_int("paid")?,
    ))
}

/// The tallies as the database keeps them (a status's row left all zero is no tally), and
/// the same figures counted again from the rows.
fn stored_and_recounted(s: &Store, run_id: i64) -> (Vec<TallyRow>, Vec<TallyRow>) {
    let stored = s
        .query(
            "SELECT status, experiments, verify_ms, cost_nanos, holdouts, paid FROM run_tallies
             WHERE run_id = ?1 AND NOT (experiments = 0 AND verify_ms = 0 AND cost_nanos = 0
                                        AND holdouts = 0 AND paid = 0)
             ORDER BY status",
            &[Val::Int(Some(run_id))],
            tally_row,
        )
        .unwrap();
    let nanos = if s.is_shared() {
        "hone_store.cost_nanos(cost_usd)".to_string()
    } else {
        schema::expand("NANOS(cost_usd)")
    };
    let recounted = s
        .query(
            &format!(
                "SELECT status, CAST(COUNT(*) AS BIGINT) AS experiments,
                        CAST(SUM(verify_ms) AS BIGINT) AS verify_ms,
                        CAST(SUM({nanos}) AS BIGINT) AS cost_nanos,
                        CAST(SUM(CASE WHEN holdout IS NULL THEN 0 ELSE 1 END) AS BIGINT) AS holdouts,
                        CAST(SUM(CASE WHEN cost_usd > 0 THEN 1 ELSE 0 END) AS BIGINT) AS paid
                 FROM experiments WHERE run_id = ?1 GROUP BY status ORDER BY status"
            ),
            &[Val::Int(Some(run_id))],
            tally_row,
        )
        .unwrap();
    (stored, recounted)
}

/// The tallies equal the rows recounted, and the totals read from them equal the totals of
/// the records read whole.
fn assert_agree(s: &Store, run_id: i64, when: &str) {
    let (stored, recounted) = stored_and_recounted(s, run_id);
    assert_eq!(stored, recounted, "tallies against rows, {when}");
    let exps = s.experiments(run_id).unwrap();
    assert_eq!(
        s.run_totals(run_id).unwrap(),
        RunTotals::of(&exps),
        "totals, {when}"
    );
    for status in Status::ALL {
        let rows = exps.iter().filter(|e| e.status == Some(*status)).count();
        assert_eq!(
            s.count_experiments(run_id, Some(*status)).unwrap(),
            rows as u64
        );
    }
    assert_eq!(
        s.count_experiments(run_id, None).unwrap(),
        exps.len() as u64
    );
}

/// Experiment `n` as a run writes it: running first, then finished with `status`.
fn exp(n: u64, status: Status) -> ExperimentRecord {
    let finished = status != Status::Running;
    ExperimentRecord {
        n,
        parent_commit: "abc".into(),
        status: Some(status),
        objective: finished.then_some(10.0 - n as f64 / 7.0),
        verify_ms: if finished { 900 + n * 37 } else { 0 },
        // Thirds of a cent and more: sums that floats would round differently by order.
        cost_usd: if finished { 0.1 * n as f64 / 3.0 } else { 0.0 },
        holdout: (finished && n % 3 == 0).then_some(n as f64),
        started_at: n as f64,
        ..Default::default()
    }
}

pub(super) fn tallies_agree_with_the_rows(b: &Backend) {
    let s = b.open();
    let run = new_run(&s, "t");
    let other = new_run(&s, "u");
    assert_agree(&s, run.id, "an empty run");
    let finals = [
        Status::Baseline,
        Status::Keep,
        Status::Discard,
        Status::Crash,
        Status::Pruned,
        Status::Timeout,
        Status::Discard,
        Status::Keep,
        Status::Rejected,
    ];
    for (n, status) in finals.iter().enumerate() {
        let n = n as u64;
        s.put_experiment(run.id, &exp(n, Status::Running)).unwrap();
        s.put_experiment(other.id, &exp(n, Status::Running))
            .unwrap();
        s.set_experiment_pid(run.id, n, 4242, Some(7)).unwrap();
        assert_agree(&s, run.id, &format!("{n} running"));
        s.in_transaction(|s| s.put_experiment(run.id, &exp(n, *status)))
            .unwrap();
        assert_agree(&s, run.id, &format!("{n} finished"));
    }
    // A record written again with another outcome, cost and holdout.
    let mut again = exp(3, Status::Keep);
    again.cost_usd = 1e-10;
    again.holdout = None;
    s.put_experiment(run.id, &again).unwrap();
    assert_agree(&s, run.id, "a record rewritten");
    failures_and_resumes(b, &s, run.id);
    assert_agree(&s, other.id, "the other run");
    let totals = s.run_totals(run.id).unwrap();
    assert_eq!(
        (totals.experiments, totals.counts["keep"]),
        (10, 4),
        "{totals:?}"
    );
    assert_eq!(b.read_only().run_totals(run.id).unwrap(), totals);
}

/// The part of [`tallies_agree_with_the_rows`] after the first nine experiments: writes that
/// are rolled back or cut off, a resume, a delete, a status no hone knows.
fn failures_and_resumes(b: &Backend, s: &Store, run_id: i64) {
    // Rolled back: nothing of it counts.
    s.begin().unwrap();
    s.put_experiment(run_id, &exp(20, Status::Keep)).unwrap();
    s.put_experiment(run_id, &exp(4, Status::Discard)).unwrap();
    s.rollback();
    assert_agree(s, run_id, "after a rollback");
    assert!(s.experiment(run_id, 20).unwrap().is_none());

    // A writer gone in the middle of its transaction (killed): its connection ends
    // uncommitted, and neither its rows nor their tallies are there.
    {
        let killed = b.open();
        killed.begin().unwrap();
        killed
            .put_experiment(run_id, &exp(21, Status::Running))
            .unwrap();
        killed
            .put_experiment(run_id, &exp(1, Status::Crash))
            .unwrap();
    }
    assert_agree(s, run_id, "after a writer died mid-transaction");
    assert_eq!(
        s.experiment(run_id, 1).unwrap().unwrap().status,
        Some(Status::Keep)
    );

    // Another connection's committed writes (a resumed run), a row deleted, a status no hone
    // knows (counted as running by both).
    let resumed = b.open();
    resumed
        .in_transaction(|s| {
            s.put_experiment(run_id, &exp(9, Status::Running))?;
            s.put_experiment(run_id, &exp(9, Status::Aborted))?;
            s.put_experiment(run_id, &exp(10, Status::Keep))
        })
        .unwrap();
    assert_agree(s, run_id, "after a resume");
    s.exec(
        "DELETE FROM experiments WHERE run_id = ?1 AND n = ?2",
        &[Val::Int(Some(run_id)), int(2)],
    )
    .unwrap();
    assert_agree(s, run_id, "after a delete");
    s.exec(
        "UPDATE experiments SET status = 'vanished' WHERE run_id = ?1 AND n = ?2",
        &[Val::Int(Some(run_id)), int(5)],
    )
    .unwrap();
    assert_agree(s, run_id, "with an unknown status");
}

/// Run 1 with experiments of every kind, written by SQL alone (the tables of schema 9 / 3).
const OLD_ROWS: &str = "
INSERT INTO runs (repo, tag, branch, base_commit, created_at, seed, agent, metric, direction, state, seals, spec_json)
    VALUES ('', 'old', 'hone/old', 'abc', 1.0, 3, 'knobs', 'm', 'minimize', 'stopped', '{}', '{}');
INSERT INTO experiments (run_id, n, parent_commit, status, objective, started_at, verify_ms, cost_usd, holdout)
    VALUES (1, 0, 'abc', 'baseline', 2.0, 0, 1200, 0.1, 1.5),
           (1, 1, 'abc', 'keep', 1.5, 1, 1300, 0.033333333333, NULL),
           (1, 2, 'abc', 'discard', 2.5, 2, 1400, 0.066666666667, 2.5),
           (1, 3, 'abc', 'crash', NULL, 3, 10, 0, NULL),
           (1, 4, 'abc', 'pruned', 3.0, 4, 700, 0.0000000015, NULL),
           (1, 5, 'abc', 'running', NULL, 5, 0, 0, NULL);";

/// Checks run 1 of [`OLD_ROWS`] after the store was brought up to date, then once more
/// after a write.
fn assert_backfilled(s: &Store) {
    assert_agree(s, 1, "filled by the migration");
    let totals = s.run_totals(1).unwrap();
    assert_eq!(
        (
            totals.experiments,
            totals.counts["running"],
            totals.verify_seconds
        ),
        (6, 1, 4.61)
    );
    assert!(totals.any_holdout && totals.any_cost);
    s.put_experiment(1, &exp(5, Status::Keep)).unwrap();
    assert_agree(s, 1, "a write after the migration");
}

/// A SQLite file of schema 9 (before tallies) gets them filled from its rows.
#[test]
fn sqlite_schema_9_gets_its_tallies_filled() {
    check_sqlite_of_schema(9, OLD_ROWS, assert_backfilled);
}

/// A PostgreSQL store of schema 3 (before tallies) gets them filled from its rows.
#[test]
fn postgres_schema_3_gets_its_tallies_filled() {
    check_postgres_of_schema(3, OLD_ROWS, assert_backfilled);
}
