//! The runs list: every run of the repository, newest first, with its state, metric,
//! baseline, best and change (the dashboard's front page).

use std::fmt::Write as _;

use axum::extract::State;
use axum::response::Html;
use hone::report::{self, fmt_metric};
use hone::store::RunState;

use super::{is_live, PageError};
use crate::db::AppError;
use crate::html::{esc, page, url, utc};
use crate::AppState;

pub(super) async fn runs_page(State(st): State<AppState>) -> Result<Html<String>, PageError> {
    let root = st.repo_root.clone();
    let rows = st
        .db
        .read(move |store| {
            let mut out = Vec::new();
            for run in store.runs()?.into_iter().rev() {
                let live = is_live(&root, &run);
                out.push((report::summarize_stored(store, &run)?, run, live));
            }
            Ok(out)
        })
        .await;
    let rows = match rows {
        Err(AppError::NoStore) => {
            let body = format!(
                r#"<h1>Runs</h1><p class="note">{}</p>"#,
                esc(&AppError::NoStore.message())
            );
            return Ok(Html(page(&st.links, "Runs", &[], &body)));
        }
        r => r?,
    };
    let mut body = String::from("<h1>Runs</h1>\n");
    if rows.is_empty() {
        body.push_str(r#"<p class="note">No runs yet: start one with <code>hone run</code>.</p>"#);
    } else {
        body.push_str(
            r#"<table class="grid runs"><thead><tr><th>run</th><th>state</th><th>metric</th><th class="num">experiments</th><th class="num">baseline</th><th class="num">best</th><th class="num">change</th><th>agent</th><th>started</th></tr></thead><tbody>"#,
        );
        for (s, run, live) in &rows {
            let _ = write!(
                body,
                r#"<tr><td><a href="{}">{}</a></td><td>{}</td><td>{} <span class="dim">({})</span></td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td>{}</td><td>{}</td></tr>"#,
                esc(&st.links.to(&format!("/runs/{}", url(&run.tag)))),
                esc(&run.tag),
                state_badge(run.state, run.stop_reason.as_deref(), *live),
                esc(&run.metric),
                esc(run.direction.as_str()),
                s.experiments,
                fmt_metric(s.baseline),
                fmt_metric(s.best),
                change(s.change_pct),
                esc(&run.agent),
                utc(run.created_at)
            );
        }
        body.push_str("</tbody></table>\n");
    }
    Ok(Html(page(&st.links, "Runs", &[], &body)))
}

/// The run's state as a badge: the words `hone status` uses (a run stopped on an error is
/// not "interrupted"), what to do next as its title.
pub(crate) fn state_badge(state: RunState, stop_reason: Option<&str>, live: bool) -> String {
    let (words, next) = state.words(stop_reason, live);
    let class = if state == RunState::Running && live {
        "live"
    } else {
        "idle"
    };
    match next {
        Some(next) => format!(
            r#"<span class="badge {class}" title="{}">{}</span>"#,
            esc(next),
            esc(words)
        ),
        None => format!(r#"<span class="badge {class}">{}</span>"#, esc(words)),
    }
}

pub(super) fn change(pct: Option<f64>) -> String {
    pct.map(|p| format!("{p:+.2}%"))
        .unwrap_or_else(|| "-".into())
}
