//! The loop. One experiment flows one way:
//!
//! ```text
//! stop? -> record start -> reset worktree to best -> proposer -> snapshot (archive ref)
//!       -> gate (scope, sealed files, pinned inputs) -> verifier -> decision
//!       -> record outcome -> (keep: fast-forward hone/<tag>) -> events
//! ```
//!
//! Crash safety comes from ordering: an experiment's row is written (status `running`) before
//! anything runs, its candidate commit gets its archive ref as soon as it exists (so that `git
//! gc` cannot delete it) and is then recorded, and its outcome is recorded before the run
//! branch moves. `resume` repairs whatever a crash left between two of those steps: a
//! `running` row becomes `aborted` (its process group killed, its commit taken from its ref),
//! missing archive refs are written, refs and recorded commits whose objects `git gc` deleted
//! are dropped with a warning, and a recorded keep whose branch move was lost is applied.
//!
//! This module is the coordinator: the public API and the story of one experiment
//! (`Engine::experiment`: `Engine::prepare`, then `Engine::verify_and_decide`). Each step
//! lives in a room of its own:
//!
//! - `session`: the lock, opening or resuming a run, the loop and its stop conditions;
//! - `recovery`: repairing what a crash left (`retry`: a cut-off candidate verified again);
//! - `proposal`: asking the proposer (and the outer loop) for a candidate;
//! - `gate` (and `review`): the checks between proposal and verification;
//! - `verifier`: measuring a candidate, on an `executor` (local, SLURM, remote workers);
//! - `decision`: the verdict (judge, integrity, holdout gate);
//! - `record`: archiving candidates and recording outcomes;
//! - `parallel`: several candidates verified at a time;
//! - `state`: where a run's state lives; `notices`: what `[[notify]]` endpoints hear;
//! - `error`: why a run stops with an error, named; `types`: what a caller passes in and
//!   hears back (options, Ctrl-C, events).

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::propose::{self, Proposer};
use crate::report::{best_experiment, Summary};
use crate::spec::Spec;
use crate::store::{ExperimentRecord, RunRecord, Status, Store, StoreError};
use crate::workspace::RefListing;

mod decision;
mod error;
mod executor;
mod foreign;
mod gate;
mod hints;
mod history;
mod holdout;
mod narrowing;
mod notices;
mod outage;
mod parallel;
mod progress;
mod proposal;
mod record;
mod recovery;
mod resuming;
mod retry;
mod review;
mod session;
mod shadow;
mod start_files;
mod state;
mod stops;
mod types;
mod verifier;

pub use error::{Config, EngineError, Fs, Internal, Mismatch, Shared, Stage, Tool};
pub use gate::fixed_use_of;
pub use proposal::{best_vs_baseline_of_commits, best_vs_baseline_of_run, literal_changes_between};
pub use retry::{verified_again_on_resume, verified_again_words};
pub use session::check_model_servers;
pub use state::{
    archive_ref, branch_ref, configured_store, configured_store_of, is_running, repo_key,
    store_location, StatePaths, STATE_DIR,
};
pub use state::{today_tag, validate_tag};

pub use types::{Budget, Event, Interrupt, RunOptions};

/// Works a run's narrowing log out again from its experiments and stores it, as opening the
/// run does (for a tool that writes a run through the store API, such as a benchmark's).
pub fn rebuild_narrowing_log(store: &Store, run_id: i64) -> Result<(), StoreError> {
    narrowing::NarrowingLog::rebuild(store, run_id).map(|_| ())
}
use verifier::{Sink, Verified, Verifier};

/// Runs (or resumes) a loop in the repository at `repo_root` until a stop condition holds.
///
/// `[[notify]]` endpoints hear of keeps and of how the run ended from background threads; the
/// loop never waits for them, and at the end they get a bounded time (`notify::FLUSH_WAIT`)
/// to finish. Deliveries that failed come back as warnings after `RunStopped`.
pub fn run(
    repo_root: &Path,
    spec: &Spec,
    opts: &RunOptions,
    interrupt: &Interrupt,
    on_event: &mut dyn FnMut(&Event),
) -> Result<Summary, EngineError> {
    let run = |on_event: &mut dyn FnMut(&Event)| {
        session::run_engine(repo_root, spec, opts, interrupt, on_event)
    };
    if spec.notify.is_empty() {
        return run(on_event);
    }
    notices::run_notified(repo_root, spec, opts.tag.clone(), on_event, run)
}

