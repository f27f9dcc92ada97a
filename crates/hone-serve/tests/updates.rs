//! The run page's live updates send what changed: the counters, the plot only when its
//! drawing changed, and in the default view only the rows in flight and the new ones. Real
//! server on an ephemeral loopback port, a real store written beside it.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use hone::store::{ExperimentRecord, Status, Store};
use hone_serve::ServeOptions;
use serde_json::Value;

mod support;
use support::Running;

const TOKEN: &str = "updates-token-0123456789abcdef";

fn experiment(n: u64, status: Status, objective: Option<f64>) -> ExperimentRecord {
    ExperimentRecord {
        n,
        parent_commit: "abc".into(),
        status: Some(status),
        objective,
        description: format!("change {n}"),
        ..Default::default()
    }
}

#[test]
fn an_update_after_a_new_experiment_carries_its_row_not_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join(".hone/hone.db")).unwrap();
    let run = store.create_plain_run("t", "abc", "m").unwrap();
    store
        .put_experiment(run.id, &experiment(0, Status::Baseline, Some(10.0)))
        .unwrap();
    for n in 1..80 {
        let v = 11.0 + (n % 7) as f64;
        store
            .put_experiment(run.id, &experiment(n, Status::Discard, Some(v)))
            .unwrap();
    }
    store
        .put_experiment(run.id, &experiment(80, Status::Running, None))
        .unwrap();

    let opts = ServeOptions {
        repo_root: dir.path().to_path_buf(),
        store: None,
        addr: "127.0.0.1:0".parse().unwrap(),
        token: Some(TOKEN.into()),
    };
    let server = hone_serve::bind_with(&opts, axum::Router::new()).unwrap();
    let running = Running::start(server);
    let base = running.base.clone();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    let get = |path: &str| -> String {
        agent
            .get(&format!("{base}{path}"))
            .header("Authorization", format!("Bearer {TOKEN}"))
            .call()
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap()
    };
    let view = |query: &str| -> Value {
        serde_json::from_str(&get(&format!("/api/runs/t/view{query}"))).unwrap()
    };

    // A page that says nothing of what it holds gets everything.
    let whole = view("");
    let table = whole["table"].as_str().unwrap();
    assert!(table.contains(r#"data-n="80""#) && table.contains(r#"data-n="31""#));
    let key = whole["plot_key"].as_str().unwrap().to_string();
    assert!(whole["plot"].as_str().unwrap().contains("<svg"));
    let page = get("/runs/t");
    assert!(
        page.contains(&format!(r#"data-plot-key="{key}""#)),
        "the page carries its plot's key"
    );

    // The experiment in flight finishes as a keep and a new one starts.
    store
        .put_experiment(run.id, &experiment(80, Status::Keep, Some(9.0)))
        .unwrap();
    store
        .put_experiment(run.id, &experiment(81, Status::Running, None))
        .unwrap();
    let update = view(&format!("?plot={key}&since=80"));
    assert!(update.get("table").is_none(), "no whole table: {update}");
    let rows = update["rows"].as_str().unwrap();
    assert!(rows.contains(r#"data-n="81""#), "{rows}");
    assert!(rows.contains(r#"data-n="80" class="r-keep""#), "{rows}");
    assert!(
        !rows.contains(r#"data-n="79""#),
        "an unchanged row is not sent: {rows}"
    );
    assert!(update["filters"].as_str().unwrap().contains("keep 1"));
    assert!(update["pager"].as_str().unwrap().contains("of 82"));
    let new_key = update["plot_key"].as_str().unwrap().to_string();
    assert_ne!(new_key, key, "a keep changes the drawing");
    assert!(update["plot"].as_str().unwrap().contains("change 80"));
    assert!(update["counters"].as_str().unwrap().contains("82"));

    // Nothing the plot draws changed: the plot stays out.
    let again = view(&format!("?plot={new_key}&since=81"));
    assert!(again.get("plot").is_none(), "{again}");
    assert_eq!(again["plot_title"].as_str(), Some("m (82 experiments)"));
    assert_eq!(again["plot_key"].as_str(), Some(new_key.as_str()));

    // Any other view gets its table whole.
    let other = view(&format!("?status=keep&plot={new_key}&since=81"));
    assert!(other.get("rows").is_none());
    assert!(other["table"].as_str().unwrap().contains(r#"data-n="80""#));
    // The table says how many rows its page holds as the server clamped it, which the page's
    // script trims to (not the address's `per`).
    let big = view("?per=100000");
    assert!(
        big["table"].as_str().unwrap().contains(r#"data-per="500""#),
        "{big}"
    );

    running.stop();
}
