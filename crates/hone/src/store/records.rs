//! What the store holds, as the rest of hone sees it: a run ([`RunRecord`]) and where it
//! stands ([`RunState`]), an experiment ([`ExperimentRecord`]) and its [`Status`], and a
//! mechanism's hook calls ([`MechanismCall`], [`Hook`], [`Effect`]). Each enum is stored as its
//! text; reading text back is [`super::sql`]'s business.

use crate::spec::AgentKind;
use crate::verify::Direction;
use std::collections::BTreeMap;

/// The status of an experiment, plus `running` while it is in progress: `baseline` (experiment
/// 0, the unmodified project), `keep` (beat the best by more than the threshold), `discard`
/// (measured, not better), the failures `crash`, `timeout` and `violation`, `rejected` (refused
/// before any compute), `invalid` (nothing to measure), `aborted` (interrupted mid-way) and
/// `pruned` (stopped early by `[verify] prune`: its curve was clearly worse than the others').
/// README.md's "Experiment statuses" says what each one covers.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Running,
    Baseline,
    Keep,
    Discard,
    Crash,
    Timeout,
    Violation,
    Rejected,
    Invalid,
    Aborted,
    Pruned,
}

impl Status {
    pub const ALL: &'static [Status] = &[
        Status::Baseline,
        Status::Keep,
        Status::Discard,
        Status::Crash,
        Status::Timeout,
        Status::Violation,
        Status::Rejected,
        Status::Invalid,
        Status::Aborted,
        Status::Pruned,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Baseline => "baseline",
            Status::Keep => "keep",
            Status::Discard => "discard",
            Status::Crash => "crash",
            Status::Timeout => "timeout",
            Status::Violation => "violation",
            Status::Rejected => "rejected",
            Status::Invalid => "invalid",
            Status::Aborted => "aborted",
            Status::Pruned => "pruned",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL
            .iter()
            .chain(std::iter::once(&Status::Running))
            .copied()
            .find(|st| st.as_str() == s)
    }

    /// The experiment ran the verifier (and so used up budget): the baseline, a keep, a
    /// discard, a crash, a timeout or a pruned run.
    pub fn ran_verifier(self) -> bool {
        matches!(
            self,
            Status::Baseline
                | Status::Keep
                | Status::Discard
                | Status::Crash
                | Status::Timeout
                | Status::Pruned
        )
    }

    /// Counts toward `max_consecutive_failures`.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Status::Crash
                | Status::Timeout
                | Status::Invalid
                | Status::Violation
                | Status::Rejected
        )
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a run stands. Stored as its name (`running`, `interrupted`, `stopped`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    /// A session is working on it, or one died without a clean stop (resumable).
    Running,
    /// A session stopped and it can be resumed as it is (Ctrl-C, a failed baseline).
    Interrupted,
    /// A stop condition held: it is finished.
    Stopped,
}

impl RunState {
    pub const ALL: [RunState; 3] = [RunState::Running, RunState::Interrupted, RunState::Stopped];

    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Interrupted => "interrupted",
            RunState::Stopped => "stopped",
        }
    }

    pub fn parse(s: &str) -> Option<RunState> {
        RunState::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Where a run in this state stands, in words for the one who reads it in the morning,
    /// and what to do next (if anything): `stop_reason` is the run's, `live` whether a
    /// session holds it now. A resumable stop that was no one's choice (a refused key, a
    /// changed input, failures in a row) is not "interrupted": resuming alone would fail the
    /// same way.
    pub fn words(
        self,
        stop_reason: Option<&str>,
        live: bool,
    ) -> (&'static str, Option<&'static str>) {
        match self {
            RunState::Running if live => ("running", None),
            RunState::Running => (
                "interrupted without a clean stop",
                Some("resume with `hone run`"),
            ),
            RunState::Interrupted
                if stop_reason.is_some_and(|r| r.contains("failed experiments in a row")) =>
            {
                (
                    "stopped on failures",
                    Some("fix their cause, then resume with `hone run`"),
                )
            }
            // Every stop that is not an error says it was the user's (the engine's `Stop`).
            RunState::Interrupted if stop_reason.is_some_and(|r| !r.starts_with("interrupted")) => {
                (
                    "stopped on an error",
                    Some("fix it, then resume with `hone run`"),
                )
            }
            RunState::Interrupted => ("interrupted", Some("resume with `hone run`")),
            RunState::Stopped => ("stopped", None),
        }
    }
}

