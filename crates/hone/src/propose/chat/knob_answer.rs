//! `edit_mode = "knobs"`'s side of the chat proposer: the proposal itself, the table of
//! knobs the model sees, the check of its JSON answer (every name, type and range), and the
//! answer written into the knob files.

use serde_json::Value;

use super::answer::keep_notes;
use super::system::SYSTEM_KNOBS;
use crate::propose::{prompt, Proposal, ProposeContext, ProposeError};

/// The prompt's table of the knobs the model may change: name, current value, allowed values.
pub(super) fn knob_table(tunable: &[&crate::propose::knobs::Knob]) -> String {
    use crate::propose::knobs::Domain;
    let mut table = String::from("\n## Knobs (current values are the best so far)\n\n| knob | current | allowed |\n|---|---|---|\n");
    for k in tunable {
        let allowed = match &k.domain {
            Domain::Float { lo, hi, log } => {
                format!("float {lo}..{hi}{}", if *log { " (log scale)" } else { "" })
            }
            Domain::Int { lo, hi, .. } => format!("integer {lo}..{hi}"),
            Domain::Choice(c) => format!("one of {}", crate::propose::knobs::list_options(c)),
            Domain::Bool => "true or false".into(),
            Domain::Fixed => "fixed".into(),
        };
        table.push_str(&format!("| {} | {} | {allowed} |\n", k.name, k.value));
    }
    table
}

/// Writes the chosen configuration `next` into the worktree's files (those whose text changes).
pub(super) fn write_knobs(
    ctx: &ProposeContext<'_>,
    found: &[crate::propose::knobs::Knob],
    texts: &std::collections::BTreeMap<String, String>,
    next: &crate::propose::knobs::Config,
) -> Result<(), ProposeError> {
    use crate::propose::knobs;
    for (file, text) in texts {
        let mine: knobs::Config = found
            .iter()
            .filter(|k| &k.file == file)
            .filter_map(|k| next.get(&k.name).map(|v| (k.name.clone(), v.clone())))
            .collect();
        let new_text =
            knobs::apply(file, text, &mine).map_err(|e| ProposeError::Invalid(e.to_string()))?;
        if &new_text != text {
            std::fs::write(ctx.worktree.join(file), new_text)
                .map_err(|e| ProposeError::Fatal(format!("cannot write {file}: {e}")))?;
        }
    }
    Ok(())
}

/// Checks a `{changes, hypothesis}` answer against the knobs' names, types and ranges.
pub fn validate_knob_answer(
    answer: &str,
    knobs: &[&crate::propose::knobs::Knob],
) -> Result<(crate::propose::knobs::Config, String), Vec<String>> {
    use crate::propose::knobs::{Domain, KnobValue};
    let json = match (answer.find('{'), answer.rfind('}')) {
        (Some(a), Some(b)) if a < b => &answer[a..=b],
        _ => return Err(vec!["no JSON object in the answer".into()]),
    };
    let v: Value =
        serde_json::from_str(json).map_err(|e| vec![format!("the JSON does not parse: {e}")])?;
    let Some(changes) = v["changes"].as_object() else {
        return Err(vec![
            "`changes` must be an object of knob names to values".into()
        ]);
    };
    let mut out = crate::propose::knobs::Config::new();
    let mut problems = Vec::new();
    for (name, value) in changes {
        let Some(k) = knobs.iter().find(|k| &k.name == name) else {
            problems.push(format!("`{name}` is not a knob you may change"));
            continue;
        };
        let parsed = match (&k.domain, value) {
            (Domain::Float { lo, hi, .. }, Value::Number(n)) => match n.as_f64() {
                Some(x) if x >= *lo && x <= *hi => Ok(KnobValue::Float(x)),
                _ => Err(format!(
                    "`{name}` must be a number in {lo}..{hi}, not {value}"
                )),
            },
            (Domain::Int { lo, hi, .. }, Value::Number(n)) => match n.as_i64() {
                Some(x) if x >= *lo && x <= *hi => Ok(KnobValue::Int(x)),
                _ => Err(format!(
                    "`{name}` must be an integer in {lo}..{hi}, not {value}"
                )),
            },
            (Domain::Bool, Value::Bool(b)) => Ok(KnobValue::Bool(*b)),
            (Domain::Choice(options), _) => {
                let as_knob: Option<KnobValue> = serde_json::from_value(value.clone()).ok();
                match as_knob.filter(|c| options.contains(c)) {
                    Some(c) => Ok(c),
                    None => Err(format!(
                        "`{name}` must be one of {}, not {value}",
                        crate::propose::knobs::list_options(options)
                    )),
                }
            }
            _ => Err(format!("`{name}` has the wrong type: {value}")),
        };
        match parsed {
            Ok(x) => {
                out.insert(name.clone(), x);
            }
            Err(p) => problems.push(p),
        }
    }
    if problems.is_empty() {
        let hypothesis =
            prompt::sanitize(v["hypothesis"].as_str().unwrap_or(""), 300).replace('\n', " ");
        Ok((out, hypothesis))
    } else {
        Err(problems)
    }
}

impl super::ChatProposer {
    /// `edit_mode = "knobs"` (Level 1 of Bilevel Autoresearch, with validation): the model
    /// sees the knob table and the configurations tried, answers `{changes, hypothesis}`, and
    /// hone checks every name, type and range before writing anything.
    pub(super) fn propose_knobs(
        &mut self,
        ctx: &ProposeContext<'_>,
    ) -> Result<Proposal, ProposeError> {
        use crate::propose::knobs::{self, Domain};
        let (found, texts) = crate::propose::optimizer::find_knobs(ctx)?;
        let tunable: Vec<&knobs::Knob> = found
            .iter()
            .filter(|k| !matches!(k.domain, Domain::Fixed))
            .collect();
        if tunable.is_empty() {
            return Err(ProposeError::Fatal(
                "edit_mode = \"knobs\" needs knobs in the editable files (see hone init)".into(),
            ));
        }
        let incumbent = knobs::config_of(&found);
        let table = knob_table(&tunable);
        let user = format!("{}{table}", prompt::build(ctx)?);
        let mut messages = vec![("user".to_string(), user)];
        for round in 0..2 {
            let done = self.ask(ctx, SYSTEM_KNOBS, &messages)?;
            keep_notes(ctx, &done.text);
            match validate_knob_answer(&done.text, &tunable) {
                Ok((changes, hypothesis)) => {
                    let mut next = incumbent.clone();
                    next.extend(changes);
                    if next == incumbent {
                        return Err(ProposeError::Invalid(
                            "the model chose the current configuration again".into(),
                        ));
                    }
                    write_knobs(ctx, &found, &texts, &next)?;
                    let described = knobs::describe(&incumbent, &next);
                    return Ok(Proposal {
                        description: if hypothesis.is_empty() {
                            described
                        } else {
                            format!("{described}: {hypothesis}")
                        },
                        config: serde_json::to_value(&next).ok(),
                        cost_usd: 0.0,
                        source: None,
                        in_place: false,
                    });
                }
                Err(problems) if round == 0 => {
                    messages.push(("assistant".into(), done.text));
                    messages.push((
                        "user".into(),
                        format!("Your answer could not be used:\n- {}\nAnswer again with one valid JSON object.", problems.join("\n- ")),
                    ));
                }
                Err(problems) => {
                    return Err(ProposeError::Invalid(format!(
                        "the knob answer was still invalid after a repair round: {}",
                        problems.join("; ")
                    )));
                }
            }
        }
        Err(ProposeError::Invalid("no usable knob answer".into()))
    }
}
