//! Recording an experiment, in the crash-safe order: its row (`running`) before anything runs
//! ([`Engine::record_start`]), its archive ref as soon as its candidate is committed, then
//! the commit in its row ([`Engine::archive`]), its outcome before the run branch moves ([`Engine::conclude`]);
//! then the history, the events and the outer loop's hooks ([`Engine::finish`]). Also the
//! champion's re-test and the best's holdout at the end of a run.

use std::path::Path;
use std::time::Instant;

use crate::report::best_experiment;
use crate::store::{now, ExperimentRecord, Status};
use crate::util::mean;
use crate::workspace::RefListing;
use crate::workspace::{Git, GitError, IndexListing, Snapshot};

use super::state::{self, archive_ref, branch_ref};
use super::verifier::Measured;
use super::{Candidate, Engine, EngineError, Event, Fs, Stop};

impl Engine<'_> {
    /// Records the start of the next experiment (made on `best`, or the baseline) and
    /// checks its parent out in `wt`: its row, then its event. Returns the row and the parent.
    pub(super) fn record_start(
        &mut self,
        exps: &[ExperimentRecord],
        in_flight: &[ExperimentRecord],
        best: Option<&ExperimentRecord>,
        wt: &Path,
    ) -> Result<(ExperimentRecord, String), EngineError> {
        let n = exps
            .iter()
            .chain(in_flight)
            .map(|e| e.n + 1)
            .max()
            .unwrap_or(0);
        let parent = best
            .and_then(|b| b.candidate_commit.clone())
            .unwrap_or_else(|| self.run.base_commit.clone());
        // The store file must still be the one opened: records written to a deleted one
        // would be lost (checked once at each end of every experiment).
        self.store.check_file()?;
        let rec = ExperimentRecord {
            n,
            parent_commit: parent.clone(),
            status: Some(Status::Running),
            started_at: now(),
            ..Default::default()
        };
        // Without its own sync (see `Store::relaxed`): it must survive hone's `kill -9`, and
        // it does once written; a power loss before the next finish's sync may lose it and
        // the archive row below, never a finished experiment, and recovery then removes the
        // archive ref such a lost row leaves (`remove_orphan_refs`).
        self.store
            .relaxed(|| self.store.put_experiment(self.run.id, &rec))?;
        self.emit(Event::ExperimentStarted { n });
        // A slot's thread may have made its worktree the parent already, off this thread.
        let ready = self.slot_ready.take();
        if ready.as_ref().map(|(p, c)| (p.as_path(), c.as_str())) != Some((wt, parent.as_str())) {
            // What the last candidate's code left where git reads, looked at first.
            self.verifier.git.check_ref_files()?;
            self.verifier.git.reset_worktree(wt, &parent)?;
        }
        let run_dir = self.verifier.paths.run_dir(&self.run.tag);
        std::fs::create_dir_all(run_dir.join("logs")).map_err(|error| Fs::Create {
            path: run_dir.clone(),
            error,
        })?;
        Ok((rec, parent))
    }

    /// Commits what the proposer left in the worktree, writes its archive ref at once, then
    /// records the candidate commit. The ref comes first because an unreferenced commit is
    /// what `git gc --prune=now` (the user's, or git's automatic one) deletes; a crash between
    /// the two leaves a `running` row that recovery completes from the ref. Objects pruned
    /// under hone while it commits are written again (up to [`ARCHIVE_ATTEMPTS`] attempts).
    /// Files are removed unread, and named in the second part of the answer, where they hold
    /// more new content than hone reads ([`crate::workspace::MAX_NEW_FILE_BYTES`]) or, while
    /// the disk is full, are the largest the candidate grew; the snapshot is `None` when
    /// nothing else changed.
    pub(super) fn archive(
        &mut self,
        rec: &mut ExperimentRecord,
        wt: &Path,
        parent: &str,
        in_place: bool,
    ) -> Result<(Option<crate::workspace::Snapshot>, Vec<String>), EngineError> {
        let title = if rec.description.is_empty() {
            "candidate"
        } else {
            &rec.description
        };
        let message = format!(
            "hone #{}: {title}\n\nHone-Run: {}\nHone-Experiment: {}\n",
            rec.n, self.run.tag, rec.n
        );
        let git = &self.verifier.git;
        let name = archive_ref(&self.run.tag, rec.n);
        // The first git process in the worktree after the proposer's turn reads its `HEAD`:
        // not if the turn left a FIFO there (or where any ref is read).
        git.check_ref_files()?;
        // A disk the candidate filled: its largest grown files go first (nothing could be
        // recorded otherwise), the rest is archived, and the gate makes it a violation.
        let mut dropped: Vec<String> = make_room(git, wt, parent, false)?;
        // Taken first: a retry rebuilds the index, and with it the flags. The same read,
        // with the untracked files, is the first attempt's listing (one `ls-files` for all).
        // A worktree that `record_start` made exactly the parent's files (its index read from
        // the parent's tree), whose tracked files the proposer rewrote in hone's process: its
        // listing is the parent's, with no process asked (`in_place`).
        let listing = match in_place {
            true => git.committed_listing(parent)?,
            false => git.worktree_listing(wt)?,
        };
        let flagged = listing.flagged();
        let mut listing = Some(listing);
        let mut attempt = 1;
        let mut attempt_drop = 0;
        let snap = loop {
            match snapshot_referenced(git, wt, parent, &message, &name, listing.take()) {
                Ok(snap) => break snap,
                // The disk filled up while archiving: as above, then again.
                Err(e)
                    if attempt_drop < MAX_DROPS
                        && (crate::workspace::disk_nearly_full(wt)
                            || crate::workspace::out_of_room(&e)) =>
                {
                    attempt_drop += 1;
                    let made = make_room(git, wt, parent, true)?;
                    if made.is_empty() {
                        return Err(e.into());
                    }
                    dropped.extend(made);
                }
                Err(GitError::Failed { .. }) if attempt < ARCHIVE_ATTEMPTS => {
                    attempt += 1;
                    git.reindex(wt, parent)?;
                }
                // Too large to read: removed, and the rest archived (listed again). The gate
                // makes the candidate a violation.
                Err(GitError::TooLarge { files }) if attempt_drop < MAX_DROPS => {
                    attempt_drop += 1;
                    for (path, _) in &files {
                        crate::workspace::remove_any(&wt.join(path))?;
                    }
                    dropped.push(format!(
                        "{} (over {} MiB of new content in all)",
                        crate::workspace::too_large(&files),
                        crate::workspace::MAX_NEW_FILE_BYTES >> 20
                    ));
                }
                Err(e) => return Err(e.into()),
            }
        };
        let Some(mut snap) = snap else {
            return Ok((None, dropped));
        };
        for f in flagged {
            if !snap.hidden.contains(&f) {
                snap.hidden.push(f);
            }
        }
        rec.files_changed = snap.changes.len() as u64;
        rec.lines_added = snap.lines_added();
        rec.lines_deleted = snap.lines_deleted();
        super::proposal::add_literal_changes(rec, git, &self.verifier.spec, parent, &snap);
        rec.candidate_commit = Some(snap.commit.clone());
        rec.tree = Some(snap.tree.clone());
        // With the progress events told so far (one commit, without its own sync: a power
        // loss that loses it leaves the row `running` without its commit, which recovery
        // completes from the archive ref, as after a crash between the two).
        let recorded = &*rec;
        let relaxed = self.store.relax_sync()?;
        let written = self.in_one_transaction(false, |engine| {
            Ok(engine.store.put_experiment(engine.run.id, recorded)?)
        });
        self.store.restore_sync(relaxed)?;
        written?;
        Ok((Some(snap), dropped))
    }

    /// Records a judged candidate: the verdict ([`Engine::decide`]), the outcome, then (a
    /// keep) the branch move and the re-test. `refs_at_verify` as for [`Engine::decide`].
    pub(super) fn conclude(
        &mut self,
        c: Candidate,
        wt: &Path,
        status: Status,
        reason: String,
        refs_at_verify: Option<RefListing>,
    ) -> Result<Option<Stop>, EngineError> {
        let Candidate {
            mut rec,
            t_start,
            best,
            parent,
            ..
        } = c;
        let n = rec.n;
        let judged = (status, reason);
        // Without a listing at the verifier's start, other experiments move refs meanwhile.
        let serial = refs_at_verify.is_some();
        let (status, reason) = self.decide(&mut rec, wt, best.as_ref(), judged, refs_at_verify)?;
        if best.is_none() && status != Status::Baseline {
            return self.baseline_failed(rec, status, reason, t_start);
        }
        let baseline_holdout_failed = status == Status::Baseline
            && self.verifier.spec.verify.holdout_gate
            && rec.holdout.is_none();
        // A `git gc --prune=now` that raced the archive ref may have deleted the commit all
        // the same: then nothing can be kept, and the run goes on without it.
        let (status, reason) = match self.lost_commit(&mut rec)? {
            Some(c) => (
                Status::Aborted,
                format!("lost: its candidate commit {c} was deleted by git gc (run concurrently with --prune=now) before it could be kept; it was measured {status}: {reason}"),
            ),
            None => (status, reason),
        };
        let keep_commit = rec.candidate_commit.clone();
        self.finish(rec, status, reason, t_start)?;
        if status == Status::Baseline {
            self.progress_unread(n)?;
        }
        if baseline_holdout_failed {
            return Ok(Some(Stop::failed(format!(
                "the holdout command failed on the baseline (log: {}), so holdout_gate has nothing to compare with; fix [verify.holdout] and run `hone run` again",
                self.verifier.paths.run_dir(&self.run.tag).join("holdout").join(format!("{n}.log")).display()
            ))));
        }
        if status == Status::Keep {
            if let Some(c) = keep_commit {
                // Someone else's commit on the branch: kept; the move waits for the resume.
                if let Some(stop) = self.foreign_commit(&parent)? {
                    return Ok(Some(stop));
                }
                // The outcome is recorded; now the branch may move (compare-and-swap), once
                // what the candidate's code left where git reads is looked at.
                self.verifier.git.check_ref_files()?;
                self.verifier
                    .git
                    .update_ref(&branch_ref(&self.run.tag), &c, Some(&parent))?;
                self.maybe_retest(n, wt, (&c, &parent), serial)?;
            }
        }
        Ok(None)
    }

    /// Turns pruning off, and says why, when the baseline's curve went against the
    /// objective's direction (a loss printed as progress while an accuracy is maximized):
    /// pruning judges curves in the objective's direction, and would stop the best runs.
    /// After the baseline (experiment `n`), and when a run with one resumes. The curve is
    /// read again from the baseline's log with the setting in force, so a `progress` fixed
    /// since counts; its first and last quarters' means are compared.
    pub(super) fn progress_against_objective(&mut self, n: u64) -> Result<(), EngineError> {
        let Some(p) = &self.verifier.spec.verify.progress else {
            return Ok(());
        };
        if p.prune.is_none() {
            return Ok(());
        }
        let curve = curve_in_log(&self.log_of(n), &p.read);
        let quarter = curve.len() / 4;
        if quarter == 0 {
            return Ok(());
        }
        let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
        let (first, last) = (
            mean(&curve[..quarter]),
            mean(&curve[curve.len() - quarter..]),
        );
        let direction = self.verifier.spec.verify.direction;
        let scale = first.abs().max(last.abs());
        let against = scale > 0.0
            && match direction {
                crate::spec::Direction::Minimize => last - first > 0.05 * scale,
                crate::spec::Direction::Maximize => first - last > 0.05 * scale,
            };
        if !against {
            return Ok(());
        }
        let metric = self.verifier.spec.verify.metric.clone();
        if let Some(p) = self.verifier.spec.verify.progress.as_mut() {
            p.prune = None;
        }
        let message = format!(
            "[verify] prune is off for this run: the baseline's progress value went from {} to {} (its first and last quarters' means) while {metric} is {}d, and pruning judges a curve in the objective's direction (it would stop the best runs); point `progress` at a value that moves as {metric} does, or set [verify] direction to match it",
            crate::report::fmt_metric(Some(first)),
            crate::report::fmt_metric(Some(last)),
            direction.as_str(),
        );
        self.emit(Event::Warning { message });
        Ok(())
    }

    /// When a run resumes: [`Engine::progress_against_objective`] of its baseline, if it has one.
    pub(super) fn progress_against_objective_on_resume(&mut self) -> Result<(), EngineError> {
        match self
            .store
            .first_with_status(self.run.id, Status::Baseline)?
        {
            Some(b) => self.progress_against_objective(b.n),
            None => Ok(()),
        }
    }

    /// Says when `[verify] progress` read no point from the baseline's output: a regex or a
    /// metric name that never matches leaves pruning off all night without a word.
    fn progress_unread(&mut self, n: u64) -> Result<(), EngineError> {
        let Some(p) = &self.verifier.spec.verify.progress else {
            return Ok(());
        };
        if !self.store.curve(self.run.id, n)?.is_empty() {
            if self.verifier.bunched {
                self.emit(Event::Warning {
                    message: "[verify] progress: every point of the baseline's curve arrived as its run ended: its output is buffered, so no run can be pruned before it ends; print with flush=True (or run `python3 -u`, or set PYTHONUNBUFFERED=1)".into(),
                });
            }
            return self.progress_against_objective(n);
        }
        let how = match &p.read {
            crate::verify::prune::Progress::Metric(name) => {
                format!("no line with `step` and `{name}`")
            }
            crate::verify::prune::Progress::Regex { source, .. } => {
                format!("no line matched `{source}`")
            }
        };
        // A line of the log that looks like progress, and the setting that would read it.
        let fix = log_head(&self.log_of(n)).and_then(|text| {
            text.split(['\n', '\r']).find_map(|line| {
                let (regex, _) = crate::verify::prune::Progress::suggest(line)?;
                let line: String = line.trim().chars().take(200).collect();
                Some(format!(
                    "; a line of it reads `{line}`: progress = '{regex}' would read it"
                ))
            })
        });
        let message = format!(
            "[verify] progress read no point from the baseline's output ({how}; log: {}): no curve is recorded{}{}",
            self.log_of(n),
            if p.prune.is_some() { " and nothing is pruned" } else { "" },
            fix.as_deref().unwrap_or("; check it against a line of that log"),
        );
        self.emit(Event::Warning { message });
        Ok(())
    }

    /// If `rec`'s candidate commit no longer exists (deleted by a `git gc --prune=now` that
    /// raced its archive ref), the ref left pointing at it goes and the record forgets it;
    /// returns the lost commit.
    fn lost_commit(&mut self, rec: &mut ExperimentRecord) -> Result<Option<String>, EngineError> {
        let Some(c) = rec.candidate_commit.clone() else {
            return Ok(None);
        };
        let git = &self.verifier.git;
        if git.missing_objects(std::slice::from_ref(&c))?.is_empty() {
            return Ok(None);
        }
        let name = archive_ref(&self.run.tag, rec.n);
        if git.raw_ref(&name)?.as_deref() == Some(c.as_str()) {
            git.run(&["update-ref", "--no-deref", "-d", &name, &c])?;
        }
        rec.candidate_commit = None;
        Ok(Some(c))
    }

    /// Records a baseline that failed, and stops: the unmodified project must pass.
    fn baseline_failed(
        &mut self,
        mut rec: ExperimentRecord,
        status: Status,
        reason: String,
        t_start: Instant,
    ) -> Result<Option<Stop>, EngineError> {
        let n = rec.n;
        // The setup failed, not the configuration (the baseline that passes has the same):
        // out of the knobs' history, where a crash would read as an infeasible configuration.
        rec.config = None;
        let reason = format!("baseline {status}: {reason}");
        self.finish(rec, status, reason.clone(), t_start)?;
        let log = std::path::PathBuf::from(self.log_of(n));
        let tail = log_tail(&log, 12);
        Ok(Some(Stop::failed(format!(
            "the baseline failed ({reason}); the unmodified project must pass the verifier.\n\
             Last lines of its log ({}):\n{tail}\n\
             Fix [verify] in hone.toml and run `hone run` again, or commit a fix and start a new run with `hone run --new`",
            log.display()
        ))))
    }

    /// Records an experiment interrupted by the user, and stops.
    pub(super) fn abort(
        &mut self,
        rec: ExperimentRecord,
        t_start: Instant,
    ) -> Result<Option<Stop>, EngineError> {
        self.finish(
            rec,
            Status::Aborted,
            "interrupted by the user; its processes were killed".into(),
            t_start,
        )?;
        Ok(Some(Stop::resumable(
            "interrupted by the user (run `hone run` to resume)",
        )))
    }

    /// Records an experiment's outcome and tells subscribers. One store transaction holds the
    /// outcome, its event and the loop's active time (one sync, not one per write); a crash
    /// before its commit leaves the `running` row that recovery aborts, after it all of it is
    /// there. Then the outer loop's hooks run (they may take long: an LLM's revision), outside
    /// any transaction, and their calls and events are recorded in a second one.
    pub(super) fn finish(
        &mut self,
        mut rec: ExperimentRecord,
        status: Status,
        reason: String,
        t_start: Instant,
    ) -> Result<(), EngineError> {
        if self.lent {
            // Recorded once the history is back (see `Engine::experiment`).
            self.deferred = Some(Box::new(super::Deferred {
                rec,
                status,
                reason,
                t_start,
            }));
            return Ok(());
        }
        rec.status = Some(status);
        rec.reason = reason;
        rec.finished_at = Some(decision_time(now(), &self.history));
        rec.total_ms = t_start.elapsed().as_millis() as u64;
        let journal = self.verifier.paths.spend_journal(&self.run.tag, rec.n);
        self.in_one_transaction(true, |engine| engine.record_outcome(rec))?;
        // Its spend is in the committed record now.
        let _ = std::fs::remove_file(journal);
        // Outer loop: results, segment ends, the portfolio; then their record.
        if let Some(last) = self.history.last().cloned() {
            self.outer.after(&last, &self.history);
        }
        self.flush_outer()
    }

    /// Runs `f` in one store transaction; the events it emits reach subscribers once it is
    /// committed. With `check`, first checks that the store file is still the one opened
    /// (after the write, so that the records saved from a deleted store hold what `f` wrote).
    fn in_one_transaction(
        &mut self,
        check: bool,
        f: impl FnOnce(&mut Self) -> Result<(), EngineError>,
    ) -> Result<(), EngineError> {
        self.store.begin()?;
        // Written with this transaction; told again to the error path if it fails.
        let unlogged = self.unlogged.clone();
        self.log_unlogged();
        let outer_held = self.held.replace(Vec::new());
        let written = f(self);
        let held = std::mem::replace(&mut self.held, outer_held).unwrap_or_default();
        let committed = match written {
            Ok(()) => self.store.commit().map_err(EngineError::from),
            Err(e) => {
                self.store.rollback();
                Err(e)
            }
        };
        if let Err(e) = committed {
            self.unlogged.splice(0..0, unlogged);
            return Err(e);
        }
        if check {
            self.store.check_file()?;
        }
        for event in &held {
            match &mut self.held {
                // Inside another: its subscribers hear when the outer one commits.
                Some(outer) => outer.push(event.clone()),
                None => (self.on_event)(event),
            }
        }
        Ok(())
    }

    /// The outcome and its event, the narrowing log, the history and the loop's time (see
    /// [`Engine::finish`]).
    fn record_outcome(&mut self, rec: ExperimentRecord) -> Result<(), EngineError> {
        self.store.put_experiment(self.run.id, &rec)?;
        self.narrowing.advance(&self.store, self.run.id)?;
        super::history::push(&mut self.history, rec.clone());
        let best = best_experiment(&self.history).and_then(|b| b.objective);
        let baseline = self
            .history
            .iter()
            .find(|e| e.status() == Status::Baseline)
            .and_then(|e| e.objective);
        self.emit(Event::ExperimentFinished {
            record: Box::new(rec),
            best,
            baseline,
        });
        self.store
            .set_active_seconds(self.run.id, self.active_seconds())?;
        Ok(())
    }

    /// Stores the mechanisms' recorded hook calls and emits their notable changes.
    /// In one transaction, when there is anything to store.
    pub(super) fn flush_outer(&mut self) -> Result<(), EngineError> {
        let calls = self.outer.take_calls();
        let events = self.outer.take_events();
        if calls.is_empty() && events.is_empty() {
            return Ok(());
        }
        self.in_one_transaction(false, |engine| {
            engine.store.put_mechanism_calls(engine.run.id, &calls)?;
            for (n, message) in events {
                engine.emit(Event::Outer { n, message });
            }
            Ok(())
        })
    }

    /// Re-measures the champion after every `retest_every` keeps and updates its value.
    fn maybe_retest(
        &mut self,
        n: u64,
        wt: &Path,
        (commit, parent): (&str, &str),
        serial: bool,
    ) -> Result<(), EngineError> {
        let Some(every) = self.verifier.spec.verify.retest_every else {
            return Ok(());
        };
        let keeps = self
            .history
            .iter()
            .filter(|e| e.status() == Status::Keep)
            .count() as u64;
        if keeps == 0 || keeps % every != 0 {
            return Ok(());
        }
        let Some(mut rec) = self.history.iter().find(|e| e.n == n).cloned() else {
            return Ok(());
        };
        self.verifier.git.reset_worktree(wt, commit)?;
        let repeat = rec.runs.len() as u64;
        let cancel = self.cancel();
        // The champion's code runs again: hone's refs are checked around it (in the serial
        // loop: in parallel, other experiments move them meanwhile).
        let git = self.verifier.git.clone();
        let refs_before = serial
            .then(|| state::run_refs(&git, &self.run.tag))
            .transpose()?;
        let (verifier, mut sink) = self.verifying();
        let measured = verifier.measure(&mut sink, &mut rec, wt, repeat, true, &cancel)?;
        let refs_after = refs_before
            .as_ref()
            .map(|_| state::run_refs(&git, &self.run.tag))
            .transpose()?;
        if let (Some(before), Some(after)) = (&refs_before, &refs_after) {
            // A user's commit on the branch meanwhile is theirs: left for the loop's foreign
            // check, which keeps it and stops the run.
            if before != after && !self.foreign_move(before, after) {
                let moved = state::restore_refs(&git, before, after)?;
                self.emit(Event::Warning {
                    message: format!("the re-test of the champion #{n} moved hone's refs ({moved}); they were put back"),
                });
            }
        }
        let message = match measured {
            Measured::Value { value, .. }
                if crate::verify::noise::unusable(
                    "",
                    &[rec.runs.as_slice(), &[value]].concat(),
                )
                .is_some() =>
            {
                format!("re-test of the champion #{n} gave {value}, which overflows the mean of its runs; its value stands")
            }
            Measured::Value { value, .. } => {
                rec.runs.push(value);
                let before = rec.objective.unwrap_or(f64::NAN);
                rec.objective = Some(mean(&rec.runs));
                format!(
                    "re-tested the champion #{n}: {} -> {} over {} runs",
                    crate::report::fmt_metric(Some(before)),
                    crate::report::fmt_metric(rec.objective),
                    rec.runs.len()
                )
            }
            Measured::Failed { reason, .. } => {
                // As a confirm run that fails makes its candidate a crash: the champion's
                // value may have been luck, or code that tells a re-test from a first run
                // (the branch head is its own commit) and fails on purpose to keep it.
                let kept_at = crate::report::fmt_metric(rec.objective);
                rec.status = Some(Status::Crash);
                rec.reason =
                    format!("kept at {kept_at}, then its re-test failed ({reason}): reverted");
                // Recorded first, then the branch goes back: a hone killed in between finds
                // the branch ahead of the last keep, which its resume puts back.
                self.store.put_experiment(self.run.id, &rec)?;
                self.verifier
                    .git
                    .update_ref(&branch_ref(&self.run.tag), parent, Some(commit))?;
                format!("re-test of the champion #{n} failed ({reason}): it is a crash, and the branch is back where it was before it")
            }
            Measured::Cancelled => "re-test of the champion interrupted".to_string(),
        };
        let reverted = rec.status() == Status::Crash;
        self.store.put_experiment(self.run.id, &rec)?;
        if let Some(h) = self.history.iter_mut().find(|e| e.n == n) {
            *h = rec;
        }
        self.emit(if reverted {
            Event::Warning { message }
        } else {
            Event::Note { message }
        });
        Ok(())
    }

    /// At the end of a run, the best gets a holdout value if it has none yet (for instance when
    /// the holdout was configured after it was kept).
    pub(super) fn holdout_final(&mut self) -> Result<(), EngineError> {
        let Some(h) = self.verifier.spec.verify.holdout.clone() else {
            return Ok(());
        };
        let Some(mut best) = best_experiment(&self.history).cloned() else {
            return Ok(());
        };
        let Some(commit) = best.candidate_commit.clone() else {
            return Ok(());
        };
        if best.holdout.is_some() {
            return Ok(());
        }
        let wt = self.worktree.clone();
        self.verifier.git.prepare_worktree(&wt, &commit)?;
        let cancel = self.cancel();
        let (verifier, mut sink) = self.verifying();
        best.holdout = verifier.measure_holdout(&mut sink, (best.n, &commit), &wt, &h, &cancel)?;
        self.store.put_experiment(self.run.id, &best)?;
        if let Some(e) = self.history.iter_mut().find(|e| e.n == best.n) {
            *e = best;
        }
        Ok(())
    }
}

