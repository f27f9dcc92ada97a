//! Tests of the terminal output: hints, escapes, the spec file's name, the live estimate.

use super::{stop_hint, terminal_safe, Printer};
use hone::store::{ExperimentRecord, Status};
use hone::util::cut_at_word;

#[test]
fn the_spec_file_is_named_where_hone_toml_stands_alone() {
    use super::naming_spec;
    use std::path::Path;
    let msg = "but hone.toml now says metric = \"loss\"; start a new run with `hone run --new`";
    assert_eq!(
        naming_spec(msg, Some(Path::new("codex.toml"))),
        "but codex.toml now says metric = \"loss\"; start a new run with `hone --spec codex.toml run --new`"
    );
    // A path that holds hone.toml is left as it is; a name for a shell is quoted.
    for path in ["cfg/hone.toml", "/tmp/x/hone.toml", "hone.toml.codex"] {
        let msg = format!("{path}:3: `verify.metrc`: unknown key");
        assert_eq!(naming_spec(&msg, Some(Path::new(path))), msg);
    }
    assert_eq!(
        naming_spec(
            "fix hone.toml, then `hone run`",
            Some(Path::new("my spec.toml"))
        ),
        "fix my spec.toml, then `hone --spec 'my spec.toml' run`"
    );
    assert_eq!(naming_spec(msg, None), msg);
}

#[test]
fn the_estimate_counts_candidates_not_the_baseline() {
    // The baseline has no agent's turn: the estimate starts after it.
    let mut p = Printer::new("loss".into(), None);
    let finished = |n: u64, status: Status| ExperimentRecord {
        n,
        status: Some(status),
        ..Default::default()
    };
    p.finished(&finished(0, Status::Baseline), None, None);
    p.progress
        .update(|s| assert_eq!((s.done, s.candidates_here), (1, 0)));
    p.finished(&finished(1, Status::Discard), None, None);
    p.finished(&finished(2, Status::Aborted), None, None);
    p.progress
        .update(|s| assert_eq!((s.done, s.candidates_here), (2, 1)));
}

#[test]
fn a_budget_stop_says_which_spec_file_to_raise_and_how_to_go_on() {
    let reason = "budget: reached max_tokens (48034 of 40000)";
    assert_eq!(
        stop_hint(reason, "t", None).as_deref(),
        Some("to go on: raise [stop] max_tokens in hone.toml (a resumed run takes the new limit), then `hone run --tag t --more N`")
    );
    let other = std::path::Path::new("hone-codex.toml");
    assert_eq!(
        stop_hint(reason, "t", Some(other)).as_deref(),
        Some("to go on: raise [stop] max_tokens in hone-codex.toml (a resumed run takes the new limit), then `hone --spec hone-codex.toml run --tag t --more N`")
    );
    assert_eq!(stop_hint("reached max_experiments (5)", "t", None), None);
}

#[test]
fn control_characters_are_shown_escaped() {
    assert_eq!(terminal_safe("plain\tline\n"), "plain\tline\n");
    assert_eq!(
        cut_at_word("LEARNING_RATE 0.0123 -> 0.0456, MOMENTUM 0.9 -> 0.95", 30),
        "LEARNING_RATE 0.0123 -> ..."
    );
    assert_eq!(cut_at_word("short", 30), "short");
    assert_eq!(
        terminal_safe("\u{1b}]0;t\u{7}\u{1b}[2J\r\u{9b}1m\u{7f}\u{202e}x"),
        "\\x1b]0;t\\x07\\x1b[2J\\x0d\\u009b1m\\u007f\\u202ex"
    );
    // JSON output stays JSON.
    let line = serde_json::to_string("a\u{9b}b\u{2066}").unwrap();
    let safe = terminal_safe(&line);
    let back: String = serde_json::from_str(&safe).unwrap();
    assert_eq!(back, "a\u{9b}b\u{2066}");
}
