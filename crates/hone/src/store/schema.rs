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
    OUTLINE_INDEXES,
    // 10: a run's running totals by status (`run_tallies`: counts, verification time, cost,
    // holdouts), kept by triggers in the very transaction of every write to `experiments`, so
    // they never disagree with the rows, whatever is killed when; filled once from the rows
    // here. And indexes that serve the table's sorts by duration and cost, filtered or not.
    // Cost is tallied in nano-dollars (see `summary::cost_nanos`, whose arithmetic
    // `NANOS(x)` spells out): integers add up the same in any order.
    TALLIES_SQLITE,
    // 11: the runs' narrowing logs (`store::narrowings`), PostgreSQL's 5 in the same words.
    NARROWINGS,
    // 12: what the progress plot draws of each block of 16 experiments (`plot_blocks`: its
    // lowest, median and highest discard, its first failure of each kind), kept by triggers in
    // the transaction of every write to `experiments` and filled once from the rows here; and
    // the keeps and baselines with their texts in one partial covering index. The plot of a
    // run of 100,000 reads 6,250 blocks and its keeps, not every experiment.
    PLOT_BLOCKS_SQLITE,
    // 13: a run's mechanism calls in the order they were made (the index's rows are in rowid
    // order under each run): the report reads every one, and sorted 10,000 of them anew (a
    // third of the read) by `mechanism_calls_by_run`.
    r#"
CREATE INDEX mechanism_calls_in_order ON mechanism_calls(run_id);
"#,
    // 14: the narrowing logs written before a crash beyond several knobs' finished values
    // counted for one of them only (`propose::knobs::feasible`), PostgreSQL's 7 in the same
    // words: dropped, so that `hone show` works the narrowings out from the experiments, as
    // `hone log` does, until a run opens again and writes its log anew.
    NARROWINGS_AGAIN,
];

/// Migration 14 (see [`MIGRATIONS`]), PostgreSQL's 7.
pub(super) const NARROWINGS_AGAIN: &str = r#"
DELETE FROM narrowings;
UPDATE runs SET narrowed_upto = NULL;
"#;

/// The statuses a plot block summarizes: the discards and the failures.
const PLOTTED: &str =
    "('discard', 'crash', 'timeout', 'pruned', 'violation', 'rejected', 'invalid')";

/// Migration 12 (see [`MIGRATIONS`]); `{BLOCK(r)}` stands for [`BLOCK_SQLITE`] of row `r`.
const PLOT_BLOCKS_SQLITE: &str = r#"
CREATE TABLE plot_blocks (
    run_id   INTEGER NOT NULL REFERENCES runs(id),
    block    INTEGER NOT NULL,
    discards INTEGER NOT NULL DEFAULT 0,
    lo_n     INTEGER,
    lo_v     REAL,
    lo_d     TEXT,
    mid_n    INTEGER,
    mid_v    REAL,
    mid_d    TEXT,
    hi_n     INTEGER,
    hi_v     REAL,
    hi_d     TEXT,
    fail_x   INTEGER,
    fail_x_r TEXT,
    fail_t   INTEGER,
    fail_t_r TEXT,
    fail_p   INTEGER,
    fail_p_r TEXT,
    fail_o   INTEGER,
    fail_o_r TEXT,
    fail_o_s TEXT,
    PRIMARY KEY (run_id, block)
) WITHOUT ROWID;
INSERT INTO plot_blocks (run_id, block)
    SELECT DISTINCT run_id, n / 16 FROM experiments WHERE status IN {PLOTTED};
UPDATE plot_blocks SET {BLOCK_SET};
CREATE TRIGGER experiments_plot_insert AFTER INSERT ON experiments
    WHEN new.status IN {PLOTTED}
BEGIN
    {BLOCK(new)}
END;
CREATE TRIGGER experiments_plot_delete AFTER DELETE ON experiments
    WHEN old.status IN {PLOTTED}
