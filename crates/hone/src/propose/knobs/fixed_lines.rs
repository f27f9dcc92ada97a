//! How `[loop] fixed` reads a file's text as statements: Python read as Python reads it (a
//! line ends at `\n` or a lone `\r`; strings, escapes and triple quotes never read as code;
//! brackets of every kind, a trailing `\` and an open string go on to the next line;
//! identifiers in NFKC form), C-like languages with their `//` comments cut.

/// The most brackets a statement cut at 64 KiB is read on with (each piece after the cut
/// starts with them: a bound, so that a file of a million `(` cannot make every later line
/// a megabyte long).
const CUT_DEPTH: usize = 64;

/// `text` as statements' lines: comments cut, string literals emptied, and a line whose
/// brackets stay open (or that ends with `\`, or inside a string) joined with the lines that
/// close them (at most 64 KiB each: a longer statement is cut there, and what follows is read
/// with its brackets still open, up to [`CUT_DEPTH`] of them).
pub(super) fn logical_lines(text: &str, c_like: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut joined = String::new();
    let mut depth = 0i64;
    let mut in_string: Option<Open> = None;
    // Python's universal newlines: `\r\n`, `\n`, and a lone `\r` end a line.
    let lines = text
        .split('\n')
        .flat_map(|l| l.strip_suffix('\r').unwrap_or(l).split('\r'));
    for raw in lines {
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
        if !goes_on {
            out.push(std::mem::take(&mut joined));
            depth = 0;
        } else if joined.len() > 64 << 10 {
            // Cut at the bound: what follows is read with the brackets still open before it
            // (`]; NAME = 6` closes one and then assigns).
            out.push(std::mem::take(&mut joined));
            joined = "(".repeat(usize::try_from(depth).unwrap_or(0).min(CUT_DEPTH));
        }
    }
    if !joined.trim().is_empty() {
        out.push(joined);
    }
    out
}

/// A string literal that goes on to the next line: its closing quotes, and whether it is an
/// f-string (whose fields are code).
#[derive(Clone, Copy)]
struct Open {
    delim: &'static str,
    formatted: bool,
}

/// The code of one line of Python, its comment cut and every string literal emptied (`""`):
/// what a string holds (quotes, escaped quotes, brackets: `'"""'`, `"\"("`, `"""a \""" b"""`)
/// is never read as code, but an f-string's fields are (`f"{(N := 12)}"`). `in_string`
/// carries a string that goes on to the next line (a triple-quoted one, or one whose line
/// ends in `\`).
fn python_code(line: &str, in_string: &mut Option<Open>) -> String {
    let mut out = String::new();
    let mut rest = line;
    loop {
        if let Some(open) = *in_string {
            let end = string_end(rest, open);
            let text = &rest[..end.map_or(rest.len(), |e| e - open.delim.len())];
            if open.formatted {
                out.push_str(&fields(text));
            }
            match end {
                Some(end) => {
                    out.push_str("\"\"");
                    rest = &rest[end..];
                    *in_string = None;
                }
                None => {
                    // A one-quote string goes on only after a trailing backslash.
                    if open.delim.len() == 1 && !ends_escaped(rest) {
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
        *in_string = Some(Open {
            delim,
            formatted: f_prefix(&out),
        });
        rest = &tail[delim.len()..];
    }
}

/// Whether the code before a quote ends in an f-string's prefix: one or two of the prefix
/// letters (`f`, `rf`, `Fb`...), an `f` among them, not the end of a longer name (`if"..."`).
fn f_prefix(before: &str) -> bool {
    let letters: String = before
        .chars()
        .rev()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    letters.len() <= 2
        && letters.chars().all(|c| "rRbBuUfF".contains(c))
        && letters.contains(['f', 'F'])
}

/// The replacement fields of an f-string's text (`{(N := 12)}` of `epochs {(N := 12)}`), as
/// code after the emptied string, each in brackets (` (N := 12)`): its expression only, not
/// the `=` that prints it, its `!r` conversion or its format spec (`{N:=10}` aligns, it does
/// not assign), but the fields nested in the spec. `{{` is a brace, not a field.
fn fields(text: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '{' if chars.get(i + 1) == Some(&'{') => i += 2,
            '{' => i = field(&chars, i + 1, &mut out),
            _ => i += 1,
        }
    }
    out
}

/// Reads the field whose expression starts at `chars[i]` (just past its `{`) into `out`;
/// returns where it ends (just past its `}`).
fn field(chars: &[char], mut i: usize, out: &mut String) -> usize {
    let mut expr = String::new();
    let mut depth = 0usize;
    // The expression, up to a top-level `!` (not `!=`), `:` or `}`; its string literals
    // emptied (`""`), as the code around the f-string's are.
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\'' | '"' => {
                let triple = chars.get(i + 1) == Some(&c) && chars.get(i + 2) == Some(&c);
                let len = if triple { 3 } else { 1 };
                i += len;
                while i < chars.len() {
                    if chars[i] == '\\' {
                        i += 2;
                    } else if chars[i] == c && (!triple || chars[i..].starts_with(&[c, c, c])) {
                        i += len;
                        break;
                    } else {
                        i += 1;
                    }
                }
                expr.push_str("\"\"");
                continue;
            }
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' if depth > 0 => depth -= 1,
            '}' => break,
            '!' if depth == 0 && chars.get(i + 1) != Some(&'=') => break,
            ':' if depth == 0 => break,
            _ => {}
        }
        expr.push(c);
        i += 1;
    }
    let expr = expr.trim_end();
    let expr = expr.strip_suffix('=').unwrap_or(expr);
    out.push_str(&format!(" ({})", expr.trim()));
    // The rest of the field (a conversion, a spec): only its nested fields are code.
    while i < chars.len() {
        match chars[i] {
            '}' => return i + 1,
            '{' => i = field(chars, i + 1, out),
            _ => i += 1,
        }
    }
    i
}

