//! The benchmark's report: per problem and arm, normalised regret at each budget (median with
//! a 95% bootstrap interval, mean ± sd) and a paired test against arm A on the shared seeds;
//! then the two targets, evaluated from those figures. Serialises to JSON and renders
//! as markdown.

use serde::Serialize;

use super::stats;
use super::{arms, describe_arm, Problem, RunResult};

/// The arm every other is tested against.
pub const REFERENCE: &str = "A";
/// The arm target 1 compares A with.
pub const OPTUNA_TPE: &str = "optuna-tpe";
/// The budget target 1 reads (or the problem's own budget, if smaller).
pub const TARGET_BUDGET: u64 = 50;

/// A paired comparison with the reference arm over the seeds both have.
#[derive(Clone, Debug, Serialize)]
pub struct Paired {
    pub pairs: usize,
    /// Mean of (this arm − A); negative is better than A.
    pub mean_diff: f64,
    /// Two-sided paired sign-flip permutation test.
    pub p: f64,
}

/// One arm's regret at one budget.
#[derive(Clone, Debug, Serialize)]
pub struct AtBudget {
    pub budget: u64,
    pub n: usize,
    pub median: f64,
    pub ci95: (f64, f64),
    pub mean: f64,
    pub sd: f64,
    pub vs_a: Option<Paired>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ArmReport {
    pub arm: String,
    pub description: String,
    pub source: String,
    pub at: Vec<AtBudget>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ProblemReport {
    pub name: String,
    pub kind: String,
    pub optimum: f64,
    pub baseline: f64,
    /// The budgets reported for this problem (those within its own budget).
    pub budgets: Vec<u64>,
    pub arms: Vec<ArmReport>,
}

/// A target of the issue, evaluated.
#[derive(Clone, Debug, Serialize)]
pub struct Target {
    pub name: String,
    /// Problems where it holds / problems where it could be evaluated.
    pub holds_on: Vec<String>,
    pub evaluated: Vec<String>,
    pub needed: usize,
    pub met: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub problems: Vec<ProblemReport>,
    pub targets: Vec<Target>,
}

fn arm_order(a: &str) -> (usize, String) {
    let known = arms();
    (
        known.iter().position(|x| *x == a).unwrap_or(known.len()),
        a.to_string(),
    )
}

/// The regret of `run` at `b` on `p` (`None` when the run was allowed fewer verifications).
fn regret(p: &Problem, run: &RunResult, b: u64) -> Option<f64> {
    if b > run.budget {
        return None;
    }
    run.score_at(b).map(|s| p.regret(s))
}

impl Report {
    /// Summarises `runs` (of any source) for `problems` at `budgets`.
    pub fn build(problems: &[Problem], budgets: &[u64], runs: &[RunResult]) -> Report {
        let mut out = Vec::new();
        for (pi, p) in problems.iter().enumerate() {
            out.extend(problem_report(pi, p, budgets, runs));
        }
        let mut targets = vec![target_vs_optuna(&out), target_bilevel(&out, "C")];
        // D (Level 1 + offline Level 2, without the strategy) is the other bilevel arm: its
        // line is added when it was run.
        if out.iter().any(|p| p.arms.iter().any(|a| a.arm == "D")) {
            targets.push(target_bilevel(&out, "D"));
        }
        Report {
            problems: out,
            targets,
        }
    }

    /// The report as markdown: one table per problem, then the targets.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        s.push_str(
            "Normalised regret (best − optimum) / (baseline − optimum) of the incumbent after b \
             verifications: 1 = no progress, 0 = optimum. Median [95% bootstrap CI of the \
             median], mean ± sd, and the paired sign-flip permutation test against A on the \
             shared seeds (Δ = mean of arm − A; negative is better).\n",
        );
        for p in &self.problems {
            problem_table(&mut s, p);
        }
        s.push_str("\n### Targets\n\n");
        for t in &self.targets {
            if t.evaluated.is_empty() {
                s.push_str(&format!(
                    "- {}: **not evaluated** (no problem has runs of both arms it compares)\n",
                    t.name
                ));
                continue;
            }
            s.push_str(&format!(
                "- {}: holds on {} of {} evaluated problems ({}; needed {}) — **{}**\n",
                t.name,
                t.holds_on.len(),
                t.evaluated.len(),
                if t.holds_on.is_empty() {
                    "none".to_string()
                } else {
                    t.holds_on.join(", ")
                },
                t.needed,
                if t.met { "met" } else { "missed" }
            ));
        }
        s.push_str("\nArms:\n\n");
        let mut seen: Vec<&str> = Vec::new();
        for p in &self.problems {
            for a in &p.arms {
                if !seen.contains(&a.arm.as_str()) {
                    seen.push(&a.arm);
                    s.push_str(&format!(
                        "- {}: {} (source: {})\n",
                        label(&a.arm),
                        a.description,
                        a.source
                    ));
                }
            }
        }
        s
    }
}

