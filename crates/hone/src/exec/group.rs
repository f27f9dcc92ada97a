//! Process groups: signalling a whole group, watching the leader without reaping it, and
//! recognising a group again after hone itself crashed.
//!
//! Every verifier runs as the leader of its own process group (pgid == pid of `/bin/sh`), so
//! one `killpg` reaches everything it started, however deep, unless a process deliberately
//! left the group (`setsid`, `setpgid`); such escapees are beyond hone's reach by design.
//!
//! **The leader is never reaped before the last signal.** A pgid stays reserved by the kernel
//! while any process, zombie leader included, still uses it. We observe the leader's exit
//! with `waitid(WNOWAIT)` (or a pidfd), which leaves it a zombie, send the final `SIGKILL` to
//! the group, and only then reap it. So a `killpg` from hone can never reach a stranger's
//! group that happened to be given the same number.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// Sends `signal` to every process in group `pgid`.
///
/// Returns `Ok(false)` when the group no longer exists (`ESRCH`), which is not an error for
/// callers: a group that is gone needs no killing. Refuses pgid 0 and 1, which `killpg`
/// would read as "our own group" and "init".
pub(super) fn signal_group(pgid: u32, signal: libc::c_int) -> io::Result<bool> {
    let Some(pgid) = checked_pgid(pgid) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to signal process group {pgid}"),
        ));
    };
    // SAFETY: killpg has no memory-safety preconditions; pgid > 1 was checked above.
    let rc = unsafe { libc::killpg(pgid, signal) };
    if rc == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::ESRCH) {
        Ok(false)
    } else {
        Err(err)
    }
}

fn checked_pgid(pgid: u32) -> Option<libc::pid_t> {
    libc::pid_t::try_from(pgid).ok().filter(|&p| p > 1)
}

/// Whether the child `pid` has exited, without reaping it (`waitid` with `WNOWAIT`).
///
/// `ECHILD` (someone else reaped it) also counts as exited.
pub(super) fn leader_exited(pid: u32) -> io::Result<bool> {
    let id: libc::id_t = pid;
    loop {
        // SAFETY: siginfo_t is plain old data; all-zero is a valid value, and waitid only
        // writes into the struct we pass.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a valid, writable siginfo_t for the duration of the call.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                id,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        if rc == 0 {
            // SAFETY: after a successful waitid, si_pid is initialised (0 when no child
            // changed state, which WNOHANG allows).
            return Ok(unsafe { info.si_pid() } != 0);
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::ECHILD) => return Ok(true),
            _ => return Err(err),
        }
    }
}

/// A pidfd for `pid` that becomes readable when the process exits (Linux 5.3+), so the
/// wait loop wakes at once instead of on its next tick. `None` where unsupported; the loop
/// then relies on polling [`leader_exited`].
#[cfg(target_os = "linux")]
pub(super) fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    let pid = libc::pid_t::try_from(pid).ok()?;
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = libc::c_int::try_from(fd).ok().filter(|&fd| fd >= 0)?;
    // SAFETY: the kernel just returned this fd to us and nothing else owns it.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(not(target_os = "linux"))]
pub(super) fn pidfd_open(_pid: u32) -> Option<OwnedFd> {
    None
}

/// The fields of `/proc/<pid>/stat` that identify a process: its process group and its
/// start time (clock ticks after boot, field 22).
struct ProcStat {
    pgrp: u32,
    start_time: u64,
}

fn proc_stat(pid: u32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_proc_stat(&text)
}

/// Parses `/proc/<pid>/stat`. The command name (field 2) is in parentheses and may itself
/// contain spaces and parentheses, so fields are counted after the *last* `)`.
fn parse_proc_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `fields[0]` is field 3 (state): field n is at index n - 3.
    Some(ProcStat {
        pgrp: fields.get(5 - 3)?.parse().ok()?,
        start_time: fields.get(22 - 3)?.parse().ok()?,
    })
}

/// The start time of process `pid` from `/proc/<pid>/stat` (clock ticks after boot), or
/// `None` when the process does not exist or `/proc` is unavailable.
///
/// Together with the pid it names one process across pid reuse: record both when a
/// verifier starts, and [`kill_stale_group`] can recognise its group after a crash.
pub fn process_start_time(pid: u32) -> Option<u64> {
    proc_stat(pid).map(|s| s.start_time)
}

/// Sends `SIGKILL` to process group `pid` left behind by a hone that crashed, but only if
/// `/proc` shows that `pid` is still the same process: it exists, its start time equals
/// `start_time`, and it still leads group `pid`. Returns true if the group was signalled.
///
/// With `start_time` unknown (`None`) nothing is killed: a bare pid may have been reused
/// by an unrelated process since. If the leader itself is gone, nothing is killed either;
/// its surviving group members cannot be told apart from a newer group with the same
/// number, so hone leaves them alone rather than risk killing a stranger.
pub fn kill_stale_group(pid: u32, start_time: Option<u64>) -> bool {
    let Some(expected) = start_time else {
        return false;
    };
    match proc_stat(pid) {
        Some(stat) if stat.start_time == expected && stat.pgrp == pid => {
            signal_group(pid, libc::SIGKILL).unwrap_or(false)
        }
        _ => false,
    }
}

