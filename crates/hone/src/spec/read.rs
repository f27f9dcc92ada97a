//! The reading layer of the spec parser: where each key and value sits in hone.toml, so that
//! every error names file:line:key; unknown keys, with the closest valid one suggested; and one
//! typed read, [`Section::get`], for every kind of value a section holds ([`ReadValue`]).
//!
//! A section parser holds a [`Section`] (its table, absent or not, and its dotted name) and
//! never spells the section's name again: `s.get::<Duration>("timeout")?`,
//! `s.get_or("segment", 10)?`, `s.err("segment", "must be at least 1")`.

use std::path::Path;
use std::time::Duration;

use toml_edit::{Document, Item, Table, Value};

use super::units::{parse_duration, parse_size};
use super::SpecError;

/// The spec file's name and text, for locating keys and values by line.
pub(super) struct Doc<'a> {
    file: &'a Path,
    text: &'a str,
    line_starts: Vec<usize>,
}

impl<'a> Doc<'a> {
    pub(super) fn new(file: &'a Path, text: &'a str) -> Doc<'a> {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Doc {
            file,
            text,
            line_starts,
        }
    }

    /// The spec file's name, as errors give it.
    pub(super) fn file(&self) -> &'a Path {
        self.file
    }

    /// The TOML document, or the syntax error at its line.
    pub(super) fn parse_toml(&self) -> Result<Document<&'a str>, SpecError> {
        Document::parse(self.text).map_err(|e| {
            let line = e.span().map(|s| self.line_of(s.start)).unwrap_or(1);
            let source = self
                .text
                .lines()
                .nth(line.saturating_sub(1))
                .unwrap_or("")
                .trim();
            let msg = format!("{} (in `{source}`)", e.message().trim());
            self.err_at_line(line, "", format!("invalid TOML: {msg}"))
        })
    }

    fn line_of(&self, offset: usize) -> usize {
        let offset = offset.min(self.text.len());
        match self.line_starts.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }

    /// An error at `line` about the dotted `key` (empty: not about one key).
    pub(super) fn err_at_line(&self, line: usize, key: &str, message: String) -> SpecError {
        SpecError {
            file: self.file.to_path_buf(),
            line,
            key: key.to_string(),
            message,
        }
    }

    fn table_line(&self, t: Option<&Table>) -> Option<usize> {
        t.and_then(|t| t.span()).map(|s| self.line_of(s.start))
    }

    fn key_line(&self, t: Option<&Table>, key: &str) -> Option<usize> {
        let (k, item) = t?.get_key_value(key)?;
        k.span()
            .or_else(|| item.span())
            .map(|s| self.line_of(s.start))
    }

    fn item_line(&self, item: &Item) -> Option<usize> {
        item.span().map(|s| self.line_of(s.start))
    }

    /// Every key of `t` must be in `known`. At the top level (`homes` given) a known key of a
    /// section written outside it is sent to its section.
    pub(super) fn check_keys(
        &self,
        t: &Table,
        section: &str,
        known: &[&str],
        homes: Option<&[(&str, &[&str])]>,
    ) -> Result<(), SpecError> {
        let Some((name, item)) = t.iter().find(|(name, _)| !known.contains(name)) else {
            return Ok(());
        };
        let line = t
            .get_key_value(name)
            .and_then(|(k, _)| k.span())
            .or_else(|| item.span())
            .map(|s| self.line_of(s.start))
            .unwrap_or(1);
        let hint = closest(name, known)
            .map(|c| format!("; did you mean `{c}`?"))
            .unwrap_or_default();
        let Some(homes) = homes else {
            let what = format!("unknown key in [{section}]{hint}");
            return Err(self.err_at_line(line, &format!("{section}.{name}"), what));
        };
        let home = homes
            .iter()
            .find(|(_, keys)| keys.contains(&name))
            .map(|(sec, _)| *sec);
        if let (Some(sec), false) = (home, item.is_table()) {
            return Err(self.err_at_line(
                line,
                name,
                format!("`{name}` belongs in a section: move it under [{sec}]"),
            ));
        }
        let valid: Vec<String> = known.iter().map(|k| format!("[{k}]")).collect();
        Err(self.err_at_line(
            line,
            name,
            format!(
                "unknown section `[{name}]` (valid: {}){hint}",
                valid.join(", ")
            ),
        ))
    }

    /// The section `[name]` of the document (absent or not); any other item there is an error.
    pub(super) fn section<'t>(
        &'t self,
        doc: &'t Table,
        name: &'t str,
    ) -> Result<Section<'t>, SpecError> {
        match doc.get(name) {
            None => Ok(Section::new(self, None, name)),
            Some(Item::Table(t)) => Ok(Section::new(self, Some(t), name)),
            Some(other) => {
                Err(self.not_written_as(doc, name, other, &format!("a table written `[{name}]`")))
            }
        }
    }

    /// The error for the item `name` of `doc`, `other`, which is not `wanted`.
    fn not_written_as(&self, doc: &Table, name: &str, other: &Item, wanted: &str) -> SpecError {
        let line = self
            .key_line(Some(doc), name)
            .or_else(|| self.item_line(other));
        let message = format!("must be {wanted}, found {}", other.type_name());
        self.err_at_line(line.unwrap_or(1), name, message)
    }

    /// The tables of `[[name]]` (none when absent).
    pub(super) fn array_of_tables<'t>(
        &'t self,
        doc: &'t Table,
        name: &'t str,
    ) -> Result<Vec<Section<'t>>, SpecError> {
        match doc.get(name) {
            None => Ok(Vec::new()),
            Some(Item::ArrayOfTables(a)) => Ok(a
                .iter()
                .map(|t| Section::new(self, Some(t), name))
                .collect()),
            Some(other) => {
                let wanted = format!("written `[[{name}]]` (one per entry)");
                Err(self.not_written_as(doc, name, other, &wanted))
            }
        }
    }
}

