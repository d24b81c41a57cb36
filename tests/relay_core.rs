//! The relay's request semantics (src/relay.rs), natively, over a recording platform backend:
//! what reaches the upstream and the sender locks, in which order, and what the client gets.
//! The end-to-end tests (tests/relay.test.mjs) run the same code compiled to wasm on workerd.

use k256::ecdsa::SigningKey;
use nonce_relay::chain_id::ChainIdCache;
use nonce_relay::config::Config;
use nonce_relay::metrics::Metric;
use nonce_relay::relay::{Backend, Relay, UpstreamError};
use nonce_relay::transaction::Transaction;
use rlp::RlpStream;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// Runs a future whose awaits are all ready at once (the backend below never waits).
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("the test backend never waits"),
    }
}

#[derive(Default)]
struct Recorder {
    upstream: RefCell<Vec<Value>>,
    locked: RefCell<Vec<(String, u64)>>,
    logs: RefCell<Vec<Value>>,
    lock_unreachable: bool,
}

impl Backend for Recorder {
    async fn upstream(&self, body: &str) -> Result<String, UpstreamError> {
        let req: Value = serde_json::from_str(body).unwrap();
        self.upstream.borrow_mut().push(req.clone());
        let result = match req["method"].as_str().unwrap() {
            "eth_chainId" => json!("0x7a69"),
            "eth_sendRawTransaction" => json!("0xhash"),
            _ => json!("0x1"),
        };
        Ok(json!({"jsonrpc": "2.0", "id": req["id"], "result": result}).to_string())
    }

    async fn sender_lock(&self, tx: &Transaction, body: &str) -> Result<String, String> {
        if self.lock_unreachable {
            return Err(
                "Durable Object is overloaded (via http://10.9.9.9/upstream-secret)".into(),
            );
        }
        self.locked
            .borrow_mut()
            .push((tx.sender.to_string(), tx.nonce));
        self.upstream(body).await.map_err(|e| e.to_string())
    }

    async fn sleep(&self, _ms: u64) {}

    fn emit(&self, metric: &Metric) {
        self.logs
            .borrow_mut()
            .push(serde_json::from_str(&metric.log_line()).unwrap());
    }
}

fn config(extra: &[(&str, &str)]) -> Config {
    let vars: Vec<(String, String)> = [("UPSTREAM_RPC_URL", "http://10.9.9.9/upstream-secret")]
        .iter()
        .chain(extra)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config::from_lookup(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
        .unwrap()
}

/// A signed legacy transfer: EIP-155 with `chain_id`, or unprotected when `None`.
fn legacy(key: u8, nonce: u64, chain_id: Option<u64>) -> String {
    let signing_key = SigningKey::from_slice(&[key; 32]).unwrap();
    let fields = |s: &mut RlpStream| {
        s.append(&nonce);
        s.append(&1_000_000_000u64);
        s.append(&21_000u64);
        s.append(&vec![0xdeu8; 20]);
        s.append(&1u64);
        s.append_empty_data();
    };
    let mut unsigned = RlpStream::new_list(if chain_id.is_some() { 9 } else { 6 });
    fields(&mut unsigned);
    if let Some(id) = chain_id {
        unsigned.append(&id);
        unsigned.append_empty_data();
        unsigned.append_empty_data();
    }
    let hash = nonce_relay::signature::keccak256(&unsigned.out());
    let (signature, recid) = signing_key.sign_prehash_recoverable(&hash).unwrap();
    let (signature, recid) = match signature.normalize_s() {
        Some(low) => (low, recid.is_y_odd() ^ true),
        None => (signature, recid.is_y_odd()),
    };
    let v = match chain_id {
        Some(id) => id * 2 + 35 + u64::from(recid),
        None => 27 + u64::from(recid),
    };
    let bytes = signature.to_bytes();
    let strip = |b: &[u8]| {
        b.iter()
            .skip_while(|x| **x == 0)
            .copied()
            .collect::<Vec<u8>>()
    };
    let mut signed = RlpStream::new_list(9);
    fields(&mut signed);
    signed.append(&v);
    signed.append(&strip(&bytes[..32]));
    signed.append(&strip(&bytes[32..]));
    let raw = signed.out().to_vec();
    // The decoder must recover this key's address.
    let point = signing_key.verifying_key().to_encoded_point(false);
    let address = &nonce_relay::signature::keccak256(&point.as_bytes()[1..])[12..];
    let tx = nonce_relay::transaction::decode(&raw).unwrap();
    assert_eq!(tx.sender.0, address);
    assert_eq!((tx.chain_id, tx.nonce), (chain_id, nonce));
    nonce_relay::hex::encode(&raw)
}

fn send(id: Value, raw: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "eth_sendRawTransaction", "params": [raw]})
}

fn handle(
    config: &Config,
    backend: &Recorder,
    cache: &Rc<ChainIdCache>,
    body: &Value,
) -> Option<Value> {
    let reply = block_on(Relay::new(config, backend, cache).handle(body.to_string().as_bytes()));
    reply.body.map(|b| serde_json::from_str(&b).unwrap())
}

