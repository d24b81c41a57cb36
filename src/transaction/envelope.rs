//! EIP-2718 typed transactions: `type || rlp([fields...])`, the signing hash over
//! `type || rlp(fields without the signature)`, the hash over the envelope (for a network-form
//! blob transaction, over its canonical form without the sidecar).

use super::decoded::{Transaction, TxType};
use super::eip4844;
use super::error::{at, DecodeError};
use super::field::Field;
use super::fields::{finish, rlp_list, walk};
use crate::canonical_rlp::{self as crlp, RlpProblem};
use crate::signature::{keccak256, recover_sender};
use rlp::Rlp;

pub(super) fn decode_typed(
    raw: &[u8],
    tx_type: TxType,
    spec: &[Field],
) -> Result<Transaction, DecodeError> {
    let outer = crlp::whole(&raw[1..]).map_err(at("transaction"))?;
    let outer_items = crlp::items(&outer).map_err(at("transaction"))?;
    // A network-form blob transaction wraps the transaction list with its sidecar.
    let network_form = tx_type == TxType::Blob && outer_items.first().is_some_and(Rlp::is_list);
    let (body, items, sidecar) = if network_form {
        let mut sidecar = outer_items;
        let body = sidecar.remove(0);
        let items = crlp::items(&body).map_err(at("transaction"))?;
        (body, items, Some(sidecar))
    } else {
        (outer, outer_items, None)
    };
    if items.len() != spec.len() {
        return Err(DecodeError::Rlp {
            field: "transaction",
            problem: RlpProblem::WrongItemCount(spec.len(), items.len()),
        });
    }
    let fields = walk(&items, spec)?;
    if let Some(sidecar) = sidecar {
        eip4844::check_sidecar(&sidecar, &fields.blob_hashes)?;
    }
    let y_parity = match fields.v {
        [] => false,
        [1] => true,
        _ => return Err(DecodeError::InvalidYParity),
    };
    finish(&fields, tx_type)?;
    let mut signing_payload = vec![tx_type.byte()];
    signing_payload.extend_from_slice(&rlp_list(&items[..items.len() - 3], |_| {}).out());
    let sender = recover_sender(&keccak256(&signing_payload), y_parity, fields.r, fields.s)
        .map_err(DecodeError::Signature)?;
    let mut envelope = Vec::with_capacity(1 + body.as_raw().len());
    envelope.push(tx_type.byte());
    envelope.extend_from_slice(body.as_raw());
    Ok(Transaction {
        tx_type,
        chain_id: fields.chain_id,
        nonce: fields.nonce,
        gas_limit: fields.gas,
        hash: keccak256(&envelope),
        sender,
        to: fields.to,
        payload: fields.payload,
    })
}
