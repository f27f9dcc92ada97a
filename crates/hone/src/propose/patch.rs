//! The apply_patch edit format that OpenAI's models are trained on (`edit_mode = "patch"`):
//!
//! ```text
//! *** Begin Patch
//! *** Update File: train.py
//! @@ def step():
//!      lr = base_lr
//! -    lr *= 0.5
//! +    lr *= 0.25
//!      return lr
//! *** Add File: notes/idea.md
//! +a new file, every line prefixed with +
//! *** Delete File: old.py
//! *** Update File: a.py
//! *** Move to: b.py
//! @@
//! -x = 1
//! +x = 2
//! *** End of File
//! *** End Patch
//! ```
//!
//! A hunk's context and `-` lines must match the file exactly once after its `@@` anchor (a
//! line to find first) and after the previous hunk of the same file: first byte for byte,
//! then ignoring trailing whitespace, then ignoring leading and trailing whitespace.
//! `*** End of File` pins a hunk to the end of the file. Each file's operation applies
//! whole or not at all; paths are checked like SEARCH/REPLACE blocks (inside the project,
//! never through a symbolic link).

use std::path::Path;

/// One file operation of a patch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileOp {
    Add {
        path: String,
        contents: String,
    },
    Delete {
        path: String,
    },
    Update {
        path: String,
        move_to: Option<String>,
        hunks: Vec<Hunk>,
    },
}

impl FileOp {
    pub fn path(&self) -> &str {
        match self {
            FileOp::Add { path, .. } | FileOp::Delete { path } | FileOp::Update { path, .. } => {
                path
            }
        }
    }
}

/// One `@@` hunk of an update.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hunk {
    /// The text after `@@`: a line to find before the hunk's lines (empty: none).
    pub anchor: String,
    /// The lines as they are now (context and `-` lines), in order.
    pub old: Vec<String>,
    /// The lines as they should be (context and `+` lines), in order.
    pub new: Vec<String>,
    /// `*** End of File`: the old lines end the file.
    pub at_eof: bool,
}

/// Why a patch, or one of its file operations, could not be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatchFailure {
    /// The file concerned (empty when the patch itself does not parse).
    pub path: String,
    /// The failing text, quoted back to the model.
    pub quote: String,
    pub why: String,
}

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";

/// Does the answer contain a patch at all?
pub fn contains_patch(answer: &str) -> bool {
    answer.lines().any(|l| l.trim() == BEGIN)
}

/// Parses the first patch in a model's answer (markdown fences around it are fine).
pub fn parse(answer: &str) -> Result<Vec<FileOp>, PatchFailure> {
    let lines: Vec<&str> = answer.lines().collect();
    let Some(start) = lines.iter().position(|l| l.trim() == BEGIN) else {
        return Err(fail("", format!("no `{BEGIN}` line")));
    };
    let Some(end) = lines[start..]
        .iter()
        .position(|l| l.trim() == END)
        .map(|i| start + i)
    else {
        return Err(fail(BEGIN, format!("the patch has no `{END}` line")));
    };
    let body = &lines[start + 1..end];
    let mut ops = Vec::new();
    let mut i = 0;
    while i < body.len() {
        let line = body[i];
        if let Some(path) = header(line, "*** Add File:") {
            let (op, next) = parse_add(body, i + 1, path)?;
            ops.push(op);
            i = next;
        } else if let Some(path) = header(line, "*** Delete File:") {
            ops.push(FileOp::Delete { path });
            i += 1;
        } else if let Some(path) = header(line, "*** Update File:") {
            let (op, next) = parse_update(body, i + 1, line, path)?;
            ops.push(op);
            i = next;
        } else if line.trim().is_empty() {
            i += 1;
        } else {
            return Err(fail(
                line,
                "expected `*** Add File:`, `*** Delete File:` or `*** Update File:`".into(),
            ));
        }
    }
    if ops.is_empty() {
        return Err(fail(BEGIN, "the patch changes no file".into()));
    }
    Ok(ops)
}

/// A failure of the patch as a whole (no file concerned).
fn fail(quote: &str, why: String) -> PatchFailure {
    PatchFailure {
        path: String::new(),
        quote: quote.to_string(),
        why,
    }
}

