//! Which upstreams a call goes to, and how: every call the relay makes has a [`CallKind`], and
//! one [`RoutingTable`] maps each kind to a [`Route`] (a set of upstreams and a [`Usage`]). With
//! one upstream in a set every call goes to it, whatever its usage. The race over several
//! upstreams that a usage describes is [`crate::upstream::race::Race`]; their health is
//! [`crate::upstream::rotation::Rotation`].
//!
//! A call's kind is decided by the relay from what it parsed (the method of a client's request,
//! or the question the relay asks itself), never from the text that goes out: a method name
//! written with JSON escapes (`"eth_sendRawTransactio\u006e"`) is the same method.
//!
//! Today's table ([`RoutingTable::new`]):
//!
//! | kind | upstreams | usage |
//! | --- | --- | --- |
//! | [`CallKind::Send`] | `UPSTREAM_SEND_URL`, else `UPSTREAM_RPC_URL` | [`Usage::Hedged`]; [`Usage::Failover`] under a strict pool and behind a private route; [`Usage::Broadcast`] with `SEND_BROADCAST=all` (not behind a private route) |
//! | [`CallKind::SendPublic`] | `UPSTREAM_RPC_URL` | as [`CallKind::Send`] |
//! | [`CallKind::Read`], [`CallKind::OwnChainId`], [`CallKind::OwnOther`], [`CallKind::Head`] | `UPSTREAM_RPC_URL` | [`Usage::Hedged`] |
//! | [`CallKind::ReadMerged`], [`CallKind::OwnCount`], [`CallKind::OwnByHash`], [`CallKind::OwnReceipt`] | `UPSTREAM_RPC_URL` | [`Usage::Merged`] |
//! | [`CallKind::Filter`] | `UPSTREAM_RPC_URL` | [`Usage::Sticky`] |
//! | [`CallKind::Other`] | `UPSTREAM_RPC_URL` | [`Usage::Once`] |

use crate::jsonrpc;
use crate::ordering::sender::PoolKind;

/// What one call to the upstreams is: whose it is (a client's or the relay's own) and what it
/// asks. Its [`Route`] comes from the [`RoutingTable`]; how its answer judges a node's health
/// from [`CallKind::is_own`] ([`crate::upstream::rotation::judge`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallKind {
    /// A transaction's signed bytes (any of the three send methods, a client's or the object's
    /// send or resend of one). The first acceptance wins; a refusal only once every upstream that
    /// may have the bytes answered. A JSON-RPC error is the node's answer to the transaction: it
    /// never counts against the node's health.
    Send,
    /// A transaction a private route did not have included within `SEND_PUBLIC_AFTER_BLOCKS`,
    /// sent to the public mempool as well: its signed bytes, to the read nodes, judged as a
    /// [`CallKind::Send`].
    SendPublic,
    /// A client's read that may be repeated ([`IDEMPOTENT`]).
    Read,
    /// A client's transaction count, transaction or receipt by hash
    /// ([`crate::upstream::merge::FAN_OUT_METHODS`]): the most any upstream knows.
    ReadMerged,
    /// A client's filter call ([`FILTER_METHODS`]): a filter lives on the node that made it.
    Filter,
    /// A client's call of any other method (one the relay does not know, or one that changes the
    /// node's state): sent once.
    Other,
    /// The heads and logs a WebSocket subscription missed, and the head: asked for a client's
    /// subscriptions, judged as a client's read.
    Head,
    /// The relay's own: a sender's counts and lookups, in one batch
    /// ([`crate::upstream::lookup`]), or a transaction count alone.
    OwnCount,
    /// The relay's own: a transaction by hash.
    OwnByHash,
    /// The relay's own: a receipt by hash.
    OwnReceipt,
    /// The relay's own: `eth_chainId`.
    OwnChainId,
    /// The relay's own: anything else it asks (the genesis block, a transaction by sender and
    /// nonce).
    OwnOther,
}

impl CallKind {
    /// The kind of a client's request for `method` (as parsed).
    pub fn of_method(method: &str) -> CallKind {
        if jsonrpc::is_send(method) {
            CallKind::Send
        } else if crate::upstream::merge::FAN_OUT_METHODS.contains(&method) {
            CallKind::ReadMerged
        } else if FILTER_METHODS.contains(&method) {
            CallKind::Filter
        } else if IDEMPOTENT.contains(&method) {
            CallKind::Read
        } else {
            CallKind::Other
        }
    }

    /// The kind of a question of the relay's own asking `method` alone (a lookup's member sent
    /// by itself to an upstream that refuses batches).
    pub fn of_own_method(method: &str) -> CallKind {
        match method {
            "eth_getTransactionCount" => CallKind::OwnCount,
            "eth_getTransactionByHash" => CallKind::OwnByHash,
            "eth_getTransactionReceipt" => CallKind::OwnReceipt,
            "eth_chainId" => CallKind::OwnChainId,
            _ => CallKind::OwnOther,
        }
    }

