//! A session of `hone run`: the repository's lock, opening a new run or resuming one (its
//! checks, warnings and notes, then the repair of what a crash left), the loop over
//! experiments (the conditions that stop it are `stops.rs`; which run is resumed and whether
//! it can go on as hone.toml says, `resuming.rs`).

use std::path::Path;
use std::time::Instant;

use crate::exec;
use crate::propose;
use crate::report::{best_experiment, summarize_stored, Summary};
use crate::spec::{AgentKind, Direction, Spec};
use crate::store::{RunRecord, RunState, Store};
use crate::workspace::{hash_paths, matches_any, Git};

use super::executor::{self, Executor};
use super::gate::{self, pinned_message};
use super::resuming::{
    adopt_objective, check_measurement, check_resumable, find_run, resume_budget,
};
use super::state;
use super::state::{
    branch_ref, coordinate, lock_state, store_location, unique_tag, worktree_path, Seals,
    StatePaths, STATE_DIR,
};
use super::verifier::Verifier;
use super::{
    Config, Engine, EngineError, Event, Fs, Internal, Interrupt, Mismatch, RunOptions, Stop, Tool,
};

/// Registers the values of hone's secrets for this run (see [`crate::util::withhold`]): the
/// variables hone.toml names for its keys and URLs, the store's URL and its password, and the
/// queue's key.
fn withhold_secrets(spec: &Spec) {
    let names = crate::propose::command::hone_secret_vars(spec);
    let fixed = ["HONE_QUEUE_KEY", "HONE_STORE_URL", "PGPASSWORD"];
    for name in names.iter().map(String::as_str).chain(fixed) {
        if let Ok(v) = std::env::var(name) {
            crate::util::withhold(&v);
        }
    }
    if let Some(url) = &spec.exec.store_url {
        crate::util::withhold(url);
        if let Some(pw) = crate::util::url_password(url) {
            crate::util::withhold(pw);
        }
    }
}

/// [`super::run`] without notifications: the lock, the checks before anything is opened, the
/// run, its loop.
pub(super) fn run_engine(
    repo_root: &Path,
    spec: &Spec,
    opts: &RunOptions,
    interrupt: &Interrupt,
    on_event: &mut dyn FnMut(&Event),
) -> Result<Summary, EngineError> {
    withhold_secrets(spec);
    let git = Git::discover(repo_root)?;
    let paths = StatePaths::new(git.root());
    std::fs::create_dir_all(&paths.dir).map_err(|error| Fs::Create {
        path: paths.dir.clone(),
        error,
    })?;
    // The worktrees below it run candidates' code: what that code leaves there (a program
    // with the setuid bit, made by a verifier running as root) must not be reachable by the
    // machine's other users.
    crate::util::owner_only(&paths.dir);
    git.ensure_excluded(&format!("{STATE_DIR}/"))?;
    let _lock = lock_state(&paths.lock())?;
    state::free_room(&paths, git.root(), on_event);
    // Escaped descendants of the verifier (setsid) come back to hone, to be killed.
    exec::become_subreaper();
    let store = Store::open_at(&store_location(&git, spec))?;
    let preset = spec.agent.kind.preset();
    // The executor is chosen once, here, from `[exec] backend`.
    let executor = executor::choose(spec);
    executor.preflight()?;
    if let (Some(p), None) = (preset, &spec.agent.command) {
        let (program, install) = p.program();
        if !crate::propose::command::on_path(program) {
            return Err(Tool::Agent {
                program: program.to_string(),
                install: install.to_string(),
            }
            .into());
        }
    }
    check_model_servers(spec, on_event)?;
    let mut engine = Engine::open(
        git,
        store,
        spec.clone(),
        executor,
        opts,
        interrupt,
        on_event,
    )?;
    engine.run_loop()
}

