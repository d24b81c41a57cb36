//! One client connection's subscriptions (geth's pub/sub API: `eth_subscribe`,
//! `eth_unsubscribe`, `eth_subscription` notifications), each under an id of the relay's own and
//! mapped to the upstream socket's id for it, so that it survives the upstream socket: after a
//! reconnect each is made again upstream and keeps its id towards the client.
//!
//! A subscription is counted against `WS_MAX_SUBSCRIPTIONS` when it is asked for, not when the
//! upstream confirms it ([`Subscriptions::ask`]), and what it keeps (its params as the relay made
//! them, the logs it remembers) is charged to the connection's [`Memory`].

use super::logs::{self, DeliveredLogs, GAP_MARGIN_BLOCKS, MAX_GAP_BLOCKS};
use super::memory::Memory;
use super::params::{Kind, Subscribe};
use crate::jsonrpc::{RpcError, LIMIT_EXCEEDED};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::ops::RangeInclusive;

/// The most `newHeads` filled in after the upstream socket was away (at 12 s slots, about 13
/// minutes; at 1 s blocks, about a minute): [`super::backfill`] fetches them.
pub const MAX_MISSED_HEADS: u64 = 64;

/// What one subscription costs beyond its params, bytes (its ids and state).
pub const SUBSCRIPTION_BYTES: usize = 256;

#[derive(Debug)]
struct Subscription {
    kind: Kind,
    /// The `eth_subscribe` params as the relay made them (JSON text), to subscribe again.
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
    /// `logs`: the last block reached when the upstream socket dropped, while the logs of the
    /// gap are still to be fetched.
    gap_from: Option<u64>,
}

impl Subscription {
    fn bytes(&self) -> usize {
        self.params.len() + SUBSCRIPTION_BYTES
    }
}

/// A notification from the upstream, as the client gets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The client's subscription id.
    pub id: String,
    /// The notification to send, under the client's id.
    pub text: String,
    /// The `newHeads` the client missed while the upstream socket was away (block numbers, at
    /// most [`MAX_MISSED_HEADS`]), to send first ([`super::backfill`]).
    pub missed: Option<RangeInclusive<u64>>,
    /// A `newHeads` notification's block header, for the read cache
    /// ([`crate::cache::ReadCache::heard_head`]).
    pub head: Option<crate::cache::header::Header>,
}

/// Why an `eth_subscribe` is refused before it goes upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The connection holds (or is asking for) `WS_MAX_SUBSCRIPTIONS` already: the connection is
    /// closed after the answer ([`super::Close::TooManySubscriptions`]).
    TooMany(usize),
    /// Its params do not fit in what the connection or the isolate may keep: -32005, the
    /// connection stays.
    NoMemory,
}

impl Refused {
    /// The error the client gets (-32005, EIP-1474 limit exceeded).
    pub fn error(&self) -> RpcError {
        match self {
            Refused::TooMany(limit) => super::Close::TooManySubscriptions(*limit).error(),
            Refused::NoMemory => RpcError::new(
                LIMIT_EXCEEDED,
                "subscription refused: the connection's subscriptions use all the memory the relay allows (WS_MAX_CONNECTION_BYTES, WS_MAX_ISOLATE_BYTES)",
            ),
        }
    }
}

/// One connection's subscriptions, by the client's id.
#[derive(Debug)]
pub struct Subscriptions {
    entries: BTreeMap<String, Subscription>,
    /// Subscriptions asked for and not answered yet.
    asked: usize,
    memory: Memory,
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
    /// No subscription yet; what they keep is charged to `memory`.
    pub fn new(memory: Memory) -> Self {
        Subscriptions {
            entries: BTreeMap::new(),
            asked: 0,
            memory,
        }
    }

    /// The connection's memory.
    pub fn memory(&self) -> &Memory {
        &self.memory
    }

