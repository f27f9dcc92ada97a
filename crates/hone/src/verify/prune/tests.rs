//! The pruning rules' tests: parsing, each rule's bar at a step, and the progress reader.

use super::*;

fn curve(values: &[f64]) -> Curve {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| ((i as f64 + 1.0) * 10.0, *v))
        .collect()
}

/// References without objectives (the percentile rules do not read them).
fn unranked(curves: &[&[f64]]) -> Vec<Reference> {
    curves
        .iter()
        .map(|c| Reference {
            curve: curve(c),
            objective: None,
        })
        .collect()
}

/// References with their objectives.
fn ranked(runs: &[(&[f64], f64)]) -> Vec<Reference> {
    runs.iter()
        .map(|(c, o)| Reference {
            curve: curve(c),
            objective: Some(*o),
        })
        .collect()
}

fn top(k: usize, direction: Direction) -> Pruner {
    Pruner {
        rule: PruneRule::Top(k),
        direction,
        warmup: Warmup::Steps(20.0),
        min_runs: 3,
    }
}

fn median(direction: Direction) -> Pruner {
    Pruner {
        rule: PruneRule::parse("median").unwrap(),
        direction,
        warmup: Warmup::Steps(20.0),
        min_runs: 3,
    }
}

#[test]
fn progress_reads_metric_lines_with_a_step_and_regexes() {
    let p = Progress::compile("loss").unwrap();
    assert_eq!(p.read("step=100 loss=2.31"), Some((100.0, 2.31)));
    assert_eq!(p.read("METRIC step=5 loss=1e-3"), Some((5.0, 0.001)));
    assert_eq!(p.read(r#"{"step": 7, "loss": 0.5}"#), Some((7.0, 0.5)));
    assert_eq!(p.read("loss=2.31"), None, "no step");
    assert_eq!(p.read("step=1 loss=nan"), None, "not finite");
    assert_eq!(p.read("at step=1 loss=2"), None, "not a metric line");
    let r = Progress::compile(r"step (?P<step>\d+) \| loss (?P<value>[0-9.]+)").unwrap();
    assert_eq!(
        r.read("step 100 | loss 2.31 | lr 3e-4"),
        Some((100.0, 2.31))
    );
    assert_eq!(r.read("epoch 3"), None);
    // README's example, on the line autoresearch's `train.py` prints (its `\r` ends the
    // line before: exec/lines.rs).
    let readme =
        Progress::compile(r"step (?P<step>\d+) \([0-9.]+%\) \| loss: (?P<value>[0-9.eE+-]+)")
            .unwrap();
    assert_eq!(
        readme.read("step 00042 (12.5%) | loss: 3.456789 | lrm: 1.00 | dt: 312ms | tok/sec: 1,680,000 | mfu: 39.8% | epoch: 1 | remaining: 262s    "),
        Some((42.0, 3.456789))
    );
    let e = Progress::compile(r"loss (?P<value>[0-9.]+)").unwrap_err();
    assert!(e.contains("no group named `step`"), "{e}");
    let e = Progress::compile("loss (").unwrap_err();
    assert!(e.contains("neither a metric name"), "{e}");
}

#[test]
fn rules_parse_and_print() {
    assert_eq!(
        PruneRule::parse("median").unwrap(),
        PruneRule::Percentile(50.0)
    );
    assert_eq!(
        PruneRule::parse("percentile:25").unwrap(),
        PruneRule::Percentile(25.0)
    );
    assert_eq!(PruneRule::parse(" top:3 ").unwrap(), PruneRule::Top(3));
    assert_eq!(PruneRule::parse("halving").unwrap(), PruneRule::Halving);
    assert_eq!(PruneRule::parse("reach").unwrap(), PruneRule::Reach(100.0));
    assert_eq!(
        PruneRule::parse("reach:90").unwrap(),
        PruneRule::Reach(90.0)
    );
    for text in [
        "median",
        "percentile:25",
        "top:3",
        "halving",
        "reach",
        "reach:90",
    ] {
        assert_eq!(PruneRule::parse(text).unwrap().to_string(), text);
    }
    for bad in ["mean", "percentile:0", "percentile:100", "percentile:x"] {
        let e = PruneRule::parse(bad).unwrap_err();
        assert!(e.contains("not a pruning rule"), "{bad}: {e}");
        assert!(e.contains("top:K"), "{bad}: {e}");
    }
    for bad in ["top", "top:0", "top:1.5", "best"] {
        let e = PruneRule::parse(bad).unwrap_err();
        assert!(e.contains("did you mean \"top:3\""), "{bad}: {e}");
    }
    for bad in ["reach:0", "reach:101", "reach:x", "reaching"] {
        let e = PruneRule::parse(bad).unwrap_err();
        assert!(e.contains("\"reach\""), "{bad}: {e}");
    }
    let e = PruneRule::parse("percentile:150").unwrap_err();
    assert!(e.contains("(P is between 0 and 100, not `150`"), "{e}");
    let e = PruneRule::parse("percentile").unwrap_err();
    assert!(e.contains("did you mean \"percentile:25\""), "{e}");
}

#[test]
fn a_printed_progress_line_gets_a_regex_that_reads_it() {
    for (line, step, value) in [
        ("step 50 | loss 0.6662 | 0.2s", "50", "0.6662"),
        ("Step: 120, train_loss=1.5e-3, lr=0.1", "120", "1.5e-3"),
        ("epoch 1 step 7 val_acc: 0.91", "7", "0.91"),
        ("step=1 loss=110", "1", "110"),
    ] {
        let (regex, _) = Progress::suggest(line).unwrap_or_else(|| panic!("{line}"));
        let p = Progress::compile(&regex).unwrap();
        assert_eq!(
            p.read(line),
            Some((step.parse().unwrap(), value.parse().unwrap())),
            "{line}: {regex}"
        );
    }
    assert_eq!(Progress::suggest("loss 0.5"), None, "no step");
    assert_eq!(
        Progress::suggest("step 5 | lr 0.1"),
        None,
        "no loss-like value"
    );
}

#[test]
fn median_prunes_a_run_worse_than_the_median_at_the_same_step() {
    let refs = unranked(&[
        &[5.0, 4.0, 3.0, 2.0],
        &[5.0, 4.5, 3.5, 2.5],
        &[6.0, 5.0, 4.0, 3.0],
    ]);
    let p = median(Direction::Minimize);
    let t = Duration::ZERO;
    // Step 20: references 4.0, 4.5, 5.0; median 4.5.
    assert_eq!(p.judge(&refs, 4.4, 20.0, t), None);
    let pruned = p.judge(&refs, 4.6, 20.0, t).unwrap();
    assert_eq!((pruned.threshold, pruned.runs), (4.5, 3));
    // Between steps, each reference gives its value at its last step <= s.
    assert!(p.judge(&refs, 4.6, 25.0, t).is_some());
    assert!(p.judge(&refs, 4.4, 25.0, t).is_none());
    // Warm-up: step 10 is before 20.
    assert_eq!(p.judge(&refs, 100.0, 10.0, t), None);
    // Fewer than min_runs references: nothing is pruned.
    assert_eq!(p.judge(&refs[..2], 100.0, 20.0, t), None);
    // Before any reference's first step: nothing to compare with.
    let late: Vec<Reference> = refs
        .iter()
        .map(|r| Reference {
            curve: r.curve.iter().map(|(s, v)| (s + 100.0, *v)).collect(),
            objective: None,
        })
        .collect();
    assert_eq!(p.judge(&late, 100.0, 20.0, t), None);
}

#[test]
fn direction_and_percentile_and_time_warmup() {
    let refs = unranked(&[
        &[1.0, 2.0],
        &[2.0, 3.0],
        &[3.0, 4.0],
        &[4.0, 5.0],
        &[5.0, 6.0],
    ]);
    // Maximize: at step 20 the values are 2..6; the median is 4; lower is worse.
    let p = median(Direction::Maximize);
    assert!(p.judge(&refs, 3.9, 20.0, Duration::ZERO).is_some());
    assert!(p.judge(&refs, 4.1, 20.0, Duration::ZERO).is_none());
    // percentile:25 keeps only the best quarter: maximize, the 75th percentile is 5.
    let q = Pruner {
        rule: PruneRule::Percentile(25.0),
        ..p
    };
    assert_eq!(
        q.judge(&refs, 4.9, 20.0, Duration::ZERO).unwrap().threshold,
        5.0
    );
    assert!(q.judge(&refs, 5.1, 20.0, Duration::ZERO).is_none());
    // Minimize, percentile:25 of 2..6 is 3.
    let m = Pruner {
        direction: Direction::Minimize,
        ..q
    };
    assert_eq!(
        m.judge(&refs, 3.5, 20.0, Duration::ZERO).unwrap().threshold,
        3.0
    );
    // A time warm-up counts the run's time, not its steps.
    let timed = Pruner {
        warmup: Warmup::Time(Duration::from_secs(60)),
        ..m
    };
    assert!(timed
        .judge(&refs, 9.0, 20.0, Duration::from_secs(59))
        .is_none());
    assert!(timed
        .judge(&refs, 9.0, 20.0, Duration::from_secs(60))
        .is_some());
}

#[test]
fn top_prunes_a_run_behind_the_best_runs_where_the_median_would_not() {
    // Minimize. Step 20: the three best runs (objectives 1.0, 1.1, 1.2) are at 2.0, 2.1,
    // 2.2; the others at 3.0..4.0 (the median 2.6), and no run was ever ahead of one it
    // ended worse than.
    let refs = ranked(&[
        (&[4.0, 2.0], 1.0),
        (&[4.0, 2.1], 1.1),
        (&[4.0, 2.2], 1.2),
        (&[4.0, 3.0], 2.0),
        (&[4.0, 3.5], 2.5),
        (&[4.0, 4.0], 3.0),
    ]);
    let t = Duration::ZERO;
    let p = top(3, Direction::Minimize);
    let pruned = p.judge(&refs, 2.3, 20.0, t).unwrap();
    assert_eq!((pruned.threshold, pruned.runs), (2.2, 6));
    assert_eq!(p.judge(&refs, 2.2, 20.0, t), None, "a tie is not worse");
    assert!(median(Direction::Minimize)
        .judge(&refs, 2.3, 20.0, t)
        .is_none());
    // top:1 compares with the incumbent alone; K beyond the references, with the worst
    // of them all.
    for (k, value, threshold) in [(1, 2.05, 2.0), (9, 4.1, 4.0)] {
        let pruned = top(k, Direction::Minimize).judge(&refs, value, 20.0, t);
        assert_eq!(pruned.map(|p| p.threshold), Some(threshold), "top:{k}");
    }
    // Warm-up and min runs as for the median.
    assert_eq!(p.judge(&refs, 9.0, 10.0, t), None);
    let few = Pruner { min_runs: 7, ..p };
    assert_eq!(few.judge(&refs, 9.0, 20.0, t), None);
    // No reference at all, or none with an objective: nothing to compare with.
    assert_eq!(Pruner { min_runs: 1, ..p }.judge(&[], 9.0, 20.0, t), None);
    let unranked = unranked(&[&[4.0, 2.0], &[4.0, 2.1], &[4.0, 2.2]]);
    assert_eq!(p.judge(&unranked, 9.0, 20.0, t), None);
}

#[test]
fn top_learns_its_margin_from_best_runs_that_were_behind() {
    // Minimize. At step 20 the best run (objective 1.0) was at 2.5, behind by 0.4 a run
    // that ended worse (2.1, objective 1.5): the threshold is 2.5 + 0.4. At step 10 it
    // was ahead of every other run, so no margin there.
    let refs = ranked(&[(&[3.0, 2.5], 1.0), (&[3.5, 2.1], 1.5), (&[4.0, 3.0], 2.0)]);
    let t = Duration::ZERO;
    let p = Pruner {
        warmup: Warmup::Steps(0.0),
        ..top(1, Direction::Minimize)
    };
    let at20 = p.judge(&refs, 3.0, 20.0, t).unwrap().threshold;
    assert!((at20 - 2.9).abs() < 1e-12, "{at20}");
    assert_eq!(p.judge(&refs, 2.85, 20.0, t), None, "within the margin");
    assert_eq!(p.judge(&refs, 3.1, 10.0, t).unwrap().threshold, 3.0);
    // Maximize, the same curves negated: the margin goes the other way.
    let neg: Vec<Reference> = refs
        .iter()
        .map(|r| Reference {
            curve: r.curve.iter().map(|(s, v)| (*s, -v)).collect(),
            objective: r.objective.map(|o| -o),
        })
        .collect();
    let q = Pruner {
        direction: Direction::Maximize,
        ..p
    };
    let at20 = q.judge(&neg, -3.0, 20.0, t).unwrap().threshold;
    assert!((at20 + 2.9).abs() < 1e-12, "{at20}");
    assert_eq!(q.judge(&neg, -2.85, 20.0, t), None);
    // Maximize without a margin: lower than the best runs' worst is pruned.
    let maxi = ranked(&[(&[1.0, 5.0], 9.0), (&[1.0, 4.0], 8.0), (&[1.0, 3.0], 7.0)]);
    let q2 = top(2, Direction::Maximize);
    assert_eq!(q2.judge(&maxi, 3.9, 20.0, t).unwrap().threshold, 4.0);
    assert_eq!(q2.judge(&maxi, 4.1, 20.0, t), None);
}
#[test]
fn top_counts_only_the_references_it_can_rank() {
    // Two ranked runs and two curves without an objective, far ahead at step 20: the
    // latter neither set the bar nor count towards `min_runs`.
    let mut refs = ranked(&[(&[4.0, 2.0], 1.0), (&[4.0, 2.2], 1.2)]);
    refs.extend(unranked(&[&[4.0, 0.5], &[4.0, 0.5]]));
    let t = Duration::ZERO;
    let p = top(3, Direction::Minimize);
    assert_eq!(p.judge(&refs, 9.0, 20.0, t), None, "2 ranked of min_runs 3");
    let two = Pruner { min_runs: 2, ..p };
    let pruned = two.judge(&refs, 2.3, 20.0, t).unwrap();
    assert_eq!((pruned.threshold, pruned.runs), (2.2, 2));
    assert_eq!(two.judge(&refs, 2.1, 20.0, t), None);
}

#[test]
fn halving_raises_its_percentile_at_each_multiple_of_the_warm_up() {
    // Five flat curves at 1..5 over steps 10..60: the 75th percentile is 4, the median
    // 3, the 25th 2.
    let refs = unranked(&[&[1.0; 6], &[2.0; 6], &[3.0; 6], &[4.0; 6], &[5.0; 6]]);
    let t = Duration::ZERO;
    let p = Pruner {
        rule: PruneRule::Halving,
        warmup: Warmup::Steps(10.0),
        ..median(Direction::Minimize)
    };
    assert_eq!(p.judge(&refs, 9.0, 9.0, t), None, "in the warm-up");
    // From the warm-up: only the worst quarter.
    assert_eq!(p.judge(&refs, 3.9, 10.0, t), None);
    let at10 = p.judge(&refs, 4.1, 19.0, t).unwrap();
    assert_eq!(
        (at10.threshold, at10.rule),
        (4.0, PruneRule::Percentile(75.0))
    );
    // From twice the warm-up: the worst half.
    assert_eq!(p.judge(&refs, 2.9, 20.0, t), None);
    let at20 = p.judge(&refs, 3.1, 29.0, t).unwrap();
    assert_eq!(
        (at20.threshold, at20.rule),
        (3.0, PruneRule::Percentile(50.0))
    );
    // From three times on: all but the best quarter, and no tighter after.
    for step in [30.0, 60.0] {
        let at = p.judge(&refs, 2.1, step, t).unwrap();
        assert_eq!((at.threshold, at.rule), (2.0, PruneRule::Percentile(25.0)));
        assert_eq!(p.judge(&refs, 1.9, step, t), None);
    }
    // Maximize: the bar rises from the other end (the 25th best percentile of 1..5 is 4).
    let q = Pruner {
        direction: Direction::Maximize,
        ..p
    };
    assert_eq!(q.judge(&refs, 2.1, 10.0, t), None);
    assert_eq!(q.judge(&refs, 3.9, 30.0, t).unwrap().threshold, 4.0);
    // A time warm-up counts the run's time: 130 s is two 60 s warm-ups, the median.
    let timed = Pruner {
        warmup: Warmup::Time(Duration::from_secs(60)),
        ..p
    };
    assert_eq!(timed.judge(&refs, 9.0, 50.0, Duration::from_secs(59)), None);
    let at = timed
        .judge(&refs, 3.1, 50.0, Duration::from_secs(130))
        .unwrap();
    assert_eq!(at.rule, PruneRule::Percentile(50.0));
    // Other rules apply as configured at every step.
    assert_eq!(
        median(Direction::Minimize).rule_at(60.0, t),
        PruneRule::Percentile(50.0)
    );
}

#[test]
fn references_that_ended_before_the_step_do_not_count() {
    // Two curves to step 60 and three that ended at step 20, far lower there.
    let long: [&[f64]; 2] = [
        &[5.0, 4.0, 3.0, 2.5, 2.2, 2.0],
        &[5.0, 4.5, 3.5, 3.0, 2.8, 2.6],
    ];
    let short: &[f64] = &[1.0, 0.5];
    let refs = unranked(&[long[0], long[1], short, short, short]);
    let t = Duration::ZERO;
    let p = median(Direction::Minimize);
    // At step 20 (the short curves' last) all five count: the median is 0.5.
    let at20 = p.judge(&refs, 3.0, 20.0, t).unwrap();
    assert_eq!((at20.threshold, at20.runs), (0.5, 5));
    // At step 30 only the two long curves reach: fewer than min_runs, nothing is pruned.
    assert_eq!(p.judge(&refs, 100.0, 30.0, t), None);
    // With min_runs 2 the median is of 3.0 and 3.5, not of the short ones' final 0.5.
    let two = Pruner { min_runs: 2, ..p };
    assert_eq!(two.judge(&refs, 3.2, 30.0, t), None);
    let at30 = two.judge(&refs, 3.3, 30.0, t).unwrap();
    assert_eq!((at30.threshold, at30.runs), (3.25, 2));
    // top:1 ranks only the curves that reach the step: the short ones (the best
    // objectives) are left out at step 30, and the best long one (3.0 there) is the bar.
    let mut ranked = ranked(&[(long[0], 2.0), (long[1], 2.6)]);
    ranked.extend((0..3).map(|_| Reference {
        curve: curve(short),
        objective: Some(0.1),
    }));
    let top1 = Pruner {
        min_runs: 2,
        ..top(1, Direction::Minimize)
    };
    let at30 = top1.judge(&ranked, 3.1, 30.0, t).unwrap();
    assert_eq!((at30.threshold, at30.runs), (3.0, 2));
    assert_eq!(top1.judge(&ranked, 2.9, 30.0, t), None);
    assert_eq!(top1.judge(&ranked, 0.6, 20.0, t).unwrap().threshold, 0.5);
}

#[test]
fn no_run_is_pruned_in_the_last_tenth_of_the_references_length() {
    // Two references end at step 100, one at 50 (points every 10 steps).
    let refs = unranked(&[&[1.0; 10], &[1.0; 10], &[1.0; 5]]);
    assert!(!near_the_end(&refs, 40.0), "the median end is 100");
    assert!(!near_the_end(&refs, 89.0));
    assert!(near_the_end(&refs, 90.0));
    assert!(
        near_the_end(&refs, 100.0),
        "the step the finished runs ended at"
    );
    // Past 50 only the long runs reach: their end decides.
    assert!(!near_the_end(&refs, 60.0));
    // Beyond every reference's end there is nothing to compare with (and nothing to judge).
    assert!(!near_the_end(&refs, 120.0));
    assert!(!near_the_end(&[], 10.0));
}
