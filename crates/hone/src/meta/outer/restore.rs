//! The portfolio's turn at a segment end, and a resumed run rebuilt from its record: every
//! built-in mechanism gets its own recorded calls back, and the portfolio's credit is replayed
//! from the recorded proposals against the finished experiments.

use std::collections::BTreeMap;

use super::record::{credit, shapers};
use super::{Outer, PROPOSED};
use crate::store::{Effect, ExperimentRecord, Hook, MechanismCall};

impl Outer {
    /// The portfolio's turn at a segment end: credits the segment's tally and turns managed
    /// mechanisms on or off. Returns each switch (`activated` or `deactivated`, and what to
    /// record about it).
    pub(super) fn rotate(&mut self) -> Vec<(Effect, String)> {
        let tally = std::mem::take(&mut self.tally);
        let Some(p) = self.portfolio.as_mut() else {
            return Vec::new();
        };
        let arms: Vec<(String, Option<f64>)> = self
            .slots
            .iter()
            .filter(|s| s.managed)
            .map(|s| {
                let name = s.mech.name().to_string();
                let reward = s
                    .active
                    .then(|| crate::meta::portfolio::reward(tally.get(&name)));
                (name, reward)
            })
            .collect();
        let next = p.decide(&arms);
        let mut switches = Vec::new();
        for slot in self.slots.iter_mut().filter(|s| s.managed) {
            let name = slot.mech.name().to_string();
            let on = next.contains(&name);
            if on == slot.active {
                continue;
            }
            slot.active = on;
            let effect = if on {
                Effect::Activated
            } else {
                Effect::Deactivated
            };
            let (shaped, kept) = tally.get(&name).copied().unwrap_or_default();
            switches.push((
                effect.clone(),
                format!(
                    "{effect} `{name}` for the next segment (this segment: shaped {shaped}, \
                     kept {kept}; {})",
                    p.describe(&name)
                ),
            ));
        }
        switches
    }

    /// Whether a resumed run must hand [`Outer::restore`] its recorded hook calls.
    pub fn restores(&self) -> bool {
        !self.slots.is_empty()
    }

    /// A resumed run: hands every built-in mechanism its own recorded calls
    /// ([`Mechanism::resume`]), then rebuilds the portfolio (its credit, the current segment's
    /// tally and which mechanisms are on) by replaying the recorded proposals' hook calls
    /// against the finished experiments in the order they finished, as if the last session had
    /// run to its last recorded experiment. Call before [`Outer::on_start`]; the portfolio's
    /// part is recorded as an `on_start` call of `portfolio`.
    ///
    /// One difference from the live credit: a proposal that a script's filter modified is
    /// credited to the modifier and, on replay, to the guidance givers too (the record does not
    /// say whether the modified configuration was the one verified).
    ///
    /// [`Mechanism::resume`]: crate::meta::Mechanism::resume
    pub fn restore(&mut self, calls: &[MechanismCall], history: &[ExperimentRecord]) {
        if history.is_empty() {
            return;
        }
        let mut own: BTreeMap<&str, Vec<MechanismCall>> = BTreeMap::new();
        for c in calls {
            own.entry(c.mechanism.as_str()).or_default().push(c.clone());
        }
        for slot in self.slots.iter_mut() {
            let mine = own.remove(slot.mech.name()).unwrap_or_default();
            slot.mech.resume(&mine, history);
        }
        if self.portfolio.is_none() {
            return;
        }
        let proposing = [Hook::BeforePropose, Hook::Candidates, Hook::Filter];
        let mut by_experiment: BTreeMap<u64, Vec<MechanismCall>> = BTreeMap::new();
        for c in calls.iter().filter(|c| proposing.contains(&c.hook)) {
            by_experiment
                .entry(c.experiment)
                .or_default()
                .push(c.clone());
        }
        let proposed = format!("; {PROPOSED}");
        // Live, outcomes are credited as they arrive (out of order with parallel workers).
        let mut finished: Vec<&ExperimentRecord> = history.iter().collect();
        finished.sort_by(|a, b| {
            let at = |e: &ExperimentRecord| e.finished_at.unwrap_or(f64::INFINITY);
            at(a).total_cmp(&at(b)).then(a.n.cmp(&b.n))
        });
        let mut segments = 0;
        for rec in finished {
            if let Some(cs) = by_experiment.get(&rec.n) {
                let used = cs
                    .iter()
                    .find(|c| {
                        c.hook == Hook::Candidates
                            && c.effect == Effect::Suggested
                            && c.detail.ends_with(&proposed)
                    })
                    .map(|c| c.mechanism.as_str());
                credit(&mut self.tally, shapers(cs, used), rec.status());
            }
            if self.segment_end(rec.n) {
                self.rotate();
                segments += 1;
            }
        }
        if segments == 0 && self.tally.is_empty() {
            return;
        }
        let n = history.iter().map(|e| e.n + 1).max().unwrap_or(0);
        let detail = format!(
            "restored from the record of {} experiment(s) ({segments} segment(s) credited); on: {}",
            history.len(),
            self.active().join(", ")
        );
        self.events.push((n, format!("portfolio: {detail}")));
        Outer::record(
            &mut self.calls,
            n,
            "portfolio",
            Hook::OnStart,
            Effect::Changed,
            detail,
        );
    }
}
