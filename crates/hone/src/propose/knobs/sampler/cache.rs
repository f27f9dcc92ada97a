//! What a run's history tried, indexed once and kept across suggestions: the digest of every
//! observation's configuration (`Space::key`) and their set. A suggestion then indexes only
//! the observations added since the last one, so "already tried" costs the same at 10,000
//! experiments as at 100.
//!
//! The contract: the history given to one cache only grows at its end. Anything else (a
//! history that is shorter, another run's, other knobs) is noticed by the first and last
//! indexed digests or the knobs' names, and the cache then indexes the history from scratch,
//! as a fresh one does after a resume. The infeasible configurations may also change in the
//! middle (a parallel run's earlier experiment fails late): every one indexed is checked by
//! its [`fingerprint`] on each call.

use std::collections::HashSet;

use super::super::feasible::numeric;
use super::super::{Config, KnobValue};
use super::space::{Coord, Dim, Space};
use super::Observation;
use crate::util::splitmix64;

/// The index of a history's configurations and of the infeasible ones, kept across
/// suggestions ([`super::suggest_cached`]).
#[derive(Clone, Debug, Default)]
pub struct SamplerCache {
    /// The free knobs the index was made over (digests and points depend on them alone).
    dims: Vec<Dim>,
    /// The history's observations.
    pub(super) history: Index,
    /// The configurations that crashed, timed out or violated a constraint
    /// (`SamplerGuide::infeasible`).
    pub(super) infeasible: Index,
    /// The [`fingerprint`]s of configurations tried that left the history before they were
    /// indexed (a resumed run's view bounded before its first suggestion): tried too.
    pub(super) tried_prints: HashSet<u64>,
}

/// One list of configurations, indexed.
#[derive(Clone, Debug, Default)]
pub(super) struct Index {
    /// One digest per configuration, in order.
    pub(super) keys: Vec<u64>,
    /// The same digests as a set.
    pub(super) tried: HashSet<u64>,
    /// With `check_all`: each configuration's [`fingerprint`], cheaper to check again on every
    /// call than its digest.
    fingerprints: Vec<u64>,
    /// Each configuration's point (`None`: a value some dimension cannot hold), for the first
    /// ones indexed (all of them once a suggestion needed them).
    pub(super) points: Vec<Option<Vec<Coord>>>,
    /// Per dimension, each configuration's value there as a number (`None`: not a number),
    /// as far as `points`.
    pub(super) columns: Vec<Vec<Option<f64>>>,
}

impl SamplerCache {
    /// An empty cache: the first suggestion indexes the whole history.
    pub fn new() -> SamplerCache {
        SamplerCache::default()
    }

    /// How many observations of the history are indexed.
    pub fn len(&self) -> usize {
        self.history.keys.len()
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.history.keys.is_empty()
    }

    /// Keeps the history's entries marked in `keep` (a mask over the history as it was when
    /// they were dropped from it; the index may hold fewer, not more), in order: the history
    /// was compacted, its order kept. What was tried stays whole (`tried`), the positions
    /// (digests, points, values) follow the history. An index holding more than the mask
    /// covers is not of that history: it starts again.
    /// `dropped`: the [`fingerprint`]s of the configurations the mask drops, in order: those
    /// not indexed yet still count as tried.
    pub fn retain_history(&mut self, keep: &[bool], dropped: &[u64]) {
        let index = &mut self.history;
        if index.keys.len() > keep.len() {
            self.history = Index::default();
            return;
        }
        let unindexed = (keep.iter().enumerate())
            .filter(|(_, k)| !**k)
            .map(|(i, _)| i);
        for (i, print) in unindexed.zip(dropped) {
            if i >= index.keys.len() {
                self.tried_prints.insert(*print);
            }
        }
        fn retain<T>(v: &mut Vec<T>, keep: &[bool]) {
            let mut i = 0;
            v.retain(|_| {
                i += 1;
                keep[i - 1]
            });
        }
        retain(&mut index.keys, keep);
        retain(&mut index.fingerprints, keep);
        retain(&mut index.points, keep);
        for column in &mut index.columns {
            retain(column, keep);
        }
    }

    /// Forgets the positions of the history's configurations, keeping what was tried: the
    /// history was converted anew (the same run's), and is indexed again from its start.
    pub fn forget_positions(&mut self) {
        let tried = std::mem::take(&mut self.history.tried);
        self.history = Index {
            tried,
            ..Index::default()
        };
    }

