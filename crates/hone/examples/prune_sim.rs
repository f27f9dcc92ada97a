//! A fast, in-process harness for pruning hopeless runs (issue 17; not the benchmark:
//! `bench/prune.sh` runs the real loop). It replays `bench/prune`'s curve problem (three knobs;
//! 50 steps of `final + 3 exp(-step / tau)` with a noise of sd 0.02 per step, `tau` from 5 to
//! 10 steps with the learning rate), drives the knobs optimizer as the engine does (the
//! history through `propose::optimizer::observations`, the incumbent the best kept so far, a
//! keep any improvement) and the real pruning rule (`verify::prune::Pruner`, judged at every
//! step), and gives each arm the verifier time, in steps, of the unpruned arm's `EXPERIMENTS`
//! experiments (a pruned arm may run `CAP` (2) times as many and is cut where its steps would
//! pass it; `CAP=1000` leaves the steps alone to end it: the same verifier time for every arm).
//!
//! Arms (`ARMS`, comma-separated; default below): `RULE/WARMUP` or `RULE/WARMUP/MIN_RUNS`
//! (`median/10`, `top:3/20`, `halving/9`, `reach/8/10`...; `prune_min_runs` 3 unless given;
//! `reach~0.12/3/5`, whose bar tightens as the references accumulate), several
//! joined by `+` (pruned when any of them prunes), then optionally
//! `;FEED` (how a pruned run is fed to the sampler: `worst`, the library's, the worst value
//! measured; `none`, no value; `est`, its value at the stop less the references' median drop
//! from there to their end; `est2`, that but no better than the worst reference that was
//! ahead of it there) and `;EXPLORE` (the share of proposals drawn uniformly, the outer
//! loop's `Mode::Explore`): `halving/9;est;0.3`. The unpruned arm always runs first.
//!
//! Prints per arm, over `SEEDS` seeds from `SEED0` (default 1): experiments run, pruned,
//! pruned runs that would have been keeps, steps, experiments per hour of steps against the
//! unpruned arm, the median and mean final regret, and the share of proposals whose nearest
//! earlier experiment (in the sampler's unit cube) had been pruned: how often the sampler
//! proposes again next to a run that was stopped. An arm that `bench/prune.sh` can run (a rule,
//! its warm-up and minimum runs, the library's feed, no exploration) replays that real loop on
//! the same seeds: the sampler is seeded the same, and `curve.py` draws the same noise
//! (`CAP=4 SLIP=0` for `PRUNE_CAP=4`: the engine stores no point past the one a run is pruned
//! at). With `PER_SEED` set (to anything) it also prints, on stderr, one line per arm and seed
//! (arm, seed, experiments, pruned, steps, final regret). `SLIP=1` counts a pruned run one step
//! past its stop.
//!
//! `cargo run --release -p hone --example prune_sim [SEEDS] [EXPERIMENTS]`, from the
//! repository root.

use std::time::Duration;

use hone::propose::knobs::{
    config_of, discover, suggest_guided, unit_coords, Config, Knob, SamplerGuide,
};
use hone::propose::optimizer::{observations, stand_ins};
use hone::store::{ExperimentRecord, Status};
use hone::util::{median, splitmix64, unit_f64};
use hone::verify::prune::{near_the_end, PruneRule, Pruner, Reference, Warmup};
use hone::verify::Direction;

mod common;
use common::num;

const STEPS: u32 = 50;
const OPTIMUM: f64 = 1.0;

/// `bench/prune/curve.py`'s `final`.
fn final_value(c: &Config) -> f64 {
    let (lr, width, decay) = (num(c, "LR"), num(c, "WIDTH"), num(c, "DECAY"));
    OPTIMUM
        + 0.3 * (lr.log10() + 2.5).powi(2)
        + 0.05 * (width.log2() - 7.0).powi(2)
        + (decay - 0.3).powi(2)
}

