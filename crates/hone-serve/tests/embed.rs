//! The extension point for automation: routes added with `bind_with` are served beside the
//! dashboard behind the same token, and a task added with `with_task` runs on the server's
//! runtime until it stops. Real server on an ephemeral loopback port, real HTTP.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use axum::routing::post;
use axum::Router;
use hone_serve::ServeOptions;

const TOKEN: &str = "embed-token-0123456789abcdef";

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

#[test]
fn extra_routes_sit_behind_the_token_and_tasks_run_beside_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let opts = ServeOptions {
        repo_root: dir.path().to_path_buf(),
        store: None,
        addr: "127.0.0.1:0".parse().unwrap(),
        token: Some(TOKEN.into()),
    };
    let extra = Router::new().route(
        "/api/trigger",
        post(|body: String| async move { format!("triggered with {} bytes", body.len()) }),
    );
    let (ran_tx, ran_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = hone_serve::bind_with(&opts, extra)
        .unwrap()
        .with_task(async move {
            ran_tx.send("scheduler ran").unwrap();
            std::future::pending::<()>().await;
        });
    let base = format!("http://{}", server.local_addr());
    let thread = std::thread::spawn(move || {
        server
            .run_until(async {
                let _ = stop_rx.await;
            })
            .unwrap()
    });
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
    stop_tx.send(()).unwrap();
    thread.join().unwrap();
}

/// An embedder may serve without a token on loopback (`hone serve` itself always has one):
/// then only requests naming a loopback host are answered, so a web page a browser visits
/// cannot read it by DNS rebinding.
#[test]
fn without_a_token_only_loopback_names_are_answered() {
    let dir = tempfile::tempdir().unwrap();
    let opts = ServeOptions {
        repo_root: dir.path().to_path_buf(),
        store: None,
        addr: "127.0.0.1:0".parse().unwrap(),
        token: None,
    };
    hone_serve::check_options(&opts).unwrap();
    let server = hone_serve::bind(&opts).unwrap();
    let port = server.local_addr().port();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        server
            .run_until(async {
                let _ = stop_rx.await;
            })
            .unwrap()
    });
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
    stop_tx.send(()).unwrap();
    thread.join().unwrap();
}
