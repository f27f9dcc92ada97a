//! A chat completion as each API words it (OpenAI's `choices` and `usage`, Anthropic's
//! `content` and `usage` with prompt caching): the text, whether it was cut off, and the
//! tokens the server reported.

use serde_json::Value;

use super::{snippet, Completion, LlmClient};
use crate::presets::reported_tokens;
use crate::spec::AgentKind;

impl LlmClient {
    /// The completion in a server's answer `text`, or why it holds none.
    pub(super) fn parse_completion(&self, text: &str) -> Result<Completion, String> {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| format!("{} ({e}): {}", super::NOT_JSON, snippet(text)))?;
        let (content, input, output, cut_off) = match self.kind {
            AgentKind::Anthropic => {
                let content: String = v["content"]
                    .as_array()
                    .map(|parts| {
                        parts
                            .iter()
                            .filter_map(|p| p["text"].as_str())
                            .collect::<Vec<_>>()
                            .join("")
                    })
                    .unwrap_or_default();
                let (input, output) = usage(self.kind, &v);
                (content, input, output, v["stop_reason"] == "max_tokens")
            }
            _ => {
                if !v["choices"].as_array().is_some_and(|c| !c.is_empty()) {
                    return Err(format!(
                        "the server's answer has no choices: {}",
                        snippet(text)
                    ));
                }
                let message = &v["choices"][0]["message"];
                if let (None, Some(refusal)) =
                    (message["content"].as_str(), message["refusal"].as_str())
                {
                    return Err(format!("the model refused: {}", snippet(refusal)));
                }
                let (input, output) = usage(self.kind, &v);
                (
                    message["content"].as_str().unwrap_or_default().to_string(),
                    input,
                    output,
                    v["choices"][0]["finish_reason"] == "length",
                )
            }
        };
        Ok(Completion {
            text: content,
            cut_off,
            usage_reported: input.is_some() && output.is_some(),
            input_tokens: input.unwrap_or(0),
            output_tokens: output.unwrap_or(0),
            failed_before: Vec::new(),
        })
    }

    /// The usage a server's answer `text` reports, as [`usage`] reads it, when it reports both
    /// counts (an answer hone cannot use is charged that, not the worst case).
    pub(super) fn reported_usage(&self, text: &str) -> Option<(u64, u64)> {
        let v: Value = serde_json::from_str(text).ok()?;
        match usage(self.kind, &v) {
            (Some(i), Some(o)) => Some((i, o)),
            _ => None,
        }
    }
}

/// The input and output tokens an answer `v` reports (each capped, see `reported_tokens`).
/// Anthropic's prompt caching bills what it writes and reads beside `input_tokens`: counted
/// as input, a write at 1.25 times (its price over the input's), so that the charge is never
/// below the bill.
fn usage(kind: AgentKind, v: &Value) -> (Option<u64>, Option<u64>) {
    let u = &v["usage"];
    match kind {
        AgentKind::Anthropic => {
            let cached = |key: &str| reported_tokens(u[key].as_u64()).unwrap_or(0);
            let writes = cached("cache_creation_input_tokens");
            let input = reported_tokens(u["input_tokens"].as_u64()).map(|i| {
                i.saturating_add(cached("cache_read_input_tokens"))
                    .saturating_add(writes.saturating_add(writes.div_ceil(4)))
            });
            (input, reported_tokens(u["output_tokens"].as_u64()))
        }
        _ => (
            reported_tokens(u["prompt_tokens"].as_u64()),
            reported_tokens(u["completion_tokens"].as_u64()),
        ),
    }
}
