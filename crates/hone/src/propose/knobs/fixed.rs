//! `[loop] fixed`: constants of the editable files that must keep the values they had when the
//! run started (a time budget, a run length, a seed). A change to one makes the candidate a
//! `violation`: a longer run or a luckier seed is not an improvement of the project.

#[path = "fixed_lines.rs"]
mod lines;
use lines::{enclosed, logical_lines, normalize_identifiers};

/// How a candidate's file `path` treats the `fixed` constants its parent's version (`old`)
/// assigns: the first one assigned otherwise than before (another value, a second assignment
/// further down, an augmented one, none left), or held by a deleted file (`new` is `None`),
/// said for the record; or one the parent's file did not assign that this one does at
/// module level (`from tweaks import *` with `tweaks.py` setting it; a name local to a
/// function or class of such a file is another name, see [`lines::enclosed`]).
/// Assignments are compared as written (comments and spacing aside), wherever a statement
/// stands (see [`assignments`]): a best effort against an agent that edits the constant, not
/// against code written to get around it (put such a constant in a protected file for that).
pub fn fixed_changed(fixed: &[String], path: &str, old: &str, new: Option<&str>) -> Option<String> {
    // Python decodes a file as its coding cookie says (`utf-7` makes `+AAo-` a newline):
    // hone reads UTF-8 only.
    if let Some(enc) = new
        .filter(|_| !fixed.is_empty() && is_python(path))
        .and_then(odd_encoding)
    {
        return Some(format!(
            "`{path}` declares the encoding `{enc}`, which [loop] fixed does not read (it reads UTF-8): keep the file in UTF-8"
        ));
    }
    for name in fixed {
        let before = assignments(path, old, name);
        let Some(first) = before.first() else {
            // Assigned where it was not (another editable file, a new one, that the
            // script then imports): another value of it all the same. Not a name local to
            // a new function or class (`def helper(): EPOCHS = 3`): the module's is untouched.
            let code = is_c_like(path) || is_python(path);
            let assigned_now = new.filter(|_| code).and_then(|n| {
                scoped_bindings(path, n, name, false)
                    .into_iter()
                    .find_map(|(b, local)| (!local).then_some(b))
            });
            if let Some(a) = assigned_now {
                return Some(format!(
                    "assigns `{name}` in `{path}` (`{a}`), which did not before: [loop] fixed keeps it as the run started"
                ));
            }
            continue;
        };
        let Some(new) = new else {
            return Some(format!(
                "deleted `{path}`, which holds `{name}`: [loop] fixed keeps it as the run started"
            ));
        };
        // Where the parent binds the name, every binding counts: a local one in a function
        // that reads the constant (`def main(): EPOCHS = 60`) changes what that function sees.
        let after = assignments(path, new, name);
        if after == before {
            continue;
        }
        let how = match after.iter().find(|a| !before.contains(a)) {
            Some(changed) => format!("changed `{name}` in `{path}` from `{first}` to `{changed}`"),
            None if after.len() > before.len() => {
                format!("assigns `{name}` in `{path}` once more (`{first}`)")
            }
            None => format!("no longer assigns `{name}` in `{path}` as it did (`{first}`)"),
        };
        return Some(format!("{how}: [loop] fixed keeps it as the run started"));
    }
    None
}

/// A line the candidate added or changed in `path` (one of `new` not in `old`) that uses a
/// `fixed` constant (`for ep in range(EPOCHS * 4):`): the name and the line, trimmed. Not a
/// violation (using a constant is what code does), but worth a look: it may change the
/// measurement without assigning the constant.
pub fn fixed_used(fixed: &[String], old: &str, new: &str) -> Option<(String, String)> {
    let before: std::collections::HashSet<String> = old
        .lines()
        .map(|l| normalize_identifiers(l.trim()))
        .collect();
    new.lines()
        .map(|l| normalize_identifiers(l.trim()))
        .filter(|l| !l.is_empty() && !before.contains(l))
        .find_map(|l| {
            let l = l.as_str();
            let name = fixed.iter().find(|name| {
                l.match_indices(name.as_str()).any(|(i, _)| {
                    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
                    !word(l[..i].chars().next_back()) && !word(l[i + name.len()..].chars().next())
                })
            })?;
            Some((name.clone(), crate::util::cut_at_word(l, 120)))
        })
}

