//! The answers kept ([`Entries`]): a least-recently-used map bounded in bytes (the `lru` crate,
//! its bytes counted here), each answer with the [`Tag`] that says how long it holds, and an index
//! of the answers about unfinalized blocks and the head, so that a reorg or a new head drops
//! exactly those. Pure.

use lru::LruCache;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;

/// What an answer holds for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tag {
    /// For good on its chain: the chain's constants, answers about a block named by hash, about a
    /// finalized block.
    Final,
    /// While block `number` with `hash` is canonical (its hash commits to every block below it).
    Block {
        /// The block's number.
        number: u64,
        /// Its hash, lowercase hex.
        hash: String,
    },
    /// While the head is block `number` with `hash`.
    Head {
        /// The head's number.
        number: u64,
        /// Its hash, lowercase hex.
        hash: String,
    },
}

/// One answer kept: the JSON text of its `result`, and how long it holds.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The `result`'s JSON text, as the upstream answered it.
    pub result: Rc<str>,
    /// How long it holds.
    pub tag: Tag,
}

/// What one entry costs besides its key's, its result's and its tag's hash's bytes, bytes: the
/// list's node (key, result, tag, links), the two reference counts, the map's and the index's
/// slots, the allocator's rounding. Measured with a counting allocator
/// (`tests/cache_memory.rs`), so that the bound holds for the heap, not only for the texts.
const ENTRY_OVERHEAD_BYTES: usize = 240;

/// The answers kept, at most `max_bytes` of them ([`cost`] each), the least recently used
/// evicted first. Each is kept by its chain and its read's key ([`super::policy::key_of`]) as
/// one shared text, `{chain} {key}`.
pub struct Entries {
    lru: LruCache<Rc<str>, Entry>,
    /// The bytes held.
    bytes: usize,
    /// The most bytes held, [`Entries::reserve`]'s included.
    max_bytes: usize,
    /// Bytes of the bound held by something else (the chains' headers), ([`Entries::reserve`]).
    reserved: usize,
    /// The entries tagged [`Tag::Block`] or [`Tag::Head`], by chain and block number (the same
    /// texts as the list's keys).
    unfinalized: BTreeMap<(u64, u64), HashSet<Rc<str>>>,
    /// The entries tagged [`Tag::Head`], by chain: a new head drops exactly these, at the cost
    /// of what the old head held.
    at_head: HashMap<u64, HashSet<Rc<str>>>,
    /// How many entries were evicted to make room.
    pub evicted: u64,
}

/// The text an entry is kept by: `{chain} {key}`.
fn full_key(chain: u64, key: &str) -> String {
    format!("{chain} {key}")
}

/// The bytes an entry costs: its key, its result, its tag's hash and [`ENTRY_OVERHEAD_BYTES`].
fn cost(key: &str, entry: &Entry) -> usize {
    let hash = match &entry.tag {
        Tag::Final => 0,
        Tag::Block { hash, .. } | Tag::Head { hash, .. } => hash.len(),
    };
    key.len() + entry.result.len() + hash + ENTRY_OVERHEAD_BYTES
}

impl Entries {
    /// Room for `max_bytes`.
    pub fn new(max_bytes: usize) -> Self {
        Entries {
            lru: LruCache::unbounded(),
            bytes: 0,
            max_bytes,
            reserved: 0,
            unfinalized: BTreeMap::new(),
            at_head: HashMap::new(),
            evicted: 0,
        }
    }

    /// The bytes held now, the answers' and what is reserved ([`Entries::reserve`]).
    pub fn bytes(&self) -> usize {
        self.bytes + self.reserved
    }

    /// How many entries are held.
    pub fn len(&self) -> usize {
        self.lru.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.lru.is_empty()
    }

    /// The entry of `key` on `chain` (made the most recently used).
    pub fn get(&mut self, chain: u64, key: &str) -> Option<&Entry> {
        self.lru.get(full_key(chain, key).as_str())
    }

    /// Whether an answer of `len` bytes is too large to be kept in memory ([`Entries::put`]).
    pub fn too_large(&self, len: usize) -> bool {
        len.saturating_add(ENTRY_OVERHEAD_BYTES) > self.max_bytes / 16
    }

