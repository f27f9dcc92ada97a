//! What the knobs proposer has learned of a run's history, converted once per experiment and
//! kept across proposals: one observation per configuration (what [`super::observations`]
//! would return), the infeasible configurations ([`super::infeasible_configs`]) and, per
//! experiment, its number, status and value. A proposal converts only the experiments added
//! since the last one (and re-reads the last one and any still running, whose outcome may
//! have changed), so no proposal turns the whole history into maps again; and once converted,
//! an old experiment's configuration is needed only here: the engine may drop it from its
//! in-memory copy ([`super::KnobsProposer`] says up to which experiment).
//!
//! The contract is [`super::super::knobs::SamplerCache`]'s: the history shown grows at its
//! end. The engine may also drop old experiments from it once converted (the serial loop
//! without `[outer]` holds only the baseline, the keeps and the latest whole): experiments are
//! matched by number, so a shown history that lacks some converted before still extends
//! them, as long as it holds the first one and the last one converted and every one still
//! running. One that does not (another run's) is converted anew; an experiment whose
//! configuration the history no longer holds then keeps the one converted before.
//!
//! What is held is bounded however long the run ([`compact`]): past a few thousand
//! observations, the best, the most recent, the running ones and an even spread of the rest
//! are kept, and what the dropped ones still count for (the worst value, the infeasible
//! configurations) is kept apart. The sampler's index follows the same positions
//! ([`Observed::take_moves`]).

use std::collections::BTreeMap;

use super::{config_from_json, infeasible, Config, Observation};
use crate::store::{ExperimentRecord, Status};

mod compact;

use compact::Bounds;
pub use compact::Moves;

/// The history as the knobs sampler sees it, kept up to date incrementally.
#[derive(Debug, Default)]
pub struct Observed {
    /// One entry per experiment of the history shown, in its order.
    seen: Vec<Seen>,
    /// One per experiment with a configuration, in order.
    obs: Vec<Observation>,
    /// Indices into `obs` of the `running` and `pruned` experiments (they count at `worst`).
    lied: Vec<u32>,
    /// The configurations that crashed, timed out or violated a constraint, in order.
    infeasible: Vec<Config>,
    /// The worst measured value so far (the fold of [`super::observations`]).
    worst: Option<f64>,
    minimize: bool,
    /// How many observations are held at most, and what a compaction keeps.
    bounds: Bounds,
    /// The worst measured value of the experiments compacted away (what [`Observed::refigure`]
    /// folds on from).
    dropped_worst: Option<f64>,
    /// The numbers of the experiments compacted away whose configurations start
    /// `infeasible`, one each, in order (the rest of it follows `seen`).
    fixed_ns: Vec<u64>,
    /// What moved in `obs` since [`Observed::take_moves`].
    moves: Moves,
}

/// What is kept of one experiment: enough to tell whether it changed and what it counts as.
#[derive(Clone, Copy, Debug)]
struct Seen {
    n: u64,
    status: Status,
    objective: Option<f64>,
    /// Its index in `obs` (`None`: no configuration).
    obs: Option<u32>,
}

fn measured(status: Status) -> bool {
    matches!(status, Status::Baseline | Status::Keep | Status::Discard)
}

/// The fold of [`super::observations`]: the worse of the two.
fn worse(a: f64, b: f64, minimize: bool) -> f64 {
    if (a > b) == minimize {
        a
    } else {
        b
    }
}

impl Observed {
    /// An empty view: the first [`Observed::sync`] converts the whole history.
    pub fn new() -> Observed {
        Observed::default()
    }

    /// An empty view held within `bounds` (tests use small ones).
    #[cfg(test)]
    fn with_bounds(bounds: Bounds) -> Observed {
        Observed {
            bounds,
            ..Observed::default()
        }
    }

    /// The observations, as [`super::observations`] of the last history synced.
    pub fn observations(&self) -> &[Observation] {
        &self.obs
    }

