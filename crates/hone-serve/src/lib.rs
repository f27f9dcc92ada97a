//! hone's web side: the dashboard (`hone serve`) and the automation endpoints, an axum
//! server over the run store that `hone run` writes from another process.

pub mod automation;

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use axum::routing::get;
use axum::Router;

/// What `hone serve` was asked to do.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The repository whose `.hone/` store is served.
    pub repo_root: PathBuf,
    /// Address and port to listen on.
    pub addr: SocketAddr,
    /// The token every request must carry (required off loopback).
    pub token: Option<String>,
}

/// The application's routes.
pub fn router() -> Router {
    Router::new().route("/healthz", get(|| async { "ok" }))
}

/// Serves until Ctrl-C.
pub fn serve(opts: &ServeOptions) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(opts.addr)
            .await
            .with_context(|| format!("cannot listen on {}", opts.addr))?;
        axum::serve(listener, router())
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await
            .context("the server failed")
    })
}
