//! Strict, canonical RLP reading on top of the `rlp` crate (Ethereum Yellow Paper, appendix B).
//!
//! The `rlp` crate parses headers; this module adds what a transaction decoder must also refuse:
//! trailing bytes after an item or inside a list, a single byte below 0x80 wrapped in a string
//! header, integers with leading zero bytes, and fixed-size fields of the wrong length.

use rlp::{PayloadInfo, Rlp};
use std::fmt;

/// What was wrong with an RLP item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RlpProblem {
    /// The `rlp` crate's own header error (too short, length with a zero prefix, long form used for
    /// a short payload, ...), in its words.
    Header(String),
    /// Bytes left over after the item (at the top level or inside a list).
    TrailingBytes,
    /// A string was expected and a list found.
    ExpectedString,
    /// A list was expected and a string found.
    ExpectedList,
    /// A single byte below 0x80 encoded with a string header (it must stand alone).
    NonCanonicalSingleByte,
    /// An integer with leading zero bytes.
    LeadingZeros,
    /// An integer longer than the field allows; the limit in bytes.
    TooLong(usize),
    /// A fixed-size field of the wrong length: expected bytes, found bytes.
    WrongLength(usize, usize),
    /// A list with the wrong number of items: expected, found.
    WrongItemCount(usize, usize),
}

impl fmt::Display for RlpProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RlpProblem::Header(e) => write!(f, "malformed header ({e})"),
            RlpProblem::TrailingBytes => write!(f, "trailing bytes"),
            RlpProblem::ExpectedString => write!(f, "expected a string, found a list"),
            RlpProblem::ExpectedList => write!(f, "expected a list, found a string"),
            RlpProblem::NonCanonicalSingleByte => {
                write!(
                    f,
                    "non-canonical size information (single byte below 0x80 with a header)"
                )
            }
            RlpProblem::LeadingZeros => write!(f, "non-canonical integer (leading zero bytes)"),
            RlpProblem::TooLong(max) => write!(f, "integer longer than {max} bytes"),
            RlpProblem::WrongLength(want, got) => write!(f, "expected {want} bytes, found {got}"),
            RlpProblem::WrongItemCount(want, got) => {
                write!(f, "expected a list of {want} items, found {got}")
            }
        }
    }
}

fn header(bytes: &[u8]) -> Result<PayloadInfo, RlpProblem> {
    let info = PayloadInfo::from(bytes).map_err(|e| RlpProblem::Header(format!("{e:?}")))?;
    match info.header_len.checked_add(info.value_len) {
        Some(total) if total <= bytes.len() => {}
        _ => return Err(RlpProblem::Header("RlpIsTooShort".into())),
    }
    Ok(info)
}

/// Checks that `bytes` is exactly one RLP item (no trailing bytes) and returns a view of it.
///
/// # Errors
/// [`RlpProblem::Header`] for a malformed header, [`RlpProblem::TrailingBytes`] for leftovers.
pub fn whole(bytes: &[u8]) -> Result<Rlp<'_>, RlpProblem> {
    if header(bytes)?.total() != bytes.len() {
        return Err(RlpProblem::TrailingBytes);
    }
    Ok(Rlp::new(bytes))
}

/// The items of a list, each checked to be well formed and together to fill the list exactly.
///
/// # Errors
/// [`RlpProblem::ExpectedList`] for a string, a header problem, or trailing bytes in the payload.
pub fn items<'a>(item: &Rlp<'a>) -> Result<Vec<Rlp<'a>>, RlpProblem> {
    let raw = item.as_raw();
    if !item.is_list() {
        return Err(RlpProblem::ExpectedList);
    }
    let info = header(raw)?;
    let mut rest = &raw[info.header_len..info.total()];
    let mut out = Vec::new();
    while !rest.is_empty() {
        let h = header(rest)?;
        let (this, tail) = rest.split_at(h.total());
        out.push(Rlp::new(this));
        rest = tail;
    }
    Ok(out)
}

/// The items of a list that must have exactly `count` of them.
///
/// # Errors
/// As [`items`], and [`RlpProblem::WrongItemCount`].
pub fn items_exact<'a>(item: &Rlp<'a>, count: usize) -> Result<Vec<Rlp<'a>>, RlpProblem> {
    let out = items(item)?;
    if out.len() != count {
        return Err(RlpProblem::WrongItemCount(count, out.len()));
    }
    Ok(out)
}

/// The payload of a string item, refusing a lone byte below 0x80 wrapped in a header.
///
/// # Errors
/// [`RlpProblem::ExpectedString`] for a list, [`RlpProblem::NonCanonicalSingleByte`].
pub fn bytes<'a>(item: &Rlp<'a>) -> Result<&'a [u8], RlpProblem> {
    if item.is_list() {
        return Err(RlpProblem::ExpectedString);
    }
    let raw = item.as_raw();
    let info = header(raw)?;
    let data = &raw[info.header_len..info.total()];
    if info.header_len == 1 && data.len() == 1 && data[0] < 0x80 {
        return Err(RlpProblem::NonCanonicalSingleByte);
    }
    Ok(data)
}

