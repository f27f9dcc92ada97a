//! Metric parsing from verifier output lines, and constraints on secondary metrics.
//!
//! A line carries metrics only if, once trimmed, it consists of nothing but metric parts:
//!
//! - `name: number`, `name=number`, `name = number` (aligned output such as
//!   `val_bpb:          0.997900` is fine);
//! - several such pairs separated by spaces or commas (`step=5 loss=2.3`, `a=1, b=2`);
//! - any of those after a `METRIC ` prefix (`METRIC a=1 b=2`);
//! - a JSON object; its number-valued members whose keys are names count, other members
//!   (strings, booleans, nested objects) are ignored.
//!
//! When no whole line gives a name, the reader falls back, for that name only, on pairs
//! found inside ordinary log lines (`epoch 3: loss=0.41, acc=0.9`, `INFO:root:loss: 0.42`):
//! a `name: number` or `name=number` whose name starts a word and whose number ends at a
//! space, `,`, `;`, `|` or a closing bracket. Precedence, per name: a whole-line value, then
//! an inside-a-line value, and for the objective only, then a name that differs from it only
//! in case (`Loss: 0.5` for `loss`); within each, the last value wins.
//!
//! Names are `[A-Za-z_][A-Za-z0-9_./-]*`. Numbers are what `f64::from_str` reads: integers,
//! decimals, scientific notation, an optional sign, and `nan`/`inf`, which are accepted
//! here and left to the caller to treat as a failure. Anything else on the line (prose,
//! units, a clock time, a trailing remark) makes the whole line yield nothing, so that
//! `Epoch 3: loss went from 2.0 to 1.5` or `val_bpb: 0.99 (best)` never count.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use regex::Regex;

/// Every metric on `line`, in order; empty unless the whole line is metric parts (see the
/// module docs).
pub fn parse_line(line: &str) -> Vec<(String, f64)> {
    let line = line.trim();
    if line.starts_with('{') {
        return parse_json_object(line).unwrap_or_default();
    }
    parse_pairs(line).unwrap_or_default()
}

/// `[METRIC ]pair (sep pair)*` where `pair` is `name ws* (':' | '=') ws* number`.
fn parse_pairs(line: &str) -> Option<Vec<(String, f64)>> {
    let mut rest = match line.strip_prefix("METRIC") {
        Some(after) if after.starts_with(char::is_whitespace) => after.trim_start(),
        _ => line,
    };
    let mut pairs = Vec::new();
    loop {
        let (name, after) = take_name(rest)?;
        let after = after.trim_start();
        let after = after
            .strip_prefix(':')
            .or_else(|| after.strip_prefix('='))?
            .trim_start();
        let (value, end) = leading_number(after, |c| c.is_whitespace() || c == ',')?;
        pairs.push((name.to_owned(), value));

        let after = &after[end..];
        let separated = after.trim_start();
        let separated = match separated.strip_prefix(',') {
            Some(s) => s.trim_start(),
            None => separated,
        };
        if separated.is_empty() {
            return Some(pairs);
        }
        if separated.len() == after.len() {
            // Nothing separates this pair from what follows.
            return None;
        }
        rest = separated;
    }
}

/// The number `s` starts with, up to the first character `stop` accepts, and where it ends;
/// with thousands separators (`1,234,567` is 1234567: a first group of one to three digits,
/// then groups of exactly three after each comma), as Python's `f"{x:,}"` prints.
fn leading_number(s: &str, stop: impl Fn(char) -> bool) -> Option<(f64, usize)> {
    let end = s.find(&stop).unwrap_or(s.len());
    let head = &s[..end];
    let unsigned = head.strip_prefix(['-', '+']).unwrap_or(head);
    let b = s.as_bytes();
    let group_at = |i: usize| {
        b.get(i) == Some(&b',')
            && b.get(i + 1..i + 4)
                .is_some_and(|g| g.iter().all(u8::is_ascii_digit))
            && !b.get(i + 4).is_some_and(u8::is_ascii_digit)
    };
    // A first group of `0` is a decimal comma (`0,412`), never a thousands separator.
    if (1..=3).contains(&unsigned.len())
        && unsigned.bytes().all(|c| c.is_ascii_digit())
        && !unsigned.starts_with('0')
        && group_at(end)
    {
        let mut digits = head.to_string();
        let mut i = end;
        while group_at(i) {
            digits.push_str(&s[i + 1..i + 4]);
            i += 4;
        }
        // A decimal part after the last group (`1,234.5`).
        let rest = s[i..].find(&stop).map_or(s.len(), |k| i + k);
        digits.push_str(&s[i..rest]);
        return digits.parse().ok().map(|v| (v, rest));
    }
    head.parse().ok().map(|v| (v, end))
}

