//! The knobs proposer's kept view against the whole history converted on every proposal,
//! its bounds, and the sampler's index following it.
use super::super::{infeasible_configs, observations, stand_ins};
use super::*;
use crate::propose::knobs::{self, KnobValue, SamplerCache, SamplerGuide};

/// How the engine's serial loop leaves old records after a proposal: all but the
/// baseline, the keeps and the last `window` dropped, or (as for a record with repeated
/// runs; here every third) only their configuration.
fn forget(history: &mut Vec<ExperimentRecord>, window: usize) {
    let end = history.len().saturating_sub(window);
    let mut i = 0;
    history.retain_mut(|e| {
        i += 1;
        if i > end
            || matches!(
                e.status(),
                Status::Baseline | Status::Keep | Status::Running
            )
        {
            return true;
        }
        e.config = None;
        e.n % 3 == 0
    });
}

fn seen(o: &[Observation]) -> Vec<(String, Option<u64>)> {
    o.iter()
        .map(|o| (format!("{:?}", o.config), o.objective.map(f64::to_bits)))
        .collect()
}

fn status_of(k: u64) -> Status {
    match k % 13 {
        0 => Status::Keep,
        1 | 7 => Status::Crash,
        2 => Status::Pruned,
        3 => Status::Timeout,
        4 => Status::Aborted,
        5 => Status::Rejected,
        6 => Status::Violation,
        _ => Status::Discard,
    }
}

fn record(n: u64) -> ExperimentRecord {
    let status = if n == 0 {
        Status::Baseline
    } else {
        status_of(n)
    };
    let measured = measured(status) || n % 29 == 0;
    ExperimentRecord {
        n,
        status: Some(status),
        // Values that move the worst both ways, a NaN among them.
        objective: measured.then(|| match n {
            77 => f64::NAN,
            n => ((n * 37) % 101) as f64 / (1.0 + (n % 7) as f64),
        }),
        // An agent's experiment has no configuration.
        config: (n % 31 != 30).then(|| serde_json::json!({ "A": n, "B": n % 5 })),
        ..Default::default()
    }
}

#[test]
fn the_kept_view_is_the_conversion_of_the_whole_history() {
    for minimize in [true, false] {
        let mut whole: Vec<ExperimentRecord> = Vec::new();
        let mut shown: Vec<ExperimentRecord> = Vec::new();
        let mut observed = Observed::new();
        for n in 0..600u64 {
            if n % 50 == 49 {
                // The last experiment converted is replaced by a re-test of it (another
                // value), once before the next one is added and once with it.
                let (last, shown_last) = (whole.len() - 1, shown.len() - 1);
                whole[last].objective = Some(1000.0 + n as f64);
                shown[shown_last].objective = whole[last].objective;
                if n % 100 == 49 {
                    observed.sync(&shown, minimize);
                    let want = observations(&whole, minimize);
                    assert_eq!(seen(observed.observations()), seen(&want), "#{last}");
                }
            }
            let rec = record(n);
            whole.push(rec.clone());
            shown.push(rec);
            if n == 300 {
                // A resume: a new proposer, the history loaded with its configurations.
                observed = Observed::new();
                shown = whole.clone();
            }
            observed.sync(&shown, minimize);
            assert_eq!(
                seen(observed.observations()),
                seen(&observations(&whole, minimize)),
                "after #{n}"
            );
            assert_eq!(observed.infeasible(), infeasible_configs(&whole).as_slice());
            assert_eq!(observed.stand_ins(), stand_ins(&whole).as_slice());
            assert_eq!(observed.through(), Some(n));
            forget(&mut shown, 16);
        }
        // Most of the history is no longer shown, and most of what is holds no
        // configuration any more.
        assert!(shown.len() < 300, "{}", shown.len());
        assert!(shown.iter().filter(|e| e.config.is_none()).count() > 100);
    }
}

