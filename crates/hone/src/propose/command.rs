//! The `command` proposer: any shell command, run in the candidate's worktree in its own
//! process group under `[agent] timeout`, given the path of a prompt file hone wrote
//! (`{prompt_file}` in the command, and `HONE_PROMPT` in its environment).

use std::time::Duration;

use super::{prompt, Proposal, ProposeContext, ProposeError, Proposer};
use crate::exec::{self, ExecRequest, Exit};
pub use crate::presets::{
    preset_command, shell_quote, AgentReport, ErrorCause, Preset, PresetInvocation,
};

/// Runs a user-given command, or an agent CLI preset, as the proposer.
#[derive(Default)]
pub struct CommandProposer {
    preset: Option<Preset>,
    /// The rates (dollars, tokens a second) at which the run's turns spent, among those whose
    /// tool exited by itself and reported its spend (the earlier sessions' from their records,
    /// read at this session's first turn): what a turn cut off without its report, or before
    /// its full report, is charged at ([`TurnRates::rate_for`]).
    rates: TurnRates,
    /// Whether the earlier sessions' turns are in `rates` yet.
    seeded: bool,
}

/// The highest rate at which agent turns spent (dollars, tokens a second), kept apart for the
/// turns of at least [`TurnRates::LONG`]: a short turn (a prompt read and a one-line edit in a
/// few seconds) spends far faster than a long one, and a turn cut off after many minutes would
/// be charged many times what it can have spent at its rate.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TurnRates {
    long: Option<(f64, f64)>,
    any: Option<(f64, f64)>,
}

impl TurnRates {
    /// Turns at least this long set the rate of a cut-off turn as long, when there are any.
    pub const LONG: f64 = 30.0;

    /// One more turn that spent `(usd, tokens)` in `secs`.
    pub fn add(&mut self, (usd, tokens): (f64, f64), secs: f64) {
        let rate = (usd / secs.max(1e-3), tokens / secs.max(1e-3));
        let higher = |old: Option<(f64, f64)>| Some(old.map_or(rate, |o| max_rate(o, rate)));
        self.any = higher(self.any);
        if secs >= Self::LONG {
            self.long = higher(self.long);
        }
    }

    /// The rate a turn cut off after `secs` is charged at: for a long one, the highest of the
    /// long turns (else of any); for a short one, the highest of any (a short turn may have
    /// spent as fast as the fastest).
    pub fn rate_for(&self, secs: f64) -> Option<(f64, f64)> {
        if secs >= Self::LONG {
            self.long.or(self.any)
        } else {
            self.any
        }
    }

    /// The rates of the run's earlier experiments whose turn ended normally (not `invalid` nor
    /// `aborted`, the statuses of a turn charged by estimate) and spent anything. An upper
    /// estimate: a record's spend includes its review's.
    pub fn add_record(&mut self, e: &crate::store::ExperimentRecord) {
        use crate::store::Status;
        let spent = e.cost_usd > 0.0 || e.tokens > 0;
        if e.propose_ms == 0 || !spent || matches!(e.status(), Status::Invalid | Status::Aborted) {
            return;
        }
        self.add((e.cost_usd, e.tokens as f64), e.propose_ms as f64 / 1000.0);
    }
}

impl CommandProposer {
    pub fn preset(p: Preset) -> CommandProposer {
        CommandProposer {
            preset: Some(p),
            rates: TurnRates::default(),
            seeded: false,
        }
    }
}

/// The most output kept for parsing a tool's own account of its run.
const MAX_REPORT_BYTES: usize = 1 << 20;

