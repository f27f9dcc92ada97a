//! A response surface over the knobs: a quadratic model of the objective fitted to the best
//! measured configurations that share the incumbent's choices, in the unit cube of the numeric
//! knobs (log-scaled where the domain is), and the model's minimum inside a trust region around
//! the incumbent ([`step`]); and the incumbent with one choice changed ([`swap`]), since a
//! model only refines the incumbent's choices. The sampler's refinement step
//! (`sampler/refine.rs`) and the outer loop's `surrogate` mechanism both use them.
//!
//! The model is a full quadratic (with interactions) when there are few numeric knobs and
//! enough points, else a separable one (a parabola per knob), fitted by ridge-regularised
//! least squares over the knobs that varied among those points. Along a knob whose parabola
//! opens downwards or is flat the candidate keeps the incumbent's value; a step longer than
//! the trust region is shrunk as a whole (its direction stays the model's).

// Small dense linear algebra (normal equations, elimination, Cholesky) reads best with indices.
#![allow(clippy::needless_range_loop)]

use super::{config_at, dimensions, unit_coords, Config, Domain, Knob, KnobValue};

/// A trust region's starting radius, in unit-range fractions.
pub const RADIUS: f64 = 0.2;
/// The smallest and the largest trust region.
pub const MIN_RADIUS: f64 = 0.01;
pub const MAX_RADIUS: f64 = 0.5;
/// One offer in this many is a [`swap`] of a choice rather than the model's step.
pub const SWAP_EVERY: u64 = 3;
/// Numeric knobs up to which a full quadratic is fitted.
const FULL_UP_TO: usize = 6;

/// The candidate a quadratic model fitted to `measured` (configuration, objective; minimised)
/// puts lowest inside the box of half-width `radius` around `incumbent`; `None` when there
/// are no numeric knobs or too few points to fit.
pub fn step(
    knobs: &[Knob],
    measured: &[(Config, f64)],
    incumbent: &Config,
    radius: f64,
) -> Option<Config> {
    let names = dimensions(knobs);
    let at = unit_coords(knobs, incumbent);
    let (numeric, mut points) = fit_points(knobs, measured, incumbent, &names, &at)?;
    let d = numeric.len();
    let full = d <= FULL_UP_TO;
    let params_full = 1 + d + d * (d + 1) / 2;
    let params_sep = 1 + 2 * d;
    let full = full && points.len() >= params_full + 3;
    let params = if full { params_full } else { params_sep };
    if points.len() < params + 2 {
        return None;
    }
    let x0: Vec<f64> = numeric.iter().map(|&i| at[i].unwrap_or(0.5)).collect();
    // The best points carry the local shape: keep three times as many as there are parameters.
    points.sort_by(|a, b| a.1.total_cmp(&b.1));
    points.truncate((3 * params).max(params + 2));
    let features = |x: &[f64]| -> Vec<f64> {
        let z: Vec<f64> = x.iter().zip(&x0).map(|(a, b)| a - b).collect();
        let mut f = Vec::with_capacity(params);
        f.push(1.0);
        f.extend(&z);
        if full {
            for i in 0..d {
                for j in i..d {
                    f.push(z[i] * z[j]);
                }
            }
        } else {
            f.extend(z.iter().map(|v| v * v));
        }
        f
    };
    // Scale the objective so that the ridge term means the same on every problem.
    let ys: Vec<f64> = points.iter().map(|p| p.1).collect();
    let lo = ys.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ys.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let span = if hi > lo { hi - lo } else { 1.0 };
    let rows: Vec<(Vec<f64>, f64)> = points
        .iter()
        .map(|(x, y)| (features(x), (y - lo) / span))
        .collect();
    let beta = least_squares(&rows, params, 1e-6)?;
    let z = model_minimum(&beta, d, full, radius);
    Some(step_config(
        knobs, incumbent, &names, &at, &numeric, z, radius,
    ))
}

/// A measured point: its numeric unit coordinates and its objective.
type Point = (Vec<f64>, f64);

