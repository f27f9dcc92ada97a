//! Lines: recognising a knob line (`[prefix] NAME [: type] = literal [;] [# hone: ...]`),
//! parsing its `hone:` annotation, and turning both into a search [`Domain`].
//!
//! The scanner is hand-written rather than a regex so that it knows the literal's exact byte
//! span (rewriting replaces only those bytes) and never panics.

use super::literal::{parse_literal, Literal};
use super::{Domain, KnobValue};

/// A line that holds a knob.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct KnobLine<'a> {
    pub name: &'a str,
    /// Byte offset of the literal in the line.
    pub literal_start: usize,
    pub literal: Literal,
    /// The text after `hone:` in the trailing comment, trimmed.
    pub annotation: Option<&'a str>,
    /// For a tuple of numbers, `NAME = (0.8, 0.95)`: each element's byte offset in the line and
    /// literal (`literal_start` and `literal` are then the first element's); empty otherwise.
    pub elements: Vec<(usize, Literal)>,
}

/// What a line is, as far as knobs go.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum LineScan<'a> {
    Knob(KnobLine<'a>),
    /// Not a knob and no `hone:` annotation: ignored.
    Other,
    /// Carries a `hone:` annotation but is not a knob: almost surely a mistake worth reporting.
    Misannotated(&'static str),
}

fn is_name_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
        i += 1;
    }
    i
}

/// Reads a `hone:` annotation out of a comment body that starts at a `#` or `//` marker.
fn annotation_of(comment: &str) -> Option<&str> {
    let body = comment
        .strip_prefix("//")
        .or_else(|| comment.strip_prefix('#'))?;
    body.trim_start().strip_prefix("hone:").map(str::trim)
}

/// Whether a line that is not a knob has a `# hone:` / `// hone:` comment after an `=`.
fn misannotation(line: &str) -> Option<&'static str> {
    for marker in ["#", "//"] {
        for (at, _) in line.match_indices(marker) {
            if annotation_of(&line[at..]).is_some() && line[..at].contains('=') {
                let trimmed = line.trim_start();
                if !trimmed.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
                    return None;
                }
                return Some(if trimmed.len() != line.len() {
                    "knobs must be top-level assignments (no indentation)"
                } else {
                    "not a knob: a knob is `NAME = literal` with an UPPER_CASE name and a single \
                     number, string or boolean literal as its value"
                });
            }
        }
    }
    None
}

/// Scans one line (without its line ending).
pub(crate) fn scan_line(line: &str) -> LineScan<'_> {
    match scan_knob(line) {
        Some(knob) => LineScan::Knob(knob),
        None => match misannotation(line) {
            Some(reason) => LineScan::Misannotated(reason),
            None => LineScan::Other,
        },
    }
}

fn scan_knob(line: &str) -> Option<KnobLine<'_>> {
    let b = line.as_bytes();
    let mut i = 0;
    // Prefix: lowercase keywords (`const`, `pub static`, `export const`, `let`, `pub(crate)`...).
    while b.get(i).is_some_and(u8::is_ascii_lowercase) {
        while b.get(i).is_some_and(|&c| is_name_char(c)) {
            i += 1;
        }
        if b.get(i) == Some(&b'(') {
            while b.get(i).is_some_and(|&c| c != b')') {
                i += 1;
            }
            i += 1;
        }
        let after = skip_ws(b, i);
        if after == i {
            return None;
        }
        i = after;
    }
    // The name.
    let name_start = i;
    if !b.get(i).is_some_and(u8::is_ascii_uppercase) {
        return None;
    }
    while b
        .get(i)
        .is_some_and(|&c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_')
    {
        i += 1;
    }
    if b.get(i).is_some_and(|&c| is_name_char(c)) {
        return None;
    }
    let name = &line[name_start..i];
    // An optional type: `: f64`, `: &'static str`, or Go's `NAME float64`.
    let after_name = skip_ws(b, i);
    if b.get(after_name) == Some(&b':') {
        i = after_name + 1;
        while b.get(i).is_some_and(|&c| c != b'=') {
            i += 1;
        }
    } else if after_name > i && b.get(after_name).is_some_and(u8::is_ascii_lowercase) {
        i = after_name;
        while b.get(i).is_some_and(|&c| is_name_char(c)) {
            i += 1;
        }
        i = skip_ws(b, i);
    } else {
        i = after_name;
    }
    if b.get(i) != Some(&b'=') || b.get(i + 1) == Some(&b'=') {
        return None;
    }
    let value_start = skip_ws(b, i + 1);
    let (literal_start, literal, elements, value_end) = if b.get(value_start) == Some(&b'(') {
        let (elements, end) = parse_tuple(line, value_start)?;
        let (start, first) = elements.first()?.clone();
        (start, first, elements, end)
    } else {
        let literal = parse_literal(&line[value_start..])?;
        let end = value_start + literal.len;
        (value_start, literal, Vec::new(), end)
    };
    let mut j = skip_ws(b, value_end);
    if b.get(j) == Some(&b';') {
        j = skip_ws(b, j + 1);
    }
    let rest = &line[j..];
    let annotation = if rest.is_empty() {
        None
    } else if rest.starts_with('#') || rest.starts_with("//") {
        annotation_of(rest)
    } else {
        return None;
    };
    Some(KnobLine {
        name,
        literal_start,
        literal,
        annotation,
        elements,
    })
}

