//! The `command` proposer: any shell command, run in the candidate's worktree in its own
//! process group under `[agent] timeout`, given the path of a prompt file hone wrote
//! (`{prompt_file}` in the command, and `HONE_PROMPT` in its environment).

use std::time::Duration;

use super::{prompt, Proposal, ProposeContext, ProposeError, Proposer};
use crate::exec::{self, ExecRequest, Exit};

/// Runs a user-given command, or an agent CLI preset, as the proposer.
#[derive(Default)]
pub struct CommandProposer {
    preset: Option<Preset>,
}

/// Agent CLIs hone knows how to drive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// Claude Code: `claude -p --output-format json --permission-mode acceptEdits`. The
    /// accept-edits mode (not the skip-permissions flag, which Claude Code refuses as root)
    /// lets it edit files without prompts; its JSON result carries `is_error`, `result`,
    /// `total_cost_usd` and `usage`.
    Claude,
    /// Codex CLI: `codex exec --json --full-auto -` (prompt on stdin); its JSONL events carry
    /// token usage per turn (`turn.completed`) and failures (`turn.failed`, `error`), no cost.
    Codex,
    /// aider: `aider --message-file <prompt> --yes-always ... -- <editable files>`; it prints
    /// `Tokens: ... Cost: $x message, $y session.` after every reply. It neither commits nor
    /// writes its history files into the worktree (they go to the run's log directory).
    Aider,
    /// Gemini CLI: `gemini --output-format json --approval-mode auto_edit --skip-trust -p ...`
    /// with the prompt on stdin; its one JSON object carries `response`, `stats` (tokens per
    /// model) and `error`. No cost.
    Gemini,
    /// opencode: `opencode run --format json` with the prompt on stdin; its JSON events carry
    /// `step_finish` parts with `cost` and `tokens`, and `error` events.
    OpenCode,
}

/// What `opencode run` may do when the user has not set `OPENCODE_PERMISSION`: edit files in
/// the project, nothing else that would need a question (a question in `run` is refused).
const OPENCODE_PERMISSION: &str =
    r#"{"edit":"allow","bash":"deny","webfetch":"deny","external_directory":"deny"}"#;

/// The instruction given to Gemini CLI's `-p`: the prompt itself arrives on stdin, and
/// `-p` text is appended to it.
const GEMINI_P: &str = "Do the task described above.";

impl Preset {
    /// The program on PATH and how to install it.
    pub fn program(self) -> (&'static str, &'static str) {
        match self {
            Preset::Claude => ("claude", "`npm install -g @anthropic-ai/claude-code`"),
            Preset::Codex => ("codex", "`npm install -g @openai/codex`"),
            Preset::Aider => (
                "aider",
                "`python -m pip install aider-install && aider-install` (or `pip install aider-chat`)",
            ),
            Preset::Gemini => ("gemini", "`npm install -g @google/gemini-cli`"),
            Preset::OpenCode => ("opencode", "`npm install -g opencode-ai`"),
        }
    }

    /// The preset for an `[agent] kind`, if it is one.
    pub fn of(kind: crate::spec::AgentKind) -> Option<Preset> {
        use crate::spec::AgentKind;
        match kind {
            AgentKind::Claude => Some(Preset::Claude),
            AgentKind::Codex => Some(Preset::Codex),
            AgentKind::Aider => Some(Preset::Aider),
            AgentKind::Gemini => Some(Preset::Gemini),
            AgentKind::OpenCode => Some(Preset::OpenCode),
            _ => None,
        }
    }

    /// Prefixes of the environment variables the tool reads (its keys, base URLs and
    /// configuration). hone's own secrets (the reviewer's API key) only reach the tool when
    /// they are among these.
    pub fn env_prefixes(self) -> &'static [&'static str] {
        match self {
            Preset::Claude => &["ANTHROPIC_", "CLAUDE_", "AWS_", "CLOUD_ML_", "VERTEX_"],
            Preset::Codex => &["OPENAI_", "CODEX_"],
            Preset::Gemini => &["GEMINI_", "GOOGLE_"],
            // Both talk to many providers through their own names.
            Preset::Aider | Preset::OpenCode => &[
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
            ],
        }
    }

    /// Variables hone sets for the tool (unless the user set them): no questions, no
    /// self-updates.
    pub fn fixed_env(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Preset::Gemini => &[("GEMINI_CLI_TRUST_WORKSPACE", "true")],
            Preset::OpenCode => &[
                ("OPENCODE_PERMISSION", OPENCODE_PERMISSION),
                ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
            ],
            _ => &[],
        }
    }

    /// Reads the tool's own account of its run from its output.
    pub fn parse(self, lines: &[String]) -> Option<AgentReport> {
        match self {
            Preset::Claude => parse_claude(lines),
            Preset::Codex => parse_codex(lines),
            Preset::Aider => parse_aider(lines),
            Preset::Gemini => parse_gemini(lines),
            Preset::OpenCode => parse_opencode(lines),
        }
    }
}

