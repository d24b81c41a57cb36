//! An `eth_subscribe` call's params, checked whole and made anew before anything goes upstream or
//! is kept: the kind, and for `logs` the filter's `address` and `topics` (geth's pub/sub API and
//! `eth/filters`: at most [`MAX_ADDRESSES`] addresses and [`MAX_TOPICS`] topic positions of at
//! most [`MAX_SUB_TOPICS`] each, as geth's `filter_system.go` allows). Nothing else the client
//! sent is kept: padding, unknown members and extra params are refused or dropped, so what a
//! subscription keeps for its life is small and bounded.

use crate::jsonrpc::{RpcError, INVALID_PARAMS};
use serde_json::{Map, Value};

/// The most addresses in a `logs` filter (geth's `maxAddresses`).
pub const MAX_ADDRESSES: usize = 1_000;
/// The most topic positions in a `logs` filter (geth's `maxTopics`, LOG0..LOG4).
pub const MAX_TOPICS: usize = 4;
/// The most alternatives in one topic position (geth's `maxSubTopics`).
pub const MAX_SUB_TOPICS: usize = 1_000;

/// What a subscription delivers (geth's pub/sub API).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `newHeads`: each new block header.
    NewHeads,
    /// `logs` with an optional filter `{address, topics}`: each matching log.
    Logs,
    /// `newPendingTransactions` (optionally with `true`: whole transactions): each transaction
    /// the node's pool accepts.
    NewPendingTransactions,
}

/// A checked `eth_subscribe` call: its kind, and its params as the relay sends them upstream
/// (JSON text, made anew: `["newHeads"]`, `["logs",{"address":[...],"topics":[...]}]` with
/// lowercase hex, `["newPendingTransactions",true]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscribe {
    /// The kind.
    pub kind: Kind,
    /// The params as sent upstream and kept for a resubscription.
    pub params: String,
}

fn invalid(why: impl Into<String>) -> RpcError {
    RpcError::new(INVALID_PARAMS, format!("invalid params: {}", why.into()))
}

/// A 0x-prefixed hex string of exactly `bytes` bytes, lowercased.
fn hex_of(value: &Value, bytes: usize, what: &str) -> Result<Value, RpcError> {
    let text = value
        .as_str()
        .ok_or_else(|| invalid(format!("{what} must be a hex string")))?;
    let digits = text
        .strip_prefix("0x")
        .filter(|d| d.len() == bytes * 2 && d.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| invalid(format!("{what} must be 0x and {} hex digits", bytes * 2)))?;
    Ok(Value::String(format!("0x{}", digits.to_ascii_lowercase())))
}

/// A filter's `address`: one address or a list of them.
fn addresses(value: &Value) -> Result<Value, RpcError> {
    match value {
        Value::Array(list) if list.len() > MAX_ADDRESSES => Err(invalid(format!(
            "more than {MAX_ADDRESSES} addresses in a filter"
        ))),
        Value::Array(list) => Ok(Value::Array(
            list.iter()
                .map(|a| hex_of(a, 20, "an address"))
                .collect::<Result<_, _>>()?,
        )),
        one => hex_of(one, 20, "an address"),
    }
}

/// A filter's `topics`: at most four positions, each null, a topic or a list of topics (or
/// nulls).
fn topics(value: &Value) -> Result<Value, RpcError> {
    let Value::Array(positions) = value else {
        return Err(invalid("topics must be an array"));
    };
    if positions.len() > MAX_TOPICS {
        return Err(invalid(format!(
            "more than {MAX_TOPICS} topics in a filter"
        )));
    }
    let topic = |t: &Value| match t {
        Value::Null => Ok(Value::Null),
        t => hex_of(t, 32, "a topic"),
    };
    let positions = positions
        .iter()
        .map(|p| match p {
            Value::Array(any) if any.len() > MAX_SUB_TOPICS => Err(invalid(format!(
                "more than {MAX_SUB_TOPICS} topics in one position"
            ))),
            Value::Array(any) => Ok(Value::Array(
                any.iter().map(topic).collect::<Result<_, _>>()?,
            )),
            one => topic(one),
        })
        .collect::<Result<_, _>>()?;
    Ok(Value::Array(positions))
}

