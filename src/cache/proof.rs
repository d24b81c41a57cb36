//! What the chain proves of an answer that lists less than it could ([`Completeness`]): an
//! `eth_getLogs` answer that is empty, or that names no log in some block of its range, and a
//! block's receipts or transactions listed as none. A node that lacks the block answers so too
//! (Erigon's `GetLogs` answers `[]` past its head; Hiero's relay answers `[]` with HTTP 200 when its
//! mirror node lacks a block or a block hash), and such an answer, kept, would hide the block's
//! logs from every client of the isolate. So it is kept only when the canonical header the cache
//! holds for each block says so: its `logsBloom` rules the filter out (a bloom has no false
//! negatives, geth `core/types/bloom9.go`: every log's address and topics are in it), or its
//! `receiptsRoot` / `transactionsRoot` is the empty trie's root. A bloom that matches proves
//! nothing (a false positive, or a log the answer left out); eRPC keeps no empty result by default
//! for the same reason (`json_rpc_cache.go`). Pure.

use super::chain::{ChainView, WINDOW};
use super::header::{Bloom, Header};
use super::shape::Shape;
use super::Read;
use crate::hex;
use crate::upstream::block_ref::BlockRef;
use serde_json::Value;
use std::collections::BTreeMap;

/// An `eth_getLogs` filter's `address` and `topics`, as bytes (the execution API's `Filter`):
/// `None` for a position or an address list means any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFilter {
    /// The addresses a log may come from; `None`: any.
    addresses: Option<Vec<[u8; 20]>>,
    /// Per topic position, the topics a log may have there; `None`: any.
    topics: Vec<Option<Vec<[u8; 32]>>>,
}

impl LogFilter {
    /// Reads a filter object: `address` a string or a list of strings (absent, `null` or an
    /// empty list: any); `topics` a list whose items are `null`, a topic, or a list of topics
    /// (one of them `null`, or an empty list: any). `None` when any part is malformed: such a
    /// filter proves nothing.
    pub fn of(filter: &Value) -> Option<LogFilter> {
        let addresses = match filter.get("address") {
            None | Some(Value::Null) => None,
            Some(Value::String(one)) => Some(vec![hex::decode_array(one)?]),
            Some(Value::Array(list)) if list.is_empty() => None,
            Some(Value::Array(list)) => Some(
                list.iter()
                    .map(|a| hex::decode_array(a.as_str()?))
                    .collect::<Option<Vec<_>>>()?,
            ),
            Some(_) => return None,
        };
        let topics = match filter.get("topics") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(positions)) => positions
                .iter()
                .map(Self::position)
                .collect::<Option<Vec<_>>>()?,
            Some(_) => return None,
        };
        Some(LogFilter { addresses, topics })
    }

    /// One topic position: `Some(None)` any, `Some(Some(list))` one of these, `None` malformed.
    fn position(item: &Value) -> Option<Option<Vec<[u8; 32]>>> {
        match item {
            Value::Null => Some(None),
            Value::String(topic) => Some(Some(vec![hex::decode_array(topic)?])),
            Value::Array(list) if list.is_empty() || list.iter().any(Value::is_null) => Some(None),
            Value::Array(list) => list
                .iter()
                .map(|t| hex::decode_array(t.as_str()?))
                .collect::<Option<Vec<_>>>()
                .map(Some),
            _ => None,
        }
    }

    /// Whether `bloom` proves that no log of its block matches: none of the addresses is in it,
    /// or at some position none of the topics is; a filter that takes any log, only when the
    /// block has no log at all.
    pub fn ruled_out_by(&self, bloom: &Bloom) -> bool {
        let by_address = self
            .addresses
            .as_ref()
            .is_some_and(|list| !list.iter().any(|a| bloom.may_contain(a)));
        let by_topic = self
            .topics
            .iter()
            .flatten()
            .any(|alternatives| !alternatives.iter().any(|t| bloom.may_contain(t)));
        if by_address {
            return true;
        }
        by_topic || bloom.is_empty()
    }
}

