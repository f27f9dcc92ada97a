//! The scheduler task against a manual clock and a stand-in `hone` (a shell script that records
//! its arguments and, for `hone run`, waits on a FIFO until the test lets it finish).

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hone::automation::schedule::{ManualClock, Scheduler};
use hone::spec::ScheduleSpec;
use hone_serve::automation::{run_scheduler, schedule_state_path, Automation, AutomationOptions};

// The stand-in `hone` of the library's automation tests: one copy, included by path.
#[path = "../../hone/src/automation/fake_hone.rs"]
mod fake_hone;
use fake_hone::fake_hone;

/// 2026-01-02 00:00:00 UTC.
const DAY2: i64 = 1_767_312_000;
const H: i64 = 3600;

fn entry(tag: &str, catch_up: bool, max: Option<u64>) -> ScheduleSpec {
    ScheduleSpec {
        cron: "0 2 * * *".into(),
        tag: tag.into(),
        max_experiments: max,
        catch_up,
        line: 7,
        ..Default::default()
    }
}

struct Setup {
    tmp: tempfile::TempDir,
    repo: PathBuf,
    clock: Arc<ManualClock>,
    messages: tokio::sync::mpsc::UnboundedReceiver<String>,
}

/// Starts the scheduler task over `entries`, whose history says they last looked at `seen`.
fn start(entries: Vec<ScheduleSpec>, seen: i64, now: i64) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    // The history a daemon that last ran at `seen` would have left.
    let mut s = Scheduler::new(&entries, schedule_state_path(&repo)).unwrap();
    assert_eq!(s.due(seen).unwrap(), []);
    let clock = Arc::new(ManualClock::new(now));
    let (tx, messages) = tokio::sync::mpsc::unbounded_channel();
    let auto = Automation::new(AutomationOptions {
        repo_root: repo.clone(),
        spec_path: None,
        program: fake_hone(tmp.path()),
        schedules: entries,
        secret: None,
        secret_env: "HONE_WEBHOOK_SECRET".into(),
        clock: clock.clone(),
        messages: Arc::new(move |m: &str| {
            let _ = tx.send(m.to_string());
        }),
    });
    tokio::spawn(run_scheduler(auto, Duration::from_millis(10)));
    Setup {
        tmp,
        repo,
        clock,
        messages,
    }
}

impl Setup {
    async fn next_message(&mut self) -> String {
        tokio::time::timeout(Duration::from_secs(60), self.messages.recv())
            .await
            .expect("the scheduler said nothing")
            .unwrap()
    }

    fn calls(&self) -> String {
        std::fs::read_to_string(self.tmp.path().join("calls")).unwrap_or_default()
    }

    /// Lets the waiting `hone run` finish (blocks until it reads; run off the runtime thread).
    async fn release(&self) {
        let go = self.tmp.path().join("go");
        tokio::task::spawn_blocking(move || std::fs::write(go, "go\n").unwrap())
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn a_schedule_starts_its_run_at_its_time_and_never_two_at_once() {
    let mut s = start(
        vec![entry("a", false, Some(3)), entry("b", false, None)],
        DAY2 + H,
        DAY2 + H,
    );
    // (That nothing fires before its time is pinned by the scheduler's unit tests.)
    s.clock.set(DAY2 + 2 * H + 2);
    let started = s.next_message().await;
    assert!(
        started.starts_with("schedule (hone.toml line 7): started run a-20260102-0200 (log "),
        "{started}"
    );
    // The second entry is due at the same minute, but a run is in progress: skipped.
    let skipped = s.next_message().await;
    assert!(
        skipped.contains("the start at 20260102-0200 UTC was skipped: run `a-20260102-0200` is still in progress"),
        "{skipped}"
    );
    s.release().await;
    assert_eq!(s.next_message().await, "run a-20260102-0200 finished");
    let root = s.repo.display();
    assert_eq!(
        s.calls(),
        format!("-C {root} run --tag a-20260102-0200 --max-experiments 3\n")
    );
    assert!(s.repo.join(".hone/automation/a-20260102-0200.log").exists());
}

/// The scheduler over one nightly entry (with `catch_up` or without), last seen on day 2 at
/// 01:00 and back on day 4 at 09:00: two nightly starts were missed. Its first message, which
/// must contain `first`, is read.
async fn back_after_two_missed_starts(catch_up: bool, first: &str) -> Setup {
    let back = DAY2 + 2 * 24 * H + 9 * H;
    let mut s = start(vec![entry("n", catch_up, None)], DAY2 + H, back);
    let m = s.next_message().await;
    assert!(m.contains(first), "{m}");
    s
}

#[tokio::test]
async fn a_start_missed_while_off_runs_once_at_startup_with_catch_up() {
    let mut s = back_after_two_missed_starts(
        true,
        "started run n-20260104-0200 (catching up on a missed start)",
    )
    .await;
    s.release().await;
    assert_eq!(s.next_message().await, "run n-20260104-0200 finished");
    assert_eq!(s.calls().lines().count(), 1, "made up once: {}", s.calls());
}

#[tokio::test]
async fn a_start_missed_while_off_is_skipped_without_catch_up() {
    let mut s = back_after_two_missed_starts(
        false,
        "the start at 20260104-0200 UTC was missed while hone was not running; skipped (catch_up = false)",
    )
    .await;
    // The next night runs as usual.
    s.clock.set(DAY2 + 3 * 24 * H + 2 * H);
    let m = s.next_message().await;
    assert!(m.contains("started run n-20260105-0200"), "{m}");
    s.release().await;
    assert_eq!(s.next_message().await, "run n-20260105-0200 finished");
    assert_eq!(s.calls().lines().count(), 1, "{}", s.calls());
}
