//! Idempotency by transaction hash, per sender: the transactions queued or in flight (whose copies
//! wait for the first one's answer instead of reaching the upstream again), and the ones accepted
//! within the idempotency window (answered with their hash at once).
//!
//! The accepted set is bounded ([`MAX_ACCEPTED`] per sender) and pruned by age (the window,
//! `IDEMPOTENCY_TTL_S`). The Durable Object keeps it in its SQLite storage too, so a restarted
//! object still knows it: every change here reports the hashes that left the set, for the object
//! to delete.

use crate::jsonrpc::Answer;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// A transaction hash (keccak-256 of the EIP-2718 envelope).
pub type TxHash = [u8; 32];

/// The most accepted hashes one sender's object remembers; the oldest leave first.
pub const MAX_ACCEPTED: usize = 1024;

/// A transaction the upstream took: its nonce and when, Unix ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceptedTx {
    /// The transaction's nonce.
    pub nonce: u64,
    /// When it was accepted, Unix ms.
    pub at_ms: u64,
}

#[derive(Default)]
struct Slot {
    answer: Option<Answer>,
    wakers: Vec<Waker>,
}

/// The answer to one copy of a transaction that is queued or in flight: resolves when the first
/// copy has its final answer.
pub struct OutcomeWait {
    slot: Rc<RefCell<Slot>>,
}

