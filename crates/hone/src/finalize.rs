//! `hone finalize`: a clean review branch from a run's kept experiments, and optionally a pull
//! request on GitHub.
//!
//! The branch is built with git plumbing only (`commit-tree`, `update-ref`): the user's current
//! branch, index and working tree are never read or written. Each kept experiment becomes one
//! commit whose tree is exactly the keep's tree, parented on the previous one and starting at the
//! run's base commit; `squash` makes one commit with the last keep's tree instead.
//!
//! With a pull request, everything that can fail before anything is pushed is checked first
//! (token, remote, GitHub URL); the branch is pushed with plain `git push <remote> <branch>`, so
//! the user's remote URLs, push URLs, `insteadOf` rewrites and credential helpers all apply; then
//! one `POST /repos/{owner}/{repo}/pulls` opens the request.

use std::path::Path;
use std::time::Duration;

use crate::engine::validate_tag;
use crate::report::{fmt_metric, fmt_progress};
use crate::store::{ExperimentRecord, RunRecord, Status, Store};
use crate::workspace::{Git, GitError};

/// The default GitHub REST API (override with `GITHUB_API_URL` for GitHub Enterprise).
pub const GITHUB_API: &str = "https://api.github.com";

/// What `hone finalize` was asked to build.
#[derive(Clone, Debug, Default)]
pub struct FinalizeOptions {
    /// The run (default: the latest).
    pub tag: Option<String>,
    /// One commit instead of one per keep.
    pub squash: bool,
    /// The branch to write (default `hone/<tag>-final`).
    pub branch: Option<String>,
}

/// A finalize failure, saying what to do next.
#[derive(Debug, thiserror::Error)]
pub enum FinalizeError {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("{0}")]
    Usage(String),
    #[error("run `{0}` has no kept experiments, so there is nothing to finalize; `hone log --run {0}` shows what it tried")]
    NoKeeps(String),
    #[error("{0}")]
    PullRequest(String),
}

/// One commit of the review branch.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FinalCommit {
    /// The experiments it carries (one, or every keep when squashed).
    pub experiments: Vec<u64>,
    pub commit: String,
    pub message: String,
}

/// The branch `finalize` wrote.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Finalized {
    pub tag: String,
    /// Short branch name, e.g. `hone/20260101-final`.
    pub branch: String,
    pub base_commit: String,
    pub head: String,
    pub commits: Vec<FinalCommit>,
}

/// Loads a run and its experiments from a repository's store.
pub fn load_run(
    repo_root: &Path,
    tag: Option<&str>,
) -> Result<(RunRecord, Vec<ExperimentRecord>), FinalizeError> {
    let location = crate::engine::configured_store(repo_root, None)
        .map_err(|e| FinalizeError::Usage(e.to_string()))?;
    let store = Store::open_existing_at(&location)?.ok_or_else(|| {
        FinalizeError::Usage(format!(
            "no hone runs in {} yet; start one with `hone run`",
            repo_root.display()
        ))
    })?;
    let run = match tag {
        Some(t) => store.run_by_tag(t)?.ok_or_else(|| {
            FinalizeError::Usage(format!(
                "no run tagged `{t}`; `hone status` shows the latest"
            ))
        })?,
        None => store.latest_run()?.ok_or_else(|| {
            FinalizeError::Usage("no hone runs yet; start one with `hone run`".into())
        })?,
    };
    let exps = store.experiments(run.id)?;
    Ok((run, exps))
}

/// The default review branch of a run.
pub fn default_branch(tag: &str) -> String {
    format!("hone/{tag}-final")
}

