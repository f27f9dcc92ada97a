//! Feasibility learned from crashes (issue 17): a verifier that crashes in part of the box; the
//! knobs optimizer stops proposing there, and `hone log` / `hone show` say where a knob's
//! explored range was narrowed and why.

use crate::support::*;

/// A knobs repository whose verifier crashes (exits 1, "out of memory") when WIDTH > 24; the
/// optimum, WIDTH = 22 and DEPTH = 4, lies next to that edge.
fn crashy_repo(experiments: u32, hang: &str) -> (tempfile::TempDir, PathBuf) {
    knob_repo_of(
        "WIDTH = 2  # hone: int 1..40\nDEPTH = 9  # hone: int 1..20\n",
        &format!(
            "{hang}w=$(sed -n 's/^WIDTH = \\([0-9]*\\).*/\\1/p' params.txt)\n\
         d=$(sed -n 's/^DEPTH = \\([0-9]*\\).*/\\1/p' params.txt)\n\
         if [ \"$w\" -gt 24 ]; then echo 'out of memory' >&2; exit 1; fi\n\
         echo \"loss: $(( (w-22)*(w-22) + (d-4)*(d-4) ))\"\n"
        ),
        experiments,
    )
}

/// How many of `rows` crashed.
fn crashes(rows: &[serde_json::Value]) -> usize {
    rows.iter().filter(|v| v["status"] == "crash").count()
}

/// The line of `hone log`'s `table` that says WIDTH's explored range was narrowed (there must
/// be one).
fn narrowing(table: &str) -> &str {
    table
        .lines()
        .find(|l| l.contains("feasibility: knob WIDTH: explored range narrowed to ["))
        .unwrap_or_else(|| panic!("no narrowing in `hone log`:\n{table}"))
}

/// The number right after `marker` in `line` (the test fails where there is none).
fn number_after<T: std::str::FromStr>(line: &str, marker: &str) -> T {
    line.split(marker)
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no number after {marker:?}: {line}"))
}

#[test]
fn crashes_stop_once_the_crash_region_is_learned_and_log_and_show_say_so() {
    let (_t, dir) = crashy_repo(40, "");
    let out = hone_in(&dir, &["run", "--seed", "1"]);
    assert!(out.status.success(), "{}", text(&out));
    let rows = log_in(&dir);
    assert_eq!(rows.len(), 40);
    // 16 of WIDTH's 40 values crash, so chance would crash about 16 times in 40. The region
    // is found early and then left alone: a crash in the initial design ends it, and two
    // crashes beyond an edge make that side unsure (seeds 1 to 5 crash twice in the first 20
    // and once after).
    let (early, total) = (crashes(&rows[..20]), crashes(&rows));
    assert!(early >= 1, "the crash region was found: {early} crashes");
    assert!(total <= 4, "crashes stop once learned: {total} in 40");
    // The optimum next to the edge is still reached.
    let best = rows
        .iter()
        .filter_map(|v| v["objective"].as_f64())
        .fold(f64::INFINITY, f64::min);
    assert!(best <= 2.0, "{best}");

    let table = text(&hone_in(&dir, &["log"]));
    let line = narrowing(&table);
    assert!(line.contains("crashes above"), "{line}");
    // The narrowing sits under the experiment whose crash made it.
    let lines: Vec<&str> = table.lines().collect();
    let at = lines.iter().position(|l| *l == line).unwrap();
    let row = lines[..at]
        .iter()
        .rev()
        .find(|l| !l.trim_start().starts_with("feasibility:"))
        .unwrap();
    assert!(row.contains("crash"), "{row}");
    let n = row.split_whitespace().next().unwrap();
    // The edge is a width that finished; the crashes lie above 24.
    let edge: i64 = number_after(line, "crashes above ");
    assert!(edge <= 24, "{line}");

    let show = text(&hone_in(&dir, &["show", n]));
    assert!(
        show.contains("feasibility: knob WIDTH: explored range narrowed to [")
            && show.contains(&format!(", {edge}] after ")),
        "{show}"
    );
    assert!(show.contains(&format!("(since experiment {n})")), "{show}");
    // Before the crashes, nothing was narrowed.
    let first = text(&hone_in(&dir, &["show", "0"]));
    assert!(!first.contains("narrowed"), "{first}");
    // The table without narrowings is unchanged: JSON and TSV carry none.
    assert!(!rows.iter().any(|r| r.to_string().contains("feasibility")));

    // The report says what was learned: where each knob was tried, where the best runs sit
    // and where it failed, and the failures by cause.
    ok(hone_in(&dir, &["report", "--out", "rep"]));
    let md = std::fs::read_to_string(dir.join("rep/report.md")).unwrap();
    let knobs = md
        .split("## Knobs: where they were tried, where the best runs sit")
        .nth(1)
        .unwrap_or_else(|| panic!("no knobs table: {md}"));
    let width = knobs
        .lines()
        .find(|l| l.starts_with("| WIDTH |"))
        .unwrap_or_else(|| panic!("{knobs}"));
    let cells: Vec<&str> = width.split(" | ").collect();
    assert!(cells[3].ends_with(" values)"), "tried: {width}");
    let failed_lo: i64 = cells[5].split(" .. ").next().unwrap().parse().unwrap();
    assert!(failed_lo > 24, "every failure lies above 24: {width}");
    let failures = md.split("## Failures by cause").nth(1).unwrap();
    assert!(
        failures.contains(&format!("out of memory | crash | {total} |")),
        "{failures}"
    );
}

