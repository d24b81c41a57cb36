//! The race's rules, one test each, and random schedules.

use super::*;
use crate::upstream::rotation::FAILURES_TO_COOL;
use proptest::prelude::*;

/// `n` upstreams' keys, in preference order.
fn set(n: usize) -> Vec<String> {
    ["a", "b", "c", "d"][..n]
        .iter()
        .map(|k| k.to_string())
        .collect()
}

/// A rotation of `n` upstreams on the relay's chain, each answering in `latency_ms` (so that its
/// hedge delay is that).
fn rotation(n: usize, latency_ms: u64) -> Rotation {
    let mut rotation = Rotation::new();
    for key in set(n) {
        rotation.checked(&key);
        rotation.record(&key, Attempt::Answered { latency_ms }, 0);
    }
    rotation
}

fn race(kind: CallKind, usage: Usage, rotation: &Rotation, n: usize) -> Race {
    Race::new(kind, usage, rotation, &set(n), "{}", 5_000, 1_000)
}

fn actions(race: &mut Race) -> Vec<RaceAction> {
    std::iter::from_fn(|| race.poll_action()).collect()
}

fn posts(race: &mut Race) -> Vec<usize> {
    actions(race)
        .into_iter()
        .filter_map(|a| match a {
            RaceAction::Post(i) => Some(i),
            _ => None,
        })
        .collect()
}

fn error(message: &str) -> Result<UpstreamReply, UpstreamError> {
    Ok(UpstreamReply::ok(format!(
        r#"{{"jsonrpc":"2.0","id":1,"error":{{"code":-32000,"message":"{message}"}}}}"#
    )))
}

fn result(value: &str) -> Result<UpstreamReply, UpstreamError> {
    Ok(UpstreamReply::ok(format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":"{value}"}}"#
    )))
}

fn refused() -> Result<UpstreamReply, UpstreamError> {
    error("insufficient funds for gas * price + value")
}

fn lost() -> Result<UpstreamReply, UpstreamError> {
    Err(UpstreamError::Unreachable(
        "Network connection lost.".into(),
    ))
}

fn connection_refused() -> Result<UpstreamReply, UpstreamError> {
    Err(UpstreamError::Unreachable(
        "connect ECONNREFUSED 127.0.0.1:1".into(),
    ))
}

