//! Agent CLI presets as data: one [`PresetDef`] per tool hone knows how to drive (`[agent] kind
//! = "claude"`, `"codex"`, ...), with everything that differs between them in one place: the
//! program and how to install it, the environment it reads and the settings hone gives it, how
//! its command line is built, and how its own account of the run (cost, tokens, errors) is
//! read from its output. Adding a tool is one entry in [`PRESETS`] (and its output parser
//! below); `[agent] kind`, the spec's checks and the proposer pick it up from the table.
//!
//! This module sits at the bottom of the library (it imports nothing of hone's), so the spec
//! and the proposers can both use it.

#[path = "presets_account.rs"]
mod account;
#[path = "presets_cause.rs"]
mod cause;
pub use cause::{error_cause, lifts_after, ErrorCause};

/// One agent CLI.
pub struct PresetDef {
    /// Its `[agent] kind`.
    pub name: &'static str,
    /// Its name in messages.
    pub tool: &'static str,
    /// The program that must be on PATH.
    pub program: &'static str,
    /// How to install it (shown when it is missing).
    pub install: &'static str,
    /// Prefixes of the environment variables the tool reads (its keys, base URLs and
    /// configuration). hone's own secrets (the reviewer's API key) only reach the tool when
    /// they are among these.
    pub env_prefixes: &'static [&'static str],
    /// Variables hone sets for the tool (unless the user set them): no questions, no
    /// self-updates.
    pub fixed_env: &'static [(&'static str, &'static str)],
    /// The start of its command line, before `--model` and `[agent] extra_args`.
    pub head: fn(&PresetInvocation<'_>) -> String,
    /// The end of its command line, after them: how the prompt (and files) reach it.
    pub tail: fn(&PresetInvocation<'_>) -> String,
    /// Reads the tool's own account of its run from its output lines.
    pub parse: fn(&[String]) -> Option<AgentReport>,
    /// The `type` of the JSON objects that carry its account of what it spent (`"result"`);
    /// empty for a tool that prints no JSON objects of that shape. See
    /// [`Preset::doubtful_account`].
    pub account: &'static str,
    /// It reports money spent (else only tokens, and `max_cost_usd` cannot bound it).
    pub reports_cost: bool,
    /// It edits only the files named on its command line (the editable files are passed).
    pub takes_files: bool,
    /// Where it keeps its login, settings and sessions, relative to `$HOME`: under
    /// `[sandbox] kind = "bwrap"` no role may read them (the agent gets a copy, below).
    pub state: &'static [&'static str],
    /// Variables that name a directory of its state elsewhere (`CLAUDE_CONFIG_DIR`): hidden
    /// as its state is.
    pub state_env: &'static [&'static str],
    /// The files of its state it needs to run (its login and settings), relative to `$HOME`:
    /// under bwrap the agent runs with a private home of the run's (the tool writes there as
    /// it starts, and fails on a read-only one) that starts with a copy of these; nothing it
    /// writes there reaches the user's own home.
    pub seed: &'static [&'static str],
}

