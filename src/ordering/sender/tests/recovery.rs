//! Late answers, relearns, restarts, chains and force release.

use super::*;
use crate::ordering::answer::AnswerClass;
use crate::ordering::sender::*;

#[test]
fn defect_2_a_late_holders_answer_answers_nobody_and_settles_a_waiting_resend() {
    let mut r = Rig::new(SETTINGS);
    let first = r.arrive(0);
    r.learn(0, 0);
    let lost = r.send(); // its task never reports in time
    let deadline = lost.deadline_ms;
    r.at(deadline + SETTINGS.grace_ms());
    assert_eq!(r.events("force_release").len(), 1);
    let (recovery, query) = r.lookup_for(|q| !q.hashes.is_empty());
    assert_eq!(query.hashes, vec![h(0, 0)]);
    // The upstream can't be asked: the outcome stays unknown.
    r.reply(recovery, Err(LookupError::Unavailable("refused".into())));
    let (code, message) = r.error_of(first);
    assert_eq!(code, -32002);
    assert!(message.contains("outcome unknown"), "{message}");
    // The client sends the same bytes again: asked by hash first (not vouched for).
    let resend = r.arrive(0);
    assert!(!r.answers.contains_key(&resend));
    // The late holder's answer: it went in. Nobody else is answered by it, the resend gets the
    // hash, and nothing is sent twice.
    r.finish(&lost, AnswerClass::Accepted);
    assert_eq!(r.answer(resend).0, Answer::hash(&h(0, 0)));
    assert_eq!(
        r.answers[&first].len(),
        1,
        "the first client was answered once"
    );
    assert_eq!(r.events("late_release_ignored").len(), 1);
    // The check's own answer, arriving after, changes nothing.
    let (check, _) = r.lookup_for(|q| !q.pending && !q.hashes.is_empty());
    r.reply(check, known(&[(h(0, 0), true)]));
    assert_eq!(r.answers[&resend].len(), 1);
    // The relearn the unknown outcome asked for: the upstream's count has 0 in it.
    r.learn(1, 0);
    assert_eq!(r.s.nonces().0, Some(1));
    assert!(r.sends.is_empty(), "the same bytes are never sent twice");
    let third = r.arrive(0);
    let (check, _) = r.lookup();
    r.reply(check, known(&[(h(0, 0), true)]));
    assert_eq!(r.answer(third).0, Answer::hash(&h(0, 0)), "known now");
    assert!(r.sends.is_empty());
}

#[test]
fn defect_3_a_relearn_below_the_accepted_nonces_asks_for_them_by_hash() {
    let mut r = Rig::new(SETTINGS);
    r.arrive(0);
    r.learn(0, 0);
    r.accept_next(); // 0 accepted a moment ago
    r.arrive(1);
    let call = r.send();
    r.finish(&call, AnswerClass::Unrecognized); // the outcome of 1 is unknown: relearn
    let waiting = r.now;
    let t2 = r.arrive(2);
    // A lagging node: its pending count has seen neither.
    r.learn(0, 0);
    let (verify, query) = r.lookup();
    assert_eq!(
        query.hashes,
        vec![h(0, 0), h(1, 0)],
        "asked before deciding"
    );
    assert!(r.sends.is_empty());
    r.reply(verify, known(&[(h(0, 0), true), (h(1, 0), true)]));
    assert_eq!(r.s.nonces().0, Some(2));
    // 2 goes at once, not after a gap wait.
    let call = r.send();
    assert_eq!((call.nonce, r.now), (2, waiting));
    r.finish(&call, AnswerClass::Accepted);
    assert!(r.answers.contains_key(&t2));

    // Absent: the upstream forgot them; the one whose nonce is free is sent again from its bytes.
    let mut r = Rig::new(SETTINGS);
    r.arrive(0);
    r.learn(0, 0);
    r.accept_next();
    r.arrive(1);
    let call = r.send();
    r.finish(&call, AnswerClass::Unrecognized);
    r.learn(0, 0);
    let (verify, _) = r.lookup();
    r.reply(verify, known(&[(h(0, 0), false), (h(1, 0), false)]));
    assert_eq!(r.s.nonces().0, Some(0));
    assert_eq!(r.s.counters.resubmitted, 2);
    assert_eq!(r.accept_next().nonce, 0);
    assert_eq!(r.accept_next().nonce, 1);
    let stored = |n: &str| r.log.iter().filter(|l| *l == n).count();
    assert_eq!(
        (stored("store 0"), stored("store 1")),
        (1, 1),
        "resent from storage"
    );
}

