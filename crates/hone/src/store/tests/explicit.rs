//! Transactions opened and closed by hand ([`Store::begin`], [`Store::commit`],
//! [`Store::rollback`]), as the engine records an experiment's finish: nothing is seen by
//! another connection before the outermost commit, and a rollback undoes all of it.

use super::*;

/// This file's cases, run by the suite on both backends.
pub(super) const CASES: &[(&str, Case)] = &[
    (
        "explicit_transactions_nest_and_commit_once",
        explicit_transactions_nest_and_commit_once,
    ),
    (
        "a_failed_best_effort_write_keeps_the_transaction",
        a_failed_best_effort_write_keeps_the_transaction,
    ),
    (
        "a_transaction_the_database_ended_does_not_commit",
        a_transaction_the_database_ended_does_not_commit,
    ),
];

fn exp(n: u64) -> ExperimentRecord {
    ExperimentRecord {
        n,
        parent_commit: "abc".into(),
        status: Some(Status::Keep),
        started_at: 1.0,
        ..Default::default()
    }
}

/// An event of experiment 0 of run `run_id`.
fn event(s: &Store, run_id: i64, kind: &str) -> Result<(), StoreError> {
    s.append_event(run_id, Some(0), kind, &serde_json::json!({}))
}

fn explicit_transactions_nest_and_commit_once(b: &Backend) {
    let s = b.open();
    let run = new_run(&s, "t");
    let other = b.open();
    s.begin().unwrap();
    s.put_experiment(run.id, &exp(0)).unwrap();
    s.begin().unwrap();
    s.append_event(
        run.id,
        Some(0),
        "experiment_finished",
        &serde_json::json!({}),
    )
    .unwrap();
    s.set_active_seconds(run.id, 12.5).unwrap();
    s.commit().unwrap();
    assert!(
        other.experiments(run.id).unwrap().is_empty(),
        "an inner commit commits nothing"
    );
    assert!(other.events(run.id).unwrap().is_empty());
    s.commit().unwrap();
    assert_eq!(other.experiments(run.id).unwrap().len(), 1);
    assert_eq!(other.events(run.id).unwrap().len(), 1);
    let active = other.run_by_tag("t").unwrap().unwrap().active_seconds;
    assert_eq!(active, 12.5);

    s.begin().unwrap();
    s.put_experiment(run.id, &exp(1)).unwrap();
    s.append_event(
        run.id,
        Some(1),
        "experiment_finished",
        &serde_json::json!({}),
    )
    .unwrap();
    s.rollback();
    assert_eq!(other.experiments(run.id).unwrap().len(), 1, "rolled back");
    assert_eq!(other.events(run.id).unwrap().len(), 1);
    // Usable after, outside any transaction (each write its own).
    s.put_experiment(run.id, &exp(1)).unwrap();
    assert_eq!(other.experiments(run.id).unwrap().len(), 2);
}

/// A best-effort write that fails inside a transaction (an event of a run that does not
/// exist, which the foreign key refuses) costs the transaction nothing: in PostgreSQL the
/// failed statement would otherwise abort all of it, and its COMMIT keep nothing.
fn a_failed_best_effort_write_keeps_the_transaction(b: &Backend) {
    let s = b.open();
    let run = new_run(&s, "t");
    let missing = run.id + 1000;
    let other = b.open();
    s.begin().unwrap();
    s.put_experiment(run.id, &exp(0)).unwrap();
    assert!(s.best_effort(|s| event(s, missing, "lost")).is_err());
    s.best_effort(|s| event(s, run.id, "kept")).unwrap();
    s.set_active_seconds(run.id, 3.5).unwrap();
    s.commit().unwrap();
    assert_eq!(other.experiments(run.id).unwrap().len(), 1);
    let events = other.events(run.id).unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].1, "kept");
    assert_eq!(other.run_by_tag("t").unwrap().unwrap().active_seconds, 3.5);

    // Inside a transaction a nested one joins, as the engine records the outer loop's calls.
    s.in_transaction(|s| {
        s.put_experiment(run.id, &exp(1))?;
        assert!(s.best_effort(|s| event(s, missing, "lost")).is_err());
        s.put_mechanism_calls(
            run.id,
            &[MechanismCall {
                experiment: 1,
                mechanism: "tabu".into(),
                hook: Hook::Filter,
                effect: Effect::None,
                detail: String::new(),
            }],
        )
    })
    .unwrap();
    assert_eq!(other.experiments(run.id).unwrap().len(), 2);
    assert_eq!(other.mechanism_calls(run.id, None).unwrap().len(), 1);

    // Outside any transaction the write is its own.
    assert!(s.best_effort(|s| event(s, missing, "lost")).is_err());
    s.best_effort(|s| event(s, run.id, "kept")).unwrap();
    assert_eq!(other.events(run.id).unwrap().len(), 2);
}

/// A transaction the database itself ended: PostgreSQL aborts one at a failed statement (here
/// a plain append of a run that does not exist); SQLite rolls one back by itself on a full
/// disk or an I/O error (here a temporary trigger's `RAISE(ROLLBACK)` does). Its later writes
/// do not commit one by one, and its commit is an error, not a success that kept nothing.
fn a_transaction_the_database_ended_does_not_commit(b: &Backend) {
    let s = b.open();
    let run = new_run(&s, "t");
    let other = b.open();
    if !s.is_shared() {
        s.batch(
            "CREATE TEMP TRIGGER ends_the_transaction BEFORE INSERT ON events
             WHEN NEW.kind = 'fatal'
             BEGIN SELECT RAISE(ROLLBACK, 'as a full disk would'); END",
        )
        .unwrap();
    }
    s.begin().unwrap();
    s.put_experiment(run.id, &exp(0)).unwrap();
    assert!(event(&s, run.id + 1000, "fatal").is_err());
    // No savepoint brings it back, and no later write commits on its own.
    assert!(s.best_effort(|s| event(s, run.id, "after")).is_err());
    assert!(s.put_experiment(run.id, &exp(1)).is_err());
    assert!(matches!(s.commit(), Err(StoreError::RolledBack)));
    assert!(other.experiments(run.id).unwrap().is_empty());
    assert!(other.events(run.id).unwrap().is_empty());
    // Usable after, outside any transaction.
    s.put_experiment(run.id, &exp(2)).unwrap();
    assert_eq!(other.experiments(run.id).unwrap().len(), 1);
}
