//! Level 1.5: a typed [`SearchStrategy`] revised every `[outer] strategy_every` experiments
//! from the trace, by rules (no model is asked):
//!
//! - more than half of the recent window failed (crash, timeout, violation, invalid,
//!   rejected): exploit with half-size steps, and say so;
//! - no keep in the window: explore with double-size steps;
//! - otherwise: exploit with half-size steps around the best;
//! - knobs changed in at least [`FREEZE_AFTER`] recent experiments, none of them a keep, are
//!   frozen for the next period (at most `[outer] max_frozen`, the most often tried first).
//!
//! The window is the last `2 × strategy_every` experiments. The strategy runs as a mechanism
//! named `strategy`, so its guidance and revisions are recorded like any other's.

use std::collections::BTreeMap;

use super::{Guidance, Mechanism, Mode, Outcome, View};
use crate::propose::knobs::Config;
use crate::store::{ExperimentRecord, Status};

/// Changes to a knob without a keep before it is frozen.
pub const FREEZE_AFTER: usize = 3;

/// How the inner loop should search for the next period.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct SearchStrategy {
    pub mode: Option<Mode>,
    /// Knobs to leave alone.
    pub frozen: Vec<String>,
    /// Advice for an agent's prompt.
    pub guidance: String,
    /// Multiplies local steps (1: as usual).
    pub step_scale: f64,
}

impl SearchStrategy {
    fn as_guidance(&self) -> Guidance {
        Guidance {
            text: if self.guidance.is_empty() {
                Vec::new()
            } else {
                vec![self.guidance.clone()]
            },
            frozen: self.frozen.clone(),
            step_scale: (self.step_scale != 1.0 && self.step_scale > 0.0)
                .then_some(self.step_scale),
            mode: self.mode,
            ..Guidance::default()
        }
    }

    /// One line for the record.
    pub fn describe(&self) -> String {
        let frozen = if self.frozen.is_empty() {
            "none".to_string()
        } else {
            self.frozen.join(", ")
        };
        format!(
            "mode {}, step x{}, frozen {frozen}: {}",
            self.mode.map_or("default", Mode::as_str),
            self.step_scale,
            self.guidance
        )
    }
}

/// The rule-based controller.
#[derive(Clone, Copy, Debug)]
pub struct RuleController {
    pub every: u64,
    pub max_frozen: usize,
}

impl RuleController {
    /// The strategy for the next period, from the run so far; `free` is the number of knobs
    /// the search moves (at least one of them always stays free).
    pub fn revise(&self, history: &[ExperimentRecord], free: usize) -> SearchStrategy {
        let window: Vec<&ExperimentRecord> = history
            .iter()
            .filter(|e| e.n > 0)
            .rev()
            .take((2 * self.every) as usize)
            .collect();
        let total = window.len();
        let keeps = window.iter().filter(|e| e.status() == Status::Keep).count();
        let failed = window.iter().filter(|e| e.status().is_failure()).count();
        let (mode, step_scale, guidance) = if 2 * failed > total {
            (
                Mode::Exploit,
                0.5,
                format!("{failed} of the last {total} candidates failed before being measured or crashed: make smaller, safer changes"),
            )
        } else if keeps == 0 {
            (
                Mode::Explore,
                2.0,
                format!("no improvement in the last {total} experiments: try a different direction with a larger change"),
            )
        } else {
            (
                Mode::Exploit,
                0.5,
                format!(
                    "{keeps} of the last {total} experiments improved the best: refine around it"
                ),
            )
        };
        SearchStrategy {
            mode: Some(mode),
            frozen: self.frozen(history, total, free),
            guidance,
            step_scale,
        }
    }

    fn frozen(&self, history: &[ExperimentRecord], window: usize, free: usize) -> Vec<String> {
        let mut best: Option<Config> = None;
        let mut tries: BTreeMap<String, (usize, bool)> = BTreeMap::new();
        let start = history.len().saturating_sub(window);
        for (i, e) in history.iter().enumerate() {
            let config = View::config_of(e);
            if let (Some(b), Some(c), true) = (&best, &config, i >= start && e.n > 0) {
                for (k, v) in c {
                    if b.get(k) != Some(v) {
                        let t = tries.entry(k.clone()).or_default();
                        t.0 += 1;
                        t.1 |= e.status() == Status::Keep;
                    }
                }
            }
            if matches!(e.status(), Status::Baseline | Status::Keep) {
                best = config.or(best);
            }
        }
        let mut candidates: Vec<(usize, String)> = tries
            .into_iter()
            .filter(|(_, (count, kept))| *count >= FREEZE_AFTER && !kept)
            .map(|(k, (count, _))| (count, k))
            .collect();
        candidates.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        candidates
            .into_iter()
            .take(self.max_frozen.min(free.saturating_sub(1)))
            .map(|(_, k)| k)
            .collect()
    }
}

