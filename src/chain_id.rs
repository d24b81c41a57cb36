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
//! With several upstreams the rotation's chain check of the most preferred one that answers
//! teaches the cache too ([`ChainIdCache::learn`]): one chain id per isolate, whoever learned it.
//!
//! A failed lookup is every waiter's error; the next request tries again. A lookup whose request
//! was cancelled may never finish (nor be dropped), so a waiter gives up after a bound (the
//! caller's upstream timeout and a margin), and the next request starts a new lookup.

use crate::jsonrpc::{self, RpcError, INTERNAL_ERROR, RESOURCE_UNAVAILABLE};
use crate::upstream::{error_metric, CallKind, Platform, UpstreamReply};
use std::cell::RefCell;
use std::rc::Rc;

/// Asks the upstream its chain id (`eth_chainId`, a question of the relay's own), waiting at
/// most `timeout_ms`: the one asker of the Worker's lookup and of a sender's object that must
/// learn its chain before it sends (an `upstream_error` metric when the upstream can't be used).
///
/// # Errors
/// The upstream's error (-32002/-32603) saying the chain id could not be learned, or -32603 when
/// the answer has no valid result.
pub async fn ask(platform: &impl Platform, timeout_ms: u64) -> Result<u64, RpcError> {
    let answer = platform
        .post(REQUEST, CallKind::OwnChainId, timeout_ms)
        .await
        .map_err(|e| {
            platform.emit(&error_metric("eth_chainId", &e));
            RpcError::new(
                e.code(),
                format!("cannot learn the chain id: {}", e.reason()),
            )
        })?;
    of_reply(&answer).ok_or_else(|| {
        RpcError::new(
            INTERNAL_ERROR,
            "cannot learn the chain id: the upstream's eth_chainId answer has no valid result",
        )
    })
}

/// The relay's `eth_chainId` question: [`ask`]'s, and the rotation's chain check and probe of
/// one upstream (`edge/race.rs`).
pub const REQUEST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}"#;

/// The chain id an upstream's answer to [`REQUEST`] gives (its `result`, a hex quantity), if
/// it is one.
pub fn of_reply(reply: &UpstreamReply) -> Option<u64> {
    jsonrpc::result_quantity(&reply.body)
}

/// How often a request waiting for the lookup checks it, in ms.
pub const CHECK_EVERY_MS: u64 = 5;

type Outcome = Rc<RefCell<Option<Result<u64, RpcError>>>>;

#[derive(Default)]
enum State {
    #[default]
    Unknown,
    /// A lookup under way since `since_ms` (Unix ms).
    Learning {
        since_ms: u64,
        outcome: Outcome,
    },
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

    /// The chain id as far as it is known without asking: `configured` (`CHAIN_ID`), else the one
    /// learned. The Worker's sends and the platform's routing both read it here.
    pub fn current(&self, configured: Option<u64>) -> Option<u64> {
        configured.or_else(|| self.known())
    }

    /// Learns the chain id from elsewhere (the rotation's check of its most preferred upstream)
    /// unless one is known: returns the one known afterwards (the first learned wins). A lookup
    /// under way still reports to its waiters.
    pub fn learn(&self, id: u64) -> u64 {
        let mut state = self.state.borrow_mut();
        match *state {
            State::Known(known) => known,
            _ => {
                *state = State::Known(id);
                id
            }
        }
    }

    /// At `now_ms`: the chain id if known; else the lookup, for the first request to ask; else a
    /// wait for the lookup under way.
    pub fn claim(self: &Rc<Self>, now_ms: u64) -> Claim {
        let mut state = self.state.borrow_mut();
        match &*state {
            State::Known(id) => Claim::Known(*id),
            State::Learning { since_ms, outcome } => Claim::Wait(Wait {
                cache: self.clone(),
                outcome: outcome.clone(),
                since_ms: *since_ms,
            }),
            State::Unknown => {
                let outcome = Outcome::default();
                *state = State::Learning {
                    since_ms: now_ms,
                    outcome: outcome.clone(),
                };
                Claim::Lookup(Lookup {
                    cache: self.clone(),
                    outcome,
                    finished: false,
                })
            }
        }
    }

