//! One sender's queue: the transactions its Durable Object holds (waiting for the lock, asked by
//! hash before they are admitted, or holding it), each with every client that waits for its
//! answer, in the order the lock is granted.
//!
//! Invariants, kept here and nowhere else (each checked by the tests below):
//! - each hash is in the queue at most once: copies of a transaction join its entry's tickets;
//! - the waiting order holds exactly the entries whose stage is [`Stage::Waiting`], by
//!   [`Place`]: the lowest nonce first, the earliest arrival among equal nonces (entry ids grow
//!   with arrivals);
//! - an entry leaves with all its tickets ([`Queue::remove`]), and a stage changes only through
//!   [`Queue::set_stage`].

pub use crate::ordering::identifier::QueuedTxId;
use crate::ordering::identifier::{LookupId, Ticket};
use crate::ordering::tx::SignedTx;
use crate::transaction::TxHash;
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

/// A waiting entry's place in line: its nonce, then its arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Place {
    /// The transaction's nonce.
    pub nonce: u64,
    /// The entry.
    pub entry: QueuedTxId,
}

/// Where a transaction is in its sender's object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Being admitted: asked by hash (lookup `LookupId`) before it is admitted or refused.
    Admitting(LookupId, Check),
    /// Waiting for the lock.
    Waiting,
    /// Granted the lock: it holds it.
    Granted,
}

/// Why an arriving transaction is asked by hash first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Its nonce is below the mined count: known, it gets its hash; unknown, it is stale.
    Stale,
    /// Its hash was accepted but the upstream has not confirmed it in this object's life.
    Accepted,
    /// Another accepted transaction holds its nonce and `REPLACEMENT_POLICY` is `reject`: the
    /// mined count is asked with its hash, because a nonce already mined is too low, not a
    /// replacement (the holder may have been mined since the count was learned).
    Replacement {
        /// The hash of the transaction that holds the nonce.
        holder: TxHash,
    },
}

/// A transaction in the sender's queue, whatever its [`Stage`], with every client waiting for it.
/// (Not geth's "queued", a transaction held back by a nonce gap: here every transaction the
/// object holds is queued.)
#[derive(Debug, Clone)]
pub struct QueuedTx {
    /// The transaction.
    pub tx: Rc<SignedTx>,
    /// When it arrived (or was read back for a resend), Unix ms.
    pub arrived_ms: u64,
    /// Each client waiting for its answer (none for the relay's own resend).
    pub tickets: Vec<Ticket>,
    stage: Stage,
    /// Its bytes are in storage (it was sent before, or read back): nothing to write before its
    /// send, and refused unsent it stays the relay's to follow.
    pub stored: bool,
    /// The `X-Request-Id` of the client request that brought it first.
    pub request_id: Option<Rc<str>>,
    /// It was sent ahead in a send window and refused for a gap below it: it is sent again only
    /// once the nonces below it are answered.
    pub refused_ahead: bool,
}

impl QueuedTx {
    /// A transaction that just arrived, waiting.
    pub fn new(tx: Rc<SignedTx>, arrived_ms: u64, request_id: Option<Rc<str>>) -> Self {
        QueuedTx {
            tx,
            arrived_ms,
            tickets: Vec::new(),
            stage: Stage::Waiting,
            stored: false,
            request_id,
            refused_ahead: false,
        }
    }

    /// Its stage.
    pub fn stage(&self) -> Stage {
        self.stage
    }

    /// Its hash.
    pub fn hash(&self) -> TxHash {
        self.tx.hash
    }

    /// Its nonce.
    pub fn nonce(&self) -> u64 {
        self.tx.nonce
    }

    /// Whether a client waits for it (it is not only the relay's own resend).
    pub fn has_clients(&self) -> bool {
        !self.tickets.is_empty()
    }
}

/// One sender's queue. See the module documentation.
#[derive(Debug, Default)]
pub struct Queue {
    entries: HashMap<QueuedTxId, QueuedTx>,
    by_hash: HashMap<TxHash, QueuedTxId>,
    waiting: BTreeSet<Place>,
    ids: u64,
}

