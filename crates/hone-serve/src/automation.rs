//! The automation endpoints and the scheduler task, shared by `hone daemon` and `hone serve`.
//!
//! - `POST /api/trigger`: starts a run. The raw body must be signed with HMAC-SHA256 and the
//!   shared secret (`X-Hub-Signature-256: sha256=<hex>`, as GitHub signs webhooks). The body is
//!   an optional JSON object of run options (`tag`, `max_experiments`, `time`, `agent`, `seed`,
//!   `finalize`, `pr`, `squash`); unknown fields are ignored, so a GitHub event can call it as
//!   is. Answers: 202 `{tag, log}` once the run's process started; 401 for a missing or bad
//!   signature (nothing starts); 409 while a run is in progress; 400 for bad options; 503 when
//!   no secret is configured.
//! - `GET /api/automation`: the current or last job and each schedule's next start.
//! - `run_scheduler`: an async task that starts `[[schedule]]` runs when they are due.
//!
//! Every decision (signatures, schedules, one run at a time) is in `hone::automation`; this
//! file only speaks HTTP and waits.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;

use hone::automation::replay::Seen;
use hone::automation::schedule::{Clock, FireKind, Scheduler, SystemClock};
use hone::automation::signature;
use hone::automation::{stamp, LaunchError, Launcher, RunRequest};
use hone::spec::{ScheduleSpec, Spec};

/// Where the scheduler keeps each entry's last start.
pub fn schedule_state_path(repo_root: &std::path::Path) -> PathBuf {
    hone::engine::StatePaths::new(repo_root)
        .dir
        .join("schedule.json")
}

/// A message for the operator (the CLI prints it; a server may log it).
pub type Messages = Arc<dyn Fn(&str) + Send + Sync>;

/// The shared state of the automation routes and the scheduler.
pub struct Automation {
    launcher: Launcher,
    /// The webhook secret, if configured.
    secret: Option<Vec<u8>>,
    /// The variable the secret is read from (for messages).
    secret_env: String,
    schedules: Vec<ScheduleSpec>,
    clock: Arc<dyn Clock>,
    messages: Messages,
    /// The next start of each schedule, as the scheduler last computed it.
    next_start: Mutex<Option<i64>>,
    /// The signatures that started runs (a request sent again is refused).
    seen: Mutex<Seen>,
}

/// How to build an `Automation`.
pub struct AutomationOptions {
    /// The repository whose runs are started.
    pub repo_root: PathBuf,
    /// The spec file given with `--spec`, passed on to each `hone run`.
    pub spec_path: Option<PathBuf>,
    /// The `hone` executable to start (`std::env::current_exe()`).
    pub program: PathBuf,
    /// `[[schedule]]` entries.
    pub schedules: Vec<ScheduleSpec>,
    /// The shared webhook secret (`None`: the trigger answers 503).
    pub secret: Option<String>,
    /// The variable the secret came from, for messages.
    pub secret_env: String,
    pub clock: Arc<dyn Clock>,
    pub messages: Messages,
}

impl AutomationOptions {
    /// Options from a validated spec: schedules from `[[schedule]]`, the secret from the
    /// variable `[trigger] secret_env` names (default `HONE_WEBHOOK_SECRET`), the system clock.
    pub fn from_spec(
        repo_root: PathBuf,
        spec_path: Option<PathBuf>,
        spec: &Spec,
        program: PathBuf,
        messages: Messages,
    ) -> AutomationOptions {
        let secret = std::env::var(&spec.trigger.secret_env)
            .ok()
            .filter(|s| !s.is_empty());
        AutomationOptions {
            repo_root,
            spec_path,
            program,
            schedules: spec.schedule.clone(),
            secret,
            secret_env: spec.trigger.secret_env.clone(),
            clock: Arc::new(SystemClock),
            messages,
        }
    }
}

impl Automation {
    pub fn new(opts: AutomationOptions) -> Arc<Automation> {
        let seen = Mutex::new(Seen::open(Seen::path(&opts.repo_root)));
        let messages = opts.messages.clone();
        let launcher =
            Launcher::new(opts.program, opts.repo_root, opts.spec_path).on_done(move |s| {
                let how = match (s.run_exit, s.finalize_exit) {
                    (Some(0), Some(0)) => "finished and was finalized".to_string(),
                    (Some(0), Some(c)) => format!("finished; finalize failed (exit {c})"),
                    (Some(0), None) => "finished".to_string(),
                    (Some(c), _) => format!("stopped with exit status {c}"),
                    (None, _) => "was killed".to_string(),
                };
                messages(&format!("run {} {how}", s.tag));
            });
        Arc::new(Automation {
            seen,
            launcher,
            secret: opts.secret.map(String::into_bytes),
            secret_env: opts.secret_env,
            schedules: opts.schedules,
            clock: opts.clock,
            messages: opts.messages,
            next_start: Mutex::new(None),
        })
    }

    /// Whether the webhook can accept anything.
    pub fn trigger_configured(&self) -> bool {
        self.secret.is_some()
    }

