//! LLMs over HTTP as proposers: `kind = "openai"` (any OpenAI-compatible chat-completions
//! server) and `kind = "anthropic"` (the Messages API). hone builds the prompt, the model
//! answers with SEARCH/REPLACE blocks (`edit_mode = "blocks"`, [`super::blocks`]), an
//! apply_patch patch (`"patch"`, [`super::patch`]) or knob values (`"knobs"`), and hone
//! applies them in the worktree; an edit that does not apply gets one repair round-trip
//! quoting it, then the experiment is `invalid`.
//!
//! Every call is priced before it is made: the worst case (the prompt's tokens plus
//! `max_tokens`) must fit in what is left of `max_cost_usd` and `max_tokens`, or the run stops
//! on its budget without sending the request. 429, 5xx and timeouts are retried with
//! exponential backoff and jitter (honouring `Retry-After`), a bounded number of times.
//! The API key is read from the environment for each call and never stored or logged.
//!
//! The HTTP client is ureq (blocking) rather than reqwest: the engine is synchronous and runs
//! one call at a time, so an async runtime would add a large dependency tree and nothing else.

use std::time::Duration;

use serde_json::{json, Value};

mod answer;
mod completion;
mod kept;
mod knob_answer;
mod models;
mod system;
mod wire;

use answer::{hypothesis, keep_notes, unmarked};
use kept::{append_agent_log, write_prompt};
pub use knob_answer::validate_knob_answer;
pub use models::ModelCheck;
use system::{SYSTEM, SYSTEM_PATCH};

use super::blocks::{self, EditBlock};
use super::patch;
use super::spend::Hold;
use super::{prompt, Meter, Proposal, ProposeContext, ProposeError, Proposer};
use crate::spec::{AgentKind, EditMode, LlmSpec};

/// First retry delay; doubled each attempt, capped at 60 s, plus jitter.
const BACKOFF_BASE: Duration = Duration::from_millis(500);

/// What one call cost and said.
#[derive(Clone, Debug)]
pub struct Completion {
    pub text: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The server said what the call used (else hone charges the worst case).
    pub usage_reported: bool,
    /// The answer stopped at `max_tokens` (OpenAI's `finish_reason: "length"`, Anthropic's
    /// `stop_reason: "max_tokens"`): what it holds may be incomplete.
    pub cut_off: bool,
    /// Why each attempt before the one that answered failed (a 5xx, a 429, a timeout), for the
    /// agent's log: the spend of those that may have been billed is in the call's charge.
    pub failed_before: Vec<String>,
}

/// Why a call failed for good.
#[derive(Debug)]
pub enum CallError {
    /// Not worth retrying, or retries exhausted: the experiment is invalid.
    Failed(String),
    /// The cancel check (a second Ctrl-C) said stop: the experiment is aborted. A request that
    /// was out when it did is charged at its worst case.
    Cancelled,
    /// The configuration is wrong (a refused key, a missing model): the run stops.
    Fatal(String),
    /// The next attempt could cross the budget: the run stops, nothing sent.
    Budget(String),
    /// Every attempt met an unreachable or overloaded server (connection, 429, 5xx).
    Unavailable(String),
}

/// What one attempt of a call came to.
enum Attempt {
    /// The call is over: a completion, or an error not worth retrying.
    Over(Result<Completion, CallError>),
    /// Worth another attempt: why this one failed, and the server's `Retry-After` (seconds).
    Retry(String, Option<f64>),
}

/// A client for one HTTP LLM (`openai` or `anthropic`): the proposer's, or the reviewer's.
pub struct LlmClient {
    pub kind: AgentKind,
    pub llm: LlmSpec,
    agent: ureq::Agent,
    rng: u64,
    /// Attempts of the current call charged at their worst case (their use not reported).
    estimated: std::sync::atomic::AtomicU32,
    /// An answer of the current call that was not JSON has been charged (the next ones of
    /// the call are not: a proxy's error page, retried, is one charge, not one an attempt).
    unreadable_charged: std::sync::atomic::AtomicBool,
}

/// The proposer for `openai` and `anthropic`.
pub struct ChatProposer {
    client: LlmClient,
}

