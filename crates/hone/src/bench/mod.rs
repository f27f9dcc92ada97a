//! `hone bench`: the ablation benchmark of the outer loop.
//!
//! A suite of knob problems (`bench/problems/manifest.toml`) is run under several *arms* (how
//! the outer loop is configured) with paired seeds and the same number of verifications.
//! Every run is the real engine loop ([`crate::engine::run`]) on a fresh git repository made
//! from the problem's directory: the knobs optimizer proposes, the problem's verifier (a real
//! process) measures, the decision rule keeps or discards, and the mechanisms run through
//! the same [`crate::meta::Outer`] as in any `hone run`. Nothing is simulated in-process.
//!
//! A run's result is its *incumbent trajectory*: after each verification, the score of the
//! current best (the baseline or the latest keep) — the noise-free score where the problem
//! names one. Normalised regret at budget b is `(score_b − optimum) / (baseline − optimum)`:
//! 1 is no progress, 0 is the optimum. Results accumulate in `runs.json` (a later call with
//! the same output directory skips finished runs), and [`report`] turns them into tables.

pub mod report;
pub mod stats;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::engine::{self, Event, Interrupt, RunOptions};
use crate::spec::Spec;
use crate::store::Status;

/// The mechanisms the offline portfolio chooses among in arms C and D: the built-ins that act
/// on the knobs optimizer (`orthogonal` reads an agent's descriptions and does nothing here;
/// `restart` is left out because its fresh history window throws away what the optimizer's
/// model learned, which the A′ control measured as a loss on its own).
pub const PORTFOLIO_MECHANISMS: &[&str] = &["surrogate", "tabu", "bandit", "plateau", "explore"];

/// Experiments per segment in every arm that has segments.
pub const SEGMENT: u64 = 10;

/// Level 1.5's revision interval in arms B and C.
pub const STRATEGY_EVERY: u64 = 5;

/// The ablation's arms (`Ap` is C's segment schedule with `segment_restart` alone).
const ABLATION: &[&str] = &["A", "Ap", "B", "C", "D"];

/// The arms, in report order: the ablation's five, then each other built-in mechanism alone.
pub fn arms() -> Vec<&'static str> {
    let alone = crate::meta::BUILTIN
        .iter()
        .filter(|m| **m != "segment_restart");
    ABLATION.iter().chain(alone).copied().collect()
}

/// What an arm means, for the report.
pub fn describe_arm(arm: &str) -> String {
    match arm {
        "A" => "Level 1 only: the knobs optimizer".into(),
        "Ap" => format!(
            "Level 1 with C's segment schedule ({SEGMENT} experiments), restarting from the best with a fresh history window at every segment end"
        ),
        "B" => format!("Level 1 + 1.5 (rule-based strategy every {STRATEGY_EVERY})"),
        "C" => format!(
            "Level 1 + 1.5 + offline Level 2 (portfolio over {} per {SEGMENT}-experiment segment)",
            PORTFOLIO_MECHANISMS.join(", ")
        ),
        "D" => "Level 1 + offline Level 2 (portfolio, no strategy)".into(),
        m if crate::meta::BUILTIN.contains(&m) => format!("Level 1 + `{m}` alone"),
        other => format!("external: {other}"),
    }
}

