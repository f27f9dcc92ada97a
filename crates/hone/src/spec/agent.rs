//! `[agent]`: the proposer (its kind, command or CLI preset, timeout and seed) and, for the
//! HTTP kinds, the LLM's settings, which `[review]` shares for an HTTP reviewer.

use std::time::Duration;

use super::read::{closest, keys, Section};
use super::units::duration_secs;
use super::SpecError;
use crate::presets::Preset;

/// The keys of `[agent]`.
pub(super) const KEYS: &[&str] = &keys::<17>(&[
    &[
        "kind",
        "extra_args",
        "command",
        "timeout",
        "seed",
        "edit_mode",
        "outage_wait",
        "outage_limit",
    ],
    LLM_KEYS,
]);

/// The keys of an HTTP model's connection (`[agent]` and `[review]`).
pub(super) const LLM_KEYS: &[&str] = &[
    "model",
    "base_url",
    "api_key_env",
    "temperature",
    "max_tokens",
    "request_timeout",
    "max_attempts",
    "price_in_per_mtok",
    "price_out_per_mtok",
];

/// The agent's timeout when `timeout` is not set.
pub const TIMEOUT_SECS: u64 = 1800;

/// What makes the candidates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentKind {
    /// The built-in optimizer over literal constants.
    Knobs,
    /// Any shell command run in the candidate's worktree with a prompt file.
    Command,
    /// An OpenAI-compatible chat-completions server.
    OpenAi,
    /// The Anthropic Messages API.
    Anthropic,
    /// An agent CLI preset (Claude Code, Codex, ...: one entry of [`crate::presets::PRESETS`]).
    Agent(Preset),
}

/// The kinds that are not agent CLI presets, by name.
const OWN_KINDS: [(&str, AgentKind); 4] = [
    ("knobs", AgentKind::Knobs),
    ("command", AgentKind::Command),
    ("openai", AgentKind::OpenAi),
    ("anthropic", AgentKind::Anthropic),
];

impl AgentKind {
    /// Every `[agent] kind`, in the order error messages list them.
    pub fn names() -> Vec<&'static str> {
        OWN_KINDS
            .iter()
            .map(|(n, _)| *n)
            .chain(Preset::all().map(Preset::name))
            .collect()
    }

    pub fn parse(s: &str) -> Option<AgentKind> {
        OWN_KINDS
            .iter()
            .find(|(n, _)| *n == s)
            .map(|(_, k)| *k)
            .or_else(|| Preset::named(s).map(AgentKind::Agent))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::Agent(p) => p.name(),
            own => OWN_KINDS
                .iter()
                .find(|(_, k)| *k == own)
                .map_or("", |(n, _)| *n),
        }
    }

    /// An agent CLI preset (hone runs the tool in the worktree).
    pub fn is_preset(self) -> bool {
        self.preset().is_some()
    }

    /// The agent CLI preset, if it is one.
    pub fn preset(self) -> Option<Preset> {
        match self {
            AgentKind::Agent(p) => Some(p),
            _ => None,
        }
    }

    /// An LLM over HTTP (hone builds the prompt and applies the answer).
    pub fn is_http(self) -> bool {
        matches!(self, AgentKind::OpenAi | AgentKind::Anthropic)
    }
}

impl serde::Serialize for AgentKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for AgentKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<AgentKind, D::Error> {
        let name = String::deserialize(d)?;
        AgentKind::parse(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown agent kind `{name}`")))
    }
}

/// `[agent] outage_wait` and `outage_limit` when not set.
const OUTAGE_WAIT: Duration = Duration::from_secs(30);
const OUTAGE_LIMIT: Duration = Duration::from_secs(2 * 3600);

fn is_outage_wait(d: &Duration) -> bool {
    *d == OUTAGE_WAIT
}

fn is_outage_limit(d: &Duration) -> bool {
    *d == OUTAGE_LIMIT
}

