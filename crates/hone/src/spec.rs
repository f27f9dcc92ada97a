//! The loop's contract: the `hone.toml` schema, its defaults, and validation whose errors name
//! the file, the line and the key (and suggest the closest valid key).
//!
//! Parsing walks a span-preserving TOML document by hand instead of using serde derive, so that
//! every error can point at the exact line of the offending key or value.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml_edit::{Document, Item, Table, Value};

/// Which way the objective should go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Minimize,
    Maximize,
}

impl Direction {
    /// True when `a` is better than `b` in this direction (ties are not better).
    pub fn better(self, a: f64, b: f64) -> bool {
        match self {
            Direction::Minimize => a < b,
            Direction::Maximize => a > b,
        }
    }

    /// How much `candidate` improves on `best` (positive = better), whatever the direction.
    pub fn improvement(self, candidate: f64, best: f64) -> f64 {
        match self {
            Direction::Minimize => best - candidate,
            Direction::Maximize => candidate - best,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Minimize => "minimize",
            Direction::Maximize => "maximize",
        }
    }
}

/// What makes the candidates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentKind {
    /// The built-in optimizer over literal constants.
    Knobs,
    /// Any shell command run in the candidate's worktree with a prompt file.
    Command,
    /// An OpenAI-compatible chat-completions server.
    #[serde(rename = "openai")]
    OpenAi,
    /// The Anthropic Messages API.
    Anthropic,
    /// Claude Code in headless mode (`claude -p`).
    Claude,
    /// OpenAI's Codex CLI (`codex exec --json`).
    Codex,
    /// aider (`aider --message-file`).
    Aider,
    /// Google's Gemini CLI (`gemini -p --output-format json`).
    Gemini,
    /// opencode (`opencode run --format json`).
    #[serde(rename = "opencode")]
    OpenCode,
}

impl AgentKind {
    pub const NAMES: &'static [&'static str] = &[
        "knobs",
        "command",
        "openai",
        "anthropic",
        "claude",
        "codex",
        "aider",
        "gemini",
        "opencode",
    ];

    pub fn parse(s: &str) -> Option<AgentKind> {
        match s {
            "knobs" => Some(AgentKind::Knobs),
            "command" => Some(AgentKind::Command),
            "openai" => Some(AgentKind::OpenAi),
            "anthropic" => Some(AgentKind::Anthropic),
            "claude" => Some(AgentKind::Claude),
            "codex" => Some(AgentKind::Codex),
            "aider" => Some(AgentKind::Aider),
            "gemini" => Some(AgentKind::Gemini),
            "opencode" => Some(AgentKind::OpenCode),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::Knobs => "knobs",
            AgentKind::Command => "command",
            AgentKind::OpenAi => "openai",
            AgentKind::Anthropic => "anthropic",
            AgentKind::Claude => "claude",
            AgentKind::Codex => "codex",
            AgentKind::Aider => "aider",
            AgentKind::Gemini => "gemini",
            AgentKind::OpenCode => "opencode",
        }
    }

    /// An agent CLI preset (hone runs the tool in the worktree).
    pub fn is_preset(self) -> bool {
        matches!(
            self,
            AgentKind::Claude
                | AgentKind::Codex
                | AgentKind::Aider
                | AgentKind::Gemini
                | AgentKind::OpenCode
        )
    }

    /// An LLM over HTTP (hone builds the prompt and applies the answer).
    pub fn is_http(self) -> bool {
        matches!(self, AgentKind::OpenAi | AgentKind::Anthropic)
    }
}

/// `[loop]`: what the proposer may touch and what it must not.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LoopSpec {
    pub program: Option<String>,
    /// A file in the worktree where an agent may append learnings; hone keeps it between
    /// experiments and shows it in every prompt.
    pub notes: String,
    pub skills: Vec<String>,
    pub editable: Vec<String>,
    pub protected: Vec<String>,
    pub pinned: Vec<String>,
}

/// `[verify]`: the user's command and how its output is judged.
#[derive(Clone, Debug, serde::Serialize)]
pub struct VerifySpec {
    pub command: String,
    #[serde(with = "duration_secs")]
    pub timeout: Duration,
    #[serde(with = "duration_secs")]
    pub kill_grace: Duration,
    pub metric: String,
    pub direction: Direction,
    pub min_delta: f64,
    pub constraints: Vec<String>,
    pub metric_regex: Option<String>,
    pub max_log_bytes: u64,
    pub env: Vec<(String, String)>,
    /// Runs of the unmodified project, to measure the noise.
    pub baseline_repeats: u64,
    /// The keep threshold is `max(min_delta, noise_k × σ)`.
    pub noise_k: f64,
    /// Extra runs of a candidate that passes on its first run; the mean must still pass.
    pub confirm: u64,
    /// Re-measure the champion after every this many keeps.
    pub retest_every: Option<u64>,
    /// An environment variable set to the repeat's index (0, 1, ...) on every run.
    pub seed_env: Option<String>,
    /// Inside the noise band, keep a candidate that deletes net lines.
    pub prefer_simpler: bool,
    /// The sealed second stage: when set, the objective is read only from its output.
    pub evaluate: Option<String>,
    /// With `evaluate`: the files the first stage produces for it (globs); nothing else it
    /// leaves survives into the evaluation.
    pub outputs: Vec<String>,
    /// The sealed holdout, measured on the baseline and every keep, never shown to agents.
    pub holdout: Option<HoldoutSpec>,
    /// Revert a keep that worsens the holdout by more than its `min_delta`.
    pub holdout_gate: bool,
}

/// `[verify.holdout]`: a second measurement on data the search never sees.
#[derive(Clone, Debug, serde::Serialize)]
pub struct HoldoutSpec {
    pub command: String,
    /// Default: the search metric's name.
    pub metric: String,
    #[serde(with = "duration_secs")]
    pub timeout: Duration,
    pub min_delta: f64,
    /// Paths (absolute or relative to the repository) that agents and verifiers must not read;
    /// enforced under `[sandbox] kind = "bwrap"`.
    pub hide: Vec<String>,
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

/// `[stop]`: when the loop ends.
#[derive(Clone, Debug, serde::Serialize)]
pub struct StopSpec {
    pub max_experiments: u64,
    #[serde(with = "opt_duration_secs")]
    pub max_time: Option<Duration>,
    pub patience: Option<u64>,
    pub target: Option<f64>,
    pub max_consecutive_failures: u64,
    pub max_cost_usd: Option<f64>,
    /// Tokens spent by LLM proposers, in and out, over the whole run.
    pub max_tokens: Option<u64>,
}

/// `[sandbox]`: resource limits for the agent's and the verifier's processes.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct SandboxSpec {
    /// Run agent and verifier processes under bubblewrap.
    pub bwrap: bool,
    /// With bwrap: may the verifier reach the network?
    pub network: bool,
    /// With bwrap: stop when bubblewrap cannot run here (else warn and go on without it).
    pub required: bool,
    pub memory_bytes: Option<u64>,
    pub cpu_seconds: Option<u64>,
    pub max_output_bytes: Option<u64>,
    pub max_processes: Option<u64>,
}

impl SandboxSpec {
    /// The limits for the process runner.
    pub fn limits(&self) -> crate::exec::Limits {
        crate::exec::Limits {
            memory_bytes: self.memory_bytes,
            cpu_seconds: self.cpu_seconds,
            file_bytes: self.max_output_bytes,
            processes: self.max_processes,
        }
    }
}

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

/// Where verifications run (`[exec]`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub enum Backend {
    /// Child processes of hone on this machine.
    #[default]
    Local,
    /// One SLURM batch job per verification.
    Slurm,
    /// `hone worker` processes on any host, through the PostgreSQL store's queue.
    Workers,
}

/// `[exec]`: where verifications run.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ExecSpec {
    pub backend: Backend,
    /// With SLURM: a directory the compute nodes see (worktrees and job files live there).
    pub shared_dir: Option<PathBuf>,
    #[serde(skip)]
    pub slurm: crate::exec::slurm::SlurmConfig,
    /// With workers: the git remote (URL or path) the workers fetch candidates from.
    pub remote: Option<String>,
    /// With workers: how long a worker's claim lasts without a heartbeat.
    #[serde(with = "duration_secs")]
    pub lease: Duration,
    /// `[store] url`: the PostgreSQL database that holds the records (shared with workers and
    /// other hosts); `None`: `.hone/hone.db`.
    #[serde(skip)]
    pub store_url: Option<String>,
    /// How many experiments are verified at once on this machine (1: one after another).
    pub workers: usize,
    /// `slots`: each verification slot's own environment (one per worker at least), for
    /// example `{ CUDA_VISIBLE_DEVICES = "0" }`. Empty: the slots share hone's environment.
    pub slots: Vec<Vec<(String, String)>>,
    /// The line of `slots` in hone.toml (for errors about it found later), else of `[exec]`.
    #[serde(skip)]
    pub slots_line: usize,
    /// `[store] repo`: the key of this repository's runs in that database (default: see
    /// `engine::repo_key`).
    #[serde(skip)]
    pub store_repo: Option<String>,
}

/// Most experiments one `hone run` verifies at once.
pub const MAX_WORKERS: usize = 256;

impl ExecSpec {
    /// Checks `workers` (from hone.toml or `--workers`) against `slots`; the message says
    /// what to change. Every backend runs that many verifications at once (local process
    /// groups, SLURM jobs, or jobs for remote workers).
    pub fn check_workers(&self, workers: usize) -> Result<(), String> {
        if workers == 0 || workers > MAX_WORKERS {
            return Err(format!("workers must be between 1 and {MAX_WORKERS}"));
        }
        if !self.slots.is_empty() && self.slots.len() < workers {
            return Err(format!(
                "{workers} workers but only {} slots (hone.toml line {}): give every worker a slot, or remove `slots`",
                self.slots.len(),
                self.slots_line
            ));
        }
        Ok(())
    }
}

/// `[outer]`: the outer loop (see `crate::meta`). Absent: no mechanism runs and the inner
/// loop behaves exactly as without it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct OuterSpec {
    /// Built-in mechanisms to enable, in the order their hooks run.
    pub mechanisms: Vec<String>,
    /// Revise the Level 1.5 search strategy every this many experiments.
    pub strategy_every: Option<u64>,
    /// The strategy freezes at most this many knobs at a time.
    pub max_frozen: usize,
    /// Experiments per segment (`on_segment_end`, the portfolio's decisions).
    pub segment: u64,
    /// Offline Level 2: turn mechanisms on and off by credit assignment every segment.
    pub portfolio: bool,
    /// Experiments a mechanism may run without any effect before it is reported inert; also
    /// the probation window of a Level 2 script mechanism.
    pub probation: u64,
    /// Level 2: research a new script mechanism every this many experiments (needs an
    /// `openai` or `anthropic` agent).
    pub research_every: Option<u64>,
    /// Level 2: Rhai script mechanisms to load (paths relative to the repository).
    pub scripts: Vec<String>,
    /// The line of each entry of `scripts` in hone.toml (for errors found after parsing).
    #[serde(skip)]
    pub script_lines: Vec<usize>,
}

impl Default for OuterSpec {
    fn default() -> Self {
        OuterSpec {
            mechanisms: Vec::new(),
            strategy_every: None,
            max_frozen: 2,
            segment: 10,
            portfolio: false,
            probation: 10,
            research_every: None,
            scripts: Vec::new(),
            script_lines: Vec::new(),
        }
    }
}

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

/// One `[[schedule]]` entry: when to start a run, and with which options.
#[derive(Clone, Debug, PartialEq)]
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

/// `[review]`: the gate between a candidate and any compute: static rules, then optionally a
/// reviewer command that approves or rejects.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ReviewSpec {
    /// Run with the review prompt (`{prompt_file}`, `HONE_REVIEW_PROMPT`); its last line must
    /// start with `APPROVE` or `REJECT` (a reason may follow).
    pub command: Option<String>,
    /// `kind = "openai" | "anthropic"`: an LLM over HTTP reviews instead of a command.
    pub kind: Option<AgentKind>,
    /// The HTTP reviewer's model, server, key and sampling (like `[agent]`).
    pub llm: Option<LlmSpec>,
    /// A file of instructions for the reviewer (read from the checkout each time).
    pub instructions: Option<String>,
    /// Reject diffs with more changed lines than this.
    pub max_diff_lines: Option<u64>,
    /// Reject a candidate whose added lines match any of these regexes.
    pub forbid: Vec<String>,
    #[serde(with = "duration_secs")]
    pub timeout: Duration,
}

