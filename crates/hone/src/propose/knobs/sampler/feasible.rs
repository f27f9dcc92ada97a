//! The sampler's feasibility model: where configurations crashed (or timed out, or violated a
//! constraint), so that proposals stop landing there.
//!
//! Two pieces of evidence, each giving a candidate a verdict (fine, unsure, crash):
//!
//! - **Nearest neighbours.** In the unit cube (a different option of a choice counts as a
//!   distance of 1), let `dc` be the distance to the nearest infeasible configuration and `df`
//!   to the nearest one that finished. A candidate nearer a crash than anything that finished is
//!   unsure; one with [`SURE_CRASHES`] crashes [`SURE_RATIO`] times nearer than anything that
//!   finished is a crash (one crash alone never rules out a region: a probe could not undo it).
//! - **Edges** (`knobs::feasible::knob_narrowings`): beyond the furthest value of a knob that
//!   finished, when [`EDGE_CRASHES`] crashes and nothing that finished lie there, is unsure;
//!   a crash beyond several knobs' finished values counts by the rule of `hone log`'s
//!   narrowings (`knobs::feasible::counted_crashes`), among the space's knobs and over what
//!   finished as this model sees it (running ones left out), so the two can differ a little.
//!   A crash attributed to one knob (`super::attribute`: it differs from a finished
//!   configuration in that knob alone, or only that knob's value lies outside what finished)
//!   makes that knob's side beyond the furthest finished value unsure after ONE crash, and an
//!   option of a choice it was attributed to unsure while that option never finished.
//!   One knob at a time generalises where the nearest neighbours do not (a momentum too high
//!   crashes whatever the other knobs say). Fewer crashes than the narrowing `hone log`
//!   reports (which must be unlikely by chance) since an unsure verdict is still probed. Never
//!   a crash: crashes caused by another knob can put a knob's edge there by chance, and only a
//!   probe beyond it can undo that.
//!
//! The worst verdict counts. A crash verdict is never proposed; an unsure one only by a
//! suggestion that probes (one in [`EXPLORE`], decided once per suggestion), so a boundary the
//! model is not sure of is tested now and then, and a finished test there moves the boundary.
//! With no infeasible configuration in the history there is no model and the sampler behaves
//! exactly as without one.

use std::collections::HashMap;

use super::super::feasible::{counted_crashes, knob_narrowings, span, Narrowing, Side};
use super::super::{Config, KnobValue};
use super::attribute::{blame_all, edge, Finished};
use super::cache::SamplerCache;
use super::space::{Coord, Kind, Space};
use super::{Observation, Rng, SamplerGuide};

/// How much nearer a crash than anything that finished makes a candidate surely infeasible.
const SURE_RATIO: f64 = 2.0;
/// How many crashes that near it takes.
const SURE_CRASHES: usize = 2;
/// Probability that a suggestion may take an unsure candidate (tests a boundary).
const EXPLORE: f64 = 0.1;
/// Crashes beyond a knob's finished values that make beyond its edge unsure (1: one crash
/// caused by another knob would fence off a side of every knob; measured in bench/RESULTS.md,
/// "crashy").
const EDGE_CRASHES: usize = 2;

/// What the model says of one candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Verdict {
    Fine,
    Unsure,
    Crash,
}

/// A narrowed range on one dimension, in unit coordinates: beyond `edge` is unsure.
struct Cut {
    dim: usize,
    side: Side,
    edge: f64,
}

/// The feasibility model of one suggestion, fitted to the history.
pub(super) struct Feasibility<'a> {
    /// Whether this suggestion accepts unsure candidates.
    probe: bool,
    crashed: Vec<&'a [Coord]>,
    fine: Vec<&'a [Coord]>,
    cuts: Vec<Cut>,
    /// Edges of crashes attributed to one knob.
    blamed: Vec<Cut>,
    /// Options of a choice a crash was attributed to: (dimension, option).
    banned: Vec<(usize, usize)>,
}

