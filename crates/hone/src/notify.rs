//! Notifications (`[[notify]]`): a POST to a webhook when a run keeps a candidate, finishes,
//! stops on a failure or stops on its budget.
//!
//! Each endpoint has its own background thread and queue, so a slow or dead endpoint never
//! blocks the loop nor delays another endpoint. A delivery is retried with exponential backoff
//! (`backoff`, doubling, `retries` times); an endpoint that still fails is given up on for that
//! message, and the failure is written to the run's event log (`notify_failed`) by the thread
//! itself, so it is on disk even if hone is killed later. When the run ends, `close` waits a
//! bounded time for what is still queued; what is left then is reported, never waited for.
//!
//! The URL itself is never logged or stored: it often carries a secret (Slack's do).

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::spec::{NotifyFormat, NotifyOn, NotifySpec};
use crate::store::{Store, StoreLocation};

/// How long `close` waits for queued notifications at the end of a run, at most.
pub const FLUSH_WAIT: Duration = Duration::from_secs(15);

/// One message, in both shapes.
#[derive(Clone, Debug)]
pub struct Notice {
    pub on: NotifyOn,
    /// The run's tag.
    pub run: String,
    /// One line for people (Slack's `text`).
    pub text: String,
    /// Facts for programs (merged into the JSON format's object).
    pub data: serde_json::Value,
}

impl Notice {
    /// The request body for a format.
    pub fn body(&self, format: NotifyFormat) -> serde_json::Value {
        match format {
            // Slack reads `<...>` as links and mentions (`<!channel>`); a description written
            // by an agent must not ping anyone, so the three control characters are escaped as
            // Slack asks.
            NotifyFormat::Slack => serde_json::json!({
                "text": self.text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
            }),
            NotifyFormat::Json => {
                let mut v = serde_json::json!({
                    "event": self.on.as_str(),
                    "run": self.run,
                    "text": self.text,
                });
                if let (Some(obj), Some(extra)) = (v.as_object_mut(), self.data.as_object()) {
                    for (k, x) in extra {
                        obj.entry(k.clone()).or_insert_with(|| x.clone());
                    }
                }
                v
            }
        }
    }
}

/// A notification that could not be delivered.
#[derive(Clone, Debug, PartialEq)]
pub struct Undelivered {
    /// `[[notify]]` entry's line in hone.toml, and the endpoint's host (never the full URL).
    pub line: usize,
    pub host: String,
    /// The message's kind (`None`: the endpoint was still busy when hone stopped waiting).
    pub on: Option<NotifyOn>,
    pub attempts: u32,
    pub error: String,
}

impl std::fmt::Display for Undelivered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.on {
            Some(on) => write!(
                f,
                "the {} notification to {} ([[notify]] at line {}) was not delivered after {} attempt{}: {}",
                on.as_str(),
                self.host,
                self.line,
                self.attempts,
                if self.attempts == 1 { "" } else { "s" },
                self.error
            ),
            None => write!(
                f,
                "notifications to {} ([[notify]] at line {}) were given up on: {}",
                self.host, self.line, self.error
            ),
        }
    }
}

struct Worker {
    on: Vec<NotifyOn>,
    line: usize,
    host: String,
    tx: Option<mpsc::Sender<Notice>>,
    /// Signalled once the thread has drained its queue.
    done: mpsc::Receiver<()>,
}

/// The background senders of a run.
pub struct Notifier {
    workers: Vec<Worker>,
    failures: Arc<Mutex<Vec<Undelivered>>>,
    /// Set by `close`: retries that would end after it are not started.
    deadline: Arc<Mutex<Option<Instant>>>,
}

/// The host of a URL, for messages.
fn host_of(url: &str) -> String {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    authority.rsplit('@').next().unwrap_or("").to_string()
}

