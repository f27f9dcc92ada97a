//! The review gate: `max_diff_lines`, `forbid` on added lines, then the reviewer (a command
//! that answers APPROVE or REJECT on its last line, or an LLM over HTTP), all before any
//! compute is spent on the candidate.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::exec::{self, ExecRequest, Exit};
use crate::propose;
use crate::spec::ReviewSpec;
use crate::store::ExperimentRecord;
use crate::workspace::{matches_any, BinaryChange};

use crate::store::Store;

use super::outage::{Next, Outage};
use super::verifier::{Role, Verifier};
use super::{EngineError, Fs, Stage, Stop};

/// What the review gate decided.
pub(super) enum Gate {
    Pass,
    /// A rule rejected it, or the reviewer could not judge it (it failed, or gave no verdict).
    Reject(String),
    /// The reviewer's own verdict: rejected.
    Refused(String),
    /// The candidate cannot be reviewed and the run must stop (a broken reviewer).
    Stop(Stop),
    /// No verdict on the candidate and the run must stop: the reviewer's server stayed
    /// unavailable for `[agent] outage_limit` (to be resumed), or the budget cannot pay for
    /// the review. The candidate is aborted (not counted).
    Unavailable(Stop),
}

/// The most of a diff a reviewer is shown, in characters; a larger diff is rejected unseen.
const REVIEW_DIFF_MAX: usize = 100_000;

/// Where a review runs: the run's store (a reviewer command's process group is recorded
/// there) and the run's id in it.
pub(super) struct ReviewPlace<'p> {
    pub store: &'p Store,
    pub run_id: i64,
    /// The run is to stop after this experiment (a first Ctrl-C): a wait out of a reviewer's
    /// outage ends, the candidate aborted and the run stopped, to be resumed.
    pub stopping: &'p dyn Fn() -> bool,
    /// When `[stop] max_time` runs out, if it is set: a wait out of a reviewer's outage
    /// ends there, the candidate aborted and the run stopped as `max_time` says.
    pub time_up: Option<std::time::Instant>,
}

impl Verifier {
    /// The review gate: `max_diff_lines`, `forbid` on added lines, then the reviewer (a
    /// command, or an LLM over HTTP whose spend goes on `meter` and into `rec`). It runs on
    /// whichever thread holds this verifier: a parallel slot's reviews its own candidates.
    pub(super) fn review(
        &self,
        place: &ReviewPlace<'_>,
        rec: &mut ExperimentRecord,
        (wt, parent): (&Path, &str),
        cancel: &dyn Fn() -> bool,
        meter: &propose::Meter<'_>,
    ) -> Result<Gate, EngineError> {
        let r = self.spec.review.clone();
        if r.command.is_none()
            && r.llm.is_none()
            && r.max_diff_lines.is_none()
            && r.forbid.is_empty()
        {
            return Ok(Gate::Pass);
        }
        let Some(commit) = rec.candidate_commit.clone() else {
            return Ok(Gate::Pass);
        };
        // Binary files (git shows no lines of them) weigh their whole content, unless
        // `allow_binary` names them.
        let binary = self.git.binary_changes(parent, &commit)?;
        let counted = rec.lines_added + rec.lines_deleted + binary_weight(&r, &binary);
        // Git's count first: a change already too large is refused before its diff is read.
        let diff = match r.max_diff_lines {
            Some(max) if counted > max => String::new(),
            _ => self.git.diff(parent, &commit)?,
        };
        let changed = counted + bare_carriage_returns(&diff);
        if let Some(max) = r.max_diff_lines {
            if changed > max {
                return Ok(Gate::Reject(format!(
                    "the diff changes {changed} lines (max_diff_lines = {max}{})",
                    if binary.is_empty() {
                        ""
                    } else {
                        "; a binary file counts every line of its old and new content"
                    }
                )));
            }
        }
        if let Some(why) = binary_forbidden(&r, &binary) {
            return Ok(Gate::Reject(why));
        }
        if let Some(why) = forbidden_line(&r.forbid, &diff) {
            return Ok(Gate::Reject(why));
        }
        let diff = diff + binary_notes(&binary).as_str();
        if r.command.is_none() && r.llm.is_none() {
            return Ok(Gate::Pass);
        }
        // A reviewer shown part of a change cannot approve the rest: a line past the cut
        // (after pages of padding) would pass unseen.
        let chars = diff.chars().count();
        if chars > REVIEW_DIFF_MAX {
            return Ok(Gate::Reject(format!(
                "the diff is {chars} characters and a reviewer is shown at most {REVIEW_DIFF_MAX}: not reviewed whole, so not approved (set [review] max_diff_lines to refuse such changes before the review is asked for)"
            )));
        }
        let (text, prompt_path) = self.review_prompt(rec, &r, &diff)?;
        let log_path = self
            .paths
            .run_dir(&self.tag)
            .join("logs")
            .join(format!("{}.review.log", rec.n));
        let Some(template) = r.command else {
            let gate = self.review_http(rec, meter, (&text, &log_path), cancel, place);
            // What it spent is the experiment's from now on, written at once: a crash before
            // the experiment is decided would otherwise lose it from the run's budget.
            let store = place.store;
            store.relaxed(|| store.put_experiment(place.run_id, rec))?;
            return Ok(gate);
        };
        let reviewer = Reviewer {
            template: &template,
            timeout: r.timeout,
            prompt_path,
            log_path,
        };
        // A reviewer command may run the candidate's code (to test it): like a verification,
        // never beside the holdout (see `Verifier::candidate_code`).
        let lock = self.candidate_code.clone();
        let _running = lock
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.review_command(place, (rec.n, wt, &commit), reviewer, cancel)
    }

