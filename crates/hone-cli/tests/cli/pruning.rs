//! Pruning hopeless runs (`[verify] progress` and `prune`): a candidate whose curve is worse
//! than the finished ones at the same step is stopped (SIGTERM first, its process group
//! gone) and recorded `pruned` with its partial curve (with `halving`, against its first
//! rung's bar; with `reach`, against the finished curves shifted to end at the best last
//! value among them); good candidates and confirm runs run to the end; the same with
//! `--workers 2`; and kill -9 then resume keeps the curves.

use crate::support::*;

/// A repository whose verifier `train.sh` (protected) is a training loop: `value.txt` holds
/// a rate `r`; step k (1..6) prints `step=k loss=10r+60/k`, and the end `loss: 10r+10`.
/// A rate of 50 or more never ends after step 3 (a long hopeless run: only a stop ends it).
/// With `wait` after the rate, the run waits at step 3 until `marks/go.<n>` exists. Each
/// run writes its process group to `marks/pgid.<n>`; a SIGTERM is noted in `marks/term.<n>`;
/// a confirm run (`HONE_REPEAT` 1) prints a curve ten times worse, with the same end. With
/// `fake` after the rate, every step prints `loss=-1000000`. `eval.sh` (protected, for
/// `[verify] evaluate`) prints the end `loss: 10r+10` alone.
fn training_repo(verify_keys: &[(&str, &str)], script: &str) -> (Repo, Marks) {
    let marks = Marks::new();
    let train = format!(
        "n=$HONE_EXPERIMENT\n\
         set -- $(cat value.txt)\n\
         r=$1\n\
         awk '{{print $5}}' /proc/$$/stat > {m}/pgid.$n\n\
         trap 'echo term > {m}/term.$n; exit 143' TERM\n\
         k=1\n\
         while [ $k -le 6 ]; do\n\
           loss=$((r * 10 + 60 / k))\n\
           if [ \"$HONE_REPEAT\" = 1 ]; then loss=$((loss * 10)); fi\n\
           if [ \"$2\" = fake ]; then loss=-1000000; fi\n\
           echo \"step=$k loss=$loss\"\n\
           if [ $k -eq 3 ] && [ \"$2\" = wait ]; then\n\
             touch {m}/at3.$n\n\
             while [ ! -f {m}/go.$n ]; do sleep 0.05; done\n\
           fi\n\
           if [ $k -ge 3 ] && [ $r -ge 50 ]; then\n\
             while :; do sleep 0.05; done\n\
           fi\n\
           k=$((k + 1))\n\
         done\n\
         echo \"loss: $((r * 10 + 10))\"\n",
        m = marks.dir().display()
    );
    let keys: Vec<(String, String)> = verify_keys
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let r = Repo::builder()
        .script(script)
        .spec_with(move |agent| {
            let mut spec = Spec::standard("sh train.sh", agent)
                .metric("loss")
                .protected(&["prepare.py", "train.sh", "eval.sh"])
                .set("verify", "progress", "\"loss\"")
                .set("verify", "prune", "\"median\"")
                .set("verify", "prune_warmup", "\"2 steps\"");
            for (k, v) in &keys {
                spec = spec.set("verify", k, v);
            }
            spec.tail("\n[stop]\nmax_experiments = 4\n")
        })
        .file("train.sh", &train)
        .file(
            "eval.sh",
            "set -- $(cat value.txt)\necho \"loss: $(($1 * 10 + 10))\"\n",
        )
        .file("value.txt", "5\n")
        .create();
    (r, marks)
}

/// `hone run --tag <tag>` (which must succeed) in a [`training_repo`], leaving the statuses
/// `statuses`: the repository, its marks and its records.
#[track_caller]
fn training_run(
    verify_keys: &[(&str, &str)],
    script: &str,
    tag: &str,
    statuses: &[&str],
) -> (Repo, Marks, Vec<serde_json::Value>) {
    let (r, marks) = training_repo(verify_keys, script);
    let log = r.run_log(tag);
    assert_statuses(&log, statuses);
    (r, marks, log)
}

