//! Who may talk to the server. With a token (`HONE_TOKEN`), every request — pages, JSON,
//! the event stream, assets and any embedder's routes — must carry it, as
//! `Authorization: Bearer <token>`, a `?token=` query (which sets a cookie, so a browser and
//! its `EventSource` keep working), or that cookie; anything else gets 401. Tokens are
//! compared through their SHA-256 digests in constant time. Without a token the server only
//! listens on loopback ([`crate::check_options`]) and answers only requests whose Host is a
//! loopback name, so a web page a browser visits cannot reach it by DNS rebinding.
//!
//! Every response also carries a strict Content-Security-Policy: the pages show text that
//! agents wrote, and even if escaping failed no inline script would run.

use axum::extract::{Request, State};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use sha2::{Digest, Sha256};
use std::sync::Arc;

use crate::ServeOptions;

const COOKIE: &str = "hone_token";

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The secret, kept only as its digest.
pub(crate) struct Token {
    digest: [u8; 32],
    /// The cookie value that carries it (percent-encoded).
    cookie_value: String,
}

impl Token {
    fn new(secret: &str) -> Token {
        Token {
            digest: Sha256::digest(secret.as_bytes()).into(),
            cookie_value: form_urlencoded::byte_serialize(secret.as_bytes()).collect(),
        }
    }

    /// Constant time in the content and length of `presented`: both sides are hashed to 32
    /// bytes and every byte is compared.
    fn matches(&self, presented: &str) -> bool {
        let other: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let diff = self
            .digest
            .iter()
            .zip(other.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        std::hint::black_box(diff) == 0
    }
}

/// The checks every request goes through.
pub(crate) struct Guard {
    token: Option<Token>,
}

impl Guard {
    pub fn new(opts: &ServeOptions) -> Guard {
        Guard {
            token: opts.token.as_deref().map(Token::new),
        }
    }
}

/// Wraps every route of `router` in the checks and the security headers.
pub(crate) fn protect(router: Router, guard: Guard) -> Router {
    router
        .layer(middleware::from_fn_with_state(Arc::new(guard), check))
        .layer(middleware::map_response(security_headers))
}

async fn security_headers(mut res: Response) -> Response {
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    res
}

/// Where a presented token came from.
#[derive(PartialEq)]
enum Via {
    Header,
    Cookie,
    Query,
}

async fn check(State(guard): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    let Some(token) = &guard.token else {
        if !host_is_loopback(req.headers()) {
            return (
                StatusCode::FORBIDDEN,
                "this hone dashboard has no token, so it answers only to localhost, 127.0.0.1 or [::1]; \
                 set HONE_TOKEN to serve it under another name\n",
            )
                .into_response();
        }
        return next.run(req).await;
    };
    let presented = presented_tokens(&req);
    let Some(via) = presented
        .into_iter()
        .find(|(_, secret)| token.matches(secret))
        .map(|(via, _)| via)
    else {
        return unauthorized();
    };
    if via != Via::Query {
        return next.run(req).await;
    }
    let cookie = format!(
        "{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict",
        token.cookie_value
    );
    let Ok(cookie) = HeaderValue::from_str(&cookie) else {
        return next.run(req).await;
    };
    // A page opened with ?token= is sent on to the same address without it, so the secret
    // does not stay in the address bar, the history or links; the cookie carries it on.
    if req.method() == Method::GET && !req.uri().path().starts_with("/api/") {
        let rest: Vec<(String, String)> = query_pairs(&req).filter(|(k, _)| k != "token").collect();
        // One leading slash: `//host/x` (or `/\host/x`, which browsers read the same) would
        // send the browser to another site.
        let mut location = format!("/{}", req.uri().path().trim_start_matches(['/', '\\']));
        if !rest.is_empty() {
            location.push('?');
            location.push_str(
                &form_urlencoded::Serializer::new(String::new())
                    .extend_pairs(rest)
                    .finish(),
            );
        }
        if let Ok(location) = HeaderValue::from_str(&location) {
            let mut res = StatusCode::SEE_OTHER.into_response();
            res.headers_mut().insert(header::LOCATION, location);
            res.headers_mut().insert(header::SET_COOKIE, cookie);
            return res;
        }
    }
    let mut res = next.run(req).await;
    res.headers_mut().append(header::SET_COOKIE, cookie);
    res
}

fn unauthorized() -> Response {
    let mut res = (
        StatusCode::UNAUTHORIZED,
        "this hone dashboard needs its token (HONE_TOKEN, or the one `hone serve` printed when \
         started without it): open it once as /?token=<token> (a cookie keeps it), or send \
         `Authorization: Bearer <token>`\n",
    )
        .into_response();
    res.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    res
}

fn query_pairs(req: &Request) -> impl Iterator<Item = (String, String)> + '_ {
    form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
}

/// Every token the request carries, wherever it is.
fn presented_tokens(req: &Request) -> Vec<(Via, String)> {
    let mut out = Vec::new();
    for v in req.headers().get_all(header::AUTHORIZATION) {
        if let Some(t) = v.to_str().ok().and_then(|v| v.strip_prefix("Bearer ")) {
            out.push((Via::Header, t.trim().to_string()));
        }
    }
    for v in req.headers().get_all(header::COOKIE) {
        let Ok(v) = v.to_str() else { continue };
        for part in v.split(';') {
            if let Some(value) = part
                .trim()
                .strip_prefix(COOKIE)
                .and_then(|r| r.strip_prefix('='))
            {
                let decoded: String = form_urlencoded::parse(format!("t={value}").as_bytes())
                    .map(|(_, v)| v.into_owned())
                    .next()
                    .unwrap_or_default();
                out.push((Via::Cookie, decoded));
            }
        }
    }
    out.extend(
        query_pairs(req)
            .filter(|(k, _)| k == "token")
            .map(|(_, v)| (Via::Query, v)),
    );
    out
}

/// Is the request addressed to a loopback name?
fn host_is_loopback(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map(|(h, _)| h).unwrap_or(host)
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .map(|ip| ip.is_loopback())
            .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_match_only_themselves() {
        let t = Token::new("0123456789abcdef-secret");
        assert!(t.matches("0123456789abcdef-secret"));
        assert!(!t.matches("0123456789abcdef-secreT"));
        assert!(!t.matches("0123456789abcdef-secret "));
        assert!(!t.matches(""));
    }

    #[test]
    fn only_loopback_names_pass_without_a_token() {
        let host = |h: &str| {
            let mut m = HeaderMap::new();
            m.insert(header::HOST, HeaderValue::from_str(h).unwrap());
            host_is_loopback(&m)
        };
        for (name, loopback) in [
            ("127.0.0.1:8470", true),
            ("localhost:8470", true),
            ("[::1]:8470", true),
            ("127.0.0.1", true),
            ("evil.example:8470", false),
            ("127.0.0.1.evil.example", false),
            ("10.0.0.1:8470", false),
        ] {
            assert_eq!(host(name), loopback, "Host: {name}");
        }
        assert!(!host_is_loopback(&HeaderMap::new()));
    }
}