/// One table of hone.toml (possibly absent) and its dotted name (`verify`, `verify.holdout`),
/// which every error about its keys carries.
#[derive(Clone, Copy)]
pub(super) struct Section<'a> {
    doc: &'a Doc<'a>,
    table: Option<&'a Table>,
    name: &'a str,
}

impl<'a> Section<'a> {
    pub(super) fn new(doc: &'a Doc<'a>, table: Option<&'a Table>, name: &'a str) -> Section<'a> {
        Section { doc, table, name }
    }

    pub(super) fn doc(&self) -> &'a Doc<'a> {
        self.doc
    }

    /// The item at `key`, if the section and the key are there.
    pub(super) fn item(&self, key: &str) -> Option<&'a Item> {
        self.table.and_then(|t| t.get(key))
    }

    pub(super) fn has(&self, key: &str) -> bool {
        self.item(key).is_some()
    }

    /// The value at `key` (`None` when absent); a value of the wrong kind is an error.
    pub(super) fn get<T: ReadValue>(&self, key: &str) -> Result<Option<T>, SpecError> {
        self.item(key)
            .map(|item| T::read(self, key, item))
            .transpose()
    }

    /// The value at `key`, or `default` when absent.
    pub(super) fn get_or<T: ReadValue>(&self, key: &str, default: T) -> Result<T, SpecError> {
        Ok(self.get(key)?.unwrap_or(default))
    }

    /// The value at `key`, or the kind's default (an empty list or table) when absent.
    pub(super) fn get_or_default<T: ReadValue + Default>(&self, key: &str) -> Result<T, SpecError> {
        Ok(self.get(key)?.unwrap_or_default())
    }

    /// A list of command-line arguments at `key` (empty when absent): a list of strings, each
    /// one argument. A lone string, or an option and its value in one element
    /// (`"--max-turns 30"`), is an error: the program would get them as one argument.
    pub(super) fn args(&self, key: &str) -> Result<Vec<String>, SpecError> {
        if let Some(one) = self.item(key).and_then(Item::as_str) {
            return Err(self.err(
                key,
                format!(
                    "expected a list of arguments, one per string: [{}]",
                    words_apart(one)
                ),
            ));
        }
        let args: Vec<String> = self.get_or_default(key)?;
        for (i, a) in args.iter().enumerate() {
            if a.starts_with('-') && a.contains(char::is_whitespace) && !a.contains('=') {
                return Err(self.err_at(
                    self.element_line(key, i),
                    key,
                    format!(
                        "{a:?} is one argument: the program would get it whole; write its words apart: [{}]",
                        words_apart(a)
                    ),
                ));
            }
        }
        Ok(args)
    }

    /// A whole number at `key` that must be at least 1 when it is there.
    pub(super) fn count(&self, key: &str) -> Result<Option<u64>, SpecError> {
        match self.get::<u64>(key)? {
            Some(0) => Err(self.err(key, "must be at least 1")),
            v => Ok(v),
        }
    }

    /// A number at `key` that must be finite and not negative when it is there.
    pub(super) fn non_negative(&self, key: &str) -> Result<Option<f64>, SpecError> {
        match self.get::<f64>(key)? {
            Some(v) if !v.is_finite() || v < 0.0 => {
                Err(self.err(key, "must be a finite number >= 0"))
            }
            v => Ok(v),
        }
    }

    /// A non-empty string at `key`; `what` says what to write when it is missing.
    pub(super) fn required(&self, key: &str, what: &str) -> Result<String, SpecError> {
        match self.get::<String>(key)? {
            Some(s) if !s.trim().is_empty() => Ok(s),
            Some(_) => Err(self.err(key, "must not be empty")),
            None => {
                let line = self.line().unwrap_or(1);
                let msg = if self.table.is_none() {
                    format!(
                        "required, and the [{}] section is missing: add it with {what}",
                        self.name
                    )
                } else {
                    format!("required: {what}")
                };
                Err(self.err_at(line, key, msg))
            }
        }
    }

    /// Every key must be in `known` (nothing to check when the section is absent).
    pub(super) fn check_keys(&self, known: &[&str]) -> Result<(), SpecError> {
        match self.table {
            Some(t) => self.doc.check_keys(t, self.name, known, None),
            None => Ok(()),
        }
    }

    /// The line of the section's header.
    pub(super) fn line(&self) -> Option<usize> {
        self.doc.table_line(self.table)
    }

    /// The line of `key`.
    pub(super) fn key_line(&self, key: &str) -> Option<usize> {
        self.doc.key_line(self.table, key)
    }

    /// The line of the `i`th element of the list at `key` (else of the key).
    pub(super) fn element_line(&self, key: &str, i: usize) -> usize {
        self.item(key)
            .and_then(|m| m.as_array())
            .and_then(|a| a.get(i))
            .and_then(|v| v.span())
            .map(|s| self.doc.line_of(s.start))
            .or_else(|| self.key_line(key))
            .unwrap_or(1)
    }

    /// An error about the value of `key` (located at the value, else the key, else the
    /// section).
    pub(super) fn err(&self, key: &str, message: impl Into<String>) -> SpecError {
        let line = self
            .item(key)
            .and_then(|i| self.doc.item_line(i))
            .or_else(|| self.key_line(key))
            .or_else(|| self.line())
            .unwrap_or(1);
        self.err_at(line, key, message.into())
    }

    /// An error about `key` at `line`.
    pub(super) fn err_at(&self, line: usize, key: &str, message: String) -> SpecError {
        self.doc
            .err_at_line(line, &format!("{}.{key}", self.name), message)
    }

    /// `key` holds `item`, which is not `want`.
    pub(super) fn type_err(&self, key: &str, want: &str, item: &Item) -> SpecError {
        self.err(key, format!("expected {want}, found {}", item.type_name()))
    }
}

