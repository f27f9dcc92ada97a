//! The review gate: a reviewer (command or HTTP model) approves or rejects a candidate before
//! any compute, shares the proposer's budget, and a refused key stops the run unverified.

use crate::support::*;

#[test]
fn the_review_gate_rejects_before_any_compute() {
    let runs = RunCounter::new();
    let verify = &runs.command;
    let r = Repo::new(
        "[stop]\nmax_experiments = 5\n\n[review]\nmax_diff_lines = 6\nforbid = [\"open\\\\(.data\"]\ncommand = \"if grep -q 'score: 1' \\\"$HONE_REVIEW_PROMPT\\\"; then echo 'REJECT: too good to be true'; else echo 'looks fine'; echo APPROVE; fi\"\n",
        verify,
        "write\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 1\\n\n---\nwrite\tvalue.txt\tscore: 3\\nx = open('data/input.txt')\\n\n---\nwrite\tvalue.txt\tscore: 2\\na\\nb\\nc\\nd\\ne\\nf\\ng\\n\n",
    );
    let log = r.run_log("rv");
    assert_statuses(
        &log,
        &["baseline", "keep", "rejected", "rejected", "rejected"],
    );
    assert_eq!(
        log[2]["reason"],
        "the reviewer rejected it: too good to be true"
    );
    assert_reason(&log[3], "forbidden pattern");
    assert_reason(&log[4], "max_diff_lines");
    // Only the baseline and the approved #1 ran the verifier.
    assert_eq!(runs.runs(), 2);
    // Rejected candidates are archived like every other.
    assert!(git(&r.dir, &["show", "refs/hone/rv/2:value.txt"]).contains("score: 1"));
}

#[test]
fn a_diff_larger_than_the_reviewer_is_shown_is_rejected_unseen() {
    // 2,500 lines of padding, then the line that matters: the reviewer would see only the
    // padding, and approves whatever it sees.
    let r = Repo::new(
        "[stop]\nmax_experiments = 2\n\n[review]\ncommand = \"echo APPROVE\"\n",
        "tail -n 1 value.txt",
        "run\tfor i in $(seq 2500); do echo \"# padding line $i of a change to hide the next\"; done > value.txt; echo 'score: 1' >> value.txt\n",
    );
    let log = r.run_log("big");
    assert_statuses(&log, &["baseline", "rejected"]);
    assert_reason(
        &log[1],
        "a reviewer is shown at most 100000: not reviewed whole",
    );
}

#[test]
fn lines_joined_by_bare_carriage_returns_count_against_max_diff_lines() {
    // Seven statements joined by `\r` are one line to git and seven to Python: the change is
    // 2 added and 1 deleted lines by git's count, 9 by what runs.
    let r = Repo::new(
        "[stop]\nmax_experiments = 3\n\n[review]\nmax_diff_lines = 6\n",
        "cat value.txt",
        "run\tprintf 'score: 2\\na=1\\rb=2\\rc=3\\rd=4\\re=5\\rf=6\\rg=7\\n' > value.txt\n\
         ---\n\
         run\tprintf 'score: 2\\r\\nsix\\r\\n' > value.txt\n",
    );
    let log = r.run_log("cr");
    assert_statuses(&log, &["baseline", "rejected", "keep"]);
    assert_reason(&log[1], "changes 9 lines (max_diff_lines = 6");
}

#[test]
fn parallel_slots_review_their_candidates_at_the_same_time() {
    // Two workers, and a reviewer that approves #1 at once (the coordinator waits for a
    // reviewer's first verdict before it asks for a second candidate), then approves #2 and #3
    // only once both their reviews are under way at once (each waits up to 20 s for the
    // other). Reviews done one at a time by the coordinator would leave #2 alone: rejected.
    let marks = Marks::new();
    put(
        marks.path("review.sh"),
        marks.fill(
            "if [ \"$HONE_EXPERIMENT\" = 1 ]; then echo APPROVE; exit 0; fi\n\
             touch {m}/at.$HONE_EXPERIMENT\n\
             i=0\n\
             while [ \"$(ls {m} | grep -c '^at\\.')\" -lt 2 ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done\n\
             echo \"$HONE_EXPERIMENT $(ls {m} | grep -c '^at\\.')\" >> {m}/seen\n\
             if [ \"$(ls {m} | grep -c '^at\\.')\" -ge 2 ]; then echo APPROVE; else echo 'REJECT: reviewed alone'; fi\n",
        ),
    );
    let runs = RunCounter::new();
    let r = Repo::new(
        &marks.fill(
            "[stop]\nmax_experiments = 4\n\n[exec]\nworkers = 2\n\n[review]\ncommand = \"sh {m}/review.sh\"\n",
        ),
        &runs.command,
        "write\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\n---\nwrite\tvalue.txt\tscore: 2\\n\n",
    );
    let log = r.run_log("pr");
    assert!(
        log.iter().all(|e| e["status"] != "rejected"),
        "{:?}",
        log.iter()
            .map(|e| (&e["status"], &e["reason"]))
            .collect::<Vec<_>>()
    );
    let mut seen = std::fs::read_to_string(marks.path("seen"))
        .unwrap()
        .lines()
        .map(String::from)
        .collect::<Vec<_>>();
    seen.sort();
    assert_eq!(seen, ["2 2", "3 2"], "both reviews saw the other under way");
    // Every approved candidate was measured, after the baseline.
    assert_eq!(runs.runs(), 4);
}

