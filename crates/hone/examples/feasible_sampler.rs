//! In-process harness for feasibility learned from crashes (issue 17): the `crashy` problem of
//! `bench/problems` (part of the box crashes) with its verifier written in Rust, the sampler
//! called as the engine calls it (incumbent: the best measured so far; a crash is an
//! observation without a value and, unless `FEAS=0`, an infeasible configuration). `FEAS=0` is
//! the sampler as it was before: crashes only count as the worst.
//!
//! Prints, over `SEEDS` seeds: crashes among the first 50 experiments (mean, median) and the
//! normalised regret (best feasible value / baseline) at 50 and 100 experiments.
//!
//! `PROBLEM=momentum` runs the scikit-learn stand-in of `bench/newcomer_crashes.sh`
//! (`sklearn-wide`: a momentum range reaching above 1, where the program refuses it) instead,
//! its accuracy `a` as the value `1 - a` to minimise.
//!
//! `cargo run --release -p hone --example feasible_sampler [SEEDS]`, from the repository root.

use hone::propose::knobs::{
    config_of, discover, suggest_guided, Config, Knob, Observation, SamplerGuide,
};
use hone::util::{mean, median};

mod common;
use common::num;

/// The verifier of `bench/problems/crashy`: `None` where it exits non-zero.
fn crashy(c: &Config) -> Option<f64> {
    let (lr, m, b, wd) = (
        num(c, "LEARNING_RATE"),
        num(c, "MOMENTUM"),
        num(c, "BATCH"),
        num(c, "WEIGHT_DECAY"),
    );
    if m > 0.95 || 4096.0 % b != 0.0 || lr * b > 4.0 {
        return None;
    }
    Some(
        (lr.log10() + 2.0).powi(2) * 0.4
            + (m - 0.9).powi(2) * 2.0
            + (b.log2() - 6.0).powi(2) * 0.05
            + (wd.log10() + 4.0).powi(2) * 0.05,
    )
}

/// The knobs of `sklearn-wide` (`bench/newcomer_crashes.sh`): the ranges an older `hone init`
/// drafted for the scikit-learn stand-in (crates/hone-cli/tests/fixtures/sklearn/train.py).
const MOMENTUM_KNOBS: &str = "LEARNING_RATE_INIT = 0.001  # hone: log 0.0001..0.01
MOMENTUM = 0.9  # hone: log 0.09..9
ALPHA = 0.0001  # hone: log 0.00001..0.001
HIDDEN = 64  # hone: int log 16..256
";

/// The stand-in's verifier: `None` where it exits non-zero (a momentum outside [0, 1]), else
/// one minus the accuracy it prints (rounded to four digits, as it prints it).
fn momentum(c: &Config) -> Option<f64> {
    let (lr, m, hidden) = (
        num(c, "LEARNING_RATE_INIT"),
        num(c, "MOMENTUM"),
        num(c, "HIDDEN"),
    );
    if !(0.0..=1.0).contains(&m) {
        return None;
    }
    let acc = 0.98
        - 0.5 * (m - 0.95).powi(2)
        - 0.001 * (hidden - 100.0).abs() / 10.0
        - 0.01 * (lr - 0.002).abs() * 100.0;
    Some(1.0 - (acc * 1e4).round() / 1e4)
}

/// A problem's verifier: its value, or `None` where it exits non-zero.
type Verify = fn(&Config) -> Option<f64>;

/// The problem `PROBLEM` names: its knobs' source and its verifier.
fn problem() -> (String, Verify) {
    match std::env::var("PROBLEM").as_deref() {
        Ok("momentum") => (MOMENTUM_KNOBS.to_string(), momentum),
        _ => (
            std::fs::read_to_string("bench/problems/crashy/knobs.py")
                .expect("run from the repository root"),
            crashy,
        ),
    }
}

/// What one seed's run gave: crashes among the first 50 and 100 experiments, and the regret
/// at 50 and 100.
struct Outcome {
    crashes50: f64,
    crashes100: f64,
    at50: f64,
    at100: f64,
}

/// One run of 100 experiments with `seed` (`learn`: crashes feed the feasibility model;
/// `DEBUG` prints each crash and the final incumbent).
fn run_seed(
    (knobs, verify): (&[Knob], Verify),
    base: &Config,
    base_value: f64,
    seed: u64,
    learn: bool,
) -> Outcome {
    let debug = std::env::var("DEBUG").is_ok();
    let mut incumbent = base.clone();
    let mut best = base_value;
    let mut history = vec![Observation {
        config: base.clone(),
        objective: Some(best),
    }];
    let mut infeasible: Vec<Config> = Vec::new();
    let mut crashed = 0usize;
    let (mut crashes50, mut at50) = (f64::NAN, f64::NAN);
    for n in 1..100u64 {
        let guide = SamplerGuide {
            infeasible: if learn { &infeasible } else { &[] },
            ..SamplerGuide::default()
        };
        let Some((c, _)) = suggest_guided(knobs, &history, &incumbent, true, seed, n, &guide)
        else {
            break;
        };
        let y = verify(&c);
        match y {
            Some(v) if v < best => {
                best = v;
                incumbent = c.clone();
            }
            Some(_) => {}
            None => {
                if debug && n < 50 {
                    let moved = c
                        .iter()
                        .filter(|(k, v)| incumbent.get(*k) != Some(v))
                        .count();
                    eprintln!(
                        "seed {seed} n {n}: crash, {moved} knobs moved from the incumbent, {c:?}"
                    );
                }
                crashed += 1;
                infeasible.push(c.clone());
            }
        }
        history.push(Observation {
            config: c,
            objective: y,
        });
        if n == 8 && debug {
            eprintln!("seed {seed}: {crashed} crashes in the initial design");
        }
        if n == 49 {
            crashes50 = crashed as f64;
            at50 = best / base_value;
        }
    }
    if debug {
        eprintln!(
            "seed {seed}: final {:.4} at {incumbent:?}",
            best / base_value
        );
    }
    Outcome {
        crashes50,
        crashes100: crashed as f64,
        at50,
        at100: best / base_value,
    }
}

fn main() {
    let seeds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let learn = std::env::var("FEAS").map_or(true, |v| v != "0");
    let (source, verify) = problem();
    let knobs = discover("knobs.py", &source).expect("knobs");
    let base = config_of(&knobs);
    let base_value = verify(&base).expect("the baseline runs");
    let (mut crashes50, mut crashes100, mut at50, mut at100) = (vec![], vec![], vec![], vec![]);
    for seed in 1..=seeds {
        let o = run_seed((&knobs, verify), &base, base_value, seed, learn);
        // A run that ended before its 50th experiment has no figure at 50 (as before).
        if !o.crashes50.is_nan() {
            crashes50.push(o.crashes50);
            at50.push(o.at50);
        }
        crashes100.push(o.crashes100);
        at100.push(o.at100);
    }
    println!(
        "{} feasibility {}: {seeds} seeds | crashes in first 50: mean {:.2} median {:.1} | \
         in 100: mean {:.2} | regret @50 med {:.4} mean {:.4} | @100 med {:.4} mean {:.4}",
        std::env::var("PROBLEM").unwrap_or_else(|_| "crashy".into()),
        if learn { "on" } else { "off (FEAS=0)" },
        mean(&crashes50),
        median(&crashes50),
        mean(&crashes100),
        median(&at50),
        mean(&at50),
        median(&at100),
        mean(&at100),
    );
}
