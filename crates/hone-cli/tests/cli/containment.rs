//! Containment that holds as root: under `[sandbox] kind = "bwrap"` a hostile agent (and the
//! verifier it wrote) cannot unmount what hides hone's state, remount `/` read-write, read
//! `.hone/hone.db` or the holdout's `hide` data, or write the user's files; and the holdout,
//! which reads `hide`, hands nothing to the next agent (SysV message queue, kernel keyring,
//! `/dev/shm`, `TMPDIR`, the worktree). Each case runs as root (as the tests do) and as an
//! unprivileged user (uid 65534 through `setpriv`).
//!
//! Each attack turns a success into a forged keep (the agent writes `score: 0`, better than
//! the baseline's 5; a contained one writes `score: 9`), so "no keep" is the defended outcome.

use crate::support::*;

/// The hidden holdout data: no sandboxed agent, reviewer or verifier may read it.
const SECRET: &str = "SECRET-HOLDOUT-ROWS-7f3a";

/// The SysV key the hostile holdout's message queue uses ("HONE").
const QUEUE_KEY: &str = "0x484f4e45";

/// Two tests of the check `$check`: `$root` runs it as root, `$nobody` as an unprivileged
/// user (`As::Nobody`).
macro_rules! as_root_and_unprivileged {
    ($check:ident: $root:ident, $nobody:ident) => {
        #[test]
        fn $root() {
            $check(As::Root);
        }

        #[test]
        fn $nobody() {
            $check(As::Nobody);
        }
    };
}

/// The user's checkout `r` after a hostile run: the evaluator as it was and `.git/config`
/// still `config_before`.
#[track_caller]
fn assert_checkout_untouched(r: &Repo, config_before: &str) {
    assert_eq!(
        std::fs::read_to_string(r.dir.join("prepare.py")).unwrap(),
        "# the fixed evaluator\n"
    );
    assert_eq!(
        std::fs::read_to_string(r.dir.join(".git/config")).unwrap(),
        config_before
    );
}

/// Who runs hone: root (the test's own user) or `nobody` through `setpriv`.
#[derive(Clone, Copy, PartialEq)]
enum As {
    Root,
    Nobody,
}

/// Can bubblewrap make a sandbox with every namespace hone asks for (what hone's own probe
/// runs), as `who`? Skips (with a notice) where it cannot; CI must be able to as root.
fn bwrap_usable(who: As) -> bool {
    let mut cmd = prefix(who);
    cmd.arg("bwrap").args(hone::sandbox::probe_args());
    let ok = cmd.output().map(|o| o.status.success()).unwrap_or(false);
    assert!(
        ok || who == As::Nobody || std::env::var_os("CI").is_none(),
        "CI must be able to run bubblewrap (see .ci/run)"
    );
    if !ok {
        eprintln!(
            "SKIPPED: bubblewrap cannot create a user namespace here as {} (apt-get install bubblewrap; user namespaces must be allowed)",
            if who == As::Root { "root" } else { "uid 65534" }
        );
    }
    ok
}

/// The command prefix that runs a program as `who`.
fn prefix(who: As) -> Command {
    match who {
        As::Root => {
            let mut c = Command::new("env");
            c.arg("--");
            c
        }
        As::Nobody => {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
            c
        }
    }
}

/// The `hone` binary `who` runs: for uid 65534 a copy beside the repository (the build's
/// own directory may be closed to other users, as a `mktemp -d` checkout is).
fn hone_for(r: &Repo, who: As) -> PathBuf {
    match who {
        As::Root => PathBuf::from(HONE),
        As::Nobody => r.tmp_dir().join("bin").join("hone"),
    }
}

/// Runs `hone args` in the repository as `who`.
fn hone_as(r: &Repo, who: As, args: &[&str]) -> Output {
    let mut c = prefix(who);
    c.arg(hone_for(r, who))
        .args(args)
        .current_dir(&r.dir)
        .env("HOME", r.tmp_dir())
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t");
    c.output().unwrap()
}

