//! Feasibility learned from crashes, in the knobs' own values: where a numeric knob's explored
//! range was narrowed because every configuration tried beyond some value crashed.
//!
//! A configuration is *infeasible* when its experiment crashed, timed out or violated a
//! constraint. For each numeric knob, let `edge` be the largest value among configurations that
//! finished; when enough infeasible configurations lie above it, the knob's explored range is
//! narrowed to end there (and the same below the smallest finished value). Enough: at least
//! [`MIN_CRASHES`], and so many that crashes falling there by chance is unlikely: with a
//! share `r` of the run's configurations infeasible, `k` crashes all beyond the edge happen by
//! chance with odds about `r^k`, which must be under [`CHANCE`] (at `r` = 0.5, 5 crashes).
//! The sampler then stops proposing beyond the edge, testing the gap between the edge and the
//! nearest crash now and then (`sampler::feasible`). Everything here is a pure function of the
//! run's history, so a resumed run or a parallel one sees the same narrowing.

use std::collections::BTreeMap;

use super::{Config, KnobValue};

/// Crashes beyond a knob's finished values before its range counts as narrowed.
pub const MIN_CRASHES: usize = 3;
/// The odds of the crashes beyond an edge falling there by chance that still count as chance.
pub const CHANCE: f64 = 0.05;

/// How many crashes beyond an edge narrow a range when `crashed` of `total` configurations
/// were infeasible.
pub fn crashes_needed(crashed: usize, total: usize) -> usize {
    let r = crashed as f64 / total.max(1) as f64;
    if r <= 0.0 {
        return MIN_CRASHES;
    }
    if r >= 1.0 {
        return usize::MAX;
    }
    let k = (CHANCE.ln() / r.ln()).ceil();
    (k as usize).max(MIN_CRASHES)
}

/// Which end of a knob's range a narrowing cuts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Values above `edge` crashed.
    Above,
    /// Values below `edge` crashed.
    Below,
}

/// A change of one knob's narrowing on one side after an entry of the history: it appeared
/// or changed (`now` is it), or it went (`now` is `None`: a value beyond its edge finished,
/// or more crashes are needed than lie there).
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub knob: String,
    pub side: Side,
    pub now: Option<Narrowing>,
}

/// One knob's explored range, narrowed by crashes.
#[derive(Clone, Debug, PartialEq)]
pub struct Narrowing {
    pub knob: String,
    pub side: Side,
    /// The furthest value that finished on that side: where the narrowed range ends.
    pub edge: f64,
    /// The other end of the explored range (the furthest value tried the other way).
    pub other: f64,
    /// The crashed value nearest the edge, beyond it.
    pub nearest_crash: f64,
    /// How many infeasible configurations lie beyond the edge.
    pub crashes: usize,
}

impl Narrowing {
    /// `knob LR: explored range narrowed to [0.0001, 0.05] after 4 crashes above 0.05`.
    pub fn describe(&self) -> String {
        let (lo, hi, word) = match self.side {
            Side::Above => (self.other, self.edge, "above"),
            Side::Below => (self.edge, self.other, "below"),
        };
        format!(
            "knob {}: explored range narrowed to [{}, {}] after {} crashes {word} {} (nearest {})",
            self.knob,
            num(lo),
            num(hi),
            self.crashes,
            num(self.edge),
            num(self.nearest_crash)
        )
    }
}

/// A value as the knob holds it: integers without a decimal point.
fn num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        KnobValue::Int(x as i64).to_string()
    } else {
        KnobValue::Float(x).to_string()
    }
}

/// A knob value as a number: a finite float or an integer.
pub(crate) fn numeric(v: &KnobValue) -> Option<f64> {
    v.as_f64().filter(|x| x.is_finite())
}

/// Every narrowing the finished and infeasible configurations show, by knob name then side.
pub fn narrowings(finished: &[&Config], infeasible: &[&Config]) -> Vec<Narrowing> {
    let mut names: Vec<&str> = infeasible.iter().flat_map(|c| c.keys()).collect();
    names.sort();
    names.dedup();
    let mut out = Vec::new();
    let needed = crashes_needed(infeasible.len(), infeasible.len() + finished.len());
    for name in names {
        let values = |set: &[&Config]| -> Vec<f64> {
            set.iter()
                .filter_map(|c| c.get(name).and_then(numeric))
                .collect()
        };
        out.extend(knob_narrowings(
            name,
            &values(finished),
            &values(infeasible),
            needed,
        ));
    }
    out
}