impl CommandProposer {
    pub fn preset(p: Preset) -> CommandProposer {
        CommandProposer { preset: Some(p) }
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

/// The shell command line of a preset.
pub fn preset_command(preset: Preset, inv: &PresetInvocation<'_>) -> String {
    let q = shell_quote;
    let mut c = match preset {
        Preset::Claude => {
            String::from("claude -p --output-format json --permission-mode acceptEdits")
        }
        Preset::Codex => String::from("codex exec --json --full-auto"),
        Preset::Aider => format!(
            "aider --message-file {} --yes-always --no-auto-commits --no-dirty-commits --no-gitignore \
             --no-stream --no-pretty --no-fancy-input --no-check-update --analytics-disable --map-tokens 0 \
             --chat-history-file {} --input-history-file {}",
            q(inv.prompt),
            q(&format!("{}.aider.chat.md", inv.history)),
            q(&format!("{}.aider.input", inv.history)),
        ),
        Preset::Gemini => String::from(
            "gemini --output-format json --approval-mode auto_edit --skip-trust",
        ),
        Preset::OpenCode => String::from("opencode run --format json"),
    };
    if let Some(m) = inv.model {
        c.push_str(&format!(" --model {}", q(m)));
    }
    for a in inv.extra {
        c.push(' ');
        c.push_str(&q(a));
    }
    match preset {
        Preset::Codex => c.push_str(&format!(" - < {}", q(inv.prompt))),
        Preset::Aider => {
            c.push_str(" --");
            for f in inv.files {
                c.push(' ');
                c.push_str(&q(f));
            }
        }
        Preset::Gemini => c.push_str(&format!(" -p {} < {}", q(GEMINI_P), q(inv.prompt))),
        Preset::Claude | Preset::OpenCode => c.push_str(&format!(" < {}", q(inv.prompt))),
    }
    c
}

/// The most output kept for parsing a tool's own account of its run.
const MAX_REPORT_BYTES: usize = 1 << 20;

/// The agent's environment: what hone was given, less hone's own settings (`HONE_*`) and
/// less the API keys hone itself uses (the HTTP reviewer's) unless the tool reads that
/// variable too; plus the tool's fixed settings and the experiment.
fn agent_env(
    preset: Option<Preset>,
    ctx: &ProposeContext<'_>,
    prompt_path: &std::path::Path,
) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let own_secrets = hone_secret_vars(ctx.spec);
    let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> = std::env::vars_os()
        .filter(|(k, _)| passes_to_agent(&k.to_string_lossy(), preset, &own_secrets))
        .collect();
    if let Some(p) = preset {
        for (k, v) in p.fixed_env() {
            if std::env::var_os(k).is_none() {
                env.push(((*k).into(), (*v).into()));
            }
        }
    }
    env.push(("HONE_PROMPT".into(), prompt_path.as_os_str().to_owned()));
    env.push(("HONE_EXPERIMENT".into(), ctx.n.to_string().into()));
    env.push(("HONE_WORKTREE".into(), ctx.worktree.as_os_str().to_owned()));
    env.push(("HONE_JOB".into(), ctx.job.into()));
    env
}

/// May an inherited variable reach the agent? Not hone's own settings (`HONE_*`), and not a
/// key hone itself uses (`secrets`) unless the preset's tool reads that variable too.
fn passes_to_agent(name: &str, preset: Option<Preset>, secrets: &[String]) -> bool {
    let tool_reads =
        preset.is_some_and(|p| p.env_prefixes().iter().any(|pre| name.starts_with(pre)));
    !name.starts_with("HONE_") && (!secrets.iter().any(|s| s == name) || tool_reads)
}

/// The environment variables holding API keys hone itself uses (its HTTP proposer's and its
/// HTTP reviewer's).
pub fn hone_secret_vars(spec: &crate::spec::Spec) -> Vec<String> {
    let mut v: Vec<String> = spec
        .agent
        .llm
        .iter()
        .map(|l| l.api_key_env.clone())
        .collect();
    if let Some(l) = &spec.review.llm {
        v.push(l.api_key_env.clone());
    }
    // What hone's automation holds: the webhook secret, secret notification URLs, and the
    // GitHub token that `hone finalize --pr` uses. No agent or candidate needs them.
    v.push(spec.trigger.secret_env.clone());
    for n in &spec.notify {
        if let crate::spec::NotifyUrl::Env(name) = &n.url {
            v.push(name.clone());
        }
    }
    v.push("GITHUB_TOKEN".into());
    v
}

/// Reads at most `max` bytes of a regular file, refusing symlinks (an agent could point its
/// notes at a secret for hone to copy into every later prompt).
fn read_plain_file(path: &std::path::Path, max: usize) -> Option<String> {
    use std::io::Read;
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.file_type().is_file() {
        return None;
    }
    let mut buf = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(max as u64)
        .read_to_end(&mut buf)
        .ok()?;
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// Is `program` on PATH?
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
        .unwrap_or(false)
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
                report.tokens += ["input_tokens", "output_tokens"]
                    .iter()
                    .filter_map(|k| u[*k].as_u64())
                    .sum::<u64>();
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
                    report.tokens += aider_count(n).unwrap_or(0);
                }
            }
        }
        if let Some(i) = l.find("Cost:") {
            seen = true;
            if let Some(session) = l[i..]
                .split(',')
                .find(|p| p.contains("session"))
                .and_then(|p| p.trim().trim_start_matches('$').split_whitespace().next())
                .and_then(|n| n.trim_start_matches('$').parse::<f64>().ok())
            {
                report.cost_usd = session;
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
fn aider_count(s: &str) -> Option<u64> {
    let s = s.replace(',', "");
    match s.strip_suffix('k') {
        Some(k) => k.parse::<f64>().ok().map(|x| (x * 1000.0).round() as u64),
        None => s.parse().ok(),
    }
}

/// Reads Gemini CLI's `--output-format json` result: one (pretty-printed) JSON object with
/// `response`, `stats.models.<model>.tokens` and, when the run failed, `error.message`.
pub fn parse_gemini(lines: &[String]) -> Option<AgentReport> {
    // The object starts on a line of its own; try the last such start that parses.
    let v = (0..lines.len())
        .rev()
        .filter(|&i| lines[i].trim_start().starts_with('{'))
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
                    t["total"].as_u64().unwrap_or_else(|| {
                        ["prompt", "candidates", "thoughts", "tool"]
                            .iter()
                            .filter_map(|k| t[*k].as_u64())
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
                report.cost_usd += p["cost"].as_f64().unwrap_or(0.0);
                let t = &p["tokens"];
                report.tokens += ["input", "output", "reasoning"]
                    .iter()
                    .filter_map(|k| t[*k].as_u64())
                    .sum::<u64>()
                    + ["read", "write"]
                        .iter()
                        .filter_map(|k| t["cache"][*k].as_u64())
                        .sum::<u64>();
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
    .filter_map(|k| u[*k].as_u64())
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
        cost_usd: v["total_cost_usd"].as_f64().unwrap_or(0.0),
        tokens,
    })
}

/// Quotes a string for `sh`.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

impl Proposer for CommandProposer {
    fn name(&self) -> &str {
        "command"
    }

    fn propose(&mut self, ctx: &ProposeContext<'_>) -> Result<Proposal, ProposeError> {
        if let Some(p) = self.preset {
            let (program, install) = p.program();
            if ctx.spec.agent.command.is_none() && !on_path(program) {
                return Err(ProposeError::Fatal(format!(
                    "`{program}` is not on PATH: install it with {install}"
                )));
            }
        }
        let fatal = |what: &str, e: std::io::Error| ProposeError::Fatal(format!("{what}: {e}"));
        let prompts = ctx.run_dir.join("prompts");
        let logs = ctx.run_dir.join("logs");
        std::fs::create_dir_all(&prompts)
            .map_err(|e| fatal("cannot create the prompts directory", e))?;
        std::fs::create_dir_all(&logs).map_err(|e| fatal("cannot create the logs directory", e))?;
        let prompt_path = prompts.join(format!("{}.md", ctx.n));
        let prompt_str = prompt_path.to_string_lossy().into_owned();
        let command = match (self.preset, ctx.spec.agent.command.as_deref()) {
            (_, Some(t)) => t.replace("{prompt_file}", &shell_quote(&prompt_str)),
            (Some(p), None) => {
                let files = if p == Preset::Aider {
                    super::editable_files(ctx)?
                } else {
                    Vec::new()
                };
                let history = logs.join(ctx.n.to_string()).to_string_lossy().into_owned();
                preset_command(
                    p,
                    &PresetInvocation {
                        model: ctx.spec.agent.model.as_deref(),
                        extra: &ctx.spec.agent.extra_args,
                        prompt: &prompt_str,
                        files: &files,
                        history: &history,
                    },
                )
            }
            (None, None) => {
                return Err(ProposeError::Fatal(
                    "[agent] kind = \"command\" needs `command`".into(),
                ))
            }
        };
        std::fs::write(&prompt_path, prompt::build(ctx)?)
            .map_err(|e| fatal("cannot write the prompt", e))?;

        let env = agent_env(self.preset, ctx, &prompt_path);
        let log_path = logs.join(format!("{}.agent.log", ctx.n));
        let req = ExecRequest {
            command,
            cwd: ctx.worktree.to_path_buf(),
            env,
            timeout: Some(ctx.spec.agent.timeout),
            kill_grace: ctx.spec.verify.kill_grace,
            drain_timeout: Duration::from_secs(2),
            log_path: log_path.clone(),
            max_log_bytes: ctx.spec.verify.max_log_bytes,
            limits: ctx.spec.sandbox.limits(),
            wrapper: ctx.wrapper.to_vec(),
        };
        // The notes so far, where the agent can read and extend them.
        let notes_rel = ctx.spec.loop_.notes.clone();
        let notes_path = ctx.worktree.join(&notes_rel);
        let kept_notes = std::fs::read_to_string(ctx.run_dir.join("notes.md")).unwrap_or_default();
        if let Some(dir) = notes_path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = std::fs::write(&notes_path, &kept_notes);
        // The agent is told to write `.hone/hypothesis.txt`; make sure it can.
        std::fs::create_dir_all(ctx.worktree.join(".hone"))
            .map_err(|e| fatal("cannot create .hone/ in the worktree", e))?;
        let running = exec::spawn(&req)
            .map_err(|e| ProposeError::Fatal(format!("cannot start the agent command: {e}")))?;
        (ctx.on_spawn)(running.pid(), running.start_time());
        let mut last_line = String::new();
        // The output kept for the tool's own account (Gemini CLI prints one pretty-printed
        // JSON object; aider prints a usage line per reply): bounded by bytes.
        let mut tail: std::collections::VecDeque<String> = std::collections::VecDeque::new();
        let mut tail_bytes = 0usize;
        let outcome = running
            .wait(
                &mut |line: &str| {
                    if !line.trim().is_empty() {
                        last_line = line.trim().to_string();
                        tail_bytes += line.len();
                        tail.push_back(line.to_string());
                        while tail_bytes > MAX_REPORT_BYTES {
                            match tail.pop_front() {
                                Some(l) => tail_bytes -= l.len(),
                                None => break,
                            }
                        }
                    }
                },
                ctx.cancel,
            )
            .map_err(|e| ProposeError::Fatal(format!("agent command failed: {e}")))?;
        // The tool's own account first: a failed run is paid for all the same, and its
        // message says more than its exit status.
        let report = self
            .preset
            .and_then(|p| p.parse(&tail.iter().cloned().collect::<Vec<_>>()));
        if let Some(r) = &report {
            ctx.add_spend(r.cost_usd, r.tokens);
            if let Some(e) = &r.error {
                return Err(ProposeError::Invalid(format!(
                    "the agent reported an error: {}",
                    prompt::sanitize(e, 300)
                )));
            }
            if let Some(res) = &r.result {
                last_line = res
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("")
                    .trim()
                    .to_string();
            }
        }
        let log = log_path.display();
        match outcome.exit {
            Exit::Code(0) => {}
            Exit::Code(c) => {
                return Err(ProposeError::Invalid(format!(
                    "agent exited with status {c} (log: {log})"
                )))
            }
            Exit::Signal(s) => {
                return Err(ProposeError::Invalid(format!(
                    "agent killed by signal {s} (log: {log})"
                )))
            }
            Exit::TimedOut => {
                return Err(ProposeError::Invalid(format!(
                    "agent timed out after {} (log: {log})",
                    crate::spec::format_duration(ctx.spec.agent.timeout)
                )))
            }
            Exit::Cancelled => return Err(ProposeError::Cancelled),
        }
        // Keep what the agent added to its notes (also per experiment, for `hone show`).
        if let Some(notes) = read_plain_file(&notes_path, 64 * 1024) {
            if notes != kept_notes {
                let _ = std::fs::write(ctx.run_dir.join("notes.md"), &notes);
                let _ = std::fs::create_dir_all(ctx.run_dir.join("notes"));
                let _ = std::fs::write(
                    ctx.run_dir.join("notes").join(format!("{}.md", ctx.n)),
                    &notes,
                );
            }
        }
        let hyp_dir = ctx.worktree.join(".hone");
        let hypothesis = read_plain_file(&hyp_dir.join("hypothesis.txt"), 4096).and_then(|t| {
            t.lines()
                .find(|l| !l.trim().is_empty())
                .map(|l| l.trim().to_string())
        });
        let _ = std::fs::remove_dir_all(&hyp_dir);
        let description =
            prompt::sanitize(&hypothesis.unwrap_or(last_line), 300).replace('\n', " ");
        Ok(Proposal {
            description,
            config: None,
            cost_usd: 0.0,
            source: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(str::to_string).collect()
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
    fn agents_get_their_own_keys_but_not_hones() {
        let secrets = vec!["ANTHROPIC_API_KEY".to_string(), "REVIEW_KEY".to_string()];
        let claude = Some(Preset::Claude);
        assert!(
            passes_to_agent("ANTHROPIC_API_KEY", claude, &secrets),
            "the tool's own key"
        );
        assert!(!passes_to_agent("REVIEW_KEY", claude, &secrets));
        assert!(!passes_to_agent(
            "ANTHROPIC_API_KEY",
            Some(Preset::Codex),
            &secrets
        ));
        assert!(!passes_to_agent("ANTHROPIC_API_KEY", None, &secrets));
        assert!(passes_to_agent(
            "OPENAI_API_KEY",
            Some(Preset::Codex),
            &secrets
        ));
        assert!(passes_to_agent("HOME", Some(Preset::Gemini), &secrets));
        assert!(!passes_to_agent("HONE_TOKEN", claude, &[]));
    }

    #[test]
    fn automation_secrets_are_hones_own() {
        let text = "[loop]\neditable = [\"a.py\"]\n[verify]\ncommand = \"x\"\nmetric = \"m\"\n\
                    [[notify]]\nurl_env = \"SLACK_HOOK\"\n[trigger]\nsecret_env = \"MY_SECRET\"\n";
        let spec = crate::spec::Spec::parse(std::path::Path::new("hone.toml"), text).unwrap();
        let secrets = hone_secret_vars(&spec);
        for name in ["SLACK_HOOK", "MY_SECRET", "GITHUB_TOKEN"] {
            assert!(secrets.iter().any(|s| s == name), "{name}: {secrets:?}");
            assert!(!passes_to_agent(name, Some(Preset::Claude), &secrets));
        }
    }

    #[test]
    fn preset_command_lines() {
        let none: Vec<String> = Vec::new();
        let files = vec!["train.py".to_string(), "my model.py".to_string()];
        assert_eq!(
            preset_command(Preset::Aider, &inv(Some("sonnet"), &none, &files)),
            "aider --message-file '/p/3.md' --yes-always --no-auto-commits --no-dirty-commits \
             --no-gitignore --no-stream --no-pretty --no-fancy-input --no-check-update \
             --analytics-disable --map-tokens 0 --chat-history-file '/l/3.aider.chat.md' \
             --input-history-file '/l/3.aider.input' --model 'sonnet' -- 'train.py' 'my model.py'"
        );
        assert_eq!(
            preset_command(Preset::Gemini, &inv(None, &["--debug".to_string()], &none)),
            "gemini --output-format json --approval-mode auto_edit --skip-trust '--debug' \
             -p 'Do the task described above.' < '/p/3.md'"
        );
        assert_eq!(
            preset_command(
                Preset::OpenCode,
                &inv(Some("anthropic/claude-sonnet-4"), &none, &none)
            ),
            "opencode run --format json --model 'anthropic/claude-sonnet-4' < '/p/3.md'"
        );
    }

    #[test]
    fn aider_usage_lines_add_up_and_the_last_session_cost_wins() {
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
}
