//! The relay's request semantics (src/relay/), natively, over a recording platform backend:
//! what reaches the upstream and the sender locks, in which order, and what the client gets.
//! The end-to-end tests (tests/relay.test.mjs) run the same code compiled to wasm on workerd.

use k256::ecdsa::SigningKey;
use nonce_relay::address::Address;
use nonce_relay::chain_id::ChainIdCache;
use nonce_relay::config::Config;
use nonce_relay::jsonrpc::Answer;
use nonce_relay::metrics::Metric;
use nonce_relay::ordering::tx::SignedTx;
use nonce_relay::relay::wire::WireAnswer;
use nonce_relay::relay::{Backend, ObjectError, Relay};
use nonce_relay::transaction::TxHash;
use nonce_relay::upstream::Platform;
use nonce_relay::upstream::{CallKind, UpstreamError, UpstreamReply};
use rlp::RlpStream;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::collections::VecDeque;
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
    /// One entry per call to a sender's object: the sender and how many transactions it carried.
    calls: RefCell<Vec<(String, usize)>>,
    logs: RefCell<Vec<Value>>,
    lock_unreachable: bool,
    /// What `eth_sendRawTransaction` answers (default: a result).
    send_answer: Option<Value>,
    /// What the objects answer for the pending count (`None`: they can't be reached).
    pending_count: Option<u64>,
    /// What `eth_getTransactionByHash` answers (default: null).
    by_hash: Option<Value>,
    /// Errors the object calls meet first, in order.
    object_errors: RefCell<VecDeque<ObjectError>>,
    /// The backoff waited between object calls, ms.
    slept: RefCell<Vec<u64>>,
    /// The rate limits: (sends, reads) allowed in all; `None`: no limits.
    limits: Option<(usize, usize)>,
    /// What was counted against them.
    counted: RefCell<(usize, usize)>,
    /// Every transaction handed to a sender's object, as the object got it.
    handed: RefCell<Vec<SignedTx>>,
    /// The cancels handed to a sender's object: the sender and the hash.
    cancels: RefCell<Vec<(String, TxHash)>>,
    /// What the route's status answers (`None`: it can't be reached).
    route_status: Option<Value>,
}

impl Platform for Recorder {
    async fn post(
        &self,
        body: &str,
        _kind: CallKind,
        _timeout_ms: u64,
    ) -> Result<UpstreamReply, UpstreamError> {
        let req: Value = serde_json::from_str(body).unwrap();
        self.upstream.borrow_mut().push(req.clone());
        let answer = match req["method"].as_str().unwrap() {
            "eth_chainId" => json!({"result": "0x7a69"}),
            "eth_sendRawTransaction" => self
                .send_answer
                .clone()
                .unwrap_or(json!({"result": "0xhash"})),
            "eth_getTransactionCount" => json!({"result": "0x5"}),
            "eth_getTransactionByHash" => json!({"result": self.by_hash.clone()}),
            _ => json!({"result": "0x1"}),
        };
        let mut answer = answer.as_object().unwrap().clone();
        answer.insert("jsonrpc".into(), json!("2.0"));
        answer.insert("id".into(), req["id"].clone());
        Ok(UpstreamReply::ok(Value::Object(answer).to_string()))
    }

    async fn get_status(
        &self,
        _hash: &TxHash,
        _timeout_ms: u64,
    ) -> Result<UpstreamReply, UpstreamError> {
        match &self.route_status {
            Some(status) => Ok(UpstreamReply::ok(status.to_string())),
            None => Err(UpstreamError::Unreachable("no status URL".into())),
        }
    }

    async fn sleep(&self, ms: u64) {
        self.slept.borrow_mut().push(ms);
    }

    fn now_ms(&self) -> u64 {
        0
    }

    fn random(&self) -> f64 {
        0.5
    }

    fn emit(&self, metric: &Metric) {
        self.logs
            .borrow_mut()
            .push(serde_json::from_str(&metric.log_line()).unwrap());
    }
}

impl Backend for Recorder {
    async fn send_in_order(
        &self,
        sender: &Address,
        _chain_id: Option<u64>,
        txs: &[&SignedTx],
    ) -> Result<Vec<WireAnswer>, ObjectError> {
        self.calls
            .borrow_mut()
            .push((sender.to_string(), txs.len()));
        if let Some(error) = self.object_errors.borrow_mut().pop_front() {
            return Err(error);
        }
        if self.lock_unreachable {
            return Err(ObjectError::Failed(
                "Durable Object threw (via http://10.9.9.9/upstream-secret)".into(),
            ));
        }
        let mut answers = Vec::new();
        for tx in txs {
            self.handed.borrow_mut().push((*tx).clone());
            self.locked
                .borrow_mut()
                .push((sender.to_string(), tx.nonce));
            let reply = self
                .post(&tx.request(), CallKind::Send, 1_000)
                .await
                .map_err(|e| ObjectError::Failed(e.to_string()))?;
            answers.push(WireAnswer::plain(Answer::parse(&reply.body).unwrap()));
        }
        Ok(answers)
    }

    async fn tx_status(
        &self,
        _sender: &Address,
        _hash: &[u8; 32],
    ) -> Result<Option<String>, ObjectError> {
        Ok(None)
    }

    async fn cancel_private(
        &self,
        sender: &Address,
        hash: &TxHash,
    ) -> Result<WireAnswer, ObjectError> {
        self.cancels.borrow_mut().push((sender.to_string(), *hash));
        Ok(WireAnswer::plain(Answer::Result("true".into())))
    }

