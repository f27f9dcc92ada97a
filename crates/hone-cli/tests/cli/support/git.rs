//! `git` for the tests, with a fixed author (also used by `tests/serve.rs`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// `git args` in `dir`, which must succeed: its standard output, trimmed.
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A `git` ahead of the real one on a `PATH` of its own that logs each call's arguments (a
/// line a call) and runs the real git: what hone asks git, counted. (`tests/serve.rs` shares
/// this file without it.)
#[allow(dead_code)]
pub(crate) struct GitSpy {
    dir: tempfile::TempDir,
    /// The `PATH` to run hone with.
    pub path: String,
}

#[allow(dead_code)]
impl GitSpy {
    pub(crate) fn new() -> GitSpy {
        use std::os::unix::fs::PermissionsExt;
        let real = Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap();
        let real = String::from_utf8(real.stdout).unwrap().trim().to_string();
        let dir = tempfile::tempdir().unwrap();
        let wrapper = dir.path().join("git");
        let script = format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec '{real}' \"$@\"\n",
            dir.path().join("calls").display()
        );
        std::fs::write(&wrapper, script).unwrap();
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!(
            "{}:{}",
            dir.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        GitSpy { dir, path }
    }

    fn calls(&self) -> PathBuf {
        self.dir.path().join("calls")
    }

    /// The calls logged since the last `take`, which are then forgotten.
    pub(crate) fn take(&self) -> String {
        let log = std::fs::read_to_string(self.calls()).unwrap_or_default();
        let _ = std::fs::remove_file(self.calls());
        log
    }
}
