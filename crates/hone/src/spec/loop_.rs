//! `[loop]`: what the proposer may touch (`editable`) and what it must not (`protected`,
//! `pinned`), the program it reads, and where it keeps notes.

use std::path::Path;

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
}

impl LoopSpec {
    /// The program file to read on every experiment.
    pub fn program_path(&self) -> &str {
        self.program.as_deref().unwrap_or(PROGRAM)
    }
}

pub(super) fn parse(s: &Section) -> Result<LoopSpec, SpecError> {
    let loop_ = LoopSpec {
        program: s.get("program")?,
        notes: s.get_or("notes", NOTES.to_string())?,
        skills: s.get_or_default("skills")?,
        editable: s.get_or_default("editable")?,
        protected: s.get_or_default("protected")?,
        pinned: s.get_or_default("pinned")?,
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
