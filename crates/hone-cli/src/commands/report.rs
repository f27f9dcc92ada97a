//! `hone report`: writes a run's progress plot (SVG), markdown summary and self-contained HTML
//! page.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;

use hone::engine::StatePaths;
use hone::store::{RunTotals, Status};

use super::{Here, StoredSpec};
use crate::error::{CliResult, Kinded};

#[derive(Args)]
pub struct ReportArgs {
    /// The run's tag (default: the latest run).
    #[arg(long)]
    run: Option<String>,
    /// Where to write (default: .hone/reports/<tag>).
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(here: &Here, a: ReportArgs) -> CliResult {
    let (store, run) = here.open_run(a.run.as_deref())?;
    // What the report shows of each experiment (no metrics, configurations or judgements
    // parsed), and the baseline and the best whole for the summary.
    let exps = store.experiment_outlines(run.id).runtime()?;
    let summary = hone::report::summarize_parts(
        &run,
        store
            .first_with_status(run.id, Status::Baseline)
            .runtime()?
            .as_ref(),
        store.best_of_run(run.id).runtime()?.as_ref(),
        &RunTotals::of(&exps),
    );
    let git = here.git()?;
    let out = a.out.unwrap_or_else(|| {
        StatePaths::new(git.root())
            .dir
            .join("reports")
            .join(&run.tag)
    });
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    // The outer loop's activity, when mechanisms ran.
    let calls = store.mechanism_calls(run.id, None).runtime()?;
    let mechs = hone::meta::stats::compute(&calls, &exps, StoredSpec::of(&run).probation);
    // The curves drawn, each thinned in the store: a bounded read however long the run.
    let curves = store
        .thinned_curves(
            run.id,
            &hone::report::curves::to_draw(&exps),
            hone::report::curves::MAX_POINTS,
        )
        .runtime()?;
    let report = hone::report::document::render_summarized(&run, &exps, &summary, &mechs)
        .with_curves(&curves, &exps, "progress");
    let mut files = vec![
        ("report.html", &report.html),
        ("report.md", &report.markdown),
        ("progress.svg", &report.svg),
    ];
    if let Some(svg) = &report.curves {
        files.push(("curves.svg", svg));
    }
    for (name, content) in files {
        let path = out.join(name);
        std::fs::write(&path, content)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    out!(
        "wrote {}/report.html, report.md and progress.svg{}",
        out.display(),
        if report.curves.is_some() {
            " (and curves.svg)"
        } else {
            ""
        }
    );
    Ok(())
}
