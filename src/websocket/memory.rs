//! What WebSocket connections may keep in the Worker isolate's memory (128 MB, shared by every
//! request the isolate serves): each connection has a byte budget of its own
//! (`WS_MAX_CONNECTION_BYTES`), and all of one isolate's connections share one more
//! (`WS_MAX_ISOLATE_BYTES`). What counts: the stored subscription params, the de-duplication
//! state of `logs` subscriptions, the notifications held while a gap is filled, and the bodies of
//! the messages being answered. A request for more than either budget allows is refused (an
//! `eth_subscribe` with -32005, a message with -32005); state that is only an optimisation (the
//! logs remembered for de-duplication) is kept within what is left.

use std::cell::Cell;
use std::rc::Rc;

/// A number of bytes that may be in use at once, and how many are.
#[derive(Debug, Default)]
pub struct Budget {
    limit: usize,
    used: Cell<usize>,
}

impl Budget {
    /// A budget of `limit` bytes, none used.
    pub fn new(limit: usize) -> Self {
        Budget {
            limit,
            used: Cell::new(0),
        }
    }

    /// The bytes in use.
    pub fn used(&self) -> usize {
        self.used.get()
    }

    /// The limit, bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    fn fits(&self, bytes: usize) -> bool {
        self.used.get().saturating_add(bytes) <= self.limit
    }

    fn add(&self, bytes: usize) {
        self.used.set(self.used.get().saturating_add(bytes));
    }

    fn sub(&self, bytes: usize) {
        self.used.set(self.used.get().saturating_sub(bytes));
    }
}

/// One connection's share: its own budget and the isolate's, taken from and given back to
/// together. Whatever the connection still holds goes back to the isolate when it is dropped.
#[derive(Debug)]
pub struct Memory {
    own: Budget,
    isolate: Rc<Budget>,
}

impl Memory {
    /// A connection's memory: `limit` bytes of its own, within `isolate`.
    pub fn new(limit: usize, isolate: Rc<Budget>) -> Self {
        Memory {
            own: Budget::new(limit),
            isolate,
        }
    }

    /// Takes `bytes` when both budgets have room; false (nothing taken) otherwise.
    pub fn take(&self, bytes: usize) -> bool {
        if !(self.own.fits(bytes) && self.isolate.fits(bytes)) {
            return false;
        }
        self.own.add(bytes);
        self.isolate.add(bytes);
        true
    }

    /// Gives `bytes` back (at most what was taken).
    pub fn give(&self, bytes: usize) {
        let bytes = bytes.min(self.own.used());
        self.own.sub(bytes);
        self.isolate.sub(bytes);
    }

    /// The connection's bytes in use.
    pub fn used(&self) -> usize {
        self.own.used()
    }

    /// The connection's limit, bytes.
    pub fn limit(&self) -> usize {
        self.own.limit()
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        self.isolate.sub(self.own.used());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_budgets_bound_and_a_closed_connection_gives_all_back() {
        let isolate = Rc::new(Budget::new(100));
        let a = Memory::new(60, isolate.clone());
        let b = Memory::new(60, isolate.clone());
        assert!(a.take(60));
        assert!(!a.take(1), "the connection's own limit");
        assert!(b.take(40));
        assert!(!b.take(1), "the isolate's limit, though b has room");
        assert_eq!(isolate.used(), 100);
        a.give(10);
        assert!(b.take(10));
        a.give(1_000);
        assert_eq!((a.used(), isolate.used()), (0, 50), "never more than taken");
        drop(b);
        assert_eq!(isolate.used(), 0);
    }
}
