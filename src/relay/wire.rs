//! The Worker's calls to a sender's Durable Object (both ends are this crate):
//!
//! - `POST /send` with `{"chain_id":N,"txs":[…]}`: a sender's transactions of one HTTP request
//!   (one, or every member of a batch), each in the one serde form of [`SignedTx`] (its hash,
//!   nonce, chain id, raw bytes and send method), and the chain id the Worker checked them against
//!   (the object resolves `UPSTREAM_POOL=auto` with it, and keeps it with its rows; an unprotected
//!   legacy transaction carries none of its own; absent from an earlier release's Worker). The
//!   object enqueues them all in one turn, so a shuffled batch is sorted by nonce without gap
//!   waits. The answer is a JSON array, one [`WireAnswer`] per transaction, in the same order.
//! - `POST /cancel` with `{"hash":"0x…"}`: the sender's cancel of a private transaction
//!   (`eth_cancelPrivateTransaction`), one [`WireAnswer`].
//! - `GET /pending-count`: the sender's pending count, one [`WireAnswer`].
//! - `GET /state`: the per-sender view ([`crate::ordering::sender::Sender::view`]).
//! - `GET /tx/0x…`: what became of one transaction
//!   ([`crate::ordering::sender::Sender::status`]), or HTTP 404.

use crate::jsonrpc::Answer;
use crate::ordering::tx::{SendMethod, SignedTx};
use crate::transaction::TxHash;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::fmt;

/// The path of a send.
pub const SEND_PATH: &str = "/send";
/// The path of a cancel of a private transaction.
pub const CANCEL_PATH: &str = "/cancel";
/// The path of the pending-count question.
pub const PENDING_COUNT_PATH: &str = "/pending-count";
/// The path of the per-sender view.
pub const STATE_PATH: &str = "/state";
/// The path prefix of one transaction's state (`/tx/0x…`): the object answers on the path of the
/// public route.
pub use super::status::TX_PREFIX;
/// The response header of an object instance that can no longer use its storage, a newer one
/// having superseded it (HTTP 503). Its value is the one earlier releases sent, so that a Worker
/// and an object of two releases still understand each other during a deploy.
pub const SUPERSEDED_HEADER: &str = "x-object-replaced";

/// What is wrong with a body on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// Not this format (serde's message).
    Malformed(String),
    /// A send of no transaction.
    NoTransaction,
    /// An answer of `got` results to a send of `want` transactions.
    Count {
        /// How many answers came.
        got: usize,
        /// How many transactions were sent.
        want: usize,
    },
    /// A member that is not an answer.
    NotAnAnswer,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Malformed(why) => write!(f, "malformed: {why}"),
            WireError::NoTransaction => write!(f, "a send of no transaction"),
            WireError::Count { got, want } => {
                write!(
                    f,
                    "Durable Object answered {got} results for {want} transactions"
                )
            }
            WireError::NotAnAnswer => write!(f, "Durable Object answer: not an answer"),
        }
    }
}

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

/// The body of a send: `{"chain_id": N, "txs": [...]}`, borrowed to write it, owned to read it.
#[derive(Serialize, Deserialize)]
struct SendBody<T> {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    chain_id: Option<u64>,
    txs: T,
}

/// A send as the object reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Send {
    /// The chain id the Worker checked the transactions against (`None` from a Worker of an
    /// earlier release).
    pub chain_id: Option<u64>,
    /// The transactions, in request order.
    pub txs: Vec<SignedTx>,
}

/// The body of a send of `txs`, checked against `chain_id`.
pub fn encode_send(chain_id: Option<u64>, txs: &[&SignedTx]) -> String {
    serde_json::to_string(&SendBody { chain_id, txs }).expect("a transaction always serializes")
}

/// A transaction of a send as the releases before [`SignedTx`] wrote it: its upstream request
/// text, and whether it was a send-and-wait call. Read so that a Worker of the previous release
/// still reaches an object of this one while a deploy rolls out.
#[derive(Deserialize)]
struct EarlierTx {
    hash: String,
    request: Box<RawValue>,
    #[serde(default)]
    sync: bool,
}

/// Reads one transaction of a send in either form (serde's untagged enums cannot hold a
/// [`RawValue`], so the forms are tried in turn).
fn read_tx(text: &RawValue) -> Result<SignedTx, WireError> {
    let signed_error = match serde_json::from_str::<SignedTx>(text.get()) {
        Ok(tx) => return Ok(tx),
        Err(e) => e,
    };
    let Ok(earlier) = serde_json::from_str::<EarlierTx>(text.get()) else {
        return Err(WireError::Malformed(signed_error.to_string()));
    };
    let hash = crate::hex::decode_array(&earlier.hash)
        .ok_or_else(|| WireError::Malformed(format!("bad hash {:.80}", earlier.hash)))?;
    let mut tx = SignedTx::from_request_text(earlier.request.get(), &hash)
        .map_err(|e| WireError::Malformed(e.to_string()))?;
    if earlier.sync {
        // The Worker waits for the receipt; the object only needs to know it is one.
        tx.method = SendMethod::Sync { timeout_ms: 0 };
    }
    Ok(tx)
}

