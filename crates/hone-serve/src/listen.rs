//! The accept loop of `hone serve` and `hone daemon`, with limits a slow or hostile client
//! cannot outlast. `axum::serve` waits for a request's headers forever and takes every
//! connection it is offered, so a few hundred half-sent requests held open (slowloris) used up
//! the process's file descriptors and starved every later client, the one with the token
//! included, for as long as the attacker kept them open. Here:
//!
//! - a request's headers must arrive within [`Limits::header_timeout`] (an idle keep-alive
//!   connection is closed after as long);
//! - a response must be started within [`Limits::response_timeout`], which bounds a body sent
//!   slowly (a streamed response, such as the event stream, runs on after it has started);
//! - at most [`Limits::max_connections`] connections are served at once; a further one waits in
//!   the kernel's queue until one of them ends, which the two timeouts above guarantee.
//!
//! Shutdown is graceful, as axum's: no new connection is taken, each open one finishes the
//! request it is serving, and the loop returns when the last has closed.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::IntoResponse;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

/// How long and how many: see the module's comment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once.
    pub max_connections: usize,
    /// From when a request's headers are awaited until all of them have arrived.
    pub header_timeout: Duration,
    /// From a request's headers until its response starts.
    pub response_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            // Far below the usual 1,024 descriptors, far above what a browser opens (6 per
            // host) or a webhook sender needs.
            max_connections: 128,
            header_timeout: Duration::from_secs(10),
            response_timeout: Duration::from_secs(60),
        }
    }
}

/// `app` with every response bounded by `limit`: a request whose response has not started by
/// then is answered `408 Request Timeout` (its handler is dropped).
fn bounded(app: Router, limit: Duration) -> Router {
    app.layer(axum::middleware::from_fn(
        move |req: Request, next: Next| async move {
            match tokio::time::timeout(limit, next.run(req)).await {
                Ok(response) => response,
                Err(_) => (
                    axum::http::StatusCode::REQUEST_TIMEOUT,
                    "the request took too long to arrive or to answer\n",
                )
                    .into_response(),
            }
        },
    ))
}

/// Serves `app` on `listener` within `limits` until `shutdown` completes, then waits for the
/// open connections to finish what they are serving.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let app = bounded(app, limits.response_timeout);
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    // Dropped when `shutdown` completes: each connection sees its sender closed.
    let (stop_tx, stop_rx) = watch::channel(());
    tokio::spawn(async move {
        shutdown.await;
        drop(stop_rx);
    });
    // Each connection holds a receiver; the loop waits for the last one to be dropped.
    let (open_tx, open_rx) = watch::channel(());
    loop {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => p,
            _ = stop_tx.closed() => break,
        };
        // The semaphore is never closed, so `acquire_owned` cannot fail.
        let Ok(permit) = permit else { break };
        let stream = tokio::select! {
            s = listener.accept() => s,
            _ = stop_tx.closed() => break,
        };
        let stream = match stream {
            Ok((stream, _)) => stream,
            Err(_) => {
                // Out of descriptors, or a connection reset before it was taken: the listener
                // is still good, so wait a little rather than spin.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let service = TowerToHyperService::new(app.clone());
        let (stop, open) = (stop_tx.clone(), open_rx.clone());
        tokio::spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout);
            let mut conn = Box::pin(builder.serve_connection(TokioIo::new(stream), service));
            tokio::select! {
                // A failed connection (a timeout, a reset) concerns only its client.
                _ = conn.as_mut() => {}
                _ = stop.closed() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.as_mut().await;
                }
            }
            // The socket is closed before its place is given to the next connection.
            drop(conn);
            drop((permit, open));
        });
    }
    drop(open_rx);
    drop(listener);
    open_tx.closed().await;
}
