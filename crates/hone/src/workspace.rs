//! Git: the run branch, candidate worktrees, archive refs, and the scope and integrity checks.
//!
//! Everything goes through the `git` CLI (as cargo, uv and codex-rs do), run with a fixed
//! identity and without the caller's `GIT_DIR`-style variables, so hone behaves the same in any
//! repository and never needs the user's git configuration to commit.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

mod exact;

/// A git invocation that failed, with what git said.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("cannot run git ({0}); install git and make sure it is on PATH")]
    Spawn(std::io::Error),
    #[error("`git {args}` failed: {stderr}")]
    Failed { args: String, stderr: String },
    #[error("{0} is not inside a git repository; run `git init` and commit your project first")]
    NotARepo(PathBuf),
    #[error("the repository has no commit yet; commit your project first (hone starts from HEAD)")]
    NoCommit,
    #[error("ref {name} moved under hone: expected {expected}, found {found}; another process changed it, so the run stops. Put it back with `git update-ref {name} {expected}` and run `hone run` again, or start a new run with `hone run --new`")]
    RefMoved {
        name: String,
        expected: String,
        found: String,
    },
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// One file changed by a candidate, relative to its parent commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// `A`dded, `M`odified, `D`eleted, `T`ype changed.
    pub status: char,
    pub path: String,
    pub added: u64,
    pub deleted: u64,
}

/// A candidate committed from a worktree.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub commit: String,
    /// The commit's tree: equal trees are identical candidates.
    pub tree: String,
    pub changes: Vec<Change>,
    /// Tracked files the proposer hid from git (`assume-unchanged` / `skip-worktree` flags in
    /// the index); their real content is in `commit` all the same.
    pub hidden: Vec<String>,
}

impl Snapshot {
    pub fn lines_added(&self) -> u64 {
        self.changes.iter().map(|c| c.added).sum()
    }
    pub fn lines_deleted(&self) -> u64 {
        self.changes.iter().map(|c| c.deleted).sum()
    }
}

/// A repository, driven through the git CLI.
#[derive(Clone, Debug)]
pub struct Git {
    root: PathBuf,
    /// The shared `.git` directory, once asked for.
    common: std::sync::OnceLock<PathBuf>,
}

const ENV_REMOVE: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
];

fn git_command(cwd: &Path) -> Command {
    let mut c = Command::new("git");
    // Its own process group: a Ctrl-C at the terminal is meant for hone (which finishes the
    // experiment cleanly), not for the git command that happens to be running.
    c.process_group(0);
    // No hooks and no fsmonitor: nothing a candidate could have planted runs through git.
    c.args([
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        "core.fsmonitor=false",
    ]);
    // No content conversions from configuration or a global attributes file. hone reads and
    // writes file content itself through the raw paths of `workspace::exact`; these settings
    // only keep what is left (status, diff) from rewriting what it shows.
    c.args([
        "-c",
        "core.attributesFile=/dev/null",
        "-c",
        "core.autocrlf=false",
        "-c",
        "core.safecrlf=false",
    ]);
    c.current_dir(cwd)
        .stdin(Stdio::null())
        .env("GIT_AUTHOR_NAME", "hone")
        .env("GIT_AUTHOR_EMAIL", "hone@localhost")
        .env("GIT_COMMITTER_NAME", "hone")
        .env("GIT_COMMITTER_EMAIL", "hone@localhost")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C");
    for v in ENV_REMOVE {
        c.env_remove(v);
    }
    c
}

