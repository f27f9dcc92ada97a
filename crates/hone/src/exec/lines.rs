//! Splitting one output stream into lines: complete lines go to the log as one write (so the
//! two streams interleave at line granularity) and, capped in length, to the line callback.
//! For the callback a carriage return ends a line too (`\r\n` is one end): a progress bar
//! that rewrites its line (`print(f"\rstep {step} | loss: {loss}", end="")`, as
//! autoresearch's `train.py` does) gives one line per update, not one line at the end.

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
    /// Whether the last byte read was a `\r` that ended a line: a `\n` right after it ends
    /// nothing more.
    after_cr: bool,
}

impl LineSplitter {
    /// Takes the next chunk read from the stream.
    pub(super) fn push(
        &mut self,
        chunk: &[u8],
        log: &mut CappedLog,
        on_line: &mut dyn FnMut(&str),
    ) {
        self.split(chunk, on_line);

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

    /// Delivers the lines `chunk` completes and keeps the start of the next one.
    fn split(&mut self, chunk: &[u8], on_line: &mut dyn FnMut(&str)) {
        let mut rest = chunk;
        while let Some(pos) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.extend_line(&rest[..pos]);
            let crlf = rest[pos] == b'\n' && pos == 0 && self.after_cr;
            if !crlf {
                self.deliver(on_line);
            }
            self.after_cr = rest[pos] == b'\r';
            rest = &rest[pos + 1..];
        }
        if !rest.is_empty() {
            self.after_cr = false;
        }
        self.extend_line(rest);
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
        on_line(&String::from_utf8_lossy(&self.line));
        self.line.clear();
        self.line_started = false;
    }
}

/// The lines of a whole output held in memory (a remote worker's log), split as a stream's
/// are: a carriage return ends a line too, each line capped at [`MAX_LINE_BYTES`], a final
/// line without a newline delivered.
pub(crate) fn each_line(output: &[u8], on_line: &mut dyn FnMut(&str)) {
    let mut splitter = LineSplitter::default();
    splitter.split(output, on_line);
    if splitter.line_started {
        splitter.deliver(on_line);
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
    fn a_carriage_return_ends_a_line_for_the_callback_and_the_log_keeps_the_bytes() {
        // autoresearch's progress line, rewritten in place, then `print()` and the metric;
        // a `\r` at the end of one chunk and the `\n` at the start of the next are one end.
        let chunks: [&[u8]; 4] = [
            b"\rstep 00001 (0.1%) | loss: 9.000000 | lrm: 1.00    ",
            b"\rstep 00002 (0.2%) | loss: 8.5",
            b"00000 | lrm: 1.00    \r",
            b"\nval_bpb: 1.5\r\n\r\nend\rlast",
        ];
        let (lines, log) = split(&chunks);
        assert_eq!(
            lines,
            [
                "",
                "step 00001 (0.1%) | loss: 9.000000 | lrm: 1.00    ",
                "step 00002 (0.2%) | loss: 8.500000 | lrm: 1.00    ",
                "val_bpb: 1.5",
                "",
                "end",
                "last"
            ]
        );
        assert_eq!(log, chunks.concat());
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

    #[test]
    fn a_whole_output_splits_as_a_stream_does() {
        let output = b"step 1\rstep 2\r\nval: 3\n\nlast";
        let mut whole = Vec::new();
        each_line(output, &mut |l| whole.push(l.to_owned()));
        assert_eq!(whole, ["step 1", "step 2", "val: 3", "", "last"]);
        assert_eq!(split(&[&output[..9], &output[9..]]).0, whole);
    }
}