    /// The `[[schedule]]` entries, as (cron, tag).
    pub fn schedule_list(&self) -> Vec<(String, String)> {
        self.schedules
            .iter()
            .map(|s| (s.cron.clone(), s.tag.clone()))
            .collect()
    }

    pub fn has_schedules(&self) -> bool {
        !self.schedules.is_empty()
    }

    fn say(&self, m: &str) {
        (self.messages)(m)
    }
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": message.into() }))).into_response()
}

/// A trigger's signature checked against those that started runs and remembered before its
/// run starts (a crash in between leaves it refused, not open; [`Seen::forget`] when the run
/// cannot start), the memory held locked until then so that the same request twice at once
/// starts one run; or the answer that refuses it.
fn remember<'a>(
    auto: &'a Automation,
    sig: &str,
) -> Result<std::sync::MutexGuard<'a, Seen>, Box<Response>> {
    let mut seen = auto.seen.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(at) = seen.accepted_at(sig) {
        auto.say(&format!(
            "refused a trigger: the same signed request started a run at {} UTC",
            stamp(at, true)
        ));
        return Err(Box::new(error(
            StatusCode::CONFLICT,
            format!(
                "this exact request (the same body and signature) started a run at {} UTC already, and a request sent again is refused: to trigger again, send a new body (e.g. with a \"nonce\" field)",
                stamp(at, true)
            ),
        )));
    }
    if let Err(e) = seen.record(sig, auto.clock.now()) {
        auto.say(&format!(
            "refused a trigger: cannot remember its signature: {e}"
        ));
        return Err(Box::new(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot remember this request's signature ({e}), so it could be sent again to start another run: nothing started"),
        )));
    }
    Ok(seen)
}

/// `POST /api/trigger` and `GET /api/automation`, over shared state.
pub fn router(auto: Arc<Automation>) -> Router {
    Router::new()
        .route("/api/trigger", post(trigger))
        .route("/api/automation", get(status))
        .with_state(auto)
}

async fn trigger(State(auto): State<Arc<Automation>>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(secret) = &auto.secret else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the webhook has no secret: set ${} (or [trigger] secret_env in hone.toml) where hone runs, and sign requests with it",
                auto.secret_env
            ),
        );
    };
    let header = headers
        .get(signature::HEADER)
        .map(|v| v.to_str().unwrap_or(""));
    if let Err(e) = signature::verify(secret, &body, header) {
        auto.say(&format!("refused a trigger: {e}"));
        return error(StatusCode::UNAUTHORIZED, e.to_string());
    }
    let req: RunRequest = if body.iter().all(u8::is_ascii_whitespace) {
        RunRequest::default()
    } else {
        match serde_json::from_slice(&body) {
            Ok(r) => r,
            Err(e) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("the body must be a JSON object of run options: {e}"),
                )
            }
        }
    };
    if let Err(e) = req.validate() {
        return error(StatusCode::BAD_REQUEST, e);
    }
    let tag = req.tag_at(auto.clock.now());
    let sig = header.unwrap_or_default();
    let mut seen = match remember(&auto, sig) {
        Ok(seen) => seen,
        Err(refused) => return *refused,
    };
    let launched = auto.launcher.launch(&req, &tag);
    if launched.is_err() {
        if let Err(e) = seen.forget(sig) {
            auto.say(&format!(
                "warning: cannot forget the signature of a trigger that started nothing: {e}"
            ));
        }
    }
    match launched {
        Ok(l) => {
            auto.say(&format!(
                "trigger: started run {} (log {})",
                l.tag,
                l.log.display()
            ));
            (
                StatusCode::ACCEPTED,
                Json(json!({ "tag": l.tag, "log": l.log })),
            )
                .into_response()
        }
        Err(LaunchError::Busy(m)) => {
            auto.say(&format!("trigger refused: {m}"));
            error(StatusCode::CONFLICT, m)
        }
        Err(LaunchError::Invalid(m)) => error(StatusCode::BAD_REQUEST, m),
        Err(LaunchError::Io(m)) => error(StatusCode::INTERNAL_SERVER_ERROR, m),
    }
}

async fn status(State(auto): State<Arc<Automation>>) -> Response {
    let next = auto.next_start.lock().ok().and_then(|n| *n);
    Json(json!({
        "job": auto.launcher.status(),
        "busy": auto.launcher.busy(),
        "trigger_configured": auto.trigger_configured(),
        "schedules": auto.schedules.iter().map(|s| json!({
            "cron": s.cron, "tag": s.tag, "catch_up": s.catch_up, "pr": s.pr,
        })).collect::<Vec<_>>(),
        "next_start": next,
    }))
    .into_response()
}

