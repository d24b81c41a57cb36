//! Every case of ethereum/tests TransactionTests (tests/fixtures/TransactionTests, or
//! $TRANSACTION_TESTS_DIR) against the decoder, judged by the newest fork each case lists.
//!
//! Valid cases must decode to the fixture's hash and sender and meet that fork's rules
//! (`HARDFORK`, [`nonce_relay::hardfork`]); invalid ones must be refused, by the decoder, by the
//! relay's chain id policy (the fixtures are signed for chain id 1, the relay then runs with
//! CHAIN_ID=1 and accepts unprotected legacy transactions) or by the fork's rules (intrinsic gas,
//! EIP-3860). Every fork of every case is compared in `tests/hardfork_vectors.rs`.

use nonce_relay::hardfork::Hardfork;
use nonce_relay::transaction::decode;
use serde_json::Value;
use std::path::PathBuf;
use vectors::vectors_dir;

#[path = "support/vectors.rs"]
mod vectors;

/// The relay's chain id policy as the fixtures assume it.
const FIXTURE_CHAIN_ID: u64 = 1;

/// Forks, newest first.
const FORKS: &[&str] = &[
    "Prague",
    "Cancun",
    "Shanghai",
    "Paris",
    "London",
    "Berlin",
    "Istanbul",
    "ConstantinopleFix",
    "Constantinople",
    "Byzantium",
    "EIP158",
    "EIP150",
    "Homestead",
    "Frontier",
];

fn json_files(dir: &PathBuf, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read the fixtures at {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            json_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
}

#[test]
fn ethereum_transaction_tests() {
    let mut files = Vec::new();
    json_files(&vectors_dir(), &mut files);
    files.sort();
    assert!(
        files.len() >= 200,
        "expected the 210 fixture files, found {}",
        files.len()
    );

    let (mut valid, mut invalid, mut by_fork_rules) = (0, 0, 0);
    let mut failures = Vec::new();
    for file in &files {
        let cases: serde_json::Map<String, Value> =
            serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        for (name, case) in cases {
            let results = &case["result"];
            let fork = FORKS
                .iter()
                .find(|f| results.get(**f).is_some())
                .unwrap_or_else(|| panic!("{name}: no known fork"));
            let expected = &results[*fork];
            let txbytes = case["txbytes"].as_str().unwrap();
            let decoded = nonce_relay::hex::decode(txbytes)
                .map_err(|e| e.to_string())
                .and_then(|raw| decode(&raw).map_err(|e| e.to_string()));
            let hardfork = Hardfork::parse(fork).unwrap();
            let chain_ok = decoded
                .as_ref()
                .is_ok_and(|tx| tx.chain_id.is_none() || tx.chain_id == Some(FIXTURE_CHAIN_ID));
            let fork_ok = decoded.as_ref().is_ok_and(|tx| hardfork.check(tx).is_ok());
            let accepted = chain_ok && fork_ok;
            if let Some(exception) = expected.get("exception") {
                invalid += 1;
                if chain_ok && !fork_ok {
                    by_fork_rules += 1;
                }
                if accepted {
                    failures.push(format!(
                        "{name} ({fork}): accepted, fixture says {exception}"
                    ));
                }
            } else {
                valid += 1;
                match &decoded {
                    Ok(tx) if chain_ok && !fork_ok => failures.push(format!(
                        "{name} ({fork}): valid, refused: {}",
                        hardfork.check(tx).unwrap_err()
                    )),
                    Ok(tx) if accepted => {
                        let hash = nonce_relay::hex::encode(&tx.hash);
                        let sender = tx.sender.to_string();
                        if hash != expected["hash"].as_str().unwrap() {
                            failures
                                .push(format!("{name}: hash {hash}, fixture {}", expected["hash"]));
                        }
                        if sender != expected["sender"].as_str().unwrap() {
                            failures.push(format!(
                                "{name}: sender {sender}, fixture {}",
                                expected["sender"]
                            ));
                        }
                    }
                    Ok(tx) => failures.push(format!(
                        "{name}: valid, refused for chain id {:?}",
                        tx.chain_id
                    )),
                    Err(e) => failures.push(format!("{name}: valid, refused: {e}")),
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    println!("{valid} valid, {invalid} invalid ({by_fork_rules} refused by the fork's rules)");
    // The five intrinsic gas cases and the EIP-3860 size case, once left to the upstream.
    assert!(
        by_fork_rules >= 6,
        "the intrinsic gas and EIP-3860 cases: {by_fork_rules}"
    );
    assert!(valid >= 50 && invalid >= 90);
}