/// What may prove that a block holds nothing an answer leaves out (`CACHE_BLOOM_PROOF`, resolved
/// for the chain by [`Proof::rule`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProofRule {
    /// Its bloom ruling the filter out, or its roots saying it has no transaction.
    Blooms,
    /// Its roots only.
    Roots,
    /// Nothing: no empty or short answer above the finalized block is kept.
    Nothing,
}

/// The `CACHE_BLOOM_PROOF` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proof {
    /// [`ProofRule::Blooms`], but [`ProofRule::Nothing`] on Hedera's chain ids (295-298): its
    /// mirror node gives a block whose logs are all synthetic (HTS transfers) an all-zero
    /// `logsBloom` while `eth_getLogs` lists them (hiero-mirror-node#12198, #13300), and a
    /// block's transactions there are not all EVM ones.
    Auto,
    /// `on`: [`ProofRule::Blooms`].
    On,
    /// `off`: [`ProofRule::Roots`].
    Off,
}

impl Proof {
    /// The rule on the chain `chain_id` (`None`: unknown).
    pub fn rule(self, chain_id: Option<u64>) -> ProofRule {
        let hedera =
            chain_id.is_some_and(|id| crate::ordering::sender::HEDERA_CHAIN_IDS.contains(&id));
        match self {
            Proof::Auto if hedera => ProofRule::Nothing,
            Proof::Auto | Proof::On => ProofRule::Blooms,
            Proof::Off => ProofRule::Roots,
        }
    }
}

/// What the chain proves of an answer that lists less than its range could hold
/// ([`crate::cache::ReadCache::completeness`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completeness {
    /// Nothing is missing: it lists something in every block it covers, or the header of each
    /// block it lists nothing of says there is nothing (or the answer needs no proof).
    Proven,
    /// A block it lists nothing of may hold something: its header is not held, or its bloom
    /// matches the filter. Served, not kept; asked again when the upstream may lack the block.
    Unproven {
        /// The highest block the answer covers (the range's end), when it is known.
        end: Option<u64>,
    },
    /// It lists a log in a block whose header ruled its filter out: the chain's blooms (or roots)
    /// do not cover its logs (Polygon's bor: state-sync logs, 0xPolygon/bor#432). The proof is
    /// turned off for the chain ([`ProofRule::Nothing`]).
    Contradicted {
        /// That block.
        block: u64,
    },
}

/// What the chain as `view` holds it (its finalized block, its canonical headers) proves of
/// `result`, the answer to `read` ([`Completeness`]); `rule`: what may prove a block holds nothing
/// matching ([`ProofRule`]: `CACHE_BLOOM_PROOF`, and nothing once contradicted on the chain). Only
/// `eth_getLogs`, `eth_getBlockReceipts` and the transaction counts can list less than the block
/// holds; any other answer is [`Completeness::Proven`]. A range of logs past the head of the
/// upstream that answered (`read.answerer_head`) is unproven whatever it lists.
pub fn completeness(
    view: Option<&ChainView>,
    read: Read<'_>,
    result: &Shape,
    rule: ProofRule,
) -> Completeness {
    let params = read.params;
    match (read.method, result) {
        ("eth_getLogs", Shape::List { blocks, .. }) => match params.get(0) {
            Some(filter) => logs(view, filter, blocks, rule, read.answerer_head),
            None => Completeness::Proven,
        },
        ("eth_getBlockReceipts", Shape::List { len: 0, .. }) => {
            empty_block(view, params.get(0), rule)
        }
        (
            "eth_getBlockTransactionCountByNumber" | "eth_getBlockTransactionCountByHash",
            Shape::Text(count),
        ) if count == "0x0" => empty_block(view, params.get(0), rule),
        _ => Completeness::Proven,
    }
}

