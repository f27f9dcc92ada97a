//! The sampler's tests: determinism, no repeats, the design, guidance, and a benchmark against
//! random search.

use std::collections::HashSet;

use super::*;
use crate::propose::knobs::literal::quantize_float;
use crate::propose::knobs::{apply, config_of, discover};
use crate::propose::knobs::{Domain, KnobValue};

pub(super) fn knobs_of(text: &str) -> Vec<Knob> {
    match discover("t.py", text) {
        Ok(k) => k,
        Err(e) => panic!("{e}"),
    }
}

/// A simulated run for the tests of the sampler's parts: the history (baseline first), the
/// incumbent (the best so far) and what crashed.
pub(super) struct Simulated {
    pub(super) history: Vec<Observation>,
    pub(super) incumbent: Config,
    pub(super) best: f64,
    pub(super) infeasible: Vec<Config>,
}

impl Simulated {
    /// A run whose baseline `incumbent` measured `best`.
    pub(super) fn new(incumbent: Config, best: f64) -> Self {
        Simulated {
            history: vec![Observation {
                config: incumbent.clone(),
                objective: Some(best),
            }],
            incumbent,
            best,
            infeasible: Vec::new(),
        }
    }

    /// Records `c`, which measured `y` (`None`: it crashed, and is infeasible).
    pub(super) fn record(&mut self, c: Config, y: Option<f64>) {
        match y {
            Some(y) if y < self.best => {
                self.best = y;
                self.incumbent = c.clone();
            }
            Some(_) => {}
            None => self.infeasible.push(c.clone()),
        }
        self.history.push(Observation {
            config: c,
            objective: y,
        });
    }
}

/// Runs `n` suggestions sequentially with `objective`, the incumbent being the best so far.
/// Returns the history (baseline first) and the best objective.
fn run(
    knobs: &[Knob],
    n: u64,
    seed: u64,
    objective: impl Fn(&Config) -> Option<f64>,
) -> (Vec<Observation>, f64) {
    let mut incumbent = config_of(knobs);
    let mut best = objective(&incumbent).unwrap_or(f64::INFINITY);
    let mut history = vec![Observation {
        config: incumbent.clone(),
        objective: objective(&incumbent),
    }];
    for i in 0..n {
        let Some(config) = suggest(knobs, &history, &incumbent, true, seed, i) else {
            break;
        };
        let y = objective(&config);
        if let Some(y) = y.filter(|&y| y < best) {
            best = y;
            incumbent = config.clone();
        }
        history.push(Observation {
            config,
            objective: y,
        });
    }
    (history, best)
}

const QUAD: &str = "A = 0.5     # hone: 0.0..1.0\n\
                        B = 0.01    # hone: log 1e-5..1.0\n\
                        C = 8       # hone: int 1..64\n\
                        D = -1.0    # hone: -5.0..5.0\n\
                        SEED = 3\n";

pub(super) fn num(c: &Config, name: &str) -> f64 {
    let value = c.get(name);
    value
        .and_then(KnobValue::as_f64)
        .unwrap_or_else(|| panic!("{name} = {value:?}"))
}

/// The `QUAD` knobs, the history of `n` suggestions with `seed` on [`quadratic`], and the
/// baseline as the incumbent.
fn quadratic_run(n: u64, seed: u64) -> (Vec<Knob>, Vec<Observation>, Config) {
    let knobs = knobs_of(QUAD);
    let (history, _) = run(&knobs, n, seed, quadratic);
    let incumbent = config_of(&knobs);
    (knobs, history, incumbent)
}

/// A quadratic bowl in the knobs' natural (unit-space) scales, minimum 0.
fn quadratic(c: &Config) -> Option<f64> {
    let a = num(c, "A") - 0.83;
    let b = (num(c, "B").log10() + 3.52) / 5.0;
    let cc = (num(c, "C") - 37.0) / 63.0;
    let d = (num(c, "D") - 2.2) / 10.0;
    Some(a * a + b * b + cc * cc + d * d)
}