#[test]
fn what_was_learned_survives_kill_9_and_a_resume_with_two_workers() {
    let marks = Marks::new();
    // Experiment 36's verifier hangs (once) until the run is killed: by then (seed 1, the
    // same every time while the run is serial) four crashes have narrowed WIDTH's range
    // (at 2, 11, 32 and 34), so what the resumed run with two workers must keep is there whatever
    // order its experiments finish in. (Killed earlier, whether a third crash came at all
    // depended on that order.)
    let hang = marks.fill(
        "if [ \"$HONE_EXPERIMENT\" = 36 ] && [ ! -f {m}/started ]; then touch {m}/started; sleep 300; fi\n",
    );
    let (_t, dir) = crashy_repo(44, &hang);
    let mut child = spawn_hone_in(&dir, &["run", "--seed", "1"], Stdio::null(), Stdio::null());
    wait_for_file(&marks.path("started"));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let out = hone_in(&dir, &["run", "--seed", "1", "--workers", "2"]);
    assert!(out.status.success(), "{}", text(&out));
    let rows = log_in(&dir);
    // 44 counted by max_experiments, and the aborted #36, which is not.
    assert_eq!(rows.len(), 45);
    assert_eq!(rows[36]["status"], "aborted", "{}", rows[36]);
    // A crash in the initial design ends it, so one crash comes early (seed 1: at 2).
    assert!(crashes(&rows[..6]) >= 1, "a crash before the kill");
    assert!(
        crashes(&rows[..36]) >= 3,
        "the narrowing came before the kill"
    );
    let table = text(&hone_in(&dir, &["log"]));
    let line = narrowing(&table);
    // The interrupted experiment is no crash: every crash the line counts is a crash row.
    let counted: usize = number_after(line, " after ");
    assert!(counted <= crashes(&rows), "{line}");
    assert!(
        crashes(&rows[20..]) <= 4,
        "the resumed run kept away from the crashes: {}",
        crashes(&rows[20..])
    );
    shows_read_the_narrowing_log_as_the_run_reads(&dir, rows.len());
}

/// The run's narrowing log, kept as it went (killed, resumed, two workers finishing out of
/// order), covers every experiment, and `hone show N` says from it what it works out from
/// the experiments up to N when there is no log (a run an older hone left).
fn shows_read_the_narrowing_log_as_the_run_reads(dir: &Path, experiments: usize) {
    let db = rusqlite::Connection::open(dir.join(".hone/hone.db")).unwrap();
    let upto: Option<i64> = db
        .query_row("SELECT narrowed_upto FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(upto, Some(experiments as i64));
    let shows = || -> Vec<String> {
        (0..experiments)
            .map(|n| text(&hone_in(dir, &["show", &n.to_string(), "--tail", "0"])))
            .collect()
    };
    let logged = shows();
    assert!(
        logged.iter().any(|s| s.contains("feasibility: knob WIDTH")),
        "no show tells a narrowing"
    );
    db.execute("UPDATE runs SET narrowed_upto = NULL", [])
        .unwrap();
    for (n, (from_log, worked_out)) in logged.iter().zip(shows()).enumerate() {
        assert_eq!(*from_log, worked_out, "hone show {n}");
    }
}
