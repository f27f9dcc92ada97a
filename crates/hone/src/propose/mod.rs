//! Proposers: what makes a candidate. The engine hands a proposer a worktree checked out at
//! the current best; the proposer edits files there and says what it did. The engine, not the
//! proposer, then diffs, gates, verifies and decides.
//!
//! Built in: [`optimizer::KnobsProposer`] (an optimizer over literal constants, offline),
//! [`command::CommandProposer`] (any shell command, or an agent CLI preset: Claude Code, Codex,
//! aider, Gemini CLI, opencode, given a prompt file) and [`chat::ChatProposer`] (an LLM over
//! HTTP whose answer hone applies: [`blocks`], [`patch`] or knob values).

pub mod blocks;
pub mod chat;
pub mod command;
pub mod guidance;
pub mod knobs;
pub mod optimizer;
pub mod patch;
pub mod prompt;
pub mod spend;
#[cfg(test)]
pub(crate) mod testing;

use std::path::Path;

use crate::spec::Spec;
use crate::store::ExperimentRecord;
use crate::workspace::Git;

pub use spend::{read_journal, Budget, Ledger, Meter, Spend};

/// Everything a proposer may look at for one experiment.
pub struct ProposeContext<'a> {
    /// The experiment number being proposed.
    pub n: u64,
    /// The candidate's worktree, checked out at `parent_commit` (the current best).
    pub worktree: &'a Path,
    pub parent_commit: &'a str,
    /// The commit the run started from.
    pub base_commit: &'a str,
    /// Finished experiments of this run, in order (the baseline first).
    pub history: &'a [ExperimentRecord],
    /// The current best experiment (baseline or last keep), if measured.
    pub best: Option<&'a ExperimentRecord>,
    pub spec: &'a Spec,
    pub git: &'a Git,
    /// The user's checkout (program and skills are read from here, so they can be edited
    /// while a run goes on).
    pub repo_root: &'a Path,
    /// `.hone/runs/<tag>`: where prompts and agent logs go (never inside the worktree).
    pub run_dir: &'a Path,
    pub seed: u64,
    /// True once the user asked to stop immediately (second Ctrl-C).
    pub cancel: &'a dyn Fn() -> bool,
    /// Call with the process group id (and start time) of any process the proposer starts,
    /// right after it starts: hone records it so that a crash can be cleaned up on resume.
    pub on_spawn: &'a dyn Fn(u32, Option<u64>),
    /// A program prefix that confines the proposer's processes (`[sandbox] kind = "bwrap"`);
    /// empty when there is no sandbox.
    pub wrapper: &'a [std::ffi::OsString],
    /// What is left of the run's money and token budgets when this experiment starts.
    pub budget: Budget,
    /// Money and tokens this proposal has spent so far (the proposer adds to it after every
    /// call, so a failed proposal is still paid for), and the run's ledger in a parallel run.
    pub spent: &'a Spend,
    /// What the outer loop's mechanisms ask of this proposal (empty without `[outer]`).
    pub guidance: &'a guidance::Guidance,
    /// This experiment's `HONE_JOB` token, set in the agent's environment so that a later hone
    /// can find (and kill) what a crash left running.
    pub job: &'a str,
    /// When `[stop] max_time` runs out, if it is set: an agent's turn is cut there.
    pub time_up: Option<std::time::Instant>,
    /// Tells the user something while the proposal is made (a wait before the model is asked
    /// again), without waiting for the experiment's record.
    pub note: &'a dyn Fn(&str),
    /// What the proposal tries, said as soon as it is known (a model's hypothesis): the
    /// description of an experiment whose proposal then fails (an edit that did not apply).
    pub describe: &'a dyn Fn(&str),
}

impl ProposeContext<'_> {
    /// The budget meter of this experiment.
    pub fn meter(&self) -> Meter<'_> {
        Meter {
            budget: self.budget,
            spent: self.spent,
        }
    }

    /// Records money and tokens spent by this proposal.
    pub fn add_spend(&self, usd: f64, tokens: u64) {
        self.spent.add(usd, tokens);
    }

    /// Money and tokens this proposal has spent so far.
    pub fn spent(&self) -> (f64, u64) {
        self.spent.get()
    }
}

