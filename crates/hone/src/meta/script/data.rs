//! hone's data as a script sees it: the view, the history, the knobs and a proposal as plain
//! Rhai maps and arrays (no hone type crosses into the sandbox).

use rhai::{Array, Dynamic, Map};

use super::super::{Candidate, View};
use crate::propose::knobs::{Config, Domain, Knob, KnobValue};
use crate::spec::Direction;
use crate::store::ExperimentRecord;

pub(super) fn knob_value(v: &KnobValue) -> Dynamic {
    match v {
        KnobValue::Bool(b) => Dynamic::from_bool(*b),
        KnobValue::Int(i) => Dynamic::from_int(*i),
        KnobValue::Float(x) => Dynamic::from_float(*x),
        KnobValue::Str(s) => Dynamic::from(s.clone()),
    }
}

pub(super) fn config_map(c: &Config) -> Dynamic {
    let m: Map = c.iter().map(|(k, v)| (k.into(), knob_value(v))).collect();
    Dynamic::from_map(m)
}

pub(super) fn opt_float(x: Option<f64>) -> Dynamic {
    x.map_or(Dynamic::UNIT, Dynamic::from_float)
}

/// The history as arrays of maps: `n, status, metric, delta, config, description`; `delta` is
/// the metric minus the best metric before the experiment.
pub fn history_array(history: &[ExperimentRecord], direction: Direction) -> Array {
    let mut best: Option<f64> = None;
    let mut out = Array::new();
    for e in history {
        out.push(experiment_map(e, best));
        if let (Some(m), true) = (
            e.objective,
            matches!(
                e.status(),
                crate::store::Status::Keep | crate::store::Status::Baseline
            ),
        ) {
            best = Some(match (best, direction) {
                (None, _) => m,
                (Some(b), Direction::Minimize) => b.min(m),
                (Some(b), Direction::Maximize) => b.max(m),
            });
        }
    }
    out
}

pub(super) fn experiment_map(e: &ExperimentRecord, best_before: Option<f64>) -> Dynamic {
    let mut m = Map::new();
    m.insert("n".into(), Dynamic::from_int(e.n as i64));
    m.insert(
        "status".into(),
        Dynamic::from(e.status().as_str().to_string()),
    );
    m.insert("metric".into(), opt_float(e.objective));
    m.insert(
        "delta".into(),
        opt_float(match (e.objective, best_before) {
            (Some(x), Some(b)) => Some(x - b),
            _ => None,
        }),
    );
    m.insert(
        "config".into(),
        View::config_of(e).map_or(Dynamic::UNIT, |c| config_map(&c)),
    );
    m.insert(
        "description".into(),
        Dynamic::from(crate::propose::prompt::sanitize(&e.description, 500)),
    );
    Dynamic::from_map(m)
}

pub(super) fn knob_map(k: &Knob) -> Dynamic {
    let mut m = Map::new();
    m.insert("name".into(), Dynamic::from(k.name.clone()));
    let (kind, lo, hi, choices) = match &k.domain {
        Domain::Float { lo, hi, .. } => (
            "float",
            Dynamic::from_float(*lo),
            Dynamic::from_float(*hi),
            Array::new(),
        ),
        Domain::Int { lo, hi, .. } => (
            "int",
            Dynamic::from_int(*lo),
            Dynamic::from_int(*hi),
            Array::new(),
        ),
        Domain::Bool => ("bool", Dynamic::UNIT, Dynamic::UNIT, Array::new()),
        Domain::Choice(c) => (
            "choice",
            Dynamic::UNIT,
            Dynamic::UNIT,
            c.iter().map(knob_value).collect(),
        ),
        Domain::Fixed => ("fixed", Dynamic::UNIT, Dynamic::UNIT, Array::new()),
    };
    m.insert("kind".into(), Dynamic::from(kind.to_string()));
    m.insert("lo".into(), lo);
    m.insert("hi".into(), hi);
    m.insert("choices".into(), Dynamic::from_array(choices));
    m.insert("value".into(), knob_value(&k.value));
    Dynamic::from_map(m)
}

/// The view as the script's `view` map.
pub fn view_map(view: &View<'_>) -> Dynamic {
    let history = history_array(view.history, view.direction);
    let best = view
        .best()
        .and_then(|b| view.history.iter().position(|e| e.n == b.n))
        .and_then(|i| history.get(i).cloned())
        .unwrap_or(Dynamic::UNIT);
    let mut m = Map::new();
    m.insert("n".into(), Dynamic::from_int(view.n as i64));
    m.insert("seed".into(), Dynamic::from_int(view.seed as i64));
    m.insert(
        "direction".into(),
        Dynamic::from(
            match view.direction {
                Direction::Minimize => "minimize",
                Direction::Maximize => "maximize",
            }
            .to_string(),
        ),
    );
    m.insert(
        "knobs_proposer".into(),
        Dynamic::from_bool(view.knobs_proposer),
    );
    m.insert(
        "knobs".into(),
        Dynamic::from_array(view.knobs.iter().map(knob_map).collect()),
    );
    m.insert("history".into(), Dynamic::from_array(history));
    m.insert("best".into(), best);
    Dynamic::from_map(m)
}

pub(super) fn proposal_map(c: &Candidate<'_>) -> Dynamic {
    let mut m = Map::new();
    m.insert(
        "description".into(),
        Dynamic::from(crate::propose::prompt::sanitize(c.description, 500)),
    );
    m.insert("config".into(), c.config.map_or(Dynamic::UNIT, config_map));
    m.insert(
        "diff".into(),
        c.diff
            .map_or(Dynamic::UNIT, |d| Dynamic::from(truncate(d, 16 * 1024))),
    );
    Dynamic::from_map(m)
}

pub(super) fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

// ---- what a script returns, checked and typed ----
