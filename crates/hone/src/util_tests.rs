//! `util`'s tests: logs' last lines, formatting, escaping, URLs and secrets, the seeded
//! generator.

#[test]
fn the_last_line_of_a_log_is_read_from_its_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("0.log");
    let mut body = "noise\n".repeat(2000);
    body.push_str("step 9 loss 0.5\n\n");
    std::fs::write(&p, &body).expect("write");
    assert_eq!(super::last_line_of(&p).as_deref(), Some("step 9 loss 0.5"));
    // A progress bar that rewrites its line: the last update.
    body.push_str("\rstep 10 loss 0.4\rstep 11 loss 0.3   ");
    std::fs::write(&p, &body).expect("write");
    assert_eq!(super::last_line_of(&p).as_deref(), Some("step 11 loss 0.3"));
    assert_eq!(super::last_line_of(&dir.path().join("missing.log")), None);
    // hone's own notes at the end of an agent's log are not the agent's last line.
    std::fs::write(
        &p,
        "EROFS: read-only file system\n--- hone: it reported no spend ---\n",
    )
    .unwrap();
    assert_eq!(
        super::last_line_of(&p).as_deref(),
        Some("EROFS: read-only file system")
    );
}

#[test]
fn the_last_lines_end_at_carriage_returns_too() {
    let log = "start\r\nstep 1 | loss: 3\rstep 2 | loss: 2\rstep 3 | loss: 1\nval: 0.5\n";
    assert_eq!(
        super::last_lines(log, 3),
        ["step 2 | loss: 2", "step 3 | loss: 1", "val: 0.5"]
    );
    assert_eq!(super::last_lines(log, 9).len(), 5);
    assert!(super::last_lines("", 3).is_empty());
}

use super::*;

#[test]
fn a_store_urls_password_is_found_where_it_is_written() {
    assert_eq!(
        url_password("postgres://hone:S3cret@db:5432/h"),
        Some("S3cret")
    );
    assert_eq!(
        url_password("postgres://hone@db/h?sslmode=require&p%61ssword=pw1234"),
        Some("pw1234")
    );
    assert_eq!(url_password("postgres://hone@db/h"), None);
    assert_eq!(url_password("postgres://db/h?user=a:b@c"), None);
    let url = "postgres://hone:S3cret@db/h";
    assert!(reveals_url(url, url));
    assert!(reveals_url("S3cret", url), "the password alone");
    assert!(!reveals_url("postgres://other@db/h", url));
    assert!(!reveals_url("anything", ""));
}

#[test]
fn values_are_written_whole_and_differences_signed() {
    assert_eq!(fmt_value(0.0), "0.000000");
    assert_eq!(fmt_value(1.5), "1.500000");
    assert_eq!(fmt_value(3.0e-9), "3.0000e-9");
    assert_eq!(fmt_value(2.5e7), "2.5000e7");
    assert_eq!(fmt_signed(0.001494), "+0.001494");
    assert_eq!(fmt_signed(-1.5e-9), "-1.5000e-9");
    assert_eq!(fmt_signed(-0.0), "+0.000000");
}

#[test]
fn github_references_in_agent_text_are_made_inert() {
    let z = '\u{200b}';
    assert_eq!(
        github_inert("Closes #7, fixes o/r#9; cc @team and GH-3"),
        format!("Closes #{z}7, fixes o/r#{z}9; cc @{z}team and GH-{z}3")
    );
    assert_eq!(
        github_inert("see https://github.com/o/r/issues/12 and /pull/4"),
        format!("see https://github.com/o/r/issues/{z}12 and /pull/{z}4")
    );
    let plain = "lr 1e-3 -> 2e-3 (#notes, a@ b, x-1, issues/ 5)";
    assert_eq!(github_inert(plain), plain);
}

