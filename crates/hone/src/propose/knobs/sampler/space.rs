//! The sampler's search space: one dimension per free knob, each a unit interval (numbers,
//! log-scaled where their domain says so) or a list of options (choices and booleans), and the
//! space they make with its base configuration and what was already tried.

use std::collections::HashSet;

use super::super::literal::quantize_float;
use super::super::{Config, Domain, Knob, KnobValue};
use super::{Observation, Rng};

/// A position along one dimension: unit coordinate for numbers, option index for categories.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Coord {
    U(f64),
    C(usize),
}

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Kind {
    Float { lo: f64, hi: f64, log: bool },
    Int { lo: i64, hi: i64, log: bool },
    Cat(Vec<KnobValue>),
}

#[derive(Clone, Debug, PartialEq)]
pub(super) struct Dim {
    pub(super) name: String,
    pub(super) kind: Kind,
}

pub(super) fn from_unit(u: f64, lo: f64, hi: f64, log: bool) -> f64 {
    let u = u.clamp(0.0, 1.0);
    if !log {
        lo + u * (hi - lo)
    } else if lo > 0.0 {
        (lo.ln() + u * (hi.ln() - lo.ln())).exp()
    } else {
        // Wholly negative: log scale on the magnitude, keeping the sign.
        -((-lo).ln() + u * ((-hi).ln() - (-lo).ln())).exp()
    }
}

pub(super) fn to_unit(x: f64, lo: f64, hi: f64, log: bool) -> f64 {
    let u = if !log {
        (x - lo) / (hi - lo)
    } else if lo > 0.0 {
        if x <= 0.0 {
            0.0
        } else {
            (x.ln() - lo.ln()) / (hi.ln() - lo.ln())
        }
    } else if x >= 0.0 {
        1.0
    } else {
        ((-x).ln() - (-lo).ln()) / ((-hi).ln() - (-lo).ln())
    };
    if u.is_nan() {
        0.5
    } else {
        u.clamp(0.0, 1.0)
    }
}

impl Dim {
    /// The dimension of a knob, or `None` when the sampler cannot move it.
    pub(super) fn of(knob: &Knob) -> Option<Dim> {
        let kind = match &knob.domain {
            Domain::Fixed => return None,
            Domain::Bool => Kind::Cat(vec![KnobValue::Bool(false), KnobValue::Bool(true)]),
            Domain::Choice(options) if options.len() >= 2 => Kind::Cat(options.clone()),
            Domain::Choice(_) => return None,
            &Domain::Float { lo, hi, log } => {
                if lo.partial_cmp(&hi) != Some(std::cmp::Ordering::Less)
                    || !lo.is_finite()
                    || !hi.is_finite()
                {
                    return None;
                }
                Kind::Float {
                    lo,
                    hi,
                    log: log && (lo > 0.0 || hi < 0.0),
                }
            }
            &Domain::Int { lo, hi, log } => {
                if lo >= hi {
                    return None;
                }
                Kind::Int {
                    lo,
                    hi,
                    log: log && (lo > 0 || hi < 0),
                }
            }
        };
        Some(Dim {
            name: knob.name.clone(),
            kind,
        })
    }

    /// Integer ranges are widened by half a step each side so that every value gets a bin.
    pub(super) fn int_span(lo: i64, hi: i64) -> (f64, f64) {
        (lo as f64 - 0.5, hi as f64 + 0.5)
    }

    pub(super) fn decode(&self, c: Coord) -> KnobValue {
        match (&self.kind, c) {
            (&Kind::Float { lo, hi, log }, Coord::U(u)) => {
                KnobValue::Float(quantize_float(from_unit(u, lo, hi, log)).clamp(lo, hi))
            }
            (&Kind::Int { lo, hi, log }, Coord::U(u)) => {
                let (a, b) = Dim::int_span(lo, hi);
                let x = from_unit(u, a, b, log).round();
                KnobValue::Int((x as i64).clamp(lo, hi))
            }
            (Kind::Cat(options), Coord::C(i)) => options[i.min(options.len() - 1)].clone(),
            // Mismatched pairs do not occur: coordinates are made per dimension.
            (Kind::Cat(options), Coord::U(u)) => options[Dim::cat_of(u, options.len())].clone(),
            (Kind::Float { lo, hi, log }, Coord::C(_)) => {
                KnobValue::Float(from_unit(0.5, *lo, *hi, *log))
            }
            (Kind::Int { lo, .. }, Coord::C(_)) => KnobValue::Int(*lo),
        }
    }

