//! The PostgreSQL side of the store: the connection, the schema (the SQLite one translated:
//! `BIGSERIAL`, `DOUBLE PRECISION`, `TEXT`, the event log's append-only rule as a trigger),
//! its versioned migrations, and the rewriting of the shared SQL's `?N` parameters to `$N`.
//!
//! Everything lives in the schema `hone_store`, so the store sits beside other tables (the
//! workers' queue among them) in a database of the user's choosing. (Not `hone`: a database
//! user of that name would find it first on PostgreSQL's default search path, `"$user",
//! public`, and the queue's unqualified tables would follow it there.) Migrations are numbered; the ones
//! applied are rows of `hone_store.schema_migrations`. A connection applies the missing ones in one
//! transaction holding an advisory lock, so hosts that connect at once apply each exactly once.

use std::cell::RefCell;
use std::collections::HashMap;

use postgres::types::ToSql;
use postgres::{Client, NoTls, Row, Statement};

use super::{Cells, StoreError, Val};

/// An arbitrary constant (`hone` and `s`): the advisory lock that serialises migrations.
const MIGRATION_LOCK: i64 = 0x0068_6f6e_6573;

/// Migrations, in order; `hone_store.schema_migrations` lists the versions applied.
const MIGRATIONS: &[&str] = &[
    // 1: the SQLite schema as of its version 7, translated.
    r#"
CREATE TABLE runs (
    id             BIGSERIAL PRIMARY KEY,
    repo           TEXT NOT NULL,
    tag            TEXT NOT NULL,
    branch         TEXT NOT NULL,
    base_commit    TEXT NOT NULL,
    created_at     DOUBLE PRECISION NOT NULL,
    seed           BIGINT NOT NULL,
    agent          TEXT NOT NULL,
    metric         TEXT NOT NULL,
    direction      TEXT NOT NULL,
    state          TEXT NOT NULL,
    stop_reason    TEXT,
    active_seconds DOUBLE PRECISION NOT NULL DEFAULT 0,
    seals          TEXT NOT NULL,
    spec_json      TEXT NOT NULL,
    UNIQUE (repo, tag)
);
CREATE INDEX runs_by_repo ON runs(repo, id);
CREATE TABLE experiments (
    run_id           BIGINT NOT NULL REFERENCES runs(id),
    n                BIGINT NOT NULL,
    parent_commit    TEXT NOT NULL,
    candidate_commit TEXT,
    status           TEXT NOT NULL,
    objective        DOUBLE PRECISION,
    metrics          TEXT NOT NULL DEFAULT '{}',
    config           TEXT,
    description      TEXT NOT NULL DEFAULT '',
    reason           TEXT NOT NULL DEFAULT '',
    files_changed    BIGINT NOT NULL DEFAULT 0,
    lines_added      BIGINT NOT NULL DEFAULT 0,
    lines_deleted    BIGINT NOT NULL DEFAULT 0,
    propose_ms       BIGINT NOT NULL DEFAULT 0,
    gate_ms          BIGINT NOT NULL DEFAULT 0,
    verify_ms        BIGINT NOT NULL DEFAULT 0,
    total_ms         BIGINT NOT NULL DEFAULT 0,
    started_at       DOUBLE PRECISION NOT NULL,
    finished_at      DOUBLE PRECISION,
    log_path         TEXT,
    pid              BIGINT,
    pid_start        BIGINT,
    cost_usd         DOUBLE PRECISION NOT NULL DEFAULT 0,
    runs             TEXT NOT NULL DEFAULT '[]',
    judgement        TEXT,
    tree             TEXT,
    holdout          DOUBLE PRECISION,
    tokens           BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, n)
);
CREATE INDEX experiments_by_status ON experiments(run_id, status, n);
CREATE INDEX experiments_by_objective ON experiments(run_id, objective, n);
CREATE TABLE events (
    id         BIGSERIAL PRIMARY KEY,
    run_id     BIGINT NOT NULL REFERENCES runs(id),
    experiment BIGINT,
    at         DOUBLE PRECISION NOT NULL,
    kind       TEXT NOT NULL,
    data       TEXT NOT NULL
);
CREATE INDEX events_by_run ON events(run_id, id);
CREATE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'events are append-only'; END
$$;
CREATE TRIGGER events_append_only_row BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION events_append_only();
CREATE TRIGGER events_append_only_truncate BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION events_append_only();
CREATE TABLE mechanism_calls (
    id         BIGSERIAL PRIMARY KEY,
    run_id     BIGINT NOT NULL REFERENCES runs(id),
    experiment BIGINT NOT NULL,
    mechanism  TEXT NOT NULL,
    hook       TEXT NOT NULL,
    effect     TEXT NOT NULL,
    detail     TEXT NOT NULL DEFAULT '',
    at         DOUBLE PRECISION NOT NULL
);
CREATE INDEX mechanism_calls_by_run ON mechanism_calls(run_id, experiment);
"#,
    // 2: the SQLite schema's version 8, the verifier's intermediate values.
    r#"
