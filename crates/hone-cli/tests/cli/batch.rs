//! The SLURM backend: every verification as a job, two at once, and a job a killed hone left
//! behind is cancelled on resume. Without a SLURM node these tests say so and pass.

use crate::support::*;

/// Whether a SLURM node is up (scripts/slurm-local.sh starts a one-node cluster). Without one
/// the SLURM tests say so and pass, unless HONE_REQUIRE_SLURM is set (as .ci/run does).
fn slurm_cluster() -> bool {
    let up = Command::new("sinfo")
        .args(["-h", "-o", "%T"])
        .output()
        .is_ok_and(|o| {
            o.status.success()
                && String::from_utf8_lossy(&o.stdout).lines().any(|l| {
                    let l = l.trim();
                    !l.is_empty()
                        && !l.ends_with('*')
                        && !["down", "drain", "fail", "unk"]
                            .iter()
                            .any(|b| l.starts_with(b))
                })
        });
    if !up {
        assert!(
            std::env::var_os("HONE_REQUIRE_SLURM").is_none(),
            "HONE_REQUIRE_SLURM is set but no SLURM node is up: run scripts/slurm-local.sh"
        );
        eprintln!("skipped: no SLURM cluster here (scripts/slurm-local.sh starts one)");
    }
    up
}

#[test]
fn slurm_backend_runs_every_verification_as_a_job() {
    if !slurm_cluster() {
        return;
    }
    let verify = "echo job=$SLURM_JOB_ID; cat value.txt; \
        if grep -q crash value.txt; then exit 3; fi; \
        if grep -q hang value.txt; then sleep 300; fi; \
        if grep -q cancel value.txt; then scancel $SLURM_JOB_ID; sleep 60; fi";
    let r = Repo::stops_after(
        5,
        verify,
        "write\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tcrash\\n\n---\nwrite\tvalue.txt\thang\\n\n---\nwrite\tvalue.txt\tcancel\\n\n",
    );
    let shared = r.tmp_dir().join("shared");
    edit_spec(&r.dir, |t| {
        let toml = t.replace("timeout = \"60s\"", "timeout = \"3s\"");
        format!(
            "{toml}\n[exec]\nbackend = \"slurm\"\nshared_dir = \"{}\"\n",
            shared.display()
        )
    });
    let log = r.run_log("s");
    assert_statuses(&log, &["baseline", "keep", "crash", "timeout", "crash"]);
    assert_reason(&log[2], "status 3");
    let why = reason(&log[4]);
    assert!(why.contains("cancelled outside hone"), "{why}");
    // The verifier really ran as a batch job, in the worktree under the shared directory.
    let show = text(&r.hone(&["show", "1"]));
    let job = show
        .lines()
        .find_map(|l| l.trim().strip_prefix("job="))
        .unwrap_or_else(|| panic!("no job id in the log: {show}"));
    assert!(job.parse::<u64>().is_ok(), "{show}");
    let runs = std::fs::read_dir(&shared).unwrap().count();
    assert_eq!(runs, 1, "one run directory under the shared directory");
    // Every job hone submitted was recorded and none is left in the queue.
    let queue = Command::new("squeue")
        .args(["-h", "-n", "hone-s-3"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&queue.stdout).trim(),
        "",
        "the timed-out job is still queued"
    );
    assert_eq!(r.rev("hone/s"), r.rev("refs/hone/s/1"));
}

