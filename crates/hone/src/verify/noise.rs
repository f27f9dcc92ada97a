//! Noise: how much a measurement moves when nothing changed, and the keep rule that accounts
//! for it. `threshold = max(min_delta, noise_k × σ)`; a candidate is kept only when the mean of
//! all its runs beats the best by more than the threshold.
//!
//! σ comes from repeated runs of the same code: the baseline's `baseline_repeats`, every
//! confirm run, every re-test of a champion. Each candidate's runs are centred on their own
//! median and the residuals pooled; with enough of them σ is the scaled median absolute
//! deviation (robust to one wild run), with few it is the pooled standard deviation (the MAD of
//! three numbers is mostly luck).
//!
//! The candidates' runs come from code the agent wrote, so no one of them may set the noise of
//! a whole run ([`run_sigma`]): the earlier candidate group with the widest spread is always
//! left out, and σ never falls below the baseline's own (the user's code). A group whose numbers overflow (an infinite mean or spread) carries no
//! information and is skipped; [`unusable`] says why such runs make their experiment a crash.

use super::Direction;
// Every call here passes two values or more (an empty slice would give `NaN`).
use crate::util::{fmt_signed, fmt_value, mean, median};

/// Residuals needed before the MAD is trusted over the pooled standard deviation.
const MAD_MIN_RESIDUALS: usize = 8;
/// Scales a median absolute deviation to a standard deviation for normal noise.
const MAD_TO_SIGMA: f64 = 1.4826;

/// An earlier candidate's group of runs whose variance is this many times the median
/// variance of all groups (σ four times the typical one) says more about that candidate than
/// about the noise: it is left out of σ. Honest pairs of runs pass with 99% probability.
const OUTLIER_VARIANCE: f64 = 16.0;

/// The noise settings of `[verify]`.
#[derive(Clone, Debug, PartialEq)]
pub struct NoisePolicy {
    pub direction: Direction,
    pub min_delta: f64,
    pub noise_k: f64,
    /// Extra runs of a candidate that passes on its first run.
    pub confirm: u64,
    /// Keep a candidate inside the noise band that deletes net lines.
    pub prefer_simpler: bool,
}

/// Estimates σ from groups of repeated measurements of the same code (groups with one run
/// carry no information and are skipped). `None` when no group has two runs.
pub fn estimate_sigma<'a>(groups: impl IntoIterator<Item = &'a [f64]>) -> Option<f64> {
    let mut residuals = Vec::new();
    let mut sum_sq = 0.0;
    let mut dof = 0usize;
    for g in groups {
        let runs: Vec<f64> = g.iter().copied().filter(|v| v.is_finite()).collect();
        if runs.len() < 2 {
            continue;
        }
        let mean = runs.iter().sum::<f64>() / runs.len() as f64;
        let group_sq = runs.iter().map(|v| (v - mean).powi(2)).sum::<f64>();
        if !group_sq.is_finite() {
            // Values so far apart that their spread overflows say nothing about the noise.
            continue;
        }
        sum_sq += group_sq;
        dof += runs.len() - 1;
        let med = median(&runs);
        // Deviations from a group's own centre understate the noise (for a pair, each is half
        // the gap); the usual n/(n-1) correction brings them back to the scale of σ.
        let scale = (runs.len() as f64 / (runs.len() - 1) as f64).sqrt();
        let mut r: Vec<f64> = runs.iter().map(|v| scale * (v - med).abs()).collect();
        // The median run of an odd group sits at zero by construction: drop one zero so the
        // residuals count the group's degrees of freedom, not its size.
        if runs.len() % 2 == 1 {
            if let Some(i) = r.iter().position(|x| *x == 0.0) {
                r.swap_remove(i);
            }
        }
        residuals.extend(r);
    }
    if dof == 0 {
        return None;
    }
    if residuals.len() >= MAD_MIN_RESIDUALS {
        Some(MAD_TO_SIGMA * median(&residuals))
    } else {
        Some((sum_sq / dof as f64).sqrt())
    }
}

/// The sample variance of a group's finite runs; `None` with fewer than two or when it
/// overflows.
fn spread(group: &[f64]) -> Option<f64> {
    let runs: Vec<f64> = group.iter().copied().filter(|v| v.is_finite()).collect();
    if runs.len() < 2 {
        return None;
    }
    let m = mean(&runs);
    let var = runs.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (runs.len() - 1) as f64;
    (m.is_finite() && var.is_finite()).then_some(var)
}

