//! The built-in optimizer's sampler: which configuration of the knobs to try next.
//!
//! Every knob that is not fixed is a dimension of a unit cube (log-transformed where its domain
//! is `log`; choices and booleans are categorical). The sampler works in three stages:
//!
//! 1. **Initial design.** While fewer than [`initial_design_size`] observations exist, it walks a
//!    Latin hypercube drawn from `seed` alone, starting at point `index`, so sequential calls
//!    (and parallel calls with different indices) spread over the space.
//! 2. **Model-based.** Afterwards each call either makes a *local move* around the incumbent
//!    (1-2 knobs nudged by a multi-scale Gaussian step in unit space; choices and booleans
//!    switch) or a *TPE* proposal: the observations are split at the best quarter into good and
//!    bad, each set becomes a Parzen estimator (a mixture of product kernels, one component per
//!    observation plus a uniform prior), 24 candidates are drawn from the good estimator, and
//!    the one with the highest ratio `l(x) / g(x)` wins. Failed runs count as the worst.
//! 3. **Fallbacks.** A candidate that was already tried is redrawn a bounded number of times,
//!    then random points are tried, then every single-knob neighbour of the incumbent, then (for
//!    spaces with no float knob) an enumeration of the whole space. `None` means exhausted.
//!
//! Everything is computed on the values that will really be written: floats are rounded to 4
//! significant digits and clamped to the domain before comparison with what was tried.
//! Randomness comes from a small splitmix64 generator seeded from `(seed, index)`, so the same
//! inputs always give the same suggestion.

use std::collections::HashSet;

use super::literal::quantize_float;
use super::{Config, Domain, Knob, KnobValue};

/// One finished experiment as the sampler sees it.
#[derive(Clone, Debug)]
pub struct Observation {
    pub config: Config,
    /// `None` when the run crashed, timed out or printed no metric; it counts as the worst.
    pub objective: Option<f64>,
}

/// How many points the initial space-filling design has for `dims` free knobs.
pub fn initial_design_size(dims: usize) -> usize {
    (2 * dims).clamp(4, 10)
}

/// Proposal attempts (local or TPE) before falling back to random points.
const MODEL_ATTEMPTS: usize = 16;
/// Random points tried before the neighbour and enumeration fallbacks.
const RANDOM_ATTEMPTS: usize = 64;
/// Candidates drawn from the good estimator per TPE proposal.
const TPE_CANDIDATES: usize = 24;
/// Probability of a local move rather than a TPE proposal once a model exists.
const LOCAL_PROBABILITY: f64 = 0.3;
/// Fraction of observations that count as good in TPE.
const GOOD_FRACTION: f64 = 0.25;
/// Probability mass a categorical kernel spreads uniformly over all options.
const CATEGORICAL_SPREAD: f64 = 0.25;
/// Largest space the last-resort enumeration walks.
const ENUMERATION_LIMIT: u64 = 200_000;
/// The PRNG stream of the initial design (per-call streams use `index`).
const DESIGN_STREAM: u64 = 0x4c48_535f_4445_5349;

// ---------------------------------------------------------------------------------------------
// Randomness

/// splitmix64: small, fast, and good enough for sampling; seeded per `(seed, stream)`.
struct Rng {
    state: u64,
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    fn new(seed: u64, stream: u64) -> Self {
        let mut s = seed;
        let a = splitmix(&mut s);
        let mut t = stream ^ a;
        let b = splitmix(&mut t);
        Rng { state: a ^ b }
    }

    fn next_u64(&mut self) -> u64 {
        splitmix(&mut self.state)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in 0..n (n > 0).
    fn below(&mut self, n: usize) -> usize {
        ((self.unit() * n as f64) as usize).min(n.saturating_sub(1))
    }

    /// Standard normal (Box-Muller).
    fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit();
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i + 1));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The search space

/// A position along one dimension: unit coordinate for numbers, option index for categories.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Coord {
    U(f64),
    C(usize),
}

#[derive(Clone, Debug)]
enum Kind {
    Float { lo: f64, hi: f64, log: bool },
    Int { lo: i64, hi: i64, log: bool },
    Cat(Vec<KnobValue>),
}

#[derive(Clone, Debug)]
struct Dim {
    name: String,
    kind: Kind,
}

