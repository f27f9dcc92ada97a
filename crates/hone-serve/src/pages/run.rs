//! The run page: its title, counters, progress plot and experiment table, read in one go
//! ([`RunView`]); the counters and the table are also rendered alone for its live updates.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{header, HeaderMap};
use axum::response::Response;
use hone::report::{self, fmt_metric, Summary};
use hone::store::{ExperimentRecord, RunRecord, RunState, RunTotals, Status, Store, StoreError};

use super::runs::change;
use super::{state_badge, table_html, PageError, Table, TableParams};
use crate::compress::{self, Deflated};
use crate::db::{run_by_tag, AppError};
use crate::html::{badge, cost, duration_ms, esc, page_parts, short, url, utc, Links};
use crate::AppState;

/// Kept experiments labelled on the plot at most (the biggest gains and the best).
const PLOT_LABELS: usize = 15;

/// Everything the run page shows, read in one go.
pub(crate) struct RunView {
    pub run: RunRecord,
    pub summary: Summary,
    /// A `hone run` holds the repository's lock and this run is the one it is running.
    pub live: bool,
    /// Changes whenever something on the page would (see [`mark`]).
    pub mark: String,
    /// The plot (see [`RunView::plot`]), compressed once for every page that shows it.
    drawn: Arc<Drawn>,
    /// Changes whenever the plot's drawing does (a hash of it): a live update sends the plot
    /// again only when the page's key differs.
    pub plot_key: String,
    /// The plot's title (as text, not escaped).
    pub plot_title: String,
    pub rows: Vec<ExperimentRecord>,
    pub matching: u64,
    pub table: Table,
    /// How its links are made (with the token).
    pub links: Links,
}

impl RunView {
    /// The progress plot (SVG), as drawn under the view's mark.
    pub fn plot(&self) -> &str {
        &self.drawn.plot
    }
}

/// Is this run the one a `hone run` is working on right now?
pub(crate) fn is_live(repo_root: &Path, run: &RunRecord) -> bool {
    run.state == RunState::Running && hone::engine::is_running(repo_root)
}

/// The run's change mark as one string (what the event stream compares).
pub(crate) fn mark(store: &Store, repo_root: &Path, run: &RunRecord) -> Result<String, AppError> {
    let m = store.run_change_mark(run.id)?.unwrap_or_default();
    Ok(format!(
        "{}.{}.{}.{}.{}.{}.{}",
        m.experiments,
        m.running,
        m.last_write,
        m.last_event,
        m.live_points,
        m.state,
        is_live(repo_root, run)
    ))
}

/// What the run page draws from every experiment (the summary's figures and the plot),
/// worked out once per change of the run's mark.
pub(crate) struct Drawn {
    mark: String,
    baseline: Option<ExperimentRecord>,
    best: Option<ExperimentRecord>,
    totals: RunTotals,
    plot: String,
    /// The plot deflated once: when the page that drew it is sent with gzip, its progress
    /// plot on the drawing's thread and its learning curves after (see [`draw`]); else when
    /// a page is first sent with gzip.
    plot_deflated: OnceLock<Deflated>,
    plot_key: String,
    plot_title: String,
    /// What an agent run's best changed against its baseline, read from its commits
    /// ([`agent_best`]).
    agent_best: Option<String>,
}

/// What the best of an agent run (whose records hold no configuration) changed against its
/// baseline, in numbers, read from the commits of the repository at `repo_root`; the summary's
/// own comparison for a knob run is left to it.
pub(crate) fn agent_best(store: &Store, repo_root: &Path, run: &RunRecord) -> Option<String> {
    let git = hone::workspace::Git::discover(repo_root).ok()?;
    hone::engine::best_vs_baseline_of_run(&git, store, run)
}

impl Drawn {
    fn plot_deflated(&self) -> &Deflated {
        self.plot_deflated.get_or_init(|| Deflated::new(&self.plot))
    }
}

/// The last [`Drawn`] of each run (by id): a page asked again, or by another tab or the live
/// update of each open page, costs a few indexed queries until the run's mark changes.
#[derive(Default)]
pub(crate) struct ViewCache(Mutex<HashMap<i64, Arc<Drawn>>>);

impl ViewCache {
    fn get(&self, run_id: i64, mark: &str) -> Option<Arc<Drawn>> {
        let cache = self.0.lock().ok()?;
        cache.get(&run_id).filter(|d| d.mark == mark).cloned()
    }