/// Splits a leading metric name off `s`.
fn take_name(s: &str) -> Option<(&str, &str)> {
    let mut chars = s.char_indices();
    match chars.next() {
        Some((_, c)) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return None,
    }
    let end = chars
        .find(|&(_, c)| !is_name_char(c))
        .map_or(s.len(), |(i, _)| i);
    Some(s.split_at(end))
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-')
}

/// Whether `name` is a metric name: `[A-Za-z_][A-Za-z0-9_./-]*`.
pub fn is_metric_name(name: &str) -> bool {
    matches!(take_name(name), Some((_, "")))
}

/// The number-valued members of a one-line JSON object, in the order written.
fn parse_json_object(line: &str) -> Option<Vec<(String, f64)>> {
    serde_json::from_str::<OrderedNumbers>(line)
        .ok()
        .map(|n| n.0)
}

/// A JSON object read member by member, keeping order (serde_json's `Map` would sort).
struct OrderedNumbers(Vec<(String, f64)>);

impl<'de> serde::Deserialize<'de> for OrderedNumbers {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> serde::de::Visitor<'de> for Members {
            type Value = OrderedNumbers;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, serde_json::Value>()? {
                    if let Some(number) = value.as_f64().filter(|_| is_metric_name(&key)) {
                        out.push((key, number));
                    }
                }
                Ok(OrderedNumbers(out))
            }
        }
        deserializer.deserialize_map(Members)
    }
}

/// Metrics reported by one run; the last value of a name wins.
#[derive(Default, Clone, Debug, PartialEq)]
pub struct MetricSet {
    pub values: BTreeMap<String, f64>,
    /// When the objective was not read: the last line that mentions its name (any case), to
    /// show the user with a `metric_regex` that would read it.
    pub mention: Option<String>,
}

impl MetricSet {
    pub fn get(&self, name: &str) -> Option<f64> {
        self.values.get(name).copied()
    }
}

/// Why a metric setting is unusable; each message says what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetricError {
    #[error(
        "`{0}` is not a metric name; use letters, digits, `_`, `.`, `/` or `-`, starting with \
         a letter or `_` (for example `val_bpb`)"
    )]
    BadName(String),
    #[error("metric_regex `{regex}` is not a valid regular expression: {error}")]
    BadRegex { regex: String, error: String },
    #[error(
        "metric_regex `{regex}` has no capture group; put the number in one, for example \
         `score is ([0-9.]+)`, or name it `(?P<value>...)`"
    )]
    RegexWithoutGroup { regex: String },
    #[error(
        "metric_regex `{regex}` has several capture groups; name the one holding the number \
         `(?P<value>...)`"
    )]
    RegexAmbiguousGroup { regex: String },
    #[error(
        "`{0}` is not a constraint; write a metric name, one of <= < >= > == !=, and a \
         number, for example `peak_vram_mb <= 40000`"
    )]
    BadConstraint(String),
}

/// The most metric names [`MetricReader`] keeps besides the objective.
pub const MAX_METRICS: usize = 1000;
/// The longest metric name, in bytes, [`MetricReader`] keeps.
pub const MAX_METRIC_NAME: usize = 200;

