//! What `hone init` learns from a repository before it writes hone.toml: the training script,
//! the evaluator it imports (protected, never editable), the metric the script prints and its
//! direction, the command the project runs it with, the timeout from the script's own time
//! budget, and which constants are not knobs and why; and the hone.toml text that explains
//! each of those choices in a comment. No terminal I/O: `hone init` prints.

use std::path::Path;

use crate::propose::knobs::{self, Domain, Knob, KnobValue};
use crate::verify::Direction;

pub mod progress;

mod check;
pub mod imports;
use imports::imports;
pub mod scorer;
pub use check::{check, CheckOutcome};
mod draft;
pub use draft::{draft, spec_text, Draft, Sealed};

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
    "fps",
    "bleu",
    "rouge",
    "precision",
    "recall",
    "score",
    "r2",
    "map",
    "iou",
    "miou",
    "ndcg",
    "mrr",
];

/// Metric names (or `_<name>` endings) that are better when smaller.
const MINIMIZED: &[&str] = &[
    "loss",
    "bpb",
    "bpc",
    "error",
    "err",
    "perplexity",
    "ppl",
    "rmse",
    "mse",
    "mae",
    "nll",
    "wer",
    "cer",
    "regret",
    "latency",
    "time",
    "seconds",
    "ms",
];

/// Module names that are an evaluator whatever they hold.
const EVALUATOR_NAMES: &[&str] = &[
    "prepare",
    "evaluate",
    "evaluation",
    "eval",
    "data",
    "dataset",
];

/// Seconds added to twice the script's time budget: start-up, compilation and the evaluation.
pub const TIMEOUT_MARGIN_SECS: u64 = 120;

/// `maximize` for metrics named like accuracy, a score or a rate (`tokens_per_sec`), else
/// `minimize` (see [`known_direction`]).
pub fn direction_of(metric: &str) -> Direction {
    match known_direction(metric) {
        Some(d) => d,
        None => Direction::Minimize,
    }
}

/// The direction a metric's name says, if it says one: its last word decides
/// (`val_accuracy` maximize, `val_loss` minimize), or a rate (`tokens_per_sec`, `tok/s`).
fn known_direction(metric: &str) -> Option<Direction> {
    let lower = metric.to_ascii_lowercase();
    let ends = |w: &&str| {
        lower == *w || lower.ends_with(&format!("_{w}")) || lower.ends_with(&format!("/{w}"))
    };
    // A rate (something per unit of time) is better larger; a time to reach something,
    // smaller.
    let per_time = ["s", "sec", "second", "ms", "min", "minute", "hour", "h"]
        .iter()
        .any(|u| lower.ends_with(&format!("per_{u}")) || lower.ends_with(&format!("/{u}")));
    if lower.starts_with("time_to") || lower.contains("_time_to_") {
        return Some(Direction::Minimize);
    }
    if per_time || MAXIMIZED.iter().any(ends) {
        Some(Direction::Maximize)
    } else if MINIMIZED.iter().any(ends) {
        Some(Direction::Minimize)
    } else {
        None
    }
}

/// A module the script imports for its data and its evaluation.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluator {
    /// Repo-relative path (`prepare.py`).
    pub path: String,
    /// The names the script imports from it (empty for `import prepare`).
    pub imported: Vec<String>,
    /// The UPPER_CASE constants it assigns at the top level (`MAX_SEQ_LEN`, `TIME_BUDGET`).
    pub defines: Vec<String>,
}

/// A value hone.toml gets, and why (the comment written next to it).
#[derive(Clone, Debug, PartialEq)]
pub struct Choice<T> {
    pub value: T,
    pub why: String,
    /// Whether it is a guess the user should check.
    pub guessed: bool,
}

/// What the repository says about how to run and measure it.
#[derive(Clone, Debug, PartialEq)]
pub struct Analysis {
    /// The training script (`train.py`), if there is one.
    pub script: Option<String>,
    pub evaluators: Vec<Evaluator>,
    /// A script beside it that scores what it writes: the sealed evaluator.
    pub scorer: Option<scorer::Scorer>,
    /// A scorer found but not sealed, with why: it imports the training script, so the
    /// candidate's code would run inside it.
    pub unsealed: Option<String>,
    pub metric: Choice<String>,
    pub direction: Choice<Direction>,
    pub command: Choice<String>,
    /// Seconds.
    pub timeout: Choice<u64>,
    /// The `[verify] progress` the script's step prints suggest, if any.
    pub progress: Option<progress::Progress>,
    /// The names the script prints as `name: <number>` (empty without a script).
    pub printed: Vec<String>,
}

