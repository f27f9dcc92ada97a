//! The outer loop: search mechanisms with typed hooks, the Level 1.5 search strategy and the
//! offline Level 2 portfolio that turns mechanisms on and off.
//!
//! A [`Mechanism`] changes *how* the inner loop searches. The engine calls its hooks at fixed
//! points of every experiment (all of them optional, all no-ops by default):
//!
//! ```text
//! on_start(run)                      once per session, before the first experiment
//! before_propose(view) -> Guidance   text for an agent's prompt, focus, frozen knobs, step
//!                                    scale, explore/exploit mode
//! candidates(view) -> [Config]       knob configurations to try first (knobs proposer only)
//! filter(candidate, view) -> Verdict Accept | Reject(reason) | Modify(config), before any
//!                                    compute is spent on the candidate
//! ask(view) / answer(text)          one question to the run's LLM before a proposal (only
//!                                    with an `openai` or `anthropic` agent)
//! on_result(outcome)                 after the experiment is recorded
//! on_segment_end(view)               every `[outer] segment` experiments
//! ```
//!
//! Every invocation is recorded with its effect ([`Outer::take_calls`], stored per experiment
//! in the `mechanism_calls` table), so `hone show N` and `hone mech stats` prove what each
//! mechanism did. A mechanism that ran over its probation window without ever changing
//! anything is reported as inert ([`stats`]).
//!
//! A rejected proposal is never verified. For the built-in knobs optimizer a rejection costs
//! nothing, so the proposer is simply asked again with the rejected configuration excluded (up
//! to [`outer::MAX_RESAMPLES`] times; the rejections stay recorded on the experiment); only
//! when every attempt is rejected is the experiment recorded `rejected`. Any other proposer
//! (an agent, an LLM) is not asked again: its candidate is recorded `rejected` with the
//! mechanism's reason.

pub mod bandit;
pub mod explore;
pub mod orthogonal;
pub mod outer;
pub mod plateau;
pub mod portfolio;
pub mod research;
pub mod restart;
pub mod script;
pub mod stats;
pub mod strategy;
pub mod surrogate;
pub mod tabu;

use crate::propose::knobs::{Config, Knob};
use crate::spec::Direction;
use crate::store::{ExperimentRecord, MechanismCall, Status};

pub use crate::propose::guidance::{Guidance, Mode};
pub use outer::Outer;

/// The built-in mechanisms, by the name `[outer] mechanisms` uses (the spec checks names
/// against this list, so it lives there).
pub use crate::spec::BUILTIN_MECHANISMS as BUILTIN;

/// What a filter decides about a candidate.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Accept,
    /// Do not verify it; the reason is recorded.
    Reject(String),
    /// Verify this knob configuration instead (applies to knob proposals only; for any other
    /// proposal it is recorded as ignored and the candidate goes on unchanged).
    Modify(Config, String),
}

/// A proposal as a filter sees it.
#[derive(Clone, Copy, Debug)]
pub struct Candidate<'a> {
    pub description: &'a str,
    /// The full knob configuration, when the proposer knows it.
    pub config: Option<&'a Config>,
    /// The unified diff from the best, for proposals that are not knob configurations.
    pub diff: Option<&'a str>,
}

/// What a mechanism may look at.
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    /// The experiment being proposed (or, in `on_result`, the one just recorded).
    pub n: u64,
    /// Finished experiments of the run, in order (the baseline first).
    pub history: &'a [ExperimentRecord],
    /// The knobs of the editable files (empty unless the proposer searches knobs).
    pub knobs: &'a [Knob],
    /// True for the built-in knobs optimizer (mechanisms that only help agents stay quiet).
    pub knobs_proposer: bool,
    pub direction: Direction,
    /// The run's seed: mechanisms draw their randomness from it.
    pub seed: u64,
    /// The `[loop] editable` globs.
    pub editable: &'a [String],
}

impl View<'_> {
    /// The best experiment so far (baseline or last keep).
    pub fn best(&self) -> Option<&ExperimentRecord> {
        crate::store::best_experiment(self.history)
    }

    /// How many experiments since the last keep (or since the baseline).
    pub fn since_improvement(&self) -> u64 {
        match self
            .history
            .iter()
            .rposition(|e| matches!(e.status(), Status::Keep | Status::Baseline))
        {
            Some(i) => (self.history.len() - 1 - i) as u64,
            None => self.history.len() as u64,
        }
    }

    /// The knob configuration an experiment recorded.
    pub fn config_of(e: &ExperimentRecord) -> Option<Config> {
        serde_json::from_value(e.config.clone()?).ok()
    }
}

/// One finished experiment, as `on_result` sees it.
#[derive(Clone, Copy, Debug)]
pub struct Outcome<'a> {
    pub record: &'a ExperimentRecord,
    /// The run up to and including this experiment.
    pub view: View<'a>,
}

impl Outcome<'_> {
    /// Kept: it improved on the best.
    pub fn improved(&self) -> bool {
        self.record.status() == Status::Keep
    }
}

/// A piece of search behaviour. Every hook is optional; what a hook returns is its effect, and
/// the return value of [`Mechanism::on_result`] and [`Mechanism::on_segment_end`] says, when
/// `Some`, what changed in the mechanism's own state (recorded as an effect too).
pub trait Mechanism {
    /// The name `[outer] mechanisms` and the records use.
    fn name(&self) -> &str;

    /// Once per session, before the first experiment; `view.history` is what the run already
    /// has (a resumed run rebuilds its state from it).
    fn on_start(&mut self, _view: &View<'_>) -> Option<String> {
        None
    }

    /// Advice for the next proposal.
    fn before_propose(&mut self, _view: &View<'_>) -> Guidance {
        Guidance::default()
    }

