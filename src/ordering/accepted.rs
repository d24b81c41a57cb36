//! The transactions a sender's upstream accepted, by hash and by nonce, within the idempotency
//! window (`IDEMPOTENCY_TTL_S`) and at most [`MAX_ACCEPTED`] per sender.
//!
//! An accepted transaction is *vouched* for while the relay has seen the upstream hold it: it was
//! accepted in this object's life, or the upstream answered it by hash since. One read back from
//! storage after a restart is not vouched for until the upstream confirms it. Its original bytes
//! stay in the object's storage, not here; every change reports the hashes that left the set, for
//! the object to delete.

use std::collections::{BTreeMap, HashMap, VecDeque};

/// A transaction hash (keccak-256 of the EIP-2718 envelope), 32 bytes.
pub type TxHash = [u8; 32];

/// The most accepted hashes one sender's object remembers; the oldest leave first.
pub const MAX_ACCEPTED: usize = 1024;

/// A transaction the upstream took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceptedTx {
    /// Its nonce.
    pub nonce: u64,
    /// When it was accepted, Unix ms.
    pub at_ms: u64,
    /// Whether the upstream is known to hold it (see the module documentation).
    pub vouched: bool,
}

/// One sender's accepted transactions. See the module documentation.
pub struct Accepted {
    by_hash: HashMap<TxHash, AcceptedTx>,
    by_nonce: BTreeMap<u64, TxHash>,
    /// Hashes in the order they were accepted, with their acceptance time; entries of hashes that
    /// were replaced or forgotten linger until they reach the front.
    order: VecDeque<(u64, TxHash)>,
    ttl_ms: u64,
}

impl Accepted {
    /// Empty, with an idempotency window of `ttl_ms`.
    pub fn new(ttl_ms: u64) -> Self {
        Accepted {
            by_hash: HashMap::new(),
            by_nonce: BTreeMap::new(),
            order: VecDeque::new(),
            ttl_ms,
        }
    }

    fn fresh(&self, tx: &AcceptedTx, now_ms: u64) -> bool {
        now_ms < tx.at_ms.saturating_add(self.ttl_ms)
    }

    /// The accepted transaction with this hash, if accepted within the window at `now_ms`.
    pub fn get(&self, hash: &TxHash, now_ms: u64) -> Option<AcceptedTx> {
        self.by_hash
            .get(hash)
            .copied()
            .filter(|tx| self.fresh(tx, now_ms))
    }

    /// The hash accepted with `nonce` within the window, if any.
    pub fn with_nonce(&self, nonce: u64, now_ms: u64) -> Option<TxHash> {
        let hash = self.by_nonce.get(&nonce)?;
        self.get(hash, now_ms).map(|_| *hash)
    }

    /// The accepted hashes with a nonce at or above `from`, within the window, lowest nonce first.
    pub fn from_nonce(&self, from: u64, now_ms: u64) -> Vec<(u64, TxHash)> {
        self.by_nonce
            .range(from..)
            .filter(|(_, hash)| self.get(hash, now_ms).is_some())
            .map(|(nonce, hash)| (*nonce, *hash))
            .collect()
    }

    /// The highest accepted nonce + 1 within the window (`None` when nothing is accepted).
    pub fn next_after(&self, now_ms: u64) -> Option<u64> {
        self.by_nonce
            .iter()
            .rev()
            .find(|(_, hash)| self.get(hash, now_ms).is_some())
            .map(|(nonce, _)| nonce + 1)
    }

    /// The `count` most recently accepted transactions within the window, newest first.
    pub fn recent(&self, count: usize, now_ms: u64) -> Vec<(TxHash, AcceptedTx)> {
        self.order
            .iter()
            .rev()
            .filter_map(|(at, hash)| {
                let tx = self.by_hash.get(hash)?;
                (tx.at_ms == *at && self.fresh(tx, now_ms)).then_some((*hash, *tx))
            })
            .take(count)
            .collect()
    }

