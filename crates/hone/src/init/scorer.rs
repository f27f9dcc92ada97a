//! `hone init`: a scoring script beside the training script (`evaluate.py` that reads the
//! `model.json` `train.py` writes), which hone.toml then makes the sealed evaluator: the
//! metric comes from it alone, so an agent that edits the training script cannot print its
//! own score.

use super::Choice;

/// A script that scores what the training script writes.
#[derive(Clone, Debug, PartialEq)]
pub struct Scorer {
    /// Repo-relative path (`evaluate.py`).
    pub path: String,
    /// The file names both scripts name (`model.json`): what the training script leaves
    /// for it, `[verify] outputs`. Empty when none was found.
    pub outputs: Vec<String>,
    /// The metric it prints, if it prints one.
    pub metric: Option<Choice<String>>,
}

/// What a scoring script is called (its name without `.py`, or a name starting `eval`).
const SCORER_NAMES: &[&str] = &["score", "scoring", "validate", "test_model", "benchmark"];

/// The scoring script beside `script`: a Python file in the same folder, not `script` and not
/// one of the modules it imports (`imported`: those are its evaluators), named like a scorer,
/// that prints a `name: <number>`. The first in `files`' order, by name.
pub fn find(
    script: &str,
    imported: &[String],
    files: &[String],
    read: &dyn Fn(&str) -> Option<String>,
) -> Option<Scorer> {
    let dir = script.rsplit_once('/').map(|(d, _)| d);
    let mut names: Vec<&String> = files
        .iter()
        .filter(|f| f.as_str() != script && !imported.contains(f))
        .filter(|f| f.rsplit_once('/').map(|(d, _)| d) == dir)
        .filter(|f| {
            let name = f.rsplit('/').next().unwrap_or(f);
            name.strip_suffix(".py").is_some_and(|stem| {
                let stem = stem.to_ascii_lowercase();
                stem.starts_with("eval") || SCORER_NAMES.contains(&stem.as_str())
            })
        })
        .collect();
    names.sort();
    let train = read(script).unwrap_or_default();
    names.into_iter().find_map(|path| {
        let text = read(path)?;
        if super::printed_names(&text).is_empty() {
            return None;
        }
        let written = file_names(&train);
        let outputs = file_names(&text)
            .into_iter()
            .filter(|f| written.contains(f))
            .collect();
        Some(Scorer {
            path: path.clone(),
            outputs,
            metric: super::find_metric(path, &text),
        })
    })
}

/// The quoted strings of `text` that read as a file's name: one word with an extension
/// (`"model.json"`, `'out/preds.npy'`), no template braces, no URL; each once, in order.
fn file_names(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let line = line.split_once('#').map_or(line, |(code, _)| code);
        for quote in ['"', '\''] {
            let parts: Vec<&str> = line.split(quote).collect();
            // The odd pieces are inside quotes.
            for s in parts.iter().skip(1).step_by(2).take(parts.len() / 2) {
                if is_file_name(s) && !out.iter().any(|o| o == s) {
                    out.push(s.to_string());
                }
            }
        }
    }
    out
}

fn is_file_name(s: &str) -> bool {
    let Some((stem, ext)) = s.rsplit_once('.') else {
        return false;
    };
    let stem_name = stem.rsplit('/').next().unwrap_or(stem);
    s.len() <= 200
        && !stem_name.is_empty()
        && (1..=8).contains(&ext.len())
        && ext.chars().all(|c| c.is_ascii_alphanumeric())
        && ext.chars().any(|c| c.is_ascii_alphabetic())
        && !s.contains("://")
        && !s.starts_with('/')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
}

/// `command` with the training script's path at its end replaced by the scorer's (`uv run
/// train.py` gives `uv run evaluate.py`); else the scorer with the system python.
pub fn evaluate_command(command: &str, script: &str, scorer: &str) -> String {
    match command.strip_suffix(script) {
        Some(runner) if runner.is_empty() || runner.ends_with(' ') => format!("{runner}{scorer}"),
        _ => format!("python3 {scorer}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRAIN: &str = "import json\nLR = 0.1\nw = 3.0\njson.dump({'w': w}, open(\"model.json\", \"w\"))  # 'notes.txt'\nprint(f\"wrote {OUT}.json\")\nURL = 'https://x.org/data.csv'\n";
    const SCORE: &str =
        "import json\nm = json.load(open('model.json'))\nprint(f'val_error: {abs(m[\"w\"] - 3):.6f}')\n";

    fn files(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_scorer_beside_the_script_and_what_it_reads_of_it() {
        let all = files(&["train.py", "evaluate.py", "prepare.py", "sub/eval.py"]);
        let read = |f: &str| match f {
            "train.py" => Some(TRAIN.to_string()),
            "evaluate.py" | "sub/eval.py" | "prepare.py" => Some(SCORE.to_string()),
            _ => None,
        };
        let s = find("train.py", &[], &all, &read).expect("found");
        assert_eq!(s.path, "evaluate.py");
        assert_eq!(s.outputs, ["model.json"]);
        let m = s.metric.expect("a metric");
        assert_eq!(m.value, "val_error");
        assert!(m.why.starts_with("evaluate.py:3 prints"), "{}", m.why);
        // One the script imports is its evaluator, not a scorer; one that prints nothing
        // scores nothing.
        assert_eq!(
            find("train.py", &files(&["evaluate.py"]), &all, &read),
            None
        );
        let silent = |f: &str| (f == "train.py").then(|| TRAIN.to_string());
        assert_eq!(find("train.py", &[], &all, &silent), None);
    }

    #[test]
    fn file_names_are_quoted_words_with_an_extension() {
        assert_eq!(file_names(TRAIN), ["model.json"]);
        assert_eq!(
            file_names("np.save('out/preds.npy', p); x = \"a b.txt\"; v = '1.5'"),
            ["out/preds.npy"]
        );
    }

    #[test]
    fn the_evaluate_command_takes_the_scripts_runner() {
        for (command, evaluate) in [
            ("uv run train.py", "uv run evaluate.py"),
            (
                "/r/.venv/bin/python train.py",
                "/r/.venv/bin/python evaluate.py",
            ),
            ("./run.sh", "python3 evaluate.py"),
            ("python3 mytrain.py", "python3 evaluate.py"),
        ] {
            assert_eq!(
                evaluate_command(command, "train.py", "evaluate.py"),
                evaluate
            );
        }
    }
}
