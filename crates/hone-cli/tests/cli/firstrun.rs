//! A first run on a real project: metrics read from ordinary log lines (with a ready-to-paste
//! `metric_regex` when the objective is only mentioned), and a verifier command that is not
//! found explained by where the verifier runs.

use crate::support::*;

#[test]
fn ordinary_log_lines_give_the_metric_and_a_mention_gives_a_regex_to_paste() {
    let r = Repo::scored(
        4,
        "write\tvalue.txt\tepoch 3: score=4.0, acc=0.9\\n\n---\nwrite\tvalue.txt\tINFO:root:Score: 3\\n\n---\nwrite\tvalue.txt\tthe final score is 2.5 points\\n\n",
    );
    r.run_expect("logs", &["baseline", "keep", "keep", "crash"]);
    let log = r.log();
    assert_eq!(log[1]["metrics"]["acc"], 0.9, "{:?}", log[1]);
    let reason = reason(&log[3]);
    assert!(reason.contains("printed no `score`"), "{reason}");
    assert!(
        reason.contains("the final score is 2.5 points"),
        "the hint quotes the line: {reason}"
    );
    // A regex to paste (the library's tests check that it reads the value).
    assert!(
        reason.contains("[verify] metric_regex = 'score is ([-+0-9.eE]+)'"),
        "{reason}"
    );
}

#[test]
fn a_command_not_found_says_where_the_verifier_runs() {
    let verify =
        "if grep -q venv value.txt; then .venv/bin/python train.py; else cat value.txt; fi";
    let r = Repo::builder()
        .script("write\tvalue.txt\tvenv\\n\n")
        .spec_with(move |agent| Spec::standard(verify, agent).tail("[stop]\nmax_experiments = 2\n"))
        .create();
    r.hone_expect(&["run"], &["baseline", "crash"]);
    let log = r.log();
    assert_reason(&log[1], "status 127");
    // It names the worktree.
    assert_reason(&log[1], ".hone/worktrees/");
    assert_reason(&log[1], "untracked files");
}

