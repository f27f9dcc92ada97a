//! The sampler's refinement step: once [`START`] experiments have a value, one proposal in
//! [`EVERY`] is the knobs' response surface's (`knobs::surface`): the minimum of a quadratic
//! model fitted to the best points, inside a trust region around the incumbent; and one such
//! step in [`SWAP_EVERY`] first tries the incumbent with one choice changed. The Parzen model
//! (TPE) finds the right basin early; a smooth surface near the optimum is where a quadratic
//! model gains on it (GP samplers win late for the same reason; see bench/RESULTS.md, "Search
//! that wins").
//!
//! The step keeps no state, so that the same history gives the same suggestion in every
//! process (a resumed run, a parallel slot): the trust region follows from the history
//! alone. It is [`RADIUS`] of each range just after the incumbent was measured and halves with
//! every step taken since without a better one, starting again at [`RADIUS`] after
//! [`CYCLE`] halvings (the smallest regions only round back onto measured integer points).
//! Where the incumbent is not among the last [`LOOK_BACK`] experiments the steps are counted
//! by the experiment's number instead.

use std::collections::HashSet;

use super::super::surface::{self, RADIUS, SWAP_EVERY};
use super::super::{Config, Knob};
use super::space::{Kind, Space};
use super::Observation;

/// One proposal in this many (by the experiment's number) is a refinement step.
pub(super) const EVERY: u64 = 3;
/// The measured experiments (with a value) the model needs before the first step.
pub(super) const START: usize = 10;
/// Halvings of the trust region before it starts again at [`RADIUS`].
const CYCLE: u64 = 5;
/// How far back the incumbent is looked for.
const LOOK_BACK: usize = 512;

/// The refinement step's candidate for the experiment `index`: `None` when `index` is not one
/// of its steps, the model has too few points or nothing untried to offer. `fit` is what the
/// model is fitted to (a bounded sample of the history on a long run, the observations with a
/// stand-in value left out: `SamplerGuide::stand_ins`); `history`: the digests (`Space::key`)
/// of the history's configurations in the order of the run; `pending`: configurations still
/// being measured (their values are stand-ins too, left out of the fit). The incumbent is
/// `space.base` (knobs missing from the one given take their current value).
pub(super) fn step<'o>(
    space: &Space,
    knobs: &[Knob],
    fit: impl IntoIterator<Item = &'o Observation>,
    history: &[u64],
    pending: &[Config],
    minimize: bool,
    index: u64,
) -> Option<Config> {
    if index % EVERY != 0 {
        return None;
    }
    let sign = if minimize { 1.0 } else { -1.0 };
    let running: HashSet<u64> = pending.iter().map(|c| space.key(c)).collect();
    let measured: Vec<(Config, f64)> = fit
        .into_iter()
        .filter(|o| running.is_empty() || !running.contains(&space.key(&o.config)))
        .filter_map(|o| {
            let y = o.objective.filter(|y| y.is_finite())?;
            let mut c = o.config.clone();
            // A frozen number keeps the incumbent's value: the model does not move it (one that
            // never moves is left out of the fit), so it does not shorten the others' step. A
            // frozen choice is left as it is: the fit takes the incumbent's choices alone.
            for d in space.dims.iter().filter(|d| space.frozen.contains(&d.name)) {
                if let (false, Some(v)) = (matches!(d.kind, Kind::Cat(_)), space.base.get(&d.name))
                {
                    c.insert(d.name.clone(), v.clone());
                }
            }
            Some((c, sign * y))
        })
        .collect();
    if measured.len() < START {
        return None;
    }
    let incumbent = &space.base;
    // An incumbent further back than the look-back (or not in the history at all): the steps
    // are counted by the experiment's number, so that the region still cycles.
    let steps = match since_incumbent(space, history) {
        Some(since) => since as u64 / EVERY,
        None => index / EVERY,
    };
    if steps % SWAP_EVERY == SWAP_EVERY - 1 {
        // Tried, out of the domains, frozen or avoided: what the space would not take.
        let taken = |c: &Config| space.candidate(c).is_none();
        if let Some(c) = surface::swap(knobs, &measured, taken, incumbent) {
            if let Some(c) = space.candidate(&c) {
                return Some(c);
            }
        }
    }
    let radius = region(steps);
    // A region so small that the step rounds onto a measured point: the first one instead.
    let first = (radius < RADIUS).then_some(RADIUS);
    for r in std::iter::once(radius).chain(first) {
        let c = surface::step(knobs, &measured, incumbent, r)?;
        if let Some(c) = space.candidate(&c) {
            return Some(c);
        }
    }
    None
}