    fn put(&self, run_id: i64, drawn: Arc<Drawn>) {
        if let Ok(mut cache) = self.0.lock() {
            cache.insert(run_id, drawn);
        }
    }
}

/// The plot's experiments picked by the database (`report::stored::drawing_beside`: a few
/// thousand rows however long the run), the learning curves of the newest ones, the totals
/// from the run's tallies, the baseline and the best by index: no run of 100,000 experiments
/// is read whole. What `beside` reads is read while the plot is drawn on a thread of its own,
/// which then works out the plot's key and (`deflate`: for a page sent with gzip) deflates it.
fn draw<T>(
    store: &Store,
    run: &RunRecord,
    mark: String,
    deflate: bool,
    beside: impl FnOnce(&Store) -> Result<T, StoreError>,
) -> Result<(Drawn, T), AppError> {
    let totals = store.run_totals(run.id)?;
    let title = format!("{} ({} experiments)", run.metric, totals.experiments);
    let escaped = hone::util::html_escape(&title);
    let done = |plot: &str| {
        let key = key_without(plot, &escaped);
        (key, deflate.then(|| Deflated::new(plot)))
    };
    let (drawn, (mut key, deflated), (baseline, best, other)) =
        report::stored::drawing_beside(store, run, &title, PLOT_LABELS, done, |store| {
            Ok((
                store.first_with_status(run.id, Status::Baseline)?,
                store.best_of_run(run.id)?,
                beside(store)?,
            ))
        })?;
    let mut plot = drawn.plot;
    let plot_deflated = OnceLock::new();
    if let Some(curves) = &drawn.curves {
        std::hash::Hash::hash(curves, &mut key);
        plot.push_str(curves);
        if let Some(d) = deflated {
            let _ = plot_deflated.set(d.then(Deflated::new(curves)));
        }
    } else if let Some(d) = deflated {
        let _ = plot_deflated.set(d);
    }
    let drawn = Drawn {
        mark,
        baseline,
        best,
        totals,
        plot_key: format!("{:016x}", std::hash::Hasher::finish(&key)),
        plot_title: title,
        plot,
        plot_deflated,
        agent_best: None,
    };
    Ok((drawn, other))
}

/// The plot's key (not a secret: it only tells a page whether its plot is current), begun
/// from the drawing without its title: a new experiment that moves no point of the drawing
/// changes the plot's title alone, which a live update sets by itself.
fn key_without(plot: &str, title: &str) -> std::collections::hash_map::DefaultHasher {
    use std::hash::Hasher;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    match plot.find(title).filter(|_| !title.is_empty()) {
        Some(i) => {
            h.write(&plot.as_bytes()[..i]);
            h.write(&plot.as_bytes()[i + title.len()..]);
        }
        None => h.write(plot.as_bytes()),
    }
    h
}

/// The run page's view of run `tag` at one moment; `deflate`: a new drawing's plot is
/// deflated on its drawing's thread (the page is sent with gzip).
pub(crate) fn load_run_view(
    store: &Store,
    repo_root: &Path,
    tag: &str,
    (table, links): (Table, Links),
    cache: &ViewCache,
    deflate: bool,
) -> Result<RunView, AppError> {
    // One moment of the store: the mark, the plot, the totals and the table all read in one
    // snapshot, so that the drawing kept under a mark is the one of that mark.
    store.read_consistent(|store| {
        let run = run_by_tag(store, tag)?;
        let mark = mark(store, repo_root, &run)?;
        // A new drawing has the table's page read while its plot is drawn.
        let page = |store: &Store| store.experiments_page(run.id, &table.query());
        let (drawn, (rows, matching)) = match cache.get(run.id, &mark) {
            Some(d) => (d, page(store)?),
            None => {
                let (mut d, rows) = draw(store, &run, mark.clone(), deflate, page)?;
                d.agent_best = agent_best(store, repo_root, &run);
                let d = Arc::new(d);
                cache.put(run.id, Arc::clone(&d));
                (d, rows)
            }
        };
        let mut summary = report::summarize_parts(
            &run,
            drawn.baseline.as_ref(),
            drawn.best.as_ref(),
            &drawn.totals,
        );
        if summary.best_vs_baseline.is_none() {
            summary.best_vs_baseline = drawn.agent_best.clone();
        }
        let plot_key = drawn.plot_key.clone();
        let plot_title = drawn.plot_title.clone();
        Ok(RunView {
            live: is_live(repo_root, &run),
            run,
            summary,
            mark,
            drawn,
            plot_key,
            plot_title,
            rows,
            matching,
            table,
            links,
        })
    })
}

