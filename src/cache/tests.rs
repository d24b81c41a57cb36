use super::chain::{Adopted, ChainView, MAX_WALK, WINDOW};
use super::finality::Finalized;
use super::header::Header;
use super::policy::{key_of, About};
use super::proof::ProofRule;
use super::*;
use serde_json::json;

/// Block `n` of fork `f`'s hash (fork 0 is the first chain).
fn hash(n: u64, f: u64) -> String {
    format!("0x{:064x}", (f << 32) | n)
}

/// Block `n` of fork `f`, its parent on fork `parent_fork`.
fn header(n: u64, f: u64, parent_fork: u64) -> Header {
    Header {
        number: n,
        hash: hash(n, f),
        parent_hash: hash(n.saturating_sub(1), parent_fork),
        contents: None,
    }
}

/// A block object as a node answers it.
fn block(n: u64, f: u64) -> String {
    json!({"number": format!("{n:#x}"), "hash": hash(n, f), "parentHash": hash(n - 1, f)})
        .to_string()
}

const S: CacheSettings = CacheSettings {
    head_ms: 1_000,
    finality: Finality::Tag,
    finality_depth: 64,
    proof: ProofRule::Blooms,
};

/// A read about `about` whose answer names its block and whose completeness needs no proof (the
/// rules of the tests before those of `proof.rs`): a block by number, asked by its hash.
fn read(about: About) -> Read<'static> {
    static NO_PARAMS: serde_json::Value = serde_json::Value::Null;
    Read {
        method: "eth_getBlockByNumber",
        params: &NO_PARAMS,
        about,
        pinned: true,
        answerer_head: None,
    }
}
const C: u64 = 31337;

/// A cache that knows blocks 1..=head of fork 0, learned at `now`, and `finalized`.
fn cache_at(head: u64, finalized: u64, now: u64) -> ReadCache {
    let mut cache = ReadCache::new(1 << 20);
    // Learned one by one, as the head moved.
    for n in 1..=head {
        cache.adopt(C, &[header(n, 0, 0)], now, now, 2);
    }
    cache.set_finalized(C, finalized, now);
    cache
}

#[test]
fn what_a_read_is_about_by_method_and_params() {
    let cases = [
        ("eth_chainId", json!([]), About::Chain),
        ("net_version", json!([]), About::Chain),
        ("eth_blockNumber", json!([]), About::HeadNumber),
        ("eth_gasPrice", json!([]), About::Head),
        ("eth_getBalance", json!(["0xab", "latest"]), About::Head),
        ("eth_getBalance", json!(["0xab"]), About::Head),
        ("eth_getBalance", json!(["0xab", "finalized"]), About::Head),
        ("eth_getBalance", json!(["0xab", "pending"]), About::Never),
        ("eth_getBalance", json!(["0xab", "0x10"]), About::Number(16)),
        (
            "eth_getBalance",
            json!(["0xab", "earliest"]),
            About::Number(0),
        ),
        (
            "eth_call",
            json!([{}, {"blockNumber": "0x5"}]),
            About::Number(5),
        ),
        (
            "eth_call",
            json!([{}, {"blockHash": hash(5, 0)}]),
            About::BlockHash,
        ),
        // helper-7's findings: an answer the node gives only while the block is canonical; a
        // range from `latest` (left out) to a number; an uncle's header, which names a block
        // that is not the canonical one at its number.
        (
            "eth_call",
            json!([{}, {"blockHash": hash(5, 0), "requireCanonical": true}]),
            About::Never,
        ),
        ("eth_getLogs", json!([{"toBlock": "0x9"}]), About::Never),
        (
            "eth_getLogs",
            json!([{"fromBlock": null, "toBlock": "0x9"}]),
            About::Never,
        ),
        (
            "eth_getLogs",
            json!([{"fromBlock": "0x1", "toBlock": "0x9"}]),
            About::Number(9),
        ),
        (
            "eth_getUncleByBlockNumberAndIndex",
            json!(["0x9", "0x0"]),
            About::Never,
        ),
        (
            "eth_getUncleByBlockHashAndIndex",
            json!([hash(9, 0), "0x0"]),
            About::Never,
        ),
        (
            "eth_getTransactionCount",
            json!(["0xab", "pending"]),
            About::Never,
        ),
        (
            "eth_getTransactionCount",
            json!(["0xab", "0x3"]),
            About::Number(3),
        ),
        (
            "eth_getBlockByNumber",
            json!(["0x7", false]),
            About::Number(7),
        ),
        (
            "eth_getBlockByNumber",
            json!(["latest", false]),
            About::Head,
        ),
        (
            "eth_getBlockByNumber",
            json!(["pending", false]),
            About::Never,
        ),
        (
            "eth_getBlockReceipts",
            json!([hash(9, 0)]),
            About::BlockHash,
        ),
        (
            "eth_getBlockByHash",
            json!([hash(9, 0), true]),
            About::BlockHash,
        ),
        (
            "eth_getTransactionReceipt",
            json!([hash(1, 0)]),
            About::Answer,
        ),
        (
            "eth_getTransactionByHash",
            json!([hash(1, 0)]),
            About::Answer,
        ),
        (
            "eth_getLogs",
            json!([{"fromBlock": "0x1", "toBlock": "0x9"}]),
            About::Number(9),
        ),
        ("eth_getLogs", json!([{"fromBlock": "0x1"}]), About::Head),
        (
            "eth_getLogs",
            json!([{"fromBlock": "0x1", "toBlock": "pending"}]),
            About::Never,
        ),
        (
            "eth_getLogs",
            json!([{"fromBlock": "latest", "toBlock": "0x9"}]),
            About::Never,
        ),
        (
            "eth_getLogs",
            json!([{"blockHash": hash(9, 0)}]),
            About::BlockHash,
        ),
        ("eth_newFilter", json!([{}]), About::Never),
        ("eth_getFilterChanges", json!(["0x1"]), About::Never),
        ("eth_sendRawTransaction", json!(["0x00"]), About::Never),
        ("eth_accounts", json!([]), About::Never),
        ("eth_syncing", json!([]), About::Never),
        ("debug_traceTransaction", json!([hash(1, 0)]), About::Never),
    ];
    for (method, params, want) in cases {
        assert_eq!(About::of(method, &params), want, "{method} {params}");
    }
}

