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
//!    bad, each set becomes a Parzen estimator (a mixture of product kernels of width
//!    [`BANDWIDTH`], one component per observation plus a uniform prior), 24 candidates are
//!    drawn from the good estimator, and the one with the highest ratio `l(x) / g(x)` wins.
//!    Failed runs count as the worst.
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
use crate::propose::guidance::Mode;
use crate::util::{splitmix64, unit_f64};

/// What the outer loop's mechanisms ask of one suggestion (see `crate::meta`). The default
/// asks nothing, and [`suggest_guided`] with it is exactly [`suggest`].
#[derive(Clone, Copy, Debug, Default)]
pub struct SamplerGuide<'a> {
    /// Configurations to try first, in order: the first that is untried, inside the knobs'
    /// domains and leaves every frozen knob alone is taken as it is.
    pub candidates: &'a [Config],
    /// Knobs that keep the incumbent's value.
    pub frozen: &'a [String],
    /// Knobs local moves should change (when any of them is free).
    pub focus: &'a [String],
    /// Multiplies the size of local moves (`None`: 1).
    pub step_scale: Option<f64>,
    /// `Explore`: uniform random draws instead of the model and local moves; `Exploit`: local
    /// moves around the incumbent only.
    pub mode: Option<Mode>,
    /// Configurations to treat as already tried (proposals a mechanism rejected).
    pub avoid: &'a [Config],
}

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
/// The Parzen estimators' kernel width in unit space, before the shrink with the number of
/// observations.
const BANDWIDTH: f64 = 0.1;
/// Probability mass a categorical kernel spreads uniformly over all options.
const CATEGORICAL_SPREAD: f64 = 0.25;
/// Largest space the last-resort enumeration walks.
const ENUMERATION_LIMIT: u64 = 200_000;
/// The PRNG stream of the initial design (per-call streams use `index`).
const DESIGN_STREAM: u64 = 0x4c48_535f_4445_5349;

// ---------------------------------------------------------------------------------------------
// Randomness

/// splitmix64 (`util::splitmix64`), seeded per `(seed, stream)`.
struct Rng {
    state: u64,
}

impl Rng {
    fn new(seed: u64, stream: u64) -> Self {
        let mut s = seed;
        let a = splitmix64(&mut s);
        let mut t = stream ^ a;
        let b = splitmix64(&mut t);
        Rng { state: a ^ b }
    }

