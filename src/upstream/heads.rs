//! What block each upstream has: its head, learned from its answers to `eth_blockNumber` and kept
//! by its URL ([`Heads`]), and what block a client's read needs ([`BlockNeed`]), so that a read of
//! the tip never goes to an upstream stuck behind the others and a read that names a block goes to
//! one that has it; `eth_blockNumber` through an isolate never goes backwards. The anchors are
//! eRPC's integrity rules (`enforceHighestBlock`: an `eth_blockNumber` older than the highest
//! known is answered with the highest; `enforceGetLogsBlockRange`: an upstream that does not have
//! the range is skipped) and its per-upstream block tracker; the failures they answer are
//! erpc#50 and go-ethereum#27353 (a block number announced, then that block null). Pure and
//! clock-free.

use crate::hex;
use crate::upstream::block_ref::BlockRef;
use serde_json::Value;
use std::collections::HashMap;

/// How long a head learned from an upstream's answer is believed, ms: past it, the upstream's
/// head is unknown (nothing is kept from it: not excluded, not trusted).
pub const HEAD_FRESH_MS: u64 = 30_000;

/// What block a client's read needs of the upstream that answers it (from its method and
/// params, [`BlockNeed::of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockNeed {
    /// Nothing of the head: a read by hash, `earliest`, `safe`, `finalized`, the chain id.
    Any,
    /// `eth_blockNumber` itself: asked of every upstream (its answers teach their heads) and
    /// answered at least with the highest head known ([`Heads::at_least`]).
    Head,
    /// The tip: `latest`, `pending`, or no block given (an upstream lagging behind the best
    /// by more than `MAX_HEAD_LAG` blocks is skipped).
    Tip,
    /// This block number, or one at or above it (an upstream whose head is below is skipped).
    Number(u64),
}

impl BlockNeed {
    /// What a read of `method` with `params` needs: `eth_blockNumber` is [`BlockNeed::Head`];
    /// a method with a block parameter ([`BlockRef::param_of`]) needs that block, the tip when
    /// it is absent, `latest` or `pending`; `eth_getLogs` its `toBlock` (the tip when absent,
    /// nothing with a `blockHash`); anything else nothing.
    pub fn of(method: &str, params: &Value) -> BlockNeed {
        if method == "eth_blockNumber" {
            return BlockNeed::Head;
        }
        if method == "eth_getLogs" {
            let filter = params.get(0);
            if filter.and_then(|f| f.get("blockHash")).is_some() {
                return BlockNeed::Any;
            }
            return Self::of_ref(BlockRef::parse(filter.and_then(|f| f.get("toBlock"))));
        }
        BlockRef::param_of(method, params).map_or(BlockNeed::Any, Self::of_ref)
    }

    /// What a block parameter needs: a hash, `earliest`, `safe` and `finalized` name no number
    /// an upstream could be behind.
    fn of_ref(block: BlockRef) -> BlockNeed {
        match block {
            BlockRef::Latest | BlockRef::Pending => BlockNeed::Tip,
            BlockRef::Number(n) => BlockNeed::Number(n),
            BlockRef::Safe
            | BlockRef::Finalized
            | BlockRef::Earliest
            | BlockRef::Hash { .. }
            | BlockRef::Invalid => BlockNeed::Any,
        }
    }
}

/// One upstream's head as last learned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Head {
    block: u64,
    at_ms: u64,
    /// Whether it was lagging when last learned (for one `upstream_lagging` line a lapse).
    lagging: bool,
}

/// Each upstream's head, by its URL, as its own answers told it (a node's lower answer
/// replaces its higher one: a chain reset is believed), each believed for [`HEAD_FRESH_MS`].
#[derive(Debug, Clone, Default)]
pub struct Heads {
    heads: HashMap<String, Head>,
}

