//! The shared verification queue for remote workers: a PostgreSQL database where a
//! coordinator (`hone run` with `[exec] backend = "workers"`) posts verifications and
//! `hone worker` processes on any host claim them.
//!
//! - **Claims** take the oldest queued job with `FOR UPDATE SKIP LOCKED`, so two workers never
//!   take the same one, and set a lease (`lease_until`, in the database's clock, so the hosts'
//!   clocks do not matter).
//! - **Heartbeats** renew the lease. A heartbeat that finds the job no longer its own (the
//!   coordinator cancelled it, or the lease ran out and another worker took it) tells the
//!   worker to kill its verifier.
//! - **A dead worker** stops renewing; once its lease has run out the job is claimable again
//!   and the next worker takes it with the next attempt number. Every attempt is recorded in
//!   `hone_job_attempts`.
//! - **Results** are accepted only from the worker holding the current attempt, so no
//!   verification is decided twice.
//! - **Coordinators** register per run; a second coordinator of the same run is refused while
//!   the first one's heartbeat is fresh.

use std::time::Duration;

use postgres::{Client, NoTls};

/// Schema version this code writes; tables are created on first connection.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS hone_jobs (
    id          BIGSERIAL PRIMARY KEY,
    run_key     TEXT NOT NULL,
    n           BIGINT NOT NULL,
    spec        TEXT NOT NULL,
    state       TEXT NOT NULL DEFAULT 'queued',
    attempt     INTEGER NOT NULL DEFAULT 0,
    worker      TEXT,
    lease_until TIMESTAMPTZ,
    result      TEXT,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at TIMESTAMPTZ
);
ALTER TABLE hone_jobs ADD COLUMN IF NOT EXISTS remote TEXT NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS hone_jobs_claimable ON hone_jobs (state, id);
CREATE TABLE IF NOT EXISTS hone_job_attempts (
    job_id     BIGINT NOT NULL,
    attempt    INTEGER NOT NULL,
    worker     TEXT NOT NULL,
    started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    ended_at   TIMESTAMPTZ,
    outcome    TEXT,
    PRIMARY KEY (job_id, attempt)
);
CREATE TABLE IF NOT EXISTS hone_workers (
    id             TEXT PRIMARY KEY,
    host           TEXT NOT NULL,
    slot           TEXT NOT NULL,
    started_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_heartbeat TIMESTAMPTZ NOT NULL DEFAULT now(),
    lease_ms       DOUBLE PRECISION NOT NULL DEFAULT 30000,
    job_id         BIGINT
);
CREATE TABLE IF NOT EXISTS hone_coordinators (
    run_key   TEXT PRIMARY KEY,
    owner     TEXT NOT NULL,
    heartbeat TIMESTAMPTZ NOT NULL DEFAULT now()
);
";

/// An arbitrary constant: the advisory lock that serialises schema creation between processes.
const SCHEMA_LOCK: i64 = 0x686f_6e65;

/// How long a coordinator's registration lasts without a heartbeat.
pub const COORDINATOR_TTL: Duration = Duration::from_secs(30);

/// What went wrong with the queue.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("cannot reach the PostgreSQL store: {0}; check [store] url (postgres://user@host:port/db) and that the server runs")]
    Connect(String),
    #[error("PostgreSQL store: {0}")]
    Db(String),
    #[error("run `{run}` is already coordinated by {owner} (last heartbeat {age_s:.0} s ago); stop that `hone run` first, or wait {ttl} s after it died")]
    CoordinatorBusy {
        run: String,
        owner: String,
        age_s: f64,
        ttl: u64,
    },
    #[error("bad job record: {0}")]
    Corrupt(String),
}

impl From<postgres::Error> for QueueError {
    fn from(e: postgres::Error) -> Self {
        QueueError::Db(e.to_string())
    }
}

/// One verification, as the coordinator posts it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct JobSpec {
    /// The shared git remote the candidate was pushed to: a worker only takes jobs of the
    /// remote it fetches from (several projects may share one database).
    #[serde(default)]
    pub remote: String,
    /// The git ref (on the shared remote) and commit to verify.
    pub git_ref: String,
    pub commit: String,
    /// Run as `/bin/sh -c <command>` in the checkout.
    pub command: String,
    /// Variables set on top of the worker's own environment.
    pub env: Vec<(String, String)>,
    pub timeout_ms: u64,
    pub kill_grace_ms: u64,
    pub max_log_bytes: u64,
    /// The containment the run's `[sandbox]` asks for, which the worker applies to the
    /// command as hone does to a local verifier. Absent in a job of an older coordinator:
    /// none.
    #[serde(default)]
    pub sandbox: JobSandbox,
}

