//! hone: harness-enforced autonomous experiment loops.
//!
//! The library holds the whole engine and does no terminal I/O; the `hone` binary in
//! `crates/hone-cli` is a thin layer over it. The words used here (run, experiment, candidate,
//! keep, discard, mechanism) are those of README.md; ARCHITECTURE.md at the repository's top
//! draws the modules below as layers and follows one experiment through the engine.
//!
//! - `spec`: hone.toml, validated with line-precise errors.
//! - `workspace`: git (run branch, worktrees, archive refs, scope checks).
//! - `exec`: processes in their own groups, under timeouts.
//! - `verify`: metrics, constraints, the decision rule.
//! - `presets`: the agent CLIs hone drives, as one table.
//! - `propose`: the `Proposer` trait, the knobs optimizer, agent commands.
//! - `meta`: the outer loop: mechanisms, the search strategy, the portfolio.
//! - `store`: SQLite state.
//! - `queue`: the PostgreSQL verification queue shared with remote workers.
//! - `worker`: `hone worker`, which verifies candidates from that queue.
//! - `engine`: the loop.
//! - `report`: summaries.
//! - `review`: the reviewer as an LLM over HTTP.
//! - `notify`: webhook notifications from background threads.
//! - `automation`: schedules, signed webhook triggers, and the launcher of unattended runs.
//! - `finalize`: review branches and pull requests from a run's keeps.
//! - `sandbox`: bubblewrap containment.
//! - `tag`: run tags, which become branch names.
//! - `demo`: the bundled example.
//! - `bench`: the ablation benchmark of the outer loop (`hone bench`).
//! - `util`: the HTML escape, the median and the splitmix64 step, one copy each.

// No function of the shipped code over 80 lines (clippy.toml sets the count); tests and
// examples are left out.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod automation;
pub mod bench;
pub mod demo;
pub mod engine;
pub mod exec;
pub mod finalize;
pub mod init;
pub mod meta;
pub mod notify;
pub mod presets;
pub mod propose;
pub mod queue;
pub mod report;
pub mod review;
pub mod sandbox;
pub mod spec;
pub mod store;
pub mod tag;
#[cfg(test)]
pub(crate) mod test_support;
pub mod util;
pub mod verify;
pub mod worker;
pub mod workspace;
