//! One answer from several upstreams' answers to the same read, for the questions whose best
//! answer is the most any upstream knows: a sender's transaction count and the head block number
//! (the highest: one node may lag another; each node's answer also teaches its head,
//! [`crate::upstream::heads`]), and a transaction or its receipt by hash (any node that has it). Every
//! other request takes one upstream's answer.

use serde_json::Value;

/// The methods whose calls are asked of every healthy upstream at once, their answers merged
/// (a client's: [`crate::upstream::route::CallKind::ReadMerged`]; the relay's own count, lookup by
/// hash and receipt).
pub const FAN_OUT_METHODS: [&str; 4] = [
    "eth_blockNumber",
    "eth_getTransactionCount",
    "eth_getTransactionByHash",
    "eth_getTransactionReceipt",
];

/// Each request's (id as JSON text, method), in order.
fn methods(request: &str) -> Vec<(String, String)> {
    let members = match serde_json::from_str::<Value>(request) {
        Ok(Value::Array(items)) => items,
        Ok(one) => vec![one],
        Err(_) => return Vec::new(),
    };
    members
        .iter()
        .filter_map(|r| {
            let method = r.get("method")?.as_str()?.to_string();
            Some((r.get("id").unwrap_or(&Value::Null).to_string(), method))
        })
        .collect()
}

/// The quantity of a hex `result` (`"0x1f"`), when it is one.
fn quantity(response: &Value) -> Option<u128> {
    let hex = response.get("result")?.as_str()?.strip_prefix("0x")?;
    u128::from_str_radix(hex, 16).ok()
}

fn has_result(response: &Value) -> bool {
    response.get("result").is_some_and(|r| !r.is_null())
}

/// The merged answer to `request` from `answers` (each upstream's body text, in preference
/// order; unparsable ones are skipped): per response id, `eth_getTransactionCount` and
/// `eth_blockNumber` take the answer with the highest quantity, any other method the first answer with a non-null `result`,
/// or else the first answer. The shape (object or batch array, and the order of a batch) is the
/// first parsable answer's. `None` when no answer parses.
pub fn merge(request: &str, answers: &[&str]) -> Option<String> {
    let parsed: Vec<Value> = answers
        .iter()
        .filter_map(|a| serde_json::from_str(a).ok())
        .collect();
    let first = parsed.first()?;
    let methods = methods(request);
    let method_of = |id: &str| {
        methods
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, m)| m.as_str())
    };
    let responses = |v: &Value| -> Vec<Value> {
        match v {
            Value::Array(items) => items.clone(),
            one => vec![one.clone()],
        }
    };
    let all: Vec<Vec<Value>> = parsed.iter().map(responses).collect();
    let pick = |response: &Value| -> Value {
        let id_value = response.get("id").unwrap_or(&Value::Null);
        let id = id_value.to_string();
        let same: Vec<&Value> = all
            .iter()
            .filter_map(|r| {
                r.iter()
                    .find(|x| x.get("id").unwrap_or(&Value::Null) == id_value)
            })
            .collect();
        let chosen = match method_of(&id) {
            Some("eth_getTransactionCount" | "eth_blockNumber") => same
                .iter()
                .filter(|r| quantity(r).is_some())
                .max_by_key(|r| quantity(r))
                .copied(),
            _ => same.iter().find(|r| has_result(r)).copied(),
        };
        chosen.unwrap_or(response).clone()
    };
    let merged = match first {
        Value::Array(items) => Value::Array(items.iter().map(pick).collect()),
        one => pick(one),
    };
    Some(merged.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_highest_count_and_any_found_transaction() {
        let request = r#"[{"jsonrpc":"2.0","id":1,"method":"eth_getTransactionCount","params":["0xab","pending"]},
            {"jsonrpc":"2.0","id":2,"method":"eth_getTransactionByHash","params":["0x01"]},
            {"jsonrpc":"2.0","id":3,"method":"eth_getBlockByNumber","params":["0x0",false]}]"#;
        let lagging = r#"[{"jsonrpc":"2.0","id":1,"result":"0x5"},{"jsonrpc":"2.0","id":2,"result":null},{"jsonrpc":"2.0","id":3,"result":{"hash":"0xg"}}]"#;
        let ahead = r#"[{"jsonrpc":"2.0","id":2,"result":{"hash":"0x01"}},{"jsonrpc":"2.0","id":1,"result":"0x7"},{"jsonrpc":"2.0","id":3,"result":{"hash":"0xg"}}]"#;
        let merged: Value =
            serde_json::from_str(&merge(request, &[lagging, ahead]).unwrap()).unwrap();
        assert_eq!(merged[0]["result"], "0x7", "the highest count");
        assert_eq!(merged[1]["result"]["hash"], "0x01", "found by one of them");
        assert_eq!(merged[2]["result"]["hash"], "0xg");
        assert_eq!(merged[0]["id"], 1, "the preferred answer's order");
    }

    #[test]
    fn single_requests_errors_and_garbage() {
        let request =
            r#"{"jsonrpc":"2.0","id":"a","method":"eth_getTransactionReceipt","params":["0x01"]}"#;
        let none = r#"{"jsonrpc":"2.0","id":"a","result":null}"#;
        let some = r#"{"jsonrpc":"2.0","id":"a","result":{"status":"0x1"}}"#;
        let merged: Value =
            serde_json::from_str(&merge(request, &["<html>", none, some]).unwrap()).unwrap();
        assert_eq!(merged["result"]["status"], "0x1");
        assert_eq!(
            merge(request, &[none]).unwrap(),
            serde_json::from_str::<Value>(none).unwrap().to_string()
        );
        let error = r#"{"jsonrpc":"2.0","id":"a","error":{"code":-32000,"message":"x"}}"#;
        let merged: Value = serde_json::from_str(&merge(request, &[error]).unwrap()).unwrap();
        assert_eq!(merged["error"]["code"], -32000);
        assert_eq!(merge(request, &["nope"]), None);
    }
}
