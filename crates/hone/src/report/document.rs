//! `hone report`: a markdown summary and a self-contained HTML page (inline CSS and the
//! progress plot as inline SVG; nothing fetched from anywhere).

use std::fmt::Write as _;

use super::{fmt_metric, plot, summarize, Summary};
use crate::meta::stats::MechanismStats;
use crate::store::{ExperimentRecord, Plotted, RunRecord, Status};
use crate::util::html_escape as esc;

/// The report's files (the curves plot only when experiments printed progress).
pub struct Report {
    pub markdown: String,
    pub html: String,
    pub svg: String,
    pub curves: Option<String>,
}

impl Report {
    /// Adds the learning-curve plot (`[verify] progress`; pruned runs' partial curves
    /// dashed), drawn already ([`super::curves::curves_svg`]).
    pub fn with_curves_svg(mut self, svg: String) -> Report {
        let _ = writeln!(self.markdown, "\n## Curves\n\n![curves](curves.svg)");
        let _ = writeln!(self.html, "<h2>Curves</h2>\n{svg}");
        self.curves = Some(svg);
        self
    }

    /// Adds the notes the agent kept for itself between experiments (its own words, at the end
    /// of the run: what it learned, as it put it), before the list of every experiment. Text of
    /// the agent's, shown as it is and acted on by neither format: an indented code block in
    /// markdown (every line indented, so none leaves it; control characters and bidirectional
    /// overrides become spaces) and an escaped `<pre>` in HTML.
    pub fn with_agent_notes(mut self, notes: &str) -> Report {
        let notes = notes.trim();
        if notes.is_empty() {
            return self;
        }
        const TITLE: &str = "The agent's notes (its own words, as the run ended)";
        let quoted: String = notes
            .lines()
            .map(|l| {
                let literal: String = l
                    .chars()
                    .map(|c| if c.is_control() || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') { ' ' } else { c })
                    .collect();
                format!("    {literal}\n")
            })
            .collect();
        let md = format!("\n## {TITLE}\n\n{quoted}");
        let html = format!("<h2>{TITLE}</h2>\n<pre>{}</pre>\n", esc(notes));
        insert_before(&mut self.markdown, "\n## Experiments\n", &md);
        insert_before(&mut self.html, "<h2>Experiments</h2>", &html);
        self
    }
}

/// `text` put into `doc` before the first `marker` (at the end when there is none).
fn insert_before(doc: &mut String, marker: &str, text: &str) {
    let at = doc.find(marker).unwrap_or(doc.len());
    doc.insert_str(at, text);
}

/// A keep and how much it gained over the previous best.
struct Gain<'a> {
    e: &'a dyn Plotted,
    delta: f64,
}

fn gains<P: Plotted>(exps: &[P], minimize: bool) -> Vec<Gain<'_>> {
    let mut prev: Option<f64> = None;
    let mut out = Vec::new();
    for e in exps {
        match (e.status(), e.objective()) {
            (Status::Baseline, Some(v)) => prev = Some(v),
            (Status::Keep, Some(v)) => {
                if let Some(p) = prev {
                    let delta = if minimize { p - v } else { v - p };
                    // A simplification kept within the noise is no improvement; nor is a keep
                    // of a parallel run decided before a lower number (its gain was over an
                    // older best).
                    if delta > 0.0 {
                        out.push(Gain { e, delta });
                    }
                }
                prev = Some(v);
            }
            _ => {}
        }
    }
    out.sort_by(|a, b| b.delta.total_cmp(&a.delta));
    out
}

fn md_cell(s: &str) -> String {
    md_text(s)
}

/// Agent-written (or agent-influenced) text as literal markdown text, for a table cell or a
/// list item: `&` and `<` become entities as in HTML (no tag or comment survives), the
/// characters that open links, images, code spans and emphasis are backslash-escaped, `|`
/// cannot end a cell, and line breaks, other control characters and bidirectional overrides
/// become spaces (so nothing starts a line: no heading, list or quote). A bare URL stays
/// visible text. What GitHub would act on (a mention, an issue reference) is made inert
/// ([`crate::util::github_inert`]).
pub fn md_text(s: &str) -> String {
    let s = crate::util::github_inert(s);
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '~' => {
                out.push('\\');
                out.push(c);
            }
            // Controls, and the bidirectional overrides that reorder how a line reads.
            c if c.is_control()
                || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') =>
            {
                out.push(' ')
            }
            // Quotes mean nothing in markdown text, nor does `>` where no line starts (and no
            // tag can open without `<`): they stay as they are (`LR 0.1 -> 0.2` reads as
            // written).
            '"' | '\'' | '>' => out.push(c),
            c => crate::util::push_html_escaped(&mut out, c),
        }
    }
    out
}

