//! `restart`: for a search stuck in one idea. After [`STUCK_AFTER`] experiments without a
//! keep since the last restart, the next proposals start again from the best commit (the
//! engine always proposes from it) with a fresh history window: the proposer sees only the
//! best and what came after the restart, so an agent stops circling its old attempts and the
//! knobs optimizer refits its model on the new window (it still never repeats an older
//! configuration).
//!
//! `segment_restart` is the same restart on a fixed schedule: at the end of every `[outer]
//! segment`, whatever happened. It changes nothing else, which makes it the control arm of an
//! ablation (A′ in `hone bench`): the restart/segment schedule of the outer loop without any
//! mechanism choosing anything.

use super::{Guidance, Mechanism, Outcome, View};

/// The guidance of a restart: the proposer's history starts at `from` (when there was one).
fn history_window(from: Option<u64>) -> Guidance {
    Guidance {
        history_from: from,
        ..Guidance::default()
    }
}

/// Experiments without improvement before a restart.
pub const STUCK_AFTER: u64 = 12;

#[derive(Default)]
pub struct Restart {
    /// The experiment from which the proposer's history window starts.
    from: Option<u64>,
}

impl Mechanism for Restart {
    fn name(&self) -> &str {
        "restart"
    }

    fn before_propose(&mut self, view: &View<'_>) -> Guidance {
        let mut g = history_window(self.from);
        if !view.knobs_proposer && self.from == Some(view.n) {
            g.text.push(
                "the search restarted from the best version: earlier attempts are hidden on purpose; approach the problem afresh".into(),
            );
        }
        g
    }

    fn on_result(&mut self, outcome: &Outcome<'_>) -> Option<String> {
        let n = outcome.record.n;
        let view = &outcome.view;
        let since = view.since_improvement();
        let since_restart = self.from.map_or(u64::MAX, |f| n + 1 - f.min(n + 1));
        if since >= STUCK_AFTER && since_restart >= STUCK_AFTER {
            self.from = Some(n + 1);
            let best = view.best().map(|b| b.n).unwrap_or(0);
            return Some(format!(
                "no keep in {since} experiments: restart from the best (#{best}) with a history window from #{}",
                n + 1
            ));
        }
        None
    }
}

/// The restart on a fixed schedule: a fresh history window after every segment.
#[derive(Default)]
pub struct SegmentRestart {
    from: Option<u64>,
}

impl Mechanism for SegmentRestart {
    fn name(&self) -> &str {
        "segment_restart"
    }

    fn before_propose(&mut self, _view: &View<'_>) -> Guidance {
        history_window(self.from)
    }

    fn on_segment_end(&mut self, view: &View<'_>) -> Option<String> {
        let from = view.n + 1;
        self.from = Some(from);
        let best = view.best().map(|b| b.n).unwrap_or(0);
        Some(format!(
            "end of segment: restart from the best (#{best}) with a history window from #{from}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::testing::{exp, finish, kept_if, view};
    use crate::store::Status;

    #[test]
    fn a_stuck_run_restarts_with_a_fresh_window_and_not_again_at_once() {
        let ed = vec!["train.py".to_string()];
        let mut history = vec![exp(0, Status::Baseline, Some(1.0), None)];
        let mut r = Restart::default();
        let mut restarts = Vec::new();
        for n in 1..=(2 * STUCK_AFTER) {
            let rec = exp(n, Status::Discard, Some(2.0), None);
            if finish(&mut r, &mut history, rec, &[], &ed).is_some() {
                restarts.push(n);
            }
        }
        assert_eq!(restarts, vec![STUCK_AFTER, 2 * STUCK_AFTER]);
        let g = r.before_propose(&view(&history, &[], &ed));
        assert_eq!(g.history_from, Some(2 * STUCK_AFTER + 1));
        assert!(g.text[0].contains("restarted"), "{:?}", g.text);
    }

    #[test]
    fn a_run_that_improves_never_restarts() {
        let ed = vec![];
        let mut history = vec![exp(0, Status::Baseline, Some(1.0), None)];
        let mut r = Restart::default();
        for n in 1..=40 {
            let s = kept_if(n % 5 == 0);
            let rec = exp(n, s, Some(1.0), None);
            assert_eq!(finish(&mut r, &mut history, rec, &[], &ed), None);
        }
        assert!(r.before_propose(&view(&history, &[], &ed)).is_empty());
    }

    #[test]
    fn the_scheduled_restart_opens_a_window_at_every_segment_end_only() {
        let ed = vec![];
        let mut history = vec![exp(0, Status::Baseline, Some(1.0), None)];
        let mut r = SegmentRestart::default();
        assert!(r.before_propose(&view(&history, &[], &ed)).is_empty());
        for n in 1..=9 {
            history.push(exp(n, Status::Keep, Some(1.0 - n as f64 / 100.0), None));
        }
        let v = view(&history, &[], &ed);
        assert!(r.on_segment_end(&v).is_some());
        let g = r.before_propose(&view(&history, &[], &ed));
        assert_eq!(g.history_from, Some(v.n + 1));
    }
}