/// An `*** Add File:` operation whose `+` lines start at `body[i]`; returns it and the index
/// of the line after it.
fn parse_add(body: &[&str], mut i: usize, path: String) -> Result<(FileOp, usize), PatchFailure> {
    let mut contents = String::new();
    while i < body.len() && !body[i].starts_with("*** ") {
        match body[i].strip_prefix('+') {
            Some(l) => {
                contents.push_str(l);
                contents.push('\n');
            }
            None => {
                return Err(fail(
                    body[i],
                    format!("every line of an added file starts with `+` (in `{path}`)"),
                ))
            }
        }
        i += 1;
    }
    Ok((FileOp::Add { path, contents }, i))
}

/// An `*** Update File:` operation (its header is `line`) whose body starts at `body[i]`: an
/// optional `*** Move to:`, then hunks. Returns it and the index of the line after it.
fn parse_update(
    body: &[&str],
    mut i: usize,
    line: &str,
    path: String,
) -> Result<(FileOp, usize), PatchFailure> {
    let mut move_to = None;
    if let Some(to) = body.get(i).and_then(|l| header(l, "*** Move to:")) {
        move_to = Some(to);
        i += 1;
    }
    let mut hunks: Vec<Hunk> = Vec::new();
    let mut current: Option<Hunk> = None;
    while i < body.len() {
        let l = body[i];
        if is_eof_marker(l) {
            let mut h = current.take().unwrap_or_default();
            h.at_eof = true;
            hunks.push(h);
            i += 1;
            continue;
        }
        if l.starts_with("*** ") {
            break;
        }
        if let Some(anchor) = l.strip_prefix("@@") {
            if let Some(h) = current.take() {
                hunks.push(h);
            }
            let anchor = anchor.trim();
            // `@@ ... @@` (unified-diff style) carries no usable anchor.
            let anchor = if anchor.starts_with('-') && anchor.ends_with("@@") {
                ""
            } else {
                anchor
            };
            current = Some(Hunk {
                anchor: anchor.to_string(),
                ..Hunk::default()
            });
            i += 1;
            continue;
        }
        hunk_line(current.get_or_insert_with(Hunk::default), l, &path)?;
        i += 1;
    }
    if let Some(h) = current.take() {
        hunks.push(h);
    }
    hunks.retain(|h| !(h.old.is_empty() && h.new.is_empty() && !h.at_eof));
    if hunks.is_empty() && move_to.is_none() {
        return Err(fail(line, format!("the update of `{path}` has no hunk")));
    }
    Ok((
        FileOp::Update {
            path,
            move_to,
            hunks,
        },
        i,
    ))
}

/// Adds one context, `-` or `+` line to hunk `h`.
fn hunk_line(h: &mut Hunk, l: &str, path: &str) -> Result<(), PatchFailure> {
    match l.chars().next() {
        Some(' ') => {
            h.old.push(l[1..].to_string());
            h.new.push(l[1..].to_string());
        }
        Some('-') => h.old.push(l[1..].to_string()),
        Some('+') => h.new.push(l[1..].to_string()),
        // A blank line: models often drop the space of an empty context line.
        None => {
            h.old.push(String::new());
            h.new.push(String::new());
        }
        Some(_) => {
            return Err(fail(
                l,
                format!("a hunk line must start with ` `, `-` or `+` (in `{path}`)"),
            ))
        }
    }
    Ok(())
}

fn header(line: &str, prefix: &str) -> Option<String> {
    line.strip_prefix(prefix)
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
}

fn is_eof_marker(line: &str) -> bool {
    line.trim().eq_ignore_ascii_case("*** End of File")
}

/// Applies hunks to a file's text; the error names the failing hunk.
pub fn apply_hunks(text: &str, hunks: &[Hunk]) -> Result<String, (usize, String)> {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    // Where each hunk goes, found in order; applied afterwards from the last to the first.
    let mut edits: Vec<(usize, usize, &Hunk)> = Vec::new();
    let mut from = 0usize;
    for (k, h) in hunks.iter().enumerate() {
        let mut start = from;
        if !h.anchor.is_empty() {
            let hits = find(&lines, std::slice::from_ref(&h.anchor), from, false);
            match hits.as_slice() {
                [] => {
                    return Err((
                        k,
                        format!("the `@@ {}` line matches nothing in the file", h.anchor),
                    ))
                }
                [a] => start = a + 1,
                many => {
                    return Err((
                        k,
                        format!(
                            "the `@@ {}` line matches {} places; choose a unique one",
                            h.anchor,
                            many.len()
                        ),
                    ))
                }
            }
        }
        let at = if h.old.is_empty() {
            // A pure insertion: after the anchor, or at the end of the file.
            if h.anchor.is_empty() {
                lines.len()
            } else {
                start
            }
        } else {
            let hits = find(&lines, &h.old, start, h.at_eof);
            match hits.as_slice() {
                [at] => *at,
                [] => return Err((k, "its context and `-` lines match nothing in the file (after the previous hunk)".into())),
                many => {
                    return Err((
                        k,
                        format!(
                            "its context and `-` lines match {} places; add context lines or an `@@` anchor so it is unique",
                            many.len()
                        ),
                    ))
                }
            }
        };
        edits.push((at, h.old.len(), h));
        from = at + h.old.len();
    }
    for (at, len, h) in edits.into_iter().rev() {
        lines.splice(at..at + len, h.new.iter().cloned());
    }
    let mut out = lines.join("\n");
    if !lines.is_empty() {
        out.push('\n');
    }
    Ok(out)
}

