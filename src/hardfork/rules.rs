//! The check of one decoded transaction against a fork's stateless rules, in geth's order
//! (`core/txpool/validation.go` `ValidateTransaction`): type, blob count, init code size, gas
//! cap, intrinsic gas, floor. Each [`ForkError`]'s `Display` is geth's message for it, so a client
//! sees what a geth node would have answered (JSON-RPC -32000).

use super::intrinsic::{floor_data_gas, intrinsic_gas};
use super::Hardfork;
use crate::transaction::{Transaction, TxType};
use std::fmt;

/// EIP-3860's `MAX_INITCODE_SIZE`: twice EIP-170's 24,576-byte code limit, bytes (Shanghai on).
pub const MAX_INIT_CODE_SIZE: u64 = 49_152;
/// EIP-7825's `TX_GAS_LIMIT_CAP`, 2^24 gas (Osaka on).
pub const MAX_TX_GAS: u64 = 1 << 24;

/// Why a transaction breaks the fork's rules. `Display` is geth's wording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForkError {
    /// A type the fork does not know (EIP-2930 type 1 from Berlin, EIP-1559 type 2 from London,
    /// EIP-4844 type 3 from Cancun, EIP-7702 type 4 from Prague).
    TypeNotSupported {
        /// The type byte.
        tx_type: u8,
        /// The first fork that knows it.
        needs: Hardfork,
    },
    /// An EIP-155 replay-protected legacy transaction before Spurious Dragon.
    ReplayProtectionNotActive,
    /// More blobs than the fork allows in one transaction (6 in Cancun, EIP-4844; 9 in Prague,
    /// EIP-7691; 6 from Osaka, EIP-7594).
    TooManyBlobs {
        /// The transaction's blob count.
        have: u64,
        /// The fork's limit.
        permitted: u64,
    },
    /// A creation whose init code is above [`MAX_INIT_CODE_SIZE`] bytes (EIP-3860, Shanghai on).
    InitCodeTooLarge {
        /// The init code's size, bytes.
        size: u64,
    },
    /// A gas limit above [`MAX_TX_GAS`] (EIP-7825, Osaka on).
    GasLimitTooHigh {
        /// The gas limit.
        gas: u64,
    },
    /// A gas limit below the intrinsic gas.
    IntrinsicGas {
        /// The gas limit.
        gas: u64,
        /// The intrinsic gas.
        needed: u64,
    },
    /// A gas limit below the EIP-7623 calldata floor (Prague on).
    FloorDataGas {
        /// The gas limit.
        gas: u64,
        /// The floor.
        needed: u64,
    },
}

impl fmt::Display for ForkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ForkError::TypeNotSupported { tx_type, needs } => write!(
                f,
                "transaction type not supported: type {tx_type} rejected, pool not yet in {}",
                needs.title()
            ),
            ForkError::ReplayProtectionNotActive => write!(
                f,
                "invalid sender: replay-protected (EIP-155) transaction before Spurious Dragon"
            ),
            ForkError::TooManyBlobs { have, permitted } => write!(
                f,
                "too many blobs in transaction: have {have}, permitted {permitted}"
            ),
            ForkError::InitCodeTooLarge { size } => write!(
                f,
                "max initcode size exceeded: code size {size}, limit {MAX_INIT_CODE_SIZE}"
            ),
            ForkError::GasLimitTooHigh { gas } => write!(
                f,
                "transaction gas limit too high (cap: {MAX_TX_GAS}, tx: {gas})"
            ),
            ForkError::IntrinsicGas { gas, needed } => write!(
                f,
                "intrinsic gas too low: gas {gas}, minimum needed {needed}"
            ),
            ForkError::FloorDataGas { gas, needed } => write!(
                f,
                "insufficient gas for floor data gas cost: gas {gas}, minimum needed {needed}"
            ),
        }
    }
}

impl std::error::Error for ForkError {}

impl ForkError {
    /// A short name for logs and metrics (`intrinsic_gas`, `floor_data_gas`, ...).
    pub fn label(&self) -> &'static str {
        match self {
            ForkError::TypeNotSupported { .. } => "type_not_supported",
            ForkError::ReplayProtectionNotActive => "replay_protection_not_active",
            ForkError::TooManyBlobs { .. } => "too_many_blobs",
            ForkError::InitCodeTooLarge { .. } => "init_code_too_large",
            ForkError::GasLimitTooHigh { .. } => "gas_limit_too_high",
            ForkError::IntrinsicGas { .. } => "intrinsic_gas",
            ForkError::FloorDataGas { .. } => "floor_data_gas",
        }
    }
}

