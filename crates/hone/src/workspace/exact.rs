//! The candidate's exact bytes. hone commits what a worktree holds, and rebuilds a worktree
//! from a commit, without any of git's content conversions: no clean or smudge filters, no
//! end-of-line rewriting, no `ident`, no working-tree encoding, whatever the repository's
//! config, `info/attributes` or the candidate's `.gitattributes` say. Files are hashed and
//! written as raw blobs (libgit2's object database: `hash-object --no-filters`), trees are
//! built from an in-memory index (a private index file through git for a path git might
//! judge otherwise), and a worktree is written from the raw blobs and checked against the
//! commit before a verifier runs.
//! It also finds what git cannot record at all (a repository inside the worktree, a path
//! longer than the system allows), which the gate turns into a violation.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};

use super::inproc::{failed, oid};
use super::space::remove_any;
use super::{git_command, Git, GitError};

mod walk;
use walk::{normal_mode, walk_against};

/// The longest path Linux resolves in one system call (`PATH_MAX`, with its NUL).
const PATH_MAX: usize = 4096;

/// The worktree's own directory of hone state (git ignores it; the sandbox's tmp lives there).
const STATE_DIR: &str = ".hone";

/// How many times a rebuild repairs what differs from the commit before a difference left
/// counts as a failure.
const FIX_PASSES: usize = 4;

/// One blob (or gitlink) of a commit's tree.
struct Entry {
    mode: String,
    sha: String,
}

/// A commit's files, and every directory that holds one.
struct Listing {
    files: BTreeMap<String, Entry>,
    dirs: BTreeSet<String>,
}

/// A regular file found where the commit has one: its path, and whether it is executable.
type Present = (String, bool);

