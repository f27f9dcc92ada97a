//! A stand-in for `hone` in the automation tests: one copy of it, for the library's and (included
//! by path) the dashboard's scheduler tests.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Writes the stand-in as `dir/fake-hone` and makes the FIFO `dir/go`; its path. It records
/// its arguments (a line per call, in `dir/calls`), then `hone run` blocks reading `go` until
/// the test writes a line to it.
pub(crate) fn fake_hone(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join("fake-hone");
    std::fs::write(
        &p,
        "#!/bin/sh\nd=\"$(dirname \"$0\")\"\necho \"$@\" >> \"$d/calls\"\nif [ \"$3\" = run ]; then read _ < \"$d/go\"; fi\nexit 0\n",
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert!(Command::new("mkfifo")
        .arg(dir.join("go"))
        .status()
        .unwrap()
        .success());
    p
}
