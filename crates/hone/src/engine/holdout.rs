//! The sealed holdout's measurement: the holdout command (and its sealed `evaluate` stage)
//! on a baseline or a keep, alone (no other candidate's code runs meanwhile), its log out of
//! every worktree and prompt.

use std::path::Path;
use std::time::Duration;

use super::verifier::{Role, Sink, Stage, Verifier};
use super::EngineError;
use super::{Config, Fs};
use crate::exec::{ExecRequest, Exit};
use crate::spec::HoldoutSpec;
use crate::verify::metrics::MetricReader;

impl Verifier {
    /// Runs the holdout command in the worktree (checked out at `commit`); its log stays
    /// outside every worktree and out of every prompt. With `[verify.holdout] evaluate`, the
    /// command only predicts, contained as a verifier is (offline, `hide` out of its reach):
    /// then the protected files are restored and what it left is cut down to `[verify]
    /// outputs`, as for `[verify] evaluate`, and the holdout's value is read only from
    /// `evaluate`, a fresh process started once everything the candidate's code started is
    /// dead (so that code cannot stop the scorer and write a value into its output), the only
    /// one that reads `hide`.
    pub(super) fn measure_holdout(
        &mut self,
        sink: &mut Sink<'_>,
        (n, commit): (u64, &str),
        wt: &Path,
        h: &HoldoutSpec,
        cancel: &dyn Fn() -> bool,
    ) -> Result<Option<f64>, EngineError> {
        let dir = self.paths.run_dir(&self.tag).join("holdout");
        std::fs::create_dir_all(&dir).map_err(|error| Fs::Create {
            path: dir.clone(),
            error,
        })?;
        let env = self.candidate_env(n);
        let mut req = ExecRequest {
            command: h.command.clone(),
            cwd: wt.to_path_buf(),
            env,
            timeout: Some(h.timeout),
            kill_grace: self.spec.verify.kill_grace,
            drain_timeout: Duration::from_secs(2),
            log_path: dir.join(format!("{n}.log")),
            max_log_bytes: self.spec.verify.max_log_bytes,
            limits: self.spec.sandbox.limits(),
            wrapper: self.wrapper(wt, self.spec.sandbox.network, Role::Holdout),
        };
        // With a sealed stage after it, the command is the candidate's code predicting: it
        // runs as a verifier does, offline, and never reads `hide` (only the scorer does), so
        // it has nothing of the holdout's to signal to the next agent through what it shares
        // with it (the page cache of files both can read, say).
        let sealed_stage = h.evaluate.is_some();
        if sealed_stage {
            req.wrapper = self.wrapper(wt, false, Role::Verifier);
        }
        let mut reader = MetricReader::new(&h.metric, None).map_err(Config::Metric)?;
        let lock = self.candidate_code.clone();
        let _alone = lock
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (exit, failure) = self.execute(
            sink,
            (n, &req, "holdout command"),
            (
                Some(commit),
                if sealed_stage {
                    Stage::Predict
                } else {
                    Stage::Holdout
                },
            ),
            // With a sealed stage after it, nothing the candidate's code prints counts.
            &mut |line| {
                if !sealed_stage {
                    reader.feed(line);
                }
            },
            (cancel, &|| false),
        )?;
        if exit != Exit::Code(0) || failure.is_some() {
            return Ok(None);
        }
        if let Some(evaluate) = &h.evaluate {
            if !self.git.worktree_link_ok(wt) {
                return Ok(None);
            }
            self.seal_for_evaluation(wt, commit)?;
            req.command = evaluate.clone();
            // Made now: its scratch directory went with what the prediction left.
            req.wrapper = self.wrapper(wt, self.spec.sandbox.network, Role::Holdout);
            req.log_path = dir.join(format!("{n}.eval.log"));
            super::verifier::sealed_python(&mut req.env);
            let (exit, failure) = self.execute(
                sink,
                (n, &req, "holdout evaluate"),
                // As `[verify] evaluate`: the job names the worktree's HEAD.
                (None, Stage::Holdout),
                &mut |line| reader.feed(line),
                (cancel, &|| false),
            )?;
            if exit != Exit::Code(0) || failure.is_some() {
                return Ok(None);
            }
        }
        let value = reader.finish().values.get(&h.metric).copied();
        Ok(value.filter(|v| v.is_finite()))
    }
}
