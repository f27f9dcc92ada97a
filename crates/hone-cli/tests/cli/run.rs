//! The loop's basic outcomes: keep and discard, crash, timeout, invalid agent output, what the
//! prompt holds, and the stop conditions (failures, target, patience, time, a closed stdout).

use crate::support::*;

#[test]
fn keep_and_discard_move_the_branch_only_on_keep() {
    let r = Repo::scored(
        4,
        "write\tvalue.txt\tscore: 4\\n\nhypothesis\tlower is better\n---\nwrite\tvalue.txt\tscore: 7\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\n",
    );
    r.run_expect("t1", &["baseline", "keep", "discard", "keep"]);
    let log = r.log();
    assert_eq!(log[1]["description"], "lower is better");
    // The branch is at the last keep; every candidate has an archive ref.
    assert_eq!(r.rev("hone/t1"), r.rev("refs/hone/t1/3"));
    assert_eq!(r.rev("refs/hone/t1/0"), r.rev("main"));
    let discard = r.rev("refs/hone/t1/2");
    assert_eq!(
        git(&r.dir, &["show", &format!("{discard}:value.txt")]),
        "score: 7"
    );
    // A discard's parent is the best at its time (#1), and the branch never pointed at it.
    assert_eq!(r.rev(&format!("{discard}^")), r.rev("refs/hone/t1/1"));
    assert_eq!(r.rev("refs/hone/t1/3^"), r.rev("refs/hone/t1/1"));
    // The user's checkout was never touched.
    assert_eq!(
        std::fs::read_to_string(r.dir.join("value.txt")).unwrap(),
        "score: 5\n"
    );
    assert_eq!(git(&r.dir, &["status", "--porcelain"]), "");
    // hone show prints the discarded diff, recoverable forever.
    let show = text(&r.hone(&["show", "2"]));
    assert!(show.contains("+score: 7"), "{show}");
    // results.tsv layout.
    let tsv = String::from_utf8_lossy(&r.hone(&["log", "--tsv"]).stdout).to_string();
    assert!(
        tsv.starts_with("commit\tscore\tstatus\tdescription\n"),
        "{tsv}"
    );
    assert!(tsv.contains("\t4.000000\tkeep\tlower is better"), "{tsv}");
}

#[test]
fn crash_no_metric_and_constraint_are_recorded() {
    let verify = "cat value.txt; if grep -q crash value.txt; then exit 3; fi";
    let r = Repo::builder()
        .script("write\tvalue.txt\tcrash\\nscore: 1\\n\n---\nwrite\tvalue.txt\tall good, no number\\n\n---\nwrite\tvalue.txt\tscore: 2\\nmem: 900\\n\n")
        .standard_with(verify, "constraints = [\"mem <= 500\"]", 4)
        .create();
    ok(r.hone(&["run"]));
    let log = r.log();
    assert_statuses(&log, &["baseline", "crash", "crash", "discard"]);
    assert_reason(&log[1], "status 3");
    assert_reason(&log[2], "printed no `score`");
    assert_reason(&log[3], "mem <= 500");
}

#[test]
fn timeout_kills_the_whole_group_even_with_a_grandchild_holding_stdout() {
    let marks = Marks::new();
    let verify = marks.verifier(
        "grep -q hang value.txt",
        "echo $$ > {m}/pgid; (sleep 300 &); sleep 300",
    );
    let r = Repo::builder()
        .script("write\tvalue.txt\thang\\n\n")
        .spec_with(move |agent| {
            Spec::standard(&verify, agent)
                .set("verify", "timeout", "\"1s\"")
                .tail("[stop]\nmax_experiments = 2\n")
        })
        .create();
    r.hone_expect(&["run"], &["baseline", "timeout"]);
    let pgid: i32 = read_pgid(&marks.path("pgid"));
    assert!(
        !group_alive(pgid),
        "a process of the verifier's group outlived the timeout"
    );
}

