//! Charging an agent CLI's turn: what its tool reported, or (a turn cut off, without an
//! account, or with one that cannot be believed) an estimate at the highest rate of the
//! run's earlier turns; with no rate to go by under a budget, the run stops.

use super::super::{prompt, ProposeContext, ProposeError};
use super::CommandProposer;
use crate::exec::{self, Exit};
use crate::presets::{AgentReport, ErrorCause};

/// The least a doubted turn is charged, money and tokens, where a rate gives an estimate.
type Floor = Option<(f64, u64)>;

/// An agent CLI's account of its turn, as hone takes it.
pub(super) struct Account {
    /// What its tool reported, when that can be believed.
    pub(super) report: Option<AgentReport>,
    /// Why what it printed cannot be believed, if it cannot.
    pub(super) doubt: Option<String>,
    /// With a doubt, the least the turn is charged where a rate gives an estimate: the
    /// largest account that reads.
    pub(super) floor: Floor,
}

impl CommandProposer {
    /// The tool's account of its turn, read from its output `lines`, and why it cannot be
    /// believed when it cannot: an account something else wrote into the tool's output is
    /// none (the turn is charged as one that printed no account, and what it says is not
    /// acted on). A tool killed by a signal (or an exit status of 128 and above, as a shell
    /// or bubblewrap says one) after an account was printed is doubted too: a command the
    /// model ran can print a forged account and kill the tool before its own.
    pub(super) fn account(&self, lines: &[String], exit: &Exit) -> Account {
        let none = Account {
            report: None,
            doubt: None,
            floor: None,
        };
        let Some(preset) = self.preset else {
            return none;
        };
        if let Some(why) = preset.doubtful_account(lines) {
            return Account {
                doubt: Some(why),
                floor: preset.largest_account(lines),
                ..none
            };
        }
        let report = preset.parse(lines);
        match report {
            Some(r) if matches!(exit, Exit::Signal(_) | Exit::Code(128..)) => Account {
                doubt: Some("it was killed by a signal after its account was printed".into()),
                floor: Some((r.cost_usd, r.tokens)),
                ..none
            },
            report => Account { report, ..none },
        }
    }

    /// Charges a turn that ended: `report` is the tool's account (`reported` its error, if the
    /// tool exited by itself; `doubt` why an account could not be believed); returns what the
    /// record should say of an estimate.
    pub(super) fn charge_turn(
        &mut self,
        ctx: &ProposeContext<'_>,
        (account, reported): (&Account, Option<&str>),
        (outcome, cut_by_max_time): (&exec::ExecOutcome, bool),
        log_path: &std::path::Path,
    ) -> Result<Option<String>, ProposeError> {
        // A turn the service turned away (overloaded, rate-limited, a refused login) with its
        // whole account, or before it did any work, is charged what the tool reported, not
        // its time at a working turn's rate: a wait of minutes for a 429 spent nothing (and a
        // run of them must not exhaust the budget). One that worked and then broke off is
        // charged as any turn cut off before its account.
        let report = account.report.as_ref();
        let doubt = account.doubt.as_deref();
        let turned_away = reported
            .is_some_and(|e| crate::presets::error_cause(e) != ErrorCause::Turn)
            && report.is_some_and(|r| !r.unfinished || !r.worked);
        Ok(match report {
            Some(r) if turned_away => {
                ctx.add_spend(r.cost_usd, r.tokens);
                None
            }
            _ => self
                .charge(
                    ctx,
                    (report, doubt.map(|_| account.floor)),
                    (outcome, cut_by_max_time),
                    log_path,
                )
                .map_err(|e| doubted(e, doubt))?
                .map(|note| match doubt {
                    Some(why) => {
                        format!("its account of what it spent cannot be believed ({why}); {note}")
                    }
                    None => note,
                }),
        })
    }

