//! Knobs: literal constants in editable files, their search domains, in-place rewriting, and
//! the built-in optimizer's sampler over them.
//!
//! A knob is a top-level (unindented) assignment of an UPPER_CASE name to one literal:
//!
//! ```text
//! LEARNING_RATE = 0.04   # hone: log 1e-4..1.0
//! DEPTH = 8              # hone: int 2..16
//! pub const WINDOW: &str = "SSSL"; // hone: choice ["L", "SL", "SSSL"]
//! ```
//!
//! - Prefixes: any run of lowercase keywords (`const`, `static`, `pub const`, `export const`,
//!   `let`, `var`, `pub(crate) static`...), then an optional type (`: f64`, or Go's `X float64`),
//!   `=`, the literal, an optional `;`, and an optional `#` or `//` comment.
//! - Literals: integers (`-3`, `1_000`), powers of integers (`2**19`, written back as `2**k`
//!   when the new value is a power of the same base, else as the integer), floats (`0.04`,
//!   `1e-3`, `3.`, `.5`, `-2.5E+3`), strings in `"` or `'` quotes, booleans
//!   (`True`/`False`/`true`/`false`).
//! - A tuple of two or more numbers, `ADAM_BETAS = (0.8, 0.95)`, is one knob per element,
//!   named `ADAM_BETAS[0]`, `ADAM_BETAS[1]`; an annotation on its line applies to each.
//! - Annotations (a comment starting `hone:`): `lo..hi` (linear float), `log lo..hi`,
//!   `int lo..hi`, `int log lo..hi`, `choice [a, b, ...]`, `bool`, `fixed`.
//! - Without one: floats range a decade either way on a log scale (negative ones on their
//!   magnitude, keeping the sign; `0.0` is fixed), integers a quarter to four times the value
//!   on a log scale (at least 1 apart; `0` is fixed), booleans flip, strings are fixed, and any
//!   name containing `SEED` is fixed (changing a seed is noise, not an improvement).
//! - Inference keeps the program valid and the measurement honest (`line::inferred_domain`,
//!   then `infer`): a name with a word (split at `_`) `BUDGET`, `TIMEOUT`, `SHARD(S)`, `EVAL`,
//!   `VAL`, `VALID`, `VALIDATION`, `TEST`, `HOLDOUT` or `SPLIT` is fixed (a time budget, a data
//!   split, the evaluation: changing it changes what is measured), as are a run's length (a
//!   word `STEPS`, `EPOCHS`, `ITER`, `ITERS` or `ITERATIONS` with at most `NUM`, `N`, `MAX`,
//!   `TOTAL`, `TRAIN` or `TRAINING` beside it: `NUM_STEPS`, not `WARMUP_STEPS`), a logging
//!   cadence (`EVERY`, `INTERVAL`, `FREQ` or `FREQUENCY` beside `LOG`, `PRINT`, `SAVE`, `CKPT`,
//!   `CHECKPOINT`, `REPORT`, `DISPLAY` or `VERBOSE`) and a training set's size (`N_TRAIN`,
//!   `NUM_TRAIN`, `TRAIN_SIZE`, `N_SAMPLES`, `NUM_SAMPLES`, `DATASET_SIZE`, `DATA_SIZE`); a
//!   float in (0, 1] named as a fraction (`RATIO`, `FRAC`, `FRACTION`, `MOMENTUM`, `BETA`,
//!   `BETAS`, `DROPOUT`, `DECAY`, `PROB`, trailing digits ignored) keeps inside (0, 1] around
//!   it: below a half on a log scale from a tenth of it to ten times it, at most halfway to
//!   1 (`0.01` → `log 0.001..0.1`), else by its distance `d` to 1, linearly from `1 - 4d`
//!   to `1 - d/10` (`0.9` → `0.6..0.99`); an integer power of two of at least 16 is a choice
//!   of the powers of two from a quarter to four times it; a constant only printed is fixed; and
//!   a divisibility check `A % (B * C) == 0` in the file keeps holding (divisor knobs only
//!   shrink by factors of two, a dividend knob only grows by them).
//! - An annotated value may lie outside its range; the sampler only proposes values inside it.
//! - The same name twice in one file: the first assignment is the knob, later ones are ignored
//!   (and never rewritten). Across files names must be unique ([`discover_all`]).
//! - Lines inside Python triple-quoted strings are skipped, tracked simply by counting `"""` and
//!   `'''` (a triple quote inside an ordinary string or comment confuses it).
//! - A `hone:` comment on a line that is not a knob (indented, lowercase name, an expression)
//!   is an error rather than silently ignored.

