use super::*;
use serde_json::json;

fn set() -> Vec<String> {
    vec!["stuck".to_string(), "healthy".to_string()]
}

#[test]
fn what_each_read_needs_of_the_head() {
    let need = |method: &str, params: Value| BlockNeed::of(method, &params);
    assert_eq!(need("eth_blockNumber", json!([])), BlockNeed::Head);
    assert_eq!(
        need("eth_getBlockByNumber", json!(["0x1f", false])),
        BlockNeed::Number(31)
    );
    assert_eq!(
        need("eth_getBlockByNumber", json!(["latest", false])),
        BlockNeed::Tip
    );
    assert_eq!(
        need("eth_getBlockByNumber", json!(["finalized", false])),
        BlockNeed::Any
    );
    assert_eq!(
        need("eth_call", json!([{"to": "0x00"}])),
        BlockNeed::Tip,
        "absent: latest"
    );
    assert_eq!(
        need("eth_call", json!([{"to": "0x00"}, "pending"])),
        BlockNeed::Tip
    );
    assert_eq!(
        need("eth_getBalance", json!(["0xab", "0x10"])),
        BlockNeed::Number(16)
    );
    assert_eq!(
        need("eth_getBalance", json!(["0xab", {"blockNumber": "0x10"}])),
        BlockNeed::Number(16),
        "EIP-1898"
    );
    assert_eq!(
        need("eth_getBalance", json!(["0xab", {"blockHash": "0x01"}])),
        BlockNeed::Any
    );
    assert_eq!(
        need("eth_getStorageAt", json!(["0xab", "0x0", "0x5"])),
        BlockNeed::Number(5)
    );
    assert_eq!(
        need(
            "eth_getLogs",
            json!([{"fromBlock": "0x1", "toBlock": "0x9"}])
        ),
        BlockNeed::Number(9)
    );
    assert_eq!(
        need("eth_getLogs", json!([{"fromBlock": "0x1"}])),
        BlockNeed::Tip
    );
    assert_eq!(
        need("eth_getLogs", json!([{"blockHash": "0x01"}])),
        BlockNeed::Any
    );
    let hash = format!("0x{}", "ab".repeat(32));
    assert_eq!(need("eth_getBlockReceipts", json!([hash])), BlockNeed::Any);
    assert_eq!(
        need("eth_getTransactionByHash", json!(["0x01"])),
        BlockNeed::Any
    );
    assert_eq!(need("eth_chainId", json!([])), BlockNeed::Any);
}

/// The issue's two upstreams: one stuck 30 blocks behind, one healthy. Reads of the tip and of
/// announced blocks skip the stuck one; reads by hash do not; eth_blockNumber never goes back.
#[test]
fn a_stuck_upstream_gets_no_reads_of_the_tip_or_of_blocks_above_its_head() {
    let mut heads = Heads::default();
    assert_eq!(heads.learn("healthy", &set(), 100, 2, 0), None);
    assert_eq!(
        heads.learn("stuck", &set(), 70, 2, 0),
        Some(30),
        "logged once"
    );
    assert_eq!(
        heads.learn("stuck", &set(), 70, 2, 10),
        None,
        "not again while it lags"
    );
    assert_eq!(
        heads.usable(&set(), BlockNeed::Tip, 2, None, 10),
        vec!["healthy"]
    );
    assert_eq!(
        heads.usable(&set(), BlockNeed::Number(100), 2, None, 10),
        vec!["healthy"]
    );
    assert_eq!(
        heads.usable(&set(), BlockNeed::Number(70), 2, None, 10),
        set(),
        "both hold 70"
    );
    assert_eq!(heads.usable(&set(), BlockNeed::Any, 2, None, 10), set());
    assert_eq!(
        heads.usable(&set(), BlockNeed::Number(101), 2, None, 10),
        set(),
        "none known to"
    );
    // Within the lag allowed, both serve the tip.
    heads.learn("stuck", &set(), 98, 2, 20);
    assert_eq!(heads.usable(&set(), BlockNeed::Tip, 2, None, 20), set());
    // An answer below the best head is raised to it; one at it is left alone.
    let behind = r#"{"jsonrpc":"2.0","id":7,"result":"0x46"}"#;
    let raised: Value =
        serde_json::from_str(&heads.at_least(behind, &set(), None, 20).unwrap()).unwrap();
    assert_eq!(
        (raised["result"].as_str(), raised["id"].as_i64()),
        (Some("0x64"), Some(7))
    );
    assert_eq!(
        heads.at_least(
            r#"{"jsonrpc":"2.0","id":7,"result":"0x64"}"#,
            &set(),
            None,
            20
        ),
        None
    );
    assert_eq!(head_of(behind), Some(70));
}

