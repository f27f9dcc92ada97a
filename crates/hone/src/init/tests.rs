//! Tests of `hone init`'s reading of a repository: the evaluator, the metric, the runner, the time budget and the constants that must not be knobs.

use super::*;
use std::collections::BTreeMap;

const PREPARE: &str = "MAX_SEQ_LEN = 2048\nTIME_BUDGET = 300\nMAX_SHARD = 6542\n\
                       def make_dataloader(split):\n    pass\n\
                       def evaluate_bpb(model):\n    return 1.0\n";
const TRAIN: &str = "import time\nfrom prepare import (\n    MAX_SEQ_LEN,\n    TIME_BUDGET,\n    \
                     evaluate_bpb,\n)\nimport model_utils\nDEPTH = 8\n\
                     print(f\"step {0}\")\nprint(f\"val_bpb:          {1.0:.6f}\")\n\
                     print(f\"training_seconds: {300.1:.1f}\")\n";

fn repo(files: &[(&str, &str)]) -> (Vec<String>, BTreeMap<String, String>) {
    let map: BTreeMap<String, String> = files
        .iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect();
    (map.keys().cloned().collect(), map)
}

fn analyzed(files: &[(&str, &str)]) -> Analysis {
    let (paths, texts) = repo(files);
    analyze(Path::new("/nonexistent"), &paths, &|p| {
        texts.get(p).cloned()
    })
}

#[test]
fn finds_the_evaluator_the_metric_the_runner_and_the_budget() {
    let a = analyzed(&[
        ("prepare.py", PREPARE),
        ("train.py", TRAIN),
        ("model_utils.py", "WIDTH = 3\n"),
        ("uv.lock", ""),
    ]);
    assert_eq!(a.script.as_deref(), Some("train.py"));
    assert_eq!(
        a.evaluators,
        [Evaluator {
            path: "prepare.py".into(),
            imported: vec![
                "MAX_SEQ_LEN".into(),
                "TIME_BUDGET".into(),
                "evaluate_bpb".into()
            ],
            defines: vec![
                "MAX_SEQ_LEN".into(),
                "TIME_BUDGET".into(),
                "MAX_SHARD".into()
            ],
        }],
        "model_utils holds no evaluation: not an evaluator"
    );
    assert_eq!(a.metric.value, "val_bpb");
    assert!(a.metric.why.contains("train.py:10"), "{}", a.metric.why);
    assert_eq!(a.direction.value, Direction::Minimize);
    assert_eq!(a.command.value, "uv run train.py");
    assert_eq!(a.timeout.value, 2 * 300 + TIMEOUT_MARGIN_SECS);
    assert!(
        a.timeout.why.contains("TIME_BUDGET (prepare.py:2)"),
        "{}",
        a.timeout.why
    );
}

#[test]
fn runners_and_metric_fallbacks() {
    let a = analyzed(&[
        ("train.py", "print('accuracy:', 0.9)\n"),
        ("pyproject.toml", ""),
    ]);
    assert_eq!(a.command.value, "uv run train.py");
    assert_eq!(a.metric.value, "accuracy");
    assert_eq!(a.direction.value, Direction::Maximize);
    assert!(a.timeout.guessed);
    let plain = analyzed(&[("fit.py", "print('r2: %.3f' % 0.5)\n")]);
    assert_eq!(plain.script.as_deref(), Some("fit.py"));
    assert_eq!(plain.command.value, "python3 fit.py");
    assert!(plain.command.guessed);
    assert_eq!(plain.metric.value, "r2");
    assert!(
        plain.metric.guessed,
        "r2 has no metric word: a guess to check"
    );
    let none = analyzed(&[("README.md", "hi\n")]);
    assert_eq!(none.metric.value, "score");
    assert_eq!(none.command.value, "./measure.sh");
}

#[test]
fn the_venv_runs_by_absolute_path() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join(".venv/bin")).unwrap();
    std::fs::write(tmp.path().join(".venv/bin/python"), "").unwrap();
    let files = vec!["train.py".to_string()];
    let a = analyze(tmp.path(), &files, &|_| Some("print('loss: 1')\n".into()));
    assert!(a.command.value.starts_with('/'), "{}", a.command.value);
    assert!(a.command.value.ends_with("/.venv/bin/python train.py"));
    assert!(a.command.why.contains("worktrees"));
}

