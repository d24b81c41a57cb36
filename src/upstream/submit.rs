//! Sending one transaction to the upstream until it has a final answer: the sender's holder does
//! this inside the lock, and the Worker's direct path (fail-open, `ENABLE_NONCE_ORDERING=false`)
//! does it too.
//!
//! 1. The request text (made by the relay from the checked request, with the original signed
//!    bytes) is POSTed; an answer that says nothing about the transaction
//!    ([`AnswerClass::retryable`]) is retried with the same text after a jittered backoff, within
//!    the [`RetryPolicy`] and never past the deadline. Under a strict upstream pool
//!    (`UPSTREAM_POOL=strict`, Hedera, where a copy of a transaction the node took is a charged
//!    refusal) a send whose answer was lost after it may have arrived is first looked up by hash;
//!    on a mempool a resend is the cheap path (the node answers "already known").
//! 2. A "nonce too low" (or Hedera's direction-less "wrong nonce") may be the transaction itself,
//!    already in: a retry after a lost answer, or a client resending. The upstream is asked
//!    `eth_getTransactionByHash`; if it has the transaction (pending or mined), it is
//!    [`AnswerClass::AlreadyKnown`]. If it does not, but an earlier send may have arrived, the
//!    outcome is unknown, not refused (the pool may have dropped it meanwhile): the answer is
//!    [`AnswerClass::Unavailable`] with -32002 and the hash, so that the sender's object keeps it
//!    and checks it by hash again (and sends it again from its bytes while its nonce is free).
//! 3. "Already known" answers are the hash: the transaction went in.
//!
//! Several transactions of one sender's send window may go as one JSON-RPC batch, in nonce order
//! ([`post_batch`]): one connection instead of one each, since Cloudflare lets a Worker invocation
//! (and a Durable Object, whose concurrent requests share one I/O context) have only six
//! connections waiting for response headers and queues the rest. Each member's part of the batch's
//! answer is its first attempt, and it goes on from there alone ([`submit_after`]): retried,
//! checked by hash, classified as if it had been sent alone.

use crate::hex;
use crate::jsonrpc::{Answer, RpcError, RESOURCE_UNAVAILABLE};
use crate::metrics::Metric;
use crate::ordering::answer::AnswerClass;
use crate::ordering::sender::{PoolKind, Sent};
use crate::ordering::tx::SignedTx;
use crate::transaction::TxHash;
use crate::upstream::lookup::post_retried;
use crate::upstream::retry::RetryPolicy;
use crate::upstream::Platform;
use crate::upstream::{
    classify, error_metric, may_have_arrived, CallKind, UpstreamError, UpstreamReply,
};
use serde_json::Value;

/// The method whose answers [`submit`] classifies.
const METHOD: &str = "eth_sendRawTransaction";

/// Sends `tx` ([`SignedTx::request`]) for `sender` (lowercase 0x hex, for metrics) until it has
/// a final answer, by `deadline_ms` (Unix ms); `pool` says what the upstream does with a copy of
/// a transaction it took (see the module documentation). Emits a `tx_retried` metric for each
/// retry, a `tx_outcome_unknown` one when a nonce refusal follows a send that may have arrived
/// and the upstream does not have the transaction, and an `upstream_error` one when the upstream
/// could not be used at the end.
pub async fn submit<P: Platform + ?Sized>(
    upstream: &P,
    tx: &SignedTx,
    sender: &str,
    pool: PoolKind,
    policy: &RetryPolicy,
    deadline_ms: u64,
) -> Sent {
    submit_after(upstream, tx, sender, pool, policy, deadline_ms, None).await
}

/// [`submit`], whose first attempt was already made when `first` is given (its reply: a member's
/// part of a batch, [`post_batch`]): that reply is judged as the first attempt's, and the send goes
/// on from there alone.
pub async fn submit_after<P: Platform + ?Sized>(
    upstream: &P,
    tx: &SignedTx,
    sender: &str,
    pool: PoolKind,
    policy: &RetryPolicy,
    deadline_ms: u64,
    first: Option<Result<UpstreamReply, UpstreamError>>,
) -> Sent {
    let to = Attempt {
        kind: CallKind::Send,
        pool,
    };
    send_until_final(upstream, tx, sender, to, policy, deadline_ms, first).await
}