/// The indices of the observations of `history` that finished: with a value, not infeasible,
/// and not still being measured (`guide.pending`, one observation of the same configuration
/// each).
fn finished(
    space: &Space,
    history: &[Observation],
    index: &SamplerCache,
    guide: &SamplerGuide<'_>,
) -> Vec<usize> {
    let bad_keys = &index.infeasible.tried;
    let mut running: HashMap<u64, usize> = HashMap::new();
    for c in guide.pending {
        *running.entry(space.key(c)).or_insert(0) += 1;
    }
    history
        .iter()
        .zip(&index.history.keys)
        .enumerate()
        .filter(|(_, (o, _))| o.objective.is_some())
        .filter(|&(_, (_, &key))| match running.get_mut(&key) {
            Some(left) if *left > 0 => {
                *left -= 1;
                false
            }
            _ => !bad_keys.contains(&key),
        })
        .map(|(i, _)| i)
        .collect()
}

/// A narrowing of dimension `dim` in unit coordinates (`None` for a category).
fn cut(space: &Space, dim: usize, n: &Narrowing) -> Option<Cut> {
    let d = &space.dims[dim];
    let v = match d.kind {
        Kind::Int { .. } => KnobValue::Int(n.edge.round() as i64),
        Kind::Float { .. } => KnobValue::Float(n.edge),
        Kind::Cat(_) => return None,
    };
    match d.encode(&v)? {
        Coord::U(edge) => Some(Cut {
            dim,
            side: n.side,
            edge,
        }),
        Coord::C(_) => None,
    }
}

impl<'a> Feasibility<'a> {
    /// The model, or `None` when nothing was infeasible (or nothing infeasible lies in the
    /// space). `index`: `history` indexed with its points (`SamplerCache::sync`).
    /// `guide.pending`: configurations of `history` still being measured, left out of what
    /// finished (one observation of the same configuration each).
    pub(super) fn fit(
        space: &Space,
        history: &[Observation],
        index: &'a SamplerCache,
        guide: &SamplerGuide<'_>,
        rng: &mut Rng,
    ) -> Option<Feasibility<'a>> {
        let bad = &index.infeasible;
        let crashed: Vec<&[Coord]> = bad.points.iter().filter_map(|p| p.as_deref()).collect();
        if crashed.is_empty() {
            return None;
        }
        let finished = finished(space, history, index, guide);
        let rows = &index.history;
        let fine: Vec<&[Coord]> = finished
            .iter()
            .filter_map(|&i| rows.points.get(i)?.as_deref())
            .collect();
        let ends = Finished::of(space.dims.len(), &fine);
        let blames = blame_all(&bad.points, &fine, &ends);
        let (blamed, banned) = blamed_marks(&bad.points, &blames, &fine, space);
        let fine_values: Vec<Vec<f64>> = (0..space.dims.len())
            .map(|j| {
                let column = rows.columns.get(j).map_or(&[][..], |c| &c[..]);
                finished.iter().filter_map(|&i| *column.get(i)?).collect()
            })
            .collect();
        let columns: Vec<Vec<Option<f64>>> = (0..space.dims.len())
            .map(|j| bad.columns.get(j).cloned().unwrap_or_default())
            .collect();
        // The crashes each knob's edges count: the rule of what `hone log` reports.
        let spans: Vec<(f64, f64)> = fine_values.iter().map(|v| span(v)).collect();
        let crashed_values = counted_crashes(&spans, &columns);
        let cuts = space
            .dims
            .iter()
            .enumerate()
            .flat_map(|(j, d)| {
                knob_narrowings(&d.name, &fine_values[j], &crashed_values[j], EDGE_CRASHES)
                    .into_iter()
                    .filter_map(move |n| cut(space, j, &n))
            })
            .collect();
        Some(Feasibility {
            probe: rng.unit() < EXPLORE,
            crashed,
            fine,
            cuts,
            blamed,
            banned,
        })
    }

    /// The verdict on a point of the space.
    pub(super) fn verdict(&self, point: &[Coord]) -> Verdict {
        let mut v = self.neighbours(point);
        // The edges found by the crash counts, then those of attributed crashes: the same test.
        for c in self.cuts.iter().chain(&self.blamed) {
            let Some(Coord::U(u)) = point.get(c.dim) else {
                continue;
            };
            let past_edge = match c.side {
                Side::Above => *u > c.edge,
                Side::Below => *u < c.edge,
            };
            if past_edge {
                v = v.max(Verdict::Unsure);
            }
        }
        for &(dim, option) in &self.banned {
            if point.get(dim) == Some(&Coord::C(option)) {
                v = v.max(Verdict::Unsure);
            }
        }
        v
    }

    fn neighbours(&self, point: &[Coord]) -> Verdict {
        let df = self
            .fine
            .iter()
            .map(|p| distance(point, p))
            .fold(f64::INFINITY, f64::min);
        let crash_distances: Vec<f64> = self.crashed.iter().map(|p| distance(point, p)).collect();
        let dc = crash_distances
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min);
        let sure = crash_distances
            .iter()
            .filter(|&&d| d * SURE_RATIO < df)
            .count();
        if sure >= SURE_CRASHES {
            Verdict::Crash
        } else if dc < df {
            Verdict::Unsure
        } else {
            Verdict::Fine
        }
    }

    /// Whether a candidate configuration may be proposed: fine ones always, unsure ones when
    /// this suggestion probes, crash ones never.
    pub(super) fn admits(&self, space: &Space, config: &Config) -> bool {
        let Some(point) = space.encode(config) else {
            return true;
        };
        match self.verdict(&point) {
            Verdict::Fine => true,
            Verdict::Unsure => self.probe,
            Verdict::Crash => false,
        }
    }
}

