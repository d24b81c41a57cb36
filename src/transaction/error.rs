//! Why a raw transaction was refused: [`DecodeError`], whose `Display` is the client's message.

use crate::canonical_rlp::RlpProblem;
use crate::signature::SignatureError;
use std::fmt;

/// Why a raw transaction was refused. Each variant's `Display` is the message clients see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// No bytes at all.
    Empty,
    /// A first byte in 0x00..=0x7f that is not a supported EIP-2718 type.
    UnsupportedType(u8),
    /// A first byte in 0x80..=0xbf: neither a type byte nor an RLP list.
    NotAnEnvelope(u8),
    /// RLP that is malformed, non-canonical, or has a field of the wrong size.
    Rlp {
        /// The field (as the EIPs name it) or "transaction" for the envelope.
        field: &'static str,
        /// What was wrong.
        problem: RlpProblem,
    },
    /// A legacy `v` that is neither 27/28 nor EIP-155's `chain_id * 2 + 35/36`.
    InvalidV,
    /// A typed transaction's y-parity that is not 0 or 1.
    InvalidYParity,
    /// A chain id (or one implied by an EIP-155 `v`) above 2^64-1.
    ChainIdTooLarge,
    /// Nonce 2^64-1 (EIP-2681).
    NonceMax,
    /// maxPriorityFeePerGas above maxFeePerGas (EIP-1559).
    TipAboveFeeCap,
    /// gas limit × gas price (or max fee per gas) above 2^256-1.
    GasPriceProductOverflow,
    /// A blob transaction without blob versioned hashes (EIP-4844).
    NoBlobHashes,
    /// A blob versioned hash whose first byte is not 0x01 (VERSIONED_HASH_VERSION_KZG).
    BlobHashVersion(u8),
    /// A network-form blob transaction whose sidecar does not match its versioned hashes.
    Sidecar(String),
    /// A set-code transaction with an empty authorization list (EIP-7702).
    EmptyAuthorizationList,
    /// The signature is invalid or no sender can be recovered.
    Signature(SignatureError),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Empty => write!(f, "empty raw transaction"),
            DecodeError::UnsupportedType(t) => {
                write!(f, "transaction type not supported: {t:#04x}")
            }
            DecodeError::NotAnEnvelope(b) => write!(
                f,
                "not a transaction: first byte {b:#04x} is neither a type (0x01-0x04) nor an RLP list"
            ),
            DecodeError::Rlp { field, problem } => write!(f, "rlp: {problem} for {field}"),
            DecodeError::InvalidV => write!(
                f,
                "invalid transaction v, r, s values: v must be 27, 28 or chain_id*2+35/36 (EIP-155)"
            ),
            DecodeError::InvalidYParity => {
                write!(f, "invalid transaction v, r, s values: y-parity must be 0 or 1")
            }
            DecodeError::ChainIdTooLarge => write!(f, "invalid chain id: above 2^64-1"),
            DecodeError::NonceMax => write!(f, "nonce has max value (EIP-2681)"),
            DecodeError::TipAboveFeeCap => {
                write!(f, "max priority fee per gas higher than max fee per gas")
            }
            DecodeError::GasPriceProductOverflow => {
                write!(f, "gas limit * gas price overflows 256 bits")
            }
            DecodeError::NoBlobHashes => write!(f, "blob transaction missing blob hashes"),
            DecodeError::BlobHashVersion(v) => {
                write!(f, "blob versioned hash with version {v:#04x}, want 0x01")
            }
            DecodeError::Sidecar(why) => write!(f, "invalid blob sidecar: {why}"),
            DecodeError::EmptyAuthorizationList => {
                write!(f, "EIP-7702 transaction with empty auth list")
            }
            DecodeError::Signature(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for DecodeError {}

pub(super) fn at(field: &'static str) -> impl Fn(RlpProblem) -> DecodeError {
    move |problem| DecodeError::Rlp { field, problem }
}
