//! The progress plot, as a self-contained SVG (no fonts or network needed to make it): every
//! experiment on the x axis, discards as faint grey points, keeps as green points labelled
//! with their description, the running best as a step line, and crashes, timeouts and other
//! failures marked along the axis. The y range follows the improvements, as autoresearch's
//! progress plot does: the baseline near the top, the best near the bottom (for a minimized
//! metric), and far-off discards clipped to the edge.
//!
//! Its size does not grow with the run: past [`MAX_POINTS`] discards, each pixel column keeps
//! only its highest, median and lowest discard (the cloud's envelope and its middle); the
//! running best is drawn through the points where it changes; failures are one mark per column
//! and kind. Every keep and the baseline are always drawn. From [`BLOCKS_FROM`] experiments on,
//! experiments go to columns by blocks of [`PLOT_BLOCK`] (a block's column is that of its
//! first), and a column's discards are picked among its blocks' lowest, median and highest:
//! what the store keeps of each block as the run goes, so that a long run's plot is read
//! without reading every experiment.

use std::fmt::Write as _;

use crate::store::{
    envelope, ExperimentRecord, PlotColumns, Plotted, Status, PLOT_BLOCK, TITLE_CHARS,
};
use crate::util::{cut_chars as short, html_escape as esc, push_fixed, push_html_escaped_str};

const W: f64 = 1000.0;
const H: f64 = 520.0;
const LEFT: f64 = 100.0;
const RIGHT: f64 = 110.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;

/// Discards drawn one by one up to this many; beyond, the envelope per pixel column.
pub const MAX_POINTS: usize = 1500;

/// From this last experiment's number on, experiments go to columns by block (a column then
/// holds 20 experiments or more: a block of 16 is within one column or two).
pub const BLOCKS_FROM: u64 = 16_384;

/// The plot's pixel columns, for [`crate::store::Store::plot_points`]: the experiments it
/// returns draw the same plot as the whole run would (every keep and the baseline, the running
/// best, the discards each column draws, each column's first failure of each kind).
pub const COLUMNS: PlotColumns = PlotColumns {
    offset: LEFT,
    span: W - LEFT - RIGHT,
    all_below: MAX_POINTS as u64,
    blocks_from: BLOCKS_FROM,
};

/// The value range shown: (low, high), finite and with a finite span whatever the values.
pub fn y_range(baseline: f64, best: f64, values: &[f64]) -> (f64, f64) {
    let (lo, hi) = y_range_unbounded(baseline, best, values);
    finite_range(lo, hi)
}

/// How many times the baseline and the best must differ for the value axis to be drawn on a
/// log scale (one and a half decades): on a linear one, a run that went from 2.0 to 0.004 has
/// every later keep in the bottom few pixels.
pub const LOG_SCALE_RATIO: f64 = 31.6;

/// The value range of a log-scaled axis, where every value is positive and the baseline and
/// the best differ [`LOG_SCALE_RATIO`] times or more: as [`y_range`]'s, in decades. `None`:
/// a linear axis.
pub fn log_scale(baseline: f64, best: f64, values: &[f64]) -> Option<(f64, f64)> {
    let positive = |v: f64| v.is_finite() && v > 0.0;
    if !(positive(baseline) && positive(best) && values.iter().all(|v| positive(*v))) {
        return None;
    }
    let (lo, hi) = (baseline.min(best).ln(), baseline.max(best).ln());
    let span = hi - lo;
    if span < LOG_SCALE_RATIO.ln() {
        return None;
    }
    // Room above the worse end for discards, a little below the better end; within the
    // positive floats' normal range (a value of 1e-300 or 1e300 is drawn at the edge).
    let (below, above) = if best < baseline {
        (0.15, 0.35)
    } else {
        (0.35, 0.15)
    };
    let (floor, ceiling) = (1e-300_f64.ln(), 1e300_f64.ln());
    let range = (
        (lo - below * span).clamp(floor, ceiling).exp(),
        (hi + above * span).clamp(floor, ceiling).exp(),
    );
    (range.0 < range.1).then_some(range)
}

