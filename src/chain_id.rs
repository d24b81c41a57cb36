//! The chain id learned from the upstream when `CHAIN_ID` is unset: looked up once per Worker
//! isolate, however many requests arrive during the lookup.
//!
//! Every transaction is checked against the chain id before it goes to its sender's Durable
//! Object, so the lookup is async work before the lock. Were each early request to ask the
//! upstream itself, a burst would resume in the order the upstream's answers came back, and a
//! sender's transactions would reach the object shuffled by as much as those answers' spread
//! (past `NONCE_GAP_WAIT_MS` when the upstream is slow). So one request looks the chain id up
//! ([`ChainIdCache::claim`] hands it the [`Lookup`]) and the others hold a [`Wait`] that they
//! check every few ms ([`Wait::result`]) until the lookup is done; they then resume within one
//! check period of each other, a shuffle the object's nonce-ordered queue absorbs.
//!
//! The waiters check on their own timers rather than being woken by the looking-up request: the
//! Workers runtime cancels a request that waits on nothing of its own as hung, and does not let a
//! request do I/O on behalf of another.
//! A failed lookup is every waiter's error; the next request tries again.

use crate::jsonrpc::{RpcError, INTERNAL_ERROR};
use std::cell::RefCell;
use std::rc::Rc;

/// How often a request waiting for the lookup checks it, in ms.
pub const CHECK_EVERY_MS: u64 = 5;

type Outcome = Rc<RefCell<Option<Result<u64, RpcError>>>>;

#[derive(Default)]
enum State {
    #[default]
    Unknown,
    Learning(Outcome),
    Known(u64),
}

/// The chain id as one Worker isolate knows it. See the module documentation.
#[derive(Default)]
pub struct ChainIdCache {
    state: RefCell<State>,
}

/// What [`ChainIdCache::claim`] says a request should do.
pub enum Claim {
    /// The chain id is known.
    Known(u64),
    /// This request looks it up and reports with [`Lookup::finish`].
    Lookup(Lookup),
    /// Another request is looking it up: check this every [`CHECK_EVERY_MS`].
    Wait(Wait),
}

impl ChainIdCache {
    /// An empty cache: nothing learned, no lookup under way.
    pub fn new() -> Self {
        Self::default()
    }

    /// The learned chain id, if any.
    pub fn known(&self) -> Option<u64> {
        match *self.state.borrow() {
            State::Known(id) => Some(id),
            _ => None,
        }
    }

    /// The chain id if known; else the lookup, for the first request to ask; else a wait for the
    /// lookup under way.
    pub fn claim(self: &Rc<Self>) -> Claim {
        let mut state = self.state.borrow_mut();
        match &*state {
            State::Known(id) => Claim::Known(*id),
            State::Learning(outcome) => Claim::Wait(Wait {
                outcome: outcome.clone(),
            }),
            State::Unknown => {
                let outcome = Outcome::default();
                *state = State::Learning(outcome.clone());
                Claim::Lookup(Lookup {
                    cache: self.clone(),
                    outcome,
                    finished: false,
                })
            }
        }
    }
}

/// The one lookup under way. Dropping it unfinished (its request was cancelled) counts as a
/// failed lookup, so its waiters are never left waiting.
pub struct Lookup {
    cache: Rc<ChainIdCache>,
    outcome: Outcome,
    finished: bool,
}

impl Lookup {
    /// Reports the lookup's `result`: the chain id is then known, or on an error unknown again so
    /// that the next request retries; the waiters see the result at their next check.
    pub fn finish(mut self, result: Result<u64, RpcError>) {
        self.settle(result);
    }

    fn settle(&mut self, result: Result<u64, RpcError>) {
        if self.finished {
            return;
        }
        self.finished = true;
        *self.cache.state.borrow_mut() = match result {
            Ok(id) => State::Known(id),
            Err(_) => State::Unknown,
        };
        *self.outcome.borrow_mut() = Some(result);
    }
}

impl Drop for Lookup {
    fn drop(&mut self) {
        self.settle(Err(RpcError::new(
            INTERNAL_ERROR,
            "the chain id lookup was abandoned",
        )));
    }
}

/// A request's wait for the lookup under way.
pub struct Wait {
    outcome: Outcome,
}

impl Wait {
    /// The lookup's result (the chain id, or its error) once it is done; `None` before.
    pub fn result(&self) -> Option<Result<u64, RpcError>> {
        self.outcome.borrow().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(claim: Claim) -> Wait {
        match claim {
            Claim::Wait(w) => w,
            _ => panic!("expected to wait"),
        }
    }

    fn lookup(claim: Claim) -> Lookup {
        match claim {
            Claim::Lookup(l) => l,
            _ => panic!("expected the lookup"),
        }
    }

    #[test]
    fn one_lookup_however_many_wait() {
        let cache = Rc::new(ChainIdCache::new());
        let first = lookup(cache.claim());
        let waits: Vec<Wait> = (0..3).map(|_| wait(cache.claim())).collect();
        assert!(waits.iter().all(|w| w.result().is_none()));
        assert_eq!(cache.known(), None);
        first.finish(Ok(31337));
        assert!(waits.iter().all(|w| w.result() == Some(Ok(31337))));
        assert_eq!(cache.known(), Some(31337));
        assert!(matches!(cache.claim(), Claim::Known(31337)));
    }

    #[test]
    fn a_failed_lookup_fails_its_waiters_and_the_next_request_retries() {
        let cache = Rc::new(ChainIdCache::new());
        let first = lookup(cache.claim());
        let a = wait(cache.claim());
        let error = RpcError::new(-32002, "upstream unreachable");
        first.finish(Err(error.clone()));
        assert_eq!(a.result(), Some(Err(error)));
        assert_eq!(cache.known(), None);
        lookup(cache.claim()).finish(Ok(1));
        assert_eq!(cache.known(), Some(1));
    }

    #[test]
    fn an_abandoned_lookup_does_not_strand_its_waiters() {
        let cache = Rc::new(ChainIdCache::new());
        let first = lookup(cache.claim());
        let a = wait(cache.claim());
        drop(first);
        assert!(matches!(a.result(), Some(Err(_))));
        assert!(matches!(cache.claim(), Claim::Lookup(_)));
    }
}
