//! Keeps the knobs proposer's view of a run bounded however long the run: once it holds more
//! than [`Bounds::high`] observations, it keeps [`Bounds::low`] of them, namely the
//! [`Bounds::best`] best, the [`Bounds::recent`] most recent, those still running, the first
//! and the last experiment's, and an even spread of the rest in the order of the run. The
//! sampler's model already fits a bounded sample of that kind (`knobs::sampler::modelled`:
//! the 96 best, the 64 most recent, a spread up to 256), so what it sees changes only in the
//! spread; its refinement step looks back 512 experiments for the incumbent, inside the recent
//! ones kept. What the dropped experiments still count for stays: the worst value measured
//! (the stand-in of running and pruned ones) and the configurations that proved infeasible
//! (the feasibility model learns from every one). "Already tried" stays whole in the
//! sampler's index, which drops only the positions ([`Moves`]).

use super::{measured, worse, Observed, Seen};
use crate::store::Status;

/// How many observations are held at most, and what a compaction keeps.
#[derive(Clone, Copy, Debug)]
pub(in crate::propose::optimizer) struct Bounds {
    /// Past this many, the observations are compacted.
    pub high: usize,
    /// To this many (more where the best, recent and running ones are more).
    pub low: usize,
    /// The best ones always kept (at least the model's best).
    pub best: usize,
    /// The most recent ones always kept (at least the model's and the refinement's look-back).
    pub recent: usize,
}

/// The bounds of a run's view: about 8,000 observations at most (a few MB with many knobs).
const BOUNDS: Bounds = Bounds {
    high: 8192,
    low: 4096,
    best: 1024,
    recent: 1024,
};

impl Default for Bounds {
    fn default() -> Bounds {
        BOUNDS
    }
}

/// What moved in the observations since the caller last asked ([`Observed::take_moves`]), for
/// an index kept by their positions (the sampler's): `anew`, they were converted anew (the
/// index starts again from the first position); then, in order, each compaction: its mask
/// over the observations held before it (`true`: kept, in the same order), and the
/// fingerprints (`knobs::fingerprint`) of the configurations it dropped, in order (those the
/// index never read still count as tried).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Moves {
    pub anew: bool,
    pub kept: Vec<(Vec<bool>, Vec<u64>)>,
}

impl Observed {
    /// What moved since the last call (see [`Moves`]).
    pub fn take_moves(&mut self) -> Moves {
        std::mem::take(&mut self.moves)
    }

    /// Which observations a compaction keeps (see the module docs).
    fn kept_mask(&self) -> Vec<bool> {
        let (b, n) = (self.bounds, self.obs.len());
        let mut keep = vec![false; n];
        let anchors = [self.seen.first(), self.seen.last()].into_iter().flatten();
        let running = self.seen.iter().filter(|s| s.status == Status::Running);
        for s in anchors.chain(running) {
            if let Some(o) = s.obs {
                keep[o as usize] = true;
            }
        }
        for k in keep.iter_mut().skip(n.saturating_sub(b.recent)) {
            *k = true;
        }
        // The best as a set (failures and stand-ins of no value count as the worst; ties go
        // to the earlier), a selection rather than a sort.
        let minimize = self.minimize;
        let score = |v: Option<f64>| match v {
            Some(v) if v.is_finite() => {
                if minimize {
                    v
                } else {
                    -v
                }
            }
            _ => f64::INFINITY,
        };
        let mut by_score: Vec<(f64, u32)> = (self.obs.iter().enumerate())
            .map(|(i, o)| (score(o.objective), i as u32))
            .collect();
        let best = b.best.min(n);
        if best > 0 {
            by_score
                .select_nth_unstable_by(best - 1, |a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            for &(_, i) in &by_score[..best] {
                keep[i as usize] = true;
            }
        }
        drop(by_score);
        let rest: Vec<u32> = (0..n as u32).filter(|&i| !keep[i as usize]).collect();
        let room = b.low.saturating_sub(n - rest.len()).min(rest.len());
        for k in 0..room {
            keep[rest[k * rest.len() / room] as usize] = true;
        }
        keep
    }

    /// Compacts the view when it holds more than its bounds allow (see the module docs).
    pub(super) fn compact(&mut self) {
        if self.obs.len() <= self.bounds.high {
            return;
        }
        let keep = self.kept_mask();
        // The infeasible configurations past the fixed ones follow `seen` one for one (as
        // `figure_from` lists them): those of dropped experiments join the fixed ones. Were
        // they ever not to (a bug), nothing is compacted.
        let failed = |s: &Seen| s.obs.is_some() && super::infeasible(s.status) == Some(true);
        let listed = self.seen.iter().filter(|s| failed(s)).count();
        if listed != self.infeasible.len() - self.fixed_ns.len() {
            return;
        }
        let mut tail = self.infeasible.split_off(self.fixed_ns.len()).into_iter();
        let mut back = Vec::new();
        for s in self.seen.iter().filter(|s| failed(s)) {
            let (Some(config), Some(o)) = (tail.next(), s.obs) else {
                break;
            };
            if keep[o as usize] {
                back.push(config);
            } else {
                self.infeasible.push(config);
                self.fixed_ns.push(s.n);
            }
        }
        self.infeasible.extend(back);
        // New positions of the kept observations.
        let mut at = vec![u32::MAX; keep.len()];
        let kept = keep.iter().enumerate().filter(|(_, k)| **k);
        for (new, (i, _)) in kept.enumerate() {
            at[i] = new as u32;
        }
        let last = self.seen.len() - 1;
        let (minimize, mut worst) = (self.minimize, self.dropped_worst);
        let mut i = 0;
        self.seen.retain_mut(|s| {
            let stays = i == 0 || i == last || s.status == Status::Running;
            i += 1;
            match s.obs.map(|o| at[o as usize]) {
                Some(new) if new != u32::MAX => {
                    s.obs = Some(new);
                    return true;
                }
                _ if stays => {
                    // Its observation is kept by the mask whenever it has one.
                    s.obs = None;
                    return true;
                }
                _ => {}
            }
            // (A NaN would make the fold depend on its order: left out.)
            if let (true, Some(v)) = (measured(s.status), s.objective.filter(|v| !v.is_nan())) {
                worst = Some(worst.map_or(v, |w| worse(w, v, minimize)));
            }
            false
        });
        self.dropped_worst = worst;
        self.lied.retain_mut(|o| {
            *o = at[*o as usize];
            *o != u32::MAX
        });
        let dropped: Vec<u64> = (self.obs.iter().zip(&keep))
            .filter(|(_, k)| !**k)
            .map(|(o, _)| crate::propose::knobs::fingerprint(&o.config))
            .collect();
        let mut i = 0;
        self.obs.retain(|_| {
            i += 1;
            keep[i - 1]
        });
        self.moves.kept.push((keep, dropped));
    }
}
