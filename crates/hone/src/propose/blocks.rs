//! SEARCH/REPLACE edit blocks, the edit format hone asks HTTP LLMs for:
//!
//! ```text
//! path/to/file.py
//! <<<<<<< SEARCH
//! lines as they are now
//! =======
//! lines as they should be
//! >>>>>>> REPLACE
//! ```
//!
//! Every block must match exactly once: first byte for byte, then line by line ignoring
//! leading and trailing whitespace. An empty SEARCH creates a file that does not exist yet.

use std::path::Path;

/// One edit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EditBlock {
    pub path: String,
    pub search: String,
    pub replace: String,
}

/// The most edits (SEARCH/REPLACE blocks, or a patch's file operations and hunks) one answer
/// may hold: each rewrites a file, so many thousands against a large file would keep hone busy
/// for hours; real answers hold a handful.
pub const MAX_EDITS: usize = 500;

/// Why an answer with `n` edits, more than [`MAX_EDITS`], had none of them applied.
pub fn too_many_edits(n: usize) -> String {
    format!("the model's answer holds {n} edits; hone applies at most {MAX_EDITS} from one answer, so none were")
}

/// Finds the blocks in a model's answer (the path is the last non-empty line before the
/// `SEARCH` marker, without markdown decoration).
pub fn parse(answer: &str) -> Vec<EditBlock> {
    let lines: Vec<&str> = answer.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() != "<<<<<<< SEARCH" {
            i += 1;
            continue;
        }
        let path = lines[..i]
            .iter()
            .rev()
            .map(|l| l.trim())
            .find(|l| !l.is_empty() && !l.starts_with("```"))
            .map(|l| {
                l.trim_matches(|c| c == '`' || c == '*' || c == ':')
                    .trim()
                    .to_string()
            })
            .unwrap_or_default();
        let mut j = i + 1;
        let mut search = Vec::new();
        while j < lines.len() && lines[j].trim() != "=======" {
            search.push(lines[j]);
            j += 1;
        }
        let mut k = j + 1;
        let mut replace = Vec::new();
        while k < lines.len() && lines[k].trim() != ">>>>>>> REPLACE" {
            replace.push(lines[k]);
            k += 1;
        }
        if k >= lines.len() {
            break; // an unterminated block is no edit
        }
        out.push(EditBlock {
            path,
            search: join(&search),
            replace: join(&replace),
        });
        i = k + 1;
    }
    out
}

fn join(lines: &[&str]) -> String {
    if lines.is_empty() {
        String::new()
    } else {
        format!("{}\n", lines.join("\n"))
    }
}

/// Why a block could not be applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockFailure {
    pub block: EditBlock,
    pub why: String,
}

/// Applies `search -> replace` to `text`, if it matches exactly once.
pub fn apply_one(text: &str, search: &str, replace: &str) -> Result<String, String> {
    let exact = text.matches(search).count();
    if exact == 1 {
        return Ok(text.replacen(search, replace, 1));
    }
    if exact > 1 {
        return Err(format!(
            "the SEARCH text occurs {exact} times; include more lines so it is unique"
        ));
    }
    // Whitespace-tolerant: compare trimmed lines.
    let hay: Vec<&str> = text.split_inclusive('\n').collect();
    let needle: Vec<&str> = search.lines().map(str::trim).collect();
    if needle.is_empty() {
        return Err("the SEARCH text is empty".into());
    }
    let trimmed: Vec<&str> = hay.iter().map(|l| l.trim()).collect();
    let starts = occurrences(&trimmed, &needle);
    match starts.as_slice() {
        [s] => {
            let mut out: String = hay[..*s].concat();
            out.push_str(replace);
            out.push_str(&hay[s + needle.len()..].concat());
            Ok(out)
        }
        [] => Err("the SEARCH text matches nothing in the file".into()),
        many => Err(format!(
            "the SEARCH text matches {} places; include more lines so it is unique",
            many.len()
        )),
    }
}

/// The largest file an edit from a model may change (16 MiB): each edit reads and rewrites
/// its file, so hundreds of edits against a larger one keep hone busy for minutes.
pub const MAX_EDITED_FILE_BYTES: u64 = 16 << 20;