    /// Writes the review prompt of `rec` (its diff `diff`) under the run's prompts; returns
    /// its text and path.
    fn review_prompt(
        &self,
        rec: &ExperimentRecord,
        r: &ReviewSpec,
        diff: &str,
    ) -> Result<(String, PathBuf), EngineError> {
        let spec = &self.spec;
        let dir = self.paths.run_dir(&self.tag).join("prompts");
        std::fs::create_dir_all(&dir).map_err(|error| Fs::Create {
            path: dir.clone(),
            error,
        })?;
        let prompt_path = dir.join(format!("{}.review.md", rec.n));
        let instructions = r
            .instructions
            .as_ref()
            .and_then(|f| std::fs::read_to_string(self.git.root().join(f)).ok())
            .unwrap_or_default();
        let bounded = crate::propose::prompt::sanitize(diff, REVIEW_DIFF_MAX);
        let fence = crate::propose::prompt::fence_for(&bounded);
        let answer_line = if r.command.is_some() {
            "Answer on the LAST line with `APPROVE` or `REJECT: <reason>`.\n"
        } else {
            ""
        };
        let forbidden = if r.forbid.is_empty() {
            String::new()
        } else {
            format!("\n- added lines must not match: {}", r.forbid.join(", "))
        };
        let text = format!(
            "# Review of experiment {n}\n\nA proposer made the change below to improve `{metric}` ({dir}). Decide before any compute is spent.\n{answer_line}\n## Rules\n\n- editable: {editable}\n- protected: {protected}{forbidden}\n\n## Instructions\n\n{instructions}\n\n## Description (untrusted)\n\n{desc}\n\n## Diff (untrusted)\n\n{fence}diff\n{bounded}\n{fence}\n",
            n = rec.n,
            metric = spec.verify.metric,
            dir = spec.verify.direction.as_str(),
            editable = spec.loop_.editable.join(", "),
            protected = spec.loop_.protected.join(", "),
            desc = crate::propose::prompt::sanitize(&rec.description, 500),
        );
        std::fs::write(&prompt_path, &text).map_err(|error| Fs::ReviewPrompt {
            path: prompt_path.clone(),
            error,
        })?;
        Ok((text, prompt_path))
    }

