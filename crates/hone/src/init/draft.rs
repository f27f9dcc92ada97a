//! `hone init`: the draft of hone.toml from what the repository showed (`super::analyze`),
//! and its text, each choice with a comment saying where it came from.

use super::{direction_choice, progress, scorer, why_fixed, Analysis, Choice, TIMEOUT_MARGIN_SECS};
use crate::propose::knobs::Knob;
use crate::verify::Direction;
use std::collections::BTreeMap;

/// What hone.toml will hold.
#[derive(Clone, Debug)]
pub struct Draft {
    pub editable: Vec<String>,
    pub editable_why: String,
    /// `[loop] fixed`: the editable files' constants that set the measurement (a time
    /// budget, a run length, a seed).
    pub fixed: Vec<String>,
    /// `[loop] pinned`: the scorer's inputs from the repository.
    pub pinned: Vec<String>,
    pub protected: Vec<String>,
    pub protected_why: String,
    pub command: Choice<String>,
    /// `[verify] evaluate` and `outputs`, where a scorer was found.
    pub evaluate: Option<Sealed>,
    /// Why a scorer found is not `evaluate` (it imports the training script).
    pub unsealed: Option<String>,
    pub timeout: Choice<u64>,
    pub metric: Choice<String>,
    pub direction: Choice<Direction>,
    /// Constants that are not knobs, with why: fixed knobs of the editable files, and the
    /// constants of a protected evaluator.
    pub not_knobs: Vec<(String, String)>,
    /// The suggested `[verify] progress`, if the script prints its steps.
    pub progress: Option<progress::Progress>,
    /// `[agent] kind`: the built-in optimizer (`knobs`) unless `hone init --agent` named one.
    pub agent: String,
}

/// The sealed evaluator hone.toml gets: the scorer's command, what the training leaves it.
#[derive(Clone, Debug)]
pub struct Sealed {
    pub command: String,
    pub outputs: Vec<String>,
    pub why: String,
}

/// The sealed evaluator for `analysis`'s scorer, run as `command` runs the script.
fn sealed(analysis: &Analysis, command: &str) -> Option<Sealed> {
    let (script, scorer) = (analysis.script.as_deref()?, analysis.scorer.as_ref()?);
    let reads = match scorer.outputs.as_slice() {
        [] => "(no file both name was found: list in outputs what it reads, CHECK)".to_string(),
        o => format!("({})", o.join(", ")),
    };
    Some(Sealed {
        command: scorer::evaluate_command(command, script, &scorer.path),
        outputs: scorer.outputs.clone(),
        why: format!(
            "{} scores what {script} writes {reads}: the metric comes from it alone, so an\n# \
             agent that edits {script} cannot print its own score; nothing else {script} leaves survives",
            scorer.path
        ),
    })
}

