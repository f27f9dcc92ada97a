//! Builders for the tests' repositories and their hone.toml: `Spec` writes a spec table by
//! table, `RepoBuilder` lays out a `Repo` (files, agent script, spec) and commits it.
//!
//! The text is what the hand-written fixtures wrote, byte for byte: tables in the order they
//! are first named, `key = value` lines in the order they are set, one blank line between
//! tables, and raw text after the last one (`tail`). Values are TOML as written: `quoted` and
//! `list` make strings and lists of strings the way the fixtures did (Rust's `{:?}`). A test
//! that asserts a spec error's line number or exact text keeps its literal hone.toml instead.

use super::*;

/// A hone.toml, table by table.
#[derive(Clone, Default)]
pub(crate) struct Spec {
    /// `(table, lines)`: each line is `key = value` or raw text set with `lines`.
    tables: Vec<(String, Vec<String>)>,
    /// Raw text after the last table (the standard repository's `toml_extra`).
    tail: String,
}

/// A TOML basic string holding `s` (as the fixtures wrote one: Rust's debug format).
pub(crate) fn quoted(s: &str) -> String {
    format!("{s:?}")
}

/// A TOML list of strings: `["a", "b"]`.
pub(crate) fn list(items: &[&str]) -> String {
    let items: Vec<String> = items.iter().map(|s| quoted(s)).collect();
    format!("[{}]", items.join(", "))
}

impl Spec {
    pub(crate) fn new() -> Spec {
        Spec::default()
    }

    /// The standard repository's spec (`Repo::new`): `value.txt` editable, `prepare.py`
    /// protected, `data/` pinned; `verify` prints `score`, 60 s timeout, 1 s kill grace; the
    /// fake agent plays `agent_script`.
    pub(crate) fn standard(verify: &str, agent_script: &Path) -> Spec {
        Spec::standard_loop(verify).fake_agent(agent_script)
    }

    /// `Spec::standard` without its `[agent]` table.
    pub(crate) fn standard_loop(verify: &str) -> Spec {
        Spec::new()
            .editable(&["value.txt"])
            .protected(&["prepare.py"])
            .pinned(&["data/"])
            .command(verify)
            .metric("score")
            .set("verify", "timeout", "\"60s\"")
            .set("verify", "kill_grace", "\"1s\"")
    }

    /// `[loop] editable`.
    pub(crate) fn editable(self, files: &[&str]) -> Spec {
        self.set("loop", "editable", &list(files))
    }

    /// `[loop] protected`.
    pub(crate) fn protected(self, files: &[&str]) -> Spec {
        self.set("loop", "protected", &list(files))
    }

    /// `[loop] pinned`.
    pub(crate) fn pinned(self, paths: &[&str]) -> Spec {
        self.set("loop", "pinned", &list(paths))
    }

    /// `[verify] command`.
    pub(crate) fn command(self, command: &str) -> Spec {
        self.set("verify", "command", &quoted(command))
    }

    /// `[verify] metric`.
    pub(crate) fn metric(self, name: &str) -> Spec {
        self.set("verify", "metric", &quoted(name))
    }

    /// `[agent]`: the scripted fake agent (`fake-agent`) playing `script`.
    pub(crate) fn fake_agent(self, script: &Path) -> Spec {
        self.set("agent", "kind", "\"command\"").set(
            "agent",
            "command",
            &format!("\"{FAKE_AGENT} {}\"", script.display()),
        )
    }

    /// An HTTP model in `[table]` (`agent` or `review`): its wire format (`openai`,
    /// `anthropic`), model name and base URL.
    pub(crate) fn provider(self, table: &str, kind: &str, model: &str, base_url: &str) -> Spec {
        self.set(table, "kind", &quoted(kind))
            .set(table, "model", &quoted(model))
            .set(table, "base_url", &quoted(base_url))
    }

    /// `key = value` in `[table]` (`value` is TOML as written): replaces the key's line where
    /// it is set already, else ends the table (a new table goes after the others).
    pub(crate) fn set(mut self, table: &str, key: &str, value: &str) -> Spec {
        let line = format!("{key} = {value}");
        let lines = self.table(table);
        match lines.iter().position(|l| is_key(l, key)) {
            Some(i) => lines[i] = line,
            None => lines.push(line),
        }
        self
    }

    /// Raw lines right after `key`'s line in `[table]` (where a fixture wrote related keys
    /// together, e.g. `seed_env` after `metric`). Panics if `key` is not set.
    pub(crate) fn after(mut self, table: &str, key: &str, raw: &str) -> Spec {
        let lines = self.table(table);
        let i = lines
            .iter()
            .position(|l| is_key(l, key))
            .unwrap_or_else(|| panic!("`{table}.{key}` is not set"));
        lines.insert(i + 1, raw.to_string());
        self
    }

