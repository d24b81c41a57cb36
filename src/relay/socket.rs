//! One WebSocket message: the same JSON-RPC as an HTTP body ([`Relay::handle`]), except that
//! `eth_subscribe` / `eth_unsubscribe` are the connection's own ([`SubscriptionCalls`]). Rate
//! limits count every member, subscriptions as reads; the method policy applies to
//! subscriptions too (`METHOD_DENYLIST=eth_subscribe` turns them off).

use super::{Backend, Relay};
use crate::jsonrpc::{Body, Request};
use std::convert::Infallible;

/// The connection's side of `eth_subscribe` and `eth_unsubscribe`, over the upstream's
/// WebSocket (the platform adapter).
#[allow(async_fn_in_trait)] // single-threaded wasm: no Send bound wanted
pub trait SubscriptionCalls {
    /// The response text to one `eth_subscribe` or `eth_unsubscribe` request the method policy
    /// allows.
    async fn call(&self, req: &Request) -> String;
}

/// No connection (HTTP): never called, the subscription methods are proxied.
impl SubscriptionCalls for Infallible {
    async fn call(&self, _req: &Request) -> String {
        match *self {}
    }
}

impl<B: Backend> Relay<'_, B> {
    /// Answers one WebSocket message (already bounded by `WS_MAX_MESSAGE_BYTES`): the response
    /// body, or `None` when every request in it was a notification. [`Relay::handle`]'s body,
    /// with the subscription calls answered by `subscriptions`, concurrently with the rest.
    pub async fn handle_message(
        &self,
        body: &[u8],
        subscriptions: &impl SubscriptionCalls,
    ) -> Option<Body> {
        self.answer_body(body, Some(subscriptions)).await.body
    }
}