/// A relative `PATH` entry that leads to an executable `git` (from this process's
/// directory) and an empty one are passed over; so are a directory named `git` and a file
/// that is not executable; the absolute entry's executable is found.
#[test]
fn a_program_is_found_only_in_absolute_path_entries() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let make = |sub: &str, mode: u32| {
        let d = dir.path().join(sub);
        std::fs::create_dir_all(&d).expect("mkdir");
        let p = d.join("git");
        std::fs::write(&p, "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
        d
    };
    let (rel, plain, good) = (
        make("rel", 0o755),
        make("plain", 0o644),
        make("good", 0o755),
    );
    let as_dir = dir.path().join("as-dir");
    std::fs::create_dir_all(as_dir.join("git")).expect("mkdir");
    // `rel` as a path relative to this process's directory, which leads to the same file.
    let cwd = std::env::current_dir().expect("cwd");
    let up = "../".repeat(cwd.components().count() - 1);
    let relative =
        std::path::PathBuf::from(format!("./{up}")).join(rel.strip_prefix("/").expect("abs"));
    assert!(
        std::fs::metadata(relative.join("git")).is_ok(),
        "{}",
        relative.display()
    );
    let path = std::env::join_paths([
        relative.clone(),
        std::path::PathBuf::new(),
        as_dir,
        plain,
        good.clone(),
    ])
    .expect("join");
    assert_eq!(absolute_program(&path, "git"), Some(good.join("git")));
    let only_relative = std::env::join_paths([relative]).expect("join");
    assert_eq!(absolute_program(&only_relative, "git"), None);
    let kept = absolute_entries(&path);
    let kept: Vec<_> = std::env::split_paths(&kept).collect();
    assert_eq!(kept.len(), 3, "{kept:?}");
    assert!(kept.iter().all(|d| d.is_absolute()), "{kept:?}");
    assert_eq!(kept.last(), Some(&good));
    // What hone passes on: PATH and the loader's paths so cleaned, any other variable as
    // it is; a PATH with no absolute entry is not left empty (the current directory).
    let on = |k: &str, v: &str| passed_on((k.into(), v.into())).1;
    assert_eq!(
        on("PATH", ":bin:/usr/local/bin::/bin:."),
        "/usr/local/bin:/bin"
    );
    assert_eq!(on("PATH", ":bin"), "/usr/bin:/bin");
    assert_eq!(
        on("LD_LIBRARY_PATH", ":/usr/local/cuda/lib64:lib"),
        "/usr/local/cuda/lib64"
    );
    assert_eq!(on("LD_LIBRARY_PATH", "/opt/x;lib;/opt/y;"), "/opt/x:/opt/y");
    assert_eq!(on("LD_LIBRARY_PATH", ":"), "");
    // A bare library name is looked up in the loader's paths: kept; a relative path not.
    assert_eq!(
        on("LD_PRELOAD", "libjemalloc.so.2 /opt/y.so:./z.so lib/w.so"),
        "libjemalloc.so.2:/opt/y.so"
    );
    assert_eq!(on("LD_AUDIT", "a/b.so:/opt/c.so"), "/opt/c.so");
    assert_eq!(on("PYTHONPATH", ":bin"), ":bin");
    // What a run's start note counts: only what would find a file here.
    let rel = |k: &str, v: &str| has_relative_entries(k, std::ffi::OsStr::new(v));
    assert!(rel("PATH", "/usr/bin:") && rel("LD_LIBRARY_PATH", "/opt/x;lib"));
    assert!(rel("LD_PRELOAD", "./z.so") && rel("LD_AUDIT", "a/b.so"));
    assert!(!rel("PATH", "/usr/bin:/bin") && !rel("LD_LIBRARY_PATH", "/opt/x;/opt/y"));
    assert!(!rel("LD_LIBRARY_PATH", "") && !rel("LD_PRELOAD", "libjemalloc.so.2  /opt/y.so"));
    assert!(!rel("PYTHONPATH", ":bin"));
    let given = search_paths_of(
        env_of(&[
            ("PATH", ":lib:/usr/bin"),
            ("HOME", "/root"),
            ("LD_LIBRARY_PATH", ":lib"),
        ])
        .into_iter(),
    );
    let given = env_strings(&given);
    assert_eq!(
        given,
        [
            ("PATH".into(), "/usr/bin".into()),
            ("LD_LIBRARY_PATH".into(), String::new())
        ]
    );
}

