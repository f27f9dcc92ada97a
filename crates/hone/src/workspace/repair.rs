//! What a racing `git gc --prune=now` can leave: objects missing under the index or a ref,
//! refs read raw to remove dangling ones, and an index rebuilt from a commit.

use std::path::Path;
use std::process::Stdio;

use super::{git_command, Git, GitError};

impl Git {
    /// The object names among `oids` that the repository does not have (pruned by `git gc`,
    /// say), in one `git cat-file --batch-check`.
    pub fn missing_objects(&self, oids: &[String]) -> Result<Vec<String>, GitError> {
        use std::io::Write;
        if oids.is_empty() {
            return Ok(Vec::new());
        }
        let mut child = git_command(&self.root)
            .args(["cat-file", "--batch-check"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(GitError::Spawn)?;
        let input: String = oids.iter().map(|o| format!("{o}\n")).collect();
        let writer = child.stdin.take().map(|mut stdin| {
            std::thread::spawn(move || {
                let _ = stdin.write_all(input.as_bytes());
            })
        });
        let out = child.wait_with_output().map_err(GitError::Spawn)?;
        if let Some(w) = writer {
            let _ = w.join();
        }
        if !out.status.success() {
            return Err(GitError::Failed {
                args: "cat-file --batch-check".into(),
                stderr: String::new(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.strip_suffix(" missing"))
            .map(str::to_string)
            .collect())
    }

    /// The object name a ref holds, without checking that the object exists (a ref left
    /// pointing at a pruned object still reads); `None` if there is no such ref.
    pub fn raw_ref(&self, name: &str) -> Result<Option<String>, GitError> {
        match self.run(&["rev-parse", "--verify", "--quiet", name]) {
            Ok(s) => Ok(Some(s.trim().to_string())),
            Err(GitError::Failed { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Tracked files of worktree `wt` that index flags hide from git (`assume-unchanged`,
    /// `skip-worktree`), as [`Git::snapshot`] reports them in [`Snapshot::hidden`].
    pub fn flagged_files(&self, wt: &Path) -> Result<Vec<String>, GitError> {
        let listing = self.run_in(wt, &["ls-files", "-v", "-z"])?;
        Ok(listing
            .split('\0')
            .filter_map(|e| {
                let (tag, path) = e.split_once(' ')?;
                let flagged = tag
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_lowercase() || c == 'S');
                flagged.then(|| path.to_string())
            })
            .collect())
    }

    /// Rebuilds the index of worktree `wt` from `parent`, with no cached file stats, so that
    /// the next `git add -A` hashes (and writes) every file again: the way back when objects
    /// the index named were pruned.
    pub fn reindex(&self, wt: &Path, parent: &str) -> Result<(), GitError> {
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
