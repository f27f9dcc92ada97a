//! Tests of hone's git: snapshots and their line counts, raw bytes whatever the repository's configuration, materializing a commit, globs.

use super::*;

use super::inproc_tests::{repo as committed, sh, two_commits, worktree_at_head};

/// A repository whose first commit holds what `files` writes, with the run's worktree made at
/// HEAD and then changed by `change` (shell commands both): the repository, HEAD's commit and
/// the worktree's path.
fn worktree_changed(files: &str, change: &str) -> (tempfile::TempDir, Git, String, PathBuf) {
    let (dir, git) = committed(files);
    let (head, wt) = worktree_at_head(&git);
    sh(&wt, change);
    (dir, git, head, wt)
}

#[test]
fn snapshot_reports_changes_with_line_counts_and_reset_restores() {
    let (_dir, git, head, wt) = worktree_changed(
        "printf 'a\\nb\\n' > f.txt && printf 'x\\n' > 'sp ace.txt'",
        "printf 'a\\nB\\nc\\n' > f.txt && rm 'sp ace.txt' && printf '\\0\\1' > bin.dat",
    );
    let snap = git.snapshot(&wt, &head, "m").unwrap().unwrap();
    let mut got: Vec<(char, String, u64, u64)> = snap
        .changes
        .iter()
        .map(|c| (c.status, c.path.clone(), c.added, c.deleted))
        .collect();
    got.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(
        got,
        vec![
            ('A', "bin.dat".to_string(), 0, 0),
            ('M', "f.txt".to_string(), 2, 1),
            ('D', "sp ace.txt".to_string(), 0, 1),
        ]
    );
    assert!(snap.hidden.is_empty());
    // Nothing changed: no snapshot.
    git.reset_worktree(&wt, &head).unwrap();
    assert!(git.snapshot(&wt, &head, "m").unwrap().is_none());
    assert_eq!(std::fs::read_to_string(wt.join("f.txt")).unwrap(), "a\nb\n");
    assert!(!wt.join("bin.dat").exists());
}

/// A worktree made exactly a commit's files (`reset_worktree`), some tracked files then
/// rewritten in place: the commit's own listing (no git process) gives the very snapshot
/// git's listing of the worktree gives, whatever the tree holds (nested and spaced paths, an
/// executable, a link, an empty file, a submodule's gitlink, names git sorts unlike bytes).
#[test]
fn the_committed_listing_snapshots_an_in_place_rewrite_as_git_does() {
    let (_dir, git) = committed(
        "mkdir -p a/b 'sp ace' a-b && printf 'x = 1\\n' > a/b/params.py && printf 'y\\n' > 'sp ace/f.txt' \
         && printf '#!/bin/sh\\n' > run.sh && chmod +x run.sh && ln -s a/b/params.py link \
         && : > empty && printf 'z\\n' > a-b/z && printf 'w\\n' > a.txt \
         && git update-index --add --cacheinfo 160000,1111111111111111111111111111111111111111,sub",
    );
    let (head, wt) = worktree_at_head(&git);
    for (i, rewrite) in [
        "printf 'x = 2\\n' > a/b/params.py",
        "printf 'x = 3\\n' > a/b/params.py && printf 'w2\\n' > a.txt && printf 'q\\n' > empty",
        // Rewritten to what it held: nothing to commit, either way.
        "printf 'x = 1\\n' > a/b/params.py",
    ]
    .iter()
    .enumerate()
    {
        git.reset_worktree(&wt, &head).unwrap();
        sh(&wt, rewrite);
        let by_git = git.worktree_listing(&wt).unwrap();
        let by_tree = git.committed_listing(&head).unwrap();
        let msg = format!("m{i}");
        let a = git.snapshot_from(&wt, &head, &msg, by_git).unwrap();
        let b = git.snapshot_from(&wt, &head, &msg, by_tree).unwrap();
        match (a, b) {
            (None, None) => assert_eq!(i, 2),
            (Some(a), Some(b)) => {
                assert_eq!(a.tree, b.tree, "{rewrite}");
                assert_eq!(a.changes, b.changes, "{rewrite}");
                assert_eq!(a.hidden, b.hidden, "{rewrite}");
                assert!(!a.changes.is_empty());
            }
            (a, b) => panic!("{rewrite}: {:?} vs {:?}", a.is_some(), b.is_some()),
        }
    }
}