impl Heads {
    /// Learns that upstream `key` (one of `set`, its chain's upstreams) is at `block` at
    /// `now_ms`. Returns its lag behind the best head of `set` when it has just begun lagging by
    /// more than `max_lag` blocks (to be logged once).
    pub fn learn(
        &mut self,
        key: &str,
        set: &[String],
        block: u64,
        max_lag: u64,
        now_ms: u64,
    ) -> Option<u64> {
        let before = self.heads.get(key).is_some_and(|h| h.lagging);
        self.heads.insert(
            key.to_string(),
            Head {
                block,
                at_ms: now_ms,
                lagging: before,
            },
        );
        let lag = self
            .best(set, now_ms)
            .unwrap_or(block)
            .saturating_sub(block);
        let lagging = lag > max_lag;
        if let Some(head) = self.heads.get_mut(key) {
            head.lagging = lagging;
        }
        (lagging && !before).then_some(lag)
    }

    /// The highest head of the upstreams of `set` believed at `now_ms`. Only `set`'s: an
    /// isolate serving several chains (README, "Several chains") keeps every chain's heads
    /// here, and one chain's height says nothing of another's.
    pub fn best(&self, set: &[String], now_ms: u64) -> Option<u64> {
        set.iter().filter_map(|key| self.head(key, now_ms)).max()
    }

    /// The head of upstream `key` believed at `now_ms`.
    pub fn head(&self, key: &str, now_ms: u64) -> Option<u64> {
        self.heads
            .get(key)
            .filter(|h| now_ms.saturating_sub(h.at_ms) <= HEAD_FRESH_MS)
            .map(|h| h.block)
    }

    /// The best head known at `now_ms`: the highest of `set`'s and `known`, the chain's head
    /// learned otherwise (the read cache's: asked, or announced on a WebSocket).
    fn best_known(&self, set: &[String], known: Option<u64>, now_ms: u64) -> Option<u64> {
        self.best(set, now_ms).max(known)
    }

    /// The upstreams of `set` (in its order) a read needing `need` may go to at `now_ms`: for
    /// the tip, not one whose head is more than `max_lag` blocks behind the best; for block
    /// `n`, not one whose head is below `n` while the best is at or above it. The best is the
    /// highest of theirs and `known` (the chain's head the relay learned otherwise). An upstream
    /// whose head is not known is never skipped; when every one would be, those within
    /// `max_lag` of the highest of their heads are kept (none skipped when that is none).
    pub fn usable(
        &self,
        set: &[String],
        need: BlockNeed,
        max_lag: u64,
        known: Option<u64>,
        now_ms: u64,
    ) -> Vec<String> {
        let best = self.best_known(set, known, now_ms);
        let keep = |key: &String| match (need, self.head(key, now_ms), best) {
            (BlockNeed::Tip, Some(head), Some(best)) => best.saturating_sub(head) <= max_lag,
            (BlockNeed::Number(n), Some(head), Some(best)) => head >= n || best < n,
            _ => true,
        };
        let kept: Vec<String> = set.iter().filter(|k| keep(k)).cloned().collect();
        if !kept.is_empty() {
            return kept;
        }
        // None known to have it (their heads learned a while ago): those within `max_lag` of
        // the highest of theirs, not one stuck far behind the others.
        let highest = self.best(set, now_ms);
        let near: Vec<String> = set
            .iter()
            .filter(|k| match (self.head(k, now_ms), highest) {
                (Some(head), Some(highest)) => highest.saturating_sub(head) <= max_lag,
                _ => true,
            })
            .cloned()
            .collect();
        if near.is_empty() {
            set.to_vec()
        } else {
            near
        }
    }

    /// The upstreams of `set` (in its order) whose heads are known at `now_ms` to have what
    /// `need` needs: for block `n`, a head at or above it; for the tip, a head within `max_lag`
    /// of the best (theirs, or `known`). Those whose head is not known are left out (a read asked again elsewhere
    /// goes only where the block is known to be, [`crate::upstream::Answerer`]).
    pub fn having(
        &self,
        set: &[String],
        need: BlockNeed,
        max_lag: u64,
        known: Option<u64>,
        now_ms: u64,
    ) -> Vec<String> {
        let best = self.best_known(set, known, now_ms);
        set.iter()
            .filter(|key| match (need, self.head(key, now_ms), best) {
                (BlockNeed::Number(n), Some(head), _) => head >= n,
                (BlockNeed::Tip, Some(head), Some(best)) => best.saturating_sub(head) <= max_lag,
                _ => false,
            })
            .cloned()
            .collect()
    }