const REVIEW_SECRET: &str = "sk-review-never-leak-91ab";

fn verdict(decision: &str, reason: &str) -> String {
    serde_json::json!({"decision": decision, "reason": reason}).to_string()
}

#[test]
fn an_http_reviewer_approves_or_rejects_before_the_verifier_runs() {
    let reviewer = LlmServer::start(
        vec![
            Reply::Answer(verdict("approve", "a plain change"), 400, 20),
            Reply::Answer(verdict("reject", "it reads the validation data"), 400, 20),
            Reply::Answer("LGTM, ship it".into(), 400, 20),
        ],
        false,
    );
    let marks = Marks::new();
    let verify = marks
        .fill("echo run >> {m}/runs; echo \\\"verifier=$REVIEW_KEY\\\" >> {m}/keys; cat value.txt");
    let review_url = format!("{}/v1", reviewer.url);
    let r = Repo::builder()
        .file("REVIEW.md", "Reject anything that reads data/.\n")
        .script(&marks.fill(
            "run\techo \"agent=$REVIEW_KEY\" >> {m}/keys\nwrite\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 1\\n\n---\nwrite\tvalue.txt\tscore: 2\\n\n",
        ))
        .spec_with(move |agent| {
            Spec::standard(&verify, agent)
                .set("stop", "max_experiments", "4")
                .provider("review", "openai", "judge", &review_url)
                .set("review", "api_key_env", "\"REVIEW_KEY\"")
                .lines(
                    "review",
                    "max_tokens = 200\nprice_in_per_mtok = 1\nprice_out_per_mtok = 2\ninstructions = \"REVIEW.md\"",
                )
        })
        .create();
    ok(Command::new(HONE)
        .arg("run")
        .current_dir(&r.dir)
        .env("REVIEW_KEY", REVIEW_SECRET)
        .output()
        .unwrap());
    let log = r.log();
    assert_statuses(&log, &["baseline", "keep", "rejected", "rejected"]);
    assert_eq!(
        log[2]["reason"],
        "the reviewer rejected it: it reads the validation data"
    );
    // Anything but the JSON verdict rejects.
    assert_reason(&log[3], "not a verdict");
    // Only the baseline and the approved candidate were measured.
    assert_eq!(
        std::fs::read_to_string(marks.path("runs"))
            .unwrap()
            .lines()
            .count(),
        2
    );
    // The review's usage is the experiment's: 400 in at $1/M + 20 out at $2/M.
    assert_eq!(log[2]["tokens"], 420);
    assert!(
        (log[2]["cost_usd"].as_f64().unwrap() - 0.00044).abs() < 1e-12,
        "{}",
        log[2]
    );
    let reqs = reviewer.requests();
    assert_eq!(reqs.len(), 3);
    let (_, headers, body) = &reqs[1];
    assert!(headers.contains(&(
        "authorization".to_string(),
        format!("Bearer {REVIEW_SECRET}")
    )));
    let body: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(body["model"], "judge");
    assert!(body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("\"decision\""));
    let prompt = body["messages"][1]["content"].as_str().unwrap();
    assert!(
        prompt.contains("+score: 1"),
        "the reviewer sees the diff: {prompt}"
    );
    assert!(
        prompt.contains("Reject anything that reads data/."),
        "and its instructions"
    );
    // Its key reaches neither the agent nor the verifier, nor hone's records.
    let seen = std::fs::read_to_string(marks.path("keys")).unwrap();
    assert!(!seen.contains(REVIEW_SECRET), "{seen}");
    assert!(
        seen.contains("agent=") && seen.contains("verifier="),
        "{seen}"
    );
    let state = state_bytes(&r);
    assert!(!state
        .windows(REVIEW_SECRET.len())
        .any(|w| w == REVIEW_SECRET.as_bytes()));
}

