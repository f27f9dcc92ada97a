//! The loop. One experiment flows one way:
//!
//! ```text
//! stop? -> record start -> reset worktree to best -> proposer -> snapshot (archive ref)
//!       -> gate (scope, sealed files, pinned inputs) -> verifier -> decision
//!       -> record outcome -> (keep: fast-forward hone/<tag>) -> events
//! ```
//!
//! Crash safety comes from ordering: an experiment's row is written (status `running`) before
//! anything runs, its candidate commit is recorded before its archive ref is written, and its
//! outcome is recorded before the run branch moves. `resume` repairs whatever a crash left
//! between two of those steps: a `running` row becomes `aborted` (its process group killed),
//! missing archive refs are written, and a recorded keep whose branch move was lost is applied.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::exec::{self, ExecRequest, Exit};
use crate::notify::{self, Notice, Notifier};
use crate::propose::{self, ProposeContext, ProposeError, Proposer};
use crate::report::{best_experiment, fmt_metric, summarize, Summary};
use crate::spec::{format_duration, Direction, NotifyOn, Spec};
use crate::store::{now, ExperimentRecord, RunRecord, Status, Store, StoreError, StoreLocation};
use crate::verify::metrics::MetricReader;
use crate::verify::noise::{estimate_sigma, mean};
use crate::workspace::{first_difference, hash_paths, matches_any, Git, GitError};

mod parallel;

/// Where hone keeps its state inside a repository (excluded from git).
pub const STATE_DIR: &str = ".hone";

/// A failure that stops `hone run` (as opposed to a failed experiment, which is recorded).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("another `hone run` is already running in this repository (lock {0}); wait for it or stop it first")]
    Locked(PathBuf),
    #[error("{0}")]
    Io(String),
    #[error("{0}")]
    Setup(String),
    /// The run stopped on a condition that needs the user: recorded, then reported as an error.
    #[error("{reason}")]
    Stopped {
        reason: String,
        summary: Box<Summary>,
    },
}

/// Ctrl-C as the engine sees it: once = finish the current experiment and stop; twice = kill
/// the running process group now and record the experiment `aborted`.
#[derive(Debug, Default)]
pub struct Interrupt(AtomicUsize);

impl Interrupt {
    pub const fn new() -> Interrupt {
        Interrupt(AtomicUsize::new(0))
    }
    /// Records one more request; returns how many there have been.
    pub fn request(&self) -> usize {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }
    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
    pub fn stop_requested(&self) -> bool {
        self.count() >= 1
    }
    pub fn kill_requested(&self) -> bool {
        self.count() >= 2
    }
}

/// What the caller may override from the command line.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    pub tag: Option<String>,
    pub max_experiments: Option<u64>,
    pub max_time: Option<Duration>,
    pub seed: Option<u64>,
    /// Start a new run even if an unfinished one could be resumed.
    pub new_run: bool,
}

/// What the engine reports while it works. The terminal output, logs and anything else
/// subscribe to these; none of them reaches into the engine.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    RunStarted {
        tag: String,
        branch: String,
        base_commit: String,
        resumed: bool,
        finished_experiments: u64,
        metric: String,
        direction: Direction,
    },
    Warning {
        message: String,
    },
    Note {
        message: String,
    },
    ExperimentStarted {
        n: u64,
    },
    Proposed {
        n: u64,
        description: String,
    },
    Verifying {
        n: u64,
    },
    ExperimentFinished {
        record: Box<ExperimentRecord>,
        best: Option<f64>,
        baseline: Option<f64>,
    },
    RunStopped {
        reason: String,
        resumable: bool,
    },
    /// The outer loop changed how the search goes (a restart, a new strategy, a mechanism
    /// turned on or off).
    Outer {
        n: u64,
        message: String,
    },
}

impl Event {
    fn kind(&self) -> &'static str {
        match self {
            Event::RunStarted { .. } => "run_started",
            Event::Warning { .. } => "warning",
            Event::Note { .. } => "note",
            Event::ExperimentStarted { .. } => "experiment_started",
            Event::Proposed { .. } => "proposed",
            Event::Verifying { .. } => "verifying",
            Event::ExperimentFinished { .. } => "experiment_finished",
            Event::RunStopped { .. } => "run_stopped",
            Event::Outer { .. } => "outer",
        }
    }
}

/// Paths of hone's state in a repository.
#[derive(Clone, Debug)]
pub struct StatePaths {
    pub dir: PathBuf,
}

impl StatePaths {
    pub fn new(repo_root: &Path) -> StatePaths {
        StatePaths {
            dir: repo_root.join(STATE_DIR),
        }
    }
    pub fn db(&self) -> PathBuf {
        self.dir.join("hone.db")
    }
    pub fn lock(&self) -> PathBuf {
        self.dir.join("lock")
    }
    pub fn run_dir(&self, tag: &str) -> PathBuf {
        self.dir.join("runs").join(tag)
    }
    pub fn worktree(&self, tag: &str) -> PathBuf {
        self.dir.join("worktrees").join(tag)
    }
}

/// The key that names this repository's runs in a shared PostgreSQL store: `[store] repo`;
/// with remote workers, `[exec] remote` (the repository they fetch candidates from); else the
/// URL of the `origin` remote (without credentials), so every clone of a project on every host
/// sees the same runs; else the checkout's own path.
pub fn repo_key(git: &Git, spec: &Spec) -> String {
    let remote = || {
        (spec.exec.backend == crate::spec::Backend::Workers)
            .then(|| spec.exec.remote.clone())
            .flatten()
    };
    let origin = || {
        git.run(&["config", "--get", "remote.origin.url"])
            .ok()
            .map(|u| without_credentials(u.trim()))
            .filter(|u| !u.is_empty())
    };
    spec.exec
        .store_repo
        .clone()
        .or_else(remote)
        .or_else(origin)
        .unwrap_or_else(|| {
            let root = git.root();
            root.canonicalize()
                .unwrap_or_else(|_| root.to_path_buf())
                .display()
                .to_string()
        })
}

/// `https://user:token@host/x.git` as `https://host/x.git`: a key is stored and shown.
fn without_credentials(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://") {
        let (authority, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if let Some((_, host)) = authority.rsplit_once('@') {
            return format!("{scheme}://{host}{tail}");
        }
    }
    url.to_string()
}

/// Where the records of the repository at `git` live: `[store] url` (under [`repo_key`]), or
/// `.hone/hone.db`.
pub fn store_location(git: &Git, spec: &Spec) -> StoreLocation {
    match &spec.exec.store_url {
        Some(url) => StoreLocation::Postgres {
            url: url.clone(),
            repo: repo_key(git, spec),
        },
        None => StoreLocation::Sqlite(StatePaths::new(git.root()).db()),
    }
}

/// [`store_location`] by the repository's `hone.toml` (or `spec_path`); a repository without
/// one keeps its records in `.hone/hone.db`. A spec that does not load is an error: it may name
/// a shared store.
pub fn configured_store(
    repo_root: &Path,
    spec_path: Option<&Path>,
) -> Result<StoreLocation, EngineError> {
    let git = Git::discover(repo_root)?;
    let path = spec_path
        .map(Path::to_path_buf)
        .unwrap_or_else(|| git.root().join("hone.toml"));
    if spec_path.is_none() && !path.exists() {
        return Ok(StoreLocation::Sqlite(StatePaths::new(git.root()).db()));
    }
    let spec = Spec::load(&path)
        .map_err(|e| EngineError::Setup(format!("{e} (hone.toml says where the records are)")))?;
    Ok(store_location(&git, &spec))
}

/// Registers this process as the coordinator of run `tag` when the run lives in a shared
/// store: one coordinator at a time, whichever host it is on (the local lock only covers this
/// checkout). Fails, saying who coordinates it, while another one's heartbeat is fresh.
fn coordinate(
    store: &Store,
    spec: &Spec,
    git: &Git,
    tag: &str,
) -> Result<Option<crate::queue::Coordination>, EngineError> {
    let (true, Some(url)) = (store.is_shared(), spec.exec.store_url.as_deref()) else {
        return Ok(None);
    };
    // The caller holds this checkout's lock, so an earlier coordinator from the same place
    // (killed before it could release its registration) is gone: its registration is taken
    // over rather than waited out.
    let place = format!(
        "on {} in {}",
        crate::worker::host_name(),
        git.root().display()
    );
    let owner = format!("hone run (pid {}) {place}", std::process::id());
    let key = format!("{}#{tag}", store.repo());
    crate::queue::Coordination::start(url, &key, &owner, Some(&place))
        .map(Some)
        .map_err(|e| EngineError::Setup(e.to_string()))
}

/// With `[exec] backend = "slurm"`, this run's directory under the shared directory (its
/// worktree and job files), named after the repository so that several can share it.
fn shared_run_dir(spec: &Spec, repo_root: &Path, tag: &str) -> Option<PathBuf> {
    use sha2::Digest as _;
    let shared = spec.exec.shared_dir.as_ref()?;
    if spec.exec.backend != crate::spec::Backend::Slurm {
        return None;
    }
    let digest = sha2::Sha256::digest(repo_root.as_os_str().as_encoded_bytes());
    let short: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    let name = repo_root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "repo".into());
    Some(shared.join(format!("{name}-{short}")).join(tag))
}

/// Where a run's worktree lives: under `.hone/`, or under the shared directory for SLURM.
fn worktree_path(paths: &StatePaths, spec: &Spec, repo_root: &Path, tag: &str) -> PathBuf {
    match shared_run_dir(spec, repo_root, tag) {
        Some(dir) => dir.join("worktree"),
        None => paths.worktree(tag),
    }
}

/// A verification that ended for a reason outside its command's exit (a job cancelled by
/// someone else, a protected file modified on a remote worker): the status and the reason.
type Failure = (Status, String);

/// The archive ref of experiment `n`.
pub fn archive_ref(tag: &str, n: u64) -> String {
    format!("refs/hone/{tag}/{n}")
}

/// The run branch of a tag.
pub fn branch_ref(tag: &str) -> String {
    format!("refs/heads/hone/{tag}")
}

/// Hashes taken at the start of a run.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct Seals {
    /// Protected (and tracked pinned) files, as checked out at the base commit.
    protected: BTreeMap<String, String>,
    /// Pinned inputs in the user's checkout (or absolute paths).
    pinned: BTreeMap<String, String>,
    /// The `pinned` list the hashes were taken from.
    #[serde(default)]
    pinned_paths: Vec<String>,
}

/// An exclusive lock on a repository's state, released when dropped.
struct StateLock {
    _file: std::fs::File,
}

fn lock_state(path: &Path) -> Result<StateLock, EngineError> {
    use std::os::unix::io::AsRawFd;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| EngineError::Io(format!("cannot open {}: {e}", path.display())))?;
    // A reader such as `hone status` may hold the lock for an instant; retry briefly.
    for _ in 0..20 {
        // SAFETY: flock on a valid, open file descriptor owned by `file`.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(StateLock { _file: file });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(EngineError::Locked(path.to_path_buf()))
}

/// True while a `hone run` holds the repository's state lock.
pub fn is_running(repo_root: &Path) -> bool {
    let lock = StatePaths::new(repo_root).lock();
    let Ok(file) = std::fs::OpenOptions::new().write(true).open(&lock) else {
        return false;
    };
    use std::os::unix::io::AsRawFd;
    // SAFETY: flock on a valid, open file descriptor owned by `file`; a shared probe that is
    // released when `file` is dropped.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) != 0 }
}

/// A valid run tag: it becomes part of a branch name and of paths.
pub fn validate_tag(tag: &str) -> Result<(), EngineError> {
    let problem = if tag.is_empty() || tag.len() > 64 {
        Some("it must have 1 to 64 characters")
    } else if !tag
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        Some("use only letters, digits, '-', '_' and '.'")
    } else if tag.starts_with(['.', '-']) {
        Some("it must not start with '.' or '-'")
    } else if tag.contains("..") || tag.ends_with(".lock") || tag.ends_with('.') {
        Some("git forbids '..', a trailing '.' and a trailing \".lock\" in branch names")
    } else {
        None
    };
    match problem {
        None => Ok(()),
        Some(p) => Err(EngineError::Setup(format!(
            "`{tag}` is not a usable tag: {p} (it becomes branch hone/{tag})"
        ))),
    }
}

