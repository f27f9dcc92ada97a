//! The proposal under the mechanisms: questions to the run's LLM, Level 2 before the first
//! proposal and when research is due, the merged guidance and candidates, a fresh history
//! window, then the proposer asked again while a filter rejects or modifies a knobs proposal;
//! and the filters of a proposal that is not the knobs optimizer's, once its diff is known.

use super::record::{shapers, stop_if_faulty};
use super::{Outer, Slot, MAX_IN_FLIGHT, MAX_RESAMPLES, PROPOSED};
use crate::meta::{Candidate, Guidance, Verdict, View};
use crate::propose::knobs::{Config, Knob};
use crate::propose::{optimizer, Proposal, ProposeContext, ProposeError, Proposer};
use crate::store::{Effect, ExperimentRecord, Hook, MechanismCall};

impl Outer {
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
        let view = self.view(n, ctx.history, knobs, &editable);
        let mut calls = Vec::new();
        let asked = self
            .ask(ctx, &view, &mut calls)
            .and_then(|()| self.level2_before_proposal(ctx, &view, &mut calls));
        if let Err(stop) = asked {
            self.calls.extend(calls);
            return Err(stop);
        }
        let (mut guidance, suggested) = self.guidance(&view, &mut calls);
        let window = fresh_window(ctx.history, &view, &mut guidance);
        let history = window.as_deref().unwrap_or(ctx.history);
        let result = self.propose_filtered(proposer, ctx, history, &view, guidance, &mut calls);
        self.settle(n, suggested, &result, calls);
        result
    }

    /// Questions to the run's LLM first (the strategy's revision), paid by this experiment. A
    /// budget stop or a fatal error from the client is returned (recorded as `ask ignored`).
    fn ask(
        &mut self,
        ctx: &ProposeContext<'_>,
        view: &View<'_>,
        calls: &mut Vec<MechanismCall>,
    ) -> Result<(), ProposeError> {
        let n = view.n;
        let Some(client) = self.llm.as_mut() else {
            return Ok(());
        };
        for slot in self.slots.iter_mut().filter(|s| s.active) {
            let Some((system, user)) = slot.mech.ask(view) else {
                continue;
            };
            let name = slot.mech.name().to_string();
            let reply = match client.complete(ctx, &system, &user) {
                Ok(text) => Ok(text),
                Err(ProposeError::Invalid(why)) => Err(format!("the LLM call failed: {why}")),
                Err(stop) => {
                    Outer::record(
                        calls,
                        n,
                        &name,
                        Hook::Ask,
                        Effect::Ignored,
                        stop.to_string(),
                    );
                    return Err(stop);
                }
            };
            let (effect, detail) = match slot
                .mech
                .answer(reply.as_deref().map_err(String::as_str), view)
            {
                Ok(d) => (Effect::Changed, d),
                Err(d) => (Effect::Ignored, d),
            };
            self.events.push((n, format!("{name}: {detail}")));
            Outer::record(calls, n, &name, Hook::Ask, effect, detail);
        }
        Ok(())
    }

    /// Level 2 before a proposal: `[outer] scripts` go through the validation ladder and onto
    /// probation at the first proposal of the session (when the knobs are known); mechanism
    /// research, when due, is paid by this experiment from the run's budget.
    fn level2_before_proposal(
        &mut self,
        ctx: &ProposeContext<'_>,
        view: &View<'_>,
        calls: &mut Vec<MechanismCall>,
    ) -> Result<(), ProposeError> {
        if !self.level2.loaded {
            self.level2.loaded = true;
            for path in self.level2.scripts.clone() {
                self.load_script(&path, view, calls);
            }
        }
        if self.research_due(view.n) {
            if let Some(mut client) = self.llm.take() {
                let done = self.research(&mut client, ctx, view, calls);
                self.llm = Some(client);
                done?;
            }
        }
        Ok(())
    }

    /// The active mechanisms' guidance, merged (`before_propose`), with their knob candidates
    /// when the knobs optimizer proposes; and how many candidates each suggested.
    fn guidance(
        &mut self,
        view: &View<'_>,
        calls: &mut Vec<MechanismCall>,
    ) -> (Guidance, Vec<(String, usize)>) {
        let n = view.n;
        let mut guidance = Guidance::default();
        for slot in self.slots.iter_mut().filter(|s| s.active) {
            let name = slot.mech.name().to_string();
            let mut g = slot.mech.before_propose(view);
            let effect = if g.is_empty() {
                Effect::None
            } else {
                Effect::Guided
            };
            Outer::record(calls, n, &name, Hook::BeforePropose, effect, g.summary());
            stop_if_faulty(slot, calls, &mut self.events, n, Hook::BeforePropose);
            g.text = g.text.into_iter().map(|t| format!("{name}: {t}")).collect();
            guidance.merge(g);
        }
        let mut suggested: Vec<(String, usize)> = Vec::new();
        if self.knobs_proposer {
            for slot in self.slots.iter_mut().filter(|s| s.active) {
                let name = slot.mech.name().to_string();
                let cands = slot.mech.candidates(view);
                stop_if_faulty(slot, calls, &mut self.events, n, Hook::Candidates);
                suggested.push((name.clone(), cands.len()));
                guidance
                    .candidates
                    .extend(cands.into_iter().map(|c| (name.clone(), c)));
            }
        }
        (guidance, suggested)
    }

    /// Asks the proposer under `guidance`; a knobs proposal goes through the filters and, when
    /// one rejects or modifies it, is proposed again (at most [`MAX_RESAMPLES`] times).
    fn propose_filtered(
        &mut self,
        proposer: &mut dyn Proposer,
        ctx: &ProposeContext<'_>,
        history: &[ExperimentRecord],
        view: &View<'_>,
        mut guidance: Guidance,
        calls: &mut Vec<MechanismCall>,
    ) -> Result<Proposal, ProposeError> {
        let n = ctx.n;
        let cheap = proposer.resamples();
        let mut attempts = 0;
        let mut relaxed = false;
        loop {
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
                Err(e) => return Err(e),
            };
            if !cheap {
                return Ok(proposal);
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
                calls,
                &mut self.events,
                n,
                &cand,
                view,
                true,
            );
            let (name, verdict) = match verdict {
                None | Some((_, Verdict::Accept)) => return Ok(proposal),
                Some(v) => v,
            };
            attempts += 1;
            ctx.git
                .reset_worktree(ctx.worktree, ctx.parent_commit)
                .map_err(|e| ProposeError::Fatal(e.to_string()))?;
            resample(&mut guidance, name, verdict, config, attempts)?;
        }
    }

    /// Records each mechanism's candidates (and whether one was proposed) and remembers the
    /// mechanisms that shaped experiment `n` until its outcome.
    fn settle(
        &mut self,
        n: u64,
        suggested: Vec<(String, usize)>,
        result: &Result<Proposal, ProposeError>,
        mut calls: Vec<MechanismCall>,
    ) {
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
        let editable = self.editable.clone();
        let view = self.view(n, history, &knobs, &editable);
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
}