/// What a walk of a worktree found beside the commit's files.
#[derive(Default)]
struct Found {
    /// Entries that are not the commit's (removed when fixing).
    extra: usize,
    /// Regular files at a path where the commit has one: (path, executable).
    files: Vec<Present>,
    /// Symlinks at a path where the commit has one.
    links: Vec<String>,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> GitError + '_ {
    move |source| GitError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Runs git in `cwd` with `stdin` fed from a thread (so a large answer cannot block it) and
/// an optional private index; returns its standard output.
fn git_io(
    cwd: &Path,
    args: &[&str],
    index: Option<&Path>,
    stdin: Vec<u8>,
) -> Result<Vec<u8>, GitError> {
    let mut c = git_command(cwd);
    c.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(i) = index {
        c.env("GIT_INDEX_FILE", i);
    }
    let mut child = c.spawn().map_err(GitError::Spawn)?;
    let mut input = child.stdin.take();
    let feeder = std::thread::spawn(move || {
        if let Some(mut pipe) = input.take() {
            // A git that exits early closes the pipe; its exit status tells what went wrong.
            let _ = pipe.write_all(&stdin);
        }
    });
    let out = child.wait_with_output().map_err(GitError::Spawn)?;
    let _ = feeder.join();
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(GitError::Failed {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

fn join(rel: &str, name: &str) -> String {
    if rel.is_empty() {
        name.to_string()
    } else {
        format!("{rel}/{name}")
    }
}

/// A path short enough to print.
fn shorten(p: &str) -> String {
    crate::util::cut_chars(p, 80)
}

/// The first directory on the way from `wt` to its file `rel` that is not a real directory
/// (a symlink, a file), if any. Nothing below such a place is read or written: a symlink
/// there would lead hone's own reads and writes (outside every sandbox) out of the worktree,
/// as git itself refuses to follow one (`has_symlink_leading_path`).
fn odd_ancestor(wt: &Path, rel: &str) -> Option<PathBuf> {
    let mut at = wt.to_path_buf();
    let mut parts: Vec<&str> = rel.split('/').collect();
    parts.pop();
    for part in parts {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Some(at),
            Err(_) => return None,
        }
    }
    None
}

static INDEX_COUNTER: AtomicU64 = AtomicU64::new(0);

impl Git {
    /// The tree of what `git add -A` would commit from `wt` (tracked files and untracked ones
    /// git does not ignore), with every file's raw bytes: nothing the repository's config or
    /// attributes say can change what is hashed. Gitlinks already in the index are kept;
    /// directories that are repositories of their own are left out (the gate rejects them).
    /// `staged`: the index's `ls-files -z -s -c` listing, when the caller has it already;
    /// `others`: the untracked files (`ls-files -z -o --exclude-standard`), likewise.
    pub(super) fn raw_tree(
        &self,
        wt: &Path,
        staged: Option<String>,
        others: Option<String>,
    ) -> Result<String, GitError> {
        let staged = match staged {
            Some(s) => s,
            None => self.run_in(wt, &["ls-files", "-z", "-s", "-c"])?,
        };
        let mut entries: BTreeMap<String, (String, String)> = BTreeMap::new();
        let mut paths: BTreeSet<String> = BTreeSet::new();
        // The index's blob of each tracked path: a large file of the same size is read.
        let mut indexed: BTreeMap<&str, &str> = BTreeMap::new();
        for rec in staged.split('\0').filter(|s| !s.is_empty()) {
            let Some((meta, path)) = rec.split_once('\t') else {
                continue;
            };
            let mut m = meta.split(' ');
            match (m.next(), m.next()) {
                (Some("160000"), Some(sha)) => {
                    entries.insert(path.to_string(), ("160000".into(), sha.to_string()));
                }
                (_, sha) => {
                    if let Some(sha) = sha {
                        indexed.insert(path, sha);
                    }
                    paths.insert(path.to_string());
                }
            }
        }
        // Command-line git here because the untracked files git would add follow every
        // .gitignore, info/exclude and core.excludesFile rule.
        let others = match others {
            Some(o) => o,
            None => self.run_in(wt, &["ls-files", "-z", "-o", "--exclude-standard"])?,
        };
        paths.extend(
            others
                .split('\0')
                .filter(|s| !s.is_empty() && !s.ends_with('/'))
                .map(str::to_string),
        );
        let mut regular: Vec<(String, &'static str, u64)> = Vec::new();
        for p in paths {
            // Below a symlinked directory the path is not in the worktree: deleted, as git
            // sees it (the symlink itself is committed, if it is the agent's).
            if odd_ancestor(wt, &p).is_some() {
                continue;
            }
            let full = wt.join(&p);
            let meta = match std::fs::symlink_metadata(&full) {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_err(&full)(e)),
            };
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&full).map_err(io_err(&full))?;
                let sha = self.hash_bytes(target.as_os_str().as_bytes().to_vec(), true)?;
                entries.insert(p, ("120000".into(), sha));
            } else if meta.is_file() {
                let mode = if meta.permissions().mode() & 0o100 != 0 {
                    "100755"
                } else {
                    "100644"
                };
                regular.push((p, mode, meta.len()));
            }
        }
        self.new_content_fits(&regular, &indexed, super::MAX_NEW_FILE_BYTES)?;
        let (plain, odd): (Vec<_>, Vec<_>) =
            regular.into_iter().partition(|(p, _, _)| !p.contains('\n'));
        for (p, mode, _) in odd {
            let full = wt.join(&p);
            let bytes = std::fs::read(&full).map_err(io_err(&full))?;
            let sha = self.hash_bytes(bytes, true)?;
            entries.insert(p, (mode.into(), sha));
        }
        let names: Vec<&str> = plain.iter().map(|(p, _, _)| p.as_str()).collect();
        let shas = self.hash_files(wt, &names, true)?;
        for ((p, mode, _), sha) in plain.into_iter().zip(shas) {
            entries.insert(p, (mode.into(), sha));
        }
        match self.memory_tree(&entries)? {
            Some(tree) => Ok(tree),
            None => self.index_tree(wt, &entries),
        }
    }

    /// Whether the regular files of a snapshot (`files`: path, mode, size; `indexed`: the
    /// index's blob of each tracked path) hold at most `limit` bytes of new content
    /// ([`super::MAX_NEW_FILE_BYTES`]), a file as large as its index blob counting as none;
    /// else [`GitError::TooLarge`] with the new files to leave out, largest first, until the
    /// rest fits. Sizes only: nothing is read.
    pub(super) fn new_content_fits(
        &self,
        files: &[(String, &str, u64)],
        indexed: &BTreeMap<&str, &str>,
        limit: u64,
    ) -> Result<(), GitError> {
        let sum = |sizes: &mut dyn Iterator<Item = u64>| sizes.fold(0u64, u64::saturating_add);
        if sum(&mut files.iter().map(|f| f.2)) <= limit {
            return Ok(());
        }
        let ids: Vec<&str> = files
            .iter()
            .map(|(p, _, _)| indexed.get(p.as_str()).copied().unwrap_or_default())
            .collect();
        let new: Vec<(&String, u64)> = files
            .iter()
            .zip(self.blob_lens(&ids))
            .filter(|((_, _, len), blob)| *blob != Some(*len))
            .map(|((p, _, len), _)| (p, *len))
            .collect();
        if sum(&mut new.iter().map(|n| n.1)) <= limit {
            return Ok(());
        }
        let mut by_size = new;
        by_size.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let mut left = sum(&mut by_size.iter().map(|n| n.1));
        let mut out = Vec::new();
        for (p, len) in by_size {
            if left <= limit {
                break;
            }
            left -= len;
            out.push((p.clone(), len));
        }
        Err(GitError::TooLarge { files: out })
    }

    /// The tree of `entries` (path → (mode, id)) built by git itself through a private index.
    fn index_tree(
        &self,
        wt: &Path,
        entries: &BTreeMap<String, (String, String)>,
    ) -> Result<String, GitError> {
        // Command-line git here because a path git may judge by its own rules (a `.git`-like
        // or NTFS-special name, a file where another entry needs a directory) must meet
        // exactly git's answer.
        let mut input = Vec::new();
        for (p, (mode, sha)) in entries {
            input.extend_from_slice(format!("{mode} {sha}\t{p}\0").as_bytes());
        }
        let index = self.common_dir()?.join(format!(
            "hone-index-{}-{}",
            std::process::id(),
            INDEX_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let built = git_io(
            wt,
            &["update-index", "-z", "--index-info"],
            Some(&index),
            input,
        )
        .and_then(|_| git_io(wt, &["write-tree"], Some(&index), Vec::new()));
        let _ = std::fs::remove_file(&index);
        Ok(String::from_utf8_lossy(&built?).trim().to_string())
    }

    /// The tree of `entries` (path → (mode, id)) built from an in-memory index, the tree
    /// `update-index --index-info` and `write-tree` make; `None` when a path is one git
    /// might refuse or treat otherwise (see [`plain_paths`]), left to git itself.
    pub(super) fn memory_tree(
        &self,
        entries: &BTreeMap<String, (String, String)>,
    ) -> Result<Option<String>, GitError> {
        if !plain_paths(entries) {
            return Ok(None);
        }
        let what = "write-tree";
        let repo = self.repo()?;
        let mut index = git2::Index::new().map_err(|e| failed(what, &e))?;
        for (p, (mode, sha)) in entries {
            let mode = u32::from_str_radix(mode, 8).map_err(|_| GitError::Failed {
                args: what.into(),
                stderr: format!("bad mode {mode} for {p}"),
            })?;
            let entry = git2::IndexEntry {
                ctime: git2::IndexTime::new(0, 0),
                mtime: git2::IndexTime::new(0, 0),
                dev: 0,
                ino: 0,
                mode,
                uid: 0,
                gid: 0,
                file_size: 0,
                id: oid(what, sha)?,
                flags: 0,
                flags_extended: 0,
                path: p.as_bytes().to_vec(),
            };
            if index.add(&entry).is_err() {
                // libgit2 judged the path otherwise: git's own answer decides.
                return Ok(None);
            }
        }
        Ok(index.write_tree_to(&repo).ok().map(|t| t.to_string()))
    }

    /// The object ids of files under `wt`, hashed as raw bytes (`write`: written to the store).
    fn hash_files(&self, wt: &Path, paths: &[&str], write: bool) -> Result<Vec<String>, GitError> {
        self.file_ids(wt, paths, write)
    }

    /// The object id of `bytes` as a blob.
    fn hash_bytes(&self, bytes: Vec<u8>, write: bool) -> Result<String, GitError> {
        let repo = self.repo()?;
        self.blob_id(&repo, &bytes, write)
    }

    /// The raw content of blobs, by object id.
    fn blobs(&self, shas: &BTreeSet<&str>) -> Result<BTreeMap<String, Vec<u8>>, GitError> {
        let mut out = BTreeMap::new();
        if shas.is_empty() {
            return Ok(out);
        }
        let repo = self.repo()?;
        for sha in shas {
            let what = format!("cat-file blob {sha}");
            let blob = repo
                .find_blob(oid(&what, sha)?)
                .map_err(|e| failed(&what, &e))?;
            out.insert(sha.to_string(), blob.content().to_vec());
        }
        Ok(out)
    }

    /// A commit's files (`ls-tree -r`) and the directories that hold them.
    fn listing(&self, commit: &str) -> Result<Listing, GitError> {
        let repo = self.repo()?;
        let mut files = BTreeMap::new();
        let mut dirs = BTreeSet::new();
        for (path, mode, sha) in self.tree_entries(&repo, commit)? {
            let mut d = path.as_str();
            while let Some((parent, _)) = d.rsplit_once('/') {
                dirs.insert(parent.to_string());
                d = parent;
            }
            files.insert(path, Entry { mode, sha });
        }
        Ok(Listing { files, dirs })
    }

    /// Makes `wt` exactly `commit`'s files, byte for byte (see the module docs): whatever is
    /// not the commit's is removed (hone's `.hone/` too; the sandbox makes its tmp again),
    /// files that differ in content or mode are written from the blobs, and the result is
    /// checked once more. The worktree's `.git` link is left alone; gitlinks are not written.
    pub fn materialize(&self, wt: &Path, commit: &str) -> Result<(), GitError> {
        let listing = self.listing(commit)?;
        self.materialize_listing(wt, commit, &listing, &[])
    }

    /// Prepares `wt` for a sealed evaluation, as [`Git::materialize`] does (no checkout, no
    /// filter): `commit`'s files, with the `sealed` paths as `sealed_from` has them (absent
    /// there: removed), and of what is not the commit's, only what matches `keep` (globs, or
    /// a bare name at any depth, as `git clean -e` reads it).
    pub fn materialize_sealed(
        &self,
        wt: &Path,
        (commit, sealed_from): (&str, &str),
        sealed: &[String],
        keep: &[String],
    ) -> Result<(), GitError> {
        let mut listing = self.listing(commit)?;
        if !sealed.is_empty() {
            let mut base = self.listing(sealed_from)?;
            for path in sealed {
                match base.files.remove(path) {
                    Some(e) => {
                        listing.files.insert(path.clone(), e);
                        let mut d = path.as_str();
                        while let Some((parent, _)) = d.rsplit_once('/') {
                            listing.dirs.insert(parent.to_string());
                            d = parent;
                        }
                    }
                    None => {
                        listing.files.remove(path);
                    }
                }
            }
        }
        self.materialize_listing(wt, commit, &listing, keep)
    }

    fn materialize_listing(
        &self,
        wt: &Path,
        commit: &str,
        listing: &Listing,
        keep: &[String],
    ) -> Result<(), GitError> {
        // A repair can make another place differ (a directory rebuilt where a link stood
        // turns a kept output's link, inside the worktree through that link, into one that
        // leads out): repaired again, a few times, before it counts as a failure.
        for _ in 0..FIX_PASSES {
            if self.align(wt, (listing, keep), true)? == 0 {
                return Ok(());
            }
        }
        match self.align(wt, (listing, keep), false)? {
            0 => Ok(()),
            n => Err(GitError::Failed {
                args: format!("materialize {commit}"),
                stderr: format!(
                    "{} still differs from the commit in {n} place(s) after it was rebuilt; remove that directory (hone creates it again) and run `hone run` again",
                    wt.display()
                ),
            }),
        }
    }

    /// How many places `wt` differs from `listing`; with `fix`, each is repaired as it is found.
    fn align(
        &self,
        wt: &Path,
        (listing, keep): (&Listing, &[String]),
        fix: bool,
    ) -> Result<usize, GitError> {
        let mut found = Found::default();
        let top = std::fs::metadata(wt).map_err(io_err(wt))?;
        normal_mode(wt, top, (0o700, 0o755), fix, &mut found)?;
        walk_against(wt, "", (listing, keep), fix, &mut found)?;
        let stale = self.stale(wt, listing, &found)?;
        let differences = found.extra + stale.len();
        if fix && !stale.is_empty() {
            let wanted: BTreeSet<&str> = stale
                .iter()
                .map(|p| listing.files[p.as_str()].sha.as_str())
                .collect();
            let blobs = self.blobs(&wanted)?;
            for p in &stale {
                let e = &listing.files[p.as_str()];
                let full = wt.join(p);
                // Never write through a symlink the candidate's code left on the way.
                if let Some(odd) = odd_ancestor(wt, p) {
                    remove_any(&odd)?;
                }
                remove_any(&full)?;
                if let Some(parent) = full.parent() {
                    std::fs::create_dir_all(parent).map_err(io_err(parent))?;
                }
                let bytes = blobs.get(&e.sha).map(Vec::as_slice).unwrap_or_default();
                if e.mode == "120000" {
                    std::os::unix::fs::symlink(OsStr::from_bytes(bytes), &full)
                        .map_err(io_err(&full))?;
                } else {
                    std::fs::write(&full, bytes).map_err(io_err(&full))?;
                    let mode = if e.mode == "100755" { 0o755 } else { 0o644 };
                    std::fs::set_permissions(&full, std::fs::Permissions::from_mode(mode))
                        .map_err(io_err(&full))?;
                }
            }
        }
        Ok(differences)
    }

    /// The commit's files that `wt` does not hold as committed (content, mode or kind), or
    /// lacks; every path `found` lists is one of `listing`'s.
    fn stale(&self, wt: &Path, listing: &Listing, found: &Found) -> Result<Vec<String>, GitError> {
        let mut stale: Vec<String> = Vec::new();
        let mut present: BTreeSet<&str> = BTreeSet::new();
        // A file whose size is not its blob's differs, and is not read (a huge one a
        // candidate left would take hours to hash).
        let ids: Vec<&str> = found
            .files
            .iter()
            .map(|(p, _)| listing.files[p.as_str()].sha.as_str())
            .collect();
        let mut same_size: Vec<&Present> = Vec::new();
        for (f, len) in found.files.iter().zip(self.blob_lens(&ids)) {
            present.insert(f.0.as_str());
            let on_disk = std::fs::symlink_metadata(wt.join(&f.0)).map(|m| m.len());
            match (len, on_disk) {
                (Some(len), Ok(on_disk)) if len != on_disk => stale.push(f.0.clone()),
                (_, Err(_)) => stale.push(f.0.clone()),
                // The same size, or a blob whose size is unknown: read and compared.
                _ => same_size.push(f),
            }
        }
        let (plain, odd): (Vec<&Present>, Vec<&Present>) =
            same_size.into_iter().partition(|(p, _)| !p.contains('\n'));
        let names: Vec<&str> = plain.iter().map(|(p, _)| p.as_str()).collect();
        let mut shas = self.hash_files(wt, &names, false)?;
        // A name with a line break cannot go through `--stdin-paths`: hashed one by one.
        for (p, _) in &odd {
            let full = wt.join(p);
            let bytes = std::fs::read(&full).map_err(io_err(&full))?;
            shas.push(self.hash_bytes(bytes, false)?);
        }
        let plain: Vec<&Present> = plain.into_iter().chain(odd).collect();
        for ((p, exec), sha) in plain.iter().zip(&shas) {
            let e = &listing.files[p.as_str()];
            let mode = if *exec { "100755" } else { "100644" };
            if e.sha != *sha || e.mode != mode {
                stale.push(p.to_string());
            }
        }
        for l in &found.links {
            present.insert(l);
            let full = wt.join(l);
            let target = std::fs::read_link(&full).map_err(io_err(&full))?;
            let sha = self.hash_bytes(target.as_os_str().as_bytes().to_vec(), false)?;
            if listing.files[l.as_str()].sha != sha {
                stale.push(l.to_string());
            }
        }
        // Missing files.
        for (p, e) in &listing.files {
            if e.mode != "160000" && !present.contains(p.as_str()) {
                stale.push(p.to_string());
            }
        }
        Ok(stale)
    }

    /// The tracked files of `commit` that differ in `wt` or are missing there (untracked
    /// files are not looked at), compared as raw bytes: the answer `git status
    /// --untracked-files=no` gives, without any filter or attribute in the way.
    pub fn changed_tracked(&self, wt: &Path, commit: &str) -> Result<Vec<String>, GitError> {
        let listing = self.listing(commit)?;
        let mut found = Found::default();
        walk_against(wt, "", (&listing, &[]), false, &mut found)?;
        self.stale(wt, &listing, &found)
    }

    /// What in `wt` git cannot record, if anything: a repository of its own (a `.git` file or
    /// directory below the top; git would archive a gitlink, or nothing, in place of its
    /// files) or a path too long to reach in one system call. hone's `.hone/` is not looked at
    /// (it is removed before any verifier runs).
    pub fn unrecordable(&self, wt: &Path) -> Result<Option<String>, GitError> {
        let base = wt.as_os_str().len();
        let mut stack = vec![String::new()];
        while let Some(rel) = stack.pop() {
            let full = if rel.is_empty() {
                wt.to_path_buf()
            } else {
                wt.join(&rel)
            };
            let entries = match std::fs::read_dir(&full) {
                Ok(r) => r,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    return Ok(Some(format!(
                        "cannot read `{}` ({e}): git cannot record it",
                        shorten(&rel)
                    )))
                }
            };
            for e in entries {
                let e = e.map_err(io_err(&full))?;
                let name = e.file_name();
                let name = name.to_string_lossy();
                if rel.is_empty() && (name == ".git" || name == STATE_DIR) {
                    continue;
                }
                let p = join(&rel, &name);
                // Any case: git refuses `.GIT` too (it would be `.git` on macOS and Windows).
                if name.eq_ignore_ascii_case(".git") {
                    return Ok(Some(format!(
                        "`{}` is a git repository inside the worktree: git would archive a gitlink (or nothing) instead of its files",
                        shorten(&p)
                    )));
                }
                if base + 1 + p.len() + 1 >= PATH_MAX {
                    return Ok(Some(format!(
                        "`{}` is nested too deep ({} bytes): git cannot record a path that long",
                        shorten(&p),
                        p.len()
                    )));
                }
                if e.file_type().map_err(io_err(&full))?.is_dir() {
                    stack.push(p);
                }
            }
        }
        Ok(None)
    }

    /// Paths that `commit` makes gitlinks (mode 160000) where `parent` had none.
    pub fn gitlinks_added(&self, parent: &str, commit: &str) -> Result<Vec<String>, GitError> {
        const GITLINK: u32 = 0o160000;
        Ok(self
            .count_changes(parent, commit)?
            .into_iter()
            .filter(|c| c.new_mode == GITLINK && c.old_mode != GITLINK)
            .map(|c| c.change.path)
            .collect())
    }
}

/// Are all `entries` paths that git stores as they are, with nothing for it to judge: every
/// component a plain printable ASCII name (not empty, `.`, `..` or `.git` in any case; no
/// `~` (NTFS short names), backslash or colon; no trailing dot or space), no symlink named
/// like git's own files (`.git*`), and no entry standing where another needs a directory?
fn plain_paths(entries: &BTreeMap<String, (String, String)>) -> bool {
    let plain_name = |c: &str| {
        !c.is_empty()
            && c != "."
            && c != ".."
            && !c.eq_ignore_ascii_case(".git")
            && !c.ends_with(['.', ' '])
            && !c.contains(['~', '\\', ':'])
            && c.bytes().all(|b| (0x20..0x7f).contains(&b))
    };
    let dotgit_link = |p: &str, mode: &str| {
        mode == "120000"
            && p.split('/')
                .any(|c| c.get(..4).is_some_and(|h| h.eq_ignore_ascii_case(".git")))
    };
    entries
        .iter()
        .all(|(p, (mode, _))| p.split('/').all(plain_name) && !dotgit_link(p, mode))
        && entries.keys().all(|p| {
            let dir = format!("{p}/");
            !matches!(entries.range(dir.clone()..).next(), Some((next, _)) if next.starts_with(&dir))
        })
}
