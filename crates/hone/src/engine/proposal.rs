//! Asking for a candidate: the proposer (through the outer loop's mechanisms) edits the
//! worktree, or describes the baseline; what it says or fails with is then taken up, the
//! failures recorded at once (an `invalid` proposal is archived all the same).

use std::path::Path;
use std::time::Instant;

use crate::exec;
use crate::propose::{self, Proposal, ProposeContext, ProposeError};
use crate::store::{ExperimentRecord, Status};

use super::outage::{Next, Outage};
use super::state::archive_ref;
use super::verifier::Role;
use super::{Engine, EngineError, Event, Prepared, Stop};

/// One experiment's turn with the proposer: where it works and what it is shown.
pub(super) struct Turn<'t> {
    pub wt: &'t Path,
    /// The commit the candidate is made on (the best's, or the run's start).
    pub parent: &'t str,
    /// The best so far (`None`: this experiment is the baseline).
    pub best: Option<&'t ExperimentRecord>,
    /// Finished experiments and those being verified, in order.
    pub finished: &'t [ExperimentRecord],
    /// The budgets, and what this experiment has spent (proposer and reviewer together).
    pub meter: propose::Meter<'t>,
}

impl Engine<'_> {
    /// Asks for experiment `rec.n`: `None` for the baseline (the proposer only describes it),
    /// else the proposal or why there is none. Its time and spend go into `rec`.
    pub(super) fn propose(
        &mut self,
        rec: &mut ExperimentRecord,
        turn: &Turn<'_>,
    ) -> Result<Option<Result<Proposal, ProposeError>>, EngineError> {
        let n = rec.n;
        // A candidate a crash of hone cut off is verified again first (nothing is charged).
        if turn.best.is_some() {
            if let Some(p) = self.take_retry(n, turn.wt, turn.parent)? {
                return Ok(Some(Ok(p)));
            }
        }
        let cancel = self.cancel();
        let t_propose = Instant::now();
        let run_dir = self.verifier.paths.run_dir(&self.run.tag);
        let _ = std::fs::create_dir_all(run_dir.join("prompts"));
        let agent_wrapper = self.verifier.wrapper(turn.wt, true, Role::Agent);
        let no_guidance = crate::meta::Guidance::default();
        let job = self.verifier.job_token(n);
        // Whether the proposer started a process (an agent): only then can one be left over.
        let spawned = &std::cell::Cell::new(false);
        // What the proposal tries, as the proposer said it before it failed, if it did.
        let described = &std::cell::RefCell::new(String::new());
        let time_up = self.time_up();
        let proposal = {
            let (store, run_id) = (&self.store, self.run.id);
            // Told at once, as the live progress is (the experiment's record keeps what the
            // proposer's log says).
            let on_event = std::cell::RefCell::new(&mut *self.on_event);
            let note = |message: &str| {
                (on_event.borrow_mut())(&Event::Note {
                    message: format!("experiment {n}: {message}"),
                });
            };
            // Record the agent's process group as soon as it exists, so that a crash of hone
            // while the agent works leaves enough to kill it on resume.
            let on_spawn = move |pid: u32, start: Option<u64>| {
                spawned.set(true);
                let _ = store.set_experiment_pid(run_id, n, pid, start);
            };
            let ctx = ProposeContext {
                n,
                worktree: turn.wt,
                parent_commit: turn.parent,
                base_commit: &self.run.base_commit,
                history: turn.finished,
                best: turn.best,
                spec: &self.verifier.spec,
                git: &self.verifier.git,
                repo_root: self.verifier.git.root(),
                run_dir: &run_dir,
                seed: self.run.seed,
                cancel: &cancel,
                on_spawn: &on_spawn,
                wrapper: &agent_wrapper,
                budget: turn.meter.budget,
                spent: turn.meter.spent,
                guidance: &no_guidance,
                job: &job,
                time_up,
                note: &note,
                describe: &|d: &str| *described.borrow_mut() = d.to_string(),
            };
            if turn.best.is_none() {
                rec.config = self.proposer.describe_baseline(&ctx);
                None
            } else {
                // Outer loop: guidance, candidates and (for the knobs optimizer) filters.
                Some(self.outer.propose(&mut *self.proposer, &ctx))
            }
        };
        rec.propose_ms = t_propose.elapsed().as_millis() as u64;
        // A failed proposal is described by what it tried (an edit that did not apply).
        if matches!(&proposal, Some(Err(ProposeError::Invalid(_)))) && rec.description.is_empty() {
            rec.description = described.take();
        }
        if !matches!(&proposal, Some(Err(ProposeError::Unavailable(_)))) {
            // The model's server answered (or was not asked): an outage, if any, is over.
            self.outage = None;
        }
        let (usd, tokens) = turn.meter.spent.get();
        rec.cost_usd += usd;
        rec.tokens = rec.tokens.saturating_add(tokens);
        if spawned.get() {
            exec::kill_leftovers(Some(&job));
        }
        self.make_room_after(proposal, turn)
    }

    /// What a turn left that fills the disk goes: an agent CLI's private home the turn grew
    /// (the turn is then invalid), or, when hone's own writes failed, what the agent left in
    /// the worktree.
    fn make_room_after(
        &mut self,
        proposal: Option<Result<Proposal, ProposeError>>,
        turn: &Turn<'_>,
    ) -> Result<Option<Result<Proposal, ProposeError>>, EngineError> {
        // An agent CLI's private home persists across turns: one grown past its bound goes
        // (said), and a turn that filled the disk through it is invalid.
        if proposal.is_some() {
            match self.verifier.trim_private_home() {
                Some((why, true)) => {
                    return Ok(Some(Err(ProposeError::Invalid(match &proposal {
                        Some(Err(ProposeError::Fatal(w) | ProposeError::Invalid(w))) => {
                            format!("{w}; {why}")
                        }
                        _ => why,
                    }))));
                }
                Some((why, false)) => self.emit(Event::Warning { message: why }),
                None => {}
            }
        }
        // An agent that filled the disk made hone's own writes fail (its log, say): what it
        // left goes, so that the turn can be recorded (`invalid`, with what was removed; the
        // rest archived) and the run go on, rather than stop.
        if let Some(Err(ProposeError::Fatal(why) | ProposeError::Invalid(why))) = &proposal {
            let removed = self
                .verifier
                .git
                .make_room(turn.wt, turn.parent, false, 4)?;
            if !removed.is_empty() {
                return Ok(Some(Err(ProposeError::Invalid(format!(
                    "{why}; the disk was full: removed what the agent left: {}",
                    crate::workspace::removed_for_room(&removed)
                )))));
            }
        }
        Ok(proposal)
    }

    /// Takes up what the proposer gave: the baseline's commit, a proposal's description, or
    /// (recorded at once) why there is no candidate: `Some` then.
    pub(super) fn take_proposal(
        &mut self,
        rec: &mut ExperimentRecord,
        proposal: Option<Result<Proposal, ProposeError>>,
        turn: &Turn<'_>,
        t_start: Instant,
    ) -> Result<Option<Prepared>, EngineError> {
        let n = rec.n;
        let parent = turn.parent;
        let error = match proposal {
            None => {
                rec.description = "baseline".into();
                rec.candidate_commit = Some(parent.to_string());
                rec.tree = Some(self.verifier.git.tree_of(parent)?);
                self.verifier
                    .git
                    .update_ref_if_missing(&archive_ref(&self.run.tag, n), parent)?;
                return Ok(None);
            }
            Some(Ok(p)) => {
                rec.description = p.description;
                rec.config = p.config;
                rec.cost_usd += p.cost_usd;
                self.emit(Event::Proposed {
                    n,
                    description: rec.description.clone(),
                });
                return Ok(None);
            }
            Some(Err(e)) => e,
        };
        let rec = std::mem::take(rec);
        let stop = match error {
            ProposeError::Invalid(reason) => {
                // Whatever the proposer left is archived all the same.
                let mut rec = rec;
                self.archive(&mut rec, turn.wt, parent, false)?;
                self.finish(rec, Status::Invalid, reason, t_start)?;
                None
            }
            ProposeError::Cancelled => {
                self.finish(
                    rec,
                    Status::Aborted,
                    "interrupted by the user".into(),
                    t_start,
                )?;
                Some(Stop::resumable(
                    "interrupted by the user (run `hone run` to resume)",
                ))
            }
            ProposeError::Exhausted(reason) => {
                self.finish(rec, Status::Invalid, reason.clone(), t_start)?;
                Some(Stop::done(reason))
            }
            ProposeError::Budget(reason) => {
                // Nothing was sent: not a candidate's failure, and not counted (a run
                // resumed with `--more` on a spent budget adds no invalid experiment each time).
                self.finish(rec, Status::Aborted, reason.clone(), t_start)?;
                Some(Stop::done(reason))
            }
            ProposeError::Rejected(reason) => {
                // A mechanism refused every proposal; nothing was archived or verified.
                self.finish(rec, Status::Rejected, reason, t_start)?;
                None
            }
            ProposeError::Unavailable(reason) => self.outage(rec, &reason, t_start)?,
            ProposeError::TimeUp(reason) => {
                // Not the candidate's failure, and not counted: the stop conditions end the
                // run on max_time before the next experiment.
                self.finish(rec, Status::Aborted, reason, t_start)?;
                None
            }
            ProposeError::Fatal(reason) => {
                self.finish(rec, Status::Invalid, reason.clone(), t_start)?;
                Some(Stop::failed(reason))
            }
        };
        Ok(Some(Prepared::Done(stop)))
    }
}