    /// Keeps `entry` as `key`'s on `chain`, evicting the least recently used until it fits. An
    /// answer larger than a sixteenth of the bound is not kept (one wide `eth_getLogs` must not
    /// empty the cache); returns whether it was.
    pub fn put(&mut self, chain: u64, key: &str, entry: Entry) -> bool {
        let full: Rc<str> = Rc::from(full_key(chain, key));
        let size = cost(&full, &entry);
        if size > self.max_bytes / 16 {
            return false;
        }
        self.remove_full(&full);
        self.make_room(size);
        // The chains' headers took the room (a bound smaller than what they hold): not kept.
        if self.bytes + self.reserved + size > self.max_bytes {
            return false;
        }
        if let Tag::Block { number, .. } | Tag::Head { number, .. } = &entry.tag {
            self.unfinalized
                .entry((chain, *number))
                .or_default()
                .insert(full.clone());
        }
        if let Tag::Head { .. } = &entry.tag {
            self.at_head.entry(chain).or_default().insert(full.clone());
        }
        self.bytes += size;
        self.lru.put(full, entry);
        true
    }

    /// Holds `bytes` of the bound for something else (the chains' headers): the least recently
    /// used answers are evicted until the rest fits.
    pub fn reserve(&mut self, bytes: usize) {
        self.reserved = bytes;
        self.make_room(0);
    }

    /// Evicts the least recently used answers until `size` more bytes fit.
    fn make_room(&mut self, size: usize) {
        while self.bytes + self.reserved + size > self.max_bytes {
            let Some((old_key, old)) = self.lru.pop_lru() else {
                break;
            };
            self.forget(&old_key, &old);
            self.evicted += 1;
        }
    }

    /// Removes `key`'s entry on `chain`, if any.
    pub fn remove(&mut self, chain: u64, key: &str) {
        self.remove_full(&full_key(chain, key));
    }

    /// Removes the entry kept as `full` (`{chain} {key}`), if any.
    fn remove_full(&mut self, full: &str) {
        if let Some((old_key, old)) = self.lru.pop_entry(full) {
            self.forget(&old_key, &old);
        }
    }

    /// Drops every answer on `chain` about a block at or above `fork`, and every answer at a
    /// head (a reorg: those blocks are no longer canonical). Returns how many.
    pub fn drop_from(&mut self, chain: u64, fork: u64) -> usize {
        let keys: Vec<Rc<str>> = self
            .unfinalized
            .range((chain, fork)..=(chain, u64::MAX))
            .flat_map(|(_, keys)| keys.iter().cloned())
            .collect();
        let dropped = keys.len();
        for key in keys {
            self.remove_full(&key);
        }
        dropped + self.drop_heads(chain)
    }

    /// Drops every answer on `chain` tagged [`Tag::Head`] (the head moved). Returns how many.
    pub fn drop_heads(&mut self, chain: u64) -> usize {
        let heads: Vec<Rc<str>> = self
            .at_head
            .remove(&chain)
            .map(|keys| keys.into_iter().collect())
            .unwrap_or_default();
        let dropped = heads.len();
        for key in heads {
            self.remove_full(&key);
        }
        dropped
    }

    /// Drops every answer on `chain` (it went back: a dev chain reset).
    pub fn drop_chain(&mut self, chain: u64) {
        let prefix = format!("{chain} ");
        let keys: Vec<Rc<str>> = self
            .lru
            .iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.remove_full(&key);
        }
    }

    /// Takes an entry leaving out of the index and the byte count.
    fn forget(&mut self, full: &Rc<str>, old: &Entry) {
        self.bytes = self.bytes.saturating_sub(cost(full, old));
        if let Tag::Block { number, .. } | Tag::Head { number, .. } = &old.tag {
            let chain = full
                .split_once(' ')
                .and_then(|(c, _)| c.parse().ok())
                .unwrap_or(0);
            if let Tag::Head { .. } = &old.tag {
                if let Some(keys) = self.at_head.get_mut(&chain) {
                    keys.remove(full);
                }
            }
            if let Some(keys) = self.unfinalized.get_mut(&(chain, *number)) {
                keys.remove(full);
                if keys.is_empty() {
                    self.unfinalized.remove(&(chain, *number));
                }
            }
        }
    }
}
