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
    /// How many of `infeasible`, at its start, are of experiments compacted away (the rest
    /// follow `seen`, in order).
    fixed_infeasible: usize,
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

    /// The infeasible configurations, as [`super::infeasible_configs`] of the last history.
    pub fn infeasible(&self) -> &[Config] {
        &self.infeasible
    }

    /// The indices into [`Observed::observations`] of the running and pruned experiments,
    /// whose value is the worst measured (a stand-in), ascending.
    pub fn stand_ins(&self) -> &[u32] {
        &self.lied
    }

    /// The number of the last experiment converted: every configuration up to it is held
    /// here (`None`: nothing converted yet).
    pub fn through(&self) -> Option<u64> {
        self.seen.last().map(|s| s.n)
    }

    /// How many experiments are converted.
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
        // What was compacted away of the same run (the same first experiment, the same
        // direction) is not in the history shown either: it counts on.
        let same_run = old.minimize == minimize
            && old.seen.first().map(|s| s.n) == history.first().map(|e| e.n);
        if same_run {
            self.dropped_worst = old.dropped_worst;
            self.fixed_infeasible = old.fixed_infeasible;
            self.infeasible = old.infeasible.drain(..old.fixed_infeasible).collect();
        }
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
        self.infeasible.truncate(self.fixed_infeasible);
        self.figure_from(0);
    }

    /// Figures the experiments from index `from` on (those before are figured): the worst
    /// value folded on, their values and infeasible configurations; the running and pruned
    /// ones before them follow the worst value when it changed.
    fn figure_from(&mut self, from: usize) {
        let before = self.worst.map(f64::to_bits);
        for s in &self.seen[from..] {
            if measured(s.status) {
                if let Some(v) = s.objective {
                    self.worst = Some(self.worst.map_or(v, |w| worse(w, v, self.minimize)));
                }
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
mod tests {
    use super::super::{infeasible_configs, observations, stand_ins};
    use super::*;
    use crate::propose::knobs::{self, KnobValue, SamplerCache, SamplerGuide};

    /// How the engine's serial loop leaves old records after a proposal: all but the
    /// baseline, the keeps and the last `window` dropped, or (as for a record with repeated
    /// runs; here every third) only their configuration.
    fn forget(history: &mut Vec<ExperimentRecord>, window: usize) {
        let end = history.len().saturating_sub(window);
        let mut i = 0;
        history.retain_mut(|e| {
            i += 1;
            if i > end
                || matches!(
                    e.status(),
                    Status::Baseline | Status::Keep | Status::Running
                )
            {
                return true;
            }
            e.config = None;
            e.n % 3 == 0
        });
    }

    fn seen(o: &[Observation]) -> Vec<(String, Option<u64>)> {
        o.iter()
            .map(|o| (format!("{:?}", o.config), o.objective.map(f64::to_bits)))
            .collect()
    }

    fn status_of(k: u64) -> Status {
        match k % 13 {
            0 => Status::Keep,
            1 | 7 => Status::Crash,
            2 => Status::Pruned,
            3 => Status::Timeout,
            4 => Status::Aborted,
            5 => Status::Rejected,
            6 => Status::Violation,
            _ => Status::Discard,
        }
    }

    fn record(n: u64) -> ExperimentRecord {
        let status = if n == 0 {
            Status::Baseline
        } else {
            status_of(n)
        };
        let measured = measured(status) || n % 29 == 0;
        ExperimentRecord {
            n,
            status: Some(status),
            // Values that move the worst both ways, a NaN among them.
            objective: measured.then(|| match n {
                77 => f64::NAN,
                n => ((n * 37) % 101) as f64 / (1.0 + (n % 7) as f64),
            }),
            // An agent's experiment has no configuration.
            config: (n % 31 != 30).then(|| serde_json::json!({ "A": n, "B": n % 5 })),
            ..Default::default()
        }
    }

    #[test]
    fn the_kept_view_is_the_conversion_of_the_whole_history() {
        for minimize in [true, false] {
            let mut whole: Vec<ExperimentRecord> = Vec::new();
            let mut shown: Vec<ExperimentRecord> = Vec::new();
            let mut observed = Observed::new();
            for n in 0..600u64 {
                if n % 50 == 49 {
                    // The last experiment converted is replaced by a re-test of it (another
                    // value), once before the next one is added and once with it.
                    let (last, shown_last) = (whole.len() - 1, shown.len() - 1);
                    whole[last].objective = Some(1000.0 + n as f64);
                    shown[shown_last].objective = whole[last].objective;
                    if n % 100 == 49 {
                        observed.sync(&shown, minimize);
                        let want = observations(&whole, minimize);
                        assert_eq!(seen(observed.observations()), seen(&want), "#{last}");
                    }
                }
                let rec = record(n);
                whole.push(rec.clone());
                shown.push(rec);
                if n == 300 {
                    // A resume: a new proposer, the history loaded with its configurations.
                    observed = Observed::new();
                    shown = whole.clone();
                }
                observed.sync(&shown, minimize);
                assert_eq!(
                    seen(observed.observations()),
                    seen(&observations(&whole, minimize)),
                    "after #{n}"
                );
                assert_eq!(observed.infeasible(), infeasible_configs(&whole).as_slice());
                assert_eq!(observed.stand_ins(), stand_ins(&whole).as_slice());
                assert_eq!(observed.through(), Some(n));
                forget(&mut shown, 16);
            }
            // Most of the history is no longer shown, and most of what is holds no
            // configuration any more.
            assert!(shown.len() < 300, "{}", shown.len());
            assert!(shown.iter().filter(|e| e.config.is_none()).count() > 100);
        }
    }

    #[test]
    fn running_experiments_count_at_the_worst_until_they_finish() {
        // A parallel run's view: the last ones still running, then finished in place.
        let mut history: Vec<ExperimentRecord> = (0..40).map(record).collect();
        let mut observed = Observed::new();
        for e in &mut history[30..] {
            e.status = Some(Status::Running);
            e.objective = None;
        }
        observed.sync(&history, true);
        assert_eq!(
            seen(observed.observations()),
            seen(&observations(&history, true))
        );
        for i in 30..40 {
            history[i] = record(i as u64);
            history.push(record(40 + i as u64 - 30));
            observed.sync(&history, true);
            assert_eq!(
                seen(observed.observations()),
                seen(&observations(&history, true))
            );
            assert_eq!(
                observed.infeasible(),
                infeasible_configs(&history).as_slice()
            );
            assert_eq!(observed.stand_ins(), stand_ins(&history).as_slice());
        }
        // A history that does not extend the converted one is converted anew.
        observed.sync(&history[..5], true);
        assert_eq!(
            seen(observed.observations()),
            seen(&observations(&history[..5], true))
        );
        assert_eq!(observed.len(), 5);
    }

    /// The observations of `o` as comparable text, in any order.
    fn bag(o: &[Observation]) -> Vec<(String, Option<u64>)> {
        let mut all = seen(o);
        all.sort();
        all
    }

    #[test]
    fn a_long_run_is_held_within_bounds_and_counts_what_it_dropped() {
        let bounds = Bounds {
            high: 64,
            low: 32,
            best: 8,
            recent: 8,
        };
        for minimize in [true, false] {
            let mut whole: Vec<ExperimentRecord> = Vec::new();
            let mut shown: Vec<ExperimentRecord> = Vec::new();
            let mut observed = Observed::with_bounds(bounds);
            let (mut compactions, mut anew) = (0, 0);
            for n in 0..700u64 {
                let mut rec = record(n);
                // Every 40th stays running for 20 experiments (a parallel run's view).
                if n % 40 == 39 {
                    rec.status = Some(Status::Running);
                    rec.objective = None;
                }
                if n >= 20 && (n - 20) % 40 == 39 {
                    let was = record(n - 20);
                    let i = whole.iter().position(|e| e.n == n - 20).expect("held");
                    whole[i] = was.clone();
                    if let Some(j) = shown.iter().position(|e| e.n == n - 20) {
                        shown[j] = was;
                    }
                }
                whole.push(rec.clone());
                shown.push(rec);
                observed.sync(&shown, minimize);
                let moves = observed.take_moves();
                anew += usize::from(moves.anew);
                compactions += moves.kept.len();
                let got = observed.observations();
                let want = observations(&whole, minimize);
                assert!(got.len() <= bounds.high, "#{n}: {}", got.len());
                // The most recent ones, in order, at the end.
                let tail = |o: &[Observation]| seen(&o[o.len().saturating_sub(bounds.recent)..]);
                assert_eq!(tail(got), tail(&want), "#{n}");
                // The best ones (ranked as the model ranks them) are all held.
                let score = |o: &Observation| match o.objective {
                    Some(v) if v.is_finite() => {
                        if minimize {
                            v
                        } else {
                            -v
                        }
                    }
                    _ => f64::INFINITY,
                };
                let mut ranked = want.clone();
                ranked.sort_by(|a, b| score(a).total_cmp(&score(b)));
                let got_bag = bag(got);
                for o in bag(&ranked[..bounds.best.min(ranked.len())]) {
                    assert!(got_bag.contains(&o), "#{n}: {o:?} dropped");
                }
                // Every one held is one of the whole history's, at its value there (the
                // stand-ins at the worst of every measurement, dropped ones included).
                let want_bag = bag(&want);
                for o in &got_bag {
                    assert!(want_bag.contains(o), "#{n}: {o:?} is not the history's");
                }
                // The running ones are held and are stand-ins.
                let running = whole
                    .iter()
                    .filter(|e| e.status() == Status::Running)
                    .count();
                let lied: Vec<&Observation> = observed
                    .stand_ins()
                    .iter()
                    .map(|&i| &got[i as usize])
                    .collect();
                assert!(lied.len() >= running, "#{n}");
                let worst = (whole.iter().filter(|e| measured(e.status())))
                    .filter_map(|e| e.objective)
                    .reduce(|a, b| worse(a, b, minimize));
                for o in lied {
                    assert_eq!(o.objective.map(f64::to_bits), worst.map(f64::to_bits));
                }
                // Every infeasible configuration counts, dropped or not.
                let mut bad: Vec<String> = observed
                    .infeasible()
                    .iter()
                    .map(|c| format!("{c:?}"))
                    .collect();
                let mut want_bad: Vec<String> = (infeasible_configs(&whole).iter())
                    .map(|c| format!("{c:?}"))
                    .collect();
                bad.sort();
                want_bad.sort();
                assert_eq!(bad, want_bad, "#{n}");
                assert_eq!(observed.through(), Some(n));
                forget(&mut shown, 16);
            }
            assert!(compactions >= 10, "{compactions} compactions");
            assert_eq!(
                anew,
                usize::from(minimize),
                "converted anew once, at the start"
            );
        }
    }

    /// The sampler's index follows a compacted view (as the knobs proposer has it follow):
    /// the answers of a fresh index over the same observations, and what was dropped still
    /// counts as tried.
    #[test]
    fn the_sampler_follows_a_compacted_view() {
        let text = "A = 0.5  # hone: 0.0..1.0\nB = 5  # hone: int 1..40\n";
        let found = knobs::discover("p.py", text).expect("the knobs parse");
        let incumbent = knobs::config_of(&found);
        let bounds = Bounds {
            high: 48,
            low: 24,
            best: 6,
            recent: 6,
        };
        let mut observed = Observed::with_bounds(bounds);
        let mut cache = SamplerCache::new();
        let mut history: Vec<ExperimentRecord> = Vec::new();
        let mut first_dropped: Option<Config> = None;
        let mut repeats = 0;
        for n in 0..160u64 {
            observed.sync(&history, true);
            let moves = observed.take_moves();
            let compacted = !moves.kept.is_empty();
            super::super::follow(&mut cache, moves);
            let obs = observed.observations();
            if first_dropped.is_none() && compacted {
                let held: Vec<String> = obs.iter().map(|o| format!("{:?}", o.config)).collect();
                first_dropped = (history.iter())
                    .filter_map(|e| e.config.as_ref().and_then(config_from_json))
                    .find(|c| !held.contains(&format!("{c:?}")));
                assert!(first_dropped.is_some(), "the compaction dropped nothing");
            }
            let guide = SamplerGuide::default();
            let mut fresh = SamplerCache::new();
            let want =
                knobs::suggest_cached(&mut fresh, &found, obs, &incumbent, true, 5, n, &guide);
            let got =
                knobs::suggest_cached(&mut cache, &found, obs, &incumbent, true, 5, n, &guide);
            // The same answer, unless a fresh index of the view proposes again what was
            // dropped from it; never a configuration tried before.
            let tried = |s: &Option<(Config, Option<usize>)>| {
                let c = s.as_ref().map(|(c, _)| serde_json::to_value(c).ok());
                history.iter().any(|e| Some(e.config.clone()) == c)
            };
            if tried(&want) {
                repeats += 1;
            } else {
                assert_eq!(got, want, "suggestion {n}");
            }
            assert!(!tried(&got), "#{n}: {got:?} was tried");
            assert_eq!(cache.len(), obs.len());
            if let Some(dropped) = &first_dropped {
                // Offered first as a candidate: a fresh index of the view takes it, the one
                // that followed the view knows it was tried.
                let candidates = [dropped.clone()];
                let guide = SamplerGuide {
                    candidates: &candidates,
                    ..SamplerGuide::default()
                };
                let mut fresh = SamplerCache::new();
                let taken = |s: Option<(Config, Option<usize>)>| s.and_then(|(_, from)| from);
                let fresh_pick =
                    knobs::suggest_cached(&mut fresh, &found, obs, &incumbent, true, 5, n, &guide);
                assert_eq!(taken(fresh_pick), Some(0));
                let mut followed = cache.clone();
                let pick = knobs::suggest_cached(
                    &mut followed,
                    &found,
                    obs,
                    &incumbent,
                    true,
                    5,
                    n,
                    &guide,
                );
                assert_eq!(
                    taken(pick),
                    None,
                    "#{n}: a dropped configuration proposed again"
                );
            }
            let Some((c, _)) = got else { break };
            let y = (a_of(&c) - 0.3).powi(2);
            history.push(ExperimentRecord {
                n,
                status: Some(if n == 0 {
                    Status::Baseline
                } else {
                    Status::Discard
                }),
                objective: Some(y),
                config: serde_json::to_value(&c).ok(),
                ..Default::default()
            });
        }
        assert_eq!(history.len(), 160);
        assert!(first_dropped.is_some());
        // The view alone would have proposed some again.
        assert!(repeats > 0);
    }

    fn a_of(c: &Config) -> f64 {
        match c.get("A") {
            Some(KnobValue::Float(x)) => *x,
            other => panic!("A = {other:?}"),
        }
    }

    /// The knobs proposer's suggestions with the kept view (and the engine dropping old
    /// configurations) are those of the whole history converted on every proposal: 400
    /// experiments, crashes (A > 0.8) and prunes among them, a resume halfway.
    #[test]
    fn suggestions_are_those_of_the_whole_history() {
        let text = "A = 0.5  # hone: 0.0..1.0\nB = 5  # hone: int 1..40\nC = 0.1  # hone: log 0.001..1.0\n";
        let found = knobs::discover("p.py", text).expect("the knobs parse");
        let incumbent = knobs::config_of(&found);
        let record =
            |n: u64, config: &Config, status: Status, objective: Option<f64>| ExperimentRecord {
                n,
                status: Some(status),
                objective,
                config: serde_json::to_value(config).ok(),
                ..Default::default()
            };
        let mut whole = vec![record(0, &incumbent, Status::Baseline, Some(1.0))];
        let mut shown = whole.clone();
        let (mut observed, mut cache, mut fresh) =
            (Observed::new(), SamplerCache::new(), SamplerCache::new());
        let mut statuses = BTreeMap::new();
        for n in 1..400u64 {
            if n == 200 {
                (observed, cache) = (Observed::new(), SamplerCache::new());
                shown = whole.clone();
            }
            let (want_obs, want_bad) = (observations(&whole, true), infeasible_configs(&whole));
            let want_lied = stand_ins(&whole);
            let guide = |bad, lied| SamplerGuide {
                infeasible: bad,
                stand_ins: lied,
                ..SamplerGuide::default()
            };
            let want = knobs::suggest_cached(
                &mut fresh,
                &found,
                &want_obs,
                &incumbent,
                true,
                3,
                n,
                &guide(&want_bad, &want_lied),
            );
            observed.sync(&shown, true);
            let (obs, bad) = (observed.observations(), observed.infeasible());
            let guide = guide(bad, observed.stand_ins());
            let got =
                knobs::suggest_cached(&mut cache, &found, obs, &incumbent, true, 3, n, &guide);
            assert_eq!(got, want, "suggestion {n}");
            forget(&mut shown, 8);
            let Some((c, _)) = got else { break };
            let a = a_of(&c);
            let (status, y) = match a {
                a if a > 0.8 => (Status::Crash, None),
                a if a < 0.05 => (Status::Pruned, None),
                a => (Status::Discard, Some((a - 0.6).powi(2))),
            };
            *statuses.entry(format!("{status:?}")).or_insert(0) += 1;
            whole.push(record(n, &c, status, y));
            shown.push(record(n, &c, status, y));
        }
        assert_eq!(whole.len(), 400);
        // Crashes are among them (3 since crashes attributed to one knob mark it at once: the
        // wall at A = 0.8 is learned after fewer).
        assert!(
            statuses.get("Crash").copied().unwrap_or(0) >= 3,
            "{statuses:?}"
        );
    }
}
