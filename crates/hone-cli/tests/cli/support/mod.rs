//! Shared helpers for the end-to-end tests: the standard test repository (`Repo`), git and
//! process-group helpers, small fixtures several topics use, and a prelude of the std items the
//! topic modules need (each topic does `use crate::support::*;`).

pub(crate) use std::path::{Path, PathBuf};
pub(crate) use std::process::{Command, Output, Stdio};
pub(crate) use std::time::{Duration, Instant};

mod git;
mod knob_project;
mod llm_server;
mod spec;
mod svg;

pub(crate) use git::{git, GitSpy};
pub(crate) use llm_server::*;
pub(crate) use spec::*;
pub(crate) use svg::marks;

pub(crate) const HONE: &str = env!("CARGO_BIN_EXE_hone");

/// The key remote workers' jobs and results are signed with (`HONE_QUEUE_KEY`), which every
/// `hone` the tests start has, as a coordinator and its workers would.
pub(crate) const QUEUE_KEY: &str = "the-tests-queue-key-0123456789";
/// The scripted agent, a binary built only with the `test-agent` feature (so that installing
/// hone never installs it): `scripts/test.sh` turns it on; by hand,
/// `cargo test -p hone-cli --features test-agent --test cli`.
pub(crate) const FAKE_AGENT: &str = match option_env!("CARGO_BIN_EXE_fake-agent") {
    Some(path) => path,
    None => "fake-agent-not-built",
};

/// Stops a test at once, saying how to build `fake-agent`, when it was not built (cargo
/// names its path even then).
pub(crate) fn need_fake_agent() {
    assert!(
        Path::new(FAKE_AGENT).is_file(),
        "the CLI tests drive `fake-agent`, built only with the `test-agent` feature: run scripts/test.sh, or cargo test -p hone-cli --features test-agent --test cli"
    );
}

pub(crate) struct Repo {
    pub(crate) _tmp: tempfile::TempDir,
    pub(crate) dir: PathBuf,
    pub(crate) script: PathBuf,
}

impl Repo {
    /// A repository with `value.txt` (editable, holds `score: N`), `prepare.py` (protected),
    /// `data/input.txt` (pinned), the given hone.toml body appended to a standard header, and
    /// an agent script. (`Repo::builder` for anything else.)
    pub(crate) fn new(toml_extra: &str, verify_command: &str, script: &str) -> Repo {
        let (verify, extra) = (verify_command.to_string(), toml_extra.to_string());
        Repo::builder()
            .script(script)
            .spec_with(move |agent| Spec::standard(&verify, agent).tail(&extra))
            .create()
    }

    /// [`Repo::new`] with `[stop] max_experiments = <max>` and [`SCORE`] as the verifier.
    pub(crate) fn scored(max: u32, script: &str) -> Repo {
        Repo::stops_after(max, SCORE, script)
    }

    /// [`Repo::new`] with `[stop] max_experiments = <max>`.
    pub(crate) fn stops_after(max: u32, verify_command: &str, script: &str) -> Repo {
        let toml = format!("[stop]\nmax_experiments = {max}\n");
        Repo::new(&toml, verify_command, script)
    }

    /// The standard repository, to be changed before it is created (`RepoBuilder`).
    pub(crate) fn builder() -> RepoBuilder {
        need_fake_agent();
        RepoBuilder::new()
    }

    /// `hone run --tag <tag>`, which must succeed, then the records (`hone log --json`).
    #[track_caller]
    pub(crate) fn run_log(&self, tag: &str) -> Vec<serde_json::Value> {
        ok(self.hone(&["run", "--tag", tag]));
        self.log()
    }

    /// `hone run --tag <tag>`, which must succeed and leave the experiments' statuses
    /// `statuses`.
    #[track_caller]
    pub(crate) fn run_expect(&self, tag: &str, statuses: &[&str]) -> Output {
        self.hone_expect(&["run", "--tag", tag], statuses)
    }

    /// `hone <args>`, which must succeed and leave the experiments' statuses `statuses`.
    #[track_caller]
    pub(crate) fn hone_expect(&self, args: &[&str], statuses: &[&str]) -> Output {
        let out = ok(self.hone(args));
        assert_eq!(self.statuses(), statuses);
        out
    }

