//! Cancelling a private transaction at the route: `eth_cancelPrivateTransaction` with
//! `[{"txHash"}]` (Flashbots', as QuickNode's and Alchemy's Protect endpoints serve it; a
//! transaction can be cancelled only through the endpoint that sent it, which the relay is). A
//! route that does not serve the method (Flashbots Protect's RPC, MEV Blocker: they cancel by a
//! transaction of the same nonce, empty data, to the sender itself) gets the client a clear
//! -32004 saying so.

use crate::hex;
use crate::jsonrpc::{self, Answer, RpcError, CANCEL_PRIVATE_TRANSACTION};
use crate::transaction::TxHash;
use crate::upstream::retry::{post_retried, RetryPolicy};
use crate::upstream::{method_not_served, CallKind, Platform, UpstreamError};

/// The request that cancels `hash` at the route.
pub fn cancel_request(hash: &TxHash) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"{CANCEL_PRIVATE_TRANSACTION}","params":[{{"txHash":"{}"}}]}}"#,
        hex::encode(hash)
    )
}

/// Asks the route to cancel `hash` (retried while it cannot be used, as a read: cancelling twice
/// is cancelling once), by `deadline_ms` (Unix ms). Returns the route's answer (`true`: cancelled;
/// `false`: not, e.g. already included), -32004 when the route does not serve the method, or the
/// relay's error when no answer came.
pub async fn cancel_at_route<P: Platform + ?Sized>(
    upstream: &P,
    hash: &TxHash,
    policy: &RetryPolicy,
    deadline_ms: u64,
) -> Answer {
    let request = cancel_request(hash);
    let reply = post_retried(upstream, &request, CallKind::Send, policy, deadline_ms).await;
    if method_not_served(&reply) {
        return Answer::error(&RpcError::new(
            jsonrpc::METHOD_NOT_SUPPORTED,
            "the private route does not serve eth_cancelPrivateTransaction: cancel by sending a \
             transaction with the same nonce, empty data and a higher priority fee to your own \
             address (Flashbots Protect; MEV Blocker with softCancellations)",
        ));
    }
    match reply {
        Ok(reply) => Answer::parse(&reply.body)
            .unwrap_or_else(|| Answer::error(&UpstreamError::Invalid.to_rpc())),
        Err(error) => Answer::error(&error.to_rpc()),
    }
}
