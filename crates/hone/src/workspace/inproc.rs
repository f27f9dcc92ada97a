//! The hot path's git operations done inside hone through libgit2 (the `git2` crate), without
//! a `git` process: ref reads and compare-and-swap updates with their reflog, rev-parse of
//! commits and trees, commits, raw blob hashing and writing, tree listings and blob reads.
//!
//! Every operation opens the repository afresh by its known top level (never by discovery
//! from a directory a candidate can write, never from `GIT_DIR`-style variables), so it sees
//! exactly what a `git` process started at that moment would: no pack or ref cache outlives
//! the call (a racing `git gc` cannot leave a stale view), and nothing is shared between the
//! engine's threads. libgit2 runs no hooks and no fsmonitor, and blobs go to the object
//! database as raw bytes, so no filter or attribute conversion applies.

use std::path::Path;

use git2::{ObjectType, Oid, Repository, RepositoryOpenFlags, Signature};

use super::{Git, GitError};

/// The identity of every commit and reflog entry hone writes (as `git_command` sets it).
const NAME: &str = "hone";
const EMAIL: &str = "hone@localhost";

/// A libgit2 failure, in the shape of a failed git command (what hone tried, what it said).
pub(super) fn failed(what: &str, e: &git2::Error) -> GitError {
    GitError::Failed {
        args: what.to_string(),
        stderr: e.message().to_string(),
    }
}

/// An object name from its full hex form (an abbreviation is refused, not padded).
pub(super) fn oid(what: &str, hex: &str) -> Result<Oid, GitError> {
    if !is_full_hex(hex) {
        return Err(GitError::Failed {
            args: what.to_string(),
            stderr: format!("`{hex}` is not a full object name"),
        });
    }
    Oid::from_str(hex).map_err(|e| failed(what, &e))
}

/// Is `s` a full object name (40 hex digits)?
pub fn is_full_hex(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Makes libgit2 read only the repository's own configuration: no system, global or XDG file
/// (the command-line path sets `core.attributesFile=/dev/null` for the same reason: a global
/// attributes or diff setting must not change which files count as binary or how they are
/// counted). Done once, before the first repository is opened by this process.
fn isolate_from_user_config() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for level in [
            git2::ConfigLevel::System,
            git2::ConfigLevel::XDG,
            git2::ConfigLevel::Global,
            git2::ConfigLevel::ProgramData,
        ] {
            // SAFETY: libgit2's search paths are process-wide and must not change while
            // another thread uses libgit2; every libgit2 use in hone opens its repository
            // through `Git::repo`, which runs this (once) first, and `Once` makes every other
            // caller wait until it is done. An empty path means "no file at this level".
            // A failure leaves libgit2's defaults, which only the user controls.
            let _ = unsafe { git2::opts::set_search_path(level, "") };
        }
        // SAFETY: as above (process-wide, set before any repository is opened).
        // Partial clones (`git clone --filter=...`) carry `extensions.partialClone`, which
        // libgit2 refuses unless told it may: hone only reads objects that are present (the
        // candidate's, the run's), and a missing one is an error as any other.
        let _ = unsafe { git2::opts::set_extensions(&["partialclone"]) };
        // SAFETY: as above. libgit2 would check the owner of the repository against
        // `safe.directory` read from the global configuration, which is switched off here;
        // `Git::discover` found the root through command-line git, which has already applied
        // git's own ownership rules (and the user's `safe.directory`) to it.
        let _ = unsafe { git2::opts::set_verify_owner_validation(false) };
    });
}

/// What a ref holds: its object name, or `ref: TARGET` for a symbolic ref (not followed).
fn held(r: &git2::Reference<'_>) -> Option<String> {
    match r.target() {
        Some(t) => Some(t.to_string()),
        None => r
            .symbolic_target_bytes()
            .map(|t| format!("ref: {}", String::from_utf8_lossy(t))),
    }
}

