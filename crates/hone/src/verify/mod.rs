//! Verification: reading metrics from the verifier's output, constraints, and decisions.
//! It sits below the spec (which stores its parsed constraints and metric regex) and imports
//! nothing of hone's.

pub mod metrics;
pub mod noise;
pub mod prune;

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

    pub fn parse(s: &str) -> Option<Direction> {
        [Direction::Minimize, Direction::Maximize]
            .into_iter()
            .find(|d| d.as_str() == s)
    }
}

impl std::fmt::Display for Direction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
