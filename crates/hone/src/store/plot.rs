//! The progress plot's experiments picked in SQL (`report::plot` draws them): every keep and
//! baseline, the first and the last experiment, the discards (all of them up to a bound, else
//! the lowest, median and highest of each pixel column) and the first failure of each kind per
//! column; the first and the last experiment as placeholders when not drawn for themselves.
//! Only those (a few thousand however long the run) are read, as [`PlotPoint`]s. The keeps come from
//! a partial covering index. A run of up to [`PlotColumns::blocks_from`] experiments has its
//! discards' numbers and values scanned; a longer one is read from `plot_blocks`, the summary
//! of each block of [`PLOT_BLOCK`] experiments that triggers keep with every write (its
//! lowest, median and highest discard, its first failures), and a pixel column's discards are
//! then picked among its blocks' picks.

use std::cmp::Ordering;

use super::sql::value_from_row;
use super::{Cells, Db, ExperimentRecord, Status, Store, StoreError, Val};

/// Experiments per plot block (`plot_blocks`; its triggers' SQL spells the number out).
pub const PLOT_BLOCK: u64 = 16;

/// How many characters of a discard's description and a failure's reason the plot's titles
/// show (the blocks keep one more, which says whether the title ends in an ellipsis).
pub const TITLE_CHARS: usize = 120;

/// How the plot maps an experiment's number to its pixel column,
/// `floor(offset + (n / n_max) * span)` (the very same float steps in both databases and in
/// `report::plot`), how many discards it draws one by one before it draws columns, and from
/// which last number on (`n_max`) an experiment's column is that of its block's first.
#[derive(Clone, Copy, Debug)]
pub struct PlotColumns {
    pub offset: f64,
    pub span: f64,
    pub all_below: u64,
    pub blocks_from: u64,
}

impl PlotColumns {
    /// Whether a plot whose last experiment is `n_max` groups its experiments by block.
    pub fn by_block(&self, n_max: f64) -> bool {
        n_max >= self.blocks_from as f64
    }

    /// The pixel column of experiment `n` in a plot whose last experiment is `n_max`.
    pub fn column(&self, n: u64, n_max: f64) -> i64 {
        let n = if self.by_block(n_max) {
            n / PLOT_BLOCK * PLOT_BLOCK
        } else {
            n
        };
        (self.offset + (n as f64 / n_max) * self.span).floor() as i64
    }
}

/// The order the plot picks discards in, the databases' `ORDER BY objective, n`: by value
/// (`-0.0` as `0.0`, every NaN above every number), ties by number.
pub fn plot_order(a: (f64, u64), b: (f64, u64)) -> Ordering {
    let norm = |v: f64| {
        if v.is_nan() {
            f64::NAN
        } else if v == 0.0 {
            0.0
        } else {
            v
        }
    };
    norm(a.0).total_cmp(&norm(b.0)).then(a.1.cmp(&b.1))
}

/// Sorts `group` by [`plot_order`] and gives the positions of its lowest, median (the
/// `(k - 1) / 2`-th of `k`) and highest, without repeats. An empty group gives none.
pub fn envelope<T>(group: &mut [T], point: impl Fn(&T) -> (f64, u64)) -> Vec<usize> {
    if group.is_empty() {
        return Vec::new();
    }
    group.sort_by(|a, b| plot_order(point(a), point(b)));
    let last = group.len() - 1;
    let mut picks = vec![0, last / 2, last];
    picks.dedup();
    picks
}

/// What the progress plot and the report's summary read of an experiment: a whole record
/// has it, and so has the much smaller [`PlotPoint`] that a long run's plot is read as.
pub trait Plotted {
    fn n(&self) -> u64;
    fn status(&self) -> Status;
    fn objective(&self) -> Option<f64>;
    fn description(&self) -> &str;
    fn reason(&self) -> &str;
}

/// `Plotted` for types that hold these fields under these names (a record's `status()`
/// reads its status the same way).
macro_rules! plotted {
    ($($t:ty),*) => {$(
        impl Plotted for $t {
            fn n(&self) -> u64 {
                self.n
            }
            fn status(&self) -> Status {
                self.status.unwrap_or(Status::Running)
            }
            fn objective(&self) -> Option<f64> {
                self.objective
            }
            fn description(&self) -> &str {
                &self.description
            }
            fn reason(&self) -> &str {
                &self.reason
            }
        }
    )*};
}

plotted!(ExperimentRecord, PlotPoint);

