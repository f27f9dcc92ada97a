//! Which of a repository's Python files a script imports, read from its text: `hone init`
//! finds the evaluators a training script imports, and both `init` and `hone run` refuse to
//! call a scorer sealed when it imports a file the agent may edit (`from train import
//! Model` runs the candidate's code inside the scorer, which can then print any score).

use std::collections::BTreeSet;

/// The modules `text` imports: `(module, names)` for `from m import a, b` (`m` keeps its
/// leading dots) and `import m` / `import m as x`, read as statements: over several lines
/// (brackets left open, a trailing `\`), after `;`, indented (an import inside a function or a
/// `try:`), or after a one-line block's `:` (`if x: import m`); and a module named by a string
/// to `importlib.import_module("m")` or `__import__("m")`.
pub fn imports(text: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for line in statements(text) {
        for name in dynamic_imports(&line) {
            out.push((name, Vec::new()));
        }
        for stmt in line.split(';') {
            let stmt = after_header(stmt.trim());
            if let Some(rest) = stmt.strip_prefix("from ") {
                // `from m import a`, `from m import(a, b)`.
                let Some(at) = rest.find(" import") else {
                    continue;
                };
                let (module, names) = (&rest[..at], &rest[at + " import".len()..]);
                if !names.starts_with([' ', '(']) {
                    continue;
                }
                let names = names
                    .trim_matches(|c| c == '(' || c == ')' || c == ' ')
                    .split(',')
                    .map(|n| n.split(" as ").next().unwrap_or("").trim().to_string())
                    .filter(|n| !n.is_empty() && n != ")")
                    .collect();
                out.push((module.trim().to_string(), names));
            } else if let Some(rest) = stmt.strip_prefix("import ") {
                for m in rest.split(',') {
                    let m = m.split(" as ").next().unwrap_or("").trim();
                    if !m.is_empty() {
                        out.push((m.to_string(), Vec::new()));
                    }
                }
            }
        }
    }
    out
}

/// `text` as Python statements' lines: comments cut, tabs read as spaces, a line whose
/// brackets stay open (or that ends in `\`, or inside a triple-quoted string) joined with the
/// next. Brackets and `#` inside string literals are text (`"resnet (v2)".split("(")`).
fn statements(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut joined, mut depth) = (String::new(), 0i64);
    // An open string: its quote, and whether it is triple-quoted (goes on over lines).
    let mut open: Option<(char, bool)> = None;
    for line in text.lines() {
        let line = line.replace('\t', " ");
        let mut code = String::new();
        let mut chars = line.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            match open {
                Some((q, triple)) => {
                    code.push(c);
                    if c == '\\' {
                        if let Some((_, next)) = chars.next() {
                            code.push(next);
                        }
                    } else if c == q && (!triple || line[i..].starts_with(&q.to_string().repeat(3)))
                    {
                        if triple {
                            code.push(q);
                            code.push(q);
                            chars.next();
                            chars.next();
                        }
                        open = None;
                    }
                }
                None => match c {
                    '#' => break,
                    '"' | '\'' => {
                        let triple = line[i..].starts_with(&c.to_string().repeat(3));
                        code.push(c);
                        if triple {
                            code.push(c);
                            code.push(c);
                            chars.next();
                            chars.next();
                        }
                        open = Some((c, triple));
                    }
                    '(' | '[' | '{' => {
                        depth += 1;
                        code.push(c);
                    }
                    ')' | ']' | '}' => {
                        depth -= 1;
                        code.push(c);
                    }
                    c => code.push(c),
                },
            }
        }
        // A one-quote string ends with its line (unless the line goes on).
        let continued = code.trim_end().ends_with('\\');
        if matches!(open, Some((_, false))) && !continued {
            open = None;
        }
        let code = if continued {
            code.trim_end().trim_end_matches('\\').to_string()
        } else {
            code
        };
        joined.push(' ');
        joined.push_str(code.trim());
        if !continued && depth <= 0 && open.is_none() {
            out.push(std::mem::take(&mut joined));
            depth = 0;
        }
    }
    if !joined.trim().is_empty() {
        out.push(joined);
    }
    out
}

