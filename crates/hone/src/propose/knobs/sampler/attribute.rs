//! Which knob caused a crash: attribution for the feasibility model (`super::feasible`).
//!
//! A crashed configuration that differs from a finished one in a single knob says that knob
//! caused it (a local move changes one or two knobs of the incumbent and leaves the others
//! exactly as they were). One that differs from every finished configuration in more knobs
//! (a TPE draw, a point of the initial design, a local move of two knobs) is attributed by
//! elimination when exactly one of its values lies outside what finished (a number beyond every finished value of its knob, an
//! option of a choice that never finished): the other values finished elsewhere.
//!
//! An attributed crash marks that knob alone: beyond the furthest finished value short of the
//! crash (for a choice: the option) is unsure after ONE crash, where an unattributed crash
//! needs a second one beyond the same edge (`super::feasible::EDGE_CRASHES`). Unlike edges
//! after one crash for every knob (bench/RESULTS.md, "crashy"), a crash caused by one knob
//! fences off a side of that knob only.

use std::collections::HashSet;

use super::super::feasible::Side;
use super::space::Coord;
use crate::util::splitmix64;

/// The one dimension in which `a` and `b` differ; `None` when they differ in none or in more
/// (it stops at the second: this runs for every crash against every finished point).
fn single_difference(a: &[Coord], b: &[Coord]) -> Option<usize> {
    let mut found = None;
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        if x != y {
            if found.is_some() {
                return None;
            }
            found = Some(i);
        }
    }
    found
}

/// Each dimension's finished values: the smallest and largest unit coordinates, and the
/// options of a choice that finished.
pub(super) struct Finished {
    lo: Vec<f64>,
    hi: Vec<f64>,
    pub(super) options: Vec<Vec<usize>>,
}

impl Finished {
    pub(super) fn of(dims: usize, fine: &[&[Coord]]) -> Finished {
        let mut f = Finished {
            lo: vec![f64::INFINITY; dims],
            hi: vec![f64::NEG_INFINITY; dims],
            options: vec![Vec::new(); dims],
        };
        for p in fine {
            for (j, c) in p.iter().enumerate().take(dims) {
                match *c {
                    Coord::U(u) => {
                        f.lo[j] = f.lo[j].min(u);
                        f.hi[j] = f.hi[j].max(u);
                    }
                    Coord::C(o) => {
                        if !f.options[j].contains(&o) {
                            f.options[j].push(o);
                        }
                    }
                }
            }
        }
        f
    }

    /// Whether value `c` of dimension `j` lies outside what finished.
    fn outside(&self, j: usize, c: Coord) -> bool {
        match c {
            Coord::U(u) => u > self.hi[j] || u < self.lo[j],
            Coord::C(o) => !self.options[j].contains(&o),
        }
    }
}

/// The knob (dimension) each crash is blamed on, given the finished points: the one in which
/// it differs from the first finished configuration that differs from it in no other, else the
/// only one whose value lies outside what finished (a crash that differs from every finished
/// configuration in two knobs is then blamed on the one of them outside what finished: a
/// local move that switched a choice to an option never tried and nudged a number); `None`
/// when neither says (or the crash has no point in the space).
///
/// One pass over the finished points, not one per crash: each crash is indexed under the
/// digest of its values with one dimension left out (per dimension), and each finished point
/// looks its own such digests up, so the cost is that of the finished points times the
/// dimensions, however many crashes there are.
pub(super) fn blame_all(
    crashes: &[Option<Vec<Coord>>],
    fine: &[&[Coord]],
    finished: &Finished,
) -> Vec<Option<usize>> {
    let mut blamed: Vec<Option<usize>> = vec![None; crashes.len()];
    // (digest with one dimension left out, crash, that dimension), sorted by digest: one
    // allocation however many crashes.
    let mut index: Vec<(u64, usize, usize)> = Vec::new();
    let mut buffer = Vec::new();
    for (i, crash) in crashes.iter().enumerate() {
        let Some(crash) = crash else { continue };
        let digests = digests(crash, &mut buffer);
        let whole = digests.iter().fold(0u64, |a, d| a.wrapping_add(*d));
        index.extend(
            digests
                .iter()
                .enumerate()
                .map(|(j, d)| (whole.wrapping_sub(*d), i, j)),
        );
    }
    index.sort_unstable();
    // A finished point that differs from a crash in one dimension alone shares its first or
    // its second value with it: a point sharing neither with any crash is passed over after
    // two look-ups in small sets (most of them, where crashes are few).
    let shared: [HashSet<u64>; 2] = [0, 1].map(|j| {
        crashes
            .iter()
            .flatten()
            .filter_map(|c| c.get(j).map(|v| digest(j, v)))
            .collect()
    });
    let mut unresolved = crashes.iter().flatten().count();
    for p in fine {
        if unresolved == 0 {
            break;
        }
        if p.len() >= 2 && !(0..2).any(|j| shared[j].contains(&digest(j, &p[j]))) {
            continue;
        }
        let digests = digests(p, &mut buffer);
        let whole = digests.iter().fold(0u64, |a, d| a.wrapping_add(*d));
        for (j, d) in digests.iter().enumerate() {
            let key = whole.wrapping_sub(*d);
            let from = index.partition_point(|e| e.0 < key);
            for &(_, i, k) in index[from..].iter().take_while(|e| e.0 == key) {
                let Some(crash) = &crashes[i] else { continue };
                if k == j && blamed[i].is_none() && single_difference(crash, p) == Some(j) {
                    blamed[i] = Some(j);
                    unresolved -= 1;
                }
            }
        }
    }
    for (crash, b) in crashes.iter().zip(blamed.iter_mut()) {
        let Some(crash) = crash else { continue };
        if b.is_none() {
            let mut outside = (0..crash.len()).filter(|&j| finished.outside(j, crash[j]));
            if let (Some(j), None) = (outside.next(), outside.next()) {
                *b = Some(j);
            }
        }
    }
    blamed
}

