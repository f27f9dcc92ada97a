//! A fast, in-process harness for tuning the knobs sampler (not the benchmark: `hone bench`
//! runs the real loop). It replays the twelve synthetic problems of `bench/problems` with their
//! objectives written in Rust (`crashy`: part of the box crashes; a crash is an observation
//! without a value and an infeasible configuration, as the engine passes it, or only the worst
//! with `FEAS=0`), calls [`hone::propose::knobs::suggest`] as the engine does (the
//! incumbent is the best measured so far), and prints the median and mean normalised regret at
//! 20, 50 and 100 verifications over `SEEDS` seeds.
//!
//! It can also emulate two pieces of the outer loop on top of the sampler, to see what they do
//! before a real benchmark run: `STRAT=cur|b|c|d` a rule-based strategy every 5 experiments
//! (`cur`: explore with double steps when the last 10 had no keep, else exploit with half
//! steps; `b`: the same without forcing exploration; `c`: step scales only; `d`: exploit when
//! stuck), `FREEZE=1` the rule-based strategy's frozen knobs, and `SURR=1` the `surrogate`
//! mechanism's candidates as the mechanism makes them (its model step every `EVERY`-th
//! experiment from a trust region starting at `RADIUS`, one offer in three a choice swap).
//! `SEED0` moves the first seed; `PROBLEMS=a,b` runs only those problems; `OUT=file` writes
//! one line per problem and seed, `problem seed regret@20 regret@50 regret@100`, for paired
//! tests (`bench/sampler_compare.py`).
//!
//! `cargo run --release -p hone --example tune_sampler [SEEDS]`, from the repository root.

use hone::meta::Mode;
use hone::propose::knobs::{
    config_of, discover, suggest_guided, surface, Config, Knob, KnobValue, Observation,
    SamplerGuide,
};
use hone::util::median;

mod common;
use common::num;

fn text(c: &Config, name: &str) -> String {
    match c.get(name) {
        Some(KnobValue::Str(s)) => s.clone(),
        Some(KnobValue::Bool(b)) => b.to_string(),
        other => panic!("{name} = {other:?}"),
    }
}

/// `smooth6`: a shifted 6-D Levy function.
fn smooth6(c: &Config) -> f64 {
    let shift = [1.3, -2.1, 0.4, 2.7, -0.9, 1.8];
    let w: Vec<f64> = ["X1", "X2", "X3", "X4", "X5", "X6"]
        .iter()
        .zip(shift)
        .map(|(k, s)| 1.0 + (num(c, k) - s) / 4.0)
        .collect();
    let pi = std::f64::consts::PI;
    let mut v = (pi * w[0]).sin().powi(2);
    for wi in &w[..5] {
        v += (wi - 1.0).powi(2) * (1.0 + 10.0 * (pi * wi + 1.0).sin().powi(2));
    }
    v + (w[5] - 1.0).powi(2) * (1.0 + (2.0 * pi * w[5]).sin().powi(2))
}

/// `llm` and `llm_noisy`: the synthetic response surface of a small LM training run.
fn llm(c: &Config) -> f64 {
    let (p, width, depth) = (num(c, "BATCH_POW"), num(c, "WIDTH"), num(c, "DEPTH"));
    let lr_opt = -3.2 + 0.15 * (p - 7.0) - 0.25 * (width / 512.0).log2();
    let d = num(c, "LEARNING_RATE").log10() - lr_opt;
    let mut lr = if d > 0.0 { 0.25 * d * d } else { 0.08 * d * d };
    if d > 0.8 {
        lr += 0.6 * (d - 0.8).powi(2);
    }
    let warm = 2.0 * (num(c, "WARMUP") - 0.06).powi(2) * (1.0 + 4.0 * d.max(0.0));
    let wd = 0.02 * (num(c, "WEIGHT_DECAY").log10() + 1.5).powi(2);
    let batch = 0.015 * (p - 7.0).powi(2);
    let size = 0.03
        * (depth * width * width / (12.0 * 512.0 * 512.0))
            .log2()
            .powi(2);
    let shape = 0.05 * (16.0 * depth / width).log2().max(0.0).powi(2);
    2.0 + lr + warm + wd + batch + size + shape
}