    async fn pending_count(&self, _sender: &Address) -> Result<WireAnswer, ObjectError> {
        match self.pending_count {
            Some(n) => Ok(WireAnswer::plain(Answer::Result(format!("\"0x{n:x}\"")))),
            None => Err(ObjectError::Failed("unreachable".into())),
        }
    }

    async fn over_rate_limit(&self, sends: usize, reads: usize) -> bool {
        let mut counted = self.counted.borrow_mut();
        counted.0 += sends;
        counted.1 += reads;
        // Like the bindings: a body is over when a limit it counts against is exceeded.
        self.limits
            .is_some_and(|(s, r)| (sends > 0 && counted.0 > s) || (reads > 0 && counted.1 > r))
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
    legacy_with_gas(key, nonce, chain_id, 21_000)
}

/// [`legacy`] with gas limit `gas`.
fn legacy_with_gas(key: u8, nonce: u64, chain_id: Option<u64>, gas: u64) -> String {
    let signing_key = SigningKey::from_slice(&[key; 32]).unwrap();
    let fields = |s: &mut RlpStream| {
        s.append(&nonce);
        s.append(&1_000_000_000u64);
        s.append(&gas);
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
    reply
        .body
        .map(|b| serde_json::from_str(&b.render()).unwrap())
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
    let calls = backend.calls.borrow();
    assert_eq!(
        calls.iter().map(|(_, n)| *n).collect::<Vec<_>>(),
        [3, 1],
        "one call per sender, with all its transactions"
    );
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
    let logs: Vec<Value> = backend
        .logs
        .borrow()
        .iter()
        .filter(|l| l["event"] == "fail_open")
        .cloned()
        .collect();
    assert_eq!(logs.len(), 1);
    let tx = nonce_relay::transaction::decode(&nonce_relay::hex::decode(&raw).unwrap()).unwrap();
    assert_eq!(logs[0]["event"], "fail_open");
    assert_eq!(logs[0]["sender"], tx.sender.to_string());
    assert_eq!(logs[0]["tx_hash"], nonce_relay::hex::encode(&tx.hash));
    assert_eq!(logs[0]["nonce"], 4);
    let error = logs[0]["error"].as_str().unwrap();
    assert!(
        error.contains("threw") && !error.contains("10.9.9.9") && !error.contains("secret"),
        "{error}"
    );
}

#[test]
fn fail_open_sends_a_batchs_transactions_in_nonce_order_and_maps_already_known() {
    let (config, cache) = (
        config(&[("CHAIN_ID", "31337")]),
        Rc::new(ChainIdCache::new()),
    );
    let backend = Recorder {
        lock_unreachable: true,
        send_answer: Some(json!({"error": {"code": -32000, "message": "already known"}})),
        ..Recorder::default()
    };
    let raws: Vec<String> = [2, 0, 1]
        .iter()
        .map(|&n| legacy(9, n, Some(31337)))
        .collect();
    let body = Value::Array(
        raws.iter()
            .enumerate()
            .map(|(i, raw)| send(json!(i), raw))
            .collect(),
    );
    let answers = handle(&config, &backend, &cache, &body).unwrap();
    let sent: Vec<String> = backend
        .upstream
        .borrow()
        .iter()
        .map(|r| r["params"][0].as_str().unwrap().to_string())
        .collect();
    assert_eq!(sent, [raws[1].clone(), raws[2].clone(), raws[0].clone()]);
    for (i, raw) in raws.iter().enumerate() {
        let tx = nonce_relay::transaction::decode(&nonce_relay::hex::decode(raw).unwrap()).unwrap();
        assert_eq!(answers[i]["id"], i);
        assert_eq!(
            answers[i]["result"],
            nonce_relay::hex::encode(&tx.hash),
            "already known is the hash"
        );
    }
    let fail_open = backend
        .logs
        .borrow()
        .iter()
        .filter(|l| l["event"] == "fail_open")
        .count();
    assert_eq!(fail_open, 3, "one fail_open each");
}

#[test]
fn the_pending_count_is_the_sender_s_objects_answer_or_the_upstreams_when_it_cant_be_reached() {
    let config = config(&[("CHAIN_ID", "31337")]);
    let cache = Rc::new(ChainIdCache::new());
    let ask = |backend: &Recorder, tag: &str| {
        let body = json!({"jsonrpc": "2.0", "id": 4, "method": "eth_getTransactionCount",
                          "params": ["0xF39Fd6e51aad88F6F4ce6aB8827279cffFb92266", tag]});
        handle(&config, backend, &cache, &body).unwrap()
    };
    // The upstream says 5; the object (which asked it too) 9.
    let object = Recorder {
        pending_count: Some(9),
        ..Recorder::default()
    };
    assert_eq!(
        ask(&object, "pending"),
        json!({"jsonrpc": "2.0", "id": 4, "result": "0x9"})
    );
    assert!(
        object.upstream.borrow().is_empty(),
        "the object asked, not the Worker"
    );
    assert_eq!(
        ask(&object, "latest")["result"],
        "0x5",
        "other tags are the upstream's"
    );
    let unreachable = Recorder::default();
    assert_eq!(ask(&unreachable, "pending")["result"], "0x5");
}

#[test]
fn object_calls_the_runtime_marks_retryable_are_made_again_and_an_overloaded_object_gets_32005() {
    let (config, cache) = (
        config(&[("CHAIN_ID", "31337")]),
        Rc::new(ChainIdCache::new()),
    );
    let raw = legacy(9, 0, Some(31337));
    let backend = Recorder::default();
    backend.object_errors.borrow_mut().extend([
        ObjectError::Retryable("Durable Object reset because its code was updated.".into()),
        ObjectError::Retryable("Network connection lost.".into()),
    ]);
    let answer = handle(&config, &backend, &cache, &send(json!(1), &raw)).unwrap();
    assert_eq!(answer["result"], "0xhash");
    assert_eq!(backend.calls.borrow().len(), 3, "two retries on a new stub");
    assert_eq!(backend.slept.borrow().len(), 2, "with backoff");
    assert_eq!(backend.locked.borrow().len(), 1, "one send in the end");
    let labels: Vec<Value> = backend
        .logs
        .borrow()
        .iter()
        .filter(|l| l["event"] == "object_error")
        .map(|l| l["label"].clone())
        .collect();
    assert_eq!(labels, [json!("retryable"), json!("retryable")]);

    let overloaded = Recorder::default();
    overloaded
        .object_errors
        .borrow_mut()
        .push_back(ObjectError::Overloaded(
            "Durable Object is overloaded.".into(),
        ));
    let reply = block_on(
        Relay::new(&config, &overloaded, &cache)
            .handle(send(json!(2), &raw).to_string().as_bytes()),
    );
    let answer: Value = serde_json::from_str(&reply.body.unwrap().render()).unwrap();
    assert_eq!(answer["error"]["code"], -32005);
    assert_eq!(reply.retry_after_s, Some(1));
    assert!(
        overloaded.upstream.borrow().is_empty(),
        "no fail-open under load"
    );
    assert_eq!(
        overloaded.calls.borrow().len(),
        1,
        "an overloaded object is not called again"
    );
}

#[test]
fn methods_that_use_the_nodes_keys_or_administration_are_refused_and_go_nowhere() {
    let (backend, cache) = (Recorder::default(), Rc::new(ChainIdCache::new()));
    let body = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "admin_peers", "params": []},
        {"jsonrpc": "2.0", "id": 2, "method": "eth_sendTransaction", "params": [{}]},
        {"jsonrpc": "2.0", "id": 3, "method": "eth_blockNumber", "params": []},
        {"jsonrpc": "2.0", "id": 4, "method": "txpool_status", "params": []},
    ]);
    let allowing = config(&[("CHAIN_ID", "31337"), ("METHOD_ALLOWLIST", "txpool_status")]);
    let answers = handle(&allowing, &backend, &cache, &body).unwrap();
    assert_eq!(
        answers[0]["error"],
        json!({"code": -32601, "message": "method not allowed: admin_peers"})
    );
    assert_eq!(answers[1]["error"]["code"], -32601);
    assert_eq!(answers[2]["result"], "0x1");
    assert_eq!(answers[3]["result"], "0x1");
    let methods: Vec<Value> = backend
        .upstream
        .borrow()
        .iter()
        .map(|r| r["method"].clone())
        .collect();
    assert_eq!(methods, [json!("eth_blockNumber"), json!("txpool_status")]);
}

