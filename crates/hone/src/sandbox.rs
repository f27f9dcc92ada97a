//! Containment with bubblewrap: agent and verifier processes see the whole filesystem
//! read-only except their worktree and a private /tmp, optionally without a network. The
//! wrapper is a program prefix for the process runner (`bwrap ... -- /bin/sh -c <command>`).

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};

/// The `bwrap` argument list that confines a command to `worktree` (read-write) and a private
/// `/tmp`, with the rest of the filesystem read-only (the repository too, even when it lives
/// under `/tmp`); `network = false` also gives it an empty network namespace.
pub fn bwrap_wrapper(repo_root: &Path, worktree: &Path, network: bool) -> Vec<OsString> {
    let wt = worktree.as_os_str().to_owned();
    let root = repo_root.as_os_str().to_owned();
    let mut args: Vec<OsString> = [
        "bwrap",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    args.extend([OsString::from("--ro-bind"), root.clone(), root]);
    args.extend([OsString::from("--bind"), wt.clone(), wt.clone()]);
    args.extend([OsString::from("--chdir"), wt]);
    // If hone dies, so does the sandbox (its process group would otherwise be orphaned).
    args.push("--die-with-parent".into());
    if !network {
        args.push("--unshare-net".into());
    }
    args.push("--".into());
    args
}

/// Checks that bubblewrap runs here; the error says what to do.
pub fn probe() -> Result<(), String> {
    let out = Command::new("bwrap")
        .args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--unshare-net",
            "true",
        ])
        .stdin(Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "bubblewrap cannot create a sandbox on this machine ({}); user namespaces may be disabled",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(_) => Err("bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)".into()),
    }
}
