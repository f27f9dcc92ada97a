//! What must be true of the ref files (and the configuration) before git or libgit2 reads them: each is a directory
//! or a regular file (or a link to one). Both open a loose ref, `packed-refs` or a `HEAD`
//! without looking at it first, and opening a FIFO waits for a writer that never comes: an
//! agent (or a candidate's code) that leaves one where a ref is read would hang the run
//! forever. hone's own reader (`ref_files`) never waits (it opens with `O_NONBLOCK` and
//! declines anything but a regular file); where it declines and git's readers would take
//! over, and when a run opens, these files are looked at first, and one of another kind
//! stops the run with an error that names it.

use std::path::{Path, PathBuf};

/// The first ref file under the common git directory `git_dir` (its `HEAD`, `config`,
/// `packed-refs`, everything under `refs/`, and each worktree's `HEAD`) that is neither a
/// directory nor a regular file, nor a link to one (or to nothing): a FIFO, a socket, a
/// device.
pub(super) fn unreadable_ref_file(git_dir: &Path) -> Option<PathBuf> {
    let mut places = vec![
        git_dir.join("HEAD"),
        git_dir.join("config"),
        git_dir.join("packed-refs"),
    ];
    if let Ok(entries) = std::fs::read_dir(git_dir.join("worktrees")) {
        places.extend(entries.flatten().map(|e| e.path().join("HEAD")));
    }
    places
        .into_iter()
        .find(|p| !readable(p))
        .or_else(|| unreadable_below(&git_dir.join("refs")))
}

/// The first entry of the directory tree at `dir` that [`readable`] refuses.
fn unreadable_below(dir: &Path) -> Option<PathBuf> {
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        if !readable(&d) {
            return Some(d);
        }
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => pending.push(path),
                _ if readable(&path) => {}
                _ => return Some(path),
            }
        }
    }
    None
}

/// Is `p` missing, a directory, a regular file, or a link to one of those (or to nothing)?
/// Looked at without opening it.
fn readable(p: &Path) -> bool {
    let kind = |m: std::fs::Metadata| m.is_dir() || m.is_file();
    match std::fs::symlink_metadata(p) {
        Err(_) => true,
        Ok(m) if m.file_type().is_symlink() => std::fs::metadata(p).map_or(true, kind),
        Ok(m) => kind(m),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkfifo(p: &Path) {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(
            unsafe { libc::mkfifo(c.as_ptr(), 0o600) },
            0,
            "{}",
            p.display()
        );
    }

    #[test]
    fn a_fifo_anywhere_a_ref_is_read_is_found_and_nothing_else_is() {
        let t = tempfile::tempdir().unwrap();
        let git = t.path();
        std::fs::create_dir_all(git.join("refs/heads/hone")).unwrap();
        std::fs::create_dir_all(git.join("refs/hone/t")).unwrap();
        std::fs::create_dir_all(git.join("worktrees/w")).unwrap();
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(git.join("refs/hone/t/1"), "0".repeat(40) + "\n").unwrap();
        std::fs::write(git.join("worktrees/w/HEAD"), "0".repeat(40) + "\n").unwrap();
        // A link to a ref file, and one to nothing: git reads the first, skips the second.
        std::os::unix::fs::symlink("1", git.join("refs/hone/t/2")).unwrap();
        std::os::unix::fs::symlink("gone", git.join("refs/hone/t/3")).unwrap();
        assert_eq!(unreadable_ref_file(git), None);
        for place in [
            "refs/hone/t/4",
            "refs/heads/hone/t",
            "packed-refs",
            "config",
            "worktrees/w/HEAD",
            "HEAD",
        ] {
            let p = git.join(place);
            let kept = std::fs::read(&p).ok();
            let _ = std::fs::remove_file(&p);
            mkfifo(&p);
            assert_eq!(unreadable_ref_file(git), Some(p.clone()), "{place}");
            std::fs::remove_file(&p).unwrap();
            if let Some(bytes) = kept {
                std::fs::write(&p, bytes).unwrap();
            }
        }
        // Through a link.
        mkfifo(&git.join("fifo"));
        std::os::unix::fs::symlink(git.join("fifo"), git.join("refs/hone/t/5")).unwrap();
        assert_eq!(unreadable_ref_file(git), Some(git.join("refs/hone/t/5")));
    }
}