impl Queue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `entry` (its hash not in the queue: the caller joins copies to the entry of
    /// [`Queue::find`]); returns its id.
    pub fn insert(&mut self, entry: QueuedTx) -> QueuedTxId {
        self.ids += 1;
        let id = QueuedTxId(self.ids);
        debug_assert!(
            !self.by_hash.contains_key(&entry.hash()),
            "one entry a hash"
        );
        self.by_hash.insert(entry.hash(), id);
        if entry.stage == Stage::Waiting {
            self.waiting.insert(Place {
                nonce: entry.nonce(),
                entry: id,
            });
        }
        self.entries.insert(id, entry);
        id
    }

    /// The entry of `hash`, when the queue holds it.
    pub fn find(&self, hash: &TxHash) -> Option<QueuedTxId> {
        self.by_hash.get(hash).copied()
    }

    /// Entry `id`.
    pub fn get(&self, id: QueuedTxId) -> Option<&QueuedTx> {
        self.entries.get(&id)
    }

    /// Entry `id`, to change what is not its stage.
    pub fn get_mut(&mut self, id: QueuedTxId) -> Option<&mut QueuedTx> {
        self.entries.get_mut(&id)
    }

    /// Moves entry `id` to `stage`, keeping the waiting order.
    pub fn set_stage(&mut self, id: QueuedTxId, stage: Stage) {
        let Some(entry) = self.entries.get_mut(&id) else {
            return;
        };
        let place = Place {
            nonce: entry.nonce(),
            entry: id,
        };
        if entry.stage == Stage::Waiting {
            self.waiting.remove(&place);
        }
        entry.stage = stage;
        if stage == Stage::Waiting {
            self.waiting.insert(place);
        }
    }

    /// Takes entry `id` out, with its tickets.
    pub fn remove(&mut self, id: QueuedTxId) -> Option<QueuedTx> {
        let entry = self.entries.remove(&id)?;
        self.waiting.remove(&Place {
            nonce: entry.nonce(),
            entry: id,
        });
        if self.by_hash.get(&entry.hash()) == Some(&id) {
            self.by_hash.remove(&entry.hash());
        }
        Some(entry)
    }

    /// The waiting entry the lock goes to next: the lowest nonce, the earliest among equal ones.
    pub fn lowest_waiting(&self) -> Option<Place> {
        self.waiting.first().copied()
    }

    /// The waiting entries in line order.
    pub fn waiting(&self) -> impl DoubleEndedIterator<Item = Place> + '_ {
        self.waiting.iter().copied()
    }

    /// How many entries wait for the lock.
    pub fn waiting_len(&self) -> usize {
        self.waiting.len()
    }

    /// Every entry, in no order.
    pub fn iter(&self) -> impl Iterator<Item = (QueuedTxId, &QueuedTx)> + '_ {
        self.entries.iter().map(|(id, e)| (*id, e))
    }

    /// How many entries there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The raw bytes of every entry's transaction, whatever its stage.
    pub fn bytes(&self) -> u64 {
        self.iter().map(|(_, e)| e.tx.raw.len() as u64).sum()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every invariant of the module documentation; a message naming the first broken one.
    #[cfg(test)]
    pub fn check(&self) -> Result<(), String> {
        for (id, entry) in &self.entries {
            if self.by_hash.get(&entry.hash()) != Some(id) {
                return Err(format!("{id:?} is not its hash's entry"));
            }
            let place = Place {
                nonce: entry.nonce(),
                entry: *id,
            };
            if (entry.stage == Stage::Waiting) != self.waiting.contains(&place) {
                return Err(format!("{id:?} ({:?}) and the waiting order", entry.stage));
            }
        }
        if self.by_hash.len() != self.entries.len() {
            return Err("a hash without its entry".into());
        }
        if self
            .waiting
            .iter()
            .any(|p| !self.entries.contains_key(&p.entry))
        {
            return Err("a place without its entry".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ordering::tx::SendMethod;

    fn entry(nonce: u64, variant: u8) -> QueuedTx {
        let mut hash = [variant; 32];
        hash[..8].copy_from_slice(&nonce.to_be_bytes());
        let tx = SignedTx {
            hash,
            nonce,
            chain_id: Some(1),
            raw: vec![variant],
            method: SendMethod::Plain,
            public_after_blocks: None,
            self_cancel: false,
        };
        QueuedTx::new(Rc::new(tx), 0, None)
    }

    #[test]
    fn the_lock_goes_to_the_lowest_nonce_then_the_earliest_arrival() {
        let mut q = Queue::new();
        let five = q.insert(entry(5, 0));
        let three = q.insert(entry(3, 0));
        let three_again = q.insert(entry(3, 1));
        q.check().unwrap();
        assert_eq!(
            q.waiting().collect::<Vec<_>>(),
            [
                Place {
                    nonce: 3,
                    entry: three
                },
                Place {
                    nonce: 3,
                    entry: three_again
                },
                Place {
                    nonce: 5,
                    entry: five
                },
            ]
        );
        assert_eq!(q.lowest_waiting().map(|p| p.entry), Some(three));
        q.set_stage(three, Stage::Granted);
        assert_eq!(q.lowest_waiting().map(|p| p.entry), Some(three_again));
        assert_eq!(q.waiting_len(), 2);
        q.check().unwrap();
        q.set_stage(three, Stage::Waiting);
        assert_eq!(q.lowest_waiting().map(|p| p.entry), Some(three));
        q.check().unwrap();
    }

    #[test]
    fn a_hash_is_found_once_and_an_entry_leaves_whole() {
        let mut q = Queue::new();
        let e = entry(1, 0);
        let hash = e.hash();
        let id = q.insert(e);
        assert_eq!(q.find(&hash), Some(id));
        q.get_mut(id).unwrap().tickets.push(Ticket(7));
        q.set_stage(id, Stage::Admitting(LookupId(1), Check::Stale));
        assert_eq!(q.lowest_waiting(), None, "checking is not waiting");
        q.check().unwrap();
        let gone = q.remove(id).unwrap();
        assert_eq!(gone.tickets, [Ticket(7)]);
        assert_eq!((q.find(&hash), q.len(), q.waiting_len()), (None, 0, 0));
        q.check().unwrap();
        assert!(q.remove(id).is_none());
        let again = q.insert(entry(1, 0));
        assert!(again > id, "ids grow with arrivals");
    }
}