/// A repository whose config and `info/attributes` ask for every content conversion git
/// has (filters, `ident`, CRLF, textconv, an external diff): hone's own git runs none of
/// them, commits the worktree's raw bytes and writes a worktree from the raw blobs.
#[test]
fn hostile_config_and_attributes_change_nothing_hone_commits_or_writes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sh(d, "git init -q -b main && printf 'a\\n$Id$\\n' > f.txt && git add -A && git -c user.name=t -c user.email=t@t commit -qm i");
    let mark = d.join("ran");
    let m = mark.display();
    sh(
        d,
        &format!(
            "git config filter.x.clean 'touch {m}-clean; sed s/a/CLEAN/' && \
             git config filter.x.smudge 'touch {m}-smudge; sed s/a/SMUDGE/' && \
             git config filter.x.required true && \
             git config diff.x.textconv 'touch {m}-textconv; echo hidden' && \
             git config diff.external 'touch {m}-ext' && \
             git config core.autocrlf true && git config core.eol crlf && \
             mkdir -p .git/info && printf '* filter=x diff=x ident text eol=crlf\\n' > .git/info/attributes"
        ),
    );
    let git = Git::discover(d).unwrap();
    let (head, wt) = worktree_at_head(&git);
    // Written from the blob as it is: no smudge, no CRLF, no `$Id$` expansion.
    assert_eq!(std::fs::read(wt.join("f.txt")).unwrap(), b"a\n$Id$\n");
    std::fs::write(wt.join("f.txt"), b"a\r\nforbidden\r\n$Id$\n").unwrap();
    let snap = git.snapshot(&wt, &head, "m").unwrap().unwrap();
    assert_eq!(
        git.file_at(&snap.commit, "f.txt").unwrap(),
        b"a\r\nforbidden\r\n$Id$\n"
    );
    assert!(git
        .diff(&head, &snap.commit)
        .unwrap()
        .contains("+forbidden"));
    git.reset_worktree(&wt, &head).unwrap();
    assert_eq!(std::fs::read(wt.join("f.txt")).unwrap(), b"a\n$Id$\n");
    git.materialize(&wt, &snap.commit).unwrap();
    assert_eq!(
        std::fs::read(wt.join("f.txt")).unwrap(),
        b"a\r\nforbidden\r\n$Id$\n"
    );
    assert!(git.changed_tracked(&wt, &snap.commit).unwrap().is_empty());
    std::fs::write(wt.join("f.txt"), b"a\r\nforbidden\r\n$Id$\n ").unwrap();
    assert_eq!(git.changed_tracked(&wt, &snap.commit).unwrap(), ["f.txt"]);
    for what in ["clean", "smudge", "textconv", "ext"] {
        let p = d.join(format!("ran-{what}"));
        assert!(!p.exists(), "hone's git ran the {what} command");
    }
}

/// `materialize` leaves exactly the commit: extra files, ignored files, a nested
/// repository and a directory deeper than PATH_MAX all go; changed modes come back.
#[test]
fn materialize_removes_everything_else_even_beyond_path_max() {
    let (dir, git) = committed("printf 'x\\n' > f.py && mkdir src && printf 'y\\n' > src/g.py && chmod +x src/g.py && printf '*.log\\n' > .gitignore");
    let d = dir.path();
    let (head, wt) = worktree_at_head(&git);
    assert!(git.unrecordable(&wt).unwrap().is_none());
    sh(&wt, "printf z > x.log && chmod -x src/g.py && rm f.py && mkdir -p sub && git -C sub init -q && printf p > sub/__main__.py");
    assert!(git
        .unrecordable(&wt)
        .unwrap()
        .unwrap()
        .contains("`sub/.git`"));
    std::fs::rename(wt.join("sub"), d.join("sub")).unwrap();
    // 2,100 levels: beyond what one system call can name.
    sh(
        &wt.join("src"),
        "python3 -c \"import os\nfor _ in range(2100):\n    os.mkdir('a'); os.chdir('a')\nopen('x.py', 'w').write('p')\"",
    );
    assert!(git.unrecordable(&wt).unwrap().unwrap().contains("too deep"));
    std::fs::rename(d.join("sub"), wt.join("sub")).unwrap();
    git.reset_worktree(&wt, &head).unwrap();
    assert!(git.unrecordable(&wt).unwrap().is_none());
    let mut names: Vec<_> = std::fs::read_dir(&wt)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, [".git", ".gitignore", "f.py", "src"]);
    let mode = std::fs::metadata(wt.join("src/g.py"))
        .unwrap()
        .permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o111,
        0o111
    );
}

