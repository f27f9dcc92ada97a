//! The verifier measures exactly the archived commit: scripted agents that try to make the
//! code that runs differ from the code that is archived (a repository inside the worktree, a
//! path too deep for git, `.gitattributes`, filters and textconv in the repository's git
//! config). Each attack must end as a violation or a rejection, never a keep; the run goes on
//! to an honest keep afterwards, and the repository stays sound (`git fsck`).

use crate::support::*;

/// `train.py` prints its `SCORE` (lower is better); only `train.py` is editable.
fn repo(script: &str, files: &[(&str, &str)], tail: &str) -> Repo {
    let tail = format!("[stop]\nmax_experiments = 3\n{tail}");
    let mut b = Repo::builder()
        .file("train.py", "SCORE = 5\nprint('score: %s' % SCORE)\n")
        .script(script);
    for (path, content) in files {
        b = b.file(path, content);
    }
    b.spec_with(move |agent| {
        Spec::standard("python3 train.py", agent)
            .editable(&["train.py"])
            .tail(&tail)
    })
    .create()
}

/// The second block: an honest improvement of `train.py`, which must be kept.
const HONEST: &str = "replace\ttrain.py\tSCORE = 5\tSCORE = 4\n";

/// Runs the attack (experiment 1) and the honest change (experiment 2); returns the attack's
/// record after checking it did not win, that the run went on to keep the honest change and
/// that `git fsck` finds nothing wrong.
fn run_attack(r: &Repo) -> serde_json::Value {
    let out = ok(r.hone(&["run", "--tag", "atk"]));
    let log = r.log();
    assert_eq!(log[0]["status"], "baseline", "{}", text(&out));
    assert_eq!(log.len(), 3, "{}", text(&out));
    let e = log[1].clone();
    let st = e["status"].as_str().unwrap();
    assert!(
        ["violation", "rejected"].contains(&st),
        "the attack got `{st}`: {e}\n{}",
        text(&out)
    );
    assert_eq!(log[2]["status"], "keep", "{}\n{}", log[2], text(&out));
    assert_eq!(log[2]["objective"], 4.0);
    let kept = git(&r.dir, &["show", "hone/atk:train.py"]);
    assert!(kept.starts_with("SCORE = 4"), "{kept}");
    git(&r.dir, &["fsck", "--no-progress", "--no-dangling"]);
    e
}

/// Hole 2: `train.py` becomes a directory that is a git repository of its own; `python3
/// train.py` runs its `__main__.py`, and git would archive only a gitlink.
#[test]
fn integrity_embedded_repository_is_a_violation() {
    let script = format!(
        "run\trm train.py && mkdir train.py && cd train.py && git init -q && echo \"print('score: 0')\" > __main__.py && git add -A && git -c user.name=a -c user.email=a@a commit -qm x\n---\n{HONEST}"
    );
    let r = repo(&script, &[], "");
    assert_violation(&run_attack(&r), "git repository");
}

/// Hole 4: a payload 2,100 directories deep (beyond PATH_MAX, so git never sees it) that the
/// editable `train.py` runs. Afterwards the run must go on, and a resume must work.
#[test]
fn integrity_payload_beyond_path_max_is_a_violation_and_resume_works() {
    let mk = "import os\\nos.mkdir('p')\\nos.chdir('p')\\nfor _ in range(2100):\\n    os.mkdir('a')\\n    os.chdir('a')\\nopen('x.py', 'w').write('print(\"score: 0\")')\\n";
    let train = "import os\\nos.chdir('p')\\nfor _ in range(2100):\\n    os.chdir('a')\\nexec(open('x.py').read())\\n";
    let script = format!(
        "write\tmk.py\t{mk}\nrun\tpython3 mk.py && rm mk.py\nwrite\ttrain.py\t{train}\n---\n{HONEST}---\nreplace\ttrain.py\tSCORE = 4\tSCORE = 3\n"
    );
    let r = repo(&script, &[], "");
    let e = run_attack(&r);
    assert_violation(&e, "too deep");
    // A resume rebuilds the worktree and goes on.
    let out = ok(r.hone(&["run", "--tag", "atk", "-n", "4"]));
    let log = r.log();
    assert_eq!(log.len(), 4, "{}", text(&out));
    assert_eq!(log[3]["status"], "keep", "{}", log[3]);
}

/// Hole 6: a `.gitattributes` beside the editable file (`ident`): the archive holds
/// `$Id$`, the worktree `$Id: 0 $`, and the verifier would run the worktree's bytes.
#[test]
fn integrity_gitattributes_change_is_a_violation() {
    let script = format!(
        "write\t.gitattributes\ttrain.py ident\\n\nwrite\ttrain.py\tSCORE = int('$Id: 0 $'.split()[1])\\nprint('score: %s' % SCORE)\\n\n---\n{HONEST}"
    );
    let r = repo(&script, &[], "");
    // `.gitattributes` is editable here: the rule holds whatever the scope says.
    edit_spec(&r.dir, |s| {
        s.replace(
            "editable = [\"train.py\"]",
            "editable = [\"train.py\", \".gitattributes\"]",
        )
    });
    git(&r.dir, &["commit", "-qam", "editable attributes"]);
    let e = run_attack(&r);
    assert_violation(&e, ".gitattributes");
}