/// Builds the review branch. Refuses to overwrite an existing branch.
pub fn build_branch(
    git: &Git,
    run: &RunRecord,
    exps: &[ExperimentRecord],
    opts: &FinalizeOptions,
) -> Result<Finalized, FinalizeError> {
    let branch = opts
        .branch
        .clone()
        .unwrap_or_else(|| default_branch(&run.tag));
    check_branch_name(git, &branch)?;
    let full = format!("refs/heads/{branch}");
    if let Some(at) = git.ref_target(&full)? {
        return Err(FinalizeError::Usage(format!(
            "branch {branch} already exists (at {}); pass --branch NAME, or delete it with `git branch -D {branch}`",
            &at[..at.len().min(10)]
        )));
    }
    let mut keeps: Vec<&ExperimentRecord> = exps
        .iter()
        .filter(|e| e.status() == Status::Keep && e.candidate_commit.is_some())
        .collect();
    // In the order they were kept, as the run branch has them (the last is the best).
    keeps.sort_by(|a, b| crate::store::decision_order(a, b));
    if keeps.is_empty() {
        return Err(FinalizeError::NoKeeps(run.tag.clone()));
    }
    let baseline = exps
        .iter()
        .find(|e| e.status() == Status::Baseline)
        .and_then(|e| e.objective);
    let minimize = run.direction == crate::verify::Direction::Minimize;
    let mut parent = run.base_commit.clone();
    let mut before = baseline;
    let mut commits = Vec::new();
    let mut lines = Vec::new();
    for k in &keeps {
        let line = change_line(&run.metric, before, k.objective, minimize);
        let title = title_of(k);
        // "experiment N", not "#N", which GitHub would link to its issue N.
        lines.push(format!("- experiment {} {title}: {line}", k.n));
        if !opts.squash {
            let message = format!(
                "{title}\n\n{line}\n\nHone-Run: {}\nHone-Experiment: {}\n",
                run.tag, k.n
            );
            let tree = tree_of(git, k)?;
            let commit = git.commit_with_message(&tree, &parent, &message)?;
            commits.push(FinalCommit {
                experiments: vec![k.n],
                commit: commit.clone(),
                message,
            });
            parent = commit;
        }
        before = k.objective.or(before);
    }
    if opts.squash {
        let squashed = squash_commit(git, run, &keeps, baseline, &lines)?;
        parent = squashed.commit.clone();
        commits.push(squashed);
    }
    // Created only if absent: a branch made meanwhile by someone else is not overwritten.
    git.run(&["update-ref", "--no-deref", &full, &parent, &"0".repeat(40)])?;
    Ok(Finalized {
        tag: run.tag.clone(),
        branch,
        base_commit: run.base_commit.clone(),
        head: parent,
        commits,
    })
}

/// The one commit of `--squash`: the last keep's tree on the run's base, its message listing
/// every kept change (`lines`). `keeps` is not empty.
fn squash_commit(
    git: &Git,
    run: &RunRecord,
    keeps: &[&ExperimentRecord],
    baseline: Option<f64>,
    lines: &[String],
) -> Result<FinalCommit, FinalizeError> {
    let minimize = run.direction == crate::verify::Direction::Minimize;
    // `keeps` is not empty (checked by the caller).
    let last = keeps[keeps.len() - 1];
    let line = change_line(&run.metric, baseline, last.objective, minimize);
    let message = format!(
        "hone run {}: {line}\n\n{} kept change(s):\n{}\n\nHone-Run: {}\n",
        run.tag,
        keeps.len(),
        lines.join("\n"),
        run.tag
    );
    let tree = tree_of(git, last)?;
    let commit = git.commit_with_message(&tree, &run.base_commit, &message)?;
    Ok(FinalCommit {
        experiments: keeps.iter().map(|k| k.n).collect(),
        commit,
        message,
    })
}

fn check_branch_name(git: &Git, branch: &str) -> Result<(), FinalizeError> {
    let ok = !branch.is_empty()
        && git
            .run(&["check-ref-format", "--branch", branch])
            .is_ok_and(|s| s.trim() == branch);
    if ok {
        Ok(())
    } else {
        Err(FinalizeError::Usage(format!(
            "`{branch}` is not a valid branch name; pass another --branch"
        )))
    }
}

