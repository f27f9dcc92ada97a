//! What a new run's files are checked for before it starts: something editable, a metric
//! the agent cannot write, sealed scorers that import nothing a candidate may change, `[loop]
//! fixed` names an editable file assigns; and the modules the sealed scorers import, which a
//! candidate's file must not stand in for (`shadow`).

use crate::spec::{AgentKind, Spec};
use crate::workspace::{matches_any, Git};

use super::session::Said;
use super::shadow::Scorers;
use super::{EngineError, Mismatch};

/// An editable file the verify command runs, when the metric is read from its output (no
/// `[verify] evaluate`) and the proposer is an agent (the knobs optimizer writes literals
/// only): such an agent can write the score it is judged by.
fn self_scoring(spec: &Spec) -> Option<String> {
    if spec.verify.evaluate.is_some() || spec.agent.kind == AgentKind::Knobs {
        return None;
    }
    spec.verify
        .command
        .split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')'))
        .map(|w| w.trim_matches(|c| c == '"' || c == '\''))
        .map(|w| w.strip_prefix("./").unwrap_or(w))
        .find(|w| {
            // A program, not data it reads (`cat value.txt`).
            let script = [
                ".py", ".sh", ".js", ".ts", ".rb", ".pl", ".jl", ".R", ".lua",
            ]
            .iter()
            .any(|ext| w.ends_with(ext));
            script && matches_any(&spec.loop_.editable, w)
        })
        .map(str::to_string)
}

/// A sealed stage (`[verify] evaluate`, the holdout's `evaluate`) whose Python script imports
/// a file the agent may edit, directly or through another module: the candidate's code runs
/// inside the scorer, which then can print any score. One warning each, with the chain.
fn unsealed_scorers(spec: &Spec, git: &Git, head: &str, files: &[String]) -> Vec<String> {
    let read = |path: &str| {
        git.file_at_most(head, path, 4 << 20)
            .ok()
            .flatten()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    };
    let editable = |path: &str| matches_any(&spec.loop_.editable, path);
    let holdout = spec.verify.holdout.as_ref();
    [
        ("[verify] evaluate", spec.verify.evaluate.as_deref()),
        ("[verify.holdout] evaluate", holdout.and_then(|h| h.evaluate.as_deref())),
    ]
    .into_iter()
    .filter_map(|(key, command)| Some((key, command?)))
    .flat_map(|(key, command)| {
        crate::init::imports::scripts_of(command, files)
            .into_iter()
            .map(move |script| (key, script))
    })
    .filter_map(|(key, script)| {
        let chain = crate::init::imports::editable_import(&script, &editable, files, &read)?;
        Some(format!(
            "{key} is not sealed: {}, which a candidate may change, so the candidate's code runs inside the scorer and can print any score. Move what the scorer needs into a file the agent may not edit (README: A sealed evaluator)",
            crate::init::imports::chain_words(&chain)
        ))
    })
    .collect()
}

/// The run's sealed scorers (`[verify] evaluate`, the holdout's) at `base`, the run's start:
/// where they look for modules first (their commands', and those of the repository's shell
/// scripts the commands run; the top too where a scorer or a file it imports changes
/// `sys.path`), and the top-level modules they import, themselves or through the repository's
/// files they import.
pub(super) fn scorers(spec: &Spec, git: &Git, base: &str) -> Result<Scorers, EngineError> {
    let mut commands: Vec<String> = [
        spec.verify.evaluate.as_deref(),
        spec.verify
            .holdout
            .as_ref()
            .and_then(|h| h.evaluate.as_deref()),
    ]
    .into_iter()
    .flatten()
    .map(str::to_string)
    .collect();
    if commands.is_empty() {
        return Ok(Scorers::default());
    }
    let files = git.files_at(base)?;
    let read = |path: &str| {
        git.file_at_most(base, path, 4 << 20)
            .ok()
            .flatten()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    };
    // The repository's shell scripts a command runs (`sh eval/run.sh`), and those they run
    // in turn: their lines too.
    let mut seen: Vec<String> = Vec::new();
    let mut from = 0;
    while from < commands.len() && seen.len() < 32 {
        let found: Vec<String> = commands[from..]
            .iter()
            .flat_map(|c| c.split(|ch: char| ch.is_whitespace() || matches!(ch, ';' | '&' | '|')))
            .map(|w| {
                w.trim_matches(|c| c == '"' || c == '\'')
                    .trim_start_matches("./")
                    .to_string()
            })
            .filter(|w| w.ends_with(".sh") && files.contains(w) && !seen.contains(w))
            .collect();
        from = commands.len();
        for script in found {
            if let Some(text) = read(&script) {
                commands.push(text);
            }
            seen.push(script);
        }
    }
    let scripts: Vec<String> = commands
        .iter()
        .flat_map(|c| crate::init::imports::scripts_of(c, &files))
        .collect();
    let words: Vec<&str> = commands.iter().map(String::as_str).collect();
    let mut dirs = super::shadow::scorer_dirs(&words);
    // A scorer (or a file it imports) that changes `sys.path`: the top, and the relative
    // directories it names (`sys.path.insert(0, "lib")`), come first too.
    let readers = crate::init::imports::with_local_imports(&scripts, &files, &read);
    let texts: Vec<String> = readers.iter().filter_map(|f| read(f)).collect();
    for text in &texts {
        for line in text.lines().filter(|l| l.contains("sys.path")) {
            dirs.push(String::new());
            let literals = line.split(['"', '\'']).skip(1).step_by(2);
            dirs.extend(literals.filter_map(|p| super::shadow::relative("", p)));
        }
    }
    dirs.sort();
    dirs.dedup();
    let modules = crate::init::imports::tops_of(&texts).into_iter().collect();
    Ok(Scorers { dirs, modules })
}

