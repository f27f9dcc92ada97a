//! A script's answers read back as hone's typed values, each checked: an unknown knob, a wrong
//! type or a value out of its domain is an error naming what was wrong.

use rhai::{Array, Dynamic, Map};

use super::super::{Guidance, Mode, Verdict};
use crate::propose::knobs::{list_options, Config, Domain, Knob, KnobValue};

/// Whether a script's value is of one type.
type IsType = fn(&Dynamic) -> bool;

/// What a script's value is, as error messages name it: "an integer", "a map".
pub(super) fn type_of(v: &Dynamic) -> &'static str {
    let types: [(IsType, &'static str); 7] = [
        (Dynamic::is_unit, "()"),
        (Dynamic::is_bool, "a bool"),
        (Dynamic::is_int, "an integer"),
        (Dynamic::is_float, "a float"),
        (Dynamic::is_string, "a string"),
        (Dynamic::is_array, "an array"),
        (Dynamic::is_map, "a map"),
    ];
    types
        .iter()
        .find(|(is, _)| is(v))
        .map_or("a value of another type", |(_, name)| name)
}

pub(super) fn as_str(v: &Dynamic, what: &str) -> Result<String, String> {
    v.clone()
        .into_string()
        .map_err(|_| format!("{what} must be a string, not {}", type_of(v)))
}

pub(super) fn str_list(v: &Dynamic, what: &str) -> Result<Vec<String>, String> {
    if v.is_string() {
        return Ok(vec![as_str(v, what)?]);
    }
    let Some(a) = v.clone().try_cast::<Array>() else {
        return Err(format!(
            "{what} must be an array of strings, not {}",
            type_of(v)
        ));
    };
    a.iter().map(|x| as_str(x, what)).collect()
}

pub(super) fn number(v: &Dynamic) -> Option<f64> {
    v.as_float()
        .ok()
        .or_else(|| v.as_int().ok().map(|i| i as f64))
}

/// One knob value from a script, checked against the knob's domain.
pub(super) fn checked_value(knobs: &[Knob], name: &str, v: &Dynamic) -> Result<KnobValue, String> {
    let Some(k) = knobs.iter().find(|k| k.name == name) else {
        return Err(format!("`{name}` is not a knob of this project"));
    };
    let bad = |want: String| format!("`{name}` must be {want}, not {} `{v}`", type_of(v));
    match &k.domain {
        Domain::Float { lo, hi, .. } => match number(v) {
            Some(x) if x >= *lo && x <= *hi => Ok(KnobValue::Float(x)),
            _ => Err(bad(format!("a number in {lo}..{hi}"))),
        },
        Domain::Int { lo, hi, .. } => match v.as_int() {
            Ok(x) if x >= *lo && x <= *hi => Ok(KnobValue::Int(x)),
            _ => Err(bad(format!("an integer in {lo}..{hi}"))),
        },
        Domain::Bool => v
            .as_bool()
            .map(KnobValue::Bool)
            .map_err(|_| bad("true or false".into())),
        Domain::Choice(options) => {
            let got = if let Ok(b) = v.as_bool() {
                Some(KnobValue::Bool(b))
            } else if let Ok(i) = v.as_int() {
                Some(KnobValue::Int(i))
            } else if let Ok(x) = v.as_float() {
                Some(KnobValue::Float(x))
            } else {
                v.clone().into_string().ok().map(KnobValue::Str)
            };
            match got {
                Some(g) if options.contains(&g) => Ok(g),
                _ => Err(bad(format!("one of {}", list_options(options)))),
            }
        }
        Domain::Fixed => Err(format!("`{name}` is fixed and may not be changed")),
    }
}

/// A configuration from a script's map, over `base` (knobs left out keep their value there).
pub fn checked_config(knobs: &[Knob], base: &Config, v: &Dynamic) -> Result<Config, String> {
    let Some(m) = v.clone().try_cast::<Map>() else {
        return Err(format!(
            "a configuration must be a map of knob names to values, not {}",
            type_of(v)
        ));
    };
    let mut out = base.clone();
    for (name, value) in &m {
        let value = checked_value(knobs, name.as_str(), value)?;
        out.insert(name, value);
    }
    Ok(out)
}

