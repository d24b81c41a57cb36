use super::*;
use crate::cache::header::{Contents, EMPTY_TRIE_ROOT};
use serde_json::json;

const A: &str = "0x00000000000000000000000000000000000000aa";
const B: &str = "0x00000000000000000000000000000000000000bb";
const T1: &str = "0x1111111111111111111111111111111111111111111111111111111111111111";
const T2: &str = "0x2222222222222222222222222222222222222222222222222222222222222222";

fn bloom_of(logs: &[(&str, &[&str])]) -> Bloom {
    let mut bloom = Bloom([0; 256]);
    for (address, topics) in logs {
        bloom.accrue(&hex::decode(address).unwrap());
        for t in *topics {
            bloom.accrue(&hex::decode(t).unwrap());
        }
    }
    bloom
}

#[test]
fn the_bloom_sets_the_bits_geth_and_alloy_set() {
    // alloy-primitives' Bloom is the oracle (a dev-dependency).
    let mut ours = Bloom([0; 256]);
    let mut theirs = alloy_primitives::Bloom::default();
    for data in [hex::decode(A).unwrap(), hex::decode(T1).unwrap(), vec![]] {
        ours.accrue(&data);
        theirs.accrue(alloy_primitives::BloomInput::Raw(&data));
    }
    assert_eq!(ours.0, theirs.0 .0);
    assert!(ours.may_contain(&hex::decode(A).unwrap()));
}

#[test]
fn a_filter_is_ruled_out_only_where_the_bloom_says_so() {
    let bloom = bloom_of(&[(A, &[T1])]);
    let filter = |f: Value| LogFilter::of(&f).unwrap();
    // Another address: ruled out; the address in it: not.
    assert!(filter(json!({"address": B})).ruled_out_by(&bloom));
    assert!(!filter(json!({"address": A})).ruled_out_by(&bloom));
    assert!(!filter(json!({"address": [B, A]})).ruled_out_by(&bloom));
    // A topic not in it at a position: ruled out, whatever the address.
    assert!(filter(json!({"address": A, "topics": [T2]})).ruled_out_by(&bloom));
    assert!(filter(json!({"topics": [null, T2]})).ruled_out_by(&bloom));
    assert!(!filter(json!({"topics": [[T2, T1]]})).ruled_out_by(&bloom));
    // Any topic at a position (null, or a list with null): no constraint there.
    assert!(!filter(json!({"address": A, "topics": [[T2, null]]})).ruled_out_by(&bloom));
    // A filter that takes any log: only a block without logs rules it out.
    assert!(!filter(json!({})).ruled_out_by(&bloom));
    assert!(filter(json!({})).ruled_out_by(&Bloom([0; 256])));
    assert!(filter(json!({"address": []})).ruled_out_by(&Bloom([0; 256])));
}

#[test]
fn a_malformed_filter_proves_nothing() {
    for f in [
        json!({"address": "0xzz"}),
        json!({"address": 5}),
        json!({"topics": "0x11"}),
        json!({"topics": [5]}),
        json!({"topics": [["0x11"]]}),
    ] {
        assert_eq!(LogFilter::of(&f), None, "{f}");
    }
}

#[test]
fn contents_are_read_from_a_block_object() {
    let root = hex::encode(&EMPTY_TRIE_ROOT);
    let block = json!({
        "logsBloom": hex::encode(&[0u8; 256]),
        "transactionsRoot": root,
        "receiptsRoot": root,
    });
    let contents = Contents::of_block(&block).unwrap();
    assert!(contents.is_empty_block() && contents.logs_bloom.is_empty());
    assert_eq!(Contents::of_block(&json!({"logsBloom": "0x00"})), None);
    assert_eq!(
        hex::encode(&EMPTY_TRIE_ROOT),
        "0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421"
    );
}

// The rules as the relay meets them: answers offered to `ReadCache::store` on a chain whose
// headers the cache holds. Blocks 1..=30, finalized 10; block `n`'s bloom holds address A (with
// topic T1) when `n` is in `WITH_A`; block 26 has no transaction at all.

use crate::cache::policy::About;
use crate::cache::{CacheSettings, Finality, Read, ReadCache, Stored};

const C: u64 = 31337;
const WITH_A: &[u64] = &[25, 27];
const EMPTY_BLOCK: u64 = 26;

