//! A 20-byte account address, shown as lowercase `0x` hex (the relay's canonical spelling, which
//! also names each sender's Durable Object).

use std::fmt;

/// A 20-byte Ethereum address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Address(pub [u8; 20]);

impl fmt::Display for Address {
    /// Lowercase `0x`-prefixed hex, 42 characters.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::hex::encode(&self.0))
    }
}

impl fmt::Debug for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::str::FromStr for Address {
    type Err = String;

    /// Parses `0x` + 40 hex digits, either case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bytes = crate::hex::decode(s).map_err(|e| e.to_string())?;
        let array: [u8; 20] = bytes
            .try_into()
            .map_err(|b: Vec<u8>| format!("an address has 20 bytes, not {}", b.len()))?;
        Ok(Address(array))
    }
}

impl serde::Serialize for Address {
    /// As its [`fmt::Display`] text.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Address {
    /// From `0x` and 40 hex digits, either case.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_lowercase_and_parses_either_case() {
        let a: Address = "0xF39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
            .parse()
            .unwrap();
        assert_eq!(a.to_string(), "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266");
        assert!("0x1234".parse::<Address>().is_err());
    }
}
