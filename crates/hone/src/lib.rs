//! hone: harness-enforced autonomous experiment loops.
//!
//! The library holds the whole engine and does no terminal I/O; the `hone` binary in
//! `crates/hone-cli` is a thin layer over it. See DESIGN.md for the words used here.
//!
//! - `spec`: hone.toml, validated with line-precise errors.
//! - `workspace`: git (run branch, worktrees, archive refs, scope checks).
//! - `exec`: processes in their own groups, under timeouts.
//! - `verify`: metrics, constraints, the decision rule.
//! - `propose`: the `Proposer` trait, the knobs optimizer, agent commands.
//! - `store`: SQLite state.
//! - `engine`: the loop.
//! - `report`: summaries.
//! - `notify`: webhook notifications from background threads.
//! - `automation`: schedules, signed webhook triggers, and the launcher of unattended runs.
//! - `finalize`: review branches and pull requests from a run's keeps.
//! - `sandbox`: bubblewrap containment.
//! - `demo`: the bundled example.

pub mod automation;
pub mod demo;
pub mod engine;
pub mod exec;
pub mod finalize;
pub mod notify;
pub mod propose;
pub mod report;
pub mod sandbox;
pub mod spec;
pub mod store;
pub mod verify;
pub mod workspace;