#[test]
fn over_a_rate_limit_the_whole_body_gets_429_and_nothing_goes_on() {
    let config = config(&[("CHAIN_ID", "31337"), ("RATE_LIMIT_PERIOD_S", "10")]);
    let cache = Rc::new(ChainIdCache::new());
    let backend = Recorder {
        limits: Some((1, 5)),
        ..Recorder::default()
    };
    let sends = json!([
        send(json!(1), &legacy(7, 0, Some(31337))),
        send(json!(2), &legacy(7, 1, Some(31337))),
        {"jsonrpc": "2.0", "id": 3, "method": "eth_blockNumber"},
    ]);
    let reply =
        block_on(Relay::new(&config, &backend, &cache).handle(sends.to_string().as_bytes()));
    assert_eq!((reply.status, reply.retry_after_s), (429, Some(10)));
    let answers: Value = serde_json::from_str(&reply.body.unwrap().render()).unwrap();
    assert_eq!(
        answers.as_array().unwrap().len(),
        3,
        "each member counted and answered"
    );
    for (i, a) in answers.as_array().unwrap().iter().enumerate() {
        assert_eq!(a["id"], i + 1);
        assert_eq!(
            a["error"],
            json!({"code": -32005, "message": "rate limit exceeded"})
        );
    }
    assert!(backend.upstream.borrow().is_empty() && backend.locked.borrow().is_empty());
    assert_eq!(*backend.counted.borrow(), (2, 1));
    // Reads have their own limit: a read still goes.
    let read = json!({"jsonrpc": "2.0", "id": 9, "method": "eth_blockNumber"});
    let reply = block_on(Relay::new(&config, &backend, &cache).handle(read.to_string().as_bytes()));
    assert_eq!(reply.status, 200);
    let fresh = Recorder {
        limits: Some((1, 5)),
        ..Recorder::default()
    };
    let reply = block_on(Relay::new(&config, &fresh, &cache).handle(read.to_string().as_bytes()));
    assert_eq!((reply.status, reply.retry_after_s), (200, None));
    let garbage = block_on(Relay::new(&config, &fresh, &cache).handle(b"{nope"));
    assert_eq!(garbage.status, 200, "a parse error counts as one read");
    assert_eq!(*fresh.counted.borrow(), (0, 2));
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
fn a_transaction_that_breaks_the_fork_rules_reaches_neither_the_object_nor_the_upstream() {
    let raw = legacy_with_gas(7, 0, Some(31337), 20_999);
    let (backend, cache) = (Recorder::default(), Rc::new(ChainIdCache::new()));
    let osaka = config(&[("CHAIN_ID", "31337")]);
    let refused = handle(&osaka, &backend, &cache, &send(json!(1), &raw)).unwrap();
    assert_eq!(
        refused["error"],
        json!({"code": -32000, "message": "intrinsic gas too low: gas 20999, minimum needed 21000"})
    );
    assert!(backend.upstream.borrow().is_empty() && backend.calls.borrow().is_empty());
    let logs = backend.logs.borrow();
    assert!(
        logs.iter()
            .any(|l| l["event"] == "tx_refused" && l["label"] == "intrinsic_gas"),
        "{logs:?}"
    );
    drop(logs);
    let none = config(&[("CHAIN_ID", "31337"), ("HARDFORK", "none")]);
    handle(&none, &backend, &cache, &send(json!(2), &raw)).unwrap();
    assert_eq!(
        backend.calls.borrow().len(),
        1,
        "HARDFORK=none: to the object"
    );
}

/// Behind a private route, `eth_sendRawTransactionConditional` is refused unsent (issue 41): no
/// route serves ERC-7796, and one may pass it to a public node. Without a route it goes on.
#[test]
fn a_conditional_send_behind_a_private_route_is_refused_and_goes_nowhere() {
    let raw = legacy(7, 0, Some(31337));
    let conditional = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_sendRawTransactionConditional", "params": [raw, {"blockNumberMax": "0x10"}]});
    let (backend, cache) = (Recorder::default(), Rc::new(ChainIdCache::new()));
    let private = config(&[
        ("CHAIN_ID", "31337"),
        ("UPSTREAM_SEND_URL", "https://route.example"),
    ]);
    let refused = handle(&private, &backend, &cache, &conditional).unwrap();
    assert_eq!(refused["error"]["code"], -32004, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("private route"),
        "{refused}"
    );
    assert!(backend.upstream.borrow().is_empty() && backend.calls.borrow().is_empty());
    let public = config(&[("CHAIN_ID", "31337")]);
    handle(&public, &backend, &cache, &conditional).unwrap();
    assert_eq!(
        backend.calls.borrow().len(),
        1,
        "without a route: to the object"
    );
}

/// Without a private route, `eth_sendPrivateTransaction` and `eth_cancelPrivateTransaction` are
/// refused (-32004) and reach nothing: a read node would publish the one (issue 41).
#[test]
fn private_send_methods_without_a_route_are_refused_and_reach_nothing() {
    let raw = legacy(7, 0, Some(31337));
    let hash = format!("0x{}", "ab".repeat(32));
    let (backend, cache) = (Recorder::default(), Rc::new(ChainIdCache::new()));
    let public = config(&[("CHAIN_ID", "31337")]);
    let body = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "eth_sendPrivateTransaction", "params": [{"tx": raw}]},
        {"jsonrpc": "2.0", "id": 2, "method": "eth_cancelPrivateTransaction", "params": [{"txHash": hash}]},
    ]);
    let answers = handle(&public, &backend, &cache, &body).unwrap();
    for answer in answers.as_array().unwrap() {
        assert_eq!(answer["error"]["code"], -32004, "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("needs a private route"),
            "{answer}"
        );
    }
    assert!(
        backend.upstream.borrow().is_empty(),
        "nothing reached the read node"
    );
    assert!(backend.calls.borrow().is_empty() && backend.cancels.borrow().is_empty());
}

