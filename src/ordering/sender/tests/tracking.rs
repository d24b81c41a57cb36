//! Tracking to inclusion, resubmission, the states `GET /tx/{hash}` shows, and send-and-wait calls.

use super::*;
use crate::hex;
use crate::metrics::Metric;
use crate::ordering::answer::AnswerClass;
use crate::ordering::sender::*;

const TRACKED: Settings = Settings {
    track_interval_ms: 12_000,
    track_ttl_ms: 120_000,
    ..SETTINGS
};

/// n..n+4 accepted (n = 0), each stored before its send.
fn five_accepted() -> Rig {
    let mut r = Rig::new(TRACKED);
    r.arrive(0);
    r.learn(0, 0);
    r.accept_next();
    for n in 1..5 {
        r.arrive(n);
        r.accept_next();
    }
    assert_eq!(r.rows.len(), 5, "stored until included");
    r
}

/// A lone transaction (issue 52): once its send is answered and nothing else is held, no
/// in-memory deadline remains (in production a pending timer keeps the object from hibernating,
/// billed); its first check rides the alarm set with its row, and the check, run within the
/// alarm's handler, finds it mined and lets the storage go (the alarm with it): one alarm set in
/// all.
#[test]
fn a_lone_transaction_leaves_no_timer_once_answered_and_its_check_comes_with_the_alarm() {
    let mut r = Rig::new(TRACKED);
    let ticket = r.arrive(0);
    assert!(r.s.poll_timeout().is_some(), "the nonce lookup's deadline");
    r.learn(0, 0);
    let stored_at = r.now;
    r.now += 50; // the send's round trip
    r.accept_next();
    assert!(r.answer(ticket).0.error_parts().is_none());
    assert_eq!(r.s.poll_timeout(), None, "no in-memory deadline");
    let check = stored_at + TRACKED.track_interval_ms;
    assert_eq!(r.alarm, Some(check), "the row's alarm is the first check");
    // The alarm fires (the object may have hibernated meanwhile); its handler stays until the
    // check is done.
    r.now = check;
    r.alarm = None;
    r.s.alarm(check);
    r.drain();
    let (id, query) = r.lookup();
    assert!(
        query.latest && query.hashes.is_empty(),
        "the counts: {query:?}"
    );
    let counts = Found {
        latest: Some(1),
        pending: Some(1),
        ..Found::default()
    };
    r.reply(id, Ok(counts));
    let (id, query) = r.lookup();
    assert_eq!(
        query.hashes,
        vec![h(0, 0)],
        "the mined count passed it: by hash"
    );
    let found = Found {
        known: [(h(0, 0), Seen::Included { block: 1 })]
            .into_iter()
            .collect(),
        ..Found::default()
    };
    r.reply(id, Ok(found));
    r.s.alarm_done(r.now);
    r.drain();
    assert_eq!(r.s.counters.included, 1);
    assert!(
        r.rows.is_empty() && r.log.contains(&"vacate".to_string()),
        "{:?}",
        r.log
    );
    assert_eq!(
        (r.alarm, r.s.poll_timeout()),
        (None, None),
        "nothing left due"
    );
    assert_eq!(r.alarm_sets, 1, "one alarm set for the whole transaction");
}

#[test]
fn a_dropped_transaction_and_those_behind_it_are_resent_from_their_bytes_in_nonce_order() {
    let mut r = five_accepted();
    assert_eq!(r.alarm, Some(r.now + 12_000), "the alarm is the next check");
    let query = r.track(
        1,
        &[
            (h(0, 0), Seen::Included { block: 1 }),
            (h(1, 0), Seen::Missing),
            (h(2, 0), Seen::Missing),
            (h(3, 0), Seen::Missing),
            (h(4, 0), Seen::Missing),
        ],
    );
    assert_eq!(query.hashes.len(), 5, "one batch for all");
    let first_included = r.now;
    assert_eq!(r.s.counters.included, 1);
    assert!(!r.rows.contains_key(&h(0, 0)), "an included one's bytes go");
    assert_eq!(r.s.counters.resubmitted, 4);
    for n in 1..5 {
        // Below the next nonce: checked against the mined count and by hash at its turn.
        r.resend_check(n, h(n, 0));
        let call = r.send();
        assert_eq!(call.hash, h(n, 0), "the original bytes, in nonce order");
        r.finish(&call, AnswerClass::Accepted);
    }
    let status = r.s.status(&h(2, 0), r.now).unwrap();
    assert_eq!(
        (status["status"].clone(), status["resubmitted"].clone()),
        ("pending".into(), 1.into())
    );
    // The next check finds them in blocks: nothing tracked, nothing stored, no alarm.
    r.track(
        5,
        &(1..5)
            .map(|n| (h(n, 0), Seen::Included { block: 2 }))
            .collect::<Vec<_>>(),
    );
    assert_eq!(r.s.counters.included, 5);
    assert!(
        r.rows.is_empty() && r.chain.is_none(),
        "the storage went: {:?}",
        r.log
    );
    assert!(r.log.contains(&"vacate".to_string()));
    assert_eq!(r.alarm, None, "an idle sender schedules no alarm");
    assert_eq!(
        r.s.poll_timeout(),
        None,
        "no timer either: the memory's own pruning waits for the next event"
    );
    // Past the idempotency window, what was included is forgotten at the next question, without
    // a timer having fired.
    let later = first_included + SETTINGS.idempotency_ttl_ms + 1;
    assert!(r.s.status(&h(0, 0), later).is_none());
    let included = r.s.status(&h(3, 0), r.now).unwrap();
    assert_eq!(
        (included["status"].clone(), included["block"].clone()),
        ("included".into(), 2.into())
    );
}

