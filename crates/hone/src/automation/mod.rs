//! Runs started with no one at the keyboard: `[[schedule]]` entries and the signed webhook.
//!
//! - `schedule`: when a cron entry is due, with an injected clock, and the last start of each
//!   entry persisted in `.hone/schedule.json` so a start missed while hone was not running is
//!   run once (`catch_up = true`) or skipped.
//! - `signature`: HMAC-SHA256 of a webhook body (`X-Hub-Signature-256: sha256=<hex>`), compared
//!   in constant time.
//! - `replay`: the signatures that started runs, kept in `.hone/triggers.seen`, so a request
//!   sent again is refused.
//! - this module: what a run request may ask for, and the `Launcher` that starts it as a child
//!   process of the `hone` executable (`hone run`, then `hone finalize` when asked), one at a
//!   time per repository, with its output in `.hone/automation/<tag>.log`.
//!
//! The HTTP side (axum) lives in the `hone-serve` crate; everything it decides is here.

pub mod replay;
pub mod schedule;
pub mod signature;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use crate::engine::{is_running, validate_tag, StatePaths};
use crate::spec::{AgentKind, ScheduleSpec};

/// What a schedule entry or a webhook asks for; every field is optional.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(default)]
pub struct RunRequest {
    /// The run's tag (an existing tag is resumed); default: `trigger-<UTC time>`.
    pub tag: Option<String>,
    pub max_experiments: Option<u64>,
    /// Loop time, e.g. `"30m"`.
    pub time: Option<String>,
    /// The proposer kind, e.g. `"knobs"`.
    pub agent: Option<String>,
    pub seed: Option<u64>,
    /// After the run, build the review branch.
    pub finalize: bool,
    /// After the run, push the review branch and open a pull request (implies `finalize`).
    pub pr: bool,
    /// One squashed commit on the review branch.
    pub squash: bool,
}

impl RunRequest {
    /// The request a schedule entry makes when it fires at `at` (Unix seconds).
    pub fn from_schedule(s: &ScheduleSpec, at: i64) -> RunRequest {
        RunRequest {
            tag: Some(format!("{}-{}", s.tag, stamp(at, false))),
            max_experiments: s.max_experiments,
            time: s.time.map(|t| format!("{}s", t.as_secs().max(1))),
            agent: s.agent.map(|a| a.as_str().to_string()),
            seed: s.seed,
            finalize: s.finalize,
            pr: s.pr,
            squash: s.squash,
        }
    }

    /// Checks every field; the message says which one is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(t) = &self.tag {
            validate_tag(t).map_err(|e| format!("tag: {e}"))?;
        }
        if self.max_experiments == Some(0) {
            return Err("max_experiments: must be more than zero".into());
        }
        if let Some(t) = &self.time {
            match crate::spec::parse_duration(t) {
                Ok(d) if !d.is_zero() => {}
                Ok(_) => return Err("time: must be more than zero".into()),
                Err(e) => return Err(format!("time: {e}")),
            }
        }
        if let Some(a) = &self.agent {
            if AgentKind::parse(a).is_none() {
                return Err(format!(
                    "agent: `{a}` is not an agent kind (expected one of {})",
                    AgentKind::names().join(", ")
                ));
            }
        }
        Ok(())
    }

    /// The tag to run under: the request's, or `trigger-<UTC time>` at `now`.
    pub fn tag_at(&self, now: i64) -> String {
        self.tag
            .clone()
            .unwrap_or_else(|| format!("trigger-{}", stamp(now, true)))
    }

    /// Arguments of `hone run` (after any global options).
    pub fn run_args(&self, tag: &str) -> Vec<String> {
        let mut a = vec!["run".to_string(), "--tag".into(), tag.to_string()];
        if let Some(n) = self.max_experiments {
            a.extend(["--max-experiments".into(), n.to_string()]);
        }
        if let Some(t) = &self.time {
            a.extend(["--time".into(), t.clone()]);
        }
        if let Some(k) = &self.agent {
            a.extend(["--agent".into(), k.clone()]);
        }
        if let Some(s) = self.seed {
            a.extend(["--seed".into(), s.to_string()]);
        }
        a
    }

    /// Arguments of `hone finalize`, when the request asks for it.
    pub fn finalize_args(&self, tag: &str) -> Option<Vec<String>> {
        if !(self.finalize || self.pr) {
            return None;
        }
        let mut a = vec!["finalize".to_string(), "--run".into(), tag.to_string()];
        if self.pr {
            a.push("--pr".into());
        }
        if self.squash {
            a.push("--squash".into());
        }
        Some(a)
    }
}

