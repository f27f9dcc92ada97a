//! Feasibility learned from crashes, in the knobs' own values: where a numeric knob's explored
//! range was narrowed because every configuration tried beyond some value crashed.
//!
//! A configuration is *infeasible* when its experiment crashed, timed out or violated a
//! constraint. For each numeric knob, let `edge` be the largest value among configurations that
//! finished; when enough infeasible configurations lie above it, the knob's explored range is
//! narrowed to end there (and the same below the smallest finished value). A crash whose values
//! lie beyond the finished values of several knobs (a point of the initial design moves them
//! all) counts for those of them that some crash lies beyond alone (for all of them where none
//! does): crashes one knob causes, whose other values happened to lie past theirs, do not
//! narrow a knob nothing else blames. A knob with no finished value yet is left out of this.
//! Enough: at least
//! [`MIN_CRASHES`], and so many that crashes falling there by chance is unlikely: with a
//! share `r` of the run's configurations infeasible, `k` crashes all beyond the edge happen by
//! chance with odds about `r^k`, which must be under [`CHANCE`] (at `r` = 0.5, 5 crashes).
//! This is what `hone log` and `hone show` report; the sampler's own edges count the same
//! crashes ([`counted_crashes`]) and make a side unsure sooner (`sampler::feasible`, through
//! [`knob_narrowings`]), and it tests the gap between an edge and the nearest crash now and
//! then. Everything here is a pure function of the run's history, so a resumed run or a
//! parallel one sees the same narrowing.

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

/// The smallest and largest of `values` (`lo > hi` where there are none).
pub(crate) fn span(values: &[f64]) -> (f64, f64) {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    (lo, values.iter().copied().fold(f64::NEG_INFINITY, f64::max))
}

/// The crashed values each knob's edges count: a crash beyond the finished values of one
/// knob-side counts there; one beyond several counts for those of them some crash lies beyond
/// alone (for all of them where none does); a knob with nothing finished takes none. By
/// columns: `ends[j]` is knob `j`'s [`span`] of finished values, `columns[j][i]` its value in
/// crash `i` (`None` where it has none).
pub(crate) fn counted_crashes(ends: &[(f64, f64)], columns: &[Vec<Option<f64>>]) -> Vec<Vec<f64>> {
    let n = columns.iter().map(Vec::len).max().unwrap_or(0);
    let beyond: Vec<Vec<(usize, f64, Side)>> = (0..n)
        .map(|i| {
            columns
                .iter()
                .enumerate()
                .filter_map(|(j, column)| {
                    let x = column.get(i).copied().flatten()?;
                    let &(lo, hi) = ends.get(j)?;
                    side_of(x, lo, hi).map(|side| (j, x, side))
                })
                .collect()
        })
        .collect();
    let blamed: BTreeSet<(usize, Side)> = beyond
        .iter()
        .filter(|sides| sides.len() == 1)
        .map(|sides| (sides[0].0, sides[0].2))
        .collect();
    let mut counted = vec![Vec::new(); columns.len()];
    for sides in &beyond {
        let any = sides.iter().any(|&(j, _, s)| blamed.contains(&(j, s)));
        for &(j, x, side) in sides {
            if !any || blamed.contains(&(j, side)) {
                counted[j].push(x);
            }
        }
    }
    counted
}

/// Every narrowing the finished and infeasible configurations show, by knob name then side.
pub fn narrowings(finished: &[&Config], infeasible: &[&Config]) -> Vec<Narrowing> {
    let mut names: Vec<&str> = infeasible.iter().flat_map(|c| c.keys()).collect();
    names.sort();
    names.dedup();
    // A knob's numeric values in `configs`, in their order (`None` where one has none).
    let column = |configs: &[&Config], name: &str| -> Vec<Option<f64>> {
        configs
            .iter()
            .map(|c| c.get(name).and_then(numeric))
            .collect()
    };
    let fine: Vec<Vec<f64>> = names
        .iter()
        .map(|&name| column(finished, name).into_iter().flatten().collect())
        .collect();
    let ends: Vec<(f64, f64)> = fine.iter().map(|v| span(v)).collect();
    let columns: Vec<Vec<Option<f64>>> =
        names.iter().map(|&name| column(infeasible, name)).collect();
    let counted = counted_crashes(&ends, &columns);
    let needed = crashes_needed(infeasible.len(), infeasible.len() + finished.len());
    let mut out = Vec::new();
    for (j, name) in names.iter().enumerate() {
        let tried: Vec<f64> = columns[j].iter().flatten().copied().collect();
        out.extend(narrow(name, &fine[j], &counted[j], &tried, needed));
    }
    out
}

/// The side of a knob's finished values `lo..=hi` that `x` lies beyond (none where nothing
/// finished, `lo > hi`).
fn side_of(x: f64, lo: f64, hi: f64) -> Option<Side> {
    if lo > hi {
        None
    } else if x < lo {
        Some(Side::Below)
    } else if x > hi {
        Some(Side::Above)
    } else {
        None
    }
}

