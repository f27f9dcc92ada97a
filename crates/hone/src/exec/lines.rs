//! Splitting one output stream into lines: complete lines go to the log as one write (so the
//! two streams interleave at line granularity) and, capped in length, to the line callback.

use super::log::CappedLog;

/// The longest line, in bytes, handed to the line callback; the rest of a longer line still
/// goes to the log but is cut from what the callback sees.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// Per-stream state: bytes not yet logged, and the start of the current line.
#[derive(Default)]
pub(super) struct LineSplitter {
    /// Bytes read but not yet written to the log: a line still waiting for its newline.
    unlogged: Vec<u8>,
    /// The current line, up to [`MAX_LINE_BYTES`].
    line: Vec<u8>,
    /// Whether the current line has any bytes yet, so that at the end of the stream a final
    /// line without a newline is delivered, and nothing is delivered after a final newline.
    line_started: bool,
}

impl LineSplitter {
    /// Takes the next chunk read from the stream.
    pub(super) fn push(
        &mut self,
        chunk: &[u8],
        log: &mut CappedLog,
        on_line: &mut dyn FnMut(&str),
    ) {
        let mut rest = chunk;
        while let Some(pos) = rest.iter().position(|&b| b == b'\n') {
            self.extend_line(&rest[..pos]);
            self.deliver(on_line);
            rest = &rest[pos + 1..];
        }
        self.extend_line(rest);

        // Log everything up to the chunk's last newline in one write; keep a trailing partial
        // line back unless it has grown past the line cap (then it is logged as it comes).
        self.unlogged.extend_from_slice(chunk);
        if let Some(last) = self.unlogged.iter().rposition(|&b| b == b'\n') {
            log.append(&self.unlogged[..=last]);
            self.unlogged.drain(..=last);
        }
        if self.unlogged.len() >= MAX_LINE_BYTES {
            log.append(&self.unlogged);
            self.unlogged.clear();
        }
    }

    /// The stream ended: log what is left and deliver a final line without a newline.
    pub(super) fn finish(&mut self, log: &mut CappedLog, on_line: &mut dyn FnMut(&str)) {
        log.append(&self.unlogged);
        self.unlogged.clear();
        if self.line_started {
            self.deliver(on_line);
        }
    }

    fn extend_line(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.line_started = true;
        let room = MAX_LINE_BYTES.saturating_sub(self.line.len());
        self.line.extend_from_slice(&bytes[..room.min(bytes.len())]);
    }

    fn deliver(&mut self, on_line: &mut dyn FnMut(&str)) {
        let line = self.line.strip_suffix(b"\r").unwrap_or(&self.line);
        on_line(&String::from_utf8_lossy(line));
        self.line.clear();
        self.line_started = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(chunks: &[&[u8]]) -> (Vec<String>, Vec<u8>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log");
        let mut log = CappedLog::create(&path, u64::MAX).expect("create log");
        let mut lines = Vec::new();
        let mut splitter = LineSplitter::default();
        for chunk in chunks {
            splitter.push(chunk, &mut log, &mut |l| lines.push(l.to_owned()));
        }
        splitter.finish(&mut log, &mut |l| lines.push(l.to_owned()));
        log.finish().expect("finish");
        (lines, std::fs::read(&path).expect("read log"))
    }

    #[test]
    fn lines_split_across_chunks_are_joined() {
        let (lines, log) = split(&[b"val_", b"bpb: 0.99\nste", b"p=3\r\n\nlast"]);
        assert_eq!(lines, ["val_bpb: 0.99", "step=3", "", "last"]);
        assert_eq!(log, b"val_bpb: 0.99\nstep=3\r\n\nlast");
    }

    #[test]
    fn long_lines_are_cut_for_the_callback_but_logged_whole() {
        let long = vec![b'x'; MAX_LINE_BYTES * 2 + 10];
        let (lines, log) = split(&[&long, b"\nok\n"]);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].len(), MAX_LINE_BYTES);
        assert_eq!(lines[1], "ok");
        assert_eq!(log.len(), long.len() + 4);
    }

    #[test]
    fn no_output_delivers_no_line() {
        let (lines, log) = split(&[]);
        assert!(lines.is_empty());
        assert!(log.is_empty());
    }
}
