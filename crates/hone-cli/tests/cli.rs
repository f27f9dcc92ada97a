//! End-to-end tests: the real `hone` binary against real git repositories, real verifier
//! processes and a scripted fake agent (`fake-agent`, built in this package).

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const HONE: &str = env!("CARGO_BIN_EXE_hone");
const FAKE_AGENT: &str = env!("CARGO_BIN_EXE_fake-agent");

struct Repo {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    script: PathBuf,
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

impl Repo {
    /// A repository with `value.txt` (editable, holds `score: N`), `prepare.py` (protected),
    /// `data/input.txt` (pinned), the given hone.toml body appended to a standard header, and
    /// an agent script.
    fn new(toml_extra: &str, verify_command: &str, script: &str) -> Repo {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("project");
        std::fs::create_dir_all(dir.join("data")).unwrap();
        std::fs::write(dir.join("value.txt"), "score: 5\n").unwrap();
        std::fs::write(dir.join("prepare.py"), "# the fixed evaluator\n").unwrap();
        std::fs::write(dir.join("data/input.txt"), "pinned\n").unwrap();
        let script_path = tmp.path().join("agent-script");
        std::fs::write(&script_path, script).unwrap();
        let toml = format!(
            "[loop]\neditable = [\"value.txt\"]\nprotected = [\"prepare.py\"]\npinned = [\"data/\"]\n\n\
             [verify]\ncommand = {verify_command:?}\nmetric = \"score\"\ntimeout = \"60s\"\nkill_grace = \"1s\"\n\n\
             [agent]\nkind = \"command\"\ncommand = \"{FAKE_AGENT} {}\"\n{toml_extra}",
            script_path.display()
        );
        std::fs::write(dir.join("hone.toml"), toml).unwrap();
        git(&dir, &["init", "-q", "-b", "main"]);
        git(&dir, &["add", "-A"]);
        git(&dir, &["commit", "-q", "-m", "init"]);
        Repo {
            _tmp: tmp,
            dir,
            script: script_path,
        }
    }

    fn hone(&self, args: &[&str]) -> Output {
        Command::new(HONE)
            .args(args)
            .current_dir(&self.dir)
            .output()
            .unwrap()
    }

