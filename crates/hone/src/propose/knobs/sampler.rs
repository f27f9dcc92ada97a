//! The built-in optimizer's sampler: which configuration of the knobs to try next.
//!
//! Every knob that is not fixed is a dimension of a unit cube (log-transformed where its domain
//! is `log`; choices and booleans are categorical). The sampler works in three stages:
//!
//! 1. **Initial design.** The first proposal (`index` 1) is the centre of the box: the middle
//!    of every numeric knob's range (on a log scale for `log` knobs) with the baseline's
//!    choices, unless that is the baseline (users' ranges bracket the values they expect to be good, and the baseline is
//!    often their middle already); see [`centre`]. Then, while fewer than
//!    [`initial_design_size`] observations (one more with the centre) exist, it walks a Latin
//!    hypercube drawn from `seed` alone, starting at point `index`, so sequential calls (and
//!    parallel calls with different indices) spread over the space. A crash ends it early
//!    (`SamplerGuide::infeasible`: the next stage then avoids what crashed).
//! 2. **Model-based.** Afterwards each call either makes a *local move* around the incumbent
//!    (1-2 knobs nudged by a multi-scale Gaussian step in unit space; choices and booleans
//!    switch; of [`LOCAL_CANDIDATES`] such moves the model's best `l(x) / g(x)` is taken, all
//!    switching the same choice when the first one does; three model proposals in ten, one
//!    in twenty from [`LOCAL_UNTIL`] experiments on, running and pruned ones not counted,
//!    unless a configuration proved infeasible) or a *TPE* proposal: the
//!    observations are split at the best tenth (the best quarter from [`GOOD_EARLY_UNTIL`]
//!    observations on, or once a configuration proved infeasible) into good and bad, each set
//!    becomes a Parzen
//!    estimator (a mixture of product kernels of width
//!    [`BANDWIDTH`], one component per observation plus a uniform prior), 24 candidates are
//!    drawn from the good estimator, and the one with the highest ratio `l(x) / g(x)` wins.
//!    Failed runs count as the worst. Once ten experiments have a value, one proposal in three
//!    (by the experiment's number) is instead a *refinement step* ([`refine`]): the minimum of
//!    a quadratic model of the best measured points inside a trust region around the incumbent
//!    (running and pruned experiments, at a stand-in value, stay out of it), or now and then
//!    the incumbent with one choice changed. Past [`MODEL_CAP`] observations the model is
//!    fitted to a bounded sample of them (the best, the most recent, and an even spread of the
//!    rest), so a proposal costs the same at 10,000 experiments as at 300; up to the cap
//!    nothing changes.
//! 3. **Fallbacks.** A candidate that was already tried is redrawn a bounded number of times,
//!    then random points are tried, then every single-knob neighbour of the incumbent, then (for
//!    spaces with no float knob) an enumeration of the whole space. `None` means exhausted.
//!
//! Everything is computed on the values that will really be written: floats are rounded to 4
//! significant digits and clamped to the domain before comparison with what was tried.
//! Randomness comes from a small splitmix64 generator seeded from `(seed, index)`, so the same
//! inputs always give the same suggestion.

mod attribute;
mod cache;
mod design;
mod feasible;
mod moves;
mod parzen;
mod refine;
mod space;

use super::{Config, Knob};
use crate::propose::guidance::Mode;
use crate::util::{splitmix64, unit_f64};
pub use cache::{fingerprint, SamplerCache};
use design::latin_hypercube;
use feasible::Feasibility;
use moves::{untried_by_enumeration, untried_neighbour, LocalMoves};
use parzen::Model;
use space::{Coord, Space};

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
    /// Configurations that crashed, timed out or violated a constraint: the feasibility model
    /// (`feasible`) learns from them where not to propose. Empty: no model.
    pub infeasible: &'a [Config],
    /// Configurations of the history still being measured (the `running` experiments of a
    /// parallel run, there at a made-up value): tried, but the feasibility model does not count
    /// them as finished.
    pub pending: &'a [Config],
    /// Indices into the history of the observations whose value is a stand-in, not a
    /// measurement: running and pruned experiments, at the worst value measured (see
    /// `propose::optimizer::observations`), in any order. The Parzen model ranks them there;
    /// the refinement step's quadratic model, which fits measured values, leaves them out.
    pub stand_ins: &'a [u32],
}