#[test]
fn one_dropped_alone_is_resent_and_the_rest_stay_pending() {
    let mut r = five_accepted();
    let mut answers: Vec<(TxHash, Seen)> = (0..5).map(|n| (h(n, 0), Seen::Pending)).collect();
    answers[1].1 = Seen::Missing;
    r.track(0, &answers);
    assert_eq!(r.s.counters.resubmitted, 1);
    r.resend_check(0, h(1, 0));
    assert_eq!(r.accept_next().hash, h(1, 0));
    assert!(r.sends.is_empty(), "only the dropped one");
}

#[test]
fn a_nonce_taken_by_another_transaction_ends_replaced_without_a_resend() {
    let mut r = five_accepted();
    let mut answers: Vec<(TxHash, Seen)> = (0..5).map(|n| (h(n, 0), Seen::Pending)).collect();
    answers[0].1 = Seen::Missing;
    r.track(1, &answers);
    assert!(r.sends.is_empty() && r.s.counters.resubmitted == 0);
    assert_eq!(r.s.counters.replaced, 1);
    assert!(!r.rows.contains_key(&h(0, 0)), "a replaced one's bytes go");
    // Which transaction took nonce 0: asked by sender and nonce; the event waits for it.
    let (id, query) = r.lookup_for(|q| !q.nonces.is_empty());
    assert_eq!(query.nonces, vec![0]);
    assert!(r.events("tx_replaced").is_empty());
    let by_nonce = [(0, h(0, 7))].into_iter().collect();
    r.reply(
        id,
        Ok(Found {
            by_nonce,
            ..Found::default()
        }),
    );
    let events = r.events("tx_replaced");
    assert_eq!(events.len(), 1);
    let field = |m: &Metric, name: &str| {
        m.fields
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(
        field(events[0], "replaced_by"),
        Some(hex::encode(&h(0, 7)).into())
    );
    let status = r.s.status(&h(0, 0), r.now).unwrap();
    assert_eq!(status["status"], "replaced");
    assert_eq!(status["replaced_by"], hex::encode(&h(0, 7)));
    assert!(r.sends.is_empty(), "no resend");
}

#[test]
fn a_resend_refused_because_the_nonce_is_taken_ends_replaced_and_is_not_sent_again() {
    let mut r = five_accepted();
    let mut answers: Vec<(TxHash, Seen)> = (0..5).map(|n| (h(n, 0), Seen::Pending)).collect();
    answers[4].1 = Seen::Missing;
    r.track(0, &answers);
    r.resend_check(0, h(4, 0));
    let call = r.send();
    assert_eq!(call.hash, h(4, 0));
    // Another transaction with nonce 4 sits in the pool at a higher fee.
    r.finish(&call, AnswerClass::ReplacementUnderpriced);
    let (id, _) = r.lookup_for(|q| q.nonces == vec![4]);
    r.reply(id, Err(LookupError::Unavailable("unsupported".into())));
    assert_eq!(r.s.status(&h(4, 0), r.now).unwrap()["status"], "replaced");
    assert_eq!(r.events("tx_replaced").len(), 1);
    // The next checks no longer ask for it, and nothing is sent again.
    let query = r.track(0, &answers[..4]);
    assert!(!query.hashes.contains(&h(4, 0)));
    assert!(r.sends.is_empty());
}

#[test]
fn given_up_after_the_tracking_window() {
    let mut r = Rig::new(TRACKED);
    r.arrive(0);
    r.learn(0, 0);
    r.accept_next();
    let accepted_at = r.now;
    while r.now + TRACKED.track_interval_ms < accepted_at + TRACKED.track_ttl_ms {
        r.track(0, &[(h(0, 0), Seen::Pending)]);
    }
    r.at(accepted_at + TRACKED.track_ttl_ms);
    assert_eq!(r.s.counters.expired, 1);
    assert_eq!(r.events("tx_expired").len(), 1);
    assert_eq!(r.s.status(&h(0, 0), r.now).unwrap()["status"], "expired");
    assert!(r.rows.is_empty(), "its bytes go");
}

#[test]
fn the_states_a_user_can_see() {
    let mut r = Rig::new(TRACKED);
    r.arrive(0);
    assert_eq!(r.s.status(&h(0, 0), r.now).unwrap()["status"], "queued");
    r.learn(0, 0);
    assert_eq!(r.s.status(&h(0, 0), r.now).unwrap()["status"], "sent");
    let call = r.send();
    r.finish(&call, AnswerClass::Rejected);
    let failed = r.s.status(&h(0, 0), r.now).unwrap();
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["error"], "rejected");
    assert!(r.s.status(&h(9, 9), r.now).is_none());
}

