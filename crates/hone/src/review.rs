//! The reviewer as an LLM over HTTP (`[review] kind = "openai" | "anthropic"`): it reads the
//! review prompt (rules, instructions, the candidate's description and diff) and answers
//! with one JSON object, `{"decision": "approve" | "reject", "reason": "..."}`. Anything
//! else rejects the candidate, with what was wrong as the reason: a candidate is only
//! verified when a reviewer approved it.
//!
//! Its calls go through the same client and the same budget meter as the HTTP proposer's
//! (worst case reserved before every call; its spend is the experiment's).

use crate::propose::chat::{CallError, LlmClient};
use crate::propose::{prompt, Meter};

/// What the reviewer is told about its answer.
pub const SYSTEM: &str = "You review one candidate change to a research project before any compute is \
spent on it. Reject a change that breaks the rules below, games the measurement (reads the validation or \
test data, hard-codes or prints the metric, touches the evaluator), or cannot work. Approve anything else: \
judging whether it improves the metric is not your job, the measurement does that. Answer with exactly one \
JSON object and nothing else: {\"decision\": \"approve\", \"reason\": \"<one sentence>\"} or \
{\"decision\": \"reject\", \"reason\": \"<one sentence>\"}.";

/// The reviewer's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Approve(String),
    Reject(String),
}

/// Why an HTTP review did not happen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReviewError {
    /// The call failed (a bad answer): the candidate is rejected.
    Failed(String),
    /// The server was unavailable through every retry (5xx, 429, timeouts, refused
    /// connections): no verdict on the candidate; the review is asked again after a wait.
    Unavailable(String),
    /// The configuration is wrong (a refused key, a missing model): the run stops.
    Fatal(String),
    /// The call could cross the budget: nothing was sent, the run stops.
    Budget(String),
    /// The cancel check (a second Ctrl-C) said stop before the answer came.
    Cancelled,
}

/// Reads a verdict strictly: one JSON object (markdown fences around it are tolerated) whose
/// `decision` is `approve` or `reject`; a rejection needs a `reason`.
pub fn parse_verdict(answer: &str) -> Verdict {
    let t = answer.trim();
    let t = t
        .strip_prefix("```json")
        .or_else(|| t.strip_prefix("```"))
        .and_then(|r| r.trim_end().strip_suffix("```"))
        .unwrap_or(t)
        .trim();
    let bad = |why: &str| {
        Verdict::Reject(format!(
            "the reviewer's answer is not a verdict ({why}): {}",
            prompt::sanitize(answer, 200).replace('\n', " ")
        ))
    };
    let v: serde_json::Value = match serde_json::from_str(t) {
        Ok(v) => v,
        Err(_) => return bad("expected one JSON object"),
    };
    let reason =
        prompt::sanitize(v["reason"].as_str().unwrap_or("").trim(), 300).replace('\n', " ");
    match v["decision"].as_str() {
        Some("approve") => Verdict::Approve(reason),
        Some("reject") if !reason.is_empty() => Verdict::Reject(reason),
        Some("reject") => Verdict::Reject("no reason given".into()),
        _ => bad("`decision` must be \"approve\" or \"reject\""),
    }
}

/// Asks the reviewer about one candidate.
pub fn review(
    client: &mut LlmClient,
    meter: &Meter<'_>,
    prompt_text: &str,
    cancel: &dyn Fn() -> bool,
) -> Result<Verdict, ReviewError> {
    let messages = vec![("user".to_string(), prompt_text.to_string())];
    // Its waits between attempts go unsaid (a review is seconds; the outage after its last
    // attempt is written to its log).
    match client.call(meter, SYSTEM, &messages, cancel, &|_| {}) {
        Ok(done) => Ok(parse_verdict(&done.text)),
        Err(CallError::Failed(m)) => Err(ReviewError::Failed(m)),
        Err(CallError::Unavailable(m)) => Err(ReviewError::Unavailable(m)),
        Err(CallError::Fatal(m)) => Err(ReviewError::Fatal(m)),
        Err(CallError::Budget(m)) => Err(ReviewError::Budget(m)),
        Err(CallError::Cancelled) => Err(ReviewError::Cancelled),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_strict_verdict_approves() {
        assert_eq!(
            parse_verdict("{\"decision\": \"approve\", \"reason\": \"fine\"}"),
            Verdict::Approve("fine".into())
        );
        assert_eq!(
            parse_verdict(
                "```json\n{\"decision\": \"reject\", \"reason\": \"reads val data\"}\n```"
            ),
            Verdict::Reject("reads val data".into())
        );
        for bad in [
            "APPROVE",
            "Sure! {\"decision\": \"approve\"}",
            "{\"decision\": \"Approve\"}",
            "{\"decision\": \"maybe\", \"reason\": \"x\"}",
            "",
        ] {
            match parse_verdict(bad) {
                Verdict::Reject(r) => assert!(r.contains("not a verdict"), "{bad}: {r}"),
                v => panic!("{bad} gave {v:?}"),
            }
        }
        assert_eq!(
            parse_verdict("{\"decision\": \"reject\"}"),
            Verdict::Reject("no reason given".into())
        );
    }
}