/// A tuple of two or more number literals starting at the `(` at `open`: each element's offset
/// and literal, and the offset just past the `)`. A trailing comma is allowed.
fn parse_tuple(line: &str, open: usize) -> Option<(Vec<(usize, Literal)>, usize)> {
    let b = line.as_bytes();
    let mut elements = Vec::new();
    let mut i = skip_ws(b, open + 1);
    loop {
        if b.get(i) == Some(&b')') {
            break;
        }
        let literal = parse_literal(&line[i..])?;
        if !matches!(literal.value, KnobValue::Int(_) | KnobValue::Float(_)) {
            return None;
        }
        let len = literal.len;
        elements.push((i, literal));
        i = skip_ws(b, i + len);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b')') => break,
            _ => return None,
        }
    }
    (elements.len() >= 2).then_some((elements, i + 1))
}

/// Tracks whether a line starts inside a Python triple-quoted string, whose lines are not
/// scanned for knobs. Deliberately simple: it does not know about `"""` inside ordinary strings
/// or comments.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TripleQuotes {
    open: Option<&'static str>,
}

impl TripleQuotes {
    /// Whether the line about to be fed starts inside a triple-quoted string.
    pub fn inside(&self) -> bool {
        self.open.is_some()
    }

    /// Updates the state with one line.
    pub fn feed(&mut self, line: &str) {
        let mut rest = line;
        loop {
            match self.open {
                Some(delim) => match rest.find(delim) {
                    Some(at) => {
                        rest = &rest[at + 3..];
                        self.open = None;
                    }
                    None => return,
                },
                None => {
                    let dq = rest.find("\"\"\"");
                    let sq = rest.find("'''");
                    let (at, delim) = match (dq, sq) {
                        (Some(d), Some(s)) if s < d => (s, "'''"),
                        (Some(d), _) => (d, "\"\"\""),
                        (None, Some(s)) => (s, "'''"),
                        (None, None) => return,
                    };
                    rest = &rest[at + 3..];
                    self.open = Some(delim);
                }
            }
        }
    }
}

/// A parsed `hone:` annotation, before it is checked against the knob's value.
#[derive(Clone, Debug, PartialEq)]
enum Annotation {
    Fixed,
    Bool,
    Choice(Vec<KnobValue>),
    Range {
        int: bool,
        log: bool,
        lo: KnobValue,
        hi: KnobValue,
    },
}

const FORMS: &str =
    "expected `lo..hi`, `log lo..hi`, `int lo..hi`, `int log lo..hi`, `choice [a, b, ...]`, \
     `bool` or `fixed`";