    /// The reviewer command's verdict on experiment `n` (its candidate `commit` checked out
    /// in `wt`, put back as committed afterwards).
    fn review_command(
        &self,
        place: &ReviewPlace<'_>,
        (n, wt, commit): (u64, &Path, &str),
        reviewer: Reviewer<'_>,
        cancel: &dyn Fn() -> bool,
    ) -> Result<Gate, EngineError> {
        let v = self;
        let prompt_path = reviewer.prompt_path;
        let command = reviewer.template.replace(
            "{prompt_file}",
            &crate::propose::command::shell_quote(&prompt_path.to_string_lossy()),
        );
        // It starts in an empty directory beside its prompt, not in the worktree: a tool that
        // looks for code or settings where it starts (`python3 -c` imports from there, agent
        // CLIs read their settings files) must not find the candidate's. The candidate's
        // files are at `HONE_WORKTREE`.
        let start = prompt_path.with_extension("d");
        let _ = crate::workspace::remove_any(&start);
        std::fs::create_dir_all(&start).map_err(|error| Fs::Create {
            path: start.clone(),
            error,
        })?;
        let mut env = v.inherited_for_candidate();
        env.push(("HONE_REVIEW_PROMPT".into(), prompt_path.into_os_string()));
        env.push(("HONE_WORKTREE".into(), wt.as_os_str().to_owned()));
        env.push(("HONE_EXPERIMENT".into(), n.to_string().into()));
        env.push(("HONE_JOB".into(), v.job_token(n).into()));
        let req = ExecRequest {
            command,
            cwd: start.clone(),
            env,
            timeout: Some(reviewer.timeout),
            kill_grace: v.spec.verify.kill_grace,
            drain_timeout: Duration::from_secs(2),
            log_path: reviewer.log_path,
            max_log_bytes: v.spec.verify.max_log_bytes,
            limits: v.spec.sandbox.limits(),
            wrapper: v.confined(wt, true, Role::Agent, Some(&start)),
        };
        let running = exec::spawn(&req).map_err(|error| Stage::Start {
            what: "reviewer".into(),
            error,
        })?;
        place
            .store
            .set_experiment_pid(place.run_id, n, running.pid(), running.start_time())?;
        let mut last = String::new();
        let outcome = running
            .wait(
                &mut |line: &str| {
                    if !line.trim().is_empty() {
                        last = line.trim().to_string();
                    }
                },
                cancel,
            )
            .map_err(|error| Stage::Wait {
                what: "reviewer".into(),
                error,
            })?;
        exec::kill_leftovers(Some(&v.job_token(n)));
        // The reviewer looked at the worktree: put the candidate back exactly as committed.
        self.git.reset_worktree(wt, commit)?;
        let verdict = prompt_line(&last);
        Ok(match outcome.exit {
            Exit::Code(0) if verdict.to_ascii_uppercase().starts_with("APPROVE") => Gate::Pass,
            Exit::Code(0) if verdict.to_ascii_uppercase().starts_with("REJECT") => {
                let why = verdict[6..].trim_start_matches([':', ' ']).trim();
                Gate::Refused(format!("the reviewer rejected it: {}", if why.is_empty() { "no reason given" } else { why }))
            }
            Exit::Code(0) => Gate::Reject(format!(
                "the reviewer gave no verdict (its last line must start with APPROVE or REJECT; it was `{verdict}`)"
            )),
            other => Gate::Reject(format!("the reviewer failed ({other:?}); a candidate is only verified when approved")),
        })
    }

