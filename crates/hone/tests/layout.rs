//! The shape rules of the code, checked on every test run: every source file of the
//! workspace's crates (`crates/*/src`) opens with a `//!` comment saying what it is for, and none
//! is over 800 lines (split a longer one into submodules), the engine's coordinator under 500;
//! every file of the CLI's test suite is part of its build. The function-length rule is
//! clippy's `too_many_lines` (clippy.toml); this covers what clippy cannot.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

const MAX_LINES: usize = 800;
/// The engine's coordinator (`engine/mod.rs`: the story of one experiment) is read in one
/// sitting: its rooms hold the rest (ARCHITECTURE.md).
const MAX_COORDINATOR_LINES: usize = 500;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every `.rs` file under `crates/*/src`.
fn sources() -> Vec<PathBuf> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for krate in std::fs::read_dir(&crates).unwrap() {
        let src = krate.unwrap().path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    files.sort();
    files
}

#[test]
fn every_source_file_says_what_it_is_for_and_stays_under_800_lines() {
    let files = sources();
    // The library alone has well over a hundred modules: a walk that found few went wrong.
    assert!(files.len() > 100, "found only {} source files", files.len());
    let mut broken = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        if !text.starts_with("//!") {
            broken.push(format!(
                "{}: does not open with a `//!` comment",
                f.display()
            ));
        }
        let lines = text.lines().count();
        if f.ends_with("hone/src/engine/mod.rs") && lines >= MAX_COORDINATOR_LINES {
            broken.push(format!(
                "{}: the coordinator has {lines} lines (under {MAX_COORDINATOR_LINES}: move a step into its room)",
                f.display()
            ));
        }
        if lines > MAX_LINES {
            broken.push(format!(
                "{}: {lines} lines (at most {MAX_LINES}: split it into submodules)",
                f.display()
            ));
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// Cargo builds only the files `main.rs` reaches: a topic file nobody declares would be
/// skipped without a word. Every `.rs` file under `crates/hone-cli/tests/cli/` must be named by a `mod`
/// declaration in its parent (`main.rs` for the top level, `mod.rs` inside a directory).
#[test]
fn every_test_file_is_part_of_the_build() {
    /// The module names a file declares with `mod name;` (any visibility).
    fn declared(file: &Path) -> Vec<String> {
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
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../hone-cli/tests/cli");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(files.len() > 1, "no topic files under {}", root.display());
    let mut missing = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&root).unwrap();
        if rel == Path::new("main.rs") {
            continue;
        }
        let dir = f.parent().unwrap();
        // `a/mod.rs` is module `a`, declared next to the directory; `a/b.rs` is declared in
        // `a/mod.rs`; `b.rs` at the top in `main.rs`. `declared_in` is the directory of the
        // declaring file.
        let (declared_in, name) = if f.file_name().unwrap() == "mod.rs" {
            (dir.parent().unwrap(), dir.file_name().unwrap())
        } else {
            (dir, f.file_stem().unwrap())
        };
        let parent = if declared_in == root {
            root.join("main.rs")
        } else {
            declared_in.join("mod.rs")
        };
        let name = name.to_string_lossy().into_owned();
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
