//! One transaction on its way from the Worker to the upstream and back ([`SignedTx`]): what the
//! relay decoded and checked of it, its original signed bytes (never re-signed), and how its
//! client sent it ([`SendMethod`]). The Worker makes it from a checked request, its sender's
//! Durable Object receives it in the one serde form below, queues and stores it, and the holder
//! sends [`SignedTx::request`] upstream.

use crate::jsonrpc::{
    self, Request, SEND_RAW_TRANSACTION, SEND_RAW_TRANSACTION_CONDITIONAL,
    SEND_RAW_TRANSACTION_SYNC,
};
use crate::transaction::TxHash;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use std::fmt;

/// How a client sent a raw transaction; all three are taken through the sender's order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SendMethod {
    /// `eth_sendRawTransaction`.
    Plain,
    /// `eth_sendRawTransactionSync` (EIP-7966): sent upstream as a plain send, so that the lock
    /// is released once the upstream accepted it and upstreams without the method serve it too;
    /// the Worker waits for the receipt up to `timeout_ms`, outside the lock. A nonce gap at its
    /// turn is refused (EIP-7966 code 6) instead of sent.
    Sync {
        /// How long to wait for the receipt once the upstream accepted it, ms.
        timeout_ms: u64,
    },
    /// `eth_sendRawTransactionConditional` (ERC-7796): sent upstream as the client wrote it, with
    /// its `options` object.
    Conditional {
        /// The inclusion preconditions (ERC-7796 `options`).
        options: Value,
    },
}

/// A signed transaction as the relay holds it. See the module documentation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignedTx {
    /// The transaction hash (keccak-256 of the EIP-2718 envelope, its canonical form for a blob
    /// transaction).
    #[serde(with = "hex_hash")]
    pub hash: TxHash,
    /// The sender's nonce.
    pub nonce: u64,
    /// The chain id (EIP-155), `None` for an unprotected legacy transaction.
    pub chain_id: Option<u64>,
    /// The raw transaction as the client signed it: the EIP-2718 envelope (a blob transaction in
    /// its network form, sidecar included), or a legacy RLP list.
    #[serde(with = "hex_bytes")]
    pub raw: Vec<u8>,
    /// How it was sent.
    pub method: SendMethod,
}

/// The most a transaction may keep in one row of its sender's storage, bytes
/// ([`SignedTx::stored_len`]): a SQLite-backed Durable Object holds at most 2 MB in a string,
/// BLOB or row (Cloudflare's Durable Objects limits), less 4 KiB for the row's other columns.
pub const MAX_STORED_TX_BYTES: usize = 2_000_000 - 4_096;

/// A transaction too large to keep in its sender's storage: it is refused before it is sent
/// (-32005 with this wording), since a send the relay cannot store cannot be resent or followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge {
    /// What it would keep, bytes.
    pub bytes: usize,
    /// [`MAX_STORED_TX_BYTES`].
    pub max: usize,
}

impl fmt::Display for TooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "transaction too large for the relay to store: {} bytes, at most {} (a Durable Object row holds 2 MB); not sent",
            self.bytes, self.max
        )
    }
}

/// Why a stored request is not a send of the transaction its row names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredError {
    /// Not one JSON-RPC request object.
    NotARequest,
    /// A request for another method.
    NotASend(String),
    /// Its raw transaction is missing, not hex, or does not decode.
    BadRaw(String),
    /// Its raw transaction decodes to another hash.
    OtherHash,
}

impl fmt::Display for StoredError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoredError::NotARequest => write!(f, "not one JSON-RPC request"),
            StoredError::NotASend(method) => write!(f, "not a send: {method}"),
            StoredError::BadRaw(why) => write!(f, "its raw transaction: {why}"),
            StoredError::OtherHash => write!(f, "its raw transaction has another hash"),
        }
    }
}

impl SendMethod {
    /// Whether it is a send-and-wait call.
    pub fn is_sync(&self) -> bool {
        matches!(self, SendMethod::Sync { .. })
    }
}

impl SignedTx {
    /// The JSON-RPC request that goes upstream (id 1; each client's answer is rendered with its
    /// own id): `eth_sendRawTransaction` with `[raw]` (a send-and-wait call too), or
    /// `eth_sendRawTransactionConditional` with `[raw, options]`.
    pub fn request(&self) -> String {
        self.request_with_id(1)
    }

