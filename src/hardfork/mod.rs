//! The stateless rules of each Ethereum hard fork that decide whether a node's pool takes a
//! transaction at all: the transaction types the fork knows, intrinsic gas
//! ([`intrinsic`]: EIP-2028 calldata, EIP-2930 access lists, EIP-3860 init code words, EIP-7702
//! authorizations, the EIP-7623 floor), the EIP-3860 init code size limit, the EIP-7825 gas cap and
//! the blob count limits ([`rules`]). `HARDFORK` names the fork (default [`Hardfork::Osaka`], the
//! fork Ethereum mainnet runs); the relay refuses what breaks its rules before the sender's
//! Durable Object is asked, with geth's wording (`core/txpool/validation.go`), so the upstream
//! never sees it (on Hedera each such refusal is charged).

pub mod intrinsic;
pub mod rules;

pub use rules::ForkError;

/// An Ethereum hard fork, oldest first (the order is the order of activation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Hardfork {
    /// Frontier (2015): legacy transactions only; creation costs 21,000 gas.
    Frontier,
    /// Homestead (EIP-2): a contract creation costs 53,000 gas.
    Homestead,
    /// Tangerine Whistle (EIP-150; ethereum/tests `EIP150`).
    TangerineWhistle,
    /// Spurious Dragon (EIP-155 replay protection; ethereum/tests `EIP158`).
    SpuriousDragon,
    /// Byzantium.
    Byzantium,
    /// Constantinople.
    Constantinople,
    /// Petersburg (ethereum/tests `ConstantinopleFix`).
    Petersburg,
    /// Istanbul (EIP-2028: 16 gas per non-zero calldata byte).
    Istanbul,
    /// Berlin (EIP-2718 typed transactions, EIP-2930 access lists: type 1).
    Berlin,
    /// London (EIP-1559: type 2).
    London,
    /// Paris (the Merge; ethereum/tests `Paris`, also `Merge`).
    Paris,
    /// Shanghai (EIP-3860: init code words cost gas and are at most 49,152 bytes).
    Shanghai,
    /// Cancun (EIP-4844 blob transactions: type 3, at most 6 blobs).
    Cancun,
    /// Prague (EIP-7702: type 4; EIP-7623 calldata floor; EIP-7691: at most 9 blobs).
    Prague,
    /// Osaka (EIP-7825: gas limit at most 2^24; EIP-7594: at most 6 blobs per transaction).
    Osaka,
}

/// Every fork, oldest first.
pub const ALL: [Hardfork; 15] = [
    Hardfork::Frontier,
    Hardfork::Homestead,
    Hardfork::TangerineWhistle,
    Hardfork::SpuriousDragon,
    Hardfork::Byzantium,
    Hardfork::Constantinople,
    Hardfork::Petersburg,
    Hardfork::Istanbul,
    Hardfork::Berlin,
    Hardfork::London,
    Hardfork::Paris,
    Hardfork::Shanghai,
    Hardfork::Cancun,
    Hardfork::Prague,
    Hardfork::Osaka,
];

impl Hardfork {
    /// The fork's name, lowercase, as `HARDFORK` takes it (`osaka`, `tangerine_whistle`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Hardfork::Frontier => "frontier",
            Hardfork::Homestead => "homestead",
            Hardfork::TangerineWhistle => "tangerine_whistle",
            Hardfork::SpuriousDragon => "spurious_dragon",
            Hardfork::Byzantium => "byzantium",
            Hardfork::Constantinople => "constantinople",
            Hardfork::Petersburg => "petersburg",
            Hardfork::Istanbul => "istanbul",
            Hardfork::Berlin => "berlin",
            Hardfork::London => "london",
            Hardfork::Paris => "paris",
            Hardfork::Shanghai => "shanghai",
            Hardfork::Cancun => "cancun",
            Hardfork::Prague => "prague",
            Hardfork::Osaka => "osaka",
        }
    }

    /// Reads a fork's name, case and `_`/`-` insensitive: the names of [`Hardfork::name`], the
    /// ethereum/tests names (`EIP150`, `EIP158`, `ConstantinopleFix`) and the common aliases
    /// (`merge`, `fusaka`, `pectra`, `dencun`, `shapella`); `None` for anything else.
    pub fn parse(name: &str) -> Option<Hardfork> {
        let squashed: String = name
            .trim()
            .chars()
            .filter(|c| !matches!(c, '_' | '-' | ' '))
            .map(|c| c.to_ascii_lowercase())
            .collect();
        Some(match squashed.as_str() {
            "frontier" => Hardfork::Frontier,
            "homestead" => Hardfork::Homestead,
            "tangerinewhistle" | "eip150" => Hardfork::TangerineWhistle,
            "spuriousdragon" | "eip158" | "eip155" => Hardfork::SpuriousDragon,
            "byzantium" => Hardfork::Byzantium,
            "constantinople" => Hardfork::Constantinople,
            "petersburg" | "constantinoplefix" => Hardfork::Petersburg,
            "istanbul" => Hardfork::Istanbul,
            "berlin" => Hardfork::Berlin,
            "london" => Hardfork::London,
            "paris" | "merge" => Hardfork::Paris,
            "shanghai" | "shapella" => Hardfork::Shanghai,
            "cancun" | "dencun" => Hardfork::Cancun,
            "prague" | "pectra" => Hardfork::Prague,
            "osaka" | "fusaka" => Hardfork::Osaka,
            _ => return None,
        })
    }

    /// Whether this fork includes `other` (is `other` or later).
    pub fn is(self, other: Hardfork) -> bool {
        self >= other
    }

    /// The fork's display name as geth's messages give it (`Berlin`, `Cancun`, ...).
    pub fn title(self) -> &'static str {
        match self {
            Hardfork::Frontier => "Frontier",
            Hardfork::Homestead => "Homestead",
            Hardfork::TangerineWhistle => "Tangerine Whistle",
            Hardfork::SpuriousDragon => "Spurious Dragon",
            Hardfork::Byzantium => "Byzantium",
            Hardfork::Constantinople => "Constantinople",
            Hardfork::Petersburg => "Petersburg",
            Hardfork::Istanbul => "Istanbul",
            Hardfork::Berlin => "Berlin",
            Hardfork::London => "London",
            Hardfork::Paris => "Paris",
            Hardfork::Shanghai => "Shanghai",
            Hardfork::Cancun => "Cancun",
            Hardfork::Prague => "Prague",
            Hardfork::Osaka => "Osaka",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_aliases() {
        for fork in ALL {
            assert_eq!(Hardfork::parse(fork.name()), Some(fork));
            assert_eq!(Hardfork::parse(fork.title()), Some(fork));
        }
        assert_eq!(Hardfork::parse("EIP150"), Some(Hardfork::TangerineWhistle));
        assert_eq!(Hardfork::parse("EIP158"), Some(Hardfork::SpuriousDragon));
        assert_eq!(
            Hardfork::parse("ConstantinopleFix"),
            Some(Hardfork::Petersburg)
        );
        assert_eq!(Hardfork::parse(" Fusaka "), Some(Hardfork::Osaka));
        assert_eq!(Hardfork::parse("merge"), Some(Hardfork::Paris));
        assert_eq!(Hardfork::parse("amsterdam"), None);
        assert_eq!(Hardfork::parse(""), None);
        assert!(ALL.windows(2).all(|w| w[0] < w[1]));
        assert!(Hardfork::Osaka.is(Hardfork::Prague) && !Hardfork::Cancun.is(Hardfork::Prague));
    }
}
