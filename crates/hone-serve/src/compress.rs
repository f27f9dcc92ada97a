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

/// gzip's effort (of 0 to 9): most of the size gain for a fraction of the higher levels' time.
/// A long run's plot (1.36 MB of SVG at 100,000 experiments) deflates in about 7 ms to 194 KB
/// at level 2, against 19 ms to 171 KB at level 5 (bench/RESULTS.md, "Twenty-third stop"):
/// the page goes out sooner on any link faster than about 2 MB/s.
const LEVEL: u32 = 2;

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
        flate2::Compression::new(LEVEL),
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

/// A piece of a body deflated once and kept (the run page's plot, the bulk of a long run's
/// page): raw deflate blocks ending on a byte boundary (a sync flush, not a final block), so
/// that [`gzip_around`] can place it between other deflated text without compressing it again.
pub struct Deflated {
    blocks: Vec<u8>,
    crc: flate2::Crc,
}

/// From this size on, a piece is deflated in two halves at once (a long run's plot is over a
/// megabyte, and the page waits for it).
const SPLIT_FROM: usize = 256 << 10;

impl Deflated {
    pub fn new(text: &str) -> Deflated {
        let bytes = text.as_bytes();
        if bytes.len() >= SPLIT_FROM {
            // Each half in blocks of its own, one after the other: one piece. Where no thread
            // can be made (or it failed), the whole is deflated here.
            let (first, second) = bytes.split_at(bytes.len() / 2);
            let halves = std::thread::scope(|scope| {
                let first = std::thread::Builder::new()
                    .spawn_scoped(scope, || Deflated::of(first))
                    .ok()?;
                let second = Deflated::of(second);
                Some(first.join().ok()?.then(second))
            });
            if let Some(d) = halves {
                return d;
            }
        }
        Deflated::of(bytes)
    }

    fn of(bytes: &[u8]) -> Deflated {
        let mut crc = flate2::Crc::new();
        crc.update(bytes);
        let mut blocks = Vec::with_capacity(bytes.len() / 4);
        deflate_into(&mut blocks, bytes, false);
        Deflated { blocks, crc }
    }

    /// This piece followed by `next`.
    pub(crate) fn then(mut self, next: Deflated) -> Deflated {
        self.blocks.extend_from_slice(&next.blocks);
        self.crc.combine(&next.crc);
        self
    }
}

/// Appends `data` to `out` as raw deflate blocks of their own (no back-reference reaches
/// before them): ending on a byte boundary with a sync flush, or with the stream's final block.
fn deflate_into(out: &mut Vec<u8>, data: &[u8], last: bool) {
    use flate2::{Compress, Compression, FlushCompress, Status};
    let mut z = Compress::new(Compression::new(LEVEL), false);
    let flush = if last {
        FlushCompress::Finish
    } else {
        FlushCompress::Sync
    };
    loop {
        let read = usize::try_from(z.total_in())
            .unwrap_or(data.len())
            .min(data.len());
        // Room for the rest (deflate never grows text by more than a few bytes per block).
        out.reserve(data.len() - read + 64);
        let status = z.compress_vec(&data[read..], out, flush);
        let all_read = usize::try_from(z.total_in()).is_ok_and(|n| n == data.len());
        match status {
            Ok(Status::StreamEnd) => return,
            // A sync flush is complete once every byte is read and the output was not filled.
            Ok(_) if !last && all_read && out.len() < out.capacity() => return,
            Ok(_) => {}
            // Compressing into memory does not fail (the input is plain bytes, the output
            // grows); should it ever, the stream ends here and the client sees a bad body.
            Err(_) => return,
        }
    }
}

/// One gzip stream of `before`, the kept `middle` and `after`: only the two ends are
/// compressed now.
pub fn gzip_around(before: &str, middle: &Deflated, after: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(middle.blocks.len() + (before.len() + after.len()) / 3 + 64);
    // The gzip header: deflate, no name or time, unknown OS.
    out.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
    deflate_into(&mut out, before.as_bytes(), false);
    out.extend_from_slice(&middle.blocks);
    deflate_into(&mut out, after.as_bytes(), true);
    let mut crc = flate2::Crc::new();
    crc.update(before.as_bytes());
    crc.combine(&middle.crc);
    let mut tail = flate2::Crc::new();
    tail.update(after.as_bytes());
    crc.combine(&tail);
    out.extend_from_slice(&crc.sum().to_le_bytes());
    // gzip's trailer holds the length modulo 2^32.
    out.extend_from_slice(&(crc.amount()).to_le_bytes());
    out
}

/// The response of an HTML page built as `before`, a `middle` and `after`: gzip-compressed
/// around the middle's kept deflated form when one is given (the client accepts gzip, see
/// [`accepts_gzip`]), else plain.
pub fn html_around(before: &str, middle: (&str, Option<&Deflated>), after: &str) -> Response {
    let mut res = if let Some(kept) = middle.1 {
        let mut r = Body::from(gzip_around(before, kept, after)).into_response();
        r.headers_mut()
            .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        r
    } else {
        Body::from(format!("{before}{}{after}", middle.0)).into_response()
    };
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.append(header::VARY, HeaderValue::from_static("accept-encoding"));
    res
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

    fn gunzip(z: &[u8]) -> String {
        use std::io::Read as _;
        let mut d = flate2::read::GzDecoder::new(z);
        let mut s = String::new();
        d.read_to_string(&mut s).expect("a valid gzip stream");
        s
    }

    /// The kept piece placed between two freshly compressed ends makes one valid gzip
    /// stream (crc and length checked by the decoder) of the three texts in order, also
    /// where the middle repeats the ends (no back-reference may cross a piece's start) and
    /// where the ends are empty.
    #[test]
    fn a_kept_piece_stitches_into_one_gzip_stream() {
        let middle: String = (0..20_000)
            .map(|i| format!("<circle cx=\"{}\" r=\"3\"/>\n", i % 977))
            .collect();
        let kept = Deflated::new(&middle);
        assert!(kept.blocks.len() * 4 < middle.len(), "it compresses");
        // Deflated in two halves at once, and (a short one) whole.
        assert!(middle.len() >= SPLIT_FROM);
        let short = &middle[..SPLIT_FROM / 2];
        let z = gzip_around("<p>", &Deflated::new(short), "</p>");
        assert_eq!(gunzip(&z), format!("<p>{short}</p>"));
        for (before, after) in [
            (
                "<html><body><circle cx=\"1\" r=\"3\"/>",
                "<table>rows</table></body></html>",
            ),
            ("", ""),
            ("x", &*"<tr><td>1</td></tr>".repeat(5000)),
        ] {
            let z = gzip_around(before, &kept, after);
            assert_eq!(gunzip(&z), format!("{before}{middle}{after}"));
        }
        // An empty kept piece too.
        let z = gzip_around("a", &Deflated::new(""), "b");
        assert_eq!(gunzip(&z), "ab");
    }
}
