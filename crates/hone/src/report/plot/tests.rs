//! Tests of the progress plot.
use super::*;

/// How many points or marks the groups whose class starts with `class` hold (`keeps"`: the
/// keeps' group, `fail `: every failure kind's).
fn marks(svg: &str, class: &str) -> usize {
    svg.split(&format!("<g class=\"{class}"))
        .skip(1)
        .map(|g| g.split("</g>").next().unwrap_or_default())
        .map(|g| g.matches("<circle ").count() + g.matches("<text x=").count())
        .sum()
}

#[test]
fn many_keeps_get_only_the_biggest_gains_and_the_best_labelled() {
    let exps: Vec<ExperimentRecord> = (0..50u64)
        .map(|n| ExperimentRecord {
            n,
            status: Some(if n == 0 {
                Status::Baseline
            } else {
                Status::Keep
            }),
            // Experiment 10 gains the most, then 20; every other keep gains 0.01.
            objective: Some(
                100.0
                    - n as f64 * 0.01
                    - if n >= 10 { 5.0 } else { 0.0 }
                    - if n >= 20 { 3.0 } else { 0.0 },
            ),
            description: format!("change {n}"),
            ..Default::default()
        })
        .collect();
    assert_eq!(labelled_keeps(&exps, true, 3), vec![10, 20, 49]);
    let svg = progress_svg_labelled(&exps, "m", true, "t", 3);
    assert_eq!(
        svg.matches(r#"class="label""#).count(),
        4,
        "three keeps and the baseline"
    );
    assert_eq!(marks(&svg, "keeps\""), 50, "every point is still drawn");
    let all = progress_svg(&exps, "m", true, "t");
    assert_eq!(all.matches(r#"class="label""#).count(), 50);
}

/// A run of `n` experiments: the baseline, a keep every 1,000th experiment, a crash every
/// 7th, the rest discards scattered around the baseline.
fn long_run(n: u64) -> Vec<ExperimentRecord> {
    (0..n)
        .map(|i| {
            let status = match i {
                0 => Status::Baseline,
                _ if i % 1000 == 0 => Status::Keep,
                _ if i % 7 == 0 => Status::Crash,
                _ => Status::Discard,
            };
            let objective = match status {
                Status::Crash => None,
                Status::Keep => Some(100.0 - (i / 1000) as f64),
                _ => Some(100.0 + ((i * 7919) % 97) as f64 / 10.0),
            };
            ExperimentRecord {
                n: i,
                status: Some(status),
                objective,
                description: format!("change {i}"),
                reason: "boom".into(),
                ..Default::default()
            }
        })
        .collect()
}

#[test]
fn the_plot_does_not_grow_with_the_run() {
    let small = progress_svg(&long_run(10_000), "m", true, "t");
    let large = progress_svg(&long_run(100_000), "m", true, "t");
    // Every keep and the baseline are drawn, whatever the size.
    assert_eq!(marks(&large, "keeps\""), 100);
    assert_eq!(marks(&small, "keeps\""), 10);
    // Discards: the envelope and the middle, three per pixel column at most.
    let columns = (W - LEFT - RIGHT) as usize + 2;
    for svg in [&small, &large] {
        let discards = marks(svg, "discards\"");
        assert!(discards <= 3 * columns, "{discards}");
        assert!(discards > columns / 2, "the envelope is drawn: {discards}");
        assert!(marks(svg, "fail ") <= columns, "one mark per column");
        assert!(
            marks(svg, "fail crash\"") > columns / 2,
            "the crashes are marked"
        );
    }
    eprintln!(
        "plot bytes: 10,000 experiments {}, 100,000 experiments {}",
        small.len(),
        large.len()
    );
    assert!(large.len() < 600_000, "{} bytes", large.len());
    assert!(
        large.len() < 2 * small.len(),
        "10x the experiments, about the same plot: {} vs {} bytes",
        large.len(),
        small.len()
    );
    // The envelope keeps the extremes: the highest and the lowest discard value are drawn.
    let exps = long_run(100_000);
    let values: Vec<f64> = exps
        .iter()
        .filter(|e| e.status() == Status::Discard)
        .filter_map(|e| e.objective)
        .collect();
    for extreme in [
        values.iter().copied().fold(f64::MIN, f64::max),
        values.iter().copied().fold(f64::MAX, f64::min),
    ] {
        let shown = format!(" {}: ", crate::report::fmt_metric(Some(extreme)));
        assert!(large.contains(&shown), "the discard at {shown} is drawn");
    }
    // A short run draws every discard.
    let short_run = long_run(1_000);
    let discards = short_run
        .iter()
        .filter(|e| e.status() == Status::Discard)
        .count();
    let svg = progress_svg(&short_run, "m", true, "t");
    assert_eq!(marks(&svg, "discards\""), discards);
}

#[test]
fn the_best_line_is_drawn_through_its_changes() {
    let steps = [
        (0, 5.0),
        (1, 5.0),
        (2, 4.0),
        (3, 4.0),
        (4, 4.0),
        (5, 3.0),
        (6, 3.0),
    ];
    assert_eq!(
        best_changes(&steps),
        [(0, 5.0), (2, 4.0), (5, 3.0), (6, 3.0)]
    );
}

#[test]
fn the_range_follows_the_improvement() {
    let (lo, hi) = y_range(3.0, 2.0, &[3.0, 2.0, 10.0]);
    assert!(lo < 2.0 && lo > 1.8, "{lo}");
    assert!(
        hi > 3.0 && hi < 3.5,
        "a far-off discard (10) does not flatten the plot: {hi}"
    );
    let (lo, hi) = y_range(5.0, 5.0, &[5.0, 6.0]);
    assert!(lo <= 5.0 && hi >= 6.0);
    let (lo, hi) = y_range(1.0, 1.0, &[1.0]);
    assert!(hi > lo);
}

fn exp(n: u64, status: Status, v: Option<f64>) -> ExperimentRecord {
    ExperimentRecord {
        n,
        status: Some(status),
        objective: v,
        ..Default::default()
    }
}

#[test]
fn values_at_the_ends_of_the_float_range_draw_no_nan() {
    // A keep and a discard near ±1.8e308: their span overflows a float.
    let exps = vec![
        exp(0, Status::Baseline, Some(10.0)),
        exp(1, Status::Keep, Some(-1.79e308)),
        exp(2, Status::Discard, Some(1.79e308)),
        exp(3, Status::Keep, Some(-1.7e308)),
    ];
    for minimize in [true, false] {
        let svg = progress_svg(&exps, "score", minimize, "t");
        let text = progress_text(&exps, "score", minimize);
        for out in [&svg, &text] {
            assert!(
                !out.contains("NaN") && !out.contains("inf"),
                "minimize {minimize}:\n{out}"
            );
        }
    }
}

#[test]
fn the_text_plot_has_every_point_and_the_best_ends_low() {
    let exps = vec![
        exp(0, Status::Baseline, Some(5.0)),
        exp(1, Status::Keep, Some(4.0)),
        exp(2, Status::Discard, Some(4.5)),
        exp(3, Status::Crash, None),
        exp(4, Status::Keep, Some(3.0)),
    ];
    let t = progress_text(&exps, "score", true);
    let rows: Vec<&str> = t.lines().collect();
    assert_eq!(
        t.matches('*').count() - 1,
        3,
        "baseline and two keeps (one * in the legend): {t}"
    );
    assert_eq!(t.matches('·').count() - 1, 1, "{t}");
    // The last keep (the best) is on the plot's lowest rows for a minimized metric.
    let best_row = rows.iter().rposition(|l| l.ends_with('*')).unwrap();
    let base_row = rows.iter().position(|l| l.contains("|*")).unwrap();
    assert!(best_row > base_row, "{t}");
    assert!(
        rows.iter().any(|l| l.trim() == "x"),
        "the crash is under the axis: {t}"
    );
}

#[test]
fn the_texts_it_shows_are_all_a_caller_needs_to_read() {
    for n in [200, 20_000] {
        let full: Vec<ExperimentRecord> = long_run(n)
            .into_iter()
            .map(|mut e| {
                e.reason = format!("why {}", e.n);
                e
            })
            .collect();
        let shown = texts_shown(&full, true, 15);
        // Only the texts it names are read: the plot is the same.
        let bare: Vec<ExperimentRecord> = full
            .iter()
            .map(|e| {
                let mut b = e.clone();
                if shown.binary_search(&e.n).is_err() {
                    b.description.clear();
                    b.reason.clear();
                }
                b
            })
            .collect();
        let plot = |exps: &[ExperimentRecord]| progress_svg_labelled(exps, "m", true, "t", 15);
        assert_eq!(plot(&bare), plot(&full), "{n} experiments");
        assert!(shown.windows(2).all(|w| w[0] < w[1]));
        if n > 10_000 {
            // Bounded: not one per experiment.
            assert!(shown.len() < 6_000, "{} texts of {n}", shown.len());
        }
    }
}

mod from_store;

#[test]
fn value_ticks_are_round_numbers_in_the_range() {
    let (ticks, decimals) = nice_ticks(2.3741, 2.6093);
    assert_eq!(decimals, Some(2));
    assert_eq!(ticks.len(), 5, "{ticks:?}");
    for t in &ticks {
        assert!((2.3741..=2.6093).contains(t), "{t}");
        assert!(
            ((t * 100.0).round() - t * 100.0).abs() < 1e-9,
            "{t} is a hundredth"
        );
    }
    assert_eq!(
        nice_ticks(0.0, 100.0),
        (vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0], Some(0))
    );
    let (ticks, decimals) = nice_ticks(-1.7e308, 1.7e308);
    assert_eq!(decimals, None, "no fixed decimals for {ticks:?}");
    assert!(ticks.iter().all(|t| t.is_finite()));
}

#[test]
fn a_discard_beyond_the_range_is_a_hollow_mark_that_says_so() {
    // The range follows the improvement (3 -> 2): the discard at 10 is far above it.
    let exps = vec![
        exp(0, Status::Baseline, Some(3.0)),
        exp(1, Status::Discard, Some(10.0)),
        exp(2, Status::Keep, Some(2.0)),
        exp(3, Status::Discard, Some(2.9)),
    ];
    let svg = progress_svg(&exps, "score", true, "t");
    assert_eq!(marks(&svg, "discards\""), 2, "both are drawn:\n{svg}");
    let off: Vec<&str> = svg.lines().filter(|l| l.contains("offscale")).collect();
    assert_eq!(off.len(), 1, "{svg}");
    assert!(
        off[0].contains("<title>#1 10") && off[0].contains("(off the scale)"),
        "{}",
        off[0]
    );
    // The labels of the value axis are round: 2.0, 2.2, ... printed with one decimal.
    assert!(svg.contains(r#"text-anchor="end">2.2</text>"#), "{svg}");
}

#[test]
fn a_run_that_fell_by_decades_is_drawn_on_a_log_scale() {
    // 2.0 down to 0.004 by halving: on a linear axis every keep after the seventh would sit in
    // the bottom hundredth of the plot.
    let mut exps = vec![exp(0, Status::Baseline, Some(2.0))];
    let mut v = 2.0;
    for n in 1..10 {
        v /= 2.0;
        exps.push(exp(n, Status::Keep, Some(v)));
    }
    let svg = progress_svg(&exps, "loss", true, "t");
    assert!(svg.contains("lower is better, log scale"), "{svg}");
    let layout = layout(&exps, true, 20).unwrap();
    let f = &layout.frame;
    assert!(f.log);
    // Equal ratios are equal distances.
    let (a, b, c) = (f.y(1.0), f.y(0.5), f.y(0.25));
    assert!(((a - b) - (b - c)).abs() < 1e-9, "{a} {b} {c}");
    assert!(
        f.y(0.0039) < f.plot_bottom,
        "the best is above the bottom edge"
    );
    assert!(
        log_ticks(f.lo, f.hi).contains(&0.01),
        "{:?}",
        log_ticks(f.lo, f.hi)
    );
    // Within a decade and a half, or with a value at or below zero: linear.
    assert!(log_scale(2.0, 0.1, &[2.0, 0.1]).is_none());
    assert!(log_scale(2.0, 0.001, &[2.0, 0.001, 0.0]).is_none());
    assert!(log_scale(2.0, 0.001, &[2.0, 0.001]).is_some());
    let linear = progress_svg(&exps[..3], "loss", true, "t");
    assert!(!linear.contains("log scale"), "{linear}");
    // Values at the ends of the positive floats: a bounded axis, a few ticks, no NaN.
    for (base, best) in [(2.0, 1e-300), (1e-3, 1e300), (1e-320, 1.0)] {
        let exps = vec![
            exp(0, Status::Baseline, Some(base)),
            exp(1, Status::Keep, Some(best)),
        ];
        let svg = progress_svg(&exps, "x", base > best, "t");
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
        if let Some((lo, hi)) = log_scale(base, best, &[base, best]) {
            assert!(lo > 0.0 && hi.is_finite(), "{lo} {hi}");
            assert!(log_ticks(lo, hi).len() <= 12, "{}", log_ticks(lo, hi).len());
        }
    }
}