/// Renders the report of a run.
pub fn render(run: &RunRecord, exps: &[ExperimentRecord]) -> Report {
    render_with(run, exps, &[])
}

/// One row per mechanism of the outer loop, for both formats: name, what its hooks did, and
/// whether it was inert.
fn mechanism_rows(mechs: &[MechanismStats]) -> Vec<[String; 7]> {
    mechs
        .iter()
        .map(|m| {
            let calls: u64 = m.calls.values().sum();
            [
                m.name.clone(),
                calls.to_string(),
                m.guided.to_string(),
                m.suggested.to_string(),
                format!("{} / {}", m.rejected, m.modified),
                m.keeps_after_guidance.to_string(),
                if m.inert {
                    "inert".into()
                } else if m.effective() > 0 {
                    format!("{} effects", m.effective())
                } else {
                    "no effect yet".into()
                },
            ]
        })
        .collect()
}

const MECH_HEAD: [&str; 7] = [
    "mechanism",
    "hook calls",
    "guided",
    "suggested",
    "rejected / modified",
    "keeps after its guidance",
    "verdict",
];

/// Keeps labelled on the report's plot at most (the biggest gains and the best), so that a
/// run with hundreds of keeps stays readable.
pub const LABELS: usize = 20;

/// What the report shows of a run's experiments besides its summary: `marked` holds every
/// baseline and keep, in order (other experiments among them are passed over, so the plot's
/// rows from [`crate::store::Store::plot_points`] will do); `holdout` those with a holdout
/// value; `listed` the experiments the table lists, the newest of the run, and `left_out` how
/// many older ones it does not list.
pub struct Contents<'a, P: Plotted = ExperimentRecord> {
    pub marked: &'a [P],
    pub holdout: &'a [ExperimentRecord],
    pub listed: &'a [ExperimentRecord],
    pub left_out: u64,
    /// The progress plot (SVG).
    pub svg: String,
}

/// What both formats show, worked out once from the run.
struct View<'a> {
    run: &'a RunRecord,
    listed: &'a [ExperimentRecord],
    left_out: u64,
    facts: Vec<(String, String)>,
    gains: Vec<Gain<'a>>,
    holdout: &'a [ExperimentRecord],
    mech_rows: Vec<[String; 7]>,
    learned: super::learned::Learned,
}

/// The report, with a section on the outer loop's mechanisms when it ran (`mechs` from
/// `crate::meta::stats::compute`).
pub fn render_with(run: &RunRecord, exps: &[ExperimentRecord], mechs: &[MechanismStats]) -> Report {
    render_summarized(run, exps, &summarize(run, exps), mechs)
}

/// [`render_with`] with the run's summary worked out already, from `exps` as
/// [`crate::store::Store::experiment_outlines`] reads them (all the report shows of each
/// experiment) and the baseline and best read whole ([`super::summarize_parts`]): the same
/// report, without reading every record whole.
pub fn render_summarized(
    run: &RunRecord,
    exps: &[ExperimentRecord],
    s: &Summary,
    mechs: &[MechanismStats],
) -> Report {
    let minimize = run.direction == crate::verify::Direction::Minimize;
    let holdout: Vec<ExperimentRecord> = exps
        .iter()
        .filter(|e| e.holdout.is_some())
        .cloned()
        .collect();
    let contents = Contents {
        marked: exps,
        holdout: &holdout,
        listed: exps,
        left_out: 0,
        svg: plot::progress_svg_labelled(exps, &run.metric, minimize, &plot_title(run, s), LABELS),
    };
    render_contents(run, s, mechs, contents)
}

/// The plot's title: the run and how far it moved its metric.
pub fn plot_title(run: &RunRecord, s: &Summary) -> String {
    let change = super::change_suffix(s);
    format!(
        "run {}: {} {} → {}{change}",
        run.tag,
        run.metric,
        fmt_metric(s.baseline),
        fmt_metric(s.best)
    )
}

