//! A JSON-RPC 2.0 request as the relay reads it (JSON-RPC 2.0 section 4), a body's members, and
//! why one is refused (section 5.1).

use super::{Id, RpcError, INVALID_PARAMS, INVALID_REQUEST, LIMIT_EXCEEDED, PARSE_ERROR};
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::fmt;

/// A valid JSON-RPC 2.0 request object: the four members the relay read, and nothing else of
/// what the client sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The id: a string, a number or null, as the client wrote it. `None` for a notification (no
    /// `id` member), which gets no response.
    pub id: Option<Id>,
    /// The method name.
    pub method: String,
    /// The params (array or object), `Value::Null` when absent.
    pub params: Value,
}

impl Request {
    /// The id to answer with: the request's, or null for a notification.
    pub fn response_id(&self) -> Id {
        self.id.clone().unwrap_or_else(Id::null)
    }

    /// The request as it goes to the upstream, made anew from the parsed members:
    /// `{"jsonrpc":"2.0","id":...,"method":...,"params":...}` (no `id` for a notification, no
    /// `params` when absent; the id as [`Id::for_upstream`] gives it). Never the client's text: a
    /// node that reads JSON as Go's
    /// `encoding/json` does (geth, Erigon, op-geth, Nitro: keys matched case-insensitively, a
    /// later key winning) would otherwise run what the relay did not check (`"Method"`,
    /// `"Params"` beside the checked ones, escapes in the method name).
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(64 + self.method.len());
        out.push_str(r#"{"jsonrpc":"2.0","#);
        if let Some(id) = &self.id {
            out.push_str(r#""id":"#);
            out.push_str(&id.for_upstream());
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
pub(super) fn go_alias(key: &str, member: &str) -> bool {
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

/// A request (or a whole body) refused before any method ran: the id its response carries
/// (`null` when the id could not be read) and the error (JSON-RPC 2.0 section 5.1: -32700,
/// -32600, or -32005 for a batch over the limit).
#[derive(Debug, Clone, PartialEq)]
pub struct RequestError {
    /// The id the response carries.
    pub id: Id,
    /// Why it was refused.
    pub error: RpcError,
}

impl RequestError {
    fn new(id: &Id, code: i64, message: impl Into<String>) -> Self {
        RequestError {
            id: id.clone(),
            error: RpcError::new(code, message),
        }
    }

    /// The error response text.
    pub fn response(&self) -> String {
        self.to_response().render()
    }

    /// The error response, typed ([`super::Response`]).
    pub fn to_response(&self) -> super::Response {
        super::Response::error(&self.id, &self.error)
    }
}

/// One request object of the incoming body (the body itself, or a member of its batch) as
/// parsed: a valid request, or why it is not one.
pub type ParsedRequest = Result<Request, RequestError>;

/// A parsed HTTP body.
#[derive(Debug)]
pub enum Incoming {
    /// A single request object.
    Single(ParsedRequest),
    /// A batch (a non-empty JSON array), in order.
    Batch(Vec<ParsedRequest>),
}

/// A request object's members, read in one pass: every member as a [`Value`] but the id, which
/// is kept as its text ([`Id`]); a later member of the same name wins, as in a [`Map`].
struct Members {
    obj: Map<String, Value>,
    id: Option<Box<RawValue>>,
}

impl<'de> Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Of;
        impl<'de> Visitor<'de> for Of {
            type Value = Members;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members, A::Error> {
                let mut members = Members {
                    obj: Map::new(),
                    id: None,
                };
                while let Some(key) = map.next_key::<String>()? {
                    if key == "id" {
                        members.id = Some(map.next_value()?);
                        members.obj.insert(key, Value::Null);
                    } else {
                        let value = map.next_value()?;
                        members.obj.insert(key, value);
                    }
                }
                Ok(members)
            }
        }
        deserializer.deserialize_map(Of)
    }
}

fn parse_request(raw: &RawValue) -> ParsedRequest {
    let invalid = |id: &Id, why: &str| {
        RequestError::new(id, INVALID_REQUEST, format!("invalid request: {why}"))
    };
    let Ok(Members { obj, id }) = serde_json::from_str::<Members>(raw.get()) else {
        return Err(invalid(&Id::null(), "not a JSON object"));
    };
    let id = match id.map(Id::from_raw) {
        None => None,
        Some(Some(id)) => Some(id),
        Some(None) => return Err(invalid(&Id::null(), "id must be a string, number or null")),
    };
    let response_id = id.clone().unwrap_or_else(Id::null);
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
        id,
        method: method.clone(),
        params,
    })
}

/// Parses an HTTP body as a JSON-RPC 2.0 request or batch.
///
/// # Errors
/// With a `null` id: -32700 for unparsable JSON, -32600 for an empty batch, or -32005 for a batch
/// over `max_batch` members.
pub fn parse(body: &[u8], max_batch: usize) -> Result<Incoming, RequestError> {
    let unparsable = |why: String| RequestError::new(&Id::null(), PARSE_ERROR, why);
    let text = std::str::from_utf8(body)
        .map_err(|_| unparsable("parse error: body is not UTF-8".into()))?;
    let raw: &RawValue =
        serde_json::from_str(text).map_err(|e| unparsable(format!("parse error: {e}")))?;
    if raw.get().starts_with('[') {
        let members: Vec<&RawValue> =
            serde_json::from_str(raw.get()).map_err(|e| unparsable(format!("parse error: {e}")))?;
        if members.is_empty() {
            return Err(RequestError::new(
                &Id::null(),
                INVALID_REQUEST,
                "invalid request: empty batch",
            ));
        }
        if members.len() > max_batch {
            return Err(RequestError::new(
                &Id::null(),
                LIMIT_EXCEEDED,
                format!(
                    "batch of {} requests exceeds the limit of {max_batch}",
                    members.len()
                ),
            ));
        }
        Ok(Incoming::Batch(
            members.into_iter().map(parse_request).collect(),
        ))
    } else {
        Ok(Incoming::Single(parse_request(raw)))
    }
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