BEGIN
    {BLOCK(old)}
END;
CREATE TRIGGER experiments_plot_update
    AFTER UPDATE OF status, objective, description, reason ON experiments
    WHEN (old.status IN {PLOTTED} OR new.status IN {PLOTTED})
        AND old.run_id IS new.run_id AND old.n IS new.n
        AND (old.status IS NOT new.status OR old.objective IS NOT new.objective
             OR old.description IS NOT new.description OR old.reason IS NOT new.reason)
BEGIN
    {BLOCK(new)}
END;
CREATE TRIGGER experiments_plot_move AFTER UPDATE OF run_id, n ON experiments
    WHEN old.run_id IS NOT new.run_id OR old.n IS NOT new.n
BEGIN
    {BLOCK(old)}
    {BLOCK(new)}
END;
CREATE INDEX experiments_kept ON experiments(run_id, n, status, objective, description, reason)
    WHERE status IN ('baseline', 'keep');
"#;

/// What the plot triggers do for row `$R` (`new` or `old`): its block's row made if missing
/// (with no conflict clause, which an outer statement's would override), then worked out
/// again from the block's experiments.
const BLOCK_SQLITE: &str = "
    INSERT INTO plot_blocks (run_id, block) SELECT $R.run_id, $R.n / 16
        WHERE NOT EXISTS (SELECT 1 FROM plot_blocks WHERE run_id = $R.run_id AND block = $R.n / 16);
    UPDATE plot_blocks SET {BLOCK_SET} WHERE run_id = $R.run_id AND block = $R.n / 16;";

/// A plot block's summary worked out from its experiments (`$S`: the schema's prefix): how
/// many discards have a value; the lowest, the median (the `(k - 1) / 2`-th) and the highest
/// of them by value, ties by number, each with its description; the first failure of each of
/// the plot's kinds (crash, timeout, pruned, refused) with its reason (and, refused, its
/// status). The texts are cut to the plot's titles' 120 characters and one more, which says
/// whether the title ends in an ellipsis (`store::plot::TITLE_CHARS`). Two range scans of 16.
const BLOCK_SET: &str = "
    (discards, lo_n, lo_v, lo_d, mid_n, mid_v, mid_d, hi_n, hi_v, hi_d) = (SELECT COUNT(*),
        MAX(CASE WHEN rn = 1 THEN n END), MAX(CASE WHEN rn = 1 THEN objective END),
        MAX(CASE WHEN rn = 1 THEN txt END),
        MAX(CASE WHEN rn = (k - 1) / 2 + 1 THEN n END),
        MAX(CASE WHEN rn = (k - 1) / 2 + 1 THEN objective END),
        MAX(CASE WHEN rn = (k - 1) / 2 + 1 THEN txt END),
        MAX(CASE WHEN rn = k THEN n END), MAX(CASE WHEN rn = k THEN objective END),
        MAX(CASE WHEN rn = k THEN txt END)
        FROM (SELECT n, objective, substr(description, 1, 121) AS txt,
                     ROW_NUMBER() OVER (ORDER BY objective, n) AS rn, COUNT(*) OVER () AS k
              FROM $Sexperiments e
              WHERE e.run_id = plot_blocks.run_id
                AND e.n BETWEEN plot_blocks.block * 16 AND plot_blocks.block * 16 + 15
                AND e.status = 'discard' AND e.objective IS NOT NULL) w),
    (fail_x, fail_x_r, fail_t, fail_t_r, fail_p, fail_p_r, fail_o, fail_o_r, fail_o_s) = (SELECT
        MAX(CASE WHEN kind = 'x' AND rn = 1 THEN n END),
        MAX(CASE WHEN kind = 'x' AND rn = 1 THEN txt END),
        MAX(CASE WHEN kind = 't' AND rn = 1 THEN n END),
        MAX(CASE WHEN kind = 't' AND rn = 1 THEN txt END),
        MAX(CASE WHEN kind = 'p' AND rn = 1 THEN n END),
        MAX(CASE WHEN kind = 'p' AND rn = 1 THEN txt END),
        MAX(CASE WHEN kind = 'o' AND rn = 1 THEN n END),
        MAX(CASE WHEN kind = 'o' AND rn = 1 THEN txt END),
        MAX(CASE WHEN kind = 'o' AND rn = 1 THEN status END)
        FROM (SELECT n, status, txt, kind, ROW_NUMBER() OVER (PARTITION BY kind ORDER BY n) AS rn
              FROM (SELECT n, status, substr(reason, 1, 121) AS txt,
                           CASE status WHEN 'crash' THEN 'x' WHEN 'timeout' THEN 't'
                                       WHEN 'pruned' THEN 'p' ELSE 'o' END AS kind
                    FROM $Sexperiments e
                    WHERE e.run_id = plot_blocks.run_id
                      AND e.n BETWEEN plot_blocks.block * 16 AND plot_blocks.block * 16 + 15
                      AND e.status IN
                        ('crash', 'timeout', 'pruned', 'violation', 'rejected', 'invalid')) f) g)";