/// A fixed-size string such as an address (20 bytes) or a storage key (32 bytes).
///
/// # Errors
/// As [`bytes`], and [`RlpProblem::WrongLength`].
pub fn fixed<'a, const N: usize>(item: &Rlp<'a>) -> Result<&'a [u8; N], RlpProblem> {
    let data = bytes(item)?;
    data.try_into()
        .map_err(|_| RlpProblem::WrongLength(N, data.len()))
}

/// The items of a list, each a fixed-size string of `N` bytes (storage keys, blob versioned
/// hashes, sidecar blobs, commitments and proofs).
///
/// # Errors
/// As [`items`] and [`fixed`].
pub fn fixed_items<'a, const N: usize>(item: &Rlp<'a>) -> Result<Vec<&'a [u8; N]>, RlpProblem> {
    items(item)?.iter().map(fixed::<N>).collect()
}

/// A big-endian unsigned integer of at most `max_len` bytes, canonical (no leading zeros; zero is
/// the empty string). Returns the minimal big-endian bytes.
///
/// # Errors
/// As [`bytes`], [`RlpProblem::LeadingZeros`], [`RlpProblem::TooLong`].
pub fn uint<'a>(item: &Rlp<'a>, max_len: usize) -> Result<&'a [u8], RlpProblem> {
    let data = bytes(item)?;
    if data.first() == Some(&0) {
        return Err(RlpProblem::LeadingZeros);
    }
    if data.len() > max_len {
        return Err(RlpProblem::TooLong(max_len));
    }
    Ok(data)
}

/// A canonical integer of at most 64 bits (nonce, gas limit, chain id).
///
/// # Errors
/// As [`uint`] with an 8-byte limit.
pub fn u64_value(item: &Rlp<'_>) -> Result<u64, RlpProblem> {
    Ok(uint(item, 8)?
        .iter()
        .fold(0u64, |acc, b| acc << 8 | u64::from(*b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_rejects_trailing_bytes() {
        assert!(whole(&[0x82, 0x01, 0x02]).is_ok());
        assert_eq!(
            whole(&[0x82, 0x01, 0x02, 0x00]).unwrap_err(),
            RlpProblem::TrailingBytes
        );
        assert!(matches!(whole(&[0x83, 0x01]), Err(RlpProblem::Header(_))));
    }

    #[test]
    fn list_items_must_fill_the_list() {
        let ok = [0xc2, 0x01, 0x02];
        assert_eq!(items(&Rlp::new(&ok)).unwrap().len(), 2);
        // List header claims 3 payload bytes, the last item says it has 2 bytes of payload.
        let bad = [0xc3, 0x01, 0x82, 0x02];
        assert!(items(&Rlp::new(&bad)).is_err());
        assert_eq!(
            items_exact(&Rlp::new(&ok), 3).unwrap_err(),
            RlpProblem::WrongItemCount(3, 2)
        );
    }

    #[test]
    fn integers_are_canonical() {
        assert_eq!(u64_value(&Rlp::new(&[0x80])), Ok(0));
        assert_eq!(u64_value(&Rlp::new(&[0x7f])), Ok(0x7f));
        assert_eq!(u64_value(&Rlp::new(&[0x82, 0x01, 0x00])), Ok(0x100));
        assert_eq!(u64_value(&Rlp::new(&[0x00])), Err(RlpProblem::LeadingZeros));
        assert_eq!(
            u64_value(&Rlp::new(&[0x82, 0x00, 0x01])),
            Err(RlpProblem::LeadingZeros)
        );
        assert_eq!(
            u64_value(&Rlp::new(&[0x81, 0x05])),
            Err(RlpProblem::NonCanonicalSingleByte)
        );
        let nine = [0x89, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(u64_value(&Rlp::new(&nine)), Err(RlpProblem::TooLong(8)));
    }

    #[test]
    fn fixed_sizes() {
        let mut addr = vec![0x94];
        addr.extend([0xaa; 20]);
        assert!(fixed::<20>(&Rlp::new(&addr)).is_ok());
        assert_eq!(
            fixed::<32>(&Rlp::new(&addr)).unwrap_err(),
            RlpProblem::WrongLength(32, 20)
        );
        let mut list = vec![0xc0 + 2 * 21];
        list.extend(&addr);
        list.extend(&addr);
        assert_eq!(fixed_items::<20>(&Rlp::new(&list)).unwrap().len(), 2);
        assert_eq!(
            fixed_items::<32>(&Rlp::new(&list)).unwrap_err(),
            RlpProblem::WrongLength(32, 20)
        );
    }
}
