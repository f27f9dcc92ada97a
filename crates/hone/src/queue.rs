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
//! - **Jobs and results are signed** with a key shared outside the database
//!   (`HONE_QUEUE_KEY`, the same on the coordinator and every worker): a job's signature covers
//!   its run, number and spec, a result's its job's id and signature and the result. A worker
//!   refuses a job whose signature does not match (marked `refused`, never run), and the
//!   coordinator refuses a result whose signature does not match (the run stops), so whoever
//!   can write these tables without the key cannot have a worker run a command the
//!   coordinator did not sign for that row, nor decide a verification (they can still queue a
//!   signed row again, or hold a job back).

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
ALTER TABLE hone_jobs ADD COLUMN IF NOT EXISTS sig TEXT NOT NULL DEFAULT '';
ALTER TABLE hone_jobs ADD COLUMN IF NOT EXISTS result_sig TEXT NOT NULL DEFAULT '';
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

/// The variable that holds the key jobs and results are signed with.
pub const KEY_ENV: &str = "HONE_QUEUE_KEY";

/// The fewest characters a key may have.
const MIN_KEY_CHARS: usize = 16;

/// The secret the coordinator and its workers share (from [`KEY_ENV`]), never stored in the
/// database.
#[derive(Clone)]
pub struct QueueKey(String);

impl std::fmt::Debug for QueueKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("QueueKey(..)")
    }
}

impl QueueKey {
    /// The key in [`KEY_ENV`], or why there is none that can be used.
    pub fn from_env() -> Result<QueueKey, QueueError> {
        QueueKey::new(&std::env::var(KEY_ENV).unwrap_or_default())
    }

    /// `text` as a key: at least [`MIN_KEY_CHARS`] characters, spaces around it ignored.
    pub fn new(text: &str) -> Result<QueueKey, QueueError> {
        let text = text.trim();
        if text.chars().count() < MIN_KEY_CHARS {
            return Err(QueueError::NoKey {
                got: text.chars().count(),
            });
        }
        Ok(QueueKey(text.to_string()))
    }

    fn mac(&self, parts: &[&[u8]]) -> String {
        let mut message = Vec::new();
        for p in parts {
            message.extend_from_slice(&(p.len() as u64).to_be_bytes());
            message.extend_from_slice(p);
        }
        crate::util::hmac_sha256(self.0.as_bytes(), &message)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// A job's signature: its row, run, number and spec (as stored). The row's id is in it, so
    /// a signed job copied into another row is refused.
    fn sign_job(&self, id: i64, run_key: &str, n: i64, spec: &str) -> String {
        self.mac(&[
            b"hone job",
            &id.to_be_bytes(),
            run_key.as_bytes(),
            &n.to_be_bytes(),
            spec.as_bytes(),
        ])
    }

    /// A result's signature: the job's id and signature (so a result answers one job, and the
    /// job the coordinator posted) and the result (as stored).
    fn sign_result(&self, id: i64, job_sig: &str, result: &str) -> String {
        self.mac(&[
            b"hone result",
            &id.to_be_bytes(),
            job_sig.as_bytes(),
            result.as_bytes(),
        ])
    }
}

/// Whether `value` (an environment variable's) holds the queue's key (from [`KEY_ENV`]): what
/// no agent or verifier may see under any name.
pub fn reveals_key(value: &str) -> bool {
    QueueKey::from_env().is_ok_and(|k| value.contains(k.0.as_str()))
}

fn same_sig(a: &str, b: &str) -> bool {
    crate::util::same_bytes(a.as_bytes(), b.as_bytes())
}

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
    #[error("{KEY_ENV} is not set or too short ({got} characters; at least {MIN_KEY_CHARS}): jobs and results of remote workers are signed with it; set the same secret on the coordinator and on every worker, from a file only you can read (e.g. `openssl rand -hex 32 > ~/.hone-queue-key`, then `export {KEY_ENV}=$(cat ~/.hone-queue-key)`)")]
    NoKey { got: usize },
    #[error("job {job} (run `{run}`, experiment {n}) is not signed with this worker's {KEY_ENV}: refused, not run. If the coordinator's key differs, set the same one on both; if no coordinator posted it, someone who can write the database did")]
    UnsignedJob { job: i64, run: String, n: i64 },
    #[error("worker {worker} refused job {job}: {why}. Set the same {KEY_ENV} on this coordinator and on every worker, then run again to resume")]
    Refused {
        job: i64,
        worker: String,
        why: String,
    },
    #[error("job {job} was cancelled in the database, not by this coordinator: someone who can write the database did, or another hone; the run stops (run `hone run` again to resume)")]
    CancelledElsewhere { job: i64 },
    #[error("job {job}'s result is not signed with this coordinator's {KEY_ENV} (its worker's key differs, or someone who can write the database wrote it): refused; set the same key on the coordinator and every worker")]
    ForgedResult { job: i64 },
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
    Claimed {
        worker: String,
        attempt: i32,
    },
    Done(Box<JobResult>),
    Cancelled,
    /// A worker would not run it (its signature did not match the worker's key).
    Refused {
        worker: String,
        why: String,
    },
}

