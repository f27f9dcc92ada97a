//! Small helpers several modules need in exactly the same form: the HTML escape of the
//! report and the dashboard, UTC times as text, an HTTP answer's status and text, the median
//! of the statistics, and the splitmix64 step behind
//! every seeded generator (and the fuzzers' stream of draws built on it). One copy each, so
//! a fix reaches every caller.

/// Escapes text for HTML or SVG element content and for quoted attribute values (either
/// quote): `&`, `<`, `>`, `"` and `'`.
pub fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        push_html_escaped(&mut out, c);
    }
    out
}

/// `secs` seconds since the epoch in UTC, written by chrono's `format` (e.g. `%Y%m%d`): run
/// tags, schedule stamps and the dashboard's times.
pub fn utc_text(secs: i64, format: &str) -> String {
    chrono::DateTime::from_timestamp(secs, 0)
        .unwrap_or_default()
        .format(format)
        .to_string()
}

/// An HTTP answer's status and its body as text, read up to `limit` bytes (an unreadable or
/// larger body reads as empty): what a caller that reports or parses an answer needs of it.
pub fn http_status_and_text(resp: ureq::http::Response<ureq::Body>, limit: u64) -> (u16, String) {
    let status = resp.status().as_u16();
    let text = resp
        .into_body()
        .with_config()
        .limit(limit)
        .read_to_string()
        .unwrap_or_default();
    (status, text)
}

/// Appends `c` to `out` as [`html_escape`] writes it: the special characters as entities,
/// any other character as it is.
pub fn push_html_escaped(out: &mut String, c: char) {
    match c {
        '&' => out.push_str("&amp;"),
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        '"' => out.push_str("&quot;"),
        '\'' => out.push_str("&#39;"),
        c => out.push(c),
    }
}

/// The median (the mean of the two middle values for an even count), ordering by
/// `f64::total_cmp`. `NaN` for an empty slice, like a mean of nothing: a report shows it as
/// "no data", and callers that need a number check for values first.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// One step of splitmix64: advances `state` and returns the next output. Small, fast and
/// good enough for sampling; the seeded generators built on it (`meta::Rng`, the knobs
/// sampler's) differ only in how they derive the starting state.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A seeded stream of draws for the fuzzers (the spec's and the CLI's): splitmix64 steps from
/// the seed, so a failing case is reproduced from its seed alone. Public for the CLI's fuzz
/// tests, not an API.
#[doc(hidden)]
pub struct Draw(pub u64);

impl Draw {
    /// The next raw 64-bit output.
    pub fn next_u64(&mut self) -> u64 {
        splitmix64(&mut self.0)
    }

    /// A draw in `0..n` (0 for `n == 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// One of `items`, which must not be empty.
    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// A uniform draw in [0, 1) from a 64-bit output (its top 53 bits).
pub fn unit_f64(x: u64) -> f64 {
    (x >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Pins a seeded generator's streams: `draw(seed, stream)` gives its first three outputs,
/// checked against `want` for the seeds `(0, 0)`, `(7, the sampler's design stream)` and
/// `(42, 3)`.
#[cfg(test)]
pub(crate) fn assert_pinned_streams(draw: impl Fn(u64, u64) -> [u64; 3], want: [[u64; 3]; 3]) {
    let seeds = [(0, 0), (7, 0x4c48_535f_4445_5349), (42, 3)];
    for ((seed, stream), want) in seeds.into_iter().zip(want) {
        assert_eq!(draw(seed, stream), want, "seed {seed}, stream {stream:#x}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_escape_covers_markup_and_both_quotes() {
        assert_eq!(
            html_escape(r#"<a href="x">Tom's & Jerry's</a>"#),
            "&lt;a href=&quot;x&quot;&gt;Tom&#39;s &amp; Jerry&#39;s&lt;/a&gt;"
        );
        assert_eq!(html_escape("plain é"), "plain é");
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[5.0]), 5.0);
        assert!(median(&[]).is_nan());
    }

    /// The reference outputs of splitmix64 from state 0.
    #[test]
    fn splitmix64_matches_the_reference() {
        let mut s = 0;
        assert_eq!(splitmix64(&mut s), 0xe220_a839_7b1d_cdaf);
        assert_eq!(splitmix64(&mut s), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(unit_f64(0), 0.0);
        assert!(unit_f64(u64::MAX) < 1.0);
    }
}
