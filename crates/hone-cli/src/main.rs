//! The `hone` command: argument parsing, terminal output and Ctrl-C handling over the hone
//! library. Everything that decides anything lives in the library; each subcommand is a
//! module of `commands`, and `error` says which exit status a failure gets.

// No function of the shipped code over 80 lines (clippy.toml sets the count); tests and
// examples are left out.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

/// `println!` that never panics: a closed pipe (`hone run | head`) must not kill a loop, and
/// `hone log | head` should end quietly. Control characters are shown escaped
/// (`output::terminal_safe`): what it prints carries file names, reasons, logs and diffs an
/// agent wrote, and no escape sequence of theirs may reach the terminal.
macro_rules! out {
    () => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout());
    }};
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($arg)*);
        let _ = writeln!(std::io::stdout(), "{}", crate::output::terminal_safe(&text));
    }};
}

/// `eprintln!` that never panics, with control characters escaped like `out!`.
macro_rules! err {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($arg)*);
        let _ = writeln!(std::io::stderr(), "{}", crate::output::terminal_safe(&text));
    }};
}

mod commands;
mod error;
mod output;
mod progress;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use commands::{
    bench, daemon, demo, finalize, init, log, mech, report, run, serve, show, status, worker, Here,
};
use error::{CliError, CliResult};

#[derive(Parser)]
#[command(
    name = "hone",
    version,
    about = "Autonomous experiment loops that cannot cheat their verifier"
)]
struct Cli {
    /// Run as if started in this directory.
    #[arg(short = 'C', global = true, value_name = "DIR")]
    chdir: Option<PathBuf>,
    /// The spec file (default: hone.toml at the repository's top level).
    #[arg(long, global = true, value_name = "FILE")]
    spec: Option<PathBuf>,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Write hone.toml and program.md into this repository and list the knobs found.
    Init(init::InitArgs),
    /// Run the loop (resumes an unfinished run; Ctrl-C once stops after the current experiment).
    Run(run::RunArgs),
    /// Best so far, counts by status, budgets used and left.
    Status(status::StatusArgs),
    /// One row per experiment.
    Log(log::LogArgs),
    /// One experiment: description, decision, metrics, diff from its parent, log tail.
    Show(show::ShowArgs),
    /// The outer loop's mechanisms: what each did over a run.
    Mech(mech::MechArgs),
    /// Write a report: progress plot (SVG), markdown summary and a self-contained HTML page.
    Report(report::ReportArgs),
    /// Verify candidates for runs on other hosts: take jobs from the PostgreSQL store's queue,
    /// check each candidate out of the shared git remote, run the verifier, post the result.
    /// Jobs and results are signed with $HONE_QUEUE_KEY, the same on the coordinator.
    Worker(worker::WorkerArgs),
    /// Serve the live dashboard: runs, progress plot, experiment table, diffs and logs.
    Serve(serve::ServeArgs),
    /// Build a clean review branch from a run's kept experiments; with --pr, push it and open a
    /// pull request on GitHub.
    Finalize(finalize::FinalizeArgs),
    /// Run [[schedule]] entries and the signed webhook (POST /api/trigger), without the web
    /// pages; Ctrl-C stops it.
    Daemon(daemon::DaemonArgs),
    /// The ablation benchmark of the outer loop: arms x problems x paired seeds, at the same
    /// number of verifications; writes runs.json, results.json and results.md.
    Bench(bench::BenchArgs),
    /// Run the whole thing on the bundled example (a character-level language model), offline.
    Demo(demo::DemoArgs),
}

/// 0 when the command succeeded, else the error's kind decides (see `error::Kind`).
fn main() -> ExitCode {
    map_large_buffers();
    // Before any thread: what hone was started with (API keys, the store's URL) out of the
    // sight of the processes it starts, through /proc.
    // SAFETY: no other thread exists yet.
    unsafe {
        hone::exec::conceal_self();
    }
    let cli = Cli::parse();
    let spec_file = cli.spec.clone();
    match dispatch(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let e = e.with_disk_hint();
            let said = e.to_string();
            err!(
                "error: {}",
                output::naming_spec(&said, spec_file.as_deref())
            );
            ExitCode::from(e.kind.exit_code())
        }
    }
}

