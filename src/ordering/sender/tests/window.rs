//! `SEND_WINDOW` under `UPSTREAM_POOL=mempool`: a sender's consecutive waiting nonces are sent
//! without waiting for the answers below them, at most the window at once; every member is
//! stored before its send and answered on its own; a member refused for a gap the window opened
//! goes back to the queue; strict upstreams get one at a time.

use super::*;

const WINDOW: Settings = Settings {
    send_window: 4,
    max_queue: 16,
    ..SETTINGS
};

/// The nonces of the sends made so far (taken out of the rig).
fn sent_nonces(r: &mut Rig) -> Vec<u64> {
    std::mem::take(&mut r.sends)
        .into_iter()
        .map(|c| c.nonce)
        .collect()
}

/// Answers every lookup asked, truthfully for an upstream that holds `held` and counts
/// `pending` and `latest`, until none is left.
fn answer_lookups(r: &mut Rig, held: &[TxHash], pending: u64, latest: u64) {
    while !r.lookups.is_empty() {
        let (id, query) = r.lookups.remove(0);
        let pairs: Vec<(TxHash, bool)> = query
            .hashes
            .iter()
            .map(|h| (*h, held.contains(h)))
            .collect();
        r.reply(
            id,
            Ok(Found {
                pending: query.pending.then_some(pending),
                latest: query.latest.then_some(latest),
                genesis: query.genesis.then(|| "0xgenesis".to_string()),
                known: seen(&pairs),
                ..Found::default()
            }),
        );
    }
}

#[test]
fn consecutive_waiting_nonces_go_out_together_up_to_the_window() {
    let mut r = Rig::new(WINDOW);
    let tickets = r.arrive_all(&[3, 1, 0, 5, 2, 4]);
    r.learn(0, 0);
    let calls: Vec<SendCall> = r.sends.clone();
    assert_eq!(
        calls.iter().map(|c| c.nonce).collect::<Vec<_>>(),
        [0, 1, 2, 3],
        "the window, in nonce order"
    );
    // Each member is stored before its own send.
    let log: Vec<&str> = r
        .log
        .iter()
        .map(String::as_str)
        .filter(|l| l.starts_with("store") || l.starts_with("send"))
        .collect();
    assert_eq!(
        log,
        ["store 0", "send 0", "store 1", "send 1", "store 2", "send 2", "store 3", "send 3"]
    );
    assert_eq!(r.s.view(r.now)["window"], 4);
    r.sends.clear();
    // An answer makes room: the next member goes, in any answer order.
    r.finish(&calls[2], AnswerClass::Accepted);
    assert_eq!(sent_nonces(&mut r), [4]);
    r.finish(&calls[0], AnswerClass::Accepted);
    assert_eq!(sent_nonces(&mut r), [5]);
    r.finish(&calls[1], AnswerClass::Accepted);
    r.finish(&calls[3], AnswerClass::Accepted);
    let rest: Vec<SendCall> = r.sends.clone();
    assert!(rest.is_empty(), "every nonce was sent once");
    for (t, n) in tickets.iter().zip([3u64, 1, 0, 5, 2, 4]) {
        if n <= 3 {
            assert_eq!(r.answer(*t).0, Answer::hash(&h(n, 0)), "nonce {n}");
        }
    }
    assert_eq!(r.s.nonces().0, Some(4));
}

#[test]
fn arrivals_join_the_window_as_they_come_and_a_gap_above_it_waits() {
    let mut r = Rig::new(WINDOW);
    r.arrive(0);
    r.learn(0, 0);
    assert_eq!(sent_nonces(&mut r), [0]);
    r.arrive(1);
    assert_eq!(sent_nonces(&mut r), [1], "sent behind 0, unanswered");
    r.arrive(3);
    assert!(r.sends.is_empty(), "3 is not right above the window");
    r.arrive(2);
    assert_eq!(sent_nonces(&mut r), [2, 3]);
    assert!(r.events("gap_wait_expired").is_empty());
}

#[test]
fn a_send_and_wait_call_or_a_replacement_never_goes_ahead() {
    let mut r = Rig::new(WINDOW);
    r.arrive(0);
    r.learn(0, 0);
    let zero = r.send();
    let ticket = r.ticket();
    r.s.arrive(ticket, Rig::sync_arrival(1, 0), r.now);
    r.drain();
    assert!(r.sends.is_empty(), "EIP-7966: only once 0 is in");
    r.finish(&zero, AnswerClass::Accepted);
    assert_eq!(r.send().nonce, 1);
}

#[test]
fn strict_sends_one_at_a_time_whatever_the_window() {
    let mut r = Rig::new(Settings {
        pool: PoolKind::Strict,
        ..WINDOW
    });
    r.arrive_all(&[0, 1, 2]);
    r.learn(0, 0);
    assert_eq!(sent_nonces(&mut r), [0]);
    assert_eq!(r.s.settings().window(), 1);
}

