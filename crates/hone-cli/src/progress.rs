//! The live progress line on a terminal: what the current experiment is doing and for how long
//! (against the verifier's timeout), the verifier's last output line, experiments done of the
//! budget, active time used and left, and an estimate of the time to the end. A ticker thread
//! redraws it every second; permanent lines are printed with the line cleared and the lock
//! held, so the two never interleave. Nothing of this is drawn when stderr is not a terminal.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hone::engine::Budget;
use hone::spec::format_duration;

/// What the run is doing now.
#[derive(Clone, Debug)]
pub struct Phase {
    pub n: u64,
    /// "proposing", "verifying".
    pub what: &'static str,
    /// The proposal's description, once known.
    pub detail: Option<String>,
    pub since: Instant,
    /// The verifier's log, while verifying.
    pub log: Option<PathBuf>,
}

/// Everything the line is drawn from.
#[derive(Debug)]
pub struct State {
    pub phase: Option<Phase>,
    pub budget: Option<Budget>,
    /// Experiments finished in the run (before this session too).
    pub done: u64,
    /// When this session started.
    pub session_start: Instant,
    /// The candidates finished in this session and since when they are counted (the estimate
    /// leaves the baseline out: it has no agent's turn, and would make the first estimate
    /// far too short).
    pub candidates_here: u64,
    pub candidates_since: Instant,
    /// When the last experiment of this session finished.
    pub last_done: Option<Instant>,
    /// What the experiments of this session spent: dollars and tokens.
    pub cost_here: f64,
    pub tokens_here: u64,
    /// A transient line is on the screen.
    drawn: bool,
}

/// The live line and its ticker.
pub struct Progress {
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    ticker: Option<JoinHandle<()>>,
    enabled: bool,
}

impl Progress {
    /// A live line on stderr when `enabled` (a terminal); else a silent state holder.
    pub fn new(enabled: bool) -> Progress {
        let state = Arc::new(Mutex::new(State {
            phase: None,
            budget: None,
            done: 0,
            session_start: Instant::now(),
            candidates_here: 0,
            candidates_since: Instant::now(),
            last_done: None,
            cost_here: 0.0,
            tokens_here: 0,
            drawn: false,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = enabled.then(|| {
            let (state, stop) = (Arc::clone(&state), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::park_timeout(Duration::from_secs(1));
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    draw(&mut lock(&state));
                }
            })
        });
        Progress {
            state,
            stop,
            ticker,
            enabled,
        }
    }

    /// Changes the state (and redraws at once).
    pub fn update(&self, change: impl FnOnce(&mut State)) {
        let mut s = lock(&self.state);
        change(&mut s);
        if self.enabled {
            draw(&mut s);
        }
    }

    /// Prints a permanent line (or several) with the live line out of the way.
    pub fn print(&self, print: impl FnOnce()) {
        let mut s = lock(&self.state);
        clear(&mut s);
        print();
    }

    /// Removes the live line.
    pub fn clear(&self) {
        clear(&mut lock(&self.state));
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            t.thread().unpark();
            let _ = t.join();
        }
        self.clear();
    }
}

/// The state, even if a thread panicked while holding it (it is only display state).
fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

fn clear(s: &mut State) {
    if s.drawn {
        let mut err = std::io::stderr();
        let _ = write!(err, "\r\x1b[2K");
        let _ = err.flush();
        s.drawn = false;
    }
}

fn draw(s: &mut State) {
    let Some(phase) = &s.phase else {
        clear(s);
        return;
    };
    let last = phase.log.as_ref().and_then(|p| hone::util::last_line_of(p));
    let width = terminal_width().unwrap_or(100).max(20);
    let line = fitted(s, Instant::now(), last.as_deref(), width - 1);
    let mut err = std::io::stderr();
    let _ = write!(err, "\r\x1b[2K{line}");
    let _ = err.flush();
    s.drawn = true;
}

/// [`render`] in at most `width` characters: the verifier's last output (or the proposal's
/// description) is cut first, so that the spend and the ETA at the end stay in view on a
/// narrow terminal; then the line itself.
pub fn fitted(s: &State, now: Instant, last_output: Option<&str>, width: usize) -> String {
    let mut line = render(s, now, last_output);
    if line.chars().count() > width {
        // What the line holds without the output, and the room left for it (after its ` · `).
        let bare = render_with(s, now, None, (0, false)).chars().count();
        let room = width.saturating_sub(bare + 3).min(DETAIL_MAX);
        line = render_with(s, now, last_output, (room, false));
    }
    if line.chars().count() > width {
        // Shorter words for the rest: `#12 verifying 1m05s/5m00s`, the time left alone.
        line = render_with(s, now, None, (0, true));
    }
    line.chars().take(width).collect()
}

/// The most of the verifier's last output (or the proposal's description) the line shows.
const DETAIL_MAX: usize = 60;

/// The live line at `now`: `#12 verifying 1m05s of 5m · step 400 loss 2.31 · 11/100 done ·
/// 12m used, 48m left · ETA 37m`.
pub fn render(s: &State, now: Instant, last_output: Option<&str>) -> String {
    render_with(s, now, last_output, (DETAIL_MAX, false))
}

