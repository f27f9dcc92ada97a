//! State: runs, experiments, mechanism hook calls and an append-only event log, in SQLite
//! (`.hone/hone.db`, the default) or in a PostgreSQL database shared by many hosts
//! (`[store] url`).
//!
//! One [`Store`] type serves both: each method's SQL is written once, in the dialect the two
//! share (`?N` parameters, which [`pg`] rewrites to `$N`), and runs on whichever connection
//! the store holds. In PostgreSQL the tables live in their own schema `hone_store`, and every
//! run carries the key of its repository (`repo`), so many projects can share one database; a
//! tag is unique per repository. In a repository's own SQLite file that key is empty.
//!
//! SQLite runs in WAL mode so readers (`hone status`, `hone log`) never block the loop; its
//! schema is versioned with `PRAGMA user_version`. PostgreSQL's is versioned in
//! `hone_store.schema_migrations`, applied under an advisory lock so that concurrent first
//! connections apply each migration once. Either way each migration runs in a transaction, and
//! the event log refuses updates and deletes in the database itself (triggers). The engine
//! writes an experiment's start before its verifier starts and its outcome before any ref
//! moves, so a crash at any point leaves enough to recover from.

mod pg;
#[cfg(test)]
pub(crate) mod tests;

use crate::spec::AgentKind;
use crate::verify::Direction;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::Connection;

/// A store failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("state database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("PostgreSQL store: {0}")]
    Postgres(#[from] postgres::Error),
    #[error("cannot reach the PostgreSQL store: {0}; check [store] url (postgres://user@host:port/database) and that the server runs")]
    Connect(String),
    #[error("bad record in the store: {0}")]
    Corrupt(String),
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

/// The status of an experiment, plus `running` while it is in progress: `baseline` (experiment
/// 0, the unmodified project), `keep` (beat the best by more than the threshold), `discard`
/// (measured, not better), the failures `crash`, `timeout` and `violation`, `rejected` (refused
/// before any compute), `invalid` (nothing to measure) and `aborted` (interrupted mid-way).
/// README.md's "Experiment statuses" says what each one covers.
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

/// Where a run stands. Stored as its name (`running`, `interrupted`, `stopped`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    /// A session is working on it, or one died without a clean stop (resumable).
    Running,
    /// A session stopped and it can be resumed as it is (Ctrl-C, a failed baseline).
    Interrupted,
    /// A stop condition held: it is finished.
    Stopped,
}

impl RunState {
    pub const ALL: [RunState; 3] = [RunState::Running, RunState::Interrupted, RunState::Stopped];

    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Interrupted => "interrupted",
            RunState::Stopped => "stopped",
        }
    }

    pub fn parse(s: &str) -> Option<RunState> {
        RunState::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

impl std::fmt::Display for RunState {
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
    /// The `[agent] kind` it was started with, as written (typed when written; kept as text
    /// when read, since a newer hone may know agent presets this one does not, without any
    /// change of schema). [`RunRecord::agent_kind`] reads it.
    pub agent: String,
    pub metric: String,
    pub direction: Direction,
    pub state: RunState,
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
    /// Where in the experiment it was called.
    pub hook: Hook,
    /// What the call did.
    pub effect: Effect,
    pub detail: String,
}

/// The current best: the last kept experiment, else the baseline.
pub fn best_experiment(exps: &[ExperimentRecord]) -> Option<&ExperimentRecord> {
    exps.iter()
        .rev()
        .find(|e| matches!(e.status(), Status::Keep | Status::Baseline))
}

/// Where in an experiment a mechanism's hook was called. Stored as its text
/// ([`Hook::as_str`]); a text this version does not know is kept as [`Hook::Other`].
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Hook {
    #[default]
    OnStart,
    BeforePropose,
    Candidates,
    Filter,
    /// A question to the run's LLM and its answer (the strategy's revision).
    Ask,
    OnResult,
    OnSegmentEnd,
    /// Level 2: a research round, a validation step, activation and probation.
    Research,
    /// A hook recorded by another version of hone.
    Other(String),
}

impl Hook {
    /// The hooks this version records, in the order an experiment calls them.
    pub const ALL: &'static [Hook] = &[
        Hook::OnStart,
        Hook::BeforePropose,
        Hook::Candidates,
        Hook::Filter,
        Hook::Ask,
        Hook::OnResult,
        Hook::OnSegmentEnd,
        Hook::Research,
    ];

    /// The stored text.
    pub fn as_str(&self) -> &str {
        match self {
            Hook::OnStart => "on_start",
            Hook::BeforePropose => "before_propose",
            Hook::Candidates => "candidates",
            Hook::Filter => "filter",
            Hook::Ask => "ask",
            Hook::OnResult => "on_result",
            Hook::OnSegmentEnd => "on_segment_end",
            Hook::Research => "research",
            Hook::Other(s) => s,
        }
    }

    /// The hook a stored text names; never fails (an unknown text is kept as `Other`).
    pub fn parse(s: &str) -> Hook {
        Hook::ALL
            .iter()
            .find(|h| h.as_str() == s)
            .cloned()
            .unwrap_or_else(|| Hook::Other(s.to_string()))
    }
}

