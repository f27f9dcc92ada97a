//! Durations and sizes as hone.toml writes them (`"90s"`, `"1h30m"`, `"8G"`), as people read
//! them (`6m05s`), and as a stored spec serializes them (seconds, as a number).

use std::time::Duration;

/// Parses `90s`, `6m`, `8h`, `1d`, `500ms`, `1h30m`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = parse_seconds(s)?;
    seconds(d).ok_or_else(|| too_long(s))
}

/// The longest duration hone accepts anywhere (a hundred years): anything longer is a typo, and
/// a deadline computed from one must not overflow.
pub const MAX_DURATION_SECS: f64 = 36_500.0 * 86400.0;

/// `secs` as a duration, if it is a number of seconds from zero to [`MAX_DURATION_SECS`].
pub fn seconds(secs: f64) -> Option<Duration> {
    (secs.is_finite() && (0.0..=MAX_DURATION_SECS).contains(&secs))
        .then(|| Duration::from_secs_f64(secs))
}

/// Why a duration of `text` is refused when it is too long.
pub fn too_long(text: &str) -> String {
    format!("`{text}` is too long: a duration may be at most 100 years (36500d)")
}

/// The number of seconds `s` writes (any size; [`parse_duration`] bounds it).
fn parse_seconds(s: &str) -> Result<f64, String> {
    let bad =
        || format!("`{s}` is not a duration: write it like \"90s\", \"6m\", \"8h\" or \"1h30m\"");
    let t = s.trim();
    if t.is_empty() {
        return Err(bad());
    }
    if let Ok(secs) = t.parse::<f64>() {
        return if secs >= 0.0 && !secs.is_nan() {
            Ok(secs)
        } else {
            Err(bad())
        };
    }
    let mut total = 0.0f64;
    let mut rest = t;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        if num_len == 0 {
            return Err(bad());
        }
        let n: f64 = rest[..num_len].parse().map_err(|_| bad())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = rest[..unit_len].trim();
        rest = &rest[unit_len..];
        let mult = match unit {
            "ms" => 0.001,
            "s" | "sec" | "secs" => 1.0,
            "m" | "min" | "mins" => 60.0,
            "h" | "hr" | "hrs" => 3600.0,
            "d" => 86400.0,
            _ => return Err(bad()),
        };
        total += n * mult;
    }
    Ok(total)
}

/// Parses `512M`, `8G`, `100K`, `1.5G`, `2T` or a number of bytes (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let bad = || format!("`{s}` is not a size: write it like \"512M\" or \"8G\"");
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let n: f64 = t[..split].parse().map_err(|_| bad())?;
    let mult = match t[split..]
        .trim()
        .to_ascii_uppercase()
        .trim_end_matches("IB")
        .trim_end_matches('B')
    {
        "" => 1.0,
        "K" => 1024.0,
        "M" => 1024.0 * 1024.0,
        "G" => 1024.0 * 1024.0 * 1024.0,
        "T" => 1024.0f64.powi(4),
        _ => return Err(bad()),
    };
    let bytes = n * mult;
    if bytes >= 1.0 && bytes.is_finite() {
        Ok(bytes as u64)
    } else {
        Err(bad())
    }
}

/// Formats a duration compactly for people: `850ms`, `4.2s`, `6m05s`, `2h03m`.
pub fn format_duration(d: Duration) -> String {
    duration_with_gap(d, "")
}

/// The same as [`format_duration`] with its numbers and units spaced apart, for pages:
/// `850 ms`, `4.2 s`, `6 m 05 s`, `2 h 03 m`.
pub fn format_duration_spaced(d: Duration) -> String {
    duration_with_gap(d, " ")
}

fn duration_with_gap(d: Duration, gap: &str) -> String {
    let s = d.as_secs_f64();
    let whole = d.as_secs();
    if s < 1.0 {
        format!("{}{gap}ms", d.as_millis())
    } else if s < 60.0 {
        format!("{s:.1}{gap}s")
    } else if s < 3600.0 {
        format!("{}{gap}m{gap}{:02}{gap}s", whole / 60, whole % 60)
    } else {
        format!(
            "{}{gap}h{gap}{:02}{gap}m",
            whole / 3600,
            (whole % 3600) / 60
        )
    }
}

pub(super) mod duration_secs {
    pub fn serialize<S: serde::Serializer>(
        d: &std::time::Duration,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

pub(super) mod opt_duration_secs {
    pub fn serialize<S: serde::Serializer>(
        d: &Option<std::time::Duration>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&d.as_secs_f64()),
            None => s.serialize_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_written_with_and_without_gaps() {
        for (ms, tight, spaced) in [
            (850, "850ms", "850 ms"),
            (12_345, "12.3s", "12.3 s"),
            (245_000, "4m05s", "4 m 05 s"),
            (7_800_000, "2h10m", "2 h 10 m"),
        ] {
            let d = Duration::from_millis(ms);
            assert_eq!(format_duration(d), tight);
            assert_eq!(format_duration_spaced(d), spaced);
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("6m"), Ok(Duration::from_secs(360)));
        assert_eq!(parse_duration("8h"), Ok(Duration::from_secs(8 * 3600)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("12"), Ok(Duration::from_secs(12)));
        assert!(parse_duration("6 parsecs").is_err());
        assert!(parse_duration("m").is_err());
    }

    #[test]
    fn huge_durations_are_errors_not_panics() {
        for text in [
            "1e300",
            "1e20",
            "18446744073709551615s",
            "99999999999999999999h",
            "inf",
            "36501d",
        ] {
            let e = parse_duration(text).unwrap_err();
            assert!(e.contains("too long"), "{text}: {e}");
        }
        assert_eq!(
            parse_duration("36500d").unwrap(),
            Duration::from_secs(36_500 * 86400)
        );
        assert!(parse_duration("nan").is_err());
        assert!(seconds(f64::MAX).is_none() && seconds(-1.0).is_none());
    }
}