/// The training script: `train.py` (at the top or anywhere), else `main.py`, else the one
/// top-level Python file that prints a metric.
fn find_script(files: &[String], read: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    for name in ["train.py", "main.py"] {
        if let Some(f) = files.iter().find(|f| *f == name) {
            return Some(f.clone());
        }
    }
    if let Some(f) = files.iter().find(|f| f.ends_with("/train.py")) {
        return Some(f.clone());
    }
    let printing: Vec<&String> = files
        .iter()
        .filter(|f| f.ends_with(".py") && !f.contains('/'))
        .filter(|f| read(f).is_some_and(|t| !printed_names(&t).is_empty()))
        .collect();
    match printing.as_slice() {
        [one] => Some((*one).clone()),
        _ => None,
    }
}

/// The local modules `script` imports that hold its data loading or evaluation: named like
/// one (`prepare`, `evaluate`, `data`...), or defining or giving the script a name with `eval`
/// in it (`evaluate_bpb`).
fn find_evaluators(
    script: &str,
    files: &[String],
    read: &dyn Fn(&str) -> Option<String>,
) -> Vec<Evaluator> {
    let Some(text) = read(script) else {
        return Vec::new();
    };
    let dir = script.rsplit_once('/').map(|(d, _)| d);
    let mut out: Vec<Evaluator> = Vec::new();
    for (module, names) in imports(&text) {
        let rel = format!("{}.py", module.replace('.', "/"));
        let path = match dir {
            Some(d) if files.contains(&format!("{d}/{rel}")) => format!("{d}/{rel}"),
            _ if files.contains(&rel) => rel,
            _ => continue,
        };
        let body = read(&path).unwrap_or_default();
        let defines_eval = body.lines().any(|l| {
            l.trim_start()
                .strip_prefix("def ")
                .is_some_and(|d| d.to_ascii_lowercase().contains("eval"))
        });
        let gives_eval = names
            .iter()
            .any(|n| n.to_ascii_lowercase().contains("eval"));
        let last = module.rsplit('.').next().unwrap_or(&module);
        if EVALUATOR_NAMES.contains(&last) || defines_eval || gives_eval {
            let defines = knobs::discover(&path, &body)
                .map(|ks| ks.into_iter().map(|k| k.name).collect())
                .unwrap_or_default();
            match out.iter_mut().find(|e| e.path == path) {
                Some(e) => e.imported.extend(names),
                None => out.push(Evaluator {
                    path,
                    imported: names,
                    defines,
                }),
            }
        }
    }
    out
}

/// The names `text` prints as `name: value` (`print(f"val_bpb: {x:.6f}")`,
/// `print("loss:", loss)`, `print("acc: %.3f" % acc)`), with their 1-based lines, in order;
/// a literal word for the value (`print("loss: nan")`, an error path) is no metric.
pub fn printed_names(text: &str) -> Vec<(String, usize)> {
    printed(text)
        .into_iter()
        .map(|p| (p.name, p.line))
        .collect()
}

/// A `name: value` print of the script: its name, 1-based line and indentation.
struct Printed {
    name: String,
    line: usize,
    indent: usize,
}

fn printed(text: &str) -> Vec<Printed> {
    let mut out: Vec<Printed> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Some((_, name, after)) = knobs::infer::print_label(line) else {
            continue;
        };
        let named = !name.is_empty() && !name.starts_with(|c: char| c.is_ascii_digit());
        let Some(value) = after.strip_prefix(':') else {
            continue;
        };
        let literal_word = value
            .trim_start()
            .starts_with(|c: char| c.is_ascii_alphabetic());
        if named && !literal_word && !out.iter().any(|p| p.name == name) {
            out.push(Printed {
                name: name.to_string(),
                line: i + 1,
                indent: line.len() - line.trim_start().len(),
            });
        }
    }
    out
}

/// Prefixes of a name that mark a held-out evaluation (`val_loss`, `test_acc`).
const EVALUATED: &[&str] = &[
    "val",
    "valid",
    "validation",
    "test",
    "eval",
    "dev",
    "holdout",
];