/// One knob's narrowings from its finished values and the crashed values that count for it
/// (also taken as all that was tried, for the other end of the range), with the crashes
/// needed: at most one each side. The sampler's own edges (`sampler::feasible`), which use
/// only the edge and the side.
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
    let (lo, hi) = span(fine);
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
/// The same as calling [`narrowings`] on every prefix, one entry at a time
/// ([`NarrowingHistory`]): about O(n log n), plus, after each entry that moved a crash, one
/// pass over the groups of crashes beyond several knob-sides (a group per set of knob-sides,
/// so a few however many crashes they hold).
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
///
/// Each knob keeps its finished values' ends and its crashed values in order; each crash, the
/// knob-sides it lies beyond. A crash beyond one knob-side is counted there as it comes and
/// until a finished value passes it; those beyond several wait in groups by the knob-sides
/// they lie beyond, and the groups are counted again (a few of them, not every crash) after an
/// entry that moved anything. After an entry only the knobs it holds are looked at again
/// (every knob when the crashes needed changed, or the groups were counted again).
#[derive(Default)]
pub struct NarrowingHistory {
    /// Each knob's number in `tracks`, by name (the order narrowings are reported in).
    names: BTreeMap<String, usize>,
    tracks: Vec<Track>,
    /// Every crash so far: its numeric values by knob number, and the knob-sides it lies
    /// beyond (in order).
    crashes: Vec<Crash>,
    /// The crashes beyond two knob-sides or more, by those knob-sides.
    groups: BTreeMap<Vec<(usize, Side)>, Group>,
    finished: usize,
    infeasible: usize,
    needed_before: Option<usize>,
}

/// One crash of [`NarrowingHistory`].
struct Crash {
    values: Vec<(usize, f64)>,
    sides: Vec<(usize, Side)>,
}

impl Crash {
    fn value(&self, knob: usize) -> Option<f64> {
        self.values.iter().find(|v| v.0 == knob).map(|v| v.1)
    }
}