#[test]
fn check_runs_the_command_once_and_reads_the_metric() {
    let tmp = tempfile::tempdir().unwrap();
    let ok = check(
        tmp.path(),
        ("echo step 1; echo 'val_bpb: 0.75'", None),
        60,
        ("val_bpb", None),
        None,
    )
    .unwrap();
    assert_eq!(ok.exit, crate::exec::Exit::Code(0));
    assert_eq!(ok.value, Some(0.75));
    assert_eq!(ok.progress, None, "no progress setting, nothing read");
    let bad = check(
        tmp.path(),
        ("echo 'loss: 3'; exit 2", None),
        60,
        ("val_bpb", None),
        None,
    )
    .unwrap();
    assert_eq!(bad.exit, crate::exec::Exit::Code(2));
    assert_eq!(bad.value, None);
    assert_eq!(bad.tail, ["loss: 3"]);
    // With a progress setting: its points, as the run would read them (`\r` ends a line).
    let bar =
        "printf 'step 1 | loss: 3\\rstep 2 | loss: 2\\rstep 3 | loss: 1\\n'; echo 'val_bpb: 0.5'";
    let read = r"step (?P<step>\d+) \| loss: (?P<value>[0-9.]+)";
    let c = check(tmp.path(), (bar, None), 60, ("val_bpb", None), Some(read)).unwrap();
    assert_eq!(c.progress, Some((3, Some((3.0, 1.0)))));
    let c = check(tmp.path(), (bar, None), 60, ("val_bpb", None), Some("lr")).unwrap();
    assert_eq!(c.progress, Some((0, None)), "a setting that reads nothing");
    // A sealed evaluator: the metric comes from its output alone, after the command's; the
    // command's points still count.
    let train = "echo 'step 1 | loss: 3'; echo 'val_bpb: 9'; echo 0.25 > out.txt";
    let c = check(
        tmp.path(),
        (train, Some("echo \"val_bpb: $(cat out.txt)\"")),
        60,
        ("val_bpb", None),
        Some(read),
    )
    .unwrap();
    assert_eq!((c.value, c.stage), (Some(0.25), "evaluate"));
    assert_eq!(c.progress, Some((1, Some((1.0, 3.0)))));
    let c = check(
        tmp.path(),
        (train, Some("echo done")),
        60,
        ("val_bpb", None),
        None,
    )
    .unwrap();
    assert_eq!(
        (c.value, c.stage),
        (None, "evaluate"),
        "the command's value does not count"
    );
    assert_eq!(c.tail, ["done"]);
    // A command that fails: the evaluator never runs.
    let c = check(
        tmp.path(),
        ("exit 3", Some("echo 'val_bpb: 1'")),
        60,
        ("val_bpb", None),
        None,
    )
    .unwrap();
    assert_eq!(
        (c.exit, c.value, c.stage),
        (crate::exec::Exit::Code(3), None, "command")
    );
}

#[test]
fn fixed_names_the_constants_that_set_the_measurement_once_each() {
    let a = analyzed(&[("train.py", TRAIN)]);
    let found = knobs::discover(
        "train.py",
        "LR = 0.1\nNUM_EPOCHS = 5\nSEEDS = (1, 2)\nprint(LR, NUM_EPOCHS, SEEDS)\n",
    )
    .unwrap();
    let d = draft(&a, &found, &["train.py".into()], vec![], None, None);
    assert_eq!(d.fixed, ["NUM_EPOCHS", "SEEDS"]);
    let text = spec_text(&d);
    let spec = crate::spec::Spec::parse(std::path::Path::new("hone.toml"), &text)
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(spec.loop_.fixed, ["NUM_EPOCHS", "SEEDS"]);
}

#[test]
fn the_spec_explains_each_choice() {
    let a = analyzed(&[
        ("prepare.py", PREPARE),
        ("train.py", TRAIN),
        ("uv.lock", ""),
    ]);
    let found = knobs::discover(
        "train.py",
        "DEPTH = 8\nPEAK = 1e12\nprint(f'mfu: {1/PEAK}')\nMAX_SHARD = 10\n",
    )
    .unwrap();
    let d = draft(&a, &found, &["train.py".into()], vec![], None, None);
    let text = spec_text(&d);
    let spec: toml_edit::DocumentMut = text.parse().unwrap();
    assert_eq!(
        spec["loop"]["editable"].as_array().map(|a| a.len()),
        Some(1)
    );
    assert_eq!(spec["loop"]["protected"][0].as_str(), Some("prepare.py"));
    assert_eq!(spec["verify"]["metric"].as_str(), Some("val_bpb"));
    assert_eq!(spec["verify"]["timeout"].as_str(), Some("720s"));
    for expected in [
        "#   PEAK (train.py:2): only printed",
        "#   TIME_BUDGET (prepare.py): defined by the protected evaluator",
        "#   MAX_SHARD (prepare.py): defined by the protected evaluator",
        "#   MAX_SHARD (also in prepare.py): the evaluator defines it too",
        "uv.lock: the project runs with uv",
        "train.py:10 prints `val_bpb: <number>`",
    ] {
        assert!(text.contains(expected), "{expected:?} in:\n{text}");
    }
}

