//! `[verify]` and `[verify.holdout]`: the user's command, how its output is judged (the
//! metric, its direction, constraints, the noise rule), and the sealed holdout.
//!
//! Values are kept as parsed: constraints as [`Constraint`]s and `metric_regex` compiled, so
//! the engine never parses them again (each serializes as the text written in hone.toml).

use std::time::Duration;

pub use crate::verify::Direction;

use super::read::Section;
use super::units::duration_secs;
use super::SpecError;
use crate::verify::metrics::{is_metric_name, Constraint, MetricError, MetricRegex};
use crate::verify::prune::{Progress, PruneRule, Pruner, Warmup};

/// The keys of `[verify]`.
pub(super) const KEYS: &[&str] = &[
    "command",
    "timeout",
    "kill_grace",
    "metric",
    "direction",
    "min_delta",
    "constraints",
    "metric_regex",
    "max_log_bytes",
    "env",
    "pass_env",
    "baseline_repeats",
    "noise_k",
    "confirm",
    "retest_every",
    "seed_env",
    "prefer_simpler",
    "evaluate",
    "outputs",
    "holdout",
    "holdout_gate",
    "progress",
    "prune",
    "prune_warmup",
    "prune_min_runs",
];
/// The keys of `[verify.holdout]`.
const HOLDOUT_KEYS: &[&str] = &[
    "command",
    "evaluate",
    "metric",
    "timeout",
    "min_delta",
    "hide",
];

/// Defaults of `[verify]`.
pub const TIMEOUT_SECS: u64 = 600;
pub const KILL_GRACE_SECS: u64 = 5;
pub const MAX_LOG_BYTES: u64 = 1_000_000;
pub const NOISE_K: f64 = 2.0;
/// Curves of finished experiments needed at a step before a run is pruned there.
pub const PRUNE_MIN_RUNS: u64 = 3;

/// `[verify]`: the user's command and how its output is judged.
#[derive(Clone, Debug, serde::Serialize)]
pub struct VerifySpec {
    pub command: String,
    #[serde(with = "duration_secs")]
    pub timeout: Duration,
    #[serde(with = "duration_secs")]
    pub kill_grace: Duration,
    pub metric: String,
    pub direction: Direction,
    pub min_delta: f64,
    pub constraints: Vec<Constraint>,
    pub metric_regex: Option<MetricRegex>,
    pub max_log_bytes: u64,
    pub env: Vec<(String, String)>,
    /// Variables of hone's environment that hold the agent CLI's credentials and that the
    /// verifier, the holdout and reviewer commands get all the same (an evaluation that asks
    /// the model itself); hone keeps the others from them. (Left out of the stored JSON when
    /// empty, so that a run's stored spec reads as before.)
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pass_env: Vec<String>,
    /// Runs of the unmodified project, to measure the noise.
    pub baseline_repeats: u64,
    /// The keep threshold is `max(min_delta, noise_k × σ)`.
    pub noise_k: f64,
    /// Extra runs of a candidate that passes on its first run; the mean must still pass.
    pub confirm: u64,
    /// Re-measure the champion after every this many keeps.
    pub retest_every: Option<u64>,
    /// An environment variable set to the repeat's index (0, 1, ...) on every run.
    pub seed_env: Option<String>,
    /// Inside the noise band, keep a candidate that deletes net lines.
    pub prefer_simpler: bool,
    /// The sealed second stage: when set, the objective is read only from its output.
    pub evaluate: Option<String>,
    /// With `evaluate`: the files the first stage produces for it (globs); nothing else it
    /// leaves survives into the evaluation.
    pub outputs: Vec<String>,
    /// The sealed holdout, measured on the baseline and every keep, never shown to agents.
    pub holdout: Option<HoldoutSpec>,
    /// Revert a keep that worsens the holdout by more than its `min_delta`.
    pub holdout_gate: bool,
    /// `progress` and `prune`: intermediate values, and when a run is stopped early.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<ProgressSpec>,
}

