//! `[[schedule]]` and `[trigger]`: when runs start unattended (cron entries, and the signed
//! webhook), and with which options.

use std::time::Duration;

use super::agent::AgentKind;
use super::read::Section;
use super::SpecError;

/// The keys of a `[[schedule]]` entry.
const KEYS: &[&str] = &[
    "cron",
    "tag",
    "max_experiments",
    "time",
    "agent",
    "seed",
    "catch_up",
    "finalize",
    "pr",
    "squash",
];
/// The keys of `[trigger]`.
const TRIGGER_KEYS: &[&str] = &["secret_env"];

/// One `[[schedule]]` entry: when to start a run, and with which options.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScheduleSpec {
    /// A cron expression (five fields, or six with seconds), evaluated in UTC.
    pub cron: String,
    /// The run's tag is `<tag>-<YYYYMMDD-HHMM>` of the scheduled time (default tag: `scheduled`).
    pub tag: String,
    pub max_experiments: Option<u64>,
    pub time: Option<Duration>,
    pub agent: Option<AgentKind>,
    pub seed: Option<u64>,
    /// A start missed while hone was not running is run once at startup.
    pub catch_up: bool,
    /// After the run: build the review branch (`hone finalize`).
    pub finalize: bool,
    /// After the run: push it and open a pull request (`hone finalize --pr`).
    pub pr: bool,
    /// With finalize: one squashed commit.
    pub squash: bool,
    /// The entry's line in hone.toml.
    pub line: usize,
}

/// `[trigger]`: the webhook that starts runs (`POST /api/trigger`).
#[derive(Clone, Debug, PartialEq)]
pub struct TriggerSpec {
    /// The environment variable holding the shared HMAC secret.
    pub secret_env: String,
}

impl Default for TriggerSpec {
    fn default() -> TriggerSpec {
        TriggerSpec {
            secret_env: "HONE_WEBHOOK_SECRET".into(),
        }
    }
}

/// One `[[schedule]]` entry.
pub(super) fn parse(s: &Section) -> Result<ScheduleSpec, SpecError> {
    s.check_keys(KEYS)?;
    let cron = s.required(
        "cron",
        "a cron expression, e.g. cron = \"0 2 * * *\" (02:00 UTC every day)",
    )?;
    if let Err(e) = croner::Cron::new(&cron).with_seconds_optional().parse() {
        return Err(s.err("cron", format!("`{cron}` is not a cron expression: {e}")));
    }
    let tag = s.get_or("tag", "scheduled".to_string())?;
    // The tag gets `-YYYYMMDD-HHMM` appended; the whole must be a valid tag.
    if let Err(e) = crate::tag::check(&format!("{tag}-20260101-0000")) {
        return Err(s.err("tag", e));
    }
    let agent = match s.get::<String>("agent")? {
        None => None,
        Some(a) => Some(AgentKind::parse(&a).ok_or_else(|| {
            s.err(
                "agent",
                format!(
                    "unknown agent kind `{a}` (expected one of {})",
                    AgentKind::names().join(", ")
                ),
            )
        })?),
    };
    let max_experiments = s.get("max_experiments")?;
    if max_experiments == Some(0) {
        return Err(s.err("max_experiments", "must be more than zero"));
    }
    let time = s.get::<Duration>("time")?;
    if time.is_some_and(|d| d.is_zero()) {
        return Err(s.err("time", "must be more than zero"));
    }
    let pr = s.get_or("pr", false)?;
    let finalize = s.get::<bool>("finalize")?;
    if pr && finalize == Some(false) {
        return Err(s.err(
            "finalize",
            "pr = true opens a pull request from the finalized branch: drop finalize = false",
        ));
    }
    Ok(ScheduleSpec {
        cron,
        tag,
        max_experiments,
        time,
        agent,
        seed: s.get("seed")?,
        catch_up: s.get_or("catch_up", false)?,
        finalize: pr || finalize.unwrap_or(false),
        pr,
        squash: s.get_or("squash", false)?,
        line: s.line().unwrap_or(1),
    })
}

/// `[trigger]`.
pub(super) fn trigger(s: &Section) -> Result<TriggerSpec, SpecError> {
    s.check_keys(TRIGGER_KEYS)?;
    match s.get::<String>("secret_env")? {
        Some(v) if v.trim().is_empty() => Err(s.err("secret_env", "must not be empty")),
        Some(v) => Ok(TriggerSpec { secret_env: v }),
        None => Ok(TriggerSpec::default()),
    }
}