/// `YYYYMMDD-HHMM` (or `-HHMMSS`) in UTC.
pub fn stamp(unix: i64, seconds: bool) -> String {
    let format = if seconds {
        "%Y%m%d-%H%M%S"
    } else {
        "%Y%m%d-%H%M"
    };
    crate::util::utc_text(unix, format)
}

/// Why a run was not started.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum LaunchError {
    /// A run is in progress (started here or by someone else): nothing was started.
    #[error("{0}")]
    Busy(String),
    /// The request itself is wrong.
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Io(String),
}

/// A run that was started.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Launched {
    pub tag: String,
    /// Where its output goes.
    pub log: PathBuf,
}

/// The state of the launcher's current (or last) job.
#[derive(Clone, Debug, Default)]
struct Job {
    tag: String,
    running: bool,
    /// Exit codes of `hone run` and of `hone finalize` (when it ran); `None` = killed or not run.
    run_exit: Option<i32>,
    finalize_exit: Option<i32>,
}

/// What the last job did, for status displays.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct JobStatus {
    pub tag: String,
    pub running: bool,
    pub run_exit: Option<i32>,
    pub finalize_exit: Option<i32>,
}

/// Starts runs as child processes of `program` (the `hone` executable), one at a time.
pub struct Launcher {
    program: PathBuf,
    repo_root: PathBuf,
    spec_path: Option<PathBuf>,
    job: Arc<Mutex<Option<Job>>>,
    /// Signalled (with the tag) whenever a job ends; for tests and status pages.
    on_done: Arc<dyn Fn(&JobStatus) + Send + Sync>,
}

impl Launcher {
    /// `program` is the hone binary to run (`std::env::current_exe()` in production); the spec
    /// file, when given, is passed on with `--spec`.
    pub fn new(program: PathBuf, repo_root: PathBuf, spec_path: Option<PathBuf>) -> Launcher {
        Launcher {
            program,
            repo_root,
            spec_path,
            job: Arc::new(Mutex::new(None)),
            on_done: Arc::new(|_| {}),
        }
    }

    /// Calls `f` from the job's thread each time a job ends.
    pub fn on_done(mut self, f: impl Fn(&JobStatus) + Send + Sync + 'static) -> Launcher {
        self.on_done = Arc::new(f);
        self
    }

    pub fn repo_root(&self) -> &Path {
        &self.repo_root
    }

    /// The current or last job.
    pub fn status(&self) -> Option<JobStatus> {
        let job = self.job.lock().ok()?;
        job.as_ref().map(|j| JobStatus {
            tag: j.tag.clone(),
            running: j.running,
            run_exit: j.run_exit,
            finalize_exit: j.finalize_exit,
        })
    }

    /// Why a new run cannot start now, if it cannot.
    pub fn busy(&self) -> Option<String> {
        if let Ok(job) = self.job.lock() {
            if let Some(j) = job.as_ref().filter(|j| j.running) {
                return Some(format!(
                    "run `{}` is still in progress; wait for it to finish (or stop it), then ask again",
                    j.tag
                ));
            }
        }
        is_running(&self.repo_root).then(|| {
            "another `hone run` is in progress in this repository; wait for it to finish (or stop it), then ask again".to_string()
        })
    }

