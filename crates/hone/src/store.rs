//! State: runs, experiments and an append-only event log in SQLite (`.hone/hone.db`).
//!
//! The database runs in WAL mode so readers (`hone status`, `hone log`) never block the loop.
//! The schema is versioned with `PRAGMA user_version`; each migration runs once, in a
//! transaction. The engine writes an experiment's start before its verifier starts and its
//! outcome before any ref moves, so a crash at any point leaves enough to recover from.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, Row};

/// A store failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("state database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("state database {path} was written by a newer hone (schema {found}, this hone knows {known}); upgrade hone")]
    TooNew {
        path: String,
        found: i64,
        known: i64,
    },
    #[error("cannot create {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// The status of an experiment (DESIGN.md §2), plus `running` while it is in progress.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Running,
    Baseline,
    Keep,
    Discard,
    Crash,
    Timeout,
    Violation,
    Rejected,
    Invalid,
    Aborted,
}

impl Status {
    pub const ALL: &'static [Status] = &[
        Status::Baseline,
        Status::Keep,
        Status::Discard,
        Status::Crash,
        Status::Timeout,
        Status::Violation,
        Status::Rejected,
        Status::Invalid,
        Status::Aborted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Baseline => "baseline",
            Status::Keep => "keep",
            Status::Discard => "discard",
            Status::Crash => "crash",
            Status::Timeout => "timeout",
            Status::Violation => "violation",
            Status::Rejected => "rejected",
            Status::Invalid => "invalid",
            Status::Aborted => "aborted",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL
            .iter()
            .chain(std::iter::once(&Status::Running))
            .copied()
            .find(|st| st.as_str() == s)
    }

    /// Counts toward `max_consecutive_failures`.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Status::Crash
                | Status::Timeout
                | Status::Invalid
                | Status::Violation
                | Status::Rejected
        )
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One run: one loop over one spec on branch `hone/<tag>`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RunRecord {
    pub id: i64,
    pub tag: String,
    pub branch: String,
    pub base_commit: String,
    pub created_at: f64,
    pub seed: u64,
    pub agent: String,
    pub metric: String,
    pub direction: String,
    /// `running` (or interrupted: resumable), `stopped` (a stop condition held).
    pub state: String,
    pub stop_reason: Option<String>,
    /// Loop time summed over every session of this run.
    pub active_seconds: f64,
    /// Hashes of protected and pinned files at the start, as JSON.
    pub seals: String,
    pub spec_json: String,
}

/// One experiment.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ExperimentRecord {
    pub n: u64,
    pub parent_commit: String,
    pub candidate_commit: Option<String>,
    pub status: Option<Status>,
    pub objective: Option<f64>,
    pub metrics: BTreeMap<String, f64>,
    pub config: Option<serde_json::Value>,
    pub description: String,
    /// Why it got its status (crash reason, violating path, decision arithmetic...).
    pub reason: String,
    pub files_changed: u64,
    pub lines_added: u64,
    pub lines_deleted: u64,
    pub propose_ms: u64,
    pub gate_ms: u64,
    pub verify_ms: u64,
    pub total_ms: u64,
    pub started_at: f64,
    pub finished_at: Option<f64>,
    pub log_path: Option<String>,
    pub pid: Option<u32>,
    pub pid_start: Option<u64>,
    pub cost_usd: f64,
    /// Every measurement of the objective for this code (first run, confirms, re-tests).
    pub runs: Vec<f64>,
    /// How the keep/discard decision was reached.
    pub judgement: Option<crate::verify::noise::Judgement>,
    /// The candidate's git tree (identical trees are identical candidates).
    pub tree: Option<String>,
    /// The sealed holdout's value (baseline and keeps only); never shown to agents.
    pub holdout: Option<f64>,
    /// Tokens the proposer spent (input and output).
    pub tokens: u64,
}

/// One invocation of a mechanism's hook and what it did (see `crate::meta`).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct MechanismCall {
    /// The experiment it was called for.
    pub experiment: u64,
    pub mechanism: String,
    /// `on_start`, `before_propose`, `candidates`, `filter`, `on_result`, `on_segment_end`.
    pub hook: String,
    /// `none`, `guided`, `suggested`, `rejected`, `modified`, `ignored`, `changed`,
    /// `activated`, `deactivated`.
    pub effect: String,
    pub detail: String,
}

impl ExperimentRecord {
    pub fn status(&self) -> Status {
        self.status.unwrap_or(Status::Running)
    }
}