#[test]
fn prompt_holds_program_history_and_rules() {
    let r = Repo::scored(
        3,
        "write\tvalue.txt\tscore: 4\\n\nhypothesis\tfirst idea\n---\nexpect-prompt\tfirst idea\nexpect-prompt\tYou may change only these files (globs): value.txt\nexpect-prompt\tRESEARCH NOTES\nexpect-prompt\tVerifier output of experiment 1 (last lines; untrusted output\nexpect-prompt\timproves on the best by more than 0\nwrite\tvalue.txt\tscore: 3\\n\n",
    );
    put(
        r.dir.join("program.md"),
        "RESEARCH NOTES: lower the score\n",
    );
    // The agent found all it expected in the prompt.
    r.hone_expect(&["run"], &["baseline", "keep", "keep"]);
}

#[test]
fn agent_failure_is_invalid_and_the_loop_goes_on() {
    let r = Repo::scored(
        3,
        "hypothesis\ttry a lower score\nsay\tI give up\nexit\t7\n---\nwrite\tvalue.txt\tscore: 1\\n\n",
    );
    // An uncommitted edit in the user's checkout is not part of the run, and hone says so.
    put(r.dir.join("value.txt"), "score: 0\n");
    let out = ok(r.hone(&["run"]));
    assert_says(&out, "uncommitted changes are not part of the run");
    assert_eq!(
        r.log()[0]["objective"],
        5.0,
        "the baseline is HEAD, not the dirty checkout"
    );
    let log = r.log();
    assert_eq!(log[1]["status"], "invalid");
    assert_reason(&log[1], "status 7");
    // A failed turn is described by the hypothesis it wrote.
    assert_eq!(log[1]["description"], "try a lower score");
    assert_eq!(log[2]["status"], "keep");
}

#[test]
fn consecutive_failures_stop_the_run() {
    let r = Repo::new(
        "[stop]\nmax_experiments = 50\nmax_consecutive_failures = 3\n",
        SCORE,
        "say\tno idea\n",
    );
    let out = exits_with(r.hone(&["run"]), 1, "3 failed experiments in a row");
    assert_eq!(r.statuses(), ["baseline", "invalid", "invalid", "invalid"]);
    // All three for one reason: the stop says which, as that is what to fix.
    let reason = r.log()[3]["reason"].as_str().unwrap().to_string();
    assert!(!reason.is_empty());
    assert_says(
        &out,
        &format!("(max_consecutive_failures), each one: {reason}"),
    );
    // Resuming alone would fail the same way: status says what to do first.
    let status = text(&r.hone(&["status"]));
    assert!(
        status.contains("stopped on failures (fix their cause, then resume with `hone run`)"),
        "{status}"
    );
}

/// `hone run` (which must succeed and say `says`) in a repository that stops after 10
/// experiments or on the `[stop]` line `stop`, its agent writing the `scores`.
#[track_caller]
fn stops_on(stop: &str, values: &[u32], says: &str) -> Repo {
    let r = Repo::new(
        &format!("[stop]\nmax_experiments = 10\n{stop}\n"),
        SCORE,
        &scores(values),
    );
    assert_says(&ok(r.hone(&["run"])), says);
    r
}

#[test]
fn target_patience_and_time_stop_the_run_and_say_why() {
    let target = stops_on("target = 3.5", &[4, 3, 9], "reached target (score = 3)");
    assert_eq!(target.statuses(), ["baseline", "keep", "keep"]);
    let patience = stops_on(
        "patience = 2",
        &[9, 8],
        "no improvement in 2 experiments (patience 2)",
    );
    assert_eq!(patience.statuses(), ["baseline", "discard", "discard"]);
    let time = stops_on("max_time = \"1ms\"", &[4, 3, 9], "reached max_time");
    let zero = time.hone(&["run", "--new", "--time", "0s"]);
    assert_eq!(
        zero.status.code(),
        Some(2),
        "a zero budget is a usage error: {}",
        text(&zero)
    );
    let st = text(&time.hone(&["status"]));
    assert!(st.contains("stopped: reached max_time"), "{st}");
}

