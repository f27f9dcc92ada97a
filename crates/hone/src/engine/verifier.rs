//! Measuring a candidate: the verifier's runs (a first run, then the baseline's repeats or a
//! passing candidate's confirms), the sealed evaluator, the holdout, and the environment and
//! sandbox every one of them runs in. A [`Verifier`] owns what that needs (the repository, the
//! run's settings and seals, the slot's environment, the [`Executor`]); what it measures (the
//! experiment, its commit, the stage) comes in as arguments. The serial loop has one; each
//! parallel verification thread owns its own ([`Verifier::for_slot`]).

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::exec::{ExecRequest, Exit};
use crate::spec::{format_duration, HoldoutSpec, Spec};
use crate::store::{ExperimentRecord, Status, Store};
use crate::verify::metrics::{MetricReader, MetricSet};
use crate::workspace::{first_difference, hash_paths_bounded, Git};

#[path = "verifier_confine.rs"]
mod confine;

use super::executor::{Executor, Failure, Io, Job, RunPlace};
use super::hints::{last_words, missing_metric_hint};
use super::progress::Watch;
use super::state::{Seals, StatePaths};
use super::{Config, EngineError, Event};

/// Where the engine writes while it works: the run's store (experiments, pids, job ids,
/// events) and whoever listens to its events.
pub(super) struct Sink<'s> {
    pub store: &'s Store,
    pub run_id: i64,
    pub on_event: &'s mut dyn FnMut(&Event),
}

impl Sink<'_> {
    /// Appends `event` to the run's event log, then tells the subscribers.
    pub(super) fn emit(&mut self, event: Event) {
        log_event(self.store, self.run_id, &event);
        (self.on_event)(&event);
    }
}

/// Appends `event` to the run's event log.
pub(super) fn log_event(store: &Store, run_id: i64, event: &Event) {
    let n = match event {
        Event::ExperimentStarted { n } | Event::Proposed { n, .. } | Event::Verifying { n, .. } => {
            Some(*n)
        }
        Event::ExperimentFinished { record, .. } => Some(record.n),
        Event::Outer { n, .. } => Some(*n),
        _ => None,
    };
    let data = serde_json::to_value(event).unwrap_or(serde_json::Value::Null);
    // The event log is a record, not a control path: a failed append must not stop the loop,
    // nor undo the writes of the transaction it is part of.
    let _ = store.best_effort(|s| s.append_event(run_id, n, event.kind(), &data));
}

/// Whose process a sandbox is for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    Agent,
    Verifier,
    Holdout,
}

/// Which command of a verification runs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    /// `[verify] command` (with `evaluate`, it only trains or builds).
    Command,
    /// `[verify] evaluate`, the sealed evaluator.
    Evaluate,
    /// `[verify.holdout] command`, or its sealed `evaluate`.
    Holdout,
    /// `[verify.holdout] command` when a sealed `evaluate` follows: the candidate's code
    /// predicts, as a verifier runs (its worktree writable, `hide` out of its reach), offline.
    Predict,
}

/// What verifying a candidate gave, before any decision.
pub(super) enum Verified {
    Cancelled,
    Failed(Status, String),
    /// Its runs are in its record; a constraint it broke, a repeat that failed.
    Values {
        broken: Option<String>,
        failed: Option<Failure>,
    },
}

/// One run of the verifier, classified.
pub(super) enum Measured {
    Value { value: f64, metrics: MetricSet },
    Failed { status: Status, reason: String },
    Cancelled,
}

/// One stage's run: what it runs, on which commit, under which log.
struct StageRun<'r> {
    n: u64,
    command: &'r str,
    log_path: PathBuf,
    repeat: u64,
    stage: Stage,
    /// The commit being measured; `None`: the worktree's HEAD.
    commit: Option<&'r str>,
    /// The commit whose files the stage starts from: what else it leaves is its own.
    files: &'r str,
}

