//! Pruning hopeless runs: reading a verifier's intermediate values (`[verify] progress`, a
//! curve of (step, value) points) and deciding whether a run still in progress is clearly
//! worse, at the same step, than the curves of the experiments that ran to the end
//! (`[verify] prune`). Both are pure: the engine feeds lines and curves, and stops the run.
//!
//! The rules: at step `s`, each reference curve that reaches `s` (its last step is `>= s`)
//! gives its value at its last step `<= s`; a curve that ended before `s` is left out (of
//! `min_runs`, the percentile and `top:K` alike), so a run longer than the references is not
//! judged against their final values.
//! With `percentile:P` (as Optuna's `MedianPruner` and `PercentilePruner`), a run is pruned
//! when its best value so far is worse than the P-th best percentile of those values
//! (`median` is `percentile:50`). With `top:K`, when it is worse than each of the K finished
//! runs with the best objectives (the incumbent among them) by more than a margin learned
//! from the references: the most that one of those K was behind, at `s`, a run it ended
//! better than. A keep must beat the incumbent, so the best runs are the reference, not the
//! median of all runs. With `reach` (verify/prune/reach.rs), when it is worse than every
//! finished run's value at `s` shifted by that run's own drop to its last value so that it
//! ends at the best last value among them: to be kept it would have to improve further after
//! `s` than any of them did (all in the curve's units; the objective is not read).
//! Nothing is pruned before the warm-up (steps or time) is over, nor
//! while fewer than `min_runs` curves reach that step (for `reach`, that it can use).

use std::time::Duration;

use regex::Regex;

use super::metrics::{is_metric_name, parse_line};
use super::Direction;

mod live;
mod reach;

pub use live::{LiveCurve, Point, JUDGE_INTERVAL, MAX_STORED, STORED_IN_FULL};
use reach::Bar;

/// Words of a value's name that make a printed progress line's value (what
/// [`Progress::suggest`] looks for).
const PROGRESS_WORDS: &[&str] = &[
    "loss",
    "bpb",
    "acc",
    "accuracy",
    "error",
    "err",
    "perplexity",
    "ppl",
    "nll",
    "mse",
    "mae",
    "rmse",
    "f1",
    "auc",
    "score",
    "reward",
];

/// How intermediate values are read from the verifier's output.
#[derive(Clone, Debug)]
pub enum Progress {
    /// A metric name: its value on metric lines that also carry `step` (`step=100 loss=2.31`,
    /// `METRIC step=100 loss=2.31`, `{"step": 100, "loss": 2.31}`).
    Metric(String),
    /// A regular expression with the named groups `step` and `value`.
    Regex { source: String, regex: Regex },
}

impl Progress {
    /// A metric name, or else a regex with groups `step` and `value`; the error says what to
    /// write instead.
    pub fn compile(text: &str) -> Result<Progress, String> {
        if is_metric_name(text) {
            return Ok(Progress::Metric(text.to_owned()));
        }
        let regex = Regex::new(text).map_err(|e| {
            format!("`{text}` is neither a metric name nor a valid regular expression: {e}")
        })?;
        let names: Vec<&str> = regex.capture_names().flatten().collect();
        for group in ["step", "value"] {
            if !names.contains(&group) {
                return Err(format!(
                    "the regex `{text}` has no group named `{group}`; write both, for example 'step (?P<step>[0-9]+) \\| loss (?P<value>[0-9.eE+-]+)', or give a metric name printed beside `step=` (progress = \"loss\")"
                ));
            }
        }
        Ok(Progress::Regex {
            source: text.to_owned(),
            regex,
        })
    }

    /// The text as written.
    pub fn as_str(&self) -> &str {
        match self {
            Progress::Metric(name) => name,
            Progress::Regex { source, .. } => source,
        }
    }

