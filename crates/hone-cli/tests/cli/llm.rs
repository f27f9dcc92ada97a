//! HTTP LLM proposers against the scripted server: edit, patch and knobs modes, retries, the
//! budget, oversized answers, and the Anthropic wire format.

use crate::support::*;

#[test]
fn openai_edits_are_applied_repaired_once_and_gated() {
    let (server, r, _) = llm_run(
        "openai",
        vec![
            Reply::Answer(edit("value.txt", "score: 5", "score: 4"), 100, 20),
            Reply::Answer(edit("value.txt", "score: 99", "score: 1"), 100, 20),
            Reply::Answer(edit("value.txt", "score: 77", "score: 1"), 100, 20),
            Reply::Answer(
                edit("prepare.py", "# the fixed evaluator", "print('score: 0')"),
                100,
                20,
            ),
        ],
        "",
        "max_experiments = 4",
    );
    let log = r.log();
    assert_statuses(&log, &["baseline", "keep", "invalid", "violation"]);
    assert_eq!(log[1]["description"], "change value.txt");
    assert_reason(&log[2], "after a repair round");
    // A failed edit is described by what the model said it tries.
    assert_eq!(log[2]["description"], "change value.txt");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 4, "one call, a call and its repair, one call");
    assert!(reqs.iter().all(|(p, _, _)| p == "/v1/chat/completions"));
    let (_, headers, body) = &reqs[0];
    assert!(headers.contains(&("authorization".to_string(), format!("Bearer {SECRET}"))));
    let body: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["messages"][0]["role"], "system");
    let user = body["messages"][1]["content"].as_str().unwrap();
    assert!(user.contains("value.txt"));
    assert!(
        !user.contains("hypothesis.txt") && !user.contains("append what you learned"),
        "a model over HTTP is asked to write files it cannot: {user}"
    );
    assert!(
        reqs[2]
            .2
            .contains("Your block could not be applied. Send it corrected:"),
        "the repair quotes the failing block, the only one: {}",
        reqs[2].2
    );
    let state = state_bytes(&r);
    assert!(
        !state.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
        "the API key leaked into .hone"
    );
}

#[test]
fn openai_retries_429_and_5xx_and_gives_up_on_a_hanging_server() {
    let (server, r, out) = llm_run(
        "openai",
        vec![
            Reply::Status(
                429,
                vec![("retry-after".into(), "0".into())],
                "{\"error\":\"slow down\"}".into(),
            ),
            Reply::Answer(edit("value.txt", "score: 5", "score: 4"), 10, 10),
            Reply::Status(500, vec![("retry-after".into(), "0".into())], "boom".into()),
            Reply::Status(503, vec![("retry-after".into(), "0".into())], "boom".into()),
            Reply::Status(500, vec![("retry-after".into(), "0".into())], "boom".into()),
            Reply::Hang,
            Reply::Hang,
            Reply::Hang,
            Reply::Answer(edit("value.txt", "score: 4", "score: 3"), 10, 10),
        ],
        "max_attempts = 3\nrequest_timeout = \"1s\"\noutage_wait = \"0s\"",
        "max_experiments = 3",
    );
    let log = r.log();
    // Given up on a server that stays unavailable: no candidate's failure, and not counted
    // by max_experiments (see `a_provider_outage_is_waited_out_and_is_no_candidates_failure`).
    assert_statuses(&log, &["baseline", "keep", "aborted", "aborted", "keep"]);
    assert_reason(&log[2], "gave up after 3 attempts");
    assert_reason(&log[3], "gave up after 3 attempts");
    // A server that does not answer in time is named as slow, with the setting to raise.
    assert_reason(
        &log[3],
        "no answer within request_timeout (1.0s; a slow server",
    );
    // The agent logs say what failed on the way: the 429 before #1's answer, and #2's outage.
    let run_dir = only_run_dir(&r);
    // What was sent is kept, as for the agent CLIs.
    let prompt = std::fs::read_to_string(run_dir.join("prompts/1.md")).unwrap();
    assert!(
        prompt.starts_with("<!-- system -->\nYou are a careful research engineer")
            && prompt.contains("<!-- user -->"),
        "{prompt}"
    );
    let first = std::fs::read_to_string(run_dir.join("logs/1.agent.log")).unwrap();
    assert!(
        first.contains("--- answer 1, attempt 1 failed: HTTP 429"),
        "{first}"
    );
    let second = std::fs::read_to_string(run_dir.join("logs/2.agent.log")).unwrap();
    assert!(
        second.contains("--- no answer 1: ") && second.contains("gave up after 3 attempts"),
        "{second}"
    );
    // 429 then success; three 5xx; three hanging attempts; success.
    assert_eq!(server.requests().len(), 2 + 3 + 3 + 1);
    // Each wait before another attempt is said as it starts, also when the output is not a
    // terminal (a run left overnight with its output in a file would look hung).
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("hone: experiment 1: the model's server: HTTP 429: {\"error\":\"slow down\"}; asking again in 0ms (attempt 2 of 3; Ctrl-C twice stops the run now)"),
        "{said}"
    );
    assert_eq!(
        said.matches("experiment 2: the model's server: ").count(),
        2,
        "{said}"
    );
    assert_eq!(
        said.matches("experiment 3: the model's server: ").count(),
        2,
        "{said}"
    );
}

