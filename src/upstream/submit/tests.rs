use super::*;
use crate::jsonrpc::RESOURCE_UNAVAILABLE;
use crate::ordering::tx::SendMethod;
use crate::transaction::TxHash;
use crate::upstream::batch::split_batch;
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
    /// Whether it is a private route (`UPSTREAM_SEND_URL`).
    route: bool,
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
    fn sends_to_private_route(&self) -> bool {
        self.route
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
        public_after_blocks: None,
        self_cancel: false,
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
fn a_members_part_is_its_first_attempt_and_it_goes_on_alone() {
    // Accepted in the batch: no send of its own.
    let up = upstream(vec![], vec![]);
    let first = split_batch(&ok(r#"[{"id":1,"result":"0xabab"}]"#), 1)
        .remove(0)
        .expect("answered");
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
    // Not attempted in the batch (left out, a batch limit, a rate limit): sent alone with no
    // attempt spent, so even with no retry at all (`UPSTREAM_RETRIES=0`) it gets its own.
    let up = upstream(vec![error("already known")], vec![]);
    let no_retry = RetryPolicy {
        max_retries: Some(0),
        ..POLICY
    };
    let part = split_batch(
        &ok(r#"[{"jsonrpc":"2.0","id":1,"error":{"code":-32007,"message":"25/second request limit reached - reduce calls per second or upgrade your account at quicknode.com"}}]"#),
        1,
    )
    .remove(0);
    assert_eq!(part, None, "a rate limit says nothing of the member");
    let s = run(submit_after(
        &up,
        &signed(),
        SENDER,
        MEMPOOL,
        &no_retry,
        30_000,
        part,
    ));
    assert_eq!((s.class, s.attempts), (AnswerClass::AlreadyKnown, 1));
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
        answerer: None,
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

/// A rate limit turns a send away unattempted: with `UPSTREAM_RETRIES=0` it is still tried again
/// (after its backoff, within the deadline), since no retry was spent; a lost connection is not
/// retried.
#[test]
fn a_rate_limited_send_spends_no_retry() {
    let no_retry = RetryPolicy {
        max_retries: Some(0),
        ..POLICY
    };
    let quicknode = ok(
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32007,"message":"25/second request limit reached - reduce calls per second or upgrade your account at quicknode.com"}}"#,
    );
    let too_many = Ok(UpstreamReply {
        status: 429,
        body: r#"{"jsonrpc":"2.0","id":1,"error":{"code":429,"message":"Your app has exceeded its compute units per second capacity."}}"#.into(),
        retry_after_ms: None,
        answerer: None,
    });
    let up = upstream(
        vec![quicknode, too_many, ok(r#"{"id":1,"result":"0xabab"}"#)],
        vec![],
    );
    let s = run(submit(&up, &signed(), SENDER, MEMPOOL, &no_retry, 30_000));
    assert_eq!((s.class, s.attempts), (AnswerClass::Accepted, 3));
    let up = upstream(vec![lost(), ok(r#"{"id":1,"result":"0xabab"}"#)], vec![]);
    let s = run(submit(&up, &signed(), SENDER, MEMPOOL, &no_retry, 30_000));
    assert_eq!((s.class, s.attempts), (AnswerClass::Unavailable, 1));
}

/// Flashbots Protect's `invalid nonce` (-32603) while its nonce cache is behind (issue 41): behind
/// a private route a retry after the backoff, with no retry spent, never a refusal told to the
/// client; from any other upstream an error the relay does not know.
#[test]
fn behind_a_private_route_protects_racing_invalid_nonce_is_retried() {
    let no_retry = RetryPolicy {
        max_retries: Some(0),
        ..POLICY
    };
    let invalid =
        || ok(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"invalid nonce"}}"#);
    let mut up = upstream(vec![invalid(), ok(r#"{"id":1,"result":"0xabab"}"#)], vec![]);
    up.route = true;
    let s = run(submit(&up, &signed(), SENDER, MEMPOOL, &no_retry, 30_000));
    assert_eq!((s.class, s.attempts), (AnswerClass::Accepted, 2));
    assert!(up.now.get() >= 20 + 25, "after a backoff: {}", up.now.get());
    let up = upstream(vec![invalid()], vec![]);
    let s = run(submit(&up, &signed(), SENDER, MEMPOOL, &no_retry, 30_000));
    assert_eq!((s.class, s.attempts), (AnswerClass::Unrecognized, 1));
}

/// `eth_sendPrivateTransaction` to a route that does not serve it (-32601): the same bytes as
/// `eth_sendRawTransaction` at once, no retry spent; one that serves it gets that method.
#[test]
fn a_private_send_goes_plain_to_a_route_that_does_not_serve_it() {
    let no_retry = RetryPolicy {
        max_retries: Some(0),
        ..POLICY
    };
    let mut private = signed();
    private.method = SendMethod::Private {
        max_block_number: Some(9),
        preferences: None,
    };
    let unserved = || {
        ok(
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"the method eth_sendPrivateTransaction does not exist/is not available"}}"#,
        )
    };
    let mut up = upstream(
        vec![unserved(), ok(r#"{"id":1,"result":"0xabab"}"#)],
        vec![],
    );
    up.route = true;
    let s = run(submit(&up, &private, SENDER, MEMPOOL, &no_retry, 30_000));
    assert_eq!(s.class, AnswerClass::Accepted);
    let posts = up.posts.borrow();
    assert!(
        posts[0].0.contains("eth_sendPrivateTransaction"),
        "{}",
        posts[0].0
    );
    assert_eq!(posts[1].0, private.plain_request());
    assert_eq!(up.now.get(), 20, "at once, no backoff");
    assert!(up
        .metrics
        .borrow()
        .iter()
        .any(|m| m.contains("private_method_unserved")));
    // A plain send's -32601 is the upstream's answer, not tried as anything else.
    let up = upstream(vec![unserved()], vec![]);
    let s = run(submit(&up, &signed(), SENDER, MEMPOOL, &no_retry, 30_000));
    assert_eq!(up.posts.borrow().len(), 1);
    assert!(s.answer.error_parts().is_some());
}

/// Sent to the public mempool, an `eth_sendPrivateTransaction` goes as `eth_sendRawTransaction`:
/// a node's own private method (Alchemy's) would keep it private again.
#[test]
fn a_private_send_is_published_as_a_plain_send() {
    let mut private = signed();
    private.method = SendMethod::Private {
        max_block_number: None,
        preferences: None,
    };
    let up = upstream(vec![ok(r#"{"id":1,"result":"0xabab"}"#)], vec![]);
    let s = run(publish(&up, &private, SENDER, MEMPOOL, &POLICY, 30_000));
    assert_eq!(s.class, AnswerClass::Accepted);
    assert_eq!(up.posts.borrow()[0].0, private.plain_request());
    assert_eq!(up.kinds.borrow()[0], CallKind::SendPublic);
}
