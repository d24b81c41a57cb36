//! The fields the transaction types share, walked in each type's order ([`Field`]), and the checks
//! every type makes after the walk (EIP-2681 nonce, fee consistency).

use super::decoded::{Payload, TxType};
use super::error::{at, DecodeError};
use super::{eip4844, eip7702};
use crate::canonical_rlp as crlp;
use crate::canonical_rlp::RlpProblem;
use rlp::{Rlp, RlpStream};

use super::field::Field::{self, *};

/// What the field walk collects.
#[derive(Default)]
pub(super) struct Fields<'a> {
    pub chain_id: Option<u64>,
    pub nonce: u64,
    pub gas: u64,
    /// Price fields in order (gasPrice, or maxPriorityFeePerGas then maxFeePerGas, ...).
    pub prices: Vec<&'a [u8]>,
    pub blob_hashes: Vec<&'a [u8; 32]>,
    pub payload: Payload,
    /// The recipient; `None` for a contract creation.
    pub to: Option<crate::address::Address>,
    pub v: &'a [u8],
    pub r: &'a [u8],
    pub s: &'a [u8],
}

/// Checks an access list; its (addresses, storage keys).
fn access_list(item: &Rlp<'_>) -> Result<(u64, u64), DecodeError> {
    let (mut addresses, mut keys) = (0, 0);
    for entry in crlp::items(item).map_err(at("accessList"))? {
        let pair = crlp::items_exact(&entry, 2).map_err(at("accessList entry"))?;
        crlp::fixed::<20>(&pair[0]).map_err(at("accessList address"))?;
        addresses += 1;
        for key in crlp::items(&pair[1]).map_err(at("accessList storageKeys"))? {
            crlp::fixed::<32>(&key).map_err(at("accessList storage key"))?;
            keys += 1;
        }
    }
    Ok((addresses, keys))
}

pub(super) fn walk<'a>(items: &[Rlp<'a>], spec: &[Field]) -> Result<Fields<'a>, DecodeError> {
    let mut out = Fields::default();
    for (item, field) in items.iter().zip(spec) {
        match *field {
            ChainId => out.chain_id = Some(chain_id(item)?),
            Nonce => out.nonce = crlp::u64_value(item).map_err(at("nonce"))?,
            Price(name) => out.prices.push(crlp::uint(item, 32).map_err(at(name))?),
            Gas => out.gas = crlp::u64_value(item).map_err(at("gasLimit"))?,
            To { create_allowed } => {
                let to = crlp::bytes(item).map_err(at("to"))?;
                out.payload.create = to.is_empty();
                if !(to.len() == 20 || create_allowed && to.is_empty()) {
                    return Err(DecodeError::Rlp {
                        field: "to",
                        problem: RlpProblem::WrongLength(20, to.len()),
                    });
                }
                out.to = <[u8; 20]>::try_from(to).ok().map(crate::address::Address);
            }
            Value => {
                crlp::uint(item, 32).map_err(at("value"))?;
            }
            Data => {
                let data = crlp::bytes(item).map_err(at("data"))?;
                out.payload.data_len = data.len() as u64;
                out.payload.data_zero_bytes = data.iter().filter(|b| **b == 0).count() as u64;
            }
            AccessList => {
                let (addresses, keys) = access_list(item)?;
                out.payload.access_list_addresses = addresses;
                out.payload.access_list_storage_keys = keys;
            }
            BlobHashes => {
                out.blob_hashes = eip4844::blob_hashes(item)?;
                out.payload.blobs = out.blob_hashes.len() as u64;
            }
            AuthorizationList => out.payload.authorizations = eip7702::authorization_list(item)?,
            V => out.v = crlp::uint(item, 32).map_err(at("v"))?,
            R => out.r = crlp::uint(item, 32).map_err(at("r"))?,
            S => out.s = crlp::uint(item, 32).map_err(at("s"))?,
        }
    }
    Ok(out)
}

fn chain_id(item: &Rlp<'_>) -> Result<u64, DecodeError> {
    match crlp::u64_value(item) {
        Err(RlpProblem::TooLong(_)) => Err(DecodeError::ChainIdTooLarge),
        other => other.map_err(at("chainId")),
    }
}

/// `a * b` fits in 256 bits, for `a` up to 32 big-endian bytes.
fn product_fits_256(a: &[u8], b: u64) -> bool {
    let mut limbs = [0u64; 4]; // little-endian 64-bit limbs of `a`
    for (i, byte) in a.iter().rev().enumerate() {
        limbs[i / 8] |= u64::from(*byte) << (8 * (i % 8));
    }
    let mut carry = 0u128;
    for limb in limbs {
        carry = u128::from(limb) * u128::from(b) + (carry >> 64);
    }
    carry >> 64 == 0
}

/// `a > b` for minimal big-endian integers.
fn greater(a: &[u8], b: &[u8]) -> bool {
    (a.len(), a) > (b.len(), b)
}

fn check_fees(fields: &Fields<'_>, tx_type: TxType) -> Result<(), DecodeError> {
    let fee_cap = match tx_type {
        TxType::Legacy | TxType::AccessList => fields.prices[0],
        _ => {
            if greater(fields.prices[0], fields.prices[1]) {
                return Err(DecodeError::TipAboveFeeCap);
            }
            fields.prices[1]
        }
    };
    if !product_fits_256(fee_cap, fields.gas) {
        return Err(DecodeError::GasPriceProductOverflow);
    }
    Ok(())
}

pub(super) fn rlp_list(items: &[Rlp<'_>], extra: impl FnOnce(&mut RlpStream)) -> RlpStream {
    let mut stream = RlpStream::new();
    stream.begin_unbounded_list();
    for item in items {
        stream.append_raw(item.as_raw(), 1);
    }
    extra(&mut stream);
    stream.finalize_unbounded_list();
    stream
}

/// Checks shared by every type, after the field walk.
pub(super) fn finish(fields: &Fields<'_>, tx_type: TxType) -> Result<(), DecodeError> {
    if fields.nonce == u64::MAX {
        return Err(DecodeError::NonceMax);
    }
    check_fees(fields, tx_type)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn product_overflow_boundaries() {
        assert!(product_fits_256(&[0xff; 32], 1));
        assert!(!product_fits_256(&[0xff; 32], 2));
        assert!(product_fits_256(&[0x01], u64::MAX));
        let mut two_pow_192 = vec![0x01];
        two_pow_192.extend([0u8; 24]);
        assert!(product_fits_256(&two_pow_192, u64::MAX));
        let mut two_pow_200 = vec![0x01];
        two_pow_200.extend([0u8; 25]);
        assert!(!product_fits_256(&two_pow_200, 1 << 56));
        assert!(product_fits_256(&two_pow_200, (1 << 56) - 1));
    }

    #[test]
    fn comparison_of_minimal_integers() {
        assert!(greater(&[1, 0], &[0xff]));
        assert!(!greater(&[0xff], &[1, 0]));
        assert!(greater(&[2], &[1]));
        assert!(!greater(&[], &[]));
    }
}
