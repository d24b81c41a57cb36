//! The logs a `logs` subscription missed while the upstream socket was away: fetched again with
//! `eth_getLogs` over the blocks of the gap (at most [`MAX_GAP_BLOCKS`]), and each log delivered
//! once, whether it comes from that fetch or from the new subscription (a log is known by its
//! block hash and log index).
//!
//! Only the logs of the last few blocks can meet again (the fetch starts [`GAP_MARGIN_BLOCKS`]
//! below the last block the subscription had reached), so a subscription remembers the logs of
//! its newest [`KEPT_BLOCKS`] blocks (and, while a gap is to be fetched, those from where the fetch
//! starts), 40-byte keys charged to the connection's [`Memory`]. When the memory runs short the
//! oldest are forgotten first; at worst a log of the gap's edge is delivered twice.

use super::memory::Memory;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashSet};

/// How many blocks before the last block reached at the drop the fetch starts: logs of those
/// blocks may still have been on their way when the socket dropped.
pub const GAP_MARGIN_BLOCKS: u64 = 2;

/// The most blocks one gap's fetch covers (at 12 s slots, about 13 minutes; at 1 s blocks, about a
/// minute): a longer gap's older logs are not fetched.
pub const MAX_GAP_BLOCKS: u64 = 64;

/// How many of the newest blocks a subscription remembers the delivered logs of.
pub const KEPT_BLOCKS: u64 = GAP_MARGIN_BLOCKS + 2;

/// What one remembered log costs, bytes (its 40-byte key in a hash set, with the set's own
/// overhead).
pub const KEY_BYTES: usize = 96;

#[derive(Deserialize)]
struct LogKey {
    #[serde(rename = "blockHash")]
    block_hash: Option<String>,
    #[serde(rename = "logIndex")]
    log_index: Option<String>,
    #[serde(rename = "blockNumber")]
    block_number: Option<String>,
    #[serde(default)]
    removed: bool,
}

/// A log's key: its block hash and its index in the block.
type Key = ([u8; 32], u64);

/// The logs one subscription delivered lately, by block.
#[derive(Debug, Default)]
pub struct DeliveredLogs {
    by_block: BTreeMap<u64, HashSet<Key>>,
    count: usize,
    /// The newest block a delivered log was in.
    highest: Option<u64>,
    /// While a gap is to be fetched: the first block of the fetch, whose logs are kept.
    floor: Option<u64>,
}

impl DeliveredLogs {
    /// Whether `log` (a log object, JSON text) is to be delivered: true the first time a log is
    /// seen, and always for a removal notice (`removed: true`, a reorg) or a log without its
    /// block hash, index and number (pending logs). Remembered within `memory`.
    pub fn first_time(&mut self, log: &str, memory: &Memory) -> bool {
        let Ok(LogKey {
            block_hash: Some(hash),
            log_index: Some(index),
            block_number: Some(number),
            removed: false,
        }) = serde_json::from_str::<LogKey>(log)
        else {
            return true;
        };
        let (Some(hash), Ok(index), Ok(number)) = (
            crate::hex::decode_array::<32>(&hash),
            crate::hex::decode_quantity(&index),
            crate::hex::decode_quantity(&number),
        ) else {
            return true;
        };
        let key = (hash, index);
        if self
            .by_block
            .get(&number)
            .is_some_and(|keys| keys.contains(&key))
        {
            return false;
        }
        self.highest = Some(self.highest.map_or(number, |h| h.max(number)));
        self.prune(memory);
        if self.keep_from().is_some_and(|from| number < from) {
            return true; // too old to meet again
        }
        while !memory.take(KEY_BYTES) {
            if !self.forget_oldest(memory) {
                return true; // nothing to spare: delivered, not remembered
            }
        }
        self.by_block.entry(number).or_default().insert(key);
        self.count += 1;
        true
    }

    /// The first block whose logs are kept.
    fn keep_from(&self) -> Option<u64> {
        let window = self.highest?.saturating_sub(KEPT_BLOCKS - 1);
        Some(self.floor.map_or(window, |floor| floor.min(window)))
    }

    fn prune(&mut self, memory: &Memory) {
        let Some(from) = self.keep_from() else {
            return;
        };
        while self
            .by_block
            .first_key_value()
            .is_some_and(|(b, _)| *b < from)
        {
            self.forget_oldest(memory);
        }
    }

    /// Forgets the oldest block's logs; false when there are none.
    fn forget_oldest(&mut self, memory: &Memory) -> bool {
        let Some((_, keys)) = self.by_block.pop_first() else {
            return false;
        };
        self.count -= keys.len();
        memory.give(keys.len() * KEY_BYTES);
        true
    }

    /// The newest block a delivered log was in.
    pub fn highest(&self) -> Option<u64> {
        self.highest
    }

    /// A gap from block `from` on is to be fetched: its logs are kept until [`Self::unpin`].
    pub fn pin(&mut self, from: u64) {
        self.floor = Some(self.floor.map_or(from, |f| f.min(from)));
    }

    /// The gap was fetched (or given up): only the newest blocks' logs are kept again.
    pub fn unpin(&mut self, memory: &Memory) {
        self.floor = None;
        self.prune(memory);
    }

