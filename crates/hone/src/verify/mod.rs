//! Verification: reading metrics from the verifier's output, constraints, and decisions.
//! It sits below the spec (which stores its parsed constraints and metric regex) and imports
//! nothing of hone's.

pub mod metrics;
pub mod noise;

/// Which way the objective should go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Minimize,
    Maximize,
}

impl Direction {
    /// True when `a` is better than `b` in this direction (ties are not better).
    pub fn better(self, a: f64, b: f64) -> bool {
        match self {
            Direction::Minimize => a < b,
            Direction::Maximize => a > b,
        }
    }

    /// How much `candidate` improves on `best` (positive = better), whatever the direction.
    pub fn improvement(self, candidate: f64, best: f64) -> f64 {
        match self {
            Direction::Minimize => best - candidate,
            Direction::Maximize => candidate - best,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Minimize => "minimize",
            Direction::Maximize => "maximize",
        }
    }
}