    /// Charges the turn what its tool reported, or (see [`charge_unreported`]) what it is
    /// estimated to have spent; returns what the record should say of an estimate. `doubted`
    /// holds, for an account that could not be believed, the least such an estimate is.
    fn charge(
        &mut self,
        ctx: &ProposeContext<'_>,
        (report, doubted): (Option<&AgentReport>, Option<Floor>),
        (outcome, cut_by_max_time): (&exec::ExecOutcome, bool),
        log_path: &std::path::Path,
    ) -> Result<Option<String>, ProposeError> {
        // A turn with no account (cut at its timeout, killed, or that never printed its
        // result), or cut off before its full account, is charged at the highest rate an
        // earlier turn reported, so that a model which keeps spending until it is cut off is
        // not free.
        // A tool that reported tokens but no money counts as unreported under a money
        // budget: its $0 would let the run spend without bound.
        if !self.seeded {
            // A resumed session goes on from the rates of the run's earlier turns.
            ctx.history.iter().for_each(|e| self.rates.add_record(e));
            self.seeded = true;
        }
        let money_budget = ctx.budget.usd_left.is_some();
        let reported = report
            .filter(|r| !(r.no_cost && money_budget))
            .map(|r| (r.cost_usd, r.tokens));
        let secs = outcome.duration.as_secs_f64();
        Ok(match (self.preset, reported) {
            (None, _) => None,
            // A whole account (not one that ended before the turn's usage: that one is
            // charged as a turn cut off, below; nor one of a tool killed by a signal, an exit
            // status of 128 and above under a shell or bubblewrap: something killed it after
            // an account it may not have written).
            (Some(_), Some((usd, tokens)))
                if matches!(outcome.exit, Exit::Code(c) if c < 128)
                    && !report.is_some_and(|r| r.unfinished) =>
            {
                ctx.add_spend(usd, tokens);
                self.rates.add((usd, tokens as f64), secs);
                None
            }
            // Stopped by the user (the run stops anyway): charged as a turn cut off is, when
            // an earlier turn gives a rate (the budget the run resumes with must count it),
            // else what it said it spent.
            (Some(_), reported) if matches!(outcome.exit, Exit::Cancelled) => {
                let reported = doubted.unwrap_or(reported);
                match self.rates.rate_for(secs) {
                    Some(rate) => charge_unreported(
                        ctx,
                        Some(rate),
                        (secs, Ended::Failed),
                        reported,
                        log_path,
                    )?,
                    None => {
                        let (usd, tokens) = reported.unwrap_or((0.0, 0));
                        ctx.add_spend(usd, tokens);
                        None
                    }
                }
            }
            (Some(_), reported) => {
                let rate = self.rates.rate_for(secs);
                // A doubted account is at most a floor under an estimate: with no rate to
                // estimate by, it is no account at all.
                let reported = match doubted {
                    Some(floor) => floor.filter(|_| rate.is_some()),
                    None => reported,
                };
                let ended = match outcome.exit {
                    _ if doubted.is_some() => Ended::Doubted,
                    Exit::TimedOut if cut_by_max_time => Ended::MaxTime,
                    Exit::TimedOut => Ended::Timeout,
                    Exit::Code(0) => Ended::Unreadable,
                    _ => Ended::Failed,
                };
                charge_unreported(ctx, rate, (secs, ended), reported, log_path)?
            }
        })
    }
}

/// A run stopped because a turn's spend is unknown says why it is: its account could not be
/// believed.
fn doubted(e: ProposeError, doubt: Option<&str>) -> ProposeError {
    match (e, doubt) {
        (ProposeError::Fatal(msg), Some(why)) => ProposeError::Fatal(format!(
            "the agent's account of what its turn spent cannot be believed ({why}). {msg}"
        )),
        (e, _) => e,
    }
}

/// The higher of two rates, dollars and tokens each.
pub(super) fn max_rate(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    (a.0.max(b.0), a.1.max(b.1))
}