fn from_unit(u: f64, lo: f64, hi: f64, log: bool) -> f64 {
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

fn to_unit(x: f64, lo: f64, hi: f64, log: bool) -> f64 {
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
    fn of(knob: &Knob) -> Option<Dim> {
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
    fn int_span(lo: i64, hi: i64) -> (f64, f64) {
        (lo as f64 - 0.5, hi as f64 + 0.5)
    }

    fn decode(&self, c: Coord) -> KnobValue {
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

    fn cat_of(u: f64, n: usize) -> usize {
        ((u * n as f64) as usize).min(n - 1)
    }

    /// The coordinate of a value; `None` for a value the dimension cannot hold.
    fn encode(&self, v: &KnobValue) -> Option<Coord> {
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

    /// A coordinate drawn from a unit-interval number (used by the design and random draws).
    fn coord_at(&self, u: f64) -> Coord {
        match &self.kind {
            Kind::Cat(options) => Coord::C(Dim::cat_of(u, options.len())),
            _ => Coord::U(u),
        }
    }

    /// How many values the dimension has, when it is small enough to count; `None` for floats.
    fn size(&self) -> Option<u64> {
        match &self.kind {
            Kind::Float { .. } => None,
            Kind::Int { lo, hi, .. } => u64::try_from(i128::from(*hi) - i128::from(*lo) + 1).ok(),
            Kind::Cat(options) => Some(options.len() as u64),
        }
    }

    /// The `i`-th value in order (for enumeration).
    fn nth(&self, i: u64) -> KnobValue {
        match &self.kind {
            Kind::Int { lo, .. } => KnobValue::Int(lo.saturating_add_unsigned(i)),
            Kind::Cat(options) => options[(i as usize).min(options.len() - 1)].clone(),
            Kind::Float { lo, .. } => KnobValue::Float(*lo),
        }
    }
}

/// The free dimensions, the base configuration they are written into, and what was tried.
struct Space {
    dims: Vec<Dim>,
    base: Config,
    tried: HashSet<String>,
}

impl Space {
    fn new(knobs: &[Knob], history: &[Observation], incumbent: &Config) -> Space {
        let mut base = incumbent.clone();
        let mut dims: Vec<Dim> = Vec::new();
        let mut seen: HashSet<&str> = HashSet::new();
        for knob in knobs {
            // On a name clash the first knob wins, as in `config_of`.
            if !seen.insert(&knob.name) {
                continue;
            }
            base.entry(knob.name.clone())
                .or_insert_with(|| knob.value.clone());
            dims.extend(Dim::of(knob));
        }
        let mut space = Space {
            dims,
            base,
            tried: HashSet::new(),
        };
        let mut tried: HashSet<String> = history.iter().map(|o| space.key(&o.config)).collect();
        tried.insert(space.key(&space.base));
        space.tried = tried;
        space
    }

    /// What identifies a configuration for "already tried": the values of the free knobs.
    fn key(&self, config: &Config) -> String {
        let mut key = String::new();
        for d in &self.dims {
            match config.get(&d.name) {
                Some(v) => key.push_str(&format!("{v:?}")),
                None => key.push('?'),
            }
            key.push('\u{1f}');
        }
        key
    }

    fn config(&self, point: &[Coord]) -> Config {
        let mut config = self.base.clone();
        for (d, &c) in self.dims.iter().zip(point) {
            config.insert(d.name.clone(), d.decode(c));
        }
        config
    }

    /// The configuration of `point` when it was not tried yet.
    fn fresh(&self, point: &[Coord]) -> Option<Config> {
        self.fresh_config(self.config(point))
    }

    fn fresh_config(&self, config: Config) -> Option<Config> {
        (!self.tried.contains(&self.key(&config))).then_some(config)
    }

    fn encode(&self, config: &Config) -> Option<Vec<Coord>> {
        self.dims
            .iter()
            .map(|d| config.get(&d.name).and_then(|v| d.encode(v)))
            .collect()
    }

    /// The incumbent's point; a value a dimension cannot hold becomes its first option.
    fn incumbent_point(&self) -> Vec<Coord> {
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

    fn random_point(&self, rng: &mut Rng) -> Vec<Coord> {
        self.dims.iter().map(|d| d.coord_at(rng.unit())).collect()
    }
}

// ---------------------------------------------------------------------------------------------
// Initial design

fn latin_hypercube(space: &Space, n: usize, seed: u64) -> Vec<Vec<Coord>> {
    let mut rng = Rng::new(seed, DESIGN_STREAM);
    let mut points = vec![Vec::with_capacity(space.dims.len()); n];
    for d in &space.dims {
        let mut strata: Vec<usize> = (0..n).collect();
        rng.shuffle(&mut strata);
        for (point, stratum) in points.iter_mut().zip(strata) {
            point.push(d.coord_at((stratum as f64 + rng.unit()) / n as f64));
        }
    }
    points
}

// ---------------------------------------------------------------------------------------------
// Tree-structured Parzen estimator

fn erf(x: f64) -> f64 {
    // Abramowitz & Stegun 7.1.26; absolute error below 1.5e-7.
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let y = 1.0 - poly * (-x * x).exp();
    if x < 0.0 {
        -y
    } else {
        y
    }
}

fn normal_cdf(z: f64) -> f64 {
    0.5 * (1.0 + erf(z / std::f64::consts::SQRT_2))
}

/// Density at `x` of a normal(`mu`, `sigma`) truncated to [0, 1].
fn truncated_normal_pdf(x: f64, mu: f64, sigma: f64) -> f64 {
    let z = (x - mu) / sigma;
    let mass = (normal_cdf((1.0 - mu) / sigma) - normal_cdf(-mu / sigma)).max(1e-12);
    (-0.5 * z * z).exp() / (sigma * (std::f64::consts::TAU).sqrt() * mass)
}

/// A Parzen estimator: one product-kernel component per observation plus a uniform prior.
struct Parzen<'a> {
    dims: &'a [Dim],
    centers: Vec<Vec<Coord>>,
    sigma: f64,
}

impl<'a> Parzen<'a> {
    fn new(dims: &'a [Dim], centers: Vec<Vec<Coord>>) -> Self {
        // Scott-like bandwidth in unit space, as in Optuna's multivariate TPE.
        let n = centers.len().max(1) as f64;
        let sigma = 0.2 * n.powf(-1.0 / (dims.len() as f64 + 4.0));
        Parzen {
            dims,
            centers,
            sigma,
        }
    }

    fn kernel(&self, d: &Dim, x: Coord, c: Coord) -> f64 {
        match (x, c, &d.kind) {
            (Coord::U(x), Coord::U(c), _) => truncated_normal_pdf(x, c, self.sigma),
            (Coord::C(x), Coord::C(c), Kind::Cat(options)) => {
                let k = options.len() as f64;
                CATEGORICAL_SPREAD / k
                    + if x == c {
                        1.0 - CATEGORICAL_SPREAD
                    } else {
                        0.0
                    }
            }
            _ => 1.0,
        }
    }

    fn prior(d: &Dim) -> f64 {
        match &d.kind {
            Kind::Cat(options) => 1.0 / options.len() as f64,
            _ => 1.0,
        }
    }

    fn log_density(&self, x: &[Coord]) -> f64 {
        let prior: f64 = self.dims.iter().map(Parzen::prior).product();
        let sum: f64 = self
            .centers
            .iter()
            .map(|c| {
                self.dims
                    .iter()
                    .zip(x.iter().zip(c))
                    .map(|(d, (&xi, &ci))| self.kernel(d, xi, ci))
                    .product::<f64>()
            })
            .sum();
        ((sum + prior) / (self.centers.len() as f64 + 1.0))
            .max(1e-300)
            .ln()
    }

    fn sample(&self, rng: &mut Rng, space: &Space) -> Vec<Coord> {
        let j = rng.below(self.centers.len() + 1);
        let Some(center) = self.centers.get(j) else {
            return space.random_point(rng);
        };
        self.dims
            .iter()
            .zip(center)
            .map(|(d, &c)| match (c, &d.kind) {
                (Coord::U(mu), _) => {
                    let mut y = mu + self.sigma * rng.normal();
                    for _ in 0..16 {
                        if (0.0..=1.0).contains(&y) {
                            break;
                        }
                        y = mu + self.sigma * rng.normal();
                    }
                    Coord::U(y.clamp(0.0, 1.0))
                }
                (Coord::C(i), Kind::Cat(options)) => {
                    if rng.unit() < CATEGORICAL_SPREAD {
                        Coord::C(rng.below(options.len()))
                    } else {
                        Coord::C(i)
                    }
                }
                (c, _) => c,
            })
            .collect()
    }
}

/// Good and bad estimators fitted to the history.
struct Model<'a> {
    good: Parzen<'a>,
    bad: Parzen<'a>,
}

impl<'a> Model<'a> {
    fn fit(space: &'a Space, history: &[Observation], minimize: bool) -> Option<Model<'a>> {
        let mut scored: Vec<(f64, Vec<Coord>)> = history
            .iter()
            .filter_map(|o| {
                let point = space.encode(&o.config)?;
                let score = match o.objective {
                    Some(v) if v.is_finite() => {
                        if minimize {
                            v
                        } else {
                            -v
                        }
                    }
                    _ => f64::INFINITY,
                };
                Some((score, point))
            })
            .collect();
        let finite = scored.iter().filter(|(s, _)| s.is_finite()).count();
        if finite == 0 {
            return None;
        }
        scored.sort_by(|a, b| a.0.total_cmp(&b.0));
        let n_good = ((GOOD_FRACTION * scored.len() as f64).ceil() as usize)
            .clamp(1, 25)
            .min(finite);
        let bad: Vec<Vec<Coord>> = scored.split_off(n_good).into_iter().map(|s| s.1).collect();
        let good: Vec<Vec<Coord>> = scored.into_iter().map(|s| s.1).collect();
        Some(Model {
            good: Parzen::new(&space.dims, good),
            bad: Parzen::new(&space.dims, bad),
        })
    }

    /// The untried candidate with the best `l(x) / g(x)` among draws from the good estimator.
    fn propose(&self, space: &Space, rng: &mut Rng) -> Option<Config> {
        let mut best: Option<(f64, Config)> = None;
        for _ in 0..TPE_CANDIDATES {
            let point = self.good.sample(rng, space);
            let Some(config) = space.fresh(&point) else {
                continue;
            };
            // Score what will really be written, not the raw draw.
            let Some(real) = space.encode(&config) else {
                continue;
            };
            let score = self.good.log_density(&real) - self.bad.log_density(&real);
            if best.as_ref().map_or(true, |(s, _)| score > *s) {
                best = Some((score, config));
            }
        }
        best.map(|(_, c)| c)
    }
}

// ---------------------------------------------------------------------------------------------
// Local moves and fallbacks

/// Nudges 1-2 dimensions of `from`: numbers by a Gaussian step (scale 0.02, 0.05 or 0.15 of the
/// unit range, reflected at the edges, and at least one integer step), categories to another
/// option.
fn local_move(space: &Space, from: &[Coord], rng: &mut Rng) -> Vec<Coord> {
    let mut point = from.to_vec();
    let n = space.dims.len();
    let count = if n >= 2 && rng.unit() < 0.4 { 2 } else { 1 };
    let mut order: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut order);
    let scale = [0.02, 0.05, 0.15][rng.below(3)];
    for &i in order.iter().take(count) {
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

/// The first untried configuration that differs from the incumbent in one knob.
fn untried_neighbour(space: &Space, rng: &mut Rng) -> Option<Config> {
    let from = space.incumbent_point();
    let n = space.dims.len();
    let start = rng.below(n);
    for k in 0..n {
        let i = (start + k) % n;
        let d = &space.dims[i];
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
            if d.encode(&v).is_none() {
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
fn untried_by_enumeration(space: &Space, rng: &mut Rng) -> Option<Config> {
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

/// The next configuration to try.
///
/// Deterministic: the same `(knobs, history, incumbent, minimize, seed, index)` always gives the
/// same answer. Never returns a configuration whose free knobs equal those of one in `history`
/// or of `incumbent`; `None` when nothing new can be found (no free knobs, or every
/// configuration of a small space tried). Knobs missing from `incumbent` take their current
/// value; the result holds every key of `incumbent` plus every knob.
pub fn suggest(
    knobs: &[Knob],
    history: &[Observation],
    incumbent: &Config,
    minimize: bool,
    seed: u64,
    index: u64,
) -> Option<Config> {
    let space = Space::new(knobs, history, incumbent);
    if space.dims.is_empty() {
        return None;
    }
    let n_init = initial_design_size(space.dims.len());
    if history.len() < n_init {
        let design = latin_hypercube(&space, n_init, seed);
        let start = (index % n_init as u64) as usize;
        for k in 0..n_init {
            if let Some(c) = space.fresh(&design[(start + k) % n_init]) {
                return Some(c);
            }
        }
    }
    let mut rng = Rng::new(seed, index);
    let model = Model::fit(&space, history, minimize);
    let from = space.incumbent_point();
    for _ in 0..MODEL_ATTEMPTS {
        let found = match &model {
            Some(m) if rng.unit() >= LOCAL_PROBABILITY => m.propose(&space, &mut rng),
            _ => space.fresh(&local_move(&space, &from, &mut rng)),
        };
        if found.is_some() {
            return found;
        }
    }
    for _ in 0..RANDOM_ATTEMPTS {
        if let Some(c) = space.fresh(&space.random_point(&mut rng)) {
            return Some(c);
        }
    }
    untried_neighbour(&space, &mut rng).or_else(|| untried_by_enumeration(&space, &mut rng))
}
