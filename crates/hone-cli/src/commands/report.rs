//! `hone report`: writes a run's progress plot (SVG), markdown summary and self-contained HTML
//! page.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;

use hone::engine::StatePaths;

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
    /// List every experiment in the table (by default a run of more than 1,000 lists the
    /// newest 1,000; the plot and the summary always cover the whole run).
    #[arg(long)]
    all: bool,
}

pub fn run(here: &Here, a: ReportArgs) -> CliResult {
    let (store, run) = here.open_run(a.run.as_deref())?;
    // Read by bounded queries: the plot's experiments as the store picks them, the newest
    // experiments for the table (every one with --all).
    let agent_best = super::best_vs_baseline_of_commits(here, &store, &run);
    let report = hone::report::stored::report_with(
        &store,
        &run,
        (
            StoredSpec::of(&run).probation,
            (!a.all).then_some(hone::report::stored::LISTED),
        ),
        agent_best,
    )
    .runtime()?;
    let git = here.git()?;
    let paths = StatePaths::new(git.root());
    // The notes an agent kept between experiments: what it learned, in its own words.
    let notes = read_at_most(&paths.run_dir(&run.tag).join("notes.md"), 64 << 10);
    let report = match notes {
        Some(n) => report.with_agent_notes(&n),
        None => report,
    };
    let out = a
        .out
        .unwrap_or_else(|| paths.dir.join("reports").join(&run.tag));
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
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

/// The text of the plain file at `path`, up to `max` bytes (`None` when there is none).
fn read_at_most(path: &std::path::Path, max: u64) -> Option<String> {
    use std::io::Read as _;
    let file = std::fs::File::open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = Vec::new();
    file.take(max).read_to_end(&mut text).ok()?;
    Some(String::from_utf8_lossy(&text).into_owned())
}