#[test]
fn a_refusal_is_quoted_and_an_unusable_answer_that_reports_usage_is_charged_it() {
    // $100 per million tokens both ways: the refusal used 100 + 5 tokens ($0.0105), the
    // answer without choices 200 + 0 ($0.02); neither is charged its worst case.
    let (_server, r, _) = llm_run(
        "openai",
        vec![
            Reply::Status(
                200,
                vec![],
                "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":null,\"refusal\":\"I can't help with that.\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":5}}".into(),
            ),
            Reply::Status(
                200,
                vec![],
                "{\"choices\":[],\"usage\":{\"prompt_tokens\":200,\"completion_tokens\":0}}".into(),
            ),
        ],
        "max_tokens = 1000\nprice_in_per_mtok = 100\nprice_out_per_mtok = 100",
        "max_experiments = 3",
    );
    let log = r.log();
    assert_statuses(&log, &["baseline", "invalid", "invalid"]);
    assert_reason(&log[1], "the model refused: I can't help with that.");
    let cost = |e: &serde_json::Value| e["cost_usd"].as_f64().unwrap();
    assert!((cost(&log[1]) - 0.0105).abs() < 1e-9, "{}", log[1]);
    assert!((cost(&log[2]) - 0.02).abs() < 1e-9, "{}", log[2]);
}

#[test]
fn a_kill_9_during_a_model_call_keeps_its_worst_case_in_the_record() {
    // The server takes the request and never answers; hone is killed while it waits. The
    // provider may bill that call: the resumed run records the experiment aborted at the
    // call's worst case (1000 output tokens at $100 per million: at least $0.10), not $0.
    let server = LlmServer::start(
        vec![
            Reply::Hang,
            Reply::Answer(edit("value.txt", "score: 5", "score: 4"), 10, 10),
        ],
        false,
    );
    let r = llm_repo(
        "openai",
        &server,
        "max_tokens = 1000\nprice_in_per_mtok = 100\nprice_out_per_mtok = 100\nrequest_timeout = \"5m\"",
        "max_experiments = 2",
    );
    let mut child = Command::new(HONE)
        .args(["run", "--tag", "k"])
        .current_dir(&r.dir)
        .env("TEST_LLM_KEY", SECRET)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    server.wait_for_requests(1);
    child.kill().unwrap();
    child.wait().unwrap();
    ok(hone_with_key(&r, &["run", "--tag", "k"]));
    let log = r.log();
    assert_statuses(&log, &["baseline", "aborted", "keep"]);
    let cost = log[1]["cost_usd"].as_f64().unwrap();
    assert!(
        cost >= 0.1,
        "the cut-off call is recorded at ${cost}: {}",
        log[1]
    );
    assert!(log[1]["tokens"].as_u64().unwrap() >= 1000, "{}", log[1]);
    let status = text(&r.hone(&["status"]));
    assert!(!status.contains("cost: $0.00"), "{status}");
    // `hone show` says that charge is an estimate.
    let show = text(&r.hone(&["show", "1"]));
    assert!(
        show.contains("one out when hone stopped at its worst case (an estimate)"),
        "{show}"
    );
}