/// `[agent]`: the proposer.
#[derive(Clone, Debug, serde::Serialize)]
pub struct AgentSpec {
    pub kind: AgentKind,
    pub command: Option<String>,
    #[serde(with = "duration_secs")]
    pub timeout: Duration,
    /// `None`: each new run gets its own (the number of runs before it).
    pub seed: Option<u64>,
    /// HTTP kinds: the model, the server, where the key is, and how to sample.
    pub llm: Option<LlmSpec>,
    /// Agent CLI presets: the model to ask for (`--model`).
    pub model: Option<String>,
    /// Agent CLI presets: more arguments for the tool, appended to the preset's.
    pub extra_args: Vec<String>,
    /// HTTP kinds: the wait after a proposal found the model's server unavailable through
    /// every retry (doubled after each one, up to 10 minutes)...
    #[serde(with = "duration_secs", skip_serializing_if = "is_outage_wait")]
    pub outage_wait: Duration,
    /// ...and how long such an outage may last before the run stops (resumable). (Both left
    /// out of the stored JSON at their defaults, so that a run's stored spec reads as before.)
    #[serde(with = "duration_secs", skip_serializing_if = "is_outage_limit")]
    pub outage_limit: Duration,
}

/// `[agent]` settings of the HTTP kinds (`openai`, `anthropic`).
#[derive(Clone, Debug, serde::Serialize)]
pub struct LlmSpec {
    pub model: String,
    pub base_url: String,
    /// The environment variable holding the API key (its value is never stored or logged).
    pub api_key_env: String,
    pub temperature: Option<f64>,
    pub max_tokens: u64,
    #[serde(with = "duration_secs")]
    pub request_timeout: Duration,
    /// Attempts per call (429, 5xx and timeouts are retried with backoff).
    pub max_attempts: u64,
    /// US dollars per million input and output tokens (built-in defaults for common models).
    pub price_in_per_mtok: Option<f64>,
    pub price_out_per_mtok: Option<f64>,
    /// How the model writes its change (`edit_mode`).
    pub edit_mode: EditMode,
}

/// How an HTTP LLM proposer writes its change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EditMode {
    /// SEARCH/REPLACE blocks.
    Blocks,
    /// The apply_patch format (`*** Begin Patch`).
    Patch,
    /// Knob values as JSON `{changes, hypothesis}`.
    Knobs,
}

/// Built-in prices (USD per million input, output tokens) of common models, matched by prefix.
pub const PRICES: &[(&str, f64, f64)] = &[
    ("gpt-4o-mini", 0.15, 0.60),
    ("gpt-4o", 2.50, 10.00),
    ("gpt-4.1-nano", 0.10, 0.40),
    ("gpt-4.1-mini", 0.40, 1.60),
    ("gpt-4.1", 2.00, 8.00),
    ("o4-mini", 1.10, 4.40),
    ("o3", 2.00, 8.00),
    ("claude-3-5-haiku", 0.80, 4.00),
    ("claude-3-5-sonnet", 3.00, 15.00),
    ("claude-sonnet-4", 3.00, 15.00),
    ("claude-opus-4", 15.00, 75.00),
    ("deepseek-chat", 0.27, 1.10),
];

impl LlmSpec {
    /// (input, output) USD per million tokens, from the spec or the built-in table.
    pub fn prices(&self) -> Option<(f64, f64)> {
        match (self.price_in_per_mtok, self.price_out_per_mtok) {
            (Some(i), Some(o)) => Some((i, o)),
            _ => PRICES
                .iter()
                // The exact name, or a dated snapshot of it (`claude-sonnet-4-20250514`); never
                // a longer family name (`o3` must not price `o3-pro`).
                .find(|(m, _, _)| self.model == *m || self.model.starts_with(&format!("{m}-20")))
                .map(|(_, i, o)| (*i, *o)),
        }
    }
}

