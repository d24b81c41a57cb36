//! The `newHeads` a connection's subscriptions missed while its upstream socket was away: fetched
//! once for all of them, as one JSON-RPC batch of at most [`MAX_MISSED_HEADS`] blocks, by a task
//! of its own (the upstream socket's read loop never waits for it), at most [`MAX_FETCHES`] times
//! per reconnect. Meanwhile each waiting subscription's notifications are held (charged to the
//! connection's [`Memory`], at most [`MAX_HELD`] each), so that its heads still reach the client
//! in block order: first the missed ones, then what came during the fetch.

use super::memory::Memory;
use super::subscriptions::{notification, Delivery, MAX_MISSED_HEADS};
use std::collections::{BTreeMap, HashMap};
use std::ops::RangeInclusive;

/// The most fetches (one batch each) per reconnect of the upstream socket.
pub const MAX_FETCHES: u32 = 4;

/// The most notifications held per subscription while its missed heads are fetched; past it the
/// subscription's fill-in is given up and what it held goes out.
pub const MAX_HELD: usize = 256;

#[derive(Debug)]
struct Waiting {
    /// The blocks it missed.
    missed: RangeInclusive<u64>,
    /// Its notifications held meanwhile, in order (each charged by its length).
    held: Vec<String>,
}

/// One connection's fill-in of missed heads. See the module documentation.
#[derive(Debug, Default)]
pub struct Backfill {
    waiting: BTreeMap<String, Waiting>,
    /// Whether a fetch is running (its task reports with [`Backfill::fetched`]).
    fetching: bool,
    /// Fetches since the upstream socket came back.
    fetches: u32,
}

impl Backfill {
    /// The upstream socket came back: a new budget of fetches.
    pub fn resumed(&mut self) {
        self.fetches = 0;
    }

    /// A notification for the client: the texts to send now (none while its subscription waits
    /// for its missed heads, or the texts it held when its fill-in is given up). A delivery that
    /// names missed heads starts that subscription's wait.
    pub fn deliver(&mut self, delivery: Delivery, memory: &Memory) -> Vec<String> {
        let Delivery {
            id, text, missed, ..
        } = delivery;
        if let Some(missed) = missed.filter(|_| self.fetches < MAX_FETCHES) {
            if memory.take(text.len()) {
                let waiting = self.waiting.entry(id).or_insert(Waiting {
                    missed: missed.clone(),
                    held: Vec::new(),
                });
                waiting.missed = missed;
                waiting.held.push(text);
                return Vec::new();
            }
            return vec![text];
        }
        let Some(waiting) = self.waiting.get_mut(&id) else {
            return vec![text];
        };
        if waiting.held.len() < MAX_HELD && memory.take(text.len()) {
            waiting.held.push(text);
            return Vec::new();
        }
        // Held too long: what it held goes now, without the missed heads.
        let mut out = self.release(&id, memory);
        out.push(text);
        out
    }

    fn release(&mut self, id: &str, memory: &Memory) -> Vec<String> {
        let held = self.waiting.remove(id).map(|w| w.held).unwrap_or_default();
        memory.give(held.iter().map(String::len).sum());
        held
    }

    /// The blocks to fetch now (the newest [`MAX_MISSED_HEADS`] of what the waiting
    /// subscriptions missed, together), when subscriptions wait and no fetch runs; a fetch then
    /// runs until [`Backfill::fetched`].
    pub fn next_fetch(&mut self) -> Option<RangeInclusive<u64>> {
        if self.fetching || self.waiting.is_empty() || self.fetches >= MAX_FETCHES {
            return None;
        }
        let first = self.waiting.values().map(|w| *w.missed.start()).min()?;
        let last = self.waiting.values().map(|w| *w.missed.end()).max()?;
        let first = first.max(last.saturating_sub(MAX_MISSED_HEADS - 1));
        self.fetching = true;
        self.fetches += 1;
        Some(first..=last)
    }

    /// The fetch of `blocks` is done, with the headers it got (`header` JSON text by number; a
    /// missing one is left out): for each subscription whose missed heads it covers, those
    /// headers as notifications, then what it held, in order to send. Subscriptions that began
    /// waiting during the fetch for blocks it did not cover wait for the next fetch; when no more
    /// fetches may be made, what they held goes out as it is.
    pub fn fetched(
        &mut self,
        blocks: RangeInclusive<u64>,
        headers: &HashMap<u64, String>,
        memory: &Memory,
    ) -> Vec<String> {
        self.fetching = false;
        let covered: Vec<String> = self
            .waiting
            .iter()
            .filter(|(_, w)| self.fetches >= MAX_FETCHES || w.missed.end() <= blocks.end())
            .map(|(id, _)| id.clone())
            .collect();
        let mut out = Vec::new();
        for id in covered {
            let missed = self.waiting.get(&id).map(|w| w.missed.clone());
            if let Some(missed) = missed {
                out.extend(
                    missed
                        .filter_map(|n| headers.get(&n))
                        .map(|header| notification(&id, header)),
                );
            }
            out.extend(self.release(&id, memory));
        }
        out
    }