impl std::fmt::Display for RunState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One run: one loop over one spec on branch `hone/<tag>`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RunRecord {
    pub id: i64,
    pub tag: String,
    pub branch: String,
    pub base_commit: String,
    pub created_at: f64,
    pub seed: u64,
    /// The `[agent] kind` it was started with, as written (typed when written; kept as text
    /// when read, since a newer hone may know agent presets this one does not, without any
    /// change of schema). [`RunRecord::agent_kind`] reads it.
    pub agent: String,
    pub metric: String,
    pub direction: Direction,
    pub state: RunState,
    pub stop_reason: Option<String>,
    /// Loop time summed over every session of this run.
    pub active_seconds: f64,
    /// Hashes of protected and pinned files at the start, as JSON.
    pub seals: String,
    pub spec_json: String,
}

/// One experiment.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ExperimentRecord {
    pub n: u64,
    pub parent_commit: String,
    pub candidate_commit: Option<String>,
    pub status: Option<Status>,
    pub objective: Option<f64>,
    pub metrics: BTreeMap<String, f64>,
    pub config: Option<serde_json::Value>,
    pub description: String,
    /// Why it got its status (crash reason, violating path, decision arithmetic...).
    pub reason: String,
    pub files_changed: u64,
    pub lines_added: u64,
    pub lines_deleted: u64,
    pub propose_ms: u64,
    pub gate_ms: u64,
    pub verify_ms: u64,
    pub total_ms: u64,
    pub started_at: f64,
    pub finished_at: Option<f64>,
    pub log_path: Option<String>,
    pub pid: Option<u32>,
    pub pid_start: Option<u64>,
    pub cost_usd: f64,
    /// Every measurement of the objective for this code (first run, confirms, re-tests).
    pub runs: Vec<f64>,
    /// How the keep/discard decision was reached.
    /// Boxed: most records held in memory have none (a slimmed one, a crash), and the box
    /// keeps every record ~100 bytes smaller (`engine::history`).
    pub judgement: Option<Box<crate::verify::noise::Judgement>>,
    /// The candidate's git tree (identical trees are identical candidates).
    pub tree: Option<String>,
    /// The sealed holdout's value (baseline and keeps only); never shown to agents.
    pub holdout: Option<f64>,
    /// Tokens the proposer spent (input and output).
    pub tokens: u64,
}

/// One invocation of a mechanism's hook and what it did (see `crate::meta`).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct MechanismCall {
    /// The experiment it was called for.
    pub experiment: u64,
    pub mechanism: String,
    /// Where in the experiment it was called.
    pub hook: Hook,
    /// What the call did.
    pub effect: Effect,
    pub detail: String,
}

/// The current best: the keep decided last, else the newest baseline (a newer baseline than
/// every keep wins). Keeps are decided in the order of their numbers but in a parallel run,
/// where a candidate made on an older best can be kept on top of a newer one
/// (`engine::parallel`): the latest `finished_at` decides, the number breaks a tie.
pub fn best_experiment(exps: &[ExperimentRecord]) -> Option<&ExperimentRecord> {
    let keep = exps
        .iter()
        .filter(|e| e.status() == Status::Keep)
        .max_by(|a, b| decision_order(a, b));
    let baseline = exps.iter().rev().find(|e| e.status() == Status::Baseline);
    match (keep, baseline) {
        (Some(k), Some(b)) if b.n > k.n => Some(b),
        (k, b) => k.or(b),
    }
}

/// The order in which experiments were decided: by `finished_at` (none yet: first), then by
/// number. The keeps in this order are the run branch's commits in order (a parallel run keeps
/// a candidate made on an older best after newer numbers).
pub fn decision_order(a: &ExperimentRecord, b: &ExperimentRecord) -> std::cmp::Ordering {
    let decided = |e: &ExperimentRecord| e.finished_at.unwrap_or(f64::NEG_INFINITY);
    decided(a).total_cmp(&decided(b)).then(a.n.cmp(&b.n))
}

/// Where in an experiment a mechanism's hook was called. Stored as its text
/// ([`Hook::as_str`]); a text this version does not know is kept as [`Hook::Other`].
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Hook {
    #[default]
    OnStart,
    BeforePropose,
    Candidates,
    Filter,
    /// A question to the run's LLM and its answer (the strategy's revision).
    Ask,
    OnResult,
    OnSegmentEnd,
    /// Level 2: a research round, a validation step, activation and probation.
    Research,
    /// A hook recorded by another version of hone.
    Other(String),
}

