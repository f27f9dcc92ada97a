//! `hone init`: writes hone.toml and program.md into a repository, with the knobs found in
//! its files and guesses for what the command line did not say, and lists what is left to do.

use std::path::Path;

use anyhow::Context as _;
use clap::Args;

use hone::propose::knobs::Knob;
use hone::workspace::Git;

use super::Here;
use crate::error::{CliError, CliResult, Kinded};
use crate::output;

#[derive(Args)]
pub struct InitArgs {
    /// Files (globs) the loop may edit; default: the tracked files that hold knobs.
    #[arg(long, value_delimiter = ',')]
    editable: Vec<String>,
    /// The verifier command.
    #[arg(long)]
    command: Option<String>,
    /// The objective's name, as the command prints it.
    #[arg(long)]
    metric: Option<String>,
}

/// Metric names (or `_<name>` endings) that are better when larger.
const MAXIMIZED: &[&str] = &[
    "acc",
    "accuracy",
    "f1",
    "auc",
    "reward",
    "throughput",
    "tps",
    "qps",
    "bleu",
    "precision",
    "recall",
];

const PROGRAM: &str = "# Program\n\nWhat this project is, what the metric means, and what good research looks like here.\n\
                       hone shows this file to the agent on every experiment.\n\n\
                       - Make one focused change per experiment.\n\
                       - Prefer simple changes; explain the hypothesis in one line.\n";

/// What goes into hone.toml, and which of it was guessed.
struct Draft {
    editable: Vec<String>,
    command: String,
    metric: String,
    guessed_editable: bool,
    guessed_verify: bool,
}

pub fn run(here: &Here, a: InitArgs) -> CliResult {
    let git = here.git()?;
    let root = git.root();
    let spec_path = root.join("hone.toml");
    let program_path = root.join("program.md");
    for p in [&spec_path, &program_path] {
        if p.exists() {
            return Err(CliError::runtime(format!("{} already exists", p.display()))
                .hint("hone init does not overwrite files (edit it, or remove it first)"));
        }
    }
    // Tracked files and untracked ones git does not ignore (a new project may not have
    // committed yet; `hone run` will ask for a commit).
    let tracked = ls_files(&git, &["ls-files", "-z"])?;
    let files = ls_files(
        &git,
        &[
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ],
    )?;
    let (knobs, with_knobs) = find_knobs(root, &files, &a.editable);
    let draft = draft(a, &files, &with_knobs);
    std::fs::write(&spec_path, spec_text(&draft))
        .with_context(|| format!("cannot write {}", spec_path.display()))?;
    std::fs::write(&program_path, PROGRAM)
        .with_context(|| format!("cannot write {}", program_path.display()))?;
    out!(
        "wrote {} and {}",
        spec_path.display(),
        program_path.display()
    );
    output::knob_table(&knobs);
    print_next_steps(&draft, &with_knobs, &tracked);
    Ok(())
}

fn ls_files(git: &Git, args: &[&str]) -> CliResult<Vec<String>> {
    Ok(git
        .run(args)
        .runtime()?
        .split('\0')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect())
}

/// The knobs in `files` (only those matching `editable`, when given), and the files that hold
/// any.
fn find_knobs(root: &Path, files: &[String], editable: &[String]) -> (Vec<Knob>, Vec<String>) {
    let mut knobs = Vec::new();
    let mut with_knobs = Vec::new();
    for f in files {
        if !editable.is_empty() && !hone::workspace::matches_any(editable, f) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(root.join(f)) else {
            continue;
        };
        match hone::propose::knobs::discover(f, &text) {
            Ok(found) if !found.is_empty() => {
                with_knobs.push(f.clone());
                knobs.extend(found);
            }
            Ok(_) => {}
            Err(e) => err!("warning: {e}"),
        }
    }
    (knobs, with_knobs)
}

/// The command line's values, else guesses: the files with knobs, `python3 train.py` where
/// there is a train.py, and a metric called `score`.
fn draft(a: InitArgs, files: &[String], with_knobs: &[String]) -> Draft {
    let guessed_editable = a.editable.is_empty() && with_knobs.is_empty();
    let editable = match (a.editable.is_empty(), with_knobs.is_empty()) {
        (false, _) => a.editable,
        (true, true) => vec!["CHANGE-ME".to_string()],
        (true, false) => with_knobs.to_vec(),
    };
    let guessed_verify = a.command.is_none() || a.metric.is_none();
    let command = a.command.unwrap_or_else(|| {
        if files.iter().any(|f| f == "train.py") {
            "python3 train.py".into()
        } else {
            "./measure.sh".into()
        }
    });
    Draft {
        editable,
        command,
        metric: a.metric.unwrap_or_else(|| "score".into()),
        guessed_editable,
        guessed_verify,
    }
}

/// `maximize` for metrics named like accuracy or throughput, else `minimize`.
fn direction(metric: &str) -> &'static str {
    let lower = metric.to_ascii_lowercase();
    if MAXIMIZED
        .iter()
        .any(|w| lower == *w || lower.ends_with(&format!("_{w}")))
    {
        "maximize"
    } else {
        "minimize"
    }
}

fn spec_text(d: &Draft) -> String {
    let quoted: Vec<String> = d.editable.iter().map(|e| format!("{e:?}")).collect();
    format!(
        r#"# hone.toml: the loop's contract. Every key is described in hone's README.

[loop]
program   = "program.md"       # read on every experiment
editable  = [{editable}]       # the only files a candidate may change
protected = []                 # e.g. ["prepare.py"]: any change is a violation
pinned    = []                 # e.g. ["data/"]: hashed at start; a change stops the run

[verify]
command   = {command:?}
timeout   = "10m"              # the process group is killed after this
metric    = {metric:?}         # the command prints `{metric}: <number>`
direction = "{direction}"         # "minimize" or "maximize"
min_delta = 0.0                # the smallest improvement worth keeping

[agent]
kind = "knobs"                 # the built-in optimizer; or "command"

[stop]
max_experiments = 100
patience = 30
"#,
        editable = quoted.join(", "),
        command = d.command,
        metric = d.metric,
        direction = direction(&d.metric),
    )
}

/// Files with knobs that are not committed yet, and what is left to do.
fn print_next_steps(d: &Draft, with_knobs: &[String], tracked: &[String]) {
    let untracked: Vec<&String> = with_knobs.iter().filter(|f| !tracked.contains(f)).collect();
    if !untracked.is_empty() {
        out!(
            "\nnot committed yet: {} (hone starts from HEAD: commit before `hone run`)",
            untracked
                .iter()
                .map(|f| f.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let mut todo = Vec::new();
    if d.guessed_editable {
        todo.push("set [loop] editable (no knobs were found to guess it from)");
    }
    if d.guessed_verify {
        todo.push("check [verify] command, metric and direction");
    }
    todo.push("commit hone.toml and program.md, then `hone run`");
    out!("\nnext: {}", todo.join("; "));
}
