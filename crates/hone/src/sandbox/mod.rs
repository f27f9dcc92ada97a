//! Containment with bubblewrap: agent, reviewer, verifier and holdout processes see the whole
//! filesystem read-only except their worktree and a private temporary directory inside it,
//! cannot read hone's own state or hidden holdout data, hold no capabilities (even when hone
//! runs as root), live in their own user, PID, IPC, UTS and cgroup namespaces and terminal
//! session, and optionally have no network. The wrapper is a program prefix for the process runner
//! (`/bin/sh -c <setup retry> hone-sandbox bwrap ... -- /bin/sh -c <command>`).
//!
//! `script`: the Rhai sandbox that generated mechanisms run in (no file, network or time
//! access; operation, depth, size and wall-clock caps).

pub mod script;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The namespaces and privileges every sandbox gets, whatever its role.
///
/// - `--unshare-user` with `--cap-drop ALL`: a process started by root keeps uid 0 inside
///   (files it writes in the worktree stay root's) but holds no capability, so it cannot
///   `umount` what hides hone's state, remount `/` read-write, or override file permissions;
///   its own user namespace also gives it its own kernel keyrings (root's user keyring is
///   otherwise shared by every root process, a channel between two sandboxes). Without
///   `--unshare-user`, bubblewrap started by root keeps every capability of its caller.
/// - `--unshare-pid`: nothing started inside outlives the command, even a process that left
///   its process group; and no process outside can be seen or signalled.
/// - `--unshare-ipc`: SysV message queues, semaphores, shared memory and POSIX message queues
///   are the sandbox's own and vanish with it.
/// - `--unshare-uts`, `--unshare-cgroup-try`: the host name and the cgroup view are its own.
/// - `--new-session`: no controlling terminal, so the sandbox cannot open `/dev/tty` and push
///   keystrokes (`TIOCSTI`) into the shell of the user who started hone from a terminal. (A
///   process group signal from hone reaches `bwrap`, which dies; the kernel then kills
///   everything inside, since `--die-with-parent` and the PID namespace tie it to `bwrap`.)
/// - `--die-with-parent`: if the shell that starts it dies, so does the sandbox; and that
///   shell dies with hone (`exec::spawn` gives a wrapped command's leader a death signal).
const ISOLATION: &[&str] = &[
    "--unshare-user",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--new-session",
    "--die-with-parent",
    "--cap-drop",
    "ALL",
];

/// What bubblewrap gives every sandbox first: `/` read-only, a fresh `/dev` and a `/proc`.
const BASE: &[&str] = &["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"];

/// The shell script a sandbox with socket masks starts through ([`Confinement::wrapper`]; its
/// arguments are `bwrap`'s, then the command). A socket masked by mounting `/dev/null` over it
/// (`--ro-bind-try`, which only socket masks use) may be removed between the moment hone
/// lists it and bubblewrap's setup (a SLURM step's socket, an SSH agent's), and bubblewrap
/// then dies before the command starts: it cannot make the mount point on the read-only root.
/// bubblewrap reports the command's exit on its status descriptor (fd 3, read by the command
/// substitution; the command itself does not get it). When that report is missing and
/// bubblewrap failed as it does at setup (status 1), the script leaves out the socket masks of
/// what no longer exists and, if it left out any, tries again: three tries in all, the last
/// one bubblewrap as it is. Anything else ends the script with bubblewrap's status: a command
/// that ran is never run again. A failed setup's message stays in the log. bubblewrap is
/// `exec`ed by the substitution's shell, so that it is the leader's own child whatever shell
/// `/bin/sh` is (its `--die-with-parent` then follows the leader, which dies with hone); no
/// shell function of the environment stands in for `[`; the script's names start with
/// `_hone_` (they would change an exported variable of the same name).
const SETUP_RETRY: &str = r#"unset -f '[' 2>/dev/null
exec 4>&1
_hone_tries=0
while [ "$_hone_tries" -lt 2 ]; do
  _hone_tries=$((_hone_tries + 1))
  _hone_status=$(exec "$@" 3>&1 1>&4 4>&-)
  _hone_rc=$?
  case $_hone_status in *'"exit-code"'*) exit "$_hone_rc" ;; esac
  [ "$_hone_rc" -eq 1 ] || exit "$_hone_rc"
  _hone_n=$#; _hone_state=0; _hone_dropped=0
  for _hone_a in "$@"; do
    case $_hone_state in
      0) if [ "$_hone_a" = --ro-bind-try ]; then _hone_state=1
         else set -- "$@" "$_hone_a"; if [ "$_hone_a" = -- ]; then _hone_state=3; fi; fi ;;
      1) if [ "$_hone_a" = /dev/null ]; then _hone_state=2
         else set -- "$@" --ro-bind-try "$_hone_a"; _hone_state=0
           if [ "$_hone_a" = -- ]; then _hone_state=3; fi; fi ;;
      2) if [ -e "$_hone_a" ]; then set -- "$@" --ro-bind-try /dev/null "$_hone_a"
         else _hone_dropped=1; fi
         _hone_state=0 ;;
      3) set -- "$@" "$_hone_a" ;;
    esac
  done
  shift "$_hone_n"
  [ "$_hone_dropped" = 1 ] || exit "$_hone_rc"
