//! Admission, the turn, the bound and the answers.

use super::*;
use crate::ordering::answer::AnswerClass;
use crate::ordering::sender::*;

#[test]
fn the_first_arrival_learns_the_nonce_then_each_is_stored_before_it_is_sent_in_order() {
    let mut r = Rig::new(SETTINGS);
    let t: Vec<Ticket> = [0, 1, 2].iter().map(|&n| r.arrive(n)).collect();
    assert!(r.sends.is_empty(), "nothing is sent on a guessed nonce");
    let (_, query) = r.lookups[0].clone();
    assert!(query.genesis, "the chain is checked with the first lookup");
    r.learn(0, 0);
    for n in 0..3 {
        let call = r.accept_next();
        assert_eq!(call.nonce, n);
        assert_eq!(call.deadline_ms, r.now + SETTINGS.max_hold_ms);
    }
    for (n, ticket) in t.iter().enumerate() {
        assert_eq!(r.answer(*ticket).0, Answer::hash(&h(n as u64, 0)));
    }
    let order: Vec<&str> = r
        .log
        .iter()
        .filter(|l| l.starts_with("store") || l.starts_with("send"))
        .map(String::as_str)
        .collect();
    assert_eq!(
        order,
        ["store 0", "send 0", "store 1", "send 1", "store 2", "send 2"]
    );
    assert_eq!(
        r.chain.as_deref(),
        Some("0xgenesis"),
        "stored with the first row"
    );
    assert!(r.alarm.is_none(), "the alarm goes when the sender is quiet");
    assert_eq!(r.s.nonces(), (Some(3), Some(0)));
}

#[test]
fn shuffled_arrivals_leave_in_nonce_order_and_a_gap_waits_at_most_the_gap_wait() {
    let mut r = Rig::new(SETTINGS);
    r.arrive(5);
    r.learn(5, 5);
    r.accept_next();
    r.arrive(8);
    r.arrive(7);
    assert!(r.sends.is_empty());
    assert_eq!(r.s.poll_timeout(), Some(r.now + 1_000));
    r.arrive(6);
    assert_eq!(r.accept_next().nonce, 6);
    assert_eq!(r.accept_next().nonce, 7);
    assert_eq!(r.accept_next().nonce, 8);
    // A real gap: 10 with 9 missing goes after the gap wait, and says so.
    let arrived = r.now;
    r.arrive(10);
    r.at(arrived + 999);
    assert!(r.sends.is_empty());
    r.at(arrived + 1_000);
    assert_eq!(r.send().nonce, 10);
    assert_eq!(r.events("gap_wait_expired").len(), 1);
}

#[test]
fn n_n1_n3_the_waiter_behind_a_missing_nonce_gets_its_turn_after_the_gap_wait() {
    // Issue 15: n+3 joined while n held the lock; the release that advanced the next nonce to
    // n+2 must leave n+3 a due time.
    let mut r = Rig::new(SETTINGS);
    r.arrive(4);
    r.learn(4, 4);
    let arrived = r.now;
    let _t5 = r.arrive(5);
    let t7 = r.arrive(7);
    r.accept_next();
    r.now += 10;
    r.accept_next();
    assert_eq!(r.s.nonces().0, Some(6));
    assert_eq!(
        r.s.poll_timeout(),
        Some(arrived + SETTINGS.gap_wait_ms),
        "n+3 has a due time"
    );
    r.at(arrived + SETTINGS.gap_wait_ms);
    let call = r.send();
    assert_eq!(call.nonce, 7);
    r.finish(&call, AnswerClass::NonceTooHigh);
    assert!(r.answers.contains_key(&t7));
}

#[test]
fn defect_1_a_full_queue_takes_the_nonce_that_unblocks_it_and_refuses_the_highest() {
    // MAX_QUEUE_PER_SENDER 3: n+3, n+2, n+1 park behind the missing n; n must not be refused.
    let mut r = Rig::new(SETTINGS);
    r.arrive(0);
    r.learn(0, 0);
    r.accept_next(); // next = 1
    let parked: Vec<Ticket> = [4, 3, 2].iter().map(|&n| r.arrive(n)).collect();
    assert!(r.sends.is_empty());
    let one = r.arrive(1);
    assert!(
        !r.answers.contains_key(&one),
        "n is never refused for the bound"
    );
    // Four now wait for the bound of three: the highest, 4, is refused before any send.
    let (code, message) = r.error_of(parked[0]);
    assert_eq!(code, -32005, "{message}");
    assert_eq!(r.answer(parked[0]).1, Some(1), "with Retry-After");
    for n in 1..=3 {
        assert_eq!(r.accept_next().nonce, n);
    }
    assert!(r.sends.is_empty());
    for t in [one, parked[1], parked[2]] {
        assert!(r.answer(t).0.error_parts().is_none(), "accepted");
    }
    assert_eq!(r.s.counters.queue_full, 1);

    // One batch of n+4..n (five, above the bound of 3): n..n+2 go, n+4 and n+3 are refused with
    // -32005 and Retry-After, before any send.
    let mut r = Rig::new(SETTINGS);
    r.arrive(0);
    r.learn(0, 0);
    r.accept_next();
    let batch = r.arrive_all(&[5, 4, 3, 2, 1]);
    for (t, n) in batch.iter().zip([5, 4]) {
        let (code, message) = r.error_of(*t);
        assert_eq!(code, -32005, "{n}: {message}");
        assert_eq!(r.answer(*t).1, Some(1), "Retry-After");
    }
    for n in 1..=3 {
        assert_eq!(r.accept_next().nonce, n);
    }
    assert!(r.sends.is_empty());
    // Admitted in nonce order: 4 is refused for the bound, and 5 above it.
    assert_eq!(r.s.counters.queue_full, 1);
    assert_eq!(r.s.counters.above_refused, 1);

    // The same batch while the sender's first lookup runs.
    let mut r = Rig::new(SETTINGS);
    let batch = r.arrive_all(&[4, 3, 2, 1, 0]);
    assert_eq!(r.error_of(batch[0]).0, -32005);
    assert_eq!(r.error_of(batch[1]).0, -32005);
    r.learn(0, 0);
    for n in 0..=2 {
        assert_eq!(r.accept_next().nonce, n);
    }
}