/// The agent CLIs, in the order `[agent] kind`'s error messages list them.
pub const PRESETS: &[PresetDef] = &[
    // Claude Code: `claude -p --output-format json --permission-mode acceptEdits`. The
    // accept-edits mode (not the skip-permissions flag, which Claude Code refuses as root)
    // lets it edit files without prompts; its JSON result carries `is_error`, `result`,
    // `total_cost_usd` and `usage`.
    PresetDef {
        name: "claude",
        tool: "Claude Code",
        program: "claude",
        install: "`npm install -g @anthropic-ai/claude-code`",
        env_prefixes: &["ANTHROPIC_", "CLAUDE_", "AWS_", "CLOUD_ML_", "VERTEX_"],
        fixed_env: &[],
        head: |_| "claude -p --output-format json --permission-mode acceptEdits".into(),
        tail: |inv| format!(" < {}", shell_quote(inv.prompt)),
        parse: parse_claude,
        account: "result",
        reports_cost: true,
        takes_files: false,
        state: &[
            ".claude",
            ".claude.json",
            ".claude.json.backup",
            ".config/claude",
        ],
        state_env: &["CLAUDE_CONFIG_DIR"],
        seed: &[
            ".claude.json",
            ".claude/.credentials.json",
            ".claude/settings.json",
            ".claude/CLAUDE.md",
        ],
    },
    // Codex CLI: `codex exec --json --full-auto -` (prompt on stdin); its JSONL events carry
    // token usage per turn (`turn.completed`) and failures (`turn.failed`, `error`), no cost.
    PresetDef {
        name: "codex",
        tool: "Codex",
        program: "codex",
        install: "`npm install -g @openai/codex`",
        env_prefixes: &["OPENAI_", "CODEX_"],
        fixed_env: &[],
        head: |_| "codex exec --json --full-auto".into(),
        tail: |inv| format!(" - < {}", shell_quote(inv.prompt)),
        parse: parse_codex,
        account: "turn.completed",
        reports_cost: false,
        takes_files: false,
        state: &[".codex"],
        state_env: &["CODEX_HOME"],
        seed: &[".codex/auth.json", ".codex/config.toml", ".codex/AGENTS.md"],
    },
    // aider: `aider --message-file <prompt> --yes-always ... -- <editable files>`; it prints
    // `Tokens: ... Cost: $x message, $y session.` after every reply. It neither commits nor
    // writes its history files into the worktree (they go to the run's log directory).
    PresetDef {
        name: "aider",
        tool: "aider",
        program: "aider",
        install:
            "`python -m pip install aider-install && aider-install` (or `pip install aider-chat`)",
        env_prefixes: MANY_PROVIDERS,
        fixed_env: &[],
        head: |inv| {
            // Wide lines: with no terminal, aider's printer wraps at 80 columns, and a usage
            // line with a cache figure is longer (its `$x session` went to a line of its own).
            format!(
                "COLUMNS=100000 aider --message-file {} --yes-always --no-auto-commits --no-dirty-commits --no-gitignore \
                 --no-stream --no-pretty --no-fancy-input --no-check-update --analytics-disable --map-tokens 0 \
                 --chat-history-file {} --input-history-file {}",
                shell_quote(inv.prompt),
                shell_quote(&format!("{}.aider.chat.md", inv.history)),
                shell_quote(&format!("{}.aider.input", inv.history)),
            )
        },
        tail: |inv| {
            let mut c = String::from(" --");
            for f in inv.files {
                c.push(' ');
                c.push_str(&shell_quote(f));
            }
            c
        },
        parse: parse_aider,
        account: "",
        reports_cost: true,
        takes_files: true,
        state: &[".aider", ".aider.conf.yml"],
        state_env: &[],
        seed: &[".aider.conf.yml", ".aider/oauth-keys.env"],
    },
    // Gemini CLI: `gemini --output-format json --approval-mode auto_edit --skip-trust -p ...`
    // with the prompt on stdin; its one JSON object carries `response`, `stats` (tokens per
    // model) and `error`. No cost.
    PresetDef {
        name: "gemini",
        tool: "Gemini CLI",
        program: "gemini",
        install: "`npm install -g @google/gemini-cli`",
        env_prefixes: &["GEMINI_", "GOOGLE_"],
        fixed_env: &[("GEMINI_CLI_TRUST_WORKSPACE", "true")],
        head: |_| "gemini --output-format json --approval-mode auto_edit --skip-trust".into(),
        tail: |inv| {
            format!(
                " -p {} < {}",
                shell_quote(GEMINI_P),
                shell_quote(inv.prompt)
            )
        },
        parse: parse_gemini,
        account: "",
        reports_cost: false,
        takes_files: false,
        state: &[".gemini"],
        state_env: &[],
        seed: &[
            ".gemini/settings.json",
            ".gemini/oauth_creds.json",
            ".gemini/google_accounts.json",
            ".gemini/.env",
            ".gemini/GEMINI.md",
        ],
    },
    // opencode: `opencode run --format json` with the prompt on stdin; its JSON events carry
    // `step_finish` parts with `cost` and `tokens`, and `error` events.
    PresetDef {
        name: "opencode",
        tool: "opencode",
        program: "opencode",
        install: "`npm install -g opencode-ai`",
        env_prefixes: MANY_PROVIDERS,
        fixed_env: &[
            ("OPENCODE_PERMISSION", OPENCODE_PERMISSION),
            ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
        ],
        head: |_| "opencode run --format json".into(),
        tail: |inv| format!(" < {}", shell_quote(inv.prompt)),
        parse: parse_opencode,
        account: "step_finish",
        reports_cost: true,
        takes_files: false,
        state_env: &[],
        state: &[
            ".local/share/opencode",
            ".local/state/opencode",
            ".config/opencode",
            ".cache/opencode",
        ],
        seed: &[
            ".local/share/opencode/auth.json",
            ".config/opencode/opencode.json",
            ".config/opencode/opencode.jsonc",
        ],
    },
];

