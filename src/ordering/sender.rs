//! One sender's whole state in its Durable Object: the lock and queue ([`SenderQueue`]), the
//! hashes queued, in flight and accepted ([`Seen`]), what is known of its mined nonce, and the
//! counters an operator reads. The object's adapter does the I/O (storage, the upstream) and asks
//! this state machine what to do at each step:
//!
//! 1. [`SenderState::admit`] each arriving transaction: a known hash is answered at once, a copy of
//!    a queued one waits for that one's answer, a stale nonce, a refused replacement or a full
//!    queue is refused locally, anything else is queued.
//! 2. When its turn comes, [`SenderState::go_ahead`] checks again with what was learned meanwhile.
//! 3. After the upstream's final answer (retries and the lookup by hash done), [`SenderState::finish`]
//!    records it, answers the copies and hands the lock on.
//!
//! Whenever a step returns [`Handoff::Relearn`] (or [`SenderState::needs_lookup`] says so), the
//! adapter asks the upstream for the sender's pending and mined nonces and reports them with
//! [`SenderState::learned`] or [`SenderState::lookup_failed`].

use crate::hex;
use crate::jsonrpc::{Answer, RpcError, INVALID_INPUT, LIMIT_EXCEEDED, RESOURCE_UNAVAILABLE};
use crate::ordering::answer::{AnswerClass, NonceEffect};
use crate::ordering::queue::{Expiry, Handoff, Lock, SenderQueue, SessionKey, Turn};
use crate::ordering::seen::{OutcomeWait, Seen, TxHash};
use serde::Serialize;
use serde_json::{json, Value};

/// What to do with a different transaction that has the nonce of one already accepted and not
/// known to be mined (a speed-up or a cancel): `REPLACEMENT_POLICY`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplacementPolicy {
    /// Forward it through the lock, in nonce order (Ethereum pools accept one that pays more).
    Forward,
    /// Refuse it locally (upstreams without a pool, such as Hedera, where it is a charged
    /// `WRONG_NONCE`).
    Reject,
}

/// The settings of one sender's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// `NONCE_GAP_WAIT_MS`: how long a transaction above the next nonce waits for the missing ones.
    pub gap_wait_ms: u64,
    /// `MAX_QUEUE_PER_SENDER`: the most transactions that may wait behind the holder.
    pub max_queue: usize,
    /// `IDEMPOTENCY_TTL_S` in ms: how long an accepted hash is answered without the upstream.
    pub idempotency_ttl_ms: u64,
    /// `REPLACEMENT_POLICY`.
    pub replacement: ReplacementPolicy,
}

impl Settings {
    /// The defaults of the settings (`NONCE_GAP_WAIT_MS` 3000, `MAX_QUEUE_PER_SENDER` 64,
    /// `IDEMPOTENCY_TTL_S` 300, `REPLACEMENT_POLICY` forward).
    pub const DEFAULT: Settings = Settings {
        gap_wait_ms: crate::config::DEFAULT_GAP_WAIT_MS,
        max_queue: 64,
        idempotency_ttl_ms: 300_000,
        replacement: ReplacementPolicy::Forward,
    };
}

/// What happened to a sender's transactions since its object started (the per-sender view).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// Transactions that went to the upstream and got a final answer.
    pub forwarded: u64,
    /// Copies answered from another copy's answer or from the accepted hashes, without the upstream.
    pub deduplicated: u64,
    /// Sends retried after an answer that said nothing about the transaction.
    pub retried: u64,
    /// Transactions refused locally because their nonce is below the mined count.
    pub stale_refused: u64,
    /// Replacements: forwarded (policy forward) or refused (policy reject).
    pub replacements: u64,
    /// Transactions that went with a lower nonce still missing after `NONCE_GAP_WAIT_MS`.
    pub gap_waits_expired: u64,
    /// Locks released by the alarm after `LOCK_MAX_HOLD_MS`.
    pub force_releases: u64,
    /// Transactions refused because `MAX_QUEUE_PER_SENDER` waited already.
    pub queue_full: u64,
    /// Next-nonce lookups made after the upstream said a nonce was wrong or an outcome was unknown.
    pub relearned: u64,
}