/// The canonical header `block` (a block parameter: a number, `latest`, a hash, EIP-1898's
/// object) names in `view`, and its number when it names one.
fn header_named<'v>(
    view: Option<&'v ChainView>,
    block: Option<&Value>,
) -> (Option<&'v Header>, Option<u64>) {
    let Some(view) = view else {
        return (None, None);
    };
    let hash = block
        .and_then(|b| b.get("blockHash").or(Some(b)))
        .and_then(Value::as_str)
        .filter(|s| s.len() == 66);
    if let Some(hash) = hash {
        let header = view.header_of(&hash.to_ascii_lowercase());
        return (header, header.map(|h| h.number));
    }
    let number = match BlockRef::parse(block) {
        BlockRef::Number(n) => Some(n),
        BlockRef::Earliest => Some(0),
        BlockRef::Latest => view.head().map(|h| h.number),
        _ => None,
    };
    (number.and_then(|n| view.header_at(n)), number)
}

/// An answer listing nothing of the block `block` names: proven when the block's header says
/// it has no transaction (and `rule` lets roots prove).
fn empty_block(view: Option<&ChainView>, block: Option<&Value>, rule: ProofRule) -> Completeness {
    let roots = rule != ProofRule::Nothing;
    match header_named(view, block) {
        (Some(header), _)
            if roots && header.contents.as_ref().is_some_and(|c| c.is_empty_block()) =>
        {
            Completeness::Proven
        }
        (_, end) => Completeness::Unproven { end },
    }
}

/// `eth_getLogs` with `filter`: every block of its range above the finalized one that the answer
/// names no log of must be ruled out by its header (no transaction, or its bloom).
fn logs(
    view: Option<&ChainView>,
    filter: &Value,
    with_logs: &BTreeMap<u64, Vec<String>>,
    rule: ProofRule,
    answerer_head: Option<u64>,
) -> Completeness {
    let parsed = LogFilter::of(filter);
    let rules_out = |header: &Header| {
        header.contents.as_ref().is_some_and(|c| match rule {
            ProofRule::Nothing => false,
            ProofRule::Roots => c.is_empty_block(),
            ProofRule::Blooms => {
                c.is_empty_block()
                    || parsed
                        .as_ref()
                        .is_some_and(|f| f.ruled_out_by(&c.logs_bloom))
            }
        })
    };
    // A log in a block whose header rules the filter out: the chain's blooms do not cover it.
    if let Some(view) = view {
        let contradicted = with_logs
            .keys()
            .find(|&&n| view.header_at(n).is_some_and(&rules_out));
        if let Some(&block) = contradicted {
            return Completeness::Contradicted { block };
        }
    }
    if filter.get("blockHash").is_some() {
        if !with_logs.is_empty() {
            return Completeness::Proven;
        }
        return match header_named(view, filter.get("blockHash")) {
            (Some(header), _) if rules_out(header) => Completeness::Proven,
            (_, end) => Completeness::Unproven { end },
        };
    }
    let (_, from) = header_named(view, filter.get("fromBlock"));
    let (_, to) = header_named(view, filter.get("toBlock"));
    let (Some(from), Some(to), Some(view)) = (from, to, view) else {
        return Completeness::Unproven { end: to };
    };
    if answerer_head.is_some_and(|head| to > head) {
        return Completeness::Unproven { end: Some(to) };
    }
    let lowest = view.finalized().map_or(from, |f| from.max(f + 1));
    if lowest > to {
        return Completeness::Proven;
    }
    if to - lowest >= WINDOW {
        return Completeness::Unproven { end: Some(to) };
    }
    let proven = (lowest..=to)
        .all(|n| with_logs.contains_key(&n) || view.header_at(n).is_some_and(&rules_out));
    if proven {
        Completeness::Proven
    } else {
        Completeness::Unproven { end: Some(to) }
    }
}

#[cfg(test)]
mod tests;
