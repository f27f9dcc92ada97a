//! The last listing of a ref prefix, kept with the bytes it was read from: the integrity checks
//! list the run's refs four times per experiment, and a listing through libgit2 reopens the
//! repository and parses the whole `packed-refs` file each time (one line per archived
//! experiment), a cost that grew with the run.
//!
//! The key is the contents, not a file stamp: `packed-refs` whole and every file under the
//! prefix's directory (name and bytes). A stamp (size, mtime, inode, which libgit2's own cache
//! trusts) would not do: an agent running as root can rewrite an archive ref in place, one
//! object name for another of the same length, and put the mtime back. Nothing is kept where
//! the listing may depend on anything else: a loose ref that is symbolic (its target lies
//! outside the prefix), an entry that is neither a plain file nor a directory, a read error.

use std::path::Path;
use std::sync::Mutex;

/// One listing: its prefix, the bytes it was read from and the refs (name, object).
#[derive(Debug)]
struct Kept {
    prefix: String,
    key: Vec<u8>,
    refs: Vec<(String, String)>,
}

/// The last listing a [`super::Git`] made (a clone starts empty).
#[derive(Debug, Default)]
pub(super) struct KeptRefs(Mutex<Option<Kept>>);

impl Clone for KeptRefs {
    fn clone(&self) -> KeptRefs {
        KeptRefs::default()
    }
}

impl KeptRefs {
    /// The refs under `prefix` (which ends with `/`) in the repository whose shared `.git`
    /// is `common`: the kept listing when nothing it was read from changed, else `list()`,
    /// kept when the bytes were the same before and after it.
    pub(super) fn list<E>(
        &self,
        common: &Path,
        prefix: &str,
        list: impl FnOnce() -> Result<Vec<(String, String)>, E>,
    ) -> Result<Vec<(String, String)>, E> {
        let before = key(common, prefix);
        if let Some(k) = &before {
            if let Ok(kept) = self.0.lock() {
                if let Some(kept) = kept.as_ref().filter(|x| x.prefix == prefix && x.key == *k) {
                    return Ok(kept.refs.clone());
                }
            }
        }
        let refs = list()?;
        // Kept only if nothing changed while it was read: the listing is then that of `key`.
        if let Some(k) = before.filter(|k| key(common, prefix).as_ref() == Some(k)) {
            if let Ok(mut kept) = self.0.lock() {
                *kept = Some(Kept {
                    prefix: prefix.to_string(),
                    key: k,
                    refs: refs.clone(),
                });
            }
        }
        Ok(refs)
    }
}

/// The bytes a listing of `prefix` is read from (see the module's comment), `None` where it
/// may depend on something else.
fn key(common: &Path, prefix: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    match std::fs::read(common.join("packed-refs")) {
        Ok(bytes) => {
            out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
            out.extend_from_slice(&bytes);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => out.push(0xff),
        Err(_) => return None,
    }
    let dir = common.join(prefix.trim_end_matches('/'));
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.is_dir() => loose(&dir, "", &mut out)?,
        Ok(_) => return None,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(_) => return None,
    }
    Some(out)
}

/// Appends every loose ref under `dir` (as `rel`), in name order: its name and its bytes.
fn loose(dir: &Path, rel: &str, out: &mut Vec<u8>) -> Option<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .ok()?
        .map(|e| e.ok())
        .collect::<Option<_>>()?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for e in entries {
        let name = e.file_name();
        let name = format!("{rel}/{}", name.to_str()?);
        let ty = e.file_type().ok()?;
        if ty.is_dir() {
            loose(&e.path(), &name, out)?;
        } else if ty.is_file() {
            let bytes = std::fs::read(e.path()).ok()?;
            if bytes.starts_with(b"ref:") {
                return None;
            }
            for part in [name.as_bytes(), &bytes] {
                out.extend_from_slice(&(part.len() as u64).to_le_bytes());
                out.extend_from_slice(part);
            }
        } else {
            return None;
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A listing that counts how often it is made (it names each loose file under `dir`).
    fn lister<'a>(
        dir: &'a Path,
        made: &'a Cell<usize>,
    ) -> impl Fn() -> Result<Vec<(String, String)>, ()> + 'a {
        move || {
            made.set(made.get() + 1);
            let mut v: Vec<(String, String)> = std::fs::read_dir(dir)
                .map_err(|_| ())?
                .map(|e| {
                    let e = e.unwrap();
                    let body = std::fs::read_to_string(e.path()).unwrap_or_default();
                    (e.file_name().to_string_lossy().into_owned(), body)
                })
                .collect();
            v.sort();
            Ok(v)
        }
    }

    /// Listed again only when a byte it was read from changed: a new loose ref, one rewritten
    /// in place to the same length, `packed-refs` likewise; never kept past a symbolic ref.
    #[test]
    fn a_listing_is_made_again_exactly_when_its_bytes_change() {
        let tmp = tempfile::tempdir().unwrap();
        let common = tmp.path();
        let dir = common.join("refs/hone/t");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("1"), "a".repeat(40)).unwrap();
        let kept = KeptRefs::default();
        let made = Cell::new(0);
        let list = lister(&dir, &made);
        let first = kept.list(common, "refs/hone/t/", &list).unwrap();
        assert_eq!(kept.list(common, "refs/hone/t/", &list).unwrap(), first);
        assert_eq!(made.get(), 1, "the same bytes: the kept listing");
        // Another prefix is listed, and then this one again.
        kept.list(common, "refs/hone/u/", &list).unwrap();
        kept.list(common, "refs/hone/t/", &list).unwrap();
        assert_eq!(made.get(), 3);
        let changes: [&dyn Fn(); 4] = [
            &|| std::fs::write(dir.join("2"), "b".repeat(40)).unwrap(),
            &|| std::fs::write(dir.join("1"), "c".repeat(40)).unwrap(),
            &|| std::fs::write(common.join("packed-refs"), "d".repeat(40)).unwrap(),
            &|| std::fs::write(common.join("packed-refs"), "e".repeat(40)).unwrap(),
        ];
        for (i, change) in changes.iter().enumerate() {
            change();
            let before = made.get();
            kept.list(common, "refs/hone/t/", &list).unwrap();
            kept.list(common, "refs/hone/t/", &list).unwrap();
            assert_eq!(
                made.get(),
                before + 1,
                "change {i}: listed once again, then kept"
            );
        }
        std::fs::write(dir.join("3"), "ref: refs/heads/main").unwrap();
        let before = made.get();
        kept.list(common, "refs/hone/t/", &list).unwrap();
        kept.list(common, "refs/hone/t/", &list).unwrap();
        assert_eq!(made.get(), before + 2, "a symbolic ref: never kept");
    }
}
