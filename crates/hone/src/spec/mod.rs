//! The loop's contract: the `hone.toml` schema, its defaults, and validation whose errors name
//! the file, the line and the key (and suggest the closest valid key).
//!
//! Parsing walks a span-preserving TOML document by hand instead of using serde derive, so that
//! every error can point at the exact line of the offending key or value.
//!
//! Layout: `read` locates keys and reads typed values (one generic `Section::get`); each
//! section has its own module owning its keys, struct, defaults, parsing and tests (`loop_`,
//! `verify`, `agent`, `stop`, `sandbox`, `review`, `exec` with `[store]`, `outer`, `notify`,
//! `schedule` with `[trigger]`); `rules` holds the contradictions between sections; `parse`
//! here only finds the sections, calls their parsers in order, then the rules.

mod agent;
mod exec;
mod loop_;
mod notify;
mod outer;
mod overlap;
mod read;
mod review;
mod rules;
mod sandbox;
mod schedule;
mod stop;
mod text;
mod units;
mod verify;

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;

use std::fmt;
use std::path::{Path, PathBuf};

use toml_edit::Table;

pub use agent::{AgentKind, AgentSpec, EditMode, LlmSpec, PRICES};
pub use exec::{Backend, ExecSpec, MAX_WORKERS};
pub use loop_::LoopSpec;
pub use notify::{NotifyFormat, NotifyOn, NotifySpec, NotifyUrl};
pub use outer::{OuterSpec, BUILTIN_MECHANISMS};
pub use read::closest;
pub use review::ReviewSpec;
pub use sandbox::SandboxSpec;
pub use schedule::{ScheduleSpec, TriggerSpec};
pub use stop::StopSpec;
pub use text::MAX_SPEC_BYTES;
pub use units::{format_duration, format_duration_spaced, parse_duration, parse_size};
pub use verify::{Direction, HoldoutSpec, ProgressSpec, VerifySpec};

use read::{Doc, Section};

/// A validated `hone.toml`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Spec {
    #[serde(rename = "loop")]
    pub loop_: LoopSpec,
    pub verify: VerifySpec,
    pub agent: AgentSpec,
    pub stop: StopSpec,
    pub sandbox: SandboxSpec,
    pub review: ReviewSpec,
    pub exec: ExecSpec,
    pub outer: OuterSpec,
    /// `[[notify]]` (not stored with the run: a webhook URL is a secret).
    #[serde(skip)]
    pub notify: Vec<NotifySpec>,
    /// `[[schedule]]`.
    #[serde(skip)]
    pub schedule: Vec<ScheduleSpec>,
    /// `[trigger]`.
    #[serde(skip)]
    pub trigger: TriggerSpec,
}

/// A problem in a spec file, located at a line.
#[derive(Clone, Debug, PartialEq)]
pub struct SpecError {
    pub file: PathBuf,
    /// 1-based line (0 when the file could not be read at all).
    pub line: usize,
    /// Dotted key such as `verify.timeout` (empty when the error is not about one key).
    pub key: String,
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = self.file.display();
        match (self.line, self.key.is_empty()) {
            (0, _) => write!(f, "{file}: {}", self.message),
            (l, true) => write!(f, "{file}:{l}: {}", self.message),
            (l, false) => write!(f, "{file}:{l}: `{}`: {}", self.key, self.message),
        }
    }
}

impl std::error::Error for SpecError {}

/// The top-level tables of hone.toml.
const SECTIONS: &[&str] = &[
    "loop", "verify", "agent", "stop", "sandbox", "review", "outer", "exec", "store", "notify",
    "schedule", "trigger",
];

/// Sections whose keys, written at the top level, are sent there.
const HOMES: &[(&str, &[&str])] = &[
    ("loop", loop_::KEYS),
    ("verify", verify::KEYS),
    ("agent", agent::KEYS),
    ("stop", stop::KEYS),
    ("outer", outer::KEYS),
];

/// The single-table sections of one document, found and their keys checked.
struct Sections<'a> {
    loop_: Section<'a>,
    verify: Section<'a>,
    agent: Section<'a>,
    stop: Section<'a>,
    sandbox: Section<'a>,
    review: Section<'a>,
    exec: Section<'a>,
    store: Section<'a>,
    outer: Section<'a>,
}