#[test]
fn a_refused_key_stops_the_run_before_the_baseline_and_an_unlisted_model_is_a_warning() {
    // The server's list of models refuses the key: nothing runs, not even the baseline.
    let server = LlmServer::start_listing(
        vec![Reply::Status(401, vec![], "{}".into())],
        false,
        (401, vec![]),
    );
    let r = llm_repo("openai", &server, "", "max_experiments = 2");
    let out = hone_with_key(&r, &["run"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_says(&out, "refused the key in $TEST_LLM_KEY (HTTP 401)");
    assert!(server.requests().is_empty(), "no call was made");
    let status = text(&r.hone(&["status"]));
    assert!(
        status.contains("no hone runs yet"),
        "no run was made: {status}"
    );
    // A server whose list of models answers `models`, and one keep to make.
    let listing = |models: (u16, Vec<&str>)| {
        let keep = Reply::Answer(edit("value.txt", "score: 5", "score: 4"), 10, 10);
        let server = LlmServer::start_listing(vec![keep], false, models);
        let r = llm_repo("openai", &server, "", "max_experiments = 2");
        (server, r)
    };
    // A server that lists other models: a warning, and the run goes on.
    let (_server, r) = listing((200, vec!["qwen2.5-coder-32b", "llama-3.1-8b"]));
    let out = ok(hone_with_key(&r, &["run"]));
    assert_says(
        &out,
        "[agent] model = \"test-model\" is not among the models",
    );
    assert_says(&out, "(qwen2.5-coder-32b, llama-3.1-8b)");
    assert_statuses(&r.log(), &["baseline", "keep"]);
    // A 403 to the list (a key allowed to chat, not to list models) is no verdict.
    let (_server, r) = listing((403, vec![]));
    ok(hone_with_key(&r, &["run"]));
    assert_statuses(&r.log(), &["baseline", "keep"]);
}

#[test]
fn a_server_that_reports_more_than_max_tokens_is_said_and_the_stop_says_exceeded() {
    // max_tokens = 100, but the server reports 5,000 output tokens ($0.50 at $100 a million):
    // charged as reported, said at once, and the stop says by how much the budget went over.
    let replies = vec![Reply::Answer(
        edit("value.txt", "score: 5", "score: 4"),
        1000,
        5000,
    )];
    let (_server, r, out) = llm_run(
        "openai",
        replies,
        "max_tokens = 100\nprice_in_per_mtok = 100\nprice_out_per_mtok = 100",
        "max_experiments = 5\nmax_cost_usd = 0.3",
    );
    assert_says(
        &out,
        "the server reported 5000 output tokens for an answer of at most 100 ([agent] max_tokens): charged as reported",
    );
    assert_says(
        &out,
        "budget: exceeded max_cost_usd by $0.3000 ($0.6000 of $0.3)",
    );
    let agent_log = std::fs::read_to_string(only_run_dir(&r).join("logs/1.agent.log")).unwrap();
    assert!(
        agent_log.contains("the server reported 5000 output tokens"),
        "{agent_log}"
    );
}

#[test]
fn the_budget_holds_before_a_call_is_sent() {
    // Each answer reports 1000 + 1000 tokens; at $100 per million that is $0.20 a call. After
    // three calls $0.05 of $0.65 is left, less than the next call's worst case.
    let replies = (1..5)
        .rev()
        .map(|v| {
            Reply::Answer(
                edit(
                    "value.txt",
                    &format!("score: {}", v + 1),
                    &format!("score: {v}"),
                ),
                1000,
                1000,
            )
        })
        .collect();
    let (server, r, out) = llm_run(
        "openai",
        replies,
        "max_tokens = 100\nprice_in_per_mtok = 100\nprice_out_per_mtok = 100",
        "max_experiments = 10\nmax_cost_usd = 0.65",
    );
    assert_eq!(
        server.requests().len(),
        3,
        "no fourth request may be sent: {:?}",
        r.log()
            .iter()
            .map(|e| (
                e["status"].clone(),
                e["reason"].clone(),
                e["cost_usd"].clone()
            ))
            .collect::<Vec<_>>()
    );
    let log = r.log();
    assert_statuses(&log, &["baseline", "keep", "keep", "keep", "aborted"]);
    assert!(reason(&log[4]).starts_with("budget"), "{}", log[4]);
    let cost: f64 = log.iter().map(|e| e["cost_usd"].as_f64().unwrap()).sum();
    assert!((cost - 0.6).abs() < 1e-9, "recorded cost {cost}");
    assert_eq!(log[1]["tokens"], 2000);
    assert_says(&out, "stopped: budget");
    assert_says(&out, "to go on: raise [stop] max_cost_usd in hone.toml");
    // The limits are said once at the start, also where the output goes to a file.
    assert_says(
        &out,
        "hone: limits: 10 experiments, $0.65; each verification at most",
    );
    // `hone status` gives the same hint, with the spec it was asked about.
    let status = text(&r.hone(&["--spec", "hone.toml", "status"]));
    assert!(
        status.contains("raise [stop] max_cost_usd in hone.toml")
            && status.contains("`hone --spec hone.toml run --tag "),
        "{status}"
    );
    // The best is the last of a chain of keeps, and the summary says what to do with them.
    assert_says(&out, "best change (#3, the last of 3 kept)");
    assert_says(&out, "next: `hone finalize --run");
    assert!(
        !text(&out).contains("has no price hone knows"),
        "{}",
        text(&out)
    );
    let show = text(&r.hone(&["show", "1"]));
    assert!(show.contains("spent: $0.2000, 2000 tokens"), "{show}");
    // The report and the log say what was spent, in money and in tokens.
    let tokens: u64 = log.iter().map(|e| e["tokens"].as_u64().unwrap()).sum();
    ok(r.hone(&["report"]));
    let tag = only_run_dir(&r).file_name().unwrap().to_owned();
    let md =
        std::fs::read_to_string(r.dir.join(".hone/reports").join(tag).join("report.md")).unwrap();
    assert!(md.contains(&format!("$0.6000, {tokens} tokens")), "{md}");
    let table = text(&r.hone(&["log"]));
    assert!(
        table.contains("tokens") && table.contains("  2000  "),
        "{table}"
    );
    assert!(
        show.contains("agent's prompt: ") && show.contains("prompts/1.md"),
        "{show}"
    );
    assert!(
        show.contains("agent's log: ") && show.contains("logs/1.agent.log"),
        "{show}"
    );
    // Raised in hone.toml, the limit is the resumed run's, said at once and shown by status.
    edit_spec(&r.dir, |t| {
        t.replace("max_cost_usd = 0.65", "max_cost_usd = 0.85")
    });
    let out = r.hone(&["run", "--more", "1"]);
    assert_says(&out, "max_cost_usd is now 0.85 (hone.toml; it was 0.65");
    let status = text(&r.hone(&["status"]));
    assert!(status.contains("of $0.85"), "{status}");
    // The tokens the records hold, summed.
    let tokens: u64 = r.log().iter().map(|e| e["tokens"].as_u64().unwrap()).sum();
    assert!(tokens > 0);
    assert!(
        status.contains(&format!("\n  tokens: {tokens}\n")),
        "{status}"
    );
    // And the same figure in the machine-readable summary, with no hone at work on the run.
    let json: serde_json::Value = serde_json::from_slice(&r.hone(&["status", "--json"]).stdout)
        .expect("status --json is JSON");
    assert_eq!(json["tokens"].as_u64(), Some(tokens), "{json}");
    assert_eq!(json["budget"]["max_cost_usd"], 0.85, "{json}");
    assert_eq!(
        json["budget"]["max_tokens"],
        serde_json::Value::Null,
        "{json}"
    );
    assert_eq!(
        json["budget"]["experiments_counted"].as_u64(),
        Some(r.log().len() as u64 - 1),
        "all but the aborted one: {json}"
    );
    assert_eq!(json["live"], serde_json::Value::Bool(false), "{json}");
    assert_eq!(
        json["in_flight"].as_array().map(Vec::len),
        Some(0),
        "{json}"
    );
    assert_eq!(
        server.requests().len(),
        4,
        "the raised budget pays for one more call"
    );
}

#[test]
fn experiments_in_flight_at_once_share_the_budget() {
    // Three workers: the coordinator asks for three candidates before any result is back.
    // Prices only on output tokens make every call's worst case exact whatever the prompt:
    // 100 tokens out at $2000 per million, $0.20 a call. With $0.45, the third call would
    // cross the budget once the first two are counted, though neither of their experiments
    // has finished.
    let replies = (2..5)
        .rev()
        .map(|v| {
            Reply::Answer(
                edit("value.txt", "score: 5", &format!("score: {v}")),
                1000,
                100,
            )
        })
        .collect();
    let server = LlmServer::start(replies, false);
    let r = Repo::builder()
        .spec(
            Spec::new()
                .editable(&["value.txt"])
                .command("cat value.txt")
                .metric("score")
                .provider("agent", "openai", "m", &format!("{}/v1", server.url))
                .lines(
                    "agent",
                    "max_tokens = 100\nprice_in_per_mtok = 0\nprice_out_per_mtok = 2000",
                )
                .set("stop", "max_experiments", "10")
                .set("stop", "max_cost_usd", "0.45")
                .set("exec", "workers", "3"),
        )
        .create();
    let out = ok(r.hone(&["run"]));
    let log = r.log();
    let cost: f64 = log.iter().map(|e| e["cost_usd"].as_f64().unwrap()).sum();
    assert_eq!(server.requests().len(), 2, "no third call: {log:?}");
    assert!((cost - 0.4).abs() < 1e-9, "recorded cost {cost}");
    let refused: Vec<_> = log
        .iter()
        .filter(|e| reason(e).starts_with("budget"))
        .collect();
    assert_eq!(refused.len(), 1, "{log:?}");
    assert_eq!(refused[0]["status"], "aborted");
    assert_says(&out, "stopped: budget");
    // A plain `hone run` the next morning asks which: more of this run, or a new one.
    exits_with(r.hone(&["run"]), 2, "stopped on its budget (budget: ");
    let runs = std::fs::read_dir(r.dir.join(".hone/runs")).unwrap().count();
    assert_eq!(runs, 1, "no new run started");
}

#[test]
fn anthropic_messages_api_drives_a_run() {
    let (server, r, _) = llm_run(
        "anthropic",
        vec![Reply::Answer(
            edit("value.txt", "score: 5", "score: 3"),
            50,
            10,
        )],
        "",
        "max_experiments = 2",
    );
    assert_eq!(r.statuses(), ["baseline", "keep"]);
    let reqs = server.requests();
    let (path, headers, body) = &reqs[0];
    assert_eq!(path, "/v1/messages");
    assert!(headers.contains(&("x-api-key".to_string(), SECRET.to_string())));
    assert!(headers.contains(&("anthropic-version".to_string(), "2023-06-01".to_string())));
    let body: serde_json::Value = serde_json::from_str(body).unwrap();
    assert!(body["system"].as_str().unwrap().contains("SEARCH/REPLACE"));
    assert_eq!(body["messages"][0]["role"], "user");
    assert_eq!(body["max_tokens"], 4096);
}

#[test]
fn openai_knobs_mode_validates_names_types_and_ranges() {
    let server = LlmServer::start(
        vec![
            Reply::Answer("{\"changes\": {\"LR\": 0.01, \"DEPTH\": 6}, \"hypothesis\": \"smaller steps, deeper\"}".into(), 10, 10),
            Reply::Answer("Sure: {\"changes\": {\"LR\": 5}}".into(), 10, 10),
            Reply::Answer("{\"changes\": {\"DEPTH\": 7}, \"hypothesis\": \"deeper still\"}".into(), 10, 10),
            Reply::Answer("{\"changes\": {\"BOGUS\": 1}}".into(), 10, 10),
        ],
        false,
    );
    let r = knobs_llm_repo(knobs_llm_spec(&server, 4));
    ok(r.hone(&["run"]));
    let log = r.log();
    assert_statuses(&log, &["baseline", "keep", "discard", "invalid"]);
    assert_eq!(log[1]["objective"], 0.0);
    assert_eq!(log[1]["config"]["LR"], 0.01);
    assert_eq!(
        log[1]["description"],
        "DEPTH 4 -> 6, LR 0.1 -> 0.01: smaller steps, deeper"
    );
    assert_reason(&log[3], "`BOGUS` is not a knob");
    let reqs = server.requests();
    assert_eq!(
        reqs.len(),
        5,
        "one call, a call with its repair, a call with its repair"
    );
    let first: serde_json::Value = serde_json::from_str(&reqs[0].2).unwrap();
    assert!(first["messages"][1]["content"]
        .as_str()
        .unwrap()
        .contains("| LR | 0.1 | float 0.001..1 (log scale) |"));
    assert!(
        reqs[2].2.contains("must be a number in 0.001..1"),
        "the repair names the range"
    );
    // Nothing out of range was ever written.
    assert!(!git(&r.dir, &["log", "--all", "-p", "--", "params.txt"]).contains("LR = 5"));
}

#[test]
fn a_response_far_larger_than_max_tokens_is_refused() {
    let huge = format!(
        "{{\"choices\": [{{\"message\": {{\"content\": \"{}\"}}}}]}}",
        "x".repeat(9 * 1024 * 1024)
    );
    let (_, r, _) = llm_run(
        "openai",
        vec![Reply::Status(200, Vec::new(), huge)],
        "max_tokens = 100",
        "max_experiments = 2",
    );
    let log = r.log();
    assert_eq!(log[1]["status"], "invalid", "{:?}", log[1]);
    assert_reason(&log[1], "MiB and was refused");
}

/// A model that makes its own later prompts dense (it writes a line of punctuation, a token a
/// byte, into a file every prompt shows) against a server that counts a token for every byte:
/// whatever the budget, the run stops before the recorded spend crosses `max_cost_usd`.
#[test]
fn dense_prompts_cannot_take_the_spend_past_max_cost_usd() {
    let dense: String = (0..20_000)
        .map(|i| b"!#$%&*+-/<=>?@^|~"[i % 17] as char)
        .collect();
    let replies = vec![
        Reply::Dense(
            edit("value.txt", "score: 5", &format!("score: 4\n{dense}")),
            16,
        ),
        Reply::Dense(edit("value.txt", "score: 4", "score: 3"), 16),
        Reply::Dense(edit("value.txt", "score: 3", "score: 2"), 16),
        Reply::Dense(edit("value.txt", "score: 2", "score: 1"), 16),
    ];
    for budget in [5.0, 5.5, 6.0, 6.5, 7.0, 7.5] {
        let (_, r, _) = llm_run(
            "openai",
            replies.clone(),
            "max_tokens = 16\nprice_in_per_mtok = 100\nprice_out_per_mtok = 100",
            &format!("max_experiments = 10\nmax_cost_usd = {budget}"),
        );
        let log = r.log();
        let spent: f64 = log.iter().map(|e| e["cost_usd"].as_f64().unwrap()).sum();
        assert!(spent <= budget, "spent ${spent:.4} of ${budget}: {log:?}");
        assert!(reason(log.last().unwrap()).starts_with("budget"), "{log:?}");
    }
}

/// An answer with more edits than hone applies (each would rewrite a file: many thousands
/// kept hone busy for hours) is `invalid`, with nothing of it applied; the next answer, with
/// one edit, is kept.
#[test]
fn an_answer_with_too_many_edits_is_refused_whole() {
    let mut many = edit("value.txt", "score: 5", "score: 4");
    for i in 0..600 {
        many.push_str(&format!(
            "extra{i}.txt\n<<<<<<< SEARCH\n=======\nx\n>>>>>>> REPLACE\n"
        ));
    }
    let (_, r, _) = llm_run(
        "openai",
        vec![
            Reply::Answer(many, 100, 20),
            Reply::Answer(edit("value.txt", "score: 5", "score: 3"), 100, 20),
        ],
        "",
        "max_experiments = 3",
    );
    let log = r.log();
    assert_statuses(&log, &["baseline", "invalid", "keep"]);
    assert_reason(&log[1], "holds 601 edits; hone applies at most 500");
    assert_eq!(log[2]["objective"], 3.0);
}

/// An apply_patch patch changing one line of `path`.
fn patch(path: &str, old: &str, new: &str) -> String {
    format!("HYPOTHESIS: patch {path}\n\n*** Begin Patch\n*** Update File: {path}\n@@\n-{old}\n+{new}\n*** End Patch\n")
}

#[test]
fn openai_patch_mode_applies_repairs_once_and_gates() {
    let (server, r, _) = llm_run(
        "openai",
        vec![
            Reply::Answer(patch("value.txt", "score: 5", "score: 4"), 100, 20),
            Reply::Answer(patch("value.txt", "score: 99", "score: 1"), 100, 20),
            Reply::Answer(patch("value.txt", "score: 4", "score: 3"), 100, 20),
            Reply::Answer(patch("value.txt", "score: 77", "score: 1"), 100, 20),
            Reply::Answer(patch("value.txt", "score: 78", "score: 1"), 100, 20),
            Reply::Answer(
                "*** Begin Patch\n*** Update File: prepare.py\n-# the fixed evaluator\n+print('score: 0')\n*** End Patch\n".into(),
                100,
                20,
            ),
        ],
        "edit_mode = \"patch\"",
        "max_experiments = 5",
    );
    let log = r.log();
    assert_statuses(&log, &["baseline", "keep", "keep", "invalid", "violation"]);
    assert_eq!(log[1]["description"], "patch value.txt");
    assert_eq!(log[2]["objective"], 3.0);
    assert_reason(&log[3], "after a repair round");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 6, "one, a repaired one, a failed repair, one");
    let first: serde_json::Value = serde_json::from_str(&reqs[0].2).unwrap();
    assert!(first["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("*** Begin Patch"));
    let repair: serde_json::Value = serde_json::from_str(&reqs[2].2).unwrap();
    let repair = repair["messages"][3]["content"].as_str().unwrap();
    assert!(
        repair.contains("-score: 99\n+score: 1"),
        "the repair quotes the failing hunk: {repair}"
    );
    assert!(repair.contains("match nothing"), "{repair}");
}

#[test]
fn a_provider_without_its_key_stops_the_run_before_it_starts() {
    // No base_url: the provider's own server, which refuses every request without a key. The
    // run does not start (a spec error, exit 2), records nothing and charges nothing; with
    // `--agent knobs` the LLM is not asked, so its key does not matter.
    let r = Repo::builder()
        .spec(
            Spec::standard_loop(SCORE)
                .lines(
                    "agent",
                    "kind = \"openai\"\nmodel = \"gpt-4.1-mini\"\napi_key_env = \"TEST_UNSET_KEY\"",
                )
                .set("stop", "max_experiments", "2"),
        )
        .create();
    let out = exits_with(
        r.hone(&["run"]),
        2,
        "$TEST_UNSET_KEY is not set: https://api.openai.com/v1 would refuse every request",
    );
    assert!(!text(&out).contains("gave up"), "{}", text(&out));
    // (The knobs optimizer finds no knobs in value.txt: the run starts and stops there.)
    let out = r.hone(&["run", "--agent", "knobs"]);
    assert_says(&out, "#0    baseline");
    assert!(!text(&out).contains("TEST_UNSET_KEY"), "{}", text(&out));
}

#[test]
fn a_call_that_never_reached_a_server_is_not_charged() {
    // Nothing listens on the port: every attempt is refused before a byte is sent, so the
    // budget is charged nothing (a call that may have reached the provider is charged its
    // worst case).
    // The port answers the list of models once (a 404: no verdict), closing before it
    // answers, so that nothing listens once the run has started.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", port.local_addr().unwrap());
    let lister = std::thread::spawn(move || {
        use std::io::{BufRead, Write};
        let (conn, _) = port.accept().unwrap();
        drop(port);
        let mut reader = std::io::BufReader::new(conn);
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap() > 0 && line != "\r\n" {
            line.clear();
        }
        let _ = reader
            .get_mut()
            .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    });
    let r = Repo::builder()
        .spec(
            Spec::standard_loop(SCORE)
                .provider("agent", "openai", "test-model", &base)
                .set("agent", "api_key_env", "\"TEST_LLM_KEY\"")
                .lines(
                    "agent",
                    "max_attempts = 2\nmax_tokens = 100\nprice_in_per_mtok = 100\nprice_out_per_mtok = 100\noutage_limit = \"0s\"",
                )
                .set("stop", "max_experiments", "2")
                .set("stop", "max_cost_usd", "10"),
        )
        .create();
    let _ = hone_with_key(&r, &["run"]);
    lister.join().unwrap();
    let log = r.log();
    assert_eq!(log[1]["status"], "aborted", "{log:?}");
    assert_reason(&log[1], "request not sent");
    assert_eq!(log[1]["cost_usd"], 0.0, "{}", log[1]);
}

#[test]
fn a_server_that_does_not_answer_at_all_stops_the_run_before_it_starts() {
    // A wrong port in base_url: the run says so at once, rather than waiting out an outage
    // all night.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let r = Repo::builder()
        .spec(
            Spec::standard_loop(SCORE)
                .provider("agent", "openai", "test-model", &base)
                .set("agent", "api_key_env", "\"TEST_LLM_KEY\"")
                .set("stop", "max_experiments", "2"),
        )
        .create();
    let out = hone_with_key(&r, &["run"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_says(
        &out,
        &format!("nothing answers at {base} (the connection was refused)"),
    );
    assert_says(&out, "check `base_url` in hone.toml ([agent])");
    assert!(text(&r.hone(&["status"])).contains("no hone runs yet"));
}

/// An OpenAI chat completion body as a server sends it: `choices` as given, usage 100 + 20.
fn completion_body(choices: serde_json::Value) -> String {
    serde_json::json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": choices,
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}})
    .to_string()
}

#[test]
fn answers_are_kept_and_a_cut_off_or_empty_answer_says_why() {
    // 1: no choices at all; 2: cut off at max_tokens mid-block; 3: a block that does not
    // match, then a repair with its own hypothesis, which names the change. Every answer is
    // in the experiment's agent log.
    let cut = edit("value.txt", "score: 5", "score: 4");
    let cut = &cut[..cut.find("=======").unwrap()];
    let mut wrong = edit("value.txt", "score: 55", "score: 3");
    wrong = wrong.replace("HYPOTHESIS: change value.txt", "HYPOTHESIS: first try");
    let mut repair = edit("value.txt", "score: 5", "score: 3");
    repair = repair.replace("HYPOTHESIS: change value.txt", "HYPOTHESIS: repaired");
    let (_, r, _) = llm_run(
        "openai",
        vec![
            Reply::Status(200, Vec::new(), completion_body(serde_json::json!([]))),
            Reply::Status(
                200,
                Vec::new(),
                completion_body(
                    serde_json::json!([{"index": 0, "message": {"role": "assistant", "content": cut}, "finish_reason": "length"}]),
                ),
            ),
            Reply::Answer(wrong, 100, 20),
            Reply::Answer(repair, 100, 20),
        ],
        "max_tokens = 100",
        "max_experiments = 4",
    );
    let log = r.log();
    assert_statuses(&log, &["baseline", "invalid", "invalid", "keep"]);
    assert_reason(&log[1], "the server's answer has no choices");
    assert_reason(
        &log[2],
        "cut off at max_tokens (100); raise [agent] max_tokens",
    );
    assert_eq!(log[3]["description"], "repaired");
    let run_dir = only_run_dir(&r);
    let answers = std::fs::read_to_string(run_dir.join("logs/3.agent.log")).unwrap();
    assert!(
        answers.contains("HYPOTHESIS: first try") && answers.contains("HYPOTHESIS: repaired"),
        "{answers}"
    );
    let cut_log = std::fs::read_to_string(run_dir.join("logs/2.agent.log")).unwrap();
    assert!(cut_log.contains("cut off at max_tokens"), "{cut_log}");
}

#[test]
fn a_provider_outage_is_waited_out_and_is_no_candidates_failure() {
    // Two proposals meet a 503 through every retry: each is `aborted` (the candidate did not
    // fail, so max_consecutive_failures = 1 does not stop the run), the run waits, and goes
    // on when the server is back. Aborted experiments tried nothing: max_experiments = 2
    // counts the baseline and the keep only.
    let busy = || Reply::Status(503, Vec::new(), "{\"error\": \"overloaded\"}".into());
    let (_, r, out) = llm_run(
        "openai",
        vec![
            busy(),
            busy(),
            Reply::Answer(edit("value.txt", "score: 5", "score: 4"), 100, 20),
        ],
        "max_attempts = 1\noutage_wait = \"0s\"",
        "max_experiments = 2\nmax_consecutive_failures = 1",
    );
    let log = r.log();
    assert_statuses(&log, &["baseline", "aborted", "aborted", "keep"]);
    assert_says(&out, "reached max_experiments (2)");
    assert_says(
        &r.hone(&["status"]),
        "experiments 2/2 (0 left; 2 aborted not counted)",
    );
    assert_reason(
        &log[1],
        "the model's server was unavailable: openai: gave up after 1 attempts",
    );
    assert_reason(&log[1], "the next experiment waits");
    assert!(text(&out).contains("keep"), "{}", text(&out));
    // An outage longer than outage_limit stops the run, to be resumed.
    let server = LlmServer::start(vec![busy()], false);
    let r = llm_repo(
        "openai",
        &server,
        "max_attempts = 1\noutage_limit = \"0s\"",
        "max_experiments = 4",
    );
    let out = hone_with_key(&r, &["run"]);
    exits_with(out, 1, "the model's server has been unavailable for");
    assert_statuses(&r.log(), &["baseline", "aborted"]);
    // The wait never outlasts max_time: an hour's outage_wait is cut to what max_time
    // leaves, and the run stops on max_time.
    let server = LlmServer::start(vec![busy()], false);
    let r = llm_repo(
        "openai",
        &server,
        "max_attempts = 1\noutage_wait = \"1h\"",
        "max_experiments = 4\nmax_time = \"2s\"",
    );
    let out = run_bounded(&r.dir, &["run"]).unwrap();
    let out = ok(out);
    assert_says(&out, "reached max_time");
    assert_eq!(r.log()[0]["status"], "baseline");
    assert!(r.log()[1..].iter().all(|e| e["status"] == "aborted"));
}

#[test]
fn show_says_when_a_spend_is_an_estimate_and_prints_an_answer_hone_could_not_use() {
    // Answers without `usage`, and without an edit: each call is charged its worst case, and
    // the experiment has no candidate to show, only what the model said.
    let answer = || {
        let body = serde_json::json!({"id": "c", "object": "chat.completion", "choices": [{"index": 0,
            "message": {"role": "assistant", "content": "I would rather not change anything."},
            "finish_reason": "stop"}]});
        Reply::Status(200, Vec::new(), body.to_string())
    };
    let (_, r, _) = llm_run(
        "openai",
        vec![answer(), answer()],
        "max_tokens = 100\nprice_in_per_mtok = 100\nprice_out_per_mtok = 100",
        "max_experiments = 2",
    );
    assert_statuses(&r.log(), &["baseline", "invalid"]);
    let show = text(&r.hone(&["show", "1"]));
    assert!(
        show.contains("whose use the server did not report: an estimate"),
        "{show}"
    );
    assert!(
        show.contains("--- agent's log tail")
            && show.contains("I would rather not change anything."),
        "{show}"
    );
    // A keep's `show` has its diff, not the agent's log.
    let show = text(&r.hone(&["show", "0"]));
    assert!(!show.contains("agent's log tail"), "{show}");
}

#[test]
fn an_http_models_note_lines_are_kept_for_its_next_prompts_and_the_report() {
    // As an agent CLI keeps `.hone/notes.md`, a model over HTTP keeps NOTE lines: the next
    // prompt shows them, and so does the report.
    let first = format!(
        "NOTE: lowering the score by one at a time is safest\n{}",
        edit("value.txt", "score: 5", "score: 4")
    );
    let (server, r, _) = llm_run(
        "openai",
        vec![
            Reply::Answer(first, 10, 10),
            Reply::Answer(edit("value.txt", "score: 4", "score: 3"), 10, 10),
        ],
        "",
        "max_experiments = 3",
    );
    assert_statuses(&r.log(), &["baseline", "keep", "keep"]);
    let system = bodies_of(&server);
    assert!(
        system[0].contains("You may add lines starting with NOTE:"),
        "{}",
        system[0]
    );
    assert!(
        system[1].contains("## Notes from earlier experiments")
            && system[1].contains("- #1: lowering the score by one at a time is safest"),
        "{}",
        system[1]
    );
    ok(r.hone(&["report"]));
    let tag = only_run_dir(&r).file_name().unwrap().to_owned();
    let report =
        std::fs::read_to_string(r.dir.join(".hone/reports").join(tag).join("report.md")).unwrap();
    assert!(
        report.contains("lowering the score by one at a time is safest"),
        "{report}"
    );
}

#[test]
fn a_body_that_is_not_json_is_asked_again_and_a_prompt_too_long_says_what_to_shrink() {
    // A proxy's HTML error page with a 200: the server's fault, retried. Then a 400 for a
    // prompt over the model's context: the experiment is invalid, with what to do.
    let too_long = "{\"error\":{\"message\":\"This model's maximum context length is 8192 tokens\",\"code\":\"context_length_exceeded\"}}";
    let (_, r, _) = llm_run(
        "openai",
        vec![
            Reply::Status(200, Vec::new(), "<html>502 Bad Gateway</html>".into()),
            Reply::Status(200, Vec::new(), "<html>502 Bad Gateway</html>".into()),
            Reply::Answer(edit("value.txt", "score: 5", "score: 4"), 10, 10),
            Reply::Status(400, Vec::new(), too_long.into()),
        ],
        "max_attempts = 3\nmax_tokens = 100\nprice_in_per_mtok = 100\nprice_out_per_mtok = 100",
        "max_experiments = 3",
    );
    let log = r.log();
    assert_statuses(&log, &["baseline", "keep", "invalid"]);
    let agent_log = std::fs::read_to_string(only_run_dir(&r).join("logs/1.agent.log")).unwrap();
    assert!(
        agent_log.contains("attempt 1 failed: the answer is not JSON"),
        "{agent_log}"
    );
    // Two error pages in one call: one worst case charged, not one an attempt.
    let show = text(&r.hone(&["show", "1"]));
    assert!(
        show.contains("(with the worst case of 1 attempt whose use"),
        "{show}"
    );
    assert_reason(&log[2], "a model with a longer context");
}

#[test]
fn init_check_asks_the_models_server_as_a_run_would() {
    // `hone init --check` on a hone.toml with an HTTP model: the server answers (said), or
    // nothing answers at base_url (an error, before any baseline).
    let server = LlmServer::start(vec![Reply::Answer("x".into(), 1, 1)], false);
    let r = llm_repo("openai", &server, "", "max_experiments = 2");
    let out = ok(hone_with_key(&r, &["init", "--check"]));
    assert_says(&out, "check: the model's server answers");
    // A port where nothing listens.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    edit_spec(&r.dir, |t| {
        t.replace(&server.url, &format!("http://127.0.0.1:{port}"))
    });
    let out = hone_with_key(&r, &["init", "--check"]);
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    assert_says(&out, "the connection was refused");
}

