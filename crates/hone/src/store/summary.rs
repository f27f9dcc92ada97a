//! A run's figures read without loading its records (the views of a run of 100,000
//! experiments: `hone status`, `hone log`, the dashboard's counters): counts and totals from
//! one narrow scan of a covering index, the baseline and the best found by index, the rows in
//! flight, and every row streamed one at a time.

use std::collections::BTreeMap;

use super::sql::experiment_from_row;
use super::{text, Db, ExperimentRecord, Status, Store, StoreError, Val};

/// What a summary counts over all of a run's experiments.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct RunTotals {
    pub experiments: u64,
    /// Experiments by status (its stored text).
    pub counts: BTreeMap<String, u64>,
    /// Seconds spent verifying, summed in experiment order.
    pub verify_seconds: f64,
    /// Money spent, summed in experiment order.
    pub cost_usd: f64,
    /// Whether any experiment has a holdout value; whether any cost money.
    pub any_holdout: bool,
    pub any_cost: bool,
}

impl RunTotals {
    /// An empty tally, with sums that start where `Iterator::sum` starts (so that adding the
    /// same values in the same order gives the very same floats).
    fn empty() -> RunTotals {
        RunTotals {
            verify_seconds: std::iter::empty::<f64>().sum(),
            cost_usd: std::iter::empty::<f64>().sum(),
            ..Default::default()
        }
    }

    fn add(&mut self, status: &str, verify_ms: u64, cost_usd: f64, holdout: bool) {
        self.experiments += 1;
        match self.counts.get_mut(status) {
            Some(c) => *c += 1,
            None => {
                self.counts.insert(status.to_string(), 1);
            }
        }
        self.verify_seconds += verify_ms as f64 / 1000.0;
        self.cost_usd += cost_usd;
        self.any_holdout |= holdout;
        self.any_cost |= cost_usd > 0.0;
    }

    /// The totals of records in memory (experiment order), as [`Store::run_totals`] reads them.
    pub fn of(exps: &[ExperimentRecord]) -> RunTotals {
        let mut t = RunTotals::empty();
        for e in exps {
            t.add(
                e.status().as_str(),
                e.verify_ms,
                e.cost_usd,
                e.holdout.is_some(),
            );
        }
        t
    }
}

impl Store {
    /// A run's counts and totals (see [`RunTotals`]), read from the covering index
    /// `experiments_outline` alone: no record is read whole.
    pub fn run_totals(&self, run_id: i64) -> Result<RunTotals, StoreError> {
        let mut t = RunTotals::empty();
        self.for_each_row(
            "SELECT status, verify_ms, cost_usd,
                    CAST(CASE WHEN holdout IS NULL THEN 0 ELSE 1 END AS BIGINT) AS has_holdout
             FROM experiments WHERE run_id = ?1 ORDER BY n",
            &[Val::Int(Some(run_id))],
            &mut |r| {
                let status = r.req_text("status")?;
                t.add(
                    Status::parse(&status).unwrap_or(Status::Running).as_str(),
                    r.req_u64("verify_ms")?,
                    r.req_real("cost_usd")?,
                    r.req_int("has_holdout")? != 0,
                );
                Ok(())
            },
        )?;
        Ok(t)
    }

    /// Whether any experiment of a run has a holdout value, and whether any cost money (the
    /// columns of `hone log`'s table), each found by a partial index at once.
    pub fn run_columns(&self, run_id: i64) -> Result<(bool, bool), StoreError> {
        let any = |filter: &str| {
            self.query_opt(
                &format!(
                    "SELECT CAST(COUNT(*) AS BIGINT) AS found FROM (SELECT 1 FROM experiments
                     WHERE run_id = ?1 AND {filter} LIMIT 1) AS one"
                ),
                &[Val::Int(Some(run_id))],
                |r| r.req_int("found"),
            )
            .map(|found| found.unwrap_or(0) > 0)
        };
        Ok((any("holdout IS NOT NULL")?, any("cost_usd > 0")?))
    }

    /// The first experiment of a run with this status (by number), found by index.
    pub fn first_with_status(
        &self,
        run_id: i64,
        status: Status,
    ) -> Result<Option<ExperimentRecord>, StoreError> {
        self.query_opt(
            "SELECT * FROM experiments WHERE run_id = ?1 AND status = ?2 ORDER BY n LIMIT 1",
            &[Val::Int(Some(run_id)), text(status.as_str())],
            experiment_from_row,
        )
    }

    /// Every experiment of a run with this status, in order, found by index.
    pub fn experiments_with_status(
        &self,
        run_id: i64,
        status: Status,
    ) -> Result<Vec<ExperimentRecord>, StoreError> {
        self.query(
            "SELECT * FROM experiments WHERE run_id = ?1 AND status = ?2 ORDER BY n",
            &[Val::Int(Some(run_id)), text(status.as_str())],
            experiment_from_row,
        )
    }

    /// The best so far, as [`super::best_experiment`] finds it in the records (the newest keep
    /// or baseline), found by index.
    pub fn best_of_run(&self, run_id: i64) -> Result<Option<ExperimentRecord>, StoreError> {
        self.query_opt(
            "SELECT * FROM experiments WHERE run_id = ?1 AND status IN ('keep', 'baseline')
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
                out.push(ExperimentRecord {
                    n: r.req_u64("n")?,
                    status: Status::parse(&r.req_text("status")?),
                    objective: r.real("objective")?,
                    verify_ms: r.req_u64("verify_ms")?,
                    cost_usd: r.req_real("cost_usd")?,
                    holdout: r.real("holdout")?,
                    ..Default::default()
                });
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

    /// Calls `f` with every experiment of a run, in order, one row at a time (from SQLite, as
    /// the rows are read: the first comes at once, and memory does not grow with the run).
    pub fn for_each_experiment(
        &self,
        run_id: i64,
        f: &mut dyn FnMut(ExperimentRecord) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.for_each_row(
            "SELECT * FROM experiments WHERE run_id = ?1 ORDER BY n",
            &[Val::Int(Some(run_id))],
            &mut |r| f(experiment_from_row(r)?),
        )
    }

    /// Runs a query and calls `f` with each row as it is read (SQLite), or with each row of
    /// the answer (PostgreSQL, whose client reads the answer whole).
    fn for_each_row(
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