/// Whether `text`, the file `path`, assigns `name` anywhere (see [`assignments`]).
pub fn assigns(path: &str, text: &str, name: &str) -> bool {
    !assignments(path, text, name).is_empty()
}

/// The assignments to `name` in `text` (the file `path`), in order, each as its operator and
/// what follows it (`=5`, `*=2`, `:=5`, `for in range(3)`), comments cut, spaces dropped and
/// quotes made one kind (a formatter's respacing is no change). A statement is found
/// wherever it stands: at any indentation, after a `;`, after a one-line block's `:` (`if x:
/// NAME = 6`), behind declaration words (`const`, `let mut`, `pub static`, `const int`), as one
/// of several targets (`NAME, _ = 8, 0`, `X = NAME = 9`), as a `for` loop's target, and as a
/// C `#define`; a statement that goes on over several lines (open brackets, a trailing `\`)
/// is read whole, so a keyword argument inside a call's parentheses is none, and neither is
/// text in a triple-quoted string. An attribute (`self.NAME`) is another thing. Fullwidth
/// letters are read as the ASCII ones they stand for (Python does).
fn assignments(path: &str, text: &str, name: &str) -> Vec<String> {
    bindings(path, text, name, true)
}

/// [`assignments`], without `from m import NAME` unless `reads` (it reads `m`'s `NAME`, whose
/// assignment is `m`'s to keep: a file that did not bind the name and now imports it so
/// assigns nothing).
fn bindings(path: &str, text: &str, name: &str, reads: bool) -> Vec<String> {
    scoped_bindings(path, text, name, reads)
        .into_iter()
        .map(|(b, _)| b)
        .collect()
}

/// [`bindings`], each with whether it is local to a function or a class body (Python's
/// `def` and `class` blocks, in a file that declares no `global NAME`: see
/// [`lines::enclosed`]), where it leaves the module's own `NAME` alone.
fn scoped_bindings(path: &str, text: &str, name: &str, reads: bool) -> Vec<(String, bool)> {
    let c_like = is_c_like(path);
    let lines = logical_lines(text, c_like);
    let local = if c_like {
        vec![false; lines.len()]
    } else {
        enclosed(&lines, name)
    };
    let mut scoped = Vec::new();
    for (line, local) in lines.iter().zip(local) {
        let bound = line_bindings(line, name, reads, c_like);
        scoped.extend(bound.into_iter().map(|b| (b, local)));
    }
    scoped
}

/// What one logical line binds to `name` (see [`bindings`]).
fn line_bindings(line: &str, name: &str, reads: bool, c_like: bool) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(rest) = line.trim_start().strip_prefix("#define").filter(|_| c_like) {
        let mut words = rest.split_whitespace();
        if words.next() == Some(name) {
            out.push(format!("define {}", words.collect::<String>()));
        }
        return out;
    }
    for stmt in split_top(line, ';', 0) {
        if let Some(v) = loop_target(stmt, name) {
            out.push(v);
        }
        let body = after_block_header(stmt);
        if !c_like {
            out.extend(
                import_bindings(body)
                    .into_iter()
                    .filter(|(bound, how)| *bound == name && (reads || !how.ends_with(" import")))
                    .map(|(_, how)| how),
            );
        }
        out.extend(assigned(body, name));
        if !c_like {
            // A one-line block's header binds too (`with x as NAME: pass`,
            // `if (NAME := 12): pass`), its body on its own.
            if body.len() < stmt.len() {
                let header = &stmt[..stmt.len() - body.len()];
                out.extend(other_bindings(header, name));
            }
            out.extend(other_bindings(body, name));
        }
    }
    out
}