/// A fresh history window: the proposer sees only recent experiments and the best, and the
/// knobs optimizer still never repeats an older configuration. `None` without one.
fn fresh_window(
    history: &[ExperimentRecord],
    view: &View<'_>,
    guidance: &mut Guidance,
) -> Option<Vec<ExperimentRecord>> {
    let from = guidance.history_from?;
    let best_n = view.best().map(|b| b.n);
    let window = history
        .iter()
        .filter(|e| e.n >= from || Some(e.n) == best_n)
        .cloned()
        .collect();
    for e in history.iter().filter(|e| e.n < from) {
        guidance.avoid.extend(View::config_of(e));
    }
    Some(window)
}

/// After a filter rejected or modified the proposal (the `attempts`-th time): excludes its
/// configuration and, for a modification, puts the modified one first; an error when there
/// is nothing to exclude or the attempts are spent.
fn resample(
    guidance: &mut Guidance,
    name: String,
    verdict: Verdict,
    config: Option<Config>,
    attempts: usize,
) -> Result<(), ProposeError> {
    match verdict {
        Verdict::Reject(reason) => {
            let Some(c) = config else {
                return Err(ProposeError::Rejected(format!(
                    "mechanism `{name}`: {reason}"
                )));
            };
            guidance.avoid.push(c);
            if attempts >= MAX_RESAMPLES {
                return Err(ProposeError::Rejected(format!(
                    "mechanism `{name}`: {reason} (and {} earlier proposals were rejected too)",
                    attempts - 1
                )));
            }
        }
        Verdict::Modify(c, _) => {
            if let Some(old) = config {
                guidance.avoid.push(old);
            }
            guidance.candidates.insert(0, (name, c));
            if attempts >= MAX_RESAMPLES {
                return Err(ProposeError::Rejected(
                    "the mechanisms kept modifying the proposal".into(),
                ));
            }
        }
        Verdict::Accept => {}
    }
    Ok(())
}

/// Whether guidance narrows what the knobs optimizer may propose.
fn restricts(g: &Guidance) -> bool {
    !g.frozen.is_empty() || !g.focus.is_empty() || g.mode.is_some() || !g.candidates.is_empty()
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
