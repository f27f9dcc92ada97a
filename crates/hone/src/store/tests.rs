//! The store's test suite, run against both backends: each case takes a [`Backend`] (a way to
//! open a fresh, empty store, again and read-only) and is run once on a SQLite file and once
//! on a database of a private PostgreSQL server the test starts (skipped with a message where
//! PostgreSQL is not installed, unless HONE_REQUIRE_POSTGRES is set).

use std::path::PathBuf;

use super::schema::MIGRATIONS;
use super::*;
use crate::spec::AgentKind;
use crate::verify::Direction;

#[path = "test_pg.rs"]
mod test_pg;
use crate::test_support;
pub(crate) use test_pg::PgServer;

/// How a case reaches one empty store.
struct Backend {
    name: &'static str,
    location: StoreLocation,
}

impl Backend {
    fn open(&self) -> Store {
        Store::open_at(&self.location).unwrap()
    }
    fn read_only(&self) -> Store {
        Store::open_read_only_at(&self.location).unwrap()
    }
}

mod curves;
mod explicit;
mod narrowings;
mod pages;
mod plot_blocks;
mod summary;
mod tallies;

type Case = fn(&Backend);

/// Every case of the suite, by name.
const CASES: &[(&str, Case)] = &[
    ("round_trip_and_append_only", round_trip_and_append_only),
    (
        "pages_sort_filter_and_change_marks",
        pages::pages_sort_filter_and_change_marks,
    ),
    (
        "transactions_commit_or_roll_back",
        transactions_commit_or_roll_back,
    ),
    (
        "tags_are_unique_and_runs_ordered",
        tags_are_unique_and_runs_ordered,
    ),
    ("run_records_are_typed", run_records_are_typed),
    (
        "summaries_read_what_the_records_say",
        summary::summaries_read_what_the_records_say,
    ),
    (
        "tallies_agree_with_the_rows",
        tallies::tallies_agree_with_the_rows,
    ),
    (
        "plot_blocks_agree_with_the_rows",
        plot_blocks::plot_blocks_agree_with_the_rows,
    ),
    (
        "streaming_holds_no_snapshot_and_stops",
        summary::streaming_holds_no_snapshot_and_stops,
    ),
    (
        "configurations_give_the_narrowings_of_the_records",
        summary::configurations_give_the_narrowings_of_the_records,
    ),
    (
        "a_consistent_read_sees_one_moment",
        summary::a_consistent_read_sees_one_moment,
    ),
];

fn run_suite(make: &mut dyn FnMut(&str) -> Backend) {
    for (name, case) in CASES
        .iter()
        .chain(explicit::CASES)
        .chain(curves::CASES)
        .chain(narrowings::CASES)
    {
        let backend = make(name);
        eprintln!("{}: {name}", backend.name);
        case(&backend);
    }
}

#[test]
fn store_suite_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    run_suite(&mut |name| Backend {
        name: "sqlite",
        location: StoreLocation::Sqlite(dir.path().join(name).join("hone.db")),
    });
}

#[test]
fn store_suite_on_postgres() {
    let Some(pg) = PgServer::start() else {
        return;
    };
    run_suite(&mut |name| Backend {
        name: "postgres",
        location: StoreLocation::Postgres {
            url: pg.database(name),
            repo: "/src/project".into(),
        },
    });
}

fn new_run(s: &Store, tag: &str) -> RunRecord {
    try_run(s, tag, "abc", 7).unwrap()
}

/// Creates a knobs run tagged `tag` (branch `hone/tag`, minimizing `m`) from `base` with
/// `seed`, which may fail.
fn try_run(s: &Store, tag: &str, base: &str, seed: u64) -> Result<RunRecord, StoreError> {
    s.create_run(
        tag,
        &format!("hone/{tag}"),
        base,
        seed,
        AgentKind::Knobs,
        "m",
        Direction::Minimize,
        "{}",
        "{}",
    )
}

