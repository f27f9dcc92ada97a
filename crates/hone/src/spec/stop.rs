//! `[stop]`: when the loop ends (experiments, time, patience, a target, failures in a row, and
//! the cost and token budgets).

use std::time::Duration;

use super::read::Section;
use super::units::opt_duration_secs;
use super::SpecError;

/// The keys of `[stop]`.
pub(super) const KEYS: &[&str] = &[
    "max_tokens",
    "max_experiments",
    "max_time",
    "patience",
    "target",
    "max_consecutive_failures",
    "max_cost_usd",
];

/// Defaults of `[stop]`.
pub const MAX_EXPERIMENTS: u64 = 100;
pub const MAX_CONSECUTIVE_FAILURES: u64 = 10;

/// `[stop]`: when the loop ends.
#[derive(Clone, Debug, serde::Serialize)]
pub struct StopSpec {
    pub max_experiments: u64,
    #[serde(with = "opt_duration_secs")]
    pub max_time: Option<Duration>,
    pub patience: Option<u64>,
    pub target: Option<f64>,
    pub max_consecutive_failures: u64,
    pub max_cost_usd: Option<f64>,
    /// Tokens spent by LLM proposers, in and out, over the whole run.
    pub max_tokens: Option<u64>,
}

pub(super) fn parse(s: &Section) -> Result<StopSpec, SpecError> {
    let max_experiments = s.get_or("max_experiments", MAX_EXPERIMENTS)?;
    if max_experiments == 0 {
        return Err(s.err(
            "max_experiments",
            "must be at least 1 (the baseline is experiment 0)",
        ));
    }
    let patience = s.count("patience")?;
    let max_consecutive_failures = s
        .count("max_consecutive_failures")?
        .unwrap_or(MAX_CONSECUTIVE_FAILURES);
    let max_cost_usd = s.non_negative("max_cost_usd")?;
    let target = s.get::<f64>("target")?;
    if matches!(target, Some(t) if !t.is_finite()) {
        return Err(s.err(
            "target",
            "must be a finite number (the metric value that ends the run when reached)",
        ));
    }
    Ok(StopSpec {
        max_experiments,
        max_time: s.get("max_time")?,
        patience,
        target,
        max_consecutive_failures,
        max_cost_usd,
        max_tokens: s.get("max_tokens")?,
    })
}