/// Why a transaction is refused without reaching the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Its nonce is below the sender's mined transaction count, and its hash is not one accepted.
    Stale {
        /// The sender's mined transaction count (`eth_getTransactionCount(sender, "latest")`).
        mined: u64,
        /// The transaction's nonce.
        nonce: u64,
    },
    /// Another accepted transaction holds its nonce, and `REPLACEMENT_POLICY` is `reject`.
    Replacement {
        /// The nonce.
        nonce: u64,
        /// The hash of the transaction that holds it.
        holder: TxHash,
    },
    /// `MAX_QUEUE_PER_SENDER` transactions already wait.
    QueueFull {
        /// The limit.
        max: usize,
    },
}

impl Refusal {
    /// The JSON-RPC error for `sender` (lowercase 0x address): -32000 with geth's
    /// `nonce too low: next nonce N, tx nonce M` for a stale nonce, -32000 naming the nonce and
    /// the holder's hash for a refused replacement, -32005 (EIP-1474 limit exceeded) for a full queue.
    pub fn to_rpc(&self, sender: &str) -> RpcError {
        match self {
            Refusal::Stale { mined, nonce } => RpcError::new(
                INVALID_INPUT,
                format!("nonce too low: next nonce {mined}, tx nonce {nonce}"),
            ),
            Refusal::Replacement { nonce, holder } => RpcError::new(
                INVALID_INPUT,
                format!(
                    "replacement transaction refused: nonce {nonce} is already used by {} (REPLACEMENT_POLICY=reject)",
                    hex::encode(holder)
                ),
            ),
            Refusal::QueueFull { max } => RpcError::new(
                LIMIT_EXCEEDED,
                format!("too many queued transactions for sender {sender} (at most {max} wait)"),
            ),
        }
    }

    /// A short name for logs and metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Refusal::Stale { .. } => "stale_nonce",
            Refusal::Replacement { .. } => "replacement_refused",
            Refusal::QueueFull { .. } => "queue_full",
        }
    }
}

/// What [`SenderState::admit`] decided for an arriving transaction.
pub enum Admission {
    /// Accepted within the idempotency window: answer its hash, no upstream call.
    Known,
    /// A copy is queued or in flight: this one gets that copy's answer.
    Copy(OutcomeWait),
    /// Refused locally.
    Refused(Refusal),
    /// Queued: wait for the turn, then [`SenderState::go_ahead`].
    Queued(Turn),
}

/// The transaction a lock was granted to: its holder's session key, its hash and nonce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// The holder's session key.
    pub session_key: SessionKey,
    /// The transaction hash.
    pub hash: TxHash,
    /// Its nonce.
    pub nonce: u64,
}

impl Held {
    /// The transaction (`hash`, `nonce`) that holds `lock`.
    pub fn of(lock: &Lock, hash: TxHash, nonce: u64) -> Self {
        Held {
            session_key: lock.session_key,
            hash,
            nonce,
        }
    }
}

/// What [`SenderState::finish`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// The lock's hand-on.
    pub handoff: Handoff,
    /// Accepted hashes that left the set (replaced or pruned): to delete from storage.
    pub gone: Vec<TxHash>,
    /// Whether the hash joined the accepted set (to write to storage).
    pub accepted: bool,
    /// How many copies got this answer.
    pub copies: u32,
}

/// One sender's state. See the module documentation.
pub struct SenderState {
    queue: SenderQueue,
    seen: Seen,
    /// The sender's mined transaction count as last learned.
    mined: Option<u64>,
    /// The holder's session key and transaction hash, once it went ahead.
    holding: Option<(SessionKey, TxHash)>,
    settings: Settings,
    /// What happened since the object started.
    pub counters: Counters,
}

impl SenderState {
    /// A fresh state: nothing known, the lock free.
    pub fn new(settings: Settings) -> Self {
        SenderState {
            queue: SenderQueue::new(settings.gap_wait_ms),
            seen: Seen::new(settings.idempotency_ttl_ms),
            mined: None,
            holding: None,
            settings,
            counters: Counters::default(),
        }
    }

    /// The lock and queue.
    pub fn queue(&self) -> &SenderQueue {
        &self.queue
    }

    /// The sender's mined transaction count, as last learned.
    pub fn mined(&self) -> Option<u64> {
        self.mined
    }

