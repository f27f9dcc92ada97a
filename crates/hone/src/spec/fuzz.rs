//! Bad input never panics: a seeded fuzz test that feeds generated hone.toml files to
//! [`Spec::load`] (the function every CLI command loads a spec with) and asserts that each is
//! either a spec or a [`SpecError`] with a line number, never a panic.
//!
//! The generator mutates valid specs (the design example, a spec setting a key of every
//! section, the smallest one): it deletes, duplicates and swaps lines, replaces values with
//! extreme and wrong ones (`1e300`, `nan`, `18446744073709551616`, `"1e20s"`, arrays where
//! strings go, control characters, very long strings...), inserts known and unknown keys and
//! sections, flips bytes (invalid UTF-8 included) and cuts the text anywhere; one case in ten
//! is random bytes. It is seeded from `util::splitmix64`, so a failure is reproducible: the
//! panic report carries the case's seed and text.
//!
//! CI runs [`DEFAULT_CASES`] cases; for a longer local run set `HONE_FUZZ_CASES` (and
//! `HONE_FUZZ_SEED` for another stream):
//! `HONE_FUZZ_CASES=1000000 cargo test --release -p hone --lib spec::fuzz`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use super::tests::{EVERY, GOOD, MIN};
use super::{parse_duration, parse_size, Spec, SpecError};
use crate::util::Draw;

/// Cases per CI run.
const DEFAULT_CASES: u64 = 10_000;

/// Values that have broken or could break a reader: extremes, wrong types, odd text.
const VALUES: &[&str] = &[
    "1e300",
    "-1e300",
    "1e-300",
    "-1",
    "0",
    "-0.0",
    "nan",
    "+nan",
    "-nan",
    "inf",
    "-inf",
    "\"\"",
    "\" \"",
    "18446744073709551616",
    "18446744073709551615",
    "9223372036854775807",
    "-9223372036854775808",
    "\"1e20s\"",
    "\"1e20\"",
    "\"18446744073709551615s\"",
    "\"99999999999999999999h\"",
    "\"1.5.5G\"",
    "\"99999999999999999999G\"",
    "\"-1s\"",
    "\"0s\"",
    "\"nan\"",
    "\"inf\"",
    "\"1h-30m\"",
    "\"ms\"",
    "\"8 G\"",
    "\"é🦀\"",
    "\"\\u0000\"",
    "\"\\u001b[31mred\"",
    "\"\\u202eevil\"",
    "\"../x\"",
    "\"/etc/passwd\"",
    "\"*\"",
    "\"**\"",
    "\"[\"",
    "\"\\\\\"",
    "\"a b\"",
    "\"10x\"",
    "\"x<=\"",
    "\"m <= nan\"",
    "\"(\"",
    "\"()\"",
    "\"http://\"",
    "\"postgres://\"",
    "\"@daily\"",
    "\"* * * * * * * *\"",
    "[]",
    "[\"\"]",
    "[1, 2]",
    "[\"a\", 1]",
    "[[1]]",
    "[{ a = 1 }]",
    "{}",
    "{ a = 1 }",
    "{ A = \"\" }",
    "true",
    "false",
    "1979-05-27T07:32:00Z",
    "07:32:00",
    "0x10",
    "1_000",
    "\"\"\"\nmulti\nline\"\"\"",
];

/// Sections and headers, known and not.
const HEADERS: &[&str] = &[
    "[loop]",
    "[verify]",
    "[verify.holdout]",
    "[agent]",
    "[stop]",
    "[sandbox]",
    "[review]",
    "[outer]",
    "[exec]",
    "[store]",
    "[trigger]",
    "[[notify]]",
    "[[schedule]]",
    "[[verify]]",
    "[[loop]]",
    "[loop.x]",
    "[zzz]",
    "[]",
    "[\"é\"]",
];