/// [`render`] with at most `detail` characters of the output or description (fewer than 8:
/// none), in shorter words when `compact`.
fn render_with(
    s: &State,
    now: Instant,
    last_output: Option<&str>,
    (detail, compact): (usize, bool),
) -> String {
    let mut parts = Vec::new();
    if let Some(p) = &s.phase {
        let elapsed = short(now.saturating_duration_since(p.since));
        let mut head = if compact {
            format!("#{} {} {elapsed}", p.n, p.what)
        } else {
            format!("  #{:<4} {} {elapsed}", p.n, p.what)
        };
        if let (Some(b), "verifying") = (&s.budget, p.what) {
            let of = if compact { "/" } else { " of " };
            head.push_str(&format!("{of}{}", short(secs(b.timeout_s))));
        }
        parts.push(head);
        match (last_output, &p.detail) {
            _ if detail < 8 => {}
            (Some(l), _) if p.what == "verifying" => parts.push(printable(l, detail)),
            (_, Some(d)) => parts.push(printable(d, detail)),
            _ => {}
        }
    }
    if let Some(b) = &s.budget {
        let done = if compact { "" } else { " done" };
        parts.push(format!("{}/{}{done}", s.done, b.max_experiments));
        let here = now.saturating_duration_since(s.session_start);
        let used = b.used_s + here.as_secs_f64();
        let left_time = b.max_time_s.map(|m| (m - used).max(0.0));
        match left_time {
            Some(left) if compact => parts.push(format!("{} left", short(secs(left)))),
            Some(left) => parts.push(format!(
                "{} used, {} left",
                short(secs(used)),
                short(secs(left))
            )),
            None => parts.push(format!("{} used", short(secs(used)))),
        }
        parts.extend(spend(b, s));
        if let (true, Some(last)) = (s.candidates_here > 0, s.last_done) {
            // The mean candidate of this session, times those left, less what the current
            // one has run already.
            let per = last
                .saturating_duration_since(s.candidates_since)
                .as_secs_f64()
                / s.candidates_here as f64;
            let current = now.saturating_duration_since(last).as_secs_f64();
            let remaining =
                (b.max_experiments.saturating_sub(s.done) as f64 * per - current).max(0.0);
            let eta = left_time.map_or(remaining, |l| remaining.min(l));
            parts.push(format!("ETA {}", short(secs(eta))));
        }
    }
    parts.join(" · ")
}

/// The money and tokens spent, against their limits where `[stop]` sets them: `$0.42 of $5`,
/// `12300 of 100000 tokens`. Nothing for what neither costs nor has a limit.
fn spend(b: &Budget, s: &State) -> Vec<String> {
    let cost = b.cost_before + s.cost_here;
    let tokens = b.tokens_before.saturating_add(s.tokens_here);
    let mut parts = Vec::new();
    match b.max_cost_usd {
        Some(max) => parts.push(format!("${cost:.2} of ${max}")),
        None if cost > 0.0 => parts.push(format!("${cost:.2}")),
        None => {}
    }
    if let Some(max) = b.max_tokens {
        parts.push(format!("{tokens} of {max} tokens"));
    }
    parts
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(if s.is_finite() {
        s.clamp(0.0, 3.15e9)
    } else {
        0.0
    })
}

/// Whole seconds: `0s`, `42s`, `1m05s`, `2h03m` (a line redrawn every second has no use for
/// milliseconds or tenths).
fn short(d: Duration) -> String {
    match d.as_secs() {
        s @ 0..=59 => format!("{s}s"),
        s => format_duration(Duration::from_secs(s)),
    }
}

/// `text` with control characters (terminal escapes included) shown escaped
/// ([`crate::output::terminal_safe`]), cut to `max` characters.
fn printable(text: &str, max: usize) -> String {
    let clean = crate::output::terminal_safe(text.trim()).into_owned();
    if clean.chars().count() <= max {
        clean
    } else {
        hone::util::cut_chars(&clean, max - 1)
    }
}

