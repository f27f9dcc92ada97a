//! Repairing what a crash left, when a run is resumed (see the module docs of the engine):
//! each `running` experiment becomes `aborted` (whatever was started for it killed or
//! cancelled, its commit taken from its archive ref), the slots' worktrees go, refs and
//! recorded commits whose objects `git gc` deleted are dropped with a warning, missing archive
//! refs are written, and a recorded keep whose branch move was lost is applied.

use std::ops::ControlFlow;

use crate::exec;
use crate::report::best_experiment;
use crate::store::{now, ExperimentRecord, Status, Store, StoreError};
use crate::workspace::{GitError, RefListing};

use super::executor::slurm;
use super::state::{archive_ref, branch_ref};
use super::{parallel, Engine, EngineError, Event, Mismatch};

/// What recovery reads of a run's records, from one pass over the store that never holds
/// them all: the baseline, the keeps and the running experiments whole (the best is among
/// the first two; the third are repaired), and every experiment's number and candidate
/// commit, in order. (Holding every record, even slimmed, made a resumed run's memory peak at
/// twice the running one's.)
struct Records {
    whole: Vec<ExperimentRecord>,
    commits: Vec<(u64, Option<String>)>,
    /// When the last experiment that finished did (the run's loop time was last written
    /// then), if any did.
    last_finish: Option<f64>,
    /// The rates at which the run's agent CLI turns spent.
    rates: crate::propose::command::TurnRates,
}

impl Records {
    fn scan(store: &Store, run_id: i64) -> Result<Records, StoreError> {
        let (mut whole, mut commits) = (Vec::new(), Vec::new());
        let mut last_finish: Option<f64> = None;
        let mut rates = crate::propose::command::TurnRates::default();
        store.for_each_experiment(run_id, &mut |e| {
            commits.push((e.n, e.candidate_commit.clone()));
            rates.add_record(&e);
            if let (true, Some(f)) = (e.status() != Status::Running, e.finished_at) {
                last_finish = Some(last_finish.map_or(f, |l: f64| l.max(f)));
            }
            if matches!(
                e.status(),
                Status::Baseline | Status::Keep | Status::Running
            ) {
                whole.push(e);
            }
            Ok(ControlFlow::Continue(()))
        })?;
        Ok(Records {
            whole,
            commits,
            last_finish,
            rates,
        })
    }

    /// Experiment `n`'s candidate commit is now `commit`.
    fn set_commit(&mut self, n: u64, commit: Option<String>) {
        if let Some(entry) = self.commits.iter_mut().rev().find(|(m, _)| *m == n) {
            entry.1 = commit;
        }
    }
}