/// Migrations, in order; `user_version` is the number applied.
const MIGRATIONS: &[&str] = &[
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
];

/// A column the experiment table can be sorted by (a closed list: never SQL from a request).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SortKey {
    /// The experiment's number.
    #[default]
    Number,
    Status,
    Objective,
    /// Wall-clock time of the whole experiment.
    Duration,
    Cost,
}

impl SortKey {
    pub const ALL: &'static [SortKey] = &[
        SortKey::Number,
        SortKey::Status,
        SortKey::Objective,
        SortKey::Duration,
        SortKey::Cost,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SortKey::Number => "n",
            SortKey::Status => "status",
            SortKey::Objective => "objective",
            SortKey::Duration => "duration",
            SortKey::Cost => "cost",
        }
    }

    pub fn parse(s: &str) -> Option<SortKey> {
        SortKey::ALL.iter().copied().find(|k| k.as_str() == s)
    }

    fn column(self) -> &'static str {
        match self {
            SortKey::Number => "n",
            SortKey::Status => "status",
            SortKey::Objective => "objective",
            SortKey::Duration => "total_ms",
            SortKey::Cost => "cost_usd",
        }
    }
}

/// One page of a run's experiments: which ones, in what order.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ExperimentQuery {
    /// Only experiments with this status.
    pub status: Option<Status>,
    pub sort: SortKey,
    pub descending: bool,
    pub limit: u64,
    pub offset: u64,
}

/// What changes when a run makes progress: compared between two polls, it tells a watcher
/// (the dashboard's event stream) that something new was written, without reading the rows.
#[derive(Clone, Debug, PartialEq, Default, serde::Serialize)]
pub struct RunChangeMark {
    pub experiments: u64,
    pub running: u64,
    /// The newest experiment's last write (finish, else start), in seconds since the epoch.
    pub last_write: f64,
    pub last_event: i64,
    pub state: String,
}

/// The embedded SQLite store.
pub struct Store {
    conn: Connection,
}