fn title_of(e: &ExperimentRecord) -> String {
    let d = e.description.lines().next().unwrap_or("").trim();
    if d.is_empty() {
        format!("hone experiment {}", e.n)
    } else {
        // A commit message that says `Closes #7` closes that issue once merged.
        crate::util::github_inert(d)
    }
}

fn tree_of(git: &Git, e: &ExperimentRecord) -> Result<String, FinalizeError> {
    match (&e.tree, &e.candidate_commit) {
        (Some(t), _) => Ok(t.clone()),
        (None, Some(c)) => Ok(git.tree_of(c)?),
        (None, None) => Err(FinalizeError::Usage(format!(
            "experiment {} has no commit recorded",
            e.n
        ))),
    }
}

/// `metric: before → after (delta)`, the delta signed as the values moved.
fn change_line(metric: &str, before: Option<f64>, after: Option<f64>, minimize: bool) -> String {
    let delta = match (before, after) {
        (Some(b), Some(a)) => {
            let d = a - b;
            let better = if minimize { d < 0.0 } else { d > 0.0 };
            // The change as the values moved (the other views' `delta` is an improvement,
            // positive when better): named so, not `delta`.
            format!(
                " ({}{})",
                crate::util::fmt_signed(d),
                if better { ", better" } else { "" }
            )
        }
        _ => String::new(),
    };
    format!(
        "{metric}: {} → {}{delta}",
        fmt_metric(before),
        fmt_metric(after)
    )
}

/// A GitHub repository named by a remote URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GitHubRepo {
    pub host: String,
    pub owner: String,
    pub repo: String,
}

/// Reads `owner/repo` from a remote URL: `https://[user@]host/owner/repo[.git]`,
/// `ssh://[user@]host[:port]/owner/repo[.git]` or scp-like `user@host:owner/repo[.git]`.
pub fn parse_remote_url(url: &str) -> Option<GitHubRepo> {
    let url = url.trim();
    let (host, path) = if let Some(rest) = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .or_else(|| url.strip_prefix("ssh://"))
        .or_else(|| url.strip_prefix("git://"))
    {
        let (authority, path) = rest.split_once('/')?;
        let host = authority.rsplit('@').next()?;
        let host = host.split(':').next()?;
        (host.to_string(), path.to_string())
    } else {
        // scp-like: [user@]host:path (no scheme, and not a local path).
        let (before, path) = url.split_once(':')?;
        if before.contains('/') || path.starts_with('/') || path.starts_with("//") {
            return None;
        }
        let host = before.rsplit('@').next()?;
        (host.to_string(), path.to_string())
    };
    let path = path.trim_end_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    let mut parts = path.split('/');
    let (owner, repo) = (parts.next()?, parts.next()?);
    if parts.next().is_some() || owner.is_empty() || repo.is_empty() || host.is_empty() {
        return None;
    }
    Some(GitHubRepo {
        host: host.to_ascii_lowercase(),
        owner: owner.to_string(),
        repo: repo.to_string(),
    })
}

/// Where and how to open a pull request (checked before anything is pushed).
#[derive(Clone, Debug)]
pub struct PullRequestPlan {
    pub remote: String,
    pub github: GitHubRepo,
    pub api_base: String,
    pub token: String,
    /// The branch the pull request merges into.
    pub base: String,
}

