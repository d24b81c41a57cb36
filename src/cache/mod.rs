//! The read cache ([`ReadCache`]): clients' reads answered from the isolate's memory, each
//! answer kept only as long as the chain says it holds, so that a reorg never serves a block that
//! is no longer canonical (README, "Cache"). Pure: the relay asks it and feeds it
//! ([`crate::relay`]'s read path, `relay/cached.rs`); the edge keeps one per isolate.
//!
//! - **What is kept, by finality** ([`policy::About`], eRPC's buckets): the chain's constants and
//!   answers about a block named by hash, for good; about block `n` (by number, a transaction or
//!   receipt in it, logs up to it), for good once `n` is finalized, before that only while the
//!   block the cache knows at `n` is canonical (a block's hash commits to every block below it);
//!   at the head, only while the head is the same block. Never: errors, `null` (a block or
//!   transaction the chain may still get), `pending`, filters, sends, methods it does not know.
//! - **The chain** ([`chain::ChainView`]): the head and the canonical hashes below it, learned
//!   from the relay's own asks (`eth_getBlockByNumber("latest")`, at most every `CACHE_HEAD_MS`,
//!   then each parent by hash until it links), and the finalized block (the `finalized` tag,
//!   else the head less `CACHE_FINALITY_DEPTH`).
//! - **Reorgs**: a new head that does not keep a block known drops every answer about a block
//!   at or above the fork point ([`chain::Adopted::Reorg`], [`store::Entries::drop_from`]); any
//!   new head drops the answers at the old one.
//! - **Bounds**: the answers kept are at most `CACHE_MAX_BYTES` ([`store::Entries`]); identical
//!   reads in flight are one upstream request ([`ReadCache::begin`]); one head ask at a time per
//!   chain ([`ReadCache::claim_refresh`]).

pub mod chain;
pub mod finality;
pub mod flight;
pub mod head_watch;
pub mod header;
pub mod pin;
pub mod policy;
pub mod proof;
pub mod shape;
pub mod store;

#[cfg(test)]
mod tests;

use crate::jsonrpc::Answer;
use chain::{Adopted, ChainView};
pub use finality::tag_for;
pub use finality::Finality;
use finality::{holds, names_known_blocks};
pub use flight::Begin;
use flight::Flights;
use header::Header;
use policy::About;
pub use proof::Completeness;
use serde_json::Value;
use shape::Shape;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
pub use store::Tag;
use store::{Entries, Entry};

/// How long a finalized block number is believed before it is asked again, ms (it only grows,
/// so an old one is only too careful).
pub const FINALIZED_FRESH_MS: u64 = 10_000;

/// How often the heads of several upstreams are asked (`eth_blockNumber` of each) while the
/// cache's head stays fresh without it (the head watch), ms: well within the 30 s an upstream's
/// head is believed ([`crate::upstream::heads::HEAD_FRESH_MS`]), so a node stuck behind stays
/// known as such.
pub const UPSTREAM_HEADS_MS: u64 = 10_000;

/// How long the isolate's counters gather before they are written as one `cache` metric, ms.
pub const STATS_EVERY_MS: u64 = 10_000;

/// A chain's cache settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheSettings {
    /// How long the head learned is believed, ms (`CACHE_HEAD_MS`): an answer at the head is
    /// served at most this long after the head was last asked.
    pub head_ms: u64,
    /// How the finalized block is known (`CACHE_FINALITY`).
    pub finality: Finality,
    /// How many blocks below the head count as finalized on a chain without a `finalized` tag,
    /// or where [`Finality`] says so (`CACHE_FINALITY_DEPTH`).
    pub finality_depth: u64,
    /// What may prove that a block holds no log a filter takes (`CACHE_BLOOM_PROOF`,
    /// [`proof::Proof`]), resolved for the chain ([`proof::Proof::rule`]).
    pub proof: proof::ProofRule,
}