    pub(crate) fn hone(&self, args: &[&str]) -> Output {
        Command::new(HONE)
            .env("HONE_QUEUE_KEY", QUEUE_KEY)
            .args(args)
            .current_dir(&self.dir)
            .output()
            .unwrap()
    }

    /// [`spawn_hone_in`] the repository, its output discarded.
    pub(crate) fn spawn_hone(&self, args: &[&str]) -> std::process::Child {
        spawn_hone_in(&self.dir, args, Stdio::null(), Stdio::null())
    }

    pub(crate) fn log(&self) -> Vec<serde_json::Value> {
        let out = self.hone(&["log", "--json"]);
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    pub(crate) fn statuses(&self) -> Vec<String> {
        self.log()
            .iter()
            .map(|e| e["status"].as_str().unwrap().to_string())
            .collect()
    }

    /// A new bare repository `<name>` beside the repository (a remote to push to).
    pub(crate) fn bare_remote(&self, name: &str) -> PathBuf {
        let bare = self.tmp_dir().join(name);
        git(
            self.tmp_dir(),
            &["init", "-q", "--bare", bare.to_str().unwrap()],
        );
        bare
    }

    /// Gives the repository the remote `origin` at `url`, whose pushes go to `bare`.
    pub(crate) fn origin_pushing_to(&self, url: &str, bare: &Path) {
        git(&self.dir, &["remote", "add", "origin", url]);
        let push = [
            "remote",
            "set-url",
            "--push",
            "origin",
            bare.to_str().unwrap(),
        ];
        git(&self.dir, &push);
    }

    pub(crate) fn tmp_dir(&self) -> &Path {
        self._tmp.path()
    }

    pub(crate) fn rev(&self, r: &str) -> String {
        git(&self.dir, &["rev-parse", r])
    }
}

/// Starts `hone args` in `dir` in its own process group, as a shell does for a foreground job
/// (so that a test can send "Ctrl-C" to the whole group as a terminal would), with the
/// standard output and error given.
pub(crate) fn spawn_hone_in(
    dir: &Path,
    args: &[&str],
    stdout: Stdio,
    stderr: Stdio,
) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    Command::new(HONE)
        .process_group(0)
        .env("HONE_QUEUE_KEY", QUEUE_KEY)
        .args(args)
        .current_dir(dir)
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .unwrap()
}

/// An agent script whose turns each write `score: <n>` to value.txt, one turn a value.
pub(crate) fn scores(values: &[u32]) -> String {
    let turns: Vec<String> = values
        .iter()
        .map(|v| format!("write\tvalue.txt\tscore: {v}\\n\n"))
        .collect();
    turns.join("---\n")
}

/// SIGKILLs `child` (a `hone run`) and waits for it: the process group `pgid` it started (`what`)
/// must still be running.
#[track_caller]
pub(crate) fn kill_9_leaving(child: &mut std::process::Child, pgid: i32, what: &str) {
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        group_alive(pgid),
        "{what} should still be running after hone was killed"
    );
}

/// `hone run` (which must succeed) resumes and kills the process group `pgid` (`what`) that a
/// killed hone left running.
#[track_caller]
pub(crate) fn resume_kills(r: &Repo, pgid: i32, what: &str) {
    ok(r.hone(&["run"]));
    assert!(wait_group_gone(pgid), "resume must kill {what}");
}

/// `hone run` resumes run `k` (5 experiments) whose experiment 2's verifier, process group
/// `pgid`, a killed hone left running: it says so, kills the group, records #2 aborted and
/// goes on, the finished experiments intact.
#[track_caller]
pub(crate) fn resume_kills_the_interrupted_verifier(r: &Repo, pgid: i32) {
    let out = ok(r.hone(&["run"]));
    assert_says(&out, "experiment 2 was interrupted");
    assert!(
        wait_group_gone(pgid),
        "resume must kill the interrupted verifier's group"
    );
    let log = r.log();
    // Five experiments counted (the script's last turn repeats: no change, `invalid`); the
    // aborted #2 is not.
    assert_statuses(
        &log,
        &["baseline", "keep", "aborted", "keep", "keep", "invalid"],
    );
    assert_eq!(log[1]["objective"], 4.0, "finished experiments intact");
    assert_eq!(r.rev("hone/k"), r.rev("refs/hone/k/4"));
}