/// The `[outer]` table an arm adds to the problem's hone.toml (empty for A).
pub fn outer_toml(arm: &str) -> Result<String, BenchError> {
    let list = |names: &[&str]| {
        names
            .iter()
            .map(|n| format!("\"{n}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let portfolio = list(PORTFOLIO_MECHANISMS);
    Ok(match arm {
        "A" => String::new(),
        "Ap" => format!("[outer]\nmechanisms = [\"segment_restart\"]\nsegment = {SEGMENT}\n"),
        "B" => format!("[outer]\nstrategy_every = {STRATEGY_EVERY}\nsegment = {SEGMENT}\n"),
        "C" => format!(
            "[outer]\nstrategy_every = {STRATEGY_EVERY}\nmechanisms = [{portfolio}]\nportfolio = true\nsegment = {SEGMENT}\n"
        ),
        "D" => format!(
            "[outer]\nmechanisms = [{portfolio}]\nportfolio = true\nsegment = {SEGMENT}\n"
        ),
        m if crate::meta::BUILTIN.contains(&m) => {
            format!("[outer]\nmechanisms = [\"{m}\"]\nsegment = {SEGMENT}\n")
        }
        other => {
            return Err(BenchError::Usage(format!(
                "unknown arm `{other}`; the arms are {}",
                arms().join(", ")
            )))
        }
    })
}

/// One problem of the suite.
#[derive(Clone, Debug, Serialize)]
pub struct Problem {
    pub name: String,
    /// What kind of problem it is, in words.
    pub kind: String,
    /// The problem's directory (absolute, resolved from the manifest's).
    pub dir: PathBuf,
    /// The known minimum, or the best value known.
    pub optimum: f64,
    /// The verifier's value at the committed knobs.
    pub baseline: f64,
    /// The metric regret is computed on (`None`: the loop's objective).
    pub score: Option<String>,
    /// The most verifications a run of it gets (`None`: the benchmark's largest budget).
    pub budget: Option<u64>,
    /// Part of `--quick`.
    pub quick: bool,
}

impl Problem {
    /// `(score − optimum) / (baseline − optimum)`.
    pub fn regret(&self, score: f64) -> f64 {
        (score - self.optimum) / (self.baseline - self.optimum)
    }
}

/// Reads `manifest.toml`: `[[problem]]` tables with `name`, `dir`, `optimum`, `baseline`, and
/// optionally `kind`, `score`, `budget`, `quick`.
pub fn load_manifest(path: &Path) -> Result<Vec<Problem>, BenchError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| BenchError::Usage(format!("cannot read {}: {e}", path.display())))?;
    let doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e| BenchError::Usage(format!("{}: {e}", path.display())))?;
    let base = path.parent().unwrap_or(Path::new("."));
    let bad = |what: String| BenchError::Usage(format!("{}: {what}", path.display()));
    let Some(tables) = doc.get("problem").and_then(|p| p.as_array_of_tables()) else {
        return Err(bad("no [[problem]] tables".into()));
    };
    let mut out: Vec<Problem> = Vec::new();
    for (i, t) in tables.iter().enumerate() {
        let s = |k: &str| t.get(k).and_then(|v| v.as_str()).map(str::to_string);
        let f = |k: &str| {
            t.get(k)
                .and_then(|v| v.as_float().or_else(|| v.as_integer().map(|n| n as f64)))
        };
        let name = s("name").ok_or_else(|| bad(format!("problem {} has no name", i + 1)))?;
        let need = |k: &str| bad(format!("problem `{name}` needs `{k}`"));
        let dir = s("dir").ok_or_else(|| need("dir"))?;
        let optimum = f("optimum").ok_or_else(|| need("optimum"))?;
        let baseline = f("baseline").ok_or_else(|| need("baseline"))?;
        if baseline <= optimum {
            return Err(bad(format!(
                "problem `{name}`: baseline {baseline} must be worse (larger) than optimum {optimum}"
            )));
        }
        if out.iter().any(|p| p.name == name) {
            return Err(bad(format!("problem `{name}` is listed twice")));
        }
        let budget = match t.get("budget").and_then(|v| v.as_integer()) {
            Some(b) if b < 1 => return Err(bad(format!("problem `{name}`: budget must be >= 1"))),
            Some(b) => Some(b as u64),
            None => None,
        };
        out.push(Problem {
            kind: s("kind").unwrap_or_default(),
            dir: base.join(dir),
            optimum,
            baseline,
            score: s("score"),
            budget,
            quick: t.get("quick").and_then(|v| v.as_bool()).unwrap_or(false),
            name,
        });
    }
    Ok(out)
}

/// What to run.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    pub problems: Vec<Problem>,
    pub arms: Vec<String>,
    /// Seeds 1..=repeats, shared by every arm (paired).
    pub repeats: u64,
    /// Budgets (verifications) the report reads regret at; the largest is what a run gets.
    pub budgets: Vec<u64>,
    /// Where `runs.json`, `results.json`, `results.md` and the runs' scratch repositories go.
    pub out: PathBuf,
    /// Only report what `runs.json` and the `with` files hold; run nothing.
    pub report_only: bool,
    /// Runs from other sources to report side by side (Optuna's, earlier benchmarks).
    pub with: Vec<PathBuf>,
}