/// The text of the file at `path` (named `rel` to the model) for an edit: `Err(None)` when
/// there is none, `Err(Some(why))` when it cannot or may not be read (too large, not UTF-8).
pub(crate) fn read_to_edit(path: &Path, rel: &str) -> Result<String, Option<String>> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(None),
        Err(e) => return Err(Some(format!("cannot read `{rel}`: {e}"))),
    };
    if !meta.is_file() {
        return Err(Some(format!("`{rel}` is not a regular file")));
    }
    if meta.len() > MAX_EDITED_FILE_BYTES {
        return Err(Some(format!(
            "`{rel}` is {} bytes; hone edits files of at most {MAX_EDITED_FILE_BYTES} bytes",
            meta.len()
        )));
    }
    std::fs::read_to_string(path).map_err(|e| Some(format!("cannot read `{rel}`: {e}")))
}

/// Where `needle` stands in `hay` as a run of equal items, every start in order
/// (Knuth-Morris-Pratt): the time grows with the two lengths added, not multiplied. A naive
/// scan took hours on a model's answer that made a file of one repeated line and then searched
/// it for half as many of them and one more.
pub(crate) fn occurrences<T: PartialEq>(hay: &[T], needle: &[T]) -> Vec<usize> {
    let mut out = Vec::new();
    if needle.is_empty() || needle.len() > hay.len() {
        return out;
    }
    // fail[i]: the length of the longest proper prefix of needle[..=i] that is also its suffix.
    let mut fail = vec![0usize; needle.len()];
    let mut k = 0;
    for i in 1..needle.len() {
        while k > 0 && needle[i] != needle[k] {
            k = fail[k - 1];
        }
        if needle[i] == needle[k] {
            k += 1;
        }
        fail[i] = k;
    }
    let mut k = 0;
    for (i, h) in hay.iter().enumerate() {
        while k > 0 && *h != needle[k] {
            k = fail[k - 1];
        }
        if *h == needle[k] {
            k += 1;
        }
        if k == needle.len() {
            out.push(i + 1 - k);
            k = fail[k - 1];
        }
    }
    out
}

/// The file `rel` names under `root`, if an edit may write it: a relative path inside the
/// project that goes through no symbolic link (say a tracked `data -> /mnt/datasets`): every
/// existing component must be a real directory or file.
pub(crate) fn resolve(root: &Path, rel: &str) -> Result<std::path::PathBuf, String> {
    let r = Path::new(rel);
    if rel.is_empty()
        || r.is_absolute()
        || r.components().any(|c| {
            matches!(
                c,
                std::path::Component::ParentDir | std::path::Component::Prefix(_)
            )
        })
    {
        return Err(format!("`{rel}` is not a path inside the project"));
    }
    let mut walk = root.to_path_buf();
    for c in r.components() {
        walk.push(c);
        if std::fs::symlink_metadata(&walk).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(format!(
                "`{rel}` goes through a symbolic link; edit the real file instead"
            ));
        }
    }
    Ok(root.join(r))
}

