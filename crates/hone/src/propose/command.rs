//! The `command` proposer: any shell command, run in the candidate's worktree in its own
//! process group under `[agent] timeout`, given the path of a prompt file hone wrote
//! (`{prompt_file}` in the command, and `HONE_PROMPT` in its environment).

use std::time::Duration;

use super::{prompt, Proposal, ProposeContext, ProposeError, Proposer};
use crate::exec::{self, ExecRequest, Exit};

/// Runs a user-given command as the proposer.
#[derive(Default)]
pub struct CommandProposer;

/// Quotes a string for `sh`.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

impl Proposer for CommandProposer {
    fn name(&self) -> &str {
        "command"
    }

    fn propose(&mut self, ctx: &ProposeContext<'_>) -> Result<Proposal, ProposeError> {
        let Some(template) = ctx.spec.agent.command.as_deref() else {
            return Err(ProposeError::Fatal(
                "[agent] kind = \"command\" needs `command`".into(),
            ));
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
        let command = template.replace("{prompt_file}", &shell_quote(&prompt_str));

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
        // The agent is told to write `.hone/hypothesis.txt`; make sure it can.
        std::fs::create_dir_all(ctx.worktree.join(".hone"))
            .map_err(|e| fatal("cannot create .hone/ in the worktree", e))?;
        let running = exec::spawn(&req)
            .map_err(|e| ProposeError::Fatal(format!("cannot start the agent command: {e}")))?;
        (ctx.on_spawn)(running.pid(), running.start_time());
        let mut last_line = String::new();
        let outcome = running
            .wait(
                &mut |line: &str| {
                    if !line.trim().is_empty() {
                        last_line = line.trim().to_string();
                    }
                },
                ctx.cancel,
            )
            .map_err(|e| ProposeError::Fatal(format!("agent command failed: {e}")))?;
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
        let hyp_dir = ctx.worktree.join(".hone");
        let hypothesis = std::fs::read_to_string(hyp_dir.join("hypothesis.txt"))
            .ok()
            .and_then(|t| {
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
        })
    }
}
