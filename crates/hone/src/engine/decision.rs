//! The verdict on a verified candidate, through one ordered pipeline:
//!
//! 1. the judge ([`Judge::verdict`]): the noise rule against the best (or, for the baseline,
//!    its own runs), constraints, a failed repeat, a code that ignores the repeat seed;
//! 2. integrity ([`Engine::integrity`]): what the candidate's code did while it ran (hone's
//!    refs, the worktree's git link) voids the judge's verdict;
//! 3. the holdout gate ([`Engine::holdout_gate`]): a keep or baseline gets its holdout
//!    measured; with `holdout_gate`, a keep that makes it worse becomes a discard.
//!
//! The judge runs where the measurement is taken up (serially, or against two bests in
//! parallel runs); [`Engine::decide`] takes its verdict through the rest, so the status is
//! settled in one place before it is recorded.

use std::path::Path;

use crate::spec::Spec;
use crate::store::{ExperimentRecord, Status};
use crate::util::mean;
use crate::verify::noise::{run_sigma, unusable};
use crate::workspace::RefListing;

use super::executor::Failure;
use super::state::restore_refs;
use super::{Engine, EngineError, Event};

/// A status and its reason.
pub(super) type Verdict = (Status, String);

impl Engine<'_> {
    /// The judge of this run, as its history stands.
    pub(super) fn judge(&self) -> Judge<'_> {
        Judge {
            spec: &self.verifier.spec,
            history: &self.history,
        }
    }

    /// The verdict on `rec`, judged `judged`, made on `best` (`None`: the baseline): the
    /// rest of the pipeline (see the module docs). A baseline that fails integrity or its
    /// verifier comes back before the holdout (the run stops on it).
    pub(super) fn decide(
        &mut self,
        rec: &mut ExperimentRecord,
        wt: &Path,
        best: Option<&ExperimentRecord>,
        judged: Verdict,
        refs_at_verify: Option<RefListing>,
    ) -> Result<Verdict, EngineError> {
        let baseline = best.is_none();
        let verdict = match self.integrity(baseline, wt, refs_at_verify.as_ref())? {
            Some(violation) => violation,
            None => judged,
        };
        if baseline && verdict.0 != Status::Baseline {
            return Ok(verdict);
        }
        if baseline {
            self.warn_unprinted_constraints(rec);
        }
        if !matches!(verdict.0, Status::Keep | Status::Baseline) {
            return Ok(verdict);
        }
        let verdict = self.holdout_gate(rec, wt, best, verdict)?;
        // The holdout ran the candidate's code again: the same check of hone's refs (they
        // were as at the verifier's start when the integrity check passed).
        let what = "the holdout run";
        match self.refs_moved(baseline, refs_at_verify.as_ref(), what)? {
            Some(violation) => Ok(violation),
            None => Ok(verdict),
        }
    }

    /// The candidate's own code ran: it must not have touched hone's refs (`refs_at_verify`:
    /// as they were when it started; `None` where other experiments move them meanwhile) or
    /// the worktree's git link. The violation, if it did (the refs are put back).
    fn integrity(
        &mut self,
        baseline: bool,
        wt: &Path,
        refs_at_verify: Option<&RefListing>,
    ) -> Result<Option<Verdict>, EngineError> {
        if baseline {
            return Ok(None);
        }
        if !self.verifier.git.worktree_link_ok(wt) {
            return Ok(Some((
                Status::Violation,
                "the verifier run replaced the worktree's .git".to_string(),
            )));
        }
        self.refs_moved(baseline, refs_at_verify, "the verifier run")
    }

    /// Did the candidate's code (`what` ran it) move hone's refs from `was` (`None`: other
    /// experiments move them meanwhile, nothing to compare)? The violation if it did, the refs
    /// put back.
    fn refs_moved(
        &mut self,
        baseline: bool,
        was: Option<&RefListing>,
        what: &str,
    ) -> Result<Option<Verdict>, EngineError> {
        let Some(was) = was.filter(|_| !baseline) else {
            return Ok(None);
        };
        let now = self.run_refs()?;
        if &now == was {
            return Ok(None);
        }
        // Someone else's commit on the run branch is not the candidate's doing: it is kept
        // and the run stops before the branch would move (`foreign`).
        if self.foreign_move(was, &now) {
            return Ok(None);
        }
        let moved = restore_refs(&self.verifier.git, was, &now)?;
        Ok(Some((
            Status::Violation,
            format!("{what} moved hone's refs ({moved}); they were put back"),
        )))
    }

    /// A constraint on a metric the baseline did not print discards every candidate.
    fn warn_unprinted_constraints(&mut self, rec: &ExperimentRecord) {
        for c in self.verifier.spec.verify.constraints.clone() {
            if !rec.metrics.contains_key(&c.metric) {
                self.emit(Event::Warning {
                    message: format!(
                        "the baseline printed no `{}`, so the constraint `{c}` will discard every candidate that does not print it",
                        c.metric
                    ),
                });
            }
        }
    }

    /// Measures the sealed holdout of a baseline or a keep; with `holdout_gate`, a keep that
    /// makes the holdout worse than the best's by more than its `min_delta` becomes a discard.
    fn holdout_gate(
        &mut self,
        rec: &mut ExperimentRecord,
        wt: &Path,
        best: Option<&ExperimentRecord>,
        (status, reason): Verdict,
    ) -> Result<Verdict, EngineError> {
        let Some(h) = self.verifier.spec.verify.holdout.clone() else {
            return Ok((status, reason));
        };
        // The holdout sees the committed candidate, not what its verifier run left behind.
        let commit = rec
            .candidate_commit
            .clone()
            .unwrap_or_else(|| self.run.base_commit.clone());
        self.verifier.git.reset_worktree(wt, &commit)?;
        self.verifier.git.remove_ignored(wt)?;
        let cancel = self.cancel();
        let (verifier, mut sink) = self.verifying();
        rec.holdout = verifier.measure_holdout(&mut sink, (rec.n, &commit), wt, &h, &cancel)?;
        let sealed_changed = status == Status::Keep && self.verifier.sealed_changed(wt).is_some();
        if sealed_changed {
            rec.holdout = None;
        }
        // Not when it was interrupted, nor when its value was voided (sealed files changed).
        if rec.holdout.is_none() && !sealed_changed && !cancel() {
            // Said, gate or no gate: a holdout that stopped working is no silent blank.
            self.emit(Event::Warning {
                message: format!(
                    "experiment {}: the holdout gave no value (see .hone/runs/{}/holdout/{}.log)",
                    rec.n, self.run.tag, rec.n
                ),
            });
        }
        if status != Status::Keep || !self.verifier.spec.verify.holdout_gate {
            return Ok((status, reason));
        }
        let best_h = best.and_then(|b| b.holdout);
        let direction = self.verifier.spec.verify.direction;
        match (rec.holdout, best_h) {
            (None, _) => Ok((Status::Discard, format!("holdout: the holdout command failed (see .hone/runs/{}/holdout/{}.log); {reason}", self.run.tag, rec.n))),
            (Some(now), Some(was)) if direction.improvement(now, was) < -h.min_delta => Ok((
                Status::Discard,
                format!("holdout: {} went from {was} to {now}, worse by more than {}; {reason}", h.metric, h.min_delta),
            )),
            _ => Ok((status, reason)),
        }
    }
}

