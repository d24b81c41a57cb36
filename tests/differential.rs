//! Differential property tests: our decoder against alloy (alloy-consensus with k256) as the
//! oracle, on transactions of all five types with random fields (edge values included) signed with
//! random keys, and on mutated copies of them.
//!
//! Agreement means: both accept with the same hash, sender, type, chain id, nonce and gas limit,
//! or both refuse. Where our decoder is stricter than alloy's on purpose, the difference is named
//! in [`stricter_than_alloy`] and checked to be exactly that.
//!
//! `PROPTEST_CASES` (default 10000) sets the number of cases per type.

use alloy_consensus::transaction::SignerRecoverable;
use alloy_consensus::{
    SignableTransaction, Signed, Transaction as _, TxEip1559, TxEip2930, TxEip4844,
    TxEip4844Variant, TxEip7702, TxEnvelope, TxLegacy,
};
use alloy_eips::eip2718::{Decodable2718, Encodable2718};
use alloy_eips::eip2930::{AccessList, AccessListItem};
use alloy_eips::eip7702::{Authorization, SignedAuthorization};
use alloy_primitives::{Address, Bytes, Signature, TxKind, B256, U256};
use k256::ecdsa::SigningKey;
use nonce_relay::transaction::{decode, DecodeError, Transaction};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

fn sign<T: SignableTransaction<Signature>>(tx: T, key: &SigningKey) -> Signed<T> {
    let hash = tx.signature_hash();
    let (sig, recid) = key.sign_prehash_recoverable(hash.as_slice()).unwrap();
    tx.into_signed(Signature::from_signature_and_parity(sig, recid.is_y_odd()))
}

/// A blob transaction in its canonical form (no sidecar).
fn canonical_blob(tx: TxEip4844) -> TxEip4844Variant {
    TxEip4844Variant::TxEip4844(tx)
}

/// `tx` signed with `key`, as EIP-2718 bytes.
fn encode<T: SignableTransaction<Signature>>(tx: T, key: &SigningKey) -> Vec<u8>
where
    TxEnvelope: From<Signed<T>>,
{
    TxEnvelope::from(sign(tx, key)).encoded_2718()
}

/// A blob transaction signed with `key`, as EIP-2718 bytes of its canonical form.
fn encode_blob(tx: TxEip4844, key: &SigningKey) -> Vec<u8> {
    encode(canonical_blob(tx), key)
}

// ---- strategies ----------------------------------------------------------------------------

fn key() -> impl Strategy<Value = SigningKey> {
    any::<[u8; 32]>().prop_filter_map("a valid secret key", |b| SigningKey::from_slice(&b).ok())
}

fn u64_edge() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), Just(1), Just(u64::MAX), any::<u64>()]
}

/// A nonce our decoder accepts: below 2^64-1 (EIP-2681).
fn nonce() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), Just(u64::MAX - 1), 0..u64::MAX - 1]
}

fn u128_edge() -> impl Strategy<Value = u128> {
    prop_oneof![
        Just(0u128),
        Just(u128::MAX),
        any::<u128>(),
        (0u128..1u128 << 64)
    ]
}

fn u256_edge() -> impl Strategy<Value = U256> {
    prop_oneof![
        Just(U256::ZERO),
        Just(U256::MAX),
        any::<[u8; 32]>().prop_map(U256::from_be_bytes),
        any::<u64>().prop_map(U256::from),
    ]
}

fn address() -> impl Strategy<Value = Address> {
    any::<[u8; 20]>().prop_map(Address::from)
}

fn calldata() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        4 => proptest::collection::vec(any::<u8>(), 0..200).prop_map(Bytes::from),
        1 => Just(Bytes::new()),
        1 => (1usize..128 * 1024, any::<u8>()).prop_map(|(n, b)| Bytes::from(vec![b; n])),
    ]
}

fn access_list() -> impl Strategy<Value = AccessList> {
    proptest::collection::vec(
        (
            address(),
            proptest::collection::vec(any::<[u8; 32]>().prop_map(B256::from), 0..4),
        ),
        0..4,
    )
    .prop_map(|items| {
        AccessList(
            items
                .into_iter()
                .map(|(address, storage_keys)| AccessListItem {
                    address,
                    storage_keys,
                })
                .collect(),
        )
    })
}

