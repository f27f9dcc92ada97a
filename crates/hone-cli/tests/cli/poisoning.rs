//! Poisoned numbers and poisoned text: a candidate that widens the noise band for every later
//! one, metric values that overflow, a metric printed after the verifier exited, escape
//! sequences in file names, and markup in what the agent wrote. Each test plays the attack with
//! `fake-agent` and a real verifier and asserts the defended outcome.

use crate::support::*;

/// Prints `score:` from `value.txt`, which holds one value per repeat of the same code
/// (`HONE_REPEAT` picks it): the candidate's file decides what each of its runs prints.
const PER_REPEAT: &str = "python3 -c \"import os; v = open('value.txt').read().split(); print('score:', v[int(os.environ['HONE_REPEAT']) % len(v)])\"";

/// A repository scored by `PER_REPEAT`, baseline runs 10 and 10.2, with `verify_extra` in
/// `[verify]` and one experiment per block of `script`.
fn per_repeat_repo(verify_extra: &str, script: &str, experiments: usize) -> Repo {
    Repo::builder()
        .file("value.txt", "10 10.2\n")
        .script(script)
        .standard_with(PER_REPEAT, verify_extra, experiments)
        .create()
}

/// One fake-agent block per entry: write `value.txt` with these runs.
fn blocks(values: &[&str]) -> String {
    values
        .iter()
        .map(|v| format!("write\tvalue.txt\t{v}\\n\nhypothesis\truns {v}\n"))
        .collect::<Vec<_>>()
        .join("---\n")
}

/// No number an overflow makes (`inf`, `NaN`, an infinite percentage) in `s`.
fn assert_no_overflow_text(what: &str, s: &str) {
    for bad in ["inf%", " inf", "-inf", "NaN", "nan%"] {
        assert!(!s.contains(bad), "{what} shows `{bad}`:\n{s}");
    }
}

#[test]
fn one_candidate_cannot_widen_the_noise_band_for_the_rest_of_the_run() {
    // #1 prints 0 then 1000 (its first run passes, so it gets a confirm run): pooled with the
    // baseline's two runs, sigma would be about 500 and every honest improvement after it
    // "within noise". #2 and #3 are honest improvements well beyond the baseline's noise.
    let r = per_repeat_repo(
        "baseline_repeats = 2\nconfirm = 1",
        &blocks(&["0 1000", "9 9", "8 8.1"]),
        4,
    );
    let log = r.run_log("p");
    assert_statuses(&log, &["baseline", "discard", "keep", "keep"]);
    assert_eq!(log[1]["runs"].as_array().unwrap().len(), 2, "{}", log[1]);
    for e in &log[2..] {
        let sigma = e["judgement"]["sigma"].as_f64().unwrap();
        assert!(sigma < 1.0, "sigma was set by the poisoned candidate: {e}");
    }
    assert_ne!(r.rev("hone/p"), r.rev("main"), "the branch moved");

    // Without baseline repeats the poisoned candidate is the only noise estimate there is:
    // it still sets nothing for the candidates after it.
    let r = Repo::builder()
        .file("value.txt", "10\n")
        .script(&blocks(&["0 1000", "9 9", "8 8.1"]))
        .standard_with(PER_REPEAT, "confirm = 1", 4)
        .create();
    let log = r.run_log("p");
    assert_statuses(&log, &["baseline", "discard", "keep", "keep"]);
}

#[test]
fn overflowing_values_make_a_crash_and_never_reach_a_summary() {
    // #1: runs -1.79e308 and 1.79e308 (a finite mean of 0, an infinite spread); #2: two runs
    // of -1.79e308 (an infinite mean). Both are crashes with a reason; #3, an honest
    // improvement, is still judged against the baseline's noise and kept.
    let r = per_repeat_repo(
        "baseline_repeats = 2\nconfirm = 1",
        &blocks(&["-1.79e308 1.79e308", "-1.79e308 -1.79e308", "9 9"]),
        4,
    );
    let out = ok(r.hone(&["run", "--tag", "p"]));
    assert_no_overflow_text("hone run", &text(&out));
    let log = r.log();
    assert_statuses(&log, &["baseline", "crash", "crash", "keep"]);
    assert_reason(&log[1], "spread overflows");
    assert_reason(&log[2], "mean");
    for e in &log[1..3] {
        assert!(e["objective"].is_null(), "no objective for a crash: {e}");
    }
    for args in [
        &["show", "1"][..],
        &["show", "2"],
        &["show", "3"],
        &["status"],
        &["log"],
    ] {
        let out = r.hone(args);
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        assert_no_overflow_text(&format!("hone {args:?}"), &text(&out));
    }
    ok(r.hone(&["report"]));
    let dir = r.dir.join(".hone/reports/p");
    for f in ["report.md", "report.html", "progress.svg"] {
        let body = std::fs::read_to_string(dir.join(f)).unwrap();
        assert_no_overflow_text(f, &body);
    }
}

