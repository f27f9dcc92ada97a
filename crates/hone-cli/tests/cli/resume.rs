//! Crash and chaos: `kill -9` and Ctrl-C at each stage of an experiment, then `hone run` again
//! resumes without losing or repeating work and kills what the dead process left behind.

use crate::support::*;

#[test]
fn kill_9_during_verification_then_resume() {
    let marks = Marks::new();
    // Experiment 2's verifier blocks (once) until killed.
    let r = Repo::stops_after(5, &marks.blocking_verifier(2), &scores(&[4, 3, 2, 1]));
    let mut child = r.spawn_hone(&["run", "--tag", "k"]);
    let pgid = marks.blocked();
    kill_9_leaving(&mut child, pgid, "the orphaned verifier");
    let st = r.statuses();
    assert_eq!(st, ["baseline", "keep", "running"]);
    // No hone runs it now: `hone status` says so, and calls the running record cut off
    // (its candidate is verified again on resume).
    let status = text(&r.hone(&["status"]));
    assert!(
        status.contains("interrupted without a clean stop")
            && status.contains("cut off 1 (aborted on resume; 1 candidate verified again first)"),
        "{status}"
    );

    resume_kills_the_interrupted_verifier(&r, pgid);
    // The interrupted experiment keeps its verifier's log (for `hone show`).
    let show = text(&ok(r.hone(&["show", "2"])));
    assert!(show.contains("--- log tail"), "{show}");
    // The worktree was cleaned: the last candidate's parent chain is linear over keeps.
    assert_eq!(r.rev("refs/hone/k/4^"), r.rev("refs/hone/k/3"));
    assert_eq!(r.rev("refs/hone/k/3^"), r.rev("refs/hone/k/1"));
}

/// A run (`[stop] max_experiments = 4`) whose agent marks each turn it takes (`turn.<n>`) and
/// writes a score one lower each experiment (`score: 5 - n`, down to 0, and a constant `LR`
/// of the same value), and
/// whose verifier blocks, once each, on experiments `blocking` (marks `pgid.<n>`,
/// `started.<n>`) until killed.
fn run_cut_off_at(marks: &Marks, blocking: &[u32]) -> Repo {
    let turns: Vec<String> = (1..=6)
        .map(|n| {
            let score = 5 - n.min(5);
            format!("write\tvalue.txt\tscore: {score}\\nLR = {score}\\n\nmark\t{{m}}/turn.{n}\n")
        })
        .collect();
    let when: Vec<String> = blocking
        .iter()
        .map(|n| format!("[ \"$HONE_EXPERIMENT\" = {n} ]"))
        .collect();
    let verify = marks.verifier(
        &format!(
            "{{ {}; }} && [ ! -f {{m}}/started.$HONE_EXPERIMENT ]",
            when.join(" || ")
        ),
        "echo $$ > {m}/pgid.$HONE_EXPERIMENT; touch {m}/started.$HONE_EXPERIMENT; i=0; \
         while [ $i -lt 6000 ]; do sleep 0.05; i=$((i+1)); done",
    );
    Repo::stops_after(4, &verify, &marks.fill(&turns.join("---\n")))
}

/// `hone run` killed -9 while experiment `n`'s verifier blocks; that verifier is left running.
fn kill_9_while_verifying(r: &Repo, marks: &Marks, n: u32) {
    let mut child = r.spawn_hone(&["run", "--tag", "k"]);
    let pgid = marks.pgids(n..=n)[0];
    kill_9_leaving(&mut child, pgid, "the blocked verifier");
}

