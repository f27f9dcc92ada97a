//! The dashboard's reads of the store: pages of experiments sorted and filtered, and the
//! run's change mark that tells a page to draw again.

use super::*;

pub(super) fn pages_sort_filter_and_change_marks(b: &Backend) {
    let s = b.open();
    let run = new_run(&s, "t");
    let mark0 = s.run_change_mark(run.id).unwrap().unwrap();
    for n in 0..30u64 {
        let status = match n {
            0 => Status::Baseline,
            n if n % 10 == 3 => Status::Crash,
            n if n % 5 == 0 => Status::Keep,
            _ => Status::Discard,
        };
        let e = ExperimentRecord {
            n,
            parent_commit: "abc".into(),
            status: Some(status),
            objective: (status != Status::Crash).then_some(100.0 - (n as f64 * 7.0) % 13.0),
            started_at: n as f64,
            ..Default::default()
        };
        s.put_experiment(run.id, &e).unwrap();
    }
    let ro = b.read_only();
    let mark1 = ro.run_change_mark(run.id).unwrap().unwrap();
    assert_ne!(mark0, mark1);
    assert_eq!(mark1.experiments, 30);
    assert_eq!(mark1.last_write, 29.0);
    assert!(ro.run_change_mark(run.id + 1000).unwrap().is_none());
    let q = ExperimentQuery {
        status: Some(Status::Crash),
        limit: 2,
        offset: 1,
        ..Default::default()
    };
    let (page, total) = ro.experiments_page(run.id, &q).unwrap();
    assert_eq!(total, 3);
    assert_eq!(page.iter().map(|e| e.n).collect::<Vec<_>>(), vec![13, 23]);
    let q = ExperimentQuery {
        sort: SortKey::Objective,
        descending: true,
        limit: 100,
        ..Default::default()
    };
    let (page, total) = ro.experiments_page(run.id, &q).unwrap();
    assert_eq!((page.len(), total), (30, 30));
    let values: Vec<f64> = page.iter().filter_map(|e| e.objective).collect();
    assert!(values.windows(2).all(|w| w[0] >= w[1]), "{values:?}");
    assert!(
        page[27..].iter().all(|e| e.objective.is_none()),
        "missing values last"
    );
    let q = ExperimentQuery {
        limit: 5,
        offset: 10,
        descending: true,
        ..Default::default()
    };
    let (page, _) = ro.experiments_page(run.id, &q).unwrap();
    assert_eq!(
        page.iter().map(|e| e.n).collect::<Vec<_>>(),
        vec![19, 18, 17, 16, 15]
    );
    assert!(ro.put_experiment(run.id, &page[0]).is_err(), "read only");
    assert!(ro
        .append_event(run.id, None, "x", &serde_json::json!({}))
        .is_err());
    let outlines = ro.experiment_outlines(run.id).unwrap();
    assert_eq!(outlines.len(), 30);
    assert_eq!(outlines[3].status, Some(Status::Crash));
    // A live curve changes the mark while nothing else does; finished curves do not count.
    assert_eq!(mark1.live_points, 0);
    s.put_curve_point(run.id, 29, 1.0, 2.0).unwrap();
    assert_eq!(ro.run_change_mark(run.id).unwrap().unwrap(), mark1);
    let running = ExperimentRecord {
        n: 30,
        parent_commit: "abc".into(),
        status: Some(Status::Running),
        started_at: 30.0,
        ..Default::default()
    };
    s.put_experiment(run.id, &running).unwrap();
    let mark2 = ro.run_change_mark(run.id).unwrap().unwrap();
    s.put_curve_point(run.id, 30, 1.0, 3.0).unwrap();
    let mark3 = ro.run_change_mark(run.id).unwrap().unwrap();
    assert_eq!((mark2.live_points, mark3.live_points), (0, 1));
    assert_eq!(
        RunChangeMark {
            live_points: 0,
            ..mark3
        },
        mark2
    );
}
