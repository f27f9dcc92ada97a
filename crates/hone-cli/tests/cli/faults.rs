//! Faults and blind spots that must lose nothing: a binary change the review gate must see
//! whole, `git gc --prune=now` during a run, the store deleted or replaced under a run, and a
//! user's own commit on the run branch. Each test injects the fault in a real run and checks
//! the defended outcome.

use crate::support::*;

/// A binary file (one NUL byte is enough for git) is judged by its whole content: it counts
/// against `max_diff_lines`, fails `forbid` unless `allow_binary` names it, and the reviewer
/// is told it changed and how big it is, not "Binary files differ".
#[test]
fn a_binary_change_is_reviewed_by_its_whole_size() {
    let reviewer = "if grep -q 'binary file .blob.bin. changed' \"$HONE_REVIEW_PROMPT\"; then echo 'REJECT: saw the binary blob.bin'; else echo APPROVE; fi";
    let script = [
        // 1: the scored file turned binary by one NUL, with 300 more lines.
        "run\tprintf 'score: 4\\n\\000\\n' > value.txt && seq 300 >> value.txt\n",
        // 2: a small binary file with a forbidden word.
        "run\tprintf '\\000evil\\n' > other.bin\n",
        // 3: a binary file `allow_binary` names: not counted, not forbidden, but shown.
        "run\tprintf '\\000evil\\n' > blob.bin && seq 300 >> blob.bin\n",
    ]
    .join("---\n");
    let r = Repo::builder()
        .script(&script)
        .spec_with(move |agent| {
            Spec::standard(SCORE, agent)
                .editable(&["value.txt", "*.bin"])
                .tail(&format!(
                    "[stop]\nmax_experiments = 4\n\n[review]\nmax_diff_lines = 5\nforbid = [\"evil\"]\nallow_binary = [\"blob.bin\"]\ncommand = '''{reviewer}'''\n"
                ))
        })
        .create();
    let out = ok(r.hone(&["run", "--tag", "bin"]));
    let log = r.log();
    let reason = |n: usize| reason(&log[n]).to_string();
    assert_eq!(log[0]["status"], "baseline", "{}", text(&out));
    assert_eq!(log[1]["status"], "rejected", "{:?}", log[1]);
    assert!(reason(1).contains("max_diff_lines = 5"), "{}", reason(1));
    assert_eq!(log[2]["status"], "rejected", "{:?}", log[2]);
    assert!(
        reason(2).contains("`other.bin` changed as a binary file"),
        "{}",
        reason(2)
    );
    assert_eq!(log[3]["status"], "rejected", "{:?}", log[3]);
    assert!(
        reason(3).contains("saw the binary blob.bin"),
        "{}",
        reason(3)
    );
    let prompt = std::fs::read_to_string(r.dir.join(".hone/runs/bin/prompts/3.review.md")).unwrap();
    assert!(
        prompt.contains("binary file `blob.bin` changed (content not shown): 0 bytes, 0 lines before; 1098 bytes, 301 lines after"),
        "{prompt}"
    );
    assert_eq!(r.rev("hone/bin"), r.rev("main"), "the branch moved");
}

/// The store deleted, or replaced by a copy, during an agent's turn: the run notices before
/// it writes another record into the lost file, stops with an error, and saves every record
/// it wrote; moved into place, that copy resumes the run.
#[test]
fn a_deleted_or_replaced_store_stops_the_run_and_loses_nothing() {
    let db = "../../hone.db"; // the worktree is .hone/worktrees/<tag>
    for (what, fault) in [
        ("deleted", format!("rm {db}")),
        (
            "replaced by another file",
            format!("cp {db} {db}.copy && rm {db} && mv {db}.copy {db}"),
        ),
    ] {
        let script = format!(
            "run\t{fault}\nwrite\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\n"
        );
        let r = Repo::scored(3, &script);
        let out = r.hone(&["run", "--tag", "db"]);
        assert_eq!(out.status.code(), Some(1), "{what}: {}", text(&out));
        let said = text(&out);
        assert!(said.contains(&format!("was {what}")), "{said}");
        let state = r.dir.join(".hone");
        let rescued: Vec<PathBuf> = std::fs::read_dir(&state)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().contains("hone.db.rescued-"))
            .collect();
        assert_eq!(rescued.len(), 1, "{what}: {said}");
        assert!(said.contains(&rescued[0].display().to_string()), "{said}");
        // The user follows the message: the saved records go into place and the run resumes.
        for f in ["hone.db", "hone.db-wal", "hone.db-shm"] {
            let _ = std::fs::remove_file(state.join(f));
        }
        std::fs::rename(&rescued[0], state.join("hone.db")).unwrap();
        let log = r.log();
        assert_eq!(log.len(), 2, "{what}: {log:?}");
        assert_eq!(log[0]["status"], "baseline");
        assert_eq!(log[1]["status"], "keep", "{what}: {:?}", log[1]);
        let out = r.hone(&["run", "--tag", "db"]);
        assert!(out.status.success(), "{what}: {}", text(&out));
        assert_eq!(r.statuses(), ["baseline", "keep", "keep"], "{what}");
        // The keep recorded just before the stop got its branch move on resume.
        assert_eq!(r.rev("hone/db"), r.rev("refs/hone/db/2"), "{what}");
    }
}