impl Subscribe {
    /// Checks `params` (`[kind, options?]`) and makes them anew.
    ///
    /// # Errors
    /// -32602 saying what is wrong: not an array, an unsupported kind, options a kind does not
    /// take, a filter that is not an object of `address` and `topics` within the limits, a
    /// malformed address or topic.
    pub fn parse(params: &Value) -> Result<Subscribe, RpcError> {
        let Some(items) = params.as_array() else {
            return Err(invalid("eth_subscribe takes [kind, options?]"));
        };
        let name = items.first().and_then(Value::as_str);
        let options = items.get(1);
        if items.len() > 2 {
            return Err(invalid("eth_subscribe takes [kind, options?]"));
        }
        let (kind, params) = match (name, options) {
            (Some("newHeads"), None) => (Kind::NewHeads, Value::Array(vec!["newHeads".into()])),
            (Some("newHeads"), Some(_)) => return Err(invalid("newHeads takes no options")),
            (Some("newPendingTransactions"), None | Some(Value::Bool(false))) => (
                Kind::NewPendingTransactions,
                Value::Array(vec!["newPendingTransactions".into()]),
            ),
            (Some("newPendingTransactions"), Some(Value::Bool(true))) => (
                Kind::NewPendingTransactions,
                Value::Array(vec!["newPendingTransactions".into(), true.into()]),
            ),
            (Some("newPendingTransactions"), Some(_)) => {
                return Err(invalid("newPendingTransactions takes true or false"))
            }
            (Some("logs"), options) => {
                let mut filter = Map::new();
                match options {
                    None | Some(Value::Null) => {}
                    Some(Value::Object(given)) => {
                        if let Some(unknown) = given
                            .keys()
                            .find(|k| !matches!(k.as_str(), "address" | "topics"))
                        {
                            return Err(invalid(format!(
                                "a logs subscription's filter takes address and topics, not {unknown:?}"
                            )));
                        }
                        if let Some(a) = given.get("address").filter(|a| !a.is_null()) {
                            filter.insert("address".into(), addresses(a)?);
                        }
                        if let Some(t) = given.get("topics").filter(|t| !t.is_null()) {
                            filter.insert("topics".into(), topics(t)?);
                        }
                    }
                    Some(_) => return Err(invalid("a logs filter must be an object")),
                }
                let mut made = vec![Value::from("logs")];
                if !filter.is_empty() {
                    made.push(Value::Object(filter));
                }
                (Kind::Logs, Value::Array(made))
            }
            (Some(other), _) => {
                return Err(invalid(format!(
                "unsupported subscription {other:?}: newHeads, logs and newPendingTransactions are"
            )))
            }
            (None, _) => return Err(invalid("eth_subscribe takes [kind, options?]")),
        };
        Ok(Subscribe {
            kind,
            params: params.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn made(params: Value) -> Result<(Kind, String), i64> {
        Subscribe::parse(&params)
            .map(|s| (s.kind, s.params))
            .map_err(|e| e.code)
    }

    #[test]
    fn params_are_checked_whole_and_made_anew() {
        let address = format!("0x{}", "Ab".repeat(20));
        let topic = format!("0x{}", "cD".repeat(32));
        assert_eq!(
            made(json!(["newHeads"])),
            Ok((Kind::NewHeads, r#"["newHeads"]"#.into()))
        );
        assert_eq!(
            made(json!(["newPendingTransactions", true])),
            Ok((
                Kind::NewPendingTransactions,
                r#"["newPendingTransactions",true]"#.into()
            ))
        );
        let (kind, params) =
            made(json!(["logs", {"address": address, "topics": [topic, null, [topic, null]]}]))
                .unwrap();
        assert_eq!(kind, Kind::Logs);
        let lower_a = address.to_ascii_lowercase();
        let lower_t = topic.to_ascii_lowercase();
        assert_eq!(
            serde_json::from_str::<Value>(&params).unwrap(),
            json!(["logs", {"address": lower_a, "topics": [lower_t, null, [lower_t, null]]}])
        );
        assert_eq!(
            made(json!(["logs"])),
            Ok((Kind::Logs, r#"["logs"]"#.into()))
        );
        assert_eq!(
            made(json!(["logs", {}])),
            Ok((Kind::Logs, r#"["logs"]"#.into()))
        );
    }

    #[test]
    fn padding_extra_params_and_oversized_filters_are_refused() {
        let pad = "x".repeat(990_000);
        for bad in [
            json!(["newHeads", pad]),
            json!(["newHeads", {}, 1]),
            json!(["logs", {"address": [], "padding": pad}]),
            json!(["logs", {"address": pad}]),
            json!(["logs", {"topics": [null, null, null, null, null]}]),
            json!(["logs", {"address": vec![format!("0x{}", "00".repeat(20)); MAX_ADDRESSES + 1]}]),
            json!(["logs", {"topics": [vec![Value::Null; MAX_SUB_TOPICS + 1]]}]),
            json!(["logs", "0x01"]),
            json!(["newPendingTransactions", "yes"]),
            json!(["syncing"]),
            json!({}),
            Value::Null,
        ] {
            assert_eq!(
                made(bad.clone()).map(|_| ()),
                Err(-32602),
                "{:.80}",
                bad.to_string()
            );
        }
    }
}
