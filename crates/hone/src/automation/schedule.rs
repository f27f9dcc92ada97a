//! When `[[schedule]]` entries are due.
//!
//! Time comes from a `Clock` the caller passes in, so tests move it by hand and nothing here
//! sleeps. Cron expressions are read by croner and evaluated in UTC. Each entry's last start is
//! kept in `.hone/schedule.json` (written before the run is launched, atomically), keyed by the
//! entry's cron and tag, so reordering hone.toml keeps the history and editing an entry starts
//! it afresh.
//!
//! `due(now)` looks at every start of an entry after its last one and up to `now`. When the
//! latest of them is at most `LATE_GRACE` old, it is on time and fires. When it is older, hone
//! was not running (or the machine slept) at that time: the start was missed, and it fires
//! once now with `catch_up = true`, or is skipped (and recorded as handled) otherwise. However
//! many starts were missed, at most one run is made up. An entry hone has never seen starts
//! counting from the first `due` call.

use std::collections::BTreeMap;
use std::path::PathBuf;

use chrono::{DateTime, Utc};
use croner::Cron;

use crate::spec::ScheduleSpec;

/// How late a start may be noticed and still count as on time, in seconds.
pub const LATE_GRACE: i64 = 60;

/// The time, in Unix seconds (UTC). Production uses `SystemClock`; tests move their own.
pub trait Clock: Send + Sync {
    fn now(&self) -> i64;
}

/// The machine's clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> i64 {
        crate::store::now().floor() as i64
    }
}

/// A clock that only moves when told to, for tests.
#[derive(Debug, Default)]
pub struct ManualClock(std::sync::atomic::AtomicI64);

