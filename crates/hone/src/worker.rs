//! `hone worker`: a process on any host that takes verifications from the shared queue
//! (see [`crate::queue`]), checks the candidate out of the shared git remote into a local
//! worktree, runs the verifier there under the job's timeout, and posts the result.
//!
//! While a verifier runs, the worker renews its lease; if the renewal says the job is no
//! longer its own (cancelled by the coordinator, or taken over after a lost lease), it kills
//! the verifier's process group at once. A worker killed outright leaves its verifier's pid
//! in `<dir>/running`; the next worker started on the same directory kills that group.

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::exec::{self, ExecRequest, Exit};
use crate::queue::{Claimed, JobResult, Queue, QueueError};
use crate::workspace::Git;

/// How a worker was started.
#[derive(Clone, Debug)]
pub struct WorkerOptions {
    /// The PostgreSQL store (`postgres://...`).
    pub store_url: String,
    /// The key jobs and results are signed with (the coordinator's `HONE_QUEUE_KEY`).
    pub key: crate::queue::QueueKey,
    /// The shared git remote the coordinator pushes candidates to.
    pub remote: String,
    /// The worker's own directory: a clone, a worktree and logs.
    pub dir: PathBuf,
    /// The slot's name (say, the GPU it owns).
    pub slot: String,
    /// Variables this slot adds to every verifier (`CUDA_VISIBLE_DEVICES=3`).
    pub env: Vec<(String, String)>,
    /// How long a claim lasts without a heartbeat.
    pub lease: Duration,
    /// Stop after this many jobs (`None`: run until stopped).
    pub max_jobs: Option<u64>,
}

/// What a worker reports as it goes.
#[derive(Clone, Debug)]
pub enum WorkerEvent {
    Ready {
        id: String,
    },
    Claimed {
        job: i64,
        run: String,
        n: u64,
        attempt: i32,
    },
    Finished {
        job: i64,
        exit: String,
        accepted: bool,
    },
    Lost {
        job: i64,
    },
    /// The worker could not run the job (its own problem) and gave it back to the queue.
    Released {
        job: i64,
        why: String,
    },
    KilledStale {
        pid: u32,
    },
    /// A job not signed with this worker's key: marked refused, not run.
    Refused {
        job: i64,
        why: String,
    },
    /// The job asked for bubblewrap, which cannot run here, and allowed running without it
    /// (`[sandbox] required = false`): its verifier ran uncontained.
    Uncontained {
        job: i64,
        why: String,
    },
}

/// Why a worker stopped.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error(transparent)]
    Queue(#[from] QueueError),
    #[error("{0}")]
    Setup(String),
}

/// Setup failures in a row after which a worker stops.
const MAX_SETUP_FAILURES: u32 = 3;

/// An exclusive lock on a worker directory, held while the worker runs.
fn lock_dir(dir: &Path) -> Result<std::fs::File, WorkerError> {
    use std::os::unix::io::AsRawFd;
    let path = dir.join("lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(setup("cannot create the worker directory's lock"))?;
    // SAFETY: flock on a valid, open file descriptor owned by `file`.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(WorkerError::Setup(format!(
            "another worker uses {}; give each worker its own --dir (or --slot)",
            dir.display()
        )));
    }
    Ok(file)
}

/// This host's name, as workers and coordinators report it.
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

fn setup<E: std::fmt::Display>(what: &str) -> impl Fn(E) -> WorkerError + '_ {
    move |e| WorkerError::Setup(format!("{what}: {e}"))
}

/// Registers what git (fetching candidates) must not inherit: the store's URL and password,
/// the queue's key (see [`crate::util::withhold`]).
fn withhold_secrets(opts: &WorkerOptions) {
    crate::util::withhold(&opts.store_url);
    if let Some(pw) = crate::util::url_password(&opts.store_url) {
        crate::util::withhold(pw);
    }
    for name in [crate::queue::KEY_ENV, "PGPASSWORD"] {
        if let Ok(v) = std::env::var(name) {
            crate::util::withhold(&v);
        }
    }
}

