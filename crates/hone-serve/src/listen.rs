//! The accept loop of `hone serve` and `hone daemon`, with limits a slow or hostile client
//! cannot outlast. `axum::serve` waits for a request's headers forever and takes every
//! connection it is offered, so a few hundred half-sent requests held open (slowloris) used up
//! the process's file descriptors and starved every later client, the one with the token
//! included, for as long as the attacker kept them open. Here:
//!
//! - a request's headers must arrive within [`Limits::header_timeout`] (an idle keep-alive
//!   connection is closed after as long);
//! - its body must have arrived within [`Limits::body_timeout`] of them (reading it fails
//!   after that; how long a handler then takes is not limited, nor a streamed response such as
//!   the event stream);
//! - a connection whose request got a client error (no token, a bad or late request) is closed
//!   after the answer, so that a client without the token cannot hold one by asking again;
//! - at most [`Limits::max_connections`] connections are served at once; a further one waits in
//!   the kernel's queue until one of them ends, which the rules above guarantee.
//!
//! Shutdown is graceful, as axum's: no new connection is taken, each open one finishes the
//! request it is serving, and the loop returns when the last has closed.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
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
    /// From a request's headers until all of its body has arrived.
    pub body_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            // Far below the usual 1,024 descriptors, far above what a browser opens (6 per
            // host) or a webhook sender needs.
            max_connections: 128,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
        }
    }
}

/// A request body that must have arrived by a deadline; reading it fails after that.
struct Deadline {
    inner: Body,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl http_body::Body for Deadline {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        match this.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(axum::Error::new(
                "the request's body took too long to arrive",
            )))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// `app` with every request's body due within `body_timeout`, and a connection whose request
/// got a client error closed after the answer.
fn bounded(app: Router, body_timeout: Duration) -> Router {
    app.layer(axum::middleware::from_fn(
        move |req: Request, next: Next| async move {
            let req = req.map(|inner| {
                Body::new(Deadline {
                    inner,
                    deadline: Box::pin(tokio::time::sleep(body_timeout)),
                })
            });
            let mut response = next.run(req).await;
            if response.status().is_client_error() {
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            response
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
    let app = bounded(app, limits.body_timeout);
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
