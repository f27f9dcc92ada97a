//! The sampler's initial design: a Latin hypercube drawn from the seed alone, so that the
//! first suggestions spread over the space whatever order they are asked in.

use super::space::{Coord, Space};
use super::{Rng, DESIGN_STREAM};

pub(super) fn latin_hypercube(space: &Space, n: usize, seed: u64) -> Vec<Vec<Coord>> {
    let mut rng = Rng::new(seed, DESIGN_STREAM);
    let mut points = vec![Vec::with_capacity(space.dims.len()); n];
    for d in &space.dims {
        let mut strata: Vec<usize> = (0..n).collect();
        rng.shuffle(&mut strata);
        for (point, stratum) in points.iter_mut().zip(strata) {
            point.push(d.coord_at((stratum as f64 + rng.unit()) / n as f64));
        }
    }
    points
}