/// What a hook invocation did. Stored as its text ([`Effect::as_str`]); a text this version
/// does not know is kept as [`Effect::Other`].
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Effect {
    /// Called; changed nothing.
    #[default]
    None,
    /// Gave guidance for the proposal.
    Guided,
    /// Suggested knob configurations.
    Suggested,
    Rejected,
    Modified,
    /// A modification that could not apply (the proposal has no knob configuration).
    Ignored,
    /// Changed the mechanism's own state in a way that changes the search (a restart, a mode
    /// switch, a new strategy).
    Changed,
    /// The portfolio turned a mechanism on or off.
    Activated,
    Deactivated,
    /// A step of a script's validation ladder (or its probation) passed.
    Passed,
    /// A step of a script's validation ladder failed: the script is dropped.
    Failed,
    /// An effect recorded by another version of hone.
    Other(String),
}

impl Effect {
    /// The effects this version records.
    pub const ALL: &'static [Effect] = &[
        Effect::None,
        Effect::Guided,
        Effect::Suggested,
        Effect::Rejected,
        Effect::Modified,
        Effect::Ignored,
        Effect::Changed,
        Effect::Activated,
        Effect::Deactivated,
        Effect::Passed,
        Effect::Failed,
    ];

    /// The stored text.
    pub fn as_str(&self) -> &str {
        match self {
            Effect::None => "none",
            Effect::Guided => "guided",
            Effect::Suggested => "suggested",
            Effect::Rejected => "rejected",
            Effect::Modified => "modified",
            Effect::Ignored => "ignored",
            Effect::Changed => "changed",
            Effect::Activated => "activated",
            Effect::Deactivated => "deactivated",
            Effect::Passed => "passed",
            Effect::Failed => "failed",
            Effect::Other(s) => s,
        }
    }

    /// The effect a stored text names; never fails (an unknown text is kept as `Other`).
    pub fn parse(s: &str) -> Effect {
        Effect::ALL
            .iter()
            .find(|e| e.as_str() == s)
            .cloned()
            .unwrap_or_else(|| Effect::Other(s.to_string()))
    }
}

