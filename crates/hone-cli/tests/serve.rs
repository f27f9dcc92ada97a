//! `hone serve` end to end: the real binary over stores written by a real `hone run` or
//! through the store API, real HTTP on 127.0.0.1, and a real headless Chromium driven
//! through the W3C WebDriver protocol (chromedriver), which watches a run page update itself
//! while another `hone run` process adds experiments.

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "cli/support/git.rs"]
mod git;
#[path = "cli/support/knob_project.rs"]
mod knob_project;
#[path = "cli/support/svg.rs"]
mod svg;

use git::git;
use hone::spec::{AgentKind, Direction};
use hone::store::{ExperimentRecord, RunState, Status, Store};
use hone::verify::noise::Judgement;

const HONE: &str = env!("CARGO_BIN_EXE_hone");
const TOKEN: &str = "test-token-0123456789abcdef";
const HOSTILE: &str = r#"<script>alert("x")</script><img src=x onerror=alert(1)>'"&"#;

/// A project whose verifier is a shell one-liner (experiments take milliseconds): the knobs
/// optimizer looks for WIDTH 13 and DEPTH 4.
fn knob_repo() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    knob_project::commit_knob_project(
        &dir,
        knob_project::PARAMS,
        knob_project::SCORE_SH,
        "[loop]\neditable = [\"params.txt\"]\nprotected = [\"score.sh\"]\n\n[verify]\ncommand = \"sh score.sh\"\nmetric = \"loss\"\n\n[stop]\nmax_experiments = 50\n",
    );
    (tmp, dir)
}

fn hone_run(dir: &Path, n: u64) {
    let out = Command::new(HONE)
        .args(["run", "--tag", "t", "-n", &n.to_string()])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "hone run: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A running `hone serve`; killed when dropped.
struct Served {
    child: Child,
    /// Its output after the first line (kept so that it can go on printing).
    _rest: std::sync::mpsc::Receiver<String>,
    url: String,
    /// The token it made for itself when started without `HONE_TOKEN`.
    made_token: Option<String>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    /// `Authorization` for the token it made (started without `HONE_TOKEN`).
    fn auth(&self) -> (&'static str, String) {
        let t = self
            .made_token
            .as_deref()
            .expect("started without HONE_TOKEN");
        ("Authorization", format!("Bearer {t}"))
    }

    /// GET `path` (relative to its URL) with the token it made.
    fn get(&self, path: &str) -> Answer {
        let (k, v) = self.auth();
        get_with(&format!("{}{path}", self.url), &[(k, &v)])
    }

    /// GET `path` with the token it made, as JSON (must answer 200).
    fn json(&self, path: &str) -> serde_json::Value {
        let a = self.get(path);
        assert_eq!(a.status, 200, "{path}: {}", a.body);
        serde_json::from_str(&a.body).unwrap()
    }
}

/// Starts `hone serve --port 0 <args>` in `dir` and waits for the line that gives its address
/// (and, without a token, the next one: the URL with the token it made).
fn serve(dir: &Path, args: &[&str], token: Option<&str>) -> Served {
    let mut cmd = Command::new(HONE);
    cmd.args(["serve", "--port", "0"])
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match token {
        Some(t) => cmd.env("HONE_TOKEN", t),
        None => cmd.env_remove("HONE_TOKEN"),
    };
    let mut child = cmd.spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let Some(url) = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .map(str::to_string)
    else {
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        panic!("hone serve did not start: {line}{err}");
    };
    // The rest of its output, line by line (a server that prints no token line fails the
    // test instead of hanging it).
    let (tx, rest) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in stdout.lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let made_token = token.is_none().then(|| {
        let next = rest
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("no line after {line}: {e}"));
        let with = format!("{url}?token=");
        next.split_whitespace()
            .find_map(|w| w.strip_prefix(&with))
            .unwrap_or_else(|| panic!("no URL with a token after {line}: {next}"))
            .to_string()
    });
    Served {
        child,
        _rest: rest,
        url,
        made_token,
    }
}

/// An HTTP answer: status, headers (lower-case names) and body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

fn get_with(url: &str, headers: &[(&str, &str)]) -> Answer {
    let mut req = agent().get(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let mut res = req.call().unwrap();
    let status = res.status().as_u16();
    let headers = res
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    let body = body_text(&mut res);
    Answer {
        status,
        headers,
        body,
    }
}

/// The whole body of `res` as text, up to 64 MiB (ureq's own limit is lower).
fn body_text(res: &mut ureq::http::Response<ureq::Body>) -> String {
    res.body_mut()
        .with_config()
        .limit(64 << 20)
        .read_to_string()
        .unwrap()
}

fn get(url: &str) -> Answer {
    get_with(url, &[])
}

/// The experiment numbers of the table's rows, in order.
fn row_numbers(html: &str) -> Vec<u64> {
    html.split(r#"<tr id="exp-"#)
        .skip(1)
        .map(|s| s.split('"').next().unwrap().parse().unwrap())
        .collect()
}

/// Opens the event stream and returns its first event.
fn first_event(url: &str, headers: &[(&str, &str)]) -> (u16, Option<String>, String) {
    let mut req = agent().get(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let res = req.call().unwrap();
    let status = res.status().as_u16();
    let ctype = res
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string());
    if status != 200 {
        return (status, ctype, String::new());
    }
    let mut reader = BufReader::new(res.into_body().into_reader());
    let mut event = String::new();
    loop {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).unwrap() > 0, "the stream ended");
        if line.trim().is_empty() && event.contains("data:") {
            return (status, ctype, event);
        }
        if !line.starts_with(':') {
            event.push_str(&line);
        }
    }
}