CREATE TABLE curves (
    run_id     BIGINT NOT NULL REFERENCES runs(id),
    experiment BIGINT NOT NULL,
    step       DOUBLE PRECISION NOT NULL,
    value      DOUBLE PRECISION NOT NULL,
    at         DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, experiment, step)
);
"#,
    // 3: as SQLite's migration 9: what summaries, plots and sorts read, in one covering
    // index; which experiments have a holdout, which cost money.
    super::schema::OUTLINE_INDEXES,
    // 4: as SQLite's migration 10: a run's running totals by status, kept by a trigger in the
    // transaction of every write to `experiments` and filled once from the rows; the indexes
    // of the table's sorts by duration and cost.
    r#"
CREATE TABLE run_tallies (
    run_id      BIGINT NOT NULL REFERENCES runs(id),
    status      TEXT NOT NULL,
    experiments BIGINT NOT NULL DEFAULT 0,
    verify_ms   BIGINT NOT NULL DEFAULT 0,
    cost_nanos  BIGINT NOT NULL DEFAULT 0,
    holdouts    BIGINT NOT NULL DEFAULT 0,
    paid        BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, status)
);
CREATE FUNCTION hone_store.cost_nanos(c DOUBLE PRECISION) RETURNS BIGINT
    LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN c = 'NaN'::float8 THEN 0::BIGINT ELSE trunc(v + CASE WHEN v < 0 THEN -0.5 ELSE 0.5 END)::BIGINT END
    FROM (SELECT LEAST(GREATEST(c * 1e9::float8, -1e15::float8), 1e15::float8) AS v) AS clamped
$$;
CREATE FUNCTION hone_store.tally_add(p_run BIGINT, p_status TEXT, k BIGINT, ms BIGINT,
                                     cost DOUBLE PRECISION, holdout DOUBLE PRECISION)
    RETURNS void LANGUAGE sql AS $$
    INSERT INTO hone_store.run_tallies (run_id, status) VALUES (p_run, p_status)
        ON CONFLICT DO NOTHING;
    UPDATE hone_store.run_tallies SET experiments = experiments + k,
        verify_ms = verify_ms + k * ms, cost_nanos = cost_nanos + k * hone_store.cost_nanos(cost),
        holdouts = holdouts + CASE WHEN holdout IS NULL THEN 0 ELSE k END,
        paid = paid + CASE WHEN cost > 0 AND cost <> 'NaN'::float8 THEN k ELSE 0 END
        WHERE run_id = p_run AND status = p_status;
$$;
CREATE FUNCTION hone_store.experiments_tally() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM hone_store.tally_add(new.run_id, new.status, 1, new.verify_ms, new.cost_usd, new.holdout);
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM hone_store.tally_add(old.run_id, old.status, -1, old.verify_ms, old.cost_usd, old.holdout);
    ELSIF (old.run_id, old.status, old.verify_ms, old.cost_usd, old.holdout IS NULL)
          IS DISTINCT FROM (new.run_id, new.status, new.verify_ms, new.cost_usd, new.holdout IS NULL) THEN
        -- Tally rows are locked in one order (by status), so that two transactions never
        -- wait for each other in a circle.
        IF old.status <= new.status THEN
            PERFORM hone_store.tally_add(old.run_id, old.status, -1, old.verify_ms, old.cost_usd, old.holdout);
            PERFORM hone_store.tally_add(new.run_id, new.status, 1, new.verify_ms, new.cost_usd, new.holdout);
        ELSE
            PERFORM hone_store.tally_add(new.run_id, new.status, 1, new.verify_ms, new.cost_usd, new.holdout);
            PERFORM hone_store.tally_add(old.run_id, old.status, -1, old.verify_ms, old.cost_usd, old.holdout);
        END IF;
    END IF;
    RETURN NULL;
