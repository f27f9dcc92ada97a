//! Mounts that hide processes from a scan of `/proc`, taken away before hone looks for what a
//! stage left running ([`unhide_processes`]). A process running as root can lay a mount over
//! its own `/proc/<pid>` (no `stat`, no parent, no environment to find it by), over hone's
//! `/proc/<pid>/mountinfo` (so that hone's list of mounts reads empty), or mount another
//! procfs over `/proc` (one of a PID namespace of its own, where neither it nor hone has a
//! number). hone reads its table of mounts through a descriptor it opened before any agent
//! ran, and takes away only mounts made since then: never one that was there when it started.

use std::collections::HashSet;
use std::io::{Read, Seek};
use std::sync::{Mutex, OnceLock};

/// hone's table of mounts (`/proc/self/mountinfo`: its main thread's, which lives as long as
/// hone, and whose mount namespace every thread of hone shares), opened before any agent ran
/// (a descriptor reads the live table whatever is later mounted over its path), and the
/// mounts it listed then.
struct Table {
    file: Mutex<std::fs::File>,
    at_start: HashSet<u64>,
}

static MOUNTS: OnceLock<Option<Table>> = OnceLock::new();

/// Opens hone's table of mounts and notes the mounts there are, once; call it before
/// anything untrusted runs (hone does, when it becomes the reaper of its descendants).
pub(super) fn remember_mounts() {
    MOUNTS.get_or_init(|| {
        let mut file = std::fs::File::open("/proc/self/mountinfo").ok()?;
        let mut text = String::new();
        file.read_to_string(&mut text).ok()?;
        Some(Table {
            file: Mutex::new(file),
            at_start: mounts(&text).map(|(id, _)| id).collect(),
        })
    });
}

/// `(mount id, mount point)` of each line of a mount table.
fn mounts(table: &str) -> impl Iterator<Item = (u64, &str)> {
    table.lines().filter_map(|l| {
        let mut f = l.split(' ');
        let id = f.next()?.parse().ok()?;
        Some((id, f.nth(3)?))
    })
}

/// Whether `point` is `/proc` (`whole`) or a process's entry in it, `/proc/<digits>[/...]`.
fn hides(point: &str, whole: bool) -> bool {
    if point == "/proc" {
        return whole;
    }
    point.strip_prefix("/proc/").is_some_and(|rest| {
        let pid = rest.split('/').next().unwrap_or("");
        !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())
    })
}

fn umount(path: &str) -> bool {
    let Ok(c) = std::ffi::CString::new(path) else {
        return false;
    };
    // SAFETY: umount2 with a valid NUL-terminated path and a flag; no pointers kept.
    unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) == 0 }
}

/// Takes away what hides processes from a scan of `/proc`: every mount made since hone
/// started over `/proc` itself or over a process's entry in it (`/proc/<pid>` or below), the
/// deepest first. Such mounts have no other use. Detached lazily (`MNT_DETACH`), so one in
/// use still goes from sight. Only a process that may unmount does anything (one as
/// unprivileged as hone could not have mounted them). Without the table hone opened when it
/// started, only mounts over processes' entries are taken away, read from `/proc` as it is.
/// Returns how many mounts it took away.
pub fn unhide_processes() -> usize {
    let mut taken = 0;
    for _ in 0..16 {
        let (text, at_start) = match MOUNTS.get() {
            Some(Some(t)) => {
                let mut f = t
                    .file
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let mut text = String::new();
                if f.rewind().is_err() || f.read_to_string(&mut text).is_err() {
                    break;
                }
                (text, Some(&t.at_start))
            }
            _ => match std::fs::read_to_string("/proc/self/mountinfo") {
                Ok(text) => (text, None),
                Err(_) => break,
            },
        };
        let mut new: Vec<&str> = mounts(&text)
            .filter(|(id, point)| {
                hides(point, at_start.is_some()) && !at_start.is_some_and(|s| s.contains(id))
            })
            .map(|(_, point)| point)
            .collect();
        if new.is_empty() {
            break;
        }
        // The deepest first, so each one is the top of its stack.
        new.sort_by_key(|p| std::cmp::Reverse(p.len()));
        new.dedup();
        let before = taken;
        for p in new {
            taken += usize::from(umount(p));
        }
        if taken == before {
            break;
        }
    }
    taken
}