/// The draft for `analysis`, the knobs found in the files it would make editable, and the
/// command line's overrides (`editable`, `command`, `metric`; empty or `None`: inferred).
pub fn draft(
    analysis: &Analysis,
    knobs: &[Knob],
    with_knobs: &[String],
    editable: Vec<String>,
    command: Option<String>,
    metric: Option<String>,
) -> Draft {
    let protected = analysis.protected_paths();
    let (editable, editable_why) = if !editable.is_empty() {
        (editable, "from --editable".to_string())
    } else if !with_knobs.is_empty() {
        (
            with_knobs.to_vec(),
            "the files with knobs, less the evaluator".to_string(),
        )
    } else {
        (
            vec!["CHANGE-ME".to_string()],
            "no knobs found: the files a candidate may change".to_string(),
        )
    };
    let protected_why = match analysis.evaluators.as_slice() {
        [] if analysis.scorer.is_some() => {
            "the scorer (below, [verify] evaluate); any change is a violation".to_string()
        }
        [] => "e.g. [\"prepare.py\"]: any change is a violation".to_string(),
        evs => format!(
            "the evaluator: {} imports its data and evaluation from {}; any change is a violation",
            analysis.script.as_deref().unwrap_or("the script"),
            evs.iter()
                .map(|e| e.path.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let command = match command {
        Some(c) => Choice {
            value: c,
            why: "from --command".into(),
            guessed: false,
        },
        None => analysis.command.clone(),
    };
    let (metric, direction) = match metric {
        Some(m) => {
            // A name the script never prints is most likely a slip: said, and marked to check.
            let unprinted = !analysis.printed.is_empty() && !analysis.printed.contains(&m);
            let metric = Choice {
                why: match (&analysis.script, unprinted) {
                    (Some(script), true) => format!(
                        "from --metric, but {script} prints {}, not `{m}`: check it (`hone init --check` runs the command once)",
                        analysis.printed.join(", ")
                    ),
                    _ => "from --metric".into(),
                },
                value: m,
                guessed: unprinted,
            };
            let direction = direction_choice(&metric);
            (metric, direction)
        }
        None => (analysis.metric.clone(), analysis.direction.clone()),
    };
    let not_knobs = not_knobs(analysis, knobs);
    let timeout = analysis.timeout.clone();
    Draft {
        editable,
        editable_why,
        fixed: sets_measurement(knobs),
        pinned: analysis
            .scorer
            .as_ref()
            .map(|s| s.inputs.clone())
            .unwrap_or_default(),
        protected,
        protected_why,
        evaluate: sealed(analysis, &analysis.command.value),
        unsealed: analysis.unsealed.clone(),
        command,
        timeout,
        metric,
        direction,
        not_knobs,
        progress: analysis.progress.clone(),
        agent: "knobs".into(),
    }
}

/// The constants that are not knobs, with why: the fixed knobs of the editable files, what
/// the protected evaluators define, and knobs an evaluator defines too.
fn not_knobs(analysis: &Analysis, knobs: &[Knob]) -> Vec<(String, String)> {
    let mut not_knobs: Vec<(String, String)> = knobs
        .iter()
        .filter_map(|k| {
            why_fixed(k).map(|why| {
                (
                    format!("{} ({}:{})", k.name, k.file, k.line),
                    why.to_string(),
                )
            })
        })
        .collect();
    for e in &analysis.evaluators {
        for name in &e.defines {
            not_knobs.push((
                format!("{name} ({})", e.path),
                "defined by the protected evaluator".to_string(),
            ));
        }
        let shadowed: BTreeMap<&str, ()> = knobs
            .iter()
            .filter(|k| e.defines.contains(&k.name))
            .map(|k| (k.name.as_str(), ()))
            .collect();
        for name in shadowed.keys() {
            not_knobs.push((
                format!("{name} (also in {})", e.path),
                "the evaluator defines it too: mark it `# hone: fixed`".to_string(),
            ));
        }
    }
    not_knobs
}

fn quoted(list: &[String]) -> String {
    list.iter()
        .map(|e| format!("{e:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `[agent]` lines a kind needs beyond its name: an HTTP model's model, server and key
/// variable, each to check; a CLI preset's bound on one turn; nothing for the optimizer.
fn http_model_lines(kind: &str) -> &'static str {
    match kind {
        "openai" => {
            "model = \"gpt-4.1-mini\"         # CHECK: a model your server serves
base_url = \"https://api.openai.com/v1\"   # or your own server, e.g. \"http://127.0.0.1:8000/v1\"
api_key_env = \"OPENAI_API_KEY\"   # the variable that holds its key (never written here)
# price_in_per_mtok = 0.4        # $ per million tokens, for a model hone does not know
# price_out_per_mtok = 1.6
"
        }
        "anthropic" => {
            "model = \"claude-sonnet-4-20250514\"   # CHECK: the model to ask
api_key_env = \"ANTHROPIC_API_KEY\"   # the variable that holds its key (never written here)
"
        }
        "claude" => {
            "extra_args = [\"--max-turns\", \"30\"]   # bounds one agent turn
timeout = \"20m\"                # one agent turn at most (its process group is killed after)
# model = \"sonnet\"             # the tool's own default otherwise
"
        }
        "knobs" => "",
        _ => {
            "timeout = \"20m\"                # one agent turn at most (its process group is killed after)
# model = \"...\"                # the tool's own default otherwise
"
        }
    }
}

/// The `[stop]` lines a paid agent needs beyond the template's: a budget in money where the
/// agent reports what it spent, else in tokens, and a night's time.
fn stop_budget_lines(kind: &str) -> &'static str {
    match kind {
        "knobs" | "command" => "",
        // They report tokens and no money (README, Agent CLI presets).
        "codex" | "gemini" => {
            "max_tokens = 50000000         # its tokens together, cached input included (it reports no cost): a turn often takes 100k-1M
max_time = \"8h\"
"
        }
        _ => {
            "max_cost_usd = 5.0            # the model's calls together, at its prices (README, [stop])
max_time = \"8h\"
"
        }
    }
}

/// The knobs among `knobs` that are fixed because they set the measurement (a time budget, a
/// run length, a seed): `[loop] fixed`, each name once.
fn sets_measurement(knobs: &[Knob]) -> Vec<String> {
    let mut fixed: Vec<String> = Vec::new();
    for k in knobs {
        let measures = k.name.contains("SEED") || crate::propose::knobs::measures_the_run(&k.name);
        // A tuple's elements are knobs of their own (`SEEDS[0]`): the constant is `SEEDS`.
        let name = k.name.split('[').next().unwrap_or(&k.name).to_string();
        if why_fixed(k).is_some() && measures && !fixed.contains(&name) {
            fixed.push(name);
        }
    }
    fixed
}

/// The `pinned` line of `[loop]` (with its comment): the scorer's inputs, where it has some.
fn pinned_text(d: &Draft) -> String {
    match (&d.evaluate, d.pinned.is_empty()) {
        (Some(e), false) => format!(
            "# {} reads them too: hashed at the start; a change stops the run\npinned    = [{}]",
            e.command.rsplit(' ').next().unwrap_or("the scorer"),
            quoted(&d.pinned)
        ),
        _ => "pinned    = []                 # e.g. [\"data/\"]: hashed at start; a change stops the run".to_string(),
    }
}

/// The `fixed` line of `[loop]` (with its comment).
fn fixed_text(fixed: &[String]) -> String {
    if fixed.is_empty() {
        return "fixed     = []                 # e.g. [\"TIME_BUDGET\", \"SEED\"]: constants a candidate must not change".to_string();
    }
    format!(
        "# they set the measurement (not knobs, above): a candidate that changes one is a violation\nfixed     = [{}]",
        quoted(fixed)
    )
}

/// The `evaluate` and `outputs` lines of `[verify]` (with their comment).
fn evaluate_text(e: &Sealed) -> String {
    format!(
        "# {}\nevaluate  = {:?}\noutputs   = [{}]\n",
        e.why,
        e.command,
        quoted(&e.outputs)
    )
}

/// hone.toml for `d`, each choice with a comment saying where it came from.
pub fn spec_text(d: &Draft) -> String {
    let check = |guessed: bool| if guessed { " (a guess: check it)" } else { "" };
    let mut not_knobs = String::new();
    if !d.not_knobs.is_empty() {
        not_knobs.push_str("#\n# Not knobs (the optimizer never changes them):\n");
        for (name, why) in &d.not_knobs {
            not_knobs.push_str(&format!("#   {name}: {why}\n"));
        }
    }
    format!(
        r#"# hone.toml: the loop's contract. Every key is described in hone's README.
# Written by `hone init`; each comment says where a value came from.
{not_knobs}
[loop]
program   = "program.md"
# {editable_why}
editable  = [{editable}]
# {protected_why}
protected = [{protected}]
{pinned}
{fixed}

[verify]
# {command_why}{command_check}
command   = {command:?}
{evaluate}# {timeout_why}{timeout_check}
timeout   = "{timeout}s"
# {metric_why}{metric_check}
metric    = {metric:?}
# {direction_why}{direction_check}
direction = "{direction}"
min_delta = 0.0                # the smallest improvement worth keeping
{progress}
[agent]
# {agent_why}
kind = "{agent}"
{agent_model}
{sandbox}[stop]
max_experiments = 100
patience = 30
{stop_cost}"#,
        sandbox = if d.agent == "knobs" {
            ""
        } else {
            "[sandbox]\n# The agent's code runs as you, outside any sandbox: it could read hone's database and\n# rewrite its records. \"bwrap\" contains it (README: Containment); \"rlimits\" runs it as is.\n# kind = \"bwrap\"\n\n"
        },
        agent = d.agent,
        agent_model = http_model_lines(&d.agent),
        stop_cost = stop_budget_lines(&d.agent),
        agent_why = if d.agent == "knobs" {
            "The built-in optimizer. Or a coding agent, e.g. \"claude\", \"codex\", \"openai\" (any\n# OpenAI-compatible server) or \"command\" (README, `[agent]`)."
        } else {
            "`hone init --agent`: it reads program.md every experiment. \"knobs\" is the built-in\n# optimizer (README, `[agent]`)."
        },
        editable_why = d.editable_why,
        editable = quoted(&d.editable),
        protected_why = d.protected_why,
        protected = quoted(&d.protected),
        command_why = d.command.why,
        command_check = check(d.command.guessed),
        fixed = fixed_text(&d.fixed),
        pinned = pinned_text(d),
        command = d.command.value,
        evaluate = match (&d.evaluate, &d.unsealed) {
            (Some(e), _) => evaluate_text(e),
            (None, Some(why)) => format!("# {}\n", why.replace('\n', "\n# ")),
            (None, None) => String::new(),
        },
        timeout_why = d.timeout.why,
        timeout_check = check(d.timeout.guessed),
        timeout = d.timeout.value,
        metric_why = d.metric.why,
        metric_check = check(d.metric.guessed),
        metric = d.metric.value,
        direction_why = d.direction.why,
        direction_check = check(d.direction.guessed),
        direction = d.direction.value.as_str(),
        progress = progress_text(d),
    )
}

/// The `progress` lines of hone.toml's `[verify]` (a commented `prune` with them), or
/// nothing when the script prints no steps (or the regex would not fit a TOML literal).
/// The suggested warm-up is a tenth of the script's time budget where there is one.
fn progress_text(d: &Draft) -> String {
    let Some(p) = d
        .progress
        .as_ref()
        .filter(|p| !p.regex.contains(['\'', '\n']))
    else {
        return String::new();
    };
    let warmup = if d.timeout.guessed {
        "60s".to_string()
    } else {
        let budget = d.timeout.value.saturating_sub(TIMEOUT_MARGIN_SECS) / 2;
        format!("{}s", (budget / 10).max(1))
    };
    format!(
        "# {at} prints a step and `{name}` as it trains: each run's curve is recorded\n\
         progress  = '{regex}'\n\
         # To stop runs that cannot catch the best finished ones (README: `prune`):\n\
         # prune          = \"reach~0.12\"\n\
         # prune_min_runs = 5\n\
         # prune_warmup   = \"{warmup}\"\n",
        at = p.at,
        name = p.name,
        regex = p.regex,
    )
}