fn record(n: u64, status: Status, objective: Option<f64>, description: &str) -> ExperimentRecord {
    ExperimentRecord {
        n,
        parent_commit: "0".repeat(40),
        status: Some(status),
        objective,
        description: description.into(),
        started_at: 1_800_000_000.0 + n as f64,
        finished_at: Some(1_800_000_000.5 + n as f64),
        total_ms: 1000 + n,
        ..Default::default()
    }
}

/// What the synthetic run's experiment `n` is: (status, objective).
fn synthetic(n: u64) -> (Status, Option<f64>) {
    match n {
        0 => (Status::Baseline, Some(100.0)),
        n if n % 7 == 3 => (Status::Crash, None),
        n if n % 10 == 5 => (Status::Keep, Some(100.0 - n as f64 * 0.5)),
        n => (Status::Discard, Some(100.0 + (n * 37 % 50) as f64)),
    }
}

/// A git repository with a store written through the store API: run `t` with 120 synthetic
/// experiments, and a run whose tag, metric and texts are hostile markup.
fn api_store() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    std::fs::write(dir.join("model.py"), "LR = 0.1  # learning rate\n").unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "init"]);
    let parent = git(&dir, &["rev-parse", "HEAD"]);
    std::fs::write(
        dir.join("model.py"),
        format!("LR = 0.2  # {HOSTILE}\nNAME = \"{HOSTILE}\"\n"),
    )
    .unwrap();
    git(&dir, &["commit", "-q", "-am", "candidate"]);
    let candidate = git(&dir, &["rev-parse", "HEAD"]);
    git(&dir, &["reset", "-q", "--hard", &parent]);

    let store = Store::open(&dir.join(".hone/hone.db")).unwrap();
    let run = store.create_plain_run("t", &parent, "loss").unwrap();
    for n in 0..120 {
        let (status, objective) = synthetic(n);
        store
            .put_experiment(
                run.id,
                &record(n, status, objective, &format!("change {n}")),
            )
            .unwrap();
    }
    let evil = store
        .create_run(
            HOSTILE,
            "hone/evil",
            &parent,
            1,
            AgentKind::Command,
            HOSTILE,
            Direction::Minimize,
            "{}",
            "{}",
        )
        .unwrap();
    // hone writes a known agent kind, but a store may hold any text there (another hone's
    // preset, or a hand-edited row): the dashboard shows it escaped.
    let set_agent = std::process::Command::new("python3")
        .args([
            "-c",
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); \
             c.execute('UPDATE runs SET agent = ? WHERE tag = ?', (sys.argv[2], sys.argv[2])); c.commit()",
        ])
        .arg(dir.join(".hone/hone.db"))
        .arg(HOSTILE)
        .status()
        .unwrap();
    assert!(set_agent.success());
    assert_eq!(store.run_by_tag(HOSTILE).unwrap().unwrap().agent, HOSTILE);
    let log = dir.join(".hone/runs/evil/1.log");
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    std::fs::write(&log, format!("step 1\n{HOSTILE}\nloss: 1.5\n")).unwrap();
    store
        .put_experiment(evil.id, &record(0, Status::Baseline, Some(2.0), HOSTILE))
        .unwrap();
    let mut e = record(1, Status::Keep, Some(1.5), HOSTILE);
    e.parent_commit = parent;
    e.candidate_commit = Some(candidate);
    e.reason = HOSTILE.into();
    e.metrics.insert(HOSTILE.into(), 3.0);
    e.config = Some(serde_json::json!({ "NAME": HOSTILE }));
    e.log_path = Some(log.to_string_lossy().into_owned());
    e.judgement = Some(Box::new(Judgement {
        keep: true,
        simplification: false,
        delta: 0.5,
        threshold: 0.1,
        sigma: None,
        runs: vec![1.5],
        candidate_mean: 1.5,
        best: 2.0,
        reason: HOSTILE.into(),
    }));
    store.put_experiment(evil.id, &e).unwrap();
    (tmp, dir)
}

