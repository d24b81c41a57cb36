//! What a node's or provider's refusal of an `eth_getLogs` says ([`read`]): a cap on the blocks
//! of one query, a cap on the logs of one answer (with the range it suggests, when it does), a cap
//! on the filter's addresses or topics, or a rate limit. Read by its words first, then its code:
//! -32005 is a range cap (Besu), a result cap (Infura, Nethermind) or a rate limit (EIP-1474's
//! "limit exceeded") depending on who says it. Each pattern of [`PATTERNS`] names its source and is
//! tested against its text verbatim (below).

use serde_json::Value;

/// What a refusal said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Said {
    /// At most `blocks` blocks in one query (`None`: the cap was not said).
    RangeCap {
        /// The cap, blocks, when the refusal names it.
        blocks: Option<u64>,
        /// A range the refusal suggests (first and last block), when it names one.
        suggested: Option<(u64, u64)>,
    },
    /// Too many logs for one answer; a range the refusal suggests (first and last block) when it
    /// names one. Splitting helps; the cap on logs is the provider's.
    ResultCap {
        /// The suggested range, when the refusal names one.
        suggested: Option<(u64, u64)>,
    },
    /// Too many addresses or topics in the filter: splitting the range does not help.
    FilterCap,
    /// A rate limit: never split (more pieces would be more requests).
    RateLimited,
}

/// What a pattern's match means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A block range cap; the cap is the first number after `number_after` (or after the words).
    Range,
    /// A result cap.
    Results,
    /// An address or topic cap.
    Filter,
}

/// One known refusal: its words (lowercase, matched in the lowercased message), what it means,
/// where the cap's number follows, and its source.
#[derive(Debug, Clone, Copy)]
pub struct Pattern {
    /// Who says it, and where (the node's source file or the provider's documentation).
    pub source: &'static str,
    /// The words that identify it.
    pub words: &'static str,
    /// What it means.
    pub kind: Kind,
    /// The cap's number is the first after these words (`""`: after `words`).
    pub number_after: &'static str,
}

/// The known refusals, in the order they are tried (the more specific first).
pub const PATTERNS: &[Pattern] = &[
    Pattern { source: "reth crates/rpc/rpc/src/eth/filter.rs EthFilterError::QueryExceedsMaxResults (-32602)", words: "query exceeds max results", kind: Kind::Results, number_after: "" },
    Pattern { source: "reth crates/rpc/rpc/src/eth/filter.rs EthFilterError::QueryExceedsMaxBlocks (-32602)", words: "query exceeds max block range", kind: Kind::Range, number_after: "" },
    Pattern { source: "Erigon rpc/jsonrpc/eth_receipts.go --rpc.blockrange.limit (-32000, -32602 since #20424)", words: "query block range exceeds server limit", kind: Kind::Range, number_after: "" },
    Pattern { source: "Erigon rpc/jsonrpc/eth_receipts.go max results", words: "query returns too many logs", kind: Kind::Results, number_after: "" },
    Pattern { source: "go-ethereum eth/filters/api.go errExceedLogQueryLimit (-32000); Erigon before and since #22014", words: "addresses or topics per search position", kind: Kind::Filter, number_after: "" },
    Pattern { source: "go-ethereum eth/filters errExceedMaxTopics (-32602 \"invalid argument 0: exceed max topics\")", words: "exceed max topics", kind: Kind::Filter, number_after: "" },
    Pattern { source: "go-ethereum eth/filters/filter.go --rpc.rangelimit (-32602 since 1.17.3; -32000 with a colon before)", words: "exceed maximum block range", kind: Kind::Range, number_after: "" },
    Pattern { source: "Besu RpcErrorType.EXCEEDS_RPC_MAX_BLOCK_RANGE, EthGetLogs.java --rpc-max-logs-range (-32005)", words: "exceeds maximum rpc range limit", kind: Kind::Range, number_after: "" },
    Pattern { source: "Nethermind EthRpcModule.cs Receipt.MaxBlockDepth (-32602)", words: "blocks per logs request", kind: Kind::Range, number_after: "maximum of" },
    Pattern { source: "Nethermind EthRpcModule.cs max logs per response (-32005)", words: "too many logs requested", kind: Kind::Results, number_after: "" },
    Pattern { source: "Hedera JSON-RPC relay JsonRpcError.ts RANGE_TOO_LARGE, ETH_GET_LOGS_BLOCK_RANGE_LIMIT (HTTP 400, -32000)", words: "exceeded maximum block range", kind: Kind::Range, number_after: "" },
    Pattern { source: "Alchemy, 10K logs per response (-32602, observed)", words: "log response size exceeded", kind: Kind::Results, number_after: "" },
    Pattern { source: "Alchemy, free tier block range (-32600, observed)", words: "eth_getlogs requests with up to a", kind: Kind::Range, number_after: "up to a" },
    Pattern { source: "Infura, 10,000 results (-32005, hint in data {from, to, limit}; observed)", words: "query returned more than", kind: Kind::Results, number_after: "" },
    Pattern { source: "Infura, block range since 2026-08 (-32602, observed)", words: "exceeds limit of", kind: Kind::Range, number_after: "limit of" },
    Pattern { source: "QuickNode (HTTP 413, -32614; -32615 on the free plan; observed)", words: "is limited to a", kind: Kind::Range, number_after: "" },
    Pattern { source: "dRPC (code 35; observed)", words: "blocks are not supported", kind: Kind::Range, number_after: "ranges over" },
    Pattern { source: "Cloudflare Ethereum gateway (-32047; observed)", words: "max range:", kind: Kind::Range, number_after: "" },
];

