//! Behind a private route (`UPSTREAM_SEND_URL`): the node asked about transactions cannot see
//! the route's pool.

use super::*;
use crate::ordering::answer::AnswerClass;

const PRIVATE: Settings = Settings {
    track_interval_ms: 12_000,
    track_ttl_ms: 120_000,
    send_window: 16,
    max_queue: 64,
    private_route: true,
    ..SETTINGS
};

/// n..n+9 (n = 0) arrive at once and the route accepts each.
fn ten_accepted(settings: Settings) -> Rig {
    let mut r = Rig::new(settings);
    for n in 0..10 {
        r.arrive(n);
    }
    r.learn(0, 0);
    // Behind a private route one at a time (each next to one the route has); else the window.
    let at_once = if settings.private_route { 1 } else { 10 };
    assert_eq!(r.sends.len(), at_once);
    while !r.sends.is_empty() {
        assert!(r.sends.len() <= at_once);
        r.accept_next();
    }
    assert_eq!(r.s.counters.resubmitted, 0);
    r
}

/// Answers the tracking check with the mined count and what the read node says of each hash.
fn track(r: &mut Rig, latest: u64, seen: &[(TxHash, Seen)]) {
    let due = r.s.poll_timeout().expect("a check is due");
    r.at(due);
    let (id, _) = r.lookup_for(|q| q.latest && !q.pending);
    let found = Found {
        latest: Some(latest),
        known: seen.iter().copied().collect(),
        ..Found::default()
    };
    r.reply(id, Ok(found));
}

#[test]
fn the_read_nodes_null_is_no_drop_behind_a_private_route() {
    let mut r = ten_accepted(PRIVATE);
    let missing: Vec<(TxHash, Seen)> = (0..10).map(|n| (h(n, 0), Seen::Missing)).collect();
    for _ in 0..3 {
        track(&mut r, 0, &missing);
    }
    assert!(r.sends.is_empty(), "nothing sent again: {:?}", r.log);
    assert!(!r.log.iter().any(|l| l.starts_with("load")), "{:?}", r.log);
    assert_eq!(r.s.counters.resubmitted, 0);
    assert_eq!(r.rows.len(), 10, "still tracked, bytes kept");
    assert_eq!(r.s.status(&h(3, 0), r.now).unwrap()["status"], "pending");
    // In blocks: included; a nonce used by another transaction in a block: replaced.
    let mut seen: Vec<(TxHash, Seen)> = (0..5)
        .map(|n| (h(n, 0), Seen::Included { block: 7 }))
        .collect();
    seen.extend((5..10).map(|n| (h(n, 0), Seen::Missing)));
    track(&mut r, 6, &seen);
    assert_eq!(r.s.counters.included, 5);
    assert_eq!(r.s.counters.replaced, 1, "nonce 5 was used by another");
    assert_eq!(r.s.status(&h(5, 0), r.now).unwrap()["status"], "replaced");
    assert_eq!(r.s.status(&h(6, 0), r.now).unwrap()["status"], "pending");
    assert!(r.sends.is_empty());
}

#[test]
fn behind_a_private_route_a_transaction_the_route_keeps_is_given_up_only_at_the_ttl() {
    let mut r = Rig::new(Settings {
        send_window: 1,
        ..PRIVATE
    });
    r.arrive(0);
    r.learn(0, 0);
    r.accept_next();
    let accepted_at = r.now;
    while r.now + PRIVATE.track_interval_ms < accepted_at + PRIVATE.track_ttl_ms {
        track(&mut r, 0, &[(h(0, 0), Seen::Missing)]);
    }
    assert_eq!(r.s.counters.expired, 0);
    r.at(accepted_at + PRIVATE.track_ttl_ms);
    assert_eq!(r.s.counters.expired, 1);
    assert!(r.sends.is_empty(), "never sent again");
}

#[test]
fn the_pending_count_counts_what_the_private_route_accepted() {
    // The read node's pending count is 0: it cannot see the route's pool. The relay's is 10,
    // without asking the read node for the hashes it cannot see.
    let mut r = ten_accepted(PRIVATE);
    let count = r.ticket();
    r.s.count(count, r.now);
    r.drain();
    r.learn(0, 0);
    assert!(
        r.lookups.iter().all(|(_, q)| q.hashes.is_empty()),
        "no hash asked of the read node: {:?}",
        r.lookups
    );
    assert_eq!(r.answer(count).0, Answer::Result("\"0xa\"".into()));

    // A public upstream's count does not cover them: they are asked by hash, and its null is a
    // drop there (sent again).
    let mut r = ten_accepted(Settings {
        private_route: false,
        ..PRIVATE
    });
    let count = r.ticket();
    r.s.count(count, r.now);
    r.drain();
    r.learn(0, 0);
    let (verify, query) = r.lookup_for(|q| !q.hashes.is_empty());
    assert_eq!(query.hashes.len(), 10);
    r.reply(
        verify,
        known(&(0..10).map(|n| (h(n, 0), false)).collect::<Vec<_>>()),
    );
    assert!(r.log.iter().any(|l| l.starts_with("load")), "{:?}", r.log);
}

#[test]
fn an_unknown_outcome_behind_a_private_route_is_sent_to_the_route_again() {
    // The route's answer was lost: not vouched for, so the next count asks it by hash, and the
    // read node's null sends it again (to the route, from its bytes); the route's "already
    // known" or hash settles it.
    let mut r = Rig::new(PRIVATE);
    r.arrive(0);
    r.learn(0, 0);
    let call = r.send();
    r.finish(&call, AnswerClass::Unavailable);
    let count = r.ticket();
    r.s.count(count, r.now);
    r.drain();
    r.learn(0, 0);
    let (verify, query) = r.lookup_for(|q| !q.hashes.is_empty());
    assert_eq!(query.hashes, vec![h(0, 0)]);
    r.reply(verify, known(&[(h(0, 0), false)]));
    assert!(r.log.iter().any(|l| l.starts_with("load")), "{:?}", r.log);
}