impl Hardfork {
    /// The first fork that knows transactions of `tx_type`.
    pub fn introducing(tx_type: TxType) -> Hardfork {
        match tx_type {
            TxType::Legacy => Hardfork::Frontier,
            TxType::AccessList => Hardfork::Berlin,
            TxType::DynamicFee => Hardfork::London,
            TxType::Blob => Hardfork::Cancun,
            TxType::SetCode => Hardfork::Prague,
        }
    }

    /// The most blobs one transaction may carry: 6 in Cancun (EIP-4844's 786,432 blob gas per
    /// block), 9 in Prague (EIP-7691), 6 from Osaka (EIP-7594 `MAX_BLOBS_PER_TX`); 0 before
    /// Cancun.
    pub fn max_blobs_per_tx(self) -> u64 {
        match self {
            f if f.is(Hardfork::Osaka) => 6,
            f if f.is(Hardfork::Prague) => 9,
            f if f.is(Hardfork::Cancun) => 6,
            _ => 0,
        }
    }

    /// Checks `tx` against this fork's stateless rules.
    ///
    /// # Errors
    /// The first rule it breaks, in geth's order: [`ForkError::TypeNotSupported`],
    /// [`ForkError::ReplayProtectionNotActive`], [`ForkError::TooManyBlobs`],
    /// [`ForkError::InitCodeTooLarge`], [`ForkError::GasLimitTooHigh`],
    /// [`ForkError::IntrinsicGas`], [`ForkError::FloorDataGas`].
    pub fn check(self, tx: &Transaction) -> Result<(), ForkError> {
        let needs = Hardfork::introducing(tx.tx_type);
        if !self.is(needs) {
            return Err(ForkError::TypeNotSupported {
                tx_type: tx.tx_type.byte(),
                needs,
            });
        }
        if tx.tx_type == TxType::Legacy
            && tx.chain_id.is_some()
            && !self.is(Hardfork::SpuriousDragon)
        {
            return Err(ForkError::ReplayProtectionNotActive);
        }
        let p = &tx.payload;
        let permitted = self.max_blobs_per_tx();
        if p.blobs > permitted {
            return Err(ForkError::TooManyBlobs {
                have: p.blobs,
                permitted,
            });
        }
        if p.create && self.is(Hardfork::Shanghai) && p.data_len > MAX_INIT_CODE_SIZE {
            return Err(ForkError::InitCodeTooLarge { size: p.data_len });
        }
        let gas = tx.gas_limit;
        if self.is(Hardfork::Osaka) && gas > MAX_TX_GAS {
            return Err(ForkError::GasLimitTooHigh { gas });
        }
        let needed = intrinsic_gas(self, p);
        if gas < needed {
            return Err(ForkError::IntrinsicGas { gas, needed });
        }
        if let Some(needed) = floor_data_gas(self, p).filter(|floor| gas < *floor) {
            return Err(ForkError::FloorDataGas { gas, needed });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::address::Address;
    use crate::transaction::Payload;

    fn tx(tx_type: TxType, gas_limit: u64, payload: Payload) -> Transaction {
        Transaction {
            tx_type,
            chain_id: Some(1),
            nonce: 0,
            gas_limit,
            hash: [0; 32],
            sender: Address([0; 20]),
            to: None,
            payload,
        }
    }

    fn creation(len: u64) -> Payload {
        Payload {
            create: true,
            data_len: len,
            ..Payload::default()
        }
    }

    #[test]
    fn the_issue_s_four_cases_under_osaka_and_their_valid_versions() {
        let osaka = Hardfork::Osaka;
        let transfer = Payload::default();
        assert_eq!(
            osaka.check(&tx(TxType::DynamicFee, 20_999, transfer)),
            Err(ForkError::IntrinsicGas {
                gas: 20_999,
                needed: 21_000
            })
        );
        assert_eq!(
            osaka.check(&tx(TxType::DynamicFee, 21_000, transfer)),
            Ok(())
        );
        // 1,000 non-zero bytes: intrinsic 37,000, floor 61,000.
        let calldata = Payload {
            data_len: 1_000,
            ..Payload::default()
        };
        let below_floor = osaka.check(&tx(TxType::DynamicFee, 40_000, calldata));
        assert_eq!(
            below_floor,
            Err(ForkError::FloorDataGas {
                gas: 40_000,
                needed: 61_000
            })
        );
        assert_eq!(
            below_floor.unwrap_err().to_string(),
            "insufficient gas for floor data gas cost: gas 40000, minimum needed 61000"
        );
        assert_eq!(
            osaka.check(&tx(TxType::DynamicFee, 61_000, calldata)),
            Ok(())
        );
        assert_eq!(
            Hardfork::Cancun.check(&tx(TxType::DynamicFee, 40_000, calldata)),
            Ok(())
        );
        let big = osaka.check(&tx(TxType::DynamicFee, 10_000_000, creation(49_153)));
        assert_eq!(big, Err(ForkError::InitCodeTooLarge { size: 49_153 }));
        assert_eq!(
            big.unwrap_err().to_string(),
            "max initcode size exceeded: code size 49153, limit 49152"
        );
        assert_eq!(
            osaka.check(&tx(TxType::DynamicFee, 10_000_000, creation(49_152))),
            Ok(())
        );
        assert_eq!(
            Hardfork::Paris.check(&tx(TxType::DynamicFee, 10_000_000, creation(49_153))),
            Ok(())
        );
        let capped = osaka.check(&tx(TxType::DynamicFee, MAX_TX_GAS + 1, transfer));
        assert_eq!(
            capped.unwrap_err().to_string(),
            "transaction gas limit too high (cap: 16777216, tx: 16777217)"
        );
        assert_eq!(
            osaka.check(&tx(TxType::DynamicFee, MAX_TX_GAS, transfer)),
            Ok(())
        );
        assert_eq!(
            Hardfork::Prague.check(&tx(TxType::DynamicFee, MAX_TX_GAS + 1, transfer)),
            Ok(())
        );
    }

    #[test]
    fn types_by_fork_and_replay_protection() {
        let t = |ty, fork: Hardfork| fork.check(&tx(ty, 100_000, Payload::default()));
        assert_eq!(
            t(TxType::AccessList, Hardfork::Istanbul)
                .unwrap_err()
                .to_string(),
            "transaction type not supported: type 1 rejected, pool not yet in Berlin"
        );
        assert_eq!(t(TxType::AccessList, Hardfork::Berlin), Ok(()));
        assert!(t(TxType::DynamicFee, Hardfork::Berlin).is_err());
        assert!(t(TxType::SetCode, Hardfork::Cancun).is_err());
        assert_eq!(t(TxType::SetCode, Hardfork::Prague), Ok(()));
        let blob = Payload {
            blobs: 1,
            ..Payload::default()
        };
        assert!(Hardfork::Shanghai
            .check(&tx(TxType::Blob, 100_000, blob))
            .is_err());
        assert_eq!(
            t(TxType::Legacy, Hardfork::TangerineWhistle),
            Err(ForkError::ReplayProtectionNotActive)
        );
        assert_eq!(t(TxType::Legacy, Hardfork::SpuriousDragon), Ok(()));
        let unprotected = Transaction {
            chain_id: None,
            ..tx(TxType::Legacy, 100_000, Payload::default())
        };
        assert_eq!(Hardfork::Frontier.check(&unprotected), Ok(()));
    }

    #[test]
    fn blob_limits_by_fork() {
        let blobs = |n| Payload {
            blobs: n,
            ..Payload::default()
        };
        let check = |fork: Hardfork, n| fork.check(&tx(TxType::Blob, 100_000, blobs(n)));
        assert_eq!(check(Hardfork::Cancun, 6), Ok(()));
        assert_eq!(
            check(Hardfork::Cancun, 7).unwrap_err().to_string(),
            "too many blobs in transaction: have 7, permitted 6"
        );
        assert_eq!(check(Hardfork::Prague, 9), Ok(()));
        assert!(check(Hardfork::Prague, 10).is_err());
        assert!(check(Hardfork::Osaka, 7).is_err());
        assert_eq!(check(Hardfork::Osaka, 6), Ok(()));
    }
}