    /// Takes a lock record left by a previous incarnation (see [`SenderQueue::restore`]).
    pub fn restore_lock(&mut self, session_key: SessionKey, acquired_at_ms: u64) {
        self.queue.restore(session_key, acquired_at_ms);
    }

    /// Takes an accepted hash read back from storage (oldest first); returns the hashes that left
    /// the set (too old, or beyond the bound).
    pub fn restore_accepted(&mut self, hash: TxHash, nonce: u64, at_ms: u64) -> Vec<TxHash> {
        self.seen.record_accepted(hash, nonce, at_ms)
    }

    /// Forgets accepted hashes past the window or the bound at `now_ms`; returns them.
    pub fn prune_accepted(&mut self, now_ms: u64) -> Vec<TxHash> {
        self.seen.prune(now_ms)
    }

    /// Whether the sender's nonces are to be looked up now (nothing known, the queue quiet).
    pub fn needs_lookup(&self, now_ms: u64) -> bool {
        self.queue.needs_next_nonce(now_ms)
    }

    /// Starts a lookup at `now_ms`: nobody is granted the lock until it is reported.
    pub fn begin_lookup(&mut self, now_ms: u64) {
        self.queue.begin_learning(now_ms);
    }

    /// Reports a lookup: the sender's pending transaction count and, when it was learned too, its
    /// mined count (`eth_getTransactionCount` at `pending` and `latest`). The mined count only
    /// grows; the next nonce is never below it.
    pub fn learned(&mut self, pending: u64, mined: Option<u64>, now_ms: u64) -> Handoff {
        if let Some(mined) = mined {
            self.learned_mined(mined);
        }
        let next = pending.max(self.mined.unwrap_or(0));
        self.queue.learn_next_nonce(next, now_ms)
    }

    /// Reports a lookup that failed: the queue goes on without a known next nonce.
    pub fn lookup_failed(&mut self, now_ms: u64) -> Handoff {
        self.queue.learning_failed(now_ms)
    }

    fn stale(&self, nonce: u64) -> Option<Refusal> {
        let mined = self.mined?;
        (nonce < mined).then_some(Refusal::Stale { mined, nonce })
    }

    /// The hash of another accepted transaction with this nonce, not known to be mined.
    fn replaced(&self, hash: &TxHash, nonce: u64, now_ms: u64) -> Option<TxHash> {
        self.seen
            .accepted_with_nonce(nonce, now_ms)
            .filter(|holder| holder != hash)
    }

    /// Decides what becomes of a transaction (`hash`, `nonce`) arriving at `now_ms`. See
    /// [`Admission`]; a queued transaction is in flight for its copies from now on.
    pub fn admit(&mut self, hash: TxHash, nonce: u64, now_ms: u64) -> Admission {
        if self.seen.accepted(&hash, now_ms).is_some() {
            self.counters.deduplicated += 1;
            return Admission::Known;
        }
        if let Some(wait) = self.seen.join(&hash) {
            self.counters.deduplicated += 1;
            return Admission::Copy(wait);
        }
        if let Some(refusal) = self.stale(nonce) {
            self.counters.stale_refused += 1;
            return Admission::Refused(refusal);
        }
        if let Some(holder) = self.replaced(&hash, nonce, now_ms) {
            self.counters.replacements += 1;
            if self.settings.replacement == ReplacementPolicy::Reject {
                return Admission::Refused(Refusal::Replacement { nonce, holder });
            }
        }
        if self.queue.waiting() >= self.settings.max_queue {
            self.counters.queue_full += 1;
            return Admission::Refused(Refusal::QueueFull {
                max: self.settings.max_queue,
            });
        }
        self.seen.start(hash);
        Admission::Queued(self.queue.enqueue(nonce, now_ms))
    }

    /// The holder of `lock` (with `hash`, `nonce`) checks, when its turn came at `now_ms`, what was
    /// learned while it waited. `Err`: it is refused after all; report that with
    /// [`SenderState::finish`] ([`AnswerClass::Rejected`], next nonce unchanged) without sending.
    pub fn go_ahead(
        &mut self,
        lock: &Lock,
        hash: TxHash,
        nonce: u64,
        now_ms: u64,
    ) -> Result<(), Refusal> {
        self.holding = Some((lock.session_key, hash));
        if let Some(refusal) = self.stale(nonce) {
            self.counters.stale_refused += 1;
            return Err(refusal);
        }
        if self.settings.replacement == ReplacementPolicy::Reject {
            if let Some(holder) = self.replaced(&hash, nonce, now_ms) {
                return Err(Refusal::Replacement { nonce, holder });
            }
        }
        if lock.expected_nonce.is_some_and(|expected| nonce > expected) {
            self.counters.gap_waits_expired += 1;
        }
        Ok(())
    }