/// One problem's summary (the `pi`-th problem): every arm that ran it at the budgets all its
/// runs reached; `None` when no arm did.
fn problem_report(
    pi: usize,
    p: &Problem,
    budgets: &[u64],
    runs: &[RunResult],
) -> Option<ProblemReport> {
    let mine: Vec<&RunResult> = runs.iter().filter(|r| r.problem == p.name).collect();
    // The budgets every run of the problem reached, plus that common budget itself
    // when it falls short of the largest one asked for (charlm's reduced budget).
    let cap = mine.iter().map(|r| r.budget).min().unwrap_or(0);
    let mut bs: Vec<u64> = budgets.iter().copied().filter(|b| *b <= cap).collect();
    if cap > 0 && !bs.contains(&cap) && budgets.iter().any(|b| *b > cap) {
        bs.push(cap);
    }
    let mut arms: Vec<String> = mine.iter().map(|r| r.arm.clone()).collect();
    arms.sort_by_key(|a| arm_order(a));
    arms.dedup();
    let reference: Vec<&RunResult> = mine
        .iter()
        .copied()
        .filter(|r| r.arm == REFERENCE)
        .collect();
    let mut arm_reports = Vec::new();
    for arm in &arms {
        let of_arm: Vec<&RunResult> = mine.iter().copied().filter(|r| &r.arm == arm).collect();
        let at = bs
            .iter()
            .map(|&b| at_budget(pi, p, arm, &of_arm, &reference, b))
            .collect();
        arm_reports.push(ArmReport {
            arm: arm.clone(),
            description: describe_arm(arm),
            source: of_arm.first().map(|r| r.source.clone()).unwrap_or_default(),
            at,
        });
    }
    (!arm_reports.is_empty()).then(|| ProblemReport {
        name: p.name.clone(),
        kind: p.kind.clone(),
        optimum: p.optimum,
        baseline: p.baseline,
        budgets: bs,
        arms: arm_reports,
    })
}

/// An arm's regrets at budget `b`: their statistics, and the paired comparison with the
/// reference arm's runs of the same seeds.
fn at_budget(
    pi: usize,
    p: &Problem,
    arm: &str,
    of_arm: &[&RunResult],
    reference: &[&RunResult],
    b: u64,
) -> AtBudget {
    let xs: Vec<f64> = of_arm.iter().filter_map(|r| regret(p, r, b)).collect();
    let seed = (pi as u64) << 32 | b;
    let vs_a = (arm != REFERENCE && !reference.is_empty()).then(|| {
        let d: Vec<f64> = of_arm
            .iter()
            .filter_map(|r| {
                let a = reference.iter().find(|a| a.seed == r.seed)?;
                Some(regret(p, r, b)? - regret(p, a, b)?)
            })
            .collect();
        Paired {
            pairs: d.len(),
            mean_diff: stats::mean(&d),
            p: stats::paired_permutation_p(&d, seed),
        }
    });
    AtBudget {
        budget: b,
        n: xs.len(),
        median: stats::median(&xs),
        ci95: stats::bootstrap_median(&xs, seed),
        mean: stats::mean(&xs),
        sd: stats::sd(&xs),
        vs_a,
    }
}