/// One finished run: the incumbent's score after each verification.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RunResult {
    pub problem: String,
    pub arm: String,
    pub seed: u64,
    /// The verifications the run was allowed.
    pub budget: u64,
    /// `trajectory[i]`: the incumbent's score after verification i + 1 (the baseline is the
    /// first).
    pub trajectory: Vec<f64>,
    /// Experiments that were recorded but not verified (rejected, invalid).
    #[serde(default)]
    pub unverified: u64,
    pub wall_s: f64,
    /// Where the figures come from (`hone engine`, `optuna 4.x TPESampler`...).
    pub source: String,
}

impl RunResult {
    /// The incumbent's score after `b` verifications (the last one if the run had fewer).
    pub fn score_at(&self, b: u64) -> Option<f64> {
        let i = (b as usize).min(self.trajectory.len()).checked_sub(1)?;
        self.trajectory.get(i).copied()
    }
}

/// The file `runs.json`: every finished run.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RunsFile {
    pub runs: Vec<RunResult>,
}

/// Reads a runs file (an absent one is empty).
pub fn read_runs(path: &Path) -> Result<Vec<RunResult>, BenchError> {
    match std::fs::read_to_string(path) {
        Ok(t) => serde_json::from_str::<RunsFile>(&t)
            .map(|f| f.runs)
            .map_err(|e| BenchError::Usage(format!("{} is not a runs file: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(BenchError::Io(format!(
            "cannot read {}: {e}",
            path.display()
        ))),
    }
}

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Io(String),
    #[error("problem `{problem}`, arm {arm}, seed {seed}: {why}")]
    Run {
        problem: String,
        arm: String,
        seed: u64,
        why: String,
    },
}

/// What the benchmark reports while it works.
#[derive(Clone, Debug)]
pub enum Progress {
    /// Runs to do (after skipping those already in `runs.json`).
    Planned { todo: usize, done: usize },
    Finished {
        run: Box<RunResult>,
        index: usize,
        todo: usize,
    },
}

/// Runs every (problem, arm, seed) not yet in `OUT/runs.json`, then writes the report.
pub fn run(
    opts: &BenchOptions,
    on_progress: &dyn Fn(&Progress),
) -> Result<report::Report, BenchError> {
    for arm in &opts.arms {
        outer_toml(arm)?;
    }
    let max_budget = opts.budgets.iter().copied().max().unwrap_or(0);
    if max_budget == 0 || opts.repeats == 0 {
        return Err(BenchError::Usage(
            "need at least one budget above 0 and one repeat".into(),
        ));
    }
    std::fs::create_dir_all(&opts.out)
        .map_err(|e| BenchError::Io(format!("cannot create {}: {e}", opts.out.display())))?;
    let runs_path = opts.out.join("runs.json");
    let mut done = read_runs(&runs_path)?;
    // Arm by arm in the order given, and seed by seed within an arm, so that a benchmark cut
    // short has whole arms and every problem with the same seeds.
    let mut todo = Vec::new();
    for arm in opts.arms.iter().filter(|_| !opts.report_only) {
        for seed in 1..=opts.repeats {
            for p in &opts.problems {
                let budget = p.budget.map_or(max_budget, |b| b.min(max_budget));
                // A longer run of the same seed holds this one as its prefix.
                let have = done.iter().any(|r| {
                    r.problem == p.name && &r.arm == arm && r.seed == seed && r.budget >= budget
                });
                if !have {
                    todo.push((p, arm.clone(), seed, budget));
                }
            }
        }
    }
    on_progress(&Progress::Planned {
        todo: todo.len(),
        done: done.len(),
    });
    let total = todo.len();
    let scratch = opts.out.join("work");
    // One run at a time: the engine waits for its process groups, which must not race with
    // another run's in the same process (run several `hone bench` processes with different
    // --out directories instead, and report them together with --with).
    for (i, (problem, arm, seed, budget)) in todo.into_iter().enumerate() {
        let run = run_one(problem, &arm, seed, budget, &scratch)?;
        done.push(run.clone());
        write_json(&runs_path, &RunsFile { runs: done.clone() })?;
        on_progress(&Progress::Finished {
            run: Box::new(run),
            index: i + 1,
            todo: total,
        });
    }
    let _ = std::fs::remove_dir_all(&scratch);
    let mut reported = done;
    for extra in &opts.with {
        for r in read_runs(extra)? {
            // The same run from two files counts once.
            let dup = reported.iter().any(|o| {
                o.problem == r.problem && o.arm == r.arm && o.seed == r.seed && o.budget == r.budget
            });
            if !dup {
                reported.push(r);
            }
        }
    }
    let rep = report::Report::build(&opts.problems, &opts.budgets, &reported);
    write_json(&opts.out.join("results.json"), &rep)?;
    std::fs::write(opts.out.join("results.md"), rep.markdown())
        .map_err(|e| BenchError::Io(format!("cannot write {}: {e}", opts.out.display())))?;
    Ok(rep)
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), BenchError> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| BenchError::Io(format!("cannot encode {}: {e}", path.display())))?;
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text + "\n")
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| BenchError::Io(format!("cannot write {}: {e}", path.display())))
}

