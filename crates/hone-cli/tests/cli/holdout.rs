//! The sealed holdout: it gates keeps, stays out of prompts, and a failing baseline stops the run.

use crate::support::*;

#[test]
fn the_sealed_holdout_gates_keeps_and_stays_out_of_prompts() {
    let r = Repo::builder()
        .file("value.txt", "score: 5\nhold 5\n")
        .script("write\tvalue.txt\tscore: 4\\nhold 4\\n\n---\nwrite\tvalue.txt\tscore: 3\\nhold 9\\n\n---\nforbid-prompt\tgot worse\nforbid-prompt\twent from\nwrite\tvalue.txt\tscore: 2\\nhold 3\\n\n")
        .spec_with(|agent| {
            Spec::standard("grep score value.txt", agent)
                .after("verify", "metric", "holdout_gate = true")
                .tail("[stop]\nmax_experiments = 4\n")
                .tail("\n[verify.holdout]\ncommand = \"echo score: $(sed -n 's/^hold //p' value.txt)\"\n")
        })
        .create();
    let log = r.run_log("h");
    let st: Vec<&str> = log.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(
        st,
        ["baseline", "keep", "discard", "keep"],
        "the overfit #2 is reverted: {log:?}"
    );
    assert!(reason(&log[2]).starts_with("holdout:"), "{}", log[2]);
    let h: Vec<Option<f64>> = log.iter().map(|e| e["holdout"].as_f64()).collect();
    assert_eq!(h, [Some(5.0), Some(4.0), Some(9.0), Some(3.0)]);
    assert_eq!(r.rev("hone/h"), r.rev("refs/hone/h/3"));
    assert_eq!(
        r.rev("refs/hone/h/3^"),
        r.rev("refs/hone/h/1"),
        "#3 built on #1, not on the reverted #2"
    );
    let table = text(&r.hone(&["log"]));
    assert!(
        table.contains("holdout"),
        "search and holdout side by side: {table}"
    );
    let status = text(&r.hone(&["status"]));
    assert!(
        status.contains("holdout (sealed): baseline 5.000000, best 3.000000"),
        "{status}"
    );
}

/// With `[verify.holdout] evaluate`, the holdout's value comes from the sealed scorer alone:
/// a line the candidate's command prints does not count, and a process it leaves behind to
/// tamper with the scorer (stop it, write a value into its output) is dead before the scorer
/// starts. The scorer reports a perfect 0 if that process is still alive.
#[test]
fn a_sealed_holdout_stage_reads_only_the_scorer_and_outlives_no_leftover() {
    let marks = Marks::new();
    let command = marks.fill(
        "echo score: 0; sed -n 's/^hold //p' value.txt > pred.txt; \
         setsid sh -c 'echo $$ > {m}/left.tmp && mv {m}/left.tmp {m}/left-pid; exec sleep 300' > /dev/null 2>&1 & \
         while [ ! -f {m}/left-pid ]; do sleep 0.01; done",
    );
    // The scorer also reports 0 if its Python could load what the candidate planted (a
    // search path into the worktree, the user's site-packages).
    let evaluate = marks.fill(
        "s=$(cut -d' ' -f3 /proc/$(cat {m}/left-pid)/stat 2>/dev/null); \
         if [ -n \"$s\" ] && [ \"$s\" != Z ]; then echo score: 0; \
         elif [ -n \"$PYTHONPATH\" ] || [ \"$PYTHONNOUSERSITE\" != 1 ]; then echo score: 0; \
         else echo score: $(cat pred.txt); fi",
    );
    let r = Repo::builder()
        .file("value.txt", "score: 5\nhold 5\n")
        .script("write\tvalue.txt\tscore: 4\\nhold 4\\n\n")
        .spec_with(move |agent| {
            Spec::standard("grep score value.txt", agent)
                .after(
                    "verify",
                    "metric",
                    "holdout_gate = true\noutputs = [\"pred.txt\"]\nenv = { PYTHONPATH = \"lib\" }",
                )
                .tail("[stop]\nmax_experiments = 2\n")
                .tail(&format!(
                    "\n[verify.holdout]\ncommand = '''{command}'''\nevaluate = '''{evaluate}'''\n"
                ))
        })
        .create();
    let log = r.run_log("hs");
    let h: Vec<Option<f64>> = log.iter().map(|e| e["holdout"].as_f64()).collect();
    assert_eq!(h, [Some(5.0), Some(4.0)], "{log:?}");
    assert_eq!(log[1]["status"], "keep", "{}", log[1]);
}

