//! The dashboard's HTML pages: the runs list, a run (counters, progress plot, experiment
//! table with sorting, status filter and paging done in SQL) and one experiment
//! (description, metrics, the decision's reasoning, the highlighted diff and the log tail).
//! The run page's parts are also rendered alone ([`RunView`]) for its live updates.

use std::fmt::Write as _;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::Path;

use axum::extract::{Path as UrlPath, Query, State};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use hone::report::{self, fmt_metric, Summary};
use hone::store::{ExperimentQuery, ExperimentRecord, RunRecord, RunState, SortKey, Status, Store};

use crate::db::{run_by_tag, AppError};
use crate::highlight::diff_html;
use crate::html::{badge, cost, duration_ms, esc, page, short, url, utc};
use crate::AppState;

/// Rows per table page unless asked otherwise, and the most one page may hold.
const PER_PAGE: u64 = 50;
const MAX_PER_PAGE: u64 = 500;
/// The most of a diff and of a log shown on an experiment page.
const MAX_DIFF_BYTES: usize = 512 * 1024;
const LOG_TAIL_BYTES: u64 = 64 * 1024;
const LOG_TAIL_LINES: usize = 200;
/// Kept experiments labelled on the plot at most (the biggest gains and the best).
const PLOT_LABELS: usize = 15;

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(runs_page))
        .route("/runs/{tag}", get(run_page))
        .route("/runs/{tag}/experiments/{n}", get(experiment_page))
}

/// An error as a page.
pub(crate) struct PageError(AppError);

impl From<AppError> for PageError {
    fn from(e: AppError) -> Self {
        PageError(e)
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let title = match self.0 {
            AppError::NoStore => "No runs yet",
            AppError::NotFound(_) => "Not found",
            AppError::BadRequest(_) => "Bad request",
            AppError::Internal(_) => "Error",
        };
        let body = format!(
            r#"<h1>{}</h1><p class="note">{}</p>"#,
            esc(title),
            esc(&self.0.message())
        );
        (self.0.status(), Html(page(title, &[], &body))).into_response()
    }
}

/// The experiment table's query parameters, as they come in the URL.
#[derive(serde::Deserialize, Default, Clone, Debug)]
pub(crate) struct TableParams {
    status: Option<String>,
    sort: Option<String>,
    dir: Option<String>,
    page: Option<u64>,
    per: Option<u64>,
}

/// The experiment table's view: filter, order and page.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Table {
    pub status: Option<Status>,
    pub sort: SortKey,
    pub descending: bool,
    /// 1-based.
    pub page: u64,
    pub per: u64,
}

