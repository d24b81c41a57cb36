//! A sender's transactions of one request, and the pending nonce: the parts of [`Relay`] that
//! talk to the senders' Durable Objects.

use super::{Backend, Relay};
use crate::address::Address;
use crate::hex;
use crate::jsonrpc::{self, Answer, Request};
use crate::metrics::Metric;
use crate::upstream::submit::{submit, Sending};
use crate::transaction::Transaction;
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

impl<B: Backend> Relay<'_, B> {
    /// Sends `sender`'s transactions of one request (`(index, request, transaction)`, in request
    /// order) and returns each one's response text with its index. With ordering on they go to
    /// the sender's object in one call; when it can't be reached they are sent directly, one
    /// after the other in nonce order (fail-open). With ordering off, each is sent directly at once.
    pub(super) async fn send_group(
        &self,
        sender: &Address,
        txs: Vec<(usize, Request, Transaction)>,
    ) -> Vec<(usize, String)> {
        if !self.config.enable_nonce_ordering {
            let sends = txs
                .iter()
                .map(|(i, req, tx)| async move { (*i, self.direct(req, tx).await) });
            return join_all(sends).await;
        }
        let members: Vec<(&[u8; 32], u64, &str)> = txs
            .iter()
            .map(|(_, req, tx)| (&tx.hash, tx.nonce, req.text.as_str()))
            .collect();
        match self.backend.sender_lock(sender, &members).await {
            Ok(answers) => txs
                .iter()
                .zip(answers)
                .map(|((i, req, _), answer)| (*i, answer.render(&req.response_id())))
                .collect(),
            Err(error) => {
                let error = self.config.redact(&error);
                let mut in_order: Vec<&(usize, Request, Transaction)> = txs.iter().collect();
                in_order.sort_by_key(|(i, _, tx)| (tx.nonce, *i));
                let mut out = Vec::with_capacity(txs.len());
                for (i, req, tx) in in_order {
                    self.backend.emit(
                        &Metric::new("fail_open", sender.to_string(), "lock_unreachable")
                            .value("count", 1.0)
                            .field("tx_hash", hex::encode(&tx.hash))
                            .field("nonce", tx.nonce)
                            .field("error", error.clone()),
                    );
                    out.push((*i, self.direct(req, tx).await));
                }
                out
            }
        }
    }

    /// Sends one transaction straight to the upstream with the same retries and answer rules as
    /// the objects ([`submit`]), within `LOCK_MAX_HOLD_MS`; returns the response text.
    async fn direct(&self, req: &Request, tx: &Transaction) -> String {
        let sender = tx.sender.to_string();
        let sending = Sending {
            hash: &tx.hash,
            nonce: tx.nonce,
            sender: &sender,
        };
        let deadline_ms = self
            .backend
            .now_ms()
            .saturating_add(self.config.lock_max_hold_ms);
        let policy = self.config.retry_policy();
        submit(self.backend, &req.text, sending, &policy, deadline_ms)
            .await
            .answer
            .render(&req.response_id())
    }

    /// `eth_getTransactionCount(address, "pending")`: the upstream's count and the sender's next
    /// nonce after what its object accepted, asked at once; the answer is the larger. When the
    /// upstream gave no count (an error), or the object knows nothing or can't be reached, the
    /// upstream's answer comes back unchanged.
    pub(super) async fn pending_count(&self, req: &Request, address: &Address) -> String {
        let (upstream, object) =
            futures_util::future::join(self.proxy(req), self.backend.accepted_next_nonce(address))
                .await;
        match (jsonrpc::result_quantity(&upstream), object) {
            (Some(count), Ok(Some(next))) if next > count => {
                self.backend.emit(
                    &Metric::new(
                        "pending_nonce_raised",
                        address.to_string(),
                        "upstream_behind",
                    )
                    .value("upstream", count as f64)
                    .value("relay", next as f64),
                );
                Answer::Result(format!("\"{}\"", hex::encode_quantity(next)))
                    .render(&req.response_id())
            }
            _ => upstream,
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
            text: String::new(),
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
