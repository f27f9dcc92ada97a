//! Binary files in a candidate's change: git shows them as `-` in numstat, so `forbid` cannot
//! read them and a line count of 0 would hide their size; the review gate judges them by their
//! whole content instead.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use super::inproc::failed;
use super::{git_command, Git, GitError};

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
    /// file), read as a stream so that a large file is never held in memory.
    fn blob_measure(&self, commit: &str, path: &str) -> Result<(u64, u64), GitError> {
        let repo = self.repo()?;
        let Ok(id) = repo
            .revparse_single(commit)
            .and_then(|o| o.peel_to_tree())
            .and_then(|t| t.get_path(Path::new(path)))
            .and_then(|e| match e.kind() {
                Some(git2::ObjectType::Blob) => Ok(e.id()),
                _ => Err(git2::Error::from_str("not a blob")),
            })
        else {
            return Ok((0, 0));
        };
        let what = format!("cat-file blob {id}");
        let odb = repo.odb().map_err(|e| failed(&what, &e))?;
        let streamed = odb.reader(id);
        match streamed {
            Ok((reader, _, _)) => measure(reader, &what),
            // libgit2 streams loose objects only; a packed one is streamed by git.
            Err(_) => {
                // Command-line git here because libgit2 cannot stream a packed object.
                let mut child = git_command(&self.root)
                    .args(["cat-file", "blob", &id.to_string()])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .map_err(GitError::Spawn)?;
                let measured = match child.stdout.take() {
                    Some(out) => measure(out, &what),
                    None => Ok((0, 0)),
                };
                let status = child.wait().map_err(GitError::Spawn)?;
                if !status.success() {
                    return Err(GitError::Failed {
                        args: what,
                        stderr: String::new(),
                    });
                }
                measured
            }
        }
    }
}

/// Bytes and lines (newlines, plus one for a last line without one) of a stream.
fn measure(mut from: impl Read, what: &str) -> Result<(u64, u64), GitError> {
    let (mut bytes, mut newlines, mut last) = (0u64, 0u64, b'\n');
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = from.read(&mut buf).map_err(|source| GitError::Io {
            path: PathBuf::from(what),
            source,
        })?;
        if n == 0 {
            break;
        }
        bytes += n as u64;
        newlines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
        last = buf[n - 1];
    }
    Ok((bytes, newlines + u64::from(bytes > 0 && last != b'\n')))
}
