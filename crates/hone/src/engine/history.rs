//! The run's history as the engine holds it in memory: every finished experiment, in the
//! order recorded, the last [`FULL_WINDOW`] of them and every kept one (and the baseline)
//! whole, the older others slimmed to what the loop, the proposers and the outer loop read of
//! them (number, status, objective, configuration, description, commit, tree, runs, cost,
//! tokens, times). What is dropped (the reason, the metrics, the judgement, the log path, the
//! parent commit, the process ids) stays in the store, the truth on disk; a slimmed record is
//! never written back. A resumed run loads its history through the same rule, page by page
//! ([`load`]), so that it holds what the uninterrupted run held.
//!
//! In the serial loop without `[outer]`, once the knobs proposer holds an old slimmed record
//! converted, the record itself is dropped ([`forget`]): what the loop still reads of it is
//! kept in [`Dropped`] (its number, for the stop conditions' counts; its tree, for the gate's
//! duplicate check; its spend, for the budgets), a few bytes where the record took hundreds.
//! So the memory of a long run grows with its keeps, not with its experiments. A record with
//! repeated runs stays (the noise estimate reads every one's runs), without its
//! configuration. A resumed run's proposer converts the loaded history first.
//!
//! What the proposer is shown of the history ([`shown`]) and what is left of the budgets
//! after it ([`budget_left`], [`spent`]) are read here too.

use std::collections::{BTreeMap, HashMap};
use std::ops::ControlFlow;

use crate::propose;
use crate::spec::Spec;
use crate::store::{ExperimentRecord, Status, Store, StoreError};

/// How many of the latest experiments are held whole: more than an LLM proposer's prompt
/// shows (`propose::prompt`, the last 30) and than the outer loop's windows look back.
pub(super) const FULL_WINDOW: usize = 256;

/// Whether `e` is held whole whatever its age: the baseline and kept experiments (the best
/// is one of them; the prompt shows its metrics, a re-test or the final holdout rewrites
/// it), and one still running.
fn held_whole(e: &ExperimentRecord) -> bool {
    matches!(
        e.status(),
        Status::Baseline | Status::Keep | Status::Running
    )
}

/// Drops from `e` what no reader of the in-memory history needs (see the module docs).
pub(super) fn slim(e: &mut ExperimentRecord) {
    if held_whole(e) {
        return;
    }
    e.reason = String::new();
    e.metrics = BTreeMap::new();
    e.judgement = None;
    e.log_path = None;
    e.parent_commit = String::new();
    e.pid = None;
    e.pid_start = None;
    e.description.shrink_to_fit();
    e.runs.shrink_to_fit();
}

/// Appends the outcome `rec` to `history` (replacing the last record when it is the same
/// experiment's), then slims the record that has just left the window of whole ones.
pub(super) fn push(history: &mut Vec<ExperimentRecord>, rec: ExperimentRecord) {
    match history.last_mut() {
        Some(last) if last.n == rec.n => *last = rec,
        _ => history.push(rec),
    }
    if let Some(i) = history.len().checked_sub(FULL_WINDOW + 1) {
        slim(&mut history[i]);
    }
}

/// What is left in memory of the records [`forget`] dropped: what the serial loop without
/// `[outer]` reads of every experiment, however old.
#[derive(Debug, Default)]
pub(super) struct Dropped {
    /// Their numbers as ranges `[start, end)`, ascending, contiguous ones merged (the keeps
    /// held between them split them: a range per keep).
    ranges: Vec<(u64, u64)>,
    count: u64,
    /// The numbers of those `aborted` (an outage, an interruption: rare, so listed), which
    /// the budget and patience do not count.
    aborted: Vec<u64>,
    cost_usd: f64,
    tokens: u64,
    /// The trees of those whose verifier ran, each with the first experiment that had it: by
    /// their 20 bytes folded into 8 ([`tree_id`]; two of 100,000 trees fold alike with a
    /// chance of about 3 in 10^10), half the memory of the whole name.
    trees: HashMap<u64, u64>,
}