    /// Whether, before sending a transaction of `nonce` that went ahead, its sender's mined count
    /// is to be asked first: its nonce is below the next nonce (it is a replacement or a resend of
    /// a used nonce) and not already known to be mined. A stale one is then refused without a
    /// send ([`SenderState::recheck`]); on Hedera each send of a used nonce is a charged
    /// `WRONG_NONCE`.
    pub fn needs_mined_count(&self, nonce: u64) -> bool {
        self.queue.next_nonce().is_some_and(|next| nonce < next)
            && self.mined.is_none_or(|mined| nonce >= mined)
    }

    /// Reports the sender's mined count (`eth_getTransactionCount(sender, "latest")`), asked for
    /// [`SenderState::needs_mined_count`]; it only grows.
    pub fn learned_mined(&mut self, mined: u64) {
        self.mined = Some(self.mined.map_or(mined, |m| m.max(mined)));
    }

    /// The stale-nonce check again, after [`SenderState::learned_mined`].
    pub fn recheck(&mut self, nonce: u64) -> Result<(), Refusal> {
        match self.stale(nonce) {
            Some(refusal) => {
                self.counters.stale_refused += 1;
                Err(refusal)
            }
            None => Ok(()),
        }
    }

    /// Records the final `answer` to the transaction `held`, at `now_ms`: `sent` with the answer's
    /// class when it reached the upstream, `None` for a refusal at [`SenderState::go_ahead`]. An
    /// accepted hash joins the set, every copy gets the answer, and the lock is handed on with the
    /// answer's [`NonceEffect`] (a refusal keeps the next nonce). A late holder's release, after a
    /// force release, changes no lock, but what it learned is kept.
    pub fn finish(
        &mut self,
        held: Held,
        sent: Option<AnswerClass>,
        answer: &Answer,
        now_ms: u64,
    ) -> Finished {
        let Held {
            session_key,
            hash,
            nonce,
        } = held;
        let accepted = sent.is_some_and(AnswerClass::went_in);
        let gone = if accepted {
            self.seen.record_accepted(hash, nonce, now_ms)
        } else {
            Vec::new()
        };
        if sent.is_some() {
            self.counters.forwarded += 1;
        }
        let copies = self.seen.settle(&hash, answer);
        if self.holding.is_some_and(|(key, _)| key == session_key) {
            self.holding = None;
        }
        let effect = sent.map_or(NonceEffect::Keep, AnswerClass::effect);
        let handoff = self.queue.release(session_key, effect, now_ms);
        if handoff == Handoff::Relearn {
            self.counters.relearned += 1;
        }
        Finished {
            handoff,
            gone,
            accepted,
            copies,
        }
    }

    /// The alarm at `now_ms`: force-releases a lock held past `max_hold_ms`. The copies of the
    /// force-released transaction get -32002 (its outcome is unknown); the next nonce is then to be
    /// learned anew ([`Handoff::Relearn`]).
    pub fn expire(&mut self, now_ms: u64, max_hold_ms: u64) -> Expiry {
        let expiry = self.queue.expire(now_ms, max_hold_ms);
        if let Expiry::ForceReleased(lock) = expiry {
            self.counters.force_releases += 1;
            self.counters.relearned += 1;
            if let Some((key, hash)) = self.holding {
                if key == lock.session_key {
                    self.holding = None;
                    let unknown = Answer::error(&RpcError::new(
                        RESOURCE_UNAVAILABLE,
                        format!(
                            "transaction outcome unknown: the sender's lock was force-released after {max_hold_ms} ms"
                        ),
                    ));
                    self.seen.settle(&hash, &unknown);
                }
            }
        }
        expiry
    }