/// With workers, the holdout never runs beside another candidate's code (which could read
/// what the holdout signals through locks on shared files and the like): experiment 2's
/// verifier is running when experiment 1 is kept, and waits a while for 1's holdout to start;
/// the holdout notes any verifier it finds running.
#[test]
fn the_holdout_runs_alone_with_workers() {
    let marks = Marks::new();
    let verify = marks.fill(
        "n=$HONE_EXPERIMENT; touch {m}/v.$n; i=0; \
         if [ \"$n\" = 1 ]; then while [ ! -f {m}/v.2 ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; [ -f {m}/v.2 ] && touch {m}/saw; fi; \
         if [ \"$n\" = 2 ]; then while [ ! -f {m}/h.1 ] && [ $i -lt 60 ]; do sleep 0.05; i=$((i+1)); done; fi; \
         rm -f {m}/v.$n; cat value.txt",
    );
    assert_the_holdout_ran_alone(&marks, "", &verify, "v");
}

/// Runs a repository with two workers whose keep #1 has a holdout that notes, in
/// `marks/overlap`, any mark `<running>.*` left by something running beside it; asserts it
/// ran and found none. `extra` goes into hone.toml.
fn assert_the_holdout_ran_alone(marks: &Marks, extra: &str, verify: &str, running: &str) {
    let holdout = marks.fill(&format!(
        "if ls {{m}}/{running}.* > /dev/null 2>&1; then touch {{m}}/overlap; fi; touch {{m}}/h.$HONE_EXPERIMENT; echo score: 1"
    ));
    let r = Repo::new(
        &format!(
            "[stop]\nmax_experiments = 3\n\n[exec]\nworkers = 2\n{extra}\n[verify.holdout]\ncommand = '''{holdout}'''\n"
        ),
        verify,
        &scores(&[4, 6]),
    );
    let log = r.run_log("ha");
    assert_eq!(r.statuses(), ["baseline", "keep", "discard"], "{log:?}");
    assert!(marks.path("h.1").exists(), "the keep's holdout ran");
    assert!(
        marks.path("saw").exists(),
        "#2's {running} was under way when #1 was decided"
    );
    assert!(
        !marks.path("overlap").exists(),
        "the holdout ran beside another candidate's code ({running})"
    );
}

/// A reviewer command may run the candidate's code too: with workers, experiment 2's review is
/// under way when experiment 1 is kept, and waits a while for 1's holdout to start; the
/// holdout notes any review it finds running.
#[test]
fn the_holdout_runs_alone_beside_reviewer_commands() {
    let marks = Marks::new();
    put(
        marks.path("review.sh"),
        marks.fill(
            "n=$HONE_EXPERIMENT; i=0\n\
             if [ \"$n\" = 2 ]; then touch {m}/r.2; while [ ! -f {m}/h.1 ] && [ $i -lt 60 ]; do sleep 0.05; i=$((i+1)); done; rm -f {m}/r.2; fi\n\
             echo APPROVE\n",
        ),
    );
    let verify = marks.fill(
        "i=0; if [ \"$HONE_EXPERIMENT\" = 1 ]; then while [ ! -f {m}/r.2 ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; [ -f {m}/r.2 ] && touch {m}/saw; fi; cat value.txt",
    );
    let review = marks.fill("\n[review]\ncommand = \"sh {m}/review.sh\"\n");
    assert_the_holdout_ran_alone(&marks, &review, &verify, "r");
}

