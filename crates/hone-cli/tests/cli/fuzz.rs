//! Bad input never panics, end to end: the real `hone` binary on generated command lines
//! (random subcommands, flags and values such as `--time 1e20`, `-n -1`, `--tag ../x`) and
//! generated spec files (mutated from a valid one, or a device, a directory, a missing file).
//! Every command must exit by itself with 0, 1 or 2, print no panic, and every exit-2 error
//! about a spec file it could read must name a line.
//!
//! CI runs [`DEFAULT_CASES`] commands (the in-process spec fuzz in the library feeds 10,000
//! texts); for a longer local run: `HONE_FUZZ_CLI_CASES=5000 cargo test -p hone-cli --test cli
//! fuzz` (`HONE_FUZZ_SEED` picks another stream).

use hone::util::Draw;

use crate::support::*;

/// Commands per CI run.
const DEFAULT_CASES: u64 = 300;

/// Argument values, wrong and extreme ones first.
const ARGS: &[&str] = &[
    "1e20",
    "-1",
    "0",
    "1",
    "2",
    "nan",
    "inf",
    "18446744073709551616",
    "18446744073709551615",
    "../x",
    "a b",
    "",
    "é🦀",
    "\u{1b}[31m",
    "--",
    "-n",
    "1e20s",
    "\"1e20\"",
    "18446744073709551615s",
    "99999999999999999999h",
    "1h",
    "0s",
    "1s",
    "x/../../y",
    "refs/heads/main",
    "/dev/zero",
    "knobs",
    "command",
    "claude",
];

/// Subcommands and the flags each takes (`=` marks one with a value). Commands that serve
/// forever (`serve`, `daemon`, `worker`) or download nothing but take minutes (`demo`,
/// `bench`) are left out; `finalize --pr` would reach for GitHub.
const COMMANDS: &[(&str, &[&str])] = &[
    (
        "run",
        &[
            "--tag=",
            "-n=",
            "--max-experiments=",
            "--time=",
            "--agent=",
            "--seed=",
            "--new",
            "--workers=",
        ],
    ),
    ("status", &["--run=", "--json"]),
    ("log", &["--run=", "--json", "--tsv"]),
    ("show", &["--run=", "--tail="]),
    ("mech", &["--run=", "--json"]),
    ("report", &["--run=", "--out="]),
    ("finalize", &["--run=", "--squash", "--branch=", "--base="]),
    ("init", &["--editable=", "--command=", "--metric="]),
    ("nonsense", &["--x="]),
];

/// Spec values that break readers (no agent kind or backend that would reach a network).
const VALUES: &[&str] = &[
    "1e300",
    "-1",
    "0",
    "nan",
    "inf",
    "\"\"",
    "18446744073709551616",
    "\"1e20s\"",
    "\"1e20\"",
    "\"18446744073709551615s\"",
    "\"10x\"",
    "\"é🦀\"",
    "\"\\u0000\"",
    "[]",
    "[1]",
    "{}",
    "true",
    "\"../x\"",
    "\"/tmp/x\"",
    "\"*\"",
    "\"**\"",
    "\"-1s\"",
    "\"99999999999999999999G\"",
];

const KEYS: &[&str] = &[
    "editable",
    "protected",
    "pinned",
    "notes",
    "program",
    "command",
    "metric",
    "timeout",
    "kill_grace",
    "min_delta",
    "constraints",
    "max_log_bytes",
    "baseline_repeats",
    "noise_k",
    "confirm",
    "max_experiments",
    "max_time",
    "patience",
    "target",
    "max_cost_usd",
    "memory",
    "cpu_time",
    "max_output",
    "max_processes",
    "max_diff_lines",
    "forbid",
    "workers",
    "hide",
    "segment",
    "zzz",
];