/// The terminal's width in columns, if stderr is one.
fn terminal_width() -> Option<usize> {
    // SAFETY: TIOCGWINSZ fills a winsize struct we own; failure leaves it zeroed.
    let cols = unsafe {
        let mut ws: libc::winsize = std::mem::zeroed();
        if libc::ioctl(2, libc::TIOCGWINSZ, &mut ws) == 0 {
            ws.ws_col as usize
        } else {
            0
        }
    };
    (cols > 0).then_some(cols)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(now: Instant) -> State {
        State {
            phase: Some(Phase {
                n: 12,
                what: "verifying",
                detail: Some("raise lr".into()),
                since: now - Duration::from_secs(65),
                log: None,
            }),
            budget: Some(Budget {
                max_experiments: 100,
                max_time_s: Some(3600.0),
                used_s: 600.0,
                timeout_s: 300.0,
                max_cost_usd: None,
                max_tokens: None,
                cost_before: 0.0,
                tokens_before: 0,
            }),
            done: 11,
            session_start: now - Duration::from_secs(120),
            candidates_here: 4,
            candidates_since: now - Duration::from_secs(120),
            last_done: Some(now),
            cost_here: 0.0,
            tokens_here: 0,
            drawn: false,
        }
    }

    #[test]
    fn the_line_shows_elapsed_against_timeout_output_budget_time_and_eta() {
        let now = Instant::now();
        let s = state(now);
        let line = render(&s, now, Some("step 400 loss 2.31"));
        assert_eq!(
            line,
            "  #12   verifying 1m05s of 5m00s · step 400 loss 2.31 · 11/100 done · 12m00s used, 48m00s left · ETA 44m30s"
        );
        // 30 s per experiment this session, 89 to go: 44.5 min, under the 48 min left; the
        // time left caps the estimate.
        let mut s = state(now);
        s.candidates_here = 1;
        let line = render(&s, now, None);
        assert!(line.ends_with("48m00s left · ETA 48m00s"), "{line}");
        let mut s = state(now);
        s.budget = Some(Budget {
            max_time_s: None,
            ..s.budget.clone().expect("set above")
        });
        let line = render(&s, now, None);
        assert!(line.ends_with("12m00s used · ETA 44m30s"), "{line}");
        assert!(line.contains("· raise lr ·"), "{line}");
    }

    #[test]
    fn the_line_shows_what_was_spent_against_the_limits() {
        let now = Instant::now();
        let mut s = state(now);
        // Earlier sessions' spend counts with this one's.
        s.budget = Some(Budget {
            max_cost_usd: Some(5.0),
            max_tokens: Some(100_000),
            cost_before: 0.25,
            tokens_before: 2000,
            ..s.budget.clone().expect("set above")
        });
        s.cost_here = 0.17;
        s.tokens_here = 10_300;
        let line = render(&s, now, None);
        assert!(
            line.contains("48m00s left · $0.42 of $5 · 12300 of 100000 tokens · ETA"),
            "{line}"
        );
        // No limits: the spend alone, when there is one.
        let mut s = state(now);
        s.cost_here = 0.5;
        assert!(render(&s, now, None).contains("left · $0.50 · ETA"));
        s.cost_here = 0.0;
        assert!(!render(&s, now, None).contains('$'));
    }

    #[test]
    fn on_a_narrow_terminal_the_output_is_cut_before_the_spend_and_the_eta() {
        let now = Instant::now();
        let mut s = state(now);
        s.budget = Some(Budget {
            max_cost_usd: Some(5.0),
            ..s.budget.clone().expect("set above")
        });
        s.candidates_here = 1;
        let output = "step 400 | loss 2.3141 | lr 0.0003 | tokens/s 91234 | mfu 41.2% | dt 812ms";
        let line = fitted(&s, now, Some(output), 79);
        assert_eq!(
            line,
            "#12 verifying 1m05s/5m00s · 11/100 · 48m00s left · $0.00 of $5 · ETA 48m00s"
        );
        // Wider: the output is cut, to what fits.
        let line = fitted(&s, now, Some(output), 120);
        assert!(
            line.contains("· step 400 | loss") && line.ends_with("ETA 48m00s"),
            "{line}"
        );
        assert!(line.chars().count() <= 120, "{line}");
        // A short output a little too long is cut by what is over, not dropped for the
        // shorter words.
        let line = fitted(&s, now, Some("step 400 loss 2.31"), 118);
        assert!(
            line.starts_with("  #12   verifying 1m05s of 5m00s · step 400 loss"),
            "{line}"
        );
        assert!(
            line.ends_with("ETA 48m00s") && line.chars().count() <= 118,
            "{line}"
        );
        // Where even that does not fit, shorter words, then the line is cut.
        let line = fitted(&s, now, Some(output), 60);
        assert_eq!(
            line,
            "#12 verifying 1m05s/5m00s · 11/100 · 48m00s left · $0.00 of "
        );
        // A wide terminal shows it all.
        assert_eq!(
            fitted(&s, now, Some(output), 300),
            render(&s, now, Some(output))
        );
    }

    #[test]
    fn a_phase_just_begun_reads_in_whole_seconds() {
        let now = Instant::now();
        let mut s = state(now);
        if let Some(p) = s.phase.as_mut() {
            p.since = now;
        }
        let line = render(&s, now, None);
        assert!(
            line.starts_with("  #12   verifying 0s of 5m00s ·"),
            "{line}"
        );
        if let Some(p) = s.phase.as_mut() {
            p.since = now - Duration::from_millis(42_700);
        }
        let line = render(&s, now, None);
        assert!(line.starts_with("  #12   verifying 42s of"), "{line}");
    }

    #[test]
    fn output_with_terminal_escapes_is_shown_inert_and_cut() {
        let now = Instant::now();
        let s = state(now);
        let line = render(&s, now, Some("\x1b]0;owned\x07 loss 1"));
        assert!(!line.contains('\x1b'), "{line:?}");
        assert!(line.contains("\\x1b]0;owned\\x07 loss 1"), "{line:?}");
        let long = "x".repeat(500);
        let line = render(&s, now, Some(&long));
        assert!(line.contains(&format!("{}…", "x".repeat(59))), "{line}");
    }
}
