//! Verification: reading metrics from the verifier's output, constraints, and decisions.

pub mod metrics;
pub mod noise;