/// Python's other ways to bind `name` in a statement: `(NAME := v)` inside brackets or a
/// header (at the top it is an assignment, [`assigned`]'s), `with ... as NAME`, `except ...
/// as NAME`, and a `case` pattern that captures it (`case NAME:`, `case {"k": NAME}:`,
/// `case int() as NAME:`). Each is said as what binds it; its value is not compared (the
/// binding is the change).
fn other_bindings(stmt: &str, name: &str) -> Vec<String> {
    let t = stmt.trim_start();
    let words = |s: &str| -> Vec<usize> {
        s.match_indices(name)
            .filter(|(i, _)| {
                let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
                !word(s[..*i].chars().next_back()) && !word(s[i + name.len()..].chars().next())
            })
            .map(|(i, _)| i)
            .collect()
    };
    let mut out = Vec::new();
    for at in words(t) {
        let after = t[at + name.len()..].trim_start();
        let before = t[..at].trim_end();
        if after.starts_with(":=") && !t.starts_with(&format!("{name} ")) {
            out.push(format!("{name} := (inside)"));
        } else if before.ends_with(" as")
            && ["with ", "async with ", "except", "case "]
                .iter()
                .any(|h| t.starts_with(h))
        {
            out.push(format!("as {name}"));
        } else if in_case_pattern(t, at)
            && !before.ends_with('.')
            && !after.starts_with(['(', '.', '='])
        {
            out.push(format!("case captures {name}"));
        }
    }
    out
}

/// Whether `at` in the statement `t` stands in a `case` pattern: after `case `, before the
/// pattern's `:` and any guard (` if `); `case = ...` and `case.x` are no `case` statement.
fn in_case_pattern(t: &str, at: usize) -> bool {
    let Some(pattern) = t.strip_prefix("case ") else {
        return false;
    };
    if pattern.trim_start().starts_with(['=', '.', '(']) {
        return false;
    }
    let start = "case ".len();
    let parts = split_top(pattern, ':', 0);
    let head = parts.first().copied().unwrap_or("");
    let head = head.split(" if ").next().unwrap_or(head);
    parts.len() > 1 && at >= start && at < start + head.len()
}

/// The encoding a Python file's coding cookie (`# -*- coding: utf-7 -*-`, on one of its
/// first two lines) names, when it is not one whose ASCII reads as UTF-8's does.
fn odd_encoding(text: &str) -> Option<String> {
    const PLAIN: &[&str] = &[
        "utf-8",
        "utf8",
        "ascii",
        "us-ascii",
        "latin-1",
        "latin1",
        "iso-8859-1",
        "iso8859-1",
        "cp1252",
    ];
    text.lines().take(2).find_map(|l| {
        let l = l.trim_start();
        if !l.starts_with('#') {
            return None;
        }
        let rest = l
            .match_indices("coding")
            .find_map(|(at, _)| l[at + "coding".len()..].strip_prefix([':', '=']))?
            .trim_start();
        let enc: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            .collect::<String>()
            .to_ascii_lowercase();
        let plain = PLAIN.contains(&enc.replace('_', "-").as_str()) || enc.starts_with("utf-8-");
        (!enc.is_empty() && !plain).then_some(enc)
    })
}

/// Whether `[loop] fixed` must read `path` as code (a Python file by its extension, or a
/// C-like language's): one too large to read is a violation (a file without an extension,
/// data as often as a script, is not).
pub fn reads_as_code(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    (is_python(path) && name.contains('.')) || is_c_like(path)
}

/// Whether `path` is a Python file (`.py`, `.pyi`), or a script without an extension.
fn is_python(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    match name.rsplit_once('.') {
        Some((_, ext)) => matches!(ext.to_ascii_lowercase().as_str(), "py" | "pyi" | "pyw"),
        None => true,
    }
}