/// Copies `from` into `to`, leaving out hone's state and Python's caches. Links to files are
/// followed (a problem links the modules it shares with others, e.g.
/// `bench/problems/shared/noise.py`): the copy holds their contents. Links to directories
/// (which could lead back up the tree) and links leading nowhere are left out.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if matches!(name.to_str(), Some(".hone" | "__pycache__" | ".git")) {
            continue;
        }
        let link = entry.file_type()?.is_symlink();
        let ty = match std::fs::metadata(entry.path()) {
            Ok(m) => m.file_type(),
            Err(_) if link => continue,
            Err(e) => return Err(e),
        };
        if ty.is_dir() && !link {
            copy_tree(&entry.path(), &to.join(&name))?;
        } else if ty.is_file() {
            std::fs::copy(entry.path(), to.join(&name))?;
        }
    }
    Ok(())
}

fn git(dir: &Path, args: &[&str]) -> Result<(), String> {
    let out = Command::new(crate::workspace::git_program())
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "hone bench")
        .env("GIT_AUTHOR_EMAIL", "hone@localhost")
        .env("GIT_COMMITTER_NAME", "hone bench")
        .env("GIT_COMMITTER_EMAIL", "hone@localhost")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// One run: a fresh repository from the problem's directory with the arm's `[outer]`, the
/// engine loop for `budget` experiments with `seed`, and the incumbent trajectory.
pub fn run_one(
    problem: &Problem,
    arm: &str,
    seed: u64,
    budget: u64,
    scratch: &Path,
) -> Result<RunResult, BenchError> {
    let fail = |why: String| BenchError::Run {
        problem: problem.name.clone(),
        arm: arm.to_string(),
        seed,
        why,
    };
    let dir = scratch.join(format!("{}-{arm}-{seed}", problem.name));
    let (spec_path, text) = scratch_repo(problem, arm, &dir, &fail)?;
    let spec = Spec::parse(&spec_path, &text).map_err(|e| fail(e.to_string()))?;
    let opts = RunOptions {
        tag: Some(format!("bench-s{seed}")),
        max_experiments: Some(budget),
        more: None,
        max_time: None,
        seed: Some(seed),
        new_run: true,
        agent_chosen: false,
    };
    let interrupt = Interrupt::new();
    let mut track = Track::default();
    let started = Instant::now();
    let mut on_event = |ev: &Event| {
        if let Event::ExperimentFinished { record, .. } = ev {
            track.record(problem, record);
        }
    };
    engine::run(&dir, &spec, &opts, &interrupt, &mut on_event).map_err(|e| fail(e.to_string()))?;
    let Track {
        mut trajectory,
        unverified,
        bad,
        ..
    } = track;
    if let Some(why) = bad {
        return Err(fail(why));
    }
    if trajectory.is_empty() {
        return Err(fail(
            "the baseline was not measured (does the verifier run?)".into(),
        ));
    }
    trajectory.truncate(budget as usize);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(RunResult {
        problem: problem.name.clone(),
        arm: arm.to_string(),
        seed,
        budget,
        trajectory,
        unverified,
        wall_s: started.elapsed().as_secs_f64(),
        source: "hone engine (real loop, git repository, verifier process)".into(),
    })
}

