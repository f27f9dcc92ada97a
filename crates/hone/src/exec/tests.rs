//! Tests of `exec` with real processes. No test sleeps in place of waiting for an event;
//! the only timing checks are generous upper bounds that catch a hang.

use super::*;
use std::cell::Cell;
use std::time::{Duration, Instant};

/// Bound for "this happens promptly": far above any normal latency, so it only catches hangs.
const LIVENESS: Duration = Duration::from_secs(20);

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn request(&self, command: &str) -> ExecRequest {
        ExecRequest {
            command: command.to_owned(),
            cwd: self.dir.path().to_owned(),
            env: vec![("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into())],
            timeout: Some(Duration::from_secs(60)),
            kill_grace: Duration::from_secs(5),
            drain_timeout: Duration::from_secs(5),
            log_path: self.path("verify.log"),
            max_log_bytes: 1 << 20,
            limits: Limits::default(),
            wrapper: Vec::new(),
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.path("verify.log")).expect("read log")
    }

    /// Reads a pid the command wrote to `name`. The command writes it before anything that
    /// can time out, so by the time `wait` returns the file is complete.
    fn pid_from(&self, name: &str) -> u32 {
        let text = std::fs::read_to_string(self.path(name)).expect("read pid file");
        text.trim().parse().expect("pid file holds a pid")
    }
}

/// Runs the request to the end, collecting every line.
fn run(req: &ExecRequest) -> (ExecOutcome, Vec<String>) {
    let mut lines = Vec::new();
    let outcome = spawn(req)
        .expect("spawn")
        .wait(&mut |l| lines.push(l.to_owned()), &|| false)
        .expect("wait");
    (outcome, lines)
}

/// `kill(target, 0)`: whether a process (target > 0) or group (target < 0) exists.
fn exists(target: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks for existence and permission.
    unsafe { libc::kill(target, 0) == 0 }
}

fn pgid(pid: u32) -> libc::pid_t {
    libc::pid_t::try_from(pid).expect("pid fits in pid_t")
}

/// Waits (bounded) until no process of group `pgid` is alive. SIGKILL is delivered
/// asynchronously and orphans are reaped by init, so "gone" may lag the kill slightly.
fn assert_group_gone(pgid: libc::pid_t) {
    let start = Instant::now();
    while exists(-pgid) {
        assert!(
            start.elapsed() < LIVENESS,
            "process group {pgid} still alive {LIVENESS:?} after hone killed it"
        );
        std::thread::yield_now();
    }
    assert_eq!(
        io::Error::last_os_error().raw_os_error(),
        Some(libc::ESRCH),
        "kill(-pgid, 0) should fail with ESRCH"
    );
}

/// Whether `pid` is a live process (not gone and not a zombie awaiting its reaper).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().next());
            state != Some("Z")
        }
        Err(_) => false,
    }
}

fn assert_process_dies(pid: u32) {
    let start = Instant::now();
    while alive(pid) {
        assert!(
            start.elapsed() < LIVENESS,
            "process {pid} outlived the verifier"
        );
        std::thread::yield_now();
    }
}

#[test]
fn exit_codes_are_reported() {
    let fx = Fixture::new();
    for code in [0, 1, 3, 255] {
        let (outcome, _) = run(&fx.request(&format!("exit {code}")));
        assert_eq!(outcome.exit, Exit::Code(code));
        // (Not `pipes_left_open`: another test thread's child holds a copy of every pipe
        // for the instant between its fork and its exec, so that is not this test's to say.)
    }
}

#[test]
fn death_by_signal_is_reported() {
    let fx = Fixture::new();
    let (outcome, _) = run(&fx.request("kill -9 $$"));
    assert_eq!(outcome.exit, Exit::Signal(libc::SIGKILL));
    let (outcome, _) = run(&fx.request("kill -TERM $$"));
    assert_eq!(outcome.exit, Exit::Signal(libc::SIGTERM));
}

