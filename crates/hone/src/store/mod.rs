//! State: runs, experiments, mechanism hook calls and an append-only event log, in SQLite
//! (`.hone/hone.db`, the default) or in a PostgreSQL database shared by many hosts
//! (`[store] url`).
//!
//! One [`Store`] type serves both: each method's SQL is written once, in the dialect the two
//! share (`?N` parameters, which `pg` rewrites to `$N`), and runs on whichever connection
//! the store holds. In PostgreSQL the tables live in their own schema `hone_store`, and every
//! run carries the key of its repository (`repo`), so many projects can share one database; a
//! tag is unique per repository. In a repository's own SQLite file that key is empty.
//!
//! SQLite runs in WAL mode so readers (`hone status`, `hone log`) never block the loop; its
//! schema is versioned with `PRAGMA user_version`. PostgreSQL's is versioned in
//! `hone_store.schema_migrations`, applied under an advisory lock so that concurrent first
//! connections apply each migration once. Either way each migration runs in a transaction, and
//! the event log refuses updates and deletes in the database itself (triggers). The engine
//! writes an experiment's start before its verifier starts and its outcome before any ref
//! moves, so a crash at any point leaves enough to recover from.
//!
//! The parts: `records` (what the store holds: runs, experiments, statuses, mechanism
//! calls), `schema` (the SQLite migrations and their application), `sql` (the
//! backend-neutral query layer: parameters, rows, transactions, the row readers), the methods
//! by what they read and write (`runs`, `experiments`, `events`, `curves`, `narrowings`), and `pg` (the
//! PostgreSQL connection and its own migrations).

mod curves;
mod events;
mod experiments;
mod narrowings;
mod pg;
mod plot;
mod records;
mod runs;
mod schema;
mod sql;
mod summary;
#[cfg(test)]
pub(crate) mod tests;

pub use curves::Curve;
pub use experiments::{ExperimentQuery, SortKey};
pub use narrowings::{NarrowedRange, NarrowingChange};
pub use plot::{
    envelope, plot_order, PlotColumns, PlotPoint, PlotRows, Plotted, PLOT_BLOCK, TITLE_CHARS,
};
pub use records::{
    best_experiment, decision_order, Effect, ExperimentRecord, Hook, MechanismCall, RunRecord,
    RunState, Status,
};
pub use runs::RunChangeMark;
use sql::{int, text, Cells, Val};
pub use summary::{RunTotals, STREAM_PAGE};

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::Connection;

/// A store failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("state database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("PostgreSQL store: {0}")]
    Postgres(#[from] postgres::Error),
    #[error("cannot reach the PostgreSQL store: {0}; check [store] url (postgres://user@host:port/database) and that the server runs")]
    Connect(String),
    #[error("bad record in the store: {0}")]
    Corrupt(String),
    #[error("the database rolled back the store's transaction after one of its statements failed (a full disk, an I/O error); none of its writes were kept")]
    RolledBack,
    #[error("state database {path} was written by a newer hone (schema {found}, this hone knows {known}); upgrade hone")]
    TooNew {
        path: String,
        found: i64,
        known: i64,
    },
    #[error("the state database {path} was {what} while this run was writing to it, so hone stopped before losing any more records. {saved}")]
    Vanished {
        path: String,
        /// "deleted" or "replaced by another file".
        what: &'static str,
        /// Where the records were saved, and what to do next.
        saved: String,
    },
    #[error("cannot create {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// Where a repository's records live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreLocation {
    /// A repository's own SQLite file (`.hone/hone.db`).
    Sqlite(PathBuf),
    /// A PostgreSQL database (`[store] url`) shared by many hosts and repositories; `repo`
    /// names this repository's runs there.
    Postgres { url: String, repo: String },
}

impl StoreLocation {
    /// Where this location is, for messages: the SQLite path, or the PostgreSQL server and
    /// database without the password.
    pub fn describe(&self) -> String {
        match self {
            StoreLocation::Sqlite(p) => p.display().to_string(),
            StoreLocation::Postgres { url, repo } => {
                format!("{} (repository {repo})", pg::redact(url))
            }
        }
    }
}

/// The connection a store holds.
enum Db {
    Sqlite(Connection),
    Postgres(Box<pg::Pg>),
}

/// The run store: SQLite or PostgreSQL behind one API (see the module's documentation).
pub struct Store {
    db: Db,
    /// The repository whose runs this store reads and writes ("" in a SQLite file).
    repo: String,
    /// How many [`Store::in_transaction`] calls are open (inner ones join the outer one).
    tx_depth: Cell<u32>,
    /// A SQLite file's path and identity when it was opened (see [`Store::check_file`]).
    file: Option<FileIdentity>,
}

