//! The gate: the checks between a proposal and its verifier, in order, before any compute is
//! spent on the candidate. The worktree's git link, hone's refs, the snapshot (an unchanged
//! worktree is `invalid`), hidden files, the scope rules, escaping symlinks, sealed files, the
//! outer loop's filters; then duplicates; then the review (limits, `forbid`, the reviewer),
//! which is the slow one and so is never spent on a duplicate; last the pinned inputs. A
//! parallel run does the review and the pinned inputs on the candidate's slot thread. Each check is a function that
//! returns at most one rejection; [`Engine::gate`] runs them in order and its caller times the
//! whole gate once. The check a run opens with, that `[verify.holdout] hide` names no tracked
//! file (which every worktree, and so every agent, would hold), is here too.

use std::path::Path;

use crate::spec::Spec;
use crate::store::{ExperimentRecord, Status};
use crate::workspace::RefListing;
use crate::workspace::{first_difference, hash_paths, matches_any, Change, Git};

use super::proposal::Turn;
use super::review::{Gate, ReviewPlace};
use super::state::{restore_refs, Seals};
use super::{Config, Engine, EngineError, Stop};

/// Why a candidate does not go on to its verifier.
pub(super) struct Rejection {
    pub status: Status,
    pub reason: String,
    /// The run must stop too (a changed pinned input, a reviewer that cannot work).
    pub stop: Option<Stop>,
}

impl Rejection {
    pub(super) fn new(status: Status, reason: String) -> Option<Rejection> {
        Some(Rejection {
            status,
            reason,
            stop: None,
        })
    }
}