/// The edges and banned options of the crashes blamed on one knob alone.
fn blamed_marks(
    points: &[Option<Vec<Coord>>],
    blames: &[Option<usize>],
    fine: &[&[Coord]],
    space: &Space,
) -> (Vec<Cut>, Vec<(usize, usize)>) {
    let (mut cuts, mut banned) = (Vec::new(), Vec::new());
    for (p, b) in points.iter().zip(blames) {
        let (Some(p), &Some(dim)) = (p, b) else {
            continue;
        };
        if space.frozen.contains(&space.dims[dim].name) {
            continue;
        }
        match p[dim] {
            Coord::U(u) => {
                if let Some((side, edge)) = edge(fine, dim, u) {
                    cuts.push(Cut { dim, side, edge });
                }
            }
            Coord::C(o) => {
                if !fine.iter().any(|f| f.get(dim) == Some(&Coord::C(o))) {
                    banned.push((dim, o));
                }
            }
        }
    }
    (cuts, banned)
}

/// Euclidean distance in the unit cube; a different option counts as 1.
fn distance(a: &[Coord], b: &[Coord]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| match (x, y) {
            (Coord::U(x), Coord::U(y)) => (x - y) * (x - y),
            (Coord::C(x), Coord::C(y)) => f64::from(u8::from(x != y)),
            _ => 1.0,
        })
        .sum::<f64>()
        .sqrt()
}

#[cfg(test)]
mod tests {
    use super::super::tests::{knobs_of, num, Simulated};
    use super::super::{suggest, suggest_guided, Observation, SamplerGuide};
    use super::*;
    use crate::propose::knobs::{config_of, discover, Knob, KnobValue};

    /// The model's verdict at `probe` once `crash` (alone) crashed after `history`.
    fn verdict_after(
        space: &super::super::space::Space,
        history: &[Observation],
        crash: Config,
        probe: &Config,
    ) -> Verdict {
        let mut h = history.to_vec();
        h.push(Observation {
            config: crash.clone(),
            objective: None,
        });
        let bad = [crash];
        let model = fit_model(space, &h, &bad, &[], &mut Rng::new(1, 1)).expect("a model");
        model.verdict(&space.encode(probe).expect("in the space"))
    }

    const TWO: &str = "A = 0.2  # hone: 0.0..1.0\nB = 0.2  # hone: 0.0..1.0\n";

    fn knobs() -> Vec<Knob> {
        knobs_of(TWO)
    }

    /// Five finished configurations on a diagonal: A from 0.1 to 0.5, B from 0.1 to 0.9.
    fn five_finished() -> Vec<Observation> {
        (1..=5)
            .map(|k| Observation {
                config: at(0.1 * k as f64, 0.2 * k as f64 - 0.1),
                objective: Some(1.0),
            })
            .collect()
    }