/// `hone log --json` as `who`.
fn log_as(r: &Repo, who: As) -> Vec<serde_json::Value> {
    let out = ok(hone_as(r, who, &["log", "--json"]));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A git revision of the repository (read as root, whoever owns it).
fn rev(r: &Repo, name: &str) -> String {
    git(&r.dir, &["-c", "safe.directory=*", "rev-parse", name])
}

/// The standard repository under bwrap, with `holdout.csv` (untracked, listed in `hide`)
/// holding [`SECRET`], the holdout `holdout_command` and the agent script `script`.
fn contained_repo(verify: &str, holdout_command: &str, script: &str) -> Repo {
    let (verify, holdout) = (verify.to_string(), holdout_command.to_string());
    let r = Repo::builder()
        .script(script)
        .spec_with(move |agent| {
            Spec::standard(&verify, agent).tail(&format!(
                "[stop]\nmax_experiments = 2\n\n[sandbox]\nkind = \"bwrap\"\nnetwork = false\n\n[verify.holdout]\ncommand = {}\nhide = [\"holdout.csv\"]\n",
                quoted(&holdout)
            ))
        })
        .create();
    put(r.dir.join("holdout.csv"), format!("{SECRET}\n"));
    r
}

/// Gives the repository (and the helpers beside it) to uid 65534 when it runs hone, with
/// copies of `hone` and `fake-agent` it can reach (hone.toml then names the copy).
fn hand_over(r: &Repo, who: As) {
    if who == As::Nobody {
        let bin = r.tmp_dir().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::copy(HONE, bin.join("hone")).unwrap();
        let agent = bin.join("fake-agent");
        std::fs::copy(FAKE_AGENT, &agent).unwrap();
        let spec = r.dir.join("hone.toml");
        let toml = std::fs::read_to_string(&spec).unwrap();
        let toml = toml.replace(FAKE_AGENT, &agent.display().to_string());
        put(&spec, toml);
        ok(Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(r.tmp_dir())
            .output()
            .unwrap());
    }
}

/// Writes `text` to `name` beside the repository (readable inside every sandbox) and returns
/// its path.
fn helper(r: &Repo, name: &str, text: &str) -> PathBuf {
    let p = r.tmp_dir().join(name);
    put(&p, text);
    p
}

/// Every escalation a root agent or verifier used to have: each success means `score: 0`
/// (written to `value.txt` by the agent, printed by the verifier: `sh attack.sh verifier`); a
/// reviewer command (`sh attack.sh reviewer`) rejects when anything got through.
fn attack_script(root: &Path) -> String {
    let r = root.display();
    format!(
        r#"R={r}
win=""
umount -l $R/.hone 2>/dev/null && win="$win umount-state"
umount -l $R/holdout.csv 2>/dev/null && win="$win umount-hide"
mount -o remount,bind,rw / 2>/dev/null && win="$win remount-root"
mount -o remount,rw $R 2>/dev/null && win="$win remount-repo"
unshare -Urm sh -c "umount -l $R/.hone; test -s $R/.hone/hone.db" 2>/dev/null && win="$win nested-namespace"
test -s $R/.hone/hone.db && win="$win read-db"
grep -q {SECRET} $R/holdout.csv 2>/dev/null && win="$win read-hide"
echo "print('score: 0')" 2>/dev/null > $R/prepare.py && win="$win write-prepare"
printf '[core]\n\tfsmonitor = true\n' 2>/dev/null >> $R/.git/config && win="$win write-git-config"
grep -q CapEff:.0000000000000000 /proc/self/status || win="$win capabilities"
if [ "$1" = reviewer ]; then
  if [ -n "$win" ]; then echo "REJECT: escaped:$win"; else echo APPROVE; fi
  exit 0
fi
if [ -n "$win" ]; then result="score: 0\nwon:$win"; else result="score: 9\nattacked"; fi
if [ "$1" = verifier ]; then printf '%b\n' "$result"; else printf '%b\n' "$result" > value.txt; fi
"#
    )
}

fn hostile_agent_and_verifier_gain_nothing(who: As) {
    if !bwrap_usable(who) {
        return;
    }
    // The agent attacks; the verifier it wrote attacks again (only on the attacking candidate,
    // so that the baseline keeps its 5).
    let r = contained_repo(SCORE, "echo score: 1", "");
    let attack = helper(&r, "attack.sh", &attack_script(&r.dir));
    let verify = format!(
        "if grep -q attacked value.txt; then sh {} verifier; else cat value.txt; fi",
        attack.display()
    );
    edit_spec(&r.dir, |t| {
        t.replace(
            "command = \"cat value.txt\"",
            &format!("command = {}", quoted(&verify)),
        )
    });
    git(&r.dir, &["commit", "-qam", "verifier attacks too"]);
    put(&r.script, format!("run\tsh {}\n", attack.display()));
    hand_over(&r, who);
    let config_before = std::fs::read_to_string(r.dir.join(".git/config")).unwrap();
    let out = ok(hone_as(&r, who, &["run", "--tag", "atk"]));
    let log = log_as(&r, who);
    assert_eq!(log[0]["status"], "baseline", "{log:?}\n{}", text(&out));
    assert_eq!(log[0]["objective"], 5.0, "{log:?}");
    assert_eq!(log.len(), 2, "{log:?}\n{}", text(&out));
    assert_eq!(
        log[1]["objective"],
        9.0,
        "an attack got through (see `won:` in the candidate): {:?}\n{}",
        log[1],
        git(
            &r.dir,
            &[
                "-c",
                "safe.directory=*",
                "show",
                "refs/hone/atk/1:value.txt"
            ]
        )
    );
    assert_ne!(log[1]["status"], "keep", "{:?}", log[1]);
    assert_eq!(rev(&r, "hone/atk"), rev(&r, "main"), "the branch moved");
    assert_checkout_untouched(&r, &config_before);
}

as_root_and_unprivileged!(
    hostile_agent_and_verifier_gain_nothing:
        containment_holds_against_a_hostile_agent_and_verifier_as_root,
        containment_holds_against_a_hostile_agent_and_verifier_as_an_unprivileged_user
);

/// Leaves `argv[2]` in every channel a process could hand to a later one (`put`; with a port in
/// `argv[3]`, also sent to it on 127.0.0.1), or looks in each of them for `argv[2]` (`find`:
/// exit 0 and name the channel when something is there).
const LEAK_PY: &str = r#"import ctypes, os, platform, sys
libc = ctypes.CDLL(None, use_errno=True)
KEY = 0x484f4e45
ADD_KEY, KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(platform.machine(), (None, None))
USER_KEYRING = -4
class Msg(ctypes.Structure):
    _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * 256)]
