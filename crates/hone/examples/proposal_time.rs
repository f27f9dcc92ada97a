//! How long one proposal of the knobs optimizer takes as the history grows: 20 float knobs,
//! a history of N observations (a smooth objective of random configurations, one in ten a
//! crash), and the median time of a suggestion over 21 calls at N = 100, 1,000 and 10,000.
//!
//! `FEAS=1` passes the crashes as infeasible configurations, as the engine does (the
//! feasibility model is then fitted too). `CACHED=1` asks through one `SamplerCache` kept
//! across the calls, as the knobs proposer does (a fresh cache first indexes the whole history,
//! as after a resume; that first call is not among the 21 timed).
//!
//! `cargo run --release -p hone --example proposal_time`, from the repository root.

use std::time::Instant;

use hone::propose::knobs::{
    config_at, config_of, discover, suggest_cached, Config, Observation, SamplerCache, SamplerGuide,
};
use hone::util::{median, splitmix64, unit_f64};

fn main() {
    let feas = std::env::var("FEAS").is_ok_and(|v| v == "1");
    let cached = std::env::var("CACHED").is_ok_and(|v| v == "1");
    let mut cache = SamplerCache::new();
    let text: String = (0..20)
        .map(|i| format!("K{i} = 0.5  # hone: 0.0..1.0\n"))
        .collect();
    let knobs = discover("train.py", &text).expect("knobs");
    let incumbent = config_of(&knobs);
    let mut state = 7u64;
    let mut history: Vec<Observation> = Vec::new();
    let mut crashed: Vec<Config> = Vec::new();
    println!(
        "| history | median proposal time (ms){}{} |",
        if feas { ", crashes infeasible" } else { "" },
        if cached {
            ", one cache across calls"
        } else {
            ""
        }
    );
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
            let config = config_at(&knobs, &incumbent, &u);
            if objective.is_none() && feas {
                crashed.push(config.clone());
            }
            history.push(Observation { config, objective });
        }
        let guide = SamplerGuide {
            infeasible: &crashed,
            ..SamplerGuide::default()
        };
        let mut ask = |index: u64| {
            if !cached {
                cache = SamplerCache::new();
            }
            suggest_cached(
                &mut cache, &knobs, &history, &incumbent, true, 1, index, &guide,
            )
        };
        if cached {
            ask(0);
        }
        let mut times = Vec::new();
        for index in 0..21u64 {
            let t = Instant::now();
            let next = ask(n as u64 + index);
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            assert!(next.is_some());
        }
        println!("| {n} | {:.2} |", median(&times));
    }
}
