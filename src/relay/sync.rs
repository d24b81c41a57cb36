//! The three ways to send a raw transaction, all taken through the sender's order:
//! `eth_sendRawTransaction`; `eth_sendRawTransactionSync` (EIP-7966: send and wait for the
//! receipt); `eth_sendRawTransactionConditional` (ERC-7796: with inclusion preconditions, sent
//! upstream as the client wrote it).
//!
//! A send-and-wait call goes to its sender's object as a plain `eth_sendRawTransaction` of its
//! bytes, so the lock is released as soon as the upstream accepted it and works with upstreams
//! that do not serve the method; the wait for the receipt happens here, outside the lock. Its
//! timeout (the second parameter, ms, a number or a hex quantity) is capped at
//! `SYNC_TIMEOUT_MAX_MS`; without one, or with an invalid one, `SYNC_TIMEOUT_MS` (EIP-7966: an
//! invalid timeout falls back to the node's default). Not included in time: error code 4 with
//! the transaction hash as `data`; a nonce gap at its turn: code 6 with the expected nonce (the
//! object's answer, [`crate::ordering::sender::refusal::SYNC_NONCE_GAP`]).

use super::{Backend, Relay};
use crate::config::Config;
use crate::hex;
use crate::jsonrpc::{self, Answer, Request, RpcError, INVALID_PARAMS};
use crate::transaction::TxHash;
use crate::upstream::Route;
use serde_json::{json, Value};

pub use crate::jsonrpc::{is_send, SEND_RAW_TRANSACTION_CONDITIONAL, SEND_RAW_TRANSACTION_SYNC};
/// EIP-7966's error code for a transaction accepted but not included within the timeout; `data`
/// is its hash.
pub const SYNC_TIMEOUT: i64 = 4;

/// How a raw transaction was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendKind {
    /// `eth_sendRawTransaction`.
    Plain,
    /// `eth_sendRawTransactionSync`: wait for the receipt up to `timeout_ms`.
    Sync {
        /// How long to wait for the receipt once the upstream accepted it, ms.
        timeout_ms: u64,
    },
    /// `eth_sendRawTransactionConditional`.
    Conditional,
}

/// The raw transaction of a send request and how it was sent.
///
/// # Errors
/// -32602 saying what is wrong with the params: `eth_sendRawTransaction` takes `[raw]`,
/// `eth_sendRawTransactionSync` `[raw]` or `[raw, timeout]`, `eth_sendRawTransactionConditional`
/// `[raw, options]` with `options` an object.
pub fn send_params(req: &Request, config: &Config) -> Result<(Vec<u8>, SendKind), RpcError> {
    let invalid = |why: &str| RpcError::new(INVALID_PARAMS, format!("invalid params: {why}"));
    let items = req.params.as_array();
    let (first, second) = match items.map(Vec::as_slice) {
        Some([first, second]) if req.method != jsonrpc::SEND_RAW_TRANSACTION => {
            (first.clone(), Some(second))
        }
        _ if req.method == SEND_RAW_TRANSACTION_CONDITIONAL => {
            return Err(invalid("expected [raw transaction, options] (ERC-7796)"))
        }
        _ => (req.params.clone(), None),
    };
    let raw = match second {
        Some(_) => jsonrpc::raw_transaction_param(&Value::Array(vec![first]))?,
        None => jsonrpc::raw_transaction_param(&first)?,
    };
    let kind = match req.method.as_str() {
        SEND_RAW_TRANSACTION_SYNC => SendKind::Sync {
            timeout_ms: sync_timeout(second, config),
        },
        SEND_RAW_TRANSACTION_CONDITIONAL => {
            if !second.is_some_and(Value::is_object) {
                return Err(invalid("the options of ERC-7796 must be an object"));
            }
            SendKind::Conditional
        }
        _ => SendKind::Plain,
    };
    Ok((raw, kind))
}

/// The send-and-wait timeout, ms: the client's (a number or a hex quantity) capped at
/// `SYNC_TIMEOUT_MAX_MS`; `SYNC_TIMEOUT_MS` when it gave none or an invalid one.
fn sync_timeout(param: Option<&Value>, config: &Config) -> u64 {
    let asked = match param {
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(q)) => hex::decode_quantity(q).ok(),
        _ => None,
    };
    match asked {
        Some(ms) if ms > 0 => ms.min(config.sync_timeout_max_ms),
        _ => config.sync_timeout_ms,
    }
}