/// A repository (to be given its agent's script and `value.txt`) whose protected verifier is
/// `sh <name>`, the shell script `body`, scored by `metric`, its progress read by
/// `[verify] progress = <progress>`, with the `[verify]` keys `keys`, for `max` experiments.
fn curve_repo(
    name: &str,
    body: &str,
    metric: &str,
    progress: &str,
    keys: &[(&str, &str)],
    max: u32,
) -> RepoBuilder {
    let (name, metric, progress) = (name.to_string(), metric.to_string(), progress.to_string());
    let keys: Vec<(String, String)> = keys
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Repo::builder().file(&name, body).spec_with(move |agent| {
        let mut spec = Spec::standard(&format!("sh {name}"), agent)
            .metric(&metric)
            .protected(&["prepare.py", &name])
            .set("verify", "progress", &progress);
        for (k, v) in &keys {
            spec = spec.set("verify", k, v);
        }
        spec.tail(&format!("\n[stop]\nmax_experiments = {max}\n"))
    })
}

/// `[verify]` keys of a [`curve_repo`] that prunes below the median from step 2 on, with two
/// finished curves.
const MEDIAN_FROM_STEP_2: [(&str, &str); 3] = [
    ("prune", "\"median\""),
    ("prune_warmup", "\"2 steps\""),
    ("prune_min_runs", "2"),
];

/// The experiment's curve as `hone show` prints it: its number of points.
fn curve_points(r: &Repo, n: u64) -> usize {
    let out = r.hone(&["show", &n.to_string()]);
    assert!(out.status.success(), "{}", text(&out));
    let t = text(&out);
    t.lines()
        .find_map(|l| l.strip_prefix("--- curve: "))
        .and_then(|l| l.split(' ').next())
        .map_or(0, |k| k.parse().unwrap())
}

/// Each run's totals as the store keeps them (tallies updated with every write) equal the
/// same figures counted from its rows.
fn assert_tallies_agree(r: &Repo) {
    let store = hone::store::Store::open(&r.dir.join(".hone/hone.db")).unwrap();
    for run in store.runs().unwrap() {
        let exps = store.experiments(run.id).unwrap();
        let totals = store.run_totals(run.id).unwrap();
        assert_eq!(totals, hone::store::RunTotals::of(&exps));
        assert_eq!(totals.experiments, exps.len() as u64);
    }
}

