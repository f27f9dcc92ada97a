//! Git: the run branch, candidate worktrees, archive refs, and the scope and integrity checks.
//!
//! The operations of every experiment (refs, commits, trees, blobs, line counts) run inside
//! hone through libgit2 (`inproc`, `numstat`); the rest goes through the `git` CLI (as cargo,
//! uv and codex-rs do). Both use a fixed identity and ignore the caller's `GIT_DIR`-style
//! variables, so hone behaves the same in any repository and never needs the user's git
//! configuration to commit.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

mod binary;
mod digest;
mod exact;
mod inproc;
mod listing;
mod numstat;
mod paths;
mod ref_files;
mod ref_guard;
mod repair;
mod snapshot;
mod space;

pub use binary::BinaryChange;
pub use inproc::is_full_hex;
pub use listing::RefListing;
pub use paths::{first_difference, glob_match, hash_paths, hash_paths_bounded, matches_any};
pub use snapshot::IndexListing;
pub use space::{disk_nearly_full, on_disk, out_of_room, remove_any, removed_for_room};

/// A git invocation that failed, with what git said.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("cannot run git ({0}); install git and make sure it is on PATH")]
    Spawn(std::io::Error),
    #[error("`git {args}` failed: {stderr}")]
    Failed { args: String, stderr: String },
    #[error("{0} is not inside a git repository; run `git init` and commit your project first")]
    NotARepo(PathBuf),
    #[error("{} is a repository with {objects} object names and `{refs}` ref storage, which hone cannot read: hone needs a SHA-1 repository with the files ref backend (the default of `git init`); clone the project into one (`git init --object-format=sha1 --ref-format=files`, then fetch) and run hone there", root.display())]
    Unsupported {
        root: PathBuf,
        objects: String,
        refs: String,
    },
    #[error("the repository has no commit yet; commit your project first (hone starts from HEAD)")]
    NoCommit,
    #[error("ref {name} moved under hone: expected {expected}, found {found}; another process changed it, so the run stops. Put it back with `git update-ref {name} {expected}` and run `hone run` again, or start a new run with `hone run --new`")]
    RefMoved {
        name: String,
        expected: String,
        found: String,
    },
    #[error("{} is not a file git can read (a FIFO, a socket or a device where a ref, HEAD or the configuration belongs): reading it would wait forever, so hone stops; remove it (an agent or a candidate's code may have made it) and run `hone run` again", path.display())]
    UnreadableRef { path: PathBuf },
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} take a candidate's new content past what hone archives ({limit} bytes)", too_large(files), limit = MAX_NEW_FILE_BYTES)]
    TooLarge {
        /// The new files to leave out for the rest to fit, largest first: (path, bytes).
        files: Vec<(String, u64)>,
    },
}

/// `a (N bytes), b (M bytes)`.
pub fn too_large(files: &[(String, u64)]) -> String {
    let named: Vec<String> = files
        .iter()
        .map(|(p, n)| format!("{p} ({n} bytes)"))
        .collect();
    named.join(", ")
}

/// The most new content hone reads from a candidate's files (1 GiB in all): more (a sparse
/// file of a terabyte takes a second to make and hours to hash) is not archived. A file as
/// large as the index's blob at its path counts as none, so a large file the project tracks
/// and the candidate left alone is archived as before.
pub const MAX_NEW_FILE_BYTES: u64 = 1 << 30;

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

/// A repository, driven through libgit2 (opened afresh by each operation) and the git CLI.
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
    // git runs its helpers from here, ahead of PATH: never a directory a candidate wrote.
    "GIT_EXEC_PATH",
];

/// The command-line git hone runs ([`crate::util::program_on_path`]): it runs in worktrees a
/// candidate wrote, where a plain `git` could be found through a relative or empty `PATH`
/// entry, put there to run as hone.
pub fn git_program() -> std::ffi::OsString {
    crate::util::program_on_path("git")
}

