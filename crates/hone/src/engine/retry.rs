//! A candidate cut off by a crash of hone is verified again on resume, not thrown away.
//!
//! A `kill -9`, a power loss or an out-of-memory kill of hone while a candidate's verifier ran
//! leaves that experiment `running`; recovery records it `aborted`. The candidate itself was
//! whole: it passed the gate (and the review) and was committed and archived, and its proposal
//! was paid for. So on resume, before anything new is proposed, the next experiment made on
//! the same parent takes that candidate's files again instead of asking the proposer (no model
//! call, no agent turn: nothing charged for a proposal), and goes through the gate (a
//! reviewer reviews it again), the verifier and the decision as any candidate does. Its
//! description says whose candidate it is.
//!
//! Only once: a candidate that was already such a second attempt is not tried a third time (a
//! candidate whose verification is what brings hone down would otherwise do it on every
//! resume). One cut off in the gate or the review goes through them again; one cut off in its
//! proposal has no commit yet, so nothing to take again. Nor is one the user interrupted
//! (Ctrl-C twice) taken again: that one is recorded by the loop, not by recovery. The queue
//! lives in the resumed session: a session that stops before the next proposal (a spent time
//! budget) drops it, and says so when it ends.

use std::path::Path;

use crate::propose::Proposal;
use crate::store::ExperimentRecord;

use super::{Engine, EngineError, Event};

/// What a second attempt's description contains (how recovery knows one). A proposer that
/// writes it into its own description only cancels its own candidate's second attempt.
const AGAIN: &str = "(verified again: experiment";

/// A candidate to verify again.
#[derive(Clone, Debug)]
pub(super) struct Retry {
    /// The experiment that was cut off.
    n: u64,
    parent: String,
    commit: String,
    description: String,
    config: Option<serde_json::Value>,
}

/// The second attempt at recovery's aborted experiment `e`, if it gets one: it had a
/// candidate (not the baseline's commit) and was not a second attempt itself.
pub(super) fn retry_of(e: &ExperimentRecord) -> Option<Retry> {
    let commit = e.candidate_commit.clone()?;
    if commit == e.parent_commit || e.description.contains(AGAIN) {
        return None;
    }
    Some(Retry {
        n: e.n,
        parent: e.parent_commit.clone(),
        commit,
        description: e.description.clone(),
        config: e.config.clone(),
    })
}

/// The words a second attempt at experiment `n`'s candidate ends its description with.
pub fn verified_again_words(n: u64) -> String {
    format!("{AGAIN} {n}'s run was cut off when hone stopped)")
}

/// Whether `e`, an experiment left `running` by a hone that is no longer at work, will have its
/// candidate verified again when the run resumes (`hone status` says so).
pub fn verified_again_on_resume(e: &ExperimentRecord) -> bool {
    retry_of(e).is_some()
}

impl Engine<'_> {
    /// The proposal of experiment `n` when a cut-off candidate made on `parent` (the best's
    /// commit) waits, the oldest first: `wt`, reset to `parent`, gets its files, as the
    /// proposer's edits left them. `None`: the proposer is asked. Those made on another parent
    /// are dropped, said: the best moved on since.
    pub(super) fn take_retry(
        &mut self,
        n: u64,
        wt: &Path,
        parent: &str,
    ) -> Result<Option<Proposal>, EngineError> {
        // The best only moves on: one made on another parent never gets its turn.
        let (waiting, stale): (Vec<Retry>, Vec<Retry>) = std::mem::take(&mut self.retries)
            .into_iter()
            .partition(|r| r.parent == parent);
        for r in stale {
            self.emit(Event::Note {
                message: format!(
                    "experiment {}'s candidate, cut off when hone stopped, is not verified again: the best moved on since it was made",
                    r.n
                ),
            });
        }
        let mut waiting = waiting.into_iter();
        let Some(r) = waiting.next() else {
            return Ok(None);
        };
        self.retries = waiting.collect();
        // HEAD and the index stay the parent's: the snapshot sees the candidate's changes.
        if let Err(e) = self.verifier.git.materialize(wt, &r.commit) {
            // Its commit is gone (a `git gc` since, say): the proposer is asked instead.
            self.emit(Event::Warning {
                message: format!(
                    "experiment {n}: experiment {}'s candidate could not be restored to verify it again ({e}); a new one is proposed",
                    r.n
                ),
            });
            self.verifier.git.reset_worktree(wt, parent)?;
            return Ok(None);
        }
        self.emit(Event::Note {
            message: format!(
                "experiment {n}: experiment {}'s candidate, cut off when hone stopped, is verified again (no new proposal)",
                r.n
            ),
        });
        let again = verified_again_words(r.n);
        Ok(Some(Proposal {
            description: if r.description.is_empty() {
                again
            } else {
                format!("{} {again}", r.description)
            },
            config: r.config,
            cost_usd: 0.0,
            source: None,
            in_place: false,
        }))
    }
}

impl Engine<'_> {
    /// The run stops with candidates still waiting to be verified again: each is said (the
    /// next resume does not take them up; their records stay `aborted`).
    pub(super) fn drop_retries(&mut self) {
        for r in std::mem::take(&mut self.retries) {
            self.emit(Event::Warning {
                message: format!(
                    "experiment {}'s candidate, cut off when hone stopped, was not verified again: the run stopped first (its commit is `{}`, under refs/hone/)",
                    r.n, r.commit
                ),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aborted(candidate: Option<&str>, description: &str) -> ExperimentRecord {
        ExperimentRecord {
            n: 4,
            parent_commit: "p".into(),
            candidate_commit: candidate.map(String::from),
            description: description.into(),
            ..Default::default()
        }
    }

    #[test]
    fn only_a_committed_candidate_is_verified_again_and_only_once() {
        let e = aborted(Some("c"), "lower the rate");
        let r = retry_of(&e).expect("a second attempt");
        assert_eq!((r.n, r.parent.as_str(), r.commit.as_str()), (4, "p", "c"));
        // No candidate commit (cut off in its proposal), or the baseline's.
        assert!(retry_of(&aborted(None, "x")).is_none());
        assert!(retry_of(&aborted(Some("p"), "baseline")).is_none());
        // A second attempt cut off in its turn gets no third.
        let again = format!("lower the rate {AGAIN} 3's run was cut off when hone stopped)");
        assert!(retry_of(&aborted(Some("c"), &again)).is_none());
    }
}