impl<'a> Sections<'a> {
    /// Each section must be a table; then every key of each must be known (in this order, so
    /// that the first error reported stays the same).
    fn find(d: &'a Doc<'a>, root: &'a Table) -> Result<Sections<'a>, SpecError> {
        let loop_ = d.section(root, "loop")?;
        let verify = d.section(root, "verify")?;
        let agent = d.section(root, "agent")?;
        let stop = d.section(root, "stop")?;
        let sandbox = d.section(root, "sandbox")?;
        let review = d.section(root, "review")?;
        let exec = d.section(root, "exec")?;
        exec.check_keys(exec::KEYS)?;
        let store = d.section(root, "store")?;
        store.check_keys(exec::STORE_KEYS)?;
        let outer = d.section(root, "outer")?;
        outer.check_keys(outer::KEYS)?;
        review.check_keys(review::KEYS)?;
        sandbox.check_keys(sandbox::KEYS)?;
        loop_.check_keys(loop_::KEYS)?;
        verify.check_keys(verify::KEYS)?;
        agent.check_keys(agent::KEYS)?;
        stop.check_keys(stop::KEYS)?;
        Ok(Sections {
            loop_,
            verify,
            agent,
            stop,
            sandbox,
            review,
            exec,
            store,
            outer,
        })
    }
}

impl Spec {
    /// The first HTTP LLM a run asks whose server is outside this machine's network and whose
    /// key's variable is unset or empty (every request would be refused): the variable and
    /// the server.
    pub fn missing_api_key(&self) -> Option<(String, String)> {
        self.llms_in_use()
            .find(|l| {
                !std::env::var_os(&l.api_key_env).is_some_and(|k| !k.is_empty())
                    && !l.on_local_server()
            })
            .map(|l| (l.api_key_env.clone(), l.base_url.clone()))
    }

    /// The HTTP LLMs a run asks: the proposer's (unless its kind, `--agent` included, is
    /// another) and the reviewer's.
    pub fn llms_in_use(&self) -> impl Iterator<Item = &LlmSpec> {
        let agent = self.agent.llm.iter().filter(|_| self.agent.kind.is_http());
        agent.chain(&self.review.llm)
    }

    /// The noise settings of `[verify]`.
    pub fn noise_policy(&self) -> crate::verify::noise::NoisePolicy {
        self.verify.noise_policy()
    }

    /// Reads and validates a spec file.
    pub fn load(path: &Path) -> Result<Spec, SpecError> {
        let text = text::read(path)?;
        let spec = Spec::parse(path, &text)?;
        spec.outer.check_scripts(path)?;
        Ok(spec)
    }

    /// Validates spec text; `file` is only used in error messages.
    pub fn parse(file: &Path, text: &str) -> Result<Spec, SpecError> {
        let d = Doc::new(file, text);
        let doc = d.parse_toml()?;
        let root = doc.as_table();
        d.check_keys(root, "", SECTIONS, Some(HOMES))?;
        let s = Sections::find(&d, root)?;
        let spec = Spec {
            loop_: loop_::parse(&s.loop_)?,
            verify: verify::parse(&s.verify)?,
            agent: agent::parse(&s.agent)?,
            stop: stop::parse(&s.stop)?,
            sandbox: sandbox::parse(&s.sandbox)?,
            review: review::parse(&s.review)?,
            exec: exec::parse(&s.exec, &s.store)?,
            outer: outer::parse(&s.outer)?,
            notify: d
                .array_of_tables(root, "notify")?
                .iter()
                .map(notify::parse)
                .collect::<Result<_, _>>()?,
            schedule: d
                .array_of_tables(root, "schedule")?
                .iter()
                .map(schedule::parse)
                .collect::<Result<_, _>>()?,
            trigger: schedule::trigger(&d.section(root, "trigger")?)?,
        };
        rules::check(&spec, &s)?;
        Ok(spec)
    }

    /// The program file to read on every experiment, if any.
    pub fn program_path(&self) -> &str {
        self.loop_.program_path()
    }
}