/// Checks everything `--pr` needs. `token` is `$GITHUB_TOKEN`, `api_url` is `$GITHUB_API_URL`.
pub fn plan_pull_request(
    git: &Git,
    remote: &str,
    base: Option<&str>,
    token: Option<String>,
    api_url: Option<String>,
) -> Result<PullRequestPlan, FinalizeError> {
    let token = token.filter(|t| !t.trim().is_empty()).ok_or_else(|| {
        FinalizeError::PullRequest(
            "GITHUB_TOKEN is not set: create a token that may open pull requests (contents and pull requests: write) and export GITHUB_TOKEN; nothing was pushed"
                .into(),
        )
    })?;
    let url = git
        .run(&["config", "--get", &format!("remote.{remote}.url")])
        .map(|u| u.trim().to_string())
        .map_err(|_| {
            FinalizeError::PullRequest(format!(
                "no git remote named `{remote}`: add one with `git remote add {remote} https://github.com/OWNER/REPO.git`, or pass --remote NAME; nothing was pushed"
            ))
        })?;
    let enterprise = api_url.as_deref().is_some_and(|u| !u.trim().is_empty());
    let github = parse_remote_url(&url)
        .filter(|g| enterprise || g.host == "github.com")
        .ok_or_else(|| {
            FinalizeError::PullRequest(format!(
                "remote `{remote}` ({url}) is not a GitHub repository, so --pr cannot open a pull request there; \
                 set GITHUB_API_URL for GitHub Enterprise, or run without --pr and open the request by hand; nothing was pushed"
            ))
        })?;
    let base = match base {
        Some(b) => b.to_string(),
        None => git
            .run(&["symbolic-ref", "--quiet", "--short", "HEAD"])
            .map(|b| b.trim().to_string())
            .map_err(|_| {
                FinalizeError::PullRequest(
                    "HEAD is detached, so the pull request's base branch is unknown; pass --base BRANCH"
                        .into(),
                )
            })?,
    };
    let api_base = api_url
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| GITHUB_API.to_string())
        .trim_end_matches('/')
        .to_string();
    Ok(PullRequestPlan {
        remote: remote.to_string(),
        github,
        api_base,
        token,
        base,
    })
}

/// Pushes a branch with the user's own remote configuration.
pub fn push(git: &Git, remote: &str, branch: &str) -> Result<(), FinalizeError> {
    let spec = format!("refs/heads/{branch}:refs/heads/{branch}");
    git.run(&["push", "--quiet", remote, &spec]).map_err(|e| {
        FinalizeError::PullRequest(format!(
            "pushing {branch} to `{remote}` failed ({e}); the branch is built locally, fix the remote and run `git push {remote} {branch}`"
        ))
    })?;
    Ok(())
}

/// A pull request GitHub opened.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PullRequest {
    pub number: u64,
    pub url: String,
}

/// `POST /repos/{owner}/{repo}/pulls`.
pub fn open_pull_request(
    plan: &PullRequestPlan,
    head: &str,
    title: &str,
    body: &str,
) -> Result<PullRequest, FinalizeError> {
    let url = format!(
        "{}/repos/{}/{}/pulls",
        plan.api_base, plan.github.owner, plan.github.repo
    );
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(60)))
        .http_status_as_error(false)
        .build()
        .into();
    let payload =
        serde_json::json!({"title": title, "head": head, "base": plan.base, "body": body});
    let resp = agent
        .post(&url)
        .header("authorization", &format!("Bearer {}", plan.token))
        .header("accept", "application/vnd.github+json")
        .header("x-github-api-version", "2022-11-28")
        .header("user-agent", "hone")
        .header("content-type", "application/json")
        .send(payload.to_string().as_str())
        .map_err(|e| {
            FinalizeError::PullRequest(format!(
                "cannot reach the GitHub API at {}: {e}; the branch {head} is pushed, open the pull request by hand or run `hone finalize --pr` again with another --branch",
                plan.api_base
            ))
        })?;
    let (status, text) = crate::util::http_status_and_text(resp, 1 << 20);
    let json: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    if !(200..300).contains(&status) {
        let mut msg = json["message"].as_str().unwrap_or("").to_string();
        if let Some(errors) = json["errors"].as_array() {
            let details: Vec<String> = errors
                .iter()
                .filter_map(|e| {
                    e["message"]
                        .as_str()
                        .map(str::to_string)
                        .or_else(|| e.as_str().map(str::to_string))
                })
                .collect();
            if !details.is_empty() {
                msg = format!("{msg}: {}", details.join("; "));
            }
        }
        if msg.is_empty() {
            msg = crate::propose::prompt::sanitize(&text, 300);
        }
        return Err(FinalizeError::PullRequest(format!(
            "GitHub refused the pull request (HTTP {status}): {msg}; the branch {head} is pushed"
        )));
    }
    Ok(PullRequest {
        number: json["number"].as_u64().unwrap_or(0),
        url: json["html_url"].as_str().unwrap_or("").to_string(),
    })
}

