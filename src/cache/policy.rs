//! What a read is about, and so whether and how long its answer may be kept ([`About::of`]); and
//! what block an answer names ([`crate::cache::shape::Shape`]). The anchor is eRPC's finality buckets
//! (`architecture/evm/block_ref.go`: a method's block reference from its params, else from its
//! result; `shouldCacheResponse`: never errors or empty results), with two of its lessons kept:
//! block tags are realtime (erpc#223: `finalized` as a tag served an old block), and an answer
//! about an unfinalized block is only good while that block is canonical (tycho PR #1416: a cache
//! keyed by number served stale data after a reorg). Pure.

use crate::upstream::block_ref::{BlockRef, BLOCK_PARAM};
use serde_json::Value;

/// What a read's answer is about, from its method and params.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum About {
    /// Never kept: unknown methods, anything under `pending`, filters, sends, accounts, sync state.
    Never,
    /// The chain itself (`eth_chainId`, `net_version`): kept until evicted.
    Chain,
    /// A block named by its hash (`eth_getBlockByHash`, EIP-1898's `{blockHash}`, `eth_getLogs`
    /// with a `blockHash`): its contents never change, kept until evicted.
    BlockHash,
    /// Block `n` or the state after it (and so every block below it): kept until evicted once
    /// `n` is finalized; before, only while the block the relay knows at `n` stays canonical.
    Number(u64),
    /// The head (`latest`, a block parameter left out, `safe`, `finalized` as tags,
    /// `eth_gasPrice`): kept only while the head has not moved.
    Head,
    /// `eth_blockNumber`: the number of the head the cache knows, while it is fresh; never kept.
    HeadNumber,
    /// Named by the answer (`eth_getTransactionByHash`, `eth_getTransactionReceipt`): its
    /// `blockNumber` and `blockHash` ([`crate::cache::shape::Named::in_block`]); a transaction not yet in a block is never
    /// kept.
    Answer,
}

/// Methods about a block named by the hash in their first parameter.
const BY_BLOCK_HASH: &[&str] = &[
    "eth_getBlockByHash",
    "eth_getBlockTransactionCountByHash",
    "eth_getHeaderByHash",
    "eth_getTransactionByBlockHashAndIndex",
    "eth_getUncleByBlockHashAndIndex",
    "eth_getUncleCountByBlockHash",
];

/// Methods about the head that take no block parameter.
const AT_HEAD: &[&str] = &[
    "eth_gasPrice",
    "eth_maxPriorityFeePerGas",
    "eth_blobBaseFee",
];

impl About {
    /// What a read of `method` with `params` is about. A method not named here is
    /// [`About::Never`]: the cache keeps only what it knows the meaning of.
    pub fn of(method: &str, params: &Value) -> About {
        match method {
            "eth_chainId" | "net_version" => About::Chain,
            "eth_blockNumber" => About::HeadNumber,
            "eth_getTransactionByHash" | "eth_getTransactionReceipt" => About::Answer,
            "eth_getLogs" => Self::of_logs(params.get(0)),
            // An uncle's header names a block that is not the canonical one at its number.
            "eth_getUncleByBlockHashAndIndex" | "eth_getUncleByBlockNumberAndIndex" => About::Never,
            m if AT_HEAD.contains(&m) => About::Head,
            m if BY_BLOCK_HASH.contains(&m) => match params.get(0) {
                Some(Value::String(_)) => About::BlockHash,
                _ => About::Never,
            },
            m => BlockRef::param_of(m, params).map_or(About::Never, Self::of_block),
        }
    }

    /// A block parameter ([`BlockRef`]): `safe` and `finalized` as tags move with the head
    /// (erpc#223).
    fn of_block(block: BlockRef) -> About {
        match block {
            BlockRef::Latest | BlockRef::Safe | BlockRef::Finalized => About::Head,
            BlockRef::Earliest => About::Number(0),
            BlockRef::Number(n) => About::Number(n),
            BlockRef::Hash {
                require_canonical: false,
            } => About::BlockHash,
            // An answer the node gives only while the block is canonical (EIP-1898): the cache
            // could not say when it stops.
            BlockRef::Hash {
                require_canonical: true,
            } => About::Never,
            BlockRef::Pending | BlockRef::Invalid => About::Never,
        }
    }

