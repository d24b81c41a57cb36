//! Legacy transactions (type 0, a bare RLP list): unprotected (`v` 27/28) or replay-protected by
//! EIP-155 (`v = chain_id * 2 + 35 + y-parity`, the chain id and two empty fields in the signing
//! payload).

use super::decoded::{Transaction, TxType};
use super::error::{at, DecodeError};
use super::field::Field::{self, *};
use super::fields::{finish, rlp_list, walk};
use crate::canonical_rlp as crlp;
use crate::signature::{keccak256, recover_sender};

const LEGACY: &[Field] = &[
    Nonce,
    Price("gasPrice"),
    Gas,
    To {
        create_allowed: true,
    },
    Value,
    Data,
    V,
    R,
    S,
];

/// Legacy `v` → (chain id, y-parity): 27/28 unprotected, `chain_id * 2 + 35 + parity` (EIP-155).
fn legacy_v(v: &[u8]) -> Result<(Option<u64>, bool), DecodeError> {
    if v.len() > 16 {
        return Err(DecodeError::ChainIdTooLarge);
    }
    let v = v.iter().fold(0u128, |acc, b| acc << 8 | u128::from(*b));
    match v {
        27 | 28 => Ok((None, v == 28)),
        35.. => {
            let chain_id = u64::try_from((v - 35) / 2).map_err(|_| DecodeError::ChainIdTooLarge)?;
            Ok((Some(chain_id), (v - 35) % 2 == 1))
        }
        _ => Err(DecodeError::InvalidV),
    }
}

pub(super) fn decode_legacy(raw: &[u8]) -> Result<Transaction, DecodeError> {
    let tx = crlp::whole(raw).map_err(at("transaction"))?;
    let items = crlp::items_exact(&tx, LEGACY.len()).map_err(at("transaction"))?;
    let fields = walk(&items, LEGACY)?;
    let (chain_id, y_parity) = legacy_v(fields.v)?;
    finish(&fields, TxType::Legacy)?;
    let unsigned = &items[..6];
    let signing_payload = match chain_id {
        None => rlp_list(unsigned, |_| {}),
        Some(id) => rlp_list(unsigned, |s| {
            s.append(&id);
            s.append_empty_data();
            s.append_empty_data();
        }),
    };
    let signing_hash = keccak256(&signing_payload.out());
    let sender = recover_sender(&signing_hash, y_parity, fields.r, fields.s)
        .map_err(DecodeError::Signature)?;
    Ok(Transaction {
        tx_type: TxType::Legacy,
        chain_id,
        nonce: fields.nonce,
        gas_limit: fields.gas,
        hash: keccak256(raw),
        sender,
        to: fields.to,
        payload: fields.payload,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_v_values() {
        assert_eq!(legacy_v(&[27]), Ok((None, false)));
        assert_eq!(legacy_v(&[28]), Ok((None, true)));
        assert_eq!(legacy_v(&[37]), Ok((Some(1), false)));
        assert_eq!(legacy_v(&[38]), Ok((Some(1), true)));
        assert_eq!(legacy_v(&[0xf4, 0xf5]), Ok((Some(31337), false)));
        assert_eq!(legacy_v(&[29]), Err(DecodeError::InvalidV));
        assert_eq!(legacy_v(&[]), Err(DecodeError::InvalidV));
        assert_eq!(
            legacy_v(&[3, 0, 0, 0, 0, 0, 0, 0, 0x23]),
            Err(DecodeError::ChainIdTooLarge)
        );
    }
}
