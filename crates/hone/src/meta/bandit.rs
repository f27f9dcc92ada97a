//! `bandit`: UCB1 over which knob (or, for agents, which editable file area) the next change
//! should focus on, and over the step scale, rewarded by improvement (1 for a keep, else 0).
//!
//! Each experiment it picks one arm of each kind, gives it as guidance (focus and step scale
//! for the knobs optimizer; a line of advice for an agent), and credits both arms with the
//! experiment's outcome. A resumed run credits the arms again from its recorded guidance.

use std::collections::BTreeMap;

use super::{Guidance, Mechanism, Outcome, View};
use crate::propose::knobs::dimensions;
use crate::store::{ExperimentRecord, Hook, MechanismCall, Status};

/// The step scales it chooses between.
pub const SCALES: &[f64] = &[0.5, 1.0, 2.0];
/// How an agent's advice words each scale (by its name), and how a resumed run reads it back.
const ADVICE: [(&str, &str); 3] = [("0.5", "a small"), ("1", "a focused"), ("2", "a bold")];

#[derive(Clone, Copy, Debug, Default)]
struct Arm {
    pulls: u64,
    reward: f64,
}

/// UCB1 over named arms (the first of the untried arms wins; then the highest upper bound,
/// ties to the earlier arm).
#[derive(Clone, Debug, Default)]
pub struct Ucb {
    arms: BTreeMap<String, Arm>,
}

impl Ucb {
    pub fn choose(&self, names: &[String]) -> Option<String> {
        let total: u64 = names
            .iter()
            .filter_map(|n| self.arms.get(n))
            .map(|a| a.pulls)
            .sum();
        let mut best: Option<(f64, &String)> = None;
        for name in names {
            let a = self.arms.get(name).copied().unwrap_or_default();
            let score = if a.pulls == 0 {
                f64::INFINITY
            } else {
                a.reward / a.pulls as f64
                    + (2.0 * (total.max(1) as f64).ln() / a.pulls as f64).sqrt()
            };
            if best.as_ref().map_or(true, |(s, _)| score > *s) {
                best = Some((score, name));
            }
        }
        best.map(|(_, n)| n.clone())
    }

    pub fn credit(&mut self, name: &str, reward: f64) {
        let a = self.arms.entry(name.to_string()).or_default();
        a.pulls += 1;
        a.reward += reward;
    }

    /// `mean over pulls` of an arm, for reports.
    pub fn mean(&self, name: &str) -> Option<(f64, u64)> {
        self.arms
            .get(name)
            .filter(|a| a.pulls > 0)
            .map(|a| (a.reward / a.pulls as f64, a.pulls))
    }
}

#[derive(Default)]
pub struct Bandit {
    areas: Ucb,
    scales: Ucb,
    /// What it chose for the experiment in flight: (experiment, area, scale).
    chosen: Option<(u64, String, String)>,
}

fn scale_names() -> Vec<String> {
    SCALES.iter().map(|s| format!("{s}")).collect()
}

impl Mechanism for Bandit {
    fn name(&self) -> &str {
        "bandit"
    }

    fn before_propose(&mut self, view: &View<'_>) -> Guidance {
        let areas: Vec<String> = if view.knobs_proposer {
            dimensions(view.knobs)
        } else {
            view.editable.to_vec()
        };
        let Some(area) = self.areas.choose(&areas) else {
            return Guidance::default();
        };
        let scale = self
            .scales
            .choose(&scale_names())
            .unwrap_or_else(|| "1".into());
        let step: f64 = scale.parse().unwrap_or(1.0);
        self.chosen = Some((view.n, area.clone(), scale.clone()));
        let mut g = Guidance {
            focus: vec![area.clone()],
            ..Guidance::default()
        };
        if view.knobs_proposer {
            g.step_scale = (step != 1.0).then_some(step);
        } else {
            let size = ADVICE
                .iter()
                .find(|(s, _)| *s == scale)
                .map_or("a focused", |(_, size)| *size);
            g.text.push(format!(
                "make {size} change in `{area}` (the area with the best record of improvements so far, or one not tried yet)"
            ));
        }
        g
    }

    fn on_result(&mut self, outcome: &Outcome<'_>) -> Option<String> {
        let (n, area, scale) = self.chosen.take()?;
        if n != outcome.record.n {
            return None;
        }
        let reward = if outcome.improved() { 1.0 } else { 0.0 };
        self.areas.credit(&area, reward);
        self.scales.credit(&scale, reward);
        None
    }