/// What aider and opencode read: both talk to many providers through their own names.
const MANY_PROVIDERS: &[&str] = &[
    "AIDER_",
    "OPENCODE_",
    "OPENAI_",
    "ANTHROPIC_",
    "GEMINI_",
    "GOOGLE_",
    "DEEPSEEK_",
    "OPENROUTER_",
    "GROQ_",
    "MISTRAL_",
    "XAI_",
    "AZURE_",
    "AWS_",
    "OLLAMA_",
];

/// What `opencode run` may do when the user has not set `OPENCODE_PERMISSION`: edit files in
/// the project, nothing else that would need a question (a question in `run` is refused).
const OPENCODE_PERMISSION: &str =
    r#"{"edit":"allow","bash":"deny","webfetch":"deny","external_directory":"deny"}"#;

/// The instruction given to Gemini CLI's `-p`: the prompt itself arrives on stdin, and
/// `-p` text is appended to it.
const GEMINI_P: &str = "Do the task described above.";

/// A handle on one entry of [`PRESETS`] (cheap to copy; equal when it names the same tool).
#[derive(Clone, Copy)]
pub struct Preset(&'static PresetDef);

impl PartialEq for Preset {
    fn eq(&self, other: &Preset) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for Preset {}

impl std::fmt::Debug for Preset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Preset({})", self.0.name)
    }
}

impl Preset {
    /// The preset whose `[agent] kind` is `name`.
    pub fn named(name: &str) -> Option<Preset> {
        PRESETS.iter().find(|p| p.name == name).map(Preset)
    }

    /// Every preset, in the table's order.
    pub fn all() -> impl Iterator<Item = Preset> {
        PRESETS.iter().map(Preset)
    }

    /// Its whole entry.
    pub fn def(self) -> &'static PresetDef {
        self.0
    }

    /// Its `[agent] kind`.
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// The program on PATH and how to install it.
    pub fn program(self) -> (&'static str, &'static str) {
        (self.0.program, self.0.install)
    }

    /// See [`PresetDef::env_prefixes`].
    pub fn env_prefixes(self) -> &'static [&'static str] {
        self.0.env_prefixes
    }

    /// Whether `name` holds one of the tool's credentials: a variable it reads (see
    /// [`PresetDef::env_prefixes`]) named like a key, token, secret or password. Not a general
    /// cloud account's (`AWS_*`), which a verifier may need to read its data. Code the model
    /// wrote must not get these: it could print them into a log or prompt, or spend on them
    /// outside every budget.
    pub fn holds_credential(self, name: &str) -> bool {
        let upper = name.to_ascii_uppercase();
        !upper.starts_with("AWS_")
            && self.env_prefixes().iter().any(|p| upper.starts_with(p))
            && ["KEY", "TOKEN", "SECRET", "PASSWORD"]
                .iter()
                .any(|w| upper.contains(w))
    }

    /// See [`PresetDef::fixed_env`].
    /// The tool's state paths that exist: those of [`PresetDef::state`] under `home`, and the
    /// directories its [`PresetDef::state_env`] variables name.
    pub fn state_paths(self, home: &std::path::Path) -> Vec<std::path::PathBuf> {
        let named = self
            .def()
            .state_env
            .iter()
            .filter_map(std::env::var_os)
            .map(std::path::PathBuf::from)
            .filter(|p| p.is_absolute());
        self.def()
            .state
            .iter()
            .map(|p| home.join(p))
            .chain(named)
            .filter(|p| p.exists())
            .collect()
    }

    /// Copies the tool's seed files (see [`PresetDef::seed`]) from `home` into `private`, a
    /// directory hone has just made (nothing in it but what this writes), each one that is
    /// a regular file (or a link to one), readable by its owner alone. Best effort: a file
    /// that cannot be copied is left out.
    pub fn seed_home(self, home: &std::path::Path, private: &std::path::Path) {
        use std::os::unix::fs::PermissionsExt as _;
        for rel in self.def().seed {
            let (from, to) = (home.join(rel), private.join(rel));
            let regular = std::fs::metadata(&from).is_ok_and(|m| m.is_file());
            // Nothing there, not even a link.
            if !regular || std::fs::symlink_metadata(&to).is_ok() {
                continue;
            }
            if let Some(dir) = to.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            if std::fs::copy(&from, &to).is_ok() {
                let _ = std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o600));
            }
        }
    }

    pub fn fixed_env(self) -> &'static [(&'static str, &'static str)] {
        self.0.fixed_env
    }

    /// Reads the tool's own account of its run from its output.
    pub fn parse(self, lines: &[String]) -> Option<AgentReport> {
        (self.0.parse)(lines)
    }

    /// Why its account in `lines` cannot be believed (something else wrote into its
    /// output), if it cannot.
    pub fn doubtful_account(self, lines: &[String]) -> Option<String> {
        account::doubtful(self.0, lines)
    }

    /// The largest of its accounts in `lines` that read, money and tokens each.
    pub fn largest_account(self, lines: &[String]) -> Option<(f64, u64)> {
        account::largest(self.0, lines)
    }
}

