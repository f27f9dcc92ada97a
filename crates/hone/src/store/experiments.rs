//! An experiment's rows: writing one whole (an upsert of every column), its running process,
//! reading one, all, or a sorted and filtered page of a run's experiments, and their outlines
//! (what a plot needs).

use super::sql::{experiment_from_row, json_cell, point_from_row, with_outline};
use super::{int, text, ExperimentRecord, Status, Store, StoreError, Val};

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
        // A pid is there to kill its group after hone's `kill -9`, which its write reaching
        // the operating system ensures; after a power loss there is no group left to kill.
        // So in SQLite (outside a transaction) its commit skips the sync, as a curve point's
        // does: several verifiers starting at once do not queue behind each other's syncs,
        // nor the coordinator behind theirs.
        self.relaxed(|| {
            self.exec(
                "UPDATE experiments SET pid = ?3, pid_start = ?4 WHERE run_id = ?1 AND n = ?2",
                &[
                    Val::Int(Some(run_id)),
                    int(n),
                    Val::Int(Some(i64::from(pid))),
                    Val::Int(start.map(|v| v as i64)),
                ],
            )
            .map(|_| ())
        })
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

    /// Every experiment of a run numbered `upto` or less (all of them with `None`), in order,
    /// with only its number, status and configuration: what the knobs' crash narrowings read
    /// (`propose::optimizer::narrowings`, `narrowed_ranges`), without the texts, metrics and
    /// judgements that reading whole records parses.
    pub fn configurations(
        &self,
        run_id: i64,
        upto: Option<u64>,
    ) -> Result<Vec<ExperimentRecord>, StoreError> {
        let mut out = Vec::new();
        self.each_configuration(run_id, upto, &mut |e| out.push(e))?;
        Ok(out)
    }

    /// [`Store::configurations`] one experiment at a time, none kept: a reader of a long run
    /// (`hone show`'s narrowings) holds one record at a time.
    pub fn each_configuration(
        &self,
        run_id: i64,
        upto: Option<u64>,
        f: &mut dyn FnMut(ExperimentRecord),
    ) -> Result<(), StoreError> {
        self.each_configuration_from(run_id, 0, upto, f)
    }

    /// [`Store::each_configuration`] of the experiments numbered `from` or more.
    pub fn each_configuration_from(
        &self,
        run_id: i64,
        from: u64,
        upto: Option<u64>,
        f: &mut dyn FnMut(ExperimentRecord),
    ) -> Result<(), StoreError> {
        let upto = upto.map_or(i64::MAX, |n| i64::try_from(n).unwrap_or(i64::MAX));
        self.for_each_row(
            "SELECT n, status, config FROM experiments WHERE run_id = ?1 AND n >= ?3 AND n <= ?2 \
             ORDER BY n",
            &[Val::Int(Some(run_id)), Val::Int(Some(upto)), int(from)],
            &mut |r| {
                f(ExperimentRecord {
                    n: r.req_u64("n")?,
                    status: Status::parse(&r.req_text("status")?),
                    // As a whole record's: a configuration that is not JSON is none.
                    config: json_cell(r, "config")?,
                    ..Default::default()
                });
                Ok(())
            },
        )
    }

    /// One page of a run's experiments, sorted and filtered in SQL (every sort but by value
    /// served by an index, filtered or not: a deep page of a run of 100,000 steps over index
    /// entries, it sorts none), and how many experiments match the filter in all (from the
    /// run's tallies). Ties, and experiments
    /// without a value, go by number; missing values sort last either way.
    pub fn experiments_page(
        &self,
        run_id: i64,
        q: &ExperimentQuery,
    ) -> Result<(Vec<ExperimentRecord>, u64), StoreError> {
        let dir = if q.descending { "DESC" } else { "ASC" };
        // Only a column that can be NULL says where NULLs go: the others' order is then the
        // plain one that an index on (run_id[, status], column, n) serves, read either way.
        let order = match q.sort {
            SortKey::Number => format!("n {dir}"),
            SortKey::Objective => format!("objective {dir} NULLS LAST, n {dir}"),
            key => format!("{} {dir}, n {dir}", key.column()),
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
        let total = self.count_experiments(run_id, q.status)?;
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

    /// Every experiment of a run with only what a plot, a summary and the report need (number,
    /// status, objective, description, reason, cost, verification time, holdout, knob
    /// configuration), in order: cheaper than [`Store::experiments`] on long runs.
    pub fn experiment_outlines(&self, run_id: i64) -> Result<Vec<ExperimentRecord>, StoreError> {
        self.query(
            "SELECT n, status, objective, description, reason, cost_usd, verify_ms, holdout, config
             FROM experiments WHERE run_id = ?1 ORDER BY n",
            &[Val::Int(Some(run_id))],
            |r| with_outline(r, point_from_row(r)?),
        )
    }

    /// The `limit` newest experiments of a run as [`Store::experiment_outlines`] reads them,
    /// in order: what a bounded listing of a long run shows.
    pub fn latest_outlines(
        &self,
        run_id: i64,
        limit: u64,
    ) -> Result<Vec<ExperimentRecord>, StoreError> {
        let mut out = self.query(
            "SELECT n, status, objective, description, reason, cost_usd, verify_ms, holdout, config
             FROM experiments WHERE run_id = ?1 ORDER BY n DESC LIMIT ?2",
            &[
                Val::Int(Some(run_id)),
                Val::Int(Some(i64::try_from(limit).unwrap_or(i64::MAX))),
            ],
            |r| with_outline(r, point_from_row(r)?),
        )?;
        out.reverse();
        Ok(out)
    }

    /// Every experiment of a run with a holdout value, as [`Store::experiment_outlines`]
    /// reads them, in order (the partial index `experiments_with_holdout` finds them: a few
    /// however long the run; `+n` keeps SQLite from walking the primary key in order
    /// instead, 60 ms at 100,000 experiments).
    pub fn holdout_outlines(&self, run_id: i64) -> Result<Vec<ExperimentRecord>, StoreError> {
        self.query(
            "SELECT n, status, objective, description, reason, cost_usd, verify_ms, holdout, config
             FROM experiments WHERE run_id = ?1 AND holdout IS NOT NULL ORDER BY +n",
            &[Val::Int(Some(run_id))],
            |r| with_outline(r, point_from_row(r)?),
        )
    }
}