/// Where the string `open` ends in `s` (just past its closing quotes), escapes skipped; in an
/// f-string, a quote inside a field's expression (`f"{d["k"]}"`, Python 3.12) does not end it,
/// and one in its format spec is a character (`f"{0:'^9}"` pads with `'`).
fn string_end(s: &str, open: Open) -> Option<usize> {
    /// A replacement field being read: in its format spec (or conversion) yet, and how many
    /// brackets its expression has open.
    struct Field {
        spec: bool,
        brackets: usize,
    }
    let mut fields: Vec<Field> = Vec::new();
    // A string inside a field's expression: its closing quotes (`'`, `'''`).
    let mut inner: Option<&'static str> = None;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if let Some(q) = inner {
            if c == '\\' {
                chars.next();
            } else if s[i..].starts_with(q) {
                for _ in 1..q.len() {
                    chars.next();
                }
                inner = None;
            }
            continue;
        }
        if c == '\\' {
            // `\N{EM DASH}` names a character; `\{` is a backslash and a brace (which may
            // open a field); any other escaped character is skipped.
            match chars.peek().map(|&(_, n)| n) {
                Some('{') if open.formatted => {}
                Some('N') if open.formatted && s[i + 2..].starts_with('{') => {
                    for (_, n) in chars.by_ref() {
                        if n == '}' {
                            break;
                        }
                    }
                }
                _ => {
                    chars.next();
                }
            }
            continue;
        }
        let Some(top) = fields.last_mut().filter(|_| open.formatted) else {
            match c {
                '{' if open.formatted && s[i + 1..].starts_with('{') => {
                    chars.next();
                }
                '{' if open.formatted => fields.push(Field {
                    spec: false,
                    brackets: 0,
                }),
                _ if s[i..].starts_with(open.delim) => return Some(i + open.delim.len()),
                _ => {}
            }
            continue;
        };
        match (top.spec, c) {
            // The spec: characters, but for the fields nested in it.
            (true, '{') => fields.push(Field {
                spec: false,
                brackets: 0,
            }),
            (true, '}') => {
                fields.pop();
            }
            (true, _) => {}
            (false, '\'' | '"') => {
                let q = ["\"\"\"", "'''", "\"", "'"]
                    .into_iter()
                    .find(|q| s[i..].starts_with(q))
                    .unwrap_or("\"");
                for _ in 1..q.len() {
                    chars.next();
                }
                inner = Some(q);
            }
            (false, '(' | '[' | '{') => top.brackets += 1,
            (false, ')' | ']' | '}') if top.brackets > 0 => top.brackets -= 1,
            (false, '}') => {
                fields.pop();
            }
            (false, ':') if top.brackets == 0 => top.spec = true,
            (false, '!') if top.brackets == 0 && !s[i + 1..].starts_with('=') => top.spec = true,
            _ => {}
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

/// For each of Python's logical `lines` (from [`logical_lines`]), whether a name it binds is
/// local to a function or a class body: it stands inside a `def` or `class` block (not the
/// header itself, whose default values are evaluated outside). Never where `lines` declare
/// `global name`: then a function may set the module's own. Blocks are told by indentation
/// (a tab to the next multiple of 8, a form feed back to 0, as Python reads it); a line with
/// no code ends none.
pub(super) fn enclosed(lines: &[String], name: &str) -> Vec<bool> {
    // Read conservatively: the words `global` and `name` in one statement anywhere (after a
    // one-line block's `:`, over a `\` join) declare it; and a statement hone cut at its
    // 64 KiB bound leaves the indentation of what follows unknown.
    let word = |text: &str, w: &str| {
        text.match_indices(w).any(|(i, _)| {
            let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
            !ident(text[..i].chars().next_back()) && !ident(text[i + w.len()..].chars().next())
        })
    };
    let declares_global = lines.iter().any(|l| word(l, "global") && word(l, name));
    if declares_global || lines.iter().any(|l| l.len() > 64 << 10) {
        return vec![false; lines.len()];
    }
    // The indentation of each open `def` or `class` block's header.
    let mut open: Vec<usize> = Vec::new();
    lines
        .iter()
        .map(|line| {
            // A logical line is its first line's code after one joining space.
            let code = line.strip_prefix(' ').unwrap_or(line);
            let t = code.trim_start();
            if t.is_empty() {
                return !open.is_empty();
            }
            // A form feed sets the column back to 0, as Python's tokenizer does.
            let width = code[..code.len() - t.len()]
                .chars()
                .fold(0, |w, c| match c {
                    '\t' => (w / 8 + 1) * 8,
                    '\x0c' => 0,
                    _ => w + 1,
                });
            while open.last().is_some_and(|&o| o >= width) {
                open.pop();
            }
            // A header binds in the scope around it (`def f(a=(NAME := 6)):` sets the
            // module's), and so, read conservatively, does a one-line block's body after it.
            let local = !open.is_empty();
            let spaced = t.replace('\t', " ");
            if ["def ", "async def ", "class "]
                .iter()
                .any(|h| spaced.starts_with(h))
            {
                open.push(width);
            }
            local
        })
        .collect()
}
