//! Why `hone run` stops with an error, as types: [`EngineError`] names each failure and keeps
//! its data (paths, tags, names, the library error underneath), grouped by what the user must
//! do about it: the spec and the repository disagree ([`Mismatch`]), hone.toml cannot be used
//! as written ([`Config`]), a tool is missing ([`Tool`]), the shared store, queue or directory
//! cannot be reached ([`Shared`]), a file cannot be written ([`Fs`]), a command hone runs could
//! not be started or followed ([`Stage`]), or the engine broke one of its own rules
//! ([`Internal`]).
//!
//! The words are the contract: each variant's message is the text users (and tests) read.
//! A wrapped library error is kept as data, not as `source()`: the CLI prints an error with
//! its causes (`outer: inner`), and every message here already says its cause once.

use std::path::PathBuf;

use crate::exec::ExecError;
use crate::queue::QueueError;
use crate::report::Summary;
use crate::spec::{Direction, SpecError};
use crate::store::StoreError;
use crate::verify::metrics::MetricError;
use crate::workspace::GitError;

/// A failure that stops `hone run` (as opposed to a failed experiment, which is recorded).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("another `hone run` is already running in this repository ({}lock {}); wait for it or stop it first", .holder.map(|p| format!("process {p}, ")).unwrap_or_default(), .path.display())]
    Locked { path: PathBuf, holder: Option<u32> },
    #[error(transparent)]
    Mismatch(#[from] Mismatch),
    #[error(transparent)]
    Config(#[from] Config),
    #[error(transparent)]
    Tool(#[from] Tool),
    #[error(transparent)]
    Shared(#[from] Shared),
    #[error(transparent)]
    Fs(#[from] Fs),
    #[error(transparent)]
    Stage(#[from] Stage),
    #[error(transparent)]
    Internal(#[from] Internal),
    /// The run stopped on a condition that needs the user: recorded, then reported as an error.
    #[error("{reason}")]
    Stopped {
        reason: String,
        summary: Box<Summary>,
    },
}

impl EngineError {
    /// Whether this failed for lack of room on the disk (or in the user's quota).
    pub fn out_of_room(&self) -> bool {
        let exec = match self {
            EngineError::Stage(
                Stage::Start { error, .. }
                | Stage::Wait { error, .. }
                | Stage::Submit { error, .. }
                | Stage::Lost { error, .. },
            ) => error.io(),
            _ => None,
        };
        let store_full = matches!(
            self,
            EngineError::Store(crate::store::StoreError::Sqlite(
                rusqlite::Error::SqliteFailure(f, _)
            )) if f.code == rusqlite::ErrorCode::DiskFull
        );
        store_full
            || exec.is_some_and(|e| crate::workspace::out_of_room(e))
            || crate::workspace::out_of_room(self)
    }

    /// Whether the user's configuration is at fault (hone.toml, the repository, the machine's
    /// tools) rather than something that failed while running. The CLI does not pick an exit
    /// status by it: every error of `hone run` exits 1, as it always has.
    pub fn is_configuration(&self) -> bool {
        matches!(
            self,
            EngineError::Mismatch(_) | EngineError::Config(_) | EngineError::Tool(_)
        )
    }
}

/// hone.toml, the repository and the recorded run disagree: change one of them.
#[derive(Debug, thiserror::Error)]
pub enum Mismatch {
    #[error("editable = [{}] matches no file committed at HEAD; fix the globs in hone.toml, or commit the files first", quoted(.globs))]
    EditableMatchesNothing { globs: Vec<String> },
    #[error("`{path}` (at HEAD) has a name that is not valid UTF-8; hone keeps file names as text: rename it (git mv) and commit, then run again")]
    NonUtf8Path { path: String },
    #[error("run `{tag}` stopped on its budget ({reason}): to go on with it, raise [stop] max_cost_usd or max_tokens in hone.toml, then `hone run --tag {tag} --more N`; `hone run --new` starts a new run from HEAD, with a budget of its own")]
    BudgetSpent { tag: String, reason: String },
    #[error("branch hone/{tag} already exists but no run of that tag is recorded; choose another --tag or delete the branch")]
    BranchExists { tag: String },
    #[error("refs/hone/{tag}/ already holds experiments of an earlier run that hone has no record of; choose another --tag (or delete them with `git for-each-ref --format='delete %(refname)' refs/hone/{tag}/ | git update-ref --stdin`)")]
    RefsExist { tag: String },
    #[error("run `{tag}` measures `{recorded}` but hone.toml now says metric = \"{configured}\"; start a new run with `hone run --new`")]
    MetricChanged {
        tag: String,
        recorded: String,
        configured: String,
    },
    #[error("run `{tag}` was started with direction = \"{recorded}\" but hone.toml now says \"{}\"; start a new run with `hone run --new`", .configured.as_str())]
    DirectionChanged {
        tag: String,
        recorded: Direction,
        configured: Direction,
    },
    #[error("run `{tag}` measured its experiments with [verify] {key} = {recorded} but hone.toml now says {configured}: a value measured another way does not compare with theirs; put it back to resume, or start a new run with `hone run --new`")]
    VerifierChanged {
        tag: String,
        key: String,
        recorded: String,
        configured: String,
    },
    #[error("run `{tag}` was started with agent `{recorded}` but hone.toml now says kind = \"{configured}\": resume it as it was with `hone run --agent {recorded}`, go on with the new one with `hone run --agent {configured}`, or start a new run with `hone run --new`")]
    AgentChanged {
        tag: String,
        recorded: String,
        configured: String,
    },
    #[error("run `{tag}` in the shared store was started from another clone: branch hone/{tag} is not in this repository; fetch it (git fetch <remote> 'refs/heads/hone/{tag}:refs/heads/hone/{tag}' 'refs/hone/{tag}/*:refs/hone/{tag}/*'), or start a new run here with `hone run --new`")]
    OtherClone { tag: String },
    #[error("branch hone/{tag} was deleted; every experiment is still under refs/hone/{tag}/, recreate the branch with `git branch hone/{tag} {expected}` to resume")]
    BranchDeleted { tag: String, expected: String },
    /// The run's branch, named as the caller knows it (`refs/heads/hone/<tag>` or
    /// `hone/<tag>`), is gone.
    #[error("branch {branch} is missing")]
    BranchMissing { branch: String },
}

/// hone.toml (or a value from the command line) cannot be used as written.
#[derive(Debug, thiserror::Error)]
pub enum Config {
    /// Not a valid run tag; the words say why.
    #[error("{0}")]
    Tag(String),
    /// hone.toml, read only to find where the records are, does not load.
    #[error("{0} (hone.toml says where the records are)")]
    StoreSpec(SpecError),
    /// A metric (or its `metric_regex`) the verifier's output cannot be read with.
    #[error("{0}")]
    Metric(MetricError),
    /// `-n` asks for no more experiments than the run already has.
    #[error("run `{tag}` already has {done} experiments and -n {n} is the total (the baseline counts); `hone run --tag {tag} --more N` runs N more")]
    BudgetReached { tag: String, done: u64, n: u64 },
    /// `[sandbox] kind = "bwrap"` with `required = true`, and the sandbox cannot run here.
    #[error("[sandbox] kind = \"bwrap\": {0}. Fix that, or set [sandbox] required = false to run without containment")]
    Sandbox(String),
    /// An HTTP LLM on a server outside this machine and its network, with its API key's
    /// variable unset: every request would be refused.
    #[error("${var} is not set: {url} would refuse every request. Export it, or set base_url to your own server (a server that wants no key: set ${var} to any value)")]
    ApiKey { var: String, url: String },
    /// The server refused the key before the run started (its list of models answered 401):
    /// every call would be refused.
    #[error("{url} refused the key in ${var} (HTTP {status}) when asked for its models: every call would be refused. Check the key, or `api_key_env` and `base_url` in hone.toml")]
    KeyRefused {
        var: String,
        url: String,
        status: u16,
    },
    /// Nothing answers at the model server's address before the run starts (connection
    /// refused, or no such host): every call would fail.
    #[error("nothing answers at {url} ({why}) when asked for its models: start the server, or check `base_url` in hone.toml{section}; then run again")]
    ServerUnreachable {
        url: String,
        why: String,
        section: String,
    },
    /// hone.toml, checked against the repository, is wrong at a line (a `hide` path that is
    /// tracked, so in every worktree): the CLI reports it as a spec error.
    #[error("{0}")]
    Spec(SpecError),
}

/// A program hone needs is not installed on this machine.
#[derive(Debug, thiserror::Error)]
pub enum Tool {
    #[error("[exec] backend = \"slurm\" but `sbatch` is not on PATH: install the SLURM client tools (Debian: apt-get install slurm-client) on this machine")]
    Sbatch,
    /// The agent preset's CLI, and how to install it.
    #[error("`{program}` is not on PATH: install it with {install}, or set [agent] command")]
    Agent { program: String, install: String },
}

/// What several machines share (the store's coordination, the job queue, the workers'
/// remote, the SLURM shared directory) cannot be reached or used.
#[derive(Debug, thiserror::Error)]
pub enum Shared {
    /// Another process coordinates the run, or the coordination table cannot be reached.
    #[error("{0}")]
    Coordination(QueueError),
    /// The job queue cannot be reached.
    #[error("{0}")]
    Queue(QueueError),
    /// A queue operation for `what` (the verifier, the holdout command...) failed.
    #[error("{what}: {error}")]
    QueueJob { what: String, error: QueueError },
    #[error("cannot push the candidate to [exec] remote `{remote}` for the workers: {error}")]
    Push { remote: String, error: GitError },
    #[error("[exec] shared_dir {}: {error}; it must be a writable directory the compute nodes also see", .path.display())]
    SharedDir {
        path: PathBuf,
        error: std::io::Error,
    },
}

/// A file or directory of hone's own cannot be opened, created or written.
#[derive(Debug, thiserror::Error)]
pub enum Fs {
    #[error("cannot open {}: {error}", .path.display())]
    Open {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("cannot create {}: {error}", .path.display())]
    Create {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("cannot write {}: {error}", .path.display())]
    Write {
        path: PathBuf,
        error: std::io::Error,
    },
    /// A folder where candidates' code runs (a SLURM run's on the shared file system) that
    /// another user owns or others may enter: whoever owns it could swap what runs there.
    #[error("{} belongs to another user, or others may enter it: candidates' code runs there; remove it (or make it yours, mode 0700) and run again", .path.display())]
    NotPrivate { path: PathBuf },
    /// The reviewer's prompt file (its path is kept; the message never named it).
    #[error("cannot write the review prompt: {error}")]
    ReviewPrompt {
        path: PathBuf,
        error: std::io::Error,
    },
}

/// A command hone runs (`what`: the verifier, the holdout command, the reviewer...) could not
/// be started or followed to its end. Its own failure (an exit status) is an experiment's
/// outcome, not one of these.
#[derive(Debug, thiserror::Error)]
pub enum Stage {
    #[error("cannot start the {what}: {error}")]
    Start { what: String, error: ExecError },
    #[error("{what} failed: {error}")]
    Wait { what: String, error: ExecError },
    #[error("cannot submit the {what} job: {error}")]
    Submit { what: String, error: ExecError },
    #[error("lost the {what} job: {error}")]
    Lost { what: String, error: ExecError },
}

/// The engine broke one of its own rules: a bug in hone, not something the user can fix.
#[derive(Debug, thiserror::Error)]
pub enum Internal {
    /// The workers' executor ran before it was started.
    #[error("no queue")]
    NoQueue,
    #[error("no best to merge onto")]
    NoBest,
    #[error("a verification thread vanished")]
    ThreadVanished,
    #[error("the run vanished from the store")]
    RunVanished,
}

/// `"a", "b"`: globs as hone.toml writes them.
fn quoted(globs: &[String]) -> String {
    globs
        .iter()
        .map(|e| format!("\"{e}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io() -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied")
    }

    /// The messages are exactly the words `hone run` printed when they were strings.
    #[test]
    fn messages_keep_their_words() {
        let cases: Vec<(EngineError, &str)> = vec![
            (
                Mismatch::EditableMatchesNothing {
                    globs: vec!["src/*.rs".into(), "lib/**".into()],
                }
                .into(),
                "editable = [\"src/*.rs\", \"lib/**\"] matches no file committed at HEAD; fix the globs in hone.toml, or commit the files first",
            ),
            (
                Mismatch::BranchExists { tag: "t1".into() }.into(),
                "branch hone/t1 already exists but no run of that tag is recorded; choose another --tag or delete the branch",
            ),
            (
                Mismatch::RefsExist { tag: "t1".into() }.into(),
                "refs/hone/t1/ already holds experiments of an earlier run that hone has no record of; choose another --tag (or delete them with `git for-each-ref --format='delete %(refname)' refs/hone/t1/ | git update-ref --stdin`)",
            ),
            (
                Mismatch::MetricChanged {
                    tag: "t1".into(),
                    recorded: "loss".into(),
                    configured: "acc".into(),
                }
                .into(),
                "run `t1` measures `loss` but hone.toml now says metric = \"acc\"; start a new run with `hone run --new`",
            ),
            (
                Mismatch::DirectionChanged {
                    tag: "t1".into(),
                    recorded: Direction::Minimize,
                    configured: Direction::Maximize,
                }
                .into(),
                "run `t1` was started with direction = \"minimize\" but hone.toml now says \"maximize\"; start a new run with `hone run --new`",
            ),
            (
                Mismatch::OtherClone { tag: "t1".into() }.into(),
                "run `t1` in the shared store was started from another clone: branch hone/t1 is not in this repository; fetch it (git fetch <remote> 'refs/heads/hone/t1:refs/heads/hone/t1' 'refs/hone/t1/*:refs/hone/t1/*'), or start a new run here with `hone run --new`",
            ),
            (
                Mismatch::BranchDeleted {
                    tag: "t1".into(),
                    expected: "abc123".into(),
                }
                .into(),
                "branch hone/t1 was deleted; every experiment is still under refs/hone/t1/, recreate the branch with `git branch hone/t1 abc123` to resume",
            ),
            (
                Mismatch::BranchMissing {
                    branch: "refs/heads/hone/t1".into(),
                }
                .into(),
                "branch refs/heads/hone/t1 is missing",
            ),
            (
                Config::Sandbox("bwrap is not installed".into()).into(),
                "[sandbox] kind = \"bwrap\": bwrap is not installed. Fix that, or set [sandbox] required = false to run without containment",
            ),
            (
                Tool::Sbatch.into(),
                "[exec] backend = \"slurm\" but `sbatch` is not on PATH: install the SLURM client tools (Debian: apt-get install slurm-client) on this machine",
            ),
            (
                Tool::Agent {
                    program: "claude".into(),
                    install: "npm i -g x".into(),
                }
                .into(),
                "`claude` is not on PATH: install it with npm i -g x, or set [agent] command",
            ),
            (
                Shared::SharedDir {
                    path: "/shared".into(),
                    error: io(),
                }
                .into(),
                "[exec] shared_dir /shared: denied; it must be a writable directory the compute nodes also see",
            ),
            (
                Fs::Open {
                    path: "/x/lock".into(),
                    error: io(),
                }
                .into(),
                "cannot open /x/lock: denied",
            ),
            (
                Fs::Create {
                    path: "/x".into(),
                    error: io(),
                }
                .into(),
                "cannot create /x: denied",
            ),
            (
                Fs::Write {
                    path: "/x.log".into(),
                    error: io(),
                }
                .into(),
                "cannot write /x.log: denied",
            ),
            (
                Fs::ReviewPrompt {
                    path: "/p.md".into(),
                    error: io(),
                }
                .into(),
                "cannot write the review prompt: denied",
            ),
            (Internal::NoQueue.into(), "no queue"),
            (Internal::NoBest.into(), "no best to merge onto"),
            (Internal::ThreadVanished.into(), "a verification thread vanished"),
            (Internal::RunVanished.into(), "the run vanished from the store"),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
            // Printed with its causes (as the CLI does), it still says them once.
            assert!(std::error::Error::source(&error).is_none(), "{text}");
        }
    }

    /// A stage's messages name the stage, then say the process error once.
    #[test]
    fn stage_messages_name_the_stage() {
        let exec = || ExecError::MissingCwd("/wt".into());
        let inner = exec().to_string();
        let cases: Vec<(Stage, String)> = vec![
            (
                Stage::Start {
                    what: "verifier".into(),
                    error: exec(),
                },
                format!("cannot start the verifier: {inner}"),
            ),
            (
                Stage::Wait {
                    what: "reviewer".into(),
                    error: exec(),
                },
                format!("reviewer failed: {inner}"),
            ),
            (
                Stage::Submit {
                    what: "verifier".into(),
                    error: exec(),
                },
                format!("cannot submit the verifier job: {inner}"),
            ),
            (
                Stage::Lost {
                    what: "holdout command".into(),
                    error: exec(),
                },
                format!("lost the holdout command job: {inner}"),
            ),
        ];
        for (stage, text) in cases {
            let error = EngineError::from(stage);
            assert_eq!(error.to_string(), text);
            assert!(std::error::Error::source(&error).is_none(), "{text}");
        }
    }

    #[test]
    fn configuration_errors_are_told_apart_from_runtime_ones() {
        assert!(EngineError::from(Tool::Sbatch).is_configuration());
        assert!(EngineError::from(Mismatch::BranchExists { tag: "t".into() }).is_configuration());
        assert!(!EngineError::from(Internal::NoQueue).is_configuration());
        assert!(!EngineError::from(Fs::Create {
            path: "/x".into(),
            error: io(),
        })
        .is_configuration());
    }
}