/// Modes git does not record (a protected file made unreadable, a directory closed) come
/// back as hone writes them, so that no verifier without root's privileges crashes on what an
/// earlier candidate left; an executable bit stays the commit's. Modes with the owner's bits
/// (a umask's 0775 or 0700, a setgid directory) are left as they are.
#[test]
fn materialize_restores_modes_git_does_not_record() {
    let (_dir, git) = committed(
        "printf 'x\\n' > eval.py && mkdir src && printf 'y\\n' > src/g.py && chmod +x src/g.py",
    );
    let (head, wt) = worktree_at_head(&git);
    sh(
        &wt,
        "chmod 000 eval.py && chmod 100 src/g.py && chmod 000 src && chmod 500 .",
    );
    git.materialize(&wt, &head).unwrap();
    let mode = |p: &str| {
        std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(wt.join(p)).unwrap().permissions(),
        ) & 0o7777
    };
    assert_eq!(
        [mode("eval.py"), mode("src/g.py"), mode("src"), mode("")],
        [0o644, 0o755, 0o755, 0o755]
    );
    // Nothing else differs: a second check finds the worktree as committed.
    assert!(git.changed_tracked(&wt, &head).unwrap().is_empty());
    sh(&wt, "chmod 2775 src && chmod 664 eval.py");
    git.materialize(&wt, &head).unwrap();
    assert_eq!([mode("src"), mode("eval.py")], [0o2775, 0o664]);
}

/// A candidate's new content is bounded by size alone, nothing read: a tracked file as large
/// as its blob is none (however large), and past the limit the largest new file is named.
#[test]
fn new_content_is_bounded_by_sizes_and_a_file_left_alone_counts_as_none() {
    let (_dir, git) = committed("printf '0123456789' > big.bin && printf 'x' > f.py");
    let staged = git.run(&["ls-files", "-s"]).unwrap();
    let big = staged.split_whitespace().nth(1).unwrap().to_string();
    let indexed: std::collections::BTreeMap<&str, &str> = [("big.bin", big.as_str())].into();
    let fits = |files: &[(&str, u64)], limit| {
        let files: Vec<(String, &str, u64)> = files
            .iter()
            .map(|(p, n)| (p.to_string(), "100644", *n))
            .collect();
        git.new_content_fits(&files, &indexed, limit)
    };
    // big.bin as committed (10 bytes) is no new content, even over a limit of 4.
    assert!(fits(&[("big.bin", 10), ("f.py", 3)], 4).is_ok());
    match fits(&[("big.bin", 11), ("f.py", 3), ("new.dat", 7)], 12) {
        // The largest new file first, until the rest fits: 11 + 3 + 7 = 21, less 11 is 10.
        Err(GitError::TooLarge { files }) => assert_eq!(files, [("big.bin".to_string(), 11)]),
        other => panic!("{other:?}"),
    }
    assert!(fits(&[("big.bin", 11)], 12).is_ok());
    // Many files under the limit each: as many of the largest as it takes.
    match fits(&[("a", 5), ("b", 6), ("c", 5), ("f.py", 3)], 8) {
        Err(GitError::TooLarge { files }) => {
            assert_eq!(files, [("b".to_string(), 6), ("a".to_string(), 5)])
        }
        other => panic!("{other:?}"),
    }
}

/// A tracked file the candidate made huge (sparse: a second to make, hours to hash) is not
/// read: the snapshot refuses it by its size, and the reset finds it stale by its size.
#[test]
fn a_huge_sparse_file_is_refused_by_its_size_and_reset_without_being_read() {
    let (_dir, git, head, wt) = worktree_changed("printf 'x\\n' > f.py", "truncate -s 3G f.py");
    match git.snapshot(&wt, &head, "m") {
        Err(GitError::TooLarge { files }) => assert_eq!(files, [("f.py".to_string(), 3 << 30)]),
        other => panic!("{:?}", other.map(|s| s.map(|s| s.commit))),
    }
    assert_eq!(git.changed_tracked(&wt, &head).unwrap(), ["f.py"]);
    git.reset_worktree(&wt, &head).unwrap();
    assert_eq!(std::fs::read(wt.join("f.py")).unwrap(), b"x\n");
}