/// Measures candidates of one run, in one place (the run's worktree or a parallel slot).
pub(super) struct Verifier {
    pub git: Git,
    pub paths: StatePaths,
    pub spec: Spec,
    pub seals: Seals,
    pub tag: String,
    pub base_commit: String,
    /// bubblewrap is configured and runs here.
    pub contained: bool,
    /// The environment of the verification slot this verifier runs in (`[exec] slots`).
    pub slot_env: Vec<(String, String)>,
    pub executor: Box<dyn Executor>,
    /// The run being measured is a candidate's first, which `[verify] prune` may stop.
    pub prunable: bool,
    /// Held shared while a verification or a reviewer command runs, alone while the holdout runs
    /// (shared by a run's slots): the holdout, which reads the hidden data, never runs beside
    /// another candidate's code, which could read what it signals through state that crosses
    /// sandboxes (locks on shared files, timing), far more than its one documented channel.
    pub candidate_code: std::sync::Arc<std::sync::RwLock<()>>,
    /// The last watched run's progress points all came as it ended (see
    /// `progress::Watched::bunched`): read after the baseline.
    pub bunched: bool,
}

/// Why a run that filled the disk with what it held open (a file it deleted) is a crash.
const HELD_ROOM: &str = "the disk filled up while it ran, and its space came back when its processes ended (it held open what filled it)";

