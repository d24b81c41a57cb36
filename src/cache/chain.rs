//! The chain as the cache sees it ([`ChainView`]): its head, the canonical blocks below it as a
//! chain of hashes each the parent of the next, and its finalized block. The reorg rule lives
//! here: a new head is linked to the blocks known by its parents' hashes ([`ChainView::adopt`]);
//! the first known block it does not keep is the fork point, and every answer about a block at or
//! above it is dropped. Nothing is guessed: a head that cannot be linked leaves no unfinalized
//! block known. Pure and clock-free.

use super::header::{Contents, Header};
use std::collections::BTreeMap;

/// How many canonical blocks below the head the view keeps, and so how old an unfinalized answer
/// may be and still be served (an older one is asked again, by then usually finalized).
pub const WINDOW: u64 = 256;

/// How many parents a new head may be followed back through to link it to the blocks known
/// (the deepest reorg, or the most blocks missed between two looks, that keeps what is cached).
pub const MAX_WALK: usize = 32;

/// A chain's head, canonical blocks and finalized block, as learned from the upstream.
#[derive(Debug, Clone, Default)]
pub struct ChainView {
    /// Canonical blocks by number: a run ending at the head, each the parent of the next.
    canonical: BTreeMap<u64, Header>,
    /// When the head was last asked and learned, ms (`None` once suspect).
    head_at_ms: Option<u64>,
    /// When the ask of the head last adopted began, ms (suspect or not).
    adopted_ms: Option<u64>,
    /// When the head was last taken as suspect, ms ([`ChainView::suspect`]).
    suspected_ms: Option<u64>,
    /// The finalized block's number, and when it was learned, ms.
    finalized: Option<(u64, u64)>,
    /// When the finalized block was last asked, ms, answered or not.
    finalized_asked_ms: Option<u64>,
    /// The genesis block's hash, when learned.
    genesis: Option<String>,
    /// The best head number the upstreams answered (`eth_blockNumber` of each), and when, ms:
    /// its block may still be on its way ([`ChainView::head_number`]).
    best_number: Option<(u64, u64)>,
}

/// What a new head did to the blocks known ([`ChainView::adopt`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Adopted {
    /// The same head as before.
    Same,
    /// A new head on top of the blocks known (or the first head).
    Extended,
    /// The blocks known from `fork` on are no longer canonical: every answer about one of them
    /// (at or above `fork`) goes.
    Reorg {
        /// The lowest block number no longer known as canonical.
        fork: u64,
    },
}

impl ChainView {
    /// The head, when one was learned.
    pub fn head(&self) -> Option<&Header> {
        self.canonical.values().next_back()
    }

    /// Whether the head was learned within `fresh_ms` of `now_ms`.
    pub fn head_fresh(&self, now_ms: u64, fresh_ms: u64) -> bool {
        self.head_at_ms
            .is_some_and(|at| now_ms.saturating_sub(at) < fresh_ms)
    }

    /// When the ask of the head last adopted began, ms ([`ChainView::set_adopted_ms`]).
    pub fn adopted_ms(&self) -> Option<u64> {
        self.adopted_ms
    }

    /// The head just adopted ([`ChainView::adopt`]) was asked at `asked_ms`: an ask begun
    /// before it says nothing newer.
    pub fn set_adopted_ms(&mut self, asked_ms: u64) {
        self.adopted_ms = Some(self.adopted_ms.map_or(asked_ms, |at| at.max(asked_ms)));
    }

    /// Takes the head as not fresh at `now_ms`: an answer named a block the view does not know
    /// at its number (a reorg not seen yet), a header heard did not follow it, or a send went
    /// through; the head is asked at the next read.
    pub fn suspect(&mut self, now_ms: u64) {
        self.head_at_ms = None;
        self.suspected_ms = Some(self.suspected_ms.map_or(now_ms, |at| at.max(now_ms)));
    }

    /// When the head was last taken as suspect, ms.
    pub fn suspected_ms(&self) -> Option<u64> {
        self.suspected_ms
    }

    /// The head known is confirmed fresh at `now_ms` (an upstream answered a block below it
    /// that the view has as canonical: it is behind, not on another chain).
    pub fn confirm(&mut self, now_ms: u64) {
        self.head_at_ms = Some(now_ms);
    }

    /// The upstreams' best head number learned at `now_ms` (`eth_blockNumber` of each, merged):
    /// `eth_blockNumber` says it while the head's block is being asked
    /// ([`ChainView::head_number`]).
    pub fn note_best(&mut self, number: u64, now_ms: u64) {
        self.best_number = Some((number, now_ms));
    }

    /// The head's number at `now_ms`: the highest of the head's, when it is fresh (within
    /// `fresh_ms`), and the upstreams' best number, when learned within `fresh_ms` (the head's
    /// block may still be on its way from a slow node: `eth_blockNumber` is not held back for it).
    pub fn head_number(&self, now_ms: u64, fresh_ms: u64) -> Option<u64> {
        let head = self
            .head()
            .filter(|_| self.head_fresh(now_ms, fresh_ms))
            .map(|h| h.number);
        let best = self
            .best_number
            .filter(|(_, at)| now_ms.saturating_sub(*at) < fresh_ms)
            .map(|(n, _)| n);
        head.max(best)
    }

    /// The genesis block's hash, when learned.
    pub fn genesis(&self) -> Option<&str> {
        self.genesis.as_deref()
    }

    /// Learns the genesis block's hash (lowercase hex).
    pub fn set_genesis(&mut self, hash: &str) {
        self.genesis = Some(hash.to_ascii_lowercase());
    }

