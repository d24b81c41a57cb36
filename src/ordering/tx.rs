//! One transaction on its way from the Worker to the upstream and back ([`SignedTx`]): what the
//! relay decoded and checked of it, its original signed bytes (never re-signed), and how its
//! client sent it ([`SendMethod`]). The Worker makes it from a checked request, its sender's
//! Durable Object receives it in the one serde form below, queues and stores it, and the holder
//! sends [`SignedTx::request`] upstream.
//!
//! Its row in its sender's storage is [`super::row`]; the params of the send methods it is read
//! from are [`super::send_params`].

use crate::jsonrpc::{
    SEND_PRIVATE_TRANSACTION, SEND_RAW_TRANSACTION, SEND_RAW_TRANSACTION_CONDITIONAL,
};
use crate::ordering::private_terms::PrivateTerms;
pub use crate::ordering::send_method::SendMethod;
use crate::transaction::TxHash;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

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
    /// Behind a private route: the client's opt-in to the public mempool after this many blocks
    /// without inclusion, as granted ([`crate::ordering::private_terms::granted`]); `None`: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_after_blocks: Option<u64>,
    /// It is a cancel transaction by a private route's rule
    /// ([`crate::transaction::Transaction::is_self_cancel`]; read again from the bytes of a
    /// stored one). Behind a private route, taken at the nonce of one the route holds, both are
    /// final ([`crate::ordering::accepted::Status::Cancelled`]), neither counted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub self_cancel: bool,
}

impl SignedTx {
    /// The JSON-RPC request that goes upstream (id 1; each client's answer is rendered with its
    /// own id): `eth_sendRawTransaction` with `[raw]` (a send-and-wait call too), or
    /// `eth_sendRawTransactionConditional` with `[raw, options]`.
    pub fn request(&self) -> String {
        self.request_with_id(1)
    }

    /// [`SignedTx::request`] with the id `id` (a member of a batch of sends).
    /// `eth_sendPrivateTransaction` goes as `[{"tx", "maxBlockNumber" (hex), "preferences"}]`.
    pub fn request_with_id(&self, id: u64) -> String {
        let raw = crate::hex::encode(&self.raw);
        match &self.method {
            SendMethod::Plain | SendMethod::Sync { .. } => self.plain_request_with_id(id),
            SendMethod::Conditional { options } => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"{SEND_RAW_TRANSACTION_CONDITIONAL}","params":["{raw}",{options}]}}"#
            ),
            SendMethod::Private {
                max_block_number,
                preferences,
            } => {
                let mut params = serde_json::json!({ "tx": raw });
                if let Some(max) = max_block_number {
                    params["maxBlockNumber"] = format!("0x{max:x}").into();
                }
                if let Some(preferences) = preferences {
                    params["preferences"] = preferences.clone();
                }
                format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"{SEND_PRIVATE_TRANSACTION}","params":[{params}]}}"#
                )
            }
        }
    }

    /// The transaction as a plain `eth_sendRawTransaction` request (id 1): how a send-and-wait
    /// call goes, and how an `eth_sendPrivateTransaction` goes to a route that answered it does
    /// not serve that method.
    pub fn plain_request(&self) -> String {
        self.plain_request_with_id(1)
    }

    fn plain_request_with_id(&self, id: u64) -> String {
        let raw = crate::hex::encode(&self.raw);
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"{SEND_RAW_TRANSACTION}","params":["{raw}"]}}"#
        )
    }

    /// What its sender asked of the private route ([`PrivateTerms`]): its opt-in to the public
    /// mempool and its `maxBlockNumber`.
    pub fn terms(&self) -> PrivateTerms {
        PrivateTerms::of(&self.method, self.public_after_blocks)
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
            public_after_blocks: None,
            self_cancel: false,
        }
    }

    #[test]
    fn one_serde_form_and_the_request_upstream() {
        let conditional = tx(SendMethod::Conditional {
            options: json!({"knownAccounts": {}}),
        });
        let text = serde_json::to_string(&conditional).unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).unwrap(),
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
        assert_eq!(sync.row_method(), r#"{"kind":"plain"}"#);
        assert_eq!(
            conditional.row_method(),
            r#"{"kind":"conditional","options":{"knownAccounts":{}}}"#
        );
        assert_eq!(sync.row_len(), 2 + 16);
        let mut private = tx(SendMethod::Private {
            max_block_number: Some(50),
            preferences: None,
        });
        private.public_after_blocks = Some(3);
        assert_eq!(
            private.request(),
            r#"{"jsonrpc":"2.0","id":1,"method":"eth_sendPrivateTransaction","params":[{"maxBlockNumber":"0x32","tx":"0x02f8"}]}"#
        );
        assert_eq!(
            private.plain_request(),
            r#"{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":["0x02f8"]}"#
        );
        let row = private.row_method();
        assert_eq!(
            row,
            r#"{"kind":"private","max_block_number":50,"public_after_blocks":3}"#
        );
        let read = crate::ordering::row::RowMethod::read(&row).unwrap();
        assert_eq!(read.terms(), private.terms());
        // A release before the opt-in reads the method and leaves the opt-in.
        assert_eq!(
            serde_json::from_str::<SendMethod>(r#"{"kind":"plain","public_after_blocks":3}"#)
                .unwrap(),
            SendMethod::Plain
        );
        let plain = serde_json::to_string(&tx(SendMethod::Plain)).unwrap();
        assert!(plain.contains(r#""method":{"kind":"plain"}"#), "{plain}");
        assert!(serde_json::from_str::<SignedTx>(
            r#"{"hash":"0x12","nonce":1,"chain_id":null,"raw":"0x","method":{"kind":"plain"}}"#
        )
        .is_err());
    }
}
