//! `eth_cancelPrivateTransaction` (`[{"txHash"}]`, Flashbots'): only behind a private route. Its
//! sender is found from the route's status (`SEND_STATUS_URL`, whose answer names
//! `transaction.from`, as Flashbots Protect's does) or else the read node's
//! `eth_getTransactionByHash`; the cancel then goes to that sender's Durable Object, taken in
//! its turn with its sends ([`crate::ordering::sender::Sender::cancel`]). When the object can't
//! be reached, the cancel goes to the route straight (fail-open), and the object learns of it
//! from the route's status. The hash is the capability, as at the routes: a private
//! transaction's hash is known to its client and the route until it is in a block, and then
//! nothing can cancel it.

use super::{Backend, Relay};
use crate::address::Address;
use crate::jsonrpc::{self, Request, Response, RpcError};
use crate::ordering::route_status::RouteStatus;
use crate::transaction::TxHash;
use crate::upstream::cancel::cancel_at_route;
use serde_json::Value;

/// The hash in the params of `eth_cancelPrivateTransaction`: `[{"txHash": "0x…"}]`.
///
/// # Errors
/// -32602 saying what is wrong.
pub fn cancel_params(params: &Value) -> Result<TxHash, RpcError> {
    let invalid = || {
        RpcError::new(
            jsonrpc::INVALID_PARAMS,
            "invalid params: expected [{\"txHash\": 0x and 64 hex digits}] \
             (eth_cancelPrivateTransaction)",
        )
    };
    let Some([Value::Object(object)]) = params.as_array().map(Vec::as_slice) else {
        return Err(invalid());
    };
    let hash = object
        .get("txHash")
        .and_then(Value::as_str)
        .ok_or_else(invalid)?;
    crate::hex::decode_array(hash).ok_or_else(invalid)
}

impl<B: Backend> Relay<'_, B> {
    /// The answer to `eth_cancelPrivateTransaction` (see the module documentation): the route's
    /// `true` or `false`; -32004 without a private route (nothing sent anywhere); -32000 when
    /// neither the route nor the read node names the transaction's sender.
    pub(super) async fn cancel(&self, req: &Request) -> Response {
        let id = req.response_id();
        if !self.config.private_route() {
            let refusal = RpcError::new(
                jsonrpc::METHOD_NOT_SUPPORTED,
                "eth_cancelPrivateTransaction needs a private route (UPSTREAM_SEND_URL), and \
                 this relay has none: nothing was sent",
            );
            return Response::error(&id, &refusal);
        }
        let hash = match cancel_params(&req.params) {
            Ok(hash) => hash,
            Err(error) => return Response::error(&id, &error),
        };
        let Some(sender) = self.private_sender(&hash).await else {
            let unknown = RpcError::new(
                jsonrpc::INVALID_INPUT,
                "transaction not known: neither the private route's status (SEND_STATUS_URL) \
                 nor the read node names its sender; nothing was cancelled",
            );
            return Response::error(&id, &unknown);
        };
        // With ordering off no object follows it: the route straight.
        let by_object = match self.config.enable_nonce_ordering {
            true => self.backend.cancel_private(&sender, &hash).await.ok(),
            false => None,
        };
        let answer = match by_object {
            Some(wire) => wire.answer,
            None => {
                // Fail-open: the route straight; the object reads the route's word later.
                let deadline_ms = self
                    .backend
                    .now_ms()
                    .saturating_add(self.config.lock_max_hold_ms);
                let policy = self.config.retry_policy();
                cancel_at_route(self.backend, &hash, &policy, deadline_ms).await
            }
        };
        Response::new(&id, answer)
    }

    /// The sender of private transaction `hash`: from the route's status, else the read node.
    async fn private_sender(&self, hash: &TxHash) -> Option<Address> {
        let timeout_ms = self.config.upstream_timeout_ms;
        if self.config.route_status() {
            let status = self.backend.get_status(hash, timeout_ms).await;
            if let Some(sender) = status
                .ok()
                .filter(|reply| (200..300).contains(&reply.status))
                .and_then(|reply| RouteStatus::sender_of_body(&reply.body))
            {
                return Some(sender);
            }
        }
        self.sender_of(&crate::hex::encode(hash)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cancel_params_take_one_object_with_a_hash() {
        let hash = format!("0x{}", "ab".repeat(32));
        assert_eq!(cancel_params(&json!([{ "txHash": hash }])), Ok([0xab; 32]));
        for bad in [
            json!([]),
            json!([hash]),
            json!([{ "hash": hash }]),
            json!([{ "txHash": "0x12" }]),
            json!([{ "txHash": hash }, {}]),
        ] {
            assert_eq!(cancel_params(&bad).unwrap_err().code, -32602, "{bad}");
        }
    }
}