#[test]
fn running_experiments_count_at_the_worst_until_they_finish() {
    // A parallel run's view: the last ones still running, then finished in place.
    let mut history: Vec<ExperimentRecord> = (0..40).map(record).collect();
    let mut observed = Observed::new();
    for e in &mut history[30..] {
        e.status = Some(Status::Running);
        e.objective = None;
    }
    observed.sync(&history, true);
    assert_eq!(
        seen(observed.observations()),
        seen(&observations(&history, true))
    );
    for i in 30..40 {
        history[i] = record(i as u64);
        history.push(record(40 + i as u64 - 30));
        observed.sync(&history, true);
        assert_eq!(
            seen(observed.observations()),
            seen(&observations(&history, true))
        );
        assert_eq!(
            observed.infeasible(),
            infeasible_configs(&history).as_slice()
        );
        assert_eq!(observed.stand_ins(), stand_ins(&history).as_slice());
    }
    // A history that does not extend the converted one is converted anew.
    observed.sync(&history[..5], true);
    assert_eq!(
        seen(observed.observations()),
        seen(&observations(&history[..5], true))
    );
    assert_eq!(observed.len(), 5);
}

/// The observations of `o` as comparable text, in any order.
fn bag(o: &[Observation]) -> Vec<(String, Option<u64>)> {
    let mut all = seen(o);
    all.sort();
    all
}

#[test]
fn a_long_run_is_held_within_bounds_and_counts_what_it_dropped() {
    let bounds = Bounds {
        high: 64,
        low: 32,
        best: 8,
        recent: 8,
    };
    for minimize in [true, false] {
        let mut whole: Vec<ExperimentRecord> = Vec::new();
        let mut shown: Vec<ExperimentRecord> = Vec::new();
        let mut observed = Observed::with_bounds(bounds);
        let (mut compactions, mut anew) = (0, 0);
        for n in 0..700u64 {
            let mut rec = record(n);
            // Every 40th stays running for 20 experiments (a parallel run's view).
            if n % 40 == 39 {
                rec.status = Some(Status::Running);
                rec.objective = None;
            }
            if n >= 20 && (n - 20) % 40 == 39 {
                let was = record(n - 20);
                let i = whole.iter().position(|e| e.n == n - 20).expect("held");
                whole[i] = was.clone();
                if let Some(j) = shown.iter().position(|e| e.n == n - 20) {
                    shown[j] = was;
                }
            }
            whole.push(rec.clone());
            shown.push(rec);
            observed.sync(&shown, minimize);
            let moves = observed.take_moves();
            anew += usize::from(moves.anew);
            compactions += moves.kept.len();
            let got = observed.observations();
            let want = observations(&whole, minimize);
            assert!(got.len() <= bounds.high, "#{n}: {}", got.len());
            // The most recent ones, in order, at the end.
            let tail = |o: &[Observation]| seen(&o[o.len().saturating_sub(bounds.recent)..]);
            assert_eq!(tail(got), tail(&want), "#{n}");
            // The best ones (ranked as the model ranks them) are all held.
            let score = |o: &Observation| match o.objective {
                Some(v) if v.is_finite() => {
                    if minimize {
                        v
                    } else {
                        -v
                    }
                }
                _ => f64::INFINITY,
            };
            let mut ranked = want.clone();
            ranked.sort_by(|a, b| score(a).total_cmp(&score(b)));
            let got_bag = bag(got);
            for o in bag(&ranked[..bounds.best.min(ranked.len())]) {
                assert!(got_bag.contains(&o), "#{n}: {o:?} dropped");
            }
            // Every one held is one of the whole history's, at its value there (the
            // stand-ins at the worst of every measurement, dropped ones included).
            let want_bag = bag(&want);
            for o in &got_bag {
                assert!(want_bag.contains(o), "#{n}: {o:?} is not the history's");
            }
            // The running ones are held and are stand-ins.
            let running = whole
                .iter()
                .filter(|e| e.status() == Status::Running)
                .count();
            let lied: Vec<&Observation> = observed
                .stand_ins()
                .iter()
                .map(|&i| &got[i as usize])
                .collect();
            assert!(lied.len() >= running, "#{n}");
            let worst = (whole.iter().filter(|e| measured(e.status())))
                .filter_map(|e| e.objective.filter(|v| !v.is_nan()))
                .reduce(|a, b| worse(a, b, minimize));
            for o in lied {
                assert_eq!(o.objective.map(f64::to_bits), worst.map(f64::to_bits));
            }
            // Every infeasible configuration counts, dropped or not.
            let mut bad: Vec<String> = observed
                .infeasible()
                .iter()
                .map(|c| format!("{c:?}"))
                .collect();
            let mut want_bad: Vec<String> = (infeasible_configs(&whole).iter())
                .map(|c| format!("{c:?}"))
                .collect();
            bad.sort();
            want_bad.sort();
            assert_eq!(bad, want_bad, "#{n}");
            assert_eq!(observed.through(), Some(n));
            forget(&mut shown, 16);
        }
        assert!(compactions >= 10, "{compactions} compactions");
        assert_eq!(
            anew,
            usize::from(minimize),
            "converted anew once, at the start"
        );
    }
}