#[test]
fn a_candidate_cut_off_by_a_crash_is_verified_again_without_a_new_proposal() {
    let marks = Marks::new();
    let r = run_cut_off_at(&marks, &[2]);
    kill_9_while_verifying(&r, &marks, 2);
    assert_says(
        &r.hone(&["status"]),
        "cut off 1 (aborted on resume; 1 candidate verified again first)",
    );
    let out = ok(r.hone(&["run"]));
    assert_says(
        &out,
        "experiment 3: experiment 2's candidate, cut off when hone stopped, is verified again",
    );
    let log = r.log();
    assert_statuses(&log, &["baseline", "keep", "aborted", "keep", "keep"]);
    // #3 is #2's candidate, measured: the same files, its score, and no agent turn for it.
    assert_eq!(r.rev("refs/hone/k/3^{tree}"), r.rev("refs/hone/k/2^{tree}"));
    assert_eq!(r.rev("refs/hone/k/3^"), r.rev("refs/hone/k/1"));
    assert_eq!(log[3]["objective"], 3.0, "{}", log[3]);
    // Said as #2 was (its constant's change once), and whose candidate it is.
    let described = log[3]["description"].as_str().unwrap();
    assert_eq!(log[2]["description"], "LR 4 -> 3");
    assert_eq!(
        described,
        "LR 4 -> 3 (verified again: experiment 2's run was cut off when hone stopped)"
    );
    let turns: Vec<bool> = (1..=4)
        .map(|n| marks.path(&format!("turn.{n}")).exists())
        .collect();
    assert_eq!(turns, [true, true, false, true], "the agent's turns");
    // The next experiment is the agent's again (its turn for #4, one lower).
    assert_eq!(log[4]["objective"], 1.0, "{}", log[4]);
    // `hone show 2` says where its candidate was measured.
    assert_says(
        &r.hone(&["show", "2"]),
        "its candidate was verified again as #3: keep (3.000000)",
    );
}

#[test]
fn a_second_attempt_cut_off_in_its_turn_gets_no_third() {
    let marks = Marks::new();
    let r = run_cut_off_at(&marks, &[2, 3]);
    kill_9_while_verifying(&r, &marks, 2);
    // The resumed run verifies #2's candidate again as #3, and is killed there too.
    kill_9_while_verifying(&r, &marks, 3);
    let out = ok(r.hone(&["run"]));
    assert!(!text(&out).contains("is verified again"), "{}", text(&out));
    let log = r.log();
    assert_statuses(
        &log,
        &["baseline", "keep", "aborted", "aborted", "keep", "keep"],
    );
    assert_eq!(r.rev("refs/hone/k/3^{tree}"), r.rev("refs/hone/k/2^{tree}"));
    // #4 is the agent's own turn.
    assert!(marks.path("turn.4").exists());
    assert!(!marks.path("turn.3").exists());
}

#[test]
fn a_second_run_while_one_works_names_the_process_that_holds_the_repository() {
    let marks = Marks::new();
    let r = Repo::stops_after(2, &marks.blocking_verifier(1), &scores(&[4]));
    let mut child = r.spawn_hone(&["run"]);
    marks.blocked();
    let second = r.hone(&["run"]);
    put(marks.path("release"), "");
    assert!(child.wait().unwrap().success());
    assert_eq!(second.status.code(), Some(1), "{}", text(&second));
    assert_says(
        &second,
        &format!(
            "another `hone run` is already running in this repository (process {}, lock ",
            child.id()
        ),
    );
}