/// What a one-line block runs (`if x: import m` gives `import m`); `stmt` itself otherwise.
fn after_header(stmt: &str) -> &str {
    const HEADERS: &[&str] = &[
        "if ", "elif ", "else", "try", "except", "finally", "with ", "for ", "while ", "def ",
        "class ", "async ", "match ", "case ",
    ];
    if !HEADERS.iter().any(|h| stmt.starts_with(h)) {
        return stmt;
    }
    let mut depth = 0i64;
    for (i, c) in stmt.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ':' if depth == 0 => return after_header(stmt[i + 1..].trim()),
            _ => {}
        }
    }
    stmt
}

/// The modules a statement line names to `import_module("m")` or `__import__("m")`.
fn dynamic_imports(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    for call in ["import_module(", "__import__("] {
        for (at, _) in line.match_indices(call) {
            let rest = line[at + call.len()..].trim_start();
            let Some(quote) = rest.chars().next().filter(|c| *c == '"' || *c == '\'') else {
                continue;
            };
            if let Some((name, _)) = rest[1..].split_once(quote) {
                out.push(name.trim().to_string());
            }
        }
    }
    out
}

/// The repository files (`files`, repo-relative) that module `module` (as written after
/// `from`/`import`, leading dots for a relative import) may be, imported by a file in
/// directory `dir` (`None`: the top): `a/b.py` or `a/b/__init__.py`, beside the importer or
/// from the top (where `python3 script.py` and `python3 -m` look first).
fn candidates(module: &str, dir: Option<&str>, files: &[String]) -> Vec<String> {
    let dots = module.len() - module.trim_start_matches('.').len();
    let rel = module.trim_start_matches('.').replace('.', "/");
    let mut bases: Vec<Option<String>> = Vec::new();
    if dots > 0 {
        // `.m` beside the importer, `..m` one level up.
        let mut d = dir.map(str::to_string);
        for _ in 1..dots {
            d = d.and_then(|d| d.rsplit_once('/').map(|(up, _)| up.to_string()));
        }
        bases.push(d);
    } else {
        bases.push(dir.map(str::to_string));
        bases.push(None);
    }
    let mut out = Vec::new();
    for base in bases {
        let join = |p: &str| match &base {
            Some(b) if !p.is_empty() => format!("{b}/{p}"),
            Some(b) => b.clone(),
            None => p.to_string(),
        };
        for path in [
            format!("{rel}.py"),
            format!("{rel}/__init__.py")
                .trim_start_matches('/')
                .to_string(),
        ] {
            let path = join(&path);
            if files.contains(&path) && !out.contains(&path) {
                out.push(path);
            }
        }
    }
    out
}

/// Every repository file `script` runs when it imports: its own imports of the repository's
/// files (`from m import name` also as the submodule `m/name.py`), and theirs in turn, each
/// with the chain that leads there (`["evaluate.py", "model.py", "train.py"]`), nearest
/// first; at most 200.
pub fn local_imports(
    script: &str,
    files: &[String],
    read: &dyn Fn(&str) -> Option<String>,
) -> Vec<Vec<String>> {
    let mut seen: BTreeSet<String> = BTreeSet::from([script.to_string()]);
    let mut queue = std::collections::VecDeque::from([vec![script.to_string()]]);
    let mut out = Vec::new();
    while let Some(chain) = queue.pop_front() {
        let Some(file) = chain.last() else { continue };
        let Some(text) = read(file) else { continue };
        let dir = file.rsplit_once('/').map(|(d, _)| d);
        for (module, names) in imports(&text) {
            let mut found = candidates(&module, dir, files);
            for name in &names {
                let sub = if module.chars().all(|c| c == '.') {
                    format!("{module}{name}")
                } else {
                    format!("{module}.{name}")
                };
                found.extend(candidates(&sub, dir, files));
            }
            for path in found {
                if out.len() >= 200 || !seen.insert(path.clone()) {
                    continue;
                }
                let mut next = chain.clone();
                next.push(path);
                out.push(next.clone());
                queue.push_back(next);
            }
        }
    }
    out
}