done
exec "$@" 3>/dev/null 4>&-
"#;

/// The arguments of the `bwrap` command with which [`probe`] checks that a sandbox can be made
/// here: every namespace and the dropped capabilities a sandbox gets, no network, running
/// `true`.
pub fn probe_args() -> Vec<&'static str> {
    [BASE, ISOLATION, &["--unshare-net", "true"]].concat()
}

/// bubblewrap's program ([`crate::util::program_on_path`]): a sandbox's processes start in
/// its worktree with the verifier's `PATH`, where a plain `bwrap` could be found through a
/// relative or empty entry in the worktree, put there by a candidate to run its code
/// unconfined. A SLURM job's node must have bubblewrap at the same path.
pub fn bwrap_program() -> OsString {
    crate::util::program_on_path("bwrap")
}

/// The private temporary directory of a sandbox that works in `worktree`: `.hone/tmp` inside
/// it (writable with the worktree; git ignores `.hone/`, and the next reset removes it), made
/// if missing, never through a `.hone` the candidate replaced by a symlink or a file.
pub fn scratch_dir(worktree: &Path) -> PathBuf {
    let state = worktree.join(".hone");
    if std::fs::symlink_metadata(&state).is_ok_and(|m| !m.is_dir()) {
        let _ = std::fs::remove_file(&state);
    }
    let tmp = state.join("tmp");
    let _ = std::fs::create_dir_all(&tmp);
    tmp
}

/// What one sandboxed process may see and touch.
pub struct Confinement<'a> {
    /// The directory it works in.
    pub worktree: &'a Path,
    /// Whether it may write `worktree` (agents, reviewers and verifiers may; the holdout,
    /// which reads hidden data, may not: nothing it writes may reach the next agent).
    pub writable: bool,
    /// Its private temporary directory (`TMPDIR`, `TMP` and `TEMP` point to it). With a
    /// read-only worktree it is an empty in-memory filesystem that vanishes with the sandbox.
    pub tmp: &'a Path,
    /// Whether it keeps the host's network (else an empty network namespace: no interface
    /// but its own loopback, and no abstract unix socket of the host).
    pub network: bool,
    /// Paths it must not even read (hone's state directory, holdout data): a directory
    /// becomes an empty tmpfs, a file cannot be read (`/dev/null` bound over it, without its device).
    pub hide: &'a [PathBuf],
    /// Paths inside a hidden directory that it may read after all (an agent's prompts).
    pub expose: &'a [PathBuf],
    /// A home of its own (`$HOME`, writable; the `XDG_*` directories and the tools' own
    /// settings variables left to their defaults under it): an agent CLI's, whose tool
    /// writes its state there as it starts.
    pub home: Option<&'a Path>,
    /// Mask the host's unix sockets ([`socket_masks`]); off for a sandbox that starts on
    /// another machine (a SLURM job), whose sockets hone cannot see.
    pub mask_sockets: bool,
    /// The directory it starts in, when not `worktree` (a reviewer's: no file of the
    /// candidate's may be where its tools look for code or settings); it may write there.
    pub start_in: Option<&'a Path>,
}