/// A job as the coordinator posted it: its id and signature.
#[derive(Clone, Debug)]
pub struct Posted {
    pub id: i64,
    sig: String,
}

/// A job a worker holds.
#[derive(Clone, Debug)]
pub struct Claimed {
    pub id: i64,
    pub run_key: String,
    pub n: u64,
    pub attempt: i32,
    pub spec: JobSpec,
    /// The job's signature, which its result's signature covers.
    sig: String,
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
    /// What jobs and results are signed with: `None` for a connection that only reads (the
    /// workers `hone status` lists).
    key: Option<QueueKey>,
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
        Ok(Queue { client, key: None })
    }

    /// This connection signs and checks jobs and results with `key`.
    pub fn with_key(mut self, key: QueueKey) -> Queue {
        self.key = Some(key);
        self
    }

    fn key(&self) -> Result<&QueueKey, QueueError> {
        self.key.as_ref().ok_or(QueueError::NoKey { got: 0 })
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

    /// Posts a job, signed.
    pub fn submit(&mut self, run_key: &str, n: u64, spec: &JobSpec) -> Result<Posted, QueueError> {
        let text = serde_json::to_string(spec).map_err(|e| QueueError::Corrupt(e.to_string()))?;
        let n = i64::try_from(n).map_err(|_| QueueError::Corrupt("experiment number".into()))?;
        // The row's id first, so that the signature can cover it.
        let id: i64 = self
            .client
            .query_one(
                "SELECT nextval(pg_get_serial_sequence('hone_jobs', 'id'))",
                &[],
            )?
            .get(0);
        let sig = self.key()?.sign_job(id, run_key, n, &text);
        self.client.execute(
            "INSERT INTO hone_jobs (id, run_key, n, spec, remote, sig) VALUES ($1, $2, $3, $4, $5, $6)",
            &[&id, &run_key, &n, &text, &spec.remote, &sig],
        )?;
        Ok(Posted { id, sig })
    }

    /// A posted job's state; a result whose signature does not answer the job as posted is
    /// refused ([`QueueError::ForgedResult`]).
    pub fn status(&mut self, job: &Posted) -> Result<JobStatus, QueueError> {
        let id = job.id;
        let row = self.client.query_one(
            "SELECT state, worker, attempt, result, result_sig FROM hone_jobs WHERE id = $1",
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
                let text: String = row.get::<_, Option<String>>(3).unwrap_or_default();
                let want = self.key()?.sign_result(id, &job.sig, &text);
                if !same_sig(&want, row.get(4)) {
                    return Err(QueueError::ForgedResult { job: id });
                }
                let result = serde_json::from_str(&text)
                    .map_err(|e| QueueError::Corrupt(format!("job {id}'s result: {e}")))?;
                JobStatus::Done(Box::new(result))
            }
            "refused" => JobStatus::Refused {
                worker: row.get::<_, Option<String>>(1).unwrap_or_default(),
                why: row.get::<_, Option<String>>(3).unwrap_or_default(),
            },
            "cancelled" => JobStatus::Cancelled,
            other => {
                return Err(QueueError::Corrupt(format!(
                    "job {id} is in state `{other}`, which hone never writes"
                )))
            }
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
    /// ran out. A job whose signature does not match this worker's key is marked `refused`
    /// (never run) and returned as [`QueueError::UnsignedJob`].
    pub fn claim(
        &mut self,
        worker: &str,
        remote: &str,
        lease: Duration,
    ) -> Result<Option<Claimed>, QueueError> {
        let key = self.key()?.clone();
        let mut tx = self.client.transaction()?;
        let row = tx.query_opt(
            "SELECT id, attempt, run_key, n, spec, sig FROM hone_jobs
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
        let (run_key, n, spec_text, sig): (String, i64, String, String) =
            (row.get(2), row.get(3), row.get(4), row.get(5));
        if previous > 0 {
            tx.execute(
                "UPDATE hone_job_attempts SET ended_at = now(), outcome = 'lease expired'
                 WHERE job_id = $1 AND attempt = $2 AND ended_at IS NULL",
                &[&id, &previous],
            )?;
        }
        let signed = same_sig(&key.sign_job(id, &run_key, n, &spec_text), &sig);
        let row = tx.query_one(
            "UPDATE hone_jobs SET state = CASE WHEN $4 THEN 'claimed' ELSE 'refused' END,
                 attempt = attempt + 1, worker = $2,
                 lease_until = now() + make_interval(secs => $3::float8 / 1000.0),
                 result = CASE WHEN $4 THEN result ELSE $5 END,
                 finished_at = CASE WHEN $4 THEN finished_at ELSE now() END
             WHERE id = $1 RETURNING attempt",
            &[
                &id,
                &worker,
                &ms(lease),
                &signed,
                &format!("the job's signature does not match the worker's {KEY_ENV}"),
            ],
        )?;
        let attempt: i32 = row.get(0);
        let (outcome, holds) = if signed {
            (None, Some(id))
        } else {
            (Some("refused: bad signature"), None)
        };
        tx.execute(
            "INSERT INTO hone_job_attempts (job_id, attempt, worker, ended_at, outcome)
             VALUES ($1, $2, $3, CASE WHEN $4::text IS NULL THEN NULL ELSE now() END, $4)",
            &[&id, &attempt, &worker, &outcome],
        )?;
        tx.execute(
            "UPDATE hone_workers SET job_id = $2, last_heartbeat = now() WHERE id = $1",
            &[&worker, &holds],
        )?;
        tx.commit()?;
        if !signed {
            return Err(QueueError::UnsignedJob {
                job: id,
                run: run_key,
                n,
            });
        }
        let spec = serde_json::from_str(&spec_text)
            .map_err(|e| QueueError::Corrupt(format!("job {id}'s spec: {e}")))?;
        Ok(Some(Claimed {
            id,
            run_key,
            n: u64::try_from(n).unwrap_or(0),
            attempt,
            spec,
            sig,
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

    /// Delivers a result to `job`, signed; false (and nothing written) when this attempt no
    /// longer holds the job, so a verification is never decided twice.
    pub fn finish(&mut self, job: &Claimed, result: &JobResult) -> Result<bool, QueueError> {
        let id = job.id;
        let text = serde_json::to_string(result).map_err(|e| QueueError::Corrupt(e.to_string()))?;
        let sig = self.key()?.sign_result(id, &job.sig, &text);
        let mut tx = self.client.transaction()?;
        let n = tx.execute(
            "UPDATE hone_jobs SET state = 'done', result = $4, result_sig = $5, finished_at = now()
             WHERE id = $1 AND worker = $2 AND attempt = $3 AND state = 'claimed'",
            &[&id, &result.worker, &result.attempt, &text, &sig],
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
#[path = "queue_tests.rs"]
mod tests;
