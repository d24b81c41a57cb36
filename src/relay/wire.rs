//! The Worker's calls to a sender's Durable Object, as JSON text (both ends are this crate):
//!
//! - `POST /send` with `{"txs":[{"hash":"0x…","nonce":5,"request":{…},"sync":false,"chain_id":1}, …]}`:
//!   a sender's transactions of one HTTP request (one, or every member of a batch), each with its
//!   hash, its nonce, the JSON-RPC request to send upstream (the client's, unchanged; for a
//!   send-and-wait call, the plain `eth_sendRawTransaction` of its bytes), whether it is a
//!   send-and-wait call, and its chain id (absent for an unprotected legacy transaction; the
//!   object resolves `UPSTREAM_POOL=auto` with it). The object enqueues them all in one
//!   turn, so a shuffled batch is sorted by nonce without gap waits. The answer is a JSON array, one
//!   [`Answer::to_wire`] object per transaction, in the same order.
//! - `GET /next-nonce`: `{"next_nonce": n}` (or `null`), the sender's next nonce after what its
//!   object accepted within the idempotency window.
//! - `GET /state`: the per-sender view ([`crate::ordering::sender::Sender::view`]).
//! - `GET /tx/0x…`: what became of one transaction
//!   ([`crate::ordering::sender::Sender::status`]), or HTTP 404.

use crate::hex;
use crate::jsonrpc::Answer;
use crate::transaction::TxHash;
use serde::Deserialize;
use serde_json::value::RawValue;

/// The path of a send.
pub const SEND_PATH: &str = "/send";
/// The path of the pending-count question.
pub const PENDING_COUNT_PATH: &str = "/pending-count";
/// The response header of an object instance that can no longer use its storage, a newer one
/// having superseded it (HTTP 503). Its value is the one earlier releases sent, so that a Worker
/// and an object of two releases still understand each other during a deploy.
pub const SUPERSEDED_HEADER: &str = "x-object-replaced";

/// One answer from a sender's object: what the client gets, and for a refusal the client may
/// retry, the `Retry-After` in seconds. On the wire: `{"result": ...}` or `{"error": ...}`, with
/// `"retry_after": s` when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireAnswer {
    /// The answer.
    pub answer: Answer,
    /// The `Retry-After`, s.
    pub retry_after_s: Option<u64>,
}

impl WireAnswer {
    /// An answer without `Retry-After`.
    pub fn plain(answer: Answer) -> Self {
        WireAnswer {
            answer,
            retry_after_s: None,
        }
    }

    /// The JSON text.
    pub fn encode(&self) -> String {
        let wire = self.answer.to_wire();
        match self.retry_after_s {
            Some(s) => format!(r#"{{"retry_after":{s},{}"#, &wire[1..]),
            None => wire,
        }
    }

    /// Reads one answer; `None` when it is not one.
    pub fn decode(text: &str) -> Option<Self> {
        #[derive(Deserialize)]
        struct RetryAfter {
            retry_after: Option<u64>,
        }
        let answer = Answer::parse(text)?;
        let retry_after_s = serde_json::from_str::<RetryAfter>(text)
            .ok()
            .and_then(|r| r.retry_after);
        Some(WireAnswer {
            answer,
            retry_after_s,
        })
    }
}
/// The path of the per-sender view.
pub const STATE_PATH: &str = "/state";
/// The path prefix of one transaction's state (`/tx/0x…`): the object answers on the path of the
/// public route.
pub use super::status::TX_PREFIX;

/// One transaction handed to its sender's object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireTx {
    /// The transaction hash.
    pub hash: TxHash,
    /// Its nonce.
    pub nonce: u64,
    /// The request text sent upstream with the original signed bytes.
    pub request: String,
    /// A send-and-wait call (EIP-7966).
    pub sync: bool,
    /// Its chain id (EIP-155), when it has one.
    pub chain_id: Option<u64>,
}

#[derive(Deserialize)]
struct SendBody<'a> {
    #[serde(borrow)]
    txs: Vec<TxBody<'a>>,
}

#[derive(Deserialize)]
struct TxBody<'a> {
    hash: &'a str,
    nonce: u64,
    #[serde(borrow)]
    request: &'a RawValue,
    #[serde(default)]
    sync: bool,
    #[serde(default)]
    chain_id: Option<u64>,
}

/// One transaction of a send, as the Worker hands it over.
#[derive(Debug, Clone, Copy)]
pub struct SendMember<'a> {
    /// The transaction hash.
    pub hash: &'a TxHash,
    /// Its nonce.
    pub nonce: u64,
    /// The request text to send upstream.
    pub request: &'a str,
    /// A send-and-wait call.
    pub sync: bool,
    /// Its chain id, when it has one.
    pub chain_id: Option<u64>,
}