/// A sealed file that grew past the largest sealed file is changed by its size alone.
#[test]
fn a_file_past_the_bound_hashes_to_its_size_unread() {
    let (_dir, git, _head, wt) = worktree_changed(
        "printf 'x\\n' > eval.py && printf 'yy\\n' > b.py",
        "truncate -s 3G eval.py",
    );
    let paths = ["eval.py".to_string(), "b.py".to_string()];
    let bound = git
        .largest_blob("HEAD", paths.iter().map(String::as_str))
        .unwrap();
    assert_eq!(bound, 3);
    let bounded = hash_paths_bounded(&wt, &paths, Some(bound)).unwrap();
    assert_eq!(bounded["eval.py"], format!("size {}", 3u64 << 30));
    let b = hash_paths(&wt, &["b.py".to_string()]).unwrap();
    assert_eq!(bounded["b.py"], b["b.py"]);
}

/// A directory the candidate replaced by a symlink to hidden data: the snapshot commits
/// the symlink, never the data behind it (hone reads outside every sandbox).
#[test]
fn a_snapshot_never_reads_through_a_symlinked_directory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let secret = tempfile::tempdir().unwrap();
    std::fs::write(secret.path().join("0.log"), "TOPSECRET\n").unwrap();
    sh(d, "git init -q -b main && mkdir -p src/h && printf 'x\n' > src/h/0.log && git add -A && git -c user.name=t -c user.email=t@t commit -qm i");
    let git = Git::discover(d).unwrap();
    let (head, wt) = worktree_at_head(&git);
    sh(
        &wt,
        &format!("rm -rf src/h && ln -s {} src/h", secret.path().display()),
    );
    let snap = git.snapshot(&wt, &head, "m").unwrap().unwrap();
    let tree = git.run(&["ls-tree", "-r", &snap.commit]).unwrap();
    assert!(
        tree.contains("120000 blob"),
        "the symlink is committed: {tree}"
    );
    assert!(!tree.contains("src/h/0.log"), "{tree}");
    let all = git.run(&["grep", "-c", "TOPSECRET", &snap.commit]);
    assert!(all.is_err(), "the hidden data reached the commit: {all:?}");
}

/// A training stage that put a symlink where the commit has a directory of outputs: the
/// sealed rebuild writes nothing through it.
#[test]
fn the_sealed_rebuild_never_writes_through_a_planted_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let outside = tempfile::tempdir().unwrap();
    sh(d, "git init -q -b main && mkdir checkpoints && printf keep > checkpoints/.gitkeep && printf P > prepare.py && git add -A && git -c user.name=t -c user.email=t@t commit -qm i");
    let git = Git::discover(d).unwrap();
    let (head, wt) = worktree_at_head(&git);
    sh(
        &wt,
        &format!(
            "rm -r checkpoints && ln -s {} checkpoints",
            outside.path().display()
        ),
    );
    let keep = ["checkpoints/".to_string()];
    git.materialize_sealed(&wt, (&head, &head), &["prepare.py".to_string()], &keep)
        .unwrap();
    assert_eq!(
        std::fs::read_dir(outside.path()).unwrap().count(),
        0,
        "nothing was written outside the worktree"
    );
    let meta = std::fs::symlink_metadata(wt.join("checkpoints")).unwrap();
    assert!(meta.is_dir(), "a real directory again");
    assert_eq!(
        std::fs::read_to_string(wt.join("checkpoints/.gitkeep")).unwrap(),
        "keep"
    );
}