pub(super) async fn run_page(
    State(st): State<AppState>,
    UrlPath(tag): UrlPath<String>,
    Query(params): Query<TableParams>,
    headers: HeaderMap,
) -> Result<Response, PageError> {
    let table = Table::parse(&params)?;
    let root = st.repo_root.clone();
    let t = tag.clone();
    let gzip = headers
        .get(header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(compress::accepts_gzip);
    let view = st
        .db
        .read({
            let st = st.clone();
            move |store| {
                let view =
                    load_run_view(store, &root, &t, (table, st.links.clone()), &st.views, gzip)?;
                if gzip {
                    // Off the server's async threads: the plot is deflated here, once.
                    view.drawn.plot_deflated();
                }
                Ok(view)
            }
        })
        .await?;
    // The page in three parts, the plot (most of a long run's page) compressed only once.
    let (head, tail) = page_parts(
        &st.links,
        &format!("run {}", view.run.tag),
        &[(format!("run {}", view.run.tag), None)],
    );
    let mut before = head;
    let utag = url(&view.run.tag);
    let _ = write!(
        before,
        r#"<div class="run" id="run" data-tag="{tag}" data-mark="{mark}" data-events="{events}" data-view="{view_api}" data-plot-key="{plot_key}">
<div class="title"><h1>{tag}</h1><span id="state">{state}</span><span id="conn" class="conn"></span><span class="dim">{metric} · {direction} · {agent} · branch {branch} · started {started}</span></div>
<section id="counters" class="counters">{counters}</section>
<section id="plot" class="plot">"#,
        tag = esc(&view.run.tag),
        mark = esc(&view.mark),
        state = state_badge(view.run.state, view.run.stop_reason.as_deref(), view.live),
        metric = esc(&view.run.metric),
        direction = esc(view.run.direction.as_str()),
        agent = esc(&view.run.agent),
        branch = esc(&view.run.branch),
        started = utc(view.run.created_at),
        counters = counters_html(&view),
        plot_key = esc(&view.plot_key),
        events = esc(&st.links.to(&format!("/api/runs/{utag}/events"))),
        view_api = esc(&st.links.to(&format!("/api/runs/{utag}/view"))),
    );
    let after = format!(
        "</section>\n<section id=\"table\">{}</section>\n</div>{tail}",
        table_html(&view)
    );
    let deflated = gzip.then(|| view.drawn.plot_deflated());
    Ok(compress::html_around(
        &before,
        (view.plot(), deflated),
        &after,
    ))
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
                    r#"<a href="{}">#{n}</a> {}"#,
                    esc(&v
                        .links
                        .to(&format!("/runs/{}/experiments/{n}", url(&v.run.tag)))),
                    esc(&short(s.best_description.as_deref().unwrap_or(""), 60))
                )
            })
            .unwrap_or_default(),
    );
    let changed = s
        .best_vs_baseline
        .as_deref()
        .map(|d| format!("<br>{}", esc(&short(d, 120))))
        .unwrap_or_default();
    card(
        &mut out,
        "baseline → best",
        &change(s.change_pct),
        &format!(
            "{} → {}{changed}",
            fmt_metric(s.baseline),
            fmt_metric(s.best)
        ),
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
    card(
        &mut out,
        "state",
        &state_badge(v.run.state, v.run.stop_reason.as_deref(), v.live),
        &state_note(v),
    );
    out
}

/// What the state card says below the state: who writes to the run, why it stopped, or how
/// to resume it.
fn state_note(v: &RunView) -> String {
    match (&v.summary.stop_reason, v.live) {
        (_, true) => "a hone run is writing to it".to_string(),
        (Some(r), _) => esc(r),
        (None, false) if v.run.state == RunState::Running => "`hone run` resumes it".into(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::Hasher as _;

    /// Two drawings that differ in their title alone have one key; a point more, another.
    #[test]
    fn a_plots_key_leaves_its_title_out() {
        let key = |title: &str, points: &str| {
            let plot = format!("<svg><text>{title}</text>{points}</svg>");
            key_without(&plot, title).finish()
        };
        let five = key("loss (5 experiments)", "<circle/>");
        assert_eq!(five, key("loss (6 experiments)", "<circle/>"));
        assert_ne!(five, key("loss (6 experiments)", "<circle/><circle/>"));
        // A title that is not there: the whole drawing is the key.
        assert_ne!(five, key_without("<svg><circle/></svg>", "loss").finish());
    }
}
