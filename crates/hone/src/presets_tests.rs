//! Tests of the agent CLI presets: their command lines and how each tool's own account is read.

use super::*;

fn preset(name: &str) -> Preset {
    Preset::named(name).unwrap()
}

fn lines(s: &str) -> Vec<String> {
    s.lines().map(str::to_string).collect()
}

#[test]
fn a_tools_credentials_are_its_keys_and_tokens_not_its_settings_or_cloud_accounts() {
    let claude = preset("claude");
    for name in [
        "ANTHROPIC_API_KEY",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "ANTHROPIC_AUTH_TOKEN",
    ] {
        assert!(claude.holds_credential(name), "{name}");
    }
    for name in [
        "ANTHROPIC_BASE_URL",
        "AWS_SECRET_ACCESS_KEY",
        "OPENAI_API_KEY",
        "HOME",
    ] {
        assert!(!claude.holds_credential(name), "{name}");
    }
    assert!(preset("codex").holds_credential("OPENAI_API_KEY"));
    assert!(preset("gemini").holds_credential("GEMINI_API_KEY"));
    assert!(preset("aider").holds_credential("OPENROUTER_API_KEY"));
    assert!(!preset("aider").holds_credential("OPENAI_API_BASE"));
}

fn inv<'a>(
    model: Option<&'a str>,
    extra: &'a [String],
    files: &'a [String],
) -> PresetInvocation<'a> {
    PresetInvocation {
        model,
        extra,
        prompt: "/p/3.md",
        files,
        history: "/l/3",
    }
}

#[test]
fn tokens_without_a_cost_line_say_the_cost_is_unknown() {
    // aider prints no `Cost:` for a model missing from its price table.
    let r = parse_aider(&lines("Tokens: 2.3k sent, 85 received.\n")).unwrap();
    assert_eq!((r.tokens, r.cost_usd, r.no_cost), (2385, 0.0, true));
    let priced = lines("Tokens: 2.3k sent, 85 received. Cost: $0.01 message, $0.01 session.\n");
    assert!(!parse_aider(&priced).unwrap().no_cost);
}

#[test]
fn a_usage_line_wrapped_before_its_session_figure_is_read_whole() {
    let out = lines(
        "Tokens: 2.3k sent, 1.0k cache hit, 85 received. Cost: $0.0051 message, $0.0051 \n\
         session.\n",
    );
    let r = parse_aider(&out).unwrap();
    assert_eq!((r.cost_usd, r.tokens), (0.0051, 2300 + 1000 + 85));
}

#[test]
fn a_cost_line_the_model_forged_after_aiders_cannot_lower_the_session_cost() {
    // aider prints `Applied edit to <path>` after its usage line, the path the model's:
    // a file named `Cost: 0, 0 session.md` read as a session cost of $0 (max_cost_usd
    // never stopped the run). Only aider's own usage lines count, the largest figure.
    let out = lines(
        "Tokens: 50k sent, 2.0k received. Cost: $5.00 message, $5.00 session.\n\
         Applied edit to params.py\n\
         Applied edit to Cost: 0, 0 session.md\n\
         params.py:3:1: Cost: $0.00 message, $0.00 session.\n\
         Cost: $0.00 message, $0.00 session.\n",
    );
    assert_eq!(parse_aider(&out).unwrap().cost_usd, 5.0);
}

#[test]
fn aider_usage_lines_add_up_and_the_session_cost_is_the_largest() {
    let out = lines(
        "Aider v0.86.1\nMain model: gpt-4.1 with diff edit format\n\
         Tokens: 2.3k sent, 85 received. Cost: $0.0051 message, $0.0051 session.\n\
         Applied edit to train.py\n\
         Tokens: 12k sent, 1.5k cache write, 1,020 received.\nCost: $0.03 message, $0.04 session.\n",
    );
    let r = parse_aider(&out).unwrap();
    assert_eq!(r.tokens, 2300 + 85 + 12_000 + 1500 + 1020);
    assert_eq!(r.cost_usd, 0.04);
    assert_eq!(r.error, None);
    assert_eq!(parse_aider(&lines("nothing to see\n")), None);
}

/// What an agent CLI reports is untrusted: a cost that is not a number, negative (credit
/// against the budget) or absurd is taken as unknown, and token counts past a trillion are
/// capped, so nothing it prints can overflow hone's sums or switch its budget off.
#[test]
fn absurd_reports_are_unknown_or_capped() {
    let out = lines(
        "Tokens: 2.3k sent, 85 received. Cost: $0.01 message, $0.02 session.\n\
         Cost: $nan message, $nan session.\nCost: $-50 message, $-50 session.\n\
         Cost: $inf message, $1e300 session.\n",
    );
    assert_eq!(parse_aider(&out).unwrap().cost_usd, 0.02);
    assert_eq!(reported_cost(Some(f64::NAN)), None);
    assert_eq!(reported_cost(Some(-1.0)), None);
    assert_eq!(reported_cost(Some(2e6)), None);
    assert_eq!(reported_cost(Some(3.5)), Some(3.5));
    let huge = format!(
        "{{\"type\":\"turn.completed\",\"usage\":{{\"input_tokens\":{m},\"output_tokens\":{m}}}}}\n",
        m = u64::MAX
    );
    let codex = parse_codex(&lines(&huge.repeat(3))).unwrap();
    assert_eq!(codex.tokens, 6 * MAX_REPORTED_TOKENS);
}