impl Confinement<'_> {
    /// The program prefix that runs a command in this sandbox: [`Confinement::bwrap_args`],
    /// through `SETUP_RETRY` when it masks sockets, so that a socket removed while the
    /// sandbox is set up does not fail the command.
    pub fn wrapper(&self) -> Vec<OsString> {
        let args = self.bwrap_args();
        if args.iter().any(|a| a == "--ro-bind-try") {
            retrying(args)
        } else {
            args
        }
    }

    /// The `bwrap` argument list, up to and including the `--` before the command: the
    /// filesystem read-only (`/tmp` included, kept visible so tools installed under it still
    /// run) except what [`Confinement`] allows, a fresh `/dev` (its `/dev/shm` private) and
    /// `/proc` of its own PID namespace, and the `ISOLATION` flags.
    pub fn bwrap_args(&self) -> Vec<OsString> {
        let wt = self.worktree.as_os_str().to_owned();
        let tmp = self.tmp.as_os_str().to_owned();
        let mut args: Vec<OsString> = std::iter::once(bwrap_program())
            .chain(BASE.iter().map(OsString::from))
            .collect();
        // The fresh /dev has no accelerators: training on a GPU needs its device files (`-try`:
        // a SLURM job's node may lack one the submitting host has).
        for dev in accelerator_devices(Path::new("/dev")) {
            let d = dev.into_os_string();
            args.extend([OsString::from("--dev-bind-try"), d.clone(), d]);
        }
        // A read-only filesystem still lets a process connect to a unix socket in it: the
        // host's listening sockets it could reach read as /dev/null instead.
        if self.mask_sockets {
            let mut skip: Vec<&Path> = self.hide.iter().map(PathBuf::as_path).collect();
            skip.push(self.worktree);
            // `-try` marks them for the setup's retry (see [`SETUP_RETRY`]); bubblewrap
            // treats them as `--ro-bind` (it only tolerates a missing source).
            for sock in socket_masks(&skip) {
                args.extend([
                    OsString::from("--ro-bind-try"),
                    "/dev/null".into(),
                    sock.into_os_string(),
                ]);
            }
        }
        for h in self.hide {
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
        for e in self.expose.iter().filter(|e| e.exists()) {
            args.extend([
                OsString::from("--ro-bind"),
                e.as_os_str().to_owned(),
                e.as_os_str().to_owned(),
            ]);
        }
        if let Some(home) = self.home.filter(|h| h.is_dir()) {
            let h = home.as_os_str().to_owned();
            args.extend([OsString::from("--bind"), h.clone(), h.clone()]);
            args.extend([OsString::from("--setenv"), "HOME".into(), h]);
            for var in HOME_OVERRIDES {
                args.extend([OsString::from("--unsetenv"), var.into()]);
            }
        }
        // Where it starts, when not the worktree: its own, writable (a tool may write there).
        if let Some(d) = self.start_in {
            args.extend([
                OsString::from("--bind"),
                d.as_os_str().to_owned(),
                d.as_os_str().to_owned(),
            ]);
        }
        // After the hiding: the worktree usually lives inside hone's (hidden) state directory.
        if self.writable {
            args.extend([OsString::from("--bind"), wt.clone(), wt.clone()]);
        } else {
            args.extend([OsString::from("--ro-bind"), wt.clone(), wt.clone()]);
            args.extend([OsString::from("--tmpfs"), tmp.clone()]);
        }
        for var in ["TMPDIR", "TMP", "TEMP"] {
            args.extend([OsString::from("--setenv"), var.into(), tmp.clone()]);
        }
        let start = self.start_in.map_or(wt, |d| d.as_os_str().to_owned());
        args.extend([OsString::from("--chdir"), start]);
        args.extend(ISOLATION.iter().map(OsString::from));
        if !self.network {
            args.push("--unshare-net".into());
        }
        args.push("--".into());
        args
    }
}

/// Variables that would send a tool's state somewhere other than its home: unset where a
/// sandbox has a home of its own.
const HOME_OVERRIDES: &[&str] = &[
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
];

/// `bwrap` (`args`, up to its `--`) started through [`SETUP_RETRY`], its status on fd 3.
fn retrying(args: Vec<OsString>) -> Vec<OsString> {
    let mut out: Vec<OsString> = vec![
        crate::exec::SHELL.into(),
        "-c".into(),
        SETUP_RETRY.into(),
        "hone-sandbox".into(),
    ];
    let mut args = args.into_iter();
    out.extend(args.next());
    out.extend(["--json-status-fd".into(), "3".into()]);
    out.extend(args);
    out
}

/// The most sockets masked in one sandbox (bubblewrap's setup grows with every mount).
pub const MAX_SOCKET_MASKS: usize = 256;