#[test]
fn a_new_run_names_the_older_runs_left_unfinished() {
    // Run a stops on a failure (resumable); run b, made with --new, finishes; a plain `hone
    // run` then starts afresh and names a, which only `--tag a` resumes.
    let r = Repo::new(
        "[stop]\nmax_experiments = 3\nmax_consecutive_failures = 1\n",
        SCORE,
        "write\tvalue.txt\tno score here\\n\n",
    );
    let out = r.hone(&["run", "--tag", "a"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    ok(r.hone(&["run", "--new", "--tag", "b", "-n", "1"]));
    let out = ok(r.hone(&["run", "-n", "1"]));
    assert_says(&out, "run b finished");
    assert_says(
        &out,
        "older runs left unfinished: a (`hone run --tag a` resumes one)",
    );
}

#[test]
fn ctrl_c_once_finishes_the_experiment_then_resume_continues() {
    let marks = Marks::new();
    let r = Repo::stops_after(3, &marks.blocking_verifier(1), &scores(&[4, 3]));
    let mut child = r.spawn_hone(&["run"]);
    marks.blocked();
    // Ctrl-C at a terminal: SIGINT to hone's whole foreground process group.
    // SAFETY: signalling the process group of our own child.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
    put(marks.path("release"), "");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "interrupted runs exit 130");
    assert_eq!(
        r.statuses(),
        ["baseline", "keep"],
        "the current experiment finishes"
    );
    let st = text(&r.hone(&["status"]));
    assert!(
        st.contains(": interrupted (resume with `hone run`)"),
        "{st}"
    );
    r.hone_expect(&["run"], &["baseline", "keep", "keep"]);
}

#[test]
fn the_latest_run_is_the_one_that_last_ran_and_an_unknown_tag_lists_the_runs() {
    let r = Repo::stops_after(2, "cat value.txt", &scores(&[4, 3, 2]));
    ok(r.hone(&["run", "--tag", "a"]));
    ok(r.hone(&["run", "--tag", "b"]));
    // `a` resumed after `b` was made: the commands without --run read `a`.
    ok(r.hone(&["run", "--tag", "a", "--more", "1"]));
    let status = text(&ok(r.hone(&["status"])));
    assert!(status.contains("run a "), "{status}");
    ok(r.hone(&["show", "2"]));
    let out = r.hone(&["status", "--run", "c"]);
    assert!(!out.status.success());
    let said = text(&out);
    assert!(
        said.contains("no run tagged `c`") && said.contains("runs here, newest first: b, a"),
        "{said}"
    );
}

#[test]
fn a_hang_up_does_not_stop_the_run() {
    // The SSH session drops: SIGHUP to hone's process group. The run goes on without its
    // terminal and finishes every experiment, as under `nohup`.
    let marks = Marks::new();
    let r = Repo::stops_after(3, &marks.blocking_verifier(1), &scores(&[4, 3]));
    let mut child = r.spawn_hone(&["run"]);
    marks.blocked();
    // SAFETY: signalling the process group of our own child.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGHUP) };
    put(marks.path("release"), "");
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(r.statuses(), ["baseline", "keep", "keep"]);
}

#[test]
fn ctrl_c_twice_kills_the_verifier_and_records_aborted() {
    let marks = Marks::new();
    let r = Repo::stops_after(3, &marks.blocking_verifier(1), &scores(&[4]));
    let mut child = spawn_hone_in(&r.dir, &["run"], Stdio::null(), Stdio::piped());
    let pgid = marks.blocked();
    ctrl_c_twice(&mut child);
    assert!(!group_alive(pgid));
    assert_eq!(r.statuses(), ["baseline", "aborted"]);
}

#[test]
fn kill_9_while_the_agent_works_then_resume_kills_the_agent() {
    let marks = Marks::new();
    let r = Repo::scored(
        3,
        &marks.fill("write\tvalue.txt\tscore: 4\\n\n---\nmark\t{m}/agent-pgid\nsleep\t300\n---\nwrite\tvalue.txt\tscore: 3\\n\n"),
    );
    let mut child = r.spawn_hone(&["run", "--tag", "a"]);
    let pgid: i32 = read_pgid(&marks.path("agent-pgid"));
    kill_9_leaving(&mut child, pgid, "the orphaned agent");
    resume_kills(&r, pgid, "the interrupted agent");
    // The aborted #2 is not counted by max_experiments (3): the resume makes #3.
    assert_eq!(r.statuses(), ["baseline", "keep", "aborted", "keep"]);
    r.hone_expect(
        &["run", "--tag", "a", "-n", "4"],
        &["baseline", "keep", "aborted", "keep", "invalid"],
    );
}

#[test]
fn resume_after_a_failure_stop_counts_failures_afresh() {
    let r = Repo::new(
        "[stop]\nmax_experiments = 6\nmax_consecutive_failures = 2\n",
        SCORE,
        "say\tno idea\n---\nsay\tstill no idea\n---\nwrite\tvalue.txt\tscore: 2\\n\n",
    );
    let out = r.hone(&["run"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(r.statuses(), ["baseline", "invalid", "invalid"]);
    // The user fixed the cause; `hone run` resumes the same run instead of stopping again.
    let out = ok(r.hone(&["run"]));
    assert_says(&out, "resuming run");
    let st = r.statuses();
    assert_eq!(&st[..4], ["baseline", "invalid", "invalid", "keep"]);
    assert_eq!(st.len(), 6);
}

#[test]
fn resume_completes_a_keep_whose_branch_move_was_lost() {
    let r = Repo::scored(3, &scores(&[4, 3, 2]));
    assert!(r.hone(&["run", "--tag", "b"]).status.success());
    assert_eq!(r.statuses(), ["baseline", "keep", "keep"]);
    // Simulate a crash between recording keep #2 and moving the branch.
    let k1 = r.rev("refs/hone/b/1");
    git(&r.dir, &["update-ref", "refs/heads/hone/b", &k1]);
    r.hone_expect(
        &["run", "--tag", "b", "-n", "4"],
        &["baseline", "keep", "keep", "keep"],
    );
    assert_eq!(
        r.rev("refs/hone/b/3^"),
        r.rev("refs/hone/b/2"),
        "#3 was built on the repaired branch"
    );
    assert_eq!(r.rev("hone/b"), r.rev("refs/hone/b/3"));
    // A branch moved by someone else is not "repaired": the run refuses with what to do.
    git(&r.dir, &["update-ref", "refs/heads/hone/b", &r.rev("main")]);
    let out = r.hone(&["run", "--tag", "b", "-n", "5"]);
    assert_eq!(out.status.code(), Some(1));
    assert_says(&out, "moved under hone");
    assert_says(&out, "hone run --new");
}

/// Run `tag` (a baseline and two keeps), then archive refs `refs/hone/<tag>/<n>` for each
/// of `past` with no record, all at keep #1's commit: the repository and that commit.
fn refs_past_the_records(tag: &str, past: &[u32]) -> (Repo, String) {
    let r = Repo::scored(3, &scores(&[4, 3, 2]));
    r.hone_expect(&["run", "--tag", tag], &["baseline", "keep", "keep"]);
    let stale = r.rev(&format!("refs/hone/{tag}/1"));
    for n in past {
        git(
            &r.dir,
            &["update-ref", &format!("refs/hone/{tag}/{n}"), &stale],
        );
    }
    (r, stale)
}

/// A power loss may lose the `running` row of the experiment in flight (written without its
/// own sync) but not its archive ref: the ref is removed on resume, the number used again.
#[test]
fn resume_removes_an_archive_ref_whose_record_a_power_loss_lost() {
    // What the power loss left: experiment #3's archive ref, no row for it.
    let (r, stale) = refs_past_the_records("p", &[3]);
    let out = r.hone_expect(
        &["run", "--tag", "p", "-n", "4"],
        &["baseline", "keep", "keep", "keep"],
    );
    assert_says(&out, "whose record was lost");
    assert_ne!(r.rev("refs/hone/p/3"), stale);
    assert_eq!(r.rev("refs/hone/p/3^"), r.rev("refs/hone/p/2"));
    // Set aside, not deleted: its commit stays reachable.
    assert_eq!(r.rev("refs/hone-lost/p/3"), stale);
}

#[test]
fn refs_without_records_that_no_power_loss_explains_are_left_alone() {
    // Two refs past the last record with one worker: more than were in flight, so the store
    // is older than the repository (a backup restored); nothing is moved or deleted.
    let (r, stale) = refs_past_the_records("q", &[3, 4]);
    let out = r.hone(&["run", "--tag", "q", "-n", "5"]);
    assert_says(
        &out,
        "archive refs without a record: refs/hone/q/3, refs/hone/q/4",
    );
    assert_eq!(r.rev("refs/hone/q/3"), stale);
    assert_eq!(r.rev("refs/hone/q/4"), stale);
    assert_eq!(
        git(&r.dir, &["for-each-ref", "refs/hone-lost"]),
        "",
        "nothing set aside"
    );
}

#[test]
fn resume_kills_what_a_dead_hone_started_even_outside_the_agents_group() {
    let marks = Marks::new();
    // The agent starts a process in a session (and group) of its own, then works on: killing
    // the agent's group on resume would miss it; its HONE_JOB token does not.
    let r = Repo::scored(
        3,
        &marks.fill("run\tsetsid sh -c 'echo $$ > {m}/escaped.tmp && mv {m}/escaped.tmp {m}/escaped-pid; exec sleep 300' > /dev/null 2>&1 &\nsleep\t300\n---\nwrite\tvalue.txt\tscore: 3\\n\n---\nwrite\tvalue.txt\tscore: 2\\n\n"),
    );
    let mut child = r.spawn_hone(&["run", "--tag", "e"]);
    let pid = read_pgid(&marks.path("escaped-pid"));
    kill_9_leaving(&mut child, pid, "the escaped process");
    resume_kills(
        &r,
        pid,
        "every process started for the interrupted experiment",
    );
    // The aborted #1 is not counted by max_experiments (3).
    assert_eq!(r.statuses(), ["baseline", "aborted", "keep", "keep"]);
}

#[test]
fn ctrl_c_twice_ends_a_hanging_llm_call_and_charges_its_worst_case() {
    // The model never answers within the run: only the second Ctrl-C can end the call (its
    // request_timeout is an hour).
    let server = LlmServer::start(vec![Reply::Hang], false);
    let r = llm_repo(
        "openai",
        &server,
        "max_attempts = 3\nrequest_timeout = \"1h\"\nmax_tokens = 100\nprice_in_per_mtok = 100\nprice_out_per_mtok = 100",
        "max_experiments = 3",
    );
    let log = ctrl_c_twice_in_the_first_call(&r, &server);
    // The provider may bill a request it got: charged at its worst case (a token a byte of the
    // prompt, plus max_tokens, at $100 per million tokens).
    let cost = log[1]["cost_usd"].as_f64().unwrap();
    assert!(cost > 100.0 * 100.0 / 1e6, "{}", log[1]);
    assert_eq!(server.requests().len(), 1, "not retried");
}

#[test]
fn ctrl_c_twice_during_an_llm_calls_backoff_sends_no_further_attempt() {
    // The server asks to be retried in an hour (hone waits at most a minute): only the
    // second Ctrl-C can end the wait, and no second attempt may follow it.
    let server = LlmServer::start(
        vec![Reply::Status(
            429,
            vec![("retry-after".into(), "3600".into())],
            "{\"error\":\"slow down\"}".into(),
        )],
        false,
    );
    let r = llm_repo("openai", &server, "max_attempts = 2", "max_experiments = 3");
    ctrl_c_twice_in_the_first_call(&r, &server);
    assert_eq!(server.requests().len(), 1, "no attempt after the Ctrl-C");
}

/// Runs `r` (its proposer the LLM `server`), presses Ctrl-C twice once the server has the first
/// request, and checks that experiment 1 was aborted; the run's records.
fn ctrl_c_twice_in_the_first_call(r: &Repo, server: &LlmServer) -> Vec<serde_json::Value> {
    let mut child = spawn_hone_in(&r.dir, &["run"], Stdio::null(), Stdio::piped());
    server.wait_for_requests(1);
    ctrl_c_twice(&mut child);
    let log = r.log();
    assert_statuses(&log, &["baseline", "aborted"]);
    assert_eq!(log[1]["reason"], "interrupted by the user");
    log
}

#[test]
fn ctrl_c_twice_ends_a_hanging_review_and_aborts_the_candidate() {
    // Serially (the coordinator reviews) and with two workers (a slot reviews): the candidate
    // is aborted, not rejected, and the verifier never sees it.
    for workers in [1, 2] {
        let reviewer = LlmServer::start(vec![Reply::Hang], false);
        let runs = RunCounter::new();
        let r = Repo::new(
            &format!(
                "[stop]\nmax_experiments = 3\n\n[exec]\nworkers = {workers}\n\n[review]\nkind = \"openai\"\nmodel = \"judge\"\nbase_url = \"{}/v1\"\nrequest_timeout = \"1h\"\nmax_attempts = 1\n",
                reviewer.url
            ),
            &runs.command,
            &scores(&[3, 2]),
        );
        let mut child = spawn_hone_in(&r.dir, &["run"], Stdio::null(), Stdio::piped());
        reviewer.wait_for_requests(1);
        ctrl_c_twice(&mut child);
        let log = r.log();
        assert_statuses(&log, &["baseline", "aborted"]);
        assert_reason(&log[1], "interrupted by the user");
        assert_eq!(runs.runs(), 1, "{workers}: only the baseline was measured");
    }
}

#[test]
fn a_run_resumes_with_its_own_agent_or_an_explicitly_chosen_one() {
    // Started with `--agent knobs` (which finds no knobs and stops), the run does not quietly
    // go on with hone.toml's agent on a plain resume: that would change who proposes (and
    // what it costs). `--agent` says which; the choice is then the run's.
    let r = Repo::scored(4, &scores(&[9, 4, 3]));
    let out = r.hone(&["run", "--tag", "a", "--agent", "knobs"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(r.statuses(), ["baseline", "invalid"]);
    exits_with(
        r.hone(&["run", "--tag", "a"]),
        1,
        "run `a` was started with agent `knobs` but hone.toml now says kind = \"command\"",
    );
    assert_eq!(r.statuses(), ["baseline", "invalid"], "nothing ran");
    let out = ok(r.hone(&["run", "--tag", "a", "--agent", "command"]));
    assert_says(
        &out,
        "goes on with agent `command` (--agent); it was `knobs`",
    );
    assert_eq!(r.statuses(), ["baseline", "invalid", "keep", "keep"]);
    // The run is now the command agent's: a plain resume is no mismatch.
    let out = ok(r.hone(&["run", "--tag", "a", "--more", "1"]));
    assert!(
        !text(&out).contains("was started with agent"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_resume_never_compares_values_measured_two_ways() {
    // A run measured with `cat value.txt`; hone.toml's verifier is then changed to one that
    // prints a far better value for anything. Resuming would keep the next candidate for the
    // new verifier's number alone: refused, with what changed and what to do; nothing runs.
    let r = Repo::scored(2, &scores(&[4, 3, 2]));
    r.run_expect("v", &["baseline", "keep"]);
    let before = std::fs::read_to_string(r.dir.join("hone.toml")).unwrap();
    edit_spec(&r.dir, |s| {
        s.replace(SCORE, &format!("{SCORE}; echo score: -100"))
    });
    let refused = r.hone(&["run", "--tag", "v", "--more", "1"]);
    exits_with(refused, 1, "measured its experiments with [verify] command");
    assert_eq!(r.statuses(), ["baseline", "keep"], "nothing ran");
    // Put back, it resumes; a new min_delta is taken from now on, and said.
    std::fs::write(r.dir.join("hone.toml"), &before).unwrap();
    edit_spec(&r.dir, |s| {
        s.replace("[verify]", "[verify]\nmin_delta = 0.5")
    });
    let out = ok(r.hone(&["run", "--tag", "v", "--more", "1"]));
    assert_says(&out, "goes on with [verify] min_delta = 0.5 (it was 0.0)");
    assert_eq!(r.statuses(), ["baseline", "keep", "keep"]);
    // Said once: the run's record now holds it.
    let out = ok(r.hone(&["run", "--tag", "v", "--more", "1"]));
    assert!(
        !text(&out).contains("goes on with [verify] min_delta"),
        "{}",
        text(&out)
    );
}

#[test]
fn what_a_kill_9_cut_off_still_counts_towards_max_time() {
    // Experiment 2's verifier works two seconds (its log written at the end of them), then
    // blocks until killed. hone is killed -9 there: the run's loop time was last written at
    // #1's finish, so without counting what #2 ran, `max_time` would lose those seconds at
    // every kill. On resume they are added: the loop time grows by more than the resumed
    // session lasted.
    let marks = Marks::new();
    let verify = marks.verifier(
        "[ \"$HONE_EXPERIMENT\" = 2 ] && [ ! -f {m}/started ]",
        "echo working; sleep 2; echo still working; echo $$ > {m}/pgid; touch {m}/started; \
         i=0; while [ $i -lt 6000 ]; do sleep 0.05; i=$((i+1)); done",
    );
    let r = Repo::stops_after(5, &verify, &scores(&[4, 3, 2, 1]));
    let mut child = r.spawn_hone(&["run", "--tag", "k"]);
    let pgid = marks.blocked();
    kill_9_leaving(&mut child, pgid, "the blocked verifier");
    let active = |r: &Repo| {
        let json = String::from_utf8_lossy(&r.hone(&["status", "--json"]).stdout).to_string();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap_or_else(|_| panic!("{json}"));
        v["active_seconds"]
            .as_f64()
            .unwrap_or_else(|| panic!("{json}"))
    };
    let before = active(&r);
    let resumed = Instant::now();
    ok(r.hone(&["run"]));
    let session = resumed.elapsed().as_secs_f64();
    let after = active(&r);
    assert!(
        after - before > session,
        "loop time grew {:.2} s, the resumed session took {session:.2} s",
        after - before
    );
    // The cut-off experiment's record says it was verifying those seconds.
    let cut = &r.log()[2];
    assert_eq!(cut["status"], "aborted", "{cut}");
    assert!(cut["verify_ms"].as_u64().unwrap() >= 2000, "{cut}");
}

#[test]
fn the_verifiers_environment_is_compared_by_its_names_and_values_never_shown() {
    // Reordering [verify] env is no change; a changed value is, and the refusal names the
    // variables without their values (they may be secrets).
    let r = Repo::scored(2, &scores(&[4, 3, 2]));
    edit_spec(&r.dir, |s| {
        s.replace(
            "[verify]",
            "[verify]\nenv = { A = \"1\", TOKEN = \"s3cret\" }",
        )
    });
    git(&r.dir, &["commit", "-qam", "env"]);
    r.run_expect("e", &["baseline", "keep"]);
    edit_spec(&r.dir, |s| {
        s.replace(
            "{ A = \"1\", TOKEN = \"s3cret\" }",
            "{ TOKEN = \"s3cret\", A = \"1\" }",
        )
    });
    ok(r.hone(&["run", "--tag", "e", "--more", "1"]));
    edit_spec(&r.dir, |s| s.replace("s3cret", "n3w"));
    let refused = r.hone(&["run", "--tag", "e", "--more", "1"]);
    let said = text(&refused);
    assert_eq!(refused.status.code(), Some(1), "{said}");
    assert!(
        said.contains("[verify] env = [A, TOKEN] (values not shown)"),
        "{said}"
    );
    assert!(!said.contains("s3cret") && !said.contains("n3w"), "{said}");
}
