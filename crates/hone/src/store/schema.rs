//! The SQLite schema: its migrations, in order, and their application. The version applied is
//! `PRAGMA user_version`; each migration runs in its own transaction, and a file written by a
//! newer hone (a version past the last migration known here) is refused, never touched.
//! PostgreSQL's schema is the same one translated, in [`super::pg`].

use std::path::Path;

use rusqlite::Connection;

use super::StoreError;

/// Migrations, in order; `user_version` is the number applied.
pub(super) const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE runs (
    id             INTEGER PRIMARY KEY,
    tag            TEXT NOT NULL UNIQUE,
    branch         TEXT NOT NULL,
    base_commit    TEXT NOT NULL,
    created_at     REAL NOT NULL,
    seed           INTEGER NOT NULL,
    agent          TEXT NOT NULL,
    metric         TEXT NOT NULL,
    direction      TEXT NOT NULL,
    state          TEXT NOT NULL,
    stop_reason    TEXT,
    active_seconds REAL NOT NULL DEFAULT 0,
    seals          TEXT NOT NULL,
    spec_json      TEXT NOT NULL
);
CREATE TABLE experiments (
    run_id           INTEGER NOT NULL REFERENCES runs(id),
    n                INTEGER NOT NULL,
    parent_commit    TEXT NOT NULL,
    candidate_commit TEXT,
    status           TEXT NOT NULL,
    objective        REAL,
    metrics          TEXT NOT NULL DEFAULT '{}',
    config           TEXT,
    description      TEXT NOT NULL DEFAULT '',
    reason           TEXT NOT NULL DEFAULT '',
    files_changed    INTEGER NOT NULL DEFAULT 0,
    lines_added      INTEGER NOT NULL DEFAULT 0,
    lines_deleted    INTEGER NOT NULL DEFAULT 0,
    propose_ms       INTEGER NOT NULL DEFAULT 0,
    gate_ms          INTEGER NOT NULL DEFAULT 0,
    verify_ms        INTEGER NOT NULL DEFAULT 0,
    total_ms         INTEGER NOT NULL DEFAULT 0,
    started_at       REAL NOT NULL,
    finished_at      REAL,
    log_path         TEXT,
    pid              INTEGER,
    pid_start        INTEGER,
    cost_usd         REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, n)
);
CREATE TABLE events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id     INTEGER NOT NULL REFERENCES runs(id),
    experiment INTEGER,
    at         REAL NOT NULL,
    kind       TEXT NOT NULL,
    data       TEXT NOT NULL
);
CREATE INDEX events_by_run ON events(run_id, id);
CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
"#,
    // 2: repeated runs, the decision's reasoning, and the candidate's tree (for dedup).
    r#"
ALTER TABLE experiments ADD COLUMN runs TEXT NOT NULL DEFAULT '[]';
ALTER TABLE experiments ADD COLUMN judgement TEXT;
ALTER TABLE experiments ADD COLUMN tree TEXT;
"#,
    // 3: the sealed holdout's value.
    r#"
ALTER TABLE experiments ADD COLUMN holdout REAL;
"#,
    // 4: tokens spent by LLM proposers.
    r#"
ALTER TABLE experiments ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0;
"#,
    // 5: every hook call of the outer loop's mechanisms, with its effect.
    r#"
CREATE TABLE mechanism_calls (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id     INTEGER NOT NULL REFERENCES runs(id),
    experiment INTEGER NOT NULL,
    mechanism  TEXT NOT NULL,
    hook       TEXT NOT NULL,
    effect     TEXT NOT NULL,
    detail     TEXT NOT NULL DEFAULT '',
    at         REAL NOT NULL
);
CREATE INDEX mechanism_calls_by_run ON mechanism_calls(run_id, experiment);
"#,
    // 6: the dashboard's experiment table filters by status and sorts by status or objective
    // over runs of 10,000+ experiments.
    r#"
CREATE INDEX experiments_by_status ON experiments(run_id, status, n);
CREATE INDEX experiments_by_objective ON experiments(run_id, objective, n);
"#,
    // 7: the repository a run belongs to (shared PostgreSQL databases hold many; a
    // repository's own SQLite file holds one, so its key stays empty).
    r#"
ALTER TABLE runs ADD COLUMN repo TEXT NOT NULL DEFAULT '';
"#,
    // 8: intermediate values of the verifier (`[verify] progress`), one row per point, written
    // as they arrive; the pruner compares a running experiment with them.
    r#"
CREATE TABLE curves (
    run_id     INTEGER NOT NULL REFERENCES runs(id),
    experiment INTEGER NOT NULL,
    step       REAL NOT NULL,
    value      REAL NOT NULL,
    at         REAL NOT NULL,
    PRIMARY KEY (run_id, experiment, step)
);
"#,
    // 9: what summaries, plots and the table's sorts read of every experiment of a run
    // (counts by status, totals, the points of a plot, durations), in one covering index: a
    // run of 100,000 experiments is summed and sorted without reading its records whole; and
    // whether any experiment has a holdout or cost money (`hone log`'s columns) at once.
    r#"
CREATE INDEX experiments_outline ON experiments(run_id, n, status, objective, verify_ms, cost_usd, holdout, total_ms);
CREATE INDEX experiments_with_holdout ON experiments(run_id, holdout) WHERE holdout IS NOT NULL;
CREATE INDEX experiments_paid ON experiments(run_id, cost_usd) WHERE cost_usd > 0;
"#,
];

/// The schema version of a SQLite store; a store written by a newer hone is an error.
pub(super) fn sqlite_version(conn: &Connection, path: &Path) -> Result<i64, StoreError> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let known = MIGRATIONS.len() as i64;
    if version > known {
        return Err(StoreError::TooNew {
            path: path.display().to_string(),
            found: version,
            known,
        });
    }
    Ok(version)
}

/// Brings a SQLite store's schema up to date, one transaction per migration.
pub(super) fn migrate_sqlite(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let version = sqlite_version(conn, path)?;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        tx.commit()?;
    }
    Ok(())
}
