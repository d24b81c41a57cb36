//! Structured log lines: one JSON object per line, `{"event": ..., ...fields}`, for `wrangler tail`
//! and Workers Logs filters such as `event = "fail_open"`.

use serde_json::{Map, Value};

/// One JSON log line for `event` with `fields` in the given order (keys are sorted on output).
pub fn line(event: &str, fields: &[(&str, Value)]) -> String {
    let mut obj = Map::new();
    obj.insert("event".into(), event.into());
    for (key, value) in fields {
        obj.insert((*key).into(), value.clone());
    }
    Value::Object(obj).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn is_one_json_object() {
        let text = line("fail_open", &[("sender", json!("0xab")), ("n", json!(2))]);
        assert!(!text.contains('\n'));
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v, json!({"event": "fail_open", "sender": "0xab", "n": 2}));
    }
}