    /// Whether `chain` (a new head first, then parents) links to the blocks known: its oldest
    /// block's parent is the canonical block below it, and each is the parent of the one before.
    pub fn links(&self, chain: &[Header]) -> bool {
        let Some(oldest) = chain.last() else {
            return false;
        };
        oldest.number > 0
            && self
                .canonical
                .get(&(oldest.number - 1))
                .is_some_and(|parent| parent.hash == oldest.parent_hash)
            && chain.windows(2).all(|w| w[1].hash == w[0].parent_hash)
    }

    /// The hash of canonical block `number`, when it is known.
    pub fn hash_at(&self, number: u64) -> Option<&str> {
        self.canonical.get(&number).map(|h| h.hash.as_str())
    }

    /// Canonical block `number`'s header, when it is known.
    pub fn header_at(&self, number: u64) -> Option<&Header> {
        self.canonical.get(&number)
    }

    /// The canonical block whose hash is `hash` (lowercase hex), when it is known (a walk of at
    /// most [`WINDOW`] headers).
    pub fn header_of(&self, hash: &str) -> Option<&Header> {
        self.canonical.values().rev().find(|h| h.hash == hash)
    }

    /// The bytes the view holds: each canonical header, its two hashes and its contents
    /// (counted in `CACHE_MAX_BYTES`, [`crate::cache::ReadCache`]).
    pub fn held_bytes(&self) -> usize {
        /// A map node's and the header's own bytes, the two hash strings' heap bytes.
        const PER_HEADER: usize = 64 + std::mem::size_of::<Header>() + 2 * 66;
        self.canonical
            .values()
            .map(|h| PER_HEADER + h.contents.as_ref().map_or(0, |_| Contents::BYTES))
            .sum()
    }

    /// The finalized block's number, when learned.
    pub fn finalized(&self) -> Option<u64> {
        self.finalized.map(|(n, _)| n)
    }

    /// Whether the finalized block was asked within `fresh_ms` of `now_ms` (learned, or an ask
    /// that failed: it is not asked again sooner).
    pub fn finalized_fresh(&self, now_ms: u64, fresh_ms: u64) -> bool {
        self.finalized_asked_ms
            .is_some_and(|at| now_ms.saturating_sub(at) < fresh_ms)
    }

    /// The finalized block was asked at `now_ms` and could not be learned: the one known holds,
    /// and it is asked again once [`ChainView::finalized_fresh`] says so.
    pub fn finalized_unanswered(&mut self, now_ms: u64) {
        self.finalized_asked_ms = Some(now_ms);
    }

    /// Learns that block `number` is finalized at `now_ms`. The finalized block only goes up:
    /// a lower number (an upstream an epoch behind another) leaves the one known, fresh again.
    /// A chain that really went back (a dev chain reset) is found by its head
    /// ([`crate::cache::ReadCache::adopt`]).
    pub fn set_finalized(&mut self, number: u64, now_ms: u64) {
        let number = self.finalized().map_or(number, |known| known.max(number));
        self.finalized = Some((number, now_ms));
        self.finalized_asked_ms = Some(now_ms);
    }

    /// The parent to ask for to link `chain` (a new head first, then its parents as asked, each
    /// the parent of the one before) to the blocks known: `None` when it links (its oldest
    /// block's parent is the canonical block below it, or it reaches below what is known), when
    /// nothing is known yet, or when [`MAX_WALK`] parents were asked already.
    pub fn missing_parent(&self, chain: &[Header]) -> Option<String> {
        let oldest = chain.last()?;
        let lowest = *self.canonical.keys().next()?;
        let head = self.head()?.number;
        let below = oldest.number.checked_sub(1)?;
        if chain.len() >= MAX_WALK || below < lowest {
            return None;
        }
        if self
            .canonical
            .get(&below)
            .is_some_and(|parent| parent.hash == oldest.parent_hash)
        {
            return None;
        }
        // Too far above the head known to reach it within the walk.
        if below.saturating_sub(head) > (MAX_WALK - chain.len()) as u64 {
            return None;
        }
        Some(oldest.parent_hash.clone())
    }

    /// Takes `chain` (a new head first, then parents, as [`ChainView::missing_parent`] asked) as
    /// the canonical chain at `now_ms`. The blocks known that it does not keep (another hash at
    /// their number, above its head, or all of them when it does not link) are forgotten: the
    /// lowest of them is the fork point ([`Adopted::Reorg`]).
    pub fn adopt(&mut self, chain: &[Header], now_ms: u64) -> Adopted {
        let Some(head) = chain.first() else {
            return Adopted::Same;
        };
        self.head_at_ms = Some(now_ms);
        if self.head().is_some_and(|known| known.hash == head.hash) {
            return Adopted::Same;
        }
        let oldest = chain.last().expect("not empty");
        let links = self.links(chain);
        // The first known block this chain does not keep.
        let fork = if links {
            self.canonical
                .iter()
                .find(|(number, known)| {
                    **number >= oldest.number
                        && chain
                            .iter()
                            .find(|h| h.number == **number)
                            .is_none_or(|h| h.hash != known.hash)
                })
                .map(|(number, _)| *number)
        } else {
            self.canonical.keys().next().copied()
        };
        if let Some(fork) = fork {
            // Unlinked, the fork is the lowest known: nothing known is kept.
            self.canonical.split_off(&fork);
        }
        for header in chain.iter().rev() {
            self.canonical.insert(header.number, header.clone());
        }
        let head_number = head.number;
        while self
            .canonical
            .keys()
            .next()
            .is_some_and(|&n| n.saturating_add(WINDOW) < head_number)
        {
            self.canonical.pop_first();
        }
        match fork {
            Some(fork) => Adopted::Reorg { fork },
            None => Adopted::Extended,
        }
    }
}
