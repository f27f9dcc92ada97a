//! Containment: resource limits, and bubblewrap confining agents and verifiers to their worktree
//! (skipped with a notice where bubblewrap is not installed).

use crate::support::*;

#[test]
fn sandbox_limits_stop_runaway_memory_and_cpu() {
    let verify = "if grep -q spin value.txt; then while :; do :; done; fi; python3 -c \"n = int(open('value.txt').read().split()[1]); x = bytearray(n * 1024 * 1024); print('score:', 1000 - n)\"";
    let r = Repo::new(
        "[stop]\nmax_experiments = 3\n\n[sandbox]\nmemory = \"400M\"\ncpu_time = \"1s\"\n",
        verify,
        "write\tvalue.txt\tscore: 900\\n\n---\nwrite\tvalue.txt\tspin 1\\n\n",
    );
    ok(r.hone(&["run"]));
    let log = r.log();
    // 900 MiB does not fit in 400M of address space; a busy loop runs out of CPU time.
    assert_eq!(log[0]["status"], "baseline", "{:?}", log[0]);
    assert_eq!(log[1]["status"], "crash", "{:?}", log[1]);
    assert_eq!(log[2]["status"], "crash", "{:?}", log[2]);
    assert_reason(&log[2], "signal");
}

/// What candidates' code leaves below `.hone/` (a setuid program a verifier running as root
/// made, say) is out of other users' reach: the folder is its owner's alone, made so on a
/// repository where it was open to all.
#[test]
fn the_state_folder_is_its_owners_alone() {
    use std::os::unix::fs::PermissionsExt;
    let r = Repo::scored(2, &scores(&[3]));
    std::fs::create_dir_all(r.dir.join(".hone")).unwrap();
    std::fs::set_permissions(r.dir.join(".hone"), std::fs::Permissions::from_mode(0o755)).unwrap();
    ok(r.hone(&["run", "--tag", "p"]));
    let mode = std::fs::metadata(r.dir.join(".hone"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700, "{mode:o}");
    // SAFETY: geteuid takes nothing.
    if unsafe { libc::geteuid() } == 0 {
        let other = Command::new("runuser")
            .args(["-u", "nobody", "--", "ls"])
            .arg(r.dir.join(".hone").join("runs"))
            .output();
        if let Ok(out) = other {
            assert!(!out.status.success(), "another user listed .hone/runs");
        }
    }
}

/// bubblewrap is needed for the containment tests. CI installs it (`.ci/run`); elsewhere a
/// machine without it skips them with a notice rather than failing the suite.
pub(crate) fn bwrap_available() -> bool {
    let ok = Command::new("bwrap")
        .args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--unshare-net",
            "true",
        ])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        ok || std::env::var_os("CI").is_none(),
        "CI must be able to run bubblewrap (see .ci/run)"
    );
    if !ok {
        eprintln!("SKIPPED: bubblewrap is not usable here (apt-get install bubblewrap)");
    }
    ok
}

#[test]
fn bwrap_confines_agents_and_verifiers_to_their_worktree_and_cuts_the_network() {
    if !bwrap_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let escape = tmp.path().join("escaped.txt");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let verify = format!(
        "echo x > {e} 2>/dev/null; if grep -q net value.txt && [ -e ../../hone.db ]; then echo score: -100; exit 0; fi; if grep -q net value.txt; then python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)\" || exit 7; fi; cat value.txt",
        e = escape.display()
    );
    let script = |user_prepare: &Path| {
        format!(
            "write\t{}\tprint('score: 0')\\n\n---\nexpect-prompt\tYou may change only\nwrite\tvalue.txt\tnet\\nscore: 1\\n\n",
            user_prepare.display()
        )
    };
    let contained = Repo::new(
        "[stop]\nmax_experiments = 3\n\n[sandbox]\nkind = \"bwrap\"\nnetwork = false\n",
        &verify,
        "",
    );
    // The agent's script may live anywhere readable; here, untracked in the repository.
    let inner = contained.dir.join("agent-script");
    put(&inner, script(&contained.dir.join("prepare.py")));
    edit_spec(&contained.dir, |t| {
        t.replace(
            &contained.script.display().to_string(),
            &inner.display().to_string(),
        )
    });
    ok(contained.hone(&["run"]));
    let log = contained.log();
    // The agent could not write the user's prepare.py; the verifier reached no network.
    assert_eq!(log[1]["status"], "invalid", "{:?}", log[1]);
    assert_eq!(
        std::fs::read_to_string(contained.dir.join("prepare.py")).unwrap(),
        "# the fixed evaluator\n"
    );
    assert_eq!(log[2]["status"], "crash", "{:?}", log[2]);
    assert_reason(&log[2], "status 7");
    assert!(!escape.exists(), "the verifier wrote outside its worktree");

    // Control: without the sandbox the same agent and verifier do all of that.
    let open = Repo::stops_after(3, &verify, "");
    put(&open.script, script(&open.dir.join("prepare.py")));
    ok(open.hone(&["run"]));
    assert_eq!(open.log()[2]["status"], "keep");
    assert!(escape.exists());
    drop(listener);
}

