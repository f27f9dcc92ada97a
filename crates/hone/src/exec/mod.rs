//! Processes: running the verifier as `/bin/sh -c <command>` in its own process group,
//! under a wall-clock timeout, with its output logged (capped) and handed over line by line.
//!
//! # Process handling
//!
//! This is the whole story of one verifier process; the code below follows it in order.
//!
//! 1. **Spawn.** [`spawn`] first marks every descriptor hone inherited close-on-exec
//!    ([`seal_inherited_fds`]), then runs `/bin/sh -c <command>` in `cwd` with an environment
//!    that is exactly [`ExecRequest::env`] (the inherited one is cleared first), stdin from
//!    `/dev/null`, and stdout and stderr on two pipes. `process_group(0)` makes the shell
//!    the leader of a new process group whose id is its pid; everything it starts inherits
//!    the group, so one `killpg` reaches the whole tree. A side effect is that Ctrl-C at
//!    hone's terminal does not reach the verifier: hone decides what happens to it.
//!    [`Running::start_time`] records the leader's `/proc` start time so that a later hone
//!    can recognise (and kill, see [`kill_stale_group`]) a group left by a crash.
//!
//! 2. **Output.** [`Running::wait`] reads both pipes on the calling thread with `poll(2)`:
//!    no reader threads, so a pipe held open by a process that escaped the group never
//!    leaks a thread, and the line callback runs on the caller's thread. Complete lines go
//!    to the log one write per chunk (the streams interleave at line granularity) and to
//!    the callback (each cut to [`MAX_LINE_BYTES`]). The poll also wakes on a pidfd of the
//!    leader (Linux 5.3+) and at least every [`POLL_INTERVAL`] to ask `cancel()`.
//!
//! 3. **Timeout.** When [`ExecRequest::timeout`] passes, the group gets `SIGTERM`. hone
//!    then waits up to [`ExecRequest::kill_grace`] for the leader to exit and the pipes to
//!    close (a well-behaved verifier cleans up), and sends `SIGKILL` to the group. The exit
//!    is [`Exit::TimedOut`] even if the leader exited by itself during the grace.
//!
//! 4. **Cancel.** As soon as `cancel()` returns true the group gets `SIGKILL` (no grace:
//!    the user asked to stop) and the exit is [`Exit::Cancelled`]. A stop that is hone's own
//!    decision ([`Running::wait_or_stop`]'s `stop()`, a pruned run) goes as a timeout does:
//!    `SIGTERM`, the grace, `SIGKILL`; the exit is [`Exit::Cancelled`] too.
//!
//! 5. **Leader exit and drain.** When the leader exits on its own, only output written
//!    before that moment counts: a metric a `cmd &` left running prints later must not be
//!    the last word. hone notes how many bytes each pipe holds (`FIONREAD`) and whether
//!    another process still holds it open ([`ExecOutcome::pipes_left_open`]), sends `SIGKILL`
//!    to the group at once, and then reads exactly the noted bytes (for at most
//!    [`ExecRequest::drain_timeout`]); whatever was written after the exit is neither logged
//!    nor delivered, and nothing the verifier started outlives it.
//!
//! 6. **Reap.** The leader is observed with `waitid(WNOWAIT)` and stays a zombie until
//!    after the final `SIGKILL`, so its pgid cannot be reused by an unrelated group
//!    between the exit and the kill (details in `group.rs`). After the kill hone reads
//!    what is left in the pipes for at most [`POST_KILL_DRAIN`], reaps the leader, closes
//!    its ends of the pipes and writes the tail of the log.
//!
//! A [`Running`] dropped without [`Running::wait`] (or left by an error in it) kills its
//! group with `SIGKILL` and reaps the leader, so no code path leaves a verifier behind.
//!
//! If hone itself dies (a crash, `SIGKILL`, power loss), the group lives on: it is not in
//! hone's process group, so a terminal's Ctrl-C or hangup does not reach it, and no death
//! signal is set up for a bare shell (`PR_SET_PDEATHSIG` would only reach the leader, and
//! fires when the spawning *thread* exits). The caller records [`Running::pid`] and
//! [`Running::start_time`] before waiting, and the next hone calls [`kill_stale_group`]. A
//! wrapped command (a sandbox) is the exception: its leader gets `SIGKILL` when the thread
//! that started it ends, bubblewrap dies with the leader (`--die-with-parent`), and the
//! sandbox with it.

