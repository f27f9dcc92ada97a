//! What a run learned, for the report's reader in the morning: for each knob, where it was
//! tried, where the best tenth of the measured configurations sit and where it failed; the
//! failures grouped by cause; and what pruning stopped and the verifier time it saved. Worked
//! out from the experiments the report lists (the newest thousand of a long run).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::store::{ExperimentRecord, Status};

/// The report's tables of what was learned (each empty when there is nothing to say).
#[derive(Debug, Default)]
pub struct Learned {
    /// Per knob: name, baseline, best, tried, best tenth, failed at.
    pub knobs: Vec<Vec<String>>,
    /// Per cause: cause, status, count, experiments.
    pub failures: Vec<Vec<String>>,
    /// One row: pruned, at steps, their verifier time, saved.
    pub pruning: Vec<Vec<String>>,
}

/// The knobs table's column heads.
pub const KNOB_HEAD: [&str; 6] = [
    "knob",
    "baseline",
    "best",
    "tried (finished runs)",
    "best tenth of the finished runs",
    "failed at",
];
/// The failures table's column heads.
pub const FAILURE_HEAD: [&str; 4] = [
    "cause (the first one's words)",
    "status",
    "count",
    "experiments",
];
/// The pruning table's column heads.
pub const PRUNING_HEAD: [&str; 4] = [
    "pruned",
    "at step (median, range)",
    "their verifier time",
    "saved (against the median finished run)",
];

/// What `exps` (in order) say was learned; `minimize`: the objective's direction; `best`: the
/// run's best experiment (the summary's: the keep decided last).
pub fn learned(exps: &[ExperimentRecord], minimize: bool, best: Option<u64>) -> Learned {
    Learned {
        knobs: knob_rows(exps, minimize, best),
        failures: failure_rows(exps),
        pruning: pruning_rows(exps),
    }
}

fn finished(e: &ExperimentRecord) -> bool {
    matches!(
        e.status(),
        Status::Baseline | Status::Keep | Status::Discard
    ) && e.objective.is_some_and(f64::is_finite)
}

fn failed(e: &ExperimentRecord) -> bool {
    matches!(
        e.status(),
        Status::Crash | Status::Timeout | Status::Violation
    )
}

fn config(e: &ExperimentRecord) -> Option<&serde_json::Map<String, Value>> {
    e.config.as_ref().and_then(Value::as_object)
}

fn knob_rows(exps: &[ExperimentRecord], minimize: bool, best: Option<u64>) -> Vec<Vec<String>> {
    let mut names: Vec<&String> = Vec::new();
    for c in exps.iter().filter_map(config) {
        for k in c.keys() {
            if !names.contains(&k) {
                names.push(k);
            }
        }
    }
    let mut done: Vec<&ExperimentRecord> = exps.iter().filter(|e| finished(e)).collect();
    // Best first.
    done.sort_by(|a, b| {
        let (a, b) = (a.objective.unwrap_or(0.0), b.objective.unwrap_or(0.0));
        if minimize {
            a.total_cmp(&b)
        } else {
            b.total_cmp(&a)
        }
    });
    let tenth = done.len().div_ceil(10).max(3).min(done.len());
    let baseline = exps.iter().find(|e| e.status() == Status::Baseline);
    // Not among them when the listing is the newest of a long run: then not shown.
    let best = best.and_then(|n| exps.iter().find(|e| e.n == n));
    let failures: Vec<&ExperimentRecord> = exps.iter().filter(|e| failed(e)).collect();
    names
        .into_iter()
        .map(|name| {
            let of = |e: &ExperimentRecord| config(e).and_then(|c| c.get(name)).cloned();
            let tried: Vec<Value> = done.iter().filter_map(|e| of(e)).collect();
            let top: Vec<Value> = done[..tenth].iter().filter_map(|e| of(e)).collect();
            let bad: Vec<Value> = failures.iter().filter_map(|e| of(e)).collect();
            let few = discrete(&tried, &bad);
            vec![
                name.clone(),
                baseline.and_then(of).map_or("-".into(), |v| show(&v)),
                best.and_then(of).map_or("-".into(), |v| show(&v)),
                spread(&tried, true, few),
                spread(&top, false, few),
                failed_at(&bad, &tried, few),
            ]
        })
        .collect()
}

