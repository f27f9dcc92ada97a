//! The progress plot's experiments picked in SQL (`report::plot` draws them): every keep and
//! baseline, the first and the last experiment, the discards (all of them up to a bound, else
//! the lowest, median and highest of each pixel column) and the first failure of each kind per
//! column; the first and the last experiment as placeholders when not drawn for themselves.
//! Only those (a few thousand however long the run) are read as records: the keeps and the
//! failures are picked in SQL, the discards from one narrow scan of their numbers and values.

use super::sql::{value_from_row, with_texts};
use super::{Cells, Db, ExperimentRecord, Store, StoreError, Val};

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

/// A picked experiment with the texts the plot shows.
fn full_row(r: &dyn Cells) -> Result<ExperimentRecord, StoreError> {
    with_texts(r, value_from_row(r)?)
}

impl Store {
    /// The numbers of the discards the plot draws: every one up to `cols.all_below`, else in
    /// each pixel column the lowest, the median and the highest (ties by number), in order.
    /// Reads each discard's number and value alone (one narrow scan of a covering index on
    /// SQLite), and picks them with the plot's own float steps.
    fn drawn_discards(
        &self,
        run_id: i64,
        cols: &PlotColumns,
        n_max: f64,
    ) -> Result<Vec<u64>, StoreError> {
        // `+status` keeps SQLite's planner on the covering outline index (the status index
        // would cost a table look-up per discard); PostgreSQL has no such prefix.
        let sql = if matches!(self.db, Db::Postgres(_)) {
            "SELECT n, objective FROM experiments
             WHERE run_id = ?1 AND status = 'discard' AND objective IS NOT NULL ORDER BY n"
        } else {
            "SELECT n, objective FROM experiments
             WHERE run_id = ?1 AND +status = 'discard' AND objective IS NOT NULL ORDER BY n"
        };
        let mut all: Vec<(u64, f64)> = Vec::new();
        self.for_each_row(sql, &[Val::Int(Some(run_id))], &mut |r| {
            all.push((r.req_u64("n")?, r.req_real("objective")?));
            Ok(())
        })?;
        if all.len() as u64 <= cols.all_below {
            return Ok(all.into_iter().map(|(n, _)| n).collect());
        }
        let column = |n: u64| (cols.offset + (n as f64 / n_max) * cols.span).floor() as i64;
        let mut out = Vec::new();
        for group in all.chunk_by_mut(|a, b| column(a.0) == column(b.0)) {
            group.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
            let last = group.len() - 1;
            let mut picks = vec![0, last / 2, last];
            picks.dedup();
            out.extend(picks.into_iter().map(|i| group[i].0));
        }
        out.sort_unstable();
        Ok(out)
    }

    /// The experiments the progress plot of run `run_id` draws (see the module's comment),
    /// and the `recent` newest non-baseline ones; `cols` is the plot's column geometry.
    pub fn plot_points(
        &self,
        run_id: i64,
        cols: &PlotColumns,
        recent: u64,
    ) -> Result<PlotRows, StoreError> {
        // Two look-ups at the ends of the primary key: SQLite answers MIN and MAX together
        // in one query by scanning every experiment of the run.
        let ends = self.query_opt(
            "SELECT (SELECT MIN(n) FROM experiments WHERE run_id = ?1) AS first,
                    (SELECT MAX(n) FROM experiments WHERE run_id = ?1) AS last",
            &[Val::Int(Some(run_id))],
            |r| Ok((r.int("first")?, r.int("last")?)),
        )?;
        let Some((Some(first), Some(last))) = ends else {
            return Ok(PlotRows::default());
        };
        let n_max = (last.max(1)) as f64;
        let mut plot = self.keeps_and_failures(run_id, cols, n_max)?;
        // The discards drawn, by primary key (their numbers go into the statement as digits,
        // a few hundred per statement).
        for chunk in self.drawn_discards(run_id, cols, n_max)?.chunks(500) {
            let list: Vec<String> = chunk.iter().map(|n| n.to_string()).collect();
            plot.extend(self.query(
                &format!(
                    "SELECT n, status, objective, description, reason FROM experiments
                     WHERE run_id = ?1 AND n IN ({})",
                    list.join(",")
                ),
                &[Val::Int(Some(run_id))],
                full_row,
            )?);
        }
        plot.sort_by_key(|e| e.n);
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
            value_from_row,
        )?;
        recent.reverse();
        Ok(PlotRows { plot, recent })
    }

    /// Every keep and baseline, and the first failure of each kind in each pixel column,
    /// with their texts, in order.
    fn keeps_and_failures(
        &self,
        run_id: i64,
        cols: &PlotColumns,
        n_max: f64,
    ) -> Result<Vec<ExperimentRecord>, StoreError> {
        let pg = matches!(self.db, Db::Postgres(_));
        // SQLite truncates a cast to an integer (the column is never negative: floor);
        // PostgreSQL's cast rounds, so it takes the floor itself.
        let col = if pg {
            "floor(?3 + (CAST(n AS DOUBLE PRECISION) / ?2) * ?4)"
        } else {
            "CAST(?3 + (CAST(n AS REAL) / ?2) * ?4 AS INTEGER)"
        };
        let sql = format!(
            "SELECT n, status, objective, description, reason FROM experiments
             WHERE run_id = ?1 AND n IN (
               SELECT n FROM experiments WHERE run_id = ?1 AND status IN ('baseline', 'keep')
               UNION SELECT MIN(n) FROM (
                 SELECT n, {col} AS col, {FAILURE_KIND} AS kind FROM experiments
                 WHERE run_id = ?1 AND status IN
                   ('crash', 'timeout', 'pruned', 'violation', 'rejected', 'invalid')
               ) f GROUP BY col, kind
             ) ORDER BY n"
        );
        self.query(
            &sql,
            &[
                Val::Int(Some(run_id)),
                Val::Real(Some(n_max)),
                Val::Real(Some(cols.offset)),
                Val::Real(Some(cols.span)),
            ],
            full_row,
        )
    }
}
