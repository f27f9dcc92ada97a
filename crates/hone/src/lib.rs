//! hone: harness-enforced autonomous experiment loops.
//!
//! The library holds the whole engine and does no terminal I/O; the `hone` binary in
//! `crates/hone-cli` is a thin layer over it. See DESIGN.md for the words used here.

pub mod exec;
pub mod propose;
pub mod verify;
