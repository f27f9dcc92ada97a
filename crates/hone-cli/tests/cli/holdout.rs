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
