//! Intrinsic gas: what a transaction costs before its first instruction, from its
//! [`Payload`], per fork (geth `core.IntrinsicGas` and `core.FloorDataGas`; the execution specs'
//! `calculate_intrinsic_cost`). All in gas units; sums saturate at `u64::MAX` (such a transaction
//! can never be covered: its gas limit is a `u64`).

use super::Hardfork;
use crate::transaction::Payload;

/// Every transaction's base cost (the yellow paper's G_transaction).
pub const TX_GAS: u64 = 21_000;
/// A contract creation's base cost from Homestead (EIP-2: G_transaction + G_txcreate).
pub const TX_CREATE_GAS: u64 = 53_000;
/// Per zero byte of calldata.
pub const TX_DATA_ZERO_GAS: u64 = 4;
/// Per non-zero byte of calldata before Istanbul.
pub const TX_DATA_NON_ZERO_GAS_FRONTIER: u64 = 68;
/// Per non-zero byte of calldata from Istanbul (EIP-2028).
pub const TX_DATA_NON_ZERO_GAS_EIP2028: u64 = 16;
/// Per access list address (EIP-2930).
pub const ACCESS_LIST_ADDRESS_GAS: u64 = 2_400;
/// Per access list storage key (EIP-2930).
pub const ACCESS_LIST_STORAGE_KEY_GAS: u64 = 1_900;
/// Per 32-byte word of init code from Shanghai (EIP-3860).
pub const INIT_CODE_WORD_GAS: u64 = 2;
/// Per authorization (EIP-7702 `PER_EMPTY_ACCOUNT_COST`).
pub const PER_EMPTY_ACCOUNT_COST: u64 = 25_000;
/// Per calldata token in the floor (EIP-7623 `TOTAL_COST_FLOOR_PER_TOKEN`).
pub const TOTAL_COST_FLOOR_PER_TOKEN: u64 = 10;
/// Calldata tokens per non-zero byte (EIP-7623 `STANDARD_TOKEN_COST` ratio: 16 / 4).
pub const TOKENS_PER_NON_ZERO_BYTE: u64 = 4;

/// The intrinsic gas of a transaction with `payload` under `fork`: base (21,000; 53,000 for a
/// creation from Homestead), calldata (4 per zero byte; 68, from Istanbul 16, per non-zero byte),
/// access list (2,400 per address, 1,900 per storage key), init code (2 per 32-byte word of a
/// creation, from Shanghai) and authorizations (25,000 each).
pub fn intrinsic_gas(fork: Hardfork, payload: &Payload) -> u64 {
    let base = if payload.create && fork.is(Hardfork::Homestead) {
        TX_CREATE_GAS
    } else {
        TX_GAS
    };
    let non_zero_gas = if fork.is(Hardfork::Istanbul) {
        TX_DATA_NON_ZERO_GAS_EIP2028
    } else {
        TX_DATA_NON_ZERO_GAS_FRONTIER
    };
    let non_zero = payload.data_len.saturating_sub(payload.data_zero_bytes);
    let init_code_words = if payload.create && fork.is(Hardfork::Shanghai) {
        payload.data_len.div_ceil(32)
    } else {
        0
    };
    let parts = [
        u128::from(base),
        u128::from(payload.data_zero_bytes) * u128::from(TX_DATA_ZERO_GAS),
        u128::from(non_zero) * u128::from(non_zero_gas),
        u128::from(payload.access_list_addresses) * u128::from(ACCESS_LIST_ADDRESS_GAS),
        u128::from(payload.access_list_storage_keys) * u128::from(ACCESS_LIST_STORAGE_KEY_GAS),
        u128::from(init_code_words) * u128::from(INIT_CODE_WORD_GAS),
        u128::from(payload.authorizations) * u128::from(PER_EMPTY_ACCOUNT_COST),
    ];
    u64::try_from(parts.iter().sum::<u128>()).unwrap_or(u64::MAX)
}

/// The EIP-7623 floor from Prague: 21,000 + 10 per calldata token (a zero byte is 1 token, a
/// non-zero byte 4); the gas limit must cover it as well as the intrinsic gas. `None` before
/// Prague.
pub fn floor_data_gas(fork: Hardfork, payload: &Payload) -> Option<u64> {
    if !fork.is(Hardfork::Prague) {
        return None;
    }
    let non_zero = payload.data_len.saturating_sub(payload.data_zero_bytes);
    let tokens = u128::from(payload.data_zero_bytes)
        + u128::from(non_zero) * u128::from(TOKENS_PER_NON_ZERO_BYTE);
    let floor = u128::from(TX_GAS) + tokens * u128::from(TOTAL_COST_FLOOR_PER_TOKEN);
    Some(u64::try_from(floor).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(len: u64, zero: u64) -> Payload {
        Payload {
            data_len: len,
            data_zero_bytes: zero,
            ..Payload::default()
        }
    }

    #[test]
    fn base_calldata_and_creation_by_fork() {
        let transfer = Payload::default();
        assert_eq!(intrinsic_gas(Hardfork::Frontier, &transfer), 21_000);
        assert_eq!(intrinsic_gas(Hardfork::Osaka, &transfer), 21_000);
        // 3 non-zero and 2 zero bytes.
        assert_eq!(
            intrinsic_gas(Hardfork::Petersburg, &data(5, 2)),
            21_000 + 3 * 68 + 8
        );
        assert_eq!(
            intrinsic_gas(Hardfork::Istanbul, &data(5, 2)),
            21_000 + 3 * 16 + 8
        );
        let create = Payload {
            create: true,
            ..data(33, 0)
        };
        assert_eq!(intrinsic_gas(Hardfork::Frontier, &create), 21_000 + 33 * 68);
        assert_eq!(
            intrinsic_gas(Hardfork::Homestead, &create),
            53_000 + 33 * 68
        );
        assert_eq!(intrinsic_gas(Hardfork::Paris, &create), 53_000 + 33 * 16);
        // Two 32-byte words of init code from Shanghai.
        assert_eq!(
            intrinsic_gas(Hardfork::Shanghai, &create),
            53_000 + 33 * 16 + 4
        );
    }

    #[test]
    fn access_lists_and_authorizations() {
        let p = Payload {
            access_list_addresses: 2,
            access_list_storage_keys: 3,
            authorizations: 2,
            ..Payload::default()
        };
        assert_eq!(
            intrinsic_gas(Hardfork::Prague, &p),
            21_000 + 2 * 2_400 + 3 * 1_900 + 2 * 25_000
        );
    }

    #[test]
    fn floor_from_prague_only_and_saturating() {
        assert_eq!(floor_data_gas(Hardfork::Cancun, &data(100, 0)), None);
        // 100 non-zero bytes: 400 tokens, floor 25,000 against 22,600 intrinsic.
        assert_eq!(
            floor_data_gas(Hardfork::Prague, &data(100, 0)),
            Some(25_000)
        );
        assert_eq!(intrinsic_gas(Hardfork::Prague, &data(100, 0)), 22_600);
        assert_eq!(floor_data_gas(Hardfork::Osaka, &data(10, 10)), Some(21_100));
        let huge = Payload {
            authorizations: u64::MAX,
            ..Payload::default()
        };
        assert_eq!(intrinsic_gas(Hardfork::Osaka, &huge), u64::MAX);
        assert_eq!(
            floor_data_gas(Hardfork::Osaka, &data(u64::MAX, 0)),
            Some(u64::MAX)
        );
    }
}
