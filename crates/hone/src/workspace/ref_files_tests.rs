//! Tests of the ref listings the integrity checks read (`ref_files`, `listing`) against
//! command-line git's answer on the same repository: every layout the files reader declines,
//! a ref held as a symbolic ref, a link or an annotated tag, forged `packed-refs`, and the
//! parse shared between listings of the same bytes.

use super::inproc_tests::{commit, listed_as_git_lists, sh, two_commits};
use super::*;

/// The listing of a prefix, asked again on the same `Git`, is git's listing after every kind
/// of change to the refs, including an archive ref rewritten in place in `packed-refs` and in
/// a loose file, each the same length as before and with its mtime put back (what a listing
/// kept by file stamp would miss), and a symbolic ref whose target moves.
#[test]
fn a_ref_listing_follows_every_change_even_with_the_mtime_put_back() {
    let (dir, git, first, second) = two_commits("echo a > f", "echo b > f");
    let d = dir.path();
    sh(d, &format!("git update-ref refs/hone/t/1 {first} && git update-ref refs/hone/t/2 {second} && git update-ref refs/hone/tx/1 {first} && git pack-refs --all"));
    listed_as_git_lists(d, &git, "refs/hone/tx/");
    let listed = listed_as_git_lists(d, &git, "refs/hone/t/");
    assert_eq!(listed_as_git_lists(d, &git, "refs/hone/t/"), listed);
    // In place: the same file (inode), the same size, the mtime put back.
    let forge = |path: &str, from: &str, to: &str| {
        let p = d.join(path);
        sh(d, &format!("touch -r {path} .stamp"));
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.contains(from), "{path}: {text}");
        std::fs::write(&p, text.replace(from, to)).unwrap();
        sh(d, &format!("touch -r .stamp {path}"));
    };
    forge(
        ".git/packed-refs",
        &format!("{first} refs/hone/t/1"),
        &format!("{second} refs/hone/t/1"),
    );
    assert!(listed_as_git_lists(d, &git, "refs/hone/t/")
        .starts_with(&format!("refs/hone/t/1 {second}")));
    sh(d, &format!("git update-ref refs/hone/t/3 {first}"));
    listed_as_git_lists(d, &git, "refs/hone/t/");
    forge(".git/refs/hone/t/3", &first, &second);
    assert!(
        listed_as_git_lists(d, &git, "refs/hone/t/").contains(&format!("refs/hone/t/3 {second}"))
    );
    sh(d, "git symbolic-ref refs/hone/t/4 refs/heads/main");
    listed_as_git_lists(d, &git, "refs/hone/t/");
    let third = commit(d, "echo c > f");
    assert!(
        listed_as_git_lists(d, &git, "refs/hone/t/").contains(&format!("refs/hone/t/4 {third}"))
    );
    sh(d, "git update-ref -d refs/hone/t/3 && git pack-refs --all");
    listed_as_git_lists(d, &git, "refs/hone/t/");
}

