//! The dashboard's stylesheet and script, compiled into the binary (no CDN, nothing fetched
//! at run time) and served with their content types.

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

const STYLE: &str = include_str!("assets/style.css");
const SCRIPT: &str = include_str!("assets/app.js");

pub(crate) fn routes() -> Router {
    Router::new()
        .route(
            "/assets/style.css",
            get(|| async { ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE) }),
        )
        .route(
            "/assets/app.js",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
                    SCRIPT,
                )
                    .into_response()
            }),
        )
        .route("/healthz", get(|| async { "ok\n" }))
}