/// `[verify] progress` with `prune`, `prune_warmup` and `prune_min_runs`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ProgressSpec {
    /// How a (step, value) point is read from a line of the verifier's output.
    pub read: Progress,
    /// The rule that stops a hopeless run; `None`: curves are only recorded.
    pub prune: Option<PruneRule>,
    pub warmup: Warmup,
    pub min_runs: u64,
}

impl ProgressSpec {
    /// The pruner of a run whose objective goes `direction`, if pruning is on.
    pub fn pruner(&self, direction: Direction) -> Option<Pruner> {
        Some(Pruner {
            rule: self.prune?,
            direction,
            warmup: self.warmup,
            min_runs: self.min_runs as usize,
        })
    }
}

/// `[verify.holdout]`: a second measurement on data the search never sees.
#[derive(Clone, Debug, serde::Serialize)]
pub struct HoldoutSpec {
    pub command: String,
    /// A sealed second stage, as `[verify] evaluate`: `command` only predicts, and the value
    /// is read from this one alone, run as a fresh process once the first stage's processes
    /// are dead. (Left out of the serialized form when unset: runs recorded before it read
    /// the same.)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evaluate: Option<String>,
    /// Default: the search metric's name.
    pub metric: String,
    #[serde(with = "duration_secs")]
    pub timeout: Duration,
    pub min_delta: f64,
    /// Paths (absolute or relative to the repository) that agents and verifiers must not read;
    /// enforced under `[sandbox] kind = "bwrap"`.
    pub hide: Vec<String>,
    /// Where each `hide` path is written (file, line), for errors found once the repository
    /// is seen ([`HoldoutSpec::hide_error`]).
    #[serde(skip)]
    hide_at: Vec<(std::path::PathBuf, usize)>,
}

impl HoldoutSpec {
    /// An error about the `i`th `hide` path, at its line of hone.toml.
    pub fn hide_error(&self, i: usize, message: String) -> SpecError {
        let (file, line) = self.hide_at.get(i).cloned().unwrap_or_default();
        SpecError {
            file,
            line,
            key: "verify.holdout.hide".into(),
            message,
        }
    }
}

impl VerifySpec {
    /// The noise settings.
    pub fn noise_policy(&self) -> crate::verify::noise::NoisePolicy {
        crate::verify::noise::NoisePolicy {
            direction: self.direction,
            min_delta: self.min_delta,
            noise_k: self.noise_k,
            confirm: self.confirm,
            prefer_simpler: self.prefer_simpler,
        }
    }
}

pub(super) fn parse(s: &Section) -> Result<VerifySpec, SpecError> {
    let verify = judged(s)?;
    let holdout = match s.item("holdout") {
        None => None,
        Some(toml_edit::Item::Table(h)) => Some(holdout(
            &Section::new(s.doc(), Some(h), "verify.holdout"),
            &verify,
        )?),
        Some(other) => {
            return Err(s.type_err("holdout", "a table written [verify.holdout]", other));
        }
    };
    let holdout_gate = s.get_or("holdout_gate", false)?;
    if holdout_gate && holdout.is_none() {
        return Err(s.err(
            "holdout_gate",
            "needs a [verify.holdout] command to gate on",
        ));
    }
    let sealed_holdout = holdout.as_ref().is_some_and(|h| h.evaluate.is_some());
    if verify.evaluate.is_none() && !sealed_holdout && !verify.outputs.is_empty() {
        return Err(s.err(
            "outputs",
            "only means something with `evaluate` (the sealed second stage, here or in [verify.holdout])",
        ));
    }
    Ok(VerifySpec {
        holdout,
        holdout_gate,
        progress: progress(s, verify.timeout)?,
        ..verify
    })
}