END
$$;
-- The trigger first: creating it waits for the writes in progress and holds off new ones
-- until this transaction commits, so the rows counted below are all there are.
CREATE TRIGGER experiments_tally AFTER INSERT OR UPDATE OR DELETE ON experiments
    FOR EACH ROW EXECUTE FUNCTION hone_store.experiments_tally();
INSERT INTO run_tallies (run_id, status, experiments, verify_ms, cost_nanos, holdouts, paid)
    SELECT run_id, status, COUNT(*), SUM(verify_ms), SUM(hone_store.cost_nanos(cost_usd)),
           COUNT(holdout), SUM(CASE WHEN cost_usd > 0 AND cost_usd <> 'NaN'::float8 THEN 1 ELSE 0 END)
    FROM experiments GROUP BY run_id, status;
CREATE INDEX experiments_by_status_duration ON experiments(run_id, status, total_ms, n);
CREATE INDEX experiments_by_status_cost ON experiments(run_id, status, cost_usd, n);
CREATE INDEX experiments_by_duration ON experiments(run_id, total_ms, n);
CREATE INDEX experiments_by_cost ON experiments(run_id, cost_usd, n);
"#,
    // 5: the runs' narrowing logs, SQLite's migration 11 in the same words.
    super::schema::NARROWINGS,
    // 6: as SQLite's migration 12: what the progress plot draws of each block of 16
    // experiments, kept by a trigger and filled once from the rows; the keeps and baselines
    // by a partial index (their texts stay in the table: an index row has a size limit here
    // that a long description would pass).
    r#"
CREATE TABLE plot_blocks (
    run_id   BIGINT NOT NULL REFERENCES runs(id),
    block    BIGINT NOT NULL,
    discards BIGINT NOT NULL DEFAULT 0,
    lo_n     BIGINT,
    lo_v     DOUBLE PRECISION,
    lo_d     TEXT,
    mid_n    BIGINT,
    mid_v    DOUBLE PRECISION,
    mid_d    TEXT,
    hi_n     BIGINT,
    hi_v     DOUBLE PRECISION,
    hi_d     TEXT,
    fail_x   BIGINT,
    fail_x_r TEXT,
    fail_t   BIGINT,
    fail_t_r TEXT,
    fail_p   BIGINT,
    fail_p_r TEXT,
    fail_o   BIGINT,
    fail_o_r TEXT,
    fail_o_s TEXT,
    PRIMARY KEY (run_id, block)
);
CREATE FUNCTION hone_store.plot_block(p_run BIGINT, p_block BIGINT) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO hone_store.plot_blocks (run_id, block) VALUES (p_run, p_block)
        ON CONFLICT DO NOTHING;
    -- The block's row is locked before its experiments are read (under READ COMMITTED, the
    -- default, each statement reads a snapshot of its own): a writer of the same block waits
    -- here, then reads what the other one committed. (Under a stricter default isolation, a
    -- second writer of the block fails to serialize rather than leave it stale.)
    PERFORM 1 FROM hone_store.plot_blocks WHERE run_id = p_run AND block = p_block FOR UPDATE;
    UPDATE hone_store.plot_blocks SET {BLOCK_SET} WHERE run_id = p_run AND block = p_block;
END
$$;
CREATE FUNCTION hone_store.experiments_plot() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF new.status IN {PLOTTED} THEN
            PERFORM hone_store.plot_block(new.run_id, new.n / 16);
        END IF;
    ELSIF TG_OP = 'DELETE' THEN
        IF old.status IN {PLOTTED} THEN
            PERFORM hone_store.plot_block(old.run_id, old.n / 16);
        END IF;
    -- The value compared by its bits: 0 and -0 are equal numbers but not the same text.
    ELSIF (old.status IN {PLOTTED} OR new.status IN {PLOTTED})
          AND (old.run_id, old.n, old.status, float8send(old.objective), old.description,
               old.reason)
              IS DISTINCT FROM (new.run_id, new.n, new.status, float8send(new.objective),
               new.description, new.reason) THEN
        IF (old.run_id, old.n / 16) IS DISTINCT FROM (new.run_id, new.n / 16) THEN
            PERFORM hone_store.plot_block(old.run_id, old.n / 16);
        END IF;
        PERFORM hone_store.plot_block(new.run_id, new.n / 16);
    END IF;
    RETURN NULL;