impl Engine<'_> {
    /// Repairs what a crash left behind (see the module docs).
    pub(super) fn recover(&mut self) -> Result<(), EngineError> {
        let tag = self.run.tag.clone();
        let mut recs = Records::scan(&self.store, self.run.id)?;
        self.remove_dangling_refs(&recs.commits)?;
        let running: Vec<usize> = (0..recs.whole.len())
            .filter(|&i| recs.whole[i].status() == Status::Running)
            .collect();
        // When each experiment cut off started and (by its log's last write) ended.
        let mut cut_off: Vec<(f64, f64)> = Vec::new();
        for i in running {
            let e = &mut recs.whole[i];
            let killed = self.stop_leftovers(e)?;
            // Its archive ref is written before its row holds the commit: a crash between
            // the two is completed from the ref.
            commit_from_ref(&self.verifier.git, e, &archive_ref(&tag, e.n))?;
            // What its verifier printed before the stop is shown with it (`hone show`), and
            // its time runs to the log's last write (not to this resume).
            let log = self.log_of(e.n);
            if let (None, Ok(meta)) = (&e.log_path, std::fs::metadata(&log)) {
                e.log_path = Some(log);
                let last_write = meta
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map(|d| d.as_secs_f64());
                if let Some(end) = last_write.filter(|&end| e.total_ms == 0 && end > e.started_at) {
                    e.total_ms = ((end - e.started_at) * 1000.0) as u64;
                    // Its verifier wrote that log: it was verifying for what its proposal and
                    // gate did not take.
                    if e.verify_ms == 0 {
                        e.verify_ms = e.total_ms.saturating_sub(e.propose_ms + e.gate_ms);
                    }
                }
            }
            cut_off.push((e.started_at, self.last_activity(e.n, e.started_at)));
            // What its model calls may have cost, one that was out when hone died included.
            let journal = self.verifier.paths.spend_journal(&self.run.tag, e.n);
            let mut estimated = false;
            if let Some((usd, tokens)) = crate::propose::read_journal(&journal) {
                estimated = usd > e.cost_usd || tokens > e.tokens;
                e.cost_usd = e.cost_usd.max(usd);
                e.tokens = e.tokens.max(tokens);
            }
            e.status = Some(Status::Aborted);
            e.reason = "interrupted: hone stopped during this experiment".into();
            if estimated {
                e.reason.push_str(
                    "; its spend holds what its model calls were charged, one out when hone stopped at its worst case (an estimate)",
                );
            }
            let charged = self.charge_cut_turn(e, &recs.rates, killed);
            if let Some(c) = &charged {
                e.reason = format!("{}; {c}", e.reason);
            }
            e.finished_at = Some(now());
            let e = e.clone();
            self.retries.extend(super::retry::retry_of(&e));
            recs.set_commit(e.n, e.candidate_commit.clone());
            self.store.put_experiment(self.run.id, &e)?;
            // Its spend is in its record now.
            let _ = std::fs::remove_file(journal);
            let msg = format!(
                "experiment {} was interrupted; recorded as aborted{}{}",
                e.n,
                if killed {
                    " (its leftover processes were killed)"
                } else {
                    ""
                },
                charged.map(|c| format!("; {c}")).unwrap_or_default()
            );
            self.emit(Event::Warning { message: msg });
        }
        self.count_lost_time(&cut_off, recs.last_finish)?;
        self.forget_pruned(&mut recs)?;
        self.repair_dangling_branch(&recs.whole)?;
        let v = &self.verifier;
        // Parallel slots' worktrees hold what in-flight candidates left: gone with them.
        parallel::clean_slots(&v.git, &v.paths, &v.spec, &tag)?;
        for (n, commit) in &recs.commits {
            if let Some(c) = commit {
                let r = archive_ref(&tag, *n);
                if v.git.ref_target(&r)?.is_none() {
                    v.git.update_ref(&r, c, None)?;
                }
            }
        }
        self.repair_branch(&recs.whole)
    }

    /// Archive refs of the run left pointing at objects `git gc --prune=now` deleted (it can
    /// race a ref being written): they make `git log --all` fail, so they go, with a warning.
    /// An archive ref is written again below if its recorded commit is still there.
    fn remove_dangling_refs(&mut self, exps: &[(u64, Option<String>)]) -> Result<(), EngineError> {
        let tag = self.run.tag.clone();
        let git = self.verifier.git.clone();
        let mut warnings = Vec::new();
        // Every archive ref and what it points at, held compactly (read one by one if git
        // cannot list them).
        let refs = match git.refs_listing(&format!("refs/hone/{tag}/")) {
            Ok(refs) => refs,
            Err(_) => {
                let mut refs = Vec::new();
                for (n, _) in exps {
                    let name = archive_ref(&tag, *n);
                    if let Some(oid) = git.raw_ref(&name)? {
                        refs.push((name, oid));
                    }
                }
                RefListing::new(refs)
            }
        };
        // The objects looked up a few thousand at a time: no list of every one is made.
        let mut missing = Vec::new();
        let mut batch: Vec<String> = Vec::new();
        for (_, oid) in refs.iter() {
            batch.push(oid.into_owned());
            if batch.len() == 4096 {
                missing.extend(git.missing_objects(&batch)?);
                batch.clear();
            }
        }
        missing.extend(git.missing_objects(&batch)?);
        drop(batch);
        let gone: std::collections::HashSet<&str> = missing.iter().map(String::as_str).collect();
        for (name, oid) in refs.iter().filter(|(_, o)| gone.contains(&**o)) {
            git.run(&["update-ref", "--no-deref", "-d", &name, &oid])?;
            warnings.push(format!(
                "{name} pointed at {oid}, which git gc deleted; the ref was removed"
            ));
        }
        let unsynced_starts = self.store.leaves_starts_unsynced();
        let workers = self.verifier.spec.exec.workers;
        warnings.extend(set_aside_lost_refs(
            &git,
            (&tag, workers, unsynced_starts),
            &refs,
            &missing,
            exps,
        )?);
        for message in warnings {
            self.emit(Event::Warning { message });
        }
        Ok(())
    }

    /// A run branch left pointing at a commit `git gc` deleted goes back to the best's commit
    /// (after [`Engine::forget_pruned`], so a lost keep is no longer the best).
    fn repair_dangling_branch(&mut self, exps: &[ExperimentRecord]) -> Result<(), EngineError> {
        let tag = self.run.tag.clone();
        let git = self.verifier.git.clone();
        let branch = branch_ref(&tag);
        let Some(oid) = git.raw_ref(&branch)? else {
            return Ok(());
        };
        if git.missing_objects(std::slice::from_ref(&oid))?.is_empty() {
            return Ok(());
        }
        let best = best_experiment(exps)
            .and_then(|b| b.candidate_commit.clone())
            .unwrap_or_else(|| self.run.base_commit.clone());
        git.update_ref(&branch, &best, Some(&oid))?;
        self.emit(Event::Warning {
            message: format!(
                "hone/{tag} pointed at {oid}, which git gc deleted; it is back at the best's commit {best}"
            ),
        });
        Ok(())
    }

    /// Recorded candidate commits that `git gc` deleted before a ref held them (a crash
    /// between their commit and their ref, then a prune): their files are lost. Such an
    /// experiment keeps its record and its outcome, without the commit (its reason says
    /// which it was; a keep becomes `aborted`, so the keep before it is the best again), so
    /// that nothing tries to reach it again and the run goes on.
    fn forget_pruned(&mut self, recs: &mut Records) -> Result<(), EngineError> {
        let commits: Vec<&str> = recs
            .commits
            .iter()
            .filter_map(|(_, c)| c.as_deref())
            .collect();
        let missing = self.verifier.git.missing_objects(&commits)?;
        drop(commits);
        if missing.is_empty() {
            return Ok(());
        }
        let lost: Vec<u64> = recs
            .commits
            .iter()
            .filter(|(_, c)| c.as_ref().is_some_and(|c| missing.contains(c)))
            .map(|(n, _)| *n)
            .collect();
        for n in lost {
            // The store's whole record is the one rewritten.
            let Some(mut e) = self.store.experiment(self.run.id, n)? else {
                continue;
            };
            let Some(c) = e.candidate_commit.clone() else {
                continue;
            };
            let message = format!(
                "experiment {}'s candidate commit {c} was deleted by git gc before hone referenced it: its files are lost",
                e.n
            );
            // A keep whose code is gone cannot stay the best: the one before it is again.
            if e.status() == Status::Keep {
                e.status = Some(Status::Aborted);
            }
            e.candidate_commit = None;
            e.reason = format!("{} (lost: commit {c} deleted by git gc)", e.reason);
            self.store.put_experiment(self.run.id, &e)?;
            recs.set_commit(n, None);
            if let Some(held) = recs.whole.iter_mut().find(|h| h.n == n) {
                *held = e;
            }
            self.emit(Event::Warning { message });
        }
        Ok(())
    }

    /// An agent CLI's turn cut off by hone's stop, before it recorded a spend (its record
    /// has none): charged its time at the highest rate of the run's reported turns, as a turn
    /// cut off at its timeout is (the rate of its long turns where it had any, see
    /// `TurnRates`); what was charged, for the record. Its time runs to now when
    /// its processes outlived hone (`killed`: the agent may have gone on calling its model
    /// until this resume), else to its logs' last write; at most `[agent] timeout`. Nothing
    /// without a rate.
    fn charge_cut_turn(
        &self,
        e: &mut ExperimentRecord,
        rates: &crate::propose::command::TurnRates,
        killed: bool,
    ) -> Option<String> {
        let spec = &self.verifier.spec;
        // A turn that ended was recorded with what it spent (then its verifier was cut off).
        let turn_ended = e.propose_ms > 0 || e.cost_usd > 0.0 || e.tokens > 0;
        if !spec.agent.kind.is_preset() || turn_ended {
            return None;
        }
        let end = if killed {
            now()
        } else {
            self.last_activity(e.n, e.started_at)
        };
        let secs = (end - e.started_at).clamp(0.0, spec.agent.timeout.as_secs_f64());
        let (usd_rate, token_rate) = rates.rate_for(secs)?;
        e.cost_usd = usd_rate * secs;
        e.tokens = (token_rate * secs).ceil() as u64;
        Some(format!(
            "its agent's turn, cut off, was charged ${:.4} and {} tokens: its {secs:.1} s at the highest rate of an earlier turn",
            e.cost_usd, e.tokens
        ))
    }

    /// When experiment `n` (started at `started`) last did something: the latest write of
    /// its logs (the agent's, the review's, each verifier stage's), no later than its
    /// longest possible end (an orphan that went on writing until this resume is not its
    /// run time); `started` when it wrote none.
    fn last_activity(&self, n: u64, started: f64) -> f64 {
        let spec = &self.verifier.spec;
        let longest = spec.agent.timeout.as_secs_f64()
            + spec.review.timeout.as_secs_f64()
            + spec.verify.timeout.as_secs_f64() * (2 + spec.verify.confirm) as f64;
        let dir = self.verifier.paths.run_dir(&self.run.tag).join("logs");
        let prefix = format!("{n}.");
        let last = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|entry| entry.file_name().to_string_lossy().starts_with(&prefix))
            .filter_map(|entry| entry.metadata().ok()?.modified().ok())
            .filter_map(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_secs_f64())
            .fold(started, f64::max);
        last.min(started + longest)
    }

    /// Adds to the run's loop time what a crash kept from it: the loop time was last written
    /// when an experiment finished (`last_finish`), and the experiments cut off ran on past
    /// that (each `(start, end)`, its end its log's last write) — as much as they ran, no
    /// more. Without it `max_time` could be overspent by one experiment at every kill.
    fn count_lost_time(
        &mut self,
        cut_off: &[(f64, f64)],
        last_finish: Option<f64>,
    ) -> Result<(), EngineError> {
        let Some(end) = cut_off.iter().map(|c| c.1).reduce(f64::max) else {
            return Ok(());
        };
        let ran: f64 = cut_off.iter().map(|(s, e)| (e - s).max(0.0)).sum();
        let since_save = last_finish.map_or(ran, |f| (end - f).max(0.0));
        let lost = ran.min(since_save);
        if lost > 0.0 && lost.is_finite() {
            self.active_before += lost;
            self.store
                .set_active_seconds(self.run.id, self.active_seconds())?;
        }
        Ok(())
    }

    /// Kills or cancels whatever was started for the interrupted experiment `e`: its
    /// recorded process group, anything carrying its job token, its recorded SLURM jobs, and
    /// what the executor still holds for it. True if anything was still there.
    fn stop_leftovers(&mut self, e: &ExperimentRecord) -> Result<bool, EngineError> {
        let mut killed = false;
        if let Some(pid) = e.pid {
            killed = exec::kill_stale_group(pid, e.pid_start);
        }
        // Whatever else was started for it (say, an agent whose pid was not yet recorded
        // when hone died) carries its job token; one that hid its entry in /proc is found once
        // the mount that hid it is gone.
        exec::unhide_processes();
        if exec::kill_groups_with_env("HONE_JOB", &self.verifier.job_token(e.n)) > 0 {
            killed = true;
        }
        if slurm::cancel_recorded(&self.store, self.run.id, e.n)? {
            killed = true;
        }
        let key = self.run_key();
        if self.verifier.executor.recover(&key, e.n) {
            killed = true;
        }
        Ok(killed)
    }

    /// Puts the run branch where the records say it is: at the best's commit. A keep recorded
    /// just before a crash may have missed its branch move, a champion recorded as reverted
    /// its move back; anything else is an error.
    fn repair_branch(&mut self, exps: &[ExperimentRecord]) -> Result<(), EngineError> {
        let tag = &self.run.tag;
        let git = &self.verifier.git;
        let branch = branch_ref(tag);
        let expected = best_experiment(exps)
            .and_then(|b| b.candidate_commit.clone())
            .unwrap_or_else(|| self.run.base_commit.clone());
        match git.ref_target(&branch)? {
            Some(head) if head == expected => {}
            Some(head) => {
                // A keep recorded just before a crash may have missed its branch move: the
                // keep decided last (in a parallel run, not always the highest number).
                let last_keep_parent = best_experiment(exps)
                    .filter(|e| e.status() == Status::Keep)
                    .map(|e| e.parent_commit.clone());
                // A champion recorded as reverted (its re-test failed) just before a crash
                // may have kept the branch: it goes back to the best.
                let reverted = exps.iter().any(|e| {
                    e.status() != Status::Keep
                        && e.candidate_commit.as_deref() == Some(head.as_str())
                        && e.parent_commit == expected
                });
                if last_keep_parent.as_deref() == Some(head.as_str()) || reverted {
                    git.update_ref(&branch, &expected, Some(&head))?;
                } else {
                    return Err(GitError::RefMoved {
                        name: branch,
                        expected,
                        found: head,
                    }
                    .into());
                }
            }
            None => {
                return Err(Mismatch::BranchDeleted {
                    tag: tag.to_string(),
                    expected: expected.to_string(),
                }
                .into())
            }
        }
        Ok(())
    }

    /// The run's name in a shared store: its repository's key and its tag (with remote
    /// workers, the repository is `[exec] remote` unless `[store] repo` says otherwise).
    pub(super) fn run_key(&self) -> String {
        format!("{}#{}", self.store.repo(), self.run.tag)
    }
}

