//! The small statistics the benchmark reports: median, mean and sample standard deviation,
//! a percentile bootstrap interval for the median, and a paired sign-flip permutation test.
//! Everything that draws uses a seeded generator, so a report is reproducible.

use crate::meta::Rng;

/// The mean and the median (the mean of the two middle values for an even count); `NaN` for
/// no values, which a report shows as no data.
pub use crate::util::{mean, median};

/// The sample standard deviation (n − 1); 0 for fewer than two values.
pub fn sd(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let m = mean(xs);
    (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64).sqrt()
}

/// Resamples drawn by [`bootstrap_median`].
pub const BOOTSTRAP_RESAMPLES: usize = 2000;

/// A 95% percentile-bootstrap interval for the median, from [`BOOTSTRAP_RESAMPLES`]
/// resamples drawn with `seed`. `(NaN, NaN)` for no values.
pub fn bootstrap_median(xs: &[f64], seed: u64) -> (f64, f64) {
    if xs.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let mut rng = Rng::new(seed, 0xB007);
    let mut medians = Vec::with_capacity(BOOTSTRAP_RESAMPLES);
    let mut sample = vec![0.0; xs.len()];
    for _ in 0..BOOTSTRAP_RESAMPLES {
        for s in sample.iter_mut() {
            *s = xs[(rng.next_u64() % xs.len() as u64) as usize];
        }
        medians.push(median(&sample));
    }
    medians.sort_by(f64::total_cmp);
    let at = |q: f64| medians[((q * (medians.len() - 1) as f64).round()) as usize];
    (at(0.025), at(0.975))
}

/// Pairs up to this many are tested exactly (all 2^n sign patterns); more are sampled.
pub const EXACT_UP_TO: usize = 16;
/// Sign patterns drawn when the test is not exact.
pub const PERMUTATIONS: usize = 20_000;

/// Two-sided p-value of a paired sign-flip permutation test of "the mean difference is 0"
/// on the differences `d` (arm − reference, per shared seed). Under the null each
/// difference is as likely negative as positive; the p-value is the share of sign patterns
/// whose |mean| is at least the observed one. 1 when there are no non-zero differences.
pub fn paired_permutation_p(d: &[f64], seed: u64) -> f64 {
    let d: Vec<f64> = d.iter().copied().filter(|x| *x != 0.0).collect();
    if d.is_empty() {
        return 1.0;
    }
    let observed = d.iter().sum::<f64>().abs();
    // A little slack so that patterns equal to the observed one up to rounding count.
    let bar = observed - 1e-12 * observed.max(1.0);
    let n = d.len();
    if n <= EXACT_UP_TO {
        let total = 1u64 << n;
        let mut hits = 0u64;
        for mask in 0..total {
            let s: f64 = d
                .iter()
                .enumerate()
                .map(|(i, x)| if mask >> i & 1 == 1 { -x } else { *x })
                .sum();
            if s.abs() >= bar {
                hits += 1;
            }
        }
        return hits as f64 / total as f64;
    }
    let mut rng = Rng::new(seed, 0x9E41);
    let mut hits = 1u64; // the observed pattern itself
    for _ in 0..PERMUTATIONS {
        let s: f64 = d
            .iter()
            .map(|x| if rng.next_u64() & 1 == 1 { -x } else { *x })
            .sum();
        if s.abs() >= bar {
            hits += 1;
        }
    }
    hits as f64 / (PERMUTATIONS + 1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_mean_and_sd_of_small_samples() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
        assert_eq!(mean(&[1.0, 2.0, 3.0]), 2.0);
        assert!((sd(&[1.0, 2.0, 3.0, 4.0]) - 1.2909944).abs() < 1e-6);
        assert_eq!(sd(&[5.0]), 0.0);
    }

    #[test]
    fn the_bootstrap_interval_contains_the_median_and_is_reproducible() {
        let xs: Vec<f64> = (0..15).map(|i| (i * 7 % 11) as f64).collect();
        let (lo, hi) = bootstrap_median(&xs, 3);
        let m = median(&xs);
        assert!(lo <= m && m <= hi, "{lo} {m} {hi}");
        assert_eq!((lo, hi), bootstrap_median(&xs, 3));
        assert_eq!(bootstrap_median(&[2.0; 5], 1), (2.0, 2.0));
    }

    #[test]
    fn ten_consistent_improvements_are_significant_and_mixed_ones_are_not() {
        // All ten differences negative: only the two all-same-sign patterns reach the
        // observed |sum|, so p = 2 / 1024.
        let better: Vec<f64> = (1..=10).map(|i| -(i as f64) / 10.0).collect();
        let p = paired_permutation_p(&better, 1);
        assert!((p - 2.0 / 1024.0).abs() < 1e-12, "{p}");
        let mixed = [0.1, -0.1, 0.2, -0.2, 0.05, -0.05, 0.3, -0.25];
        assert!(paired_permutation_p(&mixed, 1) > 0.5);
        assert_eq!(paired_permutation_p(&[0.0, 0.0], 1), 1.0);
    }

    #[test]
    fn the_sampled_test_agrees_with_the_exact_one_in_size() {
        let d: Vec<f64> = (0..30)
            .map(|i| if i % 3 == 0 { 0.4 } else { -0.5 })
            .collect();
        // Sum −6 against a null sd of √(10·0.16 + 20·0.25) ≈ 2.57: z ≈ 2.3, p ≈ 0.02.
        let p = paired_permutation_p(&d, 7);
        assert!(0.005 < p && p < 0.05, "{p}");
        let null: Vec<f64> = (0..30)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        assert!(paired_permutation_p(&null, 7) > 0.9);
    }
}
