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
    /// Files (globs) the loop may edit; default: the tracked files that hold knobs, less the
    /// evaluator.
    #[arg(long, value_delimiter = ',')]
    editable: Vec<String>,
    /// The verifier command; default: the project's runner (`uv run train.py`...).
    #[arg(long)]
    command: Option<String>,
    /// The objective's name, as the command prints it; default: what the script prints.
    #[arg(long)]
    metric: Option<String>,
    /// Overwrite an existing hone.toml and program.md (by default an existing program.md is
    /// kept and an existing hone.toml is an error).
    #[arg(long)]
    force: bool,
    /// Run the command once, in this checkout, and report the metric it printed.
    #[arg(long)]
    check: bool,
    /// The proposer hone.toml names in [agent] kind (default: knobs, the built-in optimizer):
    /// an agent CLI preset, e.g. claude, codex, aider, gemini or opencode.
    #[arg(long)]
    agent: Option<String>,
}

const PROGRAM: &str = "# Program\n\nWhat this project is, what the metric means, and what good research looks like here.\n\
                       hone shows this file to the agent on every experiment.\n\n\
                       - Make one focused change per experiment.\n\
                       - Prefer simple changes; explain the hypothesis in one line.\n";

pub fn run(here: &Here, a: InitArgs) -> CliResult {
    let git = here.git()?;
    let root = git.root();
    let spec_path = root.join("hone.toml");
    let program_path = root.join("program.md");
    if spec_path.exists() && !a.force && a.check {
        return check_existing(root, &spec_path, a.agent.as_deref());
    }
    if spec_path.exists() && !a.force {
        return Err(
            CliError::runtime(format!("{} already exists", spec_path.display())).hint(
                "edit it, or run `hone init --force` to write a new one over it (and over \
                 program.md)",
            ),
        );
    }
    // Tracked files and untracked ones git does not ignore (a new project may not have
    // committed yet; `hone run` will ask for a commit).
    let tracked = ls_files(git, &["ls-files", "-z"])?;
    let files = ls_files(
        git,
        &[
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ],
    )?;
    let read = |f: &str| std::fs::read_to_string(root.join(f)).ok();
    let analysis = hone::init::analyze(root, &files, &read);
    // The evaluators and the scorer are protected: their constants are no knobs.
    let evaluators = analysis.protected_paths();
    let candidates: Vec<String> = files
        .iter()
        .filter(|f| !evaluators.contains(f) && *f != "hone.toml")
        .cloned()
        .collect();
    let (knobs, with_knobs) = find_knobs(root, &candidates, &a.editable);
    let mut draft = hone::init::draft(
        &analysis,
        &knobs,
        &with_knobs,
        a.editable,
        a.command,
        a.metric,
    );
    if let Some(kind) = &a.agent {
        draft.agent = agent_kind(kind)?;
    }
    std::fs::write(&spec_path, hone::init::spec_text(&draft))
        .with_context(|| format!("cannot write {}", spec_path.display()))?;
    out!("wrote {}", spec_path.display());
    write_program(&program_path, a.force)?;
    print_choices(&draft);
    output::knob_table(&knobs);
    print_next_steps(&draft, &with_knobs, &tracked);
    if a.check {
        check(
            root,
            (
                &draft.command.value,
                draft.evaluate.as_ref().map(|e| e.command.as_str()),
            ),
            draft.timeout.value,
            (&draft.metric.value, None),
            draft.progress.as_ref().map(|p| p.regex.as_str()),
        )?;
    }
    Ok(())
}