impl Dropped {
    /// How many records were dropped.
    pub(super) fn count(&self) -> u64 {
        self.count
    }

    /// How many of them are numbered after `n`.
    pub(super) fn after(&self, n: u64) -> u64 {
        self.ranges
            .iter()
            .map(|&(start, end)| end.saturating_sub(start.max(n.saturating_add(1))))
            .sum()
    }

    /// How many of them count towards `max_experiments` (all but the aborted).
    pub(super) fn counted(&self) -> u64 {
        self.count - self.aborted.len() as u64
    }

    /// How many of those numbered after `n` count towards patience (all but the aborted).
    pub(super) fn counted_after(&self, n: u64) -> u64 {
        let aborted = self.aborted.iter().filter(|&&a| a > n).count() as u64;
        self.after(n).saturating_sub(aborted)
    }

    /// What their proposers spent: dollars and tokens.
    pub(super) fn spent(&self) -> (f64, u64) {
        (self.cost_usd, self.tokens)
    }

    /// The first of them measured with the tree `tree`, if any.
    pub(super) fn measured_with(&self, tree: &str) -> Option<u64> {
        self.trees.get(&tree_id(tree)?).copied()
    }

    /// Adds `e`'s number, spend and tree.
    fn add(&mut self, e: &ExperimentRecord, tree: Option<u64>) {
        match self.ranges.last_mut() {
            Some((_, end)) if *end == e.n => *end += 1,
            _ => self.ranges.push((e.n, e.n + 1)),
        }
        self.count += 1;
        if e.status() == Status::Aborted {
            self.aborted.push(e.n);
        }
        self.cost_usd += e.cost_usd;
        self.tokens = self.tokens.saturating_add(e.tokens);
        if let Some(t) = tree {
            self.trees.entry(t).or_insert(e.n);
        }
    }
}

/// A SHA-1 object name written in hex (40 lower-case digits) folded into 8 bytes, all 20
/// of them mixed in; `None` for anything else.
fn tree_id(hex: &str) -> Option<u64> {
    let digits = hex.as_bytes();
    if digits.len() != 40
        || !digits
            .iter()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return None;
    }
    let mut h: u64 = 0;
    for part in [hex.get(..16)?, hex.get(16..32)?, hex.get(32..)?] {
        let mut state = h ^ u64::from_str_radix(part, 16).ok()?;
        h = crate::util::splitmix64(&mut state);
    }
    Some(h)
}

/// Drops the slimmed records from `from` on (a cursor the caller keeps) up to the experiment
/// numbered `through`, all but the last `keep_last`, into `dropped`: the knobs proposer holds
/// them, converted, by then (`Proposer::holds_configs_through`), and nothing else of the
/// serial loop without `[outer]` reads an old experiment but what [`Dropped`] keeps (the
/// prompt lists the last 30; the baseline and the keeps are held whole; the caller keeps
/// more than `max_consecutive_failures` whole, for that stop's count). A record with
/// repeated runs, or whose tree is not a SHA-1 name, loses only its configuration; so does the
/// run's first record, whatever its status (the proposer's view is anchored on it: see
/// `propose::optimizer::observed`). The store keeps every record. Returns the new cursor.
pub(super) fn forget(
    history: &mut Vec<ExperimentRecord>,
    dropped: &mut Dropped,
    from: usize,
    through: u64,
    keep_last: usize,
) -> usize {
    let end = history.len().saturating_sub(keep_last);
    let (mut read, mut write) = (from.min(end), from.min(end));
    while read < end && history[read].n <= through {
        let first = read == 0;
        let e = &mut history[read];
        read += 1;
        let tree = match e.tree.as_deref() {
            Some(t) if e.status().ran_verifier() => tree_id(t).map(Some),
            _ => Some(None),
        };
        match tree {
            Some(tree) if !first && !held_whole(e) && e.runs.len() <= 1 => dropped.add(e, tree),
            _ => {
                if !held_whole(e) {
                    e.config = None;
                }
                history.swap(write, read - 1);
                write += 1;
            }
        }
    }
    history.drain(write..read);
    write
}