fn to() -> impl Strategy<Value = TxKind> {
    prop_oneof![Just(TxKind::Create), address().prop_map(TxKind::Call)]
}

/// (max priority fee, max fee) with the tip not above the cap, as our decoder requires.
fn fees() -> impl Strategy<Value = (u128, u128)> {
    (u128_edge(), u128_edge()).prop_map(|(a, b)| (a.min(b), a.max(b)))
}

fn legacy() -> impl Strategy<Value = TxLegacy> {
    (
        prop::option::of(u64_edge()),
        nonce(),
        u128_edge(),
        u64_edge(),
        to(),
        u256_edge(),
        calldata(),
    )
        .prop_map(
            |(chain_id, nonce, gas_price, gas_limit, to, value, input)| TxLegacy {
                chain_id,
                nonce,
                gas_price,
                gas_limit,
                to,
                value,
                input,
            },
        )
}

fn eip2930() -> impl Strategy<Value = TxEip2930> {
    (
        u64_edge(),
        nonce(),
        u128_edge(),
        u64_edge(),
        to(),
        u256_edge(),
        calldata(),
        access_list(),
    )
        .prop_map(
            |(chain_id, nonce, gas_price, gas_limit, to, value, input, access_list)| TxEip2930 {
                chain_id,
                nonce,
                gas_price,
                gas_limit,
                to,
                value,
                input,
                access_list,
            },
        )
}

fn eip1559() -> impl Strategy<Value = TxEip1559> {
    (
        u64_edge(),
        nonce(),
        fees(),
        u64_edge(),
        to(),
        u256_edge(),
        calldata(),
        access_list(),
    )
        .prop_map(
            |(chain_id, nonce, (tip, cap), gas_limit, to, value, input, access_list)| TxEip1559 {
                chain_id,
                nonce,
                max_priority_fee_per_gas: tip,
                max_fee_per_gas: cap,
                gas_limit,
                to,
                value,
                input,
                access_list,
            },
        )
}

fn blob_hashes() -> impl Strategy<Value = Vec<B256>> {
    proptest::collection::vec(any::<[u8; 32]>(), 1..7).prop_map(|hashes| {
        hashes
            .into_iter()
            .map(|mut h| {
                h[0] = 0x01; // VERSIONED_HASH_VERSION_KZG
                B256::from(h)
            })
            .collect()
    })
}

fn eip4844() -> impl Strategy<Value = TxEip4844> {
    (
        (
            u64_edge(),
            nonce(),
            fees(),
            u64_edge(),
            address(),
            u256_edge(),
        ),
        (calldata(), access_list(), u128_edge(), blob_hashes()),
    )
        .prop_map(
            |(
                (chain_id, nonce, (tip, cap), gas_limit, to, value),
                (input, access_list, blob_fee, hashes),
            )| {
                TxEip4844 {
                    chain_id,
                    nonce,
                    max_priority_fee_per_gas: tip,
                    max_fee_per_gas: cap,
                    gas_limit,
                    to,
                    value,
                    input,
                    access_list,
                    max_fee_per_blob_gas: blob_fee,
                    blob_versioned_hashes: hashes,
                }
            },
        )
}

fn authorization() -> impl Strategy<Value = SignedAuthorization> {
    (
        u256_edge(),
        address(),
        u64_edge(),
        prop_oneof![Just(0u8), Just(1u8), any::<u8>()],
        u256_edge(),
        u256_edge(),
    )
        .prop_map(|(chain_id, address, nonce, y, r, s)| {
            SignedAuthorization::new_unchecked(
                Authorization {
                    chain_id,
                    address,
                    nonce,
                },
                y,
                r,
                s,
            )
        })
}

fn eip7702() -> impl Strategy<Value = TxEip7702> {
    (
        (
            u64_edge(),
            nonce(),
            fees(),
            u64_edge(),
            address(),
            u256_edge(),
        ),
        (
            calldata(),
            access_list(),
            proptest::collection::vec(authorization(), 1..4),
        ),
    )
        .prop_map(
            |(
                (chain_id, nonce, (tip, cap), gas_limit, to, value),
                (input, access_list, authorization_list),
            )| {
                TxEip7702 {
                    chain_id,
                    nonce,
                    max_priority_fee_per_gas: tip,
                    max_fee_per_gas: cap,
                    gas_limit,
                    to,
                    value,
                    input,
                    access_list,
                    authorization_list,
                }
            },
        )
}