/// The measured points that share the incumbent's choices, as unit coordinates of the numeric
/// knobs that moved among them (`numeric`: their dimensions), with their objective; `None`
/// when no numeric knob is left.
fn fit_points(
    knobs: &[Knob],
    measured: &[(Config, f64)],
    incumbent: &Config,
    names: &[String],
    at: &[Option<f64>],
) -> Option<(Vec<usize>, Vec<Point>)> {
    let numeric: Vec<usize> = (0..names.len()).filter(|&i| at[i].is_some()).collect();
    let d = numeric.len();
    if d == 0 {
        return None;
    }
    // The points that share the incumbent's choices, as numeric unit coordinates.
    let same_choices = |c: &Config| {
        names
            .iter()
            .enumerate()
            .all(|(i, name)| at[i].is_some() || c.get(name) == incumbent.get(name))
    };
    let mut points: Vec<(Vec<f64>, f64)> = measured
        .iter()
        .filter(|(c, y)| y.is_finite() && same_choices(c))
        .filter_map(|(c, y)| {
            let u = unit_coords(knobs, c);
            let x: Option<Vec<f64>> = numeric.iter().map(|&i| u[i]).collect();
            Some((x?, *y))
        })
        .collect();
    // A knob that never moved among these points says nothing about the objective (and would
    // make the fit singular): it keeps the incumbent's value.
    let varies: Vec<usize> = (0..d)
        .filter(|&k| {
            let (lo, hi) = points
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), p| {
                    (l.min(p.0[k]), h.max(p.0[k]))
                });
            hi - lo > 1e-12
        })
        .collect();
    if varies.len() < d {
        for p in points.iter_mut() {
            p.0 = varies.iter().map(|&k| p.0[k]).collect();
        }
    }
    let numeric: Vec<usize> = varies.iter().map(|&k| numeric[k]).collect();
    let d = numeric.len();
    if d == 0 {
        return None;
    }
    Some((numeric, points))
}

/// The model's minimum in the shifted coordinates z = x - x0 (`beta`: its coefficients, `d`
/// numeric dimensions, `full`: with cross terms), before the trust region's box.
fn model_minimum(beta: &[f64], d: usize, full: bool, radius: f64) -> Vec<f64> {
    let b = &beta[1..=d];
    let mut z = vec![0.0; d];
    if full {
        let mut h = vec![vec![0.0; d]; d];
        let mut k = 1 + d;
        for i in 0..d {
            for j in i..d {
                if i == j {
                    h[i][i] = 2.0 * beta[k];
                } else {
                    h[i][j] = beta[k];
                    h[j][i] = beta[k];
                }
                k += 1;
            }
        }
        let neg_b: Vec<f64> = b.iter().map(|v| -v).collect();
        match cholesky_solve(&h, &neg_b) {
            Some(step) => z = step,
            // Not convex: a step down the gradient to the edge of the region.
            None => {
                let norm = b.iter().map(|v| v * v).sum::<f64>().sqrt();
                if norm > 0.0 {
                    z = b.iter().map(|v| -v / norm * radius).collect();
                }
            }
        }
    } else {
        for i in 0..d {
            let c = beta[1 + d + i];
            if c > 1e-9 {
                z[i] = -b[i] / (2.0 * c);
            }
        }
    }
    z
}

/// The configuration the step `z` from the incumbent reaches, shrunk into the box of
/// half-width `radius`; choices stay the incumbent's.
fn step_config(
    knobs: &[Knob],
    incumbent: &Config,
    names: &[String],
    at: &[Option<f64>],
    numeric: &[usize],
    mut z: Vec<f64>,
    radius: f64,
) -> Config {
    let x0: Vec<f64> = numeric.iter().map(|&i| at[i].unwrap_or(0.5)).collect();
    let mut u: Vec<f64> = names
        .iter()
        .enumerate()
        .map(|(i, _)| at[i].unwrap_or(0.5))
        .collect();
    // The whole step shrinks until it fits in the box, so its direction stays the model's.
    let longest = z.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    if longest > radius {
        for v in z.iter_mut() {
            *v *= radius / longest;
        }
    }
    for (k, &i) in numeric.iter().enumerate() {
        // Already inside the region (shrunk above); a non-finite step stays put.
        let step = if z[k].is_finite() { z[k] } else { 0.0 };
        u[i] = (x0[k] + step).clamp(0.0, 1.0);
    }
    let mut config = config_at(knobs, incumbent, &u);
    // Choices stay the incumbent's (config_at places them by coordinate).
    for (i, name) in names.iter().enumerate() {
        if at[i].is_none() {
            if let Some(v) = incumbent.get(name) {
                config.insert(name.clone(), v.clone());
            }
        }
    }
    config
}

