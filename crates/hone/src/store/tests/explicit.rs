//! Transactions opened and closed by hand ([`Store::begin`], [`Store::commit`],
//! [`Store::rollback`]), as the engine records an experiment's finish: nothing is seen by
//! another connection before the outermost commit, and a rollback undoes all of it.

use super::*;

pub(super) fn explicit_transactions_nest_and_commit_once(b: &Backend) {
    let s = b.open();
    let run = new_run(&s, "t");
    let exp = |n| ExperimentRecord {
        n,
        parent_commit: "abc".into(),
        status: Some(Status::Keep),
        started_at: 1.0,
        ..Default::default()
    };
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