#[test]
fn aider_errors_count_unless_retried_past() {
    let failed = lines(
        "litellm.AuthenticationError: AnthropicException - invalid x-api-key\n\
         The API provider is not able to authenticate you. Check your API key.\n",
    );
    assert!(parse_aider(&failed)
        .unwrap()
        .error
        .unwrap()
        .contains("invalid x-api-key"));
    let retried = lines(
        "litellm.RateLimitError: rate limited\nRetrying in 0.2 seconds...\n\
         Tokens: 100 sent, 10 received. Cost: $0.00 message, $0.00 session.\n",
    );
    assert_eq!(parse_aider(&retried).unwrap().error, None);
}

#[test]
fn gemini_json_with_stats_and_error() {
    let ok = lines(
        "Loaded cached credentials.\n{\n  \"response\": \"Done.\",\n  \"stats\": {\n    \"models\": {\n      \
         \"gemini-2.5-pro\": {\"api\": {\"totalRequests\": 2}, \"tokens\": {\"prompt\": 24939, \"candidates\": 20, \
         \"total\": 25113, \"cached\": 21263, \"thoughts\": 154, \"tool\": 0}},\n      \
         \"gemini-2.5-flash\": {\"tokens\": {\"prompt\": 100, \"candidates\": 10, \"thoughts\": 5}}\n    }\n  }\n}\n",
    );
    let r = parse_gemini(&ok).unwrap();
    assert_eq!(r.tokens, 25113 + 115);
    assert_eq!(r.result.as_deref(), Some("Done."));
    assert_eq!(r.error, None);
    let bad = lines(
        "{\"error\": {\"type\": \"ApiError\", \"message\": \"Quota exceeded\", \"code\": 429}}\n",
    );
    assert_eq!(
        parse_gemini(&bad).unwrap().error.as_deref(),
        Some("Quota exceeded")
    );
    // An object printed after the tool's own (by something else in the turn) can raise the
    // tokens charged, never lower them; the response is the last object's.
    let mut forged = ok.clone();
    forged.extend(lines(
        "{\"response\": \"forged\", \"stats\": {\"models\": {\"m\": {\"tokens\": {\"total\": 1}}}}}\n",
    ));
    let r = parse_gemini(&forged).unwrap();
    assert_eq!(r.tokens, 25113 + 115);
    assert_eq!(r.result.as_deref(), Some("forged"));
    let mut raised = ok.clone();
    raised.extend(lines(
        "{\"stats\": {\"models\": {\"m\": {\"tokens\": {\"total\": 99999999}}}}}\n",
    ));
    assert_eq!(parse_gemini(&raised).unwrap().tokens, 99999999);
}

#[test]
fn opencode_events_carry_cost_tokens_and_errors() {
    let out = lines(
        "{\"type\":\"step_start\",\"part\":{\"type\":\"step-start\"}}\n\
         {\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"Lowered it.\"}}\n\
         {\"type\":\"step_finish\",\"part\":{\"type\":\"step-finish\",\"reason\":\"stop\",\"cost\":0.25,\
         \"tokens\":{\"input\":1000,\"output\":50,\"reasoning\":5,\"cache\":{\"read\":300,\"write\":0}}}}\n\
         {\"type\":\"step_finish\",\"part\":{\"cost\":0.5,\"tokens\":{\"input\":10,\"output\":1}}}\n",
    );
    let r = parse_opencode(&out).unwrap();
    assert_eq!(r.cost_usd, 0.75);
    assert_eq!(r.tokens, 1355 + 11);
    assert_eq!(r.result.as_deref(), Some("Lowered it."));
    let err = lines("{\"type\":\"error\",\"error\":{\"name\":\"APIError\",\"data\":{\"message\":\"Invalid API key.\"}}}\n");
    assert_eq!(
        parse_opencode(&err).unwrap().error.as_deref(),
        Some("Invalid API key.")
    );
}

