//! Per-client rate limits, counted per JSON-RPC request (each member of a batch counts): one limit
//! for `eth_sendRawTransaction`, one for everything else. The counting is the platform's (the
//! Workers Rate Limiting bindings `RATE_LIMIT_SEND` and `RATE_LIMIT_READ`, keyed by the client's
//! IP, or by a valid API key's id); this is what is counted, which binding counts it
//! ([`binding_name`]: an API key's tier has bindings of its own) and what a client over a limit
//! gets.

use crate::jsonrpc::{self, Body, Id, ParsedRequest, Response, RpcError, LIMIT_EXCEEDED};

/// Which limit a request counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bucket {
    /// `eth_sendRawTransaction`, its send-and-wait and conditional forms, and
    /// `eth_sendPrivateTransaction` ([`jsonrpc::is_send`]); a private cancel counts as a read.
    Send,
    /// Any other request, malformed ones included.
    Read,
}

/// The rate limit binding of sends (wrangler.toml `[[ratelimits]]`).
pub const SEND_BINDING: &str = "RATE_LIMIT_SEND";
/// The rate limit binding of every other request.
pub const READ_BINDING: &str = "RATE_LIMIT_READ";

/// The most characters of a tier's name.
pub const TIER_MAX_CHARS: usize = 32;

/// Whether `tier` may name a rate-limit tier: 1 to [`TIER_MAX_CHARS`] of `a-z`, `0-9` and `_`
/// (its bindings' names are it in capitals).
pub fn tier_name_ok(tier: &str) -> bool {
    (1..=TIER_MAX_CHARS).contains(&tier.len())
        && tier
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The binding that counts `bucket`: [`SEND_BINDING`] or [`READ_BINDING`], or for an API key of
/// the tier `tier` (its record's `tier`, [`tier_name_ok`]) the same followed by `_` and the tier
/// in capitals (`pro`: `RATE_LIMIT_SEND_PRO`, `RATE_LIMIT_READ_PRO`). A binding's limit and
/// period are fixed at deploy (wrangler.toml), so a tier is a pair of bindings, and a key names
/// its tier.
pub fn binding_name(bucket: Bucket, tier: Option<&str>) -> String {
    let base = match bucket {
        Bucket::Send => SEND_BINDING,
        Bucket::Read => READ_BINDING,
    };
    match tier {
        Some(tier) => format!("{base}_{}", tier.to_ascii_uppercase()),
        None => base.to_string(),
    }
}

/// How many requests of a body count against each limit: `(sends, reads)`.
pub fn count(requests: &[&ParsedRequest]) -> (usize, usize) {
    let sends = requests
        .iter()
        .filter(|e| e.as_ref().is_ok_and(|r| jsonrpc::is_send(&r.method)))
        .count();
    (sends, requests.len() - sends)
}

/// The error every member of a refused body gets: -32005 (EIP-1474 limit exceeded).
pub fn exceeded() -> RpcError {
    RpcError::new(LIMIT_EXCEEDED, "rate limit exceeded")
}

/// The answer body to a refused body: the error with each request's id (a batch answers each
/// member, notifications included, since the whole body was refused).
pub fn refusal(requests: &[&ParsedRequest], batch: bool) -> Body {
    refusal_with(requests, batch, &exceeded())
}

/// [`refusal`] with `error` for each request (an API key's refusal); a body that is not
/// JSON-RPC (no request) gets it once, with a null id.
pub fn refusal_with(requests: &[&ParsedRequest], batch: bool, error: &RpcError) -> Body {
    if requests.is_empty() {
        return Body::One(Response::error(&Id::null(), error));
    }
    let mut answers: Vec<Response> = requests
        .iter()
        .map(|e| {
            let id = e.as_ref().ok().map_or_else(Id::null, |r| r.response_id());
            Response::error(&id, error)
        })
        .collect();
    match (batch, answers.pop()) {
        (false, Some(one)) => Body::One(one),
        (_, last) => {
            answers.extend(last);
            Body::Batch(answers)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::{parse, Incoming};
    use serde_json::Value;

    #[test]
    fn a_tier_names_its_own_pair_of_bindings() {
        assert_eq!(binding_name(Bucket::Send, None), "RATE_LIMIT_SEND");
        assert_eq!(binding_name(Bucket::Read, None), "RATE_LIMIT_READ");
        assert_eq!(
            binding_name(Bucket::Send, Some("pro")),
            "RATE_LIMIT_SEND_PRO"
        );
        assert_eq!(
            binding_name(Bucket::Read, Some("partner_2")),
            "RATE_LIMIT_READ_PARTNER_2"
        );
        for ok in ["pro", "a", "tier_1", &"x".repeat(32)] {
            assert!(tier_name_ok(ok), "{ok}");
        }
        for bad in ["", "Pro", "pro-1", "pro tier", "é", &"x".repeat(33)] {
            assert!(!tier_name_ok(bad), "{bad}");
        }
    }

    #[test]
    fn a_batch_counts_each_member_in_its_bucket() {
        let body = br#"[{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":["0x"]},
                        {"jsonrpc":"2.0","id":2,"method":"eth_call","params":[]}, 7,
                        {"jsonrpc":"2.0","id":3,"method":"eth_sendRawTransaction","params":["0x"]}]"#;
        let Incoming::Batch(requests) = parse(body, 10).unwrap() else {
            panic!()
        };
        let refs: Vec<&ParsedRequest> = requests.iter().collect();
        assert_eq!(count(&refs), (2, 2));
        let answer: Value = serde_json::from_str(&refusal(&refs, true).render()).unwrap();
        assert_eq!(answer.as_array().unwrap().len(), 4);
        assert_eq!(answer[0]["id"], 1);
        assert_eq!(answer[0]["error"]["code"], -32005);
        assert_eq!(answer[0]["error"]["message"], "rate limit exceeded");
        assert_eq!(answer[2]["id"], Value::Null);
    }
}
