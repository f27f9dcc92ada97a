//! The sandbox of each role the verifier starts (agent, reviewer, verifier, holdout): what it
//! may read, write and reach, as `crate::sandbox::Confinement` says it to bubblewrap.

use std::path::Path;

use super::{Role, Verifier};

impl Verifier {
    /// The sandbox prefix for a process confined to `wt` (empty without bubblewrap). Agents
    /// and reviewers keep the network (they talk to their models); the verifier follows
    /// `[sandbox] network`; the holdout never has it.
    ///
    /// No role can read hone's state (`.hone/`: the database, logs and holdout results); an
    /// agent may read its prompts. Agents, reviewers and verifiers cannot read
    /// `[verify.holdout] hide` either. The holdout reads `hide` (its evaluator loads it) but
    /// runs candidate code, so it gets no channel out: a read-only worktree, an in-memory
    /// `TMPDIR`, no network, and its own IPC, UTS and PID namespaces (every sandbox has those,
    /// and no capabilities, see `sandbox::Confinement`).
    pub(in crate::engine) fn wrapper(
        &self,
        wt: &Path,
        network: bool,
        role: Role,
    ) -> Vec<std::ffi::OsString> {
        self.confined(wt, network, role, None)
    }

    /// [`Verifier::wrapper`], starting in `start_in` (which the sandbox must show) instead of
    /// the worktree when given.
    pub(in crate::engine) fn confined(
        &self,
        wt: &Path,
        network: bool,
        role: Role,
        start_in: Option<&Path>,
    ) -> Vec<std::ffi::OsString> {
        if !self.contained {
            return Vec::new();
        }
        let tmp = crate::sandbox::scratch_dir(wt);
        let mut hide = vec![self.paths.dir.clone()];
        let mut expose = Vec::new();
        if role != Role::Holdout {
            if let Some(h) = &self.spec.verify.holdout {
                hide.extend(h.hide.iter().map(|p| self.git.root().join(p)));
            }
        }
        if role == Role::Agent {
            expose.push(self.paths.run_dir(&self.tag).join("prompts"));
        }
        // An agent CLI's login, settings and sessions: no role's to read (the verifier runs
        // what the model wrote); the agent itself gets a private home of the run's, seeded
        // with a copy of what the tool needs (a reviewer command, which also starts as an
        // agent, does not).
        let preset = self.spec.agent.kind.preset();
        let real_home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        if let (Some(p), Some(home)) = (preset, &real_home) {
            hide.extend(p.state_paths(home));
        }
        let private_home = self.private_home();
        let home = match (preset, &real_home) {
            (Some(p), Some(home)) if role == Role::Agent && start_in.is_none() => {
                use std::os::unix::fs::DirBuilderExt as _;
                // Seeded once, when made: afterwards it holds what the agent wrote, which hone
                // must not write through (a link it planted could lead anywhere).
                let fresh = std::fs::symlink_metadata(&private_home).is_err();
                let _ = std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&private_home);
                if fresh {
                    p.seed_home(home, &private_home);
                }
                Some(private_home.as_path())
            }
            _ => None,
        };
        let holdout = role == Role::Holdout;
        crate::sandbox::Confinement {
            worktree: wt,
            writable: !holdout,
            tmp: &tmp,
            network: network && !holdout,
            hide: &hide,
            expose: &expose,
            home,
            // A SLURM job's sandbox starts on a compute node, whose sockets are not these.
            mask_sockets: role == Role::Agent
                || self.spec.exec.backend != crate::spec::Backend::Slurm,
            start_in,
        }
        .wrapper()
    }
}

/// The most an agent CLI's private home may hold between turns: more is removed (seeded again
/// at the next turn) and the turn that grew it is invalid. A tool's sessions and caches take
/// megabytes; the agent must not fill the disk through it.
const PRIVATE_HOME_MAX: u64 = 1 << 30;

/// The most files and directories the private home may hold: empty files cost no bytes but
/// use up the file system's inodes.
const PRIVATE_HOME_ENTRIES: u64 = 100_000;

/// How many files and directories stand below `dir` (links not followed), counting up to
/// `most`.
fn entries_below(dir: &Path, most: u64) -> u64 {
    let mut count = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            count += 1;
            if count >= most {
                return count;
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
        }
    }
    count
}

impl Verifier {
    /// Where an agent CLI runs with its own home under bubblewrap (`.hone/runs/<tag>/home`).
    pub(in crate::engine) fn private_home(&self) -> std::path::PathBuf {
        self.paths.run_dir(&self.tag).join("home")
    }

    /// Removes the private home after a turn that grew it past [`PRIVATE_HOME_MAX`], or to
    /// 1 MiB or more on a disk now full, and says why (`None`: left as it is), with whether
    /// the turn filled the disk (its candidate is then invalid; a home grown past the bound
    /// by honest work, a download cache say, costs only the cache).
    pub(in crate::engine) fn trim_private_home(&self) -> Option<(String, bool)> {
        let home = self.private_home();
        std::fs::symlink_metadata(&home).ok()?;
        let bytes = crate::workspace::on_disk(&home);
        let entries = entries_below(&home, PRIVATE_HOME_ENTRIES + 1);
        let full = crate::workspace::disk_nearly_full(&home) && bytes >= 1 << 20;
        if !full && bytes <= PRIVATE_HOME_MAX && entries <= PRIVATE_HOME_ENTRIES {
            return None;
        }
        crate::workspace::remove_any(&home).ok()?;
        let why = format!(
            "the agent's private home ({}) held {bytes} bytes in {entries} entries{}: removed, and seeded again at the next turn",
            home.display(),
            if full {
                " when the disk was full"
            } else {
                " (at most 1 GiB, 100,000 entries)"
            }
        );
        Some((why, full))
    }
}