/// Behind a private route, `eth_sendPrivateTransaction` goes to its sender's object as that
/// method, with its `maxBlockNumber` and `preferences` (unknown members left out); the client's
/// opt-in to the public mempool (`?public_after_blocks=N`) is capped by the operator's
/// `SEND_PUBLIC_AFTER_BLOCKS`, and the answer's header says it (`never` without it).
#[test]
fn private_sends_carry_their_terms_and_the_answer_says_whether_they_may_go_public() {
    let raw = legacy(7, 0, Some(31337));
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_sendPrivateTransaction",
        "params": [{"tx": raw, "maxBlockNumber": "0x20", "preferences": {"fast": true}, "other": 1}]});
    let (backend, cache) = (Recorder::default(), Rc::new(ChainIdCache::new()));
    let private = config(&[
        ("CHAIN_ID", "31337"),
        ("UPSTREAM_SEND_URL", "https://route.example"),
        ("SEND_PUBLIC_AFTER_BLOCKS", "5"),
    ]);
    let reply = |opt_in: Option<u64>, body: &Value| {
        block_on(
            Relay::new(&private, &backend, &cache)
                .with_opt_in(opt_in)
                .handle(body.to_string().as_bytes()),
        )
    };
    let without = reply(None, &body);
    assert_eq!(without.public_after.as_deref(), Some("never"));
    let sent = backend.upstream.borrow().last().cloned().unwrap();
    assert_eq!(sent["method"], "eth_sendPrivateTransaction");
    assert_eq!(
        sent["params"],
        json!([{"tx": raw, "maxBlockNumber": "0x20", "preferences": {"fast": true}}])
    );
    assert_eq!(
        backend.handed.borrow()[0].terms().max_block_number,
        Some(32)
    );
    assert_eq!(backend.handed.borrow()[0].public_after_blocks, None);
    // Bounded by a maxBlockNumber: never published, whatever the opt-in.
    assert_eq!(reply(Some(3), &body).public_after.as_deref(), Some("never"));
    assert_eq!(backend.handed.borrow()[1].public_after_blocks, None);
    let unbounded = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_sendPrivateTransaction",
        "params": [{"tx": raw}]});
    assert_eq!(
        reply(Some(3), &unbounded).public_after.as_deref(),
        Some("3")
    );
    assert_eq!(backend.handed.borrow()[2].public_after_blocks, Some(3));
    assert_eq!(
        reply(Some(30), &unbounded).public_after.as_deref(),
        Some("5")
    );
    assert_eq!(backend.handed.borrow()[3].public_after_blocks, Some(5));
    // A read says nothing of publishing.
    let read = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []});
    assert_eq!(reply(Some(3), &read).public_after, None);
    // Bad params: -32602, nothing sent.
    let before = backend.handed.borrow().len();
    let bad = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_sendPrivateTransaction",
        "params": [{"tx": raw, "maxBlockNumber": "soon"}]});
    let refused: Value = serde_json::from_str(&reply(None, &bad).body.unwrap().render()).unwrap();
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(backend.handed.borrow().len(), before);
    // An operator that allows no publishing: never, whatever the client asks.
    let strict = config(&[
        ("CHAIN_ID", "31337"),
        ("UPSTREAM_SEND_URL", "https://route.example"),
    ]);
    let never = block_on(
        Relay::new(&strict, &backend, &cache)
            .with_opt_in(Some(3))
            .handle(body.to_string().as_bytes()),
    );
    assert_eq!(never.public_after.as_deref(), Some("never"));
    assert_eq!(
        backend.handed.borrow().last().unwrap().public_after_blocks,
        None
    );
}

