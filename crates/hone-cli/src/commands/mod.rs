//! One module per subcommand, each with its clap arguments (`Args`) and a `run` function; this
//! module holds what several of them share: where the command runs, the spec, the store and
//! run they read, and the few settings they read back from a run's stored spec.

pub mod bench;
pub mod daemon;
pub mod demo;
pub mod finalize;
pub mod init;
pub mod log;
pub mod mech;
pub mod report;
pub mod run;
pub mod serve;
pub mod show;
pub mod status;
pub mod worker;

use std::path::{Path, PathBuf};

use hone::engine;
use hone::spec::Spec;
use hone::store::{RunRecord, Store};
use hone::workspace::Git;

use crate::error::{CliError, CliResult, Kinded};

/// Where a command runs: the directory (after `-C`) and the `--spec` file, if given.
pub struct Here {
    pub cwd: PathBuf,
    pub spec: Option<PathBuf>,
    /// The repository around `cwd`, once found (finding it runs git: once a command).
    git: std::cell::OnceCell<Git>,
}

impl Here {
    pub fn new(cwd: PathBuf, spec: Option<PathBuf>) -> Here {
        Here {
            cwd,
            spec,
            git: std::cell::OnceCell::new(),
        }
    }

    pub fn spec_path(&self) -> Option<&Path> {
        self.spec.as_deref()
    }

    /// The repository around the directory (found once; a failure is asked again).
    pub fn git(&self) -> CliResult<&Git> {
        if let Some(git) = self.git.get() {
            return Ok(git);
        }
        let git = Git::discover(&self.cwd).runtime()?;
        Ok(self.git.get_or_init(|| git))
    }

    /// The configured store (`.hone/hone.db`, or `[store] url`) and the run `tag` (else the
    /// latest).
    pub fn open_run(&self, tag: Option<&str>) -> CliResult<(Store, RunRecord)> {
        let git = self.git()?;
        let location = match engine::configured_store_of(git, self.spec_path()) {
            Ok(location) => location,
            // A hone.toml broken since the run (a typo being fixed) does not hide what is
            // in this checkout's store: read it, and say why.
            Err(e)
                if self.spec_path().is_none()
                    && engine::StatePaths::new(git.root()).db().exists() =>
            {
                err!(
                    "warning: {e}; reading this checkout's store (.hone/hone.db) instead (fix hone.toml before `hone run`)"
                );
                hone::store::StoreLocation::Sqlite(engine::StatePaths::new(git.root()).db())
            }
            Err(e) => return Err(e).config(),
        };
        let store = Store::open_existing_at(&location)
            .runtime()?
            .ok_or_else(|| {
                CliError::runtime(format!("no hone runs in {} yet", git.root().display()))
                    .hint("start one with `hone run`")
            })?;
        let run = match tag {
            Some(t) => match store.run_by_tag(t).runtime()? {
                Some(run) => run,
                None => {
                    let tags: Vec<String> = store
                        .runs()
                        .runtime()?
                        .into_iter()
                        .rev()
                        .take(10)
                        .map(|r| r.tag)
                        .collect();
                    return Err(
                        CliError::runtime(format!("no run tagged `{t}`")).hint(format!(
                            "runs here, newest first: {}; `hone status` shows the latest",
                            tags.join(", ")
                        )),
                    );
                }
            },
            None => store.latest_run().runtime()?.ok_or_else(|| {
                CliError::runtime("no hone runs yet").hint("start one with `hone run`")
            })?,
        };
        Ok((store, run))
    }
}

/// A duration argument (`30s`, `8h`) that must be more than zero.
pub fn parse_positive_duration(s: &str) -> Result<std::time::Duration, String> {
    match hone::spec::parse_duration(s)? {
        d if d.is_zero() => Err("must be more than zero".into()),
        d => Ok(d),
    }
}

/// The spec at `path`, else `hone.toml` at `root`; a bad one is a configuration error.
pub fn load_spec(root: &Path, path: Option<&Path>) -> CliResult<Spec> {
    let path = path
        .map(Path::to_path_buf)
        .unwrap_or_else(|| root.join("hone.toml"));
    Spec::load(&path).config()
}

/// The settings the CLI reads back from a run's stored spec (`RunRecord::spec_json`), as the
/// run was started: the one place that knows their keys. A missing or unreadable value reads
/// as absent (the probation as its default), so an older run's record still shows.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredSpec {
    /// `[stop] max_experiments`.
    pub max_experiments: Option<u64>,
    /// `[stop] max_time`, in seconds.
    pub max_time_s: Option<f64>,
    /// `[stop] max_cost_usd`.
    pub max_cost_usd: Option<f64>,
    /// `[stop] max_tokens`.
    pub max_tokens: Option<u64>,
    /// `[outer] probation`.
    pub probation: u64,
}

impl StoredSpec {
    pub fn of(run: &RunRecord) -> StoredSpec {
        StoredSpec::parse(&run.spec_json)
    }

    fn parse(spec_json: &str) -> StoredSpec {
        let spec: serde_json::Value = serde_json::from_str(spec_json).unwrap_or_default();
        let stop = &spec["stop"];
        StoredSpec {
            max_experiments: stop["max_experiments"].as_u64(),
            max_time_s: stop["max_time"].as_f64(),
            max_cost_usd: stop["max_cost_usd"].as_f64(),
            max_tokens: stop["max_tokens"].as_u64(),
            probation: spec["outer"]["probation"]
                .as_u64()
                .unwrap_or(hone::spec::OuterSpec::default().probation),
        }
    }
}

/// What an agent run's best changed against its baseline, in numbers, when the checkout has
/// its commits ([`hone::engine::best_vs_baseline_of_run`]).
pub(crate) fn best_vs_baseline_of_commits(
    here: &Here,
    store: &hone::store::Store,
    run: &hone::store::RunRecord,
) -> Option<String> {
    hone::engine::best_vs_baseline_of_run(here.git().ok()?, store, run)
}

/// Whether run `run_id` has an experiment the knobs search counts as infeasible (a crash, a
/// timeout, a violation), found by index: `hone log` and `hone show` work out where crashes
/// narrowed a knob's range (from every configuration up to the experiment) only then.
pub(crate) fn has_infeasible(store: &hone::store::Store, run_id: i64) -> CliResult<bool> {
    for status in hone::propose::optimizer::INFEASIBLE {
        if store.first_with_status(run_id, status).runtime()?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_spec_reads_its_keys_and_defaults() {
        let s = StoredSpec::parse(
            r#"{"stop":{"max_experiments":40,"max_time":3600,"max_cost_usd":2.5,"max_tokens":90000},"outer":{"probation":7}}"#,
        );
        assert_eq!(
            s,
            StoredSpec {
                max_experiments: Some(40),
                max_time_s: Some(3600.0),
                max_cost_usd: Some(2.5),
                max_tokens: Some(90000),
                probation: 7,
            }
        );
        let none = StoredSpec::parse("not json");
        assert_eq!(none.max_experiments, None);
        assert_eq!(none.max_time_s, None);
        assert_eq!(none.max_cost_usd, None);
        assert_eq!(none.max_tokens, None);
        assert_eq!(none.probation, hone::spec::OuterSpec::default().probation);
    }
}