    /// Whether any subscription waits for missed heads.
    pub fn is_waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// The subscription ends: what it held is dropped.
    pub fn forget(&mut self, id: &str, memory: &Memory) {
        self.release(id, memory);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::websocket::memory::Budget;
    use std::rc::Rc;

    fn memory() -> Memory {
        Memory::new(1 << 20, Rc::new(Budget::new(usize::MAX)))
    }

    fn head(id: &str, n: u64, missed: Option<RangeInclusive<u64>>) -> Delivery {
        Delivery {
            id: id.into(),
            text: notification(id, &format!(r#"{{"number":"0x{n:x}"}}"#)),
            missed,
            head: None,
        }
    }

    fn numbers(texts: &[String]) -> Vec<(String, u64)> {
        texts
            .iter()
            .map(|t| {
                let v: serde_json::Value = serde_json::from_str(t).unwrap();
                let id = v["params"]["subscription"].as_str().unwrap().to_string();
                let n = v["params"]["result"]["number"].as_str().unwrap();
                (id, crate::hex::decode_quantity(n).unwrap())
            })
            .collect()
    }

    #[test]
    fn a_hundred_subscriptions_share_one_fetch_and_keep_their_heads_in_order() {
        let m = memory();
        let mut b = Backfill::default();
        b.resumed();
        let ids: Vec<String> = (0..100).map(|i| format!("s{i:03}")).collect();
        for id in &ids {
            assert!(b.deliver(head(id, 80, Some(10..=79)), &m).is_empty());
        }
        let blocks = b.next_fetch().unwrap();
        assert_eq!(blocks, 16..=79, "one fetch of the newest 64 blocks for all");
        assert_eq!(b.next_fetch(), None, "one at a time");
        // Block 81 arrives during the fetch: held behind the fill-in.
        assert!(b.deliver(head(&ids[0], 81, None), &m).is_empty());
        let headers: HashMap<u64, String> = blocks
            .clone()
            .map(|n| (n, format!(r#"{{"number":"0x{n:x}"}}"#)))
            .collect();
        let out = numbers(&b.fetched(blocks, &headers, &m));
        assert_eq!(out.len(), 100 * 65 + 1);
        let first: Vec<u64> = out
            .iter()
            .filter(|(id, _)| id == &ids[0])
            .map(|(_, n)| *n)
            .collect();
        assert_eq!(
            first,
            (16..=81).collect::<Vec<_>>(),
            "in order, no gap within the bound"
        );
        assert!(!b.is_waiting());
        assert_eq!(m.used(), 0, "what was held is given back");
        assert_eq!(
            b.deliver(head(&ids[1], 82, None), &m).len(),
            1,
            "then straight through"
        );
    }

    #[test]
    fn fetches_are_bounded_per_reconnect() {
        let m = memory();
        let mut b = Backfill::default();
        b.resumed();
        for round in 0..MAX_FETCHES {
            let n = 100 * u64::from(round + 1);
            b.deliver(head("a", n, Some(n - 5..=n - 1)), &m);
            let blocks = b.next_fetch().unwrap();
            b.fetched(blocks, &HashMap::new(), &m);
        }
        // Past the bound: delivered at once, nothing fetched.
        assert_eq!(b.deliver(head("a", 1_000, Some(990..=999)), &m).len(), 1);
        assert_eq!(b.next_fetch(), None);
        b.resumed();
        assert!(b
            .deliver(head("a", 2_000, Some(1_990..=1_999)), &m)
            .is_empty());
    }

    #[test]
    fn a_subscription_held_too_long_gets_what_it_held_without_its_fill_in() {
        let m = memory();
        let mut b = Backfill::default();
        b.resumed();
        b.deliver(head("a", 10, Some(5..=9)), &m);
        for n in 11..10 + MAX_HELD as u64 {
            assert!(b.deliver(head("a", n, None), &m).is_empty());
        }
        let out = b.deliver(head("a", 10 + MAX_HELD as u64, None), &m);
        assert_eq!(out.len(), MAX_HELD + 1);
        assert_eq!(m.used(), 0);
        let blocks = b.next_fetch();
        assert_eq!(blocks, None, "nobody waits any more");
    }
}