/// `eth_cancelPrivateTransaction` goes to the object of the sender the route's status names
/// (Flashbots Protect's `transaction.from`), and its answer comes back.
#[test]
fn a_private_cancel_goes_to_the_sender_the_route_names() {
    let sender = "0x00000000000000000000000000000000000000aa";
    let hash = format!("0x{}", "ab".repeat(32));
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "eth_cancelPrivateTransaction", "params": [{"txHash": hash}]});
    let private = config(&[
        ("CHAIN_ID", "31337"),
        ("UPSTREAM_SEND_URL", "https://route.example"),
        ("SEND_STATUS_URL", "https://route.example/tx/{hash}"),
    ]);
    let cache = Rc::new(ChainIdCache::new());
    let backend = Recorder {
        route_status: Some(json!({"status": "PENDING", "transaction": {"from": sender}})),
        ..Recorder::default()
    };
    let answer = handle(&private, &backend, &cache, &body).unwrap();
    assert_eq!(answer, json!({"jsonrpc": "2.0", "id": 9, "result": true}));
    assert_eq!(
        backend.cancels.borrow().as_slice(),
        [(sender.to_string(), [0xab; 32])]
    );
    // Neither the route nor the read node names it: -32000, nothing cancelled.
    let backend = Recorder {
        route_status: Some(json!({"status": "UNKNOWN"})),
        ..Recorder::default()
    };
    let unknown = handle(&private, &backend, &cache, &body).unwrap();
    assert_eq!(unknown["error"]["code"], -32000, "{unknown}");
    assert!(backend.cancels.borrow().is_empty());
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

// ---------------------------------------------------------------------------------------------
// Any request body: the relay answers in JSON-RPC 2.0 and forwards only transactions that alloy
// (the independent decoder of tests/differential.rs) also accepts for chain 31337.

mod any_body {
    use super::*;
    use alloy_consensus::transaction::SignerRecoverable;
    use alloy_consensus::{Transaction as _, TxEnvelope};
    use alloy_eips::eip2718::Decodable2718;
    use proptest::prelude::*;

    /// A raw transaction param: valid, mutated (truncated, a byte changed, a byte added), on
    /// another chain, unprotected, or not a transaction at all.
    fn raw_param() -> BoxedStrategy<Value> {
        let valid = (1u8..=8, 0u64..4).prop_map(|(key, nonce)| legacy(key, nonce, Some(31337)));
        prop_oneof![
            4 => valid.clone().prop_map(Value::from),
            3 => (valid.clone(), any::<prop::sample::Index>(), any::<u8>(), 0u8..3).prop_map(
                |(raw, at, byte, how)| {
                    let mut bytes = nonce_relay::hex::decode(&raw).unwrap();
                    let i = at.index(bytes.len());
                    match how {
                        0 => bytes.truncate(i),
                        1 => bytes[i] ^= byte.max(1),
                        _ => bytes.insert(i, byte),
                    }
                    Value::from(nonce_relay::hex::encode(&bytes))
                }
            ),
            1 => Just(Value::from(legacy(3, 0, Some(1)))),
            1 => Just(Value::from(legacy(3, 0, None))),
            1 => prop::collection::vec(any::<u8>(), 0..64)
                .prop_map(|b| Value::from(nonce_relay::hex::encode(&b))),
            1 => prop_oneof![
                Just(json!("0x")),
                Just(json!("0x0")),
                Just(json!("f86b")),
                Just(json!("0xzz")),
                Just(json!(12)),
                Just(Value::Null),
                Just(json!({"raw": "0x01"})),
                "\\PC{0,12}".prop_map(Value::from),
            ],
        ]
        .boxed()
    }

    fn id() -> BoxedStrategy<Option<Value>> {
        prop_oneof![
            Just(None),
            any::<i64>().prop_map(|n| Some(json!(n))),
            "[a-z0-9]{0,6}".prop_map(|s| Some(json!(s))),
            Just(Some(Value::Null)),
            Just(Some(json!(1.5))),
            Just(Some(json!({"id": 1}))),
            Just(Some(json!([1]))),
        ]
        .boxed()
    }

