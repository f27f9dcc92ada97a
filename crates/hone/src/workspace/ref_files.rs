//! The listing of a ref prefix read straight from the files backend's bytes: `packed-refs` and
//! the loose ref files under the prefix, parsed here, without opening the repository through
//! libgit2 (which reads the configuration, `HEAD` and the whole of `packed-refs` again and
//! matches every ref against a pattern). The engine lists its run's refs several times per
//! experiment, and the archive refs grow by one per experiment, so this is on the hot path.
//!
//! Every call reads every byte it reports from. What was parsed of `packed-refs` is kept
//! with a keyed digest of the bytes it was parsed from ([`super::digest`]: no copy of the
//! file, no file stamp) and used again only for the very same bytes, so that a run with a ref
//! per experiment does not parse its thousands of refs at every check, and listings of the
//! same file share them ([`RefListing`], the refs held compactly). Bytes found changed are
//! parsed again line by line, what was kept of the old ones let go first, so a long run holds
//! its refs once and never a copy of the file. Only the plain layout is read here: the repository's `.git` a
//! real directory that is its own common directory with a `HEAD`, `objects` and `refs` (what
//! git and libgit2 open at the root), no reftable, a configuration that names no ref storage
//! and includes no other file, `packed-refs` exactly as git writes it (sorted, one line per
//! name, no carriage return), every loose ref a regular file (never followed through a link)
//! holding a direct SHA-1 object name, no directory below the prefix. Anything else answers
//! `None`, and the caller lists through libgit2 as before. Loose refs are read before
//! `packed-refs`, as git reads them.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::digest::{Digest, Digester};
use super::listing::{PackedRefs, RefListing};

/// Refs as (name, object name), and the object name of one more ref where there is one.
pub type Listed = (Vec<(String, String)>, Option<String>);

/// The refs of `packed-refs` under a prefix (shared between listings read from the same
/// bytes), and what one more ref holds there.
type SharedPacked = (Arc<PackedRefs>, Option<String>);

/// The longest line of `packed-refs` read here (longer: libgit2 lists).
const LINE_MAX: u64 = 4096;

/// The most `packed-refs` read here (bigger: libgit2 lists). A million refs is about 60 MB.
const PACKED_MAX: u64 = 256 << 20;

/// Refs under `prefix` (which ends with `/`) in the repository whose top level is `root`,
/// sorted by name, as `for-each-ref` lists them; `None` where the layout is not the plain one
/// (the module docs), or a file could not be read as expected.
pub(super) fn list(root: &Path, prefix: &str) -> Option<Vec<(String, String)>> {
    list_with(root, prefix, None).map(|(refs, _)| refs)
}

/// [`list`], and the object name the ref `exact` holds (`None` in the pair where there is no
/// such ref), read from the same `packed-refs` bytes.
pub(super) fn list_with(root: &Path, prefix: &str, exact: Option<&str>) -> Option<Listed> {
    let (listing, found) = listing_with(root, prefix, exact)?;
    Some((listing.to_vec(), found))
}

/// The refs under `prefix` as one listing (held compactly, see [`RefListing`]): see [`list`].
pub(super) fn listing_under(root: &Path, prefix: &str) -> Option<RefListing> {
    listing_with(root, prefix, None).map(|(listing, _)| listing)
}

/// The refs under `prefix` and the ref `also` (where there is one) as one listing: see
/// [`list_with`].
pub(super) fn listing(root: &Path, prefix: &str, also: &str) -> Option<RefListing> {
    let (mut listing, found) = listing_with(root, prefix, Some(also))?;
    if let Some(value) = found {
        listing = listing.with(also.to_string(), value);
    }
    Some(listing)
}

/// The refs under `prefix` as one listing (`packed-refs` shared, see [`packed_shared`]), and
/// what the ref `exact` holds; `None` as for [`list`].
fn listing_with(
    root: &Path,
    prefix: &str,
    exact: Option<&str>,
) -> Option<(RefListing, Option<String>)> {
    let git_dir = root.join(".git");
    if !plain_layout(&git_dir) {
        return None;
    }
    // The loose refs first, then `packed-refs`, as git and libgit2 read them: a `pack-refs`
    // running meanwhile moves a ref from the first to the second, never the other way.
    let exact_loose = match exact {
        Some(name) => loose_one(&git_dir, name)?,
        None => None,
    };
    let mut loose = Vec::new();
    loose_under(&git_dir, prefix, &mut loose)?;
    let (packed_refs, packed_exact) = match scan_packed(&git_dir)? {
        Some(digest) => packed_shared(&git_dir, digest, prefix, exact)?,
        None => {
            forget(&git_dir, prefix, exact);
            (Arc::new(PackedRefs::default()), None)
        }
    };
    // A loose ref overrides the packed one of the same name.
    Some((
        RefListing::of(packed_refs, loose),
        exact_loose.or(packed_exact),
    ))
}

