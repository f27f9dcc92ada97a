//! Tests of metric reading: whole-line forms, pairs inside log lines, `metric_regex`, constraints, and properties over generated lines.

use super::*;
use proptest::prelude::*;

fn parsed(line: &str) -> Vec<(String, f64)> {
    parse_line(line)
}

fn pairs(items: &[(&str, f64)]) -> Vec<(String, f64)> {
    items.iter().map(|&(n, v)| (n.to_owned(), v)).collect()
}

/// What a reader of `objective` (with `regex`, if any) makes of `lines`.
fn read(objective: &str, regex: Option<&str>, lines: &[&str]) -> MetricSet {
    let mut reader = MetricReader::new(objective, regex).expect("valid");
    for line in lines {
        reader.feed(line);
    }
    reader.finish()
}

#[test]
fn colon_form() {
    assert_eq!(parsed("val_bpb: 0.9979"), pairs(&[("val_bpb", 0.9979)]));
    assert_eq!(parsed("loss:2"), pairs(&[("loss", 2.0)]));
}

#[test]
fn aligned_autoresearch_lines() {
    assert_eq!(
        parsed("val_bpb:          0.997900"),
        pairs(&[("val_bpb", 0.9979)])
    );
    assert_eq!(
        parsed("peak_vram_mb:     45060.2"),
        pairs(&[("peak_vram_mb", 45060.2)])
    );
    assert_eq!(
        parsed("   total_tokens_M: 499.6  \r"),
        pairs(&[("total_tokens_M", 499.6)])
    );
}

#[test]
fn equals_forms() {
    assert_eq!(parsed("acc=0.91"), pairs(&[("acc", 0.91)]));
    assert_eq!(parsed("acc = 0.91"), pairs(&[("acc", 0.91)]));
    assert_eq!(
        parsed("step=5 loss=2.3"),
        pairs(&[("step", 5.0), ("loss", 2.3)])
    );
    assert_eq!(
        parsed("step=5, loss=2.3"),
        pairs(&[("step", 5.0), ("loss", 2.3)])
    );
}

#[test]
fn metric_prefix_form() {
    assert_eq!(parsed("METRIC score=17"), pairs(&[("score", 17.0)]));
    assert_eq!(parsed("METRIC a=1 b=2"), pairs(&[("a", 1.0), ("b", 2.0)]));
    assert_eq!(parsed("METRIC   a = -1e-3"), pairs(&[("a", -0.001)]));
    // A metric that happens to be called METRIC still reads as a metric.
    assert_eq!(parsed("METRIC=4"), pairs(&[("METRIC", 4.0)]));
}

#[test]
fn names_may_hold_dots_slashes_and_dashes() {
    assert_eq!(parsed("train/loss: 1.5"), pairs(&[("train/loss", 1.5)]));
    assert_eq!(parsed("eval.top-1=0.75"), pairs(&[("eval.top-1", 0.75)]));
    assert_eq!(parsed("_x: 1"), pairs(&[("_x", 1.0)]));
}

#[test]
fn number_forms() {
    for (text, value) in [
        ("42", 42.0),
        ("-42", -42.0),
        ("+3.5", 3.5),
        ("1e6", 1e6),
        ("2.5E-3", 2.5e-3),
        (".5", 0.5),
        ("5.", 5.0),
        ("inf", f64::INFINITY),
        ("-inf", f64::NEG_INFINITY),
    ] {
        assert_eq!(
            parsed(&format!("m: {text}")),
            pairs(&[("m", value)]),
            "{text}"
        );
    }
    let nan = parsed("m: nan");
    assert_eq!(nan.len(), 1);
    assert!(nan[0].1.is_nan());
    assert!(parsed("m=NaN")[0].1.is_nan());
}

#[test]
fn thousands_separators_are_read_as_python_prints_them() {
    assert_eq!(
        parsed("tok/sec: 1,234,567"),
        pairs(&[("tok/sec", 1_234_567.0)])
    );
    assert_eq!(parsed("n: -12,000.5"), pairs(&[("n", -12_000.5)]));
    // Two pairs, not a grouped number: `,` then a name.
    assert_eq!(parsed("a: 1, b: 2"), pairs(&[("a", 1.0), ("b", 2.0)]));
    // Not groups of three, or a decimal comma: no number.
    assert!(parsed("m: 1,23").is_empty());
    assert!(parsed("loss: 0,412").is_empty());
    // Inside a progress line, beside other pairs.
    let set = read(
        "loss",
        None,
        &["step 00019 (95.0%) | loss: 0.5 | tok/sec: 1,000 | mfu: 1.0%"],
    );
    assert_eq!(set.values.get("tok/sec"), Some(&1000.0));
    assert_eq!(set.values.get("loss"), Some(&0.5));
}