/// Makes `dir` a fresh git repository of the problem's directory, its hone.toml given the
/// arm's `[outer]`; returns the spec's path and text.
fn scratch_repo(
    problem: &Problem,
    arm: &str,
    dir: &Path,
    fail: &dyn Fn(String) -> BenchError,
) -> Result<(PathBuf, String), BenchError> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| fail(format!("cannot clear {e}")))?;
    }
    copy_tree(&problem.dir, dir).map_err(|e| {
        fail(format!(
            "cannot copy {} into a scratch repository: {e}",
            problem.dir.display()
        ))
    })?;
    let spec_path = dir.join("hone.toml");
    let base = std::fs::read_to_string(&spec_path)
        .map_err(|e| fail(format!("the problem has no readable hone.toml: {e}")))?;
    let text = format!("{}\n{}", base.trim_end(), outer_toml(arm)?);
    std::fs::write(&spec_path, &text)
        .and_then(|()| std::fs::write(dir.join(".gitignore"), "__pycache__/\n.hone/\n"))
        .map_err(|e| fail(format!("cannot write the scratch repository: {e}")))?;
    git(dir, &["init", "-q", "-b", "main"])
        .and_then(|()| git(dir, &["add", "-A"]))
        .and_then(|()| git(dir, &["commit", "-q", "-m", "benchmark problem"]))
        .map_err(fail)?;
    Ok((spec_path, text))
}

/// A run's incumbent trajectory as its experiments finish.
#[derive(Default)]
struct Track {
    /// The incumbent's score after each verification (a repeated run counts each time).
    trajectory: Vec<f64>,
    /// Experiments that did not run the verifier.
    unverified: u64,
    incumbent: Option<f64>,
    /// The first keep or baseline without a score.
    bad: Option<String>,
}

impl Track {
    fn record(&mut self, problem: &Problem, record: &crate::store::ExperimentRecord) {
        let status = record.status();
        if !status.ran_verifier() {
            self.unverified += 1;
            return;
        }
        if matches!(status, Status::Baseline | Status::Keep) {
            let score = match &problem.score {
                Some(m) => record.metrics.get(m).copied(),
                None => record.objective,
            };
            match score {
                Some(s) => self.incumbent = Some(s),
                None => {
                    self.bad.get_or_insert(format!(
                        "experiment {} ({}) has no score `{}`",
                        record.n,
                        status.as_str(),
                        problem.score.as_deref().unwrap_or("objective")
                    ));
                }
            }
        }
        let repeats = record.runs.len().max(1);
        if let Some(s) = self.incumbent {
            for _ in 0..repeats {
                self.trajectory.push(s);
            }
        }
    }
}