/// How many times [`Engine::archive`] commits a candidate whose objects were pruned under it
/// (each attempt is a few milliseconds; a `git gc --prune=now` loop can win several in a row).
const ARCHIVE_ATTEMPTS: u32 = 10;

/// How many times one archive removes new files too large to read and lists the worktree
/// again (once is enough unless a process of the candidate's still writes there).
const MAX_DROPS: usize = 4;

/// Frees a full disk of what the candidate left in `wt` ([`Git::make_room`]; with `failed`,
/// a write already failed for lack of room), and says what went (`path (N bytes) when the disk
/// was full`).
fn make_room(git: &Git, wt: &Path, parent: &str, failed: bool) -> Result<Vec<String>, GitError> {
    let removed = git.make_room(wt, parent, failed, MAX_DROPS)?;
    Ok(removed
        .iter()
        .map(|r| {
            let named = crate::workspace::removed_for_room(std::slice::from_ref(r));
            format!("{named} when the disk was full")
        })
        .collect())
}

/// Snapshots the worktree `wt` on `parent` and points `name` at the commit at once; a commit
/// (or tree) pruned before its ref held it fails, its ref removed, so that it is made again.
fn snapshot_referenced(
    git: &Git,
    wt: &Path,
    parent: &str,
    message: &str,
    name: &str,
    listing: Option<IndexListing>,
) -> Result<Option<Snapshot>, GitError> {
    let snap = match listing {
        Some(listing) => git.snapshot_from(wt, parent, message, listing)?,
        None => git.snapshot(wt, parent, message)?,
    };
    let Some(snap) = snap else {
        return Ok(None);
    };
    git.update_ref(name, &snap.commit, None)?;
    let missing = git.missing_objects(&[snap.commit.clone(), snap.tree.clone()])?;
    if !missing.is_empty() {
        git.run(&["update-ref", "--no-deref", "-d", name, &snap.commit])?;
        return Err(GitError::Failed {
            args: format!("update-ref {name} {}", snap.commit),
            stderr: format!(
                "{} was pruned (git gc) before its ref held it",
                missing.join(", ")
            ),
        });
    }
    Ok(Some(snap))
}

