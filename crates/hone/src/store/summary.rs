//! A run's figures read without loading its records (the views of a run of 100,000
//! experiments: `hone status`, `hone log`, the dashboard's counters): counts and totals from
//! the run's tallies (kept by the database with every write, see `schema` migration 10), the
//! baseline and the best found by index, the rows in flight, and every row streamed one at a
//! time.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use super::sql::{experiment_from_row, point_from_row};
use super::{int, text, Db, ExperimentRecord, Status, Store, StoreError, Val};

/// Rows read per statement by [`Store::for_each_experiment`].
pub const STREAM_PAGE: u64 = 256;

/// What a summary counts over all of a run's experiments.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct RunTotals {
    pub experiments: u64,
    /// Experiments by status (its stored text).
    pub counts: BTreeMap<String, u64>,
    /// Seconds spent verifying (the milliseconds summed, then divided).
    pub verify_seconds: f64,
    /// Money spent (each experiment's cost in nano-dollars, see `cost_nanos`, summed, then
    /// divided): the same figure whatever order the experiments are added in.
    pub cost_usd: f64,
    /// Whether any experiment has a holdout value; whether any cost money.
    pub any_holdout: bool,
    pub any_cost: bool,
}

impl RunTotals {
    /// The experiments that count towards `max_experiments`: the finished ones but the
    /// aborted.
    pub fn counted(&self) -> u64 {
        let of = |s: Status| self.counts.get(s.as_str()).copied().unwrap_or(0);
        self.experiments
            .saturating_sub(of(Status::Aborted))
            .saturating_sub(of(Status::Running))
    }
}

/// An experiment's cost in whole nano-dollars, as the store's tallies add it up (migration
/// 10; the SQL there does the same float steps): clamped to a million dollars either way,
/// rounded half away from zero; a cost that is not a number counts nothing.
pub(crate) fn cost_nanos(cost_usd: f64) -> i64 {
    if cost_usd.is_nan() {
        return 0;
    }
    let v = (cost_usd * 1e9).clamp(-1e15, 1e15);
    (v + if v < 0.0 { -0.5 } else { 0.5 }) as i64
}

/// The integer sums behind [`RunTotals`], one status at a time.
#[derive(Default)]
struct Tally {
    experiments: u64,
    counts: BTreeMap<String, u64>,
    verify_ms: i64,
    cost_nanos: i64,
    holdouts: i64,
    paid: i64,
}

impl Tally {
    /// Adds `k` experiments of `status` (its stored text; one a hone does not know counts as
    /// running, as [`ExperimentRecord::status`] reads it) with these sums.
    fn add(
        &mut self,
        status: &str,
        k: u64,
        verify_ms: i64,
        cost_nanos: i64,
        holdouts: i64,
        paid: i64,
    ) {
        if k == 0 {
            return;
        }
        self.experiments += k;
        let status = Status::parse(status).unwrap_or(Status::Running).as_str();
        *self.counts.entry(status.to_string()).or_insert(0) += k;
        self.verify_ms += verify_ms;
        self.cost_nanos = self.cost_nanos.saturating_add(cost_nanos);
        self.holdouts += holdouts;
        self.paid += paid;
    }

    fn totals(self) -> RunTotals {
        RunTotals {
            experiments: self.experiments,
            counts: self.counts,
            verify_seconds: self.verify_ms as f64 / 1000.0,
            cost_usd: self.cost_nanos as f64 / 1e9,
            any_holdout: self.holdouts > 0,
            any_cost: self.paid > 0,
        }
    }
}

impl RunTotals {
    /// The totals of records in memory, as [`Store::run_totals`] reads them from the store.
    pub fn of(exps: &[ExperimentRecord]) -> RunTotals {
        let mut t = Tally::default();
        for e in exps {
            t.add(
                e.status().as_str(),
                1,
                i64::try_from(e.verify_ms).unwrap_or(i64::MAX),
                cost_nanos(e.cost_usd),
                i64::from(e.holdout.is_some()),
                i64::from(e.cost_usd > 0.0),
            );
        }
        t.totals()
    }
}

