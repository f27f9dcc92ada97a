//! `hone bench`: arms and seeds on a one-problem manifest, its report, and resuming it.

use crate::support::*;

/// `hone bench` on a one-problem manifest: it runs the real loop per (arm, seed), writes the
/// three files, reports a paired test against A, and a second call skips the finished runs.
#[test]
fn bench_runs_each_arm_and_seed_writes_its_report_and_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let suite = tmp.path().join("suite");
    let prob = suite.join("quad");
    std::fs::create_dir_all(&prob).unwrap();
    put(prob.join("knobs.py"), "X = 0.9  # hone: 0.0..1.0\n");
    put(
        prob.join("verify.py"),
        "import knobs\nprint('score: %.9g' % ((knobs.X - 0.3) ** 2))\n",
    );
    put(
        prob.join("hone.toml"),
        "[loop]\neditable = [\"knobs.py\"]\nprotected = [\"verify.py\"]\n[verify]\ncommand = \"python3 -B verify.py\"\nmetric = \"score\"\n[agent]\nkind = \"knobs\"\n",
    );
    let manifest = suite.join("manifest.toml");
    put(
        &manifest,
        "[[problem]]\nname = \"quad\"\ndir = \"quad\"\noptimum = 0.0\nbaseline = 0.36\n",
    );
    let out_dir = tmp.path().join("out");
    let args = [
        "bench",
        "--manifest",
        manifest.to_str().unwrap(),
        "--arms",
        "A,Ap",
        "--repeats",
        "2",
        "--budget",
        "3,6",
        "--out",
        out_dir.to_str().unwrap(),
    ];
    ok(hone_in(tmp.path(), &args));
    let md = std::fs::read_to_string(out_dir.join("results.md")).unwrap();
    assert!(md.contains("### quad") && md.contains("| A′ | 2 |"), "{md}");
    let runs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("runs.json")).unwrap()).unwrap();
    let runs = runs["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4);
    for r in runs {
        let t = r["trajectory"].as_array().unwrap();
        assert_eq!(t.len(), 6, "{r}");
        // The incumbent starts at the baseline and never gets worse.
        assert!((t[0].as_f64().unwrap() - 0.36).abs() < 1e-9, "{r}");
        let v: Vec<f64> = t.iter().map(|x| x.as_f64().unwrap()).collect();
        assert!(v.windows(2).all(|w| w[1] <= w[0]), "{r}");
    }
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("results.json")).unwrap())
            .unwrap();
    let arms = results["problems"][0]["arms"].as_array().unwrap();
    assert_eq!(arms[1]["at"][0]["vs_a"]["pairs"], 2, "{results}");
    let again = hone_in(tmp.path(), &args);
    assert!(again.status.success(), "{}", text(&again));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("0 run(s) to do (4 already"),
        "{}",
        text(&again)
    );
}
