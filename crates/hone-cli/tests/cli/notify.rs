//! Notifications (Slack and JSON endpoints): delivered on keep and finish, retried, given up on,
//! and never holding up the loop.

use crate::support::*;

/// A 127.0.0.1 port where nothing listens (connection refused).
fn dead_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", l.local_addr().unwrap());
    drop(l);
    url
}

#[test]
fn notifications_reach_slack_and_json_endpoints_on_keep_and_finish() {
    let fine = || Reply::Status(200, Vec::new(), "ok".into());
    let slack = LlmServer::start(vec![fine()], false);
    let json = LlmServer::start(vec![fine()], false);
    let r = Repo::new(
        &format!(
            "[stop]\nmax_experiments = 4\n\n[[notify]]\nurl = \"{}/hook\"\nformat = \"slack\"\non = [\"keep\", \"finish\"]\n\n\
             [[notify]]\nurl_env = \"TEST_HOOK_URL\"\non = [\"finish\", \"keep\", \"failure\"]\n",
            slack.url
        ),
        SCORE,
        KEEPS_SCRIPT,
    );
    let out = ok(hone_env(
        &r,
        &["run", "--tag", "n1"],
        &[("TEST_HOOK_URL", &format!("{}/hook", json.url))],
    ));
    assert!(!text(&out).contains("not delivered"), "{}", text(&out));
    // Everything queued was delivered before `hone run` returned.
    let s = bodies(&slack);
    assert_eq!(s.len(), 3, "two keeps and the finish: {s:?}");
    for b in &s {
        assert_eq!(b.as_object().unwrap().len(), 1, "slack gets only text: {b}");
    }
    assert_eq!(
        s[0]["text"],
        "hone run n1: kept #1 \"lower is better\": score 5.000000 → 4.000000 (baseline 5.000000)"
    );
    assert!(
        s[1]["text"]
            .as_str()
            .unwrap()
            .contains("kept #3 \"lower still\": score 4.000000 → 3.000000"),
        "{s:?}"
    );
    assert_eq!(
        s[2]["text"],
        "hone run n1 finished: reached max_experiments (4); score 5.000000 → 3.000000 (-40.00%), 4 experiments, 2 kept"
    );
    let j = bodies(&json);
    assert_eq!(j.len(), 3, "{j:?}");
    assert_eq!(j[0]["event"], "keep");
    assert_eq!(j[0]["run"], "n1");
    assert_eq!(j[0]["experiment"], 1);
    assert_eq!(j[0]["value"], 4.0);
    assert_eq!(j[0]["previous_best"], 5.0);
    assert_eq!(j[0]["commit"], r.rev("refs/hone/n1/1"));
    assert_eq!(j[2]["event"], "finish");
    assert_eq!(j[2]["reason"], "reached max_experiments (4)");
    assert_eq!(j[2]["summary"]["best"], 3.0);
    assert_eq!(j[2]["summary"]["experiments"], 4);
}

