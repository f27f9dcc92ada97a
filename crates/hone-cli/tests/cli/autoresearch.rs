//! `hone init` and `hone run` on a repository shaped like Karpathy's autoresearch (issue 15,
//! items 1–3): prepare.py holds the data and evaluation constants and functions, train.py the
//! hyperparameters, a `TIME_BUDGET` import and a summary block printing `val_bpb:`; the project
//! runs with `uv run train.py`. train.py here is a pure-python CPU stand-in that computes a
//! val_bpb-like number from its hyperparameters at once, and fails (non-zero exit) exactly where
//! the real program would: a batch that does not divide, a fraction out of range, betas outside
//! (0, 1). A `uv` shim on PATH runs `python3 <script>`.

use crate::support::*;

const PREPARE: &str = include_str!("../fixtures/autoresearch/prepare.py");

const TRAIN: &str = include_str!("../fixtures/autoresearch/train.py");

const PROGRAM_MD: &str = "# autoresearch\n\nThe user's own instructions: keep them.\n";

/// The autoresearch-shaped repository, committed, without hone.toml.
fn autoresearch_repo() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("autoresearch");
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    for (name, text) in [
        ("prepare.py", PREPARE),
        ("train.py", TRAIN),
        ("program.md", PROGRAM_MD),
        (
            "pyproject.toml",
            "[project]\nname = \"autoresearch\"\nversion = \"0.1.0\"\nrequires-python = \">=3.10\"\n",
        ),
        ("uv.lock", "version = 1\nrequires-python = \">=3.10\"\n"),
        (".gitignore", ".hone/\n__pycache__/\n"),
    ] {
        put(dir.join(name), text);
    }
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "autoresearch"]);
    (tmp, dir)
}

/// A `uv` on PATH that runs `uv run <script>` as `python3 <script>`.
fn uv_shim() -> (tempfile::TempDir, String) {
    let (bin, _record) = fake_tool("uv", "#!/bin/sh\nshift\nexec python3 \"$@\"\n");
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap()
    );
    (bin, path)
}

