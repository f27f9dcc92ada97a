//! Level 2 mechanism research: four LLM rounds (explore hypotheses from adjacent fields,
//! critique and select, specify the hooks, generate a Rhai script), then the validation ladder
//! (compile with one repair round, contract tests on synthetic histories, a replay on the
//! run's history), activation on probation, and the keep-or-revert decision after it.
//!
//! The rounds go through the run's LLM client and budget (the caller passes the call); this
//! module builds the prompts from the real trace, the mechanism interface
//! ([`super::script::INTERFACE`]) and the active mechanisms' statistics, and stores what
//! survives compilation under `.hone/mechanisms/<sha256>.rhai` with a JSON sidecar of its
//! provenance.

use std::path::{Path, PathBuf};

use super::script::{self, Limits, ScriptMechanism};
use super::stats::MechanismStats;
use super::View;
use crate::propose::knobs::Knob;
use crate::propose::ProposeError;
use crate::spec::Direction;
use crate::store::{ExperimentRecord, Status};

const SYSTEM: &str = "You are a research scientist who designs search mechanisms for an automated \
experiment loop: an inner loop proposes changes to a project, a verifier measures each one, and the \
change is kept only if the metric improved. Mechanisms change how the inner loop searches. Be \
concrete and brief.";

/// The four rounds' instructions, in order.
const ROUNDS: [&str; 4] = [
    "Round 1 of 4: explore. Study the trace and the active mechanisms' statistics below. Propose \
three hypotheses, each borrowed from an adjacent field (optimisation, statistics, control, \
evolutionary search, active learning), about a mechanism that would make this search improve \
faster. One short paragraph each.",
    "Round 2 of 4: critique and select. Criticise the hypotheses below against the trace (what \
would each change, could it hurt, is it already done by an active mechanism) and select one.",
    "Round 3 of 4: specify. For the selected hypothesis, say exactly which hooks of the interface \
it implements, what each returns in which situation, and what state it keeps in `this`.",
    "Round 4 of 4: generate. Write the mechanism as a Rhai script implementing the specified \
hooks and nothing else. Use only the data and functions the interface documents; keep every hook \
cheap and deterministic given `view.seed`. Answer with one ```rhai code block.",
];

/// What the rounds saw and said, and the script they produced.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Rounds {
    /// Each round's answer, in order (a repair round's answer last).
    pub texts: Vec<String>,
    pub source: Option<String>,
}

/// What feeds the rounds' prompts.
pub struct Input<'a> {
    pub history: &'a [ExperimentRecord],
    pub knobs: &'a [Knob],
    pub direction: Direction,
    pub active: &'a [MechanismStats],
}

/// The run's trace as the rounds see it: one row per experiment (the last 40).
pub fn trace(history: &[ExperimentRecord], direction: Direction) -> String {
    let mut out = format!(
        "## Trace ({} experiments, metric to {})\n\n| n | status | metric | delta vs best | config | description |\n|---|---|---|---|---|---|\n",
        history.len(),
        match direction {
            Direction::Minimize => "minimize",
            Direction::Maximize => "maximize",
        }
    );
    let rows = script::history_array(history, direction);
    let start = rows.len().saturating_sub(40);
    for (e, row) in history.iter().zip(&rows).skip(start) {
        let delta = row
            .clone()
            .try_cast::<rhai::Map>()
            .and_then(|m| m.get("delta").and_then(|d| d.as_float().ok()))
            .map_or("-".to_string(), |d| format!("{d:+.4}"));
        let config = e.config.as_ref().map_or("-".to_string(), |c| c.to_string());
        out.push_str(&format!(
            "| {} | {} | {} | {delta} | {} | {} |\n",
            e.n,
            e.status().as_str(),
            e.objective.map_or("-".to_string(), crate::util::fmt_value),
            crate::propose::prompt::sanitize(&config, 200),
            crate::propose::prompt::sanitize(&e.description, 120).replace(['\n', '|'], " "),
        ));
    }
    out
}

fn context(input: &Input<'_>) -> String {
    let mut out = trace(input.history, input.direction);
    if !input.knobs.is_empty() {
        out.push_str("\n## Knobs\n\n");
        for k in input.knobs {
            out.push_str(&format!("- {} = {} ({:?})\n", k.name, k.value, k.domain));
        }
    }
    out.push_str("\n## Active mechanisms and what they did\n\n");
    if input.active.is_empty() {
        out.push_str("(none)\n");
    }
    for s in input.active {
        out.push_str(&format!(
            "- {}: {} experiments, guided {}, suggested {}, rejected {}, modified {}, changed {}, keeps after its guidance {}{}\n",
            s.name, s.experiments, s.guided, s.suggested, s.rejected, s.modified, s.changed,
            s.keeps_after_guidance, if s.inert { " (inert)" } else { "" }
        ));
    }
    out.push_str(&format!(
        "\n## The mechanism interface\n\n{}\n",
        script::INTERFACE
    ));
    out
}