impl ChatProposer {
    pub fn new(kind: AgentKind, llm: LlmSpec) -> ChatProposer {
        ChatProposer {
            client: LlmClient::new(kind, llm),
        }
    }
}

impl LlmClient {
    pub fn new(kind: AgentKind, llm: LlmSpec) -> LlmClient {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(llm.request_timeout))
            .http_status_as_error(false)
            .build()
            .into();
        LlmClient {
            kind,
            llm,
            agent,
            rng: 0x2545_F491_4F6C_DD1D,
            estimated: std::sync::atomic::AtomicU32::new(0),
            unreadable_charged: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn jitter(&mut self) -> f64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Charges `meter` an attempt's worst case, and counts it (see [`LlmClient::estimated`]).
    fn charge_worst(&self, meter: &Meter<'_>, (cost, tokens): (f64, u64)) {
        meter.add(cost, tokens);
        self.estimated
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// How many attempts of the last call were charged at their worst case.
    pub fn estimated(&self) -> u32 {
        self.estimated.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Dollars for a number of input and output tokens (0 when no price is known).
    fn price(&self, input: u64, output: u64) -> f64 {
        let (pi, po) = self.llm.prices().unwrap_or((0.0, 0.0));
        ((input as f64 * pi + output as f64 * po) / 1e6).min(crate::presets::MAX_REPORTED_USD)
    }

    /// The most a call with this many bytes of prompt text can cost: (dollars, tokens).
    fn worst(&self, prompt_bytes: usize) -> (f64, u64) {
        // A token of the byte-level tokenizers these APIs use stands for at least one byte, so
        // a prompt holds at most as many tokens as bytes, plus the messages' framing. Real
        // text averages 3-4 bytes a token, but a model can make its own later prompts dense
        // (a file of random punctuation it wrote): half the bytes let such a run spend half
        // as much again as `max_cost_usd`.
        let input = prompt_bytes as u64 + 64;
        (
            self.price(input, self.llm.max_tokens),
            input + self.llm.max_tokens,
        )
    }

    /// Holds a call's worst case against the budget (see [`Meter::hold`]) until the returned
    /// hold is dropped; refuses a call whose worst case could cross it.
    fn reserve<'m>(
        &self,
        meter: &Meter<'m>,
        prompt_bytes: usize,
    ) -> Result<Option<Hold<'m>>, ProposeError> {
        let (worst_cost, worst_tokens) = self.worst(prompt_bytes);
        let left = match meter.hold((worst_cost, worst_tokens)) {
            Ok(hold) => return Ok(hold),
            Err(left) => left,
        };
        Err(ProposeError::Budget(match left.usd_left {
            Some(l) if worst_cost > l => format!(
                "budget: the next call could cost ${worst_cost:.4} (its worst case: the prompt's {prompt_bytes} bytes as as many tokens, plus [agent] max_tokens = {}) and ${:.4} of max_cost_usd is left",
                self.llm.max_tokens,
                l.max(0.0)
            ),
            _ => format!(
                "budget: the next call could use {worst_tokens} tokens (its worst case: the prompt's {prompt_bytes} bytes as as many tokens, plus [agent] max_tokens = {}) and {} of max_tokens are left",
                self.llm.max_tokens,
                left.tokens_left.unwrap_or(0)
            ),
        }))
    }

    /// One completion, with retries.
    ///
    /// Every attempt is reserved against the budget before it is sent and charged after: the
    /// usage the server reports, or the worst case when it reports none or the attempt ended
    /// in a way the provider may still bill (a timeout, a cut-off body). `cancel` (the second
    /// Ctrl-C) is watched throughout: no new attempt starts once it says stop, and one already
    /// started is abandoned and charged at its worst case (it may reach the provider all the
    /// same, say when it was still connecting).
    pub fn call(
        &mut self,
        meter: &Meter<'_>,
        system: &str,
        messages: &[(String, String)],
        cancel: &dyn Fn() -> bool,
        note: &dyn Fn(&str),
    ) -> Result<Completion, CallError> {
        self.estimated
            .store(0, std::sync::atomic::Ordering::Relaxed);
        self.unreadable_charged
            .store(false, std::sync::atomic::Ordering::Relaxed);
        let chars = system.len() + messages.iter().map(|(_, c)| c.len()).sum::<usize>();
        let worst = self.worst(chars);
        let key = std::env::var(&self.llm.api_key_env)
            .ok()
            .filter(|k| !k.is_empty());
        let (url, body) = self.request(system, messages);
        let body = body.to_string();
        let mut failed: Vec<String> = Vec::new();
        for attempt in 0..self.llm.max_attempts {
            let hold = self
                .reserve(meter, chars)
                .map_err(|e| CallError::Budget(e.to_string()))?;
            // A parallel run's call may have waited for other calls' holds: stopped meanwhile,
            // it is not sent.
            if cancel() {
                return Err(CallError::Cancelled);
            }
            let tried = self.attempt(meter, (&url, &body, &key), worst, cancel);
            // Charged by the attempt: its hold goes.
            drop(hold);
            match tried {
                Attempt::Over(done) => {
                    return done.map(|mut c| {
                        c.failed_before = failed;
                        c
                    })
                }
                Attempt::Retry(why, retry_after) => {
                    if !self.backoff(attempt, retry_after, &why, cancel, note) {
                        return Err(CallError::Cancelled);
                    }
                    failed.push(why);
                }
            }
        }
        Err(CallError::Unavailable(format!(
            "gave up after {} attempts; last: {}",
            self.llm.max_attempts,
            failed.last().map_or("", String::as_str)
        )))
    }

    /// The endpoint and the JSON body of a call, in the provider's dialect.
    fn request(&self, system: &str, messages: &[(String, String)]) -> (String, Value) {
        match self.kind {
            AgentKind::Anthropic => {
                let msgs: Vec<Value> = messages
                    .iter()
                    .map(|(r, c)| json!({"role": r, "content": c}))
                    .collect();
                let mut body = json!({"model": self.llm.model, "max_tokens": self.llm.max_tokens, "system": system, "messages": msgs});
                if let Some(t) = self.llm.temperature {
                    body["temperature"] = json!(t);
                }
                (format!("{}/v1/messages", self.llm.base_url), body)
            }
            _ => {
                let mut msgs = vec![json!({"role": "system", "content": system})];
                msgs.extend(
                    messages
                        .iter()
                        .map(|(r, c)| json!({"role": r, "content": c})),
                );
                // OpenAI's own API wants `max_completion_tokens` (its reasoning models refuse
                // `max_tokens`); other compatible servers know `max_tokens`.
                let cap = if self.llm.base_url.contains("api.openai.com") {
                    "max_completion_tokens"
                } else {
                    "max_tokens"
                };
                let mut body = json!({"model": self.llm.model, "messages": msgs});
                body[cap] = json!(self.llm.max_tokens);
                if let Some(t) = self.llm.temperature {
                    body["temperature"] = json!(t);
                }
                (format!("{}/chat/completions", self.llm.base_url), body)
            }
        }
    }

    /// Sends the request once and reads the answer; charges `meter` the worst case when the
    /// attempt ended in a way the provider may still bill (cancelled by `cancel` while out
    /// included).
    fn attempt(
        &self,
        meter: &Meter<'_>,
        (url, body, key): (&str, &str, &Option<String>),
        (worst_cost, worst_tokens): (f64, u64),
        cancel: &dyn Fn() -> bool,
    ) -> Attempt {
        let mut headers = vec![("content-type", "application/json".to_string())];
        match (self.kind, key) {
            (AgentKind::Anthropic, key) => {
                if let Some(k) = key {
                    headers.push(("x-api-key", k.clone()));
                }
                headers.push(("anthropic-version", "2023-06-01".into()));
            }
            (_, Some(k)) => headers.push(("authorization", format!("Bearer {k}"))),
            (_, None) => {}
        }
        let request = wire::Request {
            agent: self.agent.clone(),
            url: url.to_string(),
            headers,
            body: body.to_string(),
        };
        let answer = match wire::exchange(request, cancel) {
            wire::Exchange::Done(Ok(answer)) => answer,
            wire::Exchange::NotSent(why) => return Attempt::Retry(why, None),
            // Nothing reached a server: nothing to bill.
            wire::Exchange::Done(Err(wire::Failure::Unsent(e))) => {
                return Attempt::Retry(format!("request not sent: {e}"), None)
            }
            wire::Exchange::Done(Err(failure)) => {
                // A timeout or a dropped connection after the request went out, or an answer
                // cut off or too large, may still be billed: count the worst case.
                self.charge_worst(meter, (worst_cost, worst_tokens));
                return match failure {
                    wire::Failure::TooLarge => Attempt::Over(Err(CallError::Failed(format!(
                        "the answer is larger than {} MiB and was refused (charged at its worst case)",
                        wire::MAX_BODY_BYTES >> 20
                    )))),
                    wire::Failure::Send(e) | wire::Failure::Read(e) if e == wire::TIMED_OUT => {
                        Attempt::Retry(
                            format!(
                                "{e} ({}; a slow server, a local model on a long prompt, needs a larger `request_timeout`; each attempt is charged at its worst case)",
                                crate::spec::format_duration(self.llm.request_timeout)
                            ),
                            None,
                        )
                    }
                    wire::Failure::Send(e) | wire::Failure::Unsent(e) => {
                        Attempt::Retry(format!("request failed: {e}"), None)
                    }
                    wire::Failure::Read(e) => {
                        Attempt::Retry(format!("reading the answer failed: {e}"), None)
                    }
                };
            }
            wire::Exchange::Cancelled => {
                // Given up while out: the provider may bill it all the same.
                self.charge_worst(meter, (worst_cost, worst_tokens));
                return Attempt::Over(Err(CallError::Cancelled));
            }
        };
        self.judge(meter, url, &answer, (worst_cost, worst_tokens))
    }

    /// What an answer's HTTP status means: a completion (charged), a retry, or the end.
    fn judge(
        &self,
        meter: &Meter<'_>,
        url: &str,
        answer: &wire::Answer,
        (worst_cost, worst_tokens): (f64, u64),
    ) -> Attempt {
        let (status, text, retry_after) = (answer.status, answer.text.as_str(), answer.retry_after);
        match status {
            200..=299 => {
                let done = self.parse_completion(text);
                let usage = match &done {
                    Ok(c) if c.usage_reported => Some((c.input_tokens, c.output_tokens)),
                    Ok(_) => None,
                    // An answer hone cannot use (no choices, a refusal) that says what it used
                    // is charged that, not the worst case.
                    Err(_) => self.reported_usage(text),
                };
                let unreadable = matches!(&done, Err(why) if why.starts_with(NOT_JSON));
                match usage {
                    Some((i, o)) => meter.add(self.price(i, o), i.saturating_add(o)),
                    // One worst case a call for answers that were not JSON at all.
                    None if unreadable
                        && self
                            .unreadable_charged
                            .swap(true, std::sync::atomic::Ordering::Relaxed) => {}
                    None => self.charge_worst(meter, (worst_cost, worst_tokens)),
                }
                match done {
                    // A body that is not JSON at all is the server's (or a proxy's) fault, not
                    // the model's: asked again, and an outage if it lasts.
                    Err(why) if why.starts_with(NOT_JSON) => Attempt::Retry(why, None),
                    done => Attempt::Over(done.map_err(CallError::Failed)),
                }
            }
            // OpenAI's "out of quota" is a 429 that waiting does not end.
            429 if text.contains("insufficient_quota") => {
                Attempt::Over(Err(CallError::Fatal(format!(
                    "the server says the account is out of quota (429): {}",
                    snippet(text)
                ))))
            }
            401 | 403 => Attempt::Over(Err(CallError::Fatal(format!(
                "the server refused the request ({status}): check the key in ${}",
                self.llm.api_key_env
            )))),
            404 => Attempt::Over(Err(CallError::Fatal(format!(
                "{url} answered 404: check base_url and model = \"{}\"",
                self.llm.model
            )))),
            // Not a model's server at all (a web server on the port): no wait will change it.
            405 | 501 => Attempt::Over(Err(CallError::Fatal(format!(
                "{url} answered {status} (it does not take a chat request): is base_url the model's server? {}",
                snippet(text)
            )))),
            429 | 500..=599 => {
                Attempt::Retry(format!("HTTP {status}: {}", snippet(text)), retry_after)
            }
            // Kept long enough for the server's own words (an error's code and advice).
            _ => Attempt::Over(Err(CallError::Failed(format!(
                "HTTP {status}: {}{}",
                snippet_of(text, 1000),
                if too_long(text) {
                    " (the prompt is longer than the model takes: fewer or smaller editable files, a shorter program.md or skills, or a model with a longer context)"
                } else {
                    ""
                }
            )))),
        }
    }

    /// Waits before the next attempt (unless this was the last one); `false` when `cancel`
    /// said stop meanwhile.
    pub(super) fn backoff(
        &mut self,
        attempt: u64,
        retry_after: Option<f64>,
        why: &str,
        cancel: &dyn Fn() -> bool,
        note: &dyn Fn(&str),
    ) -> bool {
        if attempt + 1 < self.llm.max_attempts {
            let backoff = BACKOFF_BASE.as_secs_f64() * 2f64.powi(attempt as i32);
            let wait = retry_after
                .unwrap_or(backoff * (1.0 + 0.25 * self.jitter()))
                .clamp(0.0, 60.0);
            // A longer `Retry-After` is asked again after a minute (a call that fails then
            // is an outage, waited out between experiments): said, not silently cut.
            let asked = match retry_after.filter(|&r| r > wait) {
                Some(r) => format!(
                    ", not the {} it asked for (a call waits at most a minute)",
                    crate::spec::format_duration(Duration::from_secs_f64(r))
                ),
                None => String::new(),
            };
            // A wait can be a minute (a `Retry-After`), several in a row: said, so that a
            // run whose output goes to a file does not look hung.
            note(&format!(
                "the model's server: {why}; asking again in {}{asked} (attempt {} of {}; Ctrl-C twice stops the run now)",
                crate::spec::format_duration(Duration::from_secs_f64(wait)),
                attempt + 2,
                self.llm.max_attempts
            ));
            return crate::util::pause(Duration::from_secs_f64(wait), cancel);
        }
        true
    }
}

/// How an answer that is not JSON is said (see `completion.rs`): a server's fault, retried.
const NOT_JSON: &str = "the answer is not JSON";

/// Whether a server's error says the prompt is longer than its model's context.
fn too_long(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    t.contains("context_length_exceeded")
        || t.contains("maximum context length")
        || t.contains("context window")
        || t.contains("prompt is too long")
}

/// What a failed call means for the experiment.
fn call_error(kind: AgentKind, e: CallError) -> ProposeError {
    match e {
        CallError::Failed(m) => ProposeError::Invalid(format!("{}: {m}", kind.as_str())),
        CallError::Fatal(m) => ProposeError::Fatal(m),
        CallError::Budget(m) => ProposeError::Budget(m),
        CallError::Unavailable(m) => ProposeError::Unavailable(format!("{}: {m}", kind.as_str())),
        CallError::Cancelled => ProposeError::Cancelled,
    }
}

fn snippet(text: &str) -> String {
    snippet_of(text, 200)
}

/// At most `max` characters of a server's `text`, on one line.
fn snippet_of(text: &str, max: usize) -> String {
    prompt::sanitize(text, max).replace('\n', " ")
}

impl Proposer for ChatProposer {
    fn name(&self) -> &str {
        self.client.kind.as_str()
    }

