//! `hone run`: the loop, with the command line's overrides of hone.toml; Ctrl-C once stops
//! after the current experiment. Also the loop's driver that `hone demo` shares.

use std::path::Path;
use std::time::Duration;

use clap::Args;

use hone::engine::{self, RunOptions};
use hone::spec::{AgentKind, Spec};

use super::{load_spec, Here};
use crate::error::{CliError, CliResult, Kind, Kinded};
use crate::output;

#[derive(Args)]
pub struct RunArgs {
    /// The run's tag (branch hone/<tag>); an existing tag is resumed.
    #[arg(long)]
    tag: Option<String>,
    /// Stop after this many experiments in all (the baseline counts); kept across resumes.
    #[arg(short = 'n', long = "max-experiments", value_parser = clap::value_parser!(u64).range(1..))]
    max_experiments: Option<u64>,
    /// Run this many experiments more than the run already has: the latest run, finished
    /// or not, or the one --tag names.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), conflicts_with = "max_experiments")]
    more: Option<u64>,
    /// Stop after this much loop time, e.g. 30m or 8h (summed over resumes).
    #[arg(long, value_parser = super::parse_positive_duration)]
    time: Option<Duration>,
    /// The proposer (overrides [agent] kind); the help lists every kind the library knows.
    #[arg(long, help = agent_help())]
    agent: Option<String>,
    /// Seed for the built-in optimizer (the same seed gives the same candidates).
    #[arg(long)]
    seed: Option<u64>,
    /// Start a new run even if the last one could be resumed.
    #[arg(long)]
    new: bool,
    /// Verify this many experiments at once (overrides [exec] workers; each needs a slot
    /// when [exec] slots is set).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=256))]
    workers: Option<u64>,
}

pub fn run(here: &Here, a: RunArgs) -> CliResult {
    if let Some(t) = &a.tag {
        engine::validate_tag(t).usage()?;
    }
    let git = here.git()?;
    let mut spec = load_spec(git.root(), here.spec_path())?;
    override_spec(&mut spec, a.agent.as_deref(), a.workers)?;
    if spec.exec.store_password_in_file() {
        err!("warning: [store] url holds a password, and hone.toml can be read by agents and verifiers (it is in their checkout): whoever reads it can write the run's records. Export the URL in a variable and name it with [store] url_env instead (README, On several machines)");
    }
    let opts = RunOptions {
        tag: a.tag,
        max_experiments: a.max_experiments,
        more: a.more,
        max_time: a.time,
        seed: a.seed,
        new_run: a.new,
        agent_chosen: a.agent.is_some(),
    };
    run_loop(git.root(), &spec, &opts, here.spec.as_deref())
}

/// `--agent`'s help: every `[agent] kind`, from the library's table (a new agent preset
/// needs no change here).
fn agent_help() -> String {
    let names = AgentKind::names();
    let (last, rest) = names.split_last().map_or(("", &[][..]), |(l, r)| (*l, r));
    format!(
        "The proposer: {} or {last} (overrides [agent] kind)",
        rest.join(", ")
    )
}

/// `--agent` and `--workers` over hone.toml, checked as hone.toml's own values are.
fn override_spec(spec: &mut Spec, agent: Option<&str>, workers: Option<u64>) -> CliResult {
    if let Some(a) = agent {
        let written = spec.agent.kind;
        spec.agent.kind = AgentKind::parse(a).ok_or_else(|| {
            CliError::usage(format!(
                "--agent {a}: expected one of {}",
                AgentKind::names().join(", ")
            ))
        })?;
        if spec.agent.kind == AgentKind::Command && spec.agent.command.is_none() {
            return Err(CliError::usage(
                "--agent command needs [agent] command in hone.toml",
            ));
        }
        let http = matches!(spec.agent.kind, AgentKind::OpenAi | AgentKind::Anthropic);
        if http && spec.agent.llm.is_none() {
            return Err(CliError::usage(format!(
                "--agent {a} needs its model and server: write [agent] kind = \"{a}\" and model (and base_url, for a server other than the provider's) in hone.toml"
            )));
        }
        preset_fits(spec, written, a)?;
    }
    if let Some(w) = workers {
        // Bounded by the argument's parser.
        spec.exec.workers = w as usize;
        spec.exec
            .check_workers(spec.exec.workers)
            .map_err(|e| CliError::usage(format!("--workers {w}: {e}")))?;
    }
    Ok(())
}