/// A knob's value as the report shows it: a number to four significant digits, a text as is.
fn show(v: &Value) -> String {
    match v {
        Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            if x != 0.0 && (x.abs() < 1e-3 || x.abs() >= 1e5) {
                format!("{x:.3e}")
            } else {
                let s = format!("{x:.4}");
                s.trim_end_matches('0').trim_end_matches('.').to_string()
            }
        }
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Whether a knob takes few values (a choice, a text, a small whole number): its values are
/// listed, not spanned.
fn discrete(tried: &[Value], bad: &[Value]) -> bool {
    let whole = |v: &Value| v.as_i64().is_some() || v.as_u64().is_some();
    !tried.iter().chain(bad).all(Value::is_number)
        || (tried.iter().chain(bad).all(whole) && distinct(tried).len() <= 12)
}

/// The distinct values as shown, numbers in their order, texts in theirs.
fn distinct(values: &[Value]) -> Vec<String> {
    let mut v: Vec<&Value> = values.iter().collect();
    v.sort_by(|a, b| match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        _ => show(a).cmp(&show(b)),
    });
    let mut out: Vec<String> = v.into_iter().map(show).collect();
    out.dedup();
    out
}

/// Where `values` lie: `lo .. hi` for numbers (with how many distinct, when `count`), or the
/// distinct values of a knob of `few` values.
fn spread(values: &[Value], count: bool, few: bool) -> String {
    if values.is_empty() {
        return "-".into();
    }
    let nums: Vec<f64> = values.iter().filter_map(Value::as_f64).collect();
    let distinct = distinct(values);
    if !few && nums.len() == values.len() {
        let lo = nums.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = nums.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let range = if lo == hi {
            show(&number(lo))
        } else {
            format!("{} .. {}", show(&number(lo)), show(&number(hi)))
        };
        return if count {
            format!("{range} ({} values)", distinct.len())
        } else {
            range
        };
    }
    distinct.join(", ")
}

fn number(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9e15 {
        // A whole number within i64's exact range: the cast cannot wrap.
        Value::from(x as i64)
    } else {
        serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
    }
}

/// Where a knob's failed configurations lie: for a knob of few values (a choice, a text, a
/// small whole number), the values that never finished (what the program refuses, likely);
/// else the range of the failed runs' values.
fn failed_at(bad: &[Value], tried: &[Value], few: bool) -> String {
    if bad.is_empty() {
        return "-".into();
    }
    let finished = distinct(tried);
    let never: Vec<String> = distinct(bad)
        .into_iter()
        .filter(|v| !finished.contains(v))
        .collect();
    if few && !never.is_empty() {
        return format!("{} (never finished)", never.join(", "));
    }
    format!("{} in {} failed runs", spread(bad, false, few), bad.len())
}

/// A failure's reason with its numbers made alike, so that failures of one cause group.
fn cause_key(reason: &str) -> String {
    numbers_as(reason, "#").to_lowercase()
}

/// `reason` cut into runs of number and of other text (`(true, "12")`, `(false, "step ")`).
fn number_runs(reason: &str) -> Vec<(bool, String)> {
    let mut parts: Vec<(bool, String)> = Vec::new();
    for c in reason.chars() {
        let digit = c.is_ascii_digit() || (c == '.' && parts.last().is_some_and(|(d, _)| *d));
        match parts.last_mut() {
            Some((d, text)) if *d == digit => text.push(c),
            _ => parts.push((digit, c.to_string())),
        }
    }
    parts
}

/// The reason a group of failures of one cause is shown with: its first member's, each number
/// that differs between members (`varies`, by run) written `N`: `duplicate of #N (identical
/// files)`, `exited with status 1: loss diverged at step N`.
fn shown_reason(first: &str, varies: &[bool]) -> String {
    number_runs(first)
        .into_iter()
        .zip(varies.iter().copied().chain(std::iter::repeat(false)))
        .map(|((_, text), v)| if v { "N".to_string() } else { text })
        .collect()
}