impl Engine<'_> {
    /// Snapshots the candidate `turn` left in its worktree (the archive) and runs the checks
    /// on it, in order up to the outer loop's filters; the first rejection, if any. The
    /// baseline has none of these (its pinned inputs are checked, as every candidate's are,
    /// after the review: [`pinned_rejection`]). `in_place` as
    /// [`crate::propose::Proposal::in_place`] says.
    pub(super) fn gate(
        &mut self,
        rec: &mut ExperimentRecord,
        turn: &Turn<'_>,
        refs_before: &RefListing,
        in_place: bool,
    ) -> Result<Option<Rejection>, EngineError> {
        if turn.best.is_none() {
            return Ok(None);
        }
        let (wt, parent) = (turn.wt, turn.parent);
        if !self.verifier.git.worktree_link_ok(wt) {
            let why = "replaced the worktree's .git (git would have run another repository's settings); nothing was committed".to_string();
            return Ok(Rejection::new(Status::Violation, why));
        }
        let refs_after = self.run_refs()?;
        // Someone else's commit on the run branch: kept, not blamed on the agent; the run stops.
        if let Some(stop) = self.foreign_commit_in(refs_before, &refs_after)? {
            self.archive(rec, wt, parent, false)?;
            return Ok(Some(Rejection {
                status: Status::Aborted,
                reason: "not judged: a commit that is not hone's landed on the run branch during this experiment; the run stopped".into(),
                stop: Some(stop),
            }));
        }
        if refs_after != *refs_before {
            let moved = restore_refs(&self.verifier.git, refs_before, &refs_after)?;
            self.archive(rec, wt, parent, false)?;
            let why = format!("the proposer moved hone's refs ({moved}); they were put back");
            return Ok(Rejection::new(Status::Violation, why));
        }
        let (snap, dropped) = self.archive(rec, wt, parent, in_place)?;
        let too_large = (!dropped.is_empty())
            .then(|| format!("left {}: removed, not archived", dropped.join("; ")));
        let Some(snap) = snap else {
            if let Some(why) = too_large {
                return Ok(Rejection::new(Status::Violation, why));
            }
            let why = "no change: the proposer left the files as they were".to_string();
            return Ok(Rejection::new(Status::Invalid, why));
        };
        let violation = if too_large.is_some() {
            too_large
        } else if !snap.hidden.is_empty() {
            Some(format!(
                "hid `{}` from git (assume-unchanged/skip-worktree index flags)",
                snap.hidden.join("`, `")
            ))
        } else {
            self.unarchivable(wt, parent, &snap)?
                .or_else(|| scope_violation(&self.verifier.spec, &snap.changes))
                .or_else(|| shadowing_module(&self.verifier.spec, &snap.changes, &self.scorers))
                .or_else(|| escaping_symlink(wt, &snap.changes))
                .or_else(|| self.fixed_violation(rec.n, parent, &snap))
        };
        // The verifier sees the commit, byte for byte, not what the proposer left (files git
        // ignores, content git's filters would have changed). A violation is not measured:
        // the next reset clears what it left.
        if violation.is_none() {
            self.verifier.git.materialize(wt, &snap.commit)?;
        }
        let violation = violation.or_else(|| {
            self.verifier
                .sealed_changed(wt)
                .map(|path| format!("protected file `{path}` differs from the run's start"))
        });
        if let Some(why) = violation {
            return Ok(Rejection::new(Status::Violation, why));
        }
        // Outer loop: mechanisms' filters on an agent's edit, before any compute.
        if let Some(why) = self.outer_filter(rec, parent, turn.finished)? {
            return Ok(Rejection::new(Status::Rejected, why));
        }
        Ok(None)
    }

    /// The review gate on a candidate that passed the others (see
    /// [`Verifier::review`](super::verifier::Verifier::review)), on
    /// the coordinator's thread: the serial loop's. A parallel slot reviews its candidate on
    /// its own thread ([`rejection`] then reads the gate's answer).
    pub(super) fn review_here(
        &mut self,
        rec: &mut ExperimentRecord,
        turn: &Turn<'_>,
    ) -> Result<Option<Rejection>, EngineError> {
        let cancel = self.cancel();
        let interrupt = self.interrupt;
        let stopping = || interrupt.stop_requested();
        let place = ReviewPlace {
            store: &self.store,
            run_id: self.run.id,
            stopping: &stopping,
            time_up: self.time_up(),
        };
        let gate =
            self.verifier
                .review(&place, rec, (turn.wt, turn.parent), &cancel, &turn.meter)?;
        // Stopped while it was reviewed (a second Ctrl-C): not the reviewer's verdict. The
        // candidate is aborted, as a parallel slot's is, and the run can be resumed.
        if !matches!(gate, Gate::Pass) && cancel() {
            let reason = "interrupted by the user";
            return Ok(Some(Rejection {
                status: Status::Aborted,
                reason: reason.into(),
                stop: Some(Stop::resumable(
                    "interrupted by the user (run `hone run` to resume)",
                )),
            }));
        }
        Ok(rejection(gate))
    }

    /// What the archive cannot hold, or would hold other than the verifier would run it: a
    /// repository inside the worktree, a path too long for git, a gitlink, a change to
    /// `.gitattributes` or `.gitmodules` (they change how git writes files and submodules).
    fn unarchivable(
        &self,
        wt: &Path,
        parent: &str,
        snap: &crate::workspace::Snapshot,
    ) -> Result<Option<String>, EngineError> {
        let git = &self.verifier.git;
        if let Some(why) = git.unrecordable(wt)? {
            return Ok(Some(why));
        }
        if let Some(link) = git.gitlinks_added(parent, &snap.commit)?.first() {
            return Ok(Some(format!(
                "`{link}` became a gitlink (a repository of its own): its code is not archived"
            )));
        }
        Ok(snap
            .changes
            .iter()
            .find(|c| git_metadata_name(c.path.rsplit('/').next().unwrap_or(&c.path)))
            .map(|c| {
                format!(
                    "changed `{}`: git attributes and submodules are not the candidate's to change",
                    c.path
                )
            }))
    }

    /// The mechanisms' filters on a proposal that is not the knobs optimizer's (those are
    /// filtered, and resampled, while proposing). Returns why it is rejected, if it is.
    fn outer_filter(
        &mut self,
        rec: &ExperimentRecord,
        parent: &str,
        history: &[ExperimentRecord],
    ) -> Result<Option<String>, EngineError> {
        if self.outer.is_empty() || self.proposer.resamples() {
            return Ok(None);
        }
        let Some(commit) = rec.candidate_commit.as_deref() else {
            return Ok(None);
        };
        let diff = self.verifier.git.diff(parent, commit)?;
        let config: Option<crate::propose::knobs::Config> = rec
            .config
            .as_ref()
            .and_then(|c| serde_json::from_value(c.clone()).ok());
        Ok(self
            .outer
            .filter_diff(rec.n, &rec.description, config.as_ref(), &diff, history))
    }

    /// The first pinned input that changed, if any.
    pub(super) fn check_pinned(&self) -> Result<(), String> {
        pinned_changed(&self.verifier.seals, self.verifier.git.root())
    }
}