impl Store {
    /// A run's counts and totals (see [`RunTotals`]), read from its tallies (`run_tallies`,
    /// a row per status that the database keeps with every write of an experiment): a few
    /// rows, however long the run.
    pub fn run_totals(&self, run_id: i64) -> Result<RunTotals, StoreError> {
        let mut t = Tally::default();
        self.for_each_row(
            "SELECT status, experiments, verify_ms, cost_nanos, holdouts, paid
             FROM run_tallies WHERE run_id = ?1 ORDER BY status",
            &[Val::Int(Some(run_id))],
            &mut |r| {
                t.add(
                    &r.req_text("status")?,
                    r.req_u64("experiments")?,
                    r.req_int("verify_ms")?,
                    r.req_int("cost_nanos")?,
                    r.req_int("holdouts")?,
                    r.req_int("paid")?,
                );
                Ok(())
            },
        )?;
        Ok(t.totals())
    }

    /// The tokens a run's experiments spent (their records' sum: what `max_tokens` counts).
    pub fn tokens_spent(&self, run_id: i64) -> Result<u64, StoreError> {
        let mut tokens = 0;
        self.for_each_row(
            "SELECT CAST(COALESCE(SUM(tokens), 0) AS BIGINT) AS t FROM experiments WHERE run_id = ?1",
            &[Val::Int(Some(run_id))],
            &mut |r| {
                tokens = r.req_u64("t")?;
                Ok(())
            },
        )?;
        Ok(tokens)
    }

    /// How many experiments of a run have this status (or any, with `None`), from its tallies.
    pub fn count_experiments(
        &self,
        run_id: i64,
        status: Option<Status>,
    ) -> Result<u64, StoreError> {
        let t = self.run_totals(run_id)?;
        Ok(match status {
            Some(s) => t.counts.get(s.as_str()).copied().unwrap_or(0),
            None => t.experiments,
        })
    }

    /// How many experiments of a run count towards its `max_experiments`: the finished ones
    /// but the aborted (an outage of the model's server, an interruption). A `running` one
    /// counts once it finishes; one a crash cut off becomes `aborted` when the run resumes.
    pub fn counted_experiments(&self, run_id: i64) -> Result<u64, StoreError> {
        let t = self.run_totals(run_id)?;
        Ok(t.counted().saturating_sub(self.failed_baselines(run_id)?))
    }

    /// How many of a run's finished experiments are baselines that failed before the one
    /// that ran (or, with none yet, all of them): `max_experiments` does not count them, as
    /// `hone run` measures the baseline again after a fix of hone.toml. Read by number: they
    /// are the first records, and few.
    pub fn failed_baselines(&self, run_id: i64) -> Result<u64, StoreError> {
        let Some(baseline) = self.first_with_status(run_id, Status::Baseline)? else {
            return Ok(self.run_totals(run_id)?.counted());
        };
        let mut failed = 0;
        for n in 0..baseline.n {
            if let Some(e) = self.experiment(run_id, n)? {
                failed += u64::from(!matches!(e.status(), Status::Aborted | Status::Running));
            }
        }
        Ok(failed)
    }

    /// Whether any experiment of a run has a holdout value, and whether any cost money (the
    /// columns of `hone log`'s table), from its tallies.
    pub fn run_columns(&self, run_id: i64) -> Result<(bool, bool), StoreError> {
        let t = self.run_totals(run_id)?;
        Ok((t.any_holdout, t.any_cost))
    }

    /// The first experiment of a run with this status (by number), found by index.
    pub fn first_with_status(
        &self,
        run_id: i64,
        status: Status,
    ) -> Result<Option<ExperimentRecord>, StoreError> {
        Ok(self.with_status(run_id, status, 1)?.pop())
    }

    /// Every experiment of a run with this status, in order, found by index.
    pub fn experiments_with_status(
        &self,
        run_id: i64,
        status: Status,
    ) -> Result<Vec<ExperimentRecord>, StoreError> {
        self.with_status(run_id, status, i64::MAX)
    }

    /// The first `limit` experiments of a run with this status, in order, found by index.
    fn with_status(
        &self,
        run_id: i64,
        status: Status,
        limit: i64,
    ) -> Result<Vec<ExperimentRecord>, StoreError> {
        self.query(
            "SELECT * FROM experiments WHERE run_id = ?1 AND status = ?2 ORDER BY n LIMIT ?3",
            &[
                Val::Int(Some(run_id)),
                text(status.as_str()),
                Val::Int(Some(limit)),
            ],
            experiment_from_row,
        )
    }