/// `progress`, `prune`, `prune_warmup` and `prune_min_runs` (a warm-up in time must be
/// shorter than the verifier's `timeout`, or nothing could ever be pruned).
fn progress(s: &Section, timeout: Duration) -> Result<Option<ProgressSpec>, SpecError> {
    let Some(text) = s.get::<String>("progress")? else {
        for key in ["prune", "prune_warmup", "prune_min_runs"] {
            if s.has(key) {
                return Err(s.err(
                    key,
                    "needs `progress`: how the verifier prints its intermediate values (a metric printed beside `step=`, or a regex with groups `step` and `value`)",
                ));
            }
        }
        return Ok(None);
    };
    let read = Progress::compile(&text).map_err(|e| s.err("progress", e))?;
    let prune = match s.get::<String>("prune")? {
        None => None,
        Some(rule) => Some(PruneRule::parse(&rule).map_err(|e| s.err("prune", e))?),
    };
    if prune.is_none() {
        for key in ["prune_warmup", "prune_min_runs"] {
            if s.has(key) {
                return Err(s.err(
                    key,
                    "only means something with `prune` (e.g. prune = \"median\")",
                ));
            }
        }
    }
    if let Some(n) = s.item("prune_warmup").and_then(|i| i.as_integer()) {
        return Err(s.err(
            "prune_warmup",
            format!("write it with its unit, as a string: \"{n} steps\" or \"{n}s\""),
        ));
    }
    let warmup = match s.get::<String>("prune_warmup")? {
        None => Warmup::Steps(0.0),
        Some(w) => warmup(&w).map_err(|e| s.err("prune_warmup", e))?,
    };
    if let Warmup::Time(t) = warmup {
        if t >= timeout {
            return Err(s.err(
                "prune_warmup",
                format!(
                    "a warm-up of {} is not shorter than timeout ({}): no run could be pruned; write steps (\"100 steps\") or a shorter time",
                    crate::spec::format_duration(t),
                    crate::spec::format_duration(timeout)
                ),
            ));
        }
    }
    let no_warmup = matches!(warmup, Warmup::Steps(n) if n == 0.0)
        || matches!(warmup, Warmup::Time(t) if t.is_zero());
    if prune == Some(PruneRule::Halving) && no_warmup {
        return Err(s.err(
            "prune",
            "`halving` raises its bar at 1, 2 and 3 times the warm-up: set prune_warmup too (\"10 steps\" or \"60s\")",
        ));
    }
    let min_runs = s.count("prune_min_runs")?.unwrap_or(PRUNE_MIN_RUNS);
    Ok(Some(ProgressSpec {
        read,
        prune,
        warmup,
        min_runs,
    }))
}

/// A warm-up: `"100 steps"` or a duration (`"60s"`, `"2m"`); a bare number is refused, as
/// either could be meant.
fn warmup(text: &str) -> Result<Warmup, String> {
    let t = text.trim();
    if t.parse::<f64>().is_ok_and(|n| n != 0.0) {
        return Err(format!(
            "`{t}` has no unit: write \"{t} steps\" or \"{t}s\""
        ));
    }
    if let Some(n) = t.strip_suffix("steps").or_else(|| t.strip_suffix("step")) {
        return match n.trim().parse::<f64>() {
            Ok(n) if n.is_finite() && n >= 0.0 => Ok(Warmup::Steps(n)),
            _ => Err(format!(
                "`{text}` is not a number of steps: write it like \"100 steps\""
            )),
        };
    }
    super::units::parse_duration(t)
        .map(Warmup::Time)
        .map_err(|e| format!("{e}, or a number of steps like \"100 steps\""))
}

