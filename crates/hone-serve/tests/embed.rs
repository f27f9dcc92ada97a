//! The extension point for automation: routes added with `bind_with` are served beside the
//! dashboard behind the same token, and a task added with `with_task` runs on the server's
//! runtime until it stops. Real server on an ephemeral loopback port, real HTTP.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use axum::routing::post;
use axum::Router;
use hone_serve::ServeOptions;

mod support;
use support::Running;

const TOKEN: &str = "embed-token-0123456789abcdef";

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

/// Options for a server of the (empty) project `dir` on an ephemeral loopback port.
fn options(dir: &tempfile::TempDir, token: Option<&str>) -> ServeOptions {
    ServeOptions {
        repo_root: dir.path().to_path_buf(),
        store: None,
        addr: "127.0.0.1:0".parse().unwrap(),
        token: token.map(str::to_string),
    }
}

#[test]
fn extra_routes_sit_behind_the_token_and_tasks_run_beside_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options(&dir, Some(TOKEN));
    let extra = Router::new().route(
        "/api/trigger",
        post(|body: String| async move { format!("triggered with {} bytes", body.len()) }),
    );
    let (ran_tx, ran_rx) = std::sync::mpsc::channel();
    let server = hone_serve::bind_with(&opts, extra)
        .unwrap()
        .with_task(async move {
            ran_tx.send("scheduler ran").unwrap();
            std::future::pending::<()>().await;
        });
    let running = Running::start(server);
    let base = &running.base;
    assert_eq!(
        ran_rx.recv_timeout(Duration::from_secs(30)).unwrap(),
        "scheduler ran"
    );
    let url = format!("{base}/api/trigger");
    let res = agent().post(&url).send("{}").unwrap();
    assert_eq!(res.status().as_u16(), 401, "no token, no trigger");
    let mut res = agent()
        .post(&url)
        .header("Authorization", format!("Bearer {TOKEN}"))
        .send("{}")
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    assert_eq!(
        res.body_mut().read_to_string().unwrap(),
        "triggered with 2 bytes"
    );
    let res = agent()
        .get(&format!("{base}/"))
        .header("Authorization", format!("Bearer {TOKEN}"))
        .call()
        .unwrap();
    assert_eq!(res.status().as_u16(), 200, "the dashboard beside it");
    running.stop();
}

/// An embedder may serve without a token on loopback (`hone serve` itself always has one):
/// then only requests naming a loopback host are answered, so a web page a browser visits
/// cannot read it by DNS rebinding.
#[test]
fn without_a_token_only_loopback_names_are_answered() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options(&dir, None);
    hone_serve::check_options(&opts).unwrap();
    let server = hone_serve::bind(&opts).unwrap();
    let port = server.local_addr().port();
    let running = Running::start(server);
    let get = |url: &str, host: Option<&str>| {
        let mut req = agent().get(url);
        if let Some(h) = host {
            req = req.header("Host", h);
        }
        let mut res = req.call().unwrap();
        let status = res.status().as_u16();
        (status, res.body_mut().read_to_string().unwrap())
    };
    let (status, page) = get(&format!("http://127.0.0.1:{port}/"), None);
    assert_eq!(status, 200);
    assert!(page.contains("no hone runs here yet"), "{page}");
    assert_eq!(
        get(&format!("http://localhost:{port}/healthz"), None).0,
        200
    );
    let (status, body) = get(
        &format!("http://127.0.0.1:{port}/"),
        Some("attacker.example"),
    );
    assert_eq!(status, 403, "a DNS-rebinding page cannot read it");
    assert!(body.contains("HONE_TOKEN"), "{body}");
    running.stop();
}

/// Pages go gzipped to a client that accepts gzip (and plain to one that does not); the event
/// stream and small bodies are never touched.
#[test]
fn text_is_gzipped_for_clients_that_accept_it() {
    use std::io::Read as _;
    let dir = tempfile::tempdir().unwrap();
    let opts = options(&dir, Some(TOKEN));
    let page: String = (0..2000)
        .map(|i| format!("<tr><td>#{i}</td><td>discard</td></tr>\n"))
        .collect();
    let served = page.clone();
    let extra = Router::new()
        .route(
            "/big",
            axum::routing::get(move || {
                let p = served.clone();
                async move { axum::response::Html(p) }
            }),
        )
        .route(
            "/stream",
            axum::routing::get(|| async {
                (
                    [(axum::http::header::CONTENT_TYPE, "text/event-stream")],
                    "data: x\n\n".repeat(500),
                )
            }),
        );
    let running = Running::start(hone_serve::bind_with(&opts, extra).unwrap());
    let base = &running.base;
    let get = |path: &str, encoding: Option<&str>| {
        let mut req = agent()
            .get(&format!("{base}{path}"))
            .header("Authorization", format!("Bearer {TOKEN}"));
        if let Some(e) = encoding {
            req = req.header("Accept-Encoding", e);
        }
        let mut res = req.call().unwrap();
        assert_eq!(res.status().as_u16(), 200, "{path}");
        let enc = res
            .headers()
            .get("content-encoding")
            .map(|v| v.to_str().unwrap().to_string());
        let mut body = Vec::new();
        res.body_mut().as_reader().read_to_end(&mut body).unwrap();
        (enc, body)
    };
    let (enc, zipped) = get("/big", Some("gzip, br"));
    assert_eq!(enc.as_deref(), Some("gzip"));
    let mut plain = String::new();
    flate2::read::GzDecoder::new(&zipped[..])
        .read_to_string(&mut plain)
        .unwrap();
    assert_eq!(plain, page, "the same page");
    assert!(
        zipped.len() * 5 < page.len(),
        "{} bytes for {}",
        zipped.len(),
        page.len()
    );
    let (enc, body) = get("/big", None);
    assert_eq!(enc, None);
    assert_eq!(body, page.as_bytes());
    let (enc, _) = get("/big", Some("gzip;q=0"));
    assert_eq!(enc, None);
    let (enc, _) = get("/stream", Some("gzip"));
    assert_eq!(enc, None, "the event stream is never buffered");
    let (enc, _) = get("/healthz", Some("gzip"));
    assert_eq!(enc, None, "a small body goes as it is");
    running.stop();
}
