//! The webhook's memory of the requests it acted on. A signature covers the body alone (as
//! GitHub signs), so a request seen once in transit (a proxy's log, a webhook's delivery page)
//! would start a run each time it is sent again. Every signature that started a run is kept in
//! `.hone/triggers.seen` (a line each: the time and the signature; the newest
//! [`MAX_REMEMBERED`]) before its run starts (and forgotten if the run could not start), and the
//! same signature is refused after that, across restarts: a caller that triggers again sends a
//! new body (a GitHub event's payload is new each time).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::engine::StatePaths;

/// How many accepted signatures are remembered (the oldest are forgotten first).
pub const MAX_REMEMBERED: usize = 10_000;

/// The signatures that started runs, and when.
pub struct Seen {
    path: PathBuf,
    entries: Vec<(i64, String)>,
}

impl Seen {
    /// Where a repository's daemon keeps them.
    pub fn path(repo_root: &Path) -> PathBuf {
        StatePaths::new(repo_root).dir.join("triggers.seen")
    }

    /// The signatures remembered at `path` (none when it is missing; unreadable lines are
    /// skipped).
    pub fn open(path: PathBuf) -> Seen {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let entries = text
            .lines()
            .filter_map(|l| {
                let (at, sig) = l.split_once(' ')?;
                Some((at.parse().ok()?, sig.to_string()))
            })
            .collect();
        Seen { path, entries }
    }

    /// When `signature` started a run, if it did.
    pub fn accepted_at(&self, signature: &str) -> Option<i64> {
        let key = key(signature);
        self.entries
            .iter()
            .rev()
            .find(|(_, s)| *s == key)
            .map(|(at, _)| *at)
    }

    /// Remembers that `signature` started a run at `now`: on disk, then here (a failed write
    /// leaves it unremembered, as the caller reports).
    pub fn record(&mut self, signature: &str, now: i64) -> std::io::Result<()> {
        let entry = (now, key(signature));
        if self.entries.len() + 1 > MAX_REMEMBERED {
            let drop = self.entries.len() + 1 - MAX_REMEMBERED;
            let text: String = self.entries[drop..]
                .iter()
                .chain(std::iter::once(&entry))
                .map(|(at, s)| format!("{at} {s}\n"))
                .collect();
            crate::util::write_atomic(&self.path, text.as_bytes())?;
            self.entries.drain(..drop);
            self.entries.push(entry);
            return Ok(());
        }
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        writeln!(f, "{now} {}", entry.1)?;
        f.sync_data()?;
        self.entries.push(entry);
        Ok(())
    }
}

impl Seen {
    /// Forgets `signature` (recorded for a run that then did not start), on disk too.
    pub fn forget(&mut self, signature: &str) -> std::io::Result<()> {
        let key = key(signature);
        self.entries.retain(|(_, s)| *s != key);
        let text: String = self
            .entries
            .iter()
            .map(|(at, s)| format!("{at} {s}\n"))
            .collect();
        crate::util::write_atomic(&self.path, text.as_bytes())
    }
}

/// A signature as it is compared: the header's value without spaces, in lower case (hex digits
/// in either case verify alike).
fn key(signature: &str) -> String {
    signature.trim().to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_that_started_a_run_is_remembered_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let path = Seen::path(dir.path());
        let mut seen = Seen::open(path.clone());
        assert_eq!(seen.accepted_at("sha256=AB"), None);
        seen.record("sha256=AB", 100).unwrap();
        seen.record("sha256=cd", 200).unwrap();
        assert_eq!(
            seen.accepted_at(" sha256=ab "),
            Some(100),
            "case and spaces"
        );
        let again = Seen::open(path);
        assert_eq!(again.accepted_at("sha256=ab"), Some(100));
        assert_eq!(again.accepted_at("sha256=cd"), Some(200));
        assert_eq!(again.accepted_at("sha256=ef"), None);
        let mut again = again;
        again.forget("SHA256=AB").unwrap();
        assert_eq!(again.accepted_at("sha256=ab"), None);
        let after = Seen::open(Seen::path(dir.path()));
        assert_eq!(after.accepted_at("sha256=ab"), None, "forgotten on disk");
        assert_eq!(after.accepted_at("sha256=cd"), Some(200));
    }

    #[test]
    fn a_signature_that_could_not_be_written_is_not_remembered() {
        let dir = tempfile::tempdir().unwrap();
        // `.hone` is a file: nothing can be written below it.
        std::fs::write(dir.path().join(".hone"), "").unwrap();
        let mut seen = Seen::open(Seen::path(dir.path()));
        assert!(seen.record("sha256=ab", 1).is_err());
        assert_eq!(
            seen.accepted_at("sha256=ab"),
            None,
            "a retry is not refused"
        );
    }

    #[test]
    fn only_the_newest_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = Seen::path(dir.path());
        let mut seen = Seen::open(path.clone());
        for i in 0..=MAX_REMEMBERED {
            seen.entries.push((i as i64, format!("sha256={i}")));
        }
        seen.record("sha256=last", 1).unwrap();
        let again = Seen::open(path);
        assert_eq!(again.entries.len(), MAX_REMEMBERED);
        assert_eq!(again.accepted_at("sha256=0"), None, "the oldest forgotten");
        assert!(again.accepted_at("sha256=last").is_some());
    }
}
