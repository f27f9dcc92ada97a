//! Tests of the in-process git operations against command-line git's answer on the same
//! repository: refs and their reflogs, line counts, raw blobs, trees and commits.

use std::collections::BTreeMap;

use super::*;

/// Runs `cmd` in `dir` with sh, which must succeed; its output.
pub(super) fn sh(dir: &Path, cmd: &str) -> String {
    crate::test_support::checked_stdout(Command::new("sh").arg("-c").arg(cmd).current_dir(dir), cmd)
}

/// A repository in a temporary directory whose first commit holds what `files` (a shell
/// command) writes.
pub(super) fn repo(files: &str) -> (tempfile::TempDir, Git) {
    let dir = tempfile::tempdir().unwrap();
    sh(dir.path(), &format!("git init -q -b main && {files} && git add -A && git -c user.name=t -c user.email=t@t commit -qm i"));
    let git = Git::discover(dir.path()).unwrap();
    (dir, git)
}

/// The run's worktree (`.hone/wt` of the repository at `git`) made at HEAD: HEAD's commit and
/// the worktree's path.
pub(super) fn worktree_at_head(git: &Git) -> (String, PathBuf) {
    let head = git.head().unwrap();
    let wt = git.root().join(".hone/wt");
    git.prepare_worktree(&wt, &head).unwrap();
    (head, wt)
}

/// Commits what `cmd` does to the checkout, returning the new commit.
pub(super) fn commit(dir: &Path, cmd: &str) -> String {
    sh(dir, &format!("{cmd} && git add -A && git -c user.name=t -c user.email=t@t commit -qm c && git rev-parse HEAD")).trim().to_string()
}

/// A repository whose first commit holds what `files` writes and whose second, HEAD, what
/// `change` then does (shell commands both): the repository and the two commits.
pub(super) fn two_commits(files: &str, change: &str) -> (tempfile::TempDir, Git, String, String) {
    let (dir, git) = repo(files);
    let first = git.head().unwrap();
    let second = commit(dir.path(), change);
    (dir, git, first, second)
}

#[test]
fn a_stale_compare_and_swap_fails_and_leaves_the_ref() {
    let (dir, git, first, second) = two_commits("echo a > f", "echo b > f");
    let d = dir.path();
    let name = "refs/heads/hone/t";
    git.update_ref(name, &first, None).unwrap();
    // Must not exist: it does.
    let err = git.update_ref(name, &second, None).unwrap_err();
    assert!(matches!(err, GitError::RefMoved { ref found, .. } if *found == first));
    // Stale expected value.
    let err = git.update_ref(name, &first, Some(&second)).unwrap_err();
    assert!(matches!(err, GitError::RefMoved { .. }), "{err}");
    assert_eq!(sh(d, &format!("git rev-parse {name}")).trim(), first);
    git.update_ref(name, &second, Some(&first)).unwrap();
    assert_eq!(sh(d, &format!("git rev-parse {name}")).trim(), second);
    // A ref held by another writer's lock is not written.
    std::fs::write(d.join(".git/refs/heads/hone/t.lock"), b"").unwrap();
    assert!(git.update_ref(name, &first, Some(&second)).is_err());
    assert_eq!(sh(d, &format!("git rev-parse {name}")).trim(), second);
}

#[test]
fn ref_updates_write_the_reflogs_git_writes() {
    let (dir, git, first, second) = two_commits("echo a > f", "echo b > f");
    let d = dir.path();
    // A branch gets a reflog entry by hone, as `git update-ref -m hone` writes it.
    git.update_ref("refs/heads/hone/t", &first, None).unwrap();
    git.update_ref("refs/heads/hone/t", &second, Some(&first))
        .unwrap();
    let log = sh(
        d,
        "git reflog show --format='%H %gn <%ge> %gs' refs/heads/hone/t",
    );
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        [
            format!("{second} hone <hone@localhost> hone"),
            format!("{first} hone <hone@localhost> hone")
        ]
    );
    // Refs outside refs/heads get none, as with git (core.logAllRefUpdates=true).
    git.update_ref("refs/hone/t/1", &first, None).unwrap();
    sh(d, "git update-ref -m x refs/hone/t/2 HEAD");
    assert!(!d.join(".git/logs/refs/hone/t/2").exists());
    assert!(!d.join(".git/logs/refs/hone/t/1").exists());
    sh(d, "git fsck --no-progress --strict");
}