/// How a worker contains a job's command (`[sandbox]` of the run).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct JobSandbox {
    /// Run it under bubblewrap (`kind = "bwrap"`), as a local verifier would be.
    pub bwrap: bool,
    /// With `bwrap`: where bubblewrap cannot run on the worker, give the job back (else run
    /// it without, and say so in the result: `JobResult::uncontained`).
    pub required: bool,
    /// With `bwrap`: it keeps the network.
    pub network: bool,
    /// With `bwrap`: it may write its checkout (not the holdout).
    pub writable: bool,
    /// Resource limits, with or without bubblewrap.
    pub limits: crate::exec::Limits,
    /// With `bwrap`: paths it must not read (`[verify.holdout] hide`, as written). Only the
    /// absolute ones can exist on a worker (a shared filesystem): a relative one names an
    /// untracked path of the repository, which a worker's checkout does not have.
    #[serde(default)]
    pub hide: Vec<String>,
}

/// How a job ended on a worker.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct JobResult {
    /// `code`, `signal`, `timeout` or `failed` (the worker could not run it).
    pub exit: String,
    pub value: i32,
    pub failure: Option<String>,
    /// The verifier's output (capped as the local log is).
    pub log: String,
    /// Tracked files the run modified in its checkout.
    pub modified: Vec<String>,
    pub worker: String,
    pub attempt: i32,
    /// Why the command ran without the bubblewrap the job asked for (bubblewrap cannot run
    /// on that worker, and `[sandbox] required = false` allows it); `None` when it ran as
    /// asked.
    #[serde(default)]
    pub uncontained: Option<String>,
}

/// A job's state as the coordinator sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum JobStatus {
    Queued,
    Claimed { worker: String, attempt: i32 },
    Done(Box<JobResult>),
    Cancelled,
}

/// A job a worker holds.
#[derive(Clone, Debug)]
pub struct Claimed {
    pub id: i64,
    pub run_key: String,
    pub n: u64,
    pub attempt: i32,
    pub spec: JobSpec,
}

/// A worker as `hone status` lists it.
#[derive(Clone, Debug)]
pub struct WorkerInfo {
    pub id: String,
    pub host: String,
    pub slot: String,
    pub heartbeat_age_s: f64,
    pub job: Option<i64>,
    /// Heard from within its lease.
    pub alive: bool,
}