/// The report of a run from its summary and what it shows of its experiments (read whole, or
/// by bounded queries: [`super::stored`]).
pub fn render_contents<P: Plotted>(
    run: &RunRecord,
    s: &Summary,
    mechs: &[MechanismStats],
    c: Contents<'_, P>,
) -> Report {
    let minimize = run.direction == crate::verify::Direction::Minimize;
    let change = super::change_suffix(s);
    let view = View {
        run,
        listed: c.listed,
        left_out: c.left_out,
        facts: facts(run, s, &change),
        gains: gains(c.marked, minimize),
        holdout: c.holdout,
        mech_rows: mechanism_rows(mechs),
        learned: super::learned::learned(c.listed, minimize, s.best_experiment),
    };
    Report {
        markdown: markdown(&view),
        html: html(&view, &c.svg),
        svg: c.svg,
        curves: None,
    }
}

/// The facts at the top of the report, shared by both formats: what was measured, how far it
/// went, how often a candidate was kept, what it cost and why it stopped.
fn facts(run: &RunRecord, s: &Summary, change: &str) -> Vec<(String, String)> {
    // Candidates judged: the counted experiments but the baseline.
    let candidates = s.counted().saturating_sub(s.count(Status::Baseline));
    let keeps = s.counts.get("keep").copied().unwrap_or(0);
    let keep_rate = if candidates > 0 {
        keeps as f64 / candidates as f64 * 100.0
    } else {
        0.0
    };
    let counts: Vec<String> = Status::ALL
        .iter()
        .filter_map(|st| s.counts.get(st.as_str()).map(|c| format!("{st} {c}")))
        .collect();
    let hours = |secs: f64| crate::spec::format_duration(std::time::Duration::from_secs_f64(secs));
    let mut facts: Vec<(String, String)> = vec![
        (
            "metric".into(),
            format!("{} ({})", run.metric, run.direction),
        ),
        (
            "baseline → best".into(),
            format!(
                "{} → {}{change}",
                fmt_metric(s.baseline),
                fmt_metric(s.best)
            ),
        ),
        (
            "best experiment".into(),
            s.best_experiment
                .map(|n| format!("#{n}: {}", s.best_description.clone().unwrap_or_default()))
                .unwrap_or_else(|| "-".into()),
        ),
    ];
    if let Some(d) = &s.best_vs_baseline {
        facts.push(("best vs baseline".into(), d.clone()));
    }
    facts.extend([
        (
            "experiments".into(),
            format!("{} ({})", s.experiments, counts.join(", ")),
        ),
        (
            "keep rate".into(),
            format!("{keep_rate:.1}% of {candidates} candidates"),
        ),
        (
            "loop time / verifier time".into(),
            format!("{} / {}", hours(s.active_seconds), hours(s.verify_seconds)),
        ),
        (
            "cost".into(),
            match s.tokens.filter(|t| *t > 0) {
                Some(t) => format!("${:.4}, {t} tokens", s.cost_usd),
                None => format!("${:.4}", s.cost_usd),
            },
        ),
        (
            "stopped".into(),
            s.stop_reason
                .clone()
                .unwrap_or_else(|| "still running or interrupted".into()),
        ),
    ]);
    if s.holdout_baseline.is_some() || s.holdout_best.is_some() {
        facts.push((
            "holdout (sealed)".into(),
            format!(
                "{} → {}",
                fmt_metric(s.holdout_baseline),
                fmt_metric(s.holdout_best)
            ),
        ));
    }
    facts
}

/// A table both formats show: the section's title, the column heads and the rows' cells (text
/// as it reads: each format escapes it, and rows are made as they are written), and which
/// column, if any, holds an experiment's status (the HTML colours it by class).
struct Table<'a> {
    title: &'static str,
    /// A line under the title (what the table leaves out).
    note: Option<String>,
    head: Vec<String>,
    rows: Box<dyn Iterator<Item = Vec<String>> + 'a>,
    status_column: Option<usize>,
}