/// Everything but the holdout: the command, the metric and how it is judged.
fn judged(s: &Section) -> Result<VerifySpec, SpecError> {
    let command = s.required(
        "command",
        "the command that measures a candidate, e.g. command = \"python3 train.py\"",
    )?;
    let metric = s.required(
        "metric",
        "the name of the objective the command prints, e.g. metric = \"val_bpb\"",
    )?;
    if !is_metric_name(&metric) {
        return Err(s.err("metric", MetricError::BadName(metric).to_string()));
    }
    let direction = direction(s)?;
    let timeout = s.get_or("timeout", Duration::from_secs(TIMEOUT_SECS))?;
    if timeout.is_zero() {
        return Err(s.err("timeout", "must be more than zero"));
    }
    let kill_grace = s.get_or("kill_grace", Duration::from_secs(KILL_GRACE_SECS))?;
    let min_delta = s.get_or("min_delta", 0.0)?;
    if min_delta.is_nan() || min_delta < 0.0 || !min_delta.is_finite() {
        return Err(s.err(
            "min_delta",
            "must be a finite number >= 0 (the smallest improvement worth keeping)",
        ));
    }
    let constraints = s
        .get_or_default::<Vec<String>>("constraints")?
        .iter()
        .map(|c| c.parse::<Constraint>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| s.err("constraints", e.to_string()))?;
    let metric_regex = match s.get::<String>("metric_regex")? {
        None => None,
        Some(r) => {
            Some(metric_regex(&metric, &r).map_err(|e| s.err("metric_regex", e.to_string()))?)
        }
    };
    let max_log_bytes = s.get_or("max_log_bytes", MAX_LOG_BYTES)?;
    if max_log_bytes < 1024 {
        return Err(s.err("max_log_bytes", "must be at least 1024"));
    }
    let env = s.get_or_default("env")?;
    let baseline_repeats = s.count("baseline_repeats")?.unwrap_or(1);
    let noise_k = s.non_negative("noise_k")?.unwrap_or(NOISE_K);
    let retest_every = s.get("retest_every")?;
    if retest_every == Some(0) {
        return Err(s.err("retest_every", "must be at least 1 (or leave it out)"));
    }
    let seed_env = seed_env(s)?;
    Ok(VerifySpec {
        command,
        timeout,
        kill_grace,
        metric,
        direction,
        min_delta,
        constraints,
        metric_regex,
        max_log_bytes,
        env,
        pass_env: s.get_or_default("pass_env")?,
        baseline_repeats,
        noise_k,
        confirm: s.get_or("confirm", 0)?,
        retest_every,
        seed_env,
        prefer_simpler: s.get_or("prefer_simpler", false)?,
        evaluate: s.get("evaluate")?,
        outputs: s.get_or_default("outputs")?,
        holdout: None,
        holdout_gate: false,
        progress: None,
    })
}

/// `direction`: `minimize` (the default) or `maximize`.
fn direction(s: &Section) -> Result<Direction, SpecError> {
    match s.get::<String>("direction")? {
        None => Ok(Direction::Minimize),
        Some(d) => match d.as_str() {
            "minimize" | "min" => Ok(Direction::Minimize),
            "maximize" | "max" => Ok(Direction::Maximize),
            other => Err(s.err(
                "direction",
                format!("`{other}` is not a direction: use \"minimize\" or \"maximize\""),
            )),
        },
    }
}

/// `seed_env`: the name of an environment variable.
fn seed_env(s: &Section) -> Result<Option<String>, SpecError> {
    let seed_env = s.get::<String>("seed_env")?;
    if let Some(name) = &seed_env {
        let ok = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok {
            return Err(s.err(
                "seed_env",
                format!("`{name}` is not an environment variable name"),
            ));
        }
    }
    Ok(seed_env)
}

/// `metric_regex`, compiled once; with it the objective must also be a metric name (as the
/// reader that uses it requires).
fn metric_regex(metric: &str, pattern: &str) -> Result<MetricRegex, MetricError> {
    if !is_metric_name(metric) {
        return Err(MetricError::BadName(metric.to_owned()));
    }
    MetricRegex::compile(pattern)
}

/// `[verify.holdout]`; its metric, timeout and min_delta default to the search's.
fn holdout(h: &Section, verify: &VerifySpec) -> Result<HoldoutSpec, SpecError> {
    h.check_keys(HOLDOUT_KEYS)?;
    let min_delta = h.non_negative("min_delta")?.unwrap_or(verify.min_delta);
    let hide: Vec<String> = h.get_or_default("hide")?;
    let metric = h.get_or("metric", verify.metric.clone())?;
    if !is_metric_name(&metric) {
        return Err(h.err("metric", MetricError::BadName(metric).to_string()));
    }
    Ok(HoldoutSpec {
        command: h.required("command", "the command that measures the holdout")?,
        evaluate: h.get("evaluate")?,
        metric,
        timeout: h.get_or("timeout", verify.timeout)?,
        min_delta,
        hide_at: (0..hide.len())
            .map(|i| (h.doc().file().to_path_buf(), h.element_line("hide", i)))
            .collect(),
        hide,
    })
}