/// Runs a worker until `stop()` or `max_jobs`.
pub fn run(
    opts: &WorkerOptions,
    stop: &dyn Fn() -> bool,
    on_event: &mut dyn FnMut(&WorkerEvent),
) -> Result<(), WorkerError> {
    withhold_secrets(opts);
    std::fs::create_dir_all(&opts.dir).map_err(setup("cannot create the worker directory"))?;
    // One worker per directory: two would share (and reset) one worktree, and kill each
    // other's verifier as "left by a previous worker".
    let _dir_lock = lock_dir(&opts.dir)?;
    // An escaped descendant of a verifier (`setsid`) comes back to the worker, to be killed
    // after its job (without bubblewrap; with it, the sandbox's PID namespace ends it).
    exec::become_subreaper();
    let running_file = opts.dir.join("running");
    kill_left_behind(&running_file, on_event);
    let git = worker_clone(opts)?;
    let id = format!("{}:{}:{}", host_name(), opts.slot, std::process::id());
    let queue = RefCell::new(Queue::connect(&opts.store_url)?.with_key(opts.key.clone()));
    queue
        .borrow_mut()
        .register_worker(&id, &host_name(), &opts.slot, opts.lease)?;
    on_event(&WorkerEvent::Ready { id: id.clone() });
    let probe = std::cell::OnceCell::new();
    let mut done = 0u64;
    let mut setup_failures = 0u32;
    let mut last_beat = Instant::now();
    let outcome = loop {
        if stop() || opts.max_jobs.is_some_and(|m| done >= m) {
            break Ok(());
        }
        let claimed = match claim_next(&queue, &id, opts, on_event) {
            Ok(c) => c,
            Err(e) => break Err(e.into()),
        };
        let Some(job) = claimed else {
            if last_beat.elapsed() >= opts.lease / 3 {
                queue.borrow_mut().heartbeat(&id, None, opts.lease)?;
                last_beat = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(200));
            continue;
        };
        on_event(&WorkerEvent::Claimed {
            job: job.id,
            run: job.run_key.clone(),
            n: job.n,
            attempt: job.attempt,
        });
        let here = Here {
            opts,
            git: &git,
            id: &id,
            probe: &probe,
        };
        let result = verify(&here, &job, &queue, &running_file, stop, on_event);
        let _ = std::fs::remove_file(&running_file);
        match result {
            Ok(Some(r)) => {
                let accepted = queue.borrow_mut().finish(&job, &r)?;
                on_event(&WorkerEvent::Finished {
                    job: job.id,
                    exit: r.exit.clone(),
                    accepted,
                });
                done += 1;
            }
            Ok(None) => on_event(&WorkerEvent::Lost { job: job.id }),
            Err(e) => {
                // The worker's own problem (fetch, checkout, spawn): the job goes back to the
                // queue for another worker, and this one stops after a few in a row rather
                // than failing every job it could claim.
                let why = release(&queue, &id, &job, &e, on_event)?;
                setup_failures += 1;
                if setup_failures >= MAX_SETUP_FAILURES {
                    break Err(WorkerError::Setup(format!(
                        "{MAX_SETUP_FAILURES} jobs in a row could not be run here (last: {why}); fix this worker (its --repo, git credentials, disk) and start it again"
                    )));
                }
                std::thread::sleep(Duration::from_secs(1 << setup_failures.min(5)));
                continue;
            }
        }
        setup_failures = 0;
        last_beat = Instant::now();
    };
    let _ = queue.borrow_mut().unregister_worker(&id);
    outcome
}

/// Claims the next job of the worker's remote; a job not signed with its key is said, and
/// passed over as if there were none.
fn claim_next(
    queue: &RefCell<Queue>,
    id: &str,
    opts: &WorkerOptions,
    on_event: &mut dyn FnMut(&WorkerEvent),
) -> Result<Option<Claimed>, QueueError> {
    match queue.borrow_mut().claim(id, &opts.remote, opts.lease) {
        Err(e @ QueueError::UnsignedJob { job, .. }) => {
            on_event(&WorkerEvent::Refused {
                job,
                why: e.to_string(),
            });
            Ok(None)
        }
        claimed => claimed,
    }
}

/// Kills the verifier a worker killed outright left running (its pid in `running_file`).
fn kill_left_behind(running_file: &Path, on_event: &mut dyn FnMut(&WorkerEvent)) {
    if let Some((pid, start)) = std::fs::read_to_string(running_file).ok().and_then(|s| {
        let mut it = s.split_whitespace();
        Some((
            it.next()?.parse().ok()?,
            it.next().and_then(|t| t.parse().ok()),
        ))
    }) {
        if exec::kill_stale_group(pid, start) {
            on_event(&WorkerEvent::KilledStale { pid });
        }
        let _ = std::fs::remove_file(running_file);
    }
}

/// The worker's own clone (`<dir>/repo`), made empty the first time; candidates are fetched
/// into it.
fn worker_clone(opts: &WorkerOptions) -> Result<Git, WorkerError> {
    let repo_dir = opts.dir.join("repo");
    if !repo_dir.join(".git").exists() {
        std::fs::create_dir_all(&repo_dir).map_err(setup("cannot create the clone"))?;
        crate::workspace::run_git(&repo_dir, &["init", "-q"])
            .map_err(setup("git init of the worker's clone failed"))?;
    }
    // Its objects hold candidates' files; `--dir` itself is the user's choice, left as it is.
    crate::util::owner_only(&repo_dir);
    let git = Git::discover(&repo_dir).map_err(setup("the worker's clone"))?;
    // A sandbox's temporary directory lives in the checkout, under `.hone/`.
    git.ensure_excluded(".hone/")
        .map_err(setup("cannot exclude .hone/ in the worker's clone"))?;
    Ok(git)
}