/// Applies blocks to files under `root` (relative paths only). Applies every block that
/// matches and returns the ones that did not.
pub fn apply(root: &Path, blocks: &[EditBlock]) -> Vec<BlockFailure> {
    let mut failures = Vec::new();
    for b in blocks {
        let fail = |why: String| BlockFailure {
            block: b.clone(),
            why,
        };
        let path = match resolve(root, &b.path) {
            Ok(p) => p,
            Err(why) => {
                failures.push(fail(why));
                continue;
            }
        };
        let result = match read_to_edit(&path, &b.path) {
            Ok(text) => apply_one(&text, &b.search, &b.replace),
            Err(Some(why)) => Err(why),
            Err(None) if b.search.trim().is_empty() => Ok(b.replace.clone()),
            Err(None) => Err(format!("cannot read `{}`: it does not exist", b.path)),
        };
        match result {
            Ok(new) => {
                if let Some(dir) = path.parent() {
                    let _ = std::fs::create_dir_all(dir);
                }
                if let Err(e) = std::fs::write(&path, new) {
                    failures.push(fail(format!("cannot write `{}`: {e}", b.path)));
                }
            }
            Err(why) => failures.push(fail(why)),
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANSWER: &str = "I will lower the rate.\n\ntrain.py\n```python\n<<<<<<< SEARCH\nLR = 0.1\n=======\nLR = 0.05\n>>>>>>> REPLACE\n```\n";

    /// A file over 16 MiB is not read for an edit (hundreds of edits would each rewrite it);
    /// the block fails with the reason and the file is left as it was.
    #[test]
    fn a_file_too_large_to_edit_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.txt");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(MAX_EDITED_FILE_BYTES + 1).unwrap();
        let blocks = parse("big.txt\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n");
        let failures = apply(dir.path(), &blocks);
        assert_eq!(failures.len(), 1);
        assert!(
            failures[0].why.contains("hone edits files of at most"),
            "{}",
            failures[0].why
        );
        assert_eq!(
            std::fs::metadata(&big).unwrap().len(),
            MAX_EDITED_FILE_BYTES + 1
        );
    }

    #[test]
    fn occurrences_finds_every_start_overlapping_ones_too() {
        let hay: Vec<char> = "aaaaba".chars().collect();
        let run = |n: &str| occurrences(&hay, &n.chars().collect::<Vec<_>>());
        assert_eq!(run("aa"), [0, 1, 2]);
        assert_eq!(run("aab"), [2]);
        assert_eq!(run("ba"), [4]);
        assert!(run("bb").is_empty() && run("").is_empty() && run("aaaabaa").is_empty());
        let lines = ["x", "y", "x", "y", "x"];
        assert_eq!(occurrences(&lines, &["x", "y", "x"]), [0, 2]);
    }

    /// The answer that made the old whitespace-tolerant scan take hours: a file of one line
    /// repeated, searched for half as many of them and then one that is not there.
    #[test]
    fn a_search_of_repeated_lines_is_judged_right() {
        let text = "a\n".repeat(20_000);
        let search = format!("{}b\n", "  a\n".repeat(10_000));
        let err = apply_one(&text, &search, "x\n").unwrap_err();
        assert!(err.contains("matches nothing"), "{err}");
        let search = format!("{}  a \n", " a\n".repeat(9_999));
        let err = apply_one(&text, &search, "x\n").unwrap_err();
        assert!(err.contains("matches 10001 places"), "{err}");
        let text = format!("{}b\n", "a\n".repeat(20_000));
        let out = apply_one(&text, &format!("{}b", " a\n".repeat(3)), "c\n").unwrap();
        assert_eq!(out, format!("{}c\n", "a\n".repeat(19_997)));
    }

    #[test]
    fn parses_a_block_with_its_path() {
        let b = parse(ANSWER);
        assert_eq!(
            b,
            vec![EditBlock {
                path: "train.py".into(),
                search: "LR = 0.1\n".into(),
                replace: "LR = 0.05\n".into()
            }]
        );
        assert!(parse("<<<<<<< SEARCH\nno end").is_empty());
    }

    #[test]
    fn applies_exactly_then_tolerantly() {
        assert_eq!(
            apply_one("a\nLR = 0.1\nb\n", "LR = 0.1\n", "LR = 0.05\n").unwrap(),
            "a\nLR = 0.05\nb\n"
        );
        // Indentation differs: the tolerant match still finds the one place.
        assert_eq!(
            apply_one(
                "def f():\n    x = 1\n    return x\n",
                "x = 1\nreturn x\n",
                "    return 2\n"
            )
            .unwrap(),
            "def f():\n    return 2\n"
        );
        assert!(apply_one("x\nx\n", "x\n", "y\n")
            .unwrap_err()
            .contains("2 times"));
        assert!(apply_one("a\n", "zzz\n", "y\n")
            .unwrap_err()
            .contains("matches nothing"));
    }

    #[test]
    fn never_writes_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("data")).unwrap();
        let blocks = vec![EditBlock {
            path: "data/val.py".into(),
            search: String::new(),
            replace: "stolen\n".into(),
        }];
        let failures = apply(dir.path(), &blocks);
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(!outside.path().join("val.py").exists());
    }

    #[test]
    fn apply_reports_failures_and_refuses_escaping_paths() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("train.py"), "LR = 0.1\n").unwrap();
        let mut blocks = parse(ANSWER);
        blocks.push(EditBlock {
            path: "../outside.py".into(),
            search: String::new(),
            replace: "x\n".into(),
        });
        blocks.push(EditBlock {
            path: "new.py".into(),
            search: String::new(),
            replace: "print(1)\n".into(),
        });
        let failures = apply(dir.path(), &blocks);
        assert_eq!(failures.len(), 1);
        assert!(failures[0].why.contains("not a path inside"));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("train.py")).unwrap(),
            "LR = 0.05\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("new.py")).unwrap(),
            "print(1)\n"
        );
    }
}