/// An experiment as the plot reads it (number, status, value, description and reason): a
/// fifth of a whole record's size, and a long run's plot reads thousands.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PlotPoint {
    pub n: u64,
    /// `None`: a placeholder for the first or last experiment (see [`Store::plot_points`]).
    pub status: Option<Status>,
    pub objective: Option<f64>,
    pub description: String,
    pub reason: String,
}

/// What [`Store::plot_points`] reads: the plot's experiments (number, status, value,
/// description and reason), and the `recent` newest experiments other than baselines
/// (number, status and value) that the learning curves pick from; both in order.
#[derive(Debug, Default)]
pub struct PlotRows {
    pub plot: Vec<PlotPoint>,
    pub recent: Vec<ExperimentRecord>,
}

/// A failure's mark on the plot (one per column and mark); the same grouping as
/// `report::plot`'s failure marks.
const FAILURE_KIND: &str = "CASE status WHEN 'crash' THEN 'x' WHEN 'timeout' THEN 't' \
     WHEN 'pruned' THEN 'p' ELSE '.' END";

/// What the plot reads of a picked experiment, in order: [`full_row`] reads it by position.
const FULL_ROW: &str = "n, status, objective, description, reason";

/// A picked experiment with the texts the plot shows (the columns of [`FULL_ROW`]).
fn full_row(r: &dyn Cells) -> Result<PlotPoint, StoreError> {
    let text = |i: usize| -> Result<String, StoreError> {
        r.text_at(i)?.ok_or_else(|| {
            StoreError::Corrupt(format!("column {i} of a plotted experiment is NULL"))
        })
    };
    Ok(PlotPoint {
        n: r.int_at(0)?.unwrap_or(0).max(0) as u64,
        status: Status::parse(&text(1)?),
        objective: r.real_at(2)?,
        description: text(3)?,
        reason: text(4)?,
    })
}

/// The discards and the failures a plot draws besides its keeps: those read whole (from the
/// blocks, texts cut), and the numbers of those still to read.
#[derive(Default)]
struct Picked {
    read: Vec<PlotPoint>,
    numbers: Vec<u64>,
}

/// What [`Store::block_texts`] reads of each block, in order: the positions below follow it.
const BLOCK_COLUMNS: &str = "block, discards, lo_n, lo_v, lo_d, mid_n, mid_v, mid_d, \
     hi_n, hi_v, hi_d, fail_x, fail_x_r, fail_t, fail_t_r, fail_p, fail_p_r, \
     fail_o, fail_o_r, fail_o_s";

/// What the first pass over a run's blocks picks: the discards (number, and which of its
/// block's: lowest, median, highest) and the failure marks (number, and kind), in order; and
/// how many discards with a value the run has.
#[derive(Default)]
struct BlockPicks {
    discards: Vec<(u64, usize)>,
    failures: Vec<(u64, usize)>,
    total: u64,
}

/// A block's picked discards (lowest, median, highest): the positions of their number, value
/// and description in [`BLOCK_COLUMNS`].
const PICKS: [[usize; 3]; 3] = [[2, 3, 4], [5, 6, 7], [8, 9, 10]];

/// The kinds of failure mark: the positions of their number and reason in [`BLOCK_COLUMNS`],
/// and their status (the refused ones' is kept, at position 19).
const FAIL_KINDS: [([usize; 2], Option<Status>); 4] = [
    ([11, 12], Some(Status::Crash)),
    ([13, 14], Some(Status::Timeout)),
    ([15, 16], Some(Status::Pruned)),
    ([17, 18], None),
];

/// The column of a refused failure's status in [`BLOCK_COLUMNS`].
const REFUSED_STATUS: usize = 19;

