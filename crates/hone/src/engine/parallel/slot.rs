//! A parallel slot's thread: what it is handed ([`Work`]), what it does with a candidate (the
//! review, when still to come, then the verifier), how it gets the slot's worktree ready for
//! the next candidate, and what it hands back ([`Done`]). See the parent module for how the
//! coordinator and the slots share the work.

use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;

use super::super::gate::{self, Rejection};
use super::super::review::{Gate, ReviewPlace};
use super::super::state::store_location;
use super::super::verifier::{Sink, Verified, Verifier};
use super::super::{EngineError, Event, Internal};
use crate::propose::{Ledger, Meter, Spend};
use crate::store::{ExperimentRecord, Store};

/// What became of a candidate on its slot's thread.
pub(super) enum Checked {
    /// The gate's last steps (the review, the pinned inputs) kept it from its verifier:
    /// rejected, or the run must stop.
    Reviewed(Rejection),
    Verified(Verified),
}

/// What a slot's thread tells the coordinator.
pub(super) enum Msg {
    /// The candidate in this slot passed the gate's last steps and goes to its verifier.
    Reviewed(usize),
    /// The candidate is done with (reviewed out, or verified).
    Done(Box<Done>),
}

/// What a verification thread hands back.
pub(super) struct Done {
    pub(super) slot: usize,
    pub(super) rec: ExperimentRecord,
    pub(super) checked: Result<Checked, EngineError>,
    /// How long its review took (part of its gate, not of its verification).
    pub(super) review_ms: u64,
    /// Its review ended in a verdict ([`Work::verdict`]).
    pub(super) verdict: bool,
    /// The commit the thread made the slot's worktree after the verification (the best's
    /// when it finished), ready for the next proposal; `None`: it was left as it was.
    pub(super) ready_at: Option<String>,
    /// The thread's store connection, for the slot's next verification.
    pub(super) store: Option<Store>,
}

/// What a verification thread is handed: its own verifier (with the slot's environment),
/// the slot's worktree, and the candidate with what it is measured against.
pub(super) struct Work {
    pub(super) slot: usize,
    pub(super) verifier: Verifier,
    pub(super) worktree: PathBuf,
    pub(super) rec: ExperimentRecord,
    /// The best's value when it was proposed, and the noise known then.
    pub(super) best: Option<f64>,
    pub(super) sigma: Option<f64>,
    /// The slot's store connection from its last verification (`None`: opened here).
    pub(super) store: Option<Store>,
    /// The commit the candidate was made on, when its review is still to come (here).
    pub(super) review_from: Option<String>,
    pub(super) review_ms: u64,
    /// The review ended in a verdict: approved, or rejected by the reviewer itself (not by a
    /// rule, nor a reviewer that failed).
    pub(super) verdict: bool,
}

/// What every slot's thread shares with the coordinator.
pub(super) struct Shared<'s> {
    pub run_id: i64,
    /// The run's budget ledger (the reviews' LLM calls are charged to it).
    pub ledger: &'s Arc<Ledger>,
    /// The best's commit, as the coordinator last decided it: what a slot's thread makes its
    /// worktree once its verification ends.
    pub best_commit: &'s Mutex<String>,
    /// The run stopped at once (a second Ctrl-C, or the coordinator gave up).
    pub cancel: &'s dyn Fn() -> bool,
    /// The run is to stop after the experiments in flight (a first Ctrl-C).
    pub stopping: &'s dyn Fn() -> bool,
    /// When `[stop] max_time` runs out, if it is set.
    pub time_up: Option<std::time::Instant>,
}

/// A slot's thread: checks `work`'s candidate ([`Work::check`]), gets the slot's worktree
/// ready for the next one, and tells the coordinator on `tx`, even when it panicked (a bug):
/// the coordinator would otherwise wait for it forever; the run then stops and the row stays
/// `running` for resume to repair.
pub(super) fn run(work: Work, shared: &Shared<'_>, tx: &mpsc::Sender<Msg>) {
    let (slot, rec) = (work.slot, work.rec.clone());
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut work = work;
        let cancel = shared.cancel;
        let reviewed = || {
            let _ = tx.send(Msg::Reviewed(slot));
        };
        let checked = work.check(shared, &reviewed);
        let parent = match shared.best_commit.lock() {
            Ok(c) => c.clone(),
            // A coordinator that panicked holding it: nothing is prepared.
            Err(_) => String::new(),
        };
        let ready_at = (!parent.is_empty() && !cancel())
            .then(|| work.ready_for_next(&checked, &parent))
            .flatten();
        Done {
            slot,
            rec: work.rec,
            checked,
            review_ms: work.review_ms,
            verdict: work.verdict,
            ready_at,
            store: work.store,
        }
    }));
    let done = ran.unwrap_or_else(|_| Done {
        slot,
        rec,
        checked: Err(Internal::ThreadVanished.into()),
        review_ms: 0,
        verdict: false,
        ready_at: None,
        store: None,
    });
    // The coordinator outlives every thread of the scope; a failed send means it already
    // gave up, and the row stays `running` for resume to repair.
    let _ = tx.send(Msg::Done(Box::new(done)));
}