/// Whether a file can be written in `dir` again, tried for up to a second (the space a
/// killed process held comes back once the kernel has closed its files).
fn room_came_back(dir: &Path) -> bool {
    let probe = dir.join(".room-probe");
    for _ in 0..20 {
        let wrote = std::fs::write(&probe, vec![0u8; 1 << 20]);
        let _ = std::fs::remove_file(&probe);
        match wrote {
            Ok(()) => return true,
            Err(e) if crate::workspace::out_of_room(&e) => {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(_) => return false,
        }
    }
    false
}

impl Verifier {
    /// The same verifier for a parallel slot with environment `slot_env`.
    pub(super) fn for_slot(&self, slot_env: Vec<(String, String)>) -> Verifier {
        Verifier {
            git: self.git.clone(),
            paths: self.paths.clone(),
            spec: self.spec.clone(),
            seals: self.seals.clone(),
            tag: self.tag.clone(),
            base_commit: self.base_commit.clone(),
            contained: self.contained,
            slot_env,
            executor: self.executor.for_slot(),
            prunable: false,
            candidate_code: self.candidate_code.clone(),
            bunched: false,
        }
    }

    /// Gets the executor ready for this run (`key`: its name in a shared store).
    pub(super) fn start(&mut self, key: String) -> Result<(), EngineError> {
        let place = RunPlace {
            spec: &self.spec,
            git: &self.git,
            tag: &self.tag,
            key,
        };
        self.executor.start(&place)
    }

    /// Runs the verifier on the candidate in `wt`: a first run, then the baseline's repeats
    /// or, when the first run passes against `best_value` (with noise `sigma`), its confirm
    /// runs. The runs and metrics go into `rec`; the decision is the judge's.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn verify(
        &mut self,
        sink: &mut Sink<'_>,
        rec: &mut ExperimentRecord,
        wt: &Path,
        baseline: bool,
        best_value: Option<f64>,
        sigma: Option<f64>,
        cancel: &dyn Fn() -> bool,
    ) -> Result<Verified, EngineError> {
        // A guard that a panic poisoned guards as well.
        let lock = self.candidate_code.clone();
        let _running = lock
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let policy = self.spec.noise_policy();
        let net_lines = rec.lines_added as i64 - rec.lines_deleted as i64;
        self.prunable = !baseline;
        let first = self.measure(sink, rec, wt, 0, !baseline, cancel);
        self.prunable = false;
        let (value, metrics) = match first? {
            Measured::Cancelled => return Ok(Verified::Cancelled),
            Measured::Failed { status, reason } => return Ok(Verified::Failed(status, reason)),
            Measured::Value { value, metrics } => (value, metrics),
        };
        rec.metrics = metrics.values.clone();
        rec.runs = vec![value];
        let broken = self
            .spec
            .verify
            .constraints
            .iter()
            .find_map(|c| c.check(&metrics).err());
        let extra = match (best_value, &broken) {
            (None, _) => self.spec.verify.baseline_repeats.saturating_sub(1),
            (Some(b), None) if policy.passes_first(value, b, sigma, net_lines) => policy.confirm,
            _ => 0,
        };
        let mut failed = None;
        for k in 1..=extra {
            match self.measure(sink, rec, wt, k, !baseline, cancel)? {
                Measured::Cancelled => return Ok(Verified::Cancelled),
                Measured::Failed { status, reason } => {
                    failed = Some(Failure {
                        status,
                        reason: format!("repeat {k} of this code: {reason}"),
                    });
                    break;
                }
                Measured::Value { value, .. } => rec.runs.push(value),
            }
        }
        Ok(Verified::Values { broken, failed })
    }

    /// One measurement of the candidate's code in `wt`. `repeat` numbers the runs of the same
    /// code (0 is the first): it names the logs and is the value of `seed_env`.
    ///
    /// With `[verify] evaluate`, `command` only trains or builds; then the protected files are
    /// restored from the run's start, what the first stage left is cut down to its declared
    /// `outputs` (or stripped of Python start-up hooks), and the objective is read only from
    /// the output of `evaluate`, run as a fresh process.
    ///
    /// A run that leaves the disk full (what the candidate's code wrote, most likely) has the
    /// files it grew removed afterwards, so that its record can be written; a failure says so.
    pub(super) fn measure(
        &mut self,
        sink: &mut Sink<'_>,
        rec: &mut ExperimentRecord,
        wt: &Path,
        repeat: u64,
        check_seal: bool,
        cancel: &dyn Fn() -> bool,
    ) -> Result<Measured, EngineError> {
        let n = rec.n;
        let logs = self.paths.run_dir(&self.tag).join("logs");
        let suffix = if repeat == 0 {
            String::new()
        } else {
            format!(".r{repeat}")
        };
        let log_path = logs.join(format!("{n}{suffix}.log"));
        if repeat == 0 {
            rec.log_path = Some(log_path.to_string_lossy().into_owned());
        }
        let command = self.spec.verify.command.clone();
        // The commit being measured (the worktree's HEAD may still be its parent: candidates
        // are committed without moving it).
        let candidate = rec
            .candidate_commit
            .clone()
            .unwrap_or_else(|| self.base_commit.clone());
        // Every run starts from the commit's exact files, checked, whatever the worktree held;
        // first, what an earlier run of the candidate's code may have left where git reads
        // (a FIFO there would hold libgit2 forever: `Git::check_ref_files`).
        self.git.check_ref_files()?;
        self.git.materialize(wt, &candidate)?;
        let command_log = log_path.clone();
        let first = StageRun {
            n,
            command: &command,
            log_path,
            repeat,
            stage: Stage::Command,
            commit: Some(&candidate),
            files: &candidate,
        };
        let (exit, failure, mut metrics) = self.run_stage(sink, wt, first, cancel)?;
        let failure_at = (wt, Some(command_log.as_path()));
        if let Some(m) = self.stage_failure(exit, failure, failure_at, check_seal) {
            return Ok(self.with_room(sink, (n, m), wt, &candidate));
        }
        let metric = self.spec.verify.metric.clone();
        if let Some(evaluate) = self.spec.verify.evaluate.clone() {
            // The objective never comes from the stage the candidate's code controls.
            metrics.values.remove(&metric);
            if !self.git.worktree_link_ok(wt) {
                return Ok(Measured::Failed {
                    status: Status::Violation,
                    reason: "the training stage replaced the worktree's .git".into(),
                });
            }
            self.seal_for_evaluation(wt, &candidate)?;
            let second = StageRun {
                n,
                command: &evaluate,
                log_path: logs.join(format!("{n}{suffix}.eval.log")),
                repeat,
                stage: Stage::Evaluate,
                // As before the engine was split: the evaluator's job names the worktree's
                // HEAD (the sealed checkout does not move it).
                commit: None,
                files: &candidate,
            };
            let (exit, failure, stage2) = self.run_stage(sink, wt, second, cancel)?;
            // The sealed evaluator's own words are not quoted in a reason (agents read those).
            if let Some(m) = self.stage_failure(exit, failure, (wt, None), check_seal) {
                let m = match m {
                    Measured::Failed { status, reason } => Measured::Failed {
                        status,
                        reason: format!("evaluate {reason}"),
                    },
                    other => other,
                };
                return Ok(self.with_room(sink, (n, m), wt, &candidate));
            }
            metrics.values.extend(stage2.values);
        }
        let measured = self.objective(metrics);
        Ok(self.with_room(sink, (n, measured), wt, &candidate))
    }

    /// `measured`, after making room when the run left the disk full ([`Verifier::free_room`]
    /// against `files`, the candidate's commit): a failure then says what was removed, a
    /// measurement that stands is followed by a warning.
    fn with_room(
        &self,
        sink: &mut Sink<'_>,
        (n, measured): (u64, Measured),
        wt: &Path,
        files: &str,
    ) -> Measured {
        match (measured, self.free_room(wt, files, false)) {
            (Measured::Failed { status, reason }, Some(removed)) => Measured::Failed {
                status,
                reason: format!("{reason}; the disk was full: removed what it left: {removed}"),
            },
            (measured, Some(removed)) => {
                sink.emit(Event::Warning {
                    message: format!(
                        "experiment {n}'s verifier left the disk full: removed what it left: {removed}"
                    ),
                });
                measured
            }
            (measured, None) => measured,
        }
    }

    /// The objective a measurement's metrics give, or why they give none.
    fn objective(&self, metrics: MetricSet) -> Measured {
        let metric = &self.spec.verify.metric;
        let printed = if self.spec.verify.evaluate.is_some() {
            "evaluate printed"
        } else {
            "printed"
        };
        match metrics.values.get(metric).copied() {
            None => Measured::Failed {
                status: Status::Crash,
                reason: format!(
                    "exited 0 but {printed} no `{metric}`{}",
                    missing_metric_hint(metrics.mention.as_deref(), metric)
                ),
            },
            Some(v) if !v.is_finite() => Measured::Failed {
                status: Status::Crash,
                reason: format!("`{metric}` is {v}"),
            },
            Some(value) => Measured::Value { value, metrics },
        }
    }

    /// Runs one verifier stage in the worktree, in its own process group.
    fn run_stage(
        &mut self,
        sink: &mut Sink<'_>,
        wt: &Path,
        s: StageRun<'_>,
        cancel: &dyn Fn() -> bool,
    ) -> Result<(Exit, Option<Failure>, MetricSet), EngineError> {
        let mut env = self.candidate_env(s.n);
        if let Some(name) = &self.spec.verify.seed_env {
            env.push((name.into(), s.repeat.to_string().into()));
        }
        if s.stage == Stage::Evaluate {
            sealed_python(&mut env);
        }
        env.push(("HONE_REPEAT".into(), s.repeat.to_string().into()));
        let req = ExecRequest {
            command: s.command.to_string(),
            cwd: wt.to_path_buf(),
            env,
            timeout: Some(self.spec.verify.timeout),
            kill_grace: self.spec.verify.kill_grace,
            drain_timeout: Duration::from_secs(2),
            log_path: s.log_path,
            max_log_bytes: self.spec.verify.max_log_bytes,
            limits: self.spec.sandbox.limits(),
            wrapper: self.wrapper(wt, self.spec.sandbox.network, Role::Verifier),
        };
        let mut reader = MetricReader::with_regex(
            &self.spec.verify.metric,
            self.spec.verify.metric_regex.clone(),
        )
        .map_err(Config::Metric)?;
        // Progress is read from a candidate's first run of its command; only a candidate
        // (`self.prunable`) may be pruned.
        let stop = Cell::new(false);
        let first = s.stage == Stage::Command && s.repeat == 0;
        let mut watch = match first {
            true => Watch::new(
                &self.spec,
                (sink.store, sink.run_id, s.n),
                self.prunable,
                &stop,
            )?,
            false => None,
        };
        // A run whose last line so far gave the objective (after every point) printed its
        // result: it is not stopped. A program whose output comes in one block at its end (a
        // buffered pipe) is judged on that result, not pruned on points that came with it; a
        // point after the objective (a periodic evaluation mid-run) makes it prunable again.
        let printed = Cell::new(false);
        let ran = self.execute(
            sink,
            (s.n, &req, "verifier"),
            (s.commit, s.stage),
            &mut |line| {
                let before = reader.objective_lines();
                reader.feed(line);
                let point = watch.as_mut().is_some_and(|w| w.feed(line));
                if point {
                    printed.set(false);
                } else if reader.objective_lines() > before {
                    printed.set(true);
                }
            },
            (cancel, &|| stop.get() && !printed.get()),
        );
        // A full disk while it ran, which its stage or its progress points met: the run's
        // doing where removing what it left, or its end, gave the room back (a crash).
        let crash = |reason| Failure {
            status: Status::Crash,
            reason,
        };
        let (exit, failure) = match self.unless_run_filled_disk(wt, s.files, ran)? {
            Ok(r) => r,
            Err(why) => return Ok((Exit::Code(1), Some(crash(why)), reader.finish())),
        };
        let watched = self.watched(watch);
        let pruned = match self.unless_run_filled_disk(wt, s.files, watched)? {
            Ok(pruned) => pruned,
            Err(why) => return Ok((Exit::Code(1), Some(crash(why)), reader.finish())),
        };
        let failure = match pruned {
            Some(reason) if exit == Exit::Cancelled && !cancel() => Some(Failure {
                status: Status::Pruned,
                reason,
            }),
            _ => failure,
        };
        Ok((exit, failure, reader.finish()))
    }

    /// What a run's progress watch saw, once the run is over: why it was pruned, if it was;
    /// whether its points came bunched at its end is kept in [`Verifier::bunched`].
    fn watched(&mut self, watch: Option<Watch<'_>>) -> Result<Option<String>, EngineError> {
        let Some(w) = watch else {
            return Ok(None);
        };
        let watched = w.finish()?;
        self.bunched = watched.bunched && self.executor.streams();
        Ok(watched.pruned)
    }

    /// Runs one verification command (a verifier stage or the holdout) of experiment `n`
    /// where `[exec]` says, on `commit`'s code.
    pub(super) fn execute(
        &mut self,
        sink: &mut Sink<'_>,
        (n, req, what): (u64, &ExecRequest, &str),
        (commit, stage): (Option<&str>, Stage),
        on_line: &mut dyn FnMut(&str),
        (cancel, stop): (&dyn Fn() -> bool, &dyn Fn() -> bool),
    ) -> Result<(Exit, Option<Failure>), EngineError> {
        let (spec, slot_env) = (&self.spec, &self.slot_env);
        let travels = |k: &str| travels_to_jobs(spec, slot_env, k, stage);
        let job = Job {
            n,
            req,
            what,
            commit,
            travels: &travels,
            stop,
            sandbox: job_sandbox(&spec.sandbox, spec.verify.holdout.as_ref(), stage),
        };
        let io = Io {
            sink,
            on_line,
            cancel,
        };
        self.executor.run(&job, io)
    }

    /// `r`, but where it failed because the run filled the disk, why the run is a crash
    /// (`Ok(Err(why))`): what it left in `wt` was removed (said), or the room came back once
    /// its processes ended ([`HELD_ROOM`]). Any other error, or a disk that stays full, is
    /// returned as it is.
    fn unless_run_filled_disk<T>(
        &self,
        wt: &Path,
        files: &str,
        r: Result<T, EngineError>,
    ) -> Result<Result<T, String>, EngineError> {
        let e = match r {
            Ok(v) => return Ok(Ok(v)),
            Err(e) if !e.out_of_room() => return Err(e),
            Err(e) => e,
        };
        if let Some(removed) = self.free_room(wt, files, true) {
            return Ok(Err(format!(
                "the disk filled up while it ran; removed what it left: {removed}"
            )));
        }
        if room_came_back(&self.paths.run_dir(&self.tag).join("logs")) {
            return Ok(Err(HELD_ROOM.to_string()));
        }
        Err(e)
    }

    /// Frees a full disk of what the candidate's code left in `wt` ([`Git::make_room`]
    /// against `files`, the candidate's commit; with `failed`, a write already failed for lack
    /// of room), and says what went (`path (N bytes), ...`); `None` when nothing did.
    fn free_room(&self, wt: &Path, files: &str, failed: bool) -> Option<String> {
        let removed = self.git.make_room(wt, files, failed, 8).ok()?;
        (!removed.is_empty()).then(|| crate::workspace::removed_for_room(&removed))
    }

    /// Why a stage's run does not count, if it does not. A run that exited with an error
    /// status quotes the last line of `log` (`ValueError: ...`), when it is given.
    fn stage_failure(
        &self,
        exit: Exit,
        failure: Option<Failure>,
        (wt, log): (&Path, Option<&Path>),
        check_seal: bool,
    ) -> Option<Measured> {
        // A run that rewrote a protected file (say, train.py patching prepare.py before
        // importing it) measured something other than the sealed evaluator.
        if check_seal {
            if let Some(path) = self.sealed_changed(wt) {
                return Some(Measured::Failed {
                    status: Status::Violation,
                    reason: format!("protected file `{path}` was modified while the verifier ran; the measurement is void"),
                });
            }
        }
        let failed = |status, reason| Some(Measured::Failed { status, reason });
        if let Some(f) = failure {
            return failed(f.status, f.reason);
        }
        match exit {
            Exit::Cancelled => Some(Measured::Cancelled),
            Exit::TimedOut => failed(
                Status::Timeout,
                format!(
                    "ran past {}; its process group was killed",
                    format_duration(self.spec.verify.timeout)
                ),
            ),
            Exit::Signal(s) => failed(Status::Crash, format!("killed by signal {s}")),
            Exit::Code(127) => failed(Status::Crash, self.not_found_reason(wt)),
            Exit::Code(c) if c != 0 => failed(
                Status::Crash,
                format!(
                    "exited with status {c}{}",
                    log.map(last_words).unwrap_or_default()
                ),
            ),
            Exit::Code(_) => None,
        }
    }

    /// Exit status 127 is the shell's "command not found": say where the command ran, and why
    /// what the user sees in their own checkout may not be there.
    fn not_found_reason(&self, wt: &Path) -> String {
        let shown = wt.strip_prefix(self.git.root()).unwrap_or(wt);
        format!(
            "exited with status 127 (command not found: see the log). The verifier runs in `{}`, a checkout of the committed files only: untracked files such as a virtual environment (`.venv`) are not there; name them by absolute path, or commit what the command needs",
            shown.display()
        )
    }

    /// Prepares the worktree for the sealed evaluator: every tracked file exactly as the
    /// candidate committed it, the protected files byte-for-byte from the run's start, and of
    /// what the training stage wrote, only its declared `outputs`.
    pub(super) fn seal_for_evaluation(
        &self,
        wt: &Path,
        candidate: &str,
    ) -> Result<(), EngineError> {
        // Written by hone from the blobs, not by git's checkout: no filter or attribute the
        // training stage planted in the repository's config rewrites the evaluator.
        let sealed: Vec<String> = self.seals.protected.keys().cloned().collect();
        self.git.materialize_sealed(
            wt,
            (candidate, &self.base_commit),
            &sealed,
            &self.spec.verify.outputs,
        )?;
        Ok(())
    }

    /// The first protected file in the worktree whose content differs from the start.
    pub(super) fn sealed_changed(&self, wt: &Path) -> Option<String> {
        if self.seals.protected.is_empty() {
            return None;
        }
        let paths: Vec<String> = self.seals.protected.keys().cloned().collect();
        match hash_paths_bounded(wt, &paths, self.seals.protected_bound) {
            Ok(now) => first_difference(&self.seals.protected, &now),
            Err(e) => Some(e.to_string()),
        }
    }

    /// The environment of the verifier and the holdout for experiment `n`: what hone was
    /// given (less its own settings and its LLM key), `[verify] env`, and the experiment.
    pub(super) fn candidate_env(&self, n: u64) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
        let mut env = self.inherited_for_candidate();
        for (k, v) in &self.spec.verify.env {
            env.push((k.into(), v.into()));
        }
        env.push(("HONE_EXPERIMENT".into(), n.to_string().into()));
        env.push(("HONE_RUN".into(), self.tag.clone().into()));
        env.push(("HONE_JOB".into(), self.job_token(n).into()));
        for (k, v) in &self.slot_env {
            env.push((k.into(), v.into()));
        }
        env
    }

    /// The `HONE_JOB` token of experiment `n`: every process hone starts for it (agent,
    /// reviewer, verifier, holdout) carries it, so that after a crash the next hone finds and
    /// kills them, even one whose pid never reached the store.
    pub(super) fn job_token(&self, n: u64) -> String {
        format!("{}{}:{n}", job_prefix(self.git.root()), self.tag)
    }

    /// What hone's own environment passes on to code it runs on a candidate's behalf
    /// (verifier, holdout, reviewer): the variables [`Verifier::env_allowed_for_candidate`]
    /// lets through, `PATH` with its absolute entries only. A relative or empty entry (the
    /// current directory) would look programs up in the worktree, which the candidate's code
    /// writes: a `python3` it left there would run the evaluation after it. A `PATH` set in
    /// `[verify] env` is passed as written.
    pub(super) fn inherited_for_candidate(&self) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
        let store = self.spec.exec.store_url.as_deref().unwrap_or("");
        std::env::vars_os()
            .filter(|(k, v)| {
                // Nor, under any name, the store's URL or its password, or the queue's key.
                self.env_allowed_for_candidate(k)
                    && !crate::util::reveals_url(&v.to_string_lossy(), store)
                    && !crate::queue::reveals_key(&v.to_string_lossy())
            })
            .map(crate::util::passed_on)
            .collect()
    }

    /// May this inherited variable reach code hone runs on a candidate's behalf (verifier,
    /// holdout, reviewer)? Not hone's own settings, not the API keys of hone's own HTTP
    /// proposer and reviewer, and not the agent CLI's credentials unless `[verify] pass_env`
    /// names them: code the model wrote must not be able to print them into a log or prompt.
    pub(super) fn env_allowed_for_candidate(&self, name: &std::ffi::OsStr) -> bool {
        let name = name.to_string_lossy();
        let tool_key = self.spec.agent.kind.preset().is_some_and(|p| {
            p.holds_credential(&name) && !self.spec.verify.pass_env.iter().any(|k| *k == name)
        });
        !name.starts_with("HONE_")
            && !tool_key
            && !crate::propose::command::hone_secret_vars(&self.spec)
                .iter()
                .any(|k| *k == name)
    }
}