/// git's subcommands that talk to another repository, whose transports (ssh, https and their
/// credential helpers) may need anything of the user's environment.
const NETWORK: &[&str] = &["push", "fetch", "ls-remote", "clone", "pull"];

fn git_command(cwd: &Path) -> Command {
    git_command_for(cwd, false)
}

/// git for `cwd`: for a command that talks to another repository (`network`), hone's
/// environment less hone's settings and every variable that holds a secret a run registered;
/// for any other, only what git needs ([`git_needs`]). git and the ssh it starts are
/// dumpable, so a process of the same user (an agent, a verifier beside it) could read a
/// secret of hone's in their environment.
fn git_command_for(cwd: &Path, network: bool) -> Command {
    let mut c = Command::new(git_program());
    c.env_clear();
    for (name, value) in std::env::vars_os().filter(|(k, v)| {
        if network {
            !k.to_string_lossy().starts_with("HONE_")
                && !crate::util::is_withheld(&v.to_string_lossy())
        } else {
            git_needs(k, v)
        }
    }) {
        c.env(name, value);
    }
    // And neither git's libraries nor whatever it starts in turn are looked up in the
    // worktree either.
    for (name, value) in crate::util::search_paths_of(std::env::vars_os()) {
        c.env(name, value);
    }
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

/// The variables of hone's environment a git command that stays in this repository gets: its
/// own (`GIT_*`, but those that would point it at another repository, see `ENV_REMOVE`),
/// ssh's, the user's identity and configuration directories, proxies and certificates, the
/// locale and time zone; never one that holds a secret hone registered
/// ([`crate::util::withhold`]), whatever its name.
fn git_needs(name: &std::ffi::OsStr, value: &std::ffi::OsStr) -> bool {
    const NAMES: &[&str] = &[
        "HOME",
        "USER",
        "LOGNAME",
        "TMPDIR",
        "TZ",
        "LANG",
        "TERM",
        "SHELL",
        "DISPLAY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "all_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "ALL_PROXY",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "CURL_CA_BUNDLE",
        "GNUPGHOME",
    ];
    const PREFIXES: &[&str] = &["GIT_", "SSH_", "LC_", "XDG_"];
    let name = name.to_string_lossy();
    (NAMES.contains(&name.as_ref()) || PREFIXES.iter().any(|p| name.starts_with(p)))
        && !crate::util::is_withheld(&value.to_string_lossy())
}

pub(crate) fn run_git(cwd: &Path, args: &[&str]) -> Result<String, GitError> {
    let network = args.first().is_some_and(|a| NETWORK.contains(a));
    let out = git_command_for(cwd, network)
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
        // Command-line git here because it is git's own discovery (once per process), and the
        // root it finds is what libgit2 then opens without searching.
        // The formats in the same process: libgit2 reads only SHA-1 object names and
        // loose/packed refs. A git that does not know an option echoes it back (before 2.29
        // there are only SHA-1 repositories, before 2.45 only the files backend).
        let args = [
            "rev-parse",
            "--show-toplevel",
            "--show-object-format",
            "--show-ref-format",
        ];
        // git's discovery reads `HEAD` and the configuration of the repository it finds: a
        // FIFO there would hold it forever (see `ref_guard`).
        if let Some(git_dir) = dir.ancestors().map(|a| a.join(".git")).find(|g| g.is_dir()) {
            if let Some(path) = ref_guard::unreadable_ref_file(&git_dir) {
                return Err(GitError::UnreadableRef { path });
            }
        }
        let out = match run_git(dir, &args) {
            Ok(out) => out,
            Err(GitError::Failed { .. }) => return Err(GitError::NotARepo(dir.to_path_buf())),
            Err(e) => return Err(e),
        };
        let mut parts = out.trim_end_matches('\n').rsplitn(3, '\n');
        let refs = parts.next().unwrap_or_default();
        let objects = parts.next().unwrap_or_default();
        let top = parts.next().unwrap_or_default();
        let sha1 = matches!(objects, "sha1" | "--show-object-format");
        if !sha1 || !matches!(refs, "files" | "--show-ref-format") {
            return Err(GitError::Unsupported {
                root: PathBuf::from(top),
                objects: objects.to_string(),
                refs: refs.to_string(),
            });
        }
        Ok(Git {
            root: PathBuf::from(top.trim()),
            common: std::sync::OnceLock::new(),
        })
    }

    /// Every ref file, `HEAD` and the configuration is one git and libgit2 can open without
    /// waiting forever (see `ref_guard`): checked when a run opens, and before libgit2 reads
    /// refs hone's own reader declined.
    pub fn check_ref_files(&self) -> Result<(), GitError> {
        let plain = self.root.join(".git");
        let git_dir = if plain.is_dir() {
            plain
        } else {
            self.common_dir()?
        };
        match ref_guard::unreadable_ref_file(&git_dir) {
            Some(path) => Err(GitError::UnreadableRef { path }),
            None => Ok(()),
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

    /// A commit by hone of `tree` on `parent` with `message` (written in process: a message of
    /// any length, which an argument to git could not hold); its id.
    pub fn commit_with_message(
        &self,
        tree: &str,
        parent: &str,
        message: &str,
    ) -> Result<String, GitError> {
        self.commit_tree(&self.repo()?, tree, parent, message)
    }

    /// Runs git in another directory of this repository (a worktree).
    pub fn run_in(&self, dir: &Path, args: &[&str]) -> Result<String, GitError> {
        run_git(dir, args)
    }

    /// The commit HEAD points at.
    pub fn head(&self) -> Result<String, GitError> {
        let repo = self.repo()?;
        self.rev_parse(&repo, "HEAD^{commit}")
            .ok_or(GitError::NoCommit)
    }

    /// Tracked files with uncommitted changes in the user's checkout (they are not part of a run).
    pub fn uncommitted(&self) -> Result<Vec<String>, GitError> {
        // Command-line git here because status needs the checkout's index and its stat cache.
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
        // Every file git reads looked at first (`info/exclude` among them): a FIFO there
        // would hold this read, and git, forever. (The first thing a run does: see
        // `engine::session`.)
        self.check_ref_files()?;
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
        let repo = self.repo()?;
        Ok(self.rev_parse(&repo, &format!("{name}^{{commit}}")))
    }

    /// Points `name` at `new` only if it currently points at `old` (`None`: must not exist).
    /// A ref that moved under hone is an error, never silently overwritten.
    pub fn update_ref(&self, name: &str, new: &str, old: Option<&str>) -> Result<(), GitError> {
        match self.swap_ref(name, new, old) {
            Ok(Some(true)) => return Ok(()),
            Ok(Some(false)) => return Err(self.moved(name, old)?),
            // Command-line git here because the ref is symbolic (or a link): with `--no-deref`
            // git replaces the ref itself, never the one it leads to (a user's branch).
            Ok(None) => {}
            Err(e) => return Err(e),
        }
        let zero = "0000000000000000000000000000000000000000";
        let old_arg = old.unwrap_or(zero);
        match self.run(&["update-ref", "-m", "hone", "--no-deref", name, new, old_arg]) {
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

    /// The error for a ref that does not hold what hone expected (`None`: nothing).
    fn moved(&self, name: &str, old: Option<&str>) -> Result<GitError, GitError> {
        let found = self.ref_target(name)?.unwrap_or_else(|| "nothing".into());
        Ok(GitError::RefMoved {
            name: name.to_string(),
            expected: old.unwrap_or("nothing").to_string(),
            found,
        })
    }

    /// Puts the ref `name` back to `want` (`None`: deleted) from `now`, what it holds now as
    /// [`Git::ref_value_raw`] reads it. A ref made symbolic (or a link) is deleted itself first
    /// (never written through: that would move the ref it leads to, a user's branch say).
    pub fn put_ref_back(&self, name: &str, want: Option<&str>, now: &str) -> Result<(), GitError> {
        if now.starts_with("ref: ") || now.starts_with("link: ") {
            // Command-line git here because `--no-deref` deletes the link itself under git's
            // own locking, whatever kind of link it is.
            self.run(&["update-ref", "--no-deref", "-d", name])?;
            return match want {
                Some(w) => self.update_ref(name, w, None),
                None => Ok(()),
            };
        }
        match want {
            Some(w) => self.update_ref(name, w, Some(now)),
            None => self
                .run(&["update-ref", "--no-deref", "-d", name, now])
                .map(|_| ()),
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
        if prefix.ends_with('/') && !prefix.contains(['*', '?', '[', '\\']) {
            return self.refs_with_prefix(prefix);
        }
        // Command-line git here because a pattern that is not a plain directory prefix
        // follows for-each-ref's own matching rules.
        let out = self.run(&["for-each-ref", "--format=%(refname) %(objectname)", prefix])?;
        Ok(out
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect())
    }

    /// The refs under `prefix` (which ends with `/`) and the ref `name` (where there is one),
    /// each with what it holds as [`Git::ref_value_raw`] says it (an annotated tag not peeled,
    /// a symbolic ref as `ref: TARGET`, not followed), read together: straight from the ref
    /// files where the repository has the plain layout, through libgit2 otherwise.
    pub fn refs_under_and(&self, prefix: &str, name: &str) -> Result<RefListing, GitError> {
        if let Some(found) = ref_files::listing(&self.root, prefix, name) {
            return Ok(found);
        }
        self.check_ref_files()?;
        let mut refs = self.refs_with_prefix_libgit2(prefix, false)?;
        if let Some(value) = self.ref_value_raw(name)? {
            refs.retain(|(n, _)| n != name);
            refs.push((name.to_string(), value));
        }
        Ok(RefListing::new(refs))
    }

    /// Creates (or repairs) a detached worktree at `path` checked out at `commit`.
    pub fn prepare_worktree(&self, path: &Path, commit: &str) -> Result<(), GitError> {
        if !self.worktree_link_ok(path) {
            remove_any(path)?;
            // Command-line git here because libgit2's worktree support writes other
            // administrative files than `git worktree add`.
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
        if self.reset_worktree_checked(path, commit)? {
            return Ok(());
        }
        // Not rebuilt again (that could go on forever): git's own link fails hone's check.
        Err(GitError::Failed {
            args: format!("worktree add {}", path.display()),
            stderr: "the new worktree's .git is not the link hone checks for".to_string(),
        })
    }

    /// Makes a worktree exactly `commit`: HEAD detached there (so no branch can be moved by
    /// the reset, even one a proposer checked out), tracked files reset, everything else
    /// removed (ignored files too, so nothing a previous candidate left behind survives).
    /// A worktree whose git link was replaced is rebuilt.
    pub fn reset_worktree(&self, path: &Path, commit: &str) -> Result<(), GitError> {
        if self.reset_worktree_checked(path, commit)? {
            return Ok(());
        }
        // Never run git through a `.git` a candidate may have replaced: rebuild instead.
        self.prepare_worktree(path, commit)
    }

    /// The reset of [`Git::reset_worktree`] without its rebuild: `Ok(false)`, and nothing
    /// touched, where the worktree's git link fails [`Git::worktree_link_ok`] (so a later
    /// integrity check still finds the replaced link as the candidate left it).
    pub fn reset_worktree_checked(&self, path: &Path, commit: &str) -> Result<bool, GitError> {
        if !self.worktree_link_ok(path) {
            return Ok(false);
        }
        // HEAD and the index by plumbing, the files by hone: git's checkout would run the
        // filters and attribute conversions the repository's config names. Both in-process
        // for a commit named in full, as `update-ref --no-deref` and `read-tree` write them
        // (see `inproc`).
        if inproc::is_full_hex(commit) {
            self.detach_worktree_head(path, commit)?;
            if self.read_tree_in_worktree(path, commit).is_err() {
                // Command-line git here because git reads index files libgit2 refuses (a
                // split index, an extension it does not know): git's own answer, or error.
                self.run_in(path, &["read-tree", commit])?;
            }
        } else {
            // Command-line git here because a name that is not a full object name is read
            // by git's own rules.
            self.run_in(
                path,
                &["update-ref", "-m", "hone", "--no-deref", "HEAD", commit],
            )?;
            self.run_in(path, &["read-tree", commit])?;
        }
        self.materialize(path, commit)?;
        Ok(true)
    }

    /// Is `wt/.git` still the link `git worktree add` wrote (a file naming an administrative
    /// directory of this repository whose `gitdir` names `wt/.git` back)? A candidate that
    /// replaced it could make git run its configuration, read another object store, or
    /// (naming another worktree's administrative directory) have hone's reset move that
    /// worktree's HEAD and overwrite its index.
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
        // A relative link (`worktree.useRelativePaths`) is relative to the worktree.
        let admin = canon(&wt.join(target));
        admin.parent() == Some(canon(&common.join("worktrees")).as_path())
            && admin.file_name().is_some()
            && admin.join("gitdir").exists()
            && Self::links_back(&admin, &link)
    }

    /// Does the administrative directory `admin`'s `gitdir` file (the back-link git writes)
    /// name `link`, the worktree's `.git`? Both canonicalized; a missing one never matches.
    fn links_back(admin: &Path, link: &Path) -> bool {
        let Ok(text) = std::fs::read_to_string(admin.join("gitdir")) else {
            return false;
        };
        let back = text.trim_end_matches(['\n', '\r']);
        if back.is_empty() {
            return false;
        }
        // A relative back-link (`worktree.useRelativePaths`) is relative to `admin`.
        match (
            std::fs::canonicalize(admin.join(back)),
            std::fs::canonicalize(link),
        ) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
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
        // Command-line git here because merges (and their conflict rules) are git's own.
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
            // Command-line git here, as for `worktree add`.
            if self.run(&["worktree", "remove", "--force", &p]).is_err() {
                remove_any(path)?;
            }
        }
        self.run(&["worktree", "prune"]).map(|_| ())
    }

    /// Removes the files git ignores from a worktree, so the verifier sees exactly the
    /// committed candidate (a planted `__pycache__/*.pyc` cannot stand in for a source file).
    pub fn remove_ignored(&self, path: &Path) -> Result<(), GitError> {
        // Command-line git here because `clean -X` follows every .gitignore rule.
        self.run_in(path, &["clean", "-ffdXq"]).map(|_| ())
    }

    /// What `commit` changed relative to `parent`: status and line counts per file, as
    /// `git diff-tree -r --no-renames --raw --numstat` reports them (0 lines for a binary file).
    pub fn changes(&self, parent: &str, commit: &str) -> Result<Vec<Change>, GitError> {
        Ok(self
            .count_changes(parent, commit)?
            .into_iter()
            .map(|c| c.change)
            .collect())
    }

    /// The tree of a commit.
    pub fn tree_of(&self, commit: &str) -> Result<String, GitError> {
        let repo = self.repo()?;
        self.rev_parse(&repo, &format!("{commit}^{{tree}}"))
            .ok_or_else(|| GitError::Failed {
                args: format!("rev-parse {commit}^{{tree}}"),
                stderr: format!("{commit} names no commit or tree in this repository"),
            })
    }

    /// The unified diff from `parent` to `commit`.
    pub fn diff(&self, parent: &str, commit: &str) -> Result<String, GitError> {
        // Command-line git here because the text shown to people and reviewers is git's own
        // (not on the loop's path: `hone show`, the dashboard, the reviewer).
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
        // Command-line git here: once per run.
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
        let repo = self.repo()?;
        Ok(self
            .tree_entries(&repo, commit)?
            .into_iter()
            .map(|(path, _, _)| path)
            .collect())
    }
}

#[cfg(test)]
mod inproc_tests;
#[cfg(test)]
mod ref_files_tests;
#[cfg(test)]
mod tests;
