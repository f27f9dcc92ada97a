//! Parallel experiments on one machine (`[exec] workers = N`, `hone run --workers N`).
//!
//! After the baseline, up to N candidates are in flight, each in its own worktree
//! (`.hone/slots/<tag>/w<i>`) with its slot's environment (`[exec] slots`, for example one
//! `CUDA_VISIBLE_DEVICES` each). The work is split by thread:
//!
//! - the coordinating thread (this one) does everything that touches the run's state, one step
//!   at a time: it asks the proposer for candidates (one call at a time; the proposer sees the
//!   in-flight experiments as `running`), archives them and runs the gate's checks up to the
//!   duplicates, and decides each result as it arrives: store write, then the compare-and-swap
//!   move of `hone/<tag>`. The branch history is therefore linear.
//! - one scoped thread per in-flight candidate runs its review (the slow part of the gate: a
//!   reviewer command or an LLM, so a slow reviewer holds up its slot only), then its verifier
//!   (first run, then repeats or confirms) through the same `verify`/`measure`/`execute` path
//!   as a serial run: it owns a [`Verifier`] of its own (the slot's worktree environment, its
//!   own executor connections)
//!   and the slot's store connection (SQLite in WAL mode takes the concurrent pid writes),
//!   which the slot keeps from one verification to the next. Once the verifier ends, the
//!   thread makes the slot's worktree exactly the best's commit as the coordinator last
//!   decided it (unless the verifier replaced its `.git` link, which the coordinator's
//!   integrity check must find as it was), so that the coordinator skips that reset when the
//!   next candidate of the slot is made on the same best.
//!
//! Until a reviewer (a command or an LLM) has given its first verdict in a session, the
//! coordinator asks a paid proposer (an agent, an LLM) for no second candidate while one is in
//! review: a reviewer that cannot work (a refused key) stops the run after one proposal, not
//! one per slot. A thread tells the
//! coordinator when its candidate passed the review ([`slot::Msg::Reviewed`]); its progress
//! then says `verifying`.
//!
//! The experiments' LLM calls (the coordinator's proposals, the threads' reviews) share the
//! run's budget through one [`Ledger`]: a call holds its worst case while it is out, so calls
//! made at the same time cannot together cross `max_cost_usd` or `max_tokens`.
//!
//! When the best moved while a candidate ran, the candidate is first judged against its own
//! parent, then against the current best. One that loses to either is `discard` (the reason
//! says which). One that beats both had its own code measured better than the best's: it is
//! kept, its commit made again on top of the best (undoing a change of the best's it lacks), so
//! a keep's number may be below the best's before it (the best is the keep decided last). Its
//! change merged onto the old best (`git merge-tree`, a three-way merge with its parent as the
//! base; knob literals replayed where the text merge conflicts), when that is other code than
//! its own, becomes a new experiment: both changes together, verified from scratch before it
//! can be kept. So each keep was verified on exactly the tree the branch moves to.
//!
//! A verifier that moves hone's refs (the run branch, its own archive ref) is caught when the
//! next result is decided and the refs are put back; with several verifiers running, the
//! experiment decided then is the one recorded as the `violation`, since which of them moved a
//! shared ref cannot be told apart (with `[sandbox] kind = "bwrap"` they cannot write refs).
//!
//! Crash safety is the serial loop's: every in-flight experiment has its `running` row (and its
//! verifier's process group) in the store before its verifier starts, so after a `kill -9` the
//! next `hone run` records each of them `aborted`, kills their groups and removes the slots'
//! worktrees ([`clean_slots`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;

use super::state::{self, archive_ref, branch_ref, shared_run_dir, StatePaths};
use super::verifier::Verified;
use super::{
    Candidate, Engine, EngineError, Event, Internal, Interrupt, Mismatch, Prepared, Review, Stop,
};
use crate::exec;
use crate::propose::Ledger;
use crate::report::best_experiment;
use crate::spec::{AgentKind, Spec};
use crate::store::{now, ExperimentRecord, Status, Store};
use crate::workspace::Git;
use slot::{Checked, Done, Msg, Work};