/// What [`narrowings`] says of one knob, given its finished and crashed values and the crashes
/// needed ([`crashes_needed`] of the whole history): at most one narrowing each side.
pub(crate) fn knob_narrowings(
    name: &str,
    fine: &[f64],
    crashed: &[f64],
    needed: usize,
) -> Vec<Narrowing> {
    let mut out = Vec::new();
    if fine.is_empty() || crashed.len() < needed {
        return out;
    }
    let lo = fine.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = fine.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let all_lo = crashed.iter().copied().fold(lo, f64::min);
    let all_hi = crashed.iter().copied().fold(hi, f64::max);
    for side in [Side::Below, Side::Above] {
        let (edge, other) = match side {
            Side::Above => (hi, all_lo),
            Side::Below => (lo, all_hi),
        };
        let beyond: Vec<f64> = crashed
            .iter()
            .copied()
            .filter(|&x| match side {
                Side::Above => x > edge,
                Side::Below => x < edge,
            })
            .collect();
        if beyond.len() < needed {
            continue;
        }
        // The nearest beyond the edge: the smallest above it, the largest below it.
        let nearest = match side {
            Side::Above => beyond.iter().copied().fold(f64::INFINITY, f64::min),
            Side::Below => beyond.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        };
        out.push(Narrowing {
            knob: name.to_string(),
            side,
            edge,
            other,
            nearest_crash: nearest,
            crashes: beyond.len(),
        });
    }
    out
}

/// When each narrowing of a run appeared: for every prefix of `history` (configuration and
/// whether it was infeasible, `None` for one still running or not measured), the narrowings
/// that are new or changed after that entry, with the entry's index. A narrowing that later
/// disappears (a value beyond the edge finished) is not reported again until it returns.
///
/// The same as calling [`narrowings`] on every prefix, in O(n log n): each knob keeps its
/// finished values' ends and its crashed values in order, and after an entry only the knobs
/// it holds are looked at again (every knob when the crashes needed changed).
pub fn narrowing_history(history: &[(Config, Option<bool>)]) -> Vec<(usize, Narrowing)> {
    let mut h = NarrowingHistory::default();
    let mut out = Vec::new();
    for (i, (config, state)) in history.iter().enumerate() {
        out.extend(h.push(config, *state).into_iter().map(|n| (i, n)));
    }
    out
}

/// [`narrowing_history`] one entry at a time, for a reader that streams the history (`hone
/// log` prints each experiment's narrowings under it as it reads it, and so never reads the
/// run twice).
#[derive(Default)]
pub struct NarrowingHistory {
    tracks: BTreeMap<String, Track>,
    finished: usize,
    infeasible: usize,
    needed_before: Option<usize>,
}

impl NarrowingHistory {
    /// The next entry of the history: the narrowings that are new or changed after it.
    pub fn push(&mut self, config: &Config, state: Option<bool>) -> Vec<Narrowing> {
        self.push_changes(config, state)
            .into_iter()
            .filter_map(|c| c.now)
            .collect()
    }

    /// [`NarrowingHistory::push`] with the narrowings that went too: every change of a knob's
    /// narrowing on one side after the entry, by knob name then side (below first).
    pub fn push_changes(&mut self, config: &Config, state: Option<bool>) -> Vec<Change> {
        let mut out = Vec::new();
        let Some(crashed) = state else {
            return out;
        };
        if crashed {
            self.infeasible += 1;
        } else {
            self.finished += 1;
        }
        for (name, x) in config.iter().filter_map(|(k, v)| Some((k, numeric(v)?))) {
            if !self.tracks.contains_key(name) {
                self.tracks.insert(name.to_string(), Track::new());
            }
            if let Some(t) = self.tracks.get_mut(name) {
                if crashed {
                    t.crash(x);
                } else {
                    t.finish(x);
                }
            }
        }
        let needed = crashes_needed(self.infeasible, self.infeasible + self.finished);
        let mut look = |name: &str, t: &mut Track| {
            for (k, side) in [Side::Below, Side::Above].into_iter().enumerate() {
                let now = t.narrowing(name, side, needed);
                if now != t.current[k] {
                    out.push(Change {
                        knob: name.to_string(),
                        side,
                        now: now.clone(),
                    });
                }
                t.current[k] = now;
            }
        };
        if self.needed_before != Some(needed) {
            for (name, t) in self.tracks.iter_mut() {
                look(name, t);
            }
        } else {
            for name in config.keys() {
                if let Some(t) = self.tracks.get_mut(name) {
                    look(name, t);
                }
            }
        }
        self.needed_before = Some(needed);
        out
    }

    /// The narrowings in force after the entries pushed so far, by knob name then side: what
    /// [`narrowings`] says of them (each knob's last look is current: after an entry, every
    /// knob it changed is looked at again, and every knob when the crashes needed changed).
    pub fn current(&self) -> Vec<Narrowing> {
        self.tracks
            .values()
            .flat_map(|t| t.current.iter().flatten().cloned())
            .collect()
    }
}

/// A finite knob value as an ordered key (-0 is 0, as `==` has it).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Key(f64);