impl std::fmt::Display for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for Effect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Serialized as the stored text, so JSON output reads as it did when these were strings.
impl serde::Serialize for Hook {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl serde::Serialize for Effect {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl RunRecord {
    /// The agent kind it was started with, if this hone knows it.
    pub fn agent_kind(&self) -> Option<AgentKind> {
        AgentKind::parse(&self.agent)
    }
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
    // 7: the repository a run belongs to (shared PostgreSQL databases hold many; a
    // repository's own SQLite file holds one, so its key stays empty).
    r#"
ALTER TABLE runs ADD COLUMN repo TEXT NOT NULL DEFAULT '';
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

/// Where a repository's records live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreLocation {
    /// A repository's own SQLite file (`.hone/hone.db`).
    Sqlite(PathBuf),
    /// A PostgreSQL database (`[store] url`) shared by many hosts and repositories; `repo`
    /// names this repository's runs there.
    Postgres { url: String, repo: String },
}

impl StoreLocation {
    /// Where this location is, for messages: the SQLite path, or the PostgreSQL server and
    /// database without the password.
    pub fn describe(&self) -> String {
        match self {
            StoreLocation::Sqlite(p) => p.display().to_string(),
            StoreLocation::Postgres { url, repo } => {
                format!("{} (repository {repo})", pg::redact(url))
            }
        }
    }
}

/// The connection a store holds.
enum Db {
    Sqlite(Connection),
    Postgres(Box<pg::Pg>),
}

/// The run store: SQLite or PostgreSQL behind one API (see the module's documentation).
pub struct Store {
    db: Db,
    /// The repository whose runs this store reads and writes ("" in a SQLite file).
    repo: String,
    /// How many [`Store::in_transaction`] calls are open (inner ones join the outer one).
    tx_depth: Cell<u32>,
}

/// Seconds since the Unix epoch, as a float.
pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// A query parameter, bound the same way by both databases.
#[derive(Debug)]
enum Val<'a> {
    Int(Option<i64>),
    Real(Option<f64>),
    Text(Option<&'a str>),
}

fn int(v: u64) -> Val<'static> {
    Val::Int(Some(v.min(i64::MAX as u64) as i64))
}

fn text(v: &str) -> Val<'_> {
    Val::Text(Some(v))
}

impl rusqlite::ToSql for Val<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        match self {
            Val::Int(v) => v.to_sql(),
            Val::Real(v) => v.to_sql(),
            Val::Text(v) => v.to_sql(),
        }
    }
}

/// A row of either database, read by column name.
trait Cells {
    fn int(&self, col: &str) -> Result<Option<i64>, StoreError>;
    fn real(&self, col: &str) -> Result<Option<f64>, StoreError>;
    fn text(&self, col: &str) -> Result<Option<String>, StoreError>;

    fn req_int(&self, col: &str) -> Result<i64, StoreError> {
        self.int(col)?
            .ok_or_else(|| StoreError::Corrupt(format!("{col} is NULL")))
    }
    fn req_u64(&self, col: &str) -> Result<u64, StoreError> {
        Ok(self.req_int(col)?.max(0) as u64)
    }
    fn req_real(&self, col: &str) -> Result<f64, StoreError> {
        self.real(col)?
            .ok_or_else(|| StoreError::Corrupt(format!("{col} is NULL")))
    }
    fn req_text(&self, col: &str) -> Result<String, StoreError> {
        self.text(col)?
            .ok_or_else(|| StoreError::Corrupt(format!("{col} is NULL")))
    }
}

impl Cells for rusqlite::Row<'_> {
    fn int(&self, col: &str) -> Result<Option<i64>, StoreError> {
        Ok(self.get(col)?)
    }
    fn real(&self, col: &str) -> Result<Option<f64>, StoreError> {
        Ok(self.get(col)?)
    }
    fn text(&self, col: &str) -> Result<Option<String>, StoreError> {
        Ok(self.get(col)?)
    }
}

/// The columns of `experiments` that [`Store::put_experiment`] writes, in parameter order.
const EXPERIMENT_COLUMNS: &[&str] = &[
    "run_id",
    "n",
    "parent_commit",
    "candidate_commit",
    "status",
    "objective",
    "metrics",
    "config",
    "description",
    "reason",
    "files_changed",
    "lines_added",
    "lines_deleted",
    "propose_ms",
    "gate_ms",
    "verify_ms",
    "total_ms",
    "started_at",
    "finished_at",
    "log_path",
    "pid",
    "pid_start",
    "cost_usd",
    "runs",
    "judgement",
    "tree",
    "holdout",
    "tokens",
];

/// `INSERT ... ON CONFLICT DO UPDATE` of a whole experiment row (both dialects' upsert).
fn put_experiment_sql() -> &'static str {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SQL.get_or_init(|| {
        let placeholders: Vec<String> = (1..=EXPERIMENT_COLUMNS.len())
            .map(|i| format!("?{i}"))
            .collect();
        let updates: Vec<String> = EXPERIMENT_COLUMNS[2..]
            .iter()
            .map(|c| format!("{c} = excluded.{c}"))
            .collect();
        format!(
            "INSERT INTO experiments ({}) VALUES ({}) ON CONFLICT (run_id, n) DO UPDATE SET {}",
            EXPERIMENT_COLUMNS.join(", "),
            placeholders.join(", "),
            updates.join(", ")
        )
    })
}