/// The trust region after `steps` refinement steps without a better incumbent.
fn region(steps: u64) -> f64 {
    RADIUS * 0.5f64.powi((steps % CYCLE) as i32)
}

/// How many experiments of `history` (configuration digests) came after the incumbent's
/// (`space.base`); `None` when it is not among the last [`LOOK_BACK`].
fn since_incumbent(space: &Space, history: &[u64]) -> Option<usize> {
    let key = space.key(&space.base);
    history.iter().rev().take(LOOK_BACK).position(|k| *k == key)
}

#[cfg(test)]
mod tests {
    use super::super::tests::knobs_of;
    use super::super::{suggest, suggest_guided, SamplerGuide};
    use super::*;
    use crate::propose::guidance::Mode;
    use crate::propose::knobs::Knob;
    use crate::propose::knobs::{config_of, unit_coords, KnobValue};

    const BOWL: &str = "A = -0.8  # hone: -1.0..1.0\nB = 0.7  # hone: -1.0..1.0\n";

    fn at(a: f64, b: f64) -> Config {
        let mut c = config_of(&knobs_of(BOWL));
        c.insert("A", KnobValue::Float(a));
        c.insert("B", KnobValue::Float(b));
        c
    }

    fn bowl(c: &Config) -> f64 {
        let v = |k: &str| c.get(k).and_then(KnobValue::as_f64).unwrap_or(f64::NAN);
        (v("A") - 0.3).powi(2) + 2.0 * (v("B") + 0.2).powi(2)
    }

    /// `points` measured on the bowl, in order, and the last of them (the incumbent: the
    /// sampler takes the one the engine gives, best or not).
    fn measured(points: &[(f64, f64)]) -> (Vec<Observation>, Config) {
        let history: Vec<Observation> = points
            .iter()
            .map(|&(a, b)| Observation {
                config: at(a, b),
                objective: Some(bowl(&at(a, b))),
            })
            .collect();
        let last = history.last().map(|o| o.config.clone()).expect("a point");
        (history, last)
    }

    /// Twelve points spread over the box; the incumbent, (0.0, 0.1), measured last.
    fn spread() -> Vec<(f64, f64)> {
        let mut p: Vec<(f64, f64)> = (0..11)
            .map(|i| {
                let a = -0.9 + 0.17 * f64::from(i);
                let b = 0.8 - 0.15 * f64::from((i * 7) % 11);
                (a, b)
            })
            .collect();
        p.push((0.0, 0.1));
        p
    }

    /// The history as the surface takes it: (configuration, value).
    fn pairs(history: &[Observation]) -> Vec<(Config, f64)> {
        history
            .iter()
            .map(|o| (o.config.clone(), o.objective.unwrap_or(f64::NAN)))
            .collect()
    }

    /// The largest move from `from` to `to` in unit coordinates.
    fn longest_move(from: &Config, to: &Config) -> f64 {
        let k = knobs_of(BOWL);
        let (f, t) = (unit_coords(&k, from), unit_coords(&k, to));
        f.iter()
            .zip(&t)
            .map(|(x, y)| (x.unwrap_or(0.0) - y.unwrap_or(0.0)).abs())
            .fold(0.0, f64::max)
    }

