//! Feasibility learned from crashes, in the knobs' own values: where a numeric knob's explored
//! range was narrowed because every configuration tried beyond some value crashed.
//!
//! A configuration is *infeasible* when its experiment crashed, timed out or violated a
//! constraint. For each numeric knob, let `edge` be the largest value among configurations that
//! finished; when enough infeasible configurations lie above it, the knob's explored range is
//! narrowed to end there (and the same below the smallest finished value). A crash whose values
//! lie beyond the finished values of several knobs (a point of the initial design moves them
//! all) counts for the one of them with the most crashes beyond it on that side (for each of
//! them on a tie): crashes one knob causes explain it, and do not also narrow a knob they
//! happened to move past its finished values. Enough: at least
//! [`MIN_CRASHES`], and so many that crashes falling there by chance is unlikely: with a
//! share `r` of the run's configurations infeasible, `k` crashes all beyond the edge happen by
//! chance with odds about `r^k`, which must be under [`CHANCE`] (at `r` = 0.5, 5 crashes).
//! The sampler then stops proposing beyond the edge, testing the gap between the edge and the
//! nearest crash now and then (`sampler::feasible`). Everything here is a pure function of the
//! run's history, so a resumed run or a parallel one sees the same narrowing.

use std::collections::{BTreeMap, BTreeSet};

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
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
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
    let values = |set: &[&Config], name: &str| -> Vec<f64> {
        set.iter()
            .filter_map(|c| c.get(name).and_then(numeric))
            .collect()
    };
    let ends: BTreeMap<&str, (f64, f64)> = names
        .iter()
        .map(|&name| {
            let fine = values(finished, name);
            let lo = fine.iter().copied().fold(f64::INFINITY, f64::min);
            (
                name,
                (lo, fine.iter().copied().fold(f64::NEG_INFINITY, f64::max)),
            )
        })
        .collect();
    // Each crash's values beyond their knob's finished values, with the side.
    let beyond: Vec<Vec<(&str, f64, Side)>> = infeasible
        .iter()
        .map(|c| {
            c.iter()
                .filter_map(|(name, v)| {
                    let x = numeric(v)?;
                    let &(lo, hi) = ends.get(name)?;
                    side_of(x, lo, hi).map(|side| (name, x, side))
                })
                .collect()
        })
        .collect();
    let mut raw: BTreeMap<(&str, Side), usize> = BTreeMap::new();
    for &(name, _, side) in beyond.iter().flatten() {
        *raw.entry((name, side)).or_insert(0) += 1;
    }
    // The crashes each knob explains.
    let mut counted: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for sides in &beyond {
        let most = sides
            .iter()
            .map(|&(n, _, s)| raw[&(n, s)])
            .max()
            .unwrap_or(0);
        for &(name, x, side) in sides {
            if raw[&(name, side)] == most {
                counted.entry(name).or_default().push(x);
            }
        }
    }
    let mut out = Vec::new();
    let needed = crashes_needed(infeasible.len(), infeasible.len() + finished.len());
    for name in names {
        out.extend(narrow(
            name,
            &values(finished, name),
            counted.get(name).map_or(&[][..], |v| &v[..]),
            &values(infeasible, name),
            needed,
        ));
    }
    out
}

/// The side of a knob's finished values `lo..=hi` that `x` lies beyond (below, where none
/// finished: `lo` is then infinite).
fn side_of(x: f64, lo: f64, hi: f64) -> Option<Side> {
    if x < lo {
        Some(Side::Below)
    } else if x > hi {
        Some(Side::Above)
    } else {
        None
    }
}

/// What [`narrowings`] says of one knob, given its finished and crashed values and the crashes
/// needed: at most one narrowing each side, every crash beyond an edge counted (the sampler's
/// own edges, `sampler::feasible`).
pub(crate) fn knob_narrowings(
    name: &str,
    fine: &[f64],
    crashed: &[f64],
    needed: usize,
) -> Vec<Narrowing> {
    narrow(name, fine, crashed, crashed, needed)
}