files = ["/dev/shm/hone-leak", os.path.join(os.environ.get("TMPDIR", "/tmp"), "hone-leak"), "hone-leak", ".hone/hone-leak"]
mode, data = sys.argv[1], sys.argv[2].encode()
if mode == "put":
    q = libc.msgget(KEY, 0o1666)
    if q >= 0:
        libc.msgsnd(q, ctypes.byref(Msg(1, data[:255])), len(data[:255]), 0)
    if ADD_KEY:
        libc.syscall(ADD_KEY, b"user", b"hone-leak", data, len(data), USER_KEYRING)
    for f in files:
        try:
            open(f, "wb").write(data)
        except OSError:
            pass
    if len(sys.argv) > 3:
        import socket
        try:
            socket.create_connection(("127.0.0.1", int(sys.argv[3])), timeout=5).sendall(data)
        except OSError:
            pass
    sys.exit(0)
found = []
q = libc.msgget(KEY, 0)
if q >= 0:
    m = Msg()
    n = libc.msgrcv(q, ctypes.byref(m), 256, 0, 0o4000)
    if n > 0 and data in m.mtext[:n]:
        found.append("message queue")
if ADD_KEY and libc.syscall(KEYCTL, 10, USER_KEYRING, b"user", b"hone-leak", 0) >= 0:
    found.append("keyring")
for f in files:
    try:
        if data in open(f, "rb").read():
            found.append(f)
    except OSError:
        pass
print("found:", found)
sys.exit(0 if found else 1)
"#;

/// Removes what a leaking holdout may have left on this machine (only on a failing run): its
/// message queue, and its key in root's user keyring.
fn clean_host_channels() {
    let _ = Command::new("ipcrm").args(["-Q", QUEUE_KEY]).output();
    let _ = Command::new("python3")
        .args([
            "-c",
            "import ctypes, platform\nlibc = ctypes.CDLL(None)\nk = {'x86_64': 250, 'aarch64': 219}.get(platform.machine())\nwhile k:\n    key = libc.syscall(k, 10, -4, b'user', b'hone-leak', 0)\n    if key < 0 or libc.syscall(k, 21, key) < 0:\n        break\n",
        ])
        .output();
}