/// A digest of each coordinate of a point with its dimension (in `buffer`): a point's digest
/// with dimension `j` left out is the sum of the others (equal values give equal digests;
/// `0.0` and `-0.0` are one value).
fn digests<'b>(p: &[Coord], buffer: &'b mut Vec<u64>) -> &'b [u64] {
    buffer.clear();
    buffer.extend(p.iter().enumerate().map(|(j, c)| digest(j, c)));
    buffer
}

/// The digest of value `c` in dimension `j`.
fn digest(j: usize, c: &Coord) -> u64 {
    let value = match *c {
        Coord::U(0.0) => 1,
        Coord::U(u) => u.to_bits(),
        Coord::C(o) => (o as u64) ^ 0xC0DE_0000_0000_0000,
    };
    let mut state = value ^ (j as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    splitmix64(&mut state)
}

/// Where a crash blamed on the numeric dimension `j` alone (at unit coordinate `u`) puts an
/// edge: `(side, edge)`, the edge at the furthest finished value short of the crash, on the
/// side away from the rest of what finished (beyond it is unsure, as after two unattributed
/// crashes). `None` when values finished on both sides of it or at it (the knob alone does not
/// explain it) or nothing finished.
pub(super) fn edge(fine: &[&[Coord]], j: usize, u: f64) -> Option<(Side, f64)> {
    let (mut below, mut above): (Option<f64>, Option<f64>) = (None, None);
    for p in fine {
        let Some(&Coord::U(v)) = p.get(j) else {
            continue;
        };
        if v < u {
            below = Some(below.map_or(v, |b| b.max(v)));
        } else if v > u {
            above = Some(above.map_or(v, |a| a.min(v)));
        } else {
            return None;
        }
    }
    match (below, above) {
        (Some(r), None) => Some((Side::Above, r)),
        (None, Some(r)) => Some((Side::Below, r)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::unit_f64;

    /// The attribution written the plain way: each crash against every finished point.
    fn blame_one_by_one(crash: &[Coord], fine: &[&[Coord]], finished: &Finished) -> Option<usize> {
        let differing = |p: &[Coord]| -> Vec<usize> {
            (0..crash.len()).filter(|&j| crash[j] != p[j]).collect()
        };
        let single = fine.iter().find_map(|p| match differing(p)[..] {
            [j] => Some(j),
            _ => None,
        });
        single.or_else(|| {
            let mut outside = (0..crash.len()).filter(|&j| finished.outside(j, crash[j]));
            match (outside.next(), outside.next()) {
                (Some(j), None) => Some(j),
                _ => None,
            }
        })
    }

    #[test]
    fn one_pass_blames_as_each_crash_against_every_finished_point_does() {
        let mut state = 11u64;
        let mut draw = |n: u64| (unit_f64(splitmix64(&mut state)) * n as f64) as usize;
        for round in 0..40 {
            // Few values per knob, so that points often differ in one knob or two; a choice
            // knob; -0.0 beside 0.0.
            let dims = 2 + round % 5;
            let point = |draw: &mut dyn FnMut(u64) -> usize| -> Vec<Coord> {
                (0..dims)
                    .map(|j| match (j, draw(4)) {
                        (0, o) => Coord::C(o % 3),
                        (_, 0) => Coord::U(if draw(2) == 0 { 0.0 } else { -0.0 }),
                        (_, v) => Coord::U(v as f64 / 4.0),
                    })
                    .collect()
            };
            let fine: Vec<Vec<Coord>> = (0..draw(30)).map(|_| point(&mut draw)).collect();
            let mut crashes: Vec<Option<Vec<Coord>>> =
                (0..draw(20)).map(|_| Some(point(&mut draw))).collect();
            crashes.push(None);
            let fine_refs: Vec<&[Coord]> = fine.iter().map(|p| &p[..]).collect();
            let finished = Finished::of(dims, &fine_refs);
            let want: Vec<Option<usize>> = crashes
                .iter()
                .map(|c| blame_one_by_one(c.as_deref()?, &fine_refs, &finished))
                .collect();
            assert_eq!(
                blame_all(&crashes, &fine_refs, &finished),
                want,
                "round {round}"
            );
        }
    }
}