/// One problem's markdown table: a row per arm, three columns per budget.
fn problem_table(s: &mut String, p: &ProblemReport) {
    s.push_str(&format!(
        "\n### {} — {}\n\noptimum {}, baseline {}\n\n| arm | n |",
        p.name, p.kind, p.optimum, p.baseline
    ));
    for b in &p.budgets {
        s.push_str(&format!(
            " @{b} median [CI] | @{b} mean ± sd | @{b} Δ vs A (p) |"
        ));
    }
    s.push_str("\n|---|---|");
    for _ in &p.budgets {
        s.push_str("---|---|---|");
    }
    s.push('\n');
    for a in &p.arms {
        let n = a.at.first().map_or(0, |x| x.n);
        s.push_str(&format!("| {} | {n} |", label(&a.arm)));
        for x in &a.at {
            let paired = match &x.vs_a {
                Some(v) if v.pairs > 0 => {
                    format!("{} ({})", num(v.mean_diff), pval(v.p))
                }
                _ => "—".into(),
            };
            s.push_str(&format!(
                " {} [{}, {}] | {} ± {} | {paired} |",
                num(x.median),
                num(x.ci95.0),
                num(x.ci95.1),
                num(x.mean),
                num(x.sd)
            ));
        }
        s.push('\n');
    }
}

/// An arm's name as the report prints it.
pub fn label(arm: &str) -> String {
    if arm == "Ap" {
        "A′".into()
    } else {
        arm.into()
    }
}

fn num(x: f64) -> String {
    if x.is_nan() {
        "—".into()
    } else if x != 0.0 && x.abs() < 0.001 {
        format!("{x:.1e}")
    } else {
        format!("{x:.3}")
    }
}

fn pval(p: f64) -> String {
    if p < 0.001 {
        "p<0.001".into()
    } else {
        format!("p={p:.3}")
    }
}

fn at<'a>(p: &'a ProblemReport, arm: &str, b: u64) -> Option<&'a AtBudget> {
    p.arms
        .iter()
        .find(|a| a.arm == arm)?
        .at
        .iter()
        .find(|x| x.budget == b && x.n > 0)
}

/// Target 1: A's median regret at 50 verifications is no worse than Optuna TPE's on at least
/// 4 of the 6 problems.
fn target_vs_optuna(problems: &[ProblemReport]) -> Target {
    let mut holds_on = Vec::new();
    let mut evaluated = Vec::new();
    for p in problems {
        let Some(&b) = p.budgets.iter().filter(|b| **b <= TARGET_BUDGET).max() else {
            continue;
        };
        if let (Some(a), Some(t)) = (at(p, REFERENCE, b), at(p, OPTUNA_TPE, b)) {
            evaluated.push(p.name.clone());
            if a.median <= t.median {
                holds_on.push(p.name.clone());
            }
        }
    }
    let met = holds_on.len() >= 4;
    Target {
        name: format!(
            "hone's default knobs search (A) has median regret at {TARGET_BUDGET} verifications no worse than Optuna TPE on at least 4 of 6 problems"
        ),
        holds_on,
        evaluated,
        needed: 4,
        met,
    }
}