/// How a turn without an account ended: the advice when it stops a budgeted run.
#[derive(Clone, Copy)]
enum Ended {
    Timeout,
    MaxTime,
    /// It exited 0.
    Unreadable,
    Failed,
    /// Its account could not be believed (see `Preset::doubtful_account`).
    Doubted,
}

/// Charges a preset's turn that ended without its own account of what it spent, or was cut
/// off (timeout, signal) after only part of it (`reported`): the larger of what it reported
/// and its `secs` at `rate`. Returns what it charged, said for the record. With no rate to go
/// by, what it reported is charged; with nothing reported either, nothing when the run has no
/// budget, and the run stops when it has one: hone cannot keep to a budget it cannot count.
fn charge_unreported(
    ctx: &ProposeContext<'_>,
    rate: Option<(f64, f64)>,
    (secs, ended): (f64, Ended),
    reported: Option<(f64, u64)>,
    log_path: &std::path::Path,
) -> Result<Option<String>, ProposeError> {
    let (rep_usd, rep_tokens) = reported.unwrap_or((0.0, 0));
    if let Some((usd_rate, token_rate)) = rate {
        let usd = (usd_rate * secs).max(rep_usd);
        let tokens = ((token_rate * secs).ceil() as u64).max(rep_tokens);
        ctx.add_spend(usd, tokens);
        let what = if reported.is_some() {
            "it was cut off before its full account of what it spent"
        } else {
            "it reported no spend"
        };
        return Ok(Some(format!(
            "{what}: charged ${usd:.4} and {tokens} tokens, its {secs:.1} s at the highest \
             rate of an earlier turn"
        )));
    }
    if reported.is_some() {
        ctx.add_spend(rep_usd, rep_tokens);
        return Ok(None);
    }
    if ctx.budget.usd_left.is_some() || ctx.budget.tokens_left.is_some() {
        let said = crate::util::last_line_of(log_path)
            .map(|l| format!("; its last line: `{}`", prompt::sanitize(&l, 200)))
            .unwrap_or_default();
        let next = match ended {
            _ if read_only(log_path) => READ_ONLY_HINT,
            Ended::Timeout => "Raise [agent] timeout (the turn ran into it)",
            Ended::MaxTime => {
                "The run's max_time ran out during the turn: raise it (hone.toml or --time)"
            }
            Ended::Unreadable => {
                "It exited well but printed no account hone can read (has the tool's output \
                 changed? [agent] command drives another version)"
            }
            Ended::Failed => "See why the agent failed in its log",
            Ended::Doubted => {
                "Something else wrote an account into the tool's output (a command the model ran can open it through /proc): see the agent's log"
            }
        };
        return Err(ProposeError::Fatal(format!(
            "the agent's turn ended after {secs:.1} s without its own account of what it spent \
             (log: {}{said}), and no earlier turn of this run reported one: with max_cost_usd \
             or max_tokens set, hone cannot keep to the budget. {next}; then `hone run` resumes",
            log_path.display()
        )));
    }
    Ok(None)
}

/// What to do when the agent failed to write outside its worktree.
pub(super) const READ_ONLY_HINT: &str = "It could not write outside its worktree: under [sandbox] kind = \"bwrap\" only the worktree, its TMPDIR and (for an agent CLI) a private home of the run's are writable (README: Agent CLI presets)";

/// Whether the end of the agent's log (its last 4 KiB) says a write met a read-only file
/// system.
pub(super) fn read_only(log_path: &std::path::Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(log_path) else {
        return false;
    };
    let len = f.metadata().map_or(0, |m| m.len());
    let mut tail = Vec::new();
    let read = f
        .seek(SeekFrom::Start(len.saturating_sub(4096)))
        .and_then(|_| f.read_to_end(&mut tail));
    let tail = String::from_utf8_lossy(&tail).to_ascii_lowercase();
    read.is_ok() && (tail.contains("read-only file system") || tail.contains("erofs"))
}
