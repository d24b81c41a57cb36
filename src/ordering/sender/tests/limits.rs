//! What one sender's object may keep (issue 32): a transaction too large for a storage row is
//! refused before it is stored or sent; a row the platform refuses anyway refuses that
//! transaction alone, unsent, and the queue goes on; `MAX_SENDER_BYTES` bounds the bytes held
//! whatever their stage; with only pending transactions accepted, a new one is refused.

use super::*;
use crate::ordering::accepted::MAX_ACCEPTED;
use crate::ordering::row::MAX_ROW_LEN;

const WINDOW: Settings = Settings {
    send_window: 4,
    max_queue: 16,
    ..SETTINGS
};

#[test]
fn a_transaction_too_large_to_store_is_refused_unsent_and_the_next_goes_at_once() {
    let mut r = Rig::new(SETTINGS);
    r.arrive(0);
    r.learn(0, 0);
    r.accept_next();
    let big = r.arrive_sized(1, 0, MAX_ROW_LEN);
    let (code, message) = r.error_of(big);
    assert_eq!(code, -32005);
    assert!(
        message.starts_with("transaction too large for the relay to store: "),
        "{message}"
    );
    assert!(r.sends.is_empty() && !r.rows.contains_key(&h(1, 0)));
    // The sender's next transaction takes nonce 1 at once: nothing is held or waited out.
    r.arrive_variant(1, 1);
    assert_eq!(r.send().hash, h(1, 1));
    assert_eq!(r.events("tx_refused")[0].label, "too_large");
}

#[test]
fn a_row_the_platform_refuses_refuses_that_transaction_alone_and_the_window_waits_behind_it() {
    let mut r = Rig::new(WINDOW);
    r.fx.row_limit = Some(1_000);
    // 1 is too big for the platform's row (not for the relay's own bound); 2 and 3 wait with it
    // for the next nonce, then go as one window.
    let tickets = [r.arrive_sized(1, 0, 5_000), r.arrive(2), r.arrive(3)];
    r.learn(1, 1);
    let refused = r.error_of(tickets[0]);
    assert_eq!(refused.0, -32603);
    assert!(refused.1.contains("could not store"), "{}", refused.1);
    assert!(!r.rows.contains_key(&h(1, 0)));
    // Neither it nor the members above the gap it leaves went out; they wait for nonce 1.
    assert!(r.sends.is_empty(), "{:?}", r.log);
    assert!(!r.answers.contains_key(&tickets[1]));
    assert!(!r.answers.contains_key(&tickets[2]));
    // A corrected 1 fills the gap, and 2 and 3 follow.
    r.arrive_variant(1, 1);
    let sent: Vec<u64> =
        std::iter::from_fn(|| (!r.sends.is_empty()).then(|| r.accept_next().nonce)).collect();
    assert_eq!(sent, vec![1, 2, 3]);
    assert_eq!(r.answer(tickets[2]).0, Answer::hash(&h(3, 0)));
    assert_eq!(r.events("tx_refused")[0].label, "not_stored");
}

#[test]
fn sender_bytes_are_bounded_whatever_the_stage_and_the_lowest_waiting_is_never_refused() {
    let mut r = Rig::new(Settings {
        max_bytes: 3_000,
        max_queue: 64,
        ..SETTINGS
    });
    // n = 0 is missing: 1..4 of 1,000 bytes each wait behind it; the fourth is over.
    let above: Vec<Ticket> = (1..5).map(|n| r.arrive_sized(n, 0, 1_000)).collect();
    r.learn(0, 0);
    assert_eq!(r.error_of(above[3]).0, -32005);
    assert!(r.error_of(above[3]).1.contains("MAX_SENDER_BYTES"));
    assert_eq!(r.answer(above[3]).1, Some(1), "Retry-After");
    assert!(!r.answers.contains_key(&above[2]));
    // A bigger newcomer below them all waits (it unblocks the queue); the highest ones leave.
    let zero = r.arrive_sized(0, 0, 1_500);
    assert!(!r.answers.contains_key(&zero));
    assert_eq!(r.error_of(above[2]).0, -32005);
    assert_eq!(r.error_of(above[1]).0, -32005);
    assert!(!r.answers.contains_key(&above[0]));
    // The holder counts while it is sent: a newcomer above it is refused.
    let call = r.send();
    assert_eq!(call.nonce, 0);
    let late = r.arrive_sized(7, 0, 1_000);
    assert_eq!(r.error_of(late).0, -32005);
    r.finish(&call, AnswerClass::Accepted);
    assert_eq!(r.accept_next().nonce, 1);
    assert_eq!(r.s.counters.queue_full, 4);
}

#[test]
fn with_only_pending_transactions_accepted_a_new_one_is_refused() {
    let mut r = Rig::new(Settings {
        max_queue: 64,
        track_ttl_ms: u64::MAX / 4,
        idempotency_ttl_ms: u64::MAX / 4,
        ..SETTINGS
    });
    r.arrive(0);
    r.learn(0, 0);
    r.accept_next();
    for n in 1..MAX_ACCEPTED as u64 {
        r.arrive(n);
        r.accept_next();
    }
    let one_more = r.arrive(MAX_ACCEPTED as u64);
    let (code, message) = r.error_of(one_more);
    assert_eq!(code, -32005);
    assert!(
        message.contains("too many pending transactions"),
        "{message}"
    );
    assert_eq!(r.answer(one_more).1, Some(12));
    assert!(r.sends.is_empty());
    // None of the pending ones was forgotten: each still holds its nonce.
    assert_eq!(r.s.status(&h(0, 0), r.now).unwrap()["status"], "pending");
}