impl Engine<'_> {
    /// Records `rec` cut off by the model server's outage (`reason`): no candidate's failure,
    /// so `aborted`, which max_consecutive_failures does not count; the run waits it out, or
    /// stops past `outage_limit`.
    fn outage(
        &mut self,
        rec: ExperimentRecord,
        reason: &str,
        t_start: Instant,
    ) -> Result<Option<Stop>, EngineError> {
        // A limit that says when it lifts (a plan's usage window) is waited out to then, up
        // to max_time, however long: it is no outage to give up on.
        let lifts = crate::presets::lifts_after(reason, crate::store::now()).filter(|_| {
            self.outage
                .get_or_insert_with(Outage::default)
                .believe_lift()
        });
        let (wait, stop) = match lifts {
            Some(d) => {
                let margin = std::time::Duration::from_secs(1);
                let left = self
                    .time_up()
                    .map(|t| t.saturating_duration_since(Instant::now()));
                (left.map_or(d + margin, |l| (d + margin).min(l)), None)
            }
            None => self.outage_wait(),
        };
        let what = if lifts.is_some() {
            "a limit of the agent's plan, which says when it lifts"
        } else {
            "the model's server was unavailable"
        };
        let reason = match &stop {
            Some(_) => format!("{what}: {reason}"),
            // max_time ran out: the run stops before another experiment.
            None if wait.is_zero() => format!("{what}: {reason}"),
            None => format!(
                "{what}: {reason}; the next experiment waits {}",
                crate::spec::format_duration(wait)
            ),
        };
        self.finish(rec, Status::Aborted, reason, t_start)?;
        Ok(match stop {
            Some(stop) => Some(stop),
            None => self.pause(wait),
        })
    }

    /// How long to wait after one more proposal found the model's server unavailable, or
    /// the stop when the outage has lasted `[agent] outage_limit`.
    fn outage_wait(&mut self) -> (std::time::Duration, Option<Stop>) {
        let agent = &self.verifier.spec.agent;
        let limits = (agent.outage_wait, agent.outage_limit);
        let time_up = self.time_up();
        let outage = self.outage.get_or_insert_with(Outage::default);
        match outage.next(limits, time_up) {
            Next::Wait(wait) => (wait, None),
            // The stop conditions end the run before the next experiment.
            Next::TimeUp => (std::time::Duration::ZERO, None),
            Next::OverLimit => (
                std::time::Duration::ZERO,
                Some(Stop::failed(format!(
                    "the model's server has been unavailable for {} (see `hone log`); run `hone run` to resume",
                    crate::spec::format_duration(outage.lasted())
                ))),
            ),
        }
    }

    /// Waits `wait` before the next proposal, or less when the user asks to stop: then the
    /// run stops (resumable).
    fn pause(&self, wait: std::time::Duration) -> Option<Stop> {
        let interrupt = self.interrupt;
        let waited = crate::util::pause(wait, &|| interrupt.stop_requested());
        (!waited).then(|| Stop::resumable("interrupted by the user (run `hone run` to resume)"))
    }
}

