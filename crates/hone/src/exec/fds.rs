//! File descriptors hone was started with beyond stdin, stdout and stderr (a `flock` wrapper's
//! lock on the repository, a shell's stray redirection, a service manager's socket): marked
//! close-on-exec before every process [`super::spawn`] starts (agents, verifiers, the holdout,
//! reviewer commands, bubblewrap), so that none of them inherits one. (hone's own git, the
//! bubblewrap probe and `sbatch`, started otherwise, run no candidate code.) A descriptor of a directory opens every path below it through `/proc/self/fd`, past
//! whatever a sandbox mounts read-only or hides; hone's own descriptors are close-on-exec
//! already (Rust's standard library, SQLite and the PostgreSQL client open them so).

/// Marks every open descriptor above 2 close-on-exec; returns how many were not yet. Cheap
/// (one listing of `/proc/self/fd`): called before each process hone starts, not only once.
pub fn seal_inherited_fds() -> usize {
    let fds: Vec<i32> = match std::fs::read_dir("/proc/self/fd") {
        Ok(entries) => entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .filter(|&fd| fd > 2)
            .collect(),
        // No /proc: every descriptor the process may have (at most 65,536 tried).
        Err(_) => {
            // SAFETY: sysconf takes a constant and cannot fail in a way that matters here.
            let max = unsafe { libc::sysconf(libc::_SC_OPEN_MAX) };
            (3..max.clamp(1024, 65_536) as i32).collect()
        }
    };
    let mut sealed = 0;
    for fd in fds {
        // SAFETY: fcntl on a descriptor number with integer arguments only; one that is not
        // open (the listing's own, closed by now) fails with EBADF and is passed over.
        let done = unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            flags >= 0
                && flags & libc::FD_CLOEXEC == 0
                && libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) == 0
        };
        sealed += usize::from(done);
    }
    sealed
}