/// `name = value` into `map`, unless the name is longer than [`MAX_METRIC_NAME`] or new to a
/// map that holds [`MAX_METRICS`] names already (the objective, `objective`, always).
fn keep_bounded(map: &mut BTreeMap<String, f64>, name: String, value: f64, objective: &str) {
    if name == objective {
        map.insert(name, value);
        return;
    }
    if name.len() > MAX_METRIC_NAME {
        return;
    }
    let room = map.len() - usize::from(map.contains_key(objective)) < MAX_METRICS;
    if room || map.contains_key(&name) {
        map.insert(name, value);
    }
}

/// Reads the metrics of one run from its output, line by line.
pub struct MetricReader {
    objective: String,
    /// With a `metric_regex`, the objective comes only from its matches.
    objective_regex: Option<MetricRegex>,
    metrics: MetricSet,
    /// Pairs found inside lines that are not metric lines as a whole (lower precedence).
    inside: BTreeMap<String, f64>,
    /// The objective written in another case (`Loss` for `loss`; lowest precedence).
    other_case: Option<f64>,
    /// The last line mentioning the objective's name, for the hint when it is not read.
    mention: Option<String>,
    /// How many lines gave the objective as a whole-line metric (or a `metric_regex` match).
    objective_lines: u64,
}

/// A compiled `metric_regex`: the regex, the capture group holding the number, and the text
/// as written (what a spec stores and shows).
#[derive(Clone, Debug)]
pub struct MetricRegex {
    source: String,
    regex: Regex,
    /// Index of the capture group holding the number.
    group: usize,
}

impl MetricRegex {
    /// Compiles `pattern`; the error says what to write instead.
    pub fn compile(pattern: &str) -> Result<MetricRegex, MetricError> {
        compile_objective_regex(pattern)
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }
}

/// Serialized as the pattern as written.
impl serde::Serialize for MetricRegex {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.source)
    }
}

impl MetricReader {
    /// A reader for the objective `objective`. With `metric_regex`, the objective is the
    /// number captured by the last match of that regex in any line (the group named
    /// `value`, or the only group), and `name: number` lines for it are ignored.
    pub fn new(objective: &str, metric_regex: Option<&str>) -> Result<Self, MetricError> {
        if !is_metric_name(objective) {
            return Err(MetricError::BadName(objective.to_owned()));
        }
        let objective_regex = metric_regex.map(compile_objective_regex).transpose()?;
        Self::with_regex(objective, objective_regex)
    }

    /// Like [`MetricReader::new`], with a `metric_regex` compiled already.
    pub fn with_regex(
        objective: &str,
        objective_regex: Option<MetricRegex>,
    ) -> Result<Self, MetricError> {
        if !is_metric_name(objective) {
            return Err(MetricError::BadName(objective.to_owned()));
        }
        Ok(Self {
            objective: objective.to_owned(),
            objective_regex,
            metrics: MetricSet::default(),
            inside: BTreeMap::new(),
            other_case: None,
            mention: None,
            objective_lines: 0,
        })
    }

    /// Takes one line of output. What it keeps is bounded whatever the output (it is the
    /// candidate's): at most [`MAX_METRICS`] names besides the objective, each of at most
    /// [`MAX_METRIC_NAME`] bytes, so that a verifier printing ever new names cannot grow hone
    /// until the system kills it.
    pub fn feed(&mut self, line: &str) {
        let whole = parse_line(line);
        let regex = self.objective_regex.is_some();
        let pairs = if whole.is_empty() {
            scan_pairs(line)
        } else {
            Vec::new()
        };
        for (name, value) in pairs {
            if !(regex && name == self.objective) {
                self.note_other_case(&name, value);
                keep_bounded(&mut self.inside, name, value, &self.objective);
            }
        }
        for (name, value) in whole {
            if regex && name == self.objective {
                continue;
            }
            self.note_other_case(&name, value);
            if name == self.objective {
                self.objective_lines += 1;
            }
            keep_bounded(&mut self.metrics.values, name, value, &self.objective);
        }
        if mentions(line, &self.objective) {
            self.mention = Some(line.trim().chars().take(300).collect());
        }
        if let Some(re) = &self.objective_regex {
            let last = re
                .regex
                .captures_iter(line)
                .filter_map(|c| c.get(re.group)?.as_str().trim().parse::<f64>().ok())
                .last();
            if let Some(value) = last {
                self.objective_lines += 1;
                self.metrics.values.insert(self.objective.clone(), value);
            }
        }
    }