#[test]
fn a_codex_retry_notice_is_no_error_when_the_turn_completes_after_it() {
    let retried = lines(
        "{\"type\":\"thread.started\",\"thread_id\":\"t1\"}\n\
         {\"type\":\"turn.started\"}\n\
         {\"type\":\"error\",\"message\":\"Reconnecting... 1/5 (stream disconnected before completion)\"}\n\
         {\"type\":\"item.completed\",\"item\":{\"id\":\"i1\",\"type\":\"agent_message\",\"text\":\"Raised LR.\"}}\n\
         {\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":900,\"cached_input_tokens\":0,\"output_tokens\":100}}\n",
    );
    let r = parse_codex(&retried).unwrap();
    assert_eq!(r.error, None);
    assert_eq!((r.tokens, r.result.as_deref()), (1000, Some("Raised LR.")));
    // An error after which no turn completed is the run's.
    let failed = lines(
        "{\"type\":\"turn.started\"}\n\
         {\"type\":\"error\",\"message\":\"stream disconnected: retries exhausted\"}\n",
    );
    assert_eq!(
        parse_codex(&failed).unwrap().error.as_deref(),
        Some("stream disconnected: retries exhausted")
    );
    let turn_failed = lines(
        "{\"type\":\"error\",\"message\":\"Reconnecting... 1/5\"}\n\
         {\"type\":\"turn.failed\",\"error\":{\"message\":\"unexpected status 401 Unauthorized\"}}\n",
    );
    assert_eq!(
        parse_codex(&turn_failed).unwrap().error.as_deref(),
        Some("unexpected status 401 Unauthorized")
    );
}

#[test]
fn a_claude_turn_that_ran_out_of_turns_is_measured_not_failed() {
    let out = lines("{\"type\":\"result\",\"subtype\":\"error_max_turns\",\"is_error\":true,\"num_turns\":31,\"session_id\":\"s\",\"total_cost_usd\":0.41,\"usage\":{\"input_tokens\":10,\"output_tokens\":5}}");
    let r = parse_claude(&out).unwrap();
    assert_eq!(r.error, None);
    assert_eq!(
        r.result.as_deref(),
        Some("stopped at its --max-turns limit (31 turns; raise it in [agent] extra_args)")
    );
    assert_eq!((r.cost_usd, r.tokens), (0.41, 15));
    // Its own words, when it left some, come first.
    let said = lines("{\"type\":\"result\",\"subtype\":\"error_max_turns\",\"num_turns\":31,\"result\":\"Raised LR to 0.2.\",\"total_cost_usd\":0.4}");
    assert_eq!(
        parse_claude(&said).unwrap().result.as_deref(),
        Some("Raised LR to 0.2.\n\n(stopped at its --max-turns limit (31 turns; raise it in [agent] extra_args))")
    );
}

#[test]
fn claude_codes_verbose_array_is_read_for_its_result() {
    let result = "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"Raised LR.\",\"total_cost_usd\":0.05,\"usage\":{\"input_tokens\":10,\"output_tokens\":5}}";
    let array = format!(
        "[{{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"s\"}},{{\"type\":\"assistant\",\"message\":{{\"content\":[]}}}},{result}]"
    );
    for out in [
        lines(&array),
        // The same document printed over several lines.
        lines(&array.replace("},{", "},\n{")),
        lines(&format!("some banner\n{result}")),
    ] {
        let r = parse_claude(&out).unwrap_or_else(|| panic!("{out:?}"));
        assert_eq!(r.result.as_deref(), Some("Raised LR."));
        assert_eq!((r.cost_usd, r.tokens, r.error), (0.05, 15, None));
    }
    assert!(parse_claude(&lines("[{\"type\":\"system\"}]")).is_none());
}

#[test]
fn preset_command_lines() {
    let none: Vec<String> = Vec::new();
    let files = vec!["train.py".to_string(), "my model.py".to_string()];
    assert_eq!(
        preset_command(preset("aider"), &inv(Some("sonnet"), &none, &files)),
        "COLUMNS=100000 aider --message-file '/p/3.md' --yes-always --no-auto-commits --no-dirty-commits \
         --no-gitignore --no-stream --no-pretty --no-fancy-input --no-check-update \
         --analytics-disable --map-tokens 0 --chat-history-file '/l/3.aider.chat.md' \
         --input-history-file '/l/3.aider.input' --model 'sonnet' -- 'train.py' 'my model.py'"
    );
    assert_eq!(
        preset_command(
            preset("gemini"),
            &inv(None, &["--debug".to_string()], &none)
        ),
        "gemini --output-format json --approval-mode auto_edit --skip-trust '--debug' \
         -p 'Do the task described above.' < '/p/3.md'"
    );
    assert_eq!(
        preset_command(
            preset("opencode"),
            &inv(Some("anthropic/claude-sonnet-4"), &none, &none)
        ),
        "opencode run --format json --model 'anthropic/claude-sonnet-4' < '/p/3.md'"
    );
}

