//! Resuming a run: which run `hone run` goes on with, the budget it goes on with, and
//! whether it can go on as hone.toml now says (the metric, the direction, the agent, how
//! values are measured), with what changed said.

use crate::spec::Spec;
use crate::store::{RunRecord, RunState, Status, Store};
use crate::workspace::Git;

use super::session::Said;
use super::state::{branch_ref, validate_tag};
use super::{Config, EngineError, Mismatch, RunOptions};

/// The run `opts` names, or the latest unfinished one (the latest, finished or not, with
/// `--more`; `None`: a new run starts, and a note says so when the latest one finished).
pub(super) fn find_run(
    store: &Store,
    opts: &RunOptions,
    said: &mut Said,
) -> Result<Option<RunRecord>, EngineError> {
    let existing = match &opts.tag {
        Some(tag) => {
            validate_tag(tag)?;
            store.run_by_tag(tag)?
        }
        None if opts.new_run => None,
        // `--more N` asks for N more of the run just made, finished or not.
        None if opts.more.is_some() => store.latest_run()?,
        None => store.latest_run()?.filter(|r| r.state != RunState::Stopped),
    };
    if existing.is_none() && opts.tag.is_none() && !opts.new_run {
        if let Some(last) = store.latest_run()? {
            // A run that spent its budget is most often wanted again with more: a new one
            // from HEAD (its own budget, the night's search forgotten) is asked for by name.
            if let Some(reason) = last
                .stop_reason
                .as_deref()
                .filter(|r| r.starts_with("budget"))
            {
                return Err(Mismatch::BudgetSpent {
                    tag: last.tag.clone(),
                    reason: reason.to_string(),
                }
                .into());
            }
            said.before.push(format!(
                "run {} finished ({}); starting a new run from HEAD (`hone run --tag {} --more N` continues it with N more experiments instead)",
                last.tag,
                last.stop_reason.as_deref().unwrap_or("stopped"),
                last.tag
            ));
            // Older runs left unfinished are resumed only by name: said, so none is forgotten.
            let unfinished: Vec<String> = store
                .runs()?
                .into_iter()
                .filter(|r| r.state != RunState::Stopped && r.tag != last.tag)
                .map(|r| r.tag)
                .collect();
            if let Some(first) = unfinished.first() {
                said.before.push(format!(
                    "older runs left unfinished: {} (`hone run --tag {first}` resumes one)",
                    unfinished.join(", ")
                ));
            }
        }
    }
    Ok(existing)
}

/// The budget a resumed run goes on with: `--more` or `-n` when given (and recorded with the
/// run, so that the next resume and `hone status` agree), else the one the run has recorded.
/// hone.toml's `[stop] max_experiments` and `max_time` apply to new runs; a run whose
/// hone.toml value differs says so, with the command that changes it.
pub(super) fn resume_budget(
    store: &Store,
    spec: &mut Spec,
    run: &RunRecord,
    opts: &RunOptions,
    said: &mut Said,
) -> Result<(), EngineError> {
    let mut recorded: serde_json::Value =
        serde_json::from_str(&run.spec_json).unwrap_or(serde_json::Value::Null);
    let stop = recorded.get("stop").cloned().unwrap_or_default();
    let kept_n = stop
        .get("max_experiments")
        .and_then(serde_json::Value::as_u64);
    let kept_time = stop.get("max_time").and_then(serde_json::Value::as_f64);
    let done = store.counted_experiments(run.id)?;
    let toml_n = spec.stop.max_experiments;
    let n = match (opts.more, opts.max_experiments) {
        (Some(more), _) => done.saturating_add(more),
        (None, Some(n)) if n <= done => {
            return Err(Config::BudgetReached {
                tag: run.tag.clone(),
                done,
                n,
            }
            .into())
        }
        (None, Some(n)) => n,
        (None, None) => kept_n.unwrap_or(toml_n),
    };
    spec.stop.max_experiments = n.max(1);
    match opts.max_time {
        Some(t) => spec.stop.max_time = Some(t),
        None => {
            if let Some(secs) = kept_time.filter(|s| s.is_finite() && *s >= 0.0) {
                spec.stop.max_time = Some(std::time::Duration::from_secs_f64(secs.min(3.15e9)));
            }
        }
    }
    if opts.more.is_none() && opts.max_experiments.is_none() && toml_n != spec.stop.max_experiments
    {
        said.notes.push(format!(
            "run {} keeps its budget of {} experiments (hone.toml says max_experiments = {toml_n}, which applies to new runs; `hone run --tag {} -n {toml_n}` changes this run's)",
            run.tag, spec.stop.max_experiments, run.tag
        ));
    }
    let live = live_limits_changed(&stop, spec, &run.tag, said);
    let changed = kept_n != Some(spec.stop.max_experiments)
        || (opts.max_time.is_some() && kept_time != spec.stop.max_time.map(|t| t.as_secs_f64()))
        || !live.is_empty();
    if changed {
        if let Some(stop) = recorded.get_mut("stop").and_then(|s| s.as_object_mut()) {
            stop.insert("max_experiments".into(), spec.stop.max_experiments.into());
            if let Some(t) = spec.stop.max_time {
                stop.insert("max_time".into(), t.as_secs_f64().into());
            }
            stop.extend(live);
            store.set_run_spec(run.id, &recorded.to_string())?;
        }
    }
    Ok(())
}

