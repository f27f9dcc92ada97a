//! A small syntax highlighter for unified diffs: file headers, hunk headers, added and
//! deleted lines, and inside each line a few token classes (comments, strings, numbers,
//! keywords) picked by the file's extension. Every piece of text is escaped: diffs are
//! written by agents.

use std::fmt::Write as _;

use crate::html::esc;

/// The comment and string conventions of a file, from its extension.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Lang {
    /// `#` comments, '…' and "…" strings (Python, shell, TOML, YAML, R, Ruby...).
    Hash,
    /// `//` comments, "…" strings and '…' literals (Rust, C, C++, Go, Java, JS...).
    Slash,
    /// Nothing but numbers (text, markdown, unknown).
    Plain,
}

impl Lang {
    fn of(path: &str) -> Lang {
        let ext = path.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
        match ext.to_ascii_lowercase().as_str() {
            "py" | "pyi" | "sh" | "bash" | "zsh" | "toml" | "yaml" | "yml" | "r" | "rb" | "pl"
            | "cfg" | "ini" | "conf" | "mk" | "cmake" => Lang::Hash,
            "rs" | "c" | "h" | "cc" | "cpp" | "hpp" | "cu" | "go" | "java" | "js" | "mjs"
            | "ts" | "tsx" | "jsx" | "kt" | "swift" | "scala" | "cs" | "zig" | "dart" => {
                Lang::Slash
            }
            _ if path.ends_with("Makefile") || path.ends_with("Dockerfile") => Lang::Hash,
            _ => Lang::Plain,
        }
    }
}

const KEYWORDS: &[&str] = &[
    "and", "as", "assert", "async", "await", "break", "case", "class", "const", "continue", "def",
    "del", "do", "elif", "else", "enum", "except", "export", "extern", "false", "False", "finally",
    "fn", "for", "from", "func", "function", "if", "impl", "import", "in", "is", "lambda", "let",
    "loop", "match", "mod", "mut", "new", "nil", "None", "not", "null", "or", "pass", "pub",
    "raise", "return", "self", "static", "struct", "switch", "then", "this", "throw", "trait",
    "true", "True", "try", "type", "use", "var", "void", "where", "while", "with", "yield", "fi",
    "esac", "done", "echo", "local", "export", "int", "float", "double", "char", "bool", "string",
    "unsigned", "long", "auto", "package",
];