#[test]
fn a_dead_notification_endpoint_is_given_up_on_and_changes_nothing() {
    let plain = Repo::scored(4, KEEPS_SCRIPT);
    assert!(plain.hone(&["run", "--tag", "d"]).status.success());
    let r = Repo::new(
        &format!(
            "[stop]\nmax_experiments = 4\n\n[[notify]]\nurl = \"{}\"\nretries = 2\nbackoff = \"10ms\"\n",
            dead_url()
        ),
        SCORE,
        KEEPS_SCRIPT,
    );
    let out = ok(r.hone(&["run", "--tag", "d"]));
    let strip = |log: Vec<serde_json::Value>| -> Vec<(String, String)> {
        log.iter()
            .map(|e| (e["status"].to_string(), e["objective"].to_string()))
            .collect()
    };
    assert_eq!(
        strip(r.log()),
        strip(plain.log()),
        "the same run as without notifications"
    );
    // Each of the three messages (two keeps, the finish) was tried 3 times, then given up on,
    // said so, and recorded in the run's event log.
    let said = text(&out);
    assert_eq!(
        said.matches("was not delivered after 3 attempts").count(),
        3,
        "{said}"
    );
    assert!(
        !said.contains("/hook"),
        "the URL (a secret) is never printed: {said}"
    );
    let store = hone::store::Store::open(&r.dir.join(".hone/hone.db")).unwrap();
    let run = store.run_by_tag("d").unwrap().unwrap();
    let failed: Vec<serde_json::Value> = store
        .events(run.id)
        .unwrap()
        .into_iter()
        .filter(|(_, kind, _)| kind == "notify_failed")
        .map(|(_, _, data)| serde_json::from_str(&data).unwrap())
        .collect();
    assert_eq!(failed.len(), 3, "{failed:?}");
    assert_eq!(failed[0]["on"], "keep");
    assert_eq!(failed[0]["attempts"], 3);
    assert!(
        failed[2]["error"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("refused"),
        "{failed:?}"
    );
}

#[test]
fn a_notification_answered_500_is_retried_and_delivered_once() {
    let hook = LlmServer::start(
        vec![
            Reply::Status(500, Vec::new(), "busy".into()),
            Reply::Status(200, Vec::new(), "ok".into()),
        ],
        false,
    );
    let r = Repo::new(
        &format!(
            "[stop]\nmax_experiments = 10\nmax_consecutive_failures = 2\n\n[[notify]]\nurl = \"{}/hook\"\non = [\"failure\", \"finish\"]\nbackoff = \"10ms\"\n",
            hook.url
        ),
        SCORE,
        "say\tno idea\n",
    );
    let out = r.hone(&["run", "--tag", "f"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(!text(&out).contains("not delivered"), "{}", text(&out));
    let b = bodies(&hook);
    assert_eq!(
        b.len(),
        2,
        "one 500, then the same message once more: {b:?}"
    );
    assert_eq!(b[0], b[1]);
    assert_eq!(b[1]["event"], "failure");
    assert!(
        reason(&b[1]).contains("2 failed experiments in a row"),
        "{b:?}"
    );
}

/// A notification endpoint that answers nothing until the run it hears from has stopped (as
/// the store says), then 200 to everything. Were notifications sent from the loop itself, the
/// first keep would wait for an answer that only comes after the run's end: the run would
/// never end, and the delivery would time out.
#[test]
fn a_notification_endpoint_that_holds_its_answer_never_holds_up_the_loop() {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let r = Repo::new(
        &format!("[stop]\nmax_experiments = 4\n\n[[notify]]\nurl = \"{url}\"\ntimeout = \"60s\"\nretries = 0\n"),
        SCORE,
        KEEPS_SCRIPT,
    );
    let db = r.dir.join(".hone/hone.db");
    let server = std::thread::spawn(move || {
        let mut events = Vec::new();
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut len = 0;
            loop {
                let mut h = String::new();
                reader.read_line(&mut h).unwrap();
                if h.trim().is_empty() {
                    break;
                }
                if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; len];
            reader.read_exact(&mut body).unwrap();
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
            // Hold the answer until the run is recorded as stopped.
            let deadline = Instant::now() + Duration::from_secs(120);
            loop {
                let stopped = hone::store::Store::open(&db)
                    .ok()
                    .and_then(|s| s.run_by_tag("hold").ok().flatten())
                    .is_some_and(|run| run.state == hone::store::RunState::Stopped);
                if stopped {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the run never stopped while a notification waited"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            events.push(body["event"].as_str().unwrap().to_string());
            if events.len() == 3 {
                return events;
            }
        }
        events
    });
    let out = ok(r.hone(&["run", "--tag", "hold"]));
    assert!(!text(&out).contains("not delivered"), "{}", text(&out));
    assert_eq!(r.statuses(), ["baseline", "keep", "discard", "keep"]);
    assert_eq!(server.join().unwrap(), ["keep", "keep", "finish"]);
}

#[test]
fn a_budget_stop_is_notified_as_budget() {
    // $0.20 a call against $0.30: the second call could cross it and is never sent.
    let server = LlmServer::start(
        vec![Reply::Answer(
            edit("value.txt", "score: 5", "score: 4"),
            1000,
            1000,
        )],
        false,
    );
    let hook = LlmServer::start(vec![Reply::Status(200, Vec::new(), "ok".into())], false);
    let r = llm_repo(
        "openai",
        &server,
        "max_tokens = 100\nprice_in_per_mtok = 100\nprice_out_per_mtok = 100",
        &format!(
            "max_experiments = 10\nmax_cost_usd = 0.30\n\n[[notify]]\nurl = \"{}/hook\"\non = [\"budget\", \"finish\"]\n",
            hook.url
        ),
    );
    ok(hone_with_key(&r, &["run", "--tag", "b"]));
    let b = bodies(&hook);
    assert_eq!(b.len(), 1, "{b:?}");
    assert_eq!(b[0]["event"], "budget");
    assert!(reason(&b[0]).starts_with("budget: "), "{b:?}");
    assert!(
        b[0]["text"]
            .as_str()
            .unwrap()
            .starts_with("hone run b stopped on its budget: the next call could cost $"),
        "{b:?}"
    );
}
