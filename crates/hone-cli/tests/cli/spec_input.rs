//! Spec gaps and bounded input, end to end: a tracked `hide` path, a metric no output can
//! name, invalid UTF-8, `--spec` naming a device or a FIFO (each a spec error, exit 2, with
//! its line where it has one), and the cap on the agent's prompt.

use crate::support::*;

/// `hone ARGS` in `dir`, which must exit by itself: killed and failed after a generous
/// deadline (the defect it guards against is a command that never returns).
fn hone_exits(dir: &Path, args: &[&str]) -> Output {
    run_bounded(dir, args).unwrap_or_else(|e| panic!("hone {args:?} {e}"))
}

/// The 1-based line of hone.toml in `dir` that starts with `prefix`.
fn spec_line(dir: &Path, prefix: &str) -> usize {
    let toml = std::fs::read_to_string(dir.join("hone.toml")).unwrap();
    1 + toml
        .lines()
        .position(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` line in {toml}"))
}

#[test]
fn a_tracked_hide_path_is_a_spec_error_naming_its_line() {
    let r = Repo::builder()
        .file("holdout/answers.csv", "id,label\n1,cat\n")
        .script(&scores(&[4]))
        .spec_with(|agent| {
            Spec::standard(SCORE, agent)
                .tail("[stop]\nmax_experiments = 1\n")
                .tail("\n[verify.holdout]\ncommand = \"cat value.txt\"\nhide = [\"holdout/\"]\n")
        })
        .create();
    let line = spec_line(&r.dir, "hide = ");
    let out = r.hone(&["run", "--tag", "h"]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains(&format!("hone.toml:{line}: `verify.holdout.hide`: `holdout/` is tracked by git (`holdout/answers.csv`")),
        "{said}"
    );
    assert!(
        Command::new("git")
            .args(["rev-parse", "--verify", "-q", "hone/h"])
            .current_dir(&r.dir)
            .output()
            .unwrap()
            .stdout
            .is_empty(),
        "no run was started"
    );
    // Untracked (kept beside the repository's files, not in them), the run goes on.
    git(&r.dir, &["rm", "-q", "-r", "--cached", "holdout"]);
    put(r.dir.join(".gitignore"), "holdout/\n");
    git(&r.dir, &["add", ".gitignore"]);
    git(&r.dir, &["commit", "-q", "-m", "holdout out of git"]);
    ok(r.hone(&["run", "--tag", "h"]));
}

#[test]
fn spec_errors_found_late_or_in_bytes_exit_2_with_their_line() {
    let r = Repo::scored(1, &scores(&[4]));
    // A metric no output can name: was accepted, then the run stopped with exit 1 and no line.
    edit_spec(&r.dir, |t| {
        t.replace("metric = \"score\"", "metric = \"10x\"")
    });
    let line = spec_line(&r.dir, "metric = ");
    let out = r.hone(&["run"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains(&format!(
            "hone.toml:{line}: `verify.metric`: `10x` is not a metric name"
        )),
        "{}",
        text(&out)
    );
    edit_spec(&r.dir, |t| {
        t.replace("metric = \"10x\"", "metric = \"score\"")
            .replace("max_experiments = 1", "max_experiments = 1\ntarget = nan")
    });
    exits_with(
        r.hone(&["run"]),
        2,
        "`stop.target`: must be a finite number",
    );
    // Invalid UTF-8: the line of the bad byte.
    let mut bytes = std::fs::read(r.dir.join("hone.toml")).unwrap();
    let lines = bytes.iter().filter(|b| **b == b'\n').count();
    bytes.extend_from_slice(b"# \xff\n");
    put(r.dir.join("hone.toml"), bytes);
    let out = r.hone(&["run"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("hone.toml:{}: not valid UTF-8", lines + 1)),
        "{}",
        text(&out)
    );
}

#[test]
fn a_spec_that_is_a_device_or_a_fifo_is_refused_at_once() {
    let r = Repo::new("", SCORE, "");
    let fifo = r.tmp_dir().join("spec.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let fifo = fifo.to_str().unwrap().to_string();
    for spec in ["/dev/zero", fifo.as_str()] {
        for cmd in ["run", "status"] {
            let out = hone_exits(&r.dir, &["--spec", spec, cmd]);
            assert_eq!(out.status.code(), Some(2), "{spec} {cmd}: {}", text(&out));
            assert_says(&out, "not a regular file");
        }
    }
    let big = r.tmp_dir().join("big.toml");
    put(&big, "#".repeat(2 << 20));
    exits_with(
        hone_exits(&r.dir, &["--spec", big.to_str().unwrap(), "run"]),
        2,
        "the most hone reads",
    );
}

#[test]
fn the_prompt_is_capped_and_says_what_it_left_out() {
    let mut b = Repo::builder();
    // 2,000 editable files of 300 bytes: 600 KB of contents, more than the cap.
    for i in 0..2000 {
        b = b.file(&format!("files/f{i:04}.txt"), &format!("{i:0300}"));
    }
    let r = b.create();
    let copy = r.tmp_dir().join("prompt.md");
    put(
        &r.script,
        format!(
            "run\tcp \"$HONE_PROMPT\" {}\nwrite\tvalue.txt\tscore: 4\\n\n",
            copy.display()
        ),
    );
    edit_spec(&r.dir, |t| {
        t.replace(
            "editable = [\"value.txt\"]",
            "editable = [\"files/*.txt\", \"value.txt\"]",
        ) + "\n[stop]\nmax_experiments = 2\n"
    });
    let out = ok(r.hone(&["run"]));
    assert_eq!(r.statuses(), ["baseline", "keep"], "{}", text(&out));
    let prompt = std::fs::read_to_string(&copy).unwrap();
    assert!(
        prompt.len() <= 256 * 1024,
        "prompt of {} bytes",
        prompt.len()
    );
    assert!(
        prompt.contains("### files/f0000.txt"),
        "the first files are shown"
    );
    assert!(
        prompt.contains("are not shown, to keep this prompt under 256 KiB"),
        "the prompt says what it left out"
    );
    assert!(
        prompt.contains("- files/f1000.txt\n"),
        "the files left out are named"
    );
    assert!(
        prompt.contains("more (list them with `git ls-files`)"),
        "the list of names is bounded too"
    );
}

#[test]
fn editable_globs_that_match_no_file_are_a_spec_error() {
    // A typo in `editable` is hone.toml's mistake: exit 2, as for any spec error.
    let r = Repo::stops_after(2, SCORE, "write\tvalue.txt\tscore: 4\\n\n");
    edit_spec(&r.dir, |s| {
        s.replace("editable = [\"value.txt\"]", "editable = [\"valeu.txt\"]")
    });
    git(&r.dir, &["commit", "-qam", "typo"]);
    exits_with(
        r.hone(&["run"]),
        2,
        "editable = [\"valeu.txt\"] matches no file committed at HEAD",
    );
}

#[test]
fn a_broken_hone_toml_does_not_hide_the_runs_already_made() {
    // A run is made; then hone.toml gets a syntax error. `hone run` refuses it (exit 2, its
    // line), but `hone status`, `log` and `show` still read this checkout's store, with a
    // warning that names the error.
    let r = Repo::stops_after(2, SCORE, "write\tvalue.txt\tscore: 4\\n\n");
    ok(r.hone(&["run"]));
    edit_spec(&r.dir, |s| s.replacen("[stop]", "[stop\n", 1));
    exits_with(r.hone(&["run"]), 2, "hone.toml");
    for args in [&["status"][..], &["log"], &["show", "1"]] {
        let out = ok(r.hone(args));
        let said = text(&out);
        assert!(
            said.contains("reading this checkout's store"),
            "{args:?}: {said}"
        );
        assert!(said.contains("hone.toml"), "{args:?}: {said}");
        assert!(said.contains("keep"), "{args:?}: {said}");
    }
    assert_says(&r.hone(&["status"]), "experiments: 2");
}

#[test]
fn with_spec_hones_words_name_that_file_and_suggest_commands_that_work() {
    // A run started from other.toml whose metric then changes: the error names other.toml,
    // and the command it suggests carries `--spec other.toml`; a note of a resumed run too.
    let r = Repo::scored(1, &scores(&[4]));
    std::fs::copy(r.dir.join("hone.toml"), r.dir.join("other.toml")).unwrap();
    ok(r.hone(&["--spec", "other.toml", "run", "--tag", "t"]));
    let toml = std::fs::read_to_string(r.dir.join("other.toml")).unwrap();
    put(
        r.dir.join("other.toml"),
        toml.replace("max_experiments = 1", "max_experiments = 1\npatience = 7"),
    );
    let out = ok(r.hone(&["--spec", "other.toml", "run", "--tag", "t", "--more", "1"]));
    assert_says(&out, "patience is now 7 (other.toml;");
    put(
        r.dir.join("other.toml"),
        toml.replace("metric = \"score\"", "metric = \"loss\""),
    );
    let out = r.hone(&["--spec", "other.toml", "run", "--tag", "t", "--more", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_says(&out, "but other.toml now says metric = \"loss\"");
    assert_says(&out, "`hone --spec other.toml run --new`");
    assert!(!text(&out).contains("hone.toml"), "{}", text(&out));
    // A run stopped on its failures: status, asked with --spec, says how to resume with it.
    let r = Repo::new(
        "[stop]\nmax_experiments = 3\nmax_consecutive_failures = 1\n",
        SCORE,
        "write\tvalue.txt\tno score here\\n\n",
    );
    std::fs::copy(r.dir.join("hone.toml"), r.dir.join("other.toml")).unwrap();
    r.hone(&["--spec", "other.toml", "run"]);
    let status = text(&r.hone(&["--spec", "other.toml", "status"]));
    assert!(
        status.contains("then resume with `hone --spec other.toml run`"),
        "{status}"
    );
}