fn span(out: &mut String, class: &str, text: &str) {
    let _ = write!(out, r#"<span class="{class}">{}</span>"#, esc(text));
}

/// Highlights one line of code (without the diff's +/-/space sign).
fn code(out: &mut String, line: &str, lang: Lang) {
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    let mut plain = String::new();
    let flush = |out: &mut String, plain: &mut String| {
        if !plain.is_empty() {
            out.push_str(&esc(plain));
            plain.clear();
        }
    };
    while i < chars.len() {
        let c = chars[i];
        let rest_starts = |p: &str| {
            p.chars()
                .enumerate()
                .all(|(k, pc)| chars.get(i + k) == Some(&pc))
        };
        let comment = match lang {
            Lang::Hash => c == '#',
            Lang::Slash => rest_starts("//"),
            Lang::Plain => false,
        };
        if comment {
            flush(out, &mut plain);
            span(out, "tc", &chars[i..].iter().collect::<String>());
            return;
        }
        let quote = c == '"'
            || (c == '\'' && lang == Lang::Hash)
            || (c == '\'' && lang == Lang::Slash && is_char_literal(&chars[i..]));
        if quote && lang != Lang::Plain {
            let end = string_end(&chars, i);
            flush(out, &mut plain);
            span(out, "ts", &chars[i..end].iter().collect::<String>());
            i = end;
            continue;
        }
        let prev_ident = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if c.is_ascii_digit() && !prev_ident {
            let j = number_end(&chars, i);
            flush(out, &mut plain);
            span(out, "tn", &chars[i..j].iter().collect::<String>());
            i = j;
            continue;
        }
        if (c.is_alphabetic() || c == '_') && !prev_ident {
            let mut j = i;
            while j < chars.len() && (chars[j].is_alphanumeric() || chars[j] == '_') {
                j += 1;
            }
            let word: String = chars[i..j].iter().collect();
            if lang != Lang::Plain && KEYWORDS.contains(&word.as_str()) {
                flush(out, &mut plain);
                span(out, "tk", &word);
            } else {
                plain.push_str(&word);
            }
            i = j;
            continue;
        }
        plain.push(c);
        i += 1;
    }
    flush(out, &mut plain);
}

/// Where the string literal opened by the quote at `i` ends (after its closing quote, or at
/// the end of the line).
fn string_end(chars: &[char], i: usize) -> usize {
    let quote = chars[i];
    let mut j = i + 1;
    while j < chars.len() && chars[j] != quote {
        j += if chars[j] == '\\' { 2 } else { 1 };
    }
    (j + 1).min(chars.len())
}

/// Where the number starting at `i` ends (digits, `_`, one decimal point, an exponent and
/// its sign, a type suffix).
fn number_end(chars: &[char], i: usize) -> usize {
    let mut j = i;
    let mut dot = false;
    while j < chars.len() {
        let ch = chars[j];
        let next_digit = chars.get(j + 1).is_some_and(|c| c.is_ascii_digit());
        let part = ch.is_ascii_alphanumeric()
            || ch == '_'
            || (ch == '.' && !dot && next_digit)
            || ((ch == '-' || ch == '+') && matches!(chars[j - 1], 'e' | 'E') && next_digit);
        if !part {
            break;
        }
        dot |= ch == '.';
        j += 1;
    }
    j
}

/// `'x'` or `'\n'`, not a Rust lifetime like `'a`.
fn is_char_literal(s: &[char]) -> bool {
    matches!(s, ['\'', '\\', _, '\'', ..]) || matches!(s, ['\'', c, '\'', ..] if *c != '\\')
}

/// Renders a unified diff as highlighted HTML lines for a `<pre>`: one block-level span per
/// line, so no newlines between them (they would show as blank lines).
pub(crate) fn diff_html(diff: &str) -> String {
    let mut out = String::with_capacity(diff.len() * 2);
    let mut lang = Lang::Plain;
    let mut in_header = false;
    for line in diff.lines() {
        if line.starts_with("diff --git ") {
            in_header = true;
            lang = Lang::of(line.rsplit(' ').next().unwrap_or(""));
            span(&mut out, "dl dh", line);
        } else if in_header && !line.starts_with("@@") {
            if let Some(path) = line.strip_prefix("+++ ") {
                lang = Lang::of(path);
            }
            span(&mut out, "dl dh", line);
        } else if let Some(rest) = line.strip_prefix("@@") {
            in_header = false;
            let (hunk, after) = match rest.find("@@") {
                Some(k) => (&line[..k + 4], &rest[k + 2..]),
                None => (line, ""),
            };
            out.push_str(r#"<span class="dl dhunk">"#);
            span(&mut out, "hh", hunk);
            code(&mut out, after, lang);
            out.push_str("</span>");
        } else {
            let (class, sign, rest) = match line.chars().next() {
                Some('+') => ("dl add", "+", &line[1..]),
                Some('-') => ("dl del", "-", &line[1..]),
                Some(' ') => ("dl ctx", " ", &line[1..]),
                _ => ("dl dh", "", line),
            };
            let _ = write!(
                out,
                r#"<span class="{class}"><span class="sg">{sign}</span>"#
            );
            if sign.is_empty() {
                out.push_str(&esc(rest));
            } else {
                code(&mut out, rest, lang);
            }
            out.push_str("</span>");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIFF: &str = "diff --git a/train.py b/train.py\nindex 1..2 100644\n--- a/train.py\n+++ b/train.py\n@@ -1,3 +1,3 @@ def main():\n-LR = 0.04  # hone: log\n+LR = 0.02  # <script>alert(1)</script>\n return \"a<b\"\n";

    #[test]
    fn lines_and_tokens_get_their_classes() {
        let h = diff_html(DIFF);
        assert!(
            h.contains(r#"<span class="dl dh">diff --git a/train.py b/train.py</span>"#),
            "{h}"
        );
        assert!(
            h.contains(
                r#"<span class="hh">@@ -1,3 +1,3 @@</span> <span class="tk">def</span> main():"#
            ),
            "{h}"
        );
        assert!(h.contains(r#"<span class="dl del"><span class="sg">-</span>LR = <span class="tn">0.04</span>  <span class="tc"># hone: log</span></span>"#), "{h}");
        assert!(
            h.contains(r#"<span class="ts">&quot;a&lt;b&quot;</span>"#),
            "{h}"
        );
        assert_eq!(
            h.matches(r#"<span class="dl "#).count(),
            DIFF.lines().count()
        );
    }

    #[test]
    fn nothing_escapes_unescaped() {
        let h = diff_html(DIFF);
        assert!(!h.contains("<script"), "{h}");
        assert!(h.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{h}");
        let h = diff_html("+'<b>\n+\"<i>\n+'a <x>\n");
        assert!(
            !h.contains("<b>") && !h.contains("<i>") && !h.contains("<x>"),
            "{h}"
        );
    }

    #[test]
    fn numbers_stop_at_ranges_and_take_exponents() {
        let mut out = String::new();
        code(&mut out, "x = 1..20 + 3.5e-4 - v2", Lang::Hash);
        assert!(
            out.contains(r#"<span class="tn">1</span>..<span class="tn">20</span>"#),
            "{out}"
        );
        assert!(out.contains(r#"<span class="tn">3.5e-4</span>"#), "{out}");
        assert!(out.contains(" - v2"), "{out}");
    }

    #[test]
    fn rust_lifetimes_are_not_strings() {
        let mut out = String::new();
        code(
            &mut out,
            "fn f<'a>(x: &'a str) -> char { 'x' }",
            Lang::Slash,
        );
        assert!(
            out.contains(r#"<span class="ts">&#39;x&#39;</span>"#),
            "{out}"
        );
        assert!(!out.contains(r#"<span class="ts">&#39;a"#), "{out}");
    }
}
