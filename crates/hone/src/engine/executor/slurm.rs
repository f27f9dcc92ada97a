//! Verification commands as SLURM batch jobs (`[exec] backend = "slurm"`): the job files go
//! under the run's shared directory, and each job id is recorded as a `slurm_job` event, which
//! is what lets a later hone cancel it.

use std::path::PathBuf;

use crate::exec;
use crate::spec::Spec;
use crate::store::{Status, Store};

use super::super::state::shared_run_dir;
use super::super::{EngineError, Shared, Stage, Tool};
use super::{local, Executor, Failure, Io, Job, Ran, RunPlace};

/// One batch job per verification command.
pub(super) struct Slurm {
    config: exec::slurm::SlurmConfig,
    shared_dir: Option<PathBuf>,
    /// `<shared run dir>/jobs` (none without a shared directory: then commands run here).
    job_dir: Option<PathBuf>,
    tag: String,
}

impl Slurm {
    pub(super) fn new(spec: &Spec) -> Slurm {
        Slurm {
            config: spec.exec.slurm.clone(),
            shared_dir: spec.exec.shared_dir.clone(),
            job_dir: None,
            tag: String::new(),
        }
    }
}

impl Executor for Slurm {
    fn preflight(&self) -> Result<(), EngineError> {
        if !crate::propose::command::on_path("sbatch") {
            return Err(Tool::Sbatch.into());
        }
        if let Some(d) = &self.shared_dir {
            std::fs::create_dir_all(d).map_err(|error| Shared::SharedDir {
                path: d.clone(),
                error,
            })?;
        }
        Ok(())
    }

    fn start(&mut self, place: &RunPlace<'_>) -> Result<(), EngineError> {
        self.job_dir =
            shared_run_dir(place.spec, place.git.root(), place.tag).map(|d| d.join("jobs"));
        self.tag = place.tag.to_string();
        Ok(())
    }

    fn run(&mut self, job: &Job<'_>, io: Io<'_, '_>) -> Ran {
        let Some(job_dir) = &self.job_dir else {
            return local::run_here(job, io);
        };
        let Io {
            sink,
            on_line,
            cancel,
        } = io;
        let (n, what) = (job.n, job.what);
        let name = format!("hone-{}-{n}", self.tag);
        // The job's environment is what SLURM gives it (its allocation, `--gres` devices)
        // plus what hone itself sets: hone's own environment (say, the SLURM_* variables
        // of an allocation hone runs in) never reaches it.
        let mut req = job.req.clone();
        req.env.retain(|(k, _)| (job.travels)(&k.to_string_lossy()));
        let req = &req;
        let submitted =
            exec::slurm::submit(req, &self.config, job_dir, &name).map_err(|error| {
                Stage::Submit {
                    what: what.to_string(),
                    error,
                }
            })?;
        let (store, run_id) = (sink.store, sink.run_id);
        // scancel sends TERM, then KILL after SLURM's own grace: a stop is a cancel here.
        let cancel = &|| cancel() || (job.stop)();
        let outcome = submitted
            .wait(
                on_line,
                &mut |id| {
                    // The record of the job id is what lets a later hone cancel it.
                    let _ = store.best_effort(|s| {
                        s.append_event(
                            run_id,
                            Some(n),
                            "slurm_job",
                            &serde_json::json!({ "job": id }),
                        )
                    });
                },
                cancel,
            )
            .map_err(|error| Stage::Lost {
                what: what.to_string(),
                error,
            })?;
        Ok((
            outcome.exit,
            outcome.failure.map(|reason| Failure {
                status: Status::Crash,
                reason,
            }),
        ))
    }

    fn for_slot(&self) -> Box<dyn Executor> {
        Box::new(Slurm {
            config: self.config.clone(),
            shared_dir: self.shared_dir.clone(),
            job_dir: self.job_dir.clone(),
            tag: self.tag.clone(),
        })
    }
}

/// Cancels the SLURM jobs recorded for experiment `n` (whatever the backend is now: the
/// record says what was submitted); true if any was still there.
pub(in crate::engine) fn cancel_recorded(
    store: &Store,
    run_id: i64,
    n: u64,
) -> Result<bool, EngineError> {
    let jobs: Vec<u64> = store
        .events_of(run_id, n, "slurm_job")?
        .into_iter()
        .filter_map(|data| {
            serde_json::from_str::<serde_json::Value>(&data)
                .ok()?
                .get("job")?
                .as_u64()
        })
        .collect();
    Ok(!jobs.is_empty() && exec::slurm::cancel_stale(&jobs) > 0)
}
