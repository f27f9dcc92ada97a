//! Walking a worktree against a commit's listing for [`super`]: what is not the commit's
//! (removed, unless a declared output), modes git cannot record, and outputs that link out
//! of the worktree.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::super::space::{read_dir_fixing, remove_any};
use super::super::{glob_match, GitError};
use super::{io_err, join, Found, Listing, PATH_MAX};

/// Is `p` one of the kept paths (`keep`: hone globs; a pattern without `/` also matches a
/// file name at any depth, as in `git clean -e`)?
fn kept(keep: &[String], p: &str) -> bool {
    let name = p.rsplit('/').next().unwrap_or(p);
    keep.iter().any(|k| {
        glob_match(k, p) || (!k.trim_end_matches('/').contains('/') && glob_match(k, name))
    })
}

/// Whether the link at `path` resolves to no place inside `wt` (a dangling one included).
/// A declared output left as a link to what its stage could not read (a hidden holdout
/// file) would hand that file to the sealed scorer, which may read it.
fn escapes(wt: &Path, path: &Path) -> bool {
    let Ok(root) = wt.canonicalize() else {
        return true;
    };
    !path
        .canonicalize()
        .is_ok_and(|real| real.starts_with(&root))
}

/// Counts (and with `fix`, removes) the links under the kept directory `dir` that
/// [`escapes`] says lead out of `wt`, at any depth; links are not followed.
fn sweep_links(wt: &Path, dir: &Path, fix: bool, found: &mut Found) -> Result<(), GitError> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).map_err(io_err(&d))? {
            let e = e.map_err(io_err(&d))?;
            let path = e.path();
            let ft = e.file_type().map_err(io_err(&path))?;
            if ft.is_dir() {
                stack.push(path);
            } else if ft.is_symlink() && escapes(wt, &path) {
                found.extra += 1;
                if fix {
                    remove_any(&path)?;
                }
            }
        }
    }
    Ok(())
}

/// Counts `path` (a directory or a file of the commit, `meta` its metadata) as a difference
/// when its owner lacks one of the permission bits `needed`, and with `fix` sets its mode to
/// `set`. git records only the executable bit, so the candidate's code could otherwise leave a
/// protected file unreadable (`chmod 000`), a mode no reset rewrote: every later verifier
/// without root's privileges (a sandboxed one) would crash on it. Other bits are left as they
/// are (the umask's group bits, a setgid directory).
pub(super) fn normal_mode(
    path: &Path,
    meta: std::fs::Metadata,
    (needed, set): (u32, u32),
    fix: bool,
    found: &mut Found,
) -> Result<(), GitError> {
    if meta.permissions().mode() & needed == needed {
        return Ok(());
    }
    found.extra += 1;
    if fix {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(set))
            .map_err(io_err(path))?;
    }
    Ok(())
}

/// Walks `wt/rel` against the commit's listing: entries the commit does not have are counted
/// (and with `fix`, removed); files and symlinks where it has one are collected to compare.
/// It descends only into the commit's directories, so it never meets a path git could not
/// have recorded; anything else is removed whole.
pub(super) fn walk_against(
    wt: &Path,
    rel: &str,
    (listing, keep): (&Listing, &[String]),
    fix: bool,
    found: &mut Found,
) -> Result<(), GitError> {
    let full = if rel.is_empty() {
        wt.to_path_buf()
    } else {
        wt.join(rel)
    };
    let entries = read_dir_fixing(&full, fix)?;
    for e in entries {
        let e = e.map_err(io_err(&full))?;
        let os_name = e.file_name();
        if rel.is_empty() && os_name == ".git" {
            continue;
        }
        let path = full.join(&os_name);
        let ft = e.file_type().map_err(io_err(&path))?;
        let Some(name) = os_name.to_str() else {
            // Not a name the commit can hold.
            found.extra += 1;
            if fix {
                remove_any(&path)?;
            }
            continue;
        };
        let p = join(rel, name);
        if ft.is_dir() && listing.dirs.contains(&p) {
            let meta = e.metadata().map_err(io_err(&path))?;
            normal_mode(&path, meta, (0o700, 0o755), fix, found)?;
            walk_against(wt, &p, (listing, keep), fix, found)?;
            continue;
        }
        let mode = listing.files.get(&p).map(|e| e.mode.as_str());
        match mode {
            Some("120000") if ft.is_symlink() => {
                found.links.push(p);
                continue;
            }
            Some("100644" | "100755") if ft.is_file() => {
                let meta = e.metadata().map_err(io_err(&path))?;
                let exec = meta.permissions().mode() & 0o100 != 0;
                // Readable and writable by its owner again (before `stale` reads it), its
                // executable bit kept: one that differs from the commit's is `stale`'s.
                let set = if exec { 0o755 } else { 0o644 };
                normal_mode(&path, meta, (0o600, set), fix, found)?;
                found.files.push((p, exec));
                continue;
            }
            _ => {}
        }
        // Not the commit's: removed, unless it is a declared output (or may hold one) and
        // not standing where the commit has a directory (a symlink there would lead the
        // rebuild out of the worktree).
        if mode.is_none() && !listing.dirs.contains(&p) && kept(keep, &p) {
            if ft.is_symlink() && escapes(wt, &path) {
                found.extra += 1;
                if fix {
                    remove_any(&path)?;
                }
            } else if ft.is_dir() {
                sweep_links(wt, &path, fix, found)?;
            }
            continue;
        }
        if mode.is_none()
            && ft.is_dir()
            && !keep.is_empty()
            && path.as_os_str().len() + 2 < PATH_MAX
        {
            walk_against(wt, &p, (listing, keep), fix, found)?;
            if fix {
                // Left only if it still holds something kept.
                let _ = std::fs::remove_dir(&path);
            }
            continue;
        }
        found.extra += 1;
        if fix {
            remove_any(&path)?;
        }
    }
    Ok(())
}