/// The files reader lists the plain layout itself and declines every other (libgit2 lists
/// those): a linked `packed-refs` or loose ref, a symbolic loose ref, a line git would not
/// write, a configuration that names a ref storage or includes another file, a `reftable`
/// directory. The listing is git's in every case.
#[test]
fn the_files_ref_reader_declines_every_layout_it_does_not_read() {
    let (dir, git, first, second) = two_commits("echo a > f", "echo b > f");
    let d = dir.path();
    let p = "refs/hone/t/";
    sh(d, &format!("git update-ref refs/hone/t/1 {first} && git update-ref refs/hone/t/2 {second} && git update-ref refs/hone/tx/1 {first} && git pack-refs --all && git update-ref refs/hone/t/3 {second}"));
    let plain = listed_as_git_lists(d, &git, p);
    assert_eq!(plain.lines().count(), 3, "{plain}");
    assert!(super::ref_files::list(d, p).is_some());
    // No loose directory for the prefix, and no packed-refs at all: still read.
    assert_eq!(
        super::ref_files::list(d, "refs/hone/none/"),
        Some(Vec::new())
    );
    let declined = |setup: &str, undo: &str| {
        sh(d, setup);
        assert_eq!(super::ref_files::list(d, p), None, "{setup}");
        listed_as_git_lists(d, &git, p);
        sh(d, undo);
        assert!(super::ref_files::list(d, p).is_some(), "{undo}");
        assert_eq!(listed_as_git_lists(d, &git, p), plain);
    };
    declined(
        "mv .git/packed-refs .git/p && ln -s p .git/packed-refs",
        "rm .git/packed-refs && mv .git/p .git/packed-refs",
    );
    declined(
        "mv .git/refs/hone/t/3 .git/three && ln -s ../../../three .git/refs/hone/t/3",
        "rm .git/refs/hone/t/3 && mv .git/three .git/refs/hone/t/3",
    );
    declined(
        "git symbolic-ref refs/hone/t/5 refs/heads/main",
        "git symbolic-ref --delete refs/hone/t/5",
    );
    declined(
        &format!("git update-ref refs/hone/t/d/4 {first}"),
        "git update-ref -d refs/hone/t/d/4 && rm -rf .git/refs/hone/t/d",
    );
    // Files git would not write (git refuses some of them, or reads them otherwise than a
    // plain scan would): the reader declines each.
    let refused = |setup: &str| {
        sh(
            d,
            &format!("cp .git/packed-refs .git/p && cp .git/refs/hone/t/3 .git/three && {setup}"),
        );
        assert_eq!(super::ref_files::list(d, p), None, "{setup}");
        sh(
            d,
            "mv .git/p .git/packed-refs && mv .git/three .git/refs/hone/t/3",
        );
        assert_eq!(listed_as_git_lists(d, &git, p), plain);
    };
    refused("echo 'not a ref line' >> .git/packed-refs");
    refused("echo '# a comment' >> .git/packed-refs");
    refused(&format!(
        "echo '^{first}' >> .git/packed-refs && echo '^{first}' >> .git/packed-refs"
    ));
    refused("printf %s \"$(cat .git/p)\" > .git/packed-refs");
    refused(&format!(
        "printf '{second} refs/hone/t/0\\n' >> .git/packed-refs"
    ));
    refused(&format!(
        "printf '{second} refs/hone/zz\\r\\n' >> .git/packed-refs"
    ));
    // An object name in capitals (git writes lower case): the listing holds object names as
    // bytes, so the reader declines rather than lists another spelling than git's.
    refused(&format!(
        "printf '{} refs/hone/zz\\n' \"$(echo {second} | tr a-f A-F)\" >> .git/packed-refs",
        "%s"
    ));
    refused(&format!("printf {first} > .git/refs/hone/t/3"));
    refused(&format!("printf '{first}\\n\\n' > .git/refs/hone/t/3"));
    // A HEAD git would not accept: git looks elsewhere for the repository; so does not the
    // reader.
    sh(d, "mv .git/HEAD .git/HEAD2 && touch .git/HEAD");
    assert_eq!(super::ref_files::list(d, p), None);
    sh(d, "mv .git/HEAD2 .git/HEAD");
    assert_eq!(listed_as_git_lists(d, &git, p), plain);
    declined(
        "touch .git/refs/hone/t/6.lock",
        "rm .git/refs/hone/t/6.lock",
    );
    declined(
        "cp .git/config .git/c && printf '[include]\\n\\tpath = other\\n' >> .git/config",
        "mv .git/c .git/config",
    );
    declined("mkdir .git/reftable", "rmdir .git/reftable");
    // A name git refuses (it skips it as broken): libgit2's listing, not the reader's.
    sh(d, &format!("echo {first} > .git/refs/hone/t/7."));
    assert_eq!(super::ref_files::list(d, p), None);
    sh(d, "rm .git/refs/hone/t/7.");
    // A configuration naming a ref storage: libgit2 refuses to open the repository, and the
    // reader declines rather than read files git would not use.
    sh(d, "cp .git/config .git/c && git config core.repositoryformatversion 1 && git config extensions.refStorage reftable");
    assert_eq!(super::ref_files::list(d, p), None);
    sh(d, "mv .git/c .git/config");
    assert_eq!(listed_as_git_lists(d, &git, p), plain);
}