END
$$;
-- The trigger first: creating it holds off writes until this transaction commits, so the
-- blocks filled below are all there are.
CREATE TRIGGER experiments_plot AFTER INSERT OR UPDATE OR DELETE ON experiments
    FOR EACH ROW EXECUTE FUNCTION hone_store.experiments_plot();
INSERT INTO plot_blocks (run_id, block)
    SELECT DISTINCT run_id, n / 16 FROM experiments WHERE status IN {PLOTTED};
UPDATE plot_blocks SET {BLOCK_SET};
CREATE INDEX experiments_kept ON experiments(run_id, n) WHERE status IN ('baseline', 'keep');
"#,
    // 7: the narrowing logs of an older rule dropped, SQLite's migration 14 in the same words.
    super::schema::NARROWINGS_AGAIN,
];

/// The migrations, for a test that writes an older schema.
#[cfg(test)]
pub(super) fn migrations() -> &'static [&'static str] {
    MIGRATIONS
}

/// How many migrations this hone knows.
#[cfg(test)]
pub(super) fn migration_count() -> usize {
    MIGRATIONS.len()
}

/// At most this many prepared statements are kept per connection.
const MAX_STATEMENTS: usize = 256;

/// A connection to the PostgreSQL store, with its prepared statements.
pub(super) struct Pg {
    client: RefCell<Client>,
    statements: RefCell<HashMap<String, Statement>>,
}

/// `url` without its password, for messages.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, tail) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    // A password in the query (`?password=...`, its key spelt in any case or percent-encoded)
    // goes too.
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let kept: Vec<&str> = query
                .split('&')
                .filter(|kv| {
                    let key = kv.split('=').next().unwrap_or("");
                    !crate::util::percent_decoded(key).eq_ignore_ascii_case("password")
                })
                .collect();
            if kept.is_empty() {
                path.to_string()
            } else {
                format!("{path}?{}", kept.join("&"))
            }
        }
        None => tail.to_string(),
    };
    match authority.rsplit_once('@') {
        Some((user, host)) => {
            let user = user.split(':').next().unwrap_or("");
            format!("{scheme}://{user}@{host}{tail}")
        }
        None => format!("{scheme}://{authority}{tail}"),
    }
}