/// `git.refs_under(prefix)` in `for-each-ref`'s format, asserted equal to what
/// `git for-each-ref` lists in repository `d`.
pub(super) fn listed_as_git_lists(d: &Path, git: &Git, prefix: &str) -> String {
    let git_listing = sh(
        d,
        &format!("git for-each-ref --format='%(refname) %(objectname)' {prefix}"),
    );
    let ours: String = git
        .refs_under(prefix)
        .unwrap()
        .iter()
        .map(|(n, c)| format!("{n} {c}\n"))
        .collect();
    assert_eq!(ours, git_listing);
    // The files reader (where it reads the layout) and libgit2 agree with git.
    let libgit2 = git.refs_with_prefix_libgit2(prefix, true).unwrap();
    if let Some(files) = super::ref_files::list(d, prefix) {
        assert_eq!(files, libgit2);
    }
    assert_eq!(git.refs_under(prefix).unwrap(), libgit2);
    ours
}

#[test]
fn packed_refs_read_and_update_like_loose_ones() {
    let (dir, git, first, second) = two_commits("echo a > f", "echo b > f");
    let d = dir.path();
    sh(d, &format!("git update-ref refs/hone/t/1 {first} && git update-ref refs/hone/t/2 {second} && git update-ref refs/hone/tx/1 {first} && git pack-refs --all"));
    assert!(!d.join(".git/refs/hone/t/1").exists());
    assert_eq!(
        git.ref_target("refs/hone/t/1").unwrap(),
        Some(first.clone())
    );
    assert_eq!(git.raw_ref("refs/hone/t/2").unwrap(), Some(second.clone()));
    let listed = git.refs_under("refs/hone/t/").unwrap();
    assert_eq!(
        listed,
        [
            ("refs/hone/t/1".to_string(), first.clone()),
            ("refs/hone/t/2".to_string(), second.clone())
        ]
    );
    // The loose ref written now is what git reads, not the packed one.
    git.update_ref("refs/hone/t/1", &second, Some(&first))
        .unwrap();
    assert_eq!(sh(d, "git rev-parse refs/hone/t/1").trim(), second);
    listed_as_git_lists(d, &git, "refs/hone/t/");
    // A symbolic ref among them is followed to its object, as for-each-ref lists it.
    sh(d, "git symbolic-ref refs/hone/t/3 refs/hone/t/2");
    let ours = listed_as_git_lists(d, &git, "refs/hone/t/");
    assert!(ours.contains(&format!("refs/hone/t/3 {second}")), "{ours}");
    assert_eq!(git.ref_target("refs/hone/none").unwrap(), None);
    assert_eq!(
        git.tree_of(&second).unwrap(),
        sh(d, &format!("git rev-parse {second}^{{tree}}")).trim()
    );
}

/// `git diff-tree -r --no-renames --numstat` on the same commits, as (path, added, deleted),
/// `None` for a binary file.
fn git_numstat(d: &Path, a: &str, b: &str) -> Vec<(String, Option<(u64, u64)>)> {
    let out = sh(
        d,
        &format!(
            "git -c core.attributesFile=/dev/null diff-tree -r -z --no-renames --numstat {a} {b}"
        ),
    );
    out.split('\0')
        .filter(|f| !f.is_empty())
        .map(|f| {
            let mut p = f.splitn(3, '\t');
            let (x, y, path) = (p.next().unwrap(), p.next().unwrap(), p.next().unwrap());
            let n = x.parse().ok().zip(y.parse().ok());
            (path.to_string(), n)
        })
        .collect()
}

#[test]
fn line_counts_and_binary_files_equal_git_numstat() {
    let (dir, git) = repo(
        "printf 'a\\nb\\nc\\n' > t.txt && printf 'no end' > e.txt && printf 'x\\0y' > bin && \
         printf 'k\\n' > mode.sh && ln -s t.txt link && printf 'gone\\nlines\\n' > del.txt && \
         printf 'keep\\n' > marked.dat && mkdir -p .git/info && printf 'marked.dat -diff\\n' > .git/info/attributes && \
         printf 'l\\r\\nm\\r\\n' > crlf.txt",
    );
    let d = dir.path();
    let base = git.head().unwrap();
    let next = commit(
        d,
        "printf 'a\\nB\\nc\\nd\\n' > t.txt && printf 'no end\\nnow' > e.txt && printf 'x\\0z\\n' > bin && \
         chmod +x mode.sh && rm link && printf 'file now\\n' > link && rm del.txt && : > empty && \
         printf 'changed\\nmore\\n' > marked.dat && printf 'l\\nm\\r\\n' > crlf.txt && printf 'new\\n\\0' > newbin",
    );
    let theirs = git_numstat(d, &base, &next);
    let counted = git.count_changes(&base, &next).unwrap();
    let ours: Vec<(String, Option<(u64, u64)>)> = counted
        .iter()
        .map(|c| {
            let n = (!c.binary).then_some((c.change.added, c.change.deleted));
            (c.change.path.clone(), n)
        })
        .collect();
    assert_eq!(ours, theirs);
    let raw = sh(
        d,
        &format!("git diff-tree -r --no-renames --name-status {base} {next}"),
    );
    let statuses: Vec<String> = counted
        .iter()
        .map(|c| format!("{}\t{}", c.change.status, c.change.path))
        .collect();
    assert_eq!(statuses, raw.lines().collect::<Vec<_>>());
    let binary: Vec<String> = git
        .binary_changes(&base, &next)
        .unwrap()
        .into_iter()
        .map(|b| {
            format!(
                "{} {} {} {} {}",
                b.path, b.old_bytes, b.new_bytes, b.old_lines, b.new_lines
            )
        })
        .collect();
    assert_eq!(
        binary,
        ["bin 3 4 1 1", "marked.dat 5 13 1 2", "newbin 0 5 0 2"]
    );
}