/// What the cache did, since the counters were last taken ([`ReadCache::take_stats`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Reads answered from the cache.
    pub hits: u64,
    /// Their results' bytes.
    pub hit_bytes: u64,
    /// Reads that could have been and were not (asked upstream).
    pub misses: u64,
    /// Reads that waited for an identical one in flight instead of asking.
    pub coalesced: u64,
    /// Answers kept, and their results' bytes.
    pub stored: u64,
    /// Their results' bytes.
    pub stored_bytes: u64,
    /// Reorgs seen (a new head that did not keep a block known).
    pub reorgs: u64,
    /// Answers dropped by reorgs.
    pub dropped: u64,
    /// Block headers heard from upstream WebSockets (the head watch's `newHeads`, and clients'):
    /// [`ReadCache::heard_head`].
    pub heads_heard: u64,
    /// Answers the chain did not prove complete ([`Completeness::Unproven`]: an empty or short
    /// `eth_getLogs`, an empty block's receipts or count, that a lagging node may have given).
    pub suspect: u64,
    /// Of those, asked again (the upstream may lack the block).
    pub suspect_asked_again: u64,
    /// Of those, kept after all (the answer asked again was proven).
    pub suspect_kept: u64,
    /// Of those, served and not kept.
    pub suspect_unkept: u64,
}

/// What [`ReadCache::store`] did with an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Stored {
    /// Whether it is kept in the isolate's memory (an answer larger than a sixteenth of the
    /// bound is not).
    pub in_memory: bool,
    /// How long it holds; `None` when it may not be kept at all (`Some` also for one too large
    /// for memory, which a shared cache may still keep).
    pub tag: Option<Tag>,
    /// What the chain proves of what it lists ([`proof::completeness`]); `Proven` also for an
    /// answer not kept for another reason.
    pub completeness: Completeness,
    /// Whether this answer turned the chain's proof off ([`Completeness::Contradicted`]).
    pub proof_off: bool,
}

impl Stored {
    const NOT: Stored = Stored {
        in_memory: false,
        tag: None,
        completeness: Completeness::Proven,
        proof_off: false,
    };
}

/// A read as the cache judges its answer: its method and params, what it is about
/// ([`About::of`]), and whether it was asked of its block by hash ([`ReadCache::pin`]: an answer
/// that names no block is kept above the finalized block only so).
#[derive(Debug, Clone, Copy)]
pub struct Read<'a> {
    /// The method, as the client named it.
    pub method: &'a str,
    /// The params, as the client gave them.
    pub params: &'a Value,
    /// What it is about.
    pub about: About,
    /// Whether it was asked by its block's hash.
    pub pinned: bool,
    /// The head of the upstream that answered, when known ([`crate::upstream::Answerer`]): a
    /// range of logs past it may lack what that upstream has not seen yet.
    pub answerer_head: Option<u64>,
}

/// The read cache of one isolate: the answers kept (every chain's, one bound), each chain's
/// view, the reads and head asks in flight, and the counters.
pub struct ReadCache {
    entries: Entries,
    views: HashMap<u64, ChainView>,
    flights: Flights,
    stats: CacheStats,
    /// When the counters were last taken, ms.
    stats_since_ms: Option<u64>,
    /// Per chain, whether its upstream reads EIP-1898's block hash form ([`pin::PinForm`]).
    pin_forms: HashMap<u64, pin::PinForm>,
    /// The chains whose headers were contradicted by an answer ([`Completeness::Contradicted`]):
    /// no header proves an empty answer there any more.
    proof_off: HashSet<u64>,
    /// When each chain's upstreams' heads were last asked, ms ([`ReadCache::upstream_heads_due`]).
    heads_asked_ms: HashMap<u64, u64>,
}

pub use pin::PIN_REFUSALS;

impl ReadCache {
    /// An empty cache holding at most `max_bytes` of answers.
    pub fn new(max_bytes: usize) -> Self {
        ReadCache {
            entries: Entries::new(max_bytes),
            views: HashMap::new(),
            flights: Flights::default(),
            stats: CacheStats::default(),
            stats_since_ms: None,
            pin_forms: HashMap::new(),
            proof_off: HashSet::new(),
            heads_asked_ms: HashMap::new(),
        }
    }

