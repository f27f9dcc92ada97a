//! `hone show N`: one experiment in full (its decision, time, spend, diff and log tail), its
//! learning curve, and where the knobs' explored ranges were narrowed.

use hone::report::fmt_metric;
use hone::spec::format_duration;
use hone::store::{ExperimentRecord, RunRecord};
use hone::workspace::Git;

use super::one_line;

/// `hone show N`.
pub fn show(git: &Git, run: &RunRecord, e: &ExperimentRecord, tail: usize) {
    out!("experiment {} of run {}: {}", e.n, run.tag, e.status());
    out!(
        "  description: {}",
        if e.description.is_empty() {
            "-".into()
        } else {
            one_line(&e.description)
        }
    );
    if !e.reason.is_empty() {
        out!("  why: {}", one_line(&e.reason));
    }
    if let Some(used) = fixed_use(git, run, e) {
        out!(
            "  warning: it {used}; it does not assign it, but check that it keeps the measurement"
        );
    }
    out!("  {}: {}", run.metric, fmt_metric(e.objective));
    if let Some(h) = e.holdout {
        out!("  holdout (sealed): {}", fmt_metric(Some(h)));
    }
    let others: Vec<String> = e
        .metrics
        .iter()
        .filter(|(k, _)| **k != run.metric)
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if !others.is_empty() {
        out!("  other metrics: {}", others.join(" "));
    }
    if e.runs.len() > 1 {
        let runs: Vec<String> = e.runs.iter().map(|v| fmt_metric(Some(*v))).collect();
        out!(
            "  runs: {} (mean {})",
            runs.join(", "),
            fmt_metric(e.objective)
        );
    }
    show_decision(e);
    if let Some(c) = &e.config {
        out!("  configuration: {c}");
    }
    out!(
        "  time: total {}, propose {}, verify {}",
        format_duration(std::time::Duration::from_millis(e.total_ms)),
        format_duration(std::time::Duration::from_millis(e.propose_ms)),
        format_duration(std::time::Duration::from_millis(e.verify_ms))
    );
    let (agent_log, agent_text) = agent_log(git, run, e.n);
    let http = hone::spec::AgentKind::parse(&run.agent).is_some_and(|k| k.is_http());
    show_spend(e, &agent_text, http);
    show_answer(run, &agent_text);
    out!(
        "  parent {}  candidate {}",
        e.parent_commit,
        e.candidate_commit.as_deref().unwrap_or("-")
    );
    if e.candidate_commit.is_some() {
        out!("  archive ref: refs/hone/{}/{}", run.tag, e.n);
    }
    show_agent_files(git, run, e.n);
    show_diff_and_log(git, e, tail);
    // No candidate and no verifier: what the agent said is the whole story (a model's answer
    // hone could not use, a tool's error).
    if e.candidate_commit.is_none() && e.log_path.is_none() && !agent_text.is_empty() {
        out!("--- agent's log tail ({}) ---", agent_log.display());
        hone::util::last_lines(&agent_text, tail)
            .iter()
            .for_each(|l| out!("{l}"));
    }
}

/// The verdict on `e`'s measurements: kept or not, by how much against what threshold.
fn show_decision(e: &ExperimentRecord) {
    if let Some(j) = &e.judgement {
        out!(
            "  decision: {} (delta {} vs threshold {}; sigma {}; {} run{} of this code; best was {})",
            match (j.simplification, j.keep, e.status().as_str()) {
                (true, _, _) => "keep as a simplification".to_string(),
                (false, true, "keep") => "keep".to_string(),
                // Judged better, then another check had the last word (a merge onto a moved
                // best, the holdout, the reviewer): the status and `why` say which.
                (false, true, status) => format!("better than the best, then {status} (see why)"),
                (false, false, _) => "discard".to_string(),
            },
            hone::util::fmt_signed(j.delta),
            hone::util::fmt_value(j.threshold),
            j.sigma.map_or_else(|| "unknown".into(), hone::util::fmt_value),
            j.runs.len(),
            if j.runs.len() == 1 { "" } else { "s" },
            fmt_metric(Some(j.best))
        );
    }
}

/// The warning the run gave when it made `e`: a changed line that uses a `[loop] fixed`
/// constant without assigning it (the run's own `fixed`, as stored when it started).
fn fixed_use(git: &Git, run: &RunRecord, e: &ExperimentRecord) -> Option<String> {
    let spec: serde_json::Value = serde_json::from_str(&run.spec_json).ok()?;
    let fixed: Vec<String> = spec["loop"]["fixed"]
        .as_array()?
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    let commit = e.candidate_commit.as_deref()?;
    hone::engine::fixed_use_of(git, &fixed, &e.parent_commit, commit)
}

/// An agent CLI's final answer, read from its log as the run read it (the tool's own
/// account): what it says it did, at most 20 lines, as literal text.
fn show_answer(run: &RunRecord, agent_text: &str) {
    let spec: serde_json::Value = serde_json::from_str(&run.spec_json).unwrap_or_default();
    let Some(preset) = spec["agent"]["kind"]
        .as_str()
        .and_then(hone::propose::command::Preset::named)
    else {
        return;
    };
    let lines: Vec<String> = agent_text.lines().map(str::to_string).collect();
    if preset.doubtful_account(&lines).is_some() {
        return;
    }
    let Some(answer) = preset.parse(&lines).and_then(|r| r.result) else {
        return;
    };
    let answer = hone::propose::prompt::sanitize(&answer, 4000);
    let shown: Vec<&str> = answer.lines().filter(|l| !l.trim().is_empty()).collect();
    if shown.is_empty() {
        return;
    }
    out!("  agent's answer:");
    for l in shown.iter().take(20) {
        out!("    {l}");
    }
    if shown.len() > 20 {
        out!(
            "    ... ({} more lines in the agent's log)",
            shown.len() - 20
        );
    }
}