/// Runs the four rounds through `ask` (system, user) -> answer. A budget stop or a fatal error
/// from `ask` ends the research and is returned; any other failed call is an `Err` message
/// with the rounds so far.
pub fn rounds(
    input: &Input<'_>,
    ask: &mut dyn FnMut(&str, &str) -> Result<String, ProposeError>,
) -> Result<Rounds, (Rounds, ProposeError)> {
    let ctx = context(input);
    let mut r = Rounds::default();
    for (i, instruction) in ROUNDS.iter().enumerate() {
        let mut user = format!("{instruction}\n\n{ctx}");
        for (j, prev) in r.texts.iter().enumerate() {
            user.push_str(&format!(
                "\n## Your answer in round {}\n\n{}\n",
                j + 1,
                crate::propose::prompt::sanitize(prev, 6000)
            ));
        }
        match ask(SYSTEM, &user) {
            Ok(text) => r.texts.push(text),
            Err(e) => return Err((r, e)),
        }
        if i == ROUNDS.len() - 1 {
            r.source = r.texts.last().and_then(|t| code_block(t));
        }
    }
    Ok(r)
}

/// The repair round: the script and its compile error, asking for a corrected script.
pub fn repair_prompt(source: &str, error: &str) -> (String, String) {
    (
        SYSTEM.to_string(),
        format!(
            "This Rhai mechanism does not compile:\n\n```rhai\n{source}\n```\n\nThe error: {error}\n\n\
             Fix it. Answer with one ```rhai code block.\n\n## The mechanism interface\n\n{}\n",
            script::INTERFACE
        ),
    )
}

/// The first fenced code block of an answer (```rhai, ``` or ```rust).
pub fn code_block(text: &str) -> Option<String> {
    let start = text.find("```")?;
    let rest = &text[start + 3..];
    let body_start = rest.find('\n')? + 1;
    let body = &rest[body_start..];
    let end = body.find("```")?;
    let code = body[..end].trim_end().to_string();
    (!code.trim().is_empty()).then_some(code)
}

/// One step of the validation ladder, for the record.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub passed: bool,
    pub detail: String,
}

/// Where a script stands after the ladder.
pub struct Laddered {
    pub steps: Vec<Step>,
    /// The mechanism to activate, when every step passed.
    pub mechanism: Option<ScriptMechanism>,
}

/// Compilation, contract tests on `run`'s knobs and a replay on its history.
pub fn ladder(source: &str, limits: Limits, run: &View<'_>) -> Laddered {
    let mut steps = Vec::new();
    let mut climb = || {
        let mechanism = rung(
            &mut steps,
            "compile",
            ScriptMechanism::compile(source, limits),
            |m| format!("ok (hooks {})", m.hooks().join(", ")),
        )?;
        rung(
            &mut steps,
            "contract",
            script::contract(source, limits, run.knobs),
            |r| {
                format!(
                "ok ({} hook calls on 3 synthetic histories, the same answers twice given the seed)",
                r.calls
            )
            },
        )?;
        rung(
            &mut steps,
            "replay",
            script::replay(source, limits, run),
            |r| {
                format!(
                    "of {} past proposals it would have rejected {} and modified {} (guidance for {})",
                    r.proposals, r.rejected, r.modified, r.guided
                )
            },
        )?;
        Some(mechanism)
    };
    let mechanism = climb();
    Laddered { steps, mechanism }
}

/// Records one step of the ladder, `name: <what passed>` or `name: <error>`; its value when
/// it passed.
fn rung<T>(
    steps: &mut Vec<Step>,
    name: &str,
    result: Result<T, String>,
    passed: impl FnOnce(&T) -> String,
) -> Option<T> {
    let (step, value) = match result {
        Ok(v) => (
            Step {
                passed: true,
                detail: format!("{name}: {}", passed(&v)),
            },
            Some(v),
        ),
        Err(e) => (
            Step {
                passed: false,
                detail: format!("{name}: {e}"),
            },
            None,
        ),
    };
    steps.push(step);
    value
}