/// Fails if `html` holds any of the hostile markup unescaped, or lacks it escaped.
fn assert_escaped(what: &str, html: &str) {
    for raw in ["<script>alert", "<img src=x", "onerror=alert(1)>"] {
        assert!(!html.contains(raw), "{what} holds raw `{raw}`:\n{html}");
    }
    assert!(
        html.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"),
        "{what} does not show the text escaped:\n{html}"
    );
}

#[test]
fn serve_shows_a_real_run_its_experiments_diffs_logs_and_events() {
    let (_tmp, dir) = knob_repo();
    hone_run(&dir, 6);
    let s = serve(&dir, &[], None);
    let runs = s.get("");
    assert_eq!(runs.status, 200);
    assert!(
        runs.body.contains(&format!(
            r#"<a href="/runs/t?token={}">t</a>"#,
            s.made_token.as_deref().unwrap()
        )),
        "{}",
        runs.body
    );
    assert!(
        runs.header("content-security-policy")
            .unwrap()
            .contains("script-src 'self'"),
        "a strict CSP on every page"
    );

    let page = s.get("runs/t");
    assert_eq!(page.status, 200, "{}", page.body);
    assert_eq!(
        row_numbers(&page.body),
        vec![5, 4, 3, 2, 1, 0],
        "newest first"
    );
    assert!(page
        .body
        .contains(r#"<section id="plot" class="plot"><svg"#));
    assert!(
        svg::marks(&page.body, "keeps\"") > 0,
        "kept points on the plot"
    );
    assert!(page
        .body
        .contains(r#"<span class="badge s-baseline">baseline</span> 1"#));
    let log = Command::new(HONE)
        .args(["log", "--json"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let first: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&log.stdout).lines().nth(1).unwrap()).unwrap();
    assert!(
        page.body
            .contains(&first["description"].as_str().unwrap().replace('>', "&gt;")),
        "descriptions in the table"
    );

    let exp = s.get("runs/t/experiments/1");
    assert_eq!(exp.status, 200, "{}", exp.body);
    assert!(exp.body.contains("archive ref <code>refs/hone/t/1</code>"));
    assert!(
        exp.body.contains(r#"<pre class="diff" id="diff">"#),
        "{}",
        exp.body
    );
    assert!(exp
        .body
        .contains(r#"<span class="dl dh">diff --git a/params.txt b/params.txt</span>"#));
    assert!(exp
        .body
        .contains(r#"<span class="dl add"><span class="sg">+</span>"#));
    assert!(exp.body.contains(r#"<span class="tn">20</span>"#));
    assert!(
        exp.body.contains(r#"<pre class="log" id="log">loss: "#),
        "{}",
        exp.body
    );
    assert!(exp.body.contains("<h2>decision</h2>"));
    assert_eq!(s.get("runs/t/experiments/99").status, 404);
    assert_eq!(s.get("runs/nope").status, 404);

    let api = s.json("api/runs/t");
    assert_eq!(api["summary"]["experiments"], 6);
    assert_eq!(api["live"], false);
    let (k, v) = s.auth();
    let (status, ctype, event) = first_event(&format!("{}api/runs/t/events", s.url), &[(k, &v)]);
    assert_eq!(status, 200);
    assert_eq!(ctype.as_deref(), Some("text/event-stream"));
    assert!(event.starts_with("event: change\n"), "{event}");
    assert!(event.contains(&format!("\"mark\":\"{}", 6)), "{event}");
    for asset in ["assets/style.css", "assets/app.js"] {
        assert_eq!(s.get(asset).status, 200, "{asset}");
    }
}

#[test]
fn serve_sorts_filters_and_pages_in_the_store() {
    let (_tmp, dir) = api_store();
    let s = serve(&dir, &[], None);
    let page = |q: &str| {
        let a = s.get(&format!("runs/t{q}"));
        assert_eq!(a.status, 200, "{q}: {}", a.body);
        a.body
    };
    let body = page("?per=10&page=2");
    assert_eq!(row_numbers(&body), (100..110).rev().collect::<Vec<_>>());
    assert!(body.contains("11–20 of 120"), "{body}");
    assert!(body.contains("page 2 of 12"), "{body}");
    assert_eq!(
        row_numbers(&page("?page=3&per=50")),
        (0..20).rev().collect::<Vec<_>>()
    );

    let crashes: Vec<u64> = (0..120)
        .filter(|n| synthetic(*n).0 == Status::Crash)
        .collect();
    let body = page("?status=crash&sort=n&dir=asc&per=500");
    assert_eq!(row_numbers(&body), crashes);
    assert!(
        body.contains(&format!(
            r#"<a class="filter on" href="?status=crash&amp;dir=asc&amp;per=500&amp;token={}">crash {}</a>"#,
            s.made_token.as_deref().unwrap(),
            crashes.len()
        )),
        "{body}"
    );

    let mut by_value: Vec<(f64, u64)> = (0..120)
        .filter_map(|n| synthetic(n).1.map(|v| (v, n)))
        .collect();
    by_value.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let body = page("?sort=objective&per=5");
    let want: Vec<u64> = by_value[..5].iter().map(|(_, n)| *n).collect();
    assert_eq!(row_numbers(&body), want, "best (lowest) first");
    let body = page("?sort=objective&dir=desc&per=500");
    let rows = row_numbers(&body);
    assert_eq!(rows.len(), 120);
    assert!(
        rows[rows.len() - crashes.len()..]
            .iter()
            .all(|n| crashes.contains(n)),
        "experiments without a value sort last"
    );

    let api = s.json("api/runs/t/experiments?status=keep&sort=objective&dir=desc&per=3&page=2");
    let keeps: Vec<u64> = (0..120)
        .filter(|n| synthetic(*n).0 == Status::Keep)
        .collect();
    assert_eq!(api["total"], keeps.len());
    let got: Vec<u64> = api["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["n"].as_u64().unwrap())
        .collect();
    // Keeps' values fall with n, so highest value first is lowest n first.
    assert_eq!(got, keeps[3..6].to_vec());

    let bad = s.get("runs/t?status=nonsense");
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains("unknown status"), "{}", bad.body);
    let bad = s.get("api/runs/t/experiments?sort=evil%3BDROP");
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains("cannot sort by"), "{}", bad.body);
}

/// The run page keeps what it draws from every experiment while the run's mark stays the
/// same, and draws again as soon as the run changes: a new best shows at once.
#[test]
fn serve_draws_the_run_page_again_when_the_run_changes() {
    let (_tmp, dir) = api_store();
    let s = serve(&dir, &[], None);
    let page = || {
        let a = s.get("runs/t");
        assert_eq!(a.status, 200, "{}", a.body);
        a.body
    };
    // Gzipped, the page is compressed around its plot, deflated once and kept: the same page
    // once unzipped, whatever the table shows.
    let gzipped = |path: &str| {
        use std::io::Read as _;
        let (k, v) = s.auth();
        let mut res = agent()
            .get(&format!("{}{path}", s.url))
            .header(k, &v)
            .header("Accept-Encoding", "gzip")
            .call()
            .unwrap();
        assert_eq!(res.status().as_u16(), 200, "{path}");
        assert_eq!(res.headers().get("content-encoding").unwrap(), "gzip");
        let mut zipped = Vec::new();
        res.body_mut()
            .with_config()
            .limit(64 << 20)
            .reader()
            .read_to_end(&mut zipped)
            .unwrap();
        let mut plain = String::new();
        flate2::read::GzDecoder::new(&zipped[..])
            .read_to_string(&mut plain)
            .expect("one valid gzip stream");
        plain
    };
    let first = page();
    assert!(first.contains("loss (120 experiments)"), "{first}");
    assert_eq!(page(), first, "asked again, the same page");
    assert_eq!(gzipped("runs/t"), first);
    for q in ["?sort=objective&per=5", "?status=crash&page=2&per=3"] {
        let plain = s.get(&format!("runs/t{q}")).body;
        assert_eq!(gzipped(&format!("runs/t{q}")), plain, "{q}");
    }
    let store = Store::open(&dir.join(".hone/hone.db")).unwrap();
    let run = store.run_by_tag("t").unwrap().unwrap();
    store
        .put_experiment(
            run.id,
            &record(120, Status::Keep, Some(1.5), "the newest best"),
        )
        .unwrap();
    // Learning curves too: the run page's plot gains a second drawing.
    for (n, step, value) in [
        (119, 1.0, 3.0),
        (119, 2.0, 2.5),
        (120, 1.0, 2.0),
        (120, 2.0, 1.5),
    ] {
        store.put_curve_point(run.id, n, step, value).unwrap();
    }
    // Asked gzipped first, the new drawing is deflated where it is drawn (the plot, then the
    // curves): the same page as the plain one.
    let zipped = gzipped("runs/t");
    let after = page();
    assert_eq!(zipped, after, "the new plot deflated where it was drawn");
    assert!(after.contains("<polyline"), "the learning curves are drawn");
    assert!(after.contains("loss (121 experiments)"), "{after}");
    assert!(after.contains("1.500000"), "the new best in the counters");
    assert!(
        after.contains("#120 1.500000: the newest best"),
        "its point on the plot"
    );
    assert_eq!(gzipped("runs/t"), after, "the new plot deflated, kept");
    let view = s.json("api/runs/t/view");
    assert_eq!(view["experiments"], 121);
    assert!(view["plot"].as_str().unwrap().contains("the newest best"));
}

#[test]
fn serve_escapes_what_agents_wrote_everywhere() {
    let (_tmp, dir) = api_store();
    let s = serve(&dir, &[], None);
    let tag =
        "%3Cscript%3Ealert(%22x%22)%3C%2Fscript%3E%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E'%22%26";
    let runs = s.get("");
    assert_escaped("the runs list", &runs.body);
    let run = s.get(&format!("runs/{tag}"));
    assert_eq!(run.status, 200, "{}", run.body);
    assert_escaped("the run page", &run.body);
    let exp = s.get(&format!("runs/{tag}/experiments/1"));
    assert_eq!(exp.status, 200, "{}", exp.body);
    assert_escaped("the experiment page", &exp.body);
    assert!(
        exp.body.contains(r#"<span class="dl add">"#),
        "the diff is shown"
    );
    assert!(
        exp.body.contains(
            r#"<pre class="log" id="log">step 1\n&lt;script&gt;"#
                .replace("\\n", "\n")
                .as_str()
        ),
        "the log tail is shown, escaped: {}",
        exp.body
    );
    let view = s.json(&format!("api/runs/{tag}/view"));
    for part in ["counters", "plot", "table"] {
        assert_escaped(part, view[part].as_str().unwrap());
    }
}

#[test]
fn serve_refuses_a_non_loopback_bind_without_a_long_token() {
    let (_tmp, dir) = knob_repo();
    for token in [None, Some("short")] {
        let mut cmd = Command::new(HONE);
        cmd.args(["serve", "--bind", "0.0.0.0", "--port", "0"])
            .current_dir(&dir);
        match token {
            Some(t) => cmd.env("HONE_TOKEN", t),
            None => cmd.env_remove("HONE_TOKEN"),
        };
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{token:?}: {err}");
        assert!(
            err.contains("HONE_TOKEN"),
            "{token:?}: says what to set: {err}"
        );
        assert!(out.stdout.is_empty(), "nothing was served");
    }
}

#[test]
fn serve_with_a_token_answers_401_to_every_request_without_it() {
    let (_tmp, dir) = knob_repo();
    hone_run(&dir, 3);
    let s = serve(&dir, &["--bind", "0.0.0.0"], Some(TOKEN));
    let port = s.url.rsplit(':').next().unwrap().trim_end_matches('/');
    let base = format!("http://127.0.0.1:{port}/");
    let paths = [
        "",
        "runs/t",
        "runs/t/experiments/1",
        "api/runs",
        "api/runs/t",
        "api/runs/t/experiments",
        "api/runs/t/view",
        "assets/style.css",
        "assets/app.js",
        "healthz",
        "no/such/page",
    ];
    let bearer = format!("Bearer {TOKEN}");
    for p in paths {
        let url = format!("{base}{p}");
        let a = get(&url);
        assert_eq!(a.status, 401, "{p} without the token");
        assert!(
            a.body.contains("HONE_TOKEN"),
            "{p}: says what to do: {}",
            a.body
        );
        assert_eq!(
            get_with(
                &url,
                &[("Authorization", "Bearer wrong-token-0123456789abcdef")]
            )
            .status,
            401,
            "{p} with a wrong token"
        );
        assert_eq!(
            get_with(&url, &[("Cookie", "hone_token=wrong")]).status,
            401,
            "{p} with a wrong cookie"
        );
        let ok = get_with(&url, &[("Authorization", &bearer)]);
        let want = if p == "no/such/page" { 404 } else { 200 };
        assert_eq!(ok.status, want, "{p} with the token: {}", ok.body);
    }
    let events = format!("{base}api/runs/t/events");
    assert_eq!(first_event(&events, &[]).0, 401, "the event stream too");
    let (status, ctype, event) = first_event(&events, &[("Authorization", &bearer)]);
    assert_eq!((status, ctype.as_deref()), (200, Some("text/event-stream")));
    assert!(event.contains("event: change"), "{event}");
    let (status, _, _) = first_event(&format!("{events}?token={TOKEN}"), &[]);
    assert_eq!(status, 200, "EventSource can carry it in the query");

    // A browser: the token stays in the address, and every link the pages make carries it;
    // never a cookie, which the browser would send to every port of 127.0.0.1 (where an
    // agent may listen). A cookie an earlier hone set is refused and cleared.
    let page = get(&format!("{base}runs/t?per=10&token={TOKEN}"));
    assert_eq!(page.status, 200, "{}", page.body);
    assert_eq!(page.header("set-cookie"), None, "no cookie");
    for link in [
        format!(r#"href="/runs/t/experiments/2?token={TOKEN}""#),
        format!(r#"href="/?token={TOKEN}""#),
        format!(r#"href="/assets/style.css?token={TOKEN}""#),
        format!(r#"data-events="/api/runs/t/events?token={TOKEN}""#),
        format!(r#"href="?status=keep&amp;per=10&amp;token={TOKEN}""#),
    ] {
        assert!(page.body.contains(&link), "{link} in {}", page.body);
    }
    let links = page.body.matches("href=\"").count();
    let with_token = page.body.matches(&format!("token={TOKEN}\"")).count();
    assert!(links > 10, "{}", page.body);
    assert_eq!(
        with_token,
        links + 2,
        "every link, the script and the two data addresses: {}",
        page.body
    );
    let exp = get(&format!("{base}runs/t/experiments/1?token={TOKEN}"));
    assert!(
        exp.body
            .contains(&format!(r#"href="/runs/t/experiments/2?token={TOKEN}""#))
            && exp
                .body
                .contains(&format!(r#"href="/runs/t?token={TOKEN}""#)),
        "{}",
        exp.body
    );
    // An error page too (its stylesheet and home link).
    let missing = get(&format!("{base}runs/t/experiments/999?token={TOKEN}"));
    assert_eq!(missing.status, 404, "{}", missing.body);
    assert!(
        missing
            .body
            .contains(&format!(r#"href="/assets/style.css?token={TOKEN}""#))
            && missing.body.contains(&format!(r#"href="/?token={TOKEN}""#)),
        "{}",
        missing.body
    );
    // No redirect anywhere (`//evil.example/x` is a path here).
    let away = get(&format!("{base}/evil.example/x?token={TOKEN}"));
    assert_eq!((away.status, away.header("location")), (404, None));
    let old = get_with(
        &format!("{base}runs/t"),
        &[("Cookie", &format!("hone_token={TOKEN}"))],
    );
    assert_eq!(old.status, 401, "the token in a cookie opens nothing");
    let cleared = old.header("set-cookie").unwrap_or_default().to_string();
    assert!(
        cleared.starts_with("hone_token=;") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
}

/// Sandboxed agents keep their network, loopback included: a dashboard they could read
/// without a token would show them the sealed holdout's numbers. Without `HONE_TOKEN`,
/// `hone serve` makes a token of its own (a new one each start) and prints the URL with it.
#[test]
fn serve_without_hone_token_makes_one_and_answers_nothing_without_it() {
    let (_tmp, dir) = knob_repo();
    let spec = dir.join("hone.toml");
    let toml = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(
        &spec,
        format!("{toml}\n[verify.holdout]\ncommand = \"sh score.sh\"\n"),
    )
    .unwrap();
    git(&dir, &["commit", "-qam", "a holdout"]);
    hone_run(&dir, 2);
    let s = serve(&dir, &[], None);
    let made = s.made_token.clone().unwrap();
    assert!(made.len() >= 32, "{made}");
    let exp = s.get("runs/t/experiments/0");
    assert_eq!(exp.status, 200, "{}", exp.body);
    assert!(exp.body.contains("holdout (sealed)"), "{}", exp.body);
    let port = s.url.rsplit(':').next().unwrap().trim_end_matches('/');
    for path in [
        "",
        "runs/t",
        "runs/t/experiments/0",
        "api/runs",
        "api/runs/t",
        "api/runs/t/experiments",
        "api/runs/t/view",
        "healthz",
    ] {
        for base in [s.url.clone(), format!("http://localhost:{port}/")] {
            let a = get(&format!("{base}{path}"));
            assert_eq!(a.status, 401, "{base}{path} without the token: {}", a.body);
            assert!(a.body.contains("printed"), "says what to do: {}", a.body);
        }
    }
    let (status, _, _) = first_event(&format!("{}api/runs/t/events", s.url), &[]);
    assert_eq!(status, 401, "the event stream too");
    // The printed URL works in a browser, and its links carry the token on.
    let a = get(&format!("{}runs/t?token={made}", s.url));
    assert_eq!(a.status, 200);
    assert!(
        a.body
            .contains(&format!(r#"href="/runs/t/experiments/1?token={made}""#)),
        "{}",
        a.body
    );
    // Each start makes its own.
    let again = serve(&dir, &[], None);
    assert_ne!(again.made_token.as_deref(), Some(made.as_str()));
}

#[test]
fn ctrl_c_stops_the_server_with_an_event_stream_open() {
    let (_tmp, dir) = knob_repo();
    hone_run(&dir, 2);
    let mut s = serve(&dir, &[], None);
    let (k, v) = s.auth();
    let res = agent()
        .get(&format!("{}api/runs/t/events", s.url))
        .header(k, &v)
        .call()
        .unwrap();
    let mut stream = BufReader::new(res.into_body().into_reader());
    let mut line = String::new();
    stream.read_line(&mut line).unwrap();
    assert_eq!(line, "event: change\n", "the stream is open");
    // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(s.child.id() as i32, libc::SIGINT) }, 0);
    let mut status = None;
    wait_for("hone serve to exit", Duration::from_secs(30), || {
        status = s.child.try_wait().unwrap();
        status.is_some()
    });
    assert!(status.unwrap().success(), "{status:?}");
    let mut rest = String::new();
    let _ = stream.read_to_string(&mut rest);
    assert!(!rest.contains("event: change"), "no more events: {rest}");
}

// ---- The browser test -------------------------------------------------------------------

/// A chromedriver process and one headless Chromium session.
struct Browser {
    driver: Child,
    base: String,
    session: String,
    _profile: tempfile::TempDir,
}

fn find_program(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.is_file())
    })
}

impl Browser {
    /// `None` only when HONE_SKIP_BROWSER_TESTS=1; a missing browser fails the test.
    fn start() -> Option<Browser> {
        if std::env::var("HONE_SKIP_BROWSER_TESTS").as_deref() == Ok("1") {
            eprintln!("HONE_SKIP_BROWSER_TESTS=1: skipping the headless-browser test");
            return None;
        }
        let install = "install chromium and chromium-driver (`apt-get install -y chromium chromium-driver`; .ci/run does), or set HONE_SKIP_BROWSER_TESTS=1 to skip the browser test";
        let driver = find_program("chromedriver")
            .unwrap_or_else(|| panic!("chromedriver is not on PATH: {install}"));
        let chromium = find_program("chromium")
            .unwrap_or_else(|| panic!("chromium is not on PATH: {install}"));
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let mut browser = Browser {
            driver: child,
            base,
            session: String::new(),
            _profile: tempfile::tempdir().unwrap(),
        };
        wait_for("chromedriver to answer", Duration::from_secs(60), || {
            agent()
                .get(&format!("{}/status", browser.base))
                .call()
                .ok()
                .map(|mut r| r.body_mut().read_to_string().unwrap_or_default())
                .is_some_and(|b| b.contains("\"ready\":true"))
        });
        let caps = serde_json::json!({
            "capabilities": { "alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {
                    "binary": chromium,
                    "args": [
                        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                        "--no-first-run", "--disable-background-networking",
                        "--disable-component-update", "--disable-sync",
                        "--window-size=1360,1500",
                        format!("--user-data-dir={}", browser._profile.path().display()),
                    ]
                }
            }}
        });
        let v = browser.call("POST", "/session", Some(caps));
        browser.session = v["sessionId"].as_str().unwrap().to_string();
        Some(browser)
    }

    /// One WebDriver command; returns its `value`.
    fn call(&self, method: &str, path: &str, body: Option<serde_json::Value>) -> serde_json::Value {
        let url = if path == "/session" {
            format!("{}/session", self.base)
        } else {
            format!("{}/session/{}{path}", self.base, self.session)
        };
        let mut res = match body {
            Some(b) => agent()
                .post(&url)
                .header("Content-Type", "application/json")
                .send(b.to_string())
                .unwrap(),
            None if method == "DELETE" => agent().delete(&url).call().unwrap(),
            None => agent().get(&url).call().unwrap(),
        };
        let status = res.status().as_u16();
        let text = body_text(&mut res);
        assert_eq!(status, 200, "WebDriver {method} {path}: {text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["value"].clone()
    }

    fn goto(&self, url: &str) {
        self.call("POST", "/url", Some(serde_json::json!({ "url": url })));
    }

    fn eval(&self, script: &str) -> serde_json::Value {
        self.call(
            "POST",
            "/execute/sync",
            Some(serde_json::json!({ "script": script, "args": [] })),
        )
    }

    fn screenshot(&self, path: &Path) {
        let b64 = self.call("GET", "/screenshot", None);
        let png = base64_decode(b64.as_str().unwrap());
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let url = format!("{}/session/{}", self.base, self.session);
            let _ = agent().delete(&url).call();
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn base64_decode(s: &str) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a' + 26) as u32,
            b'0'..=b'9' => (c - b'0' + 52) as u32,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        }
    };
    let clean: Vec<u8> = s.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    let mut out = Vec::with_capacity(clean.len() / 4 * 3);
    for chunk in clean.chunks(4) {
        let digits: Vec<u32> = chunk
            .iter()
            .take_while(|c| **c != b'=')
            .map(|c| value(*c))
            .collect();
        let mut n = 0u32;
        for (i, d) in digits.iter().enumerate() {
            n |= d << (18 - 6 * i);
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..digits.len().saturating_sub(1)]);
    }
    out
}

/// Polls `cond` until it holds, failing after `limit`.
fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn screenshots_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("screenshots")
}

#[test]
fn dashboard_in_headless_chromium_with_a_token_shows_new_experiments_without_a_reload() {
    let Some(browser) = Browser::start() else {
        return;
    };
    let (_tmp, dir) = knob_repo();
    hone_run(&dir, 4);
    // With a token, as on a shared machine: the page, its script, its fetches and its event
    // stream all need it; the address and the page's links carry it.
    let s = serve(&dir, &[], Some(TOKEN));
    browser.goto(&format!("{}?token={TOKEN}", s.url));
    browser.eval("document.querySelector('.runs a').click(); return null");
    wait_for("the run's page", Duration::from_secs(30), || {
        browser.eval("return location.pathname + location.search")
            == format!("/runs/t?token={TOKEN}").as_str()
    });
    let rows = "return document.querySelectorAll('#experiments tbody tr[data-n]').length";
    assert_eq!(browser.eval(rows), 4, "the table's rows");
    assert_eq!(
        browser.eval("return document.querySelectorAll('#plot svg .keeps circle').length > 0"),
        true,
        "the plot, with its kept points"
    );
    // The page's event stream is open once its first event has arrived.
    wait_for("the event stream", Duration::from_secs(30), || {
        browser.eval("return document.getElementById('conn').className + ' ' + document.getElementById('conn').textContent") == "conn idle up to date"
    });
    browser.eval("window.honeTestMarker = 'same page'; return null");

    // Another process adds experiments to the store the page shows.
    hone_run(&dir, 9);
    wait_for("the new rows", Duration::from_secs(30), || {
        browser.eval(rows) == 9
    });
    assert_eq!(
        browser.eval("return window.honeTestMarker || 'reloaded'"),
        "same page",
        "the page updated itself without a reload"
    );
    assert_eq!(
        browser.eval("return document.querySelector('#experiments tbody tr').dataset.n"),
        "8",
        "the newest experiment on top"
    );
    assert_eq!(
        browser.eval("return document.querySelector('#counters .card .value').textContent"),
        "9",
        "the counters follow"
    );
    // The new rows' highlight fades out before the picture is taken.
    wait_for("the highlight to fade", Duration::from_secs(30), || {
        browser.eval("return document.getAnimations().length") == 0
    });
    let shots = screenshots_dir();
    browser.screenshot(&shots.join("hone-dashboard.png"));
    // What a page on another port of 127.0.0.1 gets from the browser (an agent's server,
    // say, which the user was shown): no cookie, so not the token. Cookies do not tell
    // ports apart.
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other_url = format!("http://{}/", other.local_addr().unwrap());
    let heard = std::thread::spawn(move || {
        let (mut conn, _) = other.accept().unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).unwrap() == 1 {
            head.push(byte[0]);
        }
        let _ =
            conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        String::from_utf8_lossy(&head).into_owned()
    });
    browser.goto(&other_url);
    let head = heard.join().unwrap();
    assert!(head.starts_with("GET / "), "{head}");
    assert!(
        !head.to_ascii_lowercase().contains("cookie") && !head.contains(TOKEN),
        "the other port got: {head}"
    );
    browser.goto(&format!("{}runs/t/experiments/1?token={TOKEN}", s.url));
    assert_eq!(
        browser.eval("return document.querySelectorAll('#diff .dl.add').length > 0"),
        true,
        "the experiment page shows the diff"
    );
    browser.screenshot(&shots.join("hone-experiment.png"));
    eprintln!("screenshots in {}", shots.display());
}

#[test]
fn serve_says_what_an_agent_runs_best_changed_against_its_baseline() {
    // An agent's records hold no configuration: the constants its kept commits moved are read
    // from the repository, as `hone status` reads them, for the run page and the API.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    knob_project::commit_knob_project(
        &dir,
        "LR = 0.1\n",
        "awk -F' = ' '/LR/ {print \"loss: \" 1 - $2}' params.txt\n",
        "[loop]\neditable = [\"params.txt\"]\nprotected = [\"score.sh\"]\n\n[verify]\ncommand = \"sh score.sh\"\nmetric = \"loss\"\n\n[agent]\nkind = \"command\"\ncommand = \"sed -i 's/^LR = 0.1$/LR = 0.2/' params.txt\"\n\n[sandbox]\nkind = \"rlimits\"\n\n[stop]\nmax_experiments = 2\n",
    );
    hone_run(&dir, 2);
    let s = serve(&dir, &[], None);
    let api = s.json("api/runs/t");
    assert_eq!(api["summary"]["best_vs_baseline"], "LR 0.1 -> 0.2", "{api}");
    let runs = s.json("api/runs");
    assert_eq!(
        runs["runs"][0]["summary"]["best_vs_baseline"],
        "LR 0.1 -> 0.2"
    );
    let page = s.get("runs/t");
    assert!(page.body.contains("<br>LR 0.1 -&gt; 0.2"), "{}", page.body);
}

#[test]
fn serve_says_a_run_stopped_on_an_error_as_hone_status_does() {
    // A run stopped by a refused key is resumable, but not "interrupted": resuming alone
    // fails the same way. The runs page and the run page say what `hone status` says.
    let (_tmp, dir) = api_store();
    let store = Store::open(&dir.join(".hone/hone.db")).unwrap();
    let run = store.run_by_tag("t").unwrap().unwrap();
    store
        .set_run_state(
            run.id,
            RunState::Interrupted,
            Some("the model's server refused the key (HTTP 401)"),
        )
        .unwrap();
    let s = serve(&dir, &[], None);
    for page in ["", "runs/t"] {
        let body = s.get(page).body;
        assert!(
            body.contains(">stopped on an error</span>")
                && body.contains("title=\"fix it, then resume with `hone run`\""),
            "{page}: {body}"
        );
    }
    // A Ctrl-C is an interruption.
    store
        .set_run_state(run.id, RunState::Interrupted, Some("interrupted"))
        .unwrap();
    assert!(s.get("runs/t").body.contains(">interrupted</span>"));
}