/// One knob's narrowings, given its finished values, the crashed values that count for it,
/// every crashed value (for the other end of the explored range) and the crashes needed
/// ([`crashes_needed`] of the whole history): at most one narrowing each side.
fn narrow(
    name: &str,
    fine: &[f64],
    crashed: &[f64],
    tried: &[f64],
    needed: usize,
) -> Vec<Narrowing> {
    let mut out = Vec::new();
    if fine.is_empty() || crashed.len() < needed {
        return out;
    }
    let lo = fine.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = fine.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let all_lo = tried.iter().copied().fold(lo, f64::min);
    let all_hi = tried.iter().copied().fold(hi, f64::max);
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
    /// Each knob's number in `tracks`, by name (the order narrowings are reported in).
    names: BTreeMap<String, usize>,
    tracks: Vec<Track>,
    /// Every crash so far: its numeric values, and how many of them lie beyond their knob's
    /// finished values (that only falls, as the finished values only spread).
    crashes: Vec<Crash>,
    /// The crashes beyond the finished values of two knobs or more: which knob explains each
    /// depends on every knob's count, so they are counted again whenever a count changes.
    multi: BTreeSet<usize>,
    finished: usize,
    infeasible: usize,
    needed_before: Option<usize>,
}

/// One crash of [`NarrowingHistory`]: its values by knob number.
struct Crash {
    values: Vec<(usize, f64)>,
    outside: usize,
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
        let mut values: Vec<(usize, f64)> = Vec::with_capacity(config.len());
        for (name, v) in config.iter() {
            let Some(x) = numeric(v) else {
                continue;
            };
            let i = match self.names.get(name) {
                Some(&i) => i,
                None => {
                    self.names.insert(name.to_string(), self.tracks.len());
                    self.tracks.push(Track::new(name));
                    self.tracks.len() - 1
                }
            };
            values.push((i, x));
        }
        // The knobs to look at again: the entry's, and those whose counted crashes changed.
        let mut touched: Vec<usize> = values.iter().map(|&(i, _)| i).collect();
        let counts_moved = if crashed {
            self.infeasible += 1;
            self.crash(values, &mut touched);
            true
        } else {
            self.finished += 1;
            self.finish(&values, &mut touched)
        };
        let needed = crashes_needed(self.infeasible, self.infeasible + self.finished);
        let mut all = self.needed_before != Some(needed);
        if counts_moved && (!self.multi.is_empty() || self.had_multi()) {
            self.count_multi();
            all = true;
        }
        self.needed_before = Some(needed);
        if all {
            touched = self.names.values().copied().collect();
        } else {
            touched.sort_by(|&a, &b| self.tracks[a].name.cmp(&self.tracks[b].name));
            touched.dedup();
        }
        for i in touched {
            let t = &mut self.tracks[i];
            for (k, side) in [Side::Below, Side::Above].into_iter().enumerate() {
                let now = t.narrowing(side, needed);
                if now != t.current[k] {
                    out.push(Change {
                        knob: t.name.clone(),
                        side,
                        now: now.clone(),
                    });
                }
                t.current[k] = now;
            }
        }
        out
    }

    /// Whether some knob still holds crashes counted from [`Self::multi`] (they must go when
    /// the last such crash left it).
    fn had_multi(&self) -> bool {
        self.tracks.iter().any(|t| t.extra != [0, 0])
    }

    /// A crash: its values are tracked; beyond the finished values of one knob it counts for
    /// that knob, of several it waits in [`Self::multi`].
    fn crash(&mut self, values: Vec<(usize, f64)>, touched: &mut Vec<usize>) {
        let id = self.crashes.len();
        let mut outside = 0;
        for &(i, x) in &values {
            let t = &mut self.tracks[i];
            t.crash(x, id);
            outside += usize::from(t.side(x).is_some());
        }
        let crash = Crash { values, outside };
        if outside == 1 {
            count_alone(&mut self.tracks, &crash, touched);
        } else if outside > 1 {
            self.multi.insert(id);
        }
        self.crashes.push(crash);
    }

    /// A finished configuration: the crashes whose values it passes lie beyond one knob
    /// fewer; one left beyond a single knob now counts for that knob. Whether any knob's count
    /// of crashes beyond its finished values moved.
    fn finish(&mut self, values: &[(usize, f64)], touched: &mut Vec<usize>) -> bool {
        let mut moved = false;
        for &(i, x) in values {
            let (passed, counts_moved) = self.tracks[i].finish(x);
            moved |= counts_moved;
            for id in passed {
                let Some(crash) = self.crashes.get_mut(id) else {
                    continue;
                };
                crash.outside -= 1;
                if crash.outside == 1 {
                    self.multi.remove(&id);
                    count_alone(&mut self.tracks, crash, touched);
                }
            }
        }
        moved
    }

    /// Counts every crash of [`Self::multi`] again, for the knob-sides with the most crashes
    /// beyond them among those it lies beyond (all of them on a tie).
    fn count_multi(&mut self) {
        for t in &mut self.tracks {
            t.extra = [0, 0];
            t.extra_nearest = [None, None];
        }
        let mut sides: Vec<(usize, f64, Side, usize)> = Vec::new();
        for &id in &self.multi {
            let Some(crash) = self.crashes.get(id) else {
                continue;
            };
            sides.clear();
            sides.extend(crash.values.iter().filter_map(|&(i, x)| {
                let t = &self.tracks[i];
                let side = t.side(x)?;
                Some((i, x, side, t.beyond(side)))
            }));
            let most = sides.iter().map(|s| s.3).max().unwrap_or(0);
            for &(i, x, side, count) in &sides {
                if count == most {
                    self.tracks[i].count_extra(x, side);
                }
            }
        }
    }

    /// The narrowings in force after the entries pushed so far, by knob name then side: what
    /// [`narrowings`] says of them (each knob's last look is current: after an entry, every
    /// knob it changed is looked at again, and every knob when the crashes needed changed).
    pub fn current(&self) -> Vec<Narrowing> {
        self.names
            .values()
            .flat_map(|&i| self.tracks[i].current.iter().flatten().cloned())
            .collect()
    }
}