fn holdout_hands_nothing_to_the_next_agent(who: As) {
    if !bwrap_usable(who) {
        return;
    }
    clean_host_channels();
    let r = contained_repo(SCORE, "true", "");
    let leak = helper(&r, "leak.py", LEAK_PY);
    // The verifier may have the network here; the holdout still must not.
    edit_spec(&r.dir, |t| t.replace("network = false", "network = true"));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // The holdout reads the hidden data (it may) and hands it on through every channel; it
    // scores the data's length when hone's database is hidden from it, -1 when it is not.
    let holdout = helper(
        &r,
        "holdout.sh",
        &format!(
            "d=$(cat {root}/holdout.csv)\npython3 {leak} put \"$d\" {port}\nif [ -s {root}/.hone/hone.db ]; then echo score: -1; else echo score: ${{#d}}; fi\n",
            root = r.dir.display(),
            leak = leak.display()
        ),
    );
    edit_spec(&r.dir, |t| {
        t.replace(
            "command = \"true\"",
            &format!("command = {}", quoted(&format!("sh {}", holdout.display()))),
        )
    });
    git(&r.dir, &["commit", "-qam", "hostile holdout"]);
    // The next agent looks for it: finding it is worth a forged keep.
    put(
        &r.script,
        format!(
            "run\tif python3 {leak} find {SECRET}; then printf 'score: 0\\nleaked\\n' > value.txt; else printf 'score: 9\\n' > value.txt; fi\n",
            leak = leak.display()
        ),
    );
    hand_over(&r, who);
    let out = hone_as(&r, who, &["run", "--tag", "ho"]);
    let host_queues =
        String::from_utf8_lossy(&Command::new("ipcs").arg("-q").output().unwrap().stdout)
            .to_string();
    clean_host_channels();
    assert!(out.status.success(), "{}", text(&out));
    let log = log_as(&r, who);
    assert_eq!(log[0]["status"], "baseline", "{log:?}\n{}", text(&out));
    // The holdout ran, read `hide`, and could not read hone.db.
    assert_eq!(
        log[0]["holdout"].as_f64(),
        Some(SECRET.len() as f64),
        "{:?}\n{}",
        log[0],
        text(&out)
    );
    assert_eq!(log.len(), 2, "{log:?}");
    assert_eq!(
        log[1]["objective"], 9.0,
        "the next agent found the holdout's data: {:?}",
        log[1]
    );
    assert_ne!(log[1]["status"], "keep");
    assert!(
        !host_queues.contains(QUEUE_KEY),
        "the holdout's message queue outlived it:\n{host_queues}"
    );
    // Nothing reached the network (the run is over: a connection would be waiting).
    listener.set_nonblocking(true).unwrap();
    assert!(
        listener.accept().is_err(),
        "the holdout connected to 127.0.0.1:{port}"
    );
    // Nothing it wrote survives in the worktree either (read-only, and reset).
    for wt in std::fs::read_dir(r.dir.join(".hone")).unwrap().flatten() {
        let p = wt.path().join("hone-leak");
        assert!(!p.exists(), "{} survived", p.display());
    }
}

as_root_and_unprivileged!(
    holdout_hands_nothing_to_the_next_agent:
        the_holdout_hands_nothing_to_the_next_agent_as_root,
        the_holdout_hands_nothing_to_the_next_agent_as_an_unprivileged_user
);

/// With `[verify.holdout] evaluate`, the holdout's command is the candidate's code predicting:
/// it writes its predictions in its worktree (handed to the scorer as `[verify] outputs`) and
/// cannot read `hide` (so it has nothing of the holdout's to signal to the next agent through
/// what they share, the page cache of files both can read among them); only the sealed scorer
/// reads it. A predictor that finds the hidden data predicts a perfect 0; a scorer that does
/// not scores 99.
fn a_predicting_holdout_never_reads_hide(who: As) {
    if !bwrap_usable(who) {
        return;
    }
    let r = contained_repo(SCORE, "true", "write\tvalue.txt\tscore: 4\n\n");
    let root = r.dir.display().to_string();
    let predict = helper(
        &r,
        "predict.sh",
        &format!(
            "if grep -q {SECRET} {root}/holdout.csv 2>/dev/null; then echo 0 > pred.txt; \
             else sed -n 's/^score: //p' value.txt > pred.txt; fi\n"
        ),
    );
    let score = helper(
        &r,
        "score.sh",
        &format!(
            "if grep -q {SECRET} {root}/holdout.csv; then echo score: $(cat pred.txt); \
             else echo score: 99; fi\n"
        ),
    );
    edit_spec(&r.dir, |t| {
        t.replace("[verify]\n", "[verify]\noutputs = [\"pred.txt\"]\n")
            .replace(
                "command = \"true\"",
                &format!(
                    "command = {}\nevaluate = {}",
                    quoted(&format!("sh {}", predict.display())),
                    quoted(&format!("sh {}", score.display()))
                ),
            )
    });
    git(&r.dir, &["commit", "-qam", "a predicting holdout"]);
    hand_over(&r, who);
    let out = hone_as(&r, who, &["run", "--tag", "pr"]);
    assert!(out.status.success(), "{}", text(&out));
    let log = log_as(&r, who);
    let holdout: Vec<Option<f64>> = log.iter().map(|e| e["holdout"].as_f64()).collect();
    let logs: Vec<String> = ["0.log", "0.eval.log"]
        .iter()
        .map(|f| {
            std::fs::read_to_string(r.dir.join(".hone/runs/pr/holdout").join(f)).unwrap_or_default()
        })
        .collect();
    let spec = std::fs::read_to_string(r.dir.join("hone.toml")).unwrap();
    assert_eq!(
        holdout,
        [Some(5.0), Some(4.0)],
        "{logs:?}\n{spec}\n{}",
        text(&out)
    );
}

