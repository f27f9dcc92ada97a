//! Writes a large run into a repository's store through the store API, for the dashboard's and
//! the views' benchmarks (`bench/serve.sh`, `bench/views.sh`): `bench-store DIR [N [PARENT
//! CANDIDATE]]` adds run `bench` with N experiments (default 10,000) to DIR/.hone/hone.db,
//! with the mix of statuses, descriptions, metrics, configurations and judgements a long knobs
//! run leaves, the four events each experiment logs and a mechanism's hook call every tenth.
//! With PARENT and CANDIDATE (two commits of DIR), every experiment is made on PARENT and its
//! candidate is CANDIDATE, so that what reads git (`hone show`, the experiment page) finds
//! real commits; without them the commits are made-up names.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use hone::engine::StatePaths;
use hone::store::{Effect, ExperimentRecord, Hook, MechanismCall, Status, Store, StoreError};
use hone::verify::noise::Judgement;

/// A small deterministic generator (xorshift), so every benchmark sees the same store.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The events an experiment of a knobs run logs, and every tenth a mechanism's hook call.
fn write_events(s: &Store, run_id: i64, e: &ExperimentRecord) -> Result<(), StoreError> {
    let n = Some(e.n);
    s.append_event(
        run_id,
        n,
        "experiment_started",
        &serde_json::json!({ "experiment_started": { "n": e.n } }),
    )?;
    s.append_event(
        run_id,
        n,
        "proposed",
        &serde_json::json!({ "proposed": { "n": e.n, "description": e.description } }),
    )?;
    s.append_event(
        run_id,
        n,
        "verifying",
        &serde_json::json!({ "verifying": { "n": e.n, "log": format!(".hone/runs/bench/logs/{}.log", e.n) } }),
    )?;
    s.append_event(
        run_id,
        n,
        "experiment_finished",
        &serde_json::json!({ "experiment_finished": { "record": e } }),
    )?;
    if e.n % 10 == 0 {
        s.put_mechanism_calls(
            run_id,
            &[MechanismCall {
                experiment: e.n,
                mechanism: "plateau".into(),
                hook: Hook::OnResult,
                effect: Effect::None,
                detail: "no gain in the last 10 experiments".into(),
            }],
        )?;
    }
    Ok(())
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let Some(dir) = args.next().map(PathBuf::from) else {
        bail!("usage: bench-store DIR [N]  (DIR: a git repository)");
    };
    let n: u64 = match args.next() {
        Some(v) => v.parse().context("N must be a whole number")?,
        None => 10_000,
    };
    let parent = args.next().unwrap_or_else(|| "0".repeat(40));
    let candidate = args.next();
    let store = Store::open(&StatePaths::new(&dir).db()).context("cannot open the store")?;
    let run = store.create_plain_run("bench", &parent, "val_bpb")?;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut best = 2.5_f64;
    let start = hone::store::now() - n as f64 * 30.0;
    store.in_transaction(|s| {
        for i in 0..n {
            let lr = 10f64.powf(-4.0 + 3.0 * rng.next());
            let depth = 2 + (rng.next() * 14.0) as u64;
            let r = rng.next();
            let (status, objective) = if i == 0 {
                (Status::Baseline, Some(best))
            } else if r < 0.06 {
                best -= 0.002 * rng.next();
                (Status::Keep, Some(best))
            } else if r < 0.08 {
                (Status::Crash, None)
            } else if r < 0.09 {
                (Status::Timeout, None)
            } else if r < 0.10 {
                (Status::Invalid, None)
            } else {
                (Status::Discard, Some(best + 0.3 * rng.next()))
            };
            let mut e = ExperimentRecord {
                n: i,
                parent_commit: parent.clone(),
                candidate_commit: Some(
                    candidate
                        .clone()
                        .unwrap_or_else(|| format!("{:040x}", i + 1)),
                ),
                status: Some(status),
                objective,
                config: Some(serde_json::json!({ "LEARNING_RATE": lr, "DEPTH": depth })),
                description: format!("LEARNING_RATE 0.04 -> {lr:.5}, DEPTH 8 -> {depth}"),
                reason: if objective.is_none() {
                    "the verifier exited 1 and printed no val_bpb".into()
                } else {
                    String::new()
                },
                files_changed: 1,
                lines_added: 2,
                lines_deleted: 2,
                propose_ms: 5,
                verify_ms: 25_000 + (rng.next() * 5000.0) as u64,
                total_ms: 30_000,
                started_at: start + i as f64 * 30.0,
                finished_at: Some(start + i as f64 * 30.0 + 29.0),
                runs: objective.into_iter().collect(),
                ..Default::default()
            };
            if let Some(v) = objective {
                e.metrics.insert("val_bpb".into(), v);
                e.metrics
                    .insert("peak_vram_mb".into(), 20_000.0 + 1000.0 * rng.next());
                e.judgement = Some(Box::new(Judgement {
                    keep: status == Status::Keep,
                    simplification: false,
                    delta: best - v,
                    threshold: 0.0005,
                    sigma: Some(0.0002),
                    runs: vec![v],
                    candidate_mean: v,
                    best,
                    reason: "measured against the best with the noise threshold".into(),
                }));
            }
            s.put_experiment(run.id, &e)?;
            write_events(s, run.id, &e)?;
        }
        Ok(())
    })?;
    // The narrowing log the engine keeps as a run goes (`hone show` reads it).
    hone::engine::rebuild_narrowing_log(&store, run.id)?;
    store.set_run_state(
        run.id,
        hone::store::RunState::Stopped,
        Some("reached max_experiments"),
    )?;
    println!(
        "wrote run `bench` with {n} experiments to {}",
        StatePaths::new(&dir).db().display()
    );
    Ok(())
}