fn parse_annotation(text: &str) -> Result<Annotation, String> {
    let text = text.trim();
    match text {
        "fixed" => return Ok(Annotation::Fixed),
        "bool" => return Ok(Annotation::Bool),
        "" => return Err(format!("empty annotation; {FORMS}")),
        _ => {}
    }
    if let Some(list) = text.strip_prefix("choice") {
        return parse_choices(list.trim()).map(Annotation::Choice);
    }
    let mut rest = text;
    let mut int = false;
    let mut log = false;
    loop {
        if let Some(r) = rest.strip_prefix("int ") {
            int = true;
            rest = r.trim_start();
        } else if let Some(r) = rest.strip_prefix("log ") {
            log = true;
            rest = r.trim_start();
        } else {
            break;
        }
    }
    let Some((lo, hi)) = rest.split_once("..") else {
        return Err(format!("cannot read `{text}`: {FORMS}"));
    };
    let bound = |s: &str, which: &str| -> Result<KnobValue, String> {
        let s = s.trim();
        match parse_literal(s) {
            Some(l) if l.len == s.len() => match l.value {
                KnobValue::Int(_) | KnobValue::Float(_) => Ok(l.value),
                _ => Err(format!("the {which} bound `{s}` is not a number")),
            },
            _ => Err(format!(
                "cannot read the {which} bound `{s}` as a number; {FORMS}"
            )),
        }
    };
    Ok(Annotation::Range {
        int,
        log,
        lo: bound(lo, "lower")?,
        hi: bound(hi, "upper")?,
    })
}

fn parse_choices(list: &str) -> Result<Vec<KnobValue>, String> {
    let inner = list
        .strip_prefix('[')
        .and_then(|l| l.strip_suffix(']'))
        .ok_or_else(|| {
            format!("write the choices as a list in brackets: `choice [a, b]`, not `{list}`")
        })?;
    let mut out: Vec<KnobValue> = Vec::new();
    let mut rest = inner.trim_start();
    while !rest.is_empty() {
        let lit = parse_literal(rest)
            .ok_or_else(|| format!("cannot read a literal at `{rest}` in the choice list"))?;
        if out.contains(&lit.value) {
            return Err(format!("`{}` appears twice in the choice list", lit.value));
        }
        out.push(lit.value);
        rest = rest[lit.len..].trim_start();
        if let Some(r) = rest.strip_prefix(',') {
            rest = r.trim_start();
        } else if !rest.is_empty() {
            return Err(format!("expected `,` between choices, found `{rest}`"));
        }
    }
    if out.len() < 2 {
        return Err("a choice needs at least two options".to_string());
    }
    Ok(out)
}

fn kind_name(v: &KnobValue) -> &'static str {
    match v {
        KnobValue::Bool(_) => "boolean",
        KnobValue::Int(_) => "integer",
        KnobValue::Float(_) => "float",
        KnobValue::Str(_) => "string",
    }
}

/// The domain an annotation gives a knob whose current value is `value`, or why it is wrong.
pub(crate) fn annotated_domain(text: &str, value: &KnobValue) -> Result<Domain, String> {
    match parse_annotation(text)? {
        Annotation::Fixed => Ok(Domain::Fixed),
        Annotation::Bool => match value {
            KnobValue::Bool(_) => Ok(Domain::Bool),
            other => Err(format!(
                "`bool` annotates a {} value ({other}); use `true`/`false`, or another annotation",
                kind_name(other)
            )),
        },
        Annotation::Choice(options) => {
            if let Some(bad) = options
                .iter()
                .find(|o| std::mem::discriminant(*o) != std::mem::discriminant(value))
            {
                return Err(format!(
                    "the choice `{bad}` is a {} but the value {value} is a {}; every choice must \
                     have the value's type",
                    kind_name(bad),
                    kind_name(value)
                ));
            }
            if !options.contains(value) {
                return Err(format!(
                    "the current value {value} is not among the choices; add it to the list"
                ));
            }
            Ok(Domain::Choice(options))
        }
        Annotation::Range { int, log, lo, hi } => {
            if int {
                let (KnobValue::Int(lo), KnobValue::Int(hi)) = (&lo, &hi) else {
                    return Err(format!("`int` ranges need integer bounds, not {lo}..{hi}"));
                };
                let (lo, hi) = (*lo, *hi);
                if !matches!(value, KnobValue::Int(_)) {
                    return Err(format!(
                        "`int` annotates a {} value ({value}); write an integer or use a float \
                         range `lo..hi`",
                        kind_name(value)
                    ));
                }
                check_bounds(lo as f64, hi as f64, log, &format!("{lo}..{hi}"))?;
                Ok(Domain::Int { lo, hi, log })
            } else {
                let as_f64 = |v: &KnobValue| match v {
                    KnobValue::Int(n) => *n as f64,
                    KnobValue::Float(x) => *x,
                    _ => f64::NAN,
                };
                let (lo, hi) = (as_f64(&lo), as_f64(&hi));
                match value {
                    KnobValue::Float(_) => {}
                    KnobValue::Int(n) => {
                        return Err(format!(
                            "the value {n} is an integer but `lo..hi` is a float range; use \
                             `int lo..hi`, or write the value as {n}.0"
                        ))
                    }
                    other => {
                        return Err(format!(
                            "a numeric range annotates a {} value ({other})",
                            kind_name(other)
                        ))
                    }
                }
                check_bounds(lo, hi, log, &format!("{lo}..{hi}"))?;
                Ok(Domain::Float { lo, hi, log })
            }
        }
    }
}

