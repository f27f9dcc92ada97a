//! Reading hone.toml's bytes before any parsing: only a regular file, at most
//! [`MAX_SPEC_BYTES`], and UTF-8 (an invalid byte is reported at its line). `--spec /dev/zero`
//! must not grow memory without bound, nor a FIFO block the command forever.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::SpecError;

/// The largest hone.toml hone reads (1 MiB; a real one is a few kilobytes).
pub const MAX_SPEC_BYTES: u64 = 1 << 20;

/// An error about the whole file (line 0) or about one line of it.
fn error(path: &Path, line: usize, message: String) -> SpecError {
    SpecError {
        file: path.to_path_buf(),
        line,
        key: String::new(),
        message,
    }
}

/// The text of the spec file at `path`.
pub(super) fn read(path: &Path) -> Result<String, SpecError> {
    let cannot = |e: std::io::Error| {
        error(
            path,
            0,
            if e.kind() == std::io::ErrorKind::NotFound {
                "not found; run `hone init` to write one".to_string()
            } else {
                format!("cannot read: {e}")
            },
        )
    };
    // Looked at before opening: opening a FIFO for reading waits for a writer.
    regular(path, &std::fs::metadata(path).map_err(cannot)?)?;
    // Non-blocking, in case the path was swapped for a FIFO in between; checked again on the
    // open file, which is what is read.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(cannot)?;
    regular(path, &file.metadata().map_err(cannot)?)?;
    let mut bytes = Vec::new();
    file.take(MAX_SPEC_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > MAX_SPEC_BYTES {
        return Err(error(
            path,
            0,
            format!(
                "larger than {} KiB, the most hone reads: a hone.toml is a few kilobytes; check that --spec names the right file",
                MAX_SPEC_BYTES / 1024
            ),
        ));
    }
    utf8(path, bytes)
}

/// Only a regular file is read (not a directory, FIFO, socket or device).
fn regular(path: &Path, meta: &std::fs::Metadata) -> Result<(), SpecError> {
    if meta.is_file() {
        return Ok(());
    }
    let what = if meta.is_dir() {
        "a directory"
    } else {
        "not a regular file (a FIFO, socket or device)"
    };
    Err(error(
        path,
        0,
        format!("is {what}: point --spec at a hone.toml file"),
    ))
}

/// The bytes as text; the first invalid byte is an error at its line.
pub(super) fn utf8(path: &Path, bytes: Vec<u8>) -> Result<String, SpecError> {
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let before = &e.as_bytes()[..at];
        let line = 1 + before.iter().filter(|b| **b == b'\n').count();
        let column = at
            - before
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |i| i + 1)
            + 1;
        error(
            path,
            line,
            format!("not valid UTF-8 (byte {column} of the line): save hone.toml as UTF-8"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_utf8_is_reported_at_its_line() {
        let e = utf8(
            Path::new("hone.toml"),
            b"[loop]\neditable = [\"a\xff\"]\n".to_vec(),
        )
        .unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert!(
            e.to_string()
                .starts_with("hone.toml:2: not valid UTF-8 (byte 15"),
            "{e}"
        );
    }

    #[test]
    fn only_a_bounded_regular_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let e = read(dir.path()).unwrap_err();
        assert!(e.message.contains("is a directory"), "{e}");
        // A FIFO is refused, not opened (opening it would wait for a writer forever).
        let fifo = dir.path().join("fifo.toml");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read(&fifo).unwrap_err();
        assert!(e.message.contains("not a regular file"), "{e}");
        let e = read(Path::new("/dev/zero")).unwrap_err();
        assert!(e.message.contains("not a regular file"), "{e}");
        let big = dir.path().join("big.toml");
        std::fs::write(&big, vec![b'#'; MAX_SPEC_BYTES as usize + 1]).unwrap();
        let e = read(&big).unwrap_err();
        assert!(e.message.contains("larger than 1024 KiB"), "{e}");
        std::fs::write(&big, vec![b'#'; MAX_SPEC_BYTES as usize]).unwrap();
        assert_eq!(read(&big).unwrap().len(), MAX_SPEC_BYTES as usize);
        let e = read(&dir.path().join("absent.toml")).unwrap_err();
        assert!(e.message.contains("run `hone init`"), "{e}");
    }
}