/// One finished experiment as the sampler sees it.
#[derive(Clone, Debug)]
pub struct Observation {
    pub config: Config,
    /// `None` when the run crashed, timed out or printed no metric; it counts as the worst.
    pub objective: Option<f64>,
}

/// How many points the initial space-filling design has for `dims` free knobs: 1.5 per knob,
/// at least 4 and at most 8. (It was 2 per knob up to 10: on 5 or more knobs the design took
/// half of a 20-experiment budget; measured with `examples/tune_sampler.rs`, see
/// bench/RESULTS.md, "A sampler that is best early and late".)
pub fn initial_design_size(dims: usize) -> usize {
    (3 * dims).div_ceil(2).clamp(4, 8)
}

/// The initial design's proposal for `index` while the design lasts (fewer observations than
/// [`initial_design_size`], one more with the centre): the centre of the box first
/// ([`centre`]), then the Latin hypercube's points in turn, the first new one `admit` takes.
fn design_point(
    space: &Space,
    history: &[Observation],
    seed: u64,
    index: u64,
    admit: &dyn Fn(Option<Config>) -> Option<Config>,
) -> Option<Config> {
    let n_init = initial_design_size(space.dims.len());
    let design = latin_hypercube(space, n_init, seed);
    let centre = centre(space, history, &design);
    let extra = usize::from(centre.is_some());
    if history.len() >= n_init + extra {
        return None;
    }
    if let (1, Some(c)) = (index, centre) {
        if let Some(c) = admit(space.fresh_config(c)) {
            return Some(c);
        }
    }
    // With the centre first, the hypercube's points come one experiment later.
    let start = (index.saturating_sub(extra as u64) % n_init as u64) as usize;
    (0..n_init).find_map(|k| admit(space.fresh(&design[(start + k) % n_init])))
}

/// The centre of the box: the middle of every numeric knob's unit range, with the baseline's
/// choices (`history`'s first observation ran with them; a choice of the design's could
/// crash), or `None` when the baseline's numeric knobs are that middle already. Measured on the suite of `bench/problems` (see
/// bench/RESULTS.md, "The centre of the box first"): it helps where good values lie mid-range,
/// as they do in a training run's usual ranges, and costs one design point where they do not.
fn centre(space: &Space, history: &[Observation], design: &[Vec<Coord>]) -> Option<Config> {
    let baseline = history.first().map(|b| &b.config);
    let first = design.first()?;
    let mut config = space.config(
        &first
            .iter()
            .zip(&space.dims)
            .map(|(c, d)| match c {
                Coord::U(_) => d.coord_at(0.5),
                Coord::C(_) => *c,
            })
            .collect::<Vec<Coord>>(),
    );
    if let Some(base) = baseline {
        for d in &space.dims {
            if let (space::Kind::Cat(_), Some(v)) = (&d.kind, base.get(&d.name)) {
                config.insert(d.name.clone(), v.clone());
            }
        }
    }
    (baseline.map(|b| space.key(b)) != Some(space.key(&config))).then_some(config)
}

/// How likely a model-based proposal (not the design, not a refinement step) is a local move
/// after `observations`, when `infeasible_seen` (some configuration crashed, timed out or
/// violated a constraint) or not.
fn local_probability(observations: usize, infeasible_seen: bool) -> f64 {
    if observations < LOCAL_UNTIL || infeasible_seen {
        LOCAL_PROBABILITY
    } else {
        LOCAL_PROBABILITY_LATE
    }
}

