use super::*;

fn h(n: u8) -> TxHash {
    [n; 32]
}

#[test]
fn stored_bytes_are_bounded_the_oldest_pending_expiring_first() {
    let mut a = Accepted::new(60_000, 600_000);
    let big = MAX_TRACKED_BYTES / 3;
    for n in 0..3u8 {
        a.record(
            h(n),
            u64::from(n),
            1_000 + u64::from(n),
            true,
            PrivateTerms::default(),
        );
        assert!(
            a.sized(&h(n), big, 1_000).over_bytes.is_empty(),
            "within the bound"
        );
    }
    a.record(h(3), 3, 2_000, true, PrivateTerms::default());
    let pruned = a.sized(&h(3), big, 2_000);
    let expired: Vec<TxHash> = pruned.over_bytes.iter().map(|(hash, _)| *hash).collect();
    assert_eq!(expired, vec![h(0)], "the oldest go until it fits");
    assert_eq!(a.get(&h(0), 2_000).unwrap().status, Status::Expired);
    assert_eq!(a.pending().len(), 3);
}

#[test]
fn pending_until_final_then_remembered_for_the_window() {
    let mut a = Accepted::new(1_000, 5_000);
    assert_eq!(
        a.record(h(1), 5, 100, true, PrivateTerms::default()),
        Pruned::default()
    );
    assert_eq!(a.get(&h(1), 200).unwrap().status, Status::Pending);
    assert_eq!(a.pending(), vec![(5, h(1))]);
    assert_eq!(a.with_nonce(5, 200), Some(h(1)));
    assert!(a.finish(&h(1), Status::Included { block: 7 }, 2_000));
    assert!(a.pending().is_empty());
    assert_eq!(
        a.with_nonce(5, 2_500),
        Some(h(1)),
        "an included one keeps its nonce"
    );
    assert_eq!(a.next_due_ms(), Some(3_000));
    assert_eq!(a.prune(2_999), Pruned::default());
    assert_eq!(a.prune(3_000).gone, vec![h(1)]);
    assert!(a.is_empty());
}

#[test]
fn pending_ones_expire_after_the_tracking_window() {
    let mut a = Accepted::new(1_000, 5_000);
    a.record(h(1), 5, 100, true, PrivateTerms::default());
    let pruned = a.prune(5_100);
    assert_eq!(pruned.expired.len(), 1);
    assert_eq!(a.get(&h(1), 5_100).unwrap().status, Status::Expired);
    assert_eq!(
        a.with_nonce(5, 5_100),
        None,
        "an expired one gives its nonce up"
    );
    assert_eq!(a.prune(6_100).gone, vec![h(1)]);
}

#[test]
fn a_replacement_takes_the_nonce_and_says_so() {
    let mut a = Accepted::new(10_000, 60_000);
    a.record(h(1), 5, 0, true, PrivateTerms::default());
    a.record(h(2), 6, 1, true, PrivateTerms::default());
    assert_eq!(
        a.record(h(3), 5, 2, true, PrivateTerms::default()).gone,
        vec![h(1)]
    );
    assert_eq!(a.with_nonce(5, 3), Some(h(3)));
    assert_eq!(
        a.get(&h(1), 3).unwrap().status,
        Status::Replaced { by: Some(h(3)) }
    );
    assert_eq!(a.from_nonce(6, 3), vec![(6, h(2))]);
    let recent: Vec<TxHash> = a.recent(10, 3).into_iter().map(|(hash, _)| hash).collect();
    assert_eq!(recent, vec![h(3), h(2), h(1)]);
}

#[test]
fn one_with_an_unknown_outcome_takes_the_nonce_only_once_vouched_for() {
    let mut a = Accepted::new(10_000, 60_000);
    a.record(h(1), 5, 0, false, PrivateTerms::default());
    // Another transaction with nonce 5 whose answer was lost: both are followed.
    assert_eq!(
        a.record(h(2), 5, 1, false, PrivateTerms::default()),
        Pruned::default()
    );
    assert_eq!(a.with_nonce(5, 2), Some(h(1)), "the first still holds it");
    assert_eq!(a.pending(), vec![(5, h(1)), (5, h(2))]);
    assert_eq!(a.from_nonce(0, 2), vec![(5, h(1)), (5, h(2))]);
    assert_eq!(a.get(&h(1), 2).unwrap().status, Status::Pending);
    // The upstream has the second: it takes the nonce, the first is replaced.
    assert_eq!(a.vouch(&h(2), 3).unwrap().gone, vec![h(1)]);
    assert_eq!(a.with_nonce(5, 3), Some(h(2)));
    assert_eq!(
        a.get(&h(1), 3).unwrap().status,
        Status::Replaced { by: Some(h(2)) }
    );
    assert_eq!(a.pending(), vec![(5, h(2))]);
    // A vouched one takes the nonce at once.
    assert_eq!(
        a.record(h(3), 5, 4, true, PrivateTerms::default()).gone,
        vec![h(2)]
    );
}

