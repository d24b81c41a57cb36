//! How a client sent a raw transaction ([`SendMethod`]): the four send methods the relay takes
//! through the sender's order, below both the transaction that carries it
//! ([`crate::ordering::tx::SignedTx`]) and the private route's terms read from it
//! ([`crate::ordering::private_terms`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How a client sent a raw transaction; all four are taken through the sender's order.
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
    /// `eth_sendPrivateTransaction` (Flashbots Protect's, served by Alchemy and others too): only
    /// behind a private route, sent there as this method with what the relay read of its params,
    /// or as `eth_sendRawTransaction` to a route that does not serve it
    /// ([`crate::ordering::tx::SignedTx::plain_request`]).
    Private {
        /// `maxBlockNumber`: the highest block it may be included in.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_block_number: Option<u64>,
        /// `preferences` (an object: `fast`, `privacy`, `validity`), passed on as read.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        preferences: Option<Value>,
    },
}

impl SendMethod {
    /// Whether it is a send-and-wait call.
    pub fn is_sync(&self) -> bool {
        matches!(self, SendMethod::Sync { .. })
    }

    /// `eth_sendPrivateTransaction`'s `maxBlockNumber`; `None` for the other methods.
    pub fn max_block_number(&self) -> Option<u64> {
        match self {
            SendMethod::Private {
                max_block_number, ..
            } => *max_block_number,
            _ => None,
        }
    }
}
