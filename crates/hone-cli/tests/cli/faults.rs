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
    let out = r.hone(&["run", "--tag", "bin"]);
    assert!(out.status.success(), "{}", text(&out));
    let log = r.log();
    let reason = |n: usize| log[n]["reason"].as_str().unwrap().to_string();
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
        let r = Repo::new("[stop]\nmax_experiments = 3\n", SCORE, &script);
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
        "run\t{}\nwrite\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\n",
        commit("u", "my own work")
    );
    let during_turn = Repo::new("[stop]\nmax_experiments = 3\n", SCORE, &script);
    // While experiment 1 (a keep) is verified.
    let verify = format!(
        "if [ \"$HONE_EXPERIMENT\" = 1 ]; then {}; fi; cat value.txt",
        commit("u", "my fix")
    );
    let during_verify = Repo::new(
        "[stop]\nmax_experiments = 3\n",
        &verify,
        "write\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\n",
    );
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
        assert_eq!(r.log().len(), 3, "{subject}");
        assert!(r.statuses().iter().all(|s| s != "violation"));
        assert_eq!(r.rev(&format!("refs/hone-user/u/{mine}")), mine);
        git(&r.dir, &["fsck", "--no-progress"]);
    }
}
