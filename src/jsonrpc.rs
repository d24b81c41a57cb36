//! JSON-RPC 2.0 requests, responses and error codes (JSON-RPC 2.0 specification; codes per EIP-1474).

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
/// Requested resource not available: here, the upstream node (EIP-1474).
pub const RESOURCE_UNAVAILABLE: i64 = -32002;
/// Request exceeds a defined limit (EIP-1474).
pub const LIMIT_EXCEEDED: i64 = -32005;

/// The send method the relay orders; every method but the three sends goes to the upstream as it
/// is.
pub const SEND_RAW_TRANSACTION: &str = "eth_sendRawTransaction";
/// Send and wait for the receipt (EIP-7966), ordered like a send.
pub const SEND_RAW_TRANSACTION_SYNC: &str = "eth_sendRawTransactionSync";
/// Send with inclusion preconditions (ERC-7796), ordered like a send.
pub const SEND_RAW_TRANSACTION_CONDITIONAL: &str = "eth_sendRawTransactionConditional";

/// Whether `method` sends a raw transaction: any of the three above.
pub fn is_send(method: &str) -> bool {
    matches!(
        method,
        SEND_RAW_TRANSACTION | SEND_RAW_TRANSACTION_SYNC | SEND_RAW_TRANSACTION_CONDITIONAL
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
    pub fn response(&self, id: &Value) -> String {
        let mut error = Map::new();
        error.insert("code".into(), self.code.into());
        error.insert("message".into(), self.message.clone().into());
        if let Some(data) = &self.data {
            error.insert("data".into(), data.clone());
        }
        let mut obj = Map::new();
        obj.insert("jsonrpc".into(), "2.0".into());
        obj.insert("id".into(), id.clone());
        obj.insert("error".into(), Value::Object(error));
        Value::Object(obj).to_string()
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
        match (members.get("error"), members.get("result")) {
            (Some(error), _) if error.get() != "null" => Some(Answer::Error(error.get().into())),
            (_, Some(result)) => Some(Answer::Result(result.get().into())),
            _ => None,
        }
    }

    /// The answer that a transaction went in: its hash as a `result` (`"0x"` + 64 hex digits).
    pub fn hash(hash: &crate::transaction::TxHash) -> Answer {
        Answer::Result(format!("\"{}\"", crate::hex::encode(hash)))
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

    /// The error's code and message, for an `error` answer that has them.
    pub fn error_parts(&self) -> Option<(i64, String)> {
        let Answer::Error(text) = self else {
            return None;
        };
        let value: Value = serde_json::from_str(text).ok()?;
        let code = value.get("code").and_then(Value::as_i64).unwrap_or(0);
        let message = match value.get("message") {
            Some(Value::String(m)) => m.clone(),
            _ => String::new(),
        };
        // Some nodes put the reason in `data` (a string, or an object with a message).
        let data = match value.get("data") {
            Some(Value::String(d)) => d.clone(),
            Some(Value::Object(d)) => d
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            _ => String::new(),
        };
        Some((
            code,
            if data.is_empty() {
                message
            } else {
                format!("{message}: {data}")
            },
        ))
    }

    /// The full response text for request `id`: `{"jsonrpc":"2.0","id":...,"result"|"error":...}`.
    pub fn render(&self, id: &Value) -> String {
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

/// A valid JSON-RPC 2.0 request object: the four members the relay read, and nothing else of
/// what the client sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The id: a string, a number or null. `None` for a notification (no `id` member), which gets
    /// no response.
    pub id: Option<Value>,
    /// The method name.
    pub method: String,
    /// The params (array or object), `Value::Null` when absent.
    pub params: Value,
}

impl Request {
    /// The id to answer with: the request's, or null for a notification.
    pub fn response_id(&self) -> Value {
        self.id.clone().unwrap_or(Value::Null)
    }

    /// The request as it goes to the upstream, made anew from the parsed members:
    /// `{"jsonrpc":"2.0","id":...,"method":...,"params":...}` (no `id` for a notification, no
    /// `params` when absent). Never the client's text: a node that reads JSON as Go's
    /// `encoding/json` does (geth, Erigon, op-geth, Nitro: keys matched case-insensitively, a
    /// later key winning) would otherwise run what the relay did not check (`"Method"`,
    /// `"Params"` beside the checked ones, escapes in the method name).
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(64 + self.method.len());
        out.push_str(r#"{"jsonrpc":"2.0","#);
        if let Some(id) = &self.id {
            out.push_str(r#""id":"#);
            out.push_str(&id.to_string());
            out.push(',');
        }
        out.push_str(r#""method":"#);
        out.push_str(&Value::String(self.method.clone()).to_string());
        if !self.params.is_null() {
            out.push_str(r#","params":"#);
            out.push_str(&self.params.to_string());
        }
        out.push('}');
        out
    }
}

/// The members of a request object, as the relay reads them (JSON-RPC 2.0 section 4).
const MEMBERS: [&str; 4] = ["jsonrpc", "id", "method", "params"];

/// Whether `key` names `member` for a Go node but is not `member` itself: Go's `encoding/json`
/// matches keys with `bytes.EqualFold`, Unicode simple case folding, under which ASCII letters
/// differ in case only and `ſ` (U+017F) is `s`, `K` (U+212A, Kelvin) is `k`.
fn go_alias(key: &str, member: &str) -> bool {
    if key == member || key.chars().count() != member.len() {
        return false;
    }
    key.chars().zip(member.chars()).all(|(k, m)| {
        let k = match k {
            '\u{17f}' => 's',
            '\u{212a}' => 'k',
            k => k.to_ascii_lowercase(),
        };
        k == m
    })
}

/// One member of the incoming body: a valid request, or the error response it already earned.
pub type Entry = Result<Request, String>;

/// A parsed HTTP body.
#[derive(Debug)]
pub enum Incoming {
    /// A single request object.
    Single(Entry),
    /// A batch (a non-empty JSON array), in order.
    Batch(Vec<Entry>),
}

fn entry(raw: &RawValue) -> Entry {
    let invalid = |id: &Value, why: &str| {
        RpcError::new(INVALID_REQUEST, format!("invalid request: {why}")).response(id)
    };
    let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(raw.get()) else {
        return Err(invalid(&Value::Null, "not a JSON object"));
    };
    let id = obj.get("id");
    let response_id = match id {
        None | Some(Value::Null | Value::Number(_) | Value::String(_)) => {
            id.cloned().unwrap_or(Value::Null)
        }
        Some(_) => return Err(invalid(&Value::Null, "id must be a string, number or null")),
    };
    if let Some((key, member)) = obj
        .keys()
        .find_map(|key| MEMBERS.iter().find(|m| go_alias(key, m)).map(|m| (key, m)))
    {
        return Err(invalid(
            &response_id,
            &format!("member {key:?} is {member:?} in another case; members are lowercase"),
        ));
    }
    if obj.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        return Err(invalid(&response_id, "jsonrpc must be \"2.0\""));
    }
    let Some(Value::String(method)) = obj.get("method") else {
        return Err(invalid(&response_id, "method must be a string"));
    };
    let params = match obj.get("params") {
        None => Value::Null,
        Some(p @ (Value::Array(_) | Value::Object(_))) => p.clone(),
        Some(_) => {
            return Err(invalid(
                &response_id,
                "params must be an array or an object",
            ))
        }
    };
    Ok(Request {
        id: id.cloned(),
        method: method.clone(),
        params,
    })
}

/// Parses an HTTP body as a JSON-RPC 2.0 request or batch.
///
/// # Errors
/// The error response to send: -32700 for unparsable JSON, -32600 for an empty batch or a body
/// that is neither an object nor an array, or a batch over `max_batch` members (-32005).
pub fn parse(body: &[u8], max_batch: usize) -> Result<Incoming, String> {
    let text = std::str::from_utf8(body).map_err(|_| {
        RpcError::new(PARSE_ERROR, "parse error: body is not UTF-8").response(&Value::Null)
    })?;
    let raw: &RawValue = serde_json::from_str(text).map_err(|e| {
        RpcError::new(PARSE_ERROR, format!("parse error: {e}")).response(&Value::Null)
    })?;
    if raw.get().starts_with('[') {
        let members: Vec<&RawValue> = serde_json::from_str(raw.get()).map_err(|e| {
            RpcError::new(PARSE_ERROR, format!("parse error: {e}")).response(&Value::Null)
        })?;
        if members.is_empty() {
            return Err(
                RpcError::new(INVALID_REQUEST, "invalid request: empty batch")
                    .response(&Value::Null),
            );
        }
        if members.len() > max_batch {
            return Err(RpcError::new(
                LIMIT_EXCEEDED,
                format!(
                    "batch of {} requests exceeds the limit of {max_batch}",
                    members.len()
                ),
            )
            .response(&Value::Null));
        }
        Ok(Incoming::Batch(members.into_iter().map(entry).collect()))
    } else {
        Ok(Incoming::Single(entry(raw)))
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

/// The raw transaction of an `eth_sendRawTransaction` request: `params` must be `["0x..."]`.
///
/// # Errors
/// -32602 saying what is wrong with the params (missing, not a string, not hex).
pub fn raw_transaction_param(params: &Value) -> Result<Vec<u8>, RpcError> {
    let invalid = |why: String| RpcError::new(INVALID_PARAMS, format!("invalid params: {why}"));
    let arg = match params {
        Value::Array(items) if items.len() == 1 => &items[0],
        Value::Array(items) if items.is_empty() => {
            return Err(invalid("missing value for required argument 0".into()))
        }
        Value::Array(items) => {
            return Err(invalid(format!(
                "too many arguments, want at most 1, got {}",
                items.len()
            )))
        }
        _ => return Err(invalid("expected an array with one raw transaction".into())),
    };
    let Value::String(hex) = arg else {
        return Err(invalid(
            "raw transaction must be a 0x-prefixed hex string".into(),
        ));
    };
    crate::hex::decode(hex).map_err(|e| invalid(format!("raw transaction is not valid hex: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn error_of(response: &str) -> (Value, i64) {
        let v: Value = serde_json::from_str(response).unwrap();
        (v["id"].clone(), v["error"]["code"].as_i64().unwrap())
    }

    #[test]
    fn parses_single_and_batch() {
        let Incoming::Single(Ok(req)) =
            parse(br#"{"jsonrpc":"2.0","id":7,"method":"eth_chainId"}"#, 10).unwrap()
        else {
            panic!()
        };
        assert_eq!(req.id, Some(json!(7)));
        assert_eq!(req.method, "eth_chainId");
        let Incoming::Batch(entries) = parse(
            br#"[{"jsonrpc":"2.0","id":"a","method":"m","params":[]}, 5, {"jsonrpc":"1.0","id":2,"method":"m"}]"#,
            10,
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(entries.len(), 3);
        assert!(entries[0].is_ok());
        assert_eq!(
            error_of(entries[1].as_ref().unwrap_err()),
            (Value::Null, INVALID_REQUEST)
        );
        assert_eq!(
            error_of(entries[2].as_ref().unwrap_err()),
            (json!(2), INVALID_REQUEST)
        );
    }

    #[test]
    fn what_goes_upstream_is_made_from_the_parsed_members_only() {
        let parse_one = |body: &str| match parse(body.as_bytes(), 10).unwrap() {
            Incoming::Single(entry) => entry,
            Incoming::Batch(_) => panic!(),
        };
        // Unknown members and escapes go; the method is the one the policy read.
        let req = parse_one(
            r#"{"params":[1],"method":"eth_sendRawTransactio\u006e","id":"a","jsonrpc":"2.0","x":{"y":1}}"#,
        )
        .unwrap();
        assert_eq!(req.method, "eth_sendRawTransaction");
        assert_eq!(
            req.to_json(),
            r#"{"jsonrpc":"2.0","id":"a","method":"eth_sendRawTransaction","params":[1]}"#
        );
        // A later duplicate wins, as in Go; what goes upstream has one of each.
        let req =
            parse_one(r#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId","method":"eth_call"}"#)
                .unwrap();
        assert_eq!(
            req.to_json(),
            r#"{"jsonrpc":"2.0","id":1,"method":"eth_call"}"#
        );
        // A notification has no id; no params when there were none.
        let req = parse_one(r#"{"jsonrpc":"2.0","method":"eth_chainId"}"#).unwrap();
        assert_eq!(req.to_json(), r#"{"jsonrpc":"2.0","method":"eth_chainId"}"#);
        // A member a Go node reads as one of the four, in another case: refused.
        for (body, key) in [
            (
                r#"{"jsonrpc":"2.0","id":7,"method":"eth_chainId","Method":"debug_setHead","params":["0x0"]}"#,
                "Method",
            ),
            (
                r#"{"jsonrpc":"2.0","id":7,"method":"eth_sendRawTransaction","params":["0x01"],"PARAMS":["0x02"]}"#,
                "PARAMS",
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"eth_chainId\",\"param\u{17f}\":[]}",
                "param\u{17f}",
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"eth_chainId\",\"Jsonrpc\":\"1.0\"}",
                "Jsonrpc",
            ),
        ] {
            let error = parse_one(body).unwrap_err();
            assert_eq!(error_of(&error), (json!(7), INVALID_REQUEST), "{body}");
            let message: Value = serde_json::from_str(&error).unwrap();
            let message = message["error"]["message"].as_str().unwrap();
            assert!(message.contains(&format!("{key:?}")), "{message}");
        }
        assert!(!go_alias("methods", "method") && !go_alias("method", "method"));
    }

    #[test]
    fn body_level_errors() {
        assert_eq!(
            error_of(&parse(b"{not json", 10).unwrap_err()).1,
            PARSE_ERROR
        );
        assert_eq!(error_of(&parse(b"[]", 10).unwrap_err()).1, INVALID_REQUEST);
        assert_eq!(
            error_of(&parse(b"[1,2,3]", 2).unwrap_err()).1,
            LIMIT_EXCEEDED
        );
        let Incoming::Single(Err(e)) = parse(b"42", 10).unwrap() else {
            panic!()
        };
        assert_eq!(error_of(&e).1, INVALID_REQUEST);
    }

    #[test]
    fn result_quantities() {
        assert_eq!(
            result_quantity(r#"{"jsonrpc":"2.0","id":1,"result":"0x7a69"}"#),
            Some(31337)
        );
        for answer in [
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":"7a69"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":31337}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":"0x10000000000000000"}"#,
            r#"[1]"#,
            "not json",
        ] {
            assert_eq!(result_quantity(answer), None, "{answer}");
        }
    }

    #[test]
    fn raw_transaction_params() {
        assert_eq!(
            raw_transaction_param(&json!(["0x01ff"])).unwrap(),
            vec![1, 0xff]
        );
        for bad in [
            json!([]),
            json!(["0x1", "0x2"]),
            json!([1]),
            json!(["zz"]),
            json!({}),
        ] {
            assert_eq!(
                raw_transaction_param(&bad).unwrap_err().code,
                INVALID_PARAMS
            );
        }
    }

    #[test]
    fn answers_parse_and_render_with_any_id() {
        let ok = Answer::parse(r#"{"jsonrpc":"2.0","id":1,"result":"0xab"}"#).unwrap();
        assert_eq!(ok, Answer::Result("\"0xab\"".into()));
        assert_eq!(
            ok.render(&json!("x")),
            r#"{"jsonrpc":"2.0","id":"x","result":"0xab"}"#
        );
        let err = Answer::parse(
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"already known"}}"#,
        )
        .unwrap();
        assert_eq!(err.error_parts(), Some((-32000, "already known".into())));
        let with_data = Answer::parse(
            r#"{"id":1,"error":{"code":-32010,"message":"rejected","data":"nonce too low"},"result":null}"#,
        )
        .unwrap();
        assert_eq!(
            with_data.error_parts().unwrap().1,
            "rejected: nonce too low"
        );
        assert_eq!(
            Answer::parse(r#"{"id":1,"result":null}"#),
            Some(Answer::Result("null".into()))
        );
        for bad in ["[]", "1", "{}", "nope", r#"[{"result":1}]"#] {
            assert_eq!(Answer::parse(bad), None, "{bad}");
        }
        assert_eq!(
            Answer::hash(&[0xab; 32]).render(&json!(7)),
            format!(
                r#"{{"jsonrpc":"2.0","id":7,"result":"0x{}"}}"#,
                "ab".repeat(32)
            )
        );
        let made = Answer::error(&RpcError::new(LIMIT_EXCEEDED, "full"));
        assert_eq!(
            made.to_wire(),
            r#"{"error":{"code":-32005,"message":"full"}}"#
        );
        assert_eq!(Answer::parse(&made.to_wire()), Some(made));
    }

    #[test]
    fn error_responses_keep_the_id() {
        let text = RpcError::new(INVALID_INPUT, "x").response(&json!("abc"));
        assert_eq!(error_of(&text), (json!("abc"), INVALID_INPUT));
        assert_eq!(batch(&["1".into(), "2".into()]), "[1,2]");
    }
}
