//! `hone worker`: verifies candidates for runs on other hosts, from the PostgreSQL store's
//! queue.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::Here;
use crate::error::{CliError, CliResult, Kinded};
use crate::output;

#[derive(Args)]
pub struct WorkerArgs {
    // The key jobs are signed with comes from $HONE_QUEUE_KEY only: never the command line,
    // which every process on the host can read.
    /// The PostgreSQL store, as in [store] url (postgres://user@host:port/database);
    /// default: $HONE_STORE_URL (which keeps a password off the command line).
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// The shared git remote the coordinator pushes candidates to (URL or path).
    #[arg(long, value_name = "REMOTE")]
    repo: String,
    /// The worker's directory (a clone, a worktree, logs); default: ./hone-worker-<slot>.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// This slot's name, shown by `hone status` (say, the GPU it owns).
    #[arg(long, default_value = "0")]
    slot: String,
    /// A variable for every verifier of this slot, NAME=VALUE (repeatable), e.g.
    /// CUDA_VISIBLE_DEVICES=3.
    #[arg(long = "env", value_name = "NAME=VALUE")]
    env: Vec<String>,
    /// How long a claim lasts without a heartbeat (a dead worker's job goes to another
    /// worker after it).
    #[arg(long, default_value = "30s", value_parser = super::parse_positive_duration)]
    lease: Duration,
    /// Exit after this many verifications.
    #[arg(long)]
    max_jobs: Option<u64>,
}

pub fn run(here: &Here, a: WorkerArgs) -> CliResult {
    let mut vars = Vec::new();
    for e in a.env {
        let Some((k, v)) = e.split_once('=') else {
            return Err(CliError::usage(format!("--env {e}: expected NAME=VALUE")));
        };
        vars.push((k.to_string(), v.to_string()));
    }
    let store = match a.store {
        Some(url) => url,
        None => std::env::var("HONE_STORE_URL")
            .ok()
            .filter(|v| !v.trim().is_empty())
            .ok_or_else(|| {
                CliError::usage("which store? give --store postgres://user@host:port/database, or set HONE_STORE_URL (a password there stays off the command line)")
            })?,
    };
    let key = hone::queue::QueueKey::from_env().config()?;
    let opts = hone::worker::WorkerOptions {
        store_url: store,
        key,
        remote: a.repo,
        dir: a
            .dir
            .unwrap_or_else(|| here.cwd.join(format!("hone-worker-{}", a.slot))),
        slot: a.slot,
        env: vars,
        lease: a.lease,
        max_jobs: a.max_jobs,
    };
    let interrupt = output::install_interrupt_handler();
    hone::worker::run(
        &opts,
        &|| interrupt.stop_requested(),
        &mut output::worker_event,
    )
    .map_err(|e| anyhow::anyhow!(e))
    .runtime()
}
