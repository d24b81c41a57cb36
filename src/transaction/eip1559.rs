//! EIP-1559 dynamic-fee transactions (type 2): a tip and a fee cap instead of the gas price.

use super::field::Field::{self, *};

/// The fields in their RLP order, the signature last.
pub(super) const FIELDS: &[Field] = &[
    ChainId,
    Nonce,
    Price("maxPriorityFeePerGas"),
    Price("maxFeePerGas"),
    Gas,
    To {
        create_allowed: true,
    },
    Value,
    Data,
    AccessList,
    V,
    R,
    S,
];
