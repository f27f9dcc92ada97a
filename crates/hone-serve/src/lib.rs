//! hone's web side: the dashboard (`hone serve`) and the automation endpoints, an axum
//! server over the run store that `hone run` writes from another process.
//!
//! The server runs on one current-thread tokio runtime; every SQLite read and git call runs
//! on tokio's blocking pool (`db`), so a slow query never stalls the event streams. Routes
//! live in `pages` (HTML), `api` (JSON and server-sent events) and `assets` (the CSS
//! and script, embedded in the binary); `auth` puts every one of them, and any routes an
//! embedder adds through [`bind_with`], behind the same token and Host checks; `listen`
//! accepts the connections, within [`Limits`] a slow client cannot outlast.

// No function of the shipped code over 80 lines (clippy.toml sets the count); tests and
// examples are left out.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod automation;

mod api;
mod assets;
mod auth;
mod compress;
mod db;
mod highlight;
mod html;
mod listen;
mod pages;

pub use listen::Limits;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use axum::Router;

/// The port `hone serve` listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 8470;

/// The shortest token accepted: anything shorter is guessable over a network.
pub const MIN_TOKEN_LEN: usize = 16;

/// What `hone serve` was asked to do.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The repository whose runs are served.
    pub repo_root: PathBuf,
    /// Where its records are (`hone::engine::configured_store`); `None`: its `.hone/hone.db`.
    pub store: Option<hone::store::StoreLocation>,
    /// Address and port to listen on (port 0: any free port; [`Server::url`] says which).
    pub addr: SocketAddr,
    /// The token every request must carry (required off loopback; `HONE_TOKEN` in the CLI).
    pub token: Option<String>,
}

/// Checks the token rule: any address other than loopback needs a token, and a token must be
/// long enough to resist guessing.
pub fn check_options(opts: &ServeOptions) -> Result<()> {
    if let Some(t) = &opts.token {
        if t.chars().count() < MIN_TOKEN_LEN {
            bail!(
                "HONE_TOKEN is too short ({} characters): use at least {MIN_TOKEN_LEN}, e.g. the output of `openssl rand -hex 32`",
                t.chars().count()
            );
        }
    }
    if !opts.addr.ip().is_loopback() && opts.token.is_none() {
        bail!(
            "refusing to listen on {} without a token: anyone who can reach it could read every run. \
             Set HONE_TOKEN to a long random secret (e.g. `export HONE_TOKEN=$(openssl rand -hex 32)`), \
             or bind 127.0.0.1 and reach it through an SSH tunnel",
            opts.addr
        );
    }
    Ok(())
}

/// State shared by every route.
pub(crate) struct Shared {
    pub repo_root: PathBuf,
    pub db: Arc<db::Db>,
    /// Turns true when the server stops: event streams end then, so that the graceful
    /// shutdown (which waits for open responses) does not wait for a browser tab forever.
    pub stopping: tokio::sync::watch::Receiver<bool>,
    /// What run pages draw from every experiment, per run (see `pages::run::ViewCache`).
    pub views: pages::ViewCache,
    /// How the pages link to one another (with the token).
    pub links: html::Links,
}

pub(crate) type AppState = Arc<Shared>;

/// The dashboard's routes merged with `extra` (an embedder's own routes, e.g. automation
/// endpoints), all behind the token and Host checks; and the switch that ends event streams.
fn app(opts: &ServeOptions, extra: Router) -> Result<(Router, tokio::sync::watch::Sender<bool>)> {
    check_options(opts)?;
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let db = db::Db::new(&opts.repo_root, opts.store.clone());
    db.upgrade()?;
    let state: AppState = Arc::new(Shared {
        repo_root: opts.repo_root.clone(),
        db: Arc::new(db),
        stopping,
        views: pages::ViewCache::default(),
        links: html::Links::new(opts.token.as_deref()),
    });
    let routes = pages::routes()
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            pages::relink,
        ))
        .merge(api::routes())
        .with_state(state)
        .merge(assets::routes())
        .merge(extra);
    let routes = compress::layer(routes);
    Ok((auth::protect(routes, auth::Guard::new(opts)), stop))
}