// ---- the oracle and the comparison ---------------------------------------------------------

/// What alloy makes of `raw`: decoded exactly (no trailing bytes) and signer recovered with the
/// EIP-2 low-s rule.
fn alloy_view(raw: &[u8]) -> Option<(B256, Address, u8, Option<u64>, u64, u64)> {
    let envelope = TxEnvelope::decode_2718_exact(raw).ok()?;
    let sender = envelope.recover_signer().ok()?;
    Some((
        *envelope.tx_hash(),
        sender,
        envelope.tx_type() as u8,
        envelope.chain_id(),
        envelope.nonce(),
        envelope.gas_limit(),
    ))
}

fn our_view(tx: &Transaction) -> (B256, Address, u8, Option<u64>, u64, u64) {
    (
        B256::from(tx.hash),
        Address::from(tx.sender.0),
        tx.tx_type.byte(),
        tx.chain_id,
        tx.nonce,
        tx.gas_limit,
    )
}

/// Refusals of ours that alloy's decoder does not make: validity rules of the EIPs that alloy
/// leaves to the transaction pool, and a first byte in 0x80..=0xbf, which is neither an EIP-2718
/// type nor an RLP list (geth refuses it too; alloy's envelope decoder falls back to other forms).
fn stricter_than_alloy(e: &DecodeError) -> bool {
    matches!(
        e,
        DecodeError::NotAnEnvelope(_)
            | DecodeError::NonceMax // EIP-2681
            | DecodeError::TipAboveFeeCap // EIP-1559
            | DecodeError::GasPriceProductOverflow
            | DecodeError::NoBlobHashes // EIP-4844
            | DecodeError::BlobHashVersion(_) // EIP-4844
            | DecodeError::EmptyAuthorizationList // EIP-7702
    )
}

/// A fee field (gasPrice, maxPriorityFeePerGas, maxFeePerGas, maxFeePerBlobGas) above 128 bits:
/// valid per the EIPs, beyond alloy's u128.
fn wide_fee(raw: &[u8]) -> bool {
    let (ty, items) = split(raw);
    let fee_fields: &[usize] = match ty {
        None => &[1],
        Some(1) => &[2],
        Some(3) => &[2, 3, 9],
        Some(_) => &[2, 3],
    };
    fee_fields.iter().any(|&i| {
        items
            .get(i)
            .and_then(|item| rlp::Rlp::new(item).data().ok().map(|d| d.len() > 16))
            .unwrap_or(false)
    })
}

/// Both accept alike, or both refuse (or ours refuses for a rule alloy leaves to the pool).
fn agree(raw: &[u8]) -> Result<(), TestCaseError> {
    let ours = decode(raw);
    let theirs = alloy_view(raw);
    match (&ours, &theirs) {
        (Ok(tx), Some(view)) => prop_assert_eq!(&our_view(tx), view),
        (Err(_), None) => {}
        (Err(e), Some(_)) => prop_assert!(stricter_than_alloy(e), "we refuse, alloy accepts: {e}"),
        // alloy keeps fees in u128; the EIPs (and geth) allow any 256-bit value.
        (Ok(_), None) if wide_fee(raw) => {}
        (Ok(tx), None) => prop_assert!(
            false,
            "we accept, alloy refuses ({:?}): {tx:?}",
            TxEnvelope::decode_2718_exact(raw).map(|e| e.recover_signer())
        ),
    }
    Ok(())
}

fn run<T: std::fmt::Debug>(
    strategy: impl Strategy<Value = T>,
    encode: impl Fn(T, &SigningKey) -> Vec<u8>,
) {
    let mut runner = TestRunner::new(Config::with_cases(cases()));
    runner
        .run(&(strategy, key()), |(tx, key)| {
            let raw = encode(tx, &key);
            let ours = decode(&raw)
                .map_err(|e| TestCaseError::fail(format!("valid transaction refused: {e}")))?;
            let expected_sender = Address::from_public_key(key.verifying_key());
            prop_assert_eq!(Address::from(ours.sender.0), expected_sender);
            agree(&raw)
        })
        .unwrap();
}

#[test]
fn legacy_transactions_agree_with_alloy() {
    run(legacy(), encode);
}