/// The problems named in `names` (all when empty; the quick ones with `quick`).
pub fn select(all: &[Problem], names: &[String], quick: bool) -> Result<Vec<Problem>, BenchError> {
    if names.is_empty() {
        return Ok(all.iter().filter(|p| !quick || p.quick).cloned().collect());
    }
    let by_name: BTreeMap<&str, &Problem> = all.iter().map(|p| (p.name.as_str(), p)).collect();
    names
        .iter()
        .map(|n| {
            by_name
                .get(n.as_str())
                .map(|p| (*p).clone())
                .ok_or_else(|| {
                    BenchError::Usage(format!(
                        "unknown problem `{n}`; the suite has {}",
                        all.iter()
                            .map(|p| p.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_arm_has_an_outer_table_the_spec_accepts() {
        let base = "[loop]\neditable = [\"k.py\"]\n[verify]\ncommand = \"true\"\nmetric = \"score\"\n[agent]\nkind = \"knobs\"\n";
        for arm in arms() {
            let text = format!("{base}{}", outer_toml(arm).unwrap());
            let spec = Spec::parse(Path::new("hone.toml"), &text)
                .unwrap_or_else(|e| panic!("arm {arm}: {e}"));
            assert_eq!(spec.outer.portfolio, matches!(arm, "C" | "D"), "{arm}");
            assert_eq!(
                spec.outer.strategy_every.is_some(),
                matches!(arm, "B" | "C"),
                "{arm}"
            );
        }
        assert!(outer_toml("A").unwrap().is_empty());
        assert!(outer_toml("Z").is_err());
    }

    #[test]
    fn the_score_at_a_budget_is_the_incumbent_then() {
        let r = RunResult {
            problem: "p".into(),
            arm: "A".into(),
            seed: 1,
            budget: 5,
            trajectory: vec![5.0, 5.0, 3.0],
            unverified: 0,
            wall_s: 0.0,
            source: String::new(),
        };
        assert_eq!(r.score_at(1), Some(5.0));
        assert_eq!(r.score_at(3), Some(3.0));
        assert_eq!(r.score_at(100), Some(3.0));
        assert_eq!(r.score_at(0), None);
    }

    /// Runs a problem's verifier (`python3 -S -B verify.py`) in a copy of its directory, with
    /// `knobs` as its knobs.py when given, and returns the value it printed for `metric`.
    fn verify_value(p: &Problem, knobs: Option<&str>, metric: &str) -> f64 {
        let dir = tempfile::tempdir().unwrap();
        for e in std::fs::read_dir(&p.dir).unwrap() {
            let e = e.unwrap();
            if e.path().is_file() {
                std::fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
            }
        }
        if let Some(k) = knobs {
            std::fs::write(dir.path().join("knobs.py"), k).unwrap();
        }
        let out = std::process::Command::new("python3")
            .args(["-S", "-B", "verify.py"])
            .current_dir(dir.path())
            .env("HONE_RUN", "test")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let prefix = format!("{metric}: ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{}: {text}", p.name))
    }

    #[test]
    fn the_issue_17_problems_print_their_baseline_and_reach_their_optimum() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/problems/manifest.toml");
        let all = load_manifest(&path).unwrap();
        let llm = "LEARNING_RATE = 10 ** -3.2\nWARMUP = 0.06\nWEIGHT_DECAY = 10 ** -1.5\nBATCH_POW = 7\nDEPTH = 12\nWIDTH = 512\n";
        let optima = [
            (
                "smooth6",
                "X1 = 1.3\nX2 = -2.1\nX3 = 0.4\nX4 = 2.7\nX5 = -0.9\nX6 = 1.8\n".to_string(),
            ),
            ("llm", llm.to_string()),
            ("llm_noisy", format!("SEED = 7\n{llm}")),
            (
                "mixedrosen",
                "A = 2\nB = -1\nC = 1.4\nD = 0.2\nOFFSET = \"right\"\n".into(),
            ),
            ("sparse", "K03 = 0.82\nK07 = 10 ** 0.6\n".into()),
            (
                "optchoice",
                "OPTIMIZER = \"lion\"\nLEARNING_RATE = 1e-4\nMOMENTUM = 0.5\nBETA2 = 0.9\nWEIGHT_DECAY = 10 ** -0.5\n".into(),
            ),
        ];
        // One knob moved off the optimum (the last assignment wins).
        let off = [
            "X3 = 0.0",
            "DEPTH = 2",
            "WARMUP = 0.2",
            "OFFSET = \"left\"",
            "K07 = 1.0",
            "OPTIMIZER = \"adam\"",
        ];
        for ((name, at_optimum), off) in optima.into_iter().zip(off) {
            let p = all.iter().find(|p| p.name == name).unwrap();
            let metric = p.score.as_deref().unwrap_or("score");
            let base = verify_value(p, None, metric);
            assert!(
                (base - p.baseline).abs() <= 1e-8 * p.baseline.abs(),
                "{name}: {base}"
            );
            let best = verify_value(p, Some(&at_optimum), metric);
            assert!((best - p.optimum).abs() < 1e-9, "{name}: {best}");
            let worse = verify_value(p, Some(&format!("{at_optimum}{off}\n")), metric);
            assert!(worse > p.optimum + 1e-3, "{name}: {worse}");
        }
    }

    #[test]
    fn the_bundled_manifest_lists_six_problems_with_sane_values() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/problems/manifest.toml");
        let all = load_manifest(&path).unwrap();
        assert!(all.len() >= 6, "{}", all.len());
        for p in &all {
            assert!(p.dir.join("hone.toml").is_file(), "{}", p.name);
            assert!(p.baseline > p.optimum, "{}", p.name);
        }
        assert!(all.iter().any(|p| p.name == "charlm"));
        assert!(select(&all, &[], true).unwrap().len() >= 2);
        assert!(select(&all, &["nope".into()], false).is_err());
    }
}