type Task = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A server bound to its address, not serving yet.
pub struct Server {
    listener: std::net::TcpListener,
    addr: SocketAddr,
    app: Router,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<Task>,
    limits: Limits,
}

/// Checks the options and binds the address.
pub fn bind(opts: &ServeOptions) -> Result<Server> {
    bind_with(opts, Router::new())
}

/// Checks the options and binds the address; `extra` routes (e.g. `POST /api/trigger`, with
/// their own state already applied) are served beside the dashboard's, behind the same token.
pub fn bind_with(opts: &ServeOptions, extra: Router) -> Result<Server> {
    let (app, stop) = app(opts, extra)?;
    let listener = std::net::TcpListener::bind(opts.addr).with_context(|| {
        format!(
            "cannot listen on {} (is another `hone serve` using that port? try --port)",
            opts.addr
        )
    })?;
    listener
        .set_nonblocking(true)
        .context("cannot make the listening socket non-blocking")?;
    let addr = listener
        .local_addr()
        .context("cannot read the listening address")?;
    Ok(Server {
        listener,
        addr,
        app,
        stop,
        tasks: Vec::new(),
        limits: Limits::default(),
    })
}

impl Server {
    /// The address actually bound (port 0 resolved).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The dashboard's address, for people.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Runs `task` beside the server on its runtime (a scheduler, a notifier); it is dropped
    /// when the server stops.
    pub fn with_task(mut self, task: impl Future<Output = ()> + Send + 'static) -> Server {
        self.tasks.push(Box::pin(task));
        self
    }

    /// Serves within `limits` (connections at once, how long a request may take to arrive)
    /// instead of [`Limits::default`].
    pub fn with_limits(mut self, limits: Limits) -> Server {
        self.limits = limits;
        self
    }

    /// Serves until Ctrl-C.
    pub fn run(self) -> Result<()> {
        self.run_until(async {
            // An error here means no signal handler could be installed: serve until killed.
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }

    /// Serves until `shutdown` completes.
    pub fn run_until(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<()> {
        block_on(async move {
            let listener = tokio::net::TcpListener::from_std(self.listener)
                .context("cannot hand the listening socket to the runtime")?;
            let tasks: Vec<_> = self.tasks.into_iter().map(tokio::spawn).collect();
            let stop = self.stop;
            listen::serve(listener, self.app, self.limits, async move {
                shutdown.await;
                let _ = stop.send(true);
            })
            .await;
            for t in tasks {
                t.abort();
            }
            Ok(())
        })
    }
}

/// Serves the dashboard until Ctrl-C.
pub fn serve(opts: &ServeOptions) -> Result<()> {
    serve_with(opts, Router::new())
}

/// Serves the dashboard and `extra` routes (behind the same token) until Ctrl-C.
pub fn serve_with(opts: &ServeOptions, extra: Router) -> Result<()> {
    bind_with(opts, extra)?.run()
}

/// Runs `task` to its end on a runtime of its own (one thread: the server and the scheduler).
fn block_on<T>(task: impl Future<Output = Result<T>>) -> Result<T> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?
        .block_on(task)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(addr: &str, token: Option<&str>) -> ServeOptions {
        ServeOptions {
            repo_root: PathBuf::from("."),
            store: None,
            addr: addr.parse().unwrap(),
            token: token.map(str::to_string),
        }
    }

    #[test]
    fn off_loopback_needs_a_long_enough_token() {
        assert!(check_options(&opts("127.0.0.1:0", None)).is_ok());
        assert!(check_options(&opts("[::1]:0", None)).is_ok());
        let e = check_options(&opts("0.0.0.0:0", None)).unwrap_err();
        assert!(e.to_string().contains("HONE_TOKEN"), "{e}");
        assert!(check_options(&opts("0.0.0.0:0", Some("0123456789abcdef"))).is_ok());
        let e = check_options(&opts("0.0.0.0:0", Some("short"))).unwrap_err();
        assert!(e.to_string().contains("too short"), "{e}");
        assert!(check_options(&opts("127.0.0.1:0", Some("short"))).is_err());
    }
}
