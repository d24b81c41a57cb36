//! Transactions of every type, built and signed by cast and judged by anvil
//! (tests/fixtures/typed-transactions.json, see generate-typed.mjs there): the decoder must give
//! anvil's hash, sender, type, chain id and nonce, and refuse damaged copies.

use nonce_relay::hex;
use nonce_relay::transaction::{decode, DecodeError, TxType};
use rlp::{Rlp, RlpStream};
use serde_json::Value;

fn fixtures() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/typed-transactions.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn raw(f: &Value) -> Vec<u8> {
    hex::decode(f["raw"].as_str().unwrap()).unwrap()
}

fn by_name(name: &str) -> Value {
    fixtures()
        .into_iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no fixture {name}"))
}

#[test]
fn every_type_decodes_as_anvil_saw_it() {
    let all = fixtures();
    let mut types: Vec<u8> = Vec::new();
    for f in &all {
        let tx = decode(&raw(f)).unwrap_or_else(|e| panic!("{}: {e}", f["name"]));
        assert_eq!(hex::encode(&tx.hash), f["hash"], "{}", f["name"]);
        assert_eq!(tx.sender.to_string(), f["sender"], "{}", f["name"]);
        assert_eq!(u64::from(tx.tx_type.byte()), f["type"], "{}", f["name"]);
        assert_eq!(tx.chain_id, f["chain_id"].as_u64(), "{}", f["name"]);
        assert_eq!(tx.nonce, f["nonce"], "{}", f["name"]);
        types.push(tx.tx_type.byte());
    }
    types.sort_unstable();
    types.dedup();
    assert_eq!(types, [0, 1, 2, 3, 4], "every EIP-2718 type is covered");
}

/// The canonical form of a network-form blob transaction: `0x03 || rlp(tx_payload_body)`.
fn canonical_blob(network: &[u8]) -> Vec<u8> {
    let outer = Rlp::new(&network[1..]);
    let mut out = vec![0x03];
    out.extend_from_slice(outer.at(0).unwrap().as_raw());
    out
}

#[test]
fn blob_transactions_have_the_canonical_hash_in_both_forms() {
    for name in [
        "EIP-4844 network form (EIP-4844 proofs)",
        "EIP-4844 network form (EIP-7594 cell proofs)",
    ] {
        let f = by_name(name);
        let network = raw(&f);
        let canonical = canonical_blob(&network);
        let a = decode(&network).unwrap();
        let b = decode(&canonical).unwrap();
        assert_eq!(a, b, "{name}");
        assert_eq!(a.tx_type, TxType::Blob);
        assert_eq!(
            hex::encode(&nonce_relay::signature::keccak256(&canonical)),
            f["hash"]
        );
    }
}

/// Rebuilds a network-form blob transaction with its sidecar lists changed by `edit`.
fn with_sidecar(network: &[u8], edit: impl Fn(&mut Vec<Vec<u8>>)) -> Vec<u8> {
    let outer = Rlp::new(&network[1..]);
    let mut items: Vec<Vec<u8>> = outer.iter().map(|i| i.as_raw().to_vec()).collect();
    edit(&mut items);
    let mut s = RlpStream::new_list(items.len());
    for item in &items {
        s.append_raw(item, 1);
    }
    let mut out = vec![0x03];
    out.extend_from_slice(&s.out());
    out
}

/// A list item with its last element dropped.
fn drop_last(list: &[u8]) -> Vec<u8> {
    let items: Vec<Vec<u8>> = Rlp::new(list).iter().map(|i| i.as_raw().to_vec()).collect();
    let mut s = RlpStream::new_list(items.len() - 1);
    for item in &items[..items.len() - 1] {
        s.append_raw(item, 1);
    }
    s.out().to_vec()
}

