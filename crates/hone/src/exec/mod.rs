//! Processes: running a shell command in its own process group under a timeout.
// TEMPORARY STUB: replaced by the real runner from branch helper/exec.
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};
pub struct ExecRequest {
    pub command: String,
    pub cwd: PathBuf,
    pub env: Vec<(OsString, OsString)>,
    pub timeout: Option<Duration>,
    pub kill_grace: Duration,
    pub drain_timeout: Duration,
    pub log_path: PathBuf,
    pub max_log_bytes: u64,
}
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
    TimedOut,
    Cancelled,
}
#[derive(Debug)]
pub struct ExecOutcome {
    pub exit: Exit,
    pub duration: Duration,
    pub log_bytes: u64,
    pub pipes_left_open: bool,
}
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ExecError(String);
pub struct Running {
    child: std::process::Child,
    start: Instant,
    log: PathBuf,
}
pub fn spawn(req: &ExecRequest) -> Result<Running, ExecError> {
    let child = std::process::Command::new("sh")
        .arg("-c")
        .arg(&req.command)
        .current_dir(&req.cwd)
        .env_clear()
        .envs(req.env.iter().map(|(a, b)| (a, b)))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| ExecError(e.to_string()))?;
    Ok(Running {
        child,
        start: Instant::now(),
        log: req.log_path.clone(),
    })
}
impl Running {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
    pub fn start_time(&self) -> Option<u64> {
        None
    }
    pub fn wait(
        self,
        on_line: &mut dyn FnMut(&str),
        _cancel: &dyn Fn() -> bool,
    ) -> Result<ExecOutcome, ExecError> {
        let out = self
            .child
            .wait_with_output()
            .map_err(|e| ExecError(e.to_string()))?;
        let mut all = out.stdout.clone();
        all.extend_from_slice(&out.stderr);
        let _ = std::fs::write(&self.log, &all);
        for l in String::from_utf8_lossy(&all).lines() {
            on_line(l);
        }
        Ok(ExecOutcome {
            exit: Exit::Code(out.status.code().unwrap_or(-1)),
            duration: self.start.elapsed(),
            log_bytes: all.len() as u64,
            pipes_left_open: false,
        })
    }
}
pub fn kill_stale_group(_pid: u32, _start_time: Option<u64>) -> bool {
    false
}
pub fn process_start_time(_pid: u32) -> Option<u64> {
    None
}