impl Notifier {
    /// Starts one thread per endpoint. `db` is the store where a given-up delivery is recorded.
    /// An endpoint whose URL cannot be resolved (`url_env` unset) is reported by `close` as
    /// undelivered for each message it should have had.
    pub fn start(targets: &[NotifySpec], db: Option<StoreLocation>) -> Notifier {
        let failures = Arc::new(Mutex::new(Vec::new()));
        let deadline = Arc::new(Mutex::new(None));
        let workers = targets
            .iter()
            .map(|t| {
                let (tx, rx) = mpsc::channel::<Notice>();
                let (done_tx, done) = mpsc::channel();
                let target = t.clone();
                let (db, failures, deadline) = (db.clone(), failures.clone(), deadline.clone());
                let url = target.url.resolve();
                let host = match (&url, &t.url) {
                    (Ok(u), _) => host_of(u),
                    (Err(_), crate::spec::NotifyUrl::Env(v)) => format!("${v}"),
                    (Err(_), crate::spec::NotifyUrl::Literal(u)) => host_of(u),
                };
                let worker_host = host.clone();
                std::thread::spawn(move || {
                    let agent: ureq::Agent = ureq::Agent::config_builder()
                        .timeout_global(Some(target.timeout))
                        .http_status_as_error(false)
                        .build()
                        .into();
                    for notice in rx {
                        let result = match &url {
                            Ok(u) => deliver(&agent, u, &target, &notice, &deadline),
                            Err(e) => Err((0, e.clone())),
                        };
                        if let Err((attempts, error)) = result {
                            let u = Undelivered {
                                line: target.line,
                                host: worker_host.clone(),
                                on: Some(notice.on),
                                attempts,
                                error,
                            };
                            record(db.as_ref(), &notice.run, &u);
                            if let Ok(mut f) = failures.lock() {
                                f.push(u);
                            }
                        }
                    }
                    let _ = done_tx.send(());
                });
                Worker {
                    on: t.on.clone(),
                    line: t.line,
                    host,
                    tx: Some(tx),
                    done,
                }
            })
            .collect();
        Notifier {
            workers,
            failures,
            deadline,
        }
    }

    /// A notifier that sends nothing.
    pub fn none() -> Notifier {
        Notifier::start(&[], None)
    }

    /// Queues a notice for every endpoint that wants its kind; never blocks.
    pub fn send(&self, notice: &Notice) {
        for w in &self.workers {
            if w.on.contains(&notice.on) {
                if let Some(tx) = &w.tx {
                    let _ = tx.send(notice.clone());
                }
            }
        }
    }

    /// Waits up to `wait` for queued notifications, then returns every delivery that failed
    /// (plus one entry per endpoint still busy when the wait ran out).
    pub fn close(mut self, wait: Duration) -> Vec<Undelivered> {
        let end = Instant::now() + wait;
        if let Ok(mut d) = self.deadline.lock() {
            *d = Some(end);
        }
        for w in &mut self.workers {
            w.tx = None;
        }
        let mut late = Vec::new();
        for w in &self.workers {
            let left = end.saturating_duration_since(Instant::now());
            if w.done.recv_timeout(left).is_err() {
                late.push(Undelivered {
                    line: w.line,
                    host: w.host.clone(),
                    on: None,
                    attempts: 0,
                    error: format!(
                        "still sending when the run ended, after waiting {}s",
                        wait.as_secs()
                    ),
                });
            }
        }
        let mut out = self.failures.lock().map(|f| f.clone()).unwrap_or_default();
        out.extend(late);
        out
    }
}

/// Sends one notice with retries; `Err((attempts, last error))` when it gave up.
fn deliver(
    agent: &ureq::Agent,
    url: &str,
    target: &NotifySpec,
    notice: &Notice,
    deadline: &Mutex<Option<Instant>>,
) -> Result<(), (u32, String)> {
    let body = notice.body(target.format).to_string();
    let mut last = String::new();
    let mut wait = target.backoff;
    for attempt in 0..=target.retries {
        if attempt > 0 {
            let closing = deadline.lock().ok().and_then(|d| *d);
            if closing.is_some_and(|d| Instant::now() + wait > d) {
                return Err((
                    attempt,
                    format!("{last} (no time left to retry: the run ended)"),
                ));
            }
            std::thread::sleep(wait);
            wait = (wait * 2).min(Duration::from_secs(300));
        }
        match agent
            .post(url)
            .header("content-type", "application/json")
            .header("user-agent", "hone")
            .send(body.as_str())
        {
            Ok(resp) if resp.status().is_success() => return Ok(()),
            Ok(resp) => {
                let (status, text) = crate::util::http_status_and_text(resp, 4096);
                last = format!(
                    "HTTP {status} {}",
                    crate::propose::prompt::sanitize(&text, 200)
                )
                .trim()
                .to_string();
            }
            Err(e) => last = e.to_string(),
        }
    }
    Err((target.retries + 1, last))
}

