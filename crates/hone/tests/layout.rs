//! The shape rules of the code, checked on every test run: every source file of the
//! workspace's crates (`crates/*/src`) opens with a `//!` comment saying what it is for, and none
//! is over 800 lines (split a longer one into submodules). The function-length rule is
//! clippy's `too_many_lines` (clippy.toml); this covers what clippy cannot.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

const MAX_LINES: usize = 800;

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
        if lines > MAX_LINES {
            broken.push(format!(
                "{}: {lines} lines (at most {MAX_LINES}: split it into submodules)",
                f.display()
            ));
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}
