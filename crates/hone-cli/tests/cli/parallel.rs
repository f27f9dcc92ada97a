//! Parallel experiments (`[exec] workers`, slots): keeps merge onto a moved best, nothing is
//! proposed twice, and kill -9 / Ctrl-C with several experiments in flight.

use crate::support::*;

/// A repository for parallel runs: `a.txt`, `b.txt`, `c.txt` each hold a number (editable);
/// `verify.sh` (protected) prints `loss: a+b+c` and appends `n slot SLOT_NAME a b c` to `log`.
/// Before measuring, experiment n waits while `wait.<n>` names a ref that does not yet point
/// where the line says (the verifier's own cue; the test never sleeps).
fn parallel_repo(toml_extra: &str, script: &str) -> (Repo, PathBuf) {
    let r = Repo::new(toml_extra, "sh verify.sh", script);
    let log = r.tmp_dir().join("verify.log");
    let verify = format!(
        "n=$HONE_EXPERIMENT\n\
         w={wait}/wait.$n\n\
         if [ -f \"$w\" ]; then\n\
           read want ref < \"$w\"\n\
           while [ \"$(git rev-parse -q --verify \"$want\" 2>/dev/null)\" != \"$(git rev-parse -q --verify \"$ref\" 2>/dev/null)\" ] || [ -z \"$(git rev-parse -q --verify \"$want\" 2>/dev/null)\" ]; do sleep 0.02; done\n\
         fi\n\
         a=$(cat a.txt); b=$(cat b.txt); c=$(cat c.txt)\n\
         echo \"$n ${{HONE_SLOT:-main}} ${{SLOT_NAME:-none}} $a $b $c\" >> {log}\n\
         echo \"loss: $((a + b + c))\"\n",
        wait = r.tmp_dir().display(),
        log = log.display()
    );
    put(r.dir.join("verify.sh"), verify);
    for f in ["a.txt", "b.txt", "c.txt"] {
        put(r.dir.join(f), "5\n");
    }
    edit_spec(&r.dir, |t| {
        t.replace("editable = [\"value.txt\"]", "editable = [\"?.txt\"]")
            .replace(
                "protected = [\"prepare.py\"]",
                "protected = [\"prepare.py\", \"verify.sh\"]",
            )
            .replace("metric = \"score\"", "metric = \"loss\"")
    });
    git(&r.dir, &["add", "-A"]);
    git(&r.dir, &["commit", "-q", "-m", "parallel"]);
    (r, log)
}

/// The measurements the verifier logged: (experiment, slot, SLOT_NAME, [a, b, c]).
fn measured(log: &Path) -> Vec<(u64, String, String, [i64; 3])> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].parse().unwrap(),
                f[1].to_string(),
                f[2].to_string(),
                [
                    f[3].parse().unwrap(),
                    f[4].parse().unwrap(),
                    f[5].parse().unwrap(),
                ],
            )
        })
        .collect()
}

/// `records` in the order they were decided (a candidate kept on a moved best comes after
/// higher numbers).
fn in_decision_order<'a>(
    records: impl Iterator<Item = &'a serde_json::Value>,
) -> Vec<&'a serde_json::Value> {
    let mut out: Vec<&serde_json::Value> = records.collect();
    let at = |e: &serde_json::Value| e["finished_at"].as_f64().unwrap_or(0.0);
    out.sort_by(|a, b| at(a).total_cmp(&at(b)));
    out
}

