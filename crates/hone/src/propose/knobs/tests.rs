//! Tests of knob discovery, configurations and rewriting files with new values.

use super::*;
use proptest::prelude::*;

const PY: &str = r#"import math

LEARNING_RATE = 0.04   # hone: log 1e-4..1.0
DROPOUT = 0.1          # hone: 0.0..0.5
DEPTH = 8              # hone: int 2..16
WIDTH = 256            # hone: int log 16..4096
WINDOW = "SSSL"        # hone: choice ["L", "SL", "SSSL"]
USE_BIAS = False       # hone: bool
SEED = 42              # hone: fixed
WARMUP: float = 1e-3
ROUNDS = 1_000
SHIFT = -2.5E+3
HALF = .5
THREE = 3.
NAME = 'plain'
VERBOSE = True
DATA_SEED = 7
ZERO = 0.0
DEPTH = 99
"""docs
HIDDEN = 1.0
"""

def f():
    x = 1
"#;

const RS: &str = "use std::f64;\r\n\
        pub const LR: f64 = 0.04; // hone: log 1e-4..1\r\n\
        static BATCH: usize = 64;\r\n\
        const MODE: &str = \"fast\"; // hone: choice [\"fast\", \"slow\"]\r\n\
        pub static FLAG: bool = true;\r\n\
        export const MOMENTUM = 0.9 // hone: 0.5..0.99\r\n\
        let COUNT = -12;\r\n\
        var BETA = 2.5e-1;\r\n\
        fn main() {}\r\n";

/// A configuration from (name, value) pairs.
fn config<const N: usize>(pairs: [(&str, KnobValue); N]) -> Config {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn float(lo: f64, hi: f64, log: bool) -> Domain {
    Domain::Float { lo, hi, log }
}

fn int(lo: i64, hi: i64, log: bool) -> Domain {
    Domain::Int { lo, hi, log }
}

/// Each named knob of `knobs` has its domain.
fn assert_domains<const N: usize>(knobs: &[Knob], want: [(&str, Domain); N]) {
    for (name, domain) in want {
        assert_eq!(by_name(knobs, name).domain, domain, "{name}");
    }
}

fn by_name<'a>(knobs: &'a [Knob], name: &str) -> &'a Knob {
    match knobs.iter().find(|k| k.name == name) {
        Some(k) => k,
        None => panic!("no knob {name} in {knobs:?}"),
    }
}

#[test]
fn discovers_every_python_form() -> Result<(), KnobError> {
    let knobs = discover("train.py", PY)?;
    let names: Vec<&str> = knobs.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "LEARNING_RATE",
            "DROPOUT",
            "DEPTH",
            "WIDTH",
            "WINDOW",
            "USE_BIAS",
            "SEED",
            "WARMUP",
            "ROUNDS",
            "SHIFT",
            "HALF",
            "THREE",
            "NAME",
            "VERBOSE",
            "DATA_SEED",
            "ZERO"
        ]
    );
    let lr = by_name(&knobs, "LEARNING_RATE");
    assert_eq!((lr.file.as_str(), lr.line), ("train.py", 3));
    assert_eq!(lr.value, KnobValue::Float(0.04));
    assert!(lr.annotated);
    let depth = by_name(&knobs, "DEPTH");
    assert_eq!((depth.line, &depth.value), (5, &KnobValue::Int(8)));
    assert!(by_name(&knobs, "SEED").annotated);
    let warmup = by_name(&knobs, "WARMUP");
    assert_eq!(warmup.value, KnobValue::Float(1e-3));
    assert_eq!(warmup.literal, "1e-3");
    assert!(!warmup.annotated);
    assert_eq!(by_name(&knobs, "ROUNDS").value, KnobValue::Int(1000));
    assert_eq!(by_name(&knobs, "SHIFT").value, KnobValue::Float(-2500.0));
    assert_eq!(by_name(&knobs, "HALF").value, KnobValue::Float(0.5));
    assert_eq!(by_name(&knobs, "THREE").value, KnobValue::Float(3.0));
    assert_eq!(
        by_name(&knobs, "NAME").value,
        KnobValue::Str("plain".into())
    );
    let window = ["L", "SL", "SSSL"].map(|o| KnobValue::Str(o.into()));
    assert_domains(
        &knobs,
        [
            ("LEARNING_RATE", float(1e-4, 1.0, true)),
            ("DROPOUT", float(0.0, 0.5, false)),
            ("DEPTH", int(2, 16, false)),
            ("WIDTH", int(16, 4096, true)),
            ("WINDOW", Domain::Choice(window.to_vec())),
            ("USE_BIAS", Domain::Bool),
            ("SEED", Domain::Fixed),
            ("ROUNDS", int(250, 4000, true)),
            ("SHIFT", float(-25000.0, -250.0, true)),
            ("NAME", Domain::Fixed),
            ("VERBOSE", Domain::Bool),
            ("DATA_SEED", Domain::Fixed),
            ("ZERO", Domain::Fixed),
        ],
    );
    Ok(())
}