    #[test]
    fn every_third_proposal_is_the_models_step_inside_the_region() {
        let k = knobs_of(BOWL);
        let (history, best) = measured(&spread());
        let sign_measured = pairs(&history);
        // The incumbent was just measured: the first region, RADIUS.
        let want = surface::step(&k, &sign_measured, &best, RADIUS).expect("a model step");
        let got = suggest(&k, &history, &best, true, 5, 30).expect("a suggestion");
        assert_eq!(got, want);
        assert!(
            bowl(&got) < bowl(&best),
            "{got:?} is no better than {best:?}"
        );
        assert!(longest_move(&best, &got) <= RADIUS + 1e-3, "{got:?}");
        // The other two proposals of three are the Parzen model's or local moves.
        for index in [31, 32] {
            let other = suggest(&k, &history, &best, true, 5, index).expect("a suggestion");
            assert_ne!(other, want, "index {index}");
        }
        // A guide's mode leaves the step out.
        for mode in [Mode::Explore, Mode::Exploit] {
            let guide = SamplerGuide {
                mode: Some(mode),
                ..SamplerGuide::default()
            };
            let (c, _) = suggest_guided(&k, &history, &best, true, 5, 30, &guide).expect("one");
            assert_ne!(c, want, "{mode:?}");
        }
        // Maximising the negated bowl is the same step.
        let negated: Vec<Observation> = history
            .iter()
            .map(|o| Observation {
                config: o.config.clone(),
                objective: o.objective.map(|y| -y),
            })
            .collect();
        assert_eq!(suggest(&k, &negated, &best, false, 5, 30), Some(want));
    }

    #[test]
    fn the_region_halves_with_each_step_taken_since_the_incumbent() {
        let k = knobs_of(BOWL);
        let (mut history, best) = measured(&spread());
        // Three worse experiments after the incumbent: one step taken, the region halved.
        for p in [(0.9, 0.9), (-0.9, -0.9), (0.9, -0.9)] {
            history.push(Observation {
                config: at(p.0, p.1),
                objective: Some(bowl(&at(p.0, p.1))),
            });
        }
        let measured = pairs(&history);
        let want = surface::step(&k, &measured, &best, RADIUS / 2.0).expect("a model step");
        assert_ne!(
            want,
            surface::step(&k, &measured, &best, RADIUS).expect("a step")
        );
        let got = suggest(&k, &history, &best, true, 5, 30).expect("a suggestion");
        assert_eq!(got, want);
        assert!(longest_move(&best, &got) <= RADIUS / 2.0 + 1e-3, "{got:?}");
        assert_eq!(
            region(CYCLE),
            RADIUS,
            "it starts again after {CYCLE} halvings"
        );
    }

    /// The bowl's points with two choices set (`FZ` first, so that a swap would try it
    /// first), six experiments after the incumbent (the third step: steps = 2).
    fn with_choices() -> (Vec<Knob>, Vec<Observation>, Config) {
        let text = format!(
            "FZ = 'a'  # hone: choice ['a', 'b']\n{BOWL}OPT = 'sgd'  # hone: choice ['sgd', 'adam']\n"
        );
        let k = knobs_of(&text);
        let (mut history, mut best) = measured(&spread());
        for i in 0..6 {
            let p = at(0.9 - 0.1 * f64::from(i), 0.9);
            history.push(Observation {
                objective: Some(bowl(&p)),
                config: p,
            });
        }
        for c in history.iter_mut().map(|o| &mut o.config).chain([&mut best]) {
            c.insert("FZ", KnobValue::Str("a".into()));
            c.insert("OPT", KnobValue::Str("sgd".into()));
        }
        (k, history, best)
    }

    fn with(c: &Config, name: &str, v: &str) -> Config {
        let mut c = c.clone();
        c.insert(name, KnobValue::Str(v.into()));
        c
    }

    #[test]
    fn the_third_step_since_the_incumbent_swaps_a_choice_first() {
        let (k, history, best) = with_choices();
        let got = suggest(&k, &history, &best, true, 5, 30).expect("a suggestion");
        assert_eq!(got, with(&best, "FZ", "b"));
        // A frozen choice is not what the swap changes: the next one is.
        let got = step_frozen(&k, &history, &best, &["FZ"]);
        assert_eq!(got, with(&best, "OPT", "adam"));
    }

    #[test]
    fn an_incumbent_out_of_sight_counts_the_steps_by_the_experiments_number() {
        let (k, mut history, best) = with_choices();
        // The incumbent is not in the history (no step since it is known): at experiment 30
        // the count is 30 / 3 = 10, not the third step, so no swap and the first region.
        history.retain(|o| o.config != best);
        let measured = pairs(&history);
        let want = surface::step(&k, &measured, &best, RADIUS).expect("a model step");
        assert_eq!(suggest(&k, &history, &best, true, 5, 30), Some(want));
        // At 24 (8 steps) it is a swap's turn.
        assert_eq!(
            suggest(&k, &history, &best, true, 5, 24),
            Some(with(&best, "FZ", "b"))
        );
    }

