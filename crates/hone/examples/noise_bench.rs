//! Noise benchmark: the greedy keep rule of autoresearch against hone's noise-aware rule, on a
//! synthetic task whose true values are known.
//!
//! Each simulated run: a baseline with true value 10 (minimized), measurement noise N(0, σ=1),
//! then 200 candidates. A candidate's true value is the current best's true value plus an
//! effect drawn from N(-0.3, 1) × σ... negated so that most candidates are slightly worse and
//! some are real improvements about the size of the noise. The rules only ever see noisy
//! measurements.
//!
//! - greedy: measure once; keep if the measurement beats the best's (single) measurement.
//! - hone: `baseline_repeats = 3`, `confirm = 1`, `noise_k = 2`, `min_delta = 0`, with σ
//!   estimated from the repeats the rule itself made.
//!
//! Reported per rule, summed over all simulated runs: false keeps (kept, but truly no better
//! than the best it replaced), missed improvements (discarded, but truly better by more than
//! σ/2), verifications spent, and the mean true gain of the final best.
//!
//! Run: `cargo run --release -p hone --example noise_bench [RUNS]` (default 200 runs).

use hone::spec::Direction;
use hone::util::mean;
use hone::verify::noise::{run_sigma, NoisePolicy};

/// splitmix64 (the library's step), seeded with a plain state.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        hone::util::splitmix64(&mut self.0)
    }
    fn uniform(&mut self) -> f64 {
        hone::util::unit_f64(self.next_u64())
    }
    /// Box-Muller.
    fn normal(&mut self) -> f64 {
        let u1 = self.uniform().max(1e-300);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

const SIGMA: f64 = 1.0;
const CANDIDATES: usize = 200;
const EFFECT_MEAN: f64 = -0.3; // in "improvement" units: most candidates are slightly worse
const EFFECT_SD: f64 = 1.0;

#[derive(Default)]
struct Tally {
    false_keeps: u64,
    keeps: u64,
    missed: u64,
    real_improvements: u64,
    verifications: u64,
    final_gain: f64,
}

/// A keep rule: `None` is the greedy rule; `Some((repeats, confirm, noise_k))` is hone's.
type Rule = Option<(usize, u64, f64)>;

fn simulate(seed: u64, rule: Rule, t: &mut Tally) {
    let hone_rule = rule.is_some();
    let (repeats, confirm, noise_k) = rule.unwrap_or((1, 0, 0.0));
    let mut rng = Rng(seed);
    // Both rules see the same candidates (true effects) for a given seed; measurement noise
    // is drawn from a second stream so the rules differ only in what they measure.
    let mut effects = Rng(seed ^ 0xA5A5_5A5A);
    let measure = |rng: &mut Rng, truth: f64| truth + SIGMA * rng.normal();
    let policy = NoisePolicy {
        direction: Direction::Minimize,
        min_delta: 0.0,
        noise_k,
        confirm,
        prefer_simpler: false,
    };
    let base_truth = 10.0;
    let mut best_truth = base_truth;
    let mut groups: Vec<Vec<f64>> = Vec::new();
    let base_runs: Vec<f64> = (0..repeats)
        .map(|_| measure(&mut rng, base_truth))
        .collect();
    t.verifications += repeats as u64;
    let mut best_value = mean(&base_runs);
    groups.push(base_runs);
    for _ in 0..CANDIDATES {
        let improvement = EFFECT_MEAN + EFFECT_SD * effects.normal();
        let truth = best_truth - improvement * SIGMA;
        let really_better = truth < best_truth;
        if improvement > 0.5 {
            t.real_improvements += 1;
        }
        let first = measure(&mut rng, truth);
        t.verifications += 1;
        let keep = if hone_rule {
            // As the engine does: σ from every repeated group (the first is the baseline's,
            // the rest candidates'), by `run_sigma`.
            let pooled = |extra: Option<&[f64]>| {
                run_sigma(
                    groups.iter().take(1).map(Vec::as_slice),
                    groups.iter().skip(1).map(Vec::as_slice),
                    extra,
                )
            };
            let sigma = pooled(None);
            let mut runs = vec![first];
            if policy.passes_first(first, best_value, sigma, 0) {
                for _ in 0..policy.confirm {
                    runs.push(measure(&mut rng, truth));
                    t.verifications += 1;
                }
            }
            let sigma = if runs.len() > 1 {
                pooled(Some(runs.as_slice()))
            } else {
                sigma
            };
            let j = policy.judge(&runs, best_value, sigma, 0);
            if runs.len() > 1 {
                groups.push(runs);
            }
            j.keep.then_some(j.candidate_mean)
        } else {
            (first < best_value).then_some(first)
        };
        match keep {
            Some(v) => {
                t.keeps += 1;
                if !really_better {
                    t.false_keeps += 1;
                }
                best_value = v;
                best_truth = truth;
            }
            None => {
                if improvement > 0.5 {
                    t.missed += 1;
                }
            }
        }
    }
    t.final_gain += base_truth - best_truth;
}

fn main() {
    let runs: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let rules: [(&str, Rule); 4] = [
        ("greedy (autoresearch)", None),
        (
            "hone, baseline_repeats 3, confirm 1, noise_k 2 (default k)",
            Some((3, 1, 2.0)),
        ),
        (
            "hone, baseline_repeats 3, confirm 1, noise_k 1",
            Some((3, 1, 1.0)),
        ),
        (
            "hone, baseline_repeats 3, confirm 2, noise_k 1",
            Some((3, 2, 1.0)),
        ),
    ];
    let mut tallies: Vec<Tally> = rules.iter().map(|_| Tally::default()).collect();
    for seed in 0..runs {
        for ((_, rule), t) in rules.iter().zip(tallies.iter_mut()) {
            simulate(seed, *rule, t);
        }
    }
    let per = |x: u64| x as f64 / runs as f64;
    println!("{runs} simulated runs of {CANDIDATES} candidates; noise sd {SIGMA}; effects N({EFFECT_MEAN}, {EFFECT_SD}) x sd");
    println!("| rule | keeps/run | false keeps/run | false-keep rate (of keeps) | missed improvements (>0.5 sd) | verifications/run | true gain of final best |");
    println!("|---|---|---|---|---|---|---|");
    for ((name, _), t) in rules.iter().zip(tallies.iter()) {
        println!(
            "| {name} | {:.1} | {:.2} | {:.1}% | {:.1}% of {:.1} | {:.1} | {:.2} |",
            per(t.keeps),
            per(t.false_keeps),
            100.0 * t.false_keeps as f64 / t.keeps.max(1) as f64,
            100.0 * t.missed as f64 / t.real_improvements.max(1) as f64,
            per(t.real_improvements),
            per(t.verifications),
            t.final_gain / runs as f64
        );
    }
    let greedy = &tallies[0];
    for ((name, _), t) in rules.iter().zip(tallies.iter()).skip(1) {
        let rate = |t: &Tally| t.false_keeps as f64 / t.keeps.max(1) as f64;
        println!(
            "{name}: false-keep rate cut {:.1}x (false keeps per run {:.1}x) for {:.2}x the verifications",
            rate(greedy) / rate(t).max(1e-12),
            greedy.false_keeps as f64 / t.false_keeps.max(1) as f64,
            t.verifications as f64 / greedy.verifications as f64
        );
    }
}