    /// Credits the arms of every recorded guidance whose experiment finished with its outcome
    /// (1 for a keep): the area from its focus, the scale from its step (or, for agents, its
    /// advice). With parallel workers this credits every choice, where the live run credits
    /// only the latest one in flight.
    fn resume(&mut self, calls: &[MechanismCall], history: &[ExperimentRecord]) {
        let done: BTreeMap<u64, Status> = history.iter().map(|e| (e.n, e.status())).collect();
        for c in calls.iter().filter(|c| c.hook == Hook::BeforePropose) {
            let Some(status) = done.get(&c.experiment) else {
                continue;
            };
            let parts: Vec<&str> = c.detail.split("; ").collect();
            let Some(area) = parts.iter().find_map(|p| p.strip_prefix("focus ")) else {
                continue;
            };
            let scale = parts
                .iter()
                .find_map(|p| {
                    p.strip_prefix("step x").map(String::from).or_else(|| {
                        ADVICE
                            .iter()
                            .find(|(_, size)| p.starts_with(&format!("make {size} change")))
                            .map(|(s, _)| s.to_string())
                    })
                })
                .unwrap_or_else(|| "1".into());
            let reward = if *status == Status::Keep { 1.0 } else { 0.0 };
            self.areas.credit(area, reward);
            self.scales.credit(&scale, reward);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::testing::{exp, finish, kept_if, knobs, view};
    use crate::store::{Effect, Status};

    #[test]
    fn ucb_tries_every_arm_then_prefers_the_rewarding_one() {
        let names: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let mut u = Ucb::default();
        let mut seen = Vec::new();
        for _ in 0..3 {
            let c = u.choose(&names).unwrap_or_default();
            u.credit(&c, if c == "b" { 1.0 } else { 0.0 });
            seen.push(c);
        }
        seen.sort();
        assert_eq!(seen, names);
        let mut b = 0;
        for _ in 0..30 {
            let c = u.choose(&names).unwrap_or_default();
            if c == "b" {
                b += 1;
            }
            u.credit(&c, if c == "b" { 1.0 } else { 0.0 });
        }
        assert!(b > 20, "b chosen {b} of 30");
    }

    #[test]
    fn it_focuses_the_knobs_optimizer_on_the_knob_that_pays() {
        let k = knobs(
            "A = 0.5  # hone: 0.0..1.0\nB = 0.5  # hone: 0.0..1.0\nC = 3  # hone: int 1..9\n",
        );
        let ed = vec![];
        let mut history = vec![exp(0, Status::Baseline, Some(1.0), None)];
        let mut bandit = Bandit::default();
        let mut focus_b = 0;
        for n in 1..=24u64 {
            let v = view(&history, &k, &ed);
            let g = bandit.before_propose(&v);
            assert_eq!(g.focus.len(), 1);
            let on_b = g.focus[0] == "B";
            focus_b += u32::from(on_b);
            let rec = exp(n, kept_if(on_b), Some(1.0), None);
            finish(&mut bandit, &mut history, rec, &k, &ed);
        }
        assert!(focus_b >= 14, "B focused {focus_b} times of 24");
    }

    #[test]
    fn a_resumed_bandit_credits_its_recorded_choices_again() {
        for agent in [false, true] {
            let k = if agent {
                Vec::new()
            } else {
                knobs("A = 0.5  # hone: 0.0..1.0\nB = 0.5  # hone: 0.0..1.0\n")
            };
            let ed: Vec<String> = if agent {
                vec!["model.py".into(), "data.py".into()]
            } else {
                Vec::new()
            };
            let mut history = vec![exp(0, Status::Baseline, Some(1.0), None)];
            let mut bandit = Bandit::default();
            let mut calls = Vec::new();
            let call = |n: u64, g: &Guidance| MechanismCall {
                experiment: n,
                mechanism: "bandit".into(),
                hook: Hook::BeforePropose,
                effect: Effect::Guided,
                detail: g.summary(),
            };
            for n in 1..=12u64 {
                let g = bandit.before_propose(&view(&history, &k, &ed));
                calls.push(call(n, &g));
                let status = kept_if(n % 3 == 0 || n == 4);
                let rec = exp(n, status, Some(1.0), None);
                finish(&mut bandit, &mut history, rec, &k, &ed);
            }
            // Guidance for an experiment that never finished is not credited.
            let g = bandit.before_propose(&view(&history, &k, &ed));
            calls.push(call(13, &g));
            assert!(bandit.scales.mean("0.5").is_some() && bandit.scales.mean("2").is_some());
            let mut resumed = Bandit::default();
            resumed.resume(&calls, &history);
            assert_eq!(
                format!("{:?}", resumed.areas),
                format!("{:?}", bandit.areas)
            );
            assert_eq!(
                format!("{:?}", resumed.scales),
                format!("{:?}", bandit.scales)
            );
            // So it chooses as the uninterrupted one would.
            let v = view(&history, &k, &ed);
            assert_eq!(resumed.before_propose(&v).summary(), g.summary());
        }
    }

    #[test]
    fn agents_get_a_file_area_as_advice() {
        let ed = vec!["model.py".to_string(), "data.py".to_string()];
        let history = vec![exp(0, Status::Baseline, Some(1.0), None)];
        let v = view(&history, &[], &ed);
        let g = Bandit::default().before_propose(&v);
        assert_eq!(g.focus, vec!["model.py".to_string()]);
        assert!(g.text[0].contains("`model.py`"), "{:?}", g.text);
    }
}
