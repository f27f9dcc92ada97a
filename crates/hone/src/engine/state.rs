//! Where a run's state lives: `.hone/` in the repository (database, lock, logs, worktrees),
//! the shared directory of a SLURM run, the store a repository's records go to, the refs that
//! name a run's branch and experiments, and the hashes sealed when the run started.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::spec::Spec;
use crate::store::{now, Store, StoreLocation};
use crate::workspace::{Git, RefListing};

use super::{Config, EngineError, Event, Fs, Shared};

/// Where hone keeps its state inside a repository (excluded from git).
pub const STATE_DIR: &str = ".hone";

/// Paths of hone's state in a repository.
#[derive(Clone, Debug)]
pub struct StatePaths {
    pub dir: PathBuf,
}

impl StatePaths {
    pub fn new(repo_root: &Path) -> StatePaths {
        StatePaths {
            dir: repo_root.join(STATE_DIR),
        }
    }
    pub fn db(&self) -> PathBuf {
        self.dir.join("hone.db")
    }
    pub fn lock(&self) -> PathBuf {
        self.dir.join("lock")
    }
    pub fn run_dir(&self, tag: &str) -> PathBuf {
        self.dir.join("runs").join(tag)
    }
    pub fn worktree(&self, tag: &str) -> PathBuf {
        self.dir.join("worktrees").join(tag)
    }
    /// Experiment `n`'s spend journal (`propose::Spend::with_journal`): what it may have
    /// spent, a model call that is out included, for a resume after a crash.
    pub fn spend_journal(&self, tag: &str, n: u64) -> PathBuf {
        self.run_dir(tag).join("spend").join(n.to_string())
    }
}

/// The key that names this repository's runs in a shared PostgreSQL store: `[store] repo`;
/// with remote workers, `[exec] remote` (the repository they fetch candidates from); else the
/// URL of the `origin` remote (without credentials), so every clone of a project on every host
/// sees the same runs; else the checkout's own path.
pub fn repo_key(git: &Git, spec: &Spec) -> String {
    let remote = || {
        (spec.exec.backend == crate::spec::Backend::Workers)
            .then(|| spec.exec.remote.clone())
            .flatten()
    };
    let origin = || {
        git.run(&["config", "--get", "remote.origin.url"])
            .ok()
            .map(|u| without_credentials(u.trim()))
            .filter(|u| !u.is_empty())
    };
    spec.exec
        .store_repo
        .clone()
        .or_else(remote)
        .or_else(origin)
        .unwrap_or_else(|| {
            let root = git.root();
            root.canonicalize()
                .unwrap_or_else(|_| root.to_path_buf())
                .display()
                .to_string()
        })
}

/// `https://user:token@host/x.git` as `https://host/x.git`: a key is stored and shown.
fn without_credentials(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://") {
        let (authority, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if let Some((_, host)) = authority.rsplit_once('@') {
            return format!("{scheme}://{host}{tail}");
        }
    }
    url.to_string()
}

/// Where the records of the repository at `git` live: `[store] url` (under [`repo_key`]), or
/// `.hone/hone.db`.
pub fn store_location(git: &Git, spec: &Spec) -> StoreLocation {
    match &spec.exec.store_url {
        Some(url) => StoreLocation::Postgres {
            url: url.clone(),
            repo: repo_key(git, spec),
        },
        None => StoreLocation::Sqlite(StatePaths::new(git.root()).db()),
    }
}

/// [`store_location`] by the repository's `hone.toml` (or `spec_path`); a repository without
/// one keeps its records in `.hone/hone.db`. A spec that does not load is an error: it may name
/// a shared store.
pub fn configured_store(
    repo_root: &Path,
    spec_path: Option<&Path>,
) -> Result<StoreLocation, EngineError> {
    configured_store_of(&Git::discover(repo_root)?, spec_path)
}

/// [`configured_store`] of a repository already found (`git`).
pub fn configured_store_of(
    git: &Git,
    spec_path: Option<&Path>,
) -> Result<StoreLocation, EngineError> {
    let path = spec_path
        .map(Path::to_path_buf)
        .unwrap_or_else(|| git.root().join("hone.toml"));
    if spec_path.is_none() && !path.exists() {
        return Ok(StoreLocation::Sqlite(StatePaths::new(git.root()).db()));
    }
    let spec = Spec::load(&path).map_err(|e| EngineError::from(Config::StoreSpec(e)))?;
    Ok(store_location(git, &spec))
}