/// Round values for a log-scaled axis between `lo` and `hi` (positive, finite): the powers of
/// ten, every k-th of them so that at most about ten are drawn, and 2 and 5 times them where
/// the range spans fewer than three decades.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi.is_finite() && lo < hi) {
        return vec![lo, hi];
    }
    // Within 1e-300..1e300 (see `log_scale`): the exponents fit.
    let first = lo.log10().floor().clamp(-320.0, 320.0) as i32;
    let last = hi.log10().ceil().clamp(-320.0, 320.0) as i32;
    let multiples: &[f64] = if last - first < 3 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0]
    };
    let every = usize::try_from((last - first) / 10 + 1).unwrap_or(1);
    (first..=last)
        .step_by(every)
        .flat_map(|e| multiples.iter().map(move |m| m * 10f64.powi(e)))
        .filter(|v| (lo..=hi).contains(v))
        .collect()
}

/// Keeps a plot's range within a quarter of the float range each way, so that its span and
/// every tick stay finite: values near ±1.8e308 are drawn at the plot's edge, never as NaN.
fn finite_range(lo: f64, hi: f64) -> (f64, f64) {
    const LIMIT: f64 = f64::MAX / 4.0;
    let (lo, hi) = (lo.clamp(-LIMIT, LIMIT), hi.clamp(-LIMIT, LIMIT));
    if hi > lo {
        (lo, hi)
    } else {
        let pad = (lo.abs() * 0.05).max(1e-6);
        (lo - pad, hi + pad)
    }
}

/// The value range the values ask for (it may overflow: see [`y_range`]).
fn y_range_unbounded(baseline: f64, best: f64, values: &[f64]) -> (f64, f64) {
    let span = (baseline - best).abs();
    if span > 0.0 {
        let (lo, hi) = (baseline.min(best), baseline.max(best));
        // Room above the worse end for discards, a little below the better end.
        if best < baseline {
            (lo - 0.15 * span, hi + 0.35 * span)
        } else {
            (lo - 0.35 * span, hi + 0.15 * span)
        }
    } else {
        let (mut lo, mut hi) = values
            .iter()
            .fold((baseline, baseline), |(a, b), v| (a.min(*v), b.max(*v)));
        if hi - lo < 1e-12 {
            let pad = (baseline.abs() * 0.05).max(1e-6);
            lo -= pad;
            hi += pad;
        }
        (lo, hi)
    }
}

/// Renders the plot. `minimize` says which way is better; `title` goes on top.
pub fn progress_svg<P: Plotted>(exps: &[P], metric: &str, minimize: bool, title: &str) -> String {
    progress_svg_labelled(exps, metric, minimize, title, usize::MAX)
}

/// The keeps worth a label when there is room for `max`: those that gained the most over the
/// best before them, and always the last one (the current best).
fn labelled_keeps<P: Plotted>(exps: &[P], minimize: bool, max: usize) -> Vec<u64> {
    let mut prev: Option<f64> = None;
    let mut gains = Vec::new();
    for e in exps {
        let Some(v) = e.objective() else { continue };
        match e.status() {
            Status::Baseline => prev = Some(v),
            Status::Keep => {
                let gain = prev.map(|p| if minimize { p - v } else { v - p });
                gains.push((e.n(), gain.unwrap_or(0.0)));
                prev = Some(v);
            }
            _ => {}
        }
    }
    if gains.len() <= max {
        return gains.into_iter().map(|(n, _)| n).collect();
    }
    let last = gains.last().map(|(n, _)| *n);
    gains.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut chosen: Vec<u64> = gains
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| Some(*n) != last)
        .take(max.saturating_sub(1))
        .collect();
    chosen.extend(last);
    chosen
}

/// What a plot draws, worked out once from its experiments.
struct Layout<'a, P> {
    labelled: Vec<u64>,
    measured: Vec<&'a P>,
    frame: Frame,
    steps: Vec<(u64, f64)>,
}

