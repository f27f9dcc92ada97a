//! Containment with bubblewrap: agent and verifier processes see the whole filesystem
//! read-only except their worktree and a private temporary directory inside it, optionally
//! without a network. The
//! wrapper is a program prefix for the process runner (`bwrap ... -- /bin/sh -c <command>`).

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};

/// The `bwrap` argument list that lets a command write only `worktree` and `tmp` (a private
/// temporary directory, which `TMPDIR`, `TMP` and `TEMP` point to), with the rest of the
/// filesystem read-only, `/tmp` included; `network = false` also gives it an empty network
/// namespace. (`/tmp` stays visible rather than replaced, so tools installed under it still run.)
pub fn bwrap_wrapper(worktree: &Path, tmp: &Path, network: bool) -> Vec<OsString> {
    let wt = worktree.as_os_str().to_owned();
    let tmp = tmp.as_os_str().to_owned();
    let mut args: Vec<OsString> = [
        "bwrap",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    args.extend([OsString::from("--bind"), wt.clone(), wt.clone()]);
    for var in ["TMPDIR", "TMP", "TEMP"] {
        args.extend([OsString::from("--setenv"), var.into(), tmp.clone()]);
    }
    args.extend([OsString::from("--chdir"), wt]);
    // If hone dies, so does the sandbox; and in its own PID namespace nothing started inside
    // outlives the command, even a process that left its process group.
    args.push("--die-with-parent".into());
    args.push("--unshare-pid".into());
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
