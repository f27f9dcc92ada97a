//! End-to-end tests: the real `hone` binary against real git repositories, real verifier
//! processes and a scripted fake agent (`fake-agent`, built in this package).
//!
//! One test binary (`cli`), one module per topic; shared helpers and the builder of test
//! repositories and specs live in `support`. `every_test_file_is_part_of_the_build` keeps a
//! new topic file from being silently left out.

#![allow(clippy::unwrap_used)]

mod support;

mod attacks;
mod autoresearch;
// libtest starts a binary's tests in the order of their names, two at a time on two cores.
// The SLURM tests are the suite's slowest (about 23, 10 and 8 s): in a module named `slurm`
// they started last and left one thread idle at the end of the run, so they live in `batch`
// (SLURM batch jobs), which starts them among the first (bench/RESULTS.md, issue 16).
mod batch;
mod bench;
mod containment;
mod daemon;
mod disk;
mod faults;
mod feasible;
mod finalize;
mod firstrun;
mod fuzz;
mod gate;
mod holdout;
mod init;
mod integrity;
mod knobs;
mod llm;
mod noise;
mod notify;
mod outer;
mod parallel;
mod poisoning;
mod postgres;
mod presets;
mod pruning;
mod report;
mod research;
mod resume;
mod review;
mod run;
mod sandbox;
mod spec_input;
