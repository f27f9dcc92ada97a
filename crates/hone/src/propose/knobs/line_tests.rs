//! Tests of one line's knob: its literal, its annotation and the domain inferred from its name.

use super::*;

fn knob(line: &str) -> Option<(String, KnobValue, Option<String>)> {
    match scan_line(line) {
        LineScan::Knob(k) => Some((
            k.name.to_string(),
            k.literal.value,
            k.annotation.map(str::to_string),
        )),
        _ => None,
    }
}

#[test]
fn scans_python_and_rust_lines() {
    let f = |x: f64| KnobValue::Float(x);
    assert_eq!(knob("LR = 0.04"), Some(("LR".into(), f(0.04), None)));
    assert_eq!(
        knob("LR: float = 0.04  # hone: log 1e-4..1"),
        Some(("LR".into(), f(0.04), Some("log 1e-4..1".into())))
    );
    assert_eq!(
        knob("pub const LR: f64 = 0.04; // hone: fixed"),
        Some(("LR".into(), f(0.04), Some("fixed".into())))
    );
    assert_eq!(
        knob("export const N=3;"),
        Some(("N".into(), KnobValue::Int(3), None))
    );
    assert_eq!(
        knob("var X float64 = 1.5"),
        Some(("X".into(), f(1.5), None))
    );
    assert_eq!(
        knob("const S: &'static str = \"a\"; // plain comment"),
        Some(("S".into(), KnobValue::Str("a".into()), None))
    );
    for not_a_knob in [
        "  LR = 0.04",
        "lr = 0.04",
        "Lr = 0.04",
        "LR == 0.04",
        "LR = 0.04 * 2",
        "LR = f(1)",
        "LR += 1",
        "A = B = 1",
        "X = None",
        "X = 2**N",
        "X = (1, 2) + Y",
    ] {
        assert_eq!(knob(not_a_knob), None, "{not_a_knob}");
    }
    assert_eq!(
        knob("TOTAL_BATCH_SIZE = 2**19 # tokens"),
        Some(("TOTAL_BATCH_SIZE".into(), KnobValue::Int(1 << 19), None))
    );
    assert_eq!(knob("X = (1, \"a\")"), None, "a tuple of numbers only");
    assert_eq!(knob("X = (1,)"), None, "two elements at least");
    match scan_line("ADAM_BETAS = (0.8, 0.95,)  # hone: 0.5..0.999") {
        LineScan::Knob(k) => {
            let values: Vec<_> = k.elements.iter().map(|(_, l)| l.value.clone()).collect();
            assert_eq!(values, [f(0.8), f(0.95)]);
            assert_eq!(k.elements[1].0, 19);
            assert_eq!(k.annotation, Some("0.5..0.999"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn reports_annotations_on_lines_that_are_not_knobs() {
    assert!(matches!(
        scan_line("    LR = 0.1  # hone: log 1e-3..1"),
        LineScan::Misannotated(r) if r.contains("top-level")
    ));
    assert!(matches!(
        scan_line("lr = 0.1  # hone: log 1e-3..1"),
        LineScan::Misannotated(_)
    ));
    assert_eq!(scan_line("// LR = 0.1 // hone: bool"), LineScan::Other);
    assert_eq!(scan_line("x = 1  # a comment"), LineScan::Other);
}

#[test]
fn tracks_triple_quotes() {
    let mut t = TripleQuotes::default();
    let mut inside = Vec::new();
    for line in [
        "A = 1",
        "DOC = \"\"\"",
        "B = 2",
        "\"\"\"",
        "C = '''x'''",
        "D = 4",
    ] {
        inside.push(t.inside());
        t.feed(line);
    }
    assert_eq!(inside, [false, false, true, true, false, false]);
}

#[test]
fn annotation_errors_say_what_is_wrong() {
    let err = |a: &str, v: KnobValue| annotated_domain(a, &v).err().unwrap_or_default();
    assert!(err("log 0..1", KnobValue::Float(0.5)).contains("positive"));
    assert!(err("1..0", KnobValue::Float(0.5)).contains("empty"));
    assert!(err("0..1", KnobValue::Int(1)).contains("int lo..hi"));
    assert!(err("int 0..1.5", KnobValue::Int(1)).contains("integer bounds"));
    assert!(err("bool", KnobValue::Int(1)).contains("bool"));
    assert!(err("choice [1, 2]", KnobValue::Int(3)).contains("not among"));
    assert!(err("choice [1, \"a\"]", KnobValue::Int(1)).contains("type"));
    assert!(err("choice 1, 2", KnobValue::Int(1)).contains("brackets"));
    assert!(err("banana", KnobValue::Int(1)).contains("expected"));
    assert!(err("0..x", KnobValue::Float(0.5)).contains("upper"));
}

#[test]
fn infers_domains() {
    let log_float = |lo, hi| Domain::Float { lo, hi, log: true };
    let log_int = |lo, hi| Domain::Int { lo, hi, log: true };
    for (name, value, want) in [
        ("LR", KnobValue::Float(0.04), log_float(0.004, 0.4)),
        ("SHIFT", KnobValue::Float(-2.0), log_float(-20.0, -0.2)),
        ("Z", KnobValue::Float(0.0), Domain::Fixed),
        ("DEPTH", KnobValue::Int(8), log_int(2, 32)),
        ("ONE", KnobValue::Int(1), log_int(1, 4)),
        ("NEG", KnobValue::Int(-8), log_int(-32, -2)),
        ("Z", KnobValue::Int(0), Domain::Fixed),
        ("B", KnobValue::Bool(true), Domain::Bool),
        ("S", KnobValue::Str("x".into()), Domain::Fixed),
        ("DATA_SEED", KnobValue::Int(42), Domain::Fixed),
    ] {
        assert_eq!(inferred_domain(name, &value), want, "{name} = {value}");
    }
}

#[test]
fn fixes_time_budget_data_split_and_evaluation_constants() {
    for name in [
        "TIME_BUDGET",
        "MAX_SHARD",
        "VAL_SHARD",
        "EVAL_TOKENS",
        "TEST_SIZE",
    ] {
        assert_eq!(
            inferred_domain(name, &KnobValue::Int(300)),
            Domain::Fixed,
            "{name}"
        );
    }
    // Words, not substrings: INTERVALS holds VAL but is not about validation.
    assert_ne!(
        inferred_domain("N_INTERVALS", &KnobValue::Int(300)),
        Domain::Fixed
    );
}

#[test]
fn keeps_fractions_inside_zero_one() {
    for (name, x) in [
        ("WARMDOWN_RATIO", 0.5),
        ("MOMENTUM", 0.9),
        ("ADAM_BETAS", 0.95),
        ("BETA2", 0.999),
        ("WEIGHT_DECAY", 0.2),
        ("WEIGHT_DECAY", 0.01),
        ("WARMUP_RATIO", 0.1),
        ("DROPOUT", 1.0),
    ] {
        match inferred_domain(name, &KnobValue::Float(x)) {
            Domain::Float { lo, hi, log } => {
                assert!(
                    0.0 < lo && lo <= x && x <= hi && hi <= 1.0,
                    "{name}: {lo}..{hi}"
                );
                // The range's middle (as the sampler's centre takes it) is near x: within
                // a factor of three of it, or of its distance to 1.
                let mid = if log {
                    (lo * hi).sqrt()
                } else {
                    (lo + hi) / 2.0
                };
                let (a, b) = if x < 0.5 {
                    (mid, x)
                } else {
                    (1.0 - mid, 1.0 - x)
                };
                assert!(
                    a / b < 3.0 && b / a < 3.0 || x == 1.0,
                    "{name} {x}: middle {mid} of {lo}..{hi}"
                );
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    // Not a fraction by name, or not one by value: the usual decade either way.
    assert!(matches!(
        inferred_domain("LR", &KnobValue::Float(0.5)),
        Domain::Float { hi, log: true, .. } if hi > 1.0
    ));
    assert!(matches!(
        inferred_domain("DECAY", &KnobValue::Float(2.0)),
        Domain::Float { log: true, .. }
    ));
}

#[test]
fn keeps_powers_of_two_powers_of_two() {
    let p = |ks: &[u32]| Domain::Choice(ks.iter().map(|k| KnobValue::Int(1 << k)).collect());
    assert_eq!(
        inferred_domain("DEVICE_BATCH_SIZE", &KnobValue::Int(128)),
        p(&[5, 6, 7, 8, 9])
    );
    assert_eq!(
        inferred_domain("TOTAL_BATCH_SIZE", &KnobValue::Int(1 << 19)),
        p(&[17, 18, 19, 20, 21])
    );
    // Small powers of two are as likely counts: DEPTH = 8 keeps its integer range.
    assert!(matches!(
        inferred_domain("DEPTH", &KnobValue::Int(8)),
        Domain::Int { .. }
    ));
    assert!(matches!(
        inferred_domain("DEPTH", &KnobValue::Int(100)),
        Domain::Int { .. }
    ));
}

#[test]
fn a_runs_length_its_logging_and_its_data_size_are_fixed() {
    for name in [
        "NUM_STEPS",
        "MAX_STEPS",
        "EPOCHS",
        "N_EPOCHS",
        "MAX_ITERS",
        "TOTAL_STEPS",
        "TRAIN_ITERS",
        "LOG_EVERY",
        "EVAL_EVERY",
        "LOG_INTERVAL",
        "SAVE_FREQ",
        "N_TRAIN",
        "NUM_SAMPLES",
    ] {
        assert_eq!(
            inferred_domain(name, &KnobValue::Int(300)),
            Domain::Fixed,
            "{name}"
        );
    }
    // Parts of a run, and cadences of the training itself, are searched.
    for name in [
        "WARMUP_STEPS",
        "GRAD_ACCUM_STEPS",
        "GRADIENT_ACCUMULATION_STEPS",
        "WARMDOWN_ITERS",
        "LR_DECAY_ITERS",
        "NS_STEPS",
        "SINKHORN_ITERS",
        "SAMPLING_STEPS",
        "TRAIN_BATCH",
        "UPDATE_EVERY",
        "TARGET_UPDATE_INTERVAL",
        "SYNC_EVERY",
    ] {
        assert!(
            matches!(
                inferred_domain(name, &KnobValue::Int(300)),
                Domain::Int { .. }
            ),
            "{name}"
        );
    }
}