/// [`submit`] of a transaction a private route has not had included within
/// `SEND_PUBLIC_AFTER_BLOCKS`, to the public mempool ([`CallKind::SendPublic`]: the read nodes,
/// `UPSTREAM_RPC_URL`), with the same retries and classes.
pub async fn publish<P: Platform + ?Sized>(
    upstream: &P,
    tx: &SignedTx,
    sender: &str,
    pool: PoolKind,
    policy: &RetryPolicy,
    deadline_ms: u64,
) -> Sent {
    let to = Attempt {
        kind: CallKind::SendPublic,
        pool,
    };
    send_until_final(upstream, tx, sender, to, policy, deadline_ms, None).await
}

/// Where a send's attempts go: its kind of call, and the pool of the upstreams it reaches.
#[derive(Clone, Copy)]
struct Attempt {
    kind: CallKind,
    pool: PoolKind,
}

/// The loop of [`submit_after`] and [`publish`].
async fn send_until_final<P: Platform + ?Sized>(
    upstream: &P,
    tx: &SignedTx,
    sender: &str,
    Attempt { kind, pool }: Attempt,
    policy: &RetryPolicy,
    deadline_ms: u64,
    mut first: Option<Result<UpstreamReply, UpstreamError>>,
) -> Sent {
    let request = tx.request();
    let mut attempts = 0;
    // Whether a send so far may have reached the node although its answer was lost.
    let mut maybe_in = false;
    let (mut class, answer, failure) = loop {
        if maybe_in
            && pool == PoolKind::Strict
            && known_by_hash(upstream, &tx.hash, policy, deadline_ms).await
        {
            break (AnswerClass::AlreadyKnown, None, None);
        }
        attempts += 1;
        let reply = match first.take() {
            Some(reply) => reply,
            None => {
                let timeout_ms = policy.attempt_timeout(upstream.now_ms(), deadline_ms);
                upstream.post(&request, kind, timeout_ms).await
            }
        };
        let (class, answer) = classify(&reply);
        if class.retryable() {
            maybe_in |= may_have_arrived(&reply);
            let now = upstream.now_ms();
            let retry_after_ms = match &reply {
                Ok(r) => r.retry_after_ms,
                Err(e) => e.retry_after_ms(),
            };
            let jitter = upstream.random();
            if let Some(delay_ms) =
                policy.next_retry(attempts, jitter, now, deadline_ms, retry_after_ms)
            {
                let why = match &reply {
                    Err(UpstreamError::Status(status, _)) => format!("http_{status}"),
                    Err(e) => e.kind().to_string(),
                    Ok(r) if class == AnswerClass::Unavailable => format!("http_{}", r.status),
                    Ok(_) => class.label().to_string(),
                };
                upstream.emit(
                    &Metric::new("tx_retried", sender, why)
                        .value("attempt", f64::from(attempts))
                        .value("delay_ms", delay_ms as f64)
                        .field("nonce", tx.nonce)
                        .field("tx_hash", hex::encode(&tx.hash)),
                );
                upstream.sleep(delay_ms).await;
                continue;
            }
        }
        break (class, answer, reply.err());
    };
    let mut unknown = false;
    if class.check_by_hash() {
        if known_by_hash(upstream, &tx.hash, policy, deadline_ms).await {
            class = AnswerClass::AlreadyKnown;
        } else if maybe_in {
            upstream.emit(
                &Metric::new("tx_outcome_unknown", sender, class.label())
                    .value("count", 1.0)
                    .field("nonce", tx.nonce)
                    .field("tx_hash", hex::encode(&tx.hash)),
            );
            class = AnswerClass::Unavailable;
            unknown = true;
        }
    }
    let answer = match (class, answer, failure) {
        (AnswerClass::AlreadyKnown, _, _) => Answer::hash(&tx.hash),
        _ if unknown => outcome_unknown(&tx.hash),
        (_, Some(answer), _) => answer,
        (_, None, Some(error)) => {
            upstream.emit(&error_metric(METHOD, &error).field("attempts", attempts));
            Answer::error(&error.to_rpc())
        }
        (_, None, None) => Answer::error(&UpstreamError::Invalid.to_rpc()),
    };
    Sent {
        class,
        answer,
        attempts,
    }
}

