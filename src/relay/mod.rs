//! The relay's semantics, independent of the platform: what each JSON-RPC request gets.
//!
//! - `eth_sendRawTransaction`: the raw transaction is decoded and checked
//!   ([`crate::transaction`]), its chain id compared with the configured (or learned) one, then it
//!   is handed to the sender's lock ([`Backend::sender_lock`]), which forwards it in order. When the
//!   lock can't be reached, the transaction is forwarded directly (fail-open) and one
//!   `fail_open` metric is emitted. Nothing invalid reaches the upstream.
//! - Every other method goes to the upstream unchanged and its answer comes back unchanged.
//! - Batches keep request order in the answer. Transactions of one sender in a batch are handled
//!   one after the other, in batch order; everything else runs concurrently.
//!
//! The platform's part (HTTP to the upstream, the Durable Object stub, logging) is the
//! [`Backend`] trait, implemented by the Worker adapter.

use crate::address::Address;
use crate::chain_id::{self, ChainIdCache, Claim};
use crate::config::Config;
use crate::hex;
use crate::jsonrpc::{self, Incoming, Request, RpcError};
use crate::metrics::Metric;
use crate::transaction::{self, Transaction};
use futures_util::future::join_all;
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;

/// Why the upstream gave no usable answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamError {
    /// The request could not be made or got no response (connection refused, DNS, reset). The
    /// platform's message, already redacted of the upstream URL.
    Unreachable(String),
    /// An HTTP status other than 2xx with a body that is not JSON.
    Status(u16),
    /// A body that is not JSON.
    Invalid,
    /// A body over `MAX_UPSTREAM_RESPONSE_BYTES`; the limit in bytes.
    TooLarge(usize),
    /// No answer within the timeout, in ms.
    Timeout(u64),
}

impl UpstreamError {
    /// A short name for logs and metrics: `unreachable`, `http_status`, `invalid`, `too_large`,
    /// `timeout`.
    pub fn kind(&self) -> &'static str {
        match self {
            UpstreamError::Unreachable(_) => "unreachable",
            UpstreamError::Status(_) => "http_status",
            UpstreamError::Invalid => "invalid",
            UpstreamError::TooLarge(_) => "too_large",
            UpstreamError::Timeout(_) => "timeout",
        }
    }

    /// The JSON-RPC error code (EIP-1474): -32002 (resource unavailable) when the upstream could
    /// not be reached or did not answer, -32603 when its answer was unusable.
    pub fn code(&self) -> i64 {
        match self {
            UpstreamError::Unreachable(_)
            | UpstreamError::Status(_)
            | UpstreamError::Timeout(_) => jsonrpc::RESOURCE_UNAVAILABLE,
            UpstreamError::Invalid | UpstreamError::TooLarge(_) => jsonrpc::INTERNAL_ERROR,
        }
    }

    /// What went wrong, for a client, without the upstream's address.
    pub fn reason(&self) -> String {
        match self {
            UpstreamError::Unreachable(_) => "upstream unavailable: connection failed".into(),
            UpstreamError::Status(status) => format!("upstream unavailable: HTTP {status}"),
            UpstreamError::Invalid => "upstream returned an invalid JSON-RPC response".into(),
            UpstreamError::TooLarge(limit) => format!("upstream response exceeds {limit} bytes"),
            UpstreamError::Timeout(ms) => format!("upstream did not answer within {ms} ms"),
        }
    }

    /// The JSON-RPC error a client gets for a request that was sent on: [`Self::code`] and
    /// [`Self::reason`]; a timeout adds that a transaction may still be processed.
    pub fn to_rpc(&self) -> RpcError {
        let reason = self.reason();
        let message = match self {
            UpstreamError::Timeout(_) => format!("{reason}; a transaction may still be processed"),
            _ => reason,
        };
        RpcError::new(self.code(), message)
    }
}

impl fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpstreamError::Unreachable(why) => write!(f, "unreachable: {why}"),
            other => write!(f, "{}", other.to_rpc().message),
        }
    }
}

/// Checks an upstream answer: HTTP status and body (already bounded by the size limit).
///
/// # Errors
/// [`UpstreamError::Invalid`] for a body that is not JSON (or [`UpstreamError::Status`] when the
/// status was not 2xx). A JSON body is accepted whatever the status: it is the upstream's own
/// JSON-RPC answer, errors included, and is relayed unchanged.
pub fn check_upstream_body(status: u16, body: String) -> Result<String, UpstreamError> {
    match serde_json::from_str::<&serde_json::value::RawValue>(&body) {
        Ok(_) => Ok(body),
        Err(_) if !(200..300).contains(&status) => Err(UpstreamError::Status(status)),
        Err(_) => Err(UpstreamError::Invalid),
    }
}

/// The platform: the upstream, the per-sender locks, the log.
#[allow(async_fn_in_trait)] // single-threaded wasm: no Send bound wanted
pub trait Backend {
    /// POSTs one JSON-RPC request (or batch) text to the upstream and returns its answer's body,
    /// checked with [`check_upstream_body`].
    async fn upstream(&self, body: &str) -> Result<String, UpstreamError>;

