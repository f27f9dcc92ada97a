//! Summaries of a run: best so far, counts by status, budgets, and the table rows that
//! `hone status`, `hone log` and the end-of-run summary print; `document` and `plot` render
//! `hone report`.

pub mod curves;
pub mod document;
pub mod learned;
pub mod plot;
pub mod stored;

use std::collections::BTreeMap;

use crate::store::{ExperimentRecord, RunRecord, RunTotals, Status, Store, StoreError};

pub use crate::store::best_experiment;

/// A run at a glance.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Summary {
    pub tag: String,
    pub branch: String,
    pub metric: String,
    pub direction: String,
    pub state: String,
    pub stop_reason: Option<String>,
    pub experiments: u64,
    pub baseline: Option<f64>,
    pub best: Option<f64>,
    pub best_experiment: Option<u64>,
    pub best_description: Option<String>,
    /// For knob searches: every knob the best differs in from the baseline (`A 1 -> 3, ...`).
    pub best_vs_baseline: Option<String>,
    /// Relative change of the best against the baseline, in percent (signed: an improvement
    /// in a minimized metric is negative).
    pub change_pct: Option<f64>,
    pub counts: BTreeMap<String, u64>,
    /// Baselines that failed before the one that ran (all finished experiments while none
    /// has): not counted by `max_experiments`.
    pub failed_baselines: u64,
    /// The sealed holdout of the baseline and of the best, when there is one.
    pub holdout_baseline: Option<f64>,
    pub holdout_best: Option<f64>,
    pub active_seconds: f64,
    pub verify_seconds: f64,
    pub cost_usd: f64,
    /// The tokens the run's proposers spent, where the summary counted them (a report; not
    /// [`summarize_stored`], which reads no experiment's record).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
}

impl Summary {
    /// How many of `status`'s experiments the run has.
    pub fn count(&self, status: Status) -> u64 {
        self.counts.get(status.as_str()).copied().unwrap_or(0)
    }

    /// The experiments that count towards `max_experiments`: all but the aborted (an outage,
    /// an interruption), the running (they count once they finish) and the baselines that
    /// failed before the one that ran.
    pub fn counted(&self) -> u64 {
        self.experiments
            .saturating_sub(self.count(Status::Aborted))
            .saturating_sub(self.count(Status::Running))
            .saturating_sub(self.failed_baselines)
    }
}

/// Summarizes a run from its records.
pub fn summarize(run: &RunRecord, exps: &[ExperimentRecord]) -> Summary {
    let baseline = exps.iter().find(|e| e.status() == Status::Baseline);
    let failed_baselines = exps
        .iter()
        .take_while(|e| baseline.map_or(true, |b| e.n < b.n))
        .filter(|e| !matches!(e.status(), Status::Aborted | Status::Running))
        .count() as u64;
    Summary {
        failed_baselines,
        tokens: Some(exps.iter().fold(0u64, |t, e| t.saturating_add(e.tokens))),
        ..summarize_parts(run, baseline, best_experiment(exps), &RunTotals::of(exps))
    }
}

/// Summarizes a run as its store holds it, without reading every record: the totals from
/// one narrow scan, the baseline and the best by index (the same summary as [`summarize`]
/// of all its records; `hone status` and the dashboard on runs of 100,000 experiments).
pub fn summarize_stored(store: &Store, run: &RunRecord) -> Result<Summary, StoreError> {
    let totals = store.run_totals(run.id)?;
    let baseline = store.first_with_status(run.id, Status::Baseline)?;
    let best = store.best_of_run(run.id)?;
    Ok(Summary {
        failed_baselines: store.failed_baselines(run.id)?,
        ..summarize_parts(run, baseline.as_ref(), best.as_ref(), &totals)
    })
}