/// A head is believed for HEAD_FRESH_MS; a node's lower answer replaces its higher one (a chain
/// that was reset is believed, not held at its old height).
#[test]
fn heads_are_believed_while_fresh_and_a_reset_is_believed() {
    let mut heads = Heads::default();
    heads.learn("healthy", &set(), 100, 2, 0);
    heads.learn("stuck", &set(), 70, 2, 0);
    assert_eq!(heads.best(&set(), HEAD_FRESH_MS), Some(100));
    assert_eq!(heads.best(&set(), HEAD_FRESH_MS + 1), None);
    assert_eq!(
        heads.usable(&set(), BlockNeed::Tip, 2, None, HEAD_FRESH_MS + 1),
        set()
    );
    heads.learn("healthy", &set(), 3, 2, 50_000);
    heads.learn("stuck", &set(), 3, 2, 50_000);
    assert_eq!(heads.best(&set(), 50_000), Some(3));
}

/// Two chains' upstreams in one isolate: a chain's head is the best of its own upstreams alone,
/// so one chain's height never raises another's `eth_blockNumber`, makes its nodes look behind,
/// or keeps its reads from them.
#[test]
fn one_chains_heads_say_nothing_of_anothers() {
    let mut heads = Heads::default();
    let base = vec!["base".to_string()];
    let hedera = vec!["hedera".to_string(), "hedera-2".to_string()];
    assert_eq!(heads.learn("base", &base, 30_000_000, 2, 0), None);
    assert_eq!(
        heads.learn("hedera", &hedera, 900, 2, 0),
        None,
        "not behind Base"
    );
    assert_eq!(heads.learn("hedera-2", &hedera, 899, 2, 0), None);
    assert_eq!(heads.best(&hedera, 0), Some(900));
    let answer = r#"{"jsonrpc":"2.0","id":1,"result":"0x384"}"#;
    assert_eq!(
        heads.at_least(answer, &hedera, None, 0),
        None,
        "900 stays 900"
    );
    assert_eq!(heads.usable(&hedera, BlockNeed::Tip, 2, None, 0), hedera);
    assert_eq!(
        heads.usable(&hedera, BlockNeed::Number(900), 2, None, 0),
        vec!["hedera"]
    );
}

/// The chain's head learned otherwise (the read cache's, from a WebSocket's `newHeads`) counts as
/// the best: a node stuck below it gets no read of its blocks even when no other upstream's head
/// is known (issue 51: 131 of 175 announced blocks read back null from the stuck node first).
#[test]
fn the_chains_head_known_otherwise_is_the_best_and_a_node_that_lacks_a_block_is_taken_below_it() {
    let set = vec!["stuck".to_string(), "mining".to_string()];
    let mut heads = Heads::default();
    heads.learn("stuck", &set, 61, 2, 0);
    // Only the stuck node's head known: block 100 may go anywhere, without the chain's head.
    assert_eq!(heads.usable(&set, BlockNeed::Number(100), 2, None, 10), set);
    // The chain is known at 100: the stuck node is skipped, the unknown one kept.
    assert_eq!(
        heads.usable(&set, BlockNeed::Number(100), 2, Some(100), 10),
        vec!["mining"]
    );
    assert_eq!(
        heads.usable(&set, BlockNeed::Tip, 2, Some(100), 10),
        vec!["mining"]
    );
    // eth_blockNumber at least the chain's head.
    let said = heads.at_least(
        r#"{"jsonrpc":"2.0","id":1,"result":"0x3d"}"#,
        &set,
        Some(100),
        10,
    );
    assert_eq!(
        said.as_deref(),
        Some(r#"{"id":1,"jsonrpc":"2.0","result":"0x64"}"#)
    );
    // Both known below the block (their heads learned a while ago): not the one far behind.
    heads.learn("mining", &set, 98, 2, 0);
    assert_eq!(
        heads.usable(&set, BlockNeed::Number(101), 2, Some(101), 10),
        vec!["mining"]
    );
    // A node that answered null for block 100 while the chain has it: taken as below it.
    let mut lb = Heads::default();
    lb.lacks("lb-node", &set, 100, 2, Some(100), 20);
    assert_eq!(lb.head("lb-node", 20), Some(99));
    // Not when no one is known to have the block (it may not exist yet).
    let mut unknown = Heads::default();
    unknown.lacks("lb-node", &set, 100, 2, Some(99), 20);
    assert_eq!(unknown.head("lb-node", 20), None);
    // Nor for an old block (a node that no longer keeps it is not behind).
    let mut old = Heads::default();
    old.lacks("lb-node", &set, 1, 2, Some(100), 20);
    assert_eq!(old.head("lb-node", 20), None);
    assert!(null_means_behind("eth_getBlockByNumber"));
    assert!(!null_means_behind(
        "eth_getTransactionByBlockNumberAndIndex"
    ));
    assert!(answered_null(r#"{"jsonrpc":"2.0","id":1,"result":null}"#));
    assert!(!answered_null(r#"{"jsonrpc":"2.0","id":1,"result":"0x1"}"#));
    assert!(!answered_null(
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"x"}}"#
    ));
}
