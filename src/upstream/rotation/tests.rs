use super::*;

/// Three upstreams' keys, in preference order.
fn set() -> Vec<String> {
    ["a", "b", "c"].map(String::from).to_vec()
}

/// A rotation of the first `n` of [`set`], each found on the relay's chain.
fn checked(n: usize) -> Rotation {
    let mut rotation = Rotation::new();
    set()[..n].iter().for_each(|k| rotation.checked(k));
    rotation
}

fn answered(ms: u64) -> Attempt {
    Attempt::Answered { latency_ms: ms }
}

#[test]
fn the_preferred_first_while_all_are_well() {
    let mut rotation = Rotation::new();
    assert_eq!(
        rotation.order(&set(), 0),
        Vec::<usize>::new(),
        "none checked: none used"
    );
    assert_eq!(rotation.unchecked(&set()), vec![0, 1, 2]);
    assert!(!rotation.any_checked(&set()));
    (0..3).for_each(|i| rotation.checked(&set()[i]));
    assert_eq!(rotation.order(&set(), 0), vec![0, 1, 2]);
    for i in 0..3 {
        rotation.record(&set()[i], answered(10 + i as u64), 0);
    }
    assert_eq!(rotation.order(&set(), 0), vec![0, 1, 2]);
}

#[test]
fn three_failures_in_a_row_cool_an_upstream_down_and_it_comes_back_after() {
    let mut rotation = checked(2);
    rotation.record(&set()[0], Attempt::Failed, 1_000);
    rotation.record(&set()[0], Attempt::Failed, 1_000);
    assert!(
        rotation.healthy(&set()[0], 1_000),
        "two failures are not enough"
    );
    assert!(
        rotation.record(&set()[0], Attempt::Failed, 1_000),
        "the third begins a cool-down"
    );
    assert!(rotation.cooling(&set()[0], 1_000));
    assert!(!rotation.healthy(&set()[0], 1_000));
    assert_eq!(
        rotation.order(&set(), 1_000),
        vec![1, 0],
        "still tried, last"
    );
    assert!(rotation.healthy(&set()[0], 1_000 + COOL_DOWN_MS));
    // It keeps failing: the next cool-down is twice as long.
    for _ in 0..FAILURES_TO_COOL {
        rotation.record(&set()[0], Attempt::Failed, 10_000);
    }
    assert!(!rotation.healthy(&set()[0], 10_000 + COOL_DOWN_MS));
    assert!(rotation.healthy(&set()[0], 10_000 + 2 * COOL_DOWN_MS));
    // One answer ends it all.
    rotation.record(&set()[0], answered(5), 30_000);
    assert!(rotation.healthy(&set()[0], 30_000));
}

#[test]
fn a_json_rpc_error_is_an_answer_and_a_flaky_upstream_goes_behind() {
    let mut rotation = checked(2);
    for _ in 0..5 {
        rotation.record(&set()[0], Attempt::Failed, 0);
        rotation.record(&set()[0], answered(5), 0);
        rotation.record(&set()[1], answered(5), 0);
    }
    assert!(rotation.healthy(&set()[0], 0), "never three in a row");
    assert_eq!(
        rotation.order(&set(), 0),
        vec![1, 0],
        "its error rate puts it behind"
    );
}

#[test]
fn a_slow_preferred_goes_behind_a_fast_one() {
    let mut rotation = checked(2);
    for _ in 0..10 {
        rotation.record(&set()[0], answered(3_000), 0);
        rotation.record(&set()[1], answered(10), 0);
    }
    assert_eq!(rotation.order(&set(), 0), vec![1, 0]);
    assert_eq!(
        rotation.preferred(&set(), 0),
        Some(0),
        "filters stay with the first"
    );
    for _ in 0..FAILURES_TO_COOL {
        rotation.record(&set()[0], Attempt::Failed, 0);
    }
    assert_eq!(rotation.preferred(&set(), 0), Some(1), "unless it is down");
    // Somewhat slower (within twice and the slack) keeps the preference.
    let mut rotation = checked(2);
    for _ in 0..10 {
        rotation.record(&set()[0], answered(60), 0);
        rotation.record(&set()[1], answered(10), 0);
    }
    assert_eq!(rotation.order(&set(), 0), vec![0, 1]);
}