impl Hook {
    /// The hooks this version records, in the order an experiment calls them.
    pub const ALL: &'static [Hook] = &[
        Hook::OnStart,
        Hook::BeforePropose,
        Hook::Candidates,
        Hook::Filter,
        Hook::Ask,
        Hook::OnResult,
        Hook::OnSegmentEnd,
        Hook::Research,
    ];

    /// The stored text.
    pub fn as_str(&self) -> &str {
        match self {
            Hook::OnStart => "on_start",
            Hook::BeforePropose => "before_propose",
            Hook::Candidates => "candidates",
            Hook::Filter => "filter",
            Hook::Ask => "ask",
            Hook::OnResult => "on_result",
            Hook::OnSegmentEnd => "on_segment_end",
            Hook::Research => "research",
            Hook::Other(s) => s,
        }
    }

    /// The hook a stored text names; never fails (an unknown text is kept as `Other`).
    pub fn parse(s: &str) -> Hook {
        parse_stored(Hook::ALL, Hook::as_str, s, Hook::Other)
    }
}

/// What a hook invocation did. Stored as its text ([`Effect::as_str`]); a text this version
/// does not know is kept as [`Effect::Other`].
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Effect {
    /// Called; changed nothing.
    #[default]
    None,
    /// Gave guidance for the proposal.
    Guided,
    /// Suggested knob configurations.
    Suggested,
    Rejected,
    Modified,
    /// A modification that could not apply (the proposal has no knob configuration).
    Ignored,
    /// Changed the mechanism's own state in a way that changes the search (a restart, a mode
    /// switch, a new strategy).
    Changed,
    /// The portfolio turned a mechanism on or off.
    Activated,
    Deactivated,
    /// A step of a script's validation ladder (or its probation) passed.
    Passed,
    /// A step of a script's validation ladder failed: the script is dropped.
    Failed,
    /// An effect recorded by another version of hone.
    Other(String),
}

impl Effect {
    /// The effects this version records.
    pub const ALL: &'static [Effect] = &[
        Effect::None,
        Effect::Guided,
        Effect::Suggested,
        Effect::Rejected,
        Effect::Modified,
        Effect::Ignored,
        Effect::Changed,
        Effect::Activated,
        Effect::Deactivated,
        Effect::Passed,
        Effect::Failed,
    ];

    /// The stored text.
    pub fn as_str(&self) -> &str {
        match self {
            Effect::None => "none",
            Effect::Guided => "guided",
            Effect::Suggested => "suggested",
            Effect::Rejected => "rejected",
            Effect::Modified => "modified",
            Effect::Ignored => "ignored",
            Effect::Changed => "changed",
            Effect::Activated => "activated",
            Effect::Deactivated => "deactivated",
            Effect::Passed => "passed",
            Effect::Failed => "failed",
            Effect::Other(s) => s,
        }
    }

    /// The effect a stored text names; never fails (an unknown text is kept as `Other`).
    pub fn parse(s: &str) -> Effect {
        parse_stored(Effect::ALL, Effect::as_str, s, Effect::Other)
    }
}

/// The value among `known` whose stored text (`text`) is `s`; else `other(s)`, so that a text
/// another version of hone wrote is kept as it is.
fn parse_stored<T: Clone>(known: &[T], text: fn(&T) -> &str, s: &str, other: fn(String) -> T) -> T {
    known
        .iter()
        .find(|k| text(k) == s)
        .cloned()
        .unwrap_or_else(|| other(s.to_string()))
}

impl std::fmt::Display for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for Effect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Serialized as the stored text, so JSON output reads as it did when these were strings.
impl serde::Serialize for Hook {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl serde::Serialize for Effect {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl RunRecord {
    /// The agent kind it was started with, if this hone knows it.
    pub fn agent_kind(&self) -> Option<AgentKind> {
        AgentKind::parse(&self.agent)
    }
}

impl ExperimentRecord {
    pub fn status(&self) -> Status {
        self.status.unwrap_or(Status::Running)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_statuses_that_ran_the_verifier() {
        let ran: Vec<&str> = Status::ALL
            .iter()
            .filter(|s| s.ran_verifier())
            .map(|s| s.as_str())
            .collect();
        assert_eq!(
            ran,
            ["baseline", "keep", "discard", "crash", "timeout", "pruned"]
        );
        assert!(!Status::Running.ran_verifier());
    }
}