    /// A regex that reads a printed progress line (`step 50 | loss 0.6662 | 0.2s`: a `step`
    /// and its number, then a loss-like name and its number), and the value's name; `None`
    /// for a line that is not one.
    pub fn suggest(line: &str) -> Option<(String, String)> {
        static STEP: std::sync::OnceLock<Option<Regex>> = std::sync::OnceLock::new();
        static PAIR: std::sync::OnceLock<Option<Regex>> = std::sync::OnceLock::new();
        let step = STEP
            // No `(?i)`: the regex crate is built without Unicode case folding.
            .get_or_init(|| Regex::new(r"\b([Ss]tep|STEP)\b(\s*[:=]?\s*)\d+").ok())
            .as_ref()?;
        let pair = PAIR
            .get_or_init(|| {
                Regex::new(r"\b([A-Za-z_][A-Za-z0-9_]*)(\s*[:=]\s*|\s+)[-+]?[0-9][0-9.eE+-]*").ok()
            })
            .as_ref()?;
        let s = step.captures(line)?;
        let after = &line[s.get(0)?.end()..];
        let c = pair.captures_iter(after).find(|c| {
            let name = c[1].to_ascii_lowercase();
            name.split('_').any(|w| PROGRESS_WORDS.contains(&w))
        })?;
        let regex = format!(
            "{}{}(?P<step>\\d+).*?{}{}(?P<value>[0-9.eE+-]+)",
            regex::escape(&s[1]),
            regex::escape(&s[2]),
            regex::escape(&c[1]),
            regex::escape(&c[2])
        );
        Some((regex, c[1].to_string()))
    }

    /// The (step, value) a line carries, if any; both finite.
    pub fn read(&self, line: &str) -> Option<(f64, f64)> {
        let (step, value) = match self {
            Progress::Metric(name) => {
                let pairs = parse_line(line);
                let get = |n: &str| pairs.iter().rev().find(|(k, _)| k == n).map(|p| p.1);
                (get("step")?, get(name)?)
            }
            Progress::Regex { regex, .. } => {
                let c = regex.captures_iter(line).last()?;
                let number = |g: &str| c.name(g)?.as_str().trim().parse::<f64>().ok();
                (number("step")?, number("value")?)
            }
        };
        (step.is_finite() && value.is_finite()).then_some((step, value))
    }
}

impl serde::Serialize for Progress {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// The rule that stops a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PruneRule {
    /// `median` or `percentile:P`: worse than the P-th best percentile of every finished
    /// run's value at the same step (the best `P` percent survive; `median` is 50).
    Percentile(f64),
    /// `top:K`: worse, at the same step, than each of the K finished runs with the best
    /// objectives, by more than the margin (those K runs' values at that step, and how far
    /// behind a run they later beat any of them was there).
    Top(usize),
    /// `halving`: the percentile rule with a bar that rises at each multiple of the warm-up
    /// ([`HALVING`]: 75 from the warm-up, 50 from twice it, 25 from three times), so a clearly
    /// bad run stops early and one merely behind the best runs stops later, when the curves
    /// have had time to cross.
    Halving,
    /// `reach` or `reach:P`: worse, at the same step, than each finished run's curve shifted
    /// by its own last value to end at the best last value among them (P: the P-th most
    /// lenient of those shifted values, 100 for all of them): behind where a run that ends
    /// level with the best finished curve has been seen to be, so it cannot be kept.
    Reach(f64),
    /// `reach~A` (0 < A < 1): `reach` against the `k`-th most lenient of the `n` shifted
    /// curves, `k = max(1, floor(A (n + 1)))`: the bar tightens as finished curves accumulate
    /// (the most lenient curve while `n + 1 < 2 / A`); a run that would be kept, and whose
    /// further improvement is like theirs, is stopped with a chance of about `k / (n + 1)`.
    ReachTight(f64),
}

/// `halving`'s percentiles, from the warm-up, twice it and three times it on.
pub const HALVING: [f64; 3] = [75.0, 50.0, 25.0];

