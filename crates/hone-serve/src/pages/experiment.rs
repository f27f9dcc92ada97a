//! The experiment page: its description and reason, metrics, the keep/discard decision's
//! reasoning, the highlighted diff from its parent and the tail of its log.

use std::fmt::Write as _;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::Path;

use axum::extract::{Path as UrlPath, State};
use axum::response::Html;
use hone::report::fmt_metric;
use hone::store::{ExperimentRecord, RunRecord};

use super::PageError;
use crate::db::{run_by_tag, AppError};
use crate::highlight::diff_html;
use crate::html::{badge, cost, duration_ms, esc, page, url, utc, Links};
use crate::AppState;

/// The most of a diff and of a log shown on an experiment page.
const MAX_DIFF_BYTES: usize = 512 * 1024;
const LOG_TAIL_BYTES: u64 = 64 * 1024;
const LOG_TAIL_LINES: usize = 200;

pub(super) async fn experiment_page(
    State(st): State<AppState>,
    UrlPath((tag, n)): UrlPath<(String, u64)>,
) -> Result<Html<String>, PageError> {
    let t = tag.clone();
    let (run, e, count) = st
        .db
        .read(move |store| {
            let run = run_by_tag(store, &t)?;
            let e = store.experiment(run.id, n)?.ok_or_else(|| {
                AppError::NotFound(format!(
                    "run `{t}` has no experiment {n}; its page lists them all"
                ))
            })?;
            let count = store
                .run_change_mark(run.id)?
                .map(|m| m.experiments)
                .unwrap_or(0);
            Ok((run, e, count))
        })
        .await?;
    let root = st.repo_root.clone();
    let (parent, candidate, log_path) = (
        e.parent_commit.clone(),
        e.candidate_commit.clone(),
        e.log_path.clone(),
    );
    let (diff, log) = tokio::task::spawn_blocking(move || {
        (
            diff_of(&root, &parent, candidate.as_deref()),
            log_path.map(|p| log_tail(&root, Path::new(&p))),
        )
    })
    .await
    .map_err(|e| AppError::Internal(format!("a git task failed: {e}")))?;
    let utag = url(&run.tag);
    let mut body = String::new();
    body.push_str(&title_html(&st.links, &e, &utag, count));
    body.push_str(&description_box(&e));
    body.push_str(r#"<div class="two">"#);
    body.push_str(&metrics_box(&run, &e));
    body.push_str(&decision_box(&e));
    body.push_str("</div>");
    body.push_str(&change_box(&run.tag, &e, diff));
    if let Some(log) = log {
        body.push_str(&log_box(log));
    }
    Ok(Html(page(
        &st.links,
        &format!("experiment {} of {}", e.n, run.tag),
        &[
            (format!("run {}", run.tag), Some(format!("/runs/{utag}"))),
            (format!("experiment {}", e.n), None),
        ],
        &body,
    )))
}

/// The title: the experiment's number and status, and links to its neighbours.
fn title_html(links: &Links, e: &ExperimentRecord, utag: &str, count: u64) -> String {
    let mut body = String::new();
    let _ = write!(
        body,
        r#"<div class="title"><h1>experiment {n}</h1>{badge}<span class="pn">{prev}{next}</span></div>"#,
        n = e.n,
        badge = badge(e.status().as_str()),
        prev = if e.n > 0 {
            format!(
                r#"<a href="{}">‹ {}</a> "#,
                esc(&links.to(&format!("/runs/{utag}/experiments/{}", e.n - 1))),
                e.n - 1
            )
        } else {
            String::new()
        },
        next = if e.n + 1 < count {
            format!(
                r#"<a href="{}">{} ›</a>"#,
                esc(&links.to(&format!("/runs/{utag}/experiments/{}", e.n + 1))),
                e.n + 1
            )
        } else {
            String::new()
        },
    );
    body
}

/// What the proposer said it did, and why the experiment ended as it did.
fn description_box(e: &ExperimentRecord) -> String {
    let mut body = String::new();
    let _ = write!(
        body,
        r#"<section class="box"><h2>description</h2><p class="description">{}</p>{}</section>"#,
        if e.description.is_empty() {
            r#"<span class="dim">none</span>"#.to_string()
        } else {
            esc(&e.description)
        },
        if e.reason.is_empty() {
            String::new()
        } else {
            format!(
                r#"<p class="reason"><b>why {}:</b> {}</p>"#,
                e.status(),
                esc(&e.reason)
            )
        }
    );
    body
}

/// The change: the commits, its size and its diff (or why there is none).
fn change_box(tag: &str, e: &ExperimentRecord, diff: Result<String, String>) -> String {
    let mut body = String::new();
    // Only an experiment with a candidate was archived (as `hone show` says it).
    let archived = match e.candidate_commit {
        Some(_) => format!(" · archive ref <code>refs/hone/{}/{}</code>", esc(tag), e.n),
        None => String::new(),
    };
    let _ = write!(
        body,
        r#"<section class="box"><h2>change</h2><p class="dim">parent <code>{}</code> · candidate <code>{}</code>{archived} · {} file(s), <span class="plus">+{}</span> <span class="minus">−{}</span></p>{}</section>"#,
        esc(&e.parent_commit),
        esc(e.candidate_commit.as_deref().unwrap_or("-")),
        e.files_changed,
        e.lines_added,
        e.lines_deleted,
        match diff {
            Ok(d) if d.is_empty() => r#"<p class="note">no change from the parent</p>"#.into(),
            Ok(d) => format!(r#"<pre class="diff" id="diff">{}</pre>"#, diff_html(&d)),
            Err(m) => format!(r#"<p class="note">{}</p>"#, esc(&m)),
        }
    );
    body
}

/// The tail of the experiment's log (or why it cannot be shown).
fn log_box(log: Result<String, String>) -> String {
    let mut body = String::new();
    let _ = write!(
        body,
        r#"<section class="box"><h2>log tail</h2>{}</section>"#,
        match log {
            Ok(text) => format!(r#"<pre class="log" id="log">{}</pre>"#, esc(&text)),
            Err(m) => format!(r#"<p class="note">{}</p>"#, esc(&m)),
        }
    );
    body
}

fn metrics_box(run: &RunRecord, e: &ExperimentRecord) -> String {
    let mut rows = String::new();
    let mut row = |k: &str, v: &str| {
        let _ = write!(rows, "<tr><th>{}</th><td>{v}</td></tr>", esc(k));
    };
    row(
        &format!("{} (objective)", run.metric),
        &fmt_metric(e.objective),
    );
    for (k, v) in &e.metrics {
        if *k != run.metric {
            row(k, &fmt_metric(Some(*v)));
        }
    }
    if let Some(h) = e.holdout {
        row("holdout (sealed)", &fmt_metric(Some(h)));
    }
    if e.runs.len() > 1 {
        let runs: Vec<String> = e.runs.iter().map(|v| fmt_metric(Some(*v))).collect();
        row("runs", &runs.join(", "));
    }
    row(
        "time",
        &format!(
            "total {} · propose {} · gate {} · verify {}",
            duration_ms(e.total_ms),
            duration_ms(e.propose_ms),
            duration_ms(e.gate_ms),
            duration_ms(e.verify_ms)
        ),
    );
    if e.tokens > 0 || e.cost_usd > 0.0 {
        row(
            "proposer",
            &format!("{} tokens · {}", e.tokens, cost(e.cost_usd)),
        );
    }
    row("started", &utc(e.started_at));
    if let Some(c) = &e.config {
        row(
            "configuration",
            &format!("<code>{}</code>", esc(&c.to_string())),
        );
    }
    format!(r#"<section class="box"><h2>metrics</h2><table class="kv">{rows}</table></section>"#)
}

fn decision_box(e: &ExperimentRecord) -> String {
    let Some(j) = &e.judgement else {
        return format!(
            r#"<section class="box"><h2>decision</h2><p>{}</p><p class="note">{}</p></section>"#,
            badge(e.status().as_str()),
            if e.reason.is_empty() {
                "no keep/discard judgement was needed".to_string()
            } else {
                esc(&e.reason)
            }
        );
    };
    let verdict = if j.simplification {
        "keep as a simplification"
    } else if j.keep {
        "keep"
    } else {
        "discard"
    };
    let runs: Vec<String> = j.runs.iter().map(|v| fmt_metric(Some(*v))).collect();
    format!(
        r#"<section class="box"><h2>decision</h2><table class="kv"><tr><th>verdict</th><td><b>{verdict}</b></td></tr><tr><th>improvement</th><td>{:+.6} (positive is better)</td></tr><tr><th>threshold</th><td>{:.6}</td></tr><tr><th>noise σ</th><td>{}</td></tr><tr><th>candidate mean</th><td>{} over {} run(s): {}</td></tr><tr><th>best before</th><td>{}</td></tr></table><p class="reason">{}</p></section>"#,
        j.delta,
        j.threshold,
        j.sigma
            .map(|s| format!("{s:.6}"))
            .unwrap_or_else(|| "unknown".into()),
        fmt_metric(Some(j.candidate_mean)),
        j.runs.len(),
        runs.join(", "),
        fmt_metric(Some(j.best)),
        esc(&j.reason)
    )
}

/// The candidate's diff from its parent, cut at [`MAX_DIFF_BYTES`].
fn diff_of(root: &Path, parent: &str, candidate: Option<&str>) -> Result<String, String> {
    let Some(c) = candidate else {
        return Err(
            "no candidate commit (nothing was proposed, or it could not be applied)".into(),
        );
    };
    if c == parent {
        return Ok(String::new());
    }
    let git = hone::workspace::Git::discover(root).map_err(|e| format!("diff unavailable: {e}"))?;
    let mut d = git
        .diff(parent, c)
        .map_err(|e| format!("diff unavailable: {e}"))?;
    if d.len() > MAX_DIFF_BYTES {
        let mut cut = MAX_DIFF_BYTES;
        while !d.is_char_boundary(cut) {
            cut -= 1;
        }
        d.truncate(cut);
        d.push_str("\n… (diff cut here; `hone show` prints all of it)\n");
    }
    Ok(d)
}

/// The last lines of a log, read only from under the repository's `.hone/` directory.
fn log_tail(root: &Path, path: &Path) -> Result<String, String> {
    let state = hone::engine::StatePaths::new(root).dir;
    let (Ok(state), Ok(real)) = (state.canonicalize(), path.canonicalize()) else {
        return Err(format!("log {} is gone", path.display()));
    };
    if !real.starts_with(&state) {
        return Err("the log is outside this repository's .hone directory; not shown".into());
    }
    let mut f = std::fs::File::open(&real).map_err(|e| format!("cannot read the log: {e}"))?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let from = len.saturating_sub(LOG_TAIL_BYTES);
    f.seek(SeekFrom::Start(from))
        .map_err(|e| format!("cannot read the log: {e}"))?;
    let mut bytes = Vec::new();
    f.take(LOG_TAIL_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read the log: {e}"))?;
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    // A cut first line is dropped rather than shown half.
    let skip = usize::from(from > 0);
    let start = lines
        .len()
        .saturating_sub(LOG_TAIL_LINES)
        .max(skip.min(lines.len()));
    if lines.is_empty() {
        return Ok("(empty)".into());
    }
    Ok(lines[start..].join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_archived_candidate_names_its_archive_ref() {
        let mut e = ExperimentRecord {
            n: 6,
            ..ExperimentRecord::default()
        };
        let page = change_box("t", &e, Ok(String::new()));
        assert!(!page.contains("archive ref"), "{page}");
        e.candidate_commit = Some("abc".into());
        let page = change_box("t", &e, Ok(String::new()));
        assert!(
            page.contains("archive ref <code>refs/hone/t/6</code>"),
            "{page}"
        );
    }
}