fn round_trip_and_append_only(b: &Backend) {
    let s = b.open();
    let run = new_run(&s, "t");
    assert_eq!(
        (run.tag.as_str(), run.seed, run.state.as_str()),
        ("t", 7, "running")
    );
    let mut e = ExperimentRecord {
        n: 0,
        parent_commit: "abc".into(),
        status: Some(Status::Baseline),
        objective: Some(1.5),
        started_at: now(),
        config: Some(serde_json::json!({"LR": 0.1})),
        runs: vec![1.5, 1.25],
        pid: Some(u32::MAX),
        pid_start: Some(1 << 40),
        tokens: 12,
        ..Default::default()
    };
    e.metrics.insert("m".into(), 1.5);
    s.put_experiment(run.id, &e).unwrap();
    e.status = Some(Status::Keep);
    e.reason = "better".into();
    s.put_experiment(run.id, &e).unwrap();
    s.set_experiment_pid(run.id, 0, 4242, Some(9)).unwrap();
    s.set_active_seconds(run.id, 12.5).unwrap();
    s.set_run_state(run.id, RunState::Stopped, Some("max_experiments"))
        .unwrap();
    drop(s);
    let s = b.open();
    let got = s.experiments(run.id).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].status, Some(Status::Keep));
    assert_eq!(got[0].reason, "better");
    assert_eq!(got[0].metrics.get("m"), Some(&1.5));
    assert_eq!(got[0].config, e.config);
    assert_eq!(got[0].runs, vec![1.5, 1.25]);
    assert_eq!((got[0].pid, got[0].pid_start), (Some(4242), Some(9)));
    assert_eq!(got[0].tokens, 12);
    assert!(s.experiment(run.id, 1).unwrap().is_none());
    let again = s.run_by_tag("t").unwrap().unwrap();
    assert_eq!(again.state, RunState::Stopped);
    assert_eq!(again.stop_reason.as_deref(), Some("max_experiments"));
    assert_eq!(again.active_seconds, 12.5);
    s.append_event(run.id, Some(0), "x", &serde_json::json!({"a": 1}))
        .unwrap();
    s.append_event(run.id, None, "y", &serde_json::json!({}))
        .unwrap();
    assert!(s.exec("DELETE FROM events", &[]).is_err(), "delete");
    assert!(
        s.exec("UPDATE events SET kind = 'z'", &[]).is_err(),
        "update"
    );
    assert_eq!(
        s.events(run.id).unwrap(),
        vec![
            (Some(0), "x".to_string(), r#"{"a":1}"#.to_string()),
            (None, "y".to_string(), "{}".to_string())
        ]
    );
    // One experiment's events of one kind, asked of the database.
    s.append_event(run.id, Some(1), "x", &serde_json::json!({"b": 2}))
        .unwrap();
    s.append_event(run.id, Some(0), "x", &serde_json::json!({"c": 3}))
        .unwrap();
    assert_eq!(
        s.events_of(run.id, 0, "x").unwrap(),
        [r#"{"a":1}"#, r#"{"c":3}"#]
    );
    assert!(s.events_of(run.id, 0, "y").unwrap().is_empty());
    let call = |n: u64, m: &str| MechanismCall {
        experiment: n,
        mechanism: m.into(),
        hook: Hook::Filter,
        effect: Effect::Rejected,
        detail: "near #1".into(),
    };
    s.put_mechanism_calls(
        run.id,
        &[call(1, "tabu"), call(2, "tabu"), call(2, "bandit")],
    )
    .unwrap();
    assert_eq!(s.mechanism_calls(run.id, None).unwrap().len(), 3);
    assert_eq!(
        s.mechanism_calls(run.id, Some(2)).unwrap(),
        vec![call(2, "tabu"), call(2, "bandit")]
    );
}

fn transactions_commit_or_roll_back(b: &Backend) {
    let s = b.open();
    let run = new_run(&s, "t");
    let exp = |n| ExperimentRecord {
        n,
        parent_commit: "abc".into(),
        status: Some(Status::Discard),
        started_at: 1.0,
        ..Default::default()
    };
    let failed: Result<(), StoreError> = s.in_transaction(|s| {
        s.put_experiment(run.id, &exp(0))?;
        s.append_event(run.id, Some(0), "x", &serde_json::json!({}))?;
        Err(StoreError::Corrupt("on purpose".into()))
    });
    assert!(failed.is_err());
    assert!(s.experiments(run.id).unwrap().is_empty(), "rolled back");
    assert!(s.events(run.id).unwrap().is_empty(), "rolled back");
    s.in_transaction(|s| {
        s.put_experiment(run.id, &exp(0))?;
        // A nested call joins the outer transaction.
        s.put_mechanism_calls(
            run.id,
            &[MechanismCall {
                experiment: 0,
                mechanism: "tabu".into(),
                hook: Hook::Filter,
                effect: Effect::None,
                detail: String::new(),
            }],
        )?;
        s.put_experiment(run.id, &exp(1))
    })
    .unwrap();
    let other = b.open();
    assert_eq!(other.experiments(run.id).unwrap().len(), 2, "committed");
    assert_eq!(other.mechanism_calls(run.id, None).unwrap().len(), 1);
    // A failed statement inside a transaction rolls the whole of it back.
    let failed = s.in_transaction(|s| {
        s.put_experiment(run.id, &exp(2))?;
        try_run(s, "t", "x", 1)
    });
    assert!(failed.is_err());
    assert_eq!(other.experiments(run.id).unwrap().len(), 2);
    s.put_experiment(run.id, &exp(2)).unwrap();
    assert_eq!(other.experiments(run.id).unwrap().len(), 3, "usable after");
}

fn tags_are_unique_and_runs_ordered(b: &Backend) {
    let s = b.open();
    assert!(s.latest_run().unwrap().is_none());
    let a = new_run(&s, "a");
    let c = new_run(&s, "c");
    // The same tag with another base commit and seed: still refused.
    assert!(try_run(&s, "a", "x", 1).is_err(), "a tag is unique");
    let tags: Vec<String> = s.runs().unwrap().into_iter().map(|r| r.tag).collect();
    assert_eq!(tags, vec!["a", "c"]);
    assert_eq!(s.latest_run().unwrap().unwrap().id, c.id);
    assert_eq!(s.run_by_tag("a").unwrap().unwrap().id, a.id);
    assert!(s.run_by_tag("b").unwrap().is_none());
}

/// A run's agent, direction and state are read back as the types they were written as (their
/// columns hold the same text as before); text this hone does not know is a corrupt record,
/// named, never a panic.
fn run_records_are_typed(b: &Backend) {
    let s = b.open();
    for (i, name) in AgentKind::names().into_iter().enumerate() {
        let kind = AgentKind::parse(name).unwrap();
        let run = s
            .create_run(
                &format!("r{i}"),
                &format!("hone/r{i}"),
                "x",
                1,
                kind,
                "m",
                Direction::Maximize,
                "{}",
                "{}",
            )
            .unwrap();
        let got = s.run_by_tag(&format!("r{i}")).unwrap().unwrap();
        assert_eq!(
            (got.agent_kind(), got.direction, got.state),
            (Some(kind), Direction::Maximize, RunState::Running)
        );
        assert_eq!(run.agent, name);
        for state in RunState::ALL {
            s.set_run_state(run.id, state, None).unwrap();
            assert_eq!(
                s.run_by_tag(&format!("r{i}")).unwrap().unwrap().state,
                state
            );
        }
    }
    let run = new_run(&s, "odd");
    // An agent kind this hone does not know (a newer hone's preset) is kept as written.
    s.exec(
        "UPDATE runs SET agent = 'cursor' WHERE id = ?1",
        &[Val::Int(Some(run.id))],
    )
    .unwrap();
    let odd = s.run_by_tag("odd").unwrap().unwrap();
    assert_eq!((odd.agent.as_str(), odd.agent_kind()), ("cursor", None));
    for (col, value) in [("direction", "sideways"), ("state", "paused")] {
        s.exec(
            &format!("UPDATE runs SET {col} = ?2 WHERE id = ?1"),
            &[Val::Int(Some(run.id)), Val::Text(Some(value))],
        )
        .unwrap();
        let e = s.run_by_tag("odd").unwrap_err().to_string();
        assert!(
            e.contains(&format!("runs.{col}")) && e.contains(value),
            "{e}"
        );
        let back = if col == "direction" {
            "minimize"
        } else {
            "running"
        };
        s.exec(
            &format!("UPDATE runs SET {col} = ?2 WHERE id = ?1"),
            &[Val::Int(Some(run.id)), Val::Text(Some(back))],
        )
        .unwrap();
    }
    assert_eq!(s.run_by_tag("odd").unwrap().unwrap().id, run.id);
}

/// Two repositories share one PostgreSQL database: each sees its own runs, and a tag is
/// unique per repository only.
#[test]
fn postgres_repositories_share_a_database_and_migrate_once() {
    let Some(pg) = PgServer::start() else {
        return;
    };
    let url = pg.database("shared");
    // Hosts connecting at once to a fresh database: each migration is applied once.
    let connects: Vec<_> = (0..4)
        .map(|i| {
            let url = url.clone();
            std::thread::spawn(move || Store::connect(&url, &format!("/repo/{i}")).map(|_| ()))
        })
        .collect();
    for c in connects {
        c.join().unwrap().unwrap();
    }
    assert_eq!(
        pg.psql(
            &url,
            "SELECT string_agg(version::text, ',') FROM hone_store.schema_migrations"
        ),
        (1..=pg::migration_count())
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    let one = Store::connect(&url, "git@example.com:lab/one.git").unwrap();
    let two = Store::connect(&url, "/home/me/two").unwrap();
    let r1 = new_run(&one, "t");
    let r2 = new_run(&two, "t");
    assert_ne!(r1.id, r2.id);
    new_run(&two, "u");
    assert!(
        try_run(&one, "t", "x", 1).is_err(),
        "unique within a repository"
    );
    assert_eq!(one.runs().unwrap().len(), 1);
    assert_eq!(two.runs().unwrap().len(), 2);
    assert_eq!(one.latest_run().unwrap().unwrap().id, r1.id);
    assert_eq!(two.run_by_tag("t").unwrap().unwrap().id, r2.id);
    assert!(one.run_by_tag("u").unwrap().is_none());
    assert_eq!(one.repo(), "git@example.com:lab/one.git");
    assert!(one.is_shared());
    // Truncating the event log is refused too.
    one.append_event(r1.id, None, "x", &serde_json::json!({}))
        .unwrap();
    assert!(one.exec("TRUNCATE events", &[]).is_err());
    assert_eq!(one.events(r1.id).unwrap().len(), 1);
}

/// A database `old` of `pg` holding a store of PostgreSQL schema `version` (the migrations up
/// to it, as hone of that schema wrote it) and the rows `rows` (SQL) inserts; its URL.
fn pg_database_of_schema(pg: &PgServer, version: usize, rows: &str) -> String {
    let url = pg.database("old");
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.batch_execute(
        "CREATE SCHEMA hone_store;
         CREATE TABLE hone_store.schema_migrations (
             version BIGINT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now());
         SET search_path TO hone_store;",
    )
    .unwrap();
    for (i, sql) in pg::migrations()[..version].iter().enumerate() {
        c.batch_execute(&schema::expand_plot(sql, "hone_store."))
            .unwrap();
        c.execute(
            "INSERT INTO schema_migrations (version) VALUES ($1)",
            &[&(i as i64 + 1)],
        )
        .unwrap();
    }
    c.batch_execute(rows).unwrap();
    url
}

/// `check` of a SQLite file of schema `version` holding `rows` ([`sqlite_file_of_schema`]),
/// opened, so brought up to date.
fn check_sqlite_of_schema(version: usize, rows: &str, check: fn(&Store)) {
    let (_dir, path) = sqlite_file_of_schema(version, rows);
    check(&Store::open(&path).unwrap());
}

/// `check` of a PostgreSQL store of schema `version` holding `rows`
/// ([`pg_database_of_schema`]), connected to, so brought up to date; nothing where no server
/// starts.
fn check_postgres_of_schema(version: usize, rows: &str, check: fn(&Store)) {
    let Some(pg) = PgServer::start() else {
        return;
    };
    let url = pg_database_of_schema(&pg, version, rows);
    check(&Store::connect(&url, "").unwrap());
}

/// A SQLite file `hone.db` in a temporary directory, of schema `version` (the migrations up to
/// it, as hone of that schema wrote it), holding the rows `rows` (SQL) inserts.
fn sqlite_file_of_schema(version: usize, rows: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hone.db");
    let conn = Connection::open(&path).unwrap();
    for sql in &MIGRATIONS[..version] {
        conn.execute_batch(&schema::expand(sql)).unwrap();
    }
    conn.pragma_update(None, "user_version", version).unwrap();
    conn.execute_batch(rows).unwrap();
    (dir, path)
}

/// A SQLite file written before runs had a repository key (schema 6) opens with its runs
/// intact, under the empty key.
#[test]
fn sqlite_schema_6_is_brought_up_to_date() {
    let (_dir, path) = sqlite_file_of_schema(
        6,
        "INSERT INTO runs (tag, branch, base_commit, created_at, seed, agent, metric, direction, state, seals, spec_json)
         VALUES ('old', 'hone/old', 'abc', 1.0, 3, 'knobs', 'm', 'minimize', 'stopped', '{}', '{}')",
    );
    let s = Store::open(&path).unwrap();
    let run = s.run_by_tag("old").unwrap().unwrap();
    assert_eq!((run.seed, run.state.as_str()), (3, "stopped"));
    assert_eq!(s.runs().unwrap().len(), 1);
    new_run(&s, "new");
    assert_eq!(s.latest_run().unwrap().unwrap().tag, "new");
    // Schema 8: curves, empty for the old run.
    assert!(s.curves(run.id).unwrap().is_empty());
}

/// A run's mechanism calls, and an experiment's, come in the order they were made straight
/// from an index: SQLite sorts none of them (it sorted a run's, 10,000 for a report of 100,000
/// experiments), on a store made now and on one brought up from schema 12; and they come back
/// in that order.
#[test]
fn a_runs_mechanism_calls_are_read_in_order_without_a_sort() {
    let (_dir, old) = sqlite_file_of_schema(12, "SELECT 1");
    let fresh = tempfile::tempdir().unwrap();
    for path in [old, fresh.path().join("hone.db")] {
        let s = Store::open(&path).unwrap();
        let Db::Sqlite(conn) = &s.db else {
            unreachable!("a SQLite store")
        };
        for (query, params) in [(events::CALLS_OF_RUN, 1), (events::CALLS_OF_EXPERIMENT, 2)] {
            let plan: Vec<String> = conn
                .prepare(&format!("EXPLAIN QUERY PLAN {query}"))
                .unwrap()
                .query_map(rusqlite::params_from_iter(vec![1; params]), |r| {
                    r.get::<_, String>(3)
                })
                .unwrap()
                .map(Result::unwrap)
                .collect();
            assert!(
                plan.iter().all(|step| !step.contains("TEMP B-TREE")),
                "{query}: {plan:?}"
            );
        }
        let run = new_run(&s, "calls");
        let made: Vec<MechanismCall> = [(2, "b"), (1, "a"), (2, "a")]
            .into_iter()
            .map(|(experiment, m)| MechanismCall {
                experiment,
                mechanism: m.into(),
                hook: Hook::BeforePropose,
                effect: Effect::None,
                detail: String::new(),
            })
            .collect();
        for c in &made {
            s.put_mechanism_calls(run.id, std::slice::from_ref(c))
                .unwrap();
        }
        let order: Vec<(u64, String)> = s
            .mechanism_calls(run.id, None)
            .unwrap()
            .into_iter()
            .map(|c| (c.experiment, c.mechanism))
            .collect();
        assert_eq!(
            order,
            [(2, "b".into()), (1, "a".into()), (2, "a".into())],
            "in the order made"
        );
        let of_2: Vec<String> = s
            .mechanism_calls(run.id, Some(2))
            .unwrap()
            .into_iter()
            .map(|c| c.mechanism)
            .collect();
        assert_eq!(of_2, ["b", "a"], "an experiment's, in the order made");
    }
}

#[test]
fn mechanism_hooks_and_effects_read_back_as_their_stored_text() {
    for h in Hook::ALL {
        assert_eq!(&Hook::parse(h.as_str()), h);
    }
    for e in Effect::ALL {
        assert_eq!(&Effect::parse(e.as_str()), e);
    }
    // A text another version wrote is kept as it is, not refused.
    assert_eq!(Hook::parse("on_idle"), Hook::Other("on_idle".into()));
    assert_eq!(Hook::parse("on_idle").as_str(), "on_idle");
    assert_eq!(Effect::parse("vetoed").as_str(), "vetoed");
    let call = MechanismCall {
        experiment: 1,
        mechanism: "m".into(),
        hook: Hook::OnSegmentEnd,
        effect: Effect::Other("vetoed".into()),
        detail: String::new(),
    };
    let json = serde_json::to_value(&call).unwrap();
    assert_eq!(json["hook"], "on_segment_end");
    assert_eq!(json["effect"], "vetoed");
}

/// A SQLite file deleted or replaced under an open store: the next check fails, says so, and
/// saves every record the connection holds beside it (a file that opens and holds them).
#[test]
fn a_deleted_or_replaced_sqlite_file_is_noticed_and_its_records_saved() {
    for replace in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hone.db");
        let s = Store::open(&path).unwrap();
        new_run(&s, "t");
        s.check_file().unwrap();
        let copy = dir.path().join("copy.db");
        if replace {
            std::fs::copy(&path, &copy).unwrap();
        }
        std::fs::remove_file(&path).unwrap();
        if replace {
            std::fs::rename(&copy, &path).unwrap();
        }
        // The connection goes on writing into the lost file: the check is what notices.
        new_run(&s, "u");
        let e = s.check_file().unwrap_err();
        let what = if replace {
            "replaced by another file"
        } else {
            "deleted"
        };
        assert!(e.to_string().contains(&format!("was {what}")), "{e}");
        let rescued: Vec<PathBuf> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().contains("hone.db.rescued-"))
            .collect();
        assert_eq!(rescued.len(), 1, "{e}");
        assert!(
            e.to_string().contains(&rescued[0].display().to_string()),
            "{e}"
        );
        let saved = Store::open(&rescued[0]).unwrap();
        let tags: Vec<String> = saved.runs().unwrap().into_iter().map(|r| r.tag).collect();
        assert_eq!(tags.len(), 2, "{tags:?}");
        assert!(tags.contains(&"t".to_string()) && tags.contains(&"u".to_string()));
    }
    // PostgreSQL and read-only stores have nothing to check.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hone.db");
    drop(Store::open(&path).unwrap());
    let ro = Store::open_read_only(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    ro.check_file().unwrap();
}

/// A SQLite store's `synchronous` setting (2: FULL).
fn synchronous(s: &Store) -> i64 {
    let Db::Sqlite(conn) = &s.db else {
        unreachable!("a SQLite store")
    };
    conn.pragma_query_value(None, "synchronous", |r| r.get(0))
        .unwrap()
}

/// A curve point skips its own sync, and the store is back to `synchronous = FULL` (what
/// outcomes need) after it, also when the point fails.
#[test]
fn a_curve_point_leaves_the_sqlite_store_fully_synchronous() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("hone.db")).unwrap();
    let run = new_run(&s, "s");
    assert_eq!(synchronous(&s), 2);
    s.put_curve_point(run.id, 0, 1.0, 2.0).unwrap();
    assert_eq!(synchronous(&s), 2);
    assert!(
        s.put_curve_point(run.id + 99, 0, 1.0, 2.0).is_err(),
        "no such run"
    );
    assert_eq!(synchronous(&s), 2);
    assert_eq!(s.curve(run.id, 0).unwrap(), vec![(1.0, 2.0)]);
}

/// A verifier's pid skips its own sync as a curve point does: it is recorded, and the store is
/// back to `synchronous = FULL` after it, also when the write fails.
#[test]
fn a_pid_leaves_the_sqlite_store_fully_synchronous() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("hone.db")).unwrap();
    let run = new_run(&s, "p");
    let e = ExperimentRecord {
        n: 0,
        status: Some(Status::Running),
        ..Default::default()
    };
    s.put_experiment(run.id, &e).unwrap();
    s.set_experiment_pid(run.id, 0, 4242, Some(9)).unwrap();
    assert_eq!(synchronous(&s), 2);
    let got = s.experiment(run.id, 0).unwrap().unwrap();
    assert_eq!((got.pid, got.pid_start), (Some(4242), Some(9)));
    s.begin().unwrap();
    s.set_experiment_pid(run.id, 0, 4343, None).unwrap();
    assert_eq!(synchronous(&s), 2, "inside a transaction nothing changes");
    s.commit().unwrap();
}