pub(super) fn map_of(v: &Dynamic, what: &str, keys: &[&str]) -> Result<Map, String> {
    let Some(m) = v.clone().try_cast::<Map>() else {
        return Err(format!("{what} must be a map, not {}", type_of(v)));
    };
    if let Some(k) = m.keys().find(|k| !keys.contains(&k.as_str())) {
        return Err(format!(
            "{what} has an unknown key `{k}` (allowed: {})",
            keys.join(", ")
        ));
    }
    Ok(m)
}

/// `before_propose`'s answer as guidance.
pub fn to_guidance(v: &Dynamic, knobs: &[Knob]) -> Result<Guidance, String> {
    if v.is_unit() {
        return Ok(Guidance::default());
    }
    let m = map_of(
        v,
        "before_propose's answer",
        &["text", "focus", "frozen", "step_scale", "mode"],
    )?;
    let mut g = Guidance::default();
    if let Some(t) = m.get("text") {
        g.text = str_list(t, "`text`")?
            .into_iter()
            .map(|t| crate::propose::prompt::sanitize(&t, 300).replace('\n', " "))
            .filter(|t| !t.trim().is_empty())
            .collect();
    }
    if let Some(f) = m.get("focus") {
        g.focus = str_list(f, "`focus`")?;
    }
    if let Some(f) = m.get("frozen") {
        g.frozen = str_list(f, "`frozen`")?;
        if let Some(bad) = g
            .frozen
            .iter()
            .find(|f| !knobs.iter().any(|k| &k.name == *f))
        {
            return Err(format!("`frozen` names `{bad}`, which is not a knob"));
        }
    }
    if let Some(s) = m.get("step_scale") {
        match number(s) {
            Some(x) if (0.05..=20.0).contains(&x) => g.step_scale = Some(x),
            _ => {
                return Err(format!(
                    "`step_scale` must be a number in 0.05..20.0, not {} `{s}`",
                    type_of(s)
                ))
            }
        }
    }
    if let Some(mode) = m.get("mode") {
        g.mode = Some(match as_str(mode, "`mode`")?.as_str() {
            "explore" => Mode::Explore,
            "exploit" => Mode::Exploit,
            other => {
                return Err(format!(
                    "`mode` must be \"explore\" or \"exploit\", not \"{other}\""
                ))
            }
        });
    }
    Ok(g)
}

/// `filter`'s answer as a verdict.
pub fn to_verdict(v: &Dynamic, knobs: &[Knob], base: &Config) -> Result<Verdict, String> {
    if v.is_unit() {
        return Ok(Verdict::Accept);
    }
    if let Ok(b) = v.as_bool() {
        return Ok(if b {
            Verdict::Accept
        } else {
            Verdict::Reject("rejected by the script".into())
        });
    }
    let m = map_of(v, "filter's answer", &["reject", "modify", "reason"])?;
    match (m.get("reject"), m.get("modify")) {
        (Some(_), Some(_)) => Err("filter's answer has both `reject` and `modify`".into()),
        (Some(r), None) => Ok(Verdict::Reject(
            crate::propose::prompt::sanitize(&as_str(r, "`reject`")?, 300).replace('\n', " "),
        )),
        (None, Some(c)) => {
            let reason = match m.get("reason") {
                Some(r) => as_str(r, "`reason`")?,
                None => String::new(),
            };
            Ok(Verdict::Modify(
                checked_config(knobs, base, c)?,
                crate::propose::prompt::sanitize(&reason, 300).replace('\n', " "),
            ))
        }
        (None, None) => Err("filter's answer must have `reject` or `modify`".into()),
    }
}

/// `candidates`' answer as configurations over `base`.
pub fn to_candidates(v: &Dynamic, knobs: &[Knob], base: &Config) -> Result<Vec<Config>, String> {
    if v.is_unit() {
        return Ok(Vec::new());
    }
    let Some(a) = v.clone().try_cast::<Array>() else {
        return Err(format!(
            "candidates must return an array of maps, not {}",
            type_of(v)
        ));
    };
    a.iter()
        .enumerate()
        .map(|(i, c)| checked_config(knobs, base, c).map_err(|e| format!("candidate {i}: {e}")))
        .collect()
}

/// The answer of `on_start`, `on_result` or `on_segment_end`: what changed, if anything.
pub fn to_change(v: &Dynamic, hook: &str) -> Result<Option<String>, String> {
    if v.is_unit() {
        return Ok(None);
    }
    let s = as_str(v, &format!("{hook}'s answer"))?;
    let s = crate::propose::prompt::sanitize(&s, 300).replace('\n', " ");
    Ok((!s.trim().is_empty()).then_some(s))
}