    /// Upstream `key` (one of `set`) answered `null` for block `n` at `now_ms` (a method whose
    /// `null` means no such block, [`null_means_behind`]): when the best head known (theirs, or
    /// `known`, the chain's head learned otherwise) is at or above `n` and within `max_lag` of
    /// it, its head is taken as below `n` (it lacks the block: a node behind), until its own
    /// answers say otherwise.
    pub fn lacks(
        &mut self,
        key: &str,
        set: &[String],
        n: u64,
        max_lag: u64,
        known: Option<u64>,
        now_ms: u64,
    ) {
        // Only a block near the best head: an old block a node no longer keeps (history
        // expiry) says nothing of its head.
        let near = |best: u64| best >= n && n.saturating_add(max_lag) >= best;
        if n == 0 || !self.best_known(set, known, now_ms).is_some_and(near) {
            return;
        }
        let below = self.head(key, now_ms).map_or(n - 1, |head| head.min(n - 1));
        let lagging = self.heads.get(key).is_some_and(|h| h.lagging);
        self.heads.insert(
            key.to_string(),
            Head {
                block: below,
                at_ms: now_ms,
                lagging,
            },
        );
    }

    /// The answer `body` to `eth_blockNumber` made to say at least the best head of `set` (the
    /// chain's upstreams) or `known` (the chain's head learned otherwise) at `now_ms` (eRPC's
    /// `enforceHighestBlock`); `None` when it already does, or is not a quantity result.
    pub fn at_least(
        &self,
        body: &str,
        set: &[String],
        known: Option<u64>,
        now_ms: u64,
    ) -> Option<String> {
        let best = self.best_known(set, known, now_ms)?;
        let mut answer: Value = serde_json::from_str(body).ok()?;
        let said = hex::decode_quantity(answer.get("result")?.as_str()?).ok()?;
        if said >= best {
            return None;
        }
        answer["result"] = Value::String(hex::encode_quantity(best));
        Some(answer.to_string())
    }
}

/// Methods whose `null` for a block by number means the node has no such block (not a
/// transaction index out of range, not an account without code).
const NULL_MEANS_NO_BLOCK: &[&str] = &[
    "eth_getBlockByNumber",
    "eth_getHeaderByNumber",
    "eth_getBlockReceipts",
    "eth_getBlockTransactionCountByNumber",
    "eth_getUncleCountByBlockNumber",
];

/// Whether a `null` answer to `method` about a block by number says the node lacks the block
/// ([`NULL_MEANS_NO_BLOCK`]): asked of a block the chain has, the node is behind.
pub fn null_means_behind(method: &str) -> bool {
    NULL_MEANS_NO_BLOCK.contains(&method)
}

/// The longest answer read as a possible `null` ([`answered_null`]), bytes: the members and a
/// client's id; a longer one (a block, a 12 MB list of logs) is not `null`, and is not parsed
/// again to say so.
const NULL_ANSWER_MAX_BYTES: usize = 4_096;

/// Whether `body` is a JSON-RPC answer whose `result` is `null` (a block, transaction or
/// receipt the node does not have).
pub fn answered_null(body: &str) -> bool {
    if body.len() > NULL_ANSWER_MAX_BYTES {
        return false;
    }
    #[derive(serde::Deserialize)]
    struct Answer<'a> {
        #[serde(borrow, default)]
        result: Option<&'a serde_json::value::RawValue>,
    }
    // `result: null` deserializes to `None` either way: the member must be there.
    body.contains("\"result\"")
        && serde_json::from_str::<Answer>(body).is_ok_and(|a| a.result.is_none())
        && !body.contains("\"error\"")
}

/// The block number of an `eth_blockNumber` answer `body` (a response object with a quantity
/// `result`).
pub fn head_of(body: &str) -> Option<u64> {
    let answer: Value = serde_json::from_str(body).ok()?;
    hex::decode_quantity(answer.get("result")?.as_str()?).ok()
}

#[cfg(test)]
mod tests;
