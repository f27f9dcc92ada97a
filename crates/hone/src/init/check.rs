//! `hone init --check`: the command run once in the checkout, the metric read from its
//! output as the verifier reads it, and the points a `progress` setting reads.

use std::path::Path;

/// What running the command once (`hone init --check`) showed.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckOutcome {
    pub exit: crate::exec::Exit,
    pub seconds: f64,
    /// The objective, as the verifier would read it.
    pub value: Option<f64>,
    /// The last lines of the output (at most 5), for a command that failed or printed no
    /// metric.
    pub tail: Vec<String>,
    /// With a `progress` setting: how many points it read, and the last one (step, value).
    pub progress: Option<(usize, Option<(f64, f64)>)>,
    /// When no objective was read: what to do, as `hone run` says it (the name a line
    /// prints, or a `metric_regex` that would read it).
    pub hint: Option<String>,
    /// Which `[verify]` command the exit and the tail are about: `command`, or `evaluate`
    /// once the command succeeded.
    pub stage: &'static str,
}

/// Runs `command` once in `root` (the checkout: `hone run` runs it in a worktree of the
/// committed files instead) with hone's environment, kills its process group after
/// `timeout_secs`, and reads `metric` from its output the way the verifier does (with
/// `metric_regex`, when hone.toml has one), and the points `progress` reads, if it is given.
/// With `evaluate` (a sealed evaluator), that runs next when the command succeeded, and the
/// metric is read from its output alone, as the verifier reads it.
pub fn check(
    root: &Path,
    (command, evaluate): (&str, Option<&str>),
    timeout_secs: u64,
    (metric, metric_regex): (&str, Option<&str>),
    progress: Option<&str>,
) -> Result<CheckOutcome, String> {
    let progress = progress
        .map(crate::verify::prune::Progress::compile)
        .transpose()?;
    let (mut points, mut last_point) = (0usize, None);
    let mut reader = crate::verify::metrics::MetricReader::new(metric, metric_regex)
        .map_err(|e| format!("{e}"))?;
    let (mut first, tail) = run_once(root, command, timeout_secs, &mut |line| {
        if evaluate.is_none() {
            reader.feed(line);
        }
        if let Some(point) = progress.as_ref().and_then(|p| p.read(line)) {
            points += 1;
            last_point = Some(point);
        }
    })?;
    first.tail = tail;
    first.progress = progress.as_ref().map(|_| (points, last_point));
    let ran = match evaluate {
        Some(evaluate) if first.exit == crate::exec::Exit::Code(0) => {
            let (mut second, tail) =
                run_once(root, evaluate, timeout_secs, &mut |line| reader.feed(line))?;
            second.seconds += first.seconds;
            second.tail = tail;
            second.progress = first.progress;
            second.stage = "evaluate";
            second
        }
        _ => first,
    };
    let metrics = reader.finish();
    let value = metrics.get(metric);
    Ok(CheckOutcome {
        value,
        hint: value.is_none().then(|| {
            crate::verify::metrics::missing_metric_hint(metrics.mention.as_deref(), metric)
        }),
        ..ran
    })
}

/// Runs `command` once in `root`, giving `on_line` each line of its output: what it showed
/// but the metric (`value` and `hint` unset), and its last five lines.
fn run_once(
    root: &Path,
    command: &str,
    timeout_secs: u64,
    on_line: &mut dyn FnMut(&str),
) -> Result<(CheckOutcome, Vec<String>), String> {
    use crate::exec::{spawn, ExecRequest, Limits};
    let log_path = std::env::temp_dir().join(format!("hone-init-check-{}.log", std::process::id()));
    let req = ExecRequest {
        command: command.to_string(),
        cwd: root.to_path_buf(),
        env: std::env::vars_os()
            .filter(|(k, _)| !k.to_string_lossy().starts_with("HONE_"))
            .collect(),
        timeout: Some(std::time::Duration::from_secs(timeout_secs)),
        kill_grace: std::time::Duration::from_secs(5),
        drain_timeout: std::time::Duration::from_secs(5),
        log_path: log_path.clone(),
        max_log_bytes: 1 << 20,
        limits: Limits::default(),
        wrapper: Vec::new(),
    };
    let running = spawn(&req).map_err(|e| e.to_string())?;
    let mut tail: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    let outcome = running
        .wait(
            &mut |line| {
                on_line(line);
                if tail.len() == 5 {
                    tail.pop_front();
                }
                tail.push_back(line.to_string());
            },
            &|| false,
        )
        .map_err(|e| e.to_string());
    // The log was only a by-product: the lines were read as they came.
    let _ = std::fs::remove_file(&log_path);
    let outcome = outcome?;
    Ok((
        CheckOutcome {
            exit: outcome.exit,
            seconds: outcome.duration.as_secs_f64(),
            value: None,
            tail: Vec::new(),
            progress: None,
            hint: None,
            stage: "command",
        },
        tail.into(),
    ))
}
