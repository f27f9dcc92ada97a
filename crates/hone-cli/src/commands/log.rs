//! `hone log`: one row per experiment, as a table, JSON lines or autoresearch's results.tsv.

use clap::Args;

use super::Here;
use crate::error::{CliResult, Kinded};
use crate::output;

#[derive(Args)]
pub struct LogArgs {
    /// The run's tag (default: the latest run).
    #[arg(long)]
    run: Option<String>,
    /// JSON lines, one object per experiment.
    #[arg(long, conflicts_with = "tsv")]
    json: bool,
    /// autoresearch's results.tsv layout: commit, metric, status, description.
    #[arg(long)]
    tsv: bool,
}

pub fn run(here: &Here, a: LogArgs) -> CliResult {
    let (store, run) = here.open_run(a.run.as_deref())?;
    let exps = store.experiments(run.id).runtime()?;
    output::log(&run, &exps, a.json, a.tsv);
    Ok(())
}
