//! Experiments' curves: the intermediate (step, value) points the verifier printed
//! (`[verify] progress`), one row each, written as they arrive so that a crash loses none
//! already stored (fewer than 22,000 per experiment however many it prints: the first
//! 10,000, then a thinning share, and its last; see [`crate::verify::prune::LiveCurve`]).
//! The pruner compares a running experiment with the curves of the experiments that ran to
//! the end, loaded when it starts and bounded, since it judges them on the thread that reads
//! the verifier's output: the curves of every baseline, the [`REFERENCE_KEEPS`] (200) most
//! recent keeps (the best objectives, for `top:K`) and the [`REFERENCE_RECENT`] (200) most
//! recent judged experiments, each thinned evenly to at most [`REFERENCE_POINTS`] (1,000)
//! points, its first and last kept (so it still says where it ended). With
//! `[verify] evaluate`, only the baseline's and keeps' curves count: the first stage is the
//! candidate's own code, and only those runs' code was accepted by the sealed evaluator (a
//! discarded candidate could print `loss=-1e308` and prune every later one).

use std::collections::BTreeMap;

use super::{int, now, Store, StoreError, Val};

pub use crate::verify::prune::{Curve, Reference};

/// At most this many points of a reference curve are loaded.
pub const REFERENCE_POINTS: usize = 1_000;
/// The curves of at most this many of the most recent keeps are references.
pub const REFERENCE_KEEPS: usize = 200;
/// The curves of at most this many of the most recent judged experiments are references.
pub const REFERENCE_RECENT: usize = 200;

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
        self.relaxed(|| {
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
            )
            .map(|_| ())
        })
    }

    /// Every curve of a run, by experiment.
    pub fn curves(&self, run_id: i64) -> Result<BTreeMap<u64, Curve>, StoreError> {
        self.read_curves(
            "SELECT c.experiment, c.step, c.value FROM curves c WHERE c.run_id = ?1
             ORDER BY c.experiment, c.step",
            &[Val::Int(Some(run_id))],
        )
    }

    /// Experiment `n`'s curve (empty when it printed none).
    pub fn curve(&self, run_id: i64, n: u64) -> Result<Curve, StoreError> {
        Ok(self
            .read_curves(
                "SELECT c.experiment, c.step, c.value FROM curves c
                 WHERE c.run_id = ?1 AND c.experiment = ?2 ORDER BY c.step",
                &[Val::Int(Some(run_id)), int(n)],
            )?
            .remove(&n)
            .unwrap_or_default())
    }

    /// The curves a running experiment is compared with: those of experiments of the run
    /// that ran to the end and were judged (baseline, keep, discard; only baseline and keeps
    /// when `accepted_only`), never a pruned one, each with its objective. Bounded (see the
    /// module doc): the baseline, the `REFERENCE_KEEPS` most recent keeps and the
    /// `REFERENCE_RECENT` most recent judged experiments, each curve thinned in the
    /// database to at most `REFERENCE_POINTS` points, evenly, its first and last kept.
    pub fn reference_curves(
        &self,
        run_id: i64,
        accepted_only: bool,
    ) -> Result<Vec<Reference>, StoreError> {
        let judged: Vec<(u64, String, Option<f64>)> = self.query(
            "SELECT e.n, e.status, e.objective FROM experiments e
             WHERE e.run_id = ?1 AND e.status IN ('baseline', 'keep', 'discard') ORDER BY e.n",
            &[Val::Int(Some(run_id))],
            |r| Ok((r.req_u64("n")?, r.req_text("status")?, r.real("objective")?)),
        )?;
        let chosen = choose_references(
            judged.iter().map(|(n, st, _)| (*n, st.as_str())),
            accepted_only,
        );
        if chosen.is_empty() {
            return Ok(Vec::new());
        }
        let objectives: BTreeMap<u64, Option<f64>> =
            judged.into_iter().map(|(n, _, o)| (n, o)).collect();
        let curves = self.thinned_curves(run_id, &chosen, REFERENCE_POINTS)?;
        Ok(curves
            .into_iter()
            .map(|(n, curve)| Reference {
                curve,
                objective: objectives.get(&n).copied().flatten(),
            })
            .collect())
    }

    /// The curves of experiments `ns`, each thinned in the database to at most `per` (>= 2)
    /// points, evenly, its first and last kept: what the pruner's references and the plots
    /// (the report, the dashboard) read, a bounded number of rows however much was printed.
    pub fn thinned_curves(
        &self,
        run_id: i64,
        ns: &[u64],
        per: usize,
    ) -> Result<BTreeMap<u64, Curve>, StoreError> {
        if ns.is_empty() {
            return Ok(BTreeMap::new());
        }
        // Numbers, not text from outside, written into the statement; the PostgreSQL
        // connection keeps a bounded cache of such statements (`pg::Pg::statement`).
        let list: Vec<String> = ns
            .iter()
            .map(|n| (*n).min(i64::MAX as u64).to_string())
            .collect();
        let per = per.max(2) as i64;
        self.read_curves(
            &format!(
                "SELECT t.experiment, t.step, t.value FROM (
                   SELECT c.experiment, c.step, c.value,
                     ROW_NUMBER() OVER (PARTITION BY c.experiment ORDER BY c.step) AS i,
                     COUNT(*) OVER (PARTITION BY c.experiment) AS k
                   FROM curves c WHERE c.run_id = ?1 AND c.experiment IN ({})
                 ) t
                 WHERE (t.i - 1) % ((t.k + {per} - 2) / ({per} - 1)) = 0 OR t.i = t.k
                 ORDER BY t.experiment, t.step",
                list.join(", ")
            ),
            &[Val::Int(Some(run_id))],
        )
    }

    /// The curves a query of rows (experiment, step, value), in order, reads.
    fn read_curves(
        &self,
        sql: &str,
        params: &[Val<'_>],
    ) -> Result<BTreeMap<u64, Curve>, StoreError> {
        let rows = self.query(sql, params, |r| {
            Ok((
                r.req_u64("experiment")?,
                r.req_real("step")?,
                r.req_real("value")?,
            ))
        })?;
        let mut curves: BTreeMap<u64, Curve> = BTreeMap::new();
        for (n, step, value) in rows {
            curves.entry(n).or_default().push((step, value));
        }
        Ok(curves)
    }
}

/// The experiments whose curves are references, from the judged ones `(n, status)` in the
/// order of `n`: every baseline, the most recent keeps and the most recent of all (only the
/// baseline and keeps when `accepted_only`), in the order of `n`.
fn choose_references<'a>(
    judged: impl DoubleEndedIterator<Item = (u64, &'a str)>,
    accepted_only: bool,
) -> Vec<u64> {
    let (mut keeps, mut recent) = (0, 0);
    let mut chosen: Vec<u64> = judged
        .rev()
        .filter(|(_, st)| !accepted_only || *st != "discard")
        .filter(|(_, st)| {
            recent += 1;
            keeps += usize::from(*st == "keep");
            *st == "baseline"
                || (*st == "keep" && keeps <= REFERENCE_KEEPS)
                || recent <= REFERENCE_RECENT
        })
        .map(|(n, _)| n)
        .collect();
    chosen.reverse();
    chosen
}
