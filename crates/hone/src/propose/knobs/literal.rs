//! Literals: reading a knob's value out of source text, and writing a new value back in the
//! same style (float notation, quote character, boolean casing, digit grouping).
//!
//! The writers are exact: whatever finite value is written reads back as exactly that value,
//! because floats are printed in their shortest round-trip form.

use super::KnobValue;

/// How an exponent was written in the original float literal (`1e-3`, `2.5E+3`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ExpStyle {
    /// `E` rather than `e`.
    pub upper: bool,
    /// An explicit `+` on non-negative exponents.
    pub plus: bool,
}

/// How a literal was written, so that a new value can be written the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LiteralStyle {
    /// `True`/`False` when `capitalized`, else `true`/`false`.
    Bool { capitalized: bool },
    /// `grouped`: digits were separated with `_` (`1_000_000`).
    Int { grouped: bool },
    /// `exp`: scientific notation and its spelling; `None` for plain decimals (`0.04`).
    Float { exp: Option<ExpStyle> },
    /// The quote character, `"` or `'`.
    Str { quote: char },
    /// An integer written as a power, `2**19` (`base**exponent`, non-negative integers): a
    /// value that is a power of `base` is written back the same way, any other as an integer.
    Pow { base: i64 },
}

/// A literal found at the start of some text.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Literal {
    pub value: KnobValue,
    /// Its length in bytes in the source text.
    pub len: usize,
    pub style: LiteralStyle,
}

/// True for characters that may not directly follow a literal (it would be a longer token).
fn continues_token(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '"' || c == '\''
}

/// Parses the literal at the start of `s`: a number, a quoted string or a boolean.
/// Returns `None` when `s` does not start with a whole literal (`0x10`, `1.5f`, `r"x"`, `None`).
pub(crate) fn parse_literal(s: &str) -> Option<Literal> {
    let first = s.chars().next()?;
    let lit = match first {
        '"' | '\'' => parse_string(s, first)?,
        't' | 'f' | 'T' | 'F' => parse_bool(s)?,
        _ => {
            let n = parse_number(s)?;
            match parse_power(s, &n) {
                Some(power) => power,
                // `2**x`, `1.5**2`, a power too big: an expression, not a literal.
                None if s[n.len..].trim_start_matches(' ').starts_with("**") => return None,
                None => n,
            }
        }
    };
    match s[lit.len..].chars().next() {
        Some(c) if continues_token(c) => None,
        _ => Some(lit),
    }
}

fn parse_bool(s: &str) -> Option<Literal> {
    let (value, capitalized, len) = if s.starts_with("True") {
        (true, true, 4)
    } else if s.starts_with("true") {
        (true, false, 4)
    } else if s.starts_with("False") {
        (false, true, 5)
    } else if s.starts_with("false") {
        (false, false, 5)
    } else {
        return None;
    };
    Some(Literal {
        value: KnobValue::Bool(value),
        len,
        style: LiteralStyle::Bool { capitalized },
    })
}

fn parse_string(s: &str, quote: char) -> Option<Literal> {
    let mut value = String::new();
    let mut chars = s.char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        if c == quote {
            return Some(Literal {
                value: KnobValue::Str(value),
                len: i + c.len_utf8(),
                style: LiteralStyle::Str { quote },
            });
        }
        if c == '\\' {
            let (_, next) = chars.next()?;
            match next {
                'n' => value.push('\n'),
                't' => value.push('\t'),
                'r' => value.push('\r'),
                '0' => value.push('\0'),
                '\\' | '"' | '\'' => value.push(next),
                other => {
                    value.push('\\');
                    value.push(other);
                }
            }
        } else if c == '\n' || c == '\r' {
            return None;
        } else {
            value.push(c);
        }
    }
    None
}

