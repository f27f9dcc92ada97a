//! The learning-curve plot (`[verify] progress`): each experiment's recorded (step, value)
//! points as a line, coloured by its status; a pruned run's partial curve is dashed and ends
//! in a cross where it was stopped. Inline SVG for the report and the dashboard.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::store::{Plotted, Status};
use crate::util::html_escape as esc;
use crate::verify::prune::Curve;

/// At most this many curves are drawn: the most recent ones, the baseline and the keeps.
const MAX_CURVES: usize = 300;

/// At most this many keeps' curves are drawn (the most recent), besides the baseline's.
const MAX_KEEPS: usize = 100;

/// The newest experiments other than baselines that [`to_draw`] can pick from (every
/// baseline and keep besides): what a caller that holds only some of a run's experiments
/// must hold of its end.
pub const RECENT: usize = MAX_CURVES;

/// The experiments whose curves a plot reads (`exps` in the order of their numbers): every
/// baseline, the `MAX_KEEPS` most recent keeps and the `MAX_CURVES` − `MAX_KEEPS`
/// most recent others (older keeps among them); read with
/// [`crate::store::Store::thinned_curves`] and [`MAX_POINTS`], a plot costs a bounded number
/// of rows however long the run and however much its verifiers printed.
pub fn to_draw(exps: &[(u64, Status)]) -> Vec<u64> {
    let (mut keeps, mut others) = (0, 0);
    let mut ns: Vec<u64> = exps
        .iter()
        .rev()
        .filter(|(_, status)| match status {
            Status::Baseline => true,
            Status::Keep if keeps < MAX_KEEPS => {
                keeps += 1;
                true
            }
            _ if others < MAX_CURVES - MAX_KEEPS => {
                others += 1;
                true
            }
            _ => false,
        })
        .map(|(n, _)| *n)
        .collect();
    ns.reverse();
    ns
}

/// What the curves need of experiments: their numbers and statuses, in the same order.
pub fn statuses<P: Plotted>(exps: &[P]) -> Vec<(u64, Status)> {
    exps.iter().map(|e| (e.n(), e.status())).collect()
}

/// At most about this many points of one curve are drawn (evenly spaced, the last always): a
/// verifier that prints a value every batch does not make the plot grow with it.
pub const MAX_POINTS: usize = 400;

/// The points of `c` that are drawn: all of them, or every k-th and the last.
fn thinned(c: &Curve) -> impl Iterator<Item = &(f64, f64)> {
    let k = c.len().div_ceil(MAX_POINTS).max(1);
    let last = c.len().saturating_sub(1);
    c.iter()
        .enumerate()
        .filter(move |(i, _)| i % k == 0 || *i == last)
        .map(|(_, p)| p)
}

const W: f64 = 720.0;
const H: f64 = 300.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 30.0;

/// A log-scaled plot's decades between `y0` and `y1`, each a faint line labelled where it
/// falls (`sy`: a value's y), but next to the two ends' own labels.
fn decade_lines(svg: &mut String, (y0, y1): (f64, f64), sy: impl Fn(f64) -> f64) {
    let (first, last) = (y0.log10().ceil() as i32, y1.log10().floor() as i32);
    for e in first..=last {
        let v = 10f64.powi(e);
        let y = sy(v);
        if y - TOP > 14.0 && (H - BOTTOM) - y > 14.0 {
            let _ = writeln!(
                svg,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#eee"/><text x="4" y="{:.1}">{}</text>"##,
                W - RIGHT,
                y + 4.0,
                short(v)
            );
        }
    }
}

/// The curves drawn: the non-empty ones, and past [`MAX_CURVES`] the baselines', the keeps' and
/// the newest others'.
fn drawn_curves(
    curves: &BTreeMap<u64, Curve>,
    status: impl Fn(u64) -> Status,
) -> Vec<(u64, &Curve)> {
    let mut drawn: Vec<(u64, &Curve)> = curves
        .iter()
        .filter(|(_, c)| !c.is_empty())
        .map(|(n, c)| (*n, c))
        .collect();
    if drawn.len() > MAX_CURVES {
        let cut = drawn.len() - MAX_CURVES;
        let mut i = 0;
        drawn.retain(|(n, _)| {
            i += 1;
            i > cut || matches!(status(*n), Status::Baseline | Status::Keep)
        });
    }
    drawn
}