#[test]
fn a_key_is_the_same_for_the_same_read_written_differently() {
    let a = key_of("eth_call", &json!([{"to": "0xAB", "data": "0x01"}, "0x1F"]));
    let b = key_of("eth_call", &json!([{"data": "0x01", "to": "0xab"}, "0x1f"]));
    assert_eq!(a, b);
    assert_ne!(
        a,
        key_of("eth_call", &json!([{"to": "0xab", "data": "0x02"}, "0x1f"]))
    );
    assert_ne!(
        a,
        key_of(
            "eth_estimateGas",
            &json!([{"to": "0xab", "data": "0x01"}, "0x1f"])
        )
    );
    // Member names as sent: a node that does not fold them reads "Data" as no data at all.
    assert_ne!(
        a,
        key_of("eth_call", &json!([{"to": "0xab", "Data": "0x01"}, "0x1f"]))
    );
    // Only hex is folded: a tag in another case is another read (geth refuses "LATEST").
    assert_ne!(
        key_of("eth_getBalance", &json!(["0xab", "latest"])),
        key_of("eth_getBalance", &json!(["0xab", "LATEST"]))
    );
}

#[test]
fn a_new_head_on_top_extends_and_one_that_skips_blocks_is_followed_back_to_link() {
    let mut view = ChainView::default();
    assert_eq!(view.adopt(&[header(10, 0, 0)], 0), Adopted::Extended);
    assert_eq!(view.adopt(&[header(10, 0, 0)], 5), Adopted::Same);
    assert_eq!(view.adopt(&[header(11, 0, 0)], 10), Adopted::Extended);
    // Two blocks later: its parent (12) is asked, and it links.
    let mut chain = vec![header(13, 0, 0)];
    assert_eq!(view.missing_parent(&chain), Some(hash(12, 0)));
    chain.push(header(12, 0, 0));
    assert_eq!(view.missing_parent(&chain), None);
    assert_eq!(view.adopt(&chain, 20), Adopted::Extended);
    assert_eq!(view.hash_at(12), Some(hash(12, 0).as_str()));
    assert_eq!(view.hash_at(10), Some(hash(10, 0).as_str()));
    assert_eq!(view.head().map(|h| h.number), Some(13));
}

#[test]
fn a_reorg_of_depth_three_forgets_from_the_fork_point_only() {
    let mut view = ChainView::default();
    for n in 1..=20 {
        view.adopt(&[header(n, 0, 0)], n);
    }
    // anvil_reorg(3): blocks 18, 19, 20 replaced by fork 1's, the new head at 20.
    let mut chain = vec![header(20, 1, 1)];
    while let Some(parent) = view.missing_parent(&chain) {
        let last = chain.last().unwrap().number - 1;
        let fork = if last >= 18 { 1 } else { 0 };
        assert_eq!(parent, hash(last, fork));
        chain.push(header(last, fork, if last > 18 { 1 } else { 0 }));
    }
    assert_eq!(
        chain.len(),
        3,
        "walked back to 18, whose parent 17 is known"
    );
    assert_eq!(view.adopt(&chain, 30), Adopted::Reorg { fork: 18 });
    assert_eq!(view.hash_at(17), Some(hash(17, 0).as_str()));
    assert_eq!(view.hash_at(18), Some(hash(18, 1).as_str()));
    assert_eq!(view.hash_at(20), Some(hash(20, 1).as_str()));
}

#[test]
fn a_shorter_chain_forgets_the_blocks_above_its_head() {
    let mut view = ChainView::default();
    for n in 1..=10 {
        view.adopt(&[header(n, 0, 0)], n);
    }
    // The new head is 8 of fork 1 on 7 of fork 0.
    let chain = [header(8, 1, 0)];
    assert_eq!(view.missing_parent(&chain), None);
    assert_eq!(view.adopt(&chain, 20), Adopted::Reorg { fork: 8 });
    assert_eq!(view.hash_at(9), None);
    assert_eq!(view.head().map(|h| h.hash.clone()), Some(hash(8, 1)));
}

#[test]
fn a_head_that_does_not_link_within_the_walk_leaves_nothing_known() {
    let mut view = ChainView::default();
    for n in 1..=10 {
        view.adopt(&[header(n, 0, 0)], n);
    }
    // Far ahead: not followed back at all.
    let far = [header(10 + MAX_WALK as u64 + 5, 2, 2)];
    assert_eq!(view.missing_parent(&far), None);
    assert_eq!(view.adopt(&far, 20), Adopted::Reorg { fork: 1 });
    assert_eq!(view.hash_at(10), None);
    assert!(view.head().is_some());
}

#[test]
fn the_view_keeps_a_window_of_blocks_below_the_head() {
    let mut view = ChainView::default();
    for n in 1..=WINDOW + 50 {
        view.adopt(&[header(n, 0, 0)], n);
    }
    assert_eq!(view.hash_at(49), None);
    assert!(view.hash_at(50).is_some());
}

#[test]
fn an_answer_about_a_finalized_block_holds_through_new_heads_and_reorgs() {
    let mut cache = cache_at(100, 36, 0);
    let about = About::Number(30);
    let key = key_of("eth_getBlockByNumber", &json!(["0x1e", false]));
    assert!(
        cache
            .store(C, &key, read(about), &block(30, 0), 0, &S)
            .in_memory
    );
    // Much later, the head moved and a reorg happened above it.
    cache.adopt(C, &[header(101, 0, 0)], 5_000, 5_000, 2);
    cache.adopt(C, &[header(101, 1, 0)], 5_001, 5_001, 2);
    assert_eq!(
        cache.lookup(C, &key, about, 5_002, &S).as_deref(),
        Some(block(30, 0).as_str())
    );
}