/// `bench/prune/curve.py`'s `loss`, its noise bit for bit (`train.py` keys it with `CURVE_SEED`
/// and the experiment's number, as [`key`] does).
fn loss(c: &Config, step: u32, key: u64) -> f64 {
    let lr = num(c, "LR");
    let tau = 5.0 + 5.0 / (1.0 + 100.0 * lr);
    let clean = final_value(c) + 3.0 * (-f64::from(step) / tau).exp();
    if step == STEPS {
        return clean;
    }
    let mut s = key ^ u64::from(step).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let (u1, u2) = (
        1.0 - unit_f64(splitmix64(&mut s)),
        unit_f64(splitmix64(&mut s)),
    );
    clean + 0.02 * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

struct Arm {
    name: String,
    /// Pruned when any of them prunes.
    pruners: Vec<Pruner>,
    /// How a pruned run is fed to the sampler: `worst` (the library's), `est`, `none`.
    feed: String,
    /// The share of proposals drawn uniformly (`Mode::Explore`).
    explore: f64,
}

fn arm(spec: &str) -> Arm {
    let parts: Vec<&str> = spec.split(';').collect();
    let pruners = match parts[0] {
        "none" => Vec::new(),
        rules => rules
            .split('+')
            .map(|r| {
                let mut f = r.split('/');
                let rule = f.next().expect("RULE/WARMUP");
                let warmup = f.next().expect("RULE/WARMUP");
                Pruner {
                    rule: PruneRule::parse(rule).expect("a rule"),
                    direction: Direction::Minimize,
                    warmup: Warmup::Steps(warmup.parse().expect("a warm-up in steps")),
                    min_runs: f.next().map_or(3, |n| n.parse().expect("min runs")),
                }
            })
            .collect(),
    };
    Arm {
        name: spec.to_owned(),
        pruners,
        feed: parts.get(1).unwrap_or(&"worst").to_string(),
        explore: parts.get(2).and_then(|e| e.parse().ok()).unwrap_or(0.0),
    }
}

/// One seed of one arm: (experiments run, pruned, steps run, final regret).
struct Outcome {
    experiments: usize,
    pruned: usize,
    steps: u64,
    regret: f64,
    /// Pruned runs that would have been keeps.
    lost: usize,
    /// Proposals whose nearest earlier experiment (unit cube) had been pruned.
    near_pruned: usize,
}

fn run(arm: &Arm, knobs: &[Knob], seed: u64, budget: Option<u64>, m: u64) -> Outcome {
    let base = config_of(knobs);
    let mut records: Vec<ExperimentRecord> = Vec::new();
    let mut references: Vec<Reference> = Vec::new();
    let curve_of = |c: &Config, n: u64| -> Vec<(f64, f64)> {
        (1..=STEPS)
            .map(|s| (f64::from(s), loss(c, s, key(seed, n))))
            .collect()
    };
    let b = final_value(&base);
    references.push(Reference {
        curve: curve_of(&base, 0),
        objective: Some(b),
    });
    records.push(record(0, Status::Baseline, Some(b), &base));
    let (mut incumbent, mut best) = (base.clone(), b);
    let (mut experiments, mut pruned, mut steps, mut lost) = (0, 0, 0u64, 0);
    let mut stops: Vec<Option<(f64, f64)>> = vec![None];
    let mut points: Vec<(Vec<f64>, bool)> = vec![(coords(knobs, &base), false)];
    let mut near_pruned = 0;
    let limit = if budget.is_some() { cap() * m } else { m };
    for n in 1..=limit {
        let seen = Seen {
            records: &records,
            stops: &stops,
            references: &references,
        };
        let Some(config) = propose(arm, knobs, &seen, &incumbent, seed, n) else {
            break;
        };
        let curve = curve_of(&config, n);
        let at = first_stop(&arm.pruners, &references, &curve);
        let stop = at.map(|(s, _)| s as u64);
        stops.push(at);
        let cost = stop.map_or(u64::from(STEPS), |s| (s + slip()).min(u64::from(STEPS)));
        if budget.is_some_and(|b| steps + cost > b) {
            break;
        }
        steps += cost;
        experiments += 1;
        let here = coords(knobs, &config);
        near_pruned += usize::from(nearest_pruned(&points, &here));
        points.push((here, stop.is_some()));
        if stop.is_some() {
            pruned += 1;
            lost += usize::from(final_value(&config) < best);
            records.push(record(n, Status::Pruned, None, &config));
            continue;
        }
        let value = final_value(&config);
        references.push(Reference {
            curve,
            objective: Some(value),
        });
        if value < best {
            best = value;
            incumbent = config.clone();
            records.push(record(n, Status::Keep, Some(value), &config));
        } else {
            records.push(record(n, Status::Discard, Some(value), &config));
        }
    }
    Outcome {
        experiments,
        pruned,
        steps,
        regret: best - OPTIMUM,
        lost,
        near_pruned,
    }
}

/// A configuration's unit coordinates (numbers only).
fn coords(knobs: &[Knob], c: &Config) -> Vec<f64> {
    unit_coords(knobs, c).into_iter().flatten().collect()
}

/// Whether the nearest of `points` (Euclidean in the unit cube) to `here` was pruned.
fn nearest_pruned(points: &[(Vec<f64>, bool)], here: &[f64]) -> bool {
    let d = |p: &[f64]| -> f64 { p.iter().zip(here).map(|(a, b)| (a - b).powi(2)).sum() };
    points
        .iter()
        .min_by(|a, b| d(&a.0).total_cmp(&d(&b.0)))
        .is_some_and(|p| p.1)
}

/// `SLIP`: steps a pruned run is counted beyond the step it was judged at (0 is the real loop's
/// count: `bench/prune.sh` counts the points stored, and none is stored past the decision).
fn slip() -> u64 {
    std::env::var("SLIP")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// `CAP`: how many times the unpruned arm's experiments a pruned arm may run (default 2, as
/// `bench/prune.sh`); the steps budget cuts it first when it is large.
fn cap() -> u64 {
    std::env::var("CAP")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}

fn key(seed: u64, n: u64) -> u64 {
    seed.wrapping_mul(0x1000_0000_01b3) ^ n.wrapping_mul(0xff51_afd7_ed55_8ccd)
}

/// What the loop has seen: the records, where each pruned run stopped (step, best value so
/// far; `None` for the others), and the reference curves.
struct Seen<'a> {
    records: &'a [ExperimentRecord],
    stops: &'a [Option<(f64, f64)>],
    references: &'a [Reference],
}

/// The next configuration, as the engine's knobs proposer asks for it (a pruned run fed to
/// the sampler as `arm.feed` says; `worst` leaves the library's choice alone).
fn propose(
    arm: &Arm,
    knobs: &[Knob],
    seen: &Seen<'_>,
    incumbent: &Config,
    seed: u64,
    n: u64,
) -> Option<Config> {
    let mut history = observations(seen.records, true);
    // The library's feed: pruned runs at the worst value, a stand-in the refinement step's
    // model leaves out. Another feed's values are the sampler's to fit.
    let lied = if arm.feed == "worst" {
        stand_ins(seen.records)
    } else {
        Vec::new()
    };
    if arm.feed != "worst" {
        for (o, at) in history.iter_mut().zip(seen.stops) {
            if let Some((s, v)) = at {
                o.objective = estimate(&arm.feed, seen.references, *s, *v);
            }
        }
    }
    let mut h = key(seed, n) ^ 0x5eed;
    let explore = unit_f64(splitmix64(&mut h)) < arm.explore;
    let guide = SamplerGuide {
        mode: explore.then_some(hone::meta::Mode::Explore),
        stand_ins: &lied,
        ..SamplerGuide::default()
    };
    let (next, _) = suggest_guided(knobs, &history, incumbent, true, seed, n, &guide)?;
    let mut config = incumbent.clone();
    config.extend(next);
    Some(config)
}

/// Where the first of `pruners` stops a run printing `curve`: (step, best value so far).
fn first_stop(pruners: &[Pruner], refs: &[Reference], curve: &[(f64, f64)]) -> Option<(f64, f64)> {
    // As the engine does, no run is stopped in the last tenth of the references' length
    // (`END=0`: judged there too, as before).
    let end_guard = std::env::var("END").map_or(true, |v| v != "0");
    let mut so_far = f64::INFINITY;
    for &(s, v) in curve {
        so_far = so_far.min(v);
        if end_guard && near_the_end(refs, s) {
            continue;
        }
        if pruners
            .iter()
            .any(|p| p.judge(refs, so_far, s, Duration::ZERO).is_some())
        {
            return Some((s, so_far));
        }
    }
    None
}

/// A pruned run's value as fed to the sampler.
fn estimate(feed: &str, refs: &[Reference], step: f64, best: f64) -> Option<f64> {
    let pairs: Vec<(f64, f64)> = refs
        .iter()
        .filter_map(|r| {
            let i = r.curve.partition_point(|p| p.0 <= step).checked_sub(1)?;
            Some((r.curve[i].1, r.objective?))
        })
        .collect();
    let worst = refs.iter().filter_map(|r| r.objective).reduce(f64::max);
    match feed {
        "worst" => worst, // the library's `observations` already does this
        "none" => None,
        // Its value there less the median drop the references made from there.
        "est" => {
            let drops: Vec<f64> = pairs.iter().map(|(v, o)| v - o).collect();
            Some(best - median(&drops))
        }
        // As "est", but never better than the worst reference at least as good there.
        "est2" => {
            let drops: Vec<f64> = pairs.iter().map(|(v, o)| v - o).collect();
            let floor = pairs
                .iter()
                .filter(|(v, _)| *v <= best)
                .map(|p| p.1)
                .reduce(f64::max);
            Some((best - median(&drops)).max(floor.unwrap_or(f64::NEG_INFINITY)))
        }
        other => panic!("feed {other}"),
    }
}

fn record(n: u64, status: Status, objective: Option<f64>, config: &Config) -> ExperimentRecord {
    ExperimentRecord {
        n,
        status: Some(status),
        objective,
        config: serde_json::to_value(config).ok(),
        ..Default::default()
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let seeds: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(20);
    let m: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(30);
    let seed0: u64 = std::env::var("SEED0")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let arms = std::env::var("ARMS")
        .unwrap_or_else(|_| "median/20,halving/9,reach/5/4,reach/5/5,reach~0.12/3/5".into());
    let source =
        std::fs::read_to_string("bench/prune/knobs.py").expect("run from the repository root");
    let knobs = discover("knobs.py", &source).expect("knobs");
    let unpruned = arm("none");
    let base: Vec<Outcome> = (seed0..seed0 + seeds)
        .map(|s| run(&unpruned, &knobs, s, None, m))
        .collect();
    let rate = |o: &[Outcome]| {
        let e: usize = o.iter().map(|x| x.experiments).sum();
        let s: u64 = o.iter().map(|x| x.steps).sum();
        e as f64 / s as f64
    };
    let r0 = rate(&base);
    println!("| arm | experiments | pruned | lost keeps | steps | vs no pruning | median regret | mean regret | near a pruned run |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let per_seed = std::env::var_os("PER_SEED").is_some();
    let show = |name: &str, o: &[Outcome]| {
        if per_seed {
            for (s, x) in (seed0..).zip(o) {
                eprintln!(
                    "{name}\t{s}\t{}\t{}\t{}\t{:.6}",
                    x.experiments, x.pruned, x.steps, x.regret
                );
            }
        }
        let regrets: Vec<f64> = o.iter().map(|x| x.regret).collect();
        println!(
            "| {name} | {} | {} | {} | {} | {:.2}x | {:.4} | {:.4} | {:.0}% |",
            o.iter().map(|x| x.experiments).sum::<usize>(),
            o.iter().map(|x| x.pruned).sum::<usize>(),
            o.iter().map(|x| x.lost).sum::<usize>(),
            o.iter().map(|x| x.steps).sum::<u64>(),
            rate(o) / r0,
            median(&regrets),
            regrets.iter().sum::<f64>() / regrets.len() as f64,
            100.0 * o.iter().map(|x| x.near_pruned).sum::<usize>() as f64
                / o.iter().map(|x| x.experiments).sum::<usize>().max(1) as f64,
        );
    };
    show("none", &base);
    for spec in arms.split(',') {
        let a = arm(spec);
        let out: Vec<Outcome> = (seed0..seed0 + seeds)
            .zip(&base)
            .map(|(s, b)| run(&a, &knobs, s, Some(b.steps), m))
            .collect();
        show(&a.name, &out);
    }
}