#[test]
fn lines_from_stdout_and_stderr_reach_the_callback_and_the_log() {
    let fx = Fixture::new();
    let (outcome, lines) = run(&fx
        .request("echo 'val_bpb: 0.9979'; echo 'METRIC peak_vram_mb=41000' >&2; printf 'last=1'"));
    assert_eq!(outcome.exit, Exit::Code(0));
    let mut sorted = lines.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        ["METRIC peak_vram_mb=41000", "last=1", "val_bpb: 0.9979"]
    );
    let log = fx.log();
    for line in &lines {
        assert!(log.contains(line.as_str()), "log lacks {line:?}: {log:?}");
    }
    assert_eq!(outcome.log_bytes, log.len() as u64);
}

#[test]
fn order_within_one_stream_is_kept() {
    let fx = Fixture::new();
    let (_, lines) =
        run(&fx.request("i=0; while [ $i -lt 500 ]; do echo \"step=$i\"; i=$((i+1)); done"));
    let expected: Vec<String> = (0..500).map(|i| format!("step={i}")).collect();
    assert_eq!(lines, expected);
}

#[test]
fn large_output_on_both_streams_does_not_deadlock() {
    let fx = Fixture::new();
    let cmd = "head -c 3000000 /dev/zero | tr '\\0' a; head -c 3000000 /dev/zero | tr '\\0' b >&2";
    let (outcome, lines) = run(&fx.request(cmd));
    assert_eq!(outcome.exit, Exit::Code(0));
    assert_eq!(outcome.log_bytes, 6_000_000);
    // Two unterminated 3 MB lines, each cut to the cap for the callback.
    assert_eq!(lines.len(), 2);
    assert!(lines.iter().all(|l| l.len() == MAX_LINE_BYTES));
}

/// `cmd` (which writes its pid to `leader.pid`) runs past a 200 ms timeout, with `kill_grace`
/// when given: it times out promptly and its whole group is gone.
fn assert_timeout_kills_the_group(cmd: &str, kill_grace: Option<Duration>) {
    let fx = Fixture::new();
    let mut req = fx.request(cmd);
    req.timeout = Some(Duration::from_millis(200));
    if let Some(grace) = kill_grace {
        req.kill_grace = grace;
    }
    let started = Instant::now();
    let (outcome, _) = run(&req);
    assert_eq!(outcome.exit, Exit::TimedOut);
    assert!(started.elapsed() < LIVENESS);
    assert_group_gone(pgid(fx.pid_from("leader.pid")));
}

#[test]
fn timeout_terminates_sleep() {
    assert_timeout_kills_the_group("echo $$ > leader.pid; exec sleep 1000", None);
}

#[test]
fn timeout_kills_a_grandchild_that_holds_stdout() {
    assert_timeout_kills_the_group(
        "echo $$ > leader.pid; (sleep 1000 &) ; sleep 1000",
        Some(Duration::from_millis(200)),
    );
}

#[test]
fn timeout_gives_a_grace_period_to_clean_up() {
    let fx = Fixture::new();
    // The trap runs on SIGTERM; `sleep` runs in the background so that the shell can run
    // the trap as soon as the signal arrives.
    let mut req =
        fx.request("trap 'echo cleaned-up > done.txt; exit 7' TERM; echo ready; sleep 1000 & wait");
    req.timeout = Some(Duration::from_millis(200));
    req.kill_grace = Duration::from_secs(10);
    let (outcome, lines) = run(&req);
    assert_eq!(outcome.exit, Exit::TimedOut);
    assert_eq!(lines, ["ready"]);
    assert_eq!(
        std::fs::read_to_string(fx.path("done.txt")).expect("trap ran"),
        "cleaned-up\n"
    );
}

#[test]
fn a_leader_that_exits_while_a_grandchild_holds_the_pipe_returns_and_kills_it() {
    let fx = Fixture::new();
    let mut req = fx.request("sleep 1000 & echo $! > grandchild.pid; echo 'score: 1'; exit 0");
    req.drain_timeout = Duration::from_millis(200);
    let started = Instant::now();
    let (outcome, lines) = run(&req);
    assert!(started.elapsed() < LIVENESS);
    assert_eq!(outcome.exit, Exit::Code(0));
    assert!(outcome.pipes_left_open);
    assert_eq!(lines, ["score: 1"]);
    assert_process_dies(fx.pid_from("grandchild.pid"));
}