#[test]
fn raw_bytes_are_hashed_without_any_filter() {
    let (dir, git) = repo("printf 'x\\n' > f");
    let d = dir.path();
    sh(d, "git config filter.x.clean 'sed s/a/CLEAN/' && git config filter.x.required true && git config core.autocrlf true && printf '* filter=x text eol=lf ident\\n' > .gitattributes");
    std::fs::write(d.join("crlf.txt"), b"a\r\n$Id$\r\n").unwrap();
    let theirs = sh(d, "git hash-object --no-filters crlf.txt");
    let ours = git.file_ids(d, &["crlf.txt"], true).unwrap();
    assert_eq!(ours, [theirs.trim()]);
    assert_eq!(
        git.blob_id(&git.repo().unwrap(), b"a\r\n$Id$\r\n", false)
            .unwrap(),
        theirs.trim()
    );
    // Written as it is: git reads back the same bytes.
    let back = Command::new("git")
        .args(["cat-file", "blob", theirs.trim()])
        .current_dir(d)
        .output()
        .unwrap();
    assert_eq!(back.stdout, b"a\r\n$Id$\r\n");
}

#[test]
fn trees_and_commits_equal_what_git_writes() {
    let (dir, git) = repo("printf 'x\\n' > f && mkdir -p a/b && printf 'y\\n' > a/b/g && ln -s f a/l && printf 'z' > .gitignore");
    let d = dir.path();
    let (head, wt) = worktree_at_head(&git);
    sh(
        &wt,
        "printf 'x2\\n' > f && printf 'e' > a/e && chmod +x a/b/g && printf 'r' > .gitattributes",
    );
    // Plain names (built in memory), then one git judges itself (`~`): the same trees as
    // `git add -A && git write-tree` (no filter configured here).
    let plain = git.snapshot(&wt, &head, "m").unwrap().unwrap();
    let entries: BTreeMap<String, (String, String)> = git
        .tree_entries(&git.repo().unwrap(), &plain.commit)
        .unwrap()
        .into_iter()
        .map(|(p, mode, sha)| (p, (mode, sha)))
        .collect();
    assert_eq!(git.memory_tree(&entries).unwrap(), Some(plain.tree.clone()));
    assert_eq!(plain.tree, sh(&wt, "git add -A && git write-tree").trim());
    sh(&wt, "printf 'q' > 'we~ird'");
    let snap = git.snapshot(&wt, &head, "the message").unwrap().unwrap();
    let theirs = sh(&wt, "git add -A && git write-tree");
    assert_eq!(snap.tree, theirs.trim());
    let body = sh(d, &format!("git cat-file commit {}", snap.commit));
    assert!(
        body.contains(&format!(
            "tree {}\nparent {head}\nauthor hone <hone@localhost> ",
            snap.tree
        )),
        "{body}"
    );
    assert!(
        body.contains("\ncommitter hone <hone@localhost> "),
        "{body}"
    );
    assert!(body.ends_with("\n\nthe message\n"), "{body:?}");
    assert_eq!(
        git.files_at(&snap.commit).unwrap(),
        sh(d, &format!("git ls-tree -r --name-only {}", snap.commit))
            .lines()
            .collect::<Vec<_>>()
    );
    assert_eq!(git.file_at(&snap.commit, "a/e").unwrap(), b"e");
    assert!(git.file_at(&snap.commit, "a/b").is_err());
    sh(d, "git fsck --no-progress --strict");
}

