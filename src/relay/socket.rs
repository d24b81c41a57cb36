//! One WebSocket message: the same JSON-RPC as an HTTP body ([`Relay::handle`]), except that
//! `eth_subscribe` / `eth_unsubscribe` are the connection's own ([`SubscriptionCalls`]). Rate
//! limits count every member, subscriptions as reads; the method policy applies to
//! subscriptions too (`METHOD_DENYLIST=eth_subscribe` turns them off).

use super::{method_not_allowed, Backend, Relay};
use crate::access::rate_limit;
use crate::jsonrpc::{self, Entry, Incoming, Request};
use crate::websocket::is_subscription;
use futures_util::future::{join, join_all};

/// The connection's side of `eth_subscribe` and `eth_unsubscribe`, over the upstream's
/// WebSocket (the platform adapter).
#[allow(async_fn_in_trait)] // single-threaded wasm: no Send bound wanted
pub trait SubscriptionCalls {
    /// The response text to one `eth_subscribe` or `eth_unsubscribe` request the method policy
    /// allows.
    async fn call(&self, req: &Request) -> String;
}

impl<B: Backend> Relay<'_, B> {
    /// Answers one WebSocket message (already bounded by `WS_MAX_MESSAGE_BYTES`): the response
    /// text, or `None` when every request in it was a notification. Without a subscription call
    /// in it, exactly [`Relay::handle`]'s body; with one, the same rules, the subscription calls
    /// answered by `subscriptions` and the rest by the relay, concurrently, in request order.
    pub async fn handle_message(
        &self,
        body: &[u8],
        subscriptions: &impl SubscriptionCalls,
    ) -> Option<String> {
        let parsed = jsonrpc::parse(body, self.config.max_batch);
        let subscribes = |e: &Entry| e.as_ref().is_ok_and(|r| is_subscription(&r.method));
        let (entries, batch) = match parsed {
            Ok(Incoming::Single(entry)) if subscribes(&entry) => (vec![entry], false),
            Ok(Incoming::Batch(entries)) if entries.iter().any(subscribes) => (entries, true),
            _ => return self.handle(body).await.body,
        };
        let refs: Vec<&Entry> = entries.iter().collect();
        let (sends, reads) = rate_limit::count(&refs);
        if self.backend.over_rate_limit(sends, reads).await {
            return Some(rate_limit::refusal(&refs, batch));
        }
        let wanted: Vec<bool> = entries
            .iter()
            .map(|e| e.as_ref().map_or(true, |r| r.id.is_some()))
            .collect();
        let mut answers: Vec<Option<String>> = vec![None; entries.len()];
        let mut calls = Vec::new();
        let (mut relayed, mut relayed_at) = (Vec::new(), Vec::new());
        for (i, entry) in entries.into_iter().enumerate() {
            match entry {
                Ok(req) if is_subscription(&req.method) => {
                    if self.config.methods.allows(&req.method) {
                        calls.push((i, req));
                    } else {
                        answers[i] = Some(method_not_allowed(&req));
                    }
                }
                other => {
                    relayed_at.push(i);
                    relayed.push(other);
                }
            }
        }
        let call_tasks = calls
            .iter()
            .map(|(i, req)| async move { (*i, subscriptions.call(req).await) });
        let (called, (relayed_answers, _)) =
            join(join_all(call_tasks), self.answer_all(relayed)).await;
        for (i, text) in called {
            answers[i] = Some(text);
        }
        for (i, text) in relayed_at.into_iter().zip(relayed_answers) {
            answers[i] = Some(text);
        }
        let kept: Vec<String> = answers
            .into_iter()
            .zip(wanted)
            .filter_map(|(a, w)| w.then(|| a.unwrap_or_default()))
            .collect();
        match (batch, kept.len()) {
            (_, 0) => None,
            (false, _) => kept.into_iter().next(),
            (true, _) => Some(jsonrpc::batch(&kept)),
        }
    }
}
