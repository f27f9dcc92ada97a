//! The decision rule: keep a candidate only when it beats the best by more than the threshold.
//! One function, unit-tested; everything else asks it.

use crate::spec::Direction;

/// Keep or not, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub keep: bool,
    /// Improvement over the best (positive = better, whatever the direction).
    pub delta: f64,
    /// What the improvement had to exceed.
    pub threshold: f64,
    pub reason: String,
}

/// Decides on a measured candidate against the current best.
pub fn decide(candidate: f64, best: f64, direction: Direction, min_delta: f64) -> Decision {
    let delta = direction.improvement(candidate, best);
    let threshold = min_delta.max(0.0);
    let keep = candidate.is_finite() && delta > threshold;
    let reason = if keep {
        format!("improved by {delta:.6} > threshold {threshold}")
    } else if delta > 0.0 {
        format!("improved by {delta:.6}, not more than threshold {threshold}")
    } else {
        format!("not better than the best ({best}): change {:+.6}", -delta)
    };
    Decision {
        keep,
        delta,
        threshold,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_beyond_threshold() {
        assert!(decide(0.9, 1.0, Direction::Minimize, 0.05).keep);
        assert!(!decide(0.96, 1.0, Direction::Minimize, 0.05).keep);
        assert!(
            !decide(1.0, 1.0, Direction::Minimize, 0.0).keep,
            "a tie is not a keep"
        );
        assert!(!decide(1.1, 1.0, Direction::Minimize, 0.0).keep);
        assert!(decide(1.1, 1.0, Direction::Maximize, 0.0).keep);
        assert!(!decide(0.9, 1.0, Direction::Maximize, 0.0).keep);
        assert!(!decide(f64::NAN, 1.0, Direction::Minimize, 0.0).keep);
        assert!(!decide(f64::NEG_INFINITY, 1.0, Direction::Minimize, 0.0).keep);
        let d = decide(0.9, 1.0, Direction::Minimize, 0.05);
        assert!((d.delta - 0.1).abs() < 1e-12);
        assert_eq!(d.threshold, 0.05);
    }
}