#[test]
fn a_metric_printed_after_the_verifier_exited_does_not_count() {
    // The verifier runs value.txt as a shell script. The candidate prints a worse score, then
    // leaves a background job that prints a much better one half a second after the verifier
    // exited: the last value printed would win if hone still read it.
    let script = "write\tvalue.txt\t(sleep 0.5; echo score: 1) &\\necho score: 6\\n\nhypothesis\tlate metric\n";
    let r = Repo::builder()
        .file("value.txt", "echo score: 5\n")
        .script(script)
        .spec_with(|agent| {
            Spec::standard("sh value.txt", agent).tail("[stop]\nmax_experiments = 2\n")
        })
        .create();
    let log = r.run_log("p");
    assert_eq!(log[1]["status"], "discard", "{log:#?}");
    assert_eq!(log[1]["objective"].as_f64(), Some(6.0), "{}", log[1]);
    assert_eq!(r.rev("hone/p"), r.rev("main"), "the branch never moved");
}

/// Every byte an escape sequence needs: ESC, BEL, and the C1 control sequence introducer.
fn assert_no_raw_controls(what: &str, out: &Output) {
    for (name, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        assert!(
            !bytes.iter().any(|b| *b == 0x1b || *b == 0x07),
            "{what}: raw control byte on {name}: {:?}",
            String::from_utf8_lossy(bytes)
        );
        assert!(
            !String::from_utf8_lossy(bytes).contains('\u{9b}'),
            "{what}: raw CSI on {name}"
        );
    }
}

#[test]
fn escape_sequences_in_file_names_never_reach_the_terminal() {
    // A file outside `editable` whose name clears the screen and retitles the terminal; its
    // contents, shown in `hone show`'s diff, carry another sequence. The violation names it.
    let name = "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31mred.txt";
    let script = format!(
        "write\t{name}\t\u{1b}[31mred contents\u{1b}[0m\\n\nhypothesis\t\u{1b}[2Jwipe the screen\n"
    );
    let r = Repo::scored(2, &script);
    let out = ok(r.hone(&["run", "--tag", "p"]));
    assert_no_raw_controls("hone run", &out);
    assert!(
        text(&out).contains("\\x1b"),
        "shown escaped: {}",
        text(&out)
    );
    assert_eq!(r.statuses()[1], "violation");
    for args in [&["show", "1"][..], &["log"], &["status"]] {
        let out = r.hone(args);
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        assert_no_raw_controls(&format!("hone {args:?}"), &out);
    }
    assert!(
        text(&r.hone(&["show", "1"])).contains("\\x1b"),
        "the reason still names the file, escaped"
    );
    // JSON output stays valid JSON (the tests' own `log()` parses it).
    assert_eq!(r.log().len(), 2);
}

#[test]
fn markup_written_by_the_agent_is_text_in_report_md() {
    let hypothesis = "<script>alert(1)</script> see [the docs](http://evil.example) ![x](http://evil.example/x.png) `code` **bold**";
    let script = format!("write\tvalue.txt\tscore: 4\\n\nhypothesis\t{hypothesis}\n");
    let r = Repo::scored(2, &script);
    r.run_expect("p", &["baseline", "keep"]);
    ok(r.hone(&["report"]));
    let md = std::fs::read_to_string(r.dir.join(".hone/reports/p/report.md")).unwrap();
    for raw in ["<script>", "[the docs](", "![x](", "`code`", "**bold**"] {
        assert!(!md.contains(raw), "report.md carries `{raw}` raw:\n{md}");
    }
    for escaped in [
        "&lt;script>alert(1)&lt;/script>",
        "\\[the docs\\](http://evil.example)",
        "!\\[x\\]",
        "\\`code\\`",
        "\\*\\*bold\\*\\*",
    ] {
        assert!(md.contains(escaped), "report.md lacks `{escaped}`:\n{md}");
    }
    let html = std::fs::read_to_string(r.dir.join(".hone/reports/p/report.html")).unwrap();
    assert!(!html.contains("<script>"), "{html}");
}
