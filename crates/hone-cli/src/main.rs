//! The `hone` command: argument parsing, terminal output and Ctrl-C handling over the hone
//! library. Everything that decides anything lives in the library.

/// `println!` that never panics: a closed pipe (`hone run | head`) must not kill a loop, and
/// `hone log | head` should end quietly.
macro_rules! out {
    () => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout());
    }};
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// `eprintln!` that never panics.
macro_rules! err {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod output;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use clap::{Parser, Subcommand};

use hone::engine::{self, RunOptions, StatePaths};
use hone::spec::{self, AgentKind, Spec};
use hone::store::Store;
use hone::workspace::Git;

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
    Init {
        /// Files (globs) the loop may edit; default: the tracked files that hold knobs.
        #[arg(long, value_delimiter = ',')]
        editable: Vec<String>,
        /// The verifier command.
        #[arg(long)]
        command: Option<String>,
        /// The objective's name, as the command prints it.
        #[arg(long)]
        metric: Option<String>,
    },
    /// Run the loop (resumes an unfinished run; Ctrl-C once stops after the current experiment).
    Run {
        /// The run's tag (branch hone/<tag>); an existing tag is resumed.
        #[arg(long)]
        tag: Option<String>,
        /// Stop after this many experiments in all (the baseline counts).
        #[arg(short = 'n', long = "max-experiments", value_parser = clap::value_parser!(u64).range(1..))]
        max_experiments: Option<u64>,
        /// Stop after this much loop time, e.g. 30m or 8h (summed over resumes).
        #[arg(long, value_parser = parse_positive_duration)]
        time: Option<Duration>,
        /// The proposer: knobs or command.
        #[arg(long)]
        agent: Option<String>,
        /// Seed for the built-in optimizer (the same seed gives the same candidates).
        #[arg(long)]
        seed: Option<u64>,
        /// Start a new run even if the last one could be resumed.
        #[arg(long)]
        new: bool,
        /// Verify this many experiments at once (overrides [exec] workers; each needs a slot
        /// when [exec] slots is set).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=256))]
        workers: Option<u64>,
    },
    /// Best so far, counts by status, budgets used and left.
    Status {
        /// The run's tag (default: the latest run).
        #[arg(long)]
        run: Option<String>,
        /// Machine-readable summary.
        #[arg(long)]
        json: bool,
    },
    /// One row per experiment.
    Log {
        /// The run's tag (default: the latest run).
        #[arg(long)]
        run: Option<String>,
        /// JSON lines, one object per experiment.
        #[arg(long, conflicts_with = "tsv")]
        json: bool,
        /// autoresearch's results.tsv layout: commit, metric, status, description.
        #[arg(long)]
        tsv: bool,
    },
    /// One experiment: description, decision, metrics, diff from its parent, log tail.
    Show {
        /// The experiment's number (0 is the baseline).
        n: u64,
        /// The run's tag (default: the latest run).
        #[arg(long)]
        run: Option<String>,
        /// Lines of the verifier's log to print.
        #[arg(long, default_value_t = 30)]
        tail: usize,
    },
    /// The outer loop's mechanisms: what each did over a run.
    Mech {
        #[command(subcommand)]
        command: MechCmd,
    },
    /// Write a report: progress plot (SVG), markdown summary and a self-contained HTML page.
    Report {
        /// The run's tag (default: the latest run).
        #[arg(long)]
        run: Option<String>,
        /// Where to write (default: .hone/reports/<tag>).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Verify candidates for runs on other hosts: take jobs from the PostgreSQL store's queue,
    /// check each candidate out of the shared git remote, run the verifier, post the result.
    Worker {
        /// The PostgreSQL store, as in [store] url (postgres://user@host:port/database).
        #[arg(long, value_name = "URL")]
        store: String,
        /// The shared git remote the coordinator pushes candidates to (URL or path).
        #[arg(long, value_name = "REMOTE")]
        repo: String,
        /// The worker's directory (a clone, a worktree, logs); default: ./hone-worker-<slot>.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// This slot's name, shown by `hone status` (say, the GPU it owns).
        #[arg(long, default_value = "0")]
        slot: String,
        /// A variable for every verifier of this slot, NAME=VALUE (repeatable), e.g.
        /// CUDA_VISIBLE_DEVICES=3.
        #[arg(long = "env", value_name = "NAME=VALUE")]
        env: Vec<String>,
        /// How long a claim lasts without a heartbeat (a dead worker's job goes to another
        /// worker after it).
        #[arg(long, default_value = "30s", value_parser = parse_positive_duration)]
        lease: Duration,
        /// Exit after this many verifications.
        #[arg(long)]
        max_jobs: Option<u64>,
    },
    /// Serve the live dashboard: runs, progress plot, experiment table, diffs and logs.
    Serve {
        /// Port to listen on (0: any free port).
        #[arg(long, default_value_t = hone_serve::DEFAULT_PORT)]
        port: u16,
        /// Address to listen on; anything but loopback needs a token in HONE_TOKEN.
        #[arg(long, default_value = "127.0.0.1")]
        bind: std::net::IpAddr,
    },
    /// Build a clean review branch from a run's kept experiments; with --pr, push it and open a
    /// pull request on GitHub.
    Finalize {
        /// The run's tag (default: the latest run).
        #[arg(long)]
        run: Option<String>,
        /// One commit with every kept change, instead of one commit per keep.
        #[arg(long)]
        squash: bool,
        /// Push the branch and open a pull request (needs GITHUB_TOKEN; GITHUB_API_URL for
        /// GitHub Enterprise).
        #[arg(long)]
        pr: bool,
        /// The branch to write (default: hone/<tag>-final).
        #[arg(long)]
        branch: Option<String>,
        /// The git remote to push to.
        #[arg(long, default_value = "origin")]
        remote: String,
        /// The branch the pull request merges into (default: the current branch).
        #[arg(long)]
        base: Option<String>,
    },
    /// Run [[schedule]] entries and the signed webhook (POST /api/trigger), without the web
    /// pages; Ctrl-C stops it.
    Daemon {
        /// The port to listen on (0: any free port, printed at start).
        #[arg(long, default_value_t = 8750)]
        port: u16,
        /// The address to listen on; anything but loopback needs HONE_TOKEN.
        #[arg(long, default_value = "127.0.0.1")]
        bind: std::net::IpAddr,
    },
    /// The ablation benchmark of the outer loop: arms x problems x paired seeds, at the same
    /// number of verifications; writes runs.json, results.json and results.md.
    Bench {
        /// The reduced suite for CI: the quick problems, arms A and C, 3 repeats, budget 20.
        #[arg(long)]
        quick: bool,
        /// Problems to run, comma-separated (default: the whole suite).
        #[arg(long, value_delimiter = ',')]
        problems: Vec<String>,
        /// Arms, comma-separated: A, Ap (A′), B, C, D, or one mechanism's name.
        #[arg(long, value_delimiter = ',')]
        arms: Vec<String>,
        /// Seeds 1..=N, shared by every arm (default 10; 3 with --quick).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        repeats: Option<u64>,
        /// Budgets in verifications, comma-separated; a run gets the largest (default 20,50,100).
        #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..))]
        budget: Vec<u64>,
        /// Output directory (default bench/out, or bench/out-quick); finished runs in its
        /// runs.json are not run again.
        #[arg(long)]
        out: Option<PathBuf>,
        /// The suite's manifest (default: bench/problems/manifest.toml above the current
        /// directory).
        #[arg(long)]
        manifest: Option<PathBuf>,
        /// Run nothing: report what OUT/runs.json and the --with files hold.
        #[arg(long)]
        report_only: bool,
        /// A runs.json from elsewhere (Optuna's baselines) to report side by side; repeatable.
        #[arg(long)]
        with: Vec<PathBuf>,
    },
    /// Run the whole thing on the bundled example (a character-level language model), offline.
    Demo {
        /// Where to put the example (must be empty or absent); kept afterwards.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Keep the temporary directory afterwards.
        #[arg(long)]
        keep: bool,
        /// Experiments in all (default: the example's 25).
        #[arg(short = 'n', long = "max-experiments", value_parser = clap::value_parser!(u64).range(1..))]
        max_experiments: Option<u64>,
        /// Seed for the knobs optimizer.
        #[arg(long)]
        seed: Option<u64>,
    },
}

#[derive(Subcommand)]
enum MechCmd {
    /// Per mechanism: calls per hook, guidance given, proposals rejected or modified, keeps
    /// after its guidance; a mechanism that never changed anything over its probation is inert.
    Stats {
        /// The run's tag (default: the latest run).
        #[arg(long)]
        run: Option<String>,
        /// Machine-readable, one object per mechanism.
        #[arg(long)]
        json: bool,
    },
}

fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    match spec::parse_duration(s)? {
        d if d.is_zero() => Err("must be more than zero".into()),
        d => Ok(d),
    }
}