/// What a preset's command line is built from.
pub struct PresetInvocation<'a> {
    pub model: Option<&'a str>,
    pub extra: &'a [String],
    /// The prompt file.
    pub prompt: &'a str,
    /// The editable files (aider edits only the files it is given).
    pub files: &'a [String],
    /// Where aider keeps its chat and input history (never the worktree), without extension.
    pub history: &'a str,
}

/// The shell command line of a preset: its head, `--model`, the extra arguments, its tail.
pub fn preset_command(preset: Preset, inv: &PresetInvocation<'_>) -> String {
    let mut c = (preset.0.head)(inv);
    if let Some(m) = inv.model {
        c.push_str(&format!(" --model {}", shell_quote(m)));
    }
    for a in inv.extra {
        c.push(' ');
        c.push_str(&shell_quote(a));
    }
    c.push_str(&(preset.0.tail)(inv));
    c
}

/// Quotes a string for `sh`.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// What an agent CLI said about its own run.
#[derive(Debug, Default, PartialEq)]
pub struct AgentReport {
    pub error: Option<String>,
    pub result: Option<String>,
    pub cost_usd: f64,
    pub tokens: u64,
    /// It reported tokens and no money where money was its to report (aider with a model
    /// its price table lacks): under `max_cost_usd` the turn counts as unreported.
    pub no_cost: bool,
    /// Its account ended before the turn's usage (Codex: a turn that never completed, failed
    /// or crashed): what it spent is unreported, and charged as such.
    pub unfinished: bool,
    /// The unfinished turn did some work before it ended (Codex: an item completed in it); a
    /// turn turned away before any work spent nothing.
    pub worked: bool,
    /// It stopped at a limit of its own (Claude Code's `--max-turns`) rather than failing:
    /// what it changed is measured, whatever its exit status.
    pub stopped_at_limit: bool,
}

/// The JSON objects with a `type` among an agent's output lines (a JSONL event stream, with
/// whatever else the tool printed skipped).
fn json_events(lines: &[String]) -> Vec<serde_json::Value> {
    lines
        .iter()
        .filter(|l| l.trim_start().starts_with('{'))
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|v: &serde_json::Value| v["type"].is_string())
        .collect()
}

