//! Verification commands as process groups on this machine (`[exec] backend = "local"`).

use crate::exec;
use crate::spec::Spec;

use super::super::Stage;
use super::{Executor, Io, Job, Ran};

/// Child processes of hone, each in its own process group.
pub(super) struct Local;

impl Local {
    pub(super) fn new(_spec: &Spec) -> Local {
        Local
    }
}

impl Executor for Local {
    fn run(&mut self, job: &Job<'_>, io: Io<'_, '_>) -> Ran {
        run_here(job, io)
    }

    fn for_slot(&self) -> Box<dyn Executor> {
        Box::new(Local)
    }

    fn streams(&self) -> bool {
        true
    }
}

/// Runs `job` here, its process group recorded (so that a later hone can kill it).
pub(super) fn run_here(job: &Job<'_>, io: Io<'_, '_>) -> Ran {
    let Io {
        sink,
        on_line,
        cancel,
    } = io;
    let what = job.what;
    let running = exec::spawn(job.req).map_err(|error| Stage::Start {
        what: what.to_string(),
        error,
    })?;
    sink.store
        .set_experiment_pid(sink.run_id, job.n, running.pid(), running.start_time())?;
    let outcome = running
        .wait_or_stop(on_line, cancel, job.stop)
        .map_err(|error| Stage::Wait {
            what: what.to_string(),
            error,
        })?;
    // Anything the stage started that escaped its process group dies with the stage.
    let token = job.req.env.iter().find(|(k, _)| k == "HONE_JOB");
    exec::kill_leftovers(token.and_then(|(_, v)| v.to_str()));
    Ok((outcome.exit, None))
}