#[cfg(test)]
mod tests {
    use super::super::closest;
    use super::super::tests::{err, parse, GOOD};
    use super::*;

    #[test]
    fn closest_key() {
        assert_eq!(closest("comand", KEYS), Some("command"));
        assert_eq!(closest("zzzzzzzz", KEYS), None);
    }

    #[test]
    fn constraints_and_metric_regex_are_kept_parsed() {
        let s = parse(&GOOD.replace(
            "min_delta = 0.0005",
            "min_delta = 0.0005\nconstraints = [\"mem<=5\"]\nmetric_regex = \"bpb ([0-9.]+)\"",
        ))
        .unwrap();
        assert_eq!(s.verify.constraints[0].metric, "mem");
        assert_eq!(s.verify.constraints[0].as_str(), "mem<=5");
        assert_eq!(
            s.verify.metric_regex.as_ref().map(MetricRegex::as_str),
            Some("bpb ([0-9.]+)")
        );
        let e = err(&GOOD.replace(
            "min_delta = 0.0005",
            "min_delta = 0.0005\nconstraints = [\"mem<=5\", \"mem ~ 5\"]",
        ))
        .at(14, "verify.constraints");
        assert!(e.message.contains("`mem ~ 5` is not a constraint"), "{e}");
        let e = err(&GOOD.replace(
            "min_delta = 0.0005",
            "min_delta = 0.0005\nmetric_regex = \"bpb [0-9.]+\"",
        ))
        .at(14, "verify.metric_regex");
        assert!(e.message.contains("has no capture group"), "{e}");
    }

