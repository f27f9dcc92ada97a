//! `orthogonal`: asks for a change in a category not tried recently, so that a search that
//! keeps returning to the same priors is pushed elsewhere.
//!
//! - Agents: each experiment's description is sorted into categories by keywords
//!   ([`CATEGORIES`]); when the last [`WINDOW`] experiments all fell into a few categories,
//!   the prompt asks for a change in the category least recently tried.
//! - The knobs optimizer: the categories are the knobs; it focuses the next move on the knobs
//!   no recent experiment changed.

use super::{Guidance, Mechanism, View};
use crate::propose::knobs::{dimensions, Config};
use crate::store::ExperimentRecord;

/// Recent experiments it looks at.
pub const WINDOW: usize = 5;

/// Categories of change and the keywords (lowercase substrings) that mark them.
pub const CATEGORIES: &[(&str, &[&str])] = &[
    (
        "optimization",
        &[
            "learning rate",
            "lr",
            "optimizer",
            "adam",
            "sgd",
            "momentum",
            "schedule",
            "warmup",
            "decay",
            "gradient",
            "clip",
        ],
    ),
    (
        "architecture",
        &[
            "layer",
            "depth",
            "width",
            "head",
            "attention",
            "embed",
            "hidden",
            "block",
            "residual",
            "architecture",
            "mlp",
            "activation",
        ],
    ),
    (
        "regularization",
        &[
            "dropout",
            "regulariz",
            "weight decay",
            "label smoothing",
            "noise",
            "augment",
            "penalty",
        ],
    ),
    (
        "data",
        &[
            "batch", "data", "token", "sequence", "context", "shuffle", "sample", "vocab",
        ],
    ),
    (
        "initialization",
        &["init", "scale", "std", "normaliz", "norm"],
    ),
    (
        "efficiency",
        &[
            "speed",
            "fast",
            "cache",
            "compile",
            "fuse",
            "vectoriz",
            "parallel",
            "memory",
            "precision",
            "dtype",
        ],
    ),
    (
        "simplification",
        &["remove", "delete", "simplif", "clean", "drop the", "unused"],
    ),
];

/// The categories a description falls into (by keyword; lowercase match on word starts).
pub fn categories_of(description: &str) -> Vec<&'static str> {
    let text = description.to_lowercase();
    let words: Vec<&str> = text
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|w| !w.is_empty())
        .collect();
    CATEGORIES
        .iter()
        .filter(|(_, keys)| {
            keys.iter().any(|k| {
                if k.contains(' ') {
                    text.contains(k)
                } else {
                    words
                        .iter()
                        .any(|w| w.starts_with(k) || w.split('_').any(|p| p.starts_with(k)))
                }
            })
        })
        .map(|(name, _)| *name)
        .collect()
}

/// The knobs an experiment changed relative to the best before it.
fn changed_knobs(history: &[ExperimentRecord]) -> Vec<Vec<String>> {
    let mut best: Option<Config> = None;
    let mut out = Vec::new();
    for e in history {
        let config = View::config_of(e);
        let changed: Vec<String> = match (&best, &config) {
            (Some(b), Some(c)) => c
                .iter()
                .filter(|(k, v)| b.get(*k) != Some(v))
                .map(|(k, _)| k.to_string())
                .collect(),
            _ => Vec::new(),
        };
        out.push(changed);
        if matches!(
            e.status(),
            crate::store::Status::Baseline | crate::store::Status::Keep
        ) {
            best = config.or(best);
        }
    }
    out
}

#[derive(Default)]
pub struct Orthogonal;

impl Mechanism for Orthogonal {
    fn name(&self) -> &str {
        "orthogonal"
    }

    fn before_propose(&mut self, view: &View<'_>) -> Guidance {
        let tried: Vec<_> = view.history.iter().filter(|e| e.n > 0).collect();
        if tried.len() < WINDOW {
            return Guidance::default();
        }
        if view.knobs_proposer {
            let changed = changed_knobs(view.history);
            let recent: Vec<String> = changed
                .iter()
                .rev()
                .take(WINDOW)
                .flatten()
                .cloned()
                .collect();
            let untouched: Vec<String> = dimensions(view.knobs)
                .into_iter()
                .filter(|k| !recent.contains(k))
                .collect();
            if untouched.is_empty() {
                return Guidance::default();
            }
            return Guidance {
                focus: untouched,
                ..Guidance::default()
            };
        }
        let recent: Vec<&str> = tried
            .iter()
            .rev()
            .take(WINDOW)
            .flat_map(|e| categories_of(&e.description))
            .collect();
        // The category tried longest ago (never tried first), in the list's order.
        let last_seen = |cat: &str| {
            tried
                .iter()
                .rposition(|e| categories_of(&e.description).contains(&cat))
        };
        let pick = CATEGORIES
            .iter()
            .map(|(c, _)| *c)
            .filter(|c| !recent.contains(c))
            .min_by_key(|c| last_seen(c).map_or(-1, |i| i as i64));
        let Some(cat) = pick else {
            return Guidance::default();
        };
        let mut seen: Vec<&str> = Vec::new();
        for c in recent {
            if !seen.contains(&c) {
                seen.push(c);
            }
        }
        let so_far = if seen.is_empty() {
            "uncategorized changes".to_string()
        } else {
            seen.join(", ")
        };
        Guidance {
            text: vec![format!(
                "the last {WINDOW} experiments were about {so_far}; make this change about {cat} instead"
            )],
            ..Guidance::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::testing::{config, exp, knobs, view};
    use crate::store::Status;

    #[test]
    fn descriptions_fall_into_categories() {
        assert_eq!(
            categories_of("Halve the learning rate"),
            vec!["optimization"]
        );
        assert_eq!(categories_of("LR 0.1 -> 0.05"), vec!["optimization"]);
        assert_eq!(
            categories_of("add a dropout layer"),
            vec!["architecture", "regularization"]
        );
        assert!(categories_of("rename a variable").is_empty());
    }

    #[test]
    fn after_a_run_of_optimizer_tweaks_it_asks_for_something_else() {
        let ed = vec!["train.py".to_string()];
        let mut history = vec![exp(0, Status::Baseline, Some(1.0), None)];
        for n in 1..=5 {
            let mut e = exp(n, Status::Discard, Some(2.0), None);
            e.description = format!("tune the learning rate schedule, try {n}");
            history.push(e);
        }
        let g = Orthogonal.before_propose(&view(&history, &[], &ed));
        assert_eq!(g.text.len(), 1);
        assert!(g.text[0].contains("about optimization"), "{:?}", g.text);
        assert!(
            g.text[0].contains("about architecture instead"),
            "{:?}",
            g.text
        );
    }

    #[test]
    fn the_knobs_optimizer_is_focused_on_knobs_left_alone() {
        let k =
            knobs("A = 1  # hone: int 1..9\nB = 1  # hone: int 1..9\nC = 1  # hone: int 1..9\n");
        let ed = vec![];
        let base = config(&[("A", 1), ("B", 1), ("C", 1)]);
        let mut history = vec![exp(0, Status::Baseline, Some(1.0), Some(&base))];
        for n in 1..=5 {
            let c = config(&[("A", 1 + n as i64), ("B", 1), ("C", 1)]);
            history.push(exp(n, Status::Discard, Some(2.0), Some(&c)));
        }
        let g = Orthogonal.before_propose(&view(&history, &k, &ed));
        assert_eq!(g.focus, vec!["B".to_string(), "C".to_string()]);
    }
}