fn check_bounds(lo: f64, hi: f64, log: bool, shown: &str) -> Result<(), String> {
    if lo.partial_cmp(&hi) != Some(std::cmp::Ordering::Less) {
        return Err(format!(
            "the range {shown} is empty: the lower bound must be below the upper"
        ));
    }
    if log && lo <= 0.0 {
        return Err(format!(
            "a `log` range must be positive, but {shown} starts at {lo}; drop `log` or raise the \
             lower bound"
        ));
    }
    Ok(())
}

/// Words of a knob's name (split at `_`, trailing digits dropped: `BETA2` reads `BETA`) that
/// mark a time budget, a data split or the evaluation: changing one changes what is measured,
/// not how well the program does, so such a knob is fixed.
const MEASUREMENT_WORDS: &[&str] = &[
    "BUDGET",
    "TIMEOUT",
    "SHARD",
    "SHARDS",
    "EVAL",
    "VAL",
    "VALID",
    "VALIDATION",
    "TEST",
    "HOLDOUT",
    "SPLIT",
];

/// Words that mark a run's length (`NUM_STEPS`, `EPOCHS`, `MAX_ITER`) when every other word of
/// the name is one of [`LENGTH_PREFIXES`]: more of it measures a longer run, not a better
/// program, so such a knob is fixed. Other names with them are parts of a run
/// (`WARMUP_STEPS`, `GRADIENT_ACCUMULATION_STEPS`, `NS_STEPS`) and are searched.
const RUN_LENGTH_WORDS: &[&str] = &["STEPS", "EPOCHS", "ITER", "ITERS", "ITERATIONS"];
const LENGTH_PREFIXES: &[&str] = &["NUM", "N", "MAX", "TOTAL", "TRAIN", "TRAINING"];

/// Words that mark a cadence (`LOG_EVERY`, `SAVE_INTERVAL`) when the name also has one of
/// [`OUTPUT_WORDS`]: how often the program logs or saves changes its printout, not its result
/// (`UPDATE_EVERY`, `TARGET_UPDATE_INTERVAL` are searched).
const CADENCE_WORDS: &[&str] = &["EVERY", "INTERVAL", "FREQ", "FREQUENCY"];
const OUTPUT_WORDS: &[&str] = &[
    "LOG",
    "LOGGING",
    "PRINT",
    "SAVE",
    "CKPT",
    "CHECKPOINT",
    "REPORT",
    "DISPLAY",
    "VERBOSE",
];

/// Whole names of a training set's size: more data measures another problem.
const DATA_SIZE_NAMES: &[&str] = &[
    "N_TRAIN",
    "NUM_TRAIN",
    "TRAIN_SIZE",
    "N_SAMPLES",
    "NUM_SAMPLES",
    "DATASET_SIZE",
    "DATA_SIZE",
];

/// Words of a knob's name that mark a fraction: a float in (0, 1] with one of them keeps its
/// range inside (0, 1).
const FRACTION_WORDS: &[&str] = &[
    "RATIO", "FRAC", "FRACTION", "MOMENTUM", "BETA", "BETAS", "DROPOUT", "DECAY", "PROB",
];

fn has_word(name: &str, words: &[&str]) -> bool {
    name.split('_')
        .map(|w| w.trim_end_matches(|c: char| c.is_ascii_digit()))
        .any(|w| words.contains(&w))
}

