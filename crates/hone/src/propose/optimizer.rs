//! The `knobs` proposer: finds the knobs in the editable files, asks the sampler for an untried
//! configuration, and rewrites the literals in the worktree.

use std::collections::BTreeMap;

use super::knobs::{self, Config, Knob, Observation};
use super::{editable_files, Proposal, ProposeContext, ProposeError, Proposer};
use crate::spec::Direction;
use crate::store::{ExperimentRecord, NarrowedRange, NarrowingChange, Status};

mod observed;

pub use observed::{Moves, Observed};

/// The built-in optimizer over literal constants. It keeps, across proposals, the run's
/// history converted to observations ([`Observed`]) and the sampler's index of what it tried
/// (the history only grows during a run; a resumed run starts a new proposer, which converts
/// and indexes it whole once).
#[derive(Default)]
pub struct KnobsProposer {
    cache: knobs::SamplerCache,
    observed: Observed,
}

/// Has the sampler's index follow what moved in the observations it indexes (the view was
/// converted anew, or compacted: see [`Moves`]).
fn follow(cache: &mut knobs::SamplerCache, moves: Moves) {
    if moves.anew {
        cache.forget_positions();
    }
    for (keep, dropped) in &moves.kept {
        cache.retain_history(keep, dropped);
    }
}

/// Every knob in the editable files of the worktree, with each file's text.
pub fn find_knobs(
    ctx: &ProposeContext<'_>,
) -> Result<(Vec<Knob>, BTreeMap<String, String>), ProposeError> {
    let mut all = Vec::new();
    let mut texts = BTreeMap::new();
    for f in editable_files(ctx)? {
        let path = ctx.worktree.join(&f);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue; // binary or unreadable files hold no knobs
        };
        let mut found =
            knobs::discover(&f, &text).map_err(|e| ProposeError::Fatal(e.to_string()))?;
        // Search domains come from the run's start: an inferred range ("a decade either way")
        // must not drift with the value the search has reached since.
        if ctx.base_commit != ctx.parent_commit {
            let base = ctx.git.file_at(ctx.base_commit, &f).ok();
            let base_text = base.as_deref().and_then(|b| std::str::from_utf8(b).ok());
            if let Some(Ok(start)) = base_text.map(|t| knobs::discover(&f, t)) {
                for k in &mut found {
                    if let Some(s) = start.iter().find(|s| s.name == k.name) {
                        k.domain = s.domain.clone();
                    }
                }
            }
        }
        for mut k in found {
            if all.iter().any(|o: &Knob| o.name == k.name) {
                continue; // the first file that defines a name owns it
            }
            // `[loop] fixed`: a constant that sets the measurement is never searched, whatever
            // its annotation says (`SEEDS[0]` is fixed with `SEEDS`).
            let base_name = k.name.split('[').next().unwrap_or(&k.name);
            if ctx.spec.loop_.fixed.iter().any(|f| f == base_name) {
                k.domain = knobs::Domain::Fixed;
            }
            all.push(k);
        }
        texts.insert(f, text);
    }
    Ok((all, texts))
}

/// What the sampler learns from a run's history. Constant liar: a configuration still being
/// verified (a `running` experiment of a parallel run) counts as tried, with the worst value
/// measured so far, so the model looks elsewhere while it runs. A `pruned` one (stopped as
/// clearly worse than the finished runs: it has no value of its own) counts at that worst
/// value too: below every finished configuration, as Optuna's TPE ranks a pruned trial, but
/// above a crash (no value, the worst of all), which it did not do.
pub fn observations(history: &[ExperimentRecord], minimize: bool) -> Vec<Observation> {
    let measured = |e: &&ExperimentRecord| {
        matches!(
            e.status(),
            Status::Baseline | Status::Keep | Status::Discard
        )
    };
    // A NaN measured is left out: with it in, the fold would depend on its order.
    let worst = history
        .iter()
        .filter(measured)
        .filter_map(|e| e.objective.filter(|v| !v.is_nan()))
        .reduce(|a, b| if (a > b) == minimize { a } else { b });
    history
        .iter()
        .filter_map(|e| {
            let config = config_from_json(e.config.as_ref()?)?;
            let objective = match e.status() {
                Status::Running | Status::Pruned => worst,
                _ if measured(&e) => e.objective,
                _ => None,
            };
            Some(Observation { config, objective })
        })
        .collect()
}

