//! Knobs: literal constants in editable files, their search domains, and in-place rewriting.
// TEMPORARY STUB: replaced by the real module from branch helper/knobs.
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum KnobValue {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}
#[derive(Clone, Debug, PartialEq)]
pub enum Domain {
    Float { lo: f64, hi: f64, log: bool },
    Int { lo: i64, hi: i64, log: bool },
    Choice(Vec<KnobValue>),
    Bool,
    Fixed,
}
#[derive(Clone, Debug)]
pub struct Knob {
    pub name: String,
    pub file: String,
    pub line: usize,
    pub value: KnobValue,
    pub domain: Domain,
    pub annotated: bool,
}
pub type Config = BTreeMap<String, KnobValue>;
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct KnobError(String);
pub fn discover(_file: &str, _text: &str) -> Result<Vec<Knob>, KnobError> {
    Ok(vec![])
}
pub fn config_of(knobs: &[Knob]) -> Config {
    knobs
        .iter()
        .map(|k| (k.name.clone(), k.value.clone()))
        .collect()
}
pub fn apply(_file: &str, text: &str, _changes: &Config) -> Result<String, KnobError> {
    Ok(text.to_string())
}
pub fn describe(_from: &Config, _to: &Config) -> String {
    String::new()
}
#[derive(Clone, Debug)]
pub struct Observation {
    pub config: Config,
    pub objective: Option<f64>,
}
pub fn suggest(
    _knobs: &[Knob],
    _history: &[Observation],
    _incumbent: &Config,
    _minimize: bool,
    _seed: u64,
    _index: u64,
) -> Option<Config> {
    None
}