/// The commit a test's "user" made, found by its subject.
fn commit_titled(r: &Repo, subject: &str) -> String {
    git(
        &r.dir,
        &[
            "log",
            "--all",
            "--format=%H",
            "--fixed-strings",
            &format!("--grep={subject}"),
        ],
    )
}

/// A user commits on `hone/<tag>` in their own checkout while the run goes on: during an
/// agent's turn, or while a candidate is being verified. hone stops with an error naming the
/// commit, keeps it under a ref, blames no agent, and a resume goes on from where the records
/// say.
#[test]
fn a_users_commit_on_the_run_branch_stops_the_run_and_is_kept() {
    let commit = |tag: &str, subject: &str| {
        format!("(cd ../../.. && git checkout -q hone/{tag} && echo mine > notes.txt && git add notes.txt && git -c user.name=u -c user.email=u@u commit -qm '{subject}')")
    };
    // During the agent's turn.
    let script = format!(
        "run\t{}\nwrite\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\n---\nwrite\tvalue.txt\tscore: 2\\n\n",
        commit("u", "my own work")
    );
    let during_turn = Repo::scored(3, &script);
    // While experiment 1 (a keep) is verified.
    let verify = format!(
        "if [ \"$HONE_EXPERIMENT\" = 1 ]; then {}; fi; cat value.txt",
        commit("u", "my fix")
    );
    let during_verify = Repo::stops_after(3, &verify, &scores(&[4, 3]));
    for (r, subject, first) in [
        (&during_turn, "my own work", "aborted"),
        (&during_verify, "my fix", "keep"),
    ] {
        let start = r.rev("main");
        let out = r.hone(&["run", "--tag", "u"]);
        assert_eq!(out.status.code(), Some(1), "{subject}: {}", text(&out));
        let mine = commit_titled(r, subject);
        assert_eq!(mine.len(), 40, "{subject}: {mine:?}");
        let said = text(&out);
        assert!(said.contains(&mine), "the message names the commit: {said}");
        assert_eq!(r.rev(&format!("refs/hone-user/u/{mine}")), mine);
        assert_eq!(r.rev("hone/u"), start, "{subject}: the branch is put back");
        let log = r.log();
        assert_eq!(log.len(), 2, "{subject}: {log:?}");
        assert_eq!(log[1]["status"], first, "{subject}: {:?}", log[1]);
        assert!(r.statuses().iter().all(|s| s != "violation"));
        // The user leaves the branch; `hone run` resumes and makes progress.
        git(&r.dir, &["checkout", "-q", "-f", "main"]);
        let out = r.hone(&["run", "--tag", "u"]);
        assert!(out.status.success(), "{subject}: {}", text(&out));
        // Three experiments count towards max_experiments; an aborted one does not.
        let counted = r.statuses().iter().filter(|s| *s != "aborted").count();
        assert_eq!(counted, 3, "{subject}: {:?}", r.statuses());
        assert!(r.statuses().iter().all(|s| s != "violation"));
        assert_eq!(r.rev(&format!("refs/hone-user/u/{mine}")), mine);
        git(&r.dir, &["fsck", "--no-progress"]);
    }
}

/// Every ref of the repository resolves to an object that is there, `git log --all` works
/// and `git fsck` finds nothing wrong.
fn assert_repository_whole(dir: &Path) {
    let refs = git(dir, &["for-each-ref", "--format=%(refname) %(objectname)"]);
    for line in refs.lines() {
        let (name, oid) = line.split_once(' ').unwrap();
        git(dir, &["cat-file", "-e", &format!("{oid}^{{commit}}")]);
        assert!(!name.is_empty());
    }
    git(dir, &["log", "--all", "--oneline"]);
    let fsck = Command::new("git")
        .args(["fsck", "--no-progress", "--no-dangling"])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(fsck.status.success(), "git fsck: {}", text(&fsck));
    assert!(
        fsck.stdout.is_empty() && fsck.stderr.is_empty(),
        "git fsck: {}",
        text(&fsck)
    );
}

