//! The SLURM backend: one verifier run as one batch job that hone writes, submits with
//! `sbatch`, follows with `scontrol` and cancels with `scancel`.
//!
//! The story of one job, in the order the code follows it:
//!
//! 1. **Script.** hone writes a small POSIX shell script (mode 0600) into a directory the
//!    compute nodes can see: it enters the worktree, exports the variables hone sets for the
//!    candidate (the caller passes only those) on top of what SLURM gives the job (so `CUDA_VISIBLE_DEVICES` from `--gres` survives), runs
//!    the command under `/bin/sh -c` and writes the command's exit status to a side file.
//! 2. **Submit.** `sbatch --parsable --no-requeue` with the configured partition, gres, cpus,
//!    memory and time limit (by default the verifier's timeout plus its grace, rounded up to
//!    minutes, so the scheduler kills the job even if hone has died), run with a minimal
//!    environment so none of hone's own variables (API keys) reach the scheduler or the job.
//! 3. **Follow.** The job's output file is read as it grows, line by line, into the capped
//!    log and the line callback, exactly like a local run's pipes; the job's state is polled.
//!    The timeout counts from the moment the job starts running, not while it waits in the
//!    queue.
//! 4. **Timeout and cancel.** hone's timeout or a cancel sends `scancel` (SLURM sends TERM,
//!    then KILL after its `KillWait`), and hone waits for the job to leave the running states.
//! 5. **States.** COMPLETED and FAILED give the command's exit status; SLURM's own TIMEOUT is
//!    a timeout; a job cancelled by someone else, a node failure, an out-of-memory kill or a
//!    boot failure give a [`SlurmOutcome::failure`] with the reason; a PREEMPTED job is
//!    submitted once more, and a second preemption is a failure.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::lines::LineSplitter;
use super::log::CappedLog;
use super::{ExecError, ExecRequest, Exit, SHELL};

/// Where and how to submit jobs (`[exec]` in hone.toml).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlurmConfig {
    pub partition: Option<String>,
    /// `--gres`, e.g. `gpu:1`.
    pub gres: Option<String>,
    /// `--cpus-per-task`.
    pub cpus: Option<u32>,
    /// `--mem`, e.g. `16G`.
    pub mem: Option<String>,
    /// `--time`; default: the verifier's timeout plus its kill grace.
    pub time: Option<Duration>,
    /// More `sbatch` arguments, passed as they are.
    pub extra_args: Vec<String>,
}

/// How often the job's state is asked at first (the output file is read as often); the
/// interval doubles up to [`MAX_POLL`].
const POLL: Duration = Duration::from_millis(250);

/// The longest interval between two looks at a job.
const MAX_POLL: Duration = Duration::from_secs(2);

/// How long `scontrol` may keep failing (a busy or restarting controller) before hone gives
/// up following a job.
const CONTROLLER_PATIENCE: Duration = Duration::from_secs(300);

/// After `scancel`, how long hone waits for the job to leave the running states before it
/// gives up following it (SLURM's `KillWait` is 30 s by default).
const CANCEL_WAIT: Duration = Duration::from_secs(90);

/// How long a job may stay unknown to `scontrol` right after submission before hone treats
/// it as lost.
const UNKNOWN_GRACE: Duration = Duration::from_secs(30);

/// One submitted job, to be followed with [`SlurmJob::wait`].
pub struct SlurmJob {
    id: u64,
    script: PathBuf,
    output: PathBuf,
    status_file: PathBuf,
    config: SlurmConfig,
    req: ExecRequest,
    job_dir: PathBuf,
    job_name: String,
    attempt: u32,
}

