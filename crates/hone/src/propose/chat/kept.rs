//! What hone keeps of each model call of an experiment, outside the record: the prompt sent
//! (`prompts/<n>.md`) and the agent log (`logs/<n>.agent.log`: answers, failed attempts).

use super::ProposeContext;

/// Writes what is sent to the model, the system prompt and the conversation so far, as
/// experiment `ctx.n`'s prompt (`prompts/<n>.md`, as for the agent CLIs): a repair round
/// rewrites it with the whole conversation.
pub(super) fn write_prompt(ctx: &ProposeContext<'_>, system: &str, messages: &[(String, String)]) {
    let dir = ctx.run_dir.join("prompts");
    let _ = std::fs::create_dir_all(&dir);
    let mut text = format!("<!-- system -->\n{system}\n");
    for (role, content) in messages {
        text.push_str(&format!("\n<!-- {role} -->\n{content}\n"));
    }
    let _ = std::fs::write(dir.join(format!("{}.md", ctx.n)), text);
}

/// Appends `entry` to experiment `ctx.n`'s agent log (what the model said and what failed).
pub(super) fn append_agent_log(ctx: &ProposeContext<'_>, entry: &str) {
    let logs = ctx.run_dir.join("logs");
    let _ = std::fs::create_dir_all(&logs);
    let _ = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(logs.join(format!("{}.agent.log", ctx.n)))
        .and_then(|mut f| std::io::Write::write_all(&mut f, entry.as_bytes()));
}