/// Keys to insert: every section's, the entries', and some that exist nowhere.
fn keys() -> Vec<&'static str> {
    let mut keys: Vec<&str> = [
        super::loop_::KEYS,
        super::verify::KEYS,
        super::agent::KEYS,
        super::stop::KEYS,
        super::sandbox::KEYS,
        super::review::KEYS,
        super::exec::KEYS,
        super::exec::STORE_KEYS,
        super::outer::KEYS,
    ]
    .concat();
    keys.extend([
        "url",
        "url_env",
        "on",
        "format",
        "retries",
        "backoff",
        "cron",
        "tag",
        "time",
        "seed",
        "catch_up",
        "finalize",
        "pr",
        "squash",
        "secret_env",
        "hide",
        "partition",
        "gres",
        "cpus",
        "mem",
        "extra_args",
        "price_in_per_mtok",
        "model",
        "base_url",
        "zzz",
        "\"\"",
        "\"a.b\"",
        "é",
    ]);
    keys
}

/// A value: mostly from [`VALUES`], sometimes very long or random.
fn value(d: &mut Draw) -> String {
    match d.below(40) {
        0 => format!("\"{}\"", "a".repeat(1 + d.below(200_000))),
        1 => format!("[{}]", vec!["\"*a\""; 1 + d.below(3000)].join(",")),
        2 => format!("\"{}\"", "*a".repeat(1 + d.below(3000))),
        3..=6 => format!("{}", d.next_u64() as i64),
        7..=10 => format!("{:e}", f64::from_bits(d.next_u64())),
        _ => d.pick(VALUES).to_string(),
    }
}

/// One generated spec file (bytes: it may not be UTF-8).
fn generate(seed: u64) -> Vec<u8> {
    let mut d = Draw(seed);
    if d.below(10) == 0 {
        let n = d.below(400);
        return (0..n).map(|_| d.next_u64() as u8).collect();
    }
    let base = [GOOD, EVERY, MIN][d.below(3)];
    let mut lines: Vec<Vec<u8>> = base.lines().map(|l| l.as_bytes().to_vec()).collect();
    let keys = keys();
    for _ in 0..1 + d.below(4) {
        let n = lines.len();
        let at = d.below(n + 1).min(n);
        match d.below(10) {
            0 if n > 0 => {
                lines.remove(at.min(n - 1));
            }
            1 if n > 0 => {
                let l = lines[at.min(n - 1)].clone();
                lines.insert(at, l);
            }
            2 if n > 1 => {
                let j = d.below(n);
                lines.swap(at.min(n - 1), j);
            }
            3 | 4 if n > 0 => {
                // A value replaced where there is one (else a key = value inserted).
                let i = at.min(n - 1);
                let v = value(&mut d);
                match lines[i].iter().position(|b| *b == b'=') {
                    Some(eq) => {
                        lines[i].truncate(eq + 1);
                        lines[i].extend_from_slice(format!(" {v}").as_bytes());
                    }
                    None => lines.insert(i, format!("{} = {v}", d.pick(&keys)).into_bytes()),
                }
            }
            5 => {
                let l = format!("{} = {}", d.pick(&keys), value(&mut d));
                lines.insert(at, l.into_bytes());
            }
            6 => lines.insert(at, d.pick(HEADERS).as_bytes().to_vec()),
            7 if n > 0 => {
                // A byte flipped: control characters and invalid UTF-8 included.
                let i = at.min(n - 1);
                let b = d.next_u64() as u8;
                match lines[i].len() {
                    0 => lines[i].push(b),
                    len => {
                        let j = d.below(len);
                        lines[i][j] = b;
                    }
                }
            }
            8 => {
                let l = ["\u{0}", "\u{1b}[2J", "\u{feff}", "\r", "\t", "\u{7f}", "\\"];
                let s = format!("{} = \"{}\"", d.pick(&keys), d.pick(&l));
                lines.insert(at, s.into_bytes());
            }
            _ => {
                // The text cut anywhere (later lines dropped).
                let cut = d.below(n + 1);
                lines.truncate(cut);
                if let Some(last) = lines.last_mut() {
                    let keep = d.below(last.len() + 1);
                    last.truncate(keep);
                }
            }
        }
    }
    lines.join(&b'\n')
}