/// The last `n` lines of a log file, indented, for error messages.
fn log_tail(path: &Path, n: usize) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    let tail = crate::util::last_lines(&text, n);
    if tail.is_empty() {
        "    (the log is empty)".into()
    } else {
        tail.iter()
            .map(|l| format!("    {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The first MiB of the log at `path`, as text; `None` when it cannot be read.
fn log_head(path: &str) -> Option<String> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(1 << 20)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The values `read` finds in the log at `path` ([`log_head`]; lines end at `\n` or `\r`),
/// in order.
fn curve_in_log(path: &str, read: &crate::verify::prune::Progress) -> Vec<f64> {
    log_head(path).map_or_else(Vec::new, |text| {
        text.split(['\n', '\r'])
            .filter_map(|line| read.read(line).map(|(_, v)| v))
            .collect()
    })
}

/// When an experiment decided at `now` is recorded as decided: after every experiment of the
/// run's `history` (which holds every keep), whatever the clock did (a step back, a resume on
/// a host whose clock is behind), since the best is the keep decided last
/// ([`crate::store::best_experiment`]).
fn decision_time(now: f64, history: &[ExperimentRecord]) -> f64 {
    let latest = history
        .iter()
        .filter_map(|e| e.finished_at)
        .fold(f64::NEG_INFINITY, f64::max);
    now.max(latest + 1e-3)
}

#[cfg(test)]
mod decision_tests {
    use super::*;

    #[test]
    fn an_experiment_is_decided_after_every_one_before_it_whatever_the_clock() {
        let at = |f: f64| ExperimentRecord {
            finished_at: Some(f),
            ..Default::default()
        };
        assert_eq!(decision_time(100.0, &[]), 100.0);
        assert_eq!(decision_time(100.0, &[at(50.0), at(60.0)]), 100.0);
        // The clock stepped back an hour: still after the last decision.
        let t = decision_time(100.0, &[at(3700.0), at(3600.0)]);
        assert!(t > 3700.0 && t < 3700.1, "{t}");
    }
}