/// The plot of `curves` (by experiment), or `None` when no experiment printed progress;
/// `exps` (see [`statuses`]) in the order of their numbers, each once, say how each is coloured.
pub fn curves_svg(
    curves: &BTreeMap<u64, Curve>,
    exps: &[(u64, Status)],
    label: &str,
) -> Option<String> {
    debug_assert!(exps.windows(2).all(|w| w[0].0 < w[1].0), "in order");
    let status = |n: u64| match exps.binary_search_by_key(&n, |(n, _)| *n) {
        Ok(i) => exps[i].1,
        Err(_) => Status::Running,
    };
    let drawn = drawn_curves(curves, status);
    if drawn.is_empty() {
        return None;
    }
    let (x0, x1, y0, y1, clipped) = extent(&drawn, status);
    let sx = |x: f64| LEFT + (x - x0) / (x1 - x0).max(f64::MIN_POSITIVE) * (W - LEFT - RIGHT);
    // Values that span decades (a loss from 2 to 0.003) on a log scale, as the progress plot.
    let log = y0 > 0.0 && y1 / y0 >= super::plot::LOG_SCALE_RATIO;
    let at = |y: f64| if log { y.ln() } else { y };
    // A failed run's values beyond the others' range are drawn at the edge.
    let sy = |y: f64| {
        let (lo, hi) = (at(y0), at(y1));
        TOP + (hi - at(y.clamp(y0, y1))) / (hi - lo).max(f64::MIN_POSITIVE) * (H - TOP - BOTTOM)
    };
    let title = format!(
        "{} by step{} (black: baseline, green: keeps, grey: discards, dashed: pruned{})",
        esc(label),
        if log { ", log scale" } else { "" },
        if clipped {
            "; failed runs' values beyond the others' are drawn at the edge"
        } else {
            ""
        }
    );
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg class="curves" xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="11">
<rect width="{W}" height="{H}" fill="white"/>
<text x="{LEFT}" y="16" font-size="13">{title}</text>
<text x="{LEFT}" y="{}" >step {x0}</text><text x="{}" y="{}" text-anchor="end">step {x1}</text>
<text x="4" y="{}">{}</text><text x="4" y="{}">{}</text>"#,
        H - 8.0,
        W - RIGHT,
        H - 8.0,
        TOP + 4.0,
        short(y1),
        H - BOTTOM,
        short(y0),
    );
    if log {
        decade_lines(&mut svg, (y0, y1), sy);
    }
    for (n, c) in &drawn {
        let st = status(*n);
        let (colour, width, dash) = match st {
            Status::Baseline => ("#222", 2.0, ""),
            Status::Keep => ("#2e7d32", 1.6, ""),
            Status::Discard => ("#9e9e9e", 1.0, ""),
            Status::Pruned => ("#a1887f", 1.0, r#" stroke-dasharray="4 3""#),
            _ => ("#cfcfcf", 1.0, ""),
        };
        let path: Vec<String> = thinned(c)
            .map(|(x, y)| format!("{:.1},{:.1}", sx(*x), sy(*y)))
            .collect();
        let _ = writeln!(
            svg,
            r#"<polyline class="curve {st}" fill="none" stroke="{colour}" stroke-width="{width}"{dash} points="{}"><title>#{n} {st}</title></polyline>"#,
            path.join(" ")
        );
        if let (Status::Pruned, Some((x, y))) = (st, c.last()) {
            let _ = writeln!(
                svg,
                r##"<text class="pruned-at" x="{:.1}" y="{:.1}" text-anchor="middle" fill="#6d4c41">×<title>#{n} pruned at step {x}</title></text>"##,
                sx(*x),
                sy(*y) + 4.0
            );
        }
    }
    svg.push_str("</svg>\n");
    Some(svg)
}

/// The plot's ranges (x0, x1, y0, y1), the values' from the runs that did not fail (a run
/// that diverged before it crashed would flatten every other curve), and whether a failed
/// run's value falls outside them. A plot of failed runs alone spans them all.
fn extent(drawn: &[(u64, &Curve)], status: impl Fn(u64) -> Status) -> (f64, f64, f64, f64, bool) {
    let (mut x0, mut x1) = (f64::MAX, f64::MIN);
    let (mut y0, mut y1) = (f64::MAX, f64::MIN);
    let (mut all0, mut all1) = (f64::MAX, f64::MIN);
    for (n, c) in drawn {
        let failed = status(*n).is_failure();
        for (x, y) in c.iter() {
            (x0, x1) = (x0.min(*x), x1.max(*x));
            (all0, all1) = (all0.min(*y), all1.max(*y));
            if !failed {
                (y0, y1) = (y0.min(*y), y1.max(*y));
            }
        }
    }
    if y0 > y1 {
        return (x0, x1, all0, all1, false);
    }
    (x0, x1, y0, y1, all0 < y0 || all1 > y1)
}