fn disagreements(actions: &[RaceAction]) -> Vec<(Disagreement, usize, usize)> {
    actions
        .iter()
        .filter_map(|a| match a {
            RaceAction::Disagreement {
                kind,
                first,
                second,
            } => Some((*kind, *first, *second)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_refusal_waits_for_every_upstream_sent_the_bytes_and_an_acceptance_after_it_wins() {
    let rotation = rotation(3, 100);
    let mut race = race(CallKind::Send, Usage::Hedged, &rotation, 3);
    assert_eq!(posts(&mut race), vec![0]);
    assert_eq!(race.poll_timeout(), Some(1_100), "the hedge delay");
    race.handle_timeout(1_100);
    assert_eq!(posts(&mut race), vec![1]);
    race.handle_reply(1, refused(), 1_120);
    assert_eq!(
        race.poll_outcome(),
        None,
        "the first upstream has the bytes"
    );
    assert_eq!(race.poll_timeout(), None, "no hedge after a refusal");
    race.handle_reply(0, result("0xab"), 1_300);
    let actions = actions(&mut race);
    assert_eq!(
        disagreements(&actions),
        vec![(Disagreement::AcceptedAfterRefusal, 0, 1)]
    );
    assert_eq!(race.poll_outcome(), Some(result("0xab")));

    // Both refuse: the first refusal, once both answered.
    let mut race = super::tests::race(CallKind::Send, Usage::Hedged, &rotation, 3);
    race.handle_timeout(1_100);
    race.handle_reply(1, refused(), 1_120);
    assert_eq!(race.poll_outcome(), None);
    race.handle_reply(0, error("transaction underpriced"), 1_200);
    assert_eq!(race.poll_outcome(), Some(refused()));
}

#[test]
fn an_unknown_outcome_beats_a_refusal() {
    let rotation = rotation(2, 100);
    let mut race = race(CallKind::Send, Usage::Hedged, &rotation, 2);
    race.handle_timeout(1_100);
    race.handle_reply(1, refused(), 1_120);
    race.handle_reply(0, lost(), 1_500);
    let actions = actions(&mut race);
    assert_eq!(
        disagreements(&actions),
        vec![(Disagreement::RefusedWhileUnknown, 0, 1)]
    );
    assert_eq!(
        race.poll_outcome(),
        Some(lost()),
        "unknown: checked by hash"
    );

    // A refused connection sent nothing: the refusal answers.
    let mut race = super::tests::race(CallKind::Send, Usage::Hedged, &rotation, 2);
    race.handle_timeout(1_100);
    race.handle_reply(1, refused(), 1_120);
    race.handle_reply(0, connection_refused(), 1_130);
    assert!(disagreements(&super::tests::actions(&mut race)).is_empty());
    assert_eq!(race.poll_outcome(), Some(refused()));
}

#[test]
fn a_strict_pool_is_never_hedged_and_a_failure_moves_the_send_on() {
    let rotation = rotation(3, 100);
    let mut race = race(CallKind::Send, Usage::Failover, &rotation, 3);
    assert_eq!(posts(&mut race), vec![0]);
    assert_eq!(
        race.poll_timeout(),
        None,
        "no second copy while one may land"
    );
    race.handle_timeout(60_000);
    assert_eq!(posts(&mut race), Vec::<usize>::new());
    race.handle_reply(0, connection_refused(), 1_200);
    assert_eq!(posts(&mut race), vec![1], "moved at once");
    race.handle_reply(1, result("0xab"), 1_300);
    assert_eq!(race.poll_outcome(), Some(result("0xab")));
}

#[test]
fn a_filter_stays_on_the_preferred_node() {
    // The preferred is slow: the best order puts it last, a filter still goes there.
    let mut rotation = rotation(2, 10);
    for _ in 0..10 {
        rotation.record("a", Attempt::Answered { latency_ms: 3_000 }, 0);
    }
    assert_eq!(rotation.order(&set(2), 1_000), vec![1, 0]);
    let mut race = race(CallKind::Filter, Usage::Sticky, &rotation, 2);
    assert_eq!(posts(&mut race), vec![0]);
    assert_eq!(race.poll_timeout(), None, "never hedged");
    race.handle_reply(0, Err(UpstreamError::Timeout(5_000)), 6_000);
    assert_eq!(posts(&mut race), Vec::<usize>::new(), "never moved");
    assert_eq!(
        race.poll_outcome(),
        Some(Err(UpstreamError::Timeout(5_000)))
    );

    // The preferred cooling: the first healthy one.
    for _ in 0..FAILURES_TO_COOL {
        rotation.record("a", Attempt::Failed, 1_000);
    }
    let mut race = super::tests::race(CallKind::Filter, Usage::Sticky, &rotation, 2);
    assert_eq!(posts(&mut race), vec![1]);
}

#[test]
fn a_method_not_known_as_a_read_goes_once_to_the_best() {
    let mut rotation = rotation(2, 10);
    for _ in 0..10 {
        rotation.record("a", Attempt::Answered { latency_ms: 3_000 }, 0);
    }
    let mut race = race(CallKind::Other, Usage::Once, &rotation, 2);
    assert_eq!(posts(&mut race), vec![1], "the best");
    race.handle_reply(1, Err(UpstreamError::Status(503, None)), 1_100);
    assert_eq!(posts(&mut race), Vec::<usize>::new(), "never sent again");
    assert_eq!(
        race.poll_outcome(),
        Some(Err(UpstreamError::Status(503, None)))
    );
}

#[test]
fn hedges_go_one_per_delay_counted_from_each_event_at_most_three_in_all() {
    let rotation = rotation(4, 200);
    let mut race = race(CallKind::Read, Usage::Hedged, &rotation, 4);
    assert_eq!(posts(&mut race), vec![0]);
    assert_eq!(race.poll_timeout(), Some(1_200));
    race.handle_timeout(1_199);
    assert_eq!(posts(&mut race), Vec::<usize>::new(), "not yet");
    race.handle_timeout(1_200);
    assert_eq!(posts(&mut race), vec![1]);
    assert_eq!(race.poll_timeout(), Some(1_400));
    race.handle_timeout(1_400);
    assert_eq!(posts(&mut race), vec![2]);
    assert_eq!(race.poll_timeout(), None, "three in all");
    race.handle_reply(2, result("0x1"), 1_450);
    assert_eq!(race.poll_outcome(), Some(result("0x1")), "the first usable");
}

#[test]
fn a_failure_moves_a_hedged_call_to_the_next_at_once() {
    let rotation = rotation(3, 200);
    let mut race = race(CallKind::Read, Usage::Hedged, &rotation, 3);
    assert_eq!(posts(&mut race), vec![0]);
    race.handle_reply(0, Err(UpstreamError::Status(503, None)), 1_010);
    let actions = actions(&mut race);
    assert!(actions.contains(&RaceAction::Post(1)));
    assert!(actions.contains(&RaceAction::Record {
        upstream: 0,
        attempt: Attempt::Failed
    }));
    assert_eq!(race.poll_timeout(), Some(1_210), "counted from the failure");
    race.handle_reply(1, result("0x2"), 1_050);
    assert_eq!(race.poll_outcome(), Some(result("0x2")));
}

#[test]
fn a_broadcast_goes_to_every_healthy_upstream_at_once() {
    let mut rotation = rotation(3, 100);
    for _ in 0..FAILURES_TO_COOL {
        rotation.record("b", Attempt::Failed, 1_000);
    }
    let mut race = race(CallKind::Send, Usage::Broadcast, &rotation, 3);
    assert_eq!(posts(&mut race), vec![0, 2], "not the cooling one");
    assert_eq!(race.poll_timeout(), None);
    race.handle_reply(2, refused(), 1_050);
    assert_eq!(race.poll_outcome(), None, "waits for the other");
    race.handle_reply(0, error("already known"), 1_060);
    assert_eq!(race.poll_outcome(), Some(error("already known")));
}

/// A broadcast's copy that times out after another upstream accepted still counts against its
/// node: one that hangs on sends while the others answer is found by the copies it swallows.
#[test]
fn a_reply_after_the_outcome_still_judges_its_upstream() {
    let rotation = rotation(2, 100);
    let mut race = race(CallKind::Send, Usage::Broadcast, &rotation, 2);
    assert_eq!(posts(&mut race), vec![0, 1]);
    race.handle_reply(1, result("0xabab"), 1_050);
    assert_eq!(race.poll_outcome(), Some(result("0xabab")));
    actions(&mut race);
    race.handle_reply(0, Err(UpstreamError::Timeout(2_000)), 3_000);
    assert_eq!(
        actions(&mut race),
        vec![RaceAction::Record {
            upstream: 0,
            attempt: Attempt::Failed
        }]
    );
    assert_eq!(race.poll_outcome(), None, "the outcome was taken once");
}

#[test]
fn merged_answers_are_those_by_the_first_ones_hedge_delay() {
    let rotation = rotation(3, 100);
    let request = r#"{"jsonrpc":"2.0","id":1,"method":"eth_getTransactionCount","params":["0x00","pending"]}"#;
    let mut race = Race::new(
        CallKind::OwnCount,
        Usage::Merged,
        &rotation,
        &set(3),
        request,
        5_000,
        1_000,
    );
    assert_eq!(posts(&mut race), vec![0, 1, 2], "every healthy one at once");
    assert_eq!(race.poll_timeout(), None, "waits for a first answer");
    race.handle_reply(1, result("0x5"), 1_020);
    assert_eq!(race.poll_timeout(), Some(1_120));
    race.handle_reply(0, result("0x7"), 1_119);
    race.handle_timeout(1_120);
    race.handle_reply(2, result("0x9"), 1_200);
    let merged = race.poll_outcome().unwrap().unwrap();
    assert!(merged.body.contains(r#""result":"0x7""#), "{}", merged.body);
}

/// A fresh isolate's first heads (issue 51): the stuck node answers at once, the other's first
/// answer is late; the merge waits for it, up to the wait asked, so the best head is its.
#[test]
fn a_merged_call_told_to_wait_for_all_waits_past_the_first_ones_hedge_delay() {
    let rotation = rotation(2, 10);
    let request = r#"{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}"#;
    let mut race = Race::new(
        CallKind::ReadMerged,
        Usage::Merged,
        &rotation,
        &set(2),
        request,
        5_000,
        1_000,
    );
    race.wait_for_all(2_000);
    assert_eq!(posts(&mut race), vec![0, 1]);
    race.handle_reply(0, result("0x3d"), 1_005);
    assert_eq!(
        race.poll_timeout(),
        Some(3_005),
        "not the first's 50 ms hedge delay"
    );
    race.handle_timeout(1_100);
    assert_eq!(race.poll_outcome(), None, "still waiting for the second");
    race.handle_reply(1, result("0x64"), 2_500);
    let merged = race.poll_outcome().unwrap().unwrap();
    assert!(
        merged.body.contains(r#""result":"0x64""#),
        "{}",
        merged.body
    );
}

#[test]
fn a_clients_timeout_probes_the_node_and_the_relays_own_counts_against_it() {
    let rotation = rotation(2, 100);
    let timeout = || Err(UpstreamError::Timeout(5_000));
    let mut race = race(CallKind::Read, Usage::Hedged, &rotation, 2);
    race.handle_reply(0, timeout(), 6_000);
    let client = actions(&mut race);
    assert!(client.contains(&RaceAction::Probe(0)));
    assert!(!client
        .iter()
        .any(|a| matches!(a, RaceAction::Record { .. })));
    let mut race = super::tests::race(CallKind::OwnChainId, Usage::Hedged, &rotation, 2);
    race.handle_reply(0, timeout(), 6_000);
    let own = actions(&mut race);
    assert!(own.contains(&RaceAction::Record {
        upstream: 0,
        attempt: Attempt::Failed
    }));
    assert!(!own.contains(&RaceAction::Probe(0)));
}

#[test]
fn three_failures_cool_an_upstream_down_and_the_next_race_begins_elsewhere() {
    // The relay's own question fails on "a" every time (answered first), "b" answers.
    let mut rotation = rotation(2, 100);
    let (mut failures, mut cooled) = (0, false);
    for _ in 0..10 {
        let mut race = race(CallKind::OwnChainId, Usage::Hedged, &rotation, 2);
        // Neither answers within the hedge delay: both are asked.
        race.handle_timeout(race.poll_timeout().expect("hedged"));
        let mut pending = posts(&mut race);
        pending.sort_unstable_by(|a, b| b.cmp(a));
        while let Some(upstream) = pending.pop() {
            let reply = match upstream {
                0 => Err(UpstreamError::Status(503, None)),
                _ => result("0x1"),
            };
            race.handle_reply(upstream, reply, 1_000);
            for action in actions(&mut race) {
                match action {
                    RaceAction::Post(i) => pending.push(i),
                    RaceAction::Record { upstream, attempt } => {
                        failures += usize::from(attempt == Attempt::Failed);
                        cooled |= rotation.record(&set(2)[upstream], attempt, 1_000);
                    }
                    _ => {}
                }
            }
        }
        assert_eq!(race.poll_outcome(), Some(result("0x1")), "moved on");
        if cooled {
            break;
        }
    }
    assert!(
        cooled && failures == FAILURES_TO_COOL as usize,
        "{failures}"
    );
    assert!(rotation.cooling("a", 1_000));
    let mut race = race(CallKind::OwnChainId, Usage::Hedged, &rotation, 2);
    assert_eq!(posts(&mut race), vec![1]);
}

#[test]
fn one_upstream_is_posted_once_and_judged_by_nobody() {
    let rotation = Rotation::new();
    let mut race = race(CallKind::Send, Usage::Hedged, &rotation, 1);
    assert_eq!(actions(&mut race), vec![RaceAction::Post(0)]);
    race.handle_reply(0, Err(UpstreamError::Timeout(5)), 1_005);
    assert_eq!(actions(&mut race), vec![], "nothing recorded");
    assert_eq!(race.poll_outcome(), Some(Err(UpstreamError::Timeout(5))));
}

#[test]
fn with_no_upstream_on_the_chain_the_answer_is_at_once() {
    let rotation = Rotation::new();
    let mut race = race(CallKind::Read, Usage::Hedged, &rotation, 2);
    assert_eq!(actions(&mut race), vec![]);
    assert!(matches!(
        race.poll_outcome(),
        Some(Err(UpstreamError::Unreachable(_)))
    ));
}

/// A reply of a random schedule.
#[derive(Debug, Clone, Copy)]
enum Reply {
    Accepted,
    Refused,
    Lost,
    ConnectionRefused,
    Busy,
}

impl Reply {
    fn reply(self) -> Result<UpstreamReply, UpstreamError> {
        match self {
            Reply::Accepted => result("0xab"),
            Reply::Refused => refused(),
            Reply::Lost => lost(),
            Reply::ConnectionRefused => connection_refused(),
            Reply::Busy => Err(UpstreamError::Status(503, None)),
        }
    }
}

fn usage() -> impl Strategy<Value = Usage> {
    prop_oneof![
        Just(Usage::Hedged),
        Just(Usage::Failover),
        Just(Usage::Broadcast),
        Just(Usage::Merged),
        Just(Usage::Sticky),
        Just(Usage::Once),
    ]
}

fn reply() -> impl Strategy<Value = Reply> {
    prop_oneof![
        Just(Reply::Accepted),
        Just(Reply::Refused),
        Just(Reply::Lost),
        Just(Reply::ConnectionRefused),
        Just(Reply::Busy),
    ]
}

proptest! {
    /// Any schedule of replies and timers: the race ends once nothing is in flight; no upstream
    /// gets the bytes twice; a call that is not hedged goes to a next upstream only after a
    /// failure; a sticky or once call goes to one; a hedged one to at most three; and a send is
    /// answered with a refusal only when every upstream it went to answered, none in a way that
    /// may have let the bytes in, and none accepted.
    #[test]
    fn random_schedules_keep_the_rules(
        n in 2usize..=4,
        usage in usage(),
        send in any::<bool>(),
        replies in proptest::collection::vec((reply(), any::<bool>(), 0usize..4), 1..20),
    ) {
        let kind = if send { CallKind::Send } else { CallKind::Read };
        let rotation = rotation(n, 100);
        let mut race = race(kind, usage, &rotation, n);
        let mut now = 1_000;
        let mut posted: Vec<usize> = Vec::new();
        let mut answered: Vec<(usize, Reply)> = Vec::new();
        let mut outcome = None;
        let mut failures = 0;
        let mut steps = replies.into_iter();
        loop {
            for action in actions(&mut race) {
                if let RaceAction::Post(i) = action {
                    prop_assert!(!posted.contains(&i), "posted twice: {i}");
                    if !usage.hedged() && !posted.is_empty() && usage != Usage::Broadcast
                        && usage != Usage::Merged {
                        prop_assert!(failures >= posted.len(), "moved without a failure");
                    }
                    posted.push(i);
                }
            }
            if let Some(o) = race.poll_outcome() {
                outcome = Some(o);
                break;
            }
            let waiting: Vec<usize> = posted
                .iter()
                .copied()
                .filter(|i| !answered.iter().any(|(a, _)| a == i))
                .collect();
            let step = steps.next();
            match (step, race.poll_timeout()) {
                (Some((_, true, _)), Some(at)) => {
                    now = now.max(at);
                    race.handle_timeout(now);
                }
                (step, timer) => {
                    let (reply, pick) = step.map_or((Reply::Accepted, 0), |(r, _, p)| (r, p));
                    let Some(&upstream) = waiting.get(pick % waiting.len().max(1)) else {
                        match timer {
                            Some(at) => { now = now.max(at); race.handle_timeout(now); continue; }
                            None => break,
                        }
                    };
                    now += 10;
                    if !matches!(reply, Reply::Accepted | Reply::Refused) {
                        failures += 1;
                    }
                    answered.push((upstream, reply));
                    race.handle_reply(upstream, reply.reply(), now);
                }
            }
        }
        let outcome = outcome.expect("the race ends once nothing is in flight");
        match usage {
            Usage::Sticky | Usage::Once => prop_assert_eq!(posted.len(), 1),
            Usage::Hedged | Usage::Failover => prop_assert!(posted.len() <= MAX_TRIED_AT_ONCE),
            _ => {}
        }
        if send && matches!(usage, Usage::Hedged | Usage::Failover | Usage::Broadcast)
            && outcome == refused()
        {
            prop_assert!(posted.iter().all(|i| answered.iter().any(|(a, _)| a == i)),
                "a refusal before every upstream answered");
            prop_assert!(!answered.iter().any(|(_, r)| matches!(r, Reply::Lost | Reply::Accepted)),
                "a refusal beside an unknown outcome or an acceptance: {answered:?}");
        }
    }
}

/// One upstream is posted to whatever its health, but not once it was found on another chain
/// (a served chain's one upstream is asked its chain id): the call is unsent, and its error says
/// the upstream serves another chain (the log's reason, no URL).
#[test]
fn a_lone_upstream_on_another_chain_gets_nothing() {
    let mut healthy = rotation(1, 10);
    let mut lone = race(CallKind::Read, Usage::Once, &healthy, 1);
    assert_eq!(posts(&mut lone), vec![0]);
    healthy.exclude("a", "eth_chainId 31337, the relay's chain is 10");
    let mut elsewhere = race(CallKind::Read, Usage::Once, &healthy, 1);
    assert_eq!(posts(&mut elsewhere), Vec::<usize>::new());
    let outcome = elsewhere.poll_outcome();
    assert_eq!(
        outcome,
        Some(Err(UpstreamError::OtherChain(
            "eth_chainId 31337, the relay's chain is 10".into()
        )))
    );
    assert_eq!(
        outcome.unwrap().unwrap_err().to_rpc().message,
        "upstream unavailable: it serves another chain (eth_chainId 31337, the relay's chain is 10)"
    );
}