/// Gives a job this worker could not run back to the queue; returns why.
fn release(
    queue: &RefCell<Queue>,
    id: &str,
    job: &Claimed,
    e: &WorkerError,
    on_event: &mut dyn FnMut(&WorkerEvent),
) -> Result<String, WorkerError> {
    let why = e.to_string();
    queue.borrow_mut().release(job.id, id, job.attempt, &why)?;
    on_event(&WorkerEvent::Released {
        job: job.id,
        why: why.clone(),
    });
    Ok(why)
}

/// What a worker knows of itself while it runs jobs.
struct Here<'a> {
    opts: &'a WorkerOptions,
    git: &'a Git,
    id: &'a str,
    /// Whether bubblewrap runs here, found out the first time a job asks for it.
    probe: &'a std::cell::OnceCell<Result<(), String>>,
}

/// Runs one job; `None` when the job stopped being this worker's while it ran.
fn verify(
    here: &Here<'_>,
    job: &Claimed,
    queue: &RefCell<Queue>,
    running_file: &Path,
    stop: &dyn Fn() -> bool,
    on_event: &mut dyn FnMut(&WorkerEvent),
) -> Result<Option<JobResult>, WorkerError> {
    let (opts, git, id) = (here.opts, here.git, here.id);
    let spec = &job.spec;
    let wt = check_out(opts, git, job)?;
    let logs = opts.dir.join("logs");
    std::fs::create_dir_all(&logs).map_err(setup("cannot create the log directory"))?;
    let log_path = logs.join(format!("{}.{}.log", job.id, job.attempt));
    let env = verifier_env(opts, job);
    let (wrapper, uncontained) = match contain(here, &spec.sandbox, &wt)? {
        Contained::Wrapped(wrapper) => (wrapper, None),
        Contained::Not => (Vec::new(), None),
        Contained::Unable(why) => {
            on_event(&WorkerEvent::Uncontained {
                job: job.id,
                why: why.clone(),
            });
            (Vec::new(), Some(why))
        }
    };
    let req = ExecRequest {
        command: spec.command.clone(),
        cwd: wt.clone(),
        env,
        timeout: Some(Duration::from_millis(spec.timeout_ms)),
        kill_grace: Duration::from_millis(spec.kill_grace_ms),
        drain_timeout: Duration::from_secs(2),
        log_path: log_path.clone(),
        max_log_bytes: spec.max_log_bytes,
        limits: spec.sandbox.limits,
        wrapper,
    };
    // The fetch and checkout may have taken a while: make sure the job is still this
    // worker's before spending compute on it.
    if !queue
        .borrow_mut()
        .heartbeat(id, Some((job.id, job.attempt)), opts.lease)?
    {
        return Ok(None);
    }
    let running = exec::spawn(&req).map_err(setup("cannot start the verifier"))?;
    record_running(running_file, &running);
    let lost = Cell::new(false);
    let last = Cell::new(Instant::now());
    let cancel = || {
        if last.get().elapsed() >= opts.lease / 3 {
            last.set(Instant::now());
            match queue
                .borrow_mut()
                .heartbeat(id, Some((job.id, job.attempt)), opts.lease)
            {
                Ok(true) => {}
                // A store that cannot be reached is not a reason to kill a verification: the
                // lease decides, and a result that comes too late is refused.
                Err(_) => {}
                Ok(false) => lost.set(true),
            }
        }
        lost.get() || stop()
    };
    let outcome = running
        .wait(&mut |_| {}, &cancel)
        .map_err(setup("lost the verifier"))?;
    exec::kill_orphans();
    if lost.get() {
        return Ok(None);
    }
    Ok(job_result(git, &wt, &log_path, id, job, outcome.exit)
        .map(|r| JobResult { uncontained, ..r }))
}

/// How a job's command is contained here.
enum Contained {
    /// Under bubblewrap: the program prefix.
    Wrapped(Vec<std::ffi::OsString>),
    /// The job asked for no sandbox.
    Not,
    /// The job asked for one, bubblewrap cannot run here, and the job allows running without.
    Unable(String),
}