#[test]
fn a_batch_keeps_order_and_ids_and_a_senders_transactions_go_in_batch_order() {
    let (config, backend, cache) = (
        config(&[("CHAIN_ID", "31337")]),
        Recorder::default(),
        Rc::new(ChainIdCache::new()),
    );
    let body = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []},
        send(json!(2), &legacy(7, 0, Some(31337))),
        send(json!("x"), "0x1234"),
        send(json!(3), &legacy(8, 0, Some(31337))),
        send(json!(4), &legacy(7, 1, Some(31337))),
        send(json!(5), &legacy(7, 2, Some(31337))),
    ]);
    let answers = handle(&config, &backend, &cache, &body).unwrap();
    let ids: Vec<Value> = answers
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].clone())
        .collect();
    assert_eq!(
        ids,
        [json!(1), json!(2), json!("x"), json!(3), json!(4), json!(5)]
    );
    assert_eq!(answers[2]["error"]["code"], -32602);
    let locked = backend.locked.borrow();
    let seven: Vec<u64> = locked
        .iter()
        .filter(|(s, _)| *s == locked[0].0)
        .map(|(_, n)| *n)
        .collect();
    assert_eq!(seven, [0, 1, 2], "one sender's transactions in batch order");
    assert_eq!(locked.len(), 4);
    assert_eq!(
        backend.upstream.borrow().len(),
        5,
        "the invalid member reached nothing"
    );
}

#[test]
fn fail_open_forwards_directly_and_logs_once_without_the_upstream_url() {
    let (config, cache) = (
        config(&[("CHAIN_ID", "31337")]),
        Rc::new(ChainIdCache::new()),
    );
    let backend = Recorder {
        lock_unreachable: true,
        ..Recorder::default()
    };
    let raw = legacy(9, 4, Some(31337));
    let answer = handle(&config, &backend, &cache, &send(json!(1), &raw)).unwrap();
    assert_eq!(answer["result"], "0xhash");
    assert_eq!(backend.upstream.borrow()[0]["params"][0], raw);
    let logs = backend.logs.borrow();
    assert_eq!(logs.len(), 1);
    let tx = nonce_relay::transaction::decode(&nonce_relay::hex::decode(&raw).unwrap()).unwrap();
    assert_eq!(logs[0]["event"], "fail_open");
    assert_eq!(logs[0]["sender"], tx.sender.to_string());
    assert_eq!(logs[0]["tx_hash"], nonce_relay::hex::encode(&tx.hash));
    assert_eq!(logs[0]["nonce"], 4);
    let error = logs[0]["error"].as_str().unwrap();
    assert!(
        error.contains("overloaded") && !error.contains("10.9.9.9") && !error.contains("secret"),
        "{error}"
    );
}

#[test]
fn the_chain_id_is_learned_once_and_enforced() {
    let (config, backend, cache) = (
        config(&[]),
        Recorder::default(),
        Rc::new(ChainIdCache::new()),
    );
    let ok = handle(
        &config,
        &backend,
        &cache,
        &send(json!(1), &legacy(7, 0, Some(31337))),
    )
    .unwrap();
    assert_eq!(ok["result"], "0xhash");
    let wrong = handle(
        &config,
        &backend,
        &cache,
        &send(json!(2), &legacy(7, 1, Some(1))),
    )
    .unwrap();
    assert_eq!(wrong["error"]["code"], -32000);
    assert_eq!(
        wrong["error"]["message"],
        "invalid chain id for signer: have 1 want 31337"
    );
    let asked: Vec<Value> = backend
        .upstream
        .borrow()
        .iter()
        .map(|r| r["method"].clone())
        .collect();
    assert_eq!(
        asked,
        [json!("eth_chainId"), json!("eth_sendRawTransaction")]
    );
    assert_eq!(cache.known(), Some(31337));
}

#[test]
fn unprotected_transactions_only_when_allowed() {
    let raw = legacy(7, 0, None);
    let (backend, cache) = (Recorder::default(), Rc::new(ChainIdCache::new()));
    let refused = handle(
        &config(&[("CHAIN_ID", "31337")]),
        &backend,
        &cache,
        &send(json!(1), &raw),
    )
    .unwrap();
    assert_eq!(refused["error"]["code"], -32000);
    assert!(backend.upstream.borrow().is_empty());
    let allowed = config(&[("CHAIN_ID", "31337"), ("ALLOW_UNPROTECTED_TXS", "true")]);
    let answer = handle(&allowed, &backend, &cache, &send(json!(1), &raw)).unwrap();
    assert_eq!(answer["result"], "0xhash");
}

#[test]
fn ordering_off_skips_the_locks_and_notifications_get_no_answer() {
    let config = config(&[("CHAIN_ID", "31337"), ("ENABLE_NONCE_ORDERING", "false")]);
    let (backend, cache) = (Recorder::default(), Rc::new(ChainIdCache::new()));
    let answer = handle(
        &config,
        &backend,
        &cache,
        &send(json!(1), &legacy(7, 0, Some(31337))),
    )
    .unwrap();
    assert_eq!(answer["result"], "0xhash");
    assert!(backend.locked.borrow().is_empty());
    let notification = json!({"jsonrpc": "2.0", "method": "eth_sendRawTransaction", "params": [legacy(7, 1, Some(31337))]});
    assert_eq!(handle(&config, &backend, &cache, &notification), None);
    assert_eq!(
        backend.upstream.borrow().len(),
        2,
        "a notification is still forwarded"
    );
}