#[test]
fn a_send_and_wait_call_over_a_nonce_gap_gets_code_6_and_the_expected_nonce_unsent() {
    let mut r = Rig::new(SETTINGS);
    r.arrive(0);
    r.learn(0, 0);
    r.accept_next();
    let ticket = r.ticket();
    r.s.arrive(ticket, Rig::sync_arrival(3, 0), r.now);
    r.drain();
    r.at(r.now + SETTINGS.gap_wait_ms);
    let (answer, _) = r.answer(ticket).clone();
    let Answer::Error(text) = answer else {
        panic!("an error")
    };
    let error: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(error["code"], 6);
    assert_eq!(error["data"], "0x1");
    assert!(r.sends.is_empty());
    // Refused, not sent over the gap: counted as such.
    assert_eq!(
        (r.s.counters.gap_refused, r.s.counters.gap_waits_expired),
        (1, 0)
    );
}

#[test]
fn what_tracking_learns_moves_the_next_nonce() {
    let mut r = Rig::new(TRACKED);
    r.arrive(0);
    r.learn(0, 0);
    r.accept_next();
    // Nonce 1's answer is lost after it went in: remembered, not vouched for, counts asked again.
    r.arrive(1);
    let lost = r.send();
    r.finish(&lost, AnswerClass::Unavailable);
    // The upstream's count lags (1), and its answer by hash for nonce 1 is missing: the next
    // nonce is 1, held by a transaction the relay can't vouch for.
    r.learn(1, 1);
    let (verify, query) = r.lookup_for(|q| !q.hashes.is_empty());
    assert_eq!(query.hashes, vec![h(1, 0)]);
    r.reply(verify, Ok(Found::default()));
    assert_eq!(r.s.nonces().0, Some(1));
    // Tracking then finds nonce 1 in a block (mined count 2): the next nonce is 2.
    r.track(
        2,
        &[
            (h(0, 0), Seen::Included { block: 1 }),
            (h(1, 0), Seen::Included { block: 2 }),
        ],
    );
    assert_eq!(r.s.nonces(), (Some(2), Some(2)));
    assert_eq!(r.events("next_nonce_raised").len(), 1);
    // So the sender's next transaction goes at once, with no gap wait for nonce 1.
    r.arrive(2);
    assert_eq!(r.send().nonce, 2, "sent at once: {:?}", r.log);
    assert!(r.events("gap_wait_expired").is_empty());
}

