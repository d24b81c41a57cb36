//! Every fork of every ethereum/tests TransactionTests case (tests/fixtures/TransactionTests, or
//! $TRANSACTION_TESTS_DIR) against [`nonce_relay::hardfork`]: where the fixture says the case is
//! valid in a fork, the intrinsic gas computed for that fork equals the fixture's `intrinsicGas`;
//! where it says `INTRINSIC_GAS_TOO_LOW` (or `INITCODE_SIZE_EXCEEDED`), the relay refuses it (the
//! decoder or the fork's rules).
//!
//! Fork-valid cases the decoder refuses for a rule stricter than that old fork's (EIP-2's low `s`
//! before Homestead) have no computed gas: they are counted and must stay few.

use nonce_relay::hardfork::intrinsic::intrinsic_gas;
use nonce_relay::hardfork::Hardfork;
use nonce_relay::transaction::decode;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use vectors::vectors_dir;

#[path = "support/vectors.rs"]
mod vectors;

fn json_files(dir: &PathBuf, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            json_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
}

fn quantity(v: &Value) -> u64 {
    let s = v.as_str().expect("a hex quantity");
    u64::from_str_radix(s.trim_start_matches("0x"), 16).expect("a u64")
}

#[test]
fn intrinsic_gas_of_every_fork_valid_case_and_every_intrinsic_gas_refusal() {
    let mut files = Vec::new();
    json_files(&vectors_dir(), &mut files);
    files.sort();
    assert!(files.len() >= 200, "the 210 fixture files: {}", files.len());
    // Per fork: (gas compared, refusals checked, valid but refused by the decoder).
    let mut per_fork: BTreeMap<Hardfork, (u32, u32, u32)> = BTreeMap::new();
    let mut failures = Vec::new();
    for file in &files {
        let cases: serde_json::Map<String, Value> =
            serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        for (name, case) in cases {
            let raw = nonce_relay::hex::decode(case["txbytes"].as_str().unwrap());
            let decoded = raw.ok().map(|raw| decode(&raw));
            for (fork_name, result) in case["result"].as_object().unwrap() {
                let fork = Hardfork::parse(fork_name)
                    .unwrap_or_else(|| panic!("{name}: unknown fork {fork_name}"));
                let counts = per_fork.entry(fork).or_default();
                let exception = result.get("exception").and_then(Value::as_str);
                match (exception, &decoded) {
                    (None, Some(Ok(tx))) => {
                        counts.0 += 1;
                        let want = quantity(&result["intrinsicGas"]);
                        let have = intrinsic_gas(fork, &tx.payload);
                        if have != want {
                            failures.push(format!("{name} ({fork_name}): {have}, fixture {want}"));
                        }
                        if let Err(e) = fork.check(tx) {
                            failures.push(format!("{name} ({fork_name}): valid, refused: {e}"));
                        }
                    }
                    (None, _) => counts.2 += 1,
                    (Some(e), _)
                        if e.contains("INTRINSIC_GAS_TOO_LOW")
                            || e.contains("INITCODE_SIZE_EXCEEDED") =>
                    {
                        counts.1 += 1;
                        if let Some(Ok(tx)) = &decoded {
                            if fork.check(tx).is_ok() {
                                failures.push(format!(
                                    "{name} ({fork_name}): accepted, fixture says {e}"
                                ));
                            }
                        }
                    }
                    (Some(_), _) => {}
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
    for (fork, (compared, refused, undecoded)) in &per_fork {
        println!(
            "{:<18} gas compared {compared:>3}, intrinsic gas refusals {refused:>2}, valid but refused by the decoder {undecoded}",
            fork.name()
        );
    }
    assert_eq!(per_fork.len(), 13, "Frontier .. Cancun");
    let compared: u32 = per_fork.values().map(|c| c.0).sum();
    let refused: u32 = per_fork.values().map(|c| c.1).sum();
    assert!(compared >= 500 && refused >= 60, "{compared} {refused}");
    for (fork, (_, _, undecoded)) in &per_fork {
        assert!(
            *undecoded <= 3,
            "{}: {undecoded} valid cases not decoded",
            fork.name()
        );
    }
}