/// Two knobs (a float A, an integer B) and their configuration as written.
fn two_knobs() -> (Vec<knobs::Knob>, Config) {
    let text = "A = 0.5  # hone: 0.0..1.0\nB = 5  # hone: int 1..40\n";
    let found = knobs::discover("p.py", text).expect("the knobs parse");
    let incumbent = knobs::config_of(&found);
    (found, incumbent)
}

/// Bounds small enough that a test's few hundred experiments are compacted several times.
const SMALL: Bounds = Bounds {
    high: 48,
    low: 24,
    best: 6,
    recent: 6,
};

/// The sampler's index follows a compacted view (as the knobs proposer has it follow):
/// the answers of a fresh index over the same observations, and what was dropped still
/// counts as tried.
#[test]
fn the_sampler_follows_a_compacted_view() {
    let (found, incumbent) = two_knobs();
    let bounds = SMALL;
    let mut observed = Observed::with_bounds(bounds);
    let mut cache = SamplerCache::new();
    let mut history: Vec<ExperimentRecord> = Vec::new();
    let mut first_dropped: Option<Config> = None;
    let mut repeats = 0;
    for n in 0..160u64 {
        observed.sync(&history, true);
        let moves = observed.take_moves();
        let compacted = !moves.kept.is_empty();
        super::super::follow(&mut cache, moves);
        let obs = observed.observations();
        if first_dropped.is_none() && compacted {
            let held: Vec<String> = obs.iter().map(|o| format!("{:?}", o.config)).collect();
            first_dropped = (history.iter())
                .filter_map(|e| e.config.as_ref().and_then(config_from_json))
                .find(|c| !held.contains(&format!("{c:?}")));
            assert!(first_dropped.is_some(), "the compaction dropped nothing");
        }
        let guide = SamplerGuide::default();
        let mut fresh = SamplerCache::new();
        let want = knobs::suggest_cached(&mut fresh, &found, obs, &incumbent, true, 5, n, &guide);
        let got = knobs::suggest_cached(&mut cache, &found, obs, &incumbent, true, 5, n, &guide);
        // The same answer, unless a fresh index of the view proposes again what was
        // dropped from it; never a configuration tried before.
        let tried = |s: &Option<(Config, Option<usize>)>| {
            let c = s.as_ref().map(|(c, _)| serde_json::to_value(c).ok());
            history.iter().any(|e| Some(e.config.clone()) == c)
        };
        if tried(&want) {
            repeats += 1;
        } else {
            assert_eq!(got, want, "suggestion {n}");
        }
        assert!(!tried(&got), "#{n}: {got:?} was tried");
        assert_eq!(cache.len(), obs.len());
        if let Some(dropped) = &first_dropped {
            // Offered first as a candidate: a fresh index of the view takes it, the one
            // that followed the view knows it was tried.
            let candidates = [dropped.clone()];
            let guide = SamplerGuide {
                candidates: &candidates,
                ..SamplerGuide::default()
            };
            let mut fresh = SamplerCache::new();
            let taken = |s: Option<(Config, Option<usize>)>| s.and_then(|(_, from)| from);
            let fresh_pick =
                knobs::suggest_cached(&mut fresh, &found, obs, &incumbent, true, 5, n, &guide);
            assert_eq!(taken(fresh_pick), Some(0));
            let mut followed = cache.clone();
            let pick =
                knobs::suggest_cached(&mut followed, &found, obs, &incumbent, true, 5, n, &guide);
            assert_eq!(
                taken(pick),
                None,
                "#{n}: a dropped configuration proposed again"
            );
        }
        let Some((c, _)) = got else { break };
        let y = (a_of(&c) - 0.3).powi(2);
        history.push(ExperimentRecord {
            n,
            status: Some(if n == 0 {
                Status::Baseline
            } else {
                Status::Discard
            }),
            objective: Some(y),
            config: serde_json::to_value(&c).ok(),
            ..Default::default()
        });
    }
    assert_eq!(history.len(), 160);
    assert!(first_dropped.is_some());
    // The view alone would have proposed some again.
    assert!(repeats > 0);
}