    /// Indexes `history` and `infeasible`: each from scratch unless it extends what was
    /// indexed, else only what was added since. `locate`: points and values too (what the
    /// feasibility model needs; without crashes they are not computed).
    pub(super) fn sync(
        &mut self,
        space: &Space,
        history: &[Observation],
        infeasible: &[Config],
        locate: bool,
    ) {
        if self.dims != space.dims {
            // Fingerprints are of whole configurations, whatever the knobs: they stay.
            let tried_prints = std::mem::take(&mut self.tried_prints);
            *self = SamplerCache {
                dims: space.dims.clone(),
                tried_prints,
                ..SamplerCache::default()
            };
        }
        // The history is in the order of the experiments' numbers, and an experiment is in it
        // from its start (running, at a made-up value): it only grows at its end, so its first
        // and last indexed entries are checked. The infeasible configurations are in that order
        // too, but one appears when its experiment fails, and an earlier experiment of a
        // parallel run can fail after a later one: each indexed entry is checked (a
        // `fingerprint` per failure, a small part of the history, cheaper than its digest).
        self.history
            .sync(space, history.len(), |i| &history[i].config, locate, false);
        self.infeasible
            .sync(space, infeasible.len(), |i| &infeasible[i], locate, true);
    }
}

impl Index {
    /// Indexes the `len` configurations `at(0..len)`, from scratch unless they start with what
    /// was indexed: the first and last indexed ones have the digests recorded, or with
    /// `check_all` every indexed one has the fingerprint recorded.
    fn sync<'c>(
        &mut self,
        space: &Space,
        len: usize,
        at: impl Fn(usize) -> &'c Config,
        locate: bool,
        check_all: bool,
    ) {
        let n = self.keys.len();
        let same = |i: usize| space.key(at(i)) == self.keys[i];
        let extends = len >= n
            && (n == 0
                || if check_all {
                    self.fingerprints.len() == n
                        && (0..n).all(|i| fingerprint(at(i)) == self.fingerprints[i])
                } else {
                    same(0) && same(n - 1)
                });
        if !extends {
            *self = Index::default();
        }
        for i in self.keys.len()..len {
            let key = space.key(at(i));
            self.keys.push(key);
            self.tried.insert(key);
            if check_all {
                self.fingerprints.push(fingerprint(at(i)));
            }
        }
        if !locate {
            return;
        }
        self.columns.resize(space.dims.len(), Vec::new());
        for i in self.points.len()..len {
            let config = at(i);
            self.points.push(space.encode(config));
            for (column, d) in self.columns.iter_mut().zip(&space.dims) {
                column.push(config.get(&d.name).and_then(numeric));
            }
        }
    }
}