/// The gate's last check, after the review (which may take long): a pinned input under `root`
/// that changed since the run started aborts the candidate and stops the run.
pub(super) fn pinned_rejection(seals: &Seals, root: &Path) -> Option<Rejection> {
    pinned_changed(seals, root).err().map(|changed| {
        let reason = pinned_message(&changed);
        Rejection {
            status: Status::Aborted,
            reason: reason.clone(),
            stop: Some(Stop::failed(reason)),
        }
    })
}

/// Why the review gate's answer keeps a candidate from its verifier, if it does.
pub(super) fn rejection(gate: Gate) -> Option<Rejection> {
    match gate {
        Gate::Pass => None,
        Gate::Reject(why) | Gate::Refused(why) => Rejection::new(Status::Rejected, why),
        Gate::Stop(stop) => Some(Rejection {
            status: Status::Rejected,
            reason: stop.reason.clone(),
            stop: Some(stop),
        }),
        // No verdict on the candidate: the reviewer's server was out, or the budget could not
        // pay for the review.
        Gate::Unavailable(stop) => Some(Rejection {
            status: Status::Aborted,
            reason: stop.reason.clone(),
            stop: Some(stop),
        }),
    }
}

/// The first pinned input (under `root`) whose hash differs from the seals', if any.
fn pinned_changed(seals: &Seals, root: &Path) -> Result<(), String> {
    if seals.pinned.is_empty() {
        return Ok(());
    }
    match hash_paths(root, &seals.pinned_paths) {
        Ok(now) => match first_difference(&seals.pinned, &now) {
            Some(p) => Err(p),
            None => Ok(()),
        },
        Err(e) => Err(e.to_string()),
    }
}

pub(super) fn pinned_message(changed: &str) -> String {
    format!(
        "pinned input `{changed}` changed since the run started; restore it and run `hone run` again, or start a new run with `hone run --new`"
    )
}

/// Why a candidate with `rec`'s files is not run: the same files as an experiment already
/// measured (in `exps`, or dropped from it) or being verified (`in_flight`; those numbered in
/// `reviewing` are still in their review, whose verdict on the same files would be the same)
/// give the same answer.
pub(super) fn duplicate(
    rec: &ExperimentRecord,
    exps: &[ExperimentRecord],
    dropped: &super::history::Dropped,
    (in_flight, reviewing): (&[ExperimentRecord], &[u64]),
) -> Option<String> {
    let tree = rec.tree.as_deref()?;
    let measured =
        |e: &&ExperimentRecord| e.tree.as_deref() == Some(tree) && e.status().ran_verifier();
    let running = |e: &&ExperimentRecord| e.tree.as_deref() == Some(tree);
    let held = exps.iter().find(measured).map(|e| e.n);
    let first = match (held, dropped.measured_with(tree)) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    if let Some(n) = first {
        return Some(format!(
            "duplicate of #{n} (identical files; not run again)"
        ));
    }
    in_flight.iter().find(running).map(|dup| {
        let now = if reviewing.contains(&dup.n) {
            "reviewed"
        } else {
            "verified"
        };
        format!(
            "duplicate of #{}, which is being {now} now (identical files)",
            dup.n
        )
    })
}

impl Engine<'_> {
    /// The first `[loop] fixed` constant the candidate's commit assigns otherwise than its
    /// parent did, if any; a warning when none is, but a line it changed uses one
    /// (experiment `n`).
    fn fixed_violation(
        &mut self,
        n: u64,
        parent: &str,
        snap: &crate::workspace::Snapshot,
    ) -> Option<String> {
        let fixed = &self.verifier.spec.loop_.fixed;
        if fixed.is_empty() {
            return None;
        }
        let (violation, used) = fixed_findings(
            &self.verifier.git,
            fixed,
            parent,
            &snap.commit,
            &snap.changes,
        );
        if let (None, Some(used)) = (&violation, used) {
            self.emit(super::Event::Warning {
                message: format!(
                    "experiment {n} {used}; it does not assign it, but check that it keeps the measurement (`hone show {n}`)"
                ),
            });
        }
        violation
    }
}

