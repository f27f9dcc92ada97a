//! Verification commands on remote `hone worker` processes (`[exec] backend = "workers"`): the
//! candidate's commit is pushed to `[exec] remote`, the job posted to the shared store's
//! queue, and its result awaited (see `crate::queue`).

use std::time::{Duration, Instant};

use crate::exec::Exit;
use crate::queue::{JobResult, JobSpec, JobStatus, Queue, QueueError, QueueKey};
use crate::spec::Spec;
use crate::store::Status;
use crate::workspace::{matches_any, Git};

use super::super::state::archive_ref;
use super::super::verifier::Sink;
use super::super::{EngineError, Event, Fs, Internal, Shared};
use super::{Executor, Failure, Io, Job, Ran, RunPlace};

/// How waiting for a posted job ended.
enum Waited {
    /// Cancelled here (the job is cancelled in the queue).
    Cancelled,
    Done(Box<JobResult>),
}

/// Jobs posted to the queue of the store at `url`.
pub(super) struct Workers {
    url: String,
    remote: String,
    protected: Vec<String>,
    git: Option<Git>,
    tag: String,
    key: String,
    /// What jobs are signed with and results checked against (`HONE_QUEUE_KEY`), read when
    /// the run opens.
    sign: Option<QueueKey>,
    queue: Option<Queue>,
}

impl Workers {
    pub(super) fn new(spec: &Spec) -> Workers {
        Workers {
            url: spec.exec.store_url.clone().unwrap_or_default(),
            remote: spec.exec.remote.clone().unwrap_or_default(),
            protected: spec.loop_.protected.clone(),
            git: None,
            tag: String::new(),
            key: String::new(),
            sign: None,
            queue: None,
        }
    }

    fn connected(&self) -> Result<Queue, EngineError> {
        let key = match &self.sign {
            Some(k) => k.clone(),
            None => QueueKey::from_env().map_err(Shared::Queue)?,
        };
        Ok(Queue::connect(&self.url)
            .map_err(Shared::Queue)?
            .with_key(key))
    }
}

impl Executor for Workers {
    fn preflight(&self) -> Result<(), EngineError> {
        // Before anything is opened: a run whose jobs no worker would run says so at once.
        QueueKey::from_env().map_err(Shared::Queue)?;
        Ok(())
    }

    fn start(&mut self, place: &RunPlace<'_>) -> Result<(), EngineError> {
        self.sign = Some(QueueKey::from_env().map_err(Shared::Queue)?);
        self.queue = Some(self.connected()?);
        self.git = Some(place.git.clone());
        self.tag = place.tag.to_string();
        self.key = place.key.clone();
        Ok(())
    }

    fn run(&mut self, job: &Job<'_>, io: Io<'_, '_>) -> Ran {
        let Io {
            sink,
            on_line,
            cancel,
        } = io;
        if self.queue.is_none() {
            self.queue = Some(self.connected()?);
        }
        let commit = self.push(job)?;
        let result = match self.wait(job, &commit, sink, cancel)? {
            Waited::Cancelled => return Ok((Exit::Cancelled, None)),
            Waited::Done(r) => r,
        };
        if let Some(why) = &result.uncontained {
            sink.emit(Event::Warning {
                message: format!(
                    "experiment {}: worker {} ran the {} WITHOUT bubblewrap ({why}; [sandbox] required = false allows it)",
                    job.n, result.worker, job.what
                ),
            });
        }
        let req = job.req;
        if let Some(parent) = req.log_path.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        std::fs::write(&req.log_path, &result.log).map_err(|error| Fs::Write {
            path: req.log_path.clone(),
            error,
        })?;
        // Split as a local verifier's output is (a carriage return ends a line for progress).
        crate::exec::each_line(result.log.as_bytes(), on_line);
        Ok(self.outcome(*result))
    }

    fn recover(&mut self, key: &str, n: u64) -> bool {
        self.queue
            .as_mut()
            .is_some_and(|q| q.cancel_experiment(key, n).unwrap_or(0) > 0)
    }

    fn for_slot(&self) -> Box<dyn Executor> {
        // The thread posts its own jobs, on a connection of its own made when it first runs
        // one (the coordinator's registration stays with the coordinating engine).
        Box::new(Workers {
            url: self.url.clone(),
            remote: self.remote.clone(),
            protected: self.protected.clone(),
            git: self.git.clone(),
            tag: self.tag.clone(),
            key: self.key.clone(),
            sign: self.sign.clone(),
            queue: None,
        })
    }
}

