//! A process that hides from hone's sweep: as root, it mounts an empty directory over its own
//! `/proc/<pid>` (no `stat`, no parent, no environment to find it by) and lives on after the
//! stage that started it, free to tamper with the next verification. A test binary of its own:
//! while the mount is there bubblewrap cannot mount a `/proc` for a sandbox, which would fail
//! other tests' sandboxes, and the sweep kills every descendant of the test process.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

/// Bound for "this happens promptly": far above any normal latency, so it only catches hangs.
const LIVENESS: Duration = Duration::from_secs(20);

fn alive(pid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

fn mounted_over(pid: libc::pid_t) -> bool {
    let at = format!(" /proc/{pid} ");
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.contains(&at))
}

#[test]
fn a_process_that_hides_its_proc_entry_is_found_and_killed() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: only root can mount over /proc (and only root needs this defence)");
        return;
    }
    assert!(hone::exec::become_subreaper());
    let dir = tempfile::tempdir().unwrap();
    let (empty, pid_file) = (dir.path().join("empty"), dir.path().join("pid"));
    std::fs::create_dir(&empty).unwrap();
    // The stage: it leaves a process in a session of its own and exits, so the process comes
    // to the test (the subreaper), hidden once it has written its pid.
    let script = format!(
        "setsid sh -c 'mount --bind {e} /proc/$$ || exit 1; echo $$ > {p}.tmp; mv {p}.tmp {p}; exec sleep 300' \
         > /dev/null 2>&1 < /dev/null &",
        e = empty.display(),
        p = pid_file.display()
    );
    let status = std::process::Command::new("sh")
        .args(["-c", &script])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + LIVENESS;
    while !pid_file.exists() {
        if Instant::now() > deadline {
            eprintln!("skipped: mount --bind over /proc failed here (no CAP_SYS_ADMIN?)");
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid: libc::pid_t = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Hidden: alive, yet /proc says nothing of it.
    let hidden = alive(pid) && std::fs::read_to_string(format!("/proc/{pid}/stat")).is_err();
    let killed = hone::exec::kill_orphans();
    let deadline = Instant::now() + LIVENESS;
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let (survived, still_mounted) = (alive(pid), mounted_over(pid));
    if survived || still_mounted {
        // Leave nothing behind: a mount over /proc fails every sandbox started after it.
        let _ = std::process::Command::new("umount")
            .args(["-l", &format!("/proc/{pid}")])
            .status();
        // SAFETY: killing this test's own process.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    assert!(hidden, "the process did not hide");
    assert!(!survived, "the hidden process survived the sweep");
    assert!(!still_mounted, "the mount that hid it is still there");
    assert!(killed >= 1);
}
