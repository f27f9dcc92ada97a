//! `hone report`: the plot, the summary and the page it writes.

use crate::support::*;

#[test]
fn report_writes_a_plot_a_summary_and_a_page() {
    let r = Repo::stops_after(
        6,
        "cat value.txt; if grep -q boom value.txt; then exit 2; fi",
        "write\tvalue.txt\tscore: 4\\n\nhypothesis\tfirst gain\n---\nwrite\tvalue.txt\tscore: 9\\n\n---\nwrite\tvalue.txt\tboom\\n\n---\nwrite\tvalue.txt\tscore: 2\\n\nhypothesis\tbig <gain> & more\n---\nwrite\tvalue.txt\tscore: 7\\n\n",
    );
    assert!(r.hone(&["run", "--tag", "rep"]).status.success());
    let out_dir = r.tmp_dir().join("report");
    ok(r.hone(&["report", "--out", out_dir.to_str().unwrap()]));
    let svg = std::fs::read_to_string(out_dir.join("progress.svg")).unwrap();
    assert!(svg.starts_with("<svg"));
    // Each kind of point in a group of its own.
    assert_eq!(marks(&svg, "keeps\""), 3, "baseline and two keeps");
    assert_eq!(marks(&svg, "discards\""), 2);
    assert_eq!(marks(&svg, "fail crash\""), 1);
    assert!(
        svg.contains("big &lt;gain&gt; &amp; more"),
        "labels are escaped"
    );
    assert!(svg.contains("class=\"best\""));
    // The SVG is well-formed XML (a real parser), with one point per experiment, and its step
    // line ends at the height of the best experiment's point (#4, score 2) at the last x.
    let check = Command::new("python3")
        .args([
            "-c",
            r#"
import sys, re, xml.etree.ElementTree as E
root = E.parse(sys.argv[1]).getroot()
ns = '{http://www.w3.org/2000/svg}'
pts = [c for c in root.iter(ns + 'circle')] + [c for c in root.iter('circle')]
marks = [m for g in root.iter() if g.get('class', '').startswith('fail') for m in g if m.tag in (ns + 'text', 'text')]
best = [p for p in root.iter() if p.get('class') == 'best'][0]
nums = re.findall(r'[-0-9.]+', best.get('d'))
keeps = {c.find(ns + 'title').text.split()[0] if c.find(ns + 'title') is not None else c.find('title').text.split()[0]: c for c in pts}
b = keeps['#4']
print(len(pts) + len(marks), nums[-1], b.get('cy'), nums[-2])
"#,
        ])
        .arg(out_dir.join("progress.svg"))
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "the SVG does not parse: {}",
        text(&check)
    );
    let f: Vec<String> = String::from_utf8_lossy(&check.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect();
    assert_eq!(f[0], "6", "one point or mark per experiment: {f:?}");
    assert_eq!(f[1], f[2], "the step line ends at the best's height: {f:?}");
    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(
        md.contains("**baseline → best**: 5.000000 → 2.000000 (-60.00%)"),
        "{md}"
    );
    assert!(md.contains("**keep rate**: 40.0% of 5 candidates"), "{md}");
    // The biggest gain (#4: 4 -> 2) comes first.
    let top = md.split("## Top improvements").nth(1).unwrap();
    assert!(
        top.find("| 4 |").unwrap() < top.find("| 1 |").unwrap(),
        "{top}"
    );
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("</html>"));
    assert!(
        !html.contains("http://") || !html.contains("<script"),
        "self-contained"
    );
    assert!(!html.contains("src=\"http"), "nothing fetched");
}

/// Each view finds the repository once: the discovery (`git rev-parse --show-toplevel`, a
/// process of its own) is not asked again by the command's later steps.
#[test]
fn each_view_finds_the_repository_once() {
    let r = Repo::stops_after(3, "cat value.txt", "write\tvalue.txt\tscore: 4\n\n");
    assert!(r.hone(&["run", "--tag", "once"]).status.success());
    let spy = GitSpy::new();
    let out_dir = r.tmp_dir().join("report");
    let out = out_dir.to_str().unwrap();
    for args in [
        &["status"][..],
        &["log"],
        &["show", "1"],
        &["report", "--out", out],
    ] {
        spy.take();
        let done = Command::new(HONE)
            .args(args)
            .current_dir(&r.dir)
            .env("PATH", &spy.path)
            .output()
            .unwrap();
        assert!(done.status.success(), "{args:?}: {}", text(&done));
        let log = spy.take();
        let found = log
            .lines()
            .filter(|l| l.contains("--show-toplevel"))
            .count();
        assert_eq!(found, 1, "hone {args:?} asked git: {log}");
    }
}

#[test]
fn a_report_without_improvements_says_so_under_its_table() {
    let r = Repo::scored(3, &scores(&[7, 9]));
    r.run_expect("n", &["baseline", "discard", "discard"]);
    ok(r.hone(&["report", "--run", "n", "--out", "rep"]));
    let md = std::fs::read_to_string(r.dir.join("rep/report.md")).unwrap();
    assert!(
        md.contains("none yet: no candidate has beaten the baseline"),
        "{md}"
    );
}