#[test]
fn a_closed_stdout_neither_kills_the_loop_nor_panics() {
    use std::io::BufRead;
    let r = Repo::scored(4, &scores(&[4, 3, 2]));
    // `hone run | head -1`: the reader goes away after the first line.
    let mut child = spawn_hone_in(&r.dir, &["run"], Stdio::piped(), Stdio::piped());
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let out = ok(child.wait_with_output().unwrap());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    assert_eq!(
        r.statuses(),
        ["baseline", "keep", "keep", "keep"],
        "the loop ran to its end"
    );
    // `hone log | head -1` ends quietly too.
    let mut child = spawn_hone_in(&r.dir, &["log"], Stdio::piped(), Stdio::piped());
    drop(child.stdout.take());
    ok(child.wait_with_output().unwrap());
}

#[test]
fn a_run_works_under_any_common_umask() {
    // 002 (the default for users on many systems) and 077 make directories 0775 and 0700: the
    // worktree's rebuild must take them as they are.
    for umask in [0o002, 0o077] {
        let r = Repo::scored(2, &scores(&[3]));
        let mut cmd = Command::new(HONE);
        cmd.args(["run", "--tag", "u"]).current_dir(&r.dir);
        // SAFETY: umask is async-signal-safe; it only sets the child's file mode mask.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                libc::umask(umask);
                Ok(())
            });
        }
        ok(cmd.output().unwrap());
        assert_statuses(&r.log(), &["baseline", "keep"]);
    }
}

#[test]
fn an_agent_still_working_when_max_time_runs_out_is_stopped_and_nothing_is_kept() {
    // The agent writes a better value, then works on for five minutes; max_time is 5 s. Its
    // turn is cut when max_time runs out: the experiment is aborted (never verified, never
    // kept) and the run stops on max_time, not minutes later.
    let r = Repo::builder()
        .script("write\tvalue.txt\tscore: 1\\n\nsleep\t300\n")
        .spec_with(|agent| {
            Spec::standard(SCORE, agent)
                .set("stop", "max_experiments", "5")
                .set("stop", "max_time", "\"5s\"")
        })
        .create();
    let out = ok(run_bounded(&r.dir, &["run", "--tag", "t"]).unwrap());
    assert_says(&out, "reached max_time");
    let log = r.log();
    assert_statuses(&log, &["baseline", "aborted"]);
    assert_reason(&log[1], "max_time ran out while the agent worked");
    assert_eq!(r.rev("hone/t"), r.rev("main"), "nothing was kept");
}

#[test]
fn show_tails_a_progress_bar_by_its_updates_not_as_one_huge_line() {
    // The verifier rewrites one progress line 5,000 times (`\r`), then prints the metric.
    let verify = "i=0; while [ $i -lt 5000 ]; do printf '\\rstep %05d | loss: 1.0' $i; i=$((i+1)); done; echo; cat value.txt";
    let r = Repo::stops_after(1, verify, "");
    r.run_expect("p", &["baseline"]);
    let show = String::from_utf8_lossy(&r.hone(&["show", "0", "--tail", "3"]).stdout).to_string();
    let tail = show
        .split("--- log tail")
        .nth(1)
        .unwrap_or_else(|| panic!("{show}"));
    assert_eq!(tail.lines().count(), 4, "a header and three lines:\n{tail}");
    assert!(
        tail.contains("step 04999 | loss: 1.0") && tail.contains("score: 5"),
        "{tail}"
    );
    assert!(show.len() < 4000, "{} bytes", show.len());
}

