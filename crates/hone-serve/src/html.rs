//! HTML building blocks: escaping (every string from the store is untrusted: agents write
//! descriptions, verifiers write logs), the page frame, and number, time and status
//! formatting shared by the pages.

use std::fmt::Write as _;

/// Escapes text for element content and quoted attribute values (the library's, shared with
/// the report).
pub(crate) use hone::util::html_escape as esc;

/// Percent-encodes a path segment or query value.
pub(crate) fn url(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// How the pages link to one another: with the server's token in every link, when it has
/// one. A browser keeps the token in the address, never in a cookie: a cookie for 127.0.0.1
/// goes to every port of it, where a sandboxed agent (which keeps its network) may listen and
/// be visited.
#[derive(Clone, Debug, Default)]
pub(crate) struct Links {
    /// `token=<the token, percent-encoded>`.
    token: Option<String>,
}

impl Links {
    pub fn new(token: Option<&str>) -> Links {
        Links {
            token: token.map(|t| format!("token={}", url(t))),
        }
    }

    /// `target` (a path, with or without a query, or a query alone: `?sort=n`) with the
    /// token added to its query.
    pub fn to(&self, target: &str) -> String {
        let Some(token) = &self.token else {
            return target.to_string();
        };
        let sep = if target.ends_with('?') {
            ""
        } else if target.contains('?') {
            "&"
        } else {
            "?"
        };
        format!("{target}{sep}{token}")
    }
}

/// A whole page: `crumbs` are (label, link) pairs after the home link, `body` is trusted HTML
/// built by the pages (with everything untrusted already escaped, and its links made by
/// `links`).
pub(crate) fn page(
    links: &Links,
    title: &str,
    crumbs: &[(String, Option<String>)],
    body: &str,
) -> String {
    let (head, tail) = page_parts(links, title, crumbs);
    format!("{head}{body}{tail}")
}

/// What [`page`] puts before and after the body.
pub(crate) fn page_parts(
    links: &Links,
    title: &str,
    crumbs: &[(String, Option<String>)],
) -> (String, String) {
    let mut nav = format!(
        r#"<a class="brand" href="{}">hone</a>"#,
        esc(&links.to("/"))
    );
    for (label, link) in crumbs {
        nav.push_str(r#"<span class="sep">/</span>"#);
        match link {
            Some(href) => {
                let _ = write!(
                    nav,
                    r#"<a href="{}">{}</a>"#,
                    esc(&links.to(href)),
                    esc(label)
                );
            }
            None => {
                let _ = write!(nav, "<span>{}</span>", esc(label));
            }
        }
    }
    let head = format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · hone</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="{style}">
<script src="{script}" defer></script>
</head>
<body>
<header class="top"><nav>{nav}</nav></header>
<main>
"#,
        title = esc(title),
        style = esc(&links.to("/assets/style.css")),
        script = esc(&links.to("/assets/app.js")),
    );
    (head, "\n</main>\n</body>\n</html>\n".to_string())
}

/// A status as a coloured badge.
pub(crate) fn badge(status: &str) -> String {
    format!(r#"<span class="badge s-{s}">{s}</span>"#, s = esc(status))
}

/// Milliseconds as `850 ms`, `12.3 s`, `4 m 05 s` or `2 h 10 m`.
pub(crate) fn duration_ms(ms: u64) -> String {
    hone::spec::format_duration_spaced(std::time::Duration::from_millis(ms))
}

/// Seconds since the epoch as `2026-11-29 21:18 UTC`.
pub(crate) fn utc(secs: f64) -> String {
    if !secs.is_finite() || secs < 0.0 {
        return "-".into();
    }
    hone::util::utc_text(secs as i64, "%Y-%m-%d %H:%M UTC")
}

/// Dollars, or `-` when nothing was spent.
pub(crate) fn cost(usd: f64) -> String {
    if usd > 0.0 {
        format!("${usd:.4}")
    } else {
        "-".into()
    }
}

/// Shortens text to `n` characters with an ellipsis (the library's).
pub(crate) use hone::util::cut_chars as short;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_leaves_no_markup() {
        assert_eq!(
            esc(r#"<img src=x onerror="a('b')">&"#),
            "&lt;img src=x onerror=&quot;a(&#39;b&#39;)&quot;&gt;&amp;"
        );
    }

    #[test]
    fn links_carry_the_token_in_their_query() {
        let links = Links::new(Some("a b&c"));
        assert_eq!(links.to("/"), "/?token=a+b%26c");
        assert_eq!(links.to("/runs/x?page=2"), "/runs/x?page=2&token=a+b%26c");
        assert_eq!(links.to("?"), "?token=a+b%26c");
        assert_eq!(links.to("?sort=n"), "?sort=n&token=a+b%26c");
        assert_eq!(Links::default().to("/runs/x"), "/runs/x");
    }

    #[test]
    fn dates_and_durations() {
        assert_eq!(utc(0.0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(1_798_579_088.0), "2026-12-29 21:18 UTC");
        assert_eq!(utc(951_782_400.0), "2000-02-29 00:00 UTC");
        assert_eq!(duration_ms(850), "850 ms");
        assert_eq!(duration_ms(12_345), "12.3 s");
        assert_eq!(duration_ms(245_000), "4 m 05 s");
        assert_eq!(duration_ms(7_800_000), "2 h 10 m");
    }
}
