//! `tabu`: rejects a candidate that lies within a distance of a recent failure, before any
//! compute is spent on it.
//!
//! - Knob configurations: the distance is [`crate::propose::knobs::distance`] (the sum of the
//!   per-knob gaps in the unit cube, integers by their bins, choices 0 or 1); within
//!   [`RADIUS`] of any of the last [`TENURE`] failures is tabu: the failure itself and, on a
//!   20-value integer knob, its neighbours one step away along a single knob.
//! - Diffs (agent edits): the changed lines (added and removed, trimmed) as a set; a Jaccard
//!   similarity of at least [`SIMILARITY`] with a recent failure's diff is tabu.
//!
//! A failure is a `discard`, `crash` or `timeout`: measured and not better, or broken.

use std::collections::{BTreeSet, VecDeque};

use super::{Candidate, Mechanism, Outcome, Verdict, View};
use crate::propose::knobs::{distance, Config};
use crate::store::{ExperimentRecord, Status};

/// How many recent failures are tabu.
pub const TENURE: usize = 12;
/// Largest knob distance (unit cube, Manhattan) that counts as a repeat.
pub const RADIUS: f64 = 0.05;
/// Smallest Jaccard similarity of changed lines that counts as a repeat.
pub const SIMILARITY: f64 = 0.8;

#[derive(Default)]
pub struct Tabu {
    configs: VecDeque<(u64, Config)>,
    diffs: VecDeque<(u64, BTreeSet<String>)>,
    /// The lines of the diffs filtered so far, by experiment, until their outcome is known.
    pending: Vec<(u64, BTreeSet<String>)>,
}

fn is_failure(e: &ExperimentRecord) -> bool {
    matches!(
        e.status(),
        Status::Discard | Status::Crash | Status::Timeout | Status::Pruned
    )
}

/// The changed lines of a unified diff.
pub fn changed_lines(diff: &str) -> BTreeSet<String> {
    diff.lines()
        .filter(|l| {
            (l.starts_with('+') || l.starts_with('-'))
                && !l.starts_with("+++")
                && !l.starts_with("---")
        })
        .map(|l| format!("{}{}", &l[..1], l[1..].trim()))
        .filter(|l| l.len() > 1)
        .collect()
}

fn jaccard(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    let union = a.union(b).count();
    if union == 0 {
        return 0.0;
    }
    a.intersection(b).count() as f64 / union as f64
}

impl Tabu {
    fn remember(&mut self, e: &ExperimentRecord) {
        if !is_failure(e) {
            return;
        }
        if let Some(c) = View::config_of(e) {
            self.configs.push_back((e.n, c));
            while self.configs.len() > TENURE {
                self.configs.pop_front();
            }
        }
        if let Some(i) = self.pending.iter().position(|(n, _)| *n == e.n) {
            let (n, lines) = self.pending.swap_remove(i);
            self.diffs.push_back((n, lines));
            while self.diffs.len() > TENURE {
                self.diffs.pop_front();
            }
        }
    }
}

impl Mechanism for Tabu {
    fn name(&self) -> &str {
        "tabu"
    }

    fn on_start(&mut self, view: &View<'_>) -> Option<String> {
        for e in view.history {
            self.remember(e);
        }
        None
    }

    fn filter(&mut self, candidate: &Candidate<'_>, view: &View<'_>) -> Verdict {
        if let (Some(c), false) = (candidate.config, view.knobs.is_empty()) {
            for (n, failed) in self.configs.iter().rev() {
                let d = distance(view.knobs, c, failed);
                if d <= RADIUS + 1e-9 {
                    return Verdict::Reject(format!(
                        "within {d:.3} of failed experiment #{n} (tabu radius {RADIUS})"
                    ));
                }
            }
            return Verdict::Accept;
        }
        if let Some(diff) = candidate.diff {
            let lines = changed_lines(diff);
            for (n, failed) in self.diffs.iter().rev() {
                let s = jaccard(&lines, failed);
                if s >= SIMILARITY {
                    return Verdict::Reject(format!(
                        "its changed lines are {:.0}% the same as failed experiment #{n}'s",
                        s * 100.0
                    ));
                }
            }
            self.pending.retain(|(n, _)| *n != view.n);
            self.pending.push((view.n, lines));
        }
        Verdict::Accept
    }