/// `scripts` and the repository files they import in turn ([`local_imports`]).
pub fn with_local_imports(
    scripts: &[String],
    files: &[String],
    read: &dyn Fn(&str) -> Option<String>,
) -> BTreeSet<String> {
    let mut readers: BTreeSet<String> = scripts.iter().cloned().collect();
    for s in scripts {
        readers.extend(
            local_imports(s, files, read)
                .into_iter()
                .filter_map(|chain| chain.last().cloned()),
        );
    }
    readers
}

/// The top-level modules `scripts` import, and the repository files they import in turn
/// ([`with_local_imports`]): `numpy` for `import numpy.linalg` or `from numpy import x`;
/// relative imports left out.
pub fn imported_tops(
    scripts: &[String],
    files: &[String],
    read: &dyn Fn(&str) -> Option<String>,
) -> BTreeSet<String> {
    let texts: Vec<String> = with_local_imports(scripts, files, read)
        .iter()
        .filter_map(|f| read(f))
        .collect();
    tops_of(&texts)
}

/// The top-level modules Python sources `texts` import ([`imported_tops`]).
pub fn tops_of(texts: &[String]) -> BTreeSet<String> {
    texts
        .iter()
        .flat_map(|text| imports(text))
        .filter_map(|(module, _)| {
            let top = module.split('.').next()?.trim();
            (!top.is_empty()).then(|| top.to_string())
        })
        .collect()
}

/// The first of [`local_imports`]' chains that ends in a file `is_editable` says a
/// candidate may change: `script` then runs the candidate's code.
pub fn editable_import(
    script: &str,
    is_editable: &dyn Fn(&str) -> bool,
    files: &[String],
    read: &dyn Fn(&str) -> Option<String>,
) -> Option<Vec<String>> {
    local_imports(script, files, read)
        .into_iter()
        .find(|chain| chain.last().is_some_and(|f| is_editable(f)))
}

/// `chain` ([`editable_import`]) in words: "`evaluate.py` imports `train.py`", "`eval.py`
/// imports `model.py`, which imports `train.py`".
pub fn chain_words(chain: &[String]) -> String {
    let mut out = String::new();
    for (i, f) in chain.iter().enumerate() {
        out.push_str(match i {
            0 => "",
            1 => " imports ",
            _ => ", which imports ",
        });
        out.push_str(&format!("`{f}`"));
    }
    out
}

