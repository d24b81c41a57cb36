//! The per-sender lock and its nonce-ordered queue.
//!
//! One [`SenderQueue`] lives in each sender's Durable Object. A transaction
//! [`SenderQueue::enqueue`]s with its nonce and waits on its [`Turn`]; the lock goes to the waiter
//! with the lowest nonce (earliest arrival among equal nonces), so transactions that overtook each
//! other on the way in still leave in nonce order. When the sender's next nonce is known (learned
//! from the upstream, then advanced by each accepted transaction), a transaction above it waits up
//! to `gap_wait_ms` for the missing ones, then goes anyway and the upstream judges it.
//!
//! The holder is identified by a fresh session key (a UUID v4). It forwards its transaction, then
//! [`SenderQueue::release`]s with its session key and the [`NonceEffect`] of the upstream's
//! answer; the lock passes straight to the next waiter. A release with a session key that is not
//! the holder's changes nothing. A lock held past `max_hold_ms` is force-released by
//! [`SenderQueue::expire`] (driven by the object's storage alarm), after which the late holder's
//! release is ignored. A lock restored from storage after the object restarted has no owner in
//! memory ([`SenderQueue::restore`]); newcomers queue behind it until `expire` releases it.
//!
//! When the queue's idea of the next nonce may be wrong (the upstream said the nonce was wrong,
//! or the outcome is unknown), the lock is not granted again until the next nonce is learned
//! anew ([`Handoff::Relearn`]); a lookup that never reports back stops blocking after
//! [`LOOKUP_TIMEOUT_MS`].
//!
//! Time is passed in as Unix milliseconds, so the machine is deterministic and runs natively.
//! Nothing here waits by itself: the object wakes the queue at [`SenderQueue::next_tick_ms`].

use crate::ordering::answer::NonceEffect;
use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use uuid::Uuid;

/// How long a next-nonce lookup may block the lock, in ms. A lookup whose request was cancelled
/// never reports back; after this the queue goes on without a known next nonce.
pub const LOOKUP_TIMEOUT_MS: u64 = 6_000;

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

/// What a release, force release, lookup or tick did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handoff {
    /// Nothing changed: the session key was not the holder's (already force-released, or never
    /// held), or (for a tick) the lock is held or nobody may go yet.
    Ignored,
    /// The lock is free: nobody waits, or the waiters wait for a missing nonce or a lookup. The
    /// record and alarm are to be cleared.
    Idle,
    /// The next waiter now holds this lock. Its record and alarm are to be written.
    Next(Lock),
    /// The lock is free but not granted until the caller has asked the upstream for the sender's
    /// next nonce and reported it ([`SenderQueue::learn_next_nonce`] or
    /// [`SenderQueue::learning_failed`]). The record and alarm are to be cleared.
    Relearn,
}

/// What an alarm did ([`SenderQueue::expire`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// No lock is held: the alarm is stale.
    Free,
    /// The holder is within its maximum hold; the alarm is to be set again for this deadline (Unix ms).
    NotYet(u64),
    /// The holder (this lock) was force-released. Its transaction's fate is unknown, so the next
    /// nonce is to be learned anew before the lock is granted again ([`Handoff::Relearn`]).
    ForceReleased(Lock),
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
    /// Asking the upstream for the next nonce since this time (Unix ms): nobody is granted the
    /// lock meanwhile, for at most [`LOOKUP_TIMEOUT_MS`].
    learning_since: Option<u64>,
    /// When the queue last learned of a gap below its waiters (a release that kept the next
    /// nonce, or a lookup), Unix ms: their gap wait counts from then at the earliest.
    gap_opened_ms: u64,
    gap_wait_ms: u64,
    arrivals: u64,
    /// Counts the changes that may move [`SenderQueue::next_tick_ms`]; see
    /// [`SenderQueue::generation`].
    generation: u64,
}

impl SenderQueue {
    /// An empty queue with the lock free. A transaction whose nonce is above the sender's known
    /// next nonce waits up to `gap_wait_ms` for the missing ones before it may go anyway.
    pub fn new(gap_wait_ms: u64) -> Self {
        SenderQueue {
            holder: None,
            waiting: Vec::new(),
            next_nonce: None,
            learning_since: None,
            gap_opened_ms: 0,
            gap_wait_ms,
            arrivals: 0,
            generation: 0,
        }
    }