/// Proposal attempts (local or TPE) before falling back to random points.
const MODEL_ATTEMPTS: usize = 16;
/// Random points tried before the neighbour and enumeration fallbacks.
const RANDOM_ATTEMPTS: usize = 64;
/// Candidates drawn from the good estimator per TPE proposal.
const TPE_CANDIDATES: usize = 24;
/// Probability of a local move rather than a TPE proposal once a model exists, up to
/// [`LOCAL_UNTIL`] experiments (and throughout once a configuration proved infeasible).
const LOCAL_PROBABILITY: f64 = 0.3;
/// The probability from [`LOCAL_UNTIL`] experiments on while nothing proved infeasible. Late
/// local moves circle the incumbent; when the metric is noisy the incumbent is often a lucky
/// measurement, and moves around it are more mediocre points that the next lucky one can
/// displace, while the refinement step's quadratic model and TPE average the noise out.
/// Measured with `examples/tune_sampler.rs` on 150 seeds (1-30, 1000-1059 and 2000-2059, the
/// last set held out until the setting was chosen; bench/RESULTS.md, twenty-sixth stop): at
/// 100 experiments `noisy` 0.0330 -> 0.0248 and `llm_noisy` 0.0275 -> 0.0215 (both
/// significant), `nuisance` better, small losses on `llm` and `mixedrosen` (still under two
/// thirds of TPE's regret). In the real loop (`hone bench`, 70 seeds) `noisy` gained as much
/// (0.0314 -> 0.0221, p 0.013) and `llm_noisy` did not move (0.0224 -> 0.0240). On `crashy`
/// local moves are how the search approaches an edge it crashed beyond (its optimum lies
/// there): with the late value there too (a scratch build), regret at 50 rose from 0.0006 to
/// 0.0098 (median of 200 seeds), hence the exception.
const LOCAL_PROBABILITY_LATE: f64 = 0.05;
/// Experiments in the history, less the running and pruned ones (whose values are stand-ins),
/// from which [`LOCAL_PROBABILITY_LATE`] applies.
const LOCAL_UNTIL: usize = 30;
/// Local moves drawn per local proposal; the model's `l(x) / g(x)` picks one.
const LOCAL_CANDIDATES: usize = 8;
/// Fraction of observations that count as good in TPE, from [`GOOD_EARLY_UNTIL`] on (from the
/// start once a configuration proved infeasible).
const GOOD_FRACTION: f64 = 0.25;
/// The fraction below [`GOOD_EARLY_UNTIL`] observations while no configuration proved
/// infeasible: the best tenth (where Optuna's TPE splits), so that the good estimator of a
/// short run sits on its best one to four points rather than on a quarter of the box.
/// Measured with `examples/tune_sampler.rs` on seeds 1-30 and 1000-1059 (bench/RESULTS.md,
/// eighteenth stop): the mean of medians at 20 experiments fell 13% and 9%, at 50 and 100
/// about the same; a tenth throughout was worse at 100. Once something crashed, timed out or
/// violated a constraint (`SamplerGuide::infeasible`) the quarter is kept: the narrow good set
/// hugs the edge of what crashed (`examples/feasible_sampler.rs`, 200 seeds: crashes among the
/// first 50 rose from 5.2 to 6.4 with it).
const GOOD_FRACTION_EARLY: f64 = 0.1;
/// How many observations the model is fitted to before the good set is the best quarter.
const GOOD_EARLY_UNTIL: usize = 40;
// The switch happens while the model is fitted to the whole history (see [`modelled`]).
const _: () = assert!(GOOD_EARLY_UNTIL <= MODEL_CAP);
/// The Parzen estimators' kernel width in unit space, before the shrink with the number of
/// observations.
const BANDWIDTH: f64 = 0.1;
/// Probability mass a categorical kernel spreads uniformly over all options.
const CATEGORICAL_SPREAD: f64 = 0.25;
/// Largest space the last-resort enumeration walks.
const ENUMERATION_LIMIT: u64 = 200_000;
/// The most observations the Parzen model is fitted to (see [`modelled`]).
const MODEL_CAP: usize = 256;
/// Of those, the best ones always in (more than the good quarter of the cap).
const MODEL_BEST: usize = 96;
// `modelled` selects the best of more than MODEL_CAP observations: at least one, and fewer.
const _: () = assert!(MODEL_BEST >= 1 && MODEL_BEST < MODEL_CAP);
/// And the most recent ones.
const MODEL_RECENT: usize = 64;
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
    let mut cache = SamplerCache::new();
    suggest_cached(
        &mut cache, knobs, history, incumbent, minimize, seed, index, guide,
    )
}