    #[test]
    fn knobs_missing_from_the_incumbent_and_running_experiments_do_not_bend_the_step() {
        let k = knobs_of(BOWL);
        let (mut history, best) = measured(&spread());
        let measured = pairs(&history);
        let want = surface::step(&k, &measured, &best, RADIUS).expect("a model step");
        // B missing from the incumbent takes its current value (0.7 in the file).
        let mut partial = best.clone();
        partial.remove("B");
        let mut base = best.clone();
        base.insert("B", KnobValue::Float(0.7));
        let want_partial = surface::step(&k, &measured, &base, RADIUS).expect("a step");
        assert_eq!(
            suggest(&k, &history, &partial, true, 5, 30),
            Some(want_partial)
        );
        // A running experiment next to the incumbent, in the history at a made-up (worst)
        // value: left out of the fit, the step is that of the finished points.
        let running = at(0.05, 0.05);
        history.push(Observation {
            config: running.clone(),
            objective: Some(10.0),
        });
        let pending = [running];
        let guide = SamplerGuide {
            pending: &pending,
            ..SamplerGuide::default()
        };
        let (got, _) = suggest_guided(&k, &history, &best, true, 5, 33, &guide).expect("one");
        assert_eq!(got, want);
    }

    /// The worst value measured in `history` (what a stand-in is given).
    fn worst(history: &[Observation]) -> f64 {
        history
            .iter()
            .filter_map(|o| o.objective)
            .fold(f64::MIN, f64::max)
    }

    /// The suggestion for experiment 30 (a refinement step) under `guide`.
    fn refined(k: &[Knob], history: &[Observation], best: &Config, guide: SamplerGuide) -> Config {
        let (c, _) = suggest_guided(k, history, best, true, 5, 30, &guide).expect("a suggestion");
        c
    }

    /// [`refined`] with `stand_ins` marked.
    fn step_without(
        k: &[Knob],
        history: &[Observation],
        best: &Config,
        stand_ins: &[u32],
    ) -> Config {
        let guide = SamplerGuide {
            stand_ins,
            ..SamplerGuide::default()
        };
        refined(k, history, best, guide)
    }

    /// [`refined`] with `frozen` knobs.
    fn step_frozen(k: &[Knob], history: &[Observation], best: &Config, frozen: &[&str]) -> Config {
        let frozen: Vec<String> = frozen.iter().map(|f| f.to_string()).collect();
        let guide = SamplerGuide {
            frozen: &frozen,
            ..SamplerGuide::default()
        };
        refined(k, history, best, guide)
    }

    #[test]
    fn pruned_experiments_at_a_stand_in_value_do_not_bend_the_step() {
        let k = knobs_of(BOWL);
        let (mut history, best) = measured(&spread());
        let want = surface::step(&k, &pairs(&history), &best, RADIUS).expect("a model step");
        // Two pruned experiments next to the incumbent, at the worst value measured (what
        // `propose::optimizer::observations` gives them): no measurement of theirs.
        let worst = worst(&history);
        for (a, b) in [(0.05, 0.05), (-0.05, 0.12)] {
            history.push(Observation {
                config: at(a, b),
                objective: Some(worst),
            });
        }
        assert_eq!(step_without(&k, &history, &best, &[12, 13]), want);
        // Taken as measured, they bend it.
        let bent = suggest(&k, &history, &best, true, 5, 30).expect("a suggestion");
        assert_eq!(
            bent,
            surface::step(&k, &pairs(&history), &best, RADIUS).expect("a model step")
        );
        assert_ne!(bent, want);
    }

    #[test]
    fn stand_ins_past_the_models_cap_are_found_through_its_sample() {
        let k = knobs_of(BOWL);
        let (finished, best) = measured(&spread());
        let want = surface::step(&k, &pairs(&finished), &best, RADIUS).expect("a model step");
        // 287 pruned runs in a corner first, at the worst value: past the cap (256) the model
        // sees a sample, mostly of them (the ties of the best go to the earliest), and fewer
        // measured points than the surface keeps, so only the mask keeps them out.
        let worst = worst(&finished);
        let mut history: Vec<Observation> = (0..287u32)
            .map(|i| Observation {
                config: at(
                    -1.0 + 0.5 * f64::from(i % 17) / 16.0,
                    -1.0 + 0.5 * f64::from(i / 17) / 17.0,
                ),
                objective: Some(worst),
            })
            .collect();
        history.extend(finished);
        let stand_ins: Vec<u32> = (0..287).collect();
        assert_eq!(step_without(&k, &history, &best, &stand_ins), want);
        let unmasked = suggest(&k, &history, &best, true, 5, 30).expect("a suggestion");
        assert_ne!(unmasked, want);
    }

