//! EIP-2930 access-list transactions (type 1): the legacy fields with a chain id and an access
//! list, y-parity instead of `v`.

use super::field::Field::{self, *};

/// The fields in their RLP order, the signature last.
pub(super) const FIELDS: &[Field] = &[
    ChainId,
    Nonce,
    Price("gasPrice"),
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