/// What [`parse_packed`] read for one question (a repository, a prefix, one more ref): the
/// refs, with the digest of the bytes they were read from (all of them: a listing read from
/// the very same bytes is the same listing, and no file stamp stands in for them), and what
/// it found.
struct LastPacked {
    git_dir: PathBuf,
    prefix: String,
    exact: Option<String>,
    refs: Arc<PackedRefs>,
    found: Option<String>,
}

/// The last reads, newest last: a few questions (the engine asks one per run; tests, many
/// repositories at once), at most [`LAST_PACKED_MAX`] of them and [`LAST_PACKED_BYTES`] bytes
/// of refs kept in all (the oldest dropped first; the newest always kept).
static LAST_PACKED: Mutex<Vec<LastPacked>> = Mutex::new(Vec::new());

/// How many questions [`LAST_PACKED`] remembers.
const LAST_PACKED_MAX: usize = 16;

/// How many bytes of refs [`LAST_PACKED`] keeps in all, beyond its newest entry.
const LAST_PACKED_BYTES: usize = 64 << 20;

/// The question of a read: the repository, the prefix, the one more ref.
fn same_question(l: &LastPacked, git_dir: &Path, prefix: &str, exact: Option<&str>) -> bool {
    l.git_dir == git_dir && l.prefix == prefix && l.exact.as_deref() == exact
}

/// Drops what was kept for a question (its `packed-refs` is gone, or declined).
fn forget(git_dir: &Path, prefix: &str, exact: Option<&str>) {
    // A poisoned lock only loses the sharing.
    if let Ok(mut remembered) = LAST_PACKED.lock() {
        remembered.retain(|l| !same_question(l, git_dir, prefix, exact));
    }
}

/// The bytes of refs kept for the repository at `git_dir`, over all its questions.
#[cfg(test)]
pub(super) fn kept_bytes(git_dir: &Path) -> usize {
    LAST_PACKED.lock().map_or(0, |remembered| {
        remembered
            .iter()
            .filter(|l| l.git_dir == git_dir)
            .map(|l| l.refs.size())
            .sum()
    })
}

/// The digest of `packed-refs` in `git_dir` (`Some(None)`: there is none; `None`: not a
/// regular file within [`PACKED_MAX`]): every byte is read, none is kept (see
/// [`super::digest`]: the digest stands for the bytes, not for a stamp of the file).
fn scan_packed(git_dir: &Path) -> Option<Option<Digest>> {
    let Some((mut file, _)) = open_regular(&git_dir.join("packed-refs"), PACKED_MAX)? else {
        return Some(None);
    };
    let mut digester = Digester::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut total = 0u64;
    loop {
        let got = file.read(&mut buf).ok()?;
        if got == 0 {
            break;
        }
        total += got as u64;
        if total > PACKED_MAX {
            return None;
        }
        digester.update(&buf[..got]);
    }
    Some(Some(digester.finish()))
}

/// Drops what was kept for every question about the repository at `git_dir` that was read
/// from other bytes than `digest` (its `packed-refs` changed since).
fn forget_other_bytes(git_dir: &Path, digest: Digest) {
    // A poisoned lock only loses the sharing.
    if let Ok(mut remembered) = LAST_PACKED.lock() {
        remembered.retain(|l| l.git_dir != git_dir || l.refs.digest() == digest);
    }
}