impl PruneRule {
    /// `median`, `percentile:P` with 0 < P < 100, `top:K` with K >= 1, `halving`, `reach`
    /// / `reach:P` with 0 < P <= 100, or `reach~A` with 0 < A < 1.
    pub fn parse(text: &str) -> Result<PruneRule, String> {
        let t = text.trim();
        if t == "median" {
            return Ok(PruneRule::Percentile(50.0));
        }
        if t == "halving" {
            return Ok(PruneRule::Halving);
        }
        if let Some(p) = number_after(t, "percentile:", |p: &f64| *p > 0.0 && *p < 100.0) {
            return Ok(PruneRule::Percentile(p));
        }
        if t == "reach" {
            return Ok(PruneRule::Reach(100.0));
        }
        if let Some(p) = number_after(t, "reach:", |p: &f64| *p > 0.0 && *p <= 100.0) {
            return Ok(PruneRule::Reach(p));
        }
        if let Some(a) = number_after(t, "reach~", |a: &f64| *a > 0.0 && *a < 1.0) {
            return Ok(PruneRule::ReachTight(a));
        }
        if let Some(k) = number_after(t, "top:", |k: &usize| *k >= 1) {
            return Ok(PruneRule::Top(k));
        }
        Err(format!(
            "`{text}` is not a pruning rule{}: write \"median\", \"percentile:P\" with 0 < P < 100, \"top:K\" with K >= 1, \"halving\", \"reach\", \"reach:P\" with 0 < P <= 100, or \"reach~A\" with 0 < A < 1 (README, \"Stopping hopeless runs\", says what each stops)",
            rule_hint(t)
        ))
    }
}

/// What `t`, no pruning rule, was most likely meant as.
fn rule_hint(t: &str) -> String {
    if let Some(n) = t.strip_prefix("reach~") {
        format!(" (A is between 0 and 1, not `{n}`: \"reach~0.12\" stops a would-be keep about one time in eight)")
    } else if let Some(n) = t.strip_prefix("reach:") {
        format!(" (P is above 0 and at most 100, not `{n}`)")
    } else if let Some(n) = t.strip_prefix("percentile:") {
        format!(" (P is between 0 and 100, not `{n}`: \"percentile:25\" keeps runs within the best quarter)")
    } else if let Some(n) = t
        .strip_prefix("median:")
        .or_else(|| t.strip_prefix("median "))
    {
        format!(" (did you mean \"percentile:{}\"?)", n.trim())
    } else if t.starts_with("top") || t == "best" || t == "incumbent" {
        " (did you mean \"top:3\"? K is a whole number from 1)".to_string()
    } else if t.starts_with("percentile") || t.starts_with("quantile") {
        " (did you mean \"percentile:25\"? P is between 0 and 100)".to_string()
    } else {
        match ["median", "halving", "reach"]
            .into_iter()
            .find(|name| crate::util::edit_distance(t, name) <= 2)
        {
            Some(name) => format!(" (did you mean \"{name}\"?)"),
            None => String::new(),
        }
    }
}

/// The number after `prefix` in `t` (surrounding space allowed), when `t` starts with `prefix`
/// and `ok` admits the number.
fn number_after<T: std::str::FromStr>(t: &str, prefix: &str, ok: impl Fn(&T) -> bool) -> Option<T> {
    t.strip_prefix(prefix)?.trim().parse::<T>().ok().filter(ok)
}

impl std::fmt::Display for PruneRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PruneRule::Percentile(p) if *p == 50.0 => f.write_str("median"),
            PruneRule::Percentile(p) => write!(f, "percentile:{p}"),
            PruneRule::Top(k) => write!(f, "top:{k}"),
            PruneRule::Halving => f.write_str("halving"),
            PruneRule::Reach(p) if *p == 100.0 => f.write_str("reach"),
            PruneRule::Reach(p) => write!(f, "reach:{p}"),
            PruneRule::ReachTight(a) => write!(f, "reach~{a}"),
        }
    }
}

