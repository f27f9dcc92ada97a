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