/// Archive refs of the run whose experiment has no row because a power loss lost the row (its
/// write skips its own sync on SQLite, see `Engine::record_start`) but not the ref. Nothing
/// finished is lost with them (a finish syncs the store), and left there one would stop the
/// experiment that gets its number again (its archive ref must not exist yet). Only what a
/// power loss can leave is set aside: on a SQLite store, refs numbered past every recorded
/// experiment, at most one per worker (the experiments that were in flight). They are moved to
/// `refs/hone-lost/<tag>/<n>`, so their commits stay; anything else (a store restored from an
/// older backup) is left as it is, with a warning, and the run stops at the number as before.
/// `missing`: objects already found deleted (those refs are gone already).
fn set_aside_lost_refs(
    git: &crate::workspace::Git,
    (tag, workers, unsynced_starts): (&str, usize, bool),
    refs: &RefListing,
    missing: &[String],
    exps: &[(u64, Option<String>)],
) -> Result<Vec<String>, EngineError> {
    let prefix = format!("refs/hone/{tag}/");
    // The records are in number order: found by a search, no set of every number made.
    let recorded = |n: u64| exps.binary_search_by_key(&n, |(m, _)| *m).is_ok();
    let last = exps.iter().map(|(n, _)| *n).max();
    let lost: Vec<(u64, String, String)> = refs
        .iter()
        .filter(|(_, o)| !missing.iter().any(|m| m == o))
        .filter_map(|(name, oid)| {
            let n = name.strip_prefix(&prefix)?.parse::<u64>().ok()?;
            (!recorded(n) && archive_ref(tag, n) == *name)
                .then(|| (n, name.into_owned(), oid.into_owned()))
        })
        .collect();
    if lost.is_empty() {
        return Ok(Vec::new());
    }
    let in_flight = unsynced_starts
        && lost.len() <= workers.max(1)
        && lost.iter().all(|(n, _, _)| last.map_or(true, |l| *n > l));
    if !in_flight {
        let names: Vec<&str> = lost.iter().map(|(_, name, _)| name.as_str()).collect();
        return Ok(vec![format!(
            "archive refs without a record: {} (a store older than the repository, restored from a backup?); they were left as they are",
            names.join(", ")
        )]);
    }
    let mut warnings = Vec::new();
    for (n, name, oid) in lost {
        let aside = format!("refs/hone-lost/{tag}/{n}");
        git.run(&["update-ref", "--no-deref", &aside, &oid])?;
        git.run(&["update-ref", "--no-deref", "-d", &name, &oid])?;
        warnings.push(format!(
            "{name} pointed at {oid}, the candidate of an experiment whose record was lost (a power loss while it ran); the ref was moved to {aside}"
        ));
    }
    Ok(warnings)
}