/// The repository's Python files a shell command runs: words ending in `.py` that are files
/// of `files` (a leading `./` dropped), and `-m a.b`'s module as `a/b.py` or
/// `a/b/__init__.py`.
pub fn scripts_of(command: &str, files: &[String]) -> Vec<String> {
    let words: Vec<&str> = command
        .split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')'))
        .map(|w| w.trim_matches(|c| c == '"' || c == '\''))
        .filter(|w| !w.is_empty())
        .collect();
    let mut out: Vec<String> = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let w = w.strip_prefix("./").unwrap_or(w);
        if w.ends_with(".py") && files.iter().any(|f| f == w) {
            out.push(w.to_string());
        } else if w == "-m"
            || (w.len() > 2
                && w.starts_with('-')
                && !w.starts_with("--")
                && w.ends_with('m')
                && w[1..].chars().all(|c| c.is_ascii_alphabetic()))
        {
            if let Some(m) = words.get(i + 1) {
                // `-m a.b` runs `a/__init__.py` first, then `a/b.py`.
                let parts: Vec<&str> = m.split('.').collect();
                for k in 1..parts.len() {
                    out.extend(candidates(&parts[..k].join("."), None, files));
                }
                out.extend(candidates(m, None, files));
            }
        }
    }
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(files: &[(&str, &str)]) -> (Vec<String>, impl Fn(&str) -> Option<String>) {
        let owned: Vec<(String, String)> = files
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect();
        let names = owned.iter().map(|(p, _)| p.clone()).collect();
        let read = move |p: &str| owned.iter().find(|(q, _)| q == p).map(|(_, t)| t.clone());
        (names, read)
    }

    #[test]
    fn a_scorer_that_imports_the_training_script_runs_editable_code() {
        let (files, read) = repo(&[
            ("train.py", "LR = 0.1\n"),
            ("evaluate.py", "import json\nfrom train import Model\n"),
            ("model.py", "import train\n"),
            ("eval2.py", "import os; from model import Net\n"),
            ("clean.py", "import json, math\nfrom helpers import f\n"),
            ("helpers.py", "import numpy\n"),
            ("pkg/__init__.py", ""),
            ("pkg/score.py", "from . import util\n"),
            ("pkg/util.py", "def f(): pass\n"),
            ("pkg/bad.py", "from .. import train\n"),
        ]);
        let editable = |p: &str| p == "train.py";
        let chain = |s: &str| editable_import(s, &editable, &files, &read);
        assert_eq!(chain("evaluate.py").unwrap(), ["evaluate.py", "train.py"]);
        assert_eq!(
            chain("eval2.py").unwrap(),
            ["eval2.py", "model.py", "train.py"],
            "through a module that is not editable itself"
        );
        assert_eq!(chain("clean.py"), None);
        assert_eq!(chain("pkg/score.py"), None);
        assert_eq!(chain("pkg/bad.py").unwrap(), ["pkg/bad.py", "train.py"]);
        assert_eq!(
            chain_words(&chain("eval2.py").unwrap()),
            "`eval2.py` imports `model.py`, which imports `train.py`"
        );
    }

    #[test]
    fn the_modules_a_scorer_imports_through_the_files_it_imports() {
        let (files, read) = repo(&[
            (
                "eval/score.py",
                "import numpy as np, json\nfrom sklearn.metrics import f1_score\nfrom . import helpers\nfrom eval.metrics import auc\n",
            ),
            ("eval/__init__.py", ""),
            ("eval/helpers.py", "import scipy.stats\n"),
            (
                "eval/metrics.py",
                "try:\n    import torch\nexcept ImportError:\n    torch = None\nimport os, \\\n    click\nif True: import jinja2\nfrom yaml import(safe_load)\nimport\tidna\nm = importlib.import_module(\"requests\")\nu = __import__('urllib3')\ndef f(): import tqdm\n",
            ),
            ("train.py", "import pandas\n"),
            (
                "eval/report.py",
                "name = \"resnet (v2)\".split(\"(\")[0]  # a (\ndoc = \"\"\"\nimport fake (\n\"\"\"\nimport rich\n",
            ),
        ]);
        let tops = imported_tops(
            &["eval/score.py".to_string(), "eval/report.py".to_string()],
            &files,
            &read,
        );
        let tops: Vec<&str> = tops.iter().map(String::as_str).collect();
        // Its own, and those of the repository's files it imports (`train.py` it does not);
        // a relative import is none. Every form of statement, and a module named by a string;
        // brackets in a string are text, and a docstring's lines are no statements.
        assert_eq!(
            tops,
            [
                "click", "eval", "idna", "jinja2", "json", "numpy", "os", "requests", "rich",
                "scipy", "sklearn", "torch", "tqdm", "urllib3", "yaml"
            ]
        );
    }

    #[test]
    fn the_scripts_a_command_runs() {
        let files: Vec<String> = [
            "eval/score.py",
            "eval/__init__.py",
            "evaluate.py",
            "train.py",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            scripts_of("python3 ./evaluate.py --x data.json", &files),
            ["evaluate.py"]
        );
        assert_eq!(
            scripts_of("python3 -m eval.score", &files),
            ["eval/__init__.py", "eval/score.py"]
        );
        assert_eq!(scripts_of("python3 -m eval", &files), ["eval/__init__.py"]);
        assert_eq!(
            scripts_of("python3 -um eval.score", &files),
            ["eval/__init__.py", "eval/score.py"]
        );
        assert!(scripts_of("python3 /opt/score.py", &files).is_empty());
    }
}