#[test]
fn a_background_process_without_the_pipes_is_killed_too() {
    let fx = Fixture::new();
    // The background job lets go of the pipes before it says its pid; the leader exits only
    // then (else, for an instant after the fork, the job still holds them).
    let (outcome, _) = run(&fx.request(
        "sh -c 'exec >/dev/null 2>&1; echo $$ > grandchild.tmp; mv grandchild.tmp grandchild.pid; exec sleep 1000' & \
         while [ ! -s grandchild.pid ]; do :; done; exit 0",
    ));
    assert_eq!(outcome.exit, Exit::Code(0));
    assert!(!outcome.pipes_left_open);
    assert_process_dies(fx.pid_from("grandchild.pid"));
}

#[test]
fn cancel_kills_the_group_at_once() {
    let fx = Fixture::new();
    let req = fx.request("echo $$ > leader.pid; echo started; sleep 1000");
    let seen = Cell::new(false);
    let running = spawn(&req).expect("spawn");
    let pid = running.pid();
    let started = Instant::now();
    let outcome = running
        .wait(&mut |l| seen.set(seen.get() || l == "started"), &|| {
            seen.get()
        })
        .expect("wait");
    assert_eq!(outcome.exit, Exit::Cancelled);
    assert!(started.elapsed() < LIVENESS);
    assert_eq!(fx.pid_from("leader.pid"), pid);
    assert_group_gone(pgid(pid));
}

#[test]
fn a_stop_terminates_with_the_grace_then_kills() {
    // hone's own stop (a pruned run): SIGTERM reaches the trap, which cleans up; a grandchild
    // that ignores it dies at the end of the grace.
    let fx = Fixture::new();
    let mut req = fx.request(
        "echo $$ > leader.pid; (trap '' TERM; sleep 1000 & echo $! > stubborn.pid); \
         trap 'echo cleaned-up > done.txt; exit 7' TERM; echo step=1; sleep 1000 & wait",
    );
    req.kill_grace = Duration::from_millis(300);
    let seen = Cell::new(false);
    let outcome = spawn(&req)
        .expect("spawn")
        .wait_or_stop(
            &mut |l| seen.set(seen.get() || l == "step=1"),
            &|| false,
            &|| seen.get(),
        )
        .expect("wait");
    assert_eq!(outcome.exit, Exit::Cancelled);
    assert_eq!(
        std::fs::read_to_string(fx.path("done.txt")).expect("the TERM trap ran"),
        "cleaned-up\n"
    );
    assert_process_dies(fx.pid_from("stubborn.pid"));
    assert_group_gone(pgid(fx.pid_from("leader.pid")));
}

#[test]
fn dropping_a_running_process_kills_its_group() {
    let fx = Fixture::new();
    let running = spawn(&fx.request("sleep 1000")).expect("spawn");
    let pid = running.pid();
    drop(running);
    assert_group_gone(pgid(pid));
}

#[test]
fn log_cap_keeps_head_and_tail_with_a_marker() {
    let fx = Fixture::new();
    let mut req = fx.request("i=0; while [ $i -lt 2000 ]; do echo \"line $i\"; i=$((i+1)); done");
    req.max_log_bytes = 1000;
    let (outcome, lines) = run(&req);
    assert_eq!(
        lines.len(),
        2000,
        "the callback sees every line, whatever the cap"
    );
    let full: String = (0..2000).map(|i| format!("line {i}\n")).collect();
    assert_eq!(outcome.log_bytes, full.len() as u64);
    let log = fx.log();
    let omitted = full.len() - 1000;
    let expected = format!(
        "{}{}{}",
        &full[..500],
        if full[..500].ends_with('\n') {
            ""
        } else {
            "\n"
        },
        log::omission_marker(omitted as u64)
    ) + &full[full.len() - 500..];
    assert_eq!(log, expected);
    assert!(log.starts_with("line 0\n"));
    assert!(log.ends_with("line 1999\n"));
    assert!(log.contains(&format!("[hone: {omitted} bytes omitted]")));
}

