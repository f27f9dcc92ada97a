//! Binary files in a candidate's change: git shows them as `-` in numstat, so `forbid` cannot
//! read them and a line count of 0 would hide their size; the review gate judges them by their
//! whole content instead.

use std::path::Path;

use super::{Git, GitError};

/// One file that git treats as binary in a candidate's change (numstat's `-`): `forbid`
/// cannot read it and a line count of 0 would hide its size, so the review gate judges it by
/// its whole content (see [`Git::binary_changes`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BinaryChange {
    pub path: String,
    /// Sizes in bytes before and after (0 where the file does not exist).
    pub old_bytes: u64,
    pub new_bytes: u64,
    /// Lines of the content before and after: newline characters, plus one for a last line
    /// without one.
    pub old_lines: u64,
    pub new_lines: u64,
}

impl BinaryChange {
    /// What the change weighs against `max_diff_lines`: every line of the old content (all
    /// deleted) plus every line of the new one (all added).
    pub fn lines(&self) -> u64 {
        self.old_lines + self.new_lines
    }
}

impl Git {
    /// The files `commit` changed relative to `parent` that git treats as binary, with the
    /// size and line count of their old and new content (the same count as
    /// [`Git::changes`], so a file is either counted by its lines there or weighed here).
    pub fn binary_changes(
        &self,
        parent: &str,
        commit: &str,
    ) -> Result<Vec<BinaryChange>, GitError> {
        let mut found = Vec::new();
        for c in self.count_changes(parent, commit)? {
            if !c.binary {
                continue;
            }
            let path = c.change.path;
            let (old_bytes, old_lines) = self.blob_measure(parent, &path)?;
            let (new_bytes, new_lines) = self.blob_measure(commit, &path)?;
            found.push(BinaryChange {
                path,
                old_bytes,
                new_bytes,
                old_lines,
                new_lines,
            });
        }
        Ok(found)
    }

    /// Bytes and lines of `path` in `commit` ((0, 0) where it does not exist, or is not a
    /// file).
    fn blob_measure(&self, commit: &str, path: &str) -> Result<(u64, u64), GitError> {
        let repo = self.repo()?;
        let Ok(blob) = repo
            .revparse_single(commit)
            .and_then(|o| o.peel_to_tree())
            .and_then(|t| t.get_path(Path::new(path)))
            .and_then(|e| e.to_object(&repo))
            .and_then(|o| {
                o.into_blob()
                    .map_err(|_| git2::Error::from_str("not a blob"))
            })
        else {
            return Ok((0, 0));
        };
        let content = blob.content();
        let newlines = content.iter().filter(|&&b| b == b'\n').count() as u64;
        let unterminated = content.last().is_some_and(|&b| b != b'\n');
        Ok((content.len() as u64, newlines + u64::from(unterminated)))
    }
}