#[test]
fn defect_5_transactions_vouched_for_after_a_restart_are_tracked_and_a_later_drop_is_resent() {
    // Issue 39: after a restart, the stored transactions the upstream still held were vouched for
    // by the restart's check and never tracked again (nothing made a tracking check due: only a
    // send's answer or a client's copy did), so a pool drop after it went unseen for good.
    let mut r = Rig::restored(
        TRACKED,
        &[
            row(0, 0, 900),
            row(1, 0, 910),
            row(2, 0, 920),
            row(3, 0, 930),
        ],
    );
    r.learn(4, 0);
    let (verify, query) = r.lookup_for(|q| !q.hashes.is_empty());
    assert_eq!(query.hashes.len(), 4, "every stored one asked by hash");
    r.reply(
        verify,
        known(&[
            (h(0, 0), true),
            (h(1, 0), true),
            (h(2, 0), true),
            (h(3, 0), true),
        ]),
    );
    assert!(
        r.sends.is_empty() && r.lookups.is_empty(),
        "all held: {:?}",
        r.log
    );
    let view = r.s.view(r.now);
    assert_eq!(view["tracked"], 4);
    assert_eq!(
        view["next_check_ms"], TRACKED.track_interval_ms,
        "a check is due with nothing but the restart behind it: {view}"
    );
    assert_eq!(
        r.alarm,
        Some(r.now + TRACKED.track_interval_ms),
        "on the storage alarm"
    );
    // Then the pool drops nonce 2 (3 stays queued above the gap): the next check sees it.
    let query = r.track_counts(
        0,
        2,
        &[(h(2, 0), Seen::Missing), (h(3, 0), Seen::Pending)],
        &[],
        None,
    );
    assert_eq!(
        query.hashes,
        vec![h(2, 0), h(3, 0)],
        "at or above the pending count"
    );
    assert_eq!(r.s.counters.resubmitted, 1);
    r.resend_check(0, h(2, 0));
    let call = r.send();
    assert_eq!(call.hash, h(2, 0), "sent again from its stored bytes");
}

#[test]
fn a_check_asks_by_hash_only_what_its_counts_cannot_settle() {
    let mut r = five_accepted();
    // Mined count 2, pending count 4: 0 and 1 are in blocks (asked: included or replaced), 2
    // and 3 are in the pool (vouched for: not asked), 4 is at the pending count (queued, or
    // dropped: asked).
    let query = r.track_counts(
        2,
        4,
        &[
            (h(0, 0), Seen::Included { block: 1 }),
            (h(1, 0), Seen::Included { block: 2 }),
            (h(4, 0), Seen::Pending),
        ],
        &[],
        None,
    );
    assert!(query.latest && query.pending, "{query:?}");
    assert_eq!(query.hashes, vec![h(0, 0), h(1, 0), h(4, 0)]);
    assert_eq!(r.s.counters.included, 2);
    assert!(r.sends.is_empty());
    let view = r.s.view(r.now);
    assert_eq!(
        (view["tracked"].clone(), view["outstanding"].clone()),
        (3.into(), 3.into())
    );
    // Nothing to tell apart: the check ends with its counts.
    let query = r.track_counts(2, 5, &[], &[], None);
    assert!(query.hashes.is_empty(), "{query:?}");
    assert!(r.lookups.is_empty());
}

/// The hot sender of issue 39: one transaction every 40 ms (25 a second) on a node that mines
/// each at once; a tracking check every `TRACK_INTERVAL_S` answers the mined count.
#[test]
fn a_hot_sender_is_never_refused_while_the_node_mines_each_at_once() {
    const TOTAL: u64 = 1_500;
    let mut r = Rig::new(Settings {
        max_queue: 64,
        ..TRACKED
    });
    let mut tickets = vec![r.arrive(0)];
    r.learn(0, 0);
    r.accept_next();
    let mut largest_ask = 0;
    for n in 1..TOTAL {
        let arrival = r.now + 40;
        while let Some(due) = r.s.view(r.now)["next_check_ms"]
            .as_u64()
            .map(|ms| r.now + ms)
        {
            if due > arrival {
                break;
            }
            // Everything sent so far is in a block.
            let mined: Vec<(TxHash, Seen)> = (0..n)
                .map(|k| (h(k, 0), Seen::Included { block: k + 1 }))
                .collect();
            let query = r.track_counts(n, n, &mined, &[], None);
            largest_ask = largest_ask.max(query.hashes.len());
        }
        r.now = arrival;
        tickets.push(r.arrive(n));
        r.accept_next();
    }
    let refused: Vec<(i64, String)> = tickets
        .iter()
        .filter_map(|t| r.answer(*t).0.error_parts())
        .collect();
    assert_eq!(refused, Vec::new(), "no refusal");
    assert_eq!(r.s.counters.forwarded, TOTAL);
    let view = r.s.view(r.now);
    assert!(
        view["outstanding"].as_u64().unwrap() <= 12_000 / 40 + 1,
        "only what was sent since the last check is outstanding: {view}"
    );
    assert!(
        r.s.counters.included >= TOTAL - 12_000 / 40 - 1,
        "{}",
        r.s.counters.included
    );
    // A check asks what was mined since the last one: about 300 hashes, in one lookup (the
    // lookup sends them in batches of at most 50).
    assert!((250..=310).contains(&largest_ask), "{largest_ask}");
}

