//! The chains of one deployment: `CHAINS` read, each chain's settings from its own variables
//! and the top-level ones, one chain's error kept to it, paths and object names to chains.

use super::*;
use crate::hardfork::Hardfork;
use crate::ordering::sender::{PoolKind, ReplacementPolicy};
use std::collections::HashMap;

fn chains(vars: &[(&str, &str)]) -> Result<Chains, ConfigError> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Chains::from_lookup(|name| map.get(name).cloned())
}

const TWO: &[(&str, &str)] = &[
    ("CHAIN_ID", "31337"),
    ("UPSTREAM_RPC_URL", "http://127.0.0.1:8545"),
    ("UPSTREAM_SEND_URL", "https://route.example"),
    ("HARDFORK", "prague"),
    ("UPSTREAM_POOL", "strict"),
    ("NONCE_GAP_WAIT_MS", "500"),
    ("CHAINS", "296:hedera-testnet"),
    (
        "CHAIN_296_UPSTREAM_RPC_URL",
        "https://testnet.hashio.example/api",
    ),
];

#[test]
fn chains_lists_ids_and_aliases_once_each() {
    let read = parse_entries(" 1:Ethereum, 8453:base ,84532,").unwrap();
    assert_eq!(
        read,
        vec![
            ChainEntry {
                id: 1,
                alias: Some("ethereum".into())
            },
            ChainEntry {
                id: 8453,
                alias: Some("base".into())
            },
            ChainEntry {
                id: 84532,
                alias: None
            },
        ]
    );
    assert_eq!(parse_entries("").unwrap(), vec![]);
    for bad in [
        "base",
        "0",
        "1:",
        "1:bad alias",
        "1:123",
        "1,1",
        "1:a,2:a",
        "-5",
        "1:a_b",
    ] {
        assert!(parse_entries(bad).is_err(), "{bad} refused");
    }
}

#[test]
fn each_chain_reads_its_own_variables_then_the_top_level_ones_but_never_anothers_upstreams() {
    let c = chains(TWO).unwrap();
    let default = c.default.as_ref().unwrap();
    assert_eq!((default.chain_id, default.named_chain), (Some(31337), None));
    assert_eq!(
        c.served.iter().map(|s| s.id).collect::<Vec<_>>(),
        [31337, 296]
    );
    let hedera = c.served[1].config.as_ref().unwrap();
    assert_eq!(hedera.chain_id, Some(296), "its id is the one CHAINS names");
    assert_eq!(hedera.upstream_urls, ["https://testnet.hashio.example/api"]);
    assert!(
        hedera.upstream_send_urls.is_empty(),
        "the default chain's route is its own"
    );
    assert_eq!(
        hedera.nonce_gap_wait_ms, 500,
        "a chain's setting defaults to the top level"
    );
    assert_eq!(
        hedera.hardfork,
        Some(Hardfork::Osaka),
        "its fork is its own: the default"
    );
    assert_eq!(hedera.upstream_pool, None, "its pool is its own: auto...");
    assert_eq!(
        hedera.known_pool_kind(None),
        Some(PoolKind::Strict),
        "...strict on Hedera's id"
    );
    assert_eq!(
        default.known_pool_kind(None),
        Some(PoolKind::Strict),
        "as the top level says"
    );
    assert_eq!(hedera.object_name("0xab"), "296:0xab");
    assert_eq!(
        default.object_name("0xab"),
        "0xab",
        "the default chain keeps today's names"
    );

    let own = [
        TWO,
        &[
            ("CHAIN_296_HARDFORK", "cancun"),
            ("CHAIN_296_SEND_WINDOW", "1"),
            ("CHAIN_296_NONCE_GAP_WAIT_MS", "9"),
        ],
    ]
    .concat();
    let c = chains(&own).unwrap();
    let hedera = c.served[1].config.as_ref().unwrap();
    assert_eq!(
        (
            hedera.hardfork,
            hedera.send_window,
            hedera.nonce_gap_wait_ms
        ),
        (Some(Hardfork::Cancun), 1, 9)
    );
    assert_eq!(c.default.as_ref().unwrap().hardfork, Some(Hardfork::Prague));
}