    pub(super) fn cat_of(u: f64, n: usize) -> usize {
        ((u * n as f64) as usize).min(n - 1)
    }

    /// The coordinate of a value; `None` for a value the dimension cannot hold.
    pub(super) fn encode(&self, v: &KnobValue) -> Option<Coord> {
        match (&self.kind, v) {
            (&Kind::Float { lo, hi, log }, KnobValue::Float(x)) => {
                Some(Coord::U(to_unit(*x, lo, hi, log)))
            }
            (&Kind::Int { lo, hi, log }, KnobValue::Int(n)) => {
                let (a, b) = Dim::int_span(lo, hi);
                Some(Coord::U(to_unit((*n).clamp(lo, hi) as f64, a, b, log)))
            }
            (Kind::Cat(options), v) => options.iter().position(|o| o == v).map(Coord::C),
            _ => None,
        }
    }

    /// Whether `v` is a value the sampler may propose for this dimension.
    pub(super) fn contains(&self, v: &KnobValue) -> bool {
        match (&self.kind, v) {
            (Kind::Float { lo, hi, .. }, KnobValue::Float(x)) => (*lo..=*hi).contains(x),
            (Kind::Int { lo, hi, .. }, KnobValue::Int(n)) => (*lo..=*hi).contains(n),
            (Kind::Cat(options), v) => options.contains(v),
            _ => false,
        }
    }

    /// A coordinate drawn from a unit-interval number (used by the design and random draws).
    pub(super) fn coord_at(&self, u: f64) -> Coord {
        match &self.kind {
            Kind::Cat(options) => Coord::C(Dim::cat_of(u, options.len())),
            _ => Coord::U(u),
        }
    }

    /// How many values the dimension has, when it is small enough to count; `None` for floats.
    pub(super) fn size(&self) -> Option<u64> {
        match &self.kind {
            Kind::Float { .. } => None,
            Kind::Int { lo, hi, .. } => u64::try_from(i128::from(*hi) - i128::from(*lo) + 1).ok(),
            Kind::Cat(options) => Some(options.len() as u64),
        }
    }

    /// The `i`-th value in order (for enumeration).
    pub(super) fn nth(&self, i: u64) -> KnobValue {
        match &self.kind {
            Kind::Int { lo, .. } => KnobValue::Int(lo.saturating_add_unsigned(i)),
            Kind::Cat(options) => options[(i as usize).min(options.len() - 1)].clone(),
            Kind::Float { lo, .. } => KnobValue::Float(*lo),
        }
    }
}

/// The free dimensions, the base configuration they are written into, and what was tried.
pub(super) struct Space {
    pub(super) dims: Vec<Dim>,
    pub(super) base: Config,
    /// The digests ([`Space::key`]) of what the history tried (lent by the sampler's index
    /// for one suggestion, not copied: it holds one per experiment).
    pub(super) tried: HashSet<u64>,
    /// And of a few more that count as tried (the base, configurations to avoid).
    pub(super) also_tried: Vec<u64>,
    /// The whole-configuration fingerprints of configurations tried that the history no longer
    /// holds (lent by the sampler's index, see `SamplerCache::retain_history`).
    pub(super) tried_prints: HashSet<u64>,
    /// Dimensions that keep the base value whatever a draw says.
    pub(super) frozen: HashSet<String>,
}

impl Space {
    pub(super) fn new(knobs: &[Knob], history: &[Observation], incumbent: &Config) -> Space {
        let mut base = incumbent.clone();
        let mut dims: Vec<Dim> = Vec::new();
        let mut seen: HashSet<&str> = HashSet::new();
        for knob in knobs {
            // On a name clash the first knob wins, as in `config_of`.
            if !seen.insert(&knob.name) {
                continue;
            }
            base.or_insert(&knob.name, knob.value.clone());
            dims.extend(Dim::of(knob));
        }
        let mut space = Space {
            dims,
            base,
            tried: HashSet::new(),
            also_tried: Vec::new(),
            tried_prints: HashSet::new(),
            frozen: HashSet::new(),
        };
        let mut tried: HashSet<u64> = history.iter().map(|o| space.key(&o.config)).collect();
        tried.insert(space.key(&space.base));
        space.tried = tried;
        space
    }