/// The branch is a straight line of keeps, and each keep was measured on exactly its code.
fn assert_linear_and_verified_on_final_code(r: &Repo, tag: &str, log: &Path) {
    let exps = r.log();
    let keeps = in_decision_order(
        exps.iter()
            .filter(|e| matches!(e["status"].as_str(), Some("keep" | "baseline"))),
    );
    let chain: Vec<String> = git(&r.dir, &["rev-list", "--parents", &format!("hone/{tag}")])
        .lines()
        .map(str::to_string)
        .collect();
    for line in &chain {
        assert!(
            line.split(' ').count() <= 2,
            "a merge commit on the branch: {line}"
        );
    }
    let on_branch: Vec<String> = chain
        .iter()
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    // Newest first: the keeps in reverse, then the commits before the run.
    for (k, commit) in keeps.iter().rev().zip(&on_branch) {
        assert_eq!(k["candidate_commit"].as_str(), Some(commit.as_str()), "{k}");
    }
    for pair in keeps.windows(2) {
        assert_eq!(pair[1]["parent_commit"], pair[0]["candidate_commit"]);
    }
    let runs = measured(log);
    for k in keeps {
        let n = k["n"].as_u64().unwrap();
        let commit = k["candidate_commit"].as_str().unwrap();
        let files: Vec<i64> = ["a.txt", "b.txt", "c.txt"]
            .iter()
            .map(|f| {
                git(&r.dir, &["show", &format!("{commit}:{f}")])
                    .parse()
                    .unwrap()
            })
            .collect();
        let mine: Vec<_> = runs.iter().filter(|m| m.0 == n).collect();
        assert!(!mine.is_empty(), "keep #{n} was never measured");
        for m in mine {
            assert_eq!(m.3.to_vec(), files, "keep #{n} was measured on other code");
        }
    }
}

#[test]
fn parallel_keeps_a_candidate_that_beat_a_moved_best_and_tries_both_changes() {
    // Two workers. #1 keeps at once; #2 waits for that keep, beats its parent but not #1;
    // #3 (on #1) waits for #4 to be kept, then beats it: its own code is kept on top of #4
    // (undoing #4's change) and both changes together are verified as #6, kept;
    // #5 (on #4) waits for #6, beats it, and its change conflicts with #6's: its own code is
    // kept on top of #6 all the same. Keeps #3 and #5 are decided after higher numbers.
    // #3 is proposed while #2 is verified: its prompt lists #2 as running now.
    let script = "write\ta.txt\t1\\n\n---\nwrite\tb.txt\t3\\n\n---\nexpect-prompt\t| 2 | running now |\nwrite\tc.txt\t-2\\n\n---\nwrite\tb.txt\t0\\n\n---\nwrite\tc.txt\t-4\\n\n";
    let (r, log) = parallel_repo(
        "[stop]\nmax_experiments = 7\n\n[exec]\nworkers = 2\nslots = [{ SLOT_NAME = \"alpha\" }, { SLOT_NAME = \"beta\" }]\n",
        script,
    );
    let wait = |n: u64, want: &str, ref_: &str| {
        std::fs::write(
            r.tmp_dir().join(format!("wait.{n}")),
            format!("{want} {ref_}\n"),
        )
        .unwrap()
    };
    wait(2, "refs/heads/hone/p", "refs/hone/p/1");
    wait(3, "refs/heads/hone/p", "refs/hone/p/4");
    wait(5, "refs/heads/hone/p", "refs/hone/p/6");
    let out = ok(r.hone(&["run", "--tag", "p"]));
    let exps = r.log();
    let st: Vec<&str> = exps.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(
        st,
        ["baseline", "keep", "discard", "keep", "keep", "keep", "keep"],
        "{}",
        text(&out)
    );
    let reason = |n: usize| reason(&exps[n]).to_string();
    assert!(
        reason(2).contains("beat its parent #0 but not the current best #1"),
        "{}",
        reason(2)
    );
    assert!(
        reason(3).contains("its own code, measured better than #4, is kept on top of it")
            && reason(3).contains("both changes together are verified as #6"),
        "{}",
        reason(3)
    );
    assert!(
        reason(5).contains("their changes do not merge (c.txt)"),
        "{}",
        reason(5)
    );
    assert!(
        exps[6]["description"]
            .as_str()
            .unwrap()
            .starts_with("#4 on top of #3"),
        "{}",
        exps[6]
    );
    assert_eq!(exps[6]["objective"], -1.0, "a=1 b=0 c=-2, measured again");
    // The best is the keep decided last (#5, a=1 b=0 c=-4), on every view.
    assert_eq!(exps[5]["objective"], -3.0);
    assert_eq!(r.rev("hone/p"), r.rev("refs/hone/p/5"));
    assert_says(&out, "best -3.000000 (#5)");
    let status = text(&r.hone(&["status"]));
    assert!(status.contains("-3.000000 (#5"), "{status}");
    // The review branch ends on the best's code, its keeps in the order they were kept.
    ok(r.hone(&["finalize", "--run", "p"]));
    let tree = |rev: &str| git(&r.dir, &["rev-parse", &format!("{rev}^{{tree}}")]);
    assert_eq!(tree("hone/p-final"), tree("hone/p"));
    let subjects = git(&r.dir, &["log", "--format=%b", "hone/p-final"]);
    let order: Vec<&str> = subjects
        .lines()
        .filter_map(|l| l.strip_prefix("Hone-Experiment: "))
        .collect();
    assert_eq!(order, ["5", "6", "3", "4", "1"], "newest first: {subjects}");
    // A crash after #5's keep was recorded but before the branch moved: the resume moves it
    // (the keep decided last is the one whose move may be missing, not the highest number).
    let five = r.rev("refs/hone/p/5");
    let before = exps[5]["parent_commit"].as_str().unwrap().to_string();
    git(&r.dir, &["update-ref", "refs/heads/hone/p", &before]);
    let resumed = r.hone(&["run", "--tag", "p", "--more", "1"]);
    assert!(
        !text(&resumed).contains("moved under hone"),
        "{}",
        text(&resumed)
    );
    let chain = git(&r.dir, &["rev-list", "hone/p"]);
    assert!(
        chain.lines().any(|c| c == five),
        "the branch holds #5 again: {}",
        text(&resumed)
    );
    assert_linear_and_verified_on_final_code(&r, "p", &log);
    // Every slot's environment reached its verifiers, and only its own.
    let runs = measured(&log);
    for (n, slot, name, _) in &runs {
        let want = match slot.as_str() {
            "0" => "alpha",
            "1" => "beta",
            _ => "none", // the baseline runs before the slots exist
        };
        assert_eq!(name, want, "#{n}: {runs:?}");
    }
    assert!(runs.iter().any(|m| m.1 == "0") && runs.iter().any(|m| m.1 == "1"));
    // The slots' worktrees are gone with the run.
    assert!(!r.dir.join(".hone/slots/p").exists());
    assert!(!git(&r.dir, &["worktree", "list"]).contains("slots"));
}