#[test]
fn proposer_and_reviewer_share_one_budget() {
    share_one_budget(1);
}

#[test]
fn parallel_proposals_and_reviews_share_one_budget() {
    // Two workers: #2 is proposed while #1 may still be reviewed on its slot, and #2 is
    // reviewed on its own slot's thread; the run's ledger counts them all.
    share_one_budget(2);
}

fn share_one_budget(workers: u32) {
    // Prices only on output tokens make every worst case exact: max_tokens = 100 at $1000 per
    // million is $0.10 a call. Proposer calls cost $0.10, reviews $0.05. With $0.33:
    // propose (0.10) + review (0.05); propose (0.10), then only $0.08 is left for a review
    // whose worst case is $0.10 (less while #1's review holds its worst case), so it is never
    // sent and the run stops on its budget. With two workers #2 is proposed once #1's review
    // approved it (the reviewer's first verdict), and made on the baseline, as #1 is not kept
    // yet; #2's review, on its slot, is charged to the same ledger.
    let second_on = if workers > 1 { "score: 5" } else { "score: 4" };
    let proposer = LlmServer::start(
        vec![
            Reply::Answer(edit("value.txt", "score: 5", "score: 4"), 1000, 100),
            Reply::Answer(edit("value.txt", second_on, "score: 3"), 1000, 100),
        ],
        false,
    );
    let reviewer = LlmServer::start(
        vec![Reply::Answer(verdict("approve", "ok"), 500, 50)],
        false,
    );
    let runs = RunCounter::new();
    let prices = "max_tokens = 100\nprice_in_per_mtok = 0\nprice_out_per_mtok = 1000";
    let r = Repo::builder()
        .spec(
            Spec::new()
                .editable(&["value.txt"])
                .command(&runs.command)
                .metric("score")
                .provider("agent", "openai", "m", &format!("{}/v1", proposer.url))
                .lines("agent", prices)
                .provider("review", "openai", "judge", &format!("{}/v1", reviewer.url))
                .lines("review", prices)
                .set("stop", "max_experiments", "10")
                .set("stop", "max_cost_usd", "0.33")
                .set("exec", "workers", &workers.to_string()),
        )
        .create();
    let out = ok(r.hone(&["run"]));
    assert_eq!(proposer.requests().len(), 2);
    assert_eq!(
        reviewer.requests().len(),
        1,
        "no review past the budget was sent"
    );
    let mut log = r.log();
    // In parallel, #1 may be decided before #2's review is refused: a #3 is then proposed,
    // and refused before its call is sent.
    if workers > 1 && log.len() == 4 {
        let third = log.pop().unwrap();
        assert_eq!(third["status"], "aborted", "{third}");
        assert!(reason(&third).starts_with("budget"), "{third}");
        assert_eq!(third["cost_usd"], 0.0, "{third}");
    }
    // Its review refused by the budget, #2 had no verdict: aborted, not counted.
    assert_statuses(&log, &["baseline", "keep", "aborted"]);
    assert!(
        (log[1]["cost_usd"].as_f64().unwrap() - 0.15).abs() < 1e-9,
        "{}",
        log[1]
    );
    assert_eq!(log[1]["tokens"], 1100 + 550);
    assert!(
        (log[2]["cost_usd"].as_f64().unwrap() - 0.10).abs() < 1e-9,
        "{}",
        log[2]
    );
    assert!(reason(&log[2]).starts_with("budget"), "{}", log[2]);
    assert_eq!(runs.runs(), 2, "the unreviewed candidate never ran");
    assert_says(&out, "stopped: budget");
}