#[test]
fn eip2930_transactions_agree_with_alloy() {
    run(eip2930(), encode);
}

#[test]
fn eip1559_transactions_agree_with_alloy() {
    run(eip1559(), encode);
}

#[test]
fn eip4844_transactions_agree_with_alloy() {
    run(eip4844(), encode_blob);
}

#[test]
fn eip7702_transactions_agree_with_alloy() {
    run(eip7702(), encode);
}

// ---- mutations -----------------------------------------------------------------------------

/// secp256k1's order n, big-endian.
const N: [u8; 32] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,
    0xba, 0xae, 0xdc, 0xe6, 0xaf, 0x48, 0xa0, 0x3b, 0xbf, 0xd2, 0x5e, 0x8c, 0xd0, 0x36, 0x41, 0x41,
];

#[derive(Debug, Clone)]
enum Mutation {
    Truncate(usize),
    Append(Vec<u8>),
    /// Adds `delta` to the length in the outer list header.
    OuterLength(i8),
    /// Prefixes a zero byte to the payload of integer field `index` (nonce, gas...).
    LeadingZero(usize),
    /// Replaces s by n - s (flipping the parity): the same signature in its high-s form.
    HighS,
    /// Sets legacy v, or a typed y-parity, to this value.
    V(u64),
    /// Flips one bit anywhere.
    Flip(usize, u8),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Truncate),
        proptest::collection::vec(any::<u8>(), 1..4).prop_map(Mutation::Append),
        prop_oneof![Just(-1i8), Just(1), Just(2), Just(-2)].prop_map(Mutation::OuterLength),
        (0usize..12).prop_map(Mutation::LeadingZero),
        Just(Mutation::HighS),
        prop_oneof![
            Just(0u64),
            Just(2),
            Just(26),
            Just(29),
            Just(34),
            any::<u64>()
        ]
        .prop_map(Mutation::V),
        (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Mutation::Flip(at, bit)),
    ]
}

/// The raw items of the transaction list (and the envelope's type byte, if typed).
fn split(raw: &[u8]) -> (Option<u8>, Vec<Vec<u8>>) {
    let (ty, body) = if raw[0] < 0x80 {
        (Some(raw[0]), &raw[1..])
    } else {
        (None, raw)
    };
    let items = rlp::Rlp::new(body)
        .iter()
        .map(|i| i.as_raw().to_vec())
        .collect();
    (ty, items)
}

fn join(ty: Option<u8>, items: &[Vec<u8>]) -> Vec<u8> {
    let mut s = rlp::RlpStream::new_list(items.len());
    for item in items {
        s.append_raw(item, 1);
    }
    let mut out: Vec<u8> = ty.into_iter().collect();
    out.extend_from_slice(&s.out());
    out
}

fn rlp_uint(bytes: &[u8]) -> Vec<u8> {
    let trimmed: Vec<u8> = bytes.iter().skip_while(|b| **b == 0).copied().collect();
    let mut s = rlp::RlpStream::new();
    s.append(&trimmed.as_slice());
    s.out().to_vec()
}