/// `hone init --check` on a spec already written (and perhaps edited): checks that one; an
/// `--agent` beside it is said, not written.
fn check_existing(root: &Path, spec_path: &Path, agent: Option<&str>) -> CliResult {
    let spec = hone::spec::Spec::load(spec_path).map_err(|e| CliError::usage(e.to_string()))?;
    if let Some(kind) = agent {
        // Checking writes nothing: the agent the existing hone.toml names stays.
        err!(
            "warning: --agent {kind}: hone.toml exists and --check only checks it; set [agent] kind = \"{kind}\" in it (it names \"{}\"), or run `hone init --agent {kind} --force` to write a new one",
            spec.agent.kind.as_str()
        );
    }
    let v = &spec.verify;
    check(
        root,
        (&v.command, v.evaluate.as_deref()),
        v.timeout.as_secs().max(1),
        (&v.metric, v.metric_regex.as_ref().map(|r| r.as_str())),
        v.progress.as_ref().map(|p| p.read.as_str()),
    )?;
    check_servers(&spec)
}

/// `--check` with an HTTP model (`[agent]` or `[review]`): its key is set and its server
/// answers, as `hone run` asks before its baseline (a wrong port found now, not after it).
fn check_servers(spec: &hone::spec::Spec) -> CliResult {
    let servers: Vec<&str> = [spec.agent.llm.as_ref(), spec.review.llm.as_ref()]
        .into_iter()
        .flatten()
        .map(|l| l.base_url.as_str())
        .collect();
    if servers.is_empty() {
        return Ok(());
    }
    // No key yet (init is often run before it is exported): said, the server not asked.
    if let Some((var, _)) = spec.missing_api_key() {
        err!("warning: ${var} is not set: `hone run` needs it (the model's server was not asked)");
        return Ok(());
    }
    hone::engine::check_model_servers(spec, &mut |e| {
        if let hone::engine::Event::Warning { message } = e {
            err!("warning: {message}");
        }
    })
    .config()?;
    out!("check: the model's server answers ({})", servers.join(", "));
    Ok(())
}

/// program.md, unless one exists (and `--force` does not ask for a fresh one).
fn write_program(path: &Path, force: bool) -> CliResult {
    if path.exists() && !force {
        out!(
            "kept {} (it exists; `hone init --force` writes a fresh one)",
            path.display()
        );
        return Ok(());
    }
    std::fs::write(path, PROGRAM).with_context(|| format!("cannot write {}", path.display()))?;
    out!("wrote {}", path.display());
    Ok(())
}

/// `--agent`'s kind: the built-in optimizer, an agent CLI preset or an HTTP model (hone.toml
/// then gets a model, server and key variable to check); a command needs its line.
fn agent_kind(kind: &str) -> CliResult<String> {
    use hone::spec::AgentKind;
    match AgentKind::parse(kind) {
        Some(AgentKind::Command) => Err(CliError::usage(format!(
            "--agent {kind} needs more than a kind: after `hone init`, write [agent] kind = \"{kind}\" and its command in hone.toml (README, `[agent]`)"
        ))),
        Some(_) => Ok(kind.to_string()),
        None => Err(CliError::usage(format!(
            "--agent {kind}: expected one of {}",
            AgentKind::names().join(", ")
        ))),
    }
}

/// `--check`: the baseline, run once here, and the metric read from it.
fn check(
    root: &Path,
    (command, evaluate): (&str, Option<&str>),
    timeout: u64,
    (metric, metric_regex): (&str, Option<&str>),
    progress: Option<&str>,
) -> CliResult {
    let then = evaluate
        .map(|e| format!(", then `{e}`"))
        .unwrap_or_default();
    out!(
        "\ncheck: running `{command}`{then} once in {} (up to {timeout} s)...",
        root.display()
    );
    let c = hone::init::check(
        root,
        (command, evaluate),
        timeout,
        (metric, metric_regex),
        progress,
    )
    .map_err(|e| CliError::runtime(format!("cannot run the command: {e}")))?;
    let exit = match c.exit {
        hone::exec::Exit::Code(0) => None,
        hone::exec::Exit::Code(n) => Some(format!("exited with {n}")),
        hone::exec::Exit::Signal(s) => Some(format!("was killed by signal {s}")),
        hone::exec::Exit::TimedOut => Some(format!("ran past the {timeout} s timeout")),
        hone::exec::Exit::Cancelled => Some("was cancelled".to_string()),
    };
    match (exit, c.value) {
        (None, Some(v)) => {
            out!(
                "check: {metric} = {v} after {:.1} s: the baseline works",
                c.seconds
            );
            match c.progress {
                Some((0, _)) => err!(
                    "warning: check: [verify] progress read no point from its output: its curve would not be recorded (check the setting against the output)"
                ),
                Some((n, Some((step, value)))) => {
                    out!("check: progress read {n} points, the last at step {step}: {value}")
                }
                _ => {}
            }
            Ok(())
        }
        (exit, _) => {
            // `command` or `evaluate`: the one whose exit and output these are.
            let what = match exit {
                Some(e) => format!("the {} {e}", c.stage),
                None => format!(
                    "the {} printed no `{metric}: <number>`{}",
                    c.stage,
                    c.hint.as_deref().unwrap_or("")
                ),
            };
            Err(CliError::runtime(format!(
                "check: {what}; its last lines:\n  {}",
                c.tail.join("\n  ")
            ))
            .hint(
                "fix [verify] command, evaluate or metric in hone.toml, then run `hone init --check` \
                 again (it checks the hone.toml that exists)",
            ))
        }
    }
}

