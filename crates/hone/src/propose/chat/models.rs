//! What a server's list of models says before a run makes its first call (`GET .../models`):
//! a wrong `model` or a refused key found before the baseline runs, not after.

use std::time::Duration;

use serde_json::Value;

use super::LlmClient;
use crate::spec::AgentKind;

/// What a server's list of models (`GET .../models`) says before a run makes its first call.
#[derive(Debug, PartialEq)]
pub enum ModelCheck {
    /// The model is listed, or the server lists none, or did not answer the question (many
    /// servers have no such list; the first call will tell).
    Fine,
    /// The server lists models, not this one: (the first nine it lists). A warning only: some
    /// servers (llama.cpp's) list a file name and answer to any model name.
    Unlisted(Vec<String>),
    /// The server refused the key (401).
    Refused(u16),
    /// Nothing answers at `base_url`: the connection was refused, or the host has no address
    /// (why, in words). A timeout is not this: a busy server may answer later.
    Unreachable(String),
}

impl LlmClient {
    /// Asks the server which models it serves (free, and quick: 10 seconds at most), so that
    /// a wrong `model` or key is found before the baseline runs, not after.
    pub fn check_model(&self) -> ModelCheck {
        let url = match self.kind {
            AgentKind::Anthropic => format!("{}/v1/models", self.llm.base_url),
            _ => format!("{}/models", self.llm.base_url),
        };
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(10)))
            .http_status_as_error(false)
            .build()
            .into();
        let mut get = agent.get(&url);
        let key = std::env::var(&self.llm.api_key_env)
            .ok()
            .filter(|k| !k.is_empty());
        match (self.kind, key) {
            (AgentKind::Anthropic, key) => {
                if let Some(k) = key {
                    get = get.header("x-api-key", k);
                }
                get = get.header("anthropic-version", "2023-06-01");
            }
            (_, Some(k)) => get = get.header("authorization", format!("Bearer {k}")),
            (_, None) => {}
        }
        let resp = match get.call() {
            Ok(resp) => resp,
            Err(ureq::Error::HostNotFound) => {
                return ModelCheck::Unreachable("its host has no address".into())
            }
            Err(ureq::Error::Io(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                return ModelCheck::Unreachable("the connection was refused".into())
            }
            // The resolver's "no such name" (not its "try again later"), as the C library
            // words it: std gives it no kind of its own.
            Err(ureq::Error::Io(e))
                if [
                    "Name or service not known",
                    "No address associated with hostname",
                ]
                .iter()
                .any(|m| e.to_string().contains(m)) =>
            {
                return ModelCheck::Unreachable("its host name does not resolve".into())
            }
            Err(_) => return ModelCheck::Fine,
        };
        let status = resp.status().as_u16();
        // 401 is the key; a 403 may be a key allowed to chat but not to list models (an
        // OpenAI restricted key): the first call will tell.
        if status == 401 {
            return ModelCheck::Refused(status);
        }
        let text = match resp
            .into_body()
            .with_config()
            .limit(1 << 20)
            .read_to_string()
        {
            Ok(t) if status == 200 => t,
            _ => return ModelCheck::Fine,
        };
        let ids: Vec<String> = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| {
                v["data"].as_array().map(|a| {
                    a.iter()
                        .filter_map(|m| m["id"].as_str().map(str::to_string))
                        .collect()
                })
            })
            .unwrap_or_default();
        // A list cut into pages (Anthropic's 20 a page: `has_more`) may hold it further on.
        let paged = serde_json::from_str::<Value>(&text)
            .ok()
            .is_some_and(|v| v["has_more"] == Value::Bool(true));
        if ids.is_empty() || paged || ids.contains(&self.llm.model) {
            ModelCheck::Fine
        } else {
            ModelCheck::Unlisted(ids.into_iter().take(9).collect())
        }
    }
}