/// A verifier (`command`) that prints value.txt and notes each of its runs in a file.
pub(crate) struct RunCounter {
    _tmp: tempfile::TempDir,
    file: PathBuf,
    pub(crate) command: String,
}

impl RunCounter {
    pub(crate) fn new() -> RunCounter {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("runs");
        let command = format!("echo run >> {}; cat value.txt", file.display());
        RunCounter {
            _tmp: tmp,
            file,
            command,
        }
    }

    /// How many times the verifier ran (it must have run at least once).
    pub(crate) fn runs(&self) -> usize {
        std::fs::read_to_string(&self.file).unwrap().lines().count()
    }
}

/// A temporary directory where a test's verifiers and agents leave marks (`started`, process
/// group ids, the worktrees they make) and find the test's signals (`release`).
pub(crate) struct Marks {
    tmp: tempfile::TempDir,
}

impl Marks {
    pub(crate) fn new() -> Marks {
        Marks {
            tmp: tempfile::tempdir().unwrap(),
        }
    }

    pub(crate) fn dir(&self) -> &Path {
        self.tmp.path()
    }

    /// The path of the mark `name`.
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir().join(name)
    }

    /// `text` (a verifier or an agent's script) with every `{m}` in it the directory.
    pub(crate) fn fill(&self, text: &str) -> String {
        text.replace("{m}", &self.dir().display().to_string())
    }

    /// A verifier that prints value.txt, first running the shell `then` where the shell test
    /// `when` holds (e.g. `[ "$HONE_EXPERIMENT" = 1 ]`); `{m}` in either is the directory.
    pub(crate) fn verifier(&self, when: &str, then: &str) -> String {
        self.fill(&format!("if {when}; then {then}; fi; cat value.txt"))
    }

    /// A verifier that prints value.txt, every candidate's (not the baseline's) after running
    /// the shell `then` (`{m}` in it is the directory).
    pub(crate) fn candidates_verifier(&self, then: &str) -> String {
        self.verifier("[ \"$HONE_EXPERIMENT\" != 0 ]", then)
    }

    /// A verifier whose experiment `n` blocks (once, for five minutes at most) until the mark
    /// `release` appears or it is killed, after writing its process group id to the mark
    /// `pgid` and touching `started`; every other experiment prints value.txt at once.
    pub(crate) fn blocking_verifier(&self, n: u32) -> String {
        self.verifier(
            &format!("[ \"$HONE_EXPERIMENT\" = {n} ] && [ ! -f {{m}}/started ]"),
            "echo $$ > {m}/pgid; touch {m}/started; i=0; \
             while [ ! -f {m}/release ] && [ $i -lt 6000 ]; do sleep 0.05; i=$((i+1)); done",
        )
    }

    /// Waits until the [`Marks::blocking_verifier`] blocks: its process group id.
    pub(crate) fn blocked(&self) -> i32 {
        wait_for_file(&self.path("started"));
        read_pgid(&self.path("pgid"))
    }

    /// The process group ids that experiments `ns` wrote to their marks `pgid.<n>`, each
    /// waited for.
    pub(crate) fn pgids(&self, ns: std::ops::RangeInclusive<u32>) -> Vec<i32> {
        ns.map(|n| read_pgid(&self.path(&format!("pgid.{n}"))))
            .collect()
    }
}