/// The summary of a run from its baseline (the first), its best (see [`best_experiment`])
/// and its totals.
pub fn summarize_parts(
    run: &RunRecord,
    baseline_rec: Option<&ExperimentRecord>,
    best: Option<&ExperimentRecord>,
    totals: &RunTotals,
) -> Summary {
    let baseline = baseline_rec.and_then(|e| e.objective);
    let best_v = best.and_then(|b| b.objective);
    let change_pct = match (baseline, best_v) {
        (Some(a), Some(b)) if a != 0.0 => Some((b - a) / a.abs() * 100.0),
        _ => None,
    }
    // A change too large for a float (values near ±1.8e308) is no percentage to show.
    .filter(|p| p.is_finite());
    let config = |e: &ExperimentRecord| -> Option<crate::propose::knobs::Config> {
        serde_json::from_value(e.config.clone()?).ok()
    };
    let best_vs_baseline = match (baseline_rec, best) {
        (Some(a), Some(b)) if a.n != b.n => match (config(a), config(b)) {
            (Some(ca), Some(cb)) => Some(crate::propose::knobs::describe(&ca, &cb)),
            _ => None,
        },
        _ => None,
    };
    Summary {
        tag: run.tag.clone(),
        branch: run.branch.clone(),
        metric: run.metric.clone(),
        direction: run.direction.to_string(),
        state: run.state.to_string(),
        stop_reason: run.stop_reason.clone(),
        experiments: totals.experiments,
        baseline,
        best: best_v,
        best_experiment: best.map(|b| b.n),
        best_description: best.map(|b| b.description.clone()),
        best_vs_baseline,
        change_pct,
        counts: totals.counts.clone(),
        failed_baselines: 0,
        holdout_baseline: baseline_rec.and_then(|e| e.holdout),
        holdout_best: best.and_then(|b| b.holdout),
        active_seconds: run.active_seconds,
        verify_seconds: totals.verify_seconds,
        cost_usd: totals.cost_usd,
        tokens: None,
    }
}

/// Formats a metric value compactly but exactly enough to compare.
pub fn fmt_metric(v: Option<f64>) -> String {
    let mut out = String::with_capacity(16);
    push_metric(&mut out, v);
    out
}

/// [`fmt_metric`], appended to `out`.
pub fn push_metric(out: &mut String, v: Option<f64>) {
    match v {
        None => out.push('-'),
        Some(v) => crate::util::push_value(out, v),
    }
}

/// The relative change of the best, as it follows a metric's values: ` (-10.00%)`, or
/// nothing where there is none to show.
pub fn change_suffix(s: &Summary) -> String {
    s.change_pct
        .map(|p| format!(" ({p:+.2}%)"))
        .unwrap_or_default()
}

/// How a run moved its metric, in one line: `loss 1.000000 → 0.900000 (-10.00%)` (the
/// change left out where there is none to show).
pub fn fmt_progress(s: &Summary) -> String {
    let change = change_suffix(s);
    format!(
        "{} {} → {}{change}",
        s.metric,
        fmt_metric(s.baseline),
        fmt_metric(s.best)
    )
}

/// One row of autoresearch's results.tsv: commit, metric, status, description.
pub fn tsv_row(e: &ExperimentRecord) -> String {
    let commit = e
        .candidate_commit
        .as_deref()
        .map(|c| &c[..c.len().min(7)])
        .unwrap_or("-");
    // autoresearch's six decimals (and its 0.000000 for a crash); a value too small for them
    // in full (1e-7 is not 0.000000).
    let metric = match e.objective {
        Some(v) if v != 0.0 && v.abs() < 1e-3 => format!("{v:e}"),
        Some(v) => format!("{v:.6}"),
        None => "0.000000".into(),
    };
    let desc = e.description.replace(['\t', '\n'], " ");
    format!("{commit}\t{metric}\t{}\t{desc}", e.status())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tsv_row_keeps_a_small_metric_and_writes_a_crash_as_autoresearch_does() {
        let row = |objective, status| {
            tsv_row(&ExperimentRecord {
                candidate_commit: Some("0123456789abcdef".into()),
                objective,
                status: Some(status),
                description: "lr\t0.1\nnext".into(),
                ..Default::default()
            })
        };
        assert_eq!(
            row(Some(0.9979), Status::Keep),
            "0123456\t0.997900\tkeep\tlr 0.1 next"
        );
        let small = row(Some(1.25e-7), Status::Keep);
        assert_eq!(small.split('\t').nth(1), Some("1.25e-7"), "{small}");
        assert_eq!(
            row(None, Status::Crash).split('\t').nth(1),
            Some("0.000000")
        );
        assert_eq!(
            row(Some(0.0), Status::Discard).split('\t').nth(1),
            Some("0.000000")
        );
    }
}