#[test]
fn an_upstream_on_another_chain_is_never_tried() {
    let mut rotation = checked(3);
    rotation.exclude(&set()[1], "eth_chainId 0x1, want 0x7a69");
    assert_eq!(rotation.unchecked(&set()), Vec::<usize>::new());
    assert_eq!(rotation.order(&set(), 0), vec![0, 2]);
    for _ in 0..FAILURES_TO_COOL {
        rotation.record(&set()[0], Attempt::Failed, 0);
        rotation.record(&set()[2], Attempt::Failed, 0);
    }
    assert_eq!(
        rotation.order(&set(), 0),
        vec![0, 2],
        "cooling ones, never the excluded"
    );
    assert_eq!(
        rotation.excluded(&set()[1]),
        Some("eth_chainId 0x1, want 0x7a69")
    );
}

#[test]
fn only_the_relays_own_questions_judge_a_node_by_its_error_text() {
    let reply = |status: u16, message: &str| {
        Ok(UpstreamReply {
            status,
            body: format!(
                r#"{{"jsonrpc":"2.0","id":1,"error":{{"code":-32000,"message":"{message}"}}}}"#
            ),
            retry_after_ms: None,
            answerer: None,
        })
    };
    let answered = |usable| Judged {
        attempt: AttemptKind::Answered,
        usable,
        probe: false,
    };
    let failed = Judged {
        attempt: AttemptKind::Failed,
        usable: false,
        probe: false,
    };
    // A client's eth_call reverting "busy", geth's "the method busy does not exist": answers.
    for message in [
        "execution reverted: busy",
        "the method busy does not exist/is not available",
        "try again later",
        "rate limit",
    ] {
        for read in [
            CallKind::Read,
            CallKind::Other,
            CallKind::Filter,
            CallKind::ReadMerged,
        ] {
            assert_eq!(judge(read, &reply(200, message)), answered(true));
        }
        assert_eq!(
            judge(CallKind::OwnCount, &reply(200, message)),
            failed,
            "{message}"
        );
    }
    // A send refused as busy goes on to the next upstream, and the node was still answering.
    assert_eq!(
        judge(CallKind::Send, &reply(200, "txpool is full")),
        answered(false)
    );
    assert_eq!(
        judge(CallKind::Send, &reply(200, "insufficient funds")),
        answered(true)
    );
    // Overload statuses are failures on every route; a timeout only on the relay's own.
    for route in [CallKind::Send, CallKind::OwnCount, CallKind::Read] {
        assert_eq!(judge(route, &reply(429, "x")), failed);
        assert_eq!(judge(route, &reply(503, "x")), failed);
    }
    assert_eq!(
        judge(CallKind::OwnCount, &Err(UpstreamError::Timeout(5))),
        failed
    );
    // A client's read that timed out says nothing of the node: the node is asked a question
    // of the relay's own; one whose answer was too large did answer.
    let timed_out = judge(CallKind::Other, &Err(UpstreamError::Timeout(5)));
    assert_eq!(
        (timed_out.attempt, timed_out.probe),
        (AttemptKind::Unjudged, true)
    );
    let too_large = judge(CallKind::Other, &Err(UpstreamError::TooLarge(5)));
    assert_eq!(
        (too_large.attempt, too_large.probe),
        (AttemptKind::Unjudged, false)
    );
    assert_eq!(
        judge(CallKind::OwnCount, &reply(200, "execution reverted")),
        answered(true)
    );
}