#[test]
fn missing_objects_are_the_ones_git_lacks() {
    let (dir, git) = repo("printf 'x\\n' > f");
    let d = dir.path();
    let blob = sh(d, "printf 'loose\\n' | git hash-object -w --stdin")
        .trim()
        .to_string();
    let head = git.head().unwrap();
    assert!(git
        .missing_objects(&[blob.clone(), head.clone()])
        .unwrap()
        .is_empty());
    std::fs::remove_file(d.join(format!(".git/objects/{}/{}", &blob[..2], &blob[2..]))).unwrap();
    let missing = git.missing_objects(&[blob.clone(), head]).unwrap();
    assert_eq!(missing, [blob.as_str()]);
    // A ref to a missing object still reads raw, but names no commit.
    sh(d, &format!("printf '{blob}\\n' > .git/refs/heads/broken"));
    assert_eq!(
        git.raw_ref("refs/heads/broken").unwrap(),
        Some(blob.clone())
    );
    assert_eq!(git.ref_target("refs/heads/broken").unwrap(), None);
    // Listed all the same, as for-each-ref lists it.
    assert_eq!(
        git.refs_under("refs/heads/").unwrap(),
        [
            ("refs/heads/broken".to_string(), blob),
            ("refs/heads/main".to_string(), git.head().unwrap())
        ]
    );
    let theirs = sh(
        d,
        "git for-each-ref --format='%(refname) %(objectname)' refs/heads/",
    );
    assert_eq!(theirs.lines().count(), 2, "{theirs}");
}

#[test]
fn files_are_hashed_as_streams_and_packed_blobs_measured() {
    // 3 MiB of lines: hashed (without writing and with it) as git hashes it, read back whole.
    let (dir, git) = repo("printf 'x\\n' > f");
    let d = dir.path();
    let big: Vec<u8> = (0..(3 << 20) / 8)
        .flat_map(|i| format!("{i:07}\n").into_bytes())
        .collect();
    std::fs::write(d.join("big.txt"), &big).unwrap();
    let theirs = sh(d, "git hash-object --no-filters big.txt");
    assert_eq!(
        git.file_ids(d, &["big.txt"], false).unwrap(),
        [theirs.trim()]
    );
    assert!(Command::new("git")
        .args(["cat-file", "-e", theirs.trim()])
        .current_dir(d)
        .status()
        .unwrap()
        .code()
        .is_some_and(|c| c != 0));
    assert_eq!(
        git.file_ids(d, &["big.txt"], true).unwrap(),
        [theirs.trim()]
    );
    let back = Command::new("git")
        .args(["cat-file", "blob", theirs.trim()])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(back.stdout == big);
    // A binary change measured from packed objects (libgit2 streams loose ones only).
    let base = git.head().unwrap();
    let next = commit(d, "rm big.txt && printf 'a\\0b\\nc' > bin");
    sh(
        d,
        "git gc -q && test -z \"$(find .git/objects -type f -path '*/objects/??/*')\"",
    );
    let binary = git.binary_changes(&base, &next).unwrap();
    assert_eq!(binary.len(), 1);
    assert_eq!((binary[0].new_bytes, binary[0].new_lines), (5, 2));
}

#[test]
fn a_partial_clone_opens() {
    let (dir, git) = repo("echo a > f");
    let d = dir.path();
    sh(
        d,
        "git config core.repositoryformatversion 1 && git config extensions.partialClone origin",
    );
    let head = sh(d, "git rev-parse HEAD");
    assert_eq!(git.head().unwrap(), head.trim());
    assert_eq!(
        git.tree_of(head.trim()).unwrap(),
        sh(d, "git rev-parse HEAD^{tree}").trim()
    );
}

/// The worktree's HEAD file and its reflog as `git` sees them in `wt`.
fn head_state(wt: &Path) -> (String, String) {
    let file = sh(wt, "cat \"$(git rev-parse --git-path HEAD)\"");
    let log = sh(wt, "git reflog show --format='%H %gn <%ge> %gs' HEAD");
    // The branch each checked out has its worktree's name.
    (
        file,
        log.replace("wt-ours", "wt").replace("wt-theirs", "wt"),
    )
}