/// A resumed run's view is bounded while the history is read, before the sampler's index
/// has read any of it: what it dropped still counts as tried.
#[test]
fn a_view_bounded_before_its_first_suggestion_still_knows_what_was_tried() {
    let (found, incumbent) = two_knobs();
    let history: Vec<ExperimentRecord> = (0..120u64)
        .map(|n| {
            let mut c = incumbent.clone();
            c.insert("A", KnobValue::Float(n as f64 / 200.0));
            c.insert("B", KnobValue::Int(1 + (n % 40) as i64));
            ExperimentRecord {
                n,
                status: Some(if n == 0 {
                    Status::Baseline
                } else {
                    Status::Discard
                }),
                objective: Some(n as f64),
                config: serde_json::to_value(&c).ok(),
                ..Default::default()
            }
        })
        .collect();
    let bounds = SMALL;
    let mut observed = Observed::with_bounds(bounds);
    // Read page by page, as a resumed run is.
    for end in (10..=120).step_by(10) {
        observed.sync(&history[..end], true);
    }
    let mut cache = SamplerCache::new();
    super::super::follow(&mut cache, observed.take_moves());
    let obs = observed.observations();
    assert!(obs.len() <= bounds.high);
    let held: Vec<String> = obs.iter().map(|o| format!("{:?}", o.config)).collect();
    let dropped: Vec<Config> = (history.iter())
        .filter_map(|e| e.config.as_ref().and_then(config_from_json))
        .filter(|c| !held.contains(&format!("{c:?}")))
        .collect();
    assert!(dropped.len() > 60, "{}", dropped.len());
    let taken = |cache: &mut SamplerCache, c: &Config| {
        let candidates = [c.clone()];
        let guide = SamplerGuide {
            candidates: &candidates,
            ..SamplerGuide::default()
        };
        knobs::suggest_cached(cache, &found, obs, &incumbent, true, 5, 120, &guide)
            .and_then(|(_, from)| from)
    };
    for c in &dropped {
        assert_eq!(taken(&mut cache, c), None, "{c:?} proposed again");
        // An index that did not follow the view would take it.
        assert_eq!(taken(&mut SamplerCache::new(), c), Some(0));
    }
}

/// A view converted anew (the same run) after a compaction counts each infeasible
/// configuration once, those shown again and those still compacted away alike.
#[test]
fn a_view_converted_anew_counts_each_failure_once() {
    let bounds = Bounds {
        high: 40,
        low: 20,
        best: 4,
        recent: 4,
    };
    let bag = |c: &[Config]| {
        let mut all: Vec<String> = c.iter().map(|c| format!("{c:?}")).collect();
        all.sort();
        all
    };
    for minimize in [true, false] {
        let mut observed = Observed::with_bounds(bounds);
        // Every experiment shown with its configuration (a parallel run's view); the last
        // one (#185) an agent's, with none.
        let mut history: Vec<ExperimentRecord> = (0..186).map(record).collect();
        assert!(history[185].config.is_none());
        for end in 1..=history.len() {
            observed.sync(&history[..end], minimize);
        }
        assert!(observed.observations().len() <= bounds.high);
        let whole = bag(&infeasible_configs(&history));
        assert_eq!(bag(observed.infeasible()), whole);
        // It gets one (a crash): converted anew, every failure shown again.
        history[185].config = Some(serde_json::json!({ "A": 185, "B": 9 }));
        history[185].status = Some(Status::Crash);
        observed.sync(&history, minimize);
        assert!(observed.take_moves().anew);
        assert_eq!(
            bag(observed.infeasible()),
            bag(&infeasible_configs(&history))
        );
        // Old configurations no longer shown (the serial loop's view), one more without,
        // which then gets one: converted anew; what was compacted away still counts.
        let mut shown = history.clone();
        forget(&mut shown, 8);
        let mut late = record(186);
        late.config = None;
        shown.push(late.clone());
        history.push(late);
        observed.sync(&shown, minimize);
        for h in [&mut shown, &mut history] {
            if let Some(last) = h.last_mut() {
                last.config = Some(serde_json::json!({ "A": 186, "B": 1 }));
                last.status = Some(Status::Timeout);
            }
        }
        observed.sync(&shown, minimize);
        assert!(observed.take_moves().anew);
        assert_eq!(
            bag(observed.infeasible()),
            bag(&infeasible_configs(&history))
        );
    }
}

