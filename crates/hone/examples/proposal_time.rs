//! How long one proposal of the knobs optimizer takes as the history grows: 20 float knobs,
//! a history of N observations (a smooth objective of random configurations, one in ten a
//! crash), and the median time of `suggest` over 21 calls at N = 100, 1,000 and 10,000.
//!
//! `cargo run --release -p hone --example proposal_time`, from the repository root.

use std::time::Instant;

use hone::propose::knobs::{config_at, config_of, discover, suggest, Observation};
use hone::util::{median, splitmix64, unit_f64};

fn main() {
    let text: String = (0..20)
        .map(|i| format!("K{i} = 0.5  # hone: 0.0..1.0\n"))
        .collect();
    let knobs = discover("train.py", &text).expect("knobs");
    let incumbent = config_of(&knobs);
    let mut state = 7u64;
    let mut history: Vec<Observation> = Vec::new();
    println!("| history | median proposal time (ms) |");
    println!("|---|---|");
    for n in [100usize, 1_000, 10_000] {
        while history.len() < n {
            let u: Vec<f64> = (0..20).map(|_| unit_f64(splitmix64(&mut state))).collect();
            let objective = (history.len() % 10 != 9).then(|| {
                u.iter()
                    .enumerate()
                    .map(|(i, x)| (x - 0.3 - 0.02 * i as f64).powi(2))
                    .sum()
            });
            history.push(Observation {
                config: config_at(&knobs, &incumbent, &u),
                objective,
            });
        }
        let mut times = Vec::new();
        for index in 0..21u64 {
            let t = Instant::now();
            let next = suggest(&knobs, &history, &incumbent, true, 1, n as u64 + index);
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            assert!(next.is_some());
        }
        println!("| {n} | {:.2} |", median(&times));
    }
}
