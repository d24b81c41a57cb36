//! An API key's text and where a request carries it ([`ApiKey`], [`KeyIn`]), and the only form of
//! it the relay keeps: its HMAC under `RELAY_SECRET` ([`KeyHash`]). Pure.
//!
//! A key is `nrk_` and 40 lowercase hex digits: 32 of randomness (a UUID v4's 122 bits) and 8 of
//! checksum (the first 4 bytes of SHA-256 over the 32), so a mistyped or made-up key is refused
//! before any lookup. It fits in a URL a wallet takes (`/k/{key}`, MetaMask#8479), in the
//! password of `https://:KEY@host` (viem and ethers send it as `Authorization: Basic`), or in
//! `Authorization: Bearer`. Never in a query string (proxies log those).

use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// Every key's prefix: says what the text is (a secret scanner can match it too).
pub const KEY_PREFIX: &str = "nrk_";

/// The path segment a key follows: `/k/{key}/…`.
pub const KEY_PATH: &str = "/k/";

/// The version of [`KeyHash`]: names the KV entries (`key/v1/{hash}`), so that a release that
/// hashes otherwise (a rotated secret) reads only entries it wrote.
pub const HASH_VERSION: u32 = 1;

/// The hex digits of randomness in a key.
const RANDOM_HEX: usize = 32;
/// The hex digits of checksum in a key.
const CHECK_HEX: usize = 8;

/// A well-formed key (prefix, 40 lowercase hex digits, checksum right). Its text is a secret:
/// no `Debug` or `Display` shows it, so it never reaches a log by a format string.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(…)")
    }
}

/// Why a text is no key (said to the client as is: it names no part of the text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// Not `nrk_` and 40 lowercase hex digits.
    Shape,
    /// The checksum does not match: a typo, or a guess.
    Checksum,
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Malformed::Shape => "malformed API key: nrk_ and 40 lowercase hex digits expected",
            Malformed::Checksum => "malformed API key: its checksum does not match",
        })
    }
}

/// The 8 hex digits of checksum of a key's 32 of randomness.
fn checksum(random_hex: &str) -> String {
    let digest = Sha256::digest(random_hex.as_bytes());
    crate::hex::encode(&digest[..CHECK_HEX / 2])
        .trim_start_matches("0x")
        .to_string()
}

impl ApiKey {
    /// Parses a key's text: [`Malformed`] when it is not one.
    pub fn parse(text: &str) -> Result<ApiKey, Malformed> {
        let body = text.strip_prefix(KEY_PREFIX).ok_or(Malformed::Shape)?;
        let hex_lower = |c: u8| c.is_ascii_digit() || (b'a'..=b'f').contains(&c);
        if body.len() != RANDOM_HEX + CHECK_HEX || !body.bytes().all(hex_lower) {
            return Err(Malformed::Shape);
        }
        let (random, check) = body.split_at(RANDOM_HEX);
        if checksum(random) != check {
            return Err(Malformed::Checksum);
        }
        Ok(ApiKey(text.to_string()))
    }

    /// A new key from 16 random bytes (a UUID v4's: 122 bits of randomness).
    pub fn from_random(bytes: [u8; 16]) -> ApiKey {
        let random = crate::hex::encode(&bytes)
            .trim_start_matches("0x")
            .to_string();
        let check = checksum(&random);
        ApiKey(format!("{KEY_PREFIX}{random}{check}"))
    }

    /// The key's text: for the one answer that hands a new key to the operator, nothing else.
    pub fn reveal(&self) -> &str {
        &self.0
    }

    /// The key's hash under `secret` (`RELAY_SECRET`'s bytes), [`KeyHash`].
    pub fn hash(&self, secret: &[u8]) -> KeyHash {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("any key length");
        mac.update(b"nonce-relay api key v1\0");
        mac.update(self.0.as_bytes());
        let tag = mac.finalize().into_bytes();
        KeyHash(
            crate::hex::encode(&tag)
                .trim_start_matches("0x")
                .to_string(),
        )
    }
}