/// An agent's change says in words what it did: what it did to the constants is said before
/// them, in numbers (`[LR 0.05 -> 0.1] raise LR`). A knob proposal's description (it has a
/// configuration) is nothing else already.
pub(super) fn add_literal_changes(
    rec: &mut ExperimentRecord,
    git: &crate::workspace::Git,
    spec: &crate::spec::Spec,
    parent: &str,
    snap: &crate::workspace::Snapshot,
) {
    if rec.config.is_some() {
        return;
    }
    if let Some(lits) = literal_changes(git, &spec.loop_.editable, parent, snap) {
        // Said once: a candidate verified again (`retry`) has its description from before.
        let d = &rec.description;
        if *d == lits || d.starts_with(&format!("[{lits}] ")) || d.starts_with(&format!("{lits} "))
        {
            return;
        }
        // First, so that a prompt that cuts a long hypothesis short keeps the numbers.
        rec.description = if rec.description.is_empty() {
            lits
        } else {
            format!("[{lits}] {}", rec.description)
        };
    }
}

/// The knob literals a candidate moved in the editable files it modified: at most eight files
/// are read, each of at most 256 KiB, whose change added at most 50 lines (a change of
/// constants is a few lines; this bounds the time, and the names a hostile agent could make
/// hone learn).
fn literal_changes(
    git: &crate::workspace::Git,
    editable: &[String],
    parent: &str,
    snap: &crate::workspace::Snapshot,
) -> Option<String> {
    let paths = snap.changes.iter().filter(|c| {
        c.status == 'M' && c.added <= 50 && crate::workspace::matches_any(editable, &c.path)
    });
    literals_moved(
        git,
        paths.map(|c| c.path.as_str()),
        (parent, &snap.commit),
        256 << 10,
    )
}