/// Whether the case loaded (`Ok(true)`), was a spec error with its line (`Ok(false)`), or
/// what it did wrong: a panic, or an error without a line.
fn check(path: &Path, bytes: &[u8]) -> Result<bool, String> {
    std::fs::write(path, bytes).map_err(|e| format!("cannot write the case: {e}"))?;
    let result = catch_unwind(AssertUnwindSafe(|| Spec::load(path)));
    match result {
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!("panicked: {what}"))
        }
        Ok(Ok(_)) => Ok(true),
        Ok(Err(e)) => lineless(&e, bytes).map_or(Ok(false), Err),
    }
}

/// An error about the text must name a line of it.
fn lineless(e: &SpecError, bytes: &[u8]) -> Option<String> {
    let lines = 1 + bytes.iter().filter(|b| **b == b'\n').count();
    if e.line == 0 || e.line > lines + 1 {
        return Some(format!("error without a line of the text: {e}"));
    }
    if !e.to_string().contains(&format!(":{}:", e.line)) {
        return Some(format!("the message does not show its line: {e}"));
    }
    None
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn generated_specs_never_panic_and_every_error_has_a_line() {
    let cases = env_u64("HONE_FUZZ_CASES", DEFAULT_CASES);
    let seed = env_u64("HONE_FUZZ_SEED", 0x686f_6e65);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hone.toml");
    let mut failures = Vec::new();
    let (mut valid, mut invalid) = (0u64, 0u64);
    for case in 0..cases {
        let case_seed = seed ^ case.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let bytes = generate(case_seed);
        match check(&path, &bytes) {
            Err(problem) => failures.push(format!(
                "case {case} (seed {case_seed:#x}): {problem}\n--- input ---\n{}\n",
                String::from_utf8_lossy(&bytes[..bytes.len().min(2000)])
            )),
            Ok(true) => valid += 1,
            Ok(false) => invalid += 1,
        }
        if failures.len() >= 5 {
            break;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The generator must exercise both sides, not only the error paths.
    assert!(valid > cases / 50, "{valid} valid of {cases}");
    assert!(invalid > cases / 2, "{invalid} invalid of {cases}");
    eprintln!("spec fuzz: {cases} cases, {valid} valid, {invalid} errors with a line, 0 panics");
}

#[test]
fn generated_durations_and_sizes_never_panic() {
    let cases = env_u64("HONE_FUZZ_CASES", DEFAULT_CASES);
    let mut d = Draw(7);
    let units = [
        "", "s", "ms", "m", "h", "d", "K", "M", "G", "GiB", "e20", ".", "-", " ",
    ];
    for _ in 0..cases {
        let mut s = String::new();
        for _ in 0..1 + d.below(4) {
            match d.below(4) {
                0 => s.push_str(&format!("{}", d.next_u64())),
                1 => s.push_str(&format!("{:e}", f64::from_bits(d.next_u64()))),
                2 => s.push_str(d.pick(&units)),
                _ => s.push_str(&format!("{}", d.below(100))),
            }
        }
        let r = catch_unwind(|| (parse_duration(&s).is_ok(), parse_size(&s).is_ok()));
        assert!(r.is_ok(), "`{s}` panicked");
    }
}

#[test]
fn the_fuzzer_keeps_its_regression_cases() {
    // Inputs that found problems, kept: each must be a spec error at its line.
    for text in [
        "[loop]\neditable = [\"a.py\"]\n[verify]\ncommand = \"x\"\nmetric = \"10x\"\n",
        &format!("{MIN}[stop]\ntarget = nan\n"),
        &format!("{MIN}[stop]\nmax_time = 1e300\n"),
    ] {
        let e = super::tests::err(text);
        assert!(e.line > 0, "{e}");
    }
}
