//! A sender's transactions of one request: to its Durable Object in one call, or straight to the
//! upstream when the object can't be reached (fail-open) or ordering is off.

use super::{Backend, Member, ObjectError, Relay};
use crate::address::Address;
use crate::hex;
use crate::jsonrpc::{self, Answer, Response, RpcError};
use crate::metrics::Metric;
use crate::ordering::tx::{SendMethod, SignedTx};
use crate::upstream::submit::submit;
use futures_util::future::join_all;

/// How long a client refused because its sender's Durable Object is overloaded is asked to wait
/// before it retries, s.
pub const OVERLOADED_RETRY_AFTER_S: u64 = 1;

impl<B: Backend> Relay<'_, B> {
    /// Sends `sender`'s transactions of one request (in request order) and returns each one's
    /// response text with its index and `Retry-After` (s). With ordering on they go to the
    /// sender's object in one call (made again on a new stub while the runtime says the call may
    /// be retried, within `LOCK_MAX_HOLD_MS`); an overloaded object gets -32005; when the object
    /// can't be reached otherwise they are sent directly, one after the other in nonce order
    /// (fail-open). With ordering off, each is sent directly at once.
    pub(super) async fn send_group(
        &self,
        sender: &Address,
        members: Vec<Member>,
    ) -> Vec<(usize, Response, Option<u64>)> {
        if !self.config.enable_nonce_ordering {
            let sends = members
                .iter()
                .map(|m| async move { (m.index, self.direct(sender, m).await, None) });
            return join_all(sends).await;
        }
        let txs: Vec<&SignedTx> = members.iter().map(|m| &m.tx).collect();
        let chain_id = self.known_chain_id();
        let error = match self
            .retry_object_call(sender, || {
                self.backend.send_in_order(sender, chain_id, &txs)
            })
            .await
        {
            Ok(answers) => {
                let finished = members.iter().zip(answers).map(|(m, wire)| async move {
                    let answer = self.finish(wire.answer, &m.tx.method).await;
                    (m.index, Response::new(&m.id, answer), wire.retry_after_s)
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
            return members
                .iter()
                .map(|m| {
                    (
                        m.index,
                        Response::error(&m.id, &refusal),
                        Some(OVERLOADED_RETRY_AFTER_S),
                    )
                })
                .collect();
        }
        let why = self.config.redact(error.why());
        let mut in_order: Vec<&Member> = members.iter().collect();
        in_order.sort_by_key(|m| (m.tx.nonce, m.index));
        let mut out = Vec::with_capacity(members.len());
        for m in in_order {
            self.backend.emit(
                &Metric::new("fail_open", sender.to_string(), "lock_unreachable")
                    .value("count", 1.0)
                    .field("tx_hash", hex::encode(&m.tx.hash))
                    .field("nonce", m.tx.nonce)
                    .field("error", why.clone()),
            );
            out.push((m.index, self.direct(sender, m).await, None));
        }
        out
    }

    /// A send's final answer for its client: a send-and-wait call's hash becomes its receipt
    /// ([`Relay::wait_receipt`]); the others as they are.
    async fn finish(&self, answer: Answer, method: &SendMethod) -> Answer {
        match method {
            SendMethod::Sync { timeout_ms } => self.wait_receipt(answer, *timeout_ms).await,
            SendMethod::Plain | SendMethod::Conditional { .. } | SendMethod::Private { .. } => {
                answer
            }
        }
    }

    /// Sends one of `sender`'s transactions straight to the upstream with the same retries and
    /// answer rules as the objects ([`submit`]), within `LOCK_MAX_HOLD_MS`; returns the response.
    async fn direct(&self, sender: &Address, member: &Member) -> Response {
        let sender = sender.to_string();
        // The chain the Worker checked it against (an unprotected legacy one has none of its own).
        let pool = self
            .config
            .pool_kind_for(self.known_chain_id().or(member.tx.chain_id));
        let deadline_ms = self
            .backend
            .now_ms()
            .saturating_add(self.config.lock_max_hold_ms);
        let policy = self.config.retry_policy();
        let sent = submit(
            self.backend,
            &member.tx,
            &sender,
            pool,
            &policy,
            deadline_ms,
        )
        .await;
        let answer = self.finish(sent.answer, &member.tx.method).await;
        Response::new(&member.id, answer)
    }
}