/// Writes a given-up delivery to the run's event log (best effort: the log is a record).
fn record(db: Option<&StoreLocation>, tag: &str, u: &Undelivered) {
    let Some(db) = db else { return };
    let Ok(store) = Store::open_at(db) else {
        return;
    };
    if let Ok(Some(run)) = store.run_by_tag(tag) {
        let data = serde_json::json!({
            "on": u.on.map(NotifyOn::as_str),
            "host": u.host,
            "notify_line": u.line,
            "attempts": u.attempts,
            "error": u.error,
        });
        let _ = store.append_event(run.id, None, "notify_failed", &data);
    }
}

/// What the end of a run is, for notifications: budget stops (`budget: ...`) are `Budget`,
/// other finished runs `Finish`; resumable stops that are not errors (Ctrl-C) notify nothing.
pub fn end_kind(state: &str, reason: &str, error: bool) -> Option<NotifyOn> {
    if error {
        Some(NotifyOn::Failure)
    } else if state != "stopped" {
        None
    } else if reason.starts_with("budget:") {
        Some(NotifyOn::Budget)
    } else {
        Some(NotifyOn::Finish)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_in_both_formats() {
        let n = Notice {
            on: NotifyOn::Keep,
            run: "t".into(),
            text: "kept #1 <!channel> & more".into(),
            data: serde_json::json!({"experiment": 1, "event": "not overwritten"}),
        };
        assert_eq!(
            n.body(NotifyFormat::Slack),
            serde_json::json!({"text": "kept #1 &lt;!channel&gt; &amp; more"})
        );
        assert_eq!(
            n.body(NotifyFormat::Json),
            serde_json::json!({"event": "keep", "run": "t", "text": "kept #1 <!channel> & more", "experiment": 1})
        );
    }

    fn target(url: crate::spec::NotifyUrl) -> NotifySpec {
        NotifySpec {
            url,
            on: NotifyOn::ALL.to_vec(),
            format: NotifyFormat::Json,
            retries: 0,
            backoff: Duration::from_millis(1),
            timeout: Duration::from_secs(30),
            line: 12,
        }
    }

    fn notice() -> Notice {
        Notice {
            on: NotifyOn::Finish,
            run: "t".into(),
            text: "done".into(),
            data: serde_json::Value::Null,
        }
    }

    #[test]
    fn an_unset_url_variable_and_a_busy_endpoint_are_reported() {
        let n = Notifier::start(
            &[target(crate::spec::NotifyUrl::Env(
                "HONE_TEST_SURELY_UNSET_HOOK".into(),
            ))],
            None,
        );
        n.send(&notice());
        let u = n.close(Duration::from_secs(60));
        assert_eq!(u.len(), 1);
        assert_eq!(
            u[0].to_string(),
            "the finish notification to $HONE_TEST_SURELY_UNSET_HOOK ([[notify]] at line 12) was not delivered after 0 attempts: $HONE_TEST_SURELY_UNSET_HOOK is not set"
        );
        // An endpoint that accepts the connection and never answers: `close` does not wait
        // past its bound.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/x", silent.local_addr().unwrap());
        let n = Notifier::start(&[target(crate::spec::NotifyUrl::Literal(url))], None);
        n.send(&notice());
        let u = n.close(Duration::ZERO);
        assert_eq!(u.len(), 1);
        assert_eq!(u[0].on, None);
        assert!(
            u[0].to_string()
                .contains("were given up on: still sending when the run ended"),
            "{}",
            u[0]
        );
    }

    #[test]
    fn hosts_hide_the_secret_parts() {
        assert_eq!(
            host_of("https://hooks.slack.com/services/T0/B0/XXXX"),
            "hooks.slack.com"
        );
        assert_eq!(host_of("http://user:pw@127.0.0.1:9/x?y"), "127.0.0.1:9");
    }

    #[test]
    fn end_kinds() {
        assert_eq!(
            end_kind("stopped", "reached max_experiments (3)", false),
            Some(NotifyOn::Finish)
        );
        assert_eq!(
            end_kind("stopped", "budget: reached max_tokens (9 of 8)", false),
            Some(NotifyOn::Budget)
        );
        assert_eq!(
            end_kind("interrupted", "3 failed experiments in a row", true),
            Some(NotifyOn::Failure)
        );
        assert_eq!(
            end_kind("interrupted", "interrupted by the user", false),
            None
        );
    }
}