/// Registers this process as the coordinator of run `tag` when the run lives in a shared
/// store: one coordinator at a time, whichever host it is on (the local lock only covers this
/// checkout). Fails, saying who coordinates it, while another one's heartbeat is fresh.
pub(super) fn coordinate(
    store: &Store,
    spec: &Spec,
    git: &Git,
    tag: &str,
) -> Result<Option<crate::queue::Coordination>, EngineError> {
    let (true, Some(url)) = (store.is_shared(), spec.exec.store_url.as_deref()) else {
        return Ok(None);
    };
    // The caller holds this checkout's lock, so an earlier coordinator from the same place
    // (killed before it could release its registration) is gone: its registration is taken
    // over rather than waited out.
    let place = format!(
        "on {} in {}",
        crate::worker::host_name(),
        git.root().display()
    );
    let owner = format!("hone run (pid {}) {place}", std::process::id());
    let key = format!("{}#{tag}", store.repo());
    crate::queue::Coordination::start(url, &key, &owner, Some(&place))
        .map(Some)
        .map_err(|e| Shared::Coordination(e).into())
}

/// With `[exec] backend = "slurm"`, this run's directory under the shared directory (its
/// worktree and job files), named after the repository so that several can share it.
pub(super) fn shared_run_dir(spec: &Spec, repo_root: &Path, tag: &str) -> Option<PathBuf> {
    use sha2::Digest as _;
    let shared = spec.exec.shared_dir.as_ref()?;
    if spec.exec.backend != crate::spec::Backend::Slurm {
        return None;
    }
    let digest = sha2::Sha256::digest(repo_root.as_os_str().as_encoded_bytes());
    let short: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    let name = repo_root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "repo".into());
    Some(shared.join(format!("{name}-{short}")).join(tag))
}

/// Makes a SLURM run's repository folder on the shared file system (where its worktree and
/// jobs live, and candidates' code runs) private, as `.hone/` is; nothing without SLURM.
/// A folder that is someone else's, or open to others, is refused: its name is predictable,
/// and whoever owns it could swap what runs there.
pub(super) fn private_shared_dir(
    spec: &Spec,
    repo_root: &Path,
    tag: &str,
) -> Result<(), EngineError> {
    use std::os::unix::fs::MetadataExt;
    let Some(run_dir) = shared_run_dir(spec, repo_root, tag) else {
        return Ok(());
    };
    let Some(repo_dir) = run_dir.parent() else {
        return Ok(());
    };
    std::fs::create_dir_all(repo_dir).map_err(|error| Fs::Create {
        path: repo_dir.to_path_buf(),
        error,
    })?;
    crate::util::owner_only(repo_dir);
    let meta = std::fs::symlink_metadata(repo_dir).map_err(|error| Fs::Open {
        path: repo_dir.to_path_buf(),
        error,
    })?;
    // SAFETY: geteuid takes nothing and cannot fail.
    let me = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != me || meta.mode() & 0o077 != 0 {
        return Err(Fs::NotPrivate {
            path: repo_dir.to_path_buf(),
        }
        .into());
    }
    Ok(())
}

/// Where a run's worktree lives: under `.hone/`, or under the shared directory for SLURM.
pub(super) fn worktree_path(
    paths: &StatePaths,
    spec: &Spec,
    repo_root: &Path,
    tag: &str,
) -> PathBuf {
    match shared_run_dir(spec, repo_root, tag) {
        Some(dir) => dir.join("worktree"),
        None => paths.worktree(tag),
    }
}

/// When the disk holding `.hone/` is full (a run stopped by it, most likely because a
/// candidate filled it), removes the runs' worktrees and parallel slots under it before
/// anything is written: what the last candidates left there is what fills the disk, each is
/// made again when its run goes on, and no record depends on them (an interrupted candidate's
/// record comes from its archive ref). Called under the state lock, so no run is using them;
/// what a killed hone of this repository left running (its `HONE_JOB` says so) is killed
/// first, since a file it holds open keeps its room until it exits.
pub(super) fn free_room(paths: &StatePaths, root: &Path, on_event: &mut dyn FnMut(&Event)) {
    if !crate::workspace::disk_nearly_full(&paths.dir) {
        return;
    }
    crate::exec::kill_groups_with_env_prefix("HONE_JOB", &super::verifier::job_prefix(root));
    let mut removed = Vec::new();
    for dir in [paths.dir.join("worktrees"), paths.dir.join("slots")] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            if crate::workspace::remove_any(&e.path()).is_ok() {
                removed.push(e.path());
            }
        }
    }
    // Agent CLIs' private homes (seeded again at their next turn).
    if let Ok(runs) = std::fs::read_dir(paths.dir.join("runs")) {
        for home in runs.flatten().map(|r| r.path().join("home")) {
            if std::fs::symlink_metadata(&home).is_ok()
                && crate::workspace::remove_any(&home).is_ok()
            {
                removed.push(home);
            }
        }
    }
    if !removed.is_empty() {
        let names: Vec<String> = removed.iter().map(|p| p.display().to_string()).collect();
        on_event(&Event::Warning {
            message: format!(
                "the disk is full: removed what the last candidates left ({}); hone makes each again",
                names.join(", ")
            ),
        });
    }
}