#[test]
fn a_failing_holdout_on_the_baseline_stops_a_gated_run() {
    let r = Repo::scored(3, &scores(&[4]));
    edit_spec(&r.dir, |t| {
        let toml = t.replace(
            "metric = \"score\"",
            "metric = \"score\"\nholdout_gate = true",
        );
        format!("{toml}\n[verify.holdout]\ncommand = \"exit 3\"\n")
    });
    exits_with(
        r.hone(&["run"]),
        1,
        "the holdout command failed on the baseline",
    );
}

/// Without the gate, a holdout that gives no value is said all the same (a blank in the log
/// would go unnoticed all night).
#[test]
fn a_failing_holdout_is_said_without_the_gate() {
    let r = Repo::scored(3, &scores(&[4]));
    edit_spec(&r.dir, |t| {
        format!("{t}\n[verify.holdout]\ncommand = \"exit 3\"\n")
    });
    let out = ok(r.hone(&["run"]));
    assert_says(
        &out,
        "experiment 0: the holdout gave no value (see .hone/runs/",
    );
    assert_says(&out, "experiment 1: the holdout gave no value");
}

/// The holdout and the champion's re-test run the candidate's code again: a move of hone's
/// refs made there is caught as in the verifier's run and put back (before, the next
/// experiment's listing took it as the state to keep).
#[test]
fn a_holdout_or_retest_run_that_moves_the_run_branch_is_caught_and_put_back() {
    let forge = "if grep -q forge value.txt; then git update-ref refs/heads/hone/{tag} $(git commit-tree HEAD^{tree} -p HEAD -m forged); fi";
    // The holdout forges #1 (a keep): it becomes a violation.
    let holdout = forge.replace("{tag}", "h");
    let r = Repo::builder()
        .file("value.txt", "score: 5\n")
        .script("write\tvalue.txt\tscore: 4\\nforge\\n\n")
        .spec_with(move |agent| {
            Spec::standard("grep score value.txt", agent)
                .tail("[stop]\nmax_experiments = 2\n")
                .tail(&format!(
                    "\n[verify.holdout]\ncommand = \"{holdout}; echo score: 1\"\n"
                ))
        })
        .create();
    let log = r.run_log("h");
    assert_eq!(log[1]["status"], "violation", "{log:?}");
    assert_reason(&log[1], "the holdout run moved hone's refs");
    assert_eq!(
        r.rev("hone/h"),
        r.rev("main"),
        "the forged branch was put back"
    );
    // The re-test of the champion (after every keep) forges, its first run did not: put
    // back, and said.
    let once = "c=$(git rev-parse --git-common-dir)/ran; if grep -q forge value.txt; then if [ -f $c ]; then FORGE; fi; touch $c; fi; grep score value.txt";
    let verify = once.replace("FORGE", &forge.replace("{tag}", "t"));
    let r = retest_repo(&verify, "write\tvalue.txt\tscore: 4\\nforge\\n\n", 2);
    let out = r.hone(&["run", "--tag", "t"]);
    let said = text(&out);
    let log = r.log();
    assert_eq!(log[1]["status"], "keep", "{said}");
    assert!(
        said.contains("the re-test of the champion #1 moved hone's refs"),
        "{said}"
    );
    assert_eq!(r.rev("hone/t"), r.rev("refs/hone/t/1"), "{said}");
    // A user's commit on the branch (checked out in their checkout) during the re-test is
    // theirs: kept, and the run stops, as anywhere else.
    let once = "c=$(git rev-parse --git-common-dir)/ran; if grep -q forge value.txt; then if [ -f $c ]; then (cd ../../.. && git checkout -q hone/u && git -c user.name=u -c user.email=u@u commit -q --allow-empty -m 'user fix'); fi; touch $c; fi; grep score value.txt";
    let r = retest_repo(once, "write\tvalue.txt\tscore: 4\\nforge\\n\n", 3);
    let out = r.hone(&["run", "--tag", "u"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let mine = git(
        &r.dir,
        &["log", "-1", "--format=%H", "--grep=user fix", "--all"],
    );
    assert_eq!(mine.len(), 40, "{}", text(&out));
    assert_eq!(r.rev(&format!("refs/hone-user/u/{mine}")), mine);
}

/// A verifier under which a candidate whose value.txt says `dodge` fails when run a second
/// time (a re-test), to keep a lucky first value.
const DODGE: &str = "c=$(git rev-parse --git-common-dir)/ran; if grep -q dodge value.txt; then if [ -f $c ]; then exit 1; fi; touch $c; fi; grep score value.txt";

#[test]
fn a_champion_whose_retest_fails_is_a_crash_and_the_branch_goes_back() {
    // Experiment 1's code fails on purpose when run a second time (a re-test: the branch head
    // is its own commit), to keep a lucky first value. A failed re-test makes it a crash, as a
    // failed confirm run would, and the branch goes back; experiment 2 is judged against the
    // baseline and kept on it.
    let r = retest_repo(
        DODGE,
        "write\tvalue.txt\tscore: 3\\ndodge\\n\n---\nwrite\tvalue.txt\tscore: 4\\n\n",
        3,
    );
    let (said, log) = run_dodged(&r);
    assert_eq!(log[2]["status"], "keep", "{said}");
    assert_eq!(r.rev("hone/t"), r.rev("refs/hone/t/2"));
    assert_eq!(
        r.rev("refs/hone/t/2^"),
        r.rev("main"),
        "#2 is built on the baseline"
    );
}

#[test]
fn with_two_workers_a_champion_whose_retest_fails_is_a_crash_and_the_branch_goes_back() {
    // As above, with experiments verified two at a time: the failed re-test makes #1 a
    // crash, and no keep of the run is built on it.
    let r = retest_repo_with(
        DODGE,
        "write\tvalue.txt\tscore: 3\\ndodge\\n\n---\nwrite\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 4.5\\n\n",
        4,
        "[exec]\nworkers = 2\n",
    );
    let (said, log) = run_dodged(&r);
    assert!(
        log[2..].iter().any(|e| e["status"] == "keep"),
        "a later candidate is kept: {log:?}"
    );
    let on_it = std::process::Command::new("git")
        .args(["merge-base", "--is-ancestor", "refs/hone/t/1", "hone/t"])
        .current_dir(&r.dir)
        .status()
        .unwrap();
    assert!(!on_it.success(), "the branch still holds #1: {said}");
}

/// Runs `r` (tag `t`) whose #1 dodges its re-test ([`DODGE`]): the failed re-test is said
/// and makes #1 a crash. What was said, and the log.
fn run_dodged(r: &Repo) -> (String, Vec<serde_json::Value>) {
    let out = ok(r.hone(&["run", "--tag", "t"]));
    let said = text(&out);
    assert!(said.contains("re-test of the champion #1 failed"), "{said}");
    let log = r.log();
    assert_eq!(log[1]["status"], "crash", "{said}");
    assert_reason(&log[1], "then its re-test failed");
    (said, log)
}

/// A repository whose champion is re-tested after every keep (`retest_every = 1`), with
/// `verify`, the agent's `script` and `max` experiments.
fn retest_repo(verify: &str, script: &str, max: u32) -> Repo {
    retest_repo_with(verify, script, max, "")
}

/// [`retest_repo`] with more of hone.toml (`tail`: whole sections).
fn retest_repo_with(verify: &str, script: &str, max: u32, tail: &str) -> Repo {
    let (verify, tail) = (verify.to_string(), tail.to_string());
    Repo::builder()
        .file("value.txt", "score: 5\n")
        .script(script)
        .spec_with(move |agent| {
            Spec::standard(&verify, agent)
                .after("verify", "metric", "retest_every = 1")
                .tail(&format!("[stop]\nmax_experiments = {max}\n"))
                .tail(&tail)
        })
        .create()
}
