//! Level 2: mechanisms an LLM generates as Rhai scripts, validated in a sandbox, kept on
//! probation, reverted when inert, and inside the budget.

use crate::support::*;

/// A knob repository whose agent is the scripted LLM (knob edit mode), with `outer` appended.
fn research_repo(server: &LlmServer, outer: &str) -> (tempfile::TempDir, PathBuf) {
    research_repo_of("openai", &format!("{}/v1", server.url), outer)
}

fn research_repo_of(kind: &str, base_url: &str, outer: &str) -> (tempfile::TempDir, PathBuf) {
    let (tmp, dir) = knob_repo();
    append_spec(
        &dir,
        &format!(
            "\n[agent]\nkind = \"{kind}\"\nmodel = \"m\"\nbase_url = \"{base_url}\"\nedit_mode = \"knobs\"\n\n[outer]\n{outer}"
        ),
    );
    (tmp, dir)
}

fn knob_answer(changes: &str) -> Reply {
    Reply::Answer(format!("{{\"changes\": {changes}}}"), 10, 10)
}

/// The research rounds' answers: three of prose, then `code` as a Rhai block.
fn rounds_answering(code: &str) -> Vec<Reply> {
    vec![
        Reply::Answer("H1: from tabu search, forbid deep models.".into(), 100, 50),
        Reply::Answer(
            "Select H1: the trace shows deep models lose.".into(),
            100,
            50,
        ),
        Reply::Answer("Hooks: filter only.".into(), 100, 50),
        Reply::Answer(format!("Here it is:\n```rhai\n{code}\n```\n"), 100, 50),
    ]
}

/// The replies of a run whose first proposal sets DEPTH 12 and whose research rounds answer
/// `code`, then `after`.
fn replies_with_script(code: &str, after: Vec<Reply>) -> Vec<Reply> {
    let mut replies = vec![knob_answer("{\"DEPTH\": 12}")];
    replies.extend(rounds_answering(code));
    replies.extend(after);
    replies
}

/// A run in a [`research_repo`] with `outer`, whose scripted LLM (OpenAI format) sets DEPTH 12
/// first, answers the research rounds with `code`, then proposes the knob `changes` in order.
struct ResearchRun {
    server: LlmServer,
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    /// What `hone run -n <n>` (which must succeed) said.
    out: Output,
}

fn research_run(code: &str, changes: &[&str], outer: &str, n: u32) -> ResearchRun {
    let after = changes.iter().map(|c| knob_answer(c)).collect();
    let server = LlmServer::start(replies_with_script(code, after), false);
    let (tmp, dir) = research_repo(&server, outer);
    let out = ok(hone_in(&dir, &["run", "-n", &n.to_string()]));
    ResearchRun {
        server,
        _tmp: tmp,
        dir,
        out,
    }
}

/// The statistics `hone mech stats --json` gives of the first mechanism `is_it` matches.
fn mech_stats(dir: &Path, is_it: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let json = text(&hone_in(dir, &["mech", "stats", "--json"]));
    json.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(is_it)
        .expect("the script's statistics")
}

/// How many times the generated script (the mechanism named `script:...`) was called at
/// `hook`.
fn script_calls(dir: &Path, hook: &str) -> serde_json::Value {
    let stats = mech_stats(dir, |v| {
        v["name"].as_str().is_some_and(|n| n.starts_with("script:"))
    });
    stats["calls"][hook].clone()
}

