//! A model's server that stays unavailable, waited out: the proposer's between experiments,
//! an HTTP reviewer's on the same candidate. The waits start at `[agent] outage_wait` and
//! double up to ten minutes; the outage ends the run once it has lasted `[agent]
//! outage_limit`; and no wait goes past the moment `[stop] max_time` runs out.

use std::time::{Duration, Instant};

/// An outage as it is waited out: since when, and how many waits so far.
#[derive(Default)]
pub(super) struct Outage {
    since: Option<Instant>,
    waits: u32,
    /// Waits in a row for a limit that said when it lifts (see [`Outage::believe_lift`]).
    lifts: u32,
}

/// How many times in a row a limit's own word on when it lifts is believed: one that is
/// still there after so many waits is waited out as any outage is (`outage_limit`).
const MAX_LIFT_WAITS: u32 = 3;

/// What to do after one more call found the server unavailable.
#[derive(Debug, PartialEq)]
pub(super) enum Next {
    /// Wait this long, then ask again.
    Wait(Duration),
    /// The outage has lasted `outage_limit`: stop the run (resumable).
    OverLimit,
    /// `max_time` has run out: stop as it says.
    TimeUp,
}

/// The longest wait while a model's server is unavailable (the first is `[agent]
/// outage_wait`, each after it double the last).
const OUTAGE_WAIT_MAX: Duration = Duration::from_secs(600);

/// The shortest: `outage_wait = "0s"` must not turn an unreachable server into a loop that
/// writes an `aborted` record as fast as it can for all of `outage_limit`.
const OUTAGE_WAIT_MIN: Duration = Duration::from_secs(1);

impl Outage {
    /// Whether to wait for a limit until the time it names, once more: yes for the first
    /// [`MAX_LIFT_WAITS`] in a row, then it counts as an outage.
    pub(super) fn believe_lift(&mut self) -> bool {
        self.lifts += 1;
        self.lifts <= MAX_LIFT_WAITS
    }

    /// The wait after one more call found the server unavailable (`first`, the `[agent]
    /// outage_wait`, doubling, at most ten minutes or `first`, at least a second), cut to
    /// what is left before
    /// `time_up` (when `max_time` runs out, if it is set); `limit` is `[agent] outage_limit`.
    pub(super) fn next(
        &mut self,
        (first, limit): (Duration, Duration),
        time_up: Option<Instant>,
    ) -> Next {
        let now = Instant::now();
        let since = *self.since.get_or_insert(now);
        if now.duration_since(since) >= limit {
            return Next::OverLimit;
        }
        let left = time_up.map(|t| t.saturating_duration_since(now));
        if left == Some(Duration::ZERO) {
            return Next::TimeUp;
        }
        let wait = first
            .saturating_mul(1 << self.waits.min(10))
            .min(OUTAGE_WAIT_MAX.max(first))
            .max(OUTAGE_WAIT_MIN);
        self.waits += 1;
        Next::Wait(left.map_or(wait, |l| wait.min(l)))
    }

    /// How long the outage has lasted.
    pub(super) fn lasted(&self) -> Duration {
        self.since.map(|s| s.elapsed()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_is_believed_three_times_in_a_row_then_waited_out_as_an_outage() {
        let mut o = Outage::default();
        assert!(o.believe_lift() && o.believe_lift() && o.believe_lift());
        assert!(!o.believe_lift(), "a fourth in a row is an outage");
        // Once the service answers, the outage (and its count) is dropped by the engine.
        assert!(Outage::default().believe_lift());
    }

    fn agent(wait: u64, limit: u64) -> (Duration, Duration) {
        (Duration::from_secs(wait), Duration::from_secs(limit))
    }

    #[test]
    fn waits_double_up_to_ten_minutes() {
        let mut o = Outage::default();
        let a = agent(30, 100_000);
        let waits: Vec<Next> = (0..7).map(|_| o.next(a, None)).collect();
        let secs = [30, 60, 120, 240, 480, 600, 600].map(|s| Next::Wait(Duration::from_secs(s)));
        assert_eq!(waits, secs);
        // A first wait above ten minutes stays what it is.
        let mut o = Outage::default();
        assert_eq!(
            o.next(agent(3600, 100_000), None),
            Next::Wait(Duration::from_secs(3600))
        );
        assert_eq!(
            o.next(agent(3600, 100_000), None),
            Next::Wait(Duration::from_secs(3600))
        );
    }

    #[test]
    fn no_wait_goes_past_max_time_and_the_limit_ends_it() {
        let mut o = Outage::default();
        let a = agent(3600, 100_000);
        let time_up = Instant::now() + Duration::from_secs(5);
        let Next::Wait(w) = o.next(a, Some(time_up)) else {
            panic!("a wait was due");
        };
        assert!(w <= Duration::from_secs(5), "{w:?}");
        assert_eq!(o.next(a, Some(Instant::now())), Next::TimeUp);
        // An outage_limit of zero: over at the first call.
        assert_eq!(Outage::default().next(agent(30, 0), None), Next::OverLimit);
    }
}