/// The plot's layout; `None` without a measured baseline.
fn layout<P: Plotted>(exps: &[P], minimize: bool, max_labels: usize) -> Option<Layout<'_, P>> {
    let labelled = labelled_keeps(exps, minimize, max_labels);
    let measured: Vec<&P> = exps
        .iter()
        .filter(|e| {
            matches!(
                e.status(),
                Status::Baseline | Status::Keep | Status::Discard
            ) && e.objective().is_some()
        })
        .collect();
    let base = exps
        .iter()
        .find(|e| e.status() == Status::Baseline)
        .and_then(|e| e.objective())?;
    let (best, steps) = running_best(exps, base, minimize);
    let values: Vec<f64> = measured.iter().filter_map(|e| e.objective()).collect();
    let log = log_scale(base, best, &values);
    let (lo, hi) = match log {
        Some(range) => range,
        None => y_range(base, best, &values),
    };
    let frame = Frame {
        lo,
        hi,
        log: log.is_some(),
        n_max: exps.last().map(|e| e.n()).unwrap_or(0).max(1) as f64,
        plot_bottom: H - BOTTOM,
    };
    Some(Layout {
        labelled,
        measured,
        frame,
        steps,
    })
}

/// [`progress_svg`] with at most `max_labels` keeps labelled (the biggest gains and the
/// current best), so that a run with hundreds of keeps stays readable; the baseline is always
/// labelled.
pub fn progress_svg_labelled<P: Plotted>(
    exps: &[P],
    metric: &str,
    minimize: bool,
    title: &str,
    max_labels: usize,
) -> String {
    // About what a point takes, made once: a long run's plot is megabytes.
    let mut svg = String::with_capacity(4096 + exps.len() * 150);
    svg_header(&mut svg, title);
    let Some(l) = layout(exps, minimize, max_labels) else {
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="middle">no measured baseline yet</text></svg>"#,
            W / 2.0,
            H / 2.0
        );
        return svg;
    };
    svg_axes(&mut svg, &l.frame, metric, minimize);
    svg_best_line(&mut svg, &l.frame, &l.steps);
    svg_points(&mut svg, &l.frame, &l.measured, &l.labelled);
    svg_failures(&mut svg, &l.frame, exps);
    svg.push_str("</svg>\n");
    svg
}

/// The experiments whose description or reason [`progress_svg_labelled`] shows: the discards
/// it draws, the keeps and the baseline, the first failure of each kind per pixel column. A
/// caller holding only numbers, statuses and values (a run of 100,000 experiments) reads the
/// texts of these alone; in order.
pub fn texts_shown<P: Plotted>(exps: &[P], minimize: bool, max_labels: usize) -> Vec<u64> {
    let Some(l) = layout(exps, minimize, max_labels) else {
        return Vec::new();
    };
    let mut out: Vec<u64> = drawn_discards(&l.frame, &l.measured)
        .iter()
        .map(|e| e.n())
        .collect();
    out.extend(
        l.measured
            .iter()
            .filter(|e| matches!(e.status(), Status::Keep | Status::Baseline))
            .map(|e| e.n()),
    );
    out.extend(failure_marks(&l.frame, exps).iter().map(|(e, _, _)| e.n()));
    out.sort_unstable();
    out.dedup();
    out
}

/// The SVG's opening, its white background and the title on top.
fn svg_header(svg: &mut String, title: &str) {
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="28" font-size="16" text-anchor="middle">{}</text>"#,
        W / 2.0,
        esc(title)
    );
}

/// The running best after each experiment (keeps and the baseline move it): the final best,
/// and one `(n, best)` step per experiment.
fn running_best<P: Plotted>(exps: &[P], base: f64, minimize: bool) -> (f64, Vec<(u64, f64)>) {
    let best_of = |a: f64, b: f64| if minimize { a.min(b) } else { a.max(b) };
    let mut best = base;
    let mut steps = Vec::new();
    for e in exps {
        if matches!(e.status(), Status::Keep | Status::Baseline) {
            if let Some(v) = e.objective() {
                best = if e.status() == Status::Baseline {
                    v
                } else {
                    best_of(best, v)
                };
            }
        }
        steps.push((e.n(), best));
    }
    (best, steps)
}