    fn on_result(&mut self, outcome: &Outcome<'_>) -> Option<String> {
        self.remember(outcome.record);
        self.pending.retain(|(n, _)| *n > outcome.record.n);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::testing::{config, exp, finish, knobs, view};

    const SPACE: &str = "WIDTH = 2  # hone: int 1..20\nDEPTH = 9  # hone: int 1..20\n";

    #[test]
    fn a_repeat_of_a_failure_is_rejected_and_a_distant_one_is_not() {
        let k = knobs(SPACE);
        let base = config(&[("WIDTH", 2), ("DEPTH", 9)]);
        let failed = config(&[("WIDTH", 10), ("DEPTH", 9)]);
        let history = vec![
            exp(0, Status::Baseline, Some(130.0), Some(&base)),
            exp(1, Status::Discard, Some(140.0), Some(&failed)),
        ];
        let ed = vec![];
        let v = view(&history, &k, &ed);
        let mut t = Tabu::default();
        t.on_start(&v);
        let near = config(&[("WIDTH", 11), ("DEPTH", 9)]);
        let far = config(&[("WIDTH", 15), ("DEPTH", 9)]);
        let judge = |t: &mut Tabu, c: &Config| {
            t.filter(
                &Candidate {
                    description: "x",
                    config: Some(c),
                    diff: None,
                },
                &v,
            )
        };
        match judge(&mut t, &failed) {
            Verdict::Reject(r) => assert!(r.contains("#1"), "{r}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(judge(&mut t, &near), Verdict::Reject(_)));
        assert_eq!(judge(&mut t, &far), Verdict::Accept);
        // One step along the failure's knob is tabu; one step along another knob and one
        // along the failure's is not (a different direction).
        let diagonal = config(&[("WIDTH", 11), ("DEPTH", 10)]);
        assert_eq!(judge(&mut t, &diagonal), Verdict::Accept);
        // The baseline and keeps are never tabu.
        assert_eq!(judge(&mut t, &base), Verdict::Accept);
    }

    #[test]
    fn failures_learned_from_results_expire_after_the_tenure() {
        let k = knobs("WIDTH = 2  # hone: int 1..100\nDEPTH = 9  # hone: int 1..20\n");
        let ed = vec![];
        let mut t = Tabu::default();
        let mut history = vec![exp(0, Status::Baseline, Some(1.0), None)];
        for i in 1..=(TENURE as i64 + 1) {
            let c = config(&[("WIDTH", 7 * i), ("DEPTH", 1)]);
            let rec = exp(i as u64, Status::Crash, None, Some(&c));
            finish(&mut t, &mut history, rec, &k, &ed);
        }
        let v = view(&history, &k, &ed);
        let oldest = config(&[("WIDTH", 7), ("DEPTH", 1)]);
        let newest = config(&[("WIDTH", 7 * (TENURE as i64 + 1)), ("DEPTH", 1)]);
        let c = |c| Candidate {
            description: "x",
            config: Some(c),
            diff: None,
        };
        assert_eq!(t.filter(&c(&oldest), &v), Verdict::Accept);
        assert!(matches!(t.filter(&c(&newest), &v), Verdict::Reject(_)));
    }

    #[test]
    fn a_diff_like_a_failed_one_is_rejected() {
        let ed = vec!["train.py".to_string()];
        let diff = "--- a/train.py\n+++ b/train.py\n@@ -1 +1 @@\n-lr = 0.1\n+lr = 0.5\n";
        let other = "--- a/train.py\n+++ b/train.py\n@@ -3 +3 @@\n-depth = 4\n+depth = 6\n";
        let mut t = Tabu::default();
        let mut history = vec![exp(0, Status::Baseline, Some(1.0), None)];
        let c = |d| Candidate {
            description: "x",
            config: None,
            diff: Some(d),
        };
        let v = view(&history, &[], &ed);
        assert_eq!(t.filter(&c(diff), &v), Verdict::Accept);
        history.push(exp(1, Status::Discard, Some(1.2), None));
        let v = view(&history, &[], &ed);
        let rec = history[1].clone();
        t.on_result(&Outcome {
            record: &rec,
            view: v,
        });
        assert!(matches!(t.filter(&c(diff), &v), Verdict::Reject(_)));
        assert_eq!(t.filter(&c(other), &v), Verdict::Accept);
    }
}