mod merge;
mod slot;

/// Where the slots' worktrees of run `tag` live: under `.hone/`, or for SLURM under the
/// shared directory the compute nodes see.
fn slots_dir(paths: &StatePaths, spec: &Spec, root: &Path, tag: &str) -> PathBuf {
    match shared_run_dir(spec, root, tag) {
        Some(dir) => dir.join("slots"),
        None => paths.dir.join("slots").join(tag),
    }
}

/// Removes the slots' worktrees of run `tag` (what in-flight candidates left behind).
/// Returns how many there were.
pub(super) fn clean_slots(
    git: &Git,
    paths: &StatePaths,
    spec: &Spec,
    tag: &str,
) -> Result<usize, EngineError> {
    let dir = slots_dir(paths, spec, git.root(), tag);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(0);
    };
    let mut n = 0;
    for e in entries.flatten() {
        git.remove_worktree(&e.path())?;
        n += 1;
    }
    let _ = std::fs::remove_dir(&dir);
    Ok(n)
}

/// One verification slot: its worktree and what its verifier's environment adds.
struct Slot {
    worktree: PathBuf,
    env: Vec<(String, String)>,
}

/// A candidate whose verifier runs in a slot.
struct InFlight {
    cand: Candidate,
    t_verify: Instant,
    /// Its review (on the slot's thread) is not over yet.
    in_review: bool,
}

/// The slots' state, as the coordinator keeps it.
struct Pool {
    /// Slots with nothing in flight.
    free: Vec<usize>,
    flying: std::collections::BTreeMap<usize, InFlight>,
    /// Per slot: the commit its thread made its worktree after its last verification.
    ready: Vec<Option<String>>,
    /// Per slot: its threads' store connection, handed from one verification to the next.
    stores: Vec<Option<Store>>,
    /// The reviewer gave a verdict in this session (see [`Engine::reviewer_unheard`]).
    reviewer_heard: bool,
}

/// What became of a decided result.
enum Next {
    /// The slot is free again; `Some`: the run must stop.
    Free(Option<Stop>),
    /// The candidate's change, merged onto the current best, is verified in the same slot.
    Again(Box<Candidate>),
}

