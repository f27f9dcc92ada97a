//! `hone init` and `hone demo`, and spec errors that name the file, line and key.

use crate::support::*;

#[test]
fn broken_specs_name_the_line_and_key() {
    let r = Repo::new("", SCORE, "");
    let base = std::fs::read_to_string(r.dir.join("hone.toml")).unwrap();
    let cases: Vec<(String, &str)> = vec![
        (
            base.replace("metric = \"score\"", "metrc = \"score\""),
            "hone.toml:8: `verify.metrc`: unknown key in [verify]; did you mean `metric`?",
        ),
        (
            base.replace("timeout = \"60s\"", "timeout = \"sixty\""),
            "hone.toml:9: `verify.timeout`",
        ),
        (
            base.replace("editable = [\"value.txt\"]", "editable = [1]"),
            "hone.toml:2: `loop.editable`: expected a list of strings",
        ),
        (
            base.replace("metric = \"score\"\n", ""),
            "`verify.metric`: required",
        ),
        (
            base.replace(
                "protected = [\"prepare.py\"]",
                "protected = [\"value.txt\"]",
            ),
            "hone.toml:3: `loop.protected`",
        ),
        (
            format!("{base}\n[stp]\nmax_experiments = 3\n"),
            "unknown section `[stp]`",
        ),
    ];
    for (toml, expected) in cases {
        put(r.dir.join("hone.toml"), &toml);
        let out = r.hone(&["run"]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        let msg = text(&out);
        assert!(msg.contains(expected), "expected {expected:?} in:\n{msg}");
    }
}

#[test]
fn init_writes_a_spec_lists_knobs_and_refuses_to_overwrite() {
    let (_t, dir) = knob_repo();
    std::fs::remove_file(dir.join("hone.toml")).unwrap();
    let out = ok(hone_in(&dir, &["init", "--metric", "loss"]));
    let t = text(&out);
    assert!(t.contains("WIDTH") && t.contains("DEPTH"), "{t}");
    let toml = std::fs::read_to_string(dir.join("hone.toml")).unwrap();
    assert!(toml.contains("editable  = [\"params.txt\"]"), "{toml}");
    assert!(dir.join("program.md").exists());
    let again = hone_in(&dir, &["init"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(text(&again).contains("already exists"));
    assert_eq!(
        std::fs::read_to_string(dir.join("hone.toml")).unwrap(),
        toml
    );
}

#[test]
fn demo_runs_offline_on_the_bundled_example() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let out = ok(Command::new(HONE)
        .args(["demo", "-n", "3", "--dir"])
        .arg(&dir)
        .output()
        .unwrap());
    let t = text(&out);
    assert!(t.contains("val_bpb (minimize): baseline 2."), "{t}");
    let rows = log_in(&dir);
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0]["status"], "baseline");
    assert!(rows[0]["objective"].as_f64().unwrap() > 0.5);
}

#[test]
fn init_in_a_new_project_asks_for_a_commit_and_guesses_nothing_silently() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    git(dir, &["init", "-q", "-b", "main"]);
    put(dir.join("params.py"), "LR = 0.01\nLAYERS = 4\n");
    let out = ok(hone_in(dir, &["init", "--metric", "accuracy"]));
    let t = text(&out);
    assert!(
        t.contains("LR") && t.contains("LAYERS"),
        "untracked files are scanned: {t}"
    );
    assert!(t.contains("not committed yet: params.py"), "{t}");
    let toml = std::fs::read_to_string(dir.join("hone.toml")).unwrap();
    assert!(toml.contains("editable  = [\"params.py\"]"), "{toml}");
    assert!(
        toml.contains("direction = \"maximize\""),
        "accuracy is maximized: {toml}"
    );
    // Running before committing says what to do.
    let run = Command::new(HONE)
        .arg("run")
        .current_dir(dir)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1));
    assert_says(&run, "commit");
}