#[test]
fn vouch_resend_forget_and_clear() {
    let mut a = Accepted::new(10_000, 60_000);
    a.record(h(1), 1, 0, false, PrivateTerms::default());
    a.record(h(2), 2, 0, false, PrivateTerms::default());
    assert!(!a.get(&h(1), 1).unwrap().vouched);
    assert!(a.vouch(&h(1), 1).is_some());
    assert!(a.get(&h(1), 1).unwrap().vouched);
    assert_eq!((a.resent(&h(1)), a.resent(&h(1))), (1, 2));
    a.record(h(1), 1, 5, true, PrivateTerms::default());
    assert_eq!(
        a.get(&h(1), 6).unwrap().resent,
        2,
        "kept across a new acceptance"
    );
    assert_eq!(a.get(&h(1), 6).unwrap().at_ms, 0, "first accepted");
    assert!(a.forget(&h(2)));
    assert!(!a.forget(&h(2)));
    assert_eq!(a.with_nonce(2, 1), None);
    assert_eq!(a.clear(), vec![h(1)]);
}

fn nth(n: u64) -> TxHash {
    let mut hash = [0u8; 32];
    hash[..8].copy_from_slice(&n.to_be_bytes());
    hash
}

#[test]
fn bounded_oldest_final_first() {
    let mut a = Accepted::new(u64::MAX / 4, u64::MAX / 4);
    let mut gone = Vec::new();
    for n in 0..(MAX_ACCEPTED as u64 + 3) {
        gone.extend(a.record(nth(n), n, n, true, PrivateTerms::default()).gone);
        a.finish(&nth(n), Status::Included { block: n }, n);
    }
    assert_eq!(a.len(), MAX_ACCEPTED);
    assert_eq!(gone, vec![nth(0), nth(1), nth(2)]);
}

#[test]
fn a_pending_one_is_never_forgotten_for_the_bound() {
    // Issue 32, point 6: past MAX_ACCEPTED only final ones leave; pending ones stay tracked.
    let mut a = Accepted::new(u64::MAX / 4, u64::MAX / 4);
    a.record(nth(0), 0, 0, true, PrivateTerms::default());
    assert!(!a.is_full(None));
    let mut gone = Vec::new();
    for n in 1..=(MAX_ACCEPTED as u64) {
        gone.extend(a.record(nth(n), n, n, true, PrivateTerms::default()).gone);
        if n % 2 == 1 {
            a.finish(&nth(n), Status::Included { block: n }, n);
        }
    }
    // Over the bound by one: the oldest final one (1) left, never the oldest pending one (0).
    assert_eq!(gone, vec![nth(1)]);
    assert_eq!(a.len(), MAX_ACCEPTED);
    assert_eq!(a.get(&nth(0), 0).unwrap().status, Status::Pending);
    assert!(a.get(&nth(1), 0).is_none());
    assert!(!a.is_full(None), "final ones can still make room");
    let mut b = Accepted::new(u64::MAX / 4, u64::MAX / 4);
    for n in 0..(MAX_ACCEPTED as u64 + 1) {
        assert!(
            b.record(nth(n), n, n, true, PrivateTerms::default())
                .gone
                .is_empty(),
            "none forgotten"
        );
    }
    assert_eq!(b.pending().len(), MAX_ACCEPTED + 1);
    assert!(b.is_full(None), "only pending ones: a new send is refused");
    // Those whose nonce the mined count passed are not outstanding: no longer full.
    assert_eq!(b.outstanding(Some(10)), MAX_ACCEPTED + 1 - 10);
    assert!(!b.is_full(Some(10)), "ten of them are in blocks");
}

#[test]
fn the_pending_bound_counts_what_is_outstanding_and_caps_what_waits_to_be_told_apart() {
    let mut a = Accepted::new(u64::MAX / 4, u64::MAX / 4);
    for n in 0..(MAX_PENDING as u64 - 1) {
        a.record(nth(n), n, n, true, PrivateTerms::default());
    }
    let mined = Some(MAX_PENDING as u64 - MAX_ACCEPTED as u64);
    assert_eq!(a.outstanding(mined), MAX_ACCEPTED - 1);
    assert!(!a.is_full(mined));
    a.record(
        nth(MAX_PENDING as u64),
        MAX_PENDING as u64,
        0,
        true,
        PrivateTerms::default(),
    );
    assert!(
        a.is_full(Some(MAX_PENDING as u64)),
        "four times the bound pending in all"
    );
}

#[test]
fn with_tracking_off_the_oldest_pending_ones_expire_past_the_bound() {
    let mut a = Accepted::new(u64::MAX / 4, u64::MAX / 4);
    for n in 0..(MAX_ACCEPTED as u64 + 2) {
        a.record(nth(n), n, n, true, PrivateTerms::default());
    }
    assert_eq!(
        a.untracked_bound(5)
            .over_count
            .iter()
            .map(|(h, _)| *h)
            .collect::<Vec<_>>(),
        vec![nth(0), nth(1)]
    );
    assert_eq!(a.get(&nth(0), 5).unwrap().status, Status::Expired);
    assert_eq!(a.pending().len(), MAX_ACCEPTED);
    assert!(a.untracked_bound(6).over_count.is_empty());
}
