//! `hone demo`: the whole loop on the bundled example (a character-level language model),
//! offline, in a temporary or given directory.

use std::path::PathBuf;

use clap::Args;

use hone::engine::RunOptions;

use super::{load_spec, run::run_loop};
use crate::error::{CliResult, Kinded};

#[derive(Args)]
pub struct DemoArgs {
    /// Where to put the example (must be empty or absent); kept afterwards.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Keep the temporary directory afterwards.
    #[arg(long)]
    keep: bool,
    /// Experiments in all (default: the example's 25).
    #[arg(short = 'n', long = "max-experiments", value_parser = clap::value_parser!(u64).range(1..))]
    max_experiments: Option<u64>,
    /// Seed for the knobs optimizer.
    #[arg(long)]
    seed: Option<u64>,
}

pub fn run(a: DemoArgs) -> CliResult {
    hone::demo::check_python().runtime()?;
    let (dir, keep) = match a.dir {
        Some(d) => (d, true),
        None => {
            let stamp = hone::store::now() as u64;
            (
                std::env::temp_dir().join(format!("hone-demo-{}-{stamp}", std::process::id())),
                a.keep,
            )
        }
    };
    hone::demo::set_up(&dir).runtime()?;
    out!(
        "hone demo: a character-level language model in {}",
        dir.display()
    );
    out!("the knobs optimizer will tune train.py; prepare.py and data/ are sealed\n");
    let spec = load_spec(&dir, None)?;
    let opts = RunOptions {
        tag: Some("demo".into()),
        max_experiments: a.max_experiments,
        more: None,
        seed: a.seed,
        ..Default::default()
    };
    let result = run_loop(&dir, &spec, &opts, None);
    if keep {
        out!(
            "\nthe demo is in {d}: try `hone -C {d} log`, `hone -C {d} show 1`, `hone -C {d} report` or `hone -C {d} serve`",
            d = dir.display()
        );
    } else {
        let _ = std::fs::remove_dir_all(&dir);
        out!("\n(the demo directory was removed; pass --keep or --dir DIR to explore it with `hone log` and `hone show`)");
    }
    result
}
