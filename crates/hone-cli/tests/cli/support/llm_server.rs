//! A scripted HTTP server on 127.0.0.1 that speaks the LLM providers' real wire formats
//! (OpenAI chat completions, Anthropic messages) and records every request; also the stand-in for
//! webhook and notification endpoints, and the repositories whose agent talks to it.

use super::*;

/// A scripted reply.
#[derive(Clone)]
pub(crate) enum Reply {
    /// 200 with an answer and its usage (input, output tokens).
    Answer(String, u64, u64),
    /// Any status, with headers and a body.
    Status(u16, Vec<(String, String)>, String),
    /// Never answer (the client must time out).
    Hang,
    /// 200 with an answer and `output` tokens, its input counted as a token for every byte of
    /// the request's message texts: the most a byte-level tokenizer can make of them.
    Dense(String, u64),
}

/// A recorded request: path, headers (lower-case names), body.
pub(crate) type Recorded = (String, Vec<(String, String)>, String);

pub(crate) struct LlmServer {
    pub(crate) url: String,
    pub(crate) requests: std::sync::Arc<std::sync::Mutex<Vec<Recorded>>>,
}

impl LlmServer {
    /// Serves `replies` in order (the last one repeats), as OpenAI (`anthropic = false`) or
    /// Anthropic would; a `GET .../models` gets 404 (no list), as from many servers.
    pub(crate) fn start(replies: Vec<Reply>, anthropic: bool) -> LlmServer {
        LlmServer::start_listing(replies, anthropic, (404, Vec::new()))
    }