/// How many records [`load`] reads between two calls of its `page` callback.
const PAGE: usize = 1024;

/// A run's history from the store, read a page at a time and slimmed as it is read: what
/// [`push`] would have built from the same records, without ever holding them all whole.
/// `page` is called with the history read so far after every [`PAGE`] records and at the end
/// (the serial loop lets the knobs proposer convert it there, then drops the configurations
/// it holds: a resumed run never holds every configuration twice).
pub(super) fn load(
    store: &Store,
    run_id: i64,
    page: &mut dyn FnMut(&mut Vec<ExperimentRecord>),
) -> Result<Vec<ExperimentRecord>, StoreError> {
    let mut history = Vec::new();
    store.for_each_experiment(run_id, &mut |e| {
        push(&mut history, e);
        if history.len() % PAGE == 0 {
            page(&mut history);
        }
        Ok(ControlFlow::Continue(()))
    })?;
    page(&mut history);
    history.shrink_to_fit();
    Ok(history)
}

/// What the proposer is shown: the finished experiments of `exps` and those `in_flight`, in
/// order. Borrowed as it is when nothing is in flight (the serial loop: its history holds only
/// finished experiments, in order), so that no experiment copies the whole history again.
pub(super) fn shown<'e>(
    exps: &'e [ExperimentRecord],
    in_flight: &[ExperimentRecord],
) -> std::borrow::Cow<'e, [ExperimentRecord]> {
    let ordered = exps.windows(2).all(|w| w[0].n < w[1].n);
    let running = exps.iter().any(|e| e.status() == Status::Running);
    if in_flight.is_empty() && ordered && !running {
        return std::borrow::Cow::Borrowed(exps);
    }
    let mut finished: Vec<ExperimentRecord> = exps
        .iter()
        .filter(|e| e.status() != Status::Running)
        .chain(in_flight)
        .cloned()
        .collect();
    finished.sort_by_key(|e| e.n);
    std::borrow::Cow::Owned(finished)
}

/// What is left of the run's budgets for the next experiment, after `history` and the
/// records dropped from it.
pub(super) fn budget_left(
    spec: &Spec,
    history: &[ExperimentRecord],
    dropped: &Dropped,
) -> propose::Budget {
    let stop = &spec.stop;
    let (usd, tokens) = spent(history, dropped);
    propose::Budget {
        usd_left: stop.max_cost_usd.map(|m| m - usd),
        tokens_left: stop.max_tokens.map(|m| m.saturating_sub(tokens)),
    }
}

