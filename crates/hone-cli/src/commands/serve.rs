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
    /// Address to listen on; anything but loopback needs a token in HONE_TOKEN (on loopback,
    /// without one, hone serve makes one and prints it).
    #[arg(long, default_value = "127.0.0.1")]
    bind: std::net::IpAddr,
}

pub fn run(here: &Here, a: ServeArgs) -> CliResult {
    let git = here.git()?;
    let store = engine::configured_store_of(git, here.spec_path()).config()?;
    let mut opts = hone_serve::ServeOptions {
        repo_root: git.root().to_path_buf(),
        store: Some(store),
        addr: std::net::SocketAddr::new(a.bind, a.port),
        token: std::env::var("HONE_TOKEN").ok().filter(|t| !t.is_empty()),
    };
    hone_serve::check_options(&opts).config()?;
    // Loopback is no boundary: sandboxed agents keep their network, and an agent that could
    // read the dashboard would see the sealed holdout's numbers. So a
    // dashboard without HONE_TOKEN gets a token of its own, printed below for the user.
    let made = match opts.token {
        Some(_) => None,
        None => {
            let t = session_token()?;
            opts.token = Some(t.clone());
            Some(t)
        }
    };
    // The automation endpoints and schedules of hone.toml run beside the pages (a repository
    // without a hone.toml gets the pages only).
    let automation = match load_spec(git.root(), here.spec_path()) {
        Ok(spec) => Some(auto::Automation::new(automation_options(here, git, &spec)?)),
        Err(_) => None,
    };
    let server = match &automation {
        Some(a) => hone_serve::bind_with(&opts, auto::router(a.clone()))?
            .with_task(auto::run_scheduler(a.clone(), Duration::from_secs(30))),
        None => hone_serve::bind(&opts)?,
    };
    out!("hone serve: {} (Ctrl-C stops)", server.url());
    match &made {
        Some(t) => out!(
            "open {}?token={t} (every request needs this token, made for this session; set HONE_TOKEN to choose your own)",
            server.url()
        ),
        None => out!("every request needs the token in HONE_TOKEN: open the page with ?token=<token> (its links keep it), or send `Authorization: Bearer <token>`"),
    }
    if let Some(a) = &automation {
        if a.trigger_configured() {
            out!("POST /api/trigger starts a run (signed with X-Hub-Signature-256; add ?token=<token> to the webhook URL)");
        }
        for (cron, tag) in a.schedule_list() {
            out!("schedule `{cron}` (UTC) -> runs tagged {tag}-<time>");
        }
    }
    server.run()?;
    Ok(())
}

/// A fresh secret for a dashboard started without `HONE_TOKEN`: 32 hex digits from the
/// kernel's random source.
fn session_token() -> CliResult<String> {
    use std::io::Read as _;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("cannot read /dev/urandom to make a token for the dashboard: set HONE_TOKEN to a long random secret instead")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
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