/// The `[stop]` limits a resumed run takes from hone.toml as it is now (raising
/// `max_cost_usd` is how a run that stopped on its budget goes on), unlike `max_experiments`
/// and `max_time`, which the run keeps.
const LIVE_LIMITS: [&str; 5] = [
    "max_cost_usd",
    "max_tokens",
    "patience",
    "target",
    "max_consecutive_failures",
];

/// The live limits whose hone.toml value differs from the one `recorded` (the run's `[stop]`
/// as recorded), each said in a note; returns them with their new values, to be recorded, so
/// that `hone status` shows the limit in force.
fn live_limits_changed(
    recorded: &serde_json::Value,
    spec: &Spec,
    tag: &str,
    said: &mut Said,
) -> serde_json::Map<String, serde_json::Value> {
    let now = serde_json::to_value(&spec.stop).unwrap_or_default();
    let shown = |v: Option<&serde_json::Value>| match v {
        None | Some(serde_json::Value::Null) => "none".to_string(),
        Some(v) => v.to_string(),
    };
    let mut changed = serde_json::Map::new();
    for key in LIVE_LIMITS {
        let (was, is) = (recorded.get(key), now.get(key));
        // A run recorded before a limit existed has no value for it: nothing to compare.
        if was.is_none() || was == is {
            continue;
        }
        said.notes.push(format!(
            "run {tag}: {key} is now {} (hone.toml; it was {} when the run started or last resumed)",
            shown(is),
            shown(was)
        ));
        changed.insert(key.to_string(), is.cloned().unwrap_or_default());
    }
    changed
}

/// A run whose baseline never measured takes hone.toml's metric and direction as they are
/// now (the user fixed a wrong metric name after the baseline failed); a run with a
/// measured baseline keeps its own, and `check_resumable` refuses a change.
pub(super) fn adopt_objective(
    store: &Store,
    spec: &Spec,
    mut run: RunRecord,
    said: &mut Said,
) -> Result<RunRecord, EngineError> {
    let (metric, direction) = (&spec.verify.metric, spec.verify.direction);
    if run.metric == *metric && run.direction == direction {
        return Ok(run);
    }
    if store.first_with_status(run.id, Status::Baseline)?.is_some() {
        return Ok(run);
    }
    store.set_run_objective(run.id, metric, direction)?;
    said.notes.push(format!(
        "run {} had no baseline yet: it now measures `{metric}` ({})",
        run.tag,
        direction.as_str()
    ));
    run.metric = metric.clone();
    run.direction = direction;
    Ok(run)
}

/// The `[verify]` keys that decide how a value is measured: once the baseline has one, a
/// change would compare values measured two ways.
const MEASUREMENT: [&str; 5] = ["command", "evaluate", "metric_regex", "env", "outputs"];

/// The `[verify]` keys that decide what is kept, not what is measured: a change applies from
/// now on, and is said.
const DECISION: [&str; 3] = ["min_delta", "constraints", "holdout"];