    /// Counts what the chains' views hold (their headers, [`ChainView::held_bytes`]) in the
    /// bound: the answers kept make room for it.
    fn reserve_views(&mut self) {
        let held = self.views.values().map(ChainView::held_bytes).sum();
        self.entries.reserve(held);
    }

    /// The number of the head known on `chain` (fresh or not), when one was learned.
    pub fn head_number(&self, chain: u64) -> Option<u64> {
        self.views.get(&chain)?.head().map(|h| h.number)
    }

    /// `chain`'s view, when anything was learned of it.
    pub fn view(&self, chain: u64) -> Option<&ChainView> {
        self.views.get(&chain)
    }

    /// The bytes the answers kept and the chains' headers take, and how many answers there are.
    pub fn held(&self) -> (usize, usize) {
        (self.entries.bytes(), self.entries.len())
    }

    /// How many answers were evicted to make room, since the start.
    pub fn evicted(&self) -> u64 {
        self.entries.evicted
    }

    /// Whether answering a read about `about` on `chain` at `now_ms` needs the head asked first:
    /// at the head, about a transaction, or about a block not known finalized, when the head is
    /// older than `settings.head_ms`.
    pub fn needs_head(
        &self,
        chain: u64,
        about: About,
        now_ms: u64,
        settings: &CacheSettings,
    ) -> bool {
        let view = self.views.get(&chain);
        let fresh = view.is_some_and(|v| v.head_fresh(now_ms, settings.head_ms));
        match about {
            About::Never | About::Chain | About::BlockHash => false,
            About::Number(n) => !fresh && view.and_then(ChainView::finalized).is_none_or(|f| n > f),
            About::HeadNumber => {
                view.is_none_or(|v| v.head_number(now_ms, settings.head_ms).is_none())
            }
            About::Head | About::Answer => !fresh,
        }
    }

    /// Whether `chain`'s upstreams' heads are due to be asked at `now_ms` ([`UPSTREAM_HEADS_MS`]
    /// since [`ReadCache::upstream_heads_asked`]).
    pub fn upstream_heads_due(&self, chain: u64, now_ms: u64) -> bool {
        self.heads_asked_ms
            .get(&chain)
            .is_none_or(|at| now_ms.saturating_sub(*at) >= UPSTREAM_HEADS_MS)
    }

    /// `chain`'s upstreams' heads were asked at `now_ms`.
    pub fn upstream_heads_asked(&mut self, chain: u64, now_ms: u64) {
        self.heads_asked_ms.insert(chain, now_ms);
    }

    /// `chain`'s upstreams' best head number learned at `now_ms` ([`ChainView::note_best`]).
    pub fn note_best(&mut self, chain: u64, number: u64, now_ms: u64) {
        self.views
            .entry(chain)
            .or_default()
            .note_best(number, now_ms);
    }

    /// Whether `chain`'s finalized block should be asked again at `now_ms`.
    pub fn needs_finalized(&self, chain: u64, now_ms: u64) -> bool {
        !self
            .views
            .get(&chain)
            .is_some_and(|v| v.finalized_fresh(now_ms, FINALIZED_FRESH_MS))
    }

    /// The result kept for `key` (a read about `about`) on `chain` that still holds at `now_ms`,
    /// counted as a hit; `None` (counted as a miss) when there is none. `eth_blockNumber`
    /// ([`About::HeadNumber`]) is the head's number while the head is fresh. An entry that no
    /// longer holds is dropped.
    pub fn lookup(
        &mut self,
        chain: u64,
        key: &str,
        about: About,
        now_ms: u64,
        settings: &CacheSettings,
    ) -> Option<Rc<str>> {
        if about == About::Never {
            return None;
        }
        let view = self.views.get(&chain);
        let found = if about == About::HeadNumber {
            view.and_then(|v| v.head_number(now_ms, settings.head_ms))
                .map(|n| Rc::from(format!("\"{}\"", crate::hex::encode_quantity(n))))
        } else {
            match self.entries.get(chain, key) {
                Some(entry) if holds(view, &entry.tag, now_ms, settings) => {
                    Some(entry.result.clone())
                }
                Some(_) => {
                    self.entries.remove(chain, key);
                    None
                }
                None => None,
            }
        };
        match &found {
            Some(result) => {
                self.stats.hits += 1;
                self.stats.hit_bytes += result.len() as u64;
            }
            None => self.stats.misses += 1,
        }
        found
    }