    /// Starts `hone` in its own process group, as a shell does for a foreground job, so that a
    /// test can send "Ctrl-C" to the whole group as a terminal would.
    fn spawn_hone(&self, args: &[&str]) -> std::process::Child {
        use std::os::unix::process::CommandExt;
        Command::new(HONE)
            .process_group(0)
            .args(args)
            .current_dir(&self.dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    }

    fn log(&self) -> Vec<serde_json::Value> {
        let out = self.hone(&["log", "--json"]);
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn statuses(&self) -> Vec<String> {
        self.log()
            .iter()
            .map(|e| e["status"].as_str().unwrap().to_string())
            .collect()
    }

    fn tmp_dir(&self) -> &Path {
        self._tmp.path()
    }

    fn rev(&self, r: &str) -> String {
        git(&self.dir, &["rev-parse", r])
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Waits for a file to appear (the event a test needs), failing after a generous deadline.
fn wait_for_file(p: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !p.exists() {
        assert!(Instant::now() < deadline, "{} never appeared", p.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A process group id a test's verifier or agent wrote to a file. The file can exist before
/// its contents do (`echo $$ > file` creates it first), so wait for a whole number.
fn read_pgid(path: &Path) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.ends_with('\n') {
            if let Ok(pgid) = text.trim().parse() {
                return pgid;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{} never held a process group id: {text:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Is any live (non-zombie) process in process group `pgid`? Zombies are skipped: they have
/// exited, and an init that does not reap (as in some containers) may keep them listed.
fn group_alive(pgid: i32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.filter_map(|e| e.ok()).any(|e| {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            return false;
        };
        // Fields after the command name, which is in parentheses and may contain spaces.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            return false;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        f.len() > 2 && f[0] != "Z" && f[2] == pgid.to_string()
    })
}

fn wait_group_gone(pgid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    while group_alive(pgid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

const SCORE: &str = "cat value.txt";

#[test]
fn keep_and_discard_move_the_branch_only_on_keep() {
    let r = Repo::new(
        "[stop]\nmax_experiments = 4\n",
        SCORE,
        "write\tvalue.txt\tscore: 4\\n\nhypothesis\tlower is better\n---\nwrite\tvalue.txt\tscore: 7\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\n",
    );
    let out = r.hone(&["run", "--tag", "t1"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(r.statuses(), ["baseline", "keep", "discard", "keep"]);
    let log = r.log();
    assert_eq!(log[1]["description"], "lower is better");
    // The branch is at the last keep; every candidate has an archive ref.
    assert_eq!(r.rev("hone/t1"), r.rev("refs/hone/t1/3"));
    assert_eq!(r.rev("refs/hone/t1/0"), r.rev("main"));
    let discard = r.rev("refs/hone/t1/2");
    assert_eq!(
        git(&r.dir, &["show", &format!("{discard}:value.txt")]),
        "score: 7"
    );
    // A discard's parent is the best at its time (#1), and the branch never pointed at it.
    assert_eq!(r.rev(&format!("{discard}^")), r.rev("refs/hone/t1/1"));
    assert_eq!(r.rev("refs/hone/t1/3^"), r.rev("refs/hone/t1/1"));
    // The user's checkout was never touched.
    assert_eq!(
        std::fs::read_to_string(r.dir.join("value.txt")).unwrap(),
        "score: 5\n"
    );
    assert_eq!(git(&r.dir, &["status", "--porcelain"]), "");
    // hone show prints the discarded diff, recoverable forever.
    let show = text(&r.hone(&["show", "2"]));
    assert!(show.contains("+score: 7"), "{show}");
    // results.tsv layout.
    let tsv = String::from_utf8_lossy(&r.hone(&["log", "--tsv"]).stdout).to_string();
    assert!(
        tsv.starts_with("commit\tscore\tstatus\tdescription\n"),
        "{tsv}"
    );
    assert!(tsv.contains("\t4.000000\tkeep\tlower is better"), "{tsv}");
}

#[test]
fn crash_no_metric_and_constraint_are_recorded() {
    let verify = "cat value.txt; if grep -q crash value.txt; then exit 3; fi";
    let r = Repo::new(
        "[stop]\nmax_experiments = 4\n",
        verify,
        "write\tvalue.txt\tcrash\\nscore: 1\\n\n---\nwrite\tvalue.txt\tall good, no number\\n\n---\nwrite\tvalue.txt\tscore: 2\\nmem: 900\\n\n",
    );
    std::fs::write(
        r.dir.join("hone.toml"),
        std::fs::read_to_string(r.dir.join("hone.toml"))
            .unwrap()
            .replace(
                "metric = \"score\"",
                "metric = \"score\"\nconstraints = [\"mem <= 500\"]",
            ),
    )
    .unwrap();
    let out = r.hone(&["run"]);
    assert!(out.status.success(), "{}", text(&out));
    let log = r.log();
    let st: Vec<&str> = log.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(st, ["baseline", "crash", "crash", "discard"]);
    assert!(
        log[1]["reason"].as_str().unwrap().contains("status 3"),
        "{:?}",
        log[1]
    );
    assert!(
        log[2]["reason"]
            .as_str()
            .unwrap()
            .contains("printed no `score`"),
        "{:?}",
        log[2]
    );
    assert!(
        log[3]["reason"].as_str().unwrap().contains("mem <= 500"),
        "{:?}",
        log[3]
    );
}

#[test]
fn timeout_kills_the_whole_group_even_with_a_grandchild_holding_stdout() {
    let tmp = tempfile::tempdir().unwrap();
    let pidfile = tmp.path().join("pgid");
    let verify = format!(
        "if grep -q hang value.txt; then echo $$ > {}; (sleep 300 &); sleep 300; fi; cat value.txt",
        pidfile.display()
    );
    let r = Repo::new(
        "[stop]\nmax_experiments = 2\n",
        &verify,
        "write\tvalue.txt\thang\\n\n",
    );
    std::fs::write(
        r.dir.join("hone.toml"),
        std::fs::read_to_string(r.dir.join("hone.toml"))
            .unwrap()
            .replace("timeout = \"60s\"", "timeout = \"1s\""),
    )
    .unwrap();
    let out = r.hone(&["run"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(r.statuses(), ["baseline", "timeout"]);
    let pgid: i32 = read_pgid(&pidfile);
    assert!(
        !group_alive(pgid),
        "a process of the verifier's group outlived the timeout"
    );
}

#[test]
fn violation_is_never_verified_and_leaves_the_branch() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let verify = format!("echo run >> {}; cat value.txt", runs.display());
    let r = Repo::new(
        "[stop]\nmax_experiments = 4\n",
        &verify,
        "write\tprepare.py\tprint('val_bpb: 0.0')\\n\nwrite\tvalue.txt\tscore: 1\\n\n---\nwrite\tnotes.txt\thello\\n\n---\nwrite\tdata/input.txt\tswapped\\n\n",
    );
    let out = r.hone(&["run", "--tag", "v"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        r.statuses(),
        ["baseline", "violation", "violation", "violation"]
    );
    let log = r.log();
    assert!(log[1]["reason"].as_str().unwrap().contains("prepare.py"));
    assert!(log[2]["reason"].as_str().unwrap().contains("not editable"));
    assert!(log[3]["reason"]
        .as_str()
        .unwrap()
        .contains("data/input.txt"));
    // Only the baseline ran the verifier.
    assert_eq!(std::fs::read_to_string(&runs).unwrap().lines().count(), 1);
    assert_eq!(r.rev("hone/v"), r.rev("main"));
    // The attempts are archived all the same.
    assert!(git(&r.dir, &["show", "refs/hone/v/1:prepare.py"]).contains("val_bpb"));
}

#[test]
fn pinned_input_changed_mid_run_stops_the_run() {
    let r = Repo::new("[stop]\nmax_experiments = 6\n", SCORE, "");
    // The "agent" escapes its worktree and rewrites the pinned data in the user's checkout.
    let pinned = r.dir.join("data/input.txt");
    std::fs::write(
        &r.script,
        format!("write\tvalue.txt\tscore: 4\\n\n---\nwrite\t{}\ttampered\\n\nwrite\tvalue.txt\tscore: 1\\n\n", pinned.display()),
    )
    .unwrap();
    let out = r.hone(&["run"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let msg = text(&out);
    assert!(
        msg.contains("pinned input `data/input.txt` changed"),
        "{msg}"
    );
    let st = r.statuses();
    assert_eq!(st, ["baseline", "keep", "aborted"]);
}

#[test]
fn broken_specs_name_the_line_and_key() {
    let r = Repo::new("", SCORE, "");
    let base = std::fs::read_to_string(r.dir.join("hone.toml")).unwrap();
    let cases: Vec<(String, &str)> = vec![
        (
            base.replace("metric = \"score\"", "metrc = \"score\""),
            "hone.toml:8: `verify.metrc`: unknown key in [verify]; did you mean `metric`?",
        ),
        (
            base.replace("timeout = \"60s\"", "timeout = \"sixty\""),
            "hone.toml:9: `verify.timeout`",
        ),
        (
            base.replace("editable = [\"value.txt\"]", "editable = [1]"),
            "hone.toml:2: `loop.editable`: expected a list of strings",
        ),
        (
            base.replace("metric = \"score\"\n", ""),
            "`verify.metric`: required",
        ),
        (
            base.replace(
                "protected = [\"prepare.py\"]",
                "protected = [\"value.txt\"]",
            ),
            "hone.toml:3: `loop.protected`",
        ),
        (
            format!("{base}\n[stp]\nmax_experiments = 3\n"),
            "unknown section `[stp]`",
        ),
    ];
    for (toml, expected) in cases {
        std::fs::write(r.dir.join("hone.toml"), &toml).unwrap();
        let out = r.hone(&["run"]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        let msg = text(&out);
        assert!(msg.contains(expected), "expected {expected:?} in:\n{msg}");
    }
}

#[test]
fn kill_9_during_verification_then_resume() {
    let tmp = tempfile::tempdir().unwrap();
    let started = tmp.path().join("started");
    let pgid_file = tmp.path().join("pgid");
    // Experiment 2's verifier hangs (once) until killed.
    let verify = format!(
        "if [ \"$HONE_EXPERIMENT\" = 2 ] && [ ! -f {s} ]; then echo $$ > {p}; touch {s}; sleep 300; fi; cat value.txt",
        s = started.display(),
        p = pgid_file.display()
    );
    let r = Repo::new(
        "[stop]\nmax_experiments = 5\n",
        &verify,
        "write\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\n---\nwrite\tvalue.txt\tscore: 2\\n\n---\nwrite\tvalue.txt\tscore: 1\\n\n",
    );
    let mut child = r.spawn_hone(&["run", "--tag", "k"]);
    wait_for_file(&started);
    let pgid: i32 = read_pgid(&pgid_file);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(
        group_alive(pgid),
        "the orphaned verifier should still be running before resume"
    );
    let st = r.statuses();
    assert_eq!(st, ["baseline", "keep", "running"]);

    let out = r.hone(&["run"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("experiment 2 was interrupted"),
        "{}",
        text(&out)
    );
    assert!(
        wait_group_gone(pgid),
        "resume must kill the interrupted verifier's group"
    );
    let log = r.log();
    let st: Vec<&str> = log.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(st, ["baseline", "keep", "aborted", "keep", "keep"]);
    assert_eq!(log[1]["objective"], 4.0, "finished experiments intact");
    assert_eq!(r.rev("hone/k"), r.rev("refs/hone/k/4"));
    // The worktree was cleaned: the last candidate's parent chain is linear over keeps.
    assert_eq!(r.rev("refs/hone/k/4^"), r.rev("refs/hone/k/3"));
    assert_eq!(r.rev("refs/hone/k/3^"), r.rev("refs/hone/k/1"));
}

#[test]
fn ctrl_c_once_finishes_the_experiment_then_resume_continues() {
    let tmp = tempfile::tempdir().unwrap();
    let started = tmp.path().join("started");
    let release = tmp.path().join("release");
    let verify = format!(
        "if [ \"$HONE_EXPERIMENT\" = 1 ]; then touch {s}; while [ ! -f {r} ]; do sleep 0.05; done; fi; cat value.txt",
        s = started.display(),
        r = release.display()
    );
    let r = Repo::new(
        "[stop]\nmax_experiments = 3\n",
        &verify,
        "write\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\n",
    );
    let mut child = r.spawn_hone(&["run"]);
    wait_for_file(&started);
    // Ctrl-C at a terminal: SIGINT to hone's whole foreground process group.
    // SAFETY: signalling the process group of our own child.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
    std::fs::write(&release, "").unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "interrupted runs exit 130");
    assert_eq!(
        r.statuses(),
        ["baseline", "keep"],
        "the current experiment finishes"
    );
    let st = text(&r.hone(&["status"]));
    assert!(st.contains("interrupted"), "{st}");
    let out = r.hone(&["run"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(r.statuses(), ["baseline", "keep", "keep"]);
}

#[test]
fn ctrl_c_twice_kills_the_verifier_and_records_aborted() {
    let tmp = tempfile::tempdir().unwrap();
    let started = tmp.path().join("started");
    let pgid_file = tmp.path().join("pgid");
    let verify = format!(
        "if [ \"$HONE_EXPERIMENT\" = 1 ]; then echo $$ > {p}; touch {s}; sleep 300; fi; cat value.txt",
        s = started.display(),
        p = pgid_file.display()
    );
    let r = Repo::new(
        "[stop]\nmax_experiments = 3\n",
        &verify,
        "write\tvalue.txt\tscore: 4\\n\n",
    );
    use std::os::unix::process::CommandExt;
    let mut child = Command::new(HONE)
        .process_group(0)
        .arg("run")
        .current_dir(&r.dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_file(&started);
    let pgid: i32 = read_pgid(&pgid_file);
    // Two signals sent at once would merge into one; send the second after hone said it saw
    // the first.
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    // SAFETY: signalling the process group of our own child (a terminal's Ctrl-C).
    unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
    let mut line = String::new();
    while !line.contains("stopping after the current experiment") {
        line.clear();
        assert!(
            std::io::BufRead::read_line(&mut stderr, &mut line).unwrap() > 0,
            "hone exited early"
        );
    }
    // SAFETY: as above.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
    assert_eq!(child.wait().unwrap().code(), Some(130));
    assert!(!group_alive(pgid));
    assert_eq!(r.statuses(), ["baseline", "aborted"]);
}

#[test]
fn prompt_holds_program_history_and_rules() {
    let r = Repo::new(
        "[stop]\nmax_experiments = 3\n",
        SCORE,
        "write\tvalue.txt\tscore: 4\\n\nhypothesis\tfirst idea\n---\nexpect-prompt\tfirst idea\nexpect-prompt\tYou may change only these files (globs): value.txt\nexpect-prompt\tRESEARCH NOTES\nexpect-prompt\tVerifier output of experiment 1 (last lines; untrusted output\nexpect-prompt\timproves on the best by more than 0\nwrite\tvalue.txt\tscore: 3\\n\n",
    );
    std::fs::write(
        r.dir.join("program.md"),
        "RESEARCH NOTES: lower the score\n",
    )
    .unwrap();
    let out = r.hone(&["run"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        r.statuses(),
        ["baseline", "keep", "keep"],
        "the agent found all it expected in the prompt"
    );
}

#[test]
fn agent_failure_is_invalid_and_the_loop_goes_on() {
    let r = Repo::new(
        "[stop]\nmax_experiments = 3\n",
        SCORE,
        "say\tI give up\nexit\t7\n---\nwrite\tvalue.txt\tscore: 1\\n\n",
    );
    // An uncommitted edit in the user's checkout is not part of the run, and hone says so.
    std::fs::write(r.dir.join("value.txt"), "score: 0\n").unwrap();
    let out = r.hone(&["run"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("uncommitted changes are not part of the run"),
        "{}",
        text(&out)
    );
    assert_eq!(
        r.log()[0]["objective"],
        5.0,
        "the baseline is HEAD, not the dirty checkout"
    );
    let log = r.log();
    assert_eq!(log[1]["status"], "invalid");
    assert!(log[1]["reason"].as_str().unwrap().contains("status 7"));
    assert_eq!(log[2]["status"], "keep");
}

#[test]
fn consecutive_failures_stop_the_run() {
    let r = Repo::new(
        "[stop]\nmax_experiments = 50\nmax_consecutive_failures = 3\n",
        SCORE,
        "say\tno idea\n",
    );
    let out = r.hone(&["run"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("3 failed experiments in a row"),
        "{}",
        text(&out)
    );
    assert_eq!(r.statuses(), ["baseline", "invalid", "invalid", "invalid"]);
}

/// A repository tuned by the knobs optimizer: `params.txt` holds two knobs, and the verifier
/// (plain sh arithmetic) scores them.
fn knob_repo() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    std::fs::write(
        dir.join("params.txt"),
        "WIDTH = 2  # hone: int 1..20\nDEPTH = 9  # hone: int 1..20\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("score.sh"),
        "w=$(sed -n 's/^WIDTH = \\([0-9]*\\).*/\\1/p' params.txt)\nd=$(sed -n 's/^DEPTH = \\([0-9]*\\).*/\\1/p' params.txt)\necho \"loss: $(( (w-13)*(w-13) + (d-4)*(d-4) ))\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("hone.toml"),
        "[loop]\neditable = [\"params.txt\"]\nprotected = [\"score.sh\"]\n\n[verify]\ncommand = \"sh score.sh\"\nmetric = \"loss\"\n\n[stop]\nmax_experiments = 15\n",
    )
    .unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "init"]);
    (tmp, dir)
}

#[test]
fn knobs_optimizer_improves_and_is_reproducible_by_seed() {
    let descs = |dir: &Path, seed: &str| -> Vec<String> {
        let out = Command::new(HONE)
            .args(["run", "--seed", seed])
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let log = Command::new(HONE)
            .args(["log", "--json"])
            .current_dir(dir)
            .output()
            .unwrap();
        String::from_utf8_lossy(&log.stdout)
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                format!("{} {} {}", v["status"], v["objective"], v["description"])
            })
            .collect()
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
    let log = Command::new(HONE)
        .args(["status", "--json"])
        .current_dir(&da)
        .output()
        .unwrap();
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
fn init_writes_a_spec_lists_knobs_and_refuses_to_overwrite() {
    let (_t, dir) = knob_repo();
    std::fs::remove_file(dir.join("hone.toml")).unwrap();
    let out = Command::new(HONE)
        .args(["init", "--metric", "loss"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains("WIDTH") && t.contains("DEPTH"), "{t}");
    let toml = std::fs::read_to_string(dir.join("hone.toml")).unwrap();
    assert!(toml.contains("editable  = [\"params.txt\"]"), "{toml}");
    assert!(dir.join("program.md").exists());
    let again = Command::new(HONE)
        .args(["init"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert!(text(&again).contains("already exists"));
    assert_eq!(
        std::fs::read_to_string(dir.join("hone.toml")).unwrap(),
        toml
    );
}

#[test]
fn demo_runs_offline_on_the_bundled_example() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let out = Command::new(HONE)
        .args(["demo", "-n", "3", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains("val_bpb (minimize): baseline 2."), "{t}");
    let log = Command::new(HONE)
        .args(["log", "--json"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&log.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0]["status"], "baseline");
    assert!(rows[0]["objective"].as_f64().unwrap() > 0.5);
}

#[test]
fn index_flags_cannot_hide_an_edit_from_the_gate() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let verify = format!("echo run >> {}; cat value.txt", runs.display());
    // The agent tells git to look away from prepare.py, then edits it.
    let r = Repo::new(
        "[stop]\nmax_experiments = 2\n",
        &verify,
        "run\tgit update-index --assume-unchanged prepare.py\nwrite\tprepare.py\tprint('score: 0')\\n\nwrite\tvalue.txt\tscore: 4\\n\n",
    );
    let out = r.hone(&["run", "--tag", "h"]);
    assert!(out.status.success(), "{}", text(&out));
    let log = r.log();
    assert_eq!(log[1]["status"], "violation", "{:?}", log[1]);
    assert!(
        log[1]["reason"]
            .as_str()
            .unwrap()
            .contains("hid `prepare.py`"),
        "{:?}",
        log[1]
    );
    assert_eq!(
        std::fs::read_to_string(&runs).unwrap().lines().count(),
        1,
        "never verified"
    );
    // The archived candidate holds the real edit.
    assert!(git(&r.dir, &["show", "refs/hone/h/1:prepare.py"]).contains("score: 0"));
}

#[test]
fn a_verifier_run_that_rewrites_a_protected_file_is_a_violation() {
    // train-time code patching the evaluator: the measurement is void.
    let verify =
        "if grep -q tamper value.txt; then echo '# patched' >> prepare.py; fi; echo score: 1";
    let r = Repo::new(
        "[stop]\nmax_experiments = 2\n",
        verify,
        "write\tvalue.txt\ttamper\\n\n",
    );
    let out = r.hone(&["run", "--tag", "p"]);
    assert!(out.status.success(), "{}", text(&out));
    let log = r.log();
    assert_eq!(log[1]["status"], "violation", "{:?}", log[1]);
    assert!(log[1]["reason"]
        .as_str()
        .unwrap()
        .contains("modified while the verifier ran"));
    assert_eq!(r.rev("hone/p"), r.rev("main"));
}

#[test]
fn ignored_files_a_proposer_plants_never_reach_the_verifier() {
    // `*.secret` is ignored by git; the verifier would report a perfect score if it saw one.
    let verify = "if ls *.secret >/dev/null 2>&1; then echo score: 0; else cat value.txt; fi";
    let r = Repo::new(
        "[stop]\nmax_experiments = 2\n",
        verify,
        "write\tvalue.txt\tscore: 4\\n\nwrite\tboost.secret\tx\\n\n",
    );
    std::fs::write(r.dir.join(".gitignore"), "*.secret\n").unwrap();
    git(&r.dir, &["add", ".gitignore"]);
    git(&r.dir, &["commit", "-q", "-m", "ignore secrets"]);
    let out = r.hone(&["run"]);
    assert!(out.status.success(), "{}", text(&out));
    let log = r.log();
    assert_eq!(log[1]["status"], "keep");
    assert_eq!(
        log[1]["objective"], 4.0,
        "the verifier saw the planted file"
    );
}

#[test]
fn kill_9_while_the_agent_works_then_resume_kills_the_agent() {
    let tmp = tempfile::tempdir().unwrap();
    let mark = tmp.path().join("agent-pgid");
    let r = Repo::new(
        "[stop]\nmax_experiments = 3\n",
        SCORE,
        &format!(
            "write\tvalue.txt\tscore: 4\\n\n---\nmark\t{}\nsleep\t300\n---\nwrite\tvalue.txt\tscore: 3\\n\n",
            mark.display()
        ),
    );
    let mut child = r.spawn_hone(&["run", "--tag", "a"]);
    wait_for_file(&mark);
    let pgid: i32 = read_pgid(&mark);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        group_alive(pgid),
        "the orphaned agent should still be running before resume"
    );
    let out = r.hone(&["run"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        wait_group_gone(pgid),
        "resume must kill the interrupted agent"
    );
    assert_eq!(r.statuses(), ["baseline", "keep", "aborted"]);
    let out = r.hone(&["run", "--tag", "a", "-n", "4"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(r.statuses(), ["baseline", "keep", "aborted", "keep"]);
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
    let out = r.hone(&["run"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("resuming run"), "{}", text(&out));
    let st = r.statuses();
    assert_eq!(&st[..4], ["baseline", "invalid", "invalid", "keep"]);
    assert_eq!(st.len(), 6);
}

#[test]
fn resume_completes_a_keep_whose_branch_move_was_lost() {
    let r = Repo::new(
        "[stop]\nmax_experiments = 3\n",
        SCORE,
        "write\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\n---\nwrite\tvalue.txt\tscore: 2\\n\n",
    );
    assert!(r.hone(&["run", "--tag", "b"]).status.success());
    assert_eq!(r.statuses(), ["baseline", "keep", "keep"]);
    // Simulate a crash between recording keep #2 and moving the branch.
    let k1 = r.rev("refs/hone/b/1");
    git(&r.dir, &["update-ref", "refs/heads/hone/b", &k1]);
    let out = r.hone(&["run", "--tag", "b", "-n", "4"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(r.statuses(), ["baseline", "keep", "keep", "keep"]);
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
    assert!(text(&out).contains("moved under hone"), "{}", text(&out));
    assert!(text(&out).contains("hone run --new"), "{}", text(&out));
}

#[test]
fn agent_flag_switches_to_the_command_proposer() {
    let (_t, dir) = knob_repo();
    let script = dir.join("../agent-script");
    std::fs::write(&script, "replace\tparams.txt\tWIDTH = 2\tWIDTH = 13\n").unwrap();
    let toml = std::fs::read_to_string(dir.join("hone.toml"))
        .unwrap()
        .replace(
            "[stop]",
            &format!(
                "[agent]\nkind = \"knobs\"\ncommand = \"{FAKE_AGENT} {}\"\n\n[stop]",
                script.display()
            ),
        );
    std::fs::write(dir.join("hone.toml"), toml).unwrap();
    let out = Command::new(HONE)
        .args(["run", "--agent", "command", "-n", "2"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let log = Command::new(HONE)
        .args(["log", "--json"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&log.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows[1]["status"], "keep");
    assert_eq!(rows[1]["objective"], 25.0);
}

#[test]
fn target_patience_and_time_stop_the_run_and_say_why() {
    let script = "write\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\n---\nwrite\tvalue.txt\tscore: 9\\n\n";
    let target = Repo::new(
        "[stop]\nmax_experiments = 10\ntarget = 3.5\n",
        SCORE,
        script,
    );
    let out = target.hone(&["run"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("reached target (score = 3)"),
        "{}",
        text(&out)
    );
    assert_eq!(target.statuses(), ["baseline", "keep", "keep"]);

    let patience = Repo::new(
        "[stop]\nmax_experiments = 10\npatience = 2\n",
        SCORE,
        "write\tvalue.txt\tscore: 9\\n\n---\nwrite\tvalue.txt\tscore: 8\\n\n",
    );
    let out = patience.hone(&["run"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("no improvement in 2 experiments (patience 2)"),
        "{}",
        text(&out)
    );
    assert_eq!(patience.statuses(), ["baseline", "discard", "discard"]);

    let time = Repo::new(
        "[stop]\nmax_experiments = 10\nmax_time = \"1ms\"\n",
        SCORE,
        script,
    );
    let out = time.hone(&["run"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("reached max_time"), "{}", text(&out));
    let zero = time.hone(&["run", "--new", "--time", "0s"]);
    assert_eq!(
        zero.status.code(),
        Some(2),
        "a zero budget is a usage error: {}",
        text(&zero)
    );
    let st = text(&time.hone(&["status"]));
    assert!(st.contains("stopped: reached max_time"), "{st}");
}

#[test]
fn a_closed_stdout_neither_kills_the_loop_nor_panics() {
    use std::io::BufRead;
    let r = Repo::new(
        "[stop]\nmax_experiments = 4\n",
        SCORE,
        "write\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\n---\nwrite\tvalue.txt\tscore: 2\\n\n",
    );
    // `hone run | head -1`: the reader goes away after the first line.
    let mut child = Command::new(HONE)
        .arg("run")
        .current_dir(&r.dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    assert_eq!(
        r.statuses(),
        ["baseline", "keep", "keep", "keep"],
        "the loop ran to its end"
    );
    // `hone log | head -1` ends quietly too.
    let mut child = Command::new(HONE)
        .arg("log")
        .current_dir(&r.dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn init_in_a_new_project_asks_for_a_commit_and_guesses_nothing_silently() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    git(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("params.py"), "LR = 0.01\nLAYERS = 4\n").unwrap();
    let out = Command::new(HONE)
        .args(["init", "--metric", "accuracy"])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let t = text(&out);
    assert!(
        t.contains("LR") && t.contains("LAYERS"),
        "untracked files are scanned: {t}"
    );
    assert!(t.contains("not committed yet: params.py"), "{t}");
    let toml = std::fs::read_to_string(dir.join("hone.toml")).unwrap();
    assert!(toml.contains("editable  = [\"params.py\"]"), "{toml}");
    assert!(
        toml.contains("direction = \"maximize\""),
        "accuracy is maximized: {toml}"
    );
    // Running before committing says what to do.
    let run = Command::new(HONE)
        .arg("run")
        .current_dir(dir)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1));
    assert!(text(&run).contains("commit"), "{}", text(&run));
}

/// A verifier whose score is pure noise: it depends only on the SEED written in value.txt and
/// on the repeat's seed that hone passes in NOISE_SEED (`seed_env`), never on anything better.
const NOISY: &str = "python3 -c \"import os, random; s = open('value.txt').read().split('=')[1].strip(); r = random.Random(s + '-' + os.environ.get('NOISE_SEED', 'x')); print('score:', 10 + r.gauss(0, 1))\"";

fn seed_script(seeds: std::ops::Range<u32>) -> String {
    seeds
        .map(|s| format!("write\tvalue.txt\tSEED = {s}\\n\nhypothesis\tseed {s}\n"))
        .collect::<Vec<_>>()
        .join("---\n")
}

fn noisy_repo(verify_extra: &str, trials: u32) -> Repo {
    let r = Repo::new(
        &format!("[stop]\nmax_experiments = {}\n", trials + 1),
        NOISY,
        &seed_script(1..trials + 1),
    );
    std::fs::write(r.dir.join("value.txt"), "SEED = 0\n").unwrap();
    let toml = std::fs::read_to_string(r.dir.join("hone.toml"))
        .unwrap()
        .replace(
            "metric = \"score\"",
            &format!("metric = \"score\"\nseed_env = \"NOISE_SEED\"\n{verify_extra}"),
        );
    std::fs::write(r.dir.join("hone.toml"), toml).unwrap();
    git(&r.dir, &["commit", "-q", "-am", "seeded"]);
    r
}

#[test]
fn a_lucky_seed_is_not_kept_with_repeats_and_confirms() {
    // Control: the greedy rule (one run, any improvement) keeps lucky seeds. If it did not,
    // this test could not tell the defence from an inert verifier.
    let greedy = noisy_repo("noise_k = 0", 20);
    let out = greedy.hone(&["run"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        greedy.statuses().iter().any(|s| s == "keep"),
        "the greedy rule should be fooled: {:?}",
        greedy.statuses()
    );

    // hone's defence: sigma from 5 baseline runs, threshold 2 sigma, 2 confirm runs.
    let r = noisy_repo("baseline_repeats = 5\nconfirm = 2", 20);
    let out = r.hone(&["run", "--tag", "noise"]);
    assert!(out.status.success(), "{}", text(&out));
    let log = r.log();
    assert_eq!(log.len(), 21);
    assert_eq!(
        log[0]["runs"].as_array().unwrap().len(),
        5,
        "the baseline ran 5 times"
    );
    for e in &log[1..] {
        assert_ne!(e["status"], "keep", "a seed change was kept: {e}");
        let runs = e["runs"].as_array().unwrap().len();
        assert!(
            runs == 1 || runs == 3,
            "a candidate runs once, or 1 + confirm times: {e}"
        );
    }
    assert_eq!(r.rev("hone/noise"), r.rev("main"), "the branch never moved");
    // `hone show` explains a decision with its numbers.
    let show = text(&r.hone(&["show", "1"]));
    assert!(show.contains("decision: discard (delta"), "{show}");
    assert!(show.contains("sigma 0."), "{show}");
}

#[test]
fn confirm_runs_and_retests_are_recorded() {
    let r = Repo::new(
        "[stop]\nmax_experiments = 3\n",
        SCORE,
        "write\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\n",
    );
    let toml = std::fs::read_to_string(r.dir.join("hone.toml"))
        .unwrap()
        .replace(
            "metric = \"score\"",
            "metric = \"score\"\nbaseline_repeats = 2\nconfirm = 2\nretest_every = 2",
        );
    std::fs::write(r.dir.join("hone.toml"), toml).unwrap();
    let out = r.hone(&["run"]);
    assert!(out.status.success(), "{}", text(&out));
    let log = r.log();
    let runs = |i: usize| log[i]["runs"].as_array().unwrap().len();
    assert_eq!(
        (runs(0), runs(1), runs(2)),
        (2, 3, 4),
        "baseline x2, keep 1+2, keep 1+2 + a re-test"
    );
    assert!(
        text(&out).contains("re-tested the champion #2"),
        "{}",
        text(&out)
    );
    assert_eq!(log[2]["status"], "keep");
}

#[test]
fn duplicates_are_not_run_again_and_simpler_code_wins_ties() {
    let r = Repo::new(
        "[stop]\nmax_experiments = 5\n",
        SCORE,
        "write\tvalue.txt\tscore: 6\\n\n---\nwrite\tvalue.txt\tscore: 5\\n# a long comment\\n\n---\nwrite\tvalue.txt\tscore: 6\\n\n---\nwrite\tvalue.txt\tscore: 5\\n\n",
    );
    std::fs::write(r.dir.join("value.txt"), "score: 5\n# notes\n# more notes\n").unwrap();
    let toml = std::fs::read_to_string(r.dir.join("hone.toml"))
        .unwrap()
        .replace(
            "metric = \"score\"",
            "metric = \"score\"\nprefer_simpler = true",
        );
    std::fs::write(r.dir.join("hone.toml"), toml).unwrap();
    git(&r.dir, &["commit", "-q", "-am", "notes"]);
    let out = r.hone(&["run"]);
    assert!(out.status.success(), "{}", text(&out));
    let log = r.log();
    let st: Vec<&str> = log.iter().map(|e| e["status"].as_str().unwrap()).collect();
    // #1 worse; #2 same score, one line fewer: kept as a simplification; #3 identical to #1;
    // #4 same score, one line fewer than #2: another simplification.
    assert_eq!(
        st,
        ["baseline", "discard", "keep", "invalid", "keep"],
        "{log:?}"
    );
    assert!(
        log[2]["reason"]
            .as_str()
            .unwrap()
            .starts_with("simplification"),
        "{}",
        log[2]
    );
    assert_eq!(
        log[3]["reason"],
        "duplicate of #1 (identical files; not run again)"
    );
}

// ---------------------------------------------------------------------------------------------
// The attack suite: scripted agents that try to win without improving anything. Each must end
// as violation / rejected / crash / discard / invalid: never `keep`, never a moved branch.

const TRAIN_PY: &str =
    "SCORE = 5\nopen('model.txt', 'w').write(str(SCORE))\nprint('training done')\n";
/// The sealed evaluator, with a cache a cheater would love: if metrics.txt exists it is trusted.
const PREPARE_PY: &str = "import os\nif os.path.exists('metrics.txt'):\n    print(open('metrics.txt').read())\n    raise SystemExit\nv = float(open('model.txt').read())\nopen('metrics.txt', 'w').write('score: %s' % v)\nprint('score: %s' % v)\n";

fn attack_repo(script: &str) -> Repo {
    let r = Repo::new("[stop]\nmax_experiments = 2\n", "python3 train.py", script);
    std::fs::write(r.dir.join("train.py"), TRAIN_PY).unwrap();
    std::fs::write(r.dir.join("prepare.py"), PREPARE_PY).unwrap();
    let toml = std::fs::read_to_string(r.dir.join("hone.toml"))
        .unwrap()
        .replace("editable = [\"value.txt\"]", "editable = [\"train.py\"]")
        .replace(
            "metric = \"score\"",
            "metric = \"score\"\nevaluate = \"python3 prepare.py\"\noutputs = [\"model.txt\"]",
        );
    std::fs::write(r.dir.join("hone.toml"), toml).unwrap();
    git(&r.dir, &["add", "-A"]);
    git(&r.dir, &["commit", "-q", "-m", "attack target"]);
    r
}

/// Runs an attack; returns the attacking experiment's record after checking it did not win.
fn attack(script: &str) -> serde_json::Value {
    let r = attack_repo(script);
    let out = r.hone(&["run", "--tag", "atk"]);
    let log = r.log();
    assert_eq!(log[0]["status"], "baseline", "{}", text(&out));
    assert_eq!(log[0]["objective"], 5.0);
    assert!(log.len() >= 2, "{}", text(&out));
    let e = log[1].clone();
    let st = e["status"].as_str().unwrap();
    assert!(
        ["violation", "rejected", "crash", "discard", "invalid"].contains(&st),
        "the attack got `{st}`: {e}\n{}",
        text(&out)
    );
    assert_eq!(r.rev("hone/atk"), r.rev("main"), "the branch moved");
    e
}

#[test]
fn attack_edits_the_evaluator() {
    let e = attack("write\tprepare.py\tprint('score: 0')\\n\n");
    assert_eq!(e["status"], "violation");
}

#[test]
fn attack_edits_the_pinned_data() {
    let e = attack("write\tdata/input.txt\tbetter data\\n\n");
    assert_eq!(e["status"], "violation");
}

#[test]
fn attack_drops_sitecustomize_or_pth_next_to_train_py() {
    let e = attack("write\tsitecustomize.py\timport builtins\\n\nreplace\ttrain.py\tSCORE = 5\tSCORE = 5  # same\n");
    assert_eq!(e["status"], "violation");
    let e = attack("write\thack.pth\timport os\\n\n");
    assert_eq!(e["status"], "violation");
}

#[test]
fn attack_prints_a_perfect_metric_from_training() {
    // With `evaluate` set, the training stage's objective does not count.
    let e = attack("replace\ttrain.py\tprint('training done')\tprint('score: 0')\n");
    assert_eq!(e["status"], "discard", "{e}");
    assert_eq!(e["objective"], 5.0);
}

#[test]
fn attack_writes_the_metrics_file_the_evaluator_reads() {
    // Only the declared outputs survive into the sealed evaluation.
    let e = attack(
        "replace\ttrain.py\tprint('training done')\topen('metrics.txt', 'w').write('score: 0')\n",
    );
    assert_eq!(e["status"], "discard", "{e}");
    assert_eq!(e["objective"], 5.0);
}

#[test]
fn attack_replaces_a_protected_file_with_a_symlink() {
    let e = attack("run\trm prepare.py && ln -s /tmp/evil-evaluator.py prepare.py\n");
    assert_eq!(e["status"], "violation");
    // An editable file turned into a link to something outside the worktree.
    let e = attack("run\tprintf 'print(1)\\n' > /tmp/hone-outside.py && rm train.py && ln -s /tmp/hone-outside.py train.py\n");
    assert_eq!(e["status"], "violation", "{e}");
    assert!(
        e["reason"]
            .as_str()
            .unwrap()
            .contains("outside the worktree"),
        "{e}"
    );
}

#[test]
fn attack_moves_the_run_branch() {
    let e = attack("run\tgit update-ref refs/heads/hone/atk $(git commit-tree HEAD^{tree} -p HEAD -m forged)\n");
    assert_eq!(e["status"], "violation");
    assert!(
        e["reason"].as_str().unwrap().contains("moved hone's refs"),
        "{e}"
    );
}

#[test]
fn attack_writes_outside_the_worktree() {
    // The worktree is .hone/worktrees/<tag>: ../../../prepare.py is the user's checkout. The
    // run measures only the candidate's own files, so this wins nothing in the run (the write
    // itself succeeds without a sandbox; under bwrap it fails: see the bwrap test).
    let e = attack("write\t../../../prepare.py\tprint('score: 0')\\n\n");
    assert_eq!(e["status"], "invalid", "{e}");
}

#[test]
fn attack_forks_a_process_that_outlives_the_verifier() {
    // A plain child dies with the verifier's process group; one that starts its own session
    // escapes the group, and here keeps forging the evaluator's trusted cache after training.
    for detach in ["False", "True"] {
        let tmp = tempfile::tempdir().unwrap();
        let pidfile = tmp.path().join("bg.pid");
        let script = format!(
            "replace\ttrain.py\tprint('training done')\timport subprocess; subprocess.Popen(['sh', '-c', 'echo $$ > {}; while :; do echo score: 0 > metrics.txt; done'], start_new_session={detach})\n",
            pidfile.display()
        );
        let e = attack(&script);
        assert_eq!(
            e["objective"], 5.0,
            "the forged cache was read (start_new_session={detach}): {e}"
        );
        let pid = read_pgid(&pidfile);
        assert!(
            !group_alive(pid),
            "the forked process survived the verifier (start_new_session={detach})"
        );
    }
}

#[test]
fn the_objective_never_comes_from_the_training_stage() {
    // The evaluator prints no objective at all: the training stage's perfect line must not
    // stand in for it.
    let r = Repo::new("[stop]\nmax_experiments = 1\n", "echo score: 0", "");
    let toml = std::fs::read_to_string(r.dir.join("hone.toml"))
        .unwrap()
        .replace(
            "metric = \"score\"",
            "metric = \"score\"\nevaluate = \"echo evaluated\"",
        );
    std::fs::write(r.dir.join("hone.toml"), toml).unwrap();
    let out = r.hone(&["run"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("evaluate printed no `score`"),
        "{}",
        text(&out)
    );
}

#[test]
fn the_sealed_holdout_gates_keeps_and_stays_out_of_prompts() {
    let r = Repo::new(
        "[stop]\nmax_experiments = 4\n",
        "grep score value.txt",
        "write\tvalue.txt\tscore: 4\\nhold 4\\n\n---\nwrite\tvalue.txt\tscore: 3\\nhold 9\\n\n---\nforbid-prompt\tgot worse\nforbid-prompt\twent from\nwrite\tvalue.txt\tscore: 2\\nhold 3\\n\n",
    );
    std::fs::write(r.dir.join("value.txt"), "score: 5\nhold 5\n").unwrap();
    let toml = std::fs::read_to_string(r.dir.join("hone.toml"))
        .unwrap()
        .replace(
            "metric = \"score\"",
            "metric = \"score\"\nholdout_gate = true",
        );
    let toml = format!(
        "{toml}\n[verify.holdout]\ncommand = \"echo score: $(sed -n 's/^hold //p' value.txt)\"\n"
    );
    std::fs::write(r.dir.join("hone.toml"), toml).unwrap();
    git(&r.dir, &["commit", "-q", "-am", "holdout"]);
    let out = r.hone(&["run", "--tag", "h"]);
    assert!(out.status.success(), "{}", text(&out));
    let log = r.log();
    let st: Vec<&str> = log.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(
        st,
        ["baseline", "keep", "discard", "keep"],
        "the overfit #2 is reverted: {log:?}"
    );
    assert!(
        log[2]["reason"].as_str().unwrap().starts_with("holdout:"),
        "{}",
        log[2]
    );
    let h: Vec<Option<f64>> = log.iter().map(|e| e["holdout"].as_f64()).collect();
    assert_eq!(h, [Some(5.0), Some(4.0), Some(9.0), Some(3.0)]);
    assert_eq!(r.rev("hone/h"), r.rev("refs/hone/h/3"));
    assert_eq!(
        r.rev("refs/hone/h/3^"),
        r.rev("refs/hone/h/1"),
        "#3 built on #1, not on the reverted #2"
    );
    let table = text(&r.hone(&["log"]));
    assert!(
        table.contains("holdout"),
        "search and holdout side by side: {table}"
    );
    let status = text(&r.hone(&["status"]));
    assert!(
        status.contains("holdout (sealed): baseline 5.000000, best 3.000000"),
        "{status}"
    );
}

#[test]
fn sandbox_limits_stop_runaway_memory_and_cpu() {
    let verify = "if grep -q spin value.txt; then while :; do :; done; fi; python3 -c \"n = int(open('value.txt').read().split()[1]); x = bytearray(n * 1024 * 1024); print('score:', 1000 - n)\"";
    let r = Repo::new(
        "[stop]\nmax_experiments = 3\n\n[sandbox]\nmemory = \"400M\"\ncpu_time = \"1s\"\n",
        verify,
        "write\tvalue.txt\tscore: 900\\n\n---\nwrite\tvalue.txt\tspin 1\\n\n",
    );
    let out = r.hone(&["run"]);
    assert!(out.status.success(), "{}", text(&out));
    let log = r.log();
    // 900 MiB does not fit in 400M of address space; a busy loop runs out of CPU time.
    assert_eq!(log[0]["status"], "baseline", "{:?}", log[0]);
    assert_eq!(log[1]["status"], "crash", "{:?}", log[1]);
    assert_eq!(log[2]["status"], "crash", "{:?}", log[2]);
    assert!(
        log[2]["reason"].as_str().unwrap().contains("signal"),
        "{:?}",
        log[2]
    );
}

/// bubblewrap is needed for the containment tests. CI installs it (`.ci/run`); elsewhere a
/// machine without it skips them with a notice rather than failing the suite.
fn bwrap_available() -> bool {
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
    std::fs::write(&inner, script(&contained.dir.join("prepare.py"))).unwrap();
    let toml = std::fs::read_to_string(contained.dir.join("hone.toml")).unwrap();
    std::fs::write(
        contained.dir.join("hone.toml"),
        toml.replace(
            &contained.script.display().to_string(),
            &inner.display().to_string(),
        ),
    )
    .unwrap();
    let out = contained.hone(&["run"]);
    assert!(out.status.success(), "{}", text(&out));
    let log = contained.log();
    // The agent could not write the user's prepare.py; the verifier reached no network.
    assert_eq!(log[1]["status"], "invalid", "{:?}", log[1]);
    assert_eq!(
        std::fs::read_to_string(contained.dir.join("prepare.py")).unwrap(),
        "# the fixed evaluator\n"
    );
    assert_eq!(log[2]["status"], "crash", "{:?}", log[2]);
    assert!(
        log[2]["reason"].as_str().unwrap().contains("status 7"),
        "{:?}",
        log[2]
    );
    assert!(!escape.exists(), "the verifier wrote outside its worktree");

    // Control: without the sandbox the same agent and verifier do all of that.
    let open = Repo::new("[stop]\nmax_experiments = 3\n", &verify, "");
    std::fs::write(&open.script, script(&open.dir.join("prepare.py"))).unwrap();
    let out = open.hone(&["run"]);
    assert!(out.status.success(), "{}", text(&out));
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
    let run = |args: &[&str]| {
        Command::new(HONE)
            .args(args)
            .current_dir(&r.dir)
            .env("PATH", bin.path())
            .output()
            .unwrap()
    };
    let out = run(&["run"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("bubblewrap is not installed"),
        "{}",
        text(&out)
    );
    let toml = std::fs::read_to_string(r.dir.join("hone.toml"))
        .unwrap()
        .replace("kind = \"bwrap\"", "kind = \"bwrap\"\nrequired = false");
    std::fs::write(r.dir.join("hone.toml"), toml).unwrap();
    let out = run(&["run"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("running WITHOUT containment"),
        "{}",
        text(&out)
    );
}

#[test]
fn attack_replaces_the_worktree_git_link() {
    let e = attack("run\trm .git && git init -q . && git config core.hooksPath .evil\nreplace\ttrain.py\tSCORE = 5\tSCORE = 4\n");
    assert_eq!(e["status"], "violation", "{e}");
    assert!(e["reason"].as_str().unwrap().contains(".git"), "{e}");
}

#[test]
fn attack_the_verifier_moves_the_run_branch() {
    let verify = "if grep -q forge value.txt; then git update-ref refs/heads/hone/v $(git commit-tree HEAD^{tree} -p HEAD -m forged); fi; echo score: 1";
    let r = Repo::new(
        "[stop]\nmax_experiments = 2\n",
        verify,
        "write\tvalue.txt\tforge\n\n",
    );
    let out = r.hone(&["run", "--tag", "v"]);
    assert!(out.status.success(), "{}", text(&out));
    let log = r.log();
    assert_eq!(log[1]["status"], "violation", "{:?}", log[1]);
    assert!(
        log[1]["reason"]
            .as_str()
            .unwrap()
            .contains("moved hone's refs"),
        "{:?}",
        log[1]
    );
    assert_eq!(
        r.rev("hone/v"),
        r.rev("main"),
        "the forged branch was put back"
    );
}

#[test]
fn a_candidate_that_pins_its_own_seed_is_not_confirmed() {
    // The verifier honours NOISE_SEED unless the candidate's file says FIXED, as code with a
    // hard-coded seed would: its repeats are then identical and prove nothing.
    let verify = "python3 -c \"import os, random; t = open('value.txt').read(); s = t.split('=')[1].strip(); r = random.Random(s if 'FIXED' in t else s + '-' + os.environ.get('NOISE_SEED', 'x')); print('score:', 10 + r.gauss(0, 1))\"";
    let script = (1..21)
        .map(|s| format!("write\tvalue.txt\tSEED = {s} FIXED\\n\n"))
        .collect::<Vec<_>>()
        .join("---\n");
    let r = Repo::new("[stop]\nmax_experiments = 21\n", verify, &script);
    std::fs::write(r.dir.join("value.txt"), "SEED = 0\n").unwrap();
    let toml = std::fs::read_to_string(r.dir.join("hone.toml"))
        .unwrap()
        .replace(
            "metric = \"score\"",
            "metric = \"score\"\nseed_env = \"NOISE_SEED\"\nbaseline_repeats = 5\nconfirm = 2",
        );
    std::fs::write(r.dir.join("hone.toml"), toml).unwrap();
    git(&r.dir, &["commit", "-q", "-am", "seeded"]);
    let out = r.hone(&["run", "--tag", "fixed"]);
    assert!(out.status.success(), "{}", text(&out));
    let log = r.log();
    assert!(
        log[1..].iter().all(|e| e["status"] != "keep"),
        "a pinned seed was kept: {log:?}"
    );
    assert!(
        log.iter().any(|e| e["reason"]
            .as_str()
            .unwrap_or("")
            .contains("ignores the repeat seed")),
        "some lucky pinned seed passed its first run and was caught at confirmation: {log:?}"
    );
}

#[test]
fn a_failing_holdout_on_the_baseline_stops_a_gated_run() {
    let r = Repo::new(
        "[stop]\nmax_experiments = 3\n",
        SCORE,
        "write\tvalue.txt\tscore: 4\\n\n",
    );
    let toml = std::fs::read_to_string(r.dir.join("hone.toml"))
        .unwrap()
        .replace(
            "metric = \"score\"",
            "metric = \"score\"\nholdout_gate = true",
        );
    std::fs::write(
        r.dir.join("hone.toml"),
        format!("{toml}\n[verify.holdout]\ncommand = \"exit 3\"\n"),
    )
    .unwrap();
    let out = r.hone(&["run"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("the holdout command failed on the baseline"),
        "{}",
        text(&out)
    );
}

// ---------------------------------------------------------------------------------------------
// HTTP LLM proposers against a scripted server on 127.0.0.1 that speaks the real wire formats.

/// A scripted reply.
#[derive(Clone)]
enum Reply {
    /// 200 with an answer and its usage (input, output tokens).
    Answer(String, u64, u64),
    /// Any status, with headers and a body.
    Status(u16, Vec<(String, String)>, String),
    /// Never answer (the client must time out).
    Hang,
}

/// A recorded request: path, headers (lower-case names), body.
type Recorded = (String, Vec<(String, String)>, String);

struct LlmServer {
    url: String,
    requests: std::sync::Arc<std::sync::Mutex<Vec<Recorded>>>,
}

impl LlmServer {
    /// Serves `replies` in order (the last one repeats), as OpenAI (`anthropic = false`) or
    /// Anthropic would.
    fn start(replies: Vec<Reply>, anthropic: bool) -> LlmServer {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = requests.clone();
        std::thread::spawn(move || {
            let mut n = 0;
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { break };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    continue;
                }
                let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                let mut headers = Vec::new();
                let mut len = 0usize;
                loop {
                    let mut h = String::new();
                    reader.read_line(&mut h).unwrap();
                    let h = h.trim_end().to_string();
                    if h.is_empty() {
                        break;
                    }
                    if let Some((k, v)) = h.split_once(':') {
                        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_string());
                        if k == "content-length" {
                            len = v.parse().unwrap();
                        }
                        headers.push((k, v));
                    }
                }
                let mut body = vec![0u8; len];
                reader.read_exact(&mut body).unwrap();
                log.lock().unwrap().push((
                    path,
                    headers,
                    String::from_utf8_lossy(&body).into_owned(),
                ));
                let reply = replies[n.min(replies.len() - 1)].clone();
                n += 1;
                let (status, extra, body) = match reply {
                    Reply::Hang => {
                        // Hold the connection until the client gives up and closes it.
                        let mut sink = Vec::new();
                        let _ = reader.read_to_end(&mut sink);
                        continue;
                    }
                    Reply::Status(s, h, b) => (s, h, b),
                    Reply::Answer(text, input, output) => {
                        let body = if anthropic {
                            serde_json::json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
                                "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                                "usage": {"input_tokens": input, "output_tokens": output}})
                        } else {
                            serde_json::json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
                                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                                "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output}})
                        };
                        (200, Vec::new(), body.to_string())
                    }
                };
                let mut resp = format!("HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n", body.len());
                for (k, v) in extra {
                    resp.push_str(&format!("{k}: {v}\r\n"));
                }
                resp.push_str("\r\n");
                resp.push_str(&body);
                let _ = stream.write_all(resp.as_bytes());
            }
        });
        LlmServer { url, requests }
    }

    fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

const SECRET: &str = "sk-test-do-not-log-4f1c";

fn edit(path: &str, old: &str, new: &str) -> String {
    format!("HYPOTHESIS: change {path}\n\n{path}\n<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n")
}

fn llm_repo(kind: &str, server: &LlmServer, agent_extra: &str, stop: &str) -> Repo {
    let r = Repo::new("", SCORE, "");
    let base = if kind == "anthropic" {
        server.url.clone()
    } else {
        format!("{}/v1", server.url)
    };
    let toml = format!(
        "[loop]\neditable = [\"value.txt\"]\nprotected = [\"prepare.py\"]\n\n[verify]\ncommand = \"echo key=$TEST_LLM_KEY; cat value.txt\"\nmetric = \"score\"\n\n\
         [agent]\nkind = \"{kind}\"\nmodel = \"test-model\"\nbase_url = \"{base}\"\napi_key_env = \"TEST_LLM_KEY\"\n{agent_extra}\n\n[stop]\n{stop}\n"
    );
    std::fs::write(r.dir.join("hone.toml"), toml).unwrap();
    git(&r.dir, &["commit", "-q", "-am", "llm"]);
    r
}

fn hone_with_key(r: &Repo, args: &[&str]) -> Output {
    Command::new(HONE)
        .args(args)
        .current_dir(&r.dir)
        .env("TEST_LLM_KEY", SECRET)
        .output()
        .unwrap()
}

/// Every byte hone wrote under .hone (database, logs, prompts, events).
fn state_bytes(r: &Repo) -> Vec<u8> {
    fn walk(p: &Path, out: &mut Vec<u8>) {
        if p.is_dir() {
            for e in std::fs::read_dir(p).unwrap().flatten() {
                walk(&e.path(), out);
            }
        } else if let Ok(b) = std::fs::read(p) {
            out.extend(b);
        }
    }
    let mut out = Vec::new();
    walk(&r.dir.join(".hone"), &mut out);
    out
}

#[test]
fn openai_edits_are_applied_repaired_once_and_gated() {
    let server = LlmServer::start(
        vec![
            Reply::Answer(edit("value.txt", "score: 5", "score: 4"), 100, 20),
            Reply::Answer(edit("value.txt", "score: 99", "score: 1"), 100, 20),
            Reply::Answer(edit("value.txt", "score: 77", "score: 1"), 100, 20),
            Reply::Answer(
                edit("prepare.py", "# the fixed evaluator", "print('score: 0')"),
                100,
                20,
            ),
        ],
        false,
    );
    let r = llm_repo("openai", &server, "", "max_experiments = 4");
    let out = hone_with_key(&r, &["run"]);
    assert!(out.status.success(), "{}", text(&out));
    let log = r.log();
    let st: Vec<&str> = log.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(st, ["baseline", "keep", "invalid", "violation"], "{log:?}");
    assert_eq!(log[1]["description"], "change value.txt");
    assert!(
        log[2]["reason"]
            .as_str()
            .unwrap()
            .contains("after a repair round"),
        "{}",
        log[2]
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 4, "one call, a call and its repair, one call");
    assert!(reqs.iter().all(|(p, _, _)| p == "/v1/chat/completions"));
    let (_, headers, body) = &reqs[0];
    assert!(headers.contains(&("authorization".to_string(), format!("Bearer {SECRET}"))));
    let body: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["messages"][0]["role"], "system");
    assert!(body["messages"][1]["content"]
        .as_str()
        .unwrap()
        .contains("value.txt"));
    assert!(
        reqs[2].2.contains("could not be applied"),
        "the repair quotes the failing block"
    );
    let state = state_bytes(&r);
    assert!(
        !state.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
        "the API key leaked into .hone"
    );
}

#[test]
fn openai_retries_429_and_5xx_and_gives_up_on_a_hanging_server() {
    let server = LlmServer::start(
        vec![
            Reply::Status(
                429,
                vec![("retry-after".into(), "0".into())],
                "{\"error\":\"slow down\"}".into(),
            ),
            Reply::Answer(edit("value.txt", "score: 5", "score: 4"), 10, 10),
            Reply::Status(500, vec![("retry-after".into(), "0".into())], "boom".into()),
            Reply::Status(503, vec![("retry-after".into(), "0".into())], "boom".into()),
            Reply::Status(500, vec![("retry-after".into(), "0".into())], "boom".into()),
            Reply::Hang,
        ],
        false,
    );
    let r = llm_repo(
        "openai",
        &server,
        "max_attempts = 3\nrequest_timeout = \"1s\"",
        "max_experiments = 4",
    );
    let out = hone_with_key(&r, &["run"]);
    assert!(out.status.success(), "{}", text(&out));
    let log = r.log();
    let st: Vec<&str> = log.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(st, ["baseline", "keep", "invalid", "invalid"], "{log:?}");
    assert!(
        log[2]["reason"]
            .as_str()
            .unwrap()
            .contains("gave up after 3 attempts"),
        "{}",
        log[2]
    );
    assert!(
        log[3]["reason"]
            .as_str()
            .unwrap()
            .contains("gave up after 3 attempts"),
        "{}",
        log[3]
    );
    // 429 then success; three 5xx; three hanging attempts.
    assert_eq!(server.requests().len(), 2 + 3 + 3);
}

#[test]
fn the_budget_holds_before_a_call_is_sent() {
    // Each answer reports 1000 + 1000 tokens; at $100 per million that is $0.20 a call. After
    // three calls $0.05 of $0.65 is left, less than the next call's worst case.
    let replies = (1..5)
        .rev()
        .map(|v| {
            Reply::Answer(
                edit(
                    "value.txt",
                    &format!("score: {}", v + 1),
                    &format!("score: {v}"),
                ),
                1000,
                1000,
            )
        })
        .collect();
    let server = LlmServer::start(replies, false);
    let r = llm_repo(
        "openai",
        &server,
        "max_tokens = 100\nprice_in_per_mtok = 100\nprice_out_per_mtok = 100",
        "max_experiments = 10\nmax_cost_usd = 0.65",
    );
    let out = hone_with_key(&r, &["run"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        server.requests().len(),
        3,
        "no fourth request may be sent: {:?}",
        r.log()
            .iter()
            .map(|e| (
                e["status"].clone(),
                e["reason"].clone(),
                e["cost_usd"].clone()
            ))
            .collect::<Vec<_>>()
    );
    let log = r.log();
    let st: Vec<&str> = log.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(
        st,
        ["baseline", "keep", "keep", "keep", "invalid"],
        "{log:?}"
    );
    assert!(
        log[4]["reason"].as_str().unwrap().starts_with("budget"),
        "{}",
        log[4]
    );
    let cost: f64 = log.iter().map(|e| e["cost_usd"].as_f64().unwrap()).sum();
    assert!((cost - 0.6).abs() < 1e-9, "recorded cost {cost}");
    assert_eq!(log[1]["tokens"], 2000);
    assert!(text(&out).contains("stopped: budget"), "{}", text(&out));
}

#[test]
fn anthropic_messages_api_drives_a_run() {
    let server = LlmServer::start(
        vec![Reply::Answer(
            edit("value.txt", "score: 5", "score: 3"),
            50,
            10,
        )],
        true,
    );
    let r = llm_repo("anthropic", &server, "", "max_experiments = 2");
    let out = hone_with_key(&r, &["run"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(r.statuses(), ["baseline", "keep"]);
    let reqs = server.requests();
    let (path, headers, body) = &reqs[0];
    assert_eq!(path, "/v1/messages");
    assert!(headers.contains(&("x-api-key".to_string(), SECRET.to_string())));
    assert!(headers.contains(&("anthropic-version".to_string(), "2023-06-01".to_string())));
    let body: serde_json::Value = serde_json::from_str(body).unwrap();
    assert!(body["system"].as_str().unwrap().contains("SEARCH/REPLACE"));
    assert_eq!(body["messages"][0]["role"], "user");
    assert_eq!(body["max_tokens"], 4096);
}

#[test]
fn the_review_gate_rejects_before_any_compute() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let verify = format!("echo run >> {}; cat value.txt", runs.display());
    let r = Repo::new(
        "[stop]\nmax_experiments = 5\n\n[review]\nmax_diff_lines = 6\nforbid = [\"open\\\\(.data\"]\ncommand = \"if grep -q 'score: 1' \\\"$HONE_REVIEW_PROMPT\\\"; then echo 'REJECT: too good to be true'; else echo 'looks fine'; echo APPROVE; fi\"\n",
        &verify,
        "write\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 1\\n\n---\nwrite\tvalue.txt\tscore: 3\\nx = open('data/input.txt')\\n\n---\nwrite\tvalue.txt\tscore: 2\\na\\nb\\nc\\nd\\ne\\nf\\ng\\n\n",
    );
    let out = r.hone(&["run", "--tag", "rv"]);
    assert!(out.status.success(), "{}", text(&out));
    let log = r.log();
    let st: Vec<&str> = log.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(
        st,
        ["baseline", "keep", "rejected", "rejected", "rejected"],
        "{log:?}"
    );
    assert_eq!(
        log[2]["reason"],
        "the reviewer rejected it: too good to be true"
    );
    assert!(
        log[3]["reason"]
            .as_str()
            .unwrap()
            .contains("forbidden pattern"),
        "{}",
        log[3]
    );
    assert!(
        log[4]["reason"]
            .as_str()
            .unwrap()
            .contains("max_diff_lines"),
        "{}",
        log[4]
    );
    // Only the baseline and the approved #1 ran the verifier.
    assert_eq!(std::fs::read_to_string(&runs).unwrap().lines().count(), 2);
    // Rejected candidates are archived like every other.
    assert!(git(&r.dir, &["show", "refs/hone/rv/2:value.txt"]).contains("score: 1"));
}

/// Puts a fake executable `name` (a shell script) on a fresh PATH directory; returns that
/// directory and a directory where the script records what it saw (`FAKE_RECORD`).
fn fake_tool(name: &str, script: &str) -> (tempfile::TempDir, tempfile::TempDir) {
    use std::os::unix::fs::PermissionsExt;
    let bin = tempfile::tempdir().unwrap();
    let record = tempfile::tempdir().unwrap();
    let path = bin.path().join(name);
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    (bin, record)
}

/// A repository whose [agent] section is `agent` (and [stop] max_experiments = 3).
fn preset_repo(agent: &str) -> Repo {
    let r = Repo::new("", SCORE, "");
    let toml = std::fs::read_to_string(r.dir.join("hone.toml")).unwrap();
    let agent_start = toml.find("[agent]").unwrap();
    let toml = format!(
        "{}[agent]\n{agent}\n\n[stop]\nmax_experiments = 3\n",
        &toml[..agent_start]
    );
    std::fs::write(r.dir.join("hone.toml"), toml).unwrap();
    git(&r.dir, &["commit", "-q", "-am", "preset"]);
    r
}

/// Without the tool on PATH, `hone run` stops before it starts and says what to install.
fn assert_missing_tool_is_named(r: &Repo, install: &str) {
    let out = Command::new(HONE)
        .args(["run", "--new"])
        .current_dir(&r.dir)
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains(install), "{}", text(&out));
}

/// A stand-in `claude` on PATH: records its arguments, environment and stdin, makes a scripted
/// edit and prints Claude Code's JSON result (the shape its headless docs show).
const FAKE_CLAUDE: &str = r#"#!/bin/sh
printf '%s\n' "$@" > "$FAKE_RECORD/argv"
env > "$FAKE_RECORD/env"
cat > "$FAKE_RECORD/stdin"
n=$(cat "$FAKE_RECORD/count" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$FAKE_RECORD/count"
if [ $n = 1 ]; then
  printf 'score: 4\n' > value.txt
  echo '{"type":"result","subtype":"success","is_error":false,"duration_ms":1200,"duration_api_ms":1100,"num_turns":3,"result":"Lowered the score to 4.","session_id":"s-1","total_cost_usd":0.0123,"usage":{"input_tokens":100,"output_tokens":50,"cache_creation_input_tokens":10,"cache_read_input_tokens":20}}'
else
  echo '{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":1,"session_id":"s-2","total_cost_usd":0.001,"usage":{"input_tokens":5,"output_tokens":0},"errors":["API Error: 529 overloaded"]}'
  exit 1
fi
"#;

#[test]
fn claude_code_preset_runs_headless_and_reads_its_cost() {
    let (bin, record) = fake_tool("claude", FAKE_CLAUDE);
    let r = preset_repo(
        "kind = \"claude\"\nmodel = \"sonnet\"\nextra_args = [\"--max-turns\", \"30\"]",
    );
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap()
    );
    let out = Command::new(HONE)
        .arg("run")
        .current_dir(&r.dir)
        .env("PATH", &path)
        .env("FAKE_RECORD", record.path())
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let argv = std::fs::read_to_string(record.path().join("argv")).unwrap();
    assert_eq!(
        argv.lines().collect::<Vec<_>>(),
        [
            "-p",
            "--output-format",
            "json",
            "--permission-mode",
            "acceptEdits",
            "--model",
            "sonnet",
            "--max-turns",
            "30"
        ]
    );
    let stdin = std::fs::read_to_string(record.path().join("stdin")).unwrap();
    assert!(
        stdin.contains("You may change only these files (globs): value.txt"),
        "the prompt arrives on stdin"
    );
    let env = std::fs::read_to_string(record.path().join("env")).unwrap();
    assert!(
        env.contains("ANTHROPIC_API_KEY=sk-ant-test"),
        "the tool's own key is passed through"
    );
    let log = r.log();
    assert_eq!(log[1]["status"], "keep");
    assert_eq!(log[1]["description"], "Lowered the score to 4.");
    assert_eq!(log[1]["cost_usd"], 0.0123);
    assert_eq!(log[1]["tokens"], 180);
    assert_eq!(log[2]["status"], "invalid");
    assert!(
        log[2]["reason"]
            .as_str()
            .unwrap()
            .contains("API Error: 529 overloaded"),
        "{}",
        log[2]
    );
    assert_eq!(log[2]["cost_usd"], 0.001, "a failed run is paid for too");

    // Without the tool, a clear error that names the package.
    assert_missing_tool_is_named(&r, "npm install -g @anthropic-ai/claude-code");
}

#[test]
fn agent_notes_are_kept_between_experiments() {
    let r = Repo::new(
        "[stop]\nmax_experiments = 3\n",
        SCORE,
        "run\techo 'learned: lower is better here' >> .hone/notes.md\nwrite\tvalue.txt\tscore: 4\\n\n---\nexpect-prompt\tlearned: lower is better here\nrun\tgrep -q 'learned: lower' .hone/notes.md\nwrite\tvalue.txt\tscore: 3\\n\n",
    );
    let out = r.hone(&["run"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        r.statuses(),
        ["baseline", "keep", "keep"],
        "the second agent saw the first one's notes"
    );
    let tag = r.log()[0]["log_path"]
        .as_str()
        .unwrap()
        .split("/runs/")
        .nth(1)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let kept =
        std::fs::read_to_string(r.dir.join(".hone/runs").join(&tag).join("notes/1.md")).unwrap();
    assert!(kept.contains("learned: lower is better here"));
    // The notes live under .hone/ in the worktree: never part of a candidate's diff.
    assert_eq!(
        git(
            &r.dir,
            &[
                "diff",
                "--name-only",
                &r.rev("main"),
                &r.rev(&format!("refs/hone/{tag}/1"))
            ]
        ),
        "value.txt"
    );
}

#[test]
fn openai_knobs_mode_validates_names_types_and_ranges() {
    let server = LlmServer::start(
        vec![
            Reply::Answer("{\"changes\": {\"LR\": 0.01, \"DEPTH\": 6}, \"hypothesis\": \"smaller steps, deeper\"}".into(), 10, 10),
            Reply::Answer("Sure: {\"changes\": {\"LR\": 5}}".into(), 10, 10),
            Reply::Answer("{\"changes\": {\"DEPTH\": 7}, \"hypothesis\": \"deeper still\"}".into(), 10, 10),
            Reply::Answer("{\"changes\": {\"BOGUS\": 1}}".into(), 10, 10),
        ],
        false,
    );
    let r = Repo::new("", SCORE, "");
    std::fs::write(
        r.dir.join("params.txt"),
        "LR = 0.1  # hone: log 1e-3..1\nDEPTH = 4  # hone: int 1..8\n",
    )
    .unwrap();
    let verify = "python3 -c \\\"import re; t = open('params.txt').read(); lr = float(re.search(r'LR = ([0-9.e-]+)', t).group(1)); d = int(re.search(r'DEPTH = (\\\\d+)', t).group(1)); print('score:', abs(lr - 0.01) * 100 + abs(d - 6))\\\"";
    let toml = format!(
        "[loop]\neditable = [\"params.txt\"]\n\n[verify]\ncommand = \"{verify}\"\nmetric = \"score\"\n\n[agent]\nkind = \"openai\"\nmodel = \"m\"\nbase_url = \"{}/v1\"\nedit_mode = \"knobs\"\n\n[stop]\nmax_experiments = 4\n",
        server.url
    );
    std::fs::write(r.dir.join("hone.toml"), toml).unwrap();
    git(&r.dir, &["add", "-A"]);
    git(&r.dir, &["commit", "-q", "-m", "knobs"]);
    let out = r.hone(&["run"]);
    assert!(out.status.success(), "{}", text(&out));
    let log = r.log();
    let st: Vec<&str> = log.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(st, ["baseline", "keep", "discard", "invalid"], "{log:?}");
    assert_eq!(log[1]["objective"], 0.0);
    assert_eq!(log[1]["config"]["LR"], 0.01);
    assert_eq!(
        log[1]["description"],
        "DEPTH 4 -> 6, LR 0.1 -> 0.01: smaller steps, deeper"
    );
    assert!(
        log[3]["reason"]
            .as_str()
            .unwrap()
            .contains("`BOGUS` is not a knob"),
        "{}",
        log[3]
    );
    let reqs = server.requests();
    assert_eq!(
        reqs.len(),
        5,
        "one call, a call with its repair, a call with its repair"
    );
    let first: serde_json::Value = serde_json::from_str(&reqs[0].2).unwrap();
    assert!(first["messages"][1]["content"]
        .as_str()
        .unwrap()
        .contains("| LR | 0.1 | float 0.001..1 (log scale) |"));
    assert!(
        reqs[2].2.contains("must be a number in 0.001..1"),
        "the repair names the range"
    );
    // Nothing out of range was ever written.
    assert!(!git(&r.dir, &["log", "--all", "-p", "--", "params.txt"]).contains("LR = 5"));
}

#[test]
fn a_response_far_larger_than_max_tokens_is_refused() {
    let huge = format!(
        "{{\"choices\": [{{\"message\": {{\"content\": \"{}\"}}}}]}}",
        "x".repeat(9 * 1024 * 1024)
    );
    let server = LlmServer::start(vec![Reply::Status(200, Vec::new(), huge)], false);
    let r = llm_repo("openai", &server, "max_tokens = 100", "max_experiments = 2");
    let out = hone_with_key(&r, &["run"]);
    assert!(out.status.success(), "{}", text(&out));
    let log = r.log();
    assert_eq!(log[1]["status"], "invalid", "{:?}", log[1]);
    assert!(
        log[1]["reason"]
            .as_str()
            .unwrap()
            .contains("MiB and was refused"),
        "{}",
        log[1]
    );
}

/// A stand-in `codex` on PATH printing Codex's `exec --json` event stream.
const FAKE_CODEX: &str = r#"#!/bin/sh
printf '%s\n' "$@" > "$FAKE_RECORD/argv"
cat > "$FAKE_RECORD/stdin"
n=$(cat "$FAKE_RECORD/count" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$FAKE_RECORD/count"
echo '{"type":"thread.started","thread_id":"th_1"}'
echo '{"type":"turn.started"}'
if [ $n = 1 ]; then
  printf 'score: 3\n' > value.txt
  echo '{"type":"item.completed","item":{"id":"item_0","type":"command_execution","command":"cat value.txt","status":"completed"}}'
  echo '{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"Set the score to 3."}}'
  echo '{"type":"turn.completed","usage":{"input_tokens":1200,"cached_input_tokens":200,"output_tokens":300,"reasoning_output_tokens":100}}'
else
  echo '{"type":"turn.failed","error":{"message":"stream disconnected before completion"}}'
fi
"#;

#[test]
fn codex_preset_runs_exec_json_and_reads_its_usage() {
    let (bin, record) = fake_tool("codex", FAKE_CODEX);
    let r = preset_repo("kind = \"codex\"\nmodel = \"gpt-5-codex\"");
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap()
    );
    let out = Command::new(HONE)
        .arg("run")
        .current_dir(&r.dir)
        .env("PATH", &path)
        .env("FAKE_RECORD", record.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let argv = std::fs::read_to_string(record.path().join("argv")).unwrap();
    assert_eq!(
        argv.lines().collect::<Vec<_>>(),
        [
            "exec",
            "--json",
            "--full-auto",
            "--model",
            "gpt-5-codex",
            "-"
        ]
    );
    assert!(std::fs::read_to_string(record.path().join("stdin"))
        .unwrap()
        .contains("You may change only"));
    let log = r.log();
    assert_eq!(log[1]["status"], "keep");
    assert_eq!(log[1]["description"], "Set the score to 3.");
    assert_eq!(log[1]["tokens"], 1500);
    assert_eq!(log[2]["status"], "invalid");
    assert!(
        log[2]["reason"]
            .as_str()
            .unwrap()
            .contains("stream disconnected"),
        "{}",
        log[2]
    );
    assert_missing_tool_is_named(&r, "npm install -g @openai/codex");
}

#[test]
fn report_writes_a_plot_a_summary_and_a_page() {
    let r = Repo::new(
        "[stop]\nmax_experiments = 6\n",
        "cat value.txt; if grep -q boom value.txt; then exit 2; fi",
        "write\tvalue.txt\tscore: 4\\n\nhypothesis\tfirst gain\n---\nwrite\tvalue.txt\tscore: 9\\n\n---\nwrite\tvalue.txt\tboom\\n\n---\nwrite\tvalue.txt\tscore: 2\\n\nhypothesis\tbig <gain> & more\n---\nwrite\tvalue.txt\tscore: 7\\n\n",
    );
    assert!(r.hone(&["run", "--tag", "rep"]).status.success());
    let out_dir = r.tmp_dir().join("report");
    let out = r.hone(&["report", "--out", out_dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let svg = std::fs::read_to_string(out_dir.join("progress.svg")).unwrap();
    assert!(svg.starts_with("<svg"));
    assert_eq!(
        svg.matches("class=\"keep\"").count(),
        3,
        "baseline and two keeps"
    );
    assert_eq!(svg.matches("class=\"discard\"").count(), 2);
    assert_eq!(svg.matches("class=\"fail crash\"").count(), 1);
    assert!(
        svg.contains("big &lt;gain&gt; &amp; more"),
        "labels are escaped"
    );
    assert!(svg.contains("class=\"best\""));
    // The SVG is well-formed XML (a real parser), with one point per experiment, and its step
    // line ends at the height of the best experiment's point (#4, score 2) at the last x.
    let check = Command::new("python3")
        .args([
            "-c",
            r#"
import sys, re, xml.etree.ElementTree as E
root = E.parse(sys.argv[1]).getroot()
ns = '{http://www.w3.org/2000/svg}'
pts = [c for c in root.iter(ns + 'circle')] + [c for c in root.iter('circle')]
marks = [m for m in root.iter() if m.get('class', '').startswith('fail')]
best = [p for p in root.iter() if p.get('class') == 'best'][0]
nums = re.findall(r'[-0-9.]+', best.get('d'))
keeps = {c.find(ns + 'title').text.split()[0] if c.find(ns + 'title') is not None else c.find('title').text.split()[0]: c for c in pts}
b = keeps['#4']
print(len(pts) + len(marks), nums[-1], b.get('cy'), nums[-2])
"#,
        ])
        .arg(out_dir.join("progress.svg"))
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "the SVG does not parse: {}",
        text(&check)
    );
    let f: Vec<String> = String::from_utf8_lossy(&check.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect();
    assert_eq!(f[0], "6", "one point or mark per experiment: {f:?}");
    assert_eq!(f[1], f[2], "the step line ends at the best's height: {f:?}");
    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(
        md.contains("**baseline → best**: 5.000000 → 2.000000 (-60.00%)"),
        "{md}"
    );
    assert!(md.contains("**keep rate**: 40.0% of 5 candidates"), "{md}");
    // The biggest gain (#4: 4 -> 2) comes first.
    let top = md.split("## Top improvements").nth(1).unwrap();
    assert!(
        top.find("| 4 |").unwrap() < top.find("| 1 |").unwrap(),
        "{top}"
    );
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("</html>"));
    assert!(
        !html.contains("http://") || !html.contains("<script"),
        "self-contained"
    );
    assert!(!html.contains("src=\"http"), "nothing fetched");
}

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
    let r = Repo::new(
        "[stop]\nmax_experiments = 5\n",
        verify,
        "write\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tcrash\\n\n---\nwrite\tvalue.txt\thang\\n\n---\nwrite\tvalue.txt\tcancel\\n\n",
    );
    let shared = r.tmp_dir().join("shared");
    let toml = std::fs::read_to_string(r.dir.join("hone.toml"))
        .unwrap()
        .replace("timeout = \"60s\"", "timeout = \"3s\"");
    std::fs::write(
        r.dir.join("hone.toml"),
        format!(
            "{toml}\n[exec]\nbackend = \"slurm\"\nshared_dir = \"{}\"\n",
            shared.display()
        ),
    )
    .unwrap();
    let out = r.hone(&["run", "--tag", "s"]);
    assert!(out.status.success(), "{}", text(&out));
    let log = r.log();
    let st: Vec<&str> = log.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(
        st,
        ["baseline", "keep", "crash", "timeout", "crash"],
        "{log:?}"
    );
    assert!(
        log[2]["reason"].as_str().unwrap().contains("status 3"),
        "{:?}",
        log[2]
    );
    let why = log[4]["reason"].as_str().unwrap();
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
    let verify = "cat value.txt; if grep -q hang value.txt; then sleep 300; fi";
    let r = Repo::new(
        "[stop]\nmax_experiments = 3\n",
        verify,
        "write\tvalue.txt\thang\\n\n---\nwrite\tvalue.txt\tscore: 4\\n\n",
    );
    let shared = r.tmp_dir().join("shared");
    let toml = std::fs::read_to_string(r.dir.join("hone.toml")).unwrap();
    std::fs::write(
        r.dir.join("hone.toml"),
        format!(
            "{toml}\n[exec]\nbackend = \"slurm\"\nshared_dir = \"{}\"\n",
            shared.display()
        ),
    )
    .unwrap();
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
    // ...until the next hone resumes the run: it cancels the job and records it aborted.
    let out = r.hone(&["run", "--tag", "k"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(r.statuses(), ["baseline", "aborted", "keep"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while running().contains("RUNNING") {
        assert!(Instant::now() < deadline, "the stale job still runs");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A PostgreSQL server of its own in a temporary directory, on a free loopback port (Debian's
/// postgresql package; .ci/run installs it). Stopped when dropped.
struct PgServer {
    _tmp: tempfile::TempDir,
    data: PathBuf,
    url: String,
    child: std::process::Child,
}

impl PgServer {
    /// Starts one, or returns None (the test is skipped) where PostgreSQL is not installed,
    /// unless HONE_REQUIRE_POSTGRES is set (as .ci/run does).
    fn start() -> Option<PgServer> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()
            .and_then(|d| d.flatten().map(|e| e.path().join("bin")).max())
            .filter(|b| b.join("postgres").exists());
        let Some(bin) = bin else {
            assert!(
                std::env::var_os("HONE_REQUIRE_POSTGRES").is_none(),
                "HONE_REQUIRE_POSTGRES is set but PostgreSQL is not installed (apt-get install postgresql)"
            );
            eprintln!("skipped: PostgreSQL is not installed (apt-get install postgresql)");
            return None;
        };
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        std::fs::create_dir(&data).unwrap();
        // PostgreSQL refuses to run as root: as root, run it as the postgres user.
        let root = unsafe { libc_geteuid() } == 0;
        let as_pg = |program: &Path| {
            let mut c = if root {
                let mut c = Command::new("runuser");
                c.args(["-u", "postgres", "--"]).arg(program);
                c
            } else {
                Command::new(program)
            };
            c.stdin(std::process::Stdio::null());
            c
        };
        if root {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
            let st = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(&data)
                .status()
                .unwrap();
            assert!(st.success());
        }
        let out = as_pg(&bin.join("initdb"))
            .args(["--no-sync", "-A", "trust", "-U", "hone", "-D"])
            .arg(&data)
            .output()
            .unwrap();
        assert!(out.status.success(), "initdb: {}", text(&out));
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = as_pg(&bin.join("postgres"))
            .arg("-D")
            .arg(&data)
            .args([
                "-p",
                &port.to_string(),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "unix_socket_directories=",
                "-c",
                "fsync=off",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let server = PgServer {
            _tmp: tmp,
            data,
            url: format!("postgres://hone@127.0.0.1:{port}/postgres"),
            child,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ready = Command::new(bin.join("pg_isready"))
                .args(["-q", "-h", "127.0.0.1", "-p", &port.to_string()])
                .status()
                .unwrap();
            if ready.success() {
                break;
            }
            assert!(Instant::now() < deadline, "PostgreSQL did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(server)
    }

    fn psql(&self, sql: &str) -> String {
        let out = Command::new("psql")
            .args(["-X", "-A", "-t", "-d", &self.url, "-c", sql])
            .output()
            .unwrap();
        assert!(out.status.success(), "psql: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        if let Some(pid) = std::fs::read_to_string(self.data.join("postmaster.pid"))
            .ok()
            .and_then(|s| s.lines().next().and_then(|l| l.trim().parse::<i32>().ok()))
        {
            // SIGQUIT: immediate shutdown.
            unsafe { libc_kill(pid, 3) };
        }
        let _ = self.child.wait();
    }
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

#[test]
fn remote_workers_share_a_run_and_a_dead_workers_job_goes_to_another() {
    let Some(pg) = PgServer::start() else {
        return;
    };
    let mark = tempfile::tempdir().unwrap();
    let marker = mark.path().join("slow-started");
    let verify = format!(
        "cat value.txt; echo worker_slot=$SLOT_NAME; if grep -q slow value.txt && [ ! -e {m} ]; then echo $$ > {m}; sleep 300; fi",
        m = marker.display()
    );
    let r = Repo::new(
        "[stop]\nmax_experiments = 4\n",
        &verify,
        "write\tvalue.txt\tslow\\nscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 6\\n\n---\nwrite\tvalue.txt\tscore: 2\\n\n",
    );
    let bare = r.tmp_dir().join("shared.git");
    git(
        r.tmp_dir(),
        &["init", "-q", "--bare", bare.to_str().unwrap()],
    );
    let toml = std::fs::read_to_string(r.dir.join("hone.toml")).unwrap();
    std::fs::write(
        r.dir.join("hone.toml"),
        format!(
            "{toml}\n[exec]\nbackend = \"workers\"\nremote = \"{}\"\n\n[store]\nurl = \"{}\"\n",
            bare.display(),
            pg.url
        ),
    )
    .unwrap();
    git(&r.dir, &["commit", "-q", "-am", "workers"]);
    let worker = |name: &str| {
        Command::new(HONE)
            .args([
                "worker",
                "--store",
                &pg.url,
                "--repo",
                bare.to_str().unwrap(),
            ])
            .args([
                "--slot",
                name,
                "--lease",
                "2s",
                "--env",
                &format!("SLOT_NAME={name}"),
            ])
            .arg("--dir")
            .arg(r.tmp_dir().join(format!("w-{name}")))
            .stdout(std::fs::File::create(r.tmp_dir().join(format!("w-{name}.out"))).unwrap())
            .stderr(std::fs::File::create(r.tmp_dir().join(format!("w-{name}.err"))).unwrap())
            .spawn()
            .unwrap()
    };
    let mut a = worker("a");
    let mut coordinator = r.spawn_hone(&["run", "--tag", "w"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !marker.exists() {
        if Instant::now() > deadline {
            let _ = coordinator.kill();
            panic!(
                "worker a never started experiment 1's verifier\nworker: {}{}\nlog: {}",
                std::fs::read_to_string(r.tmp_dir().join("w-a.out")).unwrap_or_default(),
                std::fs::read_to_string(r.tmp_dir().join("w-a.err")).unwrap_or_default(),
                text(&r.hone(&["log"]))
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Worker a is verifying experiment 1. A second coordinator of the same run, from
    // another clone of the project, is refused.
    let clone = r.tmp_dir().join("clone");
    git(
        r.tmp_dir(),
        &[
            "clone",
            "-q",
            r.dir.to_str().unwrap(),
            clone.to_str().unwrap(),
        ],
    );
    let second = Command::new(HONE)
        .args(["run", "--tag", "w"])
        .current_dir(&clone)
        .output()
        .unwrap();
    assert!(!second.status.success());
    assert!(
        text(&second).contains("already coordinated"),
        "{}",
        text(&second)
    );
    // Worker a dies; its verifier's group is killed too (as a host going down would).
    a.kill().unwrap();
    a.wait().unwrap();
    let pgid = read_pgid(&marker);
    unsafe { libc_kill(-pgid, 9) };
    let mut b = worker("b");
    let mut c = worker("c");
    let st = coordinator.wait().unwrap();
    assert!(st.success(), "the coordinator failed");
    assert_eq!(r.statuses(), ["baseline", "keep", "discard", "keep"]);
    assert_eq!(r.rev("hone/w"), r.rev("refs/hone/w/3"));
    // Experiment 1 was attempted twice: worker a's lease ran out, another worker finished it.
    let attempts = pg.psql(
        "SELECT a.attempt || ':' || split_part(a.worker, ':', 2) || ':' || coalesce(a.outcome, '-') \
         FROM hone_job_attempts a JOIN hone_jobs j ON j.id = a.job_id WHERE j.n = 1 ORDER BY a.attempt",
    );
    let attempts: Vec<&str> = attempts.lines().collect();
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    assert_eq!(attempts[0], "1:a:lease expired");
    assert!(
        attempts[1] == "2:b:code" || attempts[1] == "2:c:code",
        "{attempts:?}"
    );
    // The log came back from the worker, with its slot's environment.
    let show = text(&r.hone(&["show", "1"]));
    assert!(
        show.contains("worker_slot=b") || show.contains("worker_slot=c"),
        "{show}"
    );
    // Both live workers are listed by hone status.
    let status = text(&r.hone(&["status"]));
    assert!(status.contains("workers: 2 live, 1 silent"), "{status}");
    for w in [&mut b, &mut c] {
        w.kill().unwrap();
        w.wait().unwrap();
    }
}

/// With `[store] url`, the whole store lives in PostgreSQL: a run records everything there
/// (no `.hone/hone.db`), `hone log --json`, `hone show` and `hone report` read it back, a
/// kill -9 mid-verification resumes cleanly (at once: the dead coordinator's registration is
/// taken over), and a coordinator of the same run elsewhere is refused with a clear error.
#[test]
fn a_run_stored_in_postgres_reads_back_and_resumes_after_kill_9() {
    let Some(pg) = PgServer::start() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let started = tmp.path().join("started");
    let pgid_file = tmp.path().join("pgid");
    // Experiment 2's verifier hangs (once) until killed.
    let verify = format!(
        "if [ \"$HONE_EXPERIMENT\" = 2 ] && [ ! -f {s} ]; then echo $$ > {p}; touch {s}; sleep 300; fi; cat value.txt",
        s = started.display(),
        p = pgid_file.display()
    );
    let r = Repo::new(
        &format!(
            "[stop]\nmax_experiments = 5\n\n[store]\nurl = \"{}\"\n",
            pg.url
        ),
        &verify,
        "write\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\n---\nwrite\tvalue.txt\tscore: 2\\n\n---\nwrite\tvalue.txt\tscore: 1\\n\n",
    );
    let mut child = r.spawn_hone(&["run", "--tag", "k"]);
    wait_for_file(&started);
    let pgid: i32 = read_pgid(&pgid_file);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert_eq!(r.statuses(), ["baseline", "keep", "running"]);
    assert!(
        !r.dir.join(".hone/hone.db").exists(),
        "nothing is recorded locally"
    );
    let root = r.dir.canonicalize().unwrap();
    assert_eq!(
        pg.psql("SELECT repo || '|' || tag || '|' || state FROM hone_store.runs"),
        format!("{}|k|running", root.display())
    );
    let key = format!("{}#k", root.display());
    // The killed coordinator's registration is still there, fresh.
    let left = pg.psql(&format!(
        "SELECT owner FROM hone_coordinators WHERE run_key = '{key}' AND heartbeat > now() - interval '1 minute'"
    ));
    assert!(
        left.starts_with("hone run (pid ") && left.ends_with(&format!(" in {}", root.display())),
        "{left}"
    );

    // Another host coordinates the run now: refused, saying who.
    pg.psql(&format!(
        "UPDATE hone_coordinators SET owner = 'hone run (pid 1) on elsewhere in /src', heartbeat = now() WHERE run_key = '{key}'"
    ));
    let refused = r.hone(&["run"]);
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("is already coordinated by hone run (pid 1) on elsewhere"),
        "{}",
        text(&refused)
    );
    assert_eq!(r.statuses(), ["baseline", "keep", "running"], "untouched");

    // Back to the killed coordinator's fresh registration: it was made from this checkout,
    // whose lock proves it dead, so the run resumes here at once instead of waiting it out.
    pg.psql(&format!(
        "UPDATE hone_coordinators SET owner = '{left}', heartbeat = now() WHERE run_key = '{key}'"
    ));
    let out = r.hone(&["run"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("experiment 2 was interrupted"),
        "{}",
        text(&out)
    );
    assert!(
        wait_group_gone(pgid),
        "resume must kill the interrupted verifier's group"
    );
    let log = r.log();
    let st: Vec<&str> = log.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(st, ["baseline", "keep", "aborted", "keep", "keep"]);
    assert_eq!(log[1]["objective"], 4.0, "finished experiments intact");
    assert_eq!(r.rev("hone/k"), r.rev("refs/hone/k/4"));
    // The registration is released at the end of the run.
    assert_eq!(
        pg.psql(&format!(
            "SELECT count(*) FROM hone_coordinators WHERE run_key = '{key}'"
        )),
        "0"
    );

    let show = r.hone(&["show", "3"]);
    assert!(show.status.success(), "{}", text(&show));
    assert!(text(&show).contains("+score: 2"), "{}", text(&show));
    let report = r.hone(&["report"]);
    assert!(report.status.success(), "{}", text(&report));
    let status = text(&r.hone(&["status"]));
    assert!(status.contains("run k"), "{status}");
    // The event log is in PostgreSQL too, and append-only there.
    let events: u64 = pg
        .psql("SELECT count(*) FROM hone_store.events")
        .parse()
        .unwrap();
    assert!(events > 0);
    let delete = Command::new("psql")
        .args(["-X", "-d", &pg.url, "-c", "DELETE FROM hone_store.events"])
        .output()
        .unwrap();
    assert!(!delete.status.success(), "events are append-only");
    assert!(text(&delete).contains("append-only"), "{}", text(&delete));
    // The dashboard reads the run from PostgreSQL as well.
    let mut serve = Command::new(HONE)
        .args(["serve", "--port", "0"])
        .current_dir(&r.dir)
        .env_remove("HONE_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(serve.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("hone serve did not start: {line}"))
        .to_string();
    let body = ureq::get(&format!("{url}api/runs/k"))
        .call()
        .map(|mut res| res.body_mut().read_to_string().unwrap());
    let _ = serve.kill();
    let _ = serve.wait();
    let api: serde_json::Value = serde_json::from_str(&body.unwrap()).unwrap();
    assert_eq!(api["summary"]["experiments"], 5, "{api}");
    assert!(!r.dir.join(".hone/hone.db").exists());
}

/// Runs `hone run` with a fake tool's directory first on PATH.
fn run_with_tool(r: &Repo, bin: &Path, record: &Path, extra_env: &[(&str, &str)]) -> Output {
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let mut cmd = Command::new(HONE);
    cmd.arg("run")
        .current_dir(&r.dir)
        .env("PATH", &path)
        .env("FAKE_RECORD", record);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// The lines of a file a fake tool recorded.
fn recorded(record: &Path, name: &str) -> Vec<String> {
    std::fs::read_to_string(record.join(name))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A stand-in `aider`: like the real one, it writes its chat history where
/// `--chat-history-file` says, edits the files it was given, and prints its usage line
/// (`Tokens: ... Cost: ...`); the second time it prints a litellm error as aider does.
const FAKE_AIDER: &str = r##"#!/bin/sh
printf '%s\n' "$@" > "$FAKE_RECORD/argv"
env > "$FAKE_RECORD/env"
n=$(cat "$FAKE_RECORD/count" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$FAKE_RECORD/count"
history=.aider.chat.history.md
while [ $# -gt 0 ]; do
  case "$1" in
    --chat-history-file) history="$2"; shift ;;
    --message-file) cp "$2" "$FAKE_RECORD/message" ;;
    --) shift; files="$*"; break ;;
  esac
  shift
done
echo "# aider chat started" >> "$history"
echo "Aider v0.86.1"
echo "Main model: anthropic/claude-sonnet-4-20250514 with diff edit format, infinite output"
echo "Git repo: .git with 4 files"
echo "Repo-map: disabled"
for f in $files; do echo "Added $f to the chat."; done
if [ $n = 1 ]; then
  echo "I will lower the score."
  printf 'score: 4\n' > value.txt
  echo "Tokens: 2.3k sent, 85 received. Cost: \$0.0082 message, \$0.0082 session."
  echo "Applied edit to value.txt"
else
  echo 'litellm.AuthenticationError: AnthropicException - {"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}'
  echo "The API provider is not able to authenticate you. Check your API key."
fi
"##;

#[test]
fn aider_preset_edits_the_editable_files_and_reads_its_usage_line() {
    let (bin, record) = fake_tool("aider", FAKE_AIDER);
    let r = preset_repo("kind = \"aider\"\nmodel = \"sonnet\"");
    let out = run_with_tool(&r, bin.path(), record.path(), &[]);
    assert!(out.status.success(), "{}", text(&out));
    let argv = recorded(record.path(), "argv");
    let tag_logs = |a: &str| a.contains("/.hone/runs/") && a.contains("/logs/");
    assert_eq!(argv[0], "--message-file");
    assert!(argv[1].ends_with("/prompts/2.md"), "{argv:?}");
    assert_eq!(
        argv[2..13],
        [
            "--yes-always",
            "--no-auto-commits",
            "--no-dirty-commits",
            "--no-gitignore",
            "--no-stream",
            "--no-pretty",
            "--no-fancy-input",
            "--no-check-update",
            "--analytics-disable",
            "--map-tokens",
            "0",
        ]
    );
    assert_eq!(argv[13], "--chat-history-file");
    assert!(
        tag_logs(&argv[14]) && argv[14].ends_with("2.aider.chat.md"),
        "{argv:?}"
    );
    assert_eq!(argv[15], "--input-history-file");
    assert!(tag_logs(&argv[16]), "{argv:?}");
    assert_eq!(argv[17..], ["--model", "sonnet", "--", "value.txt"]);
    assert!(std::fs::read_to_string(record.path().join("message"))
        .unwrap()
        .contains("You may change only"));
    let log = r.log();
    assert_eq!(log[1]["status"], "keep", "{log:?}");
    assert_eq!(log[1]["cost_usd"], 0.0082);
    assert_eq!(log[1]["tokens"], 2385);
    assert_eq!(log[2]["status"], "invalid");
    assert!(
        log[2]["reason"]
            .as_str()
            .unwrap()
            .contains("invalid x-api-key"),
        "{}",
        log[2]
    );
    // Its history never entered a candidate.
    let tag = log[0]["log_path"]
        .as_str()
        .unwrap()
        .split("/runs/")
        .nth(1)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let files = git(
        &r.dir,
        &[
            "ls-tree",
            "-r",
            "--name-only",
            &format!("refs/hone/{tag}/1"),
        ],
    );
    assert!(!files.contains(".aider"), "{files}");
    assert_missing_tool_is_named(&r, "pip install aider-chat");
}

/// A stand-in `gemini` printing Gemini CLI's `--output-format json` object (pretty-printed,
/// as the real one does), then an API error object with exit status 1.
const FAKE_GEMINI: &str = r#"#!/bin/sh
printf '%s\n' "$@" > "$FAKE_RECORD/argv"
env > "$FAKE_RECORD/env"
cat > "$FAKE_RECORD/stdin"
n=$(cat "$FAKE_RECORD/count" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$FAKE_RECORD/count"
if [ $n = 1 ]; then
  printf 'score: 3\n' > value.txt
  cat <<'JSON'
{
  "response": "I set the score to 3.",
  "stats": {
    "models": {
      "gemini-2.5-pro": {
        "api": {
          "totalRequests": 2,
          "totalErrors": 0,
          "totalLatencyMs": 5053
        },
        "tokens": {
          "prompt": 24939,
          "candidates": 20,
          "total": 25113,
          "cached": 21263,
          "thoughts": 154,
          "tool": 0
        }
      }
    },
    "tools": {
      "totalCalls": 1,
      "totalSuccess": 1,
      "totalFail": 0,
      "totalDurationMs": 1881,
      "totalDecisions": { "accept": 0, "reject": 0, "modify": 0, "auto_accept": 1 },
      "byName": {
        "replace": { "count": 1, "success": 1, "fail": 0, "durationMs": 1881 }
      }
    },
    "files": { "totalLinesAdded": 1, "totalLinesRemoved": 1 }
  }
}
JSON
else
  cat <<'JSON'
{
  "error": {
    "type": "ApiError",
    "message": "[API Error: You exceeded your current quota]",
    "code": 429
  }
}
JSON
  exit 1
fi
"#;

#[test]
fn gemini_preset_runs_headless_json_and_reads_its_stats() {
    let (bin, record) = fake_tool("gemini", FAKE_GEMINI);
    let r = preset_repo("kind = \"gemini\"\nmodel = \"gemini-2.5-pro\"");
    let out = run_with_tool(
        &r,
        bin.path(),
        record.path(),
        &[("GEMINI_API_KEY", "g-test")],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        recorded(record.path(), "argv"),
        [
            "--output-format",
            "json",
            "--approval-mode",
            "auto_edit",
            "--skip-trust",
            "--model",
            "gemini-2.5-pro",
            "-p",
            "Do the task described above."
        ]
    );
    assert!(std::fs::read_to_string(record.path().join("stdin"))
        .unwrap()
        .contains("You may change only"));
    let env = recorded(record.path(), "env");
    assert!(env.contains(&"GEMINI_API_KEY=g-test".to_string()));
    assert!(env.contains(&"GEMINI_CLI_TRUST_WORKSPACE=true".to_string()));
    let log = r.log();
    assert_eq!(log[1]["status"], "keep", "{log:?}");
    assert_eq!(log[1]["description"], "I set the score to 3.");
    assert_eq!(log[1]["tokens"], 25113);
    assert_eq!(log[2]["status"], "invalid");
    assert!(
        log[2]["reason"]
            .as_str()
            .unwrap()
            .contains("exceeded your current quota"),
        "{}",
        log[2]
    );
    assert_missing_tool_is_named(&r, "npm install -g @google/gemini-cli");
}

/// A stand-in `opencode` printing `opencode run --format json` events.
const FAKE_OPENCODE: &str = r#"#!/bin/sh
printf '%s\n' "$@" > "$FAKE_RECORD/argv"
env > "$FAKE_RECORD/env"
cat > "$FAKE_RECORD/stdin"
n=$(cat "$FAKE_RECORD/count" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$FAKE_RECORD/count"
echo '{"type":"step_start","timestamp":1767036059338,"sessionID":"ses_4a1","part":{"id":"prt_1","sessionID":"ses_4a1","messageID":"msg_1","type":"step-start","snapshot":"4b825dc642cb6eb9a060e54bf8d69288fbee4904"}}'
if [ $n = 1 ]; then
  printf 'score: 2\n' > value.txt
  echo '{"type":"tool_use","timestamp":1767036061000,"sessionID":"ses_4a1","part":{"id":"prt_2","type":"tool","tool":"edit","callID":"c1","state":{"status":"completed","input":{"filePath":"value.txt"},"output":"","title":"value.txt"}}}'
  echo '{"type":"text","timestamp":1767036062000,"sessionID":"ses_4a1","part":{"id":"prt_3","type":"text","text":"Lowered the score to 2.","time":{"start":1767036061500,"end":1767036062000}}}'
  echo '{"type":"step_finish","timestamp":1767036062100,"sessionID":"ses_4a1","part":{"id":"prt_4","type":"step-finish","reason":"stop","snapshot":"9f1c","cost":0.0042,"tokens":{"input":1200,"output":80,"reasoning":0,"cache":{"read":300,"write":0}}}}'
else
  echo '{"type":"error","timestamp":1767036063000,"sessionID":"ses_4a1","error":{"name":"APIError","data":{"message":"Invalid API key.","statusCode":401,"isRetryable":false}}}'
  exit 1
fi
"#;

#[test]
fn opencode_preset_runs_json_events_and_reads_cost_and_tokens() {
    let (bin, record) = fake_tool("opencode", FAKE_OPENCODE);
    let r = preset_repo(
        "kind = \"opencode\"\nmodel = \"anthropic/claude-sonnet-4-20250514\"\nextra_args = [\"--agent\", \"build\"]",
    );
    let out = run_with_tool(
        &r,
        bin.path(),
        record.path(),
        &[("ANTHROPIC_API_KEY", "sk-ant-oc")],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        recorded(record.path(), "argv"),
        [
            "run",
            "--format",
            "json",
            "--model",
            "anthropic/claude-sonnet-4-20250514",
            "--agent",
            "build"
        ]
    );
    assert!(std::fs::read_to_string(record.path().join("stdin"))
        .unwrap()
        .contains("You may change only"));
    let env = recorded(record.path(), "env");
    assert!(env.contains(&"ANTHROPIC_API_KEY=sk-ant-oc".to_string()));
    assert!(
        env.iter().any(|l| l.starts_with("OPENCODE_PERMISSION=")
            && l.contains("\"edit\":\"allow\"")
            && l.contains("\"bash\":\"deny\"")),
        "{env:?}"
    );
    let log = r.log();
    assert_eq!(log[1]["status"], "keep", "{log:?}");
    assert_eq!(log[1]["description"], "Lowered the score to 2.");
    assert_eq!(log[1]["cost_usd"], 0.0042);
    assert_eq!(log[1]["tokens"], 1580);
    assert_eq!(log[2]["status"], "invalid");
    assert!(
        log[2]["reason"]
            .as_str()
            .unwrap()
            .contains("Invalid API key."),
        "{}",
        log[2]
    );
    assert_missing_tool_is_named(&r, "npm install -g opencode-ai");
}

#[test]
fn a_preset_that_spends_the_budget_stops_the_run_before_the_next_agent_starts() {
    // A CLI agent's cost is only known after it ran: the run stops as soon as the spend
    // reaches max_cost_usd, and no further agent is started.
    let (bin, record) = fake_tool("claude", FAKE_CLAUDE);
    let r = preset_repo("kind = \"claude\"");
    let toml = std::fs::read_to_string(r.dir.join("hone.toml")).unwrap();
    std::fs::write(
        r.dir.join("hone.toml"),
        format!("{toml}max_cost_usd = 0.01\n"),
    )
    .unwrap();
    git(&r.dir, &["commit", "-q", "-am", "budget"]);
    let out = run_with_tool(&r, bin.path(), record.path(), &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(record.path().join("count"))
            .unwrap()
            .trim(),
        "1"
    );
    assert_eq!(r.statuses(), ["baseline", "keep"]);
    assert!(text(&out).contains("stopped: budget"), "{}", text(&out));
}

/// An apply_patch patch changing one line of `path`.
fn patch(path: &str, old: &str, new: &str) -> String {
    format!("HYPOTHESIS: patch {path}\n\n*** Begin Patch\n*** Update File: {path}\n@@\n-{old}\n+{new}\n*** End Patch\n")
}

#[test]
fn openai_patch_mode_applies_repairs_once_and_gates() {
    let server = LlmServer::start(
        vec![
            Reply::Answer(patch("value.txt", "score: 5", "score: 4"), 100, 20),
            Reply::Answer(patch("value.txt", "score: 99", "score: 1"), 100, 20),
            Reply::Answer(patch("value.txt", "score: 4", "score: 3"), 100, 20),
            Reply::Answer(patch("value.txt", "score: 77", "score: 1"), 100, 20),
            Reply::Answer(patch("value.txt", "score: 78", "score: 1"), 100, 20),
            Reply::Answer(
                "*** Begin Patch\n*** Update File: prepare.py\n-# the fixed evaluator\n+print('score: 0')\n*** End Patch\n".into(),
                100,
                20,
            ),
        ],
        false,
    );
    let r = llm_repo(
        "openai",
        &server,
        "edit_mode = \"patch\"",
        "max_experiments = 5",
    );
    let out = hone_with_key(&r, &["run"]);
    assert!(out.status.success(), "{}", text(&out));
    let log = r.log();
    let st: Vec<&str> = log.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(
        st,
        ["baseline", "keep", "keep", "invalid", "violation"],
        "{log:?}"
    );
    assert_eq!(log[1]["description"], "patch value.txt");
    assert_eq!(log[2]["objective"], 3.0);
    assert!(
        log[3]["reason"]
            .as_str()
            .unwrap()
            .contains("after a repair round"),
        "{}",
        log[3]
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 6, "one, a repaired one, a failed repair, one");
    let first: serde_json::Value = serde_json::from_str(&reqs[0].2).unwrap();
    assert!(first["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("*** Begin Patch"));
    let repair: serde_json::Value = serde_json::from_str(&reqs[2].2).unwrap();
    let repair = repair["messages"][3]["content"].as_str().unwrap();
    assert!(
        repair.contains("-score: 99\n+score: 1"),
        "the repair quotes the failing hunk: {repair}"
    );
    assert!(repair.contains("match nothing"), "{repair}");
}

const REVIEW_SECRET: &str = "sk-review-never-leak-91ab";

fn verdict(decision: &str, reason: &str) -> String {
    serde_json::json!({"decision": decision, "reason": reason}).to_string()
}

#[test]
fn an_http_reviewer_approves_or_rejects_before_the_verifier_runs() {
    let reviewer = LlmServer::start(
        vec![
            Reply::Answer(verdict("approve", "a plain change"), 400, 20),
            Reply::Answer(verdict("reject", "it reads the validation data"), 400, 20),
            Reply::Answer("LGTM, ship it".into(), 400, 20),
        ],
        false,
    );
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let keys = tmp.path().join("keys");
    let verify = format!(
        "echo run >> {runs}; echo \\\"verifier=$REVIEW_KEY\\\" >> {keys}; cat value.txt",
        runs = runs.display(),
        keys = keys.display()
    );
    let r = Repo::new(
        &format!(
            "\n[stop]\nmax_experiments = 4\n\n[review]\nkind = \"openai\"\nmodel = \"judge\"\nbase_url = \"{}/v1\"\napi_key_env = \"REVIEW_KEY\"\nmax_tokens = 200\nprice_in_per_mtok = 1\nprice_out_per_mtok = 2\ninstructions = \"REVIEW.md\"\n",
            reviewer.url
        ),
        &verify,
        &format!(
            "run\techo \"agent=$REVIEW_KEY\" >> {keys}\nwrite\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 1\\n\n---\nwrite\tvalue.txt\tscore: 2\\n\n",
            keys = keys.display()
        ),
    );
    std::fs::write(
        r.dir.join("REVIEW.md"),
        "Reject anything that reads data/.\n",
    )
    .unwrap();
    git(&r.dir, &["add", "-A"]);
    git(&r.dir, &["commit", "-q", "-m", "review"]);
    let out = Command::new(HONE)
        .arg("run")
        .current_dir(&r.dir)
        .env("REVIEW_KEY", REVIEW_SECRET)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let log = r.log();
    let st: Vec<&str> = log.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(st, ["baseline", "keep", "rejected", "rejected"], "{log:?}");
    assert_eq!(
        log[2]["reason"],
        "the reviewer rejected it: it reads the validation data"
    );
    assert!(
        log[3]["reason"].as_str().unwrap().contains("not a verdict"),
        "anything but the JSON verdict rejects: {}",
        log[3]
    );
    // Only the baseline and the approved candidate were measured.
    assert_eq!(std::fs::read_to_string(&runs).unwrap().lines().count(), 2);
    // The review's usage is the experiment's: 400 in at $1/M + 20 out at $2/M.
    assert_eq!(log[2]["tokens"], 420);
    assert!(
        (log[2]["cost_usd"].as_f64().unwrap() - 0.00044).abs() < 1e-12,
        "{}",
        log[2]
    );
    let reqs = reviewer.requests();
    assert_eq!(reqs.len(), 3);
    let (_, headers, body) = &reqs[1];
    assert!(headers.contains(&(
        "authorization".to_string(),
        format!("Bearer {REVIEW_SECRET}")
    )));
    let body: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(body["model"], "judge");
    assert!(body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("\"decision\""));
    let prompt = body["messages"][1]["content"].as_str().unwrap();
    assert!(
        prompt.contains("+score: 1"),
        "the reviewer sees the diff: {prompt}"
    );
    assert!(
        prompt.contains("Reject anything that reads data/."),
        "and its instructions"
    );
    // Its key reaches neither the agent nor the verifier, nor hone's records.
    let seen = std::fs::read_to_string(&keys).unwrap();
    assert!(!seen.contains(REVIEW_SECRET), "{seen}");
    assert!(
        seen.contains("agent=") && seen.contains("verifier="),
        "{seen}"
    );
    let state = state_bytes(&r);
    assert!(!state
        .windows(REVIEW_SECRET.len())
        .any(|w| w == REVIEW_SECRET.as_bytes()));
}

#[test]
fn proposer_and_reviewer_share_one_budget() {
    // Prices only on output tokens make every worst case exact: max_tokens = 100 at $1000 per
    // million is $0.10 a call. Proposer calls cost $0.10, reviews $0.05. With $0.33:
    // propose (0.10) + review (0.05); propose (0.10), then only $0.08 is left for a review
    // whose worst case is $0.10, so it is never sent and the run stops on its budget.
    let proposer = LlmServer::start(
        vec![
            Reply::Answer(edit("value.txt", "score: 5", "score: 4"), 1000, 100),
            Reply::Answer(edit("value.txt", "score: 4", "score: 3"), 1000, 100),
        ],
        false,
    );
    let reviewer = LlmServer::start(
        vec![Reply::Answer(verdict("approve", "ok"), 500, 50)],
        false,
    );
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let r = Repo::new("", SCORE, "");
    let toml = format!(
        "[loop]\neditable = [\"value.txt\"]\n\n[verify]\ncommand = \"echo run >> {runs}; cat value.txt\"\nmetric = \"score\"\n\n\
         [agent]\nkind = \"openai\"\nmodel = \"m\"\nbase_url = \"{p}/v1\"\nmax_tokens = 100\nprice_in_per_mtok = 0\nprice_out_per_mtok = 1000\n\n\
         [review]\nkind = \"openai\"\nmodel = \"judge\"\nbase_url = \"{q}/v1\"\nmax_tokens = 100\nprice_in_per_mtok = 0\nprice_out_per_mtok = 1000\n\n\
         [stop]\nmax_experiments = 10\nmax_cost_usd = 0.33\n",
        runs = runs.display(),
        p = proposer.url,
        q = reviewer.url
    );
    std::fs::write(r.dir.join("hone.toml"), toml).unwrap();
    git(&r.dir, &["commit", "-q", "-am", "budget"]);
    let out = r.hone(&["run"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(proposer.requests().len(), 2);
    assert_eq!(
        reviewer.requests().len(),
        1,
        "no review past the budget was sent"
    );
    let log = r.log();
    let st: Vec<&str> = log.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(st, ["baseline", "keep", "rejected"], "{log:?}");
    assert!(
        (log[1]["cost_usd"].as_f64().unwrap() - 0.15).abs() < 1e-9,
        "{}",
        log[1]
    );
    assert_eq!(log[1]["tokens"], 1100 + 550);
    assert!(
        (log[2]["cost_usd"].as_f64().unwrap() - 0.10).abs() < 1e-9,
        "{}",
        log[2]
    );
    assert!(
        log[2]["reason"].as_str().unwrap().starts_with("budget"),
        "{}",
        log[2]
    );
    assert_eq!(
        std::fs::read_to_string(&runs).unwrap().lines().count(),
        2,
        "the unreviewed candidate never ran"
    );
    assert!(text(&out).contains("stopped: budget"), "{}", text(&out));
}

#[test]
fn a_reviewer_whose_key_is_refused_stops_the_run_unverified() {
    let reviewer = LlmServer::start(
        vec![Reply::Status(
            401,
            Vec::new(),
            "{\"error\":\"bad key\"}".into(),
        )],
        false,
    );
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let r = Repo::new(
        &format!(
            "\n[review]\nkind = \"openai\"\nmodel = \"judge\"\nbase_url = \"{}/v1\"\napi_key_env = \"REVIEW_KEY\"\n",
            reviewer.url
        ),
        &format!("echo run >> {}; cat value.txt", runs.display()),
        "write\tvalue.txt\tscore: 4\\n\n",
    );
    let out = r.hone(&["run"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("check the key in $REVIEW_KEY"),
        "{}",
        text(&out)
    );
    assert_eq!(r.statuses(), ["baseline", "rejected"]);
    assert_eq!(reviewer.requests().len(), 1, "a refused key is not retried");
    assert_eq!(std::fs::read_to_string(&runs).unwrap().lines().count(), 1);
}

/// Appends to a repository's hone.toml (hone reads it from the checkout, committed or not).
fn append_spec(dir: &Path, extra: &str) {
    let path = dir.join("hone.toml");
    let mut spec = std::fs::read_to_string(&path).unwrap();
    spec.push_str(extra);
    std::fs::write(path, spec).unwrap();
}

fn hone_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(HONE)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn log_lines(dir: &Path) -> Vec<String> {
    let out = hone_in(dir, &["log", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            format!("{} {} {}", v["status"], v["objective"], v["description"])
        })
        .collect()
}

/// What `knob_repo` proposes with seed 7 and no outer loop. First recorded from the binary of
/// the commit before the outer loop existed; re-recorded when the sampler's Parzen bandwidth
/// was halved (the first three proposals, the initial design, are unchanged). A run without
/// mechanisms, or with an empty `[outer]`, must not differ from it by one candidate.
const BEFORE_MECHANISMS_SEED_7: &[&str] = &[
    "\"baseline\" 146.0 \"baseline\"",
    "\"keep\" 137.0 \"DEPTH 9 -> 15, WIDTH 2 -> 9\"",
    "\"keep\" 122.0 \"DEPTH 15 -> 5, WIDTH 9 -> 2\"",
    "\"keep\" 25.0 \"DEPTH 5 -> 7, WIDTH 2 -> 17\"",
    "\"discard\" 32.0 \"DEPTH 7 -> 8\"",
    "\"discard\" 97.0 \"DEPTH 7 -> 13\"",
    "\"keep\" 18.0 \"WIDTH 17 -> 16\"",
    "\"keep\" 5.0 \"DEPTH 7 -> 6, WIDTH 16 -> 14\"",
    "\"discard\" 5.0 \"DEPTH 6 -> 5, WIDTH 14 -> 15\"",
    "\"keep\" 0.0 \"DEPTH 6 -> 4, WIDTH 14 -> 13\"",
    "\"discard\" 2.0 \"DEPTH 4 -> 5, WIDTH 13 -> 12\"",
    "\"discard\" 8.0 \"DEPTH 4 -> 6, WIDTH 13 -> 11\"",
    "\"discard\" 8.0 \"DEPTH 4 -> 2, WIDTH 13 -> 11\"",
    "\"discard\" 1.0 \"WIDTH 13 -> 14\"",
    "\"discard\" 2.0 \"DEPTH 4 -> 3, WIDTH 13 -> 14\"",
];

#[test]
fn a_run_without_mechanisms_proposes_exactly_what_it_did_before_the_outer_loop() {
    let (_a, plain) = knob_repo();
    let out = hone_in(&plain, &["run", "--seed", "7"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(log_lines(&plain), BEFORE_MECHANISMS_SEED_7);
    // An empty [outer] is no outer loop either, and records no mechanism calls.
    let (_b, empty) = knob_repo();
    append_spec(&empty, "\n[outer]\nmechanisms = []\n");
    let out = hone_in(&empty, &["run", "--seed", "7"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(log_lines(&empty), BEFORE_MECHANISMS_SEED_7);
    let stats = text(&hone_in(&empty, &["mech", "stats"]));
    assert!(stats.contains("recorded no mechanism calls"), "{stats}");
}

/// Per-mechanism records from `hone mech stats --json`, by name.
fn mech_stats(dir: &Path) -> std::collections::BTreeMap<String, serde_json::Value> {
    let out = hone_in(dir, &["mech", "stats", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["name"].as_str().unwrap().to_string(), v)
        })
        .collect()
}

#[test]
fn mechanisms_demonstrably_run_on_a_knobs_problem() {
    let outer = "\n[outer]\nmechanisms = [\"tabu\", \"bandit\", \"explore\", \"restart\", \"plateau\", \"orthogonal\"]\nstrategy_every = 5\n";
    let (_a, dir) = knob_repo();
    append_spec(&dir, outer);
    let out = hone_in(&dir, &["run", "--seed", "7", "-n", "25"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("outer: strategy: strategy revised"),
        "{}",
        text(&out)
    );
    let stats = mech_stats(&dir);
    for name in [
        "strategy",
        "tabu",
        "bandit",
        "explore",
        "restart",
        "plateau",
        "orthogonal",
    ] {
        let s = stats
            .get(name)
            .unwrap_or_else(|| panic!("no record of {name}: {stats:?}"));
        let calls: u64 = s["calls"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert!(calls > 0, "{name} was never called");
        assert_eq!(
            s["calls"]["before_propose"], 24,
            "{name}: once per candidate"
        );
    }
    assert!(
        stats["tabu"]["rejected"].as_u64().unwrap() > 0,
        "{:?}",
        stats["tabu"]
    );
    assert!(stats["explore"]["suggested"].as_u64().unwrap() > 0);
    assert!(stats["bandit"]["guided"].as_u64().unwrap() > 0);
    assert!(stats["strategy"]["changed"].as_u64().unwrap() > 0);
    // The rejection is on record where it happened, and its candidate was never verified:
    // the knobs optimizer was asked again and the experiment ran another configuration.
    let rejected_in = (1..25u64)
        .find(|n| {
            text(&hone_in(&dir, &["show", &n.to_string()])).contains("tabu filter -> rejected")
        })
        .expect("some experiment shows a tabu rejection");
    let show = text(&hone_in(&dir, &["show", &rejected_in.to_string()]));
    let rejected_desc = show
        .lines()
        .find(|l| l.contains("tabu filter -> rejected"))
        .and_then(|l| l.split('`').nth(1))
        .unwrap()
        .to_string();
    let ran = &log_at(&dir, rejected_in)["description"];
    assert_ne!(ran.as_str().unwrap(), rejected_desc, "{show}");
    assert!(show.contains("within"), "{show}");
    // hone report has the mechanisms' activity, with the same figures as mech stats.
    let out = hone_in(&dir, &["report", "--out", "rep"]);
    assert!(out.status.success(), "{}", text(&out));
    let md = std::fs::read_to_string(dir.join("rep/report.md")).unwrap();
    assert!(md.contains("## Mechanisms (outer loop)"), "{md}");
    let tabu_row = md
        .lines()
        .find(|l| l.starts_with("| tabu |"))
        .unwrap_or_else(|| panic!("no tabu row: {md}"));
    let cells: Vec<&str> = tabu_row.split('|').map(str::trim).collect();
    let tabu_calls: u64 = stats["tabu"]["calls"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(cells[2], tabu_calls.to_string(), "{tabu_row}");
    assert!(
        cells[5].starts_with(&stats["tabu"]["rejected"].to_string()),
        "{tabu_row}"
    );
    let html = std::fs::read_to_string(dir.join("rep/report.html")).unwrap();
    assert!(html.contains("<h2>Mechanisms (outer loop)</h2>"));
    // The same seed gives the same run, mechanisms included.
    let (_b, again) = knob_repo();
    append_spec(&again, outer);
    let out = hone_in(&again, &["run", "--seed", "7", "-n", "25"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(log_lines(&dir), log_lines(&again));
    // And differs from the same seed without them.
    let (_c, plain) = knob_repo();
    let out = hone_in(&plain, &["run", "--seed", "7", "-n", "25"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_ne!(log_lines(&dir), log_lines(&plain));
    let out = hone_in(&plain, &["report", "--out", "rep"]);
    assert!(out.status.success(), "{}", text(&out));
    let md = std::fs::read_to_string(plain.join("rep/report.md")).unwrap();
    assert!(!md.contains("Mechanisms"), "no outer loop, no section");
}

/// `surrogate` fits a quadratic to what was measured and offers its minimum: on the integer
/// bowl of `knob_repo` (a quadratic, so the fit is exact) the experiment that first reaches the
/// bowl's minimum (loss 0 at WIDTH 13, DEPTH 4) is the surrogate's own candidate, and the keep
/// widens its trust region.
#[test]
fn surrogate_candidates_are_verified_and_reach_the_minimum_of_a_bowl() {
    let (_a, dir) = knob_repo();
    append_spec(&dir, "\n[outer]\nmechanisms = [\"surrogate\"]\n");
    let out = hone_in(&dir, &["run", "--seed", "3", "-n", "30"]);
    assert!(out.status.success(), "{}", text(&out));
    let log = text(&hone_in(&dir, &["log", "--json"]));
    let first_zero = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["status"] == "keep" && v["objective"].as_f64() == Some(0.0))
        .unwrap_or_else(|| panic!("the minimum was never kept: {log}"));
    assert_eq!(first_zero["description"], "DEPTH 5 -> 4, WIDTH 11 -> 13");
    let n = first_zero["n"].as_u64().unwrap();
    let show = text(&hone_in(&dir, &["show", &n.to_string()]));
    assert!(
        show.contains("surrogate candidates -> suggested: 1 candidate(s); one was proposed"),
        "{show}"
    );
    assert!(
        show.contains("surrogate on_result -> changed: trust radius 0.200 -> 0.300"),
        "{show}"
    );
    let stats = mech_stats(&dir);
    let s = &stats["surrogate"];
    assert!(s["changed"].as_u64().unwrap() > 0, "{s:?}");
    assert_eq!(s["inert"], false, "{s:?}");
    // Without the mechanism the same seed proposes something else at that experiment.
    let (_b, plain) = knob_repo();
    let out = hone_in(&plain, &["run", "--seed", "3", "-n", "30"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_ne!(log_at(&plain, n)["description"], first_zero["description"]);
}

fn log_at(dir: &Path, n: u64) -> serde_json::Value {
    let out = hone_in(dir, &["log", "--json"]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["n"] == n)
        .unwrap()
}

#[test]
fn a_mechanism_that_never_changes_anything_is_reported_inert() {
    let (_a, dir) = knob_repo();
    // Eight experiments with keeps are too few for a restart to trigger.
    append_spec(
        &dir,
        "\n[outer]\nmechanisms = [\"restart\", \"bandit\"]\nprobation = 5\n",
    );
    let out = hone_in(&dir, &["run", "--seed", "7", "-n", "8"]);
    assert!(out.status.success(), "{}", text(&out));
    let stats = mech_stats(&dir);
    assert_eq!(stats["restart"]["inert"], true, "{:?}", stats["restart"]);
    assert_eq!(stats["bandit"]["inert"], false, "{:?}", stats["bandit"]);
    let table = text(&hone_in(&dir, &["mech", "stats"]));
    assert!(
        table.contains("inert: `restart` ran over 8 experiments"),
        "{table}"
    );
}

#[test]
fn an_agent_repeating_a_failed_edit_is_rejected_before_any_compute() {
    let r = Repo::new(
        "[stop]\nmax_experiments = 4\n\n[outer]\nmechanisms = [\"tabu\", \"bandit\"]\n",
        SCORE,
        "write\tvalue.txt\tscore: 7\\n\n---\nexpect-prompt\tGuidance from hone's search mechanisms\nexpect-prompt\tbandit: make\nwrite\tvalue.txt\tscore: 7\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\n",
    );
    let out = r.hone(&["run", "--tag", "t"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(r.statuses(), ["baseline", "discard", "rejected", "keep"]);
    let log = r.log();
    let why = log[2]["reason"].as_str().unwrap();
    assert!(why.starts_with("mechanism `tabu`: "), "{why}");
    assert!(
        log[2]["objective"].is_null(),
        "a rejected candidate is never verified"
    );
    let show = text(&r.hone(&["show", "2"]));
    assert!(show.contains("tabu filter -> rejected"), "{show}");
    let logs = r.dir.join(".hone/runs/t/logs");
    assert!(logs.join("1.log").exists() && logs.join("3.log").exists());
    assert!(
        !logs.join("2.log").exists(),
        "no verifier ran for the rejected candidate"
    );
}

#[test]
fn the_portfolio_switches_mechanisms_per_segment_and_records_it() {
    let (_a, dir) = knob_repo();
    append_spec(
        &dir,
        "\n[outer]\nmechanisms = [\"tabu\", \"bandit\", \"explore\", \"plateau\"]\nsegment = 4\nportfolio = true\n",
    );
    let out = hone_in(&dir, &["run", "--seed", "3", "-n", "16"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("outer: portfolio: deactivated `"),
        "{}",
        text(&out)
    );
    let stats = mech_stats(&dir);
    let portfolio = &stats["portfolio"];
    assert!(portfolio["changed"].as_u64().unwrap() >= 2, "{portfolio}");
    // Half of the four run in each segment after the first: at least two are not called for
    // a whole segment.
    let off = ["tabu", "bandit", "explore", "plateau"]
        .iter()
        .filter(|name| {
            stats[**name]["calls"]["before_propose"]
                .as_u64()
                .unwrap_or(0)
                < 15
        })
        .count();
    assert!(off >= 2, "{off} mechanism(s) sat out a segment: {stats:?}");
    // The switches are in the run's event log too.
    let store = hone::store::Store::open(&dir.join(".hone/hone.db")).unwrap();
    let run = store.latest_run().unwrap().unwrap();
    let switches = store
        .events(run.id)
        .unwrap()
        .into_iter()
        .filter(|(_, kind, data)| kind == "outer" && data.contains("portfolio"))
        .map(|(_, _, data)| data)
        .collect::<Vec<_>>();
    assert!(switches.len() >= 2, "{switches:?}");
    // Credit is per mechanism (the keep rate of the experiments each one shaped), so the
    // mechanisms' records differ.
    let rewards: std::collections::BTreeSet<&str> = switches
        .iter()
        .filter_map(|d| d.split("mean reward ").nth(1))
        .filter_map(|r| r.split(' ').next())
        .collect();
    assert!(rewards.len() >= 2, "{switches:?}");
    // `tabu` rejected nothing here, so it shaped no experiment and earned nothing, whatever
    // the segments' keep rates were.
    assert_eq!(stats["tabu"]["rejected"], 0, "{:?}", stats["tabu"]);
    let tabu: Vec<&String> = switches.iter().filter(|d| d.contains("`tabu`")).collect();
    assert!(!tabu.is_empty(), "{switches:?}");
    for d in tabu {
        assert!(
            d.contains("mean reward 0.000") || d.contains("not credited"),
            "{d}"
        );
    }
}

#[test]
fn a_resumed_run_keeps_the_portfolio_it_had() {
    let (_a, dir) = knob_repo();
    append_spec(
        &dir,
        "\n[outer]\nmechanisms = [\"tabu\", \"bandit\", \"explore\", \"plateau\"]\nsegment = 4\nportfolio = true\n",
    );
    // Segments end at #3, #7 and #11; the second session starts at #10, mid-segment.
    let out = hone_in(&dir, &["run", "--tag", "p", "--seed", "3", "-n", "10"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = hone_in(&dir, &["run", "--tag", "p", "-n", "14"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("outer: portfolio: restored from the record of 10 experiment(s) (2 segment(s) credited)"),
        "{}",
        text(&out)
    );
    let store = hone::store::Store::open(&dir.join(".hone/hone.db")).unwrap();
    let run = store.latest_run().unwrap().unwrap();
    let on = |n: u64| -> Vec<String> {
        store
            .mechanism_calls(run.id, Some(n))
            .unwrap()
            .into_iter()
            .filter(|c| c.hook == "candidates")
            .map(|c| c.mechanism)
            .collect()
    };
    // Every mechanism on is asked for candidates: the same half of them runs on both sides
    // of the resume within a segment.
    assert_eq!(on(8).len(), 2, "{:?}", on(8));
    assert_eq!(on(10), on(8));
    assert_eq!(on(11), on(9));
    // Those switched off rebuild from the history too, for when they are switched on again.
    let started: Vec<String> = store
        .mechanism_calls(run.id, Some(10))
        .unwrap()
        .into_iter()
        .filter(|c| c.hook == "on_start")
        .map(|c| c.mechanism)
        .collect();
    for m in ["tabu", "bandit", "explore", "plateau"] {
        assert!(started.iter().any(|s| s == m), "{m}: {started:?}");
    }
}

#[test]
fn an_llm_revises_the_strategy_and_an_invalid_answer_changes_nothing() {
    let knob = |changes: &str| Reply::Answer(format!("{{\"changes\": {changes}}}"), 10, 10);
    let strategy = |json: &str| Reply::Answer(json.to_string(), 100, 50);
    let server = LlmServer::start(
        vec![
            knob("{\"LR\": 0.05}"),
            knob("{\"DEPTH\": 5}"),
            strategy("{\"mode\": \"explore\", \"frozen\": [\"LR\"], \"guidance\": \"vary DEPTH widely\", \"step_scale\": 2}"),
            knob("{\"DEPTH\": 6}"),
            knob("{\"DEPTH\": 7}"),
            strategy("{\"mode\": \"exploit\", \"frozen\": [], \"guidance\": \"x\", \"step_scale\": 99}"),
            knob("{\"DEPTH\": 3}"),
        ],
        false,
    );
    let r = Repo::new("", SCORE, "");
    std::fs::write(
        r.dir.join("params.txt"),
        "LR = 0.1  # hone: log 1e-3..1\nDEPTH = 4  # hone: int 1..8\n",
    )
    .unwrap();
    let verify = "python3 -c \\\"import re; t = open('params.txt').read(); lr = float(re.search(r'LR = ([0-9.e-]+)', t).group(1)); d = int(re.search(r'DEPTH = (\\\\d+)', t).group(1)); print('score:', abs(lr - 0.01) * 100 + abs(d - 6))\\\"";
    let toml = format!(
        "[loop]\neditable = [\"params.txt\"]\n\n[verify]\ncommand = \"{verify}\"\nmetric = \"score\"\n\n[agent]\nkind = \"openai\"\nmodel = \"m\"\nbase_url = \"{}/v1\"\nedit_mode = \"knobs\"\n\n[stop]\nmax_experiments = 6\n\n[outer]\nstrategy_every = 2\n",
        server.url
    );
    std::fs::write(r.dir.join("hone.toml"), toml).unwrap();
    git(&r.dir, &["add", "-A"]);
    git(&r.dir, &["commit", "-q", "-m", "knobs"]);
    let out = r.hone(&["run"]);
    assert!(out.status.success(), "{}", text(&out));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 7, "five proposals and two strategy questions");
    let body = |i: usize| -> String {
        let v: serde_json::Value = serde_json::from_str(&reqs[i].2).unwrap();
        v["messages"][1]["content"].as_str().unwrap().to_string()
    };
    let question = body(2);
    assert!(question.contains("Current strategy"), "{question}");
    assert!(
        question.contains("| 2 | "),
        "the trace is shown: {question}"
    );
    // The valid answer steers the next proposals' prompt.
    let next = body(3);
    assert!(
        next.contains("Guidance from hone's search mechanisms"),
        "{next}"
    );
    assert!(next.contains("strategy: vary DEPTH widely"), "{next}");
    assert!(next.contains("Leave these unchanged: LR"), "{next}");
    let show3 = text(&r.hone(&["show", "3"]));
    assert!(
        show3.contains("strategy ask -> changed: strategy revised by the LLM: mode explore"),
        "{show3}"
    );
    // The invalid one is refused with its reason, and the strategy stays as it was.
    let show5 = text(&r.hone(&["show", "5"]));
    assert!(show5.contains("strategy ask -> ignored"), "{show5}");
    assert!(show5.contains("`step_scale` must be a number"), "{show5}");
    assert!(
        body(6).contains("strategy: vary DEPTH widely"),
        "{}",
        body(6)
    );
    // The question's tokens are charged to the experiment it was asked for.
    let log = r.log();
    assert_eq!(log[1]["tokens"], 20);
    assert_eq!(log[3]["tokens"], 170);
}

#[test]
fn a_resumed_run_restarts_its_mechanisms_from_the_recorded_history() {
    let (_a, dir) = knob_repo();
    append_spec(
        &dir,
        "\n[outer]\nmechanisms = [\"tabu\", \"plateau\"]\nstrategy_every = 5\n",
    );
    let out = hone_in(&dir, &["run", "--tag", "r", "--seed", "7", "-n", "10"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = hone_in(&dir, &["run", "--tag", "r", "-n", "14"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(log_lines(&dir).len(), 14);
    let stats = mech_stats(&dir);
    assert_eq!(stats["tabu"]["calls"]["on_start"], 2, "{}", stats["tabu"]);
    // The strategy revised at #5 is back for the first experiment of the new session.
    let show = text(&hone_in(&dir, &["show", "10"]));
    assert!(
        show.contains("strategy before_propose -> guided: step x"),
        "{show}"
    );
}

/// A run with keeps at #1 and #3 (score 5 -> 4 -> 3) and a discard at #2, plus a bare
/// repository on disk standing in for GitHub: `origin` fetches from a github.com URL (which
/// names the owner and repository) and pushes to the bare repository through `pushurl`, as a
/// user's own remote configuration would.
fn finalize_repo() -> (Repo, PathBuf) {
    let r = Repo::new(
        "[stop]\nmax_experiments = 4\n",
        SCORE,
        "write\tvalue.txt\tscore: 4\\n\nhypothesis\tlower is better\n---\nwrite\tvalue.txt\tscore: 7\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\nhypothesis\tlower still\n",
    );
    let out = r.hone(&["run", "--tag", "t1"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(r.statuses(), ["baseline", "keep", "discard", "keep"]);
    let bare = r.tmp_dir().join("remote.git");
    git(
        r.tmp_dir(),
        &["init", "-q", "--bare", bare.to_str().unwrap()],
    );
    git(
        &r.dir,
        &[
            "remote",
            "add",
            "origin",
            "https://github.com/acme/widgets.git",
        ],
    );
    git(
        &r.dir,
        &[
            "remote",
            "set-url",
            "--push",
            "origin",
            bare.to_str().unwrap(),
        ],
    );
    (r, bare)
}

/// What the user's checkout looks like: HEAD, its branch, status, and the index's bytes.
fn checkout_state(r: &Repo) -> (String, String, String, Vec<u8>) {
    (
        r.rev("HEAD"),
        git(&r.dir, &["symbolic-ref", "HEAD"]),
        git(&r.dir, &["status", "--porcelain"]),
        std::fs::read(r.dir.join(".git/index")).unwrap(),
    )
}

fn hone_env(r: &Repo, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(HONE);
    c.args(args)
        .current_dir(&r.dir)
        .env_remove("GITHUB_TOKEN")
        .env_remove("GITHUB_API_URL");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

#[test]
fn finalize_pushes_one_commit_per_keep_and_opens_a_pull_request() {
    let (r, bare) = finalize_repo();
    // A user mid-work: a staged edit and an unstaged one.
    std::fs::write(r.dir.join("prepare.py"), "# staged\n").unwrap();
    git(&r.dir, &["add", "prepare.py"]);
    std::fs::write(r.dir.join("value.txt"), "score: 99\n").unwrap();
    let before = checkout_state(&r);
    let api = LlmServer::start(
        vec![Reply::Status(
            201,
            Vec::new(),
            r#"{"number": 42, "html_url": "https://github.com/acme/widgets/pull/42"}"#.into(),
        )],
        false,
    );
    let out = hone_env(
        &r,
        &["finalize", "--run", "t1", "--pr"],
        &[("GITHUB_TOKEN", "ghp_test"), ("GITHUB_API_URL", &api.url)],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("opened pull request #42: https://github.com/acme/widgets/pull/42"),
        "{}",
        text(&out)
    );
    // The user's branch, index and working tree are as they were.
    assert_eq!(checkout_state(&r), before);
    assert_eq!(
        std::fs::read_to_string(r.dir.join("value.txt")).unwrap(),
        "score: 99\n"
    );
    // The pushed branch: base <- keep #1 <- keep #3, each with the keep's exact tree.
    let head = git(&bare, &["rev-parse", "refs/heads/hone/t1-final"]);
    assert_eq!(head, r.rev("hone/t1-final"));
    let tree = |rev: &str, dir: &Path| git(dir, &["rev-parse", &format!("{rev}^{{tree}}")]);
    assert_eq!(tree(&head, &bare), tree("refs/hone/t1/3", &r.dir));
    assert_eq!(
        tree(&format!("{head}^"), &bare),
        tree("refs/hone/t1/1", &r.dir)
    );
    assert_eq!(
        git(&bare, &["rev-parse", &format!("{head}~2")]),
        r.rev("main")
    );
    let messages = git(
        &bare,
        &["log", "--format=%B%x00", &format!("{head}~2..{head}")],
    );
    let messages: Vec<&str> = messages
        .split('\0')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(
        messages[0]
            .starts_with("lower still\n\nscore: 4.000000 → 3.000000 (delta -1.000000, better)"),
        "{}",
        messages[0]
    );
    assert!(
        messages[1]
            .starts_with("lower is better\n\nscore: 5.000000 → 4.000000 (delta -1.000000, better)"),
        "{}",
        messages[1]
    );
    assert!(messages[1].contains("Hone-Experiment: 1"));
    // The request GitHub got.
    let reqs = api.requests();
    assert_eq!(reqs.len(), 1);
    let (path, headers, body) = &reqs[0];
    assert_eq!(path, "/repos/acme/widgets/pulls");
    let header = |k: &str| {
        headers
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    };
    assert_eq!(header("authorization"), "Bearer ghp_test");
    assert_eq!(header("accept"), "application/vnd.github+json");
    assert_eq!(header("x-github-api-version"), "2022-11-28");
    let json: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(json["head"], "hone/t1-final");
    assert_eq!(json["base"], "main");
    assert_eq!(
        json["title"],
        "hone run t1: score 5.000000 → 3.000000 (-40.00%)"
    );
    let body = json["body"].as_str().unwrap();
    assert!(
        body.contains("**baseline → best**: 5.000000 → 3.000000"),
        "{body}"
    );
    assert!(body.contains("## Top improvements"), "{body}");
    assert!(body.contains("## Progress\n\n```text\n"), "{body}");
    assert!(
        !body.contains("progress.svg"),
        "no image GitHub cannot show: {body}"
    );
}

#[test]
fn finalize_squash_makes_one_commit_with_the_last_keeps_tree() {
    let (r, _bare) = finalize_repo();
    let before = checkout_state(&r);
    let out = r.hone(&["finalize", "--squash", "--branch", "review/t1"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(checkout_state(&r), before);
    assert_eq!(r.rev("review/t1^{tree}"), r.rev("refs/hone/t1/3^{tree}"));
    assert_eq!(r.rev("review/t1^"), r.rev("main"));
    let msg = git(&r.dir, &["log", "-1", "--format=%B", "review/t1"]);
    assert!(
        msg.starts_with("hone run t1: score: 5.000000 → 3.000000 (delta -2.000000, better)"),
        "{msg}"
    );
    assert!(
        msg.contains("- #1 lower is better: score: 5.000000 → 4.000000"),
        "{msg}"
    );
    assert!(
        msg.contains("- #3 lower still: score: 4.000000 → 3.000000"),
        "{msg}"
    );
    // Never overwritten.
    let again = r.hone(&["finalize", "--squash", "--branch", "review/t1"]);
    assert!(!again.status.success());
    assert!(
        text(&again).contains("branch review/t1 already exists"),
        "{}",
        text(&again)
    );
}

#[test]
fn finalize_errors_say_what_to_do_and_push_nothing() {
    let (r, bare) = finalize_repo();
    let pushed = || git(&bare, &["for-each-ref"]);
    // No token.
    let out = hone_env(&r, &["finalize", "--pr"], &[]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("GITHUB_TOKEN is not set"),
        "{}",
        text(&out)
    );
    // A remote that is not on GitHub.
    git(&r.dir, &["remote", "add", "disk", bare.to_str().unwrap()]);
    let out = hone_env(
        &r,
        &["finalize", "--pr", "--remote", "disk"],
        &[("GITHUB_TOKEN", "t")],
    );
    assert!(!out.status.success());
    assert!(
        text(&out).contains("is not a GitHub repository"),
        "{}",
        text(&out)
    );
    assert_eq!(pushed(), "", "nothing is pushed before the checks pass");
    assert!(git(&r.dir, &["branch", "--list", "hone/t1-final"]).is_empty());
    // GitHub's own message comes through.
    let api = LlmServer::start(
        vec![Reply::Status(
            422,
            Vec::new(),
            r#"{"message": "Validation Failed", "errors": [{"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for acme:hone/t1-final."}]}"#.into(),
        )],
        false,
    );
    let out = hone_env(
        &r,
        &["finalize", "--pr"],
        &[("GITHUB_TOKEN", "t"), ("GITHUB_API_URL", &api.url)],
    );
    assert!(!out.status.success());
    assert!(
        text(&out).contains("GitHub refused the pull request (HTTP 422): Validation Failed: A pull request already exists for acme:hone/t1-final."),
        "{}",
        text(&out)
    );
    // A run with nothing kept.
    let r = Repo::new(
        "[stop]\nmax_experiments = 2\n",
        SCORE,
        "write\tvalue.txt\tscore: 9\\n\n",
    );
    assert!(r.hone(&["run", "--tag", "flat"]).status.success());
    let out = r.hone(&["finalize"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("run `flat` has no kept experiments"),
        "{}",
        text(&out)
    );
}

const KEEPS_SCRIPT: &str = "write\tvalue.txt\tscore: 4\\n\nhypothesis\tlower is better\n---\nwrite\tvalue.txt\tscore: 7\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\nhypothesis\tlower still\n";

/// A 127.0.0.1 port where nothing listens (connection refused).
fn dead_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", l.local_addr().unwrap());
    drop(l);
    url
}

fn bodies(server: &LlmServer) -> Vec<serde_json::Value> {
    server
        .requests()
        .iter()
        .map(|(path, _, body)| {
            assert_eq!(path, "/hook");
            serde_json::from_str(body).unwrap()
        })
        .collect()
}

#[test]
fn notifications_reach_slack_and_json_endpoints_on_keep_and_finish() {
    let ok = || Reply::Status(200, Vec::new(), "ok".into());
    let slack = LlmServer::start(vec![ok()], false);
    let json = LlmServer::start(vec![ok()], false);
    let r = Repo::new(
        &format!(
            "[stop]\nmax_experiments = 4\n\n[[notify]]\nurl = \"{}/hook\"\nformat = \"slack\"\non = [\"keep\", \"finish\"]\n\n\
             [[notify]]\nurl_env = \"TEST_HOOK_URL\"\non = [\"finish\", \"keep\", \"failure\"]\n",
            slack.url
        ),
        SCORE,
        KEEPS_SCRIPT,
    );
    let out = hone_env(
        &r,
        &["run", "--tag", "n1"],
        &[("TEST_HOOK_URL", &format!("{}/hook", json.url))],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains("not delivered"), "{}", text(&out));
    // Everything queued was delivered before `hone run` returned.
    let s = bodies(&slack);
    assert_eq!(s.len(), 3, "two keeps and the finish: {s:?}");
    for b in &s {
        assert_eq!(b.as_object().unwrap().len(), 1, "slack gets only text: {b}");
    }
    assert_eq!(
        s[0]["text"],
        "hone run n1: kept #1 \"lower is better\": score 5.000000 → 4.000000 (baseline 5.000000)"
    );
    assert!(
        s[1]["text"]
            .as_str()
            .unwrap()
            .contains("kept #3 \"lower still\": score 4.000000 → 3.000000"),
        "{s:?}"
    );
    assert_eq!(
        s[2]["text"],
        "hone run n1 finished: reached max_experiments (4); score 5.000000 → 3.000000 (-40.00%), 4 experiments, 2 kept"
    );
    let j = bodies(&json);
    assert_eq!(j.len(), 3, "{j:?}");
    assert_eq!(j[0]["event"], "keep");
    assert_eq!(j[0]["run"], "n1");
    assert_eq!(j[0]["experiment"], 1);
    assert_eq!(j[0]["value"], 4.0);
    assert_eq!(j[0]["previous_best"], 5.0);
    assert_eq!(j[0]["commit"], r.rev("refs/hone/n1/1"));
    assert_eq!(j[2]["event"], "finish");
    assert_eq!(j[2]["reason"], "reached max_experiments (4)");
    assert_eq!(j[2]["summary"]["best"], 3.0);
    assert_eq!(j[2]["summary"]["experiments"], 4);
}

#[test]
fn a_dead_notification_endpoint_is_given_up_on_and_changes_nothing() {
    let plain = Repo::new("[stop]\nmax_experiments = 4\n", SCORE, KEEPS_SCRIPT);
    assert!(plain.hone(&["run", "--tag", "d"]).status.success());
    let r = Repo::new(
        &format!(
            "[stop]\nmax_experiments = 4\n\n[[notify]]\nurl = \"{}\"\nretries = 2\nbackoff = \"10ms\"\n",
            dead_url()
        ),
        SCORE,
        KEEPS_SCRIPT,
    );
    let out = r.hone(&["run", "--tag", "d"]);
    assert!(out.status.success(), "{}", text(&out));
    let strip = |log: Vec<serde_json::Value>| -> Vec<(String, String)> {
        log.iter()
            .map(|e| (e["status"].to_string(), e["objective"].to_string()))
            .collect()
    };
    assert_eq!(
        strip(r.log()),
        strip(plain.log()),
        "the same run as without notifications"
    );
    // Each of the three messages (two keeps, the finish) was tried 3 times, then given up on,
    // said so, and recorded in the run's event log.
    let said = text(&out);
    assert_eq!(
        said.matches("was not delivered after 3 attempts").count(),
        3,
        "{said}"
    );
    assert!(
        !said.contains("/hook"),
        "the URL (a secret) is never printed: {said}"
    );
    let store = hone::store::Store::open(&r.dir.join(".hone/hone.db")).unwrap();
    let run = store.run_by_tag("d").unwrap().unwrap();
    let failed: Vec<serde_json::Value> = store
        .events(run.id)
        .unwrap()
        .into_iter()
        .filter(|(_, kind, _)| kind == "notify_failed")
        .map(|(_, _, data)| serde_json::from_str(&data).unwrap())
        .collect();
    assert_eq!(failed.len(), 3, "{failed:?}");
    assert_eq!(failed[0]["on"], "keep");
    assert_eq!(failed[0]["attempts"], 3);
    assert!(
        failed[2]["error"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("refused"),
        "{failed:?}"
    );
}

#[test]
fn a_notification_answered_500_is_retried_and_delivered_once() {
    let hook = LlmServer::start(
        vec![
            Reply::Status(500, Vec::new(), "busy".into()),
            Reply::Status(200, Vec::new(), "ok".into()),
        ],
        false,
    );
    let r = Repo::new(
        &format!(
            "[stop]\nmax_experiments = 10\nmax_consecutive_failures = 2\n\n[[notify]]\nurl = \"{}/hook\"\non = [\"failure\", \"finish\"]\nbackoff = \"10ms\"\n",
            hook.url
        ),
        SCORE,
        "say\tno idea\n",
    );
    let out = r.hone(&["run", "--tag", "f"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(!text(&out).contains("not delivered"), "{}", text(&out));
    let b = bodies(&hook);
    assert_eq!(
        b.len(),
        2,
        "one 500, then the same message once more: {b:?}"
    );
    assert_eq!(b[0], b[1]);
    assert_eq!(b[1]["event"], "failure");
    assert!(
        b[1]["reason"]
            .as_str()
            .unwrap()
            .contains("2 failed experiments in a row"),
        "{b:?}"
    );
}

/// One HTTP/1.1 request to 127.0.0.1; returns the status and the body.
fn http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let status = resp.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = resp
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// `hone daemon` on a free port, its output lines arriving on a channel.
struct Daemon {
    child: std::process::Child,
    addr: String,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Daemon {
    fn start(r: &Repo, args: &[&str], env: &[(&str, &str)]) -> Daemon {
        Daemon::start_as("daemon", "listening on http://", r, args, env)
    }

    /// `hone <command>` (daemon or serve), whose first line naming `marker` gives the address.
    fn start_as(
        command: &str,
        marker: &str,
        r: &Repo,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Daemon {
        use std::io::BufRead;
        let mut c = Command::new(HONE);
        c.arg(command)
            .args(args)
            .current_dir(&r.dir)
            .env_remove("HONE_TOKEN")
            .env_remove("HONE_WEBHOOK_SECRET")
            .env_remove("GITHUB_TOKEN")
            .env_remove("GITHUB_API_URL")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit());
        for (k, v) in env {
            c.env(k, v);
        }
        let mut child = c.spawn().unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let mut d = Daemon {
            child,
            addr: String::new(),
            lines,
        };
        let first = d.wait_for(marker);
        d.addr = first
            .rsplit("http://")
            .next()
            .unwrap()
            .split(['/', ' '])
            .next()
            .unwrap()
            .to_string();
        d
    }

    /// The first output line containing `what` (waiting for it, with a generous deadline).
    fn wait_for(&self, what: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.contains(what) => return l,
                Ok(_) => {}
                Err(e) => panic!("hone daemon never said `{what}`: {e}"),
            }
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const HOOK_SECRET: &str = "webhook-secret-for-tests";

fn signed(body: &str) -> String {
    hone::automation::signature::sign(HOOK_SECRET.as_bytes(), body.as_bytes())
}

#[test]
fn webhook_starts_a_signed_run_one_at_a_time() {
    // The first measurement waits on a FIFO, so the test decides when the run may go on.
    let tmp = tempfile::tempdir().unwrap();
    let gate = tmp.path().join("gate");
    let open = tmp.path().join("open");
    assert!(Command::new("mkfifo")
        .arg(&gate)
        .status()
        .unwrap()
        .success());
    let r = Repo::new(
        "",
        &format!(
            "if [ ! -e {open} ]; then read _ < {gate}; touch {open}; fi; cat value.txt",
            open = open.display(),
            gate = gate.display()
        ),
        "write\tvalue.txt\tscore: 4\\n\nhypothesis\tlower\n",
    );
    let d = Daemon::start(
        &r,
        &["--port", "0"],
        &[("HONE_WEBHOOK_SECRET", HOOK_SECRET)],
    );
    let body = r#"{"tag": "hook1", "max_experiments": 2}"#;
    // Unsigned, wrongly signed, or signed for another body: 401, and nothing starts.
    let (status, msg) = http(&d.addr, "POST", "/api/trigger", &[], body);
    assert_eq!(status, 401, "{msg}");
    assert!(msg.contains("missing X-Hub-Signature-256"), "{msg}");
    let wrong = hone::automation::signature::sign(b"not the secret", body.as_bytes());
    let (status, msg) = http(
        &d.addr,
        "POST",
        "/api/trigger",
        &[("X-Hub-Signature-256", &wrong)],
        body,
    );
    assert_eq!(status, 401, "{msg}");
    assert!(msg.contains("does not match"), "{msg}");
    let other = signed("{}");
    assert_eq!(
        http(
            &d.addr,
            "POST",
            "/api/trigger",
            &[("X-Hub-Signature-256", &other)],
            body
        )
        .0,
        401
    );
    assert!(!r.dir.join(".hone").exists(), "nothing ran");
    // Signed: accepted with the run's tag.
    let (status, msg) = http(
        &d.addr,
        "POST",
        "/api/trigger",
        &[("X-Hub-Signature-256", &signed(body))],
        body,
    );
    assert_eq!(status, 202, "{msg}");
    let accepted: serde_json::Value = serde_json::from_str(&msg).unwrap();
    assert_eq!(accepted["tag"], "hook1");
    // While it runs, another trigger is refused with 409 and says why.
    let again = r#"{"tag": "hook2"}"#;
    let (status, msg) = http(
        &d.addr,
        "POST",
        "/api/trigger",
        &[("X-Hub-Signature-256", &signed(again))],
        again,
    );
    assert_eq!(status, 409, "{msg}");
    assert!(msg.contains("run `hook1` is still in progress"), "{msg}");
    // Let the baseline measure; the run finishes on its own.
    std::fs::write(&gate, "go\n").unwrap();
    d.wait_for("run hook1 finished");
    assert_eq!(r.statuses(), ["baseline", "keep"]);
    let log = std::fs::read_to_string(r.dir.join(".hone/automation/hook1.log")).unwrap();
    assert!(log.contains("reached max_experiments (2)"), "{log}");
    let (status, msg) = http(&d.addr, "GET", "/api/automation", &[], "");
    assert_eq!(status, 200);
    let s: serde_json::Value = serde_json::from_str(&msg).unwrap();
    assert_eq!(s["job"]["tag"], "hook1");
    assert_eq!(s["job"]["run_exit"], 0);
    assert_eq!(s["busy"], serde_json::Value::Null);
}

#[test]
fn daemon_off_loopback_needs_a_token_and_checks_it() {
    let r = Repo::new("", SCORE, "");
    let out = Command::new(HONE)
        .args(["daemon", "--bind", "0.0.0.0", "--port", "0"])
        .current_dir(&r.dir)
        .env_remove("HONE_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("set HONE_TOKEN"), "{}", text(&out));
    let d = Daemon::start(
        &r,
        &["--bind", "0.0.0.0", "--port", "0"],
        &[("HONE_TOKEN", "tok-123")],
    );
    let port = d.addr.rsplit(':').next().unwrap();
    let local = format!("127.0.0.1:{port}");
    assert_eq!(http(&local, "GET", "/api/automation", &[], "").0, 401);
    assert_eq!(
        http(
            &local,
            "GET",
            "/api/automation",
            &[("Authorization", "Bearer nope")],
            ""
        )
        .0,
        401
    );
    assert_eq!(
        http(
            &local,
            "GET",
            "/api/automation",
            &[("Authorization", "Bearer tok-123")],
            ""
        )
        .0,
        200
    );
    // Without a secret the trigger is off, and says how to turn it on.
    let (status, msg) = http(&local, "POST", "/api/trigger", &[], "{}");
    assert_eq!(status, 503, "{msg}");
    assert!(msg.contains("HONE_WEBHOOK_SECRET"), "{msg}");
}

/// The unattended path end to end: a signed trigger (what a schedule also does) runs the loop,
/// finalizes it into a pull request, and a Slack-format endpoint hears of the keeps and the end.
#[test]
fn a_triggered_run_opens_a_pull_request_and_notifies_with_no_one_at_the_keyboard() {
    let ok = Reply::Status(200, Vec::new(), "ok".into());
    let slack = LlmServer::start(vec![ok], false);
    let api = LlmServer::start(
        vec![Reply::Status(
            201,
            Vec::new(),
            r#"{"number": 7, "html_url": "https://github.com/acme/widgets/pull/7"}"#.into(),
        )],
        false,
    );
    let r = Repo::new(
        &format!(
            "[[notify]]\nurl = \"{}/hook\"\nformat = \"slack\"\non = [\"keep\", \"finish\"]\n",
            slack.url
        ),
        SCORE,
        KEEPS_SCRIPT,
    );
    let bare = r.tmp_dir().join("remote.git");
    git(
        r.tmp_dir(),
        &["init", "-q", "--bare", bare.to_str().unwrap()],
    );
    git(
        &r.dir,
        &["remote", "add", "origin", "git@github.com:acme/widgets.git"],
    );
    git(
        &r.dir,
        &[
            "remote",
            "set-url",
            "--push",
            "origin",
            bare.to_str().unwrap(),
        ],
    );
    let d = Daemon::start(
        &r,
        &["--port", "0"],
        &[
            ("HONE_WEBHOOK_SECRET", HOOK_SECRET),
            ("GITHUB_TOKEN", "ghp_nightly"),
            ("GITHUB_API_URL", &api.url),
        ],
    );
    let body = r#"{"tag": "night", "max_experiments": 4, "pr": true}"#;
    let (status, msg) = http(
        &d.addr,
        "POST",
        "/api/trigger",
        &[("X-Hub-Signature-256", &signed(body))],
        body,
    );
    assert_eq!(status, 202, "{msg}");
    d.wait_for("run night finished and was finalized");
    assert_eq!(r.statuses(), ["baseline", "keep", "discard", "keep"]);
    assert_eq!(
        git(&bare, &["rev-parse", "refs/heads/hone/night-final^{tree}"]),
        r.rev("refs/hone/night/3^{tree}")
    );
    let reqs = api.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].0, "/repos/acme/widgets/pulls");
    let texts: Vec<String> = bodies(&slack)
        .iter()
        .map(|b| b["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(texts.len(), 3, "{texts:?}");
    assert!(texts[2].starts_with("hone run night finished"), "{texts:?}");
    let log = std::fs::read_to_string(r.dir.join(".hone/automation/night.log")).unwrap();
    assert!(log.contains("opened pull request #7"), "{log}");
}

/// A notification endpoint that answers nothing until the run it hears from has stopped (as
/// the store says), then 200 to everything. Were notifications sent from the loop itself, the
/// first keep would wait for an answer that only comes after the run's end: the run would
/// never end, and the delivery would time out.
#[test]
fn a_notification_endpoint_that_holds_its_answer_never_holds_up_the_loop() {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let r = Repo::new(
        &format!("[stop]\nmax_experiments = 4\n\n[[notify]]\nurl = \"{url}\"\ntimeout = \"60s\"\nretries = 0\n"),
        SCORE,
        KEEPS_SCRIPT,
    );
    let db = r.dir.join(".hone/hone.db");
    let server = std::thread::spawn(move || {
        let mut events = Vec::new();
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut len = 0;
            loop {
                let mut h = String::new();
                reader.read_line(&mut h).unwrap();
                if h.trim().is_empty() {
                    break;
                }
                if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; len];
            reader.read_exact(&mut body).unwrap();
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
            // Hold the answer until the run is recorded as stopped.
            let deadline = Instant::now() + Duration::from_secs(120);
            loop {
                let stopped = hone::store::Store::open(&db)
                    .ok()
                    .and_then(|s| s.run_by_tag("hold").ok().flatten())
                    .is_some_and(|run| run.state == "stopped");
                if stopped {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the run never stopped while a notification waited"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            events.push(body["event"].as_str().unwrap().to_string());
            if events.len() == 3 {
                return events;
            }
        }
        events
    });
    let out = r.hone(&["run", "--tag", "hold"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains("not delivered"), "{}", text(&out));
    assert_eq!(r.statuses(), ["baseline", "keep", "discard", "keep"]);
    assert_eq!(server.join().unwrap(), ["keep", "keep", "finish"]);
}

#[test]
fn a_budget_stop_is_notified_as_budget() {
    // $0.20 a call against $0.30: the second call could cross it and is never sent.
    let server = LlmServer::start(
        vec![Reply::Answer(
            edit("value.txt", "score: 5", "score: 4"),
            1000,
            1000,
        )],
        false,
    );
    let hook = LlmServer::start(vec![Reply::Status(200, Vec::new(), "ok".into())], false);
    let r = llm_repo(
        "openai",
        &server,
        "max_tokens = 100\nprice_in_per_mtok = 100\nprice_out_per_mtok = 100",
        &format!(
            "max_experiments = 10\nmax_cost_usd = 0.30\n\n[[notify]]\nurl = \"{}/hook\"\non = [\"budget\", \"finish\"]\n",
            hook.url
        ),
    );
    let out = hone_with_key(&r, &["run", "--tag", "b"]);
    assert!(out.status.success(), "{}", text(&out));
    let b = bodies(&hook);
    assert_eq!(b.len(), 1, "{b:?}");
    assert_eq!(b[0]["event"], "budget");
    assert!(
        b[0]["reason"].as_str().unwrap().starts_with("budget: "),
        "{b:?}"
    );
    assert!(
        b[0]["text"]
            .as_str()
            .unwrap()
            .starts_with("hone run b stopped on its budget: the next call could cost $"),
        "{b:?}"
    );
}

#[test]
fn hone_serve_takes_signed_triggers_beside_the_dashboard() {
    let r = Repo::new("", SCORE, "write\tvalue.txt\tscore: 4\\n\n");
    let d = Daemon::start_as(
        "serve",
        "hone serve: http://",
        &r,
        &["--port", "0"],
        &[("HONE_WEBHOOK_SECRET", HOOK_SECRET)],
    );
    d.wait_for("POST /api/trigger starts a run");
    let body = r#"{"tag": "viaserve", "max_experiments": 2}"#;
    let (status, msg) = http(&d.addr, "POST", "/api/trigger", &[], body);
    assert_eq!(status, 401, "{msg}");
    assert!(!r.dir.join(".hone").exists(), "nothing ran");
    let (status, msg) = http(
        &d.addr,
        "POST",
        "/api/trigger",
        &[("X-Hub-Signature-256", &signed(body))],
        body,
    );
    assert_eq!(status, 202, "{msg}");
    d.wait_for("run viaserve finished");
    assert_eq!(r.statuses(), ["baseline", "keep"]);
    // The dashboard beside it shows the run the trigger started.
    let (status, page) = http(&d.addr, "GET", "/", &[], "");
    assert_eq!(status, 200);
    assert!(page.contains("viaserve"), "{page}");
}

// ---- Level 2: generated mechanisms in a sandbox ----

/// A knob repository whose agent is the scripted LLM (knob edit mode), with `outer` appended.
fn research_repo(server: &LlmServer, outer: &str) -> (tempfile::TempDir, PathBuf) {
    research_repo_of("openai", &format!("{}/v1", server.url), outer)
}

fn research_repo_of(kind: &str, base_url: &str, outer: &str) -> (tempfile::TempDir, PathBuf) {
    let (tmp, dir) = knob_repo();
    append_spec(
        &dir,
        &format!(
            "\n[agent]\nkind = \"{kind}\"\nmodel = \"m\"\nbase_url = \"{base_url}\"\nedit_mode = \"knobs\"\n\n[outer]\n{outer}"
        ),
    );
    (tmp, dir)
}

fn knob_answer(changes: &str) -> Reply {
    Reply::Answer(format!("{{\"changes\": {changes}}}"), 10, 10)
}

/// The research rounds' answers: three of prose, then `code` as a Rhai block.
fn rounds_answering(code: &str) -> Vec<Reply> {
    vec![
        Reply::Answer("H1: from tabu search, forbid deep models.".into(), 100, 50),
        Reply::Answer(
            "Select H1: the trace shows deep models lose.".into(),
            100,
            50,
        ),
        Reply::Answer("Hooks: filter only.".into(), 100, 50),
        Reply::Answer(format!("Here it is:\n```rhai\n{code}\n```\n"), 100, 50),
    ]
}

fn request_text(server: &LlmServer, i: usize) -> String {
    let reqs = server.requests();
    let v: serde_json::Value = serde_json::from_str(&reqs[i].2).unwrap();
    v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

const DEEP_FILTER: &str = "fn filter(p, v) {\n    if type_of(p.config) != \"map\" { return (); }\n    if p.config.DEPTH > 10 { #{ reject: \"deep models never paid\" } } else { () }\n}";

#[test]
fn a_generated_mechanism_passes_the_ladder_is_stored_and_rejects_a_proposal() {
    let mut replies = vec![knob_answer("{\"DEPTH\": 12}")];
    replies.extend(rounds_answering(DEEP_FILTER));
    replies.extend([
        knob_answer("{\"DEPTH\": 15}"),
        knob_answer("{\"DEPTH\": 6}"),
        knob_answer("{\"WIDTH\": 8}"),
    ]);
    let server = LlmServer::start(replies, false);
    let (_t, dir) = research_repo(
        &server,
        "mechanisms = [\"tabu\"]\nresearch_every = 2\nprobation = 10\n",
    );
    let out = hone_in(&dir, &["run", "-n", "5"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(server.requests().len(), 8, "one proposal each, four rounds");
    // The rounds saw the real trace, the interface and the active mechanisms' statistics.
    let round1 = request_text(&server, 1);
    assert!(round1.contains("Round 1 of 4: explore"), "{round1}");
    assert!(round1.contains("| 1 | discard |"), "{round1}");
    assert!(round1.contains("fn filter(proposal, view)"), "{round1}");
    assert!(round1.contains("- tabu: 2 experiments"), "{round1}");
    let round4 = request_text(&server, 4);
    assert!(
        round4.contains("Your answer in round 3\n\nHooks: filter only."),
        "{round4}"
    );
    // Stored with its provenance.
    let stored: Vec<PathBuf> = std::fs::read_dir(dir.join(".hone/mechanisms"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let script = stored
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "rhai"))
        .expect("a stored script");
    assert_eq!(std::fs::read_to_string(script).unwrap(), DEEP_FILTER);
    let sidecar: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(script.with_extension("json")).unwrap())
            .unwrap();
    assert_eq!(sidecar["experiment"], 2);
    assert_eq!(sidecar["model"], "m");
    assert_eq!(sidecar["rounds"].as_array().unwrap().len(), 4);
    assert!(sidecar["run"].as_str().is_some_and(|r| !r.is_empty()));
    let hash = script.file_stem().unwrap().to_str().unwrap();
    let name = format!("script:{}", &hash[..8]);
    // The ladder on record, then its filter at work: DEPTH 15 is never verified.
    let show2 = text(&hone_in(&dir, &["show", "2"]));
    for step in [
        "research -> passed: compile: ok (hooks filter)",
        "research -> passed: contract: ok",
        "research -> passed: replay: of 1 past proposals it would have rejected 1",
        "research -> activated: activated on probation for 10 experiments (from #2)",
        "filter -> rejected: `",
    ] {
        assert!(show2.contains(&format!("{name} {step}")), "{step}\n{show2}");
    }
    assert!(show2.contains("deep models never paid"), "{show2}");
    let log = hone_log(&dir);
    let st: Vec<&str> = log.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(st[2], "rejected", "{log:?}");
    assert_eq!(st[3], "keep", "{log:?}");
    // The research calls were charged to experiment 2.
    assert_eq!(log[2]["tokens"], 4 * 150 + 20);
    let stats = text(&hone_in(&dir, &["mech", "stats"]));
    assert!(stats.contains(&format!("{name}:")), "{stats}");
    assert!(stats.contains("#2 activated"), "{stats}");
    let json = text(&hone_in(&dir, &["mech", "stats", "--json"]));
    let me: serde_json::Value = json
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["name"] == name.as_str())
        .expect("the script's statistics");
    assert_eq!(me["rejected"], 1);
    assert_eq!(me["calls"]["filter"], 3, "it ran on experiments 2, 3 and 4");
}

fn hone_log(dir: &Path) -> Vec<serde_json::Value> {
    let out = hone_in(dir, &["log", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_script_that_does_not_compile_gets_one_repair_round_then_is_dropped() {
    let mut replies = vec![knob_answer("{\"DEPTH\": 12}")];
    replies.extend(rounds_answering("fn filter(p, v) { let }"));
    replies.push(Reply::Answer(
        "Fixed:\n```rhai\nfn filter(p, v) { ((( }\n```".into(),
        100,
        50,
    ));
    replies.push(knob_answer("{\"DEPTH\": 6}"));
    let server = LlmServer::start(replies, false);
    let (_t, dir) = research_repo(&server, "research_every = 2\n");
    let out = hone_in(&dir, &["run", "-n", "3"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        server.requests().len(),
        7,
        "a proposal, four rounds, exactly one repair, a proposal"
    );
    let repair = request_text(&server, 5);
    assert!(repair.contains("does not compile"), "{repair}");
    assert!(repair.contains("fn filter(p, v) { let }"), "{repair}");
    assert!(repair.contains("line 1"), "the error is quoted: {repair}");
    let show2 = text(&hone_in(&dir, &["show", "2"]));
    assert!(show2.contains("asking for one repair"), "{show2}");
    assert!(show2.contains("compile after repair:"), "{show2}");
    assert!(show2.contains("; dropped"), "{show2}");
    assert!(!show2.contains("activated"), "{show2}");
    assert!(!dir.join(".hone/mechanisms").exists(), "nothing is stored");
    let st: Vec<String> = hone_log(&dir)
        .iter()
        .map(|e| e["status"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(st, ["baseline", "discard", "keep"]);
}

#[test]
fn a_script_that_loops_forever_is_stopped_by_its_sandbox_and_the_run_goes_on() {
    // It passes the ladder (synthetic histories and the replay never reach the loop) and
    // loops once the live run has three experiments.
    let looping = "fn before_propose(v) {\n    let h = v.history;\n    if h.len() >= 3 && h[h.len() - 1].description.contains(\"synthetic\") == false { loop { } }\n    ()\n}";
    let mut replies = vec![knob_answer("{\"DEPTH\": 12}")];
    replies.extend(rounds_answering(looping));
    replies.extend([
        knob_answer("{\"DEPTH\": 6}"),
        knob_answer("{\"WIDTH\": 8}"),
        knob_answer("{\"WIDTH\": 10}"),
    ]);
    let server = LlmServer::start(replies, false);
    let (_t, dir) = research_repo(&server, "research_every = 2\nprobation = 10\n");
    let out = hone_in(&dir, &["run", "-n", "5"]);
    assert!(out.status.success(), "{}", text(&out));
    let show3 = text(&hone_in(&dir, &["show", "3"]));
    assert!(
        show3.contains(
            "before_propose -> deactivated: stopped and deactivated: `before_propose`: stopped"
        ),
        "{show3}"
    );
    assert!(
        show3.contains("deadline") || show3.contains("operations"),
        "{show3}"
    );
    let log = hone_log(&dir);
    let st: Vec<&str> = log.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(
        st,
        ["baseline", "discard", "keep", "keep", "keep"],
        "{log:?}"
    );
    let json = text(&hone_in(&dir, &["mech", "stats", "--json"]));
    let script = json
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["name"].as_str().is_some_and(|n| n.starts_with("script:")))
        .expect("the script's statistics");
    assert_eq!(
        script["calls"]["before_propose"], 2,
        "called at #2 and #3, never after the stop"
    );
}

#[test]
fn an_inert_generated_mechanism_is_reverted_after_its_probation() {
    let inert = "fn on_result(o, v) { this.seen = (this.seen ?? 0) + 1; () }";
    let mut replies = vec![knob_answer("{\"DEPTH\": 12}")];
    replies.extend(rounds_answering(inert));
    replies.extend([
        knob_answer("{\"DEPTH\": 6}"),
        knob_answer("{\"WIDTH\": 8}"),
        knob_answer("{\"WIDTH\": 10}"),
    ]);
    let server = LlmServer::start(replies, false);
    let (_t, dir) = research_repo(&server, "research_every = 2\nprobation = 1\n");
    let out = hone_in(&dir, &["run", "-n", "4"]);
    assert!(out.status.success(), "{}", text(&out));
    let show2 = text(&hone_in(&dir, &["show", "2"]));
    assert!(
        show2.contains("research -> deactivated: reverted after probation: inert: no effect over its probation of 1 experiments"),
        "{show2}"
    );
    let json = text(&hone_in(&dir, &["mech", "stats", "--json"]));
    let script = json
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["name"].as_str().is_some_and(|n| n.starts_with("script:")))
        .expect("the script's statistics");
    assert_eq!(
        script["calls"]["on_result"], 1,
        "not called after the revert"
    );
}

#[test]
fn mechanism_research_stays_inside_the_budget() {
    // Every answer reports 1000 + 1000 tokens: $0.20 a call at $100 per million. The research
    // rounds' prompts are long, so their worst case is reserved before each is sent.
    let mut replies = vec![Reply::Answer(
        "{\"changes\": {\"DEPTH\": 12}}".into(),
        1000,
        1000,
    )];
    for _ in 0..4 {
        replies.push(Reply::Answer(
            format!("```rhai\n{DEEP_FILTER}\n```"),
            1000,
            1000,
        ));
    }
    let server = LlmServer::start(replies, false);
    let (_t, dir) = research_repo(&server, "research_every = 2\n");
    let spec = std::fs::read_to_string(dir.join("hone.toml")).unwrap();
    let spec = spec
        .replace(
            "edit_mode = \"knobs\"\n",
            "edit_mode = \"knobs\"\nmax_tokens = 100\nprice_in_per_mtok = 100\nprice_out_per_mtok = 100\n",
        )
        .replace("max_experiments = 15\n", "max_experiments = 15\nmax_cost_usd = 0.75\n");
    std::fs::write(dir.join("hone.toml"), spec).unwrap();
    let out = hone_in(&dir, &["run", "-n", "4"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("stopped: budget"), "{}", text(&out));
    let sent = server.requests().len();
    assert!(
        (2..5).contains(&sent),
        "the proposal and at least one research round, not all four: {sent}"
    );
    assert!(request_text(&server, sent - 1).contains(&format!("Round {} of 4", sent - 1)));
    let log = hone_log(&dir);
    let cost: f64 = log.iter().map(|e| e["cost_usd"].as_f64().unwrap()).sum();
    assert!(
        (cost - 0.2 * sent as f64).abs() < 1e-9 && cost <= 0.75,
        "every call sent was charged and the total is within the budget: {cost}"
    );
    assert!(
        (log[2]["cost_usd"].as_f64().unwrap() - 0.2 * (sent - 1) as f64).abs() < 1e-9,
        "the rounds are charged to the experiment in progress: {}",
        log[2]
    );
    assert!(
        log[2]["reason"].as_str().unwrap().starts_with("budget"),
        "{}",
        log[2]
    );
}

#[test]
fn a_stored_script_is_reused_by_path_and_validated_like_a_generated_one() {
    let (_t, dir) = knob_repo();
    std::fs::create_dir_all(dir.join("mech")).unwrap();
    // Suggests the optimum first; its `filter` rejects nothing.
    std::fs::write(
        dir.join("mech/aim.rhai"),
        "fn candidates(v) { if v.n == 1 { [#{ WIDTH: 13, DEPTH: 4 }] } else { [] } }",
    )
    .unwrap();
    std::fs::write(
        dir.join("mech/bad.rhai"),
        "fn candidates(v) { [#{ WIDTH: 99 }] }",
    )
    .unwrap();
    append_spec(
        &dir,
        "\n[outer]\nscripts = [\"mech/aim.rhai\", \"mech/bad.rhai\"]\nprobation = 3\n",
    );
    let out = hone_in(&dir, &["run", "-n", "3"]);
    assert!(out.status.success(), "{}", text(&out));
    let log = hone_log(&dir);
    assert_eq!(log[1]["status"], "keep", "{log:?}");
    assert_eq!(log[1]["objective"], 0.0, "{log:?}");
    let show1 = text(&hone_in(&dir, &["show", "1"]));
    assert!(
        show1.contains("research -> failed: contract: `candidates`"),
        "{show1}"
    );
    assert!(
        show1.contains("research -> passed: loaded from mech/aim.rhai"),
        "{show1}"
    );
    assert!(show1.contains("integer in 1..20"), "{show1}");
    assert!(
        show1.contains("candidates -> suggested: 1 candidate(s); one was proposed"),
        "{show1}"
    );
}

#[test]
fn mechanism_research_speaks_the_anthropic_wire_format_too() {
    let mut replies = vec![knob_answer("{\"DEPTH\": 12}")];
    replies.extend(rounds_answering(DEEP_FILTER));
    replies.extend([
        knob_answer("{\"DEPTH\": 15}"),
        knob_answer("{\"DEPTH\": 6}"),
    ]);
    let server = LlmServer::start(replies, true);
    let (_t, dir) = research_repo_of("anthropic", &server.url, "research_every = 2\n");
    let out = hone_in(&dir, &["run", "-n", "4"]);
    assert!(out.status.success(), "{}", text(&out));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 7);
    assert!(reqs[1].0.ends_with("/v1/messages"), "{}", reqs[1].0);
    let body: serde_json::Value = serde_json::from_str(&reqs[1].2).unwrap();
    assert!(
        body["system"]
            .as_str()
            .unwrap()
            .contains("research scientist"),
        "{body}"
    );
    let st: Vec<String> = hone_log(&dir)
        .iter()
        .map(|e| e["status"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(st, ["baseline", "discard", "rejected", "keep"]);
}

#[test]
fn a_generated_mechanism_that_acts_without_lowering_the_keep_rate_stays_after_probation() {
    let mut replies = vec![knob_answer("{\"DEPTH\": 12}")];
    replies.extend(rounds_answering(DEEP_FILTER));
    replies.extend([
        knob_answer("{\"DEPTH\": 15}"),
        knob_answer("{\"DEPTH\": 6}"),
    ]);
    let server = LlmServer::start(replies, false);
    let (_t, dir) = research_repo(&server, "research_every = 2\nprobation = 2\n");
    let out = hone_in(&dir, &["run", "-n", "4"]);
    assert!(out.status.success(), "{}", text(&out));
    // Window #2..#3: one rejection, one keep in two; the window before: no keep in one.
    let show3 = text(&hone_in(&dir, &["show", "3"]));
    assert!(
        show3.contains("research -> passed: probation: kept after probation: keep rate 0.50 per experiment against 0.00 before (1 effects)"),
        "{show3}"
    );
    assert!(
        text(&out).contains("kept after probation"),
        "{}",
        text(&out)
    );
}

#[test]
fn resume_kills_what_a_dead_hone_started_even_outside_the_agents_group() {
    let tmp = tempfile::tempdir().unwrap();
    let escaped = tmp.path().join("escaped-pid");
    // The agent starts a process in a session (and group) of its own, then works on: killing
    // the agent's group on resume would miss it; its HONE_JOB token does not.
    let r = Repo::new(
        "[stop]\nmax_experiments = 3\n",
        SCORE,
        &format!(
            "run\tsetsid sh -c 'echo $$ > {p}.tmp && mv {p}.tmp {p}; exec sleep 300' > /dev/null 2>&1 &\nsleep\t300\n---\nwrite\tvalue.txt\tscore: 3\\n\n",
            p = escaped.display()
        ),
    );
    let mut child = r.spawn_hone(&["run", "--tag", "e"]);
    let pid = read_pgid(&escaped);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        group_alive(pid),
        "the escaped process runs on after hone died"
    );
    let out = r.hone(&["run"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        wait_group_gone(pid),
        "resume must kill every process started for the interrupted experiment"
    );
    assert_eq!(r.statuses(), ["baseline", "aborted", "keep"]);
}

// ---- Parallel experiments ([exec] workers, slots) ----

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
    std::fs::write(r.dir.join("verify.sh"), verify).unwrap();
    for f in ["a.txt", "b.txt", "c.txt"] {
        std::fs::write(r.dir.join(f), "5\n").unwrap();
    }
    let toml = std::fs::read_to_string(r.dir.join("hone.toml"))
        .unwrap()
        .replace("editable = [\"value.txt\"]", "editable = [\"?.txt\"]")
        .replace(
            "protected = [\"prepare.py\"]",
            "protected = [\"prepare.py\", \"verify.sh\"]",
        )
        .replace("metric = \"score\"", "metric = \"loss\"");
    std::fs::write(r.dir.join("hone.toml"), toml).unwrap();
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

/// The branch is a straight line of keeps, and each keep was measured on exactly its code.
fn assert_linear_and_verified_on_final_code(r: &Repo, tag: &str, log: &Path) {
    let exps = r.log();
    let keeps: Vec<&serde_json::Value> = exps
        .iter()
        .filter(|e| matches!(e["status"].as_str(), Some("keep" | "baseline")))
        .collect();
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
fn parallel_keeps_merge_onto_a_moved_best_and_conflicts_are_discarded() {
    // Two workers. #1 keeps at once; #2 waits for that keep, beats its parent but not #1;
    // #3 (on #1) waits for #4 to be kept, then beats it and is merged onto it as #6;
    // #5 (on #4) waits for #6, beats it, and its change conflicts with #6's.
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
    let out = r.hone(&["run", "--tag", "p"]);
    assert!(out.status.success(), "{}", text(&out));
    let exps = r.log();
    let st: Vec<&str> = exps.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(
        st,
        ["baseline", "keep", "discard", "discard", "keep", "discard", "keep"],
        "{}",
        text(&out)
    );
    let reason = |n: usize| exps[n]["reason"].as_str().unwrap().to_string();
    assert!(
        reason(2).contains("beat its parent #0 but not the current best #1"),
        "{}",
        reason(2)
    );
    assert!(reason(3).contains("re-verified as #6"), "{}", reason(3));
    assert!(reason(5).starts_with("conflict:"), "{}", reason(5));
    assert!(reason(5).contains("c.txt"), "{}", reason(5));
    assert!(
        exps[6]["description"]
            .as_str()
            .unwrap()
            .starts_with("#3 on top of #4"),
        "{}",
        exps[6]
    );
    assert_eq!(exps[6]["objective"], -1.0, "a=1 b=0 c=-2, measured again");
    assert_eq!(r.rev("hone/p"), r.rev("refs/hone/p/6"));
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
    std::fs::write(
        dir.join("score.sh"),
        format!(
            "w=$(sed -n 's/^WIDTH = \\([0-9]*\\).*/\\1/p' params.txt)\nd=$(sed -n 's/^DEPTH = \\([0-9]*\\).*/\\1/p' params.txt)\necho \"$HONE_EXPERIMENT $w $d\" >> {}\necho \"loss: $(( (w-13)*(w-13) + (d-4)*(d-4) ))\"\n",
            log.display()
        ),
    )
    .unwrap();
    git(&dir, &["commit", "-qam", "log"]);
    let out = Command::new(HONE)
        .args([
            "run",
            "--tag",
            "k4",
            "--workers",
            "4",
            "--seed",
            "3",
            "-n",
            "24",
        ])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let lines = Command::new(HONE)
        .args(["log", "--json"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let exps: Vec<serde_json::Value> = String::from_utf8_lossy(&lines.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
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
    for k in exps.iter().filter(|e| e["status"] == "keep") {
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
    let tmp = tempfile::tempdir().unwrap();
    let marks = tmp.path().to_path_buf();
    // Candidates hang until `release` exists, after writing their process group.
    let verify = format!(
        "if [ \"$HONE_EXPERIMENT\" != 0 ] && [ ! -f {m}/release ]; then echo $$ > {m}/pgid.$HONE_EXPERIMENT; sleep 300; fi; cat value.txt",
        m = marks.display()
    );
    let script = (1..=12)
        .map(|i| format!("write\tvalue.txt\tscore: {}\\n\n", 100 - i))
        .collect::<Vec<_>>()
        .join("---\n");
    let r = Repo::new("[stop]\nmax_experiments = 9\n", &verify, &script);
    let mut child = r.spawn_hone(&["run", "--tag", "k", "--workers", "4"]);
    for n in 1..=4 {
        wait_for_file(&marks.join(format!("pgid.{n}")));
    }
    let status = r.hone(&["status"]);
    assert!(text(&status).contains("in flight: #1"), "{}", text(&status));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let pgids: Vec<i32> = (1..=4)
        .map(|n| read_pgid(&marks.join(format!("pgid.{n}"))))
        .collect();
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
    std::fs::write(slot.join("leftover.txt"), "from the crash").unwrap();
    std::fs::write(marks.join("release"), "").unwrap();
    let out = r.hone(&["run", "--workers", "4"]);
    assert!(out.status.success(), "{}", text(&out));
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
    assert_eq!(st.len(), 9, "{st:?}");
    assert_eq!(
        &st[..5],
        ["baseline", "aborted", "aborted", "aborted", "aborted"]
    );
    assert!(
        st[5..].iter().all(|s| matches!(*s, "keep" | "discard")),
        "{st:?}"
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
        "write\tvalue.txt\tscore: 4\\n\n",
    );
    let out = r.hone(&["run"]);
    assert!(!out.status.success());
    let t = text(&out);
    assert!(
        t.contains("exec.slots") && t.contains("3 workers but only 2 slots"),
        "{t}"
    );
    assert!(t.contains("hone.toml:17:"), "names the line: {t}");
    let toml = std::fs::read_to_string(r.dir.join("hone.toml"))
        .unwrap()
        .replace("workers = 3\n", "");
    std::fs::write(r.dir.join("hone.toml"), toml).unwrap();
    let out = r.hone(&["run", "--workers", "3"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("3 workers but only 2 slots"),
        "{}",
        text(&out)
    );
    let out = r.hone(&["run", "--workers", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

#[test]
fn parallel_verifier_that_moves_the_run_branch_is_a_violation() {
    // #1's verifier forges the branch. With two in flight, the move is caught when the next
    // result is decided (#1's or #2's: which verifier moved a shared ref cannot be told apart).
    let verify = "if grep -q forge value.txt; then git update-ref refs/heads/hone/v $(git commit-tree HEAD^{tree} -p HEAD -m forged); fi; echo score: 1";
    let r = Repo::new(
        "[stop]\nmax_experiments = 3\n",
        verify,
        "write\tvalue.txt\tforge\n\n---\nwrite\tvalue.txt\tplain\n\n",
    );
    let out = r.hone(&["run", "--tag", "v", "--workers", "2"]);
    assert!(out.status.success(), "{}", text(&out));
    let log = r.log();
    let caught: Vec<&serde_json::Value> =
        log.iter().filter(|e| e["status"] == "violation").collect();
    assert_eq!(caught.len(), 1, "{log:?}");
    assert!(
        caught[0]["reason"]
            .as_str()
            .unwrap()
            .contains("moved hone's refs"),
        "{:?}",
        caught[0]
    );
    assert_eq!(
        r.rev("hone/v"),
        r.rev("main"),
        "the forged branch was put back"
    );
}

#[test]
fn parallel_ctrl_c_once_lets_the_experiments_in_flight_finish() {
    let tmp = tempfile::tempdir().unwrap();
    let m = tmp.path().to_path_buf();
    // Both candidates in flight wait for `release`.
    let verify = format!(
        "if [ \"$HONE_EXPERIMENT\" != 0 ]; then touch {m}/started.$HONE_EXPERIMENT; while [ ! -f {m}/release ]; do sleep 0.02; done; fi; cat value.txt",
        m = m.display()
    );
    let r = Repo::new(
        "[stop]\nmax_experiments = 5\n",
        &verify,
        "write\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\n---\nwrite\tvalue.txt\tscore: 2\\n\n",
    );
    let mut child = r.spawn_hone(&["run", "--workers", "2"]);
    wait_for_file(&m.join("started.1"));
    wait_for_file(&m.join("started.2"));
    // SAFETY: signalling the process group of our own child (a terminal's Ctrl-C).
    unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
    std::fs::write(m.join("release"), "").unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(130));
    let st = r.statuses();
    assert_eq!(st.len(), 3, "nothing new starts after Ctrl-C: {st:?}");
    assert!(
        st[1..]
            .iter()
            .all(|s| matches!(s.as_str(), "keep" | "discard")),
        "{st:?}"
    );
    let out = r.hone(&["run", "--workers", "2"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(r.statuses().len(), 5);
}

#[test]
fn parallel_ctrl_c_twice_kills_every_verifier_in_flight() {
    let tmp = tempfile::tempdir().unwrap();
    let m = tmp.path().to_path_buf();
    let verify = format!(
        "if [ \"$HONE_EXPERIMENT\" != 0 ]; then echo $$ > {m}/pgid.$HONE_EXPERIMENT; sleep 300; fi; cat value.txt",
        m = m.display()
    );
    let r = Repo::new(
        "[stop]\nmax_experiments = 5\n",
        &verify,
        "write\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\n---\nwrite\tvalue.txt\tscore: 2\\n\n",
    );
    use std::os::unix::process::CommandExt;
    let mut child = Command::new(HONE)
        .process_group(0)
        .args(["run", "--workers", "3"])
        .current_dir(&r.dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    for n in 1..=3 {
        wait_for_file(&m.join(format!("pgid.{n}")));
    }
    let pgids: Vec<i32> = (1..=3)
        .map(|n| read_pgid(&m.join(format!("pgid.{n}"))))
        .collect();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    // SAFETY: signalling the process group of our own child (a terminal's Ctrl-C).
    unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
    let mut line = String::new();
    while !line.contains("stopping after the current experiment") {
        line.clear();
        assert!(
            std::io::BufRead::read_line(&mut stderr, &mut line).unwrap() > 0,
            "hone exited early"
        );
    }
    // SAFETY: as above.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
    assert_eq!(child.wait().unwrap().code(), Some(130));
    for p in pgids {
        assert!(!group_alive(p), "every verifier in flight is killed");
    }
    assert_eq!(r.statuses(), ["baseline", "aborted", "aborted", "aborted"]);
}

/// A verify command for two experiments that must run at the same time: each candidate's
/// verifier marks itself started, then waits (up to a minute) for the other one's mark; run
/// one after the other, the first would give up and crash.
fn together_verifier(marks: &Path) -> String {
    format!(
        "if [ \"$HONE_EXPERIMENT\" != 0 ]; then touch {m}/started-$HONE_EXPERIMENT; i=0; \
         while [ $(ls {m} | wc -l) -lt 2 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; \
         [ $(ls {m} | wc -l) -ge 2 ] || exit 3; fi; cat value.txt",
        m = marks.display()
    )
}

#[test]
fn slurm_backend_runs_two_experiments_as_jobs_at_once() {
    if !slurm_cluster() {
        return;
    }
    let marks = tempfile::tempdir().unwrap();
    let r = Repo::new(
        "[stop]\nmax_experiments = 3\n",
        &together_verifier(marks.path()),
        "write\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\n",
    );
    let shared = r.tmp_dir().join("shared");
    let toml = std::fs::read_to_string(r.dir.join("hone.toml")).unwrap();
    std::fs::write(
        r.dir.join("hone.toml"),
        format!(
            "{toml}\n[exec]\nbackend = \"slurm\"\nshared_dir = \"{}\"\nworkers = 2\n",
            shared.display()
        ),
    )
    .unwrap();
    let out = r.hone(&["run", "--tag", "sp"]);
    assert!(out.status.success(), "{}", text(&out));
    let st = r.statuses();
    assert_eq!(st.len(), 3, "{st:?}");
    assert!(
        !st.iter().any(|s| s == "crash"),
        "the two jobs did not run at once: {st:?}"
    );
    assert_eq!(std::fs::read_dir(marks.path()).unwrap().count(), 2);
}

#[test]
fn remote_workers_verify_two_experiments_at_once() {
    let Some(pg) = PgServer::start() else {
        return;
    };
    let marks = tempfile::tempdir().unwrap();
    let r = Repo::new(
        "[stop]\nmax_experiments = 3\n",
        &together_verifier(marks.path()),
        "write\tvalue.txt\tscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\n",
    );
    let bare = r.tmp_dir().join("shared.git");
    git(
        r.tmp_dir(),
        &["init", "-q", "--bare", bare.to_str().unwrap()],
    );
    let toml = std::fs::read_to_string(r.dir.join("hone.toml")).unwrap();
    std::fs::write(
        r.dir.join("hone.toml"),
        format!(
            "{toml}\n[exec]\nbackend = \"workers\"\nremote = \"{}\"\nworkers = 2\n\n[store]\nurl = \"{}\"\n",
            bare.display(),
            pg.url
        ),
    )
    .unwrap();
    git(&r.dir, &["commit", "-q", "-am", "workers"]);
    let mut workers: Vec<std::process::Child> = ["a", "b"]
        .iter()
        .map(|name| {
            Command::new(HONE)
                .args([
                    "worker",
                    "--store",
                    &pg.url,
                    "--repo",
                    bare.to_str().unwrap(),
                ])
                .args(["--slot", name, "--lease", "5s"])
                .arg("--dir")
                .arg(r.tmp_dir().join(format!("w-{name}")))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let out = r.hone(&["run", "--tag", "wp"]);
    for w in &mut workers {
        w.kill().unwrap();
        w.wait().unwrap();
    }
    assert!(out.status.success(), "{}", text(&out));
    let st = r.statuses();
    assert_eq!(st.len(), 3, "{st:?}");
    assert!(
        !st.iter().any(|s| s == "crash"),
        "the two workers did not verify at once: {st:?}"
    );
    // Each of the two candidates was verified by a different worker.
    let by = pg.psql(
        "SELECT count(DISTINCT a.worker) FROM hone_job_attempts a JOIN hone_jobs j ON j.id = a.job_id WHERE j.n > 0",
    );
    assert_eq!(by, "2");
}

/// `hone bench` on a one-problem manifest: it runs the real loop per (arm, seed), writes the
/// three files, reports a paired test against A, and a second call skips the finished runs.
#[test]
fn bench_runs_each_arm_and_seed_writes_its_report_and_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let suite = tmp.path().join("suite");
    let prob = suite.join("quad");
    std::fs::create_dir_all(&prob).unwrap();
    std::fs::write(prob.join("knobs.py"), "X = 0.9  # hone: 0.0..1.0\n").unwrap();
    std::fs::write(
        prob.join("verify.py"),
        "import knobs\nprint('score: %.9g' % ((knobs.X - 0.3) ** 2))\n",
    )
    .unwrap();
    std::fs::write(
        prob.join("hone.toml"),
        "[loop]\neditable = [\"knobs.py\"]\nprotected = [\"verify.py\"]\n[verify]\ncommand = \"python3 -B verify.py\"\nmetric = \"score\"\n[agent]\nkind = \"knobs\"\n",
    )
    .unwrap();
    let manifest = suite.join("manifest.toml");
    std::fs::write(
        &manifest,
        "[[problem]]\nname = \"quad\"\ndir = \"quad\"\noptimum = 0.0\nbaseline = 0.36\n",
    )
    .unwrap();
    let out_dir = tmp.path().join("out");
    let args = [
        "bench",
        "--manifest",
        manifest.to_str().unwrap(),
        "--arms",
        "A,Ap",
        "--repeats",
        "2",
        "--budget",
        "3,6",
        "--out",
        out_dir.to_str().unwrap(),
    ];
    let out = hone_in(tmp.path(), &args);
    assert!(out.status.success(), "{}", text(&out));
    let md = std::fs::read_to_string(out_dir.join("results.md")).unwrap();
    assert!(md.contains("### quad") && md.contains("| A′ | 2 |"), "{md}");
    let runs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("runs.json")).unwrap()).unwrap();
    let runs = runs["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4);
    for r in runs {
        let t = r["trajectory"].as_array().unwrap();
        assert_eq!(t.len(), 6, "{r}");
        // The incumbent starts at the baseline and never gets worse.
        assert!((t[0].as_f64().unwrap() - 0.36).abs() < 1e-9, "{r}");
        let v: Vec<f64> = t.iter().map(|x| x.as_f64().unwrap()).collect();
        assert!(v.windows(2).all(|w| w[1] <= w[0]), "{r}");
    }
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("results.json")).unwrap())
            .unwrap();
    let arms = results["problems"][0]["arms"].as_array().unwrap();
    assert_eq!(arms[1]["at"][0]["vs_a"]["pairs"], 2, "{results}");
    let again = hone_in(tmp.path(), &args);
    assert!(again.status.success(), "{}", text(&again));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("0 run(s) to do (4 already"),
        "{}",
        text(&again)
    );
}