/// The plot blocks' shorthands of a migration spelled out (`prefix`: the schema's, for
/// PostgreSQL's functions): `{BLOCK_SET}`, `{PLOTTED}`.
pub(super) fn expand_plot(sql: &str, prefix: &str) -> String {
    sql.replace("{BLOCK_SET}", &BLOCK_SET.replace("$S", prefix))
        .replace("{PLOTTED}", PLOTTED)
}

/// Migration 11 (see [`MIGRATIONS`]), PostgreSQL's 5: where crashes narrowed a knob's range,
/// each change with the experiment after which it happened (a range that went: no values),
/// and how many of a run's experiments the log covers (`NULL`: none, the run has no log).
pub(super) const NARROWINGS: &str = r#"
CREATE TABLE narrowings (
    run_id  BIGINT NOT NULL REFERENCES runs(id),
    n       BIGINT NOT NULL,
    knob    TEXT NOT NULL,
    side    BIGINT NOT NULL,
    edge    DOUBLE PRECISION,
    other   DOUBLE PRECISION,
    nearest DOUBLE PRECISION,
    crashes BIGINT,
    PRIMARY KEY (run_id, n, knob, side)
);
ALTER TABLE runs ADD COLUMN narrowed_upto BIGINT;
"#;

/// Migration 9 (see [`MIGRATIONS`]), PostgreSQL's 3 in the same words: the covering index of
/// what summaries, plots and sorts read; which experiments have a holdout, which cost money.
pub(super) const OUTLINE_INDEXES: &str = r#"
CREATE INDEX experiments_outline ON experiments(run_id, n, status, objective, verify_ms, cost_usd, holdout, total_ms);
CREATE INDEX experiments_with_holdout ON experiments(run_id, holdout) WHERE holdout IS NOT NULL;
CREATE INDEX experiments_paid ON experiments(run_id, cost_usd) WHERE cost_usd > 0;
"#;

/// Migration 10 (see [`MIGRATIONS`]); `NANOS(c)` stands for [`cost_nanos_sqlite`] of `c`.
const TALLIES_SQLITE: &str = r#"
CREATE TABLE run_tallies (
    run_id      INTEGER NOT NULL REFERENCES runs(id),
    status      TEXT NOT NULL,
    experiments INTEGER NOT NULL DEFAULT 0,
    verify_ms   INTEGER NOT NULL DEFAULT 0,
    cost_nanos  INTEGER NOT NULL DEFAULT 0,
    holdouts    INTEGER NOT NULL DEFAULT 0,
    paid        INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, status)
) WITHOUT ROWID;
INSERT INTO run_tallies (run_id, status, experiments, verify_ms, cost_nanos, holdouts, paid)
    SELECT run_id, status, COUNT(*), SUM(verify_ms), SUM(NANOS(cost_usd)),
           SUM(holdout IS NOT NULL), SUM(cost_usd > 0)
    FROM experiments GROUP BY run_id, status;