mod config;
pub mod feasible;
mod fixed;
pub(crate) mod infer;
mod line;
mod literal;
mod sampler;
pub mod surface;

use std::fmt;

use serde::{Deserialize, Serialize};

use line::{annotated_domain, inferred_domain, scan_line, LineScan, TripleQuotes};
use literal::{format_float_readable, style_type_name, write_literal, Literal, WriteError};

pub use config::Config;
pub use fixed::{assigns, fixed_changed, fixed_used, reads_as_code};
pub use sampler::{
    config_at, dimensions, distance, fingerprint, initial_design_size, suggest, suggest_cached,
    suggest_guided, unit_coords, Observation, SamplerCache, SamplerGuide,
};

/// A knob's value: what its literal reads as.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum KnobValue {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

impl KnobValue {
    /// The value as a number: a float, or an integer converted; `None` for a string or a bool.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            KnobValue::Float(x) => Some(*x),
            KnobValue::Int(n) => Some(*n as f64),
            KnobValue::Bool(_) | KnobValue::Str(_) => None,
        }
    }
}

impl fmt::Display for KnobValue {
    /// How a value reads in a description: `0.04`, `3.0`, `1e-7`, `8`, `"SSSL"`, `true`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KnobValue::Bool(b) => write!(f, "{b}"),
            KnobValue::Int(n) => write!(f, "{n}"),
            KnobValue::Float(x) => f.write_str(&format_float_readable(*x)),
            KnobValue::Str(s) => write!(f, "{s:?}"),
        }
    }
}

/// Where the sampler may move a knob. Float and int bounds are inclusive; `log` ranges never
/// cross zero (inferred ones for negative values lie wholly below it).
#[derive(Clone, Debug, PartialEq)]
pub enum Domain {
    Float {
        lo: f64,
        hi: f64,
        log: bool,
    },
    Int {
        lo: i64,
        hi: i64,
        log: bool,
    },
    Choice(Vec<KnobValue>),
    Bool,
    /// Never changed by the sampler.
    Fixed,
}

/// A choice's options as messages list them: `"x", "y", 3`.
pub fn list_options(options: &[KnobValue]) -> String {
    let listed: Vec<String> = options.iter().map(KnobValue::to_string).collect();
    listed.join(", ")
}

/// One knob found in a file.
#[derive(Clone, Debug)]
pub struct Knob {
    pub name: String,
    /// Repo-relative path of the file that holds it.
    pub file: String,
    /// 1-based line number.
    pub line: usize,
    pub value: KnobValue,
    pub domain: Domain,
    /// Whether the domain came from a `hone:` annotation rather than inference.
    pub annotated: bool,
    /// The literal exactly as written (`1e-3`, `'SSSL'`, `1_000`).
    pub literal: String,
}

/// What went wrong reading or rewriting knobs. Messages name `file:line` and what to do.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum KnobError {
    #[error("{file}:{line}: bad `hone:` annotation on {name}: {problem}")]
    BadAnnotation {
        file: String,
        line: usize,
        name: String,
        problem: String,
    },
    #[error("{file}:{line}: `hone:` annotation on a line that is not a knob: {problem}")]
    NotAKnob {
        file: String,
        line: usize,
        problem: String,
    },
    #[error(
        "{file}:{line}: cannot write {value} into {name}, which holds a {expected} literal; \
         give it a {expected} value"
    )]
    TypeMismatch {
        file: String,
        line: usize,
        name: String,
        value: KnobValue,
        expected: &'static str,
    },
    #[error("{file}:{line}: cannot write {value} into {name}: only finite numbers can be written")]
    NonFinite {
        file: String,
        line: usize,
        name: String,
        value: KnobValue,
    },
    #[error(
        "knob {name} is defined in both {first} and {second}; rename one of them or mark one \
         `# hone: fixed` and keep its name unique"
    )]
    DuplicateName {
        name: String,
        first: String,
        second: String,
    },
}

/// One line of a file: its number, its text without the line ending, the ending itself, and
/// whether it starts inside a triple-quoted string.
#[derive(Clone, Copy)]
struct Line<'a> {
    number: usize,
    body: &'a str,
    ending: &'a str,
    in_string: bool,
}

