//! `hone status`: the best so far, counts by status, budgets used and left; with remote
//! workers, the workers the shared store has seen.

use clap::Args;

use hone::engine;
use hone::spec;

use super::{load_spec, Here, StoredSpec};
use crate::error::{CliResult, Kinded};
use crate::output;

#[derive(Args)]
pub struct StatusArgs {
    /// The run's tag (default: the latest run).
    #[arg(long)]
    run: Option<String>,
    /// Machine-readable summary.
    #[arg(long)]
    json: bool,
}

pub fn run(here: &Here, a: StatusArgs) -> CliResult {
    let (store, run) = here.open_run(a.run.as_deref())?;
    // Counted in the store, not from every record: fast on runs of 100,000 experiments.
    let mut summary = hone::report::summarize_stored(&store, &run).runtime()?;
    if summary.best_vs_baseline.is_none() {
        summary.best_vs_baseline = super::best_vs_baseline_of_commits(here, &store, &run);
    }
    let running = store
        .experiments_with_status(run.id, hone::store::Status::Running)
        .runtime()?;
    let live = here
        .git()
        .map(|g| engine::is_running(g.root()))
        .unwrap_or(false);
    let tokens = store.tokens_spent(run.id).runtime()?;
    output::status(
        &run,
        (&summary, tokens),
        &running,
        (&StoredSpec::of(&run), here.spec_path()),
        a.json,
        live,
    );
    // --json prints one object: the workers are `hone status` without it.
    if a.json {
        return Ok(());
    }
    let Ok(git) = here.git() else {
        return Ok(());
    };
    if let Ok(spec) = load_spec(git.root(), here.spec_path()) {
        if let (spec::Backend::Workers, Some(url)) = (spec.exec.backend, &spec.exec.store_url) {
            output::workers(url, false);
        }
    }
    Ok(())
}