/// The strategy as a mechanism: guidance from the current strategy, revised every period.
pub struct Strategy {
    controller: RuleController,
    current: SearchStrategy,
}

impl Strategy {
    pub fn new(every: u64, max_frozen: usize) -> Strategy {
        Strategy {
            controller: RuleController {
                every: every.max(1),
                max_frozen,
            },
            current: SearchStrategy {
                step_scale: 1.0,
                ..SearchStrategy::default()
            },
        }
    }

    pub fn current(&self) -> &SearchStrategy {
        &self.current
    }
}

impl Mechanism for Strategy {
    fn name(&self) -> &str {
        "strategy"
    }

    fn before_propose(&mut self, _view: &View<'_>) -> Guidance {
        self.current.as_guidance()
    }

    fn on_result(&mut self, outcome: &Outcome<'_>) -> Option<String> {
        let n = outcome.record.n;
        if n == 0 || n % self.controller.every != 0 {
            return None;
        }
        let free = crate::propose::knobs::dimensions(outcome.view.knobs).len();
        let next = self.controller.revise(outcome.view.history, free);
        let same = next.mode == self.current.mode
            && next.frozen == self.current.frozen
            && next.step_scale == self.current.step_scale;
        // New wording of the same strategy is not a revision.
        self.current = next;
        if same {
            return None;
        }
        Some(format!("strategy revised: {}", self.current.describe()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::testing::{config, exp, knobs, view};

    #[test]
    fn the_rules_explore_on_a_stall_exploit_after_keeps_and_freeze_dead_knobs() {
        let c = RuleController {
            every: 5,
            max_frozen: 1,
        };
        let base = config(&[("A", 1), ("B", 1), ("C", 1)]);
        let mut history = vec![exp(0, Status::Baseline, Some(1.0), Some(&base))];
        for n in 1..=6u64 {
            let (a, b) = if n % 2 == 0 {
                (1 + n as i64, 1)
            } else {
                (1, 1 + n as i64)
            };
            let cfg = config(&[("A", a), ("B", b), ("C", 1)]);
            history.push(exp(n, Status::Discard, Some(2.0), Some(&cfg)));
        }
        let s = c.revise(&history, 3);
        assert_eq!(s.mode, Some(Mode::Explore));
        assert_eq!(s.step_scale, 2.0);
        // A and B were each changed three times without a keep; the cap freezes one.
        assert_eq!(s.frozen, vec!["A".to_string()]);
        let wide = RuleController {
            every: 5,
            max_frozen: 5,
        };
        assert_eq!(wide.revise(&history, 3).frozen, vec!["A", "B"]);
        assert_eq!(
            wide.revise(&history, 2).frozen,
            vec!["A"],
            "one knob always stays free"
        );
        let kept = config(&[("A", 1), ("B", 1), ("C", 5)]);
        history.push(exp(7, Status::Keep, Some(0.5), Some(&kept)));
        let s = c.revise(&history, 3);
        assert_eq!(s.mode, Some(Mode::Exploit));
        assert_eq!(s.step_scale, 0.5);
        for n in 8..=17u64 {
            history.push(exp(n, Status::Crash, None, None));
        }
        let s = c.revise(&history, 3);
        assert!(s.guidance.contains("failed"), "{}", s.guidance);
    }

    #[test]
    fn it_revises_only_every_period_and_guides_in_between() {
        let k = knobs("A = 1  # hone: int 1..9\n");
        let ed = vec![];
        let mut st = Strategy::new(3, 2);
        let mut history = vec![exp(0, Status::Baseline, Some(1.0), None)];
        assert!(st.before_propose(&view(&history, &k, &ed)).is_empty());
        let mut revised = Vec::new();
        for n in 1..=6u64 {
            history.push(exp(n, Status::Discard, Some(2.0), None));
            let rec = history[history.len() - 1].clone();
            if st
                .on_result(&Outcome {
                    record: &rec,
                    view: view(&history, &k, &ed),
                })
                .is_some()
            {
                revised.push(n);
            }
        }
        assert_eq!(
            revised,
            vec![3],
            "the same strategy again is not a revision"
        );
        let g = st.before_propose(&view(&history, &k, &ed));
        assert_eq!(g.mode, Some(Mode::Explore));
        assert_eq!(g.step_scale, Some(2.0));
    }
}
