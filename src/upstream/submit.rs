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
//! 4. Behind a private route, Flashbots Protect's `invalid nonce` is a race with its own nonce
//!    cache, not a refusal: retried after the backoff, with no retry spent.
//!
//! Several transactions of one sender's send window may go as one JSON-RPC batch, in nonce order
//! ([`post_batch`]): one connection instead of one each, since Cloudflare lets a Worker invocation
//! (and a Durable Object, whose concurrent requests share one I/O context) have only six
//! connections waiting for response headers and queues the rest. Each member's part of the batch's
//! answer is its first attempt, and it goes on from there alone ([`submit_after`]): retried,
//! checked by hash, classified as if it had been sent alone.

use crate::hex;
use crate::jsonrpc::Answer;
use crate::jsonrpc::SEND_PRIVATE_TRANSACTION;
use crate::metrics::Metric;
use crate::ordering::answer::AnswerClass;
use crate::ordering::sender::{PoolKind, Sent};
use crate::ordering::tx::{SendMethod, SignedTx};
use crate::transaction::TxHash;
use crate::upstream::retry::{post_retried, RetryPolicy};
use crate::upstream::Platform;
use crate::upstream::{
    classify, error_metric, may_have_arrived, method_not_served, CallKind, UpstreamError,
    UpstreamReply,
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

/// The send of [`submit_after`] and [`publish`]: its attempts until an answer is final
/// ([`Sending::attempt_until_answered`]), a refusal that may be the transaction itself checked by
/// hash, then the answer.
async fn send_until_final<P: Platform + ?Sized>(
    upstream: &P,
    tx: &SignedTx,
    sender: &str,
    to: Attempt,
    policy: &RetryPolicy,
    deadline_ms: u64,
    first: Option<Result<UpstreamReply, UpstreamError>>,
) -> Sent {
    let send = Sending {
        upstream,
        tx,
        sender,
        to,
        policy,
        deadline_ms,
    };
    let Attempts {
        mut class,
        answer,
        failure,
        attempts,
        maybe_in,
        route,
    } = send.attempt_until_answered(first).await;
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
        _ if unknown => Answer::outcome_unknown(
            &tx.hash,
            "an earlier send may have gone in, and the upstream now refuses its nonce without \
             having it",
        ),
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
        route,
    }
}

/// One transaction's send, as each step of [`send_until_final`] reads it.
struct Sending<'a, P: ?Sized> {
    upstream: &'a P,
    /// The transaction (its request text, hash and nonce).
    tx: &'a SignedTx,
    /// The sender, lowercase 0x hex (for metrics).
    sender: &'a str,
    /// Where its attempts go.
    to: Attempt,
    /// Its retries and attempt timeout.
    policy: &'a RetryPolicy,
    /// When it must have its answer, Unix ms.
    deadline_ms: u64,
}

/// What a send's attempts came to before the check by hash of [`send_until_final`].
struct Attempts {
    /// The last answer's class ([`AnswerClass::AlreadyKnown`] when a lookup by hash found the
    /// transaction).
    class: AnswerClass,
    /// The last answer, when the upstream gave one.
    answer: Option<Answer>,
    /// The last attempt's failure, when it had no answer.
    failure: Option<UpstreamError>,
    /// How many times the bytes were sent.
    attempts: u32,
    /// Whether a send may have reached the node although its answer was lost.
    maybe_in: bool,
    /// Behind private routes, the one whose answer is the last.
    route: Option<usize>,
}