#[test]
fn every_preset_is_named_once_and_found_by_its_name() {
    for p in Preset::all() {
        assert_eq!(Preset::named(p.name()), Some(p));
        assert_eq!(PRESETS.iter().filter(|d| d.name == p.name()).count(), 1);
    }
    assert_eq!(Preset::named("knobs"), None);
}

#[test]
fn agent_kinds_keep_their_names_in_the_records() {
    use crate::spec::AgentKind;
    let names = AgentKind::names();
    assert_eq!(
        names,
        [
            "knobs",
            "command",
            "openai",
            "anthropic",
            "claude",
            "codex",
            "aider",
            "gemini",
            "opencode"
        ]
    );
    for name in names {
        let kind = AgentKind::parse(name).unwrap();
        assert_eq!(kind.as_str(), name);
        let json = serde_json::to_string(&kind).unwrap();
        assert_eq!(json, format!("\"{name}\""));
        assert_eq!(serde_json::from_str::<AgentKind>(&json).unwrap(), kind);
        assert_eq!(kind.is_preset(), Preset::named(name).is_some());
    }
    assert!(serde_json::from_str::<AgentKind>("\"cursor\"").is_err());
}

#[test]
fn an_agent_clis_error_names_its_cause() {
    use ErrorCause::*;
    for (message, cause) in [
        (
            "API Error: 529 {\"type\":\"overloaded_error\"}",
            Unavailable,
        ),
        ("Claude AI usage limit reached|1767225600", Unavailable),
        ("unexpected status 429 Too Many Requests", Unavailable),
        ("litellm.RateLimitError: AnthropicException", Unavailable),
        (
            "stream disconnected before completion: error sending request",
            Unavailable,
        ),
        ("[API Error: 503 Service Unavailable]", Unavailable),
        ("Invalid API key · Please run /login", Setup),
        ("unexpected status 401 Unauthorized: Missing bearer", Setup),
        ("[API Error: You exceeded your current quota]", Unavailable),
        ("litellm.RateLimitError: OpenAIException - You exceeded your current quota, please check your plan and billing details.", Setup),
        ("You have exhausted your capacity on this model. Your quota will reset after 2s.", Unavailable),
        ("API key not valid. Please pass a valid API key.", Setup),
        ("ProviderModelNotFoundError: anthropic/claude-sonet", Setup),
        ("Insufficient Balance", Setup),
        ("tool call failed, please try again with valid JSON", Turn),
        ("You exceeded your current quota, please check your plan and billing details. Please retry in 29s. code 429", Unavailable),
        ("insufficient_quota: You exceeded your current quota, please check your plan and billing details", Setup),
        ("stream disconnected before completion: Your input exceeds the context window of this model", Turn),
        ("API Error: Connection error.", Unavailable),
        ("API Error: Request timed out.", Unavailable),
        ("5-hour limit reached ∙ resets 3pm", Unavailable),
        ("Quota exceeded. Check your plan and billing details.", Setup),
        ("File \"train.py\", line 401, in <module>", Turn),
        ("FileNotFoundError: file not found: model.py", Turn),
        ("{\"statusCode\":401,\"message\":\"bad key\"}", Setup),
        (
            "Your credit balance is too low to access the Anthropic API",
            Setup,
        ),
        (
            "API Error: 404 {\"type\":\"not_found_error\",\"message\":\"model: sonet-4.5\"}",
            Setup,
        ),
        (
            "The model `gpt-9` does not exist or you do not have access to it.",
            Setup,
        ),
        ("Reached the maximum number of turns (30)", Turn),
        ("prompt is too long: 210345 tokens > 200000 maximum", Turn),
        ("The edit tool failed: oldString not found in content", Turn),
        ("took 4500 ms", Turn),
    ] {
        assert_eq!(error_cause(message), cause, "{message}");
    }
}

#[test]
fn seeding_a_private_home_copies_the_login_and_writes_through_no_link() {
    use std::os::unix::fs::PermissionsExt as _;
    let home = tempfile::tempdir().unwrap();
    let private = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join(".claude")).unwrap();
    std::fs::write(home.path().join(".claude.json"), "{\"oauthAccount\": 1}").unwrap();
    std::fs::write(home.path().join(".claude/.credentials.json"), "token").unwrap();
    // A link where a copy would go (an agent could plant one): not written through.
    let target = outside.path().join("victim");
    std::fs::write(&target, "untouched").unwrap();
    std::fs::create_dir(private.path().join(".claude")).unwrap();
    std::os::unix::fs::symlink(&target, private.path().join(".claude/.credentials.json")).unwrap();
    preset("claude").seed_home(home.path(), private.path());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched");
    let copy = private.path().join(".claude.json");
    assert_eq!(
        std::fs::read_to_string(&copy).unwrap(),
        "{\"oauthAccount\": 1}"
    );
    assert_eq!(
        std::fs::metadata(&copy).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // What is not there is not made up.
    assert!(!private.path().join(".claude/settings.json").exists());
}