/// Experiment `n`'s agent log: its path, and its text (empty when there is none).
fn agent_log(git: &Git, run: &RunRecord, n: u64) -> (std::path::PathBuf, String) {
    let path = hone::engine::StatePaths::new(git.root())
        .run_dir(&run.tag)
        .join("logs")
        .join(format!("{n}.agent.log"));
    let text = std::fs::read(&path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    (path, text)
}

/// What the experiment's proposer spent, saying when part of it is an estimate: the worst
/// case charged for a call the server reported no usage for, or that ended without an answer
/// (the agent's log, `agent_text`, says which).
/// What `e` spent, and which of it is an estimate, as hone's own lines in the agent's log say
/// (`http`: a model over HTTP, whose answers hone writes there escaped; an agent CLI's log is
/// its tool's output, where only hone's note at the very end is hone's).
fn show_spend(e: &ExperimentRecord, agent_text: &str, http: bool) {
    if e.cost_usd <= 0.0 && e.tokens == 0 {
        return;
    }
    // hone's own count per call (`--- this call: 2 attempt(s) charged at the worst case ---`).
    let estimated: u64 = agent_text
        .lines()
        .filter(|_| http)
        .filter_map(|l| l.strip_prefix("--- this call: ")?.split_once(' '))
        .filter_map(|(k, _)| k.parse::<u64>().ok())
        .sum();
    out!(
        "  spent: ${:.4}, {} tokens{}",
        e.cost_usd,
        e.tokens,
        match estimated {
            0 => String::new(),
            k => format!(
                " (with the worst case of {k} attempt{} whose use the server did not report: an estimate, see the agent's log)",
                if k == 1 { "" } else { "s" }
            ),
        }
    );
    // An agent CLI's turn charged by an estimate: hone's note, the last line of its log (a
    // line like it that the tool printed earlier is the tool's).
    let last = agent_text.lines().rev().find(|l| !l.trim().is_empty());
    if let Some(note) = last
        .filter(|_| !http)
        .and_then(|l| l.strip_prefix("--- hone: ")?.strip_suffix(" ---"))
        .filter(|n| n.contains("charged"))
    {
        out!("  estimated: {note}");
    }
}

/// Where what an agent was asked for experiment `n`, and what it said, are kept (a turn that
/// failed says why there), when they are.
fn show_agent_files(git: &Git, run: &RunRecord, n: u64) {
    let run_dir = hone::engine::StatePaths::new(git.root()).run_dir(&run.tag);
    for (what, path) in [
        (
            "agent's prompt",
            run_dir.join("prompts").join(format!("{n}.md")),
        ),
        (
            "agent's log",
            run_dir.join("logs").join(format!("{n}.agent.log")),
        ),
    ] {
        if path.is_file() {
            out!("  {what}: {}", path.display());
        }
    }
}

/// `hone show N`'s diff from the parent and the last `tail` lines of the verifier's log.
fn show_diff_and_log(git: &Git, e: &ExperimentRecord, tail: usize) {
    if let Some(c) = &e.candidate_commit {
        if *c != e.parent_commit {
            match git.diff(&e.parent_commit, c) {
                Ok(d) if !d.is_empty() => out!("\n{d}"),
                Ok(_) => {}
                Err(err) => out!("  (diff unavailable: {err})"),
            }
        }
    }
    if let Some(p) = &e.log_path {
        match std::fs::read(p) {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                out!("--- log tail ({p}) ---");
                for l in hone::util::last_lines(&text, tail) {
                    out!("{l}");
                }
            }
            Err(_) => out!("  (log {p} is gone)"),
        }
    }
}

/// `hone show N` of an experiment a crash cut off: the later one that verified its candidate
/// again.
pub fn show_verified_again(later: &ExperimentRecord) {
    out!(
        "  its candidate was verified again as #{}: {} ({})",
        later.n,
        later.status(),
        fmt_metric(later.objective)
    );
}

/// An experiment's curve (`hone show N`): how many points, and the first and last ones.
pub fn show_curve(curve: &[(f64, f64)]) {
    let (Some(first), Some(last)) = (curve.first(), curve.last()) else {
        return;
    };
    out!(
        "--- curve: {} point{} (step {} value {} .. step {} value {}) ---",
        curve.len(),
        if curve.len() == 1 { "" } else { "s" },
        first.0,
        fmt_metric(Some(first.1)),
        last.0,
        fmt_metric(Some(last.1))
    );
}

/// `hone show N`: the knobs' explored ranges narrowed by crashes once experiment N finished,
/// each with the experiment after which it took its present form.
///
/// `now` are those in force (`optimizer::narrowed_ranges`), `events` the narrowings as they
/// appeared, each with the experiment after which it did, in order.
pub fn show_narrowings(
    now: Vec<hone::propose::knobs::feasible::Narrowing>,
    events: &[(u64, hone::propose::knobs::feasible::Narrowing)],
) {
    if !now.is_empty() {
        out!("--- feasibility (learned from crashes) ---");
    }
    for w in now {
        let since = events
            .iter()
            .rev()
            .find(|(_, x)| *x == w)
            .map(|(at, _)| format!(" (since experiment {at})"))
            .unwrap_or_default();
        out!("  feasibility: {}{since}", w.describe());
    }
}
