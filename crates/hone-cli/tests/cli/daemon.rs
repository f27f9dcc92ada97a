//! `hone daemon` and `hone serve`'s trigger endpoint: signed webhooks start runs one at a time,
//! a token off loopback, and the unattended path from a trigger to a pull request.

use crate::support::*;

/// `POST /api/trigger` to the server at `addr` with `headers` and `body`: the status and body.
fn trigger(addr: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    http(addr, "POST", "/api/trigger", headers, body)
}

/// `hone daemon` on a free port, its output lines arriving on a channel.
struct Daemon {
    child: std::process::Child,
    addr: String,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Daemon {
    fn start(r: &Repo, args: &[&str], env: &[(&str, &str)]) -> Daemon {
        Daemon::start_as("daemon", "listening on http://", r, args, env)
    }

    /// `hone <command>` (daemon or serve), whose first line naming `marker` gives the address.
    fn start_as(
        command: &str,
        marker: &str,
        r: &Repo,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Daemon {
        use std::io::BufRead;
        let mut c = Command::new(HONE);
        c.arg(command)
            .args(args)
            .current_dir(&r.dir)
            .env_remove("HONE_TOKEN")
            .env_remove("HONE_WEBHOOK_SECRET")
            .env_remove("GITHUB_TOKEN")
            .env_remove("GITHUB_API_URL")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit());
        for (k, v) in env {
            c.env(k, v);
        }
        let mut child = c.spawn().unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let mut d = Daemon {
            child,
            addr: String::new(),
            lines,
        };
        let first = d.wait_for(marker);
        d.addr = first
            .rsplit("http://")
            .next()
            .unwrap()
            .split(['/', ' '])
            .next()
            .unwrap()
            .to_string();
        d
    }

    /// The first output line containing `what` (waiting for it, with a generous deadline).
    fn wait_for(&self, what: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.contains(what) => return l,
                Ok(_) => {}
                Err(e) => panic!("hone daemon never said `{what}`: {e}"),
            }
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const HOOK_SECRET: &str = "webhook-secret-for-tests";
/// The dashboard's token in `hone serve` tests.
const SERVE_TOKEN: &str = "serve-token-0123456789abcdef";

fn signed(body: &str) -> String {
    hone::automation::signature::sign(HOOK_SECRET.as_bytes(), body.as_bytes())
}

#[test]
fn webhook_starts_a_signed_run_one_at_a_time() {
    // The first measurement waits on a FIFO, so the test decides when the run may go on.
    let tmp = tempfile::tempdir().unwrap();
    let gate = tmp.path().join("gate");
    let open = tmp.path().join("open");
    assert!(Command::new("mkfifo")
        .arg(&gate)
        .status()
        .unwrap()
        .success());
    let r = Repo::new(
        "",
        &format!(
            "if [ ! -e {open} ]; then read _ < {gate}; touch {open}; fi; cat value.txt",
            open = open.display(),
            gate = gate.display()
        ),
        "write\tvalue.txt\tscore: 4\\n\nhypothesis\tlower\n",
    );
    let d = Daemon::start(
        &r,
        &["--port", "0"],
        &[("HONE_WEBHOOK_SECRET", HOOK_SECRET)],
    );
    let body = r#"{"tag": "hook1", "max_experiments": 2}"#;
    // Unsigned, wrongly signed, or signed for another body: 401, and nothing starts.
    let (status, msg) = trigger(&d.addr, &[], body);
    assert_eq!(status, 401, "{msg}");
    assert!(msg.contains("missing X-Hub-Signature-256"), "{msg}");
    let wrong = hone::automation::signature::sign(b"not the secret", body.as_bytes());
    let (status, msg) = trigger(&d.addr, &[("X-Hub-Signature-256", &wrong)], body);
    assert_eq!(status, 401, "{msg}");
    assert!(msg.contains("does not match"), "{msg}");
    let other = signed("{}");
    assert_eq!(
        trigger(&d.addr, &[("X-Hub-Signature-256", &other)], body).0,
        401
    );
    assert!(!r.dir.join(".hone").exists(), "nothing ran");
    // Signed: accepted with the run's tag.
    let (status, msg) = trigger(&d.addr, &[("X-Hub-Signature-256", &signed(body))], body);
    assert_eq!(status, 202, "{msg}");
    let accepted: serde_json::Value = serde_json::from_str(&msg).unwrap();
    assert_eq!(accepted["tag"], "hook1");
    // While it runs, another trigger is refused with 409 and says why.
    let again = r#"{"tag": "hook2", "max_experiments": 1}"#;
    let (status, msg) = trigger(&d.addr, &[("X-Hub-Signature-256", &signed(again))], again);
    assert_eq!(status, 409, "{msg}");
    assert!(msg.contains("run `hook1` is still in progress"), "{msg}");
    // Let the baseline measure; the run finishes on its own.
    put(&gate, "go\n");
    d.wait_for("run hook1 finished");
    assert_eq!(r.statuses(), ["baseline", "keep"]);
    let log = std::fs::read_to_string(r.dir.join(".hone/automation/hook1.log")).unwrap();
    assert!(log.contains("reached max_experiments (2)"), "{log}");
    let (status, msg) = http(&d.addr, "GET", "/api/automation", &[], "");
    assert_eq!(status, 200);
    let s: serde_json::Value = serde_json::from_str(&msg).unwrap();
    assert_eq!(s["job"]["tag"], "hook1");
    assert_eq!(s["job"]["run_exit"], 0);
    assert_eq!(s["busy"], serde_json::Value::Null);
    // The accepted request sent again (captured in transit, say) starts nothing, now or after
    // a restart of the daemon; a new body does.
    let replay = |addr: &str| trigger(addr, &[("X-Hub-Signature-256", &signed(body))], body);
    let (status, msg) = replay(&d.addr);
    assert_eq!(status, 409, "{msg}");
    assert!(msg.contains("this exact request"), "{msg}");
    let restarted = Daemon::start(
        &r,
        &["--port", "0"],
        &[("HONE_WEBHOOK_SECRET", HOOK_SECRET)],
    );
    let (status, msg) = replay(&restarted.addr);
    assert_eq!(status, 409, "{msg}");
    assert!(msg.contains("this exact request"), "{msg}");
    assert_eq!(r.statuses(), ["baseline", "keep"], "no run started again");
    // The request refused while hook1 ran started nothing: sent again, it starts its run.
    let (status, msg) = trigger(
        &restarted.addr,
        &[("X-Hub-Signature-256", &signed(again))],
        again,
    );
    assert_eq!(status, 202, "{msg}");
    restarted.wait_for("run hook2 ");
    drop(restarted);
    // Without a token, only loopback names are answered (no web page reaches the daemon by
    // DNS rebinding); but the signed trigger, which a webhook may send through a tunnel.
    let foreign = [("Host", "attacker.example:8473")];
    let (status, msg) = http(&d.addr, "GET", "/api/automation", &foreign, "");
    assert_eq!(status, 403, "{msg}");
    assert!(msg.contains("only to localhost"), "{msg}");
    // A proxy's health check under its own name is answered (it learns only `ok`).
    let (status, msg) = http(&d.addr, "GET", "/healthz", &foreign, "");
    assert_eq!((status, msg.trim()), (200, "ok"), "{msg}");
    let tunnelled = [
        ("Host", "hooks.example"),
        ("X-Hub-Signature-256", "sha256=00"),
    ];
    let (status, msg) = trigger(&d.addr, &tunnelled, again);
    assert_eq!(status, 401, "judged by its signature: {msg}");
}

#[test]
fn daemon_off_loopback_needs_a_token_and_checks_it() {
    let r = Repo::new("", SCORE, "");
    let out = Command::new(HONE)
        .args(["daemon", "--bind", "0.0.0.0", "--port", "0"])
        .current_dir(&r.dir)
        .env_remove("HONE_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_says(&out, "set HONE_TOKEN");
    let d = Daemon::start(
        &r,
        &["--bind", "0.0.0.0", "--port", "0"],
        &[("HONE_TOKEN", "tok-123")],
    );
    let port = d.addr.rsplit(':').next().unwrap();
    let local = format!("127.0.0.1:{port}");
    assert_eq!(http(&local, "GET", "/api/automation", &[], "").0, 401);
    assert_eq!(
        http(
            &local,
            "GET",
            "/api/automation",
            &[("Authorization", "Bearer nope")],
            ""
        )
        .0,
        401
    );
    assert_eq!(
        http(
            &local,
            "GET",
            "/api/automation",
            &[("Authorization", "Bearer tok-123")],
            ""
        )
        .0,
        200
    );
    // Without a secret the trigger is off, and says how to turn it on.
    let (status, msg) = trigger(&local, &[], "{}");
    assert_eq!(status, 503, "{msg}");
    assert!(msg.contains("HONE_WEBHOOK_SECRET"), "{msg}");
}

/// The unattended path end to end: a signed trigger (what a schedule also does) runs the loop,
/// finalizes it into a pull request, and a Slack-format endpoint hears of the keeps and the end.
#[test]
fn a_triggered_run_opens_a_pull_request_and_notifies_with_no_one_at_the_keyboard() {
    let ok = Reply::Status(200, Vec::new(), "ok".into());
    let slack = LlmServer::start(vec![ok], false);
    let api = LlmServer::github_opening_pr(7);
    let r = Repo::new(
        &format!(
            "[[notify]]\nurl = \"{}/hook\"\nformat = \"slack\"\non = [\"keep\", \"finish\"]\n",
            slack.url
        ),
        SCORE,
        KEEPS_SCRIPT,
    );
    let bare = r.bare_remote("remote.git");
    r.origin_pushing_to("git@github.com:acme/widgets.git", &bare);
    let d = Daemon::start(
        &r,
        &["--port", "0"],
        &[
            ("HONE_WEBHOOK_SECRET", HOOK_SECRET),
            ("GITHUB_TOKEN", "ghp_nightly"),
            ("GITHUB_API_URL", &api.url),
        ],
    );
    let body = r#"{"tag": "night", "max_experiments": 4, "pr": true}"#;
    let (status, msg) = trigger(&d.addr, &[("X-Hub-Signature-256", &signed(body))], body);
    assert_eq!(status, 202, "{msg}");
    d.wait_for("run night finished and was finalized");
    assert_eq!(r.statuses(), ["baseline", "keep", "discard", "keep"]);
    assert_eq!(
        git(&bare, &["rev-parse", "refs/heads/hone/night-final^{tree}"]),
        r.rev("refs/hone/night/3^{tree}")
    );
    let reqs = api.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].0, "/repos/acme/widgets/pulls");
    let texts: Vec<String> = bodies(&slack)
        .iter()
        .map(|b| b["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(texts.len(), 3, "{texts:?}");
    assert!(texts[2].starts_with("hone run night finished"), "{texts:?}");
    let log = std::fs::read_to_string(r.dir.join(".hone/automation/night.log")).unwrap();
    assert!(log.contains("opened pull request #7"), "{log}");
}

#[test]
fn hone_serve_takes_signed_triggers_beside_the_dashboard() {
    let r = Repo::new("", SCORE, &scores(&[4]));
    let d = Daemon::start_as(
        "serve",
        "hone serve: http://",
        &r,
        &["--port", "0"],
        &[
            ("HONE_WEBHOOK_SECRET", HOOK_SECRET),
            ("HONE_TOKEN", SERVE_TOKEN),
        ],
    );
    // `hone serve` always wants its token (made for the session without HONE_TOKEN).
    let bearer = format!("Bearer {SERVE_TOKEN}");
    d.wait_for("POST /api/trigger starts a run");
    let body = r#"{"tag": "viaserve", "max_experiments": 2}"#;
    let (status, msg) = trigger(&d.addr, &[("Authorization", &bearer)], body);
    assert_eq!(status, 401, "{msg}");
    assert!(!r.dir.join(".hone").exists(), "nothing ran");
    let (status, msg) = trigger(
        &d.addr,
        &[
            ("X-Hub-Signature-256", &signed(body)),
            ("Authorization", &bearer),
        ],
        body,
    );
    assert_eq!(status, 202, "{msg}");
    d.wait_for("run viaserve finished");
    assert_eq!(r.statuses(), ["baseline", "keep"]);
    // The dashboard beside it shows the run the trigger started.
    let (status, page) = http(&d.addr, "GET", "/", &[("Authorization", &bearer)], "");
    assert_eq!(status, 200);
    assert!(page.contains("viaserve"), "{page}");
}