#[test]
fn a_budget_given_on_the_command_line_is_kept_across_resumes() {
    // hone.toml says 6; the user asks for 3. The first candidate fails and the run stops on
    // an error (one failure in a row allowed), to be resumed.
    let r = Repo::new(
        "[stop]\nmax_experiments = 6\nmax_consecutive_failures = 1\n",
        SCORE,
        "say\tno idea\n---\nwrite\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\n---\nwrite\tvalue.txt\tscore: 2\\n\n",
    );
    let out = r.hone(&["run", "--tag", "b", "-n", "3"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(r.statuses(), ["baseline", "invalid"]);
    // A plain resume goes on to the 3 asked for, not hone.toml's 6, and says so.
    let out = r.hone_expect(&["run"], &["baseline", "invalid", "keep"]);
    assert_says(&out, "keeps its budget of 3 experiments");
    let status = text(&r.hone(&["status", "--run", "b"]));
    assert!(
        status.contains("3/3"),
        "status agrees with the run: {status}"
    );
    // -n is a total: asking for fewer than the run has is an error that names --more.
    exits_with(r.hone(&["run", "--tag", "b", "-n", "2"]), 2, "--more N");
    assert_eq!(r.statuses().len(), 3);
    // --more N runs N more, and is kept too.
    r.hone_expect(
        &["run", "--tag", "b", "--more", "1"],
        &["baseline", "invalid", "keep", "keep"],
    );
    let status = text(&r.hone(&["status", "--run", "b"]));
    assert!(status.contains("4/4"), "{status}");
}

#[test]
fn a_failed_baseline_then_a_fixed_spec_measures_the_baseline_again() {
    let r = Repo::builder()
        .script(KEEPS_SCRIPT)
        .spec_with(|agent| {
            Spec::standard("python3 -c pass", agent).tail("[stop]\nmax_experiments = 3\n")
        })
        .create();
    let out = r.hone(&["run", "--tag", "f"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(r.statuses(), ["crash"]);
    // The explanation is said once (as the error), not in the summary too.
    let said = text(&out);
    assert_eq!(
        said.matches("the baseline failed").count(),
        1,
        "said once: {said}"
    );
    assert!(
        said.contains("score (minimize): no measured baseline yet"),
        "{said}"
    );
    // The user fixes the command as advised: the baseline is measured again, not skipped
    // as a duplicate of the failed one.
    edit_spec(&r.dir, |s| s.replace("python3 -c pass", "cat value.txt"));
    ok(r.hone(&["run"]));
    // (The scripted agent plays its steps for experiments #2 and #3: `score: 7`, a discard,
    // and `score: 3`, a keep.) The failed baseline is not one of the three experiments the
    // run was given: the baseline that ran and two more are.
    assert_eq!(r.statuses(), ["crash", "baseline", "discard", "keep"]);
    let status = text(&r.hone(&["status", "--run", "f"]));
    assert!(
        status.contains("experiments 3/3 (0 left; a failed baseline not counted)"),
        "{status}"
    );
    // Nor is it a candidate in the report's keep rate: #2 and #3 are.
    ok(r.hone(&["report", "--run", "f", "--out", "rep"]));
    let md = std::fs::read_to_string(r.dir.join("rep/report.md")).unwrap();
    assert!(md.contains("**keep rate**: 50.0% of 2 candidates"), "{md}");
    assert!(
        !md.contains("none yet: no candidate has beaten"),
        "#3 did: {md}"
    );
}

#[test]
fn a_wrong_metric_name_fixed_after_the_baseline_failed_resumes_the_run() {
    let r = Repo::builder()
        .script(KEEPS_SCRIPT)
        .spec_with(|agent| {
            Spec::standard(SCORE, agent)
                .metric("scroe")
                .tail("[stop]\nmax_experiments = 3\n")
        })
        .create();
    let out = r.hone(&["run", "--tag", "m"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    edit_spec(&r.dir, |s| s.replace("\"scroe\"", "\"score\""));
    let out = ok(r.hone(&["run"]));
    assert_says(&out, "now measures `score`");
    assert_eq!(r.statuses(), ["crash", "baseline", "discard", "keep"]);
    let status = text(&r.hone(&["status", "--run", "m"]));
    assert!(status.contains("score (minimize)"), "{status}");
}

#[test]
fn an_unknown_section_lists_every_section() {
    let r = Repo::new("[exce]\nworkers = 2\n", SCORE, "");
    let out = r.hone(&["run"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    for s in ["[exec]", "[store]", "[notify]", "[schedule]"] {
        assert!(text(&out).contains(s), "{s}: {}", text(&out));
    }
}

#[test]
fn on_a_terminal_the_live_line_shows_the_timeout_and_the_budget() {
    // `script` gives hone a pseudo-terminal (util-linux); without it there is nothing to see.
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: `script` (util-linux) is not installed");
        return;
    }
    let r = Repo::scored(2, KEEPS_SCRIPT);
    let cmd = format!("{HONE} run --tag tty");
    let out = std::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .current_dir(&r.dir)
        .output()
        .unwrap();
    let seen = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{seen}");
    assert!(seen.contains("  #1    verifying "), "{seen:?}");
    assert!(
        seen.contains(" of 1m00s · "),
        "elapsed against the timeout: {seen:?}"
    );
    assert!(seen.contains("1/2 done"), "{seen:?}");
    // Piped, the same run prints only plain lines.
    let r = Repo::scored(2, KEEPS_SCRIPT);
    let plain = text(&r.hone(&["run"]));
    assert!(!plain.contains("verifying"), "{plain}");
    assert!(!plain.contains('\x1b'), "{plain:?}");
}

#[test]
fn a_repository_with_a_file_name_that_is_not_utf8_is_refused_before_anything_runs() {
    let r = Repo::scored(2, KEEPS_SCRIPT);
    let made = std::process::Command::new("sh")
        .args([
            "-c",
            "printf x > \"$(printf 'donn\\351es.csv')\" && git add -A && git -c user.name=t -c user.email=t@t commit -qm latin1",
        ])
        .current_dir(&r.dir)
        .status()
        .unwrap();
    assert!(made.success());
    exits_with(r.hone(&["run"]), 1, "not valid UTF-8");
    let log = text(&r.hone(&["log"]));
    assert!(log.contains("no hone runs yet"), "nothing ran: {log}");
}

/// Installing hone (`cargo install --path crates/hone-cli`, default features) builds only the
/// `hone` binary: `fake-agent`, the tests' scripted agent, needs the `test-agent` feature,
/// which no default turns on. Read from cargo's own description of the package.
#[test]
fn installing_hone_does_not_install_the_test_agent() {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let out = ok(Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .args(["--manifest-path", manifest])
        .output()
        .unwrap());
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let package = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "hone-cli")
        .unwrap();
    let bins: Vec<(&str, Vec<&str>)> = package["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["kind"].as_array().unwrap().iter().any(|k| k == "bin"))
        .map(|t| {
            let needs = t["required-features"]
                .as_array()
                .map(|a| a.iter().filter_map(|f| f.as_str()).collect())
                .unwrap_or_default();
            (t["name"].as_str().unwrap(), needs)
        })
        .collect();
    let defaults: Vec<&str> = package["features"]["default"]
        .as_array()
        .map(|a| a.iter().filter_map(|f| f.as_str()).collect())
        .unwrap_or_default();
    let installed: Vec<&str> = bins
        .iter()
        .filter(|(_, needs)| needs.iter().all(|f| defaults.contains(f)))
        .map(|(name, _)| *name)
        .collect();
    assert_eq!(installed, ["hone"], "{bins:?}");
}

#[test]
fn after_a_finished_run_the_next_says_so_before_its_own_header() {
    let r = Repo::scored(2, KEEPS_SCRIPT);
    r.run_expect("first", &["baseline", "keep"]);
    let out = ok(r.hone(&["run"]));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let note = stdout
        .find("run first finished (reached max_experiments (2)); starting a new run")
        .unwrap_or_else(|| panic!("the note: {stdout}"));
    let header = stdout
        .find(" on branch ")
        .unwrap_or_else(|| panic!("the header: {stdout}"));
    assert!(note < header, "the note comes first:\n{stdout}");
}

#[test]
fn more_after_a_finished_run_continues_it() {
    // `hone run -n 2` finished; `hone run --more 1` means one more of that run, not a new
    // run of one experiment (a second baseline).
    let r = Repo::scored(9, KEEPS_SCRIPT);
    r.hone_expect(&["run", "-n", "2"], &["baseline", "keep"]);
    let out = ok(r.hone(&["run", "--more", "1"]));
    assert!(!text(&out).contains("starting a new run"), "{}", text(&out));
    assert_eq!(r.statuses(), ["baseline", "keep", "discard"]);
    let runs = String::from_utf8_lossy(&r.hone(&["status", "--json"]).stdout).to_string();
    assert!(runs.contains("\"experiments\": 3"), "{runs}");
}

#[test]
fn a_misspelt_metric_gets_the_printed_name_to_set() {
    let r = Repo::builder()
        .script("")
        .spec_with(|agent| {
            Spec::standard("echo 'val_loss: 0.0724'", agent)
                .metric("val_los")
                .set("stop", "max_experiments", "1")
        })
        .create();
    let out = r.hone(&["run"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let log = r.log();
    let reason = reason(&log[0]);
    assert!(
        reason.contains("set in hone.toml [verify] metric = \"val_loss\""),
        "{reason}"
    );
    assert!(!reason.contains("metric_regex"), "{reason}");
}

#[test]
fn a_knobs_search_after_a_failed_baseline_starts_as_a_fresh_run_would() {
    // The baseline failed on a misspelt metric, then was fixed: the failure was the setup's,
    // not the configuration's, so the knobs search neither counts it as a crash of the
    // baseline's configuration nor moves its design on: the first candidate is the one a run
    // that never failed proposes first.
    let (_t, dir) = knob_repo();
    ok(hone_in(
        &dir,
        &["run", "--tag", "clean", "--seed", "3", "-n", "2"],
    ));
    let clean = log_in(&dir);
    edit_spec(&dir, |s| s.replace("\"loss\"", "\"los\""));
    let failed = hone_in(&dir, &["run", "--tag", "t", "--seed", "3", "-n", "2"]);
    assert_eq!(failed.status.code(), Some(1), "{}", text(&failed));
    edit_spec(&dir, |s| s.replace("\"los\"", "\"loss\""));
    ok(hone_in(&dir, &["run", "--tag", "t", "-n", "2"]));
    let t = log_in(&dir);
    let st: Vec<&str> = t.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(&st[..2], ["crash", "baseline"], "{t:?}");
    assert!(
        t[0]["config"].is_null(),
        "out of the knobs' history: {}",
        t[0]
    );
    assert_eq!(t[2]["config"], clean[1]["config"], "{t:?}\n{clean:?}");
}
