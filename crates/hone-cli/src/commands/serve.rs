//! `hone serve`: the live dashboard, with hone.toml's schedules and webhook beside the pages.

use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use hone_serve::automation as auto;

use hone::engine;

use super::{load_spec, Here};
use crate::error::{CliResult, Kinded};

#[derive(Args)]
pub struct ServeArgs {
    /// Port to listen on (0: any free port).
    #[arg(long, default_value_t = hone_serve::DEFAULT_PORT)]
    port: u16,
    /// Address to listen on; anything but loopback needs a token in HONE_TOKEN.
    #[arg(long, default_value = "127.0.0.1")]
    bind: std::net::IpAddr,
}

pub fn run(here: &Here, a: ServeArgs) -> CliResult {
    let git = here.git()?;
    let store = engine::configured_store(git.root(), here.spec_path()).config()?;
    let opts = hone_serve::ServeOptions {
        repo_root: git.root().to_path_buf(),
        store: Some(store),
        addr: std::net::SocketAddr::new(a.bind, a.port),
        token: std::env::var("HONE_TOKEN").ok().filter(|t| !t.is_empty()),
    };
    hone_serve::check_options(&opts).config()?;
    // The automation endpoints and schedules of hone.toml run beside the pages (a repository
    // without a hone.toml gets the pages only).
    let automation = match load_spec(git.root(), here.spec_path()) {
        Ok(spec) => Some(auto::Automation::new(automation_options(
            here, &git, &spec,
        )?)),
        Err(_) => None,
    };
    let server = match &automation {
        Some(a) => hone_serve::bind_with(&opts, auto::router(a.clone()))?
            .with_task(auto::run_scheduler(a.clone(), Duration::from_secs(30))),
        None => hone_serve::bind(&opts)?,
    };
    out!("hone serve: {} (Ctrl-C stops)", server.url());
    if let Some(a) = &automation {
        if a.trigger_configured() {
            out!("POST /api/trigger starts a run (signed with X-Hub-Signature-256; off loopback, add ?token=<token> to the webhook URL)");
        }
        for (cron, tag) in a.schedule_list() {
            out!("schedule `{cron}` (UTC) -> runs tagged {tag}-<time>");
        }
    }
    if opts.token.is_some() {
        out!("every request needs the token in HONE_TOKEN: open the page once with ?token=<token>, or send `Authorization: Bearer <token>`");
    }
    server.run()?;
    Ok(())
}

/// How the schedules and the webhook start runs: this `hone` executable, in this repository,
/// with this spec, printing their messages.
pub fn automation_options(
    here: &Here,
    git: &hone::workspace::Git,
    spec: &hone::spec::Spec,
) -> CliResult<auto::AutomationOptions> {
    let program = std::env::current_exe().context("cannot find the hone executable")?;
    let messages: auto::Messages = std::sync::Arc::new(|m: &str| out!("{m}"));
    Ok(auto::AutomationOptions::from_spec(
        git.root().to_path_buf(),
        here.spec_path().map(|p| here.cwd.join(p)),
        spec,
        program,
        messages,
    ))
}
