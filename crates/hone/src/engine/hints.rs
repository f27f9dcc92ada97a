//! What a failed measurement tells the user: the last line a crashed program wrote, and for
//! a verifier that printed no objective, the name it printed or a `metric_regex` to set.

use std::path::Path;

/// `: <the last line of the log at path>` (its last 4 KiB, a line at most 200 characters,
/// cleaned of control characters), or nothing when the log is empty or unreadable.
pub(super) fn last_words(path: &Path) -> String {
    match crate::util::last_line_of(path) {
        Some(line) => format!(": {}", crate::propose::prompt::sanitize(&line, 200)),
        None => String::new(),
    }
}

/// What to tell a user whose verifier printed no objective: the line that mentions it, and
/// the metric name it prints (a misspelt `metric`) or a `metric_regex` that would read it.
pub(super) fn missing_metric_hint(mention: Option<&str>, metric: &str) -> String {
    let Some(line) = mention else {
        return format!(
            " (print a line `{metric}: <number>`, or set [verify] metric_regex to read it from the output)"
        );
    };
    // A printed name that holds it (`val_loss` for `val_los`): a misspelt metric.
    let lower = metric.to_ascii_lowercase();
    let printed = crate::verify::metrics::parse_line(line)
        .into_iter()
        .map(|(name, _)| name)
        .find(|name| {
            let name = name.to_ascii_lowercase();
            // The metric's own name printed (a `metric_regex` that missed it): no typo.
            name != lower && name.contains(&lower)
        });
    if let Some(name) = printed {
        return format!(
            "; a line prints `{name}`: `{line}`; if that is the metric, set in hone.toml [verify] metric = \"{name}\""
        );
    }
    match crate::verify::metrics::suggest_regex(line, metric) {
        Some(regex) => {
            let quoted = if regex.contains('\'') {
                format!("'''{regex}'''")
            } else {
                format!("'{regex}'")
            };
            format!(
                "; a line mentions it: `{line}`; to read it, set in hone.toml [verify] metric_regex = {quoted}"
            )
        }
        None => format!("; a line mentions it but holds no number after it: `{line}`"),
    }
}