/// A declared output left as a link out of the worktree (to a hidden holdout file the
/// stage could not read, but the sealed scorer can) is removed, at any depth of a kept
/// directory; a link to another output inside the worktree stays.
#[test]
fn the_sealed_rebuild_drops_outputs_that_link_out_of_the_worktree() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("labels.txt");
    std::fs::write(&secret, "hidden").unwrap();
    sh(d, "git init -q -b main && printf P > prepare.py && git add -A && git -c user.name=t -c user.email=t@t commit -qm i");
    let git = Git::discover(d).unwrap();
    let (head, wt) = worktree_at_head(&git);
    sh(
        &wt,
        &format!(
            "ln -s {s} preds.txt && mkdir -p out/deep && ln -s {s} out/deep/p.txt && ln -s ../../prepare.py out/deep/inside.txt && printf m > model.txt && ln -s model.txt latest.txt && ln -s ../../nowhere dangling.txt",
            s = secret.display()
        ),
    );
    let keep = [
        "preds.txt",
        "out/",
        "model.txt",
        "latest.txt",
        "dangling.txt",
    ]
    .map(String::from);
    git.materialize_sealed(&wt, (&head, &head), &[], &keep)
        .unwrap();
    let gone = |p: &str| std::fs::symlink_metadata(wt.join(p)).is_err();
    assert!(gone("preds.txt"), "a link to a file outside is removed");
    assert!(gone("out/deep/p.txt"), "also inside a kept directory");
    assert!(gone("dangling.txt"), "a link to nothing is removed");
    assert_eq!(std::fs::read_to_string(wt.join("latest.txt")).unwrap(), "m");
    assert_eq!(
        std::fs::read_to_string(wt.join("out/deep/inside.txt")).unwrap(),
        "P"
    );
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "hidden");
}

/// An output linked out of the worktree only once the rebuild puts back a directory the
/// candidate had made a link (`lib` -> a chain inside, `model.json` -> `lib/../..`, listed
/// before `lib`): the rebuild repairs again and removes it, rather than stopping the run.
#[test]
fn a_link_that_leads_out_only_after_a_repair_is_removed_too() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sh(d, "git init -q -b main && mkdir lib && printf x > lib/a.py && git add -A && git -c user.name=t -c user.email=t@t commit -qm i");
    let git = Git::discover(d).unwrap();
    let (head, wt) = worktree_at_head(&git);
    let depth = wt.components().count();
    // A chain as deep as the worktree's path, so that `lib/..` climbs back to the worktree's
    // top through it, and past the root once `lib` is the directory again.
    let chain: std::path::PathBuf = ["z".to_string()]
        .into_iter()
        .chain(std::iter::repeat_n("q".to_string(), depth))
        .collect();
    std::fs::create_dir_all(wt.join(&chain)).unwrap();
    // What it names inside the worktree, through the link.
    std::fs::create_dir_all(wt.join("etc")).unwrap();
    std::fs::write(wt.join("etc/hostname"), "decoy").unwrap();
    std::fs::remove_dir_all(wt.join("lib")).unwrap();
    let target = format!("lib/{}etc/hostname", "../".repeat(depth + 1));
    // Made again until the directory lists `model.json` before `lib` (the walk meets it first).
    for attempt in 0..200 {
        let _ = std::fs::remove_file(wt.join("lib"));
        let _ = std::fs::remove_file(wt.join("model.json"));
        symlink(&chain, wt.join("lib")).unwrap();
        symlink(&target, wt.join("model.json")).unwrap();
        let names: Vec<String> = std::fs::read_dir(&wt)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        let at = |n: &str| names.iter().position(|x| x == n).unwrap();
        if at("model.json") < at("lib") {
            break;
        }
        assert!(attempt < 199, "the directory never listed model.json first");
        std::fs::write(wt.join(format!("pad{attempt}")), "").unwrap();
    }
    assert!(
        wt.join("model.json")
            .canonicalize()
            .unwrap()
            .starts_with(wt.canonicalize().unwrap()),
        "inside through the link, as the walk first sees it"
    );
    let keep = ["model.json", "z/", "pad*", "etc/"].map(String::from);
    git.materialize_sealed(&wt, (&head, &head), &[], &keep)
        .unwrap();
    assert!(std::fs::symlink_metadata(wt.join("lib")).unwrap().is_dir());
    assert!(
        std::fs::symlink_metadata(wt.join("model.json")).is_err(),
        "removed"
    );
}

/// The sealed evaluation's tree: the candidate's files, the sealed ones from the base,
/// and of the rest only the declared outputs.
#[test]
fn materialize_sealed_keeps_outputs_and_restores_sealed_files() {
    let (dir, git, base, cand) = two_commits(
        "printf P1 > prepare.py && printf m > model.py",
        "printf P2 > prepare.py && printf m2 > model.py",
    );
    let d = dir.path();
    let wt = d.join(".hone/wt");
    git.prepare_worktree(&wt, &cand).unwrap();
    sh(&wt, "printf o > model.txt && mkdir -p out sub && printf o > out/model.txt && printf j > junk.txt && printf j > sub/junk && printf x > model.py");
    let sealed = ["prepare.py".to_string()];
    let keep = ["model.txt".to_string()];
    git.materialize_sealed(&wt, (&cand, &base), &sealed, &keep)
        .unwrap();
    let read = |p: &str| std::fs::read_to_string(wt.join(p)).unwrap();
    assert_eq!(read("prepare.py"), "P1");
    assert_eq!(read("model.py"), "m2");
    assert_eq!(read("model.txt"), "o");
    assert_eq!(read("out/model.txt"), "o");
    assert!(!wt.join("junk.txt").exists());
    assert!(!wt.join("sub").exists());
}

