use super::*;
use crate::ordering::answer::AnswerClass;
use crate::ordering::tx::SendMethod;
use crate::upstream::classify;
use crate::upstream::UpstreamReply;

const MEMPOOL: PoolKind = PoolKind::Mempool;
const STRICT: PoolKind = PoolKind::Strict;

/// A transaction whose request is [`REQUEST`].
fn signed() -> SignedTx {
    SignedTx {
        hash: [0xab; 32],
        nonce: 4,
        chain_id: Some(1),
        raw: vec![0x02],
        method: SendMethod::Plain,
        public_after_blocks: None,
        self_cancel: false,
    }
}
const REQUEST: &str =
    r#"{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":["0x02"]}"#;

fn ok(body: &str) -> Result<UpstreamReply, UpstreamError> {
    Ok(UpstreamReply::ok(body))
}
fn lost() -> Result<UpstreamReply, UpstreamError> {
    Err(UpstreamError::Unreachable(
        "Network connection lost.".into(),
    ))
}

#[test]
fn only_six_or_more_ready_sends_to_one_mempool_upstream_are_batched() {
    assert!(batched(MEMPOOL, 6, 1));
    assert!(batched(MEMPOOL, 16, 1));
    assert!(
        !batched(MEMPOOL, 5, 1),
        "fewer fit the six connections alone"
    );
    assert!(!batched(STRICT, 6, 1));
    assert!(
        !batched(MEMPOOL, 6, 2),
        "several upstreams: each alone, hedged or broadcast"
    );
}

