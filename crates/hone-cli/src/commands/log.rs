//! `hone log`: one row per experiment, as a table, JSON lines or autoresearch's results.tsv,
//! streamed from the store.

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

/// Prints the rows as the store reads them, one at a time: the first comes at once and memory
/// does not grow with the run. Only the table needs to know beforehand which columns it has
/// (two partial indexes).
pub fn run(here: &Here, a: LogArgs) -> CliResult {
    let (store, run) = here.open_run(a.run.as_deref())?;
    let (holdout, paid) = if a.json || a.tsv {
        (false, false)
    } else {
        store.run_columns(run.id).runtime()?
    };
    let format = output::LogFormat::new(a.json, a.tsv, holdout, paid);
    // The table says where crashes narrowed a knob's explored range: that needs the whole
    // history, read only for a run that has failures of the kinds that narrow.
    let narrowed = if a.json || a.tsv || !super::has_infeasible(&store, run.id)? {
        Vec::new()
    } else {
        hone::propose::optimizer::narrowings(&store.experiments(run.id).runtime()?)
    };
    // Buffered: a line per write would be a system call per experiment.
    let stdout = std::io::stdout();
    let mut w = std::io::BufWriter::new(stdout.lock());
    output::log_header(&mut w, &run, &format);
    store
        .for_each_experiment(run.id, &mut |e| {
            output::log_row(&mut w, &e, &format);
            output::log_narrowings(&mut w, e.n, &narrowed);
            Ok(())
        })
        .runtime()?;
    let _ = std::io::Write::flush(&mut w);
    Ok(())
}