/// Buffers of 256 KiB and more always get a mapping of their own, given back when freed. By
/// default glibc raises that threshold to the largest buffer freed so far and serves the next
/// ones from the heap: a long run's ref listing and hash tables, made again as they grow, then
/// leave holes in the heap that its peak memory keeps (bench/RESULTS.md, twenty-first stop:
/// 22.3 against 20.7 MB at 50,000 experiments of the soak).
fn map_large_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt sets one of the allocator's parameters; it is called before any thread
    // exists, and any value is valid for this one.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 10);
    }
}

fn dispatch(cli: Cli) -> CliResult {
    let cwd = match cli.chdir {
        Some(d) if !d.is_dir() => {
            return Err(CliError::usage(format!(
                "-C {}: no such directory",
                d.display()
            )))
        }
        Some(d) => d,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let here = Here::new(cwd, cli.spec);
    match cli.command {
        Cmd::Init(a) => init::run(&here, a),
        Cmd::Run(a) => run::run(&here, a),
        Cmd::Status(a) => status::run(&here, a),
        Cmd::Log(a) => log::run(&here, a),
        Cmd::Show(a) => show::run(&here, a),
        Cmd::Mech(a) => mech::run(&here, a),
        Cmd::Report(a) => report::run(&here, a),
        Cmd::Worker(a) => worker::run(&here, a),
        Cmd::Serve(a) => serve::run(&here, a),
        Cmd::Finalize(a) => finalize::run(&here, a),
        Cmd::Daemon(a) => daemon::run(&here, a),
        Cmd::Bench(a) => bench::run(&here, a),
        Cmd::Demo(a) => demo::run(a),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// Bad input never panics, at the first step: 10,000 generated command lines (the
    /// subcommands and flags read from the real definition, so a new flag is covered at once;
    /// values wrong and extreme) parse or fail with a usage error (exit 2), never a panic.
    /// Running them is the job of the CLI fuzz test (`tests/cli/fuzz.rs`).
    #[test]
    fn generated_command_lines_parse_or_fail_without_a_panic() {
        const VALUES: &[&str] = &[
            "1e20",
            "-1",
            "0",
            "1",
            "nan",
            "inf",
            "18446744073709551616",
            "../x",
            "",
            "é🦀",
            "\u{1b}[31m",
            "--",
            "1e20s",
            "18446744073709551615s",
            "1h",
            "x,y,,z",
            "/dev/zero",
            "knobs",
            "claude",
            "99999999999999999999h",
            "-n",
        ];
        let cmd = Cli::command();
        let subs: Vec<&clap::Command> = cmd.get_subcommands().collect();
        let cases: u64 = std::env::var("HONE_FUZZ_ARGS_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10_000);
        let mut state = 0x5eed_u64;
        let mut draw = |n: usize| (hone::util::splitmix64(&mut state) % n as u64) as usize;
        let (mut parsed, mut refused) = (0u64, 0u64);
        for _ in 0..cases {
            let mut argv = vec!["hone".to_string()];
            let sub = subs[draw(subs.len())];
            argv.push(sub.get_name().to_string());
            let args: Vec<&clap::Arg> = sub.get_arguments().chain(cmd.get_arguments()).collect();
            for _ in 0..draw(5) {
                match draw(4) {
                    0 => argv.push(VALUES[draw(VALUES.len())].to_string()),
                    _ if !args.is_empty() => {
                        let a = args[draw(args.len())];
                        let flag = a
                            .get_long()
                            .map(|l| format!("--{l}"))
                            .or_else(|| a.get_short().map(|c| format!("-{c}")));
                        if let Some(f) = flag {
                            argv.push(f);
                        }
                        argv.push(VALUES[draw(VALUES.len())].to_string());
                    }
                    _ => {}
                }
            }
            let shown = argv.join(" ");
            let result = std::panic::catch_unwind(|| Cli::try_parse_from(&argv).map(|_| ()));
            match result {
                Err(_) => panic!("parsing panicked on: {shown}"),
                Ok(Ok(())) => parsed += 1,
                Ok(Err(e)) => {
                    assert!(
                        matches!(e.exit_code(), 0 | 2),
                        "exit {} on: {shown}",
                        e.exit_code()
                    );
                    refused += 1;
                }
            }
        }
        assert_eq!(parsed + refused, cases);
        assert!(
            parsed > 0 && refused > 0,
            "{parsed} parsed, {refused} refused"
        );
    }
}
