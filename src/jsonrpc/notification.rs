//! geth's pub/sub API as JSON-RPC names it: the subscribe and unsubscribe methods and the one
//! reader of a subscription's notification, shared by the client's WebSocket
//! ([`crate::websocket`]) and the cache's head watch ([`crate::cache::head_watch`]).

/// `eth_subscribe` (geth's pub/sub API): params `[kind, options?]`, answers a subscription id.
pub const SUBSCRIBE: &str = "eth_subscribe";
/// `eth_unsubscribe`: params `[subscription id]`, answers true or false.
pub const UNSUBSCRIBE: &str = "eth_unsubscribe";
/// The method of every notification (geth's pub/sub API).
pub const NOTIFICATION: &str = "eth_subscription";

/// A subscription's notification as geth sends it (`{"jsonrpc":"2.0","method":
/// "eth_subscription","params":{"subscription":id,"result":...}}`): the upstream's subscription
/// id and the `result` (JSON text, as it came); `None` for any other message.
pub fn notification_of(text: &str) -> Option<(String, &serde_json::value::RawValue)> {
    #[derive(serde::Deserialize)]
    struct Incoming<'a> {
        method: Option<&'a str>,
        #[serde(borrow)]
        params: Option<Params<'a>>,
    }
    #[derive(serde::Deserialize)]
    struct Params<'a> {
        subscription: String,
        #[serde(borrow)]
        result: &'a serde_json::value::RawValue,
    }
    let incoming: Incoming = serde_json::from_str(text).ok()?;
    if incoming.method != Some(NOTIFICATION) {
        return None;
    }
    let params = incoming.params?;
    Some((params.subscription, params.result))
}
