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

use super::super::feasible::Side;
use super::space::Coord;

/// The dimensions in which `a` and `b` differ.
fn differing(a: &[Coord], b: &[Coord]) -> Vec<usize> {
    a.iter()
        .zip(b)
        .enumerate()
        .filter(|(_, (x, y))| x != y)
        .map(|(i, _)| i)
        .collect()
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

/// The knob (dimension) `crash` is blamed on, given the finished points: the one in which it
/// differs from a finished configuration that differs from it in no other, else the only one
/// whose value lies outside what finished (a crash that differs from every finished
/// configuration in two knobs is then blamed on the one of them outside what finished: a
/// local move that switched a choice to an option never tried and nudged a number); `None`
/// when neither says.
pub(super) fn blame(crash: &[Coord], fine: &[&[Coord]], finished: &Finished) -> Option<usize> {
    let single = fine.iter().find_map(|p| match differing(crash, p)[..] {
        [j] => Some(j),
        _ => None,
    });
    if single.is_some() {
        return single;
    }
    let mut outside = (0..crash.len()).filter(|&j| finished.outside(j, crash[j]));
    match (outside.next(), outside.next()) {
        (Some(j), None) => Some(j),
        _ => None,
    }
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
