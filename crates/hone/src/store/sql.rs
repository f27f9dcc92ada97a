//! The store's backend-neutral query layer: a parameter ([`Val`]) binds the same way in both
//! databases, a row of either is read by column name ([`Cells`]), each statement runs on
//! whichever connection the store holds, transactions nest by joining the outer one, and the
//! row readers turn a row into a record (text a hone does not know is a corrupt record).

use crate::verify::Direction;

use super::{Db, ExperimentRecord, RunRecord, RunState, Status, Store, StoreError};

/// A query parameter, bound the same way by both databases.
#[derive(Debug)]
pub(super) enum Val<'a> {
    Int(Option<i64>),
    Real(Option<f64>),
    Text(Option<&'a str>),
}

pub(super) fn int(v: u64) -> Val<'static> {
    Val::Int(Some(v.min(i64::MAX as u64) as i64))
}

pub(super) fn text(v: &str) -> Val<'_> {
    Val::Text(Some(v))
}

impl rusqlite::ToSql for Val<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        match self {
            Val::Int(v) => v.to_sql(),
            Val::Real(v) => v.to_sql(),
            Val::Text(v) => v.to_sql(),
        }
    }
}

/// A row of either database, read by column name.
pub(super) trait Cells {
    fn int(&self, col: &str) -> Result<Option<i64>, StoreError>;
    fn real(&self, col: &str) -> Result<Option<f64>, StoreError>;
    fn text(&self, col: &str) -> Result<Option<String>, StoreError>;
    /// The cells by position, for a hot query that names its columns: a look-up by name
    /// compares the name with each column's.
    fn int_at(&self, i: usize) -> Result<Option<i64>, StoreError>;
    fn real_at(&self, i: usize) -> Result<Option<f64>, StoreError>;
    fn text_at(&self, i: usize) -> Result<Option<String>, StoreError>;

    fn req_int(&self, col: &str) -> Result<i64, StoreError> {
        self.int(col)?
            .ok_or_else(|| StoreError::Corrupt(format!("{col} is NULL")))
    }
    fn req_u64(&self, col: &str) -> Result<u64, StoreError> {
        Ok(self.req_int(col)?.max(0) as u64)
    }
    fn req_real(&self, col: &str) -> Result<f64, StoreError> {
        self.real(col)?
            .ok_or_else(|| StoreError::Corrupt(format!("{col} is NULL")))
    }
    fn req_text(&self, col: &str) -> Result<String, StoreError> {
        self.text(col)?
            .ok_or_else(|| StoreError::Corrupt(format!("{col} is NULL")))
    }
}

impl Cells for rusqlite::Row<'_> {
    fn int(&self, col: &str) -> Result<Option<i64>, StoreError> {
        Ok(self.get(col)?)
    }
    fn real(&self, col: &str) -> Result<Option<f64>, StoreError> {
        Ok(self.get(col)?)
    }
    fn text(&self, col: &str) -> Result<Option<String>, StoreError> {
        Ok(self.get(col)?)
    }
    fn int_at(&self, i: usize) -> Result<Option<i64>, StoreError> {
        Ok(self.get(i)?)
    }
    fn real_at(&self, i: usize) -> Result<Option<f64>, StoreError> {
        Ok(self.get(i)?)
    }
    fn text_at(&self, i: usize) -> Result<Option<String>, StoreError> {
        Ok(self.get(i)?)
    }
}