fn lines(text: &str) -> impl Iterator<Item = Line<'_>> {
    let mut quotes = TripleQuotes::default();
    text.split_inclusive('\n').enumerate().map(move |(i, raw)| {
        let body = raw
            .strip_suffix("\r\n")
            .or_else(|| raw.strip_suffix('\n'))
            .unwrap_or(raw);
        let ending = &raw[body.len()..];
        let in_string = quotes.inside();
        quotes.feed(body);
        Line {
            number: i + 1,
            body,
            ending,
            in_string,
        }
    })
}

/// A knob with where its literal sits in its line, as found by [`scan_file`].
struct Found {
    knob: Knob,
    literal_start: usize,
    literal: Literal,
}

/// Every line of `text`, with the knobs found on it (first assignment of a name only; a tuple
/// of numbers gives one knob per element), with the file-level inference rules applied
/// ([`infer::refine`]).
fn scan_file<'a>(file: &str, text: &'a str) -> Result<Vec<(Line<'a>, Vec<Found>)>, KnobError> {
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for l in lines(text) {
        // A byte-order mark before the first line is not part of it.
        let (offset, body) = match l.body.strip_prefix('\u{feff}') {
            Some(b) if l.number == 1 => ('\u{feff}'.len_utf8(), b),
            _ => (0, l.body),
        };
        if l.in_string {
            out.push((l, Vec::new()));
            continue;
        }
        match scan_line(body) {
            LineScan::Other => out.push((l, Vec::new())),
            LineScan::Misannotated(problem) => {
                return Err(KnobError::NotAKnob {
                    file: file.to_string(),
                    line: l.number,
                    problem: problem.to_string(),
                })
            }
            LineScan::Knob(k) => {
                if !seen.insert(k.name.to_string()) {
                    out.push((l, Vec::new()));
                    continue;
                }
                let parts: Vec<(String, usize, Literal)> = if k.elements.is_empty() {
                    vec![(k.name.to_string(), k.literal_start, k.literal)]
                } else {
                    k.elements
                        .into_iter()
                        .enumerate()
                        .map(|(i, (start, lit))| (format!("{}[{i}]", k.name), start, lit))
                        .collect()
                };
                let mut found = Vec::new();
                for (name, start, literal) in parts {
                    let value = literal.value.clone();
                    let (domain, annotated) = match k.annotation {
                        Some(a) => match annotated_domain(a, &value) {
                            Ok(d) => (d, true),
                            Err(problem) => {
                                return Err(KnobError::BadAnnotation {
                                    file: file.to_string(),
                                    line: l.number,
                                    name,
                                    problem,
                                })
                            }
                        },
                        None => (inferred_domain(k.name, &value), false),
                    };
                    let literal_start = offset + start;
                    let literal_text = &l.body[literal_start..literal_start + literal.len];
                    let knob = Knob {
                        name,
                        file: file.to_string(),
                        line: l.number,
                        value,
                        domain,
                        annotated,
                        literal: literal_text.to_string(),
                    };
                    found.push(Found {
                        knob,
                        literal_start,
                        literal,
                    });
                }
                out.push((l, found));
            }
        }
    }
    let mut knobs: Vec<&mut Knob> = out
        .iter_mut()
        .flat_map(|(_, found)| found.iter_mut().map(|f| &mut f.knob))
        .collect();
    infer::refine(text, &mut knobs);
    Ok(out)
}

/// Whether a knob's name marks a seed, a time budget, a data split or the evaluation, which
/// inference never searches (the module docs list the words).
pub fn measures_the_run(name: &str) -> bool {
    line::measures_the_run(name)
}

/// The knobs of one file, in line order. `file` is the repo-relative path used in messages.
pub fn discover(file: &str, text: &str) -> Result<Vec<Knob>, KnobError> {
    Ok(scan_file(file, text)?
        .into_iter()
        .flat_map(|(_, found)| found.into_iter().map(|f| f.knob))
        .collect())
}

/// The knobs of several files (`(path, text)` pairs), in order; a name defined in two files is
/// an error because a [`Config`] addresses knobs by name alone.
pub fn discover_all<'a>(
    files: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<Vec<Knob>, KnobError> {
    let mut all: Vec<Knob> = Vec::new();
    for (file, text) in files {
        for knob in discover(file, text)? {
            if let Some(first) = all.iter().find(|k| k.name == knob.name) {
                return Err(KnobError::DuplicateName {
                    name: knob.name,
                    first: format!("{}:{}", first.file, first.line),
                    second: format!("{}:{}", knob.file, knob.line),
                });
            }
            all.push(knob);
        }
    }
    Ok(all)
}