#[test]
fn an_answer_about_an_unfinalized_block_goes_with_a_reorg_at_or_below_it() {
    let mut cache = cache_at(20, 4, 0);
    let about = |n| About::Number(n);
    let key = |n: u64| key_of("eth_getBalance", &json!(["0xab", format!("{n:#x}")]));
    for n in [16, 17, 18, 19] {
        assert!(
            cache
                .store(C, &key(n), read(about(n)), "\"0x1\"", 0, &S)
                .in_memory
        );
    }
    assert_eq!(cache.held().1, 4);
    // anvil_reorg(3): 18..=20 replaced.
    let chain = [header(20, 1, 1), header(19, 1, 1), header(18, 1, 0)];
    assert_eq!(
        cache.adopt(C, &chain, 10, 10, 2),
        Adopted::Reorg { fork: 18 }
    );
    assert_eq!(cache.held().1, 2, "18 and 19 dropped, 16 and 17 kept");
    assert!(cache.lookup(C, &key(17), about(17), 20, &S).is_some());
    assert!(cache.lookup(C, &key(18), about(18), 20, &S).is_none());
    assert!(cache.lookup(C, &key(19), about(19), 20, &S).is_none());
}

#[test]
fn an_answer_at_the_head_holds_only_while_the_head_has_not_moved_and_is_fresh() {
    let mut cache = cache_at(20, 4, 0);
    let key = key_of("eth_call", &json!([{"to": "0xab"}, "latest"]));
    assert!(
        cache
            .store(C, &key, read(About::Head), "\"0x01\"", 100, &S)
            .in_memory
    );
    assert!(cache.lookup(C, &key, About::Head, 900, &S).is_some());
    // Not asked again for head_ms: not served (the head may have moved).
    assert!(cache.lookup(C, &key, About::Head, 1_000, &S).is_none());
    assert!(
        cache
            .store(C, &key, read(About::Head), "\"0x01\"", 100, &S)
            .in_memory
    );
    cache.adopt(C, &[header(20, 0, 0)], 1_100, 1_100, 2);
    assert!(
        cache.lookup(C, &key, About::Head, 1_200, &S).is_some(),
        "same head, asked again"
    );
    cache.adopt(C, &[header(21, 0, 0)], 1_300, 1_300, 2);
    assert!(
        cache.lookup(C, &key, About::Head, 1_400, &S).is_none(),
        "a new head"
    );
    assert_eq!(cache.held().1, 0, "dropped when the head moved");
}

#[test]
fn eth_block_number_is_the_fresh_heads() {
    let mut cache = cache_at(20, 4, 0);
    let key = key_of("eth_blockNumber", &json!([]));
    assert_eq!(
        cache.lookup(C, &key, About::HeadNumber, 10, &S).as_deref(),
        Some("\"0x14\"")
    );
    assert!(cache
        .lookup(C, &key, About::HeadNumber, 1_000, &S)
        .is_none());
    assert!(
        !cache
            .store(C, &key, read(About::HeadNumber), "\"0x14\"", 10, &S)
            .in_memory
    );
}

#[test]
fn what_is_never_kept() {
    let mut cache = cache_at(20, 4, 0);
    let store = |cache: &mut ReadCache, about, result: &str| {
        cache.store(C, "k", read(about), result, 10, &S).in_memory
    };
    // A null: a block or transaction the chain may still get.
    assert!(!store(&mut cache, About::Number(25), "null"));
    assert!(!store(&mut cache, About::BlockHash, "null"));
    assert!(!store(&mut cache, About::Answer, "null"));
    // Above the head.
    assert!(!store(&mut cache, About::Number(21), "\"0x0\""));
    // A transaction not in a block yet.
    let pending = json!({"hash": hash(1, 9), "blockNumber": null, "blockHash": null}).to_string();
    assert!(!store(&mut cache, About::Answer, &pending));
    // A block whose hash is not the one known at its number (an upstream on another fork).
    assert!(!store(&mut cache, About::Number(15), &block(15, 1)));
    // Logs naming a block of another fork.
    let logs = json!([{"blockNumber": "0xf", "blockHash": hash(15, 1)}]).to_string();
    assert!(!store(&mut cache, About::Number(16), &logs));
    assert!(!store(&mut cache, About::Never, "\"0x1\""));
    assert_eq!(cache.held().1, 0);
    // The same logs, of the canonical block, once the head was asked again: kept.
    cache.adopt(C, &[header(20, 0, 0)], 10, 10, 2);
    let logs = json!([{"blockNumber": "0xf", "blockHash": hash(15, 0)}]).to_string();
    assert!(store(&mut cache, About::Number(16), &logs));
}

#[test]
fn a_receipt_holds_while_its_block_is_canonical() {
    let mut cache = cache_at(20, 4, 0);
    let receipt = json!({"transactionHash": hash(1, 9), "blockNumber": "0x13", "blockHash": hash(19, 0), "status": "0x1"}).to_string();
    let key = key_of("eth_getTransactionReceipt", &json!([hash(1, 9)]));
    assert!(
        cache
            .store(C, &key, read(About::Answer), &receipt, 10, &S)
            .in_memory
    );
    assert!(cache.lookup(C, &key, About::Answer, 20, &S).is_some());
    cache.adopt(C, &[header(21, 0, 0)], 30, 30, 2);
    assert!(
        cache.lookup(C, &key, About::Answer, 40, &S).is_some(),
        "a new head keeps it"
    );
    cache.adopt(
        C,
        &[header(21, 1, 1), header(20, 1, 1), header(19, 1, 0)],
        50,
        50,
        2,
    );
    assert!(
        cache.lookup(C, &key, About::Answer, 60, &S).is_none(),
        "its block reorged out"
    );
}

#[test]
fn the_bound_in_bytes_holds_and_the_least_recently_used_goes_first() {
    let mut cache = ReadCache::new(16_000);
    let result = format!("\"0x{}\"", "ab".repeat(200));
    for i in 0..100 {
        let _ = cache.store(
            C,
            &format!("eth_chainId {i}"),
            read(About::Chain),
            &result,
            0,
            &S,
        );
        assert!(cache.held().0 <= 16_000);
    }
    assert!(cache.evicted() > 0);
    assert!(cache
        .lookup(C, "eth_chainId 99", About::Chain, 0, &S)
        .is_some());
    assert!(cache
        .lookup(C, "eth_chainId 0", About::Chain, 0, &S)
        .is_none());
    // Larger than a sixteenth of the bound: not kept.
    let wide = format!("\"0x{}\"", "ab".repeat(1_000));
    assert!(
        !cache
            .store(C, "wide", read(About::Chain), &wide, 0, &S)
            .in_memory
    );
}

