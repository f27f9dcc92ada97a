//! The engine's public types: what a caller passes in (the options, the Ctrl-C count) and
//! what it hears back (the events, the budget they carry).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::store::ExperimentRecord;
use crate::verify::Direction;

/// Ctrl-C as the engine sees it: once = finish the current experiment and stop; twice = kill
/// the running process group now and record the experiment `aborted`.
#[derive(Debug, Default)]
pub struct Interrupt(AtomicUsize);

impl Interrupt {
    pub const fn new() -> Interrupt {
        Interrupt(AtomicUsize::new(0))
    }
    /// Records one more request; returns how many there have been.
    pub fn request(&self) -> usize {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }
    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
    pub fn stop_requested(&self) -> bool {
        self.count() >= 1
    }
    pub fn kill_requested(&self) -> bool {
        self.count() >= 2
    }
}

/// What the caller may override from the command line.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    pub tag: Option<String>,
    /// The run's experiments in all, the baseline included (`-n`); kept across resumes.
    pub max_experiments: Option<u64>,
    /// This many experiments more than the run has now (`--more`); kept across resumes.
    pub more: Option<u64>,
    pub max_time: Option<Duration>,
    pub seed: Option<u64>,
    /// Start a new run even if an unfinished one could be resumed.
    pub new_run: bool,
    /// The proposer's kind was chosen on the command line (`--agent`), over hone.toml's: a
    /// resumed run started with another kind switches to it (else that is an error).
    pub agent_chosen: bool,
}

/// A run's limits as it (re)starts, for progress and ETA displays.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Budget {
    /// Experiments in all, the baseline included.
    pub max_experiments: u64,
    /// Active time the run may use, in seconds.
    pub max_time_s: Option<f64>,
    /// Active time used before this session, in seconds.
    pub used_s: f64,
    /// One verifier run's timeout, in seconds.
    pub timeout_s: f64,
    /// `[stop] max_cost_usd` and `max_tokens`, and what the run spent before this session.
    pub max_cost_usd: Option<f64>,
    pub max_tokens: Option<u64>,
    pub cost_before: f64,
    pub tokens_before: u64,
}

/// What the engine reports while it works. The terminal output, logs and anything else
/// subscribe to these; none of them reaches into the engine.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    RunStarted {
        tag: String,
        branch: String,
        base_commit: String,
        resumed: bool,
        /// The experiments finished so far that count towards `max_experiments` (aborted
        /// ones do not).
        finished_experiments: u64,
        metric: String,
        direction: Direction,
        /// What the run may spend, and what it spent before this session.
        budget: Budget,
    },
    Warning {
        message: String,
    },
    Note {
        message: String,
    },
    ExperimentStarted {
        n: u64,
    },
    Proposed {
        n: u64,
        description: String,
    },
    Verifying {
        n: u64,
        /// The verifier's log, written as it runs (a live view can show its last line).
        log: String,
    },
    ExperimentFinished {
        record: Box<ExperimentRecord>,
        best: Option<f64>,
        baseline: Option<f64>,
    },
    RunStopped {
        reason: String,
        resumable: bool,
    },
    /// The outer loop changed how the search goes (a restart, a new strategy, a mechanism
    /// turned on or off).
    Outer {
        n: u64,
        message: String,
    },
}

impl Event {
    pub(super) fn kind(&self) -> &'static str {
        match self {
            Event::RunStarted { .. } => "run_started",
            Event::Warning { .. } => "warning",
            Event::Note { .. } => "note",
            Event::ExperimentStarted { .. } => "experiment_started",
            Event::Proposed { .. } => "proposed",
            Event::Verifying { .. } => "verifying",
            Event::ExperimentFinished { .. } => "experiment_finished",
            Event::RunStopped { .. } => "run_stopped",
            Event::Outer { .. } => "outer",
        }
    }
}