    /// How many logs are remembered.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Forgets everything (the subscription ends), giving its memory back.
    pub fn clear(&mut self, memory: &Memory) {
        while self.forget_oldest(memory) {}
    }
}

/// The `eth_getLogs` params for what a `logs` subscription made with `subscribe_params` (its
/// `eth_subscribe` params as the relay made them, `["logs", {address?, topics?}]`, JSON text)
/// matches in blocks `from..=to`.
pub fn gap_query(subscribe_params: &str, from: u64, to: u64) -> String {
    let params: Value = serde_json::from_str(subscribe_params).unwrap_or(Value::Null);
    let mut filter = match params.get(1) {
        Some(Value::Object(filter)) => filter.clone(),
        _ => Map::new(),
    };
    filter.retain(|key, _| key == "address" || key == "topics");
    filter.insert("fromBlock".into(), crate::hex::encode_quantity(from).into());
    filter.insert("toBlock".into(), crate::hex::encode_quantity(to).into());
    Value::Array(vec![Value::Object(filter)]).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::websocket::memory::Budget;
    use serde_json::json;
    use std::rc::Rc;

    fn log(block: u64, hash: u8, index: u64) -> String {
        json!({
            "blockHash": format!("0x{}", format!("{hash:02X}").repeat(32)),
            "blockNumber": format!("0x{block:x}"),
            "logIndex": format!("0x{index:x}"),
            "data": "0x",
        })
        .to_string()
    }

    fn memory(bytes: usize) -> Memory {
        Memory::new(bytes, Rc::new(Budget::new(usize::MAX)))
    }

    #[test]
    fn each_log_is_delivered_once_and_removals_always() {
        let m = memory(1 << 20);
        let mut seen = DeliveredLogs::default();
        assert!(seen.first_time(&log(1, 0xaa, 0), &m));
        assert!(seen.first_time(&log(1, 0xaa, 1), &m));
        assert!(!seen.first_time(&log(1, 0xaa, 0), &m), "the same log again");
        assert!(
            seen.first_time(&log(1, 0xbb, 0), &m),
            "another block hash (a reorg)"
        );
        let removed = json!({"blockHash": format!("0x{}", "aa".repeat(32)), "blockNumber": "0x1",
                             "logIndex": "0x0", "removed": true});
        assert!(seen.first_time(&removed.to_string(), &m));
        assert!(seen.first_time(r#"{"data":"0x"}"#, &m), "a pending log");
        assert_eq!((seen.len(), m.used()), (3, 3 * KEY_BYTES));
    }

    #[test]
    fn only_the_newest_blocks_are_remembered_unless_a_gap_is_pinned() {
        let m = memory(1 << 20);
        let mut seen = DeliveredLogs::default();
        for block in 1..=100 {
            for i in 0..10 {
                assert!(seen.first_time(&log(block, 1, i), &m));
            }
        }
        assert_eq!(
            seen.len(),
            10 * KEPT_BLOCKS as usize,
            "a flood keeps a few blocks"
        );
        assert_eq!(m.used(), seen.len() * KEY_BYTES);
        assert!(!seen.first_time(&log(100 - KEPT_BLOCKS + 1, 1, 0), &m));
        assert!(
            seen.first_time(&log(100 - KEPT_BLOCKS, 1, 0), &m),
            "too old: forgotten"
        );
        // A gap from block 98 is pinned: new blocks do not push its logs out.
        seen.pin(98);
        for block in 101..=110 {
            seen.first_time(&log(block, 1, 0), &m);
        }
        assert!(!seen.first_time(&log(98, 1, 3), &m), "kept while pinned");
        seen.unpin(&m);
        assert!(seen.first_time(&log(98, 1, 3), &m));
        seen.clear(&m);
        assert_eq!((seen.len(), m.used()), (0, 0));
    }

    #[test]
    fn memory_bounds_what_is_remembered_the_oldest_going_first() {
        let m = memory(5 * KEY_BYTES);
        let mut seen = DeliveredLogs::default();
        for i in 0..5 {
            seen.first_time(&log(1, 1, i), &m);
        }
        for i in 0..3 {
            seen.first_time(&log(2, 1, i), &m);
        }
        assert_eq!(m.used(), 3 * KEY_BYTES, "block 1 went to make room");
        assert!(
            seen.first_time(&log(1, 1, 0), &m),
            "forgotten: delivered again"
        );
    }

    #[test]
    fn the_gap_query_keeps_the_filter_and_sets_the_blocks() {
        let query = gap_query(r#"["logs",{"address":"0x01","topics":[["0x02"]]}]"#, 7, 12);
        assert_eq!(
            serde_json::from_str::<Value>(&query).unwrap(),
            json!([{"address":"0x01","topics":[["0x02"]],"fromBlock":"0x7","toBlock":"0xc"}])
        );
        assert_eq!(
            serde_json::from_str::<Value>(&gap_query(r#"["logs"]"#, 0, 1)).unwrap(),
            json!([{"fromBlock":"0x0","toBlock":"0x1"}])
        );
    }
}