fn parse_number(s: &str) -> Option<Literal> {
    let b = s.as_bytes();
    let mut i = 0;
    if b.first() == Some(&b'-') {
        i += 1;
    }
    let digits = |mut i: usize| {
        while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'_') {
            i += 1;
        }
        i
    };
    let int_start = i;
    if i < b.len() && b[i].is_ascii_digit() {
        i = digits(i);
    }
    let mut mantissa_digits = i > int_start;
    let mut is_float = false;
    // A '.' belongs to the number unless it starts a `..` range.
    if b.get(i) == Some(&b'.') && b.get(i + 1) != Some(&b'.') {
        let frac_start = i + 1;
        let frac_end = if b.get(frac_start).is_some_and(u8::is_ascii_digit) {
            digits(frac_start)
        } else {
            frac_start
        };
        if mantissa_digits || frac_end > frac_start {
            is_float = true;
            mantissa_digits = true;
            i = frac_end;
        }
    }
    if !mantissa_digits {
        return None;
    }
    let mut exp = None;
    if let Some(&e) = b.get(i) {
        if e == b'e' || e == b'E' {
            let mut j = i + 1;
            let sign = b.get(j).copied();
            if sign == Some(b'+') || sign == Some(b'-') {
                j += 1;
            }
            if b.get(j).is_some_and(u8::is_ascii_digit) {
                while b.get(j).is_some_and(u8::is_ascii_digit) {
                    j += 1;
                }
                exp = Some(ExpStyle {
                    upper: e == b'E',
                    plus: sign == Some(b'+'),
                });
                is_float = true;
                i = j;
            }
        }
    }
    let text = &s[..i];
    let grouped = text.contains('_');
    let clean: String = text.chars().filter(|&c| c != '_').collect();
    let (value, style) = if is_float {
        let x: f64 = clean.parse().ok()?;
        if !x.is_finite() {
            return None;
        }
        (KnobValue::Float(x), LiteralStyle::Float { exp })
    } else {
        let n: i64 = clean.parse().ok()?;
        (KnobValue::Int(n), LiteralStyle::Int { grouped })
    };
    Some(Literal {
        value,
        len: i,
        style,
    })
}

/// `base**exponent` (spaces around `**` allowed) where `base` is the plain non-negative integer
/// `n` at the start of `s`; `None` when no `**` follows or the power does not fit an `i64`.
fn parse_power(s: &str, n: &Literal) -> Option<Literal> {
    let (KnobValue::Int(base), LiteralStyle::Int { grouped: false }) = (&n.value, n.style) else {
        return None;
    };
    if *base < 2 {
        return None;
    }
    let b = s.as_bytes();
    let mut i = n.len;
    while b.get(i) == Some(&b' ') {
        i += 1;
    }
    if b.get(i) != Some(&b'*') || b.get(i + 1) != Some(&b'*') {
        return None;
    }
    i += 2;
    while b.get(i) == Some(&b' ') {
        i += 1;
    }
    let start = i;
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    let exponent: u32 = s[start..i].parse().ok()?;
    let value = base.checked_pow(exponent)?;
    Some(Literal {
        value: KnobValue::Int(value),
        len: i,
        style: LiteralStyle::Pow { base: *base },
    })
}

/// `n` as `base**k` when it is a power of `base` (at least `base` itself), else as an integer.
fn write_power(n: i64, base: i64) -> String {
    let mut k = 0u32;
    let mut m = n;
    while m > 1 && m % base == 0 {
        m /= base;
        k += 1;
    }
    if m == 1 && k >= 1 {
        format!("{base}**{k}")
    } else {
        n.to_string()
    }
}

/// Why a value cannot be written over a literal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum WriteError {
    /// The value's type differs from the literal's (an int where a float was written...).
    TypeMismatch { expected: &'static str },
    /// NaN or an infinity: no literal reads back as that.
    NonFinite,
}