fn a_of(c: &Config) -> f64 {
    match c.get("A") {
        Some(KnobValue::Float(x)) => *x,
        other => panic!("A = {other:?}"),
    }
}

/// The knobs proposer's suggestions with the kept view (and the engine dropping old
/// configurations) are those of the whole history converted on every proposal: 400
/// experiments, crashes (A > 0.8) and prunes among them, a resume halfway.
#[test]
fn suggestions_are_those_of_the_whole_history() {
    let text =
        "A = 0.5  # hone: 0.0..1.0\nB = 5  # hone: int 1..40\nC = 0.1  # hone: log 0.001..1.0\n";
    let found = knobs::discover("p.py", text).expect("the knobs parse");
    let incumbent = knobs::config_of(&found);
    let record =
        |n: u64, config: &Config, status: Status, objective: Option<f64>| ExperimentRecord {
            n,
            status: Some(status),
            objective,
            config: serde_json::to_value(config).ok(),
            ..Default::default()
        };
    let mut whole = vec![record(0, &incumbent, Status::Baseline, Some(1.0))];
    let mut shown = whole.clone();
    let (mut observed, mut cache, mut fresh) =
        (Observed::new(), SamplerCache::new(), SamplerCache::new());
    let mut statuses = BTreeMap::new();
    for n in 1..400u64 {
        if n == 200 {
            (observed, cache) = (Observed::new(), SamplerCache::new());
            shown = whole.clone();
        }
        let (want_obs, want_bad) = (observations(&whole, true), infeasible_configs(&whole));
        let want_lied = stand_ins(&whole);
        let guide = |bad, lied| SamplerGuide {
            infeasible: bad,
            stand_ins: lied,
            ..SamplerGuide::default()
        };
        let want = knobs::suggest_cached(
            &mut fresh,
            &found,
            &want_obs,
            &incumbent,
            true,
            3,
            n,
            &guide(&want_bad, &want_lied),
        );
        observed.sync(&shown, true);
        let (obs, bad) = (observed.observations(), observed.infeasible());
        let guide = guide(bad, observed.stand_ins());
        let got = knobs::suggest_cached(&mut cache, &found, obs, &incumbent, true, 3, n, &guide);
        assert_eq!(got, want, "suggestion {n}");
        forget(&mut shown, 8);
        let Some((c, _)) = got else { break };
        let a = a_of(&c);
        let (status, y) = match a {
            a if a > 0.8 => (Status::Crash, None),
            a if a < 0.05 => (Status::Pruned, None),
            a => (Status::Discard, Some((a - 0.6).powi(2))),
        };
        *statuses.entry(format!("{status:?}")).or_insert(0) += 1;
        whole.push(record(n, &c, status, y));
        shown.push(record(n, &c, status, y));
    }
    assert_eq!(whole.len(), 400);
    // Crashes are among them (3 since crashes attributed to one knob mark it at once: the
    // wall at A = 0.8 is learned after fewer).
    assert!(
        statuses.get("Crash").copied().unwrap_or(0) >= 3,
        "{statuses:?}"
    );
}