/// The indices into [`observations`] of the same history of the running and pruned
/// experiments, whose value there is a stand-in (`SamplerGuide::stand_ins`; what [`Observed`]
/// keeps up to date; the reference its tests compare with).
pub fn stand_ins(history: &[ExperimentRecord]) -> Vec<u32> {
    history
        .iter()
        .filter(|e| e.config.as_ref().and_then(config_from_json).is_some())
        .enumerate()
        .filter(|(_, e)| matches!(e.status(), Status::Running | Status::Pruned))
        .map(|(i, _)| i as u32)
        .collect()
}

/// Whether an experiment's configuration proved infeasible (`Some(true)`: it crashed, timed
/// out or violated a constraint), feasible (`Some(false)`: it was measured) or neither (`None`:
/// running, rejected before it ran, aborted by an interruption).
fn infeasible(status: Status) -> Option<bool> {
    match status {
        _ if INFEASIBLE.contains(&status) => Some(true),
        // A pruned run ran without crashing: its configuration is feasible.
        Status::Baseline | Status::Keep | Status::Discard | Status::Pruned => Some(false),
        _ => None,
    }
}

/// The statuses of an experiment whose configuration the knobs search counts as infeasible.
pub const INFEASIBLE: [Status; 3] = [Status::Crash, Status::Timeout, Status::Violation];

/// The configurations of a run's history that proved infeasible, in order (what [`Observed`]
/// keeps up to date; the reference its tests compare with).
#[cfg(test)]
fn infeasible_configs(history: &[ExperimentRecord]) -> Vec<Config> {
    history
        .iter()
        .filter(|e| infeasible(e.status()) == Some(true))
        .filter_map(|e| config_from_json(e.config.as_ref()?))
        .collect()
}

/// The configurations of a run's history still being measured (`running`, in a parallel run):
/// the sampler has them at the worst value so far, and its feasibility model leaves them out
/// of what finished, as `hone log` does.
fn running_configs(history: &[ExperimentRecord]) -> Vec<Config> {
    history
        .iter()
        .filter(|e| e.status() == Status::Running)
        .filter_map(|e| config_from_json(e.config.as_ref()?))
        .collect()
}

/// Where crashes narrowed the knobs' explored ranges over a run (`hone log`, `hone show`):
/// each narrowing with the number of the experiment after which it appeared or changed, in
/// the order of the experiments' numbers.
pub fn narrowings(history: &[ExperimentRecord]) -> Vec<(u64, knobs::feasible::Narrowing)> {
    let mut h = RunNarrowings::default();
    let mut out: Vec<(u64, knobs::feasible::Narrowing)> = Vec::new();
    for e in history {
        out.extend(h.next(e).into_iter().map(|x| (e.n, x)));
    }
    // The store reads experiments in order already; a stable sort keeps it so regardless.
    out.sort_by_key(|(n, _)| *n);
    out
}

/// [`narrowings`] one experiment at a time, in order: what a reader streaming a run (`hone
/// log`) prints under each experiment, without reading the run beforehand.
#[derive(Default)]
pub struct RunNarrowings(knobs::feasible::NarrowingHistory);

impl RunNarrowings {
    /// The narrowings that appeared or changed after experiment `e` (the next in order).
    pub fn next(&mut self, e: &ExperimentRecord) -> Vec<knobs::feasible::Narrowing> {
        match e.config.as_ref().and_then(config_from_json) {
            Some(config) => self.0.push(&config, infeasible(e.status())),
            // An experiment without a configuration is not part of the knobs' history.
            None => Vec::new(),
        }
    }