pub(super) fn parse(s: &Section) -> Result<AgentSpec, SpecError> {
    let kind = match s.get::<String>("kind")? {
        None => AgentKind::Knobs,
        Some(k) => AgentKind::parse(&k).ok_or_else(|| {
            let hint = closest(&k, &AgentKind::names())
                .map(|c| format!("; did you mean \"{c}\"?"))
                .unwrap_or_default();
            s.err(
                "kind",
                format!(
                    "unknown agent kind `{k}` (expected one of: {}){hint}",
                    AgentKind::names().join(", ")
                ),
            )
        })?,
    };
    let command = s.get("command")?;
    if kind == AgentKind::Command && command.is_none() {
        let line = s.key_line("kind").unwrap_or(1);
        return Err(s.err_at(
            line,
            "command",
            "kind = \"command\" needs `command`, e.g. command = \"my-agent {prompt_file}\"".into(),
        ));
    }
    let timeout = s.get_or("timeout", Duration::from_secs(TIMEOUT_SECS))?;
    let seed = s.get("seed")?;
    let extra_args = s.args("extra_args")?;
    let llm = if kind.is_http() {
        Some(llm(s, kind, true)?)
    } else {
        for key in ["model", "base_url", "api_key_env", "edit_mode"] {
            if kind.is_preset() && key == "model" {
                continue;
            }
            if s.has(key) {
                return Err(s.err(key, format!("only means something with kind = \"openai\" or \"anthropic\" (kind is \"{}\")", kind.as_str())));
            }
        }
        None
    };
    let model = match kind {
        k if k.is_preset() => s.get("model")?,
        _ => llm.as_ref().map(|l| l.model.clone()),
    };
    if !extra_args.is_empty() && !kind.is_preset() {
        return Err(s.err(
            "extra_args",
            "only means something for an agent CLI preset such as kind = \"claude\"",
        ));
    }
    Ok(AgentSpec {
        kind,
        command,
        timeout,
        seed,
        llm,
        model,
        extra_args,
        outage_wait: s.get_or("outage_wait", OUTAGE_WAIT)?,
        outage_limit: s.get_or("outage_limit", OUTAGE_LIMIT)?,
    })
}

/// The settings of an HTTP LLM (`[agent]` or `[review]` with kind = "openai" | "anthropic");
/// `edits`: it writes changes, so `edit_mode` applies.
pub(super) fn llm(s: &Section, kind: AgentKind, edits: bool) -> Result<LlmSpec, SpecError> {
    let model = s.required("model", "the model to ask, e.g. model = \"gpt-4.1-mini\"")?;
    let (default_url, default_key) = match kind {
        AgentKind::Anthropic => ("https://api.anthropic.com", "ANTHROPIC_API_KEY"),
        _ => ("https://api.openai.com/v1", "OPENAI_API_KEY"),
    };
    let edit_mode = if !edits {
        EditMode::Blocks
    } else {
        match s.get::<String>("edit_mode")?.as_deref() {
            None | Some("blocks") => EditMode::Blocks,
            Some("patch") => EditMode::Patch,
            Some("knobs") => EditMode::Knobs,
            Some(other) => {
                return Err(s.err(
                    "edit_mode",
                    format!(
                        "unknown edit mode `{other}` (expected \"blocks\", \"patch\" or \"knobs\")"
                    ),
                ))
            }
        }
    };
    let max_tokens = s.count("max_tokens")?.unwrap_or(4096);
    let max_attempts = s.get_or("max_attempts", 4u64)?.max(1);
    // A NaN or negative price would make every cost 0 or NaN, and a budget never reached.
    for key in ["temperature", "price_in_per_mtok", "price_out_per_mtok"] {
        s.non_negative(key)?;
    }
    Ok(LlmSpec {
        model,
        base_url: s
            .get_or("base_url", default_url.to_string())?
            .trim_end_matches('/')
            .to_string(),
        api_key_env: s.get_or("api_key_env", default_key.to_string())?,
        temperature: s.get("temperature")?,
        max_tokens,
        request_timeout: s.get_or("request_timeout", Duration::from_secs(120))?,
        max_attempts,
        price_in_per_mtok: s.get("price_in_per_mtok")?,
        price_out_per_mtok: s.get("price_out_per_mtok")?,
        edit_mode,
    })
}