/// The shell lines of an agent that gives `path` a git driver in the repository's own
/// config (`kind`: `filter` or `diff`, `key`: `clean` or `textconv`) through
/// `info/attributes`; the driver runs `command` and leaves the mark `ran` if it ever runs.
fn hostile_config(kind: &str, key: &str, path: &str, command: &str) -> (String, Marks) {
    let marks = Marks::new();
    let lines = marks.fill(&format!(
        "run\tg=$(git rev-parse --git-common-dir) && git config --file \"$g/config\" {kind}.x.{key} \"touch {{m}}/ran; {command}\" && mkdir -p \"$g/info\" && echo '{path} {kind}=x' >> \"$g/info/attributes\"\n"
    ));
    (lines, marks)
}

/// Weakness 8: without bubblewrap, the agent gives a file it may not edit a clean filter in
/// the repository's config that hides its forged content from `git add`. hone's git runs no
/// filter: the forged file is seen (a violation) and the filter never runs.
#[test]
fn integrity_clean_filter_in_repo_config_does_not_hide_a_forged_file() {
    let (e, filter_ran) = clean_filter_attack("");
    assert_violation(&e, "data.py");
    assert!(!filter_ran, "hone's git ran the candidate's clean filter");
}

/// The attack of weakness 8 with `toml` added to the spec: the agent's `data.py` (which it may
/// not edit) forged, and hidden from `git add` by a clean filter it put in the repository's
/// config. The forged experiment's record, and whether the filter ever ran.
fn clean_filter_attack(toml: &str) -> (serde_json::Value, bool) {
    let (config, marks) = hostile_config("filter", "clean", "data.py", "echo 'SCORE = 5'");
    let script = format!(
        "{config}write\tdata.py\tSCORE = 0\\n\nwrite\ttrain.py\tfrom data import SCORE\\nprint('score: %s' % SCORE)  # tuned\\n\n---\n{HONEST}"
    );
    let r = repo(&script, &[("data.py", "SCORE = 5\n")], toml);
    (run_attack(&r), marks.path("ran").exists())
}

/// textconv: a `diff` driver in the repository's config shows the reviewer and `forbid`
/// nothing of the change. hone's diff runs no textconv: `forbid` sees the line.
#[test]
fn integrity_textconv_in_repo_config_does_not_blind_forbid() {
    let (config, marks) = hostile_config("diff", "textconv", "train.py", "true");
    let script = format!("{config}replace\ttrain.py\tSCORE = 5\tSCORE = 0\n---\n{HONEST}");
    let r = repo(&script, &[], "[review]\nforbid = [\"SCORE = 0\"]\n");
    let e = run_attack(&r);
    assert_eq!(e["status"], "rejected", "{e}");
    assert!(
        !marks.path("ran").exists(),
        "hone's git ran the candidate's textconv"
    );
}

/// The same clean-filter attack with two verification slots: the slots' worktrees are
/// written by hone from the commit too, and the filter never runs.
#[test]
fn integrity_clean_filter_attack_with_parallel_workers() {
    let (e, filter_ran) = clean_filter_attack("\n[exec]\nworkers = 2\n");
    assert_eq!(e["status"], "violation", "{e}");
    assert!(!filter_ran, "hone's git ran the candidate's clean filter");
}

/// An agent that replaces the worktree's `.hone` by a symlink to a directory of its choosing
/// cannot make hone (which reads the hypothesis and the notes outside every sandbox) read a
/// file there into the record or into a later prompt.
#[test]
fn integrity_a_symlinked_hone_directory_is_not_read_for_the_hypothesis() {
    let outside = tempfile::tempdir().unwrap();
    put(outside.path().join("hypothesis.txt"), "SECRET-OUTSIDE\n");
    put(outside.path().join("notes.md"), "SECRET-NOTES\n");
    let script = format!(
        "run\trm -rf .hone && ln -s {} .hone\nwrite\tvalue.txt\tscore: 4\\n\n",
        outside.path().display()
    );
    let r = Repo::scored(2, &script);
    ok(r.hone(&["run"]));
    let log = text(&r.hone(&["log", "--json"]));
    assert!(!log.contains("SECRET-OUTSIDE"), "{log}");
    assert!(
        outside.path().join("hypothesis.txt").exists(),
        "nothing outside the worktree was removed"
    );
    // The notes hone keeps for later prompts (the run's notes.md and notes/<n>.md).
    let mut kept = Vec::new();
    let mut dirs = vec![r.dir.join(".hone").join("runs")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let kind = e.file_type().unwrap();
            if kind.is_dir() && e.file_name() != "worktrees" {
                dirs.push(e.path());
            } else if kind.is_file() {
                kept.push(e.path());
            }
        }
    }
    for f in kept {
        let t = String::from_utf8_lossy(&std::fs::read(&f).unwrap()).into_owned();
        assert!(
            !t.contains("SECRET-NOTES"),
            "{} holds the notes outside: {t}",
            f.display()
        );
    }
}

