//! `GET /tx/{hash}`: what became of one transaction (`queued`, `sent`, `pending`, `included`,
//! `replaced`, `expired` or `failed`; see [`crate::ordering::sender::Sender::status`]), answered by
//! its sender's Durable Object, as Flashbots Protect's status route answers from its own records.
//! A hash reveals nothing the chain will not.
//!
//! The sender is `?sender=0x…` when the client gives it, else the `from` of the upstream's
//! `eth_getTransactionByHash`; a transaction the upstream no longer has (a dropped one) is found
//! with `?sender=` only.

use super::{Backend, Relay};
use crate::address::Address;
use crate::hex;
use crate::transaction::TxHash;
use crate::upstream::CallKind;
use serde_json::{json, Value};

/// The route's prefix; the rest of the path is the transaction hash.
pub const TX_PREFIX: &str = "/tx/";

/// The hash named by a `/tx/{hash}` path (`0x` + 64 hex digits).
///
/// # Errors
/// Why the rest of the path is not a transaction hash.
pub fn hash_of_path(path: &str) -> Option<Result<TxHash, String>> {
    let rest = path.strip_prefix(TX_PREFIX)?;
    Some(
        hex::decode_array(rest)
            .ok_or_else(|| format!("not a transaction hash (0x and 64 hex digits): {rest:.80}")),
    )
}

/// The `sender` of a query string (`sender=0x…`), when given.
///
/// # Errors
/// Why it is not an address.
pub fn sender_of_query(query: Option<&str>) -> Option<Result<Address, String>> {
    let value = query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("sender="))?;
    Some(
        value
            .parse::<Address>()
            .map_err(|e| format!("sender is not an address: {e}")),
    )
}

impl<B: Backend> Relay<'_, B> {
    /// The answer to `GET /tx/{hash}` (`sender`: from the query): HTTP status and JSON body. 200
    /// with the state; 404 with `"status": "unknown"` when neither the sender's object nor (for
    /// finding the sender) the upstream knows it; 503 when the object can't be reached. A
    /// transaction in a block that the object no longer remembers (it hibernated, or restarted,
    /// after its check found it included: its memory of final statuses is not stored) is answered
    /// from the upstream's `eth_getTransactionByHash`: `"status": "included"` with its `block`
    /// and `"known_by": "upstream"`.
    pub async fn tx_status(&self, hash: &TxHash, sender: Option<Address>) -> (u16, String) {
        let text = hex::encode(hash);
        let mut upstream = None;
        let sender = match sender {
            Some(sender) => Some(sender),
            None => {
                upstream = self.upstream_tx(&text).await;
                upstream.as_ref().and_then(from_of)
            }
        };
        let Some(sender) = sender else {
            let body = json!({
                "hash": text, "status": "unknown",
                "error": "the upstream does not know this transaction; add ?sender=0x... to ask the relay",
            });
            return (404, body.to_string());
        };
        match self.backend.tx_status(&sender, hash).await {
            Ok(Some(state)) => (200, state),
            Ok(None) => {
                if upstream.is_none() {
                    upstream = self.upstream_tx(&text).await;
                }
                let mined = upstream.as_ref().and_then(|tx| {
                    let block = tx.get("blockNumber")?.as_str()?;
                    let nonce = tx.get("nonce")?.as_str()?;
                    Some((
                        hex::decode_quantity(block).ok()?,
                        hex::decode_quantity(nonce).ok()?,
                    ))
                });
                if let Some((block, nonce)) = mined {
                    let body = json!({
                        "hash": text, "sender": sender.to_string(), "nonce": nonce,
                        "status": "included", "block": block, "known_by": "upstream",
                    });
                    return (200, body.to_string());
                }
                let body =
                    json!({ "hash": text, "sender": sender.to_string(), "status": "unknown" });
                (404, body.to_string())
            }
            Err(error) => {
                let body = json!({
                    "hash": text,
                    "error": format!(
                        "the sender's Durable Object can't be reached: {}",
                        self.config.redact(error.why())
                    ),
                });
                (503, body.to_string())
            }
        }
    }

    /// The `from` of the upstream's `eth_getTransactionByHash`, when it has the transaction.
    pub(super) async fn sender_of(&self, hash: &str) -> Option<Address> {
        from_of(&self.upstream_tx(hash).await?)
    }

    /// The upstream's `eth_getTransactionByHash` result, when it has the transaction.
    async fn upstream_tx(&self, hash: &str) -> Option<Value> {
        let request = json!({
            "jsonrpc": "2.0", "id": 1, "method": "eth_getTransactionByHash", "params": [hash],
        })
        .to_string();
        let reply = self
            .backend
            .post(
                &request,
                CallKind::OwnByHash,
                self.config.upstream_timeout_ms,
            )
            .await
            .ok()?;
        let mut value: Value = serde_json::from_str(&reply.body).ok()?;
        Some(value.get_mut("result")?.take()).filter(Value::is_object)
    }
}

/// The `from` of a transaction object (`eth_getTransactionByHash`'s result).
fn from_of(tx: &Value) -> Option<Address> {
    tx.get("from")?.as_str()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_queries() {
        let hash = format!("0x{}", "ab".repeat(32));
        assert_eq!(hash_of_path(&format!("/tx/{hash}")), Some(Ok([0xab; 32])));
        assert!(hash_of_path("/tx/0x12").unwrap().is_err());
        assert_eq!(hash_of_path("/senders/0x12"), None);
        let sender = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266";
        assert_eq!(
            sender_of_query(Some(&format!("a=1&sender={sender}")))
                .unwrap()
                .unwrap()
                .to_string(),
            sender
        );
        assert!(sender_of_query(Some("sender=nope")).unwrap().is_err());
        assert_eq!(sender_of_query(Some("a=1")), None);
        assert_eq!(sender_of_query(None), None);
    }
}