/// What the proposers of `history` and of the records dropped from it spent: dollars and
/// tokens.
pub(super) fn spent(history: &[ExperimentRecord], dropped: &Dropped) -> (f64, u64) {
    let (usd, tokens) = dropped.spent();
    (
        usd + history.iter().map(|e| e.cost_usd).sum::<f64>(),
        history
            .iter()
            .fold(tokens, |sum, e| sum.saturating_add(e.tokens)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(n: u64, status: Status) -> ExperimentRecord {
        ExperimentRecord {
            n,
            status: Some(status),
            objective: Some(n as f64),
            reason: format!("decision arithmetic of #{n}"),
            description: format!("try {n}"),
            metrics: BTreeMap::from([("score".to_string(), n as f64)]),
            log_path: Some(format!("/logs/{n}.log")),
            parent_commit: "a".repeat(40),
            config: Some(serde_json::json!({ "A": n })),
            tree: Some(format!("{n:040}")),
            ..Default::default()
        }
    }

    fn json(e: &ExperimentRecord) -> serde_json::Value {
        serde_json::to_value(e).expect("a record serializes")
    }

    /// What a slimmed record must keep: what the loop, the knobs proposer and the outer loop
    /// read of an old experiment.
    fn kept_fields(e: &ExperimentRecord) -> (u64, Status, Option<f64>, String, String) {
        (
            e.n,
            e.status(),
            e.objective,
            e.description.clone(),
            format!("{:?} {:?}", e.config, e.tree),
        )
    }

    /// A history of `total` experiments pushed one by one: the baseline, a keep every 100
    /// (#7, #107, ...), discards otherwise.
    fn pushed(total: u64) -> Vec<ExperimentRecord> {
        let mut history = Vec::new();
        for n in 0..total {
            let status = match n {
                0 => Status::Baseline,
                n if n % 100 == 7 => Status::Keep,
                _ => Status::Discard,
            };
            push(&mut history, record(n, status));
        }
        history
    }

    #[test]
    fn only_the_window_and_the_kept_ones_stay_whole() {
        let total = FULL_WINDOW as u64 * 4;
        let history = pushed(total);
        assert_eq!(history.len() as u64, total);
        let whole = history.iter().filter(|e| !e.reason.is_empty()).count();
        let kept = history.iter().filter(|e| held_whole(e)).count();
        let old_kept = history[..history.len() - FULL_WINDOW]
            .iter()
            .filter(|e| held_whole(e))
            .count();
        // The window, plus the baseline and the keeps older than it: nothing else whole.
        assert_eq!(whole, FULL_WINDOW + old_kept);
        assert!(kept > 1);
        for (i, e) in history.iter().enumerate() {
            let original = record(e.n, e.status());
            assert_eq!(kept_fields(e), kept_fields(&original));
            let in_window = i >= history.len() - FULL_WINDOW;
            if in_window || held_whole(e) {
                assert_eq!(json(e), json(&original), "#{} is held whole", e.n);
            } else {
                assert!(e.reason.is_empty() && e.metrics.is_empty() && e.log_path.is_none());
                assert!(e.parent_commit.is_empty());
            }
        }
    }

    #[test]
    fn old_records_are_dropped_only_as_far_as_the_proposer_holds_them() {
        let total = FULL_WINDOW as u64 * 3;
        let mut history = pushed(total);
        // #9 was measured three times: it stays, without its configuration.
        history[9].runs = vec![1.0, 2.0, 3.0];
        // #11 has no tree a SHA-1 name: it stays too (the duplicate check could not find it).
        history[11].tree = Some("not a tree".to_string());
        // #20 and #30 were aborted (an outage): dropped, but not counted by the budget.
        history[20].status = Some(Status::Aborted);
        history[30].status = Some(Status::Aborted);
        let all = history.clone();
        let mut dropped = Dropped::default();
        // The proposer holds them up to #100 only: nothing after it is dropped.
        let at = forget(&mut history, &mut dropped, 0, 100, FULL_WINDOW);
        // Left of #0..=#100: the baseline, the keep #7, #9 and #11.
        assert_eq!(at, 4);
        assert_eq!(dropped.count(), 97);
        let numbers = |h: &[ExperimentRecord]| h.iter().map(|e| e.n).collect::<Vec<_>>();
        assert_eq!(numbers(&history[..at]), [0, 7, 9, 11]);
        assert!(history[2].config.is_none() && history[3].config.is_none());
        assert!(history[0].config.is_some() && history[1].config.is_some());
        assert_eq!(numbers(&history[at..]), (101..total).collect::<Vec<_>>());
        // The counts the stop conditions read, and the duplicate check, see the dropped ones.
        assert_eq!(dropped.after(7), 91, "#8, #10 and #12..=#100");
        assert_eq!(dropped.after(0), 97);
        assert_eq!(dropped.after(100), 0);
        assert_eq!(dropped.counted(), 95, "all but the aborted #20 and #30");
        assert_eq!(dropped.counted_after(7), 89);
        assert_eq!(dropped.counted_after(25), 74, "#26..=#100 but #30");
        assert_eq!(dropped.counted_after(100), 0);
        let tree_of = |n: usize| all[n].tree.clone().expect("a tree");
        assert_eq!(dropped.measured_with(&tree_of(50)), Some(50));
        assert_eq!(
            dropped.measured_with(&tree_of(7)),
            None,
            "held, not dropped"
        );
        assert_eq!(dropped.measured_with(&tree_of(150)), None);
        // Then as far as the window: every record before it is dropped but the held ones.
        let at = forget(&mut history, &mut dropped, at, u64::MAX, FULL_WINDOW);
        assert_eq!(history.len() - at, FULL_WINDOW);
        let old = (total as usize) - FULL_WINDOW;
        let held = |e: &ExperimentRecord| held_whole(e) || e.n == 9 || e.n == 11;
        let want: Vec<u64> = all
            .iter()
            .filter(|e| (e.n as usize) >= old || held(e))
            .map(|e| e.n)
            .collect();
        assert_eq!(numbers(&history), want);
        assert_eq!(dropped.count() as usize, all.len() - want.len());
        // One more experiment: one more record leaves the window, and the memory.
        push(&mut history, record(total, Status::Discard));
        let before = history.len();
        assert_eq!(
            forget(&mut history, &mut dropped, at, u64::MAX, FULL_WINDOW),
            at
        );
        assert_eq!(history.len(), before - 1);
        assert_eq!(history[at].n as usize, old + 1);
        // The run's first record stays whatever its status (an interrupted baseline #0, the
        // baseline measured again as #1): the proposer's view is anchored on it.
        let mut aborted_first = pushed(total);
        aborted_first[0].status = Some(Status::Aborted);
        aborted_first[1].status = Some(Status::Baseline);
        let at = forget(&mut aborted_first, &mut Dropped::default(), 0, u64::MAX, 16);
        assert_eq!(aborted_first[0].n, 0);
        assert!(aborted_first[0].config.is_none() && aborted_first[1].config.is_some());
        assert_eq!(aborted_first.len() - at, 16);
        // A longer stop on failures in a row keeps as many whole.
        let mut long = pushed(total);
        let at = forget(&mut long, &mut Dropped::default(), 0, u64::MAX, 600);
        assert_eq!(long.len() - at, 600);
    }

    #[test]
    fn a_record_stays_small() {
        // What every record held in memory costs before its heap (the judgement boxed: most
        // have none). Growing it grows a long run's memory by as much per experiment.
        assert!(std::mem::size_of::<ExperimentRecord>() <= 400);
    }

    #[test]
    fn the_last_record_is_replaced_not_appended() {
        let mut history = vec![record(0, Status::Baseline)];
        let mut again = record(0, Status::Baseline);
        again.objective = Some(5.0);
        push(&mut history, again);
        assert_eq!(history.len(), 1);
        assert_eq!(history[0].objective, Some(5.0));
    }

    #[test]
    fn a_resumed_run_loads_what_the_running_one_held() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = Store::open(&dir.path().join("hone.db")).expect("the store opens");
        let run = store
            .create_plain_run("t", &"b".repeat(40), "score")
            .expect("a run is created");
        let mut live = Vec::new();
        for n in 0..(FULL_WINDOW as u64 + 300) {
            let status = if n == 0 {
                Status::Baseline
            } else {
                Status::Discard
            };
            let mut rec = record(n, status);
            rec.judgement = None;
            store
                .put_experiment(run.id, &rec)
                .expect("a record is written");
            push(&mut live, rec);
        }
        let mut pages = 0;
        let loaded = load(&store, run.id, &mut |_| pages += 1).expect("the history loads");
        assert_eq!(pages, 1 + (FULL_WINDOW + 300) / PAGE);
        let all = |h: &[ExperimentRecord]| h.iter().map(json).collect::<Vec<_>>();
        assert_eq!(all(&loaded), all(&live));
        // The store still holds every record whole.
        let stored = store.experiments(run.id).expect("the records load");
        assert!(stored.iter().all(|e| !e.reason.is_empty()));
    }
}