    fn member() -> BoxedStrategy<Value> {
        let method = prop_oneof![
            6 => Just(json!("eth_sendRawTransaction")),
            1 => Just(json!("eth_blockNumber")),
            1 => Just(json!("")),
            1 => Just(json!(7)),
            1 => Just(Value::Null),
        ];
        let params = prop_oneof![
            6 => raw_param().prop_map(|p| Some(json!([p]))),
            1 => Just(Some(json!([]))),
            1 => (raw_param(), raw_param()).prop_map(|(a, b)| Some(json!([a, b]))),
            1 => raw_param().prop_map(Some),
            1 => Just(None),
        ];
        let version = prop_oneof![
            8 => Just(Some(json!("2.0"))),
            1 => Just(Some(json!("1.0"))),
            1 => Just(None),
        ];
        prop_oneof![
            12 => (version, id(), method, params).prop_map(|(v, id, m, p)| {
                let mut o = serde_json::Map::new();
                v.map(|v| o.insert("jsonrpc".into(), v));
                id.map(|id| o.insert("id".into(), id));
                o.insert("method".into(), m);
                p.map(|p| o.insert("params".into(), p));
                Value::Object(o)
            }),
            1 => Just(json!(1)),
            1 => Just(json!([])),
            1 => Just(json!("eth_sendRawTransaction")),
        ]
        .boxed()
    }

    /// A body: one request, a batch (0 to 6 members), or bytes that may not be JSON at all.
    fn body() -> BoxedStrategy<Vec<u8>> {
        prop_oneof![
            4 => member().prop_map(|m| m.to_string().into_bytes()),
            4 => prop::collection::vec(member(), 0..7)
                .prop_map(|ms| Value::Array(ms).to_string().into_bytes()),
            1 => (member(), any::<prop::sample::Index>()).prop_map(|(m, at)| {
                let text = m.to_string().into_bytes();
                text[..at.index(text.len() + 1)].to_vec()
            }),
            1 => prop::collection::vec(any::<u8>(), 0..40),
        ]
        .boxed()
    }

    /// One answer: JSON-RPC 2.0 with exactly one of `result` and `error` (an integer code and a
    /// message).
    fn check_answer(answer: &Value) -> Result<(), String> {
        let ok = answer["jsonrpc"] == "2.0"
            && answer.get("id").is_some()
            && match (answer.get("result"), answer.get("error")) {
                (Some(_), None) => true,
                (None, Some(e)) => e["code"].is_i64() && e["message"].is_string(),
                _ => false,
            };
        if ok {
            Ok(())
        } else {
            Err(format!("not a JSON-RPC 2.0 answer: {answer}"))
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

        #[test]
        fn any_body_gets_json_rpc_answers_and_only_valid_transactions_go_on(body in body()) {
            let (config, backend, cache) = (
                config(&[("CHAIN_ID", "31337")]),
                Recorder::default(),
                Rc::new(ChainIdCache::new()),
            );
            let reply = block_on(Relay::new(&config, &backend, &cache).handle(&body));
            if let Some(text) = reply.body.map(|b| b.render()) {
                let value: Value = serde_json::from_str(&text)
                    .map_err(|e| TestCaseError::fail(format!("answer is not JSON ({e}): {text}")))?;
                match &value {
                    Value::Array(answers) => {
                        prop_assert!(!answers.is_empty(), "an empty batch answer");
                        for a in answers {
                            check_answer(a).map_err(TestCaseError::fail)?;
                        }
                    }
                    single => check_answer(single).map_err(TestCaseError::fail)?,
                }
            } else {
                prop_assert_eq!(reply.status, 204);
            }
            // Every transaction that went on is one alloy decodes exactly, signed for 31337, and
            // it went through its sender's lock.
            let sent: Vec<Value> = backend
                .upstream
                .borrow()
                .iter()
                .filter(|r| r["method"] == "eth_sendRawTransaction")
                .cloned()
                .collect();
            prop_assert_eq!(sent.len(), backend.locked.borrow().len(), "each went through a lock");
            for (request, (sender, nonce)) in sent.iter().zip(backend.locked.borrow().iter()) {
                let raw = nonce_relay::hex::decode(request["params"][0].as_str().unwrap()).unwrap();
                let envelope = TxEnvelope::decode_2718_exact(&raw)
                    .map_err(|e| TestCaseError::fail(format!("forwarded, alloy refuses: {e}")))?;
                prop_assert_eq!(envelope.chain_id(), Some(31337));
                prop_assert_eq!(envelope.nonce(), *nonce);
                let signer = envelope.recover_signer()
                    .map_err(|e| TestCaseError::fail(format!("forwarded, alloy can't recover: {e}")))?;
                prop_assert_eq!(format!("{signer:#x}"), sender.clone());
            }
        }
    }
}

/// The connection's side of subscriptions in a WebSocket message: records what it was asked.
#[derive(Default)]
struct Subscriber {
    calls: RefCell<Vec<String>>,
}

impl nonce_relay::relay::socket::SubscriptionCalls for Subscriber {
    async fn call(&self, req: &nonce_relay::jsonrpc::Request) -> String {
        self.calls.borrow_mut().push(req.method.clone());
        json!({"jsonrpc": "2.0", "id": req.response_id(), "result": "0xsub"}).to_string()
    }
}

#[test]
fn a_websocket_message_answers_subscriptions_on_the_connection_and_the_rest_as_over_http() {
    let (config, cache) = (
        config(&[
            ("CHAIN_ID", "31337"),
            ("METHOD_DENYLIST", "eth_unsubscribe"),
        ]),
        Rc::new(ChainIdCache::new()),
    );
    let backend = Recorder {
        limits: Some((10, 5)),
        ..Recorder::default()
    };
    let subscriber = Subscriber::default();
    let message = |body: &Value| {
        block_on(
            Relay::new(&config, &backend, &cache)
                .handle_message(body.to_string().as_bytes(), &subscriber),
        )
        .map(|body| serde_json::from_str::<Value>(&body.render()).unwrap())
    };
    let batch = json!([
        {"jsonrpc": "2.0", "id": "s", "method": "eth_subscribe", "params": ["newHeads"]},
        send(json!("t"), &legacy(7, 0, Some(31337))),
        {"jsonrpc": "2.0", "method": "eth_blockNumber"},
        {"jsonrpc": "2.0", "id": "u", "method": "eth_unsubscribe", "params": ["0xsub"]},
        7,
    ]);
    let answers = message(&batch).unwrap();
    let ids: Vec<&Value> = answers
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["id"])
        .collect();
    assert_eq!(ids, [&json!("s"), &json!("t"), &json!("u"), &Value::Null]);
    assert_eq!(answers[0]["result"], "0xsub");
    assert_eq!(answers[1]["result"], "0xhash");
    assert_eq!(
        answers[2]["error"]["code"], -32601,
        "the method policy applies"
    );
    assert_eq!(answers[3]["error"]["code"], -32600);
    assert_eq!(*subscriber.calls.borrow(), ["eth_subscribe"]);
    // The transaction went through its sender's object; the subscription went nowhere upstream.
    assert_eq!(backend.locked.borrow().len(), 1);
    let upstream: Vec<String> = backend
        .upstream
        .borrow()
        .iter()
        .map(|r| r["method"].to_string())
        .collect();
    assert!(
        !upstream.iter().any(|m| m.contains("subscribe")),
        "{upstream:?}"
    );
    assert_eq!(
        *backend.counted.borrow(),
        (1, 4),
        "every member counted, subscriptions as reads"
    );
    // A single subscription, and a message without one: exactly what HTTP gives.
    let single = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_subscribe", "params": ["logs"]});
    assert_eq!(message(&single).unwrap()["result"], "0xsub");
    let notification = json!({"jsonrpc": "2.0", "method": "eth_subscribe", "params": ["logs"]});
    // Over the read limit now (5): the whole message is refused, nothing called.
    let refused = message(&json!([single, notification])).unwrap();
    assert_eq!(refused[0]["error"]["code"], -32005);
    assert_eq!(subscriber.calls.borrow().len(), 2);
    let fresh = Recorder::default();
    let read = json!({"jsonrpc": "2.0", "id": 2, "method": "eth_chainId"});
    let text = block_on(
        Relay::new(&config, &fresh, &cache)
            .handle_message(read.to_string().as_bytes(), &subscriber),
    );
    assert_eq!(
        serde_json::from_str::<Value>(&text.unwrap().render()).unwrap()["result"],
        "0x7a69"
    );
    let quiet = json!({"jsonrpc": "2.0", "method": "eth_chainId"});
    assert_eq!(
        block_on(
            Relay::new(&config, &fresh, &cache)
                .handle_message(quiet.to_string().as_bytes(), &subscriber)
        ),
        None
    );
}