impl Future for OutcomeWait {
    type Output = Answer;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Answer> {
        let mut slot = self.slot.borrow_mut();
        match &slot.answer {
            Some(answer) => Poll::Ready(answer.clone()),
            None => {
                slot.wakers.push(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

struct InFlight {
    slot: Rc<RefCell<Slot>>,
    copies: u32,
}

/// One sender's transactions by hash. See the module documentation.
pub struct Seen {
    in_flight: HashMap<TxHash, InFlight>,
    accepted: HashMap<TxHash, AcceptedTx>,
    by_nonce: BTreeMap<u64, TxHash>,
    /// Accepted hashes in the order they were accepted (entries of replaced hashes linger until
    /// they reach the front).
    order: VecDeque<(u64, TxHash)>,
    ttl_ms: u64,
}

impl Seen {
    /// Empty, with an idempotency window of `ttl_ms`.
    pub fn new(ttl_ms: u64) -> Self {
        Seen {
            in_flight: HashMap::new(),
            accepted: HashMap::new(),
            by_nonce: BTreeMap::new(),
            order: VecDeque::new(),
            ttl_ms,
        }
    }

    fn fresh(&self, tx: &AcceptedTx, now_ms: u64) -> bool {
        now_ms < tx.at_ms.saturating_add(self.ttl_ms)
    }

    /// The accepted transaction with this hash, if accepted within the window at `now_ms`.
    pub fn accepted(&self, hash: &TxHash, now_ms: u64) -> Option<AcceptedTx> {
        self.accepted
            .get(hash)
            .copied()
            .filter(|tx| self.fresh(tx, now_ms))
    }

    /// The hash accepted with `nonce` within the window, if any.
    pub fn accepted_with_nonce(&self, nonce: u64, now_ms: u64) -> Option<TxHash> {
        let hash = self.by_nonce.get(&nonce)?;
        self.accepted(hash, now_ms).map(|_| *hash)
    }

    /// The next nonce after what was accepted within the window: the highest such nonce + 1.
    pub fn next_after_accepted(&self, now_ms: u64) -> Option<u64> {
        self.by_nonce
            .iter()
            .rev()
            .find(|(_, hash)| self.accepted(hash, now_ms).is_some())
            .map(|(nonce, _)| nonce + 1)
    }

    /// The `count` most recently accepted transactions within the window, newest first.
    pub fn recent(&self, count: usize, now_ms: u64) -> Vec<(TxHash, AcceptedTx)> {
        self.order
            .iter()
            .rev()
            .filter_map(|(at, hash)| {
                let tx = self.accepted.get(hash)?;
                (tx.at_ms == *at && self.fresh(tx, now_ms)).then_some((*hash, *tx))
            })
            .take(count)
            .collect()
    }

    /// How many accepted hashes are remembered (fresh or not yet pruned).
    pub fn accepted_len(&self) -> usize {
        self.accepted.len()
    }

    /// Whether a copy with this hash is queued or in flight.
    pub fn in_flight(&self, hash: &TxHash) -> bool {
        self.in_flight.contains_key(hash)
    }

    /// How many hashes are queued or in flight.
    pub fn in_flight_len(&self) -> usize {
        self.in_flight.len()
    }

    /// Registers the first copy of `hash`, now queued.
    pub fn start(&mut self, hash: TxHash) {
        self.in_flight.entry(hash).or_insert_with(|| InFlight {
            slot: Rc::default(),
            copies: 0,
        });
    }

    /// A later copy of a queued or in-flight `hash`: its wait for the first copy's answer.
    /// `None` when no copy is queued or in flight.
    pub fn join(&mut self, hash: &TxHash) -> Option<OutcomeWait> {
        let entry = self.in_flight.get_mut(hash)?;
        entry.copies += 1;
        Some(OutcomeWait {
            slot: entry.slot.clone(),
        })
    }

    /// The final `answer` for `hash`: every waiting copy gets it, and the hash is no longer in
    /// flight. Returns how many copies were waiting.
    pub fn settle(&mut self, hash: &TxHash, answer: &Answer) -> u32 {
        let Some(entry) = self.in_flight.remove(hash) else {
            return 0;
        };
        let mut slot = entry.slot.borrow_mut();
        slot.answer = Some(answer.clone());
        for waker in slot.wakers.drain(..) {
            waker.wake();
        }
        entry.copies
    }

    /// Records that the upstream took `hash` with `nonce` at `now_ms` (another hash with the same
    /// nonce, replaced by it, is forgotten), then prunes. Returns the hashes that left the set.
    pub fn record_accepted(&mut self, hash: TxHash, nonce: u64, now_ms: u64) -> Vec<TxHash> {
        let mut gone = Vec::new();
        if let Some(previous) = self.by_nonce.insert(nonce, hash) {
            if previous != hash {
                self.accepted.remove(&previous);
                gone.push(previous);
            }
        }
        if let Some(old) = self.accepted.insert(
            hash,
            AcceptedTx {
                nonce,
                at_ms: now_ms,
            },
        ) {
            if old.nonce != nonce {
                // The same hash cannot have two nonces; keep the index honest anyway.
                self.by_nonce.remove(&old.nonce);
            }
        }
        self.order.push_back((now_ms, hash));
        gone.extend(self.prune(now_ms));
        gone
    }

    /// Forgets accepted hashes older than the window at `now_ms`, and the oldest beyond
    /// [`MAX_ACCEPTED`]. Returns the hashes that left the set.
    pub fn prune(&mut self, now_ms: u64) -> Vec<TxHash> {
        let mut gone = Vec::new();
        while let Some(&(at, hash)) = self.order.front() {
            let current = self.accepted.get(&hash).is_some_and(|tx| tx.at_ms == at);
            if current
                && self.accepted.len() <= MAX_ACCEPTED
                && now_ms < at.saturating_add(self.ttl_ms)
            {
                break;
            }
            self.order.pop_front();
            if current {
                if let Some(tx) = self.accepted.remove(&hash) {
                    if self.by_nonce.get(&tx.nonce) == Some(&hash) {
                        self.by_nonce.remove(&tx.nonce);
                    }
                }
                gone.push(hash);
            }
        }
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(n: u8) -> TxHash {
        [n; 32]
    }

    fn poll(wait: &mut OutcomeWait) -> Option<Answer> {
        match Pin::new(wait).poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(a) => Some(a),
            Poll::Pending => None,
        }
    }

    #[test]
    fn copies_wait_for_the_first_ones_answer() {
        let mut seen = Seen::new(1_000);
        assert!(seen.join(&h(1)).is_none());
        seen.start(h(1));
        let mut a = seen.join(&h(1)).unwrap();
        let mut b = seen.join(&h(1)).unwrap();
        assert!(poll(&mut a).is_none());
        let answer = Answer::hash(&h(1));
        assert_eq!(seen.settle(&h(1), &answer), 2);
        assert_eq!(poll(&mut a), Some(answer.clone()));
        assert_eq!(poll(&mut b), Some(answer));
        assert!(!seen.in_flight(&h(1)));
        assert_eq!(seen.settle(&h(1), &Answer::hash(&h(1))), 0);
    }

    #[test]
    fn accepted_within_the_window_only() {
        let mut seen = Seen::new(1_000);
        assert!(seen.record_accepted(h(1), 5, 100).is_empty());
        assert_eq!(
            seen.accepted(&h(1), 1_099),
            Some(AcceptedTx {
                nonce: 5,
                at_ms: 100
            })
        );
        assert_eq!(seen.accepted(&h(1), 1_100), None);
        assert_eq!(seen.accepted_with_nonce(5, 500), Some(h(1)));
        assert_eq!(seen.next_after_accepted(500), Some(6));
        assert_eq!(seen.next_after_accepted(1_100), None);
        assert_eq!(seen.prune(1_100), vec![h(1)]);
        assert_eq!(seen.accepted_len(), 0);
    }

    #[test]
    fn a_replacement_takes_the_nonce() {
        let mut seen = Seen::new(10_000);
        seen.record_accepted(h(1), 5, 0);
        seen.record_accepted(h(2), 6, 1);
        assert_eq!(seen.record_accepted(h(3), 5, 2), vec![h(1)]);
        assert_eq!(seen.accepted_with_nonce(5, 3), Some(h(3)));
        assert_eq!(seen.accepted(&h(1), 3), None);
        assert_eq!(seen.next_after_accepted(3), Some(7));
        let recent: Vec<TxHash> = seen
            .recent(10, 3)
            .into_iter()
            .map(|(hash, _)| hash)
            .collect();
        assert_eq!(recent, vec![h(3), h(2)]);
        // The replaced hash's stale order entry is skipped when it reaches the front.
        assert_eq!(seen.prune(20_000), vec![h(2), h(3)]);
    }

    #[test]
    fn bounded_oldest_first() {
        let mut seen = Seen::new(u64::MAX);
        let mut gone = Vec::new();
        for n in 0..(MAX_ACCEPTED as u64 + 3) {
            let mut hash = [0u8; 32];
            hash[..8].copy_from_slice(&n.to_be_bytes());
            gone.extend(seen.record_accepted(hash, n, n));
        }
        assert_eq!(seen.accepted_len(), MAX_ACCEPTED);
        assert_eq!(gone.len(), 3);
        assert_eq!(gone[0][7], 0);
        assert_eq!(seen.next_after_accepted(0), Some(MAX_ACCEPTED as u64 + 3));
    }
}