#[test]
fn tracking_off_never_caps_a_senders_rate() {
    let mut r = Rig::new(Settings {
        max_queue: 64,
        track_ttl_ms: u64::MAX / 4,
        idempotency_ttl_ms: u64::MAX / 4,
        ..SETTINGS
    });
    let over = 10;
    let total = crate::ordering::accepted::MAX_ACCEPTED as u64 + over;
    let mut tickets = vec![r.arrive(0)];
    r.learn(0, 0);
    r.accept_next();
    for n in 1..total {
        tickets.push(r.arrive(n));
        r.accept_next();
    }
    assert!(
        tickets
            .iter()
            .all(|t| r.answer(*t).0.error_parts().is_none()),
        "none refused"
    );
    // Past the bound the oldest pending ones are given up (not followed anyway), their rows gone.
    let expired = r.events("tx_expired");
    assert_eq!(expired.len() as u64, over);
    assert!(expired.iter().all(|m| m.label == "untracked_bound"));
    // (Final, it then leaves the memory first, the bound counting every one remembered.)
    assert!(r
        .s
        .status(&h(0, 0), r.now)
        .is_none_or(|s| s["status"] == "expired"));
    assert!(!r.rows.contains_key(&h(0, 0)));
    assert_eq!(r.rows.len(), crate::ordering::accepted::MAX_ACCEPTED);
}

/// A sender that fills half the pending bound before its next check is checked at once (at most
/// every second), so the bound is met only by what the chain really has not mined.
#[test]
fn half_the_pending_bound_outstanding_brings_the_check_forward() {
    use crate::ordering::sender::tracking::{EARLY_CHECK_AT, EARLY_CHECK_GAP_MS};
    let mut r = Rig::new(Settings {
        max_queue: 64,
        ..TRACKED
    });
    r.arrive(0);
    r.learn(0, 0);
    r.accept_next();
    let check_at = |r: &Rig| r.s.view(r.now)["next_check_ms"].as_u64();
    for n in 1..(EARLY_CHECK_AT as u64 - 1) {
        r.now += 1;
        r.arrive(n);
        r.accept_next();
    }
    assert!(check_at(&r).unwrap() > 10_000, "one interval on");
    r.now += 1;
    r.arrive(EARLY_CHECK_AT as u64 - 1);
    r.accept_next();
    assert_eq!(
        r.s.view(r.now)["tracking_check_running"],
        true,
        "asked at once: {}",
        r.s.view(r.now)
    );
    let mined: Vec<(TxHash, Seen)> = (0..EARLY_CHECK_AT as u64)
        .map(|k| (h(k, 0), Seen::Included { block: 1 }))
        .collect();
    let query = r.track_counts(
        EARLY_CHECK_AT as u64,
        EARLY_CHECK_AT as u64,
        &mined,
        &[],
        None,
    );
    assert_eq!(query.hashes.len(), EARLY_CHECK_AT);
    assert_eq!(r.s.view(r.now)["outstanding"], 0);
    // Filled again at once: the next early check waits its gap after the last one.
    let ended = r.now;
    for n in EARLY_CHECK_AT as u64..(2 * EARLY_CHECK_AT as u64) {
        r.arrive(n);
        r.accept_next();
    }
    assert_eq!(check_at(&r), Some(ended + EARLY_CHECK_GAP_MS - r.now));
}

/// Issue 39 (the every-fault soak): an object whose checks run on its timer, with the storage
/// alarm not delivered, must keep a storage alarm ahead of it: if it is killed, nothing else
/// wakes it to follow what it tracks. Before, the alarm was left at a time that had passed
/// (set only when an earlier one was wanted), and while a check ran it was set to the check's
/// past due time.
#[test]
fn the_storage_alarm_stays_ahead_while_checks_run_on_the_timer() {
    let mut r = five_accepted();
    let first = r.alarm.expect("an alarm");
    assert!(first > r.now);
    for round in 1..=3u64 {
        // The timer (not the alarm) runs the check; the alarm's time passes.
        r.track(
            0,
            &(0..5).map(|n| (h(n, 0), Seen::Pending)).collect::<Vec<_>>(),
        );
        let alarm = r.alarm.expect("an alarm");
        assert!(
            alarm > r.now,
            "round {round}: the alarm is ahead ({} ms from now)",
            alarm as i64 - r.now as i64
        );
    }
}