/// Where the plot's data goes: the value range shown and the last experiment's number.
struct Frame {
    lo: f64,
    hi: f64,
    /// Values drawn on a log scale ([`log_scale`]).
    log: bool,
    n_max: f64,
    plot_bottom: f64,
}

impl Frame {
    /// The x of experiment `n`.
    fn x(&self, n: u64) -> f64 {
        LEFT + (n as f64 / self.n_max) * (W - LEFT - RIGHT)
    }

    /// The pixel column experiment `n` is grouped in (by its block's first in a long run).
    fn column(&self, n: u64) -> i64 {
        COLUMNS.column(n, self.n_max)
    }

    /// The y of value `v`, clipped to the plot.
    fn y(&self, v: f64) -> f64 {
        let t = if self.log {
            // A value at or below zero (none is, or the axis would be linear) at the bottom.
            ((v.max(f64::MIN_POSITIVE).ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln()))
                .clamp(0.0, 1.0)
        } else {
            ((v - self.lo) / (self.hi - self.lo)).clamp(0.0, 1.0)
        };
        // Higher values up.
        self.plot_bottom - t * (self.plot_bottom - TOP)
    }
}

/// Axes, grid, ticks and the axis labels.
fn svg_axes(svg: &mut String, f: &Frame, metric: &str, minimize: bool) {
    let (lo, hi, n_max, plot_bottom) = (f.lo, f.hi, f.n_max, f.plot_bottom);
    let (ticks, decimals) = if f.log {
        (log_ticks(lo, hi), None)
    } else {
        nice_ticks(lo, hi)
    };
    let _ = writeln!(svg, r##"<g stroke="#ccc">"##);
    for &v in &ticks {
        let yy = f.y(v);
        let _ = writeln!(
            svg,
            r#"<line x1="{LEFT}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}"/>"#,
            W - RIGHT
        );
    }
    let _ = writeln!(svg, "</g>");
    for &v in &ticks {
        let label = match decimals {
            Some(d) => format!("{v:.d$}"),
            None => crate::report::fmt_metric(Some(v)),
        };
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{label}</text>"#,
            LEFT - 6.0,
            f.y(v) + 4.0,
        );
    }
    let step = ((n_max / 10.0).ceil() as u64).max(1);
    let mut t = 0;
    while t as f64 <= n_max {
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{t}</text>"#,
            f.x(t),
            plot_bottom + 18.0
        );
        t += step;
    }
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">experiment</text>"#,
        (LEFT + W - RIGHT) / 2.0,
        H - 12.0
    );
    let _ = writeln!(
        svg,
        r#"<text x="16" y="{:.1}" text-anchor="middle" transform="rotate(-90 16 {:.1})">{} ({})</text>"#,
        (TOP + plot_bottom) / 2.0,
        (TOP + plot_bottom) / 2.0,
        esc(metric),
        match (minimize, f.log) {
            (true, false) => "lower is better",
            (false, false) => "higher is better",
            (true, true) => "lower is better, log scale",
            (false, true) => "higher is better, log scale",
        }
    );
}

/// The steps where the running best changes, the first and the last (the same step line).
fn best_changes(steps: &[(u64, f64)]) -> Vec<(u64, f64)> {
    let mut out: Vec<(u64, f64)> = Vec::new();
    for (i, &(n, b)) in steps.iter().enumerate() {
        let changed = !out.last().is_some_and(|&(_, prev)| prev == b);
        if changed || i + 1 == steps.len() {
            out.push((n, b));
        }
    }
    out
}

/// Round values for the value axis between `lo` and `hi`: the multiples of 1, 2 or 5 times
/// a power of ten that give four to nine of them, and the decimals that print them exactly
/// (`None`: too large or too small a step for fixed decimals; print them as metrics are).
fn nice_ticks(lo: f64, hi: f64) -> (Vec<f64>, Option<usize>) {
    let span = hi - lo;
    if !(span.is_finite() && span > 0.0) {
        return (vec![lo, hi], None);
    }
    let raw = span / 5.0;
    let power = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|s| span / s <= 8.0)
        .unwrap_or(10.0 * power);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    // The span gives at most nine; the bound only guards against rounding.
    let ticks: Vec<f64> = (first..=last.min(first + 12))
        .map(|k| k as f64 * step)
        .collect();
    let exponent = step.log10().floor();
    let decimals = (-6.0..=6.0)
        .contains(&exponent)
        .then(|| (-exponent).max(0.0) as usize);
    (ticks, decimals)
}

