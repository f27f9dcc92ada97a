//! Experiments' curves: the intermediate (step, value) points the verifier printed
//! (`[verify] progress`), one row each, written as they arrive so that a crash loses none
//! already read. The pruner compares a running experiment with the curves of the
//! experiments that ran to the end.

use std::collections::BTreeMap;

use super::{int, now, Db, Store, StoreError, Val};

pub use crate::verify::prune::{Curve, Reference};

impl Store {
    /// Records a point of experiment `n`'s curve (a step written again keeps its last value).
    ///
    /// A point must survive hone's `kill -9`, which its write reaching the operating system
    /// ensures; unlike an outcome it need not survive a power loss. So in SQLite (outside a
    /// transaction) its commit skips the `fsync` the store's `synchronous = FULL` makes: a
    /// verifier printing thousands of points is not slowed by one sync each.
    pub fn put_curve_point(
        &self,
        run_id: i64,
        n: u64,
        step: f64,
        value: f64,
    ) -> Result<(), StoreError> {
        let relaxed = matches!(self.db, Db::Sqlite(_)) && self.tx_depth.get() == 0;
        if relaxed {
            self.batch("PRAGMA synchronous = NORMAL")?;
        }
        let written = self.insert_curve_point(run_id, n, step, value);
        if relaxed {
            self.batch("PRAGMA synchronous = FULL")?;
        }
        written
    }

    fn insert_curve_point(
        &self,
        run_id: i64,
        n: u64,
        step: f64,
        value: f64,
    ) -> Result<(), StoreError> {
        self.exec(
            "INSERT INTO curves (run_id, experiment, step, value, at) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (run_id, experiment, step) DO UPDATE SET value = excluded.value, at = excluded.at",
            &[
                Val::Int(Some(run_id)),
                int(n),
                Val::Real(Some(step)),
                Val::Real(Some(value)),
                Val::Real(Some(now())),
            ],
        )?;
        Ok(())
    }

    /// Every curve of a run, by experiment.
    pub fn curves(&self, run_id: i64) -> Result<BTreeMap<u64, Curve>, StoreError> {
        self.curves_where(run_id, "")
    }

    /// Experiment `n`'s curve (empty when it printed none).
    pub fn curve(&self, run_id: i64, n: u64) -> Result<Curve, StoreError> {
        Ok(self
            .curves_where(
                run_id,
                &format!("AND c.experiment = {}", n.min(i64::MAX as u64)),
            )?
            .remove(&n)
            .unwrap_or_default())
    }

    /// The curves a running experiment is compared with: those of the experiments of the run
    /// that ran to the end and were judged (baseline, keep, discard), never a pruned one, each
    /// with its objective.
    pub fn reference_curves(&self, run_id: i64) -> Result<Vec<Reference>, StoreError> {
        let judged = "e.status IN ('baseline', 'keep', 'discard')";
        let curves = self.curves_where(
            run_id,
            &format!("AND EXISTS (SELECT 1 FROM experiments e WHERE e.run_id = c.run_id AND e.n = c.experiment AND {judged})"),
        )?;
        let objectives: BTreeMap<u64, Option<f64>> = self
            .query(
                &format!(
                    "SELECT e.n, e.objective FROM experiments e WHERE e.run_id = ?1 AND {judged}"
                ),
                &[Val::Int(Some(run_id))],
                |r| Ok((r.req_u64("n")?, r.real("objective")?)),
            )?
            .into_iter()
            .collect();
        Ok(curves
            .into_iter()
            .map(|(n, curve)| Reference {
                curve,
                objective: objectives.get(&n).copied().flatten(),
            })
            .collect())
    }

    fn curves_where(&self, run_id: i64, filter: &str) -> Result<BTreeMap<u64, Curve>, StoreError> {
        let rows = self.query(
            &format!(
                "SELECT c.experiment, c.step, c.value FROM curves c WHERE c.run_id = ?1 {filter} ORDER BY c.experiment, c.step"
            ),
            &[Val::Int(Some(run_id))],
            |r| {
                Ok((
                    r.req_u64("experiment")?,
                    r.req_real("step")?,
                    r.req_real("value")?,
                ))
            },
        )?;
        let mut out: BTreeMap<u64, Curve> = BTreeMap::new();
        for (n, step, value) in rows {
            out.entry(n).or_default().push((step, value));
        }
        Ok(out)
    }
}