/// The name of a literal style's type, as used in messages.
pub(crate) fn style_type_name(style: &LiteralStyle) -> &'static str {
    match style {
        LiteralStyle::Bool { .. } => "boolean",
        LiteralStyle::Int { .. } | LiteralStyle::Pow { .. } => "integer",
        LiteralStyle::Float { .. } => "float",
        LiteralStyle::Str { .. } => "string",
    }
}

/// Writes `value` as a literal in `style`. The result parses back to exactly `value`.
pub(crate) fn write_literal(value: &KnobValue, style: &LiteralStyle) -> Result<String, WriteError> {
    let mismatch = || WriteError::TypeMismatch {
        expected: style_type_name(style),
    };
    match (value, style) {
        (KnobValue::Bool(b), LiteralStyle::Bool { capitalized }) => Ok(match (b, capitalized) {
            (true, true) => "True",
            (false, true) => "False",
            (true, false) => "true",
            (false, false) => "false",
        }
        .to_string()),
        (KnobValue::Int(n), LiteralStyle::Int { grouped }) => Ok(if *grouped {
            group_digits(*n)
        } else {
            n.to_string()
        }),
        (KnobValue::Int(n), LiteralStyle::Pow { base }) => Ok(write_power(*n, *base)),
        (KnobValue::Float(x), LiteralStyle::Float { exp }) => {
            if !x.is_finite() {
                return Err(WriteError::NonFinite);
            }
            Ok(match exp {
                None => format_float_plain(*x),
                Some(style) => format_float_sci(*x, *style),
            })
        }
        (KnobValue::Str(s), LiteralStyle::Str { quote }) => Ok(quote_string(s, *quote)),
        _ => Err(mismatch()),
    }
}

fn group_digits(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    if n < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push('_');
        }
        out.push(c);
    }
    out
}

/// A float in plain decimal notation that always reads as a float (`3.0`, `0.0001`).
/// Shortest round-trip digits, so it parses back to exactly `x`.
pub(crate) fn format_float_plain(x: f64) -> String {
    let mut s = format!("{x}");
    if !s.contains('.') {
        s.push_str(".0");
    }
    s
}

/// A float in scientific notation (`1.5e-4`, `1e3`), spelled like the original.
fn format_float_sci(x: f64, style: ExpStyle) -> String {
    let s = format!("{x:e}");
    let Some((mantissa, exponent)) = s.split_once('e') else {
        return s;
    };
    let e = if style.upper { 'E' } else { 'e' };
    let plus = if style.plus && !exponent.starts_with('-') {
        "+"
    } else {
        ""
    };
    format!("{mantissa}{e}{plus}{exponent}")
}

/// How a float reads in a description: plain decimals in the usual range, else scientific.
pub(crate) fn format_float_readable(x: f64) -> String {
    let a = x.abs();
    if x.is_finite() && a != 0.0 && !(1e-4..1e16).contains(&a) {
        format!("{x:e}")
    } else {
        format_float_plain(x)
    }
}

