//! EIP-4844 blob transactions (type 3): a blob fee cap and the blob versioned hashes, never a
//! creation; in the network form, wrapped with the blob sidecar (EIP-4844 proofs, or EIP-7594 cell
//! proofs).

use super::error::{at, DecodeError};
use super::field::Field::{self, *};
use crate::canonical_rlp as crlp;
use rlp::Rlp;
use sha2::{Digest, Sha256};

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
    Price("maxFeePerBlobGas"),
    BlobHashes,
    V,
    R,
    S,
];

pub(super) fn blob_hashes<'a>(item: &Rlp<'a>) -> Result<Vec<&'a [u8; 32]>, DecodeError> {
    let hashes = crlp::fixed_items::<32>(item).map_err(at("blobVersionedHashes"))?;
    if hashes.is_empty() {
        return Err(DecodeError::NoBlobHashes);
    }
    if let Some(hash) = hashes.iter().find(|h| h[0] != VERSIONED_HASH_VERSION_KZG) {
        return Err(DecodeError::BlobHashVersion(hash[0]));
    }
    Ok(hashes)
}

/// EIP-4844's VERSIONED_HASH_VERSION_KZG: the first byte of every blob versioned hash.
const VERSIONED_HASH_VERSION_KZG: u8 = 0x01;

/// The sidecar of a network-form blob transaction: `[blobs, commitments, proofs]` (EIP-4844) or
/// `[wrapper_version = 1, blobs, commitments, cell_proofs]` (EIP-7594). Counts and sizes must
/// match, and each versioned hash must be `0x01 || sha256(commitment)[1..]` (EIP-4844
/// `kzg_to_versioned_hash`). The KZG proofs themselves are not verified: that is the node's work.
pub(super) fn check_sidecar(
    sidecar: &[Rlp<'_>],
    blob_hashes: &[&[u8; 32]],
) -> Result<(), DecodeError> {
    const BLOB_BYTES: usize = 131_072;
    const CELLS_PER_EXT_BLOB: usize = 128;
    let (blobs, commitments, proofs, proofs_per_blob) = match sidecar {
        [blobs, commitments, proofs] => (blobs, commitments, proofs, 1),
        [version, blobs, commitments, proofs] => {
            let version = crlp::u64_value(version).map_err(at("wrapper version"))?;
            if version != 1 {
                return Err(DecodeError::Sidecar(format!(
                    "unknown wrapper version {version}"
                )));
            }
            (blobs, commitments, proofs, CELLS_PER_EXT_BLOB)
        }
        _ => {
            return Err(DecodeError::Sidecar(format!(
                "expected 3 or 4 sidecar fields, found {}",
                sidecar.len()
            )))
        }
    };
    let hashes = blob_hashes.len();
    let blobs = crlp::fixed_items::<BLOB_BYTES>(blobs)
        .map_err(at("blobs"))?
        .len();
    let commitments = crlp::fixed_items::<48>(commitments).map_err(at("commitments"))?;
    let proofs = crlp::fixed_items::<48>(proofs).map_err(at("proofs"))?.len();
    if blobs != hashes || commitments.len() != hashes || proofs != hashes * proofs_per_blob {
        return Err(DecodeError::Sidecar(format!(
            "{hashes} versioned hashes but {blobs} blobs, {} commitments, {proofs} proofs",
            commitments.len()
        )));
    }
    for (i, (commitment, hash)) in commitments.iter().zip(blob_hashes).enumerate() {
        let digest: [u8; 32] = Sha256::digest(commitment.as_slice()).into();
        if digest[1..] != hash[1..] {
            return Err(DecodeError::Sidecar(format!(
                "versioned hash {i} is not the hash of commitment {i}"
            )));
        }
    }
    Ok(())
}
