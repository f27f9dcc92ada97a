//! The host of the active mechanisms: calls their hooks for the engine, merges their guidance,
//! runs the filters (resampling the knobs optimizer on a rejection), records every invocation
//! with its effect, and lets the offline portfolio turn mechanisms on and off per segment.
//! Level 2: it loads `[outer] scripts`, runs mechanism research every `[outer] research_every`
//! experiments, puts script mechanisms on probation, and deactivates any mechanism that
//! reports a fault (a script stopped by its sandbox).
//!
//! This file holds the host's state and its lifecycle (`on_start`, `after`); the parts:
//! `propose` (a proposal under the mechanisms and the filters), `research` (Level 2),
//! `restore` (the portfolio's rotation and a resumed run) and `record` (the calls on record
//! and the credit of outcomes).

mod propose;
mod record;
mod research;
mod restore;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use super::portfolio::Portfolio;
use super::strategy::Strategy;
use super::{Mechanism, Outcome, View};
use crate::propose::knobs::Knob;
use crate::spec::{Direction, Spec};
use crate::store::{ExperimentRecord, Hook, MechanismCall};
use record::{call_each, credit};

/// How many times the knobs optimizer is asked again after a filter rejects its proposal.
pub const MAX_RESAMPLES: usize = 16;

/// The most experiments whose shaping mechanisms are remembered until their outcome.
const MAX_IN_FLIGHT: usize = 1024;
/// How a `candidates` call records that one of its candidates was the proposal.
const PROPOSED: &str = "one was proposed";

struct Slot {
    mech: Box<dyn Mechanism>,
    active: bool,
    /// The portfolio may turn it off (built-ins; not the strategy).
    managed: bool,
    /// A script mechanism on probation since this experiment.
    probation: Option<u64>,
}

impl Slot {
    fn new(mech: Box<dyn Mechanism>, managed: bool) -> Slot {
        Slot {
            mech,
            active: true,
            managed,
            probation: None,
        }
    }
}

/// Level 2's settings for one run.
struct Level2 {
    research_every: Option<u64>,
    probation: u64,
    scripts: Vec<String>,
    limits: super::script::Limits,
    /// The repository (scripts are relative to it; generated ones go under .hone/mechanisms).
    root: Option<std::path::PathBuf>,
    tag: String,
    model: String,
    /// Every call recorded this session (the research rounds show their statistics).
    history: Vec<MechanismCall>,
    /// `scripts` were loaded this session.
    loaded: bool,
}

/// The outer loop of one run. Without `[outer]` it holds nothing and every call is a no-op,
/// so the inner loop behaves exactly as it would without it.
pub struct Outer {
    slots: Vec<Slot>,
    portfolio: Option<Portfolio>,
    /// The mechanisms that shaped each experiment in flight, by number (several are in flight
    /// with parallel workers): the portfolio credits an outcome to them alone.
    shaped: BTreeMap<u64, Vec<String>>,
    /// This segment's tally per mechanism: experiments it shaped, and how many were kept.
    tally: BTreeMap<String, (u64, u64)>,
    segment: u64,
    direction: Direction,
    editable: Vec<String>,
    knobs_proposer: bool,
    seed: u64,
    /// The knobs of the latest proposal (what `on_result` and segment hooks see).
    knobs: Vec<Knob>,
    calls: Vec<MechanismCall>,
    events: Vec<(u64, String)>,
    /// The run's LLM, when `[agent]` is one: mechanisms may ask it questions.
    llm: Option<crate::propose::chat::ChatProposer>,
    level2: Level2,
}

impl Outer {
    /// The mechanisms, strategy and portfolio `[outer]` asks for.
    pub fn from_spec(spec: &Spec) -> Outer {
        let o = &spec.outer;
        let mut slots: Vec<Slot> = Vec::new();
        if let Some(every) = o.strategy_every {
            let llm = spec.agent.kind.is_http() && spec.agent.llm.is_some();
            slots.push(Slot::new(
                Box::new(Strategy::new(every, o.max_frozen).with_llm(llm)),
                false,
            ));
        }
        for name in &o.mechanisms {
            if let Some(mech) = super::builtin(name) {
                slots.push(Slot::new(mech, true));
            }
        }
        let knobs_proposer = spec.agent.kind == crate::spec::AgentKind::Knobs;
        Outer::with(slots, spec, knobs_proposer)
    }