/// A digest of a whole configuration, every name and value as they are (no look-up by the
/// space's knobs): what tells that an indexed configuration is still the one given, at a
/// fraction of the cost of `Space::key`. It sees more than the key, points and columns do
/// (names and values outside the space's knobs), so where it differs and they would not, the
/// index is only made again.
pub fn fingerprint(config: &Config) -> u64 {
    let mut h: u64 = 0x6869_6e67_6572_7072;
    let mut mix = |word: u64| {
        let mut state = h ^ word;
        h = splitmix64(&mut state);
    };
    let text = |mix: &mut dyn FnMut(u64), t: &str| {
        mix(t.len() as u64);
        for chunk in t.as_bytes().chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            mix(u64::from_le_bytes(word));
        }
    };
    for (name, value) in config {
        text(&mut mix, name);
        match value {
            KnobValue::Bool(b) => {
                mix(1);
                mix(u64::from(*b));
            }
            KnobValue::Int(n) => {
                mix(2);
                // Two's complement bits: the cast keeps every value apart.
                mix(*n as u64);
            }
            KnobValue::Float(x) => {
                mix(3);
                mix(x.to_bits());
            }
            KnobValue::Str(t) => {
                mix(4);
                text(&mut mix, t);
            }
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::super::tests::{knobs_of, num, Simulated};
    use super::super::{suggest_cached, suggest_guided, Config, SamplerGuide};
    use super::*;
    use crate::propose::knobs::{config_of, discover, Knob};

    const KNOBS: &str = "A = 0.5   # hone: 0.0..1.0\n\
                         B = 0.01  # hone: log 1e-5..1.0\n\
                         C = 8     # hone: int 1..64\n\
                         D = \"x\"   # hone: choice [\"x\", \"y\", \"z\"]\n";

    fn knobs() -> Vec<Knob> {
        knobs_of(KNOBS)
    }

    /// A loop of `n` suggestions (crashing where A > 0.8) asked through one cache kept across
    /// calls, each checked against a fresh one; `resume_at`: where the cache starts anew, as
    /// after a resume. Returns the history.
    fn run(n: u64, resume_at: u64) -> Vec<Observation> {
        let knobs = knobs();
        let mut sim = Simulated::new(config_of(&knobs), 1.0);
        let mut cache = SamplerCache::new();
        for i in 1..n {
            if i == resume_at {
                cache = SamplerCache::new();
            }
            let guide = SamplerGuide {
                infeasible: &sim.infeasible,
                ..SamplerGuide::default()
            };
            let (history, incumbent) = (&sim.history, &sim.incumbent);
            let want = suggest_guided(&knobs, history, incumbent, true, 5, i, &guide);
            let got = suggest_cached(&mut cache, &knobs, history, incumbent, true, 5, i, &guide);
            assert_eq!(got, want, "suggestion {i}");
            assert_eq!(cache.len(), history.len());
            assert_eq!(cache.infeasible.keys.len(), sim.infeasible.len());
            let Some((c, _)) = got else { break };
            let y = (num(&c, "A") <= 0.8).then(|| (num(&c, "A") - 0.7).powi(2));
            sim.record(c, y);
        }
        sim.history
    }

    #[test]
    fn a_cache_kept_across_suggestions_gives_the_answers_of_a_fresh_one() {
        // Past the model cap (256), with crashes, and a resume halfway.
        let history = run(300, 150);
        assert_eq!(history.len(), 300);
        assert!(history.iter().any(|o| o.objective.is_none()));
    }

    #[test]
    fn a_compacted_history_keeps_its_positions_and_everything_tried() {
        let knobs = knobs();
        let history = run(60, 0);
        let space = Space::new(&knobs, &[], &config_of(&knobs));
        let mut cache = SamplerCache::new();
        cache.sync(&space, &history[..50], &[], true);
        let all_tried = cache.history.tried.clone();
        // Every third kept, over a history that grew by ten since it was indexed.
        let keep: Vec<bool> = (0..60).map(|i| i % 3 == 0).collect();
        let dropped: Vec<u64> = (history.iter().zip(&keep))
            .filter(|(_, k)| !**k)
            .map(|(o, _)| fingerprint(&o.config))
            .collect();
        cache.retain_history(&keep, &dropped);
        // Those dropped before they were indexed (past the first 50) still count as tried, by
        // their fingerprints; the ones indexed are in the index's set already.
        let late: HashSet<u64> = (50..60)
            .filter(|i| i % 3 != 0)
            .map(|i| fingerprint(&history[i].config))
            .collect();
        assert_eq!(cache.tried_prints, late);
        let kept: Vec<Observation> = (history.iter().zip(&keep))
            .filter(|(_, k)| **k)
            .map(|(o, _)| o.clone())
            .collect();
        cache.sync(&space, &kept, &[], true);
        let mut fresh = SamplerCache::new();
        fresh.sync(&space, &kept, &[], true);
        assert_eq!(cache.history.keys, fresh.history.keys);
        assert_eq!(cache.history.points, fresh.history.points);
        assert_eq!(cache.history.columns, fresh.history.columns);
        // What was dropped still counts as tried; the ten added since are tried too.
        assert!(all_tried.is_subset(&cache.history.tried));
        assert!(fresh.history.tried.is_subset(&cache.history.tried));
        assert!(cache.history.tried.len() > fresh.history.tried.len());
        // A mask shorter than the index is of another history: the index starts again.
        cache.retain_history(&keep[..5], &[]);
        assert!(cache.is_empty() && cache.history.tried.is_empty());
    }

    #[test]
    fn a_history_that_does_not_extend_the_indexed_one_is_indexed_anew() {
        let knobs = knobs();
        let history = run(40, 0);
        let space = Space::new(&knobs, &[], &config_of(&knobs));
        let mut cache = SamplerCache::new();
        let mut check = |h: &[Observation]| {
            let bad: Vec<Config> = h.iter().rev().take(5).map(|o| o.config.clone()).collect();
            cache.sync(&space, h, &bad, true);
            for (index, configs) in [
                (
                    &cache.history,
                    h.iter().map(|o| &o.config).collect::<Vec<_>>(),
                ),
                (&cache.infeasible, bad.iter().collect()),
            ] {
                let keys: Vec<u64> = configs.iter().map(|c| space.key(c)).collect();
                assert_eq!(index.keys, keys);
                assert_eq!(index.tried, keys.iter().copied().collect::<HashSet<u64>>());
                let points: Vec<Option<Vec<Coord>>> =
                    configs.iter().map(|c| space.encode(c)).collect();
                assert_eq!(index.points, points);
                let a: Vec<Option<f64>> = configs.iter().map(|c| Some(num(c, "A"))).collect();
                assert_eq!(index.columns[0], a);
                assert_eq!(index.columns[3], vec![None; configs.len()]);
            }
        };
        check(&history[..30]);
        // Longer, shorter, another history of the same length, then the whole one again.
        check(&history);
        check(&history[..10]);
        let mut other = history[..10].to_vec();
        other.reverse();
        check(&other);
        let mut changed_last = history[..10].to_vec();
        changed_last[9] = history[20].clone();
        check(&changed_last);
        check(&history);
        // Other knobs: the digests are made over them.
        let fewer = discover("t.py", "A = 0.5   # hone: 0.0..1.0\n").unwrap_or_default();
        let small = Space::new(&fewer, &[], &config_of(&fewer));
        cache.sync(&small, &history, &[], true);
        let want: Vec<u64> = history.iter().map(|o| small.key(&o.config)).collect();
        assert_eq!(cache.history.keys, want);
        assert_eq!(cache.history.columns.len(), 1);
        assert!(cache.infeasible.keys.is_empty());
    }

    #[test]
    fn a_failure_of_an_earlier_experiment_is_indexed_where_it_lands() {
        let knobs = knobs();
        let history = run(12, 0);
        let space = Space::new(&knobs, &[], &config_of(&knobs));
        let (a, b, x) = (&history[5].config, &history[6].config, &history[7].config);
        assert_ne!(space.key(a), space.key(b));
        let mut cache = SamplerCache::new();
        cache.sync(&space, &history, &[x.clone(), a.clone(), a.clone()], true);
        // An earlier experiment of a parallel run (configuration b) fails after two later
        // ones (both a): it lands before them, the first and last entries unchanged.
        let late = [x.clone(), b.clone(), a.clone(), a.clone()];
        cache.sync(&space, &history, &late, true);
        let keys: Vec<u64> = late.iter().map(|c| space.key(c)).collect();
        assert_eq!(cache.infeasible.keys, keys);
        assert!(cache.infeasible.tried.contains(&space.key(b)));
        let points: Vec<Option<Vec<Coord>>> = late.iter().map(|c| space.encode(c)).collect();
        assert_eq!(cache.infeasible.points, points);
        // One in the middle replaced, the length, first and last unchanged: indexed anew.
        let swapped = [x.clone(), a.clone(), b.clone(), a.clone()];
        cache.sync(&space, &history, &swapped, true);
        let keys: Vec<u64> = swapped.iter().map(|c| space.key(c)).collect();
        assert_eq!(cache.infeasible.keys, keys);
        // A knob's value changed in place by a hair (another digest) or a name outside the
        // space added (the same digest): the fingerprint sees both, the index is made again.
        let mut nudged = swapped.clone();
        nudged[1].insert("A", KnobValue::Float(num(a, "A") + 1e-12));
        nudged[2].insert("outside", KnobValue::Bool(true));
        assert_ne!(fingerprint(&nudged[1]), fingerprint(&swapped[1]));
        assert_ne!(fingerprint(&nudged[2]), fingerprint(&swapped[2]));
        cache.sync(&space, &history, &nudged, true);
        let keys: Vec<u64> = nudged.iter().map(|c| space.key(c)).collect();
        assert_eq!(cache.infeasible.keys, keys);
        let prints: Vec<u64> = nudged.iter().map(fingerprint).collect();
        assert_eq!(cache.infeasible.fingerprints, prints);
        // Names count, not only values: one value under two names is two fingerprints.
        let renamed = |name: &str| Config::from([(name.to_string(), KnobValue::Int(1))]);
        assert_ne!(fingerprint(&renamed("A")), fingerprint(&renamed("B")));
        // The length is in it: a name padded with a zero byte is another name.
        assert_ne!(fingerprint(&renamed("A")), fingerprint(&renamed("A\0")));
    }
}
