//! Someone else's commit on the run branch: a user who checks out `hone/<tag>` and commits
//! on it while the run goes on. hone builds only on commits it measured, so it stops, but it
//! blames no agent and drops nothing: the commit is kept under `refs/hone-user/<tag>/<sha>`,
//! the branch goes back to where the records say it is (so `hone run` resumes), and the
//! error names the commit.
//!
//! Checked between experiments (no candidate code runs then: any move is someone else's)
//! and at the end of an agent's turn or a verifier's run, where a move of the branch alone
//! counts as someone else's only while the branch is checked out in a worktree (hone's own
//! worktrees are always detached); any other move of hone's refs then stays the candidate's
//! `violation`.

use crate::workspace::Git;
use crate::workspace::RefListing;

use super::state::branch_ref;
use super::{Engine, EngineError, Stop};

/// The ref that keeps a commit someone else made on run `tag`'s branch.
pub fn kept_ref(tag: &str, commit: &str) -> String {
    format!("refs/hone-user/{tag}/{commit}")
}

/// The repository's worktrees and the branch each has checked out (`None`: detached).
fn listed(git: &Git) -> Vec<(String, Option<String>)> {
    let out = git
        .run(&["worktree", "list", "--porcelain"])
        .unwrap_or_default();
    let mut found: Vec<(String, Option<String>)> = Vec::new();
    for line in out.lines() {
        if let Some(path) = line.strip_prefix("worktree ") {
            found.push((path.to_string(), None));
        } else if let (Some(b), Some(last)) = (line.strip_prefix("branch "), found.last_mut()) {
            last.1 = Some(b.to_string());
        }
    }
    found
}

/// The user's worktrees now: every worktree of the repository but hone's own (under its
/// state directory).
pub(super) fn worktrees(git: &Git) -> Vec<String> {
    let state = git.root().join(super::state::STATE_DIR);
    listed(git)
        .into_iter()
        .map(|(path, _)| path)
        .filter(|p| !std::path::Path::new(p).starts_with(&state))
        .collect()
}

/// Is `branch` checked out in one of `users` (the user's checkout and their own worktrees,
/// as they were when the run opened)?
fn checked_out(git: &Git, branch: &str, users: &[String]) -> bool {
    listed(git)
        .iter()
        .any(|(path, b)| b.as_deref() == Some(branch) && users.contains(path))
}

impl Engine<'_> {
    /// Between experiments: the run branch should be at `expected`. If it is at another
    /// commit, that commit is kept, the branch put back, and the run stops (see the module
    /// docs). A deleted branch is left to the usual checks.
    pub(super) fn foreign_commit(&mut self, expected: &str) -> Result<Option<Stop>, EngineError> {
        let branch = branch_ref(&self.run.tag);
        let git = self.verifier.git.clone();
        match git.ref_value_raw(&branch)? {
            Some(held) if held == expected => Ok(None),
            Some(held) if self.plain_commit(&held)? => self.keep_foreign(&held, expected).map(Some),
            // Not a commit of its own (an annotated tag, a symbolic ref, a link): nobody's
            // work to keep; the branch is put back as hone had it.
            Some(held) => {
                git.put_ref_back(&branch, Some(expected), &held)?;
                self.emit(super::Event::Warning {
                    message: format!("the run branch {branch} held `{held}`, not a commit; it was put back at {expected}"),
                });
                Ok(None)
            }
            None => Ok(None),
        }
    }

    /// Does `held` (what a ref holds) name a commit itself (not a tag of one, not a link)?
    fn plain_commit(&self, held: &str) -> Result<bool, EngineError> {
        if !crate::workspace::is_full_hex(held) {
            return Ok(false);
        }
        Ok(self.verifier.git.ref_target(held)?.as_deref() == Some(held))
    }

    /// At the end of a turn or a verifier run (`before` and `after`: hone's refs around it):
    /// is the only change a move of the run branch while it is checked out in a worktree? If
    /// so, it is someone else's commit: kept, the branch put back, and the stop returned.
    pub(super) fn foreign_commit_in(
        &mut self,
        before: &RefListing,
        after: &RefListing,
    ) -> Result<Option<Stop>, EngineError> {
        if !self.foreign_move(before, after) {
            return Ok(None);
        }
        let branch = branch_ref(&self.run.tag);
        let (Some(was), Some(now)) = (before.get(&branch), after.get(&branch)) else {
            return Ok(None);
        };
        let (was, now) = (was.to_string(), now.to_string());
        // The listings hold what the branch held: only a commit of its own is someone's work
        // (an annotated tag or a link put there is a move like any other, put back by the
        // caller as a violation).
        if !self.plain_commit(&now)? || !self.plain_commit(&was)? {
            return Ok(None);
        }
        self.keep_foreign(&now, &was).map(Some)
    }

    /// Is the change from `before` to `after` (hone's refs) a move of the run branch alone, to
    /// a commit of its own, while the branch is checked out in a worktree: someone else's
    /// commit?
    pub(super) fn foreign_move(&self, before: &RefListing, after: &RefListing) -> bool {
        let branch = branch_ref(&self.run.tag);
        let not_branch =
            |(n, _): &(std::borrow::Cow<'_, str>, std::borrow::Cow<'_, str>)| *n != branch;
        match (before.get(&branch), after.get(&branch)) {
            (Some(was), Some(now)) => {
                was != now
                    && before
                        .iter()
                        .filter(not_branch)
                        .eq(after.iter().filter(not_branch))
                    && self.plain_commit(&now).unwrap_or(false)
                    && checked_out(&self.verifier.git, &branch, &self.user_worktrees)
            }
            _ => false,
        }
    }

    /// With `[exec] workers`, where some candidate's code is always running: the run branch
    /// should be at `expected`; if it is elsewhere while it is checked out in a worktree,
    /// that is someone else's commit (kept, the branch put back, the stop returned).
    pub(super) fn foreign_commit_checked_out(
        &mut self,
        expected: &str,
    ) -> Result<Option<Stop>, EngineError> {
        let branch = branch_ref(&self.run.tag);
        // What the branch holds: anything but a commit of its own is no one's work, and the
        // put-back of the experiment's refs deals with it.
        match self.verifier.git.ref_value_raw(&branch)? {
            Some(head)
                if head != expected
                    && self.plain_commit(&head)?
                    && checked_out(&self.verifier.git, &branch, &self.user_worktrees) =>
            {
                self.keep_foreign(&head, expected).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Keeps `found` (someone else's commit at the head of the run branch) under
    /// [`kept_ref`], puts the branch back at `expected`, and says so.
    fn keep_foreign(&mut self, found: &str, expected: &str) -> Result<Stop, EngineError> {
        let tag = self.run.tag.clone();
        let git = &self.verifier.git;
        let kept = kept_ref(&tag, found);
        git.update_ref_if_missing(&kept, found)?;
        git.update_ref(&branch_ref(&tag), expected, Some(found))?;
        let subject = git
            .run(&["log", "-1", "--format=%s", found])
            .map(|s| crate::propose::prompt::sanitize(s.trim(), 120))
            .unwrap_or_default();
        Ok(Stop::failed(format!(
            "commit {found} (\"{subject}\") was made on hone/{tag} during the run, not by hone; hone builds only on commits it measured, so the run stops. Nothing is lost: the commit is kept at {kept}, and hone/{tag} is back at {expected}. To go on with that work, `git switch -c <new-branch> {found}` (if you had hone/{tag} checked out, switch away from it first); `hone run --tag {tag}` resumes the run"
        )))
    }
}