impl Store {
    /// The numbers of the discards the plot draws: every one up to `cols.all_below`, else in
    /// each pixel column the lowest, the median and the highest (see [`envelope`]), in order.
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
        let mut all: Vec<(f64, u64)> = Vec::new();
        self.for_each_row(sql, &[Val::Int(Some(run_id))], &mut |r| {
            all.push((r.req_real("objective")?, r.req_u64("n")?));
            Ok(())
        })?;
        if all.len() as u64 <= cols.all_below {
            return Ok(all.into_iter().map(|(_, n)| n).collect());
        }
        let mut out = Vec::new();
        for group in all.chunk_by_mut(|a, b| cols.column(a.1, n_max) == cols.column(b.1, n_max)) {
            out.extend(envelope(group, |p| *p).into_iter().map(|i| group[i].1));
        }
        out.sort_unstable();
        Ok(out)
    }

    /// The first failure of each kind in each pixel column, found among the failures.
    fn first_failures(
        &self,
        run_id: i64,
        cols: &PlotColumns,
        n_max: f64,
    ) -> Result<Vec<u64>, StoreError> {
        // SQLite truncates a cast to an integer (the column is never negative: floor);
        // PostgreSQL's cast rounds, so it takes the floor itself.
        let col = if matches!(self.db, Db::Postgres(_)) {
            "floor(?3 + (CAST(n AS DOUBLE PRECISION) / ?2) * ?4)"
        } else {
            "CAST(?3 + (CAST(n AS REAL) / ?2) * ?4 AS INTEGER)"
        };
        self.query(
            &format!(
                "SELECT MIN(n) AS n FROM (
                   SELECT n, {col} AS col, {FAILURE_KIND} AS kind FROM experiments
                   WHERE run_id = ?1 AND status IN
                     ('crash', 'timeout', 'pruned', 'violation', 'rejected', 'invalid')
                 ) f GROUP BY col, kind"
            ),
            &[
                Val::Int(Some(run_id)),
                Val::Real(Some(n_max)),
                Val::Real(Some(cols.offset)),
                Val::Real(Some(cols.span)),
            ],
            |r| r.req_u64("n"),
        )
    }

    /// The discards and failures a long run's plot draws, found from its blocks' numbers and
    /// values: in each pixel column, the lowest, median and highest among its blocks' lowest,
    /// median and highest discards (a column's blocks are one after another), and the first
    /// failure of each kind.
    fn block_picks(
        &self,
        run_id: i64,
        cols: &PlotColumns,
        n_max: f64,
    ) -> Result<BlockPicks, StoreError> {
        let mut picks = BlockPicks::default();
        let mut column: (i64, Vec<(f64, u64, usize)>) = (i64::MIN, Vec::new());
        // The failure kinds marked in the current column.
        let mut marked = [false; FAIL_KINDS.len()];
        let close = |group: &mut Vec<(f64, u64, usize)>, out: &mut Vec<(u64, usize)>| {
            for i in envelope(group, |p| (p.0, p.1)) {
                out.push((group[i].1, group[i].2));
            }
            group.clear();
        };
        self.for_each_row(
            "SELECT block, discards, lo_n, lo_v, mid_n, mid_v, hi_n, hi_v,
                    fail_x, fail_t, fail_p, fail_o
             FROM plot_blocks WHERE run_id = ?1 ORDER BY block",
            &[Val::Int(Some(run_id))],
            &mut |r| {
                let at = |i: usize| Ok::<u64, StoreError>(r.int_at(i)?.unwrap_or(0).max(0) as u64);
                let col = cols.column(at(0)? * PLOT_BLOCK, n_max);
                picks.total += at(1)?;
                if col != column.0 {
                    close(&mut column.1, &mut picks.discards);
                    column.0 = col;
                    marked = [false; FAIL_KINDS.len()];
                }
                for (slot, (n, v)) in [(2, 3), (4, 5), (6, 7)].into_iter().enumerate() {
                    let (Some(n), Some(v)) = (r.int_at(n)?, r.real_at(v)?) else {
                        continue;
                    };
                    let n = n.max(0) as u64;
                    if !column.1.iter().any(|p| p.1 == n) {
                        column.1.push((v, n, slot));
                    }
                }
                for (kind, seen) in marked.iter_mut().enumerate() {
                    if *seen {
                        continue;
                    }
                    if let Some(n) = r.int_at(8 + kind)? {
                        *seen = true;
                        picks.failures.push((n.max(0) as u64, kind));
                    }
                }
                Ok(())
            },
        )?;
        close(&mut column.1, &mut picks.discards);
        picks.discards.sort_unstable();
        picks.failures.sort_unstable();
        Ok(picks)
    }

    /// The picked discards and failures with their texts (as the blocks keep them), read
    /// block by block in a second pass: one in eight of the blocks' own picks survives its
    /// column's, and only those are read.
    fn block_texts(&self, run_id: i64, picks: &BlockPicks) -> Result<Vec<PlotPoint>, StoreError> {
        let (mut d, mut f) = (
            picks.discards.iter().peekable(),
            picks.failures.iter().peekable(),
        );
        let mut out = Vec::with_capacity(picks.discards.len() + picks.failures.len());
        self.for_each_row(
            &format!("SELECT {BLOCK_COLUMNS} FROM plot_blocks WHERE run_id = ?1 ORDER BY block"),
            &[Val::Int(Some(run_id))],
            &mut |r| {
                let block = r.int_at(0)?.unwrap_or(0).max(0) as u64;
                while let Some(&(n, slot)) = d.next_if(|p| p.0 / PLOT_BLOCK <= block) {
                    let [_, v, text] = PICKS[slot];
                    out.push(PlotPoint {
                        n,
                        status: Some(Status::Discard),
                        objective: r.real_at(v)?,
                        description: r.text_at(text)?.unwrap_or_default(),
                        reason: String::new(),
                    });
                }
                while let Some(&(n, kind)) = f.next_if(|p| p.0 / PLOT_BLOCK <= block) {
                    let ([_, why], status) = FAIL_KINDS[kind];
                    let status = match status {
                        Some(s) => Some(s),
                        None => Status::parse(&r.text_at(REFUSED_STATUS)?.unwrap_or_default()),
                    };
                    out.push(PlotPoint {
                        n,
                        status,
                        reason: r.text_at(why)?.unwrap_or_default(),
                        ..Default::default()
                    });
                }
                Ok(())
            },
        )?;
        Ok(out)
    }

    /// The discards and failures the plot of run `run_id` draws besides its keeps.
    fn picked(&self, run_id: i64, cols: &PlotColumns, n_max: f64) -> Result<Picked, StoreError> {
        if !cols.by_block(n_max) {
            let mut numbers = self.drawn_discards(run_id, cols, n_max)?;
            numbers.extend(self.first_failures(run_id, cols, n_max)?);
            return Ok(Picked {
                read: Vec::new(),
                numbers,
            });
        }
        let mut picks = self.block_picks(run_id, cols, n_max)?;
        // Few enough discards to draw every one: found by their numbers, as in a short run.
        let numbers = if picks.total <= cols.all_below {
            picks.discards.clear();
            self.drawn_discards(run_id, cols, n_max)?
        } else {
            Vec::new()
        };
        let read = self.block_texts(run_id, &picks)?;
        Ok(Picked { read, numbers })
    }

    /// The experiments the progress plot of run `run_id` draws (see the module's comment),
    /// and the `recent` newest non-baseline ones; `cols` is the plot's column geometry.
    pub fn plot_points(
        &self,
        run_id: i64,
        cols: &PlotColumns,
        recent: u64,
    ) -> Result<PlotRows, StoreError> {
        // One moment of the store: the blocks are read twice (their picks, then the picked
        // ones' texts), and a run going on meanwhile must not give a picked number another
        // experiment's value.
        self.read_consistent(|s| s.plot_points_now(run_id, cols, recent))
    }

    fn plot_points_now(
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
        // Every keep and baseline with its texts, from the partial covering index.
        let mut plot = self.query(
            &format!(
                "SELECT {FULL_ROW} FROM experiments
                 WHERE run_id = ?1 AND status IN ('baseline', 'keep') ORDER BY n"
            ),
            &[Val::Int(Some(run_id))],
            full_row,
        )?;
        let picked = self.picked(run_id, cols, n_max)?;
        let mut others = picked.read;
        let mut numbers = picked.numbers;
        numbers.sort_unstable();
        numbers.dedup();
        // The discards and failures drawn, by primary key (their numbers go into the
        // statement as digits, a few hundred per statement).
        for chunk in numbers.chunks(500) {
            let list: Vec<String> = chunk.iter().map(|n| n.to_string()).collect();
            others.extend(self.query(
                &format!(
                    "SELECT {FULL_ROW} FROM experiments WHERE run_id = ?1 AND n IN ({})",
                    list.join(",")
                ),
                &[Val::Int(Some(run_id))],
                full_row,
            )?);
        }
        // The keeps are in order; the others (in order of block, then discards before
        // failures) sorted in with them by a stable sort.
        plot.extend(others);
        plot.sort_by_key(|e| e.n);
        // The first and the last experiment set where the x axis and the running best's line
        // start and end; one that is not drawn for itself is held as a placeholder (its
        // number alone: no status, no value), so that it adds no point and no mark.
        for n in [first, last] {
            let n = n.max(0) as u64;
            if let Err(i) = plot.binary_search_by_key(&n, |e| e.n) {
                plot.insert(
                    i,
                    PlotPoint {
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
}
