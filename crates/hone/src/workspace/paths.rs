//! Paths of the repository as hone's scope sees them: the globs of `editable`, `protected` and
//! `pinned`, and content hashes of sealed files compared with the run's start.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::GitError;

/// Does `path` (repository-relative, `/`-separated) match a glob from `editable`, `protected`
/// or `pinned`? `*` and `?` stay within one path segment, `**` crosses segments, and a pattern
/// naming a directory (`data/` or `data`) matches everything under it.
pub fn glob_match(pattern: &str, path: &str) -> bool {
    let pat = pattern.trim_start_matches("./");
    let dir = pat.trim_end_matches('/');
    if dir.is_empty() {
        return false;
    }
    if path == dir || path.starts_with(&format!("{dir}/")) && !has_glob(dir) {
        return true;
    }
    let p: Vec<&str> = dir.split('/').collect();
    let s: Vec<&str> = path.split('/').collect();
    match_segments(&p, &s)
        || (pat.ends_with('/')
            && has_glob(dir)
            && (1..s.len()).any(|k| match_segments(&p, &s[..k])))
}

fn has_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

fn match_segments(p: &[&str], s: &[&str]) -> bool {
    match p.first() {
        None => s.is_empty(),
        Some(&"**") => (0..=s.len()).any(|k| match_segments(&p[1..], &s[k..])),
        Some(seg) => {
            !s.is_empty()
                && match_one(seg.as_bytes(), s[0].as_bytes())
                && match_segments(&p[1..], &s[1..])
        }
    }
}

fn match_one(p: &[u8], s: &[u8]) -> bool {
    match p.first() {
        None => s.is_empty(),
        Some(b'*') => (0..=s.len()).any(|k| match_one(&p[1..], &s[k..])),
        Some(b'?') => !s.is_empty() && match_one(&p[1..], &s[1..]),
        Some(c) => s.first() == Some(c) && match_one(&p[1..], &s[1..]),
    }
}

/// True if `path` matches any of `patterns`.
pub fn matches_any(patterns: &[String], path: &str) -> bool {
    patterns.iter().any(|p| glob_match(p, path))
}

/// Content hashes of files (directories are walked, in sorted order), keyed by path relative to
/// `base`. A path that does not exist hashes to `missing`, so that its later appearance counts
/// as a change too.
pub fn hash_paths(base: &Path, paths: &[String]) -> Result<BTreeMap<String, String>, GitError> {
    hash_paths_bounded(base, paths, None)
}

/// [`hash_paths`], except that a file larger than `bound` bytes is not read: its value is its
/// size (`size N`), which differs from every content hash. With `bound` the largest of the
/// files the hashes are compared with, a file that grew past it (a sparse file of a terabyte
/// that a candidate's code left in a protected file's place) is found changed at once.
pub fn hash_paths_bounded(
    base: &Path,
    paths: &[String],
    bound: Option<u64>,
) -> Result<BTreeMap<String, String>, GitError> {
    let mut out = BTreeMap::new();
    for p in paths {
        let full = if Path::new(p).is_absolute() {
            PathBuf::from(p)
        } else {
            base.join(p.trim_end_matches('/'))
        };
        hash_into(&full, p.trim_end_matches('/'), bound, &mut out)?;
    }
    Ok(out)
}

fn hash_into(
    full: &Path,
    key: &str,
    bound: Option<u64>,
    out: &mut BTreeMap<String, String>,
) -> Result<(), GitError> {
    let io = |source| GitError::Io {
        path: full.to_path_buf(),
        source,
    };
    let meta = match std::fs::symlink_metadata(full) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            out.insert(key.to_string(), "missing".into());
            return Ok(());
        }
        Err(e) => return Err(io(e)),
    };
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(full).map_err(io)?;
        out.insert(key.to_string(), format!("symlink:{}", target.display()));
    } else if meta.is_dir() {
        let mut names: Vec<_> = std::fs::read_dir(full)
            .map_err(io)?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for n in names {
            if n == "__pycache__" {
                continue;
            }
            hash_into(&full.join(&n), &format!("{key}/{n}"), bound, out)?;
        }
    } else if !meta.is_file() {
        // A FIFO, a socket or a device where a file was: never opened (a FIFO's open waits
        // for a writer forever).
        out.insert(key.to_string(), format!("special {:?}", meta.file_type()));
    } else if bound.is_some_and(|b| meta.len() > b) {
        out.insert(key.to_string(), format!("size {}", meta.len()));
    } else {
        // Not through a symlink nor blocking on a FIFO swapped in since the look above, and
        // no further than the bound into a file that grows meanwhile.
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
            .open(full)
            .map_err(io)?;
        let mut h = Sha256::new();
        let mut buf = vec![0u8; 1 << 16];
        let mut read: u64 = 0;
        loop {
            let n = f.read(&mut buf).map_err(io)?;
            if n == 0 {
                break;
            }
            read += n as u64;
            if bound.is_some_and(|b| read > b) {
                out.insert(key.to_string(), format!("size over {read}"));
                return Ok(());
            }
            h.update(&buf[..n]);
        }
        out.insert(key.to_string(), hex(&h.finalize()));
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The first difference between two hash maps, as a path, for error messages.
pub fn first_difference(
    a: &BTreeMap<String, String>,
    b: &BTreeMap<String, String>,
) -> Option<String> {
    a.iter()
        .find(|(k, v)| b.get(*k) != Some(v))
        .map(|(k, _)| k.clone())
        .or_else(|| b.keys().find(|k| !a.contains_key(*k)).cloned())
}