#[test]
fn a_restarted_object_checks_its_stored_transactions_and_resends_what_the_upstream_forgot() {
    let mut r = Rig::restored(SETTINGS, &[row(0, 0, 900), row(1, 0, 950)]);
    // At once, without a client: counts and the genesis hash.
    let (id, query) = r.lookup();
    assert!(query.genesis && query.pending);
    r.reply(
        id,
        Ok(Found {
            pending: Some(1),
            latest: Some(1),
            genesis: Some("0xgenesis".into()),
            ..Found::default()
        }),
    );
    // Both asked by hash: 0, whose nonce the mined count passed (in a block, or replaced: settled
    // now, not left to a check a hibernating object would never reach), and 1 (the holder in
    // flight at the crash).
    let (verify, query) = r.lookup();
    assert_eq!(query.hashes, vec![h(0, 0), h(1, 0)]);
    let found = Found {
        known: [
            (h(0, 0), Seen::Included { block: 1 }),
            (h(1, 0), Seen::Missing),
        ]
        .into_iter()
        .collect(),
        ..Found::default()
    };
    r.reply(verify, Ok(found));
    assert_eq!(r.s.counters.included, 1, "0 settled at the restart");
    let call = r.send();
    assert_eq!((call.nonce, call.hash), (1, h(1, 0)));
    assert!(
        !r.log.iter().any(|l| l == "store 1"),
        "already stored: not written again"
    );
    // A client's copy of it, sent again after the crash, joins it.
    let copy = r.arrive(1);
    r.finish(&call, AnswerClass::Accepted);
    assert_eq!(r.answer(copy).0, Answer::hash(&h(1, 0)));
    // A resend of the mined 0 gets its hash at once: the restart found it in a block.
    let resend = r.arrive(0);
    assert_eq!(r.answer(resend).0, Answer::hash(&h(0, 0)));
    assert!(r.sends.is_empty());
}

#[test]
fn state_of_another_chain_is_dropped_never_sent() {
    let mut r = Rig::new(SETTINGS);
    r.chain = Some("0xold".into());
    let hash = h(0, 0);
    r.rows.insert(hash, row(0, 0, 900));
    let stored = RowHeader {
        hash,
        nonce: 0,
        at_ms: 900,
        terms: Default::default(),
        progress: Default::default(),
    };
    r.s.restore(Some("0xold".into()), &[stored], &[], r.now);
    r.drain();
    // `make dev` twice: a fresh chain asked for the pending count.
    let count = r.ticket();
    r.s.count(count, r.now);
    r.drain();
    let (id, query) = r.lookup();
    assert!(query.genesis);
    r.reply(
        id,
        Ok(Found {
            pending: Some(0),
            latest: Some(0),
            genesis: Some("0xnew".into()),
            ..Found::default()
        }),
    );
    assert_eq!(r.answer(count).0, Answer::Result("\"0x0\"".into()));
    assert!(r.log.contains(&"wipe".to_string()));
    assert!(r.rows.is_empty() && r.lookups.is_empty() && r.sends.is_empty());
    assert_eq!(r.s.counters.chain_changes, 1);
    // The same transaction sent again is an ordinary one on the new chain.
    r.arrive(0);
    assert_eq!(r.send().nonce, 0);
    assert_eq!(r.chain.as_deref(), Some("0xnew"));
}

#[test]
fn a_holder_that_never_reports_is_resolved_by_hash_and_sent_again_at_most_twice() {
    let mut r = Rig::new(SETTINGS);
    let t = r.arrive(0);
    r.learn(0, 0);
    let mut lost = r.send();
    for round in 1..=2 {
        r.at(lost.deadline_ms + SETTINGS.grace_ms());
        let (id, query) = r.lookup();
        assert_eq!(query.hashes, vec![h(0, 0)]);
        r.reply(
            id,
            Ok(Found {
                pending: Some(0),
                latest: Some(0),
                known: seen(&[(h(0, 0), false)]),
                ..Found::default()
            }),
        );
        let again = r.send();
        assert_ne!(again.key, lost.key, "round {round}: a new session key");
        assert_eq!(again.hash, lost.hash);
        lost = again;
    }
    r.at(lost.deadline_ms + SETTINGS.grace_ms());
    let (id, _) = r.lookup();
    r.reply(
        id,
        Ok(Found {
            pending: Some(0),
            latest: Some(0),
            known: seen(&[(h(0, 0), false)]),
            ..Found::default()
        }),
    );
    assert_eq!(r.error_of(t).0, -32002);
    assert_eq!(r.s.counters.force_releases, 3);
}

#[test]
fn the_alarm_is_set_while_durable_work_is_under_way_and_deleted_after() {
    let mut r = Rig::new(SETTINGS);
    r.arrive(0);
    r.learn(0, 0);
    assert!(r.alarm.is_some(), "set with the first row");
    let alarm = r.alarm.unwrap();
    assert!(alarm >= r.now + SETTINGS.max_hold_ms);
    // The alarm firing while the holder still sends: nothing set while its handler runs (the
    // platform runs it again should the handler not return), set again when it returns.
    r.alarm = None;
    r.s.alarm(alarm - 1);
    r.drain();
    assert_eq!(r.alarm, None, "nothing set while the handler runs");
    r.s.alarm_done(alarm - 1);
    r.drain();
    assert!(r.alarm.is_some());
    r.accept_next();
    assert_eq!(r.alarm, None);
}