/// `git gc --prune=now` from the agent's turn, from the verifier and between two sessions of
/// a run: the run goes on, a resume makes progress, and nothing it archived is lost.
#[test]
fn git_gc_during_a_run_loses_nothing() {
    let gc = "(cd ../../.. && git gc --prune=now --quiet)";
    let script = format!(
        "run\t{gc}\nwrite\tvalue.txt\tscore: 4\\n\n---\nrun\t{gc}\nwrite\tvalue.txt\tscore: 7\\n\n---\nrun\t{gc}\nwrite\tvalue.txt\tscore: 3\\n\n---\nwrite\tvalue.txt\tscore: 6\\n\n"
    );
    let r = Repo::stops_after(4, &format!("{gc}; cat value.txt"), &script);
    r.run_expect("g", &["baseline", "keep", "discard", "keep"]);
    git(&r.dir, &["gc", "--prune=now", "--quiet"]);
    ok(r.hone(&["run", "--tag", "g", "-n", "6"]));
    assert_eq!(r.log().len(), 6);
    for n in 1..6 {
        let c = r.rev(&format!("refs/hone/g/{n}"));
        git(&r.dir, &["cat-file", "-e", &format!("{c}^{{tree}}")]);
    }
    assert_eq!(r.rev("hone/g"), r.rev("refs/hone/g/3"));
    assert_repository_whole(&r.dir);
}

/// What `git gc --prune=now` racing hone can leave: a recorded candidate commit it deleted
/// before a ref held it (hone stopped in between), and a ref left pointing at a deleted
/// object. A resume must say so and go on, never fail on them again and again.
#[test]
fn a_resume_goes_on_past_objects_git_gc_deleted() {
    let r = Repo::scored(4, &scores(&[4, 7, 8, 9]));
    r.run_expect("g", &["baseline", "keep", "discard", "discard"]);
    let gone = "1".repeat(40);
    // Experiment 2: hone stopped after committing it, before its ref; gc deleted the commit.
    git(&r.dir, &["update-ref", "-d", "refs/hone/g/2"]);
    let sql = format!(
        "import sqlite3; c = sqlite3.connect('.hone/hone.db'); c.execute(\"UPDATE experiments SET status = 'running', candidate_commit = '{gone}', finished_at = NULL WHERE n = 2\"); c.commit()"
    );
    let python = Command::new("python3")
        .args(["-c", &sql])
        .current_dir(&r.dir)
        .status()
        .unwrap();
    assert!(python.success());
    // Experiment 3: its ref was written, then gc deleted what it points at.
    let kept3 = r.rev("refs/hone/g/3");
    git(&r.dir, &["update-ref", "-d", "refs/hone/g/3"]);
    put(r.dir.join(".git/refs/hone/g/3"), format!("{gone}\n"));
    let out = r.hone(&["run", "--tag", "g", "-n", "6"]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("deleted by git gc"), "{said}");
    let log = r.log();
    // Six experiments counted, and the aborted #2, which -n does not count.
    assert_eq!(log.len(), 7, "{log:?}");
    assert_eq!(log[2]["status"], "aborted", "{:?}", log[2]);
    assert_reason(&log[2], "lost");
    // Its record still knows experiment 3's commit, which is there: its ref is written again.
    assert_eq!(r.rev("refs/hone/g/3"), kept3);
    // A second resume has nothing left to repair.
    let out = ok(r.hone(&["run", "--tag", "g", "-n", "7"]));
    assert!(!text(&out).contains("git gc"), "{}", text(&out));
    assert_eq!(r.log().len(), 8);
    assert_repository_whole(&r.dir);
}

