//! `hone daemon`: hone.toml's schedules and the signed webhook without the web pages; Ctrl-C
//! stops it.

use clap::Args;
use hone_serve::automation as auto;

use super::{load_spec, serve::automation_options, Here};
use crate::error::{CliError, CliResult};

#[derive(Args)]
pub struct DaemonArgs {
    /// The port to listen on (0: any free port, printed at start).
    #[arg(long, default_value_t = 8750)]
    port: u16,
    /// The address to listen on; anything but loopback needs HONE_TOKEN.
    #[arg(long, default_value = "127.0.0.1")]
    bind: std::net::IpAddr,
}

pub fn run(here: &Here, a: DaemonArgs) -> CliResult {
    let git = here.git()?;
    let spec = load_spec(git.root(), here.spec_path())?;
    let addr = std::net::SocketAddr::new(a.bind, a.port);
    let token = std::env::var("HONE_TOKEN").ok();
    auto::token_required(&addr, token.as_deref()).map_err(CliError::config)?;
    let automation = automation_options(here, git, &spec)?;
    auto::daemon(auto::DaemonOptions {
        addr,
        token,
        automation,
    })?;
    Ok(())
}
