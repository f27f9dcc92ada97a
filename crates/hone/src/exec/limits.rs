//! The limits a child process starts under: resource limits (`setrlimit`) inherited by all it
//! starts, and a kill when the thread that started it ends. Both applied between fork and
//! exec, with async-signal-safe calls only.

use std::io;

/// Resource limits applied with `setrlimit(2)` in the child before it runs the command.
/// Each is inherited by every process the command starts; `None` leaves hone's own limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Limits {
    /// Address space per process (`RLIMIT_AS`), bytes.
    pub memory_bytes: Option<u64>,
    /// CPU time per process (`RLIMIT_CPU`), seconds: SIGXCPU at the limit, SIGKILL a second later.
    pub cpu_seconds: Option<u64>,
    /// Largest file a process may write (`RLIMIT_FSIZE`), bytes.
    pub file_bytes: Option<u64>,
    /// Processes of the user (`RLIMIT_NPROC`); not enforced for root.
    pub processes: Option<u64>,
}

impl Limits {
    pub(super) fn is_empty(&self) -> bool {
        *self == Limits::default()
    }
}

/// Applies `limits` in a freshly forked child (only async-signal-safe calls: setrlimit).
pub(super) fn apply_limits(limits: &Limits) -> io::Result<()> {
    let set = |resource, soft: u64, hard: u64| -> io::Result<()> {
        let lim = libc::rlimit {
            rlim_cur: soft as libc::rlim_t,
            rlim_max: hard as libc::rlim_t,
        };
        // SAFETY: setrlimit with a valid pointer to a local struct.
        if unsafe { libc::setrlimit(resource, &lim) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    };
    if let Some(b) = limits.memory_bytes {
        set(libc::RLIMIT_AS, b, b)?;
    }
    if let Some(s) = limits.cpu_seconds {
        set(libc::RLIMIT_CPU, s, s.saturating_add(1))?;
    }
    if let Some(b) = limits.file_bytes {
        set(libc::RLIMIT_FSIZE, b, b)?;
    }
    if let Some(n) = limits.processes {
        set(libc::RLIMIT_NPROC, n, n)?;
    }
    Ok(())
}

/// Asks for `SIGKILL` when the thread that forked this process ends, unless `parent` is
/// already gone (it would never come). Between fork and exec: async-signal-safe calls only.
pub(super) fn die_with(parent: libc::pid_t) -> io::Result<()> {
    // SAFETY: prctl with PR_SET_PDEATHSIG takes a signal number and touches no memory;
    // getppid cannot fail.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::getppid() != parent {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
    }
    Ok(())
}
