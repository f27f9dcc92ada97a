//! A full disk loses nothing and stops nothing it need not. The repository lives on a small
//! tmpfs (mounted by the test, so it needs root; skipped with a notice where mounting fails):
//! an agent that fills it gets a violation, its largest file removed unarchived; a verifier
//! that fills it gets a crash, what it left removed (under bubblewrap too, where it writes to
//! the sandbox's `TMPDIR`); the run goes on to keep the next candidate; a disk nearly full for
//! other reasons blames no candidate and removes none of its files; and a run killed while the
//! disk is full resumes, having first removed what the interrupted candidate left.

use crate::support::*;

/// A tmpfs of a few MiB mounted at a directory, unmounted when dropped.
struct SmallDisk {
    at: PathBuf,
}

impl SmallDisk {
    /// Mounts a tmpfs of `mib` MiB at `at` (a new directory); `None` (with a notice) where
    /// this process may not mount one.
    fn mount(at: &Path, mib: u32) -> Option<SmallDisk> {
        std::fs::create_dir_all(at).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(at)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(SmallDisk {
                at: at.to_path_buf(),
            }),
            _ => {
                eprintln!("SKIPPED: cannot mount a tmpfs here (needs root)");
                None
            }
        }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.at).output();
    }
}

/// The standard repository, scored by `verify` and stopping after `max` experiments, made on
/// a 24 MiB disk of its own (the agent's script beside it, off that disk).
fn repo_on_a_small_disk(verify: &str, script: &str, max: u32) -> Option<(SmallDisk, Repo)> {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("project");
    let disk = SmallDisk::mount(&dir, 24)?;
    put(dir.join("value.txt"), "score: 5\n");
    put(dir.join("prepare.py"), "# the fixed evaluator\n");
    std::fs::create_dir_all(dir.join("data")).unwrap();
    put(dir.join("data/input.txt"), "pinned\n");
    let script_path = tmp.path().join("agent-script");
    put(&script_path, script);
    Spec::standard(verify, &script_path)
        .tail(&format!("[stop]\nmax_experiments = {max}\n"))
        .write(&dir);
    git(&dir, &["init", "-q", "-b", "main"]);
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "init"]);
    let repo = Repo {
        _tmp: tmp,
        dir,
        script: script_path,
    };
    Some((disk, repo))
}

/// How many bytes the filesystem holding `p` has free, as `df` says.
fn free_bytes(p: &Path) -> u64 {
    let out = Command::new("df")
        .args(["-B1", "--output=avail"])
        .arg(p)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().nth(1).unwrap().trim().parse().unwrap()
}

/// Fills the disk of the current directory (`head` stops at "No space left on device"), saying
/// nothing.
const FILL: &str = "head -c 64M /dev/urandom > {f} 2>/dev/null || true";

#[test]
fn a_candidate_or_its_verifier_that_fills_the_disk_fails_alone() {
    // 1: the agent fills the disk; 2: the verifier of its candidate (score 3) does; 3: a keep.
    let script = [
        format!(
            "write\tvalue.txt\tscore: 4\\n\nrun\t{}\n",
            FILL.replace("{f}", "big.bin")
        ),
        "write\tvalue.txt\tscore: 3\\n\n".to_string(),
        "write\tvalue.txt\tscore: 2\\n\n".to_string(),
    ]
    .join("---\n");
    // It fills the disk before it prints: hone cannot write that line to its log.
    let verify = format!(
        "if grep -q 'score: 3' value.txt; then {}; fi; cat value.txt",
        FILL.replace("{f}", "ckpt.bin")
    );
    let Some((_disk, r)) = repo_on_a_small_disk(&verify, &script, 4) else {
        return;
    };
    let out = ok(r.hone(&["run", "--tag", "full"]));
    let log = r.log();
    let statuses: Vec<&str> = log.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(
        statuses,
        ["baseline", "violation", "crash", "keep"],
        "{}",
        text(&out)
    );
    let reason = |i: usize| log[i]["reason"].as_str().unwrap_or_default().to_string();
    assert!(
        reason(1).starts_with("left big.bin (") && reason(1).contains("when the disk was full"),
        "{}",
        reason(1)
    );
    assert!(
        reason(2).contains("the disk filled up while it ran; removed what it left: ckpt.bin ("),
        "{}",
        reason(2)
    );
    assert_eq!(log[3]["objective"], 2.0);
    // The candidate's own change is archived without the file that filled the disk.
    let archived = git(&r.dir, &["ls-tree", "--name-only", "refs/hone/full/1"]);
    assert!(
        archived.contains("value.txt") && !archived.contains("big.bin"),
        "{archived}"
    );
    assert!(free_bytes(&r.dir) > 16 << 20, "the room was not given back");
}