impl serde::Serialize for PruneRule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// How long a run is left alone before it may be pruned.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Warmup {
    /// Until its step reaches this.
    Steps(f64),
    /// Until it has run this long.
    Time(Duration),
}

impl Warmup {
    /// No warm-up at all: a run may be judged from its first point.
    pub fn is_zero(self) -> bool {
        match self {
            Warmup::Steps(s) => s <= 0.0,
            Warmup::Time(t) => t.is_zero(),
        }
    }

    fn over(self, step: f64, elapsed: Duration) -> bool {
        match self {
            Warmup::Steps(s) => step >= s,
            Warmup::Time(t) => elapsed >= t,
        }
    }

    /// How many whole warm-ups a run at `step` after `elapsed` has gone through (a zero
    /// warm-up counts as gone through any number of times).
    fn passed(self, step: f64, elapsed: Duration) -> f64 {
        let (at, length) = match self {
            Warmup::Steps(s) => (step, s),
            Warmup::Time(t) => (elapsed.as_secs_f64(), t.as_secs_f64()),
        };
        if length > 0.0 {
            (at / length).floor()
        } else {
            f64::INFINITY
        }
    }
}

impl serde::Serialize for Warmup {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Warmup::Steps(n) => s.collect_str(&format_args!("{n} steps")),
            Warmup::Time(d) => s.collect_str(&format_args!("{}s", d.as_secs_f64())),
        }
    }
}

/// A curve: (step, value) points in the order of their steps.
pub type Curve = Vec<(f64, f64)>;

/// A finished run a running one is compared with: its curve, and its objective (`None` when
/// it has none, e.g. a baseline recorded without one; such a run never ranks in `top:K`).
#[derive(Clone, Debug, PartialEq)]
pub struct Reference {
    pub curve: Curve,
    pub objective: Option<f64>,
}

/// The pruner of one run: its rule, the objective's direction, the warm-up and how many
/// reference curves it needs.
#[derive(Clone, Copy, Debug)]
pub struct Pruner {
    pub rule: PruneRule,
    pub direction: Direction,
    pub warmup: Warmup,
    pub min_runs: usize,
}

/// Why a run was pruned: where, its best value, and what it was compared with.
#[derive(Clone, Debug, PartialEq)]
pub struct Pruned {
    pub step: f64,
    pub best: f64,
    pub threshold: f64,
    pub runs: usize,
    /// The rule that stopped it there: the configured one, or for `halving` the percentile
    /// of its rung.
    pub rule: PruneRule,
}

impl Pruner {
    /// Whether a run whose best value so far is `best`, now at `step` after `elapsed`, is
    /// worse than `references` allow.
    pub fn judge(
        &self,
        references: &[Reference],
        best: f64,
        step: f64,
        elapsed: Duration,
    ) -> Option<Pruned> {
        if !self.warmup.over(step, elapsed) {
            return None;
        }
        let at: Vec<(f64, &Reference)> = references
            .iter()
            .filter_map(|r| value_at(&r.curve, step).map(|v| (v, r)))
            .collect();
        if at.is_empty() || at.len() < self.min_runs {
            return None;
        }
        let rule = self.rule_at(step, elapsed);
        // The threshold, and how many references it was worked from (`min_runs` is checked
        // again against those: `reach` leaves out a curve it cannot shift).
        let (threshold, runs) = match rule {
            PruneRule::Percentile(p) => (self.percentile(&at, p), at.len()),
            PruneRule::Top(k) => self.top(&at, k)?,
            PruneRule::Reach(p) => reach::threshold(self.direction, &at, Bar::Percentile(p))?,
            PruneRule::ReachTight(a) => reach::threshold(self.direction, &at, Bar::Tightened(a))?,
            PruneRule::Halving => return None, // `rule_at` never answers it
        };
        if runs == 0 || runs < self.min_runs {
            return None;
        }
        self.direction.better(threshold, best).then_some(Pruned {
            step,
            best,
            threshold,
            runs,
            rule,
        })
    }

