//! `hone bench`: the ablation benchmark of the outer loop (arms x problems x paired seeds, at
//! the same number of verifications), with the suite's defaults and `--quick`'s reduced set.

use std::path::{Path, PathBuf};

use clap::Args;

use hone::bench;

use super::Here;
use crate::error::{CliError, CliResult, Kinded};

#[derive(Args)]
pub struct BenchArgs {
    /// The reduced suite for CI: the quick problems, arms A and C, 3 repeats, budget 20.
    #[arg(long)]
    quick: bool,
    /// Problems to run, comma-separated (default: the whole suite).
    #[arg(long, value_delimiter = ',')]
    problems: Vec<String>,
    /// Arms, comma-separated: A, Ap (A′), B, C, D, or one mechanism's name.
    #[arg(long, value_delimiter = ',')]
    arms: Vec<String>,
    /// Seeds 1..=N, shared by every arm (default 10; 3 with --quick).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    repeats: Option<u64>,
    /// Budgets in verifications, comma-separated; a run gets the largest (default 20,50,100).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..))]
    budget: Vec<u64>,
    /// Output directory (default bench/out, or bench/out-quick); finished runs in its
    /// runs.json are not run again.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The suite's manifest (default: bench/problems/manifest.toml above the current
    /// directory).
    #[arg(long)]
    manifest: Option<PathBuf>,
    /// Run nothing: report what OUT/runs.json and the --with files hold.
    #[arg(long)]
    report_only: bool,
    /// A runs.json from elsewhere (Optuna's baselines) to report side by side; repeatable.
    #[arg(long)]
    with: Vec<PathBuf>,
}

pub fn run(here: &Here, a: BenchArgs) -> CliResult {
    let opts = options(&here.cwd, a)?;
    let out = opts.out.clone();
    let started = std::time::Instant::now();
    let rep = bench::run(&opts, &progress).runtime()?;
    out!("{}", rep.markdown());
    out!(
        "wrote {}/results.md, results.json and runs.json in {:.0}s",
        out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The suite to run: the manifest's problems, the arms, seeds and budgets asked for, or
/// the defaults (the reduced ones with --quick).
fn options(cwd: &Path, a: BenchArgs) -> CliResult<bench::BenchOptions> {
    let manifest = match a.manifest {
        Some(m) => m,
        None => cwd
            .ancestors()
            .map(|d| d.join("bench/problems/manifest.toml"))
            .find(|m| m.is_file())
            .ok_or_else(|| {
                CliError::usage("no bench/problems/manifest.toml in this directory or above it")
                    .hint("run from the hone repository or pass --manifest")
            })?,
    };
    let root = manifest
        .parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .unwrap_or(cwd)
        .to_path_buf();
    let all = bench::load_manifest(&manifest).config()?;
    let problems = bench::select(&all, &a.problems, a.quick).usage()?;
    let arms = match (a.arms.is_empty(), a.quick) {
        (false, _) => a.arms,
        (true, true) => vec!["A".into(), "C".into()],
        (true, false) => bench::arms().into_iter().map(String::from).collect(),
    };
    let budgets = match (a.budget.is_empty(), a.quick) {
        (false, _) => a.budget,
        (true, true) => vec![20],
        (true, false) => vec![20, 50, 100],
    };
    let out = a.out.unwrap_or_else(|| {
        root.join(if a.quick {
            "bench/out-quick"
        } else {
            "bench/out"
        })
    });
    Ok(bench::BenchOptions {
        problems,
        arms,
        repeats: a.repeats.unwrap_or(if a.quick { 3 } else { 10 }),
        budgets,
        out,
        report_only: a.report_only,
        with: a.with,
    })
}

/// One line on stderr when the plan is made and per finished run.
fn progress(p: &bench::Progress) {
    match p {
        bench::Progress::Planned { todo, done } => {
            err!("hone bench: {todo} run(s) to do ({done} already in runs.json)")
        }
        bench::Progress::Finished { run, index, todo } => err!(
            "[{index}/{todo}] {} {} seed {}: best {} after {} verifications ({:.1}s)",
            run.problem,
            bench::report::label(&run.arm),
            run.seed,
            run.trajectory.last().copied().unwrap_or(f64::NAN),
            run.trajectory.len(),
            run.wall_s
        ),
    }
}
