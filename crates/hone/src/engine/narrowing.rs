//! The run's narrowing log kept as the run goes (`store::narrowings`): where crashes narrowed
//! a knob's explored range, each change with the experiment after which it happened, so that
//! `hone show N` reads a few rows instead of every configuration up to N.
//!
//! The log follows the run's experiments in the order of their numbers, as far as the first
//! one still running: in a parallel run an experiment that finishes before an earlier one
//! waits for it, so the log is the one a reader going through the finished run in order
//! would work out ([`propose::optimizer::RunNarrowings`], the same code). It is rebuilt from
//! the store whenever a run opens (after recovery has settled what a crash left), and
//! advanced in the transaction of every outcome.

use crate::propose::optimizer::RunNarrowings;
use crate::store::{NarrowingChange, Status, Store, StoreError};

/// Where the run's narrowing log stands: the narrowings worked out over its first `upto`
/// experiments.
#[derive(Default)]
pub(super) struct NarrowingLog {
    narrowings: RunNarrowings,
    upto: u64,
}

impl NarrowingLog {
    /// The run's log worked out again from its experiments and written in place of the one
    /// stored (one pass over the configurations, when the run opens).
    pub(super) fn rebuild(store: &Store, run_id: i64) -> Result<NarrowingLog, StoreError> {
        let mut log = NarrowingLog::default();
        let changes = log.read(store, run_id)?;
        store.rewrite_narrowing_log(run_id, &changes, log.upto)?;
        Ok(log)
    }

    /// Adds to the log the experiments settled since it was last advanced (none, one, or
    /// several when an earlier one of a parallel run has just finished). Called inside the
    /// transaction that records an outcome.
    pub(super) fn advance(&mut self, store: &Store, run_id: i64) -> Result<(), StoreError> {
        let before = self.upto;
        let changes = self.read(store, run_id)?;
        if self.upto != before {
            store.append_narrowing_log(run_id, &changes, self.upto)?;
        }
        Ok(())
    }

    /// The changes after each experiment from `upto` on, as far as the first one running
    /// (or missing). Read a window at a time, so that an experiment that runs long in a
    /// parallel run costs each outcome recorded meanwhile one window, not the rest of the run.
    fn read(&mut self, store: &Store, run_id: i64) -> Result<Vec<NarrowingChange>, StoreError> {
        let mut changes = Vec::new();
        loop {
            let from = self.upto;
            let mut stopped = false;
            let (narrowings, upto) = (&mut self.narrowings, &mut self.upto);
            store.each_configuration_from(run_id, from, Some(from + WINDOW - 1), &mut |e| {
                if stopped || e.n != *upto || e.status() == Status::Running {
                    stopped = true;
                    return;
                }
                changes.extend(narrowings.next_changes(&e));
                *upto += 1;
            })?;
            if stopped || self.upto < from + WINDOW {
                return Ok(changes);
            }
        }
    }
}

/// How many experiments [`NarrowingLog`] reads at a time.
const WINDOW: u64 = 1024;