#[test]
fn defect_4_the_holders_answer_leaves_before_the_relearn() {
    let mut r = Rig::new(SETTINGS);
    let t0 = r.arrive(0);
    r.learn(0, 0);
    r.arrive(1);
    let call = r.send();
    r.finish(&call, AnswerClass::NonceTooHigh);
    // Answered in the same step that asks for the nonce again; the lookup is not awaited.
    assert!(r.answers.contains_key(&t0));
    let answered = r.log.iter().position(|l| l == &format!("answer {}", t0.0));
    let relearn = r.log.iter().rposition(|l| l == "lookup");
    assert!(answered < relearn, "{:?}", r.log);
    assert_eq!(r.lookups.len(), 1);
}

#[test]
fn no_send_on_a_guessed_nonce_while_the_upstream_can_not_tell_it() {
    let mut r = Rig::new(SETTINGS);
    let start = r.now;
    let tickets: Vec<Ticket> = (0..3).map(|n| r.arrive(n)).collect();
    let (id, _) = r.lookup();
    r.reply(
        id,
        Err(LookupError::Unavailable("connection refused".into())),
    );
    assert_eq!(r.events("nonce_lookup_failed").len(), 1);
    assert_eq!(
        r.s.poll_timeout(),
        Some(r.now + 1_000),
        "tried again after 1 s"
    );
    r.at(r.now + 1_000);
    let (id, _) = r.lookup();
    r.reply(
        id,
        Err(LookupError::Unavailable("connection refused".into())),
    );
    assert_eq!(r.s.poll_timeout(), Some(r.now + 2_000), "then after 2 s");
    // Until each client's wait runs out, nothing is sent; then each gets -32002, unsent.
    while r.now < start + SETTINGS.max_hold_ms {
        let due = r.s.poll_timeout().expect("a due time");
        r.at(due);
        while let Some((id, _)) = r.lookups.first().cloned() {
            r.lookups.remove(0);
            r.reply(
                id,
                Err(LookupError::Unavailable("connection refused".into())),
            );
        }
    }
    assert!(r.sends.is_empty());
    for t in tickets {
        let (code, message) = r.error_of(t);
        assert_eq!(code, -32002);
        assert!(message.contains("not sent"), "{message}");
    }
}

#[test]
fn a_stale_resend_gets_its_hash_when_the_upstream_has_it_and_geths_error_otherwise() {
    let mut r = Rig::new(SETTINGS);
    r.arrive(3);
    r.learn(3, 3);
    r.accept_next();
    let mined = r.arrive(1);
    let (id, query) = r.lookup();
    assert_eq!(query.hashes, vec![h(1, 0)]);
    r.reply(id, known(&[(h(1, 0), true)]));
    assert_eq!(r.answer(mined).0, Answer::hash(&h(1, 0)));
    let stale = r.arrive_variant(1, 7);
    let (id, _) = r.lookup();
    r.reply(id, known(&[(h(1, 7), false)]));
    assert_eq!(
        r.error_of(stale),
        (-32000, "nonce too low: next nonce 3, tx nonce 1".into())
    );
    assert!(r.sends.is_empty());
}

#[test]
fn the_pending_count_is_the_upstreams_raised_past_what_it_holds() {
    let mut r = Rig::new(SETTINGS);
    r.arrive(0);
    r.learn(0, 0);
    r.accept_next();
    let ticket = r.ticket();
    r.s.count(ticket, r.now);
    r.drain();
    r.learn(0, 0); // the upstream lags
    let (verify, _) = r.lookup();
    r.reply(verify, known(&[(h(0, 0), true)]));
    assert_eq!(r.answer(ticket).0, Answer::Result("\"0x1\"".into()));
    assert_eq!(r.events("pending_nonce_raised").len(), 1);
}

