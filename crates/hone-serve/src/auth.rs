//! Who may talk to the server. With a token (`HONE_TOKEN`), every request — pages, JSON,
//! the event stream, assets and any embedder's routes — must carry it, as
//! `Authorization: Bearer <token>` or a `?token=` query, or gets 401. A browser keeps it in
//! the address: the pages put it in every link they make (`html::Links`), and it is never
//! kept in a cookie, because a cookie for 127.0.0.1 is sent to every port of it (ports do
//! not separate cookies, nor sites for `SameSite`), where a sandboxed agent, which keeps its
//! network, may listen and get the user's browser to visit it. A `hone_token` cookie an
//! earlier hone set is ignored and cleared. Pages send no `Referer`, so the token does not
//! leave in one. Tokens are compared through their SHA-256 digests in constant time. Without
//! a token the server only listens on loopback ([`crate::check_options`]) and answers only
//! requests whose Host is a loopback name, so a web page a browser visits cannot reach it by
//! DNS rebinding.
//!
//! Every response also carries a strict Content-Security-Policy: the pages show text that
//! agents wrote, and even if escaping failed no inline script would run.

use axum::extract::{Request, State};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use sha2::{Digest, Sha256};
use std::sync::Arc;

use crate::ServeOptions;

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The secret, kept only as its digest.
pub(crate) struct Token {
    digest: [u8; 32],
}

impl Token {
    fn new(secret: &str) -> Token {
        Token {
            digest: Sha256::digest(secret.as_bytes()).into(),
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

/// `hone daemon` without a token: only requests addressed to a loopback name get through, so
/// that no web page reaches it by DNS rebinding; but the signed trigger, which a webhook may
/// send through a tunnel under another name (its signature is its check), and `/healthz`,
/// which a proxy's health check may ask under its own name (it says only `ok`).
pub(crate) async fn loopback_only(req: Request, next: Next) -> Response {
    let open = matches!(req.uri().path(), "/api/trigger" | "/healthz");
    if open || host_is_loopback(req.headers()) {
        next.run(req).await
    } else {
        not_loopback()
    }
}

fn not_loopback() -> Response {
    (
        StatusCode::FORBIDDEN,
        "this hone server has no token, so it answers only to localhost, 127.0.0.1 or [::1]; \
         set HONE_TOKEN to serve it under another name\n",
    )
        .into_response()
}

async fn check(State(guard): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    let stale_cookie = has_old_cookie(req.headers());
    let mut res = match &guard.token {
        None if !host_is_loopback(req.headers()) => not_loopback(),
        None => next.run(req).await,
        Some(token) if presented_tokens(&req).iter().any(|t| token.matches(t)) => {
            next.run(req).await
        }
        Some(_) => unauthorized(),
    };
    if stale_cookie {
        // An earlier hone kept the token in this cookie, which the browser sends to every
        // port of the host: it goes.
        res.headers_mut().append(
            header::SET_COOKIE,
            HeaderValue::from_static("hone_token=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict"),
        );
    }
    res
}

fn unauthorized() -> Response {
    let mut res = (
        StatusCode::UNAUTHORIZED,
        "this hone dashboard needs its token (HONE_TOKEN, or the one `hone serve` printed when \
         started without it): open the dashboard as /?token=<token> (its links keep it), or send \
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

/// Every token the request carries: in `Authorization: Bearer` headers and `token` queries.
fn presented_tokens(req: &Request) -> Vec<String> {
    let mut out = Vec::new();
    for v in req.headers().get_all(header::AUTHORIZATION) {
        if let Some(t) = v.to_str().ok().and_then(|v| v.strip_prefix("Bearer ")) {
            out.push(t.trim().to_string());
        }
    }
    out.extend(
        query_pairs(req)
            .filter(|(k, _)| k == "token")
            .map(|(_, v)| v),
    );
    out
}

/// Does the request carry the cookie an earlier hone kept the token in?
fn has_old_cookie(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .any(|part| part.trim().starts_with("hone_token="))
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