/// The body of a send.
pub fn encode_send<'a>(txs: impl IntoIterator<Item = SendMember<'a>>) -> String {
    let members: Vec<String> = txs
        .into_iter()
        .map(|tx| {
            let chain_id = tx
                .chain_id
                .map_or_else(String::new, |id| format!(r#","chain_id":{id}"#));
            format!(
                r#"{{"hash":"{}","nonce":{},"request":{},"sync":{}{chain_id}}}"#,
                hex::encode(tx.hash),
                tx.nonce,
                tx.request,
                tx.sync
            )
        })
        .collect();
    format!(r#"{{"txs":[{}]}}"#, members.join(","))
}

/// Reads the body of a send.
///
/// # Errors
/// What is malformed (not this format, a hash that is not 32 bytes of hex, no transaction).
pub fn decode_send(body: &str) -> Result<Vec<WireTx>, String> {
    let parsed: SendBody = serde_json::from_str(body).map_err(|e| format!("send body: {e}"))?;
    if parsed.txs.is_empty() {
        return Err("send body: no transaction".into());
    }
    parsed
        .txs
        .into_iter()
        .map(|tx| {
            let hash: TxHash = hex::decode_array(tx.hash)
                .ok_or_else(|| format!("send body: bad hash {:?}", tx.hash))?;
            Ok(WireTx {
                hash,
                nonce: tx.nonce,
                request: tx.request.get().to_string(),
                sync: tx.sync,
                chain_id: tx.chain_id,
            })
        })
        .collect()
}

/// The object's answer to a send.
pub fn encode_answers(answers: &[WireAnswer]) -> String {
    let parts: Vec<String> = answers.iter().map(WireAnswer::encode).collect();
    format!("[{}]", parts.join(","))
}

/// Reads the object's answer to a send of `count` transactions.
///
/// # Errors
/// When it is not a JSON array of `count` answers.
pub fn decode_answers(body: &str, count: usize) -> Result<Vec<WireAnswer>, String> {
    let parts: Vec<&RawValue> =
        serde_json::from_str(body).map_err(|e| format!("Durable Object answer: {e}"))?;
    if parts.len() != count {
        return Err(format!(
            "Durable Object answered {} results for {count} transactions",
            parts.len()
        ));
    }
    parts
        .into_iter()
        .map(|raw| {
            WireAnswer::decode(raw.get())
                .ok_or_else(|| "Durable Object answer: not an answer".into())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::RpcError;

    #[test]
    fn a_send_round_trips_with_the_request_unchanged() {
        let request =
            r#"{"jsonrpc":"2.0","id":"a b","method":"eth_sendRawTransaction","params":["0x02f8"]}"#;
        let member = |hash, nonce, sync| SendMember {
            hash,
            nonce,
            request,
            sync,
            chain_id: sync.then_some(296),
        };
        let body = encode_send([member(&[7u8; 32], 5, false), member(&[8u8; 32], 4, true)]);
        let txs = decode_send(&body).unwrap();
        assert_eq!(txs.len(), 2);
        assert_eq!(
            (txs[0].hash, txs[0].nonce, txs[0].sync),
            ([7; 32], 5, false)
        );
        assert_eq!((txs[1].request.as_str(), txs[1].sync), (request, true));
        assert_eq!((txs[0].chain_id, txs[1].chain_id), (None, Some(296)));
        assert!(decode_send(r#"{"txs":[]}"#).is_err());
        assert!(decode_send(r#"{"txs":[{"hash":"0x12","nonce":1,"request":{}}]}"#).is_err());
    }

    #[test]
    fn answers_round_trip_in_order_with_retry_after() {
        let answers = vec![
            WireAnswer::plain(Answer::hash(&[1; 32])),
            WireAnswer {
                answer: Answer::error(&RpcError::new(-32005, "too many queued")),
                retry_after_s: Some(1),
            },
        ];
        let text = encode_answers(&answers);
        assert!(text.contains(r#"{"retry_after":1,"error":{"#), "{text}");
        assert_eq!(decode_answers(&text, 2).unwrap(), answers);
        assert!(decode_answers(&text, 3).is_err());
        assert!(decode_answers("{}", 1).is_err());
        let one = WireAnswer::plain(Answer::Result("\"0x5\"".into()));
        assert_eq!(WireAnswer::decode(&one.encode()), Some(one));
    }
}