/// Seconds since the Unix epoch, as a float.
pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl Store {
    /// Opens (creating if needed) the database and brings its schema up to date.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
                path: dir.display().to_string(),
                source,
            })?;
        }
        let mut conn = Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        // FULL: a recorded outcome survives power loss before the branch move that follows it.
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        let known = MIGRATIONS.len() as i64;
        if version > known {
            return Err(StoreError::TooNew {
                path: path.display().to_string(),
                found: version,
                known,
            });
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            let tx = conn.transaction()?;
            tx.execute_batch(sql)?;
            tx.pragma_update(None, "user_version", (i + 1) as i64)?;
            tx.commit()?;
        }
        Ok(Store { conn })
    }

    /// Opens an existing database read-mostly; `None` when there is none yet.
    pub fn open_existing(path: &Path) -> Result<Option<Store>, StoreError> {
        if !path.exists() {
            return Ok(None);
        }
        Store::open(path).map(Some)
    }

    /// Opens an existing, up-to-date database for reading only (the dashboard: many readers
    /// beside one `hone run` writing). Fails on a schema this hone does not know; open it once
    /// with [`Store::open`] first to bring an older one up to date.
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        use rusqlite::OpenFlags;
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(Duration::from_secs(5))?;
        let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        let known = MIGRATIONS.len() as i64;
        if version > known {
            return Err(StoreError::TooNew {
                path: path.display().to_string(),
                found: version,
                known,
            });
        }
        Ok(Store { conn })
    }

    #[allow(clippy::too_many_arguments)]
    pub fn create_run(
        &self,
        tag: &str,
        branch: &str,
        base_commit: &str,
        seed: u64,
        agent: &str,
        metric: &str,
        direction: &str,
        seals: &str,
        spec_json: &str,
    ) -> Result<RunRecord, StoreError> {
        self.conn.execute(
            "INSERT INTO runs (tag, branch, base_commit, created_at, seed, agent, metric, direction, state, seals, spec_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'running', ?9, ?10)",
            params![tag, branch, base_commit, now(), seed as i64, agent, metric, direction, seals, spec_json],
        )?;
        let id = self.conn.last_insert_rowid();
        self.run_by_id(id)
    }

    fn run_from_row(r: &Row<'_>) -> rusqlite::Result<RunRecord> {
        Ok(RunRecord {
            id: r.get("id")?,
            tag: r.get("tag")?,
            branch: r.get("branch")?,
            base_commit: r.get("base_commit")?,
            created_at: r.get("created_at")?,
            seed: r.get::<_, i64>("seed")? as u64,
            agent: r.get("agent")?,
            metric: r.get("metric")?,
            direction: r.get("direction")?,
            state: r.get("state")?,
            stop_reason: r.get("stop_reason")?,
            active_seconds: r.get("active_seconds")?,
            seals: r.get("seals")?,
            spec_json: r.get("spec_json")?,
        })
    }

    fn run_by_id(&self, id: i64) -> Result<RunRecord, StoreError> {
        Ok(self
            .conn
            .query_row("SELECT * FROM runs WHERE id = ?1", [id], Self::run_from_row)?)
    }

    /// The run with this tag.
    pub fn run_by_tag(&self, tag: &str) -> Result<Option<RunRecord>, StoreError> {
        Ok(self
            .conn
            .query_row(
                "SELECT * FROM runs WHERE tag = ?1",
                [tag],
                Self::run_from_row,
            )
            .optional()?)
    }

    /// All runs, oldest first.
    pub fn runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        let mut st = self.conn.prepare("SELECT * FROM runs ORDER BY id")?;
        let rows = st.query_map([], Self::run_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The newest run, if any.
    pub fn latest_run(&self) -> Result<Option<RunRecord>, StoreError> {
        Ok(self
            .conn
            .query_row(
                "SELECT * FROM runs ORDER BY id DESC LIMIT 1",
                [],
                Self::run_from_row,
            )
            .optional()?)
    }

    pub fn set_active_seconds(&self, run_id: i64, secs: f64) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE runs SET active_seconds = ?2 WHERE id = ?1",
            params![run_id, secs],
        )?;
        Ok(())
    }

    /// Records why a run's session ended. `state` is `stopped` when a stop condition held and
    /// `interrupted` when it can be resumed as is.
    pub fn set_run_state(
        &self,
        run_id: i64,
        state: &str,
        reason: Option<&str>,
    ) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE runs SET state = ?2, stop_reason = ?3 WHERE id = ?1",
            params![run_id, state, reason],
        )?;
        Ok(())
    }

    /// Writes an experiment row (insert or replace): the whole record is the truth.
    pub fn put_experiment(&self, run_id: i64, e: &ExperimentRecord) -> Result<(), StoreError> {
        let metrics = serde_json::to_string(&e.metrics).unwrap_or_else(|_| "{}".into());
        let config = e.config.as_ref().map(|c| c.to_string());
        self.conn.execute(
            "INSERT OR REPLACE INTO experiments (run_id, n, parent_commit, candidate_commit, status, objective, metrics,
                config, description, reason, files_changed, lines_added, lines_deleted, propose_ms, gate_ms, verify_ms,
                total_ms, started_at, finished_at, log_path, pid, pid_start, cost_usd, runs, judgement, tree, holdout, tokens)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28)",
            params![
                run_id,
                e.n as i64,
                e.parent_commit,
                e.candidate_commit,
                e.status().as_str(),
                e.objective,
                metrics,
                config,
                e.description,
                e.reason,
                e.files_changed as i64,
                e.lines_added as i64,
                e.lines_deleted as i64,
                e.propose_ms as i64,
                e.gate_ms as i64,
                e.verify_ms as i64,
                e.total_ms as i64,
                e.started_at,
                e.finished_at,
                e.log_path,
                e.pid,
                e.pid_start.map(|v| v as i64),
                e.cost_usd,
                serde_json::to_string(&e.runs).unwrap_or_else(|_| "[]".into()),
                e.judgement.as_ref().and_then(|j| serde_json::to_string(j).ok()),
                e.tree,
                e.holdout,
                e.tokens as i64,
            ],
        )?;
        Ok(())
    }

    /// Records the process group an experiment is running (agent or verifier).
    pub fn set_experiment_pid(
        &self,
        run_id: i64,
        n: u64,
        pid: u32,
        start: Option<u64>,
    ) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE experiments SET pid = ?3, pid_start = ?4 WHERE run_id = ?1 AND n = ?2",
            params![run_id, n as i64, pid, start.map(|v| v as i64)],
        )?;
        Ok(())
    }

    fn experiment_from_row(r: &Row<'_>) -> rusqlite::Result<ExperimentRecord> {
        let metrics: String = r.get("metrics")?;
        let config: Option<String> = r.get("config")?;
        let status: String = r.get("status")?;
        Ok(ExperimentRecord {
            n: r.get::<_, i64>("n")? as u64,
            parent_commit: r.get("parent_commit")?,
            candidate_commit: r.get("candidate_commit")?,
            status: Status::parse(&status),
            objective: r.get("objective")?,
            metrics: serde_json::from_str(&metrics).unwrap_or_default(),
            config: config.and_then(|c| serde_json::from_str(&c).ok()),
            description: r.get("description")?,
            reason: r.get("reason")?,
            files_changed: r.get::<_, i64>("files_changed")? as u64,
            lines_added: r.get::<_, i64>("lines_added")? as u64,
            lines_deleted: r.get::<_, i64>("lines_deleted")? as u64,
            propose_ms: r.get::<_, i64>("propose_ms")? as u64,
            gate_ms: r.get::<_, i64>("gate_ms")? as u64,
            verify_ms: r.get::<_, i64>("verify_ms")? as u64,
            total_ms: r.get::<_, i64>("total_ms")? as u64,
            started_at: r.get("started_at")?,
            finished_at: r.get("finished_at")?,
            log_path: r.get("log_path")?,
            pid: r.get("pid")?,
            pid_start: r.get::<_, Option<i64>>("pid_start")?.map(|v| v as u64),
            cost_usd: r.get("cost_usd")?,
            runs: serde_json::from_str(&r.get::<_, String>("runs")?).unwrap_or_default(),
            judgement: r
                .get::<_, Option<String>>("judgement")?
                .and_then(|j| serde_json::from_str(&j).ok()),
            tree: r.get("tree")?,
            holdout: r.get("holdout")?,
            tokens: r.get::<_, i64>("tokens")? as u64,
        })
    }

    /// Every experiment of a run, in order.
    pub fn experiments(&self, run_id: i64) -> Result<Vec<ExperimentRecord>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached("SELECT * FROM experiments WHERE run_id = ?1 ORDER BY n")?;
        let rows = st.query_map([run_id], Self::experiment_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// One experiment.
    pub fn experiment(&self, run_id: i64, n: u64) -> Result<Option<ExperimentRecord>, StoreError> {
        Ok(self
            .conn
            .query_row(
                "SELECT * FROM experiments WHERE run_id = ?1 AND n = ?2",
                params![run_id, n as i64],
                Self::experiment_from_row,
            )
            .optional()?)
    }

    /// Runs `f` in one transaction: committed when it returns `Ok`, rolled back otherwise.
    /// Many writes in one go (an import, a benchmark's fixture) then cost one sync, not one
    /// each.
    pub fn in_transaction<T>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        match f(self) {
            Ok(v) => {
                self.conn.execute_batch("COMMIT")?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }

    /// One page of a run's experiments, sorted and filtered in SQL (indexed: fast on runs of
    /// 10,000+), and how many experiments match the filter in all. Ties, and experiments
    /// without a value, go by number; missing values sort last either way.
    pub fn experiments_page(
        &self,
        run_id: i64,
        q: &ExperimentQuery,
    ) -> Result<(Vec<ExperimentRecord>, u64), StoreError> {
        let dir = if q.descending { "DESC" } else { "ASC" };
        let order = match q.sort {
            SortKey::Number => format!("n {dir}"),
            key => format!("{} {dir} NULLS LAST, n {dir}", key.column()),
        };
        let status = q.status.map(|s| s.as_str());
        // Two shapes rather than `(?2 IS NULL OR status = ?2)`, which keeps SQLite from using
        // the status index.
        let filter = if status.is_some() {
            "run_id = ?1 AND status = ?2"
        } else {
            "run_id = ?1 AND ?2 IS NULL"
        };
        let total: i64 = self.conn.query_row(
            &format!("SELECT COUNT(*) FROM experiments WHERE {filter}"),
            params![run_id, status],
            |r| r.get(0),
        )?;
        // The page's rows are found by sorting row ids alone, then read in full: a deep page
        // of an unindexed sort then moves keys, not whole records (descriptions, judgements).
        let mut st = self.conn.prepare_cached(&format!(
            "SELECT experiments.* FROM (SELECT rowid AS rid FROM experiments WHERE {filter}
                 ORDER BY {order} LIMIT ?3 OFFSET ?4) AS page
             JOIN experiments ON experiments.rowid = page.rid ORDER BY {order}"
        ))?;
        let rows = st.query_map(
            params![
                run_id,
                status,
                q.limit.min(i64::MAX as u64) as i64,
                q.offset.min(i64::MAX as u64) as i64
            ],
            Self::experiment_from_row,
        )?;
        Ok((rows.collect::<Result<_, _>>()?, total as u64))
    }

    /// Every experiment of a run with only what a plot and a summary need (number, status,
    /// objective, description, reason, cost, verification time, holdout), in order: cheaper
    /// than [`Store::experiments`] on long runs.
    pub fn experiment_outlines(&self, run_id: i64) -> Result<Vec<ExperimentRecord>, StoreError> {
        let mut st = self.conn.prepare_cached(
            "SELECT n, status, objective, description, reason, cost_usd, verify_ms, holdout
             FROM experiments WHERE run_id = ?1 ORDER BY n",
        )?;
        let rows = st.query_map([run_id], |r| {
            Ok(ExperimentRecord {
                n: r.get::<_, i64>(0)? as u64,
                status: Status::parse(&r.get::<_, String>(1)?),
                objective: r.get(2)?,
                description: r.get(3)?,
                reason: r.get(4)?,
                cost_usd: r.get(5)?,
                verify_ms: r.get::<_, i64>(6)? as u64,
                holdout: r.get(7)?,
                ..Default::default()
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// A cheap mark of a run's progress (see [`RunChangeMark`]); `None` when there is no such
    /// run.
    pub fn run_change_mark(&self, run_id: i64) -> Result<Option<RunChangeMark>, StoreError> {
        Ok(self
            .conn
            .query_row(
                "SELECT (SELECT COUNT(*) FROM experiments WHERE run_id = ?1),
                        (SELECT COUNT(*) FROM experiments WHERE run_id = ?1 AND status = 'running'),
                        (SELECT COALESCE(finished_at, started_at) FROM experiments
                            WHERE run_id = ?1 ORDER BY n DESC LIMIT 1),
                        (SELECT MAX(id) FROM events WHERE run_id = ?1),
                        state
                 FROM runs WHERE id = ?1",
                [run_id],
                |r| {
                    Ok(RunChangeMark {
                        experiments: r.get::<_, i64>(0)? as u64,
                        running: r.get::<_, i64>(1)? as u64,
                        last_write: r.get::<_, Option<f64>>(2)?.unwrap_or(0.0),
                        last_event: r.get::<_, Option<i64>>(3)?.unwrap_or(0),
                        state: r.get(4)?,
                    })
                },
            )
            .optional()?)
    }

    /// Appends to the event log (never updated or deleted: triggers refuse it).
    pub fn append_event(
        &self,
        run_id: i64,
        experiment: Option<u64>,
        kind: &str,
        data: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT INTO events (run_id, experiment, at, kind, data) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                run_id,
                experiment.map(|n| n as i64),
                now(),
                kind,
                data.to_string()
            ],
        )?;
        Ok(())
    }

    /// Records mechanism hook calls of a run (one transaction).
    pub fn put_mechanism_calls(
        &self,
        run_id: i64,
        calls: &[MechanismCall],
    ) -> Result<(), StoreError> {
        if calls.is_empty() {
            return Ok(());
        }
        let tx = self.conn.unchecked_transaction()?;
        {
            let mut st = tx.prepare_cached(
                "INSERT INTO mechanism_calls (run_id, experiment, mechanism, hook, effect, detail, at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            let at = now();
            for c in calls {
                st.execute(params![
                    run_id,
                    c.experiment as i64,
                    c.mechanism,
                    c.hook,
                    c.effect,
                    c.detail,
                    at
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Mechanism hook calls of a run (of one experiment, when given), in order.
    pub fn mechanism_calls(
        &self,
        run_id: i64,
        experiment: Option<u64>,
    ) -> Result<Vec<MechanismCall>, StoreError> {
        let mut st = self.conn.prepare_cached(
            "SELECT experiment, mechanism, hook, effect, detail FROM mechanism_calls
             WHERE run_id = ?1 AND (?2 IS NULL OR experiment = ?2) ORDER BY id",
        )?;
        let rows = st.query_map(params![run_id, experiment.map(|n| n as i64)], |r| {
            Ok(MechanismCall {
                experiment: r.get::<_, i64>(0)? as u64,
                mechanism: r.get(1)?,
                hook: r.get(2)?,
                effect: r.get(3)?,
                detail: r.get(4)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Events of a run as (experiment, kind, data), in order.
    pub fn events(&self, run_id: i64) -> Result<Vec<(Option<u64>, String, String)>, StoreError> {
        let mut st = self
            .conn
            .prepare("SELECT experiment, kind, data FROM events WHERE run_id = ?1 ORDER BY id")?;
        let rows = st.query_map([run_id], |r| {
            Ok((
                r.get::<_, Option<i64>>(0)?.map(|v| v as u64),
                r.get(1)?,
                r.get(2)?,
            ))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_append_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hone.db");
        let s = Store::open(&path).unwrap();
        let run = s
            .create_run(
                "t", "hone/t", "abc", 7, "knobs", "m", "minimize", "{}", "{}",
            )
            .unwrap();
        let mut e = ExperimentRecord {
            n: 0,
            parent_commit: "abc".into(),
            status: Some(Status::Baseline),
            objective: Some(1.5),
            started_at: now(),
            ..Default::default()
        };
        e.metrics.insert("m".into(), 1.5);
        s.put_experiment(run.id, &e).unwrap();
        e.status = Some(Status::Keep);
        s.put_experiment(run.id, &e).unwrap();
        drop(s);
        let s = Store::open(&path).unwrap();
        let got = s.experiments(run.id).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].status, Some(Status::Keep));
        assert_eq!(got[0].metrics.get("m"), Some(&1.5));
        s.append_event(run.id, Some(0), "x", &serde_json::json!({"a": 1}))
            .unwrap();
        assert!(s.conn.execute("DELETE FROM events", []).is_err());
        assert!(s.conn.execute("UPDATE events SET kind = 'y'", []).is_err());
        assert_eq!(s.events(run.id).unwrap().len(), 1);
        let call = |n: u64, m: &str| MechanismCall {
            experiment: n,
            mechanism: m.into(),
            hook: "filter".into(),
            effect: "rejected".into(),
            detail: "near #1".into(),
        };
        s.put_mechanism_calls(
            run.id,
            &[call(1, "tabu"), call(2, "tabu"), call(2, "bandit")],
        )
        .unwrap();
        assert_eq!(s.mechanism_calls(run.id, None).unwrap().len(), 3);
        assert_eq!(
            s.mechanism_calls(run.id, Some(2)).unwrap(),
            vec![call(2, "tabu"), call(2, "bandit")]
        );
    }

    #[test]
    fn pages_sort_filter_and_change_marks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hone.db");
        let s = Store::open(&path).unwrap();
        let run = s
            .create_run(
                "t", "hone/t", "abc", 7, "knobs", "m", "minimize", "{}", "{}",
            )
            .unwrap();
        let mark0 = s.run_change_mark(run.id).unwrap().unwrap();
        for n in 0..30u64 {
            let status = match n {
                0 => Status::Baseline,
                n if n % 10 == 3 => Status::Crash,
                n if n % 5 == 0 => Status::Keep,
                _ => Status::Discard,
            };
            let e = ExperimentRecord {
                n,
                parent_commit: "abc".into(),
                status: Some(status),
                objective: (status != Status::Crash).then_some(100.0 - (n as f64 * 7.0) % 13.0),
                started_at: n as f64,
                ..Default::default()
            };
            s.put_experiment(run.id, &e).unwrap();
        }
        let ro = Store::open_read_only(&path).unwrap();
        let mark1 = ro.run_change_mark(run.id).unwrap().unwrap();
        assert_ne!(mark0, mark1);
        assert_eq!(mark1.experiments, 30);
        let q = ExperimentQuery {
            status: Some(Status::Crash),
            limit: 2,
            offset: 1,
            ..Default::default()
        };
        let (page, total) = ro.experiments_page(run.id, &q).unwrap();
        assert_eq!(total, 3);
        assert_eq!(page.iter().map(|e| e.n).collect::<Vec<_>>(), vec![13, 23]);
        let q = ExperimentQuery {
            sort: SortKey::Objective,
            descending: true,
            limit: 100,
            ..Default::default()
        };
        let (page, total) = ro.experiments_page(run.id, &q).unwrap();
        assert_eq!((page.len(), total), (30, 30));
        let values: Vec<f64> = page.iter().filter_map(|e| e.objective).collect();
        assert!(values.windows(2).all(|w| w[0] >= w[1]), "{values:?}");
        assert!(
            page[27..].iter().all(|e| e.objective.is_none()),
            "missing values last"
        );
        assert!(ro.put_experiment(run.id, &page[0]).is_err(), "read only");
        assert_eq!(ro.experiment_outlines(run.id).unwrap().len(), 30);
    }
}