    /// Keeps `result` (a read's `result` JSON text) as `key`'s on `chain`, when what `read` is
    /// about lets it ([`tag_for`]) at `now_ms` and the chain proves it lists all it should
    /// ([`proof::completeness`]): in memory unless it is too large for it; its tag says how long
    /// it holds ([`Stored`]). An answer that lists a log in a block whose bloom ruled the filter
    /// out turns the proof off for `chain` ([`Stored::proof_off`]).
    pub fn store(
        &mut self,
        chain: u64,
        key: &str,
        read: Read<'_>,
        result: &str,
        now_ms: u64,
        settings: &CacheSettings,
    ) -> Stored {
        if matches!(read.about, About::Never | About::HeadNumber) {
            return Stored::NOT;
        }
        // Too large for memory and unable to hold for good (the shared cache's only): neither
        // read nor copied.
        if self.entries.too_large(result.len()) && !self.may_be_final(chain, read.about) {
            return Stored::NOT;
        }
        let Some(value) = Shape::read(result) else {
            return Stored::NOT;
        };
        let view = self.views.get(&chain);
        let head = view.and_then(ChainView::head).map(|h| h.number);
        let newer = value
            .header()
            .is_some_and(|b| head.is_some_and(|h| b.number > h));
        if newer || !names_known_blocks(view, &value) {
            // The upstream answered from a block above the head the cache knows, or from blocks
            // it does not know at their numbers (a reorg it has not seen yet): the head is asked
            // again at the next read.
            if let Some(view) = self.views.get_mut(&chain) {
                view.suspect(now_ms);
            }
            return Stored::NOT;
        }
        let rule = if self.proof_off.contains(&chain) {
            proof::ProofRule::Nothing
        } else {
            settings.proof
        };
        let completeness = proof::completeness(view, read, &value, rule);
        match completeness {
            Completeness::Proven => {}
            Completeness::Unproven { .. } => {
                return Stored {
                    completeness,
                    ..Stored::NOT
                }
            }
            Completeness::Contradicted { .. } => {
                self.proof_off.insert(chain);
                return Stored {
                    completeness,
                    proof_off: true,
                    ..Stored::NOT
                };
            }
        }
        let Some(tag) = tag_for(view, read, &value, now_ms, settings) else {
            return Stored::NOT;
        };
        let entry = Entry {
            result: Rc::from(result),
            tag: tag.clone(),
        };
        let in_memory = self.entries.put(chain, key, entry);
        if in_memory {
            self.stats.stored += 1;
            self.stats.stored_bytes += result.len() as u64;
        }
        Stored {
            in_memory,
            tag: Some(tag),
            ..Stored::NOT
        }
    }

    /// Counts an answer the chain did not prove complete ([`Completeness::Unproven`]): whether
    /// it was asked again, and whether the answer finally given was kept.
    pub fn count_suspect(&mut self, asked_again: bool, kept: bool) {
        self.stats.suspect += 1;
        self.stats.suspect_asked_again += u64::from(asked_again);
        if kept {
            self.stats.suspect_kept += 1;
        } else {
            self.stats.suspect_unkept += 1;
        }
    }