/// How long a ref update waits for a lock another git process holds (`git update-ref` waits
/// `core.filesRefLockTimeout`, 100 ms by default; a `git gc` packing refs holds each briefly).
const REF_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Locks `name` in `tx`, retrying while another process holds its lock, up to
/// [`REF_LOCK_WAIT`].
fn lock_ref(tx: &mut git2::Transaction<'_>, name: &str) -> Result<(), git2::Error> {
    let start = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        match tx.lock_ref(name) {
            Err(e) if e.code() == git2::ErrorCode::Locked && start.elapsed() < REF_LOCK_WAIT => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

impl Git {
    /// The repository, opened afresh at its top level: no search upwards, no environment.
    pub(super) fn repo(&self) -> Result<Repository, GitError> {
        isolate_from_user_config();
        Repository::open_ext(
            &self.root,
            RepositoryOpenFlags::NO_SEARCH,
            std::iter::empty::<&std::ffi::OsStr>(),
        )
        .map_err(|e| failed(&format!("open {}", self.root.display()), &e))
    }

    /// What `git rev-parse --verify --quiet SPEC` prints, `None` where it prints nothing
    /// (no such name, or an object missing or of the wrong kind for a `^{...}` suffix).
    pub(super) fn rev_parse(&self, repo: &Repository, spec: &str) -> Option<String> {
        repo.revparse_single(spec).ok().map(|o| o.id().to_string())
    }

    /// The object name `name` holds without looking the object up (`rev-parse --verify` of a
    /// ref): a full object name stands for itself; a ref is read through git's abbreviation
    /// rules and its symbolic links.
    pub(super) fn ref_value(&self, repo: &Repository, name: &str) -> Option<String> {
        if is_full_hex(name) {
            return Some(name.to_ascii_lowercase());
        }
        let r = repo.resolve_reference_from_short_name(name).ok()?;
        let r = r.resolve().ok()?;
        r.target().map(|o| o.to_string())
    }

    /// Refs whose names start with `prefix` (which ends with `/`), sorted by name, each with
    /// the object it names, as `for-each-ref` lists them: a ref naming a missing object is
    /// listed, one that cannot be read (or a symbolic ref leading nowhere) is left out.
    pub(super) fn refs_with_prefix(&self, prefix: &str) -> Result<Vec<(String, String)>, GitError> {
        if let Some(refs) = super::ref_files::list(&self.root, prefix) {
            return Ok(refs);
        }
        self.check_ref_files()?;
        self.refs_with_prefix_libgit2(prefix, true)
    }

    /// `Git::refs_with_prefix` as one listing, its packed refs held compactly (what a
    /// resumed run's recovery walks: a ref per experiment).
    pub fn refs_listing(&self, prefix: &str) -> Result<super::RefListing, GitError> {
        if let Some(listing) = super::ref_files::listing_under(&self.root, prefix) {
            return Ok(listing);
        }
        self.check_ref_files()?;
        Ok(super::RefListing::new(
            self.refs_with_prefix_libgit2(prefix, true)?,
        ))
    }

    /// What the ref `name` holds, nothing peeled and nothing followed: an object name, or
    /// `ref: TARGET` for a symbolic ref (so that a ref of hone's made symbolic reads as moved,
    /// even where it leads to the same commit); `None`: no such ref.
    pub fn ref_value_raw(&self, name: &str) -> Result<Option<String>, GitError> {
        if self.loose_ref_path_has_link(name) {
            return Ok(Some(self.link_value(name)));
        }
        let repo = self.repo()?;
        let Ok(r) = repo.find_reference(name) else {
            return Ok(None);
        };
        Ok(held(&r))
    }

    /// Is any part of the path of the loose ref `name` (under the shared `.git`) a file system
    /// link? (Also where the shared directory cannot be found: then nothing is assumed.)
    pub(super) fn loose_ref_path_has_link(&self, name: &str) -> bool {
        let Ok(mut path) = self.common_dir() else {
            return true;
        };
        for part in name.split('/') {
            path.push(part);
            match std::fs::symlink_metadata(&path) {
                Ok(m) if m.file_type().is_symlink() => return true,
                Ok(m) if m.is_dir() => {}
                _ => return false,
            }
        }
        false
    }

    /// The value a ref whose loose path has a link on it is listed with: `link: ` and where
    /// the link leads, so that it never reads as the object name it leads to.
    fn link_value(&self, name: &str) -> String {
        let path = self.common_dir().map(|d| d.join(name)).unwrap_or_default();
        let to = std::fs::read_link(&path).unwrap_or_default();
        format!("link: {}", to.display())
    }

    /// [`Git::refs_with_prefix`] through libgit2, whatever the layout.
    /// With `follow` false, a symbolic ref is listed as `ref: TARGET` ([`Git::ref_value_raw`]).
    pub(super) fn refs_with_prefix_libgit2(
        &self,
        prefix: &str,
        follow: bool,
    ) -> Result<Vec<(String, String)>, GitError> {
        let repo = self.repo()?;
        let what = format!("for-each-ref {prefix}");
        let mut out = Vec::new();
        let refs = repo
            .references_glob(&format!("{prefix}*"))
            .map_err(|e| failed(&what, &e))?;
        for r in refs {
            let Ok(r) = r else { continue };
            let Some(name) = r.name().map(str::to_string) else {
                continue;
            };
            if !name.starts_with(prefix) {
                continue;
            }
            // A direct ref names its object: no resolution (a lookup of the ref again, a
            // stat and a search of packed-refs each, which made this listing grow with the
            // square of a long run's archive refs). Only a symbolic ref is followed (or, with
            // `follow` false, listed as what it holds).
            let target = match (r.target(), follow) {
                (Some(t), _) => t.to_string(),
                (None, false) => match held(&r) {
                    Some(t) => t,
                    None => continue,
                },
                (None, true) => match r.resolve().ok().and_then(|r| r.target()) {
                    Some(t) => t.to_string(),
                    None => continue,
                },
            };
            // A link where the ref's file would be: what it holds is the link, not the ref it
            // leads to (which libgit2 read through it).
            let target = if !follow && self.loose_ref_path_has_link(&name) {
                self.link_value(&name)
            } else {
                target
            };
            out.push((name, target));
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// Points the direct ref `name` at `new` if it now holds `old` (`None`: must not exist),
    /// under the ref's lock, with a reflog entry where git would write one. `Ok(false)`: it
    /// held something else (left as it was). `Ok(None)` from the outer option: the ref is
    /// symbolic, which command-line git handles (it moves the ref it points to).
    pub(super) fn swap_ref(
        &self,
        name: &str,
        new: &str,
        old: Option<&str>,
    ) -> Result<Option<bool>, GitError> {
        let what = format!("update-ref {name} {new}");
        let repo = self.repo()?;
        let new_id = if is_full_hex(new) {
            oid(&what, new)?
        } else {
            repo.revparse_single(new)
                .map_err(|e| failed(&what, &e))?
                .id()
        };
        let old = old.map(str::to_ascii_lowercase);
        let old = old.as_deref();
        let object = repo
            .find_object(new_id, None)
            .map_err(|e| failed(&what, &e))?;
        if name.starts_with("refs/heads/") && object.kind() != Some(ObjectType::Commit) {
            return Err(GitError::Failed {
                args: what,
                stderr: format!("trying to write non-commit object {new} to branch '{name}'"),
            });
        }
        // A link on the loose ref's path (a file system link where the ref's file would be):
        // libgit2 would take the lock of, and write, the file it leads to (another branch).
        // Command-line git with `--no-deref` replaces the link itself.
        if self.loose_ref_path_has_link(name) {
            return Ok(None);
        }
        let mut tx = repo.transaction().map_err(|e| failed(&what, &e))?;
        lock_ref(&mut tx, name).map_err(|e| failed(&what, &e))?;
        // Read under the lock: no git process can move the ref until the transaction ends.
        let current = match repo.find_reference(name) {
            Ok(r) if r.symbolic_target_bytes().is_some() => return Ok(None),
            Ok(r) => r.target().map(|o| o.to_string()),
            Err(e) if e.code() == git2::ErrorCode::NotFound => None,
            Err(e) => return Err(failed(&what, &e)),
        };
        if current.as_deref() != old {
            return Ok(Some(false));
        }
        let sig = Signature::now(NAME, EMAIL).map_err(|e| failed(&what, &e))?;
        tx.set_target(name, new_id, Some(&sig), "hone")
            .map_err(|e| failed(&what, &e))?;
        tx.commit().map_err(|e| failed(&what, &e))?;
        Ok(Some(true))
    }

    /// `git update-ref --no-deref HEAD COMMIT` run in worktree `wt` (whose `.git` link the
    /// caller has checked): the worktree's own HEAD detached at `commit` (a full object name)
    /// under its lock, whatever it held (a branch a proposer checked out is left where it
    /// is), with the reflog entry git writes there. libgit2 keeps HEAD and its reflog in the
    /// worktree's administrative directory, as git does.
    pub(super) fn detach_worktree_head(&self, wt: &Path, commit: &str) -> Result<(), GitError> {
        let what = format!("update-ref --no-deref HEAD {commit}");
        let repo = open_worktree(wt, &what)?;
        let id = oid(&what, commit)?;
        // As git, refuse to point HEAD at an object the repository does not have.
        repo.find_object(id, None).map_err(|e| failed(&what, &e))?;
        let mut tx = repo.transaction().map_err(|e| failed(&what, &e))?;
        lock_ref(&mut tx, "HEAD").map_err(|e| failed(&what, &e))?;
        let sig = Signature::now(NAME, EMAIL).map_err(|e| failed(&what, &e))?;
        tx.set_target("HEAD", id, Some(&sig), "hone")
            .map_err(|e| failed(&what, &e))?;
        tx.commit().map_err(|e| failed(&what, &e))
    }

    /// `git read-tree COMMIT` run in worktree `wt` (whose `.git` link the caller has
    /// checked): the worktree's index made exactly `commit`'s tree, with no stat data and no
    /// flag of the old entries (a cleared index, so that libgit2 carries nothing over), under
    /// the index's lock. An index libgit2 cannot read (one git wrote with an extension it
    /// does not know, or a corrupt one) is an error: the caller then runs git itself.
    pub(super) fn read_tree_in_worktree(&self, wt: &Path, commit: &str) -> Result<(), GitError> {
        let what = format!("read-tree {commit}");
        let repo = open_worktree(wt, &what)?;
        let tree = repo
            .find_commit(oid(&what, commit)?)
            .and_then(|c| c.tree())
            .map_err(|e| failed(&what, &e))?;
        let mut index = repo.index().map_err(|e| failed(&what, &e))?;
        index.clear().map_err(|e| failed(&what, &e))?;
        index.read_tree(&tree).map_err(|e| failed(&what, &e))?;
        index.write().map_err(|e| failed(&what, &e))
    }

    /// `git commit-tree TREE -p PARENT -m MESSAGE`: a commit by hone, now.
    pub(super) fn commit_tree(
        &self,
        repo: &Repository,
        tree: &str,
        parent: &str,
        message: &str,
    ) -> Result<String, GitError> {
        let what = format!("commit-tree {tree} -p {parent}");
        let tree = repo
            .find_tree(oid(&what, tree)?)
            .map_err(|e| failed(&what, &e))?;
        let parent = repo
            .revparse_single(parent)
            .and_then(|o| o.peel_to_commit())
            .map_err(|e| failed(&what, &e))?;
        let sig = Signature::now(NAME, EMAIL).map_err(|e| failed(&what, &e))?;
        // commit-tree ends the message with a line break, and changes nothing else in it.
        let mut text = message.to_string();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        repo.commit(None, &sig, &sig, &text, &tree, &[&parent])
            .map(|o| o.to_string())
            .map_err(|e| failed(&what, &e))
    }

    /// The blob id of raw bytes (`hash-object --no-filters --stdin`), written to the object
    /// store with `write`.
    pub(super) fn blob_id(
        &self,
        repo: &Repository,
        bytes: &[u8],
        write: bool,
    ) -> Result<String, GitError> {
        let what = "hash-object --no-filters";
        let id = if write {
            let odb = repo.odb().map_err(|e| failed(what, &e))?;
            odb.write(ObjectType::Blob, bytes)
        } else {
            Oid::hash_object(ObjectType::Blob, bytes)
        };
        id.map(|o| o.to_string()).map_err(|e| failed(what, &e))
    }

    /// The sizes of the blobs `ids` (`None`: not a blob this repository holds), from their
    /// headers: no content is read.
    pub(super) fn blob_lens(&self, ids: &[&str]) -> Vec<Option<u64>> {
        let odb = self.repo().ok();
        let odb = odb.as_ref().and_then(|r| r.odb().ok());
        ids.iter()
            .map(|id| {
                let odb = odb.as_ref()?;
                let (len, kind) = odb.read_header(Oid::from_str(id).ok()?).ok()?;
                (kind == ObjectType::Blob).then_some(len as u64)
            })
            .collect()
    }

    /// The size of the largest blob of `commit` at one of `paths` (0 when none is there), from
    /// the blobs' headers.
    pub fn largest_blob<'p>(
        &self,
        commit: &str,
        paths: impl IntoIterator<Item = &'p str>,
    ) -> Result<u64, GitError> {
        let repo = self.repo()?;
        let wanted: std::collections::BTreeSet<&str> = paths.into_iter().collect();
        let ids: Vec<String> = self
            .tree_entries(&repo, commit)?
            .into_iter()
            .filter(|(path, _, _)| wanted.contains(path.as_str()))
            .map(|(_, _, id)| id)
            .collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        Ok(self
            .blob_lens(&ids)
            .into_iter()
            .flatten()
            .max()
            .unwrap_or(0))
    }

    /// The tree of `commit` with each of `files` (a path that is a regular file there, and its
    /// new content) replaced, written to the object database; each file keeps its mode.
    pub fn tree_with(&self, commit: &str, files: &[(String, Vec<u8>)]) -> Result<String, GitError> {
        let what = format!("tree of {commit} with {} file(s) replaced", files.len());
        let fail = |e: git2::Error| failed(&what, &e);
        let repo = self.repo()?;
        let tree = repo
            .revparse_single(commit)
            .and_then(|o| o.peel_to_tree())
            .map_err(fail)?;
        let mut update = git2::build::TreeUpdateBuilder::new();
        for (path, content) in files {
            let entry = tree.get_path(Path::new(path)).map_err(fail)?;
            let mode = match entry.filemode() {
                m if m == i32::from(git2::FileMode::BlobExecutable) => {
                    git2::FileMode::BlobExecutable
                }
                m if m == i32::from(git2::FileMode::Blob) => git2::FileMode::Blob,
                _ => {
                    return Err(GitError::Failed {
                        args: what.clone(),
                        stderr: format!("`{path}` is not a regular file at {commit}"),
                    })
                }
            };
            let blob = repo.blob(content).map_err(fail)?;
            update.upsert(path.as_str(), blob, mode);
        }
        let id = update.create_updated(&repo, &tree).map_err(fail)?;
        Ok(id.to_string())
    }

    /// The blob ids of files under `wt`, their raw bytes hashed (and written, with `write`).
    pub(super) fn file_ids(
        &self,
        wt: &Path,
        paths: &[&str],
        write: bool,
    ) -> Result<Vec<String>, GitError> {
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let repo = self.repo()?;
        let odb = repo.odb().map_err(|e| failed("hash-object", &e))?;
        let mut out = Vec::with_capacity(paths.len());
        for p in paths {
            out.push(file_id(&odb, &wt.join(p), write)?);
        }
        Ok(out)
    }

    /// A commit's (or tree's) blobs and gitlinks, recursively and in tree order, as (path,
    /// mode, id): what `git ls-tree -r -z --full-tree` lists.
    pub(super) fn tree_entries(
        &self,
        repo: &Repository,
        treeish: &str,
    ) -> Result<Vec<(String, String, String)>, GitError> {
        let what = format!("ls-tree -r {treeish}");
        let tree = repo
            .revparse_single(treeish)
            .and_then(|o| o.peel_to_tree())
            .map_err(|e| failed(&what, &e))?;
        let mut out = Vec::new();
        list_into(repo, &tree, "", &mut out).map_err(|e| failed(&what, &e))?;
        Ok(out)
    }
}

/// Appends the blobs and gitlinks of `tree` (at `dir`, which is empty or ends with `/`).
fn list_into(
    repo: &Repository,
    tree: &git2::Tree<'_>,
    dir: &str,
    out: &mut Vec<(String, String, String)>,
) -> Result<(), git2::Error> {
    for e in tree.iter() {
        let path = format!("{dir}{}", String::from_utf8_lossy(e.name_bytes()));
        if e.kind() == Some(ObjectType::Tree) {
            let sub = repo.find_tree(e.id())?;
            list_into(repo, &sub, &format!("{path}/"), out)?;
        } else {
            out.push((path, format!("{:06o}", e.filemode()), e.id().to_string()));
        }
    }
    Ok(())
}

/// The blob id of the file at `full`, its raw bytes read as a stream (a large file is never
/// held in memory, as `git hash-object` streams it), and written to `odb` with `write`.
fn file_id(odb: &git2::Odb<'_>, full: &Path, write: bool) -> Result<String, GitError> {
    let what = "hash-object --no-filters";
    let io = |source| GitError::Io {
        path: full.to_path_buf(),
        source,
    };
    if !write {
        return Oid::hash_file(ObjectType::Blob, full)
            .map(|o| o.to_string())
            .map_err(|e| failed(what, &e));
    }
    let mut file = std::fs::File::open(full).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let len = usize::try_from(len).map_err(|_| GitError::Failed {
        args: what.into(),
        stderr: format!("{} is too large to store", full.display()),
    })?;
    let mut writer = odb
        .writer(len, ObjectType::Blob)
        .map_err(|e| failed(what, &e))?;
    // A file that changed size while it was read fails here (the writer was promised `len`).
    std::io::copy(&mut file, &mut writer).map_err(io)?;
    writer
        .finalize()
        .map(|o| o.to_string())
        .map_err(|e| failed(what, &e))
}

/// The linked worktree `wt` opened as itself (no upward search; its `.git` link checked by
/// the caller), or an error naming `what` when it is not a worktree of a repository.
fn open_worktree(wt: &Path, what: &str) -> Result<Repository, GitError> {
    isolate_from_user_config();
    let repo = Repository::open_ext(
        wt,
        RepositoryOpenFlags::NO_SEARCH,
        std::iter::empty::<&std::ffi::OsStr>(),
    )
    .map_err(|e| failed(what, &e))?;
    if !repo.is_worktree() {
        return Err(GitError::Failed {
            args: what.to_string(),
            stderr: format!("{} is not a worktree of this repository", wt.display()),
        });
    }
    Ok(repo)
}

impl Git {
    /// The content of a file in a commit when it holds at most `max` bytes (`None` for a
    /// larger one, which is never read whole).
    pub fn file_at_most(
        &self,
        commit: &str,
        path: &str,
        max: usize,
    ) -> Result<Option<Vec<u8>>, GitError> {
        let what = format!("cat-file blob {commit}:{path}");
        let repo = self.repo()?;
        let id = repo
            .revparse_single(commit)
            .and_then(|o| o.peel_to_tree())
            .and_then(|t| t.get_path(Path::new(path)))
            .map_err(|e| failed(&what, &e))?
            .id();
        // The object's header gives its size without inflating it.
        let (size, _) = repo
            .odb()
            .and_then(|odb| odb.read_header(id))
            .map_err(|e| failed(&what, &e))?;
        if size > max {
            return Ok(None);
        }
        let blob = repo.find_blob(id).map_err(|e| failed(&what, &e))?;
        Ok(Some(blob.content().to_vec()))
    }

    /// The content of a file in a commit.
    pub fn file_at(&self, commit: &str, path: &str) -> Result<Vec<u8>, GitError> {
        Ok(self
            .file_at_most(commit, path, usize::MAX)?
            .unwrap_or_default())
    }
}