    /// The narrowings in force after the experiments given so far: [`narrowed_ranges`] of
    /// them, without reading them again.
    pub fn current(&self) -> Vec<knobs::feasible::Narrowing> {
        self.0.current()
    }

    /// [`RunNarrowings::next`] with the narrowings that went too, as the run's narrowing log
    /// holds them (`store::narrowings`).
    pub fn next_changes(&mut self, e: &ExperimentRecord) -> Vec<NarrowingChange> {
        let Some(config) = e.config.as_ref().and_then(config_from_json) else {
            return Vec::new();
        };
        self.0
            .push_changes(&config, infeasible(e.status()))
            .into_iter()
            .map(|c| NarrowingChange {
                n: e.n,
                above: c.side == knobs::feasible::Side::Above,
                range: c.now.map(|w| NarrowedRange {
                    edge: w.edge,
                    other: w.other,
                    nearest: w.nearest_crash,
                    crashes: w.crashes as u64,
                }),
                knob: c.knob,
            })
            .collect()
    }
}

/// What a run's narrowing log up to experiment N says: the narrowings in force after N (by
/// knob name, then side, below first) and every narrowing that appeared or changed, with the
/// experiment after which it did: [`RunNarrowings::current`] and the narrowings of
/// [`RunNarrowings::next`] after the experiments up to N, read from a few rows.
#[allow(clippy::type_complexity)]
pub fn narrowings_from_log(
    log: &[NarrowingChange],
) -> (
    Vec<knobs::feasible::Narrowing>,
    Vec<(u64, knobs::feasible::Narrowing)>,
) {
    use knobs::feasible::{Narrowing, Side};
    let mut now: BTreeMap<(&str, bool), Narrowing> = BTreeMap::new();
    let mut events = Vec::new();
    for c in log {
        // Below sorts before above, as `current` lists them.
        let key = (c.knob.as_str(), c.above);
        match &c.range {
            Some(r) => {
                let w = Narrowing {
                    knob: c.knob.clone(),
                    side: if c.above { Side::Above } else { Side::Below },
                    edge: r.edge,
                    other: r.other,
                    nearest_crash: r.nearest,
                    crashes: r.crashes as usize,
                };
                now.insert(key, w.clone());
                events.push((c.n, w));
            }
            None => {
                now.remove(&key);
            }
        }
    }
    (now.into_values().collect(), events)
}

/// The knobs' explored ranges narrowed by crashes at the end of `history`. The sampler's
/// next proposal avoids these and, sooner, any edge with two crashes beyond it
/// (`knobs::sampler::feasible`).
pub fn narrowed_ranges(history: &[ExperimentRecord]) -> Vec<knobs::feasible::Narrowing> {
    let (mut finished, mut bad) = (Vec::new(), Vec::new());
    for e in history {
        let Some(config) = e.config.as_ref().and_then(config_from_json) else {
            continue;
        };
        match infeasible(e.status()) {
            Some(true) => bad.push(config),
            Some(false) => finished.push(config),
            None => {}
        }
    }
    let finished: Vec<&Config> = finished.iter().collect();
    let bad: Vec<&Config> = bad.iter().collect();
    knobs::feasible::narrowings(&finished, &bad)
}

/// A stored configuration read back: what `Config`'s own (untagged) deserialization gives,
/// without it trying each kind of value in turn (every miss builds and formats an error:
/// most of the time `hone show` spent on a long run's configurations).
fn config_from_json(v: &serde_json::Value) -> Option<Config> {
    use serde_json::Value;
    let Value::Object(map) = v else {
        return None;
    };
    map.iter()
        .map(|(k, v)| {
            let value = match v {
                Value::Bool(b) => knobs::KnobValue::Bool(*b),
                // An integer that fits an i64 is one; a larger one reads as a float.
                Value::Number(x) => match x.as_i64() {
                    Some(i) => knobs::KnobValue::Int(i),
                    None => knobs::KnobValue::Float(x.as_f64()?),
                },
                Value::String(s) => knobs::KnobValue::Str(s.clone()),
                Value::Null | Value::Array(_) | Value::Object(_) => return None,
            };
            Some((k.clone(), value))
        })
        .collect()
}