/// `mixedrosen`: 4-D Rosenbrock over two integers and two floats, a choice moving the valley.
fn mixedrosen(c: &Config) -> f64 {
    let (c_opt, d_opt, extra) = match text(c, "OFFSET").as_str() {
        "left" => (0.9, -0.6, 0.4),
        "center" => (-0.5, 1.2, 0.1),
        _ => (1.4, 0.2, 0.0),
    };
    let x = [
        num(c, "A") / 4.0,
        num(c, "B") / 4.0,
        num(c, "C"),
        num(c, "D"),
    ];
    let shift = [0.5, -0.25, c_opt, d_opt];
    let z: Vec<f64> = x.iter().zip(shift).map(|(x, s)| x - s + 1.0).collect();
    extra
        + (0..3)
            .map(|i| 100.0 * (z[i + 1] - z[i] * z[i]).powi(2) + (1.0 - z[i]).powi(2))
            .sum::<f64>()
}

fn objective(problem: &str, c: &Config) -> f64 {
    match problem {
        "rosenbrock" => {
            let shift = [0.7, -0.4, 1.1, 0.3];
            let z: Vec<f64> = ["X1", "X2", "X3", "X4"]
                .iter()
                .zip(shift)
                .map(|(k, s)| num(c, k) - s + 1.0)
                .collect();
            (0..3)
                .map(|i| 100.0 * (z[i + 1] - z[i] * z[i]).powi(2) + (1.0 - z[i]).powi(2))
                .sum()
        }
        "mixed" => {
            let act = match text(c, "ACTIVATION").as_str() {
                "relu" => 0.25,
                "tanh" => 0.6,
                "gelu" => 0.0,
                _ => 0.1,
            };
            let norm = text(c, "USE_NORM") == "true";
            let lr_opt = if norm { -2.5 } else { -3.5 };
            (num(c, "LAYERS") - 5.0).powi(2) * 0.06
                + (num(c, "WIDTH").log2() - 7.0).powi(2) * 0.12
                + act
                + (num(c, "LEARNING_RATE").log10() - lr_opt).powi(2) * 0.3
                + if norm { 0.0 } else { 0.3 }
        }
        "noisy" => {
            (num(c, "ALPHA") - 0.65).powi(2) * 2.0
                + (num(c, "BETA").log10() - 1.0).powi(2) * 0.5
                + (num(c, "GAMMA").log2() - 12f64.log2()).powi(2) * 0.05
        }
        "nuisance" => {
            (num(c, "LEARNING_RATE").log10() + 2.0).powi(2) * 0.4
                + (num(c, "MOMENTUM") - 0.9).powi(2) * 2.0
                + (num(c, "BATCH").log2() - 6.0).powi(2) * 0.05
        }
        "conditional" => match text(c, "MODEL").as_str() {
            "linear" => 0.6 + (num(c, "REGULARIZATION").log10() + 3.0).powi(2) * 0.05,
            "tree" => 0.3 + (num(c, "TREE_DEPTH") - 9.0).powi(2) * 0.01,
            _ => {
                (num(c, "NET_LR").log10() + 2.5).powi(2) * 0.6
                    + (num(c, "NET_WIDTH").log2() - 6.0).powi(2) * 0.08
            }
        },
        "smooth6" => smooth6(c),
        "llm" | "llm_noisy" => llm(c),
        "mixedrosen" => mixedrosen(c),
        "sparse" => {
            let u = num(c, "K07").log10();
            0.3 * (u - 0.6).powi(2) + 2.0 * (num(c, "K03") - 0.7 - 0.2 * u).powi(2)
        }
        "crashy" => {
            (num(c, "LEARNING_RATE").log10() + 2.0).powi(2) * 0.4
                + (num(c, "MOMENTUM") - 0.9).powi(2) * 2.0
                + (num(c, "BATCH").log2() - 6.0).powi(2) * 0.05
                + (num(c, "WEIGHT_DECAY").log10() + 4.0).powi(2) * 0.05
        }
        "optchoice" => {
            let lr = num(c, "LEARNING_RATE").log10();
            match text(c, "OPTIMIZER").as_str() {
                "sgd" => 0.3 + 0.1 * (lr + 1.0).powi(2) + (num(c, "MOMENTUM") - 0.9).powi(2),
                "adam" => {
                    0.1 + 0.1 * (lr + 3.3).powi(2)
                        + 0.1 * ((1.0 - num(c, "BETA2")).log10() + 2.0).powi(2)
                }
                _ => {
                    0.4 * (lr + 4.0).powi(2) + 0.3 * (num(c, "WEIGHT_DECAY").log10() + 0.5).powi(2)
                }
            }
        }
        other => panic!("unknown problem {other}"),
    }
}