/// The refs under `prefix` and what `exact` holds, from the `packed-refs` whose bytes have the
/// digest `digest`: shared with the last read for the same question when it read the very
/// same bytes (so that listings read meanwhile compare without a walk, and the file is parsed
/// again only when it changed). What was kept for the repository from other bytes goes first,
/// before the file is parsed: a long run holds its refs once. The lock is held only to take
/// an entry out and to put one in: the parse runs outside it.
fn packed_shared(
    git_dir: &Path,
    digest: Digest,
    prefix: &str,
    exact: Option<&str>,
) -> Option<SharedPacked> {
    let taken = LAST_PACKED.lock().ok().and_then(|mut remembered| {
        let i = remembered
            .iter()
            .position(|l| same_question(l, git_dir, prefix, exact))?;
        Some(remembered.remove(i))
    });
    let entry = match taken {
        Some(l) if l.refs.digest() == digest => l,
        _ => {
            // Declined bytes: nothing is kept for the question.
            drop(taken);
            forget_other_bytes(git_dir, digest);
            let (refs, found) = parse_packed(git_dir, prefix, exact)?;
            LastPacked {
                git_dir: git_dir.to_path_buf(),
                prefix: prefix.to_string(),
                exact: exact.map(str::to_string),
                refs: Arc::new(refs),
                found,
            }
        }
    };
    let shared = (Arc::clone(&entry.refs), entry.found.clone());
    if let Ok(mut remembered) = LAST_PACKED.lock() {
        // Another thread may have put one in for the question meanwhile: this one is newer.
        remembered.retain(|l| !same_question(l, git_dir, prefix, exact));
        remembered.push(entry);
        let mut kept: usize = remembered.iter().map(|l| l.refs.size()).sum();
        while remembered.len() > LAST_PACKED_MAX
            || (remembered.len() > 1 && kept > LAST_PACKED_BYTES)
        {
            kept -= remembered.remove(0).refs.size();
        }
    }
    Some(shared)
}

/// Is `git_dir` the plain files-backend repository that git and libgit2 open at the root:
/// a real directory with a `HEAD` git accepts, real `objects` and `refs` directories, no
/// `commondir` (it is its own common directory), no `reftable`, and a configuration that
/// names no ref storage and includes no other file?
fn plain_layout(git_dir: &Path) -> bool {
    let exists = |name: &str| std::fs::symlink_metadata(git_dir.join(name)).is_ok();
    if !is_dir_not_link(git_dir)
        || !is_dir_not_link(&git_dir.join("objects"))
        || !is_dir_not_link(&git_dir.join("refs"))
        || exists("commondir")
        || exists("reftable")
    {
        return false;
    }
    let head_ok = read_regular(&git_dir.join("HEAD"), 4096).is_some_and(|head| {
        let Some(head) = head.strip_suffix(b"\n") else {
            return false;
        };
        let head = std::str::from_utf8(head).unwrap_or_default();
        match head.strip_prefix("ref: ") {
            Some(target) => valid_name(target),
            None => super::inproc::is_full_hex(head),
        }
    });
    let config_ok = read_regular(&git_dir.join("config"), 1 << 20).is_some_and(|config| {
        let config = String::from_utf8_lossy(&config).to_ascii_lowercase();
        !config.contains("refstorage") && !config.contains("include")
    });
    head_ok && config_ok
}

/// The refs of `packed-refs` in `git_dir` under `prefix` (with the digest of the bytes read),
/// and the object name of `exact` there, read line by line (no copy of the file is made);
/// `None` for anything but the file git writes: a `# pack-refs with:` header on the first line
/// only, then lines of a full object name in lower case, a space and a name, the names in
/// strictly increasing byte order (so no name twice: git's binary search and this reading find
/// the same line), each followed by at most one `^` line, every line ended by a line feed and
/// nothing else (no carriage return), the whole UTF-8.
fn parse_packed(
    git_dir: &Path,
    prefix: &str,
    exact: Option<&str>,
) -> Option<(PackedRefs, Option<String>)> {
    use std::io::BufRead;
    let (file, _) = open_regular(&git_dir.join("packed-refs"), PACKED_MAX)??;
    let mut reader = std::io::BufReader::with_capacity(64 << 10, file.take(PACKED_MAX + 1));
    let mut digester = Digester::new();
    let mut refs = PackedRefs::new(prefix, Digest::default());
    let mut found = None;
    let mut last = String::new();
    let mut peelable = false;
    let mut line = Vec::new();
    let mut total = 0u64;
    for i in 0usize.. {
        line.clear();
        // No line git writes comes near 4 KiB: a longer one is declined before it is read whole.
        let got = (&mut reader)
            .take(LINE_MAX)
            .read_until(b'\n', &mut line)
            .ok()?;
        if got == 0 {
            break;
        }
        total += got as u64;
        digester.update(&line);
        if total > PACKED_MAX {
            return None;
        }
        let text = std::str::from_utf8(&line).ok()?;
        let text = text.strip_suffix('\n')?;
        if text.contains('\r') {
            return None;
        }
        if text.starts_with('#') {
            if i != 0 || !text.starts_with("# pack-refs with:") {
                return None;
            }
            continue;
        }
        if let Some(peeled) = text.strip_prefix('^') {
            if !peelable || !super::inproc::is_full_hex(peeled) {
                return None;
            }
            peelable = false;
            continue;
        }
        let (id, name) = text.split_once(' ')?;
        if !super::inproc::is_full_hex(id)
            || id.bytes().any(|b| b.is_ascii_uppercase())
            || !valid_name(name)
            || (!last.is_empty() && last.as_bytes() >= name.as_bytes())
        {
            return None;
        }
        last.clear();
        last.push_str(name);
        peelable = true;
        if name.starts_with(prefix) && !refs.push(name, id) {
            return None;
        }
        if exact == Some(name) {
            found = Some(id.to_string());
        }
    }
    Some((refs.finished(digester.finish()), found))
}

