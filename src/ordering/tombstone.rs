//! A cancel's tombstone: what a sender's object keeps of a transaction its private route
//! cancelled (`eth_cancelPrivateTransaction` answered `true`, the route's status `CANCELLED`, or
//! a cancel by the route's own rule), so that the promise of `docs/private-sends.md`, "final:
//! never sent again, anywhere", holds past `IDEMPOTENCY_TTL_S` and past a restart of the object (every deploy
//! restarts every object; wallets such as MetaMask rebroadcast what they still see pending).
//!
//! A tombstone is the hash and its nonce, kept in memory ([`Tombstones`]) and in its row of the
//! sender's storage (schema [`crate::ordering::store::TOMBSTONE_SCHEMA`]: the row's bytes gone,
//! its method `cancelled`), until the sender's mined count passes its nonce: from then on no
//! copy of it can ever be included (its nonce is used), and a copy is refused as any stale
//! nonce is. A copy that arrives before then is refused with the cancelled answer
//! ([`crate::ordering::sender::Refusal::Cancelled`]). An idle object whose only rows are
//! tombstones keeps its storage and sets no alarm: it hibernates, and the next event that
//! learns the mined count (a send, a pending count) clears what it passed.
//!
//! Bounded: at most [`MAX_TOMBSTONES`] per sender (each needs a route's `true` or `CANCELLED`);
//! past it the lowest nonce's leaves first (the one most likely passed already).

use crate::transaction::TxHash;
use std::collections::BTreeSet;

/// The most tombstones one sender's object keeps: as many as it tracks
/// ([`crate::ordering::accepted::MAX_ACCEPTED`]).
pub const MAX_TOMBSTONES: usize = crate::ordering::accepted::MAX_ACCEPTED;

/// One cancelled transaction: its hash and nonce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tombstone {
    /// Its nonce (ordered first: the lowest nonce's tombstone passes first).
    pub nonce: u64,
    /// The transaction hash.
    pub hash: TxHash,
}

/// One sender's tombstones, by nonce. See the module documentation.
#[derive(Debug, Default)]
pub struct Tombstones {
    by_nonce: BTreeSet<Tombstone>,
}

impl Tombstones {
    /// Keeps `tombstone`; returns the one that left for [`MAX_TOMBSTONES`], if any, and `None`
    /// when it was kept already.
    pub fn bury(&mut self, tombstone: Tombstone) -> Option<Tombstone> {
        if !self.by_nonce.insert(tombstone) || self.by_nonce.len() <= MAX_TOMBSTONES {
            return None;
        }
        self.by_nonce.pop_first()
    }

    /// The nonce of `hash`'s tombstone, if it has one.
    pub fn nonce_of(&self, hash: &TxHash) -> Option<u64> {
        self.by_nonce
            .iter()
            .find(|t| t.hash == *hash)
            .map(|t| t.nonce)
    }

    /// Whether `hash` has a tombstone.
    pub fn contains(&self, hash: &TxHash) -> bool {
        self.nonce_of(hash).is_some()
    }

    /// Takes out the tombstones whose nonce the mined count `mined` passed (below it), lowest
    /// first: no copy of theirs can be included any more.
    pub fn passed(&mut self, mined: u64) -> Vec<Tombstone> {
        let mut passed = Vec::new();
        while self.by_nonce.first().is_some_and(|t| t.nonce < mined) {
            passed.extend(self.by_nonce.pop_first());
        }
        passed
    }

    /// Forgets every one (the stored state belonged to another chain); returns how many left.
    pub fn clear(&mut self) -> usize {
        let n = self.by_nonce.len();
        self.by_nonce.clear();
        n
    }

    /// How many are kept.
    pub fn len(&self) -> usize {
        self.by_nonce.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.by_nonce.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stone(nonce: u64, byte: u8) -> Tombstone {
        Tombstone {
            nonce,
            hash: [byte; 32],
        }
    }

    #[test]
    fn kept_until_the_mined_count_passes_its_nonce() {
        let mut t = Tombstones::default();
        assert_eq!(t.bury(stone(5, 1)), None);
        assert_eq!(
            t.bury(stone(5, 2)),
            None,
            "two cancels at one nonce: both kept"
        );
        assert_eq!(t.bury(stone(7, 3)), None);
        assert!(t.contains(&[1; 32]));
        assert_eq!(t.nonce_of(&[3; 32]), Some(7));
        assert!(
            t.passed(5).is_empty(),
            "mined count 5: nonce 5 is not used yet"
        );
        assert_eq!(t.passed(6), vec![stone(5, 1), stone(5, 2)]);
        assert!(!t.contains(&[1; 32]));
        assert_eq!(t.len(), 1);
        assert_eq!(t.clear(), 1);
        assert!(t.is_empty());
    }

    #[test]
    fn bounded_the_lowest_nonce_leaving_first() {
        let mut t = Tombstones::default();
        for n in 0..MAX_TOMBSTONES as u64 {
            assert_eq!(t.bury(stone(n + 10, (n % 251) as u8)), None);
        }
        assert_eq!(t.bury(stone(10, 0)), None, "kept already: nothing leaves");
        assert_eq!(t.bury(stone(5_000, 9)), Some(stone(10, 0)));
        assert_eq!(t.len(), MAX_TOMBSTONES);
    }
}