/// Whether `path` is in a language whose comments start with `//` and where `#` starts a
/// preprocessor line (C, C++, Rust, Go, JavaScript, TypeScript, Java...); else `#` starts a
/// comment and `//` is an operator (Python's floor division).
fn is_c_like(path: &str) -> bool {
    const C_LIKE: &[&str] = &[
        "c", "h", "cc", "cpp", "cxx", "hpp", "hh", "cu", "cuh", "rs", "go", "js", "mjs", "cjs",
        "ts", "tsx", "jsx", "java", "kt", "kts", "scala", "swift", "cs", "dart", "zig",
    ];
    path.rsplit_once('.')
        .is_some_and(|(_, ext)| C_LIKE.contains(&ext.to_ascii_lowercase().as_str()))
}

/// `code` cut at every `sep` outside quotes and brackets (from `depth` open ones on).
fn split_top(code: &str, sep: char, depth: i64) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut quote, mut depth, mut from) = (None, depth, 0);
    for (i, c) in code.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '(' | '[' | '{') => depth += 1,
            (None, ')' | ']' | '}') => depth -= 1,
            (None, c) if c == sep && depth == 0 => {
                parts.push(&code[from..i]);
                from = i + c.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(&code[from..]);
    parts
}

/// What a one-line block runs (`if x: NAME = 6` gives `NAME = 6`); `stmt` itself otherwise.
fn after_block_header(stmt: &str) -> &str {
    const HEADERS: &[&str] = &[
        "if ", "elif ", "else", "for ", "while ", "with ", "try", "except", "finally", "def ",
        "class ", "case ", "match ",
    ];
    let t = stmt.trim_start();
    if !HEADERS.iter().any(|h| t.starts_with(h)) {
        return stmt;
    }
    // The body starts after the header's first `:` outside brackets (`def f(x: int) -> int:`).
    match split_top(t, ':', 0).first() {
        Some(header) if header.len() < t.len() && !t[header.len() + 1..].trim().is_empty() => {
            &t[header.len() + 1..]
        }
        _ => stmt,
    }
}

/// `for NAME in ...` (or `for (i, NAME) in`): the loop's iterable, when `name` is a target.
fn loop_target(stmt: &str, name: &str) -> Option<String> {
    let header = stmt.trim_start().replace('\t', " ");
    let header = header.strip_prefix("for ")?;
    let (targets, iterable) = header.split_once(" in ")?;
    let hit = targets
        .split(',')
        .any(|t| t.trim().trim_matches(|c| c == '(' || c == ')').trim() == name);
    hit.then(|| {
        format!(
            "for in {}",
            normalized(iterable.split(':').next().unwrap_or(""))
        )
    })
}

/// The assignments `stmt` makes to `name`: its targets are what stands before each
/// assignment operator outside brackets (`X = NAME = 9`: `X` and `NAME`), each split at
/// commas, and a target is its last word (`const int NAME`, `let mut NAME: usize`, `self.NAME`).
fn assigned(stmt: &str, name: &str) -> Vec<String> {
    let ops = assignment_ops(stmt);
    let Some(&(last_at, last_len)) = ops.last() else {
        return Vec::new();
    };
    let value = normalized(&stmt[last_at + last_len..]);
    let mut from = 0;
    let mut out = Vec::new();
    for &(at, len) in &ops {
        let targets = &stmt[from..at];
        let hit = split_top(targets, ',', 0)
            .iter()
            .any(|t| target_names(t).contains(&name));
        if hit {
            out.push(format!("{}{value}", stmt[at..at + len].trim()));
        }
        from = at + len;
    }
    out
}

/// The names a target binds: a tuple's or a list's (`(NAME, _)`, `[NAME, *rest]`) at any
/// depth, else [`target_name`]'s.
fn target_names(target: &str) -> Vec<&str> {
    let t = target.split(':').next().unwrap_or("").trim();
    let inner = t
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .or_else(|| t.strip_prefix('[').and_then(|r| r.strip_suffix(']')));
    match inner {
        Some(inner) if split_top(inner, ',', 0).len() > 1 || inner.trim_end().ends_with(',') => {
            split_top(inner, ',', 0)
                .into_iter()
                .flat_map(target_names)
                .collect()
        }
        Some(inner) if inner.trim_start().starts_with(['(', '[']) => target_names(inner),
        _ => vec![target_name(target)],
    }
}