/// The request bodies the chat server got, as text.
fn bodies_of(server: &LlmServer) -> Vec<String> {
    server
        .requests()
        .into_iter()
        .map(|(_, _, body)| body)
        .collect()
}

#[test]
fn show_flags_an_estimate_only_where_one_was_charged() {
    // An answer with no choices that reports its use is charged that: no estimate. A timed
    // out attempt before a good answer is charged its worst case: flagged, though the answer
    // that followed reported its own.
    let empty = serde_json::json!({"id": "c", "object": "chat.completion", "choices": [],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}});
    let (_, r, _) = llm_run(
        "openai",
        vec![
            Reply::Status(200, Vec::new(), empty.to_string()),
            Reply::Hang,
            Reply::Answer(edit("value.txt", "score: 5", "score: 4"), 10, 5),
        ],
        "max_tokens = 100\nprice_in_per_mtok = 100\nprice_out_per_mtok = 100\nrequest_timeout = \"1s\"\nmax_attempts = 2",
        "max_experiments = 3",
    );
    assert_statuses(&r.log(), &["baseline", "invalid", "keep"]);
    let show = text(&r.hone(&["show", "1"]));
    assert!(
        show.contains("spent: $0.0015, 15 tokens") && !show.contains("estimate"),
        "{show}"
    );
    let show = text(&r.hone(&["show", "2"]));
    assert!(
        show.contains("(with the worst case of 1 attempt whose use the server did not report"),
        "{show}"
    );
}

#[test]
fn a_web_server_where_the_model_should_be_stops_the_run_at_its_first_answer() {
    // A plain web server on the port: its list of models is a 404 (no verdict), and it answers
    // a chat request 501. No wait changes that: the run stops at once, naming base_url.
    let server = LlmServer::start(
        vec![Reply::Status(
            501,
            Vec::new(),
            "<html>Unsupported method</html>".into(),
        )],
        false,
    );
    let r = llm_repo("openai", &server, "", "max_experiments = 4");
    let out = hone_with_key(&r, &["run"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert_says(
        &out,
        "answered 501 (it does not take a chat request): is base_url the model's server?",
    );
    assert_eq!(server.requests().len(), 1, "asked once, not retried");
    // The morning after: an error, not an interrupt, with the server's answer below it.
    let status = text(&r.hone(&["status"]));
    assert!(
        status.contains(": stopped on an error (fix it, then resume with `hone run`)")
            && status.contains("stopped: ")
            && status.contains("answered 501"),
        "{status}"
    );
    // Its model has no price hone knows, and none was given: said, since its spend reads $0.
    assert_says(
        &out,
        "[agent] model = \"test-model\" has no price hone knows",
    );
}
