//! `UPSTREAM_POOL=strict`: nothing above a nonce gap is ever sent; a terminal refusal of the
//! missing nonce refuses the waiters above it at once; a corrected nonce within the gap wait lets
//! the queue go on.

use super::*;

const STRICT: Settings = Settings {
    pool: PoolKind::Strict,
    max_queue: 16,
    ..SETTINGS
};

#[test]
fn a_refused_n_refuses_the_nine_waiting_above_it_at_once_unsent() {
    let mut r = Rig::new(STRICT);
    let above: Vec<Ticket> = (1..10).map(|n| r.arrive(n)).collect();
    r.learn(0, 0);
    let n = r.arrive(0);
    let call = r.send();
    assert_eq!(call.nonce, 0);
    r.finish(&call, AnswerClass::Rejected);
    assert_eq!(r.error_of(n).1, "rejected");
    for (m, t) in (1..10).zip(&above) {
        let (code, message) = r.error_of(*t);
        assert_eq!(code, -32000);
        assert!(
            message.starts_with(&format!(
                "nonce too high: next nonce 0, tx nonce {m}; not sent: nonce 0 was refused"
            )),
            "{message}"
        );
    }
    assert!(r.sends.is_empty(), "nothing above the gap was sent");
    assert_eq!(r.s.counters.gap_refused, 9);
    assert_eq!(r.events("tx_refused").len(), 9);
    assert!(r.s.is_quiet());
}

#[test]
fn under_mempool_the_waiters_keep_their_gap_wait_and_go_after_it() {
    let mut r = Rig::new(SETTINGS);
    let above = r.arrive(1);
    r.learn(0, 0);
    r.arrive(0);
    let call = r.send();
    r.finish(&call, AnswerClass::Rejected);
    assert!(!r.answers.contains_key(&above), "still waiting");
    r.at(r.now + SETTINGS.gap_wait_ms);
    assert_eq!(r.send().nonce, 1, "sent over the gap after the wait");
}

#[test]
fn an_expired_gap_is_refused_instead_of_sent() {
    let mut r = Rig::new(STRICT);
    let start = r.now;
    let t2 = r.arrive(2);
    r.learn(0, 0);
    assert_eq!(r.s.poll_timeout(), Some(start + STRICT.gap_wait_ms));
    r.at(start + STRICT.gap_wait_ms - 1);
    assert!(!r.answers.contains_key(&t2));
    let t3 = r.arrive(3);
    r.at(start + STRICT.gap_wait_ms);
    assert_eq!(
        r.error_of(t2),
        (
            -32000,
            "nonce too high: next nonce 0, tx nonce 2; not sent: nonce 0 did not arrive within NONCE_GAP_WAIT_MS, and the upstream refuses nonce gaps (UPSTREAM_POOL=strict)".into()
        )
    );
    assert!(!r.answers.contains_key(&t3), "its own gap wait still runs");
    r.at(r.now + STRICT.gap_wait_ms);
    assert_eq!(r.error_of(t3).0, -32000);
    assert!(r.sends.is_empty());
    assert_eq!(r.events("gap_wait_expired").len(), 0);
}

#[test]
fn a_corrected_n_within_the_gap_wait_lets_the_queue_go_on() {
    let mut r = Rig::new(STRICT);
    // n was refused before it reached the object (a fork rule): n+1..n+9 wait.
    let tickets: Vec<Ticket> = (1..10).map(|n| r.arrive(n)).collect();
    r.learn(0, 0);
    r.at(r.now + STRICT.gap_wait_ms - 10);
    r.arrive(0);
    for n in 0..10 {
        let call = r.send();
        assert_eq!(call.nonce, n);
        r.finish(&call, AnswerClass::Accepted);
    }
    for (n, t) in (1..10).zip(tickets) {
        assert_eq!(r.answer(t).0, Answer::hash(&h(n, 0)));
    }
    assert_eq!(r.s.counters.gap_refused, 0);
}

#[test]
fn after_a_refusal_later_arrivals_wait_for_the_corrected_n() {
    let mut r = Rig::new(STRICT);
    r.arrive(0);
    r.learn(0, 0);
    let call = r.send();
    r.finish(&call, AnswerClass::Rejected);
    // The client resends n+1 and then a corrected n.
    let again = r.arrive(1);
    r.arrive_variant(0, 1);
    let call = r.send();
    assert_eq!((call.nonce, call.hash), (0, h(0, 1)));
    r.finish(&call, AnswerClass::Accepted);
    let call = r.send();
    assert_eq!(call.nonce, 1);
    r.finish(&call, AnswerClass::Accepted);
    assert_eq!(r.answer(again).0, Answer::hash(&h(1, 0)));
}

#[test]
fn a_refusal_below_the_next_nonce_refuses_nobody() {
    let mut r = Rig::new(Settings {
        replacement: ReplacementPolicy::Forward,
        ..STRICT
    });
    r.arrive(0);
    r.learn(0, 0);
    r.accept_next();
    // A replacement of 0 refused (it is below the next nonce 1): 2 waits for 1, not for 0.
    r.arrive_variant(0, 1);
    let (id, _) = r.lookup();
    r.reply(id, known(&[(h(0, 1), false)]));
    let t2 = r.arrive(2);
    let call = r.send();
    r.finish(&call, AnswerClass::Rejected);
    assert!(!r.answers.contains_key(&t2));
    r.arrive(1);
    assert_eq!(r.send().nonce, 1);
}

#[test]
fn a_send_and_wait_call_above_a_refused_n_gets_eip_7966_code_6() {
    let mut r = Rig::new(STRICT);
    let ticket = r.ticket();
    r.s.arrive(ticket, Rig::sync_arrival(1, 0), r.now);
    r.drain();
    r.learn(0, 0);
    r.arrive(0);
    let call = r.send();
    r.finish(&call, AnswerClass::Rejected);
    assert_eq!(r.error_of(ticket).0, 6);
    assert!(r.sends.is_empty());
}

#[test]
fn a_new_transaction_with_a_nonce_mined_since_is_too_low_not_a_refused_replacement() {
    // Issue 32, point 9: nonce 0 accepted, then mined; the count the object knows is still 0.
    let mut r = Rig::new(Settings {
        replacement: ReplacementPolicy::Reject,
        ..STRICT
    });
    r.arrive(0);
    r.learn(0, 0);
    r.accept_next();
    let other = r.arrive_variant(0, 1);
    let (id, query) = r.lookup();
    assert!(query.latest, "the mined count is asked: {query:?}");
    r.reply(
        id,
        Ok(Found {
            latest: Some(1),
            known: seen(&[(h(0, 1), false)]),
            ..Found::default()
        }),
    );
    assert_eq!(
        r.error_of(other),
        (-32000, "nonce too low: next nonce 1, tx nonce 0".into())
    );
    assert!(r.sends.is_empty());
    assert_eq!(r.s.counters.replacements, 0);
    assert_eq!(r.s.counters.stale_refused, 1);
    // A resend of the mined one itself still gets its hash.
    let again = r.arrive_variant(0, 0);
    let (id, _) = r.lookup();
    r.reply(
        id,
        Ok(Found {
            known: [(h(0, 0), Seen::Included { block: 1 })].into(),
            ..Found::default()
        }),
    );
    assert_eq!(r.answer(again).0, Answer::hash(&h(0, 0)));
}