#[test]
fn a_reviews_spend_is_in_the_store_before_the_verifier_runs() {
    // hone is killed while it verifies an approved candidate: what the reviewer cost (50
    // tokens out at $1000 per million) is in the store already, and stays with the experiment
    // when the resumed run records it aborted, so the run's budget still counts it.
    for workers in ["1", "2"] {
        let reviewer = LlmServer::start(
            vec![Reply::Answer(verdict("approve", "ok"), 500, 50)],
            false,
        );
        let marks = Marks::new();
        let verify = marks.blocking_verifier(1);
        let review_url = format!("{}/v1", reviewer.url);
        let r = Repo::builder()
            .script("write\tvalue.txt\tscore: 4\\n\n")
            .spec_with(move |agent| {
                Spec::standard(&verify, agent)
                    .set("stop", "max_experiments", "2")
                    .set("exec", "workers", workers)
                    .provider("review", "openai", "judge", &review_url)
                    .lines(
                        "review",
                        "max_tokens = 100\nprice_in_per_mtok = 0\nprice_out_per_mtok = 1000",
                    )
            })
            .create();
        let mut child = r.spawn_hone(&["run", "--tag", "k"]);
        let pgid = marks.blocked();
        kill_9_leaving(&mut child, pgid, "the verifier");
        let spent = |e: &serde_json::Value| (e["cost_usd"].as_f64().unwrap(), e["tokens"].clone());
        let log = r.log();
        assert_eq!(log[1]["status"], "running", "{workers}: {log:?}");
        assert_eq!(spent(&log[1]), (0.05, 550.into()), "{workers}: {}", log[1]);
        resume_kills(&r, pgid, "the verifier");
        let log = r.log();
        assert_eq!(log[1]["status"], "aborted", "{workers}: {log:?}");
        assert_eq!(spent(&log[1]), (0.05, 550.into()), "{workers}: {}", log[1]);
        // The aborted #1 is not counted by max_experiments: the resumed run reviews a #2.
        assert_eq!(reviewer.requests().len(), 2);
    }
}

#[test]
fn a_reviewer_whose_key_is_refused_stops_the_run_unverified() {
    // With three workers too: until the reviewer has given one verdict, the coordinator asks
    // for no second candidate, so a reviewer that cannot work costs one proposal, not three.
    // #1 is rejected by a rule (max_diff_lines) before the reviewer is asked: that is no
    // verdict of the reviewer's, and #2 is still reviewed alone.
    for workers in [1, 3] {
        let reviewer = answering(401, "{\"error\":\"bad key\"}");
        let runs = RunCounter::new();
        let r = Repo::new(
            &format!(
                "\n[exec]\nworkers = {workers}\n\n[review]\nmax_diff_lines = 2\nkind = \"openai\"\nmodel = \"judge\"\nbase_url = \"{}/v1\"\napi_key_env = \"REVIEW_KEY\"\n",
                reviewer.url
            ),
            &runs.command,
            &format!(
                "write\tvalue.txt\tscore: 4\\na\\nb\\nc\\n\n---\n{}",
                scores(&[3, 2, 1])
            ),
        );
        let out = r.hone(&["run"]);
        assert!(!out.status.success(), "{workers}: {}", text(&out));
        assert_says(&out, "check the key in $REVIEW_KEY");
        let log = r.log();
        assert_statuses(&log, &["baseline", "rejected", "rejected"]);
        assert_reason(&log[1], "max_diff_lines");
        assert_eq!(reviewer.requests().len(), 1, "a refused key is not retried");
        assert_eq!(runs.runs(), 1);
    }
}

/// A reviewer's server that answers every call with HTTP `status` and `body`.
fn answering(status: u16, body: &str) -> LlmServer {
    LlmServer::start(vec![Reply::Status(status, Vec::new(), body.into())], false)
}

/// A repository whose agent writes `score: <v>` for each of `turns`, scored by `runs`, and
/// whose candidates the HTTP reviewer `reviewer` reviews, asked once a call
/// (`max_attempts = 1`); `settings` are more `(table, key, value)` lines.
fn reviewed_by(
    reviewer: &LlmServer,
    runs: &RunCounter,
    turns: &[u32],
    settings: &[(&str, &str, &str)],
) -> Repo {
    let (command, url) = (runs.command.clone(), format!("{}/v1", reviewer.url));
    let settings: Vec<(String, String, String)> = settings
        .iter()
        .map(|(t, k, v)| (t.to_string(), k.to_string(), v.to_string()))
        .collect();
    Repo::builder()
        .script(&scores(turns))
        .spec_with(move |agent| {
            let spec = settings
                .iter()
                .fold(Spec::standard(&command, agent), |s, (t, k, v)| {
                    s.set(t, k, v)
                });
            spec.provider("review", "openai", "judge", &url)
                .set("review", "max_attempts", "1")
        })
        .create()
}

