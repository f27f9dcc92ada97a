//! The progress plot's experiments picked in SQL (`report::plot` draws them): every keep and
//! baseline, the first and the last experiment, the discards (all of them up to a bound, else
//! the lowest, median and highest of each pixel column) and the first failure of each kind per
//! column; the first and the last experiment as placeholders when not drawn for themselves. The database groups a run's rows by column and returns a few thousand of them
//! however long the run, so a run of 100,000 experiments is never read into records.

use super::{Db, ExperimentRecord, Status, Store, StoreError, Val};

/// How the plot maps an experiment's number to its pixel column,
/// `floor(offset + (n / n_max) * span)` (the very same float steps in both databases and in
/// `report::plot`), and how many discards it draws one by one before it draws columns.
#[derive(Clone, Copy, Debug)]
pub struct PlotColumns {
    pub offset: f64,
    pub span: f64,
    pub all_below: u64,
}

/// What [`Store::plot_points`] reads: the plot's experiments (number, status, value,
/// description and reason), and the `recent` newest experiments other than baselines
/// (number, status and value) that the learning curves pick from; both in order.
#[derive(Debug, Default)]
pub struct PlotRows {
    pub plot: Vec<ExperimentRecord>,
    pub recent: Vec<ExperimentRecord>,
}

/// A failure's mark on the plot (one per column and mark); the same grouping as
/// `report::plot`'s failure marks.
const FAILURE_KIND: &str = "CASE status WHEN 'crash' THEN 'x' WHEN 'timeout' THEN 't' \
     WHEN 'pruned' THEN 'p' ELSE '.' END";

impl Store {
    /// The experiments the progress plot of run `run_id` draws (see the module's comment),
    /// and the `recent` newest non-baseline ones; `cols` is the plot's column geometry.
    pub fn plot_points(
        &self,
        run_id: i64,
        cols: &PlotColumns,
        recent: u64,
    ) -> Result<PlotRows, StoreError> {
        let ends = self.query_opt(
            "SELECT MIN(n) AS first, MAX(n) AS last FROM experiments WHERE run_id = ?1",
            &[Val::Int(Some(run_id))],
            |r| Ok((r.int("first")?, r.int("last")?)),
        )?;
        let Some((Some(first), Some(last))) = ends else {
            return Ok(PlotRows::default());
        };
        let n_max = (last.max(1)) as f64;
        let pg = matches!(self.db, Db::Postgres(_));
        // SQLite truncates a cast to an integer (the column is never negative: floor);
        // PostgreSQL's cast rounds, so it takes the floor itself.
        let col = if pg {
            "floor(?3 + (CAST(n AS DOUBLE PRECISION) / ?2) * ?4)"
        } else {
            "CAST(?3 + (CAST(n AS REAL) / ?2) * ?4 AS INTEGER)"
        };
        // On SQLite the discards are read from the covering outline index (`+status` keeps
        // the planner off the status index, whose every entry would cost a table look-up).
        let discard = if pg {
            "status = 'discard'"
        } else {
            "+status = 'discard'"
        };
        let sql = format!(
            "SELECT n, status, objective, description, reason FROM experiments
             WHERE run_id = ?1 AND n IN (
               SELECT n FROM experiments WHERE run_id = ?1 AND status IN ('baseline', 'keep')
               UNION SELECT n FROM (
                 SELECT n, ROW_NUMBER() OVER (PARTITION BY col ORDER BY objective, n) AS i,
                        COUNT(*) OVER (PARTITION BY col) AS c, COUNT(*) OVER () AS total
                 FROM (SELECT n, objective, {col} AS col FROM experiments
                       WHERE run_id = ?1 AND {discard} AND objective IS NOT NULL) d
               ) r WHERE total <= ?5 OR i = 1 OR i = c OR i = (c - 1) / 2 + 1
               UNION SELECT MIN(n) FROM (
                 SELECT n, {col} AS col, {FAILURE_KIND} AS kind FROM experiments
                 WHERE run_id = ?1 AND status IN
                   ('crash', 'timeout', 'pruned', 'violation', 'rejected', 'invalid')
               ) f GROUP BY col, kind
             ) ORDER BY n"
        );
        let all_below = i64::try_from(cols.all_below).unwrap_or(i64::MAX);
        let mut plot = self.query(
            &sql,
            &[
                Val::Int(Some(run_id)),
                Val::Real(Some(n_max)),
                Val::Real(Some(cols.offset)),
                Val::Real(Some(cols.span)),
                Val::Int(Some(all_below)),
            ],
            |r| {
                Ok(ExperimentRecord {
                    n: r.req_u64("n")?,
                    status: Status::parse(&r.req_text("status")?),
                    objective: r.real("objective")?,
                    description: r.req_text("description")?,
                    reason: r.req_text("reason")?,
                    ..Default::default()
                })
            },
        )?;
        // The first and the last experiment set where the x axis and the running best's line
        // start and end; one that is not drawn for itself is held as a placeholder (its
        // number alone: no status, no value), so that it adds no point and no mark.
        for n in [first, last] {
            let n = n.max(0) as u64;
            if let Err(i) = plot.binary_search_by_key(&n, |e| e.n) {
                plot.insert(
                    i,
                    ExperimentRecord {
                        n,
                        ..Default::default()
                    },
                );
            }
        }
        let mut recent = self.query(
            "SELECT n, status, objective FROM experiments
             WHERE run_id = ?1 AND status <> 'baseline' ORDER BY n DESC LIMIT ?2",
            &[
                Val::Int(Some(run_id)),
                Val::Int(Some(i64::try_from(recent).unwrap_or(i64::MAX))),
            ],
            |r| {
                Ok(ExperimentRecord {
                    n: r.req_u64("n")?,
                    status: Status::parse(&r.req_text("status")?),
                    objective: r.real("objective")?,
                    ..Default::default()
                })
            },
        )?;
        recent.reverse();
        Ok(PlotRows { plot, recent })
    }
}
