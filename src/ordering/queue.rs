//! The per-sender ordering state machine: a queue, ordered by nonce, whose head holds the
//! sender's lock.
//!
//! One [`SenderQueue`] lives in each sender's Durable Object. A transaction
//! [`SenderQueue::enqueue`]s with its nonce and waits on its [`Turn`]; the lock goes to the waiter
//! with the lowest nonce (earliest arrival among equal nonces), so transactions that overtook each
//! other on the way in still leave in nonce order. When the sender's next nonce is known (learned
//! from the upstream, then advanced by each accepted transaction), a transaction above it waits up
//! to `gap_wait_ms` for the missing ones, then goes anyway and the upstream judges it.
//!
//! The holder is identified by a fresh session key (a UUID v4). It forwards its transaction, then
//! [`SenderQueue::release`]s with its session key and the [`Outcome`]; the lock passes straight to
//! the next waiter. A release with a session key that is not the holder's changes nothing. A lock
//! held past `max_hold_ms` is force-released by [`SenderQueue::expire`] (driven by the object's
//! storage alarm), after which the late holder's release is ignored. A lock restored from storage
//! after the object restarted has no owner in memory ([`SenderQueue::restore`]); newcomers queue
//! behind it until `expire` releases it.
//!
//! Time is passed in as Unix milliseconds, so the machine is deterministic and runs natively.
//! Waiting has no timeout of its own: only the holder's maximum hold (and the gap wait) bound it.

use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use uuid::Uuid;

/// Identifies one holding of a sender's lock, so that only the holder can release it.
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

/// A held lock: who holds it, since when, for which nonce. Its session key and acquisition time
/// are also the record persisted in the Durable Object's storage while the lock is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lock {
    /// The holder's session key.
    pub session_key: SessionKey,
    /// When the lock was acquired, Unix ms.
    pub acquired_at_ms: u64,
    /// The nonce of the holder's transaction; `None` for a lock restored from storage.
    pub nonce: Option<u64>,
    /// The sender's next nonce as the queue knew it at the grant; `None` when unknown. A `nonce`
    /// above it means the holder went after its gap wait ran out, with the missing nonces absent.
    pub expected_nonce: Option<u64>,
}

impl Lock {
    /// When the lock is to be force-released: `acquired_at_ms + max_hold_ms`, Unix ms.
    pub fn deadline_ms(&self, max_hold_ms: u64) -> u64 {
        self.acquired_at_ms.saturating_add(max_hold_ms)
    }
}

/// What became of the holder's transaction, as the upstream answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The upstream accepted it (a JSON-RPC `result`): the sender's next nonce is one above.
    Accepted,
    /// The upstream refused it or could not be asked: the next nonce is no longer known.
    Failed,
}

/// What a release, force release or tick did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handoff {
    /// Nothing changed: the session key was not the holder's (already force-released, or never
    /// held), or (for a tick) the lock is held or nobody may go yet.
    Ignored,
    /// The lock is free: nobody waits, or the waiters wait for a missing nonce. The record and
    /// alarm are to be cleared.
    Idle,
    /// The next waiter now holds this lock. Its record and alarm are to be written.
    Next(Lock),
}

/// What an alarm did ([`SenderQueue::expire`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// No lock is held: the alarm is stale.
    Free,
    /// The holder is within its maximum hold; the alarm is to be set again for this deadline (Unix ms).
    NotYet(u64),
    /// The holder (this lock) was force-released, and the lock handed on.
    ForceReleased(Lock, Handoff),
}

#[derive(Default)]
struct Slot {
    granted: Option<Lock>,
    waker: Option<Waker>,
    abandoned: bool,
}

/// A waiter's place in the queue: a future that resolves to its [`Lock`] when it is its turn.
///
/// Dropping a `Turn` before it resolves gives up the place; dropping it after the lock was granted
/// but before it was observed leaves that lock to the alarm's force release.
pub struct Turn {
    slot: Rc<RefCell<Slot>>,
    /// Unix ms after which this waiter stops waiting for a missing lower nonce
    /// (see [`SenderQueue::tick`]).
    pub gap_deadline_ms: u64,
}

