//! What LLM calls may spend: the run's budgets as one experiment sees them ([`Budget`],
//! [`Meter`]), what the experiment has spent ([`Spend`]), and the run-wide [`Ledger`] that
//! calls made at the same time share (a parallel run: the coordinator's proposals and the
//! slots' reviews), so that together they cannot cross the budget either.

use std::cell::Cell;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

/// What is left of the run's budgets (`None`: no limit).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Budget {
    pub usd_left: Option<f64>,
    pub tokens_left: Option<u64>,
}

impl Budget {
    /// Whether a call whose worst case is `(dollars, tokens)` fits in what is left.
    pub fn covers(&self, (usd, tokens): (f64, u64)) -> bool {
        !self.usd_left.is_some_and(|l| usd > l) && !self.tokens_left.is_some_and(|l| tokens > l)
    }

    /// What is left after spending `(dollars, tokens)`.
    pub fn less(&self, (usd, tokens): (f64, u64)) -> Budget {
        Budget {
            usd_left: self.usd_left.map(|l| l - usd),
            tokens_left: self.tokens_left.map(|l| l.saturating_sub(tokens)),
        }
    }
}

/// What one experiment has spent (its proposer and its reviewer together), and the run's
/// [`Ledger`] when other experiments spend at the same time.
#[derive(Debug, Default)]
pub struct Spend {
    own: Cell<(f64, u64)>,
    ledger: Option<Arc<Ledger>>,
    /// Where the experiment's spend is kept on disk as it grows, a call that is out counted
    /// at its worst case, and what the experiment had spent before this (see
    /// [`Spend::with_journal`]).
    journal: Option<(std::path::PathBuf, (f64, u64))>,
}

impl Spend {
    /// Nothing spent yet; every charge also goes to `ledger`, when there is one.
    pub fn new(ledger: Option<Arc<Ledger>>) -> Spend {
        Spend {
            own: Cell::new((0.0, 0)),
            ledger,
            journal: None,
        }
    }

    /// Keeps the experiment's whole spend in the file `path` as it grows: `before` (what it
    /// had spent already) plus this spend, plus a call's worst case while the call is out. A
    /// hone killed during a call leaves there what the provider may bill; resuming takes it
    /// into the experiment's record ([`read_journal`]), so a crash loses no spend.
    pub fn with_journal(mut self, path: std::path::PathBuf, before: (f64, u64)) -> Spend {
        self.journal = Some((path, before));
        self
    }

    /// Writes the journal: the spend so far plus `out` (a call's worst case, or nothing).
    fn write_journal(&self, out: (f64, u64)) {
        let Some((path, before)) = &self.journal else {
            return;
        };
        let (u, t) = self.own.get();
        let text = format!(
            "{} {}\n",
            before.0 + u + out.0,
            before.1.saturating_add(t).saturating_add(out.1)
        );
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        // Whole or not at all: a kill mid-write (or a power cut: synced before the rename)
        // leaves the last whole figure.
        let tmp = path.with_extension("tmp");
        let written = std::fs::File::create(&tmp).and_then(|mut f| {
            std::io::Write::write_all(&mut f, text.as_bytes())?;
            f.sync_all()
        });
        if written.is_ok() {
            let _ = std::fs::rename(&tmp, path);
        }
    }

    /// Records money and tokens spent.
    pub fn add(&self, usd: f64, tokens: u64) {
        let (u, t) = self.own.get();
        self.own.set((u + usd, t.saturating_add(tokens)));
        if let Some(l) = &self.ledger {
            l.charge(usd, tokens);
        }
        self.write_journal((0.0, 0));
    }

    /// What this experiment has spent so far.
    pub fn get(&self) -> (f64, u64) {
        self.own.get()
    }

    /// The run-wide ledger this spend is charged to, if any.
    pub fn ledger(&self) -> Option<&Ledger> {
        self.ledger.as_deref()
    }
}

/// The run's budgets as one LLM call sees them: what was left when the experiment started
/// (with a [`Ledger`]: when the ledger was opened), and what has been spent since.
#[derive(Clone, Copy)]
pub struct Meter<'a> {
    pub budget: Budget,
    pub spent: &'a Spend,
}

impl<'a> Meter<'a> {
    /// Records money and tokens spent.
    pub fn add(&self, usd: f64, tokens: u64) {
        self.spent.add(usd, tokens);
    }

    /// Money and tokens this experiment has spent so far.
    pub fn spent(&self) -> (f64, u64) {
        self.spent.get()
    }

