//! Proposers: what makes a candidate change (built-in knobs optimizer, agent commands).

pub mod knobs;