/// A run being worked on, by this process.
struct Engine<'a> {
    /// The repository, the run's settings and seals, and where candidates are measured.
    verifier: Verifier,
    store: Store,
    run: RunRecord,
    /// The run's worktree (the serial loop's; parallel slots have their own).
    worktree: PathBuf,
    proposer: Box<dyn Proposer>,
    /// The outer loop's mechanisms (empty without `[outer]`).
    outer: crate::meta::Outer,
    interrupt: &'a Interrupt,
    on_event: &'a mut dyn FnMut(&Event),
    /// When this session started, and the run's active time before it.
    session_start: Instant,
    active_before: f64,
    /// The first experiment number of this session.
    session_first: u64,
    /// Every finished experiment of the run, the older ones slimmed (see [`history`]).
    history: Vec<ExperimentRecord>,
    /// While the history is lent to [`Engine::prepare`] (the serial loop), `history` is empty
    /// and an outcome to record waits in `deferred`.
    lent: bool,
    deferred: Option<Box<Deferred>>,
    /// How far [`history::forget`] has gone through `history`.
    forget_cursor: usize,
    /// What is left of the records [`history::forget`] dropped from `history`.
    dropped: history::Dropped,
    /// The run's narrowing log, advanced with every outcome (see [`narrowing`]).
    narrowing: narrowing::NarrowingLog,
    /// While an experiment's finish is being recorded (one transaction): the events written,
    /// which subscribers hear of once it is committed.
    held: Option<Vec<Event>>,
    /// Progress events told to subscribers, written with the next record (see [`Engine::emit`]).
    unlogged: Vec<Event>,
    /// In a shared store: this run's coordinator registration (released when dropped).
    _coordination: Option<crate::queue::Coordination>,
    /// The repository's worktrees when the run opened (hone's own left out): a commit on the
    /// run branch checked out in one of these is the user's; in one made later (by an agent
    /// without bubblewrap, say) it is not.
    user_worktrees: Vec<String>,
    /// A parallel slot's worktree that its thread already made exactly this commit after its
    /// last verification (taken by the next [`Engine::record_start`], which then skips its
    /// reset when the commit is the parent).
    slot_ready: Option<(PathBuf, String)>,
    /// While experiments run at once (the parallel loop): the run's spend, which every
    /// experiment's LLM calls (proposals, reviews) share, so that calls out at the same time
    /// cannot together cross the budget.
    ledger: Option<std::sync::Arc<propose::Ledger>>,
    /// Since when the proposer's model server has been unavailable, and how many proposals
    /// in a row found it so (see `proposal.rs`); `None` once one got through.
    outage: Option<outage::Outage>,
    /// The baselines that failed before this session (see
    /// [`Store::failed_baselines`](crate::store::Store::failed_baselines)): not counted by
    /// `max_experiments`.
    failed_baselines: u64,
    /// Candidates a crash of hone cut off while their verifier ran, verified again before
    /// anything new is proposed (see [`retry`]).
    retries: Vec<retry::Retry>,
    /// Where the sealed scorers look for modules first and which they import (`numpy`),
    /// themselves or through the repository's files they import: a candidate's new module
    /// there named like one is a violation (see [`shadow`]).
    scorers: shadow::Scorers,
}

/// An outcome recorded while the history was lent (see [`Engine::experiment`]).
struct Deferred {
    rec: ExperimentRecord,
    status: Status,
    reason: String,
    t_start: Instant,
}

/// A candidate that passed the gate, waiting for its verifier.
struct Candidate {
    rec: ExperimentRecord,
    t_start: Instant,
    /// The best when it was proposed (`None`: this is the baseline).
    best: Option<ExperimentRecord>,
    /// The commit it was made on (the best's).
    parent: String,
    /// The review gate and the pinned inputs' check are still to come, on the slot's thread
    /// (see [`Review::OnSlot`]).
    unreviewed: bool,
}

/// Where [`Engine::prepare`] leaves a candidate's review.
#[derive(Clone, Copy)]
enum Review<'r> {
    /// On the coordinator's thread, as the last check of the gate (the serial loop).
    Here,
    /// On the thread of the parallel slot that verifies it, before its verifier (and the
    /// pinned inputs' check after it): a slow reviewer then holds up its slot only.
    /// `reviewing`: the experiments in flight whose review is not over yet.
    OnSlot { reviewing: &'r [u64] },
}

/// How the first half of an experiment ended.
enum Prepared {
    /// Recorded already (invalid, rejected, a violation...); `Some`: the run must stop.
    Done(Option<Stop>),
    Ready(Box<Candidate>),
}

/// Why the loop stopped.
struct Stop {
    reason: String,
    /// `hone run` continues the same run as it is (interrupts, failed baselines).
    resumable: bool,
    /// Report as an error (exit status 1).
    error: bool,
}

impl Stop {
    fn done(reason: impl Into<String>) -> Stop {
        Stop {
            reason: reason.into(),
            resumable: false,
            error: false,
        }
    }
    fn resumable(reason: impl Into<String>) -> Stop {
        Stop {
            reason: reason.into(),
            resumable: true,
            error: false,
        }
    }
    fn failed(reason: impl Into<String>) -> Stop {
        Stop {
            reason: reason.into(),
            resumable: true,
            error: true,
        }
    }
}