#[test]
fn a_script_that_prints_its_steps_gets_progress_in_its_spec() {
    let train = "for step in range(100):\n    \
                 print(f\"\\rstep {step:05d} ({pct:.1f}%) | loss: {smooth:.6f} | dt: {dt:.0f}ms\", end=\"\")\n\
                 print(f\"val_bpb: {v:.6f}\")\n";
    let a = analyzed(&[("train.py", train)]);
    let d = draft(&a, &[], &["train.py".into()], vec![], None, None);
    let text = spec_text(&d);
    assert!(
        text.contains("# train.py:2 prints a step and `loss` as it trains"),
        "{text}"
    );
    let spec: toml_edit::DocumentMut = text.parse().unwrap();
    let progress = spec["verify"]["progress"]
        .as_str()
        .expect("progress is set");
    assert!(
        spec["verify"].get("prune").is_none(),
        "prune is only suggested"
    );
    // hone's own reader takes it, and reads the line the script prints.
    let read = crate::verify::prune::Progress::compile(progress).unwrap();
    assert_eq!(
        read.read("step 00042 (4.2%) | loss: 3.250000 | dt: 310ms"),
        Some((42.0, 3.25))
    );
    // The suggested pruning, uncommented, is a spec hone takes.
    let pruning = text.replace("# prune", "prune");
    let parsed = crate::spec::Spec::parse(Path::new("hone.toml"), &pruning);
    assert!(parsed.is_ok(), "{:?}\n{pruning}", parsed.err());
    assert!(
        pruning.contains("prune_warmup   = \"60s\""),
        "no time budget: {pruning}"
    );
    // A script without step prints gets none.
    let a = analyzed(&[("train.py", TRAIN)]);
    let d = draft(&a, &[], &["train.py".into()], vec![], None, None);
    assert!(!spec_text(&d).contains("progress"));
}

#[test]
fn the_metric_is_the_held_out_one_printed_at_the_end_not_a_training_loss_or_an_error_line() {
    let train = "for epoch in range(3):\n    loss = step()\n    print(f\"loss: {loss:.4f}\")\n\
                 val_loss = evaluate()\nprint(f\"val_loss: {val_loss:.4f}\")\n";
    let a = analyzed(&[("train.py", train)]);
    assert_eq!(a.metric.value, "val_loss");
    assert!(a.metric.guessed, "there was a choice");
    assert!(
        a.metric.why.contains("train.py:5") && a.metric.why.contains("also prints loss"),
        "{}",
        a.metric.why
    );
    assert_eq!(a.direction.value, Direction::Minimize);
    // A literal word where the value goes is an error path, not the metric.
    let fit = "import sys\nif diverged:\n    print(\"loss: nan\")\n    sys.exit(3)\n\
               print(f\"epoch 1 loss={l} acc={a}\")\nprint(f\"accuracy: {acc:.5f}\")\n";
    let a = analyzed(&[("train.py", fit)]);
    assert_eq!(a.metric.value, "accuracy");
    assert!(!a.metric.guessed);
    assert_eq!(a.direction.value, Direction::Maximize);
}

#[test]
fn scores_rates_and_rankings_are_maximized_and_an_unknown_name_is_a_guess() {
    for name in [
        "score",
        "val_score",
        "r2",
        "mAP",
        "tokens_per_sec",
        "tok/s",
        "test_acc",
        "samples_per_ms",
        "tokens/ms",
    ] {
        assert_eq!(known_direction(name), Some(Direction::Maximize), "{name}");
    }
    for name in [
        "val_bpb",
        "loss",
        "step_time",
        "latency",
        "training_seconds",
        "wer",
        "time_to_accuracy",
    ] {
        assert_eq!(known_direction(name), Some(Direction::Minimize), "{name}");
    }
    let unknown = Choice {
        value: "quality".to_string(),
        why: String::new(),
        guessed: false,
    };
    let d = direction_choice(&unknown);
    assert_eq!(d.value, Direction::Minimize);
    assert!(d.guessed, "{}", d.why);
}

#[test]
fn a_metric_given_that_the_script_never_prints_is_marked_to_check() {
    let a = analyzed(&[(
        "train.py",
        "for step in range(3):\n    print(f\"step {step} | loss: {0.5}\")\nprint(f\"val_mse: {0.25}\")\n",
    )]);
    let given = |m: &str| draft(&a, &[], &["train.py".into()], vec![], None, Some(m.into())).metric;
    let metric = given("val_loss");
    assert!(metric.guessed);
    assert!(
        metric.why.contains("train.py prints") && metric.why.contains("val_mse, not `val_loss`"),
        "{}",
        metric.why
    );
    let metric = given("val_mse");
    assert!(!metric.guessed, "{}", metric.why);
    assert_eq!(metric.why, "from --metric");
}
