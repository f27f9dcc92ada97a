//! Freeing what a candidate left: removing any path (a directory tree the candidate locked
//! itself out of included), the files of a worktree that grew against a commit (what to remove
//! first when the disk is full), and telling a disk that is full.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::{Git, GitError};

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> GitError + '_ {
    move |source| GitError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Removes `full`, whatever it is (a missing one is fine); a directory tree its owner locked
/// itself out of (`chmod 000`) is given the access back first (see [`unlock_dirs`]).
pub fn remove_any(full: &Path) -> Result<(), GitError> {
    let meta = match std::fs::symlink_metadata(full) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(full)(e)),
    };
    if !meta.is_dir() {
        return std::fs::remove_file(full).map_err(io_err(full));
    }
    // `remove_dir_all` works below PATH_MAX too: it descends with `openat`, never a full path.
    match std::fs::remove_dir_all(full) {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            unlock_dirs(full);
            std::fs::remove_dir_all(full).map_err(io_err(full))
        }
        r => r.map_err(io_err(full)),
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
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => {
                let mode = m.permissions().mode();
                if mode & 0o700 != 0o700 {
                    let _ = std::fs::set_permissions(
                        &dir,
                        std::fs::Permissions::from_mode(mode | 0o700),
                    );
                }
            }
            _ => continue,
        }
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

impl Git {
    /// The regular files of `wt` (outside `.git` and hone's `.hone`; symlinks not followed)
    /// whose size differs from `commit`'s blob at their path, new files included, largest
    /// first: what a candidate grew, to remove first when the disk is full. Sizes only:
    /// nothing is read.
    pub fn grown_files(&self, wt: &Path, commit: &str) -> Result<Vec<(String, u64)>, GitError> {
        let repo = self.repo()?;
        let blobs: std::collections::BTreeMap<String, String> = self
            .tree_entries(&repo, commit)?
            .into_iter()
            .map(|(path, _, id)| (path, id))
            .collect();
        let mut files: Vec<(String, u64)> = Vec::new();
        let mut stack = vec![String::new()];
        while let Some(rel) = stack.pop() {
            let dir = if rel.is_empty() {
                wt.to_path_buf()
            } else {
                wt.join(&rel)
            };
            let Ok(entries) = read_dir_fixing(&dir, true) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name();
                let name = name.to_string_lossy();
                if rel.is_empty() && (name == ".git" || name == ".hone") {
                    continue;
                }
                let p = if rel.is_empty() {
                    name.to_string()
                } else {
                    format!("{rel}/{name}")
                };
                match e.file_type() {
                    Ok(t) if t.is_dir() => stack.push(p),
                    Ok(t) if t.is_file() => {
                        if let Ok(m) = e.metadata() {
                            files.push((p, m.len()));
                        }
                    }
                    _ => {}
                }
            }
        }
        let ids: Vec<&str> = files
            .iter()
            .map(|(p, _)| blobs.get(p).map(String::as_str).unwrap_or_default())
            .collect();
        let lens = self.blob_lens(&ids);
        let mut grown: Vec<(String, u64)> = files
            .into_iter()
            .zip(lens)
            .filter(|((_, len), blob)| *blob != Some(*len))
            .map(|(f, _)| f)
            .collect();
        grown.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        Ok(grown)
    }
}