/// Today's date as YYYYMMDD (UTC), the default tag.
pub fn today_tag() -> String {
    let days = (now() / 86400.0).floor() as i64;
    // Civil-from-days (Howard Hinnant's algorithm), for the proleptic Gregorian calendar.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}{m:02}{d:02}")
}

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
    if spec.notify.is_empty() {
        return run_engine(repo_root, spec, opts, interrupt, on_event);
    }
    let git = Git::discover(repo_root)?;
    for n in &spec.notify {
        if let Err(e) = n.url.resolve() {
            on_event(&Event::Warning {
                message: format!(
                    "[[notify]] at line {}: {e}; its notifications cannot be sent",
                    n.line
                ),
            });
        }
    }
    let notifier = Notifier::start(&spec.notify, Some(store_location(&git, spec)));
    let mut tag = opts.tag.clone().unwrap_or_default();
    let result = {
        let mut previous_best = None;
        let metric = spec.verify.metric.clone();
        let mut tap = |ev: &Event| {
            match ev {
                Event::RunStarted { tag: t, .. } => tag = t.clone(),
                Event::ExperimentFinished {
                    record,
                    best,
                    baseline,
                } => {
                    if record.status() == Status::Keep {
                        notifier.send(&keep_notice(
                            &tag,
                            &metric,
                            record,
                            previous_best,
                            *baseline,
                        ));
                    }
                    previous_best = *best;
                }
                _ => {}
            }
            on_event(ev)
        };
        run_engine(repo_root, spec, opts, interrupt, &mut tap)
    };
    let end = match &result {
        Ok(s) => notify::end_kind(&s.state, s.stop_reason.as_deref().unwrap_or(""), false)
            .map(|k| (k, s.stop_reason.clone().unwrap_or_default(), Some(s))),
        Err(EngineError::Stopped { reason, summary }) => {
            Some((NotifyOn::Failure, reason.clone(), Some(summary.as_ref())))
        }
        Err(e) => Some((NotifyOn::Failure, e.to_string(), None)),
    };
    if let Some((on, reason, summary)) = end {
        if tag.is_empty() {
            tag = "(not started)".into();
        }
        notifier.send(&end_notice(on, &tag, &reason, summary));
    }
    for u in notifier.close(notify::FLUSH_WAIT) {
        on_event(&Event::Warning {
            message: u.to_string(),
        });
    }
    result
}

fn keep_notice(
    tag: &str,
    metric: &str,
    e: &ExperimentRecord,
    previous_best: Option<f64>,
    baseline: Option<f64>,
) -> Notice {
    let change = match previous_best {
        Some(p) => format!(
            "{metric} {} → {}",
            fmt_metric(Some(p)),
            fmt_metric(e.objective)
        ),
        None => format!("{metric} = {}", fmt_metric(e.objective)),
    };
    Notice {
        on: NotifyOn::Keep,
        run: tag.to_string(),
        text: format!(
            "hone run {tag}: kept #{} \"{}\": {change} (baseline {})",
            e.n,
            crate::propose::prompt::sanitize(&e.description, 200).replace('\n', " "),
            fmt_metric(baseline)
        ),
        data: serde_json::json!({
            "experiment": e.n,
            "description": e.description,
            "metric": metric,
            "value": e.objective,
            "previous_best": previous_best,
            "baseline": baseline,
            "commit": e.candidate_commit,
        }),
    }
}

fn end_notice(on: NotifyOn, tag: &str, reason: &str, summary: Option<&Summary>) -> Notice {
    let what = match on {
        NotifyOn::Failure => "stopped on a failure",
        NotifyOn::Budget => "stopped on its budget",
        _ => "finished",
    };
    let result = summary
        .map(|s| {
            let change = s
                .change_pct
                .map(|p| format!(" ({p:+.2}%)"))
                .unwrap_or_default();
            format!(
                "; {} {} → {}{change}, {} experiments, {} kept",
                s.metric,
                fmt_metric(s.baseline),
                fmt_metric(s.best),
                s.experiments,
                s.counts.get("keep").copied().unwrap_or(0)
            )
        })
        .unwrap_or_default();
    Notice {
        on,
        run: tag.to_string(),
        text: format!(
            "hone run {tag} {what}: {}{result}",
            reason.strip_prefix("budget: ").unwrap_or(reason)
        ),
        data: serde_json::json!({ "reason": reason, "summary": summary }),
    }
}

fn run_engine(
    repo_root: &Path,
    spec: &Spec,
    opts: &RunOptions,
    interrupt: &Interrupt,
    on_event: &mut dyn FnMut(&Event),
) -> Result<Summary, EngineError> {
    let git = Git::discover(repo_root)?;
    let paths = StatePaths::new(git.root());
    std::fs::create_dir_all(&paths.dir)
        .map_err(|e| EngineError::Io(format!("cannot create {}: {e}", paths.dir.display())))?;
    git.ensure_excluded(&format!("{STATE_DIR}/"))?;
    let _lock = lock_state(&paths.lock())?;
    // Escaped descendants of the verifier (setsid) come back to hone, to be killed.
    exec::become_subreaper();
    let store = Store::open_at(&store_location(&git, spec))?;
    let preset = spec.agent.kind.preset();
    if spec.exec.backend == crate::spec::Backend::Slurm {
        if !crate::propose::command::on_path("sbatch") {
            return Err(EngineError::Setup(
                "[exec] backend = \"slurm\" but `sbatch` is not on PATH: install the SLURM client tools (Debian: apt-get install slurm-client) on this machine".into(),
            ));
        }
        if let Some(d) = &spec.exec.shared_dir {
            std::fs::create_dir_all(d).map_err(|e| {
                EngineError::Setup(format!(
                    "[exec] shared_dir {}: {e}; it must be a writable directory the compute nodes also see",
                    d.display()
                ))
            })?;
        }
    }
    if let (Some(p), None) = (preset, &spec.agent.command) {
        let (program, install) = p.program();
        if !crate::propose::command::on_path(program) {
            return Err(EngineError::Setup(format!(
                "`{program}` is not on PATH: install it with {install}, or set [agent] command"
            )));
        }
    }

    let mut engine = Engine::open(git, paths, store, spec.clone(), opts, interrupt, on_event)?;
    engine.run_loop()
}

struct Engine<'a> {
    git: Git,
    paths: StatePaths,
    store: Store,
    spec: Spec,
    run: RunRecord,
    seals: Seals,
    worktree: PathBuf,
    proposer: Box<dyn Proposer>,
    interrupt: &'a Interrupt,
    on_event: &'a mut dyn FnMut(&Event),
    session_start: Instant,
    active_before: f64,
    /// The first experiment number of this session.
    session_first: u64,
    /// Every experiment of the run, finished ones as recorded.
    history: Vec<ExperimentRecord>,
    /// bubblewrap is configured and runs here.
    contained: bool,
    /// The verifier stage running now is the sealed evaluator.
    evaluating: bool,
    /// With `[exec] backend = "workers"`: the queue.
    queue: Option<crate::queue::Queue>,
    /// In a shared store: this run's coordinator registration (released when dropped).
    _coordination: Option<crate::queue::Coordination>,
    /// The commit being measured by `measure` (the worktree's HEAD may still be its parent:
    /// candidates are committed without moving it).
    measuring: Option<String>,
    /// The outer loop's mechanisms (empty without `[outer]`).
    outer: crate::meta::Outer,
    /// The environment of the verification slot this engine verifies in (`[exec] slots`).
    slot_env: Vec<(String, String)>,
}

