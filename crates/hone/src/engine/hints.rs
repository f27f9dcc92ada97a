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

/// What to tell a user whose verifier printed no objective (see
/// [`crate::verify::metrics::missing_metric_hint`]).
pub(super) use crate::verify::metrics::missing_metric_hint;