    /// [`SignedTx::request`] with the id `id` (a member of a batch of sends).
    pub fn request_with_id(&self, id: u64) -> String {
        let raw = crate::hex::encode(&self.raw);
        match &self.method {
            SendMethod::Plain | SendMethod::Sync { .. } => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"{SEND_RAW_TRANSACTION}","params":["{raw}"]}}"#
            ),
            SendMethod::Conditional { options } => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"{SEND_RAW_TRANSACTION_CONDITIONAL}","params":["{raw}",{options}]}}"#
            ),
        }
    }

    /// How its send method is stored beside its bytes: the method's serde form
    /// (`{"kind":"plain"}`, or `{"kind":"conditional","options":{…}}`). A send-and-wait call is
    /// stored as a plain send: nobody waits on a stored transaction's receipt.
    pub fn stored_method(&self) -> String {
        let method = match &self.method {
            SendMethod::Sync { .. } => &SendMethod::Plain,
            other => other,
        };
        serde_json::to_string(method).expect("a send method always serializes")
    }

    /// What the transaction keeps in its sender's storage, bytes: its raw bytes and its stored
    /// method ([`SignedTx::stored_method`]), the row's other columns aside.
    pub fn stored_len(&self) -> usize {
        self.raw.len() + self.stored_method().len()
    }

    /// Why it cannot be kept in one row of its sender's storage ([`MAX_STORED_TX_BYTES`]), or
    /// `None` when it can.
    pub fn unstorable(&self) -> Option<TooLarge> {
        let bytes = self.stored_len();
        (bytes > MAX_STORED_TX_BYTES).then_some(TooLarge {
            bytes,
            max: MAX_STORED_TX_BYTES,
        })
    }

    /// A stored row read back (the one stored form: the raw bytes and the stored method): a send
    /// whose raw transaction decodes to `hash`.
    ///
    /// # Errors
    /// [`StoredError`]: the bytes do not decode, have another hash, or the method is not one.
    pub fn from_row(raw: Vec<u8>, method: &str, hash: &TxHash) -> Result<SignedTx, StoredError> {
        let method = serde_json::from_str::<SendMethod>(method)
            .map_err(|e| StoredError::NotASend(e.to_string()))?;
        Self::read_back(raw, method, hash)
    }

    /// A stored transaction's bytes and method made a [`SignedTx`] again: its bytes must decode
    /// to `hash`; a send-and-wait call comes back as a plain send (nobody waits on a stored
    /// transaction's receipt).
    fn read_back(raw: Vec<u8>, method: SendMethod, hash: &TxHash) -> Result<SignedTx, StoredError> {
        let method = match method {
            SendMethod::Sync { .. } => SendMethod::Plain,
            other => other,
        };
        let tx =
            crate::transaction::decode(&raw).map_err(|e| StoredError::BadRaw(e.to_string()))?;
        if &tx.hash != hash {
            return Err(StoredError::OtherHash);
        }
        Ok(SignedTx {
            hash: tx.hash,
            nonce: tx.nonce,
            chain_id: tx.chain_id,
            raw,
            method,
        })
    }

    /// A request a sender's object of an earlier release stored before a send (the request text),
    /// read back for a resend: parsed like any client's, a send whose raw transaction decodes to
    /// `hash`. The oldest rows hold the client's own text; what is sent again is what the relay
    /// reads in it. One stored as a send-and-wait call comes back as a plain send (it waits out
    /// a gap like any resend).
    ///
    /// # Errors
    /// [`StoredError`]: why it is not a send of that transaction.
    pub fn from_stored(text: &str, hash: &TxHash) -> Result<SignedTx, StoredError> {
        let req = match jsonrpc::parse(text.as_bytes(), 1) {
            Ok(jsonrpc::Incoming::Single(Ok(req))) => req,
            _ => return Err(StoredError::NotARequest),
        };
        if !jsonrpc::is_send(&req.method) {
            return Err(StoredError::NotASend(req.method));
        }
        let (raw, method) =
            send_params(&req, SYNC_STORED).map_err(|e| StoredError::BadRaw(e.message))?;
        Self::read_back(raw, method, hash)
    }
}

