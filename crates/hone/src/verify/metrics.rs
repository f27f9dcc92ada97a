//! Metric parsing from verifier output lines, and constraints on secondary metrics.
// TEMPORARY STUB: replaced by the real parser from branch helper/exec.
use std::collections::BTreeMap;
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct MetricError(String);
#[derive(Default, Clone, Debug)]
pub struct MetricSet {
    pub values: BTreeMap<String, f64>,
}
pub struct MetricReader {
    objective: String,
    set: MetricSet,
}
impl MetricReader {
    pub fn new(objective: &str, _metric_regex: Option<&str>) -> Result<Self, MetricError> {
        Ok(Self {
            objective: objective.into(),
            set: MetricSet::default(),
        })
    }
    pub fn feed(&mut self, line: &str) {
        if let Some((k, v)) = line.split_once(':') {
            if let Ok(v) = v.trim().parse() {
                self.set.values.insert(k.trim().into(), v);
            }
        }
        let _ = &self.objective;
    }
    pub fn finish(self) -> MetricSet {
        self.set
    }
}
pub struct Constraint {
    pub metric: String,
    pub bound: f64,
}
impl std::str::FromStr for Constraint {
    type Err = MetricError;
    fn from_str(s: &str) -> Result<Self, MetricError> {
        Ok(Constraint {
            metric: s.into(),
            bound: 0.0,
        })
    }
}
impl Constraint {
    pub fn check(&self, _m: &MetricSet) -> Result<(), String> {
        Ok(())
    }
}