/// The incumbent with one choice (a categorical or boolean knob) changed to a value not yet
/// tried with the incumbent's other values (`tried`: whether a configuration was run, measured or
/// not): values never measured anywhere first, then the value whose best measured objective
/// is lowest. `None` when every such swap was tried.
pub fn swap(
    knobs: &[Knob],
    measured: &[(Config, f64)],
    tried: impl Fn(&Config) -> bool,
    incumbent: &Config,
) -> Option<Config> {
    let mut best: Option<(f64, Config)> = None;
    for k in knobs {
        let values: Vec<KnobValue> = match &k.domain {
            Domain::Choice(v) => v.clone(),
            Domain::Bool => vec![KnobValue::Bool(false), KnobValue::Bool(true)],
            _ => continue,
        };
        for v in values {
            if incumbent.get(&k.name) == Some(&v) {
                continue;
            }
            let mut c = incumbent.clone();
            c.insert(k.name.clone(), v.clone());
            if tried(&c) {
                continue;
            }
            // Never measured: -inf, first in line.
            let score = measured
                .iter()
                .filter(|(m, y)| m.get(&k.name) == Some(&v) && y.is_finite())
                .map(|(_, y)| *y)
                .reduce(f64::min)
                .unwrap_or(f64::NEG_INFINITY);
            let better = match &best {
                Some((s, _)) => score < *s,
                None => true,
            };
            if better {
                best = Some((score, c));
            }
        }
    }
    best.map(|(_, c)| c)
}

/// Ridge least squares `min |A beta - y|^2 + lambda |beta_1..|^2` by the normal equations.
fn least_squares(rows: &[(Vec<f64>, f64)], p: usize, lambda: f64) -> Option<Vec<f64>> {
    let mut a = vec![vec![0.0; p]; p];
    let mut r = vec![0.0; p];
    for (f, y) in rows {
        for i in 0..p {
            r[i] += f[i] * y;
            for j in 0..p {
                a[i][j] += f[i] * f[j];
            }
        }
    }
    for (i, row) in a.iter_mut().enumerate().skip(1) {
        row[i] += lambda * rows.len() as f64;
    }
    gauss_solve(a, r)
}

/// Solves `a x = r` by Gaussian elimination with partial pivoting; `None` when singular.
fn gauss_solve(mut a: Vec<Vec<f64>>, mut r: Vec<f64>) -> Option<Vec<f64>> {
    let n = r.len();
    for col in 0..n {
        let pivot = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-12 {
            return None;
        }
        a.swap(col, pivot);
        r.swap(col, pivot);
        for row in col + 1..n {
            let f = a[row][col] / a[col][col];
            if f != 0.0 {
                for k in col..n {
                    a[row][k] -= f * a[col][k];
                }
                r[row] -= f * r[col];
            }
        }
    }
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        let s: f64 = (i + 1..n).map(|k| a[i][k] * x[k]).sum();
        x[i] = (r[i] - s) / a[i][i];
    }
    x.iter().all(|v| v.is_finite()).then_some(x)
}

