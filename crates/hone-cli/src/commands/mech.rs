//! `hone mech`: the outer loop's mechanisms, what each did over a run.

use clap::{Args, Subcommand};

use super::{Here, StoredSpec};
use crate::error::{CliResult, Kinded};
use crate::output;

#[derive(Args)]
pub struct MechArgs {
    #[command(subcommand)]
    command: MechCmd,
}

#[derive(Subcommand)]
enum MechCmd {
    /// Per mechanism: calls per hook, guidance given, proposals rejected or modified, keeps
    /// after its guidance; a mechanism that never changed anything over its probation is inert.
    Stats {
        /// The run's tag (default: the latest run).
        #[arg(long)]
        run: Option<String>,
        /// Machine-readable, one object per mechanism.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(here: &Here, a: MechArgs) -> CliResult {
    let MechCmd::Stats { run, json } = a.command;
    let (store, run) = here.open_run(run.as_deref())?;
    let exps = store.experiments(run.id).runtime()?;
    let calls = store.mechanism_calls(run.id, None).runtime()?;
    let probation = StoredSpec::of(&run).probation;
    let stats = hone::meta::stats::compute(&calls, &exps, probation);
    output::mech_stats(&run, &stats, probation, json);
    Ok(())
}