impl Future for Turn {
    type Output = Lock;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Lock> {
        let mut slot = self.slot.borrow_mut();
        match slot.granted {
            Some(lock) => Poll::Ready(lock),
            None => {
                slot.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.slot.borrow_mut().abandoned = true;
    }
}

struct Waiter {
    slot: Rc<RefCell<Slot>>,
    nonce: u64,
    arrival: u64,
    enqueued_at_ms: u64,
}

/// One sender's queue and lock. See the module documentation.
pub struct SenderQueue {
    holder: Option<Lock>,
    waiting: Vec<Waiter>,
    next_nonce: Option<u64>,
    /// Asking the upstream for the next nonce: nobody is granted the lock meanwhile.
    learning: bool,
    gap_wait_ms: u64,
    arrivals: u64,
}

impl SenderQueue {
    /// An empty queue with the lock free. A transaction whose nonce is above the sender's known
    /// next nonce waits up to `gap_wait_ms` for the missing ones before it may go anyway.
    pub fn new(gap_wait_ms: u64) -> Self {
        SenderQueue {
            holder: None,
            waiting: Vec::new(),
            next_nonce: None,
            learning: false,
            gap_wait_ms,
            arrivals: 0,
        }
    }

    /// The current holder, if any.
    pub fn holder(&self) -> Option<Lock> {
        self.holder
    }

    /// How many transactions wait behind the holder.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// The sender's next nonce as far as this queue knows: learned from the upstream
    /// ([`SenderQueue::learn_next_nonce`]) and advanced by accepted transactions.
    pub fn next_nonce(&self) -> Option<u64> {
        self.next_nonce
    }

    /// True when the next nonce is unknown and the queue is quiet (nobody holds or waits): the
    /// moment to ask the upstream. The caller then calls [`SenderQueue::begin_learning`], asks,
    /// and reports with [`SenderQueue::learn_next_nonce`] or [`SenderQueue::learning_failed`].
    pub fn needs_next_nonce(&self) -> bool {
        self.next_nonce.is_none()
            && !self.learning
            && self.holder.is_none()
            && self.waiting.is_empty()
    }

    /// Holds every grant until the next nonce is learned or the lookup failed.
    pub fn begin_learning(&mut self) {
        self.learning = true;
    }

    /// Sets the sender's next nonce (the upstream's pending transaction count) at `now_ms`, ends
    /// the lookup and lets the due waiter go.
    pub fn learn_next_nonce(&mut self, next_nonce: u64, now_ms: u64) -> Handoff {
        self.learning = false;
        if self.next_nonce.is_none() {
            self.next_nonce = Some(next_nonce);
        }
        self.grant(now_ms)
    }

    /// Ends a lookup that got no answer: the queue goes on without a known next nonce.
    pub fn learning_failed(&mut self, now_ms: u64) -> Handoff {
        self.learning = false;
        self.grant(now_ms)
    }

    /// Takes a lock record found in storage (left by a previous incarnation of the object) as the
    /// current holder. It has no owner in memory, so only [`SenderQueue::expire`] releases it.
    /// Ignored when a lock is already held.
    pub fn restore(&mut self, session_key: SessionKey, acquired_at_ms: u64) {
        if self.holder.is_none() {
            self.holder = Some(Lock {
                session_key,
                acquired_at_ms,
                nonce: None,
                expected_nonce: None,
            });
        }
    }

    /// Joins the queue at `now_ms` with a transaction of `nonce`. The returned [`Turn`] is ready at
    /// once when the lock is free and no lower nonce is due first.
    pub fn enqueue(&mut self, nonce: u64, now_ms: u64) -> Turn {
        let slot = Rc::new(RefCell::new(Slot::default()));
        self.arrivals += 1;
        self.waiting.push(Waiter {
            slot: slot.clone(),
            nonce,
            arrival: self.arrivals,
            enqueued_at_ms: now_ms,
        });
        self.grant(now_ms);
        Turn {
            slot,
            gap_deadline_ms: now_ms.saturating_add(self.gap_wait_ms),
        }
    }

    /// Releases the lock held under `session_key` at `now_ms`, recording the `outcome` of its
    /// transaction, and hands the lock on. A key that is not the holder's changes nothing.
    pub fn release(&mut self, session_key: SessionKey, outcome: Outcome, now_ms: u64) -> Handoff {
        match self.holder {
            Some(lock) if lock.session_key == session_key => {
                self.next_nonce = match (outcome, lock.nonce) {
                    (Outcome::Accepted, Some(n)) => {
                        Some(self.next_nonce.map_or(n + 1, |k| k.max(n + 1)))
                    }
                    _ => None,
                };
                self.holder = None;
                self.grant(now_ms)
            }
            _ => Handoff::Ignored,
        }
    }

    /// Force-releases the holder when its maximum hold has passed at `now_ms` (the alarm handler).
    /// Its transaction was handed to the upstream, so it is presumed sent: the next nonce goes on.
    pub fn expire(&mut self, now_ms: u64, max_hold_ms: u64) -> Expiry {
        match self.holder {
            None => Expiry::Free,
            Some(lock) if now_ms < lock.deadline_ms(max_hold_ms) => {
                Expiry::NotYet(lock.deadline_ms(max_hold_ms))
            }
            Some(lock) => {
                if let (Some(n), Some(k)) = (lock.nonce, self.next_nonce) {
                    self.next_nonce = Some(k.max(n + 1));
                }
                self.holder = None;
                Expiry::ForceReleased(lock, self.grant(now_ms))
            }
        }
    }

    /// Lets a waiter go whose wait for a missing lower nonce has run out at `now_ms` (called when a
    /// [`Turn::gap_deadline_ms`] passes). [`Handoff::Next`] when it granted the lock.
    pub fn tick(&mut self, now_ms: u64) -> Handoff {
        if self.holder.is_some() {
            return Handoff::Ignored;
        }
        match self.grant(now_ms) {
            Handoff::Idle => Handoff::Ignored,
            other => other,
        }
    }

    /// How long the oldest waiter has waited at `now_ms`, in ms (0 when nobody waits).
    pub fn oldest_wait_ms(&self, now_ms: u64) -> u64 {
        self.waiting
            .iter()
            .map(|w| now_ms.saturating_sub(w.enqueued_at_ms))
            .max()
            .unwrap_or(0)
    }

    /// With the lock free, grants it to the waiter with the lowest nonce (earliest arrival among
    /// equal nonces), unless that nonce is above the known next nonce and its gap wait still runs.
    fn grant(&mut self, now_ms: u64) -> Handoff {
        if self.holder.is_some() {
            return Handoff::Ignored;
        }
        if self.learning {
            return Handoff::Idle;
        }
        self.waiting.retain(|w| !w.slot.borrow().abandoned);
        let Some(index) = (0..self.waiting.len())
            .min_by_key(|&i| (self.waiting[i].nonce, self.waiting[i].arrival))
        else {
            return Handoff::Idle;
        };
        let first = &self.waiting[index];
        let in_gap = self.next_nonce.is_some_and(|next| first.nonce > next);
        if in_gap && now_ms < first.enqueued_at_ms.saturating_add(self.gap_wait_ms) {
            return Handoff::Idle;
        }
        let waiter = self.waiting.swap_remove(index);
        let lock = Lock {
            session_key: SessionKey::new(),
            acquired_at_ms: now_ms,
            nonce: Some(waiter.nonce),
            expected_nonce: self.next_nonce,
        };
        let mut slot = waiter.slot.borrow_mut();
        slot.granted = Some(lock);
        if let Some(waker) = slot.waker.take() {
            waker.wake();
        }
        self.holder = Some(lock);
        Handoff::Next(lock)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    fn poll(turn: &mut Turn) -> Option<Lock> {
        let mut cx = Context::from_waker(Waker::noop());
        match Pin::new(turn).poll(&mut cx) {
            Poll::Ready(lock) => Some(lock),
            Poll::Pending => None,
        }
    }

    fn next(handoff: Handoff) -> Lock {
        match handoff {
            Handoff::Next(lock) => lock,
            other => panic!("expected a handoff, got {other:?}"),
        }
    }

    #[test]
    fn first_comer_holds_at_once_and_others_wait_in_order() {
        let mut q = SenderQueue::new(1_000);
        let mut a = q.enqueue(0, 100);
        let mut b = q.enqueue(1, 101);
        let mut c = q.enqueue(2, 102);
        let la = poll(&mut a).expect("a holds");
        assert_eq!((la.acquired_at_ms, la.nonce), (100, Some(0)));
        assert!(poll(&mut b).is_none() && poll(&mut c).is_none());
        assert_eq!(q.waiting(), 2);

        let lb = next(q.release(la.session_key, Outcome::Accepted, 150));
        assert_eq!(poll(&mut b), Some(lb));
        assert_eq!(lb.acquired_at_ms, 150);
        assert!(poll(&mut c).is_none());
        assert_ne!(la.session_key, lb.session_key);
        assert_eq!(q.next_nonce(), Some(1));

        let lc = next(q.release(lb.session_key, Outcome::Accepted, 160));
        assert_eq!(poll(&mut c), Some(lc));
        assert_eq!(
            q.release(lc.session_key, Outcome::Accepted, 170),
            Handoff::Idle
        );
        assert_eq!(q.holder(), None);
        assert_eq!(q.next_nonce(), Some(3));
    }

    #[test]
    fn overtaken_transactions_leave_in_nonce_order() {
        let mut q = SenderQueue::new(1_000);
        q.learn_next_nonce(5, 0);
        // 7 and 6 arrive before 5: neither may go, the lock stays free.
        let mut t7 = q.enqueue(7, 0);
        let mut t6 = q.enqueue(6, 1);
        assert!(poll(&mut t7).is_none() && poll(&mut t6).is_none());
        assert_eq!(q.holder(), None);
        let mut t5 = q.enqueue(5, 2);
        let l5 = poll(&mut t5).expect("the next nonce goes at once");
        let l6 = next(q.release(l5.session_key, Outcome::Accepted, 3));
        assert_eq!(poll(&mut t6), Some(l6));
        let l7 = next(q.release(l6.session_key, Outcome::Accepted, 4));
        assert_eq!(poll(&mut t7), Some(l7));
    }

    #[test]
    fn nobody_goes_while_the_next_nonce_is_being_learned() {
        let mut q = SenderQueue::new(1_000);
        assert!(q.needs_next_nonce());
        q.begin_learning();
        assert!(!q.needs_next_nonce());
        let mut t4 = q.enqueue(4, 0);
        let mut t3 = q.enqueue(3, 1);
        assert!(poll(&mut t4).is_none() && poll(&mut t3).is_none());
        let l3 = next(q.learn_next_nonce(3, 2));
        assert_eq!(poll(&mut t3), Some(l3));
        let mut q = SenderQueue::new(1_000);
        q.begin_learning();
        let mut t = q.enqueue(9, 0);
        assert!(poll(&mut t).is_none());
        let l = next(q.learning_failed(1));
        assert_eq!(poll(&mut t), Some(l));
    }

    #[test]
    fn a_gap_is_waited_for_at_most_the_gap_wait() {
        let mut q = SenderQueue::new(200);
        q.learn_next_nonce(0, 0);
        let mut t2 = q.enqueue(2, 1_000);
        assert_eq!(t2.gap_deadline_ms, 1_200);
        assert_eq!(q.tick(1_199), Handoff::Ignored);
        assert!(poll(&mut t2).is_none());
        let l2 = next(q.tick(1_200));
        assert_eq!(poll(&mut t2), Some(l2));
        // The lock says that it went past a gap: nonce 2 with 0 expected.
        assert_eq!((l2.nonce, l2.expected_nonce), (Some(2), Some(0)));
    }

    #[test]
    fn without_a_known_next_nonce_the_lowest_goes_first() {
        let mut q = SenderQueue::new(1_000);
        let mut t9 = q.enqueue(9, 0);
        let l9 = poll(&mut t9).expect("nothing known: no gap");
        assert_eq!(l9.expected_nonce, None);
        let mut t8 = q.enqueue(8, 1);
        let mut t7 = q.enqueue(7, 2);
        // A failed transaction leaves the next nonce unknown: the lowest waiter goes.
        let l7 = next(q.release(l9.session_key, Outcome::Failed, 3));
        assert_eq!(q.next_nonce(), None);
        assert_eq!(poll(&mut t7), Some(l7));
        assert!(poll(&mut t8).is_none());
    }

    #[test]
    fn a_foreign_or_stale_session_key_changes_nothing() {
        let mut q = SenderQueue::new(1_000);
        let mut a = q.enqueue(0, 0);
        let mut b = q.enqueue(1, 0);
        let la = poll(&mut a).unwrap();
        assert_eq!(
            q.release(SessionKey::new(), Outcome::Accepted, 5),
            Handoff::Ignored
        );
        assert_eq!(q.holder(), Some(la));
        assert!(poll(&mut b).is_none());
    }

    #[test]
    fn alarm_force_releases_only_after_the_maximum_hold() {
        let mut q = SenderQueue::new(1_000);
        q.learn_next_nonce(0, 0);
        let mut a = q.enqueue(0, 1_000);
        let mut b = q.enqueue(1, 1_001);
        let la = poll(&mut a).unwrap();
        assert_eq!(q.expire(1_499, 500), Expiry::NotYet(1_500));
        let Expiry::ForceReleased(stale, Handoff::Next(lb)) = q.expire(1_500, 500) else {
            panic!("force release at the deadline")
        };
        assert_eq!(stale, la);
        // The force-released transaction is presumed sent: nonce 1 goes without a gap wait.
        assert_eq!(poll(&mut b), Some(lb));
        // The late holder's release is ignored; b keeps the lock.
        assert_eq!(
            q.release(la.session_key, Outcome::Accepted, 1_600),
            Handoff::Ignored
        );
        assert_eq!(q.holder(), Some(lb));
        assert_eq!(
            q.release(lb.session_key, Outcome::Accepted, 1_700),
            Handoff::Idle
        );
        assert_eq!(q.expire(1_800, 500), Expiry::Free);
    }

    #[test]
    fn a_restored_lock_blocks_newcomers_until_the_alarm() {
        let mut q = SenderQueue::new(1_000);
        let key = SessionKey::new();
        q.restore(key, 10_000);
        let mut a = q.enqueue(0, 10_100);
        assert!(poll(&mut a).is_none());
        assert_eq!(q.expire(10_200, 30_000), Expiry::NotYet(40_000));
        let Expiry::ForceReleased(old, Handoff::Next(la)) = q.expire(40_000, 30_000) else {
            panic!("restored lock expires")
        };
        assert_eq!((old.session_key, old.nonce), (key, None));
        assert_eq!(poll(&mut a), Some(la));
    }

    #[test]
    fn abandoned_waiters_are_skipped() {
        let mut q = SenderQueue::new(1_000);
        let mut a = q.enqueue(0, 0);
        let b = q.enqueue(1, 1);
        let mut c = q.enqueue(2, 2);
        assert_eq!(q.oldest_wait_ms(11), 10);
        let la = poll(&mut a).unwrap();
        drop(b);
        let lc = next(q.release(la.session_key, Outcome::Failed, 3));
        assert_eq!(poll(&mut c), Some(lc));
    }

    #[test]
    fn wakes_the_next_waiter() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        struct Count(AtomicUsize);
        impl std::task::Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut q = SenderQueue::new(1_000);
        let mut a = q.enqueue(0, 0);
        let mut b = q.enqueue(1, 0);
        let la = poll(&mut a).unwrap();
        assert!(Pin::new(&mut b)
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        q.release(la.session_key, Outcome::Accepted, 1);
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
    }
}