/// [`suggest_guided`] with the history's index kept in `cache` across calls: the same answer,
/// at a cost that does not grow with the history when each call's history extends the last
/// one's (see [`SamplerCache`]).
#[allow(clippy::too_many_arguments)]
pub fn suggest_cached(
    cache: &mut SamplerCache,
    knobs: &[Knob],
    history: &[Observation],
    incumbent: &Config,
    minimize: bool,
    seed: u64,
    index: u64,
    guide: &SamplerGuide<'_>,
) -> Option<(Config, Option<usize>)> {
    let mut space = guided_space(cache, knobs, history, incumbent, guide)?;
    let suggested = suggest_in(&space, cache, knobs, history, minimize, seed, index, guide);
    // The index's sets of what was tried, lent to the space, go back.
    cache.history.tried = std::mem::take(&mut space.tried);
    cache.tried_prints = std::mem::take(&mut space.tried_prints);
    suggested
}

/// [`suggest_cached`] in the space `guided_space` made (what was tried lent by `cache`).
#[allow(clippy::too_many_arguments)]
fn suggest_in(
    space: &Space,
    cache: &SamplerCache,
    knobs: &[Knob],
    history: &[Observation],
    minimize: bool,
    seed: u64,
    index: u64,
    guide: &SamplerGuide<'_>,
) -> Option<(Config, Option<usize>)> {
    for (i, c) in guide.candidates.iter().enumerate() {
        if let Some(config) = space.candidate(c) {
            return Some((config, Some(i)));
        }
    }
    let found = |c: Option<Config>| c.map(|c| (c, None));
    let mut rng = Rng::new(seed, index);
    // Feasibility learned from crashes: candidates it does not admit are drawn again. Without
    // infeasible configurations it admits everything and draws nothing from `rng`.
    let feasibility = Feasibility::fit(space, history, cache, guide, &mut rng);
    let admit = |c: Option<Config>| match &feasibility {
        Some(f) => c.filter(|c| f.admits(space, c)),
        None => c,
    };
    // A crash ends the design: the model-based stage, steered by the feasibility model, takes
    // over (the rest of the design would crash as often as the box does).
    if history.len() <= initial_design_size(space.dims.len()) && feasibility.is_none() {
        if let Some(c) = design_point(space, history, seed, index, &admit) {
            return found(Some(c));
        }
    }
    let picked = modelled(history, minimize);
    let sample: Option<Vec<Observation>> = picked
        .as_ref()
        .map(|picked| picked.iter().map(|&i| history[i].clone()).collect());
    let fit = sample.as_deref().unwrap_or(history);
    if guide.mode.is_none() {
        let keys = &cache.history.keys;
        let measured = measured_mask(history.len(), picked.as_deref(), guide.stand_ins);
        let fit_measured = fit
            .iter()
            .enumerate()
            .filter(|(i, _)| measured.get(*i).copied().unwrap_or(true))
            .map(|(_, o)| o);
        let refined = refine::step(
            space,
            knobs,
            fit_measured,
            keys,
            guide.pending,
            minimize,
            index,
        );
        if let Some(c) = admit(refined) {
            return found(Some(c));
        }
    }
    let model = Model::fit(space, fit, minimize, !guide.infeasible.is_empty());
    let from = space.incumbent_point();
    let movable = space.movable(guide.focus);
    let local = LocalMoves {
        space,
        from: &from,
        movable: &movable,
        step_scale: guide.step_scale.unwrap_or(1.0).clamp(0.05, 20.0),
    };
    // Running and pruned experiments' stand-in values are not measurements of the incumbent's
    // rivals: they do not count towards the switch (a pruned run's partial value never
    // competes with the incumbent).
    let measured_count = history.len().saturating_sub(guide.stand_ins.len());
    let local_probability = local_probability(measured_count, !guide.infeasible.is_empty());
    for _ in 0..MODEL_ATTEMPTS {
        let next = match (guide.mode, &model) {
            (Some(Mode::Explore), _) => space.fresh(&space.random_point(&mut rng)),
            (Some(Mode::Exploit), _) => space.fresh(&local.draw(&mut rng)),
            (None, Some(m)) if rng.unit() >= local_probability => m.propose(space, &mut rng),
            (None, Some(m)) => local.best(m, &mut rng),
            _ => space.fresh(&local.draw(&mut rng)),
        };
        let next = admit(next);
        if next.is_some() {
            return found(next);
        }
    }
    for _ in 0..RANDOM_ATTEMPTS {
        let point = space.random_point(&mut rng);
        if let Some(c) = admit(space.fresh(&point)) {
            return found(Some(c));
        }
    }
    found(untried_neighbour(space, &mut rng).or_else(|| untried_by_enumeration(space, &mut rng)))
}