    /// How many subscriptions the connection holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A client asks for `subscribe`: counted at once against `limit` (with those held and those
    /// asked for and not answered yet) and its params charged to the memory, before anything
    /// goes upstream. Each accepted ask ends with [`Subscriptions::add`] or
    /// [`Subscriptions::abandon`].
    ///
    /// # Errors
    /// [`Refused`]: over the count, or over the memory.
    pub fn ask(&mut self, subscribe: &Subscribe, limit: usize) -> Result<(), Refused> {
        if self.entries.len() + self.asked >= limit {
            return Err(Refused::TooMany(limit));
        }
        if !self
            .memory
            .take(subscribe.params.len() + SUBSCRIPTION_BYTES)
        {
            return Err(Refused::NoMemory);
        }
        self.asked += 1;
        Ok(())
    }

    /// An ask that came to nothing (the upstream refused it, or did not answer).
    pub fn abandon(&mut self, subscribe: &Subscribe) {
        self.asked = self.asked.saturating_sub(1);
        self.memory
            .give(subscribe.params.len() + SUBSCRIPTION_BYTES);
    }

    /// Records an asked subscription the upstream confirmed under `upstream_id`; returns the
    /// client's id for it.
    pub fn add(&mut self, subscribe: Subscribe, upstream_id: String) -> String {
        self.asked = self.asked.saturating_sub(1);
        let id = new_id();
        self.entries.insert(
            id.clone(),
            Subscription {
                kind: subscribe.kind,
                params: subscribe.params,
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
    /// unsubscribe there. Its memory is given back.
    pub fn remove(&mut self, id: &str) -> Option<Option<String>> {
        let mut s = self.entries.remove(id)?;
        s.logs.clear(&self.memory);
        self.memory.give(s.bytes());
        Some(s.upstream_id)
    }

    /// The notification `text` from the upstream under the client's id, or `None` when it is
    /// not a notification of a subscription held here (one just unsubscribed, or another
    /// message), or a log delivered already.
    pub fn deliver(&mut self, text: &str) -> Option<Delivery> {
        let (subscription, result) = super::notification_of(text)?;
        let (id, entry) = self
            .entries
            .iter_mut()
            .find(|(_, s)| s.upstream_id.as_deref() == Some(subscription.as_str()))?;
        let mut missed = None;
        let mut head = None;
        if entry.kind == Kind::Logs && !entry.logs.first_time(result.get(), &self.memory) {
            return None; // already delivered from the fetch of a gap
        }
        if entry.kind == Kind::NewHeads {
            head = serde_json::from_str(result.get())
                .ok()
                .and_then(|block| crate::cache::header::Header::of_block(&block));
            let number = serde_json::from_str::<Header>(result.get())
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
            text: notification(id, result.get()),
            missed,
            head,
        })
    }

    /// Whether any subscription is for logs (whose gap the caller fetches again: it asks the
    /// upstream's head for [`Subscriptions::lost`]).
    pub fn has_logs(&self) -> bool {
        self.entries.values().any(|s| s.kind == Kind::Logs)
    }

    /// The upstream socket is gone, with the upstream at block `head` (`None`: unknown): every
    /// subscription loses its upstream id. A `logs` subscription's gap starts at `head`, or
    /// without it at the newest block the connection delivered anything of (a header or a log);
    /// with neither known, its gap is not fetched. Returns each one's client id and params, to
    /// make again on a new socket ([`Subscriptions::resumed`]).
    pub fn lost(&mut self, head: Option<u64>) -> Vec<(String, String)> {
        let seen = self
            .entries
            .values()
            .filter_map(|s| s.last_head.max(s.logs.highest()))
            .max();
        let from = head.or(seen);
        self.entries
            .iter_mut()
            .map(|(id, s)| {
                s.upstream_id = None;
                if s.kind == Kind::Logs && s.gap_from.is_none() {
                    s.gap_from = from;
                    if let Some(from) = from {
                        s.logs.pin(from.saturating_sub(GAP_MARGIN_BLOCKS));
                    }
                }
                (id.clone(), s.params.clone())
            })
            .collect()
    }

    /// The subscriptions with logs of a gap to fetch ([`Subscriptions::gap_query`]).
    pub fn gaps(&self) -> Vec<String> {
        self.entries
            .iter()
            .filter(|(_, s)| s.gap_from.is_some() && s.upstream_id.is_some())
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// The `eth_getLogs` params for the logs subscription `id` missed, up to block `to` (the
    /// upstream's head once it was made again): from [`GAP_MARGIN_BLOCKS`] before the block its
    /// gap starts at, and at most [`MAX_GAP_BLOCKS`] blocks. `None` when there is no gap to
    /// fetch; asked once.
    pub fn gap_query(&mut self, id: &str, to: u64) -> Option<String> {
        let s = self.entries.get_mut(id)?;
        let from = s.gap_from.take()?;
        let from = from
            .saturating_sub(GAP_MARGIN_BLOCKS)
            .max(to.saturating_sub(MAX_GAP_BLOCKS - 1));
        Some(logs::gap_query(&s.params, from.min(to), to))
    }

    /// The gap of subscription `id` is given up (its head could not be learned): nothing is
    /// fetched, and the next drop starts a gap of its own.
    pub fn drop_gap(&mut self, id: &str) {
        if let Some(s) = self.entries.get_mut(id) {
            s.gap_from = None;
            s.logs.unpin(&self.memory);
        }
    }

    /// The notifications of the fetched logs `found` (an `eth_getLogs` result, a JSON array)
    /// that subscription `id` has not delivered yet, in their order.
    pub fn gap_logs(&mut self, id: &str, found: &Value) -> Vec<String> {
        let (Some(s), Some(found)) = (self.entries.get_mut(id), found.as_array()) else {
            return Vec::new();
        };
        let memory = &self.memory;
        let out = found
            .iter()
            .map(Value::to_string)
            .filter(|log| s.logs.first_time(log, memory))
            .map(|log| notification(id, &log))
            .collect();
        s.logs.unpin(memory);
        out
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
    use crate::websocket::memory::Budget;
    use serde_json::json;
    use std::rc::Rc;

    fn subscriptions() -> Subscriptions {
        Subscriptions::new(Memory::new(1 << 20, Rc::new(Budget::new(1 << 20))))
    }

    fn asked(subs: &mut Subscriptions, params: Value, upstream_id: &str) -> String {
        let subscribe = Subscribe::parse(&params).unwrap();
        subs.ask(&subscribe, 100).unwrap();
        subs.add(subscribe, upstream_id.into())
    }

    fn log(up: &str, block: u64, hash: u8) -> String {
        json!({"jsonrpc":"2.0","method":"eth_subscription",
               "params":{"subscription":up,"result":{
                   "blockHash":format!("0x{}", format!("{hash:02x}").repeat(32)),
                   "blockNumber":format!("0x{block:x}"),"logIndex":"0x0"}}})
        .to_string()
    }

    #[test]
    fn a_resumed_logs_subscription_fetches_its_gap_once_and_delivers_each_log_once() {
        let mut subs = subscriptions();
        let address = format!("0x{}", "01".repeat(20));
        let id = asked(&mut subs, json!(["logs", {"address": address}]), "0xa");
        assert!(subs.deliver(&log("0xa", 9, 1)).is_some());
        assert!(subs.has_logs() && subs.gaps().is_empty());
        subs.lost(Some(10));
        assert!(subs.resumed(&id, "0xb".into()));
        assert_eq!(subs.gaps(), vec![id.clone()]);
        let query: Value = serde_json::from_str(&subs.gap_query(&id, 15).unwrap()).unwrap();
        assert_eq!(
            query,
            json!([{"address":address,"fromBlock":"0x8","toBlock":"0xf"}])
        );
        assert_eq!(subs.gap_query(&id, 16), None, "asked once");
        // The fetch finds a log delivered before the drop and one of the gap; the new
        // subscription then delivers the gap's log again and a new one.
        let found = json!([
            serde_json::from_str::<Value>(&log("x", 9, 1)).unwrap()["params"]["result"],
            serde_json::from_str::<Value>(&log("x", 12, 2)).unwrap()["params"]["result"],
        ]);
        let sent = subs.gap_logs(&id, &found);
        assert_eq!(sent.len(), 1);
        assert!(sent[0].contains(&"02".repeat(32)) && sent[0].contains(&id));
        assert!(subs.deliver(&log("0xb", 12, 2)).is_none());
        assert!(subs.deliver(&log("0xb", 13, 3)).is_some());
    }

    #[test]
    fn without_the_head_at_the_drop_the_gap_starts_at_the_newest_block_delivered() {
        let mut subs = subscriptions();
        let logs = asked(&mut subs, json!(["logs"]), "0xa");
        let heads = asked(&mut subs, json!(["newHeads"]), "0xh");
        assert!(subs.deliver(&head("0xh", 20)).is_some());
        subs.lost(None);
        subs.resumed(&logs, "0xb".into());
        subs.resumed(&heads, "0xi".into());
        let query: Value = serde_json::from_str(&subs.gap_query(&logs, 25).unwrap()).unwrap();
        assert_eq!(query[0]["fromBlock"], "0x12", "two before block 20");
        // Nothing ever delivered and no head: nothing to fetch.
        let mut subs = subscriptions();
        let logs = asked(&mut subs, json!(["logs"]), "0xa");
        subs.lost(None);
        subs.resumed(&logs, "0xb".into());
        assert!(subs.gaps().is_empty());
    }

    #[test]
    fn a_long_gap_fetches_at_most_the_newest_blocks_and_a_dropped_gap_is_not_carried_on() {
        let mut subs = subscriptions();
        let id = asked(&mut subs, json!(["logs"]), "0xa");
        subs.lost(Some(100));
        subs.resumed(&id, "0xb".into());
        subs.drop_gap(&id);
        assert!(
            subs.gaps().is_empty(),
            "the head at resume was never learned"
        );
        // The next drop starts from its own block, not from the first drop.
        subs.lost(Some(5_000));
        subs.resumed(&id, "0xc".into());
        let query: Value = serde_json::from_str(&subs.gap_query(&id, 9_000).unwrap()).unwrap();
        assert_eq!(
            (query[0]["fromBlock"].clone(), query[0]["toBlock"].clone()),
            (
                json!(format!("0x{:x}", 9_000 - MAX_GAP_BLOCKS + 1)),
                json!("0x2328")
            ),
            "at most MAX_GAP_BLOCKS blocks"
        );
    }

    fn head(upstream_id: &str, number: u64) -> String {
        json!({"jsonrpc":"2.0","method":"eth_subscription",
               "params":{"subscription":upstream_id,"result":{"number":format!("0x{number:x}"),"hash":"0xab"}}})
        .to_string()
    }

    #[test]
    fn subscriptions_are_counted_when_asked_and_charged_to_the_memory() {
        let isolate = Rc::new(Budget::new(10_000));
        let mut subs = Subscriptions::new(Memory::new(2_000, isolate.clone()));
        let small = Subscribe::parse(&json!(["newHeads"])).unwrap();
        // Asked at once, none confirmed yet: the third over a limit of 2.
        assert_eq!(subs.ask(&small, 2), Ok(()));
        assert_eq!(subs.ask(&small, 2), Ok(()));
        assert_eq!(subs.ask(&small, 2), Err(Refused::TooMany(2)));
        subs.abandon(&small);
        let id = subs.add(small.clone(), "0x1".into());
        assert_eq!(subs.ask(&small, 2), Ok(()), "one held, none asked");
        assert_eq!(
            subs.ask(&small, 2),
            Err(Refused::TooMany(2)),
            "one held, one asked"
        );
        let used = subs.memory().used();
        assert_eq!(used, 2 * (small.params.len() + SUBSCRIPTION_BYTES));
        assert_eq!(isolate.used(), used);
        subs.abandon(&small);
        // A filter of 1,000 addresses does not fit in 2,000 bytes.
        let addresses: Vec<String> = (0..1_000).map(|i| format!("0x{i:040x}")).collect();
        let big = Subscribe::parse(&json!(["logs", {"address": addresses}])).unwrap();
        assert_eq!(subs.ask(&big, 100), Err(Refused::NoMemory));
        subs.remove(&id);
        drop(subs);
        assert_eq!(
            isolate.used(),
            0,
            "a closed connection gives everything back"
        );
    }

    #[test]
    fn notifications_go_out_under_the_client_id_with_the_result_unchanged() {
        let mut subs = subscriptions();
        let id = asked(&mut subs, json!(["logs"]), "0xup1");
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
        assert_eq!(subs.memory().used(), 0);
    }

    #[test]
    fn a_resumed_new_heads_subscription_names_the_blocks_it_missed_once() {
        let mut subs = subscriptions();
        let id = asked(&mut subs, json!(["newHeads"]), "0xa");
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
