//! One client connection's subscriptions (geth's pub/sub API: `eth_subscribe`,
//! `eth_unsubscribe`, `eth_subscription` notifications), each under an id of the relay's own and
//! mapped to the upstream socket's id for it, so that it survives the upstream socket: after a
//! reconnect each is made again upstream and keeps its id towards the client.

use super::logs::{self, DeliveredLogs};
use crate::jsonrpc::{RpcError, INVALID_PARAMS};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::BTreeMap;
use std::ops::RangeInclusive;

/// The most `newHeads` a resumed subscription fills in after the upstream socket was away (at
/// 12 s slots, about 13 minutes; at 1 s blocks, about a minute).
pub const MAX_MISSED_HEADS: u64 = 64;

/// What a subscription delivers (geth's pub/sub API).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `newHeads`: each new block header.
    NewHeads,
    /// `logs` with an optional filter `{address, topics}`: each matching log.
    Logs,
    /// `newPendingTransactions`: each transaction hash the node's pool accepts.
    NewPendingTransactions,
}

impl Kind {
    /// The kind named by an `eth_subscribe` call's params (`[kind, options?]`).
    ///
    /// # Errors
    /// -32602 for params that are not an array starting with one of the three kinds.
    pub fn of_params(params: &Value) -> Result<Kind, RpcError> {
        let name = params
            .as_array()
            .and_then(|p| p.first())
            .and_then(Value::as_str);
        match name {
            Some("newHeads") => Ok(Kind::NewHeads),
            Some("logs") => Ok(Kind::Logs),
            Some("newPendingTransactions") => Ok(Kind::NewPendingTransactions),
            Some(other) => Err(RpcError::new(
                INVALID_PARAMS,
                format!(
                    "unsupported subscription {other:?}: newHeads, logs and newPendingTransactions are"
                ),
            )),
            None => Err(RpcError::new(
                INVALID_PARAMS,
                "invalid params: eth_subscribe takes [kind, options?]",
            )),
        }
    }
}

#[derive(Debug, Clone)]
struct Subscription {
    kind: Kind,
    /// The `eth_subscribe` params as the client sent them (JSON text), to subscribe again.
    params: String,
    /// The upstream socket's id for it; `None` while the upstream socket is away.
    upstream_id: Option<String>,
    /// The number of the last `newHeads` header delivered.
    last_head: Option<u64>,
    /// Made again on a new upstream socket and no header delivered since: the next header may
    /// come after a gap.
    resumed: bool,
    /// `logs`: the logs delivered lately.
    logs: DeliveredLogs,
    /// `logs`: the block the upstream had reached when its socket dropped, while the logs of the
    /// gap are still to be fetched.
    gap_from: Option<u64>,
}

/// A notification from the upstream, as the client gets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The client's subscription id.
    pub id: String,
    /// The notification to send, under the client's id.
    pub text: String,
    /// The `newHeads` the client missed while the upstream socket was away (block numbers, at
    /// most [`MAX_MISSED_HEADS`]), to send first, each fetched by number.
    pub missed: Option<RangeInclusive<u64>>,
}

/// One connection's subscriptions, by the client's id.
#[derive(Debug, Clone, Default)]
pub struct Subscriptions {
    entries: BTreeMap<String, Subscription>,
}

#[derive(Deserialize)]
struct Incoming<'a> {
    method: Option<&'a str>,
    #[serde(borrow)]
    params: Option<NotificationParams<'a>>,
}

#[derive(Deserialize)]
struct NotificationParams<'a> {
    subscription: String,
    #[serde(borrow)]
    result: &'a RawValue,
}

#[derive(Deserialize)]
struct Header {
    number: Option<String>,
}

/// A notification of subscription `id` carrying `result` (JSON text), as geth sends it.
pub fn notification(id: &str, result: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"{}","params":{{"subscription":{},"result":{result}}}}}"#,
        super::NOTIFICATION,
        Value::String(id.to_string())
    )
}

/// A new subscription id: 16 random bytes in hex, as geth makes them.
pub fn new_id() -> String {
    crate::hex::encode(uuid::Uuid::new_v4().as_bytes())
}

impl Subscriptions {
    /// How many subscriptions the connection holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Records a subscription the upstream confirmed under `upstream_id`; returns the client's id
    /// for it.
    pub fn add(&mut self, kind: Kind, params: String, upstream_id: String) -> String {
        let id = new_id();
        self.entries.insert(
            id.clone(),
            Subscription {
                kind,
                params,
                upstream_id: Some(upstream_id),
                last_head: None,
                resumed: false,
                logs: DeliveredLogs::default(),
                gap_from: None,
            },
        );
        id
    }

    /// Forgets the client's subscription `id`: `None` when there is none (`eth_unsubscribe`
    /// answers false), else its upstream id (`None` while the upstream socket is away), to
    /// unsubscribe there.
    pub fn remove(&mut self, id: &str) -> Option<Option<String>> {
        self.entries.remove(id).map(|s| s.upstream_id)
    }