#[test]
fn a_chain_that_went_back_loses_everything_kept_of_it() {
    let mut cache = cache_at(100, 36, 0);
    let key = key_of("eth_getBlockByNumber", &json!(["0x1e", false]));
    assert!(
        cache
            .store(C, &key, read(About::Number(30)), &block(30, 0), 0, &S)
            .in_memory
    );
    assert!(
        cache
            .store(
                C + 1,
                "eth_chainid []",
                read(About::Chain),
                "\"0x1\"",
                0,
                &S
            )
            .in_memory
    );
    // Reset to genesis: the head is below the finalized block.
    cache.adopt(C, &[header(2, 5, 5)], 10, 10, 2);
    assert!(cache.lookup(C, &key, About::Number(30), 20, &S).is_none());
    assert!(
        cache
            .lookup(C + 1, "eth_chainid []", About::Chain, 20, &S)
            .is_some(),
        "another chain's kept"
    );
}

#[test]
fn one_chains_head_says_nothing_of_anothers() {
    let mut cache = cache_at(20, 4, 0);
    let key = key_of("eth_gasPrice", &json!([]));
    assert!(
        !cache
            .store(C + 1, &key, read(About::Head), "\"0x1\"", 10, &S)
            .in_memory
    );
    assert!(
        cache
            .store(C, &key, read(About::Head), "\"0x1\"", 10, &S)
            .in_memory
    );
    assert!(cache.lookup(C + 1, &key, About::Head, 10, &S).is_none());
}

#[test]
fn identical_reads_in_flight_are_one_and_a_failed_leader_frees_its_followers() {
    let mut cache = ReadCache::new(1 << 20);
    assert_eq!(cache.begin(C, "k", 0, 1_000), Begin::Lead);
    assert_eq!(cache.begin(C, "k", 10, 1_000), Begin::Follow);
    assert_eq!(cache.begin(C, "k", 11, 1_000), Begin::Follow);
    assert_eq!(
        cache.begin(C + 1, "k", 10, 1_000),
        Begin::Lead,
        "another chain's"
    );
    assert_eq!(cache.take_landed(C, "k"), None);
    let _ = cache.land(C, "k", Some(Answer::Result("\"0x1\"".into())), 20);
    // Landed: the next one leads.
    assert_eq!(cache.begin(C, "k", 20, 1_000), Begin::Lead);
    let _ = cache.land(C, "k", None, 30);
    assert_eq!(cache.take_landed(C, "k"), Some(None));
    // A leader that never lands is given up on.
    assert_eq!(cache.begin(C, "j", 0, 1_000), Begin::Lead);
    assert_eq!(cache.begin(C, "j", 1_000, 1_000), Begin::Lead);
}

#[test]
fn a_landed_answer_is_held_only_for_the_followers_waiting_for_it() {
    // helper-7's finding: landed answers were kept up to 64 at a time whatever their size,
    // outside CACHE_MAX_BYTES.
    let mut cache = ReadCache::new(1 << 20);
    let answer = || Some(Answer::Result(format!("\"0x{}\"", "ab".repeat(1 << 19))));
    // No follower: nothing is kept once the leader lands.
    assert_eq!(cache.begin(C, "big", 0, 5_000), Begin::Lead);
    let _ = cache.land(C, "big", answer(), 10);
    assert_eq!(cache.flights(), 0);
    // Two followers: the answer goes with the second.
    assert_eq!(cache.begin(C, "big", 20, 5_000), Begin::Lead);
    assert_eq!(cache.begin(C, "big", 21, 5_000), Begin::Follow);
    assert_eq!(cache.begin(C, "big", 22, 5_000), Begin::Follow);
    let _ = cache.land(C, "big", answer(), 30);
    assert_eq!(cache.take_landed(C, "big"), Some(answer()));
    assert_eq!(cache.flights(), 1);
    assert_eq!(cache.take_landed(C, "big"), Some(answer()));
    assert_eq!(cache.flights(), 0);
    // A follower that gives up is not waited for; one whose request was cancelled (it never
    // comes back) is waited for a second at most.
    assert_eq!(cache.begin(C, "a", 40, 5_000), Begin::Lead);
    assert_eq!(cache.begin(C, "a", 41, 5_000), Begin::Follow);
    cache.leave_flight(C, "a");
    let _ = cache.land(C, "a", answer(), 50);
    assert_eq!(cache.flights(), 0);
    assert_eq!(cache.begin(C, "b", 60, 5_000), Begin::Lead);
    assert_eq!(cache.begin(C, "b", 61, 5_000), Begin::Follow);
    let _ = cache.land(C, "b", answer(), 70);
    assert_eq!(cache.flights(), 1);
    assert_eq!(cache.begin(C, "c", 1_069, 5_000), Begin::Lead);
    assert_eq!(cache.flights(), 2, "b's answer still waits a second");
    assert_eq!(cache.begin(C, "d", 1_070, 5_000), Begin::Lead);
    assert_eq!(cache.flights(), 2, "b's answer gone: c and d in flight");
}

#[test]
fn the_head_ask_is_one_at_a_time() {
    let mut cache = ReadCache::new(1 << 20);
    assert!(cache.claim_refresh(C, 0, 5_000));
    assert!(!cache.claim_refresh(C, 10, 5_000));
    assert!(cache.claim_refresh(C + 1, 10, 5_000));
    cache.release_refresh(C, 0);
    assert!(cache.claim_refresh(C, 20, 5_000));
    assert!(cache.claim_refresh(C, 5_020, 5_000), "given up on");
    // The ask given up on ends: the later one's claim stays (helper-7's finding).
    cache.release_refresh(C, 20);
    assert!(cache.refreshing(C));
    assert!(!cache.claim_refresh(C, 5_030, 5_000));
    cache.release_refresh(C, 5_020);
    assert!(!cache.refreshing(C));
}

