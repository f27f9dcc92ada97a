//! A run's plots and report read from its store by bounded queries: the plot's experiments
//! as the store picks them ([`Store::plot_points`]), the learning curves of a bounded few,
//! the holdouts by their partial index and the newest experiments for the table. `hone
//! report` and the dashboard's run page cost about the same at 100 experiments as at
//! 100,000 (the report lists every experiment only when asked to).

use super::document::{self, Contents, Report};
use super::{curves, plot, summarize_stored};
use crate::store::{PlotPoint, RunRecord, Store, StoreError};

/// The progress plot and the learning curves of a run, drawn from what the store picks.
pub struct Drawing {
    /// The progress plot (SVG).
    pub plot: String,
    /// The learning curves (`[verify] progress`), when experiments printed any.
    pub curves: Option<String>,
    /// The experiments the plot drew: every baseline and keep among them, in order (see
    /// [`Store::plot_points`]).
    pub rows: Vec<PlotPoint>,
}

/// Draws run `run`'s progress plot titled `title` with at most `labels` keeps labelled, and
/// its learning curves; `then` is called with the plot once drawn, on the drawing's thread
/// (a server deflates it there), and `beside` reads the store meanwhile: the plot (thousands
/// of points in a long run, no store needed) is drawn on a thread of its own while this one
/// reads the learning curves and whatever `beside` reads.
pub fn drawing_beside<T, P: Send>(
    store: &Store,
    run: &RunRecord,
    title: &str,
    labels: usize,
    then: impl Fn(&str) -> P + Sync,
    beside: impl FnOnce(&Store) -> Result<T, StoreError>,
) -> Result<(Drawing, P, T), StoreError> {
    let picked = store.plot_points(run.id, &plot::COLUMNS, curves::RECENT as u64)?;
    let minimize = run.direction == crate::spec::Direction::Minimize;
    let rows = &picked.plot;
    let ((plot, after), curves, other) = std::thread::scope(|scope| {
        let draw = || {
            let svg = plot::progress_svg_labelled(rows, &run.metric, minimize, title, labels);
            let after = then(&svg);
            (svg, after)
        };
        // Where no thread can be made, the plot is drawn here after the reads.
        let drawn = std::thread::Builder::new().spawn_scoped(scope, draw).ok();
        let read = (|| {
            // The learning curves are picked among the keeps, the baselines and the newest
            // others, all of which the plot's rows and the recent ones hold (a placeholder in
            // the plot's rows has no status: the newest, which has one, goes first). Only
            // their numbers and statuses are needed.
            let mut known = curves::statuses(&picked.recent);
            known.extend(curves::statuses(rows));
            known.sort_by_key(|(n, _)| *n);
            known.dedup_by_key(|(n, _)| *n);
            let thinned =
                store.thinned_curves(run.id, &curves::to_draw(&known), curves::MAX_POINTS)?;
            let curves = curves::curves_svg(&thinned, &known, "progress");
            Ok::<_, StoreError>((curves, beside(store)?))
        })();
        // A panic while drawing is raised again here, as if drawn on this thread.
        let plot = match drawn {
            Some(d) => d.join().unwrap_or_else(|e| std::panic::resume_unwind(e)),
            None => draw(),
        };
        read.map(|(curves, other)| (plot, curves, other))
    })?;
    Ok((
        Drawing {
            plot,
            curves,
            rows: picked.plot,
        },
        after,
        other,
    ))
}

/// How many experiments the report's table lists unless asked for all: the newest.
pub const LISTED: u64 = 1000;

/// The report of run `run` as its store holds it (`probation`: the spec's, for the outer
/// loop's verdicts); the table lists the newest `listed` experiments (`None`: every one).
pub fn report(
    store: &Store,
    run: &RunRecord,
    probation: u64,
    listed: Option<u64>,
) -> Result<Report, StoreError> {
    report_with(store, run, (probation, listed), None)
}