    /// Starts `hone run` for `req` under `tag`, then `hone finalize` if asked and the run
    /// succeeded. Returns at once; the job goes on in a thread of its own.
    pub fn launch(&self, req: &RunRequest, tag: &str) -> Result<Launched, LaunchError> {
        req.validate().map_err(LaunchError::Invalid)?;
        validate_tag(tag).map_err(|e| LaunchError::Invalid(e.to_string()))?;
        // Holding the job lock from the check to the spawn: two requests cannot both pass.
        let mut job = self
            .job
            .lock()
            .map_err(|_| LaunchError::Io("the launcher's state is poisoned".into()))?;
        if let Some(j) = job.as_ref().filter(|j| j.running) {
            return Err(LaunchError::Busy(format!(
                "run `{}` is still in progress; wait for it to finish (or stop it), then ask again",
                j.tag
            )));
        }
        if is_running(&self.repo_root) {
            return Err(LaunchError::Busy(
                "another `hone run` is in progress in this repository; wait for it to finish (or stop it), then ask again".into(),
            ));
        }
        let dir = StatePaths::new(&self.repo_root).dir.join("automation");
        std::fs::create_dir_all(&dir)
            .map_err(|e| LaunchError::Io(format!("cannot create {}: {e}", dir.display())))?;
        let log = dir.join(format!("{tag}.log"));
        let open_log = || {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .map_err(|e| LaunchError::Io(format!("cannot open {}: {e}", log.display())))
        };
        let child = self
            .command(&req.run_args(tag), open_log()?, open_log()?)
            .spawn()
            .map_err(|e| {
                LaunchError::Io(format!("cannot start {}: {e}", self.program.display()))
            })?;
        *job = Some(Job {
            tag: tag.to_string(),
            running: true,
            ..Default::default()
        });
        drop(job);
        let finalize = req.finalize_args(tag);
        let (log_path, this) = (log.clone(), self.clone_for_thread());
        std::thread::spawn(move || this.follow_job(child, finalize, &log_path));
        Ok(Launched {
            tag: tag.to_string(),
            log,
        })
    }

    /// The launched job's thread: waits for the run, then runs `hone finalize` (`finalize`)
    /// if the run succeeded, records both exits and tells `on_done`.
    fn follow_job(
        &self,
        mut child: std::process::Child,
        finalize: Option<Vec<String>>,
        log_path: &Path,
    ) {
        let run_exit = child.wait().ok().and_then(|s| s.code());
        let mut finalize_exit = None;
        if let (Some(args), Some(0)) = (finalize, run_exit) {
            let opened = (
                std::fs::OpenOptions::new().append(true).open(log_path),
                std::fs::OpenOptions::new().append(true).open(log_path),
            );
            if let (Ok(out), Ok(err)) = opened {
                finalize_exit = self
                    .command(&args, out, err)
                    .status()
                    .ok()
                    .and_then(|s| s.code());
            }
        }
        let status = if let Ok(mut j) = self.job.lock() {
            let j = j.get_or_insert_with(Job::default);
            j.running = false;
            j.run_exit = run_exit;
            j.finalize_exit = finalize_exit;
            JobStatus {
                tag: j.tag.clone(),
                running: false,
                run_exit,
                finalize_exit,
            }
        } else {
            return;
        };
        (self.on_done)(&status);
    }

    fn clone_for_thread(&self) -> Launcher {
        Launcher {
            program: self.program.clone(),
            repo_root: self.repo_root.clone(),
            spec_path: self.spec_path.clone(),
            job: self.job.clone(),
            on_done: self.on_done.clone(),
        }
    }

    fn command(&self, args: &[String], out: std::fs::File, err: std::fs::File) -> Command {
        let mut c = Command::new(&self.program);
        c.arg("-C").arg(&self.repo_root);
        if let Some(s) = &self.spec_path {
            c.arg("--spec").arg(s);
        }
        c.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
        c
    }
}

#[cfg(test)]
mod fake_hone;

#[cfg(test)]
mod tests {
    use super::fake_hone::fake_hone;
    use super::*;
    use std::time::Duration;