/// The report's tables after its facts: the top improvements, search vs holdout and the
/// mechanisms (those two when there is something to show), then every experiment.
fn tables<'a>(view: &'a View) -> Vec<Table<'a>> {
    let metric = &view.run.metric;
    let heads = |h: &[&str]| h.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut tables = vec![Table {
        title: "Top improvements",
        note: view
            .gains
            .is_empty()
            .then(|| "none yet: no candidate has beaten the baseline".to_string()),
        head: heads(&["#", "gain over the previous best", metric, "description"]),
        rows: Box::new(view.gains.iter().take(10).map(|g| {
            let (n, delta) = (g.e.n().to_string(), crate::util::fmt_signed(g.delta));
            vec![
                n,
                delta,
                fmt_metric(g.e.objective()),
                g.e.description().to_string(),
            ]
        })),
        status_column: None,
    }];
    // Worked from the listed experiments: above the table when that is the whole run (so
    // everything above it covers the whole run), after it when the listing is the newest.
    if view.left_out == 0 {
        learned_tables(view, &mut tables);
    }
    if !view.holdout.is_empty() {
        tables.push(Table {
            title: "Search vs holdout",
            note: None,
            head: heads(&["#", "status", "search", "holdout"]),
            rows: Box::new(view.holdout.iter().map(|e| {
                let (n, status) = (e.n.to_string(), e.status().to_string());
                vec![n, status, fmt_metric(e.objective), fmt_metric(e.holdout)]
            })),
            status_column: Some(1),
        });
    }
    if !view.mech_rows.is_empty() {
        tables.push(Table {
            title: "Mechanisms (outer loop)",
            note: None,
            head: heads(&MECH_HEAD),
            rows: Box::new(view.mech_rows.iter().map(|r| r.to_vec())),
            status_column: None,
        });
    }
    let listed = view.listed.len();
    tables.push(Table {
        title: "Experiments",
        note: (view.left_out > 0).then(|| {
            format!(
                "The newest {listed} of {} experiments (#{} on); `hone report --all` lists every one, and `hone log` prints them all.",
                view.left_out + listed as u64,
                view.listed.first().map_or(0, |e| e.n)
            )
        }),
        head: heads(&["#", "status", metric, "description", "why"]),
        rows: Box::new(view.listed.iter().map(|e| {
            // The reason whole up to a word's end (a prune's bar is in its second half).
            let why = crate::util::cut_at_word(&crate::propose::prompt::sanitize(&e.reason, 600), 280);
            let (n, status) = (e.n.to_string(), e.status().to_string());
            vec![
                n,
                status,
                fmt_metric(e.objective),
                e.description.clone(),
                why,
            ]
        })),
        status_column: Some(1),
    });
    if view.left_out > 0 {
        learned_tables(view, &mut tables);
    }
    tables
}

/// The tables of what the run learned ([`super::learned`]), each where it has rows.
fn learned_tables<'a>(view: &'a View, tables: &mut Vec<Table<'a>>) {
    use super::learned::{FAILURE_HEAD, KNOB_HEAD, PRUNING_HEAD};
    let l = &view.learned;
    let of_listed = (view.left_out > 0).then(|| {
        format!(
            "From the newest {} experiments (`hone report --all` reads every one).",
            view.listed.len()
        )
    });
    let heads = |h: &[&str]| h.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    for (title, head, rows) in [
        (
            "Knobs: where they were tried, where the best runs sit",
            &KNOB_HEAD[..],
            &l.knobs,
        ),
        ("Failures by cause", &FAILURE_HEAD[..], &l.failures),
        ("Pruning", &PRUNING_HEAD[..], &l.pruning),
    ] {
        if rows.is_empty() {
            continue;
        }
        tables.push(Table {
            title,
            note: of_listed.clone(),
            head: heads(head),
            rows: Box::new(rows.iter().cloned()),
            status_column: (title == "Failures by cause").then_some(1),
        });
    }
}

/// The markdown report: the facts, then the tables.
fn markdown(view: &View) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# hone run {}\n\n![progress](progress.svg)\n",
        view.run.tag
    );
    for (k, v) in &view.facts {
        let _ = writeln!(md, "- **{k}**: {}", md_cell(v));
    }
    for table in tables(view) {
        let _ = writeln!(md, "\n## {}\n", table.title);
        if let Some(note) = &table.note {
            let _ = writeln!(md, "{note}\n");
        }
        let _ = writeln!(
            md,
            "| {} |\n|{}",
            table.head.join(" | "),
            "---|".repeat(table.head.len())
        );
        for row in table.rows {
            let cells: Vec<String> = row.iter().map(|c| md_cell(c)).collect();
            let _ = writeln!(md, "| {} |", cells.join(" | "));
        }
    }
    md
}