/// The request sent upstream for a transaction, made from the parsed request
/// ([`Request::to_json`]), never the client's text: the client's method and params, except a
/// send-and-wait call, which goes as the plain `eth_sendRawTransaction` of the same bytes (its
/// first parameter, and the same id).
pub fn upstream_request(req: &Request, kind: SendKind) -> String {
    match kind {
        SendKind::Sync { .. } => json!({
            "jsonrpc": "2.0",
            "id": req.response_id(),
            "method": jsonrpc::SEND_RAW_TRANSACTION,
            "params": [req.params.get(0).cloned().unwrap_or(Value::Null)],
        })
        .to_string(),
        SendKind::Plain | SendKind::Conditional => req.to_json(),
    }
}

/// A request stored by a sender's object, as it may be sent again: parsed as any client's request
/// and made anew ([`Request::to_json`]), a send whose raw transaction decodes to `hash`. Rows
/// stored by an older release hold the client's own text; what is resent from them is what the
/// relay reads in them, never that text.
///
/// # Errors
/// Why the stored text is not a send of that transaction.
pub fn stored_request(text: &str, hash: &TxHash) -> Result<String, String> {
    let req = match jsonrpc::parse(text.as_bytes(), 1) {
        Ok(jsonrpc::Incoming::Single(Ok(req))) => req,
        _ => return Err("not one JSON-RPC request".into()),
    };
    if !jsonrpc::is_send(&req.method) {
        return Err(format!("not a send: {}", req.method));
    }
    let raw = req
        .params
        .get(0)
        .map(|raw| jsonrpc::raw_transaction_param(&Value::Array(vec![raw.clone()])))
        .ok_or("no raw transaction")?
        .map_err(|e| e.message)?;
    let tx = crate::transaction::decode(&raw).map_err(|e| e.to_string())?;
    if &tx.hash != hash {
        return Err("its raw transaction has another hash".into());
    }
    Ok(req.to_json())
}

/// The first wait between two receipt polls, ms; it doubles up to [`RECEIPT_POLL_MAX_MS`].
const RECEIPT_POLL_MS: u64 = 100;
/// The longest wait between two receipt polls, ms.
const RECEIPT_POLL_MAX_MS: u64 = 1_000;

impl<B: Backend> Relay<'_, B> {
    /// What a send-and-wait call gets once its sender's object answered `answer`: an error as it
    /// is; the hash turned into the receipt (`eth_getTransactionReceipt`, polled 100 ms apart,
    /// doubling to 1 s, until `timeout_ms`), or code 4 with the hash when it is not included by
    /// then.
    pub(super) async fn wait_receipt(&self, answer: Answer, timeout_ms: u64) -> Answer {
        let Answer::Result(raw) = &answer else {
            return answer;
        };
        let Ok(hash) = serde_json::from_str::<String>(raw) else {
            return answer;
        };
        let request = json!({
            "jsonrpc": "2.0", "id": 1, "method": "eth_getTransactionReceipt", "params": [hash],
        })
        .to_string();
        let deadline = self.backend.now_ms().saturating_add(timeout_ms);
        let mut pause = RECEIPT_POLL_MS;
        loop {
            let left = deadline.saturating_sub(self.backend.now_ms());
            let attempt = self.config.upstream_timeout_ms.min(left).max(1);
            if let Ok(reply) = self.backend.post(&request, Route::Own, attempt).await {
                if let Some(Answer::Result(receipt)) = Answer::parse(&reply.body) {
                    if receipt != "null" {
                        return Answer::Result(receipt);
                    }
                }
            }
            let now = self.backend.now_ms();
            if now >= deadline {
                break;
            }
            self.backend.sleep(pause.min(deadline - now)).await;
            pause = (pause * 2).min(RECEIPT_POLL_MAX_MS);
        }
        let mut error = RpcError::new(
            SYNC_TIMEOUT,
            format!(
                "the transaction was added to the pool but not included within {timeout_ms} ms"
            ),
        );
        error.data = Some(Value::String(hash));
        Answer::error(&error)
    }
}