/// The noise rule's view of a run: its settings and its history so far. Pure: it reads the
/// measured runs of a candidate and says what they are worth.
pub(super) struct Judge<'j> {
    pub spec: &'j Spec,
    pub history: &'j [ExperimentRecord],
}

impl Judge<'_> {
    /// The decision on a measured candidate against `best_value` (`None`: it is the
    /// baseline): sets its objective (the mean of its runs) and judgement.
    pub(super) fn verdict(
        &self,
        rec: &mut ExperimentRecord,
        failed: Option<Failure>,
        broken: Option<String>,
        best_value: Option<f64>,
    ) -> Verdict {
        let spec = self.spec;
        let policy = spec.noise_policy();
        let net_lines = rec.lines_added as i64 - rec.lines_deleted as i64;
        if failed.is_none() {
            if let Some(reason) = unusable(&spec.verify.metric, &rec.runs) {
                // Nothing of these runs may reach a decision, a plot or a summary.
                rec.objective = None;
                return (Status::Crash, reason);
            }
        }
        rec.objective = Some(mean(&rec.runs));
        let own = (rec.runs.len() > 1).then_some(rec.runs.as_slice());
        let sigma = self.sigma_with(own, best_value.is_none());
        match (failed, best_value, broken) {
            (Some(f), _, _) => (f.status, f.reason),
            (None, None, None) => (Status::Baseline, baseline_reason(&rec.runs, sigma, None)),
            (None, None, Some(b)) => (
                Status::Baseline,
                baseline_reason(&rec.runs, sigma, Some(&b)),
            ),
            (None, Some(_), Some(b)) => (Status::Discard, format!("constraint not met: {b}")),
            (None, Some(_), None) if self.ignores_seed(&rec.runs) => (
                Status::Discard,
                format!(
                    "its {} runs are identical while the baseline's vary with {}: the code ignores the repeat seed (a fixed seed?), so its confirm runs prove nothing",
                    rec.runs.len(),
                    spec.verify.seed_env.as_deref().unwrap_or("the seed")
                ),
            ),
            (None, Some(b), None) => {
                let j = policy.judge(&rec.runs, b, sigma, net_lines);
                let status = if j.keep {
                    Status::Keep
                } else {
                    Status::Discard
                };
                let reason = j.reason.clone();
                rec.judgement = Some(Box::new(j));
                (status, reason)
            }
        }
    }

    /// σ from every experiment with repeated runs (plus `extra`, the runs of a candidate
    /// being decided, which is not in the history yet).
    pub(super) fn sigma(&self, extra: Option<&[f64]>) -> Option<f64> {
        self.sigma_with(extra, false)
    }

    /// σ by [`run_sigma`]: the baseline's repeats are trusted (the user's code), every other
    /// experiment's runs are a candidate's, so the widest of them is left out and σ never
    /// falls below the baseline's own (candidates whose code pins its own seed repeat
    /// identically and would otherwise talk the noise estimate down). `extra`: the runs of
    /// the experiment being decided (always counted), the baseline's when
    /// `extra_is_baseline`.
    pub(super) fn sigma_with(&self, extra: Option<&[f64]>, extra_is_baseline: bool) -> Option<f64> {
        let repeated = || self.history.iter().filter(|e| e.runs.len() > 1);
        let baseline = repeated()
            .filter(|e| e.status() == Status::Baseline)
            .map(|e| e.runs.as_slice());
        let candidates = repeated()
            .filter(|e| e.status() != Status::Baseline)
            .map(|e| e.runs.as_slice());
        if extra_is_baseline {
            run_sigma(baseline.chain(extra), candidates, None)
        } else {
            run_sigma(baseline, candidates, extra)
        }
    }

    /// With `seed_env`, repeats are meant to differ: a candidate whose confirm runs are all
    /// identical while the baseline's varied is not measuring noise at all.
    fn ignores_seed(&self, runs: &[f64]) -> bool {
        let baseline_varies = self
            .history
            .iter()
            .find(|e| e.status() == Status::Baseline)
            .is_some_and(|b| b.runs.len() > 1 && b.runs.iter().any(|v| *v != b.runs[0]));
        self.spec.verify.seed_env.is_some()
            && baseline_varies
            && runs.len() > 1
            && runs.iter().all(|v| *v == runs[0])
    }
}

/// Why the baseline is what it is, with the noise it showed.
fn baseline_reason(runs: &[f64], sigma: Option<f64>, broken: Option<&str>) -> String {
    let mut r = "the unmodified project".to_string();
    if runs.len() > 1 {
        let s = sigma.map_or_else(|| "?".into(), crate::util::fmt_value);
        r.push_str(&format!(": mean of {} runs, sigma {s}", runs.len()));
    }
    if let Some(b) = broken {
        r.push_str(&format!(" (constraint not met: {b})"));
    }
    r
}