/// Which file a SQLite store opened: its path, device and inode.
#[derive(Clone, Debug)]
struct FileIdentity {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

/// Seconds since the Unix epoch, as a float.
pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl Store {
    /// Opens (creating if needed) a SQLite database and brings its schema up to date.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
                path: dir.display().to_string(),
                source,
            })?;
        }
        let mut conn = Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        // FULL: a recorded outcome survives power loss before the branch move that follows it.
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        schema::migrate_sqlite(&mut conn, path)?;
        let meta = std::fs::metadata(path).map_err(|source| StoreError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let mut store = Store::with(Db::Sqlite(conn), "");
        store.file = Some(FileIdentity {
            path: path.to_path_buf(),
            dev: std::os::unix::fs::MetadataExt::dev(&meta),
            ino: std::os::unix::fs::MetadataExt::ino(&meta),
        });
        Ok(store)
    }

    /// Is the SQLite file this store writes still the one it opened? A connection to a file
    /// that was deleted (or replaced: moved over, restored from a copy) goes on writing into
    /// the unlinked file, and every record it writes would be lost. When the file is gone
    /// or another one, the records as this connection holds them are saved beside it
    /// (`VACUUM INTO`) and an error says where. Cheap (one `stat`); always fine for
    /// PostgreSQL and read-only stores.
    pub fn check_file(&self) -> Result<(), StoreError> {
        use std::os::unix::fs::MetadataExt;
        let (Some(id), Db::Sqlite(conn)) = (&self.file, &self.db) else {
            return Ok(());
        };
        let what = match std::fs::metadata(&id.path) {
            Ok(m) if m.dev() == id.dev && m.ino() == id.ino => return Ok(()),
            Ok(_) => "replaced by another file",
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => "deleted",
            Err(source) => {
                return Err(StoreError::Io {
                    path: id.path.display().to_string(),
                    source,
                })
            }
        };
        let mut name = id.path.file_name().unwrap_or_default().to_os_string();
        name.push(format!(".rescued-{}", now() as u64));
        let rescue = id.path.with_file_name(name);
        let saved = match conn.execute("VACUUM INTO ?1", [rescue.to_string_lossy()]) {
            Ok(_) => format!(
                "Every record this run wrote is saved in {rescue}: with no hone running, move it into place (`mv {rescue} {path}`; remove {path}-wal and {path}-shm first if they exist) and run `hone run` to resume",
                rescue = rescue.display(),
                path = id.path.display()
            ),
            Err(e) => format!(
                "Saving its records to {} failed too ({e}); restore {} from a backup, or start a new run with `hone run --new`",
                rescue.display(),
                id.path.display()
            ),
        };
        Err(StoreError::Vanished {
            path: id.path.display().to_string(),
            what,
            saved,
        })
    }

    /// Opens an existing SQLite database read-mostly; `None` when there is none yet.
    pub fn open_existing(path: &Path) -> Result<Option<Store>, StoreError> {
        if !path.exists() {
            return Ok(None);
        }
        Store::open(path).map(Some)
    }

    /// Opens an existing, up-to-date SQLite database for reading only (the dashboard: many
    /// readers beside one `hone run` writing). Fails on a schema this hone does not know; open
    /// it once with [`Store::open`] first to bring an older one up to date.
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        use rusqlite::OpenFlags;
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(Duration::from_secs(5))?;
        schema::sqlite_version(&conn, path)?;
        Ok(Store::with(Db::Sqlite(conn), ""))
    }

    /// Connects to a PostgreSQL store, brings its schema up to date, and reads and writes the
    /// runs of repository `repo` there.
    pub fn connect(url: &str, repo: &str) -> Result<Store, StoreError> {
        Ok(Store::with(
            Db::Postgres(Box::new(pg::Pg::connect(url, false)?)),
            repo,
        ))
    }

    /// Opens the store at `location` (creating and migrating it as needed).
    pub fn open_at(location: &StoreLocation) -> Result<Store, StoreError> {
        match location {
            StoreLocation::Sqlite(path) => Store::open(path),
            StoreLocation::Postgres { url, repo } => Store::connect(url, repo),
        }
    }

    /// Opens the store at `location` if it exists (a SQLite file that is there; a PostgreSQL
    /// store always does, once reachable).
    pub fn open_existing_at(location: &StoreLocation) -> Result<Option<Store>, StoreError> {
        match location {
            StoreLocation::Sqlite(path) => Store::open_existing(path),
            StoreLocation::Postgres { .. } => Store::open_at(location).map(Some),
        }
    }

    /// Opens the store at `location` for reading only: a read-only SQLite connection (see
    /// [`Store::open_read_only`]), or a PostgreSQL session whose transactions are read-only.
    pub fn open_read_only_at(location: &StoreLocation) -> Result<Store, StoreError> {
        match location {
            StoreLocation::Sqlite(path) => Store::open_read_only(path),
            StoreLocation::Postgres { url, repo } => Ok(Store::with(
                Db::Postgres(Box::new(pg::Pg::connect(url, true)?)),
                repo,
            )),
        }
    }

    fn with(db: Db, repo: &str) -> Store {
        Store {
            db,
            repo: repo.to_string(),
            tx_depth: Cell::new(0),
            file: None,
        }
    }

    /// Whether an experiment's start and archive rows are written without their own sync
    /// (SQLite: a power loss can lose the rows of experiments in flight, never a finished
    /// one); PostgreSQL commits every row durably.
    pub fn leaves_starts_unsynced(&self) -> bool {
        matches!(self.db, Db::Sqlite(_))
    }

    /// The repository whose runs this store holds ("" in a repository's own SQLite file).
    pub fn repo(&self) -> &str {
        &self.repo
    }

    /// Whether the records live in PostgreSQL (shared with other hosts).
    pub fn is_shared(&self) -> bool {
        matches!(self.db, Db::Postgres(_))
    }
}