#[test]
fn the_environment_is_exactly_the_one_given() {
    let fx = Fixture::new();
    let mut req = fx.request("/usr/bin/env");
    req.env = vec![
        ("HONE_TEST_VAR".into(), "some value".into()),
        ("PATH".into(), "/usr/bin:/bin".into()),
    ];
    let (outcome, lines) = run(&req);
    assert_eq!(outcome.exit, Exit::Code(0));
    assert!(lines.contains(&"HONE_TEST_VAR=some value".to_owned()));
    assert!(lines.contains(&"PATH=/usr/bin:/bin".to_owned()));
    // The shell itself may export a few variables of its own (dash sets PWD).
    let shell_own = ["PWD=", "OLDPWD=", "SHLVL=", "_="];
    for line in &lines {
        let ours = line == "HONE_TEST_VAR=some value" || line == "PATH=/usr/bin:/bin";
        assert!(
            ours || shell_own.iter().any(|p| line.starts_with(p)),
            "unexpected variable leaked into the verifier: {line}"
        );
    }
}

/// The error of spawning `true` with a request that `spoil` changed.
fn spawn_error(spoil: impl FnOnce(&Fixture, &mut ExecRequest)) -> ExecError {
    let fx = Fixture::new();
    let mut req = fx.request("true");
    spoil(&fx, &mut req);
    spawn(&req).err().expect("spawn must fail")
}

#[test]
fn missing_cwd_is_an_error_that_says_what_to_do() {
    let err = spawn_error(|fx, req| req.cwd = fx.path("no-such-dir"));
    assert!(matches!(err, ExecError::MissingCwd(_)));
    assert!(err.to_string().contains("create it"), "{err}");
}

#[test]
fn unwritable_log_is_an_error() {
    let err = spawn_error(|fx, req| req.log_path = fx.path("missing-dir/verify.log"));
    assert!(matches!(err, ExecError::Log { .. }), "{err}");
}

#[test]
fn kill_stale_group_checks_the_start_time() {
    let fx = Fixture::new();
    let running = spawn(&fx.request("sleep 1000")).expect("spawn");
    let pid = running.pid();
    let start = running.start_time().expect("/proc is available on Linux");
    assert_eq!(process_start_time(pid), Some(start));

    assert!(!kill_stale_group(pid, Some(start + 1)));
    assert!(!kill_stale_group(pid, None));
    assert!(alive(pid), "a wrong start time must not kill anything");

    assert!(kill_stale_group(pid, Some(start)));
    let outcome = running.wait(&mut |_| {}, &|| false).expect("wait");
    assert_eq!(outcome.exit, Exit::Signal(libc::SIGKILL));
    assert!(!kill_stale_group(pid, Some(start)), "the group is gone");
}

#[test]
fn a_grandchild_that_ignores_sigterm_is_killed_after_the_grace() {
    let fx = Fixture::new();
    let mut req = fx.request(
        "echo $$ > leader.pid; (trap '' TERM; sleep 1000 & echo $! > stubborn.pid); sleep 1000",
    );
    req.timeout = Some(Duration::from_millis(200));
    req.kill_grace = Duration::from_millis(300);
    let (outcome, _) = run(&req);
    assert_eq!(outcome.exit, Exit::TimedOut);
    assert!(
        outcome.pipes_left_open,
        "the stubborn grandchild held stdout past the grace"
    );
    assert_process_dies(fx.pid_from("stubborn.pid"));
    assert_group_gone(pgid(fx.pid_from("leader.pid")));
}

#[test]
fn a_running_verifier_can_be_waited_on_from_another_thread() {
    fn assert_send<T: Send>() {}
    assert_send::<Running>();
    assert_send::<ExecOutcome>();
}

#[test]
fn output_written_after_the_leader_exits_does_not_count() {
    // A verifier whose background job prints a better metric after the verifier exited: only
    // what was written before the exit may count, and the job does not outlive the run.
    let fx = Fixture::new();
    let (outcome, lines) = run(
        &fx.request("(sleep 0.5; echo 'score: 999') & echo $! > late.pid; echo 'score: 1'; exit 0")
    );
    assert_eq!(outcome.exit, Exit::Code(0));
    assert!(outcome.pipes_left_open, "the background job held stdout");
    assert_eq!(lines, ["score: 1"]);
    assert!(!fx.log().contains("999"), "{}", fx.log());
    assert_process_dies(fx.pid_from("late.pid"));
}

