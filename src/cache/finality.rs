//! How long an answer holds ([`tag_for`]) and whether it still does ([`holds`]): the finality
//! rules. An answer about a finalized block holds for good; about an unfinalized one, while the
//! block the cache knows at its number is canonical; at the head, while the head is the same and
//! fresh. Every block an answer names must be the one the cache knows at its number
//! ([`names_known_blocks`]). Pure.

use super::chain::ChainView;
use super::header::Header;
use super::policy::{names_its_block, About};
use super::shape::Shape;
use super::store::Tag;
use super::{CacheSettings, Read};
use crate::jsonrpc::Answer;
use crate::ordering::sender::HEDERA_CHAIN_IDS;
use serde_json::Value;

/// How the cache knows a chain's finalized block (`CACHE_FINALITY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finality {
    /// [`Finality::Depth`] on Hedera's chain ids (295-298), [`Finality::Tag`] elsewhere: Hedera's
    /// JSON-RPC relay answers `finalized` with its mirror node's latest block
    /// (hiero-json-rpc-relay), which says nothing of a mirror behind the consensus nodes or of
    /// another mirror behind it.
    Auto,
    /// The `finalized` tag (`eth_getBlockByNumber("finalized")`, every
    /// [`crate::cache::FINALIZED_FRESH_MS`]); an upstream without it: [`Finality::Depth`].
    Tag,
    /// The head less `CACHE_FINALITY_DEPTH` blocks, never asked.
    Depth,
}

impl Finality {
    /// Whether the finalized block of the chain `chain_id` (`None`: unknown) is asked as the
    /// tag (else it is the head less the depth).
    pub fn asks_tag(self, chain_id: Option<u64>) -> bool {
        match self {
            Finality::Tag => true,
            Finality::Depth => false,
            Finality::Auto => !chain_id.is_some_and(|id| HEDERA_CHAIN_IDS.contains(&id)),
        }
    }
}

/// What an upstream said of the `finalized` block tag (`eth_getBlockByNumber("finalized",
/// false)`, [`Finalized::of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finalized {
    /// The finalized block's number.
    Block(u64),
    /// The chain has no such block: the answer is `null`, or an invalid-params error (-32602,
    /// EIP-1474) or one whose message names the tag (geth before the merge: "finalized block
    /// not found"). Its finality is the head less `CACHE_FINALITY_DEPTH`.
    NoTag,
    /// Anything else (no answer, a rate limit or another error, a body that is no block): the
    /// finalized block known holds, and nothing is guessed from the depth, which could call an
    /// unfinalized block final.
    Failed,
}

impl Finalized {
    /// Reads an upstream's answer (`None`: there was none).
    pub fn of(answer: Option<&Answer>) -> Finalized {
        match answer {
            Some(Answer::Result(result)) if result.trim() == "null" => Finalized::NoTag,
            Some(Answer::Result(result)) => serde_json::from_str::<Value>(result)
                .ok()
                .and_then(|block| Header::of_block(&block))
                .map_or(Finalized::Failed, |h| Finalized::Block(h.number)),
            Some(error @ Answer::Error(_)) => {
                let (code, message) = error.error_said().unwrap_or_default();
                if code == Some(crate::jsonrpc::INVALID_PARAMS)
                    || message.contains("finalized")
                    || message.contains("block tag")
                {
                    Finalized::NoTag
                } else {
                    Finalized::Failed
                }
            }
            None => Finalized::Failed,
        }
    }
}

/// Whether an answer tagged `tag` still holds at `now_ms` on a chain seen as `view`.
pub fn holds(view: Option<&ChainView>, tag: &Tag, now_ms: u64, settings: &CacheSettings) -> bool {
    let fresh = |v: &&ChainView| v.head_fresh(now_ms, settings.head_ms);
    match tag {
        Tag::Final => true,
        Tag::Block { number, hash } => view
            .filter(fresh)
            .is_some_and(|v| v.hash_at(*number) == Some(hash.as_str())),
        Tag::Head { number, hash } => view
            .filter(fresh)
            .and_then(ChainView::head)
            .is_some_and(|h| h.number == *number && h.hash == *hash),
    }
}

/// Whether every block `result` names (a block object, a transaction or receipt, each item of a
/// list, [`Shape::blocks_named`]) is the one the cache knows at its number, where it knows one.
pub fn names_known_blocks(view: Option<&ChainView>, result: &Shape) -> bool {
    result.blocks_named().into_iter().all(|(n, hash)| {
        view.and_then(|v| v.hash_at(n))
            .is_none_or(|known| known == hash)
    })
}