/// What a proposer did.
#[derive(Clone, Debug, Default)]
pub struct Proposal {
    /// One line saying what changed (`LEARNING_RATE 0.04 -> 0.02`) or the agent's hypothesis.
    pub description: String,
    /// The full knob configuration of the candidate, when the proposer knows it.
    pub config: Option<serde_json::Value>,
    /// Money spent making this proposal.
    pub cost_usd: f64,
    /// The mechanism whose candidate this is, when it is one.
    pub source: Option<String>,
    /// The proposer only changed the contents of files the parent commit tracks, writing them
    /// from hone's own process (no other process ran in the worktree): the snapshot then
    /// lists the parent's files instead of asking git for the worktree's (`Git::
    /// committed_listing`; the knobs optimizer).
    pub in_place: bool,
}

/// Why a proposal did not happen.
#[derive(Debug, thiserror::Error)]
pub enum ProposeError {
    /// This experiment is `invalid` (the reason is recorded); the loop goes on.
    #[error("{0}")]
    Invalid(String),
    /// The search space has nothing new left to try: the run stops.
    #[error("{0}")]
    Exhausted(String),
    /// The proposer cannot work at all (misconfiguration): the run stops with this error.
    #[error("{0}")]
    Fatal(String),
    /// The next call could cross `max_cost_usd` or `max_tokens`: the run stops, nothing sent.
    #[error("{0}")]
    Budget(String),
    /// The user asked to stop now.
    #[error("cancelled")]
    Cancelled,
    /// A mechanism's filter refused it before any compute: the experiment is `rejected`.
    #[error("{0}")]
    Rejected(String),
    /// The model's server stayed unreachable or overloaded through every retry: the
    /// experiment is `aborted` (no failure of a candidate), and the next one waits longer.
    #[error("{0}")]
    Unavailable(String),
    /// `max_time` ran out while the agent worked: it was stopped, the experiment is
    /// `aborted` and the run stops on `max_time`.
    #[error("{0}")]
    TimeUp(String),
}

/// Makes candidates. Implementations must only write inside `ctx.worktree`.
pub trait Proposer {
    /// Short name for logs (`knobs`, `command`).
    fn name(&self) -> &str;

    /// Edits the worktree to make one candidate.
    fn propose(&mut self, ctx: &ProposeContext<'_>) -> Result<Proposal, ProposeError>;

    /// Whether a proposal costs so little that a mechanism's rejection should just ask again
    /// (the built-in optimizer) rather than record the experiment `rejected` (agents, LLMs).
    fn resamples(&self) -> bool {
        false
    }

    /// The configuration of the unmodified project (recorded with the baseline), if any.
    fn describe_baseline(&mut self, _ctx: &ProposeContext<'_>) -> Option<serde_json::Value> {
        None
    }

    /// The number of the last experiment up to which this proposer holds, of its own, every
    /// configuration it was shown (the knobs optimizer's converted history): the engine may
    /// then drop those configurations from its older records (`engine::history`). `None`:
    /// it reads them from the history it is shown every time.
    fn holds_configs_through(&self) -> Option<u64> {
        None
    }

    /// Shown a resumed run's history as it is loaded (page by page, each call the history so
    /// far): a proposer that keeps what it learns of the history across proposals may learn
    /// it here. The next proposal is shown the same history, and must propose what it would
    /// have without this call.
    fn prime(&mut self, _history: &[ExperimentRecord], _minimize: bool) {}
}

/// Builds the proposer a spec asks for.
pub fn from_spec(spec: &Spec) -> Box<dyn Proposer> {
    match spec.agent.kind {
        crate::spec::AgentKind::Knobs => Box::new(optimizer::KnobsProposer::default()),
        crate::spec::AgentKind::Command => Box::new(command::CommandProposer::default()),
        crate::spec::AgentKind::Agent(p) => Box::new(command::CommandProposer::preset(p)),
        kind @ (crate::spec::AgentKind::OpenAi | crate::spec::AgentKind::Anthropic) => {
            match &spec.agent.llm {
                Some(llm) => Box::new(chat::ChatProposer::new(kind, llm.clone())),
                // The spec parser always fills `llm` for HTTP kinds; fall back to a clear failure.
                None => Box::new(command::CommandProposer::default()),
            }
        }
    }
}

/// Files of the parent commit that a candidate may edit, in sorted order.
pub fn editable_files(ctx: &ProposeContext<'_>) -> Result<Vec<String>, ProposeError> {
    let files = ctx
        .git
        .files_at(ctx.parent_commit)
        .map_err(|e| ProposeError::Fatal(e.to_string()))?;
    Ok(files
        .into_iter()
        .filter(|f| crate::workspace::matches_any(&ctx.spec.loop_.editable, f))
        .collect())
}