fn statuses(dir: &Path) -> Vec<(String, String)> {
    let log = hone_in(dir, &["log", "--json"]);
    String::from_utf8_lossy(&log.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|row| {
            (
                row["status"].as_str().unwrap_or("").to_string(),
                row["description"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn init_writes_the_safe_spec_for_an_autoresearch_repository_and_keeps_program_md() {
    let (_t, dir) = autoresearch_repo();
    let out = hone_in(&dir, &["init"]);
    let t = text(&out);
    println!("{t}");
    assert!(out.status.success(), "{t}");
    assert_eq!(
        std::fs::read_to_string(dir.join("program.md")).unwrap(),
        PROGRAM_MD,
        "an existing program.md is kept"
    );
    assert!(t.contains("kept ") && t.contains("program.md"), "{t}");
    let toml = std::fs::read_to_string(dir.join("hone.toml")).unwrap();
    for line in [
        "editable  = [\"train.py\"]",
        "protected = [\"prepare.py\"]",
        "metric    = \"val_bpb\"",
        "direction = \"minimize\"",
        "command   = \"uv run train.py\"",
        // TIME_BUDGET 300 s, twice, plus a margin.
        "timeout   = \"720s\"",
    ] {
        assert!(toml.lines().any(|l| l == line), "{line:?} in:\n{toml}");
    }
    for why in [
        "TIME_BUDGET (prepare.py:5) is 300 s",
        "uv.lock: the project runs with uv",
        "train.py:57 prints `val_bpb: <number>`",
        // The progress line autoresearch prints each step, read as the run's curve.
        "# train.py:54 prints a step and `loss` as it trains",
        "progress  = 'step (?P<step>\\d+) \\(.*?%\\) \\| loss: (?P<value>[0-9.eE+-]+)'",
        // A tenth of TIME_BUDGET (300 s) before anything may be stopped.
        "# prune_warmup   = \"30s\"",
        "#   H100_BF16_PEAK_FLOPS (train.py:26): only printed",
        "#   TIME_BUDGET (prepare.py): defined by the protected evaluator",
        "#   MAX_SHARD (prepare.py): defined by the protected evaluator",
    ] {
        assert!(toml.contains(why), "{why:?} in:\n{toml}");
    }
    // The knob table: the constants that must not move are fixed or absent; expressions
    // and tuples are knobs with ranges that keep the program valid.
    let row = |name: &str| {
        t.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no row for {name} in:\n{t}"))
            .to_string()
    };
    for name in ["TIME_BUDGET", "MAX_SHARD", "VAL_SHARD", "EVAL_TOKENS"] {
        assert!(
            !t.lines().any(|l| l.split_whitespace().next() == Some(name)),
            "{name} is the evaluator's, not a knob:\n{t}"
        );
    }
    assert!(row("H100_BF16_PEAK_FLOPS").contains("not searched"), "{t}");
    // 2**19 only grows and DEVICE_BATCH_SIZE only shrinks (by factors of two): the assert that
    // one divides the other keeps holding.
    assert!(row("TOTAL_BATCH_SIZE").contains("524288"), "{t}");
    assert!(row("TOTAL_BATCH_SIZE").contains("choice of 3"), "{t}");
    assert!(row("ADAM_BETAS[0]").contains("0.25..0.98"), "{t}");
    assert!(row("ADAM_BETAS[1]").contains("0.8..0.995"), "{t}");
    assert!(row("WARMDOWN_RATIO").contains("0.25..0.95"), "{t}");
    assert!(row("DEVICE_BATCH_SIZE").contains("choice of 3"), "{t}");

    // A second init without --force leaves both files alone; --force writes both.
    let again = hone_in(&dir, &["init"]);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    assert_says(&again, "--force");
    put(dir.join("hone.toml"), "# mine\n");
    let forced = hone_in(&dir, &["init", "--force"]);
    assert!(forced.status.success(), "{}", text(&forced));
    assert!(std::fs::read_to_string(dir.join("hone.toml"))
        .unwrap()
        .contains("metric    = \"val_bpb\""));
    assert_ne!(
        std::fs::read_to_string(dir.join("program.md")).unwrap(),
        PROGRAM_MD,
        "--force overwrites program.md too"
    );
}

#[test]
fn the_initial_design_on_autoresearch_crashes_on_no_inferred_range() {
    let (_t, dir) = autoresearch_repo();
    let init = hone_in(&dir, &["init"]);
    assert!(init.status.success(), "{}", text(&init));
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "hone init"]);
    let (_bin, path) = uv_shim();
    let out = ok(Command::new(HONE)
        .args(["run", "-n", "12"])
        .current_dir(&dir)
        .env("PATH", &path)
        .output()
        .unwrap());
    let rows = statuses(&dir);
    assert_eq!(rows.len(), 12, "{rows:?}\n{}", text(&out));
    assert_eq!(rows[0].0, "baseline", "{rows:?}");
    let crashed: Vec<&(String, String)> = rows.iter().filter(|(s, _)| s == "crash").collect();
    assert!(crashed.is_empty(), "crashes: {crashed:?}\n{}", text(&out));
    // The run moved the expression and tuple knobs, and never the time budget.
    let all = rows
        .iter()
        .map(|(_, d)| d.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(all.contains("ADAM_BETAS["), "{all}");
    assert!(all.contains("TOTAL_BATCH_SIZE"), "{all}");
    assert!(
        !all.contains("TIME_BUDGET") && !all.contains("H100"),
        "{all}"
    );
}

const SKLEARN: &str = include_str!("../fixtures/sklearn/train.py");

/// A repository holding [`SKLEARN`] as `train.py`, committed.
fn sklearn_repo() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    git(dir, &["init", "-q", "-b", "main"]);
    put(dir.join("train.py"), SKLEARN);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "sklearn"]);
    tmp
}

#[test]
fn init_on_a_scikit_learn_script_keeps_momentum_a_fraction() {
    let tmp = sklearn_repo();
    let dir = tmp.path();
    let init = hone_in(dir, &["init"]);
    let t = text(&init);
    println!("{t}");
    assert!(init.status.success(), "{t}");
    let momentum = t
        .lines()
        .find(|l| l.split_whitespace().next() == Some("MOMENTUM"))
        .unwrap_or_else(|| panic!("{t}"));
    assert!(momentum.contains("0.6..0.99"), "{momentum}");
    let toml = std::fs::read_to_string(dir.join("hone.toml")).unwrap();
    // The solver's iteration count is the run's length: fixed.
    assert!(
        toml.contains("MAX_ITER (train.py:8): a time budget, run length"),
        "{toml}"
    );
    assert!(toml.contains("metric    = \"accuracy\""), "{toml}");
    assert!(toml.contains("direction = \"maximize\""), "{toml}");
    // The built-in optimizer writes no code: no sandbox to offer.
    assert!(!toml.contains("[sandbox]"), "{toml}");
    assert!(
        toml.contains("TEST_SIZE (train.py:9): a time budget, run length, data size, data split"),
        "{toml}"
    );
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "hone init"]);
    let run = hone_in(dir, &["run", "-n", "12"]);
    assert!(run.status.success(), "{}", text(&run));
    let rows = statuses(dir);
    assert!(
        rows.iter().all(|(s, _)| s != "crash"),
        "{rows:?}\n{}",
        text(&run)
    );
}

