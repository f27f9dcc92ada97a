//! Tests of the SLURM backend: parsing, scripts and time limits everywhere, and real jobs
//! where a cluster answers.

use super::*;

const SAMPLE: &str = "JobId=1 JobName=j.sh UserId=root(0) GroupId=root(0) MCS_label=N/A \
        Priority=4294901759 Nice=0 Account=(null) QOS=(null) JobState=FAILED \
        Reason=NonZeroExitCode Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 \
        ExitCode=3:0 RunTime=00:00:00 TimeLimit=UNLIMITED NodeList=vm BatchHost=vm";

#[test]
fn parses_scontrol_one_liner() {
    let i = JobInfo::parse(SAMPLE).unwrap();
    assert_eq!(i.state, "FAILED");
    assert_eq!(i.reason, "NonZeroExitCode");
    assert_eq!((i.exit_code, i.exit_signal), (3, 0));
    assert_eq!(i.node, "vm");
    assert!(!i.is_active());
    assert!(JobInfo::parse("slurm_load_jobs error: Invalid job id specified").is_none());
    let running = JobInfo::parse("JobId=2 JobState=RUNNING Reason=None").unwrap();
    assert!(running.is_active() && running.has_started());
    let pending = JobInfo::parse("JobId=2 JobState=PENDING Reason=Priority").unwrap();
    assert!(pending.is_active() && !pending.has_started());
}

#[test]
fn time_limits_round_up_to_minutes() {
    assert_eq!(slurm_time(Duration::from_secs(1)), "0:01:00");
    assert_eq!(slurm_time(Duration::from_secs(60)), "0:01:00");
    assert_eq!(slurm_time(Duration::from_secs(61)), "0:02:00");
    assert_eq!(slurm_time(Duration::from_secs(3 * 3600 + 5)), "3:01:00");
}

/// A request for a batch script's text: `command` in `cwd`, no environment, no wrapper.
fn script_request(command: &str, cwd: &str) -> ExecRequest {
    ExecRequest {
        command: command.into(),
        cwd: PathBuf::from(cwd),
        env: Vec::new(),
        timeout: None,
        kill_grace: Duration::from_secs(1),
        drain_timeout: Duration::from_secs(1),
        log_path: PathBuf::from("/tmp/log"),
        max_log_bytes: 1024,
        limits: Default::default(),
        wrapper: vec![],
    }
}

#[test]
fn script_quotes_and_exports() {
    let req = ExecRequest {
        env: crate::util::env_of(&[("GOOD", "x'y"), ("BAD-NAME", "z"), ("1BAD", "z")]),
        ..script_request("echo 'a b' && exit 4", "/shared/it's here")
    };
    let s = script_text(&req, Path::new("/shared/job.rc"));
    assert!(s.contains("cd '/shared/it'\\''s here' ||"), "{s}");
    assert!(s.contains("export GOOD='x'\\''y'\n"), "{s}");
    assert!(!s.contains("BAD-NAME") && !s.contains("1BAD"), "{s}");
    assert!(
        s.contains("/bin/sh -c 'echo '\\''a b'\\'' && exit 4' </dev/null"),
        "{s}"
    );
    // The script really is valid shell that runs the command and records its status.
    let dir = tempfile::tempdir().unwrap();
    let rc = dir.path().join("rc");
    let req = ExecRequest {
        cwd: dir.path().to_path_buf(),
        env: vec![("GOOD".into(), "x'y".into())],
        command: "printf '%s' \"$GOOD\" > out; exit 4".into(),
        ..req
    };
    let path = dir.path().join("job.sh");
    fs::write(&path, script_text(&req, &rc)).unwrap();
    let status = Command::new("/bin/sh").arg(&path).status().unwrap();
    assert_eq!(status.code(), Some(4));
    assert_eq!(fs::read_to_string(dir.path().join("out")).unwrap(), "x'y");
    assert_eq!(fs::read_to_string(&rc).unwrap().trim(), "4");
    // The candidate's code leaves an executable `mv` in its directory, and the current
    // directory is first on PATH, the verifier's and the job's own (the job here starts in the
    // same directory): the status is still recorded by the real `mv`.
    let planted = dir.path().join("planted-mv-ran");
    fs::remove_file(&rc).unwrap();
    let req = ExecRequest {
        env: vec![("PATH".into(), ":/usr/bin:/bin".into())],
        command: format!(
            "printf '#!/bin/sh\\ntouch {}\\necho 0 > \"$2\"\\n' > mv; chmod +x mv; exit 4",
            planted.display()
        ),
        ..req
    };
    fs::write(&path, script_text(&req, &rc)).unwrap();
    let job = |path: &Path| {
        Command::new("/bin/sh")
            .arg(path)
            .current_dir(dir.path())
            .env("PATH", ":/usr/bin:/bin")
            .status()
            .unwrap()
    };
    assert_eq!(job(&path).code(), Some(4));
    assert!(dir.path().join("mv").exists(), "the command ran");
    assert!(!planted.exists(), "the script ran the candidate's `mv`");
    assert_eq!(fs::read_to_string(&rc).unwrap().trim(), "4");
    // A directory the node cannot enter: 97, recorded too.
    let req = ExecRequest {
        cwd: dir.path().join("missing"),
        ..req
    };
    fs::write(&path, script_text(&req, &rc)).unwrap();
    assert_eq!(job(&path).code(), Some(97));
    assert_eq!(fs::read_to_string(&rc).unwrap().trim(), "97");
}