    /// Whether the call is a question of the relay's own: small, idempotent, its text the
    /// relay's, so any failure to answer it, or an answer that says the node is busy, rate
    /// limited or syncing, is the node's and counts against its health.
    pub fn is_own(self) -> bool {
        matches!(
            self,
            CallKind::OwnCount
                | CallKind::OwnByHash
                | CallKind::OwnReceipt
                | CallKind::OwnChainId
                | CallKind::OwnOther
        )
    }

    /// Whether the call carries a transaction's signed bytes.
    pub fn is_send(self) -> bool {
        matches!(self, CallKind::Send | CallKind::SendPublic)
    }

    /// Every kind, for tables and tests.
    pub const ALL: [CallKind; 12] = [
        CallKind::Send,
        CallKind::SendPublic,
        CallKind::Read,
        CallKind::ReadMerged,
        CallKind::Filter,
        CallKind::Other,
        CallKind::Head,
        CallKind::OwnCount,
        CallKind::OwnByHash,
        CallKind::OwnReceipt,
        CallKind::OwnChainId,
        CallKind::OwnOther,
    ];
}

/// A set of upstreams a route uses, in preference order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamSet {
    /// `UPSTREAM_RPC_URL` (one URL or a comma-separated list, the first preferred).
    Rpc,
    /// `UPSTREAM_SEND_URL`: a private transaction route (one URL or a list, the first
    /// preferred); `UPSTREAM_RPC_URL` while it is unset.
    Send,
}

/// How a call uses the upstreams of its set (two or more; with one, every usage is that one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    /// To the best upstream; if it has not answered within its hedge delay also to the next (at
    /// most [`crate::upstream::race::MAX_TRIED_AT_ONCE`] in all), and a failure moves it to the
    /// next at once. The first usable answer wins.
    Hedged,
    /// As [`Usage::Hedged`] but never hedged: it moves to the next upstream only when one fails
    /// (a strict pool, where a second copy of a transaction is a charged refusal).
    Failover,
    /// To every healthy upstream at once ([`crate::upstream::rotation::Rotation::broadcast`]).
    Broadcast,
    /// To every healthy upstream at once; the usable answers that came by the first one's arrival
    /// and its hedge delay are merged ([`crate::upstream::merge`]).
    Merged,
    /// To the preferred upstream (the first of the set that is healthy), once, never hedged,
    /// never moved once sent: state that lives on one node.
    Sticky,
    /// To the best upstream, once, never hedged, never sent again.
    Once,
}

impl Usage {
    /// Whether a call may go to another upstream while the first has not answered (a hedge).
    pub fn hedged(self) -> bool {
        self == Usage::Hedged
    }

    /// Whether a call goes to the next upstream after the first failed (it may have reached the
    /// first: only a call that may be repeated is moved).
    pub fn moved_on_failure(self) -> bool {
        matches!(self, Usage::Hedged | Usage::Failover | Usage::Broadcast)
    }
}

/// Where one kind of call goes and how: a row of the [`RoutingTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// The upstreams it may go to.
    pub upstreams: UpstreamSet,
    /// How it uses them.
    pub usage: Usage,
}

/// Every kind of call and its [`Route`]: the relay's routing, as data. A new route is rows here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutingTable {
    rows: Vec<(CallKind, Route)>,
}

impl RoutingTable {
    /// Today's table (see the module documentation): a send is hedged on a mempool, failed over
    /// on a strict pool (`pool`, resolved by [`crate::config::Config::pool_kind_for`]) and
    /// broadcast with `SEND_BROADCAST=all` (`broadcast`); it goes to [`UpstreamSet::Send`], which
    /// is `UPSTREAM_SEND_URL` when set. Nothing else goes there: the public mempool's copy of a
    /// transaction ([`CallKind::SendPublic`]) goes to the read nodes the same way.
    pub fn new(pool: PoolKind, broadcast: bool) -> Self {
        let send = match (broadcast, pool) {
            (true, _) => Usage::Broadcast,
            (false, PoolKind::Strict) => Usage::Failover,
            (false, PoolKind::Mempool) => Usage::Hedged,
        };
        let rows = CallKind::ALL
            .into_iter()
            .map(|kind| {
                let usage = match kind {
                    CallKind::Send | CallKind::SendPublic => send,
                    CallKind::Read | CallKind::Head | CallKind::OwnChainId | CallKind::OwnOther => {
                        Usage::Hedged
                    }
                    CallKind::ReadMerged
                    | CallKind::OwnCount
                    | CallKind::OwnByHash
                    | CallKind::OwnReceipt => Usage::Merged,
                    CallKind::Filter => Usage::Sticky,
                    CallKind::Other => Usage::Once,
                };
                let upstreams = match kind {
                    CallKind::Send => UpstreamSet::Send,
                    _ => UpstreamSet::Rpc,
                };
                let route = Route { upstreams, usage };
                (kind, route)
            })
            .collect();
        RoutingTable { rows }
    }