impl Key {
    fn new(x: f64) -> Key {
        Key(x + 0.0)
    }
}

impl Eq for Key {}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Key) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Key) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// One knob's values so far, for [`narrowing_history`].
struct Track {
    /// The smallest and largest finished values (infinite while none finished).
    lo: f64,
    hi: f64,
    /// Crashed values with how many times each crashed.
    crashed: BTreeMap<Key, usize>,
    count: usize,
    /// Crashed values below `lo` and above `hi`.
    below: usize,
    above: usize,
    /// The narrowings last reported, below and above.
    current: [Option<Narrowing>; 2],
}

impl Track {
    fn new() -> Track {
        Track {
            lo: f64::INFINITY,
            hi: f64::NEG_INFINITY,
            crashed: BTreeMap::new(),
            count: 0,
            below: 0,
            above: 0,
            current: [None, None],
        }
    }

    fn crash(&mut self, x: f64) {
        *self.crashed.entry(Key::new(x)).or_insert(0) += 1;
        self.count += 1;
        self.below += usize::from(x < self.lo);
        self.above += usize::from(x > self.hi);
    }

    /// A finished value: the crashes it passes no longer lie beyond the ends. Each crashed
    /// value is passed at most once each way, as the ends only move outwards.
    fn finish(&mut self, x: f64) {
        use std::ops::Bound::{Excluded, Included};
        if x > self.hi {
            let passed: usize = self
                .crashed
                .range((Excluded(Key::new(self.hi)), Included(Key::new(x))))
                .map(|(_, c)| c)
                .sum();
            self.above -= passed;
            self.hi = x;
        }
        if x < self.lo {
            let passed: usize = self
                .crashed
                .range((Included(Key::new(x)), Excluded(Key::new(self.lo))))
                .map(|(_, c)| c)
                .sum();
            self.below -= passed;
            self.lo = x;
        }
    }

