//! The gate and its scope: edits outside `editable` are violations and never reach the verifier,
//! whatever the index or the verifier itself does; pinned inputs must not change mid-run.

use crate::support::*;

/// A repository whose verifier counts its runs (the counter), stopping after `max`
/// experiments of `script`.
fn counted_repo(max: u32, script: &str) -> (Repo, RunCounter) {
    let runs = RunCounter::new();
    (Repo::stops_after(max, &runs.command, script), runs)
}

#[test]
fn violation_is_never_verified_and_leaves_the_branch() {
    let (r, runs) = counted_repo(
        4,
        "write\tprepare.py\tprint('val_bpb: 0.0')\\n\nwrite\tvalue.txt\tscore: 1\\n\n---\nwrite\tnotes.txt\thello\\n\n---\nwrite\tdata/input.txt\tswapped\\n\n",
    );
    ok(r.hone(&["run", "--tag", "v"]));
    assert_eq!(
        r.statuses(),
        ["baseline", "violation", "violation", "violation"]
    );
    let log = r.log();
    assert_reason(&log[1], "prepare.py");
    assert_reason(&log[2], "not editable");
    assert_reason(&log[3], "data/input.txt");
    // Only the baseline ran the verifier.
    assert_eq!(runs.runs(), 1);
    assert_eq!(r.rev("hone/v"), r.rev("main"));
    // The attempts are archived all the same.
    assert!(git(&r.dir, &["show", "refs/hone/v/1:prepare.py"]).contains("val_bpb"));
}