/// Starts (at or after `from`) where `needle` matches `hay`: the exact matches if there are
/// any, else ignoring trailing whitespace, else ignoring surrounding whitespace.
fn find(hay: &[String], needle: &[String], from: usize, at_eof: bool) -> Vec<usize> {
    if needle.is_empty() || needle.len() > hay.len() {
        return Vec::new();
    }
    let norms: [fn(&str) -> &str; 3] = [|s| s, str::trim_end, str::trim];
    for norm in norms {
        let rest: Vec<&str> = hay
            .get(from..)
            .unwrap_or_default()
            .iter()
            .map(|l| norm(l))
            .collect();
        let wanted: Vec<&str> = needle.iter().map(|l| norm(l)).collect();
        let hits: Vec<usize> = super::blocks::occurrences(&rest, &wanted)
            .into_iter()
            .map(|s| s + from)
            .filter(|&s| !at_eof || s + needle.len() == hay.len())
            .collect();
        if !hits.is_empty() {
            return hits;
        }
    }
    Vec::new()
}

/// How many edits `ops` make: one a file operation, and one more a hunk past an update's first.
pub fn edits(ops: &[FileOp]) -> usize {
    ops.iter()
        .map(|op| match op {
            FileOp::Update { hunks, .. } => hunks.len().max(1),
            _ => 1,
        })
        .sum()
}

/// Applies a patch under `root`: every file operation that can be applied is, and the ones
/// that cannot are returned (with the hunk to quote back to the model).
pub fn apply(root: &Path, ops: &[FileOp]) -> Vec<PatchFailure> {
    let mut failures = Vec::new();
    for op in ops {
        if let Err((quote, why)) = apply_op(root, op) {
            failures.push(PatchFailure {
                path: op.path().to_string(),
                quote,
                why,
            });
        }
    }
    failures
}