#[test]
fn json_object_lines() {
    assert_eq!(
        parsed(r#"{"val_bpb": 0.99, "step": 12, "note": "ok", "ok": true, "nested": {"a": 1}}"#),
        pairs(&[("val_bpb", 0.99), ("step", 12.0)])
    );
    assert_eq!(
        parsed(r#"  {"z": 1, "a": 2}  "#),
        pairs(&[("z", 1.0), ("a", 2.0)])
    );
    assert_eq!(
        parsed(r#"{"bad key": 1, "good": 2}"#),
        pairs(&[("good", 2.0)])
    );
    assert!(parsed(r#"{"unterminated": 1"#).is_empty());
    assert!(parsed("[1, 2]").is_empty());
}

#[test]
fn prose_lines_yield_nothing() {
    for line in [
        "",
        "   ",
        "Epoch 3: loss went from 2.0 to 1.5",
        "time: 12:30:05",
        "val_bpb: 0.99 (best)",
        "val_bpb: 0.99 best",
        "val_bpb: 0.99ms",
        "val_bpb: 12%",
        "the val_bpb: 0.99",
        "best val_bpb = 0.5 so far",
        "loss=2.3 and falling",
        "a=1b=2",
        "a=1,,b=2",
        "METRIC",
        "METRIC a=",
        "METRIC a=1 b",
        "step 5 | loss 2.3",
        "1: 2",
        "Using device: cuda:0",
        "http://example.com:8080",
        "x: 0x10",
        "x: 1_000",
        "=1",
        "name:",
        "Traceback (most recent call last):",
    ] {
        assert!(parsed(line).is_empty(), "{line:?} gave {:?}", parsed(line));
    }
}

#[test]
fn last_value_of_a_name_wins() {
    let set = read(
        "loss",
        None,
        &[
            "loss: 3",
            "step=1 loss=2",
            "noise",
            r#"{"loss": 1.5}"#,
            "acc: 0.5",
        ],
    );
    assert_eq!(set.get("loss"), Some(1.5));
    assert_eq!(set.get("step"), Some(1.0));
    assert_eq!(set.get("acc"), Some(0.5));
}

#[test]
fn pairs_inside_ordinary_log_lines_are_read_when_no_whole_line_gives_the_name() {
    for (line, name, want) in [
        ("epoch 3: loss=0.41, acc=0.9", "loss", 0.41),
        ("epoch 3: loss=0.41, acc=0.9", "acc", 0.9),
        ("INFO:root:loss: 0.42", "loss", 0.42),
        ("[eval] step 10 | val_bpb: 1.05 | lr: 3e-4", "val_bpb", 1.05),
        ("done (loss=0.3)", "loss", 0.3),
    ] {
        assert_eq!(read(name, None, &[line]).get(name), Some(want), "{line:?}");
    }
    // Not pairs: a clock time, a unit, a name inside a word, a value that is not a number.
    for line in [
        "time: 12:30:05",
        "loss: 0.99ms",
        "myloss=0.5",
        "Using device: cuda:0",
        "Epoch 3: loss went from 2.0 to 1.5",
    ] {
        assert_eq!(read("loss", None, &[line]).get("loss"), None, "{line:?}");
    }
}

#[test]
fn a_whole_line_value_outranks_one_inside_a_line_and_the_case_fallback() {
    let lines = ["loss: 0.5", "epoch 9: loss=0.1 (train)", "Loss: 0.2"];
    assert_eq!(read("loss", None, &lines).get("loss"), Some(0.5));
    assert_eq!(
        read("loss", None, &["Loss: 0.5"]).get("loss"),
        Some(0.5),
        "another case counts last"
    );
    let lines = ["Loss: 0.5", "step 2: loss=0.25"];
    assert_eq!(read("loss", None, &lines).get("loss"), Some(0.25));
}

#[test]
fn a_missing_objective_keeps_the_line_that_mentions_it_and_a_regex_that_reads_it() {
    let lines = ["starting", "final loss is 0.375 after 3 epochs", "bye"];
    let set = read("loss", None, &lines);
    assert_eq!(set.get("loss"), None);
    let line = set.mention.expect("the mention is kept");
    assert_eq!(line, "final loss is 0.375 after 3 epochs");
    let regex = suggest_regex(&line, "loss").expect("a number follows the name");
    let mut again = MetricReader::new("loss", Some(&regex)).expect("the suggestion compiles");
    again.feed(&line);
    assert_eq!(again.finish().get("loss"), Some(0.375), "{regex}");
    assert_eq!(suggest_regex("no loss here", "loss"), None);

    assert_eq!(
        read("loss", None, &["loss: 1"]).mention,
        None,
        "no hint once the value is read"
    );
}

#[test]
fn metric_regex_overrides_the_objective() {
    let lines = [
        "score: 100",
        "the final score was 0.25 and the final score was 0.5",
        "score: 200",
        "peak_mb=12",
    ];
    let set = read("score", Some(r"final score was ([-0-9.e]+)"), &lines);
    assert_eq!(set.get("score"), Some(0.5));
    assert_eq!(set.get("peak_mb"), Some(12.0));
}

#[test]
fn metric_regex_with_a_named_value_group() {
    let regex = r"(train|eval) acc (?P<value>[0-9.]+)";
    let set = read("acc", Some(regex), &["train acc 0.5", "eval acc 0.75"]);
    assert_eq!(set.get("acc"), Some(0.75));
}

#[test]
fn metric_regex_errors_say_what_to_do() {
    let no_group = MetricReader::new("acc", Some(r"acc [0-9.]+")).err();
    assert!(matches!(
        no_group,
        Some(MetricError::RegexWithoutGroup { .. })
    ));
    let two = MetricReader::new("acc", Some(r"(a)(b)")).err();
    assert!(matches!(two, Some(MetricError::RegexAmbiguousGroup { .. })));
    let bad = MetricReader::new("acc", Some(r"(unclosed")).err();
    assert!(matches!(bad, Some(MetricError::BadRegex { .. })));
    let err = no_group.map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("(?P<value>"), "{err}");
    assert!(matches!(
        MetricReader::new("val bpb", None).err(),
        Some(MetricError::BadName(_))
    ));
}

#[test]
fn constraints_parse_every_operator() {
    for (text, op, bound) in [
        ("peak_vram_mb <= 40000", CmpOp::Le, 40000.0),
        ("peak_vram_mb<40000", CmpOp::Lt, 40000.0),
        ("peak_vram_mb >= -1.5", CmpOp::Ge, -1.5),
        ("peak_vram_mb > 1e3", CmpOp::Gt, 1e3),
        ("  peak_vram_mb == 2 ", CmpOp::Eq, 2.0),
        ("peak_vram_mb != 0", CmpOp::Ne, 0.0),
    ] {
        let c: Constraint = text.parse().expect("valid constraint");
        assert_eq!(c.metric, "peak_vram_mb");
        assert_eq!(c.op, op, "{text}");
        assert_eq!(c.bound, bound, "{text}");
    }
}

#[test]
fn bad_constraints_say_the_expected_form() {
    for text in [
        "",
        "peak_vram_mb",
        "peak_vram_mb <= ",
        "<= 4",
        "peak_vram_mb ~ 4",
        "a <= b",
        "a = 4",
        "a <= nan",
    ] {
        let err = text.parse::<Constraint>().err().map(|e| e.to_string());
        let err = err.unwrap_or_else(|| panic!("{text:?} should not parse"));
        assert!(err.contains("peak_vram_mb <= 40000"), "{err}");
    }
}

#[test]
fn constraint_check_explains_failures() {
    let c: Constraint = "peak_vram_mb <= 40000".parse().expect("valid");
    let mut set = MetricSet::default();
    let missing = c.check(&set).err().unwrap_or_default();
    assert!(
        missing.starts_with("peak_vram_mb was not reported"),
        "{missing}"
    );
    set.values.insert("peak_vram_mb".into(), 41000.0);
    assert_eq!(
        c.check(&set),
        Err("peak_vram_mb = 41000 violates peak_vram_mb <= 40000".to_owned())
    );
    set.values.insert("peak_vram_mb".into(), 40000.0);
    assert_eq!(c.check(&set), Ok(()));
    set.values.insert("peak_vram_mb".into(), f64::NAN);
    assert!(c.check(&set).is_err());
    let ne: Constraint = "peak_vram_mb != 1".parse().expect("valid");
    assert!(ne.check(&set).is_err(), "NaN satisfies no constraint");
}

fn name_strategy() -> impl Strategy<Value = String> {
    "[A-Za-z_][A-Za-z0-9_./-]{0,15}"
}

/// Lines that talk about `name` and a number in prose; none may yield a value for it.
fn prose_about(name: String) -> impl Strategy<Value = String> {
    let word = "[a-z]{1,8}";
    let num = any::<f64>();
    (0..8usize, word, num, num).prop_map(move |(template, word, a, b)| match template {
        0 => format!("{name}: {a} ({word})"),
        1 => format!("{word} {name}: {a}"),
        2 => format!("{name} went from {a} to {b}"),
        3 => format!("{name}: {a}ms"),
        4 => format!("best {name} = {a} so far"),
        5 => format!("{name}: {a}:{b}"),
        6 => format!("{name}={a} {word}"),
        _ => format!("Epoch {a}: {name} {b}"),
    })
}

/// Random printable noise, and noise that mentions the metric in prose.
fn noise_about(name: String) -> impl Strategy<Value = String> {
    prop_oneof!["[ -~]{0,80}", "\\PC{0,40}", prose_about(name)]
}

proptest! {
    #[test]
    fn name_colon_value_round_trips(name in name_strategy(), v in any::<f64>().prop_filter("finite", |v| v.is_finite())) {
        prop_assert_eq!(parse_line(&format!("{name}: {v}")), vec![(name.clone(), v)]);
        prop_assert_eq!(parse_line(&format!("METRIC {name}={v}")), vec![(name.clone(), v)]);
        prop_assert_eq!(parse_line(&format!("{name} = {v:e}")), vec![(name, v)]);
    }

    #[test]
    fn prose_about_a_metric_never_yields_it(
        (name, line) in name_strategy().prop_flat_map(|n| (Just(n.clone()), prose_about(n)))
    ) {
        prop_assert!(
            parse_line(&line).iter().all(|(n, _)| *n != name),
            "{:?} yielded {:?}", line, parse_line(&line)
        );
    }

    #[test]
    fn noise_never_yields_a_wrong_value(
        (name, before, after) in name_strategy().prop_flat_map(|n| (
            Just(n.clone()),
            prop::collection::vec(noise_about(n.clone()), 0..20),
            prop::collection::vec(prose_about(n), 0..5),
        )),
        v in any::<f64>().prop_filter("finite", |v| v.is_finite()),
    ) {
        let mut reader = MetricReader::new(&name, None).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for line in &before {
            reader.feed(line);
        }
        reader.feed(&format!("{name}: {v}"));
        for line in &after {
            reader.feed(line);
        }
        prop_assert_eq!(reader.finish().get(&name), Some(v));
    }
}

#[test]
fn what_a_reader_keeps_is_bounded_whatever_the_output() {
    // Ever new names (long ones, and many short ones, whole lines and pairs inside lines):
    // at most MAX_METRICS names besides the objective, none longer than MAX_METRIC_NAME, and
    // the objective read all the same, even last.
    let long = format!("m{}: 1", "x".repeat(60_000));
    let mut lines: Vec<String> = vec![long];
    lines.extend((0..3 * MAX_METRICS).map(|i| format!("m{i}: {i}")));
    lines.extend((0..3 * MAX_METRICS).map(|i| format!("step done, p{i}=1")));
    lines.push("m0: 42".into());
    lines.push("loss: 0.5".into());
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let set = read("loss", None, &refs);
    assert_eq!(set.get("loss"), Some(0.5));
    assert!(set.values.len() <= MAX_METRICS + 1, "{}", set.values.len());
    assert!(set.values.keys().all(|k| k.len() <= MAX_METRIC_NAME));
    // A name kept takes its later values.
    assert_eq!(set.get("m0"), Some(42.0));
}