#[test]
fn a_snapshot_whose_staged_objects_were_pruned_writes_them_again() {
    // `git gc --prune=now` racing `git add`: the index names a blob that is gone.
    // An old mtime: the file is not "racily clean", so git trusts the index entry.
    let (_dir, git, head, wt) = worktree_changed(
        "printf 'a\\n' > f.txt",
        "printf 'new content\\n' > f.txt && touch -d 2020-01-01 f.txt && git add -A",
    );
    let blob = git.run_in(&wt, &["rev-parse", ":f.txt"]).unwrap();
    let blob = blob.trim();
    let objects = git.common_dir().unwrap().join("objects");
    std::fs::remove_file(objects.join(&blob[..2]).join(&blob[2..])).unwrap();
    assert_eq!(
        git.missing_objects(&[blob.to_string(), head.clone()])
            .unwrap(),
        [blob]
    );
    // The snapshot hashes the files' raw bytes itself (it never trusts the index's
    // entries), so the pruned blob is written again; a reindex changes nothing after it.
    let first = git.snapshot(&wt, &head, "m").unwrap().unwrap();
    git.reindex(&wt, &head).unwrap();
    let snap = git.snapshot(&wt, &head, "m").unwrap().unwrap();
    assert_eq!(first.tree, snap.tree);
    assert!(git
        .missing_objects(&[snap.commit.clone(), blob.to_string()])
        .unwrap()
        .is_empty());
    assert_eq!(
        git.file_at(&snap.commit, "f.txt").unwrap(),
        b"new content\n"
    );
    // A ref to a missing object still reads raw (for recovery to remove it).
    assert_eq!(git.raw_ref("refs/nothing").unwrap(), None);
}

#[test]
fn globs() {
    assert!(glob_match("train.py", "train.py"));
    assert!(!glob_match("train.py", "src/train.py"));
    assert!(glob_match("*.py", "train.py"));
    assert!(!glob_match("*.py", "src/train.py"));
    assert!(glob_match("**/*.py", "src/a/train.py"));
    assert!(glob_match("**/*.py", "train.py"));
    assert!(glob_match("data/", "data/x/y.bin"));
    assert!(glob_match("data", "data/x.bin"));
    assert!(!glob_match("data/", "database.txt"));
    assert!(glob_match("src/*/mod.rs", "src/a/mod.rs"));
    assert!(glob_match("model_?.py", "model_a.py"));
    assert!(!glob_match("model_?.py", "model_ab.py"));
    assert!(glob_match("src/**", "src/a/b.rs"));
}

#[test]
fn a_sha256_or_reftable_repository_is_refused_at_discovery() {
    for (flags, said) in [
        ("--object-format=sha256", "sha256 object names"),
        ("--ref-format=reftable", "`reftable` ref storage"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let made = Command::new("git")
            .args(["init", "-q", flags])
            .current_dir(dir.path())
            .status()
            .unwrap();
        if !made.success() {
            // This git cannot make one (older than 2.29 or 2.45): nothing to refuse.
            continue;
        }
        let err = Git::discover(dir.path()).unwrap_err().to_string();
        assert!(err.contains(said), "{err}");
        assert!(
            err.contains("hone needs a SHA-1 repository with the files ref backend"),
            "{err}"
        );
    }
    // The default kind is accepted.
    let dir = tempfile::tempdir().unwrap();
    let made = Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir.path())
        .status()
        .unwrap();
    assert!(made.success());
    assert!(Git::discover(dir.path()).is_ok());
}