mod backends;
mod conceal;
mod fds;
mod group;
mod limits;
mod lines;
mod log;
mod orphans;
pub mod slurm;
#[cfg(test)]
mod tests;
mod unhide;

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub use conceal::conceal_self;
pub use fds::seal_inherited_fds;
pub use group::{
    kill_groups_with_env, kill_groups_with_env_prefix, kill_stale_group, process_start_time,
};
pub use limits::Limits;
use limits::{apply_limits, die_with};
pub(crate) use lines::each_line;
pub use lines::MAX_LINE_BYTES;
pub use orphans::{become_subreaper, kill_leftovers, kill_orphans, reap_adopted, set_concurrent};
pub use unhide::{take_notes as unhide_notes, unhide_processes};

use lines::LineSplitter;
use log::CappedLog;

/// The shell every verifier command runs under, as `SHELL -c <command>`.
pub const SHELL: &str = "/bin/sh";

/// How often, at least, the wait loop wakes to ask `cancel()` and check its deadlines.
pub const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// After the final `SIGKILL`, how long hone keeps reading what the killed processes left in
/// the pipes before it closes them.
pub const POST_KILL_DRAIN: Duration = Duration::from_millis(250);

/// Size of the buffer for one `read` from a pipe.
const READ_CHUNK: usize = 64 * 1024;

/// What to run and how.
#[derive(Clone, Debug)]
pub struct ExecRequest {
    /// Run as `/bin/sh -c <command>`.
    pub command: String,
    /// Working directory; must exist.
    pub cwd: PathBuf,
    /// The child's whole environment: nothing is inherited from hone.
    pub env: Vec<(OsString, OsString)>,
    /// Wall-clock limit from spawn; `None` waits for ever.
    pub timeout: Option<Duration>,
    /// After `SIGTERM` to the group on timeout, how long before `SIGKILL`.
    pub kill_grace: Duration,
    /// After the leader exits, the longest hone spends reading the output it had written
    /// (what was already in the pipes when it exited; see the module docs).
    pub drain_timeout: Duration,
    /// stdout and stderr merged, in arrival order (line granularity).
    pub log_path: PathBuf,
    /// Cap on the log: the first half and the last half are kept, with a marker line
    /// `[hone: N bytes omitted]` between them.
    pub max_log_bytes: u64,
    /// Resource limits set on the shell (and so inherited by everything it starts).
    pub limits: Limits,
    /// A program and arguments that run the shell (e.g. `sandbox::Confinement::wrapper`'s
    /// `sh -c <setup retry> hone-sandbox bwrap ... --`); empty runs it directly.
    pub wrapper: Vec<OsString>,
}

impl ExecRequest {
    /// The wrapper and the environment the request starts with. A wrapper (bubblewrap, and
    /// the shell that retries its setup) runs outside the sandbox, in the worktree: it gets the
    /// search paths cleaned as `util::passed_on` cleans them (a relative `LD_LIBRARY_PATH`
    /// entry from `[verify] env` would load a candidate's library into it), and the command
    /// inside gets them as they were, every one in order (a later value of a name still wins;
    /// a setuid bubblewrap, which drops inherited loader variables, still passes them), through
    /// `--setenv` before the wrapper's last `--`. Unwrapped, both are as given.
    pub(crate) fn confined(&self) -> (Vec<OsString>, Vec<(OsString, OsString)>) {
        let (mut wrapper, mut env) = (self.wrapper.clone(), self.env.clone());
        if wrapper.is_empty() {
            return (wrapper, env);
        }
        let mut inside = Vec::new();
        for (name, value) in env.iter_mut() {
            if !crate::util::SEARCH_PATHS.iter().any(|v| name == v) {
                continue;
            }
            let (_, cleaned) = crate::util::passed_on((name.clone(), value.clone()));
            let given = std::mem::replace(value, cleaned);
            inside.extend([OsString::from("--setenv"), name.clone(), given]);
        }
        // A wrapper without `--` (none hone builds) runs the command with the cleaned values.
        if let Some(end) = wrapper.iter().rposition(|a| a == "--") {
            wrapper.splice(end..end, inside);
        }
        (wrapper, env)
    }
}