/// Issue 32, point 3: what a client asked for is not the node's health. Six wide
/// `eth_getLogs` that outlast the timeout on both of two upstreams (each moved on to the
/// other), answers over the size limit, a gateway's 502/504 and a connection lost mid-request
/// cool neither; the same failures of the relay's own questions do, and so does a refused
/// connection or HTTP 429/503 on any route. Every such reply still moves the request on.
#[test]
fn nothing_a_client_causes_by_the_shape_of_its_request_cools_an_upstream() {
    let shaped: Vec<Result<UpstreamReply, UpstreamError>> = vec![
        Err(UpstreamError::Timeout(60_000)),
        Err(UpstreamError::TooLarge(16 << 20)),
        Err(UpstreamError::Invalid),
        Err(UpstreamError::Unreachable(
            "Network connection lost.".into(),
        )),
        Err(UpstreamError::Status(504, None)),
        Err(UpstreamError::Status(500, None)),
        Ok(UpstreamReply {
            status: 502,
            body: r#"{"error":"bad gateway"}"#.into(),
            retry_after_ms: None,
            answerer: None,
        }),
    ];
    let clients = [
        CallKind::Read,
        CallKind::Other,
        CallKind::Filter,
        CallKind::ReadMerged,
    ];
    for reply in &shaped {
        for route in clients {
            let judged = judge(route, reply);
            assert_ne!(judged.attempt, AttemptKind::Failed, "{route:?} {reply:?}");
            assert_ne!(judged.attempt, AttemptKind::Answered, "{route:?} {reply:?}");
            assert!(!judged.usable, "still moved on: {route:?} {reply:?}");
        }
        // The relay's own questions and its sends (a checked transaction's bytes, no client's
        // shape): the node's failure.
        for own in [CallKind::OwnCount, CallKind::Send, CallKind::SendPublic] {
            assert_eq!(judge(own, reply).attempt, AttemptKind::Failed, "{own:?}");
        }
    }
    // The issue's schedule: six slow eth_getLogs, each timing out on both upstreams.
    let mut rotation = checked(2);
    let logs = CallKind::of_method("eth_getLogs");
    let mut cooled = 0;
    for n in 0..6 {
        for index in [0, 1] {
            let judged = judge(logs, &Err(UpstreamError::Timeout(2_000)));
            if judged.attempt == AttemptKind::Failed {
                cooled += usize::from(rotation.record(&set()[index], Attempt::Failed, 1_000 + n));
            }
        }
    }
    assert_eq!(cooled, 0, "upstream_cooling lines");
    assert_eq!(rotation.order(&set(), 2_000), vec![0, 1]);
    assert!(rotation.healthy(&set()[0], 2_000) && rotation.healthy(&set()[1], 2_000));
    // What says the node is not there, whatever the request, still counts on every route.
    let away: Vec<Result<UpstreamReply, UpstreamError>> = vec![
        Err(UpstreamError::Unreachable(
            "connect ECONNREFUSED 127.0.0.1:1".into(),
        )),
        Err(UpstreamError::Status(503, None)),
        Err(UpstreamError::Status(429, Some(1_000))),
    ];
    for reply in &away {
        for route in clients.into_iter().chain([CallKind::OwnCount]) {
            assert_eq!(
                judge(route, reply).attempt,
                AttemptKind::Failed,
                "{route:?}"
            );
        }
    }
}

/// Issue 32, point 4: `SEND_BROADCAST=all` sends to the healthy upstreams only; a cooling one
/// (one that swallows sends, say) is left out while any is healthy, and with every one
/// cooling the send still goes to all of them, in order.
#[test]
fn a_broadcast_goes_to_the_healthy_upstreams_only() {
    let mut rotation = checked(3);
    assert_eq!(rotation.broadcast(&set(), 0), vec![0, 1, 2]);
    for _ in 0..FAILURES_TO_COOL {
        rotation.record(&set()[1], Attempt::Failed, 1_000);
    }
    assert_eq!(
        rotation.order(&set(), 1_000),
        vec![0, 2, 1],
        "still in the order"
    );
    assert_eq!(
        rotation.broadcast(&set(), 1_000),
        vec![0, 2],
        "not in the broadcast"
    );
    // Every one cooling: all of them, the first to come back first (a tie by preference).
    for i in [2, 0] {
        for _ in 0..FAILURES_TO_COOL {
            rotation.record(&set()[i], Attempt::Failed, 2_000);
        }
    }
    assert_eq!(rotation.broadcast(&set(), 2_000), vec![1, 0, 2]);
    assert_eq!(
        rotation.broadcast(&set(), 2_000),
        rotation.order(&set(), 2_000)
    );
    // Back after its cool-down; an excluded one never.
    assert_eq!(rotation.broadcast(&set(), 1_000 + COOL_DOWN_MS), vec![1]);
    rotation.exclude(&set()[1], "another chain");
    assert_eq!(rotation.broadcast(&set(), 1_000 + COOL_DOWN_MS), vec![0, 2]);
}