    /// `eth_getLogs`: a `blockHash` names its block; a range is about its `toBlock` (left out,
    /// the head), since a block's hash commits to every block below it; a range from a tag
    /// that moves (`latest`, also when `fromBlock` is left out, `safe`, `finalized`, `pending`)
    /// to a number is never kept.
    fn of_logs(filter: Option<&Value>) -> About {
        let Some(Value::Object(filter)) = filter else {
            return About::Never;
        };
        if let Some(hash) = filter.get("blockHash") {
            return if hash.is_string() {
                About::BlockHash
            } else {
                About::Never
            };
        }
        let from = BlockRef::parse(filter.get("fromBlock"));
        let to = BlockRef::parse(filter.get("toBlock"));
        if from == BlockRef::Pending || to == BlockRef::Pending {
            return About::Never;
        }
        match Self::of_block(to) {
            // `fromBlock` left out is `latest` (the execution API's default), a tag that moves.
            About::Number(_)
                if matches!(
                    from,
                    BlockRef::Latest | BlockRef::Safe | BlockRef::Finalized
                ) =>
            {
                About::Never
            }
            About::BlockHash => About::Never,
            about => about,
        }
    }
}

/// Methods whose answer names no block and whose block parameter takes EIP-1898's
/// `{blockHash}` (geth's `BlockNumberOrHash`; Erigon, Nethermind, Besu and reth take it too).
const BY_NUMBER_OR_HASH: &[&str] = &[
    "eth_call",
    "eth_createAccessList",
    "eth_estimateGas",
    "eth_getAccount",
    "eth_getBalance",
    "eth_getCode",
    "eth_getProof",
    "eth_getStorageAt",
    "eth_getTransactionCount",
];

/// Counts of a block by number, and the same count by the block's hash.
const COUNT_BY_HASH: &[(&str, &str)] = &[
    (
        "eth_getBlockTransactionCountByNumber",
        "eth_getBlockTransactionCountByHash",
    ),
    (
        "eth_getUncleCountByBlockNumber",
        "eth_getUncleCountByBlockHash",
    ),
];

/// Methods whose answer names the block it comes from (a block object; transactions, receipts
/// and logs, each with its `blockHash`), which the cache checks against the block it knows at
/// that number ([`crate::cache::finality::names_known_blocks`]); an empty list of receipts or
/// logs names none, and is kept only when the chain proves it ([`crate::cache::proof`]). The
/// answer of any other method says nothing of the block it came from.
const NAME_THEIR_BLOCK: &[&str] = &[
    "eth_getBlockByNumber",
    "eth_getHeaderByNumber",
    "eth_getTransactionByBlockNumberAndIndex",
    "eth_getBlockReceipts",
    "eth_getLogs",
];

/// Whether an answer of `method` names the block it comes from ([`NAME_THEIR_BLOCK`]).
pub fn names_its_block(method: &str) -> bool {
    NAME_THEIR_BLOCK.contains(&method)
}