/// Reads Codex's JSONL events: tokens from every `turn.completed`, the last agent message as
/// the result, and `turn.failed` as an error, or an `error` no turn completed after.
pub fn parse_codex(lines: &[String]) -> Option<AgentReport> {
    let events = json_events(lines);
    if events.is_empty() {
        return None;
    }
    let mut report = AgentReport::default();
    // An `error` event is also a notice of a retry (`Reconnecting... 1/5`): it is the run's
    // error only when no turn completed after it.
    let mut notice: Option<String> = None;
    // Usage comes with `turn.completed` alone: a turn started and never completed (failed,
    // cut off, crashed) spent what it did unreported.
    report.unfinished = true;
    for e in &events {
        match e["type"].as_str().unwrap_or("") {
            "turn.started" => {
                report.unfinished = true;
                report.worked = false;
            }
            "item.completed" => {
                report.worked = true;
                if e["item"]["type"] == "agent_message" {
                    report.result = e["item"]["text"].as_str().map(str::to_string);
                }
            }
            "turn.completed" => {
                report.unfinished = false;
                notice = None;
                let u = &e["usage"];
                report.tokens = report.tokens.saturating_add(
                    ["input_tokens", "output_tokens"]
                        .iter()
                        .filter_map(|k| reported_tokens(u[*k].as_u64()))
                        .sum::<u64>(),
                );
            }
            "turn.failed" => {
                report.error = Some(
                    e["error"]["message"]
                        .as_str()
                        .unwrap_or("the turn failed")
                        .to_string(),
                );
            }
            "error" => {
                notice = Some(e["message"].as_str().unwrap_or("error").to_string());
            }
            _ => {}
        }
    }
    if report.error.is_none() {
        report.error = notice;
    }
    Some(report)
}

/// Reads aider's output: every reply ends with a usage line,
/// `Tokens: 2.1k sent, 1.0k cache hit, 345 received. Cost: $0.01 message, $0.02 session.`
/// (the token counts rounded as aider prints them). Tokens add up over the replies; the cost
/// is the last `session` figure. An API error (`litellm.*Error: ...`) that aider did not
/// retry past is the run's error.
pub fn parse_aider(lines: &[String]) -> Option<AgentReport> {
    let mut report = AgentReport::default();
    let (mut seen, mut cost_seen) = (false, false);
    let mut pending_error: Option<String> = None;
    let mut lines = lines.iter().peekable();
    while let Some(line) = lines.next() {
        // A usage line wrapped before its session figure goes on on the next line.
        let joined;
        let mut l = line.trim();
        if l.starts_with("Tokens:") && l.contains("Cost:") && !l.contains("session") {
            if let Some(next) = lines.next() {
                joined = format!("{l} {}", next.trim());
                l = &joined;
            }
        }
        if let Some(rest) = l.strip_prefix("Tokens:") {
            seen = true;
            pending_error = None;
            let counts = rest.split("Cost:").next().unwrap_or("");
            // Parts are separated by ", " (older versions print `1,234`).
            for part in counts.split(", ") {
                let part = part.trim().trim_end_matches('.');
                let mut words = part.split_whitespace();
                if let (Some(n), Some(_what)) = (words.next(), words.next()) {
                    let n = reported_tokens(aider_count(n)).unwrap_or(0);
                    report.tokens = report.tokens.saturating_add(n);
                }
            }
        }
        // aider's own usage lines only (`Tokens: ... Cost: ...`, or `Cost:` alone in older
        // versions): the model chooses text aider prints later (`Applied edit to <path>`),
        // and the session's cost only grows, so the largest figure is kept: a line the model
        // forged can raise it, never lower it.
        let usage = l.starts_with("Tokens:") || l.starts_with("Cost:");
        if let Some(i) = l.find("Cost:").filter(|_| usage) {
            seen = true;
            cost_seen = true;
            if let Some(session) = l[i..]
                .split(',')
                .find(|p| p.contains("session"))
                .and_then(|p| p.trim().trim_start_matches('$').split_whitespace().next())
                .and_then(|n| reported_cost(n.trim_start_matches('$').parse::<f64>().ok()))
            {
                report.cost_usd = report.cost_usd.max(session);
            }
        }
        if l.starts_with("litellm.") && l.contains("Error") {
            pending_error = Some(l.to_string());
        } else if l.starts_with("Retrying in") {
            pending_error = None;
        }
    }
    if let Some(e) = pending_error {
        report.error = Some(e);
        seen = true;
    }
    // Tokens with no cost line: aider knows no price for the model.
    report.no_cost = report.tokens > 0 && !cost_seen;
    seen.then_some(report)
}