    /// Holds a call's worst case `(dollars, tokens)` against what is left, until the returned
    /// hold is dropped (charge the call first); what is left, when it does not fit. Without a
    /// ledger, what is left is the budget less this experiment's spend; with one, less what
    /// every experiment charged and holds now.
    pub fn hold(&self, worst: (f64, u64)) -> Result<Option<Hold<'a>>, Budget> {
        let held = match self.spent.ledger() {
            Some(ledger) => ledger.hold(worst).map(Some),
            None => {
                let left = self.budget.less(self.spent());
                if left.covers(worst) {
                    Ok(None)
                } else {
                    Err(left)
                }
            }
        };
        if held.is_ok() {
            // The call goes out next: what it may cost is on disk before it does.
            self.spent.write_journal(worst);
        }
        held
    }
}

/// What a spend journal ([`Spend::with_journal`]) says an experiment spent: (dollars,
/// tokens); `None` when there is none, or it cannot be read.
pub fn read_journal(path: &std::path::Path) -> Option<(f64, u64)> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut parts = text.split_whitespace();
    let usd: f64 = parts.next()?.parse().ok()?;
    let tokens: u64 = parts.next()?.parse().ok()?;
    usd.is_finite().then_some((usd.max(0.0), tokens))
}

/// The spend of a run whose experiments make LLM calls at the same time. Each call holds its
/// worst case while it is out and is charged after. A call that does not fit in what the
/// charges leave is refused; one that fits but for what other calls hold waits for them to be
/// charged (a worst case is often twice what a call costs: refusing then would stop a run
/// with money left). Thread-safe.
#[derive(Debug)]
pub struct Ledger {
    /// What was left of the run's budgets when the ledger was opened.
    left: Budget,
    tally: Mutex<Tally>,
    /// Told whenever a hold is let go.
    released: Condvar,
}

#[derive(Debug, Default)]
struct Tally {
    spent: (f64, u64),
    /// What the holds out now add up to, and how many they are: with none out, nothing is
    /// held (a float sum need not come back to exactly 0, and a call must never wait on what
    /// such a residue seems to hold).
    held: (f64, u64),
    out: usize,
    /// Calls waiting for holds to be let go.
    waiting: usize,
}

impl Ledger {
    /// A ledger with `left` to spend and nothing spent.
    pub fn new(left: Budget) -> Ledger {
        Ledger {
            left,
            tally: Mutex::new(Tally::default()),
            released: Condvar::new(),
        }
    }

    /// What was left when the ledger was opened.
    pub fn opened_with(&self) -> Budget {
        self.left
    }

    /// Money and tokens charged since the ledger was opened.
    pub fn spent(&self) -> (f64, u64) {
        self.tally().spent
    }

    /// Whether nothing is left to spend: no call, however small, can be made.
    pub fn exhausted(&self) -> bool {
        let t = self.tally();
        let left = self.left.less(t.spent);
        left.usd_left.is_some_and(|l| l <= 0.0) || left.tokens_left == Some(0)
    }

    fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        // A thread that panicked while charging left whole numbers behind: go on with them.
        self.tally.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn charge(&self, usd: f64, tokens: u64) {
        let mut t = self.tally();
        t.spent = (t.spent.0 + usd, t.spent.1.saturating_add(tokens));
    }

    fn hold(&self, worst: (f64, u64)) -> Result<Hold<'_>, Budget> {
        let mut t = self.tally();
        loop {
            let charged = self.left.less(t.spent);
            if !charged.covers(worst) {
                return Err(charged);
            }
            if t.out == 0 || charged.less(t.held).covers(worst) {
                break;
            }
            // Every hold is let go once its call is over (each is bounded by its timeout).
            t.waiting += 1;
            t = self
                .released
                .wait(t)
                .unwrap_or_else(PoisonError::into_inner);
            t.waiting -= 1;
        }
        t.held = (t.held.0 + worst.0, t.held.1 + worst.1);
        t.out += 1;
        Ok(Hold {
            ledger: self,
            worst,
        })
    }
}