/// Defaults, in one place, so the README reference and the code agree.
pub mod defaults {
    pub const VERIFY_TIMEOUT_SECS: u64 = 600;
    pub const KILL_GRACE_SECS: u64 = 5;
    pub const MAX_LOG_BYTES: u64 = 1_000_000;
    pub const AGENT_TIMEOUT_SECS: u64 = 1800;
    pub const MAX_EXPERIMENTS: u64 = 100;
    pub const MAX_CONSECUTIVE_FAILURES: u64 = 10;
    pub const PROGRAM: &str = "program.md";
    pub const NOISE_K: f64 = 2.0;
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

const SECTIONS: &[&str] = &[
    "loop", "verify", "agent", "stop", "sandbox", "review", "outer", "exec", "store", "notify",
    "schedule", "trigger",
];
const STORE_KEYS: &[&str] = &["url", "repo"];
const OUTER_KEYS: &[&str] = &[
    "mechanisms",
    "strategy_every",
    "max_frozen",
    "segment",
    "portfolio",
    "probation",
    "research_every",
    "scripts",
];
const EXEC_KEYS: &[&str] = &[
    "backend",
    "shared_dir",
    "partition",
    "gres",
    "cpus",
    "mem",
    "time",
    "extra_args",
    "remote",
    "lease",
    "workers",
    "slots",
];
const NOTIFY_KEYS: &[&str] = &[
    "url", "url_env", "on", "format", "retries", "backoff", "timeout",
];
const SCHEDULE_KEYS: &[&str] = &[
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
const TRIGGER_KEYS: &[&str] = &["secret_env"];
const REVIEW_KEYS: &[&str] = &[
    "kind",
    "model",
    "base_url",
    "api_key_env",
    "temperature",
    "max_tokens",
    "request_timeout",
    "max_attempts",
    "price_in_per_mtok",
    "price_out_per_mtok",
    "command",
    "instructions",
    "max_diff_lines",
    "forbid",
    "timeout",
];
const SANDBOX_KEYS: &[&str] = &[
    "kind",
    "memory",
    "cpu_time",
    "max_output",
    "max_processes",
    "network",
    "required",
];
const LOOP_KEYS: &[&str] = &[
    "program",
    "skills",
    "editable",
    "protected",
    "pinned",
    "notes",
];
const VERIFY_KEYS: &[&str] = &[
    "command",
    "timeout",
    "kill_grace",
    "metric",
    "direction",
    "min_delta",
    "constraints",
    "metric_regex",
    "max_log_bytes",
    "env",
    "baseline_repeats",
    "noise_k",
    "confirm",
    "retest_every",
    "seed_env",
    "prefer_simpler",
    "evaluate",
    "outputs",
    "holdout",
    "holdout_gate",
];
const HOLDOUT_KEYS: &[&str] = &["command", "metric", "timeout", "min_delta", "hide"];
const AGENT_KEYS: &[&str] = &[
    "kind",
    "extra_args",
    "command",
    "timeout",
    "seed",
    "model",
    "base_url",
    "api_key_env",
    "temperature",
    "max_tokens",
    "request_timeout",
    "max_attempts",
    "edit_mode",
    "price_in_per_mtok",
    "price_out_per_mtok",
];
const STOP_KEYS: &[&str] = &[
    "max_tokens",
    "max_experiments",
    "max_time",
    "patience",
    "target",
    "max_consecutive_failures",
    "max_cost_usd",
];

impl Spec {
    /// The noise settings of `[verify]`.
    pub fn noise_policy(&self) -> crate::verify::noise::NoisePolicy {
        crate::verify::noise::NoisePolicy {
            direction: self.verify.direction,
            min_delta: self.verify.min_delta,
            noise_k: self.verify.noise_k,
            confirm: self.verify.confirm,
            prefer_simpler: self.verify.prefer_simpler,
        }
    }

    /// Reads and validates a spec file.
    pub fn load(path: &Path) -> Result<Spec, SpecError> {
        let text = std::fs::read_to_string(path).map_err(|e| SpecError {
            file: path.to_path_buf(),
            line: 0,
            key: String::new(),
            message: if e.kind() == std::io::ErrorKind::NotFound {
                "not found; run `hone init` to write one".to_string()
            } else {
                format!("cannot read: {e}")
            },
        })?;
        let spec = Spec::parse(path, &text)?;
        spec.check_scripts(path)?;
        Ok(spec)
    }

    /// `[outer] scripts` must exist (relative to the directory of hone.toml, the repository
    /// root in the usual layout) and compile in the sandbox.
    fn check_scripts(&self, path: &Path) -> Result<(), SpecError> {
        let dir = path.parent().unwrap_or(Path::new("."));
        for (i, script) in self.outer.scripts.iter().enumerate() {
            let problem = match std::fs::read_to_string(dir.join(script)) {
                Err(e) => format!("cannot read `{script}`: {e}"),
                Ok(source) => match crate::meta::script::Script::compile(
                    &source,
                    crate::meta::script::Limits::default(),
                ) {
                    Ok(_) => continue,
                    Err(e) => format!("`{script}` does not compile: {e}"),
                },
            };
            return Err(SpecError {
                file: path.to_path_buf(),
                line: self.outer.script_lines.get(i).copied().unwrap_or(1),
                key: "outer.scripts".into(),
                message: problem,
            });
        }
        Ok(())
    }

    /// Validates spec text; `file` is only used in error messages.
    pub fn parse(file: &Path, text: &str) -> Result<Spec, SpecError> {
        let p = Parser {
            file,
            text,
            line_starts: line_starts(text),
        };
        let doc = Document::parse(text).map_err(|e| {
            let line = e.span().map(|s| p.line_of(s.start)).unwrap_or(1);
            let source = text
                .lines()
                .nth(line.saturating_sub(1))
                .unwrap_or("")
                .trim();
            let msg = format!("{} (in `{source}`)", e.message().trim());
            p.err_at_line(line, "", format!("invalid TOML: {msg}"))
        })?;
        p.check_keys(doc.as_table(), "", SECTIONS, true)?;
        let lp = p.section(doc.as_table(), "loop")?;
        let vf = p.section(doc.as_table(), "verify")?;
        let ag = p.section(doc.as_table(), "agent")?;
        let st = p.section(doc.as_table(), "stop")?;
        let sb = p.section(doc.as_table(), "sandbox")?;
        let rv = p.section(doc.as_table(), "review")?;
        let ex = p.section(doc.as_table(), "exec")?;
        if let Some(t) = ex {
            p.check_keys(t, "exec", EXEC_KEYS, false)?;
        }
        let so = p.section(doc.as_table(), "store")?;
        if let Some(t) = so {
            p.check_keys(t, "store", STORE_KEYS, false)?;
        }
        let ou = p.section(doc.as_table(), "outer")?;
        if let Some(t) = ou {
            p.check_keys(t, "outer", OUTER_KEYS, false)?;
        }
        if let Some(t) = rv {
            p.check_keys(t, "review", REVIEW_KEYS, false)?;
        }
        if let Some(t) = sb {
            p.check_keys(t, "sandbox", SANDBOX_KEYS, false)?;
        }
        if let Some(t) = lp {
            p.check_keys(t, "loop", LOOP_KEYS, false)?;
        }
        if let Some(t) = vf {
            p.check_keys(t, "verify", VERIFY_KEYS, false)?;
        }
        if let Some(t) = ag {
            p.check_keys(t, "agent", AGENT_KEYS, false)?;
        }
        if let Some(t) = st {
            p.check_keys(t, "stop", STOP_KEYS, false)?;
        }

        // [loop]
        let loop_ = LoopSpec {
            program: p.opt_str(lp, "loop", "program")?,
            notes: p
                .opt_str(lp, "loop", "notes")?
                .unwrap_or_else(|| ".hone/notes.md".into()),
            skills: p.str_list(lp, "loop", "skills")?,
            editable: p.str_list(lp, "loop", "editable")?,
            protected: p.str_list(lp, "loop", "protected")?,
            pinned: p.str_list(lp, "loop", "pinned")?,
        };
        if loop_.editable.is_empty() {
            let line = p.key_line(lp, "editable").or(p.table_line(lp)).unwrap_or(1);
            return Err(p.err_at_line(
                line,
                "loop.editable",
                "required: list the files a candidate may change, e.g. editable = [\"train.py\"]"
                    .into(),
            ));
        }
        for (key, list) in [("protected", &loop_.protected), ("pinned", &loop_.pinned)] {
            for pat in list {
                if loop_.editable.iter().any(|e| e == pat) {
                    let line = p.key_line(lp, key).unwrap_or(1);
                    return Err(p.err_at_line(
                        line,
                        &format!("loop.{key}"),
                        format!("`{pat}` is also listed in `editable`: a file cannot be both"),
                    ));
                }
            }
        }
        for (key, list) in [
            ("editable", &loop_.editable),
            ("protected", &loop_.protected),
        ] {
            for pat in list {
                if pat.is_empty()
                    || Path::new(pat).is_absolute()
                    || pat.split('/').any(|c| c == "..")
                {
                    let line = p.key_line(lp, key).unwrap_or(1);
                    return Err(p.err_at_line(
                        line,
                        &format!("loop.{key}"),
                        format!("`{pat}` must be a relative path or glob inside the repository"),
                    ));
                }
            }
        }

        // [verify]
        let command = p.req_str(
            vf,
            "verify",
            "command",
            "the command that measures a candidate, e.g. command = \"python3 train.py\"",
        )?;
        let metric = p.req_str(
            vf,
            "verify",
            "metric",
            "the name of the objective the command prints, e.g. metric = \"val_bpb\"",
        )?;
        let direction = match p.opt_str(vf, "verify", "direction")? {
            None => Direction::Minimize,
            Some(s) => match s.as_str() {
                "minimize" | "min" => Direction::Minimize,
                "maximize" | "max" => Direction::Maximize,
                other => {
                    return Err(p.err_value(
                        vf,
                        "verify",
                        "direction",
                        format!("`{other}` is not a direction: use \"minimize\" or \"maximize\""),
                    ))
                }
            },
        };
        let timeout = p
            .opt_duration(vf, "verify", "timeout")?
            .unwrap_or(Duration::from_secs(defaults::VERIFY_TIMEOUT_SECS));
        if timeout.is_zero() {
            return Err(p.err_value(vf, "verify", "timeout", "must be more than zero".into()));
        }
        let kill_grace = p
            .opt_duration(vf, "verify", "kill_grace")?
            .unwrap_or(Duration::from_secs(defaults::KILL_GRACE_SECS));
        let min_delta = p.opt_f64(vf, "verify", "min_delta")?.unwrap_or(0.0);
        if min_delta.is_nan() || min_delta < 0.0 || !min_delta.is_finite() {
            return Err(p.err_value(
                vf,
                "verify",
                "min_delta",
                "must be a finite number >= 0 (the smallest improvement worth keeping)".into(),
            ));
        }
        let constraints = p.str_list(vf, "verify", "constraints")?;
        for c in &constraints {
            if let Err(e) = c.parse::<crate::verify::metrics::Constraint>() {
                return Err(p.err_value(vf, "verify", "constraints", e.to_string()));
            }
        }
        let metric_regex = p.opt_str(vf, "verify", "metric_regex")?;
        if let Some(r) = &metric_regex {
            if let Err(e) = crate::verify::metrics::MetricReader::new(&metric, Some(r)) {
                return Err(p.err_value(vf, "verify", "metric_regex", e.to_string()));
            }
        }
        let max_log_bytes = p
            .opt_u64(vf, "verify", "max_log_bytes")?
            .unwrap_or(defaults::MAX_LOG_BYTES);
        if max_log_bytes < 1024 {
            return Err(p.err_value(
                vf,
                "verify",
                "max_log_bytes",
                "must be at least 1024".into(),
            ));
        }
        let env = p.str_table(vf, "verify", "env")?;
        let baseline_repeats = p.opt_u64(vf, "verify", "baseline_repeats")?.unwrap_or(1);
        if baseline_repeats == 0 {
            return Err(p.err_value(
                vf,
                "verify",
                "baseline_repeats",
                "must be at least 1".into(),
            ));
        }
        let noise_k = p
            .opt_f64(vf, "verify", "noise_k")?
            .unwrap_or(defaults::NOISE_K);
        if noise_k.is_nan() || noise_k < 0.0 || !noise_k.is_finite() {
            return Err(p.err_value(
                vf,
                "verify",
                "noise_k",
                "must be a finite number >= 0".into(),
            ));
        }
        let retest_every = p.opt_u64(vf, "verify", "retest_every")?;
        if retest_every == Some(0) {
            return Err(p.err_value(
                vf,
                "verify",
                "retest_every",
                "must be at least 1 (or leave it out)".into(),
            ));
        }
        let seed_env = p.opt_str(vf, "verify", "seed_env")?;
        if let Some(name) = &seed_env {
            let ok = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok {
                return Err(p.err_value(
                    vf,
                    "verify",
                    "seed_env",
                    format!("`{name}` is not an environment variable name"),
                ));
            }
        }
        let verify = VerifySpec {
            command,
            timeout,
            kill_grace,
            metric,
            direction,
            min_delta,
            constraints,
            metric_regex,
            max_log_bytes,
            env,
            baseline_repeats,
            noise_k,
            confirm: p.opt_u64(vf, "verify", "confirm")?.unwrap_or(0),
            retest_every,
            seed_env,
            prefer_simpler: p.opt_bool(vf, "verify", "prefer_simpler")?.unwrap_or(false),
            evaluate: p.opt_str(vf, "verify", "evaluate")?,
            outputs: p.str_list(vf, "verify", "outputs")?,
            holdout: None,
            holdout_gate: false,
        };
        let holdout = match vf.and_then(|t| t.get("holdout")) {
            None => None,
            Some(Item::Table(h)) => {
                p.check_keys(h, "verify.holdout", HOLDOUT_KEYS, false)?;
                let h = Some(h);
                let min_delta = p
                    .opt_f64(h, "verify.holdout", "min_delta")?
                    .unwrap_or(verify.min_delta);
                if min_delta.is_nan() || min_delta < 0.0 {
                    return Err(p.err_value(
                        h,
                        "verify.holdout",
                        "min_delta",
                        "must be a number >= 0".into(),
                    ));
                }
                Some(HoldoutSpec {
                    command: p.req_str(
                        h,
                        "verify.holdout",
                        "command",
                        "the command that measures the holdout",
                    )?,
                    metric: p
                        .opt_str(h, "verify.holdout", "metric")?
                        .unwrap_or_else(|| verify.metric.clone()),
                    timeout: p
                        .opt_duration(h, "verify.holdout", "timeout")?
                        .unwrap_or(verify.timeout),
                    min_delta,
                    hide: p.str_list(h, "verify.holdout", "hide")?,
                })
            }
            Some(other) => {
                return Err(p.type_err(
                    vf,
                    "verify",
                    "holdout",
                    "a table written [verify.holdout]",
                    other,
                ));
            }
        };
        let holdout_gate = p.opt_bool(vf, "verify", "holdout_gate")?.unwrap_or(false);
        if holdout_gate && holdout.is_none() {
            return Err(p.err_value(
                vf,
                "verify",
                "holdout_gate",
                "needs a [verify.holdout] command to gate on".into(),
            ));
        }
        let verify = VerifySpec {
            holdout,
            holdout_gate,
            ..verify
        };
        if verify.evaluate.is_none() && !verify.outputs.is_empty() {
            return Err(p.err_value(
                vf,
                "verify",
                "outputs",
                "only means something with `evaluate` (the sealed second stage)".into(),
            ));
        }

        // [agent]
        let kind = match p.opt_str(ag, "agent", "kind")? {
            None => AgentKind::Knobs,
            Some(s) => match AgentKind::parse(&s) {
                Some(k) => k,
                None => {
                    let hint = closest(&s, AgentKind::NAMES)
                        .map(|c| format!("; did you mean \"{c}\"?"))
                        .unwrap_or_default();
                    return Err(p.err_value(
                        ag,
                        "agent",
                        "kind",
                        format!(
                            "unknown agent kind `{s}` (expected one of: {}){hint}",
                            AgentKind::NAMES.join(", ")
                        ),
                    ));
                }
            },
        };
        let agent_command = p.opt_str(ag, "agent", "command")?;
        if kind == AgentKind::Command && agent_command.is_none() {
            let line = p.key_line(ag, "kind").unwrap_or(1);
            return Err(p.err_at_line(
                line,
                "agent.command",
                "kind = \"command\" needs `command`, e.g. command = \"my-agent {prompt_file}\""
                    .into(),
            ));
        }
        let agent = AgentSpec {
            kind,
            command: agent_command,
            timeout: p
                .opt_duration(ag, "agent", "timeout")?
                .unwrap_or(Duration::from_secs(defaults::AGENT_TIMEOUT_SECS)),
            seed: p.opt_u64(ag, "agent", "seed")?,
            llm: None,
            model: None,
            extra_args: p.str_list(ag, "agent", "extra_args")?,
        };
        let llm = if kind.is_http() {
            Some(p.llm(ag, "agent", kind, true)?)
        } else {
            let preset = kind.is_preset();
            for key in ["model", "base_url", "api_key_env", "edit_mode"] {
                if preset && key == "model" {
                    continue;
                }
                if p.value(ag, key).is_some() {
                    return Err(p.err_value(ag, "agent", key, format!("only means something with kind = \"openai\" or \"anthropic\" (kind is \"{}\")", kind.as_str())));
                }
            }
            None
        };
        let model = match kind {
            k if k.is_preset() => p.opt_str(ag, "agent", "model")?,
            _ => llm.as_ref().map(|l| l.model.clone()),
        };
        if !agent.extra_args.is_empty() && !kind.is_preset() {
            return Err(p.err_value(
                ag,
                "agent",
                "extra_args",
                "only means something for an agent CLI preset such as kind = \"claude\"".into(),
            ));
        }
        let agent = AgentSpec {
            llm,
            model,
            ..agent
        };

        // [stop]
        let max_experiments = p
            .opt_u64(st, "stop", "max_experiments")?
            .unwrap_or(defaults::MAX_EXPERIMENTS);
        if max_experiments == 0 {
            return Err(p.err_value(
                st,
                "stop",
                "max_experiments",
                "must be at least 1 (the baseline is experiment 0)".into(),
            ));
        }
        let patience = p.opt_u64(st, "stop", "patience")?;
        if patience == Some(0) {
            return Err(p.err_value(st, "stop", "patience", "must be at least 1".into()));
        }
        let max_consecutive_failures = p
            .opt_u64(st, "stop", "max_consecutive_failures")?
            .unwrap_or(defaults::MAX_CONSECUTIVE_FAILURES);
        if max_consecutive_failures == 0 {
            return Err(p.err_value(
                st,
                "stop",
                "max_consecutive_failures",
                "must be at least 1".into(),
            ));
        }
        let max_cost_usd = p.opt_f64(st, "stop", "max_cost_usd")?;
        if matches!(max_cost_usd, Some(c) if c.is_nan() || c < 0.0) {
            return Err(p.err_value(st, "stop", "max_cost_usd", "must be a number >= 0".into()));
        }
        let stop = StopSpec {
            max_experiments,
            max_time: p.opt_duration(st, "stop", "max_time")?,
            patience,
            target: p.opt_f64(st, "stop", "target")?,
            max_consecutive_failures,
            max_cost_usd,
            max_tokens: p.opt_u64(st, "stop", "max_tokens")?,
        };
        if stop.max_cost_usd.is_some() && matches!(agent.kind, AgentKind::Codex | AgentKind::Gemini)
        {
            let tool = if agent.kind == AgentKind::Codex {
                "Codex"
            } else {
                "Gemini CLI"
            };
            return Err(p.err_value(
                st,
                "stop",
                "max_cost_usd",
                format!(
                    "{tool} reports tokens, not money: use max_tokens to bound a {} run",
                    agent.kind.as_str()
                ),
            ));
        }
        if let (Some(_), Some(llm)) = (stop.max_cost_usd, &agent.llm) {
            if llm.prices().is_none() {
                return Err(p.err_value(
                    ag,
                    "agent",
                    "model",
                    format!("max_cost_usd needs the price of `{}`: set price_in_per_mtok and price_out_per_mtok", llm.model),
                ));
            }
        }

        let bwrap = match p.opt_str(sb, "sandbox", "kind")?.as_deref() {
            None | Some("rlimits") => false,
            Some("bwrap") => true,
            Some(other) => {
                return Err(p.err_value(
                    sb,
                    "sandbox",
                    "kind",
                    format!("unknown sandbox kind `{other}` (expected \"rlimits\" or \"bwrap\")"),
                ))
            }
        };
        let network = p.opt_bool(sb, "sandbox", "network")?.unwrap_or(true);
        if !bwrap && !network {
            return Err(p.err_value(
                sb,
                "sandbox",
                "network",
                "cutting the network needs kind = \"bwrap\"".into(),
            ));
        }
        let sandbox = SandboxSpec {
            bwrap,
            network,
            required: p.opt_bool(sb, "sandbox", "required")?.unwrap_or(true),
            memory_bytes: p.opt_size(sb, "sandbox", "memory")?,
            cpu_seconds: p
                .opt_duration(sb, "sandbox", "cpu_time")?
                .map(|d| d.as_secs().max(1)),
            max_output_bytes: p.opt_size(sb, "sandbox", "max_output")?,
            max_processes: p.opt_u64(sb, "sandbox", "max_processes")?,
        };
        let forbid = p.str_list(rv, "review", "forbid")?;
        for f in &forbid {
            if let Err(e) = regex::Regex::new(f) {
                return Err(p.err_value(
                    rv,
                    "review",
                    "forbid",
                    format!("`{f}` is not a valid regex: {e}"),
                ));
            }
        }
        let review_command = p.opt_str(rv, "review", "command")?;
        let review_kind = match p.opt_str(rv, "review", "kind")?.as_deref() {
            None | Some("command") => None,
            Some("openai") => Some(AgentKind::OpenAi),
            Some("anthropic") => Some(AgentKind::Anthropic),
            Some(other) => {
                return Err(p.err_value(
                    rv,
                    "review",
                    "kind",
                    format!("unknown reviewer kind `{other}` (expected \"command\", \"openai\" or \"anthropic\")"),
                ))
            }
        };
        let review_llm = match review_kind {
            Some(k) => {
                if review_command.is_some() {
                    return Err(p.err_value(
                        rv,
                        "review",
                        "command",
                        format!(
                            "a reviewer is either a command or kind = \"{}\", not both",
                            k.as_str()
                        ),
                    ));
                }
                Some(p.llm(rv, "review", k, false)?)
            }
            None => {
                for key in [
                    "model",
                    "base_url",
                    "api_key_env",
                    "temperature",
                    "max_tokens",
                    "request_timeout",
                    "max_attempts",
                    "price_in_per_mtok",
                    "price_out_per_mtok",
                ] {
                    if p.value(rv, key).is_some() {
                        return Err(p.err_value(
                            rv,
                            "review",
                            key,
                            "only means something with kind = \"openai\" or \"anthropic\"".into(),
                        ));
                    }
                }
                None
            }
        };
        if let (Some(_), Some(llm)) = (stop.max_cost_usd, &review_llm) {
            if llm.prices().is_none() {
                return Err(p.err_value(
                    rv,
                    "review",
                    "model",
                    format!("max_cost_usd needs the price of `{}`: set price_in_per_mtok and price_out_per_mtok", llm.model),
                ));
            }
        }
        let review = ReviewSpec {
            command: review_command,
            kind: review_kind,
            llm: review_llm,
            instructions: p.opt_str(rv, "review", "instructions")?,
            max_diff_lines: p.opt_u64(rv, "review", "max_diff_lines")?,
            forbid,
            timeout: p
                .opt_duration(rv, "review", "timeout")?
                .unwrap_or(Duration::from_secs(600)),
        };
        let mut exec = p.exec(ex)?;
        exec.store_url = p.opt_str(so, "store", "url")?;
        if let Some(u) = &exec.store_url {
            if !(u.starts_with("postgres://") || u.starts_with("postgresql://")) {
                return Err(p.err_value(
                    so,
                    "store",
                    "url",
                    "expected a PostgreSQL URL, postgres://user@host:port/database (without it the store is .hone/hone.db)".into(),
                ));
            }
        }
        exec.store_repo = p.opt_str(so, "store", "repo")?;
        if let Some(r) = &exec.store_repo {
            let message = if exec.store_url.is_none() {
                "repo names this repository's runs in a shared PostgreSQL store; it needs [store] url = \"postgres://...\""
            } else if r.trim().is_empty() {
                "expected a non-empty key, such as the repository's URL (git@host:lab/project.git)"
            } else {
                ""
            };
            if !message.is_empty() {
                return Err(p.err_value(so, "store", "repo", message.into()));
            }
        }
        if exec.backend == Backend::Workers {
            if sandbox.bwrap && sandbox.required {
                return Err(p.err_value(
                    sb,
                    "sandbox",
                    "kind",
                    "remote workers do not run verifiers under bubblewrap yet: with [exec] backend = \"workers\" set [sandbox] required = false (and run workers as a user without access to anything you would protect), or verify locally".into(),
                ));
            }
            if exec.store_url.is_none() {
                return Err(p.err_value(
                    ex,
                    "exec",
                    "backend",
                    "backend = \"workers\" needs [store] url = \"postgres://...\": the database the workers take verifications from".into(),
                ));
            }
            if verify.evaluate.is_some() {
                return Err(p.err_value(
                    vf,
                    "verify",
                    "evaluate",
                    "the sealed two-stage evaluator is not supported with [exec] backend = \"workers\" yet; use one verify command".into(),
                ));
            }
        }
        let outer = p.outer(ou)?;
        if outer.research_every.is_some() && !(agent.kind.is_http() && agent.llm.is_some()) {
            return Err(p.err_value(
                ou,
                "outer",
                "research_every",
                format!(
                    "mechanism research asks an LLM: it needs [agent] kind = \"openai\" or \"anthropic\" (this run's agent is `{}`)",
                    agent.kind.as_str()
                ),
            ));
        }
        let notify = p
            .array_of_tables(doc.as_table(), "notify")?
            .into_iter()
            .map(|t| p.notify(t))
            .collect::<Result<Vec<_>, _>>()?;
        let schedule = p
            .array_of_tables(doc.as_table(), "schedule")?
            .into_iter()
            .map(|t| p.schedule(t))
            .collect::<Result<Vec<_>, _>>()?;
        let tr = p.section(doc.as_table(), "trigger")?;
        if let Some(t) = tr {
            p.check_keys(t, "trigger", TRIGGER_KEYS, false)?;
        }
        let trigger = match p.opt_str(tr, "trigger", "secret_env")? {
            Some(v) if v.trim().is_empty() => {
                return Err(p.err_value(tr, "trigger", "secret_env", "must not be empty".into()))
            }
            Some(v) => TriggerSpec { secret_env: v },
            None => TriggerSpec::default(),
        };
        Ok(Spec {
            loop_,
            verify,
            agent,
            stop,
            sandbox,
            review,
            exec,
            outer,
            notify,
            schedule,
            trigger,
        })
    }

    /// The program file to read on every experiment, if any.
    pub fn program_path(&self) -> &str {
        self.loop_.program.as_deref().unwrap_or(defaults::PROGRAM)
    }
}

impl Parser<'_> {
    /// The settings of an HTTP LLM (`[agent]` or `[review]` with kind = "openai" | "anthropic").
    fn llm(
        &self,
        t: Option<&Table>,
        section: &str,
        kind: AgentKind,
        edits: bool,
    ) -> Result<LlmSpec, SpecError> {
        let p = self;
        let model = p.req_str(
            t,
            section,
            "model",
            "the model to ask, e.g. model = \"gpt-4.1-mini\"",
        )?;
        let (default_url, default_key) = match kind {
            AgentKind::Anthropic => ("https://api.anthropic.com", "ANTHROPIC_API_KEY"),
            _ => ("https://api.openai.com/v1", "OPENAI_API_KEY"),
        };
        let edit_mode = if !edits {
            EditMode::Blocks
        } else {
            match p.opt_str(t, section, "edit_mode")?.as_deref() {
                None | Some("blocks") => EditMode::Blocks,
                Some("patch") => EditMode::Patch,
                Some("knobs") => EditMode::Knobs,
                Some(other) => {
                    return Err(p.err_value(
                        t,
                        section,
                        "edit_mode",
                        format!(
                        "unknown edit mode `{other}` (expected \"blocks\", \"patch\" or \"knobs\")"
                    ),
                    ))
                }
            }
        };
        let max_tokens = p.opt_u64(t, section, "max_tokens")?.unwrap_or(4096);
        if max_tokens == 0 {
            return Err(p.err_value(t, section, "max_tokens", "must be at least 1".into()));
        }
        let max_attempts = p.opt_u64(t, section, "max_attempts")?.unwrap_or(4).max(1);
        Ok(LlmSpec {
            model,
            base_url: p
                .opt_str(t, section, "base_url")?
                .unwrap_or_else(|| default_url.into())
                .trim_end_matches('/')
                .to_string(),
            api_key_env: p
                .opt_str(t, section, "api_key_env")?
                .unwrap_or_else(|| default_key.into()),
            temperature: p.opt_f64(t, section, "temperature")?,
            max_tokens,
            request_timeout: p
                .opt_duration(t, section, "request_timeout")?
                .unwrap_or(Duration::from_secs(120)),
            max_attempts,
            price_in_per_mtok: p.opt_f64(t, section, "price_in_per_mtok")?,
            price_out_per_mtok: p.opt_f64(t, section, "price_out_per_mtok")?,
            edit_mode,
        })
    }
}

struct Parser<'a> {
    file: &'a Path,
    text: &'a str,
    line_starts: Vec<usize>,
}

