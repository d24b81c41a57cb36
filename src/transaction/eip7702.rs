//! EIP-7702 set-code transactions (type 4): EIP-1559's fields with an authorization list that
//! may not be empty, never a creation.

use super::error::{at, DecodeError};
use super::field::Field::{self, *};
use crate::canonical_rlp as crlp;
use rlp::Rlp;

/// The fields in their RLP order, the signature last.
pub(super) const FIELDS: &[Field] = &[
    ChainId,
    Nonce,
    Price("maxPriorityFeePerGas"),
    Price("maxFeePerGas"),
    Gas,
    To {
        create_allowed: false,
    },
    Value,
    Data,
    AccessList,
    AuthorizationList,
    V,
    R,
    S,
];

/// Checks an authorization list; how many authorizations it has.
pub(super) fn authorization_list(item: &Rlp<'_>) -> Result<u64, DecodeError> {
    let list = crlp::items(item).map_err(at("authorizationList"))?;
    let count = list.len() as u64;
    if list.is_empty() {
        return Err(DecodeError::EmptyAuthorizationList);
    }
    for auth in list {
        let f = crlp::items_exact(&auth, 6).map_err(at("authorization"))?;
        crlp::uint(&f[0], 32).map_err(at("authorization chainId"))?;
        crlp::fixed::<20>(&f[1]).map_err(at("authorization address"))?;
        crlp::u64_value(&f[2]).map_err(at("authorization nonce"))?;
        crlp::uint(&f[3], 1).map_err(at("authorization yParity"))?;
        crlp::uint(&f[4], 32).map_err(at("authorization r"))?;
        crlp::uint(&f[5], 32).map_err(at("authorization s"))?;
    }
    Ok(count)
}