    /// The best so far, as [`super::best_experiment`] finds it in the records (the keep
    /// decided last, else the newest baseline), found by index: the run's keeps (few beside
    /// its discards) and its newest baseline, however many discards followed them.
    pub fn best_of_run(&self, run_id: i64) -> Result<Option<ExperimentRecord>, StoreError> {
        self.query_opt(
            "SELECT * FROM experiments WHERE run_id = ?1 AND n IN (
                 (SELECT n FROM experiments WHERE run_id = ?1 AND status = 'keep'
                  ORDER BY COALESCE(finished_at, 0) DESC, n DESC LIMIT 1),
                 (SELECT MAX(n) FROM experiments WHERE run_id = ?1 AND status = 'baseline'))
             ORDER BY n DESC LIMIT 1",
            &[Val::Int(Some(run_id))],
            experiment_from_row,
        )
    }

    /// Every experiment of a run with only its number, status, value, holdout, cost and
    /// verification time, in order, read from the covering index `experiments_outline`
    /// alone: what a plot's points and a summary's totals need, without a text. Fill in the
    /// texts a plot shows with [`Store::fill_texts`].
    pub fn experiment_points(&self, run_id: i64) -> Result<Vec<ExperimentRecord>, StoreError> {
        let mut out = Vec::new();
        self.for_each_row(
            "SELECT n, status, objective, verify_ms, cost_usd, holdout
             FROM experiments WHERE run_id = ?1 ORDER BY n",
            &[Val::Int(Some(run_id))],
            &mut |r| {
                out.push(point_from_row(r)?);
                Ok(())
            },
        )?;
        Ok(out)
    }

    /// Reads the description and reason of the experiments numbered `ns` into `exps` (sorted
    /// by number, as [`Store::experiment_points`] returns them), by primary key.
    pub fn fill_texts(
        &self,
        run_id: i64,
        exps: &mut [ExperimentRecord],
        ns: &[u64],
    ) -> Result<(), StoreError> {
        // The numbers go into the statement as digits (never text from outside), a few
        // hundred per query: one round trip per chunk on PostgreSQL.
        for chunk in ns.chunks(500) {
            let list: Vec<String> = chunk.iter().map(|n| n.to_string()).collect();
            let sql = format!(
                "SELECT n, description, reason FROM experiments WHERE run_id = ?1 AND n IN ({})",
                list.join(",")
            );
            let texts = self.query(&sql, &[Val::Int(Some(run_id))], |r| {
                Ok((
                    r.req_u64("n")?,
                    r.req_text("description")?,
                    r.req_text("reason")?,
                ))
            })?;
            for (n, description, reason) in texts {
                if let Ok(i) = exps.binary_search_by_key(&n, |e| e.n) {
                    exps[i].description = description;
                    exps[i].reason = reason;
                }
            }
        }
        Ok(())
    }

    /// Calls `f` with every experiment of a run, in order, until it says to stop. The rows
    /// are read a page at a time by key ([`STREAM_PAGE`] per statement, each statement done
    /// before `f` sees its rows): memory does not grow with the run, and a caller blocked in
    /// `f` (`hone log` into a pager) holds no read transaction open, so the database's writer
    /// and its checkpoints never wait for it. (Inside a transaction of the caller's, the rows
    /// are that transaction's.)
    pub fn for_each_experiment(
        &self,
        run_id: i64,
        f: &mut dyn FnMut(ExperimentRecord) -> Result<ControlFlow<()>, StoreError>,
    ) -> Result<(), StoreError> {
        let mut after = -1;
        loop {
            let page = self.query(
                "SELECT * FROM experiments WHERE run_id = ?1 AND n > ?2 ORDER BY n LIMIT ?3",
                &[
                    Val::Int(Some(run_id)),
                    Val::Int(Some(after)),
                    int(STREAM_PAGE),
                ],
                experiment_from_row,
            )?;
            let last_page = (page.len() as u64) < STREAM_PAGE;
            for e in page {
                after = i64::try_from(e.n).unwrap_or(i64::MAX);
                if f(e)?.is_break() {
                    return Ok(());
                }
            }
            if last_page {
                return Ok(());
            }
        }
    }

    /// Runs a query and calls `f` with each row as it is read (SQLite), or with each row of
    /// the answer (PostgreSQL, whose client reads the answer whole).
    pub(super) fn for_each_row(
        &self,
        sql: &str,
        params: &[Val<'_>],
        f: &mut dyn FnMut(&dyn super::Cells) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        match &self.db {
            Db::Sqlite(conn) => {
                let mut st = conn.prepare_cached(sql)?;
                let mut rows = st.query(rusqlite::params_from_iter(params.iter()))?;
                while let Some(row) = rows.next()? {
                    f(row)?;
                }
                Ok(())
            }
            Db::Postgres(pg) => {
                for row in pg.query(sql, params)? {
                    f(&row)?;
                }
                Ok(())
            }
        }
    }
}
