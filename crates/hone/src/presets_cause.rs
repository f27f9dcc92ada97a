//! What an error an agent CLI reported says of its cause: an outage to wait out, a set-up
//! every turn would meet (the run stops), or the turn's own failure.

/// What an error an agent CLI reported says of its cause.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ErrorCause {
    /// The model's service is overloaded, rate-limited, over a usage limit or unreachable
    /// for now: waiting helps, as with an HTTP model's outage.
    Unavailable,
    /// The tool cannot work as it is set up (its login or key refused, a model that does not
    /// exist, no credit left): every turn would fail the same way.
    Setup,
    /// Anything else: this turn's failure.
    Turn,
}

/// The cause an agent CLI's reported error names: an HTTP status among its words (next to
/// `status`, `error`, `code`, `HTTP`, or before its reason: 429 and 5xx unavailable, 401 and
/// 402 setup), or the words the tools and their APIs use. Checked in this order, the costly
/// mistakes first: the turn's own failures (a prompt too long for the context window, even
/// when a stream broke over it); a limit that lifts (a 429, `retry in`, a usage limit),
/// unavailable even where it says "quota"; a setup every turn would meet (a refused key, no
/// credit, a model the service does not have), which stops the run; then the service
/// unavailable (overloaded, a lost connection).
pub fn error_cause(message: &str) -> ErrorCause {
    let lower = message.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| lower.contains(w));
    let codes = http_codes(&lower);
    let code = |list: &[&str]| codes.iter().any(|c| list.contains(c));
    if has(TURN_FAILURES) {
        return ErrorCause::Turn;
    }
    // A quota that sends to the billing page is no credit left, unless it says when to
    // retry (Gemini's per-minute limit says both).
    let retry_hint = has(&["retry in", "retrydelay", "retry after", "try again later"]);
    let quota = has(&["exceeded your current quota", "quota exceeded"]);
    let no_credit = has(NO_CREDIT) || (quota && lower.contains("billing") && !retry_hint);
    if !no_credit && (code(&["429"]) || retry_hint || quota || has(LIMITS_THAT_LIFT)) {
        return ErrorCause::Unavailable;
    }
    let missing_model = (lower.contains("not_found_error") && lower.contains("model"))
        || (lower.contains("does not exist") && lower.contains("the model"));
    if no_credit || code(&["401", "402"]) || has(SETUP_FAILURES) || missing_model {
        return ErrorCause::Setup;
    }
    if code(&["500", "502", "503", "504", "529"]) || has(OUTAGES) {
        return ErrorCause::Unavailable;
    }
    ErrorCause::Turn
}

/// Words of a turn's own failure, whatever else its message says.
const TURN_FAILURES: &[&str] = &[
    "context window",
    "context length",
    "maximum context",
    "prompt is too long",
    "input is too long",
];

/// Words of an account with no credit left.
const NO_CREDIT: &[&str] = &[
    "insufficient_quota",
    "credit balance is too low",
    "billing_hard_limit",
    "insufficient balance",
];

/// Words of a limit that lifts by itself (per minute, per five hours...).
const LIMITS_THAT_LIFT: &[&str] = &[
    "rate limit",
    "rate_limit",
    "ratelimit",
    "too many requests",
    "usage limit",
    "limit reached",
    "exhausted your capacity",
    "quota will reset",
];

/// Words of a set-up every turn would meet: a refused login or key, a model that is not.
const SETUP_FAILURES: &[&str] = &[
    "unauthorized",
    "invalid api key",
    "invalid x-api-key",
    "incorrect api key",
    "authentication_error",
    "authentication failed",
    "not logged in",
    "please run /login",
    "oauth token has expired",
    "api key not valid",
    "must specify the gemini_api_key",
    "providerautherror",
    "providermodelnotfounderror",
    "is not found for api version",
    "model_not_found",
    "model not found",
    "unknown model",
    "invalid model",
];

/// Words of a service unavailable for now: overloaded, or out of reach.
const OUTAGES: &[&str] = &[
    "overloaded",
    "service unavailable",
    "temporarily unavailable",
    "bad gateway",
    "stream disconnected",
    "connection error",
    "connection reset",
    "connection refused",
    "request timed out",
    "econnreset",
    "etimedout",
    "apiconnectionerror",
    "serviceunavailable",
];

