//! Watching a verifier run's progress (`[verify] progress`): each (step, value) point its
//! output prints is recorded at once (a crash loses none already stored; past the first
//! 10,000 points only a thinning share is stored, and the last one when the run ends: see
//! [`crate::verify::prune::LiveCurve`]), and with `[verify] prune` the run is stopped (the
//! executor's normal SIGTERM, grace, SIGKILL of its process group) when its curve is clearly
//! worse than the curves of the experiments that ran to the end, read from the store when
//! the run starts (so a resumed run compares with the same curves; a bounded, thinned set:
//! see [`Store::reference_curves`]). With `[verify] evaluate` those are only the baseline's
//! and the keeps' curves: the first stage is the candidate's code, and a discarded one could
//! print any curve. Points are judged when the step moved on, at most every stored point or
//! every 10 ms. Only a candidate's first run may be pruned: never the baseline, a confirm or
//! re-test run, the sealed evaluator or the holdout.

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
    /// When the first and the last point arrived, and how many did.
    first_at: Option<std::time::Duration>,
    last_at: std::time::Duration,
    points: u64,
}

/// What a watch saw of its run, once over.
pub(super) struct Watched {
    /// Why it was pruned, if it was (the reason to record).
    pub pruned: Option<String>,
    /// Every point arrived at once as a run of a second or more ended (within its last
    /// twentieth, and a twentieth of it or 100 ms apart at most): its output is buffered,
    /// when its executor streams output (nothing could be pruned before it ended).
    pub bunched: bool,
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
            // With a sealed evaluator the first stage is the candidate's own code: only the
            // curves of runs it accepted (baseline, keeps) are references.
            Some(_) => store.reference_curves(run_id, spec.verify.evaluate.is_some())?,
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
            first_at: None,
            last_at: std::time::Duration::ZERO,
            points: 0,
        }))
    }

    /// Takes one line of the run's output; whether it was a point of the curve.
    pub(super) fn feed(&mut self, line: &str) -> bool {
        let Some((step, value)) = self.read.read(line) else {
            return false;
        };
        let elapsed = self.started.elapsed();
        self.first_at.get_or_insert(elapsed);
        self.last_at = elapsed;
        self.points += 1;
        let point = self.live.push(step, value, elapsed);
        if point.store {
            self.put(step, value);
        }
        if self.pruned.is_some() || !point.judge {
            return true;
        }
        let Some(pruner) = &self.pruner else {
            return true;
        };
        if crate::verify::prune::near_the_end(&self.references, step) {
            return true;
        }
        if let Some(p) = pruner.judge(&self.references, point.best, step, elapsed) {
            self.pruned = Some(p);
            self.stop.set(true);
        }
        true
    }

    fn put(&mut self, step: f64, value: f64) {
        if let Err(e) = self.store.put_curve_point(self.run_id, self.n, step, value) {
            self.error.get_or_insert(e);
        }
    }

    /// When the run is over (its last point stored, if thinning left it out): why it was
    /// pruned, if it was, and whether its points came bunched at its end.
    pub(super) fn finish(mut self) -> Result<Watched, StoreError> {
        if let Some((step, value)) = self.live.unstored_last() {
            self.put(step, value);
        }
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let total = self.started.elapsed().as_secs_f64();
        let bunched = self.points >= 3
            && total >= 1.0
            && self.first_at.is_some_and(|first| {
                let (first, last) = (first.as_secs_f64(), self.last_at.as_secs_f64());
                last - first <= (0.05 * total).max(0.1) && total - last <= 0.05 * total
            });
        Ok(Watched {
            pruned: self.pruned_reason(),
            bunched,
        })
    }

    /// Why the run was pruned, if it was.
    fn pruned_reason(self) -> Option<String> {
        let metric = match &self.read {
            Progress::Metric(name) => name.as_str(),
            Progress::Regex { .. } => "value",
        };
        let (p, pruner) = self.pruned.zip(self.pruner)?;
        // The bar first: `hone log` shows a reason's first hundred characters.
        let against = match (pruner.rule, p.rule) {
            (_, PruneRule::Top(k)) => format!(
                "the worst value there of the {k} best of {} finished runs, plus the margin they were seen to make up",
                p.runs
            ),
            (PruneRule::Halving, PruneRule::Percentile(q)) => format!(
                "the percentile:{q} of {} finished runs, halving's bar",
                p.runs
            ),
            (_, PruneRule::Reach(q)) => {
                let who = if q == 100.0 {
                    "any of them".to_owned()
                } else {
                    format!("{} of them", percent(100.0 - q))
                };
                return Some(reach_reason(&p, metric, (p.runs, &who)));
            }
            (_, PruneRule::ReachTight(a)) => {
                let k = ((a * (p.runs as f64 + 1.0)).floor() as usize).clamp(1, p.runs.max(1));
                let who = match k {
                    1 => "any of them".to_owned(),
                    k => format!("all but {} of them", k - 1),
                };
                return Some(reach_reason(&p, metric, (p.runs, &who)));
            }
            (_, rule) => format!("the {rule} of {} finished runs", p.runs),
        };
        Some(format!(
            "pruned at step {}: its best {metric} so far, {}, was worse than {}: {against}, at that step; its process group was stopped",
            p.step,
            fmt(p.best),
            fmt(p.threshold),
        ))
    }
}

/// A `reach` rule's reason, in the question it asks: could the run still end level with the
/// best of `runs` finished runs, improving from here as much as `who` of them did?
fn reach_reason(p: &Pruned, metric: &str, (runs, who): (usize, &str)) -> String {
    format!(
        "pruned at step {}: its best {metric} so far, {}, was worse than {} there: to end level with the best of {runs} finished runs it would have had to improve from that step on more than {who} did ({}); its process group was stopped",
        p.step,
        fmt(p.best),
        fmt(p.threshold),
        p.rule,
    )
}

/// `25%`, `12.5%`.
fn percent(q: f64) -> String {
    let s = format!("{q:.1}");
    format!("{}%", s.trim_end_matches('0').trim_end_matches('.'))
}

fn fmt(v: f64) -> String {
    crate::report::fmt_metric(Some(v))
}