#[test]
fn pinned_input_changed_mid_run_stops_the_run() {
    let r = Repo::scored(6, "");
    // The "agent" escapes its worktree and rewrites the pinned data in the user's checkout.
    let pinned = r.dir.join("data/input.txt");
    put(
        &r.script,
        format!("write\tvalue.txt\tscore: 4\\n\n---\nwrite\t{}\ttampered\\n\nwrite\tvalue.txt\tscore: 1\\n\n", pinned.display()),
    );
    let out = r.hone(&["run"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let msg = text(&out);
    assert!(
        msg.contains("pinned input `data/input.txt` changed"),
        "{msg}"
    );
    let st = r.statuses();
    assert_eq!(st, ["baseline", "keep", "aborted"]);
}

#[test]
fn a_pinned_input_changed_during_the_review_is_caught_before_the_verifier() {
    // The reviewer (the gate's slow step) rewrites the pinned data in the user's checkout
    // while it reviews: the check of the pinned inputs comes after the review, serially and
    // on a parallel slot alike, so no candidate is measured on the changed data.
    for workers in [1, 2] {
        let runs = RunCounter::new();
        let r = Repo::new(
            &format!("[stop]\nmax_experiments = 3\n\n[exec]\nworkers = {workers}\n"),
            &runs.command,
            "write\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\n",
        );
        let pinned = r.dir.join("data/input.txt");
        edit_spec(&r.dir, |t| {
            format!(
                "{t}\n[review]\ncommand = \"printf tampered > '{}'; echo APPROVE\"\n",
                pinned.display()
            )
        });
        git(&r.dir, &["commit", "-qam", "reviewer"]);
        let out = r.hone(&["run"]);
        assert_eq!(out.status.code(), Some(1), "{workers}: {}", text(&out));
        assert_says(&out, "pinned input `data/input.txt` changed");
        let st = r.statuses();
        assert_eq!(st[0], "baseline", "{workers}: {st:?}");
        assert!(
            st.len() > 1 && st[1..].iter().all(|s| s == "aborted"),
            "{workers}: {st:?}"
        );
        assert_eq!(runs.runs(), 1, "{workers}: only the baseline was measured");
    }
}

#[test]
fn index_flags_cannot_hide_an_edit_from_the_gate() {
    // The agent tells git to look away from prepare.py, then edits it.
    let (r, runs) = counted_repo(
        2,
        "run\tgit update-index --assume-unchanged prepare.py\nwrite\tprepare.py\tprint('score: 0')\\n\nwrite\tvalue.txt\tscore: 4\\n\n",
    );
    let log = r.run_log("h");
    assert_eq!(log[1]["status"], "violation", "{:?}", log[1]);
    assert_reason(&log[1], "hid `prepare.py`");
    assert_eq!(runs.runs(), 1, "never verified");
    // The archived candidate holds the real edit.
    assert!(git(&r.dir, &["show", "refs/hone/h/1:prepare.py"]).contains("score: 0"));
}

#[test]
fn a_verifier_run_that_rewrites_a_protected_file_is_a_violation() {
    // train-time code patching the evaluator: the measurement is void.
    let verify =
        "if grep -q tamper value.txt; then echo '# patched' >> prepare.py; fi; echo score: 1";
    let r = Repo::stops_after(2, verify, "write\tvalue.txt\ttamper\\n\n");
    let log = r.run_log("p");
    assert_eq!(log[1]["status"], "violation", "{:?}", log[1]);
    assert_reason(&log[1], "modified while the verifier ran");
    assert_eq!(r.rev("hone/p"), r.rev("main"));
}

#[test]
fn ignored_files_a_proposer_plants_never_reach_the_verifier() {
    // `*.secret` is ignored by git; the verifier would report a perfect score if it saw one.
    let verify = "if ls *.secret >/dev/null 2>&1; then echo score: 0; else cat value.txt; fi";
    let r = Repo::builder()
        .file(".gitignore", "*.secret\n")
        .script("write\tvalue.txt\tscore: 4\\n\nwrite\tboost.secret\tx\\n\n")
        .spec_with(|agent| Spec::standard(verify, agent).tail("[stop]\nmax_experiments = 2\n"))
        .create();
    ok(r.hone(&["run"]));
    let log = r.log();
    assert_eq!(log[1]["status"], "keep");
    assert_eq!(
        log[1]["objective"], 4.0,
        "the verifier saw the planted file"
    );
}

#[test]
fn a_copy_of_a_candidate_in_flight_is_not_run_and_says_whether_it_is_in_review_or_verifying() {
    // Two workers. #1's verifier blocks, then #2 copies #1; #3's agent turn releases it.
    let marks = Marks::new();
    let r = Repo::new(
        "[stop]\nmax_experiments = 4\n\n[exec]\nworkers = 2\n",
        &marks.blocking_verifier(1),
        &marks.fill(
            "write\tvalue.txt\tscore: 3\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\n---\nrun\ttouch {m}/release\nwrite\tvalue.txt\tscore: 2\\n\n",
        ),
    );
    let log = r.run_log("v");
    assert_eq!(
        log[2]["reason"],
        "duplicate of #1, which is being verified now (identical files)"
    );
    // The same, with a reviewer that holds #2 (after a first verdict on #1: until then the
    // coordinator asks for no second candidate) until #4's agent turn.
    let marks = Marks::new();
    put(
        marks.path("review.sh"),
        marks.fill(
            "i=0\nwhile [ \"$HONE_EXPERIMENT\" = 2 ] && [ ! -f {m}/release ] && [ $i -lt 2400 ]; do sleep 0.05; i=$((i+1)); done\necho APPROVE\n",
        ),
    );
    let r = Repo::new(
        &marks.fill(
            "[stop]\nmax_experiments = 5\n\n[exec]\nworkers = 2\n\n[review]\ncommand = \"sh {m}/review.sh\"\n",
        ),
        SCORE,
        &marks.fill(
            "write\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\n---\nrun\ttouch {m}/release\nwrite\tvalue.txt\tscore: 2\\n\n",
        ),
    );
    let log = r.run_log("r");
    assert_eq!(
        log[3]["reason"],
        "duplicate of #2, which is being reviewed now (identical files)"
    );
    assert_eq!(log[2]["objective"], 3.0, "#2 was approved and measured");
}

#[test]
fn an_editable_file_made_into_a_directory_is_a_violation() {
    // `editable = ["value.txt"]` names a file: replacing it by a directory of new files is no
    // edit of it (the glob's directory rule would take `value.txt/x` as editable).
    let (r, runs) = counted_repo(
        2,
        "run\trm value.txt && mkdir value.txt && echo 'score: 1' > value.txt/x\n",
    );
    ok(r.hone(&["run", "--tag", "d"]));
    assert_eq!(r.statuses(), ["baseline", "violation"]);
    assert_reason(
        &r.log()[1],
        "made a file into a directory to add `value.txt/x`",
    );
    assert_eq!(runs.runs(), 1, "never verified");
}

#[test]
fn a_protected_pattern_that_matches_no_file_is_warned_about() {
    let r = Repo::builder()
        .script("write\tvalue.txt\tscore: 4\\n\n")
        .spec_with(|agent| {
            Spec::standard(SCORE, agent)
                .protected(&["prepare.py", "prepar.py"])
                .set("stop", "max_experiments", "1")
        })
        .create();
    let out = ok(r.hone(&["run"]));
    let said = text(&out);
    assert!(
        said.contains("[loop] protected `prepar.py` matches no file committed at HEAD: it only keeps such a file from being added"),
        "{said}"
    );
    assert!(!said.contains("`prepare.py` matches no file"), "{said}");
}

#[test]
fn a_fixed_constant_changed_is_a_violation_never_verified() {
    // `[loop] fixed = ["EPOCHS", "SEED"]`: a longer run or another seed is no improvement.
    // Other constants move freely.
    let r = Repo::builder()
        .file(
            "train.py",
            "LR = 0.1\nEPOCHS = 5\nSEED = 1\nprint('score: %s' % (10 - LR * EPOCHS))\n",
        )
        .script(
            "replace\ttrain.py\tEPOCHS = 5\tEPOCHS = 60\n---\n\
             replace\ttrain.py\tSEED = 1\tSEED = 7\n---\n\
             replace\ttrain.py\tprint(\tEPOCHS *= 12\\nprint(\n---\n\
             replace\ttrain.py\tLR = 0.1\tLR = 0.2\n---\n\
             replace\ttrain.py\tprint(\tsteps = EPOCHS * 4\\nprint(\n",
        )
        .spec_with(|agent| {
            Spec::standard("python3 train.py", agent)
                .editable(&["train.py"])
                .set("loop", "fixed", "[\"EPOCHS\", \"SEED\"]")
                .tail("[stop]\nmax_experiments = 6\n")
        })
        .create();
    let out = ok(r.hone(&["run"]));
    assert_eq!(
        r.statuses()[..5],
        ["baseline", "violation", "violation", "violation", "keep"]
    );
    // Using a fixed constant is no violation, but a line that does is pointed out.
    assert_ne!(r.statuses()[5], "violation");
    assert_says(
        &out,
        "experiment 5 changes a line of `train.py` that uses `EPOCHS` ([loop] fixed): `steps = EPOCHS * 4`",
    );
    // `hone show` repeats the warning the next morning; a kept change that uses none has none.
    let shown = text(&ok(r.hone(&["show", "5"])));
    assert!(
        shown.contains("warning: it changes a line of `train.py` that uses `EPOCHS` ([loop] fixed): `steps = EPOCHS * 4`"),
        "{shown}"
    );
    assert!(!text(&ok(r.hone(&["show", "4"]))).contains("warning:"));
    let log = r.log();
    assert_reason(
        &log[1],
        "changed `EPOCHS` in `train.py` from `=5` to `=60`: [loop] fixed",
    );
    assert_reason(&log[2], "`SEED`");
    assert_reason(&log[3], "to `*=12`");
    for e in &log[1..4] {
        assert!(e["objective"].is_null(), "never verified: {e}");
    }
    // The agent was told.
    let prompt = std::fs::read_to_string(only_run_dir(&r).join("prompts/1.md")).unwrap();
    assert!(
        prompt.contains("- Keep these constants as they are: EPOCHS, SEED"),
        "{prompt}"
    );
    // A name that is no constant's is refused with its line.
    edit_spec(&r.dir, |t| {
        t.replace("\"SEED\"]", "\"SEED\", \"not a name\"]")
    });
    exits_with(
        r.hone(&["run", "--new"]),
        2,
        "`not a name` is not a constant's name",
    );
}

#[test]
fn code_too_large_to_read_for_fixed_constants_is_a_violation() {
    // A 5 MB table appended to train.py, with EPOCHS changed in it: not let through unread.
    let r = fixed_epochs_run(
        "run\tsed -i 's/EPOCHS = 5/EPOCHS = 50/' train.py && python3 -c \"open('train.py', 'a').write('T = [' + '0,' * 2600000 + ']\\\\n')\"\n",
        &["train.py"],
    );
    assert_reason(
        &r.log()[1],
        "`train.py` is larger than 4 MiB: [loop] fixed does not read it",
    );
}

/// A run of one candidate (the agent's `script`) on a train.py whose EPOCHS is `[loop] fixed`,
/// `editable` the files it may change: its candidate must be a violation.
fn fixed_epochs_run(script: &str, editable: &'static [&'static str]) -> Repo {
    let r = Repo::builder()
        .file(
            "train.py",
            "LR = 0.1\nEPOCHS = 5\nprint('score: %s' % (10 - LR * EPOCHS))\n",
        )
        .script(script)
        .spec_with(|agent| {
            Spec::standard("python3 train.py", agent)
                .editable(editable)
                .set("loop", "fixed", "[\"EPOCHS\"]")
                .tail("[stop]\nmax_experiments = 2\n")
        })
        .create();
    ok(r.hone(&["run"]));
    assert_eq!(r.statuses(), ["baseline", "violation"]);
    r
}

/// A run (`max` experiments) of a training script that writes `model.txt`, scored by the
/// sealed `eval/score.py` (`score_py`, protected with all of `eval/`, which also holds two
/// shell scripts running it: `eval/run.sh` and `eval/outer.sh`, which runs that one) through
/// `evaluate`; the agent's `script`, `editable` its files.
fn sealed_scorer_run(
    score_py: &str,
    script: &str,
    editable: &'static [&'static str],
    evaluate: &str,
    max: u32,
) -> Repo {
    let evaluate = evaluate.to_string();
    let r = Repo::builder()
        .file(
            "train.py",
            "W = 1.0\nopen('model.txt', 'w').write(str(W))\n",
        )
        .file("eval/__init__.py", "")
        .file("eval/run.sh", "PYTHONPATH=. python3 eval/score.py\n")
        .file("eval/outer.sh", "sh eval/run.sh\n")
        .file("eval/score.py", score_py)
        .script(script)
        .spec_with(move |agent| {
            Spec::standard("python3 train.py", agent)
                .editable(editable)
                .protected(&["eval/"])
                .set("verify", "evaluate", &format!("\"{evaluate}\""))
                .set("verify", "outputs", "[\"model.txt\"]")
                .tail(&format!("[stop]\nmax_experiments = {max}\n"))
        })
        .create();
    ok(r.hone(&["run"]));
    r
}

