//! How long `hone log` and `hone show` take to find where crashes narrowed the knobs' ranges
//! (`hone::propose::optimizer::narrowings`) on a long run: N experiments over four knobs (a
//! log-scale float, a float, an integer, a choice), about one in eight a crash (MOMENTUM above
//! 0.95, or by chance), one in fifty still running. Prints the time of one call (and of its
//! `knobs::feasible::narrowing_history` part, without reading the configurations), and the same
//! with the first implementation (`knobs::feasible::narrowings` on every prefix of the history,
//! O(n^2 x knobs)), run only up to `OLD_MAX` experiments (default 10,000) and checked equal.
//!
//! `CORNER=1`: a configuration crashes when MOMENTUM > 0.95 or LR > 0.1 instead, so the
//! crashes where both are too high lie beyond both knobs' finished values for good (about one
//! in eighty of the configurations: the history counts them again after every crash).
//!
//! `cargo run --release -p hone --example narrowing_time`, from the repository root.

use std::time::Instant;

use hone::propose::knobs::feasible::{narrowing_history, narrowings, Narrowing};
use hone::propose::knobs::Config;
use hone::store::{ExperimentRecord, Status};
use hone::util::{splitmix64, unit_f64};

fn history(n: usize) -> Vec<ExperimentRecord> {
    let corner = std::env::var("CORNER").is_ok();
    let mut state = 17u64;
    let mut draw = || unit_f64(splitmix64(&mut state));
    (0..n)
        .map(|k| {
            let lr = 10f64.powf(-4.0 + 4.0 * draw());
            let momentum = (draw() * 1000.0).round() / 1000.0;
            let batch = 16 + (draw() * 240.0) as i64;
            let act = ["relu", "gelu", "tanh"][(draw() * 3.0) as usize % 3];
            let status = if k % 50 == 49 {
                Status::Running
            } else if momentum > 0.95 || (corner && lr > 0.1) || (!corner && draw() < 0.08) {
                Status::Crash
            } else {
                Status::Discard
            };
            ExperimentRecord {
                n: k as u64,
                status: Some(status),
                objective: (status == Status::Discard).then_some(momentum),
                config: Some(serde_json::json!({
                    "LR": lr, "MOMENTUM": momentum, "BATCH": batch, "ACT": act,
                })),
                ..Default::default()
            }
        })
        .collect()
}

/// The first implementation: every narrowing of every prefix.
fn by_prefixes(h: &[ExperimentRecord]) -> Vec<(u64, Narrowing)> {
    let (mut finished, mut infeasible) = (Vec::new(), Vec::new());
    let configs: Vec<Option<Config>> = h
        .iter()
        .map(|e| serde_json::from_value(e.config.clone()?).ok())
        .collect();
    let mut current: Vec<Narrowing> = Vec::new();
    let mut out = Vec::new();
    for (e, c) in h.iter().zip(&configs) {
        let Some(c) = c else { continue };
        match e.status() {
            Status::Crash => infeasible.push(c),
            Status::Discard => finished.push(c),
            _ => continue,
        }
        let now = narrowings(&finished, &infeasible);
        out.extend(
            now.iter()
                .filter(|x| !current.contains(x))
                .map(|x| (e.n, x.clone())),
        );
        current = now;
    }
    out
}

fn main() {
    let old_max: usize = std::env::var("OLD_MAX")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    println!(
        "| experiments | narrowings reported | now (ms) | of which narrowing_history (ms) | \
         first implementation (ms) |"
    );
    println!("|---|---|---|---|---|");
    for n in [1_000usize, 10_000, 100_000] {
        let h = history(n);
        let t = Instant::now();
        let got = hone::propose::optimizer::narrowings(&h);
        let now_ms = t.elapsed().as_secs_f64() * 1e3;
        let states: Vec<(Config, Option<bool>)> = h
            .iter()
            .filter_map(|e| {
                let c: Config = serde::Deserialize::deserialize(e.config.as_ref()?).ok()?;
                let state = match e.status() {
                    Status::Crash => Some(true),
                    Status::Discard => Some(false),
                    _ => None,
                };
                Some((c, state))
            })
            .collect();
        let t = Instant::now();
        let events = narrowing_history(&states);
        let history_ms = t.elapsed().as_secs_f64() * 1e3;
        assert_eq!(events.len(), got.len());
        let old = if n <= old_max {
            let t = Instant::now();
            let want = by_prefixes(&h);
            let ms = t.elapsed().as_secs_f64() * 1e3;
            assert_eq!(got, want, "the two differ at {n}");
            format!("{ms:.1}")
        } else {
            "not run".to_string()
        };
        println!(
            "| {n} | {} | {now_ms:.1} | {history_ms:.1} | {old} |",
            got.len()
        );
    }
}
