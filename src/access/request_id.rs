//! The `X-Request-Id` of each request: the client's when it is a sane token, else a new UUID v4.
//! It comes back on the answer and is in every log line of that request.

/// The request header and answer header.
pub const HEADER: &str = "x-request-id";

/// The longest client id kept, in bytes.
pub const MAX_LEN: usize = 128;

/// The id for a request with this `X-Request-Id` header: kept when it is 1 to [`MAX_LEN`]
/// characters of `A-Z a-z 0-9 . _ : -` (no spaces, quotes or control characters that could forge
/// log lines); otherwise a new UUID v4.
pub fn request_id(header: Option<&str>) -> String {
    match header {
        Some(id)
            if !id.is_empty()
                && id.len() <= MAX_LEN
                && id.bytes().all(|b| {
                    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-')
                }) =>
        {
            id.to_string()
        }
        _ => uuid::Uuid::new_v4().hyphenated().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sane_tokens_are_kept_others_replaced_by_a_uuid() {
        assert_eq!(request_id(Some("req-42_a:b.c")), "req-42_a:b.c");
        for bad in [
            None,
            Some(""),
            Some("a b"),
            Some("x\ny"),
            Some("\"}"),
            Some(&*"a".repeat(129)),
        ] {
            let id = request_id(bad);
            assert!(uuid::Uuid::parse_str(&id).is_ok(), "{bad:?} -> {id}");
        }
        assert_ne!(request_id(None), request_id(None));
    }
}
