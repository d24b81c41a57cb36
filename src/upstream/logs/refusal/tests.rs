//! Each provider's refusal, verbatim, read as what it says.

use super::*;

/// A JSON-RPC error response with `code`, `message` and `data` (JSON text, `null` for none).
fn error(code: i64, message: &str, data: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"error":{{"code":{code},"message":{},"data":{data}}}}}"#,
        serde_json::to_string(message).unwrap()
    )
}

fn range(blocks: Option<u64>) -> Option<Said> {
    Some(Said::RangeCap {
        blocks,
        suggested: None,
    })
}

#[test]
fn each_node_and_providers_range_cap_with_its_number() {
    for (status, body, want) in [
        // geth 1.17.3+ (-32602) and before (-32000, a colon).
        (
            200,
            error(-32602, "exceed maximum block range 10000", "null"),
            range(Some(10_000)),
        ),
        (
            200,
            error(-32000, "exceed maximum block range: 5000", "null"),
            range(Some(5_000)),
        ),
        // Erigon.
        (
            200,
            error(
                -32000,
                "query block range exceeds server limit, narrow your filter: 1000",
                "null",
            ),
            range(Some(1_000)),
        ),
        // reth.
        (
            200,
            error(-32602, "query exceeds max block range 100000", "null"),
            range(Some(100_000)),
        ),
        // Besu names no number.
        (
            200,
            error(
                -32005,
                "Requested range exceeds maximum RPC range limit",
                "null",
            ),
            range(None),
        ),
        // Nethermind: the cap is the second number.
        (
            200,
            error(
                -32602,
                "Block range 50000 exceeds the maximum of 10000 blocks per logs request. Use a narrower fromBlock/toBlock range or increase Receipt.MaxBlockDepth.",
                "null",
            ),
            range(Some(10_000)),
        ),
        // Hedera's JSON-RPC relay, HTTP 400.
        (
            400,
            error(-32000, "Exceeded maximum block range: 1000", "null"),
            range(Some(1_000)),
        ),
        // Infura since August 2026.
        (
            200,
            error(-32602, "range 50000 exceeds limit of 10000", "null"),
            range(Some(10_000)),
        ),
        // QuickNode, HTTP 413.
        (
            413,
            error(-32614, "eth_getLogs is limited to a 10,000 range", "null"),
            range(Some(10_000)),
        ),
        // dRPC.
        (
            200,
            error(
                35,
                "ranges over 10000 blocks are not supported on freetier",
                "null",
            ),
            range(Some(10_000)),
        ),
        // Cloudflare's Ethereum gateway.
        (
            200,
            error(-32047, "Invalid eth_getLogs request. 'fromBlock'-'toBlock' range too large. Max range: 800", "null"),
            range(Some(800)),
        ),
        // QuickNode's free plan, dRPC's newer wording.
        (200, error(-32615, "eth_getLogs is limited to a 5 range", "null"), range(Some(5))),
        (200, error(35, "ranges over 10000 blocks are not supported on free plan", "null"), range(Some(10_000))),
    ] {
        assert_eq!(read(status, &body), want, "{body}");
    }
}

#[test]
fn a_suggested_range_is_read_from_the_text_or_the_data() {
    // Alchemy's free tier: a range cap and a range that works.
    let alchemy = error(
        -32600,
        "Under the Free tier plan, you can make eth_getLogs requests with up to a 10 block range. Based on your parameters, this block range should work: [0x1, 0xa]. Upgrade to PAYG for expanded block range.",
        "null",
    );
    assert_eq!(
        read(200, &alchemy),
        Some(Said::RangeCap {
            blocks: Some(10),
            suggested: Some((1, 10))
        })
    );
    // Alchemy's response size cap: results, "2K" blocks named in passing.
    let size = error(
        -32602,
        "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range and no limit on the response size, or you can request any block range with a cap of 10K logs in the response. Based on your parameters and the response size limit, this block range should work: [0x10, 0x3ff]",
        "null",
    );
    assert_eq!(
        read(200, &size),
        Some(Said::ResultCap {
            suggested: Some((16, 1_023))
        })
    );
    // Infura: 10,000 results, the hint in the text and in data.
    let infura = error(
        -32005,
        "query returned more than 10000 results. Try with this block range [0x30D40, 0x31A5F].",
        r#"{"from":"0x30D40","to":"0x31A5F","limit":10000}"#,
    );
    assert_eq!(
        read(200, &infura),
        Some(Said::ResultCap {
            suggested: Some((200_000, 203_359))
        })
    );
    // reth: the range in decimal.
    let reth = error(
        -32602,
        "query exceeds max results 20000, retry with the range 100-1099",
        "null",
    );
    assert_eq!(
        read(200, &reth),
        Some(Said::ResultCap {
            suggested: Some((100, 1_099))
        })
    );
}

#[test]
fn result_caps_without_a_hint() {
    for body in [
        error(
            -32000,
            "query returns too many logs, narrow your filter: 20000",
            "null",
        ),
        error(
            -32005,
            "Too many logs requested. Max logs per response is 20000.",
            "null",
        ),
        error(-32005, "query returned more than 10000 results", "null"),
    ] {
        assert_eq!(
            read(200, &body),
            Some(Said::ResultCap { suggested: None }),
            "{body}"
        );
    }
    // Nethermind's streamed answer cut short: a result, but not the whole answer.
    let truncated =
        r#"{"jsonrpc":"2.0","result":[{"blockNumber":"0x1"}],"_streamStatus":"truncated","id":1}"#;
    assert_eq!(
        read(200, truncated),
        Some(Said::ResultCap { suggested: None })
    );
}

#[test]
fn filter_caps_and_rate_limits_are_never_range_caps() {
    for body in [
        error(
            -32000,
            "exceed max addresses or topics per search position",
            "null",
        ),
        error(
            -32602,
            "query exceeds the maximum of 1000 addresses or topics per search position",
            "null",
        ),
        error(-32602, "invalid argument 0: exceed max topics", "null"),
    ] {
        assert_eq!(read(200, &body), Some(Said::FilterCap), "{body}");
    }
    // -32005 with a rate limit's words (EIP-1474 "limit exceeded"), HTTP 429, or -32029.
    assert_eq!(
        read(200, &error(-32005, "rate limit exceeded", "null")),
        Some(Said::RateLimited)
    );
    assert_eq!(
        read(429, "<html>Too Many Requests</html>"),
        Some(Said::RateLimited)
    );
    assert_eq!(
        read(200, &error(-32029, "slow down", "null")),
        Some(Said::RateLimited)
    );
    assert_eq!(
        read(200, &error(-32005, "limit exceeded", "null")),
        None,
        "-32005 alone says no cap"
    );
}

#[test]
fn an_answer_or_another_error_says_nothing() {
    assert_eq!(read(200, r#"{"jsonrpc":"2.0","id":1,"result":[]}"#), None);
    assert_eq!(
        read(
            200,
            &error(
                -32602,
                "invalid argument 0: hex string has odd length",
                "null"
            )
        ),
        None
    );
    assert_eq!(read(200, &error(-32000, "header not found", "null")), None);
    assert_eq!(read(502, "<html>Bad Gateway</html>"), None);
}

#[test]
fn every_pattern_has_a_source_and_words_in_lowercase() {
    for p in PATTERNS {
        assert!(!p.source.is_empty());
        assert_eq!(p.words, p.words.to_ascii_lowercase(), "{}", p.source);
    }
}