as_root_and_unprivileged!(
    a_predicting_holdout_never_reads_hide:
        a_predicting_holdout_never_reads_hide_as_root,
        a_predicting_holdout_never_reads_hide_as_an_unprivileged_user
);

/// Started from a terminal, hone's sandboxes have no controlling terminal: an agent or verifier
/// that could open `/dev/tty` could push keystrokes (`TIOCSTI`) into the user's shell, to run
/// once hone exits, outside every sandbox. `script` gives hone a terminal, as a user's shell
/// would.
#[test]
fn a_sandbox_cannot_reach_the_terminal_hone_was_started_from() {
    if !bwrap_usable(As::Root) {
        return;
    }
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("SKIPPED: `script` (util-linux) is not installed");
        return;
    }
    let tty = "python3 -c \"open('/dev/tty', 'w')\" 2>/dev/null";
    let verify = format!("if {tty}; then echo score: 0; else cat value.txt; fi");
    let r = contained_repo(&verify, "echo score: 1", "");
    put(
        &r.script,
        format!(
            "run\tif {tty}; then echo score: 0 > value.txt; else echo score: 9 > value.txt; fi\n"
        ),
    );
    let out = ok(Command::new("script")
        .args(["-qec", &format!("{HONE} run --tag tty"), "/dev/null"])
        .current_dir(&r.dir)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap());
    let log = r.log();
    assert_eq!(log[0]["objective"], 5.0, "{log:?}\n{}", text(&out));
    assert_eq!(
        log[1]["objective"], 9.0,
        "the sandbox opened the terminal: {:?}",
        log[1]
    );
    assert_ne!(log[1]["status"], "keep");
}

/// Is a process running `sleep <marker>` still alive anywhere on this machine?
fn sleeper_alive(marker: &str) -> bool {
    let wanted = format!("sleep\0{marker}\0");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .any(|p| std::fs::read(p.path().join("cmdline")).is_ok_and(|c| c == wanted.as_bytes()))
}

