//! The stop conditions checked before each experiment: an interruption, `max_experiments`
//! (aborted experiments not counted), `max_time`, `target`, `patience`, failures in a row and
//! the budgets.

use crate::report::best_experiment;
use crate::spec::{format_duration, Direction, StopSpec};
use crate::store::{ExperimentRecord, Status};

use super::{Engine, Stop};

impl Engine<'_> {
    /// How many experiments count towards `max_experiments`: the finished ones but the
    /// aborted (an outage of the model's server, an interruption) and the baselines that
    /// failed before the one that ran. Those in flight are counted by the caller.
    pub(super) fn counted(&self, exps: &[ExperimentRecord]) -> u64 {
        (exps
            .iter()
            .filter(|e| !matches!(e.status(), Status::Aborted | Status::Running))
            .count() as u64
            + self.dropped.counted())
        .saturating_sub(self.failed_baselines)
    }

    /// When `max_time` runs out (the loop's active time, counted across sessions), if it
    /// is set: the waits out of a model's outage end there.
    pub(super) fn time_up(&self) -> Option<std::time::Instant> {
        let t = self.verifier.spec.stop.max_time?;
        let left = (t.as_secs_f64() - self.active_seconds()).max(0.0);
        Some(std::time::Instant::now() + std::time::Duration::from_secs_f64(left))
    }

    /// Why the loop should stop before the next experiment, if it should.
    pub(super) fn stop_condition(&self, exps: &[ExperimentRecord]) -> Option<Stop> {
        let spec = &self.verifier.spec;
        let s = &spec.stop;
        if self.interrupt.stop_requested() {
            return Some(Stop::resumable(
                "interrupted by the user (run `hone run` to resume)",
            ));
        }
        if self.counted(exps) >= s.max_experiments {
            return Some(Stop::done(format!(
                "reached max_experiments ({})",
                s.max_experiments
            )));
        }
        if let Some(t) = s.max_time {
            if self.active_seconds() >= t.as_secs_f64() {
                return Some(Stop::done(format!(
                    "reached max_time ({})",
                    format_duration(t)
                )));
            }
        }
        let best = best_experiment(exps);
        if let (Some(target), Some(b)) = (s.target, best.and_then(|b| b.objective)) {
            let reached = match spec.verify.direction {
                Direction::Minimize => b <= target,
                Direction::Maximize => b >= target,
            };
            if reached {
                return Some(Stop::done(format!(
                    "reached target ({} = {b})",
                    spec.verify.metric
                )));
            }
        }
        if let (Some(p), Some(b)) = (s.patience, best) {
            let since = exps
                .iter()
                .filter(|e| e.n > b.n && e.status() != Status::Aborted)
                .count() as u64
                + self.dropped.counted_after(b.n);
            if since >= p {
                return Some(Stop::done(format!(
                    "no improvement in {since} experiments (patience {p})"
                )));
            }
        }
        failure_or_budget_stop(s, exps, &self.dropped, self.session_first)
    }
}

/// `, each one: <reason>` when the last `streak` failures (aborted experiments aside) failed
/// for the same reason (a server that refuses every request the same way, a verifier that
/// cannot start): then that is what to fix, not the candidates. Empty otherwise.
fn same_reason(exps: &[ExperimentRecord], streak: usize) -> String {
    let mut reasons = exps
        .iter()
        .rev()
        .filter(|e| e.status() != Status::Aborted)
        .take(streak)
        .map(|e| e.reason.lines().next().unwrap_or(""));
    match reasons.next() {
        Some(first) if !first.is_empty() && reasons.all(|r| r == first) => {
            format!(", each one: {}", crate::util::cut_at_word(first, 300))
        }
        _ => String::new(),
    }
}

/// The stop conditions on failures in a row and on the budgets.
fn failure_or_budget_stop(
    s: &StopSpec,
    exps: &[ExperimentRecord],
    dropped: &super::history::Dropped,
    session_first: u64,
) -> Option<Stop> {
    // Only this session's failures count: resuming after fixing the cause starts afresh.
    // Aborted experiments (an LLM server's outage, an interruption) neither count nor end a
    // streak: failures around an outage still add up.
    let failures = exps
        .iter()
        .rev()
        .filter(|e| e.status() != Status::Aborted)
        .take_while(|e| e.n >= session_first && e.status().is_failure())
        .count() as u64;
    if failures >= s.max_consecutive_failures {
        return Some(Stop::failed(format!(
            "{failures} failed experiments in a row (max_consecutive_failures){}; see `hone log` and `hone show {}`",
            same_reason(exps, failures as usize),
            exps.last().map(|e| e.n).unwrap_or(0)
        )));
    }
    let (usd, tokens) = super::history::spent(exps, dropped);
    if let Some(max) = s.max_cost_usd.filter(|&max| usd >= max) {
        return Some(Stop::done(cost_spent(usd, max)));
    }
    if let Some(max) = s.max_tokens.filter(|&max| tokens >= max) {
        return Some(Stop::done(tokens_spent(tokens, max)));
    }
    None
}

/// The budget stop for `usd` spent of `max_cost_usd` = `max`: reached, or exceeded (by more
/// than rounding: something was charged after the fact, an agent CLI's turn or a server that
/// answered past `max_tokens`) and by how much.
pub(super) fn cost_spent(usd: f64, max: f64) -> String {
    if usd > max + 0.005 {
        format!(
            "budget: exceeded max_cost_usd by ${:.4} (${usd:.4} of ${max})",
            usd - max
        )
    } else {
        format!("budget: reached max_cost_usd (${usd:.4} of ${max})")
    }
}

/// [`cost_spent`] for `max_tokens`.
pub(super) fn tokens_spent(tokens: u64, max: u64) -> String {
    if tokens > max {
        format!(
            "budget: exceeded max_tokens by {} ({tokens} of {max})",
            tokens - max
        )
    } else {
        format!("budget: reached max_tokens ({tokens} of {max})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(n: u64, reason: &str) -> ExperimentRecord {
        ExperimentRecord {
            n,
            status: Some(Status::Crash),
            reason: reason.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_streak_names_its_reason_only_when_every_failure_shares_it() {
        let same = [
            failed(1, "HTTP 400: too long\nmore"),
            failed(2, "HTTP 400: too long"),
        ];
        assert_eq!(same_reason(&same, 2), ", each one: HTTP 400: too long");
        let mixed = [failed(1, "exit 1"), failed(2, "HTTP 400: too long")];
        assert_eq!(same_reason(&mixed, 2), "");
        // Only the streak counts: an older failure for another reason does not.
        assert_eq!(same_reason(&mixed, 1), ", each one: HTTP 400: too long");
        // An aborted experiment in the streak is passed over, as the count passes it over.
        let mut aborted = failed(2, "interrupted");
        aborted.status = Some(Status::Aborted);
        let around = [failed(1, "x"), aborted, failed(3, "x")];
        assert_eq!(same_reason(&around, 2), ", each one: x");
        assert_eq!(same_reason(&[failed(1, "")], 1), "");
    }
}