/// Whether the problem's verifier exits non-zero on `c` (`crashy`'s: momentum above 0.95, a
/// batch not dividing 4096, or learning rate x batch above 4).
fn crashes(problem: &str, c: &Config) -> bool {
    problem == "crashy"
        && (num(c, "MOMENTUM") > 0.95
            || 4096.0 % num(c, "BATCH") != 0.0
            || num(c, "LEARNING_RATE") * num(c, "BATCH") > 4.0)
}

/// The problem's known minimum (regret is `(best - optimum) / (baseline - optimum)`).
fn optimum(problem: &str) -> f64 {
    if problem.starts_with("llm") {
        2.0
    } else {
        0.0
    }
}

/// The sd of the measurement noise (0: measured exactly).
fn noise_sd(problem: &str) -> f64 {
    match problem {
        "noisy" | "llm_noisy" => 0.05,
        _ => 0.0,
    }
}

const PROBLEMS: [&str; 12] = [
    "rosenbrock",
    "mixed",
    "noisy",
    "nuisance",
    "conditional",
    "smooth6",
    "llm",
    "llm_noisy",
    "mixedrosen",
    "sparse",
    "optchoice",
    "crashy",
];

/// Gaussian noise from a splitmix stream (the noisy problem's measurement).
fn gauss(state: &mut u64) -> f64 {
    let mut next = || hone::util::unit_f64(hone::util::splitmix64(state));
    let (u1, u2) = (1.0 - next(), next());
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// What the environment asks of every run (see the module's documentation).
struct Settings {
    /// `FEAS`: crashes feed the feasibility model (else they only count as the worst).
    learn: bool,
    /// `STRAT`: the rule-based strategy emulated (empty: none).
    strat: String,
    /// `SURR`: the surrogate mechanism's candidates offered.
    surr: bool,
    /// `FREEZE`: the rule-based strategy's frozen knobs.
    freeze: bool,
    /// `EVERY`: the surrogate's model step every this many experiments.
    every: u64,
    /// `RADIUS`: the surrogate's first trust region.
    radius: f64,
}

impl Settings {
    fn from_env() -> Settings {
        Settings {
            learn: std::env::var("FEAS").map_or(true, |v| v != "0"),
            strat: std::env::var("STRAT").unwrap_or_default(),
            surr: std::env::var("SURR").is_ok(),
            freeze: std::env::var("FREEZE").is_ok(),
            every: std::env::var("EVERY")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(2),
            radius: std::env::var("RADIUS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.2),
        }
    }
}

/// The rule-based strategy's mode and step scale (`STRAT`) after `kept`.
fn strategy(strat: &str, kept: &[bool]) -> (Option<Mode>, f64) {
    let window = &kept[kept.len().saturating_sub(10)..];
    let keeps = window.iter().filter(|k| **k).count();
    match (strat, keeps) {
        ("cur", 0) => (Some(Mode::Explore), 2.0),
        ("cur", _) => (Some(Mode::Exploit), 0.5),
        ("b", 0) => (None, 2.0),
        ("b", _) => (Some(Mode::Exploit), 0.5),
        ("c", 0) => (None, 2.0),
        ("c", _) => (None, 0.5),
        ("d", 0) => (Some(Mode::Exploit), 2.0),
        ("d", _) => (None, 1.0),
        _ => (None, 1.0),
    }
}

/// The surrogate mechanism's offer at experiment `n` (as the mechanism makes it) and whether
/// it is a choice swap; `radius` is its trust region, reset when too small to leave the
/// measured configurations.
fn surrogate_offer(
    knobs: &[Knob],
    history: &[Observation],
    incumbent: &Config,
    n: u64,
    every: u64,
    radius: &mut f64,
) -> (Option<Config>, bool) {
    let measured: Vec<(Config, f64)> = history
        .iter()
        .filter_map(|o| Some((o.config.clone(), o.objective?)))
        .collect();
    // As the mechanism does: one offer in SWAP_EVERY changes a choice; a region
    // too small to leave the measured configurations starts again.
    let swapped = if (n / every) % surface::SWAP_EVERY == 1 {
        let tried: Vec<Config> = history.iter().map(|o| o.config.clone()).collect();
        surface::swap(knobs, &measured, |c| tried.contains(c), incumbent)
    } else {
        None
    };
    let mut c = swapped
        .clone()
        .or_else(|| surface::step(knobs, &measured, incumbent, *radius));
    if let Some(x) = c.clone().filter(|_| swapped.is_none()) {
        if *radius < 0.2 && history.iter().any(|o| o.config == x) {
            *radius = 0.2;
            c = surface::step(knobs, &measured, incumbent, *radius);
        }
    }
    (c, swapped.is_some())
}

/// The rule-based strategy's frozen knobs at experiment `n` (`FREEZE`), from the history
/// revised every 5 experiments.
fn frozen_knobs(history: &[Observation], kept: &[bool], n: u64, n_knobs: usize) -> Vec<String> {
    let records: Vec<hone::store::ExperimentRecord> = history
        .iter()
        .enumerate()
        .map(|(i, o)| hone::store::ExperimentRecord {
            n: i as u64,
            status: Some(if i == 0 {
                hone::store::Status::Baseline
            } else if kept[i - 1] {
                hone::store::Status::Keep
            } else {
                hone::store::Status::Discard
            }),
            objective: o.objective,
            config: serde_json::to_value(&o.config).ok(),
            ..Default::default()
        })
        .collect();
    let last = ((n - 1) / 5) * 5;
    let rc = hone::meta::strategy::RuleController {
        every: 5,
        max_frozen: 2,
    };
    rc.revise(&records[..=last as usize], n_knobs).frozen
}

/// The surrogate's trust region after one of its own steps: wider after a keep, narrower
/// otherwise.
fn trust_region(radius: f64, kept: bool) -> f64 {
    if kept {
        (radius * 1.5).min(0.5)
    } else {
        (radius * 0.5).max(0.01)
    }
}

/// The measured value of `c` on `problem` (noise from the seed's stream where it has any).
fn measure(problem: &str, c: &Config, noise: &mut u64) -> f64 {
    let t = objective(problem, c);
    if noise_sd(problem) > 0.0 {
        t + noise_sd(problem) * gauss(noise)
    } else {
        t
    }
}

/// One run of `len` experiments on `problem` from `base` with `seed`: the noise-free value of
/// the incumbent after each experiment (the baseline first).
fn run_seed(
    problem: &str,
    knobs: &[Knob],
    base: &Config,
    seed: u64,
    len: u64,
    settings: &Settings,
) -> Vec<f64> {
    let mut noise = seed.wrapping_mul(7919);
    let mut incumbent = base.clone();
    let mut best = measure(problem, base, &mut noise);
    let mut best_true = objective(problem, base);
    let mut history = vec![Observation {
        config: base.clone(),
        objective: Some(best),
    }];
    let mut trajectory = vec![best_true];
    let mut infeasible: Vec<Config> = Vec::new();
    let (mut mode, mut scale): (Option<Mode>, f64) = (None, 1.0);
    let mut kept: Vec<bool> = Vec::new();
    let mut radius = settings.radius;
    for n in 1..len {
        // A rule-based strategy, revised every 5 experiments (STRAT: none, cur, b, c, d).
        if n % 5 == 1 && n > 10 {
            (mode, scale) = strategy(&settings.strat, &kept);
        }
        let (offered, swap_offered) = if settings.surr && n % settings.every == 0 {
            let (c, swapped) =
                surrogate_offer(knobs, &history, &incumbent, n, settings.every, &mut radius);
            (c.into_iter().collect::<Vec<Config>>(), swapped)
        } else {
            (Vec::new(), false)
        };
        let frozen = if settings.freeze && n > 10 {
            frozen_knobs(&history, &kept, n, knobs.len())
        } else {
            Vec::new()
        };
        let guide = SamplerGuide {
            candidates: &offered,
            frozen: &frozen,
            mode,
            step_scale: Some(scale),
            infeasible: if settings.learn { &infeasible } else { &[] },
            ..SamplerGuide::default()
        };
        let Some((c, _)) = suggest_guided(knobs, &history, &incumbent, true, seed, n, &guide)
        else {
            break;
        };
        if crashes(problem, &c) {
            kept.push(false);
            infeasible.push(c.clone());
            history.push(Observation {
                config: c,
                objective: None,
            });
            trajectory.push(best_true);
            continue;
        }
        let y = measure(problem, &c, &mut noise);
        // Only the model's own steps move the trust region (as in the mechanism).
        if offered.first() == Some(&c) && !swap_offered {
            radius = trust_region(radius, y < best);
        }
        kept.push(y < best);
        if y < best {
            best = y;
            best_true = objective(problem, &c);
            incumbent = c.clone();
        }
        history.push(Observation {
            config: c,
            objective: Some(y),
        });
        trajectory.push(best_true);
    }
    trajectory
}

/// `problem`'s normalised regret at each of `budgets`, one row of the seeds' figures per seed
/// appended to `per_seed`.
fn run_problem(
    problem: &str,
    seeds: std::ops::Range<u64>,
    budgets: &[usize],
    settings: &Settings,
    per_seed: &mut Vec<String>,
) -> Vec<Vec<f64>> {
    let path = format!("bench/problems/{problem}/knobs.py");
    let source = std::fs::read_to_string(&path).expect("run from the repository root");
    let knobs = discover("knobs.py", &source).expect("knobs");
    let base = config_of(&knobs);
    let base_true = objective(problem, &base);
    let len = *budgets.last().unwrap_or(&100) as u64;
    let mut at: Vec<Vec<f64>> = vec![Vec::new(); budgets.len()];
    for seed in seeds {
        let trajectory = run_seed(problem, &knobs, &base, seed, len, settings);
        let mut row = format!("{problem} {seed}");
        for (i, b) in budgets.iter().enumerate() {
            let v = trajectory[(*b).min(trajectory.len()) - 1];
            let r = (v - optimum(problem)) / (base_true - optimum(problem));
            at[i].push(r);
            row.push_str(&format!(" {r:e}"));
        }
        per_seed.push(row);
    }
    at
}

fn main() {
    let seeds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let budgets = [20usize, 50, 100];
    let only = std::env::var("PROBLEMS").unwrap_or_default();
    let first: u64 = std::env::var("SEED0")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let settings = Settings::from_env();
    let mut summary: Vec<Vec<f64>> = vec![Vec::new(); budgets.len()];
    let mut per_seed: Vec<String> = Vec::new();
    for problem in PROBLEMS {
        if !only.is_empty() && !only.split(',').any(|p| p == problem) {
            continue;
        }
        let at = run_problem(
            problem,
            first..first + seeds,
            &budgets,
            &settings,
            &mut per_seed,
        );
        let cells: Vec<String> = budgets
            .iter()
            .zip(&at)
            .map(|(b, v)| {
                format!(
                    "@{b} med {:.4} mean {:.4}",
                    median(v),
                    v.iter().sum::<f64>() / v.len() as f64
                )
            })
            .collect();
        println!("{problem:12} {}", cells.join(" | "));
        for (i, v) in at.iter().enumerate() {
            summary[i].push(median(v));
        }
    }
    let means: Vec<String> = budgets
        .iter()
        .zip(&summary)
        .map(|(b, v)| format!("@{b} {:.4}", v.iter().sum::<f64>() / v.len().max(1) as f64))
        .collect();
    println!("mean of medians: {}", means.join(" | "));
    if let Ok(path) = std::env::var("OUT") {
        per_seed.push(String::new());
        std::fs::write(&path, per_seed.join("\n")).expect("OUT is writable");
    }
}