#[test]
fn everything_the_leader_wrote_before_exiting_is_read() {
    // Output still in the pipes when the leader exits (a long burst, a last line without a
    // newline, on both streams) is read in full after the group is stopped.
    let fx = Fixture::new();
    let (outcome, lines) = run(&fx.request(
        "i=0; while [ $i -lt 2000 ]; do echo \"line $i\"; i=$((i+1)); done; echo err >&2; printf 'score: 3'",
    ));
    assert_eq!(outcome.exit, Exit::Code(0));
    assert!(!outcome.pipes_left_open);
    assert_eq!(
        lines.len(),
        2002,
        "{:?}",
        &lines[lines.len().saturating_sub(3)..]
    );
    assert!(lines.contains(&"err".to_string()));
    assert!(lines.contains(&"score: 3".to_string()));
    assert_eq!(lines[1999], "line 1999");
}

/// `kill_orphans` looks for children only when the kernel says there may be one: a child
/// that left hone's process group counts, running and as a zombie (the other side, "none",
/// cannot be asserted here: other tests of this process have children at any moment).
#[test]
fn has_children_sees_a_child_running_and_as_a_zombie_until_reaped() {
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .process_group(0)
        .spawn()
        .unwrap();
    assert!(super::orphans::has_children());
    child.kill().unwrap();
    // A zombie until waited for: still a child.
    assert!(super::orphans::has_children());
    // Still there to be reaped: `has_children` reaped nothing.
    child.wait().unwrap();
}

/// `kill_orphans` kills a whole family at once: `descendants_of` finds a grandchild's
/// grandchild with its own parent (a chain killed one level a round outlasted the rounds).
#[test]
fn descendants_are_found_however_deep() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("deepest");
    // Three shells deep, each waiting for its child; the deepest writes its pid.
    let script = format!(
        "sh -c 'sh -c \"echo \\$\\$ > {p}.tmp && mv {p}.tmp {p}; exec sleep 30\" & wait' & wait",
        p = pid_file.display()
    );
    let mut child = std::process::Command::new("sh")
        .args(["-c", &script])
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !pid_file.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let deepest: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let family = super::orphans::descendants_of(std::process::id());
    let found = family.iter().find(|&&(p, _, _)| p == deepest);
    // Its parent is a descendant too, not hone; its start time is known.
    let parent = found.map(|&(_, parent, _)| parent);
    assert!(found.is_some_and(|f| f.2.is_some()));
    assert!(
        parent.is_some_and(|p| family.iter().any(|&(q, _, _)| q as u32 == p)),
        "{deepest} in {family:?}"
    );
    assert!(family.iter().any(|&(p, _, _)| p as u32 == child.id()));
    // SAFETY: killing the process we spawned and its group-less descendants by pid.
    for &(p, _, _) in &family {
        if p == deepest || p as u32 == child.id() {
            unsafe {
                libc::kill(p, libc::SIGKILL);
            }
        }
    }
    child.wait().unwrap();
}

/// A wrapped command (a sandbox: `bwrap` started through a shell) dies with the thread that
/// started it, as bubblewrap's `--die-with-parent` made it when bubblewrap was the leader: a
/// hone killed mid-run leaves no sandbox behind.
#[test]
fn a_wrapped_command_dies_with_the_thread_that_started_it() {
    let f = Fixture::new();
    let mut req = f.request("sleep 600");
    // A leader that stays a process of its own (it runs the command as its child).
    req.wrapper = vec![
        "/bin/sh".into(),
        "-c".into(),
        "\"$@\"; :".into(),
        "wrapper".into(),
    ];
    let leader = std::thread::scope(|s| {
        s.spawn(|| {
            let running = spawn(&req).expect("spawn");
            let pid = running.pid();
            // Left running, as if hone had died: no wait, no drop.
            std::mem::forget(running);
            pid
        })
        .join()
        .expect("the thread")
    });
    let pid = libc::pid_t::try_from(leader).expect("pid fits in pid_t");
    let deadline = Instant::now() + LIVENESS;
    let mut status = 0;
    // SAFETY: waitpid on our own child with a valid pointer; WNOHANG never blocks.
    loop {
        // SAFETY: as above.
        match unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } {
            0 if Instant::now() > deadline => {
                // SAFETY: kill of our own child's group.
                unsafe { libc::kill(-pid, libc::SIGKILL) };
                panic!("the wrapper outlived the thread that started it");
            }
            0 => std::thread::yield_now(),
            reaped => {
                assert_eq!(reaped, pid, "{}", std::io::Error::last_os_error());
                break;
            }
        }
    }
    assert!(libc::WIFSIGNALED(status), "{status}");
    assert_eq!(libc::WTERMSIG(status), libc::SIGKILL);
    // SAFETY: kill of our own child's group (the command, orphaned).
    unsafe { libc::kill(-pid, libc::SIGKILL) };
}