    /// The rule that applies at `step` after `elapsed` (the warm-up over): the configured
    /// one, or for `halving` the percentile of the rung reached.
    pub fn rule_at(&self, step: f64, elapsed: Duration) -> PruneRule {
        match self.rule {
            PruneRule::Halving => {
                let rung = self.warmup.passed(step, elapsed).clamp(1.0, 3.0) as usize;
                PruneRule::Percentile(HALVING[rung - 1])
            }
            rule => rule,
        }
    }

    /// The `p`-th best percentile of the values `at` the step.
    fn percentile(&self, at: &[(f64, &Reference)], p: f64) -> f64 {
        let mut v: Vec<f64> = at.iter().map(|a| a.0).collect();
        v.sort_by(f64::total_cmp);
        let q = match self.direction {
            Direction::Minimize => p,
            Direction::Maximize => 100.0 - p,
        };
        quantile(&v, q / 100.0)
    }

    /// `top:K`'s threshold at a step, from each run's (value there, objective): the worst
    /// value of the K runs with the best objectives, made worse by the margin, the most any
    /// of them was behind there a run that ended worse (0 when none was); and how many runs
    /// were ranked. A reference without a finite objective (a baseline or discard recorded
    /// without its metric; crashed and pruned runs are never references) can be neither
    /// among the K nor in the margin, so it does not count towards `min_runs` either. `None`
    /// when no run has one. Worked in "lower is better" (values negated when maximizing).
    fn top(&self, at: &[(f64, &Reference)], k: usize) -> Option<(f64, usize)> {
        let sign = match self.direction {
            Direction::Minimize => 1.0,
            Direction::Maximize => -1.0,
        };
        let mut ranked: Vec<(f64, f64)> = at
            .iter()
            .filter_map(|(v, r)| {
                r.objective
                    .filter(|o| o.is_finite())
                    .map(|o| (v * sign, o * sign))
            })
            .collect();
        ranked.sort_by(|a, b| a.1.total_cmp(&b.1));
        let top = &ranked[..k.min(ranked.len())];
        let worst = top.iter().map(|t| t.0).reduce(f64::max)?;
        let margin = top
            .iter()
            .flat_map(|t| {
                ranked
                    .iter()
                    .filter(move |r| r.1 > t.1)
                    .map(move |r| t.0 - r.0)
            })
            .fold(0.0, f64::max);
        Some(((worst + margin) * sign, ranked.len()))
    }
}

/// A curve's value at its last step `<= step`; `None` before its first step and after its
/// last one (a run that stopped before `step` says nothing of a run that gets there: its last
/// value is not what it would have been at `step`).
fn value_at(curve: &[(f64, f64)], step: f64) -> Option<f64> {
    if curve.last()?.0 < step {
        return None;
    }
    let i = curve.partition_point(|p| p.0 <= step);
    i.checked_sub(1).map(|i| curve[i].1)
}

/// Whether `step` lies in the last tenth of the `references` that reach it (by the median of
/// their last steps): a run there has spent nearly all its time, so stopping it would save
/// little and lose the value it is about to print (which the search would then count as the
/// worst). A run is not pruned there, whatever the rule.
pub fn near_the_end(references: &[Reference], step: f64) -> bool {
    let mut ends: Vec<f64> = references
        .iter()
        .filter_map(|r| r.curve.last().map(|p| p.0))
        .filter(|end| *end >= step)
        .collect();
    if ends.is_empty() {
        return false;
    }
    ends.sort_by(f64::total_cmp);
    step >= END_SHARE * quantile(&ends, 0.5)
}

/// Past this share of the reference runs' length a run is not pruned ([`near_the_end`]).
pub const END_SHARE: f64 = 0.9;

/// The `q` quantile (0..=1) of sorted, non-empty `v`, interpolated linearly (as numpy).
fn quantile(v: &[f64], q: f64) -> f64 {
    let pos = q * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests;