fn request_text(server: &LlmServer, i: usize) -> String {
    let reqs = server.requests();
    let v: serde_json::Value = serde_json::from_str(&reqs[i].2).unwrap();
    v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The proposals after the research rounds of a run whose generated script only watches.
const THREE_MOVES: &[&str] = &["{\"DEPTH\": 6}", "{\"WIDTH\": 8}", "{\"WIDTH\": 10}"];

/// Asserts that `hone show <n>` in `dir` says `says`.
#[track_caller]
fn assert_shows(dir: &Path, n: u32, says: &str) {
    let show = text(&hone_in(dir, &["show", &n.to_string()]));
    assert!(show.contains(says), "{show}");
}

const DEEP_FILTER: &str = "fn filter(p, v) {\n    if type_of(p.config) != \"map\" { return (); }\n    if p.config.DEPTH > 10 { #{ reject: \"deep models never paid\" } } else { () }\n}";

#[test]
fn a_generated_mechanism_passes_the_ladder_is_stored_and_rejects_a_proposal() {
    let ResearchRun {
        server, dir, _tmp, ..
    } = research_run(
        DEEP_FILTER,
        &["{\"DEPTH\": 15}", "{\"DEPTH\": 6}", "{\"WIDTH\": 8}"],
        "mechanisms = [\"tabu\"]\nresearch_every = 2\nprobation = 10\n",
        5,
    );
    assert_eq!(server.requests().len(), 8, "one proposal each, four rounds");
    // The rounds saw the real trace, the interface and the active mechanisms' statistics.
    let round1 = request_text(&server, 1);
    assert!(round1.contains("Round 1 of 4: explore"), "{round1}");
    assert!(round1.contains("| 1 | discard |"), "{round1}");
    assert!(round1.contains("fn filter(proposal, view)"), "{round1}");
    assert!(round1.contains("- tabu: 2 experiments"), "{round1}");
    let round4 = request_text(&server, 4);
    assert!(
        round4.contains("Your answer in round 3\n\nHooks: filter only."),
        "{round4}"
    );
    // Stored with its provenance.
    let stored: Vec<PathBuf> = std::fs::read_dir(dir.join(".hone/mechanisms"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let script = stored
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "rhai"))
        .expect("a stored script");
    assert_eq!(std::fs::read_to_string(script).unwrap(), DEEP_FILTER);
    let sidecar: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(script.with_extension("json")).unwrap())
            .unwrap();
    assert_eq!(sidecar["experiment"], 2);
    assert_eq!(sidecar["model"], "m");
    assert_eq!(sidecar["rounds"].as_array().unwrap().len(), 4);
    assert!(sidecar["run"].as_str().is_some_and(|r| !r.is_empty()));
    let hash = script.file_stem().unwrap().to_str().unwrap();
    let name = format!("script:{}", &hash[..8]);
    // The ladder on record, then its filter at work: DEPTH 15 is never verified.
    let show2 = text(&hone_in(&dir, &["show", "2"]));
    for step in [
        "research -> passed: compile: ok (hooks filter)",
        "research -> passed: contract: ok",
        "research -> passed: replay: of 1 past proposals it would have rejected 1",
        "research -> activated: activated on probation for 10 experiments (from #2)",
        "filter -> rejected: `",
    ] {
        assert!(show2.contains(&format!("{name} {step}")), "{step}\n{show2}");
    }
    assert!(show2.contains("deep models never paid"), "{show2}");
    let log = log_in(&dir);
    let st: Vec<&str> = log.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(st[2], "rejected", "{log:?}");
    assert_eq!(st[3], "keep", "{log:?}");
    // The research calls were charged to experiment 2.
    assert_eq!(log[2]["tokens"], 4 * 150 + 20);
    let stats = text(&hone_in(&dir, &["mech", "stats"]));
    assert!(stats.contains(&format!("{name}:")), "{stats}");
    assert!(stats.contains("#2 activated"), "{stats}");
    let me = mech_stats(&dir, |v| v["name"] == name.as_str());
    assert_eq!(me["rejected"], 1);
    assert_eq!(me["calls"]["filter"], 3, "it ran on experiments 2, 3 and 4");
}

