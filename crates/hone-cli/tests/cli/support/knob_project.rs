//! The two-knob project the knobs-optimizer tests tune (also used by `tests/serve.rs`):
//! `params.txt` holds WIDTH and DEPTH, and `score.sh` (plain sh arithmetic) scores them, with
//! the least loss at WIDTH 13 and DEPTH 4.

use std::path::Path;

use super::git::git;

/// `params.txt`: WIDTH 2 and DEPTH 9, each an integer knob in 1..20.
pub(crate) const PARAMS: &str = "WIDTH = 2  # hone: int 1..20\nDEPTH = 9  # hone: int 1..20\n";

/// `score.sh`: prints `loss: (WIDTH-13)² + (DEPTH-4)²`.
pub(crate) const SCORE_SH: &str = "w=$(sed -n 's/^WIDTH = \\([0-9]*\\).*/\\1/p' params.txt)\nd=$(sed -n 's/^DEPTH = \\([0-9]*\\).*/\\1/p' params.txt)\necho \"loss: $(( (w-13)*(w-13) + (d-4)*(d-4) ))\"\n";

/// Writes `params.txt`, `score.sh` and `hone.toml` into `dir` and commits them as a new
/// repository (every step must succeed).
pub(crate) fn commit_knob_project(dir: &Path, params: &str, score_sh: &str, hone_toml: &str) {
    for (name, text) in [
        ("params.txt", params),
        ("score.sh", score_sh),
        ("hone.toml", hone_toml),
    ] {
        std::fs::write(dir.join(name), text).unwrap();
    }
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "init"]);
}
