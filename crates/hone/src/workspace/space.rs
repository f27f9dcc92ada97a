//! Freeing what a candidate left: removing any path (a directory tree the candidate locked
//! itself out of included), the files of a worktree that grew against a commit (what to remove
//! first when the disk is full), and telling a disk that is full.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::{Git, GitError};

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> GitError + '_ {
    move |source| GitError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Removes `full`, whatever it is (a missing one is fine). A place the candidate locked its
/// owner out of (`chmod 000` on the directory that holds it, or on directories of the tree
/// itself) is given the access back first (see [`unlock_dirs`]).
pub fn remove_any(full: &Path) -> Result<(), GitError> {
    let meta = match std::fs::symlink_metadata(full) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(full)(e)),
    };
    // `remove_dir_all` works below PATH_MAX too: it descends with `openat`, never a full path.
    let remove = || match meta.is_dir() {
        true => std::fs::remove_dir_all(full),
        false => std::fs::remove_file(full),
    };
    match remove() {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            if let Some(parent) = full.parent() {
                give_owner_access(parent);
            }
            if meta.is_dir() {
                unlock_dirs(full);
            }
            remove().map_err(io_err(full))
        }
        r => r.map_err(io_err(full)),
    }
}

/// Gives the owner of the directory `dir` read, write and search access, if it lacks any.
fn give_owner_access(dir: &Path) {
    if let Ok(m) = std::fs::symlink_metadata(dir) {
        let mode = m.permissions().mode();
        if m.is_dir() && mode & 0o700 != 0o700 {
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o700));
        }
    }
}

/// Gives the owner read, write and search access back to `top` and every directory below it
/// (symlinks are not followed), so that they can be read and emptied. The candidate's code runs
/// as the user hone runs as, so it can leave a directory it made `chmod 000`: root ignores
/// that, any other user could then neither list nor remove it. Best effort: what cannot be
/// reached is left for the caller's own error to name.
fn unlock_dirs(top: &Path) {
    let mut stack = vec![top.to_path_buf()];
    while let Some(dir) = stack.pop() {
        if !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        give_owner_access(&dir);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
        }
    }
}

/// `read_dir` of `full`; with `fix`, a directory its owner cannot read is given the access
/// back first (see [`unlock_dirs`]).
pub(super) fn read_dir_fixing(full: &Path, fix: bool) -> Result<std::fs::ReadDir, GitError> {
    match std::fs::read_dir(full) {
        Err(e) if fix && e.kind() == std::io::ErrorKind::PermissionDenied => {
            unlock_dirs(full);
            std::fs::read_dir(full).map_err(io_err(full))
        }
        r => r.map_err(io_err(full)),
    }
}

/// Below this many bytes free (for an unprivileged writer) a disk counts as full: SQLite, git
/// and the logs need some room to record anything.
const FULL_BELOW: u64 = 8 << 20;

/// Is the filesystem holding `path` full (under 8 MiB available), as far as it can tell? A
/// path it cannot ask about is not.
pub fn disk_nearly_full(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated path and `stat` a properly sized, writable
    // `statvfs` that the call fills in; nothing is kept past the call.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut stat) } != 0 {
        return false;
    }
    (stat.f_bavail as u64).saturating_mul(stat.f_frsize as u64) < FULL_BELOW
}

/// A new file smaller than this is never blamed for a full disk (nor removed to free it).
const MIN_BLAMED: u64 = 1 << 20;

/// Does `error` (or an error it wraps) say the disk or the user's quota is full?
pub fn out_of_room(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut at = Some(error);
    while let Some(e) = at {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if matches!(io.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) {
                return true;
            }
        }
        at = e.source();
    }
    false
}

/// Bytes a file or a tree takes on disk (symlinks not followed; a sparse file counts what it
/// holds).
pub fn on_disk(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    let mut total = m.blocks().saturating_mul(512);
    if m.is_dir() {
        if let Ok(entries) = std::fs::read_dir(path) {
            for e in entries.flatten() {
                total = total.saturating_add(on_disk(&e.path()));
            }
        }
    }
    total
}

/// What was removed to make room: `path (N bytes), ...` (the bytes it took on disk).
pub fn removed_for_room(removed: &[(PathBuf, u64)]) -> String {
    let named: Vec<String> = removed
        .iter()
        .map(|(p, n)| format!("{} ({n} bytes)", p.display()))
        .collect();
    named.join(", ")
}

impl Git {
    /// What a candidate left in the worktree `wt` that may go to free a full disk, largest
    /// first (bytes on disk): hone's scratch directory `.hone/tmp` (a sandbox's `TMPDIR`),
    /// whole, and every file of at least 1 MiB that `commit` does not have (outside `.git` and
    /// `.hone`; symlinks not followed). Files the commit tracks are never among them (removing
    /// one would record a deletion the candidate never made), nor small ones (a disk filled by
    /// something else must not be blamed on the candidate's few edits).
    fn leftovers(&self, wt: &Path, commit: &str) -> Result<Vec<(PathBuf, u64)>, GitError> {
        let repo = self.repo()?;
        let tracked: std::collections::BTreeSet<String> = self
            .tree_entries(&repo, commit)?
            .into_iter()
            .map(|(path, _, _)| path)
            .collect();
        let mut found: Vec<(PathBuf, u64)> = Vec::new();
        let tmp = wt.join(".hone").join("tmp");
        let real_dir = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
        if real_dir(&wt.join(".hone")) && real_dir(&tmp) {
            let bytes = on_disk(&tmp);
            if bytes >= MIN_BLAMED {
                found.push((PathBuf::from(".hone/tmp"), bytes));
            }
        }
        let mut stack = vec![PathBuf::new()];
        while let Some(rel) = stack.pop() {
            let Ok(entries) = read_dir_fixing(&wt.join(&rel), true) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name();
                if rel.as_os_str().is_empty() && (name == ".git" || name == ".hone") {
                    continue;
                }
                let p = rel.join(&name);
                match e.file_type() {
                    Ok(t) if t.is_dir() => stack.push(p),
                    Ok(t) if t.is_file() => {
                        let known = p.to_str().is_some_and(|s| tracked.contains(s));
                        let bytes = on_disk(&e.path());
                        if !known && bytes >= MIN_BLAMED {
                            found.push((p, bytes));
                        }
                    }
                    _ => {}
                }
            }
        }
        found.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        Ok(found)
    }

    /// Frees a full disk of what a candidate left in `wt` (see [`Git::leftovers`]): removes
    /// them, largest first, while [`disk_nearly_full`] says so, at most `most` of them; with
    /// `failed` (a write failed for lack of room, a quota say, which the disk's figures do not
    /// show) at least the largest. Returns what it removed (path relative to `wt`, bytes).
    pub fn make_room(
        &self,
        wt: &Path,
        commit: &str,
        failed: bool,
        most: usize,
    ) -> Result<Vec<(PathBuf, u64)>, GitError> {
        let mut removed = Vec::new();
        if !failed && !disk_nearly_full(wt) {
            return Ok(removed);
        }
        for (rel, bytes) in self.leftovers(wt, commit)?.into_iter().take(most) {
            if !removed.is_empty() && !disk_nearly_full(wt) {
                break;
            }
            remove_any(&wt.join(&rel))?;
            removed.push((rel, bytes));
        }
        Ok(removed)
    }
}
