//! Tests of the narrowings crashes make (`super`): which crashes count for which knob, and
//! the history worked out one entry at a time against every prefix worked out whole.

use super::*;

fn cfg(m: f64, lr: f64) -> Config {
    [
        ("MOMENTUM".to_string(), KnobValue::Float(m)),
        ("LR".to_string(), KnobValue::Float(lr)),
    ]
    .into_iter()
    .collect()
}

/// Seven finished configurations: MOMENTUM from 0.2 to 0.9, LR from 0.001 to 0.1.
fn seven_finished() -> [Config; 7] {
    [
        cfg(0.5, 0.01),
        cfg(0.9, 0.1),
        cfg(0.2, 0.001),
        cfg(0.3, 0.002),
        cfg(0.4, 0.003),
        cfg(0.6, 0.004),
        cfg(0.7, 0.005),
    ]
}

#[test]
fn crashes_beyond_every_finished_value_narrow_that_knob_only() {
    // Three crashes in ten: three beyond the edge are unlikely by chance (0.3^3 < 0.05).
    let fine = seven_finished();
    let bad = [cfg(0.97, 0.05), cfg(0.99, 0.002), cfg(0.96, 0.3)];
    let f: Vec<&Config> = fine.iter().collect();
    let b: Vec<&Config> = bad.iter().collect();
    let n = narrowings(&f, &b);
    assert_eq!(n.len(), 1, "{n:?}");
    assert_eq!(n[0].knob, "MOMENTUM");
    assert_eq!(n[0].side, Side::Above);
    assert_eq!(
        (n[0].edge, n[0].nearest_crash, n[0].crashes),
        (0.9, 0.96, 3)
    );
    assert_eq!(
        n[0].describe(),
        "knob MOMENTUM: explored range narrowed to [0.2, 0.9] after 3 crashes above 0.9 \
         (nearest 0.96)"
    );
    // Two crashes are not evidence enough; three in six are (0.5^3 > 0.05).
    assert!(narrowings(&f, &b[..2]).is_empty());
    assert!(narrowings(&f[..3], &b).is_empty());
    assert_eq!(crashes_needed(3, 6), 5);
    assert_eq!(crashes_needed(0, 6), MIN_CRASHES);
    // A finished value beyond the crashes undoes it.
    let more = [cfg(0.5, 0.01), cfg(0.995, 0.01)];
    let f2: Vec<&Config> = more.iter().collect();
    assert!(narrowings(&f2, &b).is_empty());
}

#[test]
fn a_crash_beyond_two_knobs_counts_for_the_one_more_crashes_lie_beyond() {
    let fine = seven_finished();
    let f: Vec<&Config> = fine.iter().collect();
    // Three crashes caused by a momentum too high whose LRs (drawn with it, as a point of
    // the initial design draws every knob) lie below every finished LR, and one that moved
    // the momentum alone. MOMENTUM explains all four; LR is not narrowed (it used to be,
    // "after 3 crashes below 0.001", beside MOMENTUM).
    let bad = [
        cfg(0.97, 0.0005),
        cfg(0.99, 0.0004),
        cfg(0.96, 0.0002),
        cfg(0.98, 0.005),
    ];
    let b: Vec<&Config> = bad.iter().collect();
    let n = narrowings(&f, &b);
    assert_eq!(n.len(), 1, "{n:?}");
    assert_eq!(
        (
            n[0].knob.as_str(),
            n[0].side,
            n[0].crashes,
            n[0].nearest_crash
        ),
        ("MOMENTUM", Side::Above, 4, 0.96)
    );
    // On a tie each knob counts the crash: three crashes beyond both, nothing else.
    let tie = [cfg(0.97, 0.0005), cfg(0.99, 0.0004), cfg(0.96, 0.0002)];
    let t: Vec<&Config> = tie.iter().collect();
    let n = narrowings(&f, &t);
    let knobs: Vec<&str> = n.iter().map(|x| x.knob.as_str()).collect();
    assert_eq!(knobs, ["LR", "MOMENTUM"], "{n:?}");
    // The history says the same, entry by entry, and so after crashes that only move the
    // counts (the fourth crash takes the first three from LR) and a finished value that
    // passes some.
    let low = [cfg(0.5, 0.0003), cfg(0.95, 0.01)];
    let h: Vec<(Config, Option<bool>)> = fine
        .iter()
        .map(|c| (c.clone(), Some(false)))
        .chain(tie.iter().map(|c| (c.clone(), Some(true))))
        .chain([(bad[3].clone(), Some(true))])
        .chain(low.iter().map(|c| (c.clone(), Some(false))))
        .collect();
    let got = narrowing_history(&h);
    assert_eq!(got, history_by_prefixes(&h));
    assert!(got.iter().any(|(_, n)| n.knob == "LR"), "{got:?}");
    let mut log = NarrowingHistory::default();
    for (c, state) in &h {
        log.push(c, *state);
    }
    let now = log.current();
    assert_eq!(now.len(), 1, "{now:?}");
    assert_eq!(
        (now[0].knob.as_str(), now[0].crashes, now[0].edge),
        ("MOMENTUM", 4, 0.95)
    );
    assert_eq!(now, narrowings(&f_all(&h, false), &f_all(&h, true)));
}

