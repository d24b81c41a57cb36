//! JSON-RPC 2.0 requests, responses and error codes (JSON-RPC 2.0 specification; codes per EIP-1474).
//! The request as the relay reads it, and why one is refused, are in [`request`].

mod id;
pub mod notification;
mod request;
mod response;

pub use id::Id;
pub use notification::notification_of;
pub use request::{parse, raw_transaction_param, Incoming, ParsedRequest, Request, RequestError};
pub use response::{Body, Response};

use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::fmt;

/// Invalid JSON was received (JSON-RPC 2.0).
pub const PARSE_ERROR: i64 = -32700;
/// The JSON sent is not a valid request object (JSON-RPC 2.0).
pub const INVALID_REQUEST: i64 = -32600;
/// The method does not exist or is not available (JSON-RPC 2.0): here, refused by the method
/// policy.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid method parameters (JSON-RPC 2.0).
pub const INVALID_PARAMS: i64 = -32602;
/// Internal JSON-RPC error (JSON-RPC 2.0).
pub const INTERNAL_ERROR: i64 = -32603;
/// Invalid input: here, a transaction the chain would refuse (EIP-1474; geth uses it too).
pub const INVALID_INPUT: i64 = -32000;
/// Requested resource not found (EIP-1474): here, a chain the relay does not serve
/// (`/evm/{chainId}`).
pub const RESOURCE_NOT_FOUND: i64 = -32001;
/// Requested resource not available: here, the upstream node (EIP-1474).
pub const RESOURCE_UNAVAILABLE: i64 = -32002;
/// Method not supported (EIP-1474): here, a send method the private route does not serve.
pub const METHOD_NOT_SUPPORTED: i64 = -32004;
/// Request exceeds a defined limit (EIP-1474).
pub const LIMIT_EXCEEDED: i64 = -32005;

/// The send method the relay orders; every method but the four sends (and the private cancel)
/// goes to the upstream as it is.
pub const SEND_RAW_TRANSACTION: &str = "eth_sendRawTransaction";
/// Send and wait for the receipt (EIP-7966), ordered like a send.
pub const SEND_RAW_TRANSACTION_SYNC: &str = "eth_sendRawTransactionSync";
/// Send with inclusion preconditions (ERC-7796), ordered like a send.
pub const SEND_RAW_TRANSACTION_CONDITIONAL: &str = "eth_sendRawTransactionConditional";

/// Send privately (Flashbots Protect's `[{tx, maxBlockNumber, preferences}]`), ordered like a
/// send; only behind a private route.
pub const SEND_PRIVATE_TRANSACTION: &str = "eth_sendPrivateTransaction";
/// Cancel a private send (`[{txHash}]`, Flashbots'); ordered with the sender's sends, only behind
/// a private route.
pub const CANCEL_PRIVATE_TRANSACTION: &str = "eth_cancelPrivateTransaction";

