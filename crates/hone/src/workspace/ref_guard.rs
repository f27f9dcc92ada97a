//! What must be true of the ref files (and the configuration) before git or libgit2 reads them: each is a directory
//! or a regular file (or a link to one). Both open a loose ref, `packed-refs` or a `HEAD`
//! without looking at it first, and opening a FIFO waits for a writer that never comes: an
//! agent (or a candidate's code) that leaves one where a ref is read would hang the run
//! forever. hone's own reader (`ref_files`) never waits (it opens with `O_NONBLOCK` and
//! declines anything but a regular file); where it declines and git's readers would take
//! over, and when a run opens, these files are looked at first, and one of another kind
//! stops the run with an error that names it.

use std::path::{Path, PathBuf};

/// The files of the common git directory that git opens as it starts or reads refs and
/// objects, besides everything under `refs/`.
const PLACES: [&str; 7] = [
    "HEAD",
    "config",
    "packed-refs",
    "shallow",
    "info/exclude",
    "info/attributes",
    "objects/info/alternates",
];

/// The files of each worktree's administrative directory (`worktrees/<id>/`) git opens.
const WORKTREE_PLACES: [&str; 5] = ["HEAD", "index", "commondir", "gitdir", "config.worktree"];

/// The first file git would open under the common git directory `git_dir` ([`PLACES`],
/// everything under `refs/`, each worktree's [`WORKTREE_PLACES`]) that is neither a
/// directory nor a regular file, nor a link to a regular file (or to nothing): a FIFO, a
/// socket, a device; or, under `refs/`, a link to a directory (git never makes one, and a
/// walk would have to follow it).
pub(super) fn unreadable_ref_file(git_dir: &Path) -> Option<PathBuf> {
    let mut places: Vec<PathBuf> = PLACES.iter().map(|p| git_dir.join(p)).collect();
    if let Ok(entries) = std::fs::read_dir(git_dir.join("worktrees")) {
        for e in entries.flatten() {
            places.extend(WORKTREE_PLACES.iter().map(|p| e.path().join(p)));
        }
    }
    places
        .into_iter()
        .find(|p| !readable(p))
        .or_else(|| unreadable_below(&git_dir.join("refs")))
}

/// The first entry of the directory tree at `dir` that [`readable`] refuses, or below `dir`
/// a link to a directory (`dir` itself may be one: `git-new-workdir` links `refs/`).
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
                _ if readable(&path) && !path.is_dir() => {}
                _ => return Some(path),
            }
        }
    }
    None
}

/// Is `p` missing, a directory, a regular file, or a link to one of those (or to nothing)?
/// Looked at without opening it. (A permission error says nothing: git gets the same one.)
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
        std::fs::remove_file(git.join("refs/hone/t/5")).unwrap();
        // A link to a directory under refs/ (that may hold a FIFO: a walk would follow it).
        std::fs::create_dir(git.join("elsewhere")).unwrap();
        mkfifo(&git.join("elsewhere/t"));
        std::os::unix::fs::symlink(git.join("elsewhere"), git.join("refs/heads/hone/u")).unwrap();
        assert_eq!(
            unreadable_ref_file(git),
            Some(git.join("refs/heads/hone/u"))
        );
        std::fs::remove_file(git.join("refs/heads/hone/u")).unwrap();
        assert_eq!(unreadable_ref_file(git), None);
        // What git reads beside the refs: the worktree's index, the exclusions, alternates.
        for place in [
            "worktrees/w/index",
            "info/exclude",
            "objects/info/alternates",
        ] {
            let p = git.join(place);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            mkfifo(&p);
            assert_eq!(unreadable_ref_file(git), Some(p.clone()), "{place}");
            std::fs::remove_file(&p).unwrap();
        }
    }
}
