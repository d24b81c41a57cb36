//! What one sender's object may keep (issue 32): a transaction too large for a storage row is
//! refused before it is stored or sent; a row the platform refuses anyway refuses that
//! transaction alone, unsent, and the queue goes on; `MAX_SENDER_BYTES` bounds the bytes held
//! whatever their stage; with only pending transactions accepted, a new one is refused; and a
//! refusal for any of these bounds never opens a gap.

use super::*;
use crate::ordering::accepted::MAX_ACCEPTED;
use crate::ordering::row::MAX_ROW_LEN;

/// Tracking on, nothing expiring: the pending bound alone.
const PENDING: Settings = Settings {
    max_queue: 64,
    track_interval_ms: 12_000,
    track_ttl_ms: u64::MAX / 4,
    idempotency_ttl_ms: u64::MAX / 4,
    ..SETTINGS
};

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
    assert!(
        r.error_of(late).1.contains("nonce 2"),
        "above the refused 2: {}",
        r.error_of(late).1
    );
    r.finish(&call, AnswerClass::Accepted);
    assert_eq!(r.accept_next().nonce, 1);
    assert_eq!(r.s.counters.queue_full, 3);
    assert_eq!(r.s.counters.above_refused, 1);
}

#[test]
fn with_only_pending_transactions_accepted_a_new_one_is_refused() {
    let mut r = Rig::new(PENDING);
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

/// Issue 39: n refused for a bound while free is a hole; n+1.. are refused too (waiting and
/// arriving, with the bound's `Retry-After`), nothing of the sender is sent above it, and a
/// client that sends n again after `Retry-After`, then the rest, gets everything in.
#[test]
fn a_refusal_for_a_bound_never_opens_a_gap_and_the_retry_gets_everything_in() {
    let mut r = Rig::new(SETTINGS); // MAX_QUEUE_PER_SENDER 3
    r.arrive(0);
    r.learn(0, 0);
    let holder = r.send();
    // 1..3 wait behind the holder; 4 is one over the bound: refused (the highest waiting).
    let waiting: Vec<Ticket> = (1..=3).map(|n| r.arrive(n)).collect();
    let four = r.arrive(4);
    assert_eq!(r.error_of(four).0, -32005);
    assert_eq!(r.answer(four).1, Some(1));
    assert_eq!(r.s.view(r.now)["refused_hole"], 4);
    // The next nonces arrive before the retry: refused too, with the same Retry-After, unsent.
    let above: Vec<Ticket> = (5..=7).map(|n| r.arrive(n)).collect();
    for t in &above {
        let (code, message) = r.error_of(*t);
        assert_eq!(code, -32005);
        assert!(
            message.contains("nonce 4") && message.contains("retry after 1 s"),
            "{message}"
        );
        assert_eq!(r.answer(*t).1, Some(1));
    }
    assert_eq!(
        r.events("tx_refused")
            .iter()
            .filter(|m| m.label == "above_refused")
            .count(),
        3
    );
    // The queue drains; nothing above the hole goes, even after its gap wait.
    r.finish(&holder, AnswerClass::Accepted);
    for n in 1..=3 {
        assert_eq!(r.accept_next().nonce, n);
    }
    r.at(r.now + SETTINGS.gap_wait_ms + 1);
    assert!(r.sends.is_empty(), "{:?}", r.log);
    assert!(waiting
        .iter()
        .all(|t| r.answer(*t).0.error_parts().is_none()));
    // The client sends 4 again after Retry-After, then 5..7: each goes, in nonce order.
    r.at(r.now + 1_000);
    let retried: Vec<Ticket> = (4..=7).map(|n| r.arrive(n)).collect();
    let sent: Vec<u64> =
        std::iter::from_fn(|| (!r.sends.is_empty()).then(|| r.accept_next().nonce)).collect();
    assert_eq!(sent, vec![4, 5, 6, 7]);
    assert!(retried
        .iter()
        .all(|t| r.answer(*t).0.error_parts().is_none()));
    assert_eq!(r.s.view(r.now)["refused_hole"], serde_json::Value::Null);
}

/// The same with the pending bound: n refused while the object follows as many outstanding as
/// it may; n+1 refused above it (not taken when room is made); after the next check settles some,
/// n and then n+1 go.
#[test]
fn a_refusal_for_the_pending_bound_refuses_the_nonces_above_until_it_is_sent_again() {
    let mut r = Rig::new(PENDING);
    let max = MAX_ACCEPTED as u64;
    r.arrive(0);
    r.learn(0, 0);
    r.accept_next();
    for n in 1..max {
        r.arrive(n);
        r.accept_next();
    }
    let refused = r.arrive(max);
    assert_eq!(r.error_of(refused).0, -32005);
    assert_eq!(r.answer(refused).1, Some(12));
    // The next check finds the first hundred in blocks: room for more, but not above the hole.
    let mined: Vec<(TxHash, Seen)> = (0..100)
        .map(|k| (h(k, 0), Seen::Included { block: 1 }))
        .collect();
    r.track_counts(100, max, &mined, &[], None);
    let above = r.arrive(max + 1);
    let (code, message) = r.error_of(above);
    assert_eq!(code, -32005);
    assert!(message.contains(&format!("nonce {max} ")), "{message}");
    assert_eq!(r.answer(above).1, Some(12), "the same Retry-After");
    assert!(r.sends.is_empty());
    // The client sends both again: each goes, in order.
    let again = [r.arrive(max), r.arrive(max + 1)];
    assert_eq!(r.accept_next().nonce, max);
    assert_eq!(r.accept_next().nonce, max + 1);
    assert!(again.iter().all(|t| r.answer(*t).0.error_parts().is_none()));
}

/// A hole is no hole once its nonce is used: the upstream's counts, asked while nonces above it
/// are refused, show it taken (sent around the relay), and the next ones go.
#[test]
fn a_hole_whose_nonce_was_used_around_the_relay_closes_on_the_next_counts() {
    let mut r = Rig::new(SETTINGS);
    r.arrive(0);
    r.learn(0, 0);
    let holder = r.send();
    for n in 1..=3 {
        r.arrive(n);
    }
    let four = r.arrive(4);
    assert_eq!(r.error_of(four).0, -32005);
    r.finish(&holder, AnswerClass::Accepted);
    for n in 1..=3 {
        assert_eq!(r.accept_next().nonce, n);
    }
    // 5 arrives: refused, and the counts are asked; the node's say 4 is taken (pending 5).
    let five = r.arrive(5);
    assert_eq!(r.error_of(five).0, -32005);
    r.learn(5, 4);
    assert_eq!(r.s.nonces().0, Some(5));
    // 5 again: not above a free nonce any more, it goes.
    let again = r.arrive(5);
    assert_eq!(r.accept_next().nonce, 5);
    assert!(r.answer(again).0.error_parts().is_none());
}