/// The crashes beyond the same knob-sides (two or more): how many, and each knob-side's
/// values of them (in the order of the group's key).
#[derive(Default)]
struct Group {
    count: usize,
    values: Vec<BTreeMap<Key, usize>>,
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
        let mut touched: Vec<usize> = values.iter().map(|&(i, _)| i).collect();
        let moved = if crashed {
            self.infeasible += 1;
            self.crash(values)
        } else {
            self.finished += 1;
            self.finish(&values)
        };
        let needed = crashes_needed(self.infeasible, self.infeasible + self.finished);
        let mut all = self.needed_before != Some(needed);
        if moved {
            self.count_groups();
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

    /// A crash: its values are tracked, and it is counted by the knob-sides it lies beyond.
    /// Whether any count moved.
    fn crash(&mut self, values: Vec<(usize, f64)>) -> bool {
        let id = self.crashes.len();
        let mut sides = Vec::new();
        for &(i, x) in &values {
            let t = &mut self.tracks[i];
            t.crash(x, id);
            if let Some(side) = t.side(x) {
                sides.push((i, side));
            }
        }
        let crash = Crash {
            values,
            sides: Vec::new(),
        };
        self.crashes.push(crash);
        self.resettle(id, sides);
        true
    }

    /// A finished configuration: the crashes whose values it passes lie beyond one knob-side
    /// fewer; a knob's first finished value puts its crashes beyond it on either side of it.
    /// Whether any count moved.
    fn finish(&mut self, values: &[(usize, f64)]) -> bool {
        let mut moved = false;
        for &(i, x) in values {
            let first = self.tracks[i].lo > self.tracks[i].hi;
            let changed = self.tracks[i].finish(x);
            moved |= !changed.is_empty();
            for id in changed {
                let Some(crash) = self.crashes.get(id) else {
                    continue;
                };
                let mut sides = crash.sides.clone();
                if first {
                    let side = crash.value(i).and_then(|v| self.tracks[i].side(v));
                    sides.extend(side.map(|s| (i, s)));
                    sides.sort();
                } else {
                    sides.retain(|&(k, _)| k != i);
                }
                self.resettle(id, sides);
            }
        }
        moved
    }

    /// Moves crash `id` from where its old knob-sides counted it to where `sides` count it.
    fn resettle(&mut self, id: usize, sides: Vec<(usize, Side)>) {
        let Some(crash) = self.crashes.get_mut(id) else {
            return;
        };
        let old = std::mem::replace(&mut crash.sides, sides);
        let crash = &self.crashes[id];
        place(&mut self.tracks, &mut self.groups, crash, &old, false);
        place(
            &mut self.tracks,
            &mut self.groups,
            crash,
            &crash.sides,
            true,
        );
    }

    /// Counts the groups again: each for those of its knob-sides that some crash lies beyond
    /// alone, or for all of them where none does.
    fn count_groups(&mut self) {
        for t in &mut self.tracks {
            t.extra = [0, 0];
            t.extra_nearest = [None, None];
        }
        for (key, g) in &self.groups {
            let blamed = |&(k, s): &(usize, Side)| self.tracks[k].alone_beyond(s) > 0;
            let any = key.iter().any(blamed);
            let winners: Vec<(usize, &(usize, Side))> = key
                .iter()
                .enumerate()
                .filter(|(_, ks)| !any || blamed(ks))
                .collect();
            for (p, &(k, s)) in winners {
                let nearest = match s {
                    Side::Above => g.values[p].keys().next(),
                    Side::Below => g.values[p].keys().next_back(),
                };
                self.tracks[k].count_extra(g.count, nearest.map(|k| k.0), s);
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

/// Counts `crash` where `sides` say (their knob-side's crashes beyond it alone, or the group
/// of those several knob-sides), or with `add` false takes it out from there.
fn place(
    tracks: &mut [Track],
    groups: &mut BTreeMap<Vec<(usize, Side)>, Group>,
    crash: &Crash,
    sides: &[(usize, Side)],
    add: bool,
) {
    match sides {
        [] => {}
        &[(k, side)] => {
            if let Some(x) = crash.value(k) {
                if add {
                    tracks[k].alone(x, side);
                } else {
                    tracks[k].unalone(x, side);
                }
            }
        }
        _ => {
            let g = groups.entry(sides.to_vec()).or_insert_with(|| Group {
                count: 0,
                values: vec![BTreeMap::new(); sides.len()],
            });
            if add {
                g.count += 1;
            } else {
                g.count = g.count.saturating_sub(1);
            }
            for (p, &(k, _)) in sides.iter().enumerate() {
                if let Some(x) = crash.value(k) {
                    if add {
                        *g.values[p].entry(Key::new(x)).or_insert(0) += 1;
                    } else {
                        take(&mut g.values[p], x);
                    }
                }
            }
            if g.count == 0 {
                groups.remove(sides);
            }
        }
    }
}

/// One less of `x` in a count by value.
fn take(values: &mut BTreeMap<Key, usize>, x: f64) {
    let k = Key::new(x);
    if let Some(c) = values.get_mut(&k) {
        *c -= 1;
        if *c == 0 {
            values.remove(&k);
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
    /// The crashes beyond this knob alone: their values, and how many below and above.
    counted: BTreeMap<Key, usize>,
    counted_below: usize,
    counted_above: usize,
    /// The crashes of groups this knob counts, below and above, and the nearest of them to
    /// the edge on each side.
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

    /// How many crashes lie beyond this knob alone on `side`.
    fn alone_beyond(&self, side: Side) -> usize {
        match side {
            Side::Below => self.counted_below,
            Side::Above => self.counted_above,
        }
    }

    fn crash(&mut self, x: f64, id: usize) {
        self.crashed.entry(Key::new(x)).or_default().push(id);
    }

    /// A crash beyond this knob alone, at `x` on `side`.
    fn alone(&mut self, x: f64, side: Side) {
        *self.counted.entry(Key::new(x)).or_insert(0) += 1;
        match side {
            Side::Below => self.counted_below += 1,
            Side::Above => self.counted_above += 1,
        }
    }

    /// A crash beyond this knob alone no more (it was at `x` on `side`).
    fn unalone(&mut self, x: f64, side: Side) {
        take(&mut self.counted, x);
        match side {
            Side::Below => self.counted_below -= 1,
            Side::Above => self.counted_above -= 1,
        }
    }

    /// `count` crashes of a group counted here on `side`, the nearest of them at `nearest`.
    fn count_extra(&mut self, count: usize, nearest: Option<f64>, side: Side) {
        let k = usize::from(side == Side::Above);
        self.extra[k] += count;
        let nearer = match (self.extra_nearest[k], nearest, side) {
            (_, None, _) => false,
            (None, Some(_), _) => true,
            (Some(n), Some(x), Side::Above) => x < n,
            (Some(n), Some(x), Side::Below) => x > n,
        };
        if nearer {
            self.extra_nearest[k] = nearest;
        }
    }

    /// A finished value: the numbers of the crashes whose side of this knob it changes. Those
    /// it passes lie beyond it no more; the first finished value puts every crash at another
    /// value below or above it. Each crashed value is passed at most once, as the ends only
    /// move outwards.
    fn finish(&mut self, x: f64) -> Vec<usize> {
        use std::ops::Bound::{Excluded, Included};
        if self.lo > self.hi {
            self.lo = x;
            self.hi = x;
            let at = Key::new(x);
            return self
                .crashed
                .iter()
                .filter(|(k, _)| **k != at)
                .flat_map(|(_, ids)| ids.iter().copied())
                .collect();
        }
        let mut changed = Vec::new();
        if x > self.hi {
            let span = (Excluded(Key::new(self.hi)), Included(Key::new(x)));
            changed.extend(
                self.crashed
                    .range(span)
                    .flat_map(|(_, ids)| ids.iter().copied()),
            );
            self.hi = x;
        }
        if x < self.lo {
            let span = (Included(Key::new(x)), Excluded(Key::new(self.lo)));
            changed.extend(
                self.crashed
                    .range(span)
                    .flat_map(|(_, ids)| ids.iter().copied()),
            );
            self.lo = x;
        }
        changed
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