#[test]
fn suggest_is_deterministic() {
    let (knobs, history, incumbent) = quadratic_run(15, 7);
    for index in [0, 1, 15, 99] {
        for minimize in [true, false] {
            let a = suggest(&knobs, &history, &incumbent, minimize, 7, index);
            let b = suggest(&knobs, &history, &incumbent, minimize, 7, index);
            assert!(a.is_some());
            assert_eq!(a, b);
        }
    }
    let (again, _) = run(&knobs, 15, 7, quadratic);
    let configs = |h: &[Observation]| h.iter().map(|o| o.config.clone()).collect::<Vec<_>>();
    assert_eq!(configs(&history), configs(&again));
    let (other_seed, _) = run(&knobs, 15, 8, quadratic);
    assert_ne!(configs(&history), configs(&other_seed));
}

#[test]
fn never_repeats_over_200_suggestions() {
    let knobs =
        knobs_of("LR = 0.04  # hone: 0.01..0.05\nDEPTH = 3  # hone: int 1..4\nFLAG = true\n");
    // Most runs crash, so the model keeps pointing at the few that worked.
    let (history, _) = run(&knobs, 200, 1, |c| {
        (num(c, "DEPTH") == 2.0).then(|| (num(c, "LR") - 0.03).abs())
    });
    assert_eq!(history.len(), 201);
    let mut seen = HashSet::new();
    for o in &history {
        assert!(
            seen.insert(format!("{:?}", o.config)),
            "repeated {:?}",
            o.config
        );
    }
}

#[test]
fn a_finite_space_is_walked_exactly_once_then_exhausted() {
    // 4 * 3 * 2 = 24 configurations, one of which is the incumbent.
    let knobs = knobs_of(
        "DEPTH = 3  # hone: int 1..4\nMODE = 'a'  # hone: choice ['a', 'b', 'c']\n\
             FLAG = False\nSEED = 1\n",
    );
    let (history, _) = run(&knobs, 100, 5, |c| Some(num(c, "DEPTH")));
    assert_eq!(history.len(), 24);
    let seen: HashSet<String> = history.iter().map(|o| format!("{:?}", o.config)).collect();
    assert_eq!(seen.len(), 24);
    let incumbent = config_of(&knobs);
    assert_eq!(suggest(&knobs, &history, &incumbent, true, 5, 24), None);
}

#[test]
fn all_bools_tried_gives_none() {
    let knobs = knobs_of("A = True\nB = False\nC = true\n");
    let (history, _) = run(&knobs, 50, 2, |_| None);
    assert_eq!(history.len(), 8);
    for index in 0..5 {
        assert_eq!(
            suggest(&knobs, &history, &config_of(&knobs), true, 2, index),
            None
        );
    }
}

#[test]
fn nothing_to_move_gives_none() {
    let knobs = knobs_of("SEED = 1\nNAME = 'x'\nZ = 0.0\nW = 2  # hone: fixed\n");
    assert_eq!(suggest(&knobs, &[], &config_of(&knobs), true, 0, 0), None);
}