#[test]
fn parallel_knobs_run_with_four_workers_proposes_nothing_twice() {
    let (_t, dir) = knob_repo();
    let log = dir.join("..").join("knobs.log");
    let log = log.canonicalize().unwrap_or(log);
    put(
        dir.join("score.sh"),
        format!(
            "w=$(sed -n 's/^WIDTH = \\([0-9]*\\).*/\\1/p' params.txt)\nd=$(sed -n 's/^DEPTH = \\([0-9]*\\).*/\\1/p' params.txt)\necho \"$HONE_EXPERIMENT $w $d\" >> {}\necho \"loss: $(( (w-13)*(w-13) + (d-4)*(d-4) ))\"\n",
            log.display()
        ),
    );
    git(&dir, &["commit", "-qam", "log"]);
    let out = hone_in(
        &dir,
        &[
            "run",
            "--tag",
            "k4",
            "--workers",
            "4",
            "--seed",
            "3",
            "-n",
            "24",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let exps = log_in(&dir);
    assert_eq!(exps.len(), 24);
    // Nothing proposed twice: every configuration differs, none was a duplicate.
    let mut configs: Vec<String> = exps.iter().map(|e| e["config"].to_string()).collect();
    configs.sort();
    configs.dedup();
    assert_eq!(configs.len(), 24, "{exps:?}");
    assert!(exps.iter().all(|e| e["status"] != "invalid"), "{exps:?}");
    assert!(exps.iter().filter(|e| e["status"] == "keep").count() >= 1);
    // The branch is linear, and each keep's parameters are what its verifier read.
    let measured: Vec<(u64, String)> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| {
            let (n, rest) = l.split_once(' ').unwrap();
            (n.parse().unwrap(), rest.to_string())
        })
        .collect();
    let mut parent = git(&dir, &["rev-parse", "main"]);
    let keeps = in_decision_order(exps.iter().filter(|e| e["status"] == "keep"));
    for k in keeps {
        assert_eq!(k["parent_commit"].as_str().unwrap(), parent, "{k}");
        let commit = k["candidate_commit"].as_str().unwrap();
        let params = git(&dir, &["show", &format!("{commit}:params.txt")]);
        let num = |name: &str| -> String {
            params
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(2))
                .unwrap()
                .to_string()
        };
        let want = format!("{} {}", num("WIDTH"), num("DEPTH"));
        let n = k["n"].as_u64().unwrap();
        assert!(
            measured.iter().any(|m| m.0 == n && m.1 == want),
            "#{n}: {want}"
        );
        parent = commit.to_string();
    }
    assert_eq!(git(&dir, &["rev-parse", "hone/k4"]), parent);
    assert_eq!(
        git(&dir, &["rev-list", "--min-parents=2", "--count", "hone/k4"]),
        "0"
    );
}