    /// What identifies a configuration for "already tried": a 64-bit digest of the values of
    /// the free knobs (floats by their bits; hashing, not formatting, keeps a history of
    /// 10,000 cheap to index). Two different configurations share a digest with odds of about
    /// one in 10^11 at that size, and then the new one is only skipped.
    pub(super) fn key(&self, config: &Config) -> u64 {
        use std::hash::{Hash, Hasher};
        // Fixed keys: the same configuration gives the same digest in every process.
        let mut h = std::hash::DefaultHasher::new();
        for d in &self.dims {
            match config.get(&d.name) {
                Some(KnobValue::Bool(b)) => (1u8, *b).hash(&mut h),
                Some(KnobValue::Int(n)) => (2u8, *n).hash(&mut h),
                Some(KnobValue::Float(x)) => (3u8, x.to_bits()).hash(&mut h),
                Some(KnobValue::Str(t)) => (4u8, t.as_str()).hash(&mut h),
                None => 0u8.hash(&mut h),
            }
        }
        h.finish()
    }

    pub(super) fn config(&self, point: &[Coord]) -> Config {
        let mut config = self.base.clone();
        for (d, &c) in self.dims.iter().zip(point) {
            config.insert(d.name.clone(), d.decode(c));
        }
        config
    }

    /// The configuration of `point` when it was not tried yet.
    pub(super) fn fresh(&self, point: &[Coord]) -> Option<Config> {
        self.fresh_config(self.config(point))
    }

    pub(super) fn fresh_config(&self, mut config: Config) -> Option<Config> {
        for name in &self.frozen {
            if let Some(v) = self.base.get(name) {
                config.insert(name.clone(), v.clone());
            }
        }
        let key = self.key(&config);
        let tried = self.tried.contains(&key)
            || self.also_tried.contains(&key)
            || (!self.tried_prints.is_empty()
                && self
                    .tried_prints
                    .contains(&super::cache::fingerprint(&config)));
        (!tried).then_some(config)
    }

    /// Indices of the dimensions local moves may change.
    pub(super) fn movable(&self, focus: &[String]) -> Vec<usize> {
        let free = |i: &usize| !self.frozen.contains(&self.dims[*i].name);
        let focused: Vec<usize> = (0..self.dims.len())
            .filter(free)
            .filter(|&i| focus.contains(&self.dims[i].name))
            .collect();
        if focused.is_empty() {
            (0..self.dims.len()).filter(free).collect()
        } else {
            focused
        }
    }

    pub(super) fn encode(&self, config: &Config) -> Option<Vec<Coord>> {
        self.dims
            .iter()
            .map(|d| config.get(&d.name).and_then(|v| d.encode(v)))
            .collect()
    }

    /// The incumbent's point; a value a dimension cannot hold becomes its first option.
    pub(super) fn incumbent_point(&self) -> Vec<Coord> {
        self.dims
            .iter()
            .map(|d| {
                self.base
                    .get(&d.name)
                    .and_then(|v| d.encode(v))
                    .unwrap_or_else(|| d.coord_at(0.0))
            })
            .collect()
    }

    pub(super) fn random_point(&self, rng: &mut Rng) -> Vec<Coord> {
        self.dims.iter().map(|d| d.coord_at(rng.unit())).collect()
    }
}

impl Space {
    /// A mechanism's candidate, completed from the base, when it is inside the domains and was
    /// not tried. Frozen knobs keep the base's value (the rest of the candidate still counts).
    pub(super) fn candidate(&self, c: &Config) -> Option<Config> {
        let mut config = self.base.clone();
        for (name, v) in c {
            match self.dims.iter().find(|d| d.name == name) {
                Some(d) if d.contains(v) => {
                    if !self.frozen.contains(name) {
                        config.insert(name, v.clone());
                    }
                }
                // A knob the sampler does not move keeps its value.
                None if self.base.get(name) == Some(v) => {}
                _ => return None,
            }
        }
        self.fresh_config(config)
    }
}
