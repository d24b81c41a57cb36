//! The operators' route `GET /senders/{address}`: who may read it and which sender it names.
//!
//! The route exists only when the `ADMIN_TOKEN` secret is set. The `Authorization: Bearer <token>`
//! header is compared in constant time: both sides are hashed with SHA-256 and the digests
//! compared byte by byte without an early exit, so neither the token's content nor its length
//! shows in the time an answer takes.

use crate::address::Address;
use sha2::{Digest, Sha256};

/// The route's prefix; the rest of the path is the sender's address.
pub const SENDERS_PREFIX: &str = "/senders/";

/// Whether an `Authorization` header value carries `token` as a bearer token (RFC 6750; the
/// scheme is case-insensitive). Constant time in the header and the token.
pub fn bearer_matches(authorization: Option<&str>, token: &str) -> bool {
    let presented = authorization
        .and_then(|value| {
            let (scheme, rest) = value.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        })
        .unwrap_or_default();
    let (a, b) = (
        Sha256::digest(presented.as_bytes()),
        Sha256::digest(token.as_bytes()),
    );
    let differ = a
        .iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y));
    differ == 0 && authorization.is_some()
}

/// The sender named by a `/senders/{address}` path (`0x` + 40 hex digits, either case).
///
/// # Errors
/// Why the rest of the path is not an address.
pub fn sender_of_path(path: &str) -> Option<Result<Address, String>> {
    let rest = path.strip_prefix(SENDERS_PREFIX)?;
    Some(
        rest.parse::<Address>()
            .map_err(|e| format!("not an address: {e}")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_right_bearer_token_matches() {
        assert!(bearer_matches(Some("Bearer s3cret"), "s3cret"));
        assert!(bearer_matches(Some("bearer  s3cret "), "s3cret"));
        for wrong in [
            None,
            Some(""),
            Some("Bearer"),
            Some("Bearer s3cre"),
            Some("Bearer s3cret2"),
            Some("Basic s3cret"),
            Some("s3cret"),
        ] {
            assert!(!bearer_matches(wrong, "s3cret"), "{wrong:?}");
        }
    }

    #[test]
    fn paths_name_a_sender() {
        let a = sender_of_path("/senders/0xF39Fd6e51aad88F6F4ce6aB8827279cffFb92266")
            .unwrap()
            .unwrap();
        assert_eq!(a.to_string(), "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266");
        assert!(sender_of_path("/senders/0x12").unwrap().is_err());
        assert!(sender_of_path("/other").is_none());
    }
}
