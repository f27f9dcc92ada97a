//! The plot drawn from the experiments the store picks (`Store::plot_points`) against the plot
//! of every record, on SQLite and on PostgreSQL.

use super::*;
use crate::report::curves;
use crate::store::tests::PgServer;
use crate::store::{Store, StoreLocation};

/// A run of `len` experiments: a discard first, the baseline second, a keep every 97th, crashes,
/// timeouts, pruned and invalid ones, ties in value, the last two crashes in one column (so
/// that the last is no mark of its own) and the last one a crash; now and then a description
/// or a reason longer than a title shows, in characters of two bytes.
fn records(len: u64) -> Vec<ExperimentRecord> {
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    (0..len)
        .map(|n| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let status = match n {
                1 => Status::Baseline,
                n if n + 3 == len || n + 1 == len => Status::Crash,
                n if n % 97 == 5 => Status::Keep,
                n if n % 7 == 3 => Status::Crash,
                n if n % 13 == 4 => Status::Timeout,
                n if n % 31 == 6 => Status::Pruned,
                n if n % 41 == 8 => Status::Invalid,
                _ => Status::Discard,
            };
            let noise = (seed % 1000) as f64 / 10.0;
            let objective = match status {
                Status::Baseline => Some(100.0),
                Status::Keep => Some(100.0 - n as f64 / 100.0),
                // Every fifth discard ties with another (the median is then found by number).
                Status::Discard if n % 5 == 0 => Some(120.0),
                Status::Discard => Some(90.0 + noise - n as f64 / 200.0),
                _ => None,
            };
            ExperimentRecord {
                n,
                parent_commit: "abc".into(),
                status: Some(status),
                objective,
                description: format!(
                    "change {n} <i>{}",
                    "é".repeat(if n % 11 == 0 { 130 } else { 0 })
                ),
                reason: format!("why {n}{}", "→".repeat(if n % 13 == 0 { 125 } else { 0 })),
                ..Default::default()
            }
        })
        .collect()
}

/// Writes `exps` as run `tag` and checks that the picked experiments draw the very same plot
/// (and learning-curve picks) as every record, bounded in number.
fn same_plot(s: &Store, tag: &str, exps: &[ExperimentRecord]) {
    let run = s.create_plain_run(tag, "abc", "m").unwrap();
    s.in_transaction(|s| {
        for e in exps {
            s.put_experiment(run.id, e)?;
        }
        Ok(())
    })
    .unwrap();
    let all = s.experiments(run.id).unwrap();
    let rows = s
        .plot_points(run.id, &COLUMNS, curves::RECENT as u64)
        .unwrap();
    let whole = progress_svg_labelled(&all, "m", true, "t", 15);
    let picked = progress_svg_labelled(&rows.plot, "m", true, "t", 15);
    assert_eq!(
        picked, whole,
        "{tag}: the picked experiments draw the same plot"
    );

    let keeps = all
        .iter()
        .filter(|e| matches!(e.status(), Status::Keep | Status::Baseline))
        .count();
    let columns = COLUMNS.span as usize + 1;
    // Keeps and baselines, three discards and four failure marks per column, two ends.
    let bound = keeps + 7 * columns + 2;
    assert!(
        rows.plot.len() <= bound,
        "{tag}: {} rows, bound {bound}",
        rows.plot.len()
    );
    for e in all
        .iter()
        .filter(|e| matches!(e.status(), Status::Keep | Status::Baseline))
    {
        let got = rows.plot.iter().find(|p| p.n == e.n).unwrap();
        assert_eq!((got.status, got.objective), (e.status, e.objective));
    }
    let mut known = curves::statuses(&rows.recent);
    known.extend(curves::statuses(&rows.plot));
    known.sort_by_key(|(n, _)| *n);
    known.dedup_by_key(|(n, _)| *n);
    assert_eq!(
        curves::to_draw(&known),
        curves::to_draw(&curves::statuses(&all)),
        "{tag}"
    );
}

fn plots_agree(s: &Store) {
    let long = records(6_000);
    let discards = long
        .iter()
        .filter(|e| e.status() == Status::Discard)
        .count();
    assert!(discards > MAX_POINTS, "the long run draws columns");
    same_plot(s, "long", &long);
    // Past `BLOCKS_FROM`, the columns are read from the blocks the store keeps.
    let blocked = records(BLOCKS_FROM + 3_000);
    same_plot(s, "blocks", &blocked);
    // As long, but with few enough discards to draw every one.
    let few: Vec<ExperimentRecord> = blocked
        .into_iter()
        .map(|e| match e.status() {
            Status::Discard if e.n % 20 != 0 => ExperimentRecord {
                status: Some(Status::Crash),
                objective: None,
                ..e
            },
            _ => e,
        })
        .collect();
    let discards = few.iter().filter(|e| e.status() == Status::Discard).count();
    assert!(discards <= MAX_POINTS && few.len() as u64 > BLOCKS_FROM);
    same_plot(s, "few discards", &few);
    same_plot(s, "short", &records(700));
    same_plot(s, "one", &records(1));
    let empty = s
        .plot_points(i64::MAX, &COLUMNS, curves::RECENT as u64)
        .unwrap();
    assert!(empty.plot.is_empty() && empty.recent.is_empty());
}

#[test]
fn the_store_picks_what_the_plot_draws_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("hone.db")).unwrap();
    plots_agree(&s);
}

#[test]
fn the_store_picks_what_the_plot_draws_on_postgres() {
    let Some(pg) = PgServer::start() else {
        return;
    };
    let s = Store::open_at(&StoreLocation::Postgres {
        url: pg.database("plot"),
        repo: "/src/project".into(),
    })
    .unwrap();
    plots_agree(&s);
}