#[test]
fn a_worktree_head_is_detached_as_update_ref_no_deref_does() {
    let (dir, git, first, second) = two_commits("echo a > f", "echo b > f");
    let d = dir.path();
    let ours = d.join("wt-ours");
    let theirs = d.join("wt-theirs");
    for wt in [&ours, &theirs] {
        sh(
            d,
            &format!("git worktree add -q --detach {} {first}", wt.display()),
        );
        // A proposer checked out a branch of its own there: HEAD is symbolic.
        let b = wt.file_name().unwrap().to_string_lossy().into_owned();
        sh(wt, &format!("git checkout -q -b {b}"));
    }
    let env = "GIT_COMMITTER_NAME=hone GIT_COMMITTER_EMAIL=hone@localhost";
    // Twice: from a symbolic HEAD, then from a detached one (and once more to the same commit).
    for target in [&second, &first, &first] {
        git.detach_worktree_head(&ours, target).unwrap();
        sh(
            &theirs,
            &format!("{env} git update-ref -m hone --no-deref HEAD {target}"),
        );
        assert_eq!(head_state(&ours), head_state(&theirs));
        assert_eq!(sh(&ours, "git rev-parse HEAD").trim(), target.as_str());
    }
    assert_eq!(head_state(&ours).0, format!("{first}\n"));
    // The branches checked out there did not move, nor did the main checkout's HEAD.
    assert_eq!(
        sh(d, "git rev-parse wt-ours wt-theirs")
            .lines()
            .collect::<Vec<_>>(),
        [first.as_str(); 2]
    );
    assert_eq!(sh(d, "git symbolic-ref HEAD").trim(), "refs/heads/main");
    assert_eq!(git.head().unwrap(), second);
    // A missing object is refused, and the main checkout is not a worktree.
    assert!(git.detach_worktree_head(&ours, &"1".repeat(40)).is_err());
    assert!(git.detach_worktree_head(d, &first).is_err());
    assert_eq!(sh(&ours, "git rev-parse HEAD").trim(), first);
}

/// Two worktrees of `d` at `at`, in which `agent` (a shell command) then runs.
fn two_worktrees(d: &Path, at: &str, agent: &str) -> (PathBuf, PathBuf) {
    let (ours, theirs) = (d.join("wt-ours"), d.join("wt-theirs"));
    for wt in [&ours, &theirs] {
        sh(
            d,
            &format!("git worktree add -q --detach {} {at}", wt.display()),
        );
        sh(wt, agent);
    }
    (ours, theirs)
}

/// The worktree's index as git lists it, flags and (zero or not) stat data included.
fn index_state(wt: &Path) -> String {
    sh(wt, "git ls-files -z -s -v --debug -c && git ls-files -u")
}

#[test]
fn a_worktree_index_is_read_from_a_tree_as_read_tree_does() {
    let (dir, git) =
        repo("mkdir -p src/deep && echo a > f && echo b > src/g && echo c > src/deep/h");
    let d = dir.path();
    let first = git.head().unwrap();
    let second = commit(
        d,
        "echo b2 > f && rm src/deep/h && echo '* filter=evil' > .gitattributes",
    );
    // What a hostile agent does to the index: new files staged, flags that hide files from
    // git, an intent-to-add entry, a filter in the config and the attributes.
    let agent = "echo x > new && mkdir -p ign && echo y > ign/z && git add new ign/z \
        && git update-index --assume-unchanged f && git update-index --skip-worktree src/g \
        && echo i > ita && git add -N ita \
        && git config filter.evil.clean false && echo '* filter=evil' > .gitattributes \
        && rm -rf src/deep && ln -s /tmp src/deep";
    let (ours, theirs) = two_worktrees(d, &first, agent);
    let index = |wt: &Path| wt.join(sh(wt, "git rev-parse --git-path index").trim());
    for target in [&second, &first] {
        git.read_tree_in_worktree(&ours, target).unwrap();
        sh(&theirs, &format!("git read-tree {target}"));
        assert_eq!(index_state(&ours), index_state(&theirs));
        assert_eq!(
            std::fs::read(index(&ours)).unwrap(),
            std::fs::read(index(&theirs)).unwrap()
        );
        // What the agent staged is gone.
        assert!(!sh(&ours, "git ls-files").lines().any(|l| l == "new"));
        sh(&ours, "git fsck --no-progress");
    }
    // An index libgit2 refuses (split): an error here, and reset_worktree lets git do it.
    sh(&ours, "git update-index --split-index");
    assert!(git.read_tree_in_worktree(&ours, &second).is_err());
    git.reset_worktree(&ours, &second).unwrap();
    sh(&theirs, &format!("git read-tree {second}"));
    assert_eq!(
        sh(&ours, "git ls-files -s -v"),
        sh(&theirs, "git ls-files -s -v")
    );
    assert_eq!(sh(&ours, "git rev-parse HEAD").trim(), second);
    assert!(!ours.join("new").exists() && !ours.join("ita").exists());
}