#[test]
fn a_script_that_does_not_compile_gets_one_repair_round_then_is_dropped() {
    let mut replies = vec![knob_answer("{\"DEPTH\": 12}")];
    replies.extend(rounds_answering("fn filter(p, v) { let }"));
    replies.push(Reply::Answer(
        "Fixed:\n```rhai\nfn filter(p, v) { ((( }\n```".into(),
        100,
        50,
    ));
    replies.push(knob_answer("{\"DEPTH\": 6}"));
    let server = LlmServer::start(replies, false);
    let (_t, dir) = research_repo(&server, "research_every = 2\n");
    ok(hone_in(&dir, &["run", "-n", "3"]));
    assert_eq!(
        server.requests().len(),
        7,
        "a proposal, four rounds, exactly one repair, a proposal"
    );
    let repair = request_text(&server, 5);
    assert!(repair.contains("does not compile"), "{repair}");
    assert!(repair.contains("fn filter(p, v) { let }"), "{repair}");
    assert!(repair.contains("line 1"), "the error is quoted: {repair}");
    let show2 = text(&hone_in(&dir, &["show", "2"]));
    assert!(show2.contains("asking for one repair"), "{show2}");
    assert!(show2.contains("compile after repair:"), "{show2}");
    assert!(show2.contains("; dropped"), "{show2}");
    assert!(!show2.contains("activated"), "{show2}");
    assert!(!dir.join(".hone/mechanisms").exists(), "nothing is stored");
    assert_statuses(&log_in(&dir), &["baseline", "discard", "keep"]);
}

#[test]
fn a_script_that_loops_forever_is_stopped_by_its_sandbox_and_the_run_goes_on() {
    // It passes the ladder (synthetic histories and the replay never reach the loop) and
    // loops once the live run has three experiments.
    let looping = "fn before_propose(v) {\n    let h = v.history;\n    if h.len() >= 3 && h[h.len() - 1].description.contains(\"synthetic\") == false { loop { } }\n    ()\n}";
    let ResearchRun { dir, _tmp, .. } = research_run(
        looping,
        THREE_MOVES,
        "research_every = 2\nprobation = 10\n",
        5,
    );
    let show3 = text(&hone_in(&dir, &["show", "3"]));
    assert!(
        show3.contains(
            "before_propose -> deactivated: stopped and deactivated: `before_propose`: stopped"
        ),
        "{show3}"
    );
    assert!(
        show3.contains("deadline") || show3.contains("operations"),
        "{show3}"
    );
    let log = log_in(&dir);
    assert_statuses(&log, &["baseline", "discard", "keep", "keep", "keep"]);
    assert_eq!(
        script_calls(&dir, "before_propose"),
        2,
        "called at #2 and #3, never after the stop"
    );
}

#[test]
fn an_inert_generated_mechanism_is_reverted_after_its_probation() {
    let inert = "fn on_result(o, v) { this.seen = (this.seen ?? 0) + 1; () }";
    let ResearchRun { dir, _tmp, .. } =
        research_run(inert, THREE_MOVES, "research_every = 2\nprobation = 1\n", 4);
    assert_shows(
        &dir,
        2,
        "research -> deactivated: reverted after probation: inert: no effect over its probation of 1 experiments",
    );
    assert_eq!(
        script_calls(&dir, "on_result"),
        1,
        "not called after the revert"
    );
}

#[test]
fn mechanism_research_stays_inside_the_budget() {
    // Every answer reports 1000 + 1000 tokens: $0.20 a call at $100 per million. The research
    // rounds' prompts are long, so their worst case is reserved before each is sent.
    let mut replies = vec![Reply::Answer(
        "{\"changes\": {\"DEPTH\": 12}}".into(),
        1000,
        1000,
    )];
    for _ in 0..4 {
        replies.push(Reply::Answer(
            format!("```rhai\n{DEEP_FILTER}\n```"),
            1000,
            1000,
        ));
    }
    let server = LlmServer::start(replies, false);
    let (_t, dir) = research_repo(&server, "research_every = 2\n");
    edit_spec(&dir, |spec| {
        spec.replace(
            "edit_mode = \"knobs\"\n",
            "edit_mode = \"knobs\"\nmax_tokens = 100\nprice_in_per_mtok = 100\nprice_out_per_mtok = 100\n",
        )
        .replace("max_experiments = 15\n", "max_experiments = 15\nmax_cost_usd = 0.75\n")
    });
    let out = ok(hone_in(&dir, &["run", "-n", "4"]));
    assert_says(&out, "stopped: budget");
    let sent = server.requests().len();
    assert!(
        (2..5).contains(&sent),
        "the proposal and at least one research round, not all four: {sent}"
    );
    assert!(request_text(&server, sent - 1).contains(&format!("Round {} of 4", sent - 1)));
    let log = log_in(&dir);
    let cost: f64 = log.iter().map(|e| e["cost_usd"].as_f64().unwrap()).sum();
    assert!(
        (cost - 0.2 * sent as f64).abs() < 1e-9 && cost <= 0.75,
        "every call sent was charged and the total is within the budget: {cost}"
    );
    assert!(
        (log[2]["cost_usd"].as_f64().unwrap() - 0.2 * (sent - 1) as f64).abs() < 1e-9,
        "the rounds are charged to the experiment in progress: {}",
        log[2]
    );
    assert!(reason(&log[2]).starts_with("budget"), "{}", log[2]);
}