fn line_starts(text: &str) -> Vec<usize> {
    let mut v = vec![0];
    v.extend(text.match_indices('\n').map(|(i, _)| i + 1));
    v
}

impl Parser<'_> {
    /// `[outer]`, with every mechanism name checked against the built-ins.
    fn outer(&self, t: Option<&Table>) -> Result<OuterSpec, SpecError> {
        let d = OuterSpec::default();
        let mechanisms = self.str_list(t, "outer", "mechanisms")?;
        for (i, name) in mechanisms.iter().enumerate() {
            let line = t
                .and_then(|t| t.get("mechanisms"))
                .and_then(|m| m.as_array())
                .and_then(|a| a.get(i))
                .and_then(|v| v.span())
                .map(|s| self.line_of(s.start))
                .or_else(|| self.key_line(t, "mechanisms"))
                .unwrap_or(1);
            if !crate::meta::BUILTIN.contains(&name.as_str()) {
                let hint = closest(name, crate::meta::BUILTIN)
                    .map(|c| format!("did you mean `{c}`? "))
                    .unwrap_or_default();
                return Err(self.err_at_line(
                    line,
                    "outer.mechanisms",
                    format!(
                        "unknown mechanism `{name}`; {hint}(built in: {})",
                        crate::meta::BUILTIN.join(", ")
                    ),
                ));
            }
            if mechanisms[..i].contains(name) {
                return Err(self.err_at_line(
                    line,
                    "outer.mechanisms",
                    format!("`{name}` is listed twice"),
                ));
            }
        }
        let positive = |key: &str, v: Option<u64>| match v {
            Some(0) => Err(self.err_value(t, "outer", key, "must be at least 1".into())),
            v => Ok(v),
        };
        let strategy_every = positive(
            "strategy_every",
            self.opt_u64(t, "outer", "strategy_every")?,
        )?;
        let segment =
            positive("segment", self.opt_u64(t, "outer", "segment")?)?.unwrap_or(d.segment);
        let probation =
            positive("probation", self.opt_u64(t, "outer", "probation")?)?.unwrap_or(d.probation);
        let portfolio = self.opt_bool(t, "outer", "portfolio")?.unwrap_or(false);
        let research_every = positive(
            "research_every",
            self.opt_u64(t, "outer", "research_every")?,
        )?;
        let scripts = self.str_list(t, "outer", "scripts")?;
        let mut script_lines = Vec::new();
        for (i, path) in scripts.iter().enumerate() {
            let line = t
                .and_then(|t| t.get("scripts"))
                .and_then(|m| m.as_array())
                .and_then(|a| a.get(i))
                .and_then(|v| v.span())
                .map(|s| self.line_of(s.start))
                .or_else(|| self.key_line(t, "scripts"))
                .unwrap_or(1);
            script_lines.push(line);
            if !path.ends_with(".rhai") {
                return Err(self.err_at_line(
                    line,
                    "outer.scripts",
                    format!("`{path}` is not a Rhai script (expected a path ending in .rhai)"),
                ));
            }
        }
        if portfolio && mechanisms.is_empty() {
            return Err(self.err_value(
                t,
                "outer",
                "portfolio",
                "the portfolio turns mechanisms on and off: list some in `mechanisms`".into(),
            ));
        }
        Ok(OuterSpec {
            mechanisms,
            strategy_every,
            max_frozen: self
                .opt_u64(t, "outer", "max_frozen")?
                .map_or(d.max_frozen, |v| v as usize),
            segment,
            portfolio,
            probation,
            research_every,
            scripts,
            script_lines,
        })
    }

    /// The tables of `[[name]]` (none when absent).
    fn array_of_tables<'t>(&self, doc: &'t Table, name: &str) -> Result<Vec<&'t Table>, SpecError> {
        match doc.get(name) {
            None => Ok(Vec::new()),
            Some(Item::ArrayOfTables(a)) => Ok(a.iter().collect()),
            Some(other) => Err(self.err_at_line(
                self.key_line(Some(doc), name)
                    .or_else(|| self.item_line(other))
                    .unwrap_or(1),
                name,
                format!(
                    "must be written `[[{name}]]` (one per entry), found {}",
                    other.type_name()
                ),
            )),
        }
    }

    fn notify(&self, t: &Table) -> Result<NotifySpec, SpecError> {
        let s = "notify";
        self.check_keys(t, s, NOTIFY_KEYS, false)?;
        let t = Some(t);
        let url = match (self.opt_str(t, s, "url")?, self.opt_str(t, s, "url_env")?) {
            (Some(_), Some(_)) => {
                return Err(self.err_value(t, s, "url_env", "set `url` or `url_env`, not both".into()))
            }
            (Some(u), None) => {
                if !(u.starts_with("http://") || u.starts_with("https://")) {
                    return Err(self.err_value(t, s, "url", format!("`{u}` is not an http(s) URL")));
                }
                NotifyUrl::Literal(u)
            }
            (None, Some(v)) if v.trim().is_empty() => {
                return Err(self.err_value(t, s, "url_env", "must not be empty".into()))
            }
            (None, Some(v)) => NotifyUrl::Env(v),
            (None, None) => {
                return Err(self.err_at_line(
                    self.table_line(t).unwrap_or(1),
                    "notify.url",
                    "required: where to POST, e.g. url = \"https://hooks.slack.com/services/...\", or url_env = \"SLACK_WEBHOOK_URL\" to keep it out of the file".into(),
                ))
            }
        };
        let on = match self.value(t, "on") {
            None => NotifyOn::ALL.to_vec(),
            Some(_) => {
                let mut on = Vec::new();
                for name in self.str_list(t, s, "on")? {
                    match NotifyOn::parse(&name) {
                        Some(n) if !on.contains(&n) => on.push(n),
                        Some(_) => {}
                        None => {
                            let hint = closest(&name, NotifyOn::NAMES)
                                .map(|c| format!("; did you mean `{c}`?"))
                                .unwrap_or_default();
                            return Err(self.err_value(
                                t,
                                s,
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
                    return Err(self.err_value(
                        t,
                        s,
                        "on",
                        format!("must name at least one of {}", NotifyOn::NAMES.join(", ")),
                    ));
                }
                on
            }
        };
        let format = match self.opt_str(t, s, "format")?.as_deref() {
            None | Some("json") => NotifyFormat::Json,
            Some("slack") => NotifyFormat::Slack,
            Some(other) => {
                return Err(self.err_value(
                    t,
                    s,
                    "format",
                    format!("unknown format `{other}` (expected \"slack\" or \"json\")"),
                ))
            }
        };
        let retries = self.opt_u64(t, s, "retries")?.unwrap_or(3);
        if retries > 10 {
            return Err(self.err_value(t, s, "retries", "at most 10".into()));
        }
        let timeout = self
            .opt_duration(t, s, "timeout")?
            .unwrap_or(Duration::from_secs(10));
        if timeout.is_zero() {
            return Err(self.err_value(t, s, "timeout", "must be more than zero".into()));
        }
        Ok(NotifySpec {
            url,
            on,
            format,
            retries: retries as u32,
            backoff: self
                .opt_duration(t, s, "backoff")?
                .unwrap_or(Duration::from_secs(1)),
            timeout,
            line: self.table_line(t).unwrap_or(1),
        })
    }

    fn schedule(&self, t: &Table) -> Result<ScheduleSpec, SpecError> {
        let s = "schedule";
        self.check_keys(t, s, SCHEDULE_KEYS, false)?;
        let t = Some(t);
        let cron = self.req_str(
            t,
            s,
            "cron",
            "a cron expression, e.g. cron = \"0 2 * * *\" (02:00 UTC every day)",
        )?;
        if let Err(e) = croner::Cron::new(&cron).with_seconds_optional().parse() {
            return Err(self.err_value(
                t,
                s,
                "cron",
                format!("`{cron}` is not a cron expression: {e}"),
            ));
        }
        let tag = self
            .opt_str(t, s, "tag")?
            .unwrap_or_else(|| "scheduled".into());
        // The tag gets `-YYYYMMDD-HHMM` appended; the whole must be a valid tag.
        if let Err(e) = crate::engine::validate_tag(&format!("{tag}-20260101-0000")) {
            return Err(self.err_value(t, s, "tag", e.to_string()));
        }
        let agent = match self.opt_str(t, s, "agent")? {
            None => None,
            Some(a) => Some(AgentKind::parse(&a).ok_or_else(|| {
                self.err_value(
                    t,
                    s,
                    "agent",
                    format!(
                        "unknown agent kind `{a}` (expected one of {})",
                        AgentKind::NAMES.join(", ")
                    ),
                )
            })?),
        };
        let max_experiments = self.opt_u64(t, s, "max_experiments")?;
        if max_experiments == Some(0) {
            return Err(self.err_value(t, s, "max_experiments", "must be more than zero".into()));
        }
        let time = self.opt_duration(t, s, "time")?;
        if time.is_some_and(|d| d.is_zero()) {
            return Err(self.err_value(t, s, "time", "must be more than zero".into()));
        }
        let pr = self.opt_bool(t, s, "pr")?.unwrap_or(false);
        let finalize = self.opt_bool(t, s, "finalize")?;
        if pr && finalize == Some(false) {
            return Err(self.err_value(
                t,
                s,
                "finalize",
                "pr = true opens a pull request from the finalized branch: drop finalize = false"
                    .into(),
            ));
        }
        Ok(ScheduleSpec {
            cron,
            tag,
            max_experiments,
            time,
            agent,
            seed: self.opt_u64(t, s, "seed")?,
            catch_up: self.opt_bool(t, s, "catch_up")?.unwrap_or(false),
            finalize: pr || finalize.unwrap_or(false),
            pr,
            squash: self.opt_bool(t, s, "squash")?.unwrap_or(false),
            line: self.table_line(t).unwrap_or(1),
        })
    }

    fn line_of(&self, offset: usize) -> usize {
        let offset = offset.min(self.text.len());
        match self.line_starts.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }

    fn err_at_line(&self, line: usize, key: &str, message: String) -> SpecError {
        SpecError {
            file: self.file.to_path_buf(),
            line,
            key: key.to_string(),
            message,
        }
    }

    fn table_line(&self, t: Option<&Table>) -> Option<usize> {
        t.and_then(|t| t.span()).map(|s| self.line_of(s.start))
    }

    fn key_line(&self, t: Option<&Table>, key: &str) -> Option<usize> {
        let (k, item) = t?.get_key_value(key)?;
        k.span()
            .or_else(|| item.span())
            .map(|s| self.line_of(s.start))
    }

    fn item_line(&self, item: &Item) -> Option<usize> {
        item.span().map(|s| self.line_of(s.start))
    }

    /// An error about the value of `section.key` (located at the value, else the key).
    fn err_value(&self, t: Option<&Table>, section: &str, key: &str, message: String) -> SpecError {
        let line = t
            .and_then(|t| t.get(key))
            .and_then(|i| self.item_line(i))
            .or_else(|| self.key_line(t, key))
            .or_else(|| self.table_line(t))
            .unwrap_or(1);
        self.err_at_line(line, &format!("{section}.{key}"), message)
    }

    fn check_keys(
        &self,
        t: &Table,
        section: &str,
        known: &[&str],
        top: bool,
    ) -> Result<(), SpecError> {
        for (name, item) in t.iter() {
            if known.contains(&name) {
                continue;
            }
            let line = t
                .get_key_value(name)
                .and_then(|(k, _)| k.span())
                .or_else(|| item.span())
                .map(|s| self.line_of(s.start))
                .unwrap_or(1);
            let hint = closest(name, known)
                .map(|c| format!("; did you mean `{c}`?"))
                .unwrap_or_default();
            let home = [
                ("loop", LOOP_KEYS),
                ("verify", VERIFY_KEYS),
                ("agent", AGENT_KEYS),
                ("stop", STOP_KEYS),
                ("outer", OUTER_KEYS),
            ]
            .iter()
            .find(|(_, keys)| keys.contains(&name))
            .map(|(sec, _)| *sec);
            if let (true, Some(sec), false) = (top, home, item.is_table()) {
                return Err(self.err_at_line(
                    line,
                    name,
                    format!("`{name}` belongs in a section: move it under [{sec}]"),
                ));
            }
            let (key, what) = if top {
                (name.to_string(), format!("unknown section `[{name}]` (valid: [loop], [verify], [agent], [stop], [sandbox], [review], [outer]){hint}"))
            } else {
                (
                    format!("{section}.{name}"),
                    format!("unknown key in [{section}]{hint}"),
                )
            };
            return Err(self.err_at_line(line, &key, what));
        }
        Ok(())
    }

    fn section<'t>(&self, doc: &'t Table, name: &str) -> Result<Option<&'t Table>, SpecError> {
        match doc.get(name) {
            None => Ok(None),
            Some(Item::Table(t)) => Ok(Some(t)),
            Some(other) => Err(self.err_at_line(
                self.key_line(Some(doc), name)
                    .or_else(|| self.item_line(other))
                    .unwrap_or(1),
                name,
                format!(
                    "must be a table written `[{name}]`, found {}",
                    other.type_name()
                ),
            )),
        }
    }

    fn value<'t>(&self, t: Option<&'t Table>, key: &str) -> Option<&'t Item> {
        t.and_then(|t| t.get(key))
    }

    fn type_err(
        &self,
        t: Option<&Table>,
        section: &str,
        key: &str,
        want: &str,
        item: &Item,
    ) -> SpecError {
        self.err_value(
            t,
            section,
            key,
            format!("expected {want}, found {}", item.type_name()),
        )
    }

    fn opt_str(
        &self,
        t: Option<&Table>,
        section: &str,
        key: &str,
    ) -> Result<Option<String>, SpecError> {
        match self.value(t, key) {
            None => Ok(None),
            Some(item) => match item.as_str() {
                Some(s) => Ok(Some(s.to_string())),
                None => Err(self.type_err(t, section, key, "a string", item)),
            },
        }
    }

    fn req_str(
        &self,
        t: Option<&Table>,
        section: &str,
        key: &str,
        what: &str,
    ) -> Result<String, SpecError> {
        match self.opt_str(t, section, key)? {
            Some(s) if !s.trim().is_empty() => Ok(s),
            Some(_) => Err(self.err_value(t, section, key, "must not be empty".into())),
            None => {
                let line = self.table_line(t).unwrap_or(1);
                let msg = if t.is_none() {
                    format!("required, and the [{section}] section is missing: add it with {what}")
                } else {
                    format!("required: {what}")
                };
                Err(self.err_at_line(line, &format!("{section}.{key}"), msg))
            }
        }
    }

    /// `[exec]`.
    fn exec(&self, ex: Option<&Table>) -> Result<ExecSpec, SpecError> {
        let backend = match self.opt_str(ex, "exec", "backend")?.as_deref() {
            None | Some("local") => Backend::Local,
            Some("slurm") => Backend::Slurm,
            Some("workers") => Backend::Workers,
            Some(other) => {
                return Err(self.err_value(
                    ex,
                    "exec",
                    "backend",
                    format!(
                        "unknown backend `{other}` (expected \"local\", \"slurm\" or \"workers\")"
                    ),
                ))
            }
        };
        let remote = self.opt_str(ex, "exec", "remote")?;
        let lease = self
            .opt_duration(ex, "exec", "lease")?
            .unwrap_or(Duration::from_secs(30));
        match (&backend, &remote) {
            (Backend::Workers, None) => {
                return Err(self.err_value(
                    ex,
                    "exec",
                    "backend",
                    "backend = \"workers\" needs remote: a git remote (URL or path) that hone pushes candidates to and the workers fetch from".into(),
                ))
            }
            (Backend::Local | Backend::Slurm, Some(_)) => {
                return Err(self.err_value(
                    ex,
                    "exec",
                    "remote",
                    "`remote` is for backend = \"workers\"".into(),
                ))
            }
            _ => {}
        }
        let shared_dir = self.opt_str(ex, "exec", "shared_dir")?.map(PathBuf::from);
        let slurm = crate::exec::slurm::SlurmConfig {
            partition: self.opt_str(ex, "exec", "partition")?,
            gres: self.opt_str(ex, "exec", "gres")?,
            cpus: match self.opt_u64(ex, "exec", "cpus")? {
                Some(c) => Some(u32::try_from(c).ok().filter(|c| *c > 0).ok_or_else(|| {
                    self.err_value(ex, "exec", "cpus", "must be between 1 and 2^32-1".into())
                })?),
                None => None,
            },
            mem: self.opt_str(ex, "exec", "mem")?,
            time: self.opt_duration(ex, "exec", "time")?,
            extra_args: self.str_list(ex, "exec", "extra_args")?,
        };
        if backend != Backend::Slurm {
            for key in [
                "shared_dir",
                "partition",
                "gres",
                "cpus",
                "mem",
                "time",
                "extra_args",
            ] {
                if self.value(ex, key).is_some() {
                    return Err(self.err_value(
                        ex,
                        "exec",
                        key,
                        format!("`{key}` is for backend = \"slurm\"; set backend = \"slurm\" or remove it"),
                    ));
                }
            }
        }
        match &shared_dir {
            None if backend == Backend::Slurm => {
                return Err(self.err_value(
                    ex,
                    "exec",
                    "backend",
                    "backend = \"slurm\" needs shared_dir: a directory the compute nodes also see, for the worktrees and job files".into(),
                ))
            }
            Some(d) if !d.is_absolute() => {
                return Err(self.err_value(
                    ex,
                    "exec",
                    "shared_dir",
                    format!("`{}` must be an absolute path (compute nodes resolve it)", d.display()),
                ))
            }
            _ => {}
        }
        let workers = match self.opt_u64(ex, "exec", "workers")? {
            None => 1,
            Some(w) => usize::try_from(w).unwrap_or(usize::MAX),
        };
        let slots = self.slots(ex)?;
        let slots_line = self
            .key_line(ex, "slots")
            .or_else(|| self.table_line(ex))
            .unwrap_or(1);
        let exec = ExecSpec {
            backend,
            shared_dir,
            slurm,
            remote,
            lease,
            store_url: None,
            store_repo: None,
            workers,
            slots,
            slots_line,
        };
        if let Err(message) = exec.check_workers(workers) {
            let key = if workers == 0 || workers > MAX_WORKERS || exec.slots.is_empty() {
                "workers"
            } else {
                "slots"
            };
            return Err(self.err_value(ex, "exec", key, message));
        }
        Ok(exec)
    }

    /// `[exec] slots`: an array of tables of strings, one environment per slot.
    fn slots(&self, ex: Option<&Table>) -> Result<Vec<Vec<(String, String)>>, SpecError> {
        let Some(item) = self.value(ex, "slots") else {
            return Ok(Vec::new());
        };
        let want = "an array of tables of strings, e.g. slots = [{ CUDA_VISIBLE_DEVICES = \"0\" }, { CUDA_VISIBLE_DEVICES = \"1\" }]";
        let tables: Vec<Vec<(String, Option<String>)>> = match item {
            Item::Value(Value::Array(a)) => {
                let mut out = Vec::new();
                for v in a.iter() {
                    let Some(t) = v.as_inline_table() else {
                        return Err(self.type_err(ex, "exec", "slots", want, item));
                    };
                    out.push(
                        t.iter()
                            .map(|(k, v)| (k.to_string(), v.as_str().map(str::to_string)))
                            .collect(),
                    );
                }
                out
            }
            Item::ArrayOfTables(a) => a
                .iter()
                .map(|t| {
                    t.iter()
                        .map(|(k, v)| (k.to_string(), v.as_str().map(str::to_string)))
                        .collect()
                })
                .collect(),
            other => return Err(self.type_err(ex, "exec", "slots", want, other)),
        };
        let mut slots = Vec::new();
        for (i, t) in tables.into_iter().enumerate() {
            let mut env = Vec::new();
            for (k, v) in t {
                let Some(v) = v else {
                    return Err(self.err_value(
                        ex,
                        "exec",
                        "slots",
                        format!("slot {i}: `{k}` must be a string"),
                    ));
                };
                if k.is_empty() || k.contains('=') || k.starts_with("HONE_") {
                    return Err(self.err_value(
                        ex,
                        "exec",
                        "slots",
                        format!("slot {i}: `{k}` is not a variable a slot may set"),
                    ));
                }
                env.push((k, v));
            }
            slots.push(env);
        }
        Ok(slots)
    }

    fn str_list(
        &self,
        t: Option<&Table>,
        section: &str,
        key: &str,
    ) -> Result<Vec<String>, SpecError> {
        let Some(item) = self.value(t, key) else {
            return Ok(Vec::new());
        };
        if let Some(s) = item.as_str() {
            return Ok(vec![s.to_string()]);
        }
        let Some(arr) = item.as_array() else {
            return Err(self.type_err(t, section, key, "a list of strings", item));
        };
        let mut out = Vec::new();
        for v in arr.iter() {
            match v.as_str() {
                Some(s) => out.push(s.to_string()),
                None => {
                    let line = v
                        .span()
                        .map(|s| self.line_of(s.start))
                        .or_else(|| self.key_line(t, key))
                        .unwrap_or(1);
                    return Err(self.err_at_line(
                        line,
                        &format!("{section}.{key}"),
                        format!("expected a list of strings, found {} in it", v.type_name()),
                    ));
                }
            }
        }
        Ok(out)
    }

    fn str_table(
        &self,
        t: Option<&Table>,
        section: &str,
        key: &str,
    ) -> Result<Vec<(String, String)>, SpecError> {
        let Some(item) = self.value(t, key) else {
            return Ok(Vec::new());
        };
        let pairs: Vec<(String, Option<String>)> = match item {
            Item::Table(tb) => tb
                .iter()
                .map(|(k, v)| (k.to_string(), v.as_str().map(str::to_string)))
                .collect(),
            Item::Value(Value::InlineTable(tb)) => tb
                .iter()
                .map(|(k, v)| (k.to_string(), v.as_str().map(str::to_string)))
                .collect(),
            other => {
                return Err(self.type_err(
                    t,
                    section,
                    key,
                    "a table of strings, e.g. env = { CUDA_VISIBLE_DEVICES = \"0\" }",
                    other,
                ))
            }
        };
        let mut out = Vec::new();
        for (k, v) in pairs {
            match v {
                Some(v) => out.push((k, v)),
                None => {
                    return Err(self.err_value(t, section, key, format!("`{k}` must be a string")))
                }
            }
        }
        Ok(out)
    }

    fn opt_f64(
        &self,
        t: Option<&Table>,
        section: &str,
        key: &str,
    ) -> Result<Option<f64>, SpecError> {
        match self.value(t, key) {
            None => Ok(None),
            Some(item) => match (item.as_float(), item.as_integer()) {
                (Some(f), _) => Ok(Some(f)),
                (None, Some(i)) => Ok(Some(i as f64)),
                _ => Err(self.type_err(t, section, key, "a number", item)),
            },
        }
    }

    fn opt_size(
        &self,
        t: Option<&Table>,
        section: &str,
        key: &str,
    ) -> Result<Option<u64>, SpecError> {
        match self.value(t, key) {
            None => Ok(None),
            Some(item) => {
                if let Some(i) = item.as_integer() {
                    return if i > 0 {
                        Ok(Some(i as u64))
                    } else {
                        Err(self.err_value(t, section, key, "must be more than zero".into()))
                    };
                }
                match item.as_str().map(parse_size) {
                    Some(Ok(b)) => Ok(Some(b)),
                    Some(Err(e)) => Err(self.err_value(t, section, key, e)),
                    None => Err(self.type_err(
                        t,
                        section,
                        key,
                        "a size such as \"512M\" or \"8G\"",
                        item,
                    )),
                }
            }
        }
    }

    fn opt_bool(
        &self,
        t: Option<&Table>,
        section: &str,
        key: &str,
    ) -> Result<Option<bool>, SpecError> {
        match self.value(t, key) {
            None => Ok(None),
            Some(item) => match item.as_bool() {
                Some(b) => Ok(Some(b)),
                None => Err(self.type_err(t, section, key, "true or false", item)),
            },
        }
    }

    fn opt_u64(
        &self,
        t: Option<&Table>,
        section: &str,
        key: &str,
    ) -> Result<Option<u64>, SpecError> {
        match self.value(t, key) {
            None => Ok(None),
            Some(item) => match item.as_integer() {
                Some(i) if i >= 0 => Ok(Some(i as u64)),
                Some(_) => Err(self.err_value(t, section, key, "must not be negative".into())),
                None => Err(self.type_err(t, section, key, "a whole number", item)),
            },
        }
    }

    fn opt_duration(
        &self,
        t: Option<&Table>,
        section: &str,
        key: &str,
    ) -> Result<Option<Duration>, SpecError> {
        match self.value(t, key) {
            None => Ok(None),
            Some(item) => {
                let seconds = item
                    .as_integer()
                    .map(|i| i as f64)
                    .or_else(|| item.as_float());
                if let Some(secs) = seconds {
                    return if secs >= 0.0 && secs.is_finite() {
                        Ok(Some(Duration::from_secs_f64(secs)))
                    } else {
                        Err(self.err_value(t, section, key, "must not be negative".into()))
                    };
                }
                match item.as_str().map(parse_duration) {
                    Some(Ok(d)) => Ok(Some(d)),
                    Some(Err(e)) => Err(self.err_value(t, section, key, e)),
                    None => Err(self.type_err(
                        t,
                        section,
                        key,
                        "a duration such as \"90s\", \"6m\" or \"8h\"",
                        item,
                    )),
                }
            }
        }
    }
}