#[test]
fn html_escape_covers_markup_and_both_quotes() {
    assert_eq!(
        html_escape(r#"<a href="x">Tom's & Jerry's</a>"#),
        "&lt;a href=&quot;x&quot;&gt;Tom&#39;s &amp; Jerry&#39;s&lt;/a&gt;"
    );
    assert_eq!(html_escape("plain é"), "plain é");
}

/// The fast path writes what the formatter writes: ties of every kind (exact binary ones,
/// decimal ones a product rounds onto), negatives rounding to zero, the edges of the fast
/// range, and a million numbers of every magnitude.
#[test]
fn push_fixed_writes_what_the_formatter_writes() {
    let mut state = 7;
    let mut values = vec![
        0.0,
        -0.0,
        0.25,
        0.05,
        0.15,
        0.35,
        2.5,
        -2.5,
        1.0005,
        0.0000005,
        999_999.999_999_5,
        999_999.94,
        1e6,
        -1e6,
        1e-7,
        -0.04,
        123.456_789_5,
        f64::NAN,
        f64::INFINITY,
        5e-324,
    ];
    for i in 0..1_000_000i32 {
        let u = unit_f64(splitmix64(&mut state));
        let magnitude = 10f64.powi(i % 16 - 8);
        let mut v = (u - 0.5) * magnitude;
        if i % 3 == 0 {
            // A decimal with few digits: the ties a rounding could get wrong.
            v = (v * 1e4).round() / 1e4 + if i % 2 == 0 { 0.000_05 } else { 0.0 };
        }
        values.push(v);
        // A decimal tie at `p` decimals, in the binary just above or below it: the product
        // can round onto the other side.
        let p = i % 7;
        let k = (u * 1e6 * 10f64.powi(p)).floor();
        values.push((k + 0.5) / 10f64.powi(p));
    }
    for v in values {
        for prec in 0..=7 {
            let mut fast = String::new();
            push_fixed(&mut fast, v, prec);
            assert_eq!(fast, format!("{v:.prec$}"), "{v:e} to {prec} decimals");
        }
    }
}

#[test]
fn escaping_a_string_is_escaping_each_character() {
    for s in ["", "a", "&", "é<&>\"'x", "<<", "tail &"] {
        let mut each = String::new();
        for c in s.chars() {
            push_html_escaped(&mut each, c);
        }
        assert_eq!(html_escape(s), each);
    }
}

#[test]
fn cut_chars_keeps_n_characters_and_marks_a_cut() {
    assert_eq!(cut_chars("abc", 3), "abc");
    assert_eq!(cut_chars("abcd", 3), "abc…");
    assert_eq!(cut_chars("éééé", 2), "éé…");
    assert_eq!(cut_chars("éé", 2), "éé");
    assert_eq!(cut_chars("", 0), "");
    assert_eq!(cut_chars("a", 0), "…");
}

#[test]
fn mean_of_values_and_of_none() {
    assert_eq!(mean(&[1.0, 2.0, 6.0]), 3.0);
    assert!(mean(&[]).is_nan());
}

#[test]
fn median_of_odd_even_and_empty() {
    assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    assert_eq!(median(&[5.0]), 5.0);
    assert!(median(&[]).is_nan());
}

/// The reference outputs of splitmix64 from state 0.
#[test]
fn splitmix64_matches_the_reference() {
    let mut s = 0;
    assert_eq!(splitmix64(&mut s), 0xe220_a839_7b1d_cdaf);
    assert_eq!(splitmix64(&mut s), 0x6e78_9e6a_a1b9_65f4);
    assert_eq!(unit_f64(0), 0.0);
    assert!(unit_f64(u64::MAX) < 1.0);
}
