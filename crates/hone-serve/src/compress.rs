//! gzip for the dashboard's responses: a page of a long run is mostly repeated markup (table
//! rows, SVG elements) and shrinks several times over. A response is compressed when the
//! client accepts gzip, it is text (HTML, SVG, JSON, CSS, JavaScript, plain text) of at least
//! [`MIN_BYTES`], and not already encoded; the event stream (`text/event-stream`) is never
//! buffered or touched.

use std::io::Write as _;

use axum::body::Body;
use axum::extract::Request;
use axum::http::header::{self, HeaderValue};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;

/// Smaller bodies go as they are (gzip's own header would eat the gain).
pub const MIN_BYTES: usize = 1024;

/// Wraps every route of `router` in the compression.
pub(crate) fn layer(router: Router) -> Router {
    router.layer(middleware::from_fn(gzip))
}

/// Does an `Accept-Encoding` value accept gzip (not with `q=0`)?
pub fn accepts_gzip(accept_encoding: &str) -> bool {
    accept_encoding.split(',').any(|item| {
        let mut parts = item.split(';').map(str::trim);
        let name = parts.next().unwrap_or_default();
        let refused = parts.any(|p| {
            p.strip_prefix("q=")
                .and_then(|q| q.trim().parse::<f64>().ok())
                .is_some_and(|q| q <= 0.0)
        });
        (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
    })
}

/// Whether a response of this content type is worth compressing.
fn compressible(content_type: &str) -> bool {
    let ty = content_type.split(';').next().unwrap_or_default().trim();
    ty.starts_with("text/") && ty != "text/event-stream"
        || matches!(
            ty,
            "image/svg+xml" | "application/json" | "application/javascript"
        )
}

async fn gzip(req: Request, next: Next) -> Response {
    let accepts = req
        .headers()
        .get(header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(accepts_gzip);
    let res = next.run(req).await;
    let typed = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(compressible);
    if !accepts || !typed || res.headers().contains_key(header::CONTENT_ENCODING) {
        return res;
    }
    let (mut parts, body) = res.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            "could not read the response\n",
        )
            .into_response();
    };
    parts
        .headers
        .append(header::VARY, HeaderValue::from_static("accept-encoding"));
    if bytes.len() < MIN_BYTES {
        return Response::from_parts(parts, Body::from(bytes));
    }
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(bytes.len() / 4),
        flate2::Compression::new(5),
    );
    let zipped = enc.write_all(&bytes).and_then(|()| enc.finish());
    match zipped {
        Ok(z) => {
            parts.headers.remove(header::CONTENT_LENGTH);
            parts
                .headers
                .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            Response::from_parts(parts, Body::from(z))
        }
        // Writing to memory does not fail; if it ever did, the plain body still serves.
        Err(_) => Response::from_parts(parts, Body::from(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_encoding_is_read_as_http_says() {
        for (accept, gzip) in [
            ("gzip, deflate, br", true),
            ("br;q=1.0, GZIP;q=0.5", true),
            ("*", true),
            ("gzip;q=0", false),
            ("deflate, br", false),
            ("", false),
        ] {
            assert_eq!(accepts_gzip(accept), gzip, "Accept-Encoding: {accept:?}");
        }
    }

    #[test]
    fn text_is_compressed_and_the_event_stream_never() {
        for (content_type, compressed) in [
            ("text/html; charset=utf-8", true),
            ("image/svg+xml", true),
            ("application/json", true),
            ("text/event-stream", false),
            ("image/png", false),
        ] {
            assert_eq!(compressible(content_type), compressed, "{content_type}");
        }
    }
}