impl Store {
    /// Runs one statement; the number of rows it changed.
    pub(super) fn exec(&self, sql: &str, params: &[Val<'_>]) -> Result<u64, StoreError> {
        match &self.db {
            Db::Sqlite(conn) => {
                self.check_open()?;
                let mut st = conn.prepare_cached(sql)?;
                Ok(st.execute(rusqlite::params_from_iter(params.iter()))? as u64)
            }
            Db::Postgres(pg) => pg.execute(sql, params),
        }
    }

    /// Runs a query and converts each row with `f`.
    pub(super) fn query<T>(
        &self,
        sql: &str,
        params: &[Val<'_>],
        mut f: impl FnMut(&dyn Cells) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        match &self.db {
            Db::Sqlite(conn) => {
                let mut st = conn.prepare_cached(sql)?;
                let mut rows = st.query(rusqlite::params_from_iter(params.iter()))?;
                let mut out = Vec::new();
                while let Some(row) = rows.next()? {
                    out.push(f(row)?);
                }
                Ok(out)
            }
            Db::Postgres(pg) => pg
                .query(sql, params)?
                .iter()
                .map(|row| f(row as &dyn Cells))
                .collect(),
        }
    }

    /// The first row of a query, if any.
    pub(super) fn query_opt<T>(
        &self,
        sql: &str,
        params: &[Val<'_>],
        f: impl FnMut(&dyn Cells) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        Ok(self.query(sql, params, f)?.into_iter().next())
    }

    /// Runs `f` in one transaction: committed when it returns `Ok`, rolled back otherwise.
    /// Many writes in one go (an import, a benchmark's fixture) then cost one sync, not one
    /// each. A call inside another joins the outer transaction.
    pub fn in_transaction<T>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.begin()?;
        match f(self) {
            Ok(v) => {
                self.commit()?;
                Ok(v)
            }
            Err(e) => {
                self.rollback();
                Err(e)
            }
        }
    }

    /// Runs `f`, a reader of several statements, on one moment of the store: a read
    /// transaction (SQLite's deferred one; PostgreSQL's repeatable read, whose statements all
    /// see the snapshot of its first), so that a writer between two statements changes none
    /// of what they read together (a page's plot and its totals). It works on a store opened
    /// read-only, and `f` cannot write: a write fails (SQLite's `query_only`, PostgreSQL's
    /// read-only transaction) instead of being rolled back unseen at the end. A call inside a
    /// transaction joins it.
    pub fn read_consistent<T, E: From<StoreError>>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, E>,
    ) -> Result<T, E> {
        let depth = self.tx_depth.get();
        if depth > 0 {
            return f(self);
        }
        self.batch(match self.db {
            Db::Sqlite(_) => "PRAGMA query_only = ON; BEGIN DEFERRED",
            Db::Postgres(_) => "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
        })?;
        self.tx_depth.set(1);
        let read = f(self);
        self.tx_depth.set(0);
        // Nothing was written: ending it either way keeps nothing and loses nothing.
        let ended = self.batch(match self.db {
            Db::Sqlite(_) => "ROLLBACK; PRAGMA query_only = OFF",
            Db::Postgres(_) => "ROLLBACK",
        });
        let v = read?;
        ended?;
        Ok(v)
    }

    /// Opens a transaction that [`Store::commit`] commits and [`Store::rollback`] rolls back:
    /// [`Store::in_transaction`] for a caller that cannot hand its work over as a closure (the
    /// engine's finish of an experiment, which needs the engine itself). Inside another
    /// transaction, it joins that one.
    pub fn begin(&self) -> Result<(), StoreError> {
        let depth = self.tx_depth.get();
        if depth == 0 {
            self.batch(match self.db {
                Db::Sqlite(_) => "BEGIN IMMEDIATE",
                Db::Postgres(_) => "BEGIN",
            })?;
        }
        self.tx_depth.set(depth + 1);
        Ok(())
    }

    /// Ends what [`Store::begin`] opened: the outermost commits. A transaction the database
    /// has already ended (a failed statement aborts one in PostgreSQL, whose COMMIT then only
    /// rolls it back; SQLite rolls one back by itself on a full disk or an I/O error) is an
    /// error, [`StoreError::RolledBack`], never a success that kept nothing.
    pub fn commit(&self) -> Result<(), StoreError> {
        let depth = self.tx_depth.get();
        if depth != 1 {
            self.tx_depth.set(depth.saturating_sub(1));
            return Ok(());
        }
        let open = self.check_open();
        self.tx_depth.set(0);
        open?;
        let committed = match &self.db {
            Db::Sqlite(_) => self.batch("COMMIT"),
            // In an aborted transaction the SELECT fails (25P02) and the COMMIT is not run.
            Db::Postgres(_) => self.batch("SELECT 1; COMMIT").map_err(|e| match e {
                StoreError::Postgres(pe)
                    if pe.code() == Some(&postgres::error::SqlState::IN_FAILED_SQL_TRANSACTION) =>
                {
                    StoreError::RolledBack
                }
                e => e,
            }),
        };
        if let Err(e) = committed {
            // A failed COMMIT may leave the transaction open (SQLite: busy); end it.
            let _ = self.batch("ROLLBACK");
            return Err(e);
        }
        Ok(())
    }

    /// Inside a transaction, whether it is still open: SQLite rolls a transaction back by
    /// itself on some errors (a full disk, an I/O error), after which each statement would
    /// commit on its own, apart from the writes it was to be atomic with. (PostgreSQL refuses
    /// every statement of an aborted transaction by itself.)
    fn check_open(&self) -> Result<(), StoreError> {
        match &self.db {
            Db::Sqlite(conn) if self.tx_depth.get() > 0 && conn.is_autocommit() => {
                Err(StoreError::RolledBack)
            }
            _ => Ok(()),
        }
    }

    /// Runs `f`, a write whose failure must not cost the writes around it (an event of the
    /// log, which is a record, not a control path); its error is returned for the caller to
    /// ignore. Inside a transaction `f` runs in a savepoint that its failure rolls back to: in
    /// PostgreSQL a failed statement aborts the whole transaction otherwise. (Where the
    /// database rolled the whole transaction back, the savepoint is gone with it; the next
    /// write and the commit fail with [`StoreError::RolledBack`].)
    pub fn best_effort<T>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        if self.tx_depth.get() == 0 {
            return f(self);
        }
        self.check_open()?;
        self.batch("SAVEPOINT hone_best_effort")?;
        match f(self) {
            Ok(v) => {
                self.batch("RELEASE SAVEPOINT hone_best_effort")?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.batch(
                    "ROLLBACK TO SAVEPOINT hone_best_effort; RELEASE SAVEPOINT hone_best_effort",
                );
                Err(e)
            }
        }
    }