#[test]
fn slurm_job_left_by_a_killed_hone_is_cancelled_on_resume() {
    if !slurm_cluster() {
        return;
    }
    // Experiment 1's candidate hangs in its job (the first time only).
    let verify = "cat value.txt; if grep -q hang value.txt && [ \"$HONE_EXPERIMENT\" = 1 ]; then sleep 300; fi";
    let r = Repo::stops_after(
        3,
        verify,
        "write\tvalue.txt\thang\\nscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 4.5\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\n",
    );
    let shared = r.tmp_dir().join("shared");
    append_spec(
        &r.dir,
        &format!(
            "\n[exec]\nbackend = \"slurm\"\nshared_dir = \"{}\"\n",
            shared.display()
        ),
    );
    let running = || {
        let q = Command::new("squeue")
            .args(["-h", "-n", "hone-k-1", "-o", "%i %T"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&q.stdout).trim().to_string()
    };
    let mut hone = r.spawn_hone(&["run", "--tag", "k"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !running().ends_with("RUNNING") {
        assert!(
            Instant::now() < deadline,
            "experiment 1's job never started"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    hone.kill().unwrap();
    hone.wait().unwrap();
    // The job outlives hone...
    assert!(running().ends_with("RUNNING"), "{}", running());
    // ...until the next hone resumes the run: it cancels the job and records it aborted
    // (not counted by max_experiments: two more experiments follow, the first of them #1's
    // candidate verified again, in a job of its own).
    r.run_expect("k", &["baseline", "aborted", "keep", "keep"]);
    let again = &r.log()[2];
    assert!(
        again["description"]
            .as_str()
            .unwrap()
            .contains("verified again: experiment 1's run was cut off"),
        "{again}"
    );
    assert_eq!(again["objective"], 4.0, "{again}");
    let deadline = Instant::now() + Duration::from_secs(60);
    while running().contains("RUNNING") {
        assert!(Instant::now() < deadline, "the stale job still runs");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn slurm_backend_runs_two_experiments_as_jobs_at_once() {
    if !slurm_cluster() {
        return;
    }
    let marks = tempfile::tempdir().unwrap();
    let r = Repo::stops_after(3, &together_verifier(marks.path()), &scores(&[4, 3]));
    let shared = r.tmp_dir().join("shared");
    append_spec(
        &r.dir,
        &format!(
            "\n[exec]\nbackend = \"slurm\"\nshared_dir = \"{}\"\nworkers = 2\n",
            shared.display()
        ),
    );
    ok(r.hone(&["run", "--tag", "sp"]));
    let st = r.statuses();
    assert_eq!(st.len(), 3, "{st:?}");
    assert!(
        !st.iter().any(|s| s == "crash"),
        "the two jobs did not run at once: {st:?}"
    );
    assert_eq!(std::fs::read_dir(marks.path()).unwrap().count(), 2);
}

/// A SLURM job under `[sandbox] kind = "bwrap"`, with hone started with the current directory
/// first on `PATH`: the verifier cannot read hone's state, gets `[verify] env`'s
/// `LD_LIBRARY_PATH` as written (inside the sandbox), and the run says that `PATH` was cleaned.
#[test]
fn a_sandboxed_slurm_job_hides_hones_state_and_gets_its_environment_as_written() {
    if !slurm_cluster() || hone::sandbox::probe().is_err() {
        return;
    }
    let db = "$PROJECT_ROOT/.hone/hone.db";
    let verify = format!(
        "cat value.txt; echo \"ldp=$LD_LIBRARY_PATH\"; if test -r \"{db}\"; then echo state-read; fi"
    );
    let r = Repo::stops_after(2, &verify, "write\tvalue.txt\tscore: 4\\n\n");
    let shared = r.tmp_dir().join("shared");
    let root = r.dir.display().to_string();
    edit_spec(&r.dir, |t| {
        let toml = t.replace(
            "metric = \"score\"",
            &format!(
                "metric = \"score\"\nenv = {{ LD_LIBRARY_PATH = \"build/lib:/usr/lib\", PROJECT_ROOT = {} }}",
                quoted(&root)
            ),
        );
        format!(
            "{toml}\n[sandbox]\nkind = \"bwrap\"\n\n[exec]\nbackend = \"slurm\"\nshared_dir = \"{}\"\n",
            shared.display()
        )
    });
    let path = format!(":{}", std::env::var("PATH").unwrap_or_default());
    let out = ok(Command::new(HONE)
        .args(["run", "--tag", "sb"])
        .current_dir(&r.dir)
        .env("PATH", path)
        .output()
        .unwrap());
    assert_says(&out, "PATH has relative or empty entries");
    assert_statuses(&r.log(), &["baseline", "keep"]);
    for n in ["0", "1"] {
        let show = text(&r.hone(&["show", n]));
        assert!(show.contains("ldp=build/lib:/usr/lib"), "{show}");
        assert!(
            !show.contains("state-read"),
            "the job read hone's state: {show}"
        );
    }
}
