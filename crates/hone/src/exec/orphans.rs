//! Orphans: descendants of a finished verifier stage that left its process group and outlived
//! their parent. hone makes itself their reaper (`PR_SET_CHILD_SUBREAPER`) and kills what is
//! left between stages; while several verifications run at once, it kills instead what carries
//! the finished stage's experiment token (`HONE_JOB`).
//!
//! Both find processes through `/proc`. A process running as root can hide its entry there (a
//! mount over `/proc/<pid>`, or over `/proc` itself); before looking, such mounts are taken
//! away ([`super::unhide_processes`]).

/// Makes hone the reaper of every orphan among its descendants (Linux
/// `PR_SET_CHILD_SUBREAPER`): a process that left the verifier's group with `setsid` and
/// outlived its parent is re-parented to hone instead of to init, so [`kill_orphans`] can end
/// it. Returns false where the kernel refuses.
pub fn become_subreaper() -> bool {
    // Before any agent runs: the table of mounts, as the sweep will read it.
    super::unhide::remember_mounts();
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes an integer flag and no pointers.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 }
}

/// Set while several verifications run at once (`[exec] workers`): then no moment is "between
/// stages" for the whole process, so [`kill_orphans`] does nothing until it is cleared.
static CONCURRENT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Marks the start (`true`) or end (`false`) of concurrent verifications.
pub fn set_concurrent(on: bool) {
    CONCURRENT.store(on, std::sync::atomic::Ordering::SeqCst);
}

/// Kills every descendant of this process and reaps its children. Call it only when hone has no process of its
/// own running (between verifier stages): what is left then are descendants of finished
/// stages that escaped their process group. Returns how many were killed. While verifications
/// run concurrently (see [`set_concurrent`]) it kills nothing: another thread's verifier or
/// git command is a child too.
pub fn kill_orphans() -> usize {
    if CONCURRENT.load(std::sync::atomic::Ordering::SeqCst) {
        return 0;
    }
    let me = std::process::id();
    let mut killed = 0;
    // Each round kills every descendant at once, however deep (a chain of processes each
    // waiting for its child, killed one level a round, outlasted any bound on the rounds);
    // what a dying process forked meanwhile comes to hone and is caught the next round.
    for round in 0..64 {
        // Most often there is none: then no scan of every process on the machine.
        if !has_children() {
            break;
        }
        if round == 0 {
            super::unhide_processes();
        }
        let family = descendants_of(me);
        if family.is_empty() {
            break;
        }

        for &(pid, _, started) in &family {
            // Pinned by a pidfd and checked to be the process the scan found (its start time):
            // a grandchild reaped meanwhile by its own parent may have left its pid to a
            // stranger.
            let fd = super::group::pidfd_open(pid as u32);
            if started.is_some() && super::process_start_time(pid as u32) == started {
                killed += usize::from(super::group::signal_pinned(pid as u32, fd.as_ref()));
            }
        }
        for &(pid, parent, _) in &family {
            if parent == me {
                // SAFETY: waiting for our own child, which was just killed.
                unsafe {
                    libc::waitpid(pid, std::ptr::null_mut(), 0);
                }
            }
        }
    }
    killed
}

/// Ends what a finished stage of experiment `job` (its `HONE_JOB` token) left running outside
/// its process group. Serially, every orphan ([`kill_orphans`]: a process that cleared its
/// environment too). While several verifications run at once an orphan cannot be told from
/// another slot's process, so every process carrying the token is killed instead (one that
/// cleared its environment then lives until the concurrent part ends). Returns how many.
pub fn kill_leftovers(job: Option<&str>) -> usize {
    if CONCURRENT.load(std::sync::atomic::Ordering::SeqCst) {
        super::unhide_processes();
        return job.map_or(0, |token| super::kill_groups_with_env("HONE_JOB", token));
    }
    kill_orphans()
}

/// Reaps the zombies among the calling thread's own children (`__WNOTHREAD`), waiting for
/// none that still runs. The kernel hands an orphan to the subreaper's main thread, while each
/// slot's thread forks, and waits for, its own processes: so on the main thread, at a moment it
/// waits for no child of its own (the parallel loop's coordinator between decisions), this
/// reaps exactly the orphans that exited by themselves, which no token scan can name (a
/// zombie's environment is gone) and which would otherwise pile up, one process-table entry
/// each, until the concurrent part ends. On any other thread it finds none of them. Returns
/// how many it reaped.
pub fn reap_adopted() -> usize {
    let mut reaped = 0;
    loop {
        // SAFETY: a zeroed siginfo_t is a valid out-parameter; with WNOHANG waitid never
        // blocks, and with __WNOTHREAD it reaps only children of this thread.
        let pid = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let r = libc::waitid(
                libc::P_ALL,
                0,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::__WNOTHREAD | libc::__WALL,
            );
            if r == 0 {
                info.si_pid()
            } else {
                0
            }
        };
        if pid == 0 {
            return reaped;
        }
        reaped += 1;
    }
}

/// Whether this process has a child at all, of any of its threads, running or a zombie (an
/// orphan re-parented to hone included: the kernel makes it a plain child): `waitid` answers
/// `ECHILD` exactly when there is none. Nothing is reaped (`WNOWAIT`). Any other answer, an
/// error included, counts as "maybe", so that the caller looks.
pub(super) fn has_children() -> bool {
    // SAFETY: a zeroed siginfo_t is a valid out-parameter, and waitid with WNOHANG | WNOWAIT
    // neither blocks nor changes any child's state.
    let r = unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        libc::waitid(
            libc::P_ALL,
            0,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT | libc::__WALL,
        )
    };
    !(r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD))
}

/// Every descendant of `root` (children, their children, ...) with its parent and its start
/// time (clock ticks after boot: with the pid, it names one process), from one scan of
/// /proc: `(pid, ppid, start)`.
pub(super) fn descendants_of(root: u32) -> Vec<(i32, u32, Option<u64>)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let procs: Vec<(i32, u32, Option<u64>)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // Fields after the command name: state (3), ppid (4), ... starttime (22).
            let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
            let ppid = fields.get(1)?.parse().ok()?;
            Some((pid, ppid, fields.get(22 - 3).and_then(|t| t.parse().ok())))
        })
        .collect();
    let mut children: std::collections::HashMap<u32, Vec<(i32, Option<u64>)>> =
        std::collections::HashMap::new();
    for &(pid, ppid, start) in &procs {
        children.entry(ppid).or_default().push((pid, start));
    }
    let mut found = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut next = vec![root];
    while let Some(parent) = next.pop() {
        for &(pid, start) in children.get(&parent).map_or(&[][..], |c| &c[..]) {
            // A pid seen twice (a loop read across a wrap of pid numbers) is taken once.
            if pid as u32 != root && seen.insert(pid) {
                found.push((pid, parent, start));
                next.push(pid as u32);
            }
        }
    }
    found
}