/// The agent's environment: what hone was given, less hone's own settings (`HONE_*`) and
/// less the API keys hone itself uses (the HTTP reviewer's) unless the tool reads that
/// variable too, `PATH` with its absolute entries only (a `claude` an earlier candidate
/// committed to the worktree would otherwise run in the agent's place, with its API key);
/// plus the tool's fixed settings and the experiment.
fn agent_env(
    preset: Option<Preset>,
    ctx: &ProposeContext<'_>,
    prompt_path: &std::path::Path,
) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let own_secrets = hone_secret_vars(ctx.spec);
    let store = ctx.spec.exec.store_url.as_deref().unwrap_or("");
    let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> = std::env::vars_os()
        .filter(|(k, v)| {
            // Nor, under any name, the store's URL or its password, or the queue's key.
            passes_to_agent(&k.to_string_lossy(), preset, &own_secrets)
                && !crate::util::reveals_url(&v.to_string_lossy(), store)
                && !crate::queue::reveals_key(&v.to_string_lossy())
        })
        .map(crate::util::passed_on)
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
    // The store's URL, with its password: whoever holds it can write the records.
    v.extend(spec.exec.store_url_env.iter().cloned());
    v
}

/// Reads at most `max` bytes of the regular file `path` below `root`, refusing a symlink at
/// `path` or at any folder between `root` and it (an agent could point its notes, or the
/// `.hone/` folder that holds them, at a secret for hone to copy into every later prompt).
fn read_plain_file(root: &std::path::Path, path: &std::path::Path, max: usize) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let below = path.strip_prefix(root).ok()?;
    let mut at = root.to_path_buf();
    let mut parts = below.components().peekable();
    while let Some(part) = parts.next() {
        at.push(part);
        let meta = std::fs::symlink_metadata(&at).ok()?;
        let fine = if parts.peek().is_some() {
            meta.file_type().is_dir()
        } else {
            meta.file_type().is_file()
        };
        if !fine {
            return None;
        }
    }
    let mut buf = Vec::new();
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .ok()?
        .take(max as u64)
        .read_to_end(&mut buf)
        .ok()?;
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// Removes every symlink on the way from `root` to `path` (`path` included).
fn unlink_below(root: &std::path::Path, path: &std::path::Path) {
    let Ok(below) = path.strip_prefix(root) else {
        return;
    };
    let mut at = root.to_path_buf();
    for part in below.components() {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                let _ = std::fs::remove_file(&at);
            }
            Ok(_) => {}
            Err(_) => return,
        }
    }
}

