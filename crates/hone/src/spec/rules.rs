//! The contradictions between sections of hone.toml, in one place: each section's own parser
//! checks what it can alone; what needs two sections at once is checked here, once every
//! section has parsed, in a fixed order (the first that holds is the error reported).

use super::agent::LlmSpec;
use super::exec::Backend;
use super::read::Section;
use super::{Sections, Spec, SpecError};

/// Every rule, in order.
pub(super) fn check(spec: &Spec, s: &Sections) -> Result<(), SpecError> {
    budget_needs_prices(spec, s)?;
    budget_fits_a_call(spec, s)?;
    workers_backend(spec, s)?;
    research_needs_an_http_llm(spec, s)
}

/// `[stop] max_cost_usd` needs proposers and reviewers whose cost hone can count in money.
fn budget_needs_prices(spec: &Spec, s: &Sections) -> Result<(), SpecError> {
    if spec.stop.max_cost_usd.is_none() {
        return Ok(());
    }
    let kind = spec.agent.kind;
    if let Some(tool) = kind.preset().filter(|t| !t.def().reports_cost) {
        return Err(s.stop.err(
            "max_cost_usd",
            format!(
                "{} reports tokens, not money: use max_tokens to bound a {} run",
                tool.def().tool,
                kind.as_str()
            ),
        ));
    }
    priced(&s.agent, spec.agent.llm.as_ref())?;
    priced(&s.review, spec.review.llm.as_ref())
}

/// A run's budget must hold one call of each HTTP model it uses (the proposer's, the
/// reviewer's): its answer alone (`max_tokens`, before any prompt) must fit in `[stop]
/// max_tokens` and, at its price, in `max_cost_usd`; else the run would measure its baseline
/// (minutes, perhaps) and stop at the first call.
fn budget_fits_a_call(spec: &Spec, s: &Sections) -> Result<(), SpecError> {
    let models = [
        ("[agent]", spec.agent.llm.as_ref()),
        ("[review]", spec.review.llm.as_ref()),
    ];
    for (section, llm) in models {
        let Some(llm) = llm else {
            continue;
        };
        if let Some(max) = spec.stop.max_tokens.filter(|&m| m <= llm.max_tokens) {
            return Err(s.stop.err(
                "max_tokens",
                format!(
                    "max_tokens = {max} holds no call of the model: each may answer with {section} max_tokens = {} tokens, and its prompt counts too; [stop] max_tokens bounds the whole run (raise it), {section} max_tokens one answer",
                    llm.max_tokens
                ),
            ));
        }
        let answer_usd = llm
            .prices()
            .map_or(0.0, |(_, out)| llm.max_tokens as f64 * out / 1e6);
        if let Some(max) = spec.stop.max_cost_usd.filter(|&m| m < answer_usd) {
            return Err(s.stop.err(
                "max_cost_usd",
                format!(
                    "max_cost_usd = {max} holds no call of the model: its answer alone ({section} max_tokens = {}) may cost ${answer_usd:.4} at its price, and its prompt counts too",
                    llm.max_tokens
                ),
            ));
        }
    }
    Ok(())
}

/// An HTTP LLM under a cost budget must have a price (set, or in the built-in table).
fn priced(s: &Section, llm: Option<&LlmSpec>) -> Result<(), SpecError> {
    match llm {
        Some(llm) if llm.prices().is_none() => Err(s.err(
            "model",
            format!("max_cost_usd needs the price of `{}`: set price_in_per_mtok and price_out_per_mtok", llm.model),
        )),
        _ => Ok(()),
    }
}

/// `[exec] backend = "workers"`: what remote workers cannot do yet (the sealed evaluator), and
/// the store they need.
fn workers_backend(spec: &Spec, s: &Sections) -> Result<(), SpecError> {
    if spec.exec.backend != Backend::Workers {
        return Ok(());
    }
    if spec.exec.store_url.is_none() {
        return Err(s.exec.err(
            "backend",
            "backend = \"workers\" needs [store] url = \"postgres://...\": the database the workers take verifications from",
        ));
    }
    if spec.verify.evaluate.is_some() {
        return Err(s.verify.err(
            "evaluate",
            "the sealed two-stage evaluator is not supported with [exec] backend = \"workers\" yet; use one verify command",
        ));
    }
    if spec
        .verify
        .holdout
        .as_ref()
        .is_some_and(|h| h.evaluate.is_some())
    {
        return Err(s.verify.err(
            "holdout",
            "[verify.holdout] evaluate (a sealed second stage) is not supported with [exec] backend = \"workers\" yet: each job starts from a clean checkout, without what the first stage wrote",
        ));
    }
    Ok(())
}

/// `[outer] research_every` asks an LLM over HTTP: the agent must be one.
fn research_needs_an_http_llm(spec: &Spec, s: &Sections) -> Result<(), SpecError> {
    let agent = &spec.agent;
    if spec.outer.research_every.is_some() && !(agent.kind.is_http() && agent.llm.is_some()) {
        return Err(s.outer.err(
            "research_every",
            format!(
                "mechanism research asks an LLM: it needs [agent] kind = \"openai\" or \"anthropic\" (this run's agent is `{}`)",
                agent.kind.as_str()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{err, parse, MIN};

    const WORKERS: &str = "[exec]\nbackend = \"workers\"\nremote = \"r.git\"\n";
    const STORE: &str = "[store]\nurl = \"postgres://db/h\"\n";

    #[test]
    fn workers_need_a_store_and_no_evaluator() {
        let e = err(&format!("{MIN}{WORKERS}"));
        assert_eq!(e.key, "exec.backend", "{e}");
        assert!(e.message.contains("needs [store] url"), "{e}");
        // The workers contain the verifier as the run asks (`JobSpec::sandbox`).
        let spec = parse(&format!(
            "{MIN}{WORKERS}{STORE}[sandbox]\nkind = \"bwrap\"\n"
        ))
        .unwrap();
        assert!(spec.sandbox.bwrap && spec.sandbox.required);
        err(&format!("{MIN}evaluate = \"e\"\n{WORKERS}{STORE}")).at(6, "verify.evaluate");
    }

    #[test]
    fn a_cost_budget_needs_prices() {
        let e = err(&format!(
            "{MIN}[agent]\nkind = \"codex\"\n[stop]\nmax_cost_usd = 1\n"
        ))
        .at(9, "stop.max_cost_usd");
        assert!(e.message.starts_with("Codex reports tokens"), "{e}");
        let e = err(&format!(
            "{MIN}[agent]\nkind = \"openai\"\nmodel = \"mine\"\n[stop]\nmax_cost_usd = 1\n"
        ))
        .at(8, "agent.model");
        assert!(e.message.contains("needs the price of `mine`"), "{e}");
    }
}
