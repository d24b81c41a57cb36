//! Raw transaction decoding: the EIP-2718 envelope, the five transaction types, the transaction
//! hash, the signing hash and the sender.
//!
//! Supported: legacy (unprotected, and EIP-155 replay-protected), EIP-2930 (type 1), EIP-1559
//! (type 2), EIP-4844 (type 3, canonical form and network form with its blob sidecar, both the
//! EIP-4844 proofs and the EIP-7594 cell-proof wrapper) and EIP-7702 (type 4).
//!
//! Decoding is strict: RLP must be canonical with nothing trailing, every field must have its size,
//! the signature must satisfy EIP-2, the nonce must be below 2^64-1 (EIP-2681), and fee fields must
//! be consistent (tip not above the fee cap, gas × price within 256 bits). What the active fork's
//! rules decide (intrinsic gas, EIP-3860 init code size, the EIP-7825 gas cap, blob count limits,
//! the types a fork knows) is [`crate::hardfork`]'s, from the [`Payload`] counted here; what needs
//! chain state (balance, current nonce) is the upstream node's to judge.
//!
//! One file per transaction type, as alloy-consensus has it: `legacy.rs` (EIP-155), `eip2930.rs`,
//! `eip1559.rs`, `eip4844.rs` (with the blob sidecar of the network form) and `eip7702.rs` (with the
//! authorization list); `envelope.rs` decodes the typed ones (EIP-2718), `fields.rs` walks the
//! fields every type shares, `error.rs` names what is wrong.

mod decoded;
mod eip1559;
mod eip2930;
mod eip4844;
mod eip7702;
mod envelope;
mod error;
mod field;
mod fields;
mod legacy;

pub use decoded::{Payload, Transaction, TxHash, TxType};
pub use error::DecodeError;

/// Decodes and checks a raw transaction (the bytes of `eth_sendRawTransaction`'s parameter):
/// an EIP-2718 envelope (`type || payload`) or a legacy RLP list.
///
/// # Errors
/// A [`DecodeError`] naming what is wrong; nothing about chain id policy (that is the caller's:
/// compare [`Transaction::chain_id`] with the configured chain id).
pub fn decode(raw: &[u8]) -> Result<Transaction, DecodeError> {
    match raw.first() {
        None => Err(DecodeError::Empty),
        Some(0x01) => envelope::decode_typed(raw, TxType::AccessList, eip2930::FIELDS),
        Some(0x02) => envelope::decode_typed(raw, TxType::DynamicFee, eip1559::FIELDS),
        Some(0x03) => envelope::decode_typed(raw, TxType::Blob, eip4844::FIELDS),
        Some(0x04) => envelope::decode_typed(raw, TxType::SetCode, eip7702::FIELDS),
        Some(&b) if b <= 0x7f => Err(DecodeError::UnsupportedType(b)),
        Some(&b) if b < 0xc0 => Err(DecodeError::NotAnEnvelope(b)),
        Some(_) => legacy::decode_legacy(raw),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_byte_dispatch() {
        assert_eq!(decode(&[]), Err(DecodeError::Empty));
        assert_eq!(decode(&[0x05, 0xc0]), Err(DecodeError::UnsupportedType(5)));
        assert_eq!(decode(&[0x00]), Err(DecodeError::UnsupportedType(0)));
        assert_eq!(decode(&[0x80]), Err(DecodeError::NotAnEnvelope(0x80)));
    }
}