/// Where a script and its provenance are written.
pub fn store(dir: &Path, source: &str, provenance: &serde_json::Value) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let hash = script::hash(source);
    let path = dir.join(format!("{hash}.rhai"));
    std::fs::write(&path, source)?;
    let json = serde_json::to_string_pretty(provenance).unwrap_or_default();
    std::fs::write(dir.join(format!("{hash}.json")), json)?;
    Ok(path)
}

/// Keeps per experiment over `history`'s experiments numbered in `from..to`.
fn keep_rate(history: &[ExperimentRecord], from: u64, to: u64) -> Option<f64> {
    let window: Vec<&ExperimentRecord> = history
        .iter()
        .filter(|e| e.n >= from && e.n < to && e.status() != Status::Baseline)
        .collect();
    if window.is_empty() {
        return None;
    }
    let keeps = window.iter().filter(|e| e.status() == Status::Keep).count();
    Some(keeps as f64 / window.len() as f64)
}

/// The decision after a probation window of `probation` experiments that began at
/// `activated_at`: `Ok(why it stays)` or `Err(why it is reverted)`. A mechanism with no effect
/// over the window is reverted as inert; otherwise it stays unless the keep rate fell against
/// the window before.
pub fn verdict(
    history: &[ExperimentRecord],
    activated_at: u64,
    probation: u64,
    effects: u64,
) -> Result<String, String> {
    let after = keep_rate(history, activated_at, activated_at + probation).unwrap_or(0.0);
    let before = keep_rate(
        history,
        activated_at.saturating_sub(probation),
        activated_at,
    );
    if effects == 0 {
        return Err(format!(
            "inert: no effect over its probation of {probation} experiments"
        ));
    }
    match before {
        Some(b) if after < b => Err(format!(
            "the keep rate fell over its probation: {after:.2} per experiment against {b:.2} in the {probation} before"
        )),
        Some(b) => Ok(format!(
            "kept after probation: keep rate {after:.2} per experiment against {b:.2} before ({effects} effects)"
        )),
        None => Ok(format!(
            "kept after probation: keep rate {after:.2} per experiment ({effects} effects)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::exp;
    use super::*;

    #[test]
    fn the_code_block_is_extracted() {
        assert_eq!(
            code_block("Here:\n```rhai\nfn on_start(v) { () }\n```\nDone."),
            Some("fn on_start(v) { () }".into())
        );
        assert_eq!(code_block("no code"), None);
    }

    #[test]
    fn probation_keeps_a_mechanism_that_held_the_rate_and_reverts_inert_or_worse_ones() {
        let h: Vec<ExperimentRecord> = (0..9)
            .map(|n| {
                let s = match n {
                    0 => Status::Baseline,
                    2 | 5 | 7 => Status::Keep,
                    _ => Status::Discard,
                };
                exp(n, s, Some(1.0), None)
            })
            .collect();
        // Before #5: 1..5 had one keep in 4; from #5: 5..9 had two in 4.
        assert!(verdict(&h, 5, 4, 3).is_ok());
        let e = verdict(&h, 5, 4, 0).unwrap_err();
        assert!(e.starts_with("inert"), "{e}");
        // From #3: 3..6 had one keep in 3 against 1..3's one in 2.
        let e = verdict(&h, 3, 2, 1).unwrap_err();
        assert!(e.contains("fell"), "{e}");
    }

    #[test]
    fn the_rounds_see_the_trace_the_interface_and_the_earlier_answers() {
        let h = vec![
            exp(0, Status::Baseline, Some(1.0), None),
            exp(1, Status::Discard, Some(1.5), None),
        ];
        let input = Input {
            history: &h,
            knobs: &[],
            direction: Direction::Minimize,
            active: &[],
        };
        let mut seen = Vec::new();
        let r = rounds(&input, &mut |_, user| {
            seen.push(user.to_string());
            Ok(format!(
                "answer {}\n```rhai\nfn on_start(v) {{ () }}\n```",
                seen.len()
            ))
        })
        .unwrap();
        assert_eq!(seen.len(), 4);
        assert!(
            seen[0].contains("| 1 | discard | 1.500000 | +0.5000 |"),
            "{}",
            seen[0]
        );
        assert!(seen[0].contains("fn filter(proposal, view)"));
        assert!(seen[3].contains("Your answer in round 3\n\nanswer 3"));
        assert_eq!(r.source.as_deref(), Some("fn on_start(v) { () }"));
    }
}
