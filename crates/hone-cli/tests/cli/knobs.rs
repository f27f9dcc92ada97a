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

/// The knobs optimizer rewrites tracked files in hone's own process, so its snapshots list
/// the parent's tree and never ask git for the worktree (`Proposal::in_place`): no `git
/// ls-files` while it runs, where the command proposer runs one per candidate.
#[test]
fn the_knobs_optimizer_snapshots_without_listing_the_worktree_through_git() {
    let spy = GitSpy::new();
    // hone's git calls during `hone run ARGS` in `dir`: discoveries, and worktree listings.
    let calls_of = |dir: &Path, args: &[&str]| -> (usize, usize) {
        spy.take();
        let out = Command::new(HONE)
            .args(args)
            .current_dir(dir)
            .env("PATH", &spy.path)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let log = spy.take();
        let count = |what: &str| log.lines().filter(|l| l.contains(what)).count();
        (count("rev-parse"), count("ls-files"))
    };
    let (_t, dir) = knob_repo();
    let (found, listings) = calls_of(&dir, &["run", "-n", "6"]);
    assert!(found > 0, "the wrapper saw hone's git");
    assert_eq!(
        listings, 0,
        "the knobs optimizer listed the worktree through git"
    );
    assert_eq!(log_in(&dir).len(), 6);
    // The same wrapper sees a command proposer's listing: the check can fail.
    let (_t, dir) = knob_repo_with_a_command_agent();
    let (_, listings) = calls_of(&dir, &["run", "--agent", "command", "-n", "2"]);
    assert!(listings > 0, "no ls-files seen for the command proposer");
}

/// The knobs repository with `[agent] command` a scripted agent that sets WIDTH to 13 (the
/// optimum's), used with `--agent command`.
fn knob_repo_with_a_command_agent() -> (tempfile::TempDir, PathBuf) {
    let (t, dir) = knob_repo();
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
    (t, dir)
}

#[test]
fn agent_flag_switches_to_the_command_proposer() {
    let (_t, dir) = knob_repo_with_a_command_agent();
    ok(hone_in(&dir, &["run", "--agent", "command", "-n", "2"]));
    let rows = log_in(&dir);
    assert_eq!(rows[1]["status"], "keep");
    assert_eq!(rows[1]["objective"], 25.0);
}

/// A run longer than the records held whole: the knobs proposer's old records leave hone's
/// memory (`engine::history::forget`), and the stop conditions still count every one: the
/// first session stops at `max_experiments`, and the resumed one (which drops the records as
/// it loads them) on patience, counted across both sessions.
#[test]
fn old_records_leave_memory_and_the_stop_conditions_still_count_them() {
    let (_t, dir) = knob_repo_of(
        "A = 50  # hone: int 1..1000\nB = 50  # hone: int 1..1000\nC = 0.5  # hone: 0.0..1.0\n",
        "echo loss: 1\n",
        280,
    );
    // Nothing improves on the baseline; a time limit stops a run that would count wrong.
    edit_spec(&dir, |t| {
        t.replace("[stop]", "[stop]\npatience = 290\nmax_time = \"15m\"")
    });
    let out = ok(hone_in(&dir, &["run", "--tag", "long"]));
    assert!(
        text(&out).contains("reached max_experiments (280)"),
        "{}",
        text(&out)
    );
    assert_eq!(log_in(&dir).len(), 280);
    let out = ok(hone_in(&dir, &["run", "--tag", "long", "--more", "100"]));
    assert!(
        text(&out).contains("no improvement in 290 experiments (patience 290)"),
        "{}",
        text(&out)
    );
    let rows = log_in(&dir);
    assert_eq!(rows.len(), 291);
    assert!(
        rows[1..].iter().all(|r| r["status"] == "discard"),
        "{rows:?}"
    );
}