/// A call's worst case held on a [`Ledger`] while the call is out; released when dropped.
#[derive(Debug)]
pub struct Hold<'a> {
    ledger: &'a Ledger,
    worst: (f64, u64),
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        let mut t = self.ledger.tally();
        t.out = t.out.saturating_sub(1);
        t.held = match t.out {
            0 => (0.0, 0),
            _ => (
                (t.held.0 - self.worst.0).max(0.0),
                t.held.1.saturating_sub(self.worst.1),
            ),
        };
        drop(t);
        self.ledger.released.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dollars(usd: f64) -> Budget {
        Budget {
            usd_left: Some(usd),
            tokens_left: None,
        }
    }

    #[test]
    fn the_journal_holds_the_spend_with_a_call_out_at_its_worst_case() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("spend").join("3");
        let spent = Spend::new(None).with_journal(path.clone(), (0.5, 100));
        let meter = Meter {
            budget: dollars(10.0),
            spent: &spent,
        };
        assert_eq!(read_journal(&path), None, "nothing written before a call");
        let hold = meter.hold((0.25, 40)).expect("fits");
        assert_eq!(
            read_journal(&path),
            Some((0.75, 140)),
            "the call out, at its worst"
        );
        meter.add(0.125, 20);
        drop(hold);
        assert_eq!(
            read_journal(&path),
            Some((0.625, 120)),
            "charged what it cost"
        );
    }

    #[test]
    fn without_a_ledger_a_call_fits_in_the_budget_less_the_experiments_spend() {
        let spent = Spend::new(None);
        let meter = Meter {
            budget: dollars(0.30),
            spent: &spent,
        };
        assert!(meter.hold((0.25, 10)).is_ok());
        meter.add(0.10, 10);
        assert_eq!(meter.hold((0.25, 10)).err(), Some(dollars(0.30 - 0.10)));
    }

    #[test]
    fn every_experiments_charges_are_the_runs() {
        let ledger = Arc::new(Ledger::new(dollars(0.30)));
        let (a, b) = (
            Spend::new(Some(ledger.clone())),
            Spend::new(Some(ledger.clone())),
        );
        let (ma, mb) = (
            Meter {
                budget: dollars(0.30),
                spent: &a,
            },
            Meter {
                budget: dollars(0.30),
                spent: &b,
            },
        );
        // The first holds its worst case; it costs less, is charged and lets go.
        let first = ma.hold((0.20, 100));
        assert!(matches!(first, Ok(Some(_))));
        ma.add(0.05, 50);
        drop(first);
        // The second fits in what the first's charge left.
        let second = mb.hold((0.20, 100));
        assert!(matches!(second, Ok(Some(_))));
        mb.add(0.20, 10);
        drop(second);
        // A third does not fit in what both charges left: refused, saying what is left.
        let left = ma.hold((0.10, 0)).err().and_then(|b| b.usd_left);
        assert!(left.is_some_and(|l| (l - 0.05).abs() < 1e-12), "{left:?}");
        // Both experiments' spend is the run's.
        assert_eq!(a.get(), (0.05, 50));
        assert_eq!(b.get(), (0.20, 10));
        let (usd, tokens) = ledger.spent();
        assert!((usd - 0.25).abs() < 1e-12 && tokens == 60);
        assert!(!ledger.exhausted());
        a.add(0.05, 0);
        assert!(ledger.exhausted());
    }

    #[test]
    fn a_call_that_fits_but_for_what_others_hold_waits_for_them() {
        let ledger = Ledger::new(dollars(0.30));
        let first = ledger.hold((0.20, 0)).unwrap();
        std::thread::scope(|s| {
            let waiting = s.spawn(|| ledger.hold((0.20, 0)).map(|h| h.worst));
            // The second call waits (it is not refused) while the first is out.
            while ledger.tally().waiting == 0 {
                std::thread::yield_now();
            }
            assert!(!waiting.is_finished());
            // The first call cost less than its worst case; once it lets go, the second fits.
            ledger.charge(0.05, 0);
            drop(first);
            assert_eq!(waiting.join().unwrap().ok(), Some((0.20, 0)));
        });
        // One that the charges alone leave no room for is refused, nothing held.
        ledger.charge(0.10, 0);
        let left = ledger.hold((0.20, 0)).err().and_then(|b| b.usd_left);
        assert!(left.is_some_and(|l| (l - 0.15).abs() < 1e-12), "{left:?}");
    }

    #[test]
    fn holds_let_go_leave_nothing_held_however_the_sums_round() {
        // 0.1 + 0.3 - 0.1 - 0.3 is not 0 in floating point; with no hold out, nothing is held,
        // and a call that fits what the charges leave to the last bit is never kept waiting.
        let ledger = Ledger::new(dollars(0.5));
        drop((
            ledger.hold((0.1, 0)).unwrap(),
            ledger.hold((0.3, 0)).unwrap(),
        ));
        assert_eq!(ledger.tally().held, (0.0, 0));
        assert!(ledger.hold((0.5, 0)).is_ok());
    }

    #[test]
    fn a_ledger_is_shared_across_threads() {
        let ledger = Arc::new(Ledger::new(Budget {
            usd_left: None,
            tokens_left: Some(1000),
        }));
        std::thread::scope(|s| {
            for _ in 0..4 {
                let ledger = ledger.clone();
                s.spawn(move || {
                    let spend = Spend::new(Some(ledger));
                    for _ in 0..25 {
                        spend.add(0.0, 10);
                    }
                });
            }
        });
        assert_eq!(ledger.spent().1, 1000);
        assert!(ledger.exhausted());
    }
}