impl<'a> Engine<'a> {
    fn open(
        git: Git,
        paths: StatePaths,
        store: Store,
        mut spec: Spec,
        opts: &RunOptions,
        interrupt: &'a Interrupt,
        on_event: &'a mut dyn FnMut(&Event),
    ) -> Result<Engine<'a>, EngineError> {
        if let Some(n) = opts.max_experiments {
            spec.stop.max_experiments = n.max(1);
        }
        if let Some(t) = opts.max_time {
            spec.stop.max_time = Some(t);
        }
        let existing = match &opts.tag {
            Some(tag) => {
                validate_tag(tag)?;
                store.run_by_tag(tag)?
            }
            None if opts.new_run => None,
            None => store.latest_run()?.filter(|r| r.state != "stopped"),
        };
        let mut warnings = Vec::new();
        let mut notes = Vec::new();
        if existing.is_none() && opts.tag.is_none() && !opts.new_run {
            if let Some(last) = store.latest_run()? {
                notes.push(format!(
                    "run {} finished ({}); starting a new run from HEAD (`hone run --tag {} -n MORE` continues it instead)",
                    last.tag,
                    last.stop_reason.as_deref().unwrap_or("stopped"),
                    last.tag
                ));
            }
        }
        let coordination;
        let (run, resumed) = match existing {
            Some(run) => {
                coordination = coordinate(&store, &spec, &git, &run.tag)?;
                // A shared store holds the runs of every clone of this project; the branch and
                // the archive refs of a run live in the clone that coordinated it.
                if store.is_shared() && git.ref_target(&branch_ref(&run.tag))?.is_none() {
                    return Err(EngineError::Setup(format!(
                        "run `{tag}` in the shared store was started from another clone: branch hone/{tag} is not in this repository; fetch it (git fetch <remote> 'refs/heads/hone/{tag}:refs/heads/hone/{tag}' 'refs/hone/{tag}/*:refs/hone/{tag}/*'), or start a new run here with `hone run --new`",
                        tag = run.tag
                    )));
                }
                if run.metric != spec.verify.metric {
                    return Err(EngineError::Setup(format!(
                        "run `{}` measures `{}` but hone.toml now says metric = \"{}\"; start a new run with `hone run --new`",
                        run.tag, run.metric, spec.verify.metric
                    )));
                }
                if run.direction != spec.verify.direction.as_str() {
                    return Err(EngineError::Setup(format!(
                        "run `{}` was started with direction = \"{}\" but hone.toml now says \"{}\"; start a new run with `hone run --new`",
                        run.tag,
                        run.direction,
                        spec.verify.direction.as_str()
                    )));
                }
                if let Ok(head) = git.head() {
                    if head != run.base_commit {
                        warnings.push(format!(
                            "HEAD has moved since run `{}` started; the run goes on from its own start commit {} (start a new run from HEAD with `hone run --new`)",
                            run.tag,
                            &run.base_commit[..run.base_commit.len().min(10)]
                        ));
                    }
                }
                if let Some(seed) = opts.seed {
                    if seed != run.seed {
                        warnings.push(format!(
                            "run `{}` was started with seed {}; --seed {seed} is ignored on resume",
                            run.tag, run.seed
                        ));
                    }
                }
                (run, true)
            }
            None => {
                let tag = match &opts.tag {
                    Some(t) => t.clone(),
                    None => unique_tag(&store, &git)?,
                };
                coordination = coordinate(&store, &spec, &git, &tag)?;
                let branch = branch_ref(&tag);
                if git.ref_target(&branch)?.is_some() {
                    return Err(EngineError::Setup(format!(
                        "branch hone/{tag} already exists but no run of that tag is recorded; choose another --tag or delete the branch"
                    )));
                }
                if !git.refs_under(&format!("refs/hone/{tag}/"))?.is_empty() {
                    return Err(EngineError::Setup(format!(
                        "refs/hone/{tag}/ already holds experiments of an earlier run that hone has no record of; choose another --tag (or delete them with `git for-each-ref --format='delete %(refname)' refs/hone/{tag}/ | git update-ref --stdin`)"
                    )));
                }
                let head = git.head()?;
                let files = git.files_at(&head)?;
                if !files.iter().any(|f| matches_any(&spec.loop_.editable, f)) {
                    return Err(EngineError::Setup(format!(
                        "editable = [{}] matches no file committed at HEAD; fix the globs in hone.toml, or commit the files first",
                        spec.loop_.editable.iter().map(|e| format!("\"{e}\"")).collect::<Vec<_>>().join(", ")
                    )));
                }
                for doc in std::iter::once(spec.program_path())
                    .chain(spec.loop_.skills.iter().map(String::as_str))
                {
                    let explicit = spec.loop_.program.is_some() || doc != spec.program_path();
                    if explicit && !git.root().join(doc).exists() && !files.iter().any(|f| f == doc)
                    {
                        warnings.push(format!(
                            "`{doc}` (named in [loop]) does not exist; agents will not see it"
                        ));
                    }
                }
                // hone.toml, the program and the skills are read from the checkout, so their
                // uncommitted edits do count; anything else does not.
                let read_live: Vec<&str> = ["hone.toml", spec.program_path()]
                    .into_iter()
                    .chain(spec.loop_.skills.iter().map(String::as_str))
                    .collect();
                let dirty: Vec<String> = git
                    .uncommitted()?
                    .into_iter()
                    .filter(|f| !read_live.contains(&f.as_str()))
                    .collect();
                if !dirty.is_empty() {
                    warnings.push(format!(
                        "uncommitted changes are not part of the run (it starts from HEAD {}): {}",
                        &head[..head.len().min(10)],
                        dirty.join(", ")
                    ));
                }
                let wt = worktree_path(&paths, &spec, git.root(), &tag);
                git.prepare_worktree(&wt, &head)?;
                let sealed: Vec<String> = files
                    .into_iter()
                    .filter(|f| {
                        matches_any(&spec.loop_.protected, f) || matches_any(&spec.loop_.pinned, f)
                    })
                    .collect();
                let seals = Seals {
                    protected: hash_paths(&wt, &sealed)?,
                    pinned: hash_paths(git.root(), &spec.loop_.pinned)?,
                    pinned_paths: spec.loop_.pinned.clone(),
                };
                for (path, h) in &seals.pinned {
                    if h == "missing" {
                        warnings.push(format!(
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
                    &tag,
                    &format!("hone/{tag}"),
                    &head,
                    seed,
                    spec.agent.kind.as_str(),
                    &spec.verify.metric,
                    spec.verify.direction.as_str(),
                    &serde_json::to_string(&seals).unwrap_or_default(),
                    &serde_json::to_string(&spec).unwrap_or_default(),
                )?;
                (run, false)
            }
        };
        let seals: Seals = serde_json::from_str(&run.seals).unwrap_or_default();
        let worktree = worktree_path(&paths, &spec, git.root(), &run.tag);
        let proposer = propose::from_spec(&spec);
        // Outer loop (Level 2): scripts are read from and stored under the repository.
        let outer = crate::meta::Outer::from_spec(&spec).with_level2(git.root(), &run.tag);
        let active_before = run.active_seconds;
        let mut engine = Engine {
            git,
            paths,
            store,
            spec,
            run,
            seals,
            worktree,
            proposer,
            interrupt,
            on_event,
            session_start: Instant::now(),
            active_before,
            session_first: 0,
            history: Vec::new(),
            contained: false,
            evaluating: false,
            queue: None,
            _coordination: coordination,
            measuring: None,
            outer,
            slot_env: Vec::new(),
        };
        if engine.spec.exec.backend == crate::spec::Backend::Workers {
            let url = engine.spec.exec.store_url.clone().unwrap_or_default();
            engine.queue = Some(
                crate::queue::Queue::connect(&url)
                    .map_err(|e| EngineError::Setup(e.to_string()))?,
            );
        }
        if engine.spec.sandbox.bwrap {
            match crate::sandbox::probe() {
                Ok(()) => engine.contained = true,
                Err(e) if engine.spec.sandbox.required => {
                    return Err(EngineError::Setup(format!(
                        "[sandbox] kind = \"bwrap\": {e}. Fix that, or set [sandbox] required = false to run without containment"
                    )))
                }
                Err(e) => warnings.push(format!("{e}; running WITHOUT containment ([sandbox] required = false)")),
            }
        }
        let finished = engine.store.experiments(engine.run.id)?.len() as u64;
        engine.emit(Event::RunStarted {
            tag: engine.run.tag.clone(),
            branch: engine.run.branch.clone(),
            base_commit: engine.run.base_commit.clone(),
            resumed,
            finished_experiments: finished,
            metric: engine.spec.verify.metric.clone(),
            direction: engine.spec.verify.direction,
        });
        for llm in engine.spec.agent.llm.iter().chain(&engine.spec.review.llm) {
            if std::env::var_os(&llm.api_key_env).is_none() {
                notes.push(format!(
                    "${} is not set: requests to {} go without an API key (fine for a local server)",
                    llm.api_key_env, llm.base_url
                ));
            }
        }
        for message in notes {
            engine.emit(Event::Note { message });
        }
        for w in warnings {
            engine.emit(Event::Warning { message: w });
        }
        if resumed {
            engine.recover()?;
        }
        engine.store.set_run_state(engine.run.id, "running", None)?;
        Ok(engine)
    }

    fn emit(&mut self, event: Event) {
        let n = match &event {
            Event::ExperimentStarted { n } | Event::Proposed { n, .. } | Event::Verifying { n } => {
                Some(*n)
            }
            Event::ExperimentFinished { record, .. } => Some(record.n),
            Event::Outer { n, .. } => Some(*n),
            _ => None,
        };
        let data = serde_json::to_value(&event).unwrap_or(serde_json::Value::Null);
        // The event log is a record, not a control path: a failed append must not stop the loop.
        let _ = self.store.append_event(self.run.id, n, event.kind(), &data);
        (self.on_event)(&event);
    }

    fn active_seconds(&self) -> f64 {
        self.active_before + self.session_start.elapsed().as_secs_f64()
    }

    /// Repairs what a crash left behind (see the module docs).
    fn recover(&mut self) -> Result<(), EngineError> {
        let tag = self.run.tag.clone();
        let mut exps = self.store.experiments(self.run.id)?;
        for e in exps.iter_mut().filter(|e| e.status() == Status::Running) {
            let mut killed = false;
            if let Some(pid) = e.pid {
                killed = exec::kill_stale_group(pid, e.pid_start);
            }
            // Whatever else was started for it (say, an agent whose pid was not yet recorded
            // when hone died) carries its job token.
            if exec::kill_groups_with_env("HONE_JOB", &self.job_token(e.n)) > 0 {
                killed = true;
            }
            let jobs: Vec<u64> = self
                .store
                .events(self.run.id)?
                .into_iter()
                .filter(|(n, kind, _)| *n == Some(e.n) && kind == "slurm_job")
                .filter_map(|(_, _, data)| {
                    serde_json::from_str::<serde_json::Value>(&data)
                        .ok()?
                        .get("job")?
                        .as_u64()
                })
                .collect();
            if !jobs.is_empty() && exec::slurm::cancel_stale(&jobs) > 0 {
                killed = true;
            }
            let key = self.run_key();
            if let Some(q) = self.queue.as_mut() {
                if q.cancel_experiment(&key, e.n).unwrap_or(0) > 0 {
                    killed = true;
                }
            }
            e.status = Some(Status::Aborted);
            e.reason = "interrupted: hone stopped during this experiment".into();
            e.finished_at = Some(now());
            self.store.put_experiment(self.run.id, e)?;
            let msg = format!(
                "experiment {} was interrupted; recorded as aborted{}",
                e.n,
                if killed {
                    " (its leftover processes were killed)"
                } else {
                    ""
                }
            );
            self.emit(Event::Warning { message: msg });
        }
        // Parallel slots' worktrees hold what in-flight candidates left: gone with them.
        parallel::clean_slots(&self.git, &self.paths, &self.spec, &tag)?;
        for e in &exps {
            if let Some(c) = &e.candidate_commit {
                let r = archive_ref(&tag, e.n);
                if self.git.ref_target(&r)?.is_none() {
                    self.git.update_ref(&r, c, None)?;
                }
            }
        }
        let branch = branch_ref(&tag);
        let expected = best_experiment(&exps)
            .and_then(|b| b.candidate_commit.clone())
            .unwrap_or_else(|| self.run.base_commit.clone());
        match self.git.ref_target(&branch)? {
            Some(head) if head == expected => {}
            Some(head) => {
                // A keep recorded just before a crash may have missed its branch move.
                let last_keep_parent = exps
                    .iter()
                    .rev()
                    .find(|e| e.status() == Status::Keep)
                    .map(|e| e.parent_commit.clone());
                if last_keep_parent.as_deref() == Some(head.as_str()) {
                    self.git.update_ref(&branch, &expected, Some(&head))?;
                } else {
                    return Err(GitError::RefMoved {
                        name: branch,
                        expected,
                        found: head,
                    }
                    .into());
                }
            }
            None => {
                return Err(EngineError::Setup(format!(
                "branch hone/{tag} was deleted; every experiment is still under refs/hone/{tag}/, \
                     recreate the branch with `git branch hone/{tag} {expected}` to resume"
            )))
            }
        }
        Ok(())
    }

    fn run_loop(&mut self) -> Result<Summary, EngineError> {
        let wt = self.worktree.clone();
        let branch = branch_ref(&self.run.tag);
        let head = self
            .git
            .ref_target(&branch)?
            .ok_or_else(|| EngineError::Setup(format!("branch {branch} is missing")))?;
        self.git.prepare_worktree(&wt, &head)?;
        // The run's experiments, kept in memory from here on (the store stays the truth on
        // disk; `finish` writes each outcome there before updating this copy).
        self.history = self.store.experiments(self.run.id)?;
        self.session_first = self.history.len() as u64;
        // Outer loop: mechanisms start (a resumed run's history rebuilds what they can).
        let next = self.history.last().map_or(0, |e| e.n + 1);
        if self.outer.restores() && !self.history.is_empty() {
            let calls = self.store.mechanism_calls(self.run.id, None)?;
            self.outer.restore(&calls, &self.history);
        }
        self.outer.on_start(next, self.run.seed, &self.history);
        self.flush_outer()?;
        let first_check = self
            .check_pinned()
            .err()
            .map(|changed| Stop::failed(pinned_message(&changed)));
        let stop = loop {
            if let Some(stop) = first_check {
                break stop;
            }
            let exps = self.history.clone();
            if let Some(stop) = self.stop_condition(&exps) {
                break stop;
            }
            // With `[exec] workers`, the experiments after the baseline run in parallel.
            if self.spec.exec.workers > 1 && best_experiment(&exps).is_some() {
                break self.run_parallel()?;
            }
            let step = self.experiment(&exps)?;
            // One loose ref per experiment makes every ref listing slower; pack them now and
            // then so the loop's cost does not grow with the run.
            if exps.len() % 64 == 63 {
                let _ = self.git.run(&["pack-refs", "--all"]);
            }
            self.store
                .set_active_seconds(self.run.id, self.active_seconds())?;
            if let Some(stop) = step {
                break stop;
            }
        };
        self.store
            .set_active_seconds(self.run.id, self.active_seconds())?;
        if !stop.error {
            self.holdout_final()?;
        }
        let state = if stop.resumable {
            "interrupted"
        } else {
            // A finished run needs no worktree: everything it tried is in refs/hone/<tag>/.
            let _ = self.git.remove_worktree(&self.worktree);
            "stopped"
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
            .ok_or_else(|| EngineError::Setup("the run vanished from the store".into()))?;
        let summary = summarize(&run, &self.store.experiments(run.id)?);
        if stop.error {
            return Err(EngineError::Stopped {
                reason: stop.reason,
                summary: Box::new(summary),
            });
        }
        Ok(summary)
    }

    /// Why the loop should stop before the next experiment, if it should.
    fn stop_condition(&self, exps: &[ExperimentRecord]) -> Option<Stop> {
        let s = &self.spec.stop;
        if self.interrupt.stop_requested() {
            return Some(Stop::resumable(
                "interrupted by the user (run `hone run` to resume)",
            ));
        }
        if exps.len() as u64 >= s.max_experiments {
            return Some(Stop::done(format!(
                "reached max_experiments ({})",
                s.max_experiments
            )));
        }
        if let Some(t) = s.max_time {
            if self.active_seconds() >= t.as_secs_f64() {
                return Some(Stop::done(format!(
                    "reached max_time ({})",
                    format_duration(t)
                )));
            }
        }
        let best = best_experiment(exps);
        if let (Some(target), Some(b)) = (s.target, best.and_then(|b| b.objective)) {
            let reached = match self.spec.verify.direction {
                Direction::Minimize => b <= target,
                Direction::Maximize => b >= target,
            };
            if reached {
                return Some(Stop::done(format!(
                    "reached target ({} = {b})",
                    self.spec.verify.metric
                )));
            }
        }
        if let (Some(p), Some(b)) = (s.patience, best) {
            let since = exps.iter().filter(|e| e.n > b.n).count() as u64;
            if since >= p {
                return Some(Stop::done(format!(
                    "no improvement in {since} experiments (patience {p})"
                )));
            }
        }
        // Only this session's failures count: resuming after fixing the cause starts afresh.
        let failures = exps
            .iter()
            .rev()
            .take_while(|e| e.n >= self.session_first && e.status().is_failure())
            .count() as u64;
        if failures >= s.max_consecutive_failures {
            return Some(Stop::failed(format!(
                "{failures} failed experiments in a row (max_consecutive_failures); see `hone log` and `hone show {}`",
                exps.last().map(|e| e.n).unwrap_or(0)
            )));
        }
        if let Some(max) = s.max_cost_usd {
            let spent: f64 = exps.iter().map(|e| e.cost_usd).sum();
            if spent >= max {
                return Some(Stop::done(format!(
                    "budget: reached max_cost_usd (${spent:.2} of ${max:.2})"
                )));
            }
        }
        if let Some(max) = s.max_tokens {
            let spent: u64 = exps.iter().map(|e| e.tokens).sum();
            if spent >= max {
                return Some(Stop::done(format!(
                    "budget: reached max_tokens ({spent} of {max})"
                )));
            }
        }
        None
    }

    /// The first pinned input that changed, if any.
    fn check_pinned(&self) -> Result<(), String> {
        if self.seals.pinned.is_empty() {
            return Ok(());
        }
        match hash_paths(self.git.root(), &self.seals.pinned_paths) {
            Ok(now) => match first_difference(&self.seals.pinned, &now) {
                Some(p) => Err(p),
                None => Ok(()),
            },
            Err(e) => Err(e.to_string()),
        }
    }

    /// Runs one experiment; `Some(stop)` when the run must stop after it.
    /// Runs one experiment; `Some(stop)` when the run must stop after it.
    fn experiment(&mut self, exps: &[ExperimentRecord]) -> Result<Option<Stop>, EngineError> {
        let wt = self.worktree.clone();
        match self.prepare(exps, &[], &wt)? {
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
    ) -> Result<Prepared, EngineError> {
        let t_start = Instant::now();
        let n = exps
            .iter()
            .chain(in_flight)
            .map(|e| e.n + 1)
            .max()
            .unwrap_or(0);
        let best = best_experiment(exps).cloned();
        let baseline = best.is_none();
        let parent = best
            .as_ref()
            .and_then(|b| b.candidate_commit.clone())
            .unwrap_or_else(|| self.run.base_commit.clone());
        let mut rec = ExperimentRecord {
            n,
            parent_commit: parent.clone(),
            status: Some(Status::Running),
            started_at: now(),
            ..Default::default()
        };
        self.store.put_experiment(self.run.id, &rec)?;
        self.emit(Event::ExperimentStarted { n });
        let wt = wt.to_path_buf();
        self.git.reset_worktree(&wt, &parent)?;
        let run_dir = self.paths.run_dir(&self.run.tag);
        std::fs::create_dir_all(run_dir.join("logs"))
            .map_err(|e| EngineError::Io(format!("cannot create {}: {e}", run_dir.display())))?;

        // What the proposer sees: finished experiments, and those still being verified
        // (`running`: their candidates are known, their outcomes not yet).
        let mut finished: Vec<ExperimentRecord> = exps
            .iter()
            .filter(|e| e.status() != Status::Running)
            .chain(in_flight)
            .cloned()
            .collect();
        finished.sort_by_key(|e| e.n);
        let interrupt = self.interrupt;
        let cancel = move || interrupt.kill_requested();

        // Propose. hone's own refs are noted first: an agent that moves them is caught below.
        let refs_before = if baseline {
            Vec::new()
        } else {
            self.run_refs()?
        };
        let t_propose = Instant::now();
        let _ = std::fs::create_dir_all(run_dir.join("prompts"));
        let agent_wrapper = self.wrapper(&wt, true, Role::Agent);
        let spent = std::cell::Cell::new((0.0f64, 0u64));
        let budget = propose::Budget {
            usd_left: self
                .spec
                .stop
                .max_cost_usd
                .map(|m| m - self.history.iter().map(|e| e.cost_usd).sum::<f64>()),
            tokens_left: self
                .spec
                .stop
                .max_tokens
                .map(|m| m.saturating_sub(self.history.iter().map(|e| e.tokens).sum::<u64>())),
        };
        let no_guidance = crate::meta::Guidance::default();
        let job = self.job_token(n);
        let proposal = {
            let (store, run_id) = (&self.store, self.run.id);
            // Record the agent's process group as soon as it exists, so that a crash of hone
            // while the agent works leaves enough to kill it on resume.
            let on_spawn = move |pid: u32, start: Option<u64>| {
                let _ = store.set_experiment_pid(run_id, n, pid, start);
            };
            let ctx = ProposeContext {
                n,
                worktree: &wt,
                parent_commit: &parent,
                base_commit: &self.run.base_commit,
                history: &finished,
                best: best.as_ref(),
                spec: &self.spec,
                git: &self.git,
                repo_root: self.git.root(),
                run_dir: &run_dir,
                seed: self.run.seed,
                cancel: &cancel,
                on_spawn: &on_spawn,
                wrapper: &agent_wrapper,
                budget,
                spent: &spent,
                guidance: &no_guidance,
                job: &job,
            };
            if baseline {
                rec.config = self.proposer.describe_baseline(&ctx);
                None
            } else {
                // Outer loop: guidance, candidates and (for the knobs optimizer) filters.
                Some(self.outer.propose(&mut *self.proposer, &ctx))
            }
        };
        rec.propose_ms = t_propose.elapsed().as_millis() as u64;
        let (usd, tokens) = spent.get();
        rec.cost_usd += usd;
        rec.tokens += tokens;
        exec::kill_orphans();
        let t_gate = Instant::now();
        match proposal {
            None => {
                rec.description = "baseline".into();
                rec.candidate_commit = Some(parent.clone());
                rec.tree = Some(self.git.tree_of(&parent)?);
                self.git
                    .update_ref_if_missing(&archive_ref(&self.run.tag, n), &parent)?;
            }
            Some(Ok(p)) => {
                rec.description = p.description;
                rec.config = p.config;
                rec.cost_usd += p.cost_usd;
                self.emit(Event::Proposed {
                    n,
                    description: rec.description.clone(),
                });
            }
            Some(Err(ProposeError::Invalid(reason))) => {
                // Whatever the proposer left is archived all the same.
                self.archive(&mut rec, &wt, &parent)?;
                return self
                    .finish(rec, Status::Invalid, reason, t_start)
                    .map(|_| Prepared::Done(None));
            }
            Some(Err(ProposeError::Cancelled)) => {
                self.finish(
                    rec,
                    Status::Aborted,
                    "interrupted by the user".into(),
                    t_start,
                )?;
                return Ok(Prepared::Done(Some(Stop::resumable(
                    "interrupted by the user (run `hone run` to resume)",
                ))));
            }
            Some(Err(ProposeError::Exhausted(reason))) => {
                self.finish(rec, Status::Invalid, reason.clone(), t_start)?;
                return Ok(Prepared::Done(Some(Stop::done(reason))));
            }
            Some(Err(ProposeError::Budget(reason))) => {
                self.finish(rec, Status::Invalid, reason.clone(), t_start)?;
                return Ok(Prepared::Done(Some(Stop::done(reason))));
            }
            Some(Err(ProposeError::Rejected(reason))) => {
                // A mechanism refused every proposal; nothing was archived or verified.
                return self
                    .finish(rec, Status::Rejected, reason, t_start)
                    .map(|_| Prepared::Done(None));
            }
            Some(Err(ProposeError::Fatal(reason))) => {
                self.finish(rec, Status::Invalid, reason.clone(), t_start)?;
                return Ok(Prepared::Done(Some(Stop::failed(reason))));
            }
        }

        // Snapshot and gate.
        if !baseline {
            if !self.git.worktree_link_ok(&wt) {
                rec.gate_ms = t_gate.elapsed().as_millis() as u64;
                let why = "replaced the worktree's .git (git would have run another repository's settings); nothing was committed".to_string();
                return self
                    .finish(rec, Status::Violation, why, t_start)
                    .map(|_| Prepared::Done(None));
            }
            let refs_after = self.run_refs()?;
            if refs_after != refs_before {
                let moved = self.restore_refs(&refs_before, &refs_after)?;
                self.archive(&mut rec, &wt, &parent)?;
                rec.gate_ms = t_gate.elapsed().as_millis() as u64;
                let why = format!("the proposer moved hone's refs ({moved}); they were put back");
                return self
                    .finish(rec, Status::Violation, why, t_start)
                    .map(|_| Prepared::Done(None));
            }
            let Some(snap) = self.archive(&mut rec, &wt, &parent)? else {
                rec.gate_ms = t_gate.elapsed().as_millis() as u64;
                let why = "no change: the proposer left the files as they were".to_string();
                return self
                    .finish(rec, Status::Invalid, why, t_start)
                    .map(|_| Prepared::Done(None));
            };
            let violation = if !snap.hidden.is_empty() {
                Some(format!(
                    "hid `{}` from git (assume-unchanged/skip-worktree index flags)",
                    snap.hidden.join("`, `")
                ))
            } else {
                self.scope_violation(&snap.changes)
                    .or_else(|| escaping_symlink(&wt, &snap.changes))
            };
            // Files git ignores are not part of the candidate: the verifier must not see them.
            self.git.remove_ignored(&wt)?;
            let violation = violation.or_else(|| {
                self.sealed_changed(&wt)
                    .map(|path| format!("protected file `{path}` differs from the run's start"))
            });
            if let Some(why) = violation {
                rec.gate_ms = t_gate.elapsed().as_millis() as u64;
                return self
                    .finish(rec, Status::Violation, why, t_start)
                    .map(|_| Prepared::Done(None));
            }
            // Outer loop: mechanisms' filters on an agent's edit, before any compute.
            if let Some(why) = self.outer_filter(&rec, &parent, &finished)? {
                rec.gate_ms = t_gate.elapsed().as_millis() as u64;
                return self
                    .finish(rec, Status::Rejected, why, t_start)
                    .map(|_| Prepared::Done(None));
            }
            // Rules and the reviewer, before any compute is spent on the candidate.
            let meter = propose::Meter {
                budget,
                spent: &spent,
            };
            match self.review(&mut rec, &wt, &parent, &cancel, &meter)? {
                Gate::Pass => {}
                Gate::Reject(why) => {
                    rec.gate_ms = t_gate.elapsed().as_millis() as u64;
                    return self
                        .finish(rec, Status::Rejected, why, t_start)
                        .map(|_| Prepared::Done(None));
                }
                Gate::Stop(stop) => {
                    rec.gate_ms = t_gate.elapsed().as_millis() as u64;
                    self.finish(rec, Status::Rejected, stop.reason.clone(), t_start)?;
                    return Ok(Prepared::Done(Some(stop)));
                }
            }
        }
        if let Err(changed) = self.check_pinned() {
            rec.gate_ms = t_gate.elapsed().as_millis() as u64;
            let reason = pinned_message(&changed);
            self.finish(rec, Status::Aborted, reason.clone(), t_start)?;
            return Ok(Prepared::Done(Some(Stop::failed(reason))));
        }
        rec.gate_ms = t_gate.elapsed().as_millis() as u64;

        // Dedup: the same files as an experiment already measured give the same answer.
        if let Some(tree) = rec.tree.clone() {
            let measured = |e: &&ExperimentRecord| {
                e.tree.as_deref() == Some(tree.as_str())
                    && matches!(
                        e.status(),
                        Status::Baseline
                            | Status::Keep
                            | Status::Discard
                            | Status::Crash
                            | Status::Timeout
                    )
            };
            let running = |e: &&ExperimentRecord| e.tree.as_deref() == Some(tree.as_str());
            if let Some(dup) = exps.iter().find(measured) {
                let why = format!("duplicate of #{} (identical files; not run again)", dup.n);
                return self
                    .finish(rec, Status::Invalid, why, t_start)
                    .map(|_| Prepared::Done(None));
            }
            if let Some(dup) = in_flight.iter().find(running) {
                let why = format!(
                    "duplicate of #{}, which is being verified now (identical files)",
                    dup.n
                );
                return self
                    .finish(rec, Status::Invalid, why, t_start)
                    .map(|_| Prepared::Done(None));
            }
        }
        Ok(Prepared::Ready(Box::new(Candidate {
            rec,
            t_start,
            best,
            parent,
        })))
    }

    /// The second half of an experiment: verify the candidate in `wt`, decide, record.
    fn verify_and_decide(&mut self, c: Candidate, wt: &Path) -> Result<Option<Stop>, EngineError> {
        let mut c = c;
        let n = c.rec.n;
        // Verify: a first run, then the baseline's repeats or a passing candidate's confirms.
        self.emit(Event::Verifying { n });
        let t_verify = Instant::now();
        let best_value = c.best.as_ref().and_then(|b| b.objective);
        let baseline = c.best.is_none();
        let refs_at_verify = if baseline {
            Vec::new()
        } else {
            self.run_refs()?
        };
        let interrupt = self.interrupt;
        let cancel = move || interrupt.kill_requested();
        let verified = self.verify(&mut c.rec, wt, baseline, best_value, &cancel)?;
        let (status, reason) = match verified {
            Verified::Cancelled => return self.abort(c.rec, c.t_start),
            Verified::Failed(status, reason) => (status, reason),
            Verified::Values { broken, failed } => {
                self.judge(&mut c.rec, failed, broken, best_value)
            }
        };
        c.rec.verify_ms = t_verify.elapsed().as_millis() as u64;
        self.conclude(c, wt, status, reason, Some(refs_at_verify))
    }

    /// Runs the verifier on the candidate in `wt`: a first run, then the baseline's repeats
    /// or, when the first run passes against `best_value`, its confirm runs. The runs and
    /// metrics go into `rec`; the decision is [`Engine::judge`]'s.
    fn verify(
        &mut self,
        rec: &mut ExperimentRecord,
        wt: &Path,
        baseline: bool,
        best_value: Option<f64>,
        cancel: &dyn Fn() -> bool,
    ) -> Result<Verified, EngineError> {
        let policy = self.spec.noise_policy();
        let net_lines = rec.lines_added as i64 - rec.lines_deleted as i64;
        let sigma = self.sigma(None);
        let (value, metrics) = match self.measure(rec, wt, 0, !baseline, cancel)? {
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
            match self.measure(rec, wt, k, !baseline, cancel)? {
                Measured::Cancelled => return Ok(Verified::Cancelled),
                Measured::Failed { status, reason } => {
                    failed = Some((status, format!("repeat {k} of this code: {reason}")));
                    break;
                }
                Measured::Value { value, .. } => rec.runs.push(value),
            }
        }
        Ok(Verified::Values { broken, failed })
    }

    /// The decision on a measured candidate against `best_value` (`None`: it is the
    /// baseline): sets its objective (the mean of its runs) and judgement.
    fn judge(
        &self,
        rec: &mut ExperimentRecord,
        failed: Option<Failure>,
        broken: Option<String>,
        best_value: Option<f64>,
    ) -> (Status, String) {
        let policy = self.spec.noise_policy();
        let net_lines = rec.lines_added as i64 - rec.lines_deleted as i64;
        rec.objective = Some(mean(&rec.runs));
        let sigma = if rec.runs.len() > 1 {
            self.sigma(Some(&rec.runs))
        } else {
            self.sigma(None)
        };
        match (failed, best_value, broken) {
            (Some(f), _, _) => f,
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
                    self.spec.verify.seed_env.as_deref().unwrap_or("the seed")
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
                rec.judgement = Some(j);
                (status, reason)
            }
        }
    }

    /// Records a judged candidate: the checks on what its code did while it ran (`refs_at_verify`:
    /// hone's refs when it started; `None` where other experiments move them meanwhile), the
    /// holdout, the outcome, then (a keep) the branch move and the re-test.
    fn conclude(
        &mut self,
        c: Candidate,
        wt: &Path,
        status: Status,
        reason: String,
        refs_at_verify: Option<Vec<(String, String)>>,
    ) -> Result<Option<Stop>, EngineError> {
        let Candidate {
            mut rec,
            t_start,
            best,
            parent,
        } = c;
        let n = rec.n;
        let baseline = best.is_none();
        let wt = wt.to_path_buf();
        let interrupt = self.interrupt;
        let cancel = move || interrupt.kill_requested();
        // The candidate's own code ran: it must not have touched hone's refs or git link.
        let (status, reason) = if baseline {
            (status, reason)
        } else if !self.git.worktree_link_ok(&wt) {
            (
                Status::Violation,
                "the verifier run replaced the worktree's .git".to_string(),
            )
        } else if let Some(refs_at_verify) = refs_at_verify {
            let now = self.run_refs()?;
            if now != refs_at_verify {
                let moved = self.restore_refs(&refs_at_verify, &now)?;
                (
                    Status::Violation,
                    format!("the verifier run moved hone's refs ({moved}); they were put back"),
                )
            } else {
                (status, reason)
            }
        } else {
            (status, reason)
        };
        if baseline && status != Status::Baseline {
            let reason = format!("baseline {status}: {reason}");
            self.finish(rec, status, reason.clone(), t_start)?;
            let log = self
                .paths
                .run_dir(&self.run.tag)
                .join("logs")
                .join(format!("{n}.log"));
            let tail = log_tail(&log, 12);
            return Ok(Some(Stop::failed(format!(
                "the baseline failed ({reason}); the unmodified project must pass the verifier.\n\
                 Last lines of its log ({}):\n{tail}\n\
                 Fix [verify] in hone.toml and run `hone run` again, or commit a fix and start a new run with `hone run --new`",
                log.display()
            ))));
        }
        if baseline {
            for c in self.spec.verify.constraints.clone() {
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
        let (status, reason) = if matches!(status, Status::Keep | Status::Baseline) {
            self.holdout_gate(&mut rec, &wt, best.as_ref(), status, reason, &cancel)?
        } else {
            (status, reason)
        };
        let baseline_holdout_failed =
            status == Status::Baseline && self.spec.verify.holdout_gate && rec.holdout.is_none();
        let keep_commit = rec.candidate_commit.clone();
        self.finish(rec, status, reason, t_start)?;
        if baseline_holdout_failed {
            return Ok(Some(Stop::failed(format!(
                "the holdout command failed on the baseline (log: {}), so holdout_gate has nothing to compare with; fix [verify.holdout] and run `hone run` again",
                self.paths.run_dir(&self.run.tag).join("holdout").join(format!("{n}.log")).display()
            ))));
        }
        if status == Status::Keep {
            if let Some(c) = keep_commit {
                // The outcome is recorded; now the branch may move (compare-and-swap).
                self.git
                    .update_ref(&branch_ref(&self.run.tag), &c, Some(&parent))?;
                self.maybe_retest(n, &wt, &c, &cancel)?;
            }
        }
        Ok(None)
    }

    /// σ from every experiment with repeated runs (plus `extra`, the runs of the experiment
    /// being decided, which is not in the history yet).
    ///
    /// Never below the baseline's own σ: candidates whose code pins its own seed repeat
    /// identically and would otherwise talk the noise estimate down.
    fn sigma(&self, extra: Option<&[f64]>) -> Option<f64> {
        let groups = self
            .history
            .iter()
            .filter(|e| e.runs.len() > 1)
            .map(|e| e.runs.as_slice())
            .chain(extra);
        let all = estimate_sigma(groups);
        let baseline = estimate_sigma(
            self.history
                .iter()
                .filter(|e| e.status() == Status::Baseline && e.runs.len() > 1)
                .map(|e| e.runs.as_slice()),
        );
        match (all, baseline) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// The run's branch and archive refs, as (name, commit), sorted.
    fn run_refs(&self) -> Result<Vec<(String, String)>, EngineError> {
        let tag = &self.run.tag;
        let mut refs = self.git.refs_under(&format!("refs/hone/{tag}/"))?;
        if let Some(head) = self.git.ref_target(&branch_ref(tag))? {
            refs.push((branch_ref(tag), head));
        }
        refs.sort();
        Ok(refs)
    }

    /// Puts refs back as they were (deleting ones that appeared); returns their names.
    fn restore_refs(
        &self,
        before: &[(String, String)],
        after: &[(String, String)],
    ) -> Result<String, EngineError> {
        let mut moved = Vec::new();
        for (name, now) in after {
            match before.iter().find(|(n, _)| n == name) {
                Some((_, was)) if was == now => {}
                Some((_, was)) => {
                    self.git.update_ref(name, was, Some(now))?;
                    moved.push(name.clone());
                }
                None => {
                    self.git.run(&["update-ref", "-d", name, now])?;
                    moved.push(name.clone());
                }
            }
        }
        for (name, was) in before {
            if !after.iter().any(|(n, _)| n == name) {
                self.git.update_ref(name, was, None)?;
                moved.push(name.clone());
            }
        }
        Ok(moved.join(", "))
    }

    /// Measures the sealed holdout of a baseline or a keep; with `holdout_gate`, a keep that
    /// makes the holdout worse than the best's by more than its `min_delta` becomes a discard.
    fn holdout_gate(
        &mut self,
        rec: &mut ExperimentRecord,
        wt: &Path,
        best: Option<&ExperimentRecord>,
        status: Status,
        reason: String,
        cancel: &dyn Fn() -> bool,
    ) -> Result<(Status, String), EngineError> {
        let Some(h) = self.spec.verify.holdout.clone() else {
            return Ok((status, reason));
        };
        // The holdout sees the committed candidate, not what its verifier run left behind.
        let commit = rec
            .candidate_commit
            .clone()
            .unwrap_or_else(|| self.run.base_commit.clone());
        self.git.reset_worktree(wt, &commit)?;
        self.git.remove_ignored(wt)?;
        rec.holdout = self.measure_holdout(rec.n, wt, &h, cancel)?;
        if status == Status::Keep && self.sealed_changed(wt).is_some() {
            rec.holdout = None;
        }
        if status != Status::Keep || !self.spec.verify.holdout_gate {
            return Ok((status, reason));
        }
        let best_h = best.and_then(|b| b.holdout);
        match (rec.holdout, best_h) {
            (None, _) => Ok((Status::Discard, format!("holdout: the holdout command failed (see .hone/runs/{}/holdout/{}.log); {reason}", self.run.tag, rec.n))),
            (Some(now), Some(was)) if self.spec.verify.direction.improvement(now, was) < -h.min_delta => Ok((
                Status::Discard,
                format!("holdout: {} went from {was} to {now}, worse by more than {}; {reason}", h.metric, h.min_delta),
            )),
            _ => Ok((status, reason)),
        }
    }

    /// At the end of a run, the best gets a holdout value if it has none yet (for instance when
    /// the holdout was configured after it was kept).
    fn holdout_final(&mut self) -> Result<(), EngineError> {
        let Some(h) = self.spec.verify.holdout.clone() else {
            return Ok(());
        };
        let Some(mut best) = best_experiment(&self.history).cloned() else {
            return Ok(());
        };
        let Some(commit) = best.candidate_commit.clone() else {
            return Ok(());
        };
        if best.holdout.is_some() {
            return Ok(());
        }
        let wt = self.worktree.clone();
        self.git.prepare_worktree(&wt, &commit)?;
        let interrupt = self.interrupt;
        best.holdout =
            self.measure_holdout(best.n, &wt, &h, &move || interrupt.kill_requested())?;
        self.store.put_experiment(self.run.id, &best)?;
        if let Some(e) = self.history.iter_mut().find(|e| e.n == best.n) {
            *e = best;
        }
        Ok(())
    }

    /// Runs the holdout command in the worktree; its log stays outside every worktree and
    /// out of every prompt.
    fn measure_holdout(
        &mut self,
        n: u64,
        wt: &Path,
        h: &crate::spec::HoldoutSpec,
        cancel: &dyn Fn() -> bool,
    ) -> Result<Option<f64>, EngineError> {
        let dir = self.paths.run_dir(&self.run.tag).join("holdout");
        std::fs::create_dir_all(&dir)
            .map_err(|e| EngineError::Io(format!("cannot create {}: {e}", dir.display())))?;
        let env = self.candidate_env(n);
        let req = ExecRequest {
            command: h.command.clone(),
            cwd: wt.to_path_buf(),
            env,
            timeout: Some(h.timeout),
            kill_grace: self.spec.verify.kill_grace,
            drain_timeout: Duration::from_secs(2),
            log_path: dir.join(format!("{n}.log")),
            max_log_bytes: self.spec.verify.max_log_bytes,
            limits: self.spec.sandbox.limits(),
            wrapper: self.wrapper(wt, self.spec.sandbox.network, Role::Holdout),
        };
        let mut reader =
            MetricReader::new(&h.metric, None).map_err(|e| EngineError::Setup(e.to_string()))?;
        let (exit, failure) = self.execute(
            n,
            &req,
            "holdout command",
            &mut |line| reader.feed(line),
            cancel,
        )?;
        let value = reader.finish().values.get(&h.metric).copied();
        Ok(match (exit, failure) {
            (Exit::Code(0), None) => value.filter(|v| v.is_finite()),
            _ => None,
        })
    }

    /// The environment of the verifier and the holdout for experiment `n`: what hone was
    /// given (less its own settings and its LLM key), `[verify] env`, and the experiment.
    fn candidate_env(&self, n: u64) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
        let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> = std::env::vars_os()
            .filter(|(k, _)| self.env_allowed_for_candidate(k))
            .collect();
        for (k, v) in &self.spec.verify.env {
            env.push((k.into(), v.into()));
        }
        env.push(("HONE_EXPERIMENT".into(), n.to_string().into()));
        env.push(("HONE_RUN".into(), self.run.tag.clone().into()));
        env.push(("HONE_JOB".into(), self.job_token(n).into()));
        for (k, v) in &self.slot_env {
            env.push((k.into(), v.into()));
        }
        env
    }

    /// The `HONE_JOB` token of experiment `n`: every process hone starts for it (agent,
    /// reviewer, verifier, holdout) carries it, so that after a crash the next hone finds and
    /// kills them, even one whose pid never reached the store.
    fn job_token(&self, n: u64) -> String {
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(self.git.root().as_os_str().as_encoded_bytes());
        let short: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
        format!("{short}:{}:{n}", self.run.tag)
    }

    /// May this inherited variable reach code hone runs on a candidate's behalf (verifier,
    /// holdout, reviewer)? Not hone's own settings, and not the API keys of hone's own HTTP
    /// proposer and reviewer: code the model wrote must not be able to print them into a log
    /// or prompt.
    fn env_allowed_for_candidate(&self, name: &std::ffi::OsStr) -> bool {
        let name = name.to_string_lossy();
        !name.starts_with("HONE_")
            && !crate::propose::command::hone_secret_vars(&self.spec)
                .iter()
                .any(|k| *k == name)
    }

    /// The sandbox prefix for a process confined to `wt` (empty without bubblewrap). Agents
    /// keep the network (they talk to their models); the verifier follows `[sandbox] network`.
    ///
    /// Agents and verifiers cannot read hone's state (`.hone/`: the database, logs and
    /// holdout results) nor `[verify.holdout] hide`; an agent may read its prompts.
    fn wrapper(&self, wt: &Path, network: bool, role: Role) -> Vec<std::ffi::OsString> {
        if !self.contained {
            return Vec::new();
        }
        // A private temporary directory inside the worktree: git ignores `.hone/`, and the
        // next reset removes it.
        let tmp = wt.join(STATE_DIR).join("tmp");
        let _ = std::fs::create_dir_all(&tmp);
        let mut hide = Vec::new();
        let mut expose = Vec::new();
        if role != Role::Holdout {
            hide.push(self.paths.dir.clone());
            if let Some(h) = &self.spec.verify.holdout {
                hide.extend(h.hide.iter().map(|p| self.git.root().join(p)));
            }
        }
        if role == Role::Agent {
            expose.push(self.paths.run_dir(&self.run.tag).join("prompts"));
        }
        crate::sandbox::bwrap_wrapper(wt, &tmp, network, &hide, &expose)
    }

    /// The review gate: `max_diff_lines`, `forbid` on added lines, then the reviewer (a
    /// command, or an LLM over HTTP whose spend goes on `meter` and into `rec`).
    fn review(
        &mut self,
        rec: &mut ExperimentRecord,
        wt: &Path,
        parent: &str,
        cancel: &dyn Fn() -> bool,
        meter: &propose::Meter<'_>,
    ) -> Result<Gate, EngineError> {
        let r = self.spec.review.clone();
        if r.command.is_none()
            && r.llm.is_none()
            && r.max_diff_lines.is_none()
            && r.forbid.is_empty()
        {
            return Ok(Gate::Pass);
        }
        let Some(commit) = rec.candidate_commit.clone() else {
            return Ok(Gate::Pass);
        };
        let changed = rec.lines_added + rec.lines_deleted;
        if let Some(max) = r.max_diff_lines {
            if changed > max {
                return Ok(Gate::Reject(format!(
                    "the diff changes {changed} lines (max_diff_lines = {max})"
                )));
            }
        }
        let diff = self.git.diff(parent, &commit)?;
        for pattern in &r.forbid {
            // Validated when the spec was read.
            let Ok(re) = regex::Regex::new(pattern) else {
                continue;
            };
            let hit = diff
                .lines()
                // Added lines; `+++ b/path` headers are skipped, but an added line that itself
                // starts with "++" (say `++i;`) is checked.
                .filter(|l| {
                    l.starts_with('+')
                        && !l.starts_with("+++ b/")
                        && !l.starts_with("+++ /dev/null")
                })
                .find(|l| re.is_match(&l[1..]));
            if let Some(line) = hit {
                let shown = prompt_line(&line[1..]);
                return Ok(Gate::Reject(format!(
                    "an added line matches the forbidden pattern `{pattern}`: {shown}"
                )));
            }
        }
        if r.command.is_none() && r.llm.is_none() {
            return Ok(Gate::Pass);
        }
        let dir = self.paths.run_dir(&self.run.tag).join("prompts");
        std::fs::create_dir_all(&dir)
            .map_err(|e| EngineError::Io(format!("cannot create {}: {e}", dir.display())))?;
        let prompt_path = dir.join(format!("{}.review.md", rec.n));
        let instructions = r
            .instructions
            .as_ref()
            .and_then(|f| std::fs::read_to_string(self.git.root().join(f)).ok())
            .unwrap_or_default();
        let bounded = crate::propose::prompt::sanitize(&diff, 100_000);
        let fence = crate::propose::prompt::fence_for(&bounded);
        let answer_line = if r.command.is_some() {
            "Answer on the LAST line with `APPROVE` or `REJECT: <reason>`.\n"
        } else {
            ""
        };
        let forbidden = if r.forbid.is_empty() {
            String::new()
        } else {
            format!("\n- added lines must not match: {}", r.forbid.join(", "))
        };
        let text = format!(
            "# Review of experiment {n}\n\nA proposer made the change below to improve `{metric}` ({dir}). Decide before any compute is spent.\n{answer_line}\n## Rules\n\n- editable: {editable}\n- protected: {protected}{forbidden}\n\n## Instructions\n\n{instructions}\n\n## Description (untrusted)\n\n{desc}\n\n## Diff (untrusted)\n\n{fence}diff\n{bounded}\n{fence}\n",
            n = rec.n,
            metric = self.spec.verify.metric,
            dir = self.spec.verify.direction.as_str(),
            editable = self.spec.loop_.editable.join(", "),
            protected = self.spec.loop_.protected.join(", "),
            desc = crate::propose::prompt::sanitize(&rec.description, 500),
        );
        std::fs::write(&prompt_path, &text)
            .map_err(|e| EngineError::Io(format!("cannot write the review prompt: {e}")))?;
        let log_path = self
            .paths
            .run_dir(&self.run.tag)
            .join("logs")
            .join(format!("{}.review.log", rec.n));
        let Some(template) = r.command else {
            return Ok(self.review_http(rec, meter, &text, &log_path));
        };
        let command = template.replace(
            "{prompt_file}",
            &crate::propose::command::shell_quote(&prompt_path.to_string_lossy()),
        );
        let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> = std::env::vars_os()
            .filter(|(k, _)| self.env_allowed_for_candidate(k))
            .collect();
        env.push((
            "HONE_REVIEW_PROMPT".into(),
            prompt_path.clone().into_os_string(),
        ));
        env.push(("HONE_EXPERIMENT".into(), rec.n.to_string().into()));
        env.push(("HONE_JOB".into(), self.job_token(rec.n).into()));
        let req = ExecRequest {
            command,
            cwd: wt.to_path_buf(),
            env,
            timeout: Some(r.timeout),
            kill_grace: self.spec.verify.kill_grace,
            drain_timeout: Duration::from_secs(2),
            log_path,
            max_log_bytes: self.spec.verify.max_log_bytes,
            limits: self.spec.sandbox.limits(),
            wrapper: self.wrapper(wt, true, Role::Agent),
        };
        let running = exec::spawn(&req)
            .map_err(|e| EngineError::Setup(format!("cannot start the reviewer: {e}")))?;
        self.store
            .set_experiment_pid(self.run.id, rec.n, running.pid(), running.start_time())?;
        let mut last = String::new();
        let outcome = running
            .wait(
                &mut |line: &str| {
                    if !line.trim().is_empty() {
                        last = line.trim().to_string();
                    }
                },
                cancel,
            )
            .map_err(|e| EngineError::Setup(format!("reviewer failed: {e}")))?;
        exec::kill_orphans();
        // The reviewer looked at the worktree: put the candidate back exactly as committed.
        self.git.reset_worktree(wt, &commit)?;
        let verdict = prompt_line(&last);
        Ok(match outcome.exit {
            Exit::Code(0) if verdict.to_ascii_uppercase().starts_with("APPROVE") => Gate::Pass,
            Exit::Code(0) if verdict.to_ascii_uppercase().starts_with("REJECT") => {
                let why = verdict[6..].trim_start_matches([':', ' ']).trim();
                Gate::Reject(format!("the reviewer rejected it: {}", if why.is_empty() { "no reason given" } else { why }))
            }
            Exit::Code(0) => Gate::Reject(format!(
                "the reviewer gave no verdict (its last line must start with APPROVE or REJECT; it was `{verdict}`)"
            )),
            other => Gate::Reject(format!("the reviewer failed ({other:?}); a candidate is only verified when approved")),
        })
    }

    /// The HTTP reviewer's verdict on the review prompt `text`. Its spend is added to `rec`
    /// whatever the outcome; its raw answer goes to `log_path`.
    fn review_http(
        &mut self,
        rec: &mut ExperimentRecord,
        meter: &propose::Meter<'_>,
        text: &str,
        log_path: &Path,
    ) -> Gate {
        let (Some(kind), Some(llm)) = (self.spec.review.kind, self.spec.review.llm.clone()) else {
            return Gate::Pass;
        };
        let before = meter.spent();
        let mut client = crate::propose::chat::LlmClient::new(kind, llm);
        let outcome = crate::review::review(&mut client, meter, text);
        let after = meter.spent();
        rec.cost_usd += after.0 - before.0;
        rec.tokens += after.1.saturating_sub(before.1);
        let logged = match &outcome {
            Ok(v) => format!("{v:?}\n"),
            Err(e) => format!("{e:?}\n"),
        };
        let _ = std::fs::write(log_path, logged);
        match outcome {
            Ok(crate::review::Verdict::Approve(_)) => Gate::Pass,
            Ok(crate::review::Verdict::Reject(why)) => {
                Gate::Reject(format!("the reviewer rejected it: {why}"))
            }
            Err(crate::review::ReviewError::Failed(m)) => Gate::Reject(format!(
                "the reviewer failed ({m}); a candidate is only verified when approved"
            )),
            Err(crate::review::ReviewError::Fatal(m)) => {
                Gate::Stop(Stop::failed(format!("the reviewer: {m}")))
            }
            Err(crate::review::ReviewError::Budget(m)) => {
                Gate::Stop(Stop::done(format!("{m} (for the review)")))
            }
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

    /// Records an experiment interrupted by the user, and stops.
    fn abort(
        &mut self,
        rec: ExperimentRecord,
        t_start: Instant,
    ) -> Result<Option<Stop>, EngineError> {
        self.finish(
            rec,
            Status::Aborted,
            "interrupted by the user; its processes were killed".into(),
            t_start,
        )?;
        Ok(Some(Stop::resumable(
            "interrupted by the user (run `hone run` to resume)",
        )))
    }

    /// Re-measures the champion after every `retest_every` keeps and updates its value.
    fn maybe_retest(
        &mut self,
        n: u64,
        wt: &Path,
        commit: &str,
        cancel: &dyn Fn() -> bool,
    ) -> Result<(), EngineError> {
        let Some(every) = self.spec.verify.retest_every else {
            return Ok(());
        };
        let keeps = self
            .history
            .iter()
            .filter(|e| e.status() == Status::Keep)
            .count() as u64;
        if keeps == 0 || keeps % every != 0 {
            return Ok(());
        }
        let Some(mut rec) = self.history.iter().find(|e| e.n == n).cloned() else {
            return Ok(());
        };
        self.git.reset_worktree(wt, commit)?;
        let repeat = rec.runs.len() as u64;
        let message = match self.measure(&mut rec, wt, repeat, true, cancel)? {
            Measured::Value { value, .. } => {
                rec.runs.push(value);
                let before = rec.objective.unwrap_or(f64::NAN);
                rec.objective = Some(mean(&rec.runs));
                format!(
                    "re-tested the champion #{n}: {} -> {} over {} runs",
                    crate::report::fmt_metric(Some(before)),
                    crate::report::fmt_metric(rec.objective),
                    rec.runs.len()
                )
            }
            Measured::Failed { reason, .. } => {
                format!("re-test of the champion #{n} failed ({reason}); its value stands")
            }
            Measured::Cancelled => "re-test of the champion interrupted".to_string(),
        };
        self.store.put_experiment(self.run.id, &rec)?;
        if let Some(h) = self.history.iter_mut().find(|e| e.n == n) {
            *h = rec;
        }
        self.emit(Event::Note { message });
        Ok(())
    }

    /// One measurement of the worktree's code. `repeat` numbers the runs of the same code (0
    /// is the first): it names the logs and is the value of `seed_env`.
    ///
    /// With `[verify] evaluate`, `command` only trains or builds; then the protected files are
    /// restored from the run's start, what the first stage left is cut down to its declared
    /// `outputs` (or stripped of Python start-up hooks), and the objective is read only from
    /// the output of `evaluate`, run as a fresh process.
    fn measure(
        &mut self,
        rec: &mut ExperimentRecord,
        wt: &Path,
        repeat: u64,
        check_seal: bool,
        cancel: &dyn Fn() -> bool,
    ) -> Result<Measured, EngineError> {
        let n = rec.n;
        let logs = self.paths.run_dir(&self.run.tag).join("logs");
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
        self.measuring = Some(
            rec.candidate_commit
                .clone()
                .unwrap_or_else(|| self.run.base_commit.clone()),
        );
        let staged = self.run_stage(n, wt, &command, log_path, repeat, cancel);
        self.measuring = None;
        let (exit, failure, mut metrics) = staged?;
        if let Some(m) = self.stage_failure(exit, failure, wt, check_seal) {
            return Ok(m);
        }
        let metric = self.spec.verify.metric.clone();
        if let Some(evaluate) = self.spec.verify.evaluate.clone() {
            // The objective never comes from the stage the candidate's code controls.
            metrics.values.remove(&metric);
            let candidate = rec
                .candidate_commit
                .clone()
                .unwrap_or_else(|| self.run.base_commit.clone());
            if !self.git.worktree_link_ok(wt) {
                return Ok(Measured::Failed {
                    status: Status::Violation,
                    reason: "the training stage replaced the worktree's .git".into(),
                });
            }
            self.seal_for_evaluation(wt, &candidate)?;
            let log_path = logs.join(format!("{n}{suffix}.eval.log"));
            self.evaluating = true;
            let staged = self.run_stage(n, wt, &evaluate, log_path, repeat, cancel);
            self.evaluating = false;
            let (exit, failure, stage2) = staged?;
            if let Some(m) = self.stage_failure(exit, failure, wt, check_seal) {
                return Ok(match m {
                    Measured::Failed { status, reason } => Measured::Failed {
                        status,
                        reason: format!("evaluate {reason}"),
                    },
                    other => other,
                });
            }
            metrics.values.extend(stage2.values);
        }
        let printed = if self.spec.verify.evaluate.is_some() {
            "evaluate printed"
        } else {
            "printed"
        };
        match metrics.values.get(&metric).copied() {
            None => Ok(Measured::Failed {
                status: Status::Crash,
                reason: format!("exited 0 but {printed} no `{metric}`"),
            }),
            Some(v) if !v.is_finite() => Ok(Measured::Failed {
                status: Status::Crash,
                reason: format!("`{metric}` is {v}"),
            }),
            Some(value) => Ok(Measured::Value { value, metrics }),
        }
    }

    /// Runs one verifier stage in the worktree, in its own process group.
    fn run_stage(
        &mut self,
        n: u64,
        wt: &Path,
        command: &str,
        log_path: PathBuf,
        repeat: u64,
        cancel: &dyn Fn() -> bool,
    ) -> Result<(Exit, Option<Failure>, crate::verify::metrics::MetricSet), EngineError> {
        let mut env = self.candidate_env(n);
        if let Some(name) = &self.spec.verify.seed_env {
            env.push((name.into(), repeat.to_string().into()));
        }
        if self.evaluating {
            // The sealed evaluator loads nothing from the user's site-packages or a startup
            // file, and writes no bytecode a later stage could find.
            env.retain(|(k, _)| k != "PYTHONPATH" && k != "PYTHONSTARTUP");
            for (k, v) in [("PYTHONNOUSERSITE", "1"), ("PYTHONDONTWRITEBYTECODE", "1")] {
                env.push((k.into(), v.into()));
            }
        }
        env.push(("HONE_REPEAT".into(), repeat.to_string().into()));
        let req = ExecRequest {
            command: command.to_string(),
            cwd: wt.to_path_buf(),
            env,
            timeout: Some(self.spec.verify.timeout),
            kill_grace: self.spec.verify.kill_grace,
            drain_timeout: Duration::from_secs(2),
            log_path,
            max_log_bytes: self.spec.verify.max_log_bytes,
            limits: self.spec.sandbox.limits(),
            wrapper: self.wrapper(wt, self.spec.sandbox.network, Role::Verifier),
        };
        let mut reader = MetricReader::with_regex(
            &self.spec.verify.metric,
            self.spec.verify.metric_regex.clone(),
        )
        .map_err(|e| EngineError::Setup(e.to_string()))?;
        let (exit, failure) =
            self.execute(n, &req, "verifier", &mut |line| reader.feed(line), cancel)?;
        Ok((exit, failure, reader.finish()))
    }

    /// Runs one verification command (a verifier stage or the holdout) where `[exec]` says:
    /// a process group here, or a SLURM job. Returns the exit and, for a job that ended for a
    /// reason outside the command (cancelled by someone else, node failure...), that reason.
    fn execute(
        &mut self,
        n: u64,
        req: &ExecRequest,
        what: &str,
        on_line: &mut dyn FnMut(&str),
        cancel: &dyn Fn() -> bool,
    ) -> Result<(Exit, Option<Failure>), EngineError> {
        if self.queue.is_some() {
            return self.execute_remote(n, req, what, on_line, cancel);
        }
        if let Some(dir) = shared_run_dir(&self.spec, self.git.root(), &self.run.tag) {
            let job_dir = dir.join("jobs");
            let name = format!("hone-{}-{n}", self.run.tag);
            // The job's environment is what SLURM gives it (its allocation, `--gres` devices)
            // plus what hone itself sets: hone's own environment (say, the SLURM_* variables
            // of an allocation hone runs in) never reaches it.
            let mut req = req.clone();
            req.env
                .retain(|(k, _)| self.travels_to_jobs(&k.to_string_lossy()));
            let req = &req;
            let job = exec::slurm::submit(req, &self.spec.exec.slurm, &job_dir, &name)
                .map_err(|e| EngineError::Setup(format!("cannot submit the {what} job: {e}")))?;
            let (store, run_id) = (&self.store, self.run.id);
            let outcome = job
                .wait(
                    on_line,
                    &mut |id| {
                        // The record of the job id is what lets a later hone cancel it.
                        let _ = store.append_event(
                            run_id,
                            Some(n),
                            "slurm_job",
                            &serde_json::json!({ "job": id }),
                        );
                    },
                    cancel,
                )
                .map_err(|e| EngineError::Setup(format!("lost the {what} job: {e}")))?;
            return Ok((outcome.exit, outcome.failure.map(|f| (Status::Crash, f))));
        }
        let running = exec::spawn(req)
            .map_err(|e| EngineError::Setup(format!("cannot start the {what}: {e}")))?;
        self.store
            .set_experiment_pid(self.run.id, n, running.pid(), running.start_time())?;
        let outcome = running
            .wait(on_line, cancel)
            .map_err(|e| EngineError::Setup(format!("{what} failed: {e}")))?;
        // Anything the stage started that escaped its process group dies with the stage.
        exec::kill_orphans();
        Ok((outcome.exit, None))
    }

    /// Whether a variable of a verifier's environment goes to a SLURM job or a remote worker,
    /// which start from their own environment: only what hone itself sets does (`HONE_*`,
    /// `[verify] env`, the seed variable, the slot's variables, the sealed evaluator's Python
    /// settings).
    fn travels_to_jobs(&self, k: &str) -> bool {
        k.starts_with("HONE_")
            || self.spec.verify.env.iter().any(|(name, _)| name == k)
            || self.spec.verify.seed_env.as_deref() == Some(k)
            || self.slot_env.iter().any(|(name, _)| name == k)
            || (self.evaluating && matches!(k, "PYTHONNOUSERSITE" | "PYTHONDONTWRITEBYTECODE"))
    }

    /// The run's name in a shared store: its repository's key and its tag (with remote
    /// workers, the repository is `[exec] remote` unless `[store] repo` says otherwise).
    fn run_key(&self) -> String {
        format!("{}#{}", self.store.repo(), self.run.tag)
    }

    /// Runs a verification on a remote worker: pushes the checked-out commit to the shared
    /// remote, posts the job, and waits for its result (see `crate::queue`).
    fn execute_remote(
        &mut self,
        n: u64,
        req: &ExecRequest,
        what: &str,
        on_line: &mut dyn FnMut(&str),
        cancel: &dyn Fn() -> bool,
    ) -> Result<(Exit, Option<Failure>), EngineError> {
        let remote = self.spec.exec.remote.clone().unwrap_or_default();
        let commit = match self.measuring.clone() {
            Some(c) => c,
            // The holdout runs in a worktree checked out at the commit it measures.
            None => self
                .git
                .run_in(&req.cwd, &["rev-parse", "HEAD"])?
                .trim()
                .to_string(),
        };
        let git_ref = archive_ref(&self.run.tag, n);
        self.git
            .run(&[
                "push",
                "-q",
                "--force",
                &remote,
                &format!("{commit}:{git_ref}"),
            ])
            .map_err(|e| {
                EngineError::Setup(format!(
                    "cannot push the candidate to [exec] remote `{remote}` for the workers: {e}"
                ))
            })?;
        // The worker's own environment is the base; only what hone itself sets travels.
        let mut env: Vec<(String, String)> = req
            .env
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })
            .filter(|(k, _)| self.travels_to_jobs(k))
            .collect();
        env.sort();
        let job = crate::queue::JobSpec {
            remote: remote.clone(),
            git_ref,
            commit,
            command: req.command.clone(),
            env,
            timeout_ms: req
                .timeout
                .map(|t| t.as_millis() as u64)
                .unwrap_or(u64::MAX / 2),
            kill_grace_ms: req.kill_grace.as_millis() as u64,
            max_log_bytes: req.max_log_bytes,
        };
        let key = self.run_key();
        let db = |e: crate::queue::QueueError| EngineError::Setup(format!("{what}: {e}"));
        let Some(queue) = self.queue.as_mut() else {
            return Err(EngineError::Setup("no queue".into()));
        };
        let id = queue.submit(&key, n, &job).map_err(db)?;
        let posted = Instant::now();
        let mut waiting_noted = false;
        let result = loop {
            let Some(queue) = self.queue.as_mut() else {
                return Err(EngineError::Setup("no queue".into()));
            };
            if cancel() {
                queue.cancel(id).map_err(db)?;
                return Ok((Exit::Cancelled, None));
            }
            match queue.status(id).map_err(db)? {
                crate::queue::JobStatus::Done(r) => break r,
                crate::queue::JobStatus::Cancelled => {
                    return Ok((
                        Exit::Code(-1),
                        Some((
                            Status::Crash,
                            format!("job {id} was cancelled in the store by someone else"),
                        )),
                    ))
                }
                crate::queue::JobStatus::Queued
                    if !waiting_noted && posted.elapsed() > Duration::from_secs(10) =>
                {
                    waiting_noted = true;
                    self.emit(Event::Note {
                        message: format!(
                            "experiment {n}: waiting for a worker to claim job {id}; start one with `hone worker --store <url> --repo {remote}`"
                        ),
                    });
                }
                _ => {}
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        if let Some(parent) = req.log_path.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        std::fs::write(&req.log_path, &result.log).map_err(|e| {
            EngineError::Io(format!("cannot write {}: {e}", req.log_path.display()))
        })?;
        for line in result.log.lines() {
            on_line(line);
        }
        if let Some(f) = result.failure {
            return Ok((Exit::Code(-1), Some((Status::Crash, f))));
        }
        if let Some(p) = result
            .modified
            .iter()
            .find(|p| matches_any(&self.spec.loop_.protected, p))
        {
            return Ok((
                Exit::Code(0),
                Some((
                    Status::Violation,
                    format!("protected file `{p}` was modified while the verifier ran on worker {}; the measurement is void", result.worker),
                )),
            ));
        }
        let exit = match result.exit.as_str() {
            "code" => Exit::Code(result.value),
            "signal" => Exit::Signal(result.value),
            "timeout" => Exit::TimedOut,
            other => {
                return Ok((
                    Exit::Code(-1),
                    Some((
                        Status::Crash,
                        format!("worker {} reported `{other}`", result.worker),
                    )),
                ))
            }
        };
        Ok((exit, None))
    }

    /// Why a stage's run does not count, if it does not.
    fn stage_failure(
        &self,
        exit: Exit,
        failure: Option<Failure>,
        wt: &Path,
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
        if let Some((status, reason)) = failure {
            return failed(status, reason);
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
            Exit::Code(c) if c != 0 => failed(Status::Crash, format!("exited with status {c}")),
            Exit::Code(_) => None,
        }
    }

    /// Prepares the worktree for the sealed evaluator: every tracked file exactly as the
    /// candidate committed it, the protected files byte-for-byte from the run's start, and of
    /// what the training stage wrote, only its declared `outputs`.
    fn seal_for_evaluation(&self, wt: &Path, candidate: &str) -> Result<(), EngineError> {
        self.git
            .run_in(wt, &["checkout", "--force", candidate, "--", "."])?;
        let sealed: Vec<&str> = self.seals.protected.keys().map(String::as_str).collect();
        if !sealed.is_empty() {
            let mut args = vec!["checkout", "--force", self.run.base_commit.as_str(), "--"];
            args.extend(sealed);
            self.git.run_in(wt, &args)?;
        }
        let mut args = vec!["clean".to_string(), "-ffdxq".to_string()];
        for o in &self.spec.verify.outputs {
            args.push("-e".into());
            args.push(o.clone());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.git.run_in(wt, &args)?;
        Ok(())
    }

    /// Commits what the proposer left in the worktree, records the candidate commit, then
    /// writes its archive ref (in that order, so a crash between the two is repaired on resume).
    fn archive(
        &mut self,
        rec: &mut ExperimentRecord,
        wt: &Path,
        parent: &str,
    ) -> Result<Option<crate::workspace::Snapshot>, EngineError> {
        let title = if rec.description.is_empty() {
            "candidate"
        } else {
            &rec.description
        };
        let message = format!(
            "hone #{}: {title}\n\nHone-Run: {}\nHone-Experiment: {}\n",
            rec.n, self.run.tag, rec.n
        );
        let Some(snap) = self.git.snapshot(wt, parent, &message)? else {
            return Ok(None);
        };
        rec.files_changed = snap.changes.len() as u64;
        rec.lines_added = snap.lines_added();
        rec.lines_deleted = snap.lines_deleted();
        rec.candidate_commit = Some(snap.commit.clone());
        rec.tree = Some(snap.tree.clone());
        self.store.put_experiment(self.run.id, rec)?;
        self.git
            .update_ref(&archive_ref(&self.run.tag, rec.n), &snap.commit, None)?;
        Ok(Some(snap))
    }

    /// Records an experiment's outcome and tells subscribers.
    fn finish(
        &mut self,
        mut rec: ExperimentRecord,
        status: Status,
        reason: String,
        t_start: Instant,
    ) -> Result<(), EngineError> {
        rec.status = Some(status);
        rec.reason = reason;
        rec.finished_at = Some(now());
        rec.total_ms = t_start.elapsed().as_millis() as u64;
        self.store.put_experiment(self.run.id, &rec)?;
        match self.history.last_mut() {
            Some(last) if last.n == rec.n => *last = rec.clone(),
            _ => self.history.push(rec.clone()),
        }
        let best = best_experiment(&self.history).and_then(|b| b.objective);
        let baseline = self
            .history
            .iter()
            .find(|e| e.status() == Status::Baseline)
            .and_then(|e| e.objective);
        self.emit(Event::ExperimentFinished {
            record: Box::new(rec),
            best,
            baseline,
        });
        // Outer loop: results, segment ends, the portfolio; then their record.
        if let Some(last) = self.history.last().cloned() {
            self.outer.after(&last, &self.history);
        }
        self.flush_outer()
    }

    /// Stores the mechanisms' recorded hook calls and emits their notable changes.
    fn flush_outer(&mut self) -> Result<(), EngineError> {
        let calls = self.outer.take_calls();
        self.store.put_mechanism_calls(self.run.id, &calls)?;
        for (n, message) in self.outer.take_events() {
            self.emit(Event::Outer { n, message });
        }
        Ok(())
    }

    /// The mechanisms' filters on a proposal that is not the knobs optimizer's (those are
    /// filtered, and resampled, while proposing). Returns why it is rejected, if it is.
    fn outer_filter(
        &mut self,
        rec: &ExperimentRecord,
        parent: &str,
        history: &[ExperimentRecord],
    ) -> Result<Option<String>, EngineError> {
        if self.outer.is_empty() || self.proposer.resamples() {
            return Ok(None);
        }
        let Some(commit) = rec.candidate_commit.as_deref() else {
            return Ok(None);
        };
        let diff = self.git.diff(parent, commit)?;
        let config: Option<crate::propose::knobs::Config> = rec
            .config
            .as_ref()
            .and_then(|c| serde_json::from_value(c.clone()).ok());
        Ok(self
            .outer
            .filter_diff(rec.n, &rec.description, config.as_ref(), &diff, history))
    }

    /// Why a set of changes breaks the scope rules, if it does.
    fn scope_violation(&self, changes: &[crate::workspace::Change]) -> Option<String> {
        let l = &self.spec.loop_;
        for c in changes {
            if matches_any(&l.protected, &c.path) {
                return Some(format!("changed protected file `{}`", c.path));
            }
            if matches_any(&l.pinned, &c.path) {
                return Some(format!("changed pinned input `{}`", c.path));
            }
            if !matches_any(&l.editable, &c.path) {
                return Some(format!(
                    "changed `{}`, which is not editable (editable: {})",
                    c.path,
                    l.editable.join(", ")
                ));
            }
        }
        None
    }

    /// The first protected file in the worktree whose content differs from the start.
    fn sealed_changed(&self, wt: &Path) -> Option<String> {
        if self.seals.protected.is_empty() {
            return None;
        }
        let paths: Vec<String> = self.seals.protected.keys().cloned().collect();
        match hash_paths(wt, &paths) {
            Ok(now) => first_difference(&self.seals.protected, &now),
            Err(e) => Some(e.to_string()),
        }
    }
}

/// Whose process a sandbox is for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Agent,
    Verifier,
    Holdout,
}

/// A candidate that passed the gate, waiting for its verifier.
struct Candidate {
    rec: ExperimentRecord,
    t_start: Instant,
    /// The best when it was proposed (`None`: this is the baseline).
    best: Option<ExperimentRecord>,
    /// The commit it was made on (the best's).
    parent: String,
}

/// How the first half of an experiment ended.
enum Prepared {
    /// Recorded already (invalid, rejected, a violation...); `Some`: the run must stop.
    Done(Option<Stop>),
    Ready(Box<Candidate>),
}

/// What verifying a candidate gave, before any decision.
enum Verified {
    Cancelled,
    Failed(Status, String),
    /// Its runs are in its record; a constraint it broke, a repeat that failed.
    Values {
        broken: Option<String>,
        failed: Option<Failure>,
    },
}

/// One run of the verifier, classified.
enum Measured {
    Value {
        value: f64,
        metrics: crate::verify::metrics::MetricSet,
    },
    Failed {
        status: Status,
        reason: String,
    },
    Cancelled,
}

/// Why the baseline is what it is, with the noise it showed.
/// What the review gate decided.
enum Gate {
    Pass,
    Reject(String),
    /// The candidate cannot be reviewed and the run must stop (budget, a broken reviewer).
    Stop(Stop),
}

fn baseline_reason(runs: &[f64], sigma: Option<f64>, broken: Option<&str>) -> String {
    let mut r = "the unmodified project".to_string();
    if runs.len() > 1 {
        let s = sigma
            .map(|s| format!("{s:.6}"))
            .unwrap_or_else(|| "?".into());
        r.push_str(&format!(": mean of {} runs, sigma {s}", runs.len()));
    }
    if let Some(b) = broken {
        r.push_str(&format!(" (constraint not met: {b})"));
    }
    r
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

/// One line of untrusted text, cleaned and bounded for a reason string.
fn prompt_line(line: &str) -> String {
    crate::propose::prompt::sanitize(line, 200).replace('\n', " ")
}

/// A changed path that is a symlink pointing outside the worktree, if any.
fn escaping_symlink(wt: &Path, changes: &[crate::workspace::Change]) -> Option<String> {
    let root = std::fs::canonicalize(wt).ok()?;
    changes.iter().find_map(|c| {
        let p = wt.join(&c.path);
        let meta = std::fs::symlink_metadata(&p).ok()?;
        if !meta.file_type().is_symlink() {
            return None;
        }
        let target = std::fs::read_link(&p).ok()?;
        let resolved = p.parent()?.join(&target);
        // Resolve what exists; a dangling link is judged by its lexical path.
        let inside = match std::fs::canonicalize(&resolved) {
            Ok(r) => r.starts_with(&root),
            Err(_) => {
                !target.is_absolute()
                    && !target
                        .components()
                        .any(|c| c == std::path::Component::ParentDir)
            }
        };
        (!inside).then(|| {
            format!(
                "`{}` is a symlink to `{}`, outside the worktree",
                c.path,
                target.display()
            )
        })
    })
}

/// The last `n` lines of a log file, indented, for error messages.
fn log_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = &lines[lines.len().saturating_sub(n)..];
    if tail.is_empty() {
        "    (the log is empty)".into()
    } else {
        tail.iter()
            .map(|l| format!("    {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn pinned_message(changed: &str) -> String {
    format!(
        "pinned input `{changed}` changed since the run started; restore it and run `hone run` again, or start a new run with `hone run --new`"
    )
}

fn unique_tag(store: &Store, git: &Git) -> Result<String, EngineError> {
    let base = today_tag();
    let mut tag = base.clone();
    let mut i = 2;
    while store.run_by_tag(&tag)?.is_some()
        || git.ref_target(&branch_ref(&tag))?.is_some()
        || !git.refs_under(&format!("refs/hone/{tag}/"))?.is_empty()
    {
        tag = format!("{base}-{i}");
        i += 1;
    }
    Ok(tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_keys_carry_no_credentials() {
        assert_eq!(
            without_credentials("https://me:ghp_secret@github.com/lab/p.git"),
            "https://github.com/lab/p.git"
        );
        assert_eq!(
            without_credentials("git@github.com:lab/p.git"),
            "git@github.com:lab/p.git"
        );
        assert_eq!(
            without_credentials("ssh://git@host/a@b/p.git"),
            "ssh://host/a@b/p.git"
        );
    }
}