/// The space of a suggestion with what was tried (the history, indexed in `cache`, the
/// incumbent, `guide.avoid`) and the frozen knobs; `None` when no knob is free.
fn guided_space(
    cache: &mut SamplerCache,
    knobs: &[Knob],
    history: &[Observation],
    incumbent: &Config,
    guide: &SamplerGuide<'_>,
) -> Option<Space> {
    let mut space = Space::new(knobs, &[], incumbent);
    if space.dims.is_empty() {
        return None;
    }
    let base_key = space.key(&space.base);
    let locate = !guide.infeasible.is_empty();
    cache.sync(&space, history, guide.infeasible, locate);
    // Lent, not copied (see `suggest_cached`); the few more that count as tried kept apart.
    space.tried = std::mem::take(&mut cache.history.tried);
    space.tried_prints = std::mem::take(&mut cache.tried_prints);
    space.also_tried.push(base_key);
    for c in guide.avoid {
        let key = space.key(c);
        space.also_tried.push(key);
    }
    space.frozen = guide
        .frozen
        .iter()
        .filter(|f| space.dims.iter().any(|d| &d.name == *f))
        .cloned()
        .collect();
    Some(space)
}

/// Which observations of the model's sample (`picked`: their indices in the history, `None`:
/// the whole history of `len`) have a measured value, not a stand-in (`stand_ins`: indices
/// into the history, in any order); empty when `stand_ins` is.
fn measured_mask(len: usize, picked: Option<&[usize]>, stand_ins: &[u32]) -> Vec<bool> {
    if stand_ins.is_empty() {
        return Vec::new();
    }
    let mut measured = vec![true; len];
    for &i in stand_ins {
        if let Some(m) = measured.get_mut(i as usize) {
            *m = false;
        }
    }
    match picked {
        Some(picked) => picked.iter().map(|&i| measured[i]).collect(),
        None => measured,
    }
}

/// The indices of the observations the model is fitted to when there are more than
/// [`MODEL_CAP`] (`None`: all of them): the [`MODEL_BEST`] best (failures count as the worst),
/// the [`MODEL_RECENT`] most recent, and an even spread of the rest up to the cap, in the
/// order of the run. The good estimator so sees the run's best quarter of the sample exactly;
/// what it drops is the middle of a long history, which the spread still represents.
fn modelled(history: &[Observation], minimize: bool) -> Option<Vec<usize>> {
    let n = history.len();
    if n <= MODEL_CAP {
        return None;
    }
    let score = |o: &Observation| match o.objective {
        Some(v) if v.is_finite() => {
            if minimize {
                v
            } else {
                -v
            }
        }
        _ => f64::INFINITY,
    };
    // The best ones as a set: a selection, not a sort (a total order: ties go to the earlier).
    let mut by_score: Vec<(f64, usize)> = history
        .iter()
        .enumerate()
        .map(|(i, o)| (score(o), i))
        .collect();
    let best = MODEL_BEST.min(n);
    by_score.select_nth_unstable_by(best - 1, |a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut chosen = vec![false; n];
    for &(_, i) in &by_score[..best] {
        chosen[i] = true;
    }
    for flag in chosen.iter_mut().skip(n - MODEL_RECENT) {
        *flag = true;
    }
    let rest: Vec<usize> = (0..n).filter(|&i| !chosen[i]).collect();
    let room = MODEL_CAP.saturating_sub(n - rest.len());
    for k in 0..room.min(rest.len()) {
        chosen[rest[k * rest.len() / room]] = true;
    }
    Some((0..n).filter(|&i| chosen[i]).collect())
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
mod tests;
