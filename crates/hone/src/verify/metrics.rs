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
        let end = after
            .find(|c: char| c.is_whitespace() || c == ',')
            .unwrap_or(after.len());
        let value: f64 = after[..end].parse().ok()?;
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
        })
    }

    /// Takes one line of output.
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
                self.inside.insert(name, value);
            }
        }
        for (name, value) in whole {
            if regex && name == self.objective {
                continue;
            }
            self.note_other_case(&name, value);
            self.metrics.values.insert(name, value);
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
                self.metrics.values.insert(self.objective.clone(), value);
            }
        }
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
            metrics.values.entry(name).or_insert(value);
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
        let end = after
            .find(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '|' | ')' | ']' | '}'))
            .unwrap_or(after.len());
        if let Ok(value) = after[..end].parse::<f64>() {
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
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parsed(line: &str) -> Vec<(String, f64)> {
        parse_line(line)
    }

    fn pairs(items: &[(&str, f64)]) -> Vec<(String, f64)> {
        items.iter().map(|&(n, v)| (n.to_owned(), v)).collect()
    }

    #[test]
    fn colon_form() {
        assert_eq!(parsed("val_bpb: 0.9979"), pairs(&[("val_bpb", 0.9979)]));
        assert_eq!(parsed("loss:2"), pairs(&[("loss", 2.0)]));
    }

    #[test]
    fn aligned_autoresearch_lines() {
        assert_eq!(
            parsed("val_bpb:          0.997900"),
            pairs(&[("val_bpb", 0.9979)])
        );
        assert_eq!(
            parsed("peak_vram_mb:     45060.2"),
            pairs(&[("peak_vram_mb", 45060.2)])
        );
        assert_eq!(
            parsed("   total_tokens_M: 499.6  \r"),
            pairs(&[("total_tokens_M", 499.6)])
        );
    }

    #[test]
    fn equals_forms() {
        assert_eq!(parsed("acc=0.91"), pairs(&[("acc", 0.91)]));
        assert_eq!(parsed("acc = 0.91"), pairs(&[("acc", 0.91)]));
        assert_eq!(
            parsed("step=5 loss=2.3"),
            pairs(&[("step", 5.0), ("loss", 2.3)])
        );
        assert_eq!(
            parsed("step=5, loss=2.3"),
            pairs(&[("step", 5.0), ("loss", 2.3)])
        );
    }

    #[test]
    fn metric_prefix_form() {
        assert_eq!(parsed("METRIC score=17"), pairs(&[("score", 17.0)]));
        assert_eq!(parsed("METRIC a=1 b=2"), pairs(&[("a", 1.0), ("b", 2.0)]));
        assert_eq!(parsed("METRIC   a = -1e-3"), pairs(&[("a", -0.001)]));
        // A metric that happens to be called METRIC still reads as a metric.
        assert_eq!(parsed("METRIC=4"), pairs(&[("METRIC", 4.0)]));
    }

    #[test]
    fn names_may_hold_dots_slashes_and_dashes() {
        assert_eq!(parsed("train/loss: 1.5"), pairs(&[("train/loss", 1.5)]));
        assert_eq!(parsed("eval.top-1=0.75"), pairs(&[("eval.top-1", 0.75)]));
        assert_eq!(parsed("_x: 1"), pairs(&[("_x", 1.0)]));
    }

    #[test]
    fn number_forms() {
        for (text, value) in [
            ("42", 42.0),
            ("-42", -42.0),
            ("+3.5", 3.5),
            ("1e6", 1e6),
            ("2.5E-3", 2.5e-3),
            (".5", 0.5),
            ("5.", 5.0),
            ("inf", f64::INFINITY),
            ("-inf", f64::NEG_INFINITY),
        ] {
            assert_eq!(
                parsed(&format!("m: {text}")),
                pairs(&[("m", value)]),
                "{text}"
            );
        }
        let nan = parsed("m: nan");
        assert_eq!(nan.len(), 1);
        assert!(nan[0].1.is_nan());
        assert!(parsed("m=NaN")[0].1.is_nan());
    }

    #[test]
    fn json_object_lines() {
        assert_eq!(
            parsed(
                r#"{"val_bpb": 0.99, "step": 12, "note": "ok", "ok": true, "nested": {"a": 1}}"#
            ),
            pairs(&[("val_bpb", 0.99), ("step", 12.0)])
        );
        assert_eq!(
            parsed(r#"  {"z": 1, "a": 2}  "#),
            pairs(&[("z", 1.0), ("a", 2.0)])
        );
        assert_eq!(
            parsed(r#"{"bad key": 1, "good": 2}"#),
            pairs(&[("good", 2.0)])
        );
        assert!(parsed(r#"{"unterminated": 1"#).is_empty());
        assert!(parsed("[1, 2]").is_empty());
    }

    #[test]
    fn prose_lines_yield_nothing() {
        for line in [
            "",
            "   ",
            "Epoch 3: loss went from 2.0 to 1.5",
            "time: 12:30:05",
            "val_bpb: 0.99 (best)",
            "val_bpb: 0.99 best",
            "val_bpb: 0.99ms",
            "val_bpb: 12%",
            "the val_bpb: 0.99",
            "best val_bpb = 0.5 so far",
            "loss=2.3 and falling",
            "a=1b=2",
            "a=1,,b=2",
            "METRIC",
            "METRIC a=",
            "METRIC a=1 b",
            "step 5 | loss 2.3",
            "1: 2",
            "Using device: cuda:0",
            "http://example.com:8080",
            "x: 0x10",
            "x: 1_000",
            "=1",
            "name:",
            "Traceback (most recent call last):",
        ] {
            assert!(parsed(line).is_empty(), "{line:?} gave {:?}", parsed(line));
        }
    }

    #[test]
    fn last_value_of_a_name_wins() {
        let mut reader = MetricReader::new("loss", None).expect("valid");
        for line in [
            "loss: 3",
            "step=1 loss=2",
            "noise",
            r#"{"loss": 1.5}"#,
            "acc: 0.5",
        ] {
            reader.feed(line);
        }
        let set = reader.finish();
        assert_eq!(set.get("loss"), Some(1.5));
        assert_eq!(set.get("step"), Some(1.0));
        assert_eq!(set.get("acc"), Some(0.5));
    }

    #[test]
    fn pairs_inside_ordinary_log_lines_are_read_when_no_whole_line_gives_the_name() {
        for (line, name, want) in [
            ("epoch 3: loss=0.41, acc=0.9", "loss", 0.41),
            ("epoch 3: loss=0.41, acc=0.9", "acc", 0.9),
            ("INFO:root:loss: 0.42", "loss", 0.42),
            ("[eval] step 10 | val_bpb: 1.05 | lr: 3e-4", "val_bpb", 1.05),
            ("done (loss=0.3)", "loss", 0.3),
        ] {
            let mut reader = MetricReader::new(name, None).expect("valid");
            reader.feed(line);
            assert_eq!(reader.finish().get(name), Some(want), "{line:?}");
        }
        // Not pairs: a clock time, a unit, a name inside a word, a value that is not a number.
        for line in [
            "time: 12:30:05",
            "loss: 0.99ms",
            "myloss=0.5",
            "Using device: cuda:0",
            "Epoch 3: loss went from 2.0 to 1.5",
        ] {
            let mut reader = MetricReader::new("loss", None).expect("valid");
            reader.feed(line);
            assert_eq!(reader.finish().get("loss"), None, "{line:?}");
        }
    }

    #[test]
    fn a_whole_line_value_outranks_one_inside_a_line_and_the_case_fallback() {
        let mut reader = MetricReader::new("loss", None).expect("valid");
        reader.feed("loss: 0.5");
        reader.feed("epoch 9: loss=0.1 (train)");
        reader.feed("Loss: 0.2");
        assert_eq!(reader.finish().get("loss"), Some(0.5));

        let mut reader = MetricReader::new("loss", None).expect("valid");
        reader.feed("Loss: 0.5");
        assert_eq!(
            reader.finish().get("loss"),
            Some(0.5),
            "another case counts last"
        );

        let mut reader = MetricReader::new("loss", None).expect("valid");
        reader.feed("Loss: 0.5");
        reader.feed("step 2: loss=0.25");
        assert_eq!(reader.finish().get("loss"), Some(0.25));
    }

    #[test]
    fn a_missing_objective_keeps_the_line_that_mentions_it_and_a_regex_that_reads_it() {
        let mut reader = MetricReader::new("loss", None).expect("valid");
        reader.feed("starting");
        reader.feed("final loss is 0.375 after 3 epochs");
        reader.feed("bye");
        let set = reader.finish();
        assert_eq!(set.get("loss"), None);
        let line = set.mention.expect("the mention is kept");
        assert_eq!(line, "final loss is 0.375 after 3 epochs");
        let regex = suggest_regex(&line, "loss").expect("a number follows the name");
        let mut again = MetricReader::new("loss", Some(&regex)).expect("the suggestion compiles");
        again.feed(&line);
        assert_eq!(again.finish().get("loss"), Some(0.375), "{regex}");
        assert_eq!(suggest_regex("no loss here", "loss"), None);

        let mut found = MetricReader::new("loss", None).expect("valid");
        found.feed("loss: 1");
        assert_eq!(
            found.finish().mention,
            None,
            "no hint once the value is read"
        );
    }

    #[test]
    fn metric_regex_overrides_the_objective() {
        let mut reader =
            MetricReader::new("score", Some(r"final score was ([-0-9.e]+)")).expect("valid regex");
        reader.feed("score: 100");
        reader.feed("the final score was 0.25 and the final score was 0.5");
        reader.feed("score: 200");
        reader.feed("peak_mb=12");
        let set = reader.finish();
        assert_eq!(set.get("score"), Some(0.5));
        assert_eq!(set.get("peak_mb"), Some(12.0));
    }

    #[test]
    fn metric_regex_with_a_named_value_group() {
        let mut reader =
            MetricReader::new("acc", Some(r"(train|eval) acc (?P<value>[0-9.]+)")).expect("valid");
        reader.feed("train acc 0.5");
        reader.feed("eval acc 0.75");
        assert_eq!(reader.finish().get("acc"), Some(0.75));
    }

    #[test]
    fn metric_regex_errors_say_what_to_do() {
        let no_group = MetricReader::new("acc", Some(r"acc [0-9.]+")).err();
        assert!(matches!(
            no_group,
            Some(MetricError::RegexWithoutGroup { .. })
        ));
        let two = MetricReader::new("acc", Some(r"(a)(b)")).err();
        assert!(matches!(two, Some(MetricError::RegexAmbiguousGroup { .. })));
        let bad = MetricReader::new("acc", Some(r"(unclosed")).err();
        assert!(matches!(bad, Some(MetricError::BadRegex { .. })));
        let err = no_group.map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("(?P<value>"), "{err}");
        assert!(matches!(
            MetricReader::new("val bpb", None).err(),
            Some(MetricError::BadName(_))
        ));
    }

    #[test]
    fn constraints_parse_every_operator() {
        for (text, op, bound) in [
            ("peak_vram_mb <= 40000", CmpOp::Le, 40000.0),
            ("peak_vram_mb<40000", CmpOp::Lt, 40000.0),
            ("peak_vram_mb >= -1.5", CmpOp::Ge, -1.5),
            ("peak_vram_mb > 1e3", CmpOp::Gt, 1e3),
            ("  peak_vram_mb == 2 ", CmpOp::Eq, 2.0),
            ("peak_vram_mb != 0", CmpOp::Ne, 0.0),
        ] {
            let c: Constraint = text.parse().expect("valid constraint");
            assert_eq!(c.metric, "peak_vram_mb");
            assert_eq!(c.op, op, "{text}");
            assert_eq!(c.bound, bound, "{text}");
        }
    }

    #[test]
    fn bad_constraints_say_the_expected_form() {
        for text in [
            "",
            "peak_vram_mb",
            "peak_vram_mb <= ",
            "<= 4",
            "peak_vram_mb ~ 4",
            "a <= b",
            "a = 4",
            "a <= nan",
        ] {
            let err = text.parse::<Constraint>().err().map(|e| e.to_string());
            let err = err.unwrap_or_else(|| panic!("{text:?} should not parse"));
            assert!(err.contains("peak_vram_mb <= 40000"), "{err}");
        }
    }

    #[test]
    fn constraint_check_explains_failures() {
        let c: Constraint = "peak_vram_mb <= 40000".parse().expect("valid");
        let mut set = MetricSet::default();
        let missing = c.check(&set).err().unwrap_or_default();
        assert!(
            missing.starts_with("peak_vram_mb was not reported"),
            "{missing}"
        );
        set.values.insert("peak_vram_mb".into(), 41000.0);
        assert_eq!(
            c.check(&set),
            Err("peak_vram_mb = 41000 violates peak_vram_mb <= 40000".to_owned())
        );
        set.values.insert("peak_vram_mb".into(), 40000.0);
        assert_eq!(c.check(&set), Ok(()));
        set.values.insert("peak_vram_mb".into(), f64::NAN);
        assert!(c.check(&set).is_err());
        let ne: Constraint = "peak_vram_mb != 1".parse().expect("valid");
        assert!(ne.check(&set).is_err(), "NaN satisfies no constraint");
    }

    fn name_strategy() -> impl Strategy<Value = String> {
        "[A-Za-z_][A-Za-z0-9_./-]{0,15}"
    }

    /// Lines that talk about `name` and a number in prose; none may yield a value for it.
    fn prose_about(name: String) -> impl Strategy<Value = String> {
        let word = "[a-z]{1,8}";
        let num = any::<f64>();
        (0..8usize, word, num, num).prop_map(move |(template, word, a, b)| match template {
            0 => format!("{name}: {a} ({word})"),
            1 => format!("{word} {name}: {a}"),
            2 => format!("{name} went from {a} to {b}"),
            3 => format!("{name}: {a}ms"),
            4 => format!("best {name} = {a} so far"),
            5 => format!("{name}: {a}:{b}"),
            6 => format!("{name}={a} {word}"),
            _ => format!("Epoch {a}: {name} {b}"),
        })
    }

    /// Random printable noise, and noise that mentions the metric in prose.
    fn noise_about(name: String) -> impl Strategy<Value = String> {
        prop_oneof!["[ -~]{0,80}", "\\PC{0,40}", prose_about(name)]
    }

    proptest! {
        #[test]
        fn name_colon_value_round_trips(name in name_strategy(), v in any::<f64>().prop_filter("finite", |v| v.is_finite())) {
            prop_assert_eq!(parse_line(&format!("{name}: {v}")), vec![(name.clone(), v)]);
            prop_assert_eq!(parse_line(&format!("METRIC {name}={v}")), vec![(name.clone(), v)]);
            prop_assert_eq!(parse_line(&format!("{name} = {v:e}")), vec![(name, v)]);
        }

        #[test]
        fn prose_about_a_metric_never_yields_it(
            (name, line) in name_strategy().prop_flat_map(|n| (Just(n.clone()), prose_about(n)))
        ) {
            prop_assert!(
                parse_line(&line).iter().all(|(n, _)| *n != name),
                "{:?} yielded {:?}", line, parse_line(&line)
            );
        }

        #[test]
        fn noise_never_yields_a_wrong_value(
            (name, before, after) in name_strategy().prop_flat_map(|n| (
                Just(n.clone()),
                prop::collection::vec(noise_about(n.clone()), 0..20),
                prop::collection::vec(prose_about(n), 0..5),
            )),
            v in any::<f64>().prop_filter("finite", |v| v.is_finite()),
        ) {
            let mut reader = MetricReader::new(&name, None).map_err(|e| TestCaseError::fail(e.to_string()))?;
            for line in &before {
                reader.feed(line);
            }
            reader.feed(&format!("{name}: {v}"));
            for line in &after {
                reader.feed(line);
            }
            prop_assert_eq!(reader.finish().get(&name), Some(v));
        }
    }
}
