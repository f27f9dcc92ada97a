//! The host of the active mechanisms: calls their hooks for the engine, merges their guidance,
//! runs the filters (resampling the knobs optimizer on a rejection), records every invocation
//! with its effect, and lets the offline portfolio turn mechanisms on and off per segment.
//! Level 2: it loads `[outer] scripts`, runs mechanism research every `[outer] research_every`
//! experiments, puts script mechanisms on probation, and deactivates any mechanism that
//! reports a fault (a script stopped by its sandbox).

use std::collections::BTreeMap;

use super::portfolio::Portfolio;
use super::strategy::Strategy;
use super::{Candidate, Guidance, Mechanism, Outcome, Verdict, View};
use crate::propose::knobs::{Config, Knob};
use crate::propose::{optimizer, Proposal, ProposeContext, ProposeError, Proposer};
use crate::spec::{Direction, Spec};
use crate::store::{Effect, ExperimentRecord, Hook, MechanismCall, Status};

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

    fn record(
        calls: &mut Vec<MechanismCall>,
        n: u64,
        name: &str,
        hook: Hook,
        effect: Effect,
        detail: String,
    ) {
        calls.push(MechanismCall {
            experiment: n,
            mechanism: name.to_string(),
            hook,
            effect,
            detail,
        });
    }

    /// `on_start` of every active mechanism, and of those the portfolio switched off (so that
    /// they, too, rebuild from the history); `n` is the next experiment's number.
    pub fn on_start(&mut self, n: u64, seed: u64, history: &[ExperimentRecord]) {
        self.seed = seed;
        let knobs = std::mem::take(&mut self.knobs);
        let editable = self.editable.clone();
        let view = View {
            n,
            history,
            knobs: &knobs,
            knobs_proposer: self.knobs_proposer,
            direction: self.direction,
            seed: self.seed,
            editable: &editable,
        };
        let mut calls = Vec::new();
        let mut events = Vec::new();
        for slot in self.slots.iter_mut().filter(|s| s.active || s.managed) {
            let name = slot.mech.name().to_string();
            let effect = slot.mech.on_start(&view);
            let (e, d) = changed(effect, &mut events, n, &name);
            Outer::record(&mut calls, n, &name, Hook::OnStart, e, d);
            stop_if_faulty(slot, &mut calls, &mut events, n, Hook::OnStart);
        }
        self.calls.extend(calls);
        self.events.extend(events);
        self.knobs = knobs;
    }

    /// Proposes experiment `ctx.n` under the mechanisms' guidance. A knobs proposal is
    /// filtered here and, when rejected, proposed again with the rejected configuration
    /// excluded; any other proposal is filtered after its snapshot ([`Outer::filter_diff`]).
    pub fn propose(
        &mut self,
        proposer: &mut dyn Proposer,
        ctx: &ProposeContext<'_>,
    ) -> Result<Proposal, ProposeError> {
        if self.is_empty() {
            return proposer.propose(ctx);
        }
        if self.knobs_proposer
            || ctx
                .spec
                .agent
                .llm
                .as_ref()
                .is_some_and(|l| l.edit_mode == crate::spec::EditMode::Knobs)
        {
            if let Ok((found, _)) = optimizer::find_knobs(ctx) {
                self.knobs = found;
            }
        }
        let knobs = std::mem::take(&mut self.knobs);
        let result = self.propose_with(proposer, ctx, &knobs);
        self.knobs = knobs;
        result
    }

    fn propose_with(
        &mut self,
        proposer: &mut dyn Proposer,
        ctx: &ProposeContext<'_>,
        knobs: &[Knob],
    ) -> Result<Proposal, ProposeError> {
        let n = ctx.n;
        let editable = self.editable.clone();
        let view = View {
            n,
            history: ctx.history,
            knobs,
            knobs_proposer: self.knobs_proposer,
            direction: self.direction,
            seed: self.seed,
            editable: &editable,
        };
        let mut calls = Vec::new();
        // Questions to the run's LLM first (the strategy's revision), paid by this experiment.
        if let Some(client) = self.llm.as_mut() {
            for slot in self.slots.iter_mut().filter(|s| s.active) {
                let Some((system, user)) = slot.mech.ask(&view) else {
                    continue;
                };
                let name = slot.mech.name().to_string();
                let reply = match client.complete(ctx, &system, &user) {
                    Ok(text) => Ok(text),
                    Err(ProposeError::Invalid(why)) => Err(format!("the LLM call failed: {why}")),
                    Err(stop) => {
                        Outer::record(
                            &mut calls,
                            n,
                            &name,
                            Hook::Ask,
                            Effect::Ignored,
                            stop.to_string(),
                        );
                        self.calls.extend(calls);
                        return Err(stop);
                    }
                };
                let (effect, detail) = match slot
                    .mech
                    .answer(reply.as_deref().map_err(String::as_str), &view)
                {
                    Ok(d) => (Effect::Changed, d),
                    Err(d) => (Effect::Ignored, d),
                };
                self.events.push((n, format!("{name}: {detail}")));
                Outer::record(&mut calls, n, &name, Hook::Ask, effect, detail);
            }
        }
        // Level 2: `[outer] scripts` go through the validation ladder and onto probation at
        // the first proposal of the session (when the knobs are known).
        if !self.level2.loaded {
            self.level2.loaded = true;
            for path in self.level2.scripts.clone() {
                self.load_script(&path, &view, &mut calls);
            }
        }
        // Level 2: mechanism research, paid by this experiment from the run's budget.
        if self.research_due(n) {
            if let Some(mut client) = self.llm.take() {
                let done = self.research(&mut client, ctx, &view, &mut calls);
                self.llm = Some(client);
                if let Err(stop) = done {
                    self.calls.extend(calls);
                    return Err(stop);
                }
            }
        }
        let mut guidance = Guidance::default();
        for slot in self.slots.iter_mut().filter(|s| s.active) {
            let name = slot.mech.name().to_string();
            let mut g = slot.mech.before_propose(&view);
            let effect = if g.is_empty() {
                Effect::None
            } else {
                Effect::Guided
            };
            Outer::record(
                &mut calls,
                n,
                &name,
                Hook::BeforePropose,
                effect,
                g.summary(),
            );
            stop_if_faulty(slot, &mut calls, &mut self.events, n, Hook::BeforePropose);
            g.text = g.text.into_iter().map(|t| format!("{name}: {t}")).collect();
            guidance.merge(g);
        }
        let mut suggested: Vec<(String, usize)> = Vec::new();
        if self.knobs_proposer {
            for slot in self.slots.iter_mut().filter(|s| s.active) {
                let name = slot.mech.name().to_string();
                let cands = slot.mech.candidates(&view);
                stop_if_faulty(slot, &mut calls, &mut self.events, n, Hook::Candidates);
                suggested.push((name.clone(), cands.len()));
                guidance
                    .candidates
                    .extend(cands.into_iter().map(|c| (name.clone(), c)));
            }
        }
        // A fresh history window: the proposer sees only recent experiments and the best, and
        // the knobs optimizer still never repeats an older configuration.
        let window: Vec<ExperimentRecord>;
        let history = match guidance.history_from {
            Some(from) => {
                let best_n = view.best().map(|b| b.n);
                window = ctx
                    .history
                    .iter()
                    .filter(|e| e.n >= from || Some(e.n) == best_n)
                    .cloned()
                    .collect();
                for e in ctx.history.iter().filter(|e| e.n < from) {
                    guidance.avoid.extend(View::config_of(e));
                }
                &window[..]
            }
            None => ctx.history,
        };
        let cheap = proposer.resamples();
        let mut attempts = 0;
        let mut relaxed = false;
        let result = loop {
            let sub = ProposeContext {
                guidance: &guidance,
                history,
                ..*ctx
            };
            let proposal = match proposer.propose(&sub) {
                Ok(p) => p,
                // Guidance must not end a run: with nothing new left under it, the knobs
                // optimizer is asked once more with only the exclusions.
                Err(ProposeError::Exhausted(_)) if cheap && !relaxed && restricts(&guidance) => {
                    relaxed = true;
                    guidance = Guidance {
                        avoid: std::mem::take(&mut guidance.avoid),
                        ..Guidance::default()
                    };
                    self.events.push((
                        n,
                        "guidance relaxed: the knobs optimizer found nothing new under it".into(),
                    ));
                    continue;
                }
                Err(e) => break Err(e),
            };
            if !cheap {
                break Ok(proposal);
            }
            let config: Option<Config> = proposal
                .config
                .as_ref()
                .and_then(|c| serde_json::from_value(c.clone()).ok());
            let cand = Candidate {
                description: &proposal.description,
                config: config.as_ref(),
                diff: None,
            };
            let verdict = filter_all(
                &mut self.slots,
                &mut calls,
                &mut self.events,
                n,
                &cand,
                &view,
                true,
            );
            let reset = || {
                ctx.git
                    .reset_worktree(ctx.worktree, ctx.parent_commit)
                    .map_err(|e| ProposeError::Fatal(e.to_string()))
            };
            match verdict {
                None => break Ok(proposal),
                Some((name, Verdict::Reject(reason))) => {
                    attempts += 1;
                    if let Err(e) = reset() {
                        break Err(e);
                    }
                    let Some(c) = config else {
                        break Err(ProposeError::Rejected(format!(
                            "mechanism `{name}`: {reason}"
                        )));
                    };
                    guidance.avoid.push(c);
                    if attempts >= MAX_RESAMPLES {
                        break Err(ProposeError::Rejected(format!(
                            "mechanism `{name}`: {reason} (and {} earlier proposals were rejected too)",
                            attempts - 1
                        )));
                    }
                }
                Some((name, Verdict::Modify(c, _))) => {
                    attempts += 1;
                    if let Err(e) = reset() {
                        break Err(e);
                    }
                    if let Some(old) = config {
                        guidance.avoid.push(old);
                    }
                    guidance.candidates.insert(0, (name, c));
                    if attempts >= MAX_RESAMPLES {
                        break Err(ProposeError::Rejected(
                            "the mechanisms kept modifying the proposal".into(),
                        ));
                    }
                }
                Some((_, Verdict::Accept)) => break Ok(proposal),
            }
        };
        let used = result.as_ref().ok().and_then(|p| p.source.clone());
        for (name, count) in suggested {
            let (effect, detail) = match (count, used.as_deref() == Some(name.as_str())) {
                (0, _) => (Effect::None, String::new()),
                (c, true) => (Effect::Suggested, format!("{c} candidate(s); {PROPOSED}")),
                (c, false) => (
                    Effect::Suggested,
                    format!("{c} candidate(s); none was proposed"),
                ),
            };
            Outer::record(&mut calls, n, &name, Hook::Candidates, effect, detail);
        }
        self.shaped.insert(n, shapers(&calls, used.as_deref()));
        // Entries of experiments whose outcome is never recorded (the process died) go with age.
        while self.shaped.len() > MAX_IN_FLIGHT {
            self.shaped.pop_first();
        }
        self.calls.extend(calls);
        result
    }

    /// Filters a proposal that is not the knobs optimizer's (an agent's edit, an LLM's knob
    /// values), once its diff is known. Returns why it is rejected, if it is.
    pub fn filter_diff(
        &mut self,
        n: u64,
        description: &str,
        config: Option<&Config>,
        diff: &str,
        history: &[ExperimentRecord],
    ) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let knobs = std::mem::take(&mut self.knobs);
        let view = View {
            n,
            history,
            knobs: &knobs,
            knobs_proposer: self.knobs_proposer,
            direction: self.direction,
            seed: self.seed,
            editable: &self.editable,
        };
        let cand = Candidate {
            description,
            config,
            diff: Some(diff),
        };
        let mut calls = Vec::new();
        let verdict = filter_all(
            &mut self.slots,
            &mut calls,
            &mut self.events,
            n,
            &cand,
            &view,
            false,
        );
        self.calls.extend(calls);
        self.knobs = knobs;
        // (This path never modifies: a diff has no configuration to change.)
        if let Some((name, Verdict::Reject(_))) = &verdict {
            let names = self.shaped.entry(n).or_default();
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        match verdict {
            Some((name, Verdict::Reject(reason))) => Some(format!("mechanism `{name}`: {reason}")),
            _ => None,
        }
    }

    /// After experiment `rec` is recorded (`history` includes it): `on_result`, then at the
    /// end of a segment `on_segment_end` and the portfolio's decision.
    pub fn after(&mut self, rec: &ExperimentRecord, history: &[ExperimentRecord]) {
        if self.is_empty() {
            return;
        }
        let n = rec.n;
        let knobs = std::mem::take(&mut self.knobs);
        let view = View {
            n,
            history,
            knobs: &knobs,
            knobs_proposer: self.knobs_proposer,
            direction: self.direction,
            seed: self.seed,
            editable: &self.editable,
        };
        let mut calls = Vec::new();
        let mut events = Vec::new();
        let outcome = Outcome { record: rec, view };
        for slot in self.slots.iter_mut().filter(|s| s.active) {
            let name = slot.mech.name().to_string();
            let effect = slot.mech.on_result(&outcome);
            let (e, d) = changed(effect, &mut events, n, &name);
            Outer::record(&mut calls, n, &name, Hook::OnResult, e, d);
            stop_if_faulty(slot, &mut calls, &mut events, n, Hook::OnResult);
        }
        if let Some(names) = self.shaped.remove(&n) {
            credit(&mut self.tally, names, rec.status());
        }
        if self.segment_end(n) {
            for slot in self.slots.iter_mut().filter(|s| s.active) {
                let name = slot.mech.name().to_string();
                let effect = slot.mech.on_segment_end(&view);
                let (e, d) = changed(effect, &mut events, n, &name);
                Outer::record(&mut calls, n, &name, Hook::OnSegmentEnd, e, d);
                stop_if_faulty(slot, &mut calls, &mut events, n, Hook::OnSegmentEnd);
            }
            for (on, detail) in self.rotate() {
                let effect = if on {
                    Effect::Activated
                } else {
                    Effect::Deactivated
                };
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

    /// The portfolio's turn at a segment end: credits the segment's tally and turns managed
    /// mechanisms on or off. Returns each switch (on or off, and what to record about it).
    fn rotate(&mut self) -> Vec<(bool, String)> {
        let tally = std::mem::take(&mut self.tally);
        let Some(p) = self.portfolio.as_mut() else {
            return Vec::new();
        };
        let arms: Vec<(String, Option<f64>)> = self
            .slots
            .iter()
            .filter(|s| s.managed)
            .map(|s| {
                let name = s.mech.name().to_string();
                let reward = s.active.then(|| super::portfolio::reward(tally.get(&name)));
                (name, reward)
            })
            .collect();
        let next = p.decide(&arms);
        let mut switches = Vec::new();
        for slot in self.slots.iter_mut().filter(|s| s.managed) {
            let name = slot.mech.name().to_string();
            let on = next.contains(&name);
            if on == slot.active {
                continue;
            }
            slot.active = on;
            let word = if on { "activated" } else { "deactivated" };
            let (shaped, kept) = tally.get(&name).copied().unwrap_or_default();
            switches.push((
                on,
                format!(
                    "{word} `{name}` for the next segment (this segment: shaped {shaped}, \
                     kept {kept}; {})",
                    p.describe(&name)
                ),
            ));
        }
        switches
    }

    /// Whether a resumed run must hand [`Outer::restore`] its recorded hook calls.
    pub fn restores(&self) -> bool {
        !self.slots.is_empty()
    }

    /// A resumed run: hands every built-in mechanism its own recorded calls
    /// ([`Mechanism::resume`]), then rebuilds the portfolio (its credit, the current segment's
    /// tally and which mechanisms are on) by replaying the recorded proposals' hook calls
    /// against the finished experiments in the order they finished, as if the last session had
    /// run to its last recorded experiment. Call before [`Outer::on_start`]; the portfolio's
    /// part is recorded as an `on_start` call of `portfolio`.
    ///
    /// One difference from the live credit: a proposal that a script's filter modified is
    /// credited to the modifier and, on replay, to the guidance givers too (the record does not
    /// say whether the modified configuration was the one verified).
    pub fn restore(&mut self, calls: &[MechanismCall], history: &[ExperimentRecord]) {
        if history.is_empty() {
            return;
        }
        let mut own: BTreeMap<&str, Vec<MechanismCall>> = BTreeMap::new();
        for c in calls {
            own.entry(c.mechanism.as_str()).or_default().push(c.clone());
        }
        for slot in self.slots.iter_mut() {
            let mine = own.remove(slot.mech.name()).unwrap_or_default();
            slot.mech.resume(&mine, history);
        }
        if self.portfolio.is_none() {
            return;
        }
        let proposing = [Hook::BeforePropose, Hook::Candidates, Hook::Filter];
        let mut by_experiment: BTreeMap<u64, Vec<MechanismCall>> = BTreeMap::new();
        for c in calls.iter().filter(|c| proposing.contains(&c.hook)) {
            by_experiment
                .entry(c.experiment)
                .or_default()
                .push(c.clone());
        }
        let proposed = format!("; {PROPOSED}");
        // Live, outcomes are credited as they arrive (out of order with parallel workers).
        let mut finished: Vec<&ExperimentRecord> = history.iter().collect();
        finished.sort_by(|a, b| {
            let at = |e: &ExperimentRecord| e.finished_at.unwrap_or(f64::INFINITY);
            at(a).total_cmp(&at(b)).then(a.n.cmp(&b.n))
        });
        let mut segments = 0;
        for rec in finished {
            if let Some(cs) = by_experiment.get(&rec.n) {
                let used = cs
                    .iter()
                    .find(|c| {
                        c.hook == Hook::Candidates
                            && c.effect == Effect::Suggested
                            && c.detail.ends_with(&proposed)
                    })
                    .map(|c| c.mechanism.as_str());
                credit(&mut self.tally, shapers(cs, used), rec.status());
            }
            if self.segment_end(rec.n) {
                self.rotate();
                segments += 1;
            }
        }
        if segments == 0 && self.tally.is_empty() {
            return;
        }
        let n = history.iter().map(|e| e.n + 1).max().unwrap_or(0);
        let detail = format!(
            "restored from the record of {} experiment(s) ({segments} segment(s) credited); on: {}",
            history.len(),
            self.active().join(", ")
        );
        self.events.push((n, format!("portfolio: {detail}")));
        Outer::record(
            &mut self.calls,
            n,
            "portfolio",
            Hook::OnStart,
            Effect::Changed,
            detail,
        );
    }
}

/// Level 2: research, the validation ladder, probation.
impl Outer {
    /// Research is due every `research_every` experiments, when no script is on probation.
    fn research_due(&self, n: u64) -> bool {
        match self.level2.research_every {
            Some(every) => {
                n > 0
                    && n % every == 0
                    && !self.slots.iter().any(|s| s.active && s.probation.is_some())
            }
            None => false,
        }
    }

    /// Records one research step under `name` (and, when it changes something, as an event).
    fn research_step(
        &mut self,
        calls: &mut Vec<MechanismCall>,
        n: u64,
        name: &str,
        effect: Effect,
        detail: String,
    ) {
        if effect != Effect::None && effect != Effect::Passed {
            self.events.push((n, format!("{name}: {detail}")));
        }
        Outer::record(calls, n, name, Hook::Research, effect, detail);
    }

    /// The four rounds, the repair round when the script does not compile, then the ladder.
    /// A budget stop or a fatal error from the client is returned (the experiment stops as
    /// any proposal's call would stop it); any other failure is recorded and research goes on
    /// next time.
    fn research(
        &mut self,
        client: &mut crate::propose::chat::ChatProposer,
        ctx: &ProposeContext<'_>,
        view: &View<'_>,
        calls: &mut Vec<MechanismCall>,
    ) -> Result<(), ProposeError> {
        let n = view.n;
        let mut all = self.level2.history.clone();
        all.extend(self.calls.iter().cloned());
        all.extend(calls.iter().cloned());
        let active_names = self.active();
        let stats: Vec<_> = super::stats::compute(&all, ctx.history, self.level2.probation)
            .into_iter()
            .filter(|s| active_names.contains(&s.name))
            .collect();
        let input = super::research::Input {
            history: ctx.history,
            knobs: view.knobs,
            direction: view.direction,
            active: &stats,
        };
        let mut ask = |system: &str, user: &str| client.complete(ctx, system, user);
        let mut rounds = match super::research::rounds(&input, &mut ask) {
            Ok(r) => r,
            Err((r, e)) => {
                let detail = format!("round {} failed: {e}", r.texts.len() + 1);
                self.research_step(calls, n, "research", Effect::Failed, detail);
                return match e {
                    ProposeError::Invalid(_) => Ok(()),
                    stop => Err(stop),
                };
            }
        };
        for (i, t) in rounds.texts.iter().enumerate() {
            let detail = format!(
                "round {} ({}): {}",
                i + 1,
                ["explore", "critique", "specify", "generate"][i.min(3)],
                crate::propose::prompt::sanitize(t, 160).replace('\n', " ")
            );
            self.research_step(calls, n, "research", Effect::Passed, detail);
        }
        let Some(mut source) = rounds.source.clone() else {
            let detail = "the generate round gave no code block: nothing to validate".into();
            self.research_step(calls, n, "research", Effect::Failed, detail);
            return Ok(());
        };
        // Compile, with one repair round-trip quoting the error.
        if let Err(error) = super::script::compile(&source, self.level2.limits) {
            let name = script_name(&source);
            self.research_step(
                calls,
                n,
                &name,
                Effect::Failed,
                format!("compile: {error}; asking for one repair"),
            );
            let (system, user) = super::research::repair_prompt(&source, &error);
            let fixed = match client.complete(ctx, &system, &user) {
                Ok(text) => text,
                Err(ProposeError::Invalid(why)) => {
                    self.research_step(
                        calls,
                        n,
                        &name,
                        Effect::Failed,
                        format!("repair round failed: {why}; dropped"),
                    );
                    return Ok(());
                }
                Err(stop) => return Err(stop),
            };
            rounds.texts.push(fixed.clone());
            match super::research::code_block(&fixed) {
                Some(f) => source = f,
                None => {
                    self.research_step(
                        calls,
                        n,
                        &name,
                        Effect::Failed,
                        "repair round gave no code block; dropped".into(),
                    );
                    return Ok(());
                }
            }
            if let Err(error) = super::script::compile(&source, self.level2.limits) {
                let name = script_name(&source);
                self.research_step(
                    calls,
                    n,
                    &name,
                    Effect::Failed,
                    format!("compile after repair: {error}; dropped"),
                );
                return Ok(());
            }
        }
        rounds.source = Some(source.clone());
        let stored = self.level2.root.as_ref().map(|root| {
            let provenance = serde_json::json!({
                "run": self.level2.tag,
                "experiment": n,
                "model": self.level2.model,
                "rounds": rounds.texts,
            });
            super::research::store(&root.join(".hone/mechanisms"), &source, &provenance)
        });
        let name = script_name(&source);
        match stored {
            Some(Ok(path)) => {
                let detail = format!(
                    "generated by research, stored as {}",
                    display_path(&path, self.level2.root.as_deref())
                );
                self.research_step(calls, n, &name, Effect::None, detail);
            }
            Some(Err(e)) => {
                let detail = format!("could not store the script: {e}");
                self.research_step(calls, n, &name, Effect::None, detail);
            }
            None => {}
        }
        self.validate_and_activate(&source, view, calls);
        Ok(())
    }

    /// Loads one `[outer] scripts` path and runs the ladder on it.
    fn load_script(&mut self, path: &str, view: &View<'_>, calls: &mut Vec<MechanismCall>) {
        let full = match &self.level2.root {
            Some(root) => root.join(path),
            None => std::path::PathBuf::from(path),
        };
        match std::fs::read_to_string(&full) {
            Ok(source) => {
                let name = script_name(&source);
                Outer::record(
                    calls,
                    view.n,
                    &name,
                    Hook::Research,
                    Effect::Passed,
                    format!("loaded from {path}"),
                );
                self.validate_and_activate(&source, view, calls);
            }
            Err(e) => {
                let detail = format!("cannot read {path}: {e}");
                self.events.push((view.n, format!("script: {detail}")));
                Outer::record(
                    calls,
                    view.n,
                    "script",
                    Hook::Research,
                    Effect::Failed,
                    detail,
                );
            }
        }
    }

    /// The ladder (compile, contract, replay), each step on record, then activation on
    /// probation.
    fn validate_and_activate(
        &mut self,
        source: &str,
        view: &View<'_>,
        calls: &mut Vec<MechanismCall>,
    ) {
        let n = view.n;
        let name = script_name(source);
        if self.slots.iter().any(|s| s.mech.name() == name) {
            self.research_step(
                calls,
                n,
                &name,
                Effect::Failed,
                "already loaded in this run; not added twice".into(),
            );
            return;
        }
        let l = super::research::ladder(
            source,
            self.level2.limits,
            view.history,
            view.knobs,
            view.direction,
            view.seed,
        );
        for step in l.steps {
            let effect = if step.passed {
                Effect::Passed
            } else {
                Effect::Failed
            };
            let detail = if step.passed {
                step.detail
            } else {
                format!("{}; dropped", step.detail)
            };
            self.research_step(calls, n, &name, effect, detail);
        }
        if let Some(m) = l.mechanism {
            let detail = format!(
                "activated on probation for {} experiments (from #{n})",
                self.level2.probation
            );
            self.research_step(calls, n, &name, Effect::Activated, detail);
            let mut slot = Slot {
                mech: Box::new(m),
                active: true,
                managed: false,
                probation: Some(n),
            };
            // It joins a session under way: its `on_start` sees the run so far.
            let effect = slot.mech.on_start(view);
            let (e, d) = changed(effect, &mut self.events, n, &name);
            Outer::record(calls, n, &name, Hook::OnStart, e, d);
            stop_if_faulty(&mut slot, calls, &mut self.events, n, Hook::OnStart);
            self.slots.push(slot);
        }
    }

    /// Decides, for every script whose probation window ends with experiment `n`, whether it
    /// stays or is reverted.
    fn end_probations(
        &mut self,
        n: u64,
        history: &[ExperimentRecord],
        calls: &mut Vec<MechanismCall>,
        events: &mut Vec<(u64, String)>,
    ) {
        let p = self.level2.probation;
        for slot in self.slots.iter_mut().filter(|s| s.active) {
            let Some(since) = slot.probation else {
                continue;
            };
            if n + 1 < since + p {
                continue;
            }
            let name = slot.mech.name().to_string();
            let effective = |c: &&MechanismCall| {
                c.mechanism == name
                    && c.experiment >= since
                    && matches!(
                        c.effect,
                        Effect::Guided
                            | Effect::Suggested
                            | Effect::Rejected
                            | Effect::Modified
                            | Effect::Changed
                    )
            };
            let effects = (self.level2.history.iter().filter(effective).count()
                + self.calls.iter().filter(effective).count()
                + calls.iter().filter(effective).count()) as u64;
            slot.probation = None;
            let (effect, detail) = match super::research::verdict(history, since, p, effects) {
                Ok(why) => (Effect::Passed, format!("probation: {why}")),
                Err(why) => {
                    slot.active = false;
                    (
                        Effect::Deactivated,
                        format!("reverted after probation: {why}"),
                    )
                }
            };
            events.push((n, format!("{name}: {detail}")));
            Outer::record(calls, n, &name, Hook::Research, effect, detail);
        }
    }
}

/// A script mechanism's name: `script:` and the first 8 hex digits of its SHA-256.
fn script_name(source: &str) -> String {
    format!("script:{}", &super::script::hash(source)[..8])
}

fn display_path(path: &std::path::Path, root: Option<&std::path::Path>) -> String {
    root.and_then(|r| path.strip_prefix(r).ok())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The mechanisms that shaped one experiment, from its proposal's calls: the one whose
/// candidate was proposed (`used`) or else every one that gave guidance, and every filter that
/// rejected or modified a proposal on the way.
fn shapers(calls: &[MechanismCall], used: Option<&str>) -> Vec<String> {
    let mut names: Vec<String> = used.map(String::from).into_iter().collect();
    for c in calls {
        let counts = match c.effect {
            Effect::Rejected | Effect::Modified => true,
            Effect::Guided => used.is_none(),
            _ => false,
        };
        if counts && !names.contains(&c.mechanism) {
            names.push(c.mechanism.clone());
        }
    }
    names
}

/// Credits a finished experiment to the mechanisms that shaped it. Only outcomes of the
/// search count: not a cancelled experiment or a proposal that broke the rules
/// (violation, invalid). A budget stop at the review gate is recorded `rejected` and does
/// count.
fn credit(tally: &mut BTreeMap<String, (u64, u64)>, names: Vec<String>, status: Status) {
    let counts = matches!(
        status,
        Status::Keep | Status::Discard | Status::Crash | Status::Timeout | Status::Rejected
    );
    if counts {
        let kept = u64::from(status == Status::Keep);
        for name in names {
            let t = tally.entry(name).or_default();
            t.0 += 1;
            t.1 += kept;
        }
    }
}

/// Whether guidance narrows what the knobs optimizer may propose.
fn restricts(g: &Guidance) -> bool {
    !g.frozen.is_empty() || !g.focus.is_empty() || g.mode.is_some() || !g.candidates.is_empty()
}

/// Records a state change (and makes it an event).
fn changed(
    effect: Option<String>,
    events: &mut Vec<(u64, String)>,
    n: u64,
    name: &str,
) -> (Effect, String) {
    match effect {
        Some(d) => {
            events.push((n, format!("{name}: {d}")));
            (Effect::Changed, d)
        }
        None => (Effect::None, String::new()),
    }
}

/// Deactivates a mechanism that reports a fault (a script its sandbox stopped), on record.
fn stop_if_faulty(
    slot: &mut Slot,
    calls: &mut Vec<MechanismCall>,
    events: &mut Vec<(u64, String)>,
    n: u64,
    hook: Hook,
) {
    if let Some(why) = slot.mech.fault() {
        slot.active = false;
        slot.probation = None;
        let name = slot.mech.name().to_string();
        let detail = format!("stopped and deactivated: {why}");
        events.push((n, format!("{name}: {detail}")));
        Outer::record(calls, n, &name, hook, Effect::Deactivated, detail);
    }
}

/// Runs the filters of the active mechanisms in order until one rejects or modifies.
fn filter_all(
    slots: &mut [Slot],
    calls: &mut Vec<MechanismCall>,
    events: &mut Vec<(u64, String)>,
    n: u64,
    cand: &Candidate<'_>,
    view: &View<'_>,
    knob_proposal: bool,
) -> Option<(String, Verdict)> {
    for slot in slots.iter_mut().filter(|s| s.active) {
        let name = slot.mech.name().to_string();
        let verdict = slot.mech.filter(cand, view);
        stop_if_faulty(slot, calls, events, n, Hook::Filter);
        match verdict {
            Verdict::Accept => {
                Outer::record(calls, n, &name, Hook::Filter, Effect::None, String::new())
            }
            Verdict::Reject(reason) => {
                let detail = format!(
                    "`{}`: {reason}",
                    crate::propose::prompt::sanitize(cand.description, 200)
                );
                Outer::record(calls, n, &name, Hook::Filter, Effect::Rejected, detail);
                return Some((name, Verdict::Reject(reason)));
            }
            Verdict::Modify(c, why) if knob_proposal && cand.config.is_some() => {
                let detail = format!("modified the proposal: {why}");
                Outer::record(calls, n, &name, Hook::Filter, Effect::Modified, detail);
                return Some((name, Verdict::Modify(c, why)));
            }
            Verdict::Modify(_, why) => {
                let detail = format!("modification ignored (not a knob proposal): {why}");
                Outer::record(calls, n, &name, Hook::Filter, Effect::Ignored, detail);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::propose::knobs::KnobValue;
    use crate::propose::optimizer::KnobsProposer;
    use crate::workspace::Git;
    use std::cell::Cell;
    use std::path::Path;
    use std::process::Command;

    #[test]
    fn an_experiment_is_credited_to_the_candidate_it_used_else_to_its_guidance() {
        let call = |m: &str, hook: Hook, e: Effect| MechanismCall {
            experiment: 3,
            mechanism: m.into(),
            hook,
            effect: e,
            detail: String::new(),
        };
        let calls = vec![
            call("bandit", Hook::BeforePropose, Effect::Guided),
            call("plateau", Hook::BeforePropose, Effect::None),
            call("tabu", Hook::Filter, Effect::Rejected),
            call("surrogate", Hook::Candidates, Effect::Suggested),
            call("explore", Hook::Candidates, Effect::Suggested),
            call("steer", Hook::Filter, Effect::Modified),
        ];
        assert_eq!(
            shapers(&calls, Some("surrogate")),
            ["surrogate", "tabu", "steer"]
        );
        assert_eq!(shapers(&calls, None), ["bandit", "tabu", "steer"]);
    }

    /// Modifies the first proposal into `target`, then accepts.
    struct Steer {
        target: Config,
    }

    impl Mechanism for Steer {
        fn name(&self) -> &str {
            "steer"
        }
        fn filter(&mut self, c: &Candidate<'_>, _view: &View<'_>) -> Verdict {
            match c.config {
                Some(config) if *config != self.target => {
                    Verdict::Modify(self.target.clone(), "steered".into())
                }
                _ => Verdict::Accept,
            }
        }
    }

    /// Rejects everything.
    struct Wall;

    impl Mechanism for Wall {
        fn name(&self) -> &str {
            "wall"
        }
        fn filter(&mut self, _c: &Candidate<'_>, _view: &View<'_>) -> Verdict {
            Verdict::Reject("nothing passes".into())
        }
    }

    /// Runs `f` with a proposal context over a repository holding two integer knobs.
    fn with_ctx(f: impl FnOnce(&ProposeContext<'_>, &Path)) {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let sh = |cmd: &str| {
            let ok = Command::new("sh")
                .arg("-c")
                .arg(cmd)
                .current_dir(d)
                .status()
                .unwrap();
            assert!(ok.success(), "{cmd}");
        };
        sh("git init -q -b main && printf 'A = 3  # hone: int 1..9\\nB = 3  # hone: int 1..9\\n' > p.txt \
            && git add -A && git -c user.name=t -c user.email=t@t commit -qm i");
        let spec = Spec::parse(
            Path::new("hone.toml"),
            "[loop]\neditable = [\"p.txt\"]\n[verify]\ncommand = \"true\"\nmetric = \"m\"\n",
        )
        .unwrap();
        let git = Git::discover(d).unwrap();
        let head = git.head().unwrap();
        let wt = d.join(".hone/wt");
        git.prepare_worktree(&wt, &head).unwrap();
        let run_dir = d.join(".hone/runs/t");
        std::fs::create_dir_all(&run_dir).unwrap();
        let base: Config = [("A", 3), ("B", 3)]
            .iter()
            .map(|(k, v)| (k.to_string(), KnobValue::Int(*v)))
            .collect();
        let history = vec![ExperimentRecord {
            n: 0,
            status: Some(crate::store::Status::Baseline),
            objective: Some(1.0),
            config: serde_json::to_value(&base).ok(),
            ..Default::default()
        }];
        let spent = Cell::new((0.0, 0));
        let guidance = Guidance::default();
        let ctx = ProposeContext {
            n: 1,
            worktree: &wt,
            parent_commit: &head,
            base_commit: &head,
            history: &history,
            best: Some(&history[0]),
            spec: &spec,
            git: &git,
            repo_root: d,
            run_dir: &run_dir,
            seed: 0,
            cancel: &|| false,
            on_spawn: &|_, _| {},
            wrapper: &[],
            budget: crate::propose::Budget::default(),
            spent: &spent,
            guidance: &guidance,
            job: "",
        };
        f(&ctx, &wt);
    }

    fn spec() -> Spec {
        Spec::parse(
            Path::new("hone.toml"),
            "[loop]\neditable = [\"p.txt\"]\n[verify]\ncommand = \"true\"\nmetric = \"m\"\n",
        )
        .unwrap()
    }

    /// Offers one configuration for experiment 1 only.
    struct Offer(Config);

    impl Mechanism for Offer {
        fn name(&self) -> &str {
            "offer"
        }
        fn candidates(&mut self, view: &View<'_>) -> Vec<Config> {
            if view.n == 1 {
                vec![self.0.clone()]
            } else {
                Vec::new()
            }
        }
    }

    /// Always gives the proposer a line of advice.
    struct Hint;

    impl Mechanism for Hint {
        fn name(&self) -> &str {
            "hint"
        }
        fn before_propose(&mut self, _view: &View<'_>) -> Guidance {
            Guidance {
                text: vec!["try something".into()],
                ..Guidance::default()
            }
        }
    }

    #[test]
    fn outcomes_are_credited_to_the_mechanisms_that_shaped_them_even_when_interleaved() {
        with_ctx(|ctx, _wt| {
            let target: Config = [("A", 8), ("B", 1)]
                .iter()
                .map(|(k, v)| (k.to_string(), KnobValue::Int(*v)))
                .collect();
            let mut outer =
                Outer::from_mechanisms(vec![Box::new(Offer(target)), Box::new(Hint)], &spec());
            // Two experiments in flight (parallel workers): 1 uses the offer, 2 the hint.
            let first = outer.propose(&mut KnobsProposer, ctx).unwrap();
            assert_eq!(first.source.as_deref(), Some("offer"));
            let ctx2 = ProposeContext { n: 2, ..*ctx };
            let second = outer.propose(&mut KnobsProposer, &ctx2).unwrap();
            assert_eq!(second.source, None);
            let rec = |n: u64, status: Status| ExperimentRecord {
                n,
                status: Some(status),
                objective: Some(0.5),
                ..Default::default()
            };
            let mut history = ctx.history.to_vec();
            history.push(rec(1, Status::Keep));
            outer.after(&history[1], &history);
            history.push(rec(2, Status::Discard));
            outer.after(&history[2], &history);
            assert_eq!(outer.tally.get("offer"), Some(&(1, 1)));
            assert_eq!(outer.tally.get("hint"), Some(&(1, 0)));
            assert!(outer.shaped.is_empty());
            // A cancelled experiment is nobody's failure.
            let ctx3 = ProposeContext { n: 3, ..*ctx };
            outer.propose(&mut KnobsProposer, &ctx3).unwrap();
            history.push(rec(3, Status::Aborted));
            outer.after(&history[3], &history);
            assert_eq!(outer.tally.get("hint"), Some(&(1, 0)));
        });
    }

    /// Offers a configuration of its own for every experiment; for #2 the baseline's, which
    /// the optimizer does not repeat (so it is offered but not proposed).
    struct Every;

    impl Mechanism for Every {
        fn name(&self) -> &str {
            "every"
        }
        fn candidates(&mut self, view: &View<'_>) -> Vec<Config> {
            let (a, b) = match view.n {
                2 => (3, 3),
                n => (n % 9 + 1, n / 9 + 1),
            };
            vec![[("A", a), ("B", b)]
                .iter()
                .map(|(k, v)| (k.to_string(), KnobValue::Int(*v as i64)))
                .collect()]
        }
    }

    #[test]
    fn a_resumed_portfolio_is_rebuilt_from_the_recorded_calls() {
        with_ctx(|ctx, _wt| {
            let spec = Spec::parse(
                Path::new("hone.toml"),
                "[loop]\neditable = [\"p.txt\"]\n[verify]\ncommand = \"true\"\nmetric = \"m\"\n\
                 [outer]\nmechanisms = [\"tabu\"]\nportfolio = true\nsegment = 3\n",
            )
            .unwrap();
            let make = || Outer::from_mechanisms(vec![Box::new(Every), Box::new(Hint)], &spec);
            let mut outer = make();
            let mut history = ctx.history.to_vec();
            let mut calls = Vec::new();
            let mut clock = 0.0;
            // Experiments 1..=10: segments end at 2, 5 and 8; #7 and #8 are in flight together
            // and #8 (a segment end) finishes first; 9 and 10 are the segment in progress
            // when the session stops.
            let batches: [&[u64]; 9] = [&[1], &[2], &[3], &[4], &[5], &[6], &[7, 8], &[9], &[10]];
            for batch in batches {
                for &n in batch {
                    let c = ProposeContext {
                        n,
                        history: &history,
                        ..*ctx
                    };
                    outer.propose(&mut KnobsProposer, &c).unwrap();
                }
                for &n in batch.iter().rev() {
                    let status = if n % 4 == 1 || n == 6 || n == 7 {
                        Status::Keep
                    } else {
                        Status::Discard
                    };
                    clock += 1.0;
                    history.push(ExperimentRecord {
                        n,
                        status: Some(status),
                        objective: Some(1.0 / n as f64),
                        finished_at: Some(clock),
                        ..Default::default()
                    });
                    outer.after(&history[history.len() - 1], &history);
                    calls.extend(outer.take_calls());
                }
            }
            let offered: Vec<&MechanismCall> = calls
                .iter()
                .filter(|c| {
                    c.experiment == 2 && c.mechanism == "every" && c.hook == Hook::Candidates
                })
                .collect();
            assert!(
                offered[0].detail.ends_with("none was proposed"),
                "{offered:?}"
            );
            assert_eq!(outer.active().len(), 1, "one of the two runs per segment");
            assert!(!outer.tally.is_empty());
            // A new session over the same record (read back in experiment order) picks up
            // where the last one stopped...
            history.sort_by_key(|e| e.n);
            let mut resumed = make();
            resumed.restore(&calls, &history);
            assert_eq!(resumed.active(), outer.active());
            assert_eq!(resumed.tally, outer.tally);
            assert_eq!(
                format!("{:?}", resumed.portfolio),
                format!("{:?}", outer.portfolio)
            );
            let restored = resumed.take_calls();
            assert_eq!(restored.len(), 1);
            assert_eq!(restored[0].mechanism, "portfolio");
            assert!(
                restored[0].detail.contains("3 segment(s) credited"),
                "{}",
                restored[0].detail
            );
            // ...where one that did not restore would start with both on and no credit.
            let fresh = make();
            assert_ne!(fresh.active(), outer.active());
        });
    }

    #[test]
    fn a_modified_knob_proposal_is_the_one_written_and_recorded() {
        with_ctx(|ctx, wt| {
            let target: Config = [("A", 8), ("B", 1)]
                .iter()
                .map(|(k, v)| (k.to_string(), KnobValue::Int(*v)))
                .collect();
            let mut outer = Outer::from_mechanisms(
                vec![Box::new(Steer {
                    target: target.clone(),
                })],
                &spec(),
            );
            let p = outer.propose(&mut KnobsProposer, ctx).unwrap();
            assert_eq!(p.config, serde_json::to_value(&target).ok());
            assert_eq!(p.source.as_deref(), Some("steer"));
            let written = std::fs::read_to_string(wt.join("p.txt")).unwrap();
            assert!(
                written.starts_with("A = 8  #") && written.contains("\nB = 1  #"),
                "{written}"
            );
            let calls = outer.take_calls();
            let effects: Vec<&str> = calls
                .iter()
                .filter(|c| c.hook == Hook::Filter)
                .map(|c| c.effect.as_str())
                .collect();
            assert_eq!(effects, ["modified", "none"]);
        });
    }

    #[test]
    fn a_script_that_throws_is_deactivated_on_record_and_the_proposal_goes_on() {
        with_ctx(|ctx, _wt| {
            let script = super::super::script::ScriptMechanism::compile(
                "fn before_propose(v) { throw \"no idea\" }",
                super::super::script::Limits::default(),
            )
            .unwrap();
            let mut outer = Outer::from_mechanisms(vec![Box::new(script)], &spec());
            let name = outer.active()[0].clone();
            assert!(name.starts_with("script:"), "{name}");
            assert!(outer.propose(&mut KnobsProposer, ctx).is_ok());
            assert!(outer.active().is_empty(), "deactivated");
            let calls = outer.take_calls();
            let stop = calls
                .iter()
                .find(|c| c.effect == Effect::Deactivated)
                .expect("the stop is on record");
            assert_eq!(
                (stop.mechanism.as_str(), stop.hook.as_str()),
                (name.as_str(), "before_propose")
            );
            assert!(stop.detail.contains("threw `no idea`"), "{}", stop.detail);
            assert!(outer.take_events()[0].1.contains("stopped and deactivated"));
            // Not called again.
            assert!(outer.propose(&mut KnobsProposer, ctx).is_ok());
            assert!(outer.take_calls().iter().all(|c| c.mechanism != name));
        });
    }

    #[test]
    fn when_every_knob_proposal_is_rejected_the_experiment_is_rejected_and_the_worktree_clean() {
        with_ctx(|ctx, wt| {
            let mut outer = Outer::from_mechanisms(vec![Box::new(Wall)], &spec());
            match outer.propose(&mut KnobsProposer, ctx) {
                Err(ProposeError::Rejected(why)) => {
                    assert!(why.starts_with("mechanism `wall`: nothing passes"), "{why}")
                }
                other => panic!("{other:?}"),
            }
            let rejected = outer
                .take_calls()
                .iter()
                .filter(|c| c.effect == Effect::Rejected)
                .count();
            assert_eq!(rejected, MAX_RESAMPLES, "each resample is on record");
            let left = std::fs::read_to_string(wt.join("p.txt")).unwrap();
            assert!(left.starts_with("A = 3  #"), "{left}");
        });
    }
}