/// The running best, as a step line.
fn svg_best_line(svg: &mut String, f: &Frame, steps: &[(u64, f64)]) {
    let mut path = String::new();
    for (i, (n, b)) in best_changes(steps).iter().enumerate() {
        path.push_str(if i == 0 { "M" } else { " H" });
        push_fixed(&mut path, f.x(*n), 1);
        path.push_str(if i == 0 { "," } else { " V" });
        push_fixed(&mut path, f.y(*b), 1);
    }
    let _ = writeln!(
        svg,
        r##"<path class="best" d="{path}" fill="none" stroke="#2e7d32" stroke-width="2"/>"##
    );
}

/// The discards to draw: all of them up to [`MAX_POINTS`], else in each pixel column the
/// highest, the median and the lowest (the cloud's envelope and where most of it lies; in a
/// long run, among its blocks' own), in the order of the run.
fn drawn_discards<'a, P: Plotted>(f: &Frame, measured: &[&'a P]) -> Vec<&'a P> {
    let discards: Vec<&P> = measured
        .iter()
        .copied()
        .filter(|e| e.status() == Status::Discard && e.objective().is_some())
        .collect();
    if discards.len() <= MAX_POINTS {
        return discards;
    }
    let point = |e: &&P| (e.objective().unwrap_or(f64::NAN), e.n());
    let mut columns: std::collections::BTreeMap<i64, Vec<&P>> = std::collections::BTreeMap::new();
    if COLUMNS.by_block(f.n_max) {
        for block in discards.chunk_by(|a, b| a.n() / PLOT_BLOCK == b.n() / PLOT_BLOCK) {
            let mut block = block.to_vec();
            for i in envelope(&mut block, point) {
                columns
                    .entry(f.column(block[i].n()))
                    .or_default()
                    .push(block[i]);
            }
        }
    } else {
        for e in discards {
            columns.entry(f.column(e.n())).or_default().push(e);
        }
    }
    let mut out: Vec<&P> = Vec::new();
    for mut column in columns.into_values() {
        let picks = envelope(&mut column, point);
        out.extend(picks.into_iter().map(|i| column[i]));
    }
    out.sort_by_key(|e| e.n());
    out
}

