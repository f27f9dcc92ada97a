//! Containment with bubblewrap: agent and verifier processes see the whole filesystem
//! read-only except their worktree and a private temporary directory inside it, cannot read
//! hone's own state or hidden holdout data, and optionally have no network. The wrapper is a
//! program prefix for the process runner (`bwrap ... -- /bin/sh -c <command>`).
//!
//! `script`: the Rhai sandbox that generated mechanisms run in (no file, network or time
//! access; operation, depth, size and wall-clock caps).

pub mod script;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The `bwrap` argument list that lets a command write only `worktree` and `tmp` (a private
/// temporary directory, which `TMPDIR`, `TMP` and `TEMP` point to), with the rest of the
/// filesystem read-only, `/tmp` included (kept visible, so tools installed under it still
/// run); `network = false` also gives it an empty network namespace.
///
/// `hide` lists paths the command must not even read (hone's state directory, holdout data):
/// a directory becomes an empty tmpfs, a file reads as empty. `expose` lists paths inside a
/// hidden directory that it may read after all (an agent's prompts).
pub fn bwrap_wrapper(
    worktree: &Path,
    tmp: &Path,
    network: bool,
    hide: &[PathBuf],
    expose: &[PathBuf],
) -> Vec<OsString> {
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
    for h in hide {
        if h.is_dir() {
            args.extend([OsString::from("--tmpfs"), h.as_os_str().to_owned()]);
        } else if h.exists() {
            args.extend([
                OsString::from("--ro-bind"),
                "/dev/null".into(),
                h.as_os_str().to_owned(),
            ]);
        }
    }
    for e in expose.iter().filter(|e| e.exists()) {
        args.extend([
            OsString::from("--ro-bind"),
            e.as_os_str().to_owned(),
            e.as_os_str().to_owned(),
        ]);
    }
    // After the hiding: the worktree usually lives inside hone's (hidden) state directory.
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
            "--unshare-pid",
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
