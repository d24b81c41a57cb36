//! What decoding yields: the [`Transaction`] with its [`TxType`] and the [`Payload`] sizes the fork
//! rules need.

use crate::address::Address;

/// An EIP-2718 transaction type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxType {
    /// Pre-EIP-2718 RLP list (type 0).
    Legacy,
    /// EIP-2930 access-list transaction (type 1).
    AccessList,
    /// EIP-1559 dynamic-fee transaction (type 2).
    DynamicFee,
    /// EIP-4844 blob transaction (type 3).
    Blob,
    /// EIP-7702 set-code transaction (type 4).
    SetCode,
}

impl Transaction {
    /// Whether it is a private route's cancel transaction (Flashbots Protect's rule,
    /// `server/request_sendrawtx.go`; MEV Blocker's soft cancellation): sent to its own sender
    /// with at most 2 bytes of data. Sent at the nonce of a transaction the route holds, the route
    /// cancels that one and sends neither.
    pub fn is_self_cancel(&self) -> bool {
        self.to == Some(self.sender) && self.payload.data_len <= 2
    }
}

impl TxType {
    /// The type byte (0 for legacy).
    pub fn byte(self) -> u8 {
        match self {
            TxType::Legacy => 0,
            TxType::AccessList => 1,
            TxType::DynamicFee => 2,
            TxType::Blob => 3,
            TxType::SetCode => 4,
        }
    }
}

/// A decoded, signature-checked raw transaction: only what the relay needs.
/// A transaction hash: keccak-256 of the EIP-2718 envelope (for a blob transaction in network
/// form, of its canonical form), 32 bytes.
pub type TxHash = [u8; 32];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transaction {
    /// The EIP-2718 type.
    pub tx_type: TxType,
    /// The chain id; `None` only for an unprotected (pre-EIP-155) legacy transaction.
    pub chain_id: Option<u64>,
    /// The sender's nonce (EIP-2681: below 2^64-1).
    pub nonce: u64,
    /// Gas limit, in gas units.
    pub gas_limit: u64,
    /// The transaction hash: keccak-256 of the envelope (for a blob transaction in network form,
    /// of its canonical form, without the sidecar).
    pub hash: TxHash,
    /// The sender, recovered from the signature over the signing hash.
    pub sender: Address,
    /// The recipient; `None` for a contract creation.
    pub to: Option<Address>,
    /// What its intrinsic gas and the fork rules depend on.
    pub payload: Payload,
}

/// The sizes a transaction's intrinsic gas and its fork's limits depend on, counted while it is
/// decoded (see [`crate::hardfork`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Payload {
    /// A contract creation: `to` is empty (legacy, EIP-2930 and EIP-1559 only).
    pub create: bool,
    /// The length of `data` (the init code of a creation), bytes.
    pub data_len: u64,
    /// How many bytes of `data` are zero.
    pub data_zero_bytes: u64,
    /// EIP-2930 access list entries (addresses).
    pub access_list_addresses: u64,
    /// EIP-2930 storage keys, over every access list entry.
    pub access_list_storage_keys: u64,
    /// EIP-7702 authorizations.
    pub authorizations: u64,
    /// EIP-4844 blob versioned hashes.
    pub blobs: u64,
}
