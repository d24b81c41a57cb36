//! Every case of ethereum/tests TransactionTests (tests/fixtures/TransactionTests, or
//! $TRANSACTION_TESTS_DIR) against the decoder, judged by the newest fork each case lists.
//!
//! Valid cases must decode to the fixture's hash and sender; invalid ones must be refused, either
//! by the decoder or by the relay's chain id policy (the fixtures are signed for chain id 1, the
//! relay then runs with CHAIN_ID=1 and accepts unprotected legacy transactions). Cases whose
//! invalidity needs the fork's gas schedule, which a decoder cannot judge and the relay leaves to
//! the upstream node, are listed in `UPSTREAM_JUDGES` with the reason.

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

/// Invalid cases the relay forwards on purpose: the reason each needs the upstream's judgement.
const UPSTREAM_JUDGES: &[(&str, &str)] = &[
    (
        "DataTestNotEnoughGAS",
        "intrinsic gas: needs the fork's gas schedule (calldata pricing)",
    ),
    (
        "dataTx_bcValidBlockTestFrontier",
        "intrinsic gas: needs the fork's gas schedule (contract creation cost)",
    ),
    (
        "DataTestInsufficientGas2028",
        "intrinsic gas: needs the fork's gas schedule (EIP-2028 calldata pricing)",
    ),
    (
        "NotEnoughGasLimit",
        "intrinsic gas: needs the fork's gas schedule",
    ),
    (
        "DataTestNotEnoughGasInitCode",
        "intrinsic gas: needs the fork's gas schedule (EIP-3860 initcode word cost)",
    ),
    (
        "DataTestInitCodeTooBig",
        "EIP-3860 initcode size limit: a fork rule (Shanghai on), for the upstream",
    ),
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

    let (mut valid, mut invalid, mut exempt) = (0, 0, 0);
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
            let accepted = decoded
                .as_ref()
                .is_ok_and(|tx| tx.chain_id.is_none() || tx.chain_id == Some(FIXTURE_CHAIN_ID));
            if let Some(exception) = expected.get("exception") {
                if let Some((_, reason)) = UPSTREAM_JUDGES.iter().find(|(n, _)| *n == name) {
                    assert!(!reason.is_empty());
                    exempt += 1;
                    continue;
                }
                invalid += 1;
                if accepted {
                    failures.push(format!(
                        "{name} ({fork}): accepted, fixture says {exception}"
                    ));
                }
            } else {
                valid += 1;
                match &decoded {
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
    assert_eq!(
        exempt,
        UPSTREAM_JUDGES.len(),
        "every listed exemption is a real case"
    );
    println!("{valid} valid, {invalid} invalid, {exempt} left to the upstream");
    assert!(valid >= 50 && invalid >= 90);
}