/// [`report`], with what the best changed against the baseline where the records cannot say
/// it (an agent run's, worked out from its commits: see
/// `engine::literal_changes_between`).
pub fn report_with(
    store: &Store,
    run: &RunRecord,
    (probation, listed): (u64, Option<u64>),
    best_vs_baseline: Option<String>,
) -> Result<Report, StoreError> {
    let stored = summarize_stored(store, run)?;
    let summary = super::Summary {
        tokens: Some(store.tokens_spent(run.id)?),
        best_vs_baseline: stored.best_vs_baseline.clone().or(best_vs_baseline),
        ..stored
    };
    // The holdouts, the table's rows and the mechanisms' calls read while the plot is drawn.
    let (drawn, (), (holdout, rows, calls)) = drawing_beside(
        store,
        run,
        &document::plot_title(run, &summary),
        document::LABELS,
        |_| (),
        |store| {
            let holdout = store.holdout_outlines(run.id)?;
            let rows = match listed {
                Some(limit) if summary.experiments > limit => {
                    store.latest_outlines(run.id, limit)?
                }
                _ => store.experiment_outlines(run.id)?,
            };
            Ok((holdout, rows, store.mechanism_calls(run.id, None)?))
        },
    )?;
    // The outer loop's verdicts count the keeps after each mechanism's guidance: every keep
    // is among the plot's rows.
    let mechs = crate::meta::stats::compute(&calls, &drawn.rows, probation);
    let mut report = document::render_contents(
        run,
        &summary,
        &mechs,
        Contents {
            marked: &drawn.rows,
            holdout: &holdout,
            left_out: summary.experiments.saturating_sub(rows.len() as u64),
            listed: &rows,
            svg: drawn.plot,
        },
    );
    if let Some(svg) = drawn.curves {
        report = report.with_curves_svg(svg);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::summarize;
    use crate::store::{ExperimentRecord, Status};

    /// A run of 40: the baseline, a keep every seventh, a discard the holdout gate turned
    /// away (a holdout value on a discard), crashes; the baseline's and the keeps' holdouts.
    fn stored_run() -> (tempfile::TempDir, Store, RunRecord) {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("hone.db")).unwrap();
        let run = s.create_plain_run("r", "abc", "loss").unwrap();
        s.in_transaction(|s| {
            for n in 0..40u64 {
                let status = match n {
                    0 => Status::Baseline,
                    n if n % 7 == 3 => Status::Keep,
                    n if n % 5 == 4 => Status::Crash,
                    _ => Status::Discard,
                };
                let objective = match status {
                    Status::Baseline => Some(10.0),
                    Status::Keep => Some(10.0 - n as f64 / 10.0),
                    Status::Discard => Some(11.0 + (n % 3) as f64),
                    _ => None,
                };
                let holdout = match (status, n) {
                    (Status::Baseline | Status::Keep, _) | (_, 12) => Some(20.0 - n as f64),
                    _ => None,
                };
                s.put_experiment(
                    run.id,
                    &ExperimentRecord {
                        n,
                        parent_commit: "abc".into(),
                        status: Some(status),
                        objective,
                        holdout,
                        description: format!("change {n}"),
                        reason: format!("why {n}"),
                        ..Default::default()
                    },
                )?;
            }
            Ok(())
        })
        .unwrap();
        (dir, s, run)
    }

    #[test]
    fn the_stored_report_listing_all_is_the_report_of_every_record() {
        let (_dir, s, run) = stored_run();
        let all = s.experiments(run.id).unwrap();
        let whole = document::render_with(&run, &all, &[]);
        let stored = report(&s, &run, 10, None).unwrap();
        assert_eq!(stored.markdown, whole.markdown);
        assert_eq!(stored.html, whole.html);
        assert_eq!(stored.svg, whole.svg);
        assert!(stored
            .markdown
            .contains("| 12 | discard | 11.000000 | 8.000000 |"));
        assert!(!stored.markdown.contains("lists every one"));
    }

    #[test]
    fn a_bounded_listing_shows_the_newest_and_says_what_it_left_out() {
        let (_dir, s, run) = stored_run();
        let all = s.experiments(run.id).unwrap();
        let whole = document::render_with(&run, &all, &[]);
        let short = report(&s, &run, 10, Some(10)).unwrap();
        let table = |md: &str| md.split("## Experiments").nth(1).unwrap().to_string();
        let listed = table(&short.markdown);
        assert!(
            listed.contains("The newest 10 of 40 experiments (#30 on)"),
            "{listed}"
        );
        let rows: Vec<&str> = listed.lines().filter(|l| l.starts_with("| 3")).collect();
        assert_eq!(rows.len(), 10, "{listed}");
        assert!(!listed.contains("| 29 |") && listed.contains("| 39 |"));
        // Everything above the table covers the whole run: the facts, the top improvements
        // (the first keep, #3, among them) and every holdout (#12 long before the newest).
        let head = |md: &str| md.split("## Experiments").next().unwrap().to_string();
        // What the run learned is worked from the listed experiments: in the whole report
        // above the table, in the short one after it, from the newest ten.
        let learned = ["Knobs", "Failures by cause", "Pruning"];
        let without_learned = |md: &str| {
            md.split("\n## ")
                .filter(|sec| !learned.iter().any(|t| sec.starts_with(t)))
                .collect::<Vec<_>>()
                .join("\n## ")
        };
        assert_eq!(
            head(&short.markdown),
            without_learned(&head(&whole.markdown))
        );
        assert!(head(&whole.markdown).contains("## Failures by cause"));
        assert!(
            listed.contains("## Failures by cause\n\nFrom the newest 10 experiments"),
            "{listed}"
        );
        assert!(head(&short.markdown).contains("| 3 |"));
        assert!(short.html.contains("The newest 10 of 40 experiments"));
        assert_eq!(short.svg, whole.svg);
        assert_eq!(
            summarize(&run, &all).experiments,
            40,
            "the summary counts every one"
        );
    }
}