/// The result of [`SlurmJob::wait`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlurmOutcome {
    /// The command's exit, as a local run would report it.
    pub exit: Exit,
    /// Set when the job ended for a reason outside the command (cancelled by someone else,
    /// node failure, out of memory, preempted twice...): the experiment is a crash with this
    /// reason.
    pub failure: Option<String>,
    /// Every job id submitted for this run, the first one first.
    pub job_ids: Vec<u64>,
    /// SLURM's final state of the last job (`COMPLETED`, `FAILED`, ...).
    pub state: String,
    /// From the start of the (last) job until it ended.
    pub duration: Duration,
    /// Bytes of output, before any cap.
    pub log_bytes: u64,
}

/// What `scontrol show job` says about a job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobInfo {
    pub state: String,
    pub reason: String,
    /// `ExitCode=a:b`: the script's exit status and the signal that ended it.
    pub exit_code: i32,
    pub exit_signal: i32,
    pub node: String,
}

impl JobInfo {
    /// Parses one line of `scontrol show job -o <id>`.
    pub fn parse(line: &str) -> Option<JobInfo> {
        let mut info = JobInfo::default();
        let mut seen_state = false;
        for field in line.split_whitespace() {
            let Some((key, value)) = field.split_once('=') else {
                continue;
            };
            match key {
                "JobState" => {
                    info.state = value.to_string();
                    seen_state = true;
                }
                "Reason" => info.reason = value.to_string(),
                "NodeList" => info.node = value.to_string(),
                "ExitCode" => {
                    let (code, signal) = value.split_once(':').unwrap_or((value, "0"));
                    info.exit_code = code.parse().unwrap_or(-1);
                    info.exit_signal = signal.parse().unwrap_or(0);
                }
                _ => {}
            }
        }
        seen_state.then_some(info)
    }

    /// Whether the job can still change (queued, starting, running, being cancelled...).
    pub fn is_active(&self) -> bool {
        matches!(
            self.state.as_str(),
            "PENDING"
                | "CONFIGURING"
                | "RUNNING"
                | "COMPLETING"
                | "SUSPENDED"
                | "REQUEUED"
                | "REQUEUE_FED"
                | "REQUEUE_HOLD"
                | "RESIZING"
                | "SIGNALING"
                | "STAGE_OUT"
                | "STOPPED"
        )
    }

    /// Whether the job has started (its timeout counts from then).
    pub fn has_started(&self) -> bool {
        !matches!(self.state.as_str(), "PENDING" | "REQUEUED" | "REQUEUE_HOLD")
    }
}

/// A `sbatch`/`scontrol`/`scancel` that failed.
fn tool_error(tool: &str, detail: String) -> ExecError {
    ExecError::Spawn {
        command: tool.to_string(),
        cwd: PathBuf::from("."),
        error: io::Error::other(detail),
    }
}

/// The environment a SLURM client tool gets, of hone's `vars`: a few variables it needs, and
/// nothing of hone's own. SLURM copies sbatch's environment into the job, whose verifier runs
/// in a worktree: `PATH` with its absolute entries only (`util::passed_on`).
fn tool_env(
    vars: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    const KEPT: &[&str] = &["PATH", "HOME", "USER", "LOGNAME", "SLURM_CONF", "TZ"];
    vars.filter(|(k, _)| KEPT.iter().any(|v| k == v))
        .map(crate::util::passed_on)
        .collect()
}