    #[test]
    fn progress_and_prune() {
        let with = |extra: &str| {
            GOOD.replace(
                "min_delta = 0.0005",
                &format!("min_delta = 0.0005\n{extra}"),
            )
        };
        let s = parse(&with(
            "progress = \"loss\"\nprune = \"percentile:25\"\nprune_warmup = \"100 steps\"",
        ))
        .unwrap();
        let p = s.verify.progress.as_ref().unwrap();
        assert_eq!(p.read.as_str(), "loss");
        assert_eq!(p.warmup, Warmup::Steps(100.0));
        assert_eq!(p.min_runs, PRUNE_MIN_RUNS);
        let pruner = p.pruner(Direction::Minimize).unwrap();
        assert_eq!(pruner.rule, PruneRule::Percentile(25.0));
        let s = parse(&with("progress = 'step (?P<step>\\d+) \\| loss (?P<value>[0-9.]+)'\nprune = \"median\"\nprune_warmup = \"90s\"\nprune_min_runs = 5")).unwrap();
        let p = s.verify.progress.unwrap();
        assert_eq!(p.warmup, Warmup::Time(Duration::from_secs(90)));
        assert_eq!(p.min_runs, 5);
        let s = parse(&with("progress = \"loss\"\nprune = \"top:3\"")).unwrap();
        let pruner = s
            .verify
            .progress
            .unwrap()
            .pruner(Direction::Maximize)
            .unwrap();
        assert_eq!(pruner.rule, PruneRule::Top(3));
        assert_eq!(pruner.direction, Direction::Maximize);
        // `halving` (which needs a warm-up to count its rungs in), `reach` (any warm-up, none
        // included), `reach:P` and `reach~A`.
        for (extra, rule) in [
            (
                "prune = \"halving\"\nprune_warmup = \"10 steps\"",
                PruneRule::Halving,
            ),
            ("prune = \"reach\"", PruneRule::Reach(100.0)),
            (
                "prune = \"reach:90\"\nprune_warmup = \"8 steps\"",
                PruneRule::Reach(90.0),
            ),
            (
                "prune = \"reach~0.12\"\nprune_min_runs = 5",
                PruneRule::ReachTight(0.12),
            ),
        ] {
            let s = parse(&with(&format!("progress = \"loss\"\n{extra}")))
                .unwrap_or_else(|e| panic!("{extra}: {e}"));
            assert_eq!(s.verify.progress.unwrap().prune, Some(rule), "{extra}");
        }
        for warmup in [
            "",
            "\nprune_warmup = \"0 steps\"",
            "\nprune_warmup = \"0s\"",
        ] {
            let e = parse(&with(&format!(
                "progress = \"loss\"\nprune = \"halving\"{warmup}"
            )))
            .unwrap_err()
            .to_string();
            assert!(e.contains("set prune_warmup"), "{warmup}: {e}");
        }
        // Recording curves without pruning.
        let s = parse(&with("progress = \"loss\"")).unwrap();
        assert!(s
            .verify
            .progress
            .unwrap()
            .pruner(Direction::Minimize)
            .is_none());
        // Errors name the line and the key.
        let cases = [
            ("prune = \"median\"", "verify.prune", "needs `progress`"),
            (
                "progress = \"loss\"\nprune = \"mean\"",
                "verify.prune",
                "not a pruning rule",
            ),
            (
                "progress = \"loss\"\nprune = \"top:0\"",
                "verify.prune",
                "did you mean \"top:3\"",
            ),
            (
                "progress = \"loss\"\nprune = \"best\"",
                "verify.prune",
                "did you mean \"top:3\"",
            ),
            (
                "progress = \"loss\"\nprune = \"reach:0\"",
                "verify.prune",
                "\"reach:P\" with 0 < P <= 100",
            ),
            (
                "progress = \"loss\"\nprune = \"reach~1\"",
                "verify.prune",
                "\"reach~A\" with 0 < A < 1",
            ),
            (
                "progress = \"loss\"\nprune = \"reach~1.5\"",
                "verify.prune",
                "(A is between 0 and 1, not `1.5`",
            ),
            (
                "progress = \"loss\"\nprune = \"mediam\"",
                "verify.prune",
                "(did you mean \"median\"?)",
            ),
            (
                "progress = \"loss\"\nprune = \"median:50\"",
                "verify.prune",
                "(did you mean \"percentile:50\"?)",
            ),
            (
                "progress = \"loss (\"",
                "verify.progress",
                "neither a metric name",
            ),
            (
                "progress = \"loss\"\nprune_warmup = \"9 steps\"",
                "verify.prune_warmup",
                "only means something with `prune`",
            ),
            (
                "progress = \"loss\"\nprune = \"median\"\nprune_warmup = \"soon\"",
                "verify.prune_warmup",
                "number of steps",
            ),
            (
                "progress = \"loss\"\nprune = \"median\"\nprune_warmup = \"300\"",
                "verify.prune_warmup",
                "`300` has no unit: write \"300 steps\" or \"300s\"",
            ),
            (
                "progress = \"loss\"\nprune = \"median\"\nprune_warmup = 300",
                "verify.prune_warmup",
                "with its unit, as a string: \"300 steps\" or \"300s\"",
            ),
            (
                "progress = \"loss\"\nprune = \"median\"\nprune_warmup = \"1000h\"",
                "verify.prune_warmup",
                "a warm-up of 1000h00m is not shorter than timeout (",
            ),
            (
                "progress = \"loss\"\nprune = \"median\"\nprune_min_runs = 0",
                "verify.prune_min_runs",
                "at least 1",
            ),
        ];
        for (extra, key, says) in cases {
            let e = err(&with(extra));
            assert_eq!(e.key, key, "{extra}: {e}");
            assert!(e.line >= 14, "{extra}: {e}");
            assert!(e.message.contains(says), "{extra}: {e}");
        }
        let e = err(&with("progres = \"loss\""));
        assert!(e.to_string().contains("progress"), "{e}");
    }
}