/// How the verifier ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// The leader exited with this code.
    Code(i32),
    /// The leader was killed by this signal (not sent by hone).
    Signal(i32),
    /// The timeout passed; the group was terminated.
    TimedOut,
    /// `cancel()` returned true; the group was killed.
    Cancelled,
}

/// The result of [`Running::wait`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecOutcome {
    pub exit: Exit,
    /// From spawn until the leader exited or hone killed the group, whichever came first
    /// (the drain after the leader's exit is not counted).
    pub duration: Duration,
    /// Bytes the process wrote to stdout and stderr together, before any cap.
    pub log_bytes: u64,
    /// The leader had exited but other processes still held its stdout or stderr open when
    /// the drain ended; they were killed.
    pub pipes_left_open: bool,
}

/// Why a verifier could not be started or followed.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error(
        "the working directory {} does not exist or is not a directory; create it or run the \
         verifier from an existing one",
        .0.display()
    )]
    MissingCwd(PathBuf),
    #[error(
        "could not start {SHELL}: {0}; hone runs the verifier as `{SHELL} -c <command>`, so a \
         POSIX shell must be installed at {SHELL}"
    )]
    NoShell(io::Error),
    #[error("could not start `{command}` in {}: {error}", cwd.display())]
    Spawn {
        command: String,
        cwd: PathBuf,
        error: io::Error,
    },
    #[error(
        "could not write the verifier log {}: {error}; check that its directory exists, is \
         writable and has free space",
        path.display()
    )]
    Log { path: PathBuf, error: io::Error },
    #[error("lost track of verifier process {pid}: {error}")]
    Process { pid: u32, error: io::Error },
}

impl ExecError {
    /// The system's error behind this one, if any.
    pub fn io(&self) -> Option<&io::Error> {
        match self {
            ExecError::MissingCwd(_) => None,
            ExecError::NoShell(error)
            | ExecError::Spawn { error, .. }
            | ExecError::Log { error, .. }
            | ExecError::Process { error, .. } => Some(error),
        }
    }
}