#[test]
fn a_slow_head_ask_overtaken_by_a_later_one_does_not_move_the_head_back() {
    // helper-7's finding: an ask that began before the head known was adopted took its lower
    // head as a reorg, and eth_blockNumber went back.
    let mut cache = cache_at(100, 0, 1_000);
    assert_eq!(
        cache.adopt(C, &[header(98, 0, 0)], 500, 1_500, 2),
        Adopted::Same,
        "begun at 500, before the head 100 was adopted (cache_at)"
    );
    assert_eq!(
        cache.view(C).and_then(|v| v.head()).map(|h| h.number),
        Some(100)
    );
    assert_eq!(
        cache.adopt(C, &[header(101, 0, 0)], 1_600, 1_700, 2),
        Adopted::Extended
    );
}

#[test]
fn the_finalized_block_only_goes_up_and_is_not_guessed_when_its_ask_fails() {
    // helper-7's finding: a lower finalized block (another upstream an epoch behind) wiped the
    // chain's answers, and a failed ask put the finalized block at the head less the depth.
    let mut cache = cache_at(100, 0, 0);
    let key = key_of("eth_getBlockByNumber", &serde_json::json!(["0x1e", false]));
    cache.set_finalized(C, 40, 1_000);
    assert!(
        cache
            .store(C, &key, read(About::Number(30)), &block(30, 0), 1_000, &S)
            .in_memory
    );
    cache.set_finalized(C, 20, 1_100);
    assert_eq!(cache.view(C).and_then(|v| v.finalized()), Some(40));
    assert!(cache
        .lookup(C, &key, About::Number(30), 1_100, &S)
        .is_some());
    let error = |code: i64, message: &str| {
        Answer::Error(serde_json::json!({"code": code, "message": message}).to_string())
    };
    assert_eq!(
        Finalized::of(Some(&Answer::Result("null".into()))),
        Finalized::NoTag
    );
    assert_eq!(
        Finalized::of(Some(&error(-32602, "invalid argument 0"))),
        Finalized::NoTag
    );
    assert_eq!(
        Finalized::of(Some(&error(-32000, "finalized block not found"))),
        Finalized::NoTag
    );
    assert_eq!(
        Finalized::of(Some(&error(-32005, "rate limit exceeded"))),
        Finalized::Failed
    );
    assert_eq!(
        Finalized::of(Some(&error(429, "Too Many Requests"))),
        Finalized::Failed
    );
    assert_eq!(Finalized::of(None), Finalized::Failed);
    // A failed ask is not made again at every read: once a FINALIZED_FRESH_MS.
    let mut fresh = ReadCache::new(1 << 20);
    assert!(fresh.needs_finalized(C, 0));
    fresh.finalized_unanswered(C, 0);
    assert!(!fresh.needs_finalized(C, FINALIZED_FRESH_MS - 1));
    assert!(fresh.needs_finalized(C, FINALIZED_FRESH_MS));
    assert_eq!(fresh.view(C).and_then(|v| v.finalized()), None);
    assert_eq!(
        Finalized::of(Some(&Answer::Result(block(64, 0)))),
        Finalized::Block(64)
    );
}

#[test]
fn stats_are_taken_every_interval_and_start_again() {
    let mut cache = cache_at(20, 4, 0);
    let key = key_of("eth_chainId", &json!([]));
    assert!(cache.take_stats(0).is_none());
    cache.lookup(C, &key, About::Chain, 0, &S);
    let _ = cache.store(C, &key, read(About::Chain), "\"0x7a69\"", 0, &S);
    cache.lookup(C, &key, About::Chain, 0, &S);
    assert!(cache.take_stats(STATS_EVERY_MS - 1).is_none());
    let stats = cache.take_stats(STATS_EVERY_MS).unwrap();
    assert_eq!(
        (stats.hits, stats.misses, stats.stored, stats.hit_bytes),
        (1, 1, 1, 8)
    );
    assert!(
        cache.take_stats(3 * STATS_EVERY_MS).is_none(),
        "nothing since"
    );
}

#[test]
fn needs_head_only_where_the_head_matters() {
    let cache = cache_at(20, 4, 0);
    assert!(!cache.needs_head(C, About::Head, 500, &S));
    assert!(cache.needs_head(C, About::Head, 1_000, &S));
    assert!(cache.needs_head(C, About::Answer, 1_000, &S));
    assert!(cache.needs_head(C, About::Number(5), 1_000, &S));
    assert!(
        !cache.needs_head(C, About::Number(4), 1_000, &S),
        "finalized"
    );
    assert!(!cache.needs_head(C, About::BlockHash, 1_000, &S));
    assert!(!cache.needs_head(C, About::Chain, 1_000, &S));
    assert!(
        cache.needs_head(C + 1, About::Head, 0, &S),
        "nothing known of it"
    );
}

#[test]
fn an_answer_from_a_fork_or_a_newer_head_makes_the_head_asked_again() {
    let mut cache = cache_at(20, 4, 0);
    assert!(!cache.needs_head(C, About::Head, 10, &S));
    assert!(
        !cache
            .store(C, "k", read(About::Number(19)), &block(19, 1), 10, &S)
            .in_memory
    );
    assert!(
        cache.needs_head(C, About::Head, 10, &S),
        "a block of another fork at 19"
    );
    let mut cache = cache_at(20, 4, 0);
    assert!(
        !cache
            .store(C, "k", read(About::Head), &block(21, 0), 10, &S)
            .in_memory
    );
    assert!(
        cache.needs_head(C, About::Head, 10, &S),
        "a block above the head"
    );
}