/// The sealed scorer's score of `model.txt`, after `first` (its imports).
fn scorer_py(first: &str) -> String {
    format!(
        "{first}\nw = float(open('model.txt').read())\nprint(f'score: {{(w - 3.0) ** 2:.6f}}')\n"
    )
}

#[test]
fn a_new_module_named_like_the_standard_librarys_beside_a_sealed_scorer_is_a_violation() {
    // `python3 -m eval.score` puts the worktree's top first on sys.path: a candidate's
    // json.py would be the scorer's `import json`. A new helper module of another name is fine.
    let r = sealed_scorer_run(
        &scorer_py("import json"),
        "write\tjson.py\tprint('score: 0.0')\\nimport os\\nos._exit(0)\\n\n---\nwrite\thelpers.py\tX = 1\\n\nreplace\ttrain.py\tW = 1.0\tW = 2.0\n",
        &["*.py"],
        "python3 -m eval.score",
        3,
    );
    assert_eq!(r.statuses(), ["baseline", "violation", "keep"]);
    assert_reason(
        &r.log()[1],
        "added `json.py`, which the sealed scorer would import in place of Python's `json`",
    );
}

#[test]
fn a_new_module_named_like_one_the_sealed_scorer_imports_is_a_violation() {
    // `python3 -m eval.score` puts the worktree's top first on sys.path, where the agent may
    // add modules: its numpy.py would be the scorer's `import numpy` (here optional, as
    // scorers often make it), outside the standard library. Without numpy installed, the
    // scorer runs on without it. So too where the scorer is run by a shell script of the
    // repository's (or by a script that runs that one): its imports are read from the script
    // the shell script runs, one only through `import_module`. (Where it looks is read from
    // the shell script too; `shadow::where_a_sealed_scorer_looks_first` tests that.)
    for (evaluate, imports, module) in [
        ("python3 -m eval.score", "import numpy", "numpy"),
        (
            "sh eval/run.sh",
            "import importlib\n    importlib.import_module('click')",
            "click",
        ),
        // A script that runs that script, and a scorer whose first line has a bracket in a
        // string.
        (
            "sh eval/outer.sh",
            "n = 'resnet (v2)'.split('(')[0]\n    import rich",
            "rich",
        ),
    ] {
        let r = sealed_scorer_run(
            &scorer_py(&format!("try:\n    {imports}\nexcept ImportError:\n    pass")),
            &format!(
                "write\t{module}.py\tprint('score: 0.0')\\nimport os\\nos._exit(0)\\n\n---\nreplace\ttrain.py\tW = 1.0\tW = 2.0\n"
            ),
            &["*.py"],
            evaluate,
            3,
        );
        assert_eq!(
            r.statuses(),
            ["baseline", "violation", "keep"],
            "{evaluate}"
        );
        assert_reason(
            &r.log()[1],
            &format!("added `{module}.py`, which the sealed scorer would import in place of the `{module}` it imports"),
        );
    }
}

