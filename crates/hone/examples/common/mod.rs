//! What the in-process sampler harnesses share: reading a configuration's numbers.

use hone::propose::knobs::{Config, KnobValue};

/// The number `c` holds for `name` (a float, or an integer converted); a harness that asks for
/// anything else is wrong, so it panics naming the knob.
pub fn num(c: &Config, name: &str) -> f64 {
    let value = c.get(name);
    value
        .and_then(KnobValue::as_f64)
        .unwrap_or_else(|| panic!("{name} = {value:?}"))
}