impl Proposer for KnobsProposer {
    fn name(&self) -> &str {
        "knobs"
    }

    fn resamples(&self) -> bool {
        true
    }

    fn describe_baseline(&mut self, ctx: &ProposeContext<'_>) -> Option<serde_json::Value> {
        let (found, _) = find_knobs(ctx).ok()?;
        serde_json::to_value(knobs::config_of(&found)).ok()
    }

    fn holds_configs_through(&self) -> Option<u64> {
        self.observed.through()
    }

    fn prime(&mut self, history: &[ExperimentRecord], minimize: bool) {
        self.observed.sync(history, minimize);
    }

    fn propose(&mut self, ctx: &ProposeContext<'_>) -> Result<Proposal, ProposeError> {
        let (found, texts) = find_knobs(ctx)?;
        let tunable: Vec<&Knob> = found
            .iter()
            .filter(|k| !matches!(k.domain, knobs::Domain::Fixed))
            .collect();
        if tunable.is_empty() {
            return Err(ProposeError::Fatal(format!(
                "no tunable knobs in the editable files ({}) as committed at the run's start: write \
                 top-level constants such as `LEARNING_RATE = 0.04  # hone: log 1e-4..1.0` and \
                 commit them, or use [agent] kind = \"command\"",
                ctx.spec.loop_.editable.join(", ")
            )));
        }
        let incumbent = knobs::config_of(&found);
        let minimize = ctx.spec.verify.direction == Direction::Minimize;
        self.observed.sync(ctx.history, minimize);
        follow(&mut self.cache, self.observed.take_moves());
        let (history, crashed) = (self.observed.observations(), self.observed.infeasible());
        let pending = running_configs(ctx.history);
        let g = ctx.guidance;
        let candidates: Vec<Config> = g.candidates.iter().map(|(_, c)| c.clone()).collect();
        let guide = knobs::SamplerGuide {
            candidates: &candidates,
            frozen: &g.frozen,
            focus: &g.focus,
            step_scale: g.step_scale,
            mode: g.mode,
            avoid: &g.avoid,
            infeasible: crashed,
            pending: &pending,
            stand_ins: self.observed.stand_ins(),
        };
        // Counted from the baseline: a baseline that failed first (a misspelt metric, fixed
        // since) does not move the design on (its first point, the centre, is index 1).
        let baseline = ctx
            .history
            .iter()
            .find(|e| e.status() == Status::Baseline)
            .map_or(0, |b| b.n);
        let suggested = knobs::suggest_cached(
            &mut self.cache,
            &found,
            history,
            &incumbent,
            minimize,
            ctx.seed,
            ctx.n.saturating_sub(baseline),
            &guide,
        );
        let Some((next, from)) = suggested else {
            return Err(ProposeError::Exhausted(
                "the knob search space has no untried configuration left".into(),
            ));
        };
        for (file, text) in &texts {
            let changes: Config = found
                .iter()
                .filter(|k| &k.file == file)
                .filter_map(|k| next.get(&k.name).map(|v| (k.name.clone(), v.clone())))
                .collect();
            if changes.is_empty() {
                continue;
            }
            let new_text = knobs::apply(file, text, &changes)
                .map_err(|e| ProposeError::Invalid(e.to_string()))?;
            if &new_text != text {
                std::fs::write(ctx.worktree.join(file), new_text).map_err(|e| {
                    ProposeError::Fatal(format!("cannot write {file} in the worktree: {e}"))
                })?;
            }
        }
        let mut full = incumbent.clone();
        full.extend(next.clone());
        Ok(Proposal {
            description: knobs::describe(&incumbent, &full),
            config: serde_json::to_value(&full).ok(),
            cost_usd: 0.0,
            source: from
                .and_then(|i| g.candidates.get(i))
                .map(|(m, _)| m.clone()),
            // Only knob lines of tracked files were rewritten, here.
            in_place: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(n: u64, status: Status, objective: Option<f64>, a: i64) -> ExperimentRecord {
        ExperimentRecord {
            n,
            status: Some(status),
            objective,
            config: Some(serde_json::json!({ "A": a })),
            ..Default::default()
        }
    }

    #[test]
    fn crashes_timeouts_and_violations_are_infeasible_but_not_interruptions_or_rejections() {
        let mut history = vec![rec(0, Status::Baseline, Some(5.0), 1)];
        for (k, s) in [
            Status::Discard,
            Status::Keep,
            Status::Discard,
            Status::Discard,
            Status::Discard,
            Status::Discard,
        ]
        .into_iter()
        .enumerate()
        {
            history.push(rec(k as u64 + 1, s, Some(4.0), k as i64 + 2));
        }
        for (k, s) in [
            Status::Crash,
            Status::Timeout,
            Status::Violation,
            Status::Aborted,
            Status::Rejected,
            Status::Invalid,
            Status::Running,
        ]
        .into_iter()
        .enumerate()
        {
            history.push(rec(k as u64 + 7, s, None, k as i64 + 10));
        }
        let bad: Vec<i64> = infeasible_configs(&history)
            .iter()
            .filter_map(|c| match c.get("A") {
                Some(knobs::KnobValue::Int(a)) => Some(*a),
                _ => None,
            })
            .collect();
        assert_eq!(bad, [10, 11, 12]);
        let narrowed = narrowed_ranges(&history);
        assert_eq!(narrowed.len(), 1, "{narrowed:?}");
        assert_eq!((narrowed[0].edge, narrowed[0].crashes), (7.0, 3));
        assert_eq!(narrowings(&history)[0].0, 9);
    }

    /// `RunNarrowings`, fed one experiment at a time, says what `narrowings` and
    /// `narrowed_ranges` say of every prefix of a run (crashes above and below, timeouts,
    /// experiments in flight or without a configuration, a knob that is sometimes text).
    #[test]
    fn streamed_narrowings_are_those_of_every_prefix() {
        let history = mixed_history();
        let mut streamed = RunNarrowings::default();
        let mut events = Vec::new();
        let mut in_force = 0;
        for (i, e) in history.iter().enumerate() {
            events.extend(streamed.next(e).into_iter().map(|x| (e.n, x)));
            let prefix = &history[..=i];
            assert_eq!(streamed.current(), narrowed_ranges(prefix), "after {}", e.n);
            in_force += streamed.current().len();
        }
        assert_eq!(events, narrowings(&history));
        let sides: std::collections::BTreeSet<(String, bool)> = events
            .iter()
            .map(|(_, x)| (x.knob.clone(), x.side == knobs::feasible::Side::Above))
            .collect();
        assert!(sides.contains(&("A".to_string(), true)), "{sides:?}");
        assert!(sides.contains(&("B".to_string(), false)), "{sides:?}");
        assert!(in_force > 200, "{in_force}");
    }

    /// The run's narrowing log (every change, the narrowings that went too) read back up to
    /// any experiment says what streaming the run up to it says: the narrowings in force and
    /// each appearance with its experiment (`hone show` reads either).
    #[test]
    fn the_narrowing_log_read_up_to_any_experiment_is_the_streamed_run() {
        let history = mixed_history();
        let mut streamed = RunNarrowings::default();
        let mut logged = RunNarrowings::default();
        let (mut log, mut events) = (Vec::new(), Vec::new());
        for e in &history {
            events.extend(streamed.next(e).into_iter().map(|x| (e.n, x)));
            log.extend(logged.next_changes(e));
            let (now, appeared) = narrowings_from_log(&log);
            assert_eq!(now, streamed.current(), "after {}", e.n);
            assert_eq!(appeared, events, "after {}", e.n);
        }
        // One went (a value beyond its edge finished): left out of the log, it would still be
        // in force after that experiment.
        let went = log.iter().filter(|c| c.range.is_none()).count();
        assert!(went >= 1, "narrowings that went: {went} of {}", log.len());
    }

    /// 400 experiments of two knobs: crashes above and below, timeouts, experiments in flight
    /// or without a configuration, a knob that is sometimes text.
    fn mixed_history() -> Vec<ExperimentRecord> {
        let mut state = 7u64;
        let mut draw = || crate::util::unit_f64(crate::util::splitmix64(&mut state));
        (0..400u64)
            .map(|n| {
                let (a, b) = ((draw() * 100.0).round(), draw());
                let status = match draw() {
                    x if x < 0.05 => Status::Running,
                    _ if a > 80.0 || b < 0.1 => {
                        [Status::Crash, Status::Timeout][usize::from(draw() < 0.3)]
                    }
                    x if x < 0.15 => Status::Keep,
                    _ => Status::Discard,
                };
                let b = if draw() < 0.1 {
                    serde_json::json!("text")
                } else {
                    serde_json::json!(b)
                };
                ExperimentRecord {
                    n,
                    status: Some(status),
                    config: (draw() > 0.03).then(|| serde_json::json!({ "A": a, "B": b })),
                    ..Default::default()
                }
            })
            .collect()
    }

    /// The configuration reader gives what `Config`'s deserialization gives, value by value
    /// and for what is not a configuration.
    #[test]
    fn configurations_read_as_their_deserialization_reads_them() {
        let serde =
            |v: &serde_json::Value| -> Option<Config> { serde::Deserialize::deserialize(v).ok() };
        let cases = [
            r#"{"A": 1, "B": -3, "C": 0.5, "D": 3.0, "E": true, "F": "x", "G": 1e-7}"#,
            r#"{"MAX": 9223372036854775807, "MIN": -9223372036854775808}"#,
            r#"{"BIG": 9223372036854775808, "HUGE": 18446744073709551615}"#,
            r#"{"N": -0.0, "S": ""}"#,
            r#"{}"#,
            r#"{"A": 1, "NULL": null}"#,
            r#"{"A": [1, 2]}"#,
            r#"{"A": {"B": 1}}"#,
            r#"[1, 2]"#,
            r#""text""#,
            r#"null"#,
            r#"7"#,
        ];
        let mut read = 0;
        for case in cases {
            let v: serde_json::Value = serde_json::from_str(case).unwrap();
            let ours = config_from_json(&v);
            assert_eq!(ours, serde(&v), "{case}");
            read += usize::from(ours.is_some());
        }
        assert_eq!(read, 5);
        let v = serde_json::json!({ "BIG": 9223372036854775808u64, "I": 4 });
        assert_eq!(
            config_from_json(&v).map(|c| c.values().cloned().collect::<Vec<_>>()),
            Some(vec![
                knobs::KnobValue::Float(9223372036854775808.0),
                knobs::KnobValue::Int(4)
            ])
        );
    }

    #[test]
    fn a_running_configuration_in_the_crash_region_leaves_the_narrowing_alone() {
        let mut history: Vec<ExperimentRecord> = (0..7)
            .map(|k| rec(k, Status::Discard, Some(4.0), k as i64 + 1))
            .collect();
        history.extend((7..10).map(|k| rec(k, Status::Crash, None, k as i64 + 3)));
        let learned = narrowed_ranges(&history);
        assert_eq!(learned.len(), 1, "{learned:?}");
        history.push(rec(10, Status::Running, None, 11));
        assert_eq!(narrowed_ranges(&history), learned);
        assert_eq!(narrowings(&history), narrowings(&history[..10]));
        let pending = running_configs(&history);
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].get("A"), Some(&knobs::KnobValue::Int(11)));
    }

    #[test]
    fn running_and_pruned_configurations_are_tried_at_the_worst_value_so_far() {
        let history = [
            rec(0, Status::Baseline, Some(5.0), 1),
            rec(1, Status::Discard, Some(9.0), 2),
            rec(2, Status::Keep, Some(3.0), 3),
            rec(3, Status::Crash, None, 4),
            rec(4, Status::Running, None, 5),
            rec(5, Status::Pruned, None, 6),
        ];
        let seen = |minimize| -> Vec<Option<f64>> {
            observations(&history, minimize)
                .into_iter()
                .map(|o| o.objective)
                .collect()
        };
        assert_eq!(
            seen(true),
            [Some(5.0), Some(9.0), Some(3.0), None, Some(9.0), Some(9.0)]
        );
        assert_eq!(
            seen(false),
            [Some(5.0), Some(9.0), Some(3.0), None, Some(3.0), Some(3.0)]
        );
        assert_eq!(observations(&history[4..], true)[0].objective, None);
    }
}

#[cfg(test)]
mod stand_in_tests {
    use super::*;
    use crate::propose::guidance::Guidance;
    use crate::propose::testing::Repo;

