//! Noise and decisions: repeats, confirmation runs and re-tests keep a lucky seed from being
//! kept; duplicates are not run again; simpler code wins ties.

use crate::support::*;

/// A verifier whose score is pure noise: it depends only on the SEED written in value.txt and
/// on the repeat's seed that hone passes in NOISE_SEED (`seed_env`), never on anything better.
const NOISY: &str = "python3 -c \"import os, random; s = open('value.txt').read().split('=')[1].strip(); r = random.Random(s + '-' + os.environ.get('NOISE_SEED', 'x')); print('score:', 10 + r.gauss(0, 1))\"";

fn seed_script(seeds: std::ops::Range<u32>) -> String {
    seeds
        .map(|s| format!("write\tvalue.txt\tSEED = {s}\\n\nhypothesis\tseed {s}\n"))
        .collect::<Vec<_>>()
        .join("---\n")
}

fn noisy_repo(verify_extra: &str, trials: u32) -> Repo {
    let seeded = format!("seed_env = \"NOISE_SEED\"\n{verify_extra}");
    Repo::builder()
        .file("value.txt", "SEED = 0\n")
        .script(&seed_script(1..trials + 1))
        .standard_with(NOISY, &seeded, trials as usize + 1)
        .create()
}

#[test]
fn a_lucky_seed_is_not_kept_with_repeats_and_confirms() {
    // Control: the greedy rule (one run, any improvement) keeps lucky seeds. If it did not,
    // this test could not tell the defence from an inert verifier.
    let greedy = noisy_repo("noise_k = 0", 20);
    ok(greedy.hone(&["run"]));
    assert!(
        greedy.statuses().iter().any(|s| s == "keep"),
        "the greedy rule should be fooled: {:?}",
        greedy.statuses()
    );

    // hone's defence: sigma from 5 baseline runs, threshold 2 sigma, 2 confirm runs.
    let r = noisy_repo("baseline_repeats = 5\nconfirm = 2", 20);
    let log = r.run_log("noise");
    assert_eq!(log.len(), 21);
    assert_eq!(
        log[0]["runs"].as_array().unwrap().len(),
        5,
        "the baseline ran 5 times"
    );
    for e in &log[1..] {
        assert_ne!(e["status"], "keep", "a seed change was kept: {e}");
        let runs = e["runs"].as_array().unwrap().len();
        assert!(
            runs == 1 || runs == 3,
            "a candidate runs once, or 1 + confirm times: {e}"
        );
    }
    assert_eq!(r.rev("hone/noise"), r.rev("main"), "the branch never moved");
    // `hone show` explains a decision with its numbers.
    let show = text(&r.hone(&["show", "1"]));
    assert!(show.contains("decision: discard (delta"), "{show}");
    assert!(show.contains("sigma 0."), "{show}");
}

#[test]
fn confirm_runs_and_retests_are_recorded() {
    let r = Repo::scored(3, &scores(&[4, 3]));
    edit_spec(&r.dir, |t| {
        t.replace(
            "metric = \"score\"",
            "metric = \"score\"\nbaseline_repeats = 2\nconfirm = 2\nretest_every = 2",
        )
    });
    let out = ok(r.hone(&["run"]));
    let log = r.log();
    let runs = |i: usize| log[i]["runs"].as_array().unwrap().len();
    assert_eq!(
        (runs(0), runs(1), runs(2)),
        (2, 3, 4),
        "baseline x2, keep 1+2, keep 1+2 + a re-test"
    );
    assert_says(&out, "re-tested the champion #2");
    assert_eq!(log[2]["status"], "keep");
}

#[test]
fn duplicates_are_not_run_again_and_simpler_code_wins_ties() {
    let r = Repo::builder()
        .file("value.txt", "score: 5\n# notes\n# more notes\n")
        .script("write\tvalue.txt\tscore: 6\\n\n---\nwrite\tvalue.txt\tscore: 5\\n# a long comment\\n\n---\nwrite\tvalue.txt\tscore: 6\\n\n---\nwrite\tvalue.txt\tscore: 5\\n\n")
        .standard_with(SCORE, "prefer_simpler = true", 5)
        .create();
    ok(r.hone(&["run"]));
    let log = r.log();
    // #1 worse; #2 same score, one line fewer: kept as a simplification; #3 identical to #1;
    // #4 same score, one line fewer than #2: another simplification.
    assert_statuses(&log, &["baseline", "discard", "keep", "invalid", "keep"]);
    assert!(reason(&log[2]).starts_with("simplification"), "{}", log[2]);
    assert_eq!(
        log[3]["reason"],
        "duplicate of #1 (identical files; not run again)"
    );
}

#[test]
fn a_candidate_that_pins_its_own_seed_is_not_confirmed() {
    // The verifier honours NOISE_SEED unless the candidate's file says FIXED, as code with a
    // hard-coded seed would: its repeats are then identical and prove nothing.
    let verify = "python3 -c \"import os, random; t = open('value.txt').read(); s = t.split('=')[1].strip(); r = random.Random(s if 'FIXED' in t else s + '-' + os.environ.get('NOISE_SEED', 'x')); print('score:', 10 + r.gauss(0, 1))\"";
    let script = (1..21)
        .map(|s| format!("write\tvalue.txt\tSEED = {s} FIXED\\n\n"))
        .collect::<Vec<_>>()
        .join("---\n");
    let r = Repo::builder()
        .file("value.txt", "SEED = 0\n")
        .script(&script)
        .spec_with(|agent| {
            Spec::standard(verify, agent)
                .after(
                    "verify",
                    "metric",
                    "seed_env = \"NOISE_SEED\"\nbaseline_repeats = 5\nconfirm = 2",
                )
                .tail("[stop]\nmax_experiments = 21\n")
        })
        .create();
    let log = r.run_log("fixed");
    assert!(
        log[1..].iter().all(|e| e["status"] != "keep"),
        "a pinned seed was kept: {log:?}"
    );
    assert!(
        log.iter().any(|e| e["reason"]
            .as_str()
            .unwrap_or("")
            .contains("ignores the repeat seed")),
        "some lucky pinned seed passed its first run and was caught at confirmation: {log:?}"
    );
}
