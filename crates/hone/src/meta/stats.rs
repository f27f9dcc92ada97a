//! What each mechanism did over a run, from its recorded hook calls: calls per hook, guidance
//! given, candidates suggested, proposals rejected and modified, state changes, keeps that
//! followed its guidance, and whether it was inert (active over its probation window without
//! ever changing anything).

use std::collections::{BTreeMap, BTreeSet};

use crate::store::{Effect, Hook, MechanismCall, Plotted, Status};

/// One mechanism's record over a run.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct MechanismStats {
    pub name: String,
    /// Invocations per hook name.
    pub calls: BTreeMap<String, u64>,
    /// Experiments in which any of its hooks ran.
    pub experiments: u64,
    /// Experiments it gave guidance for (`before_propose` with an effect).
    pub guided: u64,
    /// Experiments it suggested candidates for.
    pub suggested: u64,
    pub rejected: u64,
    pub modified: u64,
    /// Changes of its own state that change the search (restarts, mode switches, revisions,
    /// portfolio switches).
    pub changed: u64,
    /// Kept experiments that had its guidance, candidates or modification.
    pub keeps_after_guidance: u64,
    /// Active over at least the probation window and never had any effect.
    pub inert: bool,
    /// Level 2: a script's validation ladder, activation, probation decision and any stop by
    /// its sandbox, as `effect: detail`, in order.
    pub lifecycle: Vec<String>,
}

impl MechanismStats {
    /// Calls that had an effect.
    pub fn effective(&self) -> u64 {
        self.guided + self.suggested + self.rejected + self.modified + self.changed
    }
}

/// Per-mechanism statistics, in order of first appearance.
pub fn compute<P: Plotted>(
    calls: &[MechanismCall],
    experiments: &[P],
    probation: u64,
) -> Vec<MechanismStats> {
    let kept: BTreeSet<u64> = experiments
        .iter()
        .filter(|e| e.status() == Status::Keep)
        .map(|e| e.n())
        .collect();
    let mut order: Vec<String> = Vec::new();
    let mut stats: BTreeMap<String, MechanismStats> = BTreeMap::new();
    let mut sets = Experiments::default();
    for c in calls {
        if !stats.contains_key(&c.mechanism) {
            order.push(c.mechanism.clone());
        }
        let s = stats
            .entry(c.mechanism.clone())
            .or_insert_with(|| MechanismStats {
                name: c.mechanism.clone(),
                ..MechanismStats::default()
            });
        // Research steps and stops are the mechanism's lifecycle, not hook invocations.
        let stopped = c.effect == Effect::Deactivated && c.mechanism != "portfolio";
        if c.hook == Hook::Research || stopped {
            s.lifecycle
                .push(format!("#{} {}: {}", c.experiment, c.effect, c.detail));
            continue;
        }
        tally(s, &mut sets, c);
    }
    order
        .into_iter()
        .filter_map(|name| {
            let mut s = stats.remove(&name)?;
            let count =
                |m: &BTreeMap<String, BTreeSet<u64>>| m.get(&name).map_or(0, |x| x.len() as u64);
            s.experiments = count(&sets.seen);
            s.guided = count(&sets.guided);
            s.suggested = count(&sets.suggested);
            s.keeps_after_guidance = sets
                .helped
                .get(&name)
                .map_or(0, |x| x.iter().filter(|n| kept.contains(n)).count() as u64);
            s.inert = s.experiments >= probation && s.effective() == 0;
            Some(s)
        })
        .collect()
}

/// Per mechanism, the experiments it was called for (`seen`), helped shape (guided, suggested
/// for or modified), guided, and suggested candidates for.
#[derive(Default)]
struct Experiments {
    seen: BTreeMap<String, BTreeSet<u64>>,
    helped: BTreeMap<String, BTreeSet<u64>>,
    guided: BTreeMap<String, BTreeSet<u64>>,
    suggested: BTreeMap<String, BTreeSet<u64>>,
}

/// Counts one hook invocation `c` (not a lifecycle step) into its mechanism's `s` and `sets`.
fn tally(s: &mut MechanismStats, sets: &mut Experiments, c: &MechanismCall) {
    let mark = |m: &mut BTreeMap<String, BTreeSet<u64>>| {
        m.entry(c.mechanism.clone())
            .or_default()
            .insert(c.experiment);
    };
    *s.calls.entry(c.hook.to_string()).or_default() += 1;
    mark(&mut sets.seen);
    match c.effect {
        Effect::Guided => {
            mark(&mut sets.guided);
            mark(&mut sets.helped);
        }
        Effect::Suggested => {
            mark(&mut sets.suggested);
            mark(&mut sets.helped);
        }
        Effect::Rejected => s.rejected += 1,
        Effect::Modified => {
            s.modified += 1;
            mark(&mut sets.helped);
        }
        Effect::Changed | Effect::Activated | Effect::Deactivated => s.changed += 1,
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::testing::kept_if;
    use crate::store::ExperimentRecord;

    fn call(n: u64, m: &str, hook: &str, effect: &str) -> MechanismCall {
        MechanismCall {
            experiment: n,
            mechanism: m.into(),
            hook: Hook::parse(hook),
            effect: Effect::parse(effect),
            detail: String::new(),
        }
    }

    #[test]
    fn counts_effects_keeps_after_guidance_and_inert_mechanisms() {
        let mut calls = Vec::new();
        for n in 1..=10 {
            calls.push(call(
                n,
                "plateau",
                "before_propose",
                if n == 4 { "guided" } else { "none" },
            ));
            calls.push(call(
                n,
                "tabu",
                "filter",
                if n == 2 { "rejected" } else { "none" },
            ));
            calls.push(call(n, "quiet", "before_propose", "none"));
        }
        calls.push(call(3, "late", "filter", "none"));
        let exps: Vec<ExperimentRecord> = (0..=10)
            .map(|n| ExperimentRecord {
                n,
                status: Some(kept_if(n == 4)),
                ..Default::default()
            })
            .collect();
        let s = compute(&calls, &exps, 10);
        let by = |name: &str| {
            s.iter()
                .find(|x| x.name == name)
                .cloned()
                .unwrap_or_default()
        };
        assert_eq!(
            s.iter().map(|x| x.name.as_str()).collect::<Vec<_>>(),
            ["plateau", "tabu", "quiet", "late"]
        );
        assert_eq!(by("plateau").calls.get("before_propose"), Some(&10));
        assert_eq!(
            (by("plateau").guided, by("plateau").keeps_after_guidance),
            (1, 1)
        );
        assert_eq!(by("tabu").rejected, 1);
        assert!(!by("tabu").inert && !by("plateau").inert);
        assert!(by("quiet").inert, "ten experiments without an effect");
        assert!(!by("late").inert, "not past its probation yet");
    }
}
