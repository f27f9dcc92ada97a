//! One HTTP exchange of an LLM call, on a thread of its own, so that the caller can give up
//! on it: a second Ctrl-C ends a call in flight at once instead of after its
//! `request_timeout`, and a wait between attempts as soon as it is cancelled. The abandoned
//! exchange ends by itself (the agent's global timeout bounds it) or with the process; what
//! the provider may bill for it is the caller's to charge.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

/// How often a call in flight, or a wait between attempts, looks at the cancel check.
const CANCEL_POLL: Duration = Duration::from_millis(50);

/// Largest response body read (a server that ignores max_tokens cannot exhaust memory).
pub(super) const MAX_BODY_BYTES: u64 = 8 * 1024 * 1024;

/// A request ready to go: a POST of `body` to `url` with `headers`.
pub(super) struct Request {
    pub(super) agent: ureq::Agent,
    pub(super) url: String,
    pub(super) headers: Vec<(&'static str, String)>,
    pub(super) body: String,
}

/// What the server answered.
pub(super) struct Answer {
    pub(super) status: u16,
    /// The `Retry-After` header, in seconds.
    pub(super) retry_after: Option<f64>,
    pub(super) text: String,
}

/// Why no whole answer came back (the request may have reached the provider all the same).
pub(super) enum Failure {
    /// The request may have gone out (a timeout, a dropped connection).
    Send(String),
    /// The request never left: the host was not found, or no connection was made.
    Unsent(String),
    /// The answer is larger than [`MAX_BODY_BYTES`].
    TooLarge,
    /// Cut off mid-answer.
    Read(String),
}

/// How an exchange ended.
pub(super) enum Exchange {
    Done(Result<Answer, Failure>),
    /// Nothing was sent: the exchange could not start.
    NotSent(String),
    /// The cancel check said stop while the request was out; the provider may bill it.
    Cancelled,
}

/// Sends `req` and reads the answer, looking at `cancel` while waiting.
pub(super) fn exchange(req: Request, cancel: &dyn Fn() -> bool) -> Exchange {
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("hone-llm-call".into())
        .spawn(move || {
            // The caller may have given up and dropped the receiver: nobody to tell.
            let _ = tx.send(send(req));
        });
    if let Err(e) = spawned {
        return Exchange::NotSent(format!("could not start the call: {e}"));
    }
    loop {
        match rx.recv_timeout(CANCEL_POLL) {
            Ok(answer) => return Exchange::Done(answer),
            Err(RecvTimeoutError::Timeout) if cancel() => return Exchange::Cancelled,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                return Exchange::Done(Err(Failure::Read(
                    "the call ended without an answer".into(),
                )))
            }
        }
    }
}

/// What a call that got no whole answer within `request_timeout` says (the server may be
/// up and slow: a local model on a long prompt).
pub(super) const TIMED_OUT: &str = "no answer within request_timeout";

/// The exchange itself (on its own thread).
fn send(req: Request) -> Result<Answer, Failure> {
    let mut builder = req.agent.post(&req.url);
    for (name, value) in &req.headers {
        builder = builder.header(*name, value.as_str());
    }
    let resp = builder.send(&req.body).map_err(|e| {
        if never_sent(&e) {
            Failure::Unsent(e.to_string())
        } else if matches!(e, ureq::Error::Timeout(_)) {
            Failure::Send(TIMED_OUT.into())
        } else {
            Failure::Send(e.to_string())
        }
    })?;
    let status = resp.status().as_u16();
    let retry_after = retry_after_secs(
        resp.headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
    );
    match resp
        .into_body()
        .with_config()
        .limit(MAX_BODY_BYTES)
        .read_to_string()
    {
        Ok(text) => Ok(Answer {
            status,
            retry_after,
            text,
        }),
        Err(ureq::Error::BodyExceedsLimit(_)) => Err(Failure::TooLarge),
        Err(ureq::Error::Timeout(_)) => Err(Failure::Read(TIMED_OUT.into())),
        Err(e) => Err(Failure::Read(e.to_string())),
    }
}

