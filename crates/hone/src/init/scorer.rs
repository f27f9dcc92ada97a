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
    /// The file names both scripts name that the training script writes (`model.json`):
    /// what it leaves for the scorer, `[verify] outputs`. Empty when none was found.
    pub outputs: Vec<String>,
    /// The files of the repository both scripts read and the training script does not write
    /// (`data/val.json`): the scorer's inputs, `[loop] pinned`.
    pub inputs: Vec<String>,
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
        let named = file_names(&train);
        let (outputs, inputs): (Vec<String>, Vec<String>) = file_names(&text)
            .into_iter()
            .filter(|f| named.contains(f))
            .partition(|f| writes(&train, f));
        let inputs = inputs.into_iter().filter(|f| files.contains(f)).collect();
        Some(Scorer {
            path: path.clone(),
            outputs,
            inputs,
            metric: super::find_metric(path, &text),
        })
    })
}

/// [`find`], unless the scorer found imports `script` (directly or through another module):
/// then the candidate's code would run inside it, and the second value says so.
pub fn find_sealed(
    script: &str,
    imported: &[String],
    files: &[String],
    read: &dyn Fn(&str) -> Option<String>,
) -> (Option<Scorer>, Option<String>) {
    let Some(found) = find(script, imported, files, read) else {
        return (None, None);
    };
    match super::imports::editable_import(&found.path, &|f| f == script, files, read) {
        None => (Some(found), None),
        Some(chain) => (
            None,
            Some(format!(
                "{} scores what {script} writes, but {}: the candidate's code would run inside it, which could then print any score. Not made [verify] evaluate: move what it needs from {script} into a file the agent may not edit, then set evaluate and outputs (README: A sealed evaluator)",
                found.path,
                super::imports::chain_words(&chain)
            )),
        ),
    }
}

/// Whether `text` writes the file `name`: a line that names it (or a constant that holds it,
/// `OUT = "model.json"`) opens it for writing or saves to it (`open(.., "w")`, `json.dump`,
/// `torch.save`, `np.save`, `.to_csv(`, `.write_text(`...).
fn writes(text: &str, name: &str) -> bool {
    // Calls that write, and open's modes that do (as its second argument or `mode=`).
    const WRITING: &[&str] = &[
        "save(",
        "dump(",
        "to_csv(",
        "to_parquet(",
        "to_json(",
        "write_text(",
        "write_bytes(",
        "savez(",
        "savetxt(",
        "export(",
    ];
    const MODES: &[&str] = &["w", "wb", "w+", "a", "ab", "x", "xb"];
    let writes_here = |code: &str| {
        let compact: String = code.chars().filter(|c| !c.is_whitespace()).collect();
        WRITING.iter().any(|w| compact.contains(w))
            || MODES.iter().any(|m| {
                [",", "mode="].iter().any(|before| {
                    compact.contains(&format!("{before}'{m}'"))
                        || compact.contains(&format!("{before}\"{m}\""))
                })
            })
    };
    let quoted = [format!("\"{name}\""), format!("'{name}'")];
    let holders: Vec<&str> = text
        .lines()
        .filter(|l| quoted.iter().any(|q| l.contains(q.as_str())))
        .filter_map(|l| l.split_once('=').map(|(lhs, _)| lhs.trim()))
        .filter(|lhs| !lhs.is_empty() && lhs.chars().all(|c| c.is_alphanumeric() || c == '_'))
        .collect();
    text.lines().any(|l| {
        let l = l.split_once('#').map_or(l, |(code, _)| code);
        let names_it = quoted.iter().any(|q| l.contains(q.as_str()))
            || holders.iter().any(|h| {
                l.match_indices(h).any(|(i, _)| {
                    let before = l[..i].chars().next_back();
                    let after = l[i + h.len()..].chars().next();
                    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
                    !word(before) && !word(after) && !l.trim_start().starts_with(h)
                })
            });
        names_it && writes_here(l)
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
        assert!(s.inputs.is_empty());
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
    fn what_the_script_writes_is_an_output_and_what_both_read_an_input() {
        let train = "import json\nOUT = 'out/model.json'\ndata = json.load(open('data/val.json'))\nw = 1\njson.dump({'w': w}, open(OUT, 'w'))\n";
        let score = "import json\nm = json.load(open('out/model.json'))\nv = json.load(open('data/val.json'))\nprint(f'val_loss: {m[\"w\"]}')\n";
        let all = files(&["train.py", "eval.py", "data/val.json"]);
        let read = |f: &str| match f {
            "train.py" => Some(train.to_string()),
            "eval.py" => Some(score.to_string()),
            _ => None,
        };
        let s = find("train.py", &[], &all, &read).expect("found");
        assert_eq!(s.outputs, ["out/model.json"]);
        assert_eq!(s.inputs, ["data/val.json"]);
        assert!(writes("np.save('preds.npy', p)", "preds.npy"));
        assert!(!writes("x = np.load('preds.npy')", "preds.npy"));
        assert!(!writes(
            "cfg = {'weights': 1, 'path': 'val.json'}",
            "val.json"
        ));
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