/// Counts `crash` (one of its values beyond what finished) for the knob of that value.
fn count_alone(tracks: &mut [Track], crash: &Crash, touched: &mut Vec<usize>) {
    for &(i, x) in &crash.values {
        if tracks[i].side(x).is_some() {
            tracks[i].alone(x);
            touched.push(i);
            return;
        }
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
    name: String,
    /// The smallest and largest finished values (infinite while none finished).
    lo: f64,
    hi: f64,
    /// Crashed values with the crashes (their numbers in `NarrowingHistory::crashes`).
    crashed: BTreeMap<Key, Vec<usize>>,
    /// How many crashes lie below `lo` and above `hi` (every one of them both ways while
    /// nothing finished).
    below: usize,
    above: usize,
    /// The crashes beyond this knob alone (no other value of theirs beyond what finished):
    /// their values, and how many lie below `lo` and above `hi`.
    counted: BTreeMap<Key, usize>,
    counted_below: usize,
    counted_above: usize,
    /// The crashes of `NarrowingHistory::multi` this knob explains, below and above, and the
    /// nearest of them to the edge on each side.
    extra: [usize; 2],
    extra_nearest: [Option<f64>; 2],
    /// The narrowings last reported, below and above.
    current: [Option<Narrowing>; 2],
}

impl Track {
    fn new(name: &str) -> Track {
        Track {
            name: name.to_string(),
            lo: f64::INFINITY,
            hi: f64::NEG_INFINITY,
            crashed: BTreeMap::new(),
            below: 0,
            above: 0,
            counted: BTreeMap::new(),
            counted_below: 0,
            counted_above: 0,
            extra: [0, 0],
            extra_nearest: [None, None],
            current: [None, None],
        }
    }

    /// The side of the finished values `x` lies beyond ([`side_of`]).
    fn side(&self, x: f64) -> Option<Side> {
        side_of(x, self.lo, self.hi)
    }

    /// How many crashes lie beyond the finished values on `side`.
    fn beyond(&self, side: Side) -> usize {
        match side {
            Side::Below => self.below,
            Side::Above => self.above,
        }
    }

    fn crash(&mut self, x: f64, id: usize) {
        self.crashed.entry(Key::new(x)).or_default().push(id);
        self.below += usize::from(x < self.lo);
        self.above += usize::from(x > self.hi);
    }

    /// A crash beyond this knob alone, at `x`.
    fn alone(&mut self, x: f64) {
        *self.counted.entry(Key::new(x)).or_insert(0) += 1;
        if x < self.lo {
            self.counted_below += 1;
        } else {
            self.counted_above += 1;
        }
    }

    /// A crash of `NarrowingHistory::multi` this knob explains, at `x` beyond `side`.
    fn count_extra(&mut self, x: f64, side: Side) {
        let k = usize::from(side == Side::Above);
        self.extra[k] += 1;
        let nearer = match (self.extra_nearest[k], side) {
            (None, _) => true,
            (Some(n), Side::Above) => x < n,
            (Some(n), Side::Below) => x > n,
        };
        if nearer {
            self.extra_nearest[k] = Some(x);
        }
    }

    /// A finished value: the crashes it passes lie beyond this knob no more (their numbers
    /// are returned, with whether the counts beyond the ends moved), and those counted here
    /// alone count no more. Each crashed value is passed at most once, as the ends only move
    /// outwards.
    fn finish(&mut self, x: f64) -> (Vec<usize>, bool) {
        use std::ops::Bound::{self, Excluded, Included};
        if self.lo > self.hi {
            // The first finished value: what lay beyond an empty range now lies below or
            // above `x` (the crashes at `x` itself are passed).
            let at = Key::new(x);
            let passed = self.crashed.get(&at).cloned().unwrap_or_default();
            self.counted.remove(&at);
            self.lo = x;
            self.hi = x;
            self.below = self.crashed.range(..at).map(|(_, ids)| ids.len()).sum();
            self.above = self
                .crashed
                .range(at..)
                .map(|(_, ids)| ids.len())
                .sum::<usize>()
                - passed.len();
            self.counted_below = self.counted.range(..at).map(|(_, c)| c).sum();
            self.counted_above = self.counted.range(at..).map(|(_, c)| c).sum();
            let moved = !self.crashed.is_empty();
            return (passed, moved);
        }
        let mut spans: Vec<(Bound<Key>, Bound<Key>, bool)> = Vec::new();
        if x > self.hi {
            spans.push((Excluded(Key::new(self.hi)), Included(Key::new(x)), false));
            self.hi = x;
        }
        if x < self.lo {
            spans.push((Included(Key::new(x)), Excluded(Key::new(self.lo)), true));
            self.lo = x;
        }
        let mut passed = Vec::new();
        for (from, to, below) in spans {
            let ids: Vec<usize> = self
                .crashed
                .range((from, to))
                .flat_map(|(_, ids)| ids.iter().copied())
                .collect();
            let gone: usize = self.counted.range((from, to)).map(|(_, c)| c).sum();
            let keys: Vec<Key> = self.counted.range((from, to)).map(|(k, _)| *k).collect();
            for k in keys {
                self.counted.remove(&k);
            }
            if below {
                self.below -= ids.len();
                self.counted_below -= gone;
            } else {
                self.above -= ids.len();
                self.counted_above -= gone;
            }
            passed.extend(ids);
        }
        let moved = !passed.is_empty();
        (passed, moved)
    }

    /// What [`narrowings`] says of this knob on one side.
    fn narrowing(&self, side: Side, needed: usize) -> Option<Narrowing> {
        use std::ops::Bound::{Excluded, Unbounded};
        let total = self.counted_below + self.counted_above + self.extra[0] + self.extra[1];
        if self.lo > self.hi || total < needed {
            return None;
        }
        let k = usize::from(side == Side::Above);
        let (edge, crashes) = match side {
            Side::Above => (self.hi, self.counted_above + self.extra[1]),
            Side::Below => (self.lo, self.counted_below + self.extra[0]),
        };
        if crashes < needed {
            return None;
        }
        let alone = match side {
            Side::Above => self
                .counted
                .range((Excluded(Key::new(edge)), Unbounded))
                .next()
                .map(|(k, _)| k.0),
            Side::Below => self
                .counted
                .range((Unbounded, Excluded(Key::new(edge))))
                .next_back()
                .map(|(k, _)| k.0),
        };
        let nearest = match (alone, self.extra_nearest[k], side) {
            (Some(a), Some(e), Side::Above) => a.min(e),
            (Some(a), Some(e), Side::Below) => a.max(e),
            (Some(a), None, _) | (None, Some(a), _) => a,
            (None, None, _) => return None,
        };
        let other = match side {
            Side::Above => self.lo.min(self.crashed.keys().next()?.0),
            Side::Below => self.hi.max(self.crashed.keys().next_back()?.0),
        };
        Some(Narrowing {
            knob: self.name.clone(),
            side,
            edge,
            other,
            nearest_crash: nearest,
            crashes,
        })
    }
}

#[cfg(test)]
#[path = "feasible_tests.rs"]
mod tests;
