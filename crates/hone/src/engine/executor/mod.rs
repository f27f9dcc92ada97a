//! Where a verification command runs: a process group on this machine ([`local`]), a SLURM
//! batch job ([`slurm`]) or a remote `hone worker` through the shared store's queue
//! ([`workers`]). The backend is chosen once, from `[exec] backend`, when the run opens; the
//! rest of the engine only sees [`Executor`].
//!
//! A new backend is one file here and one line in the list of backends,
//! `crate::exec::backends` (`Name = module "name" "what it is",`): the file holds `pub(super)
//! struct Name` with `pub(super) fn new(spec: &Spec) -> Name` and an [`Executor`] impl; the
//! list declares the module here, its arm in [`choose`] and its `[exec] backend` name in the
//! spec (`spec::Backend`), which checks hone.toml against it.
//!
//! An executor's lifecycle: [`Executor::preflight`] before the run is opened (tools on PATH,
//! shared directories), [`Executor::start`] once the run is known (connections, job
//! directories), [`Executor::run`] per command, [`Executor::recover`] on resume for what a
//! crashed hone left running, and [`Executor::for_slot`] for each parallel verification thread.

use crate::exec::{ExecRequest, Exit};
use crate::spec::{Backend, Spec};
use crate::store::Status;
use crate::workspace::Git;

use super::verifier::Sink;
use super::EngineError;

/// Declares the backends' modules and [`choose`] from the list of backends.
macro_rules! executors {
    ($($variant:ident = $module:ident $name:literal $doc:literal,)*) => {
        $(pub(super) mod $module;)*

        /// The executor `[exec] backend` names.
        pub(super) fn choose(spec: &Spec) -> Box<dyn Executor> {
            match spec.exec.backend {
                $(Backend::$variant => Box::new($module::$variant::new(spec)),)*
            }
        }
    };
}
crate::with_backends!(executors);

/// A verification that ended for a reason outside its command's exit (a job cancelled by
/// someone else, a protected file modified on a remote worker): the status and the reason.
#[derive(Debug)]
pub(super) struct Failure {
    pub status: Status,
    pub reason: String,
}

/// One command to run for experiment `n`.
pub(super) struct Job<'j> {
    pub n: u64,
    pub req: &'j ExecRequest,
    /// What it is, for messages ("verifier", "holdout command").
    pub what: &'j str,
    /// The commit whose code runs (remote workers fetch it; candidates are committed without
    /// moving the worktree's HEAD). `None`: the commit checked out in `req.cwd` (its HEAD).
    pub commit: Option<&'j str>,
    /// Whether a variable of `req.env` goes to a job that starts from its own environment (a
    /// SLURM job, a remote worker): only what hone itself sets does.
    pub travels: &'j dyn Fn(&str) -> bool,
    /// hone's own decision to stop the command early (a pruned run): unlike a cancel, it gets
    /// `SIGTERM` and the kill grace first where the backend allows.
    pub stop: &'j dyn Fn() -> bool,
    /// The containment `[sandbox]` asks for, for a backend that contains the command where
    /// it runs (a remote worker); the local and SLURM backends run `req.wrapper`.
    pub sandbox: crate::queue::JobSandbox,
}

/// Where a running command's records and output lines go, and whether to stop it.
pub(super) struct Io<'a, 's> {
    pub sink: &'a mut Sink<'s>,
    pub on_line: &'a mut dyn FnMut(&str),
    pub cancel: &'a dyn Fn() -> bool,
}

/// What [`Executor::run`] returns: the command's exit and, for a job that ended for a reason
/// outside the command, that reason.
pub(super) type Ran = Result<(Exit, Option<Failure>), EngineError>;

/// What the executor needs to know of the run it serves.
pub(super) struct RunPlace<'p> {
    pub spec: &'p Spec,
    pub git: &'p Git,
    pub tag: &'p str,
    /// The run's name in a shared store (`<repo key>#<tag>`).
    pub key: String,
}

/// Runs verification commands somewhere.
pub(super) trait Executor: Send {
    /// Checks before the run is opened.
    fn preflight(&self) -> Result<(), EngineError> {
        Ok(())
    }
    /// Gets ready to run the commands of run `place`.
    fn start(&mut self, _place: &RunPlace<'_>) -> Result<(), EngineError> {
        Ok(())
    }
    /// Runs `job`: its exit and, for a job that ended for a reason outside the command
    /// (cancelled by someone else, node failure...), that reason.
    fn run(&mut self, job: &Job<'_>, io: Io<'_, '_>) -> Ran;
    /// On resume, stops what was started for experiment `n` of run `key` before hone died;
    /// true if something was.
    fn recover(&mut self, _key: &str, _n: u64) -> bool {
        false
    }
    /// The same executor for a parallel verification thread (which makes its own
    /// connections, in that thread).
    fn for_slot(&self) -> Box<dyn Executor>;
    /// Whether a job's output lines reach `on_line` as the command prints them (a local
    /// process): when they do, points that all came at a run's end were printed so.
    fn streams(&self) -> bool {
        false
    }
}
