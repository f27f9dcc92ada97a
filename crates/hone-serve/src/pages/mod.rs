//! The dashboard's HTML pages: the runs list, a run (counters, progress plot, experiment
//! table with sorting, status filter and paging done in SQL) and one experiment
//! (description, metrics, the decision's reasoning, the highlighted diff and the log tail).
//! The run page's parts are also rendered alone ([`RunView`]) for its live updates.
//!
//! One file per page ([`runs`], [`run`], [`experiment`]), the run page's experiment table
//! apart ([`table`]); this one holds the routes and the error page.

mod experiment;
mod run;
mod runs;
mod table;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::db::AppError;
use crate::html::{esc, page};
use crate::AppState;

pub(crate) use run::{agent_best, counters_html, is_live, load_run_view, mark, RunView, ViewCache};
pub(crate) use runs::state_badge;
pub(crate) use table::{filter_bar, pager, rows_since, table_html, Table, TableParams};

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(runs::runs_page))
        .route("/runs/{tag}", get(run::run_page))
        .route(
            "/runs/{tag}/experiments/{n}",
            get(experiment::experiment_page),
        )
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
        // Drawn without the token here; [`relink`] draws it again with the server's links.
        let links = crate::html::Links::default();
        let mut res = (self.0.status(), Html(page(&links, title, &[], &body))).into_response();
        res.extensions_mut().insert(ErrorPage { title, body });
        res
    }
}

/// An error page's parts, for [`relink`].
#[derive(Clone)]
struct ErrorPage {
    title: &'static str,
    body: String,
}

/// Draws an error page again with the server's links (its stylesheet, script and home link
/// carry the token, as every page's do): an error knows no state of its own.
pub(crate) async fn relink(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    match res.extensions_mut().remove::<ErrorPage>() {
        Some(e) => (res.status(), Html(page(&st.links, e.title, &[], &e.body))).into_response(),
        None => res,
    }
}