impl Work {
    /// Reviews the candidate and checks the pinned inputs, when that is still to come (the
    /// review's spend charged to the run's `ledger`), then verifies it: all in this thread,
    /// with the slot's own store connection.
    pub(super) fn check(
        &mut self,
        shared: &Shared<'_>,
        reviewed: &dyn Fn(),
    ) -> Result<Checked, EngineError> {
        let (run_id, cancel) = (shared.run_id, shared.cancel);
        if let Some(parent) = self.review_from.take() {
            let t = Instant::now();
            let gate = self.review(shared, &parent)?;
            self.review_ms = t.elapsed().as_millis() as u64;
            self.rec.gate_ms += self.review_ms;
            self.verdict = matches!(gate, Gate::Pass | Gate::Refused(_));
            if let Some(rejected) = gate::rejection(gate) {
                // Stopped while it was reviewed: not the reviewer's verdict.
                if cancel() {
                    return Ok(Checked::Verified(Verified::Cancelled));
                }
                return Ok(Checked::Reviewed(rejected));
            }
            // The gate's last check, after the review, as in the serial loop.
            let v = &self.verifier;
            if let Some(changed) = gate::pinned_rejection(&v.seals, v.git.root()) {
                return Ok(Checked::Reviewed(changed));
            }
            reviewed();
        }
        self.verify(run_id, cancel).map(Checked::Verified)
    }

    /// The slot's store connection from its last use, or a new one (put it back after).
    fn take_store(&mut self) -> Result<Store, EngineError> {
        match self.store.take() {
            Some(s) => Ok(s),
            None => {
                let v = &self.verifier;
                Ok(Store::open_at(&store_location(&v.git, &v.spec))?)
            }
        }
    }

    /// The review gate on the candidate (see [`Verifier::review`]), made on `parent`.
    fn review(&mut self, shared: &Shared<'_>, parent: &str) -> Result<Gate, EngineError> {
        let store = self.take_store()?;
        let v = &self.verifier;
        let ledger = shared.ledger;
        let journal = v.paths.spend_journal(&v.tag, self.rec.n);
        let spend = Spend::new(Some(ledger.clone()))
            .with_journal(journal, (self.rec.cost_usd, self.rec.tokens));
        let meter = Meter {
            budget: ledger.opened_with(),
            spent: &spend,
        };
        let place = ReviewPlace {
            store: &store,
            run_id: shared.run_id,
            stopping: shared.stopping,
            time_up: shared.time_up,
        };
        let gate = v.review(
            &place,
            &mut self.rec,
            (&self.worktree, parent),
            shared.cancel,
            &meter,
        );
        self.store = Some(store);
        gate
    }

    /// Verifies the candidate in this thread, with its own store connection (the same store
    /// the coordinator writes: a SQLite file or a PostgreSQL database), which the slot keeps
    /// from one verification to the next. Events go to the store only: the subscribers stay
    /// with the coordinator.
    fn verify(&mut self, run_id: i64, cancel: &dyn Fn() -> bool) -> Result<Verified, EngineError> {
        let store = self.take_store()?;
        let v = &mut self.verifier;
        let verified = Work::verify_with(
            v,
            &store,
            (&mut self.rec, &self.worktree),
            run_id,
            (self.best, self.sigma),
            cancel,
        );
        self.store = Some(store);
        verified
    }

    fn verify_with(
        v: &mut Verifier,
        store: &Store,
        (rec, wt): (&mut ExperimentRecord, &Path),
        run_id: i64,
        (best, sigma): (Option<f64>, Option<f64>),
        cancel: &dyn Fn() -> bool,
    ) -> Result<Verified, EngineError> {
        let mut quiet = |_: &Event| {};
        let mut sink = Sink {
            store,
            run_id,
            on_event: &mut quiet,
        };
        v.verify(&mut sink, rec, wt, false, best, sigma, cancel)
    }

    /// After a verification that ran to its end, makes the slot's worktree exactly `parent`
    /// (the best now, which the next candidate in this slot is most likely made on) here,
    /// off the coordinator's thread; returns `parent` then. A worktree whose git link the
    /// verifier replaced is left alone (no git runs through it, and the coordinator's
    /// integrity check finds it as it was), and so is any other after a failure.
    pub(super) fn ready_for_next(
        &self,
        checked: &Result<Checked, EngineError>,
        parent: &str,
    ) -> Option<String> {
        if !matches!(
            checked,
            Ok(Checked::Reviewed(_)
                | Checked::Verified(Verified::Values { .. } | Verified::Failed(..)))
        ) {
            return None;
        }
        let (git, wt) = (&self.verifier.git, &self.worktree);
        // `Git::reset_worktree`'s own reset, without its rebuild of a replaced link; not where
        // the candidate's code left something git would wait on (the coordinator says so).
        let reset = git.check_ref_files().is_ok()
            && matches!(git.reset_worktree_checked(wt, parent), Ok(true));
        (reset && git.worktree_link_ok(wt)).then(|| parent.to_string())
    }
}