/// The most transactions sent as one batch ([`post_batch`]).
pub const MAX_BATCH_SENDS: usize = 64;

/// From how many sends ready at once they go as one batch: Cloudflare's six connections waiting
/// for response headers per Worker invocation, which a Durable Object's concurrent requests share.
/// Fewer go alone, each with its own connection and answer (a lost connection loses one answer).
pub const BATCH_FROM: usize = 6;

/// Whether `ready` sends of one sender's window, asked for in one turn of its machine, go as one
/// batch: on a mempool upstream (a strict one gets one at a time anyway), [`BATCH_FROM`] or more
/// of them, and one upstream (with several, each is sent alone, hedged or broadcast, whose
/// answers are merged per transaction).
pub fn batched(pool: PoolKind, ready: usize, upstreams: usize) -> bool {
    pool == PoolKind::Mempool && ready >= BATCH_FROM && upstreams == 1
}

/// The body of a batch of sends of `txs`, in the order given (nonce order, for a window): member
/// `i` is [`SignedTx::request_with_id`] with id `i + 1`.
pub fn batch_body(txs: &[&SignedTx]) -> String {
    let members: Vec<String> = txs
        .iter()
        .enumerate()
        .map(|(i, tx)| tx.request_with_id(i as u64 + 1))
        .collect();
    format!("[{}]", members.join(","))
}

/// Each member's reply of a batch of `count` sends ([`batch_body`]) from the batch's `reply`:
/// its answer object by id (in any order) with the batch's status; the batch's own failure for
/// every member when it had no usable answer (a transport error, or an HTTP error status the
/// retry rules know); [`UpstreamError::Invalid`] for a member the answer leaves out or when the
/// answer is not an array (a node that refuses batches): such a member is sent again alone, a
/// copy the node may already have being answered as known.
pub fn split_batch(
    reply: &Result<UpstreamReply, UpstreamError>,
    count: usize,
) -> Vec<Result<UpstreamReply, UpstreamError>> {
    let reply = match reply {
        Err(e) => return vec![Err(e.clone()); count],
        Ok(r) if crate::upstream::retry::RETRYABLE_STATUSES.contains(&r.status) => {
            return vec![Ok(r.clone()); count]
        }
        Ok(r) => r,
    };
    let mut parts: Vec<Result<UpstreamReply, UpstreamError>> =
        vec![Err(UpstreamError::Invalid); count];
    let Ok(Value::Array(members)) = serde_json::from_str::<Value>(&reply.body) else {
        return parts;
    };
    for member in members {
        let index = member
            .get("id")
            .and_then(Value::as_u64)
            .and_then(|id| usize::try_from(id).ok())
            .filter(|id| (1..=count).contains(id));
        if let Some(id) = index {
            parts[id - 1] = Ok(UpstreamReply {
                status: reply.status,
                body: member.to_string(),
                retry_after_ms: reply.retry_after_ms,
            });
        }
    }
    parts
}

/// The first attempt of several sends at once: `txs` as one batch ([`batch_body`]) within
/// `timeout_ms`, and each member's part of the answer ([`split_batch`]), for [`submit_after`].
pub async fn post_batch<P: Platform + ?Sized>(
    upstream: &P,
    txs: &[&SignedTx],
    timeout_ms: u64,
) -> Vec<Result<UpstreamReply, UpstreamError>> {
    let reply = upstream
        .post(&batch_body(txs), CallKind::Send, timeout_ms)
        .await;
    split_batch(&reply, txs.len())
}

/// -32002 for a transaction whose send may have gone in, whose nonce the upstream now refuses,
/// and which the upstream does not have: `data` is its hash.
fn outcome_unknown(hash: &TxHash) -> Answer {
    Answer::error(&RpcError {
        code: RESOURCE_UNAVAILABLE,
        message: "transaction outcome unknown: an earlier send may have gone in, and the upstream \
                  now refuses its nonce without having it; the relay keeps it and checks it by \
                  hash"
            .into(),
        data: Some(Value::String(hex::encode(hash))),
    })
}