/// A kind of value a key may hold, read from its TOML item with today's messages.
pub(super) trait ReadValue: Sized {
    fn read(s: &Section<'_>, key: &str, item: &Item) -> Result<Self, SpecError>;
}

impl ReadValue for String {
    fn read(s: &Section<'_>, key: &str, item: &Item) -> Result<Self, SpecError> {
        match item.as_str() {
            Some(v) => Ok(v.to_string()),
            None => Err(s.type_err(key, "a string", item)),
        }
    }
}

impl ReadValue for f64 {
    fn read(s: &Section<'_>, key: &str, item: &Item) -> Result<Self, SpecError> {
        match (item.as_float(), item.as_integer()) {
            (Some(f), _) => Ok(f),
            (None, Some(i)) => Ok(i as f64),
            _ => Err(s.type_err(key, "a number", item)),
        }
    }
}

impl ReadValue for u64 {
    fn read(s: &Section<'_>, key: &str, item: &Item) -> Result<Self, SpecError> {
        match item.as_integer() {
            Some(i) if i >= 0 => Ok(i as u64),
            Some(_) => Err(s.err(key, "must not be negative")),
            None => Err(s.type_err(key, "a whole number", item)),
        }
    }
}

impl ReadValue for bool {
    fn read(s: &Section<'_>, key: &str, item: &Item) -> Result<Self, SpecError> {
        match item.as_bool() {
            Some(b) => Ok(b),
            None => Err(s.type_err(key, "true or false", item)),
        }
    }
}

/// A number of seconds, or a string such as `"90s"` or `"1h30m"`.
impl ReadValue for Duration {
    fn read(s: &Section<'_>, key: &str, item: &Item) -> Result<Self, SpecError> {
        let seconds = item
            .as_integer()
            .map(|i| i as f64)
            .or_else(|| item.as_float());
        if let Some(secs) = seconds {
            return if secs < 0.0 || secs.is_nan() {
                Err(s.err(key, "must not be negative"))
            } else {
                super::units::seconds(secs)
                    .ok_or_else(|| s.err(key, super::units::too_long(&format!("{secs:e}"))))
            };
        }
        match item.as_str().map(parse_duration) {
            Some(Ok(d)) => Ok(d),
            Some(Err(e)) => Err(s.err(key, e)),
            None => Err(s.type_err(key, "a duration such as \"90s\", \"6m\" or \"8h\"", item)),
        }
    }
}

/// A number of bytes: a positive whole number, or a string such as `"512M"` or `"8G"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Size(pub u64);

impl ReadValue for Size {
    fn read(s: &Section<'_>, key: &str, item: &Item) -> Result<Self, SpecError> {
        if let Some(i) = item.as_integer() {
            return if i > 0 {
                Ok(Size(i as u64))
            } else {
                Err(s.err(key, "must be more than zero"))
            };
        }
        match item.as_str().map(parse_size) {
            Some(Ok(b)) => Ok(Size(b)),
            Some(Err(e)) => Err(s.err(key, e)),
            None => Err(s.type_err(key, "a size such as \"512M\" or \"8G\"", item)),
        }
    }
}

/// A list of strings (a single string is a list of one).
impl ReadValue for Vec<String> {
    fn read(s: &Section<'_>, key: &str, item: &Item) -> Result<Self, SpecError> {
        if let Some(v) = item.as_str() {
            return Ok(vec![v.to_string()]);
        }
        let Some(arr) = item.as_array() else {
            return Err(s.type_err(key, "a list of strings", item));
        };
        let mut out = Vec::new();
        for (i, v) in arr.iter().enumerate() {
            match v.as_str() {
                Some(v) => out.push(v.to_string()),
                None => {
                    return Err(s.err_at(
                        s.element_line(key, i),
                        key,
                        format!("expected a list of strings, found {} in it", v.type_name()),
                    ));
                }
            }
        }
        Ok(out)
    }
}

/// A table of strings, such as `env = { CUDA_VISIBLE_DEVICES = "0" }`, in the file's order.
impl ReadValue for Vec<(String, String)> {
    fn read(s: &Section<'_>, key: &str, item: &Item) -> Result<Self, SpecError> {
        let pairs: Vec<(String, Option<String>)> = match item {
            Item::Table(tb) => tb
                .iter()
                .map(|(k, v)| (k.to_string(), v.as_str().map(str::to_string)))
                .collect(),
            Item::Value(Value::InlineTable(tb)) => tb
                .iter()
                .map(|(k, v)| (k.to_string(), v.as_str().map(str::to_string)))
                .collect(),
            other => {
                return Err(s.type_err(
                    key,
                    "a table of strings, e.g. env = { CUDA_VISIBLE_DEVICES = \"0\" }",
                    other,
                ))
            }
        };
        let mut out = Vec::new();
        for (k, v) in pairs {
            match v {
                Some(v) => out.push((k, v)),
                None => return Err(s.err(key, format!("`{k}` must be a string"))),
            }
        }
        Ok(out)
    }
}

/// The key lists `parts` one after another, as one list of `N` keys (a section's keys made of
/// lists it shares with others). Fails to compile when `N` is not their total length.
pub(super) const fn keys<const N: usize>(parts: &[&[&'static str]]) -> [&'static str; N] {
    let mut out = [""; N];
    let (mut i, mut n) = (0, 0);
    while i < parts.len() {
        let mut j = 0;
        while j < parts[i].len() {
            assert!(n < N, "more keys than N");
            out[n] = parts[i][j];
            n += 1;
            j += 1;
        }
        i += 1;
    }
    assert!(n == N, "fewer keys than N");
    out
}

/// The closest candidate by edit distance, if it is close enough to be a plausible typo.
pub fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    // Names other tools give these keys, too far from hone's to be caught as typos.
    let known = SYNONYMS
        .iter()
        .find(|(other, _)| other.eq_ignore_ascii_case(word))
        .and_then(|(_, ours)| candidates.iter().find(|c| **c == *ours).copied());
    known.or_else(|| {
        candidates
            .iter()
            .map(|c| (crate::util::edit_distance(word, c), *c))
            .filter(|(d, c)| *d <= 2.max(c.len() / 3))
            .min_by_key(|(d, _)| *d)
            .map(|(_, c)| c)
    })
}

/// Other tools' names for keys of hone.toml: (theirs, hone's). Suggested only where hone's
/// key is one of the section's.
const SYNONYMS: &[(&str, &str)] = &[
    ("api_base", "base_url"),
    ("base", "base_url"),
    ("endpoint", "base_url"),
    ("url_base", "base_url"),
    ("api_url", "base_url"),
    ("api_key", "api_key_env"),
    ("key_env", "api_key_env"),
    ("budget", "max_cost_usd"),
    ("max_budget", "max_cost_usd"),
    ("max_iterations", "max_experiments"),
    ("max_trials", "max_experiments"),
    ("n_trials", "max_experiments"),
    ("trials", "max_experiments"),
    ("max_steps", "max_experiments"),
];

/// `text`'s words as a TOML list's strings: `"--max-turns", "30"`.
fn words_apart(text: &str) -> String {
    text.split_whitespace()
        .map(|w| format!("{w:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}
