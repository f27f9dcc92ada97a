//! Repairing what a crash left, when a run is resumed (see the module docs of the engine):
//! each `running` experiment becomes `aborted` (whatever was started for it killed or
//! cancelled), the slots' worktrees go, missing archive refs are written, and a recorded keep
//! whose branch move was lost is applied.

use crate::exec;
use crate::report::best_experiment;
use crate::store::{now, ExperimentRecord, Status};
use crate::workspace::GitError;

use super::executor::slurm;
use super::state::{archive_ref, branch_ref};
use super::{parallel, Engine, EngineError, Event, Mismatch};

impl Engine<'_> {
    /// Repairs what a crash left behind (see the module docs).
    pub(super) fn recover(&mut self) -> Result<(), EngineError> {
        let tag = self.run.tag.clone();
        let mut exps = self.store.experiments(self.run.id)?;
        for e in exps.iter_mut().filter(|e| e.status() == Status::Running) {
            let killed = self.stop_leftovers(e)?;
            e.status = Some(Status::Aborted);
            e.reason = "interrupted: hone stopped during this experiment".into();
            e.finished_at = Some(now());
            self.store.put_experiment(self.run.id, e)?;
            let msg = format!(
                "experiment {} was interrupted; recorded as aborted{}",
                e.n,
                if killed {
                    " (its leftover processes were killed)"
                } else {
                    ""
                }
            );
            self.emit(Event::Warning { message: msg });
        }
        let v = &self.verifier;
        // Parallel slots' worktrees hold what in-flight candidates left: gone with them.
        parallel::clean_slots(&v.git, &v.paths, &v.spec, &tag)?;
        for e in &exps {
            if let Some(c) = &e.candidate_commit {
                let r = archive_ref(&tag, e.n);
                if v.git.ref_target(&r)?.is_none() {
                    v.git.update_ref(&r, c, None)?;
                }
            }
        }
        self.repair_branch(&exps)
    }

    /// Kills or cancels whatever was started for the interrupted experiment `e`: its
    /// recorded process group, anything carrying its job token, its recorded SLURM jobs, and
    /// what the executor still holds for it. True if anything was still there.
    fn stop_leftovers(&mut self, e: &ExperimentRecord) -> Result<bool, EngineError> {
        let mut killed = false;
        if let Some(pid) = e.pid {
            killed = exec::kill_stale_group(pid, e.pid_start);
        }
        // Whatever else was started for it (say, an agent whose pid was not yet recorded
        // when hone died) carries its job token.
        if exec::kill_groups_with_env("HONE_JOB", &self.verifier.job_token(e.n)) > 0 {
            killed = true;
        }
        if slurm::cancel_recorded(&self.store, self.run.id, e.n)? {
            killed = true;
        }
        let key = self.run_key();
        if self.verifier.executor.recover(&key, e.n) {
            killed = true;
        }
        Ok(killed)
    }

    /// Puts the run branch where the records say it is: at the best's commit. A keep recorded
    /// just before a crash may have missed its branch move; anything else is an error.
    fn repair_branch(&mut self, exps: &[ExperimentRecord]) -> Result<(), EngineError> {
        let tag = &self.run.tag;
        let git = &self.verifier.git;
        let branch = branch_ref(tag);
        let expected = best_experiment(exps)
            .and_then(|b| b.candidate_commit.clone())
            .unwrap_or_else(|| self.run.base_commit.clone());
        match git.ref_target(&branch)? {
            Some(head) if head == expected => {}
            Some(head) => {
                // A keep recorded just before a crash may have missed its branch move.
                let last_keep_parent = exps
                    .iter()
                    .rev()
                    .find(|e| e.status() == Status::Keep)
                    .map(|e| e.parent_commit.clone());
                if last_keep_parent.as_deref() == Some(head.as_str()) {
                    git.update_ref(&branch, &expected, Some(&head))?;
                } else {
                    return Err(GitError::RefMoved {
                        name: branch,
                        expected,
                        found: head,
                    }
                    .into());
                }
            }
            None => {
                return Err(Mismatch::BranchDeleted {
                    tag: tag.to_string(),
                    expected: expected.to_string(),
                }
                .into())
            }
        }
        Ok(())
    }

    /// The run's name in a shared store: its repository's key and its tag (with remote
    /// workers, the repository is `[exec] remote` unless `[store] repo` says otherwise).
    pub(super) fn run_key(&self) -> String {
        format!("{}#{}", self.store.repo(), self.run.tag)
    }
}
