//! The knobs optimizer (no agent: it tunes `# hone:` annotated values itself), and `--agent`.

use crate::support::*;

#[test]
fn knobs_optimizer_improves_and_is_reproducible_by_seed() {
    let descs = |dir: &Path, seed: &str| -> Vec<String> {
        ok(hone_in(dir, &["run", "--seed", seed]));
        log_lines(dir)
    };
    let (_a, da) = knob_repo();
    let (_b, db) = knob_repo();
    let first = descs(&da, "7");
    let second = descs(&db, "7");
    assert_eq!(first, second, "the same seed gives the same candidates");
    let (_c, dc) = knob_repo();
    assert_ne!(
        first,
        descs(&dc, "8"),
        "another seed gives other candidates"
    );
    assert_eq!(first.len(), 15);
    assert!(
        first[1].contains("->"),
        "descriptions say what changed: {first:?}"
    );
    let log = hone_in(&da, &["status", "--json"]);
    let s: serde_json::Value = serde_json::from_slice(&log.stdout).unwrap();
    assert!(
        s["best"].as_f64().unwrap() < s["baseline"].as_f64().unwrap() * 0.5,
        "{s}"
    );
    assert!(
        s["best_vs_baseline"].as_str().unwrap().contains(" -> "),
        "{s}"
    );
}

#[test]
fn agent_flag_switches_to_the_command_proposer() {
    let (_t, dir) = knob_repo();
    let script = dir.join("../agent-script");
    put(&script, "replace\tparams.txt\tWIDTH = 2\tWIDTH = 13\n");
    edit_spec(&dir, |t| {
        t.replace(
            "[stop]",
            &format!(
                "[agent]\nkind = \"knobs\"\ncommand = \"{FAKE_AGENT} {}\"\n\n[stop]",
                script.display()
            ),
        )
    });
    ok(hone_in(&dir, &["run", "--agent", "command", "-n", "2"]));
    let rows = log_in(&dir);
    assert_eq!(rows[1]["status"], "keep");
    assert_eq!(rows[1]["objective"], 25.0);
}