    fn next_u64(&mut self) -> u64 {
        splitmix64(&mut self.state)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        unit_f64(self.next_u64())
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

    /// Whether `v` is a value the sampler may propose for this dimension.
    fn contains(&self, v: &KnobValue) -> bool {
        match (&self.kind, v) {
            (Kind::Float { lo, hi, .. }, KnobValue::Float(x)) => (*lo..=*hi).contains(x),
            (Kind::Int { lo, hi, .. }, KnobValue::Int(n)) => (*lo..=*hi).contains(n),
            (Kind::Cat(options), v) => options.contains(v),
            _ => false,
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
    /// Dimensions that keep the base value whatever a draw says.
    frozen: HashSet<String>,
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
            frozen: HashSet::new(),
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

    fn fresh_config(&self, mut config: Config) -> Option<Config> {
        for name in &self.frozen {
            if let Some(v) = self.base.get(name) {
                config.insert(name.clone(), v.clone());
            }
        }
        (!self.tried.contains(&self.key(&config))).then_some(config)
    }

    /// Indices of the dimensions local moves may change.
    fn movable(&self, focus: &[String]) -> Vec<usize> {
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
        // Scott-like bandwidth in unit space: Optuna's multivariate TPE starts from 0.2; half
        // of that concentrates the good estimator enough to refine within 50 verifications
        // (measured with `examples/tune_sampler.rs` on two sets of 50 seeds: median regret at
        // 50 fell on rosenbrock, nuisance and conditional, rose a little on mixed; see
        // bench/RESULTS.md).
        let n = centers.len().max(1) as f64;
        let sigma = BANDWIDTH * n.powf(-1.0 / (dims.len() as f64 + 4.0));
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
fn local_move(
    space: &Space,
    from: &[Coord],
    rng: &mut Rng,
    movable: &[usize],
    step_scale: f64,
) -> Vec<Coord> {
    let mut point = from.to_vec();
    let n = movable.len();
    let count = if n >= 2 && rng.unit() < 0.4 { 2 } else { 1 };
    let mut order: Vec<usize> = movable.to_vec();
    rng.shuffle(&mut order);
    let scale = [0.02, 0.05, 0.15][rng.below(3)] * step_scale;
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
    let guide = SamplerGuide::default();
    suggest_guided(knobs, history, incumbent, minimize, seed, index, &guide).map(|(c, _)| c)
}

/// [`suggest`] under a mechanism's guidance. Returns the configuration and, when it is one of
/// `guide.candidates`, its index there.
pub fn suggest_guided(
    knobs: &[Knob],
    history: &[Observation],
    incumbent: &Config,
    minimize: bool,
    seed: u64,
    index: u64,
    guide: &SamplerGuide<'_>,
) -> Option<(Config, Option<usize>)> {
    let mut space = Space::new(knobs, history, incumbent);
    if space.dims.is_empty() {
        return None;
    }
    for c in guide.avoid {
        let key = space.key(c);
        space.tried.insert(key);
    }
    space.frozen = guide
        .frozen
        .iter()
        .filter(|f| space.dims.iter().any(|d| &d.name == *f))
        .cloned()
        .collect();
    for (i, c) in guide.candidates.iter().enumerate() {
        if let Some(config) = space.candidate(c) {
            return Some((config, Some(i)));
        }
    }
    let found = |c: Option<Config>| c.map(|c| (c, None));
    let n_init = initial_design_size(space.dims.len());
    if history.len() < n_init {
        let design = latin_hypercube(&space, n_init, seed);
        let start = (index % n_init as u64) as usize;
        for k in 0..n_init {
            if let Some(c) = space.fresh(&design[(start + k) % n_init]) {
                return found(Some(c));
            }
        }
    }
    let mut rng = Rng::new(seed, index);
    let model = Model::fit(&space, history, minimize);
    let from = space.incumbent_point();
    let movable = space.movable(guide.focus);
    let step = guide.step_scale.unwrap_or(1.0).clamp(0.05, 20.0);
    for _ in 0..MODEL_ATTEMPTS {
        let next = match (guide.mode, &model) {
            (Some(Mode::Explore), _) => space.fresh(&space.random_point(&mut rng)),
            (Some(Mode::Exploit), _) => {
                space.fresh(&local_move(&space, &from, &mut rng, &movable, step))
            }
            (None, Some(m)) if rng.unit() >= LOCAL_PROBABILITY => m.propose(&space, &mut rng),
            _ => space.fresh(&local_move(&space, &from, &mut rng, &movable, step)),
        };
        if next.is_some() {
            return found(next);
        }
    }
    for _ in 0..RANDOM_ATTEMPTS {
        if let Some(c) = space.fresh(&space.random_point(&mut rng)) {
            return found(Some(c));
        }
    }
    found(untried_neighbour(&space, &mut rng).or_else(|| untried_by_enumeration(&space, &mut rng)))
}

impl Space {
    /// A mechanism's candidate, completed from the base, when it is inside the domains and was
    /// not tried. Frozen knobs keep the base's value (the rest of the candidate still counts).
    fn candidate(&self, c: &Config) -> Option<Config> {
        let mut config = self.base.clone();
        for (name, v) in c {
            match self.dims.iter().find(|d| &d.name == name) {
                Some(d) if d.contains(v) => {
                    if !self.frozen.contains(name) {
                        config.insert(name.clone(), v.clone());
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

/// The knobs the sampler moves, in order: the dimensions of its unit cube.
pub fn dimensions(knobs: &[Knob]) -> Vec<String> {
    Space::new(knobs, &[], &Config::new())
        .dims
        .into_iter()
        .map(|d| d.name)
        .collect()
}

/// The configuration at point `u` of the unit cube (one coordinate in [0, 1] per entry of
/// [`dimensions`], in order; missing ones are 0.5); other knobs keep `incumbent`'s value.
pub fn config_at(knobs: &[Knob], incumbent: &Config, u: &[f64]) -> Config {
    let space = Space::new(knobs, &[], incumbent);
    let point: Vec<Coord> = space
        .dims
        .iter()
        .enumerate()
        .map(|(i, d)| d.coord_at(u.get(i).copied().unwrap_or(0.5).clamp(0.0, 1.0)))
        .collect();
    space.config(&point)
}

/// Where a configuration lies in the unit cube: one entry per entry of [`dimensions`], the
/// unit coordinate of a number (log-scaled where its domain is) or `None` for a choice, a
/// boolean, or a value the knob cannot hold.
pub fn unit_coords(knobs: &[Knob], config: &Config) -> Vec<Option<f64>> {
    Space::new(knobs, &[], &Config::new())
        .dims
        .iter()
        .map(|d| match config.get(&d.name).and_then(|v| d.encode(v)) {
            Some(Coord::U(u)) => Some(u),
            _ => None,
        })
        .collect()
}

/// How far apart two configurations are: the sum of the differences over the free knobs (a
/// Manhattan distance), in unit space for numbers (integers by their bins) and 0 or 1 for
/// choices. A knob missing from either configuration counts as 1. One step of an integer knob
/// over 20 values is 0.05; the same step on two knobs is 0.1.
pub fn distance(knobs: &[Knob], a: &Config, b: &Config) -> f64 {
    let space = Space::new(knobs, &[], &Config::new());
    let mut total: f64 = 0.0;
    for d in &space.dims {
        let pa = a.get(&d.name).and_then(|v| d.encode(v));
        let pb = b.get(&d.name).and_then(|v| d.encode(v));
        let gap = match (pa, pb) {
            (Some(Coord::U(x)), Some(Coord::U(y))) => (x - y).abs(),
            (Some(Coord::C(x)), Some(Coord::C(y))) => f64::from(u8::from(x != y)),
            _ => 1.0,
        };
        total += gap;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::propose::knobs::{apply, config_of, discover};

    /// Seeded candidates (and the benchmarks built on them) depend on these exact streams.
    #[test]
    fn rng_streams_are_pinned() {
        assert_eq!(
            DESIGN_STREAM, 0x4c48_535f_4445_5349,
            "the seeds checked use it"
        );
        let want = [
            [
                0xa7f7_2697_a273_1486,
                0xf4e0_cc8a_f2e8_152d,
                0x4bf6_c411_d938_0697,
            ],
            [
                0xdffd_3cda_f7c0_17ff,
                0x5111_6469_df83_42b8,
                0xdd56_7210_554c_9a91,
            ],
            [
                0xd731_03d6_db15_b7fe,
                0x2270_926b_b3f6_9fa1,
                0x7e7d_0ef8_83e1_c1a8,
            ],
        ];
        let draw = |seed, stream| {
            let mut r = Rng::new(seed, stream);
            std::array::from_fn(|_| r.next_u64())
        };
        crate::util::assert_pinned_streams(draw, want);
    }

    fn knobs_of(text: &str) -> Vec<Knob> {
        match discover("t.py", text) {
            Ok(k) => k,
            Err(e) => panic!("{e}"),
        }
    }

    /// Runs `n` suggestions sequentially with `objective`, the incumbent being the best so far.
    /// Returns the history (baseline first) and the best objective.
    fn run(
        knobs: &[Knob],
        n: u64,
        seed: u64,
        objective: impl Fn(&Config) -> Option<f64>,
    ) -> (Vec<Observation>, f64) {
        let mut incumbent = config_of(knobs);
        let mut best = objective(&incumbent).unwrap_or(f64::INFINITY);
        let mut history = vec![Observation {
            config: incumbent.clone(),
            objective: objective(&incumbent),
        }];
        for i in 0..n {
            let Some(config) = suggest(knobs, &history, &incumbent, true, seed, i) else {
                break;
            };
            let y = objective(&config);
            if let Some(y) = y.filter(|&y| y < best) {
                best = y;
                incumbent = config.clone();
            }
            history.push(Observation {
                config,
                objective: y,
            });
        }
        (history, best)
    }

    const QUAD: &str = "A = 0.5     # hone: 0.0..1.0\n\
                        B = 0.01    # hone: log 1e-5..1.0\n\
                        C = 8       # hone: int 1..64\n\
                        D = -1.0    # hone: -5.0..5.0\n\
                        SEED = 3\n";

    fn num(c: &Config, name: &str) -> f64 {
        match c.get(name) {
            Some(KnobValue::Float(x)) => *x,
            Some(KnobValue::Int(n)) => *n as f64,
            other => panic!("{name} = {other:?}"),
        }
    }

    /// A quadratic bowl in the knobs' natural (unit-space) scales, minimum 0.
    fn quadratic(c: &Config) -> Option<f64> {
        let a = num(c, "A") - 0.83;
        let b = (num(c, "B").log10() + 3.52) / 5.0;
        let cc = (num(c, "C") - 37.0) / 63.0;
        let d = (num(c, "D") - 2.2) / 10.0;
        Some(a * a + b * b + cc * cc + d * d)
    }

    fn median(mut v: Vec<f64>) -> f64 {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }

    #[test]
    fn suggest_is_deterministic() {
        let knobs = knobs_of(QUAD);
        let (history, _) = run(&knobs, 15, 7, quadratic);
        let incumbent = config_of(&knobs);
        for index in [0, 1, 15, 99] {
            for minimize in [true, false] {
                let a = suggest(&knobs, &history, &incumbent, minimize, 7, index);
                let b = suggest(&knobs, &history, &incumbent, minimize, 7, index);
                assert!(a.is_some());
                assert_eq!(a, b);
            }
        }
        let (again, _) = run(&knobs, 15, 7, quadratic);
        let configs = |h: &[Observation]| h.iter().map(|o| o.config.clone()).collect::<Vec<_>>();
        assert_eq!(configs(&history), configs(&again));
        let (other_seed, _) = run(&knobs, 15, 8, quadratic);
        assert_ne!(configs(&history), configs(&other_seed));
    }

    #[test]
    fn never_repeats_over_200_suggestions() {
        let knobs =
            knobs_of("LR = 0.04  # hone: 0.01..0.05\nDEPTH = 3  # hone: int 1..4\nFLAG = true\n");
        // Most runs crash, so the model keeps pointing at the few that worked.
        let (history, _) = run(&knobs, 200, 1, |c| {
            (num(c, "DEPTH") == 2.0).then(|| (num(c, "LR") - 0.03).abs())
        });
        assert_eq!(history.len(), 201);
        let mut seen = HashSet::new();
        for o in &history {
            assert!(
                seen.insert(format!("{:?}", o.config)),
                "repeated {:?}",
                o.config
            );
        }
    }

    #[test]
    fn a_finite_space_is_walked_exactly_once_then_exhausted() {
        // 4 * 3 * 2 = 24 configurations, one of which is the incumbent.
        let knobs = knobs_of(
            "DEPTH = 3  # hone: int 1..4\nMODE = 'a'  # hone: choice ['a', 'b', 'c']\n\
             FLAG = False\nSEED = 1\n",
        );
        let (history, _) = run(&knobs, 100, 5, |c| Some(num(c, "DEPTH")));
        assert_eq!(history.len(), 24);
        let seen: HashSet<String> = history.iter().map(|o| format!("{:?}", o.config)).collect();
        assert_eq!(seen.len(), 24);
        let incumbent = config_of(&knobs);
        assert_eq!(suggest(&knobs, &history, &incumbent, true, 5, 24), None);
    }

    #[test]
    fn all_bools_tried_gives_none() {
        let knobs = knobs_of("A = True\nB = False\nC = true\n");
        let (history, _) = run(&knobs, 50, 2, |_| None);
        assert_eq!(history.len(), 8);
        for index in 0..5 {
            assert_eq!(
                suggest(&knobs, &history, &config_of(&knobs), true, 2, index),
                None
            );
        }
    }

    #[test]
    fn nothing_to_move_gives_none() {
        let knobs = knobs_of("SEED = 1\nNAME = 'x'\nZ = 0.0\nW = 2  # hone: fixed\n");
        assert_eq!(suggest(&knobs, &[], &config_of(&knobs), true, 0, 0), None);
    }

    #[test]
    fn suggestions_are_quantized_in_domain_and_survive_a_rewrite() {
        let text = "LR = 0.04\nB = 0.3  # hone: 0.123456..0.2\nN = 8\nNEG = -2.5\nSEED = 9\n";
        let knobs = knobs_of(text);
        let (history, _) = run(&knobs, 60, 11, |c| Some(num(c, "LR") + num(c, "B")));
        for o in &history[1..] {
            let c = &o.config;
            assert_eq!(c.get("SEED"), Some(&KnobValue::Int(9)));
            for k in &knobs {
                let v = num(c, &k.name);
                match k.domain {
                    Domain::Float { lo, hi, .. } => {
                        assert!((lo..=hi).contains(&v), "{} = {v}", k.name);
                        let on_grid = quantize_float(v) == v;
                        assert!(on_grid || v == lo || v == hi, "{} = {v}", k.name);
                    }
                    Domain::Int { lo, hi, .. } => {
                        assert!((lo as f64..=hi as f64).contains(&v), "{} = {v}", k.name)
                    }
                    _ => {}
                }
            }
            let written = match apply("t.py", text, c) {
                Ok(w) => w,
                Err(e) => panic!("{e}"),
            };
            assert_eq!(&config_of(&knobs_of(&written)), c);
        }
    }

    #[test]
    fn the_initial_design_is_a_latin_hypercube() {
        let knobs = knobs_of("A = 0.5  # hone: 0.0..1.0\nB = 0.5  # hone: 0.0..1.0\n");
        let space = Space::new(&knobs, &[], &config_of(&knobs));
        let n = initial_design_size(2);
        assert_eq!(n, 4);
        // Sequential suggestions with a growing history walk the design in order.
        let (history, _) = run(&knobs, n as u64 - 1, 3, |_| Some(0.0));
        let design = latin_hypercube(&space, n, 3);
        for (o, p) in history[1..].iter().zip(&design) {
            assert_eq!(o.config, space.config(p));
        }
        for dim in 0..2 {
            let mut strata: Vec<usize> = design
                .iter()
                .map(|p| match p[dim] {
                    Coord::U(u) => (u * n as f64) as usize,
                    Coord::C(_) => usize::MAX,
                })
                .collect();
            strata.sort_unstable();
            assert_eq!(strata, (0..n).collect::<Vec<_>>());
        }
    }

    #[test]
    fn failed_runs_count_as_the_worst() {
        let knobs = knobs_of("A = 0.5  # hone: 0.0..1.0\n");
        let space = Space::new(&knobs, &[], &config_of(&knobs));
        let obs = |a: f64, y: Option<f64>| Observation {
            config: Config::from([("A".to_string(), KnobValue::Float(a))]),
            objective: y,
        };
        let history = [
            obs(0.1, None),
            obs(0.9, Some(5.0)),
            obs(0.5, None),
            obs(0.3, None),
        ];
        for (minimize, best) in [(true, 0.9), (false, 0.9)] {
            let model = match Model::fit(&space, &history, minimize) {
                Some(m) => m,
                None => panic!("no model"),
            };
            assert_eq!(model.good.centers, vec![vec![Coord::U(best)]]);
            assert_eq!(model.bad.centers.len(), 3);
        }
        assert!(Model::fit(&space, &[obs(0.1, None)], true).is_none());
        let history = [
            obs(0.1, Some(1.0)),
            obs(0.9, Some(5.0)),
            obs(0.5, Some(3.0)),
        ];
        let top = |minimize| Model::fit(&space, &history, minimize).map(|m| m.good.centers);
        assert_eq!(top(true), Some(vec![vec![Coord::U(0.1)]]));
        assert_eq!(top(false), Some(vec![vec![Coord::U(0.9)]]));
    }

    #[test]
    fn the_sampler_beats_random_search_on_a_quadratic() {
        let knobs = knobs_of(QUAD);
        let mut sampler = Vec::new();
        let mut random = Vec::new();
        for seed in 0..9u64 {
            sampler.push(run(&knobs, 40, seed, quadratic).1);
            let space = Space::new(&knobs, &[], &config_of(&knobs));
            let best = (0..40)
                .filter_map(|i| {
                    let mut rng = Rng::new(seed ^ 0x5eed, i);
                    quadratic(&space.config(&space.random_point(&mut rng)))
                })
                .fold(f64::INFINITY, f64::min);
            random.push(best);
        }
        let (s, r) = (median(sampler.clone()), median(random.clone()));
        assert!(
            s < 0.5 * r,
            "sampler median {s} {sampler:.4?} vs random median {r} {random:.4?}"
        );
    }

    #[test]
    fn guidance_freezes_focuses_and_switches_modes() {
        let knobs = knobs_of(QUAD);
        let (history, _) = run(&knobs, 12, 3, quadratic);
        let incumbent = config_of(&knobs);
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let frozen = names(&["A", "C"]);
        let focus = names(&["B"]);
        for index in 0..20 {
            let guide = SamplerGuide {
                frozen: &frozen,
                ..SamplerGuide::default()
            };
            let (c, _) = suggest_guided(&knobs, &history, &incumbent, true, 3, index, &guide)
                .unwrap_or_else(|| panic!("nothing at {index}"));
            assert_eq!(c.get("A"), incumbent.get("A"));
            assert_eq!(c.get("C"), incumbent.get("C"));
            let guide = SamplerGuide {
                focus: &focus,
                mode: Some(Mode::Exploit),
                ..SamplerGuide::default()
            };
            let (c, _) = suggest_guided(&knobs, &history, &incumbent, true, 3, index, &guide)
                .unwrap_or_else(|| panic!("nothing at {index}"));
            let moved: Vec<&String> = c
                .iter()
                .filter(|(k, v)| incumbent.get(*k) != Some(v))
                .map(|(k, _)| k)
                .collect();
            assert_eq!(moved, vec!["B"], "an exploit step on the focused knob only");
        }
        // Explore draws land far from the incumbent more often than the default's local moves.
        let spread = |mode: Option<Mode>| -> f64 {
            (0..40)
                .filter_map(|i| {
                    let guide = SamplerGuide {
                        mode,
                        ..SamplerGuide::default()
                    };
                    suggest_guided(&knobs, &history, &incumbent, true, 3, i, &guide)
                })
                .map(|(c, _)| distance(&knobs, &c, &incumbent))
                .sum::<f64>()
        };
        assert!(spread(Some(Mode::Explore)) > 1.5 * spread(Some(Mode::Exploit)));
    }

    #[test]
    fn candidates_come_first_unless_tried_or_out_of_range_and_keep_frozen_knobs() {
        let knobs = knobs_of("A = 3  # hone: int 1..9\nB = 3  # hone: int 1..9\n");
        let incumbent = config_of(&knobs);
        let cfg = |a: i64, b: i64| {
            Config::from([
                ("A".to_string(), KnobValue::Int(a)),
                ("B".to_string(), KnobValue::Int(b)),
            ])
        };
        let mut history = vec![
            Observation {
                config: cfg(5, 5),
                objective: Some(1.0),
            },
            Observation {
                config: cfg(5, 3),
                objective: Some(1.5),
            },
        ];
        let frozen = vec!["B".to_string()];
        let candidates = vec![cfg(5, 5), cfg(42, 3), cfg(4, 4), cfg(6, 3)];
        let guide = SamplerGuide {
            candidates: &candidates,
            frozen: &frozen,
            ..SamplerGuide::default()
        };
        // (5, 5) with B frozen at 3 is (5, 3), tried; (4, 4) is (4, 3): untried, the one.
        let got = suggest_guided(&knobs, &history, &incumbent, true, 0, 1, &guide);
        assert_eq!(got, Some((cfg(4, 3), Some(2))));
        // Once (4, 3) was measured, (4, 4) counts as tried too.
        history.push(Observation {
            config: cfg(4, 3),
            objective: Some(2.0),
        });
        let got = suggest_guided(&knobs, &history, &incumbent, true, 0, 1, &guide);
        assert_eq!(got, Some((cfg(6, 3), Some(3))));
        let avoid = vec![cfg(6, 3)];
        let guide = SamplerGuide {
            candidates: &candidates,
            avoid: &avoid,
            ..SamplerGuide::default()
        };
        let got = suggest_guided(&knobs, &history, &incumbent, true, 0, 1, &guide);
        assert_eq!(
            got,
            Some((cfg(4, 4), Some(2))),
            "avoided ones count as tried"
        );
    }

    #[test]
    fn no_guidance_is_exactly_the_plain_sampler() {
        let knobs = knobs_of(QUAD);
        let (history, _) = run(&knobs, 20, 5, quadratic);
        let incumbent = config_of(&knobs);
        for index in 0..30 {
            let plain = suggest(
                &knobs,
                &history[..(index as usize % 20) + 1],
                &incumbent,
                true,
                5,
                index,
            );
            let guided = suggest_guided(
                &knobs,
                &history[..(index as usize % 20) + 1],
                &incumbent,
                true,
                5,
                index,
                &SamplerGuide::default(),
            );
            assert_eq!(plain, guided.map(|(c, _)| c));
        }
    }
}