    /// What [`narrowings`] says of this knob on one side.
    fn narrowing(&self, name: &str, side: Side, needed: usize) -> Option<Narrowing> {
        use std::ops::Bound::{Excluded, Unbounded};
        if self.lo > self.hi || self.count < needed {
            return None;
        }
        let (edge, crashes) = match side {
            Side::Above => (self.hi, self.above),
            Side::Below => (self.lo, self.below),
        };
        if crashes < needed {
            return None;
        }
        let (other, nearest) = match side {
            Side::Above => (
                self.lo.min(self.crashed.keys().next()?.0),
                self.crashed
                    .range((Excluded(Key::new(edge)), Unbounded))
                    .next()?
                    .0,
            ),
            Side::Below => (
                self.hi.max(self.crashed.keys().next_back()?.0),
                self.crashed
                    .range((Unbounded, Excluded(Key::new(edge))))
                    .next_back()?
                    .0,
            ),
        };
        Some(Narrowing {
            knob: name.to_string(),
            side,
            edge,
            other,
            nearest_crash: nearest.0,
            crashes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(m: f64, lr: f64) -> Config {
        [
            ("MOMENTUM".to_string(), KnobValue::Float(m)),
            ("LR".to_string(), KnobValue::Float(lr)),
        ]
        .into_iter()
        .collect()
    }

    #[test]
    fn crashes_beyond_every_finished_value_narrow_that_knob_only() {
        // Three crashes in ten: three beyond the edge are unlikely by chance (0.3^3 < 0.05).
        let fine = [
            cfg(0.5, 0.01),
            cfg(0.9, 0.1),
            cfg(0.2, 0.001),
            cfg(0.3, 0.002),
            cfg(0.4, 0.003),
            cfg(0.6, 0.004),
            cfg(0.7, 0.005),
        ];
        let bad = [cfg(0.97, 0.05), cfg(0.99, 0.002), cfg(0.96, 0.3)];
        let f: Vec<&Config> = fine.iter().collect();
        let b: Vec<&Config> = bad.iter().collect();
        let n = narrowings(&f, &b);
        assert_eq!(n.len(), 1, "{n:?}");
        assert_eq!(n[0].knob, "MOMENTUM");
        assert_eq!(n[0].side, Side::Above);
        assert_eq!(
            (n[0].edge, n[0].nearest_crash, n[0].crashes),
            (0.9, 0.96, 3)
        );
        assert_eq!(
            n[0].describe(),
            "knob MOMENTUM: explored range narrowed to [0.2, 0.9] after 3 crashes above 0.9 \
             (nearest 0.96)"
        );
        // Two crashes are not evidence enough; three in six are (0.5^3 > 0.05).
        assert!(narrowings(&f, &b[..2]).is_empty());
        assert!(narrowings(&f[..3], &b).is_empty());
        assert_eq!(crashes_needed(3, 6), 5);
        assert_eq!(crashes_needed(0, 6), MIN_CRASHES);
        // A finished value beyond the crashes undoes it.
        let more = [cfg(0.5, 0.01), cfg(0.995, 0.01)];
        let f2: Vec<&Config> = more.iter().collect();
        assert!(narrowings(&f2, &b).is_empty());
    }

    #[test]
    fn the_history_says_at_which_entry_a_narrowing_appeared() {
        let mut h: Vec<(Config, Option<bool>)> = (1..=4)
            .map(|k| (cfg(0.1 * k as f64, 0.01), Some(false)))
            .collect();
        h.extend([
            (cfg(0.5, 0.01), Some(false)),
            (cfg(0.97, 0.05), Some(true)),
            (cfg(0.8, 0.02), Some(false)),
            (cfg(0.99, 0.001), Some(true)),
            (cfg(0.93, 0.05), None),
            (cfg(0.98, 0.015), Some(true)),
            (cfg(0.7, 0.02), Some(false)),
        ]);
        let got = narrowing_history(&h);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].0, 9);
        assert_eq!(got[0].1.edge, 0.8);
    }

    /// `narrowing_history` as it was written first: [`narrowings`] on every prefix.
    fn history_by_prefixes(history: &[(Config, Option<bool>)]) -> Vec<(usize, Narrowing)> {
        let (mut finished, mut infeasible) = (Vec::new(), Vec::new());
        let mut current: Vec<Narrowing> = Vec::new();
        let mut out = Vec::new();
        for (i, (config, state)) in history.iter().enumerate() {
            match state {
                Some(true) => infeasible.push(config),
                Some(false) => finished.push(config),
                None => continue,
            }
            let now = narrowings(&finished, &infeasible);
            out.extend(
                now.iter()
                    .filter(|n| !current.contains(n))
                    .map(|n| (i, n.clone())),
            );
            current = now;
        }
        out
    }

    /// A seeded random history over five knobs (a float, an integer with repeated values, a
    /// negative float, a string, one knob often missing) that crashes beyond A = 0.8, below
    /// B = 2 and now and then by chance, with some entries still running.
    fn random_history(seed: u64, len: usize) -> Vec<(Config, Option<bool>)> {
        let mut state = seed;
        let mut draw = || crate::util::unit_f64(crate::util::splitmix64(&mut state));
        (0..len)
            .map(|_| {
                let a = (draw() * 1000.0).round() / 1000.0;
                let b = (draw() * 12.0).floor() as i64;
                let c = -draw() * 5.0;
                let mut config: Config = [
                    ("A".to_string(), KnobValue::Float(a)),
                    ("B".to_string(), KnobValue::Int(b)),
                    ("C".to_string(), KnobValue::Float(c)),
                    ("D".to_string(), KnobValue::Str(format!("s{}", b % 3))),
                ]
                .into_iter()
                .collect();
                if draw() < 0.5 {
                    config.insert("E", KnobValue::Float(draw()));
                }
                let state = if draw() < 0.05 {
                    None
                } else {
                    Some(a > 0.8 || b < 2 || draw() < 0.05)
                };
                (config, state)
            })
            .collect()
    }

    #[test]
    fn the_incremental_history_is_the_narrowings_of_every_prefix() {
        let mut events = 0;
        for seed in 1..=6 {
            let h = random_history(seed, 300);
            let want = history_by_prefixes(&h);
            let got = narrowing_history(&h);
            assert_eq!(got, want, "seed {seed}");
            events += got.len();
            // Both sides of more than one knob narrow and move.
            let sides: std::collections::BTreeSet<(&str, bool)> = got
                .iter()
                .map(|(_, n)| (n.knob.as_str(), n.side == Side::Above))
                .collect();
            assert!(sides.contains(&("A", true)), "seed {seed}: {sides:?}");
            assert!(sides.contains(&("B", false)), "seed {seed}: {sides:?}");
        }
        assert!(events > 30, "{events}");
        // Crashes on every side of a knob, a finished value beyond the crashes, -0 and 0.
        let knob = |x: f64| -> Config { [("X".to_string(), KnobValue::Float(x))].into() };
        let mut h: Vec<(Config, Option<bool>)> =
            (1..=9).map(|k| (knob(f64::from(k)), Some(false))).collect();
        h.extend(
            [
                (-0.0, false),
                (-0.0, true),
                (12.0, true),
                (12.0, true),
                (-3.0, true),
                (11.0, true),
                (0.0, false),
                (-4.0, true),
                (-5.0, true),
                (15.0, true),
                (-6.0, true),
                (11.5, false),
                (13.0, true),
                (-2.0, false),
                (-7.0, true),
            ]
            .into_iter()
            .map(|(x, bad)| (knob(x), Some(bad))),
        );
        let want = history_by_prefixes(&h);
        assert!(want.len() >= 4, "{want:?}");
        assert_eq!(narrowing_history(&h), want);
    }
}