#[test]
fn a_transaction_the_upstream_never_keeps_is_sent_again_at_most_twice_then_abandoned() {
    let mut r = Rig::new(SETTINGS);
    let first = r.arrive(0);
    r.learn(0, 0);
    let waiter = r.arrive(1);
    for round in 0..=knowledge::MAX_RESENDS {
        let call = r.send();
        assert_eq!(call.nonce, 0, "round {round}");
        r.finish(&call, AnswerClass::Unavailable);
        r.learn(0, 0);
        let (verify, _) = r.lookup_for(|q| !q.hashes.is_empty());
        r.reply(verify, known(&[(h(0, 0), false)]));
    }
    // Its client had its answer at the first deadline: the outcome unknown (EIP-1474 -32002,
    // the hash as data), since the relay keeps it and sends it again.
    let (code, message) = r.error_of(first);
    assert_eq!(code, -32002, "{message}");
    assert!(
        message.starts_with("transaction outcome unknown"),
        "{message}"
    );
    let (answer, _) = r.answer(first);
    assert!(
        matches!(&answer, Answer::Error(e) if e.contains(&crate::hex::encode(&h(0, 0)))),
        "{answer:?}"
    );
    assert_eq!(r.s.counters.abandoned, 1);
    assert_eq!(r.events("tx_abandoned").len(), 1);
    assert!(!r.rows.contains_key(&h(0, 0)));
    // 1 is not held for good: it goes after its gap wait.
    let due = r.s.poll_timeout().expect("a due time");
    r.at(due);
    let call = r.send();
    assert_eq!(call.nonce, 1);
    r.finish(&call, AnswerClass::Accepted);
    assert!(r.answers.contains_key(&waiter));
}

#[test]
fn a_checked_nonce_that_the_upstreams_count_puts_above_a_gap_waits_its_gap_before_it_is_sent() {
    // 4 went over a gap (the node keeps it queued), so the next nonce is 5 and 2 is checked by
    // hash as a nonce below it; meanwhile the upstream's count (0, it does not count queued
    // transactions above a gap) puts the next nonce back at 0: 2 is above a gap now.
    let mut r = Rig::new(SETTINGS);
    r.arrive(4);
    r.learn(0, 0);
    r.at(r.now + SETTINGS.gap_wait_ms);
    r.accept_next();
    assert_eq!(r.s.nonces().0, Some(5));
    r.arrive(2);
    let count = r.ticket();
    r.s.count(count, r.now);
    r.drain();
    r.learn(0, 0);
    let (verify, query) = r.lookup_for(|q| q.hashes == [h(4, 0)]);
    assert!(!query.pending);
    r.reply(verify, known(&[(h(4, 0), true)]));
    assert_eq!(r.s.nonces().0, Some(0));
    let (check, _) = r.lookup_for(|q| q.hashes == [h(2, 0)]);
    r.reply(
        check,
        Ok(Found {
            latest: Some(0),
            known: seen(&[(h(2, 0), false)]),
            ..Found::default()
        }),
    );
    assert!(
        r.sends.is_empty(),
        "not sent above the gap at once: {:?}",
        r.log
    );
    r.at(r.now + SETTINGS.gap_wait_ms);
    assert_eq!(r.send().nonce, 2, "sent after its gap wait");
    assert_eq!(r.events("gap_wait_expired").len(), 2);
}

/// A transaction the upstream keeps dropping, while the object loses its memory before every
/// check (a hibernation, or a restart): each new instance counts its resends from what the row
/// kept, so it is sent again at most `MAX_RESENDS` times in all, then abandoned.
#[test]
fn the_resend_cap_holds_across_losses_of_the_objects_memory() {
    let rows = [row(0, 0, 900)];
    let mut progress: BTreeMap<TxHash, RowProgress> = BTreeMap::new();
    let mut resent = 0;
    for life in 0..=knowledge::MAX_RESENDS {
        let mut r = Rig::woken(SETTINGS, &rows, &progress);
        r.learn(0, 0);
        let (verify, query) = r.lookup();
        assert_eq!(query.hashes, vec![h(0, 0)], "life {life}");
        r.reply(verify, known(&[(h(0, 0), false)]));
        if life < knowledge::MAX_RESENDS {
            let call = r.send();
            assert_eq!(call.hash, h(0, 0), "life {life}: sent again");
            resent += 1;
            // The pool takes it and drops it again before the next check; the memory goes.
            r.finish(&call, AnswerClass::Accepted);
            progress = r.progress.clone();
            assert_eq!(progress[&h(0, 0)].resent, resent, "kept in its row");
        } else {
            assert!(r.sends.is_empty(), "past the cap: not sent again");
            assert_eq!(r.s.counters.abandoned, 1);
            assert!(!r.rows.contains_key(&h(0, 0)), "its row is gone");
        }
    }
    assert_eq!(resent, knowledge::MAX_RESENDS);
}