    /// See [`SenderQueue::tick`].
    pub fn tick(&mut self, now_ms: u64) -> Handoff {
        self.queue.tick(now_ms)
    }

    /// See [`SenderQueue::next_tick_ms`].
    pub fn next_tick_ms(&self) -> Option<u64> {
        self.queue.next_tick_ms()
    }

    /// The sender's next nonce after what it accepted within the idempotency window (the highest
    /// accepted nonce + 1), for `eth_getTransactionCount(sender, "pending")`.
    pub fn next_after_accepted(&self, now_ms: u64) -> Option<u64> {
        self.seen.next_after_accepted(now_ms)
    }

    /// The state at `now_ms` as JSON, for operators: the holder (session key, held ms, nonce),
    /// queue depth and queued nonces, next and mined nonce as known, whether a lookup runs, the
    /// 20 most recent accepted hashes (with nonce and age, ms), how many hashes are in flight,
    /// and the counters.
    pub fn view(&self, now_ms: u64) -> Value {
        let holder = self.queue.holder().map(|lock| {
            json!({
                "session_key": lock.session_key.to_string(),
                "held_ms": now_ms.saturating_sub(lock.acquired_at_ms),
                "nonce": lock.nonce,
            })
        });
        let accepted: Vec<Value> = self
            .seen
            .recent(20, now_ms)
            .into_iter()
            .map(|(hash, tx)| {
                json!({
                    "hash": hex::encode(&hash),
                    "nonce": tx.nonce,
                    "age_ms": now_ms.saturating_sub(tx.at_ms),
                })
            })
            .collect();
        json!({
            "holder": holder,
            "queue_depth": self.queue.waiting(),
            "queued_nonces": self.queue.waiting_nonces(),
            "next_nonce": self.queue.next_nonce(),
            "mined_nonce": self.mined,
            "looking_up_nonce": self.queue.learning(now_ms),
            "in_flight": self.seen.in_flight_len(),
            "accepted": accepted,
            "counters": self.counters,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll, Waker};

    const SETTINGS: Settings = Settings {
        gap_wait_ms: 1_000,
        max_queue: 3,
        idempotency_ttl_ms: 10_000,
        replacement: ReplacementPolicy::Forward,
    };

    fn h(n: u8) -> TxHash {
        [n; 32]
    }

    fn ready<F: Future + Unpin>(f: &mut F) -> Option<F::Output> {
        match Pin::new(f).poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(v) => Some(v),
            Poll::Pending => None,
        }
    }

    fn queued(admission: Admission) -> Turn {
        match admission {
            Admission::Queued(turn) => turn,
            _ => panic!("expected to be queued"),
        }
    }

    fn refused(admission: Admission) -> Refusal {
        match admission {
            Admission::Refused(r) => r,
            _ => panic!("expected a refusal"),
        }
    }

    #[test]
    fn copies_share_one_send_and_accepted_hashes_answer_at_once() {
        let mut s = SenderState::new(SETTINGS);
        s.learned(0, Some(0), 0);
        let mut turn = queued(s.admit(h(1), 0, 1));
        let Admission::Copy(mut copy) = s.admit(h(1), 0, 2) else {
            panic!("a copy waits")
        };
        let lock = ready(&mut turn).unwrap();
        s.go_ahead(&lock, h(1), 0, 3).unwrap();
        assert!(ready(&mut copy).is_none());
        let answer = Answer::hash(&h(1));
        let done = s.finish(
            Held {
                session_key: lock.session_key,
                hash: h(1),
                nonce: 0,
            },
            Some(AnswerClass::Accepted),
            &answer,
            4,
        );
        assert_eq!(
            (done.accepted, done.copies, done.handoff),
            (true, 1, Handoff::Idle)
        );
        assert_eq!(ready(&mut copy), Some(answer));
        assert!(matches!(s.admit(h(1), 0, 5), Admission::Known));
        assert_eq!(s.next_after_accepted(5), Some(1));
        assert_eq!((s.counters.forwarded, s.counters.deduplicated), (1, 2));
        // After the window the hash is an ordinary transaction again.
        assert!(matches!(s.admit(h(1), 0, 10_004), Admission::Queued(_)));
    }

    #[test]
    fn stale_nonces_are_refused_with_geths_wording() {
        let mut s = SenderState::new(SETTINGS);
        s.learned(7, Some(5), 0);
        let r = refused(s.admit(h(9), 4, 1));
        assert_eq!(r, Refusal::Stale { mined: 5, nonce: 4 });
        assert_eq!(
            r.to_rpc("0xab").message,
            "nonce too low: next nonce 5, tx nonce 4"
        );
        assert_eq!(r.to_rpc("0xab").code, -32000);
        assert_eq!(s.counters.stale_refused, 1);
        // Not stale: at or above the mined count.
        assert!(matches!(s.admit(h(8), 5, 1), Admission::Queued(_)));
        // A lagging lookup never lowers the mined count.
        s.learned(3, Some(2), 2);
        assert_eq!(s.mined(), Some(5));
    }

    #[test]
    fn a_nonce_learned_while_waiting_refuses_at_the_turn() {
        let mut s = SenderState::new(SETTINGS);
        s.begin_lookup(0);
        let mut turn = queued(s.admit(h(1), 2, 0));
        s.learned(6, Some(6), 1);
        let lock = ready(&mut turn).unwrap();
        assert_eq!(
            s.go_ahead(&lock, h(1), 2, 1),
            Err(Refusal::Stale { mined: 6, nonce: 2 })
        );
        let answer = Answer::error(&Refusal::Stale { mined: 6, nonce: 2 }.to_rpc("0xab"));
        let done = s.finish(
            Held {
                session_key: lock.session_key,
                hash: h(1),
                nonce: 2,
            },
            None,
            &answer,
            2,
        );
        assert_eq!(done.handoff, Handoff::Idle);
        assert_eq!(s.queue().next_nonce(), Some(6));
        assert_eq!(s.counters.forwarded, 0);
    }

    #[test]
    fn a_nonce_below_the_next_is_checked_against_the_mined_count_before_it_is_sent() {
        let mut s = SenderState::new(SETTINGS);
        s.learned(0, Some(0), 0);
        let mut t0 = queued(s.admit(h(1), 0, 0));
        let l0 = ready(&mut t0).unwrap();
        s.go_ahead(&l0, h(1), 0, 0).unwrap();
        assert!(!s.needs_mined_count(0), "the next nonce itself");
        s.finish(
            Held::of(&l0, h(1), 0),
            Some(AnswerClass::Accepted),
            &Answer::hash(&h(1)),
            1,
        );
        // A different transaction with nonce 0: a replacement, or a resend of a mined nonce.
        let mut t = queued(s.admit(h(2), 0, 2));
        let l = ready(&mut t).unwrap();
        s.go_ahead(&l, h(2), 0, 2).unwrap();
        assert!(s.needs_mined_count(0));
        s.learned_mined(1);
        assert_eq!(s.recheck(0), Err(Refusal::Stale { mined: 1, nonce: 0 }));
        assert!(!s.needs_mined_count(0), "known to be mined now");
        s.learned_mined(0);
        assert_eq!(s.mined(), Some(1), "the mined count never goes down");
    }

    #[test]
    fn replacements_by_policy() {
        for policy in [ReplacementPolicy::Forward, ReplacementPolicy::Reject] {
            let mut s = SenderState::new(Settings {
                replacement: policy,
                ..SETTINGS
            });
            s.learned(0, Some(0), 0);
            let mut turn = queued(s.admit(h(1), 0, 0));
            let lock = ready(&mut turn).unwrap();
            s.go_ahead(&lock, h(1), 0, 0).unwrap();
            s.finish(
                Held {
                    session_key: lock.session_key,
                    hash: h(1),
                    nonce: 0,
                },
                Some(AnswerClass::Accepted),
                &Answer::hash(&h(1)),
                1,
            );
            let admission = s.admit(h(2), 0, 2);
            assert_eq!(s.counters.replacements, 1);
            match policy {
                ReplacementPolicy::Forward => {
                    let mut turn = queued(admission);
                    let lock = ready(&mut turn).expect("below the next nonce: no gap wait");
                    s.go_ahead(&lock, h(2), 0, 3).unwrap();
                    let done = s.finish(
                        Held {
                            session_key: lock.session_key,
                            hash: h(2),
                            nonce: 0,
                        },
                        Some(AnswerClass::Accepted),
                        &Answer::hash(&h(2)),
                        4,
                    );
                    assert_eq!(done.gone, vec![h(1)], "the replaced hash is forgotten");
                    assert_eq!(s.queue().next_nonce(), Some(1));
                }
                ReplacementPolicy::Reject => {
                    let r = refused(admission);
                    assert_eq!(
                        r,
                        Refusal::Replacement {
                            nonce: 0,
                            holder: h(1)
                        }
                    );
                    let message = r.to_rpc("0xab").message;
                    assert!(
                        message.contains("nonce 0") && message.contains(&hex::encode(&h(1))),
                        "{message}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_queue_is_bounded_and_a_refusal_changes_nothing_else() {
        let mut s = SenderState::new(SETTINGS);
        s.learned(0, Some(0), 0);
        let _holder = queued(s.admit(h(0), 0, 0));
        let _waiting: Vec<Turn> = (1..=3)
            .map(|n| queued(s.admit(h(n), u64::from(n), 0)))
            .collect();
        let r = refused(s.admit(h(4), 4, 0));
        assert_eq!(r, Refusal::QueueFull { max: 3 });
        let e = r.to_rpc("0xabc");
        assert_eq!(e.code, -32005);
        assert!(e
            .message
            .starts_with("too many queued transactions for sender 0xabc"));
        assert_eq!(s.queue().waiting(), 3);
        assert!(!s.seen.in_flight(&h(4)));
        assert_eq!(s.counters.queue_full, 1);
    }

    #[test]
    fn force_release_answers_the_copies_and_relearns() {
        let mut s = SenderState::new(SETTINGS);
        s.learned(0, Some(0), 0);
        let mut turn = queued(s.admit(h(1), 0, 0));
        let mut copy = match s.admit(h(1), 0, 1) {
            Admission::Copy(c) => c,
            _ => panic!(),
        };
        let lock = ready(&mut turn).unwrap();
        s.go_ahead(&lock, h(1), 0, 1).unwrap();
        assert_eq!(s.expire(30_000, 30_000), Expiry::ForceReleased(lock));
        let Some(Answer::Error(text)) = ready(&mut copy) else {
            panic!("the copy gets an error")
        };
        assert!(
            text.contains("-32002") && text.contains("outcome unknown"),
            "{text}"
        );
        assert!(s.queue().learning(30_000));
        // The late holder's accepted answer is still learned.
        let done = s.finish(
            Held {
                session_key: lock.session_key,
                hash: h(1),
                nonce: 0,
            },
            Some(AnswerClass::Accepted),
            &Answer::hash(&h(1)),
            30_001,
        );
        assert_eq!(done.handoff, Handoff::Ignored);
        assert!(matches!(s.admit(h(1), 0, 30_002), Admission::Known));
        assert_eq!(s.counters.force_releases, 1);
    }

    #[test]
    fn the_view_shows_holder_queue_nonces_and_counters() {
        let mut s = SenderState::new(SETTINGS);
        s.learned(3, Some(2), 0);
        let mut t3 = queued(s.admit(h(3), 3, 0));
        let _t5 = queued(s.admit(h(5), 5, 0));
        let lock = ready(&mut t3).unwrap();
        let v = s.view(40);
        assert_eq!(v["holder"]["nonce"], 3);
        assert_eq!(v["holder"]["held_ms"], 40);
        assert_eq!(v["holder"]["session_key"], lock.session_key.to_string());
        assert_eq!(v["queue_depth"], 1);
        assert_eq!(v["queued_nonces"], json!([5]));
        assert_eq!(
            (v["next_nonce"].clone(), v["mined_nonce"].clone()),
            (json!(3), json!(2))
        );
        assert_eq!(v["counters"]["forwarded"], 0);
        s.go_ahead(&lock, h(3), 3, 41).unwrap();
        s.finish(
            Held {
                session_key: lock.session_key,
                hash: h(3),
                nonce: 3,
            },
            Some(AnswerClass::Accepted),
            &Answer::hash(&h(3)),
            50,
        );
        let v = s.view(60);
        assert_eq!(v["accepted"][0]["hash"], hex::encode(&h(3)));
        assert_eq!(v["accepted"][0]["age_ms"], 10);
        assert_eq!(v["counters"]["forwarded"], 1);
    }
}