/// Parses `90s`, `6m`, `8h`, `1d`, `500ms`, `1h30m`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad =
        || format!("`{s}` is not a duration: write it like \"90s\", \"6m\", \"8h\" or \"1h30m\"");
    let t = s.trim();
    if t.is_empty() {
        return Err(bad());
    }
    if let Ok(secs) = t.parse::<f64>() {
        return if secs >= 0.0 && secs.is_finite() {
            Ok(Duration::from_secs_f64(secs))
        } else {
            Err(bad())
        };
    }
    let mut total = 0.0f64;
    let mut rest = t;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        if num_len == 0 {
            return Err(bad());
        }
        let n: f64 = rest[..num_len].parse().map_err(|_| bad())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = rest[..unit_len].trim();
        rest = &rest[unit_len..];
        let mult = match unit {
            "ms" => 0.001,
            "s" | "sec" | "secs" => 1.0,
            "m" | "min" | "mins" => 60.0,
            "h" | "hr" | "hrs" => 3600.0,
            "d" => 86400.0,
            _ => return Err(bad()),
        };
        total += n * mult;
    }
    Ok(Duration::from_secs_f64(total))
}

/// Parses `512M`, `8G`, `100K`, `1.5G`, `2T` or a number of bytes (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let bad = || format!("`{s}` is not a size: write it like \"512M\" or \"8G\"");
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let n: f64 = t[..split].parse().map_err(|_| bad())?;
    let mult = match t[split..]
        .trim()
        .to_ascii_uppercase()
        .trim_end_matches("IB")
        .trim_end_matches('B')
    {
        "" => 1.0,
        "K" => 1024.0,
        "M" => 1024.0 * 1024.0,
        "G" => 1024.0 * 1024.0 * 1024.0,
        "T" => 1024.0f64.powi(4),
        _ => return Err(bad()),
    };
    let bytes = n * mult;
    if bytes >= 1.0 && bytes.is_finite() {
        Ok(bytes as u64)
    } else {
        Err(bad())
    }
}

