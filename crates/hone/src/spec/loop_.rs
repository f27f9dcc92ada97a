//! `[loop]`: what the proposer may touch (`editable`) and what it must not (`protected`,
//! `pinned`), the program it reads, and where it keeps notes.

use std::path::Path;

use super::overlap::{globs_overlap, Budget};
use super::read::Section;
use super::SpecError;

/// The keys of `[loop]`.
pub(super) const KEYS: &[&str] = &[
    "program",
    "skills",
    "editable",
    "protected",
    "pinned",
    "notes",
    "fixed",
];

/// The program file when `program` is not set.
pub const PROGRAM: &str = "program.md";
/// The notes file when `notes` is not set.
const NOTES: &str = ".hone/notes.md";

/// `[loop]`: what the proposer may touch and what it must not.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LoopSpec {
    pub program: Option<String>,
    /// A file in the worktree where an agent may append learnings; hone keeps it between
    /// experiments and shows it in every prompt.
    pub notes: String,
    pub skills: Vec<String>,
    pub editable: Vec<String>,
    pub protected: Vec<String>,
    pub pinned: Vec<String>,
    /// Constants of the editable files that must keep the values they had when the run
    /// started (a time budget, a run length, a seed): a candidate that changes one is a
    /// `violation`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fixed: Vec<String>,
}

impl LoopSpec {
    /// The program file to read on every experiment.
    pub fn program_path(&self) -> &str {
        self.program.as_deref().unwrap_or(PROGRAM)
    }
}

/// A `protected` or `pinned` glob must name no file an `editable` glob names (`*.py` and
/// `prepare.py`, `src/` and `src/*.rs`): a file cannot be both.
fn overlaps(s: &Section, loop_: &LoopSpec) -> Result<(), SpecError> {
    let mut budget = Budget::default();
    for (key, list) in [("protected", &loop_.protected), ("pinned", &loop_.pinned)] {
        for (i, pat) in list.iter().enumerate() {
            // A pinned path outside the repository names no file of it.
            if Path::new(pat).is_absolute() || pat.split('/').any(|c| c == "..") {
                continue;
            }
            for e in &loop_.editable {
                let problem = match globs_overlap(pat, e, &mut budget) {
                    Some(false) => continue,
                    Some(true) => format!(
                        "`{pat}` and `editable` glob `{e}` both name some files: a file cannot be both editable and {key}; narrow one of the globs"
                    ),
                    None => format!(
                        "`{key}` and `editable` are too many or too long globs to check against each other; list fewer, shorter globs"
                    ),
                };
                return Err(s.err_at(s.element_line(key, i), key, problem));
            }
        }
    }
    Ok(())
}

/// `notes` is a file in the worktree: a relative path that stays inside it.
fn notes(s: &Section, notes: &str) -> Result<(), SpecError> {
    let inside = !notes.trim().is_empty()
        && !Path::new(notes).is_absolute()
        && !notes.split('/').any(|c| c == "..")
        && !notes.ends_with('/');
    if inside {
        return Ok(());
    }
    Err(s.err(
        "notes",
        format!("`{notes}` must be a file path relative to the repository, inside it (e.g. \"NOTES.md\")"),
    ))
}

pub(super) fn parse(s: &Section) -> Result<LoopSpec, SpecError> {
    let loop_ = LoopSpec {
        program: s.get("program")?,
        notes: s.get_or("notes", NOTES.to_string())?,
        skills: s.get_or_default("skills")?,
        editable: s.get_or_default("editable")?,
        protected: s.get_or_default("protected")?,
        pinned: s.get_or_default("pinned")?,
        fixed: s.get_or_default("fixed")?,
    };
    if loop_.editable.is_empty() {
        let line = s.key_line("editable").or(s.line()).unwrap_or(1);
        return Err(s.err_at(
            line,
            "editable",
            "required: list the files a candidate may change, e.g. editable = [\"train.py\"]"
                .into(),
        ));
    }
    for (key, list) in [("protected", &loop_.protected), ("pinned", &loop_.pinned)] {
        for pat in list {
            if loop_.editable.iter().any(|e| e == pat) {
                let line = s.key_line(key).unwrap_or(1);
                return Err(s.err_at(
                    line,
                    key,
                    format!("`{pat}` is also listed in `editable`: a file cannot be both"),
                ));
            }
        }
    }
    for (i, name) in loop_.fixed.iter().enumerate() {
        let ident = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ident {
            return Err(s.err_at(
                s.element_line("fixed", i),
                "fixed",
                format!(
                    "`{name}` is not a constant's name (e.g. fixed = [\"TIME_BUDGET\", \"SEED\"])"
                ),
            ));
        }
    }
    overlaps(s, &loop_)?;
    notes(s, &loop_.notes)?;
    for (key, list) in [
        ("editable", &loop_.editable),
        ("protected", &loop_.protected),
    ] {
        for pat in list {
            if pat.is_empty() || Path::new(pat).is_absolute() || pat.split('/').any(|c| c == "..") {
                let line = s.key_line(key).unwrap_or(1);
                return Err(s.err_at(
                    line,
                    key,
                    format!("`{pat}` must be a relative path or glob inside the repository"),
                ));
            }
        }
    }
    Ok(loop_)
}