/// A JSON-RPC error's code, message and data, from an answer `body` (a single response).
fn error_of(body: &str) -> Option<(i64, String, Value)> {
    let v: Value = serde_json::from_str(body).ok()?;
    let e = v.get("error")?;
    Some((
        e.get("code").and_then(Value::as_i64).unwrap_or(0),
        e.get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        e.get("data").cloned().unwrap_or(Value::Null),
    ))
}

/// What the upstream's answer to an `eth_getLogs` (HTTP `status`, `body`) says of its limits;
/// `None` for an answer (or an error) that says none. A result marked
/// `"_streamStatus":"truncated"` (Nethermind's streaming) is a result cap: it is not the whole
/// answer.
pub fn read(status: u16, body: &str) -> Option<Said> {
    if body.contains("\"_streamStatus\"") && body.contains("\"truncated\"") {
        return Some(Said::ResultCap { suggested: None });
    }
    let Some((code, message, data)) = error_of(body) else {
        return (status == 429).then_some(Said::RateLimited);
    };
    let lower = message.to_ascii_lowercase();
    if let Some(p) = PATTERNS.iter().find(|p| lower.contains(p.words)) {
        let suggested = suggested(&lower, &data);
        return Some(match p.kind {
            Kind::Range => Said::RangeCap {
                blocks: cap_after(
                    &lower,
                    if p.number_after.is_empty() {
                        p.words
                    } else {
                        p.number_after
                    },
                ),
                suggested,
            },
            Kind::Results => Said::ResultCap { suggested },
            Kind::Filter => Said::FilterCap,
        });
    }
    // No words known: a rate limit by its words or its status (-32005 alone says nothing more).
    let rate = [
        "rate limit",
        "too many requests",
        "exceeded the rate",
        "capacity",
    ];
    (status == 429 || rate.iter().any(|w| lower.contains(w)) || code == -32029)
        .then_some(Said::RateLimited)
}

/// The first whole number (digits, with `,` or `_` between groups) after `words` in `text`.
fn cap_after(text: &str, words: &str) -> Option<u64> {
    let rest = &text[text.find(words)? + words.len()..];
    let start = rest.find(|c: char| c.is_ascii_digit())?;
    let digits: String = rest[start..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',' || *c == '_')
        .filter(char::is_ascii_digit)
        .collect();
    // "2k block range" (Alchemy's response-size text): thousands.
    let after =
        rest[start..].trim_start_matches(|c: char| c.is_ascii_digit() || c == ',' || c == '_');
    let n: u64 = digits.parse().ok()?;
    Some(if after.starts_with('k') {
        n.saturating_mul(1_000)
    } else {
        n
    })
}

/// A range the refusal suggests: `data` `{"from","to"}` (Infura), two hex block numbers in
/// brackets (`[0x…, 0x…]`: Alchemy, Infura), or `the range A-B` (reth).
fn suggested(lower: &str, data: &Value) -> Option<(u64, u64)> {
    let hex = |v: &Value| {
        v.as_str()
            .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
    };
    if let (Some(from), Some(to)) = (data.get("from").and_then(hex), data.get("to").and_then(hex)) {
        return Some((from, to));
    }
    if let Some(open) = lower.rfind('[') {
        let inner = lower[open + 1..].split(']').next()?;
        let mut numbers = inner
            .split(',')
            .map(|s| u64::from_str_radix(s.trim().trim_start_matches("0x"), 16));
        if let (Some(Ok(from)), Some(Ok(to))) = (numbers.next(), numbers.next()) {
            return Some((from, to));
        }
    }
    let range = &lower[lower.find("the range ")? + "the range ".len()..];
    let (a, b) = range.split_once('-')?;
    let b: String = b.chars().take_while(char::is_ascii_digit).collect();
    Some((a.trim().parse().ok()?, b.parse().ok()?))
}

#[cfg(test)]
mod tests;