/// Whether a name marks a time budget, a data split or the evaluation ([`MEASUREMENT_WORDS`]),
/// a run's length ([`RUN_LENGTH_WORDS`]), a logging cadence ([`CADENCE_WORDS`]) or a training
/// set's size ([`DATA_SIZE_NAMES`]).
pub(crate) fn measures_the_run(name: &str) -> bool {
    let words: Vec<&str> = name
        .split('_')
        .map(|w| w.trim_end_matches(|c: char| c.is_ascii_digit()))
        .collect();
    let run_length = words.iter().any(|w| RUN_LENGTH_WORDS.contains(w))
        && words
            .iter()
            .all(|w| RUN_LENGTH_WORDS.contains(w) || LENGTH_PREFIXES.contains(w));
    name.contains("SEED")
        || has_word(name, MEASUREMENT_WORDS)
        || run_length
        || (has_word(name, CADENCE_WORDS) && has_word(name, OUTPUT_WORDS))
        || DATA_SIZE_NAMES.contains(&name)
}

/// The powers of two from `value / 4` to `value * 4` (at least 1) as a choice, for an integer
/// that is a power of two of at least 16 (a batch size, a width): a search that keeps it a power
/// of two keeps whatever it must divide divisible.
pub(crate) fn powers_of_two_around(value: i64, down: u32, up: u32) -> Option<Domain> {
    if value < 16 || value.count_ones() != 1 {
        return None;
    }
    let e = value.trailing_zeros();
    let lo = e.saturating_sub(down);
    let hi = (e + up).min(62);
    Some(Domain::Choice(
        (lo..=hi).map(|k| KnobValue::Int(1i64 << k)).collect(),
    ))
}

/// The range of a fraction `x` in (0, 1], by how far it is from the end it is near: a small
/// one (a weight decay of 0.01, a warm-up ratio of 0.1) on a log scale from a tenth of it to
/// ten times it (at most halfway to 1); a large one (a momentum of 0.9, a beta of 0.999) by
/// its distance `d` to 1, linearly from `1 - 4d` (at least a quarter) to `1 - d/10`; 1 itself
/// from a half. Either way the middle of the range is near `x`, not half of the unit interval.
fn fraction_domain(x: f64) -> Domain {
    if x < 0.5 {
        return Domain::Float {
            lo: ten_digits(x / 10.0),
            hi: ten_digits((x * 10.0).min((1.0 + x) / 2.0)),
            log: true,
        };
    }
    let d = 1.0 - x;
    if d <= 0.0 {
        // Exactly 1 (all of it): how much less is worth trying.
        return Domain::Float {
            lo: 0.5,
            hi: 1.0,
            log: false,
        };
    }
    Domain::Float {
        lo: ten_digits((1.0 - 4.0 * d).max(0.25).min(x)),
        hi: ten_digits(1.0 - d / 10.0),
        log: false,
    }
}

/// `v` to ten significant digits: `1 - 4 × 0.1` reads 0.6, not 0.6000000000000001.
fn ten_digits(v: f64) -> f64 {
    format!("{v:.9e}").parse().unwrap_or(v)
}

/// The domain of an unannotated knob, inferred from its name and value (the rules are listed
/// in the module docs of `knobs`).
pub(crate) fn inferred_domain(name: &str, value: &KnobValue) -> Domain {
    if measures_the_run(name) {
        return Domain::Fixed;
    }
    if let KnobValue::Float(x) = *value {
        if has_word(name, FRACTION_WORDS) && x > 0.0 && x <= 1.0 {
            return fraction_domain(x);
        }
    }
    if let KnobValue::Int(n) = *value {
        if let Some(d) = powers_of_two_around(n, 2, 2) {
            return d;
        }
    }
    match *value {
        KnobValue::Float(x) if x != 0.0 && x.is_finite() => {
            let (a, b) = (x / 10.0, x * 10.0);
            if a.is_finite() && b.is_finite() && a != 0.0 {
                Domain::Float {
                    lo: a.min(b),
                    hi: a.max(b),
                    log: true,
                }
            } else {
                Domain::Fixed
            }
        }
        KnobValue::Int(n) if n != 0 => {
            let m = n.unsigned_abs();
            let lo = i64::try_from((m / 4).max(1)).unwrap_or(i64::MAX);
            let hi = i64::try_from(m.saturating_mul(4)).unwrap_or(i64::MAX);
            if n > 0 {
                Domain::Int { lo, hi, log: true }
            } else {
                Domain::Int {
                    lo: -hi,
                    hi: -lo,
                    log: true,
                }
            }
        }
        KnobValue::Bool(_) => Domain::Bool,
        _ => Domain::Fixed,
    }
}

#[cfg(test)]
#[path = "line_tests.rs"]
mod tests;
