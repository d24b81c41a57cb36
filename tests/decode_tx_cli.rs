//! The operator's tool `decode-tx`, run as a process: one JSON line per input line, never a crash.

use std::io::Write;
use std::process::{Command, Stdio};

#[path = "support/vectors.rs"]
mod vectors;

fn run(args: &[&str], stdin: &[u8]) -> (Vec<serde_json::Value>, bool) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_decode-tx"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let output = child.wait_with_output().unwrap();
    let lines = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (lines, output.status.success())
}

fn fixture(name: &str) -> serde_json::Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/typed-transactions.json"
    );
    let all: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    all.into_iter().find(|f| f["name"] == name).unwrap()
}

#[test]
fn one_json_line_per_input_line() {
    let f = fixture("EIP-7702");
    let legacy = fixture("legacy (EIP-155)");
    let input = format!(
        "{}\n\nnot hex\n0x05c0\n{}\n\u{0}\u{ff}garbage\n0x{}",
        f["raw"].as_str().unwrap(),
        legacy["raw"].as_str().unwrap(),
        "ab".repeat(5000)
    );
    let mut bytes = input.into_bytes();
    bytes.extend_from_slice(&[0xff, 0xfe, b'\n']);
    let (lines, ok) = run(&[], &bytes);
    assert!(ok);
    // The long hex line and the trailing invalid UTF-8 bytes are one line.
    assert_eq!(lines.len(), 7);
    assert_eq!(lines[0]["hash"], f["hash"]);
    assert_eq!(lines[0]["sender"], f["sender"]);
    assert_eq!(lines[0]["type"], 4);
    assert_eq!(lines[0]["chain_id"], 31337);
    assert_eq!(lines[0]["nonce"], f["nonce"]);
    for i in [1, 2, 3, 5, 6] {
        assert!(
            lines[i]["error"].as_str().is_some_and(|e| !e.is_empty()),
            "line {i}: {}",
            lines[i]
        );
    }
    assert_eq!(lines[4]["type"], 0);
}

#[test]
fn a_single_argument() {
    let f = fixture("EIP-1559");
    let (lines, ok) = run(&[f["raw"].as_str().unwrap()], b"");
    assert!(ok);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["hash"], f["hash"]);
    let (lines, ok) = run(&["0x"], b"");
    assert!(ok && lines[0]["error"] == "empty raw transaction");
}

#[test]
fn unprotected_legacy_has_a_null_chain_id() {
    // ethereum/tests TransactionTests, ttSignature/SenderTest: v = 27, no chain id.
    let path = vectors::vectors_dir().join("ttSignature/SenderTest.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read the fixture {}: {e}", path.display()));
    let case: serde_json::Value = serde_json::from_str(&text).unwrap();
    let case = &case["SenderTest"];
    let (lines, ok) = run(&[case["txbytes"].as_str().unwrap()], b"");
    assert!(ok);
    assert_eq!(lines[0]["chain_id"], serde_json::Value::Null);
    assert_eq!(lines[0]["type"], 0);
    assert_eq!(lines[0]["sender"], case["result"]["Cancun"]["sender"]);
    assert_eq!(lines[0]["hash"], case["result"]["Cancun"]["hash"]);
}