/// The real cluster tests: they need a SLURM controller (scripts/slurm-local.sh starts a
/// one-node one). Without one they say so and pass, unless HONE_REQUIRE_SLURM=1 (CI).
fn cluster() -> bool {
    let up = slurm_tool("sinfo", &["-h".into(), "-o".into(), "%T".into()]).is_ok_and(|o| {
        o.lines().map(str::trim).any(|l| {
            !l.is_empty()
                && !l.ends_with('*')
                && !["down", "drain", "fail", "unk", "boot", "future"]
                    .iter()
                    .any(|bad| l.starts_with(bad))
        })
    });
    crate::test_support::available_or_skip(
        up,
        "HONE_REQUIRE_SLURM",
        "no SLURM node is up (scripts/slurm-local.sh starts one)",
    )
}

fn request(dir: &Path, command: &str, timeout: Option<Duration>) -> ExecRequest {
    let wt = dir.join("wt");
    fs::create_dir_all(&wt).unwrap();
    ExecRequest {
        command: command.into(),
        cwd: wt,
        env: vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("MARK".into(), "m1".into()),
        ],
        timeout,
        kill_grace: Duration::from_secs(1),
        drain_timeout: Duration::from_secs(1),
        log_path: dir.join("verify.log"),
        max_log_bytes: 1 << 20,
        limits: Default::default(),
        wrapper: vec![],
    }
}