    /// The table behind a private route (`UPSTREAM_SEND_URL`): its sends go to one route at a
    /// time, the next only when one fails ([`Usage::Failover`]), never hedged or broadcast: two
    /// copies would put one transaction in two auctions, and nonce n at one route and n + 1 at
    /// another, which cannot simulate it. The public copy ([`CallKind::SendPublic`]) keeps its
    /// usage.
    pub fn behind_a_private_route(mut self) -> Self {
        for (kind, route) in &mut self.rows {
            if *kind == CallKind::Send {
                route.usage = Usage::Failover;
            }
        }
        self
    }

    /// The route of `kind`.
    pub fn route(&self, kind: CallKind) -> Route {
        self.rows
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, r)| *r)
            .expect("every kind has a row")
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_come_from_the_parsed_method() {
        for send in [
            "eth_sendRawTransaction",
            "eth_sendRawTransactionSync",
            "eth_sendRawTransactionConditional",
        ] {
            assert_eq!(CallKind::of_method(send), CallKind::Send);
        }
        assert_eq!(
            CallKind::of_method("eth_getTransactionReceipt"),
            CallKind::ReadMerged
        );
        assert_eq!(
            CallKind::of_method("eth_getFilterChanges"),
            CallKind::Filter
        );
        assert_eq!(CallKind::of_method("eth_call"), CallKind::Read);
        for once in [
            "debug_setHead",
            "eth_submitWork",
            "anvil_mine",
            "eth_subscribe",
        ] {
            assert_eq!(CallKind::of_method(once), CallKind::Other, "{once}");
        }
        let mut sorted = IDEMPOTENT.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, IDEMPOTENT, "kept sorted, each once");
        sorted.dedup();
        assert_eq!(sorted.len(), IDEMPOTENT.len());
    }

    #[test]
    fn the_table_holds_todays_routing() {
        let mempool = RoutingTable::new(PoolKind::Mempool, false);
        let usage = |table: &RoutingTable, kind| table.route(kind).usage;
        assert_eq!(usage(&mempool, CallKind::Send), Usage::Hedged);
        assert_eq!(
            usage(&RoutingTable::new(PoolKind::Strict, false), CallKind::Send),
            Usage::Failover,
            "a strict pool is never hedged"
        );
        assert_eq!(
            usage(&RoutingTable::new(PoolKind::Strict, true), CallKind::Send),
            Usage::Broadcast
        );
        for table in [
            mempool.clone(),
            RoutingTable::new(PoolKind::Strict, false),
            RoutingTable::new(PoolKind::Mempool, true),
        ] {
            assert_eq!(
                table.route(CallKind::SendPublic).usage,
                table.route(CallKind::Send).usage,
                "the public copy goes as a send"
            );
        }
        for kind in [CallKind::Read, CallKind::Head, CallKind::OwnChainId] {
            assert_eq!(usage(&mempool, kind), Usage::Hedged, "{kind:?}");
        }
        // Behind a private route: one route at a time, whatever the pool and SEND_BROADCAST.
        for broadcast in [false, true] {
            let private = RoutingTable::new(PoolKind::Mempool, broadcast).behind_a_private_route();
            assert_eq!(usage(&private, CallKind::Send), Usage::Failover);
            assert_eq!(
                usage(&private, CallKind::SendPublic),
                usage(
                    &RoutingTable::new(PoolKind::Mempool, broadcast),
                    CallKind::SendPublic
                )
            );
        }
        for kind in [
            CallKind::ReadMerged,
            CallKind::OwnCount,
            CallKind::OwnByHash,
            CallKind::OwnReceipt,
        ] {
            assert_eq!(usage(&mempool, kind), Usage::Merged, "{kind:?}");
        }
        assert_eq!(usage(&mempool, CallKind::Filter), Usage::Sticky);
        assert_eq!(usage(&mempool, CallKind::Other), Usage::Once);
        for kind in CallKind::ALL {
            let want = match kind {
                CallKind::Send => UpstreamSet::Send,
                _ => UpstreamSet::Rpc,
            };
            assert_eq!(mempool.route(kind).upstreams, want, "{kind:?}");
        }
        assert!(Usage::Hedged.hedged() && !Usage::Failover.hedged());
        assert!(Usage::Failover.moved_on_failure());
        assert!(!Usage::Sticky.moved_on_failure() && !Usage::Once.moved_on_failure());
        assert!(CallKind::OwnOther.is_own() && !CallKind::Head.is_own());
    }
}
