//! The queue's tests: claims, attempts and leases, and signed jobs and results, against a
//! PostgreSQL server of the test's own.

use super::*;
use crate::store::tests::PgServer;

fn job(remote: &str) -> JobSpec {
    JobSpec {
        remote: remote.into(),
        git_ref: "refs/hone/t/1".into(),
        commit: "abc".into(),
        command: "true".into(),
        env: Vec::new(),
        timeout_ms: 1000,
        kill_grace_ms: 100,
        max_log_bytes: 1000,
        sandbox: JobSandbox::default(),
    }
}

const KEY: &str = "the shared key 0123456789";

/// A connection signing with `key`.
fn keyed(url: &str, key: &str) -> Queue {
    Queue::connect(url)
        .unwrap()
        .with_key(QueueKey::new(key).unwrap())
}

fn result(worker: &str, attempt: i32) -> JobResult {
    JobResult {
        exit: "code".into(),
        value: 0,
        failure: None,
        log: format!("by {worker}"),
        modified: Vec::new(),
        worker: worker.into(),
        attempt,
        uncontained: None,
    }
}

#[test]
fn a_job_of_an_older_coordinator_asks_for_no_sandbox() {
    let mut old = serde_json::to_value(job("r")).unwrap();
    old.as_object_mut().unwrap().remove("sandbox");
    let read: JobSpec = serde_json::from_value(old).unwrap();
    assert_eq!(read.sandbox, JobSandbox::default());
    // And a sandbox travels whole.
    let mut contained = job("r");
    contained.sandbox = JobSandbox {
        bwrap: true,
        required: true,
        network: false,
        writable: true,
        limits: crate::exec::Limits {
            memory_bytes: Some(1 << 30),
            ..Default::default()
        },
        hide: vec!["data/holdout".into()],
    };
    let text = serde_json::to_string(&contained).unwrap();
    assert_eq!(serde_json::from_str::<JobSpec>(&text).unwrap(), contained);
}

#[test]
fn only_the_attempt_holding_a_job_decides_it() {
    let Some(pg) = PgServer::start() else {
        return;
    };
    let url = pg.database("queue_attempts");
    let mut q = keyed(&url, KEY);
    let posted = q.submit("r#t", 1, &job("R")).unwrap();
    let id = posted.id;
    // Workers of another remote never see it.
    assert!(q
        .claim("other", "S", Duration::from_secs(60))
        .unwrap()
        .is_none());
    // Worker a claims with a lease that has already run out; worker b takes it over.
    let a = q.claim("a", "R", Duration::ZERO).unwrap().unwrap();
    assert_eq!((a.id, a.attempt), (id, 1));
    let b = q.claim("b", "R", Duration::from_secs(60)).unwrap().unwrap();
    assert_eq!((b.id, b.attempt), (id, 2));
    // a's heartbeat tells it the job is gone, and its late result is refused.
    assert!(!q
        .heartbeat("a", Some((id, 1)), Duration::from_secs(60))
        .unwrap());
    assert!(!q.finish(&a, &result("a", 1)).unwrap());
    assert_eq!(
        q.status(&posted).unwrap(),
        JobStatus::Claimed {
            worker: "b".into(),
            attempt: 2
        }
    );
    // b gives it back (its own problem); c finishes it, once.
    assert!(q.release(id, "b", 2, "no disk").unwrap());
    let c = q.claim("c", "R", Duration::from_secs(60)).unwrap().unwrap();
    assert_eq!(c.attempt, 3);
    assert!(q.finish(&c, &result("c", 3)).unwrap());
    assert!(!q.finish(&c, &result("c", 3)).unwrap(), "decided once");
    match q.status(&posted).unwrap() {
        JobStatus::Done(r) => assert_eq!(r.log, "by c"),
        other => panic!("{other:?}"),
    }
    let outcomes: Vec<(i32, String, Option<String>)> = q.attempts(id).unwrap();
    assert_eq!(
        outcomes,
        vec![
            (1, "a".into(), Some("lease expired".into())),
            (2, "b".into(), Some("released: no disk".into())),
            (3, "c".into(), Some("code".into())),
        ]
    );
    // A cancelled job is not claimable, and a worker holding it learns at its heartbeat.
    let id2 = q.submit("r#t", 2, &job("R")).unwrap().id;
    let d = q.claim("d", "R", Duration::from_secs(60)).unwrap().unwrap();
    assert_eq!(d.id, id2);
    q.cancel(id2).unwrap();
    assert!(!q
        .heartbeat("d", Some((id2, 1)), Duration::from_secs(60))
        .unwrap());
    assert!(q
        .claim("e", "R", Duration::from_secs(60))
        .unwrap()
        .is_none());
}