    fn propose(&mut self, ctx: &ProposeContext<'_>) -> Result<Proposal, ProposeError> {
        match self.client.llm.edit_mode {
            EditMode::Knobs => return self.propose_knobs(ctx),
            EditMode::Patch => return self.propose_patch(ctx),
            EditMode::Blocks => {}
        }
        self.edit_rounds(ctx, SYSTEM, "edit block(s)", |answer, _| {
            let edits: Vec<EditBlock> = blocks::parse(answer);
            if edits.is_empty() {
                return Err(ProposeError::Invalid(
                    "the model's answer has no SEARCH/REPLACE block".into(),
                ));
            }
            if edits.len() > blocks::MAX_EDITS {
                return Err(ProposeError::Invalid(blocks::too_many_edits(edits.len())));
            }
            let failures = blocks::apply(ctx.worktree, &edits);
            let Some(first) = failures.first() else {
                return Ok(None);
            };
            let mut repair = String::from(match (failures.len(), edits.len()) {
                (1, 1) => "Your block could not be applied. Send it corrected:\n",
                (f, e) if f == e => "None of your blocks could be applied. Send them corrected:\n",
                _ => "Some of your blocks could not be applied; the others were. Send corrected blocks for these only:\n",
            });
            for f in &failures {
                repair.push_str(&format!(
                    "\n{}\n<<<<<<< SEARCH\n{}=======\n{}>>>>>>> REPLACE\nProblem: {}\n",
                    f.block.path, f.block.search, f.block.replace, f.why
                ));
            }
            Ok(Some(Unapplied {
                count: failures.len(),
                first: first.why.clone(),
                repair,
            }))
        })
    }
}

/// What of an answer's edits did not apply: how many parts, the first one's reason, and the
/// message that asks the model to correct them.
struct Unapplied {
    count: usize,
    first: String,
    repair: String,
}

impl ChatProposer {
    /// The edit modes' exchange: the model answers `system` and the prompt, `apply` applies
    /// its answer (given the round, 0 or 1); edits that did not apply get one repair
    /// round-trip, then the experiment is invalid (`parts` names them in the reason).
    fn edit_rounds(
        &mut self,
        ctx: &ProposeContext<'_>,
        system: &str,
        parts: &str,
        mut apply: impl FnMut(&str, usize) -> Result<Option<Unapplied>, ProposeError>,
    ) -> Result<Proposal, ProposeError> {
        let user = prompt::build(ctx)?;
        let mut messages = vec![("user".to_string(), user)];
        let mut description = String::new();
        for round in 0..2 {
            let done = self.ask(ctx, system, &messages)?;
            keep_notes(ctx, &done.text);
            // The first answer's hypothesis (or first line) describes the change; a repair's
            // replaces it only with a HYPOTHESIS line of its own.
            let said = hypothesis(&done.text);
            if round == 0
                || done
                    .text
                    .lines()
                    .any(|l| l.trim().starts_with("HYPOTHESIS:"))
            {
                description = said;
                (ctx.describe)(&description);
            }
            let applied = apply(&done.text, round).map_err(|e| match e {
                ProposeError::Invalid(why) if done.cut_off => ProposeError::Invalid(format!(
                    "{why}: the answer was cut off at max_tokens ({}); raise [agent] max_tokens",
                    self.client.llm.max_tokens
                )),
                e => e,
            });
            let Some(unapplied) = applied? else {
                return Ok(Proposal {
                    description,
                    config: None,
                    cost_usd: 0.0, // already counted through ctx.spend
                    source: None,
                    // A patch may add files: git lists what the worktree holds.
                    in_place: false,
                });
            };
            if round == 1 {
                return Err(ProposeError::Invalid(format!(
                    "{} {parts} still did not apply after a repair round: {}",
                    unapplied.count, unapplied.first
                )));
            }
            messages.push(("assistant".into(), done.text));
            messages.push(("user".into(), unapplied.repair));
        }
        Err(ProposeError::Invalid(format!("no {parts} applied")))
    }
}

impl ChatProposer {
    /// `edit_mode = "patch"`: the model answers with an apply_patch patch; file operations
    /// that do not apply get one repair round-trip quoting the failing hunk.
    fn propose_patch(&mut self, ctx: &ProposeContext<'_>) -> Result<Proposal, ProposeError> {
        self.edit_rounds(ctx, SYSTEM_PATCH, "patch part(s)", |answer, round| {
            if round == 0 && !patch::contains_patch(answer) {
                return Err(ProposeError::Invalid(
                    "the model's answer has no `*** Begin Patch` patch".into(),
                ));
            }
            let failures = match patch::parse(answer) {
                Ok(ops) if patch::edits(&ops) > blocks::MAX_EDITS => {
                    return Err(ProposeError::Invalid(blocks::too_many_edits(patch::edits(&ops))));
                }
                Ok(ops) => patch::apply(ctx.worktree, &ops),
                Err(f) => vec![f],
            };
            let Some(first) = failures.first() else {
                return Ok(None);
            };
        let mut repair = String::from("Parts of your patch could not be applied; the other files were changed as you asked. Send one new patch (`*** Begin Patch` ... `*** End Patch`) for these only, against the files as they are now:\n");
        for f in &failures {
            let file = if f.path.is_empty() {
                String::new()
            } else {
                format!(" in `{}`", f.path)
            };
            repair.push_str(&format!("\nProblem{file}: {}\n", f.why));
            if !f.quote.is_empty() {
                let nl = if f.quote.ends_with('\n') { "" } else { "\n" };
                repair.push_str(&format!("```\n{}{nl}```\n", f.quote));
            }
        }
            Ok(Some(Unapplied {
                count: failures.len(),
                first: first.why.clone(),
                repair,
            }))
        })
    }
}

/// The line `hone show` counts in the agent's log: how many attempts of this call were
/// charged at their worst case (none: no line).
fn estimated_note(ctx: &ProposeContext<'_>, attempts: u32) {
    if attempts > 0 {
        append_agent_log(
            ctx,
            &format!("--- this call: {attempts} attempt(s) charged at the worst case ---\n"),
        );
    }
}

impl ChatProposer {
    /// One question and its answer's text, outside a proposal (the outer loop's strategy):
    /// reserved against the budget and charged to `ctx` like any proposal's call.
    pub fn complete(
        &mut self,
        ctx: &ProposeContext<'_>,
        system: &str,
        user: &str,
    ) -> Result<String, ProposeError> {
        self.ask(ctx, system, &[("user".to_string(), user.to_string())])
            .map(|c| c.text)
    }