impl Workers {
    /// Pushes the commit to be measured to the shared remote, under its archive ref; returns
    /// the commit.
    fn push(&self, job: &Job<'_>) -> Result<String, EngineError> {
        let remote = &self.remote;
        let Some(git) = &self.git else {
            return Err(Internal::NoQueue.into());
        };
        let commit = match job.commit {
            Some(c) => c.to_string(),
            None => git
                .run_in(&job.req.cwd, &["rev-parse", "HEAD"])?
                .trim()
                .to_string(),
        };
        let git_ref = archive_ref(&self.tag, job.n);
        git.run(&[
            "push",
            "-q",
            "--force",
            remote,
            &format!("{commit}:{git_ref}"),
        ])
        .map_err(|error| Shared::Push {
            remote: remote.clone(),
            error,
        })?;
        Ok(commit)
    }

    /// Posts `job` (on `commit`) and waits for its result.
    fn wait(
        &mut self,
        job: &Job<'_>,
        commit: &str,
        sink: &mut Sink<'_>,
        cancel: &dyn Fn() -> bool,
    ) -> Result<Waited, EngineError> {
        let (n, what, req) = (job.n, job.what, job.req);
        let remote = self.remote.clone();
        // The worker's own environment is the base; only what hone itself sets travels.
        let mut env: Vec<(String, String)> = req
            .env
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })
            .filter(|(k, _)| (job.travels)(k))
            .collect();
        env.sort();
        let spec = JobSpec {
            remote: remote.clone(),
            git_ref: archive_ref(&self.tag, n),
            commit: commit.to_string(),
            command: req.command.clone(),
            env,
            timeout_ms: req
                .timeout
                .map(|t| t.as_millis() as u64)
                .unwrap_or(u64::MAX / 2),
            kill_grace_ms: req.kill_grace.as_millis() as u64,
            max_log_bytes: req.max_log_bytes,
            sandbox: job.sandbox.clone(),
        };
        let db = |error: QueueError| Shared::QueueJob {
            what: what.to_string(),
            error,
        };
        let Some(queue) = self.queue.as_mut() else {
            return Err(Internal::NoQueue.into());
        };
        let posted = queue.submit(&self.key, n, &spec).map_err(db)?;
        let id = posted.id;
        let since = Instant::now();
        let mut waiting_noted = false;
        loop {
            if cancel() {
                queue.cancel(id).map_err(db)?;
                return Ok(Waited::Cancelled);
            }
            match queue.status(&posted).map_err(db)? {
                JobStatus::Done(r) => return Ok(Waited::Done(r)),
                JobStatus::Refused { worker, why } => {
                    return Err(db(QueueError::Refused {
                        job: id,
                        worker,
                        why,
                    })
                    .into())
                }
                // This coordinator cancels its own jobs only after it stopped waiting for
                // them: a job cancelled under it was cancelled in the database.
                JobStatus::Cancelled => {
                    return Err(db(QueueError::CancelledElsewhere { job: id }).into())
                }
                JobStatus::Queued
                    if !waiting_noted && since.elapsed() > Duration::from_secs(10) =>
                {
                    waiting_noted = true;
                    sink.emit(Event::Note {
                        message: format!(
                            "experiment {n}: waiting for a worker to claim job {id}; start one with `hone worker --store <url> --repo {remote}` and this run's HONE_QUEUE_KEY"
                        ),
                    });
                }
                _ => {}
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// A finished job's outcome as an exit (and a failure outside it).
    fn outcome(&self, result: JobResult) -> (Exit, Option<Failure>) {
        if let Some(f) = result.failure {
            return (
                Exit::Code(-1),
                Some(Failure {
                    status: Status::Crash,
                    reason: f,
                }),
            );
        }
        if let Some(p) = result
            .modified
            .iter()
            .find(|p| matches_any(&self.protected, p))
        {
            return (
                Exit::Code(0),
                Some(Failure {
                    status: Status::Violation,
                    reason: format!("protected file `{p}` was modified while the verifier ran on worker {}; the measurement is void", result.worker),
                }),
            );
        }
        let exit = match result.exit.as_str() {
            "code" => Exit::Code(result.value),
            "signal" => Exit::Signal(result.value),
            "timeout" => Exit::TimedOut,
            other => {
                return (
                    Exit::Code(-1),
                    Some(Failure {
                        status: Status::Crash,
                        reason: format!("worker {} reported `{other}`", result.worker),
                    }),
                )
            }
        };
        (exit, None)
    }
}