/// A worktree whose `.git` names another linked worktree's administrative directory (one
/// git wrote, with its own `gitdir`) is not its link: hone's reset rebuilds it and never
/// moves the other worktree's HEAD or rewrites its index.
#[test]
fn a_link_to_another_worktrees_admin_directory_is_refused() {
    let (dir, git, first, second) = two_commits("printf 'a\\n' > f.txt", "printf 'b\\n' > f.txt");
    let d = dir.path();
    let (a, b) = (d.join(".hone/slots/t/w0"), d.join(".hone/slots/t/w1"));
    git.prepare_worktree(&a, &first).unwrap();
    git.prepare_worktree(&b, &first).unwrap();
    assert!(git.worktree_link_ok(&a) && git.worktree_link_ok(&b));
    let b_link = std::fs::read_to_string(b.join(".git")).unwrap();
    let b_admin = Path::new(b_link.trim().strip_prefix("gitdir: ").unwrap()).to_path_buf();
    assert!(b_admin.join("gitdir").exists(), "a directory git wrote");
    std::fs::write(a.join(".git"), &b_link).unwrap();
    assert!(!git.worktree_link_ok(&a), "A's .git names B's directory");
    assert!(git.worktree_link_ok(&b), "B's own link is untouched");
    let b_head = std::fs::read(b_admin.join("HEAD")).unwrap();
    let b_index = std::fs::read(b_admin.join("index")).unwrap();
    assert!(!git.reset_worktree_checked(&a, &second).unwrap());
    git.reset_worktree(&a, &second).unwrap();
    assert_eq!(std::fs::read(b_admin.join("HEAD")).unwrap(), b_head);
    assert_eq!(std::fs::read(b_admin.join("index")).unwrap(), b_index);
    assert!(git.worktree_link_ok(&a) && git.worktree_link_ok(&b));
    assert_ne!(std::fs::read_to_string(a.join(".git")).unwrap(), b_link);
    assert_eq!(std::fs::read(a.join("f.txt")).unwrap(), b"b\n");
    assert_eq!(sh(&a, "git rev-parse HEAD").trim(), second);
    assert_eq!(sh(&b, "git rev-parse HEAD").trim(), first);
}

/// The archive's one `ls-files` (index and untracked files together) commits the same tree
/// as the index and the untracked files listed apart, by every ignore source git has
/// (.gitignore, info/exclude, core.excludesFile), with names that look like its tags.
#[test]
fn one_listing_of_index_and_untracked_files_commits_what_two_did() {
    let (dir, git) = committed("printf 'a\\n' > f.txt && printf 'ign*\\n' > .gitignore");
    let d = dir.path();
    let head = git.head().unwrap();
    let wt = d.join(".hone/wt");
    git.prepare_worktree(&wt, &head).unwrap();
    let excludes = d.join("global-excludes");
    std::fs::write(&excludes, "glob-ex*\n").unwrap();
    sh(
        d,
        &format!(
            "git config core.excludesFile '{}' && mkdir -p .git/info && printf 'info-ex*\\n' > .git/info/exclude",
            excludes.display()
        ),
    );
    sh(
        &wt,
        "printf 'b\\n' > f.txt && printf n > 'new file.txt' && mkdir -p sub && printf s > sub/x && \
         printf i > ign.txt && printf g > glob-ex.txt && printf e > info-ex.txt && \
         printf q > '? H 100644' && printf t > staged.txt && git add staged.txt",
    );
    let listing = git.worktree_listing(&wt).unwrap();
    let one = git
        .snapshot_from(&wt, &head, "m", listing)
        .unwrap()
        .unwrap();
    let two = git.snapshot(&wt, &head, "m").unwrap().unwrap();
    assert_eq!(one.tree, two.tree);
    let mut added: Vec<String> = one
        .changes
        .iter()
        .filter(|c| c.status == 'A')
        .map(|c| c.path.clone())
        .collect();
    added.sort();
    assert_eq!(added, ["? H 100644", "new file.txt", "staged.txt", "sub/x"]);
}

/// git is started by an absolute path, with the loader's and the program search paths of its
/// environment holding absolute entries only: it runs in worktrees a candidate wrote.
#[test]
fn git_is_started_by_absolute_path_with_absolute_search_paths() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = super::git_command(dir.path());
    assert!(Path::new(c.get_program()).is_absolute(), "{c:?}");
    for (name, value) in c.get_envs() {
        let Some(value) = value else { continue };
        if name == "PATH" || name == "LD_LIBRARY_PATH" {
            let value = value.to_string_lossy();
            assert!(
                value.split(':').all(|e| e.starts_with('/')),
                "{name:?} = {value:?}"
            );
        }
    }
    assert!(
        c.get_envs().any(|(n, v)| n == "PATH" && v.is_some()),
        "git gets a PATH of its own"
    );
}

