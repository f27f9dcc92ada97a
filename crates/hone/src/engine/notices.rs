//! What `[[notify]]` endpoints hear of a run: each keep, and how the run ended. The engine's
//! events are tapped on their way to the caller; deliveries run on background threads and the
//! loop never waits for them.

use std::path::Path;

use crate::notify::{self, Notice, Notifier};
use crate::report::{fmt_metric, fmt_progress, Summary};
use crate::spec::{NotifyOn, Spec};
use crate::store::{ExperimentRecord, Status};
use crate::workspace::Git;

use super::{store_location, EngineError, Event};

/// `run` (the loop, given where its events go) with `[[notify]]` endpoints tapping its events
/// on their way to `on_event`: at the end they get a bounded time (`notify::FLUSH_WAIT`) to
/// finish; deliveries that failed come back as warnings after `RunStopped`. `tag` is the
/// run's, as asked for.
pub(super) fn run_notified(
    repo_root: &Path,
    spec: &Spec,
    tag: Option<String>,
    on_event: &mut dyn FnMut(&Event),
    run: impl FnOnce(&mut dyn FnMut(&Event)) -> Result<Summary, EngineError>,
) -> Result<Summary, EngineError> {
    let git = Git::discover(repo_root)?;
    for n in &spec.notify {
        if let Err(e) = n.url.resolve() {
            on_event(&Event::Warning {
                message: format!(
                    "[[notify]] at line {}: {e}; its notifications cannot be sent",
                    n.line
                ),
            });
        }
    }
    let notifier = Notifier::start(&spec.notify, Some(store_location(&git, spec)));
    let mut tag = tag.unwrap_or_default();
    let result = {
        let mut previous_best = None;
        let metric = spec.verify.metric.clone();
        let mut tap = |ev: &Event| {
            match ev {
                Event::RunStarted { tag: t, .. } => tag = t.clone(),
                Event::ExperimentFinished {
                    record,
                    best,
                    baseline,
                } => {
                    if record.status() == Status::Keep {
                        notifier.send(&keep_notice(
                            &tag,
                            &metric,
                            record,
                            previous_best,
                            *baseline,
                        ));
                    }
                    previous_best = *best;
                }
                _ => {}
            }
            on_event(ev)
        };
        run(&mut tap)
    };
    let end = match &result {
        Ok(s) => notify::end_kind(&s.state, s.stop_reason.as_deref().unwrap_or(""), false)
            .map(|k| (k, s.stop_reason.clone().unwrap_or_default(), Some(s))),
        Err(EngineError::Stopped { reason, summary }) => {
            Some((NotifyOn::Failure, reason.clone(), Some(summary.as_ref())))
        }
        Err(e) => Some((NotifyOn::Failure, e.to_string(), None)),
    };
    if let Some((on, reason, summary)) = end {
        if tag.is_empty() {
            tag = "(not started)".into();
        }
        notifier.send(&end_notice(on, &tag, &reason, summary));
    }
    for u in notifier.close(notify::FLUSH_WAIT) {
        on_event(&Event::Warning {
            message: u.to_string(),
        });
    }
    result
}

fn keep_notice(
    tag: &str,
    metric: &str,
    e: &ExperimentRecord,
    previous_best: Option<f64>,
    baseline: Option<f64>,
) -> Notice {
    let change = match previous_best {
        Some(p) => format!(
            "{metric} {} → {}",
            fmt_metric(Some(p)),
            fmt_metric(e.objective)
        ),
        None => format!("{metric} = {}", fmt_metric(e.objective)),
    };
    Notice {
        on: NotifyOn::Keep,
        run: tag.to_string(),
        text: format!(
            "hone run {tag}: kept #{} \"{}\": {change} (baseline {})",
            e.n,
            crate::propose::prompt::sanitize(&e.description, 200).replace('\n', " "),
            fmt_metric(baseline)
        ),
        data: serde_json::json!({
            "experiment": e.n,
            "description": e.description,
            "metric": metric,
            "value": e.objective,
            "previous_best": previous_best,
            "baseline": baseline,
            "commit": e.candidate_commit,
        }),
    }
}

fn end_notice(on: NotifyOn, tag: &str, reason: &str, summary: Option<&Summary>) -> Notice {
    let what = match on {
        NotifyOn::Failure => "stopped on a failure",
        NotifyOn::Budget => "stopped on its budget",
        _ => "finished",
    };
    let result = summary
        .map(|s| {
            format!(
                "; {}, {} experiments, {} kept",
                fmt_progress(s),
                s.experiments,
                s.counts.get("keep").copied().unwrap_or(0)
            )
        })
        .unwrap_or_default();
    Notice {
        on,
        run: tag.to_string(),
        text: format!(
            "hone run {tag} {what}: {}{result}",
            reason.strip_prefix("budget: ").unwrap_or(reason)
        ),
        data: serde_json::json!({ "reason": reason, "summary": summary }),
    }
}