/// `hone run` in `r` with an empty entry first in `PATH` (the current directory, as a `PATH`
/// written `:$PATH` or `$EXTRA:$PATH` with nothing in `EXTRA` has it).
fn hone_with_cwd_on_path(r: &Repo, args: &[&str]) -> std::process::Output {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut with_cwd = std::ffi::OsString::from(":");
    with_cwd.push(&path);
    std::process::Command::new(HONE)
        .args(args)
        .current_dir(&r.dir)
        .env("PATH", with_cwd)
        .output()
        .unwrap()
}

/// An agent leaves an executable `git` in its worktree, where hone lists the candidate's
/// files: with the current directory on `PATH`, a plain `git` would run it, as hone (outside
/// any sandbox, before any check). hone runs the `git` found in `PATH`'s absolute entries.
#[test]
fn integrity_a_git_left_in_the_worktree_never_runs_for_hone() {
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("planted-git-ran");
    let real = hone::util::absolute_program(&std::env::var_os("PATH").unwrap(), "git").unwrap();
    let script = format!(
        "write\tgit\t#!/bin/sh\\ntouch {}\\nexec {} \"$@\"\\n\nrun\tchmod +x git\nreplace\ttrain.py\tSCORE = 5\tSCORE = 0\n---\n{HONEST}",
        ran.display(),
        real.display()
    );
    let r = repo(&script, &[], "");
    let out = ok(hone_with_cwd_on_path(&r, &["run", "--tag", "atk"]));
    assert!(
        !ran.exists(),
        "hone ran the agent's `git` from the worktree:\n{}",
        text(&out)
    );
    let log = r.log();
    assert_violation(&log[1], "git");
    assert_eq!(log[2]["status"], "keep", "{}\n{}", log[2], text(&out));
}

/// The candidate's `train.py` leaves an executable `python3` in the worktree that prints a
/// perfect score, for the evaluation that runs next (`sh eval.sh`: `python3 prepare.py`) to
/// find through an empty `PATH` entry. hone gives the verifier `PATH` without its relative
/// and empty entries (and says so when the run starts), so the real evaluation runs.
#[test]
fn integrity_the_verifier_never_looks_programs_up_in_the_worktree() {
    let train = "import os\nopen('python3', 'w').write('#!/bin/sh' + chr(10) + 'echo score: 0' + chr(10))\nos.chmod('python3', 0o755)\nopen('model.txt', 'w').write('5')\n";
    let r = Repo::builder()
        .file("train.py", "open('model.txt', 'w').write('5')\n")
        .file(
            "prepare.py",
            "print('score: %s' % open('model.txt').read())\n",
        )
        .file("eval.sh", "python3 prepare.py\n")
        .script(&format!(
            "write\ttrain.py\t{}\n",
            train.replace('\n', "\\n")
        ))
        .spec_with(|agent| {
            Spec::standard("python3 train.py && sh eval.sh", agent)
                .editable(&["train.py"])
                .protected(&["prepare.py", "eval.sh"])
                .tail("[stop]\nmax_experiments = 2\n")
        })
        .create();
    let out = ok(hone_with_cwd_on_path(&r, &["run", "--tag", "atk"]));
    assert_says(
        &out,
        "PATH has relative or empty entries: hone passes on only",
    );
    let log = r.log();
    assert_eq!(log[1]["objective"], 5.0, "{}\n{}", log[1], text(&out));
    assert_ne!(log[1]["status"], "keep", "{}", log[1]);
}

/// The agent inherits `PATH` without its empty entry too: a `claude` an earlier candidate
/// committed to the worktree's root would otherwise run in the agent's place, with its API key.
#[test]
fn integrity_the_agent_never_looks_programs_up_in_the_worktree() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("agent-path");
    let script = format!(
        "run\tprintf '%s' \"$PATH\" > {}\nreplace\ttrain.py\tSCORE = 5\tSCORE = 4\n",
        seen.display()
    );
    let r = repo(&script, &[], "");
    ok(hone_with_cwd_on_path(&r, &["run", "--tag", "atk"]));
    let path = std::fs::read_to_string(&seen).unwrap();
    let ours = hone::util::absolute_entries(&std::env::var_os("PATH").unwrap());
    assert_eq!(path, ours.to_string_lossy(), "the agent's PATH");
}

/// A case variant of `.gitattributes` is the file itself on macOS and Windows checkouts (where
/// `* -diff` would hide the code from `git log -p` and a pull request's diff).
#[test]
fn integrity_a_case_variant_of_gitattributes_is_a_violation() {
    let r = Repo::stops_after(
        2,
        SCORE,
        "write\t.GitAttributes\t* -diff linguist-generated=true\\n\nwrite\tvalue.txt\tscore: 4\\n\n",
    );
    edit_spec(&r.dir, |s| {
        s.replace(
            "editable = [\"value.txt\"]",
            "editable = [\"value.txt\", \".GitAttributes\"]",
        )
    });
    git(&r.dir, &["commit", "-qam", "editable attributes"]);
    let _ = r.hone(&["run"]);
    assert_violation(&r.log()[1], ".GitAttributes");
}
