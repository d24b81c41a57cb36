use super::*;
use crate::ordering::answer::AnswerClass;
use crate::ordering::tx::SendMethod;
use crate::upstream::classify;

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
    // Answers by id in any order; a member left out, or an answer that is not an array (a
    // node that refuses batches), is no answer for it.
    let parts = split_batch(
        &ok(
            r#"[{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"nonce too low"}},{"jsonrpc":"2.0","id":1,"result":"0xabab"}]"#,
        ),
        3,
    );
    assert_eq!(classify(&parts[0]).0, AnswerClass::Accepted);
    assert_eq!(classify(&parts[1]).0, AnswerClass::NonceTooLow);
    assert_eq!(parts[2], Err(UpstreamError::Invalid));
    let refused = ok(
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch not supported"}}"#,
    );
    assert_eq!(
        split_batch(&refused, 2),
        vec![Err(UpstreamError::Invalid); 2]
    );
    // No usable answer to the batch: the same for every member.
    assert_eq!(split_batch(&lost(), 2), vec![lost(), lost()]);
    let busy = Ok(UpstreamReply {
        status: 503,
        body: "<html>".into(),
        retry_after_ms: Some(1_000),
    });
    assert_eq!(split_batch(&busy, 2), vec![busy.clone(), busy]);
}
