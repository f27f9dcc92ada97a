//! The adapter that makes a sandboxed script a [`Mechanism`]: each hook builds the script's
//! arguments, calls it in the sandbox and checks its answer; the first failure stops the
//! mechanism for good (reported once through [`Mechanism::fault`]).

use rhai::{Array, Dynamic, Map};

use super::super::{Candidate, Guidance, Mechanism, Outcome, Verdict, View};
use super::answers::{to_candidates, to_change, to_guidance, to_verdict};
use super::data::{experiment_map, proposal_map, view_map};
use super::{hash, Limits, Script};
use crate::propose::knobs::Config;

/// A script as a [`Mechanism`]: every hook converts, calls and validates; the first failure
/// stops it for good (reported once through [`Mechanism::fault`]).
pub struct ScriptMechanism {
    name: String,
    script: Script,
    fault: Option<String>,
    dead: bool,
}

impl ScriptMechanism {
    /// A mechanism named `script:<first 8 hex digits of the source's SHA-256>`.
    pub fn new(script: Script, source: &str) -> ScriptMechanism {
        ScriptMechanism {
            name: format!("script:{}", &hash(source)[..8]),
            script,
            fault: None,
            dead: false,
        }
    }

    /// Compiles `source` and wraps it.
    pub fn compile(source: &str, limits: Limits) -> Result<ScriptMechanism, String> {
        Ok(ScriptMechanism::new(
            super::compile(source, limits)?,
            source,
        ))
    }

    /// The hooks the script defines.
    pub fn hooks(&self) -> &[&'static str] {
        self.script.hooks()
    }

    /// Calls `hook` with the arguments `args` builds (only when the script defines it) and
    /// converts its answer; any failure stops the mechanism.
    fn run<T>(
        &mut self,
        hook: &str,
        args: impl FnOnce() -> Vec<Dynamic>,
        convert: impl FnOnce(&Dynamic) -> Result<T, String>,
    ) -> Option<T> {
        if self.dead || !self.script.hooks().contains(&hook) {
            return None;
        }
        match self
            .script
            .call(hook, args())
            .and_then(|v| convert(&v).map_err(|e| format!("`{hook}` returned a bad value: {e}")))
        {
            Ok(t) => Some(t),
            Err(e) => {
                self.dead = true;
                self.fault = Some(format!("`{hook}`: {e}"));
                None
            }
        }
    }

    /// Calls a hook that is given the view and answers a state change (`on_start`,
    /// `on_segment_end`).
    fn run_on_view(&mut self, hook: &str, view: &View<'_>) -> Option<String> {
        self.run(hook, || vec![view_map(view)], |v| to_change(v, hook))
            .flatten()
    }
}

impl Mechanism for ScriptMechanism {
    fn name(&self) -> &str {
        &self.name
    }

    fn fault(&mut self) -> Option<String> {
        self.fault.take()
    }

    fn on_start(&mut self, view: &View<'_>) -> Option<String> {
        self.run_on_view("on_start", view)
    }

    fn before_propose(&mut self, view: &View<'_>) -> Guidance {
        self.run(
            "before_propose",
            || vec![view_map(view)],
            |v| to_guidance(v, view.knobs),
        )
        .unwrap_or_default()
    }

    fn candidates(&mut self, view: &View<'_>) -> Vec<Config> {
        let base = base_config(view);
        self.run(
            "candidates",
            || vec![view_map(view)],
            |v| to_candidates(v, view.knobs, &base),
        )
        .unwrap_or_default()
    }

    fn filter(&mut self, candidate: &Candidate<'_>, view: &View<'_>) -> Verdict {
        let base = candidate
            .config
            .cloned()
            .unwrap_or_else(|| base_config(view));
        self.run(
            "filter",
            || vec![proposal_map(candidate), view_map(view)],
            |v| to_verdict(v, view.knobs, &base),
        )
        .unwrap_or(Verdict::Accept)
    }

    fn on_result(&mut self, outcome: &Outcome<'_>) -> Option<String> {
        self.run(
            "on_result",
            || {
                // The outcome as the view's history shows it (with its delta): the last entry.
                let view = view_map(&outcome.view);
                let record = view
                    .clone()
                    .try_cast::<Map>()
                    .and_then(|m| m.get("history").cloned())
                    .and_then(|h| h.try_cast::<Array>())
                    .and_then(|h| h.last().cloned())
                    .unwrap_or_else(|| experiment_map(outcome.record, None));
                vec![record, view]
            },
            |v| to_change(v, "on_result"),
        )
        .flatten()
    }

    fn on_segment_end(&mut self, view: &View<'_>) -> Option<String> {
        self.run_on_view("on_segment_end", view)
    }
}

/// The configuration candidates are completed from: the best experiment's, else the knobs'
/// current values.
fn base_config(view: &View<'_>) -> Config {
    view.best()
        .and_then(View::config_of)
        .unwrap_or_else(|| crate::propose::knobs::config_of(view.knobs))
}