/// Is `program` on PATH, in an absolute entry (where hone would start it from: see
/// [`crate::util::program_on_path`])?
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| crate::util::absolute_program(&p, program).is_some())
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
        let prompts = ctx.run_dir.join("prompts");
        let logs = ctx.run_dir.join("logs");
        std::fs::create_dir_all(&prompts)
            .map_err(|e| fatal("cannot create the prompts directory", e))?;
        std::fs::create_dir_all(&logs).map_err(|e| fatal("cannot create the logs directory", e))?;
        let prompt_path = prompts.join(format!("{}.md", ctx.n));
        let command = self.command(ctx, &logs, &prompt_path.to_string_lossy())?;
        std::fs::write(&prompt_path, prompt::build(ctx)?)
            .map_err(|e| fatal("cannot write the prompt", e))?;

        let env = agent_env(self.preset, ctx, &prompt_path);
        let log_path = logs.join(format!("{}.agent.log", ctx.n));
        // Worked out once: whether a timeout was max_time's depends on the limit the turn had.
        let limit = turn_limit(ctx);
        let req = ExecRequest {
            command,
            cwd: ctx.worktree.to_path_buf(),
            env,
            timeout: Some(limit),
            kill_grace: ctx.spec.verify.kill_grace,
            drain_timeout: Duration::from_secs(2),
            log_path: log_path.clone(),
            max_log_bytes: ctx.spec.verify.max_log_bytes,
            limits: ctx.spec.sandbox.limits(),
            wrapper: ctx.wrapper.to_vec(),
        };
        let (notes_path, kept_notes) = seed_notes(ctx)?;
        let (outcome, mut last_line, tail) = run_agent(ctx, &req)?;
        // The tool's own account first: a failed run is paid for all the same, and its
        // message says more than its exit status.
        let account = self.account(&tail.iter().cloned().collect::<Vec<_>>(), &outcome.exit);
        if account.doubt.is_some() {
            last_line = "(the tool's own account of the turn could not be believed)".into();
        }
        let report = account.report.as_ref();
        let cut_by_max_time = limit < ctx.spec.agent.timeout;
        // The tool's reported error decides only when the tool exited by itself (a turn cut
        // off at its timeout or by the user ends as such, below).
        let exited = matches!(outcome.exit, Exit::Code(_));
        let reported = report.and_then(|r| r.error.as_deref()).filter(|_| exited);
        let charged = self.charge_turn(
            ctx,
            (&account, reported),
            (&outcome, cut_by_max_time),
            &log_path,
        )?;
        // An estimate is said at the end of the turn's log (`hone show` names it), whatever
        // becomes of the turn (a killed one's record says only that it was interrupted).
        if let Some(note) = &charged {
            append_note(&log_path, note);
        }
        if let Some(e) = reported {
            describe_failed_turn(ctx);
            return Err(with_charge(reported_error(e), charged.as_deref()));
        }
        if let Some(res) = report.and_then(|r| r.result.as_ref()) {
            last_line = summary_line(res);
        }
        // A tool that stopped at a limit of its own exits non-zero: its edit is measured.
        let stopped = report.is_some_and(|r| r.stopped_at_limit) && exited;
        let exit = if stopped { Exit::Code(0) } else { outcome.exit };
        exit_error(ctx, (exit, cut_by_max_time), &log_path).map_err(|e| {
            describe_failed_turn(ctx);
            with_charge(e, charged.as_deref())
        })?;
        keep_notes(ctx, &notes_path, &kept_notes);
        let hypothesis = take_hypothesis(ctx);
        let description =
            prompt::sanitize(&hypothesis.unwrap_or(last_line), 300).replace('\n', " ");
        // A turn that ended well but printed no usable account was charged an estimate: said
        // now too, not in its description (commit messages, prompts and the outer loop read
        // that).
        if let Some(note) = &charged {
            (ctx.note)(note);
        }
        Ok(Proposal {
            description,
            config: None,
            cost_usd: 0.0,
            source: None,
            // Another process wrote in the worktree: git lists what it holds.
            in_place: false,
        })
    }
}

/// The line of an agent's final answer that says what it did, for its description: the
/// first that is neither an introduction (`Here is what I changed:`), a heading or an
/// exclamation of two words or fewer (`## Summary`, `Done!`), code in fences, nor a pleasantry
/// (`Let me know if...`), its Markdown marks taken off; else its last line.
fn summary_line(answer: &str) -> String {
    const CHATTER: &[&str] = &[
        "let me know",
        "feel free",
        "hope this helps",
        "if you'd like",
        "if you would like",
        "if you want",
        "would you like",
        "happy to help",
    ];
    // What stands between code fences is code, not words.
    let mut in_code = false;
    let lines: Vec<String> = answer
        .lines()
        .filter(|l| {
            let fence = l.trim_start().starts_with("```");
            in_code ^= fence;
            !fence && !in_code
        })
        .map(|l| {
            l.trim()
                .trim_start_matches(['#', '-', '*', '>', ' '])
                .replace("**", "")
                .replace('`', "")
                .trim()
                .to_string()
        })
        .filter(|l| !l.is_empty())
        .collect();
    let said = lines.iter().find(|l| {
        let lower = l.to_lowercase();
        !l.ends_with(':')
            && l.split_whitespace().count() > 2
            && !CHATTER.iter().any(|c| lower.contains(c))
    });
    said.or(lines.last()).cloned().unwrap_or_default()
}

