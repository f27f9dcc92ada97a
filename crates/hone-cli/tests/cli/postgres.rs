//! The PostgreSQL store and remote workers, against a server of the test's own (Debian's
//! postgresql package); without one these tests say so and pass.

use crate::support::*;

// The server the store's own tests start: one copy, included by path.
#[path = "../../../hone/src/store/test_pg.rs"]
mod test_pg;
#[path = "../../../hone/src/test_support.rs"]
mod test_support;
use test_pg::PgServer;

/// Moves run `r` to remote workers through `pg` (`[exec] backend = "workers"` with `exec` added,
/// a bare repository as the remote, `[store] url`), committed: the remote.
fn to_workers(r: &Repo, pg: &PgServer, exec: &str) -> PathBuf {
    let bare = r.bare_remote("shared.git");
    append_spec(
        &r.dir,
        &format!(
            "\n[exec]\nbackend = \"workers\"\nremote = \"{}\"\n{exec}\n[store]\nurl = \"{}\"\n",
            bare.display(),
            pg.url("postgres")
        ),
    );
    git(&r.dir, &["commit", "-q", "-am", "workers"]);
    bare
}

/// `hone worker` for run `r`'s store `pg` and remote `bare`, in `<tmp>/w-<name>` (the slot,
/// lease and output are the caller's).
fn worker_command(r: &Repo, pg: &PgServer, bare: &Path, name: &str) -> Command {
    let mut cmd = Command::new(HONE);
    cmd.env("HONE_QUEUE_KEY", QUEUE_KEY)
        .args([
            "worker",
            "--store",
            &pg.url("postgres"),
            "--repo",
            bare.to_str().unwrap(),
        ])
        .arg("--dir")
        .arg(r.tmp_dir().join(format!("w-{name}")));
    cmd
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
    let r = Repo::stops_after(
        4,
        &verify,
        "write\tvalue.txt\tslow\\nscore: 4\\n\n---\nwrite\tvalue.txt\tscore: 6\\n\n---\nwrite\tvalue.txt\tscore: 2\\n\n",
    );
    let bare = to_workers(&r, &pg, "");
    let worker = |name: &str| {
        worker_command(&r, &pg, &bare, name)
            .args([
                "--slot",
                name,
                "--lease",
                "2s",
                "--env",
                &format!("SLOT_NAME={name}"),
            ])
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
    let second = hone_in(&clone, &["run", "--tag", "w"]);
    assert!(!second.status.success());
    assert_says(&second, "already coordinated");
    // Worker a dies; its verifier's group is killed too (as a host going down would).
    a.kill().unwrap();
    a.wait().unwrap();
    let pgid = read_pgid(&marker);
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
    let mut b = worker("b");
    let mut c = worker("c");
    let st = coordinator.wait().unwrap();
    assert!(st.success(), "the coordinator failed");
    assert_eq!(r.statuses(), ["baseline", "keep", "discard", "keep"]);
    assert_eq!(r.rev("hone/w"), r.rev("refs/hone/w/3"));
    // Experiment 1 was attempted twice: worker a's lease ran out, another worker finished it.
    let attempts = pg.sql(
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
    let marks = Marks::new();
    // Experiment 2's verifier blocks (once) until killed.
    let verify = marks.blocking_verifier(2);
    let r = Repo::new(
        &format!(
            "[stop]\nmax_experiments = 5\n\n[store]\nurl = \"{}\"\n",
            pg.url("postgres")
        ),
        &verify,
        &scores(&[4, 3, 2, 1]),
    );
    let mut child = r.spawn_hone(&["run", "--tag", "k"]);
    let pgid = marks.blocked();
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert_eq!(r.statuses(), ["baseline", "keep", "running"]);
    assert!(
        !r.dir.join(".hone/hone.db").exists(),
        "nothing is recorded locally"
    );
    let root = r.dir.canonicalize().unwrap();
    assert_eq!(
        pg.sql("SELECT repo || '|' || tag || '|' || state FROM hone_store.runs"),
        format!("{}|k|running", root.display())
    );
    let key = format!("{}#k", root.display());
    // The killed coordinator's registration is still there, fresh.
    let left = pg.sql(&format!(
        "SELECT owner FROM hone_coordinators WHERE run_key = '{key}' AND heartbeat > now() - interval '1 minute'"
    ));
    assert!(
        left.starts_with("hone run (pid ") && left.ends_with(&format!(" in {}", root.display())),
        "{left}"
    );

    // Another host coordinates the run now: refused, saying who.
    pg.sql(&format!(
        "UPDATE hone_coordinators SET owner = 'hone run (pid 1) on elsewhere in /src', heartbeat = now() WHERE run_key = '{key}'"
    ));
    let refused = r.hone(&["run"]);
    assert!(!refused.status.success());
    assert_says(
        &refused,
        "is already coordinated by hone run (pid 1) on elsewhere",
    );
    assert_eq!(r.statuses(), ["baseline", "keep", "running"], "untouched");

    // Back to the killed coordinator's fresh registration: it was made from this checkout,
    // whose lock proves it dead, so the run resumes here at once instead of waiting it out.
    pg.sql(&format!(
        "UPDATE hone_coordinators SET owner = '{left}', heartbeat = now() WHERE run_key = '{key}'"
    ));
    resume_kills_the_interrupted_verifier(&r, pgid);
    // The registration is released at the end of the run.
    assert_eq!(
        pg.sql(&format!(
            "SELECT count(*) FROM hone_coordinators WHERE run_key = '{key}'"
        )),
        "0"
    );

    // #3 verified #2's candidate again (the resume's own proposals come after it).
    let show = r.hone(&["show", "3"]);
    assert!(show.status.success(), "{}", text(&show));
    assert_says(&show, "+score: 3");
    assert_says(&show, "verified again: experiment 2's run was cut off");
    let report = r.hone(&["report"]);
    assert!(report.status.success(), "{}", text(&report));
    let status = text(&r.hone(&["status"]));
    assert!(status.contains("run k"), "{status}");
    // The event log is in PostgreSQL too, and append-only there.
    let events: u64 = pg
        .sql("SELECT count(*) FROM hone_store.events")
        .parse()
        .unwrap();
    assert!(events > 0);
    let delete = Command::new("psql")
        .args([
            "-X",
            "-d",
            &pg.url("postgres"),
            "-c",
            "DELETE FROM hone_store.events",
        ])
        .output()
        .unwrap();
    assert!(!delete.status.success(), "events are append-only");
    assert_says(&delete, "append-only");
    // The dashboard reads the run from PostgreSQL as well.
    let mut serve = Command::new(HONE)
        .env("HONE_QUEUE_KEY", QUEUE_KEY)
        .args(["serve", "--port", "0"])
        .current_dir(&r.dir)
        .env("HONE_TOKEN", "postgres-token-0123456789abcdef")
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
        .header("Authorization", "Bearer postgres-token-0123456789abcdef")
        .call()
        .map(|mut res| res.body_mut().read_to_string().unwrap());
    let _ = serve.kill();
    let _ = serve.wait();
    let api: serde_json::Value = serde_json::from_str(&body.unwrap()).unwrap();
    // Five counted by max_experiments, and the aborted #2, which is not.
    assert_eq!(api["summary"]["experiments"], 6, "{api}");
    assert!(!r.dir.join(".hone/hone.db").exists());
}

#[test]
fn remote_workers_verify_two_experiments_at_once() {
    let Some(pg) = PgServer::start() else {
        return;
    };
    let marks = tempfile::tempdir().unwrap();
    let r = Repo::stops_after(3, &together_verifier(marks.path()), &scores(&[4, 3]));
    let bare = to_workers(&r, &pg, "workers = 2\n");
    let mut workers: Vec<std::process::Child> = ["a", "b"]
        .iter()
        .map(|name| {
            worker_command(&r, &pg, &bare, name)
                .args(["--slot", name, "--lease", "5s"])
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
    let by = pg.sql(
        "SELECT count(DISTINCT a.worker) FROM hone_job_attempts a JOIN hone_jobs j ON j.id = a.job_id WHERE j.n > 0",
    );
    assert_eq!(by, "2");
}

/// The store's URL (and the password in it) from variables: `[store] url_env` for the run,
/// `HONE_STORE_URL` for the worker. It is then in neither hone.toml nor the worker's command
/// line, and no verifier's environment holds it, on a worker or here.
#[test]
fn the_store_url_stays_out_of_hone_toml_the_command_line_and_verifiers() {
    let Some(pg) = PgServer::start() else {
        return;
    };
    let url = pg.url("postgres");
    // A verifier that finds the URL, or the queue's key, scores 0 (the best there is).
    let verify = format!(
        "if env | grep -q 'postgre[s]:'; then echo score: 0; exit 0; fi; \
         if env | grep -q '{QUEUE_KEY}'; then echo score: 0; exit 0; fi; \
         if grep -q 'postgre[s]:' hone.toml; then echo score: 0; exit 0; fi; \
         cat value.txt"
    );
    let verify = verify.as_str();
    let run = |r: &Repo, tag: &str| {
        Command::new(HONE)
            .env("HONE_QUEUE_KEY", QUEUE_KEY)
            .args(["run", "--tag", tag])
            .current_dir(&r.dir)
            .env("TEST_STORE_URL", &url)
            // The same URL under another name (a `.env` file's DATABASE_URL, say), and the
            // key: withheld by their values.
            .env("DATABASE_URL", &url)
            .env("SIGNING_SECRET", QUEUE_KEY)
            .output()
            .unwrap()
    };
    let log = |r: &Repo| -> Vec<serde_json::Value> {
        let out = Command::new(HONE)
            .env("HONE_QUEUE_KEY", QUEUE_KEY)
            .args(["log", "--json"])
            .current_dir(&r.dir)
            .env("TEST_STORE_URL", &url)
            .output()
            .unwrap();
        String::from_utf8_lossy(&ok(out).stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    // Here: the store in PostgreSQL, the verifier local.
    let here = Repo::stops_after(2, verify, &scores(&[3]));
    append_spec(&here.dir, "\n[store]\nurl_env = \"TEST_STORE_URL\"\n");
    git(&here.dir, &["commit", "-q", "-am", "store"]);
    // Without the variable: said, with what to do.
    let unset = here.hone(&["run", "--tag", "local"]);
    assert!(!unset.status.success());
    assert_says(&unset, "$TEST_STORE_URL is not set: export TEST_STORE_URL=");
    ok(run(&here, "local"));
    let records = log(&here);
    assert_eq!(records[1]["objective"], 3.0, "{}", records[1]);
    // On a worker that reads the URL from HONE_STORE_URL.
    let r = Repo::stops_after(2, verify, &scores(&[3]));
    let bare = r.bare_remote("shared.git");
    append_spec(
        &r.dir,
        &format!(
            "\n[exec]\nbackend = \"workers\"\nremote = \"{}\"\n\n[store]\nurl_env = \"TEST_STORE_URL\"\n",
            bare.display()
        ),
    );
    git(&r.dir, &["commit", "-q", "-am", "workers"]);
    let mut worker = Command::new(HONE)
        .env("HONE_QUEUE_KEY", QUEUE_KEY)
        .args(["worker", "--repo", bare.to_str().unwrap()])
        .args(["--slot", "a", "--lease", "5s"])
        .arg("--dir")
        .arg(r.tmp_dir().join("w-a"))
        .env("HONE_STORE_URL", &url)
        // The coordinator's variable, sourced on the worker's host too, and libpq's: not
        // passed on either.
        .env("TEST_STORE_URL", &url)
        .env("PGPASSWORD", "postgres://not-really")
        .env("SIGNING_SECRET", QUEUE_KEY)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let out = run(&r, "remote");
    worker.kill().unwrap();
    worker.wait().unwrap();
    ok(out);
    let records = log(&r);
    assert_eq!(records[1]["objective"], 3.0, "{}", records[1]);
    let by = pg.sql("SELECT count(DISTINCT worker) FROM hone_job_attempts");
    assert_eq!(by, "1", "the worker verified them");
    // A worker with neither --store nor HONE_STORE_URL says what it needs.
    let bare_worker = Command::new(HONE)
        .env("HONE_QUEUE_KEY", QUEUE_KEY)
        .args(["worker", "--repo", bare.to_str().unwrap()])
        .env_remove("HONE_STORE_URL")
        .output()
        .unwrap();
    assert_eq!(bare_worker.status.code(), Some(2), "{}", text(&bare_worker));
    assert_says(&bare_worker, "set HONE_STORE_URL");
}

/// A worker runs no job its coordinator did not sign with the shared key: a job written
/// straight into the database is refused and never runs, and a coordinator whose key differs
/// from the worker's stops its run saying so (nothing decided); with the same key it resumes.
#[test]
fn a_worker_runs_only_jobs_signed_with_the_shared_key() {
    let Some(pg) = PgServer::start() else {
        return;
    };
    let r = Repo::stops_after(2, "cat value.txt", &scores(&[3]));
    let bare = to_workers(&r, &pg, "");
    let marker = r.tmp_dir().join("pwned");
    // What someone who can write the database (not the key) would post.
    let forged = serde_json::json!({
        "remote": bare.to_str().unwrap(), "git_ref": "refs/heads/main", "commit": "HEAD",
        "command": format!("touch {}", marker.display()), "env": [], "timeout_ms": 60000,
        "kill_grace_ms": 100, "max_log_bytes": 10000,
        "sandbox": {"bwrap": false, "required": false, "network": true, "writable": true,
                    "limits": {}}
    });
    // The worker makes the tables when it connects; the row goes in once they are there.
    let (out_path, err_path) = (r.tmp_dir().join("w-a.out"), r.tmp_dir().join("w-a.err"));
    let mut worker = worker_command(&r, &pg, &bare, "a")
        .args(["--slot", "a", "--lease", "5s"])
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&out_path)
        .unwrap()
        .contains("waiting for verifications")
    {
        assert!(Instant::now() < deadline, "the worker never registered");
        std::thread::sleep(Duration::from_millis(100));
    }
    pg.sql(&format!(
        "INSERT INTO hone_jobs (run_key, n, spec, remote) VALUES ('x', 1, '{}', '{}')",
        forged.to_string().replace('\'', "''"),
        bare.display()
    ));
    // A coordinator with another key: its first job is refused, and the run stops.
    let wrong = Command::new(HONE)
        .env("HONE_QUEUE_KEY", "not-the-workers-key-0123456789")
        .args(["run", "--tag", "s"])
        .current_dir(&r.dir)
        .output()
        .unwrap();
    assert!(!wrong.status.success(), "{}", text(&wrong));
    assert_says(&wrong, "refused job");
    assert_says(
        &wrong,
        "Set the same HONE_QUEUE_KEY on this coordinator and on every worker",
    );
    // Without a key at all, it says what to set before anything starts.
    let none = Command::new(HONE)
        .env_remove("HONE_QUEUE_KEY")
        .args(["run", "--tag", "s"])
        .current_dir(&r.dir)
        .output()
        .unwrap();
    assert!(!none.status.success());
    assert_says(&none, "openssl rand -hex 32");
    // The same key: the run resumes and finishes (the refused baseline stays on record as
    // aborted).
    ok(r.hone(&["run", "--tag", "s"]));
    worker.kill().unwrap();
    worker.wait().unwrap();
    assert_eq!(r.statuses(), ["aborted", "baseline", "keep"]);
    assert!(!marker.exists(), "the forged job ran");
    assert_eq!(
        pg.sql("SELECT count(*) FROM hone_jobs WHERE state = 'refused'"),
        "2",
        "the forged job and the wrong key's"
    );
    let said = std::fs::read_to_string(&err_path).unwrap();
    assert!(said.contains("REFUSED"), "{said}");
    // A worker without the key does not start.
    let keyless = worker_command(&r, &pg, &bare, "b")
        .env_remove("HONE_QUEUE_KEY")
        .output()
        .unwrap();
    assert!(!keyless.status.success());
    assert_says(&keyless, "HONE_QUEUE_KEY is not set");
}

/// `[sandbox]` reaches the verifier on a remote worker as it does a local one.
#[test]
fn remote_workers_contain_the_verifier_as_the_run_asks() {
    let Some(pg) = PgServer::start() else {
        return;
    };
    if !crate::sandbox::bwrap_available() {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let escaped = outside.path().join("escaped");
    let secret = outside.path().join("holdout.txt");
    std::fs::write(&secret, "the holdout's answers\n").unwrap();
    // The candidate's code wins if it can write outside its checkout, see the worker's
    // command line (which names the store, where a forged result could be posted) or read the
    // holdout's hidden data. The pattern is written so that it does not match its own command
    // line. It needs a writable TMPDIR.
    let verify = format!(
        "echo fsize=$(ulimit -f); echo t > \"$TMPDIR/probe\" || exit 9; \
         if echo x > {e} 2>/dev/null; then echo score: 0; exit 0; fi; \
         if grep -qa 'postgre[s]:' /proc/[0-9]*/cmdline 2>/dev/null; then echo score: 0; exit 0; fi; \
         if grep -q answers {s} 2>/dev/null; then echo score: 0; exit 0; fi; \
         cat value.txt",
        e = escaped.display(),
        s = secret.display()
    );
    let r = Repo::stops_after(2, &verify, &scores(&[3]));
    append_spec(
        &r.dir,
        &format!(
            "\n[sandbox]\nkind = \"bwrap\"\nnetwork = false\nmax_output = \"1M\"\n\n\
             [verify.holdout]\ncommand = \"grep -q answers {s} && cat value.txt\"\nhide = [\"{s}\"]\n",
            s = secret.display()
        ),
    );
    let bare = to_workers(&r, &pg, "");
    run_with_worker(&r, &pg, &bare, "c", None);
    let log = r.log();
    assert_eq!(log[0]["objective"], 5.0, "{}", log[0]);
    assert_eq!(
        log[1]["objective"], 3.0,
        "the candidate got out: {}",
        log[1]
    );
    assert!(!escaped.exists(), "wrote outside its checkout");
    let output = std::fs::read_to_string(log[1]["log_path"].as_str().unwrap()).unwrap();
    assert!(output.contains("fsize="), "{output}");
    assert!(
        !output.contains("fsize=unlimited"),
        "[sandbox] max_output did not reach the worker: {output}"
    );
}

/// A worker where bubblewrap cannot run gives a job that requires it back, and stops after a
/// few, saying why; it never runs the verifier uncontained.
#[test]
fn a_worker_without_bubblewrap_never_runs_a_contained_job() {
    let Some(pg) = PgServer::start() else {
        return;
    };
    let ran = tempfile::tempdir().unwrap();
    let verify = format!("touch {}/ran; cat value.txt", ran.path().display());
    let r = Repo::stops_after(2, &verify, &scores(&[3]));
    append_spec(&r.dir, "\n[sandbox]\nkind = \"bwrap\"\n");
    let bare = to_workers(&r, &pg, "");
    let bin = without_bwrap(&r);
    // The coordinator's output goes to a file, quoted if the worker does not stop.
    let coordinator_said = r.tmp_dir().join("c.said");
    let mut coordinator = spawn_hone_in(
        &r.dir,
        &["run", "--tag", "c"],
        std::fs::File::create(&coordinator_said).unwrap().into(),
        std::fs::File::create(r.tmp_dir().join("c.err"))
            .unwrap()
            .into(),
    );
    let said = r.tmp_dir().join("w-a.said");
    let mut worker = worker_command(&r, &pg, &bare, "a")
        .args(["--slot", "a", "--lease", "5s"])
        .env("PATH", &bin)
        .stdout(std::fs::File::create(&said).unwrap())
        .stderr(std::fs::File::create(r.tmp_dir().join("w-a.err")).unwrap())
        .spawn()
        .unwrap();
    // It stops by itself after three jobs in a row it could not run; two minutes is a hang.
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(st) = worker.try_wait().unwrap() {
            break Some(st);
        }
        if Instant::now() > deadline {
            let _ = worker.kill();
            let _ = worker.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = coordinator.kill();
    let _ = coordinator.wait();
    let said = std::fs::read_to_string(&said).unwrap()
        + std::fs::read_to_string(r.tmp_dir().join("w-a.err"))
            .unwrap()
            .as_str();
    let status = status.unwrap_or_else(|| {
        let coordinator = std::fs::read_to_string(&coordinator_said).unwrap_or_default()
            + std::fs::read_to_string(r.tmp_dir().join("c.err"))
                .unwrap_or_default()
                .as_str();
        panic!("the worker did not stop: {said}\n--- the coordinator said:\n{coordinator}")
    });
    assert!(!status.success(), "{said}");
    assert!(said.contains("bubblewrap"), "{said}");
    assert!(said.contains("given back to the queue"), "{said}");
    assert!(
        !ran.path().join("ran").exists(),
        "the verifier ran uncontained"
    );
}

/// A directory for a worker's `PATH` with git, sh and cat, and no bwrap.
fn without_bwrap(r: &Repo) -> PathBuf {
    let bin = r.tmp_dir().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["git", "sh", "cat", "touch"] {
        let found = ["/usr/bin", "/bin"]
            .iter()
            .map(|d| Path::new(d).join(tool))
            .find(|p| p.exists())
            .unwrap();
        std::os::unix::fs::symlink(found, bin.join(tool)).unwrap();
    }
    bin
}

/// With `required = false` such a worker runs the job without bubblewrap, and the run says so.
#[test]
fn a_worker_without_bubblewrap_runs_an_optional_one_and_the_run_says_so() {
    let Some(pg) = PgServer::start() else {
        return;
    };
    let r = Repo::stops_after(2, "cat value.txt", &scores(&[3]));
    append_spec(&r.dir, "\n[sandbox]\nkind = \"bwrap\"\nrequired = false\n");
    let bare = to_workers(&r, &pg, "");
    let out = run_with_worker(&r, &pg, &bare, "o", Some(&without_bwrap(&r)));
    assert_eq!(r.statuses(), ["baseline", "keep"]);
    let said = text(&out);
    assert!(
        said.contains("experiment 1: worker") && said.contains("WITHOUT bubblewrap"),
        "{said}"
    );
}

/// What a job's verifier left running outside its group on a worker (no bubblewrap) is killed
/// when the job ends: the next job's verifier finds it gone.
#[test]
fn a_worker_kills_what_a_job_left_running() {
    let Some(pg) = PgServer::start() else {
        return;
    };
    let marks = Marks::new();
    let verify = marks.fill(
        "if [ \"$HONE_EXPERIMENT\" = 1 ]; then setsid sh -c 'echo $$ > {m}/e.tmp && mv {m}/e.tmp {m}/escaped; exec sleep 300' > /dev/null 2>&1 & \
           while [ ! -f {m}/escaped ]; do sleep 0.02; done; fi; \
         if [ \"$HONE_EXPERIMENT\" = 2 ]; then s=$(cut -d' ' -f3 /proc/$(cat {m}/escaped)/stat 2>/dev/null); \
           if [ -n \"$s\" ] && [ \"$s\" != Z ]; then echo score: 0; exit 0; fi; fi; cat value.txt",
    );
    let r = Repo::stops_after(3, &verify, &scores(&[4, 3]));
    let bare = to_workers(&r, &pg, "");
    run_with_worker(&r, &pg, &bare, "k", None);
    let log = r.log();
    assert_eq!(
        log[2]["objective"], 3.0,
        "job 1's escaped process was still running: {}",
        log[2]
    );
}

/// `hone run --tag <tag>` of `r` with one worker (slot `a`, its `PATH` replaced by `path` when
/// given) verifying; the run must succeed.
fn run_with_worker(
    r: &Repo,
    pg: &PgServer,
    bare: &Path,
    tag: &str,
    path: Option<&Path>,
) -> std::process::Output {
    let mut cmd = worker_command(r, pg, bare, "a");
    cmd.args(["--slot", "a", "--lease", "5s"]);
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    let mut worker = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let out = r.hone(&["run", "--tag", tag]);
    worker.kill().unwrap();
    worker.wait().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    // Candidates ran in the worker's worktree, from its clone: both are their owner's alone.
    use std::os::unix::fs::PermissionsExt;
    for dir in ["repo", "worktree"] {
        let path = r.tmp_dir().join("w-a").join(dir);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{dir}: {mode:o}");
    }
    out
}