/// What hone.toml says for the preset it names must fit the one `--agent` chose over it: a
/// money budget needs a tool that reports money (as hone.toml's own rules check), and the
/// preset's `model` and `extra_args` were written for the other tool (said, not refused).
fn preset_fits(spec: &mut Spec, written: AgentKind, chosen: &str) -> CliResult {
    let Some(tool) = spec.agent.kind.preset() else {
        return Ok(());
    };
    // A command hone.toml names is no preset's (it would run in the preset's place), and an
    // HTTP model is the server's, not the tool's.
    if written != spec.agent.kind {
        spec.agent.command = None;
        if written.preset().is_none() {
            spec.agent.model = None;
        }
    }
    if spec.stop.max_cost_usd.is_some() && !tool.def().reports_cost {
        return Err(CliError::usage(format!(
            "--agent {chosen}: {} reports tokens, not money, so [stop] max_cost_usd in hone.toml cannot bound it; use max_tokens",
            tool.def().tool
        )));
    }
    let other = written != spec.agent.kind && written.preset().is_some();
    if other && (spec.agent.model.is_some() || !spec.agent.extra_args.is_empty()) {
        err!(
            "warning: --agent {chosen}: [agent] model and extra_args in hone.toml were written for {}; {} gets them as they are",
            written.as_str(),
            tool.def().tool
        );
    }
    Ok(())
}

/// Runs the loop with the live printer and the Ctrl-C handler, then prints the summary.
/// `spec_file`: the `--spec` given, if any (the hints name it).
pub fn run_loop(
    root: &Path,
    spec: &Spec,
    opts: &RunOptions,
    spec_file: Option<&Path>,
) -> CliResult {
    let interrupt = output::install_interrupt_handler();
    let mut printer = output::Printer::new(spec.verify.metric.clone(), spec_file);
    let result = engine::run(root, spec, opts, interrupt, &mut |ev| printer.event(ev));
    printer.clear_line();
    match result {
        Ok(summary) if interrupt.stop_requested() => {
            output::summary(&summary, spec_file);
            Err(
                CliError::new(Kind::Interrupted, anyhow::anyhow!("interrupted"))
                    .hint("`hone run` resumes this run"),
            )
        }
        Ok(summary) => {
            output::summary(&summary, spec_file);
            Ok(())
        }
        Err(engine::EngineError::Stopped { reason, summary }) => {
            // The reason is said once, as the error; the summary leaves it out.
            let mut summary = *summary;
            summary.stop_reason = None;
            output::summary(&summary, spec_file);
            Err(CliError::runtime(reason))
        }
        // A command-line budget that asks for nothing more, and a plain `hone run` after a
        // run that spent its budget (go on with it, or a new one?), are usage errors.
        Err(
            e @ (engine::EngineError::Config(engine::Config::BudgetReached { .. })
            | engine::EngineError::Mismatch(engine::Mismatch::BudgetSpent { .. })),
        ) => Err(CliError::usage(e)),
        // hone.toml is wrong for this repository, found once it was seen (a key, a missing
        // API key, or editable globs that match no file): a spec error.
        Err(
            e @ (engine::EngineError::Config(
                engine::Config::Spec(_)
                | engine::Config::ApiKey { .. }
                | engine::Config::KeyRefused { .. },
            )
            | engine::EngineError::Mismatch(engine::Mismatch::EditableMatchesNothing { .. })),
        ) => Err(e).config(),
        Err(e) => Err(e).runtime(),
    }
}

#[cfg(test)]
mod tests {
    use clap::{Args as _, Command};

    use super::RunArgs;

    /// `--agent`'s help names every proposer the library knows.
    #[test]
    fn agent_help_lists_every_kind() {
        let cmd = RunArgs::augment_args(Command::new("run"));
        let help = cmd
            .get_arguments()
            .find(|a| a.get_id() == "agent")
            .and_then(|a| a.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default();
        for name in hone::spec::AgentKind::names() {
            assert!(help.contains(name), "--agent help lacks {name}: {help}");
        }
    }
}