/// Starts `req.command` and returns as soon as the child exists; see the module docs for
/// everything that happens to it. A wrapped command (`req.wrapper`) is killed when the thread
/// that called this ends: wait for it on that thread.
pub fn spawn(req: &ExecRequest) -> Result<Running, ExecError> {
    if !req.cwd.is_dir() {
        return Err(ExecError::MissingCwd(req.cwd.clone()));
    }
    let log =
        CappedLog::create(&req.log_path, req.max_log_bytes).map_err(|error| ExecError::Log {
            path: req.log_path.clone(),
            error,
        })?;
    // What hone inherited stays with hone (see `fds`).
    seal_inherited_fds();
    let (wrapper, env) = req.confined();
    let mut command = match wrapper.split_first() {
        Some((program, args)) => {
            let mut c = Command::new(program);
            c.args(args).arg(SHELL);
            c
        }
        None => Command::new(SHELL),
    };
    command
        .arg("-c")
        .arg(&req.command)
        .current_dir(&req.cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let wrapped = !req.wrapper.is_empty();
    if wrapped || !req.limits.is_empty() {
        let limits = req.limits;
        // SAFETY: getpid cannot fail and touches no memory.
        let hone = unsafe { libc::getpid() };
        // SAFETY: the closure runs between fork and exec and only calls prctl, getppid and
        // setrlimit, which are async-signal-safe; it allocates nothing.
        unsafe {
            command.pre_exec(move || {
                if wrapped {
                    die_with(hone)?;
                }
                apply_limits(&limits)
            });
        }
    }
    let started = Instant::now();
    let mut child = command.spawn().map_err(|error| {
        if error.kind() == io::ErrorKind::NotFound && !Path::new(SHELL).exists() {
            ExecError::NoShell(error)
        } else {
            ExecError::Spawn {
                command: req.command.clone(),
                cwd: req.cwd.clone(),
                error,
            }
        }
    })?;
    let pid = child.id();
    let stdout = child.stdout.take().map(|p| File::from(OwnedFd::from(p)));
    let stderr = child.stderr.take().map(|p| File::from(OwnedFd::from(p)));
    Ok(Running {
        leader: Leader {
            child,
            pid,
            exited: false,
            reaped: false,
        },
        start_time: process_start_time(pid),
        pidfd: group::pidfd_open(pid),
        streams: [Stream::new(stdout), Stream::new(stderr)],
        log,
        log_path: req.log_path.clone(),
        started,
        timeout: req.timeout,
        kill_grace: req.kill_grace,
        drain_timeout: req.drain_timeout,
    })
}

/// A verifier that has been started. Call [`Running::wait`]; dropping it kills the group.
pub struct Running {
    leader: Leader,
    start_time: Option<u64>,
    pidfd: Option<OwnedFd>,
    streams: [Stream; 2],
    log: CappedLog,
    log_path: PathBuf,
    started: Instant,
    timeout: Option<Duration>,
    kill_grace: Duration,
    drain_timeout: Duration,
}

/// Where the wait loop stands. Each phase but `Running` ends at a point in time (`None`:
/// never, for durations too large to add to an `Instant`).
#[derive(Clone, Copy, Debug)]
enum Phase {
    /// The leader runs; waiting for its exit, the timeout or a cancel.
    Running,
    /// Timed out and sent `SIGTERM`; waiting out the grace.
    Terminating { until: Option<Instant> },
    /// The leader exited and the group got `SIGKILL`; reading the bytes the pipes held at
    /// the exit.
    Draining { until: Option<Instant> },
    /// The group got `SIGKILL`; reading what is left in the pipes.
    Killed { until: Option<Instant> },
}

impl Phase {
    /// When this phase is over by the clock: the run's `deadline` while it runs, else the
    /// phase's own end.
    fn ends_at(self, deadline: Option<Instant>) -> Option<Instant> {
        match self {
            Phase::Running => deadline,
            Phase::Terminating { until } | Phase::Draining { until } | Phase::Killed { until } => {
                until
            }
        }
    }
}

impl Running {
    /// The leader's pid, which is also the process group id.
    pub fn pid(&self) -> u32 {
        self.leader.pid
    }

    /// The leader's start time from `/proc/<pid>/stat`, to recognise this group later with
    /// [`kill_stale_group`]; `None` where `/proc` is unavailable.
    pub fn start_time(&self) -> Option<u64> {
        self.start_time
    }

    /// Follows the process to its end: calls `on_line` for every line of output (stdout and
    /// stderr, on this thread), polls `cancel` at least every [`POLL_INTERVAL`], enforces
    /// the timeout, and kills whatever is left of the group before returning.
    pub fn wait(
        self,
        on_line: &mut dyn FnMut(&str),
        cancel: &dyn Fn() -> bool,
    ) -> Result<ExecOutcome, ExecError> {
        self.wait_or_stop(on_line, cancel, &|| false)
    }

    /// [`Running::wait`], and when `stop()` returns true (asked as often as `cancel()`),
    /// the group gets `SIGTERM`, then `SIGKILL` after the grace; the exit is
    /// [`Exit::Cancelled`].
    pub fn wait_or_stop(
        mut self,
        on_line: &mut dyn FnMut(&str),
        cancel: &dyn Fn() -> bool,
        stop: &dyn Fn() -> bool,
    ) -> Result<ExecOutcome, ExecError> {
        let pid = self.leader.pid;
        let lost = |error: io::Error| ExecError::Process { pid, error };
        let deadline = self.timeout.map(|t| self.started.checked_add(t));
        let mut buf = vec![0u8; READ_CHUNK];
        let mut phase = Phase::Running;
        let mut end = Ending::default();

        loop {
            let now = Instant::now();
            let leader_exited = self.leader.exited().map_err(lost)?;
            if leader_exited {
                end.at.get_or_insert(now);
            }
            let turn = Turn {
                now,
                leader_exited,
                pipes_closed: self.streams.iter().all(|s| s.pipe.is_none()),
                deadline,
            };
            let next = if !matches!(phase, Phase::Killed { .. }) && cancel() {
                self.leader.signal(libc::SIGKILL).map_err(lost)?;
                end.forced_exit = Some(Exit::Cancelled);
                end.at.get_or_insert(now);
                Phase::Killed {
                    until: now.checked_add(POST_KILL_DRAIN),
                }
            } else {
                match self
                    .next_phase(phase, &turn, stop, &mut end, on_line)
                    .map_err(lost)?
                {
                    Some(next) => next,
                    None => break,
                }
            };
            if std::mem::discriminant(&next) != std::mem::discriminant(&phase) {
                // Re-evaluate at once: the new phase may already be complete.
                phase = next;
                continue;
            }

            let mut sleep = POLL_INTERVAL;
            if let Some(wake) = phase.ends_at(deadline.flatten()) {
                sleep = sleep.min(wake.saturating_duration_since(now));
            }
            let pidfd = self.pidfd.as_ref().filter(|_| !leader_exited);
            pump(
                &mut self.streams,
                pidfd,
                sleep,
                &mut self.log,
                &mut buf,
                on_line,
            )
            .map_err(lost)?;
        }

        let status = self.leader.reap().map_err(lost)?;
        // Pipes still open (held by processes outside the group) are closed here; a final
        // partial line is still logged and delivered.
        for stream in &mut self.streams {
            if stream.pipe.take().is_some() {
                stream.splitter.finish(&mut self.log, on_line);
            }
        }
        let log_bytes = self.log.finish().map_err(|error| ExecError::Log {
            path: self.log_path,
            error,
        })?;
        Ok(ExecOutcome {
            exit: end.forced_exit.unwrap_or_else(|| exit_of(status)),
            duration: end
                .at
                .unwrap_or_else(Instant::now)
                .duration_since(self.started),
            log_bytes,
            pipes_left_open: end.pipes_left_open,
        })
    }

    /// The phase after `phase` at this turn of the wait loop (`None`: the wait is over),
    /// signalling the group as the change requires; a cancel is handled before.
    fn next_phase(
        &mut self,
        phase: Phase,
        turn: &Turn,
        stop: &dyn Fn() -> bool,
        end: &mut Ending,
        on_line: &mut dyn FnMut(&str),
    ) -> io::Result<Option<Phase>> {
        let Turn {
            now,
            leader_exited,
            pipes_closed,
            deadline,
        } = *turn;
        Ok(Some(match phase {
            Phase::Running if leader_exited => {
                // Output written after the exit must not count: note what the pipes hold
                // now, then stop everything that could write more.
                end.pipes_left_open = self.streams.iter().any(Stream::held_by_others);
                for stream in &mut self.streams {
                    stream.owe_what_is_buffered(&mut self.log, on_line);
                }
                self.leader.signal(libc::SIGKILL)?;
                Phase::Draining {
                    until: now.checked_add(self.drain_timeout.max(POST_KILL_DRAIN)),
                }
            }
            Phase::Running if stop() => {
                self.leader.signal(libc::SIGTERM)?;
                end.forced_exit = Some(Exit::Cancelled);
                Phase::Terminating {
                    until: now.checked_add(self.kill_grace),
                }
            }
            Phase::Running if deadline.is_some_and(|d| passed(d, now)) => {
                self.leader.signal(libc::SIGTERM)?;
                end.forced_exit = Some(Exit::TimedOut);
                Phase::Terminating {
                    until: now.checked_add(self.kill_grace),
                }
            }
            Phase::Terminating { until }
                if (leader_exited && pipes_closed) || passed(until, now) =>
            {
                end.pipes_left_open = leader_exited && !pipes_closed;
                self.leader.signal(libc::SIGKILL)?;
                end.at.get_or_insert(now);
                Phase::Killed {
                    until: now.checked_add(POST_KILL_DRAIN),
                }
            }
            Phase::Draining { until } if pipes_closed || passed(until, now) => return Ok(None),
            Phase::Killed { until } if pipes_closed || passed(until, now) => return Ok(None),
            unchanged => unchanged,
        }))
    }
}

/// What one turn of the wait loop observed.
struct Turn {
    now: Instant,
    leader_exited: bool,
    pipes_closed: bool,
    /// The run's deadline (`None`: no timeout; `Some(None)`: too far to add to an instant).
    deadline: Option<Option<Instant>>,
}

/// How the wait ends, as the loop learns it: the exit hone forced (a cancel or a timeout
/// overrides the status), when the group ended, and whether pipes were held open past it.
#[derive(Default)]
struct Ending {
    forced_exit: Option<Exit>,
    at: Option<Instant>,
    pipes_left_open: bool,
}

/// Whether the instant `until` (`None`: never) has passed.
fn passed(until: Option<Instant>, now: Instant) -> bool {
    until.is_some_and(|u| now >= u)
}

fn exit_of(status: ExitStatus) -> Exit {
    match (status.code(), status.signal()) {
        (Some(code), _) => Exit::Code(code),
        (None, Some(signal)) => Exit::Signal(signal),
        // `wait` reports only exited or killed children, never stopped or continued ones.
        (None, None) => Exit::Code(-1),
    }
}

/// One output pipe and its line state.
struct Stream {
    /// `None` once the pipe reached end of file (or hone closed it).
    pipe: Option<File>,
    splitter: LineSplitter,
    /// After the leader's exit: the bytes still to read of those the pipe held then; the pipe
    /// is closed when they are read (`None`: read to the end of file).
    owed: Option<usize>,
}

impl Stream {
    fn new(pipe: Option<File>) -> Self {
        Self {
            pipe,
            splitter: LineSplitter::default(),
            owed: None,
        }
    }

    /// Whether a process other than the (exited) leader still holds the pipe's write end:
    /// `poll` reports a hang-up only once every writer has closed it.
    fn held_by_others(&self) -> bool {
        let Some(pipe) = &self.pipe else {
            return false;
        };
        let mut fd = libc::pollfd {
            fd: pipe.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, alive for the call; a zero timeout never blocks.
        let rc = unsafe { libc::poll(&mut fd, 1, 0) };
        rc >= 0 && fd.revents & libc::POLLHUP == 0
    }

    /// The leader exited: from now on only the bytes the pipe holds at this moment are read
    /// (a pipe that holds none is closed at once).
    fn owe_what_is_buffered(&mut self, log: &mut CappedLog, on_line: &mut dyn FnMut(&str)) {
        let Some(pipe) = &self.pipe else {
            return;
        };
        let mut available: libc::c_int = 0;
        // SAFETY: FIONREAD writes one c_int to the pointer we pass, which is alive for the call.
        let rc = unsafe { libc::ioctl(pipe.as_raw_fd(), libc::FIONREAD, &mut available) };
        let owed = if rc == 0 {
            usize::try_from(available).unwrap_or(0)
        } else {
            0
        };
        self.owed = Some(owed);
        if owed == 0 {
            self.pipe = None;
            self.splitter.finish(log, on_line);
        }
    }

    fn raw_fd(&self) -> RawFd {
        self.pipe.as_ref().map_or(-1, AsRawFd::as_raw_fd)
    }

    /// One `read` after `poll` said the pipe is ready (so it does not block).
    fn read_once(&mut self, log: &mut CappedLog, buf: &mut [u8], on_line: &mut dyn FnMut(&str)) {
        let Some(pipe) = self.pipe.as_mut() else {
            return;
        };
        let want = self.owed.map_or(buf.len(), |o| o.min(buf.len()));
        match pipe.read(&mut buf[..want]) {
            Ok(0) => {
                self.pipe = None;
                self.splitter.finish(log, on_line);
            }
            Ok(n) => {
                self.splitter.push(&buf[..n], log, on_line);
                if let Some(owed) = self.owed.as_mut() {
                    *owed = owed.saturating_sub(n);
                    if *owed == 0 {
                        // Everything written before the leader's exit is read; the rest is
                        // not its output.
                        self.pipe = None;
                        self.splitter.finish(log, on_line);
                    }
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
                ) => {}
            // Any other error on a pipe means no more data will come: treat it as the end.
            Err(_) => {
                self.pipe = None;
                self.splitter.finish(log, on_line);
            }
        }
    }
}

/// Waits up to `timeout` for output or the leader's exit, and handles what arrived.
fn pump(
    streams: &mut [Stream; 2],
    pidfd: Option<&OwnedFd>,
    timeout: Duration,
    log: &mut CappedLog,
    buf: &mut [u8],
    on_line: &mut dyn FnMut(&str),
) -> io::Result<()> {
    let pollfd = |fd: RawFd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // poll ignores entries with a negative fd.
    let mut fds = [
        pollfd(streams[0].raw_fd()),
        pollfd(streams[1].raw_fd()),
        pollfd(pidfd.map_or(-1, AsRawFd::as_raw_fd)),
    ];
    let millis =
        libc::c_int::try_from(timeout.as_micros().div_ceil(1000)).unwrap_or(libc::c_int::MAX);
    // SAFETY: `fds` is a valid array of pollfd of the length we pass, alive for the call.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, millis) };
    if rc < 0 {
        let err = io::Error::last_os_error();
        return if err.kind() == io::ErrorKind::Interrupted {
            Ok(())
        } else {
            Err(err)
        };
    }
    for (stream, fd) in streams.iter_mut().zip(&fds) {
        if fd.fd >= 0 && fd.revents != 0 {
            stream.read_once(log, buf, on_line);
        }
    }
    Ok(())
}

/// The group's leader. Dropping it before [`Leader::reap`] kills the group and reaps the
/// leader, so an early return (or a [`Running`] never waited on) leaves nothing behind.
struct Leader {
    child: Child,
    pid: u32,
    exited: bool,
    reaped: bool,
}

impl Leader {
    /// Whether the leader has exited (it is not reaped: see `group.rs`).
    fn exited(&mut self) -> io::Result<bool> {
        if !self.exited {
            self.exited = group::leader_exited(self.pid)?;
        }
        Ok(self.exited)
    }

    /// Sends `signal` to the whole group; a group already gone is fine.
    fn signal(&self, signal: libc::c_int) -> io::Result<()> {
        group::signal_group(self.pid, signal).map(|_| ())
    }

    /// Reaps the leader. Call only after the final `SIGKILL` to the group.
    fn reap(&mut self) -> io::Result<ExitStatus> {
        let status = self.child.wait()?;
        self.reaped = true;
        Ok(status)
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        if !self.reaped {
            // Best effort: there is no one to report an error to, and SIGKILL to our own
            // child's group can only fail if the group is already gone.
            let _ = group::signal_group(self.pid, libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}