/// Formats a duration compactly for people: `850ms`, `4.2s`, `6m05s`, `2h03m`.
pub fn format_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 1.0 {
        format!("{}ms", d.as_millis())
    } else if s < 60.0 {
        format!("{s:.1}s")
    } else if s < 3600.0 {
        format!("{}m{:02}s", (s / 60.0) as u64, (s as u64) % 60)
    } else {
        format!("{}h{:02}m", (s / 3600.0) as u64, ((s as u64) % 3600) / 60)
    }
}

/// The closest candidate by edit distance, if it is close enough to be a plausible typo.
pub fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (edit_distance(word, c), *c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

mod duration_secs {
    pub fn serialize<S: serde::Serializer>(
        d: &std::time::Duration,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

mod opt_duration_secs {
    pub fn serialize<S: serde::Serializer>(
        d: &Option<std::time::Duration>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&d.as_secs_f64()),
            None => s.serialize_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[loop]
program   = "program.md"
editable  = ["train.py"]
protected = ["prepare.py"]
pinned    = ["data/"]

[verify]
command   = "python3 train.py"
timeout   = "6m"
metric    = "val_bpb"
direction = "minimize"
min_delta = 0.0005

[agent]
kind = "knobs"

[stop]
max_experiments = 100
max_time = "8h"
patience = 30
max_cost_usd = 20
"#;

    fn parse(text: &str) -> Result<Spec, SpecError> {
        Spec::parse(Path::new("hone.toml"), text)
    }

    #[test]
    fn store_url_and_repo() {
        let s = parse(&format!(
            "{GOOD}\n[store]\nurl = \"postgres://h@db/hone\"\nrepo = \"git@example.com:lab/p.git\"\n"
        ))
        .unwrap();
        assert_eq!(s.exec.store_url.as_deref(), Some("postgres://h@db/hone"));
        assert_eq!(
            s.exec.store_repo.as_deref(),
            Some("git@example.com:lab/p.git")
        );
        let e = parse(&format!("{GOOD}\n[store]\nrepo = \"x\"\n")).unwrap_err();
        assert_eq!(e.key, "store.repo");
        assert!(e.message.contains("needs [store] url"), "{e}");
        let e = parse(&format!(
            "{GOOD}\n[store]\nurl = \"postgres://db/hone\"\nrepo = \" \"\n"
        ))
        .unwrap_err();
        assert!(e.message.contains("non-empty"), "{e}");
        let e = parse(&format!("{GOOD}\n[store]\nurl = \"mysql://db\"\n")).unwrap_err();
        assert_eq!(e.key, "store.url");
    }

    #[test]
    fn review_kinds_and_edit_modes() {
        let base = GOOD.replace("max_cost_usd = 20\n", "");
        let s = parse(&format!(
            "{base}\n[review]\nkind = \"anthropic\"\nmodel = \"claude-sonnet-4\"\nmax_tokens = 300\n"
        ))
        .unwrap();
        let llm = s.review.llm.unwrap();
        assert_eq!(s.review.kind, Some(AgentKind::Anthropic));
        assert_eq!(llm.api_key_env, "ANTHROPIC_API_KEY");
        assert_eq!(llm.max_tokens, 300);
        let e = parse(&format!(
            "{base}\n[review]\nkind = \"openai\"\nmodel = \"m\"\ncommand = \"x\"\n"
        ))
        .unwrap_err();
        assert!(e.message.contains("not both"), "{e}");
        let e = parse(&format!("{base}\n[review]\nmodel = \"m\"\n")).unwrap_err();
        assert!(e.message.contains("only means something"), "{e}");
        let e = parse(&format!("{base}\n[review]\nkind = \"openai\"\n")).unwrap_err();
        assert_eq!(e.key, "review.model");
        // max_cost_usd needs the reviewer's price too.
        let e = parse(&format!(
            "{GOOD}\n[review]\nkind = \"openai\"\nmodel = \"my-local-model\"\n"
        ))
        .unwrap_err();
        assert!(e.message.contains("needs the price"), "{e}");
        let agent = |mode: &str| {
            parse(&base.replace(
                "kind = \"knobs\"",
                &format!("kind = \"openai\"\nmodel = \"m\"\nedit_mode = \"{mode}\""),
            ))
        };
        assert_eq!(
            agent("patch").unwrap().agent.llm.unwrap().edit_mode,
            EditMode::Patch
        );
        assert!(agent("diff").unwrap_err().message.contains("\"patch\""));
        let e = parse(
            &base
                .replace("kind = \"knobs\"", "kind = \"gemini\"")
                .replace("patience = 30", "patience = 30\nmax_cost_usd = 1"),
        )
        .unwrap_err();
        assert!(e.message.contains("use max_tokens"), "{e}");
    }

    #[test]
    fn parses_the_design_example() {
        let s = parse(GOOD).unwrap();
        assert_eq!(s.loop_.editable, vec!["train.py"]);
        assert_eq!(s.verify.timeout, Duration::from_secs(360));
        assert_eq!(s.verify.kill_grace, Duration::from_secs(5));
        assert_eq!(s.verify.direction, Direction::Minimize);
        assert_eq!(s.stop.max_time, Some(Duration::from_secs(8 * 3600)));
        assert_eq!(s.stop.patience, Some(30));
        assert_eq!(s.stop.max_consecutive_failures, 10);
        assert_eq!(s.agent.kind, AgentKind::Knobs);
    }

    /// A spec that sets a key of every section (for the serialized-form test).
    const EVERY: &str = r#"
[loop]
program = "prog.md"
notes = "NOTES.md"
skills = ["skills/a.md"]
editable = ["train.py", "model/*.py"]
protected = ["prepare.py"]
pinned = ["data/"]

[verify]
command = "python3 train.py"
timeout = "1h30m"
kill_grace = 2.5
metric = "val_bpb"
direction = "max"
min_delta = 0.001
constraints = ["peak_vram_mb<=40000.0", "  tokens_per_s >= 1e3 "]
metric_regex = "score (?P<value>[0-9.]+)"
max_log_bytes = 2048
env = { CUDA_VISIBLE_DEVICES = "0", B = "x" }
baseline_repeats = 3
noise_k = 1.5
confirm = 2
retest_every = 4
seed_env = "SEED"
prefer_simpler = true
evaluate = "python3 eval.py"
outputs = ["out/*.pt"]
holdout_gate = true

[verify.holdout]
command = "python3 holdout.py"
timeout = "2m"
hide = ["data/holdout"]

[agent]
kind = "openai"
model = "gpt-4.1-mini"
base_url = "http://localhost:8000/v1/"
api_key_env = "MY_KEY"
temperature = 0.7
max_tokens = 2000
request_timeout = "30s"
max_attempts = 0
edit_mode = "patch"
timeout = "10m"
seed = 7

[stop]
max_experiments = 50
max_time = "2h"
patience = 5
target = 0.9
max_consecutive_failures = 3
max_cost_usd = 2.5
max_tokens = 100000

[sandbox]
kind = "bwrap"
memory = "8G"
cpu_time = "500ms"
max_output = "1M"
max_processes = 64
network = false
required = false

[review]
kind = "anthropic"
model = "claude-sonnet-4-20250514"
instructions = "REVIEW.md"
max_diff_lines = 200
forbid = ["TODO", "import os"]
timeout = "1m"

[exec]
backend = "slurm"
shared_dir = "/shared/hone"
partition = "gpu"
time = "2h"
workers = 2
slots = [{ CUDA_VISIBLE_DEVICES = "0" }, { CUDA_VISIBLE_DEVICES = "1" }]

[store]
url = "postgres://h@db/hone"
repo = "git@example.com:lab/p.git"

[outer]
mechanisms = ["tabu", "bandit"]
strategy_every = 5
max_frozen = 3
segment = 8
portfolio = true
probation = 6
research_every = 20

[[notify]]
url = "https://hooks.example/a"

[[schedule]]
cron = "0 2 * * *"

[trigger]
secret_env = "S"
"#;

    /// The JSON each run stores (`serde_json::to_string(&spec)`) and the CLI and dashboard
    /// read back by key: it must not change, byte for byte.
    #[test]
    fn serialized_form_is_unchanged() {
        let json = |text: &str| serde_json::to_string(&parse(text).unwrap()).unwrap();
        assert_eq!(json(GOOD), GOOD_JSON);
        assert_eq!(json(MIN), MIN_JSON);
        assert_eq!(json(EVERY), EVERY_JSON);
        let workers = format!(
            "{MIN}[exec]\nbackend = \"workers\"\nremote = \"git@h:r.git\"\nlease = \"45s\"\n\
             [store]\nurl = \"postgres://db/h\"\n[agent]\nkind = \"claude\"\nmodel = \"opus\"\n\
             extra_args = [\"--x\"]\n"
        );
        assert_eq!(json(&workers), WORKERS_JSON);
    }

    const GOOD_JSON: &str = r#"{"loop":{"program":"program.md","notes":".hone/notes.md","skills":[],"editable":["train.py"],"protected":["prepare.py"],"pinned":["data/"]},"verify":{"command":"python3 train.py","timeout":360.0,"kill_grace":5.0,"metric":"val_bpb","direction":"minimize","min_delta":0.0005,"constraints":[],"metric_regex":null,"max_log_bytes":1000000,"env":[],"baseline_repeats":1,"noise_k":2.0,"confirm":0,"retest_every":null,"seed_env":null,"prefer_simpler":false,"evaluate":null,"outputs":[],"holdout":null,"holdout_gate":false},"agent":{"kind":"knobs","command":null,"timeout":1800.0,"seed":null,"llm":null,"model":null,"extra_args":[]},"stop":{"max_experiments":100,"max_time":28800.0,"patience":30,"target":null,"max_consecutive_failures":10,"max_cost_usd":20.0,"max_tokens":null},"sandbox":{"bwrap":false,"network":true,"required":true,"memory_bytes":null,"cpu_seconds":null,"max_output_bytes":null,"max_processes":null},"review":{"command":null,"kind":null,"llm":null,"instructions":null,"max_diff_lines":null,"forbid":[],"timeout":600.0},"exec":{"backend":"Local","shared_dir":null,"remote":null,"lease":30.0,"workers":1,"slots":[]},"outer":{"mechanisms":[],"strategy_every":null,"max_frozen":2,"segment":10,"portfolio":false,"probation":10,"research_every":null,"scripts":[]}}"#;
    const MIN_JSON: &str = r#"{"loop":{"program":null,"notes":".hone/notes.md","skills":[],"editable":["a.py"],"protected":[],"pinned":[]},"verify":{"command":"x","timeout":600.0,"kill_grace":5.0,"metric":"m","direction":"minimize","min_delta":0.0,"constraints":[],"metric_regex":null,"max_log_bytes":1000000,"env":[],"baseline_repeats":1,"noise_k":2.0,"confirm":0,"retest_every":null,"seed_env":null,"prefer_simpler":false,"evaluate":null,"outputs":[],"holdout":null,"holdout_gate":false},"agent":{"kind":"knobs","command":null,"timeout":1800.0,"seed":null,"llm":null,"model":null,"extra_args":[]},"stop":{"max_experiments":100,"max_time":null,"patience":null,"target":null,"max_consecutive_failures":10,"max_cost_usd":null,"max_tokens":null},"sandbox":{"bwrap":false,"network":true,"required":true,"memory_bytes":null,"cpu_seconds":null,"max_output_bytes":null,"max_processes":null},"review":{"command":null,"kind":null,"llm":null,"instructions":null,"max_diff_lines":null,"forbid":[],"timeout":600.0},"exec":{"backend":"Local","shared_dir":null,"remote":null,"lease":30.0,"workers":1,"slots":[]},"outer":{"mechanisms":[],"strategy_every":null,"max_frozen":2,"segment":10,"portfolio":false,"probation":10,"research_every":null,"scripts":[]}}"#;
    const EVERY_JSON: &str = r#"{"loop":{"program":"prog.md","notes":"NOTES.md","skills":["skills/a.md"],"editable":["train.py","model/*.py"],"protected":["prepare.py"],"pinned":["data/"]},"verify":{"command":"python3 train.py","timeout":5400.0,"kill_grace":2.5,"metric":"val_bpb","direction":"maximize","min_delta":0.001,"constraints":["peak_vram_mb<=40000.0","  tokens_per_s >= 1e3 "],"metric_regex":"score (?P<value>[0-9.]+)","max_log_bytes":2048,"env":[["CUDA_VISIBLE_DEVICES","0"],["B","x"]],"baseline_repeats":3,"noise_k":1.5,"confirm":2,"retest_every":4,"seed_env":"SEED","prefer_simpler":true,"evaluate":"python3 eval.py","outputs":["out/*.pt"],"holdout":{"command":"python3 holdout.py","metric":"val_bpb","timeout":120.0,"min_delta":0.001,"hide":["data/holdout"]},"holdout_gate":true},"agent":{"kind":"openai","command":null,"timeout":600.0,"seed":7,"llm":{"model":"gpt-4.1-mini","base_url":"http://localhost:8000/v1","api_key_env":"MY_KEY","temperature":0.7,"max_tokens":2000,"request_timeout":30.0,"max_attempts":1,"price_in_per_mtok":null,"price_out_per_mtok":null,"edit_mode":"patch"},"model":"gpt-4.1-mini","extra_args":[]},"stop":{"max_experiments":50,"max_time":7200.0,"patience":5,"target":0.9,"max_consecutive_failures":3,"max_cost_usd":2.5,"max_tokens":100000},"sandbox":{"bwrap":true,"network":false,"required":false,"memory_bytes":8589934592,"cpu_seconds":1,"max_output_bytes":1048576,"max_processes":64},"review":{"command":null,"kind":"anthropic","llm":{"model":"claude-sonnet-4-20250514","base_url":"https://api.anthropic.com","api_key_env":"ANTHROPIC_API_KEY","temperature":null,"max_tokens":4096,"request_timeout":120.0,"max_attempts":4,"price_in_per_mtok":null,"price_out_per_mtok":null,"edit_mode":"blocks"},"instructions":"REVIEW.md","max_diff_lines":200,"forbid":["TODO","import os"],"timeout":60.0},"exec":{"backend":"Slurm","shared_dir":"/shared/hone","remote":null,"lease":30.0,"workers":2,"slots":[[["CUDA_VISIBLE_DEVICES","0"]],[["CUDA_VISIBLE_DEVICES","1"]]]},"outer":{"mechanisms":["tabu","bandit"],"strategy_every":5,"max_frozen":3,"segment":8,"portfolio":true,"probation":6,"research_every":20,"scripts":[]}}"#;
    const WORKERS_JSON: &str = r#"{"loop":{"program":null,"notes":".hone/notes.md","skills":[],"editable":["a.py"],"protected":[],"pinned":[]},"verify":{"command":"x","timeout":600.0,"kill_grace":5.0,"metric":"m","direction":"minimize","min_delta":0.0,"constraints":[],"metric_regex":null,"max_log_bytes":1000000,"env":[],"baseline_repeats":1,"noise_k":2.0,"confirm":0,"retest_every":null,"seed_env":null,"prefer_simpler":false,"evaluate":null,"outputs":[],"holdout":null,"holdout_gate":false},"agent":{"kind":"claude","command":null,"timeout":1800.0,"seed":null,"llm":null,"model":"opus","extra_args":["--x"]},"stop":{"max_experiments":100,"max_time":null,"patience":null,"target":null,"max_consecutive_failures":10,"max_cost_usd":null,"max_tokens":null},"sandbox":{"bwrap":false,"network":true,"required":true,"memory_bytes":null,"cpu_seconds":null,"max_output_bytes":null,"max_processes":null},"review":{"command":null,"kind":null,"llm":null,"instructions":null,"max_diff_lines":null,"forbid":[],"timeout":600.0},"exec":{"backend":"Workers","shared_dir":null,"remote":"git@h:r.git","lease":45.0,"workers":1,"slots":[]},"outer":{"mechanisms":[],"strategy_every":null,"max_frozen":2,"segment":10,"portfolio":false,"probation":10,"research_every":null,"scripts":[]}}"#;

    fn err(text: &str) -> SpecError {
        parse(text).unwrap_err()
    }

    const MIN: &str = "[loop]\neditable = [\"a.py\"]\n[verify]\ncommand = \"x\"\nmetric = \"m\"\n";

    #[test]
    fn notify_schedule_and_trigger_entries() {
        let s = parse(&format!(
            "{MIN}\n[[notify]]\nurl = \"https://hooks.example/a\"\non = [\"keep\", \"finish\"]\nformat = \"slack\"\n\n\
             [[notify]]\nurl_env = \"HOOK\"\nretries = 1\nbackoff = \"250ms\"\n\n\
             [[schedule]]\ncron = \"0 2 * * *\"\ntag = \"nightly\"\nmax_experiments = 30\ntime = \"1h\"\npr = true\ncatch_up = true\n\n\
             [trigger]\nsecret_env = \"MY_SECRET\"\n"
        ))
        .unwrap();
        assert_eq!(s.notify.len(), 2);
        assert_eq!(
            s.notify[0].url,
            NotifyUrl::Literal("https://hooks.example/a".into())
        );
        assert_eq!(s.notify[0].on, [NotifyOn::Keep, NotifyOn::Finish]);
        assert_eq!(s.notify[0].format, NotifyFormat::Slack);
        assert_eq!(s.notify[0].line, 7);
        assert_eq!(s.notify[1].url, NotifyUrl::Env("HOOK".into()));
        assert_eq!(s.notify[1].on, NotifyOn::ALL);
        assert_eq!(s.notify[1].format, NotifyFormat::Json);
        assert_eq!(s.notify[1].backoff, Duration::from_millis(250));
        let sc = &s.schedule[0];
        assert_eq!(
            (sc.cron.as_str(), sc.tag.as_str()),
            ("0 2 * * *", "nightly")
        );
        assert_eq!(sc.max_experiments, Some(30));
        assert_eq!(sc.time, Some(Duration::from_secs(3600)));
        assert!(sc.pr && sc.finalize && sc.catch_up && !sc.squash);
        assert_eq!(s.trigger.secret_env, "MY_SECRET");
        // Secrets never reach the run's stored spec.
        let json = serde_json::to_string(&s).unwrap();
        assert!(!json.contains("hooks.example"), "{json}");
        assert_eq!(
            parse(MIN).unwrap().trigger.secret_env,
            "HONE_WEBHOOK_SECRET"
        );
    }

    #[test]
    fn automation_errors_name_the_line_and_key() {
        let at = |extra: &str| err(&format!("{MIN}{extra}"));
        let e = at("[[notify]]\nurl = \"https://h/x\"\non = [\"keeps\"]\n");
        assert_eq!((e.line, e.key.as_str()), (8, "notify.on"));
        assert!(e.message.contains("did you mean `keep`?"), "{e}");
        let e = at("[[notify]]\nurl = \"https://h/x\"\nformat = \"teams\"\n");
        assert_eq!((e.line, e.key.as_str()), (8, "notify.format"));
        let e = at("[[notify]]\nurl = \"ftp://h/x\"\n");
        assert_eq!((e.line, e.key.as_str()), (7, "notify.url"));
        let e = at("[[notify]]\non = [\"keep\"]\n");
        assert_eq!((e.line, e.key.as_str()), (6, "notify.url"));
        let e = at("[[notify]]\nurl = \"https://h/x\"\nurl_env = \"X\"\n");
        assert_eq!(e.key, "notify.url_env");
        let e = at("[[notify]]\nurl = \"https://h/x\"\nretires = 2\n");
        assert_eq!((e.line, e.key.as_str()), (8, "notify.retires"));
        assert!(e.message.contains("did you mean `retries`?"), "{e}");
        let e = at("[notify]\nurl = \"https://h/x\"\n");
        assert!(e.message.contains("[[notify]]"), "{e}");
        let e = at("[[schedule]]\ncron = \"0 25 * * *\"\n");
        assert_eq!((e.line, e.key.as_str()), (7, "schedule.cron"));
        assert!(e.message.contains("is not a cron expression"), "{e}");
        let e = at("[[schedule]]\ntag = \"x\"\n");
        assert_eq!(e.key, "schedule.cron");
        let e = at("[[schedule]]\ncron = \"@daily\"\ntag = \"bad tag\"\n");
        assert_eq!((e.line, e.key.as_str()), (8, "schedule.tag"));
        let e = at("[[schedule]]\ncron = \"@daily\"\nagent = \"gpt\"\n");
        assert_eq!(e.key, "schedule.agent");
        let e = at("[[schedule]]\ncron = \"@daily\"\ncatch_up = \"yes\"\n");
        assert_eq!((e.line, e.key.as_str()), (8, "schedule.catch_up"));
        let e = at("[trigger]\nsecret = \"x\"\n");
        assert_eq!(e.key, "trigger.secret");
    }

    #[test]
    fn unknown_key_names_line_and_suggests() {
        let t = GOOD.replace("timeout   = \"6m\"", "timout    = \"6m\"");
        let e = err(&t);
        assert_eq!(e.line, 10, "{e}");
        assert_eq!(e.key, "verify.timout");
        assert!(e.message.contains("did you mean `timeout`"), "{e}");
    }

    #[test]
    fn outer_mechanisms_are_checked_by_name_with_a_suggestion() {
        let s = parse(&format!(
            "{GOOD}\n[outer]\nmechanisms = [\"tabu\", \"plateau\"]\nstrategy_every = 5\n"
        ))
        .unwrap();
        assert_eq!(s.outer.mechanisms, vec!["tabu", "plateau"]);
        assert_eq!(s.outer.strategy_every, Some(5));
        assert_eq!((s.outer.segment, s.outer.portfolio), (10, false));
        assert!(parse(GOOD).unwrap().outer.mechanisms.is_empty());
        let e = err(&format!(
            "{GOOD}\n[outer]\nmechanisms = [\n  \"tabu\",\n  \"bandti\",\n]\n"
        ));
        assert_eq!((e.line, e.key.as_str()), (27, "outer.mechanisms"), "{e}");
        assert!(e.message.contains("did you mean `bandit`?"), "{e}");
        let e = err(&format!("{GOOD}\n[outer]\nstrategy_evry = 5\n"));
        assert!(e.message.contains("did you mean `strategy_every`"), "{e}");
        let e = err(&format!("{GOOD}\n[outer]\nsegment = 0\n"));
        assert_eq!((e.line, e.key.as_str()), (25, "outer.segment"), "{e}");
        let e = err(&format!("mechanisms = [\"tabu\"]\n{GOOD}"));
        assert!(e.message.contains("move it under [outer]"), "{e}");
        let e = err(&format!("{GOOD}\n[outer]\nportfolio = true\n"));
        assert!(e.message.contains("list some"), "{e}");
    }

    #[test]
    fn outer_research_needs_an_http_llm_and_scripts_must_be_rhai() {
        let e = err(&format!("{GOOD}\n[outer]\nresearch_every = 10\n"));
        assert_eq!(
            (e.line, e.key.as_str()),
            (25, "outer.research_every"),
            "{e}"
        );
        assert!(e.message.contains("needs [agent] kind = \"openai\""), "{e}");
        let e = err(&format!("{GOOD}\n[outer]\nresearch_every = 0\n"));
        assert!(e.message.contains("at least 1"), "{e}");
        let e = err(&format!(
            "{GOOD}\n[outer]\nscripts = [\n  \"a.rhai\",\n  \"b.py\",\n]\n"
        ));
        assert_eq!((e.line, e.key.as_str()), (27, "outer.scripts"), "{e}");
        let s = parse(&format!("{GOOD}\n[outer]\nscripts = [\"m/a.rhai\"]\n")).unwrap();
        assert_eq!(s.outer.scripts, vec!["m/a.rhai"]);
        assert_eq!(s.outer.research_every, None);
        // Loading checks that each script is there and compiles.
        let dir = tempfile::tempdir().unwrap();
        let toml = dir.path().join("hone.toml");
        std::fs::write(
            &toml,
            format!("{GOOD}\n[outer]\nscripts = [\n  \"ok.rhai\",\n  \"bad.rhai\",\n]\n"),
        )
        .unwrap();
        std::fs::write(dir.path().join("ok.rhai"), "fn on_start(v) { () }").unwrap();
        let e = Spec::load(&toml).unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (27, "outer.scripts"), "{e}");
        assert!(e.message.contains("cannot read `bad.rhai`"), "{e}");
        std::fs::write(dir.path().join("bad.rhai"), "fn on_start(v) { let }").unwrap();
        let e = Spec::load(&toml).unwrap_err();
        assert_eq!(e.line, 27, "{e}");
        assert!(e.message.contains("`bad.rhai` does not compile"), "{e}");
        std::fs::write(dir.path().join("bad.rhai"), "fn on_start(v) { 1 }").unwrap();
        assert!(Spec::load(&toml).is_ok());
    }

    #[test]
    fn unknown_section_suggests() {
        let e = err(&format!("{GOOD}\n[stpo]\nx = 1\n"));
        assert_eq!(e.line, 24, "{e}");
        assert!(e.message.contains("did you mean `stop`"), "{e}");
    }

    #[test]
    fn wrong_type_names_value_line() {
        let e = err(&GOOD.replace("patience = 30", "patience = \"thirty\""));
        assert_eq!((e.line, e.key.as_str()), (21, "stop.patience"), "{e}");
        assert!(e.message.contains("expected a whole number"), "{e}");
    }

    #[test]
    fn missing_required_key() {
        let e = err(&GOOD.replace("metric    = \"val_bpb\"\n", ""));
        assert_eq!((e.line, e.key.as_str()), (8, "verify.metric"), "{e}");
        let e = err("[loop]\neditable = [\"a\"]\n");
        assert_eq!(e.key, "verify.command");
        assert!(e.message.contains("section is missing"), "{e}");
    }

    #[test]
    fn contradictions() {
        let e = err(&GOOD.replace("protected = [\"prepare.py\"]", "protected = [\"train.py\"]"));
        assert_eq!((e.line, e.key.as_str()), (5, "loop.protected"), "{e}");
        let e = err(&GOOD.replace("kind = \"knobs\"", "kind = \"command\""));
        assert_eq!(e.key, "agent.command", "{e}");
        let e = err(&GOOD.replace("min_delta = 0.0005", "min_delta = -1"));
        assert_eq!((e.line, e.key.as_str()), (13, "verify.min_delta"), "{e}");
    }

    #[test]
    fn bad_duration_and_direction() {
        let e = err(&GOOD.replace("\"6m\"", "\"six minutes\""));
        assert_eq!((e.line, e.key.as_str()), (10, "verify.timeout"), "{e}");
        let e = err(&GOOD.replace("\"minimize\"", "\"down\""));
        assert_eq!((e.line, e.key.as_str()), (12, "verify.direction"), "{e}");
    }

    #[test]
    fn toml_syntax_error_has_line() {
        let e = err(&GOOD.replace("patience = 30", "patience = = 30"));
        assert_eq!(e.line, 21, "{e}");
        assert!(e.message.starts_with("invalid TOML"), "{e}");
    }

    #[test]
    fn top_level_key_is_sent_to_its_section() {
        let e = err(&format!("metric = \"x\"\n{GOOD}"));
        assert_eq!((e.line, e.key.as_str()), (1, "metric"), "{e}");
        assert!(e.message.contains("move it under [verify]"), "{e}");
    }

    #[test]
    fn numeric_durations_and_duplicates() {
        let s = parse(&GOOD.replace("\"6m\"", "2.5")).unwrap();
        assert_eq!(s.verify.timeout, Duration::from_millis(2500));
        let e = err(&GOOD.replace("\"6m\"", "-5"));
        assert!(e.message.contains("must not be negative"), "{e}");
        let e = err(&GOOD.replace("patience = 30", "patience = 30\npatience = 31"));
        assert_eq!(e.line, 22, "{e}");
        assert!(e.message.contains("patience = 31"), "{e}");
    }

    #[test]
    fn exec_section() {
        let s = parse(&format!(
            "{GOOD}\n[exec]\nbackend = \"slurm\"\nshared_dir = \"/shared/hone\"\npartition = \"gpu\"\ngres = \"gpu:1\"\ncpus = 8\nmem = \"32G\"\ntime = \"2h\"\nextra_args = [\"--qos=high\"]\n"
        ))
        .unwrap();
        assert_eq!(s.exec.backend, Backend::Slurm);
        assert_eq!(
            s.exec.shared_dir.as_deref(),
            Some(Path::new("/shared/hone"))
        );
        assert_eq!(s.exec.slurm.partition.as_deref(), Some("gpu"));
        assert_eq!(s.exec.slurm.cpus, Some(8));
        assert_eq!(s.exec.slurm.time, Some(Duration::from_secs(7200)));
        assert_eq!(s.exec.slurm.extra_args, vec!["--qos=high".to_string()]);
        assert_eq!(parse(GOOD).unwrap().exec.backend, Backend::Local);
        let e = err(&format!("{GOOD}\n[exec]\nbackend = \"slurm\"\n"));
        assert_eq!(e.key, "exec.backend", "{e}");
        assert!(e.message.contains("shared_dir"), "{e}");
        let e = err(&format!(
            "{GOOD}\n[exec]\nbackend = \"slurm\"\nshared_dir = \"rel\"\n"
        ));
        assert_eq!(e.key, "exec.shared_dir", "{e}");
        let e = err(&format!("{GOOD}\n[exec]\npartition = \"gpu\"\n"));
        assert_eq!(e.key, "exec.partition", "{e}");
        let e = err(&format!("{GOOD}\n[exec]\nbackend = \"k8s\"\n"));
        assert!(e.message.contains("slurm"), "{e}");
        let e = err(&format!("{GOOD}\n[exec]\npartion = \"gpu\"\n"));
        assert!(e.message.contains("partition"), "{e}");
    }

    #[test]
    fn sandbox_sizes_and_kinds() {
        let s = parse(&format!(
            "{GOOD}\n[sandbox]\nmemory = \"1.5G\"\ncpu_time = \"2m\"\nmax_output = 1024\n"
        ))
        .unwrap();
        assert_eq!(s.sandbox.memory_bytes, Some(3 * 512 * 1024 * 1024));
        assert_eq!(s.sandbox.cpu_seconds, Some(120));
        assert_eq!(s.sandbox.max_output_bytes, Some(1024));
        let e = err(&format!("{GOOD}\n[sandbox]\nmemory = \"lots\"\n"));
        assert_eq!(e.key, "sandbox.memory", "{e}");
        let e = err(&format!("{GOOD}\n[sandbox]\nkind = \"jail\"\n"));
        assert!(
            e.message.contains("expected \"rlimits\" or \"bwrap\""),
            "{e}"
        );
        let e = err(&format!("{GOOD}\n[sandbox]\nnetwork = false\n"));
        assert!(e.message.contains("needs kind = \"bwrap\""), "{e}");
        let s = parse(&format!(
            "{GOOD}\n[sandbox]\nkind = \"bwrap\"\nnetwork = false\n"
        ))
        .unwrap();
        assert!(s.sandbox.bwrap && !s.sandbox.network && s.sandbox.required);
        assert_eq!(parse_size("512M"), Ok(512 * 1024 * 1024));
        assert_eq!(parse_size("8GiB"), Ok(8 << 30));
        assert!(parse_size("0").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("6m"), Ok(Duration::from_secs(360)));
        assert_eq!(parse_duration("8h"), Ok(Duration::from_secs(8 * 3600)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("12"), Ok(Duration::from_secs(12)));
        assert!(parse_duration("6 parsecs").is_err());
        assert!(parse_duration("m").is_err());
    }

    #[test]
    fn closest_key() {
        assert_eq!(closest("comand", VERIFY_KEYS), Some("command"));
        assert_eq!(closest("zzzzzzzz", VERIFY_KEYS), None);
    }

    #[test]
    fn workers_and_slots_parse_and_are_checked() {
        let s = parse(MIN).unwrap();
        assert_eq!(s.exec.workers, 1);
        assert!(s.exec.slots.is_empty());
        let s = parse(&format!(
            "{MIN}[exec]\nworkers = 2\nslots = [{{ CUDA_VISIBLE_DEVICES = \"0\" }}, {{ CUDA_VISIBLE_DEVICES = \"1\", X = \"y\" }}]\n"
        ))
        .unwrap();
        assert_eq!(s.exec.workers, 2);
        assert_eq!(
            s.exec.slots[1],
            vec![
                ("CUDA_VISIBLE_DEVICES".to_string(), "1".to_string()),
                ("X".to_string(), "y".to_string())
            ]
        );
        let s = parse(&format!(
            "{MIN}[exec]\nworkers = 2\n[[exec.slots]]\nGPU = \"0\"\n[[exec.slots]]\nGPU = \"1\"\n"
        ))
        .unwrap();
        assert_eq!(s.exec.slots.len(), 2);
        let e = err(&format!(
            "{MIN}[exec]\nworkers = 3\nslots = [{{ A = \"0\" }}]\n"
        ));
        assert_eq!((e.line, e.key.as_str()), (8, "exec.slots"), "{e}");
        let e = err(&format!("{MIN}[exec]\nworkers = 0\n"));
        assert_eq!(e.key, "exec.workers");
        let e = err(&format!("{MIN}[exec]\nslots = [{{ A = 1 }}]\n"));
        assert!(e.message.contains("`A` must be a string"), "{e}");
        let e = err(&format!("{MIN}[exec]\nslots = [{{ HONE_RUN = \"x\" }}]\n"));
        assert!(e.message.contains("not a variable a slot may set"), "{e}");
        let e = err(&format!("{MIN}[exec]\nslots = \"0,1\"\n"));
        assert_eq!(e.key, "exec.slots");
        // Every backend runs several verifications at once.
        let s = parse(&format!(
            "{MIN}[exec]\nbackend = \"slurm\"\nshared_dir = \"/s\"\nworkers = 2\n"
        ))
        .unwrap();
        assert_eq!(s.exec.workers, 2);
    }
}