    fn at(a: f64, b: f64) -> Config {
        [
            ("A".to_string(), KnobValue::Float(a)),
            ("B".to_string(), KnobValue::Float(b)),
        ]
        .into_iter()
        .collect()
    }

    /// A loop of `n` suggestions on a bowl at A = 0.85, B = 0.75 that crashes where A > 0.9 or
    /// B > 0.8;
    /// returns the crashes and the best value.
    fn run(seed: u64, n: u64, learn: bool) -> (usize, f64) {
        let knobs = knobs();
        let f = |c: &Config| {
            let (a, b) = (num(c, "A"), c.get("B").map_or(f64::NAN, v_f));
            (a <= 0.9 && b <= 0.8).then(|| (a - 0.85).powi(2) + (b - 0.75).powi(2))
        };
        let baseline = config_of(&knobs);
        let mut sim = Simulated::new(baseline.clone(), f(&baseline).unwrap_or(f64::INFINITY));
        for i in 1..n {
            let guide = SamplerGuide {
                infeasible: if learn { &sim.infeasible } else { &[] },
                ..SamplerGuide::default()
            };
            let suggested =
                suggest_guided(&knobs, &sim.history, &sim.incumbent, true, seed, i, &guide);
            let Some((c, _)) = suggested else { break };
            let y = f(&c);
            sim.record(c, y);
        }
        (sim.infeasible.len(), sim.best)
    }

