//! Reading the store from the server: read-only connections (to `.hone/hone.db`, or to the
//! PostgreSQL store of `[store] url`) kept in a small pool and used only on tokio's blocking
//! pool, so `hone run` (another process; SQLite in WAL mode) can write while pages are served
//! and no query ever runs on the async thread.

use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hone::engine::StatePaths;
use hone::store::{RunRecord, Store, StoreError, StoreLocation};

/// Idle connections kept for reuse; more may be open at once under load.
const POOL: usize = 4;

/// Why a request could not be answered.
#[derive(Debug)]
pub(crate) enum AppError {
    /// No `.hone/hone.db` yet: nothing has run here.
    NoStore,
    NotFound(String),
    BadRequest(String),
    Internal(String),
}

impl From<StoreError> for AppError {
    fn from(e: StoreError) -> Self {
        AppError::Internal(e.to_string())
    }
}

impl AppError {
    pub fn status(&self) -> StatusCode {
        match self {
            AppError::NoStore | AppError::NotFound(_) => StatusCode::NOT_FOUND,
            AppError::BadRequest(_) => StatusCode::BAD_REQUEST,
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn message(&self) -> String {
        match self {
            AppError::NoStore => {
                "no hone runs here yet: start one with `hone run` (this page follows it live)"
                    .into()
            }
            AppError::NotFound(m) | AppError::BadRequest(m) | AppError::Internal(m) => m.clone(),
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        (self.status(), format!("{}\n", self.message())).into_response()
    }
}

/// The store, as the server reads it.
pub(crate) struct Db {
    location: StoreLocation,
    idle: Mutex<Vec<Store>>,
}

impl Db {
    /// The store at `location`, or (`None`) the repository's own `.hone/hone.db`.
    pub fn new(repo_root: &Path, location: Option<StoreLocation>) -> Db {
        Db {
            location: location
                .unwrap_or_else(|| StoreLocation::Sqlite(StatePaths::new(repo_root).db())),
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Brings an existing store's schema up to date once (the read-only connections that
    /// follow cannot); a missing store is fine, `hone run` will create an up-to-date one.
    pub fn upgrade(&self) -> anyhow::Result<()> {
        Store::open_existing_at(&self.location)
            .with_context(|| format!("cannot open {}", self.location.describe()))?;
        Ok(())
    }

    fn take(&self) -> Result<Store, AppError> {
        if let Some(s) = self.idle.lock().ok().and_then(|mut idle| idle.pop()) {
            return Ok(s);
        }
        if let StoreLocation::Sqlite(path) = &self.location {
            if !path.exists() {
                return Err(AppError::NoStore);
            }
        }
        Ok(Store::open_read_only_at(&self.location)?)
    }

    fn give_back(&self, store: Store) {
        if let Ok(mut idle) = self.idle.lock() {
            if idle.len() < POOL {
                idle.push(store);
            }
        }
    }

    /// Runs `f` with a connection on the blocking pool.
    pub async fn read<T, F>(self: &Arc<Self>, f: F) -> Result<T, AppError>
    where
        T: Send + 'static,
        F: FnOnce(&Store) -> Result<T, AppError> + Send + 'static,
    {
        let db = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let store = db.take()?;
            let out = f(&store);
            db.give_back(store);
            out
        })
        .await
        .map_err(|e| AppError::Internal(format!("a database task failed: {e}")))?
    }
}

/// The run with this tag, or a 404 that says where to look.
pub(crate) fn run_by_tag(store: &Store, tag: &str) -> Result<RunRecord, AppError> {
    store.run_by_tag(tag)?.ok_or_else(|| {
        AppError::NotFound(format!(
            "no run tagged `{tag}` in this store; the runs list at / shows every run"
        ))
    })
}