/// Reads the body of a send (in the earlier releases' form too).
///
/// # Errors
/// [`WireError::Malformed`] (not this format, a hash that is not 32 bytes of hex, a request of
/// the earlier form that is not a send of that hash...), [`WireError::NoTransaction`].
pub fn decode_send(body: &str) -> Result<Send, WireError> {
    let parsed: SendBody<Vec<&RawValue>> =
        serde_json::from_str(body).map_err(|e| WireError::Malformed(e.to_string()))?;
    if parsed.txs.is_empty() {
        return Err(WireError::NoTransaction);
    }
    Ok(Send {
        chain_id: parsed.chain_id,
        txs: parsed
            .txs
            .into_iter()
            .map(read_tx)
            .collect::<Result<_, _>>()?,
    })
}

/// The body of a cancel of `hash`: `{"hash":"0x…"}`.
pub fn encode_cancel(hash: &TxHash) -> String {
    serde_json::json!({ "hash": crate::hex::encode(hash) }).to_string()
}

/// Reads the body of a cancel: the transaction's hash.
///
/// # Errors
/// [`WireError::Malformed`] when it is not `{"hash": "0x" + 64 hex digits}`.
pub fn decode_cancel(body: &str) -> Result<TxHash, WireError> {
    #[derive(Deserialize)]
    struct Cancel {
        hash: String,
    }
    let cancel: Cancel =
        serde_json::from_str(body).map_err(|e| WireError::Malformed(e.to_string()))?;
    crate::hex::decode_array(&cancel.hash)
        .ok_or_else(|| WireError::Malformed(format!("not a transaction hash: {:.80}", cancel.hash)))
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
pub fn decode_answers(body: &str, count: usize) -> Result<Vec<WireAnswer>, WireError> {
    let parts: Vec<&RawValue> =
        serde_json::from_str(body).map_err(|e| WireError::Malformed(e.to_string()))?;
    if parts.len() != count {
        return Err(WireError::Count {
            got: parts.len(),
            want: count,
        });
    }
    parts
        .into_iter()
        .map(|raw| WireAnswer::decode(raw.get()).ok_or(WireError::NotAnAnswer))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::RpcError;

    #[test]
    fn a_send_round_trips_in_the_one_form() {
        let tx = |hash: u8, nonce, method| SignedTx {
            hash: [hash; 32],
            nonce,
            chain_id: (hash == 8).then_some(296),
            raw: vec![0x02, 0xf8, hash],
            method,
            public_after_blocks: None,
            self_cancel: false,
        };
        let txs = vec![
            tx(7, 5, SendMethod::Plain),
            tx(8, 4, SendMethod::Sync { timeout_ms: 500 }),
        ];
        let body = encode_send(Some(296), &txs.iter().collect::<Vec<_>>());
        assert_eq!(
            decode_send(&body).unwrap(),
            Send {
                chain_id: Some(296),
                txs: txs.clone()
            }
        );
        // An earlier release's Worker sends no chain id.
        let earlier = encode_send(None, &txs.iter().collect::<Vec<_>>());
        assert!(earlier.starts_with(r#"{"txs":"#), "{earlier}");
        assert_eq!(decode_send(&earlier).unwrap().chain_id, None);
        assert_eq!(decode_send(r#"{"txs":[]}"#), Err(WireError::NoTransaction));
        assert!(matches!(
            decode_send(
                r#"{"txs":[{"hash":"0x12","nonce":1,"raw":"0x","method":{"kind":"plain"}}]}"#
            ),
            Err(WireError::Malformed(_))
        ));
    }

    #[test]
    fn a_send_of_the_earlier_form_is_read_as_a_signed_tx() {
        // A legacy transfer (EIP-155, chain id 1) of the ethereum/tests vectors' shape, signed
        // by the key 0x46..46 (EIP-155's example).
        let raw = "0xf86c098504a817c800825208943535353535353535353535353535353535353535880de0b6b3a76400008025a028ef61340bd939bc2195fe537567866003e1a15d3c71ff63e1590620aa636276a067cbe9d8997f761aecb703304b3800ccf555c9f3dc64214b297fb1966a3b6d83";
        let decoded = crate::transaction::decode(&crate::hex::decode(raw).unwrap()).unwrap();
        let hash = crate::hex::encode(&decoded.hash);
        let request = format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"eth_sendRawTransaction","params":["{raw}"]}}"#
        );
        let body = format!(
            r#"{{"txs":[{{"hash":"{hash}","nonce":9,"request":{request},"sync":true,"chain_id":1}}]}}"#
        );
        let txs = decode_send(&body).unwrap().txs;
        assert_eq!(txs.len(), 1);
        assert_eq!(
            (txs[0].hash, txs[0].nonce, txs[0].chain_id),
            (decoded.hash, 9, Some(1))
        );
        assert!(txs[0].method.is_sync());
        assert_eq!(crate::hex::encode(&txs[0].raw), raw);
        // Another hash than its bytes': refused, never trusted.
        let wrong = body.replace(&hash, &format!("0x{}", "00".repeat(32)));
        assert!(matches!(decode_send(&wrong), Err(WireError::Malformed(_))));
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
        assert_eq!(
            decode_answers(&text, 3),
            Err(WireError::Count { got: 2, want: 3 })
        );
        assert!(decode_answers("{}", 1).is_err());
        let one = WireAnswer::plain(Answer::Result("\"0x5\"".into()));
        assert_eq!(WireAnswer::decode(&one.encode()), Some(one));
    }
}
