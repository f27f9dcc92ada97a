//! Terminal output: the live line per experiment, summaries, tables, and the Ctrl-C handler.

use std::io::IsTerminal;
use std::path::Path;

use hone::engine::{Event, Interrupt};
use hone::propose::knobs::{Domain, Knob};
use hone::report::{fmt_metric, Summary};
use hone::spec::format_duration;
use hone::store::{ExperimentRecord, RunRecord, Status};

mod log;
mod show;
mod status;
pub use log::{log_header, log_narrowings, log_row, LogFormat};
pub use show::{show, show_curve, show_narrowings, show_verified_again};
pub use status::status;

static INTERRUPT: Interrupt = Interrupt::new();

extern "C" fn on_sigint(signal: libc::c_int) {
    let n = INTERRUPT.request();
    let msg: &[u8] = match (n, signal) {
        (1, libc::SIGTERM) => {
            b"\nhone: SIGTERM: stopping after the current experiment (SIGTERM again, or Ctrl-C, to kill it now)\n"
        }
        (1, _) => b"\nhone: stopping after the current experiment (Ctrl-C again to kill it now)\n",
        _ => b"\nhone: killing the current experiment\n",
    };
    // SAFETY: write(2) is async-signal-safe; the buffer is valid for its length.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), msg.len());
    }
}

/// A hang-up (the SSH session or the terminal went away) is not a request to stop: the run
/// goes on without its terminal (what it prints is lost; `hone status` and `hone log` show it
/// later), as under `nohup`. A handler, not "ignore": the agents and verifiers hone starts get
/// the default back when they start.
extern "C" fn on_sighup(_signal: libc::c_int) {}

/// Routes SIGINT (and SIGTERM) to the engine's interrupt counter; a run outlives SIGHUP.
pub fn install_interrupt_handler() -> &'static Interrupt {
    // SAFETY: installing handlers that only touch an atomic and call write(2), or do nothing.
    unsafe {
        let handler = on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
        let hangup = on_sighup as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::signal(libc::SIGHUP, hangup);
    }
    &INTERRUPT
}

/// Prints one line per finished experiment, and a live progress line on a terminal
/// ([`crate::progress`]).
pub struct Printer {
    metric: String,
    progress: crate::progress::Progress,
    /// The `--spec` given, if any: hone's words name it (see [`naming_spec`]).
    spec_file: Option<std::path::PathBuf>,
}

/// hone's words with the spec file `--spec` named in place of `hone.toml`, and the commands
/// they suggest given `--spec` too (`hone --spec codex.toml run`, the name quoted for a shell
/// where it needs it), so that what they say to do works as written. Only `hone.toml` standing
/// as a word of its own is the spec file (not `cfg/hone.toml`, nor `hone.toml.codex`); text
/// that names `--spec` already is left as it is.
pub fn naming_spec<'a>(text: &'a str, spec_file: Option<&Path>) -> std::borrow::Cow<'a, str> {
    let Some(file) = spec_file else {
        return std::borrow::Cow::Borrowed(text);
    };
    if text.contains("--spec") || !(text.contains("hone.toml") || text.contains("`hone ")) {
        return std::borrow::Cow::Borrowed(text);
    }
    let name = file.display().to_string();
    let mut out = String::with_capacity(text.len() + 32);
    let mut rest = text;
    while let Some(at) = rest.find("hone.toml") {
        let before = rest[..at].chars().next_back();
        let after = &rest[at + "hone.toml".len()..];
        let part_of_path = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/');
        let glued_before = before.is_some_and(part_of_path);
        let mut next = after.chars();
        let glued_after = match next.next() {
            Some('.') => next.next().is_some_and(char::is_alphanumeric),
            Some(c) => c.is_alphanumeric() || matches!(c, '_' | '-' | '/'),
            None => false,
        };
        out.push_str(&rest[..at]);
        out.push_str(if glued_before || glued_after {
            "hone.toml"
        } else {
            &name
        });
        rest = after;
    }
    out.push_str(rest);
    let plain = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_./+-=:,@%".contains(c));
    let quoted = if plain {
        name.clone()
    } else {
        hone::propose::command::shell_quote(&name)
    };
    std::borrow::Cow::Owned(out.replace("`hone ", &format!("`hone --spec {quoted} ")))
}