/// `345`, `1.2k`, `12k`, `1,234` as aider prints token counts.
/// The most tokens one report of a model's use (an API's `usage`, an agent CLI's counts) is
/// taken to say: a trillion. A larger number is a lie or a bug, and sums of such numbers would
/// overflow hone's counters; capped, a run of millions of calls cannot.
pub const MAX_REPORTED_TOKENS: u64 = 1 << 40;

/// A reported token count as hone counts it (at most [`MAX_REPORTED_TOKENS`]).
pub fn reported_tokens(n: Option<u64>) -> Option<u64> {
    n.map(|n| n.min(MAX_REPORTED_TOKENS))
}

/// The most dollars one report of a model's cost is taken to say: a million. A larger one,
/// a negative one (it would be credit against `max_cost_usd`) or one that is not a number
/// (NaN compares false with every budget) is a lie or a bug, and is taken as unknown.
pub const MAX_REPORTED_USD: f64 = 1e6;

/// A reported cost as hone counts it: `None` unless a number from 0 to [`MAX_REPORTED_USD`].
pub fn reported_cost(usd: Option<f64>) -> Option<f64> {
    usd.filter(|c| c.is_finite() && (0.0..=MAX_REPORTED_USD).contains(c))
}

fn aider_count(s: &str) -> Option<u64> {
    let s = s.replace(',', "");
    match s.strip_suffix('k') {
        Some(k) => k.parse::<f64>().ok().map(|x| (x * 1000.0).round() as u64),
        None => s.parse().ok(),
    }
}

/// The tokens one Gemini CLI result object reports, summed over its models.
fn gemini_tokens(v: &serde_json::Value) -> u64 {
    v["stats"]["models"]
        .as_object()
        .map(|models| {
            models
                .values()
                .map(|m| {
                    let t = &m["tokens"];
                    reported_tokens(t["total"].as_u64()).unwrap_or_else(|| {
                        ["prompt", "candidates", "thoughts", "tool"]
                            .iter()
                            .filter_map(|k| reported_tokens(t[*k].as_u64()))
                            .sum()
                    })
                })
                .fold(0u64, u64::saturating_add)
        })
        .unwrap_or(0)
}

/// How many lines that open a JSON object, from the end, [`parse_gemini`] tries.
const GEMINI_STARTS: usize = 64;

/// Reads Gemini CLI's `--output-format json` result: one (pretty-printed) JSON object with
/// `response`, `stats.models.<model>.tokens` and, when the run failed, `error.message`. The
/// response and the error are the last object's; the tokens the most any object of the
/// output reports: anything else in the turn can print an object (a shell command writing
/// to the tool's output through `/proc`), which can raise the charge, never lower it.
pub fn parse_gemini(lines: &[String]) -> Option<AgentReport> {
    // The object starts on a line of its own; try the last few such starts (a parse reads
    // one value from there: trying every `{` line of a long output could take time that grows
    // with its square).
    let whole = lines.join("\n");
    let mut starts = Vec::with_capacity(lines.len());
    let mut at = 0;
    for l in lines {
        starts.push(at);
        at += l.len() + 1;
    }
    let objects: Vec<serde_json::Value> = (0..lines.len())
        .rev()
        .filter(|&i| lines[i].trim_start().starts_with('{'))
        .take(GEMINI_STARTS)
        .filter_map(|i| {
            serde_json::Deserializer::from_str(&whole[starts[i]..])
                .into_iter::<serde_json::Value>()
                .next()
                .and_then(|r| r.ok())
                .filter(|v| {
                    v.get("response").is_some()
                        || v.get("stats").is_some()
                        || v.get("error").is_some()
                })
        })
        .collect();
    let v = objects.first()?;
    let tokens = objects.iter().map(gemini_tokens).max().unwrap_or(0);
    let error = v.get("error").filter(|e| !e.is_null()).map(|e| {
        e["message"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| e.to_string())
    });
    Some(AgentReport {
        error,
        result: v["response"].as_str().map(str::to_string),
        cost_usd: 0.0,
        tokens,
        // Gemini CLI reports no money at all (`reports_cost`), which hone.toml's rules know.
        no_cost: false,
        unfinished: false,
        worked: false,
        stopped_at_limit: false,
    })
}