fn settings(bloom_proof: bool) -> CacheSettings {
    CacheSettings {
        head_ms: 1_000,
        finality: Finality::Tag,
        finality_depth: 64,
        proof: if bloom_proof {
            ProofRule::Blooms
        } else {
            ProofRule::Roots
        },
    }
}

fn block_hash(n: u64) -> String {
    format!("0x{n:064x}")
}

/// Block `n`'s header with what it says of its contents; `None` for `bare` blocks.
fn header(n: u64, bare: &[u64]) -> Header {
    let contents = (!bare.contains(&n)).then(|| {
        let mut logs: Vec<(&str, &[&str])> = Vec::new();
        if WITH_A.contains(&n) {
            logs.push((A, &[T1]));
        }
        let root = if n == EMPTY_BLOCK {
            EMPTY_TRIE_ROOT
        } else {
            [n as u8; 32]
        };
        Box::new(Contents {
            logs_bloom: bloom_of(&logs),
            transactions_root: root,
            receipts_root: root,
        })
    });
    Header {
        number: n,
        hash: block_hash(n),
        parent_hash: block_hash(n - 1),
        contents,
    }
}

/// A cache holding blocks 1..=30 (those in `bare` without their contents), finalized 10, its
/// head fresh at time 0.
fn cache(bare: &[u64]) -> ReadCache {
    let mut cache = ReadCache::new(1 << 20);
    for n in 1..=30 {
        let _ = cache.adopt(C, &[header(n, bare)], 0, 0, 2);
    }
    cache.set_finalized(C, 10, 0);
    cache
}

fn log(n: u64) -> Value {
    json!({"address": A, "topics": [T1], "blockNumber": format!("{n:#x}"), "blockHash": block_hash(n), "logIndex": "0x0"})
}

/// Offers `result` as the answer to `method` with `params` (about `about`), from an upstream
/// whose head is `answerer_head`.
fn offer(
    cache: &mut ReadCache,
    method: &str,
    params: Value,
    about: About,
    result: Value,
    answerer_head: Option<u64>,
    bloom_proof: bool,
) -> Stored {
    let read = Read {
        method,
        params: &params,
        about,
        pinned: false,
        answerer_head,
    };
    let key = crate::cache::policy::key_of(method, &params);
    cache.store(
        C,
        &key,
        read,
        &result.to_string(),
        10,
        &settings(bloom_proof),
    )
}

fn logs(cache: &mut ReadCache, filter: Value, result: Value, bloom_proof: bool) -> Stored {
    let about = About::of("eth_getLogs", &json!([filter]));
    offer(
        cache,
        "eth_getLogs",
        json!([filter]),
        about,
        result,
        None,
        bloom_proof,
    )
}

const FROM_20_TO_30: (&str, &str) = ("0x14", "0x1e");

#[test]
fn an_empty_range_of_logs_is_kept_only_when_every_block_s_bloom_rules_the_filter_out() {
    let (from, to) = FROM_20_TO_30;
    let mut c = cache(&[]);
    // B is in no block's bloom: the chain proves there is nothing.
    let none_of_b = logs(
        &mut c,
        json!({"address": B, "fromBlock": from, "toBlock": to}),
        json!([]),
        true,
    );
    assert_eq!(none_of_b.completeness, Completeness::Proven);
    assert!(none_of_b.tag.is_some(), "kept");
    // A is in blocks 25 and 27: an empty answer may be a node that lacks them (Erigon's [] past
    // its head): served, not kept, unproven to the range's end.
    let none_of_a = logs(
        &mut c,
        json!({"address": A, "fromBlock": from, "toBlock": to}),
        json!([]),
        true,
    );
    assert_eq!(
        none_of_a.completeness,
        Completeness::Unproven { end: Some(30) }
    );
    assert_eq!(none_of_a.tag, None);
    // A topic that is in no bloom: ruled out whatever the address.
    let t2 = logs(
        &mut c,
        json!({"address": A, "topics": [T2], "fromBlock": from, "toBlock": to}),
        json!([]),
        true,
    );
    assert!(t2.tag.is_some());
    // The bloom proof off (CACHE_BLOOM_PROOF=off): only blocks without a transaction prove.
    let mut off = cache(&[]);
    let off_b = logs(
        &mut off,
        json!({"address": B, "fromBlock": from, "toBlock": to}),
        json!([]),
        false,
    );
    assert_eq!(off_b.tag, None);
    let only_empty = logs(
        &mut off,
        json!({"address": A, "fromBlock": "0x1a", "toBlock": "0x1a"}),
        json!([]),
        false,
    );
    assert!(only_empty.tag.is_some(), "block 26 has no transaction");
}

