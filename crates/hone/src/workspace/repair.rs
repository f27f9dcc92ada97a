//! What a racing `git gc --prune=now` can leave: objects missing under the index or a ref,
//! refs read raw to remove dangling ones, and an index rebuilt from a commit.

use std::path::Path;

use super::inproc::{failed, is_full_hex};
use super::{Git, GitError};

impl Git {
    /// The object names among `oids` that the repository does not have (pruned by `git gc`,
    /// say), as `git cat-file --batch-check` reports them (the repository is opened afresh,
    /// so no pack a racing gc removed is still read).
    pub fn missing_objects<S: AsRef<str>>(&self, oids: &[S]) -> Result<Vec<String>, GitError> {
        if oids.is_empty() {
            return Ok(Vec::new());
        }
        let repo = self.repo()?;
        let odb = repo
            .odb()
            .map_err(|e| failed("cat-file --batch-check", &e))?;
        Ok(oids
            .iter()
            .map(AsRef::as_ref)
            .filter(|o| !(is_full_hex(o) && git2::Oid::from_str(o).is_ok_and(|id| odb.exists(id))))
            .map(str::to_string)
            .collect())
    }

    /// The object name a ref holds, without checking that the object exists (a ref left
    /// pointing at a pruned object still reads); `None` if there is no such ref.
    pub fn raw_ref(&self, name: &str) -> Result<Option<String>, GitError> {
        let repo = self.repo()?;
        Ok(self.ref_value(&repo, name))
    }

    /// Tracked files of worktree `wt` that index flags hide from git (`assume-unchanged`,
    /// `skip-worktree`), as [`Git::snapshot`] reports them in `Snapshot::hidden`.
    pub fn flagged_files(&self, wt: &Path) -> Result<Vec<String>, GitError> {
        Ok(self.index_listing(wt)?.flagged())
    }

    /// Rebuilds the index of worktree `wt` from `parent`, with no cached file stats, so that
    /// the next `git add -A` hashes (and writes) every file again: the way back when objects
    /// the index named were pruned.
    pub fn reindex(&self, wt: &Path, parent: &str) -> Result<(), GitError> {
        // Command-line git here: the recovery path after a racing gc, not every experiment.
        let index = self.run_in(wt, &["rev-parse", "--git-path", "index"])?;
        let index = wt.join(index.trim());
        match std::fs::remove_file(&index) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(GitError::Io {
                    path: index,
                    source,
                })
            }
        }
        self.run_in(wt, &["read-tree", parent]).map(|_| ())
    }
}