/// The pull request's title.
pub fn pr_title(run: &RunRecord, exps: &[ExperimentRecord]) -> String {
    let s = crate::report::summarize(run, exps);
    format!("hone run {}: {}", run.tag, fmt_progress(&s))
}

/// The pull request's body: the report's markdown summary (its facts and top improvements,
/// without the per-experiment table) and the progress plot as text. GitHub does not render SVG
/// placed inline in a body, and an uploaded image would need a second, undocumented API; a text
/// plot in a code block shows the same points honestly.
pub fn pr_body(run: &RunRecord, exps: &[ExperimentRecord]) -> String {
    let report = crate::report::document::render(run, exps);
    let mut md: String = report
        .markdown
        .lines()
        .filter(|l| !l.starts_with("![progress]"))
        .take_while(|l| !l.starts_with("## Experiments"))
        .map(|l| format!("{l}\n"))
        .collect();
    md.push_str("## Progress\n\n```text\n");
    md.push_str(&crate::report::plot::progress_text(
        exps,
        &run.metric,
        run.direction == crate::verify::Direction::Minimize,
    ));
    md.push_str("```\n\n");
    md.push_str(&format!(
        "Every experiment, kept or not, is under `refs/hone/{tag}/`; `hone report --run {tag}` writes the full report with the SVG plot.\n",
        tag = run.tag
    ));
    // GitHub caps a body at 65536 characters.
    if md.len() > 60_000 {
        let mut cut = 60_000;
        while !md.is_char_boundary(cut) {
            cut -= 1;
        }
        md.truncate(cut);
        md.push_str("\n\n(cut to fit GitHub's limit)\n");
    }
    md
}

/// Validates a run tag given on the command line.
pub fn check_tag(tag: &str) -> Result<(), FinalizeError> {
    validate_tag(tag).map_err(|e| FinalizeError::Usage(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_urls_of_every_form() {
        let want = |host: &str| GitHubRepo {
            host: host.into(),
            owner: "acme".into(),
            repo: "widgets".into(),
        };
        for url in [
            "https://github.com/acme/widgets.git",
            "https://github.com/acme/widgets",
            "https://user:tok@github.com/acme/widgets/",
            "git@github.com:acme/widgets.git",
            "ssh://git@github.com/acme/widgets.git",
            "ssh://git@github.com:22/acme/widgets",
        ] {
            assert_eq!(parse_remote_url(url), Some(want("github.com")), "{url}");
        }
        assert_eq!(
            parse_remote_url("git@ghe.corp.example:acme/widgets.git"),
            Some(want("ghe.corp.example"))
        );
        for url in [
            "/srv/git/widgets.git",
            "file:///srv/git/widgets.git",
            "https://github.com/acme",
            "https://gitlab.com/group/sub/widgets.git",
            "../widgets.git",
        ] {
            assert_eq!(parse_remote_url(url), None, "{url}");
        }
    }

    #[test]
    fn change_lines_say_which_way_is_better() {
        assert_eq!(
            change_line("loss", Some(5.0), Some(4.0), true),
            "loss: 5.000000 → 4.000000 (-1.000000, better)"
        );
        assert_eq!(
            change_line("acc", Some(0.5), Some(0.4), false),
            "acc: 0.500000 → 0.400000 (-0.100000)"
        );
        // A metric below a thousandth keeps its digits (six decimals would print zeros).
        assert_eq!(
            change_line("err", Some(4.5407e-9), Some(3.0244e-9), true),
            "err: 4.5407e-9 → 3.0244e-9 (-1.5163e-9, better)"
        );
    }
}