/// A spec text: `base` with one to three lines changed (bytes: it may not be UTF-8).
fn mutate(d: &mut Draw, base: &str) -> Vec<u8> {
    let mut lines: Vec<Vec<u8>> = base.lines().map(|l| l.as_bytes().to_vec()).collect();
    for _ in 0..1 + d.below(3) {
        let at = d.below(lines.len());
        match d.below(5) {
            0 => {
                lines.remove(at);
            }
            1 => {
                let b = d.next_u64() as u8;
                let line = &mut lines[at];
                let j = d.below(line.len());
                match line.get_mut(j) {
                    Some(c) => *c = b,
                    None => line.push(b),
                }
            }
            2 => {
                let section = d.pick(&["[loop]", "[verify]", "[stop]", "[sandbox]", "[review]"]);
                let l = format!("{section}\n{} = {}", d.pick(KEYS), d.pick(VALUES));
                lines.push(l.into_bytes());
            }
            _ => match lines[at].iter().position(|b| *b == b'=') {
                Some(eq) => {
                    lines[at].truncate(eq + 1);
                    lines[at].extend_from_slice(format!(" {}", d.pick(VALUES)).as_bytes());
                }
                None => lines.insert(
                    at,
                    format!("{} = {}", d.pick(KEYS), d.pick(VALUES)).into_bytes(),
                ),
            },
        }
    }
    lines.join(&b'\n')
}

#[test]
fn generated_command_lines_and_specs_exit_0_1_or_2_without_a_panic() {
    let cases = std::env::var("HONE_FUZZ_CLI_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    let seed = std::env::var("HONE_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x0063_6c69_u64);
    let r = Repo::scored(2, &scores(&[4]));
    let base = std::fs::read_to_string(r.dir.join("hone.toml")).unwrap();
    let generated = r.tmp_dir().join("case.toml");
    let mut d = Draw(seed);
    let mut failures = Vec::new();
    let mut codes = [0u64; 3];
    for case in 0..cases {
        let mut args: Vec<String> = Vec::new();
        // The spec: generated, the valid one, or a path that is no spec file.
        let mut readable_spec = None;
        match d.below(6) {
            0..=2 => {
                put(&generated, mutate(&mut d, &base));
                readable_spec = Some(generated.display().to_string());
            }
            3 => {
                put(&generated, &base);
                readable_spec = Some(generated.display().to_string());
            }
            _ => {
                let other = ["/dev/zero", "/", "/nonexistent/hone.toml"][d.below(3)];
                args.extend(["--spec".to_string(), other.to_string()]);
            }
        }
        if let Some(p) = &readable_spec {
            args.extend(["--spec".to_string(), p.clone()]);
        }
        // `run` a quarter of the time (it runs experiments); the rest are quick.
        let (cmd, flags) = if d.below(4) == 0 {
            COMMANDS[0]
        } else {
            COMMANDS[1 + d.below(COMMANDS.len() - 1)]
        };
        args.push(cmd.to_string());
        if cmd == "show" && d.below(2) == 0 {
            args.push(d.pick(ARGS).to_string());
        }
        for _ in 0..d.below(4) {
            let flag = d.pick(flags);
            match flag.strip_suffix('=') {
                Some(name) => {
                    args.push(name.to_string());
                    args.push(d.pick(ARGS).to_string());
                }
                None => args.push(flag.to_string()),
            }
        }
        if cmd == "run" && !args.iter().any(|a| a == "-n" || a == "--max-experiments") {
            args.extend(["-n".to_string(), "2".to_string()]);
        }
        let out = match run_bounded(&r.dir, &args) {
            Ok(out) => out,
            Err(e) => {
                failures.push(format!("case {case}: hone {args:?}: {e}"));
                continue;
            }
        };
        let stderr = String::from_utf8_lossy(&out.stderr);
        let code = out.status.code();
        match code {
            Some(c @ 0..=2) => codes[c as usize] += 1,
            _ => failures.push(format!(
                "case {case}: hone {args:?}: exit {code:?}: {stderr}"
            )),
        }
        if stderr.contains("panicked") {
            failures.push(format!("case {case}: hone {args:?} panicked: {stderr}"));
        }
        // An error about a spec file hone could read names its line: `error: FILE:LINE:`.
        if let (Some(2), Some(p)) = (code, &readable_spec) {
            if let Some(rest) = stderr.strip_prefix(&format!("error: {p}")) {
                let lined =
                    rest.starts_with(':') && rest[1..].starts_with(|c: char| c.is_ascii_digit());
                if !lined {
                    failures.push(format!(
                        "case {case}: hone {args:?}: a spec error without a line: {stderr}\n--- spec ---\n{}",
                        String::from_utf8_lossy(&std::fs::read(&generated).unwrap())
                    ));
                }
            }
        }
        if failures.len() >= 5 {
            break;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // The generator reaches every exit status, not only usage errors.
    assert!(codes.iter().all(|c| *c > 0), "exit 0/1/2 counts: {codes:?}");
    eprintln!("cli fuzz: {cases} commands, exits 0/1/2: {codes:?}, 0 panics, 0 hangs");
}