impl Store {
    /// Opens (creating if needed) a SQLite database and brings its schema up to date.
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
        Ok(Store::with(Db::Sqlite(conn), ""))
    }

    /// Opens an existing SQLite database read-mostly; `None` when there is none yet.
    pub fn open_existing(path: &Path) -> Result<Option<Store>, StoreError> {
        if !path.exists() {
            return Ok(None);
        }
        Store::open(path).map(Some)
    }

    /// Opens an existing, up-to-date SQLite database for reading only (the dashboard: many
    /// readers beside one `hone run` writing). Fails on a schema this hone does not know; open
    /// it once with [`Store::open`] first to bring an older one up to date.
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
        Ok(Store::with(Db::Sqlite(conn), ""))
    }

    /// Connects to a PostgreSQL store, brings its schema up to date, and reads and writes the
    /// runs of repository `repo` there.
    pub fn connect(url: &str, repo: &str) -> Result<Store, StoreError> {
        Ok(Store::with(
            Db::Postgres(Box::new(pg::Pg::connect(url, false)?)),
            repo,
        ))
    }

    /// Opens the store at `location` (creating and migrating it as needed).
    pub fn open_at(location: &StoreLocation) -> Result<Store, StoreError> {
        match location {
            StoreLocation::Sqlite(path) => Store::open(path),
            StoreLocation::Postgres { url, repo } => Store::connect(url, repo),
        }
    }

    /// Opens the store at `location` if it exists (a SQLite file that is there; a PostgreSQL
    /// store always does, once reachable).
    pub fn open_existing_at(location: &StoreLocation) -> Result<Option<Store>, StoreError> {
        match location {
            StoreLocation::Sqlite(path) => Store::open_existing(path),
            StoreLocation::Postgres { .. } => Store::open_at(location).map(Some),
        }
    }

    /// Opens the store at `location` for reading only: a read-only SQLite connection (see
    /// [`Store::open_read_only`]), or a PostgreSQL session whose transactions are read-only.
    pub fn open_read_only_at(location: &StoreLocation) -> Result<Store, StoreError> {
        match location {
            StoreLocation::Sqlite(path) => Store::open_read_only(path),
            StoreLocation::Postgres { url, repo } => Ok(Store::with(
                Db::Postgres(Box::new(pg::Pg::connect(url, true)?)),
                repo,
            )),
        }
    }

    fn with(db: Db, repo: &str) -> Store {
        Store {
            db,
            repo: repo.to_string(),
            tx_depth: Cell::new(0),
        }
    }

    /// The repository whose runs this store holds ("" in a repository's own SQLite file).
    pub fn repo(&self) -> &str {
        &self.repo
    }

    /// Whether the records live in PostgreSQL (shared with other hosts).
    pub fn is_shared(&self) -> bool {
        matches!(self.db, Db::Postgres(_))
    }

    /// Runs one statement; the number of rows it changed.
    fn exec(&self, sql: &str, params: &[Val<'_>]) -> Result<u64, StoreError> {
        match &self.db {
            Db::Sqlite(conn) => {
                let mut st = conn.prepare_cached(sql)?;
                Ok(st.execute(rusqlite::params_from_iter(params.iter()))? as u64)
            }
            Db::Postgres(pg) => pg.execute(sql, params),
        }
    }

    /// Runs a query and converts each row with `f`.
    fn query<T>(
        &self,
        sql: &str,
        params: &[Val<'_>],
        mut f: impl FnMut(&dyn Cells) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        match &self.db {
            Db::Sqlite(conn) => {
                let mut st = conn.prepare_cached(sql)?;
                let mut rows = st.query(rusqlite::params_from_iter(params.iter()))?;
                let mut out = Vec::new();
                while let Some(row) = rows.next()? {
                    out.push(f(row)?);
                }
                Ok(out)
            }
            Db::Postgres(pg) => pg
                .query(sql, params)?
                .iter()
                .map(|row| f(row as &dyn Cells))
                .collect(),
        }
    }

    /// The first row of a query, if any.
    fn query_opt<T>(
        &self,
        sql: &str,
        params: &[Val<'_>],
        f: impl FnMut(&dyn Cells) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        Ok(self.query(sql, params, f)?.into_iter().next())
    }

    #[allow(clippy::too_many_arguments)]
    pub fn create_run(
        &self,
        tag: &str,
        branch: &str,
        base_commit: &str,
        seed: u64,
        agent: AgentKind,
        metric: &str,
        direction: Direction,
        seals: &str,
        spec_json: &str,
    ) -> Result<RunRecord, StoreError> {
        let id = self
            .query_opt(
                "INSERT INTO runs (repo, tag, branch, base_commit, created_at, seed, agent, metric, direction, state, seals, spec_json)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'running', ?10, ?11) RETURNING id",
                &[
                    text(&self.repo),
                    text(tag),
                    text(branch),
                    text(base_commit),
                    Val::Real(Some(now())),
                    Val::Int(Some(seed as i64)),
                    text(agent.as_str()),
                    text(metric),
                    text(direction.as_str()),
                    text(seals),
                    text(spec_json),
                ],
                |r| r.req_int("id"),
            )?
            .ok_or_else(|| StoreError::Corrupt("a new run has no id".into()))?;
        self.query_opt(
            "SELECT * FROM runs WHERE id = ?1",
            &[Val::Int(Some(id))],
            run_from_row,
        )?
        .ok_or_else(|| StoreError::Corrupt(format!("run {id} vanished")))
    }

    /// The run with this tag.
    pub fn run_by_tag(&self, tag: &str) -> Result<Option<RunRecord>, StoreError> {
        self.query_opt(
            "SELECT * FROM runs WHERE repo = ?1 AND tag = ?2",
            &[text(&self.repo), text(tag)],
            run_from_row,
        )
    }

    /// All runs, oldest first.
    pub fn runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        self.query(
            "SELECT * FROM runs WHERE repo = ?1 ORDER BY id",
            &[text(&self.repo)],
            run_from_row,
        )
    }

    /// The newest run, if any.
    pub fn latest_run(&self) -> Result<Option<RunRecord>, StoreError> {
        self.query_opt(
            "SELECT * FROM runs WHERE repo = ?1 ORDER BY id DESC LIMIT 1",
            &[text(&self.repo)],
            run_from_row,
        )
    }

    pub fn set_active_seconds(&self, run_id: i64, secs: f64) -> Result<(), StoreError> {
        self.exec(
            "UPDATE runs SET active_seconds = ?2 WHERE id = ?1",
            &[Val::Int(Some(run_id)), Val::Real(Some(secs))],
        )?;
        Ok(())
    }

    /// Records where a run stands and why its session ended.
    pub fn set_run_state(
        &self,
        run_id: i64,
        state: RunState,
        reason: Option<&str>,
    ) -> Result<(), StoreError> {
        self.exec(
            "UPDATE runs SET state = ?2, stop_reason = ?3 WHERE id = ?1",
            &[
                Val::Int(Some(run_id)),
                text(state.as_str()),
                Val::Text(reason),
            ],
        )?;
        Ok(())
    }

    /// Writes an experiment row (insert or replace): the whole record is the truth.
    pub fn put_experiment(&self, run_id: i64, e: &ExperimentRecord) -> Result<(), StoreError> {
        let metrics = serde_json::to_string(&e.metrics).unwrap_or_else(|_| "{}".into());
        let config = e.config.as_ref().map(|c| c.to_string());
        let runs = serde_json::to_string(&e.runs).unwrap_or_else(|_| "[]".into());
        let judgement = e
            .judgement
            .as_ref()
            .and_then(|j| serde_json::to_string(j).ok());
        self.exec(
            put_experiment_sql(),
            &[
                Val::Int(Some(run_id)),
                int(e.n),
                text(&e.parent_commit),
                Val::Text(e.candidate_commit.as_deref()),
                text(e.status().as_str()),
                Val::Real(e.objective),
                text(&metrics),
                Val::Text(config.as_deref()),
                text(&e.description),
                text(&e.reason),
                int(e.files_changed),
                int(e.lines_added),
                int(e.lines_deleted),
                int(e.propose_ms),
                int(e.gate_ms),
                int(e.verify_ms),
                int(e.total_ms),
                Val::Real(Some(e.started_at)),
                Val::Real(e.finished_at),
                Val::Text(e.log_path.as_deref()),
                Val::Int(e.pid.map(i64::from)),
                Val::Int(e.pid_start.map(|v| v as i64)),
                Val::Real(Some(e.cost_usd)),
                text(&runs),
                Val::Text(judgement.as_deref()),
                Val::Text(e.tree.as_deref()),
                Val::Real(e.holdout),
                int(e.tokens),
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
        self.exec(
            "UPDATE experiments SET pid = ?3, pid_start = ?4 WHERE run_id = ?1 AND n = ?2",
            &[
                Val::Int(Some(run_id)),
                int(n),
                Val::Int(Some(i64::from(pid))),
                Val::Int(start.map(|v| v as i64)),
            ],
        )?;
        Ok(())
    }

    /// Every experiment of a run, in order.
    pub fn experiments(&self, run_id: i64) -> Result<Vec<ExperimentRecord>, StoreError> {
        self.query(
            "SELECT * FROM experiments WHERE run_id = ?1 ORDER BY n",
            &[Val::Int(Some(run_id))],
            experiment_from_row,
        )
    }

    /// One experiment.
    pub fn experiment(&self, run_id: i64, n: u64) -> Result<Option<ExperimentRecord>, StoreError> {
        self.query_opt(
            "SELECT * FROM experiments WHERE run_id = ?1 AND n = ?2",
            &[Val::Int(Some(run_id)), int(n)],
            experiment_from_row,
        )
    }

    /// Runs `f` in one transaction: committed when it returns `Ok`, rolled back otherwise.
    /// Many writes in one go (an import, a benchmark's fixture) then cost one sync, not one
    /// each. A call inside another joins the outer transaction.
    pub fn in_transaction<T>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let depth = self.tx_depth.get();
        if depth > 0 {
            return f(self);
        }
        self.batch(match self.db {
            Db::Sqlite(_) => "BEGIN IMMEDIATE",
            Db::Postgres(_) => "BEGIN",
        })?;
        self.tx_depth.set(1);
        let out = f(self);
        self.tx_depth.set(0);
        match out {
            Ok(v) => {
                self.batch("COMMIT")?;
                Ok(v)
            }
            Err(e) => {
                // The error that made us roll back is the one to report.
                let _ = self.batch("ROLLBACK");
                Err(e)
            }
        }
    }

    fn batch(&self, sql: &str) -> Result<(), StoreError> {
        match &self.db {
            Db::Sqlite(conn) => conn.execute_batch(sql)?,
            Db::Postgres(pg) => pg.batch(sql)?,
        }
        Ok(())
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
        let mut params = vec![Val::Int(Some(run_id))];
        // Two shapes rather than `(?2 IS NULL OR status = ?2)`, which keeps SQLite from using
        // the status index (and leaves PostgreSQL without the parameter's type).
        let filter = match q.status {
            Some(s) => {
                params.push(text(s.as_str()));
                "run_id = ?1 AND status = ?2"
            }
            None => "run_id = ?1",
        };
        let total = self
            .query_opt(
                &format!("SELECT COUNT(*) AS total FROM experiments WHERE {filter}"),
                &params,
                |r| r.req_u64("total"),
            )?
            .unwrap_or(0);
        let (limit, offset) = (params.len() + 1, params.len() + 2);
        params.push(int(q.limit));
        params.push(int(q.offset));
        // The page's rows are found by sorting keys alone, then read in full: a deep page of
        // an unindexed sort then moves keys, not whole records (descriptions, judgements).
        let rows = self.query(
            &format!(
                "SELECT experiments.* FROM (SELECT n AS page_n FROM experiments WHERE {filter}
                     ORDER BY {order} LIMIT ?{limit} OFFSET ?{offset}) AS page
                 JOIN experiments ON experiments.run_id = ?1 AND experiments.n = page.page_n
                 ORDER BY {order}"
            ),
            &params,
            experiment_from_row,
        )?;
        Ok((rows, total))
    }

    /// Every experiment of a run with only what a plot and a summary need (number, status,
    /// objective, description, reason, cost, verification time, holdout), in order: cheaper
    /// than [`Store::experiments`] on long runs.
    pub fn experiment_outlines(&self, run_id: i64) -> Result<Vec<ExperimentRecord>, StoreError> {
        self.query(
            "SELECT n, status, objective, description, reason, cost_usd, verify_ms, holdout
             FROM experiments WHERE run_id = ?1 ORDER BY n",
            &[Val::Int(Some(run_id))],
            |r| {
                Ok(ExperimentRecord {
                    n: r.req_u64("n")?,
                    status: Status::parse(&r.req_text("status")?),
                    objective: r.real("objective")?,
                    description: r.req_text("description")?,
                    reason: r.req_text("reason")?,
                    cost_usd: r.req_real("cost_usd")?,
                    verify_ms: r.req_u64("verify_ms")?,
                    holdout: r.real("holdout")?,
                    ..Default::default()
                })
            },
        )
    }

    /// A cheap mark of a run's progress (see [`RunChangeMark`]); `None` when there is no such
    /// run.
    pub fn run_change_mark(&self, run_id: i64) -> Result<Option<RunChangeMark>, StoreError> {
        self.query_opt(
            "SELECT (SELECT COUNT(*) FROM experiments WHERE run_id = ?1) AS experiments,
                    (SELECT COUNT(*) FROM experiments WHERE run_id = ?1 AND status = 'running') AS running,
                    (SELECT COALESCE(finished_at, started_at) FROM experiments
                        WHERE run_id = ?1 ORDER BY n DESC LIMIT 1) AS last_write,
                    (SELECT MAX(id) FROM events WHERE run_id = ?1) AS last_event,
                    state
             FROM runs WHERE id = ?1",
            &[Val::Int(Some(run_id))],
            |r| {
                Ok(RunChangeMark {
                    experiments: r.req_u64("experiments")?,
                    running: r.req_u64("running")?,
                    last_write: r.real("last_write")?.unwrap_or(0.0),
                    last_event: r.int("last_event")?.unwrap_or(0),
                    state: r.req_text("state")?,
                })
            },
        )
    }

    /// Appends to the event log (never updated or deleted: triggers refuse it).
    pub fn append_event(
        &self,
        run_id: i64,
        experiment: Option<u64>,
        kind: &str,
        data: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let data = data.to_string();
        self.exec(
            "INSERT INTO events (run_id, experiment, at, kind, data) VALUES (?1, ?2, ?3, ?4, ?5)",
            &[
                Val::Int(Some(run_id)),
                Val::Int(experiment.map(|n| n.min(i64::MAX as u64) as i64)),
                Val::Real(Some(now())),
                text(kind),
                text(&data),
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
        let at = now();
        self.in_transaction(|s| {
            for c in calls {
                s.exec(
                    "INSERT INTO mechanism_calls (run_id, experiment, mechanism, hook, effect, detail, at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    &[
                        Val::Int(Some(run_id)),
                        int(c.experiment),
                        text(&c.mechanism),
                        text(c.hook.as_str()),
                        text(c.effect.as_str()),
                        text(&c.detail),
                        Val::Real(Some(at)),
                    ],
                )?;
            }
            Ok(())
        })
    }

    /// Mechanism hook calls of a run (of one experiment, when given), in order.
    pub fn mechanism_calls(
        &self,
        run_id: i64,
        experiment: Option<u64>,
    ) -> Result<Vec<MechanismCall>, StoreError> {
        let read = |r: &dyn Cells| {
            Ok(MechanismCall {
                experiment: r.req_u64("experiment")?,
                mechanism: r.req_text("mechanism")?,
                hook: Hook::parse(&r.req_text("hook")?),
                effect: Effect::parse(&r.req_text("effect")?),
                detail: r.req_text("detail")?,
            })
        };
        const COLUMNS: &str = "SELECT experiment, mechanism, hook, effect, detail FROM mechanism_calls WHERE run_id = ?1";
        match experiment {
            None => self.query(
                &format!("{COLUMNS} ORDER BY id"),
                &[Val::Int(Some(run_id))],
                read,
            ),
            Some(n) => self.query(
                &format!("{COLUMNS} AND experiment = ?2 ORDER BY id"),
                &[Val::Int(Some(run_id)), int(n)],
                read,
            ),
        }
    }

    /// Events of a run as (experiment, kind, data), in order.
    pub fn events(&self, run_id: i64) -> Result<Vec<(Option<u64>, String, String)>, StoreError> {
        self.query(
            "SELECT experiment, kind, data FROM events WHERE run_id = ?1 ORDER BY id",
            &[Val::Int(Some(run_id))],
            |r| {
                Ok((
                    r.int("experiment")?.map(|v| v.max(0) as u64),
                    r.req_text("kind")?,
                    r.req_text("data")?,
                ))
            },
        )
    }
}

/// A text column read as the type it names; text this hone does not know is a corrupt record
/// (a new direction or run state would come with a new schema version, which an older hone
/// refuses before reading any row).
fn typed<T>(r: &dyn Cells, col: &str, parse: impl Fn(&str) -> Option<T>) -> Result<T, StoreError> {
    let t = r.req_text(col)?;
    parse(&t).ok_or_else(|| {
        StoreError::Corrupt(format!(
            "runs.{col} is `{t}`, which this hone does not know"
        ))
    })
}

fn run_from_row(r: &dyn Cells) -> Result<RunRecord, StoreError> {
    Ok(RunRecord {
        id: r.req_int("id")?,
        tag: r.req_text("tag")?,
        branch: r.req_text("branch")?,
        base_commit: r.req_text("base_commit")?,
        created_at: r.req_real("created_at")?,
        seed: r.req_int("seed")? as u64,
        agent: r.req_text("agent")?,
        metric: r.req_text("metric")?,
        direction: typed(r, "direction", Direction::parse)?,
        state: typed(r, "state", RunState::parse)?,
        stop_reason: r.text("stop_reason")?,
        active_seconds: r.req_real("active_seconds")?,
        seals: r.req_text("seals")?,
        spec_json: r.req_text("spec_json")?,
    })
}

fn experiment_from_row(r: &dyn Cells) -> Result<ExperimentRecord, StoreError> {
    let metrics = r.req_text("metrics")?;
    let status = r.req_text("status")?;
    Ok(ExperimentRecord {
        n: r.req_u64("n")?,
        parent_commit: r.req_text("parent_commit")?,
        candidate_commit: r.text("candidate_commit")?,
        status: Status::parse(&status),
        objective: r.real("objective")?,
        metrics: serde_json::from_str(&metrics).unwrap_or_default(),
        config: r
            .text("config")?
            .and_then(|c| serde_json::from_str(&c).ok()),
        description: r.req_text("description")?,
        reason: r.req_text("reason")?,
        files_changed: r.req_u64("files_changed")?,
        lines_added: r.req_u64("lines_added")?,
        lines_deleted: r.req_u64("lines_deleted")?,
        propose_ms: r.req_u64("propose_ms")?,
        gate_ms: r.req_u64("gate_ms")?,
        verify_ms: r.req_u64("verify_ms")?,
        total_ms: r.req_u64("total_ms")?,
        started_at: r.req_real("started_at")?,
        finished_at: r.real("finished_at")?,
        log_path: r.text("log_path")?,
        pid: r.int("pid")?.and_then(|v| u32::try_from(v).ok()),
        pid_start: r.int("pid_start")?.map(|v| v as u64),
        cost_usd: r.req_real("cost_usd")?,
        runs: serde_json::from_str(&r.req_text("runs")?).unwrap_or_default(),
        judgement: r
            .text("judgement")?
            .and_then(|j| serde_json::from_str(&j).ok()),
        tree: r.text("tree")?,
        holdout: r.real("holdout")?,
        tokens: r.req_u64("tokens")?,
    })
}
