//! Behind a private route (`UPSTREAM_SEND_URL`): the node asked about transactions cannot see
//! the route's pool.

use super::*;
use crate::ordering::answer::AnswerClass;
use crate::ordering::private_terms::PrivateTerms;
use crate::ordering::route_status::{RouteStatus, MAX_STATUS_ASKED};
use crate::ordering::sender::knowledge::MAX_RESENDS;
use serde_json::Value;

/// The transaction `nonce` (variant 0) sent with `terms`: `eth_sendPrivateTransaction` when it
/// has a `maxBlockNumber`.
fn with_terms(nonce: u64, terms: PrivateTerms) -> SignedTx {
    let mut tx = (*tx(nonce, 0)).clone();
    tx.public_after_blocks = terms.public_after_blocks;
    if terms.max_block_number.is_some() {
        tx.method = SendMethod::Private {
            max_block_number: terms.max_block_number,
            preferences: None,
        };
    }
    tx
}

/// Opted in to the public mempool after `blocks` blocks.
fn opted_in(blocks: u64) -> PrivateTerms {
    PrivateTerms {
        public_after_blocks: Some(blocks),
        max_block_number: None,
    }
}

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
    ten_accepted_as(settings, PrivateTerms::default())
}

/// [`ten_accepted`], each sent with `terms` (its sender's opt-in, its `maxBlockNumber`).
fn ten_accepted_as(settings: Settings, terms: PrivateTerms) -> Rig {
    let mut r = Rig::new(settings);
    for n in 0..10 {
        r.arrive_tx(with_terms(n, terms));
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

/// Each resend's turn: checked against the mined count `latest` and by hash (the read node's
/// null), then sent to the route and accepted, one at a time; returns their nonces in order.
fn resend_turns(r: &mut Rig, latest: u64) -> Vec<u64> {
    let mut sent = Vec::new();
    while let Some(i) = r.lookups.iter().position(|(_, q)| q.hashes.len() == 1) {
        let (turn, query) = r.lookups.remove(i);
        r.reply(
            turn,
            Ok(Found {
                latest: Some(latest),
                known: seen(&[(query.hashes[0], false)]),
                ..Found::default()
            }),
        );
        assert_eq!(
            r.sends.len(),
            1,
            "one at a time behind a route: {:?}",
            r.log
        );
        sent.push(r.sends[0].nonce);
        r.accept_next();
    }
    assert!(r.sends.is_empty());
    sent
}

/// One transaction (nonce 0) accepted by the route.
fn one_accepted(settings: Settings) -> Rig {
    let mut r = Rig::new(settings);
    r.arrive(0);
    r.learn(0, 0);
    r.accept_next();
    r
}

const WITH_STATUS: Settings = Settings {
    route_status: true,
    ..PRIVATE
};

#[test]
fn the_route_is_asked_and_what_it_dropped_goes_to_it_again_from_its_bytes() {
    let mut r = ten_accepted(WITH_STATUS);
    let missing: Vec<(TxHash, Seen)> = (0..10).map(|n| (h(n, 0), Seen::Missing)).collect();
    // The lowest nonces' statuses are asked, at most MAX_STATUS_ASKED.
    let asked: Vec<TxHash> = (0..MAX_STATUS_ASKED as u64).map(|n| h(n, 0)).collect();
    let pending: Vec<(TxHash, RouteStatus)> =
        asked.iter().map(|h| (*h, RouteStatus::Pending)).collect();
    let query = r.track_with(0, &missing, &pending, None);
    assert_eq!(query.route_statuses, asked);
    assert!(
        !query.head,
        "no SEND_PUBLIC_AFTER_BLOCKS: the head is not asked"
    );
    assert!(r.sends.is_empty(), "pending at the route: kept");
    assert_eq!(
        r.s.status(&h(2, 0), r.now).unwrap()["route_status"],
        "pending"
    );
    // The route failed and forgot nonce 1, and does not know nonce 2: both go to it again,
    // lowest first, from their stored bytes; a cancelled or included one does not.
    let mut said = pending.clone();
    said[0].1 = RouteStatus::Cancelled;
    said[1].1 = RouteStatus::Failed;
    said[2].1 = RouteStatus::Unknown;
    said[3].1 = RouteStatus::Included;
    r.track_with(0, &missing, &said, None);
    assert_eq!(r.s.counters.route_dropped, 2);
    assert_eq!(r.s.counters.resubmitted, 2);
    assert_eq!(resend_turns(&mut r, 0), [1, 2]);
    assert_eq!(r.s.status(&h(1, 0), r.now).unwrap()["resubmitted"], 1);
    let dropped: Vec<String> = r
        .metrics
        .iter()
        .filter(|m| m.event == "tx_route_dropped")
        .map(|m| m.label.clone())
        .collect();
    assert_eq!(dropped, ["failed", "unknown"]);
}

#[test]
fn a_route_that_keeps_dropping_a_transaction_gets_it_max_resends_times_then_it_is_failed() {
    let mut r = one_accepted(WITH_STATUS);
    let failed = [(h(0, 0), RouteStatus::Failed)];
    for _ in 0..MAX_RESENDS {
        r.track_with(0, &[(h(0, 0), Seen::Missing)], &failed, None);
        resend_turns(&mut r, 0);
    }
    // Dropped again after the last resend: final, not counted, its row gone, never sent again.
    r.track_with(0, &[(h(0, 0), Seen::Missing)], &failed, None);
    assert!(r.sends.is_empty() && r.lookups.is_empty(), "{:?}", r.log);
    assert_eq!(r.s.counters.resubmitted, u64::from(MAX_RESENDS));
    assert_eq!(r.s.counters.route_dropped, u64::from(MAX_RESENDS) + 1);
    assert_eq!(r.s.counters.abandoned, 1);
    assert_eq!(r.s.status(&h(0, 0), r.now).unwrap()["status"], "failed");
    assert!(!r.rows.contains_key(&h(0, 0)), "its row is gone");
    assert_eq!(r.events("tx_abandoned")[0].label, "route_failed");
    assert_eq!(pending_count(&mut r), 0, "not counted");
}

/// What the relay's pending count answers now (the sender's object alone, nothing asked).
fn pending_count(r: &mut Rig) -> u64 {
    let count = r.ticket();
    r.s.count(count, r.now);
    r.drain();
    if r.lookups.iter().any(|(_, q)| q.pending || q.latest) {
        r.learn(0, 0);
    }
    match r.answer(count).0.clone() {
        Answer::Result(raw) => {
            crate::hex::decode_quantity(raw.trim_matches('"')).expect("a quantity")
        }
        other => panic!("{other:?}"),
    }
}

/// The route says its sender cancelled nonce 2 of 0..9: final (`cancelled`), never sent again,
/// never published, its row gone, and the pending count stops below it (the nonce is free for
/// the sender's next transaction).
#[test]
fn a_transaction_the_route_says_is_cancelled_is_final_not_counted_and_never_sent_again() {
    let settings = Settings {
        public_after_blocks: Some(1),
        ..WITH_STATUS
    };
    let mut r = ten_accepted_as(settings, opted_in(1));
    assert_eq!(pending_count(&mut r), 10);
    let missing: Vec<(TxHash, Seen)> = (0..10).map(|n| (h(n, 0), Seen::Missing)).collect();
    let said = [
        (h(0, 0), RouteStatus::Pending),
        (h(1, 0), RouteStatus::Pending),
        (h(2, 0), RouteStatus::Cancelled),
        (h(3, 0), RouteStatus::Pending),
    ];
    r.track_with(0, &missing, &said, Some(100));
    r.track_with(0, &missing, &said, Some(105));
    assert_eq!(r.s.status(&h(2, 0), r.now).unwrap()["status"], "cancelled");
    assert!(!r.rows.contains_key(&h(2, 0)), "its row is gone");
    assert!(r.rows.contains_key(&h(3, 0)));
    assert!(
        r.published.iter().flatten().all(|hash| *hash != h(2, 0)),
        "never published"
    );
    assert!(r.sends.iter().all(|s| s.nonce != 2), "never sent again");
    assert_eq!(r.events("tx_cancelled").len(), 1);
    assert_eq!(
        pending_count(&mut r),
        2,
        "the count stops at the cancelled nonce"
    );
}

#[test]
fn without_a_status_url_the_route_is_not_asked() {
    let mut r = one_accepted(PRIVATE);
    let query = r.track_with(0, &[(h(0, 0), Seen::Missing)], &[], None);
    assert!(query.route_statuses.is_empty() && !query.head);
    assert_eq!(r.s.status(&h(0, 0), r.now).unwrap()["route"], "private");
    assert_eq!(
        r.s.status(&h(0, 0), r.now).unwrap()["route_status"],
        Value::Null
    );
    // Without a private route there is no route in the status.
    let r = one_accepted(Settings {
        private_route: false,
        ..PRIVATE
    });
    assert!(r.s.status(&h(0, 0), r.now).unwrap().get("route").is_none());
}

#[test]
fn send_public_after_blocks_counts_from_the_first_check_and_publishes_once_in_nonce_order() {
    let settings = Settings {
        public_after_blocks: Some(25),
        ..PRIVATE
    };
    // The senders' opt-in: 3 blocks (the operator allows up to 25).
    let mut r = ten_accepted_as(settings, opted_in(3));
    let missing: Vec<(TxHash, Seen)> = (0..10).map(|n| (h(n, 0), Seen::Missing)).collect();
    // First seen pending at head 100; nonce 0 included at 101.
    let query = r.track_with(0, &missing, &[], Some(100));
    assert!(query.head && query.route_statuses.is_empty());
    let mut seen = missing.clone();
    seen[0].1 = Seen::Included { block: 101 };
    r.track_with(1, &seen, &[], Some(102));
    assert!(r.published.is_empty(), "2 blocks: not yet");
    // Nonce 3 shows at the read node (public already): not sent again.
    let mut seen: Vec<(TxHash, Seen)> = missing[1..].to_vec();
    seen[2].1 = Seen::Pending;
    r.track_with(1, &seen, &[], Some(103));
    let want: Vec<TxHash> = [1, 2, 4, 5, 6, 7, 8, 9].iter().map(|n| h(*n, 0)).collect();
    assert_eq!(
        r.published,
        std::slice::from_ref(&want),
        "3 blocks: each not held, in nonce order"
    );
    assert_eq!(
        r.s.status(&h(1, 0), r.now).unwrap()["route"],
        "private_then_public"
    );
    assert!(r.sends.is_empty(), "not to the route again");
    // Once: the next checks publish nothing more.
    r.track_with(1, &seen, &[], Some(110));
    assert_eq!(r.published.len(), 1);
    let decided = r
        .metrics
        .iter()
        .filter(|m| m.event == "tx_sent_public")
        .count();
    assert_eq!(decided, 8);
    // Their answers are counted and logged.
    for hash in &want {
        let sent = Sent {
            class: AnswerClass::Accepted,
            answer: Answer::hash(hash),
            attempts: 1,
            route: None,
        };
        r.s.published(hash, sent, r.now);
    }
    assert_eq!(r.s.counters.sent_public, 8);
}

#[test]
fn what_the_route_says_is_included_or_cancelled_is_not_published() {
    let settings = Settings {
        public_after_blocks: Some(1),
        route_status: true,
        ..PRIVATE
    };
    let mut r = ten_accepted_as(settings, opted_in(1));
    let missing: Vec<(TxHash, Seen)> = (0..3).map(|n| (h(n, 0), Seen::Missing)).collect();
    let said = [
        (h(0, 0), RouteStatus::Included),
        (h(1, 0), RouteStatus::Cancelled),
        (h(2, 0), RouteStatus::Pending),
    ];
    r.track_with(0, &missing, &said, Some(100));
    r.track_with(0, &missing, &said, Some(105));
    assert_eq!(r.published, [vec![h(2, 0)]]);
}

#[test]
fn without_send_public_after_blocks_nothing_is_ever_published() {
    let mut r = one_accepted(PRIVATE);
    // Every check until TRACK_TTL_S, each far past any block count.
    for _ in 0..9 {
        r.track_with(0, &[(h(0, 0), Seen::Missing)], &[], Some(1_000));
    }
    assert!(r.published.is_empty());
    assert!(r.sends.is_empty());
}

#[test]
fn the_read_nodes_null_is_no_drop_behind_a_private_route() {
    let mut r = ten_accepted(PRIVATE);
    let missing: Vec<(TxHash, Seen)> = (0..10).map(|n| (h(n, 0), Seen::Missing)).collect();
    for _ in 0..3 {
        r.track(0, &missing);
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
    r.track(6, &seen);
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
        r.track(0, &[(h(0, 0), Seen::Missing)]);
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

#[test]
fn after_a_restart_behind_a_private_route_the_pending_count_counts_the_stored_ones_at_once() {
    // Four accepted by the route, none mined; the object restarted (a deploy). The read node
    // says null for each and counts 0: the first count must still say 4, or a wallet asking now
    // signs nonce 0 again (a conflicting transaction). They go to the route again to be sure.
    let rows: Vec<Row> = (0..4).map(|n| row(n, 0, 900)).collect();
    let mut r = Rig::restored(PRIVATE, &rows);
    let count = r.ticket();
    r.s.count(count, r.now);
    r.drain();
    r.learn(0, 0);
    let (verify, query) = r.lookup_for(|q| !q.hashes.is_empty());
    assert_eq!(query.hashes.len(), 4);
    r.reply(
        verify,
        known(&(0..4).map(|n| (h(n, 0), false)).collect::<Vec<_>>()),
    );
    assert_eq!(r.answer(count).0, Answer::Result("\"0x4\"".into()));
    assert_eq!(r.s.status(&h(2, 0), r.now).unwrap()["status"], "queued");
    // Each goes to the route again, in nonce order, and the count stays 4.
    assert_eq!(resend_turns(&mut r, 0), [0, 1, 2, 3]);
    let count = r.ticket();
    r.s.count(count, r.now);
    r.drain();
    r.learn(0, 0);
    assert_eq!(r.answer(count).0, Answer::Result("\"0x4\"".into()));
}

/// After a restart behind a private route with a status URL, nothing is sent to the route again
/// without its word (issue 41): the verify asks the route about the lowest stored ones beside the
/// read node; one it says its sender cancelled is final and never sent again, one it holds is not
/// sent, one it dropped is; those it was not asked about wait for the tracking checks.
#[test]
fn after_a_restart_the_route_is_asked_before_anything_is_sent_to_it_again() {
    let rows: Vec<Row> = (0..6).map(|n| row(n, 0, 900)).collect();
    let mut r = Rig::restored(WITH_STATUS, &rows);
    let count = r.ticket();
    r.s.count(count, r.now);
    r.drain();
    r.learn(0, 0);
    let (verify, query) = r.lookup_for(|q| !q.hashes.is_empty());
    assert_eq!(query.hashes.len(), 6);
    let asked: Vec<TxHash> = (0..MAX_STATUS_ASKED as u64).map(|n| h(n, 0)).collect();
    assert_eq!(
        query.route_statuses, asked,
        "the lowest ones' statuses, beside"
    );
    let mut found = Found {
        known: seen(&(0..6).map(|n| (h(n, 0), false)).collect::<Vec<_>>()),
        ..Found::default()
    };
    found.route = [
        (h(0, 0), RouteStatus::Pending),
        (h(1, 0), RouteStatus::Failed),
        (h(2, 0), RouteStatus::Included),
        (h(3, 0), RouteStatus::Cancelled),
    ]
    .into_iter()
    .collect();
    r.reply(verify, Ok(found));
    assert_eq!(r.s.status(&h(3, 0), r.now).unwrap()["status"], "cancelled");
    assert!(!r.rows.contains_key(&h(3, 0)), "its row is gone");
    assert_eq!(r.events("tx_cancelled").len(), 1);
    // Only the one the route dropped goes to it again.
    assert_eq!(resend_turns(&mut r, 0), [1]);
    assert!(r.rows.contains_key(&h(4, 0)) && r.rows.contains_key(&h(5, 0)));
}

/// Publishing is the sender's choice (issue 41): without its opt-in a transaction the route never
/// includes is never published, whatever the operator allows; with it, after its blocks, at most
/// what the operator allows now.
#[test]
fn only_a_sender_that_opted_in_is_published_and_never_sooner_than_it_asked() {
    let settings = Settings {
        public_after_blocks: Some(2),
        ..PRIVATE
    };
    let missing: Vec<(TxHash, Seen)> = (0..10).map(|n| (h(n, 0), Seen::Missing)).collect();
    let mut r = ten_accepted(settings);
    for head in [100, 110, 1_000] {
        let query = r.track_with(0, &missing, &[], Some(head));
        assert!(!query.head, "nothing needs the head");
    }
    assert!(r.published.is_empty(), "no opt-in: never published");
    // Opted in after 5, the operator allowing 2 (5 was capped to 2 at the Worker; the object
    // caps again, for rows kept across a lowered setting).
    let mut r = ten_accepted_as(settings, opted_in(5));
    assert_eq!(
        r.s.status(&h(0, 0), r.now).unwrap()["public_after_blocks"],
        2,
        "as honoured"
    );
    let query = r.track_with(0, &missing, &[], Some(100));
    assert!(query.head);
    r.track_with(0, &missing, &[], Some(101));
    assert!(r.published.is_empty());
    r.track_with(0, &missing, &[], Some(102));
    assert_eq!(r.published.len(), 1);
    assert_eq!(r.published[0].len(), 10);
    // An operator that allows none now: stored opt-ins publish nothing.
    let mut r = ten_accepted_as(
        Settings {
            public_after_blocks: None,
            ..PRIVATE
        },
        opted_in(1),
    );
    r.track_with(0, &missing, &[], Some(100));
    r.track_with(0, &missing, &[], Some(200));
    assert!(r.published.is_empty());
}

/// `eth_sendPrivateTransaction` with `maxBlockNumber` 3 blocks ahead, not included: once the head
/// passes it, final (`expired`), not counted, not sent again or published, its row gone.
#[test]
fn past_its_max_block_number_a_private_transaction_is_final_and_not_counted() {
    let terms = PrivateTerms {
        public_after_blocks: Some(1),
        max_block_number: Some(103),
    };
    let settings = Settings {
        public_after_blocks: Some(25),
        ..WITH_STATUS
    };
    let mut r = ten_accepted_as(settings, terms);
    assert_eq!(pending_count(&mut r), 10);
    let missing: Vec<(TxHash, Seen)> = (0..10).map(|n| (h(n, 0), Seen::Missing)).collect();
    let dropped: Vec<(TxHash, RouteStatus)> =
        (0..4).map(|n| (h(n, 0), RouteStatus::Failed)).collect();
    let query = r.track_with(0, &missing, &[], Some(100));
    assert!(query.head);
    r.track_with(0, &missing, &[], Some(103));
    assert_eq!(r.s.status(&h(0, 0), r.now).unwrap()["status"], "pending");
    let published = r.published.len();
    let sends = r.sends.len();
    // Past it: the route's word that it dropped them sends nothing again.
    r.track_with(0, &missing, &dropped, Some(104));
    for n in 0..10 {
        assert_eq!(
            r.s.status(&h(n, 0), r.now).unwrap()["status"],
            "expired",
            "{n}"
        );
        assert!(!r.rows.contains_key(&h(n, 0)), "its row is gone");
    }
    assert_eq!(r.events("tx_expired").len(), 10);
    assert_eq!(r.published.len(), published, "not published");
    assert!(
        r.published.is_empty(),
        "a maxBlockNumber is never published, opt-in or not"
    );
    assert_eq!(r.sends.len(), sends, "not sent again");
    assert!(
        r.lookups.iter().all(|(_, q)| q.hashes.is_empty()),
        "no resend's check"
    );
    assert_eq!(pending_count(&mut r), 0, "not counted");
}

/// The terms are kept in the row: a restart reads them back, and a `maxBlockNumber` that passed
/// while the relay was down makes the stored transaction final before anything is sent again.
#[test]
fn after_a_restart_a_max_block_number_that_passed_sends_nothing_again() {
    let terms = PrivateTerms {
        public_after_blocks: None,
        max_block_number: Some(50),
    };
    let stored = Row {
        tx: Rc::new(with_terms(0, terms)),
        at_ms: 900,
    };
    let hash = stored.tx.hash;
    // Its row's header as the store reads it back: the terms with it.
    let mut r = Rig::restored(WITH_STATUS, std::slice::from_ref(&stored));
    let count = r.ticket();
    r.s.count(count, r.now);
    r.drain();
    r.learn(0, 0);
    let (verify, query) = r.lookup_for(|q| !q.hashes.is_empty());
    assert!(query.head, "the head, for its maxBlockNumber: {query:?}");
    let found = Found {
        known: seen(&[(hash, false)]),
        route: [(hash, RouteStatus::Failed)].into_iter().collect(),
        head: Some(51),
        ..Found::default()
    };
    r.reply(verify, Ok(found));
    assert_eq!(r.s.status(&hash, r.now).unwrap()["status"], "expired");
    assert!(r.sends.is_empty(), "never sent again");
    assert!(r.lookups.iter().all(|(_, q)| q.hashes.is_empty()));
    assert!(!r.rows.contains_key(&hash), "its row is gone");
}

/// `eth_cancelPrivateTransaction`: a pending private transaction is cancelled at the route, and on
/// its `true` it is final (`cancelled`), its row gone, the pending count one lower; a `false`, an
/// unknown hash or one already final change nothing.
#[test]
fn a_cancel_the_route_confirms_ends_the_transaction_and_the_count_drops_by_one() {
    let mut r = ten_accepted(WITH_STATUS);
    assert_eq!(pending_count(&mut r), 10);
    let cancel = r.ticket();
    r.s.cancel(cancel, h(9, 0), r.now);
    r.drain();
    assert_eq!(r.cancels, [(cancel, h(9, 0))]);
    assert!(!r.answers.contains_key(&cancel), "waits for the route");
    r.s.cancel_answered(cancel, h(9, 0), Answer::Result("true".into()), r.now);
    r.drain();
    assert_eq!(r.answer(cancel).0, Answer::Result("true".into()));
    assert_eq!(r.s.status(&h(9, 0), r.now).unwrap()["status"], "cancelled");
    assert!(!r.rows.contains_key(&h(9, 0)));
    assert_eq!(r.events("tx_cancelled").len(), 1);
    assert_eq!(pending_count(&mut r), 9, "the count drops by one");
    // The route says no (already in a block, say): nothing changes.
    let no = r.ticket();
    r.s.cancel(no, h(8, 0), r.now);
    r.drain();
    r.s.cancel_answered(no, h(8, 0), Answer::Result("false".into()), r.now);
    r.drain();
    assert_eq!(r.answer(no).0, Answer::Result("false".into()));
    assert_eq!(r.s.status(&h(8, 0), r.now).unwrap()["status"], "pending");
    // Final already: false at once, the route not asked.
    let again = r.ticket();
    r.s.cancel(again, h(9, 0), r.now);
    r.drain();
    assert_eq!(r.answer(again).0, Answer::Result("false".into()));
    assert_eq!(r.cancels.len(), 2);
    // One this object does not know (sent around it, fail-open): the route is asked.
    let unknown = r.ticket();
    r.s.cancel(unknown, h(42, 0), r.now);
    r.drain();
    assert_eq!(r.cancels.len(), 3);
}

/// A cancel is remembered until it cannot matter: the route's `true` makes the transaction's row
/// its tombstone; a copy of the same bytes (a wallet's rebroadcast) is refused as cancelled past
/// `IDEMPOTENCY_TTL_S` and after a restart, never sent to the route again; an object whose only
/// row is a tombstone keeps it and sets no alarm (it hibernates); once the mined count passes the
/// nonce the tombstone goes, and the storage with it.
#[test]
fn a_cancel_outlasts_the_idempotency_window_and_a_restart_until_its_nonce_is_used() {
    let mut r = ten_accepted(WITH_STATUS);
    let cancel = r.ticket();
    r.s.cancel(cancel, h(9, 0), r.now);
    r.drain();
    r.s.cancel_answered(cancel, h(9, 0), Answer::Result("true".into()), r.now);
    r.drain();
    assert_eq!(r.tombstones.keys().copied().collect::<Vec<_>>(), [h(9, 0)]);
    assert!(!r.rows.contains_key(&h(9, 0)), "its bytes are gone");
    // A deploy: a new instance reads the nine rows and the tombstone; the copy comes after the
    // idempotency window.
    let mut woken = Rig::new(WITH_STATUS);
    woken.tombstones = r.tombstones.clone();
    woken.now = r.now + WITH_STATUS.idempotency_ttl_ms + 1;
    let rows: Vec<Row> = r.rows.values().cloned().collect();
    let mut woken = Rig::restored_into(woken, &rows);
    let copy = woken.arrive_tx(with_terms(9, PrivateTerms::default()));
    let (code, message) = woken.error_of(copy);
    assert_eq!(code, crate::jsonrpc::INVALID_INPUT);
    assert!(message.contains("cancelled"), "{message}");
    assert!(
        woken.sends.is_empty() && woken.cancels.is_empty(),
        "never sent again"
    );
    assert_eq!(
        woken.s.status(&h(9, 0), woken.now).unwrap()["status"],
        "cancelled"
    );
    // An object whose only row is the tombstone: it keeps it, and sets no alarm.
    let mut lone = Rig::new(WITH_STATUS);
    lone.tombstones = r.tombstones.clone();
    let mut lone = Rig::restored_into(lone, &[]);
    let copy = lone.arrive_tx(with_terms(9, PrivateTerms::default()));
    assert!(lone.error_of(copy).1.contains("cancelled"));
    assert_eq!(
        (lone.alarm, lone.s.poll_timeout()),
        (None, None),
        "nothing wakes it"
    );
    assert!(!lone.log.iter().any(|l| l == "vacate"), "{:?}", lone.log);
    assert_eq!(lone.tombstones.len(), 1);
    // Its sender's next pending count: nonce 9 not used yet (mined 9), then used (mined 10).
    for (mined, kept) in [(9, 1), (10, 0)] {
        let count = lone.ticket();
        lone.s.count(count, lone.now);
        lone.drain();
        lone.learn(mined, mined);
        assert_eq!(lone.tombstones.len(), kept, "mined {mined}");
    }
    assert!(lone.log.iter().any(|l| l == "vacate"), "{:?}", lone.log);
}

/// A transaction its sender's opt-in also sent to the public mempool, then cancelled at the
/// route: its public copy can still be mined, so it stays pending (tracked, counted), never sent
/// to the route again, and its status says both (`private_then_public`, route status
/// `cancelled`); no tombstone is kept for it.
#[test]
fn a_published_transaction_the_route_cancelled_stays_pending_and_says_both() {
    let settings = Settings {
        public_after_blocks: Some(25),
        ..WITH_STATUS
    };
    let mut r = ten_accepted_as(settings, opted_in(1));
    let missing: Vec<(TxHash, Seen)> = (0..10).map(|n| (h(n, 0), Seen::Missing)).collect();
    // The turns of the statuses test: 4 to 7 published at head 101; at head 103 the route says
    // its sender cancelled 4.
    let turns: [&[u64]; 4] = [&[0, 1, 2, 3], &[4, 5, 6, 7], &[0, 1, 8, 9], &[2, 3, 4, 5]];
    for (head, turn) in (100..).zip(turns) {
        let said: Vec<(TxHash, RouteStatus)> = turn
            .iter()
            .map(|&n| match (head, n) {
                (103, 4) => (h(n, 0), RouteStatus::Cancelled),
                _ => (h(n, 0), RouteStatus::Pending),
            })
            .collect();
        r.track_with(0, &missing, &said, Some(head));
    }
    assert!(r.published.iter().flatten().any(|hash| *hash == h(4, 0)));
    let status = r.s.status(&h(4, 0), r.now).unwrap();
    assert_eq!(status["status"], "pending", "{status}");
    assert_eq!(status["route"], "private_then_public");
    assert_eq!(status["route_status"], "cancelled");
    assert!(r.tombstones.is_empty());
    assert!(
        r.rows.contains_key(&h(4, 0)),
        "its bytes kept: it is tracked"
    );
    assert_eq!(r.events("tx_cancelled").len(), 1);
    assert_eq!(pending_count(&mut r), 10, "still counted: it may be mined");
    let sent = r.sends.len();
    r.track_with(0, &missing, &[(h(4, 0), RouteStatus::Cancelled)], Some(104));
    assert_eq!(r.events("tx_cancelled").len(), 1, "said once");
    // A later word of a drop (UNKNOWN, FAILED) sends nothing to a route: the cancel stands, in
    // its row too.
    r.track_with(0, &missing, &[(h(4, 0), RouteStatus::Failed)], Some(105));
    assert!(
        r.events("tx_route_dropped").is_empty(),
        "no drop taken: {:?}",
        r.log
    );
    assert!(
        !r.log.iter().any(|l| l.starts_with("load")),
        "nothing read back to send again"
    );
    assert_eq!(r.sends.len(), sent, "never sent to the route again");
    assert_eq!(
        r.s.status(&h(4, 0), r.now).unwrap()["route_status"],
        "cancelled"
    );
    assert!(r.progress.get(&h(4, 0)).is_some_and(|p| p.route_cancelled));
}

/// An object that starts with nothing stored asks the route's status of the transactions waiting
/// beside its first nonce lookup (which they wait for anyway), within a short timeout: one the
/// route says its sender cancelled (a rebroadcast of a cancel the object cannot remember) is
/// refused and its tombstone kept; `UNKNOWN` lets the others go. Asked once.
#[test]
fn a_fresh_object_asks_the_route_beside_its_first_lookup_and_refuses_a_cancelled_copy() {
    let mut r = Rig::new(WITH_STATUS);
    r.s.restore(None, &[], &[], r.now);
    r.drain();
    // A wallet's rebroadcast of what it sees pending, in one request (a lookup starts with the
    // first transaction that waits: one arriving after it is not asked).
    let tickets = r.arrive_all(&[0, 1]);
    let (copy, fresh) = (tickets[0], tickets[1]);
    let (id, query) = r.lookup_for(|q| q.pending);
    assert_eq!(query.route_statuses, [h(0, 0), h(1, 0)]);
    assert_eq!(
        query.route_status_timeout_ms,
        Some(crate::ordering::route_status::FIRST_SEND_STATUS_TIMEOUT_MS)
    );
    let found = Found {
        pending: Some(0),
        latest: Some(0),
        genesis: query.genesis.then(|| "0xgenesis".to_string()),
        route: [
            (h(0, 0), RouteStatus::Cancelled),
            (h(1, 0), RouteStatus::Unknown),
        ]
        .into_iter()
        .collect(),
        ..Found::default()
    };
    r.reply(id, Ok(found));
    assert!(r.error_of(copy).1.contains("cancelled"));
    assert_eq!(r.tombstones.keys().copied().collect::<Vec<_>>(), [h(0, 0)]);
    // Nonce 0 is free again: 1 waits for it, and the cancelled one never goes.
    assert!(r.sends.is_empty(), "{:?}", r.log);
    // The sender signs another 0: nothing asked of the route again, and both go in order.
    let other = r.arrive_variant(0, 1);
    assert!(r.lookups.iter().all(|(_, q)| q.route_statuses.is_empty()));
    assert_eq!(r.accept_next().hash, h(0, 1));
    assert_eq!(r.accept_next().hash, h(1, 0));
    assert_eq!(r.answer(other).0, Answer::hash(&h(0, 1)));
    assert_eq!(r.answer(fresh).0, Answer::hash(&h(1, 0)));
    // A restarted object with nothing stored but nothing waiting (a pending count first): its
    // lookup asks the route nothing.
    let mut counted = Rig::new(WITH_STATUS);
    counted.s.restore(None, &[], &[], counted.now);
    counted.drain();
    let count = counted.ticket();
    counted.s.count(count, counted.now);
    counted.drain();
    assert!(counted
        .lookups
        .iter()
        .all(|(_, q)| q.route_statuses.is_empty()));
}

/// Every pending one gets its turn at the route's status: each check asks the
/// [`MAX_STATUS_ASKED`] asked longest ago (never first), lowest nonce first among equals; and
/// with a status URL, one opted in to the public mempool is published only on the route's word
/// of that check, so all ten go public over three checks, none the route cancelled.
#[test]
fn statuses_are_asked_in_turn_and_publishing_waits_for_the_routes_word() {
    let settings = Settings {
        public_after_blocks: Some(25),
        ..WITH_STATUS
    };
    let mut r = ten_accepted_as(settings, opted_in(1));
    let missing: Vec<(TxHash, Seen)> = (0..10).map(|n| (h(n, 0), Seen::Missing)).collect();
    // Each check's turn: the ones never asked first, then the ones asked longest ago.
    let turns: [&[u64]; 4] = [&[0, 1, 2, 3], &[4, 5, 6, 7], &[0, 1, 8, 9], &[2, 3, 4, 5]];
    for (head, turn) in (100..).zip(turns) {
        // The route's word for those asked: held, but nonce 9 its sender cancelled.
        let said: Vec<(TxHash, RouteStatus)> = turn
            .iter()
            .map(|&n| {
                let status = match n {
                    9 => RouteStatus::Cancelled,
                    _ => RouteStatus::Pending,
                };
                (h(n, 0), status)
            })
            .collect();
        let q = r.track_with(0, &missing, &said, Some(head));
        let want: Vec<TxHash> = turn.iter().map(|&n| h(n, 0)).collect();
        assert_eq!(q.route_statuses, want, "head {head}");
    }
    let mut published: Vec<u64> = r
        .published
        .iter()
        .flatten()
        .map(|hash| (0..10).find(|n| h(*n, 0) == *hash).unwrap())
        .collect();
    published.sort_unstable();
    // 1 block after the first check (head 100): each on the route's word at its turn.
    assert_eq!(
        published,
        [0, 1, 2, 3, 4, 5, 6, 7, 8],
        "all but the cancelled one"
    );
    assert_eq!(
        r.published[0],
        (4..8).map(|n| h(n, 0)).collect::<Vec<_>>(),
        "head 101: only those asked"
    );
    assert_eq!(r.s.status(&h(9, 0), r.now).unwrap()["status"], "cancelled");
}

/// A client's copy of a transaction it sent behind a private route (a wallet's retry): sent to
/// the route again only on its word that it dropped it; held, or no word: the hash, nothing sent;
/// cancelled (now, or known before): -32000, never sent again, anywhere.
#[test]
fn a_clients_copy_is_sent_again_only_on_the_routes_word_that_it_dropped_it() {
    let copy = |r: &mut Rig, n: u64, word: Option<RouteStatus>| {
        let ticket = r.arrive(n);
        let (id, q) = r.lookup_for(|q| q.hashes == [h(n, 0)]);
        assert_eq!(q.route_statuses, [h(n, 0)], "the route is asked beside");
        let found = Found {
            known: seen(&[(h(n, 0), false)]),
            route: word.map(|w| (h(n, 0), w)).into_iter().collect(),
            ..Found::default()
        };
        r.reply(id, Ok(found));
        ticket
    };
    let mut r = ten_accepted(WITH_STATUS);
    // Held: the hash, no send.
    let held = copy(&mut r, 0, Some(RouteStatus::Pending));
    assert_eq!(r.answer(held).0, Answer::hash(&h(0, 0)));
    // No word (the status could not be had): the hash, no send.
    let unknown = copy(&mut r, 1, None);
    assert_eq!(r.answer(unknown).0, Answer::hash(&h(1, 0)));
    assert!(r.sends.is_empty(), "nothing sent again on a guess");
    // Cancelled: refused, final, never sent.
    let cancelled = copy(&mut r, 2, Some(RouteStatus::Cancelled));
    let (code, message) = r.answer(cancelled).0.error_parts().unwrap();
    assert_eq!(code, -32000);
    assert!(message.contains("cancelled"), "{message}");
    assert_eq!(r.s.status(&h(2, 0), r.now).unwrap()["status"], "cancelled");
    assert!(r.sends.is_empty());
    // Known cancelled: refused at once, nothing asked.
    let again = r.arrive(2);
    assert!(r.answer(again).0.error_parts().is_some());
    assert!(r.lookups.iter().all(|(_, q)| q.hashes != [h(2, 0)]));
    // Dropped: sent to the route again.
    copy(&mut r, 3, Some(RouteStatus::Failed));
    assert_eq!(resend_turns(&mut r, 0), [3]);
}

/// A route's own cancel (Flashbots Protect's rule: to its sender, at most 2 bytes of data) at the
/// nonce of one the route holds: once the route took it, both are final (`cancelled`) and
/// neither is counted: the wallet's next transaction reuses the nonce. Without a private route
/// the same transaction is an ordinary replacement, counted.
#[test]
fn a_routes_cancel_transaction_ends_both_and_neither_is_counted() {
    let mut r = ten_accepted(WITH_STATUS);
    assert_eq!(pending_count(&mut r), 10);
    let mut cancel = (*tx(9, 1)).clone();
    cancel.self_cancel = true;
    let ticket = r.arrive_tx(cancel);
    assert_eq!(
        resend_turns(&mut r, 0),
        [9],
        "checked at its turn, then to the route"
    );
    assert_eq!(r.answer(ticket).0, Answer::hash(&h(9, 1)));
    for hash in [h(9, 0), h(9, 1)] {
        assert_eq!(r.s.status(&hash, r.now).unwrap()["status"], "cancelled");
        assert!(!r.rows.contains_key(&hash), "its row is gone");
    }
    assert_eq!(pending_count(&mut r), 9, "neither is counted");
    // Without a route: a replacement like any, counted.
    let mut r = ten_accepted(Settings {
        private_route: false,
        ..PRIVATE
    });
    let mut cancel = (*tx(9, 1)).clone();
    cancel.self_cancel = true;
    r.arrive_tx(cancel);
    while let Some((id, _)) = r.lookups.pop() {
        r.reply(id, known(&[(h(9, 1), false)]));
    }
    r.accept_next();
    assert_eq!(r.s.status(&h(9, 0), r.now).unwrap()["status"], "replaced");
    assert_eq!(r.s.status(&h(9, 1), r.now).unwrap()["status"], "pending");
}

/// While a cancel is with the route nothing of the transaction is sent: a client's copy arriving
/// meanwhile is refused (-32000); and a cancel while a copy of it holds the lock for its send
/// gets -32002 with Retry-After, since the send would undo it. A copy holding the lock when the
/// cancel comes back `true` is refused at its check, never sent, its row gone.
#[test]
fn nothing_of_a_transaction_is_sent_while_its_cancel_is_out() {
    let mut r = ten_accepted(WITH_STATUS);
    let ticket = r.ticket();
    r.s.cancel(ticket, h(5, 0), r.now);
    r.drain();
    let copy = r.arrive(5);
    assert_eq!(r.answer(copy).0.error_parts().unwrap().0, -32000);
    assert!(
        r.lookups.iter().all(|(_, q)| q.hashes != [h(5, 0)]),
        "not even asked"
    );
    r.s.cancel_answered(ticket, h(5, 0), Answer::Result("true".into()), r.now);
    r.drain();
    assert_eq!(r.answer(ticket).0, Answer::Result("true".into()));
    assert!(r.sends.is_empty());
    // A copy of nonce 6 the route dropped holds the lock for its check: a cancel now is -32002.
    let resend = r.arrive(6);
    let (id, _) = r.lookup_for(|q| q.hashes == [h(6, 0)] && !q.route_statuses.is_empty());
    r.reply(
        id,
        Ok(Found {
            known: seen(&[(h(6, 0), false)]),
            route: [(h(6, 0), RouteStatus::Failed)].into_iter().collect(),
            ..Found::default()
        }),
    );
    let busy = r.ticket();
    r.s.cancel(busy, h(6, 0), r.now);
    r.drain();
    let (answer, retry_after) = r.answer(busy).clone();
    assert_eq!(answer.error_parts().unwrap().0, -32002);
    assert_eq!(retry_after, Some(1));
    // The route cancels it meanwhile (its status): the copy is refused at its check, unsent.
    let ticket = r.ticket();
    r.s.cancel_answered(ticket, h(6, 0), Answer::Result("true".into()), r.now);
    r.drain();
    while let Some((id, q)) = r.lookups.pop() {
        r.reply(
            id,
            known(&q.hashes.iter().map(|h| (*h, false)).collect::<Vec<_>>()),
        );
    }
    assert_eq!(r.answer(resend).0.error_parts().unwrap().0, -32000);
    assert!(r.sends.is_empty(), "never sent");
    assert!(!r.rows.contains_key(&h(6, 0)), "its row is gone");
}

/// The first send's terms stay with the transaction: a later copy of the same bytes (a plain
/// resend, another opt-in) neither lifts its `maxBlockNumber` nor opts it in. And a route's
/// cancel transaction at the nonce of one already sent to the public mempool is an ordinary
/// replacement (the route cannot cancel what the mempool has).
#[test]
fn a_copy_keeps_the_first_terms_and_a_public_one_is_not_cancelled_by_the_route_rule() {
    let terms = PrivateTerms {
        public_after_blocks: None,
        max_block_number: Some(50),
    };
    let mut r = ten_accepted_as(WITH_STATUS, terms);
    // A plain copy of the same bytes, through an opt-in URL, which the route had dropped: sent
    // again, and taken.
    let mut plain = (*tx(3, 0)).clone();
    plain.public_after_blocks = Some(1);
    let copy = r.arrive_tx(plain);
    let (id, _) = r.lookup_for(|q| q.hashes == [h(3, 0)]);
    r.reply(
        id,
        Ok(Found {
            known: seen(&[(h(3, 0), false)]),
            route: [(h(3, 0), RouteStatus::Failed)].into_iter().collect(),
            ..Found::default()
        }),
    );
    assert_eq!(resend_turns(&mut r, 0), [3]);
    assert_eq!(r.answer(copy).0, Answer::hash(&h(3, 0)));
    let status = r.s.status(&h(3, 0), r.now).unwrap();
    assert_eq!(status["max_block_number"], 50, "{status}");
    assert_eq!(status["public_after_blocks"], Value::Null);
    // Published, then a cancel transaction by the route's rule at its nonce: a replacement.
    let settings = Settings {
        public_after_blocks: Some(1),
        ..WITH_STATUS
    };
    let mut r = ten_accepted_as(settings, opted_in(1));
    let missing: Vec<(TxHash, Seen)> = (0..10).map(|n| (h(n, 0), Seen::Missing)).collect();
    let said: Vec<(TxHash, RouteStatus)> =
        (6..10).map(|n| (h(n, 0), RouteStatus::Pending)).collect();
    r.track_with(0, &missing, &said, Some(100));
    r.track_with(0, &missing, &said, Some(101));
    assert!(
        r.published.iter().flatten().any(|hash| *hash == h(9, 0)),
        "{:?}",
        r.published
    );
    let mut cancel = (*tx(9, 1)).clone();
    cancel.self_cancel = true;
    r.arrive_tx(cancel);
    while let Some((id, q)) = r.lookups.pop() {
        r.reply(
            id,
            known(&q.hashes.iter().map(|h| (*h, false)).collect::<Vec<_>>()),
        );
    }
    r.accept_next();
    assert_eq!(r.s.status(&h(9, 0), r.now).unwrap()["status"], "replaced");
    assert_eq!(r.s.status(&h(9, 1), r.now).unwrap()["status"], "pending");
}

/// Across a loss of the object's memory between checks (a hibernation: an idle object is no
/// longer kept in memory by a timer), what tracking learned stays in the row and comes back with
/// it: the resend count, so the cap holds, and the head the sender's opt-in counts its blocks
/// from, so it is published on time.
#[test]
fn what_tracking_learned_outlasts_the_objects_memory() {
    let settings = Settings {
        public_after_blocks: Some(25),
        ..WITH_STATUS
    };
    let mut r = Rig::new(settings);
    r.arrive_tx(with_terms(0, opted_in(3)));
    r.learn(0, 0);
    r.accept_next();
    // First found pending at head 100; at the next check the route failed it: sent again once.
    let missing = [(h(0, 0), Seen::Missing)];
    r.track_with(0, &missing, &[(h(0, 0), RouteStatus::Pending)], Some(100));
    assert_eq!(
        r.progress.get(&h(0, 0)).and_then(|p| p.since_block),
        Some(100)
    );
    r.track_with(0, &missing, &[(h(0, 0), RouteStatus::Failed)], Some(101));
    resend_turns(&mut r, 0);
    let kept = r.progress.get(&h(0, 0)).copied().expect("kept in its row");
    assert_eq!(
        (kept.resent, kept.since_block, kept.public),
        (1, Some(100), false)
    );
    // The object's memory goes; a new instance reads the row back.
    let rows: Vec<Row> = r.rows.values().cloned().collect();
    let woken = Rig::woken(settings, &rows, &r.progress);
    assert_eq!(woken.s.accepted.progress(&h(0, 0)), Some(kept));
    assert_eq!(
        woken.s.status(&h(0, 0), woken.now).unwrap()["resubmitted"],
        1
    );
    // Without the row's progress the instance would count from nothing.
    let forgetful = Rig::restored(settings, &rows);
    assert_eq!(
        forgetful.s.accepted.progress(&h(0, 0)).map(|p| p.resent),
        Some(0)
    );
}

/// What a private route took is kept in its row: a new instance (a wake, a restart) does not send
/// it to the route again, where the read node's null would otherwise look like a loss.
#[test]
fn what_the_route_took_is_not_sent_to_it_again_after_a_wake() {
    let r = one_accepted(PRIVATE);
    assert!(
        r.progress.get(&h(0, 0)).is_some_and(|p| p.vouched),
        "{:?}",
        r.progress
    );
    let rows: Vec<Row> = r.rows.values().cloned().collect();
    let mut woken = Rig::woken(PRIVATE, &rows, &r.progress);
    woken.learn(0, 0);
    assert!(
        woken.lookups.iter().all(|(_, q)| q.hashes.is_empty()),
        "not asked: {:?}",
        woken.lookups
    );
    assert!(woken.sends.is_empty(), "not sent to the route again");
    // Without the row's word, a new instance sends it to the route again to be sure.
    let mut forgetful = Rig::restored(PRIVATE, &rows);
    forgetful.learn(0, 0);
    let (verify, query) = forgetful.lookup_for(|q| !q.hashes.is_empty());
    assert_eq!(query.hashes, vec![h(0, 0)]);
    forgetful.reply(verify, known(&[(h(0, 0), false)]));
    assert_eq!(resend_turns(&mut forgetful, 0), [0], "{:?}", forgetful.log);
}

/// Behind several routes, the one that took a transaction (the second, the first having timed
/// out) is kept with it, in its row too: its status is asked there first (then at the others),
/// by a tracking check and by a new instance's, and its cancel names it.
#[test]
fn the_route_that_took_it_is_asked_first_and_kept_across_a_wake() {
    let mut r = Rig::new(WITH_STATUS);
    r.answering_route = Some(1);
    r.arrive(0);
    r.learn(0, 0);
    r.accept_next();
    let both = TakenBy::route(1);
    assert_eq!(r.progress.get(&h(0, 0)).map(|p| p.taken_by), Some(both));
    let q = r.track_with(0, &[(h(0, 0), Seen::Missing)], &[], None);
    assert_eq!(q.route_statuses, [h(0, 0)]);
    assert_eq!(q.route_holders, [(h(0, 0), both)]);
    // A new instance reads it from the row, and asks the same.
    let rows: Vec<Row> = r.rows.values().cloned().collect();
    let mut woken = Rig::woken(WITH_STATUS, &rows, &r.progress);
    woken.learn(0, 0);
    let (_, query) = woken.lookup_for(|q| !q.route_statuses.is_empty());
    assert_eq!(query.route_holders, [(h(0, 0), both)]);
    // Its cancel goes to both.
    let cancel = r.ticket();
    r.s.cancel(cancel, h(0, 0), r.now);
    r.drain();
    assert_eq!(r.cancel_routes, [both]);
}