fn short(v: f64) -> String {
    format!("{v:.4}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ExperimentRecord;

    #[test]
    fn every_curve_is_a_line_and_a_pruned_one_is_dashed_and_marked() {
        let exp = |n, st| ExperimentRecord {
            n,
            status: Some(st),
            ..Default::default()
        };
        let exps = vec![exp(0, Status::Baseline), exp(1, Status::Pruned)];
        let mut curves = BTreeMap::new();
        let exps = statuses(&exps);
        assert!(curves_svg(&curves, &exps, "loss").is_none());
        curves.insert(0, vec![(1.0, 3.0), (2.0, 2.0), (3.0, 1.5)]);
        curves.insert(1, vec![(1.0, 4.0), (2.0, 3.5)]);
        let svg = curves_svg(&curves, &exps, "loss <x>").unwrap();
        assert_eq!(svg.matches("<polyline").count(), 2, "{svg}");
        assert!(svg.contains(r#"class="curve pruned""#), "{svg}");
        assert!(svg.contains("stroke-dasharray"), "{svg}");
        assert!(svg.contains("pruned at step 2"), "{svg}");
        assert!(svg.contains("loss &lt;x&gt;"), "escaped: {svg}");
    }

    #[test]
    fn a_crashed_runs_divergence_does_not_flatten_the_other_curves() {
        let exp = |n, st| ExperimentRecord {
            n,
            status: Some(st),
            ..Default::default()
        };
        let exps = statuses(&[exp(0, Status::Baseline), exp(1, Status::Crash)]);
        let mut curves = BTreeMap::new();
        curves.insert(0, vec![(1.0, 2.0), (2.0, 1.0), (3.0, 0.5)]);
        // Diverged to 92 at step 2, then crashed.
        curves.insert(1, vec![(1.0, 2.0), (2.0, 92.0)]);
        let svg = curves_svg(&curves, &exps, "loss").unwrap();
        // The axis spans the baseline's values; the crash's 92 is drawn at the top edge.
        assert!(
            svg.contains(">2.0000<") && svg.contains(">0.5000<"),
            "{svg}"
        );
        assert!(!svg.contains("92.0000"), "{svg}");
        assert!(svg.contains("drawn at the edge"), "{svg}");
        let top = format!("{:.1}", TOP);
        let crash = svg
            .lines()
            .find(|l| l.contains(r#"class="curve crash""#))
            .unwrap();
        assert!(crash.contains(&format!(",{top}\"")), "{crash}");
        // Failed runs alone: their own range.
        let alone = statuses(&[exp(1, Status::Crash)]);
        let only: BTreeMap<u64, Curve> = [(1, vec![(1.0, 2.0), (2.0, 92.0)])].into();
        let svg = curves_svg(&only, &alone, "loss").unwrap();
        assert!(svg.contains(">92.0000<"), "{svg}");
    }

    #[test]
    fn what_is_drawn_is_bounded_and_keeps_the_baseline_and_recent_keeps() {
        let exps: Vec<ExperimentRecord> = (0..5_000u64)
            .map(|n| ExperimentRecord {
                n,
                status: Some(match n {
                    0 => Status::Baseline,
                    n if n % 10 == 0 => Status::Keep,
                    _ => Status::Discard,
                }),
                ..Default::default()
            })
            .collect();
        let exps = statuses(&exps);
        let ns = to_draw(&exps);
        assert!(ns.len() <= MAX_CURVES + 1, "{}", ns.len());
        assert_eq!(ns.first(), Some(&0), "the baseline");
        assert!(ns.windows(2).all(|w| w[0] < w[1]), "in order");
        assert_eq!(ns.last(), Some(&4_999), "the most recent");
        let keeps = ns.iter().filter(|n| **n % 10 == 0 && **n > 0).count();
        assert_eq!(keeps, MAX_KEEPS, "the most recent keeps, bounded");
        let short = &exps[..7];
        assert_eq!(
            to_draw(short),
            (0..7).collect::<Vec<u64>>(),
            "all of a short run"
        );
    }

    #[test]
    fn a_long_curve_is_thinned_to_a_bounded_line_that_keeps_its_end() {
        let exps = vec![ExperimentRecord {
            n: 0,
            status: Some(Status::Pruned),
            ..Default::default()
        }];
        let long: Curve = (1..=100_001).map(|i| (i as f64, 1.0 / i as f64)).collect();
        let mut curves = BTreeMap::new();
        curves.insert(0, long);
        let svg = curves_svg(&curves, &statuses(&exps), "loss").unwrap();
        let points = svg
            .split("points=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_default();
        let drawn = points.split(' ').count();
        assert!(
            (MAX_POINTS / 2..=MAX_POINTS + 1).contains(&drawn),
            "{drawn}"
        );
        assert!(svg.contains("pruned at step 100001"), "the end is kept");
    }

    #[test]
    fn curves_that_span_decades_are_drawn_on_a_log_scale() {
        let exps = vec![ExperimentRecord {
            n: 0,
            status: Some(Status::Baseline),
            ..Default::default()
        }];
        let mut curves = BTreeMap::new();
        curves.insert(
            0,
            (1..=30).map(|i| (i as f64, 2.0 * 0.8f64.powi(i))).collect(),
        );
        let svg = curves_svg(&curves, &statuses(&exps), "loss").unwrap();
        assert!(svg.contains("loss by step, log scale"), "{svg}");
        assert!(svg.contains("stroke=\"#eee\""), "a decade's line: {svg}");
        curves.insert(0, vec![(1.0, 2.0), (2.0, 1.0)]);
        let svg = curves_svg(&curves, &statuses(&exps), "loss").unwrap();
        assert!(!svg.contains("log scale"), "{svg}");
    }
}