    #[test]
    fn requests_validate_and_become_arguments() {
        let r: RunRequest = serde_json::from_str(
            r#"{"tag": "x1", "max_experiments": 5, "time": "30m", "agent": "knobs", "seed": 3, "pr": true, "ref": "refs/heads/main"}"#,
        )
        .unwrap();
        assert_eq!(r.validate(), Ok(()));
        assert_eq!(
            r.run_args("x1"),
            [
                "run",
                "--tag",
                "x1",
                "--max-experiments",
                "5",
                "--time",
                "30m",
                "--agent",
                "knobs",
                "--seed",
                "3"
            ]
        );
        assert_eq!(
            r.finalize_args("x1").unwrap(),
            ["finalize", "--run", "x1", "--pr"]
        );
        let empty: RunRequest = serde_json::from_str("{}").unwrap();
        assert_eq!(empty.finalize_args("t"), None);
        // 2026-01-02 03:04:05 UTC.
        assert_eq!(empty.tag_at(1_767_323_045), "trigger-20260102-030405");
        for (bad, field) in [
            (r#"{"tag": "a b"}"#, "tag:"),
            (r#"{"time": "soon"}"#, "time:"),
            (r#"{"agent": "gpt"}"#, "agent:"),
            (r#"{"max_experiments": 0}"#, "max_experiments:"),
        ] {
            let r: RunRequest = serde_json::from_str(bad).unwrap();
            assert!(r.validate().unwrap_err().starts_with(field), "{bad}");
        }
    }

    #[test]
    fn schedule_requests_are_tagged_with_their_time() {
        let s = ScheduleSpec {
            cron: "0 2 * * *".into(),
            tag: "nightly".into(),
            max_experiments: Some(9),
            time: Some(Duration::from_secs(3600)),
            finalize: true,
            pr: true,
            line: 1,
            ..Default::default()
        };
        let r = RunRequest::from_schedule(&s, 1_767_319_200); // 2026-01-02 02:00 UTC
        assert_eq!(r.tag.as_deref(), Some("nightly-20260102-0200"));
        assert_eq!(r.time.as_deref(), Some("3600s"));
        assert_eq!(r.validate(), Ok(()));
    }

    #[test]
    fn one_job_at_a_time_then_finalize_after_a_good_run() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let l = Launcher::new(fake_hone(tmp.path()), repo.clone(), None)
            .on_done(move |s| tx.send(s.clone()).unwrap());
        let req = RunRequest {
            finalize: true,
            ..Default::default()
        };
        let first = l.launch(&req, "a1").unwrap();
        assert_eq!(first.log, repo.join(".hone/automation/a1.log"));
        match l.launch(&req, "a2") {
            Err(LaunchError::Busy(m)) => {
                assert!(m.contains("run `a1` is still in progress"), "{m}")
            }
            other => panic!("{other:?}"),
        }
        assert!(l.busy().is_some());
        std::fs::write(tmp.path().join("go"), "\n").unwrap();
        let done = rx.recv_timeout(Duration::from_secs(60)).unwrap();
        assert_eq!(
            done,
            JobStatus {
                tag: "a1".into(),
                running: false,
                run_exit: Some(0),
                finalize_exit: Some(0)
            }
        );
        let calls = std::fs::read_to_string(tmp.path().join("calls")).unwrap();
        let root = repo.display();
        assert_eq!(
            calls,
            format!("-C {root} run --tag a1\n-C {root} finalize --run a1\n")
        );
        assert_eq!(l.busy(), None);
        // Another `hone run` holding the repository's lock blocks a start as well.
        let lock = StatePaths::new(&repo).lock();
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock)
            .unwrap();
        use std::os::unix::io::AsRawFd;
        // SAFETY: flock on a valid descriptor owned by `f`.
        assert_eq!(unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) }, 0);
        assert!(matches!(l.launch(&req, "a3"), Err(LaunchError::Busy(_))));
        drop(f);
        assert!(l.launch(&req, "a4").is_ok());
        std::fs::write(tmp.path().join("go"), "\n").unwrap();
        let done = rx.recv_timeout(Duration::from_secs(60)).unwrap();
        assert_eq!(done.tag, "a4");
    }
}