    /// The model as a suggestion fits it.
    fn fit_model(
        space: &Space,
        history: &[Observation],
        infeasible: &[Config],
        pending: &[Config],
        rng: &mut Rng,
    ) -> Option<Feasibility<'static>> {
        let guide = SamplerGuide {
            infeasible,
            pending,
            ..SamplerGuide::default()
        };
        // Leaked: a test's model lives as long as the test (one small cache per call).
        let index: &'static mut SamplerCache = Box::leak(Box::default());
        index.sync(space, history, infeasible, true);
        Feasibility::fit(space, history, index, &guide, rng)
    }

    fn v_f(v: &KnobValue) -> f64 {
        match v {
            KnobValue::Float(x) => *x,
            _ => f64::NAN,
        }
    }

    #[test]
    fn a_learned_crash_region_stops_drawing_proposals_without_losing_the_optimum() {
        let (mut before, mut after) = (0, 0);
        let mut worst_best: f64 = 0.0;
        for seed in 1..=8 {
            before += run(seed, 60, false).0;
            let (crashes, best) = run(seed, 60, true);
            after += crashes;
            worst_best = worst_best.max(best);
        }
        // 58 against 81 when written: at least a fifth fewer.
        assert!(
            after * 5 < before * 4,
            "crashes {after} with the model, {before} without"
        );
        // The optimum lies next to the crash region: it is still found.
        assert!(worst_best < 0.01, "{worst_best}");
    }

    /// A history where everything with A >= 0.8 crashed and A <= 0.6 finished.
    fn walled() -> (Vec<Observation>, Vec<Config>) {
        let mut history = Vec::new();
        let mut bad = Vec::new();
        for k in 0..12 {
            let b = (k as f64 * 0.37) % 1.0;
            let fine = at(0.05 * k as f64, b);
            history.push(Observation {
                objective: Some(num(&fine, "A")),
                config: fine,
            });
            let crash = at(0.8 + 0.015 * k as f64, (b + 0.5) % 1.0);
            history.push(Observation {
                config: crash.clone(),
                objective: None,
            });
            bad.push(crash);
        }
        (history, bad)
    }

    #[test]
    fn proposals_avoid_the_wall_but_probe_its_unsure_edge_now_and_then() {
        let knobs = knobs();
        let (history, bad) = walled();
        let incumbent = history[11 * 2].config.clone();
        let space = super::super::space::Space::new(&knobs, &history, &incumbent);
        let mut rng = Rng::new(1, 1);
        let model = fit_model(&space, &history, &bad, &[], &mut rng).expect("a model");
        let point = |a: f64, b: f64| space.encode(&at(a, b)).expect("in the space");
        assert_eq!(model.verdict(&point(0.2, 0.5)), Verdict::Fine);
        assert_eq!(model.verdict(&point(0.9, 0.5)), Verdict::Crash);
        assert_eq!(model.verdict(&point(0.62, 0.5)), Verdict::Unsure);
        let count = |infeasible: &[Config]| {
            let guide = SamplerGuide {
                infeasible,
                ..SamplerGuide::default()
            };
            let (mut wall, mut edge, mut sure) = (0, 0, 0);
            for i in 0..300 {
                let (c, _) = suggest_guided(&knobs, &history, &incumbent, false, 7, i, &guide)
                    .unwrap_or_else(|| panic!("exhausted at {i}"));
                let a = num(&c, "A");
                if space.encode(&c).map(|p| model.verdict(&p)) == Some(Verdict::Crash) {
                    sure += 1;
                }
                if a >= 0.8 {
                    wall += 1;
                } else if a > 0.55 {
                    edge += 1;
                }
            }
            (wall, edge, sure)
        };
        let (wall_before, edge_before, _) = count(&[]);
        let (wall, edge, sure) = count(&bad);
        // Maximising A pulls into the wall; the edge past the last finished A = 0.55 is still
        // tried sometimes, but less than before; where crashes are sure, never.
        assert_eq!(sure, 0);
        assert!(wall <= wall_before, "wall {wall} vs {wall_before} before");
        assert!(edge >= 1, "the unsure edge was never probed");
        assert!(
            edge * 2 < edge_before,
            "edge {edge} vs {edge_before} before"
        );
    }

    #[test]
    fn a_running_configuration_in_the_crash_region_does_not_count_as_finished() {
        let knobs = knobs();
        let (mut history, bad) = walled();
        let incumbent = history[11 * 2].config.clone();
        // A parallel run's experiment inside the wall, still running: in the history at the
        // worst value so far (constant liar), and pending.
        let running = at(0.9, 0.5);
        let mut with_running = history.clone();
        with_running.push(Observation {
            config: running.clone(),
            objective: Some(0.55),
        });
        // The same configuration finished before: one pending copy leaves the other finished.
        let mut twice = with_running.clone();
        for _ in 0..2 {
            twice.push(Observation {
                config: at(0.3, 0.3),
                objective: Some(0.3),
            });
        }
        history.push(Observation {
            config: at(0.3, 0.3),
            objective: Some(0.3),
        });
        let space = super::super::space::Space::new(&knobs, &with_running, &incumbent);
        let fit = |h: &[Observation], pending: &[Config]| {
            fit_model(&space, h, &bad, pending, &mut Rng::new(1, 1)).expect("a model")
        };
        let learned = fit(&history, &[]);
        let pending = fit(&with_running, std::slice::from_ref(&running));
        let as_finished = fit(&with_running, &[]);
        let verdicts = |m: &Feasibility<'_>| -> Vec<Verdict> {
            (0..=20)
                .flat_map(|i| (0..=4).map(move |j| at(0.05 * i as f64, 0.25 * j as f64)))
                .map(|c| m.verdict(&space.encode(&c).expect("in the space")))
                .collect()
        };
        let point = space.encode(&running).expect("in the space");
        assert_eq!(pending.verdict(&point), Verdict::Crash);
        assert_eq!(verdicts(&pending), verdicts(&learned));
        let edges = |m: &Feasibility<'_>| -> Vec<(usize, f64)> {
            m.cuts.iter().map(|c| (c.dim, c.edge)).collect()
        };
        assert!(!learned.cuts.is_empty());
        assert_eq!(edges(&pending), edges(&learned));
        // Counted as finished, it would have undone the wall and widened the narrowing.
        assert_eq!(as_finished.verdict(&point), Verdict::Fine);
        assert_ne!(edges(&as_finished), edges(&learned));
        // A pending copy of a configuration that also finished leaves the finished one in.
        let twice_pending = fit(&twice, &[running.clone(), at(0.3, 0.3)]);
        assert_eq!(twice_pending.fine.len(), learned.fine.len());
        assert_eq!(verdicts(&twice_pending), verdicts(&learned));
    }

    #[test]
    fn two_crashes_beyond_a_knobs_finished_values_make_that_side_unsure() {
        let knobs = knobs();
        let mut history = five_finished();
        // Both knobs of each crash lie outside what finished: neither is attributed to one knob
        // (see `one_crash_attributed_to_a_knob_makes_that_side_unsure`).
        let crashes = [at(0.8, 0.05), at(0.9, 0.95)];
        let incumbent = history[0].config.clone();
        let space = super::super::space::Space::new(&knobs, &history, &incumbent);
        let verdict = |h: &[Observation], bad: &[Config], a: f64, b: f64| {
            let model = fit_model(&space, h, bad, &[], &mut Rng::new(1, 1)).expect("a model");
            model.verdict(&space.encode(&at(a, b)).expect("in the space"))
        };
        for c in &crashes {
            history.push(Observation {
                config: c.clone(),
                objective: None,
            });
        }
        // Nearer what finished than either crash: the neighbours alone say fine.
        assert_eq!(
            verdict(&history[..6], &crashes[..1], 0.7, 0.5),
            Verdict::Fine
        );
        assert_eq!(verdict(&history, &crashes, 0.7, 0.5), Verdict::Unsure);
        assert_eq!(verdict(&history, &crashes, 0.45, 0.5), Verdict::Fine);
    }

    #[test]
    fn crashes_another_knob_explains_make_no_side_of_this_one_unsure() {
        let knobs = knobs();
        let mut history = five_finished();
        // Two crashes beyond both A's finished values (above 0.5) and B's (below 0.1), and one
        // beyond A's alone: A explains all three, and B's low side stays as the neighbours
        // say (fine at B = 0.03, nearer what finished). Without the third, nothing blames
        // either knob alone and both count the two: B's low side is unsure.
        let crashes = [at(0.8, 0.05), at(0.9, 0.02), at(0.85, 0.5)];
        for c in &crashes {
            history.push(Observation {
                config: c.clone(),
                objective: None,
            });
        }
        let incumbent = history[0].config.clone();
        let space = super::super::space::Space::new(&knobs, &history, &incumbent);
        let verdict = |h: &[Observation], bad: &[Config], a: f64, b: f64| {
            let model = fit_model(&space, h, bad, &[], &mut Rng::new(1, 1)).expect("a model");
            model.verdict(&space.encode(&at(a, b)).expect("in the space"))
        };
        assert_eq!(verdict(&history, &crashes, 0.3, 0.03), Verdict::Fine);
        assert_eq!(verdict(&history, &crashes, 0.6, 0.5), Verdict::Unsure);
        assert_eq!(
            verdict(&history[..7], &crashes[..2], 0.3, 0.03),
            Verdict::Unsure
        );
    }

    #[test]
    fn one_crash_attributed_to_a_knob_makes_that_side_unsure() {
        let knobs = knobs();
        let history = five_finished();
        let incumbent = history[0].config.clone();
        let space = super::super::space::Space::new(&knobs, &history, &incumbent);
        let verdict =
            |crash: Config, a: f64, b: f64| verdict_after(&space, &history, crash, &at(a, b));
        // (0.8, 0.5) differs from the finished (0.3, 0.5) in A alone: A caused it, so beyond
        // the furthest finished A (0.5) is unsure, far from the crash too.
        let b = 0.2 * 3.0 - 0.1;
        assert_eq!(verdict(at(0.8, b), 0.6, 0.9), Verdict::Unsure);
        assert_eq!(verdict(at(0.8, b), 0.45, 0.9), Verdict::Fine);
        // (0.8, 0.55) differs from every finished configuration in both knobs, but only its A
        // lies outside what finished: blamed on A.
        assert_eq!(verdict(at(0.8, 0.55), 0.6, 0.9), Verdict::Unsure);
        // (0.8, 0.95): both outside, unattributed; one crash is not enough (the neighbours
        // alone say fine there).
        assert_eq!(verdict(at(0.8, 0.95), 0.6, 0.9), Verdict::Fine);
    }

    #[test]
    fn a_crash_whose_only_unfinished_value_is_an_option_makes_that_option_unsure() {
        let text = "A = 0.5  # hone: 0.0..1.0\nB = 0.5  # hone: 0.0..1.0\n\
                    C = 0.5  # hone: 0.0..1.0\nD = \"x\"  # hone: choice [\"x\", \"y\", \"z\"]\n";
        let knobs = discover("t.py", text).unwrap_or_default();
        let point = |a: f64, b: f64, c: f64, d: &str| -> Config {
            [
                ("A".to_string(), KnobValue::Float(a)),
                ("B".to_string(), KnobValue::Float(b)),
                ("C".to_string(), KnobValue::Float(c)),
                ("D".to_string(), KnobValue::Str(d.to_string())),
            ]
            .into_iter()
            .collect()
        };
        let history: Vec<Observation> = [
            (0.1, 0.2, 0.9, "x"),
            (0.9, 0.8, 0.1, "y"),
            (0.9, 0.2, 0.1, "x"),
            (0.5, 0.5, 0.5, "x"),
        ]
        .iter()
        .map(|&(a, b, c, d)| Observation {
            config: point(a, b, c, d),
            objective: Some(1.0),
        })
        .collect();
        let incumbent = history[3].config.clone();
        let space = super::super::space::Space::new(&knobs, &history, &incumbent);
        let verdict = |crash: Config, probe: Config| verdict_after(&space, &history, crash, &probe);
        // Every number of the crash lies inside what finished, its option z never finished:
        // z is blamed, also beside what finished and far from the crash (where the neighbours
        // alone say fine); x is not.
        let (crash, beside) = (point(0.2, 0.75, 0.85, "z"), point(0.9, 0.2, 0.1, "z"));
        assert_eq!(verdict(crash.clone(), beside.clone()), Verdict::Unsure);
        assert_eq!(verdict(crash, point(0.9, 0.25, 0.1, "x")), Verdict::Fine);
        // A crash that also has a number outside what finished is not attributed.
        assert_eq!(verdict(point(0.2, 0.75, 0.95, "z"), beside), Verdict::Fine);
    }

    #[test]
    fn a_crash_in_the_initial_design_ends_it() {
        let text = "A = 0.5  # hone: 0.0..1.0\nB = 0.5  # hone: 0.0..1.0\n\
                    C = 0.5  # hone: 0.0..1.0\nD = 0.5  # hone: 0.0..1.0\n";
        let knobs = discover("t.py", text).unwrap_or_default();
        let incumbent = config_of(&knobs);
        let space = super::super::space::Space::new(&knobs, &[], &incumbent);
        let n = super::super::initial_design_size(space.dims.len());
        let design: Vec<Config> = super::super::design::latin_hypercube(&space, n, 9)
            .iter()
            .map(|p| space.config(p))
            .collect();
        let crash = design[1].clone();
        let history = vec![
            Observation {
                config: incumbent.clone(),
                objective: Some(1.0),
            },
            Observation {
                config: crash.clone(),
                objective: None,
            },
        ];
        let in_design = |infeasible: &[Config]| {
            let guide = SamplerGuide {
                infeasible,
                ..SamplerGuide::default()
            };
            (2..8)
                .filter_map(|i| suggest_guided(&knobs, &history, &incumbent, true, 9, i, &guide))
                .filter(|(c, _)| design.contains(c))
                .count()
        };
        // As a failure only, the design goes on; as infeasible, the model takes over.
        assert_eq!(in_design(&[]), 6);
        assert_eq!(in_design(std::slice::from_ref(&crash)), 0);
    }

    #[test]
    fn without_crashes_suggestions_are_exactly_those_of_before() {
        let knobs = knobs();
        let history: Vec<Observation> = (0..15)
            .map(|k| Observation {
                config: at(0.06 * k as f64, 0.3),
                objective: Some((0.06 * k as f64 - 0.5).abs()),
            })
            .collect();
        let incumbent = history[8].config.clone();
        let space = super::super::space::Space::new(&knobs, &history, &incumbent);
        assert!(fit_model(&space, &history, &[], &[], &mut Rng::new(1, 1)).is_none());
        for i in 0..40 {
            let plain = suggest(&knobs, &history, &incumbent, true, 3, i);
            let guided = suggest_guided(
                &knobs,
                &history,
                &incumbent,
                true,
                3,
                i,
                &SamplerGuide::default(),
            );
            assert_eq!(plain, guided.map(|(c, _)| c));
        }
    }
}
