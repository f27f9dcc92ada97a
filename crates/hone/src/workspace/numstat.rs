//! What a candidate changed, counted inside hone through libgit2: per file, the status and the
//! lines added and deleted, and whether git treats it as binary; the answer of `git diff-tree
//! -r --no-renames --raw --numstat` (a binary file counts no lines: a NUL byte in its first
//! 8000 bytes, a `-diff` attribute, or a diff driver with `binary = true`).

use git2::{Delta, DiffOptions, Patch};

use super::inproc::failed;
use super::{Change, Git, GitError};

/// One changed file, with git's verdict on whether its content is binary.
pub(super) struct Counted {
    pub change: Change,
    pub binary: bool,
    /// The file's mode before and after (0 where it does not exist).
    pub old_mode: u32,
    pub new_mode: u32,
}

impl Git {
    /// Every file `commit` changed relative to `parent` (commits or trees), in git's order.
    pub(super) fn count_changes(
        &self,
        parent: &str,
        commit: &str,
    ) -> Result<Vec<Counted>, GitError> {
        let what = format!("diff-tree -r --numstat {parent} {commit}");
        let fail = |e: git2::Error| failed(&what, &e);
        let repo = self.repo()?;
        let tree = |spec: &str| repo.revparse_single(spec).and_then(|o| o.peel_to_tree());
        let (old, new) = (tree(parent).map_err(fail)?, tree(commit).map_err(fail)?);
        let mut opts = DiffOptions::new();
        opts.include_typechange(true);
        let diff = repo
            .diff_tree_to_tree(Some(&old), Some(&new), Some(&mut opts))
            .map_err(fail)?;
        let mut out = Vec::new();
        for i in 0..diff.deltas().len() {
            let patch = Patch::from_diff(&diff, i).map_err(fail)?;
            let Some(delta) = diff.get_delta(i) else {
                continue;
            };
            let status = match delta.status() {
                Delta::Added => 'A',
                Delta::Deleted => 'D',
                Delta::Typechange => 'T',
                Delta::Unmodified => continue,
                _ => 'M',
            };
            let path = delta
                .new_file()
                .path_bytes()
                .or_else(|| delta.old_file().path_bytes())
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .unwrap_or_default();
            let counted = if status == 'T' {
                // libgit2 counts no lines of a type change; git diffs the two contents.
                let blob = |f: git2::DiffFile<'_>| repo.find_blob(f.id()).map_err(fail);
                let (a, b) = (blob(delta.old_file())?, blob(delta.new_file())?);
                let path = std::path::Path::new(&path);
                Some(Patch::from_blobs(&a, Some(path), &b, Some(path), None).map_err(fail)?)
            } else {
                None
            };
            let patch = counted.or(patch);
            let (binary, added, deleted) = match &patch {
                Some(p) if !p.delta().flags().is_binary() => {
                    let (_, a, d) = p.line_stats().map_err(fail)?;
                    (false, a as u64, d as u64)
                }
                Some(_) => (true, 0, 0),
                // No patch: the file is binary (unchanged ones were skipped above).
                None => (delta.flags().is_binary(), 0, 0),
            };
            out.push(Counted {
                change: Change {
                    status,
                    path,
                    added,
                    deleted,
                },
                binary,
                old_mode: u32::from(delta.old_file().mode()),
                new_mode: u32::from(delta.new_file().mode()),
            });
        }
        Ok(out)
    }
}