#[test]
fn copies_share_one_send_and_a_later_resend_is_asked_by_hash_not_answered_from_memory() {
    let mut r = Rig::new(SETTINGS);
    let a = r.arrive(0);
    let b = r.arrive(0);
    r.learn(0, 0);
    let c = r.arrive(0);
    r.accept_next();
    assert!(r.sends.is_empty());
    for t in [a, b, c] {
        assert_eq!(r.answer(t).0, Answer::hash(&h(0, 0)));
    }
    // Pending, maybe dropped since: the upstream is asked; it still has it, so no send.
    let d = r.arrive(0);
    let (check, query) = r.lookup();
    assert_eq!(query.hashes, vec![h(0, 0)]);
    r.reply(check, known(&[(h(0, 0), true)]));
    assert_eq!(r.answer(d).0, Answer::hash(&h(0, 0)));
    assert!(r.sends.is_empty());
    // The pool dropped it: the resend is sent again, not answered from memory.
    let e = r.arrive(0);
    let (check, _) = r.lookup();
    r.reply(check, known(&[(h(0, 0), false)]));
    // Below the next nonce: at its turn, the mined count and the hash once more.
    let (turn, query) = r.lookup();
    assert!(query.latest);
    r.reply(
        turn,
        Ok(Found {
            latest: Some(0),
            known: seen(&[(h(0, 0), false)]),
            ..Found::default()
        }),
    );
    let again = r.accept_next();
    assert_eq!(again.hash, h(0, 0));
    assert_eq!(r.answer(e).0, Answer::hash(&h(0, 0)));
    assert_eq!(r.s.counters.deduplicated, 3);
}

#[test]
fn replacements_by_policy() {
    for policy in [ReplacementPolicy::Forward, ReplacementPolicy::Reject] {
        let mut r = Rig::new(Settings {
            replacement: policy,
            ..SETTINGS
        });
        r.arrive(0);
        r.learn(0, 0);
        r.accept_next();
        let speed_up = r.arrive_variant(0, 1);
        match policy {
            ReplacementPolicy::Forward => {
                // Below the next nonce: the mined count and the hash are asked first.
                let (id, query) = r.lookup();
                assert!(query.latest);
                r.reply(
                    id,
                    Ok(Found {
                        latest: Some(0),
                        known: seen(&[(h(0, 1), false)]),
                        ..Found::default()
                    }),
                );
                let call = r.accept_next();
                assert_eq!(call.hash, h(0, 1));
                assert_eq!(r.answer(speed_up).0, Answer::hash(&h(0, 1)));
            }
            ReplacementPolicy::Reject => {
                // The mined count is asked first: still 0, so nonce 0 is a replacement.
                let (id, query) = r.lookup();
                assert!(query.latest && query.hashes == vec![h(0, 1)], "{query:?}");
                assert!(!r.answers.contains_key(&speed_up));
                r.reply(
                    id,
                    Ok(Found {
                        latest: Some(0),
                        known: seen(&[(h(0, 1), false)]),
                        ..Found::default()
                    }),
                );
                let (code, message) = r.error_of(speed_up);
                assert_eq!(code, -32000);
                assert!(message.contains(&crate::hex::encode(&h(0, 0))), "{message}");
            }
        }
    }
}

#[test]
fn the_view_shows_holder_queue_nonces_and_counters() {
    let mut r = Rig::new(SETTINGS);
    r.arrive(3);
    r.learn(3, 2);
    r.arrive(5);
    let v = r.s.view(r.now + 40);
    assert_eq!(v["holder"]["nonce"], 3);
    assert_eq!(v["holder"]["phase"], "sending");
    assert_eq!(v["holder"]["held_ms"], 40);
    assert_eq!(v["queued_nonces"], serde_json::json!([5]));
    assert_eq!(
        (v["next_nonce"].clone(), v["mined_nonce"].clone()),
        (3.into(), 2.into())
    );
    assert_eq!(v["chain"], "0xgenesis");
    r.accept_next();
    let v = r.s.view(r.now + 10);
    assert_eq!(v["accepted"][0]["hash"], crate::hex::encode(&h(3, 0)));
    assert_eq!(v["accepted"][0]["vouched"], true);
    assert_eq!(v["counters"]["forwarded"], 1);
}

#[test]
fn a_read_leaves_nothing_in_storage() {
    let mut r = Rig::new(SETTINGS);
    let t = r.ticket();
    r.s.count(t, r.now);
    r.drain();
    assert_eq!(
        r.alarm, None,
        "no alarm (a storage write) for a pending-count question"
    );
    r.learn(7, 7);
    assert_eq!(r.answer(t).0, Answer::Result("\"0x7\"".into()));
    assert_eq!(r.s.status(&h(3, 0), r.now), None);
    assert!(r.rows.is_empty() && r.chain.is_none() && r.alarm.is_none());
    assert!(r.s.is_quiet());
}
