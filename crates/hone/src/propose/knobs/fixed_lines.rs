//! How `[loop] fixed` reads a file's text as statements: Python read as Python reads it (a
//! line ends at `\n` or a lone `\r`; strings, escapes and triple quotes never read as code;
//! brackets of every kind, a trailing `\` and an open string go on to the next line;
//! identifiers in NFKC form), C-like languages with their `//` comments cut.

/// `text` as statements' lines: comments cut, string literals emptied, and a line whose
/// brackets stay open (or that ends with `\`, or inside a string) joined with the lines that
/// close them (at most 64 KiB each: a bracket never closed ends it there).
pub(super) fn logical_lines(text: &str, c_like: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut joined = String::new();
    let mut depth = 0i64;
    let mut in_string: Option<&'static str> = None;
    // Python's universal newlines: a lone `\r` ends a line too.
    for raw in text.split(['\n', '\r']) {
        // Strings first, on the line as written (a fullwidth quote in one is no quote), then
        // the code's names as Python reads them.
        let code = if c_like {
            strip_comment(raw, true).to_string()
        } else {
            python_code(raw, &mut in_string)
        };
        let code = normalize_identifiers(&code);
        joined.push(' ');
        joined.push_str(&code);
        depth += bracket_balance(&code, !c_like);
        let goes_on = depth > 0 || code.trim_end().ends_with('\\') || in_string.is_some();
        if !goes_on || joined.len() > 64 << 10 {
            out.push(std::mem::take(&mut joined));
            depth = 0;
        }
    }
    if !joined.trim().is_empty() {
        out.push(joined);
    }
    out
}

/// The code of one line of Python, its comment cut and every string literal emptied (`""`):
/// what a string holds (quotes, escaped quotes, brackets: `'"""'`, `"\"("`, `"""a \""" b"""`)
/// is never read as code. `in_string` carries a string that goes on to the next line (a
/// triple-quoted one, or one whose line ends in `\`).
fn python_code(line: &str, in_string: &mut Option<&'static str>) -> String {
    let mut out = String::new();
    let mut rest = line;
    // The string being read is an f-string: its `{...}` parts are code.
    let mut formatted = false;
    loop {
        if let Some(delim) = *in_string {
            match string_end(rest, delim) {
                Some(end) => {
                    out.push_str("\"\"");
                    if formatted {
                        out.push_str(&fields(&rest[..end - delim.len()]));
                    }
                    rest = &rest[end..];
                    *in_string = None;
                }
                None => {
                    // A one-quote string goes on only after a trailing backslash.
                    if delim.len() == 1 && !ends_escaped(rest) {
                        *in_string = None;
                    }
                    return out;
                }
            }
        }
        let Some(at) = rest.find(['#', '"', '\'']) else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if tail.starts_with('#') {
            return out;
        }
        let delim = ["\"\"\"", "\'\'\'", "\"", "\'"]
            .into_iter()
            .find(|d| tail.starts_with(d))
            .unwrap_or("\"");
        // Its prefix: the letters just before the quote (`f`, `rf`, `Fr`...).
        let prefix: String = out
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphabetic())
            .collect();
        formatted = prefix.len() <= 2 && prefix.contains(['f', 'F']);
        *in_string = Some(delim);
        rest = &tail[delim.len()..];
    }
}

/// The replacement fields of an f-string's text (`{(N := 12)}` of `epochs {(N := 12)}`), as
/// code after the emptied string: ` (N := 12)`; `{{` is a brace, not a field.
fn fields(text: &str) -> String {
    let mut out = String::new();
    let mut depth = 0usize;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if depth == 0 && chars.peek() == Some(&'{') => {
                chars.next();
            }
            '{' => {
                if depth == 0 {
                    out.push(' ');
                } else {
                    out.push(c);
                }
                depth += 1;
            }
            '}' if depth > 0 => {
                depth -= 1;
                if depth > 0 {
                    out.push(c);
                }
            }
            c if depth > 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// Where the string closed by `delim` ends in `s` (just past `delim`), escapes skipped.
fn string_end(s: &str, delim: &str) -> Option<usize> {
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        if c == '\\' {
            chars.next();
        } else if s[i..].starts_with(delim) {
            return Some(i + delim.len());
        }
    }
    None
}

/// Whether `s` ends in an odd run of backslashes (its line goes on).
fn ends_escaped(s: &str) -> bool {
    s.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1
}

/// `line` with its identifiers as Python reads them (NFKC): `ＥＰＯＣＨＳ` and `𝐄POCHS` are
/// `EPOCHS`.
pub(super) fn normalize_identifiers(line: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    if line.is_ascii() {
        return line.to_string();
    }
    line.nfkc().collect()
}

/// `line` up to its comment outside quotes: `//` in a C-like language, else `#`.
fn strip_comment(line: &str, c_like: bool) -> &str {
    let b = line.as_bytes();
    let mut quote: Option<u8> = None;
    for (i, &c) in b.iter().enumerate() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == b'"' || c == b'\'' => quote = Some(c),
            None if c_like && c == b'/' && b.get(i + 1) == Some(&b'/') => return &line[..i],
            None if !c_like && c == b'#' => return &line[..i],
            None => {}
        }
    }
    line
}

/// How many more brackets than it closes `code` opens (outside quotes): `(` and `[`, and in
/// Python (`braces`) `{` too (a dict over several lines; in C a brace opens a block).
fn bracket_balance(code: &str, braces: bool) -> i64 {
    let mut quote: Option<char> = None;
    let mut n = 0;
    for c in code.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '(' | '[') => n += 1,
            (None, ')' | ']') => n -= 1,
            (None, '{') if braces => n += 1,
            (None, '}') if braces => n -= 1,
            _ => {}
        }
    }
    n
}
