//! `[exec]` and `[store]`: where verifications run (here, SLURM jobs or remote workers), how
//! many at once and in which environment (`slots`), and where the records live.

use std::path::PathBuf;
use std::time::Duration;

use toml_edit::{Item, Value};

use super::read::{keys, Section};
use super::units::duration_secs;
use super::SpecError;

/// The keys of `[exec]`.
pub(super) const KEYS: &[&str] = &keys::<12>(&[
    &["backend"],
    SLURM_KEYS,
    &["remote", "lease", "workers", "slots"],
]);
/// The keys of `[store]`.
pub(super) const STORE_KEYS: &[&str] = &["url", "url_env", "repo"];
/// The keys that only the SLURM backend reads.
const SLURM_KEYS: &[&str] = &[
    "shared_dir",
    "partition",
    "gres",
    "cpus",
    "mem",
    "time",
    "extra_args",
];

/// Declares [`Backend`] from the list of backends (`crate::exec::backends`).
macro_rules! backend_enum {
    ($($variant:ident = $module:ident $name:literal $doc:literal,)*) => {
        /// Where verifications run (`[exec] backend`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
        pub enum Backend {
            $(#[doc = $doc] $variant,)*
        }

        impl Backend {
            /// The names `[exec] backend` accepts, in the list's order.
            pub const NAMES: &'static [&'static str] = &[$($name),*];

            /// The backend `[exec] backend = "<name>"` names.
            pub fn from_name(name: &str) -> Option<Backend> {
                match name {
                    $($name => Some(Backend::$variant),)*
                    _ => None,
                }
            }
        }
    };
}
crate::with_backends!(backend_enum);

impl Default for Backend {
    /// Without `[exec] backend`: child processes of hone on this machine.
    fn default() -> Backend {
        Backend::Local
    }
}

/// `[exec]`: where verifications run.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ExecSpec {
    pub backend: Backend,
    /// With SLURM: a directory the compute nodes see (worktrees and job files live there).
    pub shared_dir: Option<PathBuf>,
    #[serde(skip)]
    pub slurm: crate::exec::slurm::SlurmConfig,
    /// With workers: the git remote (URL or path) the workers fetch candidates from.
    pub remote: Option<String>,
    /// With workers: how long a worker's claim lasts without a heartbeat.
    #[serde(with = "duration_secs")]
    pub lease: Duration,
    /// `[store] url`: the PostgreSQL database that holds the records (shared with workers and
    /// other hosts); `None`: `.hone/hone.db`.
    #[serde(skip)]
    pub store_url: Option<String>,
    /// `[store] url_env`: the variable `store_url` was read from (out of every agent's,
    /// reviewer's and verifier's environment, as hone's other secrets are).
    #[serde(skip)]
    pub store_url_env: Option<String>,
    /// How many experiments are verified at once on this machine (1: one after another).
    pub workers: usize,
    /// `slots`: each verification slot's own environment (one per worker at least), for
    /// example `{ CUDA_VISIBLE_DEVICES = "0" }`. Empty: the slots share hone's environment.
    pub slots: Vec<Vec<(String, String)>>,
    /// The line of `slots` in hone.toml (for errors about it found later), else of `[exec]`.
    #[serde(skip)]
    pub slots_line: usize,
    /// `[store] repo`: the key of this repository's runs in that database (default: see
    /// `engine::repo_key`).
    #[serde(skip)]
    pub store_repo: Option<String>,
}

/// Most experiments one `hone run` verifies at once.
pub const MAX_WORKERS: usize = 256;

impl ExecSpec {
    /// Whether `[store] url` was written in the file with a password in it (`user:pw@`),
    /// where agents and verifiers can read it.
    pub fn store_password_in_file(&self) -> bool {
        let Some(url) = self
            .store_url
            .as_deref()
            .filter(|_| self.store_url_env.is_none())
        else {
            return false;
        };
        let rest = url.split_once("://").map_or(url, |(_, r)| r);
        let authority = rest.split(['/', '?']).next().unwrap_or("");
        let in_query = rest.split_once('?').is_some_and(|(_, q)| {
            q.split('&').any(|p| {
                let key = p.split('=').next().unwrap_or("");
                crate::util::percent_decoded(key).eq_ignore_ascii_case("password")
            })
        });
        in_query
            || authority
                .rsplit_once('@')
                .is_some_and(|(user, _)| user.contains(':'))
    }