#[test]
fn discovers_rust_and_c_style_forms() -> Result<(), KnobError> {
    let knobs = discover("src/main.rs", RS)?;
    let found = config_of(&knobs);
    let expected = config([
        ("LR", KnobValue::Float(0.04)),
        ("BATCH", KnobValue::Int(64)),
        ("MODE", KnobValue::Str("fast".into())),
        ("FLAG", KnobValue::Bool(true)),
        ("MOMENTUM", KnobValue::Float(0.9)),
        ("COUNT", KnobValue::Int(-12)),
        ("BETA", KnobValue::Float(0.25)),
    ]);
    assert_eq!(found, expected);
    assert_eq!(by_name(&knobs, "LR").line, 2);
    assert_domains(
        &knobs,
        [
            ("LR", float(1e-4, 1.0, true)),
            ("COUNT", int(-48, -3, true)),
            ("MOMENTUM", float(0.5, 0.99, false)),
        ],
    );
    Ok(())
}

#[test]
fn bad_annotations_name_the_file_and_line() {
    let cases = [
        ("A = 1.0\nLR = 0.04  # hone: log 0..1\n", 2, "positive"),
        ("LR = 0.04  # hone: 1..0\n", 1, "empty"),
        ("\n\nD = 3  # hone: 0.0..1.0\n", 3, "int lo..hi"),
        ("W = 'x'  # hone: choice ['y', 'z']\n", 1, "not among"),
        ("B = 1  # hone: bool\n", 1, "bool"),
        ("X = 1  # hone: sometimes\n", 1, "expected"),
        ("X = 1.5  # hone: int 1..3\n", 1, "float range"),
    ];
    for (text, line, needle) in cases {
        match discover("t.py", text) {
            Err(e @ KnobError::BadAnnotation { .. }) => {
                let msg = e.to_string();
                assert!(msg.starts_with(&format!("t.py:{line}: ")), "{msg}");
                assert!(msg.contains(needle), "{msg} lacks {needle}");
            }
            other => panic!("{text:?} gave {other:?}"),
        }
    }
    match discover("t.py", "def f():\n    LR = 0.1  # hone: log 1e-3..1\n") {
        Err(e @ KnobError::NotAKnob { line: 2, .. }) => {
            assert!(e.to_string().contains("top-level"), "{e}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn first_definition_wins_and_is_the_only_one_rewritten() -> Result<(), KnobError> {
    let text = "DEPTH = 8\nDEPTH = 99\n";
    let knobs = discover("t.py", text)?;
    assert_eq!(knobs.len(), 1);
    assert_eq!(knobs[0].value, KnobValue::Int(8));
    let changes = Config::from([("DEPTH".to_string(), KnobValue::Int(6))]);
    assert_eq!(apply("t.py", text, &changes)?, "DEPTH = 6\nDEPTH = 99\n");
    Ok(())
}

#[test]
fn lines_in_triple_quoted_strings_are_not_knobs() -> Result<(), KnobError> {
    let knobs = discover("train.py", PY)?;
    assert!(knobs.iter().all(|k| k.name != "HIDDEN"));
    Ok(())
}

/// A change rewrites only the literal (its style kept; the type, spacing, comment, `;` and CRLF
/// around it stay) and the file reads back with the new values; a name that is not a knob
/// changes nothing.
#[test]
fn apply_rewrites_only_the_literal() -> Result<(), KnobError> {
    type Case<'a> = (&'a str, &'a str, Config, &'a [(&'a str, &'a str)]);
    let python: Case = (
        "train.py",
        PY,
        config([
            ("LEARNING_RATE", KnobValue::Float(0.02)),
            ("DEPTH", KnobValue::Int(6)),
            ("WINDOW", KnobValue::Str("SL".into())),
            ("USE_BIAS", KnobValue::Bool(true)),
            ("WARMUP", KnobValue::Float(0.00025)),
            ("ROUNDS", KnobValue::Int(12345)),
            ("SHIFT", KnobValue::Float(-100.0)),
            ("HALF", KnobValue::Float(0.25)),
            ("THREE", KnobValue::Float(4.0)),
            ("NAME", KnobValue::Str("it's".into())),
            ("UNKNOWN", KnobValue::Int(1)),
        ]),
        &[
            ("LEARNING_RATE = 0.04   #", "LEARNING_RATE = 0.02   #"),
            ("DEPTH = 8 ", "DEPTH = 6 "),
            ("WINDOW = \"SSSL\"  ", "WINDOW = \"SL\"  "),
            ("USE_BIAS = False ", "USE_BIAS = True "),
            ("WARMUP: float = 1e-3", "WARMUP: float = 2.5e-4"),
            ("ROUNDS = 1_000", "ROUNDS = 12_345"),
            ("SHIFT = -2.5E+3", "SHIFT = -1E+2"),
            ("HALF = .5", "HALF = 0.25"),
            ("THREE = 3.", "THREE = 4.0"),
            ("NAME = 'plain'", "NAME = 'it\\'s'"),
        ],
    );
    let rust: Case = (
        "src/main.rs",
        RS,
        config([
            ("LR", KnobValue::Float(0.5)),
            ("BATCH", KnobValue::Int(128)),
            ("MODE", KnobValue::Str("slow".into())),
            ("FLAG", KnobValue::Bool(false)),
            ("BETA", KnobValue::Float(1.0)),
        ]),
        &[
            ("f64 = 0.04; //", "f64 = 0.5; //"),
            ("usize = 64;\r\n", "usize = 128;\r\n"),
            ("\"fast\"; //", "\"slow\"; //"),
            ("bool = true;", "bool = false;"),
            ("BETA = 2.5e-1;", "BETA = 1e0;"),
        ],
    );
    for (file, text, changes, replacements) in [python, rust] {
        let out = apply(file, text, &changes)?;
        let expected = replacements
            .iter()
            .fold(text.to_string(), |t, (from, to)| t.replace(from, to));
        assert_eq!(out, expected, "{file}");
        let back = config_of(&discover(file, &out)?);
        for (name, value) in changes.iter().filter(|(n, _)| *n != "UNKNOWN") {
            assert_eq!(back.get(name), Some(value), "{file}: {name}");
        }
    }
    Ok(())
}

#[test]
fn apply_handles_a_byte_order_mark_tabs_and_no_final_newline() -> Result<(), KnobError> {
    let text = "\u{feff}LR\t=\t0.04\t# hone: log 1e-4..1\nDEPTH = 8";
    let knobs = discover("t.py", text)?;
    assert_eq!(knobs[0].name, "LR");
    assert_eq!(knobs[0].literal, "0.04");
    let changes: Config = [
        ("LR".to_string(), KnobValue::Float(0.1)),
        ("DEPTH".to_string(), KnobValue::Int(16)),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        apply("t.py", text, &changes)?,
        "\u{feff}LR\t=\t0.1\t# hone: log 1e-4..1\nDEPTH = 16"
    );
    Ok(())
}

#[test]
fn apply_with_current_values_changes_nothing() -> Result<(), KnobError> {
    for (file, text) in [("train.py", PY), ("src/main.rs", RS), ("x.py", "A = 1")] {
        let config = config_of(&discover(file, text)?);
        assert_eq!(apply(file, text, &config)?, text);
    }
    Ok(())
}

#[test]
fn apply_refuses_wrong_types_and_non_finite_values() {
    let text = "\nDEPTH = 8\nLR = 0.1\n";
    let int_as_float = Config::from([("DEPTH".to_string(), KnobValue::Float(6.5))]);
    match apply("t.py", text, &int_as_float) {
        Err(e @ KnobError::TypeMismatch { line: 2, .. }) => {
            assert!(e.to_string().starts_with("t.py:2: "), "{e}")
        }
        other => panic!("{other:?}"),
    }
    let nan = Config::from([("LR".to_string(), KnobValue::Float(f64::NAN))]);
    assert!(matches!(
        apply("t.py", text, &nan),
        Err(KnobError::NonFinite { line: 3, .. })
    ));
}

#[test]
fn discover_all_rejects_a_name_in_two_files() {
    let err = discover_all([("a.py", "LR = 0.1\n"), ("b.py", "\nLR = 0.2\n")]);
    match err {
        Err(e @ KnobError::DuplicateName { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("a.py:1") && msg.contains("b.py:2"), "{msg}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn describe_lists_changes_in_name_order() {
    let from = config([
        ("LEARNING_RATE", KnobValue::Float(0.04)),
        ("DEPTH", KnobValue::Int(8)),
        ("WINDOW", KnobValue::Str("SSSL".into())),
        ("SEED", KnobValue::Int(42)),
    ]);
    let mut to = from.clone();
    assert_eq!(describe(&from, &to), "no change");
    to.insert("LEARNING_RATE", KnobValue::Float(0.02));
    to.insert("DEPTH", KnobValue::Int(6));
    to.insert("WINDOW", KnobValue::Str("L".into()));
    assert_eq!(
        describe(&from, &to),
        "DEPTH 8 -> 6, LEARNING_RATE 0.04 -> 0.02, WINDOW \"SSSL\" -> \"L\""
    );
    to.insert("NEW", KnobValue::Bool(true));
    assert!(describe(&from, &to).ends_with("NEW ? -> true, WINDOW \"SSSL\" -> \"L\""));
}

#[test]
fn values_display_and_serialize_as_written() -> Result<(), serde_json::Error> {
    assert_eq!(KnobValue::Float(3.0).to_string(), "3.0");
    assert_eq!(KnobValue::Float(1e-7).to_string(), "1e-7");
    assert_eq!(KnobValue::Int(-8).to_string(), "-8");
    let values = vec![
        KnobValue::Bool(true),
        KnobValue::Int(8),
        KnobValue::Float(0.5),
        KnobValue::Float(2.0),
        KnobValue::Str("SSSL".into()),
    ];
    let json = serde_json::to_string(&values)?;
    assert_eq!(json, r#"[true,8,0.5,2.0,"SSSL"]"#);
    let back: Vec<KnobValue> = serde_json::from_str(&json)?;
    assert_eq!(back, values);
    Ok(())
}

proptest! {
    #[test]
    fn rewrite_round_trips(
        lr in prop_oneof![
            -1e12f64..1e12,
            (-300i32..300, 1f64..10.0).prop_map(|(e, m)| m * 10f64.powi(e)),
        ],
        sci in any::<bool>(),
        depth in any::<i64>(),
        grouped in any::<bool>(),
        crlf in any::<bool>(),
    ) {
        let nl = if crlf { "\r\n" } else { "\n" };
        let lr_lit = if sci { "1e-3" } else { "0.04" };
        let depth_lit = if grouped { "1_000" } else { "8" };
        let text = format!(
            "LR = {lr_lit}  # hone: fixed{nl}x = 1{nl}pub const DEPTH: i64 = {depth_lit};{nl}"
        );
        let changes: Config = [
            ("LR".to_string(), KnobValue::Float(lr)),
            ("DEPTH".to_string(), KnobValue::Int(depth)),
        ]
        .into_iter()
        .collect();
        let out = apply("t", &text, &changes).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let back = discover("t", &out).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(config_of(&back), changes.clone());
        prop_assert_eq!(out.split('\n').nth(1), Some(if crlf { "x = 1\r" } else { "x = 1" }));
        prop_assert!(out.ends_with(nl));
        let lr_written = &back[0].literal;
        prop_assert!(lr_written.contains('.') || lr_written.contains('e'), "{}", lr_written);
        prop_assert_eq!(sci, lr_written.contains('e'));
        prop_assert_eq!(apply("t", &out, &changes).ok(), Some(out.clone()));
    }
}

#[test]
fn tuples_and_powers_are_knobs_and_rewrite_to_valid_python() {
    let text = "TOTAL_BATCH_SIZE = 2**19  # tokens\nADAM_BETAS = (0.8, 0.95)\nX = 1\n";
    let knobs = discover("train.py", text).unwrap();
    let names: Vec<&str> = knobs.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(
        names,
        ["TOTAL_BATCH_SIZE", "ADAM_BETAS[0]", "ADAM_BETAS[1]", "X"]
    );
    assert_eq!(knobs[0].value, KnobValue::Int(1 << 19));
    assert_eq!(knobs[0].literal, "2**19");
    assert_eq!(knobs[2].literal, "0.95");
    assert!(
        matches!(knobs[2].domain, Domain::Float { hi, .. } if hi < 1.0),
        "a beta stays a fraction: {:?}",
        knobs[2].domain
    );
    let changes: Config = [
        ("TOTAL_BATCH_SIZE".to_string(), KnobValue::Int(1 << 20)),
        ("ADAM_BETAS[1]".to_string(), KnobValue::Float(0.99)),
        ("ADAM_BETAS[0]".to_string(), KnobValue::Float(0.9)),
    ]
    .into_iter()
    .collect();
    let out = apply("train.py", text, &changes).unwrap();
    assert_eq!(
        out,
        "TOTAL_BATCH_SIZE = 2**20  # tokens\nADAM_BETAS = (0.9, 0.99)\nX = 1\n"
    );
    let not_a_power: Config = [("TOTAL_BATCH_SIZE".to_string(), KnobValue::Int(3000))]
        .into_iter()
        .collect();
    assert!(apply("train.py", text, &not_a_power)
        .unwrap()
        .starts_with("TOTAL_BATCH_SIZE = 3000  #"));
    assert_eq!(
        apply("train.py", &out, &config_of(&discover("t", &out).unwrap())).unwrap(),
        out
    );
}

#[test]
fn a_change_of_literals_replays_onto_another_version_of_the_file() {
    let parent = "LR = 0.04  # hone: log 1e-4..1\nDEPTH = 8  # hone: int 2..16\nWD = 0.1\n";
    // One proposal changed LR; the best meanwhile changed DEPTH on the next line.
    let mine = "LR = 0.02  # hone: log 1e-4..1\nDEPTH = 8  # hone: int 2..16\nWD = 0.1\n";
    let best = "LR = 0.04  # hone: log 1e-4..1\nDEPTH = 12  # hone: int 2..16\nWD = 0.1\n";
    assert_eq!(
        replay_literals("t.py", parent, mine, best).as_deref(),
        Some("LR = 0.02  # hone: log 1e-4..1\nDEPTH = 12  # hone: int 2..16\nWD = 0.1\n")
    );
    // A change that is more than literals is not replayed.
    let more = "LR = 0.02  # hone: log 1e-4..1\nDEPTH = 8  # hone: int 2..16\nWD = 0.1\nX = 1\n";
    assert_eq!(replay_literals("t.py", parent, more, best), None);
    let comment = "LR = 0.04  # hone: log 1e-4..2\nDEPTH = 8  # hone: int 2..16\nWD = 0.1\n";
    assert_eq!(replay_literals("t.py", parent, comment, best), None);
}