/// Text an agent may have written (file names, reasons, descriptions, logs, diffs), made safe
/// to print on a terminal: every control character but newline and tab is shown escaped (`\x1b`
/// for ESC, `\u009b` for a C1 control or DEL), and so are the bidirectional overrides that
/// reorder what a line appears to say. The `\uXXXX` form keeps JSON output valid.
pub fn terminal_safe(s: &str) -> std::borrow::Cow<'_, str> {
    fn unsafe_char(c: char) -> bool {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    }
    if !s.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if !unsafe_char(c) {
            out.push(c);
        } else if (c as u32) < 0x20 {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push_str(&format!("\\u{:04x}", c as u32));
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `s` on one line: a line break shown as `\n`. For what the agent or its files named (a
/// description, a reason quoting a file name) printed inside a line of hone's own, where a
/// line break would start a line that reads as hone's (a forged experiment row).
pub fn one_line(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains('\n') {
        std::borrow::Cow::Owned(s.replace('\n', "\\n"))
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

fn status_word(s: Status) -> String {
    format!("{:<9}", s.as_str())
}

impl Printer {
    pub fn new(metric: String, spec_file: Option<&Path>) -> Printer {
        Printer {
            metric,
            progress: crate::progress::Progress::new(std::io::stderr().is_terminal()),
            spec_file: spec_file.map(Path::to_path_buf),
        }
    }

    pub fn clear_line(&mut self) {
        self.progress.clear();
    }

    /// The live line's phase: experiment `n` is `what`-ing.
    fn phase(&mut self, n: u64, what: &'static str, detail: Option<String>, log: Option<String>) {
        self.progress.update(|s| {
            s.phase = Some(crate::progress::Phase {
                n,
                what,
                detail,
                since: std::time::Instant::now(),
                log: log.map(std::path::PathBuf::from),
            });
        });
    }

    pub fn event(&mut self, ev: &Event) {
        match ev {
            Event::RunStarted {
                tag,
                branch,
                base_commit,
                resumed,
                finished_experiments,
                metric,
                direction,
                budget,
            } => {
                self.progress.update(|s| {
                    s.budget = Some(budget.clone());
                    s.done = *finished_experiments;
                    s.session_start = std::time::Instant::now();
                    s.candidates_here = 0;
                    s.candidates_since = s.session_start;
                });
                let short = &base_commit[..base_commit.len().min(10)];
                if *resumed {
                    out!("hone: resuming run {tag} on {branch} ({finished_experiments} experiment{} done), {metric} ({})", if *finished_experiments == 1 { "" } else { "s" }, direction.as_str());
                } else {
                    out!(
                        "hone: run {tag} on branch {branch} from {short}, {metric} ({})",
                        direction.as_str()
                    );
                }
                // What the run may use, once at the start: a log read in the morning (output
                // sent to a file has no live line) says what bounded the night.
                out!("hone: limits: {}", limits_line(budget));
            }
            Event::Note { message } => {
                let message = naming_spec(message, self.spec_file.as_deref());
                self.progress.print(|| out!("hone: {message}"));
            }
            Event::Warning { message } => {
                let message = naming_spec(message, self.spec_file.as_deref());
                self.progress.print(|| err!("warning: {message}"));
            }
            Event::ExperimentStarted { n } => self.phase(*n, "proposing", None, None),
            Event::Proposed { n, description } => {
                self.phase(*n, "proposed", Some(description.clone()), None)
            }
            Event::Verifying { n, log } => self.phase(*n, "verifying", None, Some(log.clone())),
            Event::ExperimentFinished {
                record,
                best,
                baseline,
            } => self.finished(record, *best, *baseline),
            Event::RunStopped { .. } => {
                self.progress.update(|s| s.phase = None);
                self.clear_line();
            }
            Event::Outer { n, message } => {
                self.progress.print(|| out!("  #{n:<4} outer: {message}"));
            }
        }
    }

    /// One line for a finished experiment: its status, value, the best so far and its change
    /// from the baseline, time, cost and description (the reason of a failure).
    fn finished(&mut self, record: &ExperimentRecord, best: Option<f64>, baseline: Option<f64>) {
        // An aborted experiment (an outage, an interruption) is not counted by the budget.
        let counted = record.status() != Status::Aborted;
        self.progress.update(|s| {
            s.done += u64::from(counted);
            if record.status() == Status::Baseline {
                // Candidates are timed from here: the baseline has no agent's turn.
                s.candidates_since = std::time::Instant::now();
            } else {
                s.candidates_here += u64::from(counted);
            }
            s.cost_here += record.cost_usd;
            s.tokens_here = s.tokens_here.saturating_add(record.tokens);
            s.last_done = Some(std::time::Instant::now());
            if s.phase.as_ref().is_some_and(|p| p.n == record.n) {
                s.phase = None;
            }
        });
        let change = match (best, baseline) {
            (Some(b), Some(a)) if a != 0.0 && ((b - a) / a.abs()).is_finite() => {
                format!(" ({:+.2}%)", (b - a) / a.abs() * 100.0)
            }
            _ => String::new(),
        };
        let cost = if record.cost_usd > 0.0 {
            format!("  ${:.4}", record.cost_usd)
        } else {
            String::new()
        };
        let detail = if record.status().is_failure() || record.status() == Status::Aborted {
            format!(
                "{}  [{}]",
                one_line(&record.description),
                one_line(&record.reason)
            )
        } else {
            one_line(&record.description).into_owned()
        };
        let line = format!(
            "  #{:<4} {} {} {:>12}  best {}{change}  {:>6}{cost}  {}",
            record.n,
            status_word(record.status()),
            self.metric,
            fmt_metric(record.objective),
            fmt_metric(best),
            format_duration(std::time::Duration::from_millis(record.total_ms)),
            detail.trim()
        );
        self.progress.print(|| out!("{}", fit_terminal(&line)));
    }
}

/// Cuts a line to the terminal's width (one line per experiment stays one line); the full
/// text is in `hone log` and `hone show`. Lines to a pipe or file are left whole.
fn fit_terminal(line: &str) -> String {
    if !std::io::stdout().is_terminal() {
        return line.to_string();
    }
    // SAFETY: TIOCGWINSZ fills a winsize struct we own; failure leaves it zeroed.
    let width = unsafe {
        let mut ws: libc::winsize = std::mem::zeroed();
        if libc::ioctl(1, libc::TIOCGWINSZ, &mut ws) == 0 {
            ws.ws_col as usize
        } else {
            0
        }
    };
    if width < 20 || line.chars().count() <= width {
        return line.to_string();
    }
    hone::util::cut_chars(line, width - 1)
}

/// "baseline X, best Y (#n), -12.34%".
fn best_line(s: &Summary) -> String {
    if s.baseline.is_none() && s.best.is_none() {
        return "no measured baseline yet".into();
    }
    format!(
        "baseline {}, best {} (#{}){}",
        fmt_metric(s.baseline),
        fmt_metric(s.best),
        s.best_experiment
            .map(|n| n.to_string())
            .unwrap_or_else(|| "-".into()),
        s.change_pct
            .map(|p| format!(", {p:+.2}%"))
            .unwrap_or_default()
    )
}

/// The end-of-run summary.
/// The summary a run ends with; `spec_file`: the `--spec` it was given, if any.
pub fn summary(s: &Summary, spec_file: Option<&std::path::Path>) {
    out!();
    out!(
        "run {} ({}): {} experiment{}",
        s.tag,
        s.branch,
        s.experiments,
        if s.experiments == 1 { "" } else { "s" }
    );
    out!("  {} ({}): {}", s.metric, s.direction, best_line(s));
    if let Some(d) = &s.best_vs_baseline {
        out!("{}", fit_terminal(&format!("  best vs baseline: {d}")));
    } else if let Some(d) = &s.best_description {
        let n = s.best_experiment.unwrap_or(0);
        let keeps = s.count(Status::Keep);
        if n > 0 && d != "baseline" {
            // The best is the last of a chain of keeps: its description is its own step.
            let which = if keeps > 1 {
                format!("best change (#{n}, the last of {keeps} kept)")
            } else {
                format!("best change (#{n})")
            };
            out!("{}", fit_terminal(&format!("  {which}: {d}")));
        }
    }
    let counts: Vec<String> = s.counts.iter().map(|(k, v)| format!("{k} {v}")).collect();
    out!("  {}", counts.join(", "));
    out!(
        "  loop time {}, verifier time {}",
        format_duration(std::time::Duration::from_secs_f64(s.active_seconds)),
        format_duration(std::time::Duration::from_secs_f64(s.verify_seconds))
    );
    if let Some(r) = &s.stop_reason {
        // A reason may quote a server's or a reviewer's words.
        out!("  stopped: {}", one_line(r));
        if let Some(hint) = stop_hint(r, &s.tag, spec_file) {
            out!("  {hint}");
        }
    }
    if s.count(Status::Keep) > 0 {
        out!(
            "  next: `hone finalize --run {}` makes a review branch of the kept changes (the run's branch is {}); `hone report --run {}` writes the report",
            s.tag,
            s.branch,
            s.tag
        );
    }
}

/// What to do after a stop on the run's budget (`reason`, of run `tag`, whose spec is
/// `spec_file` when `--spec` named one), if it was one.
fn stop_hint(reason: &str, tag: &str, spec_file: Option<&std::path::Path>) -> Option<String> {
    let key = ["max_cost_usd", "max_tokens"]
        .into_iter()
        .find(|k| reason.starts_with("budget") && reason.contains(k))?;
    let (file, flag) = match spec_file {
        Some(f) => (f.display().to_string(), format!(" --spec {}", f.display())),
        None => ("hone.toml".to_string(), String::new()),
    };
    Some(format!(
        "to go on: raise [stop] {key} in {file} (a resumed run takes the new limit), then `hone{flag} run --tag {tag} --more N`"
    ))
}

/// What each mechanism did for one experiment (`hone show N`).
pub fn show_mechanisms(calls: &[hone::store::MechanismCall]) {
    if calls.is_empty() {
        return;
    }
    out!("--- mechanisms ---");
    let mut quiet: Vec<(String, usize)> = Vec::new();
    for c in calls {
        if c.effect == hone::store::Effect::None {
            let key = format!("{} {}", c.mechanism, c.hook);
            match quiet.iter_mut().find(|(k, _)| *k == key) {
                Some((_, count)) => *count += 1,
                None => quiet.push((key, 1)),
            }
            continue;
        }
        let detail = if c.detail.is_empty() {
            String::new()
        } else {
            format!(": {}", c.detail)
        };
        out!("  {} {} -> {}{detail}", c.mechanism, c.hook, c.effect);
    }
    if !quiet.is_empty() {
        let total: usize = quiet.iter().map(|(_, c)| c).sum();
        let listed: Vec<String> = quiet
            .iter()
            .map(|(k, c)| {
                if *c == 1 {
                    k.clone()
                } else {
                    format!("{k} x{c}")
                }
            })
            .collect();
        out!(
            "  ({total} hook call{} without effect: {})",
            if total == 1 { "" } else { "s" },
            listed.join(", ")
        );
    }
}

/// `hone mech stats`.
pub fn mech_stats(
    run: &RunRecord,
    stats: &[hone::meta::stats::MechanismStats],
    probation: u64,
    json: bool,
) {
    if json {
        for s in stats {
            let mut v = serde_json::to_value(s).unwrap_or_default();
            v["effective"] = s.effective().into();
            out!("{v}");
        }
        return;
    }
    if stats.is_empty() {
        out!(
            "run {} recorded no mechanism calls (enable some with [outer] mechanisms = [...] in hone.toml)",
            run.tag
        );
        return;
    }
    out!(
        "mechanisms of run {} (probation {probation} experiments):",
        run.tag
    );
    out!(
        "  {:<12} {:>5} {:>7} {:>9} {:>8} {:>8} {:>7} {:>11}  calls per hook",
        "mechanism",
        "exps",
        "guided",
        "suggested",
        "rejected",
        "modified",
        "changed",
        "keeps after"
    );
    for s in stats {
        let hooks: Vec<String> = s.calls.iter().map(|(h, n)| format!("{h} {n}")).collect();
        out!(
            "  {:<12} {:>5} {:>7} {:>9} {:>8} {:>8} {:>7} {:>11}  {}{}",
            s.name,
            s.experiments,
            s.guided,
            s.suggested,
            s.rejected,
            s.modified,
            s.changed,
            s.keeps_after_guidance,
            hooks.join(", "),
            if s.inert { "  INERT" } else { "" }
        );
    }
    for s in stats.iter().filter(|s| !s.lifecycle.is_empty()) {
        out!("{}:", s.name);
        for line in &s.lifecycle {
            out!("  {line}");
        }
    }
    for s in stats.iter().filter(|s| s.inert) {
        out!(
            "inert: `{}` ran over {} experiments and never changed anything; remove it from [outer] mechanisms or give it a problem it fits",
            s.name, s.experiments
        );
    }
}

/// The knobs `hone init` found.
pub fn knob_table(knobs: &[Knob]) {
    if knobs.is_empty() {
        out!("no knobs found: write top-level constants such as `LEARNING_RATE = 0.04  # hone: log 1e-4..1.0`");
        return;
    }
    out!("\nknobs found ({}):", knobs.len());
    for k in knobs {
        let domain = match &k.domain {
            Domain::Float { lo, hi, log } => {
                format!("{}{lo}..{hi}", if *log { "log " } else { "" })
            }
            Domain::Int { lo, hi, log } => {
                format!("int {}{lo}..{hi}", if *log { "log " } else { "" })
            }
            Domain::Choice(c) => format!("choice of {}", c.len()),
            Domain::Bool => "bool".into(),
            // Not searched by the built-in optimizer; an agent may change it unless `[loop] fixed` names it.
            Domain::Fixed => "not searched".into(),
        };
        let how = if k.annotated { "" } else { " (inferred)" };
        out!(
            "  {:<24} {:<12} {:<28} {}:{}",
            k.name,
            k.value.to_string(),
            format!("{domain}{how}"),
            k.file,
            k.line
        );
    }
}

/// One line per thing a worker does.
pub fn worker_event(ev: &hone::worker::WorkerEvent) {
    use hone::worker::WorkerEvent as W;
    match ev {
        W::Ready { id } => out!("worker {id}: waiting for verifications"),
        W::Claimed {
            job,
            run,
            n,
            attempt,
        } => out!("job {job}: run {run}, experiment {n} (attempt {attempt})"),
        W::Finished {
            job,
            exit,
            accepted,
        } => {
            if *accepted {
                out!("job {job}: done ({exit})");
            } else {
                out!("job {job}: done ({exit}) but no longer ours; the result was discarded");
            }
        }
        W::Lost { job } => out!("job {job}: cancelled or taken over; verifier killed"),
        W::Released { job, why } => {
            out!("job {job}: could not run it here ({why}); given back to the queue")
        }
        W::KilledStale { pid } => {
            out!("killed the verifier (pid {pid}) a previous worker in this directory left")
        }
        W::Uncontained { job, why } => {
            out!("job {job}: WITHOUT containment ({why}; the run set [sandbox] required = false)")
        }
        W::Refused { job, why } => err!("job {job}: REFUSED: {why}"),
    }
}

/// The workers a PostgreSQL store has seen, for `hone status`.
pub fn workers(url: &str, json: bool) {
    let list = hone::queue::Queue::connect(url).and_then(|mut q| q.workers());
    let list = match list {
        Ok(l) => l,
        Err(e) => {
            err!("workers: {e}");
            return;
        }
    };
    if json {
        for w in &list {
            out!(
                "{}",
                serde_json::json!({"worker": w.id, "host": w.host, "slot": w.slot,
                    "heartbeat_age_s": w.heartbeat_age_s, "job": w.job, "alive": w.alive})
            );
        }
        return;
    }
    let live = list.iter().filter(|w| w.alive).count();
    out!(
        "workers: {live} live{}",
        match list.len() - live {
            0 => String::new(),
            silent => format!(", {silent} silent past their lease (stopped or dead)"),
        }
    );
    for w in &list {
        let job = match (w.alive, w.job) {
            (false, _) => "silent".to_string(),
            (true, Some(j)) => format!("job {j}"),
            (true, None) => "idle".into(),
        };
        out!(
            "  {:<32} host {:<16} slot {:<6} heartbeat {:>5.1}s ago  {job}",
            w.id,
            w.host,
            w.slot,
            w.heartbeat_age_s
        );
    }
}

#[cfg(test)]
mod tests;

/// A run's limits as it (re)starts, with what earlier sessions used of them: `100
/// experiments, 15m of loop time (2m used), $1.00 ($0.40 spent), 150000 tokens`.
fn limits_line(b: &hone::engine::Budget) -> String {
    let secs = |s: f64| format_duration(std::time::Duration::from_secs_f64(s));
    // A limit, and what earlier sessions used of it when they used any.
    let limit = |limit: String, used: Option<String>| match used {
        Some(used) => format!("{limit} ({used})"),
        None => limit,
    };
    let mut parts = vec![format!("{} experiments", b.max_experiments)];
    if let Some(t) = b.max_time_s {
        let used = (b.used_s > 0.0).then(|| format!("{} used", secs(b.used_s)));
        parts.push(limit(format!("{} of loop time", secs(t)), used));
    }
    if let Some(usd) = b.max_cost_usd {
        let used = (b.cost_before > 0.0).then(|| format!("${:.4} spent", b.cost_before));
        parts.push(limit(format!("${usd:.2}"), used));
    }
    if let Some(tokens) = b.max_tokens {
        let used = (b.tokens_before > 0).then(|| format!("{} spent", b.tokens_before));
        parts.push(limit(format!("{tokens} tokens"), used));
    }
    format!(
        "{}; each verification at most {}",
        parts.join(", "),
        secs(b.timeout_s)
    )
}