#[test]
fn a_reviewers_outage_is_waited_out_on_the_same_candidate() {
    // The reviewer's server answers 503 twice (through every retry): that is no verdict on
    // the candidate, so the same candidate is reviewed again after the outage wait and then
    // approved, verified and kept; no second proposal is made and nothing is rejected. With
    // two workers too (the review then waits on the slot's thread).
    let busy = || Reply::Status(503, Vec::new(), "{\"error\": \"overloaded\"}".into());
    for workers in [1, 2] {
        let reviewer = LlmServer::start(
            vec![
                busy(),
                busy(),
                Reply::Answer(verdict("approve", "ok"), 40, 5),
            ],
            false,
        );
        let runs = RunCounter::new();
        let w = workers.to_string();
        let r = reviewed_by(
            &reviewer,
            &runs,
            &[4, 3, 2],
            &[
                ("stop", "max_experiments", "2"),
                ("exec", "workers", &w),
                ("agent", "outage_wait", "\"0s\""),
            ],
        );
        let out = ok(r.hone(&["run"]));
        let log = r.log();
        assert_statuses(&log, &["baseline", "keep"]);
        assert_eq!(log[1]["objective"], 4.0, "{workers}: the first candidate");
        assert_eq!(
            reviewer.requests().len(),
            3,
            "{workers}: asked until it answered"
        );
        assert_eq!(runs.runs(), 2, "{workers}");
        assert!(!text(&out).contains("rejected"), "{}", text(&out));
    }
    // An outage longer than outage_limit: the candidate is aborted unreviewed (it never
    // ran), and the run stops, to be resumed.
    let reviewer = LlmServer::start(vec![busy()], false);
    let runs = RunCounter::new();
    let r = reviewed_by(
        &reviewer,
        &runs,
        &[4, 3],
        &[
            ("stop", "max_experiments", "3"),
            ("agent", "outage_limit", "\"0s\""),
        ],
    );
    exits_with(
        r.hone(&["run"]),
        1,
        "the reviewer's server has been unavailable for",
    );
    assert_statuses(&r.log(), &["baseline", "aborted"]);
    assert_eq!(runs.runs(), 1, "the unreviewed candidate never ran");
}

/// A run of three experiments with `workers`, whose reviewer's server is down (503 to every
/// call) and whose outage wait is an hour; `more` are more settings.
fn reviewer_down(workers: &str, more: &[(&str, &str, &str)]) -> (LlmServer, RunCounter, Repo) {
    let reviewer = answering(503, "{\"error\": \"down\"}");
    let runs = RunCounter::new();
    let mut settings = vec![
        ("stop", "max_experiments", "3"),
        ("exec", "workers", workers),
        ("agent", "outage_wait", "\"1h\""),
    ];
    settings.extend_from_slice(more);
    let r = reviewed_by(&reviewer, &runs, &[4, 3], &settings);
    (reviewer, runs, r)
}

#[test]
fn a_wait_out_of_the_reviewers_outage_ends_when_max_time_runs_out() {
    // The reviewer's server stays down and the wait before asking again is an hour, but
    // max_time is 15 s: the wait is cut there, the unreviewed candidate is aborted (never
    // verified) and the run stops on max_time, with no error. With two workers too.
    for workers in ["1", "2"] {
        let (reviewer, runs, r) = reviewer_down(workers, &[("stop", "max_time", "\"15s\"")]);
        let out = ok(run_bounded(&r.dir, &["run"]).unwrap());
        assert_says(&out, "reached max_time");
        let log = r.log();
        assert_eq!(log[0]["status"], "baseline", "{workers}");
        assert!(
            log[1..].iter().all(|e| e["status"] == "aborted"),
            "{workers}: {log:?}"
        );
        assert_reason(&log[1], "while the reviewer's server was unavailable");
        assert!(!reviewer.requests().is_empty(), "{workers}: never asked");
        assert_eq!(
            runs.runs(),
            1,
            "{workers}: the unreviewed candidate never ran"
        );
    }
}

#[test]
fn ctrl_c_once_ends_a_wait_out_of_the_reviewers_outage() {
    // The reviewer's server stays down and the wait before asking again is an hour: one
    // Ctrl-C ends the wait at once, the unreviewed candidate is aborted (never verified) and
    // the run stops, to be resumed. With two workers too.
    for workers in ["1", "2"] {
        let (reviewer, runs, r) = reviewer_down(workers, &[]);
        let mut child = spawn_hone_in(&r.dir, &["run"], Stdio::null(), Stdio::null());
        let asked = Instant::now();
        while reviewer.requests().is_empty() {
            assert!(
                child.try_wait().unwrap().is_none(),
                "{workers}: hone ended before it asked the reviewer"
            );
            assert!(
                asked.elapsed() < Duration::from_secs(120),
                "{workers}: the reviewer was never asked"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        // SAFETY: signalling the process group of our own child.
        unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
        let status = child.wait().unwrap();
        assert_eq!(
            status.code(),
            Some(130),
            "{workers}: interrupted runs exit 130"
        );
        assert_statuses(&r.log(), &["baseline", "aborted"]);
        assert_reason(&r.log()[1], "reviewer's server was unavailable");
        assert_eq!(
            runs.runs(),
            1,
            "{workers}: the unreviewed candidate never ran"
        );
    }
}
