//! `hone finalize`: a clean review branch from a run's kept experiments; with --pr, pushed and
//! opened as a pull request on GitHub.

use clap::Args;

use hone::finalize as fin;
use hone::workspace::Git;

use super::Here;
use crate::error::{CliResult, Kinded};

#[derive(Args)]
pub struct FinalizeArgs {
    /// The run's tag (default: the latest run).
    #[arg(long)]
    run: Option<String>,
    /// One commit with every kept change, instead of one commit per keep.
    #[arg(long)]
    squash: bool,
    /// Push the branch and open a pull request (needs GITHUB_TOKEN; GITHUB_API_URL for
    /// GitHub Enterprise).
    #[arg(long)]
    pr: bool,
    /// The branch to write (default: hone/<tag>-final).
    #[arg(long)]
    branch: Option<String>,
    /// The git remote to push to.
    #[arg(long, default_value = "origin")]
    remote: String,
    /// The branch the pull request merges into (default: the current branch).
    #[arg(long)]
    base: Option<String>,
}

pub fn run(here: &Here, a: FinalizeArgs) -> CliResult {
    if let Some(t) = &a.run {
        fin::check_tag(t).usage()?;
    }
    let git = here.git()?;
    let (run, exps) = fin::load_run(git.root(), a.run.as_deref()).runtime()?;
    // Everything a pull request needs is checked before anything is built or pushed.
    let plan = if a.pr {
        Some(
            fin::plan_pull_request(
                git,
                &a.remote,
                a.base.as_deref(),
                std::env::var("GITHUB_TOKEN").ok(),
                std::env::var("GITHUB_API_URL").ok(),
            )
            .runtime()?,
        )
    } else {
        None
    };
    let opts = fin::FinalizeOptions {
        tag: Some(run.tag.clone()),
        squash: a.squash,
        branch: a.branch,
    };
    let done = fin::build_branch(git, &run, &exps, &opts).runtime()?;
    print_branch(&done);
    let Some(plan) = plan else {
        out!(
            "review it with `git log -p {}`; `hone finalize --pr` pushes it and opens a pull request",
            done.branch
        );
        return Ok(());
    };
    open_pull_request(git, &plan, &done, &run, &exps)
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(10)]
}

fn print_branch(done: &fin::Finalized) {
    out!(
        "wrote branch {} ({} commit{} on {})",
        done.branch,
        done.commits.len(),
        if done.commits.len() == 1 { "" } else { "s" },
        short(&done.base_commit)
    );
    for c in &done.commits {
        out!(
            "  {} {}",
            short(&c.commit),
            c.message.lines().next().unwrap_or("")
        );
    }
}

fn open_pull_request(
    git: &Git,
    plan: &fin::PullRequestPlan,
    done: &fin::Finalized,
    run: &hone::store::RunRecord,
    exps: &[hone::store::ExperimentRecord],
) -> CliResult {
    fin::push(git, &plan.remote, &done.branch).runtime()?;
    out!("pushed {} to {}", done.branch, plan.remote);
    let pull = fin::open_pull_request(
        plan,
        &done.branch,
        &fin::pr_title(run, exps),
        &fin::pr_body(run, exps),
    )
    .runtime()?;
    out!("opened pull request #{}: {}", pull.number, pull.url);
    Ok(())
}
