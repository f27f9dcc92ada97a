//! The checks a script passes before it may run in a session: contract tests on synthetic
//! histories (shapes, caps, determinism given the seed) and a replay over the run's recorded
//! history (what its filter would have rejected or changed).

use super::super::{Candidate, Mechanism, Outcome, Verdict, View};
use super::{Limits, ScriptMechanism};
use crate::propose::knobs::Knob;
use crate::spec::Direction;
use crate::store::ExperimentRecord;

/// What [`contract`] found: the hooks exercised and the operations they were allowed.
#[derive(Clone, Debug, PartialEq)]
pub struct ContractReport {
    pub calls: usize,
}

/// Contract tests on synthetic histories: every defined hook returns the right shape on a
/// few made-up runs (empty, improving, stuck), within the sandbox's caps, and the same
/// answers twice from a fresh state given the same seed (determinism).
pub fn contract(source: &str, limits: Limits, knobs: &[Knob]) -> Result<ContractReport, String> {
    let histories = synthetic_histories(knobs);
    let pass = |seed: u64| -> Result<(Vec<String>, usize), String> {
        let mut m = ScriptMechanism::compile(source, limits)?;
        let mut answers = Vec::new();
        let mut calls = 0;
        for h in &histories {
            let view = View {
                n: h.last().map_or(0, |e| e.n + 1),
                history: h,
                knobs,
                knobs_proposer: !knobs.is_empty(),
                direction: Direction::Minimize,
                seed,
                editable: &[],
            };
            answers.push(format!("{:?}", m.on_start(&view)));
            answers.push(format!("{:?}", m.before_propose(&view)));
            answers.push(format!("{:?}", m.candidates(&view)));
            let config = h.last().and_then(View::config_of);
            let cand = Candidate {
                description: "a synthetic proposal",
                config: config.as_ref(),
                diff: Some("--- a/x\n+++ b/x\n"),
            };
            answers.push(format!("{:?}", m.filter(&cand, &view)));
            if let Some(last) = h.last() {
                let outcome = Outcome { record: last, view };
                answers.push(format!("{:?}", m.on_result(&outcome)));
            }
            answers.push(format!("{:?}", m.on_segment_end(&view)));
            calls += m.hooks().len();
            if let Some(f) = m.fault() {
                return Err(f);
            }
        }
        Ok((answers, calls))
    };
    let (first, calls) = pass(7)?;
    let (second, _) = pass(7)?;
    if first != second {
        let i = first
            .iter()
            .zip(&second)
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        return Err(format!(
            "not deterministic given the seed: two runs answered `{}` and then `{}`",
            crate::propose::prompt::sanitize(&first[i], 200),
            crate::propose::prompt::sanitize(&second[i], 200)
        ));
    }
    Ok(ContractReport { calls })
}

/// Made-up runs over `knobs`: just the baseline, a run that improves, a run that is stuck.
fn synthetic_histories(knobs: &[Knob]) -> Vec<Vec<ExperimentRecord>> {
    use crate::store::Status;
    let base = crate::propose::knobs::config_of(knobs);
    let exp = |n: u64, status: Status, m: f64| ExperimentRecord {
        n,
        status: Some(status),
        objective: Some(m),
        description: format!("synthetic experiment {n}"),
        config: serde_json::to_value(&base).ok(),
        ..Default::default()
    };
    let baseline = vec![exp(0, Status::Baseline, 1.0)];
    let improving: Vec<ExperimentRecord> = std::iter::once(exp(0, Status::Baseline, 1.0))
        .chain((1..8).map(|n| exp(n, Status::Keep, 1.0 - n as f64 * 0.05)))
        .collect();
    let stuck: Vec<ExperimentRecord> = std::iter::once(exp(0, Status::Baseline, 1.0))
        .chain((1..15).map(|n| {
            exp(
                n,
                if n % 5 == 0 {
                    Status::Crash
                } else {
                    Status::Discard
                },
                1.0 + n as f64 * 0.01,
            )
        }))
        .collect();
    vec![baseline, improving, stuck]
}

/// What a replay on a run's recorded history found: of the past proposals, how many the
/// script's filter would have rejected or changed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Replay {
    pub proposals: usize,
    pub rejected: usize,
    pub modified: usize,
    pub guided: usize,
}

/// Replays the script over `run`'s history: for every experiment after the baseline, `filter`
/// and `before_propose` see the run as it was just before it (with `run`'s knobs, direction and
/// seed, and no editable files).
pub fn replay(source: &str, limits: Limits, run: &View<'_>) -> Result<Replay, String> {
    let (history, knobs) = (run.history, run.knobs);
    let mut m = ScriptMechanism::compile(source, limits)?;
    let mut r = Replay::default();
    let editable: Vec<String> = Vec::new();
    for i in 1..history.len() {
        let e = &history[i];
        let view = View {
            n: e.n,
            history: &history[..i],
            knobs,
            knobs_proposer: !knobs.is_empty(),
            direction: run.direction,
            seed: run.seed,
            editable: &editable,
        };
        if !m.before_propose(&view).is_empty() {
            r.guided += 1;
        }
        let config = View::config_of(e);
        let cand = Candidate {
            description: &e.description,
            config: config.as_ref(),
            diff: None,
        };
        r.proposals += 1;
        match m.filter(&cand, &view) {
            Verdict::Reject(_) => r.rejected += 1,
            Verdict::Modify(..) => r.modified += 1,
            Verdict::Accept => {}
        }
        if let Some(f) = m.fault() {
            return Err(format!("replay at experiment #{}: {f}", e.n));
        }
    }
    Ok(r)
}