/// Reads opencode's `run --format json` events: cost and tokens from every `step_finish`
/// part, the last `text` part as the result, and `error` events as the error.
pub fn parse_opencode(lines: &[String]) -> Option<AgentReport> {
    let events = json_events(lines);
    if events.is_empty() {
        return None;
    }
    let mut report = AgentReport::default();
    for e in &events {
        match e["type"].as_str().unwrap_or("") {
            "step_finish" => {
                let p = &e["part"];
                report.cost_usd += reported_cost(p["cost"].as_f64()).unwrap_or(0.0);
                let t = &p["tokens"];
                report.tokens = report.tokens.saturating_add(
                    ["input", "output", "reasoning"]
                        .iter()
                        .filter_map(|k| reported_tokens(t[*k].as_u64()))
                        .sum::<u64>()
                        + ["read", "write"]
                            .iter()
                            .filter_map(|k| reported_tokens(t["cache"][*k].as_u64()))
                            .sum::<u64>(),
                );
            }
            "text" => {
                if let Some(t) = e["part"]["text"].as_str() {
                    report.result = Some(t.to_string());
                }
            }
            "error" => {
                let err = &e["error"];
                report.error = Some(
                    err["data"]["message"]
                        .as_str()
                        .or_else(|| err["message"].as_str())
                        .or_else(|| err["name"].as_str())
                        .unwrap_or("error")
                        .to_string(),
                );
            }
            _ => {}
        }
    }
    Some(report)
}

/// Reads Claude Code's JSON result: the last JSON object of type `result`, on a line of its
/// own or (with `--verbose`, or `verbose` in its settings) the last such element of the array
/// of every message it prints instead, on one line or over several.
pub fn parse_claude(lines: &[String]) -> Option<AgentReport> {
    let elements = |v: serde_json::Value| match v {
        serde_json::Value::Array(items) => items,
        other => vec![other],
    };
    let mut values: Vec<serde_json::Value> = lines
        .iter()
        .filter(|l| l.trim_start().starts_with(['{', '[']))
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .flat_map(elements)
        .collect();
    if !values.iter().any(|v| v["type"] == "result") {
        // One JSON document printed over several lines.
        let whole = lines.join("\n");
        let start = whole.find(['[', '{'])?;
        values = serde_json::from_str::<serde_json::Value>(&whole[start..])
            .map(elements)
            .unwrap_or_default();
    }
    let v = values.into_iter().rev().find(|v| v["type"] == "result")?;
    let u = &v["usage"];
    let tokens = [
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    ]
    .iter()
    .filter_map(|k| reported_tokens(u[*k].as_u64()))
    .sum();
    let result = v["result"].as_str().map(str::to_string).or_else(|| {
        // Error subtypes (error_max_turns, error_during_execution...) carry `errors` instead.
        v["errors"].as_array().map(|e| {
            e.iter()
                .filter_map(|x| x.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        })
    });
    // A turn that ran out of its `--max-turns` stopped, it did not fail: what it changed is
    // measured (it was paid for), and its description says why it stopped, after the model's
    // own words when it left some.
    let stopped_at_limit = v["subtype"] == "error_max_turns";
    let (error, result) = if stopped_at_limit {
        let note = format!(
            "stopped at its --max-turns limit ({} turns; raise it in [agent] extra_args)",
            v["num_turns"].as_u64().unwrap_or(0)
        );
        let said = v["result"].as_str().filter(|r| !r.trim().is_empty());
        (
            None,
            Some(said.map_or(note.clone(), |r| format!("{r}\n\n({note})"))),
        )
    } else {
        let failed = v["is_error"].as_bool() == Some(true)
            || v["subtype"].as_str().is_some_and(|s| s != "success");
        let error = failed.then(|| {
            result
                .clone()
                .or_else(|| v["subtype"].as_str().map(str::to_string))
                .unwrap_or_else(|| "unknown error".into())
        });
        (error, result)
    };
    let cost = reported_cost(v["total_cost_usd"].as_f64());
    Some(AgentReport {
        error,
        result,
        cost_usd: cost.unwrap_or(0.0),
        tokens,
        no_cost: cost.is_none(),
        unfinished: false,
        worked: false,
        stopped_at_limit,
    })
}

#[cfg(test)]
#[path = "presets_tests.rs"]
mod tests;