/// A failure with the exit status it maps to.
struct Failure {
    code: u8,
    error: anyhow::Error,
}

impl From<anyhow::Error> for Failure {
    fn from(error: anyhow::Error) -> Self {
        Failure { code: 1, error }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match real_main(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            err!("error: {:#}", f.error);
            ExitCode::from(f.code)
        }
    }
}

fn real_main(cli: Cli) -> Result<(), Failure> {
    let cwd = match &cli.chdir {
        Some(d) if !d.is_dir() => {
            return Err(Failure {
                code: 2,
                error: anyhow!("-C {}: no such directory", d.display()),
            })
        }
        Some(d) => d.clone(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    match cli.command {
        Cmd::Init {
            editable,
            command,
            metric,
        } => init(&cwd, editable, command, metric),
        Cmd::Run {
            tag,
            max_experiments,
            time,
            agent,
            seed,
            new,
            workers,
        } => {
            if let Some(t) = &tag {
                engine::validate_tag(t).map_err(|e| Failure {
                    code: 2,
                    error: anyhow!(e),
                })?;
            }
            let git = Git::discover(&cwd).map_err(anyhow::Error::from)?;
            let mut spec = load_spec(git.root(), cli.spec.as_deref())?;
            if let Some(a) = agent {
                spec.agent.kind = AgentKind::parse(&a).ok_or_else(|| Failure {
                    code: 2,
                    error: anyhow!(
                        "--agent {a}: expected one of {}",
                        AgentKind::names().join(", ")
                    ),
                })?;
                if spec.agent.kind == AgentKind::Command && spec.agent.command.is_none() {
                    return Err(Failure {
                        code: 2,
                        error: anyhow!("--agent command needs [agent] command in hone.toml"),
                    });
                }
            }
            if let Some(w) = workers {
                // Bounded by the argument's parser.
                spec.exec.workers = w as usize;
                spec.exec
                    .check_workers(spec.exec.workers)
                    .map_err(|e| Failure {
                        code: 2,
                        error: anyhow!("--workers {w}: {e}"),
                    })?;
            }
            let opts = RunOptions {
                tag,
                max_experiments,
                max_time: time,
                seed,
                new_run: new,
            };
            run_loop(git.root(), &spec, &opts)
        }
        Cmd::Status { run, json } => {
            let (store, run) = open_run(&cwd, cli.spec.as_deref(), run.as_deref())?;
            let exps = store.experiments(run.id).map_err(anyhow::Error::from)?;
            let spec: serde_json::Value = serde_json::from_str(&run.spec_json).unwrap_or_default();
            let live = Git::discover(&cwd)
                .map(|g| engine::is_running(g.root()))
                .unwrap_or(false);
            output::status(&run, &exps, &spec, json, live);
            // With remote workers, the workers the shared store has seen.
            if let Ok(git) = Git::discover(&cwd) {
                if let Ok(spec) = load_spec(git.root(), cli.spec.as_deref()) {
                    if let (spec::Backend::Workers, Some(url)) =
                        (spec.exec.backend, &spec.exec.store_url)
                    {
                        // --json prints one object: the workers are `hone status` without it.
                        if !json {
                            output::workers(url, false);
                        }
                    }
                }
            }
            Ok(())
        }
        Cmd::Worker {
            store,
            repo,
            dir,
            slot,
            env,
            lease,
            max_jobs,
        } => {
            let mut vars = Vec::new();
            for e in env {
                let Some((k, v)) = e.split_once('=') else {
                    return Err(Failure {
                        code: 2,
                        error: anyhow!("--env {e}: expected NAME=VALUE"),
                    });
                };
                vars.push((k.to_string(), v.to_string()));
            }
            let opts = hone::worker::WorkerOptions {
                store_url: store,
                remote: repo,
                dir: dir.unwrap_or_else(|| cwd.join(format!("hone-worker-{slot}"))),
                slot,
                env: vars,
                lease,
                max_jobs,
            };
            let interrupt = output::install_interrupt_handler();
            hone::worker::run(
                &opts,
                &|| interrupt.stop_requested(),
                &mut output::worker_event,
            )
            .map_err(|e| anyhow!(e))?;
            Ok(())
        }
        Cmd::Log { run, json, tsv } => {
            let (store, run) = open_run(&cwd, cli.spec.as_deref(), run.as_deref())?;
            let exps = store.experiments(run.id).map_err(anyhow::Error::from)?;
            output::log(&run, &exps, json, tsv);
            Ok(())
        }
        Cmd::Show { n, run, tail } => {
            let (store, run) = open_run(&cwd, cli.spec.as_deref(), run.as_deref())?;
            let e = store
                .experiment(run.id, n)
                .map_err(anyhow::Error::from)?
                .ok_or_else(|| {
                    anyhow!("run `{}` has no experiment {n}; see `hone log`", run.tag)
                })?;
            let git = Git::discover(&cwd).map_err(anyhow::Error::from)?;
            let calls = store
                .mechanism_calls(run.id, Some(n))
                .map_err(anyhow::Error::from)?;
            output::show(&git, &run, &e, tail);
            output::show_mechanisms(&calls);
            Ok(())
        }
        Cmd::Mech {
            command: MechCmd::Stats { run, json },
        } => {
            let (store, run) = open_run(&cwd, cli.spec.as_deref(), run.as_deref())?;
            let exps = store.experiments(run.id).map_err(anyhow::Error::from)?;
            let calls = store
                .mechanism_calls(run.id, None)
                .map_err(anyhow::Error::from)?;
            let spec: serde_json::Value = serde_json::from_str(&run.spec_json).unwrap_or_default();
            let probation = spec["outer"]["probation"]
                .as_u64()
                .unwrap_or(hone::spec::OuterSpec::default().probation);
            let stats = hone::meta::stats::compute(&calls, &exps, probation);
            output::mech_stats(&run, &stats, probation, json);
            Ok(())
        }
        Cmd::Report { run, out } => {
            let (store, run) = open_run(&cwd, cli.spec.as_deref(), run.as_deref())?;
            let exps = store.experiments(run.id).map_err(anyhow::Error::from)?;
            let git = Git::discover(&cwd).map_err(anyhow::Error::from)?;
            let out = out.unwrap_or_else(|| {
                StatePaths::new(git.root())
                    .dir
                    .join("reports")
                    .join(&run.tag)
            });
            std::fs::create_dir_all(&out)
                .with_context(|| format!("cannot create {}", out.display()))?;
            // The outer loop's activity, when mechanisms ran.
            let calls = store
                .mechanism_calls(run.id, None)
                .map_err(anyhow::Error::from)?;
            let spec: serde_json::Value = serde_json::from_str(&run.spec_json).unwrap_or_default();
            let probation = spec["outer"]["probation"]
                .as_u64()
                .unwrap_or(hone::spec::OuterSpec::default().probation);
            let mechs = hone::meta::stats::compute(&calls, &exps, probation);
            let report = hone::report::document::render_with(&run, &exps, &mechs);
            for (name, content) in [
                ("report.html", &report.html),
                ("report.md", &report.markdown),
                ("progress.svg", &report.svg),
            ] {
                let path = out.join(name);
                std::fs::write(&path, content)
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
            out!(
                "wrote {}/report.html, report.md and progress.svg",
                out.display()
            );
            Ok(())
        }
        Cmd::Serve { port, bind } => serve(&cwd, cli.spec.as_deref(), port, bind),
        Cmd::Finalize {
            run,
            squash,
            pr,
            branch,
            remote,
            base,
        } => finalize(&cwd, run, squash, pr, branch, &remote, base.as_deref()),
        Cmd::Daemon { port, bind } => daemon(&cwd, cli.spec.as_deref(), bind, port),
        Cmd::Demo {
            dir,
            keep,
            max_experiments,
            seed,
        } => demo(dir, keep, max_experiments, seed),
        Cmd::Bench {
            quick,
            problems,
            arms,
            repeats,
            budget,
            out,
            manifest,
            report_only,
            with,
        } => bench(
            &cwd,
            BenchArgs {
                quick,
                problems,
                arms,
                repeats,
                budget,
                out,
                manifest,
                report_only,
                with,
            },
        ),
    }
}

fn finalize(
    cwd: &Path,
    tag: Option<String>,
    squash: bool,
    pr: bool,
    branch: Option<String>,
    remote: &str,
    base: Option<&str>,
) -> Result<(), Failure> {
    use hone::finalize as fin;
    if let Some(t) = &tag {
        fin::check_tag(t).map_err(|e| Failure {
            code: 2,
            error: anyhow!(e),
        })?;
    }
    let git = Git::discover(cwd).map_err(anyhow::Error::from)?;
    let (run, exps) = fin::load_run(git.root(), tag.as_deref()).map_err(anyhow::Error::from)?;
    // Everything a pull request needs is checked before anything is built or pushed.
    let plan = if pr {
        Some(
            fin::plan_pull_request(
                &git,
                remote,
                base,
                std::env::var("GITHUB_TOKEN").ok(),
                std::env::var("GITHUB_API_URL").ok(),
            )
            .map_err(anyhow::Error::from)?,
        )
    } else {
        None
    };
    let opts = fin::FinalizeOptions {
        tag: Some(run.tag.clone()),
        squash,
        branch,
    };
    let done = fin::build_branch(&git, &run, &exps, &opts).map_err(anyhow::Error::from)?;
    out!(
        "wrote branch {} ({} commit{} on {})",
        done.branch,
        done.commits.len(),
        if done.commits.len() == 1 { "" } else { "s" },
        &done.base_commit[..done.base_commit.len().min(10)]
    );
    for c in &done.commits {
        out!(
            "  {} {}",
            &c.commit[..c.commit.len().min(10)],
            c.message.lines().next().unwrap_or("")
        );
    }
    let Some(plan) = plan else {
        out!(
            "review it with `git log -p {}`; `hone finalize --pr` pushes it and opens a pull request",
            done.branch
        );
        return Ok(());
    };
    fin::push(&git, &plan.remote, &done.branch).map_err(anyhow::Error::from)?;
    out!("pushed {} to {}", done.branch, plan.remote);
    let pull = fin::open_pull_request(
        &plan,
        &done.branch,
        &fin::pr_title(&run, &exps),
        &fin::pr_body(&run, &exps),
    )
    .map_err(anyhow::Error::from)?;
    out!("opened pull request #{}: {}", pull.number, pull.url);
    Ok(())
}

fn daemon(
    cwd: &Path,
    spec_path: Option<&Path>,
    bind: std::net::IpAddr,
    port: u16,
) -> Result<(), Failure> {
    use hone_serve::automation as auto;
    let git = Git::discover(cwd).map_err(anyhow::Error::from)?;
    let spec = load_spec(git.root(), spec_path)?;
    let addr = std::net::SocketAddr::new(bind, port);
    let token = std::env::var("HONE_TOKEN").ok();
    auto::token_required(&addr, token.as_deref()).map_err(|e| Failure {
        code: 2,
        error: anyhow!(e),
    })?;
    let program = std::env::current_exe().context("cannot find the hone executable")?;
    let messages: auto::Messages = std::sync::Arc::new(|m: &str| out!("{m}"));
    let automation = auto::AutomationOptions::from_spec(
        git.root().to_path_buf(),
        spec_path.map(|p| cwd.join(p)),
        &spec,
        program,
        messages,
    );
    auto::daemon(auto::DaemonOptions {
        addr,
        token,
        automation,
    })?;
    Ok(())
}

fn load_spec(root: &Path, path: Option<&Path>) -> Result<Spec, Failure> {
    let path = path
        .map(Path::to_path_buf)
        .unwrap_or_else(|| root.join("hone.toml"));
    Spec::load(&path).map_err(|e| Failure {
        code: 2,
        error: anyhow!(e),
    })
}

/// The configured store (`.hone/hone.db`, or `[store] url`) and the run `tag` (else the latest).
fn open_run(
    cwd: &Path,
    spec_path: Option<&Path>,
    tag: Option<&str>,
) -> Result<(Store, hone::store::RunRecord), Failure> {
    let git = Git::discover(cwd).map_err(anyhow::Error::from)?;
    let location = engine::configured_store(git.root(), spec_path).map_err(|e| Failure {
        code: 2,
        error: anyhow!(e),
    })?;
    let store = Store::open_existing_at(&location)
        .map_err(anyhow::Error::from)?
        .ok_or_else(|| {
            anyhow!(
                "no hone runs in {} yet; start one with `hone run`",
                git.root().display()
            )
        })?;
    let run = match tag {
        Some(t) => store
            .run_by_tag(t)
            .map_err(anyhow::Error::from)?
            .ok_or_else(|| anyhow!("no run tagged `{t}`; `hone status` shows the latest"))?,
        None => store
            .latest_run()
            .map_err(anyhow::Error::from)?
            .ok_or_else(|| anyhow!("no hone runs yet; start one with `hone run`"))?,
    };
    Ok((store, run))
}

fn run_loop(root: &Path, spec: &Spec, opts: &RunOptions) -> Result<(), Failure> {
    let interrupt = output::install_interrupt_handler();
    let mut printer = output::Printer::new(spec.verify.metric.clone());
    let result = engine::run(root, spec, opts, interrupt, &mut |ev| printer.event(ev));
    printer.clear_line();
    match result {
        Ok(summary) if interrupt.stop_requested() => {
            output::summary(&summary);
            // 128 + SIGINT, as shells report a job stopped by Ctrl-C.
            Err(Failure {
                code: 130,
                error: anyhow!("interrupted; `hone run` resumes this run"),
            })
        }
        Ok(summary) => {
            output::summary(&summary);
            Ok(())
        }
        Err(engine::EngineError::Stopped { reason, summary }) => {
            output::summary(&summary);
            Err(Failure {
                code: 1,
                error: anyhow!(reason),
            })
        }
        Err(e) => Err(anyhow::Error::from(e).into()),
    }
}

fn serve(
    cwd: &Path,
    spec_path: Option<&Path>,
    port: u16,
    bind: std::net::IpAddr,
) -> Result<(), Failure> {
    let git = Git::discover(cwd).map_err(anyhow::Error::from)?;
    let store = engine::configured_store(git.root(), spec_path).map_err(|e| Failure {
        code: 2,
        error: anyhow!(e),
    })?;
    let opts = hone_serve::ServeOptions {
        repo_root: git.root().to_path_buf(),
        store: Some(store),
        addr: std::net::SocketAddr::new(bind, port),
        token: std::env::var("HONE_TOKEN").ok().filter(|t| !t.is_empty()),
    };
    hone_serve::check_options(&opts).map_err(|error| Failure { code: 2, error })?;
    // The automation endpoints and schedules of hone.toml run beside the pages (a repository
    // without a hone.toml gets the pages only).
    use hone_serve::automation as auto;
    let automation = match load_spec(git.root(), spec_path) {
        Ok(spec) => {
            let program = std::env::current_exe().context("cannot find the hone executable")?;
            let messages: auto::Messages = std::sync::Arc::new(|m: &str| out!("{m}"));
            Some(auto::Automation::new(auto::AutomationOptions::from_spec(
                git.root().to_path_buf(),
                spec_path.map(|p| cwd.join(p)),
                &spec,
                program,
                messages,
            )))
        }
        Err(_) => None,
    };
    let server = match &automation {
        Some(a) => hone_serve::bind_with(&opts, auto::router(a.clone()))?
            .with_task(auto::run_scheduler(a.clone(), Duration::from_secs(30))),
        None => hone_serve::bind(&opts)?,
    };
    out!("hone serve: {} (Ctrl-C stops)", server.url());
    if let Some(a) = &automation {
        if a.trigger_configured() {
            out!("POST /api/trigger starts a run (signed with X-Hub-Signature-256; off loopback, add ?token=<token> to the webhook URL)");
        }
        for (cron, tag) in a.schedule_list() {
            out!("schedule `{cron}` (UTC) -> runs tagged {tag}-<time>");
        }
    }
    if opts.token.is_some() {
        out!("every request needs the token in HONE_TOKEN: open the page once with ?token=<token>, or send `Authorization: Bearer <token>`");
    }
    server.run()?;
    Ok(())
}

struct BenchArgs {
    quick: bool,
    problems: Vec<String>,
    arms: Vec<String>,
    repeats: Option<u64>,
    budget: Vec<u64>,
    out: Option<PathBuf>,
    manifest: Option<PathBuf>,
    report_only: bool,
    with: Vec<PathBuf>,
}

fn bench(cwd: &Path, a: BenchArgs) -> Result<(), Failure> {
    use hone::bench;
    let usage = |e: bench::BenchError| Failure {
        code: 2,
        error: anyhow!(e),
    };
    let manifest = match a.manifest {
        Some(m) => m,
        None => cwd
            .ancestors()
            .map(|d| d.join("bench/problems/manifest.toml"))
            .find(|m| m.is_file())
            .ok_or_else(|| Failure {
                code: 2,
                error: anyhow!("no bench/problems/manifest.toml in this directory or above it; run from the hone repository or pass --manifest"),
            })?,
    };
    let root = manifest
        .parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .unwrap_or(cwd)
        .to_path_buf();
    let all = bench::load_manifest(&manifest).map_err(usage)?;
    let problems = bench::select(&all, &a.problems, a.quick).map_err(usage)?;
    let arms = match (a.arms.is_empty(), a.quick) {
        (false, _) => a.arms,
        (true, true) => vec!["A".into(), "C".into()],
        (true, false) => bench::ARMS.iter().map(|s| s.to_string()).collect(),
    };
    let budgets = match (a.budget.is_empty(), a.quick) {
        (false, _) => a.budget,
        (true, true) => vec![20],
        (true, false) => vec![20, 50, 100],
    };
    let out = a.out.unwrap_or_else(|| {
        root.join(if a.quick {
            "bench/out-quick"
        } else {
            "bench/out"
        })
    });
    let opts = bench::BenchOptions {
        problems,
        arms,
        repeats: a.repeats.unwrap_or(if a.quick { 3 } else { 10 }),
        budgets,
        out: out.clone(),
        report_only: a.report_only,
        with: a.with,
    };
    let started = std::time::Instant::now();
    let progress = |p: &bench::Progress| match p {
        bench::Progress::Planned { todo, done } => {
            err!("hone bench: {todo} run(s) to do ({done} already in runs.json)")
        }
        bench::Progress::Finished { run, index, todo } => err!(
            "[{index}/{todo}] {} {} seed {}: best {} after {} verifications ({:.1}s)",
            run.problem,
            bench::report::label(&run.arm),
            run.seed,
            run.trajectory.last().copied().unwrap_or(f64::NAN),
            run.trajectory.len(),
            run.wall_s
        ),
    };
    let rep = bench::run(&opts, &progress).map_err(anyhow::Error::from)?;
    out!("{}", rep.markdown());
    out!(
        "wrote {}/results.md, results.json and runs.json in {:.0}s",
        out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn demo(
    dir: Option<PathBuf>,
    keep: bool,
    max_experiments: Option<u64>,
    seed: Option<u64>,
) -> Result<(), Failure> {
    hone::demo::check_python().map_err(anyhow::Error::from)?;
    let (dir, keep) = match dir {
        Some(d) => (d, true),
        None => {
            let stamp = hone::store::now() as u64;
            (
                std::env::temp_dir().join(format!("hone-demo-{}-{stamp}", std::process::id())),
                keep,
            )
        }
    };
    hone::demo::set_up(&dir).map_err(anyhow::Error::from)?;
    out!(
        "hone demo: a character-level language model in {}",
        dir.display()
    );
    out!("the knobs optimizer will tune train.py; prepare.py and data/ are sealed\n");
    let spec = load_spec(&dir, None)?;
    let opts = RunOptions {
        tag: Some("demo".into()),
        max_experiments,
        seed,
        ..Default::default()
    };
    let result = run_loop(&dir, &spec, &opts);
    if keep {
        out!(
            "\nthe demo is in {d}: try `hone -C {d} log`, `hone -C {d} show 1`, `hone -C {d} report` or `hone -C {d} serve`",
            d = dir.display()
        );
    } else {
        let _ = std::fs::remove_dir_all(&dir);
        out!("\n(the demo directory was removed; pass --keep or --dir DIR to explore it with `hone log` and `hone show`)");
    }
    result
}

fn init(
    cwd: &Path,
    editable: Vec<String>,
    command: Option<String>,
    metric: Option<String>,
) -> Result<(), Failure> {
    let git = Git::discover(cwd).map_err(anyhow::Error::from)?;
    let root = git.root();
    let spec_path = root.join("hone.toml");
    let program_path = root.join("program.md");
    for p in [&spec_path, &program_path] {
        if p.exists() {
            return Err(anyhow!("{} already exists; hone init does not overwrite files (edit it, or remove it first)", p.display()).into());
        }
    }
    // Tracked files and untracked ones git does not ignore (a new project may not have
    // committed yet; `hone run` will ask for a commit).
    let tracked: Vec<String> = git
        .run(&["ls-files", "-z"])
        .map_err(anyhow::Error::from)?
        .split('\0')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    let files: Vec<String> = git
        .run(&[
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .map_err(anyhow::Error::from)?
        .split('\0')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    let mut knobs = Vec::new();
    let mut with_knobs = Vec::new();
    for f in &files {
        if !editable.is_empty() && !hone::workspace::matches_any(&editable, f) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(root.join(f)) else {
            continue;
        };
        match hone::propose::knobs::discover(f, &text) {
            Ok(found) if !found.is_empty() => {
                with_knobs.push(f.clone());
                knobs.extend(found);
            }
            Ok(_) => {}
            Err(e) => err!("warning: {e}"),
        }
    }
    let guessed_editable = editable.is_empty() && with_knobs.is_empty();
    let editable = if editable.is_empty() {
        if with_knobs.is_empty() {
            vec!["CHANGE-ME".to_string()]
        } else {
            with_knobs.clone()
        }
    } else {
        editable
    };
    let guessed_verify = command.is_none() || metric.is_none();
    let command = command.unwrap_or_else(|| {
        if files.iter().any(|f| f == "train.py") {
            "python3 train.py".into()
        } else {
            "./measure.sh".into()
        }
    });
    let metric = metric.unwrap_or_else(|| "score".into());
    let lower = metric.to_ascii_lowercase();
    let direction = if [
        "acc",
        "accuracy",
        "f1",
        "auc",
        "reward",
        "throughput",
        "tps",
        "qps",
        "bleu",
        "precision",
        "recall",
    ]
    .iter()
    .any(|w| lower == *w || lower.ends_with(&format!("_{w}")))
    {
        "maximize"
    } else {
        "minimize"
    };
    let quoted: Vec<String> = editable.iter().map(|e| format!("{e:?}")).collect();
    let toml = format!(
        r#"# hone.toml: the loop's contract. Every key is described in hone's README.

[loop]
program   = "program.md"       # read on every experiment
editable  = [{editable}]       # the only files a candidate may change
protected = []                 # e.g. ["prepare.py"]: any change is a violation
pinned    = []                 # e.g. ["data/"]: hashed at start; a change stops the run

[verify]
command   = {command:?}
timeout   = "10m"              # the process group is killed after this
metric    = {metric:?}         # the command prints `{metric}: <number>`
direction = "{direction}"         # "minimize" or "maximize"
min_delta = 0.0                # the smallest improvement worth keeping

[agent]
kind = "knobs"                 # the built-in optimizer; or "command"

[stop]
max_experiments = 100
patience = 30
"#,
        editable = quoted.join(", ")
    );
    let program = "# Program\n\nWhat this project is, what the metric means, and what good research looks like here.\n\
                   hone shows this file to the agent on every experiment.\n\n\
                   - Make one focused change per experiment.\n\
                   - Prefer simple changes; explain the hypothesis in one line.\n";
    std::fs::write(&spec_path, toml)
        .with_context(|| format!("cannot write {}", spec_path.display()))?;
    std::fs::write(&program_path, program)
        .with_context(|| format!("cannot write {}", program_path.display()))?;
    out!(
        "wrote {} and {}",
        spec_path.display(),
        program_path.display()
    );
    output::knob_table(&knobs);
    let untracked: Vec<&String> = with_knobs.iter().filter(|f| !tracked.contains(f)).collect();
    if !untracked.is_empty() {
        out!(
            "\nnot committed yet: {} (hone starts from HEAD: commit before `hone run`)",
            untracked
                .iter()
                .map(|f| f.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let mut todo = Vec::new();
    if guessed_editable {
        todo.push("set [loop] editable (no knobs were found to guess it from)");
    }
    if guessed_verify {
        todo.push("check [verify] command, metric and direction");
    }
    todo.push("commit hone.toml and program.md, then `hone run`");
    out!("\nnext: {}", todo.join("; "));
    Ok(())
}