/// Whether `method` sends a raw transaction: any of the four above.
pub fn is_send(method: &str) -> bool {
    matches!(
        method,
        SEND_RAW_TRANSACTION
            | SEND_RAW_TRANSACTION_SYNC
            | SEND_RAW_TRANSACTION_CONDITIONAL
            | SEND_PRIVATE_TRANSACTION
    )
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The error code (see the constants of this module).
    pub code: i64,
    /// A human-readable message.
    pub message: String,
    /// Optional extra data.
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with a code and message, no data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The full response object for request `id`, as JSON text.
    pub fn response(&self, id: &Id) -> String {
        Answer::error(self).render(id)
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

/// What one request gets, without its id: the raw JSON of a `result`, or of an `error` object.
/// It is rendered into a response with each asker's own id ([`Answer::render`]), so one upstream
/// answer can serve every copy of a transaction sent at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The JSON text of a `result` (for `eth_sendRawTransaction`, the transaction hash).
    Result(String),
    /// The JSON text of an `error` object (`{"code": ..., "message": ..., "data"?: ...}`).
    Error(String),
}

impl Answer {
    /// The `result` or `error` of a single JSON-RPC response text, unchanged; `None` when the
    /// text is not one JSON object holding either (a batch, a bare value, not JSON).
    pub fn parse(response: &str) -> Option<Answer> {
        let members: HashMap<String, &RawValue> = serde_json::from_str(response).ok()?;
        // Nethermind's streamed `eth_getLogs` (`JsonRpc.EnableLogsStreamMode`): a result cut at
        // its cap says so beside it (`"_streamStatus":"truncated"`): not the whole answer, so an
        // error, never a short result kept or passed on as whole.
        if members
            .get("_streamStatus")
            .is_some_and(|s| s.get() != "\"complete\"")
        {
            return Some(Answer::Error(format!(
                r#"{{"code":{LIMIT_EXCEEDED},"message":"Too many logs requested: the upstream's answer was cut short (_streamStatus {})"}}"#,
                // The status word alone (letters, digits, `_`): the upstream's text is no JSON of ours.
                members["_streamStatus"]
                    .get()
                    .chars()
                    .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .take(32)
                    .collect::<String>()
            )));
        }
        match (members.get("error"), members.get("result")) {
            (Some(error), _) if error.get() != "null" => Some(Answer::Error(error.get().into())),
            (_, Some(result)) => Some(Answer::Result(result.get().into())),
            _ => None,
        }
    }

    /// An `error`'s code and its message in lowercase (empty when it has none, the code `None`
    /// when it is not an integer); `None` for a `result`.
    pub fn error_said(&self) -> Option<(Option<i64>, String)> {
        let Answer::Error(error) = self else {
            return None;
        };
        let error: serde_json::Value = serde_json::from_str(error).unwrap_or_default();
        let code = error.get("code").and_then(serde_json::Value::as_i64);
        let message = error
            .get("message")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_ascii_lowercase();
        Some((code, message))
    }

    /// The answer that a transaction went in: its hash as a `result` (`"0x"` + 64 hex digits).
    pub fn hash(hash: &crate::transaction::TxHash) -> Answer {
        Answer::Result(format!("\"{}\"", crate::hex::encode(hash)))
    }

    /// EIP-1474's -32002 ("resource unavailable": the request may still be processed) for a
    /// transaction whose outcome the relay does not know and which it keeps, to check by hash and
    /// send again from its bytes while its nonce is free: message `transaction outcome unknown:
    /// {why}; the relay keeps it and checks it by hash`, `data` its hash (`"0x"` + 64 hex digits).
    pub fn outcome_unknown(hash: &crate::transaction::TxHash, why: &str) -> Answer {
        Answer::error(&RpcError {
            code: RESOURCE_UNAVAILABLE,
            message: format!(
                "transaction outcome unknown: {why}; the relay keeps it and checks it by hash"
            ),
            data: Some(Value::String(crate::hex::encode(hash))),
        })
    }

    /// An `error` answer made of `error`.
    pub fn error(error: &RpcError) -> Answer {
        let mut obj = Map::new();
        obj.insert("code".into(), error.code.into());
        obj.insert("message".into(), error.message.clone().into());
        if let Some(data) = &error.data {
            obj.insert("data".into(), data.clone());
        }
        Answer::Error(Value::Object(obj).to_string())
    }

    /// The error's code and message, for an `error` answer that has them ([`error_parts_of`]).
    pub fn error_parts(&self) -> Option<(i64, String)> {
        let Answer::Error(text) = self else {
            return None;
        };
        let value: Value = serde_json::from_str(text).ok()?;
        Some(error_parts_of(&value))
    }

    /// The full response text for request `id`: `{"jsonrpc":"2.0","id":...,"result"|"error":...}`,
    /// the id as the client wrote it.
    pub fn render(&self, id: &Id) -> String {
        let (key, raw) = match self {
            Answer::Result(raw) => ("result", raw),
            Answer::Error(raw) => ("error", raw),
        };
        format!(r#"{{"jsonrpc":"2.0","id":{id},"{key}":{raw}}}"#)
    }

    /// The answer as the Durable Object sends it to the Worker: `{"result": ...}` or
    /// `{"error": ...}`.
    pub fn to_wire(&self) -> String {
        match self {
            Answer::Result(raw) => format!(r#"{{"result":{raw}}}"#),
            Answer::Error(raw) => format!(r#"{{"error":{raw}}}"#),
        }
    }
}

/// The `result` of a JSON-RPC answer text when it is a quantity (0x-hex, at most 64 bits), as
/// `eth_chainId` and `eth_getTransactionCount` answer; `None` for anything else (an error
/// answer, a missing or malformed result, text that is not JSON).
pub fn result_quantity(answer: &str) -> Option<u64> {
    let value: Value = serde_json::from_str(answer).ok()?;
    crate::hex::decode_quantity(value.get("result")?.as_str()?).ok()
}

/// Joins member responses into a batch response (JSON array text).
pub fn batch(responses: &[String]) -> String {
    let mut out = String::with_capacity(2 + responses.iter().map(|r| r.len() + 1).sum::<usize>());
    out.push('[');
    out.push_str(&responses.join(","));
    out.push(']');
    out
}

/// The code and message of a JSON-RPC error object (`{"code", "message", "data"}`), the message
/// followed by `: data` where a node puts the reason in `data` (a string, or an object with a
/// message); 0 and an empty message where they are missing.
pub fn error_parts_of(error: &Value) -> (i64, String) {
    let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
    let message = match error.get("message") {
        Some(Value::String(m)) => m.clone(),
        _ => String::new(),
    };
    let data = match error.get("data") {
        Some(Value::String(d)) => d.clone(),
        Some(Value::Object(d)) => d
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        _ => String::new(),
    };
    let message = if data.is_empty() {
        message
    } else {
        format!("{message}: {data}")
    };
    (code, message)
}

#[cfg(test)]
mod tests;