    /// Knob configurations to try first (only called for the knobs proposer).
    fn candidates(&mut self, _view: &View<'_>) -> Vec<Config> {
        Vec::new()
    }

    /// Accept, reject or modify a candidate before any compute is spent on it.
    fn filter(&mut self, _candidate: &Candidate<'_>, _view: &View<'_>) -> Verdict {
        Verdict::Accept
    }

    /// A question for the run's LLM before the next proposal, as (system, user) messages. Only
    /// asked when `[agent]` is an LLM over HTTP (`openai`, `anthropic`); its cost is charged to
    /// the experiment being proposed.
    fn ask(&mut self, _view: &View<'_>) -> Option<(String, String)> {
        None
    }

    /// The answer to [`Mechanism::ask`] (or why there is none): `Ok(what changed)` or
    /// `Err(why nothing changed)`.
    fn answer(&mut self, _answer: Result<&str, &str>, _view: &View<'_>) -> Result<String, String> {
        Err("no question was asked".into())
    }

    /// After an experiment is recorded.
    fn on_result(&mut self, _outcome: &Outcome<'_>) -> Option<String> {
        None
    }

    /// At the end of every segment of `[outer] segment` experiments.
    fn on_segment_end(&mut self, _view: &View<'_>) -> Option<String> {
        None
    }

    /// Why the mechanism stopped working, once (a script that broke a sandbox cap, threw or
    /// returned the wrong type): the outer loop then deactivates it with this reason.
    fn fault(&mut self) -> Option<String> {
        None
    }

    /// A resumed run, before [`Mechanism::on_start`] (built-in mechanisms; a script is loaded
    /// afresh): the mechanism's own recorded hook calls (oldest first) and the finished
    /// experiments, for state that the history alone does not give back (what it chose, its
    /// own parameters).
    fn resume(&mut self, _calls: &[MechanismCall], _history: &[ExperimentRecord]) {}
}

/// Builds a built-in mechanism by name (`None` for an unknown name).
pub fn builtin(name: &str) -> Option<Box<dyn Mechanism>> {
    Some(match name {
        "tabu" => Box::new(tabu::Tabu::default()),
        "bandit" => Box::new(bandit::Bandit::default()),
        "explore" => Box::new(explore::Explore::default()),
        "restart" => Box::new(restart::Restart::default()),
        "plateau" => Box::new(plateau::Plateau::default()),
        "orthogonal" => Box::new(orthogonal::Orthogonal),
        "surrogate" => Box::new(surrogate::Surrogate::default()),
        "segment_restart" => Box::new(restart::SegmentRestart::default()),
        _ => return None,
    })
}

/// A small deterministic generator (splitmix64) for mechanisms that draw.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64, stream: u64) -> Rng {
        let mut r = Rng(seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        r.next_u64();
        r
    }

    pub fn next_u64(&mut self) -> u64 {
        crate::util::splitmix64(&mut self.0)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        crate::util::unit_f64(self.next_u64())
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Synthetic histories for the mechanisms' unit tests.

    use super::*;
    use crate::propose::knobs::{discover, KnobValue};

    pub fn knobs(text: &str) -> Vec<Knob> {
        match discover("t.py", text) {
            Ok(k) => k,
            Err(e) => panic!("{e}"),
        }
    }

    pub fn config(pairs: &[(&str, i64)]) -> Config {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), KnobValue::Int(*v)))
            .collect()
    }

    pub fn exp(
        n: u64,
        status: Status,
        objective: Option<f64>,
        config: Option<&Config>,
    ) -> ExperimentRecord {
        ExperimentRecord {
            n,
            status: Some(status),
            objective,
            description: format!("experiment {n}"),
            config: config.and_then(|c| serde_json::to_value(c).ok()),
            ..Default::default()
        }
    }

    /// `Keep` when `kept`, else `Discard`.
    pub fn kept_if(kept: bool) -> Status {
        if kept {
            Status::Keep
        } else {
            Status::Discard
        }
    }

    /// Appends `e` to `history` and gives it to `m`'s `on_result`, as the host does; what
    /// `m` changed.
    pub fn finish(
        m: &mut dyn Mechanism,
        history: &mut Vec<ExperimentRecord>,
        e: ExperimentRecord,
        knobs: &[Knob],
        editable: &[String],
    ) -> Option<String> {
        history.push(e);
        let record = history[history.len() - 1].clone();
        m.on_result(&Outcome {
            record: &record,
            view: view(history, knobs, editable),
        })
    }

    pub fn view<'a>(
        history: &'a [ExperimentRecord],
        knobs: &'a [Knob],
        editable: &'a [String],
    ) -> View<'a> {
        View {
            n: history.last().map(|e| e.n + 1).unwrap_or(0),
            history,
            knobs,
            knobs_proposer: !knobs.is_empty(),
            direction: Direction::Minimize,
            seed: 1,
            editable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    /// Seeded mechanisms and benchmarks depend on these exact streams.
    #[test]
    fn rng_streams_are_pinned() {
        let want = [
            [
                0x6e78_9e6a_a1b9_65f4,
                0x06c4_5d18_8009_454f,
                0xf88b_b8a8_724c_81ec,
            ],
            [
                0xab61_6b2b_3ae2_7900,
                0x9532_60af_ec35_d701,
                0xfe57_e1e7_2cbf_9d47,
            ],
            [
                0xd898_a231_b906_c08f,
                0xd386_88dd_0512_3b1e,
                0x4b57_f930_4242_08eb,
            ],
        ];
        let draw = |seed, stream| {
            let mut r = Rng::new(seed, stream);
            std::array::from_fn(|_| r.next_u64())
        };
        crate::util::assert_pinned_streams(draw, want);
    }
}