#[test]
fn sidecars_must_match_the_versioned_hashes() {
    let legacy_form = raw(&by_name("EIP-4844 network form (EIP-4844 proofs)"));
    let cell_form = raw(&by_name("EIP-4844 network form (EIP-7594 cell proofs)"));
    // [body, blobs, commitments, proofs]: one proof missing.
    let bad = with_sidecar(&legacy_form, |items| items[3] = drop_last(&items[3]));
    assert!(
        matches!(decode(&bad), Err(DecodeError::Sidecar(_))),
        "{:?}",
        decode(&bad)
    );
    // [body, version, blobs, commitments, cell_proofs]: one cell proof missing.
    let bad = with_sidecar(&cell_form, |items| items[4] = drop_last(&items[4]));
    assert!(
        matches!(decode(&bad), Err(DecodeError::Sidecar(_))),
        "{:?}",
        decode(&bad)
    );
    // An unknown wrapper version.
    let bad = with_sidecar(&cell_form, |items| items[1] = vec![0x02]);
    assert!(
        matches!(decode(&bad), Err(DecodeError::Sidecar(_))),
        "{:?}",
        decode(&bad)
    );
    // A commitment that does not hash to its versioned hash (EIP-4844 kzg_to_versioned_hash).
    let bad = with_sidecar(&cell_form, |items| {
        let mut commitments: Vec<Vec<u8>> = Rlp::new(&items[3])
            .iter()
            .map(|i| i.data().unwrap().to_vec())
            .collect();
        commitments[0][47] ^= 1;
        let mut s = RlpStream::new_list(commitments.len());
        for c in &commitments {
            s.append(&c.as_slice());
        }
        items[3] = s.out().to_vec();
    });
    match decode(&bad) {
        Err(DecodeError::Sidecar(why)) => assert!(why.contains("versioned hash 0"), "{why}"),
        other => panic!("altered commitment: {other:?}"),
    }
    // A blob one byte short.
    let bad = with_sidecar(&legacy_form, |items| {
        let blobs: Vec<Vec<u8>> = Rlp::new(&items[1])
            .iter()
            .map(|i| i.data().unwrap()[1..].to_vec())
            .collect();
        let mut s = RlpStream::new_list(blobs.len());
        for blob in &blobs {
            s.append(&blob.as_slice());
        }
        items[1] = s.out().to_vec();
    });
    assert!(decode(&bad).is_err());
}

#[test]
fn damaged_copies_are_refused() {
    for f in fixtures() {
        let good = raw(&f);
        let name = f["name"].as_str().unwrap();
        let mut extra = good.clone();
        extra.push(0);
        assert!(decode(&extra).is_err(), "{name}: trailing byte accepted");
        for cut in [1, good.len() / 2, good.len() - 1] {
            assert!(
                decode(&good[..cut]).is_err(),
                "{name}: truncated at {cut} accepted"
            );
        }
        // A flipped bit in the signature's s: either refused or another sender, never this one.
        let mut flipped = good.clone();
        let at = if good[0] == 0x03 {
            // the body's last byte (end of s) in the network form
            let outer = Rlp::new(&good[1..]);
            let body = outer.at(0).unwrap();
            let start = body.as_raw().as_ptr() as usize - good.as_ptr() as usize;
            start + body.as_raw().len() - 1
        } else {
            good.len() - 1
        };
        flipped[at] ^= 1;
        if let Ok(tx) = decode(&flipped) {
            assert_ne!(
                tx.sender.to_string(),
                f["sender"],
                "{name}: altered signature, same sender"
            );
        }
    }
}

#[test]
fn set_code_transactions_need_an_authorization() {
    let f = by_name("EIP-7702");
    let good = raw(&f);
    let body = Rlp::new(&good[1..]);
    let items: Vec<Vec<u8>> = body.iter().map(|i| i.as_raw().to_vec()).collect();
    let mut s = RlpStream::new_list(items.len());
    for (i, item) in items.iter().enumerate() {
        if i == 9 {
            s.begin_list(0);
        } else {
            s.append_raw(item, 1);
        }
    }
    let mut bad = vec![0x04];
    bad.extend_from_slice(&s.out());
    assert_eq!(decode(&bad), Err(DecodeError::EmptyAuthorizationList));
}