/// How long an answer `result` to `read` holds on a chain seen as `view` at `now_ms`: `None`
/// when it may not be kept (a `null`; about a block above the head, or whose hash is not known;
/// at a head not fresh; a block object or a transaction that names another block than the one
/// the cache knows at its number; about an unfinalized block by number, an answer that names no
/// block unless it was asked of that block by its hash ([`policy::names_its_block`]): a node on
/// another fork, or one that lacks the block, could have given it).
pub fn tag_for(
    view: Option<&ChainView>,
    read: Read<'_>,
    result: &Shape,
    now_ms: u64,
    settings: &CacheSettings,
) -> Option<Tag> {
    let about = read.about;
    if *result == Shape::Null {
        return None;
    }
    let fresh = view.filter(|v| v.head_fresh(now_ms, settings.head_ms));
    let finalized = |n: u64| view.and_then(ChainView::finalized).is_some_and(|f| n <= f);
    let at_block = |n: u64| -> Option<Tag> {
        if finalized(n) {
            return Some(Tag::Final);
        }
        let hash = fresh?.hash_at(n)?;
        Some(Tag::Block {
            number: n,
            hash: hash.to_string(),
        })
    };
    let tag = match about {
        About::Never | About::HeadNumber => return None,
        About::Chain | About::BlockHash => Tag::Final,
        About::Number(n) if !finalized(n) && !read.pinned && !names_its_block(read.method) => {
            return None
        }
        About::Number(n) => at_block(n)?,
        About::Head => {
            let head = fresh?.head()?;
            Tag::Head {
                number: head.number,
                hash: head.hash.clone(),
            }
        }
        About::Answer => {
            let Shape::One(named) = result else {
                return None;
            };
            let (n, _) = named.in_block()?;
            at_block(n)?
        }
    };
    if !names_known_blocks(view, result) {
        return None;
    }
    if !names_only_the_head(&tag, read.method, result) {
        return None;
    }
    if read.method == "eth_feeHistory" && !newest_fee_block_asked(&tag, about, result) {
        return None;
    }
    block_is_the_tags(&tag, about, result).then_some(tag)
}

/// Whether an answer `result` to `method` tagged `tag` names no block but the head: at the head
/// (a [`Tag::Head`]), every block it names must be the head (a load balancer's node a block
/// behind answers `latest` from its own; a range of logs to `latest` is the proof's, so
/// `eth_getLogs` passes). Any other tag passes.
fn names_only_the_head(tag: &Tag, method: &str, result: &Shape) -> bool {
    if let Tag::Head { number, hash } = tag {
        let other = result
            .blocks_named()
            .into_iter()
            .any(|(n, h)| n != *number || h != hash);
        if other && method != "eth_getLogs" {
            return false;
        }
    }
    true
}

/// Whether an `eth_feeHistory` answer `result` tagged `tag` is about the blocks asked: it names
/// the blocks it covers by number, and its newest must be the one asked (the head of a
/// [`Tag::Head`], else the block number `about`); `false` for anything else.
fn newest_fee_block_asked(tag: &Tag, about: About, result: &Shape) -> bool {
    let Shape::One(named) = result else {
        return false;
    };
    let asked = match (tag, about) {
        (Tag::Head { number, .. }, _) => *number,
        (_, About::Number(n)) => n,
        _ => return false,
    };
    named.newest_fee_block() == Some(asked)
}

/// Whether a block object `result` is the block tagged `tag` (its number and hash, for a
/// [`Tag::Block`] or [`Tag::Head`]) and the one asked by number `about`; an answer with no block
/// header ([`Shape::header`]) passes.
fn block_is_the_tags(tag: &Tag, about: About, result: &Shape) -> bool {
    match (tag, about, result.header()) {
        (Tag::Block { number, hash } | Tag::Head { number, hash }, _, Some(block))
            if block.number != *number || block.hash != *hash =>
        {
            false
        }
        (_, About::Number(n), Some(block)) if block.number != n => false,
        _ => true,
    }
}

/// What the cache knew of a chain when an ask of the upstream began ([`BeforeAsk::of`]): an
/// answer that lands after the head moved is kept only when no head could change it
/// ([`BeforeAsk::still_keeps`]). On a chain of 250 ms blocks most asks see a new head; a block
/// finalized before the ask began holds through any of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BeforeAsk {
    /// The head's hash.
    head: Option<String>,
    /// The finalized block's number.
    finalized: Option<u64>,
    /// The genesis block's hash (another one after the ask: the chain started anew).
    genesis: Option<String>,
}

impl BeforeAsk {
    /// What `view` (the chain as the cache sees it, `None`: nothing learned) says now.
    pub fn of(view: Option<&ChainView>) -> BeforeAsk {
        BeforeAsk {
            head: view.and_then(ChainView::head).map(|h| h.hash.clone()),
            finalized: view.and_then(ChainView::finalized),
            genesis: view.and_then(ChainView::genesis).map(str::to_string),
        }
    }

    /// Whether an answer (`result`, a JSON `result` text) to a read about `about`, asked since,
    /// may still be offered to the cache on the chain now seen as `view`: the head the same as
    /// before; or, the head moved, an answer no head can change: about a block by its hash, the
    /// chain itself, or a block finalized before the ask began (asked by number, or named by the
    /// answer: a receipt's `blockNumber`), on the same chain (the same genesis known before and
    /// after, and a finalized block still known).
    pub fn still_keeps(&self, view: Option<&ChainView>, about: About, result: &str) -> bool {
        if BeforeAsk::of(view).head == self.head {
            return true;
        }
        // The same chain: its genesis known before and after, the same (a chain started anew
        // forgets the genesis and the finalized block known, [`crate::cache::ReadCache::adopt`]).
        let same_chain = view.is_some_and(|v| {
            v.finalized().is_some()
                && v.genesis().is_some()
                && v.genesis().map(str::to_string) == self.genesis
        });
        let finalized = |n: u64| same_chain && self.finalized.is_some_and(|f| n <= f);
        match about {
            About::BlockHash | About::Chain => true,
            About::Number(n) => finalized(n),
            About::Answer => match Shape::read(result) {
                Some(Shape::One(named)) => named.in_block().is_some_and(|(n, _)| finalized(n)),
                _ => false,
            },
            About::Never | About::HeadNumber | About::Head => false,
        }
    }
}