#[test]
fn init_makes_a_scoring_script_beside_the_training_the_sealed_evaluator() {
    // train.py writes model.json and prints only its training loss; evaluate.py scores the
    // file. hone.toml gets evaluate.py as the sealed evaluator, protected, with its metric.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    git(dir, &["init", "-q", "-b", "main"]);
    std::fs::create_dir(dir.join("data")).unwrap();
    put(dir.join("data/target.json"), "{\"t\": 3.0}\n");
    put(
        dir.join("train.py"),
        "import json\nLR = 0.1\nEPOCHS = 5\nT = json.load(open('data/target.json'))['t']\nw = 0.0\nfor e in range(EPOCHS):\n    w += LR * (T - w)\n    print(f'epoch {e} train_loss {abs(T - w):.4f}')\njson.dump({'w': w}, open('model.json', 'w'))\n",
    );
    put(
        dir.join("evaluate.py"),
        "import json\nTOL = 0.5\nm = json.load(open('model.json'))\nT = json.load(open('data/target.json'))['t']\nprint(f'val_error: {abs(m[\"w\"] - T):.6f}')\n",
    );
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "project"]);
    let out = ok(hone_in(dir, &["init", "--check"]));
    let t = text(&out);
    assert!(t.contains("then `python3 evaluate.py` once"), "{t}");
    assert!(t.contains("check: val_error = 1.77147"), "{t}");
    let toml = std::fs::read_to_string(dir.join("hone.toml")).unwrap();
    for line in [
        "editable  = [\"train.py\"]",
        "protected = [\"evaluate.py\"]",
        "evaluate  = \"python3 evaluate.py\"",
        "outputs   = [\"model.json\"]",
        // What both read is the scorer's input: pinned, not an output.
        "pinned    = [\"data/target.json\"]",
        "metric    = \"val_error\"",
        "direction = \"minimize\"",
        // The run length is no knob: a candidate must not change it.
        "fixed     = [\"EPOCHS\"]",
    ] {
        assert!(toml.contains(line), "{line}\n{toml}");
    }
    // The scorer's constants are no knobs.
    assert!(!t.contains("TOL"), "{t}");
    // What it wrote runs sealed: an agent's train.py that prints a perfect score counts for
    // nothing, and no warning says the agent can print its own.
    let agent = "kind = \"command\"\ncommand = \"sed -i 's/^LR = 0.1$/LR = 0.2/' train.py && echo \\\"print('val_error: 0')\\\" >> train.py\"";
    put(
        dir.join("hone.toml"),
        toml.replace("kind = \"knobs\"", agent),
    );
    std::fs::remove_file(dir.join("model.json")).unwrap();
    git(dir, &["add", "hone.toml", "program.md"]);
    git(dir, &["commit", "-q", "-m", "hone"]);
    let out = ok(hone_in(dir, &["run", "-n", "2"]));
    assert!(
        !text(&out).contains("can print any value"),
        "{}",
        text(&out)
    );
    let log = log_in(dir);
    assert_eq!(log[1]["status"], "keep", "{log:?}");
    let v = log[1]["objective"].as_f64().unwrap();
    assert!(
        v > 0.5 && v < 1.77,
        "the scorer's value, not the printed 0: {v}"
    );
}

#[test]
fn a_scorer_that_imports_the_training_script_is_not_called_sealed() {
    // evaluate.py rebuilds the model from train.py's class: a candidate's train.py then runs
    // inside the scorer and can print any score. init does not make it the sealed evaluator
    // and says why; set by hand, `hone run` warns.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    git(dir, &["init", "-q", "-b", "main"]);
    put(
        dir.join("train.py"),
        "import json\nLR = 0.1\nclass Model:\n    def __init__(self, w): self.w = w\nif __name__ == '__main__':\n    w = 3.0 * LR\n    print(f'train_loss: {abs(3.0 - w):.4f}')\n    json.dump({'w': w}, open('model.json', 'w'))\n",
    );
    put(
        dir.join("evaluate.py"),
        "import json\nfrom train import Model\nm = Model(json.load(open('model.json'))['w'])\nprint(f'val_error: {abs(m.w - 3.0):.6f}')\n",
    );
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "project"]);
    let t = text(&ok(hone_in(dir, &["init"])));
    assert!(
        t.contains("not sealed: evaluate.py scores what train.py writes, but `evaluate.py` imports `train.py`"),
        "{t}"
    );
    let toml = std::fs::read_to_string(dir.join("hone.toml")).unwrap();
    assert!(!toml.contains("\nevaluate "), "{toml}");
    assert!(
        toml.contains("# evaluate.py scores what train.py writes, but"),
        "{toml}"
    );
    edit_spec(dir, |t| {
        t.replace(
            "[verify]\n",
            "[verify]\nevaluate = \"python3 evaluate.py\"\noutputs = [\"model.json\"]\n",
        )
        .replace("metric    = \"train_loss\"", "metric    = \"val_error\"")
    });
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "hone"]);
    let out = text(&ok(hone_in(dir, &["run", "-n", "1"])));
    assert!(
        out.contains("[verify] evaluate is not sealed: `evaluate.py` imports `train.py`, which a candidate may change"),
        "{out}"
    );
}
