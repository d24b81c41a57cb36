//! The identifiers of the sender's machine, each a named type (as reth's
//! `transaction-pool/src/identifier.rs` names its `SenderId` and `TransactionId`): a client's
//! [`Ticket`], a [`QueuedTxId`] in the queue, a [`LookupId`], a holding's [`SessionKey`].

use std::fmt;
use uuid::Uuid;

/// One client's wait for one answer: a copy of a transaction, or a pending-count question. The
/// object numbers them; the machine answers each exactly once (`Action::Answer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket(pub u64);

/// One upstream lookup the machine asked for (`Action::Lookup`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LookupId(pub u64);

/// Identifies one holding of a sender's lock (a UUID v4): only the holding it names can release
/// the lock; an answer that names another holding is late and answers nobody.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessionKey(pub Uuid);

impl SessionKey {
    /// A fresh random (v4) session key.
    pub fn new() -> Self {
        SessionKey(Uuid::new_v4())
    }
}

impl Default for SessionKey {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

impl fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A transaction in the queue ([`crate::ordering::queue::QueuedTx`]), numbered in arrival order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueuedTxId(pub u64);