#[test]
fn bwrap_missing_stops_the_run_unless_not_required() {
    // A PATH without bwrap stands in for a machine without it.
    let r = Repo::new(
        "[stop]\nmax_experiments = 1\n\n[sandbox]\nkind = \"bwrap\"\n",
        SCORE,
        "",
    );
    let bin = path_without_bwrap();
    let run = |args: &[&str]| {
        Command::new(HONE)
            .args(args)
            .current_dir(&r.dir)
            .env("PATH", bin.path())
            .output()
            .unwrap()
    };
    exits_with(run(&["run"]), 1, "bubblewrap is not installed");
    edit_spec(&r.dir, |t| {
        t.replace("kind = \"bwrap\"", "kind = \"bwrap\"\nrequired = false")
    });
    let out = ok(run(&["run"]));
    assert_says(&out, "running WITHOUT containment");
}

/// A folder to put alone on `PATH`: git, sh and cat, and no bubblewrap, as on a machine
/// without it.
fn path_without_bwrap() -> tempfile::TempDir {
    let bin = tempfile::tempdir().unwrap();
    for tool in ["git", "sh", "cat"] {
        let path = String::from_utf8(
            Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap();
        std::os::unix::fs::symlink(path.trim(), bin.path().join(tool)).unwrap();
    }
    bin
}

#[test]
fn an_agent_outside_a_sandbox_nobody_chose_is_a_warning() {
    // A command agent with no `[sandbox] kind`: the run says what the agent could reach and
    // what to set; where bubblewrap is missing, that it cannot help here.
    let r = Repo::new("[stop]\nmax_experiments = 1\n", SCORE, "");
    let out = ok(r.hone(&["run"]));
    assert_says(&out, "[sandbox] kind is not set");
    assert_says(&out, "rewrite the records of earlier experiments");
    // SAFETY: geteuid takes nothing.
    let who = if unsafe { libc::geteuid() } == 0 {
        "as root"
    } else {
        "as your user"
    };
    assert_says(&out, who);
    if bwrap_available() {
        assert_says(
            &out,
            "bubblewrap works here: set [sandbox] kind = \"bwrap\"",
        );
    }
    let bin = path_without_bwrap();
    let out = Command::new(HONE)
        .args(["run", "--max-experiments", "2"])
        .current_dir(&r.dir)
        .env("PATH", bin.path())
        .output()
        .unwrap();
    assert_says(
        &ok(out),
        "bubblewrap cannot contain them here (bubblewrap is not installed",
    );
    // Chosen either way, or the built-in optimizer (it writes no code): no warning.
    edit_spec(&r.dir, |t| format!("{t}\n[sandbox]\nkind = \"rlimits\"\n"));
    let out = ok(r.hone(&["run", "--max-experiments", "3"]));
    assert!(!text(&out).contains("kind is not set"), "{}", text(&out));
    let (_k, knobs) = knob_repo();
    let out = ok(hone_in(&knobs, &["run", "--max-experiments", "1"]));
    assert!(!text(&out).contains("kind is not set"), "{}", text(&out));
}

#[test]
fn a_reviewer_command_starts_away_from_the_candidates_files() {
    // A strict reviewer in Python; `python3 -c` imports from where it starts. Started in the
    // worktree, it would import the candidate's json.py, which prints APPROVE and exits.
    // Without a sandbox and (where bubblewrap works) inside one.
    let marks = Marks::new();
    put(
        marks.path("review.sh"),
        "test -f \"$HONE_WORKTREE/json.py\" || { echo 'REJECT: HONE_WORKTREE is not the candidate'; exit 0; }\n\
         touch here || { echo 'REJECT: cannot write where it starts'; exit 0; }\n\
         python3 -c \"import json; print('REJECT: strict reviewer')\"\n",
    );
    let sandboxes: &[&str] = if bwrap_available() {
        &["", "\n[sandbox]\nkind = \"bwrap\"\n"]
    } else {
        &[""]
    };
    for sandbox in sandboxes {
        let runs = RunCounter::new();
        let review = marks.fill(&format!(
            "[stop]\nmax_experiments = 2\n\n[review]\ncommand = \"sh {{m}}/review.sh\"\n{sandbox}"
        ));
        let verify = runs.command.clone();
        let r = Repo::builder()
            .script("write\tjson.py\tprint('APPROVE')\\nimport os\\nos._exit(0)\\n\nwrite\tvalue.txt\tscore: 3\\n\n")
            .spec_with(move |agent| {
                Spec::standard(&verify, agent)
                    .editable(&["value.txt", "json.py"])
                    .tail(&review)
            })
            .create();
        let log = r.run_log("rv");
        assert_statuses(&log, &["baseline", "rejected"]);
        assert_eq!(
            log[1]["reason"], "the reviewer rejected it: strict reviewer",
            "{sandbox}"
        );
        if sandbox.is_empty() {
            // (A sandboxed verifier cannot write the counter: /tmp is read-only to it.)
            assert_eq!(runs.runs(), 1, "only the baseline was measured");
        }
    }
}
