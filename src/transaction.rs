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

use crate::address::Address;
use crate::canonical_rlp::{self as crlp, RlpProblem};
use crate::signature::{keccak256, recover_sender, SignatureError};
use rlp::{Rlp, RlpStream};
use sha2::{Digest, Sha256};
use std::fmt;

/// An EIP-2718 transaction type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxType {
    /// Pre-EIP-2718 RLP list (type 0).
    Legacy,
    /// EIP-2930 access-list transaction (type 1).
    AccessList,
    /// EIP-1559 dynamic-fee transaction (type 2).
    DynamicFee,
    /// EIP-4844 blob transaction (type 3).
    Blob,
    /// EIP-7702 set-code transaction (type 4).
    SetCode,
}

impl TxType {
    /// The type byte (0 for legacy).
    pub fn byte(self) -> u8 {
        match self {
            TxType::Legacy => 0,
            TxType::AccessList => 1,
            TxType::DynamicFee => 2,
            TxType::Blob => 3,
            TxType::SetCode => 4,
        }
    }
}

/// A decoded, signature-checked raw transaction: only what the relay needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transaction {
    /// The EIP-2718 type.
    pub tx_type: TxType,
    /// The chain id; `None` only for an unprotected (pre-EIP-155) legacy transaction.
    pub chain_id: Option<u64>,
    /// The sender's nonce (EIP-2681: below 2^64-1).
    pub nonce: u64,
    /// Gas limit, in gas units.
    pub gas_limit: u64,
    /// The transaction hash: keccak-256 of the envelope (for a blob transaction in network form,
    /// of its canonical form, without the sidecar).
    pub hash: [u8; 32],
    /// The sender, recovered from the signature over the signing hash.
    pub sender: Address,
    /// What its intrinsic gas and the fork rules depend on.
    pub payload: Payload,
}

/// The sizes a transaction's intrinsic gas and its fork's limits depend on, counted while it is
/// decoded (see [`crate::hardfork`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Payload {
    /// A contract creation: `to` is empty (legacy, EIP-2930 and EIP-1559 only).
    pub create: bool,
    /// The length of `data` (the init code of a creation), bytes.
    pub data_len: u64,
    /// How many bytes of `data` are zero.
    pub data_zero_bytes: u64,
    /// EIP-2930 access list entries (addresses).
    pub access_list_addresses: u64,
    /// EIP-2930 storage keys, over every access list entry.
    pub access_list_storage_keys: u64,
    /// EIP-7702 authorizations.
    pub authorizations: u64,
    /// EIP-4844 blob versioned hashes.
    pub blobs: u64,
}

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

fn at(field: &'static str) -> impl Fn(RlpProblem) -> DecodeError {
    move |problem| DecodeError::Rlp { field, problem }
}

/// The fields of each type, in order (EIP-155, EIP-2930, EIP-1559, EIP-4844, EIP-7702).
#[derive(Clone, Copy)]
enum Field {
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

use Field::*;

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
const EIP2930: &[Field] = &[
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
const EIP1559: &[Field] = &[
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
const EIP4844: &[Field] = &[
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
const EIP7702: &[Field] = &[
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

/// What the field walk collects.
#[derive(Default)]
struct Fields<'a> {
    chain_id: Option<u64>,
    nonce: u64,
    gas: u64,
    /// Price fields in order (gasPrice, or maxPriorityFeePerGas then maxFeePerGas, ...).
    prices: Vec<&'a [u8]>,
    blob_hashes: Vec<&'a [u8; 32]>,
    payload: Payload,
    v: &'a [u8],
    r: &'a [u8],
    s: &'a [u8],
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

fn blob_hashes<'a>(item: &Rlp<'a>) -> Result<Vec<&'a [u8; 32]>, DecodeError> {
    let hashes = crlp::fixed_items::<32>(item).map_err(at("blobVersionedHashes"))?;
    if hashes.is_empty() {
        return Err(DecodeError::NoBlobHashes);
    }
    if let Some(hash) = hashes.iter().find(|h| h[0] != VERSIONED_HASH_VERSION_KZG) {
        return Err(DecodeError::BlobHashVersion(hash[0]));
    }
    Ok(hashes)
}

/// Checks an authorization list; how many authorizations it has.
fn authorization_list(item: &Rlp<'_>) -> Result<u64, DecodeError> {
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

fn walk<'a>(items: &[Rlp<'a>], spec: &[Field]) -> Result<Fields<'a>, DecodeError> {
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
                out.blob_hashes = blob_hashes(item)?;
                out.payload.blobs = out.blob_hashes.len() as u64;
            }
            AuthorizationList => out.payload.authorizations = authorization_list(item)?,
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

fn rlp_list(items: &[Rlp<'_>], extra: impl FnOnce(&mut RlpStream)) -> RlpStream {
    let mut stream = RlpStream::new();
    stream.begin_unbounded_list();
    for item in items {
        stream.append_raw(item.as_raw(), 1);
    }
    extra(&mut stream);
    stream.finalize_unbounded_list();
    stream
}

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

fn decode_legacy(raw: &[u8]) -> Result<Transaction, DecodeError> {
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
        payload: fields.payload,
    })
}