#[test]
fn init_check_runs_the_baseline_once_and_reports_the_metric() {
    let (_t, dir) = autoresearch_repo();
    let (_bin, path) = uv_shim();
    let init = |args: &[&str]| {
        Command::new(HONE)
            .args(args)
            .current_dir(&dir)
            .env("PATH", &path)
            .output()
            .unwrap()
    };
    let out = init(&["init", "--check"]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("check: val_bpb = 0.7176"), "{t}");
    // The progress setting init wrote reads the three step lines the script prints.
    assert!(
        t.contains("check: progress read 3 points, the last at step 2:"),
        "{t}"
    );
    // On the hone.toml that exists (here edited to a wrong metric): checked, not rewritten.
    edit_spec(&dir, |s| {
        s.replace("metric    = \"val_bpb\"", "metric    = \"val_loss\"")
    });
    let wrong = init(&["init", "--check"]);
    let t = text(&wrong);
    assert_eq!(wrong.status.code(), Some(1), "{t}");
    assert!(t.contains("printed no `val_loss: <number>`"), "{t}");
    assert!(t.contains("depth:"), "the last lines are shown: {t}");
    assert!(std::fs::read_to_string(dir.join("hone.toml"))
        .unwrap()
        .contains("\"val_loss\""));
    // A misspelt metric gets the fix `hone run` would give: the name a line prints.
    edit_spec(&dir, |s| {
        s.replace("metric    = \"val_loss\"", "metric    = \"val_bp\"")
    });
    let typo = init(&["init", "--check"]);
    let t = text(&typo);
    assert_eq!(typo.status.code(), Some(1), "{t}");
    assert!(
        t.contains("a line prints `val_bpb`") && t.contains("metric = \"val_bpb\""),
        "{t}"
    );
}

#[test]
fn init_names_the_agent_it_is_asked_for() {
    let tmp = sklearn_repo();
    let dir = tmp.path();
    let bad = hone_in(dir, &["init", "--agent", "clade"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    assert!(text(&bad).contains("expected one of"), "{}", text(&bad));
    assert!(!dir.join("hone.toml").exists(), "nothing written");
    // A command needs more than its kind: refused, nothing written.
    let command = hone_in(dir, &["init", "--agent", "command"]);
    assert_eq!(command.status.code(), Some(2), "{}", text(&command));
    assert!(
        text(&command).contains("needs more than a kind"),
        "{}",
        text(&command)
    );
    assert!(!dir.join("hone.toml").exists(), "nothing written");
    // An HTTP model gets a model, its server and its key's variable to check, and a budget;
    // what it wrote loads.
    for kind in ["openai", "anthropic"] {
        ok(hone_in(dir, &["init", "--agent", kind, "--force"]));
        let toml = std::fs::read_to_string(dir.join("hone.toml")).unwrap();
        assert!(
            toml.contains(&format!("kind = \"{kind}\"\nmodel = "))
                && toml.contains("api_key_env = ")
                && toml.contains("max_cost_usd = "),
            "{toml}"
        );
        let checked = ok(hone_in(dir, &["init", "--check"]));
        assert!(
            text(&checked).contains("is not set: `hone run` needs it"),
            "{}",
            text(&checked)
        );
    }
    // Every preset's hone.toml loads, with a bound on a turn and a budget for the night: in
    // tokens for the tools that report no cost.
    for kind in ["codex", "aider", "gemini", "opencode"] {
        ok(hone_in(dir, &["init", "--agent", kind, "--force"]));
        let toml = std::fs::read_to_string(dir.join("hone.toml")).unwrap();
        let budget = if matches!(kind, "codex" | "gemini") {
            "max_tokens = "
        } else {
            "max_cost_usd = "
        };
        assert!(
            toml.contains("timeout = \"20m\"")
                && toml.contains(budget)
                && toml.contains("max_time = \"8h\""),
            "{toml}"
        );
        ok(hone_in(dir, &["init", "--check"]));
    }
    let out = ok(hone_in(dir, &["init", "--agent", "claude", "--force"]));
    let toml = std::fs::read_to_string(dir.join("hone.toml")).unwrap();
    assert!(toml.contains("kind = \"claude\""), "{toml}");
    assert!(
        toml.contains("extra_args = [\"--max-turns\", \"30\"]") && toml.contains("max_cost_usd = "),
        "{toml}"
    );
    // The sandbox is offered, not chosen: the run will say so (see `sandbox.rs`).
    assert!(
        toml.contains("[sandbox]\n") && toml.contains("\n# kind = \"bwrap\"\n"),
        "{toml}"
    );
    assert!(
        text(&out).contains("say in program.md what the project is"),
        "{}",
        text(&out)
    );
    // What it wrote is a hone.toml hone reads, and runs.
    ok(hone_in(dir, &["init", "--check"]));
    // On the hone.toml that exists, --check writes nothing: an --agent beside it is said.
    let checked = ok(hone_in(dir, &["init", "--check", "--agent", "codex"]));
    assert!(
        text(&checked).contains("--agent codex: hone.toml exists and --check only checks it"),
        "{}",
        text(&checked)
    );
    let after = std::fs::read_to_string(dir.join("hone.toml")).unwrap();
    assert_eq!(after, toml, "hone.toml is left as it was");
}
