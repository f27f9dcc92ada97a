//! A run's narrowing log: every change of where crashes narrowed a knob's explored range
//! (`propose::knobs::feasible`), with the experiment after which it happened, kept as the run
//! goes so that `hone show N` reads the changes up to N (a few rows) instead of working them
//! out again from every configuration before N (50,000 of them at experiment 50,000).
//!
//! The log covers the run's *settled* experiments: those from 0 up to the first one still
//! running (`runs.narrowed_upto` is how many). It is written by the engine in the very
//! transaction of each outcome, and rewritten whole when a run opens (a resume rebuilds it
//! from the experiments, so a crash, a run of an older hone that kept no log, or a record
//! changed while hone was stopped leaves nothing stale). `NULL` in `narrowed_upto`: no log
//! (a run that no hone of this version has opened): readers work the changes out themselves.

use super::{int, text, Store, StoreError, Val};

/// A knob's narrowed range on one side, as the log holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct NarrowedRange {
    /// The furthest finished value on that side: where the range ends.
    pub edge: f64,
    /// The other end of the explored range.
    pub other: f64,
    /// The crashed value nearest the edge, beyond it.
    pub nearest: f64,
    /// How many infeasible configurations lie beyond the edge.
    pub crashes: u64,
}

/// One change of the log: after experiment `n`, the knob's range on one side is narrowed to
/// `range` (new or changed), or no longer narrowed (`None`).
#[derive(Clone, Debug, PartialEq)]
pub struct NarrowingChange {
    pub n: u64,
    pub knob: String,
    /// The side the narrowing cuts: above the edge, else below it.
    pub above: bool,
    pub range: Option<NarrowedRange>,
}

const INSERT: &str =
    "INSERT INTO narrowings (run_id, n, knob, side, edge, other, nearest, crashes) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";

impl Store {
    /// How many of the run's experiments, from 0, its narrowing log covers; `None` when the
    /// run has no log.
    pub fn narrowed_upto(&self, run_id: i64) -> Result<Option<u64>, StoreError> {
        let upto = self.query_opt(
            "SELECT narrowed_upto FROM runs WHERE id = ?1",
            &[Val::Int(Some(run_id))],
            |r| r.int("narrowed_upto"),
        )?;
        Ok(upto.flatten().map(|u| u.max(0) as u64))
    }

    /// Marks the run as having no narrowing log (readers work the narrowings out themselves)
    /// until it is written again.
    pub fn forget_narrowing_log(&self, run_id: i64) -> Result<(), StoreError> {
        self.exec(
            "UPDATE runs SET narrowed_upto = NULL WHERE id = ?1",
            &[Val::Int(Some(run_id))],
        )?;
        Ok(())
    }

    /// Replaces the run's narrowing log with `changes`, covering its first `upto` experiments.
    pub fn rewrite_narrowing_log(
        &self,
        run_id: i64,
        changes: &[NarrowingChange],
        upto: u64,
    ) -> Result<(), StoreError> {
        self.in_transaction(|s| {
            s.exec(
                "DELETE FROM narrowings WHERE run_id = ?1",
                &[Val::Int(Some(run_id))],
            )?;
            s.append_narrowing_log(run_id, changes, upto)
        })
    }

    /// Adds `changes` to the run's narrowing log, which now covers its first `upto`
    /// experiments.
    pub fn append_narrowing_log(
        &self,
        run_id: i64,
        changes: &[NarrowingChange],
        upto: u64,
    ) -> Result<(), StoreError> {
        for c in changes {
            let range = c.range.as_ref();
            self.exec(
                INSERT,
                &[
                    Val::Int(Some(run_id)),
                    int(c.n),
                    text(&c.knob),
                    Val::Int(Some(i64::from(c.above))),
                    Val::Real(range.map(|r| r.edge)),
                    Val::Real(range.map(|r| r.other)),
                    Val::Real(range.map(|r| r.nearest)),
                    Val::Int(range.map(|r| i64::try_from(r.crashes).unwrap_or(i64::MAX))),
                ],
            )?;
        }
        self.exec(
            "UPDATE runs SET narrowed_upto = ?2 WHERE id = ?1",
            &[Val::Int(Some(run_id)), int(upto)],
        )?;
        Ok(())
    }

    /// The changes of the run's narrowing log after experiments up to `through`, in order
    /// (by experiment, then knob, then side: below first); `None` when the log does not
    /// cover experiment `through` (no log, or an experiment up to it still running).
    pub fn narrowing_log(
        &self,
        run_id: i64,
        through: u64,
    ) -> Result<Option<Vec<NarrowingChange>>, StoreError> {
        self.read_consistent(|s| {
            match s.narrowed_upto(run_id)? {
                Some(upto) if upto > through => {}
                _ => return Ok(None),
            }
            let rows = s.query(
                "SELECT n, knob, side, edge, other, nearest, crashes FROM narrowings \
                 WHERE run_id = ?1 AND n <= ?2 ORDER BY n, knob, side",
                &[Val::Int(Some(run_id)), int(through)],
                |r| {
                    let range = match (r.real("edge")?, r.real("other")?, r.real("nearest")?) {
                        (Some(edge), Some(other), Some(nearest)) => Some(NarrowedRange {
                            edge,
                            other,
                            nearest,
                            crashes: r.int("crashes")?.unwrap_or(0).max(0) as u64,
                        }),
                        _ => None,
                    };
                    Ok(NarrowingChange {
                        n: r.req_u64("n")?,
                        knob: r.req_text("knob")?,
                        above: r.int("side")? == Some(1),
                        range,
                    })
                },
            )?;
            Ok(Some(rows))
        })
    }
}
