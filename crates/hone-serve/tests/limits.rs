//! The server's limits against slow clients (slowloris): a request whose headers never end is
//! closed after the header timeout; a body that never ends fails after the body timeout, while
//! a slow handler is not cut short; a request without the token is answered and its connection
//! closed, so that such clients cannot keep places; and at most `max_connections` are served at
//! once, so a full request made while half-sent ones hold every place is answered once one of
//! them has been closed. Real server on an ephemeral loopback port, raw TCP.

#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use axum::routing::post;
use axum::Router;
use hone_serve::{Limits, ServeOptions};

mod support;
use support::Running;

/// The token of [`start_with_token`]'s server.
const TOKEN: &str = "limits-token-0123456789abcdef";

/// A server of the (empty) project `dir` within `limits`, with `POST /echo` reading its body
/// and `GET /slow` answering after 1.5 s.
fn start(dir: &tempfile::TempDir, limits: Limits) -> Running {
    start_with(dir, limits, None)
}

/// [`start`], behind [`TOKEN`].
fn start_with_token(dir: &tempfile::TempDir, limits: Limits) -> Running {
    start_with(dir, limits, Some(TOKEN))
}

fn start_with(dir: &tempfile::TempDir, limits: Limits, token: Option<&str>) -> Running {
    let opts = ServeOptions {
        repo_root: dir.path().to_path_buf(),
        store: None,
        addr: "127.0.0.1:0".parse().unwrap(),
        token: token.map(str::to_string),
    };
    let extra = Router::new()
        .route(
            "/echo",
            post(|body: String| async move { format!("{} bytes", body.len()) }),
        )
        .route(
            "/slow",
            axum::routing::get(|| async {
                tokio::time::sleep(Duration::from_millis(1500)).await;
                "done"
            }),
        );
    let server = hone_serve::bind_with(&opts, extra)
        .unwrap()
        .with_limits(limits);
    Running::start(server)
}

/// Limits of `max_connections` places, and header and body timeouts in seconds.
fn limits(max_connections: usize, header_s: u64, body_s: u64) -> Limits {
    Limits {
        max_connections,
        header_timeout: Duration::from_secs(header_s),
        body_timeout: Duration::from_secs(body_s),
    }
}

/// A connection to `base` that has sent `bytes`. Its reads give up after two minutes: only a
/// hang detector (each test waits for the server to act, not for a time).
fn connect(base: &str, bytes: &str) -> TcpStream {
    let mut s = TcpStream::connect(base.trim_start_matches("http://")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    s.write_all(bytes.as_bytes()).unwrap();
    s
}

/// What the server answers `request` on a new connection, until it closes it.
fn answer_to(base: &str, request: &str) -> String {
    read_to_close(&mut connect(base, request))
}

/// Everything the server sends until it closes the connection.
fn read_to_close(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    s.read_to_end(&mut out)
        .expect("the server kept the connection open");
    String::from_utf8_lossy(&out).into_owned()
}

/// Has the server closed `s` already (read without waiting)?
fn closed_now(s: &mut TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

const HALF_SENT: &str = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n";
const FULL: &str = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

#[test]
fn half_sent_requests_are_closed_and_cannot_hold_every_place() {
    let dir = tempfile::tempdir().unwrap();
    let limits = limits(2, 1, 60);
    let running = start(&dir, limits);
    let mut held: Vec<TcpStream> = (0..2).map(|_| connect(&running.base, HALF_SENT)).collect();
    // Both places are taken: this one is served only once a half-sent one has been closed.
    let mut full = connect(&running.base, FULL);
    let answer = read_to_close(&mut full);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        held.iter_mut().any(closed_now),
        "a request was served while both places were held by half-sent ones"
    );
    // Every half-sent request is closed in the end, never answered.
    for s in &mut held {
        s.set_nonblocking(false).unwrap();
        let rest = read_to_close(s);
        assert!(!rest.contains(" 200 "), "{rest}");
    }
    running.stop();
}

#[test]
fn a_body_that_never_ends_fails_and_a_slow_handler_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let limits = limits(8, 60, 1);
    let running = start(&dir, limits);
    let answer = answer_to(
        &running.base,
        "POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nten bytes.",
    );
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("too long to arrive"), "{answer}");
    // A body that does arrive is read as before.
    let answer = answer_to(&running.base, "POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10\r\nConnection: close\r\n\r\nten bytes.");
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.ends_with("10 bytes"),
        "{answer}"
    );
    // A handler slower than the body timeout is answered in full.
    let answer = answer_to(
        &running.base,
        "GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    );
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.ends_with("done"),
        "{answer}"
    );
    running.stop();
}

#[test]
fn a_request_without_the_token_gets_its_answer_and_loses_its_connection() {
    let dir = tempfile::tempdir().unwrap();
    let limits = limits(8, 60, 60);
    let running = start_with_token(&dir, limits);
    // Keep-alive asked for, no token: answered 401, then closed (not kept for the next ask).
    let answer = answer_to(
        &running.base,
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    // With the token, keep-alive holds: two requests on one connection.
    let ask = format!("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\r\n");
    let mut kept = connect(&running.base, &ask);
    let mut buf = [0u8; 4096];
    let n = kept.read(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    let last = ask.replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n");
    kept.write_all(last.as_bytes()).unwrap();
    let second = read_to_close(&mut kept);
    assert!(second.contains("HTTP/1.1 200"), "{second}");
    running.stop();
}
