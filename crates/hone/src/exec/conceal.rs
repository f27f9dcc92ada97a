//! What hone's own process shows of itself to the processes it starts. Code a model wrote runs
//! as hone's user, and `/proc/<hone's pid>/environ` holds every variable hone was started with,
//! the API keys it withholds from that code among them. [`conceal_self`] makes hone
//! non-dumpable (a process of the same unprivileged user can then neither read hone's
//! `/proc` entry nor trace it) and wipes the environment block the kernel shows (for root,
//! which may read any `/proc` entry: not its memory, which root can still read).

/// Conceals hone's environment from other processes. The variables stay as they were for
/// hone and for what it starts. Returns whether the block the kernel shows was wiped (false
/// where it could not be found or a variable still lives in it, e.g. an entry with no name).
///
/// # Safety
///
/// Call it first thing in `main`, while no other thread exists: it rewrites the process's
/// environment, which another thread could be reading.
pub unsafe fn conceal_self() -> bool {
    // SAFETY: prctl with PR_SET_DUMPABLE takes an integer flag and no pointers.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
    // SAFETY: the caller promises a single thread.
    unsafe { wipe_initial_environment() }
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

extern "C" {
    static environ: *const *const libc::c_char;
}

/// Copies every variable out of the block the process started with (`setenv` of the same
/// value points the environment at a copy of its own) and, once no variable lives there any
/// more, overwrites the block with zeros. An entry `setenv` cannot take (no name, a name with
/// `=`) stays where it is, and then nothing is wiped.
///
/// # Safety
///
/// As [`conceal_self`]: no other thread may read or change the environment meanwhile.
pub(crate) unsafe fn wipe_initial_environment() -> bool {
    let Some((start, end)) = environment_block() else {
        return false;
    };
    // SAFETY: `environ` is libc's NULL-terminated array of pointers to `NAME=value` strings;
    // the entries are copied out before any `setenv` changes the array.
    let entries: Vec<Vec<u8>> = unsafe {
        let mut out = Vec::new();
        let mut p = environ;
        while !p.is_null() && !(*p).is_null() {
            out.push(std::ffi::CStr::from_ptr(*p).to_bytes().to_vec());
            p = p.add(1);
        }
        out
    };
    for entry in entries {
        let Some(eq) = entry.iter().position(|b| *b == b'=').filter(|at| *at > 0) else {
            continue;
        };
        let (Ok(name), Ok(value)) = (
            std::ffi::CString::new(&entry[..eq]),
            std::ffi::CString::new(&entry[eq + 1..]),
        ) else {
            continue;
        };
        // SAFETY: valid NUL-terminated strings; a failure leaves the entry as it was (and the
        // check below then declines to wipe).
        unsafe {
            libc::setenv(name.as_ptr(), value.as_ptr(), 1);
        }
    }
    // SAFETY: as above; read after the last change to the array.
    let still_there = unsafe {
        let mut p = environ;
        let mut inside = false;
        while !p.is_null() && !(*p).is_null() {
            inside |= (start..end).contains(&(*p as usize));
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
    /// In a child process (the test binary run again with a marker), the block is wiped: its
    /// own `/proc/self/environ` (readable whoever runs the test) no longer holds a secret it
    /// was given, while the variable still reads the same and reaches what it starts.
    #[test]
    fn the_environment_block_is_wiped_and_the_variables_stay() {
        if std::env::var_os("HONE_CONCEAL_CHILD").is_some() {
            let before = std::fs::read("/proc/self/environ").unwrap();
            assert!(before.windows(17).any(|w| w == b"sk-the-secret-123"));
            // SAFETY: the test runs alone in this process (`--test-threads=1`), and nothing
            // else of the test harness reads the environment meanwhile.
            assert!(unsafe { super::wipe_initial_environment() });
            let after = std::fs::read("/proc/self/environ").unwrap();
            assert!(!after.windows(17).any(|w| w == b"sk-the-secret-123"));
            assert!(after.iter().all(|b| *b == 0), "the whole block is wiped");
            assert_eq!(
                std::env::var("CONCEAL_SECRET").unwrap(),
                "sk-the-secret-123"
            );
            let out = std::process::Command::new("sh")
                .args(["-c", "printf %s \"$CONCEAL_SECRET\""])
                .output()
                .unwrap();
            assert_eq!(out.stdout, b"sk-the-secret-123");
            println!("CHILD-OK");
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
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success() && said.contains("CHILD-OK"), "{said}");
    }
}