/// Whether `e` ended the call before any byte of the request reached a server: no address
/// for the host, or no connection (refused, or not made in time). Anything later may have
/// reached the provider, and may be billed.
fn never_sent(e: &ureq::Error) -> bool {
    use ureq::{Error, Timeout};
    match e {
        Error::HostNotFound | Error::ConnectionFailed | Error::BadUri(_) => true,
        Error::Timeout(t) => matches!(t, Timeout::Resolve | Timeout::Connect),
        Error::Io(io) => io.kind() == std::io::ErrorKind::ConnectionRefused,
        _ => false,
    }
}

/// A `Retry-After` header's wait in seconds; `None` for anything else (an HTTP date, `NaN`,
/// `inf`, a negative number: no wait a server can mean, so the backoff decides).
fn retry_after_secs(header: Option<&str>) -> Option<f64> {
    header
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        // A day at most: any later is said as asked, and the call waits a minute anyway.
        .map(|s| s.min(86_400.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An HTTP model's settings for these tests: `base_url`, attempts a call, a price (in and
    /// out) or none.
    fn test_llm(base_url: &str, max_attempts: u64, price: Option<f64>) -> crate::spec::LlmSpec {
        crate::spec::LlmSpec {
            model: "m".into(),
            base_url: base_url.into(),
            api_key_env: "HONE_TEST_UNSET_KEY".into(),
            temperature: None,
            max_tokens: 100,
            request_timeout: Duration::from_secs(30),
            max_attempts,
            price_in_per_mtok: price,
            price_out_per_mtok: price,
            edit_mode: crate::spec::EditMode::Blocks,
        }
    }
    use std::io::{BufRead, BufReader, Read};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// A server on loopback that reads one request, raises `arrived`, then holds the
    /// connection without answering until the client closes it.
    fn holding_server(arrived: Arc<AtomicBool>) -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!(
            "http://{}/v1/chat/completions",
            listener.local_addr().unwrap()
        );
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream);
            let mut len = 0usize;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let line = line.trim_end().to_ascii_lowercase();
                if line.is_empty() {
                    break;
                }
                if let Some(v) = line.strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0u8; len];
            reader.read_exact(&mut body).unwrap();
            arrived.store(true, Ordering::SeqCst);
            let mut rest = Vec::new();
            let _ = reader.read_to_end(&mut rest);
        });
        url
    }

    #[test]
    fn a_cancelled_exchange_ends_while_the_server_still_holds_the_request() {
        let arrived = Arc::new(AtomicBool::new(false));
        let url = holding_server(arrived.clone());
        // Long enough that only the cancel check can end the exchange within the test.
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        let req = Request {
            agent,
            url,
            headers: vec![("content-type", "application/json".into())],
            body: "{}".into(),
        };
        // Cancelled once the server has the whole request (a second Ctrl-C meanwhile).
        let cancel = || arrived.load(Ordering::SeqCst);
        assert!(matches!(exchange(req, &cancel), Exchange::Cancelled));
    }

    #[test]
    fn a_retry_after_longer_than_a_minute_is_said_with_the_wait_kept() {
        use super::super::LlmClient;
        use crate::spec::AgentKind;
        let llm = test_llm("http://127.0.0.1:9/v1", 3, None);
        let mut client = LlmClient::new(AgentKind::OpenAi, llm);
        let said = std::cell::RefCell::new(Vec::new());
        // Cancelled at once: the wait ends as it starts.
        let waited = client.backoff(0, Some(120.0), "HTTP 429", &|| true, &|m| {
            said.borrow_mut().push(m.to_string())
        });
        assert!(!waited);
        let said = said.into_inner();
        assert!(
            said[0].contains("asking again in 1m00s, not the 2m00s it asked for (a call waits at most a minute) (attempt 2 of 3; Ctrl-C twice stops the run now)"),
            "{said:?}"
        );
    }

    #[test]
    fn a_call_stopped_before_it_starts_sends_nothing_and_costs_nothing() {
        use super::super::{CallError, LlmClient};
        use crate::propose::spend::{Budget, Meter, Spend};
        use crate::spec::AgentKind;
        // A server that would notice any connection.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let llm = test_llm(
            &format!("http://{}/v1", listener.local_addr().unwrap()),
            3,
            Some(100.0),
        );
        let mut client = LlmClient::new(AgentKind::OpenAi, llm);
        let spent = Spend::new(None);
        let meter = Meter {
            budget: Budget {
                usd_left: Some(1.0),
                tokens_left: None,
            },
            spent: &spent,
        };
        let done = client.call(
            &meter,
            "system",
            &[("user".into(), "hi".into())],
            &|| true,
            &|_| {},
        );
        assert!(matches!(done, Err(CallError::Cancelled)));
        assert_eq!(meter.spent(), (0.0, 0));
        assert!(listener.accept().is_err(), "nothing may connect");
    }

    #[test]
    fn a_retry_after_that_is_no_number_of_seconds_is_ignored() {
        assert_eq!(super::retry_after_secs(Some(" 2.5 ")), Some(2.5));
        for bad in [
            "NaN",
            "nan",
            "inf",
            "-1",
            "Wed, 21 Oct 2026 07:28:00 GMT",
            "",
        ] {
            assert_eq!(super::retry_after_secs(Some(bad)), None, "{bad}");
        }
        assert_eq!(super::retry_after_secs(None), None);
        // Far too large for a duration: bounded (it panicked hone when said).
        assert_eq!(super::retry_after_secs(Some("1e20")), Some(86_400.0));
    }

    #[test]
    fn a_cancelled_pause_ends_early_and_an_uncancelled_one_runs_out() {
        assert!(!crate::util::pause(Duration::from_secs(600), &|| true));
        assert!(crate::util::pause(Duration::from_millis(1), &|| false));
    }

    /// A server's `usage` that claims more tokens than can be counted (up to u64's largest)
    /// is taken as at most `MAX_REPORTED_TOKENS` each, and the counters saturate: no overflow,
    /// no panic, in either API's format.
    #[test]
    fn absurd_usage_is_capped_and_counted_without_overflow() {
        use crate::presets::MAX_REPORTED_TOKENS;
        use crate::propose::spend::Spend;
        use crate::spec::AgentKind;
        let llm = test_llm("http://127.0.0.1:9/v1", 1, Some(1.0));
        let max = u64::MAX;
        let openai = super::super::LlmClient::new(AgentKind::OpenAi, llm.clone());
        let text = format!(
            r#"{{"choices":[{{"message":{{"content":"x"}}}}],"usage":{{"prompt_tokens":{max},"completion_tokens":{max}}}}}"#
        );
        let c = openai.parse_completion(&text).unwrap();
        assert_eq!(
            (c.input_tokens, c.output_tokens),
            (MAX_REPORTED_TOKENS, MAX_REPORTED_TOKENS)
        );
        let anthropic = super::super::LlmClient::new(AgentKind::Anthropic, llm);
        let text = format!(
            r#"{{"content":[{{"type":"text","text":"x"}}],"usage":{{"input_tokens":{max},"output_tokens":9223372036854775808}}}}"#
        );
        let c = anthropic.parse_completion(&text).unwrap();
        assert_eq!(
            (c.input_tokens, c.output_tokens),
            (MAX_REPORTED_TOKENS, MAX_REPORTED_TOKENS)
        );
        let spent = Spend::new(None);
        spent.add(1.0, u64::MAX);
        spent.add(1.0, u64::MAX);
        assert_eq!(spent.get(), (2.0, u64::MAX));
        // Prompt caching's reads and writes are billed too: counted as input (a write at
        // 1.25 times, rounded up), never left out.
        let text = r#"{"content":[{"type":"text","text":"x"}],"usage":{"input_tokens":100,"cache_creation_input_tokens":41,"cache_read_input_tokens":1000,"output_tokens":7}}"#;
        let c = anthropic.parse_completion(text).unwrap();
        assert_eq!((c.input_tokens, c.output_tokens), (100 + 1000 + 41 + 11, 7));
    }
}
