//! Recording what the mechanisms did: one [`MechanismCall`] per hook invocation with its
//! effect, state changes and faults as events, and the credit of a finished experiment to the
//! mechanisms that shaped it (what the portfolio learns from, live and on restore).

use std::collections::BTreeMap;

use super::{Outer, Slot};
use crate::meta::Mechanism;
use crate::store::{Effect, Hook, MechanismCall, Status};

impl Outer {
    pub(super) fn record(
        calls: &mut Vec<MechanismCall>,
        n: u64,
        name: &str,
        hook: Hook,
        effect: Effect,
        detail: String,
    ) {
        calls.push(MechanismCall {
            experiment: n,
            mechanism: name.to_string(),
            hook,
            effect,
            detail,
        });
    }
}

/// The mechanisms that shaped one experiment, from its proposal's calls: the one whose
/// candidate was proposed (`used`) or else every one that gave guidance, and every filter that
/// rejected or modified a proposal on the way.
pub(super) fn shapers(calls: &[MechanismCall], used: Option<&str>) -> Vec<String> {
    let mut names: Vec<String> = used.map(String::from).into_iter().collect();
    for c in calls {
        let counts = match c.effect {
            Effect::Rejected | Effect::Modified => true,
            Effect::Guided => used.is_none(),
            _ => false,
        };
        if counts && !names.contains(&c.mechanism) {
            names.push(c.mechanism.clone());
        }
    }
    names
}

/// Credits a finished experiment to the mechanisms that shaped it. Only outcomes of the
/// search count: not a cancelled experiment or a proposal that broke the rules
/// (violation, invalid). A budget stop at the review gate is recorded `aborted` and does not
/// count.
pub(super) fn credit(tally: &mut BTreeMap<String, (u64, u64)>, names: Vec<String>, status: Status) {
    let counts = matches!(
        status,
        Status::Keep
            | Status::Discard
            | Status::Crash
            | Status::Timeout
            | Status::Rejected
            | Status::Pruned
    );
    if counts {
        let kept = u64::from(status == Status::Keep);
        for name in names {
            let t = tally.entry(name).or_default();
            t.0 += 1;
            t.1 += kept;
        }
    }
}

/// Records a state change (and makes it an event).
pub(super) fn changed(
    effect: Option<String>,
    events: &mut Vec<(u64, String)>,
    n: u64,
    name: &str,
) -> (Effect, String) {
    match effect {
        Some(d) => {
            events.push((n, format!("{name}: {d}")));
            (Effect::Changed, d)
        }
        None => (Effect::None, String::new()),
    }
}

/// A state-changing hook (`on_start`, `on_result`, `on_segment_end`) called at experiment `n`
/// through `call` on each slot `pick` selects: each call recorded in `calls` (a change also in
/// `events`), a mechanism that reports a fault stopped.
pub(super) fn call_each(
    slots: &mut [Slot],
    pick: impl Fn(&Slot) -> bool,
    hook: Hook,
    n: u64,
    calls: &mut Vec<MechanismCall>,
    events: &mut Vec<(u64, String)>,
    mut call: impl FnMut(&mut dyn Mechanism) -> Option<String>,
) {
    for slot in slots.iter_mut().filter(|s| pick(s)) {
        let name = slot.mech.name().to_string();
        let effect = call(slot.mech.as_mut());
        let (e, d) = changed(effect, events, n, &name);
        Outer::record(calls, n, &name, hook.clone(), e, d);
        stop_if_faulty(slot, calls, events, n, hook.clone());
    }
}

/// Deactivates a mechanism that reports a fault (a script its sandbox stopped), on record.
pub(super) fn stop_if_faulty(
    slot: &mut Slot,
    calls: &mut Vec<MechanismCall>,
    events: &mut Vec<(u64, String)>,
    n: u64,
    hook: Hook,
) {
    if let Some(why) = slot.mech.fault() {
        slot.active = false;
        slot.probation = None;
        let name = slot.mech.name().to_string();
        let detail = format!("stopped and deactivated: {why}");
        events.push((n, format!("{name}: {detail}")));
        Outer::record(calls, n, &name, hook, Effect::Deactivated, detail);
    }
}