#[test]
fn a_verifier_that_fills_the_disk_with_a_file_it_deleted_is_the_one_to_blame() {
    // The verifier of the candidate scoring 3 fills the disk through a file it deleted and
    // holds open, then prints: hone cannot write its log, and finds nothing of it to remove.
    // Its space comes back when it ends: a crash, and the run goes on (hone used to stop with
    // an error there, leaving the experiment to be verified again on resume: a second try for
    // a run that did not like its score). It prints more than a pipe holds (about 280 KB), so
    // that hone writes some of it to the log while the disk is still full: a verifier that
    // ended before hone wrote a line would have given its room back first (and done hone no
    // harm), which made the outcome depend on which came first.
    let verify = format!(
        "if grep -q 'score: 3' value.txt; then exec 3> held.bin; rm held.bin; {} >&3; {}; fi; cat value.txt",
        "head -c 64M /dev/urandom 2>/dev/null",
        "yes filler | head -n 40000"
    );
    let Some(reason) = second_crashes(&verify, false) else {
        return;
    };
    assert!(
        reason.contains("its space came back when its processes ended"),
        "{reason}"
    );
}

#[test]
fn a_run_killed_while_the_disk_is_full_resumes_after_removing_what_its_candidate_left() {
    let marks = Marks::new();
    let script = marks.fill(&format!(
        "write\tvalue.txt\tscore: 4\\n\n---\nrun\t{}\nmark\t{{m}}/agent-pgid\nsleep\t300\n---\nwrite\tvalue.txt\tscore: 3\\n\n",
        FILL.replace("{f}", "big.bin")
    ));
    let Some((_disk, r)) = repo_on_a_small_disk(SCORE, &script, 3) else {
        return;
    };
    let mut child = r.spawn_hone(&["run", "--tag", "k"]);
    let pgid = read_pgid(&marks.path("agent-pgid"));
    kill_9_leaving(&mut child, pgid, "the agent that filled the disk");
    assert!(free_bytes(&r.dir) < 1 << 20, "the disk should be full");
    let out = ok(r.hone(&["run"]));
    assert_says(
        &out,
        "the disk is full: removed what the last candidates left",
    );
    assert_says(&out, "experiment 2 was interrupted");
    // The aborted #2 is not counted: the resumed run makes its third experiment.
    assert_eq!(r.statuses(), ["baseline", "keep", "aborted", "keep"]);
    assert!(
        wait_group_gone(pgid),
        "resume must kill the interrupted agent"
    );
}

#[test]
fn a_disk_nearly_full_of_the_users_own_files_blames_no_candidate() {
    let Some((_disk, r)) = repo_on_a_small_disk(SCORE, &scores(&[4, 3]), 3) else {
        return;
    };
    // The user's own untracked file leaves about 4 MiB: less than the 8 MiB hone counts as full.
    let theirs = r.dir.join("their-data.bin");
    let room = free_bytes(&r.dir);
    std::fs::write(&theirs, vec![1u8; (room - (4 << 20)) as usize]).unwrap();
    let out = ok(r.hone(&["run", "--tag", "low"]));
    assert_eq!(r.statuses(), ["baseline", "keep", "keep"], "{}", text(&out));
    assert_eq!(
        std::fs::metadata(&theirs).unwrap().len(),
        room - (4 << 20),
        "the user's file was touched"
    );
    let kept = git(&r.dir, &["show", "hone/low:value.txt"]);
    assert_eq!(kept, "score: 3");
}

#[test]
fn a_sandboxed_verifier_that_fills_its_tmpdir_is_a_crash_and_the_run_goes_on() {
    let usable = Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "--unshare-user", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !usable {
        eprintln!("SKIPPED: bubblewrap cannot run here");
        return;
    }
    let verify = format!(
        "if grep -q 'score: 3' value.txt; then {}; fi; cat value.txt",
        FILL.replace("{f}", "\"$TMPDIR/ckpt.bin\"")
    );
    let Some(reason) = second_crashes(&verify, true) else {
        return;
    };
    assert!(
        reason.contains("removed what it left: .hone/tmp ("),
        "{reason}"
    );
}

/// A run on a small disk (under bubblewrap with `sandboxed`) of candidates scoring 4, 3 and 2,
/// whose verifier `verify` fills the disk for the second: it must be a crash, the run going on
/// to keep the third and the room given back. Its reason; `None` where no disk could be
/// mounted.
fn second_crashes(verify: &str, sandboxed: bool) -> Option<String> {
    let (_disk, r) = repo_on_a_small_disk(verify, &scores(&[4, 3, 2]), 4)?;
    if sandboxed {
        edit_spec(&r.dir, |t| format!("{t}\n[sandbox]\nkind = \"bwrap\"\n"));
        git(&r.dir, &["commit", "-qam", "sandboxed"]);
    }
    let out = ok(r.hone(&["run", "--tag", "full"]));
    assert_eq!(
        r.statuses(),
        ["baseline", "keep", "crash", "keep"],
        "{}",
        text(&out)
    );
    assert!(free_bytes(&r.dir) > 16 << 20, "the room was not given back");
    Some(
        r.log()[2]["reason"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}
