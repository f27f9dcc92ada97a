//! Killing what an experiment left running, by its `HONE_JOB` token, against processes that
//! try to slip through. A test binary of its own: its processes spin on the CPU for seconds,
//! and beside the library's tests they starved timing-sensitive ones (a child forked by
//! another test held a pipe open while it waited for a CPU).

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use hone::exec::kill_groups_with_env;

/// Bound for "this happens promptly": far above any normal latency, so it only catches hangs.
const LIVENESS: Duration = Duration::from_secs(20);

/// The processes of `token` still running (zombies do not count).
fn running_with_token(token: &str) -> Vec<u32> {
    let needle = format!("HONE_JOB={token}");
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
        });
        if !zombie && env.split(|b| *b == 0).any(|v| v == needle.as_bytes()) {
            found.push(pid);
        }
    }
    found
}

/// Processes that move between two process groups of their session as fast as they can:
/// the group read from /proc may be another by the time it is signalled, so each process is
/// signalled itself too (a build that signalled only the group left survivors in about one
/// round in three).
#[test]
fn processes_that_flip_between_groups_are_killed_by_their_token() {
    // A reaper without the token (a child subreaper) starts the flippers with it and reaps
    // what the kill leaves, so no zombie outlives the test where PID 1 reaps nothing. The
    // flippers' session leader keeps their second group alive without the token (the test
    // ends it).
    let script = r#"
import ctypes, os, subprocess, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
flippers = """
import os, sys
d = sys.argv[1]
if os.fork():
    os._exit(0)
os.setsid()
leader = os.getpid()
for k in range(4):
    if os.fork() == 0:
        p = os.path.join(d, "f%d" % k)
        open(p + ".tmp", "w").write(str(os.getpid()))
        os.rename(p + ".tmp", p)
        while True:
            for g in (0, leader):
                try:
                    os.setpgid(0, g)
                except OSError:
                    pass
p = os.path.join(d, "leader")
open(p + ".tmp", "w").write(str(leader))
os.rename(p + ".tmp", p)
env = {k: v for k, v in os.environ.items() if k != "HONE_JOB"}
os.execve("/bin/sleep", ["sleep", "60"], env)
"""
env = dict(os.environ, HONE_JOB=sys.argv[2])
subprocess.Popen([sys.executable, "-c", flippers, sys.argv[1]], env=env)
while True:
    try:
        os.waitpid(-1, 0)
    except ChildProcessError:
        break
"#;
    let mut left = Vec::new();
    for round in 0..20 {
        let dir = tempfile::tempdir().expect("tempdir");
        let token = format!("flip-{}-{round}", std::process::id());
        let mut reaper = std::process::Command::new("python3")
            .args(["-c", script])
            .arg(dir.path())
            .arg(&token)
            .spawn()
            .expect("python3");
        let deadline = Instant::now() + LIVENESS;
        while !dir.path().join("leader").exists()
            || (0..4).any(|k| !dir.path().join(format!("f{k}")).exists())
        {
            assert!(Instant::now() < deadline, "the flippers never started");
            std::thread::yield_now();
        }
        let leader: libc::pid_t = std::fs::read_to_string(dir.path().join("leader"))
            .expect("the leader's pid")
            .trim()
            .parse()
            .expect("a pid");
        // Until it runs `sleep`, the leader still carries the token.
        while !std::fs::read(format!("/proc/{leader}/cmdline"))
            .is_ok_and(|c| c.starts_with(b"sleep"))
        {
            assert!(Instant::now() < deadline, "the leader never slept");
            std::thread::yield_now();
        }
        kill_groups_with_env("HONE_JOB", &token);
        // A killed process takes a moment to go: a survivor is one still there much later
        // (the flippers never stop by themselves).
        let deadline = Instant::now() + LIVENESS;
        let survivors = loop {
            let running = running_with_token(&token);
            if running.is_empty() || Instant::now() > deadline {
                break running;
            }
            std::thread::yield_now();
        };
        for pid in &survivors {
            // SAFETY: cleaning up this test's own processes.
            unsafe { libc::kill(*pid as libc::pid_t, libc::SIGKILL) };
        }
        left.extend(survivors.into_iter().map(|p| (round, p)));
        // SAFETY: ending this test's own process.
        unsafe { libc::kill(leader, libc::SIGKILL) };
        // It ends once it has reaped every process of the test.
        let _ = reaper.wait();
    }
    assert!(left.is_empty(), "survived the kill: {left:?}");
}
