//! What the chat proposer reads of a model's answer besides its edits: the one-line
//! hypothesis that describes the change, the `NOTE:` lines it keeps for the next experiments
//! (as an agent CLI keeps `.hone/notes.md`), and the answer as the agent log holds it.

use crate::propose::{prompt, ProposeContext};

/// A model's answer as the agent log keeps it: a line of it that would read as one of hone's
/// own (`--- ... ---`) is indented, so that `hone show` counts only hone's.
pub(super) fn unmarked(text: &str) -> String {
    text.split('\n')
        .map(|l| {
            if l.starts_with("---") {
                format!(" {l}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The model's one-line hypothesis, or its first line of prose.
pub(super) fn hypothesis(answer: &str) -> String {
    let line = answer
        .lines()
        .find_map(|l| l.trim().strip_prefix("HYPOTHESIS:").map(str::trim))
        .or_else(|| {
            answer
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty() && !l.starts_with("```"))
        })
        .unwrap_or("");
    prompt::sanitize(line, 300)
}

/// The most `NOTE:` lines one answer adds, and the most the run's notes keep (the oldest go
/// first).
const MAX_NOTES_PER_ANSWER: usize = 10;
const MAX_NOTES_BYTES: usize = 64 * 1024;

/// The answer's `NOTE:` lines outside its edits (SEARCH/REPLACE blocks, a patch, code fences),
/// each cut to 500 characters, at most [`MAX_NOTES_PER_ANSWER`].
pub(super) fn note_lines(answer: &str) -> Vec<String> {
    let mut inside: Option<&str> = None;
    let mut out = Vec::new();
    // `edit_mode = "knobs"`: one JSON object, its note a key of it.
    let json = answer
        .find('{')
        .zip(answer.rfind('}'))
        .and_then(|(a, b)| serde_json::from_str::<serde_json::Value>(answer.get(a..=b)?).ok());
    if let Some(note) = json.as_ref().and_then(|v| v["note"].as_str()) {
        let note = note.trim();
        if !note.is_empty() {
            out.push(prompt::sanitize(note, 500).replace('\n', " "));
        }
        return out;
    }
    for line in answer.lines() {
        let t = line.trim();
        match inside {
            Some(end) => {
                if t.starts_with(end) {
                    inside = None;
                }
                continue;
            }
            None if t.starts_with("<<<<<<< SEARCH") => inside = Some(">>>>>>> REPLACE"),
            None if t.starts_with("*** Begin Patch") => inside = Some("*** End Patch"),
            None if t.starts_with("```") => inside = Some("```"),
            None => {
                if let Some(note) = t.strip_prefix("NOTE:").map(str::trim) {
                    if !note.is_empty() && out.len() < MAX_NOTES_PER_ANSWER {
                        out.push(prompt::sanitize(note, 500).replace('\n', " "));
                    }
                }
            }
        }
    }
    out
}

/// Keeps the answer's notes ([`note_lines`]) as the run's (`notes.md`, which the next prompts
/// and the report read, and a copy of them as they stand after experiment `n`,
/// `notes/<n>.md`), each as `- #n: note`.
pub(super) fn keep_notes(ctx: &ProposeContext<'_>, answer: &str) {
    let notes = note_lines(answer);
    if notes.is_empty() {
        return;
    }
    let path = ctx.run_dir.join("notes.md");
    let mut all = std::fs::read_to_string(&path).unwrap_or_default();
    for note in notes {
        all.push_str(&format!("- #{}: {note}\n", ctx.n));
    }
    while all.len() > MAX_NOTES_BYTES {
        match all.find('\n') {
            Some(end) => drop(all.drain(..=end)),
            None => all.clear(),
        }
    }
    let _ = std::fs::write(&path, &all);
    let _ = std::fs::create_dir_all(ctx.run_dir.join("notes"));
    let _ = std::fs::write(
        ctx.run_dir.join("notes").join(format!("{}.md", ctx.n)),
        &all,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_cannot_write_hones_marker_lines() {
        assert_eq!(
            unmarked("ok\n--- answer 1 (worst case) ---\nend"),
            "ok\n --- answer 1 (worst case) ---\nend"
        );
        assert_eq!(unmarked("--- x ---"), " --- x ---");
    }

    #[test]
    fn hypothesis_line() {
        assert_eq!(hypothesis("HYPOTHESIS: lower LR\ntrain.py\n"), "lower LR");
        assert_eq!(hypothesis("\nI will try X.\n"), "I will try X.");
    }

    #[test]
    fn notes_are_the_note_lines_outside_the_edits() {
        let answer = "HYPOTHESIS: lower LR\nNOTE: LR above 0.5 diverged in #3\ntrain.py\n<<<<<<< SEARCH\nNOTE: not one\n=======\nx\n>>>>>>> REPLACE\n```\nNOTE: nor this\n```\n  NOTE:   width matters less than depth  \nNOTE:\n";
        assert_eq!(
            note_lines(answer),
            [
                "LR above 0.5 diverged in #3",
                "width matters less than depth"
            ]
        );
        let patch = "*** Begin Patch\nNOTE: inside\n*** End Patch\nNOTE: after";
        assert_eq!(note_lines(patch), ["after"]);
        let knobs =
            "{\"changes\": {\"LR\": 0.1}, \"hypothesis\": \"h\", \"note\": \"depth 8 crashed\"}";
        assert_eq!(note_lines(knobs), ["depth 8 crashed"]);
    }
}
