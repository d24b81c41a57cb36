//! A property test of one sender's state machine (src/ordering/sender.rs), driven the way its
//! Durable Object drives it, through random interleavings of arrivals (new transactions, copies,
//! replacements), the holder's sends and the upstream's answers of every class, retries, time,
//! alarms and nonce lookups. Invariants:
//!
//! - never two holders: a lock is granted only when no other holder is live (granted, not yet
//!   finished, not force-released);
//! - never two upstream sends of one hash at once;
//! - grants in nonce order: the lock goes to the lowest waiting nonce, and while the next nonce is
//!   known, a nonce above it only after its gap wait;
//! - a hash accepted within the idempotency window, or queued or in flight, is never queued (to be
//!   sent) again;
//! - every copy of a transaction gets an answer once the first copy has its final one.

use nonce_relay::jsonrpc::Answer;
use nonce_relay::ordering::answer::AnswerClass;
use nonce_relay::ordering::queue::{Expiry, Lock, Turn};
use nonce_relay::ordering::seen::{OutcomeWait, TxHash};
use nonce_relay::ordering::sender::{Admission, Held, ReplacementPolicy, SenderState, Settings};
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

const GAP_WAIT_MS: u64 = 100;
const MAX_HOLD_MS: u64 = 1_000;
const TTL_MS: u64 = 5_000;
const RETRIES: u32 = 2;

const CLASSES: [AnswerClass; 10] = [
    AnswerClass::Accepted,
    AnswerClass::AlreadyKnown,
    AnswerClass::NonceTooLow,
    AnswerClass::NonceTooHigh,
    AnswerClass::WrongNonce,
    AnswerClass::ReplacementUnderpriced,
    AnswerClass::Rejected,
    AnswerClass::Busy,
    AnswerClass::Unavailable,
    AnswerClass::Unrecognized,
];

#[derive(Debug, Clone)]
enum Op {
    /// A transaction arrives: nonce 0..6, variant 0 (the original) or 1 (a replacement).
    Arrive(u8, bool),
    /// The live holder sends its bytes.
    Send,
    /// The upstream answers the send in flight with this class.
    Answer(usize),
    /// Time passes (ms); the queue ticks if due.
    Advance(u16),
    /// The storage alarm fires.
    Alarm,
    /// A lookup under way reports (pending, mined), or fails.
    Lookup(Option<(u8, u8)>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0u8..7, prop::bool::weighted(0.15)).prop_map(|(n, r)| Op::Arrive(n, r)),
        4 => Just(Op::Send),
        4 => (0..CLASSES.len()).prop_map(Op::Answer),
        3 => (1u16..400).prop_map(Op::Advance),
        1 => Just(Op::Alarm),
        2 => prop::option::weighted(0.8, (0u8..5, 0u8..5)).prop_map(Op::Lookup),
    ]
}

fn hash(nonce: u8, replacement: bool) -> TxHash {
    let mut h = [0u8; 32];
    h[0] = nonce;
    h[1] = u8::from(replacement);
    h
}

fn ready<F: Future + Unpin>(f: &mut F) -> Option<F::Output> {
    match Pin::new(f).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => Some(v),
        Poll::Pending => None,
    }
}

struct Waiting {
    turn: Turn,
    hash: TxHash,
    nonce: u64,
    enqueued_at: u64,
}

struct Holder {
    lock: Lock,
    hash: TxHash,
    nonce: u64,
    attempts: u32,
    sending: bool,
}

#[derive(Default)]
struct Model {
    now: u64,
    waiting: Vec<Waiting>,
    holder: Option<Holder>,
    on_the_wire: HashSet<TxHash>,
    copies: Vec<(TxHash, OutcomeWait)>,
    /// Hashes accepted, with when.
    accepted: HashMap<TxHash, u64>,
    /// Hashes whose first copy has its final answer (or was force-released).
    settled: HashSet<TxHash>,
}