/// The sandbox `sandbox` asks for around a command in the checkout `wt`, as hone makes one
/// for a local verifier: the filesystem read-only but the checkout (unless the job only
/// reads) and a private temporary directory inside it (`.hone/tmp`), the worker's logs and
/// the holdout's hidden data hidden, its own PID namespace (the worker's command line, which
/// names the store, out of sight), and without the network when the job says so. An error when bubblewrap cannot
/// run here and the job requires it: the job goes back to the queue.
fn contain(
    here: &Here<'_>,
    sandbox: &crate::queue::JobSandbox,
    wt: &Path,
) -> Result<Contained, WorkerError> {
    if !sandbox.bwrap {
        return Ok(Contained::Not);
    }
    if let Err(why) = here.probe.get_or_init(crate::sandbox::probe) {
        if sandbox.required {
            return Err(WorkerError::Setup(format!(
                "the run asks for [sandbox] kind = \"bwrap\" and {why}"
            )));
        }
        return Ok(Contained::Unable(why.clone()));
    }
    let tmp = crate::sandbox::scratch_dir(wt);
    let mut hide = vec![here.opts.dir.join("logs")];
    hide.extend(sandbox.hide.iter().map(|p| wt.join(p)));
    let wrapper = crate::sandbox::Confinement {
        worktree: wt,
        writable: sandbox.writable,
        tmp: &tmp,
        network: sandbox.network,
        hide: &hide,
        expose: &[],
        home: None,
        mask_sockets: true,
        start_in: None,
    }
    .wrapper();
    Ok(Contained::Wrapped(wrapper))
}

/// Fetches the candidate from the shared remote and checks it out in `<dir>/worktree`.
fn check_out(opts: &WorkerOptions, git: &Git, job: &Claimed) -> Result<PathBuf, WorkerError> {
    let spec = &job.spec;
    let refspec = format!("+{}:{}", spec.git_ref, spec.git_ref);
    git.run(&["fetch", "-q", "--no-tags", &opts.remote, &refspec])
        .map_err(setup("cannot fetch the candidate from the shared remote"))?;
    let wt = opts.dir.join("worktree");
    git.prepare_worktree(&wt, &spec.commit)
        .map_err(setup("cannot check the candidate out"))?;
    // Candidates' code runs in it: what it leaves there (a setuid program) is out of other
    // users' reach.
    crate::util::owner_only(&wt);
    Ok(wt)
}

/// The verifier's environment: the worker's own less hone's settings (`HONE_*`) and any
/// variable that holds the queue's key or the store's URL under another name (the coordinator's `[store] url_env`,
/// sourced on this host too), `PATH` with its absolute entries only (see
/// `util::passed_on`), then the slot's variables and the job's.
fn verifier_env(
    opts: &WorkerOptions,
    job: &Claimed,
) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> = std::env::vars_os()
        .filter(|(k, v)| {
            let (k, v) = (k.to_string_lossy(), v.to_string_lossy());
            !k.starts_with("HONE_")
                // libpq's own: a password, or the files that hold one.
                && !matches!(k.as_ref(), "PGPASSWORD" | "PGPASSFILE" | "PGSERVICEFILE")
                && !crate::util::reveals_url(&v, &opts.store_url)
                && !crate::queue::reveals_key(&v)
        })
        .map(crate::util::passed_on)
        .collect();
    for (k, v) in opts.env.iter().chain(&job.spec.env) {
        env.retain(|(name, _)| name.to_string_lossy() != k.as_str());
        env.push((k.into(), v.into()));
    }
    env
}

/// Writes the verifier's pid and start time to `running_file`, for the next worker to kill
/// should this one be killed outright.
fn record_running(running_file: &Path, running: &exec::Running) {
    let _ = std::fs::write(
        running_file,
        format!(
            "{} {}",
            running.pid(),
            running
                .start_time()
                .map(|t| t.to_string())
                .unwrap_or_default()
        ),
    );
}

/// The result to post for a verifier that ended with `exit`: its exit, the files it modified
/// and its log; `None` when the worker itself was asked to stop.
fn job_result(
    git: &Git,
    wt: &Path,
    log_path: &Path,
    id: &str,
    job: &Claimed,
    exit: Exit,
) -> Option<JobResult> {
    let (exit, value) = match exit {
        Exit::Code(c) => ("code", c),
        Exit::Signal(s) => ("signal", s),
        Exit::TimedOut => ("timeout", 0),
        // The worker itself was asked to stop: the job goes back to the queue's next claim
        // once the lease runs out.
        Exit::Cancelled => return None,
    };
    // Raw bytes against the commit, not `git status`: a filter the verifier planted in the
    // repository's config could make a rewritten file look unchanged to git.
    let modified = git
        .changed_tracked(wt, &job.spec.commit)
        .unwrap_or_default();
    let log = std::fs::read(log_path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    Some(JobResult {
        exit: exit.into(),
        value,
        failure: None,
        log,
        modified,
        worker: id.to_string(),
        attempt: job.attempt,
        uncontained: None,
    })
}
