//! A candidate's snapshot: what the worktree holds, listed (by `git ls-files`, or for a
//! worktree only hone wrote in since it was made its parent's files, from the parent's tree),
//! committed as raw bytes on top of its parent.

use std::path::Path;

use super::{Git, GitError, Snapshot};

/// The worktree's index as `git ls-files -z -s -v -c` printed it ([`Git::index_listing`]),
/// with its untracked files (tag `?`) when `-o --exclude-standard` was asked too
/// ([`Git::worktree_listing`]).
#[derive(Clone, Debug)]
pub struct IndexListing {
    text: String,
    untracked: bool,
}

impl IndexListing {
    /// The paths index flags hide from git (`assume-unchanged`: a lower-case tag;
    /// `skip-worktree`: `S`), each once, in index order.
    pub fn flagged(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for e in self.text.split('\0') {
            let Some((tag, rest)) = e.split_once(' ') else {
                continue;
            };
            let flagged = tag
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_lowercase() || c == 'S');
            let path = rest.split_once('\t').map_or(rest, |(_, p)| p);
            // An unmerged path is listed once per stage.
            if flagged && out.last().map(String::as_str) != Some(path) {
                out.push(path.to_string());
            }
        }
        out
    }
}

impl Git {
    /// The worktree's index as `git ls-files -z -s -v -c` lists it: read once, it gives both
    /// the flagged files ([`IndexListing::flagged`]) and the staged entries a
    /// [`Git::snapshot_from`] needs.
    pub fn index_listing(&self, wt: &Path) -> Result<IndexListing, GitError> {
        // Command-line git here because the worktree's index (its version, extensions, flags)
        // is git's.
        self.run_in(wt, &["ls-files", "-z", "-s", "-v", "-c"])
            .map(|text| IndexListing {
                text,
                untracked: false,
            })
    }

    /// [`Git::index_listing`] with the worktree's untracked files that `git add -A` would add
    /// (every .gitignore, info/exclude and core.excludesFile rule), in one `ls-files`: what
    /// [`Git::snapshot_from`] needs, read by one process instead of two.
    pub fn worktree_listing(&self, wt: &Path) -> Result<IndexListing, GitError> {
        // Command-line git, as for the index alone and the untracked files (see
        // `index_listing` and `exact::raw_tree`): git lists an untracked file as `? <path>`
        // (`-v`; never with a stage: `-s` applies to the index's entries only).
        let args = [
            "ls-files",
            "-z",
            "-s",
            "-v",
            "-c",
            "-o",
            "--exclude-standard",
        ];
        self.run_in(wt, &args).map(|text| IndexListing {
            text,
            untracked: true,
        })
    }

    /// What [`Git::worktree_listing`] says of a worktree that holds exactly `commit`'s files
    /// (made so by [`Git::materialize`]) and its index as read from `commit`'s tree, some of
    /// whose tracked files hone itself then rewrote in place: `commit`'s entries, none of them
    /// flagged, no untracked file; read from the object store, with no git process. (Not for
    /// a worktree another process wrote in: only git can say what it would add there.)
    pub fn committed_listing(&self, commit: &str) -> Result<IndexListing, GitError> {
        let repo = self.repo()?;
        let mut text = String::new();
        for (path, mode, sha) in self.tree_entries(&repo, commit)? {
            // As `ls-files -z -s -v` writes a cached entry: tag, mode, object, stage, path.
            text.push_str(&format!("H {mode} {sha} 0\t{path}\0"));
        }
        Ok(IndexListing {
            text,
            untracked: true,
        })
    }

    /// Commits everything in the worktree on top of `parent`. `None` when nothing changed.
    ///
    /// Index flags that make git look away from a file (`assume-unchanged`, `skip-worktree`)
    /// are detected: the index is then rebuilt from `parent` so the commit holds the files'
    /// real content, and the flagged paths are reported in [`Snapshot::hidden`].
    pub fn snapshot(
        &self,
        wt: &Path,
        parent: &str,
        message: &str,
    ) -> Result<Option<Snapshot>, GitError> {
        self.snapshot_from(wt, parent, message, self.index_listing(wt)?)
    }

    /// [`Git::snapshot`] with the index as `listing` read it (the caller's own read, so that
    /// one `ls-files` serves both its flags and the commit).
    pub fn snapshot_from(
        &self,
        wt: &Path,
        parent: &str,
        message: &str,
        listing: IndexListing,
    ) -> Result<Option<Snapshot>, GitError> {
        let hidden = listing.flagged();
        let mut staged = String::new();
        let mut others = String::new();
        for e in listing.text.split('\0').filter(|e| !e.is_empty()) {
            match e.split_once(' ') {
                Some(("?", path)) if listing.untracked => {
                    others.push_str(path);
                    others.push('\0');
                }
                Some((_, rest)) => {
                    staged.push_str(rest);
                    staged.push('\0');
                }
                None => {}
            }
        }
        let mut staged = Some(staged);
        let mut others = listing.untracked.then_some(others);
        if !hidden.is_empty() {
            let index = self.run_in(wt, &["rev-parse", "--git-path", "index"])?;
            let index = wt.join(index.trim());
            std::fs::remove_file(&index).map_err(|source| GitError::Io {
                path: index,
                source,
            })?;
            self.run_in(wt, &["read-tree", parent])?;
            // The index changed: listed again.
            staged = None;
            others = None;
        }
        // What `git add -A` would commit, hashed as raw bytes (no filter, no conversion).
        let tree = self.raw_tree(wt, staged, others)?;
        let repo = self.repo()?;
        let parent_tree = self.rev_parse(&repo, &format!("{parent}^{{tree}}"));
        if parent_tree.as_deref() == Some(tree.as_str()) {
            return Ok(None);
        }
        let commit = self.commit_tree(&repo, &tree, parent, message)?;
        let changes = self.changes(parent, &commit)?;
        Ok(Some(Snapshot {
            commit,
            tree,
            changes,
            hidden,
        }))
    }
}