    /// The infeasible configurations, as `super::infeasible_configs` of the last history.
    pub fn infeasible(&self) -> &[Config] {
        &self.infeasible
    }

    /// The indices into [`Observed::observations`] of the running and pruned experiments,
    /// whose value is the worst measured (a stand-in), ascending.
    pub fn stand_ins(&self) -> &[u32] {
        &self.lied
    }

    /// The number of the last experiment converted: every configuration up to it has been
    /// taken in here (held, or counted for what it was when compacted away; `None`: nothing
    /// converted yet).
    pub fn through(&self) -> Option<u64> {
        self.seen.last().map(|s| s.n)
    }

    /// How many experiments are held converted (fewer than were converted once compacted).
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether nothing is converted.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// Where in `history` the converted experiment at index `i` is: at `i` while nothing was
    /// dropped before it, else found by its number (the history shown is in number order).
    fn position(&self, history: &[ExperimentRecord], i: usize) -> Option<usize> {
        let n = self.seen[i].n;
        if history.get(i).map(|e| e.n) == Some(n) {
            return Some(i);
        }
        history.binary_search_by_key(&n, |e| e.n).ok()
    }

    /// Brings the view up to `history` (see the module docs).
    pub fn sync(&mut self, history: &[ExperimentRecord], minimize: bool) {
        let k = self.seen.len();
        let last_at = match k {
            0 => None,
            _ => match self.position(history, k - 1) {
                Some(at) => Some(at),
                None => return self.rebuild(history, minimize),
            },
        };
        let extends = minimize == self.minimize
            && (k == 0 || history.first().map(|e| e.n) == Some(self.seen[0].n));
        if !extends {
            return self.rebuild(history, minimize);
        }
        // The last one converted may have been replaced (a re-test), and one still running
        // may have finished: their status and value are read again.
        let mut again: Vec<usize> = self
            .seen
            .iter()
            .enumerate()
            .filter(|(_, s)| s.status == Status::Running)
            .map(|(i, _)| i)
            .collect();
        if k > 0 && again.last() != Some(&(k - 1)) {
            again.push(k - 1);
        }
        let mut changed = false;
        for i in again {
            let Some(at) = self.position(history, i) else {
                return self.rebuild(history, minimize);
            };
            let (e, s) = (&history[at], self.seen[i]);
            let config = e.config.as_ref().and_then(config_from_json);
            if config.is_some() != s.obs.is_some() {
                return self.rebuild(history, minimize);
            }
            if let (Some(c), Some(o)) = (config, s.obs) {
                // A configuration read again differently (none does today) also renews what
                // is derived from it (the infeasible list).
                if self.obs[o as usize].config != c {
                    self.obs[o as usize].config = c;
                    changed = true;
                }
            }
            if (e.status(), e.objective.map(f64::to_bits))
                != (s.status, s.objective.map(f64::to_bits))
            {
                self.seen[i].status = e.status();
                self.seen[i].objective = e.objective;
                changed = true;
            }
        }
        for e in &history[last_at.map_or(0, |at| at + 1)..] {
            let config = e.config.as_ref().and_then(config_from_json);
            self.append(e, config);
        }
        if changed {
            self.refigure();
        } else {
            self.figure_from(k);
        }
        self.compact();
    }

    /// Converts `history` from scratch, keeping the configurations of experiments that it
    /// no longer holds (dropped from the engine's old records after they were converted).
    fn rebuild(&mut self, history: &[ExperimentRecord], minimize: bool) {
        let mut old = std::mem::take(self);
        self.bounds = old.bounds;
        self.carry_over(&mut old, history, minimize);
        self.moves = Moves {
            anew: true,
            kept: Vec::new(),
        };
        let mut configs: Vec<Option<Config>> =
            old.obs.into_iter().map(|o| Some(o.config)).collect();
        let mut before: BTreeMap<u64, Config> = BTreeMap::new();
        for s in &old.seen {
            if let Some(c) = s.obs.and_then(|o| configs[o as usize].take()) {
                before.insert(s.n, c);
            }
        }
        self.minimize = minimize;
        for e in history {
            let config = match &e.config {
                Some(v) => config_from_json(v),
                None => before.remove(&e.n),
            };
            self.append(e, config);
        }
        self.refigure();
        self.compact();
    }