#[test]
fn parallel_kill_9_with_four_in_flight_then_resume_aborts_them_all() {
    let marks = Marks::new();
    // Candidates hang until `release` exists, after writing their process group.
    let verify = marks.verifier(
        "[ \"$HONE_EXPERIMENT\" != 0 ] && [ ! -f {m}/release ]",
        "echo $$ > {m}/pgid.$HONE_EXPERIMENT; sleep 300",
    );
    let script = (1..=12)
        .map(|i| format!("write\tvalue.txt\tscore: {}\\n\n", 100 - i))
        .collect::<Vec<_>>()
        .join("---\n");
    let r = Repo::stops_after(9, &verify, &script);
    let mut child = r.spawn_hone(&["run", "--tag", "k", "--workers", "4"]);
    let pgids = marks.pgids(1..=4);
    let status = r.hone(&["status"]);
    assert_says(&status, "in flight: #1");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    for p in &pgids {
        assert!(
            group_alive(*p),
            "the orphaned verifiers still run before resume"
        );
    }
    assert_eq!(
        r.statuses(),
        ["baseline", "running", "running", "running", "running"]
    );
    let slot = r.dir.join(".hone/slots/k/w0");
    assert!(slot.exists());
    put(slot.join("leftover.txt"), "from the crash");
    put(marks.path("release"), "");
    let out = ok(r.hone(&["run", "--workers", "4"]));
    for n in 1..=4 {
        assert!(
            text(&out).contains(&format!("experiment {n} was interrupted")),
            "{}",
            text(&out)
        );
    }
    for p in pgids {
        assert!(wait_group_gone(p), "resume kills every in-flight verifier");
    }
    let log = r.log();
    let st: Vec<&str> = log.iter().map(|e| e["status"].as_str().unwrap()).collect();
    // Nine counted by max_experiments, and the four aborted, which are not.
    assert_eq!(st.len(), 13, "{st:?}");
    assert_eq!(
        &st[..5],
        ["baseline", "aborted", "aborted", "aborted", "aborted"]
    );
    assert!(
        st[5..].iter().all(|s| matches!(*s, "keep" | "discard")),
        "{st:?}"
    );
    // The first candidate cut off is verified again first, before any new proposal.
    let again = log[5]["description"].as_str().unwrap();
    assert!(
        again.contains("verified again: experiment 1's run was cut off"),
        "{again}"
    );
    assert_eq!(
        git(&r.dir, &["show", "refs/hone/k/5:value.txt"]),
        "score: 99"
    );
    // Nothing lost: each aborted candidate is archived.
    for n in 1..=4 {
        assert_eq!(
            git(&r.dir, &["show", &format!("refs/hone/k/{n}:value.txt")]),
            format!("score: {}", 100 - n)
        );
    }
    assert!(!slot.join("leftover.txt").exists());
    assert!(!r.dir.join(".hone/slots/k").exists());
}