    #[test]
    fn a_frozen_knob_is_left_out_of_the_fit() {
        let k = knobs_of(BOWL);
        let (history, best) = measured(&spread());
        // B frozen at the incumbent's value: the model over A alone (B at 0.1 everywhere).
        let measured: Vec<(Config, f64)> = history
            .iter()
            .map(|o| {
                let mut c = o.config.clone();
                c.insert("B", KnobValue::Float(0.1));
                (c, o.objective.unwrap_or(f64::NAN))
            })
            .collect();
        let want = surface::step(&k, &measured, &best, RADIUS).expect("a model step");
        assert_eq!(want.get("B"), Some(&KnobValue::Float(0.1)));
        let got = step_frozen(&k, &history, &best, &["B"]);
        assert_eq!(got, want);
        // Not the model over both knobs with B put back afterwards (what the step was before
        // frozen knobs were left out of the fit).
        let both = pairs(&history);
        let mut put_back = surface::step(&k, &both, &best, RADIUS).expect("a model step");
        put_back.insert("B", KnobValue::Float(0.1));
        assert_ne!(got, put_back);
    }

    #[test]
    fn a_frozen_choice_lets_no_other_options_points_into_the_fit() {
        let (k, mut history, best) = with_choices();
        // Three better points on the other option of FZ, after the incumbent (nine since it:
        // the fourth step, a model step in the region halved three times).
        for (a, b, y) in [(0.1, 0.0, -1.0), (-0.1, 0.2, -0.8), (0.05, 0.15, -0.9)] {
            history.push(Observation {
                config: with(&at(a, b), "FZ", "b"),
                objective: Some(y),
            });
            let last = history.last_mut().map(|o| &mut o.config).expect("pushed");
            last.insert("OPT", KnobValue::Str("sgd".into()));
        }
        let radius = region(3);
        // The model of the incumbent's option alone, as without the freeze.
        let own: Vec<(Config, f64)> = pairs(&history)
            .into_iter()
            .filter(|(c, _)| c.get("FZ") == Some(&KnobValue::Str("a".into())))
            .collect();
        let want = surface::step(&k, &own, &best, radius).expect("a model step");
        let free = suggest(&k, &history, &best, true, 5, 30).expect("a suggestion");
        assert_eq!(free, want);
        let got = step_frozen(&k, &history, &best, &["FZ"]);
        assert_eq!(got, want);
        // Not the model with the other option's points taken for the incumbent's (what the
        // freeze did when it set a frozen choice to the incumbent's option before the fit).
        let relabelled: Vec<(Config, f64)> = pairs(&history)
            .into_iter()
            .map(|(c, y)| (with(&c, "FZ", "a"), y))
            .collect();
        let bent = surface::step(&k, &relabelled, &best, radius).expect("a model step");
        assert_ne!(got, bent);
    }

    #[test]
    fn no_step_before_ten_experiments_have_a_value() {
        let k = knobs_of(BOWL);
        let mut points = spread();
        points.drain(..4);
        let (mut history, best) = measured(&points);
        // Crashes do not count towards the ten.
        for i in 0..3 {
            history.push(Observation {
                config: at(-0.5, -0.5 + 0.1 * f64::from(i)),
                objective: None,
            });
        }
        assert!(history.iter().filter(|o| o.objective.is_some()).count() < START);
        let space = Space::new(&k, &history, &best);
        let keys: Vec<u64> = history.iter().map(|o| space.key(&o.config)).collect();
        assert_eq!(step(&space, &k, &history, &keys, &[], true, 30), None);
        // With the ten, the step is there.
        let (full, best) = measured(&spread());
        let space = Space::new(&k, &full, &best);
        let keys: Vec<u64> = full.iter().map(|o| space.key(&o.config)).collect();
        assert!(step(&space, &k, &full, &keys, &[], true, 30).is_some());
    }
}
