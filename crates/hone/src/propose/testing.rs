//! A committed repository for the proposers' and the outer loop's tests, and a proposal
//! context over it.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::guidance::Guidance;
use super::{Budget, ProposeContext, Spend};
use crate::spec::Spec;
use crate::store::ExperimentRecord;
use crate::workspace::Git;

/// A temporary git repository on `main` with one commit, its hone.toml and its run directory.
pub struct Repo {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub spec: Spec,
    pub git: Git,
    pub head: String,
    /// `.hone/runs/t`, created.
    pub run_dir: PathBuf,
    spent: Spend,
}

impl Repo {
    /// Runs `files` (a shell command that writes the project's files) in a new repository,
    /// commits what it wrote and reads `spec` as its hone.toml.
    pub fn new(files: &str, spec: &str) -> Repo {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let ok = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "git init -q -b main && {files} && git add -A && git -c user.name=t -c user.email=t@t commit -qm i"
            ))
            .current_dir(&root)
            .status()
            .unwrap();
        assert!(ok.success(), "{files}");
        let spec = Spec::parse(Path::new("hone.toml"), spec).unwrap();
        let git = Git::discover(&root).unwrap();
        let head = git.head().unwrap();
        let run_dir = root.join(".hone/runs/t");
        std::fs::create_dir_all(&run_dir).unwrap();
        Repo {
            _dir: dir,
            root,
            spec,
            git,
            head,
            run_dir,
            spent: Spend::default(),
        }
    }

    /// The context of proposal `n` in `worktree` (at the head commit), after `history`.
    pub fn ctx<'a>(
        &'a self,
        n: u64,
        worktree: &'a Path,
        history: &'a [ExperimentRecord],
        best: Option<&'a ExperimentRecord>,
        guidance: &'a Guidance,
    ) -> ProposeContext<'a> {
        ProposeContext {
            n,
            worktree,
            parent_commit: &self.head,
            base_commit: &self.head,
            history,
            best,
            spec: &self.spec,
            git: &self.git,
            repo_root: &self.root,
            run_dir: &self.run_dir,
            seed: 0,
            cancel: &|| false,
            on_spawn: &|_, _| {},
            note: &|_| {},
            describe: &|_| {},
            wrapper: &[],
            budget: Budget::default(),
            spent: &self.spent,
            guidance,
            job: "",
            time_up: None,
        }
    }
}
