//! What hone's own process shows of itself to the processes it starts. Code a model wrote runs
//! as hone's user, and `/proc/<hone's pid>/environ` holds every variable hone was started with,
//! the API keys it withholds from that code among them. [`conceal_self`] makes hone
//! non-dumpable (a process of the same unprivileged user can then neither read hone's
//! `/proc` entry nor trace it) and wipes the environment block the kernel shows (for root,
//! which may read any `/proc` entry: not its memory, which root can still read).

/// Conceals hone's environment from other processes; call it first thing in `main`, before any
/// thread exists. The variables stay as they were for hone and for what it starts. Returns
/// whether the block the kernel shows was wiped (false where it could not be found or a
/// variable still lives in it).
pub fn conceal_self() -> bool {
    // SAFETY: prctl with PR_SET_DUMPABLE takes an integer flag and no pointers.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
    wipe_initial_environment()
}

/// The bounds of the environment block the kernel shows as `/proc/self/environ` (fields 50
/// and 51 of `/proc/self/stat`).
fn environment_block() -> Option<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    // After the command name: state is field 3, so field k is at k - 3.
    let start = fields.get(50 - 3)?.parse().ok()?;
    let end = fields.get(51 - 3)?.parse().ok()?;
    (start < end).then_some((start, end))
}

/// Copies every variable out of the block the process started with (`setenv` of the same
/// value points the environment at a copy of its own) and, once no variable lives there any
/// more, overwrites the block with zeros.
fn wipe_initial_environment() -> bool {
    let Some((start, end)) = environment_block() else {
        return false;
    };
    for (k, v) in std::env::vars_os() {
        std::env::set_var(k, v);
    }
    extern "C" {
        static environ: *const *const libc::c_char;
    }
    // SAFETY: `environ` is libc's NULL-terminated array of pointers to the variables; it is
    // read here on the only thread, after the last change to it.
    let still_there = unsafe {
        let mut p = environ;
        let mut inside = false;
        while !p.is_null() && !(*p).is_null() {
            let at = *p as usize;
            inside |= (start..end).contains(&at);
            p = p.add(1);
        }
        inside
    };
    if still_there {
        return false;
    }
    // SAFETY: [start, end) is the environment block the kernel set up on this process's stack
    // (writable, and ours); no variable points into it any more (checked above), and nothing
    // else refers to it: the arguments and the program's name lie outside it.
    unsafe {
        std::ptr::write_bytes(start as *mut u8, 0, end - start);
    }
    true
}

#[cfg(test)]
mod tests {
    /// In a child process (the test binary run again with a marker), the block is wiped:
    /// `/proc/<its pid>/environ`, read from outside, no longer holds a secret it was given,
    /// while the child itself still reads it and passes it on.
    #[test]
    fn the_environment_block_is_wiped_and_the_variables_stay() {
        if std::env::var_os("HONE_CONCEAL_CHILD").is_some() {
            assert!(super::conceal_self());
            let out = std::process::Command::new("sh")
                .args(["-c", "printf %s \"$CONCEAL_SECRET\"; cat /proc/$PPID/environ | tr '\\0' '\\n' | grep -c CONCEAL_SECRET || true"])
                .output()
                .unwrap();
            print!(
                "[{}]",
                String::from_utf8_lossy(&out.stdout).replace('\n', ";")
            );
            return;
        }
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new(exe)
            .args([
                "--exact",
                "exec::conceal::tests::the_environment_block_is_wiped_and_the_variables_stay",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("HONE_CONCEAL_CHILD", "1")
            .env("CONCEAL_SECRET", "sk-the-secret-123")
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{said}");
        // The child's own view keeps the value; its /proc entry has no such variable.
        assert!(said.contains("[sk-the-secret-1230;]"), "{said}");
    }
}
