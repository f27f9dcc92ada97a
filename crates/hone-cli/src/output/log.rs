//! `hone log`'s rows: JSON lines, autoresearch's results.tsv, or the table (with the crash
//! narrowings under the rows that caused them), each written to a buffered writer as the
//! store streams the rows.

use hone::report::{fmt_metric, tsv_row};
use hone::spec::format_duration;
use hone::store::{ExperimentRecord, RunRecord};

use super::terminal_safe;

/// How `hone log` prints its rows: JSON lines, results.tsv, or the table (with a holdout
/// column when the run has a holdout, and cost and tokens columns when it spent money).
pub enum LogFormat {
    Json,
    Tsv,
    Table { holdout: bool, paid: bool },
}

impl LogFormat {
    /// The layout asked for; the table's columns depend on the run (see [`LogFormat`]).
    pub fn new(json: bool, tsv: bool, holdout: bool, paid: bool) -> LogFormat {
        if json {
            LogFormat::Json
        } else if tsv {
            LogFormat::Tsv
        } else {
            LogFormat::Table { holdout, paid }
        }
    }
}

/// Writes one line to `w` as `out!` prints it (control characters escaped); its error (a
/// closed pipe) is the caller's signal to stop.
fn line(w: &mut dyn std::io::Write, text: &str) -> std::io::Result<()> {
    writeln!(w, "{}", terminal_safe(text))
}

/// The table's optional cells between the metric and the time, header and rows alike: search
/// and sealed holdout side by side when the run has a holdout, and the money and tokens spent
/// per experiment when an LLM proposer spent any.
fn optional_cells(holdout: bool, paid: bool, holdout_cell: &str, spend: (&str, &str)) -> String {
    let mut cells = String::new();
    if holdout {
        cells.push_str(&format!("  {holdout_cell:>12}"));
    }
    if paid {
        cells.push_str(&format!("  {:>8}  {:>7}", spend.0, spend.1));
    }
    cells
}

/// A count of tokens, short (7 characters up to a trillion): `950`, `12345`, `123.4k`, `12.3M`.
fn short_tokens(n: u64) -> String {
    if n < 100_000 {
        n.to_string()
    } else if n < 1_000_000 {
        format!("{:.1}k", n as f64 / 1e3)
    } else if n < 1_000_000_000 {
        format!("{:.1}M", n as f64 / 1e6)
    } else {
        format!("{:.1}G", n as f64 / 1e9)
    }
}

/// `hone log`'s header line, if its format has one, to `w`.
pub fn log_header(
    w: &mut dyn std::io::Write,
    run: &RunRecord,
    format: &LogFormat,
) -> std::io::Result<()> {
    match *format {
        LogFormat::Json => Ok(()),
        LogFormat::Tsv => line(w, &format!("commit\t{}\tstatus\tdescription", run.metric)),
        LogFormat::Table { holdout, paid } => {
            let h_head = optional_cells(holdout, paid, "holdout", ("cost", "tokens"));
            line(
                w,
                &format!(
                    "{:>4}  {:<9}  {:>12}{h_head}  {:>8}  {:<10}  description",
                    "#", "status", run.metric, "time", "commit"
                ),
            )
        }
    }
}

/// One row of `hone log`, to `w`.
pub fn log_row(
    w: &mut dyn std::io::Write,
    e: &ExperimentRecord,
    format: &LogFormat,
) -> std::io::Result<()> {
    match *format {
        LogFormat::Json => line(w, &serde_json::to_string(e).unwrap_or_default()),
        LogFormat::Tsv => line(w, &tsv_row(e)),
        LogFormat::Table { holdout, paid } => {
            let commit = e
                .candidate_commit
                .as_deref()
                .map(|c| &c[..c.len().min(10)])
                .unwrap_or("-");
            // Tokens with no money: the agent reports no cost (or the model has no price).
            let cost = if e.cost_usd == 0.0 && e.tokens > 0 {
                "-".to_string()
            } else {
                format!("${:.4}", e.cost_usd)
            };
            let tokens = short_tokens(e.tokens);
            let h = optional_cells(holdout, paid, &fmt_metric(e.holdout), (&cost, &tokens));
            line(
                w,
                &format!(
                    "{:>4}  {:<9}  {:>12}{h}  {:>8}  {:<10}  {}",
                    e.n,
                    e.status().as_str(),
                    fmt_metric(e.objective),
                    format_duration(std::time::Duration::from_millis(e.total_ms)),
                    commit,
                    described(e)
                ),
            )
        }
    }
}

/// A row's last column: the description, and for a failure or a pruned run why (cut at a
/// word: a pruned run's reason says its value and the bar first).
fn described(e: &ExperimentRecord) -> String {
    let description = super::one_line(&e.description);
    let failed = e.status().is_failure()
        || matches!(
            e.status(),
            hone::store::Status::Aborted | hone::store::Status::Pruned
        );
    if !failed || e.reason.trim().is_empty() {
        return description.into_owned();
    }
    let why = hone::util::cut_at_word(&super::one_line(e.reason.trim()), 100);
    if description.trim().is_empty() {
        why
    } else {
        format!("{description} · {why}")
    }
}

/// Under experiment `n`'s row of `hone log`'s table: where crashes narrowed a knob's explored
/// range once it finished (`narrowed`: from [`hone::propose::optimizer::narrowings`], sorted).
pub fn log_narrowings(
    w: &mut dyn std::io::Write,
    n: u64,
    narrowed: &[(u64, hone::propose::knobs::feasible::Narrowing)],
) -> std::io::Result<()> {
    let from = narrowed.partition_point(|(at, _)| *at < n); // a binary search
    for (_, x) in narrowed[from..].iter().take_while(|(at, _)| *at == n) {
        line(w, &format!("      feasibility: {}", x.describe()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn token_counts_fit_their_column() {
        for (n, shown) in [
            (0, "0"),
            (99_999, "99999"),
            (123_456, "123.5k"),
            (12_345_678, "12.3M"),
            (u64::MAX, "18446744073.7G"),
        ] {
            assert_eq!(super::short_tokens(n), shown);
        }
        assert!(super::short_tokens(999_999_999).len() <= 7);
    }
}