CREATE TRIGGER experiments_tally_insert AFTER INSERT ON experiments BEGIN
    ADD(new, 1)
END;
CREATE TRIGGER experiments_tally_delete AFTER DELETE ON experiments BEGIN
    ADD(old, -1)
END;
CREATE TRIGGER experiments_tally_update AFTER UPDATE OF run_id, status, verify_ms, cost_usd, holdout
    ON experiments
    WHEN old.run_id IS NOT new.run_id OR old.status IS NOT new.status
        OR old.verify_ms IS NOT new.verify_ms OR old.cost_usd IS NOT new.cost_usd
        OR (old.holdout IS NULL) IS NOT (new.holdout IS NULL)
BEGIN
    ADD(old, -1)
    ADD(new, 1)
END;
CREATE INDEX experiments_by_status_duration ON experiments(run_id, status, total_ms, n);
CREATE INDEX experiments_by_status_cost ON experiments(run_id, status, cost_usd, n);
CREATE INDEX experiments_by_duration ON experiments(run_id, total_ms, n);
CREATE INDEX experiments_by_cost ON experiments(run_id, cost_usd, n);
"#;

/// What the tally triggers add for row `$R` (`new` or `old`) counted `$K` times (1 or -1): the
/// tally row made if missing (with no conflict clause, which an outer statement's would
/// override), then added to.
const TALLY_ADD_SQLITE: &str = "
    INSERT INTO run_tallies (run_id, status) SELECT $R.run_id, $R.status
        WHERE NOT EXISTS (SELECT 1 FROM run_tallies WHERE run_id = $R.run_id AND status = $R.status);
    UPDATE run_tallies SET experiments = experiments + $K, verify_ms = verify_ms + $K * $R.verify_ms,
        cost_nanos = cost_nanos + $K * NANOS($R.cost_usd),
        holdouts = holdouts + $K * ($R.holdout IS NOT NULL), paid = paid + $K * ($R.cost_usd > 0)
        WHERE run_id = $R.run_id AND status = $R.status;";

/// `NANOS(x)` in SQLite: [`super::summary::cost_nanos`] (clamped, half away from zero, cut
/// toward zero), the same floats step by step.
fn cost_nanos_sqlite(x: &str) -> String {
    let v = format!("MIN(MAX(({x}) * 1e9, -1e15), 1e15)");
    format!("CAST({v} + (CASE WHEN {v} < 0 THEN -0.5 ELSE 0.5 END) AS INTEGER)")
}

/// A migration's SQL as it runs: migration 10's and 12's shorthands spelled out.
pub(super) fn expand(sql: &str) -> String {
    let mut out = sql.to_string();
    for row in ["new", "old"] {
        out = out.replace(
            &format!("{{BLOCK({row})}}"),
            BLOCK_SQLITE.replace("$R", row).trim(),
        );
    }
    out = expand_plot(&out, "");
    for (row, k) in [("new", "1"), ("old", "-1")] {
        let add = TALLY_ADD_SQLITE
            .replace("$R", row)
            .replace("$K", &format!("({k})"));
        out = out.replace(&format!("ADD({row}, {k})"), add.trim());
    }
    while let Some(start) = out.find("NANOS(") {
        let args = start + "NANOS(".len();
        let mut depth = 1;
        let close = out[args..].char_indices().find_map(|(i, c)| {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            (depth == 0).then_some(args + i)
        });
        // Every NANOS( of the migrations here is closed; an unclosed one is left as it is
        // (and SQLite refuses it).
        let Some(end) = close else { break };
        let expanded = cost_nanos_sqlite(&out[args..end]);
        out.replace_range(start..=end, &expanded);
    }
    out
}

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
        tx.execute_batch(&expand(sql))?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        tx.commit()?;
    }
    Ok(())
}