#[test]
fn suggestions_are_quantized_in_domain_and_survive_a_rewrite() {
    let text = "LR = 0.04\nB = 0.3  # hone: 0.123456..0.2\nN = 8\nNEG = -2.5\nSEED = 9\n";
    let knobs = knobs_of(text);
    let (history, _) = run(&knobs, 60, 11, |c| Some(num(c, "LR") + num(c, "B")));
    for o in &history[1..] {
        let c = &o.config;
        assert_eq!(c.get("SEED"), Some(&KnobValue::Int(9)));
        for k in &knobs {
            let v = num(c, &k.name);
            match k.domain {
                Domain::Float { lo, hi, .. } => {
                    assert!((lo..=hi).contains(&v), "{} = {v}", k.name);
                    let on_grid = quantize_float(v) == v;
                    assert!(on_grid || v == lo || v == hi, "{} = {v}", k.name);
                }
                Domain::Int { lo, hi, .. } => {
                    assert!((lo as f64..=hi as f64).contains(&v), "{} = {v}", k.name)
                }
                _ => {}
            }
        }
        let written = match apply("t.py", text, c) {
            Ok(w) => w,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(&config_of(&knobs_of(&written)), c);
    }
}

#[test]
fn the_initial_design_is_a_latin_hypercube() {
    let knobs = knobs_of("A = 0.5  # hone: 0.0..1.0\nB = 0.5  # hone: 0.0..1.0\n");
    let space = Space::new(&knobs, &[], &config_of(&knobs));
    let n = initial_design_size(2);
    assert_eq!(n, 4);
    // Sequential suggestions with a growing history walk the design in order.
    let (history, _) = run(&knobs, n as u64 - 1, 3, |_| Some(0.0));
    let design = latin_hypercube(&space, n, 3);
    for (o, p) in history[1..].iter().zip(&design) {
        assert_eq!(o.config, space.config(p));
    }
    for dim in 0..2 {
        let mut strata: Vec<usize> = design
            .iter()
            .map(|p| match p[dim] {
                Coord::U(u) => (u * n as f64) as usize,
                Coord::C(_) => usize::MAX,
            })
            .collect();
        strata.sort_unstable();
        assert_eq!(strata, (0..n).collect::<Vec<_>>());
    }
}

#[test]
fn failed_runs_count_as_the_worst() {
    let knobs = knobs_of("A = 0.5  # hone: 0.0..1.0\n");
    let space = Space::new(&knobs, &[], &config_of(&knobs));
    let obs = |a: f64, y: Option<f64>| Observation {
        config: Config::from([("A".to_string(), KnobValue::Float(a))]),
        objective: y,
    };
    let history = [
        obs(0.1, None),
        obs(0.9, Some(5.0)),
        obs(0.5, None),
        obs(0.3, None),
    ];
    for (minimize, best) in [(true, 0.9), (false, 0.9)] {
        let model = match Model::fit(&space, &history, minimize, false) {
            Some(m) => m,
            None => panic!("no model"),
        };
        assert_eq!(model.good.centers, vec![vec![Coord::U(best)]]);
        assert_eq!(model.bad.centers.len(), 3);
    }
    assert!(Model::fit(&space, &[obs(0.1, None)], true, false).is_none());
    let history = [
        obs(0.1, Some(1.0)),
        obs(0.9, Some(5.0)),
        obs(0.5, Some(3.0)),
    ];
    let top = |minimize| Model::fit(&space, &history, minimize, false).map(|m| m.good.centers);
    assert_eq!(top(true), Some(vec![vec![Coord::U(0.1)]]));
    assert_eq!(top(false), Some(vec![vec![Coord::U(0.9)]]));
}

#[test]
fn the_good_set_is_the_best_tenth_of_a_short_run_until_something_proved_infeasible() {
    let knobs = knobs_of("A = 0.5  # hone: 0.0..1.0\n");
    let space = Space::new(&knobs, &[], &config_of(&knobs));
    // n observations at A = i / n measuring i, the last one without a value when `failed`
    // (as a crash, or a run rejected or interrupted, has): the best are those nearest 0.
    let fit = |n: usize, failed: bool, infeasible_seen: bool| {
        let history: Vec<Observation> = (0..n)
            .map(|i| Observation {
                config: Config::from([("A".to_string(), KnobValue::Float(i as f64 / n as f64))]),
                objective: Some(i as f64).filter(|_| !(failed && i == n - 1)),
            })
            .collect();
        match Model::fit(&space, &history, true, infeasible_seen) {
            Some(m) => (m.good.centers.len(), m.bad.centers.len()),
            None => panic!("no model"),
        }
    };
    let good = |n| fit(n, false, false);
    assert_eq!(good(20), (2, 18));
    assert_eq!(good(GOOD_EARLY_UNTIL - 1), (4, GOOD_EARLY_UNTIL - 5));
    assert_eq!(good(GOOD_EARLY_UNTIL), (10, GOOD_EARLY_UNTIL - 10));
    assert_eq!(good(400), (25, 375));
    // A run without a value that proved nothing infeasible (rejected, interrupted): the tenth.
    assert_eq!(fit(20, true, false), (2, 18));
    // Once a configuration crashed, timed out or violated a constraint: the best quarter.
    assert_eq!(fit(20, true, true), (5, 15));
    assert_eq!(fit(20, false, true), (5, 15));
}

#[test]
fn the_sampler_beats_random_search_on_a_quadratic() {
    let knobs = knobs_of(QUAD);
    let mut sampler = Vec::new();
    let mut random = Vec::new();
    for seed in 0..9u64 {
        sampler.push(run(&knobs, 40, seed, quadratic).1);
        let space = Space::new(&knobs, &[], &config_of(&knobs));
        let best = (0..40)
            .filter_map(|i| {
                let mut rng = Rng::new(seed ^ 0x5eed, i);
                quadratic(&space.config(&space.random_point(&mut rng)))
            })
            .fold(f64::INFINITY, f64::min);
        random.push(best);
    }
    let (s, r) = (crate::util::median(&sampler), crate::util::median(&random));
    assert!(
        s < 0.5 * r,
        "sampler median {s} {sampler:.4?} vs random median {r} {random:.4?}"
    );
}

#[test]
fn guidance_freezes_focuses_and_switches_modes() {
    let (knobs, history, incumbent) = quadratic_run(12, 3);
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let frozen = names(&["A", "C"]);
    let focus = names(&["B"]);
    for index in 0..20 {
        let guide = SamplerGuide {
            frozen: &frozen,
            ..SamplerGuide::default()
        };
        let (c, _) = suggest_guided(&knobs, &history, &incumbent, true, 3, index, &guide)
            .unwrap_or_else(|| panic!("nothing at {index}"));
        assert_eq!(c.get("A"), incumbent.get("A"));
        assert_eq!(c.get("C"), incumbent.get("C"));
        let guide = SamplerGuide {
            focus: &focus,
            mode: Some(Mode::Exploit),
            ..SamplerGuide::default()
        };
        let (c, _) = suggest_guided(&knobs, &history, &incumbent, true, 3, index, &guide)
            .unwrap_or_else(|| panic!("nothing at {index}"));
        let moved: Vec<&str> = c
            .iter()
            .filter(|(k, v)| incumbent.get(*k) != Some(v))
            .map(|(k, _)| k)
            .collect();
        assert_eq!(moved, vec!["B"], "an exploit step on the focused knob only");
    }
    // Explore draws land far from the incumbent more often than the default's local moves.
    let spread = |mode: Option<Mode>| -> f64 {
        (0..40)
            .filter_map(|i| {
                let guide = SamplerGuide {
                    mode,
                    ..SamplerGuide::default()
                };
                suggest_guided(&knobs, &history, &incumbent, true, 3, i, &guide)
            })
            .map(|(c, _)| distance(&knobs, &c, &incumbent))
            .sum::<f64>()
    };
    assert!(spread(Some(Mode::Explore)) > 1.5 * spread(Some(Mode::Exploit)));
}

#[test]
fn candidates_come_first_unless_tried_or_out_of_range_and_keep_frozen_knobs() {
    let knobs = knobs_of("A = 3  # hone: int 1..9\nB = 3  # hone: int 1..9\n");
    let incumbent = config_of(&knobs);
    let cfg = |a: i64, b: i64| {
        Config::from([
            ("A".to_string(), KnobValue::Int(a)),
            ("B".to_string(), KnobValue::Int(b)),
        ])
    };
    let mut history = vec![
        Observation {
            config: cfg(5, 5),
            objective: Some(1.0),
        },
        Observation {
            config: cfg(5, 3),
            objective: Some(1.5),
        },
    ];
    let frozen = vec!["B".to_string()];
    let candidates = vec![cfg(5, 5), cfg(42, 3), cfg(4, 4), cfg(6, 3)];
    let guide = SamplerGuide {
        candidates: &candidates,
        frozen: &frozen,
        ..SamplerGuide::default()
    };
    // (5, 5) with B frozen at 3 is (5, 3), tried; (4, 4) is (4, 3): untried, the one.
    let got = suggest_guided(&knobs, &history, &incumbent, true, 0, 1, &guide);
    assert_eq!(got, Some((cfg(4, 3), Some(2))));
    // Once (4, 3) was measured, (4, 4) counts as tried too.
    history.push(Observation {
        config: cfg(4, 3),
        objective: Some(2.0),
    });
    let got = suggest_guided(&knobs, &history, &incumbent, true, 0, 1, &guide);
    assert_eq!(got, Some((cfg(6, 3), Some(3))));
    let avoid = vec![cfg(6, 3)];
    let guide = SamplerGuide {
        candidates: &candidates,
        avoid: &avoid,
        ..SamplerGuide::default()
    };
    let got = suggest_guided(&knobs, &history, &incumbent, true, 0, 1, &guide);
    assert_eq!(
        got,
        Some((cfg(4, 4), Some(2))),
        "avoided ones count as tried"
    );
}

#[test]
fn no_guidance_is_exactly_the_plain_sampler() {
    let (knobs, history, incumbent) = quadratic_run(20, 5);
    for index in 0..30 {
        let seen = &history[..(index as usize % 20) + 1];
        let plain = suggest(&knobs, seen, &incumbent, true, 5, index);
        let guide = SamplerGuide::default();
        let guided = suggest_guided(&knobs, seen, &incumbent, true, 5, index, &guide);
        assert_eq!(plain, guided.map(|(c, _)| c));
    }
}

/// Seeded candidates (and the benchmarks built on them) depend on these exact streams.
#[test]
fn rng_streams_are_pinned() {
    assert_eq!(
        DESIGN_STREAM, 0x4c48_535f_4445_5349,
        "the seeds checked use it"
    );
    let want = [
        [
            0xa7f7_2697_a273_1486,
            0xf4e0_cc8a_f2e8_152d,
            0x4bf6_c411_d938_0697,
        ],
        [
            0xdffd_3cda_f7c0_17ff,
            0x5111_6469_df83_42b8,
            0xdd56_7210_554c_9a91,
        ],
        [
            0xd731_03d6_db15_b7fe,
            0x2270_926b_b3f6_9fa1,
            0x7e7d_0ef8_83e1_c1a8,
        ],
    ];
    let draw = |seed, stream| {
        let mut r = Rng::new(seed, stream);
        std::array::from_fn(|_| r.next_u64())
    };
    crate::util::assert_pinned_streams(draw, want);
}

/// Past the cap the model sees a bounded sample: the best, the most recent, and a spread of
/// the rest; up to the cap it sees everything (so nothing changes for short runs).
#[test]
fn the_model_is_fitted_to_a_bounded_sample_of_a_long_history() {
    let obs = |i: usize| Observation {
        config: Config::from([("i".to_string(), KnobValue::Int(i as i64))]),
        // Better (lower) with `i` up to 700, then worse (ties on either side of it); every 10th
        // a crash.
        objective: (i % 10 != 3).then(|| (i as f64 - 700.0).abs()),
    };
    let short: Vec<Observation> = (0..super::MODEL_CAP).map(obs).collect();
    assert!(super::modelled(&short, true).is_none());
    let long: Vec<Observation> = (0..5_000).map(obs).collect();
    let pick = |h: &[Observation], minimize: bool| -> Vec<Observation> {
        let picked = super::modelled(h, minimize).expect("a sample");
        picked.iter().map(|&i| h[i].clone()).collect()
    };
    let sample = pick(&long, true);
    assert_eq!(sample.len(), super::MODEL_CAP);
    let values: Vec<f64> = sample.iter().filter_map(|o| o.objective).collect();
    // The best of the run are all in it (|i - 700| small), and the most recent.
    for best in [0.0, 1.0, 2.0, 5.0, 10.0] {
        assert!(values.contains(&best), "best {best} missing");
    }
    let last = (4_999.0_f64 - 700.0).abs();
    assert!(values.contains(&last), "the most recent is in");
    // A spread of the middle too, not only the two ends.
    assert!(values.iter().any(|v| (1_500.0..2_500.0).contains(v)));
    // Exactly the best of a full sort (ties to the earlier experiment), in the run's order.
    let index = |o: &Observation| match o.config.get("i") {
        Some(KnobValue::Int(i)) => *i as usize,
        _ => unreachable!("every observation has its index"),
    };
    let mut sorted: Vec<usize> = (0..long.len()).collect();
    let score = |i: usize| long[i].objective.unwrap_or(f64::INFINITY);
    sorted.sort_by(|&a, &b| score(a).total_cmp(&score(b)).then(a.cmp(&b)));
    let taken: Vec<usize> = sample.iter().map(index).collect();
    assert!(taken.windows(2).all(|w| w[0] < w[1]));
    for i in &sorted[..super::MODEL_BEST] {
        assert!(taken.contains(i), "best #{i} missing");
    }
    // Every value the same: the best are the earliest that finished.
    let flat: Vec<Observation> = (0..5_000)
        .map(|i| Observation {
            objective: obs(i).objective.map(|_| 1.0),
            ..obs(i)
        })
        .collect();
    let taken: Vec<usize> = pick(&flat, true).iter().map(index).collect();
    let mut earliest = (0..).filter(|i| i % 10 != 3).take(super::MODEL_BEST);
    assert!(earliest.all(|i| taken.contains(&i)));
    // Maximizing keeps the other end.
    let sample = pick(&long, false);
    let top = sample
        .iter()
        .filter_map(|o| o.objective)
        .fold(0.0, f64::max);
    assert_eq!(top, 4_299.0);
}

/// The design is 1.5 points per knob, at least 4 and at most 8: on 5 or more knobs it leaves
/// more than half of a 20-experiment budget to the model (it was 2 per knob up to 10).
#[test]
fn the_design_has_one_and_a_half_points_per_knob_up_to_eight() {
    let sizes: Vec<usize> = [1, 2, 3, 4, 5, 6, 20].map(initial_design_size).to_vec();
    assert_eq!(sizes, vec![4, 4, 5, 6, 8, 8, 8]);
    // With 5 knobs the first 7 suggestions after the baseline are design points; the 8th
    // comes from the model (the history then holds 8 observations).
    let knobs = knobs_of(
        "A = 0.5  # hone: 0.0..1.0\nB = 0.5  # hone: 0.0..1.0\nC = 0.5  # hone: 0.0..1.0\n\
         D = 0.5  # hone: 0.0..1.0\nE = 0.5  # hone: 0.0..1.0\n",
    );
    let space = Space::new(&knobs, &[], &config_of(&knobs));
    let design: Vec<Config> = latin_hypercube(&space, 8, 5)
        .iter()
        .map(|p| space.config(p))
        .collect();
    let (history, _) = run(&knobs, 8, 5, |c| Some(num(c, "A")));
    assert!(history[1..8].iter().all(|o| design.contains(&o.config)));
    assert!(!design.contains(&history[8].config));
}

/// A local move is the best of several by the model's `l(x) / g(x)`, skipping tried ones.
#[test]
fn local_moves_are_chosen_by_the_model() {
    let knobs = knobs_of("A = 0.5  # hone: 0.0..1.0\n");
    let obs = |a: f64, y: f64| Observation {
        config: Config::from([("A".to_string(), KnobValue::Float(a))]),
        objective: Some(y),
    };
    // Good at 0.2 (the good set of so short a run is its best tenth: that one), bad near 0.8.
    let mut history: Vec<Observation> = vec![obs(0.2, 0.1)];
    history.extend([0.7, 0.75, 0.8, 0.85, 0.9, 0.95].map(|a| obs(a, 1.0)));
    let pick = |history: &[Observation]| {
        let space = Space::new(&knobs, history, &config_of(&knobs));
        let model = Model::fit(&space, history, true, false).map(|m| {
            let points = [0.8, 0.6, 0.25, 0.45].map(|u| vec![Coord::U(u)]).to_vec();
            m.best_of(&space, points)
        });
        model.flatten().map(|c| num(&c, "A"))
    };
    assert_eq!(pick(&history), Some(0.25));
    // Once 0.25 is tried (and measured poor) the next best by the model is taken.
    history.push(obs(0.25, 0.5));
    assert_eq!(pick(&history), Some(0.45));
}

/// Whether a choice switches in a local move is the draw's, not the model's: with every good
/// observation on one option, the model's best of free draws nearly never switches (the
/// regression on `crashy`), while the local moves switch as often as random ones do.
#[test]
fn the_model_does_not_veto_switching_a_choice_in_local_moves() {
    let knobs = knobs_of(
        "A = 0.5  # hone: 0.0..1.0\nB = 0.5  # hone: 0.0..1.0\n\
         C = \"a\"  # hone: choice [\"a\", \"b\", \"c\", \"d\"]\n",
    );
    let at = |a: f64, b: f64, c: &str| -> Config {
        [
            ("A".to_string(), KnobValue::Float(a)),
            ("B".to_string(), KnobValue::Float(b)),
            ("C".to_string(), KnobValue::Str(c.to_string())),
        ]
        .into_iter()
        .collect()
    };
    let mut history = Vec::new();
    for k in 0..8 {
        let x = 0.45 + 0.01 * k as f64;
        history.push(Observation {
            config: at(x, 1.0 - x, "a"),
            objective: Some(0.1 + 0.01 * k as f64),
        });
    }
    for k in 0..24 {
        let option = ["a", "b", "c", "d"][k % 4];
        history.push(Observation {
            config: at((k as f64 * 0.37) % 1.0, (k as f64 * 0.61) % 1.0, option),
            objective: Some(1.0 + k as f64),
        });
    }
    let incumbent = history[0].config.clone();
    let space = Space::new(&knobs, &history, &incumbent);
    let Some(model) = Model::fit(&space, &history, true, false) else {
        panic!("no model")
    };
    let from = space.incumbent_point();
    let movable = space.movable(&[]);
    let local = moves::LocalMoves {
        space: &space,
        from: &from,
        movable: &movable,
        step_scale: 1.0,
    };
    let switched = |c: &Config| c.get("C") != incumbent.get("C");
    let (mut plain, mut chosen, mut free) = (0, 0, 0);
    for i in 0..400 {
        let point = local.draw(&mut Rng::new(5, i));
        plain += usize::from(space.fresh(&point).is_some_and(|c| switched(&c)));
        let mut rng = Rng::new(5, i);
        let best = local.best(&model, &mut rng);
        chosen += usize::from(best.is_some_and(|c| switched(&c)));
        // The model's pick among free draws (how local moves were chosen before).
        let mut rng = Rng::new(5, i);
        let draws: Vec<Vec<Coord>> = (0..LOCAL_CANDIDATES)
            .map(|_| local.draw(&mut rng))
            .collect();
        free += usize::from(model.best_of(&space, draws).is_some_and(|c| switched(&c)));
    }
    assert!(plain > 120, "random local moves switched {plain} of 400");
    assert!(
        free * 2 < plain,
        "free draws switched {free}, random {plain}"
    );
    assert!(
        chosen * 10 >= plain * 8,
        "switched {chosen}, random {plain}"
    );
}

/// Which entries of the model's sample were measured: by their index in the history, through
/// the sample's picks past the cap.
#[test]
fn stand_ins_are_found_through_the_samples_picks() {
    assert!(super::measured_mask(5, None, &[]).is_empty());
    assert_eq!(
        super::measured_mask(5, None, &[1, 3]),
        [true, false, true, false, true]
    );
    assert_eq!(
        super::measured_mask(10, Some(&[0, 3, 7, 8]), &[3, 8, 9]),
        [true, false, true, false]
    );
}

/// Late in a run without crashes local moves are rare (one model proposal in twenty rather
/// than three in ten); what counts is what was measured, not running or pruned experiments'
/// stand-ins, and once something proved infeasible they stay as frequent as before.
#[test]
fn local_moves_thin_out_late_unless_something_crashed() {
    let (knobs, history, _) = quadratic_run(LOCAL_UNTIL as u64 + 10, 4);
    let incumbent = history
        .iter()
        .min_by(|a, b| {
            a.objective
                .unwrap_or(f64::INFINITY)
                .total_cmp(&b.objective.unwrap_or(f64::INFINITY))
        })
        .map(|o| o.config.clone())
        .unwrap_or_else(|| config_of(&knobs));
    // A local move nudges one or two of the four knobs, so leaves one of the three floats as
    // it was; a TPE proposal draws every float anew.
    let local_moves = |guide: &SamplerGuide<'_>| {
        (0..300u64)
            .filter(|i| i % refine::EVERY != 0)
            .filter_map(|i| suggest_guided(&knobs, &history, &incumbent, true, 9, i, guide))
            .filter(|(c, _)| {
                ["A", "B", "D"]
                    .iter()
                    .any(|k| c.get(*k) == incumbent.get(*k))
            })
            .count()
    };
    let late = local_moves(&SamplerGuide::default());
    // The twelve worst at a stand-in value: fewer than LOCAL_UNTIL measured.
    let mut by_value: Vec<u32> = (0..history.len() as u32).collect();
    by_value.sort_by(|a, b| {
        let v = |i: &u32| history[*i as usize].objective.unwrap_or(f64::INFINITY);
        v(b).total_cmp(&v(a))
    });
    let stand_ins = &by_value[..12];
    let early = local_moves(&SamplerGuide {
        stand_ins,
        ..SamplerGuide::default()
    });
    let crashed = [Config::from([
        ("A".to_string(), KnobValue::Float(0.01)),
        ("B".to_string(), KnobValue::Float(1e-5)),
        ("C".to_string(), KnobValue::Int(1)),
        ("D".to_string(), KnobValue::Float(-5.0)),
    ])];
    let after_a_crash = local_moves(&SamplerGuide {
        infeasible: &crashed,
        ..SamplerGuide::default()
    });
    assert!(late * 3 < early, "late {late}, early {early}");
    assert!(
        late * 3 < after_a_crash,
        "late {late}, after a crash {after_a_crash}"
    );
}