/// The configurations of `h` that finished (`false`) or crashed (`true`).
fn f_all(h: &[(Config, Option<bool>)], crashed: bool) -> Vec<&Config> {
    h.iter()
        .filter(|(_, s)| *s == Some(crashed))
        .map(|(c, _)| c)
        .collect()
}

#[test]
fn the_history_says_at_which_entry_a_narrowing_appeared() {
    let mut h: Vec<(Config, Option<bool>)> = (1..=4)
        .map(|k| (cfg(0.1 * k as f64, 0.01), Some(false)))
        .collect();
    h.extend([
        (cfg(0.5, 0.01), Some(false)),
        (cfg(0.97, 0.05), Some(true)),
        (cfg(0.8, 0.02), Some(false)),
        (cfg(0.99, 0.001), Some(true)),
        (cfg(0.93, 0.05), None),
        (cfg(0.98, 0.015), Some(true)),
        (cfg(0.7, 0.02), Some(false)),
    ]);
    let got = narrowing_history(&h);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0, 9);
    assert_eq!(got[0].1.edge, 0.8);
    assert_eq!(got, history_by_prefixes(&h));
}

/// `narrowing_history` as it was written first: [`narrowings`] on every prefix.
fn history_by_prefixes(history: &[(Config, Option<bool>)]) -> Vec<(usize, Narrowing)> {
    let (mut finished, mut infeasible) = (Vec::new(), Vec::new());
    let mut current: Vec<Narrowing> = Vec::new();
    let mut out = Vec::new();
    for (i, (config, state)) in history.iter().enumerate() {
        match state {
            Some(true) => infeasible.push(config),
            Some(false) => finished.push(config),
            None => continue,
        }
        let now = narrowings(&finished, &infeasible);
        out.extend(
            now.iter()
                .filter(|n| !current.contains(n))
                .map(|n| (i, n.clone())),
        );
        current = now;
    }
    out
}

/// A seeded random history over five knobs (a float, an integer with repeated values, a
/// negative float, a string, one knob often missing) that crashes beyond A = 0.8, below
/// B = 2 and now and then by chance, with some entries still running.
fn random_history(seed: u64, len: usize) -> Vec<(Config, Option<bool>)> {
    let mut state = seed;
    let mut draw = || crate::util::unit_f64(crate::util::splitmix64(&mut state));
    (0..len)
        .map(|_| {
            let a = (draw() * 1000.0).round() / 1000.0;
            let b = (draw() * 12.0).floor() as i64;
            let c = -draw() * 5.0;
            let mut config: Config = [
                ("A".to_string(), KnobValue::Float(a)),
                ("B".to_string(), KnobValue::Int(b)),
                ("C".to_string(), KnobValue::Float(c)),
                ("D".to_string(), KnobValue::Str(format!("s{}", b % 3))),
            ]
            .into_iter()
            .collect();
            if draw() < 0.5 {
                config.insert("E", KnobValue::Float(draw()));
            }
            let state = if draw() < 0.05 {
                None
            } else {
                Some(a > 0.8 || b < 2 || draw() < 0.05)
            };
            (config, state)
        })
        .collect()
}

#[test]
fn the_incremental_history_is_the_narrowings_of_every_prefix() {
    let mut events = 0;
    for seed in 1..=6 {
        let h = random_history(seed, 300);
        let want = history_by_prefixes(&h);
        let got = narrowing_history(&h);
        assert_eq!(got, want, "seed {seed}");
        events += got.len();
        // Both sides of more than one knob narrow and move.
        let sides: std::collections::BTreeSet<(&str, bool)> = got
            .iter()
            .map(|(_, n)| (n.knob.as_str(), n.side == Side::Above))
            .collect();
        assert!(sides.contains(&("A", true)), "seed {seed}: {sides:?}");
        assert!(sides.contains(&("B", false)), "seed {seed}: {sides:?}");
    }
    assert!(events > 30, "{events}");
    // Crashes on every side of a knob, a finished value beyond the crashes, -0 and 0.
    let knob = |x: f64| -> Config { [("X".to_string(), KnobValue::Float(x))].into() };
    let mut h: Vec<(Config, Option<bool>)> =
        (1..=9).map(|k| (knob(f64::from(k)), Some(false))).collect();
    h.extend(
        [
            (-0.0, false),
            (-0.0, true),
            (12.0, true),
            (12.0, true),
            (-3.0, true),
            (11.0, true),
            (0.0, false),
            (-4.0, true),
            (-5.0, true),
            (15.0, true),
            (-6.0, true),
            (11.5, false),
            (13.0, true),
            (-2.0, false),
            (-7.0, true),
        ]
        .into_iter()
        .map(|(x, bad)| (knob(x), Some(bad))),
    );
    let want = history_by_prefixes(&h);
    assert!(want.len() >= 4, "{want:?}");
    assert_eq!(narrowing_history(&h), want);
}
