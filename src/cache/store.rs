//! The answers kept ([`Entries`]): a least-recently-used map bounded in bytes (the `lru` crate,
//! its bytes counted here), each answer with the [`Tag`] that says how long it holds, and an index
//! of the answers about unfinalized blocks and the head, so that a reorg or a new head drops
//! exactly those. Pure.

use lru::LruCache;
use std::collections::{BTreeMap, HashSet};
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

/// What one entry costs besides its key's and result's bytes (the map's node, the tag, the
/// index), bytes: an estimate, so that many small answers count.
const ENTRY_OVERHEAD_BYTES: usize = 160;

/// An entry's key: its chain (the chain id, 0 when unset) and its read's key
/// ([`super::policy::key_of`]).
type Key = (u64, String);

/// The answers kept, at most `max_bytes` of them (keys, results and [`ENTRY_OVERHEAD_BYTES`]
/// each), the least recently used evicted first.
pub struct Entries {
    lru: LruCache<Key, Entry>,
    /// The bytes held.
    bytes: usize,
    /// The most bytes held.
    max_bytes: usize,
    /// Keys of the entries tagged [`Tag::Block`] or [`Tag::Head`], by chain and block number.
    unfinalized: BTreeMap<(u64, u64), HashSet<String>>,
    /// How many entries were evicted to make room.
    pub evicted: u64,
}

/// The bytes an entry costs.
fn cost(key: &str, result: &str) -> usize {
    key.len() + result.len() + ENTRY_OVERHEAD_BYTES
}

impl Entries {
    /// Room for `max_bytes`.
    pub fn new(max_bytes: usize) -> Self {
        Entries {
            lru: LruCache::unbounded(),
            bytes: 0,
            max_bytes,
            unfinalized: BTreeMap::new(),
            evicted: 0,
        }
    }

    /// The bytes held now.
    pub fn bytes(&self) -> usize {
        self.bytes
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
        self.lru.get(&(chain, key.to_string()))
    }

    /// Keeps `entry` as `key`'s on `chain`, evicting the least recently used until it fits. An
    /// answer larger than a sixteenth of the bound is not kept (one wide `eth_getLogs` must not
    /// empty the cache); returns whether it was.
    pub fn put(&mut self, chain: u64, key: String, entry: Entry) -> bool {
        let size = cost(&key, &entry.result);
        if size > self.max_bytes / 16 {
            return false;
        }
        self.remove(chain, &key);
        while self.bytes + size > self.max_bytes {
            let Some(((c, k), old)) = self.lru.pop_lru() else {
                break;
            };
            self.forget(c, &k, &old);
            self.evicted += 1;
        }
        if let Tag::Block { number, .. } | Tag::Head { number, .. } = &entry.tag {
            self.unfinalized
                .entry((chain, *number))
                .or_default()
                .insert(key.clone());
        }
        self.bytes += size;
        self.lru.put((chain, key), entry);
        true
    }

    /// Removes `key`'s entry on `chain`, if any.
    pub fn remove(&mut self, chain: u64, key: &str) {
        let key = (chain, key.to_string());
        if let Some(old) = self.lru.pop(&key) {
            self.forget(chain, &key.1, &old);
        }
    }

    /// Drops every answer on `chain` about a block at or above `fork`, and every answer at a
    /// head (a reorg: those blocks are no longer canonical). Returns how many.
    pub fn drop_from(&mut self, chain: u64, fork: u64) -> usize {
        let keys: Vec<String> = self
            .unfinalized
            .range((chain, fork)..=(chain, u64::MAX))
            .flat_map(|(_, keys)| keys.iter().cloned())
            .collect();
        let dropped = keys.len();
        for key in keys {
            self.remove(chain, &key);
        }
        dropped + self.drop_heads(chain)
    }

    /// Drops every answer on `chain` tagged [`Tag::Head`] (the head moved). Returns how many.
    pub fn drop_heads(&mut self, chain: u64) -> usize {
        let heads: Vec<(u64, String)> = self
            .unfinalized
            .range((chain, 0)..=(chain, u64::MAX))
            .flat_map(|(_, keys)| keys.iter().map(|k| (chain, k.clone())))
            .filter(|key| {
                matches!(
                    self.lru.peek(key),
                    Some(Entry {
                        tag: Tag::Head { .. },
                        ..
                    })
                )
            })
            .collect();
        let dropped = heads.len();
        for (c, k) in heads {
            self.remove(c, &k);
        }
        dropped
    }

    /// Drops every answer on `chain` (it went back: a dev chain reset).
    pub fn drop_chain(&mut self, chain: u64) {
        let keys: Vec<Key> = self
            .lru
            .iter()
            .filter(|((c, _), _)| *c == chain)
            .map(|(k, _)| k.clone())
            .collect();
        for (c, k) in keys {
            self.remove(c, &k);
        }
    }

    /// Takes an entry leaving out of the index and the byte count.
    fn forget(&mut self, chain: u64, key: &str, old: &Entry) {
        self.bytes = self.bytes.saturating_sub(cost(key, &old.result));
        if let Tag::Block { number, .. } | Tag::Head { number, .. } = &old.tag {
            if let Some(keys) = self.unfinalized.get_mut(&(chain, *number)) {
                keys.remove(key);
                if keys.is_empty() {
                    self.unfinalized.remove(&(chain, *number));
                }
            }
        }
    }
}