/// The environment of a sealed stage (`[verify] evaluate`, `[verify.holdout] evaluate`): its
/// Python loads nothing from the user's site-packages, a search path or a startup file the
/// candidate could have planted (a relative `PYTHONPATH` reaches the worktree), and writes no
/// bytecode a later stage could find.
pub(super) fn sealed_python(env: &mut Vec<(std::ffi::OsString, std::ffi::OsString)>) {
    env.retain(|(k, _)| k != "PYTHONPATH" && k != "PYTHONSTARTUP");
    for (k, v) in [("PYTHONNOUSERSITE", "1"), ("PYTHONDONTWRITEBYTECODE", "1")] {
        env.push((k.into(), v.into()));
    }
}

/// The containment of a job of `stage` that runs where hone cannot wrap it itself (a remote
/// worker), as [`Verifier::wrapper`] would give it here: the holdout reads only, offline;
/// the others do not see its hidden data (`hidden`).
fn job_sandbox(
    sandbox: &crate::spec::SandboxSpec,
    hidden: Option<&HoldoutSpec>,
    stage: Stage,
) -> crate::queue::JobSandbox {
    let holdout = stage == Stage::Holdout;
    crate::queue::JobSandbox {
        bwrap: sandbox.bwrap,
        required: sandbox.required,
        network: sandbox.network && !holdout && stage != Stage::Predict,
        writable: !holdout,
        limits: sandbox.limits(),
        hide: match (holdout, hidden) {
            (false, Some(h)) => h.hide.clone(),
            _ => Vec::new(),
        },
    }
}