/// The HTML page: inline style, the plot, then the same sections as the markdown.
fn html(view: &View, svg: &str) -> String {
    let run = view.run;
    let mut html = String::new();
    let _ = writeln!(
        html,
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>hone run {}</title><style>\
         body{{font-family:sans-serif;max-width:1060px;margin:2em auto;color:#222}}table{{border-collapse:collapse;margin:1em 0}}\
         td,th{{border:1px solid #ddd;padding:3px 8px;text-align:left;font-size:13px}}th{{background:#f4f4f4}}\
         .keep{{color:#2e7d32}}.crash,.timeout{{color:#c62828}}.violation,.rejected,.invalid{{color:#ef6c00}}.discard{{color:#777}}.pruned{{color:#6d4c41}}\
         </style></head><body>",
        esc(&run.tag)
    );
    let _ = writeln!(html, "<h1>hone run {}</h1>\n{svg}\n<table>", esc(&run.tag));
    for (k, v) in &view.facts {
        let _ = writeln!(html, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
    }
    let _ = writeln!(html, "</table>");
    for table in tables(view) {
        let head: Vec<String> = table
            .head
            .iter()
            .map(|h| format!("<th>{}</th>", esc(h)))
            .collect();
        let _ = writeln!(html, "<h2>{}</h2>", table.title);
        if let Some(note) = &table.note {
            let _ = writeln!(html, "<p>{}</p>", esc(note));
        }
        let _ = writeln!(html, "<table><tr>{}</tr>", head.concat());
        for row in table.rows {
            let cells: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(i, c)| match table.status_column {
                    Some(col) if col == i => format!("<td class=\"{0}\">{0}</td>", esc(c)),
                    _ => format!("<td>{}</td>", esc(c)),
                })
                .collect();
            let _ = writeln!(html, "<tr>{}</tr>", cells.concat());
        }
        let _ = writeln!(html, "</table>");
    }
    let _ = writeln!(html, "</body></html>");
    html
}

#[cfg(test)]
mod notes_tests {
    use super::Report;

    #[test]
    fn the_agents_notes_stand_before_the_experiments_as_literal_text() {
        let report = Report {
            markdown: "# r\n\n## Top improvements\n\n## Experiments\n\n| # |\n".into(),
            html: "<h1>r</h1><h2>Experiments</h2><table></table></body></html>".into(),
            svg: String::new(),
            curves: None,
        }
        .with_agent_notes("LR above 0.5 diverges.\n# not a heading <script>x</script>\n");
        let md = &report.markdown;
        let notes = md.find("## The agent's notes").unwrap();
        assert!(notes < md.find("## Experiments").unwrap(), "{md}");
        assert!(
            md.contains("\n\n    LR above 0.5 diverges.\n    # not a heading <script>x</script>\n"),
            "{md}"
        );
        assert!(
            report
                .html
                .contains("<pre>LR above 0.5 diverges.\n# not a heading &lt;script&gt;"),
            "{}",
            report.html
        );
        assert!(report.html.find("<pre>").unwrap() < report.html.find("<h2>Experiments").unwrap());
        // None, or only blank lines: nothing added.
        let r = Report {
            markdown: "x".into(),
            html: "y".into(),
            svg: String::new(),
            curves: None,
        }
        .with_agent_notes(" \n");
        assert_eq!((r.markdown.as_str(), r.html.as_str()), ("x", "y"));
    }
}

#[cfg(test)]
mod tests {
    use super::md_text;

    #[test]
    fn agent_markup_becomes_literal_text() {
        let s = md_text(
            "<img src=x onerror=alert(1)> [a](http://e.x) ![i](http://e.x/i.png) `c` *e* a|b\n# h",
        );
        assert_eq!(
            s,
            "&lt;img src=x onerror=alert(1)> \\[a\\](http://e.x) !\\[i\\](http://e.x/i.png) \\`c\\` \\*e\\* a\\|b # h"
        );
        assert_eq!(
            md_text("plain words, 1.5 → 2 (+3%)"),
            "plain words, 1.5 → 2 (+3%)"
        );
        assert_eq!(md_text("a\u{1b}[2Jb"), "a \\[2Jb");
        assert_eq!(md_text("x\u{202e}gnp.exe"), "x gnp.exe");
    }
}