/// The send-and-wait timeouts of a request: the default and the cap, ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncTimeouts {
    /// `SYNC_TIMEOUT_MS`: without a timeout, or with an invalid one.
    pub default_ms: u64,
    /// `SYNC_TIMEOUT_MAX_MS`: the longest a call may ask for.
    pub max_ms: u64,
}

/// A stored request is never waited on by anyone: its timeouts do not matter.
const SYNC_STORED: SyncTimeouts = SyncTimeouts {
    default_ms: 0,
    max_ms: 0,
};

/// The raw transaction of a send request (any of [`jsonrpc::is_send`]) and how it was sent.
///
/// # Errors
/// -32602 saying what is wrong with the params: `eth_sendRawTransaction` takes `[raw]`,
/// `eth_sendRawTransactionSync` `[raw]` or `[raw, timeout]` (ms, a number or a hex quantity,
/// capped at `SYNC_TIMEOUT_MAX_MS`; without one, or an invalid one, `SYNC_TIMEOUT_MS`: EIP-7966),
/// `eth_sendRawTransactionConditional` `[raw, options]` with `options` an object (ERC-7796).
pub fn send_params(
    req: &Request,
    timeouts: SyncTimeouts,
) -> Result<(Vec<u8>, SendMethod), jsonrpc::RpcError> {
    let invalid = |why: &str| {
        jsonrpc::RpcError::new(jsonrpc::INVALID_PARAMS, format!("invalid params: {why}"))
    };
    let items = req.params.as_array();
    let (first, second) = match items.map(Vec::as_slice) {
        Some([first, second]) if req.method != SEND_RAW_TRANSACTION => {
            (first.clone(), Some(second))
        }
        _ if req.method == SEND_RAW_TRANSACTION_CONDITIONAL => {
            return Err(invalid("expected [raw transaction, options] (ERC-7796)"))
        }
        _ => (req.params.clone(), None),
    };
    let raw = match second {
        Some(_) => jsonrpc::raw_transaction_param(&Value::Array(vec![first]))?,
        None => jsonrpc::raw_transaction_param(&first)?,
    };
    let method = match req.method.as_str() {
        SEND_RAW_TRANSACTION_SYNC => SendMethod::Sync {
            timeout_ms: sync_timeout(second, timeouts),
        },
        SEND_RAW_TRANSACTION_CONDITIONAL => match second {
            Some(options @ Value::Object(_)) => SendMethod::Conditional {
                options: options.clone(),
            },
            _ => return Err(invalid("the options of ERC-7796 must be an object")),
        },
        _ => SendMethod::Plain,
    };
    Ok((raw, method))
}

/// The send-and-wait timeout, ms: the client's (a number or a hex quantity) capped at
/// `max_ms`; `default_ms` when it gave none or an invalid one.
fn sync_timeout(param: Option<&Value>, timeouts: SyncTimeouts) -> u64 {
    let asked = match param {
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(q)) => crate::hex::decode_quantity(q).ok(),
        _ => None,
    };
    match asked {
        Some(ms) if ms > 0 => ms.min(timeouts.max_ms),
        _ => timeouts.default_ms,
    }
}

/// Serde for a transaction hash as `0x` and 64 hex digits.
mod hex_hash {
    use super::*;

    pub fn serialize<S: Serializer>(hash: &TxHash, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&crate::hex::encode(hash))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<TxHash, D::Error> {
        let text: &str = Deserialize::deserialize(d)?;
        crate::hex::decode_array(text)
            .ok_or_else(|| serde::de::Error::custom(format!("not a 32-byte hash: {text:.80}")))
    }
}