/// A key's HMAC-SHA256 under `RELAY_SECRET`, 64 lowercase hex digits: what names its KV entry,
/// its Durable Object and its rate-limit counter. It says nothing of the key without the secret.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyHash(String);

impl KeyHash {
    /// Reads 64 lowercase hex digits (the admin API's and the object's own records).
    pub fn parse(text: &str) -> Option<KeyHash> {
        (text.len() == 64
            && text
                .bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)))
        .then(|| KeyHash(text.to_string()))
    }

    /// The 64 hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key's id, shown in logs, metrics and the admin API: the hash's first 16 hex digits,
    /// prefixed `k_` (`k_3f2a…`).
    pub fn id(&self) -> String {
        format!("k_{}", &self.0[..16])
    }

    /// The key's KV entry: `key/v{HASH_VERSION}/{hash}`.
    pub fn kv_name(&self) -> String {
        format!("key/v{HASH_VERSION}/{}", self.0)
    }

    /// Its Durable Object's name: the KV entry's (never the key).
    pub fn object_name(&self) -> String {
        self.kv_name()
    }
}

/// The KV prefix of the entries of a key whose id is `id` (`k_` and 16 hex digits), for the
/// admin API's lookups by id: `None` for anything else.
pub fn kv_prefix_of_id(id: &str) -> Option<String> {
    let hex = id.strip_prefix("k_")?;
    (hex.len() == 16
        && hex
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)))
    .then(|| format!("key/v{HASH_VERSION}/{hex}"))
}

/// Where a request carries a key, or that it carries none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyIn {
    /// No key: keyless access (`KEYLESS`).
    None,
    /// A key, from the path or the `Authorization` header.
    Key(ApiKey),
    /// Something in a key's place that is no key: refused (HTTP 401) before any lookup.
    Malformed(Malformed),
}

/// A path's key (`/k/{key}/rest`): the key's text and the rest of the path (`/` when none);
/// `None` when the path does not start with [`KEY_PATH`].
pub fn split_key_path(path: &str) -> Option<(&str, String)> {
    let rest = path.strip_prefix(KEY_PATH)?;
    let (key, within) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    Some((
        key,
        if within.is_empty() {
            "/".into()
        } else {
            within.to_string()
        },
    ))
}

/// The key a request carries: in its path's `/k/{key}` segment (`from_path`), else in its
/// `Authorization` header: `Basic` with the key as the password (`https://:KEY@host`; a user
/// name is ignored), or `Bearer KEY`. A header that is neither, or a `Bearer` token that is not
/// a key's shape, is no key here ([`KeyIn::None`]): the admin routes' `ADMIN_TOKEN` is a bearer
/// too, and this is only asked on the RPC routes. Both a path key and a header key: the path's.
pub fn key_in(from_path: Option<&str>, authorization: Option<&str>) -> KeyIn {
    let of = |text: &str| match ApiKey::parse(text) {
        Ok(key) => KeyIn::Key(key),
        Err(why) => KeyIn::Malformed(why),
    };
    if let Some(text) = from_path {
        return of(text);
    }
    let Some(header) = authorization.map(str::trim) else {
        return KeyIn::None;
    };
    let (scheme, value) = header.split_at(header.find(' ').unwrap_or(header.len()));
    let value = value.trim();
    if scheme.eq_ignore_ascii_case("bearer") {
        return if value.starts_with(KEY_PREFIX) {
            of(value)
        } else {
            KeyIn::None
        };
    }
    if scheme.eq_ignore_ascii_case("basic") {
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(value) else {
            return KeyIn::Malformed(Malformed::Shape);
        };
        let Ok(text) = String::from_utf8(decoded) else {
            return KeyIn::Malformed(Malformed::Shape);
        };
        let password = text.split_once(':').map_or(text.as_str(), |(_, p)| p);
        return of(password);
    }
    KeyIn::None
}

