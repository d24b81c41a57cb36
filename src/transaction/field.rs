//! The vocabulary of the types' field lists: each type's file names its fields in RLP order with
//! [`Field`], and `fields.rs` walks them.

/// The fields of each type, in order (EIP-155, EIP-2930, EIP-1559, EIP-4844, EIP-7702).
#[derive(Clone, Copy)]
pub(super) enum Field {
    ChainId,
    Nonce,
    /// A 256-bit price per gas, in wei: its name.
    Price(&'static str),
    Gas,
    /// `to`: 20 bytes, or empty for contract creation when allowed.
    To {
        create_allowed: bool,
    },
    Value,
    Data,
    AccessList,
    BlobHashes,
    AuthorizationList,
    /// Legacy `v`, or a typed transaction's y-parity.
    V,
    R,
    S,
}