#[test]
fn a_stored_script_is_reused_by_path_and_validated_like_a_generated_one() {
    let (_t, dir) = knob_repo();
    std::fs::create_dir_all(dir.join("mech")).unwrap();
    // Suggests the optimum first; its `filter` rejects nothing.
    put(
        dir.join("mech/aim.rhai"),
        "fn candidates(v) { if v.n == 1 { [#{ WIDTH: 13, DEPTH: 4 }] } else { [] } }",
    );
    put(
        dir.join("mech/bad.rhai"),
        "fn candidates(v) { [#{ WIDTH: 99 }] }",
    );
    append_spec(
        &dir,
        "\n[outer]\nscripts = [\"mech/aim.rhai\", \"mech/bad.rhai\"]\nprobation = 3\n",
    );
    ok(hone_in(&dir, &["run", "-n", "3"]));
    let log = log_in(&dir);
    assert_eq!(log[1]["status"], "keep", "{log:?}");
    assert_eq!(log[1]["objective"], 0.0, "{log:?}");
    let show1 = text(&hone_in(&dir, &["show", "1"]));
    assert!(
        show1.contains("research -> failed: contract: `candidates`"),
        "{show1}"
    );
    assert!(
        show1.contains("research -> passed: loaded from mech/aim.rhai"),
        "{show1}"
    );
    assert!(show1.contains("integer in 1..20"), "{show1}");
    assert!(
        show1.contains("candidates -> suggested: 1 candidate(s); one was proposed"),
        "{show1}"
    );
}

#[test]
fn mechanism_research_speaks_the_anthropic_wire_format_too() {
    let replies = replies_with_script(
        DEEP_FILTER,
        vec![
            knob_answer("{\"DEPTH\": 15}"),
            knob_answer("{\"DEPTH\": 6}"),
        ],
    );
    let server = LlmServer::start(replies, true);
    let (_t, dir) = research_repo_of("anthropic", &server.url, "research_every = 2\n");
    ok(hone_in(&dir, &["run", "-n", "4"]));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 7);
    assert!(reqs[1].0.ends_with("/v1/messages"), "{}", reqs[1].0);
    let body: serde_json::Value = serde_json::from_str(&reqs[1].2).unwrap();
    assert!(
        body["system"]
            .as_str()
            .unwrap()
            .contains("research scientist"),
        "{body}"
    );
    assert_statuses(&log_in(&dir), &["baseline", "discard", "rejected", "keep"]);
}

#[test]
fn a_generated_mechanism_that_acts_without_lowering_the_keep_rate_stays_after_probation() {
    let ResearchRun { dir, out, _tmp, .. } = research_run(
        DEEP_FILTER,
        &["{\"DEPTH\": 15}", "{\"DEPTH\": 6}"],
        "research_every = 2\nprobation = 2\n",
        4,
    );
    // Window #2..#3: one rejection, one keep in two; the window before: no keep in one.
    assert_shows(
        &dir,
        3,
        "research -> passed: probation: kept after probation: keep rate 0.50 per experiment against 0.00 before (1 effects)",
    );
    assert_says(&out, "kept after probation");
}