    /// Hands a single `eth_sendRawTransaction` request text (carrying `tx`) to the lock of
    /// `tx.sender`, which forwards it to the upstream in nonce order and returns the JSON-RPC
    /// response text.
    ///
    /// # Errors
    /// The reason, when the lock could not be reached (the caller then fails open).
    async fn sender_lock(&self, tx: &Transaction, body: &str) -> Result<String, String>;

    /// Records one operator metric (a log line, and a data point where a dataset is bound).
    fn emit(&self, metric: &Metric);

    /// Waits `ms` milliseconds on a timer of this request's own.
    async fn sleep(&self, ms: u64);

    /// The time, Unix ms.
    fn now_ms(&self) -> u64;
}

/// The HTTP answer to a request body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The JSON body; `None` when every request was a notification (HTTP 204).
    pub body: Option<String>,
}

/// The relay for one Worker invocation.
pub struct Relay<'a, B: Backend> {
    config: &'a Config,
    backend: &'a B,
    /// The chain id learned from the upstream, kept for the Worker isolate's lifetime.
    chain_ids: &'a Rc<ChainIdCache>,
}

enum Plan {
    Done(String),
    Proxy(Request),
    Send(Request, Transaction),
}

impl<'a, B: Backend> Relay<'a, B> {
    /// A relay over `backend`; `chain_ids` holds the upstream's `eth_chainId` for the isolate
    /// when `CHAIN_ID` is unset, looked up once (see [`crate::chain_id`]).
    pub fn new(config: &'a Config, backend: &'a B, chain_ids: &'a Rc<ChainIdCache>) -> Self {
        Relay {
            config,
            backend,
            chain_ids,
        }
    }

    /// Answers an HTTP request body (already bounded by `MAX_REQUEST_BYTES`).
    pub async fn handle(&self, body: &[u8]) -> Reply {
        let reply = |body: Option<String>| Reply {
            status: if body.is_some() { 200 } else { 204 },
            body,
        };
        match jsonrpc::parse(body, self.config.max_batch) {
            Err(error) => reply(Some(error)),
            Ok(Incoming::Single(entry)) => {
                let notification = entry.as_ref().is_ok_and(|r| r.id.is_none());
                let answers = self.answer_all(vec![entry]).await;
                reply((!notification).then(|| answers.into_iter().next().unwrap_or_default()))
            }
            Ok(Incoming::Batch(entries)) => {
                let wanted: Vec<bool> = entries
                    .iter()
                    .map(|e| e.as_ref().map_or(true, |r| r.id.is_some()))
                    .collect();
                let answers = self.answer_all(entries).await;
                let kept: Vec<String> = answers
                    .into_iter()
                    .zip(wanted)
                    .filter_map(|(a, w)| w.then_some(a))
                    .collect();
                reply((!kept.is_empty()).then(|| jsonrpc::batch(&kept)))
            }
        }
    }

    async fn answer_all(&self, entries: Vec<jsonrpc::Entry>) -> Vec<String> {
        let needs_chain_id = entries.iter().any(|e| {
            e.as_ref()
                .is_ok_and(|r| r.method == jsonrpc::SEND_RAW_TRANSACTION)
        });
        let chain_id = if needs_chain_id {
            self.chain_id().await
        } else {
            Err(RpcError::new(
                jsonrpc::INTERNAL_ERROR,
                "chain id not looked up",
            ))
        };
        let plans: Vec<Plan> = entries
            .into_iter()
            .map(|entry| match entry {
                Err(error) => Plan::Done(error),
                Ok(req) if req.method != jsonrpc::SEND_RAW_TRANSACTION => Plan::Proxy(req),
                Ok(req) => match chain_id
                    .clone()
                    .and_then(|chain_id| self.check(&req, chain_id))
                {
                    Ok(tx) => Plan::Send(req, tx),
                    Err(error) => Plan::Done(error.response(&req.response_id())),
                },
            })
            .collect();

        // One task per proxied request and per sender (its transactions in batch order).
        let mut answers: Vec<Option<String>> = vec![None; plans.len()];
        let mut proxied = Vec::new();
        let mut by_sender: HashMap<Address, Vec<(usize, Request, Transaction)>> = HashMap::new();
        let mut sender_order = Vec::new();
        for (i, plan) in plans.into_iter().enumerate() {
            match plan {
                Plan::Done(text) => answers[i] = Some(text),
                Plan::Proxy(req) => proxied.push((i, req)),
                Plan::Send(req, tx) => {
                    let list = by_sender.entry(tx.sender).or_default();
                    if list.is_empty() {
                        sender_order.push(tx.sender);
                    }
                    list.push((i, req, tx));
                }
            }
        }
        let proxy_tasks = proxied
            .into_iter()
            .map(|(i, req)| async move { vec![(i, self.proxy(&req).await)] });
        let send_tasks = sender_order.into_iter().map(|sender| {
            let txs = by_sender.remove(&sender).unwrap_or_default();
            async move {
                let mut out = Vec::with_capacity(txs.len());
                for (i, req, tx) in txs {
                    out.push((i, self.send(&req, &tx).await));
                }
                out
            }
        });
        let (sent, proxied) =
            futures_util::future::join(join_all(send_tasks), join_all(proxy_tasks)).await;
        for (i, text) in sent.into_iter().chain(proxied).flatten() {
            answers[i] = Some(text);
        }
        answers.into_iter().map(Option::unwrap_or_default).collect()
    }

