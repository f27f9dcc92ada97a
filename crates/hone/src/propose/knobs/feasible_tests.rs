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
fn a_crash_beyond_two_knobs_counts_for_the_one_a_crash_lies_beyond_alone() {
    let fine = seven_finished();
    let f: Vec<&Config> = fine.iter().collect();
    // Three crashes caused by a momentum too high whose LRs (drawn with it, as a point of
    // the initial design draws every knob) lie below every finished LR, and one that moved
    // the momentum alone: that one blames MOMENTUM, which then counts all four; nothing
    // blames LR alone, so it is not narrowed (it used to be, "after 3 crashes below 0.001",
    // beside MOMENTUM).
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
    // Where nothing blames either knob alone, each counts the crashes: three crashes beyond
    // both, nothing else.
    let tie = [cfg(0.97, 0.0005), cfg(0.99, 0.0004), cfg(0.96, 0.0002)];
    let t: Vec<&Config> = tie.iter().collect();
    let n = narrowings(&f, &t);
    let knobs: Vec<&str> = n.iter().map(|x| x.knob.as_str()).collect();
    assert_eq!(knobs, ["LR", "MOMENTUM"], "{n:?}");
    // The history says the same, entry by entry: after a crash that blames one knob (the
    // fourth takes the first three from LR) and a finished value that passes some.
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

/// A knob's value in [`rich_history`]: now and then text, an integer or -0; on a coarse grid
/// (repeated values) when `grid`.
fn rich_value(draw: &mut dyn FnMut() -> f64, grid: bool, x: f64) -> KnobValue {
    let r = draw();
    if r < 0.03 {
        return KnobValue::Str("auto".to_string());
    }
    let x = if grid {
        (x * 10.0).round() / 10.0
    } else {
        (x * 1000.0).round() / 1000.0
    };
    if x == 0.0 && draw() < 0.5 {
        KnobValue::Float(-0.0)
    } else if r < 0.06 && x.fract() == 0.0 {
        KnobValue::Int(x as i64)
    } else {
        KnobValue::Float(x)
    }
}

/// A seeded random history over four knobs that crashes above A = 0.85, below B = 0.1, in the
/// corner where C and D are both above 0.9, and by chance; with points drawn at the box's
/// corners now and then (they move every knob past its finished values), up to seven crashes
/// before anything finished, knobs missing now and then, a knob E that appears halfway, and
/// entries still running.
fn rich_history(seed: u64, len: usize) -> Vec<(Config, Option<bool>)> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut draw = move || crate::util::unit_f64(crate::util::splitmix64(&mut state));
    let grid = draw() < 0.5;
    let early = (draw() * 8.0) as usize;
    let late = (draw() * len as f64) as usize;
    let corners = draw() * 0.3;
    (0..len)
        .map(|t| {
            let corner = draw() < corners;
            let mut config = Config::new();
            let mut kept = [f64::NAN; 4];
            for (k, name) in ["A", "B", "C", "D"].iter().enumerate() {
                let x = if corner {
                    f64::from(u8::from(draw() < 0.5))
                } else {
                    draw()
                };
                if draw() < 0.08 {
                    continue;
                }
                let v = rich_value(&mut draw, grid, x);
                kept[k] = v.as_f64().unwrap_or(f64::NAN);
                config.insert(name, v);
            }
            if t >= late {
                config.insert("E", KnobValue::Float((draw() * 100.0).round() / 100.0));
            }
            let [a, b, c, d] = kept;
            let state = if draw() < 0.05 {
                None
            } else {
                Some(t < early || a > 0.85 || b < 0.1 || (c > 0.9 && d > 0.9) || draw() < 0.07)
            };
            (config, state)
        })
        .collect()
}