    /// Runs `f`'s writes without the `fsync` that `synchronous = FULL` gives each commit
    /// (SQLite, outside a transaction; elsewhere `f` runs as it is): for a write that must
    /// survive hone's `kill -9`, which its reaching the operating system ensures, but need not
    /// survive a power loss on its own. In WAL mode the next fully synchronous commit (an
    /// experiment's finish) syncs the log with every relaxed commit before it, so a power loss
    /// can lose only relaxed commits made after the last full one, never a full one.
    /// The store is back to `synchronous = FULL` afterwards, also when `f` fails.
    pub fn relaxed<T, E: From<StoreError>>(
        &self,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        let relaxed = self.relax_sync()?;
        let written = f();
        self.restore_sync(relaxed)?;
        written
    }

    /// [`Store::relaxed`] for a caller that cannot hand its writes over as a closure: from
    /// here the commits skip their sync (SQLite, outside a transaction: returns whether it
    /// did anything) until [`Store::restore_sync`] with what this returned.
    pub fn relax_sync(&self) -> Result<bool, StoreError> {
        // Only in WAL, where the next FULL commit's sync covers the relaxed ones before it
        // (in a rollback journal NORMAL can corrupt on a power loss), and outside any
        // transaction (SQLite refuses to change it inside one).
        let relaxed = match &self.db {
            Db::Sqlite(conn) => {
                conn.is_autocommit()
                    && conn
                        .query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0))?
                        .eq_ignore_ascii_case("wal")
            }
            Db::Postgres(_) => false,
        };
        if relaxed {
            self.batch("PRAGMA synchronous = NORMAL")?;
        }
        Ok(relaxed)
    }

    /// Ends what [`Store::relax_sync`] began (`relaxed`: what it returned).
    pub fn restore_sync(&self, relaxed: bool) -> Result<(), StoreError> {
        if relaxed {
            self.batch("PRAGMA synchronous = FULL")?;
        }
        Ok(())
    }

    /// Ends what [`Store::begin`] opened, undoing it: the outermost rolls back (an inner one
    /// leaves that to the outermost, whose caller sees the error that made this one fail).
    pub fn rollback(&self) {
        let depth = self.tx_depth.get();
        self.tx_depth.set(depth.saturating_sub(1));
        if depth == 1 {
            // The error that made us roll back is the one to report.
            let _ = self.batch("ROLLBACK");
        }
    }

    pub(super) fn batch(&self, sql: &str) -> Result<(), StoreError> {
        match &self.db {
            Db::Sqlite(conn) => conn.execute_batch(sql)?,
            Db::Postgres(pg) => pg.batch(sql)?,
        }
        Ok(())
    }
}

/// A text column read as the type it names; text this hone does not know is a corrupt record
/// (a new direction or run state would come with a new schema version, which an older hone
/// refuses before reading any row).
fn typed<T>(r: &dyn Cells, col: &str, parse: impl Fn(&str) -> Option<T>) -> Result<T, StoreError> {
    let t = r.req_text(col)?;
    parse(&t).ok_or_else(|| {
        StoreError::Corrupt(format!(
            "runs.{col} is `{t}`, which this hone does not know"
        ))
    })
}