/// A connection to the queue.
pub struct Queue {
    client: Client,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl Queue {
    /// Connects and creates the tables if needed.
    pub fn connect(url: &str) -> Result<Queue, QueueError> {
        let mut client =
            Client::connect(url, NoTls).map_err(|e| QueueError::Connect(e.to_string()))?;
        let mut tx = client.transaction()?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])?;
        tx.batch_execute(SCHEMA)?;
        tx.commit()?;
        Ok(Queue { client })
    }

    /// Registers `owner` as the coordinator of `run_key`, or says who already is. A
    /// registration whose owner ends with `place` is taken over at once: the caller knows
    /// (it holds that checkout's lock) that whoever wrote it there is gone.
    pub fn register_coordinator(
        &mut self,
        run_key: &str,
        owner: &str,
        place: Option<&str>,
    ) -> Result<(), QueueError> {
        let ttl = COORDINATOR_TTL.as_secs_f64();
        let rows = self.client.query(
            "INSERT INTO hone_coordinators (run_key, owner, heartbeat) VALUES ($1, $2, now())
             ON CONFLICT (run_key) DO UPDATE SET owner = EXCLUDED.owner, heartbeat = now()
             WHERE hone_coordinators.owner = EXCLUDED.owner
                OR hone_coordinators.heartbeat < now() - make_interval(secs => $3::float8)
                OR ($4::text <> '' AND right(hone_coordinators.owner, length($4::text)) = $4::text)
             RETURNING owner",
            &[&run_key, &owner, &ttl, &place.unwrap_or("")],
        )?;
        if !rows.is_empty() {
            return Ok(());
        }
        let row = self.client.query_one(
            "SELECT owner, EXTRACT(EPOCH FROM now() - heartbeat)::float8 FROM hone_coordinators WHERE run_key = $1",
            &[&run_key],
        )?;
        Err(QueueError::CoordinatorBusy {
            run: run_key.to_string(),
            owner: row.get(0),
            age_s: row.get(1),
            ttl: COORDINATOR_TTL.as_secs(),
        })
    }

    /// Renews a coordinator's registration; false if another coordinator took the run over.
    pub fn coordinator_heartbeat(
        &mut self,
        run_key: &str,
        owner: &str,
    ) -> Result<bool, QueueError> {
        let n = self.client.execute(
            "UPDATE hone_coordinators SET heartbeat = now() WHERE run_key = $1 AND owner = $2",
            &[&run_key, &owner],
        )?;
        Ok(n == 1)
    }

    /// Ends a coordinator's registration.
    pub fn release_coordinator(&mut self, run_key: &str, owner: &str) -> Result<(), QueueError> {
        self.client.execute(
            "DELETE FROM hone_coordinators WHERE run_key = $1 AND owner = $2",
            &[&run_key, &owner],
        )?;
        Ok(())
    }

    /// Posts a job; returns its id.
    pub fn submit(&mut self, run_key: &str, n: u64, spec: &JobSpec) -> Result<i64, QueueError> {
        let text = serde_json::to_string(spec).map_err(|e| QueueError::Corrupt(e.to_string()))?;
        let n = i64::try_from(n).map_err(|_| QueueError::Corrupt("experiment number".into()))?;
        let row = self.client.query_one(
            "INSERT INTO hone_jobs (run_key, n, spec, remote) VALUES ($1, $2, $3, $4) RETURNING id",
            &[&run_key, &n, &text, &spec.remote],
        )?;
        Ok(row.get(0))
    }

    /// A job's state.
    pub fn status(&mut self, id: i64) -> Result<JobStatus, QueueError> {
        let row = self.client.query_one(
            "SELECT state, worker, attempt, result FROM hone_jobs WHERE id = $1",
            &[&id],
        )?;
        let state: String = row.get(0);
        Ok(match state.as_str() {
            "queued" => JobStatus::Queued,
            "claimed" => JobStatus::Claimed {
                worker: row.get::<_, Option<String>>(1).unwrap_or_default(),
                attempt: row.get(2),
            },
            "done" => {
                let text: Option<String> = row.get(3);
                let result = serde_json::from_str(text.as_deref().unwrap_or(""))
                    .map_err(|e| QueueError::Corrupt(format!("job {id}'s result: {e}")))?;
                JobStatus::Done(Box::new(result))
            }
            _ => JobStatus::Cancelled,
        })
    }

    /// Withdraws a job that is not done; a worker running it notices at its next heartbeat.
    pub fn cancel(&mut self, id: i64) -> Result<(), QueueError> {
        self.client.execute(
            "UPDATE hone_jobs SET state = 'cancelled', finished_at = now() WHERE id = $1 AND state IN ('queued', 'claimed')",
            &[&id],
        )?;
        Ok(())
    }

    /// Withdraws every unfinished job of an experiment (what a crashed coordinator left).
    pub fn cancel_experiment(&mut self, run_key: &str, n: u64) -> Result<u64, QueueError> {
        let n = i64::try_from(n).map_err(|_| QueueError::Corrupt("experiment number".into()))?;
        Ok(self.client.execute(
            "UPDATE hone_jobs SET state = 'cancelled', finished_at = now() WHERE run_key = $1 AND n = $2 AND state IN ('queued', 'claimed')",
            &[&run_key, &n],
        )?)
    }

    /// Records a worker (or refreshes it).
    pub fn register_worker(
        &mut self,
        id: &str,
        host: &str,
        slot: &str,
        lease: Duration,
    ) -> Result<(), QueueError> {
        self.client.execute(
            "INSERT INTO hone_workers (id, host, slot, lease_ms) VALUES ($1, $2, $3, $4)
             ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host, slot = EXCLUDED.slot,
                 lease_ms = EXCLUDED.lease_ms, last_heartbeat = now(), job_id = NULL",
            &[&id, &host, &slot, &ms(lease)],
        )?;
        Ok(())
    }

    /// Claims the oldest claimable job of `remote`: queued, or claimed by a worker whose lease
    /// ran out.
    pub fn claim(
        &mut self,
        worker: &str,
        remote: &str,
        lease: Duration,
    ) -> Result<Option<Claimed>, QueueError> {
        let mut tx = self.client.transaction()?;
        let row = tx.query_opt(
            "SELECT id, attempt, worker FROM hone_jobs
             WHERE remote = $1 AND (state = 'queued' OR (state = 'claimed' AND lease_until < now()))
             ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED",
            &[&remote],
        )?;
        let Some(row) = row else {
            tx.commit()?;
            return Ok(None);
        };
        let id: i64 = row.get(0);
        let previous: i32 = row.get(1);
        if previous > 0 {
            tx.execute(
                "UPDATE hone_job_attempts SET ended_at = now(), outcome = 'lease expired'
                 WHERE job_id = $1 AND attempt = $2 AND ended_at IS NULL",
                &[&id, &previous],
            )?;
        }
        let row = tx.query_one(
            "UPDATE hone_jobs SET state = 'claimed', attempt = attempt + 1, worker = $2,
                 lease_until = now() + make_interval(secs => $3::float8 / 1000.0)
             WHERE id = $1 RETURNING run_key, n, attempt, spec",
            &[&id, &worker, &ms(lease)],
        )?;
        let attempt: i32 = row.get(2);
        tx.execute(
            "INSERT INTO hone_job_attempts (job_id, attempt, worker) VALUES ($1, $2, $3)",
            &[&id, &attempt, &worker],
        )?;
        tx.execute(
            "UPDATE hone_workers SET job_id = $2, last_heartbeat = now() WHERE id = $1",
            &[&worker, &id],
        )?;
        tx.commit()?;
        let spec_text: String = row.get(3);
        let spec = serde_json::from_str(&spec_text)
            .map_err(|e| QueueError::Corrupt(format!("job {id}'s spec: {e}")))?;
        Ok(Some(Claimed {
            id,
            run_key: row.get(0),
            n: u64::try_from(row.get::<_, i64>(1)).unwrap_or(0),
            attempt,
            spec,
        }))
    }

    /// Renews the lease of a held job; false when the job is no longer this attempt's (it was
    /// cancelled, or the lease ran out and another worker took it): kill the verifier.
    pub fn heartbeat(
        &mut self,
        worker: &str,
        job: Option<(i64, i32)>,
        lease: Duration,
    ) -> Result<bool, QueueError> {
        self.client.execute(
            "UPDATE hone_workers SET last_heartbeat = now() WHERE id = $1",
            &[&worker],
        )?;
        let Some((id, attempt)) = job else {
            return Ok(true);
        };
        let n = self.client.execute(
            "UPDATE hone_jobs SET lease_until = now() + make_interval(secs => $4::float8 / 1000.0)
             WHERE id = $1 AND worker = $2 AND attempt = $3 AND state = 'claimed'",
            &[&id, &worker, &attempt, &ms(lease)],
        )?;
        Ok(n == 1)
    }

    /// Delivers a result; false (and nothing written) when this attempt no longer holds the
    /// job, so a verification is never decided twice.
    pub fn finish(&mut self, id: i64, result: &JobResult) -> Result<bool, QueueError> {
        let text = serde_json::to_string(result).map_err(|e| QueueError::Corrupt(e.to_string()))?;
        let mut tx = self.client.transaction()?;
        let n = tx.execute(
            "UPDATE hone_jobs SET state = 'done', result = $4, finished_at = now()
             WHERE id = $1 AND worker = $2 AND attempt = $3 AND state = 'claimed'",
            &[&id, &result.worker, &result.attempt, &text],
        )?;
        let outcome = if n == 1 {
            result.exit.as_str()
        } else {
            "superseded"
        };
        // An attempt already ended (its lease ran out, it was released) keeps that outcome.
        tx.execute(
            "UPDATE hone_job_attempts SET ended_at = now(), outcome = $3
             WHERE job_id = $1 AND attempt = $2 AND ended_at IS NULL",
            &[&id, &result.attempt, &outcome],
        )?;
        tx.execute(
            "UPDATE hone_workers SET job_id = NULL WHERE id = $1",
            &[&result.worker],
        )?;
        tx.commit()?;
        Ok(n == 1)
    }

    /// Gives a held job back to the queue (the worker could not run it: its own problem, not
    /// the candidate's), recording why; false if the attempt no longer held it.
    pub fn release(
        &mut self,
        id: i64,
        worker: &str,
        attempt: i32,
        why: &str,
    ) -> Result<bool, QueueError> {
        let mut tx = self.client.transaction()?;
        let n = tx.execute(
            "UPDATE hone_jobs SET state = 'queued', lease_until = NULL, worker = NULL
             WHERE id = $1 AND worker = $2 AND attempt = $3 AND state = 'claimed'",
            &[&id, &worker, &attempt],
        )?;
        tx.execute(
            "UPDATE hone_job_attempts SET ended_at = now(), outcome = $3 WHERE job_id = $1 AND attempt = $2",
            &[&id, &attempt, &format!("released: {why}")],
        )?;
        tx.execute(
            "UPDATE hone_workers SET job_id = NULL WHERE id = $1",
            &[&worker],
        )?;
        tx.commit()?;
        Ok(n == 1)
    }

    /// Every attempt at a job: (attempt, worker, outcome).
    pub fn attempts(&mut self, id: i64) -> Result<Vec<(i32, String, Option<String>)>, QueueError> {
        Ok(self
            .client
            .query(
                "SELECT attempt, worker, outcome FROM hone_job_attempts WHERE job_id = $1 ORDER BY attempt",
                &[&id],
            )?
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect())
    }

    /// The workers seen recently, newest heartbeat first.
    pub fn workers(&mut self) -> Result<Vec<WorkerInfo>, QueueError> {
        Ok(self
            .client
            .query(
                "SELECT id, host, slot, EXTRACT(EPOCH FROM now() - last_heartbeat)::float8, job_id, lease_ms
                 FROM hone_workers ORDER BY last_heartbeat DESC",
                &[],
            )?
            .iter()
            .map(|r| WorkerInfo {
                id: r.get(0),
                host: r.get(1),
                slot: r.get(2),
                heartbeat_age_s: r.get(3),
                job: r.get(4),
                alive: r.get::<_, f64>(3) * 1000.0 <= r.get::<_, f64>(5),
            })
            .collect())
    }

    /// Removes a worker's registration (a clean exit).
    pub fn unregister_worker(&mut self, id: &str) -> Result<(), QueueError> {
        self.client
            .execute("DELETE FROM hone_workers WHERE id = $1", &[&id])?;
        Ok(())
    }
}