/// Before anything runs (a run's baseline, `hone init --check`): each HTTP model's key is
/// set, and its server serves the model and takes the key (a refused key or a server that
/// is not there is an error, a model it does not list a warning; see
/// [`crate::propose::chat::ModelCheck`]).
pub fn check_model_servers(
    spec: &Spec,
    on_event: &mut dyn FnMut(&Event),
) -> Result<(), EngineError> {
    if let Some((var, url)) = spec.missing_api_key() {
        return Err(Config::ApiKey { var, url }.into());
    }
    check_models(spec, on_event)
}

/// Asks each HTTP model's server whether it serves the model and takes the key.
fn check_models(spec: &Spec, on_event: &mut dyn FnMut(&Event)) -> Result<(), EngineError> {
    use crate::propose::chat::{LlmClient, ModelCheck};
    let agent = (spec.agent.kind.is_http()).then_some((
        "[agent]",
        spec.agent.kind,
        spec.agent.llm.as_ref(),
    ));
    let review = spec
        .review
        .kind
        .map(|k| ("[review]", k, spec.review.llm.as_ref()));
    for (section, kind, llm) in agent.into_iter().chain(review) {
        let Some(llm) = llm else { continue };
        // With max_cost_usd an unknown price is a spec error; without, the spend reads $0.
        if llm.prices().is_none() {
            on_event(&Event::Warning {
                message: format!(
                    "{section} model = \"{}\" has no price hone knows: its calls count as $0 (tokens are still counted); set price_in_per_mtok and price_out_per_mtok ($ per million tokens) to see what the run costs",
                    llm.model
                ),
            });
        }
        match LlmClient::new(kind, llm.clone()).check_model() {
            ModelCheck::Fine => {}
            ModelCheck::Unlisted(listed) => on_event(&Event::Warning {
                message: format!(
                    "{section} model = \"{}\" is not among the models {} lists ({}{}); if its first call is refused, check `model`",
                    llm.model,
                    llm.base_url,
                    listed[..listed.len().min(8)].join(", "),
                    if listed.len() > 8 { ", ..." } else { "" }
                ),
            }),
            ModelCheck::Unreachable(why) => {
                return Err(Config::ServerUnreachable {
                    url: llm.base_url.clone(),
                    why,
                    section: format!(" ({section})"),
                }
                .into())
            }
            ModelCheck::Refused(status) => {
                return Err(Config::KeyRefused {
                    var: llm.api_key_env.clone(),
                    url: llm.base_url.clone(),
                    status,
                }
                .into())
            }
        }
    }
    Ok(())
}

/// What opening a run found to say before it starts.
#[derive(Default)]
pub(super) struct Said {
    pub warnings: Vec<String>,
    pub notes: Vec<String>,
    /// Notes about what came before this run (the last run finished), said before its
    /// header.
    pub before: Vec<String>,
}