/// A read of `method` with `params` asked of the block whose hash is `hash` instead of by its
/// number, for a method whose answer names no block: its block parameter made EIP-1898's
/// `{"blockHash": hash, "requireCanonical": true}` ([`BY_NUMBER_OR_HASH`]), or a count by number
/// made the same count by hash ([`COUNT_BY_HASH`]). Asked so, an upstream still on another fork
/// cannot answer for the block the cache knows at that number, nor one that lacks it or holds
/// it off its chain (it answers an error or `null` instead, [`PinnedAnswer::Unknown`]). Returns
/// the method and params to ask; `None` for any other method, or params that are not an array
/// with the parameter in it (or left out last: then it is given).
pub fn pinned(method: &str, params: &Value, hash: &str) -> Option<(&'static str, Value)> {
    if let Some((_, by_hash)) = COUNT_BY_HASH.iter().find(|(m, _)| *m == method) {
        params.as_array().filter(|p| p.len() == 1)?;
        return Some((by_hash, serde_json::json!([hash])));
    }
    let (name, at) = *BLOCK_PARAM.iter().find(|(m, _)| *m == method)?;
    if !BY_NUMBER_OR_HASH.contains(&name) {
        return None;
    }
    let mut params = params.as_array()?.clone();
    let by_hash = serde_json::json!({ "blockHash": hash, "requireCanonical": true });
    if params.len() == at {
        // Left out (`latest`, the execution API's default): given.
        params.push(by_hash);
    } else {
        *params.get_mut(at)? = by_hash;
    }
    Some((name, Value::Array(params)))
}

/// What an upstream's answer to a read asked by its block's hash ([`pinned`]) says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinnedAnswer {
    /// A `result`: that block's answer.
    Answered,
    /// The upstream does not read the form (-32602, or geth's "invalid argument" / Go's
    /// "cannot unmarshal"): asked again by number, and counted ([`crate::cache::PIN_REFUSALS`]).
    Unsupported,
    /// The block is not the upstream's (geth's "header for hash not found", "not currently
    /// canonical" with `requireCanonical`; "unknown block", "block not found"; a count by hash
    /// answered `null`): another fork, or one behind; asked again by number, nothing kept.
    Unknown,
    /// Any other error (a revert, an execution error): the node's answer for that block, given
    /// as it is (errors are never kept).
    Other,
}

impl PinnedAnswer {
    /// Reads `answer`, an `error` or `result` of a read asked by its block's hash.
    pub fn of(answer: &crate::jsonrpc::Answer) -> PinnedAnswer {
        let Some((code, message)) = answer.error_said() else {
            return match answer {
                crate::jsonrpc::Answer::Result(r) if r.trim() == "null" => PinnedAnswer::Unknown,
                _ => PinnedAnswer::Answered,
            };
        };
        let says = |words: &[&str]| words.iter().any(|w| message.contains(w));
        if says(&["not found", "canonical", "unknown block", "unknown hash"]) {
            PinnedAnswer::Unknown
        } else if code == Some(crate::jsonrpc::INVALID_PARAMS)
            || says(&[
                "invalid argument",
                "unmarshal",
                "invalid params",
                "invalid block",
            ])
        {
            PinnedAnswer::Unsupported
        } else {
            PinnedAnswer::Other
        }
    }
}

/// The cache key of a read: its method and its params as compact JSON (object members sorted,
/// their names as sent), each hex string value (`0x` and hex digits: addresses, hashes,
/// quantities, data) lowercased, so the same read written in other hex case is one entry. Nothing
/// else is folded: a node that reads members by name (`"data"` and `"Data"` are not one member
/// to a node that does not fold them; Go's `encoding/json` does) or tags by case may answer two
/// such reads differently, so they are two.
pub fn key_of(method: &str, params: &Value) -> String {
    let mut key = String::with_capacity(method.len() + 64);
    key.push_str(method);
    key.push(' ');
    if !params.is_null() {
        key.push_str(&folded(params).to_string());
    }
    key
}

/// `value` with every hex string in it lowercased ([`key_of`]).
fn folded(value: &Value) -> Value {
    match value {
        Value::String(s) if is_hex(s) => Value::String(s.to_ascii_lowercase()),
        Value::Array(items) => Value::Array(items.iter().map(folded).collect()),
        Value::Object(members) => Value::Object(
            members
                .iter()
                .map(|(name, v)| (name.clone(), folded(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Whether `s` is `0x` followed by hex digits only.
fn is_hex(s: &str) -> bool {
    s.strip_prefix("0x")
        .is_some_and(|digits| digits.bytes().all(|b| b.is_ascii_hexdigit()))
}