    /// Checks `workers` (from hone.toml or `--workers`) against `slots`; the message says
    /// what to change. Every backend runs that many verifications at once (local process
    /// groups, SLURM jobs, or jobs for remote workers).
    pub fn check_workers(&self, workers: usize) -> Result<(), String> {
        if workers == 0 || workers > MAX_WORKERS {
            return Err(format!("workers must be between 1 and {MAX_WORKERS}"));
        }
        if !self.slots.is_empty() && self.slots.len() < workers {
            return Err(format!(
                "{workers} workers but only {} slots (hone.toml line {}): give every worker a slot, or remove `slots`",
                self.slots.len(),
                self.slots_line
            ));
        }
        Ok(())
    }
}

/// `[exec]`, then `[store]` (kept in the same struct).
pub(super) fn parse(ex: &Section, store: &Section) -> Result<ExecSpec, SpecError> {
    let backend = backend(ex)?;
    let remote = ex.get("remote")?;
    let lease = ex.get_or("lease", Duration::from_secs(30))?;
    match (&backend, &remote) {
        (Backend::Workers, None) => {
            return Err(ex.err(
                "backend",
                "backend = \"workers\" needs remote: a git remote (URL or path) that hone pushes candidates to and the workers fetch from",
            ))
        }
        (Backend::Local | Backend::Slurm, Some(_)) => {
            return Err(ex.err("remote", "`remote` is for backend = \"workers\""))
        }
        _ => {}
    }
    let shared_dir = ex.get::<String>("shared_dir")?.map(PathBuf::from);
    let slurm = slurm(ex)?;
    if backend != Backend::Slurm {
        if let Some(key) = SLURM_KEYS.iter().find(|k| ex.has(k)) {
            return Err(ex.err(
                key,
                format!("`{key}` is for backend = \"slurm\"; set backend = \"slurm\" or remove it"),
            ));
        }
    }
    match &shared_dir {
        None if backend == Backend::Slurm => {
            return Err(ex.err(
                "backend",
                "backend = \"slurm\" needs shared_dir: a directory the compute nodes also see, for the worktrees and job files",
            ))
        }
        Some(d) if !d.is_absolute() => {
            return Err(ex.err(
                "shared_dir",
                format!("`{}` must be an absolute path (compute nodes resolve it)", d.display()),
            ))
        }
        _ => {}
    }
    let workers = match ex.get::<u64>("workers")? {
        None => 1,
        Some(w) => usize::try_from(w).unwrap_or(usize::MAX),
    };
    let exec = ExecSpec {
        backend,
        shared_dir,
        slurm,
        remote,
        lease,
        store_url: None,
        store_url_env: None,
        store_repo: None,
        workers,
        slots: slots(ex)?,
        slots_line: ex.key_line("slots").or_else(|| ex.line()).unwrap_or(1),
    };
    if let Err(message) = exec.check_workers(workers) {
        let key = if workers == 0 || workers > MAX_WORKERS || exec.slots.is_empty() {
            "workers"
        } else {
            "slots"
        };
        return Err(ex.err(key, message));
    }
    parse_store(store, exec)
}

fn backend(ex: &Section) -> Result<Backend, SpecError> {
    let Some(name) = ex.get::<String>("backend")? else {
        return Ok(Backend::default());
    };
    Backend::from_name(&name).ok_or_else(|| {
        let expected = Backend::NAMES
            .iter()
            .map(|n| format!("\"{n}\""))
            .collect::<Vec<_>>()
            .join(", ");
        let hint = super::read::closest(&name, Backend::NAMES)
            .map(|c| format!("; did you mean `{c}`?"))
            .unwrap_or_default();
        ex.err(
            "backend",
            format!("unknown backend `{name}` (expected one of {expected}){hint}"),
        )
    })
}