pub(super) fn run_from_row(r: &dyn Cells) -> Result<RunRecord, StoreError> {
    Ok(RunRecord {
        id: r.req_int("id")?,
        tag: r.req_text("tag")?,
        branch: r.req_text("branch")?,
        base_commit: r.req_text("base_commit")?,
        created_at: r.req_real("created_at")?,
        seed: r.req_int("seed")? as u64,
        agent: r.req_text("agent")?,
        metric: r.req_text("metric")?,
        direction: typed(r, "direction", Direction::parse)?,
        state: typed(r, "state", RunState::parse)?,
        stop_reason: r.text("stop_reason")?,
        active_seconds: r.req_real("active_seconds")?,
        seals: r.req_text("seals")?,
        spec_json: r.req_text("spec_json")?,
    })
}

/// A JSON column read as a `T`: None where it is NULL, and where it is not JSON of a `T` (a
/// record's optional part that cannot be read is left out, not an error).
pub(super) fn json_cell<T: serde::de::DeserializeOwned>(
    r: &dyn Cells,
    col: &str,
) -> Result<Option<T>, StoreError> {
    Ok(r.text(col)?.and_then(|t| serde_json::from_str(&t).ok()))
}

/// An experiment's number, status and value: a point of a plot, the least the plot reads.
pub(super) fn value_from_row(r: &dyn Cells) -> Result<ExperimentRecord, StoreError> {
    Ok(ExperimentRecord {
        n: r.req_u64("n")?,
        status: Status::parse(&r.req_text("status")?),
        objective: r.real("objective")?,
        ..Default::default()
    })
}

/// [`value_from_row`] with the verification time, cost and holdout: what a summary's totals
/// read of each experiment.
pub(super) fn point_from_row(r: &dyn Cells) -> Result<ExperimentRecord, StoreError> {
    Ok(ExperimentRecord {
        verify_ms: r.req_u64("verify_ms")?,
        cost_usd: r.req_real("cost_usd")?,
        holdout: r.real("holdout")?,
        ..value_from_row(r)?
    })
}

/// `e` with the description and reason of the row `r`.
pub(super) fn with_texts(
    r: &dyn Cells,
    e: ExperimentRecord,
) -> Result<ExperimentRecord, StoreError> {
    Ok(ExperimentRecord {
        description: r.req_text("description")?,
        reason: r.req_text("reason")?,
        ..e
    })
}

/// [`with_texts`] and the configuration: what an outline holds ([`Store::experiment_outlines`]).
pub(super) fn with_outline(
    r: &dyn Cells,
    e: ExperimentRecord,
) -> Result<ExperimentRecord, StoreError> {
    Ok(ExperimentRecord {
        config: json_cell(r, "config")?,
        ..with_texts(r, e)?
    })
}

pub(super) fn experiment_from_row(r: &dyn Cells) -> Result<ExperimentRecord, StoreError> {
    let metrics = r.req_text("metrics")?;
    let status = r.req_text("status")?;
    Ok(ExperimentRecord {
        n: r.req_u64("n")?,
        parent_commit: r.req_text("parent_commit")?,
        candidate_commit: r.text("candidate_commit")?,
        status: Status::parse(&status),
        objective: r.real("objective")?,
        metrics: serde_json::from_str(&metrics).unwrap_or_default(),
        config: json_cell(r, "config")?,
        description: r.req_text("description")?,
        reason: r.req_text("reason")?,
        files_changed: r.req_u64("files_changed")?,
        lines_added: r.req_u64("lines_added")?,
        lines_deleted: r.req_u64("lines_deleted")?,
        propose_ms: r.req_u64("propose_ms")?,
        gate_ms: r.req_u64("gate_ms")?,
        verify_ms: r.req_u64("verify_ms")?,
        total_ms: r.req_u64("total_ms")?,
        started_at: r.req_real("started_at")?,
        finished_at: r.real("finished_at")?,
        log_path: r.text("log_path")?,
        pid: r.int("pid")?.and_then(|v| u32::try_from(v).ok()),
        pid_start: r.int("pid_start")?.map(|v| v as u64),
        cost_usd: r.req_real("cost_usd")?,
        runs: serde_json::from_str(&r.req_text("runs")?).unwrap_or_default(),
        judgement: json_cell(r, "judgement")?,
        tree: r.text("tree")?,
        holdout: r.real("holdout")?,
        tokens: r.req_u64("tokens")?,
    })
}