/// What `commit`'s `changes` against `parent` do to the `[loop] fixed` constants: the first
/// one a file assigns otherwise than its parent did (a violation), and the first changed line
/// that uses one without assigning it, in words (`changes a line of `train.py` that uses
/// `EPOCHS` ...`). Files larger than 4 MiB are not read.
fn fixed_findings(
    git: &Git,
    fixed: &[String],
    parent: &str,
    commit: &str,
    changes: &[Change],
) -> (Option<String>, Option<String>) {
    let text = |commit: &str, path: &str| {
        git.file_at_most(commit, path, 4 << 20)
            .ok()
            .flatten()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    };
    let mut used = None;
    let violation = changes.iter().find_map(|c| {
        // An added file has no parent text: everything it assigns is new.
        let old = match c.status {
            'A' => String::new(),
            _ => text(parent, &c.path)?,
        };
        let new = match c.status {
            'D' => None,
            // Code too large to read is not let through unread.
            _ => match git.file_at_most(commit, &c.path, 4 << 20) {
                Ok(Some(b)) => Some(String::from_utf8_lossy(&b).into_owned()),
                Ok(None) if crate::propose::knobs::reads_as_code(&c.path) => {
                    return Some(format!(
                        "`{}` is larger than 4 MiB: [loop] fixed does not read it for its constants (keep such data out of the code)",
                        c.path
                    ))
                }
                _ => return None,
            },
        };
        if let (None, Some(new)) = (&used, &new) {
            used = crate::propose::knobs::fixed_used(fixed, &old, new).map(|(name, line)| {
                format!(
                    "changes a line of `{}` that uses `{name}` ([loop] fixed): `{line}`",
                    c.path
                )
            });
        }
        crate::propose::knobs::fixed_changed(fixed, &c.path, &old, new.as_deref())
    });
    (violation, used)
}

/// For `hone show`: the line of `commit` (against `parent`) that uses a `[loop] fixed`
/// constant without assigning it, in words, as the run warned when it made it; `None` when
/// none does or the commits cannot be read.
pub fn fixed_use_of(git: &Git, fixed: &[String], parent: &str, commit: &str) -> Option<String> {
    if fixed.is_empty() {
        return None;
    }
    let changes = git.changes(parent, commit).ok()?;
    let (violation, used) = fixed_findings(git, fixed, parent, commit, &changes);
    violation.is_none().then_some(used).flatten()
}

/// A Python module the candidate added, named like the standard library's or like one the
/// sealed scorers (`[verify] evaluate`, the holdout's) import, where they look first for what
/// they import (`scorers`, found when the run opened: `shadow::Scorers`).
fn shadowing_module(
    spec: &Spec,
    changes: &[Change],
    scorers: &super::shadow::Scorers,
) -> Option<String> {
    let (dirs, imported) = (&scorers.dirs, &scorers.modules);
    // A private name the user made editable by name is theirs (`_helpers.py`).
    let named = |path: &str| spec.loop_.editable.iter().any(|e| e == path);
    changes.iter().filter(|c| c.status == 'A').find_map(|c| {
        let module = super::shadow::shadowed(&c.path, dirs, imported)?;
        if named(&c.path) && module.starts_with("a private module") {
            return None;
        }
        Some(format!(
            "added `{}`, which the sealed scorer would import in place of {module}",
            c.path
        ))
    })
}

/// Why a set of changes breaks the scope rules, if it does. An editable file made into a
/// directory is one: `editable = ["train.py"]` names that file, not new files under
/// `train.py/`.
fn scope_violation(spec: &Spec, changes: &[Change]) -> Option<String> {
    let l = &spec.loop_;
    let deleted: std::collections::HashSet<&str> = changes
        .iter()
        .filter(|d| d.status == 'D')
        .map(|d| d.path.as_str())
        .collect();
    for c in changes {
        // A directory above an added file that was a file the candidate deleted.
        let under_deleted = c.status == 'A'
            && !deleted.is_empty()
            && c.path
                .match_indices('/')
                .any(|(i, _)| deleted.contains(&c.path[..i]));
        if under_deleted {
            return Some(format!(
                "made a file into a directory to add `{}` (editable names files and directories as they are)",
                c.path
            ));
        }
        if matches_any(&l.protected, &c.path) {
            return Some(format!("changed protected file `{}`", c.path));
        }
        if matches_any(&l.pinned, &c.path) {
            return Some(format!("changed pinned input `{}`", c.path));
        }
        if !matches_any(&l.editable, &c.path) {
            return Some(format!(
                "changed `{}`, which is not editable (editable: {})",
                c.path,
                l.editable.join(", ")
            ));
        }
    }
    None
}