#[test]
fn an_empty_range_is_unproven_where_a_header_is_not_held_and_below_the_finalized_block_needs_none()
{
    let mut c = cache(&[22]);
    let (from, to) = FROM_20_TO_30;
    let without_22 = logs(
        &mut c,
        json!({"address": B, "fromBlock": from, "toBlock": to}),
        json!([]),
        true,
    );
    assert_eq!(
        without_22.completeness,
        Completeness::Unproven { end: Some(30) }
    );
    // Finalized blocks (1..=10) are the chain's for good: no header needed.
    let finalized = logs(
        &mut c,
        json!({"address": A, "fromBlock": "0x1", "toBlock": "0xa"}),
        json!([]),
        true,
    );
    assert_eq!(finalized.completeness, Completeness::Proven);
    // Above the head the cache holds: not held, not kept.
    let ahead = logs(
        &mut c,
        json!({"address": B, "fromBlock": "0x1f", "toBlock": "0x1f"}),
        json!([]),
        true,
    );
    assert_eq!(ahead.completeness, Completeness::Unproven { end: Some(31) });
}

#[test]
fn a_short_range_of_logs_is_kept_only_when_each_block_it_lists_nothing_of_is_ruled_out() {
    let (from, to) = FROM_20_TO_30;
    let mut c = cache(&[]);
    let filter = json!({"address": A, "fromBlock": from, "toBlock": to});
    // Both blocks with A listed: complete.
    let whole = logs(&mut c, filter.clone(), json!([log(25), log(27)]), true);
    assert_eq!(whole.completeness, Completeness::Proven);
    assert!(whole.tag.is_some());
    // Block 27's log missing (a node whose head was 26): short, not kept.
    let mut c = cache(&[]);
    let short = logs(&mut c, filter, json!([log(25)]), true);
    assert_eq!(short.completeness, Completeness::Unproven { end: Some(30) });
    assert_eq!(short.tag, None);
}

#[test]
fn a_range_past_the_answering_upstream_s_head_is_not_kept_whatever_it_lists() {
    let mut c = cache(&[]);
    let filter = json!([{"address": A, "fromBlock": "0x14", "toBlock": "0x1e"}]);
    let about = About::of("eth_getLogs", &filter);
    let behind = offer(
        &mut c,
        "eth_getLogs",
        filter.clone(),
        about,
        json!([log(25), log(27)]),
        Some(29),
        true,
    );
    assert_eq!(
        behind.completeness,
        Completeness::Unproven { end: Some(30) }
    );
    assert_eq!(behind.tag, None);
    let at = offer(
        &mut c,
        "eth_getLogs",
        filter,
        about,
        json!([log(25), log(27)]),
        Some(30),
        true,
    );
    assert!(at.tag.is_some());
}

#[test]
fn a_log_in_a_block_whose_bloom_ruled_its_filter_out_turns_the_bloom_proof_off_for_the_chain() {
    let mut c = cache(&[]);
    // A log of A's in block 23, whose bloom does not hold A (Polygon's state-sync logs).
    let filter = json!({"address": A, "fromBlock": "0x14", "toBlock": "0x1e"});
    let contradicted = logs(&mut c, filter, json!([log(23), log(25), log(27)]), true);
    assert_eq!(
        contradicted.completeness,
        Completeness::Contradicted { block: 23 }
    );
    assert!(contradicted.proof_off && contradicted.tag.is_none());
    // From then on no bloom proves anything on the chain: B's empty range is not kept.
    let after = logs(
        &mut c,
        json!({"address": B, "fromBlock": "0x14", "toBlock": "0x1e"}),
        json!([]),
        true,
    );
    assert_eq!(after.tag, None);
}