/// Whoever can write the database (but has not the key) can neither make a worker run a
/// command nor decide a verification: forged, altered and swapped jobs are refused by the
/// worker, forged, altered and replayed results by the coordinator.
#[test]
fn jobs_and_results_not_signed_with_the_key_are_refused() {
    let Some(pg) = PgServer::start() else {
        return;
    };
    let url = pg.database("queue_signed");
    let mut coordinator = keyed(&url, KEY);
    let mut worker = keyed(&url, KEY);
    let lease = Duration::from_secs(60);
    let unsigned = |e: QueueError, want: i64| match e {
        QueueError::UnsignedJob { job, .. } => assert_eq!(job, want),
        other => panic!("{other:?}"),
    };
    let forged = |e: QueueError, want: i64| match e {
        QueueError::ForgedResult { job } => assert_eq!(job, want),
        other => panic!("{other:?}"),
    };
    let sql = |q: &str| pg.psql(&url, q);

    // A row written straight into the database: refused, never handed out, and the
    // attempt says why.
    let mut evil = job("R");
    evil.command = "touch /tmp/pwned".into();
    let text = serde_json::to_string(&evil).unwrap().replace('\'', "''");
    let forged_id: i64 = sql(&format!(
        "INSERT INTO hone_jobs (run_key, n, spec, remote) VALUES ('r#t', 9, '{text}', 'R') RETURNING id"
    ))
    .lines()
    .next()
    .unwrap()
    .parse()
    .unwrap();
    unsigned(worker.claim("w", "R", lease).unwrap_err(), forged_id);
    assert_eq!(
        sql(&format!(
            "SELECT state FROM hone_jobs WHERE id = {forged_id}"
        )),
        "refused"
    );
    assert_eq!(
        worker.attempts(forged_id).unwrap()[0].2.as_deref(),
        Some("refused: bad signature")
    );
    assert!(worker.claim("w", "R", lease).unwrap().is_none());

    // A posted job whose command is rewritten in the database: refused too, and the
    // coordinator learns it (its run stops) rather than waiting.
    let posted = coordinator.submit("r#t", 1, &job("R")).unwrap();
    sql(&format!(
        "UPDATE hone_jobs SET spec = replace(spec, '\"true\"', '\"touch /tmp/pwned\"') WHERE id = {}",
        posted.id
    ));
    unsigned(worker.claim("w", "R", lease).unwrap_err(), posted.id);
    assert!(matches!(
        coordinator.status(&posted).unwrap(),
        JobStatus::Refused { worker, .. } if worker == "w"
    ));

    // A worker with another key runs nothing of this coordinator's.
    let posted = coordinator.submit("r#t", 2, &job("R")).unwrap();
    let mut other = keyed(&url, "another key 0123456789");
    unsigned(other.claim("x", "R", lease).unwrap_err(), posted.id);

    // A signed job runs; a result written into the database over it (or instead of the
    // worker's) is refused by the coordinator; the worker's own is accepted.
    let posted = coordinator.submit("r#t", 3, &job("R")).unwrap();
    let held = worker.claim("w", "R", lease).unwrap().unwrap();
    assert_eq!(held.id, posted.id);
    let mut fake = result("w", held.attempt);
    fake.log = "score: 1".into();
    let fake = serde_json::to_string(&fake).unwrap();
    sql(&format!(
        "UPDATE hone_jobs SET state = 'done', result = '{fake}' WHERE id = {}",
        posted.id
    ));
    forged(coordinator.status(&posted).unwrap_err(), posted.id);
    sql(&format!(
        "UPDATE hone_jobs SET state = 'claimed', result = NULL WHERE id = {}",
        posted.id
    ));
    assert!(worker.finish(&held, &result("w", held.attempt)).unwrap());
    assert!(matches!(coordinator.status(&posted).unwrap(), JobStatus::Done(r) if r.log == "by w"));
    sql(&format!(
        "UPDATE hone_jobs SET result = replace(result, 'by w', 'score: 1') WHERE id = {}",
        posted.id
    ));
    forged(coordinator.status(&posted).unwrap_err(), posted.id);

    // Replays: another job's signed result copied onto this one, and another job's
    // signed spec copied into this one's row (its signature covers the other row).
    let a = coordinator.submit("r#t", 4, &job("R")).unwrap();
    let held_a = worker.claim("w", "R", lease).unwrap().unwrap();
    assert!(worker
        .finish(&held_a, &result("w", held_a.attempt))
        .unwrap());
    let b = coordinator.submit("r#t", 5, &job("R")).unwrap();
    sql(&format!(
        "UPDATE hone_jobs b SET state = 'done', result = a.result, result_sig = a.result_sig FROM hone_jobs a WHERE a.id = {} AND b.id = {}",
        a.id, b.id
    ));
    forged(coordinator.status(&b).unwrap_err(), b.id);
    let c = coordinator.submit("r#t", 6, &job("R")).unwrap();
    sql(&format!(
        "UPDATE hone_jobs c SET n = a.n, spec = a.spec, sig = a.sig FROM hone_jobs a WHERE a.id = {} AND c.id = {}",
        a.id, c.id
    ));
    unsigned(worker.claim("w", "R", lease).unwrap_err(), c.id);
    assert!(matches!(
        coordinator.status(&c).unwrap(),
        JobStatus::Refused { .. }
    ));
    // A job cancelled, or put in a state hone never writes, under its coordinator: said
    // (the coordinator, which cancels only jobs it stopped waiting for, stops its run).
    let d = coordinator.submit("r#t", 7, &job("R")).unwrap();
    sql(&format!(
        "UPDATE hone_jobs SET state = 'cancelled' WHERE id = {}",
        d.id
    ));
    assert_eq!(coordinator.status(&d).unwrap(), JobStatus::Cancelled);
    sql(&format!(
        "UPDATE hone_jobs SET state = 'whatever' WHERE id = {}",
        d.id
    ));
    assert!(matches!(
        coordinator.status(&d),
        Err(QueueError::Corrupt(why)) if why.contains("`whatever`")
    ));

    // A connection without the key signs nothing.
    let mut bare = Queue::connect(&url).unwrap();
    assert!(matches!(
        bare.submit("r#t", 7, &job("R")),
        Err(QueueError::NoKey { got: 0 })
    ));
}

#[test]
fn a_key_is_long_enough_and_never_printed() {
    assert!(matches!(
        QueueKey::new("  short  "),
        Err(QueueError::NoKey { got: 5 })
    ));
    let key = QueueKey::new("sixteen chars ok").unwrap();
    assert_eq!(format!("{key:?}"), "QueueKey(..)");
    // The signatures bind every part: a field moved between parts changes them.
    assert_ne!(key.sign_job(1, "ab", 1, "c"), key.sign_job(1, "a", 1, "bc"));
    assert_ne!(key.sign_job(1, "a", 1, "c"), key.sign_job(2, "a", 1, "c"));
    assert_ne!(
        key.sign_result(1, "s", "r"),
        QueueKey::new("sixteen chars OK")
            .unwrap()
            .sign_result(1, "s", "r")
    );
    let msg = QueueError::NoKey { got: 0 }.to_string();
    assert!(
        msg.contains("HONE_QUEUE_KEY") && msg.contains("openssl rand"),
        "{msg}"
    );
}