/// The script's metric: among the printed names with a metric word in them (`val_bpb`), one
/// measured on held-out data (`val_`, `test_`...) before a training one, one printed outside
/// any loop or function (not indented) before one inside, the last printed of those; else
/// the first printed name. A guess when there was a choice, and the others are named.
fn find_metric(script: &str, text: &str) -> Option<Choice<String>> {
    let printed = printed(text);
    let is_metric = |n: &str| {
        let lower = n.to_ascii_lowercase();
        lower
            .split('_')
            .any(|w| knobs::infer::METRIC_WORDS.contains(&w))
    };
    let rank = |p: &Printed| {
        let lower = p.name.to_ascii_lowercase();
        let evaluated = EVALUATED
            .iter()
            .any(|e| lower.starts_with(&format!("{e}_")));
        (evaluated, p.indent == 0, p.line)
    };
    let metrics: Vec<&Printed> = printed.iter().filter(|p| is_metric(&p.name)).collect();
    let (chosen, guessed) = match metrics.iter().max_by_key(|p| rank(p)) {
        Some(p) => (*p, metrics.len() > 1),
        None => (printed.first()?, true),
    };
    let others: Vec<&str> = metrics
        .iter()
        .filter(|p| p.name != chosen.name)
        .map(|p| p.name.as_str())
        .collect();
    let also = match others.as_slice() {
        [] => String::new(),
        o => format!(" (it also prints {})", o.join(", ")),
    };
    Some(Choice {
        why: format!(
            "{script}:{} prints `{}: <number>`{also}",
            chosen.line, chosen.name
        ),
        value: chosen.name.clone(),
        guessed,
    })
}

/// How the project runs its script: `uv run` where there is a uv.lock or a pyproject.toml,
/// the repository's `.venv` python by absolute path where there is one (the verifier runs in
/// a worktree of committed files, where an untracked `.venv` does not exist), else `python3`.
fn find_command(root: &Path, files: &[String], script: Option<&str>) -> Choice<String> {
    let Some(script) = script else {
        return Choice {
            value: "./measure.sh".into(),
            why: "no training script found: the command that prints the metric".into(),
            guessed: true,
        };
    };
    if files.iter().any(|f| f == "uv.lock") {
        return Choice {
            value: format!("uv run {script}"),
            why: "uv.lock: the project runs with uv".into(),
            guessed: false,
        };
    }
    if files.iter().any(|f| f == "pyproject.toml") {
        return Choice {
            value: format!("uv run {script}"),
            why: "pyproject.toml: uv runs the project in its environment".into(),
            guessed: false,
        };
    }
    let venv = root.join(".venv/bin/python");
    if venv.exists() {
        return Choice {
            value: format!("{} {script}", venv.display()),
            why: "the repository's .venv, by absolute path: the verifier runs in \
                  .hone/worktrees/<tag>, where the untracked .venv does not exist"
                .into(),
            guessed: false,
        };
    }
    Choice {
        value: format!("python3 {script}"),
        why: "no uv.lock, pyproject.toml or .venv: the system python".into(),
        guessed: true,
    }
}

/// The script's time budget in seconds: a number assigned to a name with the word `BUDGET`
/// in the script or its evaluators (`TIME_BUDGET = 300`), with where it was found.
fn find_budget(
    script: &str,
    evaluators: &[Evaluator],
    read: &dyn Fn(&str) -> Option<String>,
) -> Option<(String, String, f64)> {
    let files =
        std::iter::once(script.to_string()).chain(evaluators.iter().map(|e| e.path.clone()));
    for f in files {
        let Some(text) = read(&f) else { continue };
        let Ok(found) = knobs::discover(&f, &text) else {
            continue;
        };
        for k in found {
            if !k.name.split('_').any(|w| w == "BUDGET") {
                continue;
            }
            let secs = match k.value {
                KnobValue::Int(n) => n as f64,
                KnobValue::Float(x) => x,
                _ => continue,
            };
            if secs > 0.0 && secs.is_finite() {
                return Some((k.name, format!("{}:{}", k.file, k.line), secs));
            }
        }
    }
    None
}

