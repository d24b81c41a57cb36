//! The logs a `logs` subscription missed while the upstream socket was away: fetched again with
//! `eth_getLogs` over the blocks of the gap, and each log delivered once, whether it comes from
//! that fetch or from the new subscription (a log is known by its block hash and log index).

use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::{HashSet, VecDeque};

/// How many delivered logs a subscription remembers, to deliver each once.
pub const REMEMBERED_LOGS: usize = 4_096;

/// How many blocks before the upstream's head at the drop the fetch starts: logs of those blocks
/// may still have been on their way when the socket dropped.
pub const GAP_MARGIN_BLOCKS: u64 = 2;

#[derive(Deserialize)]
struct LogKey {
    #[serde(rename = "blockHash")]
    block_hash: Option<String>,
    #[serde(rename = "logIndex")]
    log_index: Option<String>,
    #[serde(default)]
    removed: bool,
}

/// The logs one subscription delivered lately.
#[derive(Debug, Clone, Default)]
pub struct DeliveredLogs {
    order: VecDeque<(String, String)>,
    keys: HashSet<(String, String)>,
}

impl DeliveredLogs {
    /// Whether `log` (a log object, JSON text) is to be delivered: true the first time a log is
    /// seen, and always for a removal notice (`removed: true`, a reorg) or a log without its
    /// block hash and index (pending logs).
    pub fn first_time(&mut self, log: &str) -> bool {
        let Ok(LogKey {
            block_hash: Some(hash),
            log_index: Some(index),
            removed: false,
        }) = serde_json::from_str::<LogKey>(log)
        else {
            return true;
        };
        let key = (hash.to_ascii_lowercase(), index.to_ascii_lowercase());
        if !self.keys.insert(key.clone()) {
            return false;
        }
        self.order.push_back(key);
        if self.order.len() > REMEMBERED_LOGS {
            if let Some(old) = self.order.pop_front() {
                self.keys.remove(&old);
            }
        }
        true
    }
}

/// The `eth_getLogs` params for what a `logs` subscription made with `subscribe_params` (its
/// `eth_subscribe` params, `["logs", {address?, topics?}]`, JSON text) matches in blocks
/// `from..=to`.
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
    use serde_json::json;

    fn log(hash: &str, index: u64) -> String {
        json!({"blockHash": hash, "logIndex": format!("0x{index:x}"), "data": "0x"}).to_string()
    }

    #[test]
    fn each_log_is_delivered_once_and_removals_always() {
        let mut seen = DeliveredLogs::default();
        assert!(seen.first_time(&log("0xAA", 0)));
        assert!(seen.first_time(&log("0xaa", 1)));
        assert!(!seen.first_time(&log("0xaa", 0)), "the same log again");
        assert!(seen.first_time(&log("0xbb", 0)), "another block");
        let removed = json!({"blockHash": "0xaa", "logIndex": "0x0", "removed": true}).to_string();
        assert!(seen.first_time(&removed));
        assert!(seen.first_time(r#"{"data":"0x"}"#));
        for i in 0..REMEMBERED_LOGS as u64 {
            seen.first_time(&log("0xcc", i));
        }
        assert!(
            seen.first_time(&log("0xaa", 0)),
            "forgotten after REMEMBERED_LOGS more"
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