/// What loosens a chain's safety is its own: `ALLOW_UNPROTECTED_TXS`, `REPLACEMENT_POLICY` and
/// `METHOD_ALLOWLIST` at the top level are the default chain's alone (a pre-EIP-155
/// transaction allowed on one chain must not become replayable to every chain served); a
/// deployment that set them for every chain is told once per chain and setting, by name only.
#[test]
fn a_chains_safety_settings_are_its_own_and_the_old_inheritance_is_told() {
    let top = [
        TWO,
        &[
            ("ALLOW_UNPROTECTED_TXS", "true"),
            ("REPLACEMENT_POLICY", "forward"),
            ("METHOD_ALLOWLIST", "debug_*"),
            ("METHOD_DENYLIST", "eth_sign*"),
        ],
    ]
    .concat();
    let c = chains(&top).unwrap();
    let default = c.default.as_ref().unwrap();
    let hedera = c.served[1].config.as_ref().unwrap();
    assert!(default.allow_unprotected_txs);
    assert!(!hedera.allow_unprotected_txs, "not inherited");
    assert_eq!(default.replacement_policy, Some(ReplacementPolicy::Forward));
    assert_eq!(
        hedera.replacement_policy, None,
        "by its own pool: strict, reject"
    );
    assert!(default.methods.allows("debug_traceTransaction"));
    assert!(
        !hedera.methods.allows("debug_traceTransaction"),
        "not inherited"
    );
    assert!(
        !hedera.methods.allows("eth_signTypedData_v4"),
        "a deny list is"
    );
    assert_eq!(c.notices.len(), 3, "{:?}", c.notices);
    assert!(
        c.notices[0].contains("ALLOW_UNPROTECTED_TXS")
            && c.notices[0].contains("CHAIN_296_ALLOW_UNPROTECTED_TXS")
    );
    assert!(
        c.notices.iter().all(|n| !n.contains("debug_*")),
        "never a value"
    );
    // Set for the chain too: no notice for it, and the chain has what it set.
    let own = [&top[..], &[("CHAIN_296_ALLOW_UNPROTECTED_TXS", "true")]].concat();
    let c = chains(&own).unwrap();
    assert!(c.served[1].config.as_ref().unwrap().allow_unprotected_txs);
    assert_eq!(c.notices.len(), 2);
    // One chain alone: nothing to tell.
    let one = [
        ("UPSTREAM_RPC_URL", "http://127.0.0.1:8545"),
        ("ALLOW_UNPROTECTED_TXS", "true"),
    ];
    assert!(chains(&one).unwrap().notices.is_empty());
}

#[test]
fn a_chains_bad_setting_is_that_chains_error_naming_it_and_the_others_serve() {
    let broken = [TWO, &[("CHAIN_296_UPSTREAM_POOL", "gapless")]].concat();
    let c = chains(&broken).unwrap();
    assert!(c.default.is_ok());
    let err = c.served[1].config.as_ref().unwrap_err();
    assert_eq!((err.name, err.chain), ("UPSTREAM_POOL", Some(296)));
    assert_eq!(
        err.to_string(),
        "relay misconfigured: chain 296: UPSTREAM_POOL must be auto, mempool or strict, got \"gapless\""
    );

    let unset: Vec<(&str, &str)> = TWO
        .iter()
        .copied()
        .filter(|(k, _)| !k.starts_with("CHAIN_296"))
        .collect();
    let err = chains(&unset).unwrap().served[1]
        .config
        .clone()
        .unwrap_err();
    assert_eq!(err.name, "UPSTREAM_RPC_URL");
    assert!(
        err.problem
            .contains("wrangler secret put CHAIN_296_UPSTREAM_RPC_URL"),
        "{}",
        err.problem
    );

    // A route's settings are a chain's own: the top level's opt-in cap is not another chain's.
    let capped = [TWO, &[("SEND_PUBLIC_AFTER_BLOCKS", "5")]].concat();
    let c = chains(&capped).unwrap();
    assert_eq!(
        c.default.as_ref().unwrap().send_public_after_blocks,
        Some(5)
    );
    assert_eq!(
        c.served[1]
            .config
            .as_ref()
            .unwrap()
            .send_public_after_blocks,
        None
    );
}