impl<'a> Engine<'a> {
    /// The verifier, and where the engine writes: the store and the subscribers of its
    /// events (for calls that need both).
    fn verifying(&mut self) -> (&mut Verifier, Sink<'_>) {
        let sink = Sink {
            store: &self.store,
            run_id: self.run.id,
            on_event: &mut *self.on_event,
        };
        (&mut self.verifier, sink)
    }

    /// Appends `event` to the event log and tells the subscribers. Inside one of the
    /// engine's transactions ([`Engine::finish`]), they hear of it once it is committed. The
    /// progress of an experiment (started, proposed, verifying) is told at once and written
    /// with the experiment's next record (so that it costs no commit of its own): an event that
    /// only a crash could lose with the unfinished experiment it is about.
    fn emit(&mut self, event: Event) {
        if let Some(held) = &mut self.held {
            verifier::log_event(&self.store, self.run.id, &event);
            held.push(event);
            return;
        }
        if matches!(
            event,
            Event::ExperimentStarted { .. } | Event::Proposed { .. } | Event::Verifying { .. }
        ) {
            (self.on_event)(&event);
            self.unlogged.push(event);
            return;
        }
        self.log_unlogged();
        self.verifying().1.emit(event);
    }

    /// Says what the sweep of leftover processes had to undo to find them (a mount that hid
    /// one, `/proc` mounted back), each a warning: an agent's or a verifier's doing.
    pub(super) fn say_sweep_notes(&mut self) {
        for message in crate::exec::unhide_notes() {
            self.emit(Event::Warning { message });
        }
    }

    /// Writes the progress events told but not yet written (see [`Engine::emit`]), in order.
    fn log_unlogged(&mut self) {
        for event in std::mem::take(&mut self.unlogged) {
            verifier::log_event(&self.store, self.run.id, &event);
        }
    }

    /// Where experiment `n`'s (first) verifier log is written.
    fn log_of(&self, n: u64) -> String {
        let dir = self.verifier.paths.run_dir(&self.run.tag).join("logs");
        dir.join(format!("{n}.log")).to_string_lossy().into_owned()
    }

    fn active_seconds(&self) -> f64 {
        self.active_before + self.session_start.elapsed().as_secs_f64()
    }

