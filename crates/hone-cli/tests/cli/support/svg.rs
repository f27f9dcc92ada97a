//! Reading the progress plot's SVG in the tests (also used by `tests/serve.rs`).

/// How many points or marks the plot's groups whose class starts with `class` hold (`keeps"`:
/// the keeps' group, `fail `: every failure kind's).
pub(crate) fn marks(svg: &str, class: &str) -> usize {
    svg.split(&format!("<g class=\"{class}"))
        .skip(1)
        .map(|g| g.split("</g>").next().unwrap_or_default())
        .map(|g| g.matches("<circle ").count() + g.matches("<text x=").count())
        .sum()
}