/// Kills the process group of every process (not hone itself; alone when it is in hone's own
/// group) whose environment holds `name=value`: what a crashed hone started for one
/// experiment, including a process that was spawned but whose pid never reached the store, or
/// what a finished stage left running outside its group. Returns how many were signalled.
pub fn kill_groups_with_env(name: &str, value: &str) -> usize {
    let needle = format!("{name}={value}");
    kill_groups_where(&|var| var == needle.as_bytes())
}

/// [`kill_groups_with_env`] for every value of `name` that starts with `prefix`.
pub fn kill_groups_with_env_prefix(name: &str, prefix: &str) -> usize {
    let needle = format!("{name}={prefix}");
    kill_groups_where(&|var| var.starts_with(needle.as_bytes()))
}

/// Passes over `/proc` that [`kill_groups_where`] makes at most: each kills what the last one
/// missed (a child forked before its parent was killed, a process that moved group), until
/// [`QUIET_PASSES`] in a row find nothing new.
const KILL_PASSES: usize = 64;
/// Passes in a row that find nothing new before [`kill_groups_where`] stops.
const QUIET_PASSES: usize = 3;
/// The most pidfds [`kill_groups_where`] holds at once (more processes are signalled by pid
/// and not reaped there), so that a fork bomb cannot use up hone's file descriptors.
const MAX_PINNED: usize = 256;

/// Kills every process (not hone itself) with an environment variable (`NAME=value`) that
/// `matches`, with its process group when the group's leader matches too (a group it made,
/// `setsid`); alone otherwise, so that a process that joined a stranger's group (another
/// slot's verifier, hone's own) does not take that group down. Passes over `/proc` until a
/// few in a row find nothing new: a process that keeps forking new sessions is caught in the
/// next pass.
/// Each is pinned by a pidfd before it is signalled, and those that are hone's children by
/// then (an escaped descendant that came back to hone, a child subreaper) are reaped through
/// it, never by a bare pid that might be another thread's child by now. Returns how many
/// groups and lone processes were signalled.
fn kill_groups_where(matches: &dyn Fn(&[u8]) -> bool) -> usize {
    let me = std::process::id();
    let own_group = proc_stat(me).map(|s| s.pgrp);
    let carries = |pid: u32| {
        std::fs::read(format!("/proc/{pid}/environ"))
            .is_ok_and(|env| env.split(|b| *b == 0).any(matches))
    };
    let mut seen = std::collections::BTreeSet::new();
    let mut pinned = Vec::new();
    let mut signalled = 0;
    let mut quiet = 0;
    for _ in 0..KILL_PASSES {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            break;
        };
        let mut new = 0;
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            if pid == me || seen.contains(&pid) || !carries(pid) {
                continue;
            }
            let Some(stat) = proc_stat(pid) else {
                continue;
            };
            seen.insert(pid);
            new += 1;
            let fd = (pinned.len() < MAX_PINNED)
                .then(|| pidfd_open(pid))
                .flatten();
            let own = stat.pgrp > 1
                && Some(stat.pgrp) != own_group
                && (stat.pgrp == pid || carries(stat.pgrp));
            // The process itself first: one that moves between groups may have left the
            // group read above by the time it is signalled.
            let mut hit = signal_pinned(pid, fd.as_ref());
            if own {
                hit |= signal_group(stat.pgrp, libc::SIGKILL).unwrap_or(false);
            }
            signalled += usize::from(hit);
            pinned.extend(fd);
        }
        // A process born behind the scan (the pid numbers wrapped) is caught by the next one:
        // only a few scans in a row that find nothing end it.
        quiet = if new == 0 { quiet + 1 } else { 0 };
        if quiet == QUIET_PASSES {
            break;
        }
    }
    for fd in &pinned {
        reap_pinned(fd);
    }
    signalled
}

/// `SIGKILL` to one process, through its pidfd when there is one (so a pid reused since
/// cannot be hit).
pub(super) fn signal_pinned(pid: u32, fd: Option<&OwnedFd>) -> bool {
    use std::os::fd::AsRawFd;
    match fd {
        // SAFETY: pidfd_send_signal takes a pidfd we own, a signal, no info and no flags.
        Some(fd) => unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            ) == 0
        },
        // SAFETY: a plain signal to one process, not hone itself (its caller leaves it out).
        None => unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) == 0 },
    }
}

/// Reaps the process of pidfd `fd` if it is hone's child and has exited; does nothing (and
/// never blocks) otherwise.
fn reap_pinned(fd: &OwnedFd) {
    use std::os::fd::AsRawFd;
    // SAFETY: a zeroed siginfo_t is a valid out-parameter; waitid on a pidfd we own with
    // WNOHANG neither blocks nor touches any other process.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        libc::waitid(
            libc::P_PIDFD,
            fd.as_raw_fd() as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_counts_fields_after_the_last_parenthesis() {
        let line = "4242 (we ird) (name)) S 1 4242 4242 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 \
                    987654 1000 200";
        let stat = parse_proc_stat(line).expect("test input is well formed");
        assert_eq!(stat.pgrp, 4242);
        assert_eq!(stat.start_time, 987654);
    }

    #[test]
    fn proc_stat_of_ourselves_is_readable() {
        let me = std::process::id();
        assert!(process_start_time(me).is_some());
    }

    #[test]
    fn refuses_to_signal_our_own_group_or_init() {
        assert!(signal_group(0, 0).is_err());
        assert!(signal_group(1, 0).is_err());
    }
}