/// The same with `--workers 2`, where some candidate's verifier is always running: a commit
/// on the branch while it is checked out in the user's checkout is theirs, not a violation.
#[test]
fn a_users_commit_during_parallel_verification_stops_the_run_and_is_kept() {
    let verify = "if [ \"$HONE_EXPERIMENT\" = 1 ]; then (cd ../../../.. && git checkout -q hone/w && git -c user.name=u -c user.email=u@u commit -q --allow-empty -m 'parallel fix'); fi; cat value.txt";
    let r = Repo::stops_after(5, verify, &scores(&[4, 3, 2]));
    let start = r.rev("main");
    let out = r.hone(&["run", "--tag", "w", "--workers", "2"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let mine = commit_titled(&r, "parallel fix");
    assert_eq!(mine.len(), 40, "{}", text(&out));
    assert_says(&out, &mine);
    assert_eq!(r.rev(&format!("refs/hone-user/w/{mine}")), mine);
    // The branch is back where hone had it: the start, or a candidate it kept meanwhile.
    let head = r.rev("hone/w");
    let archived = git(
        &r.dir,
        &["for-each-ref", "--format=%(objectname)", "refs/hone/w/"],
    );
    assert!(
        head == start || archived.lines().any(|c| c == head),
        "hone/w is at {head}"
    );
    assert!(
        r.statuses().iter().all(|s| s != "violation"),
        "{:?}",
        r.log()
    );
    assert_repository_whole(&r.dir);
}

/// Without bubblewrap, an agent that makes a worktree of its own for the run branch and
/// commits there is not "someone else": its move of the branch is its violation, and the run
/// goes on (only the worktrees the user had when the run opened count as theirs).
#[test]
fn an_agent_committing_on_the_branch_in_a_worktree_of_its_own_is_a_violation() {
    let marks = Marks::new();
    let script = marks.fill(
        "run\tgit worktree add -q {m}/mine hone/v && cd {m}/mine && echo x > notes.txt && git add notes.txt && git -c user.name=a -c user.email=a@a commit -qm sneaky\nwrite\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\n",
    );
    let r = Repo::scored(3, &script);
    let out = ok(r.hone(&["run", "--tag", "v"]));
    let st = r.statuses();
    assert_eq!(st[1], "violation", "{st:?}: {}", text(&out));
    assert!(git(&r.dir, &["for-each-ref", "refs/hone-user/"]).is_empty());
}

/// An error that ends the loop between two records (here the verifier's log cannot be
/// created: the agent put a file where the run's log folder was) still leaves in the event log
/// the progress told so far, which only the next record would otherwise have written.
#[test]
fn an_error_between_records_keeps_the_events_told_so_far() {
    let logs = "../../runs/e/logs"; // the worktree is .hone/worktrees/<tag>
    let script = format!("run\trm -rf {logs} && touch {logs}\nwrite\tvalue.txt\tscore: 4\\n\n");
    let r = Repo::scored(3, &script);
    let out = exits_with(
        r.hone(&["run", "--tag", "e"]),
        1,
        "could not write the verifier log",
    );
    let store = hone::store::Store::open(&r.dir.join(".hone/hone.db")).unwrap();
    let run = store.run_by_tag("e").unwrap().unwrap();
    let kinds: Vec<String> = store
        .events(run.id)
        .unwrap()
        .into_iter()
        .filter(|(n, _, _)| *n == Some(1))
        .map(|(_, kind, _)| kind)
        .collect();
    assert_eq!(
        kinds,
        ["experiment_started", "proposed", "verifying"],
        "{}",
        text(&out)
    );
    assert_eq!(r.statuses(), ["baseline", "running"]);
}

/// Between two `hone run`s the run branch was made an annotated tag of the very commit it
/// held (written past git, which refuses a tag on a branch): not someone's commit to keep, not
/// a commit at all; the resume puts the branch back as a commit, says so, and goes on.
#[test]
fn a_tag_left_on_the_run_branch_between_runs_is_put_back_as_a_commit() {
    let r = Repo::scored(4, &scores(&[4, 7, 8, 9]));
    ok(r.hone(&["run", "--tag", "t", "-n", "2"]));
    let head = r.rev("hone/t");
    git(&r.dir, &["tag", "-a", "-m", "t", "same", &head]);
    let tag = r.rev("same");
    put(r.dir.join(".git/refs/heads/hone/t"), format!("{tag}\n"));
    assert_eq!(git(&r.dir, &["cat-file", "-t", "refs/heads/hone/t"]), "tag");
    let out = ok(r.hone(&["run", "--tag", "t", "-n", "4"]));
    assert_says(&out, "not a commit; it was put back");
    assert_eq!(
        git(&r.dir, &["cat-file", "-t", "refs/heads/hone/t"]),
        "commit"
    );
    assert_eq!(r.log().len(), 4);
}