    /// The cancel check of the running experiment: a second Ctrl-C.
    fn cancel(&self) -> impl Fn() -> bool + 'a {
        let interrupt = self.interrupt;
        move || interrupt.kill_requested()
    }

    /// Runs one experiment; `Some(stop)` when the run must stop after it. The history is lent
    /// to [`Engine::prepare`], not copied (a copy per experiment grows with the run): an
    /// outcome recorded meanwhile (a rejection, always the last thing `prepare` does) waits in
    /// [`Engine::deferred`] until the history is back.
    fn experiment(&mut self) -> Result<Option<Stop>, EngineError> {
        self.say_sweep_notes();
        let wt = self.worktree.clone();
        let exps = std::mem::take(&mut self.history);
        self.lent = true;
        let prepared = self.prepare(&exps, &[], &wt, Review::Here);
        self.lent = false;
        self.history = exps;
        if let Some(f) = self.deferred.take() {
            self.finish(f.rec, f.status, f.reason, f.t_start)?;
        }
        // The serial loop without mechanisms: old records the proposer holds converted are
        // dropped from the history (the only other reader of them is the outer loop).
        if let (true, Some(through)) = (self.forgets(), self.proposer.holds_configs_through()) {
            let keep_last = self.kept_whole();
            self.forget_cursor = history::forget(
                &mut self.history,
                &mut self.dropped,
                self.forget_cursor,
                through,
                keep_last,
            );
        }
        match prepared? {
            Prepared::Done(stop) => Ok(stop),
            Prepared::Ready(c) => self.verify_and_decide(*c, &wt),
        }
    }

    /// The first half of an experiment in worktree `wt`: record its start, propose, archive
    /// and gate. `in_flight` are experiments being verified meanwhile (parallel runs): the
    /// proposer sees them, and a candidate identical to one of them is not run again.
    fn prepare(
        &mut self,
        exps: &[ExperimentRecord],
        in_flight: &[ExperimentRecord],
        wt: &Path,
        review: Review,
    ) -> Result<Prepared, EngineError> {
        let t_start = Instant::now();
        let best = best_experiment(exps).cloned();
        let (mut rec, parent) = self.record_start(exps, in_flight, best.as_ref(), wt)?;
        // What the proposer sees: finished experiments, and those still being verified
        // (`running`: their candidates are known, their outcomes not yet).
        let finished = history::shown(exps, in_flight);
        // Propose. hone's own refs are noted first: an agent that moves them is caught below.
        let refs_before = if best.is_none() {
            RefListing::default()
        } else {
            self.run_refs()?
        };
        let journal = self.verifier.paths.spend_journal(&self.run.tag, rec.n);
        let spent = propose::Spend::new(self.ledger.clone())
            .with_journal(journal, (rec.cost_usd, rec.tokens));
        let meter = propose::Meter {
            budget: match &self.ledger {
                Some(ledger) => ledger.opened_with(),
                None => history::budget_left(&self.verifier.spec, exps, &self.dropped),
            },
            spent: &spent,
        };
        let turn = proposal::Turn {
            wt,
            parent: &parent,
            best: best.as_ref(),
            finished: &finished,
            meter,
        };
        let proposal = self.propose(&mut rec, &turn)?;
        let t_gate = Instant::now();
        let in_place = matches!(&proposal, Some(Ok(p)) if p.in_place);
        if let Some(done) = self.take_proposal(&mut rec, proposal, &turn, t_start)? {
            return Ok(done);
        }
        // The gate, timed as one step: its checks, duplicates, then the review (here, or on
        // a parallel slot's thread, which adds its time).
        let mut rejection = self.gate(&mut rec, &turn, &refs_before, in_place)?;
        // Dedup: the same files as an experiment already measured give the same answer. Not
        // for a baseline: after a failed one, the user fixed the spec or the environment, and
        // the unmodified project is measured again.
        if rejection.is_none() && best.is_some() {
            let reviewing = match review {
                Review::OnSlot { reviewing } => reviewing,
                Review::Here => &[],
            };
            rejection = gate::duplicate(&rec, exps, &self.dropped, (in_flight, reviewing))
                .and_then(|why| gate::Rejection::new(Status::Invalid, why));
        }
        let unreviewed = best.is_some() && matches!(review, Review::OnSlot { .. });
        if rejection.is_none() && best.is_some() && !unreviewed {
            rejection = self.review_here(&mut rec, &turn)?;
        }
        if rejection.is_none() && !unreviewed {
            let v = &self.verifier;
            rejection = gate::pinned_rejection(&v.seals, v.git.root());
        }
        rec.gate_ms = t_gate.elapsed().as_millis() as u64;
        if let Some(r) = rejection {
            self.finish(rec, r.status, r.reason, t_start)?;
            return Ok(Prepared::Done(r.stop));
        }
        Ok(Prepared::Ready(Box::new(Candidate {
            rec,
            t_start,
            best,
            parent,
            unreviewed,
        })))
    }

    /// The second half of an experiment: verify the candidate in `wt`, decide, record.
    fn verify_and_decide(&mut self, c: Candidate, wt: &Path) -> Result<Option<Stop>, EngineError> {
        let mut c = c;
        let n = c.rec.n;
        // Verify: a first run, then the baseline's repeats or a passing candidate's confirms.
        let log = self.log_of(n);
        self.emit(Event::Verifying { n, log });
        let t_verify = Instant::now();
        let best_value = c.best.as_ref().and_then(|b| b.objective);
        let baseline = c.best.is_none();
        let refs_at_verify = if baseline {
            RefListing::default()
        } else {
            self.run_refs()?
        };
        let cancel = self.cancel();
        let sigma = self.judge().sigma(None);
        let (verifier, mut sink) = self.verifying();
        let verified = verifier.verify(
            &mut sink, &mut c.rec, wt, baseline, best_value, sigma, &cancel,
        )?;
        let (status, reason) = match verified {
            Verified::Cancelled => return self.abort(c.rec, c.t_start),
            Verified::Failed(status, reason) => (status, reason),
            Verified::Values { broken, failed } => {
                self.judge().verdict(&mut c.rec, failed, broken, best_value)
            }
        };
        c.rec.verify_ms = t_verify.elapsed().as_millis() as u64;
        self.conclude(c, wt, status, reason, Some(refs_at_verify))
    }

    /// Whether old records leave the in-memory history once the proposer holds them (see
    /// [`history::forget`]): the serial loop without `[outer]`, whose only reader of an old
    /// experiment's configuration is the knobs proposer.
    fn forgets(&self) -> bool {
        self.outer.is_empty() && self.verifier.spec.exec.workers <= 1
    }

    /// How many of the latest records [`history::forget`] leaves: more than the
    /// failures-in-a-row stop counts.
    fn kept_whole(&self) -> usize {
        let failures = self.verifier.spec.stop.max_consecutive_failures;
        history::FULL_WINDOW.max(usize::try_from(failures).unwrap_or(usize::MAX))
    }

    /// The run's branch and archive refs, each with what it holds (see [`state::run_refs`]).
    fn run_refs(&self) -> Result<RefListing, EngineError> {
        state::run_refs(&self.verifier.git, &self.run.tag)
    }
}