impl ManualClock {
    pub fn new(at: i64) -> ManualClock {
        ManualClock(std::sync::atomic::AtomicI64::new(at))
    }
    pub fn set(&self, at: i64) {
        self.0.store(at, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> i64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Why an entry fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FireKind {
    /// Its start time just came.
    OnTime,
    /// Its start was missed while hone was not running; `catch_up = true` makes it up once.
    CatchUp,
    /// Its start was missed and `catch_up = false`: nothing runs.
    Skipped,
}

/// One decision about one entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fire {
    /// The entry's index in `[[schedule]]`.
    pub index: usize,
    /// The scheduled start (Unix seconds), which also names the run.
    pub at: i64,
    pub kind: FireKind,
    /// How many starts were missed (1 when on time).
    pub starts: u64,
}

/// A problem with the schedule state or an entry.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    #[error("[[schedule]] at line {line}: `{cron}` is not a cron expression: {message}")]
    Cron {
        line: usize,
        cron: String,
        message: String,
    },
    #[error("cannot write {path}: {message}; schedules would forget their last start")]
    State { path: String, message: String },
}

/// The entries of a spec and when each last started.
pub struct Scheduler {
    entries: Vec<(ScheduleSpec, Cron)>,
    path: PathBuf,
    last: BTreeMap<String, i64>,
}

fn key(s: &ScheduleSpec) -> String {
    format!("{} | {}", s.cron, s.tag)
}

fn at(unix: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(unix, 0).unwrap_or_default()
}

impl Scheduler {
    /// Reads the state file (a missing or unreadable one is an empty history).
    pub fn new(entries: &[ScheduleSpec], state_path: PathBuf) -> Result<Scheduler, ScheduleError> {
        let entries = entries
            .iter()
            .map(|s| {
                Cron::new(&s.cron)
                    .with_seconds_optional()
                    .parse()
                    .map(|c| (s.clone(), c))
                    .map_err(|e| ScheduleError::Cron {
                        line: s.line,
                        cron: s.cron.clone(),
                        message: e.to_string(),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let last = std::fs::read_to_string(&state_path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        Ok(Scheduler {
            entries,
            path: state_path,
            last,
        })
    }

    pub fn entries(&self) -> impl Iterator<Item = &ScheduleSpec> {
        self.entries.iter().map(|(s, _)| s)
    }

    /// The start after `after` (Unix seconds), if the expression has one.
    fn next_after(cron: &Cron, after: i64) -> Option<i64> {
        cron.find_next_occurrence(&at(after), false)
            .ok()
            .map(|t| t.timestamp())
    }

    /// Decides every entry at `now`, records what it decided, and returns the decisions.
    /// Record first, launch after: a crash in between loses that one start rather than
    /// starting it twice.
    pub fn due(&mut self, now: i64) -> Result<Vec<Fire>, ScheduleError> {
        let mut fires = Vec::new();
        let mut changed = false;
        for (index, (spec, cron)) in self.entries.iter().enumerate() {
            let k = key(spec);
            let Some(&last) = self.last.get(&k) else {
                self.last.insert(k, now);
                changed = true;
                continue;
            };
            let mut latest = None;
            let mut starts = 0u64;
            let mut t = last;
            // Bounded: a minutely entry missed for two years is about a million steps.
            while let Some(next) = Self::next_after(cron, t).filter(|n| *n <= now) {
                latest = Some(next);
                starts += 1;
                t = next;
                if starts >= 2_000_000 {
                    break;
                }
            }
            let Some(latest) = latest else { continue };
            let kind = if now - latest <= LATE_GRACE && starts == 1 {
                FireKind::OnTime
            } else if spec.catch_up {
                FireKind::CatchUp
            } else {
                FireKind::Skipped
            };
            self.last.insert(k, latest);
            changed = true;
            fires.push(Fire {
                index,
                at: latest,
                kind,
                starts,
            });
        }
        if changed {
            self.save()?;
        }
        Ok(fires)
    }

    /// The next start of any entry after `now`, for the caller's wait.
    pub fn next_start(&self, now: i64) -> Option<i64> {
        self.entries
            .iter()
            .filter_map(|(s, c)| {
                let from = self.last.get(&key(s)).copied().unwrap_or(now).max(now);
                Self::next_after(c, from)
            })
            .min()
    }

    /// The entry at `index`.
    pub fn entry(&self, index: usize) -> Option<&ScheduleSpec> {
        self.entries.get(index).map(|(s, _)| s)
    }

    fn save(&self) -> Result<(), ScheduleError> {
        let err = |e: std::io::Error| ScheduleError::State {
            path: self.path.display().to_string(),
            message: e.to_string(),
        };
        let text = serde_json::to_string_pretty(&self.last).unwrap_or_else(|_| "{}".into());
        crate::util::write_atomic(&self.path, text.as_bytes()).map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(cron: &str, catch_up: bool) -> ScheduleSpec {
        ScheduleSpec {
            cron: cron.into(),
            tag: "nightly".into(),
            catch_up,
            line: 1,
            ..Default::default()
        }
    }

    /// 2026-01-02 00:00:00 UTC.
    const DAY2: i64 = 1_767_312_000;
    const H: i64 = 3600;

    #[test]
    fn a_nightly_entry_fires_once_at_its_time() {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("schedule.json");
        let clock = ManualClock::new(DAY2 + H); // 01:00
        let mut s = Scheduler::new(&[entry("0 2 * * *", false)], state.clone()).unwrap();
        assert_eq!(s.due(clock.now()).unwrap(), []);
        assert_eq!(s.next_start(clock.now()), Some(DAY2 + 2 * H));
        clock.set(DAY2 + 2 * H - 1);
        assert_eq!(s.due(clock.now()).unwrap(), []);
        clock.set(DAY2 + 2 * H + 3);
        let fire = Fire {
            index: 0,
            at: DAY2 + 2 * H,
            kind: FireKind::OnTime,
            starts: 1,
        };
        assert_eq!(s.due(clock.now()).unwrap(), [fire]);
        // Not again for the same start, even after a restart.
        assert_eq!(s.due(clock.now()).unwrap(), []);
        let mut again = Scheduler::new(&[entry("0 2 * * *", false)], state).unwrap();
        assert_eq!(again.due(clock.now() + 30).unwrap(), []);
        assert_eq!(again.next_start(clock.now()), Some(DAY2 + 26 * H));
    }

    #[test]
    fn missed_starts_are_made_up_once_with_catch_up_and_skipped_without() {
        for catch_up in [true, false] {
            let tmp = tempfile::tempdir().unwrap();
            let state = tmp.path().join("schedule.json");
            let e = [entry("0 2 * * *", catch_up)];
            let mut s = Scheduler::new(&e, state.clone()).unwrap();
            assert_eq!(s.due(DAY2 + H).unwrap(), []);
            drop(s);
            // hone was off for three nights; it comes back at 09:00 on day 5.
            let back = DAY2 + 3 * 24 * H + 9 * H;
            let mut s = Scheduler::new(&e, state.clone()).unwrap();
            let fires = s.due(back).unwrap();
            assert_eq!(
                fires,
                [Fire {
                    index: 0,
                    at: DAY2 + 3 * 24 * H + 2 * H,
                    kind: if catch_up {
                        FireKind::CatchUp
                    } else {
                        FireKind::Skipped
                    },
                    starts: 4,
                }],
                "catch_up = {catch_up}"
            );
            // Handled either way: nothing more until the next night.
            assert_eq!(s.due(back + 60).unwrap(), []);
            assert_eq!(
                s.due(DAY2 + 4 * 24 * H + 2 * H).unwrap()[0].kind,
                FireKind::OnTime
            );
        }
    }

    #[test]
    fn entries_are_remembered_by_cron_and_tag() {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("schedule.json");
        let mut s = Scheduler::new(&[entry("0 2 * * *", true)], state.clone()).unwrap();
        s.due(DAY2).unwrap();
        // A new entry in front of the old one: the old one keeps its history, the new one
        // starts counting now (nothing to catch up on).
        let mut s = Scheduler::new(
            &[entry("*/15 * * * *", true), entry("0 2 * * *", true)],
            state,
        )
        .unwrap();
        let fires = s.due(DAY2 + 3 * H).unwrap();
        assert_eq!(fires.len(), 1, "{fires:?}");
        assert_eq!((fires[0].index, fires[0].kind), (1, FireKind::CatchUp));
    }
}