/// Starts `[[schedule]]` runs when they are due, forever. It wakes at the next start, and at
/// least every `nap` (so a changed clock, a suspended machine or a test's manual clock is
/// noticed). A start that finds a run in progress is skipped and said so.
pub async fn run_scheduler(auto: Arc<Automation>, nap: Duration) {
    if auto.schedules.is_empty() {
        return;
    }
    let state = schedule_state_path(auto.launcher.repo_root());
    let mut sched = match Scheduler::new(&auto.schedules, state) {
        Ok(s) => s,
        Err(e) => {
            auto.say(&format!("schedules are off: {e}"));
            return;
        }
    };
    loop {
        let now = auto.clock.now();
        match sched.due(now) {
            Ok(fires) => {
                for f in fires {
                    let Some(entry) = sched.entry(f.index) else {
                        continue;
                    };
                    let when = stamp(f.at, false);
                    let line = entry.line;
                    if f.kind == FireKind::Skipped {
                        auto.say(&format!(
                            "schedule (hone.toml line {line}): the start at {when} UTC was missed while hone was not running; skipped (catch_up = false)"
                        ));
                        continue;
                    }
                    let req = RunRequest::from_schedule(entry, f.at);
                    let tag = req.tag_at(f.at);
                    let why = if f.kind == FireKind::CatchUp {
                        " (catching up on a missed start)"
                    } else {
                        ""
                    };
                    match auto.launcher.launch(&req, &tag) {
                        Ok(l) => auto.say(&format!(
                            "schedule (hone.toml line {line}): started run {tag}{why} (log {})",
                            l.log.display()
                        )),
                        Err(e) => auto.say(&format!(
                            "schedule (hone.toml line {line}): the start at {when} UTC was skipped: {e}"
                        )),
                    }
                }
            }
            Err(e) => auto.say(&format!("schedules: {e}")),
        }
        let next = sched.next_start(now);
        if let Ok(mut n) = auto.next_start.lock() {
            *n = next;
        }
        let wait = next
            .map(|t| Duration::from_secs(t.saturating_sub(now).max(0) as u64))
            .unwrap_or(nap)
            .min(nap);
        tokio::time::sleep(wait).await;
    }
}

/// What `hone daemon` was asked to do.
pub struct DaemonOptions {
    pub addr: SocketAddr,
    /// Required off loopback (`HONE_TOKEN`); checked on every route but the signed trigger.
    pub token: Option<String>,
    pub automation: AutomationOptions,
}

/// Why a bind address needs a token, if it does.
pub fn token_required(addr: &SocketAddr, token: Option<&str>) -> Result<(), String> {
    if addr.ip().is_loopback() || token.is_some_and(|t| !t.is_empty()) {
        Ok(())
    } else {
        Err(format!(
            "binding {} exposes hone beyond this machine: set HONE_TOKEN to a long random value (clients send `Authorization: Bearer <token>`), or bind 127.0.0.1",
            addr.ip()
        ))
    }
}

/// Runs the schedules and the trigger endpoint until Ctrl-C (or SIGTERM).
pub fn daemon(opts: DaemonOptions) -> Result<()> {
    token_required(&opts.addr, opts.token.as_deref()).map_err(anyhow::Error::msg)?;
    crate::block_on(async move {
        let listener = tokio::net::TcpListener::bind(opts.addr)
            .await
            .with_context(|| format!("cannot listen on {}", opts.addr))?;
        let local = listener
            .local_addr()
            .context("cannot read the bound address")?;
        let auto = Automation::new(opts.automation);
        let say = |m: &str| (auto.messages)(m);
        say(&format!("hone daemon: listening on http://{local}"));
        if auto.trigger_configured() {
            say("  POST /api/trigger starts a run (signed with X-Hub-Signature-256)");
        } else {
            say(&format!(
                "  POST /api/trigger is off: set ${} to a shared secret to turn it on",
                auto.secret_env
            ));
        }
        if auto.has_schedules() {
            for s in &auto.schedules {
                say(&format!(
                    "  schedule `{}` (UTC) -> runs tagged {}-<time>{}",
                    s.cron,
                    s.tag,
                    if s.pr { ", then a pull request" } else { "" }
                ));
            }
        } else {
            say("  no [[schedule]] entries in hone.toml");
        }
        tokio::spawn(run_scheduler(auto.clone(), Duration::from_secs(30)));
        let mut app = router(auto.clone()).route("/healthz", get(|| async { "ok" }));
        if let Some(token) = opts.token.filter(|t| !t.is_empty()) {
            app = app.layer(axum::middleware::from_fn(move |req, next| {
                check_token(token.clone(), req, next)
            }));
        } else {
            app = app.layer(axum::middleware::from_fn(crate::auth::loopback_only));
        }
        crate::listen::serve(listener, app, crate::Limits::default(), shutdown()).await;
        Ok(())
    })
}

async fn shutdown() {
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

/// Every route but the signed trigger needs `Authorization: Bearer <token>`.
async fn check_token(
    token: String,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if req.uri().path() == "/api/trigger" {
        return next.run(req).await;
    }
    let given = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    let (a, b) = (given.as_bytes(), token.as_bytes());
    let same = a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0;
    if same {
        next.run(req).await
    } else {
        error(
            StatusCode::UNAUTHORIZED,
            "missing or wrong token: send `Authorization: Bearer $HONE_TOKEN`",
        )
    }
}
