//! The bundled example (`examples/charlm`, embedded in the binary) and the set-up that
//! `hone demo` does before running the loop on it: copy the files into a fresh directory,
//! `git init`, and commit, so that an installed `hone` needs only python3.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

/// The example's files, as (relative path, content).
pub const CHARLM: &[(&str, &[u8])] = &[
    (
        "README.md",
        include_bytes!("../../../examples/charlm/README.md"),
    ),
    (
        "hone.toml",
        include_bytes!("../../../examples/charlm/hone.toml"),
    ),
    (
        "program.md",
        include_bytes!("../../../examples/charlm/program.md"),
    ),
    (
        "prepare.py",
        include_bytes!("../../../examples/charlm/prepare.py"),
    ),
    (
        "train.py",
        include_bytes!("../../../examples/charlm/train.py"),
    ),
    (
        "data/corpus.txt",
        include_bytes!("../../../examples/charlm/data/corpus.txt"),
    ),
    (
        "data/SOURCE.md",
        include_bytes!("../../../examples/charlm/data/SOURCE.md"),
    ),
];

/// Why the demo could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("{0} is not empty; choose an empty or new directory for the demo")]
    NotEmpty(String),
    #[error("the demo needs python3 on PATH (the example model is pure standard-library Python); install it, e.g. `apt-get install python3`")]
    NoPython,
    #[error("cannot write {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("git failed while setting up the demo: {0}")]
    Git(String),
}

/// Checks that python3 runs.
pub fn check_python() -> Result<(), DemoError> {
    match Command::new("python3").arg("--version").output() {
        Ok(o) if o.status.success() => Ok(()),
        _ => Err(DemoError::NoPython),
    }
}

/// Writes the example into `dir` (which must be empty or absent) and commits it in a new git
/// repository.
pub fn set_up(dir: &Path) -> Result<(), DemoError> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| DemoError::Io { path, source }
    };
    if dir.exists() {
        let mut entries = std::fs::read_dir(dir).map_err(io(dir))?;
        if entries.next().is_some() {
            return Err(DemoError::NotEmpty(dir.display().to_string()));
        }
    }
    for (rel, content) in CHARLM {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        std::fs::write(&path, content).map_err(io(&path))?;
    }
    std::fs::write(dir.join(".gitignore"), "__pycache__/\n").map_err(io(dir))?;
    let git = |args: &[&str]| -> Result<(), DemoError> {
        let out = Command::new(crate::workspace::git_program())
            .process_group(0)
            .args(args)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "hone demo")
            .env("GIT_AUTHOR_EMAIL", "hone@localhost")
            .env("GIT_COMMITTER_NAME", "hone demo")
            .env("GIT_COMMITTER_EMAIL", "hone@localhost")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .output()
            .map_err(|e| DemoError::Git(e.to_string()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(DemoError::Git(
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            ))
        }
    };
    git(&["init", "-q", "-b", "main"])?;
    git(&["add", "-A"])?;
    git(&[
        "commit",
        "-q",
        "-m",
        "charlm: a character-level language model to improve",
    ])?;
    Ok(())
}