/// A wrapper runs outside the sandbox, in the worktree: it starts with the loader's and the
/// program search paths cleaned of relative entries, and hands the command inside what it was
/// given through `--setenv` (here a script that does what bubblewrap does with them).
#[test]
fn a_wrapper_gets_cleaned_search_paths_and_the_command_gets_them_as_given() {
    let f = Fixture::new();
    let wrapper = f.path("wrapper.sh");
    std::fs::write(
        &wrapper,
        "printf '%s|%s' \"$LD_LIBRARY_PATH\" \"$PATH\" > outside\n\
         while [ \"$1\" = --setenv ]; do export \"$2=$3\"; shift 3; done\n\
         [ \"$1\" = -- ] && shift\nexec \"$@\"\n",
    )
    .expect("write");
    let mut req = f.request("printf '%s|%s' \"$LD_LIBRARY_PATH\" \"$PATH\" > inside");
    req.env = vec![
        ("PATH".into(), ":/usr/bin:/bin".into()),
        ("LD_LIBRARY_PATH".into(), "build/lib:/usr/lib".into()),
        ("OTHER".into(), "x:y".into()),
    ];
    req.wrapper = vec!["/bin/sh".into(), wrapper.into_os_string(), "--".into()];
    let (outcome, _) = run(&req);
    assert_eq!(outcome.exit, Exit::Code(0), "{}", f.log());
    let read = |name: &str| std::fs::read_to_string(f.path(name)).expect("read");
    assert_eq!(read("outside"), "/usr/lib|/usr/bin:/bin");
    assert_eq!(read("inside"), "build/lib:/usr/lib|:/usr/bin:/bin");
    // Unwrapped, the command gets its environment as given.
    req.wrapper.clear();
    let (outcome, _) = run(&req);
    assert_eq!(outcome.exit, Exit::Code(0), "{}", f.log());
    assert_eq!(read("inside"), "build/lib:/usr/lib|:/usr/bin:/bin");
}

/// Every search path of the environment goes inside, in order, so that a later value of a
/// name still wins there; other variables are left alone.
#[test]
fn a_wrapped_request_sends_every_search_path_inside_in_order() {
    let f = Fixture::new();
    let mut req = f.request("true");
    req.env = vec![
        ("LD_LIBRARY_PATH".into(), "build/lib".into()),
        ("OTHER".into(), ":x".into()),
        ("LD_LIBRARY_PATH".into(), "/opt/gpu0/lib".into()),
    ];
    req.wrapper = vec![
        "bwrap".into(),
        "--ro-bind".into(),
        "/".into(),
        "/".into(),
        "--".into(),
    ];
    let (wrapper, env) = req.confined();
    let s = |v: &[OsString]| {
        v.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        s(&wrapper),
        [
            "bwrap",
            "--ro-bind",
            "/",
            "/",
            "--setenv",
            "LD_LIBRARY_PATH",
            "build/lib",
            "--setenv",
            "LD_LIBRARY_PATH",
            "/opt/gpu0/lib",
            "--"
        ]
    );
    let env = crate::util::env_strings(&env);
    assert_eq!(
        env,
        [
            ("LD_LIBRARY_PATH".to_string(), String::new()),
            ("OTHER".to_string(), ":x".to_string()),
            ("LD_LIBRARY_PATH".to_string(), "/opt/gpu0/lib".to_string())
        ]
    );
}