/// Checks shared by every type, after the field walk.
fn finish(fields: &Fields<'_>, tx_type: TxType) -> Result<(), DecodeError> {
    if fields.nonce == u64::MAX {
        return Err(DecodeError::NonceMax);
    }
    check_fees(fields, tx_type)
}

/// EIP-4844's VERSIONED_HASH_VERSION_KZG: the first byte of every blob versioned hash.
const VERSIONED_HASH_VERSION_KZG: u8 = 0x01;

/// The sidecar of a network-form blob transaction: `[blobs, commitments, proofs]` (EIP-4844) or
/// `[wrapper_version = 1, blobs, commitments, cell_proofs]` (EIP-7594). Counts and sizes must
/// match, and each versioned hash must be `0x01 || sha256(commitment)[1..]` (EIP-4844
/// `kzg_to_versioned_hash`). The KZG proofs themselves are not verified: that is the node's work.
fn check_sidecar(sidecar: &[Rlp<'_>], blob_hashes: &[&[u8; 32]]) -> Result<(), DecodeError> {
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

fn decode_typed(raw: &[u8], tx_type: TxType, spec: &[Field]) -> Result<Transaction, DecodeError> {
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
        check_sidecar(&sidecar, &fields.blob_hashes)?;
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
        payload: fields.payload,
    })
}

/// Decodes and checks a raw transaction (the bytes of `eth_sendRawTransaction`'s parameter):
/// an EIP-2718 envelope (`type || payload`) or a legacy RLP list.
///
/// # Errors
/// A [`DecodeError`] naming what is wrong; nothing about chain id policy (that is the caller's:
/// compare [`Transaction::chain_id`] with the configured chain id).
pub fn decode(raw: &[u8]) -> Result<Transaction, DecodeError> {
    match raw.first() {
        None => Err(DecodeError::Empty),
        Some(0x01) => decode_typed(raw, TxType::AccessList, EIP2930),
        Some(0x02) => decode_typed(raw, TxType::DynamicFee, EIP1559),
        Some(0x03) => decode_typed(raw, TxType::Blob, EIP4844),
        Some(0x04) => decode_typed(raw, TxType::SetCode, EIP7702),
        Some(&b) if b <= 0x7f => Err(DecodeError::UnsupportedType(b)),
        Some(&b) if b < 0xc0 => Err(DecodeError::NotAnEnvelope(b)),
        Some(_) => decode_legacy(raw),
    }
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

    #[test]
    fn first_byte_dispatch() {
        assert_eq!(decode(&[]), Err(DecodeError::Empty));
        assert_eq!(decode(&[0x05, 0xc0]), Err(DecodeError::UnsupportedType(5)));
        assert_eq!(decode(&[0x00]), Err(DecodeError::UnsupportedType(0)));
        assert_eq!(decode(&[0x80]), Err(DecodeError::NotAnEnvelope(0x80)));
    }

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