    /// Raw text (one line or several, without the final newline) at the end of `[table]`.
    pub(crate) fn lines(mut self, table: &str, raw: &str) -> Spec {
        self.table(table).push(raw.to_string());
        self
    }

    /// Raw text after the last table, with no blank line before it.
    pub(crate) fn tail(mut self, raw: &str) -> Spec {
        self.tail.push_str(raw);
        self
    }

    /// The hone.toml text.
    pub(crate) fn render(&self) -> String {
        let tables: Vec<String> = self
            .tables
            .iter()
            .map(|(name, lines)| {
                let mut t = format!("[{name}]\n");
                for l in lines {
                    t.push_str(l);
                    t.push('\n');
                }
                t
            })
            .collect();
        format!("{}{}", tables.join("\n"), self.tail)
    }

    /// Writes the text to `dir/hone.toml`.
    pub(crate) fn write(&self, dir: &Path) {
        std::fs::write(dir.join("hone.toml"), self.render()).unwrap();
    }

    fn table(&mut self, name: &str) -> &mut Vec<String> {
        let i = match self.tables.iter().position(|(n, _)| n == name) {
            Some(i) => i,
            None => {
                self.tables.push((name.to_string(), Vec::new()));
                self.tables.len() - 1
            }
        };
        &mut self.tables[i].1
    }
}

/// Is `line` the `key = ...` line?
fn is_key(line: &str, key: &str) -> bool {
    line.strip_prefix(key)
        .is_some_and(|rest| rest.trim_start().starts_with('='))
}

/// How `RepoBuilder` gets its spec: the agent script's path is known only once the temporary
/// directory exists.
type SpecFn = Box<dyn FnOnce(&Path) -> Spec>;

/// A `Repo` being laid out: files (the standard three to start with), the fake agent's script
/// and the spec; `create` writes them, `git init`s and commits everything as `init`.
pub(crate) struct RepoBuilder {
    files: Vec<(String, String)>,
    script: String,
    spec: SpecFn,
}

impl RepoBuilder {
    /// The standard files: `value.txt` (`score: 5`), `prepare.py`, `data/input.txt`, and the
    /// standard spec scored by `cat value.txt`.
    pub(crate) fn new() -> RepoBuilder {
        RepoBuilder {
            files: vec![
                ("value.txt".into(), "score: 5\n".into()),
                ("prepare.py".into(), "# the fixed evaluator\n".into()),
                ("data/input.txt".into(), "pinned\n".into()),
            ],
            script: String::new(),
            spec: Box::new(|agent| Spec::standard(SCORE, agent)),
        }
    }

    /// Adds a file, or replaces one (its place in the list does not matter: all are committed
    /// at once).
    pub(crate) fn file(mut self, path: &str, content: &str) -> RepoBuilder {
        match self.files.iter_mut().find(|(p, _)| p == path) {
            Some(f) => f.1 = content.to_string(),
            None => self.files.push((path.to_string(), content.to_string())),
        }
        self
    }

    /// The fake agent's script (`fake-agent`'s format).
    pub(crate) fn script(mut self, script: &str) -> RepoBuilder {
        self.script = script.to_string();
        self
    }

    /// The spec.
    pub(crate) fn spec(self, spec: Spec) -> RepoBuilder {
        self.spec_with(move |_| spec)
    }

    /// The standard spec scored by `verify`, with the raw `[verify]` lines `lines` right after
    /// its metric, stopping after `max_experiments` experiments.
    pub(crate) fn standard_with(
        self,
        verify: &str,
        lines: &str,
        max_experiments: usize,
    ) -> RepoBuilder {
        let (verify, lines) = (verify.to_string(), lines.to_string());
        self.spec_with(move |agent| {
            Spec::standard(&verify, agent)
                .after("verify", "metric", &lines)
                .tail(&format!("[stop]\nmax_experiments = {max_experiments}\n"))
        })
    }

    /// The spec, made from the path of the agent's script (for `Spec::standard`/`fake_agent`).
    pub(crate) fn spec_with(mut self, spec: impl FnOnce(&Path) -> Spec + 'static) -> RepoBuilder {
        self.spec = Box::new(spec);
        self
    }

    pub(crate) fn create(self) -> Repo {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("project");
        for (path, content) in &self.files {
            let p = dir.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, content).unwrap();
        }
        let script_path = tmp.path().join("agent-script");
        std::fs::write(&script_path, &self.script).unwrap();
        (self.spec)(&script_path).write(&dir);
        git(&dir, &["init", "-q", "-b", "main"]);
        git(&dir, &["add", "-A"]);
        git(&dir, &["commit", "-q", "-m", "init"]);
        Repo {
            _tmp: tmp,
            dir,
            script: script_path,
        }
    }
}