#[test]
fn a_member_refused_in_the_middle_gets_its_refusal_and_the_rest_go_in_once() {
    let mut r = Rig::new(WINDOW);
    let tickets = r.arrive_all(&[0, 1, 2, 3]);
    r.learn(0, 0);
    let calls: Vec<SendCall> = std::mem::take(&mut r.sends);
    assert_eq!(calls.len(), 4);
    // 1 is underpriced (or its sender short of funds): a refusal of that transaction alone.
    r.finish(&calls[1], AnswerClass::Rejected);
    for (i, call) in calls.iter().enumerate() {
        if i != 1 {
            r.finish(call, AnswerClass::Accepted);
        }
    }
    assert_eq!(r.error_of(tickets[1]), (-32000, "rejected".into()));
    for i in [0, 2, 3] {
        assert_eq!(r.answer(tickets[i]).0, Answer::hash(&calls[i].hash));
    }
    assert!(r.sends.is_empty(), "nothing sent twice");
    assert!(
        !r.rows.contains_key(&calls[1].hash),
        "the refused one is forgotten"
    );
    assert!(r.s.is_quiet() || r.s.queue.is_empty());
}

#[test]
fn a_member_refused_for_the_gap_below_it_is_sent_again_in_its_turn() {
    let mut r = Rig::new(WINDOW);
    let tickets = r.arrive_all(&[0, 1]);
    r.learn(0, 0);
    let (zero, one) = (r.send(), r.send());
    // The node refuses gaps: 1 reached it first.
    r.finish(&one, AnswerClass::NonceTooHigh);
    assert!(
        !r.answers.contains_key(&tickets[1]),
        "back in the queue, unanswered"
    );
    assert_eq!(r.s.counters.window_requeued, 1);
    assert!(r.sends.is_empty(), "not again before 0 is answered");
    r.finish(&zero, AnswerClass::Accepted);
    let again = r.send();
    assert_eq!(
        (again.nonce, again.hash),
        (1, one.hash),
        "its original bytes"
    );
    r.finish(&again, AnswerClass::Accepted);
    assert_eq!(r.answer(tickets[1]).0, Answer::hash(&one.hash));
    assert!(r.s.is_quiet());
}

#[test]
fn a_gap_refusal_of_a_member_that_no_longer_went_ahead_is_its_answer() {
    let mut r = Rig::new(WINDOW);
    let tickets = r.arrive_all(&[0, 1]);
    r.learn(0, 0);
    let (zero, one) = (r.send(), r.send());
    r.finish(&one, AnswerClass::NonceTooHigh);
    // 0's answer is lost before it went in: checked by hash and sent again, alone.
    r.finish(&zero, AnswerClass::Unavailable);
    answer_lookups(&mut r, &[], 0, 0);
    let zero = r.send();
    assert!(r.sends.is_empty(), "1 does not go ahead again");
    r.finish(&zero, AnswerClass::Accepted);
    let one = r.send();
    assert_eq!(one.nonce, 1);
    // Refused again with nothing below it unanswered: that is the node's answer.
    r.finish(&one, AnswerClass::NonceTooHigh);
    let (code, message) = r.error_of(tickets[1]);
    assert_eq!((code, message.as_str()), (-32000, "nonce_too_high"));
    assert_eq!(r.s.counters.window_requeued, 1);
}

#[test]
fn a_lost_answer_inside_a_window_is_checked_by_hash_and_the_others_stand() {
    let mut r = Rig::new(WINDOW);
    let tickets = r.arrive_all(&[0, 1, 2]);
    r.learn(0, 0);
    let calls: Vec<SendCall> = std::mem::take(&mut r.sends);
    r.finish(&calls[0], AnswerClass::Accepted);
    r.finish(&calls[1], AnswerClass::Unavailable);
    r.finish(&calls[2], AnswerClass::Accepted);
    assert_eq!(r.answer(tickets[0]).0, Answer::hash(&calls[0].hash));
    assert_eq!(r.answer(tickets[2]).0, Answer::hash(&calls[2].hash));
    assert!(
        r.answer(tickets[1]).0.error_parts().is_some(),
        "outcome unknown"
    );
    // The upstream lost 1 (2 waits in its queued pool): 1 is sent again from its stored bytes,
    // once, and 2 is not.
    answer_lookups(&mut r, &[calls[0].hash, calls[2].hash], 1, 0);
    let resend = r.send();
    assert_eq!(resend.hash, calls[1].hash);
    assert!(r.sends.is_empty(), "{:?}", r.log);
    r.finish(&resend, AnswerClass::Accepted);
    assert!(r.sends.is_empty());
}

#[test]
fn a_force_released_member_stops_the_window_from_widening() {
    let mut r = Rig::new(WINDOW);
    r.arrive_all(&[0, 1]);
    r.learn(0, 0);
    let (zero, one) = (r.send(), r.send());
    let lost_at = zero.deadline_ms + SETTINGS.grace_ms();
    r.at(lost_at);
    assert_eq!(r.s.counters.force_releases, 2, "each member on its own");
    r.arrive(2);
    assert!(
        r.sends.is_empty(),
        "nothing ahead of a member being recovered"
    );
    while let Some((id, query)) = r.lookups.first().cloned() {
        r.lookups.remove(0);
        let held: Vec<(TxHash, bool)> = query.hashes.iter().map(|h| (*h, true)).collect();
        r.reply(
            id,
            Ok(Found {
                pending: query.pending.then_some(2),
                latest: query.latest.then_some(0),
                known: seen(&held),
                ..Found::default()
            }),
        );
    }
    assert_eq!(r.send().nonce, 2);
    assert!(!r.rows.is_empty() && (zero.hash != one.hash));
}