    /// One call of the model with `system` and the conversation `messages`, metered against
    /// `ctx`'s budget; a failed call as the proposal's error.
    fn ask(
        &mut self,
        ctx: &ProposeContext<'_>,
        system: &str,
        messages: &[(String, String)],
    ) -> Result<Completion, ProposeError> {
        let kind = self.client.kind;
        let answer = messages.len().div_ceil(2);
        write_prompt(ctx, system, messages);
        let before = ctx.spent();
        let done = match self
            .client
            .call(&ctx.meter(), system, messages, ctx.cancel, ctx.note)
        {
            Ok(done) => done,
            Err(e) => {
                let e = call_error(kind, e);
                // A call that may have reached the server is charged its worst case (one that
                // said what it used, that).
                let charged = ctx.spent().1.saturating_sub(before.1);
                let charge = match (charged, self.client.estimated()) {
                    (0, _) => String::new(),
                    (_, 0) => format!(" (charged what the server reported: {charged} tokens)"),
                    _ => format!(" (charged at its worst case: {charged} tokens)"),
                };
                estimated_note(ctx, self.client.estimated());
                append_agent_log(ctx, &format!("--- no answer {answer}: {e}{charge} ---\n"));
                return Err(e);
            }
        };
        estimated_note(ctx, self.client.estimated());
        // What the model said, for `hone show` and whoever looks into an invalid experiment.
        let mut entry: String = done
            .failed_before
            .iter()
            .enumerate()
            .map(|(k, why)| format!("--- answer {answer}, attempt {} failed: {why} ---\n", k + 1))
            .collect();
        let max = self.client.llm.max_tokens;
        if done.usage_reported && done.output_tokens > max {
            // Charged as reported (it may well be billed so), and said at once: a server
            // that answers past the bound can take the spend over max_cost_usd.
            let said = format!(
                "the server reported {} output tokens for an answer of at most {max} ([agent] max_tokens): charged as reported; check the server (or the prices in hone.toml)",
                done.output_tokens
            );
            (ctx.note)(&said);
            append_agent_log(ctx, &format!("--- {said} ---\n"));
        }
        let usage = if done.usage_reported {
            format!(
                "{} tokens in, {} out",
                done.input_tokens, done.output_tokens
            )
        } else {
            "usage not reported: charged at the call's worst case".to_string()
        };
        entry.push_str(&format!(
            "--- answer {answer} ({usage}{}) ---\n{}\n",
            if done.cut_off {
                ", cut off at max_tokens"
            } else {
                ""
            },
            unmarked(&done.text)
        ));
        append_agent_log(ctx, &entry);
        Ok(done)
    }
}