    /// The HTTP reviewer's verdict on the review prompt `text`. Its spend is added to `rec`
    /// whatever the outcome; its raw answer goes to `log_path`.
    /// `cancel` ends the call and any wait (a second Ctrl-C); the place's `stopping` (a first
    /// Ctrl-C) and `time_up` end a wait out of the server's outage only: the candidate is
    /// then aborted, unreviewed.
    fn review_http(
        &self,
        rec: &mut ExperimentRecord,
        meter: &propose::Meter<'_>,
        (text, log_path): (&str, &Path),
        cancel: &dyn Fn() -> bool,
        place: &ReviewPlace<'_>,
    ) -> Gate {
        let stopping = place.stopping;
        let review = &self.spec.review;
        let (Some(kind), Some(llm)) = (review.kind, review.llm.clone()) else {
            return Gate::Pass;
        };
        let before = meter.spent();
        let mut client = crate::propose::chat::LlmClient::new(kind, llm);
        let mut outage = Outage::default();
        let outcome = loop {
            let outcome = crate::review::review(&mut client, meter, text, cancel);
            let Err(crate::review::ReviewError::Unavailable(m)) = &outcome else {
                break outcome;
            };
            // The server's outage is no verdict on the candidate: the review is asked again
            // after a wait (doubling, as between proposals), for up to `outage_limit`.
            let agent = &self.spec.agent;
            let stop = match outage.next((agent.outage_wait, agent.outage_limit), place.time_up)
            {
                Next::Wait(wait) => {
                    let _ = std::fs::write(
                        log_path,
                        format!(
                            "the reviewer's server was unavailable: {m}; asking again in {}\n",
                            crate::spec::format_duration(wait)
                        ),
                    );
                    let waited = crate::util::pause(wait, &|| cancel() || stopping());
                    let time_is_up = place
                        .time_up
                        .is_some_and(|t| std::time::Instant::now() >= t);
                    if waited && !time_is_up {
                        continue;
                    }
                    // Killed (a second Ctrl-C, the coordinator's error): the caller's
                    // cancel check aborts the candidate, as for any cancelled review.
                    if !waited && cancel() {
                        break Err(crate::review::ReviewError::Cancelled);
                    }
                    if waited {
                        // The wait ran to max_time: not asked again past it.
                        self.time_up_stop(m)
                    } else {
                        Stop::resumable(
                            "interrupted by the user while the reviewer's server was unavailable (run `hone run` to resume)",
                        )
                    }
                }
                Next::OverLimit => Stop::failed(format!(
                    "the reviewer's server has been unavailable for {} ({m}); run `hone run` to resume",
                    crate::spec::format_duration(outage.lasted())
                )),
                Next::TimeUp => self.time_up_stop(m),
            };
            charge(rec, before, meter.spent());
            let _ = std::fs::write(log_path, format!("{}\n", stop.reason));
            return Gate::Unavailable(stop);
        };
        charge(rec, before, meter.spent());
        let logged = match &outcome {
            Ok(v) => format!("{v:?}\n"),
            Err(e) => format!("{e:?}\n"),
        };
        let _ = std::fs::write(log_path, logged);
        match outcome {
            Ok(crate::review::Verdict::Approve(_)) => Gate::Pass,
            Ok(crate::review::Verdict::Reject(why)) => {
                Gate::Refused(format!("the reviewer rejected it: {why}"))
            }
            Err(
                crate::review::ReviewError::Failed(m) | crate::review::ReviewError::Unavailable(m),
            ) => Gate::Reject(format!(
                "the reviewer failed ({m}); a candidate is only verified when approved"
            )),
            Err(crate::review::ReviewError::Fatal(m)) => {
                Gate::Stop(Stop::failed(format!("the reviewer: {m}")))
            }
            // Nothing was sent: no verdict on the candidate, which is not counted (as a
            // proposal the budget refused).
            Err(crate::review::ReviewError::Budget(m)) => {
                Gate::Unavailable(Stop::done(format!("{m} (for the review)")))
            }
            // Not a verdict: the caller sees the cancel check and aborts the candidate.
            Err(crate::review::ReviewError::Cancelled) => {
                Gate::Reject("the review was interrupted by the user".into())
            }
        }
    }
}

impl Verifier {
    /// The stop when `max_time` ran out while the reviewer's server was unavailable (`m`).
    fn time_up_stop(&self, m: &str) -> Stop {
        Stop::done(format!(
            "reached max_time ({}) while the reviewer's server was unavailable ({m})",
            self.spec
                .stop
                .max_time
                .map(crate::spec::format_duration)
                .unwrap_or_default()
        ))
    }
}

/// Adds what the meter counted between `before` and `after` (dollars, tokens) to `rec`.
fn charge(rec: &mut ExperimentRecord, before: (f64, u64), after: (f64, u64)) {
    rec.cost_usd += after.0 - before.0;
    rec.tokens = rec.tokens.saturating_add(after.1.saturating_sub(before.1));
}

