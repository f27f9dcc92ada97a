//! `[review]`: the gate between a candidate and any compute: static rules (`max_diff_lines`,
//! `forbid`), then optionally a reviewer, a command or an LLM over HTTP, that approves or
//! rejects.

use std::time::Duration;

use super::agent::{self, AgentKind, LlmSpec};
use super::read::{keys, Section};
use super::units::duration_secs;
use super::SpecError;

/// The keys of `[review]`.
pub(super) const KEYS: &[&str] = &keys::<16>(&[
    &["kind"],
    agent::LLM_KEYS,
    &[
        "command",
        "instructions",
        "max_diff_lines",
        "forbid",
        "timeout",
        "allow_binary",
    ],
]);

/// The reviewer's timeout when `timeout` is not set.
const TIMEOUT_SECS: u64 = 600;

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
    /// Globs of files that may change as binary (git's view: a NUL byte, or a `binary`
    /// attribute): exempt from `forbid` and counted as 0 lines. Any other binary change fails
    /// `forbid` and counts its old plus new lines against `max_diff_lines`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow_binary: Vec<String>,
}

pub(super) fn parse(s: &Section) -> Result<ReviewSpec, SpecError> {
    let forbid: Vec<String> = s.get_or_default("forbid")?;
    for f in &forbid {
        if let Err(e) = regex::Regex::new(f) {
            return Err(s.err("forbid", format!("`{f}` is not a valid regex: {e}")));
        }
    }
    let command = s.get("command")?;
    let kind = match s.get::<String>("kind")?.as_deref() {
        None | Some("command") => None,
        Some("openai") => Some(AgentKind::OpenAi),
        Some("anthropic") => Some(AgentKind::Anthropic),
        Some(other) => {
            return Err(s.err(
                "kind",
                format!("unknown reviewer kind `{other}` (expected \"command\", \"openai\" or \"anthropic\")"),
            ))
        }
    };
    let llm = match kind {
        Some(k) => {
            if command.is_some() {
                return Err(s.err(
                    "command",
                    format!(
                        "a reviewer is either a command or kind = \"{}\", not both",
                        k.as_str()
                    ),
                ));
            }
            Some(agent::llm(s, k, false)?)
        }
        None => {
            if let Some(key) = agent::LLM_KEYS.iter().find(|k| s.has(k)) {
                return Err(s.err(
                    key,
                    "only means something with kind = \"openai\" or \"anthropic\"",
                ));
            }
            None
        }
    };
    Ok(ReviewSpec {
        command,
        kind,
        llm,
        instructions: s.get("instructions")?,
        max_diff_lines: s.get("max_diff_lines")?,
        forbid,
        timeout: s.get_or("timeout", Duration::from_secs(TIMEOUT_SECS))?,
        allow_binary: s.get_or_default("allow_binary")?,
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{parse, GOOD};
    use super::super::EditMode;
    use super::*;

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
    fn allow_binary_is_a_list_of_globs() {
        let s = parse(&format!(
            "{GOOD}\n[review]\nallow_binary = [\"assets/*.png\", \"model.bin\"]\n"
        ))
        .unwrap();
        assert_eq!(s.review.allow_binary, vec!["assets/*.png", "model.bin"]);
        assert!(parse(GOOD).unwrap().review.allow_binary.is_empty());
        let e = parse(&format!("{GOOD}\n[review]\nallow_binary = 3\n")).unwrap_err();
        assert_eq!(e.key, "review.allow_binary", "{e}");
    }
}
