//! A candidate's change put onto a best that moved on while it was verified: git's text merge,
//! and for a change of knob literals alone (the knobs optimizer's), the literals replayed
//! onto the best's files, since two knob changes on neighbouring lines are a text conflict
//! but no conflict of configurations.

use std::path::Path;

use super::super::state::archive_ref;
use super::super::{Candidate, Engine, EngineError, Internal, Stop};
use crate::propose::knobs;
use crate::store::{ExperimentRecord, Status};
use crate::workspace::{Git, GitError};

/// The tree of `change` (made on `base`) merged onto `onto`: `Err` with the conflicting paths
/// when neither merge works.
pub(super) fn merge_onto(
    git: &Git,
    base: &str,
    onto: &str,
    change: &str,
) -> Result<Result<String, Vec<String>>, GitError> {
    let paths = match git.merge_onto(base, onto, change)? {
        Ok(tree) => return Ok(Ok(tree)),
        Err(paths) => paths,
    };
    Ok(replay_knobs(git, base, onto, change)?.ok_or(paths))
}

/// `change`'s files, each `base`'s with knob literals changed and nothing else, with those
/// literals written onto `onto`'s versions; `None` when one is more than that.
fn replay_knobs(
    git: &Git,
    base: &str,
    onto: &str,
    change: &str,
) -> Result<Option<String>, GitError> {
    let text = |commit: &str, path: &str| {
        git.file_at(commit, path)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
    };
    let mut files = Vec::new();
    for c in git.changes(base, change)? {
        let (Some(before), Some(after), Some(there)) = (
            text(base, &c.path),
            text(change, &c.path),
            text(onto, &c.path),
        ) else {
            return Ok(None);
        };
        let Some(merged) = knobs::replay_literals(&c.path, &before, &after, &there) else {
            return Ok(None);
        };
        files.push((c.path, merged.into_bytes()));
    }
    if files.is_empty() {
        return Ok(None);
    }
    git.tree_with(onto, &files).map(Some)
}

impl Engine<'_> {
    /// A candidate (made on #`parent_n`) whose own code beat the moved best `best` (at
    /// `onto`): measured on exactly that code already, it is judged again against the best
    /// with its change counted from there (a simplification may be none from there), and kept
    /// when it still wins, its commit made again on top of the best so that the branch stays a
    /// line. Its number is then below the best's: the best is the keep decided last
    /// ([`crate::store::best_experiment`]). `how` says what its code is to the best's (the
    /// merge of its change onto the best, or its own code, which undoes a change of the best's
    /// it lacks).
    pub(super) fn keep_on_moved_best(
        &mut self,
        mut cand: Candidate,
        best: ExperimentRecord,
        (onto, wt): (&str, &Path),
        parent_n: u64,
        how: &str,
    ) -> Result<Option<Stop>, EngineError> {
        let n = cand.rec.n;
        let (Some(old), Some(tree)) = (cand.rec.candidate_commit.clone(), cand.rec.tree.clone())
        else {
            // A candidate that beat the best was verified, so it has both.
            return Err(Internal::NoBest.into());
        };
        let git = &self.verifier.git;
        let changes = git.changes(onto, &old)?;
        cand.rec.files_changed = changes.len() as u64;
        cand.rec.lines_added = changes.iter().map(|c| c.added).sum();
        cand.rec.lines_deleted = changes.iter().map(|c| c.deleted).sum();
        let (status, why) = self
            .judge()
            .verdict(&mut cand.rec, None, None, best.objective);
        if status != Status::Keep {
            let reason = format!(
                "beat its parent #{parent_n} and the current best #{} while it ran, but counted from #{} its change is not kept: {why}",
                best.n, best.n
            );
            return self.conclude(cand, wt, Status::Discard, reason, None);
        }
        let title = if cand.rec.description.is_empty() {
            "candidate"
        } else {
            &cand.rec.description
        };
        let message = format!(
            "hone #{n}: {title}\n\nHone-Run: {}\nHone-Experiment: {n}\n",
            self.run.tag
        );
        let git = &self.verifier.git;
        let commit = git.commit_with_message(&tree, onto, &message)?;
        // Its archive ref at once (an unreferenced commit is what `git gc --prune=now`
        // deletes), from the commit it held; recovery takes the ref's commit when the row
        // still names the old one (the same tree).
        git.update_ref(&archive_ref(&self.run.tag, n), &commit, Some(&old))?;
        cand.rec.candidate_commit = Some(commit);
        cand.rec.parent_commit = onto.to_string();
        cand.parent = onto.to_string();
        cand.best = Some(best);
        let reason = format!("{why}; made on #{parent_n} while the best moved on, {how}");
        self.conclude(cand, wt, Status::Keep, reason, None)
    }
}