/// Making room after a write failed for lack of it: only the scratch directory `.hone/tmp`
/// (whole) and new files of at least 1 MiB go, largest first (by the room they take), never a
/// file the commit tracks however it grew, nor a small new file, nor anything a symlink points
/// at; with the disk not full and no failed write, nothing goes.
#[test]
fn making_room_takes_only_large_new_files_and_the_scratch_directory() {
    let (dir, git, head, wt) = worktree_changed(
        "printf 'a\\n' > tracked.txt",
        "head -c 3000000 /dev/urandom > tracked.txt && mkdir -p out .hone/tmp \
         && head -c 2000000 /dev/urandom > out/ckpt.bin && head -c 1500000 /dev/urandom > .hone/tmp/t \
         && head -c 1000 /dev/urandom > small.bin && truncate -s 5G sparse.bin",
    );
    let outside = dir.path().join("outside.bin");
    std::fs::write(&outside, vec![7u8; 4 << 20]).unwrap();
    std::os::unix::fs::symlink(&outside, wt.join("link.bin")).unwrap();
    assert!(!disk_nearly_full(&wt), "this test needs a disk with room");
    assert!(git.make_room(&wt, &head, false, 8).unwrap().is_empty());
    let removed = git.make_room(&wt, &head, true, 8).unwrap();
    // The disk is not full, so a failed write makes room for one: the largest.
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert_eq!(removed[0].0, PathBuf::from("out/ckpt.bin"));
    assert!(removed[0].1 >= 2_000_000, "{removed:?}");
    assert!(!wt.join("out/ckpt.bin").exists());
    let removed = git.make_room(&wt, &head, true, 8).unwrap();
    assert_eq!(removed[0].0, PathBuf::from(".hone/tmp"));
    assert!(!wt.join(".hone/tmp").exists());
    // Nothing else qualifies: the tracked file, the small one, the sparse one (it holds
    // nothing), the symlink and what it points at stay.
    assert!(git.make_room(&wt, &head, true, 8).unwrap().is_empty());
    for kept in ["tracked.txt", "small.bin", "sparse.bin", "link.bin"] {
        assert!(
            wt.join(kept).symlink_metadata().is_ok(),
            "{kept} was removed"
        );
    }
    assert_eq!(std::fs::metadata(&outside).unwrap().len(), 4 << 20);
}

/// git (and the ssh it starts) inherits none of hone's secrets, under whatever name: only
/// what it needs passes, and not even that when it holds a value a run registered.
#[test]
fn git_inherits_no_secret_of_hones() {
    crate::util::withhold("sk-withheld-from-git-7f3a");
    let passes = |k: &str, v: &str| super::git_needs(k.as_ref(), v.as_ref());
    for (k, v) in [
        ("MY_LLM", "sk-other"),
        ("OPENAI_API_KEY", "sk-other"),
        ("DATABASE_URL", "postgres://u:pw@db/x"),
        ("HONE_QUEUE_KEY", "anything"),
        ("GITHUB_TOKEN", "ghp_x"),
        ("GIT_ASKPASS", "/bin/echo sk-withheld-from-git-7f3a"),
        ("HOME", "/home/sk-withheld-from-git-7f3a"),
    ] {
        assert!(!passes(k, v), "{k}");
    }
    for (k, v) in [
        ("HOME", "/root"),
        ("SSH_AUTH_SOCK", "/run/ssh.sock"),
        ("GIT_SSH_COMMAND", "ssh -i key"),
        ("https_proxy", "http://proxy:3128"),
        ("LC_CTYPE", "C.UTF-8"),
    ] {
        assert!(passes(k, v), "{k}");
    }
}

/// A commit message longer than any argument may be (Linux refuses one over 128 KiB) is
/// written whole: a description as long as an agent makes it cannot stop `hone finalize`.
#[test]
fn a_commit_message_of_any_length_is_written() {
    let (dir, git) = committed("echo a > a.txt");
    let head = git.head().unwrap();
    let tree = git.tree_of(&head).unwrap();
    let message = format!("long\n\n{}", "x".repeat(300_000));
    let commit = git.commit_with_message(&tree, &head, &message).unwrap();
    let body = sh(dir.path(), &format!("git log -1 --format=%B {commit}"));
    assert_eq!(body.trim_end().len(), message.len());
}