/// The current configuration: each knob's value by name (the first knob wins on a clash).
pub fn config_of(knobs: &[Knob]) -> Config {
    let mut config = Config::new();
    for k in knobs {
        config.or_insert(&k.name, k.value.clone());
    }
    config
}

/// Rewrites the knobs of `file` named in `changes`, replacing only their literals' characters
/// and keeping each literal's type and style. Names in `changes` that are not knobs of this
/// file are ignored (a [`Config`] spans many files). A knob whose value is unchanged keeps its
/// literal byte for byte, so applying the current configuration returns `text` unchanged.
pub fn apply(file: &str, text: &str, changes: &Config) -> Result<String, KnobError> {
    let mut out = String::with_capacity(text.len() + 16);
    for (l, found) in scan_file(file, text)? {
        // Literals in line order; the text between them is kept as it is.
        let mut at = 0;
        for found in found {
            let knob = &found.knob;
            let Some(new) = changes.get(&knob.name).filter(|new| **new != knob.value) else {
                continue;
            };
            let written = write_literal(new, &found.literal.style).map_err(|e| match e {
                WriteError::TypeMismatch { .. } => KnobError::TypeMismatch {
                    file: file.to_string(),
                    line: l.number,
                    name: knob.name.clone(),
                    value: new.clone(),
                    expected: style_type_name(&found.literal.style),
                },
                WriteError::NonFinite => KnobError::NonFinite {
                    file: file.to_string(),
                    line: l.number,
                    name: knob.name.clone(),
                    value: new.clone(),
                },
            })?;
            out.push_str(&l.body[at..found.literal_start]);
            out.push_str(&written);
            at = found.literal_start + found.literal.len;
        }
        out.push_str(&l.body[at..]);
        out.push_str(l.ending);
    }
    Ok(out)
}

/// The knob literals `after` changed from `before` (another version of the same file,
/// nothing but literals changed), written onto `onto`, a third version: `None` when the change
/// is more than literals, or `onto` cannot take them. Two knob proposals made from the same
/// parent merge this way even when their lines touch, which a text merge calls a conflict.
pub fn replay_literals(file: &str, before: &str, after: &str, onto: &str) -> Option<String> {
    let was = config_of(&discover(file, before).ok()?);
    let now = config_of(&discover(file, after).ok()?);
    let mut changed = Config::new();
    for (name, value) in now.iter() {
        if was.get(name) != Some(value) {
            changed.insert(name, value.clone());
        }
    }
    if apply(file, before, &changed).ok()? != after {
        return None;
    }
    apply(file, onto, &changed).ok()
}

/// The changes from one configuration to another, by name: `DEPTH 8 -> 6, LR 0.04 -> 0.02`.
/// Only changed knobs are listed; a name missing from `from` reads `?`. `"no change"` if none.
pub fn describe(from: &Config, to: &Config) -> String {
    let parts: Vec<String> = to
        .iter()
        .filter(|(name, value)| from.get(*name) != Some(value))
        .map(|(name, value)| match from.get(name) {
            Some(old) => format!("{name} {old} -> {value}"),
            None => format!("{name} ? -> {value}"),
        })
        .collect();
    if parts.is_empty() {
        "no change".to_string()
    } else {
        parts.join(", ")
    }
}

/// The knob literals (`NAME = value` constants, as [`discover`] finds them) a change moved,
/// over `(path, before, after)` versions of the files it changed: `LR 0.05 -> 0.1, DEPTH 4 ->
/// 6` (the first five, then how many more), or `None` when it moved none (or no file could be
/// read for knobs).
pub fn literal_changes<'a>(
    files: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
) -> Option<String> {
    const SHOWN: usize = 5;
    let mut parts: Vec<String> = Vec::new();
    let mut more = 0usize;
    for (path, before, after) in files {
        let (Ok(was), Ok(now)) = (discover(path, before), discover(path, after)) else {
            continue;
        };
        let (was, now) = (config_of(&was), config_of(&now));
        for (name, value) in now.iter() {
            let Some(old) = was.get(name).filter(|old| *old != value) else {
                continue;
            };
            if parts.len() < SHOWN {
                parts.push(crate::util::cut_at_word(
                    &format!("{name} {old} -> {value}"),
                    60,
                ));
            } else {
                more += 1;
            }
        }
    }
    if more > 0 {
        parts.push(format!("{more} more"));
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

#[cfg(test)]
mod tests;