#[cfg(test)]
mod tests {
    use super::*;

    const BYTES: [u8; 16] = [7; 16];

    #[test]
    fn a_key_has_a_prefix_and_a_checksum_and_hides_its_text() {
        let key = ApiKey::from_random(BYTES);
        let text = key.reveal().to_string();
        assert_eq!(text.len(), 44);
        assert!(text.starts_with("nrk_"));
        assert_eq!(ApiKey::parse(&text), Ok(key.clone()));
        assert!(!format!("{key:?}").contains(&text[4..]));
        // One digit changed: the checksum catches it.
        let mut typo = text.clone().into_bytes();
        typo[10] = if typo[10] == b'0' { b'1' } else { b'0' };
        assert_eq!(
            ApiKey::parse(std::str::from_utf8(&typo).unwrap()),
            Err(Malformed::Checksum)
        );
        for bad in [
            "",
            "nrk_",
            "abc",
            &text.to_uppercase(),
            &format!("{text}0"),
            &text[1..],
        ] {
            assert_eq!(ApiKey::parse(bad), Err(Malformed::Shape), "{bad}");
        }
    }

    #[test]
    fn the_hash_depends_on_the_secret_and_names_the_id_entry_and_object() {
        let key = ApiKey::from_random(BYTES);
        let a = key.hash(b"secret one");
        assert_eq!(a, key.hash(b"secret one"));
        assert_ne!(a, key.hash(b"secret two"));
        assert_eq!(a.as_str().len(), 64);
        assert!(!a.as_str().contains(&key.reveal()[4..36]));
        assert_eq!(a.id(), format!("k_{}", &a.as_str()[..16]));
        assert_eq!(a.kv_name(), format!("key/v1/{}", a.as_str()));
        assert_eq!(
            kv_prefix_of_id(&a.id()).unwrap(),
            format!("key/v1/{}", &a.as_str()[..16])
        );
        assert!(a.kv_name().starts_with(&kv_prefix_of_id(&a.id()).unwrap()));
        assert_eq!(kv_prefix_of_id("k_xyz"), None);
        assert_eq!(KeyHash::parse(a.as_str()), Some(a.clone()));
        assert_eq!(KeyHash::parse("00"), None);
    }

    #[test]
    fn a_key_is_found_in_the_path_then_basic_then_bearer() {
        let key = ApiKey::from_random(BYTES);
        let text = key.reveal();
        assert_eq!(
            split_key_path(&format!("/k/{text}/evm/1")),
            Some((text, "/evm/1".to_string()))
        );
        assert_eq!(
            split_key_path(&format!("/k/{text}")),
            Some((text, "/".to_string()))
        );
        assert_eq!(split_key_path("/evm/1"), None);
        assert_eq!(key_in(Some(text), None), KeyIn::Key(key.clone()));
        assert_eq!(
            key_in(Some("nope"), None),
            KeyIn::Malformed(Malformed::Shape)
        );
        let basic = |userinfo: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(userinfo)
            )
        };
        assert_eq!(
            key_in(None, Some(&basic(&format!(":{text}")))),
            KeyIn::Key(key.clone())
        );
        assert_eq!(
            key_in(None, Some(&basic(&format!("me:{text}")))),
            KeyIn::Key(key.clone())
        );
        assert_eq!(
            key_in(None, Some(&basic(":nrk_00"))),
            KeyIn::Malformed(Malformed::Shape)
        );
        assert_eq!(
            key_in(None, Some("Basic !!!")),
            KeyIn::Malformed(Malformed::Shape)
        );
        assert_eq!(
            key_in(None, Some(&format!("Bearer {text}"))),
            KeyIn::Key(key.clone())
        );
        assert_eq!(key_in(None, Some("Bearer the-admin-token")), KeyIn::None);
        assert_eq!(key_in(None, Some("Digest x")), KeyIn::None);
        assert_eq!(key_in(None, None), KeyIn::None);
    }
}