/// The shared SQL in PostgreSQL's spelling: `?N` parameters become `$N`. (The store's SQL has
/// no `?` inside string literals.)
fn translate(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(|d| d.is_ascii_digit()) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

impl Pg {
    /// Connects, brings the schema up to date, and (for readers) makes every transaction of
    /// the session read-only.
    pub fn connect(url: &str, read_only: bool) -> Result<Pg, StoreError> {
        let mut client = Client::connect(url, NoTls)
            .map_err(|e| StoreError::Connect(format!("{}: {e}", redact(url))))?;
        migrate(&mut client, url)?;
        client.batch_execute("SET search_path TO hone_store")?;
        if read_only {
            client.batch_execute("SET default_transaction_read_only = on")?;
        }
        Ok(Pg {
            client: RefCell::new(client),
            statements: RefCell::new(HashMap::new()),
        })
    }

    /// The prepared statement for `sql` (prepared once per connection, while it stays in the
    /// cache of at most [`MAX_STATEMENTS`]).
    fn statement(&self, sql: &str) -> Result<Statement, StoreError> {
        if let Some(st) = self.statements.borrow().get(sql) {
            return Ok(st.clone());
        }
        let st = self.client.borrow_mut().prepare(&translate(sql))?;
        let mut cache = self.statements.borrow_mut();
        // Statements that name experiment numbers (a curve's, the references') differ from
        // one experiment to the next: the cache is bounded, and a statement dropped from it
        // is closed on the server when its last handle goes.
        if cache.len() >= MAX_STATEMENTS {
            cache.clear();
        }
        cache.insert(sql.to_string(), st.clone());
        Ok(st)
    }

    pub fn execute(&self, sql: &str, params: &[Val<'_>]) -> Result<u64, StoreError> {
        let st = self.statement(sql)?;
        Ok(self.client.borrow_mut().execute(&st, &pg_params(params))?)
    }

    pub fn query(&self, sql: &str, params: &[Val<'_>]) -> Result<Vec<Row>, StoreError> {
        let st = self.statement(sql)?;
        Ok(self.client.borrow_mut().query(&st, &pg_params(params))?)
    }

    pub fn batch(&self, sql: &str) -> Result<(), StoreError> {
        Ok(self.client.borrow_mut().batch_execute(sql)?)
    }
}

/// Applies the migrations this database lacks, under the advisory lock.
fn migrate(client: &mut Client, url: &str) -> Result<(), StoreError> {
    let mut tx = client.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
    tx.batch_execute(
        "CREATE SCHEMA IF NOT EXISTS hone_store;
         CREATE TABLE IF NOT EXISTS hone_store.schema_migrations (
             version    BIGINT PRIMARY KEY,
             applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
         );
         SET LOCAL search_path TO hone_store;",
    )?;
    let found: i64 = tx
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM hone_store.schema_migrations",
            &[],
        )?
        .get(0);
    let known = MIGRATIONS.len() as i64;
    if found > known {
        return Err(StoreError::TooNew {
            path: redact(url),
            found,
            known,
        });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.batch_execute(&super::schema::expand_plot(sql, "hone_store."))?;
        tx.execute(
            "INSERT INTO hone_store.schema_migrations (version) VALUES ($1)",
            &[&(i as i64 + 1)],
        )?;
    }
    tx.commit()?;
    Ok(())
}

impl Val<'_> {
    /// The value as PostgreSQL binds it: each kind checks the column's type against itself.
    fn as_pg(&self) -> &(dyn ToSql + Sync) {
        match self {
            Val::Int(v) => v,
            Val::Real(v) => v,
            Val::Text(v) => v,
        }
    }
}

/// The parameters of a statement, as PostgreSQL binds them.
fn pg_params<'a>(params: &'a [Val<'_>]) -> Vec<&'a (dyn ToSql + Sync)> {
    params.iter().map(Val::as_pg).collect()
}

impl Cells for Row {
    fn int(&self, col: &str) -> Result<Option<i64>, StoreError> {
        Ok(self.try_get(col)?)
    }
    fn real(&self, col: &str) -> Result<Option<f64>, StoreError> {
        Ok(self.try_get(col)?)
    }
    fn text(&self, col: &str) -> Result<Option<String>, StoreError> {
        Ok(self.try_get(col)?)
    }
    fn int_at(&self, i: usize) -> Result<Option<i64>, StoreError> {
        Ok(self.try_get(i)?)
    }
    fn real_at(&self, i: usize) -> Result<Option<f64>, StoreError> {
        Ok(self.try_get(i)?)
    }
    fn text_at(&self, i: usize) -> Result<Option<String>, StoreError> {
        Ok(self.try_get::<_, Option<LossyText>>(i)?.map(|t| t.0))
    }
}

/// A text cell with any bytes that are not UTF-8 replaced. A database of encoding SQL_ASCII
/// (`initdb` under the C locale) counts `substr` in bytes, so a plot block's text cut to the
/// titles' length can end inside a character; the hot rows that read texts by position take
/// them this way rather than fail.
struct LossyText(String);

impl<'a> postgres::types::FromSql<'a> for LossyText {
    fn from_sql(
        _: &postgres::types::Type,
        raw: &'a [u8],
    ) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(LossyText(String::from_utf8_lossy(raw).into_owned()))
    }

    fn accepts(ty: &postgres::types::Type) -> bool {
        <String as postgres::types::FromSql>::accepts(ty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_and_passwords() {
        assert_eq!(
            translate("SELECT * FROM t WHERE a = ?1 AND b = ?12 OR c IS NULL"),
            "SELECT * FROM t WHERE a = $1 AND b = $12 OR c IS NULL"
        );
        assert_eq!(
            redact("postgres://hone:s3cret@db.example:5432/hone"),
            "postgres://hone@db.example:5432/hone"
        );
        assert_eq!(redact("postgres://db/hone"), "postgres://db/hone");
        assert_eq!(
            redact("postgres://hone@db/hone?sslmode=require&p%61ssword=s3cret"),
            "postgres://hone@db/hone?sslmode=require"
        );
        assert_eq!(
            redact("postgres://db/hone?PASSWORD=s3cret"),
            "postgres://db/hone"
        );
    }
}
