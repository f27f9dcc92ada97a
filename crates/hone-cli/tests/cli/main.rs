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

/// Cargo builds only the files `main.rs` reaches: a topic file nobody declares would be
/// skipped without a word. Every `.rs` file under `tests/cli/` must be named by a `mod`
/// declaration in its parent (`main.rs` for the top level, `mod.rs` inside a directory).
#[test]
fn every_test_file_is_part_of_the_build() {
    fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                rust_files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    /// The module names a file declares with `mod name;` (any visibility).
    fn declared(file: &std::path::Path) -> Vec<String> {
        std::fs::read_to_string(file)
            .unwrap()
            .lines()
            .filter_map(|l| {
                let l = l.trim();
                let l = l
                    .strip_prefix("pub(crate) ")
                    .or(l.strip_prefix("pub "))
                    .unwrap_or(l);
                l.strip_prefix("mod ")?
                    .strip_suffix(';')
                    .map(str::to_string)
            })
            .collect()
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(files.len() > 1, "no topic files under {}", root.display());
    let mut missing = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&root).unwrap();
        if rel == std::path::Path::new("main.rs") {
            continue;
        }
        let dir = f.parent().unwrap();
        // `a/mod.rs` is module `a`, declared next to the directory; `a/b.rs` is declared in
        // `a/mod.rs`; `b.rs` at the top in `main.rs`.
        let (declared_in, name) = if f.file_name().unwrap() == "mod.rs" {
            (dir.parent().unwrap(), dir.file_name().unwrap())
        } else {
            (dir, f.file_stem().unwrap())
        };
        let name = name.to_string_lossy().into_owned();
        let parent = if declared_in == root {
            root.join("main.rs")
        } else {
            declared_in.join("mod.rs")
        };
        if !parent.exists() || !declared(&parent).contains(&name) {
            missing.push(format!(
                "{} (no `mod {name};` in {})",
                rel.display(),
                parent.strip_prefix(&root).unwrap_or(&parent).display()
            ));
        }
    }
    assert!(
        missing.is_empty(),
        "test files left out of the build:\n{}",
        missing.join("\n")
    );
}
