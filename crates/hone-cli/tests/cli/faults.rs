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