fn mutate(raw: &[u8], m: &Mutation) -> Vec<u8> {
    match m {
        Mutation::Truncate(at) => raw[..at % raw.len()].to_vec(),
        Mutation::Append(extra) => [raw, extra].concat(),
        Mutation::Flip(at, bit) => {
            let mut out = raw.to_vec();
            out[at % raw.len()] ^= 1 << bit;
            out
        }
        Mutation::OuterLength(delta) => {
            let mut out = raw.to_vec();
            let start = usize::from(raw[0] < 0x80);
            let header = out[start];
            if header >= 0xf8 {
                let last = start + usize::from(header - 0xf7);
                out[last] = out[last].wrapping_add_signed(*delta);
            } else {
                out[start] = header.wrapping_add_signed(*delta);
            }
            out
        }
        Mutation::LeadingZero(index) => {
            let (ty, mut items) = split(raw);
            let i = index % items.len();
            let item = &items[i];
            // Only integers (and fixed-size fields) are padded; calldata with a zero in front is
            // just other calldata.
            let data_index = match ty {
                None => 5,
                Some(1) => 6,
                Some(_) => 7,
            };
            if i == data_index || item.first().is_some_and(|b| *b >= 0xc0) {
                return raw.to_vec();
            }
            let payload = rlp::Rlp::new(item)
                .data()
                .map(<[u8]>::to_vec)
                .unwrap_or_default();
            let mut padded = vec![0u8];
            padded.extend_from_slice(&payload);
            let mut s = rlp::RlpStream::new();
            s.append(&padded.as_slice());
            items[i] = s.out().to_vec();
            join(ty, &items)
        }
        Mutation::HighS => {
            let (ty, mut items) = split(raw);
            let n = items.len();
            let s = U256::from_be_slice(rlp::Rlp::new(&items[n - 1]).data().unwrap());
            let high = U256::from_be_bytes(N) - s;
            items[n - 1] = rlp_uint(&high.to_be_bytes::<32>());
            // The same point with the other parity.
            let v = rlp::Rlp::new(&items[n - 3]).as_val::<u64>().unwrap_or(0);
            let flipped = match ty {
                None if v >= 35 || v == 27 || v == 28 => {
                    if (v >= 35 && (v - 35).is_multiple_of(2)) || v == 27 {
                        v + 1
                    } else {
                        v - 1
                    }
                }
                _ => v ^ 1,
            };
            items[n - 3] = rlp_uint(&flipped.to_be_bytes());
            join(ty, &items)
        }
        Mutation::V(v) => {
            let (ty, mut items) = split(raw);
            let n = items.len();
            items[n - 3] = rlp_uint(&v.to_be_bytes());
            join(ty, &items)
        }
    }
}

fn run_mutations<T: std::fmt::Debug>(
    strategy: impl Strategy<Value = T>,
    encode: impl Fn(T, &SigningKey) -> Vec<u8>,
) {
    let mut runner = TestRunner::new(Config::with_cases(cases()));
    runner
        .run(&(strategy, key(), mutation()), |(tx, key, m)| {
            let raw = encode(tx, &key);
            let bad = mutate(&raw, &m);
            if bad == raw {
                return Ok(());
            }
            // Refusals that every mutation of these kinds must produce, whatever alloy says.
            if matches!(
                m,
                Mutation::Append(_) | Mutation::LeadingZero(_) | Mutation::HighS
            ) {
                prop_assert!(decode(&bad).is_err(), "{m:?} accepted");
            }
            agree(&bad)
        })
        .unwrap();
}

#[test]
fn mutated_legacy_transactions_agree_with_alloy() {
    run_mutations(legacy(), encode);
}

#[test]
fn mutated_eip2930_transactions_agree_with_alloy() {
    run_mutations(eip2930(), encode);
}

#[test]
fn mutated_eip1559_transactions_agree_with_alloy() {
    run_mutations(eip1559(), encode);
}

#[test]
fn mutated_eip4844_transactions_agree_with_alloy() {
    run_mutations(eip4844(), encode_blob);
}

#[test]
fn mutated_eip7702_transactions_agree_with_alloy() {
    run_mutations(eip7702(), encode);
}

#[test]
fn stricter_rules_are_exactly_the_named_ones() {
    // EIP-2681: nonce 2^64-1 decodes in alloy, not here.
    let key = SigningKey::from_slice(&[7; 32]).unwrap();
    let tx = TxEip1559 {
        chain_id: 1,
        nonce: u64::MAX,
        gas_limit: 21_000,
        ..Default::default()
    };
    let raw = encode(tx, &key);
    assert!(alloy_view(&raw).is_some());
    assert_eq!(decode(&raw), Err(DecodeError::NonceMax));
    // EIP-1559: a tip above the fee cap.
    let tx = TxEip1559 {
        chain_id: 1,
        max_priority_fee_per_gas: 2,
        max_fee_per_gas: 1,
        ..Default::default()
    };
    let raw = encode(tx, &key);
    assert!(alloy_view(&raw).is_some());
    assert_eq!(decode(&raw), Err(DecodeError::TipAboveFeeCap));
    // EIP-4844: a versioned hash without the KZG version byte.
    let tx = TxEip4844 {
        chain_id: 1,
        blob_versioned_hashes: vec![B256::ZERO],
        ..Default::default()
    };
    let raw = encode_blob(tx, &key);
    assert!(alloy_view(&raw).is_some());
    assert_eq!(decode(&raw), Err(DecodeError::BlobHashVersion(0)));
}