    /// How many accepted hashes are remembered (fresh or not yet pruned).
    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }

    /// Records that the upstream took `hash` with `nonce` at `at_ms` (another hash with the same
    /// nonce, replaced by it, is forgotten), then prunes at `at_ms`. Returns the hashes that left.
    pub fn record(&mut self, hash: TxHash, nonce: u64, at_ms: u64, vouched: bool) -> Vec<TxHash> {
        let mut gone = Vec::new();
        if let Some(previous) = self.by_nonce.insert(nonce, hash) {
            if previous != hash {
                self.by_hash.remove(&previous);
                gone.push(previous);
            }
        }
        let tx = AcceptedTx {
            nonce,
            at_ms,
            vouched,
        };
        if let Some(old) = self.by_hash.insert(hash, tx) {
            if old.nonce != nonce && self.by_nonce.get(&old.nonce) == Some(&hash) {
                // The same hash cannot have two nonces; keep the index honest anyway.
                self.by_nonce.remove(&old.nonce);
            }
        }
        self.order.push_back((at_ms, hash));
        gone.extend(self.prune(at_ms));
        gone
    }

    /// Marks `hash` as held by the upstream (it answered it by hash). False when it is not here.
    pub fn vouch(&mut self, hash: &TxHash) -> bool {
        self.by_hash
            .get_mut(hash)
            .map(|tx| tx.vouched = true)
            .is_some()
    }

    /// Forgets `hash` (the upstream no longer has it, or its chain is gone). False when it was
    /// not here.
    pub fn forget(&mut self, hash: &TxHash) -> bool {
        let Some(tx) = self.by_hash.remove(hash) else {
            return false;
        };
        if self.by_nonce.get(&tx.nonce) == Some(hash) {
            self.by_nonce.remove(&tx.nonce);
        }
        true
    }

    /// Forgets everything; returns the hashes that left.
    pub fn clear(&mut self) -> Vec<TxHash> {
        self.by_nonce.clear();
        self.order.clear();
        self.by_hash.drain().map(|(hash, _)| hash).collect()
    }

    /// Forgets accepted hashes older than the window at `now_ms`, and the oldest beyond
    /// [`MAX_ACCEPTED`]. Returns the hashes that left.
    pub fn prune(&mut self, now_ms: u64) -> Vec<TxHash> {
        let mut gone = Vec::new();
        while let Some(&(at, hash)) = self.order.front() {
            let current = self.by_hash.get(&hash).is_some_and(|tx| tx.at_ms == at);
            if current
                && self.by_hash.len() <= MAX_ACCEPTED
                && now_ms < at.saturating_add(self.ttl_ms)
            {
                break;
            }
            self.order.pop_front();
            if current && self.forget(&hash) {
                gone.push(hash);
            }
        }
        gone
    }

    /// When the oldest accepted hash leaves the window (Unix ms), if any is remembered.
    pub fn next_expiry_ms(&self) -> Option<u64> {
        self.order
            .iter()
            .find(|(at, hash)| self.by_hash.get(hash).is_some_and(|tx| tx.at_ms == *at))
            .map(|(at, _)| at.saturating_add(self.ttl_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(n: u8) -> TxHash {
        [n; 32]
    }

    #[test]
    fn accepted_within_the_window_only() {
        let mut a = Accepted::new(1_000);
        assert!(a.record(h(1), 5, 100, true).is_empty());
        assert_eq!(
            a.get(&h(1), 1_099),
            Some(AcceptedTx {
                nonce: 5,
                at_ms: 100,
                vouched: true
            })
        );
        assert_eq!(a.get(&h(1), 1_100), None);
        assert_eq!(a.with_nonce(5, 500), Some(h(1)));
        assert_eq!(a.next_after(500), Some(6));
        assert_eq!(a.next_after(1_100), None);
        assert_eq!(a.next_expiry_ms(), Some(1_100));
        assert_eq!(a.prune(1_100), vec![h(1)]);
        assert!(a.is_empty());
        assert_eq!(a.next_expiry_ms(), None);
    }

    #[test]
    fn a_replacement_takes_the_nonce() {
        let mut a = Accepted::new(10_000);
        a.record(h(1), 5, 0, true);
        a.record(h(2), 6, 1, true);
        assert_eq!(a.record(h(3), 5, 2, true), vec![h(1)]);
        assert_eq!(a.with_nonce(5, 3), Some(h(3)));
        assert_eq!(a.get(&h(1), 3), None);
        assert_eq!(a.next_after(3), Some(7));
        assert_eq!(a.from_nonce(6, 3), vec![(6, h(2))]);
        let recent: Vec<TxHash> = a.recent(10, 3).into_iter().map(|(hash, _)| hash).collect();
        assert_eq!(recent, vec![h(3), h(2)]);
        // The replaced hash's stale order entry is skipped when it reaches the front.
        assert_eq!(a.prune(20_000), vec![h(2), h(3)]);
    }

    #[test]
    fn vouch_forget_and_clear() {
        let mut a = Accepted::new(10_000);
        a.record(h(1), 1, 0, false);
        a.record(h(2), 2, 0, false);
        assert!(!a.get(&h(1), 1).unwrap().vouched);
        assert!(a.vouch(&h(1)));
        assert!(a.get(&h(1), 1).unwrap().vouched);
        assert!(!a.vouch(&h(9)));
        assert!(a.forget(&h(2)));
        assert!(!a.forget(&h(2)));
        assert_eq!(a.with_nonce(2, 1), None);
        assert_eq!(a.next_after(1), Some(2));
        assert_eq!(a.clear(), vec![h(1)]);
        assert_eq!(a.next_after(1), None);
    }

    #[test]
    fn bounded_oldest_first() {
        let mut a = Accepted::new(u64::MAX);
        let mut gone = Vec::new();
        for n in 0..(MAX_ACCEPTED as u64 + 3) {
            let mut hash = [0u8; 32];
            hash[..8].copy_from_slice(&n.to_be_bytes());
            gone.extend(a.record(hash, n, n, true));
        }
        assert_eq!(a.len(), MAX_ACCEPTED);
        assert_eq!(gone.len(), 3);
        assert_eq!(gone[0][7], 0);
        assert_eq!(a.next_after(0), Some(MAX_ACCEPTED as u64 + 3));
    }
}