/// How often the loop packs its refs (`git pack-refs --all`): every this many experiments.
/// Each experiment adds a loose archive ref, and the integrity checks read every loose ref
/// under the run's prefix several times per experiment, so fewer loose refs is a cheaper
/// check; packing rewrites `packed-refs` whole, so not after every experiment.
pub(super) const PACK_REFS_EVERY: usize = 16;

/// Packs the repository's refs when `count` experiments have been run (see
/// [`PACK_REFS_EVERY`]). A failure is left for the next time (refs stay loose, which git reads
/// as well).
pub(super) fn pack_refs_now_and_then(git: &Git, count: usize) {
    if count % PACK_REFS_EVERY == PACK_REFS_EVERY - 1 {
        let _ = git.run(&["pack-refs", "--all"]);
    }
}

/// The archive ref of experiment `n`.
pub fn archive_ref(tag: &str, n: u64) -> String {
    format!("refs/hone/{tag}/{n}")
}

/// The run branch of a tag.
pub fn branch_ref(tag: &str) -> String {
    format!("refs/heads/hone/{tag}")
}

/// The run's branch and archive refs, as (name, object name as the ref holds it), sorted. Not
/// peeled: the integrity checks compare what the refs hold, and a ref put back is put back
/// from what it held ([`restore_refs`]); where a commit is needed, the caller peels.
pub(super) fn run_refs(git: &Git, tag: &str) -> Result<RefListing, EngineError> {
    Ok(git.refs_under_and(&format!("refs/hone/{tag}/"), &branch_ref(tag))?)
}

/// Puts refs back as they were (deleting ones that appeared, then making again the ones that
/// went: a ref in the place of a directory that appeared can be made only once it is gone);
/// returns their names. The two listings are walked side by side in name order (a run holds a
/// ref per experiment).
pub(super) fn restore_refs(
    git: &Git,
    before: &RefListing,
    after: &RefListing,
) -> Result<String, EngineError> {
    use std::cmp::Ordering;
    let (mut changed, mut gone) = (Vec::new(), Vec::new());
    let (mut was, mut now) = (before.iter().peekable(), after.iter().peekable());
    loop {
        let order = match (was.peek(), now.peek()) {
            (None, None) => break,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some((a, _)), Some((b, _))) => a.cmp(b),
        };
        match order {
            Ordering::Less => gone.extend(was.next()),
            Ordering::Greater => changed.extend(now.next().map(|(n, held)| (n, None, held))),
            Ordering::Equal => {
                if let (Some((name, value)), Some((_, held))) = (was.next(), now.next()) {
                    if value != held {
                        changed.push((name, Some(value), held));
                    }
                }
            }
        }
    }
    let mut moved = Vec::new();
    for (name, was, held) in changed {
        git.put_ref_back(&name, was.as_deref(), &held)?;
        moved.push(name.into_owned());
    }
    for (name, was) in gone {
        git.update_ref(&name, &was, None)?;
        moved.push(name.into_owned());
    }
    Ok(moved.join(", "))
}

/// Hashes taken at the start of a run.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct Seals {
    /// Protected (and tracked pinned) files, as checked out at the base commit.
    pub(super) protected: BTreeMap<String, String>,
    /// Pinned inputs in the user's checkout (or absolute paths).
    pub(super) pinned: BTreeMap<String, String>,
    /// The `pinned` list the hashes were taken from.
    #[serde(default)]
    pub(super) pinned_paths: Vec<String>,
    /// The largest of the `protected` files at the base commit, in bytes (set when a session
    /// opens, not stored): a file larger than that has changed, and is not read to say so.
    #[serde(skip)]
    pub(super) protected_bound: Option<u64>,
}

