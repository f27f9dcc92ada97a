//! Level 2 in the host: mechanism research every `[outer] research_every` experiments (the
//! rounds, one repair round-trip, storing the script), loading `[outer] scripts`, the
//! validation ladder, activation on probation and the end of probation.

use super::record::{changed, stop_if_faulty};
use super::{Outer, Slot};
use crate::meta::{research, View};
use crate::propose::chat::ChatProposer;
use crate::propose::{ProposeContext, ProposeError};
use crate::store::{Effect, ExperimentRecord, Hook, MechanismCall};

impl Outer {
    /// Research is due every `research_every` experiments, when no script is on probation.
    pub(super) fn research_due(&self, n: u64) -> bool {
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
    pub(super) fn research(
        &mut self,
        client: &mut ChatProposer,
        ctx: &ProposeContext<'_>,
        view: &View<'_>,
        calls: &mut Vec<MechanismCall>,
    ) -> Result<(), ProposeError> {
        let n = view.n;
        let Some(mut rounds) = self.research_rounds(client, ctx, view, calls)? else {
            return Ok(());
        };
        let Some(source) = rounds.source.clone() else {
            let detail = "the generate round gave no code block: nothing to validate".into();
            self.research_step(calls, n, "research", Effect::Failed, detail);
            return Ok(());
        };
        let Some(source) =
            self.compile_or_repair(client, ctx, n, source, &mut rounds.texts, calls)?
        else {
            return Ok(());
        };
        rounds.source = Some(source.clone());
        self.store_script(n, &source, &rounds.texts, calls);
        self.validate_and_activate(&source, view, calls);
        Ok(())
    }

    /// The four research rounds, shown the active mechanisms' statistics, each on record.
    /// `None` when a round failed without stopping the experiment.
    fn research_rounds(
        &mut self,
        client: &mut ChatProposer,
        ctx: &ProposeContext<'_>,
        view: &View<'_>,
        calls: &mut Vec<MechanismCall>,
    ) -> Result<Option<research::Rounds>, ProposeError> {
        let n = view.n;
        let mut all = self.level2.history.clone();
        all.extend(self.calls.iter().cloned());
        all.extend(calls.iter().cloned());
        let active_names = self.active();
        let stats: Vec<_> = crate::meta::stats::compute(&all, ctx.history, self.level2.probation)
            .into_iter()
            .filter(|s| active_names.contains(&s.name))
            .collect();
        let input = research::Input {
            history: ctx.history,
            knobs: view.knobs,
            direction: view.direction,
            active: &stats,
        };
        let mut ask = |system: &str, user: &str| client.complete(ctx, system, user);
        let rounds = match research::rounds(&input, &mut ask) {
            Ok(r) => r,
            Err((r, e)) => {
                let detail = format!("round {} failed: {e}", r.texts.len() + 1);
                self.research_step(calls, n, "research", Effect::Failed, detail);
                return match e {
                    ProposeError::Invalid(_) => Ok(None),
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
        Ok(Some(rounds))
    }

    /// Compiles the generated script, with one repair round-trip quoting the error (its
    /// answer joins `texts`). `None` when the script is dropped.
    fn compile_or_repair(
        &mut self,
        client: &mut ChatProposer,
        ctx: &ProposeContext<'_>,
        n: u64,
        source: String,
        texts: &mut Vec<String>,
        calls: &mut Vec<MechanismCall>,
    ) -> Result<Option<String>, ProposeError> {
        let Err(error) = crate::meta::script::compile(&source, self.level2.limits) else {
            return Ok(Some(source));
        };
        let name = script_name(&source);
        let mut fail = |this: &mut Outer, detail: String| {
            this.research_step(calls, n, &name, Effect::Failed, detail);
        };
        // Too long to compile: not quoted back (that would cost as much again), dropped.
        if source.len() > crate::sandbox::script::MAX_SOURCE_BYTES {
            fail(self, format!("compile: {error}; dropped"));
            return Ok(None);
        }
        fail(self, format!("compile: {error}; asking for one repair"));
        let (system, user) = research::repair_prompt(&source, &error);
        let fixed = match client.complete(ctx, &system, &user) {
            Ok(text) => text,
            Err(ProposeError::Invalid(why)) => {
                fail(self, format!("repair round failed: {why}; dropped"));
                return Ok(None);
            }
            Err(stop) => return Err(stop),
        };
        texts.push(fixed.clone());
        let Some(source) = research::code_block(&fixed) else {
            fail(self, "repair round gave no code block; dropped".into());
            return Ok(None);
        };
        if let Err(error) = crate::meta::script::compile(&source, self.level2.limits) {
            let name = script_name(&source);
            let detail = format!("compile after repair: {error}; dropped");
            self.research_step(calls, n, &name, Effect::Failed, detail);
            return Ok(None);
        }
        Ok(Some(source))
    }

    /// Stores a generated script under `.hone/mechanisms` with its provenance (the run, the
    /// experiment, the model and the rounds), on record.
    fn store_script(
        &mut self,
        n: u64,
        source: &str,
        texts: &[String],
        calls: &mut Vec<MechanismCall>,
    ) {
        let stored = self.level2.root.as_ref().map(|root| {
            let provenance = serde_json::json!({
                "run": self.level2.tag,
                "experiment": n,
                "model": self.level2.model,
                "rounds": texts,
            });
            research::store(&root.join(".hone/mechanisms"), source, &provenance)
        });
        let name = script_name(source);
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
    }

    /// Loads one `[outer] scripts` path and runs the ladder on it.
    pub(super) fn load_script(
        &mut self,
        path: &str,
        view: &View<'_>,
        calls: &mut Vec<MechanismCall>,
    ) {
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
        let l = research::ladder(source, self.level2.limits, view);
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
    pub(super) fn end_probations(
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
            let (effect, detail) = match research::verdict(history, since, p, effects) {
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
    format!("script:{}", &crate::meta::script::hash(source)[..8])
}

fn display_path(path: &std::path::Path, root: Option<&std::path::Path>) -> String {
    root.and_then(|r| path.strip_prefix(r).ok())
        .unwrap_or(path)
        .display()
        .to_string()
}