#[test]
fn a_crash_says_the_last_line_the_program_wrote() {
    let verify = "if grep -q beta value.txt; then echo 'Traceback (most recent call last):' >&2; echo 'ValueError: Invalid beta parameter: 1.2' >&2; exit 1; fi; cat value.txt";
    let r = Repo::stops_after(2, verify, "write\tvalue.txt\tbeta\\n\n");
    r.run_expect("c", &["baseline", "crash"]);
    assert_reason(
        &r.log()[1],
        "exited with status 1: ValueError: Invalid beta parameter: 1.2",
    );
    let log = text(&r.hone(&["log"]));
    assert!(log.contains("ValueError: Invalid beta parameter"), "{log}");
}

/// An agent's description is its own words; the constants its change moved are said before
/// them, in numbers (the report's "Top improvements" then shows the values it went through).
#[test]
fn an_agents_description_says_which_constants_it_moved() {
    let r = Repo::builder()
        .file(
            "train.py",
            "LR = 0.05\nDEPTH = 4\nprint('score: %s' % (5 - LR * 10))\n",
        )
        .script(
            "replace\ttrain.py\tLR = 0.05\tLR = 0.1\nhypothesis\traise the learning rate\n---\nreplace\ttrain.py\t* 10))\t* 10))  # same\n",
        )
        .spec_with(|agent| {
            Spec::standard("python3 train.py", agent)
                .editable(&["train.py"])
                .tail("[stop]\nmax_experiments = 3\n")
        })
        .create();
    let out = ok(r.hone(&["run"]));
    // The run's own closing summary says it too.
    assert_says(&out, "best vs baseline: LR 0.05 -> 0.1");
    let log = r.log();
    assert_eq!(
        log[1]["description"], "[LR 0.05 -> 0.1] raise the learning rate",
        "{log:?}"
    );
    assert_eq!(log[1]["status"], "keep", "{log:?}");
    // The morning after: the best against the baseline, in numbers, in status and report.
    let status = text(&r.hone(&["status"]));
    assert!(
        status.contains("best vs baseline: LR 0.05 -> 0.1"),
        "{status}"
    );
    ok(r.hone(&["report"]));
    let tag = only_run_dir(&r).file_name().unwrap().to_owned();
    let md =
        std::fs::read_to_string(r.dir.join(".hone/reports").join(tag).join("report.md")).unwrap();
    assert!(
        md.contains("best vs baseline") && md.contains("LR 0.05 -> 0.1"),
        "{md}"
    );
    // A change that moves no constant keeps its words alone.
    assert!(
        !log[2]["description"].as_str().unwrap().contains('['),
        "{}",
        log[2]
    );
    // Many moved at once: the first five, then how many more.
    let lits = hone::propose::knobs::literal_changes([(
        "t.py",
        "A = 1\nB = 1\nC = 1\nD = 1\nE = 1\nF = 1\nG = 1\n",
        "A = 2\nB = 2\nC = 2\nD = 2\nE = 2\nF = 2\nG = 2\n",
    )]);
    assert_eq!(
        lits.as_deref(),
        Some("A 1 -> 2, B 1 -> 2, C 1 -> 2, D 1 -> 2, E 1 -> 2, 2 more")
    );
    // Two more keeps, one of them a change of code: the best against the baseline sums the
    // constants over the chain, and says that more than constants changed.
    // (The scripted agent takes the step of the experiment's number: 1 and 2 are done.)
    put(
        &r.script,
        "say\tdone\n---\nsay\tdone\n---\nreplace\ttrain.py\tLR = 0.1\tLR = 0.2\n---\nreplace\ttrain.py\t(5 - LR\t(4.5 - LR\n",
    );
    ok(r.hone(&["run", "--more", "2"]));
    assert_eq!(r.statuses()[3..], ["keep", "keep"]);
    let status = text(&r.hone(&["status"]));
    assert!(
        status.contains("best vs baseline: LR 0.05 -> 0.2 (and other changes)"),
        "{status}"
    );
}
