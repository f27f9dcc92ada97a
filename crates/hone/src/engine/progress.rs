//! Watching a verifier run's progress (`[verify] progress`): each (step, value) point its
//! output prints is recorded at once (a crash loses none already read), and with
//! `[verify] prune` the run is stopped (the executor's normal SIGTERM, grace, SIGKILL of its
//! process group) when its curve is clearly worse than the curves of the experiments that
//! ran to the end, read from the store when the run starts (so a resumed run compares with
//! the same curves). Only a candidate's first run may be pruned: never the baseline, a
//! confirm or re-test run, the sealed evaluator or the holdout.

use std::cell::Cell;
use std::time::Instant;

use crate::spec::Spec;
use crate::store::{Store, StoreError};
use crate::verify::prune::{LiveCurve, Progress, PruneRule, Pruned, Pruner, Reference};

/// One run's watcher.
pub(super) struct Watch<'a> {
    read: Progress,
    store: &'a Store,
    run_id: i64,
    n: u64,
    pruner: Option<Pruner>,
    references: Vec<Reference>,
    live: LiveCurve,
    started: Instant,
    /// Set when the run is to stop (the cancel check reads it).
    stop: &'a Cell<bool>,
    pruned: Option<Pruned>,
    /// The first failed write of a point, reported when the run is over.
    error: Option<StoreError>,
}

impl<'a> Watch<'a> {
    /// A watcher for experiment `n`'s run, if `[verify] progress` is set; it may prune when
    /// `prunable` and `[verify] prune` is set.
    pub(super) fn new(
        spec: &Spec,
        (store, run_id, n): (&'a Store, i64, u64),
        prunable: bool,
        stop: &'a Cell<bool>,
    ) -> Result<Option<Watch<'a>>, StoreError> {
        let Some(p) = &spec.verify.progress else {
            return Ok(None);
        };
        let pruner = p.pruner(spec.verify.direction).filter(|_| prunable);
        let references = match pruner {
            Some(_) => store.reference_curves(run_id)?,
            None => Vec::new(),
        };
        Ok(Some(Watch {
            read: p.read.clone(),
            store,
            run_id,
            n,
            pruner,
            references,
            live: LiveCurve::new(spec.verify.direction),
            started: Instant::now(),
            stop,
            pruned: None,
            error: None,
        }))
    }

    /// Takes one line of the run's output.
    pub(super) fn feed(&mut self, line: &str) {
        let Some((step, value)) = self.read.read(line) else {
            return;
        };
        if let Err(e) = self.store.put_curve_point(self.run_id, self.n, step, value) {
            self.error.get_or_insert(e);
        }
        let best = self.live.push(step, value);
        if self.pruned.is_some() {
            return;
        }
        let Some(pruner) = &self.pruner else { return };
        if let Some(p) = pruner.judge(&self.references, best, step, self.started.elapsed()) {
            self.pruned = Some(p);
            self.stop.set(true);
        }
    }

    /// When the run is over: why it was pruned, if it was (the reason to record).
    pub(super) fn finish(self) -> Result<Option<String>, StoreError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let metric = match &self.read {
            Progress::Metric(name) => name.as_str(),
            Progress::Regex { .. } => "value",
        };
        let Some((p, pruner)) = self.pruned.zip(self.pruner) else {
            return Ok(None);
        };
        let against = match pruner.rule {
            PruneRule::Top(k) => format!(
                "the worst value there of the {k} best of {} finished runs, plus the margin they were seen to make up ({})",
                p.runs,
                fmt(p.threshold)
            ),
            rule => format!("the {rule} ({}) of {} finished runs", fmt(p.threshold), p.runs),
        };
        Ok(Some(format!(
            "pruned at step {}: its best {metric} so far, {}, was worse than {against} at that step; its process group was stopped",
            p.step,
            fmt(p.best),
        )))
    }
}

fn fmt(v: f64) -> String {
    crate::report::fmt_metric(Some(v))
}