#[test]
fn a_new_private_module_beside_a_sealed_scorer_is_a_violation_unless_editable_names_it() {
    // `_helpers.py` may be a private module of a later Python's (3.12's `_sha2` is imported by
    // `random`): refused under a glob, the user's own where editable names it.
    for (editable, status) in [
        (&["*.py"][..], "violation"),
        (&["train.py", "_helpers.py"][..], "keep"),
    ] {
        let r = sealed_scorer_run(
            &scorer_py(""),
            "write\t_helpers.py\tX = 1\\n\nreplace\ttrain.py\tW = 1.0\tW = 2.0\n",
            editable,
            "python3 -m eval.score",
            2,
        );
        assert_eq!(r.statuses(), ["baseline", status], "{editable:?}");
    }
}

#[test]
fn a_fixed_constant_set_in_a_new_file_the_script_imports_is_a_violation() {
    // tweaks.py (new) sets EPOCHS and train.py star-imports it: no line of train.py names
    // EPOCHS, yet the run is longer. The new file's assignment is the violation.
    let r = fixed_epochs_run(
        "write\ttweaks.py\tEPOCHS = 60\\n\nreplace\ttrain.py\tprint(\tfrom tweaks import *\\nprint(\n",
        &["train.py", "tweaks.py"],
    );
    assert_reason(
        &r.log()[1],
        "assigns `EPOCHS` in `tweaks.py` (`=60`), which did not before: [loop] fixed",
    );
}

#[test]
fn the_optimizer_never_searches_a_fixed_knob_and_a_name_assigned_nowhere_is_a_warning() {
    // WIDTH is annotated as a knob, and fixed: the optimizer keeps it, so no candidate is a
    // violation. EPOCH is assigned by no editable file: said (a typo of a real name?).
    let (_t, dir) = knob_repo();
    edit_spec(&dir, |t| {
        t.replace("[loop]", "[loop]\nfixed = [\"WIDTH\", \"EPOCH\"]")
    });
    git(&dir, &["commit", "-q", "-am", "fixed"]);
    let out = ok(hone_in(&dir, &["run", "-n", "8"]));
    assert_says(
        &out,
        "[loop] fixed names EPOCH, which no editable file assigns at HEAD",
    );
    let log = log_in(&dir);
    assert_eq!(log.len(), 8);
    for e in &log[1..] {
        assert_ne!(e["status"], "violation", "{e}");
        assert_eq!(e["config"]["WIDTH"], 2, "{e}");
    }
}