    /// How many lines so far gave the objective as a metric line of its own (or matched
    /// `metric_regex`): one more after a line means the program printed its result there.
    pub fn objective_lines(&self) -> u64 {
        self.objective_lines
    }

    fn note_other_case(&mut self, name: &str, value: f64) {
        if self.objective_regex.is_none()
            && name != self.objective
            && name.eq_ignore_ascii_case(&self.objective)
        {
            self.other_case = Some(value);
        }
    }

    /// Everything read so far (see the module docs for which value of a name counts).
    pub fn finish(self) -> MetricSet {
        let mut metrics = self.metrics;
        for (name, value) in self.inside {
            if !metrics.values.contains_key(&name) {
                keep_bounded(&mut metrics.values, name, value, &self.objective);
            }
        }
        if let Some(value) = self.other_case {
            metrics
                .values
                .entry(self.objective.clone())
                .or_insert(value);
        }
        if !metrics.values.contains_key(&self.objective) {
            metrics.mention = self.mention;
        }
        metrics
    }
}

/// What to tell a user whose verifier printed no objective: the line that mentions it, and
/// the metric name it prints (a misspelt `metric`) or a `metric_regex` that would read it.
pub fn missing_metric_hint(mention: Option<&str>, metric: &str) -> String {
    let Some(line) = mention else {
        return format!(
            " (print a line `{metric}: <number>`, or set [verify] metric_regex to read it from the output)"
        );
    };
    // A printed name that holds it (`val_loss` for `val_los`): a misspelt metric.
    let lower = metric.to_ascii_lowercase();
    let printed = parse_line(line)
        .into_iter()
        .map(|(name, _)| name)
        .find(|name| {
            let name = name.to_ascii_lowercase();
            // The metric's own name printed (a `metric_regex` that missed it): no typo.
            name != lower && name.contains(&lower)
        });
    if let Some(name) = printed {
        return format!(
            "; a line prints `{name}`: `{line}`; if that is the metric, set in hone.toml [verify] metric = \"{name}\""
        );
    }
    match suggest_regex(line, metric) {
        Some(regex) => {
            let quoted = if regex.contains('\'') {
                format!("'''{regex}'''")
            } else {
                format!("'{regex}'")
            };
            format!(
                "; a line mentions it: `{line}`; to read it, set in hone.toml [verify] metric_regex = {quoted}"
            )
        }
        None => format!("; a line mentions it but holds no number after it: `{line}`"),
    }
}

/// Does `line` mention `name` (any case)?
fn mentions(line: &str, name: &str) -> bool {
    line.to_ascii_lowercase()
        .contains(&name.to_ascii_lowercase())
}

/// `name: number` and `name=number` pairs anywhere in `line`: the name starts a word, the
/// number ends the pair (a space, `,`, `;`, `|`, a closing bracket or the end of the line).
fn scan_pairs(line: &str) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    let mut prev: Option<char> = None;
    for (i, c) in line.char_indices() {
        let starts_word = !prev.is_some_and(is_name_char);
        prev = Some(c);
        if !starts_word {
            continue;
        }
        let Some((name, after)) = take_name(&line[i..]) else {
            continue;
        };
        let after = after.trim_start();
        let Some(after) = after.strip_prefix(':').or_else(|| after.strip_prefix('=')) else {
            continue;
        };
        let after = after.trim_start();
        let stop = |c: char| c.is_whitespace() || matches!(c, ',' | ';' | '|' | ')' | ']' | '}');
        if let Some((value, _)) = leading_number(after, stop) {
            out.push((name.to_owned(), value));
        }
    }
    out
}