/// The host's listening unix sockets a sandbox could connect to, to be masked: an SSH agent,
/// the container runtime, systemd, the session bus, the journal. Left out: sockets under
/// `skip` (hidden directories and the worktree, which the sandbox sees otherwise anyway),
/// sockets it could not reach through the file permissions (another user's private
/// directory: the sandbox holds no capability to pass it, and bubblewrap could not mount
/// there either), and any beyond [`MAX_SOCKET_MASKS`]. Not covered: abstract sockets (`@name`,
/// X11's among them) for a sandbox that keeps the network, a socket bound by a relative path,
/// and one created after the sandbox starts.
pub fn socket_masks(skip: &[&Path]) -> Vec<PathBuf> {
    let table = std::fs::read("/proc/net/unix").unwrap_or_default();
    listening_socket_paths(&table)
        .into_iter()
        .filter(|p| !skip.iter().any(|s| p.starts_with(s)))
        .filter(|p| reachable_socket(p))
        .take(MAX_SOCKET_MASKS)
        .collect()
}

/// Is `path` a socket this process could connect to by the file permissions alone (every
/// directory on the way searchable, the socket writable)?
fn reachable_socket(path: &Path) -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    // SAFETY: geteuid and getegid cannot fail and touch no memory.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let allows = |m: &std::fs::Metadata, bits: u32| {
        let mode = m.mode();
        if m.uid() == uid {
            mode & (bits << 6) != 0
        } else if m.gid() == gid {
            mode & (bits << 3) != 0
        } else {
            mode & bits != 0
        }
    };
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return false;
    };
    if !meta.file_type().is_socket() || !allows(&meta, 0o2) {
        return false;
    }
    path.ancestors()
        .skip(1)
        .all(|dir| std::fs::metadata(dir).is_ok_and(|m| allows(&m, 0o1)))
}

/// The absolute paths of the unix sockets `/proc/net/unix` lists (its bytes are
/// `proc_net_unix`; a name need not be UTF-8): the eighth column, when there is one (abstract
/// sockets, `@name`, have no file).
pub fn listening_socket_paths(proc_net_unix: &[u8]) -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let mut paths: Vec<PathBuf> = proc_net_unix
        .split(|b| *b == b'\n')
        .skip(1)
        .filter_map(|line| {
            let mut fields = 0;
            let mut i = 0;
            // Skip seven whitespace-separated fields; the rest of the line is the path.
            while fields < 7 {
                while line.get(i).is_some_and(u8::is_ascii_whitespace) {
                    i += 1;
                }
                if i >= line.len() {
                    return None;
                }
                while line.get(i).is_some_and(|b| !b.is_ascii_whitespace()) {
                    i += 1;
                }
                fields += 1;
            }
            while line.get(i).is_some_and(u8::is_ascii_whitespace) {
                i += 1;
            }
            let rest = line.get(i..)?;
            rest.starts_with(b"/")
                .then(|| PathBuf::from(std::ffi::OsStr::from_bytes(rest)))
        })
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// The accelerator device files under `dev` (NVIDIA's `nvidia*` and `nvidia-caps`, the DRM
/// `dri` directory, AMD's `kfd`), which a sandboxed verifier needs to train on a GPU. They
/// are shared with the host as they are: GPU memory is not cleared between processes by
/// hone.
pub fn accelerator_devices(dev: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dev) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("nvidia") || name == "dri" || name == "kfd"
        })
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

/// The program prefix (see [`Confinement::wrapper`]) that lets a command write only
/// `worktree` and `tmp`, with no capabilities and its own namespaces; `network = false`
/// also gives it an empty network namespace. `hide` and `expose` are
/// [`Confinement::hide`] and [`Confinement::expose`].
pub fn bwrap_wrapper(
    worktree: &Path,
    tmp: &Path,
    network: bool,
    hide: &[PathBuf],
    expose: &[PathBuf],
) -> Vec<OsString> {
    Confinement {
        worktree,
        writable: true,
        tmp,
        network,
        hide,
        expose,
        home: None,
        mask_sockets: true,
        start_in: None,
    }
    .wrapper()
}