#[test]
fn parallel_settings_are_checked() {
    let r = Repo::new(
        "[exec]\nworkers = 3\nslots = [{ CUDA_VISIBLE_DEVICES = \"0\" }, { CUDA_VISIBLE_DEVICES = \"1\" }]\n",
        SCORE,
        &scores(&[4]),
    );
    let out = r.hone(&["run"]);
    assert!(!out.status.success());
    let t = text(&out);
    assert!(
        t.contains("exec.slots") && t.contains("3 workers but only 2 slots"),
        "{t}"
    );
    assert!(t.contains("hone.toml:17:"), "names the line: {t}");
    edit_spec(&r.dir, |t| t.replace("workers = 3\n", ""));
    exits_with(
        r.hone(&["run", "--workers", "3"]),
        2,
        "3 workers but only 2 slots",
    );
    let out = r.hone(&["run", "--workers", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

#[test]
fn parallel_verifier_that_moves_the_run_branch_is_a_violation() {
    // #1's verifier forges the branch: a commit of its own, or (written past git, which
    // refuses a tag on a branch) an annotated tag of the very commit the branch holds. With
    // two in flight, the move is caught when the next result is decided (#1's or #2's: which
    // verifier moved a shared ref cannot be told apart).
    let forge_commit =
        "git update-ref refs/heads/hone/v $(git commit-tree HEAD^{tree} -p HEAD -m forged)";
    let forge_tag = "c=$(git rev-parse --git-common-dir) && git tag -a -m t same hone/v && git rev-parse same > \"$c/tag\" && mv \"$c/tag\" \"$c/refs/heads/hone/v\"";
    for forge in [forge_commit, forge_tag] {
        let verify = format!("if grep -q forge value.txt; then {forge}; fi; echo score: 1");
        let r = Repo::stops_after(
            3,
            &verify,
            "write\tvalue.txt\tforge\n\n---\nwrite\tvalue.txt\tplain\n\n",
        );
        ok(r.hone(&["run", "--tag", "v", "--workers", "2"]));
        let log = r.log();
        let caught: Vec<&serde_json::Value> =
            log.iter().filter(|e| e["status"] == "violation").collect();
        assert_eq!(caught.len(), 1, "{forge}: {log:?}");
        assert!(
            reason(caught[0]).contains("moved hone's refs"),
            "{:?}",
            caught[0]
        );
        assert_eq!(
            r.rev("refs/heads/hone/v"),
            r.rev("main"),
            "{forge}: the forged branch was put back (a commit, not a tag of it)"
        );
    }
}

#[test]
fn parallel_ctrl_c_once_lets_the_experiments_in_flight_finish() {
    let marks = Marks::new();
    // Both candidates in flight wait for `release`.
    let verify = marks.candidates_verifier(
        "touch {m}/started.$HONE_EXPERIMENT; while [ ! -f {m}/release ]; do sleep 0.02; done",
    );
    let r = Repo::stops_after(5, &verify, &scores(&[4, 3, 2]));
    let mut child = r.spawn_hone(&["run", "--workers", "2"]);
    wait_for_file(&marks.path("started.1"));
    wait_for_file(&marks.path("started.2"));
    // SAFETY: signalling the process group of our own child (a terminal's Ctrl-C).
    unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
    put(marks.path("release"), "");
    assert_eq!(child.wait().unwrap().code(), Some(130));
    let st = r.statuses();
    assert_eq!(st.len(), 3, "nothing new starts after Ctrl-C: {st:?}");
    assert!(
        st[1..]
            .iter()
            .all(|s| matches!(s.as_str(), "keep" | "discard")),
        "{st:?}"
    );
    ok(r.hone(&["run", "--workers", "2"]));
    assert_eq!(r.statuses().len(), 5);
}

#[test]
fn parallel_ctrl_c_twice_kills_every_verifier_in_flight() {
    let marks = Marks::new();
    let verify = marks.candidates_verifier("echo $$ > {m}/pgid.$HONE_EXPERIMENT; sleep 300");
    let r = Repo::stops_after(5, &verify, &scores(&[4, 3, 2]));
    let mut child = spawn_hone_in(
        &r.dir,
        &["run", "--workers", "3"],
        Stdio::null(),
        Stdio::piped(),
    );
    let pgids = marks.pgids(1..=3);
    ctrl_c_twice(&mut child);
    for p in pgids {
        assert!(!group_alive(p), "every verifier in flight is killed");
    }
    assert_eq!(r.statuses(), ["baseline", "aborted", "aborted", "aborted"]);
}

#[test]
fn parallel_verifier_that_replaces_the_slot_git_link_is_a_violation() {
    // #1's verifier replaces its slot's `.git` and reports the best value yet. The slot's
    // thread, which makes the worktree ready for the next proposal once a verifier ends,
    // must leave such a worktree alone: rebuilt there, the coordinator would find nothing.
    let verify =
        "if grep -q 'score: 0' value.txt; then rm .git && git init -q .; fi; cat value.txt";
    let r = Repo::stops_after(3, verify, &scores(&[0, 999]));
    ok(r.hone(&["run", "--tag", "g", "--workers", "2"]));
    let log = r.log();
    let first = log.iter().find(|e| e["n"] == 1).unwrap();
    assert_eq!(first["status"], "violation", "{log:?}");
    assert!(reason(first).contains(".git"), "{first}");
    assert_eq!(r.rev("hone/g"), r.rev("main"), "the branch did not move");
}

#[test]
fn parallel_slot_made_ready_by_its_thread_holds_nothing_of_the_last_verifier() {
    // Each verifier leaves a file behind. The slot's thread makes its worktree the best again
    // after the verifier (so the coordinator skips that reset): a file left there would be in
    // the next candidate's commit, and out of scope. (No turn writes the baseline's 5: each
    // candidate changes value.txt.)
    let verify = "cat value.txt; echo left > stray.txt";
    let r = Repo::stops_after(9, verify, &scores(&[8, 7, 6, 4, 3, 2, 1, 9]));
    ok(r.hone(&["run", "--tag", "s", "--workers", "2"]));
    let log = r.log();
    assert_eq!(log.len(), 9, "{log:?}");
    for e in &log[1..] {
        assert_ne!(e["status"], "violation", "{e}");
        let commit = e["candidate_commit"].as_str().unwrap();
        let parent = e["parent_commit"].as_str().unwrap();
        let files = git(&r.dir, &["diff", "--name-only", parent, commit]);
        assert_eq!(files.trim(), "value.txt", "{e}");
    }
}

/// [`parallel_repo`] whose `a` and `b` are the knobs `A` and `B` of `k.txt`, on neighbouring
/// lines; #2 waits for #1's keep.
fn knob_pair_repo(stop: &str, script: &str) -> (Repo, PathBuf) {
    let (r, log) = parallel_repo(&format!("[stop]\n{stop}\n\n[exec]\nworkers = 2\n"), script);
    put(
        r.dir.join("k.txt"),
        "A = 5  # hone: int 0..9\nB = 5  # hone: int 0..9\n",
    );
    let verify = std::fs::read_to_string(r.dir.join("verify.sh")).unwrap();
    put(
        r.dir.join("verify.sh"),
        verify.replace(
            "a=$(cat a.txt); b=$(cat b.txt)",
            "a=$(sed -n 's/^A = \\([0-9]*\\).*/\\1/p' k.txt); b=$(sed -n 's/^B = \\([0-9]*\\).*/\\1/p' k.txt)",
        ),
    );
    git(&r.dir, &["add", "-A"]);
    git(&r.dir, &["commit", "-q", "-m", "knobs"]);
    std::fs::write(
        r.tmp_dir().join("wait.2"),
        "refs/heads/hone/p refs/hone/p/1\n",
    )
    .unwrap();
    (r, log)
}

#[test]
fn knob_changes_on_neighbouring_lines_merge_onto_a_moved_best() {
    // #1 and #2 are made on the baseline at the same time: #1 lowers A and is kept; #2 lowers
    // B, on the next line, and beats #1 after that keep: its own code is kept on top of #1
    // (undoing A). A text merge calls the two changes a conflict; as knob literals, #1's
    // change is written onto #2's file and verified as #4.
    let (r, log) = knob_pair_repo(
        "max_experiments = 5",
        "replace\tk.txt\tA = 5\tA = 1\n---\nreplace\tk.txt\tB = 5\tB = 0\n---\nwrite\tc.txt\t9\\n\n",
    );
    // The agent's third change (c = 9, worse) waits for the merge to exist (as #4), so that
    // max_experiments leaves the merge its place.
    std::fs::write(r.tmp_dir().join("wait.3"), "refs/hone/p/4 refs/hone/p/4\n").unwrap();
    let out = ok(r.hone(&["run", "--tag", "p"]));
    let exps = r.log();
    let merged = exps
        .iter()
        .find(|e| {
            e["description"]
                .as_str()
                .unwrap()
                .starts_with("#1 on top of #2")
        })
        .unwrap_or_else(|| panic!("no merge: {}", text(&out)));
    let m = merged["n"].as_u64().unwrap();
    assert_eq!(exps[2]["status"], "keep", "{}", text(&out));
    assert!(
        reason(&exps[2]).contains("its own code, measured better than #1, is kept on top of it")
            && reason(&exps[2]).contains(&format!("both changes together are verified as #{m}")),
        "{}",
        exps[2]
    );
    let show = text(&ok(r.hone(&["show", "2", "--run", "p"])));
    assert!(show.contains("decision: keep ("), "{show}");
    assert_eq!(merged["status"], "keep", "{}", text(&out));
    assert_eq!(merged["objective"], 6.0, "A=1 B=0 (c=5), measured again");
    assert_eq!(
        git(&r.dir, &["show", "hone/p:k.txt"]),
        "A = 1  # hone: int 0..9\nB = 0  # hone: int 0..9"
    );
    let runs: Vec<[i64; 3]> = measured(&log)
        .into_iter()
        .filter(|e| e.0 == m)
        .map(|e| e.3)
        .collect();
    assert_eq!(runs, [[1, 0, 5]], "#{m} was measured on the merged knobs");
}

#[test]
fn a_change_whose_merge_is_its_own_code_is_kept_without_a_second_run() {
    // #2, made on the baseline beside #1, sets A as #1 did and B too: put onto #1 it is its
    // own code, already measured, so it is kept at once, made again on top of #1.
    let (r, log) = knob_pair_repo(
        "max_experiments = 4",
        "replace\tk.txt\tA = 5\tA = 1\n---\nreplace\tk.txt\tA = 5\tA = 1\nreplace\tk.txt\tB = 5\tB = 0\n---\nwrite\tc.txt\t9\\n\n",
    );
    let out = ok(r.hone(&["run", "--tag", "p"]));
    let exps = r.log();
    let st: Vec<&str> = exps.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(
        st,
        ["baseline", "keep", "keep", "discard"],
        "{}",
        text(&out)
    );
    assert!(
        reason(&exps[2]).contains("is its own code, measured already"),
        "{}",
        exps[2]
    );
    assert_eq!(exps[2]["parent_commit"], exps[1]["candidate_commit"]);
    let two = exps[2]["candidate_commit"].as_str().unwrap();
    assert_eq!(r.rev("refs/hone/p/2"), two, "its archive ref moved with it");
    assert_eq!(
        git(&r.dir, &["rev-parse", &format!("{two}^")]),
        exps[1]["candidate_commit"].as_str().unwrap(),
        "the branch is a line"
    );
    assert_eq!(r.rev("hone/p"), two);
    let runs: Vec<u64> = measured(&log).into_iter().map(|m| m.0).collect();
    assert_eq!(
        runs.iter().filter(|n| **n == 2).count(),
        1,
        "measured once: {runs:?}"
    );
    assert!(!runs.contains(&4), "nothing re-verified: {runs:?}");
}