    /// Keeps `result`, an answer that holds for good (from a shared cache that keeps only
    /// those), as `key`'s on `chain`, and counts it as a hit.
    pub fn keep_final(&mut self, chain: u64, key: &str, result: &str) {
        self.stats.hits += 1;
        self.stats.misses = self.stats.misses.saturating_sub(1);
        self.stats.hit_bytes += result.len() as u64;
        let entry = Entry {
            result: Rc::from(result),
            tag: Tag::Final,
        };
        self.entries.put(chain, key, entry);
    }

    /// Whether a read about `about` on `chain` may find an answer that holds for good (in a
    /// shared cache): about the chain, a block by hash, a transaction, or a block at or below the
    /// finalized one.
    pub fn may_be_final(&self, chain: u64, about: About) -> bool {
        match about {
            About::Chain | About::BlockHash | About::Answer => true,
            About::Number(n) => self
                .views
                .get(&chain)
                .and_then(ChainView::finalized)
                .is_some_and(|f| n <= f),
            About::Never | About::Head | About::HeadNumber => false,
        }
    }

    /// `chain`'s genesis hash, when learned ([`ReadCache::set_genesis`]).
    pub fn genesis(&self, chain: u64) -> Option<&str> {
        self.views.get(&chain)?.genesis()
    }

    /// Learns `chain`'s genesis hash: a shared cache's keys carry it, so that a chain started
    /// anew (a dev chain reset) never finds the old one's answers. Another genesis than the one
    /// known is such a chain: everything kept of the old one goes, its finalized block too (the
    /// new chain's head is asked at the next read). Returns whether it was another.
    pub fn set_genesis(&mut self, chain: u64, hash: &str) -> bool {
        let view = self.views.entry(chain).or_default();
        let anew = view
            .genesis()
            .is_some_and(|known| !known.eq_ignore_ascii_case(hash));
        if anew {
            *view = ChainView::default();
            self.entries.drop_chain(chain);
        }
        view.set_genesis(hash);
        if anew {
            self.reserve_views();
        }
        anew
    }

    /// The parent to ask for to link the new head `headers` ([`ChainView::missing_parent`]).
    pub fn missing_parent(&self, chain: u64, headers: &[Header]) -> Option<String> {
        self.views.get(&chain)?.missing_parent(headers)
    }

    /// Takes `headers` (a new head, then the parents asked, from an ask begun at `asked_ms`) as
    /// `chain`'s canonical chain at `now_ms` ([`ChainView::adopt`]) and drops what it makes
    /// stale: on a reorg every answer about a block at or above the fork point, on any new head
    /// the answers at the old one. A head below the finalized block is a chain that went back:
    /// everything of it goes. An ask begun before the last head was adopted, or before the head
    /// was last taken as suspect, changes nothing ([`Adopted::Same`]); one that answers a block
    /// known as canonical below the head, at most `max_lag` blocks below (an upstream behind a
    /// head heard on a WebSocket, `MAX_HEAD_LAG`), confirms the head and changes nothing else; one
    /// further below (a node stuck behind) changes nothing, and does not confirm the head either:
    /// the head is asked again at the next read that depends on it.
    pub fn adopt(
        &mut self,
        chain: u64,
        headers: &[Header],
        asked_ms: u64,
        now_ms: u64,
        max_lag: u64,
    ) -> Adopted {
        let view = self.views.entry(chain).or_default();
        // An ask that began before the one whose head is known (a slow one, given up on while
        // another ran) says nothing newer: taken, it would move the head back.
        if view.adopted_ms().is_some_and(|at| at > asked_ms) {
            return Adopted::Same;
        }
        // An ask begun before the head was taken as suspect (a header heard that did not follow
        // it, an answer naming a block not known, a send) says nothing of what made it so: the
        // head stays suspect, asked again at the next read.
        if view.suspected_ms().is_some_and(|at| at > asked_ms) {
            return Adopted::Same;
        }
        // A block the view has as canonical below its head: an upstream behind the head known
        // (the head watch's WebSocket node ahead of the HTTP one), not another chain. The head
        // stays, confirmed: taken, it would move the head back and drop its block as a reorg.
        let behind = headers.first().is_some_and(|first| {
            view.head().is_some_and(|h| first.number < h.number)
                && view.hash_at(first.number) == Some(first.hash.as_str())
        });
        if behind {
            let lag = view.head().map_or(0, |h| h.number) - headers[0].number;
            if lag <= max_lag {
                view.confirm(now_ms);
                view.set_adopted_ms(asked_ms);
            }
            return Adopted::Same;
        }
        let below_final = headers
            .first()
            .is_some_and(|h| view.finalized().is_some_and(|f| h.number < f));
        // A head below the one known that does not link to it: the chain started anew.
        let went_back = headers.first().is_some_and(|h| {
            view.head().is_some_and(|known| h.number < known.number)
                && view.missing_parent(headers).is_none()
                && !view.links(headers)
        });
        let below_final = below_final || went_back;
        if below_final {
            *view = ChainView::default();
            self.entries.drop_chain(chain);
        }
        let view = self.views.entry(chain).or_default();
        let adopted = view.adopt(headers, now_ms);
        view.set_adopted_ms(asked_ms);
        self.reserve_views();
        match adopted {
            Adopted::Same => {}
            Adopted::Extended => {
                self.entries.drop_heads(chain);
            }
            Adopted::Reorg { fork } => {
                self.stats.reorgs += 1;
                self.stats.dropped += self.entries.drop_from(chain, fork) as u64;
            }
        }
        adopted
    }