/// Discards first (underneath), then keeps and the baseline, labelled when `labelled` says so;
/// each kind in a group that holds what its points share (their colour): a long run draws
/// thousands.
fn svg_points<P: Plotted>(svg: &mut String, f: &Frame, measured: &[&P], labelled: &[u64]) {
    let discards = drawn_discards(f, measured);
    if !discards.is_empty() {
        svg.push_str(r##"<g class="discards" fill="#9e9e9e" fill-opacity="0.5">"##);
        svg.push('\n');
    }
    for e in &discards {
        let (Some(v), Status::Discard) = (e.objective(), e.status()) else {
            continue;
        };
        let at = (f.x(e.n()), f.y(v));
        let text = short(e.description(), TITLE_CHARS);
        if (f.lo..=f.hi).contains(&v) {
            push_point(svg, at, "3", (e.n(), v), &text);
        } else {
            // Beyond the range shown: a hollow mark on its edge, not a value drawn there.
            let r = r##"3" class="offscale" fill="white" stroke="#757575"##;
            push_point(svg, at, r, (e.n(), v), &format!("(off the scale) {text}"));
        }
    }
    if !discards.is_empty() {
        svg.push_str("</g>\n");
    }
    svg.push_str(r##"<g class="keeps" fill="#2e7d32">"##);
    svg.push('\n');
    for e in measured {
        let Some(v) = e.objective() else { continue };
        if !matches!(e.status(), Status::Keep | Status::Baseline) {
            continue;
        }
        let (cx, cy) = (f.x(e.n()), f.y(v));
        push_point(svg, (cx, cy), "5", (e.n(), v), e.description());
        if e.status() == Status::Keep && !labelled.contains(&e.n()) {
            continue;
        }
        let _ = writeln!(
            svg,
            r##"<text class="label" x="{:.1}" y="{:.1}" font-size="10" fill="#1b5e20" transform="rotate(-25 {:.1} {:.1})">{}</text>"##,
            cx + 6.0,
            cy - 6.0,
            cx + 6.0,
            cy - 6.0,
            esc(&short(e.description(), 40))
        );
    }
    svg.push_str("</g>\n");
}

/// One point: a circle of radius `r` at `(x, y)`, titled `#n value: text` (`text` escaped
/// here); its colour is its group's (`r` may carry more attributes after its closing quote:
/// `3" fill="white`). Written piece by piece: a long run's plot has thousands.
fn push_point(svg: &mut String, (x, y): (f64, f64), r: &str, (n, v): (u64, f64), text: &str) {
    svg.push_str("<circle cx=\"");
    push_fixed(svg, x, 1);
    svg.push_str("\" cy=\"");
    push_fixed(svg, y, 1);
    svg.push_str("\" r=\"");
    svg.push_str(r);
    let _ = write!(svg, "\"><title>#{n} ");
    crate::report::push_metric(svg, Some(v));
    svg.push_str(": ");
    push_html_escaped_str(svg, text);
    svg.push_str("</title></circle>\n");
}

/// Failures along the axis: one mark per pixel column and kind (the first there), with its
/// mark and colour.
fn failure_marks<'a, P: Plotted>(
    f: &Frame,
    exps: &'a [P],
) -> Vec<(&'a P, &'static str, &'static str)> {
    let mut marked = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for e in exps {
        let (mark, colour) = match e.status() {
            Status::Crash => ("x", "#c62828"),
            Status::Timeout => ("t", "#c62828"),
            Status::Pruned => ("p", "#6d4c41"),
            Status::Violation | Status::Rejected | Status::Invalid => ("·", "#ef6c00"),
            _ => continue,
        };
        if marked.insert((f.column(e.n()), mark)) {
            out.push((e, mark, colour));
        }
    }
    out
}

/// Failures along the axis (see [`failure_marks`]), in a group per status (in the order of
/// its first mark) that holds what its marks share: where marks of two statuses share a
/// pixel column, the later group's is drawn over the other's.
fn svg_failures<P: Plotted>(svg: &mut String, f: &Frame, exps: &[P]) {
    let mut y = String::new();
    push_fixed(&mut y, f.plot_bottom - 3.0, 1);
    let marks = failure_marks(f, exps);
    let mut kinds: Vec<(Status, &str)> = Vec::new();
    for (e, _, colour) in &marks {
        if !kinds.iter().any(|(s, _)| *s == e.status()) {
            kinds.push((e.status(), colour));
        }
    }
    for (status, colour) in kinds {
        let _ = writeln!(
            svg,
            r#"<g class="fail {status}" text-anchor="middle" fill="{colour}">"#
        );
        for (e, mark, _) in marks.iter().filter(|m| m.0.status() == status) {
            svg.push_str("<text x=\"");
            push_fixed(svg, f.x(e.n()), 1);
            let _ = write!(svg, r#"" y="{y}">{mark}<title>#{} {status}: "#, e.n());
            push_html_escaped_str(svg, &short(e.reason(), TITLE_CHARS));
            svg.push_str("</title></text>\n");
        }
        svg.push_str("</g>\n");
    }
}

/// The text plot's size: columns at most, and rows.
const COLS: usize = 72;
const ROWS: usize = 14;

/// The same plot as text, for places that cannot show SVG (a pull request's body, a terminal):
/// one column per experiment (bucketed when there are more than 72), `*` keeps and the
/// baseline, `·` discards, `-` the running best, and failures marked under the axis (`x` crash,
/// `t` timeout, `!` violation, rejected or invalid). Higher values are up.
pub fn progress_text(exps: &[ExperimentRecord], metric: &str, minimize: bool) -> String {
    let Some(base) = exps
        .iter()
        .find(|e| e.status() == Status::Baseline)
        .and_then(|e| e.objective)
    else {
        return "no measured baseline yet\n".into();
    };
    let best_of = |a: f64, b: f64| if minimize { a.min(b) } else { a.max(b) };
    let mut best = base;
    let mut steps = Vec::new();
    let mut values = Vec::new();
    for e in exps {
        if let (Some(v), Status::Keep | Status::Baseline | Status::Discard) =
            (e.objective, e.status())
        {
            values.push(v);
            if e.status() == Status::Keep {
                best = best_of(best, v);
            }
        }
        steps.push(best);
    }
    let (lo, hi) = y_range(base, best, &values);
    let n = exps.len().max(1);
    let cols = n.min(COLS);
    let (grid, axis) = text_grid(exps, &steps, lo, hi, cols);
    text_lines(exps, metric, minimize, (lo, hi), &grid, &axis)
}

/// The text plot's cells: the grid of points and the running best, and the failure marks
/// under the axis.
fn text_grid(
    exps: &[ExperimentRecord],
    steps: &[f64],
    lo: f64,
    hi: f64,
    cols: usize,
) -> (Vec<Vec<char>>, Vec<char>) {
    let n = exps.len().max(1);
    let col = |i: usize| i * cols / n;
    let row = |v: f64| {
        let t = ((v - lo) / (hi - lo)).clamp(0.0, 1.0);
        ROWS - 1 - ((t * (ROWS - 1) as f64).round() as usize).min(ROWS - 1)
    };
    let mut grid = vec![vec![' '; cols]; ROWS];
    let mut axis = vec![' '; cols];
    for (i, b) in steps.iter().enumerate() {
        grid[row(*b)][col(i)] = '-';
    }
    // Discards first, keeps over them, so a keep is never hidden.
    for pass in 0..2 {
        for (i, e) in exps.iter().enumerate() {
            let Some(v) = e.objective else { continue };
            match (pass, e.status()) {
                (0, Status::Discard) => grid[row(v)][col(i)] = '·',
                (1, Status::Keep | Status::Baseline) => grid[row(v)][col(i)] = '*',
                _ => {}
            }
        }
    }
    for (i, e) in exps.iter().enumerate() {
        let mark = match e.status() {
            Status::Crash => 'x',
            Status::Timeout => 't',
            Status::Pruned => 'p',
            Status::Violation | Status::Rejected | Status::Invalid => '!',
            _ => continue,
        };
        axis[col(i)] = mark;
    }
    (grid, axis)
}

/// The text plot's lines: a legend, the grid with value ticks on the left, the axis, the
/// failure marks and the first and last experiment numbers.
fn text_lines(
    exps: &[ExperimentRecord],
    metric: &str,
    minimize: bool,
    (lo, hi): (f64, f64),
    grid: &[Vec<char>],
    axis: &[char],
) -> String {
    let cols = axis.len();
    let label = |v: f64| format!("{:>12}", crate::report::fmt_metric(Some(v)));
    let mut out = format!(
        "{metric} ({}), {} experiments; * keep  · discard  - best  x crash  t timeout  ! refused\n",
        if minimize {
            "lower is better"
        } else {
            "higher is better"
        },
        exps.len()
    );
    for (r, line) in grid.iter().enumerate() {
        let v = hi - (hi - lo) * (r as f64 / (ROWS - 1) as f64);
        let tick = if r == 0 || r == ROWS - 1 || r == ROWS / 2 {
            label(v)
        } else {
            " ".repeat(12)
        };
        let _ = writeln!(
            out,
            "{tick} |{}",
            line.iter().collect::<String>().trim_end()
        );
    }
    let _ = writeln!(out, "{} +{}", " ".repeat(12), "-".repeat(cols));
    let _ = writeln!(
        out,
        "{}  {}",
        " ".repeat(12),
        axis.iter().collect::<String>().trim_end()
    );
    let last = exps.last().map(|e| e.n).unwrap_or(0);
    let _ = writeln!(
        out,
        "{}  0{}{last}",
        " ".repeat(12),
        " ".repeat(cols.saturating_sub(1 + last.to_string().len()))
    );
    out
}

#[cfg(test)]
mod tests;
