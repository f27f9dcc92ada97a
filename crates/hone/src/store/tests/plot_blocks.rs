//! The plot's blocks (SQLite schema 12, PostgreSQL 6) against the rows they summarize: after
//! every way an experiment is written, a transaction rolled back, a writer gone mid-way, a row
//! deleted, moved or given a status no hone knows; texts cut to the titles' length by
//! characters, not bytes; and a store of the schema before, filled once when brought up to date.

use super::*;

/// A block as stored or as worked out again: its number, discards with a value, the lowest,
/// median and highest discard (number, value, text), the first failure of each kind (number,
/// text) and the refused one's status.
type Block = (
    i64,
    i64,
    Vec<Option<(i64, f64, String)>>,
    Vec<Option<(i64, String)>>,
    Option<String>,
);

fn stored_blocks(s: &Store, run_id: i64) -> Vec<Block> {
    s.query(
        "SELECT block, discards, lo_n, lo_v, lo_d, mid_n, mid_v, mid_d, hi_n, hi_v, hi_d,
                fail_x, fail_x_r, fail_t, fail_t_r, fail_p, fail_p_r, fail_o, fail_o_r, fail_o_s
         FROM plot_blocks WHERE run_id = ?1 ORDER BY block",
        &[Val::Int(Some(run_id))],
        |r| {
            let picks = [[2, 3, 4], [5, 6, 7], [8, 9, 10]]
                .iter()
                .map(|&[n, v, d]| {
                    Ok(match r.int_at(n)? {
                        Some(n) => Some((n, r.real_at(v)?.unwrap(), r.text_at(d)?.unwrap())),
                        None => None,
                    })
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            let fails = [[11, 12], [13, 14], [15, 16], [17, 18]]
                .iter()
                .map(|&[n, t]| Ok(r.int_at(n)?.map(|n| (n, r.text_at(t).unwrap().unwrap()))))
                .collect::<Result<Vec<_>, StoreError>>()?;
            Ok((
                r.int_at(0)?.unwrap(),
                r.int_at(1)?.unwrap(),
                picks,
                fails,
                r.text_at(19)?,
            ))
        },
    )
    .unwrap()
    .into_iter()
    // A block whose experiments all left it keeps an empty row.
    .filter(|b| b.1 > 0 || b.3.iter().any(Option::is_some))
    .collect()
}

/// The first `TITLE_CHARS + 1` characters of `s`.
fn cut(s: &str) -> String {
    s.chars().take(TITLE_CHARS + 1).collect()
}

/// The blocks worked out again from the records.
fn recounted_blocks(s: &Store, run_id: i64) -> Vec<Block> {
    let exps = s.experiments(run_id).unwrap();
    let mut out: Vec<Block> = Vec::new();
    for block in exps.chunk_by(|a, b| a.n / PLOT_BLOCK == b.n / PLOT_BLOCK) {
        let mut discards: Vec<&ExperimentRecord> = block
            .iter()
            .filter(|e| e.status() == Status::Discard && e.objective.is_some())
            .collect();
        let picks = envelope(&mut discards, |e| (e.objective.unwrap(), e.n));
        let mut three: Vec<Option<(i64, f64, String)>> = vec![None; 3];
        if !picks.is_empty() {
            let last = discards.len() - 1;
            for (slot, i) in [0, last / 2, last].into_iter().enumerate() {
                let e = discards[i];
                three[slot] = Some((e.n as i64, e.objective.unwrap(), cut(&e.description)));
            }
        }
        let kinds: [&[Status]; 4] = [
            &[Status::Crash],
            &[Status::Timeout],
            &[Status::Pruned],
            &[Status::Violation, Status::Rejected, Status::Invalid],
        ];
        let first = |k: &[Status]| {
            block
                .iter()
                .find(|e| e.status.is_some_and(|s| k.contains(&s)))
        };
        let fails: Vec<Option<(i64, String)>> = kinds
            .iter()
            .map(|k| first(k).map(|e| (e.n as i64, cut(&e.reason))))
            .collect();
        let refused = first(kinds[3]).map(|e| e.status().to_string());
        if !discards.is_empty() || fails.iter().any(Option::is_some) {
            let b = (block[0].n / PLOT_BLOCK) as i64;
            out.push((b, discards.len() as i64, three, fails, refused));
        }
    }
    out
}

fn assert_agree(s: &Store, run_id: i64, when: &str) {
    assert_eq!(
        stored_blocks(s, run_id),
        recounted_blocks(s, run_id),
        "blocks, {when}"
    );
}

/// Experiment `n` finished with `status`: values that tie now and then, texts past the
/// titles' length in characters of more than one byte.
fn exp(n: u64, status: Status) -> ExperimentRecord {
    let finished = status != Status::Running;
    let long = |what: &str| {
        format!(
            "{what} {n} {}",
            "é→".repeat(if n % 3 == 0 { 90 } else { 2 })
        )
    };
    ExperimentRecord {
        n,
        parent_commit: "abc".into(),
        status: Some(status),
        objective: finished.then_some(if n % 4 == 0 {
            5.0
        } else {
            10.0 - (n % 7) as f64
        }),
        description: long("change"),
        reason: long("why"),
        started_at: n as f64,
        ..Default::default()
    }
}

pub(super) fn plot_blocks_agree_with_the_rows(b: &Backend) {
    let s = b.open();
    let run = new_run(&s, "p");
    let other = new_run(&s, "q");
    let kinds = [
        Status::Discard,
        Status::Crash,
        Status::Discard,
        Status::Timeout,
        Status::Keep,
        Status::Pruned,
        Status::Discard,
        Status::Rejected,
        Status::Discard,
        Status::Invalid,
        Status::Violation,
    ];
    // Forty experiments over three blocks, each running first, then finished; the other run
    // written alongside.
    for n in 0..40u64 {
        let status = kinds[(n as usize * 7) % kinds.len()];
        s.put_experiment(run.id, &exp(n, Status::Running)).unwrap();
        s.put_experiment(other.id, &exp(n, Status::Discard))
            .unwrap();
        s.in_transaction(|s| s.put_experiment(run.id, &exp(n, status)))
            .unwrap();
        if n % 9 == 0 {
            assert_agree(&s, run.id, &format!("{n} finished"));
        }
    }
    assert_agree(&s, run.id, "all finished");
    assert!(stored_blocks(&s, run.id)
        .iter()
        .any(|b| b.2[2]
            .as_ref()
            .is_some_and(|p| p.2.chars().count() == TITLE_CHARS + 1)));
    // A record written again: a discard turned keep, a keep turned discard, a new value.
    let mut again = exp(2, Status::Keep);
    again.objective = Some(-1.0);
    s.put_experiment(run.id, &again).unwrap();
    s.put_experiment(run.id, &exp(4, Status::Discard)).unwrap();
    let mut lower = exp(6, Status::Discard);
    lower.objective = Some(-50.0);
    s.put_experiment(run.id, &lower).unwrap();
    assert_agree(&s, run.id, "records rewritten");
    // Only the texts written again (a reason that says the commit was lost, say): a discard's
    // and a failure's, same status and value.
    for n in [9, 1, 7] {
        let mut e = s.experiment(run.id, n).unwrap().unwrap();
        e.description = format!("retold {n}");
        e.reason = format!("lost {n}");
        s.put_experiment(run.id, &e).unwrap();
    }
    assert_agree(&s, run.id, "texts rewritten");

    // Rolled back, and a writer gone in the middle of its transaction.
    s.begin().unwrap();
    s.put_experiment(run.id, &exp(41, Status::Discard)).unwrap();
    s.put_experiment(run.id, &exp(8, Status::Crash)).unwrap();
    s.rollback();
    assert_agree(&s, run.id, "after a rollback");
    {
        let killed = b.open();
        killed.begin().unwrap();
        killed
            .put_experiment(run.id, &exp(12, Status::Crash))
            .unwrap();
    }
    assert_agree(&s, run.id, "after a writer died mid-transaction");

    // A row deleted, one moved to another number and block, a status no hone knows.
    s.exec(
        "DELETE FROM experiments WHERE run_id = ?1 AND n = ?2",
        &[Val::Int(Some(run.id)), int(1)],
    )
    .unwrap();
    assert_agree(&s, run.id, "after a delete");
    s.exec(
        "UPDATE experiments SET n = 100 WHERE run_id = ?1 AND n = ?2",
        &[Val::Int(Some(run.id)), int(3)],
    )
    .unwrap();
    assert_agree(&s, run.id, "after a move");
    s.exec(
        "UPDATE experiments SET status = 'vanished' WHERE run_id = ?1 AND n = ?2",
        &[Val::Int(Some(run.id)), int(5)],
    )
    .unwrap();
    assert_agree(&s, run.id, "with an unknown status");
    assert_agree(&s, other.id, "the other run");
}

/// Run 1 with experiments of every kind, written by SQL alone.
const OLD_ROWS: &str = "
INSERT INTO runs (repo, tag, branch, base_commit, created_at, seed, agent, metric, direction, state, seals, spec_json)
    VALUES ('', 'old', 'hone/old', 'abc', 1.0, 3, 'knobs', 'm', 'minimize', 'stopped', '{}', '{}');
INSERT INTO experiments (run_id, n, parent_commit, status, objective, started_at, description, reason)
    VALUES (1, 0, 'abc', 'baseline', 2.0, 0, 'base', ''),
           (1, 1, 'abc', 'discard', 2.5, 1, 'one', ''),
           (1, 2, 'abc', 'discard', 2.4, 2, 'two', ''),
           (1, 3, 'abc', 'crash', NULL, 3, 'three', 'boom'),
           (1, 17, 'abc', 'discard', 3.0, 17, 'seventeen', ''),
           (1, 18, 'abc', 'invalid', NULL, 18, 'eighteen', 'bad'),
           (1, 19, 'abc', 'running', NULL, 19, 'nineteen', '');";

fn assert_filled(s: &Store) {
    assert_agree(s, 1, "filled by the migration");
    assert_eq!(stored_blocks(s, 1).len(), 2);
    s.put_experiment(1, &exp(19, Status::Discard)).unwrap();
    assert_agree(s, 1, "a write after the migration");
}

/// A SQLite file of schema 11 (before the blocks) gets them filled from its rows.
#[test]
fn sqlite_schema_11_gets_its_plot_blocks_filled() {
    check_sqlite_of_schema(11, OLD_ROWS, assert_filled);
}

/// A PostgreSQL store of schema 5 (before the blocks) gets them filled from its rows.
#[test]
fn postgres_schema_5_gets_its_plot_blocks_filled() {
    check_postgres_of_schema(5, OLD_ROWS, assert_filled);
}