/// Solves `h x = r` for a positive definite `h`; `None` when it is not.
fn cholesky_solve(h: &[Vec<f64>], r: &[f64]) -> Option<Vec<f64>> {
    let n = r.len();
    let mut l = vec![vec![0.0; n]; n];
    for i in 0..n {
        for j in 0..=i {
            let s: f64 = (0..j).map(|k| l[i][k] * l[j][k]).sum();
            if i == j {
                let v = h[i][i] - s;
                if v <= 1e-12 {
                    return None;
                }
                l[i][i] = v.sqrt();
            } else {
                l[i][j] = (h[i][j] - s) / l[j][j];
            }
        }
    }
    let mut y = vec![0.0; n];
    for i in 0..n {
        let s: f64 = (0..i).map(|k| l[i][k] * y[k]).sum();
        y[i] = (r[i] - s) / l[i][i];
    }
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        let s: f64 = (i + 1..n).map(|k| l[k][i] * x[k]).sum();
        x[i] = (y[i] - s) / l[i][i];
    }
    Some(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::propose::knobs::{config_of, discover};

    fn knobs(text: &str) -> Vec<Knob> {
        match discover("k.py", text) {
            Ok(k) => k,
            Err(e) => panic!("{e}"),
        }
    }

    fn num(c: &Config, k: &str) -> f64 {
        let value = c.get(k);
        value
            .and_then(KnobValue::as_f64)
            .unwrap_or_else(|| panic!("{k}: {value:?}"))
    }

    #[test]
    fn a_quadratic_bowl_is_solved_in_one_step_inside_the_region() {
        let k = knobs("A = 0.0  # hone: -1.0..1.0\nB = 0.0  # hone: -1.0..1.0\nM = 'x'  # hone: choice ['x', 'y']\n");
        let f = |c: &Config| (num(c, "A") - 0.3).powi(2) + 2.0 * (num(c, "B") + 0.2).powi(2);
        let mut measured = Vec::new();
        for i in 0..12 {
            let a = -0.5 + 0.09 * i as f64;
            let b = 0.4 - 0.07 * ((i * 5) % 12) as f64;
            let mut c = config_of(&k);
            c.insert("A", KnobValue::Float(a));
            c.insert("B", KnobValue::Float(b));
            let y = f(&c);
            measured.push((c, y));
        }
        // A point with the other choice and a wild value must not bend the fit.
        let mut other = config_of(&k);
        other.insert("M", KnobValue::Str("y".into()));
        measured.push((other, -100.0));
        let incumbent = config_of(&k);
        let Some(c) = step(&k, &measured, &incumbent, 0.5) else {
            panic!("no candidate")
        };
        assert!((num(&c, "A") - 0.3).abs() < 0.01, "{c:?}");
        assert!((num(&c, "B") + 0.2).abs() < 0.01, "{c:?}");
        assert_eq!(c.get("M"), Some(&KnobValue::Str("x".into())));
        // A small region shrinks the whole step to its edge (0.05 of the range of 2 = 0.1 on
        // the longer axis), keeping its direction: (0.3, -0.2) becomes (0.1, -0.2 / 3).
        let Some(c) = step(&k, &measured, &incumbent, 0.05) else {
            panic!("no candidate")
        };
        assert!((num(&c, "A") - 0.1).abs() < 1e-3, "{c:?}");
        assert!((num(&c, "B") + 0.2 / 3.0).abs() < 1e-3, "{c:?}");
    }

    #[test]
    fn log_scaled_knobs_are_fitted_in_their_unit_space_and_many_knobs_separably() {
        // Seven knobs (more than FULL_UP_TO): one parabola per knob. LR is log-scaled and the
        // objective is quadratic in log10(LR), so the fit is exact there too.
        let mut text = String::from("LR = 0.1  # hone: log 1e-5..1.0\n");
        for i in 0..6 {
            text.push_str(&format!("K{i} = 0.5  # hone: 0.0..1.0\n"));
        }
        let k = knobs(&text);
        let f = |c: &Config| {
            (num(c, "LR").log10() + 3.0).powi(2)
                + (0..6)
                    .map(|i| (num(c, &format!("K{i}")) - 0.4).powi(2))
                    .sum::<f64>()
        };
        let mut measured = Vec::new();
        for j in 0..40u32 {
            let mut c = config_of(&k);
            // A deterministic spread over the cube.
            let u = |m: u32| f64::from((j * m + 3) % 17) / 16.0;
            c.insert("LR", KnobValue::Float(10f64.powf(-5.0 + 5.0 * u(11))));
            for i in 0..6u32 {
                c.insert(format!("K{i}"), KnobValue::Float(u(i + 2)));
            }
            let y = f(&c);
            measured.push((c, y));
        }
        let incumbent = config_of(&k);
        let Some(c) = step(&k, &measured, &incumbent, 0.5) else {
            panic!("no candidate")
        };
        assert!((num(&c, "LR").log10() + 3.0).abs() < 0.05, "{c:?}");
        for i in 0..6 {
            assert!((num(&c, &format!("K{i}")) - 0.4).abs() < 0.02, "{c:?}");
        }
    }

    #[test]
    fn too_few_points_or_no_numbers_give_nothing() {
        let k = knobs("A = 0.0  # hone: -1.0..1.0\n");
        let c = config_of(&k);
        assert!(step(&k, &[(c.clone(), 1.0)], &c, 0.2).is_none());
        let k = knobs("M = 'x'  # hone: choice ['x', 'y']\n");
        let c = config_of(&k);
        let many: Vec<(Config, f64)> = (0..20).map(|i| (c.clone(), i as f64)).collect();
        assert!(step(&k, &many, &c, 0.2).is_none());
    }

    #[test]
    fn a_knob_that_never_moved_keeps_its_value_and_the_others_are_solved() {
        // C is 0.5 in every point: the full fit over A, B and C would be singular along C.
        let k = knobs(
            "A = 0.0  # hone: -1.0..1.0\nB = 0.0  # hone: -1.0..1.0\nC = 0.5  # hone: 0.0..1.0\n",
        );
        let f = |c: &Config| (num(c, "A") - 0.3).powi(2) + 2.0 * (num(c, "B") + 0.2).powi(2);
        let mut measured = Vec::new();
        for i in 0..14 {
            let mut c = config_of(&k);
            c.insert("A", KnobValue::Float(-0.5 + 0.08 * i as f64));
            c.insert("B", KnobValue::Float(0.4 - 0.06 * ((i * 5) % 14) as f64));
            let y = f(&c);
            measured.push((c, y));
        }
        let Some(c) = step(&k, &measured, &config_of(&k), 0.5) else {
            panic!("no candidate")
        };
        assert!((num(&c, "A") - 0.3).abs() < 0.01, "{c:?}");
        assert!((num(&c, "B") + 0.2).abs() < 0.01, "{c:?}");
        assert_eq!(num(&c, "C"), 0.5);
    }

    #[test]
    fn a_swap_tries_choices_never_measured_first_then_the_best_measured() {
        let k = knobs("A = 0.0  # hone: -1.0..1.0\nM = 'x'  # hone: choice ['x', 'y', 'z']\nF = False  # hone: bool\n");
        let inc = config_of(&k);
        let with = |name: &str, v: KnobValue| {
            let mut c = inc.clone();
            c.insert(name, v);
            c
        };
        // `y` was measured once elsewhere (A moved); `z` and F = true never were.
        let mut elsewhere = with("M", KnobValue::Str("y".into()));
        elsewhere.insert("A", KnobValue::Float(0.9));
        let mut measured = vec![(inc.clone(), 1.0), (elsewhere, 5.0)];
        let mut tried: Vec<Config> = measured.iter().map(|m| m.0.clone()).collect();
        let mut order = Vec::new();
        while let Some(c) = swap(&k, &measured, |c| tried.contains(c), &inc) {
            order.push(c.clone());
            tried.push(c.clone());
            measured.push((c, 2.0));
        }
        assert_eq!(
            order,
            vec![
                with("M", KnobValue::Str("z".into())),
                with("F", KnobValue::Bool(true)),
                with("M", KnobValue::Str("y".into())),
            ]
        );
        let numbers_only = knobs("A = 0.0  # hone: -1.0..1.0\n");
        assert!(swap(&numbers_only, &[], |_| false, &config_of(&numbers_only)).is_none());
        // A swap that ran but measured nothing (a crash) is not offered again.
        let crashed = with("M", KnobValue::Str("z".into()));
        let tried = [measured[0].0.clone(), measured[1].0.clone(), crashed];
        let first = swap(&k, &measured[..2], |c| tried.contains(c), &inc);
        assert_eq!(first, Some(with("F", KnobValue::Bool(true))));
    }
}