/// `refs_under_and` as (the refs under the prefix, what the one more ref holds).
fn under_and(git: &Git, prefix: &str, name: &str) -> (Vec<(String, String)>, Option<String>) {
    let listing = git.refs_under_and(prefix, name).unwrap();
    let one = listing.get(name).map(|v| v.into_owned());
    let refs = listing
        .iter()
        .filter(|(n, _)| *n != name)
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    (refs, one)
}

/// `refs_under_and`'s single ref is what the ref holds, as `git rev-parse` prints it (an
/// annotated tag not peeled, a symbolic ref followed), packed or loose, read from the files or
/// (a layout the reader declines) through libgit2, and `None` where there is no such ref.
#[test]
fn a_listing_with_one_more_ref_reads_it_as_it_is_held() {
    let (dir, git, first, second) = two_commits("echo a > f", "echo b > f");
    let d = dir.path();
    let p = "refs/hone/t/";
    let name = "refs/heads/hone/t";
    let check = |expected: Option<&str>| {
        for declined in [false, true] {
            if declined {
                sh(d, "mkdir .git/reftable");
            }
            let (refs, one) = under_and(&git, p, name);
            assert_eq!(one.as_deref(), expected, "declined: {declined}");
            assert_eq!(refs, git.refs_with_prefix_libgit2(p, false).unwrap());
            if declined {
                sh(d, "rmdir .git/reftable");
            }
        }
    };
    sh(d, &format!("git update-ref refs/hone/t/1 {first}"));
    check(None);
    sh(
        d,
        &format!("git update-ref {name} {first} && git pack-refs --all"),
    );
    check(Some(&first));
    sh(d, &format!("git update-ref {name} {second}"));
    assert!(d.join(".git").join(name).is_file());
    check(Some(&second));
    // git refuses a tag on a branch; an agent writing the file does not ask.
    sh(
        d,
        &format!("git tag -a -m m v1 {first} && git rev-parse v1 > .git/{name}"),
    );
    let tag = sh(d, &format!("git rev-parse {name}")).trim().to_string();
    assert_ne!(tag, first);
    check(Some(&tag));
    sh(
        d,
        &format!("git update-ref -d {name} && git update-ref {name}/x {first}"),
    );
    check(None);
    sh(
        d,
        &format!("git update-ref -d {name}/x && git symbolic-ref {name} refs/heads/main"),
    );
    // A symbolic ref reads as what it holds, never as where it leads (the same commit as
    // before must not hide the change), in the listing as for the one ref.
    assert_eq!(ref_files::list_with(d, p, Some(name)), None);
    sh(d, "git symbolic-ref refs/hone/t/9 refs/heads/main");
    let (refs, one) = under_and(&git, p, name);
    assert_eq!(one.as_deref(), Some("ref: refs/heads/main"));
    assert!(refs.contains(&("refs/hone/t/9".into(), "ref: refs/heads/main".into())));
    // Put back: the symbolic ref itself goes, the branch it led to stays where it was.
    let main = sh(d, "git rev-parse main").trim().to_string();
    git.put_ref_back(name, Some(&first), "ref: refs/heads/main")
        .unwrap();
    git.put_ref_back("refs/hone/t/9", None, "ref: refs/heads/main")
        .unwrap();
    assert_eq!(sh(d, "git rev-parse main").trim(), main);
    assert_eq!(under_and(&git, p, name).1, Some(first.clone()));
    assert!(!git
        .refs_under(p)
        .unwrap()
        .iter()
        .any(|(n, _)| n == "refs/hone/t/9"));
    // A file system link where the branch's file would be (git reads main's commit through
    // it, main's own file loose): it reads as the link, and neither a move nor a put-back
    // writes main.
    sh(
        d,
        "git rev-parse main > .git/m && mv .git/m .git/refs/heads/main",
    );
    sh(d, &format!("rm .git/{name} && ln -s ../main .git/{name}"));
    assert_eq!(sh(d, &format!("git rev-parse {name}")).trim(), main);
    let held = under_and(&git, p, name).1.unwrap();
    assert!(held.starts_with("link: "), "{held}");
    assert_eq!(git.ref_value_raw(name).unwrap(), Some(held.clone()));
    assert_ne!(first, main);
    git.update_ref(name, &first, Some(&main)).unwrap();
    assert_eq!(sh(d, "git rev-parse main").trim(), main);
    assert!(!d.join(".git").join(name).is_symlink());
    assert_eq!(under_and(&git, p, name).1, Some(first.clone()));
    sh(d, &format!("rm .git/{name} && ln -s ../main .git/{name}"));
    git.put_ref_back(name, Some(&first), &held).unwrap();
    assert_eq!(sh(d, "git rev-parse main").trim(), main);
    assert_eq!(under_and(&git, p, name).1, Some(first.clone()));
    // The same for an archive ref, deleted as recovery deletes one (the link, not main).
    sh(
        d,
        "mkdir -p .git/refs/hone/t && ln -s ../../heads/main .git/refs/hone/t/8",
    );
    let listed = under_and(&git, p, name).0;
    assert!(
        listed
            .iter()
            .any(|(n, v)| n == "refs/hone/t/8" && v.starts_with("link: ")),
        "{listed:?}"
    );
    git.run(&["update-ref", "--no-deref", "-d", "refs/hone/t/8", &main])
        .unwrap();
    assert_eq!(sh(d, "git rev-parse main").trim(), main);
}

