//! `0x`-prefixed hexadecimal, as JSON-RPC carries bytes and quantities (EIP-1474, "Value encoding").

use std::fmt;

/// Why a hex string could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HexError {
    /// The string does not start with `0x` (or `0X`).
    MissingPrefix,
    /// An odd number of hex digits: bytes need two digits each.
    OddLength,
    /// A character that is not a hex digit, at this byte offset of the whole string.
    InvalidDigit(usize),
}

impl fmt::Display for HexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HexError::MissingPrefix => write!(f, "hex string without 0x prefix"),
            HexError::OddLength => write!(f, "hex string of odd length"),
            HexError::InvalidDigit(at) => write!(f, "invalid hex character at offset {at}"),
        }
    }
}

impl std::error::Error for HexError {}

fn digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Decodes `0x`-prefixed hex (either case) into bytes. `"0x"` is the empty byte string.
///
/// # Errors
/// [`HexError`] when the prefix is missing, the digit count is odd, or a character is not hex.
pub fn decode(s: &str) -> Result<Vec<u8>, HexError> {
    let digits = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .ok_or(HexError::MissingPrefix)?
        .as_bytes();
    if digits.len() % 2 != 0 {
        return Err(HexError::OddLength);
    }
    digits
        .chunks_exact(2)
        .enumerate()
        .map(|(i, pair)| {
            let hi = digit(pair[0]).ok_or(HexError::InvalidDigit(2 + 2 * i))?;
            let lo = digit(pair[1]).ok_or(HexError::InvalidDigit(3 + 2 * i))?;
            Ok(hi << 4 | lo)
        })
        .collect()
}

/// Decodes `0x`-prefixed hex of exactly `N` bytes (a transaction hash: `N` = 32); `None` for
/// anything else (see [`decode`]).
pub fn decode_array<const N: usize>(s: &str) -> Option<[u8; N]> {
    decode(s).ok()?.try_into().ok()
}

/// Encodes bytes as lowercase `0x`-prefixed hex.
pub fn encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(2 + 2 * bytes.len());
    out.push_str("0x");
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    out
}

/// Encodes a quantity as EIP-1474 wants it: lowercase hex, `0x` prefix, no leading zeros (`0x0` for zero).
pub fn encode_quantity(value: u64) -> String {
    format!("{value:#x}")
}

/// Reads an EIP-1474 quantity (`0x`-prefixed hex, at most 64 bits), such as `eth_chainId`'s answer.
///
/// # Errors
/// [`HexError`] when the prefix is missing or a digit is not hex; `InvalidDigit` also when the
/// value does not fit in 64 bits or there are no digits at all.
pub fn decode_quantity(s: &str) -> Result<u64, HexError> {
    let digits = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .ok_or(HexError::MissingPrefix)?;
    if digits.is_empty() {
        return Err(HexError::InvalidDigit(2));
    }
    u64::from_str_radix(digits, 16).map_err(|_| HexError::InvalidDigit(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_size_arrays() {
        assert_eq!(decode_array::<2>("0xabCD"), Some([0xab, 0xcd]));
        assert_eq!(decode_array::<2>("0xab"), None, "too short");
        assert_eq!(decode_array::<2>("0xabcdef"), None, "too long");
        assert_eq!(decode_array::<2>("abcd"), None, "no prefix");
    }

    #[test]
    fn round_trips_bytes() {
        let bytes = [0x00, 0x01, 0xab, 0xff];
        assert_eq!(encode(&bytes), "0x0001abff");
        assert_eq!(decode("0x0001ABff").unwrap(), bytes);
        assert_eq!(decode("0x").unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn rejects_malformed_hex() {
        assert_eq!(decode("abcd"), Err(HexError::MissingPrefix));
        assert_eq!(decode("0xabc"), Err(HexError::OddLength));
        assert_eq!(decode("0xzz"), Err(HexError::InvalidDigit(2)));
        assert_eq!(decode("0x0g"), Err(HexError::InvalidDigit(3)));
    }

    #[test]
    fn quantities() {
        assert_eq!(encode_quantity(0), "0x0");
        assert_eq!(encode_quantity(31337), "0x7a69");
        assert_eq!(decode_quantity("0x7a69"), Ok(31337));
        assert!(decode_quantity("0x").is_err());
        assert!(decode_quantity("0x10000000000000000").is_err());
    }
}