    /// A head heard from the upstream's WebSocket (a client's `newHeads`) on `chain` at
    /// `now_ms`: the next block on top of the head known is taken as the head (and makes it
    /// fresh); a block known already changes nothing; any other (a reorg, or blocks missed) makes
    /// the head asked at the next read, whose ask follows it back. Returns what was adopted.
    pub fn heard_head(&mut self, chain: u64, header: &Header, now_ms: u64) -> Option<Adopted> {
        let view = self.views.get_mut(&chain)?;
        self.stats.heads_heard += 1;
        if view.hash_at(header.number) == Some(header.hash.as_str()) {
            return None;
        }
        let on_top = view
            .head()
            .is_some_and(|h| h.number + 1 == header.number && h.hash == header.parent_hash);
        if !on_top {
            view.suspect(now_ms);
            return None;
        }
        // On top: never behind the head, so no lag applies.
        Some(self.adopt(chain, std::slice::from_ref(header), now_ms, now_ms, 0))
    }

    /// Takes `chain`'s head as not fresh at `now_ms`: the head is asked at the next read that
    /// depends on it (a transaction the relay just forwarded may already be in a block: a dev
    /// chain's automine, a rollup's sequencer).
    pub fn suspect(&mut self, chain: u64, now_ms: u64) {
        if let Some(view) = self.views.get_mut(&chain) {
            view.suspect(now_ms);
        }
    }

    /// Learns that `chain`'s block `number` is finalized at `now_ms` ([`ChainView::set_finalized`]:
    /// it only goes up).
    pub fn set_finalized(&mut self, chain: u64, number: u64, now_ms: u64) {
        self.views
            .entry(chain)
            .or_default()
            .set_finalized(number, now_ms);
    }

    /// The method and params to ask a read of `method` with `params` about block `number` on
    /// `chain` with ([`policy::pinned`]): by the hash the cache knows at that number, when the
    /// block is not finalized and the head is fresh at `now_ms` (asked within `head_ms`: its
    /// answer is then kept only while that block is canonical, and must be that block's);
    /// `None`: ask as the client did.
    pub fn pin(
        &self,
        chain: u64,
        method: &str,
        params: &Value,
        number: u64,
        now_ms: u64,
        head_ms: u64,
    ) -> Option<(&'static str, Value)> {
        if self.pin_forms.get(&chain).is_some_and(|f| !f.on(now_ms)) {
            return None;
        }
        let view = self.views.get(&chain)?;
        if view.finalized().is_some_and(|f| number <= f) || !view.head_fresh(now_ms, head_ms) {
            return None;
        }
        policy::pinned(method, params, view.hash_at(number)?)
    }