impl<'a> Engine<'a> {
    /// Opens the run `opts` names (or the latest unfinished one, or a new one), repairs what
    /// a crash left, and marks it running.
    fn open(
        git: Git,
        store: Store,
        mut spec: Spec,
        executor: Box<dyn Executor>,
        opts: &RunOptions,
        interrupt: &'a Interrupt,
        on_event: &'a mut dyn FnMut(&Event),
    ) -> Result<Engine<'a>, EngineError> {
        let paths = StatePaths::new(git.root());
        let mut said = Said::default();
        let existing = find_run(&store, opts, &mut said)?;
        let (run, resumed, coordination) = match existing {
            Some(run) => {
                let coordination = coordinate(&store, &spec, &git, &run.tag)?;
                let mut run = adopt_objective(&store, &spec, run, &mut said)?;
                check_resumable(&store, &spec, &git, &run, opts, &mut said)?;
                check_measurement(&store, &spec, &mut run, &mut said)?;
                resume_budget(&store, &mut spec, &run, opts, &mut said)?;
                let tip = git.ref_target(&branch_ref(&run.tag))?;
                gate::check_hide_untracked(
                    &spec,
                    &git,
                    tip.as_deref().unwrap_or(&run.base_commit),
                )?;
                (run, true, coordination)
            }
            None => {
                let (run, coordination) =
                    open_new(&store, &mut spec, &git, &paths, opts, &mut said)?;
                (run, false, coordination)
            }
        };
        let mut seals: Seals = serde_json::from_str(&run.seals).unwrap_or_default();
        seals.bound_at(&git, &run.base_commit);
        let worktree = worktree_path(&paths, &spec, git.root(), &run.tag);
        super::state::private_shared_dir(&spec, git.root(), &run.tag)?;
        let proposer = propose::from_spec(&spec);
        // Outer loop (Level 2): scripts are read from and stored under the repository.
        let outer = crate::meta::Outer::from_spec(&spec).with_level2(git.root(), &run.tag);
        let verifier = Verifier {
            git,
            paths,
            spec,
            seals,
            tag: run.tag.clone(),
            base_commit: run.base_commit.clone(),
            contained: false,
            slot_env: Vec::new(),
            executor,
            prunable: false,
            candidate_code: std::sync::Arc::default(),
            bunched: false,
        };
        let mut engine = Engine {
            verifier,
            store,
            active_before: run.active_seconds,
            run,
            worktree,
            proposer,
            outer,
            interrupt,
            on_event,
            session_start: Instant::now(),
            session_first: 0,
            history: Vec::new(),
            lent: false,
            deferred: None,
            forget_cursor: 0,
            dropped: Default::default(),
            narrowing: Default::default(),
            held: None,
            unlogged: Vec::new(),
            _coordination: coordination,
            user_worktrees: Vec::new(),
            slot_ready: None,
            outage: None,
            ledger: None,
            failed_baselines: 0,
            retries: Vec::new(),
            scorers: super::shadow::Scorers::default(),
        };
        engine.user_worktrees = super::foreign::worktrees(&engine.verifier.git);
        let key = engine.run_key();
        engine.verifier.start(key)?;
        engine.contain(&mut said)?;
        engine.announce(resumed, said)?;
        engine.settle(resumed)?;
        Ok(engine)
    }

    /// Repairs what a crash left (a resumed run), reads what the loop keeps of the run's
    /// records (the crash narrowings, the failed baselines) and marks the run running.
    fn settle(&mut self, resumed: bool) -> Result<(), EngineError> {
        if resumed {
            // Recovery may rewrite statuses the narrowing log covers: none until rebuilt.
            self.store.forget_narrowing_log(self.run.id)?;
            self.recover()?;
        }
        self.narrowing = super::narrowing::NarrowingLog::rebuild(&self.store, self.run.id)?;
        self.failed_baselines = self.store.failed_baselines(self.run.id)?;
        self.store
            .set_run_state(self.run.id, RunState::Running, None)?;
        if resumed {
            self.progress_against_objective_on_resume()?;
        }
        Ok(())
    }

    /// Probes bubblewrap when `[sandbox]` asks for it; warns when an agent that writes code
    /// runs without it and nobody chose that.
    fn contain(&mut self, said: &mut Said) -> Result<(), EngineError> {
        let spec = &self.verifier.spec;
        let sandbox = &spec.sandbox;
        if !sandbox.bwrap && !sandbox.kind_chosen && spec.agent.kind != AgentKind::Knobs {
            let holdout = spec.verify.holdout.is_some();
            said.warnings
                .push(uncontained(holdout, crate::sandbox::probe()));
        }
        if sandbox.bwrap {
            match crate::sandbox::probe() {
                Ok(()) => self.verifier.contained = true,
                Err(e) if sandbox.required => return Err(Config::Sandbox(e).into()),
                Err(e) => said.warnings.push(format!(
                    "{e}; running WITHOUT containment ([sandbox] required = false)"
                )),
            }
        }
        Ok(())
    }

    /// `RunStarted`, then the notes and warnings opening the run found.
    fn announce(&mut self, resumed: bool, said: Said) -> Result<(), EngineError> {
        let Said {
            warnings,
            mut notes,
            before,
        } = said;
        for message in before {
            self.emit(Event::Note { message });
        }
        let finished = self.store.counted_experiments(self.run.id)?;
        let spec = &self.verifier.spec;
        // What earlier sessions spent (a new run: nothing), for the live line's budgets.
        let (cost_before, tokens_before) = if resumed {
            let cost = self.store.run_totals(self.run.id)?.cost_usd;
            (cost, self.store.tokens_spent(self.run.id)?)
        } else {
            (0.0, 0)
        };
        let started = Event::RunStarted {
            tag: self.run.tag.clone(),
            branch: self.run.branch.clone(),
            base_commit: self.run.base_commit.clone(),
            resumed,
            finished_experiments: finished,
            metric: spec.verify.metric.clone(),
            direction: spec.verify.direction,
            budget: super::Budget {
                max_experiments: spec.stop.max_experiments,
                max_time_s: spec.stop.max_time.map(|t| t.as_secs_f64()),
                used_s: self.active_before,
                timeout_s: spec.verify.timeout.as_secs_f64(),
                max_cost_usd: spec.stop.max_cost_usd,
                max_tokens: spec.stop.max_tokens,
                cost_before,
                tokens_before,
            },
        };
        self.emit(started);
        notes.extend(super::verifier::path_note());
        let spec = &self.verifier.spec;
        for llm in spec.llms_in_use() {
            if std::env::var_os(&llm.api_key_env).is_none() {
                notes.push(format!(
                    "${} is not set: requests to {} go without an API key",
                    llm.api_key_env, llm.base_url
                ));
            }
        }
        for message in notes {
            self.emit(Event::Note { message });
        }
        for w in warnings {
            self.emit(Event::Warning { message: w });
        }
        Ok(())
    }

    /// The session's loop, then its end ([`Engine::end_session`]). An error out of the loop
    /// (a proposer's, the gate's) ends it without that end; what it would have written and
    /// is not yet still is (see [`Engine::save_before_error`]).
    pub(super) fn run_loop(&mut self) -> Result<Summary, EngineError> {
        let stopped = self.loop_until_stop();
        self.say_sweep_notes();
        match stopped {
            Ok(stop) => self.end_session(stop),
            Err(e) => {
                self.save_before_error();
                Err(e)
            }
        }
    }

    /// Best effort, before an error ends the session: the progress events told but not yet
    /// written and the loop's time since the last finish, which [`Engine::end_session`] would
    /// have written. (What fails to be written here is what a kill would have lost.)
    fn save_before_error(&mut self) {
        self.log_unlogged();
        let _ = self
            .store
            .set_active_seconds(self.run.id, self.active_seconds());
    }

    /// Runs experiments until one of the stop conditions holds; why the loop stopped.
    fn loop_until_stop(&mut self) -> Result<Stop, EngineError> {
        self.start_session()?;
        let first_check = self
            .check_pinned()
            .err()
            .map(|changed| Stop::failed(pinned_message(&changed)));
        let stop = loop {
            if let Some(stop) = first_check {
                break stop;
            }
            // Between experiments no candidate code runs: a moved branch is someone else's.
            let expected = best_experiment(&self.history)
                .and_then(|b| b.candidate_commit.clone())
                .unwrap_or_else(|| self.run.base_commit.clone());
            if let Some(stop) = self.foreign_commit(&expected)? {
                break stop;
            }
            if let Some(stop) = self.stop_condition(&self.history) {
                break stop;
            }
            // With `[exec] workers`, the experiments after the baseline run in parallel.
            if self.verifier.spec.exec.workers > 1 && best_experiment(&self.history).is_some() {
                break self.run_parallel()?;
            }
            let before = self.history.len() + self.dropped.count() as usize;
            let step = self.experiment()?;
            // One loose ref per experiment makes every ref listing slower; pack them now and
            // then so the loop's cost does not grow with the run.
            state::pack_refs_now_and_then(&self.verifier.git, before);
            // The loop's active time was recorded with the experiment's outcome (finish), and
            // is again when the session ends.
            if let Some(stop) = step {
                break stop;
            }
        };
        Ok(stop)
    }

    /// Checks the run's worktree out at the branch, loads the history and starts the outer
    /// loop's mechanisms (a resumed run's history rebuilds what they can).
    fn start_session(&mut self) -> Result<(), EngineError> {
        let wt = self.worktree.clone();
        let branch = branch_ref(&self.run.tag);
        let head = self
            .verifier
            .git
            .ref_target(&branch)?
            .ok_or(Mismatch::BranchMissing { branch })?;
        self.verifier.git.prepare_worktree(&wt, &head)?;
        self.scorers = super::start_files::scorers(
            &self.verifier.spec,
            &self.verifier.git,
            &self.run.base_commit,
        )?;
        // The run's experiments, kept in memory from here on, the older ones slimmed (the
        // store stays the truth on disk; `finish` writes each outcome there before updating
        // this copy).
        // The serial loop without `[outer]`: the knobs proposer converts each page as it is
        // read, and the configurations it then holds are dropped (see `Engine::experiment`).
        let (forget, keep_last) = (self.forgets(), self.kept_whole());
        let minimize = self.verifier.spec.verify.direction == Direction::Minimize;
        let (proposer, mut at) = (&mut self.proposer, 0);
        let mut dropped = super::history::Dropped::default();
        self.history = super::history::load(&self.store, self.run.id, &mut |h| {
            if forget {
                proposer.prime(h, minimize);
                if let Some(through) = proposer.holds_configs_through() {
                    at = super::history::forget(h, &mut dropped, at, through, keep_last);
                }
            }
        })?;
        self.forget_cursor = at;
        self.dropped = dropped;
        self.session_first = self.history.len() as u64 + self.dropped.count();
        // Outer loop: mechanisms start (a resumed run's history rebuilds what they can).
        let next = self.history.last().map_or(0, |e| e.n + 1);
        if self.outer.restores() && !self.history.is_empty() {
            let calls = self.store.mechanism_calls(self.run.id, None)?;
            self.outer.restore(&calls, &self.history);
        }
        self.outer.on_start(next, self.run.seed, &self.history);
        self.flush_outer()
    }

    /// Records why the loop stopped (after the best's holdout, unless it stopped on an
    /// error) and sums the run up.
    fn end_session(&mut self, stop: Stop) -> Result<Summary, EngineError> {
        self.drop_retries();
        self.log_unlogged();
        self.store
            .set_active_seconds(self.run.id, self.active_seconds())?;
        if !stop.error {
            self.holdout_final()?;
        }
        let state = if stop.resumable {
            RunState::Interrupted
        } else {
            // A finished run needs no worktree: everything it tried is in refs/hone/<tag>/;
            // nor an agent CLI's private home, with its copy of the tool's login.
            let _ = self.verifier.git.remove_worktree(&self.worktree);
            let _ = crate::workspace::remove_any(&self.verifier.private_home());
            RunState::Stopped
        };
        self.store
            .set_run_state(self.run.id, state, Some(&stop.reason))?;
        self.emit(Event::RunStopped {
            reason: stop.reason.clone(),
            resumable: stop.resumable,
        });
        let run = self
            .store
            .run_by_tag(&self.run.tag)?
            .ok_or(Internal::RunVanished)?;
        // From the store's tallies and indexes: reading every record whole at the end of a
        // long run would cost more memory than the whole loop held.
        let mut summary = summarize_stored(&self.store, &run)?;
        if summary.best_vs_baseline.is_none() {
            summary.best_vs_baseline = super::best_vs_baseline_of_commits(
                &self.verifier.git,
                &self.store,
                &run,
                &self.verifier.spec.loop_.editable,
            );
        }
        if stop.error {
            return Err(EngineError::Stopped {
                reason: stop.reason,
                summary: Box::new(summary),
            });
        }
        Ok(summary)
    }
}

