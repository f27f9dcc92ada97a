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
}

impl Preset {
    /// The program on PATH and the package that provides it.
    pub fn program(self) -> (&'static str, &'static str) {
        match self {
            Preset::Claude => ("claude", "npm install -g @anthropic-ai/claude-code"),
            Preset::Codex => ("codex", "npm install -g @openai/codex"),
        }
    }
}

impl CommandProposer {
    pub fn preset(p: Preset) -> CommandProposer {
        CommandProposer { preset: Some(p) }
    }
}

/// The shell command line of a preset, reading the prompt from `prompt` on stdin.
pub fn preset_command(
    preset: Preset,
    model: Option<&str>,
    extra: &[String],
    prompt: &str,
) -> String {
    let mut c = match preset {
        Preset::Claude => {
            String::from("claude -p --output-format json --permission-mode acceptEdits")
        }
        Preset::Codex => String::from("codex exec --json --full-auto"),
    };
    if let Some(m) = model {
        c.push_str(&format!(" --model {}", shell_quote(m)));
    }
    for a in extra {
        c.push(' ');
        c.push_str(&shell_quote(a));
    }
    if preset == Preset::Codex {
        c.push_str(" -"); // read the prompt from stdin
    }
    c.push_str(&format!(" < {}", shell_quote(prompt)));
    c
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

/// Reads Codex's JSONL events: tokens from every `turn.completed`, the last agent message as
/// the result, and `turn.failed` / `error` as an error.
pub fn parse_codex(lines: &[String]) -> Option<AgentReport> {
    let events: Vec<serde_json::Value> = lines
        .iter()
        .filter(|l| l.trim_start().starts_with('{'))
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|v: &serde_json::Value| v["type"].is_string())
        .collect();
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
            let (program, package) = p.program();
            if ctx.spec.agent.command.is_none() && !on_path(program) {
                return Err(ProposeError::Fatal(format!(
                    "`{program}` is not on PATH: install it with `{package}`"
                )));
            }
        }
        let template = match (self.preset, ctx.spec.agent.command.as_deref()) {
            (_, Some(t)) => t.to_string(),
            (Some(p), None) => preset_command(
                p,
                ctx.spec.agent.model.as_deref(),
                &ctx.spec.agent.extra_args,
                "{prompt_file_raw}",
            ),
            (None, None) => {
                return Err(ProposeError::Fatal(
                    "[agent] kind = \"command\" needs `command`".into(),
                ))
            }
        };
        let fatal = |what: &str, e: std::io::Error| ProposeError::Fatal(format!("{what}: {e}"));
        let prompts = ctx.run_dir.join("prompts");
        let logs = ctx.run_dir.join("logs");
        std::fs::create_dir_all(&prompts)
            .map_err(|e| fatal("cannot create the prompts directory", e))?;
        std::fs::create_dir_all(&logs).map_err(|e| fatal("cannot create the logs directory", e))?;
        let prompt_path = prompts.join(format!("{}.md", ctx.n));
        std::fs::write(&prompt_path, prompt::build(ctx)?)
            .map_err(|e| fatal("cannot write the prompt", e))?;
        let prompt_str = prompt_path.to_string_lossy().into_owned();
        let command = template
            .replace("'{prompt_file_raw}'", &shell_quote(&prompt_str))
            .replace("{prompt_file}", &shell_quote(&prompt_str));

        let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> = std::env::vars_os().collect();
        env.push(("HONE_PROMPT".into(), prompt_path.clone().into_os_string()));
        env.push(("HONE_EXPERIMENT".into(), ctx.n.to_string().into()));
        env.push(("HONE_WORKTREE".into(), ctx.worktree.as_os_str().to_owned()));
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
        let mut tail: std::collections::VecDeque<String> = std::collections::VecDeque::new();
        let outcome = running
            .wait(
                &mut |line: &str| {
                    if !line.trim().is_empty() {
                        last_line = line.trim().to_string();
                        tail.push_back(line.to_string());
                        if tail.len() > 50 {
                            tail.pop_front();
                        }
                    }
                },
                ctx.cancel,
            )
            .map_err(|e| ProposeError::Fatal(format!("agent command failed: {e}")))?;
        // The tool's own account first: a failed run is paid for all the same, and its
        // message says more than its exit status.
        let report = match self.preset {
            Some(Preset::Claude) => parse_claude(&tail.iter().cloned().collect::<Vec<_>>()),
            Some(Preset::Codex) => parse_codex(&tail.iter().cloned().collect::<Vec<_>>()),
            None => None,
        };
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
