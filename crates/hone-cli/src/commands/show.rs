//! `hone show N`: one experiment: description, decision, metrics, diff from its parent, log
//! tail, its curve (`[verify] progress`), and what each mechanism did for it.

use clap::Args;

use super::Here;
use crate::error::{CliError, CliResult, Kinded};
use crate::output;

#[derive(Args)]
pub struct ShowArgs {
    /// The experiment's number (0 is the baseline).
    n: u64,
    /// The run's tag (default: the latest run).
    #[arg(long)]
    run: Option<String>,
    /// Lines of the verifier's log to print.
    #[arg(long, default_value_t = 30)]
    tail: usize,
}

pub fn run(here: &Here, a: ShowArgs) -> CliResult {
    let n = a.n;
    let (store, run) = here.open_run(a.run.as_deref())?;
    let e = store.experiment(run.id, n).runtime()?.ok_or_else(|| {
        CliError::runtime(format!("run `{}` has no experiment {n}", run.tag)).hint("see `hone log`")
    })?;
    let git = here.git()?;
    let calls = store.mechanism_calls(run.id, Some(n)).runtime()?;
    let curve = store.curve(run.id, n).runtime()?;
    output::show(git, &run, &e, a.tail);
    if e.status() == hone::store::Status::Aborted {
        // A candidate a crash cut off is verified again on resume: by which experiment (the
        // next one on the same parent, a few later in a parallel run).
        let words = hone::engine::verified_again_words(n);
        for m in n + 1..=n.saturating_add(64) {
            let Some(later) = store.experiment(run.id, m).runtime()? else {
                break;
            };
            // Its words, and the same files (a description is the proposer's to write).
            if later.description.ends_with(&words) && later.tree.is_some() && later.tree == e.tree {
                output::show_verified_again(&later);
                break;
            }
        }
    }
    output::show_curve(&curve);
    if super::has_infeasible(&store, run.id)? {
        if let Some(log) = store.narrowing_log(run.id, n).runtime()? {
            // The run's narrowing log: its changes up to `n`, a few rows.
            let (now, events) = hone::propose::optimizer::narrowings_from_log(&log);
            output::show_narrowings(now, &events);
        } else {
            // No log covers `n` (a run no hone of this version has opened, or an experiment
            // up to `n` still running): only what the narrowings read (numbers, statuses and
            // configurations up to `n`), one experiment at a time: the narrowings as they
            // appeared, then those in force.
            let mut history = hone::propose::optimizer::RunNarrowings::default();
            let mut events = Vec::new();
            store
                .each_configuration(run.id, Some(n), &mut |e| {
                    events.extend(history.next(&e).into_iter().map(|x| (e.n, x)));
                })
                .runtime()?;
            output::show_narrowings(history.current(), &events);
        }
    }
    output::show_mechanisms(&calls);
    Ok(())
}