/// The HTTP statuses `lower` names: three digits right after `status`, `error`, `code`,
/// `statuscode`, `http` or `api` (a word between allowed), or right before a status's reason
/// (`429 Too Many Requests`); not any number (`line 401`).
fn http_codes(lower: &str) -> Vec<&str> {
    const BEFORE: &[&str] = &["status", "error", "code", "statuscode", "http", "api"];
    const AFTER: &[&str] = &[
        "too",
        "unauthorized",
        "forbidden",
        "service",
        "bad",
        "internal",
        "overloaded",
        "payment",
        "gateway",
    ];
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    (0..words.len())
        .filter(|&i| words[i].len() == 3 && words[i].bytes().all(|b| b.is_ascii_digit()))
        .filter(|&i| {
            let before = (i.saturating_sub(2)..i).any(|j| BEFORE.contains(&words[j]));
            let after = words.get(i + 1).is_some_and(|w| AFTER.contains(w));
            before || after
        })
        .map(|i| words[i])
        .collect()
}

/// The longest a limit is believed to last: a plan's window is hours, a week at most; a
/// message that names a later time (or a number too large to be one) is not believed.
pub const LONGEST_LIMIT: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

/// How long until a limit the message names lifts, when it says: Claude Code's `usage limit
/// reached|<unix time>`, or a wait in words (`try again in 2 hours 5 minutes`, `Please retry
/// in 29.9s`, `try again in 1m30s`); `now` is the current unix time. `None` when it says
/// neither, names a time already past, or one further than [`LONGEST_LIMIT`].
pub fn lifts_after(message: &str, now: f64) -> Option<std::time::Duration> {
    let secs = lifts_in_secs(message, now)?;
    std::time::Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| !d.is_zero() && *d <= LONGEST_LIMIT)
}

/// [`lifts_after`] in seconds, unchecked.
fn lifts_in_secs(message: &str, now: f64) -> Option<f64> {
    let lower = message.to_ascii_lowercase();
    if let Some((_, after)) = lower.split_once("limit reached|") {
        let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
        let at: f64 = digits.parse().ok()?;
        return Some(at - now);
    }
    let at = ["try again in ", "retry in ", "retry after "]
        .iter()
        .find_map(|p| lower.find(p).map(|i| i + p.len()))?;
    duration_in_words(&lower[at..])
}

/// The seconds a duration in words at the start of `text` says (`2 hours 5 minutes`, `29.9s`,
/// `1m30s`, `47 min`), up to the first word that is neither a number nor a unit.
fn duration_in_words(text: &str) -> Option<f64> {
    let mut total = 0.0;
    let mut number: Option<f64> = None;
    let mut seen = false;
    let mut rest = text;
    loop {
        rest = rest.trim_start_matches([' ', ',']);
        let num_len = if rest.starts_with(|c: char| c.is_ascii_digit()) {
            rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(rest.len())
        } else {
            0
        };
        if num_len > 0 {
            number = Some(rest[..num_len].trim_end_matches('.').parse().ok()?);
            rest = &rest[num_len..];
            continue;
        }
        let word_len = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let unit = match &rest[..word_len] {
            "h" | "hr" | "hrs" | "hour" | "hours" => 3600.0,
            "m" | "min" | "mins" | "minute" | "minutes" => 60.0,
            "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
            "ms" => 0.001,
            "and" => {
                rest = &rest[word_len..];
                continue;
            }
            _ => break,
        };
        let Some(n) = number.take() else { break };
        total += n * unit;
        seen = true;
        rest = &rest[word_len..];
    }
    seen.then_some(total)
}

#[cfg(test)]
mod tests {
    use super::lifts_after;
    use std::time::Duration;

    #[test]
    fn a_limit_says_when_it_lifts() {
        let now = 1_796_460_000.0;
        assert_eq!(
            lifts_after("Claude AI usage limit reached|1796463600", now),
            Some(Duration::from_secs(3600))
        );
        assert_eq!(
            lifts_after("Claude AI usage limit reached|1796450000", now),
            None
        );
        for (said, secs) in [
            (
                "You've hit your usage limit. Try again in 2 hours 5 minutes.",
                7500.0,
            ),
            ("Rate limit reached. Please try again in 1m30s.", 90.0),
            (
                "You exceeded your current quota. Please retry in 29.9s.",
                29.9,
            ),
            ("429: try again in 47 min", 2820.0),
            ("try again in 6ms", 0.006),
        ] {
            let got = lifts_after(said, now).map(|d| d.as_secs_f64());
            assert!(
                got.is_some_and(|g| (g - secs).abs() < 1e-6),
                "{said}: {got:?}"
            );
        }
        assert_eq!(lifts_after("please try again later", now), None);
        // A time too far to be a plan's window, or a number too large for one: not believed
        // (and no panic).
        for absurd in [
            "Claude AI usage limit reached|99999999999999999999",
            "try again in 99999999999999999 hours",
            "retry in 99999999999999999999s",
            "try again in 8 days",
        ] {
            assert_eq!(lifts_after(absurd, now), None, "{absurd}");
        }
        assert_eq!(lifts_after("overloaded", now), None);
    }
}