/// The reviewer's attack on a plain scan of `packed-refs`: the branch twice, the agent's commit
/// first and the old one after it with a carriage return (still byte-sorted; git's binary
/// search finds the first, a line-by-line reading the last). The reader declines the file, so
/// the listing says what git says.
#[test]
fn a_branch_listed_twice_in_packed_refs_reads_as_git_reads_it() {
    let (dir, git, first, second) = two_commits("echo a > f", "echo b > f");
    let d = dir.path();
    let name = "refs/heads/hone/t";
    sh(d, &format!("git update-ref {name} {first} && git update-ref refs/hone/t/1 {first} && git pack-refs --all"));
    let packed = std::fs::read_to_string(d.join(".git/packed-refs")).unwrap();
    let forged = packed.replace(
        &format!("{first} {name}\n"),
        &format!("{second} {name}\n{first} {name}\r\n"),
    );
    assert_ne!(forged, packed);
    std::fs::write(d.join(".git/packed-refs"), forged).unwrap();
    let git_says = sh(d, &format!("git rev-parse {name}")).trim().to_string();
    assert_eq!(git_says, second);
    assert_eq!(ref_files::list_with(d, "refs/hone/t/", Some(name)), None);
    let (_, held) = under_and(&git, "refs/hone/t/", name);
    assert_eq!(held.as_deref(), Some(second.as_str()));
}

/// Listings read from the same `packed-refs` bytes share what was parsed (and compare without
/// a walk); a `packed-refs` rewritten in place with other bytes of the same size, its time
/// stamps put back, is read again: the listing says what the file now holds, as git does.
#[test]
fn a_packed_refs_rewritten_under_the_same_stamps_is_read_again() {
    let (dir, git, first, second) = two_commits("echo a > f", "echo b > f");
    let d = dir.path();
    let (p, name) = ("refs/hone/t/", "refs/heads/hone/t");
    sh(d, &format!("git update-ref refs/hone/t/1 {first} && git update-ref refs/hone/t/2 {first} && git update-ref {name} {first} && git pack-refs --all"));
    let a = git.refs_under_and(p, name).unwrap();
    let b = git.refs_under_and(p, name).unwrap();
    assert!(a.shares_packed_with(&b), "read from the same bytes");
    assert_eq!(a, b);
    assert_eq!(a.get("refs/hone/t/2").as_deref(), Some(first.as_str()));
    let path = d.join(".git/packed-refs");
    sh(d, "cp -p .git/packed-refs .git/stamps");
    let packed = std::fs::read_to_string(&path).unwrap();
    let forged = packed.replace(
        &format!("{first} refs/hone/t/2\n"),
        &format!("{second} refs/hone/t/2\n"),
    );
    assert_eq!(forged.len(), packed.len());
    assert_ne!(forged, packed);
    std::fs::write(&path, &forged).unwrap();
    sh(d, "touch -r .git/stamps .git/packed-refs");
    let c = git.refs_under_and(p, name).unwrap();
    assert!(!c.shares_packed_with(&a));
    assert_ne!(c, a);
    assert_eq!(c.get("refs/hone/t/2").as_deref(), Some(second.as_str()));
    assert_eq!(sh(d, "git rev-parse refs/hone/t/2").trim(), second);
    // What is kept goes with the file (nothing of a deleted `packed-refs` stays in memory)
    // and with a file the reader declines.
    let git_dir = d.join(".git");
    assert!(ref_files::kept_bytes(&git_dir) > 0);
    sh(d, "mv .git/packed-refs .git/p");
    assert!(git
        .refs_under_and(p, name)
        .unwrap()
        .get("refs/hone/t/2")
        .is_none());
    assert_eq!(ref_files::kept_bytes(&git_dir), 0);
    sh(d, "mv .git/p .git/packed-refs");
    let c = {
        let again = git.refs_under_and(p, name).unwrap();
        assert_eq!(again, c);
        again
    };
    // A loose ref over a packed one of the same name: the loose one is listed, as git lists it.
    sh(d, &format!("git update-ref refs/hone/t/1 {second}"));
    let e = git.refs_under_and(p, name).unwrap();
    assert!(e.shares_packed_with(&c), "packed-refs unchanged");
    assert_ne!(e, c);
    assert_eq!(e.get("refs/hone/t/1").as_deref(), Some(second.as_str()));
    assert_eq!(
        e.iter()
            .filter(|(n, _)| *n != name)
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect::<Vec<_>>(),
        git.refs_with_prefix_libgit2(p, false).unwrap()
    );
}