/// The proposer's error for an error the agent CLI reported, by its cause: an outage waited
/// out, a set-up every turn would meet (the run stops), or this turn's failure.
fn reported_error(e: &str) -> ProposeError {
    let said = prompt::sanitize(e, 300);
    match crate::presets::error_cause(e) {
        ErrorCause::Unavailable => {
            ProposeError::Unavailable(format!("the agent reported an error: {said}"))
        }
        ErrorCause::Setup => ProposeError::Fatal(format!(
            "the agent reported an error every turn would meet: {said}. Fix its login, key, model or credit, then `hone run` resumes"
        )),
        ErrorCause::Turn => ProposeError::Invalid(format!("the agent reported an error: {said}")),
    }
}

/// Adds hone's `note` to the end of the agent's log at `path` (best effort: the note was said).
fn append_note(path: &std::path::Path, note: &str) {
    use std::io::Write as _;
    if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(path) {
        let _ = writeln!(f, "--- hone: {note} ---");
    }
}

/// `e` with what an estimated charge says (`note`) added to its reason, where it has one.
fn with_charge(e: ProposeError, note: Option<&str>) -> ProposeError {
    match (e, note) {
        (ProposeError::Invalid(why), Some(note)) => ProposeError::Invalid(format!("{why}; {note}")),
        (ProposeError::Unavailable(why), Some(note)) => {
            ProposeError::Unavailable(format!("{why}; {note}"))
        }
        (ProposeError::TimeUp(why), Some(note)) => ProposeError::TimeUp(format!("{why}; {note}")),
        (e, _) => e,
    }
}

/// A proposer error that stops the run, for a file hone could not make.
fn fatal(what: &str, e: std::io::Error) -> ProposeError {
    ProposeError::Fatal(format!("{what}: {e}"))
}

