//! The verifier's log file, capped: the head is written as it arrives, the tail is kept in a
//! ring buffer and written when the run ends, after a marker line saying how much was cut.
//!
//! The head goes straight to the file with one `write` per chunk and no user-space buffer,
//! so if hone crashes mid-run the log on disk holds everything up to that point (up to the
//! head's size). Only the tail, which is still changing, lives in memory until [`finish`].
//!
//! [`finish`]: CappedLog::finish

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

/// A log file that keeps at most `max_bytes` of its input (plus one marker line).
pub(super) struct CappedLog {
    file: File,
    head_cap: u64,
    head_written: u64,
    head_ends_with_newline: bool,
    tail: VecDeque<u8>,
    tail_cap: usize,
    total: u64,
    error: Option<io::Error>,
}

impl CappedLog {
    /// Creates (or truncates) the log at `path`. The first half of `max_bytes` is the head,
    /// the rest the tail.
    pub(super) fn create(path: &Path, max_bytes: u64) -> io::Result<Self> {
        let file = File::create(path)?;
        let head_cap = max_bytes / 2;
        Ok(Self {
            file,
            head_cap,
            head_written: 0,
            head_ends_with_newline: true,
            tail: VecDeque::new(),
            // On 32-bit targets a cap above usize::MAX cannot be filled anyway.
            tail_cap: usize::try_from(max_bytes - head_cap).unwrap_or(usize::MAX),
            total: 0,
            error: None,
        })
    }

    /// Appends `bytes`. A write error is remembered (and reported by [`finish`]) rather than
    /// returned, so that a full disk never interrupts the handling of the process itself.
    ///
    /// [`finish`]: CappedLog::finish
    pub(super) fn append(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.total = self.total.saturating_add(bytes.len() as u64);
        let room = usize::try_from(self.head_cap - self.head_written).unwrap_or(usize::MAX);
        let (head, rest) = bytes.split_at(room.min(bytes.len()));
        if !head.is_empty() {
            self.head_written += head.len() as u64;
            self.head_ends_with_newline = head.ends_with(b"\n");
            if self.error.is_none() {
                if let Err(err) = self.file.write_all(head) {
                    self.error = Some(err);
                }
            }
        }
        if rest.is_empty() || self.tail_cap == 0 {
            return;
        }
        if rest.len() >= self.tail_cap {
            self.tail.clear();
            self.tail.extend(&rest[rest.len() - self.tail_cap..]);
        } else {
            let overflow = (self.tail.len() + rest.len()).saturating_sub(self.tail_cap);
            self.tail.drain(..overflow);
            self.tail.extend(rest);
        }
    }

    /// Writes the omission marker (if anything was cut) and the tail, and returns the total
    /// number of bytes appended, or the first write error.
    pub(super) fn finish(mut self) -> io::Result<u64> {
        if let Some(err) = self.error.take() {
            return Err(err);
        }
        let kept = self.head_written + self.tail.len() as u64;
        let omitted = self.total - kept;
        if omitted > 0 {
            let newline = if self.head_ends_with_newline {
                ""
            } else {
                "\n"
            };
            write!(self.file, "{newline}{}", omission_marker(omitted))?;
        }
        let (a, b) = self.tail.as_slices();
        self.file.write_all(a)?;
        self.file.write_all(b)?;
        self.file.flush()?;
        Ok(self.total)
    }
}

/// The line that replaces omitted bytes in a capped log, newline included.
pub(super) fn omission_marker(omitted: u64) -> String {
    format!("[hone: {omitted} bytes omitted]\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capped(max: u64, chunks: &[&[u8]]) -> (Vec<u8>, u64) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log");
        let mut log = CappedLog::create(&path, max).expect("create log");
        for chunk in chunks {
            log.append(chunk);
        }
        let total = log.finish().expect("finish log");
        (std::fs::read(&path).expect("read log"), total)
    }

    #[test]
    fn under_the_cap_everything_is_kept_in_order() {
        let (bytes, total) = capped(100, &[b"one\n", b"two\n", b"three\n"]);
        assert_eq!(bytes, b"one\ntwo\nthree\n");
        assert_eq!(total, 14);
    }

    #[test]
    fn over_the_cap_keeps_head_and_tail_around_a_marker() {
        let input: Vec<u8> = (0..100)
            .flat_map(|i| format!("{i:03}\n").into_bytes())
            .collect();
        let chunks: Vec<&[u8]> = input.chunks(7).collect();
        let (bytes, total) = capped(40, &chunks);
        assert_eq!(total, 400);
        let text = String::from_utf8(bytes).expect("ascii");
        let expected = format!(
            "{}{}{}",
            &"000\n001\n002\n003\n004\n",
            omission_marker(360),
            "095\n096\n097\n098\n099\n"
        );
        assert_eq!(text, expected);
    }

    #[test]
    fn marker_starts_its_own_line() {
        let (bytes, _) = capped(4, &[b"abcdefgh"]);
        assert_eq!(bytes, format!("ab\n{}gh", omission_marker(4)).into_bytes());
    }

    #[test]
    fn a_chunk_larger_than_the_tail_keeps_its_end() {
        let (bytes, _) = capped(6, &[b"0123456789", b"abcdefghij"]);
        assert_eq!(
            bytes,
            format!("012\n{}hij", omission_marker(14)).into_bytes()
        );
    }

    #[test]
    fn zero_cap_keeps_only_the_marker() {
        let (bytes, total) = capped(0, &[b"hello\n"]);
        assert_eq!(total, 6);
        assert_eq!(bytes, omission_marker(6).into_bytes());
    }
}