/// What a Python import binds, per name, as compared: `import m as NAME`, `from m import x as
/// NAME` (written `from m import x as`), `import NAME`, and `from m import NAME` (written
/// `from m import`: whatever else the statement imports, however a formatter lays it out).
fn import_bindings(stmt: &str) -> Vec<(&str, String)> {
    let t = stmt.trim();
    let (from, list) = if let Some(rest) = t.strip_prefix("import ") {
        (None, rest)
    } else if let Some((module, names)) = t
        .strip_prefix("from ")
        .and_then(|r| r.split_once(" import "))
    {
        (Some(module.trim()), names)
    } else {
        return Vec::new();
    };
    list.trim()
        .trim_matches(|c| c == '(' || c == ')')
        .split(',')
        .map(|item| {
            let item = item.trim();
            match (from, item.split_once(" as ")) {
                (Some(m), Some((x, alias))) => {
                    (alias.trim(), format!("from {m} import {} as", x.trim()))
                }
                (None, Some((m, alias))) => (alias.trim(), format!("import {} as", m.trim())),
                (None, None) => {
                    let top = item.split('.').next().unwrap_or("").trim();
                    (top, format!("import {item}"))
                }
                (Some(m), None) => (item, format!("from {m} import")),
            }
        })
        .filter(|(bound, _)| !bound.is_empty())
        .collect()
}

/// The name a target binds: its last word, past a type annotation (`NAME: int`); none for an
/// item, a call's result or an attribute (`table[NAME]`, `f(NAME)`, `self.NAME`).
fn target_name(target: &str) -> &str {
    let t = target.split(':').next().unwrap_or("");
    let t = t
        .trim()
        .trim_matches(|c: char| matches!(c, '(' | ')' | '*' | '&' | '[' | ']' | '\\'))
        .trim();
    if t.contains(['[', '(', '.']) || t.starts_with("lambda ") || t.contains(" lambda ") {
        return "";
    }
    t.rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .next()
        .unwrap_or("")
}

/// Where `stmt`'s assignment operators stand outside quotes and brackets, with their lengths:
/// `=`, `:=`, and the augmented ones (`+=`, `//=`, `**=`, `<<=`...), not `==`, `!=`, `<=`,
/// `>=` nor `=>`.
fn assignment_ops(stmt: &str) -> Vec<(usize, usize)> {
    let b = stmt.as_bytes();
    let mut ops = Vec::new();
    let (mut quote, mut depth) = (None, 0i64);
    for (i, &c) in b.iter().enumerate() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, b'"' | b'\'') => quote = Some(c),
            (None, b'(' | b'[' | b'{') => depth += 1,
            (None, b')' | b']' | b'}') => depth -= 1,
            (None, b'=') if depth == 0 => {
                let next = b.get(i + 1).copied();
                let prev = i.checked_sub(1).map(|j| b[j]);
                let prev_op = prev == Some(b'=') || next == Some(b'=') || next == Some(b'>');
                let compare = matches!(prev, Some(b'!' | b'<' | b'>'))
                    && !(i >= 2 && matches!(&b[i - 2..i], b"<<" | b">>"));
                if prev_op || compare {
                    continue;
                }
                // The operator's other characters: `+=`, `//=`, `**=`, `<<=`, `:=`.
                let mut start = i;
                while start > 0 && b"+-*/%&|^<>@:".contains(&b[start - 1]) && i - start < 2 {
                    start -= 1;
                }
                ops.push((start, i + 1 - start));
            }
            _ => {}
        }
    }
    ops
}

/// `s` as compared: without whitespace and a trailing `;` or `,`, its `'` quotes as `"` (what
/// a formatter changes is no change).
fn normalized(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_whitespace())
        .map(|c| if c == '\'' { '"' } else { c })
        .collect::<String>()
        .trim_end_matches([';', ','])
        .to_string()
}

#[cfg(test)]
#[path = "fixed_tests.rs"]
mod tests;