    /// What a mechanism sees of experiment `n`: the run's direction, seed and proposer with
    /// `history`, `knobs` and the editable globs (a copy the caller holds, so that the slots
    /// stay free to borrow while the view lives).
    fn view<'a>(
        &self,
        n: u64,
        history: &'a [ExperimentRecord],
        knobs: &'a [Knob],
        editable: &'a [String],
    ) -> View<'a> {
        View {
            n,
            history,
            knobs,
            knobs_proposer: self.knobs_proposer,
            direction: self.direction,
            seed: self.seed,
            editable,
        }
    }

    fn with(slots: Vec<Slot>, spec: &Spec, knobs_proposer: bool) -> Outer {
        let o = &spec.outer;
        let slots_empty = slots.is_empty() && o.research_every.is_none() && o.scripts.is_empty();
        Outer {
            portfolio: o.portfolio.then(Portfolio::default),
            shaped: BTreeMap::new(),
            tally: BTreeMap::new(),
            slots,
            segment: o.segment,
            direction: spec.verify.direction,
            editable: spec.loop_.editable.clone(),
            knobs_proposer,
            seed: 0,
            knobs: Vec::new(),
            calls: Vec::new(),
            events: Vec::new(),
            llm: match (&spec.agent.llm, spec.agent.kind.is_http(), slots_empty) {
                (Some(l), true, false) => Some(crate::propose::chat::ChatProposer::new(
                    spec.agent.kind,
                    l.clone(),
                )),
                _ => None,
            },
            level2: Level2 {
                research_every: o.research_every,
                probation: o.probation,
                scripts: o.scripts.clone(),
                limits: super::script::Limits::default(),
                root: None,
                tag: String::new(),
                model: spec
                    .agent
                    .llm
                    .as_ref()
                    .map(|l| l.model.clone())
                    .unwrap_or_default(),
                history: Vec::new(),
                loaded: false,
            },
        }
    }

    /// Where Level 2 reads `[outer] scripts` and stores generated mechanisms (the repository
    /// root), and the run they are recorded for.
    pub fn with_level2(mut self, root: &std::path::Path, tag: &str) -> Outer {
        self.level2.root = Some(root.to_path_buf());
        self.level2.tag = tag.to_string();
        self
    }

    /// The sandbox caps for script mechanisms (for tests and embedders).
    pub fn with_script_limits(mut self, limits: super::script::Limits) -> Outer {
        self.level2.limits = limits;
        self
    }

    /// An outer loop over the given mechanisms (for tests and embedders).
    pub fn from_mechanisms(mechs: Vec<Box<dyn Mechanism>>, spec: &Spec) -> Outer {
        let slots = mechs
            .into_iter()
            .map(|mech| Slot::new(mech, true))
            .collect();
        Outer::with(
            slots,
            spec,
            spec.agent.kind == crate::spec::AgentKind::Knobs,
        )
    }

    /// True when no mechanism is configured.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
            && self.level2.research_every.is_none()
            && self.level2.scripts.is_empty()
    }

    /// The hook invocations recorded since the last call, oldest first.
    pub fn take_calls(&mut self) -> Vec<MechanismCall> {
        let calls = std::mem::take(&mut self.calls);
        if self.level2.research_every.is_some() || !self.level2.scripts.is_empty() {
            self.level2.history.extend(calls.iter().cloned());
        }
        calls
    }

    /// Notable changes (restarts, strategy revisions, portfolio switches) as (experiment,
    /// message), for the engine's event log.
    pub fn take_events(&mut self) -> Vec<(u64, String)> {
        std::mem::take(&mut self.events)
    }

    /// `on_start` of every active mechanism, and of those the portfolio switched off (so that
    /// they, too, rebuild from the history); `n` is the next experiment's number.
    pub fn on_start(&mut self, n: u64, seed: u64, history: &[ExperimentRecord]) {
        self.seed = seed;
        let knobs = std::mem::take(&mut self.knobs);
        let editable = self.editable.clone();
        let view = self.view(n, history, &knobs, &editable);
        let mut calls = Vec::new();
        let mut events = Vec::new();
        call_each(
            &mut self.slots,
            |s| s.active || s.managed,
            Hook::OnStart,
            n,
            &mut calls,
            &mut events,
            |m| m.on_start(&view),
        );
        self.calls.extend(calls);
        self.events.extend(events);
        self.knobs = knobs;
    }

    /// After experiment `rec` is recorded (`history` includes it): `on_result`, then at the
    /// end of a segment `on_segment_end` and the portfolio's decision.
    pub fn after(&mut self, rec: &ExperimentRecord, history: &[ExperimentRecord]) {
        if self.is_empty() {
            return;
        }
        let n = rec.n;
        let knobs = std::mem::take(&mut self.knobs);
        let editable = self.editable.clone();
        let view = self.view(n, history, &knobs, &editable);
        let mut calls = Vec::new();
        let mut events = Vec::new();
        let outcome = Outcome { record: rec, view };
        call_each(
            &mut self.slots,
            |s| s.active,
            Hook::OnResult,
            n,
            &mut calls,
            &mut events,
            |m| m.on_result(&outcome),
        );
        if let Some(names) = self.shaped.remove(&n) {
            credit(&mut self.tally, names, rec.status());
        }
        if self.segment_end(n) {
            call_each(
                &mut self.slots,
                |s| s.active,
                Hook::OnSegmentEnd,
                n,
                &mut calls,
                &mut events,
                |m| m.on_segment_end(&view),
            );
            for (effect, detail) in self.rotate() {
                Outer::record(
                    &mut calls,
                    n,
                    "portfolio",
                    Hook::OnSegmentEnd,
                    effect,
                    detail.clone(),
                );
                events.push((n, format!("portfolio: {detail}")));
            }
        }
        // Level 2: script mechanisms whose probation ends with this experiment.
        self.end_probations(n, history, &mut calls, &mut events);
        self.calls.extend(calls);
        self.events.extend(events);
        self.knobs = knobs;
    }

    /// The names of the mechanisms active now.
    pub fn active(&self) -> Vec<String> {
        self.slots
            .iter()
            .filter(|s| s.active)
            .map(|s| s.mech.name().to_string())
            .collect()
    }

    /// Whether experiment `n` ends a segment.
    fn segment_end(&self, n: u64) -> bool {
        self.segment > 0 && (n + 1) % self.segment == 0
    }
}