    /// The notification `text` from the upstream under the client's id, or `None` when it is
    /// not a notification of a subscription held here (one just unsubscribed, or another
    /// message).
    pub fn deliver(&mut self, text: &str) -> Option<Delivery> {
        let incoming: Incoming = serde_json::from_str(text).ok()?;
        if incoming.method != Some(super::NOTIFICATION) {
            return None;
        }
        let params = incoming.params?;
        let (id, entry) = self
            .entries
            .iter_mut()
            .find(|(_, s)| s.upstream_id.as_deref() == Some(params.subscription.as_str()))?;
        let mut missed = None;
        if entry.kind == Kind::Logs && !entry.logs.first_time(params.result.get()) {
            return None; // already delivered from the fetch of a gap
        }
        if entry.kind == Kind::NewHeads {
            let number = serde_json::from_str::<Header>(params.result.get())
                .ok()
                .and_then(|h| h.number)
                .and_then(|n| crate::hex::decode_quantity(&n).ok());
            if let Some(number) = number {
                if let (true, Some(last)) = (entry.resumed, entry.last_head) {
                    let first = (last + 1).max(number.saturating_sub(MAX_MISSED_HEADS));
                    missed = (first < number).then(|| first..=number - 1);
                }
                entry.last_head = Some(number);
                entry.resumed = false;
            }
        }
        Some(Delivery {
            id: id.clone(),
            text: notification(id, params.result.get()),
            missed,
        })
    }

    /// Whether any subscription is for logs (whose gap the caller fetches again: it asks the
    /// upstream's head for [`Subscriptions::lost`]).
    pub fn has_logs(&self) -> bool {
        self.entries.values().any(|s| s.kind == Kind::Logs)
    }

    /// The upstream socket is gone, with the upstream at block `head` (`None`: unknown, no logs
    /// are fetched again): every subscription loses its upstream id. Returns each one's client
    /// id and `eth_subscribe` params, to make again on a new socket ([`Subscriptions::resumed`]).
    pub fn lost(&mut self, head: Option<u64>) -> Vec<(String, String)> {
        self.entries
            .iter_mut()
            .map(|(id, s)| {
                s.upstream_id = None;
                if s.kind == Kind::Logs && s.gap_from.is_none() {
                    s.gap_from = head;
                }
                (id.clone(), s.params.clone())
            })
            .collect()
    }

    /// Whether subscription `id` has logs of a gap to fetch ([`Subscriptions::gap_query`]).
    pub fn has_gap(&self, id: &str) -> bool {
        self.entries.get(id).is_some_and(|s| s.gap_from.is_some())
    }

    /// The `eth_getLogs` params for the logs subscription `id` missed, up to block `to` (the
    /// upstream's head once it was made again): from [`logs::GAP_MARGIN_BLOCKS`] before the
    /// head at the drop. `None` when there is no gap to fetch; asked once.
    pub fn gap_query(&mut self, id: &str, to: u64) -> Option<String> {
        let s = self.entries.get_mut(id)?;
        let from = s.gap_from.take()?;
        Some(logs::gap_query(
            &s.params,
            from.saturating_sub(logs::GAP_MARGIN_BLOCKS),
            to,
        ))
    }

    /// The notifications of the fetched logs `found` (an `eth_getLogs` result, a JSON array)
    /// that subscription `id` has not delivered yet, in their order.
    pub fn gap_logs(&mut self, id: &str, found: &Value) -> Vec<String> {
        let (Some(s), Some(found)) = (self.entries.get_mut(id), found.as_array()) else {
            return Vec::new();
        };
        found
            .iter()
            .map(Value::to_string)
            .filter(|log| s.logs.first_time(log))
            .map(|log| notification(id, &log))
            .collect()
    }