/// The direction `metric`'s name says; a guess (minimize) when it says none.
fn direction_choice(metric: &Choice<String>) -> Choice<Direction> {
    let name = &metric.value;
    match known_direction(name) {
        Some(d) => Choice {
            value: d,
            why: match d {
                Direction::Maximize => format!("`{name}` reads as higher-is-better"),
                Direction::Minimize => format!("`{name}` reads as lower-is-better"),
            },
            guessed: metric.guessed,
        },
        None => Choice {
            value: Direction::Minimize,
            why: format!("`{name}` does not say which way is better: lower is assumed"),
            guessed: true,
        },
    }
}

impl Analysis {
    /// The files hone.toml protects: the evaluators the script imports and the scorer beside
    /// it (their constants are no knobs).
    pub fn protected_paths(&self) -> Vec<String> {
        self.evaluators
            .iter()
            .map(|e| e.path.clone())
            .chain(self.scorer.as_ref().map(|s| s.path.clone()))
            .collect()
    }
}

/// Reads the repository: `files` are its repo-relative paths (tracked and untracked, not
/// ignored), `read` gives a file's text.
pub fn analyze(root: &Path, files: &[String], read: &dyn Fn(&str) -> Option<String>) -> Analysis {
    let script = find_script(files, read);
    let evaluators = script
        .as_deref()
        .map(|s| find_evaluators(s, files, read))
        .unwrap_or_default();
    let imported: Vec<String> = evaluators.iter().map(|e| e.path.clone()).collect();
    let (scorer, unsealed) = match script.as_deref() {
        Some(s) => scorer::find_sealed(s, &imported, files, read),
        None => (None, None),
    };
    // The scorer's metric is the one that counts: the script's own prints are its training's.
    let metric = scorer
        .as_ref()
        .and_then(|s| s.metric.clone())
        .or_else(|| {
            script
                .as_deref()
                .and_then(|s| read(s).and_then(|t| find_metric(s, &t)))
        })
        .unwrap_or_else(|| Choice {
            value: "score".into(),
            why: "no `name: <number>` print found: the name the command prints".into(),
            guessed: true,
        });
    let direction = direction_choice(&metric);
    let command = find_command(root, files, script.as_deref());
    let timeout = match script
        .as_deref()
        .and_then(|s| find_budget(s, &evaluators, read))
    {
        Some((name, at, secs)) => Choice {
            value: (secs * 2.0).ceil() as u64 + TIMEOUT_MARGIN_SECS,
            why: format!(
                "{name} ({at}) is {secs} s: twice that plus {TIMEOUT_MARGIN_SECS} s for \
                 start-up and evaluation"
            ),
            guessed: false,
        },
        None => Choice {
            value: 600,
            why: "no time budget found in the script: the process group is killed after this"
                .into(),
            guessed: true,
        },
    };
    let progress = script
        .as_deref()
        .and_then(|s| read(s).and_then(|t| progress::find(s, &t)));
    let mut names: Vec<String> = Vec::new();
    for p in script
        .as_deref()
        .and_then(read)
        .map(|t| printed(&t))
        .unwrap_or_default()
    {
        if !names.contains(&p.name) {
            names.push(p.name);
        }
    }
    if let Some(m) = scorer.as_ref().and_then(|s| s.metric.as_ref()) {
        names.retain(|n| *n != m.value);
        names.insert(0, m.value.clone());
    }
    Analysis {
        printed: names,
        script,
        evaluators,
        scorer,
        unsealed,
        metric,
        direction,
        command,
        timeout,
        progress,
    }
}

/// Why an unannotated knob is fixed, for the comment in hone.toml (`None` for a knob that
/// moves or carries its own annotation).
pub fn why_fixed(knob: &Knob) -> Option<&'static str> {
    if knob.annotated || knob.domain != Domain::Fixed {
        return None;
    }
    Some(if knob.name.contains("SEED") {
        "a seed: changing it is noise"
    } else if knobs::measures_the_run(&knob.name) {
        "a time budget, run length, data size, data split, evaluation or logging constant: changing it changes the measurement"
    } else {
        match knob.value {
            KnobValue::Str(_) => "a string (annotate `# hone: choice [...]` to search it)",
            KnobValue::Int(0) | KnobValue::Float(0.0) => "zero: no scale to search around",
            // The divisibility rule fixes integers only.
            KnobValue::Float(_) => "only printed: it changes a printout, not the result",
            _ => "only printed, or a divisor with no factor of two to spare",
        }
    })
}

#[cfg(test)]
mod tests;
