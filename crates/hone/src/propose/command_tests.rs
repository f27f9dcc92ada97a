//! Tests of the command proposer: agents' environments, what a turn is charged, and how an
//! agent CLI's answer becomes a description.

use super::*;

fn preset(name: &str) -> Preset {
    Preset::named(name).unwrap()
}

#[test]
fn a_cut_off_turn_is_charged_at_the_rate_of_turns_as_long_where_there_are_any() {
    let mut rates = TurnRates::default();
    assert_eq!(rates.rate_for(600.0), None);
    // A 2-second turn that read the prompt and made one edit spends fast...
    rates.add((0.10, 20_000.0), 2.0);
    assert_eq!(rates.rate_for(600.0), Some((0.05, 10_000.0)));
    // ...a 3-minute one does not: once there is one, the long turns set a long turn's rate,
    // while a turn cut off after a few seconds is charged at the fastest.
    rates.add((0.36, 36_000.0), 180.0);
    assert_eq!(rates.rate_for(600.0), Some((0.002, 200.0)));
    assert_eq!(rates.rate_for(5.0), Some((0.05, 10_000.0)));
    rates.add((0.60, 30_000.0), 60.0);
    assert_eq!(rates.rate_for(TurnRates::LONG), Some((0.01, 500.0)));
}

#[test]
fn an_answers_summary_is_what_it_did_not_its_chatter() {
    let answer = "Here is what I changed:\n\n- **Raised** `LR` from 0.1 to 0.2 to converge faster.\n- Kept the rest.\n\nLet me know if you'd like me to try something else!";
    assert_eq!(
        summary_line(answer),
        "Raised LR from 0.1 to 0.2 to converge faster."
    );
    assert_eq!(
        summary_line("Lowered the score to 4."),
        "Lowered the score to 4."
    );
    for (answer, said) in [
        (
            "## Summary\n\nRaised LR from 0.1 to 0.2.",
            "Raised LR from 0.1 to 0.2.",
        ),
        (
            "**Summary:**\n- Raised LR to 0.2 for speed",
            "Raised LR to 0.2 for speed",
        ),
        (
            "Done!\n\nI raised the learning rate to 0.2.",
            "I raised the learning rate to 0.2.",
        ),
        (
            "```python\nLR = 0.2\n```\nSet LR to 0.2 in train.py",
            "Set LR to 0.2 in train.py",
        ),
    ] {
        assert_eq!(summary_line(answer), said, "{answer:?}");
    }
    // Nothing but chatter: its last line, as before.
    assert_eq!(
        summary_line("Feel free to ask!\nLet me know."),
        "Let me know."
    );
    assert_eq!(summary_line("  \n"), "");
}

#[test]
fn agents_get_their_own_keys_but_not_hones() {
    let secrets = vec!["ANTHROPIC_API_KEY".to_string(), "REVIEW_KEY".to_string()];
    let claude = Some(preset("claude"));
    assert!(
        passes_to_agent("ANTHROPIC_API_KEY", claude, &secrets),
        "the tool's own key"
    );
    assert!(!passes_to_agent("REVIEW_KEY", claude, &secrets));
    assert!(!passes_to_agent(
        "ANTHROPIC_API_KEY",
        Some(preset("codex")),
        &secrets
    ));
    assert!(!passes_to_agent("ANTHROPIC_API_KEY", None, &secrets));
    assert!(passes_to_agent(
        "OPENAI_API_KEY",
        Some(preset("codex")),
        &secrets
    ));
    assert!(passes_to_agent("HOME", Some(preset("gemini")), &secrets));
    assert!(!passes_to_agent("HONE_TOKEN", claude, &[]));
}

#[test]
fn automation_secrets_are_hones_own() {
    let text = "[loop]\neditable = [\"a.py\"]\n[verify]\ncommand = \"x\"\nmetric = \"m\"\n\
                [[notify]]\nurl_env = \"SLACK_HOOK\"\n[trigger]\nsecret_env = \"MY_SECRET\"\n";
    let mut spec = crate::spec::Spec::parse(std::path::Path::new("hone.toml"), text).unwrap();
    // As `[store] url_env = "DB_URL"` leaves it (the variable read when the spec loads).
    spec.exec.store_url_env = Some("DB_URL".into());
    let secrets = hone_secret_vars(&spec);
    for name in ["SLACK_HOOK", "MY_SECRET", "GITHUB_TOKEN", "DB_URL"] {
        assert!(secrets.iter().any(|s| s == name), "{name}: {secrets:?}");
        assert!(!passes_to_agent(name, Some(preset("claude")), &secrets));
    }
}