/// `reason` with each number in it written `as_what`.
fn numbers_as(reason: &str, as_what: &str) -> String {
    let mut out = String::with_capacity(reason.len());
    let mut in_number = false;
    for c in reason.chars() {
        if c.is_ascii_digit() || (in_number && c == '.') {
            if !in_number {
                out.push_str(as_what);
            }
            in_number = true;
        } else {
            in_number = false;
            out.push(c);
        }
    }
    out
}

fn failure_rows(exps: &[ExperimentRecord]) -> Vec<Vec<String>> {
    // Per cause: its status, the first reason, which of its number runs vary, the experiments.
    type Group = (Status, String, Vec<bool>, Vec<u64>);
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    for e in exps
        .iter()
        .filter(|e| failed(e) || e.status() == Status::Invalid)
    {
        let g = groups
            .entry(format!("{}\u{0}{}", e.status(), cause_key(&e.reason)))
            .or_insert_with(|| (e.status(), e.reason.clone(), Vec::new(), Vec::new()));
        // Reasons that differ in their numbers (`duplicate of #15`, `of #16`) are shown with
        // those numbers as `N`, not as the first one's.
        let (first, this) = (number_runs(&g.1), number_runs(&e.reason));
        g.2.resize(first.len(), false);
        for (i, (a, b)) in first.iter().zip(&this).enumerate() {
            g.2[i] |= a.0 && a.1 != b.1;
        }
        g.3.push(e.n);
    }
    let mut rows: Vec<(Status, String, Vec<u64>)> = groups
        .into_values()
        .map(|(status, first, varies, ns)| (status, shown_reason(&first, &varies), ns))
        .collect();
    rows.sort_by(|a, b| b.2.len().cmp(&a.2.len()).then(a.2[0].cmp(&b.2[0])));
    rows.into_iter()
        .map(|(status, reason, ns)| {
            let mut shown: Vec<String> = ns.iter().take(6).map(|n| format!("#{n}")).collect();
            if ns.len() > 6 {
                shown.push("...".into());
            }
            vec![
                crate::propose::prompt::sanitize(&reason, 160),
                status.to_string(),
                ns.len().to_string(),
                shown.join(" "),
            ]
        })
        .collect()
}

/// The step a pruned run was stopped at, from its reason (`pruned at step 300: ...`).
fn pruned_step(reason: &str) -> Option<f64> {
    let rest = reason.strip_prefix("pruned at step ")?;
    rest.split(':').next()?.trim().parse().ok()
}

fn pruning_rows(exps: &[ExperimentRecord]) -> Vec<Vec<String>> {
    let pruned: Vec<&ExperimentRecord> = exps
        .iter()
        .filter(|e| e.status() == Status::Pruned)
        .collect();
    if pruned.is_empty() {
        return Vec::new();
    }
    let mut steps: Vec<f64> = pruned
        .iter()
        .filter_map(|e| pruned_step(&e.reason))
        .collect();
    steps.sort_by(f64::total_cmp);
    let at = match (steps.first(), steps.last()) {
        (Some(lo), Some(hi)) => format!(
            "{} ({} .. {})",
            show(&number(crate::util::median(&steps))),
            show(&number(*lo)),
            show(&number(*hi))
        ),
        _ => "-".into(),
    };
    let secs = |ms: u64| ms as f64 / 1000.0;
    let spent: f64 = pruned.iter().map(|e| secs(e.verify_ms)).sum();
    // A finished run's own time: its verifier time over its measurements (confirm runs
    // measure the same code again; a pruned run was measured once).
    let full: Vec<f64> = exps
        .iter()
        .filter(|e| finished(e) && e.status() != Status::Baseline && e.verify_ms > 0)
        .map(|e| secs(e.verify_ms) / e.runs.len().max(1) as f64)
        .collect();
    let saved = if full.is_empty() {
        "-".into()
    } else {
        let median = crate::util::median(&full);
        let s: f64 = pruned
            .iter()
            .map(|e| (median - secs(e.verify_ms)).max(0.0))
            .sum();
        format!(
            "about {} ({:.0}% of a run each)",
            duration(s),
            100.0 * s / (median * pruned.len() as f64).max(1e-9)
        )
    };
    let runs = exps
        .iter()
        .filter(|e| finished(e) || e.status() == Status::Pruned)
        .count();
    vec![vec![
        format!("{} of {runs} runs", pruned.len()),
        at,
        duration(spent),
        saved,
    ]]
}