/// A changed path that is a symlink pointing outside the worktree, or into its `.git` (once
/// merged, the link would lead into the user's repository), if any.
fn escaping_symlink(wt: &Path, changes: &[Change]) -> Option<String> {
    let root = std::fs::canonicalize(wt).ok()?;
    changes.iter().find_map(|c| {
        let p = wt.join(&c.path);
        let meta = std::fs::symlink_metadata(&p).ok()?;
        if !meta.file_type().is_symlink() {
            return None;
        }
        let target = std::fs::read_link(&p).ok()?;
        let resolved = p.parent()?.join(&target);
        // Resolve what exists; a dangling link is judged by its lexical path.
        let within = match std::fs::canonicalize(&resolved) {
            Ok(r) => r.strip_prefix(&root).map(Path::to_path_buf).ok(),
            Err(_) => (!target.is_absolute()
                && !target
                    .components()
                    .any(|c| c == std::path::Component::ParentDir))
            .then(|| {
                Path::new(&c.path)
                    .parent()
                    .unwrap_or(Path::new(""))
                    .join(&target)
            }),
        };
        // Any `.git` on the way (a nested repository's too), in any case (a file system
        // that ignores case reads `.GIT` as `.git`).
        let into_git = |rel: &Path| {
            rel.components().any(|c| {
                c.as_os_str()
                    .to_str()
                    .is_some_and(|c| c.eq_ignore_ascii_case(".git"))
            })
        };
        match within {
            None => Some(format!(
                "`{}` is a symlink to `{}`, outside the worktree",
                c.path,
                target.display()
            )),
            Some(rel) if into_git(&rel) => Some(format!(
                "`{}` is a symlink to `{}`, into the repository's .git",
                c.path,
                target.display()
            )),
            Some(_) => None,
        }
    })
}

/// `[verify.holdout] hide` must name no file tracked at `commit`: a tracked file is checked out
/// in every worktree, where the agent reads it whatever hone hides.
pub(super) fn check_hide_untracked(
    spec: &Spec,
    git: &Git,
    commit: &str,
) -> Result<(), EngineError> {
    let Some(holdout) = &spec.verify.holdout else {
        return Ok(());
    };
    if holdout.hide.is_empty() {
        return Ok(());
    }
    let files = git.files_at(commit)?;
    for (i, hide) in holdout.hide.iter().enumerate() {
        let rel = match Path::new(hide).strip_prefix(git.root()) {
            Ok(rel) => rel.to_string_lossy().into_owned(),
            Err(_) if Path::new(hide).is_absolute() => continue,
            Err(_) => hide.trim_start_matches("./").to_string(),
        };
        let rel = rel.trim_end_matches('/');
        let tracked = files
            .iter()
            .find(|f| rel.is_empty() || *f == rel || f.starts_with(&format!("{rel}/")));
        if let Some(f) = tracked {
            return Err(Config::Spec(holdout.hide_error(
                i,
                format!(
                    "`{hide}` is tracked by git (`{f}` is committed at {}), so every worktree holds it and hiding it does nothing: remove it from the repository (git rm -r --cached {hide}, then commit) and keep it outside, or name an untracked path",
                    &commit[..commit.len().min(10)]
                ),
            ))
            .into());
        }
    }
    Ok(())
}

/// Whether a file named `name` is, or on some checkout would be, `.gitattributes` or
/// `.gitmodules`: the name compared without case (macOS and Windows file systems), without
/// the characters HFS+ ignores, and without the trailing dots and spaces Windows drops. A
/// candidate's `src/.GitAttributes` is git's `src/.gitattributes` on a Mac.
fn git_metadata_name(name: &str) -> bool {
    let ignored = |c: char| matches!(c, '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}');
    let folded: String = name.chars().filter(|c| !ignored(*c)).collect();
    let folded = folded.trim_end_matches(['.', ' ']);
    folded.eq_ignore_ascii_case(".gitattributes") || folded.eq_ignore_ascii_case(".gitmodules")
}

#[cfg(test)]
mod tests {
    use super::git_metadata_name;

    #[test]
    fn git_metadata_names_are_caught_in_the_forms_other_file_systems_fold() {
        for name in [
            ".gitattributes",
            ".GitAttributes",
            ".GITMODULES",
            ".gitattributes.",
            ".gitattributes ",
            ".git\u{200c}attributes",
            "\u{feff}.gitmodules",
        ] {
            assert!(git_metadata_name(name), "{name:?}");
        }
        for name in [
            ".gitignore",
            "gitattributes",
            ".gitattributes.bak",
            "x.gitmodules",
        ] {
            assert!(!git_metadata_name(name), "{name:?}");
        }
    }
}
