//! A sender's transactions of one request, and the pending nonce: the parts of [`Relay`] that
//! talk to the senders' Durable Objects.

use super::sync::{self, SendKind};
use super::wire::SendMember;
use super::{Backend, Member, ObjectError, Relay};
use crate::address::Address;
use crate::hex;
use crate::jsonrpc::{self, Answer, Request, RpcError};
use crate::metrics::Metric;
use crate::transaction::Transaction;
use crate::upstream::submit::{submit, Sending};
use futures_util::future::join_all;
use serde_json::Value;

/// The address of an `eth_getTransactionCount(address, "pending")` request; `None` for any other
/// request (another block tag, an EIP-1898 block object, malformed params: those go to the
/// upstream unchanged).
pub fn pending_count_of(req: &Request) -> Option<Address> {
    if req.method != "eth_getTransactionCount" {
        return None;
    }
    match req.params.as_array()?.as_slice() {
        [Value::String(address), Value::String(tag)] if tag == "pending" => address.parse().ok(),
        _ => None,
    }
}

/// How long a client refused because its sender's Durable Object is overloaded is asked to wait
/// before it retries, s.
pub const OVERLOADED_RETRY_AFTER_S: u64 = 1;

impl<B: Backend> Relay<'_, B> {
    /// Sends `sender`'s transactions of one request (`(index, request, transaction)`, in request
    /// order) and returns each one's response text with its index and `Retry-After` (s). With
    /// ordering on they go to the sender's object in one call (made again on a new stub while the
    /// runtime says the call may be retried, within `LOCK_MAX_HOLD_MS`); an overloaded object
    /// gets -32005; when the object can't be reached otherwise they are sent directly, one after
    /// the other in nonce order (fail-open). With ordering off, each is sent directly at once.
    pub(super) async fn send_group(
        &self,
        sender: &Address,
        txs: Vec<Member>,
    ) -> Vec<(usize, String, Option<u64>)> {
        let requests: Vec<String> = txs
            .iter()
            .map(|(_, req, _, kind)| sync::upstream_request(req, *kind))
            .collect();
        if !self.config.enable_nonce_ordering {
            let sends = txs
                .iter()
                .zip(&requests)
                .map(|((i, req, tx, kind), text)| async move {
                    (*i, self.direct(req, text, tx, *kind).await, None)
                });
            return join_all(sends).await;
        }
        let members: Vec<SendMember> = txs
            .iter()
            .zip(&requests)
            .map(|((_, _, tx, kind), request)| SendMember {
                hash: &tx.hash,
                nonce: tx.nonce,
                request,
                sync: matches!(kind, SendKind::Sync { .. }),
                chain_id: tx.chain_id,
            })
            .collect();
        let error = match self
            .retry_object_call(sender, || self.backend.sender_lock(sender, &members))
            .await
        {
            Ok(answers) => {
                let finished =
                    txs.iter()
                        .zip(answers)
                        .map(|((i, req, _, kind), wire)| async move {
                            let answer = self.finish(wire.answer, *kind).await;
                            (*i, answer.render(&req.response_id()), wire.retry_after_s)
                        });
                return join_all(finished).await;
            }
            Err(error) => error,
        };
        if let ObjectError::Overloaded(_) = error {
            let refusal = RpcError::new(
                jsonrpc::LIMIT_EXCEEDED,
                format!(
                    "the sender's Durable Object is overloaded; retry after {OVERLOADED_RETRY_AFTER_S} s"
                ),
            );
            return txs
                .iter()
                .map(|(i, req, _, _)| {
                    (
                        *i,
                        refusal.response(&req.response_id()),
                        Some(OVERLOADED_RETRY_AFTER_S),
                    )
                })
                .collect();
        }
        let why = self.config.redact(error.why());
        let mut in_order: Vec<(&Member, &String)> = txs.iter().zip(&requests).collect();
        in_order.sort_by_key(|((i, _, tx, _), _)| (tx.nonce, *i));
        let mut out = Vec::with_capacity(txs.len());
        for ((i, req, tx, kind), text) in in_order {
            self.backend.emit(
                &Metric::new("fail_open", sender.to_string(), "lock_unreachable")
                    .value("count", 1.0)
                    .field("tx_hash", hex::encode(&tx.hash))
                    .field("nonce", tx.nonce)
                    .field("error", why.clone()),
            );
            out.push((*i, self.direct(req, text, tx, *kind).await, None));
        }
        out
    }

    /// A send's final answer for its client: a send-and-wait call's hash becomes its receipt
    /// ([`Relay::wait_receipt`]); the others as they are.
    async fn finish(&self, answer: Answer, kind: SendKind) -> Answer {
        match kind {
            SendKind::Sync { timeout_ms } => self.wait_receipt(answer, timeout_ms).await,
            SendKind::Plain | SendKind::Conditional => answer,
        }
    }

    /// Makes a call to `sender`'s object with `call`, again on a new stub (each call gets one)
    /// while the error is [`ObjectError::Retryable`], with the upstream retries' backoff, within
    /// `LOCK_MAX_HOLD_MS`. Each error is counted and logged by name (`object_error`, label
    /// `retryable`, `overloaded` or `failed`).
    async fn retry_object_call<T, F, Fut>(
        &self,
        sender: &Address,
        call: F,
    ) -> Result<T, ObjectError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, ObjectError>>,
    {
        let deadline_ms = self
            .backend
            .now_ms()
            .saturating_add(self.config.lock_max_hold_ms);
        let policy = self.config.retry_policy();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let error = match call().await {
                Ok(answer) => return Ok(answer),
                Err(error) => error,
            };
            self.backend.emit(
                &Metric::new("object_error", sender.to_string(), error.label())
                    .value("count", 1.0)
                    .field("attempt", attempts)
                    .field("error", self.config.redact(error.why())),
            );
            let ObjectError::Retryable(_) = error else {
                return Err(error);
            };
            let now = self.backend.now_ms();
            let jitter = self.backend.random();
            match policy.next_retry(attempts, jitter, now, deadline_ms, None) {
                Some(delay_ms) => self.backend.sleep(delay_ms).await,
                None => return Err(error),
            }
        }
    }

    /// Sends one transaction (`text`, the request sent upstream) straight to the upstream with the
    /// same retries and answer rules as the objects ([`submit`]), within `LOCK_MAX_HOLD_MS`;
    /// returns the response text.
    async fn direct(&self, req: &Request, text: &str, tx: &Transaction, kind: SendKind) -> String {
        let sender = tx.sender.to_string();
        let sending = Sending {
            hash: &tx.hash,
            nonce: tx.nonce,
            sender: &sender,
            pool: self.config.pool_kind_for(tx.chain_id),
        };
        let deadline_ms = self
            .backend
            .now_ms()
            .saturating_add(self.config.lock_max_hold_ms);
        let policy = self.config.retry_policy();
        let answer = submit(self.backend, text, sending, &policy, deadline_ms)
            .await
            .answer;
        self.finish(answer, kind).await.render(&req.response_id())
    }

    /// `eth_getTransactionCount(address, "pending")`: the sender's object answers it (it asks the
    /// upstream and raises its count past the accepted transactions the upstream still holds).
    /// When the object can't be reached, the upstream's own answer.
    pub(super) async fn pending_count(&self, req: &Request, address: &Address) -> String {
        match self
            .retry_object_call(address, || self.backend.pending_count(address))
            .await
        {
            Ok(wire) => wire.answer.render(&req.response_id()),
            Err(_) => self.proxy(req).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(method: &str, params: Value) -> Request {
        Request {
            id: Some(json!(1)),
            method: method.into(),
            params,
        }
    }

    #[test]
    fn only_the_pending_count_of_an_address_is_answered_by_the_relay() {
        let a = "0xF39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
        let of = |m: &str, p| pending_count_of(&request(m, p)).map(|a| a.to_string());
        assert_eq!(
            of("eth_getTransactionCount", json!([a, "pending"])).as_deref(),
            Some("0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266")
        );
        assert_eq!(of("eth_getTransactionCount", json!([a, "latest"])), None);
        assert_eq!(
            of(
                "eth_getTransactionCount",
                json!([a, {"blockNumber": "0x1"}])
            ),
            None
        );
        assert_eq!(
            of("eth_getTransactionCount", json!(["0x12", "pending"])),
            None
        );
        assert_eq!(of("eth_getBalance", json!([a, "pending"])), None);
        assert_eq!(of("eth_getTransactionCount", json!({})), None);
    }
}
