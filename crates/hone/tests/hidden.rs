//! Processes that hide from hone's sweep: as root, one mounts an empty directory over its own
//! `/proc/<pid>` (no `stat`, no parent, no environment to find it by), one also lays an empty
//! file over the mount table hone would read, one mounts the procfs of a PID namespace of its
//! own over `/proc`; each lives on after the stage that started it unless the sweep finds it.
//! A test binary of its own (the sweep kills every descendant of the test process), whose test
//! runs again in a mount namespace of its own (`unshare -m`): nothing it mounts reaches the
//! machine's `/proc`, where it would fail every bubblewrap sandbox started meanwhile.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::{Duration, Instant};

/// Bound for "this happens promptly": far above any normal latency, so it only catches hangs.
const LIVENESS: Duration = Duration::from_secs(20);

fn alive(pid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// Mounts over processes' entries in `/proc` that this process's namespace has now.
fn proc_mounts() -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|p| p.starts_with("/proc/") && p[6..].starts_with(|c: char| c.is_ascii_digit()))
        .map(str::to_string)
        .collect()
}

/// `/proc` is this process's own procfs again.
fn proc_is_ours() -> bool {
    std::fs::read_link("/proc/self")
        .is_ok_and(|p| p.as_os_str() == std::process::id().to_string().as_str())
}

/// Runs `script` (a stage that leaves a hidden process and exits), waits for the file `ready`,
/// sweeps, and checks that the process whose pid is in `pid_file` is gone and `/proc` is
/// whole again. `false` where the hiding could not be set up here.
fn hidden_and_swept(what: &str, script: &str, ready: &Path, pid_file: &Path) -> bool {
    let status = std::process::Command::new("sh")
        .args(["-c", script])
        .status()
        .unwrap();
    assert!(status.success(), "{what}");
    let deadline = Instant::now() + LIVENESS;
    while !ready.exists() {
        if Instant::now() > deadline {
            eprintln!("skipped {what}: the hiding could not be set up here");
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid: libc::pid_t = std::fs::read_to_string(pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let hidden = alive(pid)
        && (std::fs::read_to_string(format!("/proc/{pid}/stat")).is_err() || !proc_is_ours());
    let killed = hone::exec::kill_orphans();
    let deadline = Instant::now() + LIVENESS;
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let survived = alive(pid);
    if survived {
        // SAFETY: killing this test's own process.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    assert!(hidden, "{what}: the process did not hide");
    assert!(!survived, "{what}: the hidden process survived the sweep");
    assert!(killed >= 1, "{what}");
    assert!(proc_is_ours(), "{what}: /proc is still another procfs");
    assert_eq!(proc_mounts(), Vec::<String>::new(), "{what}");
    true
}

#[test]
fn processes_that_hide_from_proc_are_found_and_killed() {
    if std::env::var_os("HONE_HIDDEN_CHILD").is_some() {
        return hide_and_sweep();
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: only root can mount over /proc (and only root needs this defence)");
        return;
    }
    // This test again, in a private mount namespace: its mounts never reach the machine.
    let out = std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private"])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "processes_that_hide_from_proc_are_found_and_killed",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("HONE_HIDDEN_CHILD", "1")
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            eprintln!("skipped: cannot run unshare ({e})");
            return;
        }
    };
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if said.contains("unshare failed") {
        eprintln!("skipped: no mount namespace of its own here: {said}");
        return;
    }
    assert!(out.status.success(), "{said}");
    assert!(said.contains("1 passed"), "{said}");
}

/// The three ways to hide, each set up by a stage that leaves the process behind, then swept.
fn hide_and_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    std::fs::write(dir.path().join("empty-file"), "").unwrap();
    // SAFETY: gettid has no preconditions.
    let (me, tid) = (std::process::id(), unsafe { libc::gettid() });
    // A mount that is there when hone starts, for one of them to move over its entry.
    std::fs::create_dir(dir.path().join("premounted")).unwrap();
    let premounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "tmpfs"])
        .arg(dir.path().join("premounted"))
        .status()
        .unwrap();
    assert!(premounted.success());
    std::fs::create_dir(dir.path().join("moved")).unwrap();
    // A procfs with options of its own (this namespace's: the machine's is left alone), which
    // one mounted back where /proc went must keep.
    let hardened = std::process::Command::new("sh")
        .args([
            "-c",
            "umount -l /proc && { mount -t proc -o hidepid=invisible proc /proc || { mount -t proc proc /proc; exit 1; }; }",
        ])
        .status()
        .is_ok_and(|s| s.success());
    assert!(hone::exec::become_subreaper());
    let cases = [
        (
            "its own /proc entry",
            format!("mount --bind {d}/empty /proc/$$ || exit 1; echo $$ > {d}/a.tmp; mv {d}/a.tmp {d}/a"),
            "a",
            "a",
        ),
        (
            "its entry and hone's table of mounts",
            format!(
                "mount --bind {d}/empty-file /proc/{me}/mountinfo && mount --bind {d}/empty-file /proc/{me}/task/{tid}/mountinfo \
                 && mount --bind {d}/empty /proc/$$ || exit 1; echo $$ > {d}/b.tmp; mv {d}/b.tmp {d}/b"
            ),
            "b",
            "b",
        ),
        (
            "a mount there at the start, moved over its entry",
            format!("mount --move {d}/premounted /proc/$$ || exit 1; echo $$ > {d}/m.tmp; mv {d}/m.tmp {d}/m"),
            "m",
            "m",
        ),
        (
            "/proc unmounted",
            format!("echo $$ > {d}/u; umount -l /proc && touch {d}/u-ready"),
            "u-ready",
            "u",
        ),
        (
            "/proc moved away",
            format!("echo $$ > {d}/v; mount --move /proc {d}/moved && touch {d}/v-ready"),
            "v-ready",
            "v",
        ),
        (
            "another PID namespace's procfs over /proc",
            format!(
                "echo $$ > {d}/c; exec unshare -p -f sh -c 'mount -t proc proc /proc && touch {d}/c-ready; exec sleep 300'"
            ),
            "c-ready",
            "c",
        ),
    ];
    for (what, hide, ready, pid) in cases {
        let script = format!(
            "setsid sh -c '{}; exec sleep 300' > /dev/null 2>&1 < /dev/null &",
            hide.replace('\'', "'\\''")
        );
        hidden_and_swept(
            what,
            &script,
            &dir.path().join(ready),
            &dir.path().join(pid),
        );
    }
    if hardened {
        let options = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .filter(|l| l.split(' ').nth(4) == Some("/proc"))
            .map(str::to_string)
            .next_back()
            .unwrap();
        assert!(options.contains("hidepid=invisible"), "{options}");
    }
    // And the run is told.
    let notes = hone::exec::unhide_notes();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("mounted a procfs on /proc again")),
        "{notes:?}"
    );
}