/// A cut-off experiment's commit from its archive ref, where its row lacks it: the ref is
/// written before the row holds the commit, so a crash between the two is completed from the
/// ref. A candidate kept on a moved best has its commit made again (the same tree) and its
/// ref moved before its row: a row naming a commit no ref holds takes the ref's commit then.
fn commit_from_ref(
    git: &crate::workspace::Git,
    e: &mut ExperimentRecord,
    name: &str,
) -> Result<(), EngineError> {
    let Some(r) = git.ref_target(name)? else {
        return Ok(());
    };
    match (&e.candidate_commit, &e.tree) {
        (None, _) => {
            e.tree = git.tree_of(&r).ok();
            e.candidate_commit = Some(r);
        }
        (Some(c), Some(tree)) if *c != r && git.tree_of(&r).ok().as_ref() == Some(tree) => {
            if let Ok(parent) = git.run(&["rev-parse", &format!("{r}^")]) {
                e.parent_commit = parent.trim().to_string();
            }
            e.candidate_commit = Some(r);
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::process::Command;

    use super::*;
    use crate::workspace::Git;

    fn sh(dir: &Path, cmd: &str) -> String {
        let mut c = Command::new("sh");
        c.arg("-c").arg(cmd).current_dir(dir);
        crate::test_support::checked_stdout(&mut c, cmd)
            .trim()
            .to_string()
    }

    const COMMIT: &str = "git -c user.name=t -c user.email=t@t commit -qm";

    #[test]
    fn a_row_naming_a_commit_made_again_on_a_moved_best_takes_the_refs_commit() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        sh(
            d,
            &format!(
                "git init -q -b main && echo a > f && echo x > g && git add -A && {COMMIT} base"
            ),
        );
        let base = sh(d, "git rev-parse HEAD");
        // The candidate, made on the base; the best moved on meanwhile; the candidate's tree
        // made again on top of the best (what keeping it on a moved best does), its archive
        // ref moved there, and then the crash: the row still names the first commit.
        let old = sh(
            d,
            &format!("echo b > f && git add -A && {COMMIT} cand && git rev-parse HEAD"),
        );
        sh(
            d,
            &format!("git checkout -q {base} && echo y > g && git add -A && {COMMIT} best"),
        );
        let best = sh(d, "git rev-parse HEAD");
        let tree = sh(d, &format!("git rev-parse {old}^{{tree}}"));
        let again = sh(d, &format!("git commit-tree {tree} -p {best} -m again"));
        let git = Git::discover(d).unwrap();
        let name = "refs/hone/t/3";
        git.update_ref(name, &again, None).unwrap();
        let row = ExperimentRecord {
            n: 3,
            parent_commit: base.clone(),
            candidate_commit: Some(old.clone()),
            tree: Some(tree.clone()),
            ..Default::default()
        };
        let mut e = row.clone();
        commit_from_ref(&git, &mut e, name).unwrap();
        assert_eq!(e.candidate_commit.as_deref(), Some(again.as_str()));
        assert_eq!(
            e.parent_commit, best,
            "its parent is the best it was put onto"
        );
        // A ref at a commit of another tree is not this row's commit: left as it was.
        let other = sh(d, "git rev-parse HEAD^{tree}");
        let elsewhere = sh(d, &format!("git commit-tree {other} -p {best} -m other"));
        git.update_ref(name, &elsewhere, Some(&again)).unwrap();
        let mut e = row.clone();
        commit_from_ref(&git, &mut e, name).unwrap();
        assert_eq!(e.candidate_commit.as_deref(), Some(old.as_str()));
        assert_eq!(e.parent_commit, base);
        // A row without a commit takes the ref's, and its tree.
        let mut e = ExperimentRecord {
            candidate_commit: None,
            tree: None,
            ..row
        };
        commit_from_ref(&git, &mut e, name).unwrap();
        assert_eq!(e.candidate_commit.as_deref(), Some(elsewhere.as_str()));
        assert_eq!(e.tree.as_deref(), Some(other.as_str()));
    }
}