/// A `metric_regex` that reads the number following `name` in `line` (a line that mentions
/// the objective but gave no value for it), if the line has a number after the name.
pub fn suggest_regex(line: &str, name: &str) -> Option<String> {
    let lower = line.to_ascii_lowercase();
    let start = lower.find(&name.to_ascii_lowercase())?;
    let number = Regex::new(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?").ok()?;
    let from = start + name.len();
    let m = number.find_at(line, from)?;
    let prefix = regex::escape(&line[start..m.start()]);
    Some(format!(r"{prefix}([-+0-9.eE]+)"))
}

fn compile_objective_regex(pattern: &str) -> Result<MetricRegex, MetricError> {
    let regex = Regex::new(pattern).map_err(|e| MetricError::BadRegex {
        regex: pattern.to_owned(),
        error: e.to_string(),
    })?;
    let named = regex.capture_names().position(|name| name == Some("value"));
    let group = match (named, regex.captures_len()) {
        (Some(index), _) => index,
        (None, 1) => {
            return Err(MetricError::RegexWithoutGroup {
                regex: pattern.to_owned(),
            })
        }
        (None, 2) => 1,
        (None, _) => {
            return Err(MetricError::RegexAmbiguousGroup {
                regex: pattern.to_owned(),
            })
        }
    };
    Ok(MetricRegex {
        source: pattern.to_owned(),
        regex,
        group,
    })
}

/// A comparison in a [`Constraint`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    Le,
    Lt,
    Ge,
    Gt,
    Eq,
    Ne,
}

impl CmpOp {
    /// Two-character operators first, so that `<=` is not read as `<`.
    const ALL: [(&'static str, CmpOp); 6] = [
        ("<=", CmpOp::Le),
        (">=", CmpOp::Ge),
        ("==", CmpOp::Eq),
        ("!=", CmpOp::Ne),
        ("<", CmpOp::Lt),
        (">", CmpOp::Gt),
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CmpOp::Le => "<=",
            CmpOp::Lt => "<",
            CmpOp::Ge => ">=",
            CmpOp::Gt => ">",
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
        }
    }

    /// Whether `value op bound` holds. A NaN value never satisfies a constraint.
    pub fn holds(self, value: f64, bound: f64) -> bool {
        if value.is_nan() {
            return false;
        }
        match self {
            CmpOp::Le => value <= bound,
            CmpOp::Lt => value < bound,
            CmpOp::Ge => value >= bound,
            CmpOp::Gt => value > bound,
            CmpOp::Eq => value == bound,
            CmpOp::Ne => value != bound,
        }
    }
}

impl fmt::Display for CmpOp {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A bound on a metric, such as `peak_vram_mb <= 40000`.
#[derive(Clone, Debug, PartialEq)]
pub struct Constraint {
    pub metric: String,
    pub op: CmpOp,
    pub bound: f64,
    /// The text it was parsed from, as written (what a spec stores and shows to agents).
    text: String,
}

/// Serialized as the text it was parsed from.
impl serde::Serialize for Constraint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl FromStr for Constraint {
    type Err = MetricError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || MetricError::BadConstraint(s.to_owned());
        let (metric, rest) = take_name(s.trim()).ok_or_else(bad)?;
        let rest = rest.trim_start();
        let (op, rest) = CmpOp::ALL
            .iter()
            .find_map(|&(text, op)| rest.strip_prefix(text).map(|r| (op, r)))
            .ok_or_else(bad)?;
        let bound: f64 = rest.trim().parse().map_err(|_| bad())?;
        if bound.is_nan() {
            return Err(bad());
        }
        Ok(Constraint {
            metric: metric.to_owned(),
            op,
            bound,
            text: s.to_owned(),
        })
    }
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} {} {}", self.metric, self.op, self.bound)
    }
}

impl Constraint {
    /// The text it was parsed from, as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// `Ok` when the run reported the metric and it satisfies the bound; otherwise a
    /// sentence saying which value broke which constraint, or that it was not reported.
    pub fn check(&self, metrics: &MetricSet) -> Result<(), String> {
        match metrics.get(&self.metric) {
            None => Err(format!(
                "{} was not reported (needed by the constraint {self})",
                self.metric
            )),
            Some(value) if self.op.holds(value, self.bound) => Ok(()),
            Some(value) => Err(format!("{} = {value} violates {self}", self.metric)),
        }
    }
}

#[cfg(test)]
mod tests;
