//! The sampler's moves besides the model: local moves around the incumbent, and the
//! fallbacks when draws keep hitting tried configurations (single-knob neighbours, then an
//! enumeration of a small space).

use super::super::{Config, KnobValue};
use super::parzen::Model;
use super::space::{Coord, Kind, Space};
use super::{Rng, ENUMERATION_LIMIT, LOCAL_CANDIDATES};

/// Local moves around `from`: 1-2 of the `movable` dimensions nudged, numbers by a Gaussian
/// step times `step_scale`.
pub(super) struct LocalMoves<'a> {
    pub(super) space: &'a Space,
    pub(super) from: &'a [Coord],
    pub(super) movable: &'a [usize],
    pub(super) step_scale: f64,
}

impl LocalMoves<'_> {
    /// The untried one of [`LOCAL_CANDIDATES`] local moves with the best `l(x) / g(x)` under
    /// `model` (`None`: every draw was tried already).
    ///
    /// The first draw decides whether a choice switches: when it moves a choice (or a boolean), the
    /// other draws move the same knobs and the model picks among them (which option, which step);
    /// otherwise every draw is a local move of its own. The model must not decide *whether* a
    /// choice switches: its good estimator is peaked on the incumbent's option (three quarters of a
    /// choice's kernel), so among free draws it nearly always keeps that option and a run stays on
    /// a second-best one (`crashy` stopped at batch 32 or 128 in half of its seeds;
    /// bench/RESULTS.md, "search"). Without choices the draws are those of plain local moves, in
    /// the same order.
    pub(super) fn best(&self, model: &Model<'_>, rng: &mut Rng) -> Option<Config> {
        let dims = moved_dims(rng, self.movable);
        let switches = dims
            .iter()
            .any(|&i| matches!(self.space.dims[i].kind, Kind::Cat(_)));
        let mut draws = Vec::with_capacity(LOCAL_CANDIDATES);
        draws.push(self.nudge(rng, &dims));
        for _ in 1..LOCAL_CANDIDATES {
            draws.push(if switches {
                self.nudge(rng, &dims)
            } else {
                self.draw(rng)
            });
        }
        model.best_of(self.space, draws)
    }

    /// Nudges 1-2 dimensions of `from`: numbers by a Gaussian step (scale 0.02, 0.05 or 0.15 of the
    /// unit range, reflected at the edges, and at least one integer step), categories to another
    /// option.
    pub(super) fn draw(&self, rng: &mut Rng) -> Vec<Coord> {
        let dims = moved_dims(rng, self.movable);
        self.nudge(rng, &dims)
    }

    /// `from` with each of `dims` nudged by a Gaussian step of a scale drawn first ([`step`]; a
    /// choice to another option).
    fn nudge(&self, rng: &mut Rng, dims: &[usize]) -> Vec<Coord> {
        let scale = step(rng, self.step_scale);
        let (space, from) = (self.space, self.from);
        let mut point = from.to_vec();
        for &i in dims {
            let d = &space.dims[i];
            point[i] = match (point[i], &d.kind) {
                (Coord::C(c), Kind::Cat(options)) => {
                    let other = rng.below(options.len() - 1);
                    Coord::C(if other >= c { other + 1 } else { other })
                }
                (Coord::U(u), kind) => {
                    let mut v = u + scale * rng.normal();
                    if v < 0.0 {
                        v = -v;
                    }
                    if v > 1.0 {
                        v = 2.0 - v;
                    }
                    let v = v.clamp(0.0, 1.0);
                    match (kind, d.decode(Coord::U(u)), d.decode(Coord::U(v))) {
                        (Kind::Int { lo, hi, .. }, KnobValue::Int(old), KnobValue::Int(new))
                            if old == new =>
                        {
                            let up = if v >= u { old < *hi } else { old <= *lo };
                            let next = if up { old + 1 } else { old - 1 };
                            d.encode(&KnobValue::Int(next)).unwrap_or(Coord::U(v))
                        }
                        _ => Coord::U(v),
                    }
                }
                (c, _) => c,
            };
        }
        point
    }
}

/// The scale of a local move's Gaussian step: 0.02, 0.05 or 0.15 of the unit range, times
/// `step_scale`.
fn step(rng: &mut Rng, step_scale: f64) -> f64 {
    [0.02, 0.05, 0.15][rng.below(3)] * step_scale
}

/// Which 1-2 of the `movable` dimensions a local move changes.
fn moved_dims(rng: &mut Rng, movable: &[usize]) -> Vec<usize> {
    let count = if movable.len() >= 2 && rng.unit() < 0.4 {
        2
    } else {
        1
    };
    let mut order: Vec<usize> = movable.to_vec();
    rng.shuffle(&mut order);
    order.truncate(count);
    order
}

/// The first untried configuration that differs from the incumbent in one knob.
pub(super) fn untried_neighbour(space: &Space, rng: &mut Rng) -> Option<Config> {
    let from = space.incumbent_point();
    let n = space.dims.len();
    let start = rng.below(n);
    for k in 0..n {
        let i = (start + k) % n;
        let d = &space.dims[i];
        if space.frozen.contains(&d.name) {
            continue;
        }
        let mut values: Vec<KnobValue> = Vec::new();
        match (&d.kind, from[i]) {
            (Kind::Cat(options), _) => values.extend(options.iter().cloned()),
            (kind, Coord::U(u)) => {
                if let (Kind::Int { .. }, KnobValue::Int(n)) = (kind, d.decode(Coord::U(u))) {
                    for step in [1, -1, 2, -2] {
                        values.push(KnobValue::Int(n.saturating_add(step)));
                    }
                }
                for delta in [1e-3, 1e-2, 0.05, 0.2, 0.5, 1.0] {
                    values.push(d.decode(Coord::U(u + delta)));
                    values.push(d.decode(Coord::U(u - delta)));
                }
            }
            _ => {}
        }
        for v in values {
            if !d.contains(&v) {
                continue;
            }
            let mut config = space.base.clone();
            config.insert(d.name.clone(), v);
            if let Some(c) = space.fresh_config(config) {
                return Some(c);
            }
        }
    }
    None
}

/// Walks the whole space (no float knobs, at most [`ENUMERATION_LIMIT`] points) from a random
/// offset and returns the first untried configuration.
pub(super) fn untried_by_enumeration(space: &Space, rng: &mut Rng) -> Option<Config> {
    let mut total: u64 = 1;
    for d in &space.dims {
        total = total.checked_mul(d.size()?)?;
        if total > ENUMERATION_LIMIT {
            return None;
        }
    }
    let offset = rng.next_u64() % total;
    for k in 0..total {
        let mut rest = (offset + k) % total;
        let mut config = space.base.clone();
        for d in &space.dims {
            let size = d.size()?;
            config.insert(d.name.clone(), d.nth(rest % size));
            rest /= size;
        }
        if let Some(c) = space.fresh_config(config) {
            return Some(c);
        }
    }
    None
}