/// The files a new run starts from (`files`, committed at `head`): something must be
/// editable (an error); `protected` patterns that match nothing, named documents that are
/// missing and uncommitted changes are warnings.
pub(super) fn check_start_files(
    spec: &Spec,
    git: &Git,
    head: &str,
    files: &[String],
    said: &mut Said,
) -> Result<(), EngineError> {
    if let Some(path) = git.non_utf8_path(head)? {
        return Err(Mismatch::NonUtf8Path { path }.into());
    }
    if !files.iter().any(|f| matches_any(&spec.loop_.editable, f)) {
        return Err(Mismatch::EditableMatchesNothing {
            globs: spec.loop_.editable.clone(),
        }
        .into());
    }
    if let Some(p) = spec.verify.progress.as_ref().filter(|p| p.prune.is_some()) {
        if p.warmup.is_zero() {
            said.warnings.push(
                "[verify] prune without prune_warmup judges a run from its first point, where curves are noise: set prune_warmup (a tenth of a run, say)".into(),
            );
        }
    }
    if let Some(file) = self_scoring(spec) {
        said.warnings.push(format!(
            "the metric is read from what `{}` prints, and the agent may edit `{file}`: an agent can print any value there. To seal it, let training write its outputs and score them with a protected script: [verify] evaluate = \"python3 eval.py\", outputs = [\"...\"] (README: A sealed evaluator)",
            spec.verify.command
        ));
    }
    said.warnings
        .extend(unsealed_scorers(spec, git, head, files));
    // A fixed name no editable file assigns keeps nothing: likely a typo.
    let unassigned: Vec<&str> = spec
        .loop_
        .fixed
        .iter()
        .filter(|name| {
            !files
                .iter()
                .filter(|f| matches_any(&spec.loop_.editable, f))
                .filter_map(|f| Some((f, git.file_at_most(head, f, 4 << 20).ok()??)))
                .any(|(f, b)| crate::propose::knobs::assigns(f, &String::from_utf8_lossy(&b), name))
        })
        .map(String::as_str)
        .collect();
    if !unassigned.is_empty() {
        said.warnings.push(format!(
            "[loop] fixed names {}, which no editable file assigns at HEAD: it keeps nothing (a typo?)",
            unassigned.join(", ")
        ));
    }
    // A protected pattern that names no file protects nothing: likely a typo.
    for p in &spec.loop_.protected {
        if !files.iter().any(|f| crate::workspace::glob_match(p, f)) {
            said.warnings.push(format!(
                "[loop] protected `{p}` matches no file committed at HEAD: it only keeps such a file from being added (a typo?)"
            ));
        }
    }
    for doc in
        std::iter::once(spec.program_path()).chain(spec.loop_.skills.iter().map(String::as_str))
    {
        let explicit = spec.loop_.program.is_some() || doc != spec.program_path();
        if explicit && !git.root().join(doc).exists() && !files.iter().any(|f| f == doc) {
            said.warnings.push(format!(
                "`{doc}` (named in [loop]) does not exist; agents will not see it"
            ));
        }
    }
    // hone.toml, the program and the skills are read from the checkout, so their
    // uncommitted edits do count; anything else does not.
    let read_live: Vec<&str> = ["hone.toml", spec.program_path()]
        .into_iter()
        .chain(spec.loop_.skills.iter().map(String::as_str))
        .collect();
    let dirty: Vec<String> = git
        .uncommitted()?
        .into_iter()
        .filter(|f| !read_live.contains(&f.as_str()))
        .collect();
    if !dirty.is_empty() {
        said.warnings.push(format!(
            "uncommitted changes are not part of the run (it starts from HEAD {}): {}",
            &head[..head.len().min(10)],
            dirty.join(", ")
        ));
    }
    Ok(())
}