#[test]
fn a_batch_of_sends_in_order_and_each_members_part_of_the_answer() {
    let (a, mut b) = (signed(), signed());
    b.raw = vec![0x03];
    assert_eq!(
        batch_body(&[&a, &b]),
        format!(
            "[{REQUEST},{}]",
            REQUEST
                .replace(r#""id":1"#, r#""id":2"#)
                .replace("0x02", "0x03")
        )
    );
    // Answers by id in any order; a member left out is not attempted.
    let parts = split_batch(
        &ok(
            r#"[{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"nonce too low"}},{"jsonrpc":"2.0","id":1,"result":"0xabab"}]"#,
        ),
        3,
    );
    let class = |i: usize| classify(parts[i].as_ref().expect("answered")).0;
    assert_eq!(class(0), AnswerClass::Accepted);
    assert_eq!(class(1), AnswerClass::NonceTooLow);
    assert_eq!(parts[2], None);
    // No usable answer to the batch (lost, hung, HTTP 503 without JSON): every member goes
    // alone, its own attempts intact.
    assert_eq!(split_batch(&lost(), 2), vec![None, None]);
    let busy = Ok(UpstreamReply {
        status: 503,
        body: "<html>".into(),
        retry_after_ms: Some(1_000),
        answerer: None,
    });
    assert_eq!(split_batch(&busy, 2), vec![None, None]);
    assert_eq!(judge(2, &busy), BatchAnswer::Failed);
}

fn status(status: u16, body: &str) -> Result<UpstreamReply, UpstreamError> {
    Ok(UpstreamReply {
        status,
        body: body.into(),
        retry_after_ms: None,
        answerer: None,
    })
}

/// Each node's answer to a batch over its limit, as its code words it: the batch is refused
/// whole, every member goes alone, and the limit is read where the text names it.
#[test]
fn every_nodes_batch_limit_answer_is_a_refusal_of_the_whole_batch() {
    #[rustfmt::skip]
    let refusals: &[(&str, Result<UpstreamReply, UpstreamError>, Option<usize>)] = &[
        // geth rpc/handler.go: an array of one error with the first member's id.
        ("geth", ok(r#"[{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"batch too large"}}]"#), None),
        // Erigon: the same shape, naming its --rpc.batch.limit.
        ("erigon", ok(r#"[{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"batch limit 100 exceeded (can increase by --rpc.batch.limit)"}}]"#), Some(100)),
        // Besu: one error object.
        ("besu", ok(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"Number of requests exceeds max batch size"}}"#), None),
        // jsonrpsee (reth): one error object.
        ("reth", ok(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32010,"message":"The batch request was too large"}}"#), None),
        // Hedera's JSON-RPC relay: one error object naming its BATCH_REQUESTS_MAX_SIZE.
        ("hedera", ok(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32203,"message":"Batch request amount 6 exceeds max 5"}}"#), Some(5)),
        // Nethermind: HTTP 503 with JSON.
        ("nethermind", status(503, r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Batch size limit exceeded"}}"#), None),
        // A node without batches at all.
        ("no batches", ok(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch not supported"}}"#), None),
    ];
    for (node, reply, limit) in refusals {
        assert_eq!(
            judge(6, reply),
            BatchAnswer::Refused { limit: *limit },
            "{node}"
        );
        assert_eq!(split_batch(reply, 6), vec![None; 6], "{node}");
    }
    // A batch of one answered with one error is that member's answer.
    let one = ok(r#"[{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"nonce too low"}}]"#);
    assert_eq!(
        judge(1, &one),
        BatchAnswer::Parts {
            answered: 1,
            not_attempted: 0
        }
    );
    // An HTTP error whose JSON says nothing of batches teaches nothing.
    let down = status(
        503,
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal"}}"#,
    );
    assert_eq!(judge(6, &down), BatchAnswer::Failed);
}

/// Per-member rate limits inside a 200 array (QuickNode, Chainstack, Alchemy) and methods not
/// served in a batch: those members are not attempted; the others are answers.
#[test]
fn a_members_rate_limit_or_batch_error_means_not_attempted() {
    let reply = ok(concat!(
        r#"[{"jsonrpc":"2.0","id":1,"result":"0xabab"},"#,
        r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32007,"message":"25/second request limit reached - reduce calls per second or upgrade your account at quicknode.com"}},"#,
        r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32005,"message":"You've exceeded the RPS limit available on the current plan."}},"#,
        r#"{"jsonrpc":"2.0","id":4,"error":{"code":429,"message":"Your app has exceeded its compute units per second capacity."}},"#,
        r#"{"jsonrpc":"2.0","id":5,"error":{"code":-32600,"message":"eth_sendRawTransaction is not supported in batch requests"}},"#,
        r#"{"jsonrpc":"2.0","id":6,"error":{"code":-32000,"message":"insufficient funds for gas * price + value"}}]"#
    ));
    assert_eq!(
        judge(6, &reply),
        BatchAnswer::Parts {
            answered: 6,
            not_attempted: 4
        }
    );
    let parts = split_batch(&reply, 6);
    let attempted: Vec<bool> = parts.iter().map(Option::is_some).collect();
    assert_eq!(attempted, [true, false, false, false, false, true]);
}

/// Learned per upstream: a refusal stops batches for a while, then caps them; a full answer
/// raises nothing; rate-limited members cap at what was served; another upstream is untouched.
#[test]
fn each_upstreams_batch_limit_is_learned_from_its_answers() {
    let mut limits = BatchLimits::default();
    let served = BatchAnswer::Parts {
        answered: 4,
        not_attempted: 0,
    };
    assert_eq!(limits.limit("a", 0), usize::MAX);
    assert_eq!(limits.learn("a", 4, served, 0), None);
    // Refused at 16 with no limit named: none for a while, then the largest answered (4).
    assert_eq!(
        limits.learn("a", 16, BatchAnswer::Refused { limit: None }, 1_000),
        Some(4)
    );
    assert_eq!(limits.limit("a", 1_000 + NO_BATCH_MS - 1), 1, "no batch");
    assert_eq!(limits.limit("a", 1_000 + NO_BATCH_MS), 4);
    assert_eq!(limits.limit("b", 1_000), usize::MAX, "per upstream");
    // Erigon names its limit; with nothing answered before, half the refused size otherwise.
    assert_eq!(
        limits.learn("b", 150, BatchAnswer::Refused { limit: Some(100) }, 0),
        Some(100)
    );
    assert_eq!(
        limits.learn("c", 10, BatchAnswer::Refused { limit: None }, 0),
        Some(5)
    );
    // Rate-limited members: batches of at most what was served, at once.
    let limited = BatchAnswer::Parts {
        answered: 40,
        not_attempted: 15,
    };
    assert_eq!(limits.learn("d", 40, limited, 0), Some(25));
    assert_eq!(limits.limit("d", 0), 25);
    assert_eq!(limits.learn("d", 25, limited, 0), None, "no lower");
    assert_eq!(limits.learn("e", 4, BatchAnswer::Failed, 0), None);
    assert_eq!(limits.limit("e", 0), usize::MAX);
}