/// Opens a new run: `hone run`'s limits applied to the spec, its tag (the one asked for, or
/// today's made unique), the checks, the coordination of a shared store, then [`start_run`].
fn open_new(
    store: &Store,
    spec: &mut Spec,
    git: &Git,
    paths: &StatePaths,
    opts: &RunOptions,
    said: &mut Said,
) -> Result<(RunRecord, Option<crate::queue::Coordination>), EngineError> {
    if let Some(n) = opts.max_experiments.or(opts.more) {
        spec.stop.max_experiments = n.max(1);
    }
    if let Some(t) = opts.max_time {
        spec.stop.max_time = Some(t);
    }
    let tag = match &opts.tag {
        Some(t) => t.clone(),
        None => unique_tag(store, git)?,
    };
    gate::check_hide_untracked(spec, git, &git.head()?)?;
    let coordination = coordinate(store, spec, git, &tag)?;
    let run = start_run(store, spec, git, paths, &tag, opts, said)?;
    Ok((run, coordination))
}

/// Starts run `tag` from HEAD: its checks, its worktree, its seals, its branch, its record.
fn start_run(
    store: &Store,
    spec: &Spec,
    git: &Git,
    paths: &StatePaths,
    tag: &str,
    opts: &RunOptions,
    said: &mut Said,
) -> Result<RunRecord, EngineError> {
    let branch = branch_ref(tag);
    if git.ref_target(&branch)?.is_some() {
        return Err(Mismatch::BranchExists {
            tag: tag.to_string(),
        }
        .into());
    }
    if !git.refs_under(&format!("refs/hone/{tag}/"))?.is_empty() {
        return Err(Mismatch::RefsExist {
            tag: tag.to_string(),
        }
        .into());
    }
    let head = git.head()?;
    let files = git.files_at(&head)?;
    super::start_files::check_start_files(spec, git, &head, &files, said)?;
    let wt = worktree_path(paths, spec, git.root(), tag);
    git.prepare_worktree(&wt, &head)?;
    let sealed: Vec<String> = files
        .into_iter()
        .filter(|f| matches_any(&spec.loop_.protected, f) || matches_any(&spec.loop_.pinned, f))
        .collect();
    let seals = Seals {
        protected: hash_paths(&wt, &sealed)?,
        pinned: hash_paths(git.root(), &spec.loop_.pinned)?,
        pinned_paths: spec.loop_.pinned.clone(),
        protected_bound: None,
    };
    for (path, h) in &seals.pinned {
        if h == "missing" {
            said.warnings.push(format!(
                "pinned path `{path}` does not exist; its appearance will stop the run"
            ));
        }
    }
    git.update_ref(&branch, &head, None)?;
    // Without a seed, each new run of a repository explores differently.
    let seed = opts
        .seed
        .or(spec.agent.seed)
        .unwrap_or(store.runs()?.len() as u64);
    let run = store.create_run(
        tag,
        &format!("hone/{tag}"),
        &head,
        seed,
        spec.agent.kind,
        &spec.verify.metric,
        spec.verify.direction,
        &serde_json::to_string(&seals).unwrap_or_default(),
        &serde_json::to_string(&spec).unwrap_or_default(),
    )?;
    Ok(run)
}

/// The warning for an agent's code run without bubblewrap when `[sandbox] kind` is not set,
/// with what bubblewrap's probe (`probe`) said about this machine.
fn uncontained(holdout: bool, probe: Result<(), String>) -> String {
    // SAFETY: geteuid takes nothing and cannot fail.
    let who = if unsafe { libc::geteuid() } == 0 {
        "as root"
    } else {
        "as your user"
    };
    let next = match probe {
        Ok(()) => {
            "bubblewrap works here: set [sandbox] kind = \"bwrap\" to contain them".to_string()
        }
        Err(e) => format!("bubblewrap cannot contain them here ({e}): run only an agent you trust"),
    };
    format!(
        "[sandbox] kind is not set: the agent and the code it writes run {who}, outside any sandbox, and could read hone's database{} and rewrite the records of earlier experiments. {next}, or set kind = \"rlimits\" to run as now without this warning (README: Containment)",
        if holdout { ", the holdout's hidden data" } else { "" }
    )
}