/// σ for a run's decisions (see the module docs). `trusted`: groups of repeated runs of the
/// user's own code (the baseline's repeats); `untrusted`: groups of runs of earlier candidates'
/// code (confirm runs, re-tests of a champion); `own`: the runs of the candidate being decided,
/// which always count (a candidate whose own runs scatter only raises its own threshold).
///
/// The untrusted group with the widest spread is always left out, so no one candidate widens
/// the noise band for every later one (not even when it is the only one, with
/// `baseline_repeats = 1`); so is, with three groups or more, every untrusted group whose
/// variance is `OUTLIER_VARIANCE` times the median group's, so that a few candidates cannot
/// either while noise that many candidates show still raises σ. The result is never below
/// the trusted groups' σ. `None` when no group is left with two runs.
pub fn run_sigma<'a>(
    trusted: impl IntoIterator<Item = &'a [f64]>,
    untrusted: impl IntoIterator<Item = &'a [f64]>,
    own: Option<&'a [f64]>,
) -> Option<f64> {
    let trusted: Vec<&[f64]> = trusted
        .into_iter()
        .filter(|g| spread(g).is_some())
        .collect();
    let mut untrusted: Vec<(&[f64], f64)> = untrusted
        .into_iter()
        .filter_map(|g| spread(g).map(|s| (g, s)))
        .collect();
    let variances: Vec<f64> = trusted
        .iter()
        .filter_map(|g| spread(g))
        .chain(untrusted.iter().map(|(_, v)| *v))
        .collect();
    let widest = untrusted
        .iter()
        .enumerate()
        .max_by(|a, b| a.1 .1.total_cmp(&b.1 .1))
        .map(|(i, _)| i);
    if let Some(i) = widest {
        untrusted.remove(i);
    }
    // (Not when the typical group has no spread at all, as a coarse metric's often has: every
    // group with any would be left out.)
    let typical = median(&variances);
    if variances.len() >= 3 && typical > 0.0 {
        untrusted.retain(|(_, v)| *v <= OUTLIER_VARIANCE * typical);
    }
    let all = estimate_sigma(
        trusted
            .iter()
            .copied()
            .chain(untrusted.iter().map(|(g, _)| *g))
            .chain(own),
    );
    let floor = estimate_sigma(trusted.iter().copied());
    match (all, floor) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// Why the runs of one experiment cannot be judged, if they cannot: a value that is not a
/// finite number, a mean that overflows, or runs so far apart that their spread overflows.
/// Such an experiment is a crash; none of its numbers may reach a decision, a plot or a
/// summary.
pub fn unusable(metric: &str, runs: &[f64]) -> Option<String> {
    if let Some((k, v)) = runs.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Some(format!("`{metric}` is {v} in run {}", k + 1));
    }
    if runs.is_empty() {
        return None;
    }
    if !mean(runs).is_finite() {
        return Some(format!(
            "the mean of its {} runs of `{metric}` overflows (values near ±1.8e308): print a number a float can average",
            runs.len()
        ));
    }
    if runs.len() > 1 && spread(runs).is_none() {
        return Some(format!(
            "its {} runs of `{metric}` are so far apart that their spread overflows: print a number a float can average",
            runs.len()
        ));
    }
    None
}

/// The verdict on a candidate, with everything needed to explain it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Judgement {
    pub keep: bool,
    /// Kept inside the noise band because it deletes net lines.
    pub simplification: bool,
    /// Improvement of the candidate's mean over the best (positive = better).
    pub delta: f64,
    pub threshold: f64,
    pub sigma: Option<f64>,
    /// The candidate's runs that were used.
    pub runs: Vec<f64>,
    pub candidate_mean: f64,
    pub best: f64,
    pub reason: String,
}

impl NoisePolicy {
    /// `max(min_delta, noise_k × σ)`.
    pub fn threshold(&self, sigma: Option<f64>) -> f64 {
        let noise = sigma.map(|s| self.noise_k * s).unwrap_or(0.0);
        self.min_delta.max(noise).max(0.0)
    }

