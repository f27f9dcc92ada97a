//! The JSON side: runs and their summaries, experiment pages (the same sorting, filter and
//! paging as the table), the run page's parts rendered for its live updates, and the event
//! stream (`/api/runs/{tag}/events`): server-sent events that poll the store's cheap change
//! mark every [`POLL`] and push a `change` event whenever it moves (and once on connect, so a
//! page rendered a moment before the stream opened catches up).

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path as UrlPath, Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use futures_util::stream::{self, Stream};
use hone::report;
use serde_json::json;

use crate::db::{run_by_tag, AppError};
use crate::pages::{
    counters_html, filter_bar, is_live, load_run_view, mark, pager, rows_since, state_badge,
    table_html, Table, TableParams,
};
use crate::AppState;

/// How often an event stream looks at the store.
pub(crate) const POLL: Duration = Duration::from_millis(500);

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/runs", get(runs))
        .route("/api/runs/{tag}", get(run))
        .route("/api/runs/{tag}/experiments", get(experiments))
        .route("/api/runs/{tag}/view", get(view))
        .route("/api/runs/{tag}/events", get(events))
}

/// An error as JSON: `{"error": "..."}`.
pub(crate) struct ApiError(AppError);

impl From<AppError> for ApiError {
    fn from(e: AppError) -> Self {
        ApiError(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0.status(), Json(json!({ "error": self.0.message() }))).into_response()
    }
}

type ApiResult = Result<Json<serde_json::Value>, ApiError>;

/// A run's summary as `hone status --json` gives it: an agent run's best against its baseline
/// read from its commits too.
fn summary_of(
    store: &hone::store::Store,
    root: &std::path::Path,
    run: &hone::store::RunRecord,
) -> Result<report::Summary, hone::store::StoreError> {
    let mut s = report::summarize_stored(store, run)?;
    if s.best_vs_baseline.is_none() {
        s.best_vs_baseline = crate::pages::agent_best(store, root, run);
    }
    Ok(s)
}

async fn runs(State(st): State<AppState>) -> ApiResult {
    let root = st.repo_root.clone();
    let runs = st
        .db
        .read(move |store| {
            let mut out = Vec::new();
            for run in store.runs()? {
                out.push(json!({
                    "summary": summary_of(store, &root, &run)?,
                    "live": is_live(&root, &run),
                    "created_at": run.created_at,
                }));
            }
            Ok(out)
        })
        .await?;
    Ok(Json(json!({ "runs": runs })))
}

async fn run(State(st): State<AppState>, UrlPath(tag): UrlPath<String>) -> ApiResult {
    let root = st.repo_root.clone();
    Ok(Json(
        st.db
            .read(move |store| {
                let run = run_by_tag(store, &tag)?;
                Ok(json!({
                    "summary": summary_of(store, &root, &run)?,
                    "live": is_live(&root, &run),
                    "mark": mark(store, &root, &run)?,
                }))
            })
            .await?,
    ))
}

async fn experiments(
    State(st): State<AppState>,
    UrlPath(tag): UrlPath<String>,
    Query(params): Query<TableParams>,
) -> ApiResult {
    let table = Table::parse(&params)?;
    Ok(Json(
        st.db
            .read(move |store| {
                let run = run_by_tag(store, &tag)?;
                let (rows, total) = store.experiments_page(run.id, &table.query())?;
                Ok(json!({
                    "total": total,
                    "page": table.page,
                    "per": table.per,
                    "experiments": rows,
                }))
            })
            .await?,
    ))
}

/// What a page already holds, sent with its live update (both optional).
#[derive(serde::Deserialize, Default)]
pub(crate) struct Held {
    /// The key of the plot it shows: the plot is left out when it is still current.
    plot: Option<String>,
    /// In the default view (newest first, page 1), the smallest number of a row that may have
    /// changed (a row in flight) or the next number: only the rows from there are sent.
    since: Option<u64>,
}

/// The run page's live parts as HTML (escaped on the server, like the page itself). Sent
/// whole unless the page says what it holds ([`Held`]): then the counters, the plot only if
/// its drawing changed, and in the default view the changed and new rows (with the status
/// filters and the pager) instead of the table.
async fn view(
    State(st): State<AppState>,
    UrlPath(tag): UrlPath<String>,
    Query(params): Query<TableParams>,
    Query(held): Query<Held>,
) -> ApiResult {
    let table = Table::parse(&params)?;
    let root = st.repo_root.clone();
    let views = st.clone();
    Ok(Json(
        st.db
            .read(move |store| {
                let v = load_run_view(
                    store,
                    &root,
                    &tag,
                    (table, views.links.clone()),
                    &views.views,
                    false,
                )?;
                let mut out = json!({
                    "mark": v.mark,
                    "counters": counters_html(&v),
                    "plot_key": v.plot_key,
                    "plot_title": v.plot_title,
                    "state": state_badge(v.run.state, v.run.stop_reason.as_deref(), v.live),
                    "experiments": v.summary.experiments,
                });
                if held.plot.as_deref() != Some(v.plot_key.as_str()) {
                    out["plot"] = json!(v.plot());
                }
                match held.since {
                    Some(since) if v.table.newest_first() => {
                        out["rows"] = json!(rows_since(&v, since));
                        out["filters"] = json!(filter_bar(&v));
                        out["pager"] = json!(pager(&v));
                    }
                    _ => out["table"] = json!(table_html(&v)),
                }
                Ok(out)
            })
            .await?,
    ))
}

async fn events(
    State(st): State<AppState>,
    UrlPath(tag): UrlPath<String>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let t = tag.clone();
    let run = st.db.read(move |store| run_by_tag(store, &t)).await?;
    let mut ticker = tokio::time::interval(POLL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // State: (ticker, last mark sent). The stream ends when the run or the store goes away.
    let stream = stream::unfold((ticker, None::<String>), move |(mut ticker, last)| {
        let st = st.clone();
        let run = run.clone();
        async move {
            let mut stopping = st.stopping.clone();
            loop {
                if *stopping.borrow() {
                    return None;
                }
                tokio::select! {
                    _ = ticker.tick() => {}
                    _ = stopping.changed() => return None,
                }
                let root = st.repo_root.clone();
                let r = run.clone();
                let current = st
                    .db
                    .read(move |store| {
                        let run = store.run_by_tag(&r.tag)?.ok_or(AppError::NoStore)?;
                        let m = mark(store, &root, &run)?;
                        let count = store
                            .run_change_mark(run.id)?
                            .map(|m| m.experiments)
                            .unwrap_or(0);
                        let live = is_live(&root, &run);
                        Ok((m, count, run.state, live))
                    })
                    .await;
                let (m, count, state, live) = match current {
                    Ok(c) => c,
                    Err(AppError::Internal(_)) => continue,
                    Err(_) => return None,
                };
                if last.as_deref() == Some(m.as_str()) {
                    continue;
                }
                let data = json!({ "mark": m, "experiments": count, "state": state, "live": live });
                let event = Event::default().event("change").data(data.to_string());
                return Some((Ok(event), (ticker, Some(m))));
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}