    /// The chain id transactions must carry: `CHAIN_ID`, or the upstream's `eth_chainId` learned
    /// once; requests that arrive during the lookup wait for it, so it does not reorder a burst
    /// ([`crate::chain_id`]).
    async fn chain_id(&self) -> Result<u64, RpcError> {
        if let Some(id) = self.config.chain_id {
            return Ok(id);
        }
        // The lookup's own upstream call gives up after UPSTREAM_TIMEOUT_MS; waiters a second later.
        let give_up_after_ms = self.config.upstream_timeout_ms.saturating_add(1_000);
        match self.chain_ids.claim(self.backend.now_ms()) {
            Claim::Known(id) => Ok(id),
            Claim::Wait(wait) => loop {
                if let Some(result) = wait.result(self.backend.now_ms(), give_up_after_ms) {
                    return result;
                }
                self.backend.sleep(chain_id::CHECK_EVERY_MS).await;
            },
            Claim::Lookup(lookup) => {
                let result = self.ask_chain_id().await;
                lookup.finish(result.clone());
                result
            }
        }
    }

    async fn ask_chain_id(&self) -> Result<u64, RpcError> {
        let request = r#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}"#;
        let answer = self.backend.upstream(request).await.map_err(|e| {
            self.backend.emit(&upstream_error_metric("eth_chainId", &e));
            RpcError::new(
                e.code(),
                format!("cannot learn the chain id: {}", e.reason()),
            )
        })?;
        jsonrpc::result_quantity(&answer).ok_or_else(|| {
            RpcError::new(
                jsonrpc::INTERNAL_ERROR,
                "cannot learn the chain id: the upstream's eth_chainId answer has no valid result",
            )
        })
    }

    /// Decodes and checks an `eth_sendRawTransaction` request against the chain id policy.
    fn check(&self, req: &Request, chain_id: u64) -> Result<Transaction, RpcError> {
        let raw = jsonrpc::raw_transaction_param(&req.params)?;
        let tx = transaction::decode(&raw)
            .map_err(|e| RpcError::new(jsonrpc::INVALID_PARAMS, format!("invalid params: {e}")))?;
        match tx.chain_id {
            None if !self.config.allow_unprotected_txs => Err(RpcError::new(
                jsonrpc::INVALID_INPUT,
                "only replay-protected (EIP-155) transactions allowed over RPC",
            )),
            Some(have) if have != chain_id => Err(RpcError::new(
                jsonrpc::INVALID_INPUT,
                format!("invalid chain id for signer: have {have} want {chain_id}"),
            )),
            _ => Ok(tx),
        }
    }

    async fn proxy(&self, req: &Request) -> String {
        match self.backend.upstream(&req.text).await {
            Ok(answer) => answer,
            Err(e) => {
                self.backend.emit(&upstream_error_metric(&req.method, &e));
                e.to_rpc().response(&req.response_id())
            }
        }
    }

    async fn send(&self, req: &Request, tx: &Transaction) -> String {
        if !self.config.enable_nonce_ordering {
            return self.proxy(req).await;
        }
        match self.backend.sender_lock(tx, &req.text).await {
            Ok(answer) => answer,
            Err(error) => {
                self.backend.emit(
                    &Metric::new("fail_open", tx.sender.to_string(), "lock_unreachable")
                        .value("count", 1.0)
                        .field("tx_hash", hex::encode(&tx.hash))
                        .field("nonce", tx.nonce)
                        .field("error", self.config.redact(&error)),
                );
                self.proxy(req).await
            }
        }
    }
}

/// The Durable Object's side: forwards one transaction request (`body`, a single JSON-RPC request
/// text) to the upstream and returns the response text, or the JSON-RPC error for an upstream
/// failure with the request's id.
pub fn answer_or_error(body: &str, result: Result<String, UpstreamError>) -> String {
    result.unwrap_or_else(|e| e.to_rpc().response(&request_id(body)))
}

/// The `id` of a single JSON-RPC request text, null when there is none.
pub fn request_id(body: &str) -> Value {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v.get("id").cloned())
        .unwrap_or(Value::Null)
}

/// Whether an upstream answer to a transaction accepted it (a JSON-RPC `result`).
pub fn accepted(answer: &Result<String, UpstreamError>) -> bool {
    answer.as_ref().is_ok_and(|text| {
        serde_json::from_str::<Value>(text)
            .is_ok_and(|v| v.get("result").is_some_and(|r| !r.is_null()))
    })
}

/// The metric for an upstream failure seen by `method` (label: the error's kind).
pub fn upstream_error_metric(method: &str, error: &UpstreamError) -> Metric {
    Metric::new("upstream_error", "", error.kind())
        .value("count", 1.0)
        .field("method", method)
        .field("error", error.to_string())
}