/// The reviewer command of one review: its template, time limit, prompt and log.
struct Reviewer<'r> {
    template: &'r str,
    timeout: Duration,
    prompt_path: PathBuf,
    log_path: PathBuf,
}

/// The first added line of `diff` that matches a `forbid` pattern, as a rejection.
fn forbidden_line(forbid: &[String], diff: &str) -> Option<String> {
    for pattern in forbid {
        // Validated when the spec was read.
        let Ok(re) = regex::Regex::new(pattern) else {
            continue;
        };
        let hit = diff
            .lines()
            // Added lines; `+++ b/path` headers are skipped, but an added line that itself
            // starts with "++" (say `++i;`) is checked.
            .filter(|l| {
                l.starts_with('+') && !l.starts_with("+++ b/") && !l.starts_with("+++ /dev/null")
            })
            .find(|l| re.is_match(&l[1..]));
        if let Some(line) = hit {
            let shown = prompt_line(&line[1..]);
            return Some(format!(
                "an added line matches the forbidden pattern `{pattern}`: {shown}"
            ));
        }
    }
    None
}

/// Line breaks git does not count in a diff's size: carriage returns inside an added or
/// deleted line (not the `\r` of a CRLF ending). Python, among others, reads a bare `\r` as
/// a line break, so 200 statements joined by it would be one line against `max_diff_lines`.
fn bare_carriage_returns(diff: &str) -> u64 {
    // A file's header (`diff --git` up to its first `@@`) holds `--- a/` and `+++ b/` lines;
    // past it, a line starting so is content (`++ b/1` added reads `+++ b/1`).
    let mut in_header = false;
    let mut count = 0;
    for l in diff.split('\n') {
        if l.starts_with("diff --git ") {
            in_header = true;
        } else if l.starts_with("@@") {
            in_header = false;
        } else if !in_header && (l.starts_with('+') || l.starts_with('-')) {
            let body = l.strip_suffix('\r').unwrap_or(l);
            count += body.bytes().filter(|&b| b == b'\r').count() as u64;
        }
    }
    count
}

/// The lines binary changes add to the diff's size: old plus new content of each, except
/// for files `allow_binary` names.
fn binary_weight(r: &ReviewSpec, binary: &[BinaryChange]) -> u64 {
    binary
        .iter()
        .filter(|b| !matches_any(&r.allow_binary, &b.path))
        .map(BinaryChange::lines)
        .sum()
}

/// With `forbid` set, a binary change `allow_binary` does not name is rejected: its content
/// cannot be checked line by line.
fn binary_forbidden(r: &ReviewSpec, binary: &[BinaryChange]) -> Option<String> {
    if r.forbid.is_empty() {
        return None;
    }
    let b = binary
        .iter()
        .find(|b| !matches_any(&r.allow_binary, &b.path))?;
    Some(format!(
        "`{}` changed as a binary file ({} bytes), which `forbid` cannot check; if binary files are expected there, list them in [review] allow_binary",
        prompt_line(&b.path),
        b.new_bytes
    ))
}

/// What the reviewer is told of binary changes, which the diff shows only as "Binary files
/// differ": each file and its size before and after.
fn binary_notes(binary: &[BinaryChange]) -> String {
    binary
        .iter()
        .map(|b| {
            format!(
                "\n# hone: binary file `{}` changed (content not shown): {} bytes, {} lines before; {} bytes, {} lines after\n",
                prompt_line(&b.path),
                b.old_bytes,
                b.old_lines,
                b.new_bytes,
                b.new_lines
            )
        })
        .collect()
}

/// One line of untrusted text, cleaned and bounded for a reason string.
fn prompt_line(line: &str) -> String {
    crate::propose::prompt::sanitize(line, 200).replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::bare_carriage_returns;

    #[test]
    fn carriage_returns_are_counted_in_content_lines_not_in_headers() {
        let diff = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1,2 @@\n-a = 1\n\
                    +a = 2\r\n+++ b/1\rc = 3\rd = 4\n+e = 5\rf = 6\r\n";
        // `++ b/1` added (it reads `+++ b/1`) hides two, `e = 5` one; CRLF endings none.
        assert_eq!(bare_carriage_returns(diff), 3);
    }
}