/// Whether a variable of a verifier's environment goes to a SLURM job or a remote worker,
/// which start from their own environment: only what hone itself sets does (`HONE_*`,
/// `[verify] env`, the seed variable, the slot's variables, the sealed evaluator's Python
/// settings).
fn travels_to_jobs(spec: &Spec, slot_env: &[(String, String)], k: &str, stage: Stage) -> bool {
    k.starts_with("HONE_")
        || spec.verify.env.iter().any(|(name, _)| name == k)
        || spec.verify.seed_env.as_deref() == Some(k)
        || slot_env.iter().any(|(name, _)| name == k)
        || (matches!(stage, Stage::Evaluate | Stage::Holdout)
            && matches!(k, "PYTHONNOUSERSITE" | "PYTHONDONTWRITEBYTECODE"))
}

/// What a run says when it starts if hone's `PATH` or the loader's search paths have relative
/// or empty entries (see [`Verifier::inherited_for_candidate`]); `None` when none has.
pub(super) fn path_note() -> Option<String> {
    let changed: Vec<&str> = crate::util::SEARCH_PATHS
        .iter()
        .copied()
        .filter(|name| {
            std::env::var_os(name).is_some_and(|v| crate::util::has_relative_entries(name, &v))
        })
        .collect();
    (!changed.is_empty()).then(|| {
        format!(
            "{} {} relative or empty entries: hone passes on only their absolute entries (and bare library names) to the agent, the verifier, the holdout, reviewers and git, which would otherwise find programs or libraries in the worktree the candidate writes; a verifier that needs one can be given it in [verify] env",
            changed.join(" and "),
            if changed.len() == 1 { "has" } else { "have" }
        )
    })
}

/// How every `HONE_JOB` token of the repository at `root` starts (`<hash of root>:`); a
/// token names the run and the experiment after it.
pub(super) fn job_prefix(root: &Path) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(root.as_os_str().as_encoded_bytes());
    let short: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("{short}:")
}