#[test]
fn a_hopeless_candidate_is_pruned_and_good_ones_and_confirm_runs_are_not() {
    let (r, marks, log) = training_run(
        &[("confirm", "1"), ("prune_min_runs", "2")],
        "write\tvalue.txt\t4\\n\n---\nwrite\tvalue.txt\t50\\n\n---\nwrite\tvalue.txt\t3\\n\n",
        "p",
        &["baseline", "keep", "pruned", "keep"],
    );
    assert_tallies_agree(&r);
    // #2 was compared at step 2 with the baseline (80) and #1 (70): median 75, its 530.
    assert_reason(&log[2], "pruned at step 2");
    assert_reason(
        &log[2],
        "worse than 75.000000: the median of 2 finished runs",
    );
    assert!(log[2]["objective"].is_null(), "a pruned run has no value");
    // Stopped the normal way: SIGTERM first, and nothing of its group is left.
    assert!(
        marks.path("term.2").exists(),
        "the pruned run got no SIGTERM"
    );
    assert!(wait_group_gone(read_pgid(&marks.path("pgid.2"))));
    // Its partial curve is in the store; the finished ones are whole.
    let partial = curve_points(&r, 2);
    assert!((2..6).contains(&partial), "{partial} points");
    assert_eq!(curve_points(&r, 0), 6);
    assert_eq!(curve_points(&r, 3), 6);
    // The keeps' confirm runs (a curve ten times worse) ran to the end.
    assert_eq!(log[1]["runs"].as_array().unwrap().len(), 2, "{:?}", log[1]);
    assert_eq!(log[3]["runs"].as_array().unwrap().len(), 2, "{:?}", log[3]);
    assert!(!marks.path("term.1").exists() && !marks.path("term.3").exists());
    // `hone log` shows the status; the report plots every curve, the pruned one dashed.
    let t = text(&r.hone(&["log"]));
    let row = t.lines().find(|l| l.contains("pruned")).unwrap_or_default();
    assert!(
        row.contains(
            "pruned at step 2: its best loss so far, 530.000000, was worse than 75.000000"
        ),
        "the reason, value and bar first: {t}"
    );
    let out_dir = marks.path("report");
    let out = r.hone(&["report", "--out", out_dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let svg = std::fs::read_to_string(out_dir.join("curves.svg")).unwrap();
    assert_eq!(svg.matches("<polyline").count(), 4, "{svg}");
    assert!(svg.contains(r#"class="curve pruned""#), "{svg}");
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(html.contains("<h2>Curves</h2>"));
}

#[test]
fn pruning_with_two_workers() {
    let (r, marks) = training_repo(
        &[("prune_min_runs", "1")],
        "write\tvalue.txt\t4\\n\n---\nwrite\tvalue.txt\t60\\n\n---\nwrite\tvalue.txt\t70\\n\n",
    );
    let out = r.hone(&["run", "--tag", "w", "--workers", "2"]);
    assert!(out.status.success(), "{}", text(&out));
    let mut st = r.statuses();
    st.sort();
    assert_eq!(st, ["baseline", "keep", "pruned", "pruned"]);
    for n in [2, 3] {
        assert!(wait_group_gone(read_pgid(
            &marks.path(&format!("pgid.{n}"))
        )));
        assert!(curve_points(&r, n) >= 2);
    }
}

#[test]
fn kill_9_mid_run_then_resume_keeps_the_curves_and_prunes_against_them() {
    let (r, marks) = training_repo(
        &[("prune_min_runs", "2")],
        "write\tvalue.txt\t4\\n\n---\nwrite\tvalue.txt\t4 wait\\n\n---\nwrite\tvalue.txt\t90\\n\n",
    );
    let mut child = r.spawn_hone(&["run", "--tag", "k"]);
    // #2 (rate 4, like #1: 100, 70, 60 against the medians 75 and 65 of the baseline and
    // #1) is not pruned; it waits at step 3 while the test makes sure hone recorded its
    // three points, and is killed with hone.
    wait_for_file(&marks.path("at3.2"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while curve_points(&r, 2) < 3 {
        assert!(
            Instant::now() < deadline,
            "the points of #2 never reached the store"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert_eq!(r.statuses(), ["baseline", "keep", "running"]);
    assert_tallies_agree(&r);
    // The resumed run verifies #2's candidate again as #3 (rate 4: no better than #1), which
    // this time goes on past step 3.
    std::fs::write(marks.path("go.3"), "").unwrap();
    let log = r.run_log("k");
    // The aborted #2 is not counted by max_experiments.
    assert_statuses(&log, &["baseline", "keep", "aborted", "discard", "pruned"]);
    assert_tallies_agree(&r);
    // The interrupted run's curve survived the crash, and is no finished run: the resumed
    // run pruned #4 against the three finished curves (the baseline's, #1's and #3's).
    assert_eq!(curve_points(&r, 2), 3);
    assert_eq!(curve_points(&r, 3), 6);
    assert_reason(&log[4], "of 3 finished runs");
}

/// A run of [`training_repo`] under `[verify] prune = <rule>` with 2 references (and, with
/// `confirm`, a confirm run per keep): #1 (rate 4) kept, #2 (rate 5: 80 at step 2, then it
/// waits at step 3 until stopped) pruned at step 2 with a reason that says `says`, #3 (rate 3:
/// 60 at step 2, ahead of the incumbent) kept. Checks what every such rule must do: the pruned
/// run's group got SIGTERM and is gone, #3 ran its whole curve and was never stopped, and the
/// keeps' confirm runs (a curve ten times worse) were never judged.
#[track_caller]
fn prunes_the_second(rule: &str, confirm: bool, tag: &str, says: &str) {
    let mut keys = vec![("prune", rule), ("prune_min_runs", "2")];
    if confirm {
        keys.push(("confirm", "1"));
    }
    let (r, marks, log) = training_run(
        &keys,
        "write\tvalue.txt\t4\\n\n---\nwrite\tvalue.txt\t5 wait\\n\n---\nwrite\tvalue.txt\t3\\n\n",
        tag,
        &["baseline", "keep", "pruned", "keep"],
    );
    let why = reason(&log[2]);
    assert!(why.contains("pruned at step 2"), "{rule}: {why}");
    assert!(why.contains(says), "{rule}: {why}");
    assert!(marks.path("term.2").exists(), "{rule}: no SIGTERM");
    assert!(wait_group_gone(read_pgid(&marks.path("pgid.2"))));
    assert_eq!(curve_points(&r, 3), 6, "{rule}");
    assert!(!marks.path("term.3").exists(), "{rule}");
    if confirm {
        assert_eq!(log[1]["runs"].as_array().unwrap().len(), 2, "{:?}", log[1]);
        assert_eq!(log[3]["runs"].as_array().unwrap().len(), 2, "{:?}", log[3]);
        assert!(!marks.path("term.1").exists(), "{rule}");
    }
}

#[test]
fn top_k_prunes_against_the_best_finished_run_by_its_objective() {
    // #2 is compared with #1 alone, the best objective (50, not the baseline's 60): its 70 at
    // step 2, no margin (#1 was never behind the baseline). The median of the two (75) would
    // say the same; ranking the wrong way round would compare with the baseline's 80, a tie,
    // and not prune.
    prunes_the_second(
        "\"top:1\"",
        false,
        "t",
        "worse than 70.000000: the worst value there of the 1 best of 2 finished runs, plus the margin they were seen to make up",
    );
}

#[test]
fn halving_prunes_only_the_worst_quarter_in_its_first_rung() {
    // #2 at step 2, the first rung of a 2-step warm-up: compared with the 75th percentile of
    // the baseline's 80 and #1's 70 (77.5), not with their median (75).
    prunes_the_second(
        "\"halving\"",
        false,
        "h",
        "worse than 77.500000: the percentile:75 of 2 finished runs, halving's bar, at that step",
    );
}

#[test]
fn reach_prunes_a_run_that_cannot_catch_up_and_never_a_confirm_run() {
    // At step 2 the baseline (80, ending at 60) and #1 (70, ending at 50) were both 20 above
    // their ends: shifted to end at the best last value (50) both are at 70. #2 (rate 5: 80)
    // is behind both; the median of the unshifted values (75) is not the bar.
    prunes_the_second(
        "\"reach\"",
        true,
        "r",
        "worse than 70.000000 there: to end level with the best of 2 finished runs it would have had to improve from that step on more than any of them did (reach)",
    );
}

#[test]
fn reach_tight_stops_a_hopeless_run_and_never_a_confirm_run() {
    // `reach~0.3` with 2 references: k = max(1, floor(0.3 x 3)) = 1, the most lenient
    // shifted curve (70 at step 2, as for `reach`); #2 (rate 5: 80) is behind it.
    prunes_the_second(
        "\"reach~0.3\"",
        true,
        "t",
        "worse than 70.000000 there: to end level with the best of 2 finished runs it would have had to improve from that step on more than any of them did (reach~0.3)",
    );
}

#[test]
fn with_a_sealed_evaluator_only_accepted_curves_are_references() {
    // #1 (rate 9) prints a fantastic curve from its own code, and the evaluator scores it
    // 100 (the baseline 60): a discard. #2 (rate 4: 70 at step 2, the baseline 80) must not
    // be pruned against #1's curve; #3 (rate 50, hopeless) still is, against the baseline
    // and #2.
    let (r, marks, log) = training_run(
        &[("evaluate", "\"sh eval.sh\""), ("prune_min_runs", "1")],
        "write\tvalue.txt\t9 fake\\n\n---\nwrite\tvalue.txt\t4\\n\n---\nwrite\tvalue.txt\t50\\n\n",
        "e",
        &["baseline", "discard", "keep", "pruned"],
    );
    assert_eq!(log[1]["objective"], 100.0, "{:?}", log[1]);
    assert_eq!(curve_points(&r, 1), 6, "the discard's curve is recorded");
    assert_eq!(curve_points(&r, 2), 6);
    assert!(!marks.path("term.2").exists());
    // #3 was compared with the baseline (80) and #2 (70), never with #1's -1000000.
    assert_reason(
        &log[3],
        "worse than 75.000000: the median of 2 finished runs",
    );
}

#[test]
fn a_long_curve_is_stored_thinned_and_ends_where_the_run_did() {
    // Each run prints 20,000 points (step=i loss=r/i), then its end; 10,000 are stored as
    // they come, then every 2nd from 14,143 points, and the last (not on that stride) when
    // the run ends: 16,626. The candidate (r = 1, ahead everywhere) is judged against the
    // baseline's thinned curve and runs to the end.
    let r = curve_repo(
        "long.sh",
        "awk -v r=\"$(cat value.txt)\" 'BEGIN { for (i = 1; i <= 20000; i++) print \"step=\" i \" loss=\" r / i; print \"loss: \" r }'\n",
        "loss",
        "\"loss\"",
        &[("prune", "\"median\""), ("prune_min_runs", "1")],
        2,
    )
    .script("write\tvalue.txt\t1\\n\n")
    .file("value.txt", "2\n")
    .create();
    let out = r.hone(&["run", "--tag", "l"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(r.statuses(), ["baseline", "keep"]);
    // No warm-up: the run says a first point is noise to judge by.
    assert_says(
        &out,
        "prune without prune_warmup judges a run from its first point",
    );
    for n in [0, 1] {
        assert_eq!(curve_points(&r, n), 16_626);
        let show = text(&r.hone(&["show", &n.to_string()]));
        let line = show.lines().find(|l| l.starts_with("--- curve: ")).unwrap();
        assert!(line.contains(".. step 20000 value"), "{line}");
    }
}

#[test]
fn a_progress_line_rewritten_with_carriage_returns_is_read_and_pruned() {
    // README's example: autoresearch's `train.py` rewrites one progress line with `\r` and no
    // newline until training ends. Rate r: step k shows `loss: 10r+60/k`; the end
    // `val_bpb: 10r+10`. #2 (rate 50) never ends after step 3: only a prune ends it, which
    // needs each `\r` to end a line.
    let r = curve_repo(
        "train.sh",
        "r=$(cat value.txt)\n\
             k=1\n\
             while [ $k -le 6 ]; do\n\
               printf '\\rstep %05d (%d.0%%) | loss: %d.000000 | lrm: 1.00    ' $k $((k * 16)) $((r * 10 + 60 / k))\n\
               if [ $k -ge 3 ] && [ $r -ge 50 ]; then while :; do sleep 0.05; done; fi\n\
               k=$((k + 1))\n\
             done\n\
             printf '\\nval_bpb:          %d.000000\\n' $((r * 10 + 10))\n",
        "val_bpb",
        r"'step (?P<step>\d+) \([0-9.]+%\) \| loss: (?P<value>[0-9.eE+-]+)'",
        &[
            ("prune", "\"reach\""),
            ("prune_warmup", "\"2 steps\""),
            ("prune_min_runs", "2"),
        ],
        3,
    )
    .script("write\tvalue.txt\t4\\n\n---\nwrite\tvalue.txt\t50\\n\n")
    .file("value.txt", "5\n")
    .create();
    let log = r.run_log("cr");
    assert_statuses(&log, &["baseline", "keep", "pruned"]);
    assert_eq!(log[1]["objective"], 50.0, "{:?}", log[1]);
    assert_eq!(curve_points(&r, 0), 6);
    assert_eq!(curve_points(&r, 1), 6);
    assert_reason(&log[2], "pruned at step 2");
}

#[test]
fn a_progress_setting_that_reads_nothing_is_said_after_the_baseline() {
    // A regex written for other lines (`step 3 (50%) | loss: ...`) matches none of
    // `step=3 loss=...`: the run says so once the baseline ends, rather than never pruning
    // in silence; a setting that reads the lines says nothing.
    let regex = "\"step (?P<step>\\\\d+) \\\\([0-9.]+%\\\\) \\\\| loss: (?P<value>[0-9.]+)\"";
    let (r, _) = training_repo(&[("progress", regex)], "write\tvalue.txt\t4\\n\n");
    let out = ok(r.hone(&["run", "--tag", "p"]));
    assert_says(
        &out,
        "[verify] progress read no point from the baseline's output (no line matched",
    );
    assert_says(&out, "nothing is pruned");
    // With a line of the log that looks like progress, and the setting that reads it.
    assert_says(
        &out,
        "a line of it reads `step=1 loss=110`: progress = 'step=(?P<step>\\d+).*?loss=(?P<value>[0-9.eE+-]+)' would read it",
    );
    let (r, _) = training_repo(&[], "write\tvalue.txt\t4\\n\n");
    let out = ok(r.hone(&["run", "--tag", "q"]));
    assert!(!text(&out).contains("read no point"), "{}", text(&out));
}

#[test]
fn a_run_whose_output_comes_in_one_block_at_its_end_is_judged_on_its_result() {
    // Output to a pipe is buffered: the whole curve and the result arrive together as the
    // program ends, and it takes a moment more to exit (as Python's teardown does). Its
    // curve is worse than the finished ones, but it printed its result: it is judged on it,
    // not pruned on points that came with it.
    let r = curve_repo(
        "train.sh",
        "r=$(cat value.txt)\n\
         out=''\n\
         k=1\n\
         while [ $k -le 6 ]; do\n\
           out=\"$out step=$k loss=$((r * 10 + 60 / k))\\n\"\n\
           k=$((k + 1))\n\
         done\n\
         if [ $r -eq 5 ]; then sleep 1.2; fi\n\
         printf \"$out loss: $((r * 10 + 10))\\n\"\n\
         if [ $r -ge 9 ]; then sleep 1; fi\n",
        "loss",
        "\"loss\"",
        &MEDIAN_FROM_STEP_2,
        3,
    )
    .script("write\tvalue.txt\t4\\n\n---\nwrite\tvalue.txt\t9\\n\n")
    .file("value.txt", "5\n")
    .create();
    let out = ok(r.hone(&["run", "--tag", "b"]));
    let log = r.log();
    assert_statuses(&log, &["baseline", "keep", "discard"]);
    assert_eq!(log[2]["objective"], 100.0, "{:?}", log[2]);
    // The baseline's curve, all of it at its end a second in, says why nothing is pruned.
    let said = text(&out);
    assert_eq!(
        said.matches("every point of the baseline's curve arrived as its run ended")
            .count(),
        1,
        "{said}"
    );
    assert!(said.contains("flush=True"), "{said}");
    assert_eq!(curve_points(&r, 2), 6, "its whole curve is kept");
}

#[test]
fn a_progress_value_that_goes_against_the_objective_turns_pruning_off() {
    // `hone init` may pick an accuracy to maximize while the progress lines print a falling
    // loss: pruning judges curves in the objective's direction, so it would stop the runs
    // whose loss falls fastest, the best ones. The baseline's curve shows it: pruning is
    // turned off, and the run says why (again when it resumes, unless `progress` was
    // pointed at a value that moves as the objective does since). The baseline here is
    // experiment 1: a misspelt metric failed the first.
    let r = curve_repo(
        "train.sh",
        "r=$(cat value.txt)\n\
         k=1\n\
         while [ $k -le 6 ]; do echo \"step=$k loss=$((r * 10 + 60 / k)) rise=$((k * 10 - r))\"; k=$((k + 1)); done\n\
         echo \"acc: $((100 - r))\"\n",
        "acx",
        "\"loss\"",
        &[("direction", "\"maximize\""), MEDIAN_FROM_STEP_2[0], MEDIAN_FROM_STEP_2[1], MEDIAN_FROM_STEP_2[2]],
        3,
    )
    .script("write\tvalue.txt\t4\\n\n---\nwrite\tvalue.txt\t3\\n\n---\nwrite\tvalue.txt\t2\\n\n")
    .file("value.txt", "5\n")
    .create();
    let failed = r.hone(&["run", "--tag", "d"]);
    assert_eq!(failed.status.code(), Some(1), "{}", text(&failed));
    edit_spec(&r.dir, |s| s.replace("\"acx\"", "\"acc\""));
    let out = ok(r.hone(&["run", "--tag", "d"]));
    let log = r.log();
    assert_statuses(&log, &["crash", "baseline", "keep", "keep"]);
    let said = text(&out);
    assert!(
        said.contains("[verify] prune is off for this run: the baseline's progress value went from 110.000000 to 60.000000 (its first and last quarters' means) while acc is maximized"),
        "{said}"
    );
    // Resumed with more experiments, it says so again and prunes nothing...
    let again = ok(r.hone(&["run", "--tag", "d", "--more", "1"]));
    assert!(
        text(&again).contains("[verify] prune is off"),
        "{}",
        text(&again)
    );
    // ...until `progress` reads a value that rises as acc does: read again from the
    // baseline's log with the new setting, it goes the objective's way.
    edit_spec(&r.dir, |s| {
        s.replace("progress = \"loss\"", "progress = \"rise\"")
    });
    let spec = std::fs::read_to_string(r.dir.join("hone.toml")).unwrap();
    assert!(spec.contains("progress = \"rise\""), "{spec}");
    let fixed = ok(r.hone(&["run", "--tag", "d", "--more", "1"]));
    assert!(!text(&fixed).contains("prune is off"), "{}", text(&fixed));
}

#[test]
fn a_periodic_evaluation_line_mid_run_does_not_keep_a_run_from_being_pruned() {
    // The script prints its objective as a periodic evaluation after step 2, then goes on:
    // a point after it means the run is not over, so a hopeless run is still pruned.
    let r = curve_repo(
        "train.sh",
        "r=$(cat value.txt)\n\
         k=1\n\
         while [ $k -le 6 ]; do\n\
           echo \"step=$k loss=$((r * 10 + 60 / k))\"\n\
           if [ $k -eq 2 ]; then echo \"loss: $((r * 10 + 30))\"; fi\n\
           if [ $k -ge 3 ] && [ $r -ge 50 ]; then while :; do sleep 0.05; done; fi\n\
           k=$((k + 1))\n\
         done\n\
         echo \"loss: $((r * 10 + 10))\"\n",
        "loss",
        "\"loss\"",
        &MEDIAN_FROM_STEP_2,
        3,
    )
    .script("write\tvalue.txt\t4\\n\n---\nwrite\tvalue.txt\t50\\n\n")
    .file("value.txt", "5\n")
    .create();
    let log = r.run_log("e");
    assert_statuses(&log, &["baseline", "keep", "pruned"]);
}

/// A run that falls behind only at the step where the finished runs ended (here its last
/// point, just before its result) has nothing left to save: it runs to its end and is judged on
/// its result, which the search then knows.
#[test]
fn a_run_behind_only_in_the_last_tenth_of_the_curves_is_not_pruned() {
    // `value.txt` holds `r late o`: the curve is 10 r + 100 / k at step k, and drops to
    // 10 r - 50 at its last step (10) unless `late` is `late` (a run that then takes two
    // seconds to evaluate); the result is 10 o + 10. The candidate follows the kept run's
    // curve (ahead of the median) until that last step, where it is far behind.
    let r = curve_repo(
        "train.sh",
        "set -- $(cat value.txt)\n\
         k=1\n\
         while [ $k -le 10 ]; do\n\
           loss=$(($1 * 10 + 100 / k))\n\
           if [ $k -eq 10 ] && [ \"$2\" != late ]; then loss=$(($1 * 10 - 50)); fi\n\
           echo \"step=$k loss=$loss\"\n\
           k=$((k + 1))\n\
         done\n\
         if [ \"$2\" = late ]; then sleep 2; fi\n\
         echo \"loss: $(($3 * 10 + 10))\"\n",
        "loss",
        "\"loss\"",
        &MEDIAN_FROM_STEP_2,
        3,
    )
    .script("write\tvalue.txt\t4 x 4\\n\n---\nwrite\tvalue.txt\t4 late 9\\n\n")
    .file("value.txt", "5 x 5\n")
    .create();
    let log = r.run_log("end");
    assert_statuses(&log, &["baseline", "keep", "discard"]);
    assert_eq!(
        log[2]["objective"], 100.0,
        "its result was read: {}",
        log[2]
    );
}