#[test]
fn the_incremental_history_agrees_at_every_entry_of_richer_histories() {
    let mut multi = 0;
    for seed in 0..150 {
        let h = rich_history(seed, 150);
        let mut inc = NarrowingHistory::default();
        let mut replayed: BTreeMap<(String, Side), Narrowing> = BTreeMap::new();
        let (mut fine, mut bad) = (Vec::new(), Vec::new());
        for (i, (c, state)) in h.iter().enumerate() {
            for change in inc.push_changes(c, *state) {
                let key = (change.knob.clone(), change.side);
                match change.now {
                    Some(n) => replayed.insert(key, n),
                    None => replayed.remove(&key),
                };
            }
            match state {
                Some(true) => bad.push(c),
                Some(false) => fine.push(c),
                None => {}
            }
            let want = narrowings(&fine, &bad);
            assert_eq!(inc.current(), want, "seed {seed}, entry {i}");
            let mut sorted = want.clone();
            sorted.sort_by(|x, y| (&x.knob, x.side).cmp(&(&y.knob, y.side)));
            let got: Vec<Narrowing> = replayed.values().cloned().collect();
            assert_eq!(got, sorted, "seed {seed}, entry {i}: the changes replayed");
            multi += usize::from(!inc.groups.is_empty());
        }
    }
    // Crashes beyond several knobs were there to be counted at most entries.
    assert!(multi > 10_000, "{multi}");
}

#[test]
fn a_second_cause_does_not_take_the_first_ones_crashes() {
    // MOMENTUM in [0.1, 0.9] and LR in [0.001, 0.4] finished; five crashes of a momentum above
    // 0.95, two of them with an LR above 0.4 by chance; eight crashes of an LR above 0.5.
    let fine: Vec<Config> = (0..20)
        .map(|k| {
            let lr = 0.001 + 0.399 * f64::from((k * 7) % 20) / 19.0;
            cfg(0.1 + 0.8 * f64::from(k) / 19.0, lr)
        })
        .collect();
    let mut bad = vec![
        cfg(0.97, 0.45),
        cfg(0.98, 0.42),
        cfg(0.96, 0.01),
        cfg(0.99, 0.02),
        cfg(0.97, 0.03),
    ];
    bad.extend((0..8).map(|k| cfg(0.2 + 0.05 * f64::from(k), 0.6 + 0.04 * f64::from(k))));
    let f: Vec<&Config> = fine.iter().collect();
    let b: Vec<&Config> = bad.iter().collect();
    assert_eq!(crashes_needed(b.len(), b.len() + f.len()), 4);
    let n = narrowings(&f, &b);
    let said: Vec<(&str, Side, usize)> = n
        .iter()
        .map(|x| (x.knob.as_str(), x.side, x.crashes))
        .collect();
    assert_eq!(
        said,
        [("LR", Side::Above, 10), ("MOMENTUM", Side::Above, 5)],
        "{n:?}"
    );
}

#[test]
fn a_knob_nothing_finished_with_takes_no_crash() {
    let fine = seven_finished();
    let f: Vec<&Config> = fine.iter().collect();
    let mut bad: Vec<Config> = [0.97, 0.99, 0.96, 0.98, 0.5]
        .iter()
        .map(|&m| cfg(m, 0.003))
        .collect();
    let b: Vec<&Config> = bad.iter().collect();
    let without = narrowings(&f, &b);
    assert_eq!(without.len(), 1, "{without:?}");
    // X only in the crashed configurations (a knob added since, or text in every finished
    // one): it cannot narrow, and it takes nothing from MOMENTUM.
    for c in &mut bad {
        c.insert("X", KnobValue::Int(4));
    }
    let b: Vec<&Config> = bad.iter().collect();
    assert_eq!(narrowings(&f, &b), without);
    let h: Vec<(Config, Option<bool>)> = fine
        .iter()
        .map(|c| (c.clone(), Some(false)))
        .chain(bad.iter().map(|c| (c.clone(), Some(true))))
        .collect();
    assert_eq!(narrowing_history(&h), history_by_prefixes(&h));
}