/// Presses Ctrl-C twice at the terminal of `child` (a `hone run` in its own process group
/// with stderr piped), the second after hone said it saw the first (two signals sent at once
/// would merge into one); hone must exit with 130, within two minutes (a hang detector: what
/// it interrupts may otherwise wait far longer, an LLM call for its `request_timeout`).
pub(crate) fn ctrl_c_twice(child: &mut std::process::Child) {
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
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("hone did not stop within two minutes of the second Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130));
}

/// Runs `hone args` in `dir` (without a GITHUB_TOKEN, stdin empty); a command that does not
/// exit by itself within 120 s is killed and reported.
pub(crate) fn run_bounded<S: AsRef<std::ffi::OsStr>>(
    dir: &Path,
    args: &[S],
) -> Result<Output, String> {
    let mut child = Command::new(HONE)
        .args(args)
        .current_dir(dir)
        .env_remove("GITHUB_TOKEN")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err("did not exit within 120 s (a hang)".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(child.wait_with_output().unwrap())
}

/// Asserts that `out` (stdout and stderr) says `says`.
#[track_caller]
pub(crate) fn assert_says(out: &Output, says: &str) {
    assert!(text(out).contains(says), "{}", text(out));
}

/// Asserts the statuses of the records `log` (`Repo::log`), in order.
#[track_caller]
pub(crate) fn assert_statuses(log: &[serde_json::Value], statuses: &[&str]) {
    let st: Vec<&str> = log.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(st, statuses, "{log:?}");
}

/// The `reason` of a record of `hone log --json` (which must have one).
pub(crate) fn reason(record: &serde_json::Value) -> &str {
    record["reason"].as_str().unwrap()
}

/// Asserts that the `reason` of `record` (a record of `hone log --json`) says `says`; the
/// message of a failure is the record.
#[track_caller]
pub(crate) fn assert_reason(record: &serde_json::Value, says: &str) {
    assert!(reason(record).contains(says), "{record}");
}

/// Asserts that `record` (a record of `hone log --json`) is a violation whose reason says
/// `says`.
#[track_caller]
pub(crate) fn assert_violation(record: &serde_json::Value, says: &str) {
    assert_eq!(record["status"], "violation", "{record}");
    assert_reason(record, says);
}

/// The records of the repository in `dir` (`hone log --json`, which must succeed).
pub(crate) fn log_in(dir: &Path) -> Vec<serde_json::Value> {
    let out = ok(hone_in(dir, &["log", "--json"]));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The records of the repository in `dir` as `status objective description` lines (each the
/// JSON value as printed): what two runs' proposals are compared by.
pub(crate) fn log_lines(dir: &Path) -> Vec<String> {
    log_in(dir)
        .iter()
        .map(|v| format!("{} {} {}", v["status"], v["objective"], v["description"]))
        .collect()
}

/// Writes `content` to `path` (which must succeed).
#[track_caller]
pub(crate) fn put(path: impl AsRef<Path>, content: impl AsRef<[u8]>) {
    std::fs::write(path, content).unwrap();
}

/// `out` of a command that must have exited with `code` and said `says`.
#[track_caller]
pub(crate) fn exits_with(out: Output, code: i32, says: &str) -> Output {
    assert_eq!(out.status.code(), Some(code), "{}", text(&out));
    assert!(text(&out).contains(says), "{}", text(&out));
    out
}

/// `out` of a command that must have succeeded (else the test fails with its output).
#[track_caller]
pub(crate) fn ok(out: Output) -> Output {
    assert!(out.status.success(), "{}", text(&out));
    out
}

pub(crate) fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The one run's directory under `.hone/runs`.
pub(crate) fn only_run_dir(r: &Repo) -> PathBuf {
    std::fs::read_dir(r.dir.join(".hone/runs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
}

/// Waits for a file to appear (the event a test needs), failing after a generous deadline.
pub(crate) fn wait_for_file(p: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !p.exists() {
        assert!(Instant::now() < deadline, "{} never appeared", p.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A process group id a test's verifier or agent wrote to a file. The file can exist before
/// its contents do (`echo $$ > file` creates it first), so wait for a whole number.
pub(crate) fn read_pgid(path: &Path) -> i32 {
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
pub(crate) fn group_alive(pgid: i32) -> bool {
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

pub(crate) fn wait_group_gone(pgid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    while group_alive(pgid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

pub(crate) const SCORE: &str = "cat value.txt";

/// A repository tuned by the knobs optimizer: `params.txt` holds two knobs, and the verifier
/// (plain sh arithmetic) scores them ([`knob_project`]); 15 experiments.
pub(crate) fn knob_repo() -> (tempfile::TempDir, PathBuf) {
    knob_repo_of(knob_project::PARAMS, knob_project::SCORE_SH, 15)
}

/// A committed knobs repository of its own: `params` as `params.txt` (editable), `score_sh` as
/// the protected verifier `score.sh` (metric `loss`), `max_experiments` experiments.
pub(crate) fn knob_repo_of(
    params: &str,
    score_sh: &str,
    max_experiments: u32,
) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let spec = Spec::new()
        .editable(&["params.txt"])
        .protected(&["score.sh"])
        .command("sh score.sh")
        .metric("loss")
        .set("stop", "max_experiments", &max_experiments.to_string());
    knob_project::commit_knob_project(&dir, params, score_sh, &spec.render());
    (tmp, dir)
}

pub(crate) fn edit(path: &str, old: &str, new: &str) -> String {
    format!("HYPOTHESIS: change {path}\n\n{path}\n<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n")
}

/// Every byte hone wrote under .hone (database, logs, prompts, events).
pub(crate) fn state_bytes(r: &Repo) -> Vec<u8> {
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

/// Puts a fake executable `name` (a shell script) on a fresh PATH directory; returns that
/// directory and a directory where the script records what it saw (`FAKE_RECORD`).
pub(crate) fn fake_tool(name: &str, script: &str) -> (tempfile::TempDir, tempfile::TempDir) {
    use std::os::unix::fs::PermissionsExt;
    let bin = tempfile::tempdir().unwrap();
    let record = tempfile::tempdir().unwrap();
    let path = bin.path().join(name);
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    (bin, record)
}

/// Runs `hone run` with a fake tool's directory first on PATH.
pub(crate) fn run_with_tool(
    r: &Repo,
    bin: &Path,
    record: &Path,
    extra_env: &[(&str, &str)],
) -> Output {
    hone_with_tool(r, (bin, record), &["run"], extra_env)
}

/// `hone args` in `r` with the stand-in tool of `bin` first on PATH, recording in `record`.
pub(crate) fn hone_with_tool(
    r: &Repo,
    (bin, record): (&Path, &Path),
    args: &[&str],
    extra_env: &[(&str, &str)],
) -> Output {
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let mut cmd = Command::new(HONE);
    cmd.args(args)
        .current_dir(&r.dir)
        .env("PATH", &path)
        .env("FAKE_RECORD", record);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// The lines of a file a fake tool recorded.
pub(crate) fn recorded(record: &Path, name: &str) -> Vec<String> {
    std::fs::read_to_string(record.join(name))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Rewrites a repository's hone.toml with `edit`, leaving it uncommitted (hone reads it from
/// the checkout, committed or not): for a test that changes the spec of a repository made
/// already, or between two runs.
pub(crate) fn edit_spec(dir: &Path, edit: impl FnOnce(String) -> String) {
    let path = dir.join("hone.toml");
    let spec = std::fs::read_to_string(&path).unwrap();
    std::fs::write(path, edit(spec)).unwrap();
}

/// Appends to a repository's hone.toml (hone reads it from the checkout, committed or not).
pub(crate) fn append_spec(dir: &Path, extra: &str) {
    edit_spec(dir, |spec| spec + extra);
}

pub(crate) fn hone_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(HONE)
        .env("HONE_QUEUE_KEY", QUEUE_KEY)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

pub(crate) fn hone_env(r: &Repo, args: &[&str], env: &[(&str, &str)]) -> Output {
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

pub(crate) const KEEPS_SCRIPT: &str = "write\tvalue.txt\tscore: 4\\n\nhypothesis\tlower is better\n---\nwrite\tvalue.txt\tscore: 7\\n\n---\nwrite\tvalue.txt\tscore: 3\\n\nhypothesis\tlower still\n";

/// One HTTP/1.1 request to 127.0.0.1; returns the status and the body.
pub(crate) fn http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    // The address as the Host, unless `headers` name another.
    let host = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("host"))
        .map_or(addr, |(_, v)| *v);
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
        body.len()
    );
    let headers = headers
        .iter()
        .filter(|(k, _)| !k.eq_ignore_ascii_case("host"));
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

/// A verify command for two experiments that must run at the same time: each candidate's
/// verifier marks itself started, then waits (up to a minute) for the other one's mark; run
/// one after the other, the first would give up and crash.
pub(crate) fn together_verifier(marks: &Path) -> String {
    format!(
        "if [ \"$HONE_EXPERIMENT\" != 0 ]; then touch {m}/started-$HONE_EXPERIMENT; i=0; \
         while [ $(ls {m} | wc -l) -lt 2 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; \
         [ $(ls {m} | wc -l) -ge 2 ] || exit 3; fi; cat value.txt",
        m = marks.display()
    )
}
