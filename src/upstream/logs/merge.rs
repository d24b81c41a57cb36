//! The pieces' answers as one ([`merge`]): each piece's `result` is a JSON array of logs in block
//! and log order, and the pieces come in block order, so the whole answer is their elements one
//! after another. Merged as text (each array's brackets taken off, the rest joined), never parsed
//! into values; within the answer size the relay allows.

use std::fmt;

/// Why the pieces could not be merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeError {
    /// A piece's result is not a JSON array (the upstream's text, at most 100 characters).
    NotAnArray(String),
    /// The merged answer would be over `MAX_UPSTREAM_RESPONSE_BYTES` (the limit, bytes).
    TooLarge(usize),
}

impl fmt::Display for MergeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MergeError::NotAnArray(text) => write!(f, "a piece's answer is not a list of logs: {text}"),
            MergeError::TooLarge(max) => write!(
                f,
                "the logs of the range are over {max} bytes (MAX_UPSTREAM_RESPONSE_BYTES): narrow the filter"
            ),
        }
    }
}

/// The results `parts` (each a JSON array's text, in block order) as one JSON array's text, at
/// most `max_bytes` long.
///
/// # Errors
/// [`MergeError::NotAnArray`] for a part that is not an array; [`MergeError::TooLarge`] over
/// `max_bytes`.
pub fn merge<S: AsRef<str>>(parts: &[S], max_bytes: usize) -> Result<String, MergeError> {
    let mut out = String::from("[");
    for part in parts {
        let part = part.as_ref().trim();
        let inner = part
            .strip_prefix('[')
            .and_then(|p| p.strip_suffix(']'))
            .ok_or_else(|| MergeError::NotAnArray(part.chars().take(100).collect()))?
            .trim();
        if inner.is_empty() {
            continue;
        }
        if out.len() > 1 {
            out.push(',');
        }
        out.push_str(inner);
        if out.len() + 1 > max_bytes {
            return Err(MergeError::TooLarge(max_bytes));
        }
    }
    out.push(']');
    Ok(out)
}

/// Each log's block number and hash in a piece's `result` (a JSON array of logs), in order: what
/// the reorg check compares with the chain's hashes. Only these two fields are read. `None` when
/// the text is not an array of logs carrying both.
pub fn log_blocks(result: &str) -> Option<Vec<(u64, String)>> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct At {
        block_number: String,
        block_hash: String,
    }
    let logs: Vec<At> = serde_json::from_str(result).ok()?;
    logs.into_iter()
        .map(|l| {
            let n = u64::from_str_radix(l.block_number.trim_start_matches("0x"), 16).ok()?;
            Some((n, l.block_hash.to_ascii_lowercase()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_join_in_order_and_empty_ones_vanish() {
        let a =
            r#"[{"blockNumber":"0x1","logIndex":"0x0"},{"blockNumber":"0x1","logIndex":"0x1"}]"#;
        let b = "[]";
        let c = r#" [ {"blockNumber":"0x9","logIndex":"0x0"} ] "#;
        let merged = merge(&[a, b, c], 1 << 20).unwrap();
        let v: serde_json::Value = serde_json::from_str(&merged).unwrap();
        assert_eq!(v.as_array().unwrap().len(), 3);
        assert_eq!(v[2]["blockNumber"], "0x9");
        assert_eq!(merge(&["[]", "[ ]"], 10).unwrap(), "[]");
        assert_eq!(merge::<&str>(&[], 10).unwrap(), "[]");
    }

    #[test]
    fn a_part_not_a_list_or_an_answer_too_large_is_refused() {
        assert!(matches!(
            merge(&["{\"a\":1}"], 100),
            Err(MergeError::NotAnArray(_))
        ));
        assert!(matches!(
            merge(&["null"], 100),
            Err(MergeError::NotAnArray(_))
        ));
        let big = format!("[\"{}\"]", "x".repeat(100));
        assert_eq!(merge(&[&big, &big], 150), Err(MergeError::TooLarge(150)));
    }

    #[test]
    fn the_blocks_of_the_logs_are_read_for_the_reorg_check() {
        let logs = r#"[{"address":"0x1","blockNumber":"0x10","blockHash":"0xAB","data":"0x"},{"blockNumber":"0x11","blockHash":"0xcd"}]"#;
        assert_eq!(
            log_blocks(logs).unwrap(),
            vec![(16, "0xab".to_string()), (17, "0xcd".to_string())]
        );
        assert_eq!(log_blocks("[]").unwrap(), vec![]);
        assert_eq!(log_blocks(r#"[{"blockNumber":"0x1"}]"#), None);
    }
}