/// Listings read from the same `packed-refs` bytes are known to be (by the bytes' digest, no
/// copy of the file kept) and share what was parsed for their question; the refs are held
/// compactly, each once; a changed file is parsed again, and what was kept of the old bytes
/// (for every question) goes first.
#[test]
fn listings_of_one_packed_refs_are_known_by_its_bytes() {
    let (dir, _git, first, second) = two_commits("echo a > f", "echo b > f");
    let d = dir.path();
    sh(d, &format!("git update-ref refs/hone/t/1 {first} && git update-ref refs/hone/tx/1 {first} && git pack-refs --all"));
    let listing = |prefix: &str| {
        super::ref_files::listing(d, prefix, "refs/heads/main").expect("the plain layout reads")
    };
    let (t, tx) = (listing("refs/hone/t/"), listing("refs/hone/tx/"));
    assert!(t.same_bytes_as(&tx));
    assert!(listing("refs/hone/t/").shares_packed_with(&t));
    assert_eq!(tx.get("refs/hone/tx/1").as_deref(), Some(first.as_str()));
    let git_dir = d.join(".git");
    let old_file = std::fs::read_to_string(git_dir.join("packed-refs")).unwrap();
    // Two refs of two prefixes, each held once and compactly: well under the file's lines.
    let kept = super::ref_files::kept_bytes(&git_dir);
    assert!(
        kept > 0 && kept < 2 * (41 + "refs/hone/tx/1\n".len()),
        "{kept}"
    );
    drop((t, tx));
    sh(
        d,
        &format!("git update-ref refs/hone/t/3 {second} && git pack-refs --all"),
    );
    let changed = listing("refs/hone/t/");
    assert_eq!(
        changed.get("refs/hone/t/3").as_deref(),
        Some(second.as_str())
    );
    assert_eq!(
        changed.get("refs/hone/t/1").as_deref(),
        Some(first.as_str())
    );
    assert_ne!(
        std::fs::read_to_string(git_dir.join("packed-refs")).unwrap(),
        old_file
    );
    // What was kept of the old bytes (the other prefix's question too) went when they were
    // found changed: the new question's refs alone are held.
    let now = super::ref_files::kept_bytes(&git_dir);
    // Two refs under refs/hone/t/ (24 bytes each and their rests, "1" and "3"), nothing else.
    assert_eq!(now, 2 * 24 + 2 + "refs/hone/t/".len(), "{kept} -> {now}");
    let tx = listing("refs/hone/tx/");
    assert!(tx.same_bytes_as(&changed));
    assert_eq!(tx.get("refs/hone/tx/1").as_deref(), Some(first.as_str()));
    assert_eq!(tx.get("refs/hone/t/3"), None);
}
