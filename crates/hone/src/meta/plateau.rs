//! `plateau`: detects stagnation and switches between exploring and exploiting. After
//! [`STALL`] experiments without a keep it asks for exploration (uniform draws for the knobs
//! optimizer, bold and different ideas for an agent); right after a keep it asks for
//! exploitation (local moves around the new best, small refinements) for [`REFINE`]
//! experiments; in between it asks nothing.

use super::{Guidance, Mechanism, Mode, Outcome, View};
use crate::store::Status;

/// Experiments without a keep that make a plateau.
pub const STALL: u64 = 6;
/// Experiments of refinement after a keep.
pub const REFINE: u64 = 3;

#[derive(Default)]
pub struct Plateau {
    mode: Option<Mode>,
}

fn mode_for(view: &View<'_>) -> Option<Mode> {
    let since = view.since_improvement();
    let last_is_keep_run = view
        .history
        .iter()
        .rev()
        .take(since as usize + 1)
        .any(|e| e.status() == Status::Keep);
    if since >= STALL {
        Some(Mode::Explore)
    } else if last_is_keep_run && since < REFINE {
        Some(Mode::Exploit)
    } else {
        None
    }
}

impl Mechanism for Plateau {
    fn name(&self) -> &str {
        "plateau"
    }

    fn on_start(&mut self, view: &View<'_>) -> Option<String> {
        self.mode = mode_for(view);
        None
    }

    fn before_propose(&mut self, view: &View<'_>) -> Guidance {
        let Some(mode) = self.mode else {
            return Guidance::default();
        };
        let mut g = Guidance {
            mode: Some(mode),
            ..Guidance::default()
        };
        if !view.knobs_proposer {
            g.text.push(match mode {
                Mode::Explore => format!(
                    "no improvement in {} experiments: the current line of ideas is exhausted; try a substantially different approach",
                    view.since_improvement()
                ),
                Mode::Exploit => "the last change improved the best: refine it with a small adjustment in the same direction".into(),
            });
        }
        g
    }

    fn on_result(&mut self, outcome: &Outcome<'_>) -> Option<String> {
        let next = mode_for(&outcome.view);
        if next == self.mode {
            return None;
        }
        self.mode = next;
        Some(match next {
            Some(m) => format!("switched to {}", m.as_str()),
            None => "back to the default search".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::testing::{exp, finish, view};

    #[test]
    fn a_stall_switches_to_explore_and_a_keep_to_exploit() {
        let ed = vec![];
        let mut history = vec![exp(0, Status::Baseline, Some(1.0), None)];
        let mut p = Plateau::default();
        let mut switches = Vec::new();
        let statuses = [Status::Discard; 6]
            .into_iter()
            .chain([Status::Keep])
            .chain([Status::Discard; 3]);
        for (i, s) in statuses.enumerate() {
            let n = i as u64 + 1;
            let rec = exp(n, s, Some(1.0), None);
            if let Some(what) = finish(&mut p, &mut history, rec, &[], &ed) {
                switches.push((n, what));
            }
        }
        assert_eq!(
            switches,
            vec![
                (6, "switched to explore".to_string()),
                (7, "switched to exploit".to_string()),
                (10, "back to the default search".to_string()),
            ]
        );
    }

    #[test]
    fn explore_mode_reaches_the_knobs_optimizer_and_the_prompt() {
        let ed = vec![];
        let mut history = vec![exp(0, Status::Baseline, Some(1.0), None)];
        for n in 1..=STALL {
            history.push(exp(n, Status::Discard, Some(2.0), None));
        }
        let mut p = Plateau::default();
        p.on_start(&view(&history, &[], &ed));
        let g = p.before_propose(&view(&history, &[], &ed));
        assert_eq!(g.mode, Some(Mode::Explore));
        assert!(g.text[0].contains("different approach"), "{:?}", g.text);
    }
}