impl Table {
    pub fn parse(p: &TableParams) -> Result<Table, AppError> {
        let status = match p.status.as_deref() {
            None | Some("") | Some("all") => None,
            Some(s) => Some(Status::parse(s).ok_or_else(|| {
                AppError::BadRequest(format!(
                    "unknown status `{s}`; use one of running, {}",
                    Status::ALL
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?),
        };
        let sort = match p.sort.as_deref() {
            None | Some("") => SortKey::Number,
            Some(s) => SortKey::parse(s).ok_or_else(|| {
                AppError::BadRequest(format!(
                    "cannot sort by `{s}`; use one of {}",
                    SortKey::ALL
                        .iter()
                        .map(|k| k.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?,
        };
        let descending = match p.dir.as_deref() {
            None | Some("") => sort == SortKey::Number,
            Some("desc") => true,
            Some("asc") => false,
            Some(d) => {
                return Err(AppError::BadRequest(format!(
                    "dir must be asc or desc, not `{d}`"
                )))
            }
        };
        Ok(Table {
            status,
            sort,
            descending,
            page: p.page.unwrap_or(1).max(1),
            per: p.per.unwrap_or(PER_PAGE).clamp(1, MAX_PER_PAGE),
        })
    }

    pub fn query(&self) -> ExperimentQuery {
        ExperimentQuery {
            status: self.status,
            sort: self.sort,
            descending: self.descending,
            limit: self.per,
            offset: (self.page - 1).saturating_mul(self.per),
        }
    }

    /// This view's query string (non-default parts only), with `edit` applied first.
    pub fn href(&self, edit: impl FnOnce(&mut Table)) -> String {
        let mut t = self.clone();
        edit(&mut t);
        let mut q = form_urlencoded::Serializer::new(String::new());
        if let Some(s) = t.status {
            q.append_pair("status", s.as_str());
        }
        if t.sort != SortKey::Number {
            q.append_pair("sort", t.sort.as_str());
        }
        if t.descending != (t.sort == SortKey::Number) {
            q.append_pair("dir", if t.descending { "desc" } else { "asc" });
        }
        if t.page != 1 {
            q.append_pair("page", &t.page.to_string());
        }
        if t.per != PER_PAGE {
            q.append_pair("per", &t.per.to_string());
        }
        let q = q.finish();
        if q.is_empty() {
            "?".into()
        } else {
            format!("?{q}")
        }
    }
}

/// Everything the run page shows, read in one go.
pub(crate) struct RunView {
    pub run: RunRecord,
    pub summary: Summary,
    /// A `hone run` holds the repository's lock and this run is the one it is running.
    pub live: bool,
    /// Changes whenever something on the page would (see [`mark`]).
    pub mark: String,
    pub plot: String,
    pub rows: Vec<ExperimentRecord>,
    pub matching: u64,
    pub table: Table,
}

/// Is this run the one a `hone run` is working on right now?
pub(crate) fn is_live(repo_root: &Path, run: &RunRecord) -> bool {
    run.state == RunState::Running && hone::engine::is_running(repo_root)
}

/// The run's change mark as one string (what the event stream compares).
pub(crate) fn mark(store: &Store, repo_root: &Path, run: &RunRecord) -> Result<String, AppError> {
    let m = store.run_change_mark(run.id)?.unwrap_or_default();
    Ok(format!(
        "{}.{}.{}.{}.{}.{}",
        m.experiments,
        m.running,
        m.last_write,
        m.last_event,
        m.state,
        is_live(repo_root, run)
    ))
}

pub(crate) fn load_run_view(
    store: &Store,
    repo_root: &Path,
    tag: &str,
    table: Table,
) -> Result<RunView, AppError> {
    let run = run_by_tag(store, tag)?;
    let mark = mark(store, repo_root, &run)?;
    let outlines = store.experiment_outlines(run.id)?;
    let summary = report::summarize(&run, &outlines);
    let minimize = run.direction == hone::spec::Direction::Minimize;
    let plot = report::plot::progress_svg_labelled(
        &outlines,
        &run.metric,
        minimize,
        &format!("{} ({} experiments)", run.metric, outlines.len()),
        PLOT_LABELS,
    );
    let (rows, matching) = store.experiments_page(run.id, &table.query())?;
    Ok(RunView {
        live: is_live(repo_root, &run),
        run,
        summary,
        mark,
        plot,
        rows,
        matching,
        table,
    })
}

async fn runs_page(State(st): State<AppState>) -> Result<Html<String>, PageError> {
    let root = st.repo_root.clone();
    let rows = st
        .db
        .read(move |store| {
            let mut out = Vec::new();
            for run in store.runs()?.into_iter().rev() {
                let outlines = store.experiment_outlines(run.id)?;
                let live = is_live(&root, &run);
                out.push((report::summarize(&run, &outlines), run, live));
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
            return Ok(Html(page("Runs", &[], &body)));
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
                r#"<tr><td><a href="/runs/{}">{}</a></td><td>{}</td><td>{} <span class="dim">({})</span></td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td>{}</td><td>{}</td></tr>"#,
                url(&run.tag),
                esc(&run.tag),
                state_badge(run.state, *live),
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
    Ok(Html(page("Runs", &[], &body)))
}

pub(crate) fn state_badge(state: RunState, live: bool) -> String {
    match (state, live) {
        (RunState::Running, true) => r#"<span class="badge live">running</span>"#.into(),
        (RunState::Running, false) => r#"<span class="badge idle">interrupted</span>"#.into(),
        (s, _) => format!(r#"<span class="badge idle">{}</span>"#, esc(s.as_str())),
    }
}

fn change(pct: Option<f64>) -> String {
    pct.map(|p| format!("{p:+.2}%"))
        .unwrap_or_else(|| "-".into())
}

async fn run_page(
    State(st): State<AppState>,
    UrlPath(tag): UrlPath<String>,
    Query(params): Query<TableParams>,
) -> Result<Html<String>, PageError> {
    let table = Table::parse(&params)?;
    let root = st.repo_root.clone();
    let t = tag.clone();
    let view = st
        .db
        .read(move |store| load_run_view(store, &root, &t, table))
        .await?;
    let mut body = String::new();
    let _ = write!(
        body,
        r#"<div class="run" id="run" data-tag="{tag}" data-mark="{mark}" data-events="/api/runs/{utag}/events" data-view="/api/runs/{utag}/view">
<div class="title"><h1>{tag}</h1><span id="state">{state}</span><span id="conn" class="conn"></span><span class="dim">{metric} · {direction} · {agent} · branch {branch} · started {started}</span></div>
<section id="counters" class="counters">{counters}</section>
<section id="plot" class="plot">{plot}</section>
<section id="table">{table}</section>
</div>"#,
        tag = esc(&view.run.tag),
        utag = url(&view.run.tag),
        mark = esc(&view.mark),
        state = state_badge(view.run.state, view.live),
        metric = esc(&view.run.metric),
        direction = esc(view.run.direction.as_str()),
        agent = esc(&view.run.agent),
        branch = esc(&view.run.branch),
        started = utc(view.run.created_at),
        counters = counters_html(&view),
        plot = view.plot,
        table = table_html(&view),
    );
    Ok(Html(page(
        &format!("run {}", view.run.tag),
        &[(format!("run {}", view.run.tag), None)],
        &body,
    )))
}

/// The counters: experiments, best, baseline → best, counts by status, cost, state.
pub(crate) fn counters_html(v: &RunView) -> String {
    let s = &v.summary;
    let mut out = String::new();
    let card = |out: &mut String, label: &str, value: &str, note: &str| {
        let _ = write!(
            out,
            r#"<div class="card"><div class="label">{}</div><div class="value">{value}</div><div class="note">{note}</div></div>"#,
            esc(label)
        );
    };
    let running = s.counts.get("running").copied().unwrap_or(0);
    card(
        &mut out,
        "experiments",
        &s.experiments.to_string(),
        &if running > 0 {
            format!("{running} in flight")
        } else {
            String::new()
        },
    );
    card(
        &mut out,
        &format!("best {}", s.metric),
        &fmt_metric(s.best),
        &s.best_experiment
            .map(|n| {
                format!(
                    r#"<a href="/runs/{}/experiments/{n}">#{n}</a> {}"#,
                    url(&v.run.tag),
                    esc(&short(s.best_description.as_deref().unwrap_or(""), 60))
                )
            })
            .unwrap_or_default(),
    );
    card(
        &mut out,
        "baseline → best",
        &change(s.change_pct),
        &format!("{} → {}", fmt_metric(s.baseline), fmt_metric(s.best)),
    );
    let mut counts = String::new();
    for st in std::iter::once(&Status::Running).chain(Status::ALL) {
        if let Some(c) = s.counts.get(st.as_str()) {
            let _ = write!(
                counts,
                r#"<span class="count">{} {c}</span> "#,
                badge(st.as_str())
            );
        }
    }
    card(&mut out, "by status", &counts, "");
    card(
        &mut out,
        "cost",
        &cost(s.cost_usd),
        &format!(
            "verify {} · loop {}",
            duration_ms((s.verify_seconds * 1000.0) as u64),
            duration_ms((s.active_seconds * 1000.0) as u64)
        ),
    );
    let state_note = match (&s.stop_reason, v.live) {
        (_, true) => "a hone run is writing to it".to_string(),
        (Some(r), _) => esc(r),
        (None, false) if v.run.state == RunState::Running => "`hone run` resumes it".into(),
        _ => String::new(),
    };
    card(
        &mut out,
        "state",
        &state_badge(v.run.state, v.live),
        &state_note,
    );
    out
}

/// The experiment table with its filter bar and pager.
pub(crate) fn table_html(v: &RunView) -> String {
    let t = &v.table;
    let tag = url(&v.run.tag);
    let mut out = String::from(r#"<div class="filters"><span class="dim">status:</span> "#);
    let all_count = v.summary.experiments;
    let _ = write!(
        out,
        r#"<a class="filter{}" href="{}">all {all_count}</a> "#,
        if t.status.is_none() { " on" } else { "" },
        esc(&t.href(|t| {
            t.status = None;
            t.page = 1
        }))
    );
    for st in std::iter::once(&Status::Running).chain(Status::ALL) {
        let Some(c) = v.summary.counts.get(st.as_str()) else {
            continue;
        };
        let _ = write!(
            out,
            r#"<a class="filter{}" href="{}">{} {c}</a> "#,
            if t.status == Some(*st) { " on" } else { "" },
            esc(&t.href(|t| {
                t.status = Some(*st);
                t.page = 1
            })),
            esc(st.as_str())
        );
    }
    out.push_str("</div>\n");
    let header = |key: SortKey, label: &str, class: &str| {
        let active = t.sort == key;
        let arrow = match (active, t.descending) {
            (true, true) => " ▼",
            (true, false) => " ▲",
            _ => "",
        };
        // A second click on the active column flips it; a new column starts in its natural order.
        let href = t.href(|t| {
            t.descending = if active {
                !t.descending
            } else {
                key == SortKey::Number
            };
            t.sort = key;
            t.page = 1;
        });
        format!(
            r#"<th class="{class}"><a href="{}" data-sort="{}">{}{arrow}</a></th>"#,
            esc(&href),
            key.as_str(),
            esc(label)
        )
    };
    let _ = write!(
        out,
        r#"<table class="grid experiments" id="experiments"><thead><tr>{}{}{}<th>description</th><th class="num">lines</th>{}{}</tr></thead><tbody>"#,
        header(SortKey::Number, "#", "num"),
        header(SortKey::Status, "status", ""),
        header(SortKey::Objective, &v.run.metric, "num"),
        header(SortKey::Duration, "time", "num"),
        header(SortKey::Cost, "cost", "num"),
    );
    for e in &v.rows {
        let link = format!("/runs/{tag}/experiments/{}", e.n);
        let desc = if e.description.is_empty() {
            e.reason.as_str()
        } else {
            e.description.as_str()
        };
        let _ = write!(
            out,
            r#"<tr id="exp-{n}" data-n="{n}" class="r-{status}"><td class="num"><a href="{link}">{n}</a></td><td>{badge}</td><td class="num">{value}</td><td class="desc"><a href="{link}" title="{full}">{desc}</a></td><td class="num lines"><span class="plus">+{add}</span> <span class="minus">−{del}</span></td><td class="num">{time}</td><td class="num">{cost}</td></tr>"#,
            n = e.n,
            status = e.status().as_str(),
            badge = badge(e.status().as_str()),
            value = fmt_metric(e.objective),
            full = esc(desc),
            desc = esc(&short(desc, 110)),
            add = e.lines_added,
            del = e.lines_deleted,
            time = if e.total_ms > 0 {
                duration_ms(e.total_ms)
            } else {
                "-".into()
            },
            cost = cost(e.cost_usd),
        );
    }
    if v.rows.is_empty() {
        out.push_str(r#"<tr><td colspan="7" class="note">no experiments match</td></tr>"#);
    }
    out.push_str("</tbody></table>\n");
    let pages = v.matching.div_ceil(t.per).max(1);
    let first = (t.page - 1) * t.per + 1;
    let last = (first + v.rows.len() as u64).saturating_sub(1);
    let _ = write!(
        out,
        r#"<div class="pager"><span class="dim">{}–{} of {}</span> "#,
        first.min(v.matching),
        last,
        v.matching
    );
    let link = |out: &mut String, label: &str, to: u64, enabled: bool| {
        if enabled {
            let _ = write!(
                out,
                r#"<a href="{}">{label}</a> "#,
                esc(&t.href(|t| t.page = to))
            );
        } else {
            let _ = write!(out, r#"<span class="off">{label}</span> "#);
        }
    };
    link(&mut out, "« first", 1, t.page > 1);
    link(&mut out, "‹ prev", t.page.saturating_sub(1), t.page > 1);
    let _ = write!(
        out,
        r#"<span class="at">page {} of {pages}</span> "#,
        t.page
    );
    link(&mut out, "next ›", t.page + 1, t.page < pages);
    link(&mut out, "last »", pages, t.page < pages);
    out.push_str("</div>\n");
    out
}

async fn experiment_page(
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
    let _ = write!(
        body,
        r#"<div class="title"><h1>experiment {n}</h1>{badge}<span class="pn">{prev}{next}</span></div>"#,
        n = e.n,
        badge = badge(e.status().as_str()),
        prev = if e.n > 0 {
            format!(
                r#"<a href="/runs/{utag}/experiments/{}">‹ {}</a> "#,
                e.n - 1,
                e.n - 1
            )
        } else {
            String::new()
        },
        next = if e.n + 1 < count {
            format!(
                r#"<a href="/runs/{utag}/experiments/{}">{} ›</a>"#,
                e.n + 1,
                e.n + 1
            )
        } else {
            String::new()
        },
    );
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
    body.push_str(r#"<div class="two">"#);
    body.push_str(&metrics_box(&run, &e));
    body.push_str(&decision_box(&e));
    body.push_str("</div>");
    let _ = write!(
        body,
        r#"<section class="box"><h2>change</h2><p class="dim">parent <code>{}</code> · candidate <code>{}</code> · archive ref <code>refs/hone/{}/{}</code> · {} file(s), <span class="plus">+{}</span> <span class="minus">−{}</span></p>{}</section>"#,
        esc(&e.parent_commit),
        esc(e.candidate_commit.as_deref().unwrap_or("-")),
        esc(&run.tag),
        e.n,
        e.files_changed,
        e.lines_added,
        e.lines_deleted,
        match diff {
            Ok(d) if d.is_empty() => r#"<p class="note">no change from the parent</p>"#.into(),
            Ok(d) => format!(r#"<pre class="diff" id="diff">{}</pre>"#, diff_html(&d)),
            Err(m) => format!(r#"<p class="note">{}</p>"#, esc(&m)),
        }
    );
    if let Some(log) = log {
        let _ = write!(
            body,
            r#"<section class="box"><h2>log tail</h2>{}</section>"#,
            match log {
                Ok(text) => format!(r#"<pre class="log" id="log">{}</pre>"#, esc(&text)),
                Err(m) => format!(r#"<p class="note">{}</p>"#, esc(&m)),
            }
        );
    }
    Ok(Html(page(
        &format!("experiment {} of {}", e.n, run.tag),
        &[
            (format!("run {}", run.tag), Some(format!("/runs/{utag}"))),
            (format!("experiment {}", e.n), None),
        ],
        &body,
    )))
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
    fn table_links_keep_the_view_and_drop_defaults() {
        let t = Table::parse(&TableParams::default()).unwrap();
        assert_eq!(t.href(|_| {}), "?");
        assert!(t.descending, "newest first by default");
        let p = TableParams {
            status: Some("keep".into()),
            sort: Some("objective".into()),
            page: Some(3),
            ..Default::default()
        };
        let t = Table::parse(&p).unwrap();
        assert!(!t.descending);
        assert_eq!(t.query().offset, 100);
        assert_eq!(t.href(|t| t.page = 4), "?status=keep&sort=objective&page=4");
        let bad = TableParams {
            status: Some("<x>".into()),
            ..Default::default()
        };
        assert!(Table::parse(&bad).is_err());
    }
}