    /// What a view converted anew keeps of the `old` one: what counted of experiments that
    /// the history shown no longer holds with a configuration (compacted away, or dropped from
    /// the engine's records while held here), when it is the same run (the same first
    /// experiment and direction, the last one converted still there): the worst value measured
    /// and the infeasible configurations. One shown again with its configuration is converted
    /// again instead.
    fn carry_over(&mut self, old: &mut Observed, history: &[ExperimentRecord], minimize: bool) {
        let shown = |n: u64| history.binary_search_by_key(&n, |e| e.n).ok();
        let same_run = old.minimize == minimize
            && old.seen.first().map(|s| s.n) == history.first().map(|e| e.n)
            && old.seen.last().is_some_and(|s| shown(s.n).is_some());
        if !same_run {
            return;
        }
        self.dropped_worst = old.dropped_worst;
        let fixed: Vec<Config> = old.infeasible.drain(..old.fixed_ns.len()).collect();
        for (n, config) in old.fixed_ns.iter().zip(fixed) {
            if !shown(*n).is_some_and(|at| history[at].config.is_some()) {
                self.fixed_ns.push(*n);
                self.infeasible.push(config);
            }
        }
        // Held here, not shown at all: compacted away now.
        for s in old.seen.iter().filter(|s| shown(s.n).is_none()) {
            if let (Some(o), Some(true)) = (s.obs, infeasible(s.status)) {
                self.fixed_ns.push(s.n);
                self.infeasible.push(old.obs[o as usize].config.clone());
            }
            if let (true, Some(v)) = (measured(s.status), s.objective.filter(|v| !v.is_nan())) {
                let w = self.dropped_worst.map_or(v, |w| worse(w, v, minimize));
                self.dropped_worst = Some(w);
            }
        }
    }

    /// Appends experiment `e` with its configuration (values figured later).
    fn append(&mut self, e: &ExperimentRecord, config: Option<Config>) {
        let obs = config.map(|config| {
            self.obs.push(Observation {
                config,
                objective: None,
            });
            (self.obs.len() - 1) as u32
        });
        self.seen.push(Seen {
            n: e.n,
            status: e.status(),
            objective: e.objective,
            obs,
        });
    }

    /// The worst value, each observation's value and the infeasible list, from scratch.
    fn refigure(&mut self) {
        self.worst = self.dropped_worst;
        self.lied.clear();
        self.infeasible.truncate(self.fixed_ns.len());
        self.figure_from(0);
    }

    /// Figures the experiments from index `from` on (those before are figured): the worst
    /// value folded on, their values and infeasible configurations; the running and pruned
    /// ones before them follow the worst value when it changed.
    fn figure_from(&mut self, from: usize) {
        let before = self.worst.map(f64::to_bits);
        for s in &self.seen[from..] {
            // A NaN would make the fold depend on its order: left out (as `observations` does).
            if let (true, Some(v)) = (measured(s.status), s.objective.filter(|v| !v.is_nan())) {
                self.worst = Some(self.worst.map_or(v, |w| worse(w, v, self.minimize)));
            }
        }
        if self.worst.map(f64::to_bits) != before {
            for &o in &self.lied {
                self.obs[o as usize].objective = self.worst;
            }
        }
        for s in &self.seen[from..] {
            let Some(o) = s.obs else { continue };
            let ob = &mut self.obs[o as usize];
            ob.objective = match s.status {
                Status::Running | Status::Pruned => {
                    self.lied.push(o);
                    self.worst
                }
                status if measured(status) => s.objective,
                _ => None,
            };
            if infeasible(s.status) == Some(true) {
                self.infeasible.push(ob.config.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests;
