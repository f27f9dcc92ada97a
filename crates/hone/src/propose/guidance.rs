//! What the outer loop's mechanisms ask of the next proposal ([`Guidance`]: advice for an
//! agent's prompt, focus, frozen knobs, step scale, explore or exploit, candidates to try
//! first). It lives with the proposers, which read it; the mechanisms in `crate::meta` write
//! it (and re-export it), so the proposers need nothing of the outer loop.

use crate::propose::knobs::Config;

/// Whether the next proposals should spread out or refine the best.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Spread out: bold changes far from what was tried.
    Explore,
    /// Refine: small changes around the best.
    Exploit,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Explore => "explore",
            Mode::Exploit => "exploit",
        }
    }
}

/// What mechanisms ask of the next proposal. Merged over every active mechanism by
/// [`Guidance::merge`]; the default asks nothing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Guidance {
    /// Advice for an agent's prompt, one line each, attributed to its mechanism.
    pub text: Vec<String>,
    /// Knobs or file paths to concentrate the change on.
    pub focus: Vec<String>,
    /// Knobs to leave as they are.
    pub frozen: Vec<String>,
    /// Multiplies the size of local moves (`None`: as usual).
    pub step_scale: Option<f64>,
    pub mode: Option<Mode>,
    /// Knob configurations to try first (from `candidates`), with the mechanism that made each.
    pub candidates: Vec<(String, Config)>,
    /// Configurations not to propose again in this experiment (rejected by a filter).
    pub avoid: Vec<Config>,
    /// Show the proposer only experiments from this number on (and the best): a fresh
    /// history window after a restart.
    pub history_from: Option<u64>,
}

impl Guidance {
    /// True when the guidance asks for nothing.
    pub fn is_empty(&self) -> bool {
        *self == Guidance::default()
    }

    /// Adds `other` (from a later mechanism): lists are joined, the step scales multiply, and
    /// the first mode and window set win.
    pub fn merge(&mut self, other: Guidance) {
        self.text.extend(other.text);
        for f in other.focus {
            if !self.focus.contains(&f) {
                self.focus.push(f);
            }
        }
        for f in other.frozen {
            if !self.frozen.contains(&f) {
                self.frozen.push(f);
            }
        }
        self.step_scale = match (self.step_scale, other.step_scale) {
            (Some(a), Some(b)) => Some((a * b).clamp(0.05, 20.0)),
            (a, b) => a.or(b),
        };
        self.mode = self.mode.or(other.mode);
        self.candidates.extend(other.candidates);
        self.avoid.extend(other.avoid);
        self.history_from = self.history_from.or(other.history_from);
    }

    /// One line saying what this guidance asks (for the record).
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if let Some(m) = self.mode {
            parts.push(format!("mode {}", m.as_str()));
        }
        if !self.focus.is_empty() {
            parts.push(format!("focus {}", self.focus.join(", ")));
        }
        if !self.frozen.is_empty() {
            parts.push(format!("freeze {}", self.frozen.join(", ")));
        }
        if let Some(s) = self.step_scale {
            parts.push(format!("step x{s}"));
        }
        if let Some(n) = self.history_from {
            parts.push(format!("history from #{n}"));
        }
        if !self.candidates.is_empty() {
            parts.push(format!("{} candidate(s)", self.candidates.len()));
        }
        parts.extend(self.text.iter().cloned());
        parts.join("; ")
    }
}