    fn bowl(a: f64, b: f64) -> f64 {
        (a - 0.3).powi(2) + 2.0 * (b + 0.2).powi(2)
    }

    /// The proposer tells the sampler which values are stand-ins: with two pruned runs next to
    /// the incumbent, its refinement step (experiment 30) is the one that leaves them out.
    #[test]
    fn the_proposer_passes_pruned_runs_as_stand_ins() {
        let repo = Repo::new(
            "printf 'A = 0.0  # hone: -1.0..1.0\\nB = 0.1  # hone: -1.0..1.0\\n' > p.py",
            "[loop]\neditable = [\"p.py\"]\n[verify]\ncommand = \"true\"\nmetric = \"m\"\n",
        );
        let wt = repo.root.join(".hone/wt");
        repo.git.prepare_worktree(&wt, &repo.head).unwrap();
        let rec = |n: u64, status: Status, (a, b): (f64, f64)| ExperimentRecord {
            n,
            status: Some(status),
            objective: (status != Status::Pruned).then(|| bowl(a, b)),
            config: Some(serde_json::json!({ "A": a, "B": b })),
            ..Default::default()
        };
        // Eleven discards over the box, the incumbent (the committed values) kept, then two
        // pruned runs beside it.
        let mut history: Vec<ExperimentRecord> = (0..11u32)
            .map(|i| {
                let a = -0.9 + 0.17 * f64::from(i);
                let b = 0.8 - 0.15 * f64::from((i * 7) % 11);
                rec(u64::from(i), Status::Discard, (a, b))
            })
            .collect();
        history.push(rec(11, Status::Keep, (0.0, 0.1)));
        history.push(rec(12, Status::Pruned, (0.05, 0.05)));
        history.push(rec(13, Status::Pruned, (-0.05, 0.12)));
        let guidance = Guidance::default();
        let ctx = repo.ctx(30, &wt, &history, Some(&history[11]), &guidance);
        let proposal = KnobsProposer::default().propose(&ctx).expect("a proposal");

        let found = knobs::discover(
            "p.py",
            "A = 0.0  # hone: -1.0..1.0\nB = 0.1  # hone: -1.0..1.0\n",
        )
        .expect("the knobs parse");
        let incumbent = knobs::config_of(&found);
        let obs = observations(&history, true);
        let lied = stand_ins(&history);
        assert_eq!(lied, [12, 13]);
        let ask = |lied: &[u32]| {
            let guide = knobs::SamplerGuide {
                stand_ins: lied,
                ..knobs::SamplerGuide::default()
            };
            let (next, _) = knobs::suggest_guided(&found, &obs, &incumbent, true, 0, 30, &guide)
                .expect("a suggestion");
            let mut full = incumbent.clone();
            full.extend(next);
            serde_json::to_value(full).ok()
        };
        assert_eq!(proposal.config, ask(&lied));
        assert_ne!(
            proposal.config,
            ask(&[]),
            "the stand-ins make no difference here"
        );
    }
}