fn apply_op(root: &Path, op: &FileOp) -> Result<(), (String, String)> {
    let whole = |why: String| (String::new(), why);
    let path = super::blocks::resolve(root, op.path()).map_err(whole)?;
    let rel = op.path();
    match op {
        FileOp::Add { contents, .. } => {
            if std::fs::symlink_metadata(&path).is_ok() {
                return Err(whole(format!(
                    "`{rel}` already exists; use `*** Update File:` to change it"
                )));
            }
            write(&path, contents).map_err(whole)
        }
        FileOp::Delete { .. } => {
            if !path.is_file() {
                return Err(whole(format!("`{rel}` is not a file that exists")));
            }
            std::fs::remove_file(&path).map_err(|e| whole(format!("cannot delete `{rel}`: {e}")))
        }
        FileOp::Update { move_to, hunks, .. } => {
            let text = super::blocks::read_to_edit(&path, rel).map_err(|why| {
                whole(why.unwrap_or_else(|| format!("cannot read `{rel}`: it does not exist")))
            })?;
            let new = apply_hunks(&text, hunks).map_err(|(k, why)| (quote_hunk(&hunks[k]), why))?;
            match move_to {
                None => write(&path, &new).map_err(whole),
                Some(to) => {
                    let dest = super::blocks::resolve(root, to).map_err(whole)?;
                    if std::fs::symlink_metadata(&dest).is_ok() {
                        return Err(whole(format!("cannot move `{rel}` to `{to}`: it exists")));
                    }
                    write(&dest, &new).map_err(whole)?;
                    std::fs::remove_file(&path)
                        .map_err(|e| whole(format!("cannot remove `{rel}` after moving it: {e}")))
                }
            }
        }
    }
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// A hunk as the model wrote it (old and new lines interleaved as a diff).
pub fn quote_hunk(h: &Hunk) -> String {
    let mut out = format!("@@ {}\n", h.anchor).replace("@@ \n", "@@\n");
    // Common prefix and suffix are context; the middle is what changed.
    let pre = h.old.iter().zip(&h.new).take_while(|(a, b)| a == b).count();
    let suf = h.old[pre..]
        .iter()
        .rev()
        .zip(h.new[pre..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    for l in &h.old[..pre] {
        out.push_str(&format!(" {l}\n"));
    }
    for l in &h.old[pre..h.old.len() - suf] {
        out.push_str(&format!("-{l}\n"));
    }
    for l in &h.new[pre..h.new.len() - suf] {
        out.push_str(&format!("+{l}\n"));
    }
    for l in &h.old[h.old.len() - suf..] {
        out.push_str(&format!(" {l}\n"));
    }
    if h.at_eof {
        out.push_str("*** End of File\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PATCH: &str = "Lowering the rate.\n```\n*** Begin Patch\n*** Update File: train.py\n@@ def step():\n     lr = base\n-    lr *= 0.5\n+    lr *= 0.25\n     return lr\n*** Add File: notes/idea.md\n+first\n+second\n*** Delete File: old.py\n*** End Patch\n```\n";

    #[test]
    fn parses_updates_adds_and_deletes() {
        let ops = parse(PATCH).unwrap();
        assert_eq!(ops.len(), 3);
        assert_eq!(
            ops[0],
            FileOp::Update {
                path: "train.py".into(),
                move_to: None,
                hunks: vec![Hunk {
                    anchor: "def step():".into(),
                    old: vec![
                        "    lr = base".into(),
                        "    lr *= 0.5".into(),
                        "    return lr".into()
                    ],
                    new: vec![
                        "    lr = base".into(),
                        "    lr *= 0.25".into(),
                        "    return lr".into()
                    ],
                    at_eof: false,
                }]
            }
        );
        assert_eq!(
            ops[1],
            FileOp::Add {
                path: "notes/idea.md".into(),
                contents: "first\nsecond\n".into()
            }
        );
        assert_eq!(
            ops[2],
            FileOp::Delete {
                path: "old.py".into()
            }
        );
        assert!(parse("*** Begin Patch\n*** Update File: a\n-x\n")
            .unwrap_err()
            .why
            .contains("no `*** End Patch`"));
        assert!(parse("*** Begin Patch\n*** Frobnicate: a\n*** End Patch\n").is_err());
        assert!(!contains_patch("no patch here"));
    }

    #[test]
    fn applies_in_a_project_with_anchor_move_and_eof() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(
            root.join("train.py"),
            "def init():\n    lr = base\n    lr *= 0.5\n    return lr\n\ndef step():\n    lr = base\n    lr *= 0.5\n    return lr\n",
        )
        .unwrap();
        std::fs::write(root.join("old.py"), "x\n").unwrap();
        let failures = apply(root, &parse(PATCH).unwrap());
        assert!(failures.is_empty(), "{failures:?}");
        let train = std::fs::read_to_string(root.join("train.py")).unwrap();
        assert!(
            train.ends_with("def step():\n    lr = base\n    lr *= 0.25\n    return lr\n"),
            "{train}"
        );
        assert!(
            train.starts_with("def init():\n    lr = base\n    lr *= 0.5\n"),
            "the anchor chose the second place"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("notes/idea.md")).unwrap(),
            "first\nsecond\n"
        );
        assert!(!root.join("old.py").exists());

        std::fs::write(root.join("a.py"), "x = 1\ny = 2\nx = 1\n").unwrap();
        let mv = "*** Begin Patch\n*** Update File: a.py\n*** Move to: b.py\n@@\n-x = 1\n+x = 3\n*** End of File\n*** End Patch\n";
        assert!(apply(root, &parse(mv).unwrap()).is_empty());
        assert!(!root.join("a.py").exists());
        assert_eq!(
            std::fs::read_to_string(root.join("b.py")).unwrap(),
            "x = 1\ny = 2\nx = 3\n"
        );
    }

    #[test]
    fn whitespace_tolerant_but_unique() {
        let h = |old: &[&str], new: &[&str]| Hunk {
            old: old.iter().map(|s| s.to_string()).collect(),
            new: new.iter().map(|s| s.to_string()).collect(),
            ..Hunk::default()
        };
        // Trailing spaces in the file, none in the hunk.
        assert_eq!(
            apply_hunks("a = 1   \nb = 2\n", &[h(&["a = 1"], &["a = 5"])]).unwrap(),
            "a = 5\nb = 2\n"
        );
        // Indentation differs: still found once.
        assert_eq!(
            apply_hunks("if x:\n    go()\n", &[h(&["go()"], &["    stop()"])]).unwrap(),
            "if x:\n    stop()\n"
        );
        let (k, why) = apply_hunks("x\nx\n", &[h(&["x"], &["y"])]).unwrap_err();
        assert_eq!(k, 0);
        assert!(why.contains("2 places"), "{why}");
        let (_, why) = apply_hunks("a\n", &[h(&["zzz"], &["y"])]).unwrap_err();
        assert!(why.contains("match nothing"), "{why}");
    }

    #[test]
    fn failures_quote_the_hunk_and_leave_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("t.py"), "a\nb\n").unwrap();
        let p = "*** Begin Patch\n*** Update File: t.py\n@@\n a\n-c\n+d\n*** End Patch\n";
        let failures = apply(dir.path(), &parse(p).unwrap());
        assert_eq!(failures.len(), 1);
        assert_eq!(failures[0].quote, "@@\n a\n-c\n+d\n");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("t.py")).unwrap(),
            "a\nb\n"
        );
    }

    #[test]
    fn never_writes_through_a_symlink_or_outside() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("data")).unwrap();
        std::fs::write(outside.path().join("v.py"), "x\n").unwrap();
        for p in [
            "*** Begin Patch\n*** Add File: data/new.py\n+stolen\n*** End Patch\n",
            "*** Begin Patch\n*** Update File: data/v.py\n-x\n+y\n*** End Patch\n",
            "*** Begin Patch\n*** Delete File: data/v.py\n*** End Patch\n",
            "*** Begin Patch\n*** Add File: ../escape.py\n+x\n*** End Patch\n",
        ] {
            let failures = apply(dir.path(), &parse(p).unwrap());
            assert_eq!(failures.len(), 1, "{p}");
        }
        assert!(!outside.path().join("new.py").exists());
        assert_eq!(
            std::fs::read_to_string(outside.path().join("v.py")).unwrap(),
            "x\n"
        );
        assert!(!dir.path().parent().unwrap().join("escape.py").exists());
    }

    /// Builds the patch that turns `old` into `new` by replacing the line range `at..at+len`.
    fn patch_for(old: &[String], at: usize, len: usize, repl: &[String]) -> String {
        let mut p = String::from("*** Begin Patch\n*** Update File: f.txt\n@@\n");
        // Up to three lines of context either side, as models write them.
        let lo = at.saturating_sub(3);
        let hi = (at + len + 3).min(old.len());
        for l in &old[lo..at] {
            p.push_str(&format!(" {l}\n"));
        }
        for l in &old[at..at + len] {
            p.push_str(&format!("-{l}\n"));
        }
        for l in repl {
            p.push_str(&format!("+{l}\n"));
        }
        for l in &old[at + len..hi] {
            p.push_str(&format!(" {l}\n"));
        }
        if hi == old.len() {
            p.push_str("*** End of File\n");
        }
        p.push_str("*** End Patch\n");
        p
    }

    proptest! {
        /// A patch written for a change (with unique lines, so the context is unambiguous)
        /// parses and applies back to exactly that change.
        #[test]
        fn round_trip(n in 1usize..30, at_frac in 0.0f64..1.0, len in 0usize..4, repl in prop::collection::vec("[a-z ]{0,12}", 0..4)) {
            let old: Vec<String> = (0..n).map(|i| format!("line {i} = {}", i * 7)).collect();
            let at = ((n as f64) * at_frac) as usize;
            let len = len.min(n - at);
            prop_assume!(len > 0 || !repl.is_empty());
            // Replacement lines are distinct from the file's, as the uniqueness rule needs.
            let repl: Vec<String> = repl.iter().map(|r| format!("new {r}")).collect();
            let mut expected = old.clone();
            expected.splice(at..at + len, repl.iter().cloned());
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("f.txt"), format!("{}\n", old.join("\n"))).unwrap();
            let p = patch_for(&old, at, len, &repl);
            let failures = apply(dir.path(), &parse(&p).unwrap());
            prop_assert!(failures.is_empty(), "{:?}\n{}", failures, p);
            let got = std::fs::read_to_string(dir.path().join("f.txt")).unwrap();
            let want = if expected.is_empty() { String::new() } else { format!("{}\n", expected.join("\n")) };
            prop_assert_eq!(got, want);
        }
    }
}