/// Runs a SLURM client tool with a minimal environment (nothing of hone's own variables)
/// and returns its standard output.
fn slurm_tool(tool: &str, args: &[String]) -> Result<String, ExecError> {
    // By absolute path: a `PATH` entry like `.` would find one in hone's directory.
    let mut cmd = Command::new(crate::util::program_on_path(tool));
    cmd.args(args)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.envs(tool_env(std::env::vars_os()));
    let out = cmd.output().map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            tool_error(
                tool,
                format!(
                    "`{tool}` was not found on PATH; [exec] backend = \"slurm\" needs the SLURM \
                     client tools (Debian: apt-get install slurm-client) on the machine that runs hone"
                ),
            )
        } else {
            tool_error(tool, format!("could not run `{tool}`: {e}"))
        }
    })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(tool_error(
            tool,
            format!(
                "`{tool} {}` failed ({}): {}",
                args.join(" "),
                out.status,
                stderr.trim()
            ),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Quotes `s` for a POSIX shell.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A SLURM `--time` value (whole minutes, at least one) for a duration.
pub fn slurm_time(d: Duration) -> String {
    let minutes = d.as_secs().div_ceil(60).max(1);
    format!("{}:{:02}:00", minutes / 60, minutes % 60)
}

/// The batch script for `req`.
fn script_text(req: &ExecRequest, status_file: &Path) -> String {
    let cwd = req.cwd.to_string_lossy();
    let mut s = String::from("#!/bin/sh\n# Written by hone: one verifier run as a batch job.\n");
    // The verifier runs in a subshell: its directory (the worktree, which the candidate's code
    // may write) and its environment (a PATH that may have relative entries) end with it, so
    // the status below is recorded by programs that cannot be the candidate's.
    s.push_str("(\n");
    s.push_str(&format!(
        "cd {} || {{ echo \"hone: cannot enter {} on $(hostname); [exec] shared_dir must be visible to the compute nodes\" >&2; exit 97; }}\n",
        sh_quote(&cwd),
        cwd.replace(['"', '$', '`', '\\'], "_"),
    ));
    let (wrapper, env) = req.confined();
    for (k, v) in &env {
        let (k, v) = (k.to_string_lossy(), v.to_string_lossy());
        // A name the shell cannot export is skipped rather than breaking the script.
        if !k.is_empty()
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !k.starts_with(|c: char| c.is_ascii_digit())
        {
            s.push_str(&format!("export {k}={}\n", sh_quote(&v)));
        }
    }
    let mut argv: Vec<String> = wrapper
        .iter()
        .map(|a| sh_quote(&a.to_string_lossy()))
        .collect();
    argv.push(SHELL.to_string());
    argv.push("-c".into());
    argv.push(sh_quote(&req.command));
    s.push_str(&format!("exec {} </dev/null\n)\n", argv.join(" ")));
    s.push_str(&format!(
        "rc=$?\necho \"$rc\" > {q}.tmp && command -p mv {q}.tmp {q}\nexit \"$rc\"\n",
        q = sh_quote(&status_file.to_string_lossy())
    ));
    s
}

/// Writes the script for `req` into `job_dir` and submits it as `job_name`.
pub fn submit(
    req: &ExecRequest,
    config: &SlurmConfig,
    job_dir: &Path,
    job_name: &str,
) -> Result<SlurmJob, ExecError> {
    if !req.cwd.is_dir() {
        return Err(ExecError::MissingCwd(req.cwd.clone()));
    }
    let mut job = SlurmJob {
        id: 0,
        script: job_dir.join(format!("{job_name}.sh")),
        output: PathBuf::new(),
        status_file: PathBuf::new(),
        config: config.clone(),
        req: req.clone(),
        job_dir: job_dir.to_path_buf(),
        job_name: job_name.to_string(),
        attempt: 0,
    };
    job.submit_attempt()?;
    Ok(job)
}

impl SlurmJob {
    /// The current job's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Removes the current attempt's output and status files.
    fn remove_files(&self) {
        for f in [&self.output, &self.status_file] {
            if !f.as_os_str().is_empty() {
                let _ = fs::remove_file(f);
            }
        }
    }

    fn submit_attempt(&mut self) -> Result<(), ExecError> {
        // A previous attempt's files were read to the end: they go.
        self.remove_files();
        self.attempt += 1;
        let stem = format!("{}.{}", self.job_name, self.attempt);
        self.output = self.job_dir.join(format!("{stem}.out"));
        self.status_file = self.job_dir.join(format!("{stem}.rc"));
        let io_err = |path: &Path, error: io::Error| ExecError::Log {
            path: path.to_path_buf(),
            error,
        };
        fs::create_dir_all(&self.job_dir).map_err(|e| io_err(&self.job_dir, e))?;
        for stale in [&self.output, &self.status_file] {
            match fs::remove_file(stale) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(io_err(stale, e)),
                _ => {}
            }
        }
        let text = script_text(&self.req, &self.status_file);
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&self.script)
            .map_err(|e| io_err(&self.script, e))?;
        f.write_all(text.as_bytes())
            .map_err(|e| io_err(&self.script, e))?;
        drop(f);

        let time = self.config.time.unwrap_or_else(|| {
            self.req.timeout.unwrap_or(Duration::from_secs(24 * 3600)) + self.req.kill_grace
        });
        let mut args = vec![
            "--parsable".to_string(),
            "--no-requeue".into(),
            format!("--job-name={}", self.job_name),
            format!("--output={}", self.output.display()),
            format!("--chdir={}", self.job_dir.display()),
            format!("--time={}", slurm_time(time)),
        ];
        if let Some(p) = &self.config.partition {
            args.push(format!("--partition={p}"));
        }
        if let Some(g) = &self.config.gres {
            args.push(format!("--gres={g}"));
        }
        if let Some(c) = self.config.cpus {
            args.push(format!("--cpus-per-task={c}"));
        }
        if let Some(m) = &self.config.mem {
            args.push(format!("--mem={m}"));
        }
        args.extend(self.config.extra_args.iter().cloned());
        args.push(self.script.display().to_string());
        let out = slurm_tool("sbatch", &args)?;
        // `--parsable` prints `<id>` or `<id>;<cluster>`.
        let id = out
            .trim()
            .split(';')
            .next()
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(|| {
                tool_error(
                    "sbatch",
                    format!("sbatch printed no job id: {:?}", out.trim()),
                )
            })?;
        self.id = id;
        Ok(())
    }

    /// Follows the job to its end: output lines to the log (capped, at the request's
    /// `log_path`) and to `on_line`; `on_submit` hears every job id (the first one too, and a
    /// resubmission after preemption), so that a later hone can cancel what a crash left.
    pub fn wait(
        mut self,
        on_line: &mut dyn FnMut(&str),
        on_submit: &mut dyn FnMut(u64),
        cancel: &dyn Fn() -> bool,
    ) -> Result<SlurmOutcome, ExecError> {
        let mut log =
            CappedLog::create(&self.req.log_path, self.req.max_log_bytes).map_err(|error| {
                ExecError::Log {
                    path: self.req.log_path.clone(),
                    error,
                }
            })?;
        let mut job_ids = vec![self.id];
        on_submit(self.id);
        loop {
            let end = self.follow(&mut log, on_line, cancel)?;
            if end.info.state == "PREEMPTED" && end.forced.is_none() && self.attempt < 2 {
                log.append(
                    format!(
                        "hone: SLURM job {} was preempted; submitting it once more\n",
                        self.id
                    )
                    .as_bytes(),
                );
                self.submit_attempt()?;
                job_ids.push(self.id);
                on_submit(self.id);
                continue;
            }
            let log_bytes = log.finish().map_err(|error| ExecError::Log {
                path: self.req.log_path.clone(),
                error,
            })?;
            let (exit, failure) = self.classify(&end);
            // The job's files (its output may be a holdout's) do not outlive it; other jobs'
            // files in the same directory are theirs.
            self.remove_files();
            let _ = fs::remove_file(&self.script);
            return Ok(SlurmOutcome {
                exit,
                failure,
                job_ids,
                state: end.info.state,
                duration: end.duration,
                log_bytes,
            });
        }
    }

    /// Follows the current job until it leaves the active states.
    fn follow(
        &self,
        log: &mut CappedLog,
        on_line: &mut dyn FnMut(&str),
        cancel: &dyn Fn() -> bool,
    ) -> Result<JobEnd, ExecError> {
        let mut f = Following {
            submitted: Instant::now(),
            started: None,
            forced: None,
            cancelled_at: None,
            controller_down_since: None,
        };
        let mut reader = OutputReader::default();
        let mut poll = POLL;
        loop {
            let info = match self.info() {
                Ok(info) => {
                    f.controller_down_since = None;
                    info
                }
                // A busy or restarting controller is not the end of the job: keep asking for
                // a while (the job runs on meanwhile), then give up with the error.
                Err(e) => {
                    let since = *f.controller_down_since.get_or_insert(Instant::now());
                    if since.elapsed() > CONTROLLER_PATIENCE {
                        return Err(e);
                    }
                    std::thread::sleep(poll);
                    continue;
                }
            };
            reader.pump(&self.output, log, on_line);
            let now = Instant::now();
            match &info {
                Some(i) if !i.is_active() => {
                    reader.finish(&self.output, log, on_line);
                    return Ok(f.end(i.clone(), now));
                }
                Some(i) if i.has_started() => {
                    f.started.get_or_insert(now);
                }
                Some(_) => {}
                None if now.duration_since(f.submitted) > UNKNOWN_GRACE => {
                    // Purged from the controller's memory (or never known): the side file
                    // says how the command ended, if it did.
                    reader.finish(&self.output, log, on_line);
                    return Ok(f.end(self.lost_info(), now));
                }
                None => {}
            }
            if f.forced.is_none() {
                if !self.force(&mut f, cancel, now) {
                    std::thread::sleep(poll);
                    continue;
                }
            } else if f
                .cancelled_at
                .is_some_and(|c| now.duration_since(c) > CANCEL_WAIT)
            {
                reader.finish(&self.output, log, on_line);
                return Ok(f.end(info.unwrap_or_default(), now));
            }
            std::thread::sleep(poll);
            // Poll quickly while a job is young, then every few seconds: a cluster's
            // controller serves everyone.
            poll = (poll * 2).min(MAX_POLL);
        }
    }

    /// What is known of a job the controller no longer knows: the side file's exit status.
    fn lost_info(&self) -> JobInfo {
        let state = match fs::read_to_string(&self.status_file) {
            Ok(rc) => match rc.trim().parse::<i32>() {
                Ok(0) => "COMPLETED",
                Ok(_) => "FAILED",
                Err(_) => "UNKNOWN",
            },
            Err(_) => "UNKNOWN",
        };
        JobInfo {
            state: state.into(),
            reason: "the job is no longer known to the controller".into(),
            exit_code: -1,
            ..JobInfo::default()
        }
    }

    /// Cancels the job (`scancel`) when `cancel` says so or hone's timeout has passed since it
    /// started; false when `scancel` failed (it is tried again at the next poll).
    fn force(&self, f: &mut Following, cancel: &dyn Fn() -> bool, now: Instant) -> bool {
        let timed_out = f
            .started
            .zip(self.req.timeout)
            .is_some_and(|(s, t)| now.duration_since(s) >= t);
        if cancel() {
            f.forced = Some(Exit::Cancelled);
        } else if timed_out {
            f.forced = Some(Exit::TimedOut);
        }
        if f.forced.is_some() {
            // A failed scancel is tried again at the next poll.
            if slurm_tool("scancel", &[self.id.to_string()]).is_err() {
                f.forced = None;
                return false;
            }
            f.cancelled_at = Some(now);
        }
        true
    }

    /// The job's state now; `None` if the controller does not know it (any more).
    fn info(&self) -> Result<Option<JobInfo>, ExecError> {
        match slurm_tool(
            "scontrol",
            &[
                "show".into(),
                "job".into(),
                "-o".into(),
                self.id.to_string(),
            ],
        ) {
            Ok(out) => Ok(out.lines().find_map(JobInfo::parse)),
            Err(ExecError::Spawn { error, .. }) if error.to_string().contains("Invalid job id") => {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    fn classify(&self, end: &JobEnd) -> (Exit, Option<String>) {
        if let Some(forced) = end.forced {
            return (forced, None);
        }
        let i = &end.info;
        let id = self.id;
        let failure = |why: String| (Exit::Code(-1), Some(why));
        match i.state.as_str() {
            "COMPLETED" => (Exit::Code(0), None),
            "FAILED" if i.exit_signal != 0 => (Exit::Signal(i.exit_signal), None),
            "FAILED" => match fs::read_to_string(&self.status_file)
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok())
            {
                Some(rc) => (Exit::Code(rc), None),
                None => (Exit::Code(i.exit_code), None),
            },
            "TIMEOUT" | "DEADLINE" => (Exit::TimedOut, None),
            "CANCELLED" => failure(format!(
                "SLURM job {id} was cancelled outside hone (scancel or an administrator)"
            )),
            "NODE_FAIL" => failure(format!("SLURM job {id}: node failure on {}", i.node)),
            "OUT_OF_MEMORY" => failure(format!(
                "SLURM job {id} ran out of memory (raise [exec] mem)"
            )),
            "BOOT_FAIL" => failure(format!("SLURM job {id}: the node failed to boot")),
            "PREEMPTED" => failure(format!(
                "SLURM job {id} was preempted twice; hone resubmits a preempted job only once"
            )),
            other => failure(format!(
                "SLURM job {id} ended in state {other} ({})",
                i.reason
            )),
        }
    }
}

/// Where following one job stands.
struct Following {
    submitted: Instant,
    /// When the job was first seen running (hone's timeout counts from there).
    started: Option<Instant>,
    /// hone ended the job: its timeout, or a cancel.
    forced: Option<Exit>,
    cancelled_at: Option<Instant>,
    /// Since when `scontrol` keeps failing.
    controller_down_since: Option<Instant>,
}

impl Following {
    /// The job's end, as `info` says it ended, at `now`.
    fn end(&self, info: JobInfo, now: Instant) -> JobEnd {
        JobEnd {
            info,
            forced: self.forced,
            duration: self.started.map(|s| now - s).unwrap_or_default(),
        }
    }
}

/// How one job ended.
struct JobEnd {
    info: JobInfo,
    forced: Option<Exit>,
    duration: Duration,
}

/// Reads a job's output file as it grows.
#[derive(Default)]
struct OutputReader {
    file: Option<File>,
    /// Bytes consumed so far.
    offset: u64,
    splitter: LineSplitter,
}

impl OutputReader {
    fn pump(&mut self, path: &Path, log: &mut CappedLog, on_line: &mut dyn FnMut(&str)) {
        if self.file.is_none() {
            self.file = File::open(path).ok();
        }
        let Some(f) = self.file.as_mut() else {
            return;
        };
        let mut buf = [0u8; 64 * 1024];
        loop {
            match f.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    self.offset += n as u64;
                    self.splitter.push(&buf[..n], log, on_line)
                }
            }
        }
    }

    /// The job has ended: reads what is left. The file is opened afresh, so that a network
    /// filesystem revalidates it (close-to-open) and a stale size cannot hide the last lines,
    /// which usually hold the metric.
    fn finish(&mut self, path: &Path, log: &mut CappedLog, on_line: &mut dyn FnMut(&str)) {
        use std::io::{Seek, SeekFrom};
        self.pump(path, log, on_line);
        if let Ok(mut f) = File::open(path) {
            if f.seek(SeekFrom::Start(self.offset)).is_ok() {
                self.file = Some(f);
                self.pump(path, log, on_line);
            }
        }
        self.splitter.finish(log, on_line);
    }
}

/// Cancels jobs a crashed hone left behind; ids the controller no longer knows are ignored.
/// Returns how many were still active.
pub fn cancel_stale(ids: &[u64]) -> usize {
    let mut n = 0;
    for id in ids {
        let active = slurm_tool(
            "scontrol",
            &["show".into(), "job".into(), "-o".into(), id.to_string()],
        )
        .ok()
        .and_then(|out| out.lines().find_map(JobInfo::parse))
        .is_some_and(|i| i.is_active());
        if active && slurm_tool("scancel", &[id.to_string()]).is_ok() {
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests;
