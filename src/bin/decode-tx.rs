//! decode-tx: decodes raw transactions for operators.
//!
//! Reads 0x-hex raw transactions, one a line, from standard input (or one from the first argument)
//! and writes one JSON line per input line:
//! `{"hash":"0x..","sender":"0x..","type":2,"chain_id":1,"nonce":7}` (hash and sender lowercase
//! hex; `chain_id` null for an unprotected legacy transaction), or `{"error":"..."}`.
//!
//! ```sh
//! cargo run --release --bin decode-tx -- 0x02f8...
//! cargo run --release --bin decode-tx < raw-transactions.txt
//! ```

use nonce_relay::{hex, transaction};
use serde_json::{json, Value};
use std::io::{self, BufRead, Write};

fn describe(line: &[u8]) -> Value {
    let text = String::from_utf8_lossy(line);
    let text = text.trim();
    if text.is_empty() {
        return json!({ "error": "empty line" });
    }
    let raw = match hex::decode(text) {
        Ok(raw) => raw,
        Err(e) => return json!({ "error": format!("not a raw transaction: {e}") }),
    };
    match transaction::decode(&raw) {
        Ok(tx) => json!({
            "hash": hex::encode(&tx.hash),
            "sender": tx.sender.to_string(),
            "type": tx.tx_type.byte(),
            "chain_id": tx.chain_id,
            "nonce": tx.nonce,
        }),
        Err(e) => json!({ "error": e.to_string() }),
    }
}

fn main() -> io::Result<()> {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    if let Some(arg) = std::env::args_os().nth(1) {
        let line = describe(arg.to_string_lossy().as_bytes());
        writeln!(out, "{line}")?;
        return out.flush();
    }
    let mut input = io::stdin().lock();
    let mut line = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        writeln!(out, "{}", describe(&line))?;
    }
    out.flush()
}