/// Whether `run` can go on measuring as hone.toml's `[verify]` now says: a change of how values
/// are measured is refused once the baseline has one (before, it is the fix of a failed
/// baseline, taken and recorded); a change of what is kept is taken, said and recorded.
pub(super) fn check_measurement(
    store: &Store,
    spec: &Spec,
    run: &mut RunRecord,
    said: &mut Said,
) -> Result<(), EngineError> {
    let Ok(mut recorded) = serde_json::from_str::<serde_json::Value>(&run.spec_json) else {
        return Ok(());
    };
    let now = serde_json::to_value(&spec.verify).unwrap_or_default();
    let Some(verify) = recorded.get_mut("verify").and_then(|v| v.as_object_mut()) else {
        return Ok(());
    };
    let measured = store.first_with_status(run.id, Status::Baseline)?.is_some();
    let mut changed = false;
    for key in MEASUREMENT.iter().chain(DECISION.iter()) {
        let (Some(was), Some(is)) = (verify.get(*key), now.get(*key)) else {
            continue;
        };
        if comparable(key, was) == comparable(key, is) {
            continue;
        }
        if measured && MEASUREMENT.contains(key) {
            return Err(Mismatch::VerifierChanged {
                tag: run.tag.clone(),
                key: key.to_string(),
                recorded: shown(key, was),
                configured: shown(key, is),
            }
            .into());
        }
        said.notes.push(format!(
            "run {} goes on with [verify] {key} = {} (it was {})",
            run.tag,
            shown(key, is),
            shown(key, was)
        ));
        verify.insert(key.to_string(), is.clone());
        changed = true;
    }
    if changed {
        run.spec_json = recorded.to_string();
        store.set_run_spec(run.id, &run.spec_json)?;
    }
    Ok(())
}

/// A recorded `[verify]` value as compared: `env` in any order (a table of hone.toml).
fn comparable(key: &str, value: &serde_json::Value) -> serde_json::Value {
    match (key, value.as_array()) {
        ("env", Some(pairs)) => {
            let mut pairs = pairs.clone();
            pairs.sort_by_key(|p| p.to_string());
            serde_json::Value::Array(pairs)
        }
        _ => value.clone(),
    }
}

/// A `[verify]` value as said: `env` by its names only (its values may be secrets), the
/// holdout by its command.
fn shown(key: &str, value: &serde_json::Value) -> String {
    match key {
        "env" => {
            let mut names: Vec<String> = value
                .as_array()
                .map(|pairs| {
                    pairs
                        .iter()
                        .filter_map(|p| p.get(0).and_then(|n| n.as_str()).map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            format!("[{}] (values not shown)", names.join(", "))
        }
        "holdout" => match value.get("command").and_then(|c| c.as_str()) {
            Some(c) => format!("{{ command = {c:?}, ... }}"),
            None => value.to_string(),
        },
        _ => value.to_string(),
    }
}

/// Whether `run` can go on here with this spec (errors), and what changed since it started
/// (warnings).
pub(super) fn check_resumable(
    store: &Store,
    spec: &Spec,
    git: &Git,
    run: &RunRecord,
    opts: &RunOptions,
    said: &mut Said,
) -> Result<(), EngineError> {
    // A shared store holds the runs of every clone of this project; the branch and
    // the archive refs of a run live in the clone that coordinated it.
    if store.is_shared() && git.ref_target(&branch_ref(&run.tag))?.is_none() {
        return Err(Mismatch::OtherClone {
            tag: run.tag.clone(),
        }
        .into());
    }
    if run.metric != spec.verify.metric {
        return Err(Mismatch::MetricChanged {
            tag: run.tag.clone(),
            recorded: run.metric.clone(),
            configured: spec.verify.metric.clone(),
        }
        .into());
    }
    if run.direction != spec.verify.direction {
        return Err(Mismatch::DirectionChanged {
            tag: run.tag.clone(),
            recorded: run.direction,
            configured: spec.verify.direction,
        }
        .into());
    }
    let configured = spec.agent.kind.as_str();
    if run.agent != configured {
        if !opts.agent_chosen {
            return Err(Mismatch::AgentChanged {
                tag: run.tag.clone(),
                recorded: run.agent.clone(),
                configured: configured.to_string(),
            }
            .into());
        }
        store.set_run_agent(run.id, spec.agent.kind)?;
        said.notes.push(format!(
            "run `{}` goes on with agent `{configured}` (--agent); it was `{}`",
            run.tag, run.agent
        ));
    }
    if let Ok(head) = git.head() {
        if head != run.base_commit {
            said.warnings.push(format!(
                "HEAD has moved since run `{}` started; the run goes on from its own start commit {} (start a new run from HEAD with `hone run --new`)",
                run.tag,
                &run.base_commit[..run.base_commit.len().min(10)]
            ));
        }
    }
    if let Some(seed) = opts.seed {
        if seed != run.seed {
            said.warnings.push(format!(
                "run `{}` was started with seed {}; --seed {seed} is ignored on resume",
                run.tag, run.seed
            ));
        }
    }
    Ok(())
}
