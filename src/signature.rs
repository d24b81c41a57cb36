//! secp256k1 transaction signatures: validity rules and sender recovery.
//!
//! A signature is (y-parity, r, s). `r` and `s` must be in `1..n` and, since EIP-2 (Homestead),
//! `s <= n/2`. The sender is the last 20 bytes of keccak-256 of the public key recovered from the
//! signing hash (Yellow Paper, appendix F).

use crate::address::Address;
use k256::ecdsa::Signature;
use k256::elliptic_curve::group::Group;
use k256::elliptic_curve::ops::{LinearCombination, Reduce};
use k256::elliptic_curve::point::DecompressPoint;
use k256::elliptic_curve::sec1::ToEncodedPoint;
use k256::elliptic_curve::subtle::Choice;
use k256::elliptic_curve::PrimeField;
use k256::{AffinePoint, FieldBytes, ProjectivePoint, Scalar, U256};
use sha3::{Digest, Keccak256};
use std::fmt;

/// Why a signature was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureError {
    /// `r` or `s` is zero, or not below the curve order n.
    OutOfRange,
    /// `s > n/2`: a malleable signature, forbidden by EIP-2.
    HighS,
    /// No public key could be recovered (for example the point at infinity).
    RecoveryFailed,
}

impl fmt::Display for SignatureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SignatureError::OutOfRange => {
                write!(f, "invalid transaction v, r, s values: r or s is zero or not below the curve order")
            }
            SignatureError::HighS => write!(
                f,
                "invalid transaction v, r, s values: s is above secp256k1n/2 (EIP-2)"
            ),
            SignatureError::RecoveryFailed => {
                write!(
                    f,
                    "invalid signature: the sender's public key cannot be recovered"
                )
            }
        }
    }
}

impl std::error::Error for SignatureError {}

/// keccak-256 of `data`.
pub fn keccak256(data: &[u8]) -> [u8; 32] {
    Keccak256::digest(data).into()
}

fn left_pad(bytes: &[u8]) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    out.get_mut(32usize.checked_sub(bytes.len())?..)?
        .copy_from_slice(bytes);
    Some(out)
}

/// Recovers the sender of `signing_hash` signed with (`y_parity`, `r`, `s`).
///
/// `r` and `s` are minimal big-endian bytes of at most 32 bytes each (as RLP carries them).
///
/// The public key is `Q = r⁻¹ (s·R − z·G)` (SEC 1 v2, section 4.1.6) with `R` the curve point whose
/// x is `r` and whose y has the given parity, computed with k256's own arithmetic. Unlike
/// `VerifyingKey::recover_from_prehash`, it does not verify the signature again against `Q`:
/// that check holds by construction and doubled the cost (about 0.3 ms of wasm per transaction).
/// The one case it would catch, `Q` at infinity, is refused here. Ethereum's y-parity covers only
/// recovery ids 0 and 1, so `R.x = r` (never `r + n`).
///
/// # Errors
/// [`SignatureError::OutOfRange`], [`SignatureError::HighS`] (EIP-2) or
/// [`SignatureError::RecoveryFailed`].
pub fn recover_sender(
    signing_hash: &[u8; 32],
    y_parity: bool,
    r: &[u8],
    s: &[u8],
) -> Result<Address, SignatureError> {
    let r = left_pad(r).ok_or(SignatureError::OutOfRange)?;
    let s = left_pad(s).ok_or(SignatureError::OutOfRange)?;
    let mut rs = [0u8; 64];
    rs[..32].copy_from_slice(&r);
    rs[32..].copy_from_slice(&s);
    // Checks 0 < r, s < n.
    let signature = Signature::from_slice(&rs).map_err(|_| SignatureError::OutOfRange)?;
    if signature.normalize_s().is_some() {
        return Err(SignatureError::HighS);
    }
    let (r, s) = signature.split_scalars();
    let z = <Scalar as Reduce<U256>>::reduce_bytes(&FieldBytes::from(*signing_hash));
    let big_r: Option<AffinePoint> =
        AffinePoint::decompress(&r.to_repr(), Choice::from(u8::from(y_parity))).into();
    let big_r = ProjectivePoint::from(big_r.ok_or(SignatureError::RecoveryFailed)?);
    let r_inv: Scalar = Option::from(r.as_ref().invert()).ok_or(SignatureError::OutOfRange)?;
    let u1 = -(r_inv * z);
    let u2 = r_inv * *s;
    let q = ProjectivePoint::lincomb(&ProjectivePoint::GENERATOR, &u1, &big_r, &u2);
    if bool::from(q.is_identity()) {
        return Err(SignatureError::RecoveryFailed);
    }
    let point = q.to_affine().to_encoded_point(false);
    let hash = keccak256(&point.as_bytes()[1..]);
    let mut address = [0u8; 20];
    address.copy_from_slice(&hash[12..]);
    Ok(Address(address))
}

#[cfg(test)]
mod tests {
    use super::*;

    // secp256k1 order n and n/2, big-endian.
    const N: &str = "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141";
    const HALF_N: &str = "7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0";

    fn hex32(s: &str) -> Vec<u8> {
        crate::hex::decode(&format!("0x{s}")).unwrap()
    }

    #[test]
    fn keccak_of_empty_input() {
        assert_eq!(
            crate::hex::encode(&keccak256(b"")),
            "0xc5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
        );
    }

    #[test]
    fn recovers_the_signing_key_for_both_parities() {
        use k256::ecdsa::SigningKey;
        let mut parities = [false; 2];
        for i in 1..=40u8 {
            let key = SigningKey::from_slice(&[i; 32]).unwrap();
            let hash = keccak256(&[i]);
            let (sig, recid) = key.sign_prehash_recoverable(&hash).unwrap();
            let bytes = sig.to_bytes();
            let got = recover_sender(&hash, recid.is_y_odd(), &bytes[..32], &bytes[32..]).unwrap();
            let point = key.verifying_key().to_encoded_point(false);
            assert_eq!(got.0, keccak256(&point.as_bytes()[1..])[12..]);
            // The other parity gives another key, never this one.
            let other = recover_sender(&hash, !recid.is_y_odd(), &bytes[..32], &bytes[32..]);
            assert_ne!(other.map(|a| a.0), Ok(got.0));
            parities[usize::from(recid.is_y_odd())] = true;
        }
        assert_eq!(parities, [true, true]);
    }

    #[test]
    fn rejects_zero_and_out_of_range_scalars() {
        let h = [7u8; 32];
        assert_eq!(
            recover_sender(&h, false, &[], &[1]),
            Err(SignatureError::OutOfRange)
        );
        assert_eq!(
            recover_sender(&h, false, &[1], &[]),
            Err(SignatureError::OutOfRange)
        );
        assert_eq!(
            recover_sender(&h, false, &hex32(N), &[1]),
            Err(SignatureError::OutOfRange)
        );
        assert_eq!(
            recover_sender(&h, false, &[1; 33], &[1]),
            Err(SignatureError::OutOfRange)
        );
    }

    #[test]
    fn high_s_is_refused_and_half_n_is_the_boundary() {
        let h = [7u8; 32];
        let mut above = hex32(HALF_N);
        *above.last_mut().unwrap() += 1;
        assert_eq!(
            recover_sender(&h, false, &[5], &above),
            Err(SignatureError::HighS)
        );
        assert_ne!(
            recover_sender(&h, false, &[5], &hex32(HALF_N)),
            Err(SignatureError::HighS)
        );
    }
}