/// Serde for bytes as `0x`-prefixed hex.
mod hex_bytes {
    use super::*;

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&crate::hex::encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text: &str = Deserialize::deserialize(d)?;
        crate::hex::decode(text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tx(method: SendMethod) -> SignedTx {
        SignedTx {
            hash: [7; 32],
            nonce: 5,
            chain_id: Some(296),
            raw: vec![0x02, 0xf8],
            method,
        }
    }

    #[test]
    fn one_serde_form_and_the_request_upstream() {
        let conditional = tx(SendMethod::Conditional {
            options: json!({"knownAccounts": {}}),
        });
        let text = serde_json::to_string(&conditional).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap(),
            json!({"hash": format!("0x{}", "07".repeat(32)), "nonce": 5, "chain_id": 296,
                   "raw": "0x02f8", "method": {"kind": "conditional", "options": {"knownAccounts": {}}}})
        );
        assert_eq!(
            serde_json::from_str::<SignedTx>(&text).unwrap(),
            conditional
        );
        assert_eq!(
            conditional.request(),
            r#"{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransactionConditional","params":["0x02f8",{"knownAccounts":{}}]}"#
        );
        let sync = tx(SendMethod::Sync { timeout_ms: 2_000 });
        assert!(sync.method.is_sync());
        assert_eq!(
            sync.request(),
            r#"{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":["0x02f8"]}"#
        );
        assert_eq!(sync.stored_method(), r#"{"kind":"plain"}"#);
        assert_eq!(
            conditional.stored_method(),
            r#"{"kind":"conditional","options":{"knownAccounts":{}}}"#
        );
        assert_eq!(sync.stored_len(), 2 + 16);
        let plain = serde_json::to_string(&tx(SendMethod::Plain)).unwrap();
        assert!(plain.contains(r#""method":{"kind":"plain"}"#), "{plain}");
        assert!(serde_json::from_str::<SignedTx>(
            r#"{"hash":"0x12","nonce":1,"chain_id":null,"raw":"0x","method":{"kind":"plain"}}"#
        )
        .is_err());
    }

    #[test]
    fn the_stored_form_reads_back_and_a_transaction_past_a_row_is_unstorable() {
        // EIP-155's example transfer (chain id 1, nonce 9), as in the wire tests.
        let raw = crate::hex::decode("0xf86c098504a817c800825208943535353535353535353535353535353535353535880de0b6b3a76400008025a028ef61340bd939bc2195fe537567866003e1a15d3c71ff63e1590620aa636276a067cbe9d8997f761aecb703304b3800ccf555c9f3dc64214b297fb1966a3b6d83").unwrap();
        let hash = crate::transaction::decode(&raw).unwrap().hash;
        let plain = r#"{"kind":"plain"}"#;
        let tx = SignedTx::from_row(raw.clone(), plain, &hash).unwrap();
        assert_eq!((tx.nonce, tx.chain_id), (9, Some(1)));
        assert_eq!(
            (tx.raw.clone(), tx.method.clone()),
            (raw.clone(), SendMethod::Plain)
        );
        assert_eq!(
            SignedTx::from_row(raw.clone(), plain, &[0; 32]),
            Err(StoredError::OtherHash)
        );
        assert!(SignedTx::from_row(raw.clone(), "plain", &hash).is_err());
        assert!(SignedTx::from_row(vec![0xf8], plain, &hash).is_err());
        let mut big = tx.clone();
        big.raw = vec![0; MAX_STORED_TX_BYTES - plain.len()];
        assert_eq!(big.unstorable(), None);
        big.raw.push(0);
        let too_large = big.unstorable().unwrap();
        assert_eq!(too_large.bytes, MAX_STORED_TX_BYTES + 1);
        assert!(too_large
            .to_string()
            .starts_with("transaction too large for the relay to store: "));
    }

    #[test]
    fn send_params_of_the_three_methods() {
        let timeouts = SyncTimeouts {
            default_ms: 2_000,
            max_ms: 30_000,
        };
        let req = |method: &str, params: Value| Request {
            id: Some(json!(1).into()),
            method: method.into(),
            params,
        };
        assert_eq!(
            send_params(&req(SEND_RAW_TRANSACTION, json!(["0x01"])), timeouts).unwrap(),
            (vec![1], SendMethod::Plain)
        );
        for (timeout, want) in [
            (json!(500), 500),
            (json!("0x1f4"), 500),
            (json!(90_000), 30_000),
            (json!(0), 2_000),
            (json!("soon"), 2_000),
        ] {
            let (_, method) = send_params(
                &req(SEND_RAW_TRANSACTION_SYNC, json!(["0x01", timeout])),
                timeouts,
            )
            .unwrap();
            assert_eq!(method, SendMethod::Sync { timeout_ms: want });
        }
        for bad in [
            req(SEND_RAW_TRANSACTION_CONDITIONAL, json!(["0x01"])),
            req(SEND_RAW_TRANSACTION_CONDITIONAL, json!(["0x01", 5])),
            req(SEND_RAW_TRANSACTION, json!(["0x01", {}])),
        ] {
            assert_eq!(send_params(&bad, timeouts).unwrap_err().code, -32602);
        }
    }
}