/// The choices hone.toml holds, one line each with where it came from.
fn print_choices(d: &hone::init::Draft) {
    let guess = |g: bool| if g { "  (a guess: check it)" } else { "" };
    out!(
        "  editable  {}  ({})",
        d.editable.join(", "),
        d.editable_why
    );
    if !d.protected.is_empty() {
        out!("  protected {}  (the evaluator)", d.protected.join(", "));
    }
    out!(
        "  command   {}  ({}){}",
        d.command.value,
        d.command.why,
        guess(d.command.guessed)
    );
    if let Some(e) = &d.evaluate {
        out!(
            "  evaluate  {}  (sealed: the metric is read from it alone; outputs [{}]{})",
            e.command,
            e.outputs.join(", "),
            if e.outputs.is_empty() {
                ": list what it reads, a guess: check it"
            } else {
                ""
            }
        );
    }
    if let Some(why) = &d.unsealed {
        out!("  not sealed: {why}");
    }
    out!(
        "  timeout   {}s  ({}){}",
        d.timeout.value,
        d.timeout.why,
        guess(d.timeout.guessed)
    );
    out!(
        "  metric    {} ({})  ({}){}",
        d.metric.value,
        d.direction.value.as_str(),
        d.metric.why,
        guess(d.metric.guessed)
    );
    for (name, why) in &d.not_knobs {
        out!("  not a knob: {name}: {why}");
    }
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

/// Files with knobs that are not committed yet, and what is left to do.
fn print_next_steps(d: &hone::init::Draft, with_knobs: &[String], tracked: &[String]) {
    let untracked: Vec<&str> = with_knobs
        .iter()
        .filter(|f| !tracked.contains(f))
        .map(String::as_str)
        .collect();
    if !untracked.is_empty() {
        out!(
            "\nnot committed yet: {} (hone starts from HEAD: commit before `hone run`)",
            untracked.join(", ")
        );
    }
    let mut todo = Vec::new();
    if d.editable.iter().any(|e| e == "CHANGE-ME") {
        todo.push("set [loop] editable (no knobs were found to guess it from)");
    }
    let no_outputs = d.evaluate.as_ref().is_some_and(|e| e.outputs.is_empty());
    if d.command.guessed
        || d.metric.guessed
        || d.direction.guessed
        || d.timeout.guessed
        || no_outputs
    {
        todo.push("check the [verify] values marked as guesses in hone.toml");
    }
    if d.agent != "knobs" {
        todo.push("say in program.md what the project is and what good changes look like (the agent reads it every experiment)");
    }
    match d.agent.as_str() {
        "openai" => todo.push("check [agent] model and base_url, and export OPENAI_API_KEY (a server of your own that wants no key: any value)"),
        "anthropic" => todo.push("check [agent] model, and export ANTHROPIC_API_KEY"),
        _ => {}
    }
    todo.push("commit hone.toml and program.md, then `hone run`");
    out!("\nnext: {}", todo.join("; "));
}