impl Engine<'_> {
    /// The loop after the baseline with `[exec] workers` > 1; returns why it stopped, once
    /// every experiment in flight is decided.
    pub(super) fn run_parallel(&mut self) -> Result<Stop, EngineError> {
        let workers = self.verifier.spec.exec.workers;
        let tag = self.run.tag.clone();
        let v = &self.verifier;
        let head = v
            .git
            .ref_target(&branch_ref(&tag))?
            .ok_or_else(|| Mismatch::BranchMissing {
                branch: format!("hone/{tag}"),
            })?;
        let mut slots = Vec::new();
        for i in 0..workers {
            let worktree = slots_dir(&v.paths, &v.spec, v.git.root(), &tag).join(format!("w{i}"));
            v.git.prepare_worktree(&worktree, &head)?;
            let mut env = v.spec.exec.slots.get(i).cloned().unwrap_or_default();
            env.push(("HONE_SLOT".into(), i.to_string()));
            slots.push(Slot { worktree, env });
        }
        let message = format!(
            "{workers} experiments at a time, in worktrees under {}",
            slots_dir(&v.paths, &v.spec, v.git.root(), &tag).display()
        );
        self.emit(Event::Note { message });
        exec::set_concurrent(true);
        // The budgets' ledger: what is left now, shared by the experiments in flight.
        let left = super::history::budget_left(&self.verifier.spec, &self.history, &self.dropped);
        let ledger = Arc::new(Ledger::new(left));
        self.ledger = Some(ledger.clone());
        let abort = AtomicBool::new(false);
        // The best's commit, as the coordinator last decided it: what a slot's thread makes
        // its worktree once its verification ends.
        let best_commit = Mutex::new(head);
        let (tx, rx) = mpsc::channel::<Msg>();
        let interrupt: &Interrupt = self.interrupt;
        let run_id = self.run.id;
        // The loop's active time runs with the clock while the slots work.
        let time_up = self.time_up();
        let result = std::thread::scope(|s| {
            let spawn = |work: Work| {
                let tx = tx.clone();
                let abort = &abort;
                let best_commit = &best_commit;
                let ledger = &ledger;
                s.spawn(move || {
                    let cancel = || interrupt.kill_requested() || abort.load(Ordering::SeqCst);
                    let stopping = || interrupt.stop_requested();
                    let shared = slot::Shared {
                        run_id,
                        ledger,
                        best_commit,
                        cancel: &cancel,
                        stopping: &stopping,
                        time_up,
                    };
                    slot::run(work, &shared, &tx);
                });
            };
            let result = self.parallel_loop(&slots, &rx, &spawn, (&abort, &best_commit));
            if result.is_err() {
                // Stop the verifiers now: the scope waits for their threads.
                abort.store(true, Ordering::SeqCst);
            }
            result
        });
        exec::set_concurrent(false);
        exec::kill_orphans();
        self.ledger = None;
        let v = &self.verifier;
        let _ = clean_slots(&v.git, &v.paths, &v.spec, &tag);
        result
    }

    /// Keeps the slots busy: fills every free slot with a proposal (one at a time), then
    /// decides the next result to arrive, until a stop condition holds and nothing is in flight.
    fn parallel_loop(
        &mut self,
        slots: &[Slot],
        rx: &mpsc::Receiver<Msg>,
        spawn: &dyn Fn(Work),
        (abort, best_commit): (&AtomicBool, &Mutex<String>),
    ) -> Result<Stop, EngineError> {
        let mut pool = Pool {
            free: (0..slots.len()).rev().collect(),
            flying: Default::default(),
            ready: vec![None; slots.len()],
            stores: (0..slots.len()).map(|_| None).collect(),
            reviewer_heard: false,
        };
        let mut stop: Option<Stop> = None;
        loop {
            // Orphans that exited by themselves since the last decision (see `reap_adopted`:
            // this thread waits for no process of its own here).
            exec::reap_adopted();
            if stop.is_none() {
                stop = self.fill_slots(slots, spawn, &mut pool)?;
            }
            if stop.as_ref().is_some_and(|s| s.error) {
                abort.store(true, Ordering::SeqCst);
            }
            if pool.flying.is_empty() {
                break;
            }
            // Decide the next result to arrive; the others keep running meanwhile.
            let mut done = match rx.recv().map_err(|_| Internal::ThreadVanished)? {
                Msg::Reviewed(slot) => {
                    self.reviewed(slot, &mut pool);
                    continue;
                }
                Msg::Done(done) => *done,
            };
            // The reviewer answered: it works.
            pool.reviewer_heard |= done.verdict;
            let slot = done.slot;
            let Some(f) = pool.flying.remove(&slot) else {
                continue;
            };
            let ready_at = done.ready_at.take();
            pool.stores[slot] = done.store.take();
            let before = self.history.len();
            let next_n = self
                .history
                .iter()
                .map(|e| e.n)
                .chain(pool.flying.values().map(|f| f.cand.rec.n))
                .chain(std::iter::once(f.cand.rec.n))
                .max()
                .map_or(0, |n| n + 1);
            let room = self.verifier.spec.stop.max_experiments
                > self.counted(&self.history) + (pool.flying.len() + 1) as u64;
            // A keep's holdout runs in this slot, with its environment.
            self.verifier.slot_env = slots[slot].env.clone();
            let next = self.decide_parallel(f, done, &slots[slot].worktree, next_n, room);
            self.verifier.slot_env.clear();
            self.share_best(best_commit);
            match next? {
                Next::Free(s) => {
                    pool.free.push(slot);
                    // A holdout or a champion's re-test may have run in the worktree since the
                    // thread made it ready (and a failed re-test moves the best back: the
                    // worktree then holds the reverted champion's files).
                    let v = &self.verifier.spec.verify;
                    if v.holdout.is_none() && v.retest_every.is_none() {
                        pool.ready[slot] = ready_at;
                    }
                    if stop.is_none() {
                        stop = s;
                    }
                }
                Next::Again(c) => self.dispatch(slot, &slots[slot], *c, spawn, &mut pool),
            }
            self.after_experiment(before)?;
        }
        Ok(stop.unwrap_or_else(|| Stop::done("nothing left to run")))
    }

    /// Fills the free slots with proposals, one at a time; why the run must stop, if it must.
    fn fill_slots(
        &mut self,
        slots: &[Slot],
        spawn: &dyn Fn(Work),
        pool: &mut Pool,
    ) -> Result<Option<Stop>, EngineError> {
        while !pool.free.is_empty() && !self.reviewer_unheard(pool) {
            let exps = self.history.clone();
            let in_flight: Vec<ExperimentRecord> =
                pool.flying.values().map(|f| f.cand.rec.clone()).collect();
            if let Some(stop) = self.parallel_stop(&exps, in_flight.len()) {
                return Ok(Some(stop));
            }
            let Some(slot) = pool.free.pop() else { break };
            let wt = &slots[slot].worktree;
            self.slot_ready = pool.ready[slot].take().map(|c| (wt.clone(), c));
            // In review: with a reviewer to wait for (the rules alone take no time), and no
            // word yet from its slot.
            let r = &self.verifier.spec.review;
            let reviewer = r.command.is_some() || r.llm.is_some();
            let reviewing: Vec<u64> = pool
                .flying
                .values()
                .filter(|f| reviewer && f.in_review)
                .map(|f| f.cand.rec.n)
                .collect();
            let review = Review::OnSlot {
                reviewing: &reviewing,
            };
            let prepared = self.prepare(&exps, &in_flight, wt, review);
            self.slot_ready = None;
            match prepared? {
                Prepared::Done(s) => {
                    pool.free.push(slot);
                    self.after_experiment(exps.len())?;
                    if s.is_some() {
                        return Ok(s);
                    }
                }
                Prepared::Ready(c) => {
                    self.dispatch(slot, &slots[slot], *c, spawn, pool);
                }
            }
        }
        Ok(None)
    }

    /// Tells the slots' threads the best's commit as it is now (see [`Work::ready_for_next`]).
    fn share_best(&self, best_commit: &Mutex<String>) {
        let commit = best_experiment(&self.history)
            .and_then(|b| b.candidate_commit.clone())
            .unwrap_or_else(|| self.run.base_commit.clone());
        if let Ok(mut c) = best_commit.lock() {
            *c = commit;
        }
    }

    /// Why no further experiment may start (`in_flight` are running), if none may.
    fn parallel_stop(&self, exps: &[ExperimentRecord], in_flight: usize) -> Option<Stop> {
        if let Some(stop) = self.stop_condition(exps) {
            return Some(stop);
        }
        let max = self.verifier.spec.stop.max_experiments;
        if self.counted(exps) + in_flight as u64 >= max {
            return Some(Stop::done(format!("reached max_experiments ({max})")));
        }
        self.ledger_stop()
    }

    /// The budget stop counting what the experiments in flight spent too (the run's ledger):
    /// an agent that reports its cost after it ran has none checked before it starts.
    fn ledger_stop(&self) -> Option<Stop> {
        let ledger = self.ledger.as_ref().filter(|l| l.exhausted())?;
        let (opened, (usd, tokens)) = (ledger.opened_with(), ledger.spent());
        let s = &self.verifier.spec.stop;
        let reason = match (s.max_cost_usd, opened.usd_left) {
            (Some(max), Some(left)) if usd >= left => {
                super::stops::cost_spent(max - left + usd, max)
            }
            _ => {
                let max = s.max_tokens.unwrap_or(0);
                let total = max
                    .saturating_sub(opened.tokens_left.unwrap_or(0))
                    .saturating_add(tokens);
                super::stops::tokens_spent(total, max)
            }
        };
        Some(Stop::done(reason))
    }

    /// What the serial loop does after each experiment: pack refs now and then (the loop's
    /// active time was recorded with the outcome, in [`Engine::finish`]).
    fn after_experiment(&mut self, count: usize) -> Result<(), EngineError> {
        state::pack_refs_now_and_then(&self.verifier.git, count);
        Ok(())
    }

    /// Starts the verification of `cand` (checked out in the slot's worktree) on its own thread.
    fn dispatch(
        &mut self,
        slot: usize,
        s: &Slot,
        cand: Candidate,
        spawn: &dyn Fn(Work),
        pool: &mut Pool,
    ) {
        // A candidate still to be reviewed is verifying once its slot says it passed.
        if !cand.unreviewed {
            let log = self.log_of(cand.rec.n);
            self.emit(Event::Verifying { n: cand.rec.n, log });
        }
        let work = Work {
            slot,
            verifier: self.verifier.for_slot(s.env.clone()),
            worktree: s.worktree.clone(),
            rec: cand.rec.clone(),
            best: cand.best.as_ref().and_then(|b| b.objective),
            sigma: self.judge().sigma(None),
            store: pool.stores[slot].take(),
            review_from: cand.unreviewed.then(|| cand.parent.clone()),
            review_ms: 0,
            verdict: false,
        };
        spawn(work);
        let in_review = cand.unreviewed;
        pool.flying.insert(
            slot,
            InFlight {
                cand,
                t_verify: Instant::now(),
                in_review,
            },
        );
    }

    /// The candidate in `slot` passed its review and goes to its verifier.
    fn reviewed(&mut self, slot: usize, pool: &mut Pool) {
        pool.reviewer_heard = true;
        let Some(f) = pool.flying.get_mut(&slot) else {
            return;
        };
        f.in_review = false;
        let n = f.cand.rec.n;
        let log = self.log_of(n);
        self.emit(Event::Verifying { n, log });
    }

    /// Whether the next proposal must wait: a reviewer (a command or an LLM) that has given no
    /// verdict yet in this session is reviewing a candidate. One that cannot work (a refused
    /// key, a broken command) then stops the run after one paid proposal, not one per slot.
    /// The built-in knobs optimizer's proposals cost nothing: they never wait.
    fn reviewer_unheard(&self, pool: &Pool) -> bool {
        let spec = &self.verifier.spec;
        let r = &spec.review;
        spec.agent.kind != AgentKind::Knobs
            && (r.command.is_some() || r.llm.is_some())
            && !pool.reviewer_heard
            && pool.flying.values().any(|f| f.in_review)
    }

    /// Decides a verified candidate against the best as it is now (see the module docs).
    /// `next_n` is the number a re-verification would get; `room`: max_experiments allows one.
    fn decide_parallel(
        &mut self,
        f: InFlight,
        done: Done,
        wt: &Path,
        next_n: u64,
        room: bool,
    ) -> Result<Next, EngineError> {
        let InFlight {
            mut cand, t_verify, ..
        } = f;
        cand.rec = done.rec;
        let elapsed = t_verify.elapsed().as_millis() as u64;
        cand.rec.verify_ms = elapsed.saturating_sub(done.review_ms);
        let checked = done.checked?;
        let current = best_experiment(&self.history).cloned();
        let current_commit = current
            .as_ref()
            .and_then(|b| b.candidate_commit.clone())
            .unwrap_or_else(|| self.run.base_commit.clone());
        let best_value = current.as_ref().and_then(|b| b.objective);
        // Other experiments write refs meanwhile, so the serial check (all of hone's refs as
        // they were) does not apply; the branch and this experiment's archive ref must be
        // where the coordinator left them.
        // Someone else's commit on the run branch: kept, blamed on no candidate; the run stops.
        if let Some(stop) = self.foreign_commit_checked_out(&current_commit)? {
            let why = "not judged: a commit that is not hone's landed on the run branch while it was verified; the run stopped".to_string();
            self.finish(cand.rec, Status::Aborted, why, cand.t_start)?;
            return Ok(Next::Free(Some(stop)));
        }
        let moved = self.put_back_refs(&cand.rec, &current_commit)?;
        let reviewer = cand.unreviewed && self.verifier.spec.review.command.is_some();
        let who = match &checked {
            // Its verifier never ran: another slot's did meanwhile, or its reviewer.
            Checked::Reviewed(_) => "a reviewer or verifier that ran meanwhile",
            Checked::Verified(_) if reviewer => "the reviewer or the verifier run",
            Checked::Verified(_) => "the verifier run",
        };
        let moved =
            moved.map(|names| format!("{who} moved hone's refs ({names}); they were put back"));
        let verified = match (moved, checked) {
            (Some(why), Checked::Verified(_)) => Verified::Failed(Status::Violation, why),
            (None, Checked::Verified(verified)) => verified,
            (moved, Checked::Reviewed(r)) => {
                // Kept from its verifier: recorded so, unless refs moved; a stop stands.
                let (status, reason) = match moved {
                    Some(why) => (Status::Violation, why),
                    None => (r.status, r.reason),
                };
                self.finish(cand.rec, status, reason, cand.t_start)?;
                return Ok(Next::Free(r.stop));
            }
        };
        let (status, reason) = match verified {
            Verified::Cancelled => return self.cancelled(cand),
            Verified::Failed(status, reason) => (status, reason),
            Verified::Values { broken, failed } if current_commit == cand.parent => self
                .judge()
                .verdict(&mut cand.rec, failed, broken, best_value),
            Verified::Values { broken, failed } => {
                // The best moved while it ran: first against its own parent...
                let parent_n = cand.best.as_ref().map_or(0, |b| b.n);
                let parent_value = cand.best.as_ref().and_then(|b| b.objective);
                let (status, reason) =
                    self.judge()
                        .verdict(&mut cand.rec, failed, broken, parent_value);
                let best_n = current.as_ref().map_or(0, |b| b.n);
                if status != Status::Keep {
                    (status, reason)
                } else {
                    // ...then against the current best.
                    let (status, why) = self.judge().verdict(&mut cand.rec, None, None, best_value);
                    if status != Status::Keep {
                        (
                            Status::Discard,
                            format!(
                                "beat its parent #{parent_n} but not the current best #{best_n}, kept while it ran: {why}"
                            ),
                        )
                    } else {
                        let Some(best) = current else {
                            return Err(Internal::NoBest.into());
                        };
                        return self.merge_onto_best(cand, best, wt, next_n, room);
                    }
                }
            }
        };
        self.conclude(cand, wt, status, reason, None)
            .map(Next::Free)
    }

    /// A candidate whose verification the run's stop cancelled: aborted as a second Ctrl-C
    /// aborts, else recorded `aborted` with its processes killed.
    fn cancelled(&mut self, cand: Candidate) -> Result<Next, EngineError> {
        if self.interrupt.kill_requested() {
            return self.abort(cand.rec, cand.t_start).map(Next::Free);
        }
        self.finish(
            cand.rec,
            Status::Aborted,
            "the run stopped while it was verified; its processes were killed".into(),
            cand.t_start,
        )?;
        Ok(Next::Free(None))
    }

    /// Puts the run branch (at `branch_at`) and `rec`'s archive ref back where the
    /// coordinator left them, if they moved; returns their names then.
    fn put_back_refs(
        &mut self,
        rec: &ExperimentRecord,
        branch_at: &str,
    ) -> Result<Option<String>, EngineError> {
        let mut moved = Vec::new();
        let branch = branch_ref(&self.run.tag);
        let mut expected = vec![(branch, Some(branch_at.to_string()))];
        if let Some(c) = &rec.candidate_commit {
            expected.push((archive_ref(&self.run.tag, rec.n), Some(c.clone())));
        }
        for (name, want) in expected {
            // What the ref holds, not peeled: an annotated tag of the same commit put on the
            // branch is a move too (and the compare-and-swap below names what is there).
            let now = self.verifier.git.ref_value_raw(&name)?;
            if now != want {
                match (&want, &now) {
                    (Some(w), Some(n)) => self.verifier.git.put_ref_back(&name, Some(w), n)?,
                    (Some(w), None) => self.verifier.git.update_ref(&name, w, None)?,
                    (None, _) => {}
                }
                moved.push(name);
            }
        }
        Ok((!moved.is_empty()).then(|| moved.join(", ")))
    }

    /// A candidate that beat the current best although made on an older one: kept on top of
    /// the best with its own code ([`Engine::keep_on_moved_best`]); its change merged onto the
    /// best, when that is other code, becomes experiment `next_n`, verified before it can be
    /// kept. One whose change the best holds already beat it by noise: `discard`.
    fn merge_onto_best(
        &mut self,
        cand: Candidate,
        best: ExperimentRecord,
        wt: &Path,
        next_n: u64,
        room: bool,
    ) -> Result<Next, EngineError> {
        let (parent_n, n) = (cand.best.as_ref().map_or(0, |b| b.n), cand.rec.n);
        let onto = best
            .candidate_commit
            .clone()
            .unwrap_or_else(|| self.run.base_commit.clone());
        let Some(commit) = cand.rec.candidate_commit.clone() else {
            let why = "no candidate commit".to_string();
            return self
                .conclude(cand, wt, Status::Discard, why, None)
                .map(Next::Free);
        };
        let value = crate::report::fmt_metric(cand.rec.objective);
        let merged = merge::merge_onto(&self.verifier.git, &cand.parent, &onto, &commit)?;
        let b = best.n;
        let tree = match merged {
            // First: a candidate whose code is the best's beat it by noise alone.
            Ok(tree) if Some(&tree) == best.tree.as_ref() => {
                let why = format!(
                    "it beat the current best #{b} with {value} but its change is already in it"
                );
                return self
                    .conclude(cand, wt, Status::Discard, why, None)
                    .map(Next::Free);
            }
            Ok(tree) if Some(&tree) == cand.rec.tree.as_ref() => {
                let how = "its change put onto the best is its own code, measured already";
                return self
                    .keep_on_moved_best(cand, best, (&onto, wt), parent_n, how)
                    .map(Next::Free);
            }
            other => other,
        };
        // Its own code measured better than the best's: kept on top of the best (the best's
        // change that it lacks undone), never lost for want of a merge. A clean merge of both
        // changes is then verified as the next experiment, where max_experiments leaves room.
        let best_description = best.description.clone();
        let cand_description = cand.rec.description.clone();
        let again = match &tree {
            Ok(tree) if room => Some((tree.clone(), merged_config(&cand, &best))),
            _ => None,
        };
        let mut how = format!(
            "its own code, measured better than #{b}, is kept on top of it (#{b}'s change, which it lacks, is undone)"
        );
        match (&tree, &again) {
            (Err(paths), _) => how.push_str(&format!(
                "; their changes do not merge ({})",
                paths.join(", ")
            )),
            (Ok(_), Some(_)) => how.push_str(&format!(
                "; both changes together are verified as #{next_n}"
            )),
            (Ok(_), None) => how
                .push_str("; max_experiments leaves no experiment to verify both changes together"),
        }
        if let Some(stop) = self.keep_on_moved_best(cand, best, (&onto, wt), parent_n, &how)? {
            return Ok(Next::Free(Some(stop)));
        }
        let (Some((tree, config)), Some(kept)) = (again, best_experiment(&self.history).cloned())
        else {
            return Ok(Next::Free(None));
        };
        let recorded = self
            .history
            .iter()
            .rev()
            .find(|e| e.n == n)
            .map(|e| e.status());
        let c = match recorded {
            // Both changes together: the best's, put onto the candidate kept.
            Some(Status::Keep) if kept.n == n => {
                self.start_merged(b, &best_description, config, &tree, kept, wt, next_n)?
            }
            // Judged again from the best, it was not kept (its change, counted from there, is
            // no simplification): its change put onto the best, unmoved, is verified all the
            // same. (Kept, then failed its re-test or lost to git gc: nothing more.)
            Some(Status::Discard) if kept.n == b => {
                self.start_merged(n, &cand_description, config, &tree, kept, wt, next_n)?
            }
            _ => return Ok(Next::Free(None)),
        };
        Ok(Next::Again(Box::new(c)))
    }

    /// Records experiment `n`: the change of experiment `from` merged onto `best` (as `tree`),
    /// checked out in `wt` for its verifier. Row first, then its commit and at once its archive
    /// ref, then the commit in its row.
    #[allow(clippy::too_many_arguments)]
    fn start_merged(
        &mut self,
        from: u64,
        description: &str,
        config: Option<serde_json::Value>,
        tree: &str,
        best: ExperimentRecord,
        wt: &Path,
        n: u64,
    ) -> Result<Candidate, EngineError> {
        let onto = best
            .candidate_commit
            .clone()
            .unwrap_or_else(|| self.run.base_commit.clone());
        let t_start = Instant::now();
        let mut rec = ExperimentRecord {
            n,
            parent_commit: onto.clone(),
            status: Some(Status::Running),
            started_at: now(),
            description: format!("#{from} on top of #{}: {description}", best.n),
            config,
            ..Default::default()
        };
        self.store.put_experiment(self.run.id, &rec)?;
        self.emit(Event::ExperimentStarted { n });
        let message = format!(
            "hone #{n}: {}\n\nHone-Run: {}\nHone-Experiment: {n}\nHone-Merged-From: {from}\n",
            rec.description, self.run.tag
        );
        let commit = self
            .verifier
            .git
            .commit_with_message(tree, &onto, &message)?;
        // Its ref at once: an unreferenced commit is what `git gc --prune=now` deletes.
        self.verifier
            .git
            .update_ref(&archive_ref(&self.run.tag, n), &commit, None)?;
        let changes = self.verifier.git.changes(&onto, &commit)?;
        rec.files_changed = changes.len() as u64;
        rec.lines_added = changes.iter().map(|c| c.added).sum();
        rec.lines_deleted = changes.iter().map(|c| c.deleted).sum();
        rec.candidate_commit = Some(commit.clone());
        rec.tree = Some(tree.to_string());
        self.store.put_experiment(self.run.id, &rec)?;
        self.emit(Event::Proposed {
            n,
            description: rec.description.clone(),
        });
        self.verifier.git.reset_worktree(wt, &commit)?;
        Ok(Candidate {
            rec,
            t_start,
            best: Some(best),
            parent: onto,
            // Both changes it merges passed the review gate.
            unreviewed: false,
        })
    }
}

/// The knob configuration of a candidate's change merged onto `best`: the best's, with the
/// knobs the candidate changed from its parent's.
fn merged_config(cand: &Candidate, best: &ExperimentRecord) -> Option<serde_json::Value> {
    let (Some(serde_json::Value::Object(mine)), Some(serde_json::Value::Object(base))) = (
        cand.rec.config.as_ref(),
        cand.best.as_ref().and_then(|b| b.config.as_ref()),
    ) else {
        return None;
    };
    let Some(serde_json::Value::Object(mut out)) = best.config.clone() else {
        return None;
    };
    for (k, v) in mine {
        if base.get(k) != Some(v) {
            out.insert(k.clone(), v.clone());
        }
    }
    Some(serde_json::Value::Object(out))
}