/// In its own session the sandbox no longer shares hone's process group, yet a verifier that
/// ignores SIGTERM and leaves a background child still times out, and nothing it started
/// survives: killing `bwrap` kills its PID namespace.
#[test]
fn a_sandboxed_verifier_that_runs_past_its_timeout_leaves_nothing_behind() {
    if !bwrap_usable(As::Root) {
        return;
    }
    let marker = format!("{}", 7000 + std::process::id() % 2000);
    let verify = format!(
        "if grep -q hang value.txt; then trap '' TERM; (sleep {marker} &); sleep {marker}; fi; cat value.txt"
    );
    let r = contained_repo(
        &verify,
        "echo score: 1",
        "write\tvalue.txt\tscore: 4\\nhang\\n\n",
    );
    edit_spec(&r.dir, |t| {
        t.replace("timeout = \"60s\"", "timeout = \"2s\"")
    });
    git(&r.dir, &["commit", "-qam", "short timeout"]);
    let out = ok(r.hone(&["run", "--tag", "slow"]));
    let log = r.log();
    assert_eq!(log[1]["status"], "timeout", "{:?}\n{}", log[1], text(&out));
    let deadline = Instant::now() + Duration::from_secs(30);
    while sleeper_alive(&marker) {
        assert!(
            Instant::now() < deadline,
            "`sleep {marker}` outlived its sandbox"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The reviewer command runs in the same sandbox: as root it can neither unmount, remount nor
/// read or write what it must not. Here the reviewer is the attacker, and it rejects the
/// (honest) candidate when any of its attacks got through; a contained one approves it.
#[test]
fn a_reviewer_command_is_contained_as_root() {
    if !bwrap_usable(As::Root) {
        return;
    }
    let r = contained_repo(SCORE, "echo score: 1", &scores(&[4]));
    let attack = helper(&r, "attack.sh", &attack_script(&r.dir));
    append_spec(
        &r.dir,
        &format!(
            "\n[review]\ncommand = {}\n",
            quoted(&format!("sh {} reviewer", attack.display()))
        ),
    );
    git(&r.dir, &["commit", "-qam", "a reviewer"]);
    let config_before = std::fs::read_to_string(r.dir.join(".git/config")).unwrap();
    let out = ok(r.hone(&["run", "--tag", "rev"]));
    let log = r.log();
    assert_eq!(
        log[1]["status"],
        "keep",
        "the reviewer got out: {:?}\n{}",
        log[1],
        text(&out)
    );
    assert_checkout_untouched(&r, &config_before);
}

/// A candidate that may write a file named `bwrap` (in `editable`) puts an executable one in
/// its worktree that prints a perfect score: with the current directory first on the
/// verifier's `PATH` (set so in `[verify] env`, which hone passes as written), a sandbox
/// started as plain `bwrap` in the worktree would run it instead of bubblewrap, and the
/// candidate's code would run unconfined. hone starts the `bwrap` of its own `PATH`'s absolute
/// entries, so the candidate is measured in the sandbox (9, worse than the baseline's 5).
#[test]
fn a_bwrap_in_the_worktree_never_stands_in_for_bubblewrap() {
    if !bwrap_usable(As::Root) {
        return;
    }
    let script = "write\tbwrap\t#!/bin/sh\\necho 'score: 0'\\n\nrun\tchmod +x bwrap\nwrite\tvalue.txt\tscore: 9\\n\n";
    let path = format!(":{}", std::env::var("PATH").unwrap_or_default());
    let r = Repo::builder()
        .script(script)
        .spec_with(move |agent| {
            Spec::standard(SCORE, agent)
                .editable(&["value.txt", "bwrap"])
                .set("verify", "env", &format!("{{ PATH = {} }}", quoted(&path)))
                .tail("[stop]\nmax_experiments = 2\n\n[sandbox]\nkind = \"bwrap\"\n")
        })
        .create();
    let out = ok(r.hone(&["run", "--tag", "bw"]));
    let log = r.log();
    assert_eq!(log[1]["status"], "discard", "{}\n{}", log[1], text(&out));
    assert_eq!(log[1]["objective"], 9.0, "{}", log[1]);
}

/// An agent that leaves an untracked directory its owner cannot read or enter (`chmod 000`,
/// with files below it), and one the candidate's verifier locks the same way: as root nothing
/// stops hone's reset from removing it; as an unprivileged user, the owner, hone gives itself
/// the access back and removes it. Either way the run goes on to the next candidate, which
/// finds a clean worktree, and the user's checkout holds no such directory.
fn a_locked_directory_left_behind_does_not_stop_the_run(who: As) {
    let script = "run\tmkdir -p junk/deep/er && echo x > junk/deep/er/f && chmod 000 junk/deep junk\nwrite\tvalue.txt\tscore: 9\\n\n---\nrun\ttest ! -e junk\nwrite\tvalue.txt\tscore: 3\\n\n";
    let verify = "cat value.txt; mkdir -p out/x && echo y > out/x/g && chmod 000 out/x out";
    let r = Repo::stops_after(3, verify, script);
    hand_over(&r, who);
    let out = ok(hone_as(&r, who, &["run", "--tag", "lock"]));
    let log = log_as(&r, who);
    let statuses: Vec<&str> = log.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(
        statuses,
        ["baseline", "violation", "keep"],
        "{}",
        text(&out)
    );
    assert!(log[1].to_string().contains("junk"), "{}", log[1]);
    assert_eq!(log[2]["objective"], 3.0, "{}", log[2]);
    assert!(!r.dir.join("junk").exists() && !r.dir.join("out").exists());
}

as_root_and_unprivileged!(
    a_locked_directory_left_behind_does_not_stop_the_run:
        a_locked_directory_left_behind_does_not_stop_the_run_as_root,
        a_locked_directory_left_behind_does_not_stop_the_run_as_an_unprivileged_user
);