#[test]
fn a_stored_request_is_sent_again_as_the_relay_reads_it_never_as_stored() {
    let raw = legacy(1, 0, Some(31337));
    let other = legacy(2, 0, Some(31337));
    let hash = nonce_relay::transaction::decode(&nonce_relay::hex::decode(&raw).unwrap())
        .unwrap()
        .hash;
    let stored = format!(
        r#"{{"id":1,"jsonrpc":"2.0","method":"eth_sendRawTransaction","params":["{raw}"],"x":1}}"#
    );
    assert_eq!(
        SignedTx::from_request_text(&stored, &hash)
            .unwrap()
            .request(),
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":["{raw}"]}}"#
        )
    );
    // A row an older release stored with the client's text: a Go node would read "Params".
    let ambiguous = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":["{raw}"],"Params":["{other}"]}}"#
    );
    assert!(SignedTx::from_request_text(&ambiguous, &hash).is_err());
    let wrong = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":["{other}"]}}"#
    );
    assert!(SignedTx::from_request_text(&wrong, &hash).is_err());
    let read = r#"{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[]}"#;
    assert!(SignedTx::from_request_text(read, &hash).is_err());
}

/// Issue 32, point 8: ids beyond 64 bits come back as the client wrote them on every path of a
/// body (a proxied read, whose upstream got the id as a string and echoed it so; a send answered
/// through the sender's object; a send refused locally; a method refused by the policy), single
/// and in a batch.
#[test]
fn ids_beyond_64_bits_come_back_exactly() {
    let (config, backend, cache) = (
        config(&[("CHAIN_ID", "31337")]),
        Recorder::default(),
        Rc::new(ChainIdCache::new()),
    );
    let raw = legacy(7, 0, Some(31337));
    let members = [
        (
            "12345678901234567890123",
            r#""method":"eth_blockNumber","params":[]"#.to_string(),
        ),
        (
            "12345678901234567890124",
            format!(r#""method":"eth_sendRawTransaction","params":["{raw}"]"#),
        ),
        (
            "1.25e30",
            r#""method":"eth_sendRawTransaction","params":["0x1234"]"#.to_string(),
        ),
        (
            "-12345678901234567890125",
            r#""method":"admin_peers","params":[]"#.to_string(),
        ),
    ];
    let texts: Vec<String> = members
        .iter()
        .map(|(id, rest)| format!(r#"{{"jsonrpc":"2.0","id":{id},{rest}}}"#))
        .collect();
    let run = |body: &str| {
        let reply = block_on(Relay::new(&config, &backend, &cache).handle(body.as_bytes()));
        reply.body.unwrap().render()
    };
    let batch = run(&format!("[{}]", texts.join(",")));
    for (id, _) in &members {
        assert!(batch.contains(&format!(r#""id":{id},"#)), "{id} in {batch}");
    }
    let single = run(&texts[0]);
    assert!(
        single.contains(r#""id":12345678901234567890123,"#),
        "{single}"
    );
    assert!(single.contains(r#""result":"0x1""#), "{single}");
    let upstream = backend.upstream.borrow();
    let read = upstream
        .iter()
        .find(|r| r["method"] == "eth_blockNumber")
        .unwrap();
    assert_eq!(
        read["id"],
        json!("12345678901234567890123"),
        "a node takes it"
    );
}

/// `GET /tx/{hash}` of a transaction its sender's object no longer remembers (it hibernated or
/// restarted after its check found it included, issue 52): answered from the upstream when the
/// transaction is in a block, unknown otherwise.
#[test]
fn a_status_the_object_forgot_is_answered_from_the_upstream_when_the_transaction_is_in_a_block() {
    let (config, cache) = (
        config(&[("CHAIN_ID", "31337")]),
        Rc::new(ChainIdCache::new()),
    );
    let hash = [0xab; 32];
    let from = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266";
    let mined = Recorder {
        by_hash: Some(json!({"from": from, "nonce": "0x7", "blockNumber": "0x10"})),
        ..Recorder::default()
    };
    let (code, body) = block_on(Relay::new(&config, &mined, &cache).tx_status(&hash, None));
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        (
            &body["status"],
            &body["block"],
            &body["nonce"],
            &body["known_by"]
        ),
        (
            &json!("included"),
            &json!(16),
            &json!(7),
            &json!("upstream")
        )
    );
    assert_eq!(body["sender"], from);
    let pending = Recorder {
        by_hash: Some(json!({"from": from, "nonce": "0x7", "blockNumber": null})),
        ..Recorder::default()
    };
    let (code, body) = block_on(Relay::new(&config, &pending, &cache).tx_status(&hash, None));
    assert_eq!(code, 404, "{body}");
    assert!(body.contains("\"unknown\""));
}

#[test]
fn a_keys_scope_refuses_each_member_out_of_it_and_the_rest_of_the_batch_goes_on() {
    use nonce_relay::access::keys::scope::Scope;
    let config = config(&[("CHAIN_ID", "31337"), ("ENABLE_NONCE_ORDERING", "false")]);
    let (backend, cache) = (Recorder::default(), Rc::new(ChainIdCache::new()));
    let (bot, stranger) = (legacy(7, 0, Some(31337)), legacy(8, 0, Some(31337)));
    let sender = |raw: &str| {
        let bytes = nonce_relay::hex::decode(raw).unwrap();
        nonce_relay::transaction::decode(&bytes).unwrap().sender
    };
    let contract: Address = format!("0x{}", "de".repeat(20)).parse().unwrap();
    let scope = Scope {
        methods: vec![
            "eth_call".into(),
            "eth_getBalance".into(),
            "eth_getLogs".into(),
            "eth_sendRawTransaction".into(),
        ],
        contracts: vec![contract],
        senders: vec![sender(&bot)],
        ..Scope::default()
    };
    let body = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "eth_call", "params": [{"to": contract.to_string()}, "latest"]},
        {"jsonrpc": "2.0", "id": 2, "method": "eth_getBalance", "params": [format!("0x{}", "ab".repeat(20)), "latest"]},
        {"jsonrpc": "2.0", "id": 3, "method": "eth_getLogs", "params": [{"fromBlock": "0x1"}]},
        send(json!(4), &bot),
        send(json!(5), &stranger),
        {"jsonrpc": "2.0", "id": 6, "method": "eth_blockNumber", "params": []},
    ]);
    let reply = block_on(
        Relay::new(&config, &backend, &cache)
            .with_key_scope(&scope)
            .handle(body.to_string().as_bytes()),
    );
    assert_eq!(reply.status, 200);
    let answers: Value = serde_json::from_str(&reply.body.unwrap().render()).unwrap();
    let scope_of = |i: usize| answers[i]["error"]["data"]["scope"].clone();
    assert_eq!(answers[0]["result"], "0x1");
    assert_eq!(
        (answers[1]["error"]["code"].clone(), scope_of(1)),
        (json!(-32002), json!("contracts"))
    );
    assert_eq!(scope_of(2), "contracts", "eth_getLogs without an address");
    assert!(answers[3]["result"].is_string(), "{}", answers[3]);
    assert_eq!(scope_of(4), "senders");
    assert_eq!(scope_of(5), "methods");
    let sent: Vec<String> = backend
        .upstream
        .borrow()
        .iter()
        .map(|r| r.to_string())
        .collect();
    assert_eq!(sent.len(), 2, "only the call and the bot's send: {sent:?}");
    // By their signatures' last bytes (the rest of two transfers is the same).
    let tail = |raw: &str| raw[raw.len() - 40..].to_string();
    assert!(sent.iter().any(|r| r.contains(&tail(&bot))));
    assert!(!sent.iter().any(|r| r.contains(&tail(&stranger))));
}
