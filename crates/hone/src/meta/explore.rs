//! `explore`: a space-filling phase over the knobs. A phase is a Latin hypercube of
//! [`phase_size`] points over every free knob, offered as candidates until each was tried or
//! the phase has run its length. A phase runs at the start and again after any segment
//! without a keep, each with a fresh design (its own random stream).

use super::{Mechanism, Outcome, Rng, View};
use crate::propose::knobs::{config_at, dimensions, Config};

/// Points per phase for `dims` free knobs.
pub fn phase_size(dims: usize) -> usize {
    (2 * dims).clamp(6, 20)
}

#[derive(Default)]
pub struct Explore {
    phase: u64,
    /// Unit-cube points of the current phase not tried yet.
    remaining: Vec<Vec<f64>>,
    /// Experiments left in the current phase.
    left: usize,
    started: bool,
}

/// `n` points of a Latin hypercube in `dims` dimensions.
pub fn latin_hypercube(n: usize, dims: usize, rng: &mut Rng) -> Vec<Vec<f64>> {
    let mut points = vec![Vec::with_capacity(dims); n];
    for _ in 0..dims {
        let mut strata: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = (rng.unit() * (i + 1) as f64) as usize;
            strata.swap(i, j.min(i));
        }
        for (p, s) in points.iter_mut().zip(strata) {
            p.push((s as f64 + rng.unit()) / n as f64);
        }
    }
    points
}

impl Explore {
    fn begin(&mut self, view: &View<'_>) -> Option<String> {
        let dims = dimensions(view.knobs).len();
        if dims == 0 {
            return None;
        }
        self.phase += 1;
        let size = phase_size(dims);
        let mut rng = Rng::new(view.seed, 0xe4_0000 + self.phase);
        self.remaining = latin_hypercube(size, dims, &mut rng);
        self.left = size;
        Some(format!("exploration phase {} ({size} points)", self.phase))
    }

    fn incumbent(view: &View<'_>) -> Config {
        view.best()
            .and_then(View::config_of)
            .unwrap_or_else(|| crate::propose::knobs::config_of(view.knobs))
    }
}

impl Mechanism for Explore {
    fn name(&self) -> &str {
        "explore"
    }

    fn candidates(&mut self, view: &View<'_>) -> Vec<Config> {
        if !self.started {
            // The first phase runs from the start; a resumed run continues it where it was.
            self.started = true;
            self.begin(view);
            let incumbent = Explore::incumbent(view);
            let tried: Vec<Config> = view.history.iter().filter_map(View::config_of).collect();
            self.remaining
                .retain(|u| !tried.contains(&config_at(view.knobs, &incumbent, u)));
            let done = view.history.iter().filter(|e| e.n > 0).count();
            self.left = self.left.saturating_sub(done).min(self.remaining.len());
        }
        if self.left == 0 {
            return Vec::new();
        }
        let incumbent = Explore::incumbent(view);
        self.remaining
            .iter()
            .map(|u| config_at(view.knobs, &incumbent, u))
            .collect()
    }

    fn on_result(&mut self, outcome: &Outcome<'_>) -> Option<String> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let view = &outcome.view;
        if let Some(tried) = View::config_of(outcome.record) {
            let incumbent = Explore::incumbent(view);
            self.remaining
                .retain(|u| config_at(view.knobs, &incumbent, u) != tried);
        }
        if self.remaining.is_empty() {
            self.left = 0;
        }
        (self.left == 0).then(|| format!("exploration phase {} done", self.phase))
    }

    fn on_segment_end(&mut self, view: &View<'_>) -> Option<String> {
        let segment = view.history.len().min(10) as u64;
        if self.left == 0 && view.since_improvement() >= segment && !view.knobs.is_empty() {
            return self.begin(view);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::testing::{exp, finish, knobs, view};
    use crate::propose::knobs::KnobValue;
    use crate::store::Status;

    #[test]
    fn its_candidates_cover_every_knob_range() {
        let k = knobs("A = 0.5  # hone: 0.0..1.0\nB = 10  # hone: int 0..99\nC = 'x'  # hone: choice ['x', 'y', 'z']\n");
        let ed = vec![];
        let history = vec![exp(0, Status::Baseline, Some(1.0), None)];
        let v = view(&history, &k, &ed);
        let mut e = Explore::default();
        let cands = e.candidates(&v);
        let n = phase_size(3);
        assert_eq!(cands.len(), n);
        let mut a_strata: Vec<usize> = cands
            .iter()
            .map(|c| match c.get("A") {
                Some(KnobValue::Float(x)) => ((x * n as f64) as usize).min(n - 1),
                other => panic!("{other:?}"),
            })
            .collect();
        a_strata.sort_unstable();
        a_strata.dedup();
        assert_eq!(a_strata.len(), n, "one point per stratum of A");
        let b: Vec<i64> = cands
            .iter()
            .map(|c| match c.get("B") {
                Some(KnobValue::Int(x)) => *x,
                other => panic!("{other:?}"),
            })
            .collect();
        assert!(
            b.iter().any(|x| *x < 20) && b.iter().any(|x| *x > 80),
            "{b:?}"
        );
        for opt in ["x", "y", "z"] {
            assert!(
                cands
                    .iter()
                    .any(|c| c.get("C") == Some(&KnobValue::Str(opt.into()))),
                "choice {opt} never offered"
            );
        }
    }

    #[test]
    fn a_phase_ends_and_a_stalled_segment_starts_another() {
        let k = knobs("A = 0.5  # hone: 0.0..1.0\n");
        let ed = vec![];
        let mut history = vec![exp(0, Status::Baseline, Some(1.0), None)];
        let mut e = Explore::default();
        let first = e.candidates(&view(&history, &k, &ed));
        assert_eq!(first.len(), 6);
        for n in 1..=6u64 {
            let rec = exp(n, Status::Discard, Some(2.0), Some(&first[0]));
            finish(&mut e, &mut history, rec, &k, &ed);
        }
        assert!(e.candidates(&view(&history, &k, &ed)).is_empty());
        for n in 7..=10u64 {
            history.push(exp(n, Status::Discard, Some(2.0), None));
        }
        assert!(e.on_segment_end(&view(&history, &k, &ed)).is_some());
        let second = e.candidates(&view(&history, &k, &ed));
        assert_eq!(second.len(), 6);
        assert_ne!(first, second, "each phase draws a fresh design");
    }
}