fn quote_string(s: &str, quote: char) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Rounds to 4 significant digits, the grid on which the sampler proposes floats, so that
/// "already tried" compares what was really written.
pub(crate) fn quantize_float(x: f64) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    format!("{x:.3e}").parse().unwrap_or(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(s: &str) -> Option<(KnobValue, usize)> {
        parse_literal(s).map(|l| (l.value, l.len))
    }

    #[test]
    fn parses_numbers() {
        // The text, its value and the length of the literal.
        for (text, value, len) in [
            ("42", KnobValue::Int(42), 2),
            ("-7;", KnobValue::Int(-7), 2),
            ("1_000_000 #", KnobValue::Int(1_000_000), 9),
            ("0.04", KnobValue::Float(0.04), 4),
            ("1e-3", KnobValue::Float(1e-3), 4),
            ("3.", KnobValue::Float(3.0), 2),
            (".5", KnobValue::Float(0.5), 2),
            ("-2.5E+3", KnobValue::Float(-2500.0), 7),
        ] {
            assert_eq!(lit(text), Some((value, len)), "{text}");
        }
        // A `..` range is not a literal: annotations split ranges before parsing the ends.
        for text in [
            "1..5",
            "0x10",
            "1.5f",
            "1e",
            "-",
            ".",
            "99999999999999999999",
        ] {
            assert_eq!(lit(text), None, "{text}");
        }
    }

    #[test]
    fn parses_strings_and_bools() {
        assert_eq!(lit("\"SSSL\""), Some((KnobValue::Str("SSSL".into()), 6)));
        assert_eq!(lit("'a b' #"), Some((KnobValue::Str("a b".into()), 5)));
        assert_eq!(lit(r#""a\"b""#), Some((KnobValue::Str("a\"b".into()), 6)));
        assert_eq!(lit("\"open"), None);
        assert_eq!(lit("True"), Some((KnobValue::Bool(true), 4)));
        assert_eq!(lit("false;"), Some((KnobValue::Bool(false), 5)));
        assert_eq!(lit("Trueish"), None);
        assert_eq!(lit("None"), None);
    }

    #[test]
    fn writes_in_the_original_style() {
        let float = |s: &str, x: f64| {
            let style = parse_literal(s).map(|l| l.style);
            style.and_then(|st| write_literal(&KnobValue::Float(x), &st).ok())
        };
        assert_eq!(float("0.04", 0.02).as_deref(), Some("0.02"));
        assert_eq!(float("0.04", 3.0).as_deref(), Some("3.0"));
        assert_eq!(float("1e-3", 0.00025).as_deref(), Some("2.5e-4"));
        assert_eq!(float("2.5E+3", 1000.0).as_deref(), Some("1E+3"));
        assert_eq!(float("2.5E-3", 0.01).as_deref(), Some("1E-2"));
        let grouped = parse_literal("1_000").map(|l| l.style);
        assert_eq!(
            grouped.and_then(|st| write_literal(&KnobValue::Int(-1234567), &st).ok()),
            Some("-1_234_567".to_string())
        );
        let quote = LiteralStyle::Str { quote: '\'' };
        assert_eq!(
            write_literal(&KnobValue::Str("it's".into()), &quote),
            Ok("'it\\'s'".to_string())
        );
        let cap = LiteralStyle::Bool { capitalized: true };
        assert_eq!(
            write_literal(&KnobValue::Bool(false), &cap),
            Ok("False".into())
        );
        assert_eq!(
            write_literal(&KnobValue::Int(3), &LiteralStyle::Float { exp: None }),
            Err(WriteError::TypeMismatch { expected: "float" })
        );
        assert_eq!(
            write_literal(
                &KnobValue::Float(f64::NAN),
                &LiteralStyle::Float { exp: None }
            ),
            Err(WriteError::NonFinite)
        );
    }

    #[test]
    fn reads_and_writes_powers() {
        assert_eq!(lit("2**19"), Some((KnobValue::Int(524288), 5)));
        assert_eq!(lit("2 ** 4  #"), Some((KnobValue::Int(16), 6)));
        assert_eq!(lit("2**99"), None, "does not fit an i64");
        assert_eq!(lit("2**x"), None);
        let style = LiteralStyle::Pow { base: 2 };
        let w = |n: i64| write_literal(&KnobValue::Int(n), &style).ok();
        assert_eq!(w(1 << 18).as_deref(), Some("2**18"));
        assert_eq!(w(2).as_deref(), Some("2**1"));
        assert_eq!(
            w(96).as_deref(),
            Some("96"),
            "not a power: written as the integer"
        );
        assert_eq!(w(1).as_deref(), Some("1"));
    }

    #[test]
    fn quantizes_to_four_significant_digits() {
        assert_eq!(quantize_float(0.0123456), 0.01235);
        assert_eq!(quantize_float(-98765.4), -98770.0);
        assert_eq!(quantize_float(0.0), 0.0);
    }
}