/// Target 2: an offline bilevel arm (`arm`: C = 1 + 1.5 + 2, D = 1 + 2) beats A (mean regret
/// lower, paired p < 0.05) at the problem's largest budget on at least half the problems.
fn target_bilevel(problems: &[ProblemReport], arm: &str) -> Target {
    let mut holds_on = Vec::new();
    let mut evaluated = Vec::new();
    for p in problems {
        let Some(&b) = p.budgets.iter().max() else {
            continue;
        };
        let Some(c) = at(p, arm, b) else { continue };
        let Some(v) = &c.vs_a else { continue };
        if v.pairs == 0 {
            continue;
        }
        evaluated.push(p.name.clone());
        if v.mean_diff < 0.0 && v.p < 0.05 {
            holds_on.push(p.name.clone());
        }
    }
    let needed = evaluated.len().div_ceil(2).max(1);
    Target {
        name: format!(
            "the offline bilevel arm ({arm}: Level 1{} + offline Level 2) beats A (lower mean regret, paired p < 0.05) at the largest budget on at least half the problems",
            if arm == "C" { " + 1.5" } else { "" }
        ),
        met: holds_on.len() >= needed && !evaluated.is_empty(),
        holds_on,
        evaluated,
        needed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn problem(name: &str) -> Problem {
        Problem {
            name: name.into(),
            kind: String::new(),
            dir: PathBuf::new(),
            optimum: 0.0,
            baseline: 10.0,
            score: None,
            budget: None,
            quick: true,
        }
    }

    fn run(problem: &str, arm: &str, seed: u64, traj: Vec<f64>) -> RunResult {
        RunResult {
            problem: problem.into(),
            arm: arm.into(),
            seed,
            budget: traj.len() as u64,
            trajectory: traj,
            unverified: 0,
            wall_s: 0.0,
            source: "test".into(),
        }
    }

    #[test]
    fn an_arm_better_on_every_seed_is_significant_and_meets_the_targets() {
        let probs = vec![problem("p")];
        let mut runs = Vec::new();
        for seed in 1..=10 {
            let s = seed as f64 / 10.0;
            runs.push(run("p", "A", seed, vec![10.0, 5.0 + s, 4.0 + s]));
            runs.push(run("p", "C", seed, vec![10.0, 3.0 + s, 1.0 + s]));
            runs.push(run("p", OPTUNA_TPE, seed, vec![10.0, 6.0 + s, 6.0 + s]));
        }
        // Without D's runs there is no line for D.
        assert_eq!(Report::build(&probs, &[2, 3], &runs).targets.len(), 2);
        for seed in 1..=10 {
            let s = seed as f64 / 10.0;
            runs.push(run("p", "D", seed, vec![10.0, 5.0 + s, 4.0 + s]));
        }
        let rep = Report::build(&probs, &[2, 3, 100], &runs);
        // D ties A on every seed: its bilevel line is there and missed.
        assert!(rep.targets[2].name.contains("(D:"), "{:?}", rep.targets[2]);
        assert!(!rep.targets[2].met && rep.targets[2].evaluated == ["p"]);
        // D better than A on every seed meets it.
        runs.retain(|r| r.arm != "D");
        for seed in 1..=10 {
            let s = seed as f64 / 10.0;
            runs.push(run("p", "D", seed, vec![10.0, 2.0 + s, 0.5 + s]));
        }
        let with_d = Report::build(&probs, &[2, 3], &runs);
        assert!(with_d.targets[2].met, "{:?}", with_d.targets[2]);
        let p = &rep.problems[0];
        assert_eq!(p.budgets, vec![2, 3]);
        let c = p.arms.iter().find(|a| a.arm == "C").unwrap();
        let at3 = &c.at[1];
        assert_eq!(at3.n, 10);
        assert!((at3.median - 0.155).abs() < 1e-9, "{}", at3.median);
        let v = at3.vs_a.as_ref().unwrap();
        assert!((v.mean_diff + 0.3).abs() < 1e-9 && v.p < 0.01, "{v:?}");
        assert!(rep.targets[1].met, "{:?}", rep.targets[1]);
        // One problem evaluated for target 1, which needs four.
        assert_eq!(rep.targets[0].holds_on, vec!["p".to_string()]);
        assert!(!rep.targets[0].met);
        let md = rep.markdown();
        assert!(md.contains("### p"), "{md}");
        assert!(md.contains("missed") && md.contains("met"), "{md}");
    }

    #[test]
    fn an_arm_no_different_from_a_is_not_reported_better() {
        let probs = vec![problem("p")];
        let mut runs = Vec::new();
        for seed in 1..=8 {
            let s = seed as f64;
            let jitter = if seed % 2 == 0 { 0.5 } else { -0.5 };
            runs.push(run("p", "A", seed, vec![10.0, s]));
            runs.push(run("p", "C", seed, vec![10.0, s + jitter]));
        }
        let rep = Report::build(&probs, &[2], &runs);
        assert!(!rep.targets[1].met);
        // Runs shorter than the largest budget asked for are read at their own budget too.
        let rep = Report::build(&probs, &[1, 50], &runs);
        assert_eq!(rep.problems[0].budgets, vec![1, 2]);
        assert!(rep.targets[1].holds_on.is_empty());
    }
}