impl Seals {
    /// Sets [`Seals::protected_bound`] from the protected files' blobs at `base` (none when
    /// they cannot be read: every file is then hashed, whatever its size).
    pub(super) fn bound_at(&mut self, git: &Git, base: &str) {
        let sealed = self.protected.keys().map(String::as_str);
        self.protected_bound = git.largest_blob(base, sealed).ok();
    }
}

/// An exclusive lock on a repository's state, released when dropped.
pub(super) struct StateLock {
    _file: std::fs::File,
}

pub(super) fn lock_state(path: &Path) -> Result<StateLock, EngineError> {
    use std::os::unix::io::AsRawFd;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|error| Fs::Open {
            path: path.to_path_buf(),
            error,
        })?;
    // A reader such as `hone status` may hold the lock for an instant; retry briefly.
    for _ in 0..20 {
        // SAFETY: flock on a valid, open file descriptor owned by `file`.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            // Who holds it, for the next `hone run` to name (best effort: the lock is the
            // flock, not this text).
            use std::io::Write as _;
            let _ = file.set_len(0);
            let _ = (&file).write_all(format!("{}\n", std::process::id()).as_bytes());
            return Ok(StateLock { _file: file });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let holder = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok());
    Err(EngineError::Locked {
        path: path.to_path_buf(),
        holder,
    })
}

/// True while a `hone run` holds the repository's state lock.
pub fn is_running(repo_root: &Path) -> bool {
    let lock = StatePaths::new(repo_root).lock();
    let Ok(file) = std::fs::OpenOptions::new().write(true).open(&lock) else {
        return false;
    };
    use std::os::unix::io::AsRawFd;
    // SAFETY: flock on a valid, open file descriptor owned by `file`; a shared probe that is
    // released when `file` is dropped.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) != 0 }
}

/// A valid run tag: it becomes part of a branch name and of paths.
pub fn validate_tag(tag: &str) -> Result<(), EngineError> {
    crate::tag::check(tag).map_err(|e| Config::Tag(e).into())
}

/// Today's date as YYYYMMDD (UTC), the default tag.
pub fn today_tag() -> String {
    crate::util::utc_text(now().floor() as i64, "%Y%m%d")
}

pub(super) fn unique_tag(store: &Store, git: &Git) -> Result<String, EngineError> {
    let base = today_tag();
    let mut tag = base.clone();
    let mut i = 2;
    while store.run_by_tag(&tag)?.is_some()
        || git.ref_target(&branch_ref(&tag))?.is_some()
        || !git.refs_under(&format!("refs/hone/{tag}/"))?.is_empty()
    {
        tag = format!("{base}-{i}");
        i += 1;
    }
    Ok(tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slurm_runs_shared_folder_is_made_private_and_refused_when_another_users() {
        use std::os::unix::fs::PermissionsExt;
        let shared = tempfile::tempdir().expect("a temporary directory");
        let text = format!(
            "[loop]\neditable = [\"a.py\"]\n[verify]\ncommand = \"x\"\nmetric = \"m\"\n\
             [exec]\nbackend = \"slurm\"\nshared_dir = \"{}\"\n",
            shared.path().display()
        );
        let spec = Spec::parse(Path::new("hone.toml"), &text).expect("a spec");
        let root = Path::new("/work/project");
        let repo_dir = shared_run_dir(&spec, root, "t")
            .and_then(|d| d.parent().map(Path::to_path_buf))
            .expect("a shared folder");
        std::fs::create_dir_all(&repo_dir).expect("made");
        std::fs::set_permissions(&repo_dir, std::fs::Permissions::from_mode(0o755))
            .expect("opened");
        private_shared_dir(&spec, root, "t").expect("ours: made private");
        let mode = std::fs::metadata(&repo_dir)
            .expect("there")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700, "{mode:o}");
        // SAFETY: geteuid takes nothing.
        if unsafe { libc::geteuid() } == 0 {
            // Another user's (as root, the test can make it so): refused.
            std::os::unix::fs::chown(&repo_dir, Some(65534), None).expect("chown");
            let e = private_shared_dir(&spec, root, "t").expect_err("refused");
            assert!(e.to_string().contains("belongs to another user"), "{e}");
        }
    }

    #[test]
    fn repository_keys_carry_no_credentials() {
        assert_eq!(
            without_credentials("https://me:ghp_secret@github.com/lab/p.git"),
            "https://github.com/lab/p.git"
        );
        assert_eq!(
            without_credentials("git@github.com:lab/p.git"),
            "git@github.com:lab/p.git"
        );
        assert_eq!(
            without_credentials("ssh://git@host/a@b/p.git"),
            "ssh://host/a@b/p.git"
        );
    }
}