#[test]
fn a_head_heard_on_a_websocket_moves_the_head_only_on_top_of_it() {
    let mut cache = cache_at(20, 4, 0);
    let key = key_of("eth_gasPrice", &json!([]));
    assert!(
        cache
            .store(C, &key, read(About::Head), "\"0x1\"", 10, &S)
            .in_memory
    );
    // A block known: nothing.
    assert_eq!(cache.heard_head(C, &header(19, 0, 0), 500), None);
    assert!(cache.lookup(C, &key, About::Head, 600, &S).is_some());
    // The next block: the head, fresh from now; the old head's answers go.
    assert_eq!(
        cache.heard_head(C, &header(21, 0, 0), 900),
        Some(Adopted::Extended)
    );
    assert!(cache.lookup(C, &key, About::Head, 1_500, &S).is_none());
    assert!(
        !cache.needs_head(C, About::Head, 1_500, &S),
        "fresh from the heard head"
    );
    // Another fork's block at a known number: the head is asked at the next read.
    assert_eq!(cache.heard_head(C, &header(21, 1, 0), 1_600), None);
    assert!(cache.needs_head(C, About::Head, 1_600, &S));
    // Nothing known of the chain: nothing.
    assert_eq!(cache.heard_head(C + 1, &header(5, 0, 0), 0), None);
}

#[test]
fn a_lower_head_that_does_not_link_is_a_chain_started_anew() {
    // finalized 0: anvil's below 64 blocks.
    let mut cache = cache_at(30, 0, 0);
    assert!(
        cache
            .store(
                C,
                "eth_getblockbynumber [\"0x0\"]",
                read(About::Number(0)),
                "\"genesis\"",
                0,
                &S
            )
            .in_memory
    );
    assert!(
        cache
            .store(C, "eth_chainid []", read(About::Chain), "\"0x7a69\"", 0, &S)
            .in_memory
    );
    // Reset: the head is block 1 of another chain.
    cache.adopt(C, &[header(1, 7, 7)], 10, 10, 2);
    assert_eq!(
        cache.held().1,
        0,
        "nothing of the old chain kept, not even its genesis"
    );
    // A lower head that links (a shorter fork) is a reorg, not a reset.
    let mut cache = cache_at(30, 0, 0);
    assert!(
        cache
            .store(C, "eth_chainid []", read(About::Chain), "\"0x7a69\"", 0, &S)
            .in_memory
    );
    cache.adopt(C, &[header(29, 1, 0)], 10, 10, 2);
    assert_eq!(cache.held().1, 1);
}

#[test]
fn what_may_be_final_in_a_shared_cache() {
    let cache = cache_at(100, 36, 0);
    assert!(cache.may_be_final(C, About::Chain));
    assert!(cache.may_be_final(C, About::BlockHash));
    assert!(cache.may_be_final(C, About::Answer));
    assert!(cache.may_be_final(C, About::Number(36)));
    assert!(!cache.may_be_final(C, About::Number(37)));
    assert!(!cache.may_be_final(C, About::Head));
    assert!(
        !cache.may_be_final(C + 1, About::Number(0)),
        "nothing known of it"
    );
}

#[test]
fn another_genesis_is_a_chain_started_anew_and_everything_of_the_old_one_goes() {
    // With the finalized block only going up, a dev chain reset whose head is higher than the
    // old one's (it does not link: a reorg) is found by its genesis, asked again.
    let mut cache = cache_at(100, 40, 1_000);
    assert!(!cache.set_genesis(C, &hash(0, 0)));
    let key = key_of("eth_getBlockByNumber", &json!(["0x1e", false]));
    assert!(
        cache
            .store(C, &key, read(About::Number(30)), &block(30, 0), 1_000, &S)
            .in_memory
    );
    assert!(!cache.set_genesis(C, &hash(0, 0).to_uppercase().replace("0X", "0x")));
    assert!(cache
        .lookup(C, &key, About::Number(30), 1_000, &S)
        .is_some());
    assert!(cache.set_genesis(C, &hash(0, 1)));
    assert!(cache
        .lookup(C, &key, About::Number(30), 1_000, &S)
        .is_none());
    assert_eq!(cache.view(C).and_then(|v| v.finalized()), None);
    assert_eq!(cache.genesis(C), Some(hash(0, 1).as_str()));
}

#[test]
fn a_read_about_an_unfinalized_block_by_number_is_asked_by_its_hash() {
    // helper-7's finding: an eth_call at a number, answered by an upstream still on the old
    // fork, was kept as the new fork's. Asked by the hash the cache knows (EIP-1898), it cannot be.
    let cache = cache_at(100, 40, 1_000);
    let pin =
        |method: &str, params: &serde_json::Value, n| cache.pin(C, method, params, n, 1_500, 1_000);
    let by_hash = |n| json!({"blockHash": hash(n, 0), "requireCanonical": true});
    let call = json!([{"to": "0xab"}, "0x5a"]);
    assert_eq!(
        pin("eth_call", &call, 90),
        Some(("eth_call", json!([{"to": "0xab"}, by_hash(90)])))
    );
    let storage = json!(["0xab", "0x0", "0x5a"]);
    assert_eq!(
        pin("eth_getStorageAt", &storage, 90),
        Some(("eth_getStorageAt", json!(["0xab", "0x0", by_hash(90)])))
    );
    // A count by number: the same count by the block's hash.
    assert_eq!(
        pin("eth_getBlockTransactionCountByNumber", &json!(["0x5a"]), 90),
        Some(("eth_getBlockTransactionCountByHash", json!([hash(90, 0)])))
    );
    assert_eq!(
        pin("eth_call", &call, 40),
        None,
        "finalized: asked as it is"
    );
    assert_eq!(
        pin("eth_call", &call, 101),
        None,
        "a block the cache does not know"
    );
    assert_eq!(
        pin("eth_getBlockByNumber", &json!(["0x5a", false]), 90),
        None,
        "an answer that names its block is checked by that name"
    );
    assert_eq!(
        pin("eth_getBalance", &json!(["0xab"]), 90),
        Some(("eth_getBalance", json!(["0xab", by_hash(90)]))),
        "left out (latest, read at the head): given"
    );
    assert_eq!(
        pin("eth_getBalance", &json!([]), 90),
        None,
        "not where the parameter goes"
    );
    assert_eq!(
        cache.pin(C + 1, "eth_call", &call, 90, 1_500, 1_000),
        None,
        "another chain"
    );
    // helper-8's finding: a head not asked within CACHE_HEAD_MS may not know the block's hash.
    assert_eq!(
        cache.pin(C, "eth_call", &call, 90, 2_000, 1_000),
        None,
        "the head is stale"
    );
    // What the upstream says to a read by hash.
    let error = |code: i64, message: &str| {
        Answer::Error(json!({"code": code, "message": message}).to_string())
    };
    use super::policy::PinnedAnswer as P;
    assert_eq!(P::of(&Answer::Result("\"0x01\"".into())), P::Answered);
    assert_eq!(
        P::of(&error(-32000, "header for hash not found")),
        P::Unknown
    );
    assert_eq!(
        P::of(&error(-32000, "hash 0xab is not currently canonical")),
        P::Unknown
    );
    assert_eq!(
        P::of(&error(
            -32602,
            "invalid argument 1: hex string without 0x prefix"
        )),
        P::Unsupported
    );
    assert_eq!(
        P::of(&error(
            -32000,
            "json: cannot unmarshal object into Go value of type string"
        )),
        P::Unsupported
    );
    assert_eq!(P::of(&error(3, "execution reverted")), P::Other);
}

