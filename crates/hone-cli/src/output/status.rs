//! `hone status`: a run's state, budgets and spend, what is in flight, as text or JSON.

use super::*;

/// One experiment in flight, as `hone status` lists it: its number, what it tries (or that
/// its proposer is still at work) and for how long it has been at it.
fn in_flight(e: &ExperimentRecord) -> String {
    let d = hone::propose::prompt::sanitize(&e.description, 400).replace('\n', " ");
    let d = if d.trim().is_empty() {
        "(being proposed)".to_string()
    } else {
        d
    };
    let since = format_duration(std::time::Duration::from_secs_f64(
        (hone::store::now() - e.started_at).max(0.0),
    ));
    format!(
        "#{} {} ({since} so far)",
        e.n,
        hone::util::cut_at_word(&d, 80)
    )
}

/// `hone status`: `s` is the run's summary and the tokens it spent, `running` its experiments
/// in flight.
pub fn status(
    run: &RunRecord,
    (s, tokens): (&Summary, u64),
    running: &[ExperimentRecord],
    (spec, spec_file): (&crate::commands::StoredSpec, Option<&std::path::Path>),
    json: bool,
    live: bool,
) {
    if json {
        out!("{}", status_json(s, (tokens, spec), running, live));
        return;
    }
    let state = match run.state.words(s.stop_reason.as_deref(), live) {
        (words, None) => words.to_string(),
        (words, Some(next)) => format!("{words} ({next})"),
    };
    let state = naming_spec(&state, spec_file);
    out!("run {} on {}: {state}", s.tag, s.branch);
    out!("  {} ({}): {}", s.metric, s.direction, best_line(s));
    let counts = counts(s, running, live);
    if let Some(d) = &s.best_vs_baseline {
        out!("  best vs baseline: {d}");
    }
    if s.holdout_baseline.is_some() || s.holdout_best.is_some() {
        out!(
            "  holdout (sealed): baseline {}, best {}",
            fmt_metric(s.holdout_baseline),
            fmt_metric(s.holdout_best)
        );
    }
    out!("  experiments: {} ({})", s.experiments, counts.join(", "));
    // Parallel runs verify several at once: say which.
    let running: Vec<String> = running
        .iter()
        .filter(|e| e.status() == Status::Running)
        .map(in_flight)
        .collect();
    if live && !running.is_empty() {
        out!("  in flight: {}", running.join("; "));
    }
    if let Some(max) = spec.max_experiments {
        out!("  budget: {}", experiments_budget(s, max));
    }
    let used = format_duration(std::time::Duration::from_secs_f64(s.active_seconds));
    match spec.max_time_s {
        Some(t) => out!(
            "  budget: time {used} of {} ({} left)",
            format_duration(std::time::Duration::from_secs_f64(t)),
            format_duration(std::time::Duration::from_secs_f64(
                (t - s.active_seconds).max(0.0)
            ))
        ),
        None => out!("  time used: {used} (no max_time)"),
    }
    match spec.max_cost_usd {
        // As `hone log` and the report show it: a cent-less spend is not $0.00.
        // The limit as written (0.006 is not $0.01).
        Some(c) => out!("  budget: cost ${:.4} of ${c}", s.cost_usd),
        // Tokens and no money: the agent reports no cost (Codex, Gemini CLI), not $0.
        None if s.cost_usd == 0.0 && tokens > 0 => {
            out!("  cost: not reported (the agent reports tokens only)")
        }
        None => out!("  cost: ${:.2}", s.cost_usd),
    }
    match spec.max_tokens {
        Some(m) => out!("  budget: tokens {tokens} of {m}"),
        None if tokens > 0 => out!("  tokens: {tokens}"),
        None => {}
    }
    if let Some(r) = &s.stop_reason {
        // A reason may quote a server's or a reviewer's words.
        out!("  stopped: {}", naming_spec(&one_line(r), spec_file));
        if let Some(hint) = stop_hint(r, &s.tag, spec_file) {
            out!("  {hint}");
        }
    }
}

/// The run's experiments counted by status, as `hone status` lists them. The experiment in
/// flight (if any) is counted too, so the numbers add up. With no hone running it, a `running`
/// record was cut off: the resume records it aborted, and verifies its candidate again where
/// it had one.
fn counts(s: &Summary, running: &[ExperimentRecord], live: bool) -> Vec<String> {
    let again = running
        .iter()
        .filter(|e| e.status() == Status::Running)
        .filter(|e| hone::engine::verified_again_on_resume(e))
        .count();
    Status::ALL
        .iter()
        .chain(std::iter::once(&Status::Running))
        .filter_map(|st| {
            let c = s.counts.get(st.as_str())?;
            Some(match st {
                Status::Running if !live && again > 0 => format!(
                    "cut off {c} (aborted on resume; {again} candidate{} verified again first)",
                    if again == 1 { "" } else { "s" }
                ),
                Status::Running if !live => format!("cut off {c} (aborted on resume)"),
                st => format!("{st} {c}"),
            })
        })
        .collect()
}

/// `hone status --json`: the summary, with what the text adds to it: the tokens spent, the
/// budgets, whether a hone is at work on the run now and, if so, the experiments in flight.
fn status_json(
    s: &Summary,
    (tokens, spec): (u64, &crate::commands::StoredSpec),
    running: &[ExperimentRecord],
    live: bool,
) -> String {
    let mut v = serde_json::to_value(s).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert("tokens".into(), tokens.into());
        // The budgets as the text shows them: each limit (null: none) and what counts
        // against it.
        o.insert(
            "budget".into(),
            serde_json::json!({
                "max_experiments": spec.max_experiments,
                "experiments_counted": s.counted(),
                "max_time_s": spec.max_time_s,
                "time_left_s": spec.max_time_s.map(|t| (t - s.active_seconds).max(0.0)),
                "max_cost_usd": spec.max_cost_usd,
                "max_tokens": spec.max_tokens,
            }),
        );
        o.insert("live".into(), live.into());
        let now = hone::store::now();
        let in_flight: Vec<serde_json::Value> = running
            .iter()
            .filter(|e| live && e.status() == Status::Running)
            .map(|e| {
                serde_json::json!({
                    "experiment": e.n,
                    "description": e.description,
                    "seconds": (now - e.started_at).max(0.0),
                })
            })
            .collect();
        o.insert("in_flight".into(), in_flight.into());
    }
    serde_json::to_string_pretty(&v).unwrap_or_default()
}

/// `experiments 3/10 (7 left)`: what counts towards `max_experiments`. Aborted experiments
/// (an outage, an interruption) and baselines that failed before the one that ran are not
/// counted, and running ones only once they finish (a cut-off one becomes aborted on
/// resume).
fn experiments_budget(s: &Summary, max: u64) -> String {
    let (aborted, counted) = (s.count(Status::Aborted), s.counted());
    let mut not_counted = String::new();
    if aborted > 0 {
        not_counted.push_str(&format!("; {aborted} aborted not counted"));
    }
    match s.failed_baselines {
        0 => {}
        1 => not_counted.push_str("; a failed baseline not counted"),
        f => not_counted.push_str(&format!("; {f} failed baselines not counted")),
    }
    format!(
        "experiments {counted}/{max} ({} left{not_counted})",
        max.saturating_sub(counted)
    )
}
