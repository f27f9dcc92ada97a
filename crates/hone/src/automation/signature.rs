//! Webhook signatures: HMAC-SHA256 (RFC 2104) of the raw request body with a shared secret,
//! sent as `X-Hub-Signature-256: sha256=<hex>` the way GitHub signs its webhooks, so a GitHub
//! webhook (or `openssl dgst -sha256 -hmac`) can call hone directly.
//!
//! The MAC is `util::hmac_sha256`; the comparison takes the same time whatever the bytes are.

use crate::util::{hmac_sha256, same_bytes};

/// The header that carries the signature.
pub const HEADER: &str = "x-hub-signature-256";

/// The header value for a body: `sha256=<lower-case hex>`.
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let mac = hmac_sha256(secret, body);
    let mut s = String::from("sha256=");
    for b in mac {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Why a request's signature was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("missing X-Hub-Signature-256 header: sign the raw body with HMAC-SHA256 and the shared secret, and send `sha256=<hex>`")]
    Missing,
    #[error("malformed X-Hub-Signature-256 header: expected `sha256=` and 64 hex digits")]
    Malformed,
    #[error("the X-Hub-Signature-256 signature does not match the body; check the shared secret")]
    Mismatch,
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Checks `header` (the value of `X-Hub-Signature-256`, if any) against the body.
pub fn verify(secret: &[u8], body: &[u8], header: Option<&str>) -> Result<(), SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?.trim();
    let hex = header
        .strip_prefix("sha256=")
        .ok_or(SignatureError::Malformed)?
        .as_bytes();
    if hex.len() != 64 {
        return Err(SignatureError::Malformed);
    }
    let mut given = [0u8; 32];
    for (i, pair) in hex.chunks(2).enumerate() {
        let (Some(hi), Some(lo)) = (hex_digit(pair[0]), hex_digit(pair[1])) else {
            return Err(SignatureError::Malformed);
        };
        given[i] = hi << 4 | lo;
    }
    if same_bytes(&hmac_sha256(secret, body), &given) {
        Ok(())
    } else {
        Err(SignatureError::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn rfc_4231_vectors() {
        // Test case 1.
        assert_eq!(
            hex(&hmac_sha256(&[0x0b; 20], b"Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        // Test case 2.
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Test case 6: a key longer than the block.
        assert_eq!(
            hex(&hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn github_style_headers() {
        // GitHub's documented example: secret "It's a Secret to Everybody", body "Hello, World!".
        let sig = sign(b"It's a Secret to Everybody", b"Hello, World!");
        assert_eq!(
            sig,
            "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
        );
        let s = b"It's a Secret to Everybody";
        assert_eq!(verify(s, b"Hello, World!", Some(&sig)), Ok(()));
        assert_eq!(
            verify(
                s,
                b"Hello, World!",
                Some(&sig.to_uppercase().replace("SHA256", "sha256"))
            ),
            Ok(())
        );
        assert_eq!(
            verify(s, b"Hello, World?", Some(&sig)),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(b"other", b"Hello, World!", Some(&sig)),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(verify(s, b"x", None), Err(SignatureError::Missing));
        assert_eq!(
            verify(s, b"x", Some("sha1=abcd")),
            Err(SignatureError::Malformed)
        );
        assert_eq!(
            verify(s, b"x", Some(&format!("sha256={}", "zz".repeat(32)))),
            Err(SignatureError::Malformed)
        );
    }
}