/// A temporary directory and a request to run `command` in it, where a cluster is up (see
/// [`cluster`]); None, the test skipped, where none is.
fn on_cluster(
    command: &str,
    timeout: Option<Duration>,
) -> Option<(tempfile::TempDir, ExecRequest)> {
    if !cluster() {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let req = request(dir.path(), command, timeout);
    Some((dir, req))
}

fn run(req: &ExecRequest, dir: &Path, cancel: &dyn Fn() -> bool) -> (SlurmOutcome, Vec<String>) {
    let job = submit(req, &SlurmConfig::default(), &dir.join("jobs"), "hone-test").unwrap();
    let mut lines = Vec::new();
    let out = job
        .wait(&mut |l| lines.push(l.to_string()), &mut |_| {}, cancel)
        .unwrap();
    (out, lines)
}

#[test]
fn slurm_job_succeeds_with_its_output_and_environment() {
    let Some((dir, req)) = on_cluster("echo \"val_loss: 1.5 $MARK\"; pwd; echo err >&2", None)
    else {
        return;
    };
    let (out, lines) = run(&req, dir.path(), &|| false);
    assert_eq!(out.exit, Exit::Code(0), "{out:?}");
    assert_eq!(out.failure, None);
    assert_eq!(out.state, "COMPLETED");
    assert!(lines.contains(&"val_loss: 1.5 m1".to_string()), "{lines:?}");
    assert!(lines.iter().any(|l| l.ends_with("/wt")), "{lines:?}");
    assert!(lines.contains(&"err".to_string()), "{lines:?}");
    let log = fs::read_to_string(dir.path().join("verify.log")).unwrap();
    assert!(log.contains("val_loss: 1.5 m1"), "{log}");
}

#[test]
fn slurm_job_crash_gives_the_exit_status() {
    let Some((dir, req)) = on_cluster("echo boom; exit 7", None) else {
        return;
    };
    let (out, _) = run(&req, dir.path(), &|| false);
    assert_eq!(out.exit, Exit::Code(7), "{out:?}");
    assert_eq!(out.state, "FAILED");
    assert_eq!(out.failure, None);
}

#[test]
fn slurm_timeout_cancels_the_job() {
    let Some((dir, req)) = on_cluster("echo started; sleep 300", Some(Duration::from_secs(1)))
    else {
        return;
    };
    let (out, lines) = run(&req, dir.path(), &|| false);
    assert_eq!(out.exit, Exit::TimedOut, "{out:?}");
    assert_eq!(out.state, "CANCELLED", "{out:?}");
    assert!(lines.contains(&"started".to_string()), "{lines:?}");
    let info = slurm_tool(
        "scontrol",
        &[
            "show".into(),
            "job".into(),
            "-o".into(),
            out.job_ids[0].to_string(),
        ],
    )
    .unwrap();
    assert!(!JobInfo::parse(&info).unwrap().is_active());
}

#[test]
fn slurm_job_cancelled_from_outside_is_a_failure_with_its_reason() {
    let Some((dir, req)) = on_cluster("touch started; sleep 300", Some(Duration::from_secs(600)))
    else {
        return;
    };
    let marker = dir.path().join("wt/started");
    let job = submit(
        &req,
        &SlurmConfig::default(),
        &dir.path().join("jobs"),
        "hone-test",
    )
    .unwrap();
    let id = job.id();
    // Once the job has really started, someone else cancels it.
    let cancel_outside = || {
        if marker.exists() {
            let _ = slurm_tool("scancel", &[id.to_string()]);
        }
        false
    };
    let out = job.wait(&mut |_| {}, &mut |_| {}, &cancel_outside).unwrap();
    assert_eq!(out.state, "CANCELLED", "{out:?}");
    let why = out.failure.unwrap();
    assert!(why.contains("cancelled outside hone"), "{why}");
}

/// sbatch (whose environment SLURM copies into the job) gets a few of hone's variables, `PATH`
/// with its absolute entries only, and nothing of hone's own settings.
#[test]
fn a_slurm_tool_gets_path_without_its_relative_entries() {
    let env = tool_env(
        crate::util::env_of(&[
            ("PATH", ":bin:/usr/bin"),
            ("HOME", "/home/u"),
            ("HONE_TOKEN", "secret"),
            ("LD_LIBRARY_PATH", ":lib"),
        ])
        .into_iter(),
    );
    let env = crate::util::env_strings(&env);
    assert_eq!(
        env,
        [
            ("PATH".to_string(), "/usr/bin".to_string()),
            ("HOME".to_string(), "/home/u".to_string())
        ]
    );
}

/// A wrapped job: its exports are the cleaned values, and what it was given reaches the
/// command inside through `--setenv` before the wrapper's `--`.
#[test]
fn a_wrapped_job_exports_cleaned_search_paths_and_sets_them_inside() {
    let req = ExecRequest {
        env: crate::util::env_of(&[("LD_LIBRARY_PATH", "build/lib:/usr/lib")]),
        wrapper: vec!["/usr/bin/bwrap".into(), "--".into()],
        ..script_request("true", "/shared/wt")
    };
    let s = script_text(&req, Path::new("/shared/job.rc"));
    assert!(s.contains("export LD_LIBRARY_PATH='/usr/lib'\n"), "{s}");
    assert!(
        s.contains("exec '/usr/bin/bwrap' '--setenv' 'LD_LIBRARY_PATH' 'build/lib:/usr/lib' '--' /bin/sh -c"),
        "{s}"
    );
}