/// The SLURM job settings (checked against the backend by the caller).
fn slurm(ex: &Section) -> Result<crate::exec::slurm::SlurmConfig, SpecError> {
    Ok(crate::exec::slurm::SlurmConfig {
        partition: ex.get("partition")?,
        gres: ex.get("gres")?,
        cpus: match ex.get::<u64>("cpus")? {
            Some(c) => Some(
                u32::try_from(c)
                    .ok()
                    .filter(|c| *c > 0)
                    .ok_or_else(|| ex.err("cpus", "must be between 1 and 2^32-1"))?,
            ),
            None => None,
        },
        mem: ex.get("mem")?,
        time: ex.get("time")?,
        extra_args: ex.args("extra_args")?,
    })
}

/// `[store]`: `url` (a PostgreSQL database) or `url_env` (the variable that holds it, read
/// when the spec is loaded), and `repo` (this repository's key in it).
fn parse_store(so: &Section, mut exec: ExecSpec) -> Result<ExecSpec, SpecError> {
    let (url, key) = match (so.get::<String>("url")?, so.get::<String>("url_env")?) {
        (Some(_), Some(_)) => return Err(so.err("url_env", "set `url` or `url_env`, not both")),
        (Some(u), None) => (Some(u), "url"),
        (None, Some(name)) => {
            let value = std::env::var(&name).ok().filter(|v| !v.trim().is_empty());
            let Some(value) = value else {
                return Err(so.err(
                    "url_env",
                    format!("${name} is not set: export {name}=postgres://user:password@host:port/database before running hone (the URL stays out of hone.toml, which agents and verifiers can read)"),
                ));
            };
            exec.store_url_env = Some(name);
            (Some(value), "url_env")
        }
        (None, None) => (None, "url"),
    };
    if let Some(u) = &url {
        if !(u.starts_with("postgres://") || u.starts_with("postgresql://")) {
            let message = match &exec.store_url_env {
                Some(name) => format!("${name} does not hold a PostgreSQL URL (postgres://user@host:port/database)"),
                None => "expected a PostgreSQL URL, postgres://user@host:port/database (without it the store is .hone/hone.db)".into(),
            };
            return Err(so.err(key, message));
        }
    }
    exec.store_url = url;
    exec.store_repo = so.get("repo")?;
    if let Some(r) = &exec.store_repo {
        let message = if exec.store_url.is_none() {
            "repo names this repository's runs in a shared PostgreSQL store; it needs [store] url = \"postgres://...\""
        } else if r.trim().is_empty() {
            "expected a non-empty key, such as the repository's URL (git@host:lab/project.git)"
        } else {
            ""
        };
        if !message.is_empty() {
            return Err(so.err("repo", message));
        }
    }
    Ok(exec)
}