    /// A number that changes whenever the queue's state changes in a way that may move
    /// [`SenderQueue::next_tick_ms`] later or earlier for the waiters already there: a lookup
    /// begun, reported or to be made anew, a release that keeps the next nonce (the gap wait
    /// starts again). Every waiting [`Turn`]'s waker is woken at such a change, so a waiter that
    /// keeps a timer for the next tick can compare generations to know when to set it anew. (An
    /// arrival or an ordinary release does not: the first waiter's own deadline stands, and the
    /// waiter granted the lock is woken by the grant.)
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Marks a change: bumps the generation and wakes every waiter.
    fn changed(&mut self) {
        self.generation += 1;
        for waiter in &self.waiting {
            if let Some(waker) = waiter.slot.borrow_mut().waker.take() {
                waker.wake();
            }
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

    /// The nonces of the waiting transactions, lowest first.
    pub fn waiting_nonces(&self) -> Vec<u64> {
        let mut nonces: Vec<u64> = self.waiting.iter().map(|w| w.nonce).collect();
        nonces.sort_unstable();
        nonces
    }

    /// The sender's next nonce as far as this queue knows: learned from the upstream
    /// ([`SenderQueue::learn_next_nonce`]) and advanced by accepted transactions.
    pub fn next_nonce(&self) -> Option<u64> {
        self.next_nonce
    }

    /// Whether a next-nonce lookup is under way (and has not timed out at `now_ms`).
    pub fn learning(&self, now_ms: u64) -> bool {
        self.learning_since
            .is_some_and(|since| now_ms < since.saturating_add(LOOKUP_TIMEOUT_MS))
    }

    /// True when the next nonce is unknown and the queue is quiet (nobody holds or waits): the
    /// moment to ask the upstream. The caller then calls [`SenderQueue::begin_learning`], asks,
    /// and reports with [`SenderQueue::learn_next_nonce`] or [`SenderQueue::learning_failed`].
    pub fn needs_next_nonce(&self, now_ms: u64) -> bool {
        self.next_nonce.is_none()
            && !self.learning(now_ms)
            && self.holder.is_none()
            && self.waiting.is_empty()
    }

    /// Holds every grant from `now_ms` until the next nonce is learned, the lookup failed, or
    /// [`LOOKUP_TIMEOUT_MS`] passed.
    pub fn begin_learning(&mut self, now_ms: u64) {
        self.learning_since = Some(now_ms);
        self.changed();
    }

    /// Sets the sender's next nonce (the upstream's pending transaction count) at `now_ms`, ends
    /// the lookup and lets the due waiter go.
    pub fn learn_next_nonce(&mut self, next_nonce: u64, now_ms: u64) -> Handoff {
        self.learning_since = None;
        self.next_nonce = Some(next_nonce);
        self.gap_opened_ms = now_ms;
        self.changed();
        self.grant(now_ms)
    }

    /// Ends a lookup that got no answer: the queue goes on without a known next nonce.
    pub fn learning_failed(&mut self, now_ms: u64) -> Handoff {
        self.learning_since = None;
        self.next_nonce = None;
        self.changed();
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
        Turn { slot }
    }

    /// Releases the lock held under `session_key` at `now_ms`, applying the `effect` of its
    /// transaction's answer to the next nonce, and hands the lock on. A key that is not the
    /// holder's changes nothing.
    pub fn release(
        &mut self,
        session_key: SessionKey,
        effect: NonceEffect,
        now_ms: u64,
    ) -> Handoff {
        match self.holder {
            Some(lock) if lock.session_key == session_key => {
                self.holder = None;
                match (effect, lock.nonce) {
                    (NonceEffect::Advance, Some(n)) => {
                        self.next_nonce = Some(self.next_nonce.map_or(n + 1, |k| k.max(n + 1)));
                    }
                    // The holder's nonce is still missing: the waiters above it get a full gap
                    // wait from now for a corrected transaction.
                    (NonceEffect::Keep, _) => {
                        self.gap_opened_ms = now_ms;
                        self.changed();
                    }
                    _ => return self.relearn(now_ms),
                }
                self.grant(now_ms)
            }
            _ => Handoff::Ignored,
        }
    }

    fn relearn(&mut self, now_ms: u64) -> Handoff {
        self.next_nonce = None;
        self.learning_since = Some(now_ms);
        self.changed();
        Handoff::Relearn
    }

    /// Force-releases the holder when its maximum hold has passed at `now_ms` (the alarm handler).
    /// Its transaction may or may not have reached the upstream: the next nonce is to be learned
    /// anew before anyone else holds the lock.
    pub fn expire(&mut self, now_ms: u64, max_hold_ms: u64) -> Expiry {
        match self.holder {
            None => Expiry::Free,
            Some(lock) if now_ms < lock.deadline_ms(max_hold_ms) => {
                Expiry::NotYet(lock.deadline_ms(max_hold_ms))
            }
            Some(lock) => {
                self.holder = None;
                self.relearn(now_ms);
                Expiry::ForceReleased(lock)
            }
        }
    }

    /// Lets the queue move on at `now_ms` when time alone allows it: a waiter's wait for a missing
    /// lower nonce ran out, or a lookup timed out. [`Handoff::Next`] when it granted the lock.
    pub fn tick(&mut self, now_ms: u64) -> Handoff {
        if self.holder.is_some() {
            return Handoff::Ignored;
        }
        match self.grant(now_ms) {
            Handoff::Next(lock) => Handoff::Next(lock),
            _ => Handoff::Ignored,
        }
    }

    /// When [`SenderQueue::tick`] may next let someone go by time alone (Unix ms): the end of a
    /// lookup's timeout, or the end of the lowest waiter's gap wait. `None` when only a release
    /// or an arrival can change anything.
    pub fn next_tick_ms(&self) -> Option<u64> {
        if self.holder.is_some() {
            return None;
        }
        if let Some(since) = self.learning_since {
            return Some(since.saturating_add(LOOKUP_TIMEOUT_MS));
        }
        let first = self.first_waiter()?;
        let waiter = &self.waiting[first];
        self.next_nonce
            .is_some_and(|next| waiter.nonce > next)
            .then(|| self.gap_deadline_ms(waiter))
    }

    fn gap_deadline_ms(&self, waiter: &Waiter) -> u64 {
        waiter
            .enqueued_at_ms
            .max(self.gap_opened_ms)
            .saturating_add(self.gap_wait_ms)
    }

    /// How long the oldest waiter has waited at `now_ms`, in ms (0 when nobody waits).
    pub fn oldest_wait_ms(&self, now_ms: u64) -> u64 {
        self.waiting
            .iter()
            .map(|w| now_ms.saturating_sub(w.enqueued_at_ms))
            .max()
            .unwrap_or(0)
    }

    fn first_waiter(&self) -> Option<usize> {
        (0..self.waiting.len())
            .filter(|&i| !self.waiting[i].slot.borrow().abandoned)
            .min_by_key(|&i| (self.waiting[i].nonce, self.waiting[i].arrival))
    }

    /// With the lock free, grants it to the waiter with the lowest nonce (earliest arrival among
    /// equal nonces), unless a lookup is under way or that nonce is above the known next nonce and
    /// its gap wait still runs.
    fn grant(&mut self, now_ms: u64) -> Handoff {
        if self.holder.is_some() {
            return Handoff::Ignored;
        }
        if self.learning(now_ms) {
            return Handoff::Idle;
        }
        if self.learning_since.take().is_some() {
            // The lookup never reported back: go on without a known next nonce.
            self.next_nonce = None;
        }
        self.waiting.retain(|w| !w.slot.borrow().abandoned);
        let Some(index) = self.first_waiter() else {
            return Handoff::Idle;
        };
        let first = &self.waiting[index];
        let in_gap = self.next_nonce.is_some_and(|next| first.nonce > next);
        if in_gap && now_ms < self.gap_deadline_ms(first) {
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
    use crate::ordering::answer::NonceEffect::{Advance, Keep, Relearn};
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
        assert_eq!(q.waiting_nonces(), vec![1, 2]);

        let lb = next(q.release(la.session_key, Advance, 150));
        assert_eq!(poll(&mut b), Some(lb));
        assert_eq!(lb.acquired_at_ms, 150);
        assert!(poll(&mut c).is_none());
        assert_ne!(la.session_key, lb.session_key);
        assert_eq!(q.next_nonce(), Some(1));

        let lc = next(q.release(lb.session_key, Advance, 160));
        assert_eq!(poll(&mut c), Some(lc));
        assert_eq!(q.release(lc.session_key, Advance, 170), Handoff::Idle);
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
        let l6 = next(q.release(l5.session_key, Advance, 3));
        assert_eq!(poll(&mut t6), Some(l6));
        let l7 = next(q.release(l6.session_key, Advance, 4));
        assert_eq!(poll(&mut t7), Some(l7));
    }

    #[test]
    fn nobody_goes_while_the_next_nonce_is_being_learned() {
        let mut q = SenderQueue::new(1_000);
        assert!(q.needs_next_nonce(0));
        q.begin_learning(0);
        assert!(!q.needs_next_nonce(0));
        let mut t4 = q.enqueue(4, 0);
        let mut t3 = q.enqueue(3, 1);
        assert!(poll(&mut t4).is_none() && poll(&mut t3).is_none());
        assert_eq!(q.next_tick_ms(), Some(LOOKUP_TIMEOUT_MS));
        let l3 = next(q.learn_next_nonce(3, 2));
        assert_eq!(poll(&mut t3), Some(l3));
        let mut q = SenderQueue::new(1_000);
        q.begin_learning(0);
        let mut t = q.enqueue(9, 0);
        assert!(poll(&mut t).is_none());
        let l = next(q.learning_failed(1));
        assert_eq!(poll(&mut t), Some(l));
    }

    #[test]
    fn a_lookup_that_never_reports_stops_blocking_after_its_timeout() {
        let mut q = SenderQueue::new(1_000);
        q.begin_learning(100);
        let mut t = q.enqueue(7, 100);
        assert_eq!(q.tick(100 + LOOKUP_TIMEOUT_MS - 1), Handoff::Ignored);
        assert!(q.learning(100 + LOOKUP_TIMEOUT_MS - 1));
        let l = next(q.tick(100 + LOOKUP_TIMEOUT_MS));
        assert_eq!(poll(&mut t), Some(l));
        assert_eq!(l.expected_nonce, None, "went on without a known next nonce");
        // The late report still teaches the next nonce.
        assert_eq!(
            q.learn_next_nonce(8, 100 + LOOKUP_TIMEOUT_MS + 1),
            Handoff::Ignored
        );
        assert_eq!(q.next_nonce(), Some(8));
    }

    #[test]
    fn a_gap_is_waited_for_at_most_the_gap_wait() {
        let mut q = SenderQueue::new(200);
        q.learn_next_nonce(0, 0);
        let mut t2 = q.enqueue(2, 1_000);
        assert_eq!(q.next_tick_ms(), Some(1_200));
        assert_eq!(q.tick(1_199), Handoff::Ignored);
        assert!(poll(&mut t2).is_none());
        let l2 = next(q.tick(1_200));
        assert_eq!(poll(&mut t2), Some(l2));
        // The lock says that it went past a gap: nonce 2 with 0 expected.
        assert_eq!((l2.nonce, l2.expected_nonce), (Some(2), Some(0)));
        assert_eq!(
            q.next_tick_ms(),
            None,
            "held: only a release changes anything"
        );
    }

    #[test]
    fn without_a_known_next_nonce_the_lowest_goes_first() {
        let mut q = SenderQueue::new(1_000);
        let mut t9 = q.enqueue(9, 0);
        let l9 = poll(&mut t9).expect("nothing known: no gap");
        assert_eq!(l9.expected_nonce, None);
        let mut t8 = q.enqueue(8, 1);
        let mut t7 = q.enqueue(7, 2);
        assert_eq!(q.next_tick_ms(), None);
        // A wrong nonce: nobody goes until the next nonce is learned again.
        assert_eq!(q.release(l9.session_key, Relearn, 3), Handoff::Relearn);
        assert_eq!(q.next_nonce(), None);
        assert!(poll(&mut t7).is_none() && poll(&mut t8).is_none());
        let l7 = next(q.learning_failed(4));
        assert_eq!(poll(&mut t7), Some(l7));
        assert!(poll(&mut t8).is_none());
    }

    #[test]
    fn a_rejected_holder_keeps_the_next_nonce_and_reopens_the_gap_wait() {
        let mut q = SenderQueue::new(1_000);
        q.learn_next_nonce(4, 0);
        let mut t4 = q.enqueue(4, 0);
        let mut t5 = q.enqueue(5, 0);
        let l4 = poll(&mut t4).unwrap();
        // 4 is refused for itself (insufficient funds) at 2,500, past 5's first gap deadline.
        assert_eq!(q.release(l4.session_key, Keep, 2_500), Handoff::Idle);
        assert_eq!(q.next_nonce(), Some(4));
        assert!(poll(&mut t5).is_none());
        assert_eq!(
            q.next_tick_ms(),
            Some(3_500),
            "a full gap wait from the refusal"
        );
        // A corrected 4 within it goes first, then 5.
        let mut t4b = q.enqueue(4, 3_000);
        let l4b = poll(&mut t4b).unwrap();
        let l5 = next(q.release(l4b.session_key, Advance, 3_010));
        assert_eq!(poll(&mut t5), Some(l5));
    }

    #[test]
    fn a_foreign_or_stale_session_key_changes_nothing() {
        let mut q = SenderQueue::new(1_000);
        let mut a = q.enqueue(0, 0);
        let mut b = q.enqueue(1, 0);
        let la = poll(&mut a).unwrap();
        assert_eq!(q.release(SessionKey::new(), Advance, 5), Handoff::Ignored);
        assert_eq!(q.holder(), Some(la));
        assert!(poll(&mut b).is_none());
    }

    #[test]
    fn alarm_force_releases_only_after_the_maximum_hold_and_relearns() {
        let mut q = SenderQueue::new(1_000);
        q.learn_next_nonce(0, 0);
        let mut a = q.enqueue(0, 1_000);
        let mut b = q.enqueue(1, 1_001);
        let la = poll(&mut a).unwrap();
        assert_eq!(q.expire(1_499, 500), Expiry::NotYet(1_500));
        assert_eq!(q.expire(1_500, 500), Expiry::ForceReleased(la));
        // Whether 0 reached the upstream is unknown: 1 waits for the lookup.
        assert!(poll(&mut b).is_none());
        assert!(q.learning(1_500));
        let lb = next(q.learn_next_nonce(1, 1_550));
        assert_eq!(poll(&mut b), Some(lb));
        // The late holder's release is ignored; b keeps the lock.
        assert_eq!(q.release(la.session_key, Advance, 1_600), Handoff::Ignored);
        assert_eq!(q.holder(), Some(lb));
        assert_eq!(q.release(lb.session_key, Advance, 1_700), Handoff::Idle);
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
        let Expiry::ForceReleased(old) = q.expire(40_000, 30_000) else {
            panic!("restored lock expires")
        };
        assert_eq!((old.session_key, old.nonce), (key, None));
        let la = next(q.learn_next_nonce(0, 40_001));
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
        let lc = next(q.release(la.session_key, Keep, 3));
        assert_eq!(poll(&mut c), Some(lc));
    }

    #[test]
    fn every_waiter_is_woken_when_the_next_tick_may_move() {
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
        q.learn_next_nonce(0, 0);
        let mut a = q.enqueue(0, 0);
        let mut c = q.enqueue(2, 0);
        let la = poll(&mut a).unwrap();
        assert!(Pin::new(&mut c)
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        let generation = q.generation();
        // 0 is refused for itself: 2 is not granted, but its gap wait starts anew.
        assert_eq!(q.release(la.session_key, Keep, 500), Handoff::Idle);
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(q.generation() > generation);
        assert_eq!(q.next_tick_ms(), Some(1_500));
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
        q.release(la.session_key, Advance, 1);
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
    }
}