/// A coordinator's registration for one run, kept fresh by a background heartbeat and
/// released when dropped.
pub struct Coordination {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Coordination {
    /// Registers `owner` as the coordinator of `run_key` (or fails with who is; see
    /// [`Queue::register_coordinator`] for `place`) and starts the heartbeat.
    pub fn start(
        url: &str,
        run_key: &str,
        owner: &str,
        place: Option<&str>,
    ) -> Result<Coordination, QueueError> {
        use std::sync::atomic::{AtomicBool, Ordering};
        let mut queue = Queue::connect(url)?;
        queue.register_coordinator(run_key, owner, place)?;
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let (run_key, owner) = (run_key.to_string(), owner.to_string());
        let thread = std::thread::spawn(move || {
            let beat = COORDINATOR_TTL / 6;
            let mut last = std::time::Instant::now();
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                if last.elapsed() >= beat {
                    last = std::time::Instant::now();
                    // A failed heartbeat is retried at the next beat; the registration only
                    // lapses after COORDINATOR_TTL without one.
                    let _ = queue.coordinator_heartbeat(&run_key, &owner);
                }
            }
            let _ = queue.release_coordinator(&run_key, &owner);
        });
        Ok(Coordination {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Coordination {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
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
        let mut q = Queue::connect(&url).unwrap();
        let id = q.submit("r#t", 1, &job("R")).unwrap();
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
        assert!(!q.finish(id, &result("a", 1)).unwrap());
        assert_eq!(
            q.status(id).unwrap(),
            JobStatus::Claimed {
                worker: "b".into(),
                attempt: 2
            }
        );
        // b gives it back (its own problem); c finishes it, once.
        assert!(q.release(id, "b", 2, "no disk").unwrap());
        let c = q.claim("c", "R", Duration::from_secs(60)).unwrap().unwrap();
        assert_eq!(c.attempt, 3);
        assert!(q.finish(id, &result("c", 3)).unwrap());
        assert!(!q.finish(id, &result("c", 3)).unwrap(), "decided once");
        match q.status(id).unwrap() {
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
        let id2 = q.submit("r#t", 2, &job("R")).unwrap();
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
}