impl LlmSpec {
    /// Whether `base_url` is on this machine or its private network (see [`local_server`]).
    pub fn on_local_server(&self) -> bool {
        local_server(&self.base_url)
    }
}

/// Whether `url` names a server on this machine or its private network (loopback, a private,
/// link-local or shared address, `localhost`, a name of one label or under `.local`,
/// `.internal`, `.lan`), where a server without a key is common; anything else is taken to be
/// a provider that wants one.
pub(crate) fn local_server(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.split(':').next().unwrap_or(""),
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    // A name of one label (`ollama`, a container's service name) resolves only on a local
    // network; `.local`, `.localhost`, `.internal` and `.lan` are local by convention.
    let local_name = !host.is_empty()
        && (!host.contains('.')
            || [".localhost", ".local", ".internal", ".lan", ".home.arpa"]
                .iter()
                .any(|s| host.ends_with(s)));
    if local_name && host.parse::<std::net::IpAddr>().is_err() {
        return true;
    }
    let v4_local = |a: std::net::Ipv4Addr| {
        let [a0, a1, ..] = a.octets();
        a.is_loopback()
            || a.is_private()
            || a.is_link_local()
            || a.is_unspecified()
            // Shared address space (carrier-grade NAT, Tailscale).
            || (a0 == 100 && (64..128).contains(&a1))
    };
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(a)) => v4_local(a),
        Ok(std::net::IpAddr::V6(a)) => {
            let first = a.segments()[0];
            a.is_loopback()
                || a.is_unspecified()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || a.to_ipv4_mapped().is_some_and(v4_local)
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod args_tests {
    use super::super::tests::{err, parse, GOOD};

    #[test]
    fn extra_args_are_a_list_with_one_argument_per_string() {
        let with = |args: &str| {
            GOOD.replace(
                "kind = \"knobs\"",
                &format!("kind = \"claude\"\nextra_args = {args}"),
            )
        };
        let s = parse(&with(
            "[\"--max-turns\", \"30\", \"--append-system-prompt\", \"be brief\"]",
        ))
        .unwrap();
        assert_eq!(s.agent.extra_args.len(), 4);
        let e = err(&with("\"--max-turns 30\""));
        assert_eq!(e.key, "agent.extra_args", "{e}");
        assert!(
            e.message
                .contains("one per string: [\"--max-turns\", \"30\"]"),
            "{e}"
        );
        let e = err(&with("[\"--verbose\", \"--max-turns 30\"]"));
        assert!(e.message.contains("write its words apart"), "{e}");
        let line = 1 + with("[]")
            .lines()
            .position(|l| l.starts_with("extra_args"))
            .unwrap();
        assert!(
            e.to_string().contains(&format!(":{line}:")),
            "the line: {e}"
        );
        // An option with its value after `=` is one argument, as written.
        assert!(parse(&with("[\"--model=x y\"]")).is_ok());
    }
}

#[cfg(test)]
mod server_tests {
    use super::local_server;

    #[test]
    fn servers_on_this_machine_or_its_network_are_local_and_providers_are_not() {
        for url in [
            "http://127.0.0.1:8089/v1",
            "http://localhost:11434/v1",
            "http://[::1]:8000/v1",
            "http://10.0.0.5:8000/v1",
            "http://192.168.1.20/v1",
            "http://gpu-box.local:8000/v1",
            "http://user:pw@172.16.0.3:9000",
            "http://ollama:11434/v1",
            "http://host.docker.internal:8000/v1",
            "http://100.101.102.103:8000/v1",
            "http://[fe80::1]:8000/v1",
            "http://[::ffff:192.168.1.2]:8000/v1",
        ] {
            assert!(local_server(url), "{url}");
        }
        for url in [
            "https://api.openai.com/v1",
            "https://api.anthropic.com",
            "https://openrouter.ai/api/v1",
            "http://8.8.8.8/v1",
            "https://127.0.0.1.evil.example/v1",
            "https://localhost.evil.example",
            "http://100.200.0.1/v1",
            "http://[::ffff:8.8.8.8]/v1",
        ] {
            assert!(!local_server(url), "{url}");
        }
    }
}