    /// Subscription `id` was made again upstream as `upstream_id`. False when the client
    /// unsubscribed meanwhile (the caller unsubscribes upstream).
    pub fn resumed(&mut self, id: &str, upstream_id: String) -> bool {
        match self.entries.get_mut(id) {
            Some(s) => {
                s.upstream_id = Some(upstream_id);
                s.resumed = true;
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_resumed_logs_subscription_fetches_its_gap_once_and_delivers_each_log_once() {
        let mut subs = Subscriptions::default();
        let id = subs.add(
            Kind::Logs,
            r#"["logs",{"address":"0x01"}]"#.into(),
            "0xa".into(),
        );
        let log = |up: &str, hash: &str| {
            json!({"jsonrpc":"2.0","method":"eth_subscription",
                   "params":{"subscription":up,"result":{"blockHash":hash,"logIndex":"0x0"}}})
            .to_string()
        };
        assert!(subs.deliver(&log("0xa", "0x01")).is_some());
        assert!(subs.has_logs() && !subs.has_gap(&id));
        subs.lost(Some(10));
        assert!(subs.resumed(&id, "0xb".into()) && subs.has_gap(&id));
        let query: Value = serde_json::from_str(&subs.gap_query(&id, 15).unwrap()).unwrap();
        assert_eq!(
            query,
            json!([{"address":"0x01","fromBlock":"0x8","toBlock":"0xf"}])
        );
        assert_eq!(subs.gap_query(&id, 16), None, "asked once");
        // The fetch finds a log delivered before the drop and one of the gap; the new
        // subscription then delivers the gap's log again and a new one.
        let found =
            json!([{"blockHash":"0x01","logIndex":"0x0"},{"blockHash":"0x02","logIndex":"0x0"}]);
        let sent = subs.gap_logs(&id, &found);
        assert_eq!(sent.len(), 1);
        assert!(sent[0].contains("0x02") && sent[0].contains(&id));
        assert!(subs.deliver(&log("0xb", "0x02")).is_none());
        assert!(subs.deliver(&log("0xb", "0x03")).is_some());
        // Without the head at the drop, nothing is fetched.
        subs.lost(None);
        subs.resumed(&id, "0xc".into());
        assert!(!subs.has_gap(&id));
    }

    fn head(upstream_id: &str, number: u64) -> String {
        json!({"jsonrpc":"2.0","method":"eth_subscription",
               "params":{"subscription":upstream_id,"result":{"number":format!("0x{number:x}"),"hash":"0xab"}}})
        .to_string()
    }

    #[test]
    fn kinds_are_checked_before_anything_goes_upstream() {
        assert_eq!(
            Kind::of_params(&json!(["newHeads"])).unwrap(),
            Kind::NewHeads
        );
        assert_eq!(
            Kind::of_params(&json!(["logs", {"address": "0x00"}])).unwrap(),
            Kind::Logs
        );
        assert_eq!(
            Kind::of_params(&json!(["syncing"])).unwrap_err().code,
            -32602
        );
        assert_eq!(Kind::of_params(&json!({})).unwrap_err().code, -32602);
        assert_eq!(Kind::of_params(&Value::Null).unwrap_err().code, -32602);
    }

    #[test]
    fn notifications_go_out_under_the_client_id_with_the_result_unchanged() {
        let mut subs = Subscriptions::default();
        let id = subs.add(Kind::Logs, r#"["logs"]"#.into(), "0xup1".into());
        assert_eq!(id.len(), 34);
        let text = json!({"jsonrpc":"2.0","method":"eth_subscription",
                          "params":{"subscription":"0xup1","result":{"data":"0x01","logIndex":"0x0"}}})
        .to_string();
        let delivery = subs.deliver(&text).unwrap();
        let out: Value = serde_json::from_str(&delivery.text).unwrap();
        assert_eq!(out["params"]["subscription"], json!(id));
        assert_eq!(
            out["params"]["result"],
            json!({"data":"0x01","logIndex":"0x0"})
        );
        assert_eq!(out["method"], "eth_subscription");
        // Another subscription's notification, an answer, or garbage: nothing to deliver.
        assert!(subs.deliver(&head("0xother", 1)).is_none());
        assert!(subs
            .deliver(r#"{"jsonrpc":"2.0","id":1,"result":"0x1"}"#)
            .is_none());
        assert!(subs.deliver("not json").is_none());
        assert_eq!(subs.remove(&id), Some(Some("0xup1".into())));
        assert!(subs.deliver(&text).is_none());
        assert_eq!(subs.remove(&id), None);
    }

    #[test]
    fn a_resumed_new_heads_subscription_names_the_blocks_it_missed_once() {
        let mut subs = Subscriptions::default();
        let id = subs.add(Kind::NewHeads, r#"["newHeads"]"#.into(), "0xa".into());
        assert_eq!(subs.deliver(&head("0xa", 10)).unwrap().missed, None);
        assert_eq!(
            subs.lost(None),
            vec![(id.clone(), r#"["newHeads"]"#.to_string())]
        );
        // Nothing arrives under the old upstream id once it is lost.
        assert!(subs.deliver(&head("0xa", 11)).is_none());
        assert!(subs.resumed(&id, "0xb".into()));
        let first = subs.deliver(&head("0xb", 14)).unwrap();
        assert_eq!(first.missed, Some(11..=13));
        assert_eq!(first.id, id);
        // Only the first header after the resume can follow a gap.
        assert_eq!(subs.deliver(&head("0xb", 16)).unwrap().missed, None);
        // No gap, or a header at or below the last one (a reorg): nothing missed.
        subs.lost(None);
        subs.resumed(&id, "0xc".into());
        assert_eq!(subs.deliver(&head("0xc", 17)).unwrap().missed, None);
        subs.lost(None);
        subs.resumed(&id, "0xd".into());
        assert_eq!(subs.deliver(&head("0xd", 15)).unwrap().missed, None);
        // A long outage fills in at most MAX_MISSED_HEADS.
        subs.lost(None);
        subs.resumed(&id, "0xe".into());
        let long = subs.deliver(&head("0xe", 1_000)).unwrap().missed.unwrap();
        assert_eq!(long, 1_000 - MAX_MISSED_HEADS..=999);
        // An unsubscribe while the upstream socket was away: not resumed.
        subs.lost(None);
        subs.remove(&id);
        assert!(!subs.resumed(&id, "0xf".into()));
        assert!(subs.is_empty());
    }
}