/// The knob literals the commits from `from` to `to` moved in the files `editable` names (at
/// most eight files of at most 256 KiB each are read), followed by "(and other changes)" when
/// the commits changed more than those literals: an agent run's best against its baseline,
/// where its records hold no configuration to compare.
pub fn literal_changes_between(
    git: &crate::workspace::Git,
    editable: &[String],
    (from, to): (&str, &str),
) -> Option<String> {
    let names = git
        .run(&["diff", "--no-renames", "--name-only", "-z", from, to])
        .ok()?;
    let changed: Vec<&str> = names.split('\0').filter(|p| !p.is_empty()).collect();
    let paths = changed
        .iter()
        .copied()
        .filter(|p| crate::workspace::matches_any(editable, p));
    let moved = literals_moved(git, paths, (from, to), MAX_READ)?;
    // The constants are not the whole story when anything else changed too.
    let only_literals = changed.len() <= 8
        && changed.iter().all(|p| {
            let read = |commit: &str| {
                git.file_at_most(commit, p, MAX_READ)
                    .ok()
                    .flatten()
                    .and_then(|b| String::from_utf8(b).ok())
            };
            match (read(from), read(to)) {
                (Some(a), Some(b)) => {
                    crate::propose::knobs::replay_literals(p, &a, &b, &a).as_deref() == Some(&*b)
                }
                _ => false,
            }
        });
    Some(if only_literals {
        moved
    } else {
        format!("{moved} (and other changes)")
    })
}

/// What an agent run's best changed against its baseline, in numbers (its records hold no
/// configuration to compare): [`literal_changes_between`] the run's base commit and its best's
/// candidate commit. `None` for a knob run (its best's configuration says it), a run whose
/// best is its baseline, and a best whose commit this repository does not have.
pub fn best_vs_baseline_of_commits(
    git: &crate::workspace::Git,
    store: &crate::store::Store,
    run: &crate::store::RunRecord,
    editable: &[String],
) -> Option<String> {
    let best = store.best_of_run(run.id).ok()??;
    if best.config.is_some() {
        return None;
    }
    let to = best.candidate_commit?;
    if to == run.base_commit {
        return None;
    }
    literal_changes_between(git, editable, (&run.base_commit, &to))
}

/// [`best_vs_baseline_of_commits`] over the editable files run `run`'s stored spec names
/// (what `hone status`, the report and the dashboard say of a finished run).
pub fn best_vs_baseline_of_run(
    git: &crate::workspace::Git,
    store: &crate::store::Store,
    run: &crate::store::RunRecord,
) -> Option<String> {
    let spec: serde_json::Value = serde_json::from_str(&run.spec_json).ok()?;
    let editable: Vec<String> = spec["loop"]["editable"]
        .as_array()?
        .iter()
        .filter_map(|g| g.as_str().map(str::to_string))
        .collect();
    best_vs_baseline_of_commits(git, store, run, &editable)
}

/// The most bytes of a file read to say which constants a change moved.
const MAX_READ: usize = 256 << 10;

/// What [`crate::propose::knobs::literal_changes`] says of the first eight of `paths` between
/// commits `from` and `to`, each read when it holds at most `max` bytes of UTF-8 in both.
fn literals_moved<'p>(
    git: &crate::workspace::Git,
    paths: impl Iterator<Item = &'p str>,
    (from, to): (&str, &str),
    max: usize,
) -> Option<String> {
    let read = |commit: &str, path: &str| {
        git.file_at_most(commit, path, max)
            .ok()
            .flatten()
            .and_then(|b| String::from_utf8(b).ok())
    };
    let texts: Vec<(&str, String, String)> = paths
        .take(8)
        .filter_map(|p| Some((p, read(from, p)?, read(to, p)?)))
        .collect();
    crate::propose::knobs::literal_changes(
        texts.iter().map(|(p, a, b)| (*p, a.as_str(), b.as_str())),
    )
}