/// The loose ref `name` (`Some(None)`: no loose ref of that name, nothing or a directory
/// there); `None` for a link on the way, a symbolic ref, or anything else git would not read
/// as a plain loose ref.
fn loose_one(git_dir: &Path, name: &str) -> Option<Option<String>> {
    if !valid_name(name) {
        return None;
    }
    let parts: Vec<&str> = name.split('/').collect();
    let mut path: PathBuf = git_dir.to_path_buf();
    for (i, part) in parts.iter().enumerate() {
        path.push(part);
        let last = i + 1 == parts.len();
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() && last => return Some(None),
            Ok(m) if m.is_dir() => {}
            Ok(m) if m.is_file() && last => return loose_value(&path).map(Some),
            Ok(_) => return None,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(None),
            Err(_) => return None,
        }
    }
    None
}

/// The object name in the loose ref file at `path`; `None` unless it is a regular file
/// holding a full object name and a line feed, as git writes it.
fn loose_value(path: &Path) -> Option<String> {
    let bytes = read_regular(path, 4096)?;
    let text = std::str::from_utf8(&bytes).ok()?;
    let id = text.strip_suffix('\n')?;
    super::inproc::is_full_hex(id).then(|| id.to_ascii_lowercase())
}

/// Adds the loose refs under `prefix` to `out`; `None` for anything but directories and
/// regular files holding a direct object name, or a name git would not list.
fn loose_under(git_dir: &Path, prefix: &str, out: &mut Vec<(String, String)>) -> Option<()> {
    let mut dir: PathBuf = git_dir.to_path_buf();
    let parts: Vec<&str> = prefix.trim_end_matches('/').split('/').collect();
    for part in &parts {
        dir.push(part);
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return None,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(()),
            Err(_) => return None,
        }
    }
    walk(&dir, prefix, out)
}

/// The loose refs in `dir` (whose refs are named `name_prefix...`); `None` for a directory in
/// it (hone's refs are one level below their prefix; libgit2 lists anything deeper).
fn walk(dir: &Path, name_prefix: &str, out: &mut Vec<(String, String)>) -> Option<()> {
    for entry in std::fs::read_dir(dir).ok()? {
        let entry = entry.ok()?;
        let file = entry.file_name().into_string().ok()?;
        let name = format!("{name_prefix}{file}");
        let kind = entry.file_type().ok()?;
        if !kind.is_file() || !valid_name(&name) {
            return None;
        }
        out.push((name, loose_value(&entry.path())?));
    }
    Some(())
}

/// A ref name of the plain kind hone writes and git lists: components of letters, digits and
/// `-_.`, none empty, none starting with `.` or ending with `.` or `.lock`. (Stricter than git, so
/// anything unusual goes to libgit2.)
fn valid_name(name: &str) -> bool {
    name.starts_with("refs/")
        && name.split('/').all(|c| {
            !c.is_empty()
                && !c.starts_with('.')
                && !c.ends_with(".lock")
                && !c.ends_with('.')
                && !c.contains("..")
                && c.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        })
}

/// Is `p` a directory itself (not a link to one)?
fn is_dir_not_link(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

/// The bytes of the regular file `p` (never through a link), at most `max`; `None` otherwise.
fn read_regular(p: &Path, max: u64) -> Option<Vec<u8>> {
    read_regular_or_missing(p, max)?
}

/// The regular file `p` opened (never through a link) with its metadata, at most `max` bytes
/// long; `Some(None)` where nothing is at `p`, `None` for anything else.
fn open_regular(p: &Path, max: u64) -> Option<Option<(std::fs::File, std::fs::Metadata)>> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(p);
    let file = match file {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(None),
        Err(_) => return None,
    };
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > max {
        return None;
    }
    Some(Some((file, meta)))
}

/// As [`read_regular`], with `Some(None)` where nothing is at `p`.
fn read_regular_or_missing(p: &Path, max: u64) -> Option<Option<Vec<u8>>> {
    let Some((file, meta)) = open_regular(p, max)? else {
        return Some(None);
    };
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1).read_to_end(&mut bytes).ok()?;
    if bytes.len() as u64 > max {
        return None;
    }
    Some(Some(bytes))
}