    /// Does a first run look good enough to spend confirm runs on (or to keep, with
    /// `confirm = 0`)? Inside the noise band counts too when simpler code would be kept.
    pub fn passes_first(&self, first: f64, best: f64, sigma: Option<f64>, net_lines: i64) -> bool {
        let d = self.direction.improvement(first, best);
        let t = self.threshold(sigma);
        first.is_finite() && (d > t || (self.prefer_simpler && net_lines < 0 && d >= -t))
    }

    /// Judges a candidate from all its runs against the best's recorded value. `net_lines` is
    /// lines added minus lines deleted.
    pub fn judge(&self, runs: &[f64], best: f64, sigma: Option<f64>, net_lines: i64) -> Judgement {
        let finite: Vec<f64> = runs.iter().copied().filter(|v| v.is_finite()).collect();
        let m = if finite.len() == runs.len() && !runs.is_empty() {
            mean(&finite)
        } else {
            f64::NAN
        };
        let delta = self.direction.improvement(m, best);
        let threshold = self.threshold(sigma);
        let better = m.is_finite() && delta > threshold;
        let simplification =
            !better && self.prefer_simpler && m.is_finite() && net_lines < 0 && delta >= -threshold;
        let sigma_txt = sigma.map_or_else(|| "unknown".into(), fmt_value);
        let basis = format!(
            "mean of {} run{} {} vs best {}: delta {}, threshold {} (min_delta {}, {} x sigma {sigma_txt})",
            runs.len(),
            if runs.len() == 1 { "" } else { "s" },
            fmt_value(m),
            fmt_value(best),
            fmt_signed(delta),
            fmt_value(threshold),
            self.min_delta,
            self.noise_k
        );
        let reason = if better {
            format!("improved: {basis}")
        } else if simplification {
            format!(
                "simplification: within the noise band and {} net lines: {basis}",
                net_lines
            )
        } else if delta > 0.0 {
            // The bar it did not clear: the noise measured, or min_delta alone.
            let by_noise = sigma.is_some_and(|s| self.noise_k * s > self.min_delta);
            let what = if by_noise {
                "within noise"
            } else {
                "below min_delta"
            };
            format!("{what}: {basis}")
        } else {
            format!("not better: {basis}")
        };
        Judgement {
            keep: better || simplification,
            simplification,
            delta,
            threshold,
            sigma,
            runs: runs.to_vec(),
            candidate_mean: m,
            best,
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn policy() -> NoisePolicy {
        NoisePolicy {
            direction: Direction::Minimize,
            min_delta: 0.0,
            noise_k: 2.0,
            confirm: 1,
            prefer_simpler: false,
        }
    }

    #[test]
    fn sigma_from_repeats() {
        assert_eq!(estimate_sigma([&[1.0][..]]), None);
        let s = estimate_sigma([&[1.0, 3.0][..]]).unwrap();
        assert!(
            (s - 2f64.sqrt()).abs() < 1e-12,
            "pooled sd of 1,3 is sqrt(2): {s}"
        );
        // One wild run among many does not blow the robust estimate up.
        let calm: Vec<f64> = (0..12)
            .map(|i| 10.0 + if i % 2 == 0 { 0.1 } else { -0.1 })
            .collect();
        let mut wild = calm.clone();
        wild[3] = 50.0;
        let a = estimate_sigma([calm.as_slice()]).unwrap();
        let b = estimate_sigma([wild.as_slice()]).unwrap();
        assert!(b < 2.0 * a + 1e-9, "MAD is robust: {a} vs {b}");
    }

    #[test]
    fn sigma_is_unbiased_enough_from_many_pairs() {
        // Pairs are what confirm = 1 produces; the robust estimate must not shrink with them.
        let mut normal = normals(0x1234_5678);
        let mut estimates = Vec::new();
        for _ in 0..200 {
            let groups: Vec<Vec<f64>> = (0..20).map(|_| vec![normal(), normal()]).collect();
            estimates.push(estimate_sigma(groups.iter().map(Vec::as_slice)).unwrap());
        }
        let m = mean(&estimates);
        assert!(
            (0.85..1.15).contains(&m),
            "mean sigma estimate {m} for true sigma 1"
        );
    }

    /// Standard normal draws from a fixed seed (Box-Muller).
    fn normals(seed: u64) -> impl FnMut() -> f64 {
        let mut state = seed;
        move || {
            let mut u = || {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((state >> 11) as f64 / (1u64 << 53) as f64).max(1e-12)
            };
            let (a, b) = (u(), u());
            (-2.0 * a.ln()).sqrt() * (2.0 * std::f64::consts::PI * b).cos()
        }
    }

    #[test]
    fn one_candidate_cannot_set_the_noise_of_the_run() {
        // The attack: baseline_repeats = 2, confirm = 1, one candidate prints 0 then 1000.
        let baseline = [10.0, 10.2];
        let poison = [0.0, 1000.0];
        let pooled = estimate_sigma([&baseline[..], &poison[..]]).unwrap();
        assert!(pooled > 100.0, "plain pooling is poisoned: {pooled}");
        let s = run_sigma([&baseline[..]], [&poison[..]], None).unwrap();
        let own = estimate_sigma([&baseline[..]]).unwrap();
        assert!((s - own).abs() < 1e-12, "sigma {s}, baseline's {own}");
        // With honest candidates around it, the poisoned group is still the one left out.
        let honest = [[10.1, 10.3], [9.9, 10.0], [10.4, 10.2]];
        let s = sigma_among(&baseline, &honest, &[poison]);
        assert!(s < 1.0, "sigma {s}");
    }

    /// `run_sigma` of the baseline's runs and the candidates `honest`, then `poisoned`.
    fn sigma_among(baseline: &[f64], honest: &[[f64; 2]], poisoned: &[[f64; 2]]) -> f64 {
        run_sigma(
            [baseline],
            honest.iter().chain(poisoned).map(|g| &g[..]),
            None,
        )
        .unwrap()
    }

    #[test]
    fn a_few_candidates_cannot_set_the_noise_of_the_run_either() {
        let baseline = [10.0, 10.2];
        let honest = [[10.1, 10.3], [9.9, 10.0], [10.4, 10.2], [10.0, 10.3]];
        let poison = [[0.0, 1000.0], [0.0, 999.0], [5.0, 700.0]];
        let s = sigma_among(&baseline, &honest, &poison);
        assert!(s < 1.0, "three poisoned groups among seven: sigma {s}");
    }

    #[test]
    fn noise_that_many_candidates_show_still_raises_sigma() {
        let baseline = [10.0, 10.1];
        let wide: Vec<[f64; 2]> = (0..10)
            .map(|i| [10.0 + i as f64, 12.0 + i as f64])
            .collect();
        let s = run_sigma([&baseline[..]], wide.iter().map(|g| &g[..]), None).unwrap();
        assert!(
            s > 1.0,
            "ten candidates with a spread of 2 raise sigma: {s}"
        );
        // With no baseline repeats, one earlier candidate alone sets nothing; two do, and a
        // candidate's own runs always count for its own decision.
        assert_eq!(run_sigma([], [&[0.0, 1000.0][..]], None), None);
        assert!(run_sigma([], [&[1.0, 3.0][..], &[2.0, 2.5][..]], None).is_some());
        let own = run_sigma([], [&[0.0, 1000.0][..]], Some(&[1.0, 3.0][..])).unwrap();
        assert!((own - 2f64.sqrt()).abs() < 1e-12, "{own}");
    }

    #[test]
    fn run_sigma_stays_close_to_the_truth_with_honest_pairs() {
        let mut normal = normals(0x9e37_79b9);
        let mut estimates = Vec::new();
        for _ in 0..200 {
            let base = vec![normal(), normal()];
            let groups: Vec<Vec<f64>> = (0..20).map(|_| vec![normal(), normal()]).collect();
            estimates.push(
                run_sigma([base.as_slice()], groups.iter().map(Vec::as_slice), None).unwrap(),
            );
        }
        let m = mean(&estimates);
        assert!((0.85..1.2).contains(&m), "mean sigma {m} for true sigma 1");
    }

    #[test]
    fn overflowing_runs_are_unusable_and_say_nothing_about_noise() {
        let huge = [1.79e308, -1.79e308];
        assert_eq!(estimate_sigma([&huge[..]]), None);
        let s = run_sigma([&[10.0, 10.2][..]], [&huge[..]], Some(&huge[..])).unwrap();
        assert!(s.is_finite() && s < 1.0, "{s}");
        assert!(unusable("score", &huge)
            .unwrap()
            .contains("spread overflows"));
        assert!(unusable("score", &[1.79e308, 1.79e308])
            .unwrap()
            .contains("mean"));
        assert!(unusable("score", &[1.0, f64::NAN]).unwrap().contains("NaN"));
        assert_eq!(unusable("score", &[1.0, 2.0]), None);
        assert_eq!(unusable("score", &[1.79e308]), None);
    }

    #[test]
    fn threshold_is_the_larger_of_min_delta_and_k_sigma() {
        let mut p = policy();
        assert_eq!(p.threshold(Some(0.5)), 1.0);
        p.min_delta = 2.0;
        assert_eq!(p.threshold(Some(0.5)), 2.0);
        assert_eq!(p.threshold(None), 2.0);
    }

    #[test]
    fn noise_is_not_an_improvement() {
        let p = policy();
        let j = p.judge(&[9.5], 10.0, Some(0.4), 0);
        assert!(!j.keep, "{j:?}");
        assert!(j.reason.starts_with("within noise"), "{}", j.reason);
        // Without a measured noise, the bar is min_delta's: said so.
        let p = NoisePolicy {
            min_delta: 1.0,
            ..policy()
        };
        let j = p.judge(&[9.5], 10.0, None, 0);
        assert!(!j.keep, "{j:?}");
        assert!(j.reason.starts_with("below min_delta"), "{}", j.reason);
        // A value too small for six decimals is written whole.
        let p = NoisePolicy {
            min_delta: 0.0,
            ..policy()
        };
        let j = p.judge(&[3.0e-9], 4.5e-9, None, 0);
        assert!(
            j.reason
                .contains("3.0000e-9 vs best 4.5000e-9: delta +1.5000e-9"),
            "{}",
            j.reason
        );
        assert!(p.judge(&[9.0], 10.0, Some(0.4), 0).keep);
    }

    #[test]
    fn simplification_inside_the_band() {
        let mut p = policy();
        p.prefer_simpler = true;
        let j = p.judge(&[10.2], 10.0, Some(0.4), -5);
        assert!(j.keep && j.simplification, "{j:?}");
        assert!(!p.judge(&[10.2], 10.0, Some(0.4), 3).keep, "adds lines");
        assert!(
            !p.judge(&[11.0], 10.0, Some(0.4), -5).keep,
            "outside the band, worse"
        );
        assert!(p.passes_first(10.2, 10.0, Some(0.4), -5));
    }

    #[test]
    fn a_failed_run_fails_the_candidate() {
        let p = policy();
        assert!(!p.judge(&[1.0, f64::NAN], 10.0, Some(0.1), 0).keep);
        assert!(!p.judge(&[], 10.0, Some(0.1), 0).keep);
    }

    proptest! {
        #[test]
        fn never_keeps_when_the_mean_fails(runs in prop::collection::vec(-100.0f64..100.0, 1..6),
                                           best in -100.0f64..100.0, sigma in 0.0f64..10.0,
                                           min_delta in 0.0f64..5.0) {
            let mut p = policy();
            p.min_delta = min_delta;
            let j = p.judge(&runs, best, Some(sigma), 0);
            let m = mean(&runs);
            prop_assert_eq!(j.keep, best - m > p.threshold(Some(sigma)));
        }

        #[test]
        fn monotone_in_delta(first in -100.0f64..100.0, better_by in 0.0f64..50.0,
                             best in -100.0f64..100.0, sigma in 0.0f64..10.0) {
            let p = policy();
            let worse = p.judge(&[first], best, Some(sigma), 0);
            let better = p.judge(&[first - better_by], best, Some(sigma), 0);
            prop_assert!(!worse.keep || better.keep);
        }

        #[test]
        fn invariant_to_the_order_of_repeats(mut runs in prop::collection::vec(-100.0f64..100.0, 1..6),
                                             best in -100.0f64..100.0, sigma in 0.0f64..10.0) {
            let p = policy();
            let a = p.judge(&runs, best, Some(sigma), 0).keep;
            runs.reverse();
            let b = p.judge(&runs, best, Some(sigma), 0).keep;
            prop_assert_eq!(a, b);
            let s1 = estimate_sigma([runs.as_slice()]);
            runs.rotate_left(1);
            let s2 = estimate_sigma([runs.as_slice()]);
            match (s1, s2) {
                (Some(x), Some(y)) => prop_assert!((x - y).abs() < 1e-9),
                (x, y) => prop_assert_eq!(x, y),
            }
        }
    }
}