#[test]
fn the_first_proposal_is_the_centre_of_the_box_unless_that_is_the_baseline() {
    let text = "A = 0.1  # hone: 0.0..1.0\nLR = 0.001  # hone: log 1e-4..1.0\nN = 2  # hone: int 1..9\nC = \"x\"  # hone: choice [\"x\", \"y\", \"z\"]\n";
    let knobs = knobs_of(text);
    let base = config_of(&knobs);
    let space = Space::new(&knobs, &[], &base);
    let mut sim = Simulated::new(base.clone(), 1.0);
    let first = suggest(&knobs, &sim.history, &base, true, 3, 1).expect("a proposal");
    assert_eq!(first.get("A"), Some(&KnobValue::Float(0.5)));
    assert_eq!(first.get("LR"), Some(&KnobValue::Float(0.01)));
    assert_eq!(first.get("N"), Some(&KnobValue::Int(5)));
    // With the baseline's choice (the baseline ran with it); then the hypercube, one
    // experiment later than without the centre: its second point comes next.
    assert_eq!(first.get("C"), Some(&KnobValue::Str("x".into())));
    let design = latin_hypercube(&space, initial_design_size(4), 3);
    sim.record(first, Some(0.5));
    let second = suggest(&knobs, &sim.history, &sim.incumbent, true, 3, 2).expect("a proposal");
    assert_eq!(second, space.config(&design[1]));
    // A baseline at the centre already: the design is the hypercube alone, as it was.
    let centred = text
        .replace("A = 0.1 ", "A = 0.5 ")
        .replace("LR = 0.001 ", "LR = 0.01 ")
        .replace("N = 2 ", "N = 5 ");
    let knobs = knobs_of(&centred);
    let base = config_of(&knobs);
    let space = Space::new(&knobs, &[], &base);
    let history = Simulated::new(base.clone(), 1.0).history;
    let first = suggest(&knobs, &history, &base, true, 3, 1).expect("a proposal");
    let design = latin_hypercube(&space, initial_design_size(4), 3);
    assert_eq!(first, space.config(&design[1]));
}