    /// [`LlmServer::start`], with `GET .../models` answered `models`: a status and, with 200,
    /// the models listed. Those requests are neither recorded nor given a reply of `replies`.
    pub(crate) fn start_listing(
        replies: Vec<Reply>,
        anthropic: bool,
        models: (u16, Vec<&str>),
    ) -> LlmServer {
        let listing = serde_json::json!({
            "object": "list",
            "data": models.1.iter().map(|id| serde_json::json!({"id": id, "object": "model"})).collect::<Vec<_>>()
        })
        .to_string();
        let models_status = models.0;
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = requests.clone();
        std::thread::spawn(move || {
            let mut n = 0;
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { break };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    continue;
                }
                let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                let mut headers = Vec::new();
                let mut len = 0usize;
                loop {
                    let mut h = String::new();
                    reader.read_line(&mut h).unwrap();
                    let h = h.trim_end().to_string();
                    if h.is_empty() {
                        break;
                    }
                    if let Some((k, v)) = h.split_once(':') {
                        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_string());
                        if k == "content-length" {
                            len = v.parse().unwrap();
                        }
                        headers.push((k, v));
                    }
                }
                let mut body = vec![0u8; len];
                reader.read_exact(&mut body).unwrap();
                if line.starts_with("GET ") && path.ends_with("/models") {
                    let body = if models_status == 200 {
                        listing.as_str()
                    } else {
                        "{}"
                    };
                    let resp = format!("HTTP/1.1 {models_status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
                    let _ = stream.write_all(resp.as_bytes());
                    continue;
                }
                log.lock().unwrap().push((
                    path,
                    headers,
                    String::from_utf8_lossy(&body).into_owned(),
                ));
                let mut reply = replies[n.min(replies.len() - 1)].clone();
                n += 1;
                if let Reply::Dense(text, output) = reply {
                    let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                    let text_len =
                        |m: &serde_json::Value| m["content"].as_str().map_or(0, str::len);
                    let messages = v["messages"]
                        .as_array()
                        .map_or(0, |ms| ms.iter().map(text_len).sum());
                    let system = v["system"].as_str().map_or(0, str::len);
                    reply = Reply::Answer(text, (messages + system) as u64, output);
                }
                let (status, extra, body) = match reply {
                    Reply::Hang => {
                        // Hold the connection until the client gives up and closes it.
                        let mut sink = Vec::new();
                        let _ = reader.read_to_end(&mut sink);
                        continue;
                    }
                    Reply::Status(s, h, b) => (s, h, b),
                    // Made an `Answer` above, with its input counted.
                    Reply::Dense(..) => continue,
                    Reply::Answer(text, input, output) => {
                        let body = if anthropic {
                            serde_json::json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
                                "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                                "usage": {"input_tokens": input, "output_tokens": output}})
                        } else {
                            serde_json::json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
                                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                                "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output}})
                        };
                        (200, Vec::new(), body.to_string())
                    }
                };
                let mut resp = format!("HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n", body.len());
                for (k, v) in extra {
                    resp.push_str(&format!("{k}: {v}\r\n"));
                }
                resp.push_str("\r\n");
                resp.push_str(&body);
                let _ = stream.write_all(resp.as_bytes());
            }
        });
        LlmServer { url, requests }
    }

    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// Waits until the server has read `n` whole requests (a minute at most).
    pub(crate) fn wait_for_requests(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.requests.lock().unwrap().len() < n {
            assert!(
                Instant::now() < deadline,
                "the server never got request {n}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A stand-in GitHub API that opens pull request `number` of `acme/widgets` (201, its
    /// number and URL) for every request.
    pub(crate) fn github_opening_pr(number: u32) -> LlmServer {
        let created = format!(
            r#"{{"number": {number}, "html_url": "https://github.com/acme/widgets/pull/{number}"}}"#
        );
        LlmServer::start(vec![Reply::Status(201, Vec::new(), created)], false)
    }
}

pub(crate) const SECRET: &str = "sk-test-do-not-log-4f1c";

/// A standard repository whose agent is the scripted server (`kind` is `openai` or
/// `anthropic`) with its key in `TEST_LLM_KEY` (which the verifier echoes: it must never be
/// logged); `agent_extra` and `stop` are raw lines for `[agent]` and `[stop]`.
pub(crate) fn llm_repo(kind: &str, server: &LlmServer, agent_extra: &str, stop: &str) -> Repo {
    let base = if kind == "anthropic" {
        server.url.clone()
    } else {
        format!("{}/v1", server.url)
    };
    Repo::builder()
        .spec(llm_spec(kind, &base, agent_extra, stop))
        .create()
}

/// `llm_repo`'s spec.
fn llm_spec(kind: &str, base: &str, agent_extra: &str, stop: &str) -> Spec {
    Spec::new()
        .editable(&["value.txt"])
        .protected(&["prepare.py"])
        .command("echo key=$TEST_LLM_KEY; cat value.txt")
        .metric("score")
        .provider("agent", kind, "test-model", base)
        .set("agent", "api_key_env", "\"TEST_LLM_KEY\"")
        .lines("agent", agent_extra)
        .lines("stop", stop)
}

/// `hone run` (which must succeed) in an [`llm_repo`] whose scripted server answers `replies`
/// in `kind`'s wire format (`openai` or `anthropic`): the server, the repository and what hone
/// said.
pub(crate) fn llm_run(
    kind: &str,
    replies: Vec<Reply>,
    agent_extra: &str,
    stop: &str,
) -> (LlmServer, Repo, Output) {
    let server = LlmServer::start(replies, kind == "anthropic");
    let r = llm_repo(kind, &server, agent_extra, stop);
    let out = ok(hone_with_key(&r, &["run"]));
    (server, r, out)
}

pub(crate) fn hone_with_key(r: &Repo, args: &[&str]) -> Output {
    Command::new(HONE)
        .args(args)
        .current_dir(&r.dir)
        .env("TEST_LLM_KEY", SECRET)
        .output()
        .unwrap()
}

pub(crate) fn bodies(server: &LlmServer) -> Vec<serde_json::Value> {
    server
        .requests()
        .iter()
        .map(|(path, _, body)| {
            assert_eq!(path, "/hook");
            serde_json::from_str(body).unwrap()
        })
        .collect()
}

/// The knobs the knobs-mode tests have the scripted server tune.
const LR_DEPTH_PARAMS: &str = "LR = 0.1  # hone: log 1e-3..1\nDEPTH = 4  # hone: int 1..8\n";

/// Scores `LR_DEPTH_PARAMS`: 0 at LR 0.01 and DEPTH 6.
const LR_DEPTH_VERIFY: &str = r#"python3 -c "import re; t = open('params.txt').read(); lr = float(re.search(r'LR = ([0-9.e-]+)', t).group(1)); d = int(re.search(r'DEPTH = (\d+)', t).group(1)); print('score:', abs(lr - 0.01) * 100 + abs(d - 6))""#;

/// The spec of a knobs-mode run: the scripted server (OpenAI format) proposes new values
/// of the knobs in `params.txt`, for `max_experiments` experiments.
pub(crate) fn knobs_llm_spec(server: &LlmServer, max_experiments: u32) -> Spec {
    Spec::new()
        .editable(&["params.txt"])
        .command(LR_DEPTH_VERIFY)
        .metric("score")
        .provider("agent", "openai", "m", &format!("{}/v1", server.url))
        .set("agent", "edit_mode", "\"knobs\"")
        .set("stop", "max_experiments", &max_experiments.to_string())
}

/// The standard repository plus `params.txt` (LR and DEPTH knobs), with `spec`.
pub(crate) fn knobs_llm_repo(spec: Spec) -> Repo {
    Repo::builder()
        .file("params.txt", LR_DEPTH_PARAMS)
        .spec(spec)
        .create()
}