pub(crate) fn run_git(cwd: &Path, args: &[&str]) -> Result<String, GitError> {
    let out = git_command(cwd)
        .args(args)
        .output()
        .map_err(GitError::Spawn)?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(GitError::Failed {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

impl Git {
    /// Opens the repository that contains `dir` (its top level becomes the root).
    pub fn discover(dir: &Path) -> Result<Git, GitError> {
        match run_git(dir, &["rev-parse", "--show-toplevel"]) {
            Ok(top) => Ok(Git {
                root: PathBuf::from(top.trim()),
                common: std::sync::OnceLock::new(),
            }),
            Err(GitError::Failed { .. }) => Err(GitError::NotARepo(dir.to_path_buf())),
            Err(e) => Err(e),
        }
    }

    /// The checkout's top-level directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Runs git in the user's checkout.
    pub fn run(&self, args: &[&str]) -> Result<String, GitError> {
        run_git(&self.root, args)
    }

    /// Runs git in another directory of this repository (a worktree).
    pub fn run_in(&self, dir: &Path, args: &[&str]) -> Result<String, GitError> {
        run_git(dir, args)
    }

    /// The commit HEAD points at.
    pub fn head(&self) -> Result<String, GitError> {
        self.run(&["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
            .map(|s| s.trim().to_string())
            .map_err(|_| GitError::NoCommit)
    }

    /// Tracked files with uncommitted changes in the user's checkout (they are not part of a run).
    pub fn uncommitted(&self) -> Result<Vec<String>, GitError> {
        let out = self.run(&["status", "--porcelain", "--untracked-files=no"])?;
        Ok(out
            .lines()
            .filter(|l| l.len() > 3)
            .map(|l| l[3..].to_string())
            .collect())
    }

    /// The shared `.git` directory (the same for every worktree).
    pub fn common_dir(&self) -> Result<PathBuf, GitError> {
        if let Some(p) = self.common.get() {
            return Ok(p.clone());
        }
        let out = self.run(&["rev-parse", "--git-common-dir"])?;
        let p = PathBuf::from(out.trim());
        let p = if p.is_absolute() {
            p
        } else {
            self.root.join(p)
        };
        Ok(self.common.get_or_init(|| p).clone())
    }

    /// Adds `pattern` to `.git/info/exclude` unless it is there already.
    pub fn ensure_excluded(&self, pattern: &str) -> Result<(), GitError> {
        let info = self.common_dir()?.join("info");
        let path = info.join("exclude");
        let io = |source| GitError::Io {
            path: path.clone(),
            source,
        };
        let current = match std::fs::read_to_string(&path) {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(io(e)),
        };
        if current.lines().any(|l| l.trim() == pattern) {
            return Ok(());
        }
        std::fs::create_dir_all(&info).map_err(io)?;
        let mut text = current;
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(pattern);
        text.push('\n');
        std::fs::write(&path, text).map_err(io)
    }

    /// The commit a ref points at, if it exists.
    pub fn ref_target(&self, name: &str) -> Result<Option<String>, GitError> {
        match self.run(&[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{name}^{{commit}}"),
        ]) {
            Ok(s) => Ok(Some(s.trim().to_string())),
            Err(GitError::Failed { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Points `name` at `new` only if it currently points at `old` (`None`: must not exist).
    /// A ref that moved under hone is an error, never silently overwritten.
    pub fn update_ref(&self, name: &str, new: &str, old: Option<&str>) -> Result<(), GitError> {
        let zero = "0000000000000000000000000000000000000000";
        let old_arg = old.unwrap_or(zero);
        match self.run(&["update-ref", "-m", "hone", name, new, old_arg]) {
            Ok(_) => Ok(()),
            Err(GitError::Failed { stderr, args }) => {
                let found = self.ref_target(name)?.unwrap_or_else(|| "nothing".into());
                if found != old.unwrap_or("nothing") {
                    Err(GitError::RefMoved {
                        name: name.to_string(),
                        expected: old.unwrap_or("nothing").to_string(),
                        found,
                    })
                } else {
                    Err(GitError::Failed { args, stderr })
                }
            }
            Err(e) => Err(e),
        }
    }

    /// Creates `name` at `commit` unless it already points there.
    pub fn update_ref_if_missing(&self, name: &str, commit: &str) -> Result<(), GitError> {
        match self.ref_target(name)? {
            Some(c) if c == commit => Ok(()),
            Some(c) => self.update_ref(name, commit, Some(&c)),
            None => self.update_ref(name, commit, None),
        }
    }

    /// All refs under a prefix, as (name, commit).
    pub fn refs_under(&self, prefix: &str) -> Result<Vec<(String, String)>, GitError> {
        let out = self.run(&["for-each-ref", "--format=%(refname) %(objectname)", prefix])?;
        Ok(out
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect())
    }

    /// Creates (or repairs) a detached worktree at `path` checked out at `commit`.
    pub fn prepare_worktree(&self, path: &Path, commit: &str) -> Result<(), GitError> {
        if !self.worktree_link_ok(path) {
            if path.exists() {
                std::fs::remove_dir_all(path).map_err(|source| GitError::Io {
                    path: path.to_path_buf(),
                    source,
                })?;
            }
            self.run(&["worktree", "prune"])?;
            let p = path.to_string_lossy();
            // No checkout by git (it would run filters): `reset_worktree` writes the files.
            let args = [
                "worktree",
                "add",
                "--force",
                "--detach",
                "--no-checkout",
                &p,
                commit,
            ];
            self.run(&args)?;
        }
        self.reset_worktree(path, commit)
    }

    /// Makes a worktree exactly `commit`: HEAD detached there (so no branch can be moved by
    /// the reset, even one a proposer checked out), tracked files reset, everything else
    /// removed (ignored files too, so nothing a previous candidate left behind survives).
    pub fn reset_worktree(&self, path: &Path, commit: &str) -> Result<(), GitError> {
        if !self.worktree_link_ok(path) {
            // Never run git through a `.git` a candidate may have replaced: rebuild instead.
            return self.prepare_worktree(path, commit);
        }
        // HEAD and the index by plumbing, the files by hone: git's checkout would run the
        // filters and attribute conversions the repository's config names.
        self.run_in(path, &["update-ref", "--no-deref", "HEAD", commit])?;
        self.run_in(path, &["read-tree", commit])?;
        self.materialize(path, commit)
    }

    /// Is `wt/.git` still the link `git worktree add` wrote (a file naming an administrative
    /// directory of this repository)? A candidate that replaced it could make git run its
    /// configuration or read another object store.
    pub fn worktree_link_ok(&self, wt: &Path) -> bool {
        let link = wt.join(".git");
        match std::fs::symlink_metadata(&link) {
            Ok(m) if m.is_file() => {}
            _ => return false,
        }
        let Ok(text) = std::fs::read_to_string(&link) else {
            return false;
        };
        let Some(target) = text.trim().strip_prefix("gitdir: ") else {
            return false;
        };
        let Ok(common) = self.common_dir() else {
            return false;
        };
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let admin = canon(Path::new(target));
        admin.parent() == Some(canon(&common.join("worktrees")).as_path())
            && admin.file_name().is_some()
            && admin.join("gitdir").exists()
    }

    /// Three-way merges the change from `base` to `change` onto `onto`, without touching any
    /// worktree (`git merge-tree`). `Ok(Ok(tree))`: the merged tree; `Ok(Err(paths))`: the
    /// paths that conflict.
    pub fn merge_onto(
        &self,
        base: &str,
        onto: &str,
        change: &str,
    ) -> Result<Result<String, Vec<String>>, GitError> {
        let merge_base = format!("--merge-base={base}");
        let args = [
            "merge-tree",
            "--write-tree",
            "--name-only",
            "--no-messages",
            merge_base.as_str(),
            onto,
            change,
        ];
        let out = git_command(&self.root)
            .args(args)
            .output()
            .map_err(GitError::Spawn)?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let mut lines = stdout.lines();
        let tree = lines.next().unwrap_or_default().trim().to_string();
        match out.status.code() {
            Some(0) => Ok(Ok(tree)),
            // Exit status 1 is a conflict: the conflicted paths follow the tree.
            Some(1) if !tree.is_empty() => Ok(Err(lines
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect())),
            _ => Err(GitError::Failed {
                args: args.join(" "),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            }),
        }
    }

    /// Removes a worktree and its administrative files (a missing one is fine).
    pub fn remove_worktree(&self, path: &Path) -> Result<(), GitError> {
        if path.exists() {
            let p = path.to_string_lossy();
            if self.run(&["worktree", "remove", "--force", &p]).is_err() && path.exists() {
                std::fs::remove_dir_all(path).map_err(|source| GitError::Io {
                    path: path.to_path_buf(),
                    source,
                })?;
            }
        }
        self.run(&["worktree", "prune"]).map(|_| ())
    }

    /// Removes the files git ignores from a worktree, so the verifier sees exactly the
    /// committed candidate (a planted `__pycache__/*.pyc` cannot stand in for a source file).
    pub fn remove_ignored(&self, path: &Path) -> Result<(), GitError> {
        self.run_in(path, &["clean", "-ffdXq"]).map(|_| ())
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
        let listing = self.run_in(wt, &["ls-files", "-v", "-z"])?;
        let hidden: Vec<String> = listing
            .split('\0')
            .filter_map(|e| {
                let (tag, path) = e.split_once(' ')?;
                let flagged = tag
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_lowercase() || c == 'S');
                flagged.then(|| path.to_string())
            })
            .collect();
        if !hidden.is_empty() {
            let index = self.run_in(wt, &["rev-parse", "--git-path", "index"])?;
            let index = wt.join(index.trim());
            std::fs::remove_file(&index).map_err(|source| GitError::Io {
                path: index,
                source,
            })?;
            self.run_in(wt, &["read-tree", parent])?;
        }
        // What `git add -A` would commit, hashed as raw bytes (no filter, no conversion).
        let tree = self.raw_tree(wt)?;
        let parent_tree = self
            .run_in(wt, &["rev-parse", &format!("{parent}^{{tree}}")])?
            .trim()
            .to_string();
        if tree == parent_tree {
            return Ok(None);
        }
        let commit = self
            .run_in(wt, &["commit-tree", &tree, "-p", parent, "-m", message])?
            .trim()
            .to_string();
        let changes = self.changes(parent, &commit)?;
        Ok(Some(Snapshot {
            commit,
            tree,
            changes,
            hidden,
        }))
    }

    /// What `commit` changed relative to `parent`: status and line counts per file (one git
    /// call: `--raw` records carry the status, `--numstat` records the line counts).
    pub fn changes(&self, parent: &str, commit: &str) -> Result<Vec<Change>, GitError> {
        let out = self.run(&[
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--raw",
            "--numstat",
            parent,
            commit,
        ])?;
        let mut out_changes: Vec<Change> = Vec::new();
        let mut counts: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        let mut fields = out.split('\0').filter(|f| !f.is_empty());
        while let Some(f) = fields.next() {
            if let Some(raw) = f.strip_prefix(':') {
                // ":old_mode new_mode old_sha new_sha STATUS" then the path.
                let status = raw
                    .rsplit(' ')
                    .next()
                    .and_then(|s| s.chars().next())
                    .unwrap_or('M');
                let Some(path) = fields.next() else { break };
                out_changes.push(Change {
                    status,
                    path: path.to_string(),
                    added: 0,
                    deleted: 0,
                });
            } else {
                // "added TAB deleted TAB path" ("-" for binary files).
                let mut parts = f.splitn(3, '\t');
                if let (Some(a), Some(d), Some(p)) = (parts.next(), parts.next(), parts.next()) {
                    counts.insert(
                        p.to_string(),
                        (a.parse().unwrap_or(0), d.parse().unwrap_or(0)),
                    );
                }
            }
        }
        for c in &mut out_changes {
            if let Some((a, d)) = counts.get(&c.path) {
                c.added = *a;
                c.deleted = *d;
            }
        }
        Ok(out_changes)
    }

    /// The tree of a commit.
    pub fn tree_of(&self, commit: &str) -> Result<String, GitError> {
        Ok(self
            .run(&["rev-parse", &format!("{commit}^{{tree}}")])?
            .trim()
            .to_string())
    }

    /// The unified diff from `parent` to `commit`.
    pub fn diff(&self, parent: &str, commit: &str) -> Result<String, GitError> {
        self.run(&[
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            parent,
            commit,
        ])
    }

    /// The first path of `commit` that is not valid UTF-8 (shown with its bad bytes replaced),
    /// if any: hone keeps paths as text, so it refuses such a repository rather than rename
    /// a file.
    pub fn non_utf8_path(&self, commit: &str) -> Result<Option<String>, GitError> {
        let args = ["ls-tree", "-r", "-z", "--name-only", commit];
        let out = git_command(&self.root)
            .args(args)
            .output()
            .map_err(GitError::Spawn)?;
        if !out.status.success() {
            return Err(GitError::Failed {
                args: args.join(" "),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(out
            .stdout
            .split(|b| *b == 0)
            .find(|p| std::str::from_utf8(p).is_err())
            .map(|p| String::from_utf8_lossy(p).into_owned()))
    }

    /// Paths of all files in a commit.
    pub fn files_at(&self, commit: &str) -> Result<Vec<String>, GitError> {
        let out = self.run(&["ls-tree", "-r", "-z", "--name-only", commit])?;
        Ok(out
            .split('\0')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect())
    }

    /// The content of a file in a commit.
    pub fn file_at(&self, commit: &str, path: &str) -> Result<Vec<u8>, GitError> {
        let out = git_command(&self.root)
            .args(["cat-file", "blob", &format!("{commit}:{path}")])
            .output()
            .map_err(GitError::Spawn)?;
        if out.status.success() {
            Ok(out.stdout)
        } else {
            Err(GitError::Failed {
                args: format!("cat-file blob {commit}:{path}"),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            })
        }
    }
}

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

/// Does `path` (repository-relative, `/`-separated) match a glob from `editable`, `protected`
/// or `pinned`? `*` and `?` stay within one path segment, `**` crosses segments, and a pattern
/// naming a directory (`data/` or `data`) matches everything under it.
pub fn glob_match(pattern: &str, path: &str) -> bool {
    let pat = pattern.trim_start_matches("./");
    let dir = pat.trim_end_matches('/');
    if dir.is_empty() {
        return false;
    }
    if path == dir || path.starts_with(&format!("{dir}/")) && !has_glob(dir) {
        return true;
    }
    let p: Vec<&str> = dir.split('/').collect();
    let s: Vec<&str> = path.split('/').collect();
    match_segments(&p, &s)
        || (pat.ends_with('/')
            && has_glob(dir)
            && (1..s.len()).any(|k| match_segments(&p, &s[..k])))
}

fn has_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

fn match_segments(p: &[&str], s: &[&str]) -> bool {
    match p.first() {
        None => s.is_empty(),
        Some(&"**") => (0..=s.len()).any(|k| match_segments(&p[1..], &s[k..])),
        Some(seg) => {
            !s.is_empty()
                && match_one(seg.as_bytes(), s[0].as_bytes())
                && match_segments(&p[1..], &s[1..])
        }
    }
}

fn match_one(p: &[u8], s: &[u8]) -> bool {
    match p.first() {
        None => s.is_empty(),
        Some(b'*') => (0..=s.len()).any(|k| match_one(&p[1..], &s[k..])),
        Some(b'?') => !s.is_empty() && match_one(&p[1..], &s[1..]),
        Some(c) => s.first() == Some(c) && match_one(&p[1..], &s[1..]),
    }
}

/// True if `path` matches any of `patterns`.
pub fn matches_any(patterns: &[String], path: &str) -> bool {
    patterns.iter().any(|p| glob_match(p, path))
}

/// Content hashes of files (directories are walked, in sorted order), keyed by path relative to
/// `base`. A path that does not exist hashes to `missing`, so that its later appearance counts
/// as a change too.
pub fn hash_paths(base: &Path, paths: &[String]) -> Result<BTreeMap<String, String>, GitError> {
    let mut out = BTreeMap::new();
    for p in paths {
        let full = if Path::new(p).is_absolute() {
            PathBuf::from(p)
        } else {
            base.join(p.trim_end_matches('/'))
        };
        hash_into(&full, p.trim_end_matches('/'), &mut out)?;
    }
    Ok(out)
}

fn hash_into(full: &Path, key: &str, out: &mut BTreeMap<String, String>) -> Result<(), GitError> {
    let io = |source| GitError::Io {
        path: full.to_path_buf(),
        source,
    };
    let meta = match std::fs::symlink_metadata(full) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            out.insert(key.to_string(), "missing".into());
            return Ok(());
        }
        Err(e) => return Err(io(e)),
    };
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(full).map_err(io)?;
        out.insert(key.to_string(), format!("symlink:{}", target.display()));
    } else if meta.is_dir() {
        let mut names: Vec<_> = std::fs::read_dir(full)
            .map_err(io)?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for n in names {
            if n == "__pycache__" {
                continue;
            }
            hash_into(&full.join(&n), &format!("{key}/{n}"), out)?;
        }
    } else {
        let mut f = std::fs::File::open(full).map_err(io)?;
        let mut h = Sha256::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = f.read(&mut buf).map_err(io)?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
        out.insert(key.to_string(), hex(&h.finalize()));
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The first difference between two hash maps, as a path, for error messages.
pub fn first_difference(
    a: &BTreeMap<String, String>,
    b: &BTreeMap<String, String>,
) -> Option<String> {
    a.iter()
        .find(|(k, v)| b.get(*k) != Some(v))
        .map(|(k, _)| k.clone())
        .or_else(|| b.keys().find(|k| !a.contains_key(*k)).cloned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(dir: &Path, cmd: &str) {
        let ok = Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .current_dir(dir)
            .status()
            .unwrap()
            .success();
        assert!(ok, "{cmd}");
    }

    /// A repository in a temporary directory whose first commit holds what `files` (a shell
    /// command) writes.
    fn committed(files: &str) -> (tempfile::TempDir, Git) {
        let dir = tempfile::tempdir().unwrap();
        sh(dir.path(), &format!("git init -q -b main && {files} && git add -A && git -c user.name=t -c user.email=t@t commit -qm i"));
        let git = Git::discover(dir.path()).unwrap();
        (dir, git)
    }

    #[test]
    fn snapshot_reports_changes_with_line_counts_and_reset_restores() {
        let (dir, git) = committed("printf 'a\\nb\\n' > f.txt && printf 'x\\n' > 'sp ace.txt'");
        let d = dir.path();
        let head = git.head().unwrap();
        let wt = d.join(".hone/wt");
        git.prepare_worktree(&wt, &head).unwrap();
        sh(
            &wt,
            "printf 'a\\nB\\nc\\n' > f.txt && rm 'sp ace.txt' && printf '\\0\\1' > bin.dat",
        );
        let snap = git.snapshot(&wt, &head, "m").unwrap().unwrap();
        let mut got: Vec<(char, String, u64, u64)> = snap
            .changes
            .iter()
            .map(|c| (c.status, c.path.clone(), c.added, c.deleted))
            .collect();
        got.sort_by(|a, b| a.1.cmp(&b.1));
        assert_eq!(
            got,
            vec![
                ('A', "bin.dat".to_string(), 0, 0),
                ('M', "f.txt".to_string(), 2, 1),
                ('D', "sp ace.txt".to_string(), 0, 1),
            ]
        );
        assert!(snap.hidden.is_empty());
        // Nothing changed: no snapshot.
        git.reset_worktree(&wt, &head).unwrap();
        assert!(git.snapshot(&wt, &head, "m").unwrap().is_none());
        assert_eq!(std::fs::read_to_string(wt.join("f.txt")).unwrap(), "a\nb\n");
        assert!(!wt.join("bin.dat").exists());
    }

    /// A repository whose config and `info/attributes` ask for every content conversion git
    /// has (filters, `ident`, CRLF, textconv, an external diff): hone's own git runs none of
    /// them, commits the worktree's raw bytes and writes a worktree from the raw blobs.
    #[test]
    fn hostile_config_and_attributes_change_nothing_hone_commits_or_writes() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        sh(d, "git init -q -b main && printf 'a\\n$Id$\\n' > f.txt && git add -A && git -c user.name=t -c user.email=t@t commit -qm i");
        let mark = d.join("ran");
        let m = mark.display();
        sh(
            d,
            &format!(
                "git config filter.x.clean 'touch {m}-clean; sed s/a/CLEAN/' && \
                 git config filter.x.smudge 'touch {m}-smudge; sed s/a/SMUDGE/' && \
                 git config filter.x.required true && \
                 git config diff.x.textconv 'touch {m}-textconv; echo hidden' && \
                 git config diff.external 'touch {m}-ext' && \
                 git config core.autocrlf true && git config core.eol crlf && \
                 mkdir -p .git/info && printf '* filter=x diff=x ident text eol=crlf\\n' > .git/info/attributes"
            ),
        );
        let git = Git::discover(d).unwrap();
        let head = git.head().unwrap();
        let wt = d.join(".hone/wt");
        git.prepare_worktree(&wt, &head).unwrap();
        // Written from the blob as it is: no smudge, no CRLF, no `$Id$` expansion.
        assert_eq!(std::fs::read(wt.join("f.txt")).unwrap(), b"a\n$Id$\n");
        std::fs::write(wt.join("f.txt"), b"a\r\nforbidden\r\n$Id$\n").unwrap();
        let snap = git.snapshot(&wt, &head, "m").unwrap().unwrap();
        assert_eq!(
            git.file_at(&snap.commit, "f.txt").unwrap(),
            b"a\r\nforbidden\r\n$Id$\n"
        );
        assert!(git
            .diff(&head, &snap.commit)
            .unwrap()
            .contains("+forbidden"));
        git.reset_worktree(&wt, &head).unwrap();
        assert_eq!(std::fs::read(wt.join("f.txt")).unwrap(), b"a\n$Id$\n");
        git.materialize(&wt, &snap.commit).unwrap();
        assert_eq!(
            std::fs::read(wt.join("f.txt")).unwrap(),
            b"a\r\nforbidden\r\n$Id$\n"
        );
        assert!(git.changed_tracked(&wt, &snap.commit).unwrap().is_empty());
        std::fs::write(wt.join("f.txt"), b"a\r\nforbidden\r\n$Id$\n ").unwrap();
        assert_eq!(git.changed_tracked(&wt, &snap.commit).unwrap(), ["f.txt"]);
        for what in ["clean", "smudge", "textconv", "ext"] {
            let p = d.join(format!("ran-{what}"));
            assert!(!p.exists(), "hone's git ran the {what} command");
        }
    }

    /// `materialize` leaves exactly the commit: extra files, ignored files, a nested
    /// repository and a directory deeper than PATH_MAX all go; changed modes come back.
    #[test]
    fn materialize_removes_everything_else_even_beyond_path_max() {
        let (dir, git) = committed("printf 'x\\n' > f.py && mkdir src && printf 'y\\n' > src/g.py && chmod +x src/g.py && printf '*.log\\n' > .gitignore");
        let d = dir.path();
        let head = git.head().unwrap();
        let wt = d.join(".hone/wt");
        git.prepare_worktree(&wt, &head).unwrap();
        assert!(git.unrecordable(&wt).unwrap().is_none());
        sh(&wt, "printf z > x.log && chmod -x src/g.py && rm f.py && mkdir -p sub && git -C sub init -q && printf p > sub/__main__.py");
        assert!(git
            .unrecordable(&wt)
            .unwrap()
            .unwrap()
            .contains("`sub/.git`"));
        std::fs::rename(wt.join("sub"), d.join("sub")).unwrap();
        // 2,100 levels: beyond what one system call can name.
        sh(
            &wt.join("src"),
            "python3 -c \"import os\nfor _ in range(2100):\n    os.mkdir('a'); os.chdir('a')\nopen('x.py', 'w').write('p')\"",
        );
        assert!(git.unrecordable(&wt).unwrap().unwrap().contains("too deep"));
        std::fs::rename(d.join("sub"), wt.join("sub")).unwrap();
        git.reset_worktree(&wt, &head).unwrap();
        assert!(git.unrecordable(&wt).unwrap().is_none());
        let mut names: Vec<_> = std::fs::read_dir(&wt)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, [".git", ".gitignore", "f.py", "src"]);
        let mode = std::fs::metadata(wt.join("src/g.py"))
            .unwrap()
            .permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o111,
            0o111
        );
    }

    /// A directory the candidate replaced by a symlink to hidden data: the snapshot commits
    /// the symlink, never the data behind it (hone reads outside every sandbox).
    #[test]
    fn a_snapshot_never_reads_through_a_symlinked_directory() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let secret = tempfile::tempdir().unwrap();
        std::fs::write(secret.path().join("0.log"), "TOPSECRET\n").unwrap();
        sh(d, "git init -q -b main && mkdir -p src/h && printf 'x\n' > src/h/0.log && git add -A && git -c user.name=t -c user.email=t@t commit -qm i");
        let git = Git::discover(d).unwrap();
        let head = git.head().unwrap();
        let wt = d.join(".hone/wt");
        git.prepare_worktree(&wt, &head).unwrap();
        sh(
            &wt,
            &format!("rm -rf src/h && ln -s {} src/h", secret.path().display()),
        );
        let snap = git.snapshot(&wt, &head, "m").unwrap().unwrap();
        let tree = git.run(&["ls-tree", "-r", &snap.commit]).unwrap();
        assert!(
            tree.contains("120000 blob"),
            "the symlink is committed: {tree}"
        );
        assert!(!tree.contains("src/h/0.log"), "{tree}");
        let all = git.run(&["grep", "-c", "TOPSECRET", &snap.commit]);
        assert!(all.is_err(), "the hidden data reached the commit: {all:?}");
    }

    /// A training stage that put a symlink where the commit has a directory of outputs: the
    /// sealed rebuild writes nothing through it.
    #[test]
    fn the_sealed_rebuild_never_writes_through_a_planted_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let outside = tempfile::tempdir().unwrap();
        sh(d, "git init -q -b main && mkdir checkpoints && printf keep > checkpoints/.gitkeep && printf P > prepare.py && git add -A && git -c user.name=t -c user.email=t@t commit -qm i");
        let git = Git::discover(d).unwrap();
        let head = git.head().unwrap();
        let wt = d.join(".hone/wt");
        git.prepare_worktree(&wt, &head).unwrap();
        sh(
            &wt,
            &format!(
                "rm -r checkpoints && ln -s {} checkpoints",
                outside.path().display()
            ),
        );
        let keep = ["checkpoints/".to_string()];
        git.materialize_sealed(&wt, (&head, &head), &["prepare.py".to_string()], &keep)
            .unwrap();
        assert_eq!(
            std::fs::read_dir(outside.path()).unwrap().count(),
            0,
            "nothing was written outside the worktree"
        );
        let meta = std::fs::symlink_metadata(wt.join("checkpoints")).unwrap();
        assert!(meta.is_dir(), "a real directory again");
        assert_eq!(
            std::fs::read_to_string(wt.join("checkpoints/.gitkeep")).unwrap(),
            "keep"
        );
    }

    /// The sealed evaluation's tree: the candidate's files, the sealed ones from the base,
    /// and of the rest only the declared outputs.
    #[test]
    fn materialize_sealed_keeps_outputs_and_restores_sealed_files() {
        let (dir, git) = committed("printf P1 > prepare.py && printf m > model.py");
        let d = dir.path();
        let base = git.head().unwrap();
        sh(d, "printf P2 > prepare.py && printf m2 > model.py && git add -A && git -c user.name=t -c user.email=t@t commit -qm c");
        let cand = git.head().unwrap();
        let wt = d.join(".hone/wt");
        git.prepare_worktree(&wt, &cand).unwrap();
        sh(&wt, "printf o > model.txt && mkdir -p out sub && printf o > out/model.txt && printf j > junk.txt && printf j > sub/junk && printf x > model.py");
        let sealed = ["prepare.py".to_string()];
        let keep = ["model.txt".to_string()];
        git.materialize_sealed(&wt, (&cand, &base), &sealed, &keep)
            .unwrap();
        let read = |p: &str| std::fs::read_to_string(wt.join(p)).unwrap();
        assert_eq!(read("prepare.py"), "P1");
        assert_eq!(read("model.py"), "m2");
        assert_eq!(read("model.txt"), "o");
        assert_eq!(read("out/model.txt"), "o");
        assert!(!wt.join("junk.txt").exists());
        assert!(!wt.join("sub").exists());
    }

    #[test]
    fn a_snapshot_whose_staged_objects_were_pruned_writes_them_again() {
        // `git gc --prune=now` racing `git add`: the index names a blob that is gone.
        let (dir, git) = committed("printf 'a\\n' > f.txt");
        let d = dir.path();
        let head = git.head().unwrap();
        let wt = d.join(".hone/wt");
        git.prepare_worktree(&wt, &head).unwrap();
        // An old mtime: the file is not "racily clean", so git trusts the index entry.
        sh(
            &wt,
            "printf 'new content\\n' > f.txt && touch -d 2020-01-01 f.txt && git add -A",
        );
        let blob = git.run_in(&wt, &["rev-parse", ":f.txt"]).unwrap();
        let blob = blob.trim();
        let objects = git.common_dir().unwrap().join("objects");
        std::fs::remove_file(objects.join(&blob[..2]).join(&blob[2..])).unwrap();
        assert_eq!(
            git.missing_objects(&[blob.to_string(), head.clone()])
                .unwrap(),
            [blob]
        );
        // The snapshot hashes the files' raw bytes itself (it never trusts the index's
        // entries), so the pruned blob is written again; a reindex changes nothing after it.
        let first = git.snapshot(&wt, &head, "m").unwrap().unwrap();
        git.reindex(&wt, &head).unwrap();
        let snap = git.snapshot(&wt, &head, "m").unwrap().unwrap();
        assert_eq!(first.tree, snap.tree);
        assert!(git
            .missing_objects(&[snap.commit.clone(), blob.to_string()])
            .unwrap()
            .is_empty());
        assert_eq!(
            git.file_at(&snap.commit, "f.txt").unwrap(),
            b"new content\n"
        );
        // A ref to a missing object still reads raw (for recovery to remove it).
        assert_eq!(git.raw_ref("refs/nothing").unwrap(), None);
    }

    #[test]
    fn globs() {
        assert!(glob_match("train.py", "train.py"));
        assert!(!glob_match("train.py", "src/train.py"));
        assert!(glob_match("*.py", "train.py"));
        assert!(!glob_match("*.py", "src/train.py"));
        assert!(glob_match("**/*.py", "src/a/train.py"));
        assert!(glob_match("**/*.py", "train.py"));
        assert!(glob_match("data/", "data/x/y.bin"));
        assert!(glob_match("data", "data/x.bin"));
        assert!(!glob_match("data/", "database.txt"));
        assert!(glob_match("src/*/mod.rs", "src/a/mod.rs"));
        assert!(glob_match("model_?.py", "model_a.py"));
        assert!(!glob_match("model_?.py", "model_ab.py"));
        assert!(glob_match("src/**", "src/a/b.rs"));
    }
}