fn duration(secs: f64) -> String {
    crate::spec::format_duration(std::time::Duration::from_secs_f64(secs.max(0.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exp(
        n: u64,
        status: Status,
        objective: Option<f64>,
        cfg: Value,
        reason: &str,
    ) -> ExperimentRecord {
        ExperimentRecord {
            n,
            status: Some(status),
            objective,
            config: Some(cfg),
            reason: reason.into(),
            verify_ms: 10_000,
            finished_at: Some(n as f64),
            ..Default::default()
        }
    }

    #[test]
    fn knobs_failures_and_pruning_are_summed_up() {
        use serde_json::json;
        let refuse = "exited with status 1: AssertionError: BATCH must divide 4096";
        let mut exps = vec![exp(
            0,
            Status::Baseline,
            Some(1.0),
            json!({"LR": 0.01, "BATCH": 64}),
            "",
        )];
        // Lower is better: the learning rate near 0.1 does best.
        for (i, lr) in [0.02, 0.05, 0.08, 0.1, 0.12, 0.3, 0.5, 0.9]
            .iter()
            .enumerate()
        {
            let v = (lr - 0.1f64).abs();
            let status = if i == 3 {
                Status::Keep
            } else {
                Status::Discard
            };
            exps.push(exp(
                i as u64 + 1,
                status,
                Some(v),
                json!({"LR": lr, "BATCH": 64}),
                "",
            ));
        }
        exps.push(exp(
            9,
            Status::Crash,
            None,
            json!({"LR": 0.1, "BATCH": 48}),
            refuse,
        ));
        exps.push(exp(
            10,
            Status::Crash,
            None,
            json!({"LR": 0.2, "BATCH": 96}),
            refuse,
        ));
        exps.push(exp(
            11,
            Status::Crash,
            None,
            json!({"LR": 2.5, "BATCH": 64}),
            "exited with status 1: FloatingPointError: loss diverged at step 12",
        ));
        exps.push(exp(
            12,
            Status::Crash,
            None,
            json!({"LR": 3.0, "BATCH": 64}),
            "exited with status 1: FloatingPointError: loss diverged at step 3",
        ));
        let mut pruned = exp(
            13,
            Status::Pruned,
            None,
            json!({"LR": 0.6, "BATCH": 64}),
            "pruned at step 200: its best loss so far",
        );
        pruned.verify_ms = 2_500;
        exps.push(pruned);
        let l = learned(&exps, true, Some(4));
        // Knobs in the order of their names.
        let (batch, lr) = (&l.knobs[0], &l.knobs[1]);
        assert_eq!((batch[0].as_str(), lr[0].as_str()), ("BATCH", "LR"));
        assert_eq!((lr[1].as_str(), lr[2].as_str()), ("0.01", "0.1"));
        assert_eq!(lr[3], "0.01 .. 0.9 (9 values)");
        assert_eq!(lr[4], "0.08 .. 0.12", "the best three of nine");
        assert_eq!(lr[5], "0.1 .. 3 in 4 failed runs");
        assert_eq!(batch[3], "64", "a knob of few values lists them");
        assert_eq!(batch[5], "48, 96 (never finished)", "{batch:?}");
        // Two causes, the numbers in them made alike.
        assert_eq!(l.failures.len(), 2, "{:?}", l.failures);
        assert!(
            l.failures[0][0].contains("BATCH must divide"),
            "{:?}",
            l.failures
        );
        assert_eq!(l.failures[0][2], "2");
        assert_eq!(l.failures[0][3], "#9 #10");
        // What differs between them is said as N, what they share stays.
        assert!(
            l.failures[1][0]
                .contains("exited with status 1: FloatingPointError: loss diverged at step N"),
            "{:?}",
            l.failures
        );
        assert_eq!(l.failures[1][3], "#11 #12");
        // One pruned run at step 200, 2.5 s of the median run's 10 s.
        assert_eq!(l.pruning[0][0], "1 of 10 runs");
        assert_eq!(l.pruning[0][1], "200 (200 .. 200)");
        assert!(
            l.pruning[0][3].contains("(75% of a run each)"),
            "{:?}",
            l.pruning
        );
    }
}