impl CommandProposer {
    /// The shell command to run: `[agent] command` with `{prompt_file}` filled in, or the
    /// preset's invocation.
    fn command(
        &self,
        ctx: &ProposeContext<'_>,
        logs: &std::path::Path,
        prompt_str: &str,
    ) -> Result<String, ProposeError> {
        Ok(match (self.preset, ctx.spec.agent.command.as_deref()) {
            (_, Some(t)) => t.replace("{prompt_file}", &shell_quote(prompt_str)),
            (Some(p), None) => {
                let files = if p.def().takes_files {
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
                        prompt: prompt_str,
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
        })
    }
}

/// Puts the notes so far in the worktree, where the agent can read and extend them, and makes
/// `.hone/` for the hypothesis the agent is told to write. Returns the notes' path and text.
fn seed_notes(ctx: &ProposeContext<'_>) -> Result<(std::path::PathBuf, String), ProposeError> {
    let notes_rel = ctx.spec.loop_.notes.clone();
    let notes_path = ctx.worktree.join(&notes_rel);
    let kept_notes = std::fs::read_to_string(ctx.run_dir.join("notes.md")).unwrap_or_default();
    // A symlink on the way (a `.hone` a candidate committed as a link) would make hone write
    // outside the worktree: links there are removed first.
    unlink_below(ctx.worktree, &notes_path);
    unlink_below(ctx.worktree, &ctx.worktree.join(".hone"));
    if let Some(dir) = notes_path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::write(&notes_path, &kept_notes);
    // The agent is told to write `.hone/hypothesis.txt`; make sure it can.
    std::fs::create_dir_all(ctx.worktree.join(".hone"))
        .map_err(|e| fatal("cannot create .hone/ in the worktree", e))?;
    Ok((notes_path, kept_notes))
}

/// Runs the agent to its end: its outcome, its last non-blank line, and the tail of its output
/// kept for the tool's own account (Gemini CLI prints one pretty-printed JSON object; aider
/// prints a usage line per reply), bounded by bytes.
fn run_agent(
    ctx: &ProposeContext<'_>,
    req: &ExecRequest,
) -> Result<
    (
        exec::ExecOutcome,
        String,
        std::collections::VecDeque<String>,
    ),
    ProposeError,
> {
    let running = exec::spawn(req)
        .map_err(|e| ProposeError::Fatal(format!("cannot start the agent command: {e}")))?;
    (ctx.on_spawn)(running.pid(), running.start_time());
    let mut last_line = String::new();
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
    Ok((outcome, last_line, tail))
}

/// The experiment's end when the agent did not exit cleanly.
fn exit_error(
    ctx: &ProposeContext<'_>,
    (exit, cut_by_max_time): (Exit, bool),
    log_path: &std::path::Path,
) -> Result<(), ProposeError> {
    let log = log_path.display();
    match exit {
        Exit::Code(0) => {}
        Exit::Code(c) => {
            let hint = if read_only(log_path) {
                format!("; {READ_ONLY_HINT}")
            } else {
                String::new()
            };
            return Err(ProposeError::Invalid(format!(
                "agent exited with status {c} (log: {log}){hint}"
            )));
        }
        Exit::Signal(s) => {
            return Err(ProposeError::Invalid(format!(
                "agent killed by signal {s} (log: {log})"
            )))
        }
        Exit::TimedOut if cut_by_max_time => {
            return Err(ProposeError::TimeUp(format!(
                "max_time ran out while the agent worked: it was stopped (log: {log})"
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
    Ok(())
}

/// How long the agent's turn may last: `[agent] timeout`, cut to what is left before
/// `max_time` runs out (the turn's own timeout, then, is the run's).
fn turn_limit(ctx: &ProposeContext<'_>) -> Duration {
    let timeout = ctx.spec.agent.timeout;
    match ctx.time_up {
        Some(t) => timeout.min(t.saturating_duration_since(std::time::Instant::now())),
        None => timeout,
    }
}

/// Keeps what the agent added to its notes (also per experiment, for `hone show`).
fn keep_notes(ctx: &ProposeContext<'_>, notes_path: &std::path::Path, kept_notes: &str) {
    if let Some(notes) = read_plain_file(ctx.worktree, notes_path, 64 * 1024) {
        if notes != kept_notes {
            let _ = std::fs::write(ctx.run_dir.join("notes.md"), &notes);
            let _ = std::fs::create_dir_all(ctx.run_dir.join("notes"));
            let _ = std::fs::write(
                ctx.run_dir.join("notes").join(format!("{}.md", ctx.n)),
                &notes,
            );
        }
    }
}

/// A failed turn is described by the hypothesis the agent wrote, if it wrote one (what it
/// printed last says why it failed, which the record's reason holds).
fn describe_failed_turn(ctx: &ProposeContext<'_>) {
    if let Some(h) = take_hypothesis(ctx) {
        (ctx.describe)(&prompt::sanitize(&h, 300).replace('\n', " "));
    }
}

/// The first line of the agent's `.hone/hypothesis.txt`, and `.hone/` removed.
fn take_hypothesis(ctx: &ProposeContext<'_>) -> Option<String> {
    let hyp_dir = ctx.worktree.join(".hone");
    // A `.hone` the agent replaced by a symlink would make hone (outside every sandbox) read
    // a file of its choosing into the record: only a real directory is read.
    let real = std::fs::symlink_metadata(&hyp_dir).is_ok_and(|m| m.is_dir());
    let read = real.then(|| read_plain_file(ctx.worktree, &hyp_dir.join("hypothesis.txt"), 4096));
    let hypothesis = read.flatten().and_then(|t| {
        t.lines()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim().to_string())
    });
    // A `.hone` left behind (locked, say) is removed again before the verifier runs.
    let _ = crate::workspace::remove_any(&hyp_dir);
    hypothesis
}

#[path = "command_charge.rs"]
mod charge;
use charge::{max_rate, read_only, READ_ONLY_HINT};

#[cfg(test)]
#[path = "command_tests.rs"]
mod tests;