    /// `chain`'s record of whether its upstream reads the block hash form ([`pin::PinForm`]):
    /// a read asked by hash answered so, or refused (judged by a probe).
    pub fn pin_form(&mut self, chain: u64) -> &mut pin::PinForm {
        self.pin_forms.entry(chain).or_default()
    }

    /// `chain`'s finalized block was asked at `now_ms` and not learned
    /// ([`ChainView::finalized_unanswered`]).
    pub fn finalized_unanswered(&mut self, chain: u64, now_ms: u64) {
        self.views
            .entry(chain)
            .or_default()
            .finalized_unanswered(now_ms);
    }

    /// Claims `chain`'s head ask at `now_ms` ([`Flights::claim_refresh`]).
    pub fn claim_refresh(&mut self, chain: u64, now_ms: u64, give_up_ms: u64) -> bool {
        self.flights.claim_refresh(chain, now_ms, give_up_ms)
    }

    /// Ends `chain`'s head ask claimed at `since_ms` ([`Flights::release_refresh`]).
    pub fn release_refresh(&mut self, chain: u64, since_ms: u64) {
        self.flights.release_refresh(chain, since_ms);
    }

    /// Whether `chain`'s head ask is under way.
    pub fn refreshing(&self, chain: u64) -> bool {
        self.flights.refreshing(chain)
    }

    /// Starts a read of `key` on `chain` at `now_ms` ([`Flights::begin`]); a follower is
    /// counted (`coalesced`).
    pub fn begin(&mut self, chain: u64, key: &str, now_ms: u64, give_up_ms: u64) -> Begin {
        let begin = self.flights.begin(chain, key, now_ms, give_up_ms);
        if begin == Begin::Follow {
            self.stats.coalesced += 1;
        }
        begin
    }

    /// The leader's `answer` to `key` on `chain` at `now_ms` ([`Flights::land`]); returns it
    /// when no follower waits for it.
    pub fn land(
        &mut self,
        chain: u64,
        key: &str,
        answer: Option<Answer>,
        now_ms: u64,
    ) -> Option<Answer> {
        self.flights.land(chain, key, answer, now_ms)
    }

    /// How many followers wait for `key` on `chain` ([`Flights::followers`]).
    pub fn followers(&self, chain: u64, key: &str) -> u32 {
        self.flights.followers(chain, key)
    }

    /// For a follower: calls `wake` when the leader's answer lands ([`Flights::on_land`]).
    pub fn on_land(&mut self, chain: u64, key: &str, wake: flight::Wake) {
        self.flights.on_land(chain, key, wake);
    }

    /// For a read waiting for `chain`'s head ask: calls `wake` when it ends
    /// ([`Flights::on_refreshed`]).
    pub fn on_refreshed(&mut self, chain: u64, wake: flight::Wake) {
        self.flights.on_refreshed(chain, wake);
    }

    /// For a follower: takes the leader's answer once it landed ([`Flights::take_landed`]).
    pub fn take_landed(&mut self, chain: u64, key: &str) -> Option<Option<Answer>> {
        self.flights.take_landed(chain, key)
    }

    /// A follower gives up waiting ([`Flights::leave`]).
    pub fn leave_flight(&mut self, chain: u64, key: &str) {
        self.flights.leave(chain, key);
    }

    /// How many reads are in flight, or landed and not yet taken by their followers.
    pub fn flights(&self) -> usize {
        self.flights.count()
    }

    /// The counters gathered since they were last taken, when [`STATS_EVERY_MS`] passed at
    /// `now_ms` and something was counted; they start again from zero.
    pub fn take_stats(&mut self, now_ms: u64) -> Option<CacheStats> {
        let since = *self.stats_since_ms.get_or_insert(now_ms);
        if now_ms.saturating_sub(since) < STATS_EVERY_MS || self.stats == CacheStats::default() {
            return None;
        }
        self.stats_since_ms = Some(now_ms);
        Some(std::mem::take(&mut self.stats))
    }
}