/// Checks that bubblewrap runs here with every namespace and the dropped capabilities a
/// sandbox gets, started as a sandbox is (through `SETUP_RETRY`: a bubblewrap without a
/// status descriptor fails it); the error says what to do.
pub fn probe() -> Result<(), String> {
    // Nothing of hone's environment but its search paths: these processes are dumpable.
    let env = crate::util::search_paths_of(std::env::vars_os());
    let installed = Command::new(bwrap_program())
        .arg("--version")
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if installed.is_err() {
        return Err(
            "bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)".into(),
        );
    }
    let mut argv = retrying(vec![bwrap_program()]);
    argv.extend(probe_args().into_iter().map(OsString::from));
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) if String::from_utf8_lossy(&o.stderr).contains("json-status-fd") => Err(format!(
            "bubblewrap is too old here ({}): hone needs one that has --json-status-fd; \
             upgrade it",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Ok(o) => Err(format!(
            "bubblewrap cannot create a sandbox on this machine ({}); user namespaces may be disabled \
             (a container needs them allowed, or run hone where bubblewrap works and `bwrap --unshare-user --unshare-pid --unshare-ipc --cap-drop ALL true` succeeds)",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!("cannot start {}: {e}", crate::exec::SHELL)),
    }
}

#[cfg(test)]
mod tests {
    /// A server listening on a unix socket outside is out of reach inside (the read-only
    /// root alone would let a connection through).
    #[test]
    fn a_sandbox_cannot_connect_to_a_socket_of_the_host() {
        if super::probe().is_err() {
            eprintln!("skipped: bubblewrap cannot run here");
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let sock = dir.path().join("server.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
        let connect = format!(
            "import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect({:?})\n    print('connected')\nexcept OSError:\n    print('refused')\n",
            sock.display().to_string()
        );
        let wt = dir.path().join("wt");
        std::fs::create_dir_all(wt.join("tmp")).expect("mkdir");
        let run = |wrapped: bool| {
            let mut argv: Vec<std::ffi::OsString> = if wrapped {
                super::bwrap_wrapper(&wt, &wt.join("tmp"), false, &[], &[])
            } else {
                Vec::new()
            };
            argv.extend(["python3".into(), "-c".into(), connect.clone().into()]);
            let out = std::process::Command::new(&argv[0])
                .args(&argv[1..])
                .output()
                .expect("run");
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        assert_eq!(run(false), "connected", "the server answers outside");
        assert_eq!(run(true), "refused");
    }

    /// A worktree in a temporary directory and the `bwrap` arguments of a sandbox of it that
    /// masks no socket; `None` (said) where bubblewrap cannot run.
    fn plain_sandbox() -> Option<(
        tempfile::TempDir,
        std::path::PathBuf,
        Vec<std::ffi::OsString>,
    )> {
        if super::probe().is_err() {
            eprintln!("skipped: bubblewrap cannot run here");
            return None;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let wt = dir.path().join("wt");
        std::fs::create_dir_all(wt.join("tmp")).expect("mkdir");
        let args = super::Confinement {
            worktree: &wt,
            writable: true,
            tmp: &wt.join("tmp"),
            network: false,
            hide: &[],
            expose: &[],
            home: None,
            mask_sockets: false,
            start_in: None,
        }
        .bwrap_args();
        Some((dir, wt, args))
    }

    /// A masked socket removed before bubblewrap's setup (a SLURM step's, an SSH agent's) does
    /// not fail the command: its mask is left out and the sandbox set up again. The command
    /// runs once, and its exit code is kept.
    #[test]
    fn a_socket_removed_before_the_setup_does_not_fail_the_command() {
        let Some((dir, wt, mut argv)) = plain_sandbox() else {
            return;
        };
        // The mask of a socket listed, then removed: before bubblewrap's closing `--`.
        let gone = dir.path().join("gone.sock");
        let end = argv.len() - 1;
        argv.splice(
            end..end,
            [
                "--ro-bind-try".into(),
                "/dev/null".into(),
                gone.into_os_string(),
            ],
        );
        let run = |argv: &[std::ffi::OsString]| {
            std::process::Command::new(&argv[0])
                .args(&argv[1..])
                .args(["/bin/sh", "-c", "echo ran >> runs; exit 3"])
                .output()
                .expect("run")
        };
        let plain = run(&argv);
        assert!(
            String::from_utf8_lossy(&plain.stderr).contains("Can't create file"),
            "bubblewrap alone fails at the mask: {plain:?}"
        );
        assert!(!wt.join("runs").exists(), "and never runs the command");
        let retried = run(&super::retrying(argv.clone()));
        assert_eq!(retried.status.code(), Some(3), "{retried:?}");
        assert_eq!(
            std::fs::read_to_string(wt.join("runs")).expect("runs"),
            "ran\n",
            "run once"
        );
        // A failure that drops no mask (here an option bubblewrap does not know) is not
        // tried again.
        let mut bad = super::retrying(argv[..end].to_vec());
        bad.extend(["--no-such-option".into(), "--".into()]);
        let failed = run(&bad);
        assert_eq!(failed.status.code(), Some(1), "{failed:?}");
        let said = String::from_utf8_lossy(&failed.stderr);
        assert_eq!(said.matches("no-such-option").count(), 1, "{said}");
    }

    /// bubblewrap is the own child of the shell that starts it, whatever shell runs the
    /// script (bash forks a subshell for a command substitution unless it is told to exec):
    /// its `--die-with-parent` then follows that shell, which dies with hone.
    #[test]
    fn bubblewrap_is_the_child_of_the_shell_that_starts_it() {
        let Some((_dir, _wt, args)) = plain_sandbox() else {
            return;
        };
        let wrapped = super::retrying(args);
        for shell in ["/bin/sh", "bash"] {
            let mut command = std::process::Command::new(shell);
            if shell == "bash" {
                command.arg("--posix");
            }
            let started = command
                .args(&wrapped[1..])
                .args(["/bin/sh", "-c", "sleep 30"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn();
            let mut leader = match started {
                Ok(child) => child,
                Err(_) if shell == "bash" => continue,
                Err(e) => panic!("{shell}: {e}"),
            };
            let children = format!("/proc/{0}/task/{0}/children", leader.id());
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            // The shell's first child, until it is bubblewrap (a fork becomes it at its exec).
            let seen = loop {
                let kid = std::fs::read_to_string(&children).unwrap_or_default();
                let kid = kid.split_whitespace().next().map(str::to_string);
                let comm = kid
                    .as_ref()
                    .and_then(|k| std::fs::read_to_string(format!("/proc/{k}/comm")).ok())
                    .unwrap_or_default();
                if comm.trim() == "bwrap" || std::time::Instant::now() > deadline {
                    break comm;
                }
                std::thread::yield_now();
            };
            let _ = leader.kill();
            let _ = leader.wait();
            assert_eq!(seen.trim(), "bwrap", "{shell}: the shell's child");
        }
    }

    /// Only sockets the sandbox could reach are masked: not one under a skipped directory
    /// (hidden, or the worktree), not one behind another user's private directory (bubblewrap
    /// could not mount there, and the sandbox could not pass it either).
    #[test]
    fn only_reachable_sockets_outside_the_skipped_places_are_masked() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let open = dir.path().join("open.sock");
        let skipped = dir.path().join("wt");
        let private = dir.path().join("private");
        std::fs::create_dir_all(&skipped).expect("mkdir");
        std::fs::create_dir_all(&private).expect("mkdir");
        let in_wt = skipped.join("in.sock");
        let behind = private.join("their.sock");
        let _a = std::os::unix::net::UnixListener::bind(&open).expect("bind");
        let _b = std::os::unix::net::UnixListener::bind(&in_wt).expect("bind");
        let _c = std::os::unix::net::UnixListener::bind(&behind).expect("bind");
        // SAFETY: geteuid cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        if root {
            // Another user's private directory (chown needs root; CI runs as root).
            std::os::unix::fs::chown(&private, Some(65534), Some(65534)).expect("chown");
            std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700))
                .expect("chmod");
        }
        let masks = super::socket_masks(&[skipped.as_path()]);
        assert!(masks.contains(&open), "{masks:?}");
        assert!(!masks.contains(&in_wt), "{masks:?}");
        if root {
            assert!(!masks.contains(&behind), "{masks:?}");
        }
        assert!(masks.len() <= super::MAX_SOCKET_MASKS);
    }

    #[test]
    fn the_host_sockets_are_read_from_proc_net_unix() {
        let text = "Num       RefCount Protocol Flags    Type St Inode Path\n\
                    0000000000000000: 00000002 00000000 00010000 0001 01 20815 /run/munge/munge.socket.2\n\
                    0000000000000000: 00000002 00000000 00010000 0001 01 20816 @/tmp/.X11-unix/X0\n\
                    0000000000000000: 00000003 00000000 00000000 0001 03 20817\n\
                    0000000000000000: 00000002 00000000 00010000 0001 01 20818 /tmp/a dir/agent.sock\n\
                    0000000000000000: 00000002 00000000 00010000 0001 01 20819 /run/munge/munge.socket.2\n";
        let mut bytes = text.as_bytes().to_vec();
        bytes.extend_from_slice(
            b"0000000000000000: 00000002 00000000 00010000 0001 01 20820 /tmp/x\xff.sock\n",
        );
        let paths = super::listening_socket_paths(&bytes);
        assert_eq!(
            paths,
            [
                std::path::PathBuf::from("/run/munge/munge.socket.2"),
                std::path::PathBuf::from("/tmp/a dir/agent.sock"),
                std::path::PathBuf::from(
                    <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(
                        b"/tmp/x\xff.sock"
                    )
                ),
            ]
        );
    }

    #[test]
    fn accelerator_device_files_are_found_by_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in [
            "nvidia0",
            "nvidiactl",
            "nvidia-uvm",
            "kfd",
            "null",
            "tty1",
            "sda",
        ] {
            std::fs::write(dir.path().join(name), "").expect("write");
        }
        std::fs::create_dir(dir.path().join("dri")).expect("dir");
        let names: Vec<String> = super::accelerator_devices(dir.path())
            .iter()
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        assert_eq!(names, ["dri", "kfd", "nvidia-uvm", "nvidia0", "nvidiactl"]);
    }

    use super::*;

    fn strings(args: &[OsString]) -> Vec<String> {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    /// Is `flag` followed by `values` somewhere in `args`?
    fn has(args: &[String], flag: &[&str]) -> bool {
        args.windows(flag.len()).any(|w| w == flag)
    }

    #[test]
    fn every_sandbox_drops_capabilities_and_unshares_its_namespaces() {
        let dir = tempfile::tempdir().expect("tempdir");
        let wt = dir.path().join("wt");
        let tmp = wt.join(".hone/tmp");
        let state = dir.path().join(".hone");
        let data = dir.path().join("holdout.csv");
        std::fs::create_dir_all(&tmp).expect("tmp");
        std::fs::create_dir_all(&state).expect("state");
        std::fs::write(&data, "secret").expect("data");
        let hide = [state.clone(), data.clone(), dir.path().join("missing")];
        for (writable, network) in [(true, true), (true, false), (false, false)] {
            let args = strings(
                &Confinement {
                    worktree: &wt,
                    writable,
                    tmp: &tmp,
                    network,
                    hide: &hide,
                    expose: &[],
                    home: None,
                    mask_sockets: false,
                    start_in: None,
                }
                .bwrap_args(),
            );
            assert_eq!(args[0], super::bwrap_program().to_string_lossy());
            assert!(Path::new(&args[0]).is_absolute(), "{args:?}");
            assert_eq!(args.last().map(String::as_str), Some("--"));
            for flag in [
                "--unshare-user",
                "--unshare-pid",
                "--unshare-ipc",
                "--unshare-uts",
                "--new-session",
                "--die-with-parent",
            ] {
                assert!(args.iter().any(|a| a == flag), "{flag} missing: {args:?}");
            }
            assert!(has(&args, &["--cap-drop", "ALL"]), "{args:?}");
            assert_eq!(args.iter().any(|a| a == "--unshare-net"), !network);
            let s = |p: &Path| p.display().to_string();
            // Hidden: the directory under an empty tmpfs, the file behind /dev/null, a
            // missing path not at all; and the hiding comes before the worktree's mount.
            let hidden = args
                .windows(2)
                .position(|w| w == [String::from("--tmpfs"), s(&state)])
                .expect("state hidden");
            assert!(
                has(&args, &["--ro-bind", "/dev/null", &s(&data)]),
                "{args:?}"
            );
            assert!(!args.iter().any(|a| a.ends_with("missing")), "{args:?}");
            let mount = if writable { "--bind" } else { "--ro-bind" };
            let wt_at = args
                .windows(3)
                .position(|w| w == [mount.to_string(), s(&wt), s(&wt)])
                .expect("worktree mounted");
            assert!(hidden < wt_at, "{args:?}");
            // A read-only worktree gets a private in-memory TMPDIR mounted over it.
            assert_eq!(has(&args, &["--tmpfs", &s(&tmp)]), !writable, "{args:?}");
            assert!(has(&args, &["--setenv", "TMPDIR", &s(&tmp)]), "{args:?}");
        }
    }
}
