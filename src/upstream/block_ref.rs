//! The block a read names ([`BlockRef`]): where a method's block parameter is ([`BLOCK_PARAM`])
//! and what it says, read one way for the upstream race ([`crate::upstream::heads::BlockNeed`]:
//! which upstream has the block) and the read cache ([`crate::cache::policy::About`]: how long
//! the answer holds). The anchor is eRPC's `architecture/evm/block_ref.go`; the block parameter
//! is the execution API's `BlockNumberOrTag` (a quantity, or `earliest`, `finalized`, `safe`,
//! `latest`, `pending`) or EIP-1898's `{blockNumber}` / `{blockHash}` object. Pure.

use crate::hex;
use serde_json::Value;

/// The position of the block parameter of each method that takes one.
pub const BLOCK_PARAM: &[(&str, usize)] = &[
    ("eth_call", 1),
    ("eth_createAccessList", 1),
    ("eth_estimateGas", 1),
    ("eth_feeHistory", 1),
    ("eth_getAccount", 1),
    ("eth_getBalance", 1),
    ("eth_getBlockByNumber", 0),
    ("eth_getBlockReceipts", 0),
    ("eth_getBlockTransactionCountByNumber", 0),
    ("eth_getCode", 1),
    ("eth_getHeaderByNumber", 0),
    ("eth_getProof", 2),
    ("eth_getStorageAt", 2),
    ("eth_getTransactionByBlockNumberAndIndex", 0),
    ("eth_getTransactionCount", 1),
    ("eth_getUncleByBlockNumberAndIndex", 0),
    ("eth_getUncleCountByBlockNumber", 0),
];

/// What a block parameter names ([`BlockRef::parse`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockRef {
    /// `latest`, or the parameter left out or `null` (the execution API's default).
    Latest,
    /// `pending`.
    Pending,
    /// `safe`.
    Safe,
    /// `finalized`.
    Finalized,
    /// `earliest` (block 0).
    Earliest,
    /// A block number (a hex quantity, or EIP-1898's `{blockNumber}`).
    Number(u64),
    /// A block hash: a 32-byte hex string (`eth_getBlockReceipts` takes one) or EIP-1898's
    /// `{blockHash}`; `require_canonical`: EIP-1898's `requireCanonical: true` (the node
    /// refuses the read once the block is no longer canonical).
    Hash {
        /// EIP-1898's `requireCanonical`.
        require_canonical: bool,
    },
    /// Anything else: not a block parameter the node would take.
    Invalid,
}

impl BlockRef {
    /// The block parameter of a read of `method` with `params` ([`BLOCK_PARAM`]); `None` when
    /// the method takes none.
    pub fn param_of(method: &str, params: &Value) -> Option<BlockRef> {
        BLOCK_PARAM
            .iter()
            .find(|(name, _)| *name == method)
            .map(|(_, at)| Self::parse(params.get(*at)))
    }

    /// What a block parameter names (left out: [`BlockRef::Latest`]).
    pub fn parse(block: Option<&Value>) -> BlockRef {
        match block {
            None | Some(Value::Null) => BlockRef::Latest,
            Some(Value::String(s)) => match s.as_str() {
                "latest" => BlockRef::Latest,
                "pending" => BlockRef::Pending,
                "safe" => BlockRef::Safe,
                "finalized" => BlockRef::Finalized,
                "earliest" => BlockRef::Earliest,
                hash if hash.len() == 66 => BlockRef::Hash {
                    require_canonical: false,
                },
                number => hex::decode_quantity(number).map_or(BlockRef::Invalid, BlockRef::Number),
            },
            Some(Value::Object(o)) => match (o.get("blockHash"), o.get("blockNumber")) {
                (Some(Value::String(_)), _) => BlockRef::Hash {
                    require_canonical: o.get("requireCanonical") == Some(&Value::Bool(true)),
                },
                (None, Some(number @ Value::String(_))) => Self::parse(Some(number)),
                _ => BlockRef::Invalid,
            },
            Some(_) => BlockRef::Invalid,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_each_form_of_a_block_parameter() {
        let parse = |v: Value| BlockRef::parse(Some(&v));
        assert_eq!(BlockRef::parse(None), BlockRef::Latest);
        assert_eq!(parse(Value::Null), BlockRef::Latest);
        assert_eq!(parse(json!("latest")), BlockRef::Latest);
        assert_eq!(parse(json!("pending")), BlockRef::Pending);
        assert_eq!(parse(json!("safe")), BlockRef::Safe);
        assert_eq!(parse(json!("finalized")), BlockRef::Finalized);
        assert_eq!(parse(json!("earliest")), BlockRef::Earliest);
        assert_eq!(parse(json!("0x1b4")), BlockRef::Number(436));
        let hash = |require_canonical| BlockRef::Hash { require_canonical };
        assert_eq!(parse(json!(format!("0x{}", "ab".repeat(32)))), hash(false));
        assert_eq!(parse(json!({"blockNumber": "0x10"})), BlockRef::Number(16));
        assert_eq!(
            parse(json!({"blockHash": format!("0x{}", "ab".repeat(32)), "requireCanonical": true})),
            hash(true)
        );
        assert_eq!(
            parse(
                json!({"blockHash": format!("0x{}", "ab".repeat(32)), "requireCanonical": false})
            ),
            hash(false)
        );
        for bad in [
            json!("0xzz"),
            json!("head"),
            json!(16),
            json!({"blockHash": 1}),
            json!({"blockHash": 1, "blockNumber": "0x10"}),
            json!({"blockNumber": 16}),
            json!({}),
            json!([]),
        ] {
            assert_eq!(parse(bad.clone()), BlockRef::Invalid, "{bad}");
        }
    }

    #[test]
    fn finds_the_parameter_by_method() {
        let params = json!([{"to": "0x00"}, "0x10"]);
        assert_eq!(
            BlockRef::param_of("eth_call", &params),
            Some(BlockRef::Number(16))
        );
        assert_eq!(
            BlockRef::param_of("eth_call", &json!([{}])),
            Some(BlockRef::Latest)
        );
        assert_eq!(
            BlockRef::param_of("eth_getBlockByNumber", &json!(["pending", false])),
            Some(BlockRef::Pending)
        );
        assert_eq!(
            BlockRef::param_of("eth_getStorageAt", &json!(["0x00", "0x0", "safe"])),
            Some(BlockRef::Safe)
        );
        assert_eq!(BlockRef::param_of("eth_chainId", &json!([])), None);
        assert_eq!(BlockRef::param_of("eth_getLogs", &json!([{}])), None);
    }
}
