//! What one request to the upstream is, for the upstreams it may go to and for what its answer
//! says of an upstream's health ([`crate::upstream::rotation`]). With one upstream every request goes
//! to it, whatever its route.
//!
//! A route is decided by the relay from what it parsed (the method of a client's request, or the
//! kind of question the relay asks itself), never from the text that goes out: a method name
//! written with JSON escapes (`"eth_sendRawTransactio\u006e"`) is the same method.

use crate::jsonrpc;

/// How a request is routed over several upstreams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// A transaction's signed bytes (any of the three send methods): to the best upstream,
    /// hedged (never under a strict upstream pool, where a second copy is a charged refusal) or
    /// to every healthy one (`SEND_BROADCAST=all`). The first acceptance wins; a refusal only
    /// once every upstream that may have the bytes answered. A JSON-RPC error is the node's answer
    /// to the client's transaction: it never counts against the node's health.
    Send,
    /// A client's request, by its method.
    Read(Read),
    /// A question of the relay's own, idempotent (a sender's counts and transactions by hash,
    /// a receipt, the chain id): hedged and failed over, and fanned out and merged when it asks
    /// a count, a transaction or a receipt ([`crate::upstream::merge`]). Its text is the relay's,
    /// so an error answer that says the node is busy, rate limited or syncing is the node's
    /// overload and counts against its health.
    Own,
}

/// How a client's request (not a send) is routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// A read that may be repeated ([`IDEMPOTENT`]): to the best upstream, hedged after its
    /// hedge delay and moved to the next on a failure.
    Idempotent,
    /// A transaction count, a transaction or a receipt ([`crate::upstream::merge::FAN_OUT_METHODS`]):
    /// every healthy upstream at once, the answers merged (the highest count, any that has the
    /// transaction).
    Merged,
    /// A filter method ([`FILTER_METHODS`]): a filter lives on the node that made it, so every
    /// filter call goes to the preferred upstream (the first of `UPSTREAM_RPC_URL` in the
    /// rotation), never hedged and never moved once sent.
    Filter,
    /// Anything else (a method the relay does not know, or one that changes the node's state):
    /// to the best upstream once, never hedged, never sent again.
    Once,
}

/// The filter methods (execution-apis `eth/filter.yaml`): a filter's id names state on one node.
pub const FILTER_METHODS: [&str; 6] = [
    "eth_newFilter",
    "eth_newBlockFilter",
    "eth_newPendingTransactionFilter",
    "eth_getFilterChanges",
    "eth_getFilterLogs",
    "eth_uninstallFilter",
];

/// The reads that may be repeated on another node (execution-apis, plus `net_`/`web3_` and the
/// widely served `eth_getBlockReceipts`, `eth_simulateV1`, `eth_getProof`): they change nothing on
/// the node, so hedging one costs a second answer and nothing else.
pub const IDEMPOTENT: &[&str] = &[
    "eth_accounts",
    "eth_blobBaseFee",
    "eth_blockNumber",
    "eth_call",
    "eth_chainId",
    "eth_coinbase",
    "eth_config",
    "eth_createAccessList",
    "eth_estimateGas",
    "eth_feeHistory",
    "eth_gasPrice",
    "eth_getAccount",
    "eth_getBalance",
    "eth_getBlockByHash",
    "eth_getBlockByNumber",
    "eth_getBlockReceipts",
    "eth_getBlockTransactionCountByHash",
    "eth_getBlockTransactionCountByNumber",
    "eth_getCode",
    "eth_getHeaderByHash",
    "eth_getHeaderByNumber",
    "eth_getLogs",
    "eth_getProof",
    "eth_getStorageAt",
    "eth_getTransactionByBlockHashAndIndex",
    "eth_getTransactionByBlockNumberAndIndex",
    "eth_getUncleByBlockHashAndIndex",
    "eth_getUncleByBlockNumberAndIndex",
    "eth_getUncleCountByBlockHash",
    "eth_getUncleCountByBlockNumber",
    "eth_maxPriorityFeePerGas",
    "eth_protocolVersion",
    "eth_simulateV1",
    "eth_syncing",
    "net_listening",
    "net_peerCount",
    "net_version",
    "web3_clientVersion",
    "web3_sha3",
];

impl Route {
    /// The route of a client's request for `method` (as parsed).
    pub fn of_method(method: &str) -> Route {
        if jsonrpc::is_send(method) {
            Route::Send
        } else if crate::upstream::merge::FAN_OUT_METHODS.contains(&method) {
            Route::Read(Read::Merged)
        } else if FILTER_METHODS.contains(&method) {
            Route::Read(Read::Filter)
        } else if IDEMPOTENT.contains(&method) {
            Route::Read(Read::Idempotent)
        } else {
            Route::Read(Read::Once)
        }
    }

    /// Whether a request on this route may go to another upstream while the first has not
    /// answered (a hedge).
    pub fn hedged(self) -> bool {
        matches!(
            self,
            Route::Send | Route::Own | Route::Read(Read::Idempotent)
        )
    }

    /// Whether a request on this route goes to the next upstream after the first failed (it may
    /// have reached the first: only a request that may be repeated is moved).
    pub fn moved_on_failure(self) -> bool {
        self.hedged()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_come_from_the_parsed_method() {
        for send in [
            "eth_sendRawTransaction",
            "eth_sendRawTransactionSync",
            "eth_sendRawTransactionConditional",
        ] {
            assert_eq!(Route::of_method(send), Route::Send);
        }
        assert_eq!(
            Route::of_method("eth_getTransactionReceipt"),
            Route::Read(Read::Merged)
        );
        assert_eq!(
            Route::of_method("eth_getFilterChanges"),
            Route::Read(Read::Filter)
        );
        assert_eq!(Route::of_method("eth_call"), Route::Read(Read::Idempotent));
        for once in [
            "debug_setHead",
            "eth_submitWork",
            "anvil_mine",
            "eth_subscribe",
        ] {
            assert_eq!(Route::of_method(once), Route::Read(Read::Once), "{once}");
        }
        assert!(Route::Send.hedged() && Route::Own.hedged());
        assert!(!Route::Read(Read::Filter).hedged() && !Route::Read(Read::Once).hedged());
        assert!(!Route::Read(Read::Once).moved_on_failure());
        let mut sorted = IDEMPOTENT.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, IDEMPOTENT, "kept sorted, each once");
        sorted.dedup();
        assert_eq!(sorted.len(), IDEMPOTENT.len());
    }
}