impl<P: Platform + ?Sized> Sending<'_, P> {
    /// Sends the transaction until an answer is final, or its retries or the deadline are spent
    /// (`first`: the first attempt's reply, when it was already made): a route that does not
    /// serve `eth_sendPrivateTransaction` gets the plain send, a retryable answer is tried again
    /// after its backoff ([`Sending::back_off`]), and under a strict pool a send that may have
    /// arrived is looked up by hash first.
    async fn attempt_until_answered(
        &self,
        mut first: Option<Result<UpstreamReply, UpstreamError>>,
    ) -> Attempts {
        let Sending {
            upstream,
            tx,
            to: Attempt { kind, pool },
            policy,
            deadline_ms,
            ..
        } = *self;
        // The public mempool gets the plain send: a node's `eth_sendPrivateTransaction`
        // (Alchemy's) would keep it private again.
        let mut request = match kind {
            CallKind::SendPublic => tx.plain_request(),
            _ => tx.request(),
        };
        // Whether a route that does not serve `eth_sendPrivateTransaction` may still make this
        // a plain send: a private send, not plain yet.
        let mut may_go_plain =
            kind != CallKind::SendPublic && matches!(tx.method, SendMethod::Private { .. });
        let mut attempts = 0;
        // Attempts the upstream did not turn away unattempted ([`rate_limited`]): the count
        // `UPSTREAM_RETRIES` caps.
        let mut spent = 0;
        // Whether a send so far may have reached the node although its answer was lost.
        let mut maybe_in = false;
        // Behind private routes, the one whose answer is the last.
        let mut route = None;
        let (class, answer, failure) = loop {
            if maybe_in
                && pool == PoolKind::Strict
                && known_by_hash(upstream, &tx.hash, policy, deadline_ms).await
            {
                break (AnswerClass::AlreadyKnown, None, None);
            }
            attempts += 1;
            let reply = match first.take() {
                Some(reply) => reply,
                None => self.post_attempt(&request).await,
            };
            let (mut class, answer) = classify(&reply);
            // A route that does not serve `eth_sendPrivateTransaction` gets the same bytes as a
            // plain send, at once: the request was not attempted.
            if may_go_plain && method_not_served(&reply) {
                self.emit_private_unserved();
                request = tx.plain_request();
                may_go_plain = false;
                continue;
            }
            let raced = self.private_nonce_race(class, &reply);
            if raced {
                class = AnswerClass::Busy;
            }
            let unattempted = raced || rate_limited(&reply);
            if !unattempted {
                spent += 1;
            }
            if class.retryable() {
                maybe_in |= may_have_arrived(&reply);
                if self.back_off(&reply, class, attempts, spent).await {
                    continue;
                }
            }
            route = answering_route(&reply);
            break (class, answer, reply.err());
        };
        Attempts {
            class,
            answer,
            failure,
            attempts,
            maybe_in,
            route,
        }
    }

    /// POSTs `request` (the send's request text) once, waiting for its reply at most the
    /// policy's attempt timeout, cut to the time left before the deadline.
    async fn post_attempt(&self, request: &str) -> Result<UpstreamReply, UpstreamError> {
        let timeout_ms = self
            .policy
            .attempt_timeout(self.upstream.now_ms(), self.deadline_ms);
        self.upstream.post(request, self.to.kind, timeout_ms).await
    }

    /// Emits the `private_method_unserved` metric: a route did not serve
    /// `eth_sendPrivateTransaction`, and the transaction goes as a plain send.
    fn emit_private_unserved(&self) {
        let Sending {
            upstream,
            tx,
            sender,
            ..
        } = *self;
        upstream.emit(
            &Metric::new("private_method_unserved", sender, SEND_PRIVATE_TRANSACTION)
                .value("count", 1.0)
                .field("nonce", tx.nonce)
                .field("tx_hash", hex::encode(&tx.hash)),
        );
    }

    /// Whether `reply`, of class `class`, is a private route's nonce cache behind
    /// ([`nonce_cache_raced`]) on a send to the private routes: then it is busy, not a refusal.
    fn private_nonce_race(
        &self,
        class: AnswerClass,
        reply: &Result<UpstreamReply, UpstreamError>,
    ) -> bool {
        // Flashbots Protect writes its nonce cache after it answered: a fast n + 1 may meet
        // `invalid nonce` although n is in; a short wait and the same bytes get in.
        class == AnswerClass::Unrecognized
            && self.to.kind == CallKind::Send
            && self.upstream.sends_to_private_route()
            && nonce_cache_raced(reply)
    }

    /// After a retryable `reply` (of class `class`) to attempt number `attempts`, `spent` of
    /// them counted by `UPSTREAM_RETRIES`: emits `tx_retried` and waits out the jittered backoff
    /// (or the upstream's `Retry-After` when longer), ms, then true; false at once when the
    /// retries are spent or the next attempt would not fit before the deadline.
    async fn back_off(
        &self,
        reply: &Result<UpstreamReply, UpstreamError>,
        class: AnswerClass,
        attempts: u32,
        spent: u32,
    ) -> bool {
        let Sending {
            upstream,
            tx,
            sender,
            policy,
            deadline_ms,
            ..
        } = *self;
        let now = upstream.now_ms();
        let retry_after_ms = match reply {
            Ok(r) => r.retry_after_ms,
            Err(e) => e.retry_after_ms(),
        };
        let jitter = upstream.random();
        // A rate limit turned the request away unattempted: no retry spent, only time.
        let capped = policy.max_retries.is_some_and(|max| spent > max);
        let uncapped = RetryPolicy {
            max_retries: None,
            ..*policy
        };
        let Some(delay_ms) = (!capped)
            .then(|| uncapped.next_retry(attempts, jitter, now, deadline_ms, retry_after_ms))
            .flatten()
        else {
            return false;
        };
        let why = match reply {
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
        true
    }
}

/// Behind private routes, the one that gave `reply` (its position in `UPSTREAM_SEND_URL`), when
/// the platform says.
fn answering_route(reply: &Result<UpstreamReply, UpstreamError>) -> Option<usize> {
    reply
        .as_ref()
        .ok()
        .and_then(|r| r.answerer)
        .filter(|a| a.route)
        .map(|a| a.index)
}

/// Whether `reply` is a private route's `invalid nonce` (Flashbots Protect's -32603, answered
/// while its nonce cache, written asynchronously, is behind the nonce it just took:
/// `server/request_processor.go`, docs/private-routes.md): the transaction was not taken, and a
/// retry after a short wait gets it in.
fn nonce_cache_raced(reply: &Result<UpstreamReply, UpstreamError>) -> bool {
    reply.as_ref().is_ok_and(|r| {
        Answer::parse(&r.body)
            .and_then(|a| a.error_parts())
            .is_some_and(|(_, message)| {
                crate::ordering::answer::squash(&message).contains("invalidnonce")
            })
    })
}

/// Whether `reply` turned the request away without attempting it: HTTP 429, or an error whose
/// text is a rate limit ([`crate::upstream::batch::not_attempted`]: QuickNode's -32007,
/// Chainstack's, Alchemy's). Such an attempt spends no retry of `UPSTREAM_RETRIES`; its
/// backoff and the deadline still hold.
fn rate_limited(reply: &Result<UpstreamReply, UpstreamError>) -> bool {
    match reply {
        Err(UpstreamError::Status(429, _)) => true,
        Err(_) => false,
        Ok(r) if r.status == 429 => true,
        Ok(r) => Answer::parse(&r.body)
            .and_then(|a| a.error_parts())
            .is_some_and(|(_, message)| crate::upstream::batch::not_attempted(&message)),
    }
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
mod tests;
