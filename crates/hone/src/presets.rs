//! Agent CLI presets as data: one [`PresetDef`] per tool hone knows how to drive (`[agent] kind
//! = "claude"`, `"codex"`, ...), with everything that differs between them in one place: the
//! program and how to install it, the environment it reads and the settings hone gives it, how
//! its command line is built, and how its own account of the run (cost, tokens, errors) is
//! read from its output. Adding a tool is one entry in [`PRESETS`] (and its output parser
//! below); `[agent] kind`, the spec's checks and the proposer pick it up from the table.
//!
//! This module sits at the bottom of the library (it imports nothing of hone's), so the spec
//! and the proposers can both use it.

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
    /// It reports money spent (else only tokens, and `max_cost_usd` cannot bound it).
    pub reports_cost: bool,
    /// It edits only the files named on its command line (the editable files are passed).
    pub takes_files: bool,
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
        reports_cost: true,
        takes_files: false,
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
        reports_cost: false,
        takes_files: false,
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
            format!(
                "aider --message-file {} --yes-always --no-auto-commits --no-dirty-commits --no-gitignore \
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
        reports_cost: true,
        takes_files: true,
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
        reports_cost: false,
        takes_files: false,
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
        reports_cost: true,
        takes_files: false,
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
    pub fn fixed_env(self) -> &'static [(&'static str, &'static str)] {
        self.0.fixed_env
    }

    /// Reads the tool's own account of its run from its output.
    pub fn parse(self, lines: &[String]) -> Option<AgentReport> {
        (self.0.parse)(lines)
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
/// the result, and `turn.failed` / `error` as an error.
pub fn parse_codex(lines: &[String]) -> Option<AgentReport> {
    let events = json_events(lines);
    if events.is_empty() {
        return None;
    }
    let mut report = AgentReport::default();
    for e in &events {
        match e["type"].as_str().unwrap_or("") {
            "turn.completed" => {
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
                report.error = Some(e["message"].as_str().unwrap_or("error").to_string());
            }
            "item.completed" if e["item"]["type"] == "agent_message" => {
                report.result = e["item"]["text"].as_str().map(str::to_string);
            }
            _ => {}
        }
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
    let mut seen = false;
    let mut pending_error: Option<String> = None;
    for line in lines {
        let l = line.trim();
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

/// How many lines that open a JSON object, from the end, [`parse_gemini`] tries.
const GEMINI_STARTS: usize = 64;

/// Reads Gemini CLI's `--output-format json` result: one (pretty-printed) JSON object with
/// `response`, `stats.models.<model>.tokens` and, when the run failed, `error.message`.
pub fn parse_gemini(lines: &[String]) -> Option<AgentReport> {
    // The object starts on a line of its own; try the last such start that parses (of the
    // last few: each try reads to the end, so trying every `{` line of a long output would
    // take time that grows with its square).
    let v = (0..lines.len())
        .rev()
        .filter(|&i| lines[i].trim_start().starts_with('{'))
        .take(GEMINI_STARTS)
        .find_map(|i| {
            let text = lines[i..].join("\n");
            serde_json::Deserializer::from_str(&text)
                .into_iter::<serde_json::Value>()
                .next()
                .and_then(|r| r.ok())
                .filter(|v| {
                    v.get("response").is_some()
                        || v.get("stats").is_some()
                        || v.get("error").is_some()
                })
        })?;
    let tokens = v["stats"]["models"]
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
                .sum()
        })
        .unwrap_or(0);
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

/// Reads Claude Code's JSON result (the last JSON line of type `result`).
pub fn parse_claude(lines: &[String]) -> Option<AgentReport> {
    let v: serde_json::Value = lines
        .iter()
        .rev()
        .filter(|l| l.trim_start().starts_with('{'))
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "result")?;
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
    let error = (v["is_error"].as_bool() == Some(true)
        || v["subtype"].as_str().is_some_and(|s| s != "success"))
    .then(|| {
        result
            .clone()
            .or_else(|| v["subtype"].as_str().map(str::to_string))
            .unwrap_or_else(|| "unknown error".into())
    });
    Some(AgentReport {
        error,
        result,
        cost_usd: reported_cost(v["total_cost_usd"].as_f64()).unwrap_or(0.0),
        tokens,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preset(name: &str) -> Preset {
        Preset::named(name).unwrap()
    }

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(str::to_string).collect()
    }

    #[test]
    fn a_tools_credentials_are_its_keys_and_tokens_not_its_settings_or_cloud_accounts() {
        let claude = preset("claude");
        for name in [
            "ANTHROPIC_API_KEY",
            "CLAUDE_CODE_OAUTH_TOKEN",
            "ANTHROPIC_AUTH_TOKEN",
        ] {
            assert!(claude.holds_credential(name), "{name}");
        }
        for name in [
            "ANTHROPIC_BASE_URL",
            "AWS_SECRET_ACCESS_KEY",
            "OPENAI_API_KEY",
            "HOME",
        ] {
            assert!(!claude.holds_credential(name), "{name}");
        }
        assert!(preset("codex").holds_credential("OPENAI_API_KEY"));
        assert!(preset("gemini").holds_credential("GEMINI_API_KEY"));
        assert!(preset("aider").holds_credential("OPENROUTER_API_KEY"));
        assert!(!preset("aider").holds_credential("OPENAI_API_BASE"));
    }

    fn inv<'a>(
        model: Option<&'a str>,
        extra: &'a [String],
        files: &'a [String],
    ) -> PresetInvocation<'a> {
        PresetInvocation {
            model,
            extra,
            prompt: "/p/3.md",
            files,
            history: "/l/3",
        }
    }

    #[test]
    fn a_cost_line_the_model_forged_after_aiders_cannot_lower_the_session_cost() {
        // aider prints `Applied edit to <path>` after its usage line, the path the model's:
        // a file named `Cost: 0, 0 session.md` read as a session cost of $0 (max_cost_usd
        // never stopped the run). Only aider's own usage lines count, the largest figure.
        let out = lines(
            "Tokens: 50k sent, 2.0k received. Cost: $5.00 message, $5.00 session.\n\
             Applied edit to params.py\n\
             Applied edit to Cost: 0, 0 session.md\n\
             params.py:3:1: Cost: $0.00 message, $0.00 session.\n\
             Cost: $0.00 message, $0.00 session.\n",
        );
        assert_eq!(parse_aider(&out).unwrap().cost_usd, 5.0);
    }

    #[test]
    fn aider_usage_lines_add_up_and_the_session_cost_is_the_largest() {
        let out = lines(
            "Aider v0.86.1\nMain model: gpt-4.1 with diff edit format\n\
             Tokens: 2.3k sent, 85 received. Cost: $0.0051 message, $0.0051 session.\n\
             Applied edit to train.py\n\
             Tokens: 12k sent, 1.5k cache write, 1,020 received.\nCost: $0.03 message, $0.04 session.\n",
        );
        let r = parse_aider(&out).unwrap();
        assert_eq!(r.tokens, 2300 + 85 + 12_000 + 1500 + 1020);
        assert_eq!(r.cost_usd, 0.04);
        assert_eq!(r.error, None);
        assert_eq!(parse_aider(&lines("nothing to see\n")), None);
    }

    /// What an agent CLI reports is untrusted: a cost that is not a number, negative (credit
    /// against the budget) or absurd is taken as unknown, and token counts past a trillion are
    /// capped, so nothing it prints can overflow hone's sums or switch its budget off.
    #[test]
    fn absurd_reports_are_unknown_or_capped() {
        let out = lines(
            "Tokens: 2.3k sent, 85 received. Cost: $0.01 message, $0.02 session.\n\
             Cost: $nan message, $nan session.\nCost: $-50 message, $-50 session.\n\
             Cost: $inf message, $1e300 session.\n",
        );
        assert_eq!(parse_aider(&out).unwrap().cost_usd, 0.02);
        assert_eq!(reported_cost(Some(f64::NAN)), None);
        assert_eq!(reported_cost(Some(-1.0)), None);
        assert_eq!(reported_cost(Some(2e6)), None);
        assert_eq!(reported_cost(Some(3.5)), Some(3.5));
        let huge = format!(
            "{{\"type\":\"turn.completed\",\"usage\":{{\"input_tokens\":{m},\"output_tokens\":{m}}}}}\n",
            m = u64::MAX
        );
        let codex = parse_codex(&lines(&huge.repeat(3))).unwrap();
        assert_eq!(codex.tokens, 6 * MAX_REPORTED_TOKENS);
    }

    #[test]
    fn aider_errors_count_unless_retried_past() {
        let failed = lines(
            "litellm.AuthenticationError: AnthropicException - invalid x-api-key\n\
             The API provider is not able to authenticate you. Check your API key.\n",
        );
        assert!(parse_aider(&failed)
            .unwrap()
            .error
            .unwrap()
            .contains("invalid x-api-key"));
        let retried = lines(
            "litellm.RateLimitError: rate limited\nRetrying in 0.2 seconds...\n\
             Tokens: 100 sent, 10 received. Cost: $0.00 message, $0.00 session.\n",
        );
        assert_eq!(parse_aider(&retried).unwrap().error, None);
    }

    #[test]
    fn gemini_json_with_stats_and_error() {
        let ok = lines(
            "Loaded cached credentials.\n{\n  \"response\": \"Done.\",\n  \"stats\": {\n    \"models\": {\n      \
             \"gemini-2.5-pro\": {\"api\": {\"totalRequests\": 2}, \"tokens\": {\"prompt\": 24939, \"candidates\": 20, \
             \"total\": 25113, \"cached\": 21263, \"thoughts\": 154, \"tool\": 0}},\n      \
             \"gemini-2.5-flash\": {\"tokens\": {\"prompt\": 100, \"candidates\": 10, \"thoughts\": 5}}\n    }\n  }\n}\n",
        );
        let r = parse_gemini(&ok).unwrap();
        assert_eq!(r.tokens, 25113 + 115);
        assert_eq!(r.result.as_deref(), Some("Done."));
        assert_eq!(r.error, None);
        let bad = lines("{\"error\": {\"type\": \"ApiError\", \"message\": \"Quota exceeded\", \"code\": 429}}\n");
        assert_eq!(
            parse_gemini(&bad).unwrap().error.as_deref(),
            Some("Quota exceeded")
        );
    }

    #[test]
    fn opencode_events_carry_cost_tokens_and_errors() {
        let out = lines(
            "{\"type\":\"step_start\",\"part\":{\"type\":\"step-start\"}}\n\
             {\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"Lowered it.\"}}\n\
             {\"type\":\"step_finish\",\"part\":{\"type\":\"step-finish\",\"reason\":\"stop\",\"cost\":0.25,\
             \"tokens\":{\"input\":1000,\"output\":50,\"reasoning\":5,\"cache\":{\"read\":300,\"write\":0}}}}\n\
             {\"type\":\"step_finish\",\"part\":{\"cost\":0.5,\"tokens\":{\"input\":10,\"output\":1}}}\n",
        );
        let r = parse_opencode(&out).unwrap();
        assert_eq!(r.cost_usd, 0.75);
        assert_eq!(r.tokens, 1355 + 11);
        assert_eq!(r.result.as_deref(), Some("Lowered it."));
        let err = lines("{\"type\":\"error\",\"error\":{\"name\":\"APIError\",\"data\":{\"message\":\"Invalid API key.\"}}}\n");
        assert_eq!(
            parse_opencode(&err).unwrap().error.as_deref(),
            Some("Invalid API key.")
        );
    }

    #[test]
    fn preset_command_lines() {
        let none: Vec<String> = Vec::new();
        let files = vec!["train.py".to_string(), "my model.py".to_string()];
        assert_eq!(
            preset_command(preset("aider"), &inv(Some("sonnet"), &none, &files)),
            "aider --message-file '/p/3.md' --yes-always --no-auto-commits --no-dirty-commits \
             --no-gitignore --no-stream --no-pretty --no-fancy-input --no-check-update \
             --analytics-disable --map-tokens 0 --chat-history-file '/l/3.aider.chat.md' \
             --input-history-file '/l/3.aider.input' --model 'sonnet' -- 'train.py' 'my model.py'"
        );
        assert_eq!(
            preset_command(
                preset("gemini"),
                &inv(None, &["--debug".to_string()], &none)
            ),
            "gemini --output-format json --approval-mode auto_edit --skip-trust '--debug' \
             -p 'Do the task described above.' < '/p/3.md'"
        );
        assert_eq!(
            preset_command(
                preset("opencode"),
                &inv(Some("anthropic/claude-sonnet-4"), &none, &none)
            ),
            "opencode run --format json --model 'anthropic/claude-sonnet-4' < '/p/3.md'"
        );
    }

    #[test]
    fn every_preset_is_named_once_and_found_by_its_name() {
        for p in Preset::all() {
            assert_eq!(Preset::named(p.name()), Some(p));
            assert_eq!(PRESETS.iter().filter(|d| d.name == p.name()).count(), 1);
        }
        assert_eq!(Preset::named("knobs"), None);
    }

    #[test]
    fn agent_kinds_keep_their_names_in_the_records() {
        use crate::spec::AgentKind;
        let names = AgentKind::names();
        assert_eq!(
            names,
            [
                "knobs",
                "command",
                "openai",
                "anthropic",
                "claude",
                "codex",
                "aider",
                "gemini",
                "opencode"
            ]
        );
        for name in names {
            let kind = AgentKind::parse(name).unwrap();
            assert_eq!(kind.as_str(), name);
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<AgentKind>(&json).unwrap(), kind);
            assert_eq!(kind.is_preset(), Preset::named(name).is_some());
        }
        assert!(serde_json::from_str::<AgentKind>("\"cursor\"").is_err());
    }
}