#[test]
fn chains_needs_the_default_chains_id_and_a_bad_list_is_the_deployments_error() {
    let no_id: Vec<(&str, &str)> = TWO
        .iter()
        .copied()
        .filter(|(k, _)| *k != "CHAIN_ID")
        .collect();
    assert_eq!(chains(&no_id).unwrap_err().name, "CHAINS");
    let bad_id = [no_id.as_slice(), &[("CHAIN_ID", "mainnet")]].concat();
    assert_eq!(
        chains(&bad_id).unwrap_err().name,
        "CHAIN_ID",
        "said as it is"
    );
    let bad = [TWO, &[("CHAINS", "296,296")]].concat();
    let map: HashMap<&str, &str> = bad.iter().copied().collect();
    assert_eq!(
        Chains::from_lookup(|n| map.get(n).map(|v| v.to_string()))
            .unwrap_err()
            .name,
        "CHAINS"
    );
    // Without CHAINS, the default chain alone, at /evm/{CHAIN_ID} when it has one.
    let one = chains(&[("UPSTREAM_RPC_URL", "http://127.0.0.1:8545")]).unwrap();
    assert!(one.served.is_empty() && one.default.is_ok());
}

#[test]
fn paths_and_object_names_find_their_chain() {
    let listed = [TWO, &[("CHAINS", "31337:local, 296:hedera-testnet")]].concat();
    let map: HashMap<&str, &str> = listed.iter().copied().collect();
    let c = Chains::from_lookup(|n| map.get(n).map(|v| v.to_string())).unwrap();
    assert_eq!(c.find("296").unwrap().id, 296);
    assert_eq!(c.find("Hedera-Testnet").unwrap().id, 296);
    assert_eq!(c.find("local").unwrap().id, 31337);
    assert!(c
        .find("31337")
        .unwrap()
        .config
        .as_ref()
        .unwrap()
        .named_chain
        .is_none());
    assert!(c.find("1").is_none() && c.find("").is_none());
    assert!(c
        .of_object("0xab")
        .unwrap()
        .as_ref()
        .unwrap()
        .named_chain
        .is_none());
    assert_eq!(
        c.of_object("296:0xab")
            .unwrap()
            .as_ref()
            .unwrap()
            .named_chain,
        Some(296)
    );
    assert!(c.of_object("5:0xab").is_none());
    assert_eq!(
        split_object_name(&object_name(Some(296), "0xab")),
        (Some("296"), "0xab")
    );
    assert_eq!(
        split_object_name(&object_name(None, "0xab")),
        (None, "0xab")
    );
    assert_eq!(
        c.listing(),
        serde_json::json!([
            { "chainId": 31337, "path": "/evm/31337", "alias": "/evm/local" },
            { "chainId": 296, "path": "/evm/296", "alias": "/evm/hedera-testnet" },
        ])
    );
}

#[test]
fn a_chains_variable_that_is_no_chains_setting_is_that_chains_error() {
    let names = |list: &[&str]| list.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    let c = chains(TWO).unwrap().check_names(&names(&[
        "CHAIN_296_UPSTREAM_RPC_URL",
        "CHAIN_296_SEND_WINDOW",
        "CHAIN_ID",
        "CHAINS",
        "CHAIN_8453_UPSTREAM_RPC_ULR", // a chain not served: not asked
    ]));
    assert!(c.served.iter().all(|s| s.config.is_ok()) && c.default.is_ok());

    for (stray, says) in [
        (
            "CHAIN_296_UPSTREAM_RPC_ULR",
            "UPSTREAM_RPC_ULR is no setting",
        ),
        (
            "CHAIN_296_MAX_BATCH",
            "MAX_BATCH is the deployment's, not a chain's",
        ),
        (
            "CHAIN_296_CHAIN_ID",
            "a served chain's id is the one CHAINS lists",
        ),
    ] {
        let c = chains(TWO).unwrap().check_names(&names(&[stray]));
        let err = c.served[1].config.as_ref().unwrap_err();
        assert_eq!(err.chain, Some(296));
        assert!(err.problem.contains(says), "{stray}: {}", err.problem);
        assert!(
            c.default.is_ok() && c.served[0].config.is_ok(),
            "the others serve"
        );
    }
    // The default chain reads the top level: its own prefix would be silently ignored.
    let c = chains(TWO)
        .unwrap()
        .check_names(&names(&["CHAIN_31337_HARDFORK"]));
    assert!(c
        .default
        .as_ref()
        .unwrap_err()
        .problem
        .contains("set HARDFORK instead"));
    assert!(c.served[0].config.is_err() && c.served[1].config.is_ok());
}