/// Health is kept by upstream, not by position: a list that grows, shrinks or changes order
/// keeps what was learned of each upstream it still names.
#[test]
fn health_is_keyed_by_upstream_so_a_change_of_the_list_resets_nothing() {
    let mut rotation = checked(2);
    for _ in 0..FAILURES_TO_COOL {
        rotation.record("b", Attempt::Failed, 1_000);
    }
    rotation.record("a", answered(400), 1_000);
    assert!(rotation.cooling("b", 1_000));
    // A third upstream added, then the list reordered: "b" still cooling, "a" still known.
    rotation.checked("c");
    assert_eq!(rotation.order(&set(), 1_000), vec![0, 2, 1]);
    let reordered: Vec<String> = ["c", "b", "a"].map(String::from).to_vec();
    assert_eq!(rotation.order(&reordered, 1_000), vec![0, 2, 1]);
    assert_eq!(rotation.preferred(&reordered, 1_000), Some(0));
    assert_eq!(rotation.hedge_delay_ms("a"), 400);
    // A list of one: the same health.
    assert!(!rotation.healthy("b", 1_000));
    assert_eq!(rotation.order(&["b".to_string()], 1_000), vec![0]);
}

#[test]
fn the_hedge_delay_is_the_p95_within_50_ms_and_1_s() {
    let mut rotation = checked(1);
    assert_eq!(
        rotation.hedge_delay_ms(&set()[0]),
        HEDGE_MAX_MS,
        "nothing known"
    );
    for ms in 1..=100 {
        rotation.record(&set()[0], answered(ms * 4), 0);
    }
    assert_eq!(
        rotation.hedge_delay_ms(&set()[0]),
        388,
        "p95 (nearest rank) of the last 64: 148..400"
    );
    let mut fast = checked(1);
    fast.record(&set()[0], answered(2), 0);
    assert_eq!(fast.hedge_delay_ms(&set()[0]), HEDGE_MIN_MS);
    let mut slow = checked(1);
    slow.record(&set()[0], answered(3_000), 0);
    assert_eq!(slow.hedge_delay_ms(&set()[0]), HEDGE_MAX_MS);
}

/// A node that hangs on `eth_sendRawTransaction` while it answers its chain id is cooled by its
/// send timeouts (issue 40), and a broadcast then leaves it out.
#[test]
fn a_node_that_hangs_on_sends_is_cooled_by_them() {
    let mut rotation = checked(2);
    let mut cooled = false;
    for n in 0..FAILURES_TO_COOL {
        let judged = judge(CallKind::Send, &Err(UpstreamError::Timeout(10_000)));
        assert!(!judged.usable);
        if let Some(attempt) = judged.attempt.recorded(10_000) {
            cooled |= rotation.record(&set()[0], attempt, 1_000 + u64::from(n));
        }
    }
    assert!(cooled, "an upstream_cooling line");
    assert_eq!(rotation.broadcast(&set(), 2_000), vec![1]);
    // A send's JSON-RPC error, busy included, is the node answering.
    let busy = Ok(UpstreamReply::ok(
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"txpool is full"}}"#,
    ));
    let judged = judge(CallKind::Send, &busy);
    assert_eq!(
        (judged.attempt, judged.usable),
        (AttemptKind::Answered, false)
    );
}
