//! `[[notify]]`: webhooks told about keeps, the end of a run, failures and budgets (not
//! stored with the run: a webhook URL is a secret).

use std::time::Duration;

use super::read::{closest, Section};
use super::SpecError;

/// The keys of a `[[notify]]` entry.
const KEYS: &[&str] = &[
    "url", "url_env", "on", "format", "retries", "backoff", "timeout",
];

/// What a notification is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NotifyOn {
    /// A candidate was kept.
    Keep,
    /// The run finished (a stop condition other than a budget held).
    Finish,
    /// The run stopped on a failure (too many failed experiments, a changed pinned input, an
    /// error of hone itself).
    Failure,
    /// The run stopped on its cost or token budget.
    Budget,
}

impl NotifyOn {
    pub const NAMES: &'static [&'static str] = &["keep", "finish", "failure", "budget"];
    pub const ALL: &'static [NotifyOn] = &[
        NotifyOn::Keep,
        NotifyOn::Finish,
        NotifyOn::Failure,
        NotifyOn::Budget,
    ];
    pub fn parse(s: &str) -> Option<NotifyOn> {
        NotifyOn::ALL.iter().copied().find(|n| n.as_str() == s)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            NotifyOn::Keep => "keep",
            NotifyOn::Finish => "finish",
            NotifyOn::Failure => "failure",
            NotifyOn::Budget => "budget",
        }
    }
}

/// The body a notification endpoint gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotifyFormat {
    /// `{"text": "..."}`, as Slack's (and Mattermost's, Discord's /slack) incoming webhooks take.
    Slack,
    /// hone's own object: `{"event", "run", "text", ...}`.
    Json,
}

/// One `[[notify]]` entry.
#[derive(Clone, Debug)]
pub struct NotifySpec {
    /// Where to POST (from `url`, or read from the variable `url_env` names when hone starts).
    pub url: NotifyUrl,
    pub on: Vec<NotifyOn>,
    pub format: NotifyFormat,
    /// Attempts after the first one.
    pub retries: u32,
    /// The wait before the first retry; it doubles after each.
    pub backoff: Duration,
    /// Per attempt.
    pub timeout: Duration,
    /// The entry's line in hone.toml (for messages).
    pub line: usize,
}

/// Where a notification goes.
#[derive(Clone, Debug, PartialEq)]
pub enum NotifyUrl {
    Literal(String),
    /// An environment variable holding the URL (a Slack webhook URL is a secret).
    Env(String),
}

impl NotifyUrl {
    /// The URL, or why there is none.
    pub fn resolve(&self) -> Result<String, String> {
        match self {
            NotifyUrl::Literal(u) => Ok(u.clone()),
            NotifyUrl::Env(v) => match std::env::var(v) {
                Ok(u) if u.starts_with("http://") || u.starts_with("https://") => Ok(u),
                Ok(_) => Err(format!("${v} does not hold an http(s) URL")),
                Err(_) => Err(format!("${v} is not set")),
            },
        }
    }
}

/// One `[[notify]]` entry.
pub(super) fn parse(s: &Section) -> Result<NotifySpec, SpecError> {
    s.check_keys(KEYS)?;
    let url = url(s)?;
    let on = match s.item("on") {
        None => NotifyOn::ALL.to_vec(),
        Some(_) => events(s)?,
    };
    let format = match s.get::<String>("format")?.as_deref() {
        None | Some("json") => NotifyFormat::Json,
        Some("slack") => NotifyFormat::Slack,
        Some(other) => {
            return Err(s.err(
                "format",
                format!("unknown format `{other}` (expected \"slack\" or \"json\")"),
            ))
        }
    };
    let retries = s.get_or("retries", 3u64)?;
    if retries > 10 {
        return Err(s.err("retries", "at most 10"));
    }
    let timeout = s.get_or("timeout", Duration::from_secs(10))?;
    if timeout.is_zero() {
        return Err(s.err("timeout", "must be more than zero"));
    }
    Ok(NotifySpec {
        url,
        on,
        format,
        retries: retries as u32,
        backoff: s.get_or("backoff", Duration::from_secs(1))?,
        timeout,
        line: s.line().unwrap_or(1),
    })
}

/// `url` or `url_env`, exactly one.
fn url(s: &Section) -> Result<NotifyUrl, SpecError> {
    match (s.get::<String>("url")?, s.get::<String>("url_env")?) {
        (Some(_), Some(_)) => Err(s.err("url_env", "set `url` or `url_env`, not both")),
        (Some(u), None) => {
            if !(u.starts_with("http://") || u.starts_with("https://")) {
                return Err(s.err("url", format!("`{u}` is not an http(s) URL")));
            }
            Ok(NotifyUrl::Literal(u))
        }
        (None, Some(v)) if v.trim().is_empty() => Err(s.err("url_env", "must not be empty")),
        (None, Some(v)) => Ok(NotifyUrl::Env(v)),
        (None, None) => Err(s.err_at(
            s.line().unwrap_or(1),
            "url",
            "required: where to POST, e.g. url = \"https://hooks.slack.com/services/...\", or url_env = \"SLACK_WEBHOOK_URL\" to keep it out of the file".into(),
        )),
    }
}

/// `on`: at least one event, each named once.
fn events(s: &Section) -> Result<Vec<NotifyOn>, SpecError> {
    let mut on = Vec::new();
    for name in s.get_or_default::<Vec<String>>("on")? {
        match NotifyOn::parse(&name) {
            Some(n) if !on.contains(&n) => on.push(n),
            Some(_) => {}
            None => {
                let hint = closest(&name, NotifyOn::NAMES)
                    .map(|c| format!("; did you mean `{c}`?"))
                    .unwrap_or_default();
                return Err(s.err(
                    "on",
                    format!(
                        "unknown event `{name}` (expected {}){hint}",
                        NotifyOn::NAMES.join(", ")
                    ),
                ));
            }
        }
    }
    if on.is_empty() {
        return Err(s.err(
            "on",
            format!("must name at least one of {}", NotifyOn::NAMES.join(", ")),
        ));
    }
    Ok(on)
}