/// `[exec] slots`: an array of tables of strings, one environment per slot.
fn slots(ex: &Section) -> Result<Vec<Vec<(String, String)>>, SpecError> {
    let Some(item) = ex.item("slots") else {
        return Ok(Vec::new());
    };
    let want = "an array of tables of strings, e.g. slots = [{ CUDA_VISIBLE_DEVICES = \"0\" }, { CUDA_VISIBLE_DEVICES = \"1\" }]";
    let tables: Vec<Vec<(String, Option<String>)>> = match item {
        Item::Value(Value::Array(a)) => {
            let mut out = Vec::new();
            for v in a.iter() {
                let Some(t) = v.as_inline_table() else {
                    return Err(ex.type_err("slots", want, item));
                };
                out.push(
                    t.iter()
                        .map(|(k, v)| (k.to_string(), v.as_str().map(str::to_string)))
                        .collect(),
                );
            }
            out
        }
        Item::ArrayOfTables(a) => a
            .iter()
            .map(|t| {
                t.iter()
                    .map(|(k, v)| (k.to_string(), v.as_str().map(str::to_string)))
                    .collect()
            })
            .collect(),
        other => return Err(ex.type_err("slots", want, other)),
    };
    let mut slots = Vec::new();
    for (i, t) in tables.into_iter().enumerate() {
        let mut env = Vec::new();
        for (k, v) in t {
            let Some(v) = v else {
                return Err(ex.err("slots", format!("slot {i}: `{k}` must be a string")));
            };
            if k.is_empty() || k.contains('=') || k.starts_with("HONE_") {
                return Err(ex.err(
                    "slots",
                    format!("slot {i}: `{k}` is not a variable a slot may set"),
                ));
            }
            env.push((k, v));
        }
        slots.push(env);
    }
    Ok(slots)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::tests::{err, parse, GOOD, MIN};
    use super::*;

    #[test]
    fn store_url_and_repo() {
        let s = parse(&format!(
            "{GOOD}\n[store]\nurl = \"postgres://h@db/hone\"\nrepo = \"git@example.com:lab/p.git\"\n"
        ))
        .unwrap();
        assert_eq!(s.exec.store_url.as_deref(), Some("postgres://h@db/hone"));
        assert_eq!(
            s.exec.store_repo.as_deref(),
            Some("git@example.com:lab/p.git")
        );
        let e = parse(&format!("{GOOD}\n[store]\nrepo = \"x\"\n")).unwrap_err();
        assert_eq!(e.key, "store.repo");
        assert!(e.message.contains("needs [store] url"), "{e}");
        let e = parse(&format!(
            "{GOOD}\n[store]\nurl = \"postgres://db/hone\"\nrepo = \" \"\n"
        ))
        .unwrap_err();
        assert!(e.message.contains("non-empty"), "{e}");
        let e = parse(&format!("{GOOD}\n[store]\nurl = \"mysql://db\"\n")).unwrap_err();
        assert_eq!(e.key, "store.url");
    }

    #[test]
    fn a_password_in_the_files_url_is_noticed() {
        let with = |url: &str| {
            parse(&format!("{GOOD}\n[store]\nurl = \"{url}\"\n"))
                .unwrap()
                .exec
                .store_password_in_file()
        };
        assert!(with("postgres://hone:S3cret@db:5432/hone"));
        assert!(with("postgresql://u:p@db/h?sslmode=require"));
        assert!(!with("postgres://hone@db:5432/hone"));
        assert!(!with("postgres://db/hone?user=a:b@c"));
        assert!(with("postgres://hone@db/hone?password=S3cret"));
        assert!(with("postgres://hone@db/hone?sslmode=require&Password=x"));
        assert!(with("postgres://hone@db/hone?p%61ssword=x"));
    }

    #[test]
    fn store_url_env_is_read_when_set_and_said_when_not() {
        // No test sets this variable.
        let e = parse(&format!(
            "{GOOD}\n[store]\nurl_env = \"HONE_SPEC_TEST_NEVER_SET\"\n"
        ))
        .unwrap_err();
        assert_eq!(e.key, "store.url_env");
        assert!(
            e.message
                .contains("$HONE_SPEC_TEST_NEVER_SET is not set: export"),
            "{e}"
        );
        // PATH is set, and is no PostgreSQL URL.
        let e = parse(&format!("{GOOD}\n[store]\nurl_env = \"PATH\"\n")).unwrap_err();
        assert_eq!(e.key, "store.url_env");
        assert!(
            e.message.contains("$PATH does not hold a PostgreSQL URL"),
            "{e}"
        );
        let e = parse(&format!(
            "{GOOD}\n[store]\nurl = \"postgres://db/h\"\nurl_env = \"PATH\"\n"
        ))
        .unwrap_err();
        assert!(e.message.contains("not both"), "{e}");
    }

    #[test]
    fn exec_section() {
        let s = parse(&format!(
            "{GOOD}\n[exec]\nbackend = \"slurm\"\nshared_dir = \"/shared/hone\"\npartition = \"gpu\"\ngres = \"gpu:1\"\ncpus = 8\nmem = \"32G\"\ntime = \"2h\"\nextra_args = [\"--qos=high\"]\n"
        ))
        .unwrap();
        assert_eq!(s.exec.backend, Backend::Slurm);
        assert_eq!(
            s.exec.shared_dir.as_deref(),
            Some(Path::new("/shared/hone"))
        );
        assert_eq!(s.exec.slurm.partition.as_deref(), Some("gpu"));
        assert_eq!(s.exec.slurm.cpus, Some(8));
        assert_eq!(s.exec.slurm.time, Some(Duration::from_secs(7200)));
        assert_eq!(s.exec.slurm.extra_args, vec!["--qos=high".to_string()]);
        assert_eq!(parse(GOOD).unwrap().exec.backend, Backend::Local);
        let e = err(&format!("{GOOD}\n[exec]\nbackend = \"slurm\"\n"));
        assert_eq!(e.key, "exec.backend", "{e}");
        assert!(e.message.contains("shared_dir"), "{e}");
        let e = err(&format!(
            "{GOOD}\n[exec]\nbackend = \"slurm\"\nshared_dir = \"rel\"\n"
        ));
        assert_eq!(e.key, "exec.shared_dir", "{e}");
        let e = err(&format!("{GOOD}\n[exec]\npartition = \"gpu\"\n"));
        assert_eq!(e.key, "exec.partition", "{e}");
        let e = err(&format!("{GOOD}\n[exec]\nbackend = \"k8s\"\n"));
        assert!(e.message.contains("slurm"), "{e}");
        let e = err(&format!("{GOOD}\n[exec]\nbackend = \"slrum\"\n"));
        assert_eq!(e.key, "exec.backend", "{e}");
        assert!(e.message.contains("did you mean `slurm`?"), "{e}");
        let e = err(&format!("{GOOD}\n[exec]\npartion = \"gpu\"\n"));
        assert!(e.message.contains("partition"), "{e}");
    }

    #[test]
    fn workers_and_slots_parse_and_are_checked() {
        let s = parse(MIN).unwrap();
        assert_eq!(s.exec.workers, 1);
        assert!(s.exec.slots.is_empty());
        let s = parse(&format!(
            "{MIN}[exec]\nworkers = 2\nslots = [{{ CUDA_VISIBLE_DEVICES = \"0\" }}, {{ CUDA_VISIBLE_DEVICES = \"1\", X = \"y\" }}]\n"
        ))
        .unwrap();
        assert_eq!(s.exec.workers, 2);
        assert_eq!(
            s.exec.slots[1],
            vec![
                ("CUDA_VISIBLE_DEVICES".to_string(), "1".to_string()),
                ("X".to_string(), "y".to_string())
            ]
        );
        let s = parse(&format!(
            "{MIN}[exec]\nworkers = 2\n[[exec.slots]]\nGPU = \"0\"\n[[exec.slots]]\nGPU = \"1\"\n"
        ))
        .unwrap();
        assert_eq!(s.exec.slots.len(), 2);
        err(&format!(
            "{MIN}[exec]\nworkers = 3\nslots = [{{ A = \"0\" }}]\n"
        ))
        .at(8, "exec.slots");
        let e = err(&format!("{MIN}[exec]\nworkers = 0\n"));
        assert_eq!(e.key, "exec.workers");
        let e = err(&format!("{MIN}[exec]\nslots = [{{ A = 1 }}]\n"));
        assert!(e.message.contains("`A` must be a string"), "{e}");
        let e = err(&format!("{MIN}[exec]\nslots = [{{ HONE_RUN = \"x\" }}]\n"));
        assert!(e.message.contains("not a variable a slot may set"), "{e}");
        let e = err(&format!("{MIN}[exec]\nslots = \"0,1\"\n"));
        assert_eq!(e.key, "exec.slots");
        // Every backend runs several verifications at once.
        let s = parse(&format!(
            "{MIN}[exec]\nbackend = \"slurm\"\nshared_dir = \"/s\"\nworkers = 2\n"
        ))
        .unwrap();
        assert_eq!(s.exec.workers, 2);
    }
}