fn run(ops: Vec<Op>, policy: ReplacementPolicy) -> Result<(), TestCaseError> {
    let mut s = SenderState::new(Settings {
        gap_wait_ms: GAP_WAIT_MS,
        max_queue: 6,
        idempotency_ttl_ms: TTL_MS,
        replacement: policy,
    });
    let mut m = Model {
        now: 1_000,
        ..Model::default()
    };
    let class_answer = |class: AnswerClass, h: &TxHash| match class {
        c if c.went_in() => Answer::hash(h),
        c => Answer::Error(format!(r#"{{"code":-32000,"message":"{}"}}"#, c.label())),
    };
    for op in ops {
        match op {
            Op::Arrive(n, replacement) => {
                let h = hash(n, replacement);
                if s.needs_lookup(m.now) {
                    s.begin_lookup(m.now);
                }
                let fresh_accepted = m.accepted.get(&h).is_some_and(|at| m.now < at + TTL_MS);
                match s.admit(h, u64::from(n), m.now) {
                    Admission::Queued(turn) => {
                        prop_assert!(!fresh_accepted, "an accepted hash was queued again");
                        let queued = m.waiting.iter().any(|w| w.hash == h)
                            || m.holder.as_ref().is_some_and(|x| x.hash == h);
                        prop_assert!(
                            !queued,
                            "a copy of a queued or in-flight hash was queued too"
                        );
                        m.settled.remove(&h);
                        m.waiting.push(Waiting {
                            turn,
                            hash: h,
                            nonce: u64::from(n),
                            enqueued_at: m.now,
                        });
                    }
                    Admission::Copy(wait) => m.copies.push((h, wait)),
                    Admission::Known => {
                        prop_assert!(fresh_accepted, "Known for a hash not accepted")
                    }
                    Admission::Refused(_) => {}
                }
            }
            Op::Send => {
                if let Some(holder) = m.holder.as_mut().filter(|h| !h.sending) {
                    prop_assert!(
                        m.on_the_wire.insert(holder.hash),
                        "two sends of one hash at once"
                    );
                    holder.sending = true;
                    holder.attempts += 1;
                }
            }
            Op::Answer(i) => {
                let class = CLASSES[i];
                if let Some(holder) = m.holder.as_mut().filter(|h| h.sending) {
                    m.on_the_wire.remove(&holder.hash);
                    holder.sending = false;
                    if !(class.retryable() && holder.attempts <= RETRIES) {
                        let holder = m.holder.take().unwrap();
                        let answer = class_answer(class, &holder.hash);
                        s.finish(
                            Held::of(&holder.lock, holder.hash, holder.nonce),
                            Some(class),
                            &answer,
                            m.now,
                        );
                        if class.went_in() {
                            // A replacement takes its nonce from the hash it replaced.
                            m.accepted.retain(|h, _| h[0] != holder.hash[0]);
                            m.accepted.insert(holder.hash, m.now);
                        }
                        m.settled.insert(holder.hash);
                    }
                }
            }
            Op::Advance(ms) => {
                m.now += u64::from(ms);
                if s.next_tick_ms().is_some_and(|t| t <= m.now) {
                    s.tick(m.now);
                }
            }
            Op::Alarm => {
                if let Expiry::ForceReleased(lock) = s.expire(m.now, MAX_HOLD_MS) {
                    // The holder's attempt was cut to the same deadline: it is over, and its
                    // late release changes no lock.
                    if let Some(holder) = m.holder.take() {
                        prop_assert_eq!(holder.lock, lock);
                        m.on_the_wire.remove(&holder.hash);
                        m.settled.insert(holder.hash);
                        let answer = class_answer(AnswerClass::Unavailable, &holder.hash);
                        s.finish(
                            Held::of(&holder.lock, holder.hash, holder.nonce),
                            Some(AnswerClass::Unavailable),
                            &answer,
                            m.now,
                        );
                    }
                }
            }
            Op::Lookup(report) => {
                if s.queue().learning(m.now) {
                    match report {
                        Some((pending, mined)) => {
                            s.learned(u64::from(pending), Some(u64::from(mined)), m.now)
                        }
                        None => s.lookup_failed(m.now),
                    };
                }
            }
        }
        // Grants: at most one at a time, and only to the lowest waiting nonce. A holder refused at
        // its turn releases at once, which may grant the next: look again until none is new.
        loop {
            let mut granted = Vec::new();
            for (i, w) in m.waiting.iter_mut().enumerate() {
                if let Some(lock) = ready(&mut w.turn) {
                    granted.push((i, lock));
                }
            }
            prop_assert!(granted.len() <= 1, "two grants at once");
            let Some((i, lock)) = granted.pop() else {
                break;
            };
            {
                prop_assert!(m.holder.is_none(), "a grant while another holder is live");
                let w = m.waiting.remove(i);
                prop_assert_eq!(lock.nonce, Some(w.nonce));
                let lowest = m.waiting.iter().map(|o| o.nonce).min().unwrap_or(u64::MAX);
                prop_assert!(
                    w.nonce <= lowest,
                    "granted {} with {} waiting",
                    w.nonce,
                    lowest
                );
                if let Some(expected) = lock.expected_nonce {
                    prop_assert!(
                        w.nonce <= expected || m.now >= w.enqueued_at + GAP_WAIT_MS,
                        "nonce {} went past next nonce {} before its gap wait",
                        w.nonce,
                        expected
                    );
                }
                match s.go_ahead(&lock, w.hash, w.nonce, m.now) {
                    Ok(()) => {
                        m.holder = Some(Holder {
                            lock,
                            hash: w.hash,
                            nonce: w.nonce,
                            attempts: 0,
                            sending: false,
                        })
                    }
                    Err(refusal) => {
                        let answer = Answer::error(&refusal.to_rpc("0xabc"));
                        s.finish(Held::of(&lock, w.hash, w.nonce), None, &answer, m.now);
                        m.settled.insert(w.hash);
                    }
                }
            }
        }
        prop_assert_eq!(
            s.queue().holder().map(|l| l.session_key),
            m.holder.as_ref().map(|h| h.lock.session_key),
            "the model and the queue agree on the holder"
        );
        // Every copy of a settled hash has its answer.
        for (h, wait) in m.copies.iter_mut() {
            if m.settled.contains(h)
                && !m.waiting.iter().any(|w| w.hash == *h)
                && m.holder.as_ref().is_none_or(|x| x.hash != *h)
            {
                prop_assert!(ready(wait).is_some(), "a copy was left without an answer");
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn interleavings_keep_one_holder_one_send_per_hash_and_nonce_order(
        ops in prop::collection::vec(op(), 1..120),
        reject in any::<bool>(),
    ) {
        let policy = if reject { ReplacementPolicy::Reject } else { ReplacementPolicy::Forward };
        run(ops, policy)?;
    }
}