#[test]
fn an_empty_answer_about_a_block_by_hash_is_kept_only_with_its_header() {
    let mut c = cache(&[]);
    let by_hash = |n: u64| json!({"address": A, "blockHash": block_hash(n)});
    assert!(
        logs(&mut c, by_hash(24), json!([]), true).tag.is_some(),
        "24's bloom rules A out"
    );
    assert_eq!(
        logs(&mut c, by_hash(25), json!([]), true).completeness,
        Completeness::Unproven { end: Some(25) },
        "25's bloom holds A: a mirror that lacks the block answers [] (Hiero's relay)"
    );
    // A hash the cache holds no header of: unproven, its number unknown.
    let unknown = format!("0x{}", "ab".repeat(32));
    let stored = logs(&mut c, json!({"blockHash": unknown}), json!([]), true);
    assert_eq!(stored.completeness, Completeness::Unproven { end: None });
    assert_eq!(stored.tag, None);
}

#[test]
fn an_empty_list_of_a_block_s_receipts_or_a_count_of_none_is_kept_only_when_its_roots_are_empty() {
    let mut c = cache(&[]);
    let receipts = |c: &mut ReadCache, n: u64| {
        let params = json!([format!("{n:#x}")]);
        let about = About::of("eth_getBlockReceipts", &params);
        offer(
            c,
            "eth_getBlockReceipts",
            params,
            about,
            json!([]),
            None,
            true,
        )
    };
    assert_eq!(
        receipts(&mut c, 24).completeness,
        Completeness::Unproven { end: Some(24) }
    );
    assert!(receipts(&mut c, EMPTY_BLOCK).tag.is_some());
    let count = |c: &mut ReadCache, n: u64| {
        let params = json!([block_hash(n)]);
        let about = About::of("eth_getBlockTransactionCountByHash", &params);
        offer(
            c,
            "eth_getBlockTransactionCountByHash",
            params,
            about,
            json!("0x0"),
            None,
            true,
        )
    };
    assert_eq!(count(&mut c, 24).tag, None);
    assert!(count(&mut c, EMPTY_BLOCK).tag.is_some());
}

#[test]
fn an_answer_that_names_no_block_at_an_unfinalized_number_is_kept_only_when_asked_by_its_hash() {
    let mut c = cache(&[]);
    let params = json!(["0x4", "0x18", []]);
    let about = About::of("eth_feeHistory", &params);
    assert_eq!(about, About::Number(24));
    let history = json!({"oldestBlock": "0x15", "baseFeePerGas": ["0x1", "0x1", "0x1", "0x1", "0x1"], "gasUsedRatio": [0.5, 0.5, 0.5, 0.5]});
    let asked = |c: &mut ReadCache, pinned: bool| {
        let read = Read {
            method: "eth_feeHistory",
            params: &params,
            about,
            pinned,
            answerer_head: None,
        };
        c.store(C, "fee", read, &history.to_string(), 10, &settings(true))
    };
    assert_eq!(
        asked(&mut c, false).tag,
        None,
        "by number: any node's fork or lag"
    );
    assert!(
        asked(&mut c, true).tag.is_some(),
        "asked by the block's hash"
    );
    // An answer covering other blocks than those asked (a node behind): not kept.
    let behind = json!({"oldestBlock": "0x14", "baseFeePerGas": ["0x1", "0x1", "0x1", "0x1", "0x1"], "gasUsedRatio": [0.5, 0.5, 0.5, 0.5]});
    let read = Read {
        method: "eth_feeHistory",
        params: &params,
        about,
        pinned: true,
        answerer_head: None,
    };
    assert_eq!(
        c.store(C, "fee", read, &behind.to_string(), 10, &settings(true))
            .tag,
        None
    );
    // At or below the finalized block: kept for good either way.
    let old = json!(["0x4", "0x8", []]);
    let history = json!({"oldestBlock": "0x5", "baseFeePerGas": ["0x1", "0x1", "0x1", "0x1", "0x1"], "gasUsedRatio": [0.5, 0.5, 0.5, 0.5]});
    let read = Read {
        method: "eth_feeHistory",
        params: &old,
        about: About::of("eth_feeHistory", &old),
        pinned: false,
        answerer_head: None,
    };
    let stored = c.store(C, "old", read, &history.to_string(), 10, &settings(true));
    assert_eq!(stored.tag, Some(crate::cache::Tag::Final));
}
