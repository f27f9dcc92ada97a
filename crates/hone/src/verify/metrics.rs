//! Metric parsing from verifier output lines, and constraints on secondary metrics.