/// Whether the upstream has the transaction `hash` (pending or mined): `eth_getTransactionByHash`
/// answers a transaction object. Retried like a send while the upstream can't be used.
pub async fn known_by_hash<U: Platform + ?Sized>(
    upstream: &U,
    hash: &TxHash,
    policy: &RetryPolicy,
    deadline_ms: u64,
) -> bool {
    let request = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"eth_getTransactionByHash","params":["{}"]}}"#,
        hex::encode(hash)
    );
    match post_retried(upstream, &request, CallKind::OwnByHash, policy, deadline_ms).await {
        Ok(reply) if (200..300).contains(&reply.status) => {
            matches!(Answer::parse(&reply.body), Some(Answer::Result(raw))
                if serde_json::from_str::<Value>(&raw).is_ok_and(|v| v.is_object()))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ordering::tx::SendMethod;
    use crate::transaction::TxHash;
    use crate::upstream::UpstreamReply;
    use std::cell::{Cell, RefCell};
    use std::collections::VecDeque;
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    /// A scripted upstream on a virtual clock: each POST takes the next scripted reply (by
    /// method), and sleeping advances the clock.
    #[derive(Default)]
    struct Scripted {
        sends: RefCell<VecDeque<Result<UpstreamReply, UpstreamError>>>,
        lookups: RefCell<VecDeque<Result<UpstreamReply, UpstreamError>>>,
        posts: RefCell<Vec<(String, u64)>>,
        kinds: RefCell<Vec<CallKind>>,
        metrics: RefCell<Vec<String>>,
        now: Cell<u64>,
    }

    impl Platform for Scripted {
        async fn post(
            &self,
            body: &str,
            kind: CallKind,
            timeout_ms: u64,
        ) -> Result<UpstreamReply, UpstreamError> {
            self.posts.borrow_mut().push((body.to_string(), timeout_ms));
            self.kinds.borrow_mut().push(kind);
            self.now.set(self.now.get() + 10);
            let script = if body.contains("eth_getTransactionByHash") {
                &self.lookups
            } else {
                &self.sends
            };
            script.borrow_mut().pop_front().expect("a scripted reply")
        }
        async fn get_status(
            &self,
            _hash: &TxHash,
            _timeout_ms: u64,
        ) -> Result<UpstreamReply, UpstreamError> {
            panic!("a send never asks a route's status")
        }
        async fn sleep(&self, ms: u64) {
            self.now.set(self.now.get() + ms);
        }
        fn now_ms(&self) -> u64 {
            self.now.get()
        }
        fn random(&self) -> f64 {
            0.5
        }
        fn emit(&self, metric: &Metric) {
            self.metrics.borrow_mut().push(metric.log_line());
        }
    }

    fn run<F: Future>(f: F) -> F::Output {
        match pin!(f)
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
        {
            Poll::Ready(v) => v,
            Poll::Pending => panic!("the scripted upstream never waits"),
        }
    }

    const POLICY: RetryPolicy = RetryPolicy {
        max_retries: Some(3),
        base_delay_ms: 50,
        max_delay_ms: 1_000,
        attempt_timeout_ms: 60_000,
    };
    const HASH: TxHash = [0xab; 32];

    /// The transaction the tests send: its request is [`REQUEST`].
    fn signed() -> SignedTx {
        SignedTx {
            hash: HASH,
            nonce: 4,
            chain_id: Some(1),
            raw: vec![0x02],
            method: SendMethod::Plain,
        }
    }
    const SENDER: &str = "0xsender";
    const MEMPOOL: PoolKind = PoolKind::Mempool;
    const STRICT: PoolKind = PoolKind::Strict;
    const REQUEST: &str =
        r#"{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":["0x02"]}"#;

    fn ok(body: &str) -> Result<UpstreamReply, UpstreamError> {
        Ok(UpstreamReply::ok(body))
    }
    fn error(message: &str) -> Result<UpstreamReply, UpstreamError> {
        ok(&format!(
            r#"{{"jsonrpc":"2.0","id":9,"error":{{"code":-32000,"message":"{message}"}}}}"#
        ))
    }
    fn lost() -> Result<UpstreamReply, UpstreamError> {
        Err(UpstreamError::Unreachable(
            "Network connection lost.".into(),
        ))
    }

    fn upstream(
        sends: Vec<Result<UpstreamReply, UpstreamError>>,
        lookups: Vec<Result<UpstreamReply, UpstreamError>>,
    ) -> Scripted {
        let s = Scripted::default();
        *s.sends.borrow_mut() = sends.into();
        *s.lookups.borrow_mut() = lookups.into();
        s
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

    #[test]
    fn a_members_part_is_its_first_attempt_and_it_goes_on_alone() {
        // Accepted in the batch: no send of its own.
        let up = upstream(vec![], vec![]);
        let first = split_batch(&ok(r#"[{"id":1,"result":"0xabab"}]"#), 1).remove(0);
        let s = run(submit_after(
            &up,
            &signed(),
            SENDER,
            MEMPOOL,
            &POLICY,
            30_000,
            Some(first),
        ));
        assert_eq!((s.class, s.attempts), (AnswerClass::Accepted, 1));
        assert!(up.posts.borrow().is_empty());
        // Left out of the batch's answer: sent again alone (the node knows it already).
        let up = upstream(vec![error("already known")], vec![]);
        let s = run(submit_after(
            &up,
            &signed(),
            SENDER,
            MEMPOOL,
            &POLICY,
            30_000,
            Some(Err(UpstreamError::Invalid)),
        ));
        assert_eq!((s.class, s.attempts), (AnswerClass::AlreadyKnown, 2));
        assert_eq!(up.posts.borrow()[0].0, REQUEST);
    }

    #[test]
    fn the_public_copy_goes_to_the_read_nodes_as_a_send_with_its_retries() {
        let lost = Err(UpstreamError::Unreachable("connection reset".into()));
        let up = upstream(vec![lost, ok(r#"{"id":1,"result":"0xabab"}"#)], vec![]);
        let s = run(publish(&up, &signed(), SENDER, MEMPOOL, &POLICY, 30_000));
        assert_eq!((s.class, s.attempts), (AnswerClass::Accepted, 2));
        assert_eq!(*up.kinds.borrow(), [CallKind::SendPublic; 2]);
        assert_eq!(up.posts.borrow()[1].0, REQUEST, "the same bytes");
        // A client's send and the object's go to the send route.
        let up = upstream(vec![ok(r#"{"id":1,"result":"0xabab"}"#)], vec![]);
        run(submit(&up, &signed(), SENDER, MEMPOOL, &POLICY, 30_000));
        assert_eq!(*up.kinds.borrow(), [CallKind::Send]);
    }

    #[test]
    fn lost_connections_are_retried_with_the_same_bytes_and_backoff() {
        let up = upstream(
            vec![
                lost(),
                Err(UpstreamError::Status(503, None)),
                ok(r#"{"id":9,"result":"0xabab"}"#),
            ],
            vec![],
        );
        let s = run(submit(&up, &signed(), SENDER, MEMPOOL, &POLICY, 30_000));
        assert_eq!(s.class, AnswerClass::Accepted);
        assert_eq!(s.answer, Answer::Result("\"0xabab\"".into()));
        assert_eq!(s.attempts, 3);
        let posts = up.posts.borrow();
        assert!(
            posts.iter().all(|(body, _)| body == REQUEST),
            "the same bytes every time"
        );
        // 10 ms per post, 50 then 100 ms of backoff.
        assert_eq!(up.now.get(), 10 + 50 + 10 + 100 + 10);
        let metrics = up.metrics.borrow();
        assert_eq!(metrics.len(), 2);
        assert!(
            metrics[0].contains(r#""event":"tx_retried""#)
                && metrics[0].contains(r#""label":"unreachable""#)
        );
        assert!(metrics[1].contains(r#""label":"http_503""#));
    }

    #[test]
    fn retries_go_on_until_the_deadline_and_wait_out_retry_after() {
        let policy = RetryPolicy::until_deadline(60_000);
        let mut sends: Vec<_> = (0..12).map(|_| lost()).collect();
        sends.push(Ok(UpstreamReply {
            status: 429,
            body: r#"{"id":9,"error":{"code":-32005,"message":"rate limited"}}"#.into(),
            retry_after_ms: Some(3_000),
        }));
        sends.push(ok(r#"{"id":9,"result":"0xabab"}"#));
        let up = upstream(sends, vec![]);
        let s = run(submit(&up, &signed(), SENDER, MEMPOOL, &policy, 30_000));
        assert_eq!((s.class, s.attempts), (AnswerClass::Accepted, 14));
        let delays: Vec<f64> = up
            .metrics
            .borrow()
            .iter()
            .map(|m| {
                serde_json::from_str::<Value>(m).unwrap()["delay_ms"]
                    .as_f64()
                    .unwrap()
            })
            .collect();
        assert_eq!(&delays[..6], &[50.0, 100.0, 200.0, 400.0, 800.0, 1_000.0]);
        assert_eq!(delays[11], 1_000.0, "capped at 1 s");
        assert_eq!(delays[12], 3_000.0, "Retry-After waited out");
        // An upstream down for good: the last error at the deadline, about a retry a second.
        let up = upstream((0..40).map(|_| lost()).collect(), vec![]);
        let s = run(submit(&up, &signed(), SENDER, MEMPOOL, &policy, 10_000));
        assert_eq!(s.class, AnswerClass::Unavailable);
        assert!(
            (12..=16).contains(&s.attempts),
            "{} attempts in 10 s",
            s.attempts
        );
        assert!(up.now.get() <= 10_000, "never past the deadline");
    }

    #[test]
    fn the_budget_ends_with_the_last_error() {
        let up = upstream(vec![lost(), lost(), lost(), lost()], vec![]);
        let s = run(submit(&up, &signed(), SENDER, MEMPOOL, &POLICY, 30_000));
        assert_eq!((s.class, s.attempts), (AnswerClass::Unavailable, 4));
        assert_eq!(s.answer.error_parts().unwrap().0, -32002);
        assert!(up
            .metrics
            .borrow()
            .last()
            .unwrap()
            .contains("upstream_error"));
        // No retry without a budget, and none past the deadline.
        let none = RetryPolicy {
            max_retries: Some(0),
            ..POLICY
        };
        let up = upstream(vec![lost()], vec![]);
        assert_eq!(
            run(submit(&up, &signed(), SENDER, MEMPOOL, &none, 30_000)).attempts,
            1
        );
        let up = upstream(vec![lost()], vec![]);
        assert_eq!(
            run(submit(&up, &signed(), SENDER, MEMPOOL, &POLICY, 60)).attempts,
            1
        );
        assert_eq!(
            up.posts.borrow()[0].1,
            60,
            "the attempt is cut to the deadline"
        );
    }

    #[test]
    fn already_known_is_the_hash() {
        let up = upstream(vec![error("already known")], vec![]);
        let s = run(submit(&up, &signed(), SENDER, MEMPOOL, &POLICY, 30_000));
        assert_eq!(
            (s.class, s.answer),
            (AnswerClass::AlreadyKnown, Answer::hash(&HASH))
        );
    }

    #[test]
    fn nonce_too_low_for_a_transaction_the_upstream_has_is_the_hash() {
        // The first answer was lost after the transaction went in; the retry says nonce too low.
        let up = upstream(
            vec![lost(), error("nonce too low: next nonce 5, tx nonce 4")],
            vec![
                lost(),
                ok(r#"{"id":1,"result":{"hash":"0xabab","blockNumber":null}}"#),
            ],
        );
        let s = run(submit(&up, &signed(), SENDER, MEMPOOL, &POLICY, 30_000));
        assert_eq!(
            (s.class, s.answer),
            (AnswerClass::AlreadyKnown, Answer::hash(&HASH))
        );
        // Not there: the refusal stands.
        let up = upstream(
            vec![error("nonce too low")],
            vec![ok(r#"{"id":1,"result":null}"#)],
        );
        let s = run(submit(&up, &signed(), SENDER, MEMPOOL, &POLICY, 30_000));
        assert_eq!(s.class, AnswerClass::NonceTooLow);
        assert_eq!(s.answer.error_parts().unwrap().1, "nonce too low");
    }

    #[test]
    fn terminal_answers_are_not_retried() {
        let up = upstream(
            vec![error("insufficient funds for gas * price + value")],
            vec![],
        );
        let s = run(submit(&up, &signed(), SENDER, MEMPOOL, &POLICY, 30_000));
        assert_eq!((s.class, s.attempts), (AnswerClass::Rejected, 1));
        assert!(up.posts.borrow().len() == 1 && up.metrics.borrow().is_empty());
    }

    fn found() -> Result<UpstreamReply, UpstreamError> {
        ok(r#"{"id":1,"result":{"hash":"0xabab","blockNumber":null}}"#)
    }
    fn missing() -> Result<UpstreamReply, UpstreamError> {
        ok(r#"{"id":1,"result":null}"#)
    }
    fn methods(up: &Scripted) -> Vec<String> {
        up.posts
            .borrow()
            .iter()
            .map(|(body, _)| {
                serde_json::from_str::<Value>(body).unwrap()["method"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    }

    #[test]
    fn a_nonce_refusal_after_a_lost_send_of_a_transaction_the_upstream_lacks_is_unknown() {
        // The first send went in and its answer was lost; the pool dropped it; the resend meets
        // "nonce too low" (a node that counted it) and the lookup finds nothing.
        let up = upstream(
            vec![lost(), error("nonce too low: next nonce 22, tx nonce 21")],
            vec![missing()],
        );
        let s = run(submit(&up, &signed(), SENDER, MEMPOOL, &POLICY, 30_000));
        assert_eq!(s.class, AnswerClass::Unavailable, "unknown, not refused");
        let (code, message) = s.answer.error_parts().unwrap();
        assert_eq!(code, RESOURCE_UNAVAILABLE);
        assert!(message.contains("outcome unknown"), "{message}");
        assert!(up
            .metrics
            .borrow()
            .iter()
            .any(|m| m.contains(r#""event":"tx_outcome_unknown""#)));
        // Refused before anything may have arrived (a refused connection): the refusal stands.
        let refused = || {
            Err(UpstreamError::Unreachable(
                "connect ECONNREFUSED 10.0.0.1:8545".into(),
            ))
        };
        let up = upstream(vec![refused(), error("nonce too low")], vec![missing()]);
        let s = run(submit(&up, &signed(), SENDER, MEMPOOL, &POLICY, 30_000));
        assert_eq!(s.class, AnswerClass::NonceTooLow);
        assert_eq!(s.answer.error_parts().unwrap().1, "nonce too low");
    }

    #[test]
    fn on_a_strict_upstream_a_send_that_may_have_arrived_is_looked_up_before_it_is_sent_again() {
        // It went in: found by hash, never sent twice (a second copy is a charged refusal).
        let up = upstream(vec![lost()], vec![found()]);
        let s = run(submit(&up, &signed(), SENDER, STRICT, &POLICY, 30_000));
        assert_eq!(
            (s.class, s.answer),
            (AnswerClass::AlreadyKnown, Answer::hash(&HASH))
        );
        assert_eq!(
            methods(&up),
            ["eth_sendRawTransaction", "eth_getTransactionByHash"]
        );
        // It did not: sent again after the lookup.
        let up = upstream(
            vec![lost(), ok(r#"{"id":9,"result":"0xabab"}"#)],
            vec![missing()],
        );
        let s = run(submit(&up, &signed(), SENDER, STRICT, &POLICY, 30_000));
        assert_eq!((s.class, s.attempts), (AnswerClass::Accepted, 2));
        assert_eq!(
            methods(&up),
            [
                "eth_sendRawTransaction",
                "eth_getTransactionByHash",
                "eth_sendRawTransaction"
            ]
        );
        // A busy node (an answer: nothing went in) or a refused connection: no lookup.
        let busy = error("txpool is full");
        let up = upstream(vec![busy, ok(r#"{"id":9,"result":"0xabab"}"#)], vec![]);
        run(submit(&up, &signed(), SENDER, STRICT, &POLICY, 30_000));
        assert_eq!(
            methods(&up),
            ["eth_sendRawTransaction", "eth_sendRawTransaction"]
        );
        // On a mempool the resend is the lookup: no extra call.
        let up = upstream(vec![lost(), error("already known")], vec![]);
        let s = run(submit(&up, &signed(), SENDER, MEMPOOL, &POLICY, 30_000));
        assert_eq!(s.class, AnswerClass::AlreadyKnown);
        assert_eq!(
            methods(&up),
            ["eth_sendRawTransaction", "eth_sendRawTransaction"]
        );
    }
}