    /// Whether `outcome` is the lookup the cache is waiting for.
    fn is_current(&self, outcome: &Outcome) -> bool {
        matches!(&*self.state.borrow(), State::Learning { outcome: current, .. } if Rc::ptr_eq(current, outcome))
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
    /// that the next request retries; the waiters see the outcome at their next check. Returns
    /// the outcome: the chain id learned first when one was learned meanwhile
    /// ([`ChainIdCache::learn`]).
    pub fn finish(mut self, result: Result<u64, RpcError>) -> Result<u64, RpcError> {
        self.settle(result)
    }

    fn settle(&mut self, result: Result<u64, RpcError>) -> Result<u64, RpcError> {
        if self.finished {
            return result;
        }
        self.finished = true;
        // The first chain id learned stays (the rotation may have checked upstreams by it), and
        // is what the waiters get; a failure only ends the lookup if it is still the current one
        // (its waiters may have given up on it and another may be under way).
        let result = match (result, self.cache.known()) {
            (Ok(_), Some(known)) => Ok(known),
            (Ok(id), None) => {
                *self.cache.state.borrow_mut() = State::Known(id);
                Ok(id)
            }
            (Err(e), _) => {
                if self.cache.is_current(&self.outcome) {
                    *self.cache.state.borrow_mut() = State::Unknown;
                }
                Err(e)
            }
        };
        *self.outcome.borrow_mut() = Some(result.clone());
        result
    }
}

impl Drop for Lookup {
    fn drop(&mut self) {
        let _ = self.settle(Err(RpcError::new(
            INTERNAL_ERROR,
            "the chain id lookup was abandoned",
        )));
    }
}

/// A request's wait for the lookup under way.
pub struct Wait {
    cache: Rc<ChainIdCache>,
    outcome: Outcome,
    since_ms: u64,
}

impl Wait {
    /// At `now_ms`: the lookup's result (the chain id, or its error) once it is done; `None`
    /// before. After `give_up_after_ms` of lookup the waiter gives up with a -32002 error, and the
    /// cache forgets that lookup so that the next request starts another.
    pub fn result(&self, now_ms: u64, give_up_after_ms: u64) -> Option<Result<u64, RpcError>> {
        if let Some(result) = self.outcome.borrow().clone() {
            return Some(result);
        }
        if now_ms.saturating_sub(self.since_ms) < give_up_after_ms {
            return None;
        }
        if self.cache.is_current(&self.outcome) {
            *self.cache.state.borrow_mut() = State::Unknown;
        }
        Some(Err(RpcError::new(
            RESOURCE_UNAVAILABLE,
            format!("cannot learn the chain id: the upstream's eth_chainId lookup did not finish within {give_up_after_ms} ms"),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIVE_UP: u64 = 1_000;

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
        let first = lookup(cache.claim(0));
        let waits: Vec<Wait> = (1..4).map(|t| wait(cache.claim(t))).collect();
        assert!(waits.iter().all(|w| w.result(10, GIVE_UP).is_none()));
        assert_eq!(cache.known(), None);
        assert_eq!(first.finish(Ok(31337)), Ok(31337));
        assert!(waits
            .iter()
            .all(|w| w.result(11, GIVE_UP) == Some(Ok(31337))));
        assert_eq!(cache.known(), Some(31337));
        assert!(matches!(cache.claim(12), Claim::Known(31337)));
    }

    #[test]
    fn the_first_chain_id_learned_stays() {
        let cache = Rc::new(ChainIdCache::new());
        let first = lookup(cache.claim(0));
        let a = wait(cache.claim(1));
        assert_eq!(cache.learn(5), 5);
        assert!(matches!(cache.claim(2), Claim::Known(5)));
        assert_eq!(cache.learn(6), 5);
        // The lookup under way still answers its waiters, with the chain id learned first.
        assert_eq!(first.finish(Ok(7)), Ok(5));
        assert_eq!(a.result(3, GIVE_UP), Some(Ok(5)));
        assert_eq!(cache.known(), Some(5));
    }

    #[test]
    fn a_failed_lookup_fails_its_waiters_and_the_next_request_retries() {
        let cache = Rc::new(ChainIdCache::new());
        let first = lookup(cache.claim(0));
        let a = wait(cache.claim(1));
        let error = RpcError::new(-32002, "upstream unreachable");
        assert_eq!(first.finish(Err(error.clone())), Err(error.clone()));
        assert_eq!(a.result(2, GIVE_UP), Some(Err(error)));
        assert_eq!(cache.known(), None);
        assert_eq!(lookup(cache.claim(3)).finish(Ok(1)), Ok(1));
        assert_eq!(cache.known(), Some(1));
    }

    #[test]
    fn an_abandoned_lookup_does_not_strand_its_waiters() {
        let cache = Rc::new(ChainIdCache::new());
        let first = lookup(cache.claim(0));
        let a = wait(cache.claim(1));
        drop(first);
        assert!(matches!(a.result(2, GIVE_UP), Some(Err(_))));
        assert!(matches!(cache.claim(3), Claim::Lookup(_)));
    }

    #[test]
    fn waiters_give_up_on_a_lookup_that_never_finishes_and_the_next_request_starts_another() {
        let cache = Rc::new(ChainIdCache::new());
        // Its request was cancelled: the lookup is neither finished nor dropped.
        let lost = lookup(cache.claim(0));
        let a = wait(cache.claim(10));
        assert_eq!(a.result(999, GIVE_UP), None);
        let gave_up = a.result(1_000, GIVE_UP).expect("gives up at the bound");
        assert_eq!(gave_up.unwrap_err().code, RESOURCE_UNAVAILABLE);
        let second = lookup(cache.claim(1_001));
        // The lost lookup failing late does not end the new one...
        drop(lost);
        let b = wait(cache.claim(1_002));
        assert_eq!(b.result(1_003, GIVE_UP), None);
        assert_eq!(second.finish(Ok(5)), Ok(5));
        assert_eq!(b.result(1_004, GIVE_UP), Some(Ok(5)));
        assert_eq!(cache.known(), Some(5));
    }
}