#[test]
fn an_upstream_that_does_not_read_a_block_by_hash_is_asked_by_number_after_three() {
    let mut cache = cache_at(100, 40, 1_000);
    let call = json!([{"to": "0xab"}, "0x5a"]);
    // Refusals that probes confirm (pin.rs), one probe each (PIN_PROBE_MS apart).
    let refuse = |cache: &mut ReadCache, at: u64| {
        assert_eq!(cache.pin_form(C).refused(at), pin::Refusal::Probe);
        cache.pin_form(C).probed(false, at);
    };
    refuse(&mut cache, 1_000);
    refuse(&mut cache, 1_000 + pin::PIN_PROBE_MS);
    cache.pin_form(C).answered();
    refuse(&mut cache, 1_000 + 2 * pin::PIN_PROBE_MS);
    refuse(&mut cache, 1_000 + 3 * pin::PIN_PROBE_MS);
    assert!(
        cache.pin(C, "eth_call", &call, 90, 1_000, 1_000).is_some(),
        "not three in a row yet"
    );
    refuse(&mut cache, 1_000 + 4 * pin::PIN_PROBE_MS);
    assert_eq!(cache.pin(C, "eth_call", &call, 90, 1_000, 1_000), None);
}

#[test]
fn an_upstream_behind_a_head_heard_neither_moves_the_head_back_nor_makes_a_reorg() {
    // helper-9's finding 1: the head watch's WebSocket node announces 21 before the HTTP node
    // has it; the head asked then answers 20.
    let mut cache = cache_at(20, 4, 0);
    assert_eq!(
        cache.heard_head(C, &header(21, 0, 0), 100),
        Some(Adopted::Extended)
    );
    let key = key_of("eth_getBlockByNumber", &json!(["0x15", false]));
    assert!(
        cache
            .store(C, &key, read(About::Number(21)), &block(21, 0), 150, &S)
            .in_memory
    );
    assert_eq!(
        cache.adopt(C, &[header(20, 0, 0)], 1_200, 1_210, 2),
        Adopted::Same
    );
    assert_eq!(cache.view(C).unwrap().head().unwrap().number, 21);
    assert_eq!(cache.stats.reorgs, 0);
    assert!(
        cache
            .lookup(C, &key, About::Number(21), 1_300, &S)
            .is_some(),
        "block 21's answer stays"
    );
    assert!(
        !cache.needs_head(C, About::Head, 1_300, &S),
        "confirmed by the ask"
    );
    // Another block at 20 is a reorg as before.
    assert_eq!(
        cache.adopt(C, &[header(20, 1, 0)], 2_500, 2_510, 2),
        Adopted::Reorg { fork: 20 }
    );
}

#[test]
fn an_ask_begun_before_a_header_heard_made_the_head_suspect_leaves_it_suspect() {
    // helper-9's finding 2: the head ask leaves at 1_000; at 1_050 the watch hears another
    // fork's 20 (a reorg); at 1_100 the ask lands with the old head.
    let mut cache = cache_at(20, 4, 0);
    let key = key_of("eth_gasPrice", &json!([]));
    assert!(
        cache
            .store(C, &key, read(About::Head), "\"0x1\"", 10, &S)
            .in_memory
    );
    assert_eq!(cache.heard_head(C, &header(20, 1, 0), 1_050), None);
    assert_eq!(
        cache.adopt(C, &[header(20, 0, 0)], 1_000, 1_100, 2),
        Adopted::Same
    );
    assert!(
        cache.needs_head(C, About::Head, 1_100, &S),
        "still suspect: the ask began before the header was heard"
    );
    assert!(cache.lookup(C, &key, About::Head, 1_100, &S).is_none());
    // The next ask, begun after, is taken.
    assert_eq!(
        cache.adopt(C, &[header(20, 1, 0)], 1_150, 1_200, 2),
        Adopted::Reorg { fork: 20 }
    );
    assert!(!cache.needs_head(C, About::Head, 1_200, &S));
}

