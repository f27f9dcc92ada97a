//! The runs' narrowing logs ([`super::super::narrowings`]): written whole or appended, read
//! back up to an experiment only where the log covers it, each run's apart.

use super::*;
use crate::store::{NarrowedRange, NarrowingChange};

pub(super) const CASES: &[(&str, Case)] = &[(
    "narrowing_logs_are_read_back_only_where_they_cover",
    narrowing_logs_are_read_back_only_where_they_cover,
)];

fn change(n: u64, knob: &str, above: bool, range: Option<(f64, f64, f64, u64)>) -> NarrowingChange {
    NarrowingChange {
        n,
        knob: knob.into(),
        above,
        range: range.map(|(edge, other, nearest, crashes)| NarrowedRange {
            edge,
            other,
            nearest,
            crashes,
        }),
    }
}

fn narrowing_logs_are_read_back_only_where_they_cover(b: &Backend) {
    let s = b.open();
    let run = new_run(&s, "t");
    let other = new_run(&s, "u");
    // No log until one is written: readers work the narrowings out themselves.
    assert_eq!(s.narrowed_upto(run.id).unwrap(), None);
    assert_eq!(s.narrowing_log(run.id, 0).unwrap(), None);
    // Floats come back bit for bit; a change without a range is one that went.
    let log = vec![
        change(
            2,
            "LR",
            true,
            Some((0.1 + 0.2, 1e-300, 0.7000000000000001, 3)),
        ),
        change(5, "DEPTH", false, Some((-3.5, 12.0, -4.0, 4))),
        change(5, "LR", true, None),
        change(7, "LR", false, Some((0.001, 0.3, 0.0005, 5))),
        change(7, "LR", true, Some((0.3, 0.001, 0.9, 6))),
    ];
    s.rewrite_narrowing_log(run.id, &log, 8).unwrap();
    assert_eq!(s.narrowed_upto(run.id).unwrap(), Some(8));
    assert_eq!(s.narrowing_log(run.id, 7).unwrap(), Some(log.clone()));
    assert_eq!(s.narrowing_log(run.id, 4).unwrap(), Some(log[..1].to_vec()));
    // Experiment 8 is not covered (still running, say).
    assert_eq!(s.narrowing_log(run.id, 8).unwrap(), None);
    // Appended as the run goes, in one transaction with the outcome.
    let more = [change(9, "LR", true, Some((0.35, 0.001, 0.9, 7)))];
    s.in_transaction(|s| s.append_narrowing_log(run.id, &more, 10))
        .unwrap();
    let mut all = log.clone();
    all.extend(more.iter().cloned());
    assert_eq!(s.narrowing_log(run.id, 9).unwrap(), Some(all));
    // Another run's log is its own.
    assert_eq!(s.narrowed_upto(other.id).unwrap(), None);
    s.rewrite_narrowing_log(other.id, &[], 3).unwrap();
    assert_eq!(s.narrowing_log(other.id, 2).unwrap(), Some(Vec::new()));
    // Rewritten whole (a run opened again): nothing of the old log is left.
    s.rewrite_narrowing_log(run.id, &log[..2], 6).unwrap();
    assert_eq!(s.narrowing_log(run.id, 5).unwrap(), Some(log[..2].to_vec()));
    assert_eq!(s.narrowing_log(run.id, 7).unwrap(), None);
    assert_eq!(s.narrowing_log(other.id, 2).unwrap(), Some(Vec::new()));
}

/// A run with a narrowing log of 5 experiments, written by SQL alone (the tables of SQLite's
/// schema 13 and PostgreSQL's 6).
const LOGGED_RUN: &str = "
INSERT INTO runs (id, repo, tag, branch, base_commit, created_at, seed, agent, metric, direction, state, seals, spec_json, narrowed_upto)
    VALUES (1, '', 'old', 'hone/old', 'abc', 1.0, 3, 'knobs', 'm', 'minimize', 'stopped', '{}', '{}', 5);
INSERT INTO narrowings (run_id, n, knob, side, edge, other, nearest, crashes)
    VALUES (1, 3, 'ALPHA', 0, 0.0001, 0.0003, 0.00007, 3);
";

/// A log written under the older rule (every crash beyond an edge counted for every knob it
/// lay beyond) is dropped when the store is brought up to date: `hone show` then works the
/// narrowings out from the experiments, as `hone log` does, until the run opens again.
fn an_older_rules_log_is_dropped(s: &Store) {
    let run = s.run_by_tag("old").unwrap().unwrap();
    assert_eq!(s.narrowed_upto(run.id).unwrap(), None);
    assert_eq!(s.narrowing_log(run.id, 4).unwrap(), None);
    s.rewrite_narrowing_log(run.id, &[change(2, "LR", true, None)], 5)
        .unwrap();
    assert_eq!(
        s.narrowing_log(run.id, 4).unwrap().map(|l| l.len()),
        Some(1)
    );
}

#[test]
fn sqlite_schema_13_drops_the_older_rules_narrowing_logs() {
    check_sqlite_of_schema(13, LOGGED_RUN, an_older_rules_log_is_dropped);
}

#[test]
fn postgres_schema_6_drops_the_older_rules_narrowing_logs() {
    check_postgres_of_schema(6, LOGGED_RUN, an_older_rules_log_is_dropped);
}
