//! Binary files in a candidate's change: git shows them as `-` in numstat, so `forbid` cannot
//! read them and a line count of 0 would hide their size; the review gate judges them by their
//! whole content instead.

use std::io::Read;
use std::path::PathBuf;
use std::process::Stdio;

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
    /// size and line count of their old and new content.
    pub fn binary_changes(
        &self,
        parent: &str,
        commit: &str,
    ) -> Result<Vec<BinaryChange>, GitError> {
        let out = self.run(&[
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--numstat",
            parent,
            commit,
        ])?;
        let mut found = Vec::new();
        for f in out.split('\0').filter(|f| !f.is_empty()) {
            let mut parts = f.splitn(3, '\t');
            let (Some("-"), Some("-"), Some(path)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let (old_bytes, old_lines) = self.blob_measure(parent, path)?;
            let (new_bytes, new_lines) = self.blob_measure(commit, path)?;
            found.push(BinaryChange {
                path: path.to_string(),
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
        let spec = format!("{commit}:{path}");
        let kind = git_command(&self.root)
            .args(["cat-file", "-t", &spec])
            .output()
            .map_err(GitError::Spawn)?;
        if !kind.status.success() || kind.stdout.trim_ascii() != b"blob" {
            return Ok((0, 0));
        }
        let mut child = git_command(&self.root)
            .args(["cat-file", "blob", &spec])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(GitError::Spawn)?;
        let (mut bytes, mut newlines, mut last) = (0u64, 0u64, b'\n');
        if let Some(mut out) = child.stdout.take() {
            let mut buf = vec![0u8; 1 << 16];
            loop {
                let n = out.read(&mut buf).map_err(|source| GitError::Io {
                    path: PathBuf::from(&spec),
                    source,
                })?;
                if n == 0 {
                    break;
                }
                bytes += n as u64;
                newlines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
                last = buf[n - 1];
            }
        }
        let status = child.wait().map_err(GitError::Spawn)?;
        if !status.success() {
            return Err(GitError::Failed {
                args: format!("cat-file blob {spec}"),
                stderr: String::new(),
            });
        }
        let lines = newlines + u64::from(bytes > 0 && last != b'\n');
        Ok((bytes, lines))
    }
}