/// Followers wait on a signal, not a 2 ms poll (issue 51, point 7): a follower's wake is called
/// when the leader lands (or drops) its answer, and a wait for the head ask when it ends.
#[test]
fn a_followers_wake_is_called_when_the_leader_lands_and_a_head_waiters_when_the_ask_ends() {
    use std::cell::Cell;
    use std::rc::Rc;
    let woken = Rc::new(Cell::new(0));
    let wake = |w: &Rc<Cell<u32>>| {
        let w = w.clone();
        Box::new(move || w.set(w.get() + 1)) as flight::Wake
    };
    let mut cache = ReadCache::new(1 << 20);
    assert_eq!(cache.begin(C, "k", 0, 1_000), Begin::Lead);
    assert_eq!(cache.begin(C, "k", 1, 1_000), Begin::Follow);
    cache.on_land(C, "k", wake(&woken));
    assert_eq!(woken.get(), 0, "not before the leader lands");
    let _ = cache.land(C, "k", Some(Answer::Result("\"0x1\"".into())), 5);
    assert_eq!(woken.get(), 1, "woken when it lands");
    assert_eq!(
        cache.take_landed(C, "k"),
        Some(Some(Answer::Result("\"0x1\"".into())))
    );
    // A leader that gives up (its request cancelled) lands nothing: the follower is woken too.
    assert_eq!(cache.begin(C, "j", 10, 1_000), Begin::Lead);
    assert_eq!(cache.begin(C, "j", 11, 1_000), Begin::Follow);
    cache.on_land(C, "j", wake(&woken));
    let _ = cache.land(C, "j", None, 12);
    assert_eq!(woken.get(), 2);
    // Landed already, or no such flight: woken at once.
    cache.on_land(C, "gone", wake(&woken));
    assert_eq!(woken.get(), 3);
    // The head ask: waiters woken when it is released; none under way: at once.
    assert!(cache.claim_refresh(C, 100, 5_000));
    cache.on_refreshed(C, wake(&woken));
    assert_eq!(woken.get(), 3);
    cache.release_refresh(C, 100);
    assert_eq!(woken.get(), 4);
    cache.on_refreshed(C, wake(&woken));
    assert_eq!(woken.get(), 5);
}

/// helper-3's finding 2: at `latest`, an answer naming a block below the head (a load balancer's
/// node a block behind: its receipts, its transaction at an index) was kept as the head's.
#[test]
fn an_answer_at_the_head_that_names_another_block_is_not_kept() {
    let mut cache = cache_at(30, 10, 0);
    let params = json!(["latest"]);
    let read = Read {
        method: "eth_getBlockReceipts",
        params: &params,
        about: About::Head,
        pinned: false,
        answerer_head: None,
    };
    let receipts = |n: u64| {
        json!([{"blockNumber": format!("{n:#x}"), "blockHash": hash(n, 0), "status": "0x1"}])
            .to_string()
    };
    assert_eq!(cache.store(C, "r", read, &receipts(29), 10, &S).tag, None);
    assert_eq!(
        cache.store(C, "r", read, &receipts(30), 10, &S).tag,
        Some(Tag::Head {
            number: 30,
            hash: hash(30, 0)
        })
    );
}

/// `eth_blockNumber` is the upstreams' best number while the head's block is being asked of a
/// slow node (issue 51, point 4: the head never trails the best upstream).
#[test]
fn eth_block_number_says_the_upstreams_best_while_the_heads_block_is_on_its_way() {
    let mut cache = cache_at(30, 10, 0);
    let number = |cache: &mut ReadCache, now| {
        cache.lookup(C, "eth_blocknumber []", About::HeadNumber, now, &S)
    };
    assert_eq!(number(&mut cache, 500).as_deref(), Some("\"0x1e\""));
    // The head is stale at 1_200; the upstreams said 33 at 1_100: that, without asking.
    assert!(cache.needs_head(C, About::HeadNumber, 1_200, &S));
    cache.note_best(C, 33, 1_100);
    assert!(!cache.needs_head(C, About::HeadNumber, 1_200, &S));
    assert_eq!(number(&mut cache, 1_200).as_deref(), Some("\"0x21\""));
    // Reads at the head still need the head's block.
    assert!(cache.needs_head(C, About::Head, 1_200, &S));
    // Both stale: asked.
    assert!(cache.needs_head(C, About::HeadNumber, 2_200, &S));
    assert_eq!(number(&mut cache, 2_200), None);
}

#[test]
fn an_answer_no_head_changes_is_kept_though_the_head_moved_during_its_ask() {
    use super::finality::BeforeAsk;
    let mut cache = cache_at(10, 5, 0);
    cache.set_genesis(C, &hash(0, 0));
    let before = BeforeAsk::of(cache.view(C));
    let receipt = |n: u64| {
        json!({"transactionHash": hash(1, 9), "blockNumber": format!("{n:#x}"), "blockHash": hash(n, 0)})
            .to_string()
    };
    let still = |cache: &ReadCache, about: About, result: &str| {
        before.still_keeps(cache.view(C), about, result)
    };
    // The head the same: anything the rules keep.
    assert!(still(&cache, About::Number(8), &block(8, 0)));
    assert!(still(&cache, About::Head, &block(10, 0)));
    // Two heads on, and the finalized block up to 7, while the ask ran.
    cache.adopt(C, &[header(11, 0, 0)], 10, 10, 2);
    cache.adopt(C, &[header(12, 0, 0)], 20, 20, 2);
    cache.set_finalized(C, 7, 20);
    assert!(still(&cache, About::Number(5), &block(5, 0)));
    assert!(still(&cache, About::Number(1), &block(1, 0)));
    assert!(
        !still(&cache, About::Number(6), &block(6, 0)),
        "finalized only during the ask: it may be a block of a fork then"
    );
    assert!(!still(&cache, About::Number(8), &block(8, 0)));
    assert!(!still(&cache, About::Head, &block(10, 0)));
    assert!(still(&cache, About::BlockHash, &block(9, 0)));
    assert!(still(&cache, About::Chain, "\"0x7a69\""));
    assert!(still(&cache, About::Answer, &receipt(4)));
    assert!(!still(&cache, About::Answer, &receipt(9)));
    assert!(!still(&cache, About::Answer, "null"));
    // The chain started anew (another genesis) while the ask ran: nothing of the old one.
    cache.set_genesis(C, &hash(0, 1));
    cache.adopt(C, &[header(3, 1, 1)], 30, 30, 2);
    cache.set_finalized(C, 2, 30);
    assert!(!still(&cache, About::Number(1), &block(1, 0)));
    assert!(!still(&cache, About::Answer, &receipt(1)));
    // No genesis known before the ask (its ask failed): only the head the same keeps it.
    let mut unknown = cache_at(10, 5, 0);
    let before = BeforeAsk::of(unknown.view(C));
    unknown.adopt(C, &[header(11, 0, 0)], 10, 10, 2);
    assert!(!before.still_keeps(unknown.view(C), About::Number(3), &block(3, 0)));
    assert!(before.still_keeps(unknown.view(C), About::BlockHash, &block(3, 0)));
}
