//! The bearer credential of an HTTP request (`Authorization: Bearer TOKEN`, RFC 6750), read
//! the same way by the status endpoint and the emulator: the scheme matches in any case
//! (authentication schemes are case-insensitive, RFC 9110 §11.1), spaces around the token are
//! ignored, and the token is compared through SHA-256 digests, so the time a comparison takes
//! tells nothing about the expected token.

use axum::http::{header, HeaderMap};
use sha2::{Digest, Sha256};

use crate::redact::Secret;

/// The token of the request's `Authorization: Bearer TOKEN` header (scheme in any case);
/// `None` without that header, with another scheme, or with an empty token.
pub(crate) fn token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim_start().split_once([' ', '\t'])?;
    let token = token.trim_matches([' ', '\t']);
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Whether the request carries `expected` as its bearer token.
pub(crate) fn carries(headers: &HeaderMap, expected: &Secret) -> bool {
    let given = token(headers).unwrap_or_default();
    Sha256::digest(given.as_bytes()) == Sha256::digest(expected.expose().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let value = HeaderValue::from_str(value).expect("a header value");
        headers.insert(header::AUTHORIZATION, value);
        headers
    }

    #[test]
    fn the_scheme_matches_in_any_case() {
        for value in [
            "Bearer t0k",
            "bearer t0k",
            "BEARER t0k",
            "bEaReR   t0k ",
            "Bearer\tt0k",
        ] {
            assert_eq!(token(&headers(value)), Some("t0k"), "{value:?}");
            assert!(carries(&headers(value), &Secret::new("t0k")), "{value:?}");
        }
    }

    #[test]
    fn other_schemes_and_empty_tokens_carry_nothing() {
        for value in [
            "Basic dDBrOg==",
            "Bearer",
            "Bearer   ",
            "Bearert0k",
            "t0k",
            "",
        ] {
            assert_eq!(token(&headers(value)), None, "{value:?}");
            assert!(!carries(&headers(value), &Secret::new("t0k")), "{value:?}");
        }
        assert_eq!(token(&HeaderMap::new()), None);
        assert!(!carries(&headers("Bearer t0k2"), &Secret::new("t0k")));
        assert!(!carries(&headers("Bearer T0K"), &Secret::new("t0k")));
    }
}
