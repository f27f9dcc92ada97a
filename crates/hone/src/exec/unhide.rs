//! Mounts that hide processes from a scan of `/proc`, taken away before hone looks for what a
//! stage left running ([`unhide_processes`]). A process running as root can lay a mount over
//! its own `/proc/<pid>` (no `stat`, no parent, no environment to find it by), over hone's
//! `/proc/<pid>/mountinfo` (so that hone's list of mounts reads empty), or mount another
//! procfs over `/proc` (one of a PID namespace of its own, where neither it nor hone has a
//! number), or unmount `/proc` or move it away. hone reads its table of mounts through a
//! descriptor it opened before any agent ran, takes away every mount over a process's entry
//! and any made on `/proc` since it started (never one that was there then), and mounts a
//! procfs on `/proc` again where it went.

use std::collections::HashSet;
use std::io::{Read, Seek};
use std::sync::{Mutex, OnceLock};

/// hone's table of mounts (`/proc/self/mountinfo`: its main thread's, which lives as long as
/// hone, and whose mount namespace every thread of hone shares), opened before any agent ran
/// (a descriptor reads the live table whatever is later mounted over its path, or wherever
/// `/proc` goes), the mounts on `/proc` itself then, and whether `/proc` was hone's procfs.
struct Table {
    file: Mutex<std::fs::File>,
    proc_at_start: HashSet<u64>,
    proc_was_ours: bool,
    /// The options of the procfs on `/proc` then (`hidepid=...`), to mount it back with.
    proc_options: String,
}

static MOUNTS: OnceLock<Option<Table>> = OnceLock::new();

/// What the sweep took away or put back since it was last asked ([`take_notes`]).
static NOTES: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn note(what: String) {
    NOTES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(what);
}

/// What [`unhide_processes`] took away or mounted back, and what hone found of `/proc` when
/// it started, since the last call: for the run to say (each is an agent's or a verifier's
/// doing, or a machine hone cannot watch).
pub fn take_notes() -> Vec<String> {
    std::mem::take(
        &mut *NOTES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    )
}

/// Opens hone's table of mounts and notes what is mounted on `/proc`, once; call it before
/// anything untrusted runs (hone does, when it becomes the reaper of its descendants).
pub(super) fn remember_mounts() {
    MOUNTS.get_or_init(|| {
        let mut file = std::fs::File::open("/proc/self/mountinfo").ok()?;
        let mut text = String::new();
        file.read_to_string(&mut text).ok()?;
        let proc_was_ours = proc_is_ours();
        if !proc_was_ours {
            note("/proc is not this process's own procfs (another PID namespace's, or none): hone cannot find what a stage leaves running through it; if an earlier run's agent mounted it, remount /proc".into());
        }
        // The procfs on top at /proc: the last line with that mount point.
        let proc_options = text
            .lines()
            .rfind(|l| l.split(' ').nth(4) == Some("/proc"))
            .and_then(|l| l.split(" - ").nth(1))
            .and_then(|rest| rest.split(' ').nth(2))
            .unwrap_or("")
            .to_string();
        Some(Table {
            file: Mutex::new(file),
            proc_at_start: mounts(&text)
                .filter(|(_, point)| *point == "/proc")
                .map(|(id, _)| id)
                .collect(),
            proc_was_ours,
            proc_options,
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

/// Whether `point` is a process's entry in `/proc`, or below one: `/proc/<digits>[/...]`.
fn on_a_process(point: &str) -> bool {
    point.strip_prefix("/proc/").is_some_and(|rest| {
        let pid = rest.split('/').next().unwrap_or("");
        !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())
    })
}

/// Whether `/proc` is this process's procfs: a procfs in which `self` is this process.
fn proc_is_ours() -> bool {
    // SAFETY: statfs with a valid path and a zeroed out-parameter.
    let procfs = unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        libc::statfs(c"/proc".as_ptr(), &mut st) == 0 && st.f_type as i64 == PROC_SUPER_MAGIC
    };
    procfs
        && std::fs::read_link("/proc/self")
            .is_ok_and(|p| p.as_os_str() == std::process::id().to_string().as_str())
}

/// The kernel's magic number for procfs (`statfs`'s `f_type`).
const PROC_SUPER_MAGIC: i64 = 0x9fa0;

fn umount(path: &str) -> bool {
    let Ok(c) = std::ffi::CString::new(path) else {
        return false;
    };
    // SAFETY: umount2 with a valid NUL-terminated path and a flag; no pointers kept.
    unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) == 0 }
}

/// Takes away what hides processes from a scan of `/proc`: any mount over a process's entry
/// (`/proc/<pid>` or below), the deepest first (such mounts have no other use), and, while
/// `/proc` is not hone's procfs, every mount made on it since hone started; then, where `/proc` was hone's procfs when
/// it started and is not now (it was unmounted or moved away), mounts a procfs there again.
/// Detached lazily (`MNT_DETACH`), so a mount in use still goes from sight. Only a process
/// that may unmount does anything (one as unprivileged as hone could not have mounted them).
/// Without the table hone opened when it started, only mounts over processes' entries are
/// taken away, read from `/proc` as it is. Returns how many mounts it took away or made.
pub fn unhide_processes() -> usize {
    let table = MOUNTS.get().and_then(Option::as_ref);
    let mut taken = 0;
    for _ in 0..16 {
        let text = match table {
            Some(t) => {
                let mut f = t
                    .file
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let mut text = String::new();
                if f.rewind().is_err() || f.read_to_string(&mut text).is_err() {
                    break;
                }
                text
            }
            None => match std::fs::read_to_string("/proc/self/mountinfo") {
                Ok(text) => text,
                Err(_) => break,
            },
        };
        // A mount on `/proc` goes only while `/proc` is not hone's procfs (one hone mounted
        // back below stays).
        let ours = proc_is_ours();
        let mut new: Vec<&str> = mounts(&text)
            .filter(|(id, point)| {
                on_a_process(point)
                    || (*point == "/proc"
                        && !ours
                        && table.is_some_and(|t| !t.proc_at_start.contains(id)))
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
            if umount(p) {
                taken += 1;
                note(format!(
                    "took away a mount at {p} (it hid processes from hone's sweep)"
                ));
            }
        }
        if taken == before {
            break;
        }
    }
    if let Some(t) = table.filter(|t| t.proc_was_ours && !proc_is_ours()) {
        let options = std::ffi::CString::new(t.proc_options.as_str()).unwrap_or_default();
        // SAFETY: mount with valid NUL-terminated strings; the data is procfs's options as
        // the kernel listed them.
        let mounted = unsafe {
            libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                options.as_ptr().cast(),
            ) == 0
        };
        if mounted {
            taken += 1;
            note(format!(
                "mounted a procfs on /proc again ({}; it had been unmounted or moved away)",
                t.proc_options
            ));
        }
    }
    taken
}
