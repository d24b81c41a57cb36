//! What an upstream answer to `eth_sendRawTransaction` means for the transaction and for its
//! sender's next nonce: one [`AnswerClass`] per answer (`upstream::classify`), from its HTTP status and
//! its JSON-RPC `result` or `error`.
//!
//! JSON-RPC error codes are not portable between nodes (-32010 is Nethermind's "rejected" and
//! Hedera's "request timeout"; -32005 is EIP-1474's "limit exceeded" and Besu's block gas limit),
//! so errors are told apart by their message (and `data`), lowercased with spaces, `_` and `-`
//! removed (so `AlreadyKnown`, `ALREADY_EXISTS` and `already known` meet), against [`PATTERNS`] in
//! order; the first match wins. The order matters where one message contains another's pattern:
//! each such guard comes first and says why.

/// The class of an upstream answer to one transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AnswerClass {
    /// A `result`: the node took the transaction.
    Accepted,
    /// The node already has this very transaction (pool or chain): it went in.
    AlreadyKnown,
    /// The nonce is below the sender's next one. The transaction itself may be the one that used
    /// it (a resend after a lost answer): the caller asks `eth_getTransactionByHash`.
    NonceTooLow,
    /// The nonce is above the sender's next one (a gap the node refuses).
    NonceTooHigh,
    /// A wrong nonce, direction unknown (Hedera's `WRONG_NONCE`): checked by hash like a low one.
    WrongNonce,
    /// Another transaction holds this nonce in the pool and this one does not pay enough to
    /// replace it.
    ReplacementUnderpriced,
    /// Refused for a reason of its own (funds, fees, gas, type, size, signature): the sender's
    /// next nonce is unchanged.
    Rejected,
    /// The node is busy, rate limited, syncing or its pool is full: worth another try.
    Busy,
    /// No usable answer: connection refused, reset or lost, timeout, HTTP 429/502/503/504, a body
    /// that is not JSON. Worth another try with the same bytes.
    Unavailable,
    /// A JSON-RPC error none of the patterns knows: the outcome for the nonce is unknown.
    Unrecognized,
}

/// What a transaction's final answer does to its sender's next nonce in the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NonceEffect {
    /// It went in: the next nonce becomes max(next, nonce + 1).
    Advance,
    /// It did not go in and nothing else changed: the next nonce stays, so the waiters above it
    /// keep their gap wait and the client can send a corrected transaction with this nonce.
    Keep,
    /// The relay's idea of the next nonce is wrong or the outcome is unknown: ask the upstream
    /// before the lock is granted again.
    Relearn,
}

impl AnswerClass {
    /// Whether the same bytes are sent again (with backoff, within the retry budget).
    pub fn retryable(self) -> bool {
        matches!(self, AnswerClass::Unavailable | AnswerClass::Busy)
    }

    /// Whether the node may already hold this transaction although it refused it: the caller
    /// looks it up by hash before it believes the refusal.
    pub fn check_by_hash(self) -> bool {
        matches!(self, AnswerClass::NonceTooLow | AnswerClass::WrongNonce)
    }

    /// Whether the transaction went in.
    pub fn went_in(self) -> bool {
        matches!(self, AnswerClass::Accepted | AnswerClass::AlreadyKnown)
    }

    /// The effect of this final answer on the sender's next nonce.
    pub fn effect(self) -> NonceEffect {
        match self {
            AnswerClass::Accepted | AnswerClass::AlreadyKnown => NonceEffect::Advance,
            AnswerClass::Rejected | AnswerClass::Busy => NonceEffect::Keep,
            AnswerClass::NonceTooLow
            | AnswerClass::NonceTooHigh
            | AnswerClass::WrongNonce
            | AnswerClass::ReplacementUnderpriced
            | AnswerClass::Unavailable
            | AnswerClass::Unrecognized => NonceEffect::Relearn,
        }
    }

    /// A short name for logs and metrics (`accepted`, `already_known`, `nonce_too_low`, ...).
    pub fn label(self) -> &'static str {
        match self {
            AnswerClass::Accepted => "accepted",
            AnswerClass::AlreadyKnown => "already_known",
            AnswerClass::NonceTooLow => "nonce_too_low",
            AnswerClass::NonceTooHigh => "nonce_too_high",
            AnswerClass::WrongNonce => "wrong_nonce",
            AnswerClass::ReplacementUnderpriced => "replacement_underpriced",
            AnswerClass::Rejected => "rejected",
            AnswerClass::Busy => "busy",
            AnswerClass::Unavailable => "unavailable",
            AnswerClass::Unrecognized => "unrecognized",
        }
    }
}

use AnswerClass::*;

/// Error message patterns, squashed (lowercase, no spaces, `_` or `-`), in match order, each with
/// the class it means and where the message comes from. Sources are the nodes' code: geth
/// `core/txpool/errors.go`, `core/error.go`, `core/txpool/validation.go`,
/// `core/txpool/legacypool/legacypool.go`; reth `crates/rpc/rpc-eth-types/src/error/mod.rs`;
/// Nethermind `Nethermind.TxPool/AcceptTxResult.cs` (older releases answer the result's name,
/// newer ones `TxPoolErrorMessages.cs`); Erigon `txnprovider/txpool/txpoolcfg/txpoolcfg.go`
/// (`<ImportResult>: <reason>`); Besu `RpcErrorType.java`; anvil `crates/anvil/src/eth/error/mod.rs`
/// and `eth/pool`; Hedera's hiero-json-rpc-relay `lib/errors/JsonRpcError.ts` and the consensus
/// node's `response_code.proto` statuses.
#[rustfmt::skip]
pub const PATTERNS: &[(&str, AnswerClass, &str)] = &[
    // Guards: these messages contain a later, different class's pattern.
    ("exceedsmaxnonce", Rejected, "Nethermind `NonceTooHigh: Nonce exceeds max nonce` (EIP-2681, not a gap)"),
    ("noncehasmaxvalue", Rejected, "geth/reth `nonce has max value` (EIP-2681)"),
    ("unknowntransactiontype", Rejected, "anvil `Unknown transaction type not supported` (contains `known transaction`)"),
    ("intrinsicgastoohigh", Rejected, "anvil/reth `intrinsic gas too high` (a gas limit above the block's)"),
    ("transactiontypeconflict", Busy, "Nethermind `pending transaction type conflict`"),
    ("pendingtxsof", Busy, "Nethermind `PendingTxsOfConflictingType`"),
    ("feetoolowtocompete", Busy, "Nethermind `FeeTooLowToCompete` (pool full; contains `feetoolow`)"),
    // Replacement before the fee patterns: Erigon says `FEE_TOO_LOW: replacement transaction underpriced`.
    ("replacementtransactionunderpriced", ReplacementUnderpriced, "geth/reth/anvil/Nethermind/Besu `replacement transaction underpriced`"),
    ("replacementnotallowed", ReplacementUnderpriced, "Nethermind `ReplacementNotAllowed`"),
    ("couldnotreplaceexistingtx", ReplacementUnderpriced, "Erigon `could not replace existing tx`"),
    ("insufficientgaspricetoreplace", ReplacementUnderpriced, "reth/anvil `insufficient gas price to replace`"),
    // Already known.
    ("alreadyknown", AlreadyKnown, "geth/reth/Nethermind `already known`, Nethermind `AlreadyKnown`, Erigon `ALREADY_EXISTS: already known`"),
    ("alreadyexists", AlreadyKnown, "Erigon `ALREADY_EXISTS`"),
    ("alreadyimported", AlreadyKnown, "anvil `transaction already imported`"),
    ("knowntransaction", AlreadyKnown, "Besu `Known transaction`, geth <= 1.9 `known transaction: <hash>`"),
    ("existingtxwithsamehash", AlreadyKnown, "Erigon `existing tx with same hash`"),
    ("existingtxnwithsamehash", AlreadyKnown, "Erigon `existing txn with same hash`"),
    ("duplicatetransaction", AlreadyKnown, "Hedera consensus `DUPLICATE_TRANSACTION`"),
    ("ownnoncealreadyused", AlreadyKnown, "Nethermind `OwnNonceAlreadyUsed`"),
    // Nonces.
    ("noncetoolow", NonceTooLow, "geth/reth `nonce too low: next nonce N, tx nonce M`, anvil/Erigon/Nethermind `nonce too low`, Besu `Nonce too low`, Hedera `Nonce too low. Provided nonce: M, current nonce: N`"),
    ("oldnonce", NonceTooLow, "Nethermind `OldNonce`"),
    ("noncetoohigh", NonceTooHigh, "geth/reth blob pool, Besu, anvil, Nethermind `nonce too high`, Hedera `Nonce too high. Provided nonce: ...`"),
    ("noncegap", NonceTooHigh, "Nethermind `NonceGap`"),
    ("noncetoofarinfuture", NonceTooHigh, "Nethermind `nonce too far in future`"),
    ("toodistantfromcurrentsendernonce", NonceTooHigh, "Besu `Transaction nonce is too distant from current sender nonce`"),
    ("gappednonce", NonceTooHigh, "geth/reth `gapped-nonce tx from delegated accounts`"),
    ("wrongnonce", WrongNonce, "Hedera consensus `WRONG_NONCE`"),
    // Busy: worth another try.
    ("txpoolisfull", Busy, "geth/reth `txpool is full`"),
    ("subpoolisfull", Busy, "Erigon `pending sub-pool is full` (and baseFee, queued)"),
    ("limitintxpoolisfull", Busy, "Erigon `blobs limit in txpool is full`"),
    ("spammer", Busy, "Erigon `spammer`"),
    ("accountlimitexceeded", Busy, "geth `account limit exceeded`"),
    ("futuretransactiontriestoreplace", Busy, "geth `future transaction tries to replace pending`"),
    ("alreadyreserved", Busy, "geth/reth `address already reserved`, `authority already reserved`"),
    ("inflighttransactionlimit", Busy, "geth/reth `in-flight transaction limit reached for delegated accounts`"),
    ("authorityhaspendingtransaction", Busy, "Nethermind `delegation authority has pending transaction`"),
    ("notyetinsync", Busy, "Besu `Transaction pool not enabled. (... node not yet in sync)`"),
    ("transactionpoolnotenabled", Busy, "Besu `Transaction pool not enabled`"),
    ("initialsyncisstillinprogress", Busy, "Besu `Initial sync is still in progress`"),
    ("syncing", Busy, "Nethermind `node is syncing`"),
    ("ratelimit", Busy, "Hedera `IP Rate limit exceeded`, `HBAR Rate limit exceeded`; providers' rate limits"),
    ("requestlimitreached", Busy, "QuickNode -32007 `25/second request limit reached - reduce calls per second ...`"),
    ("rpslimit", Busy, "Chainstack `You've exceeded the RPS limit available on the current plan.`"),
    ("computeunits", Busy, "Alchemy 429 `Your app has exceeded its compute units per second capacity ...`"),
    ("toomanyrequests", Busy, "HTTP 429's text `Too Many Requests` as a JSON-RPC error"),
    ("requesttimeout", Busy, "Hedera `Request timeout. Please try again.`"),
    ("tryagain", Busy, "providers' `try again later`"),
    ("busy", Busy, "Hedera consensus `BUSY`"),
    ("throttle", Busy, "Hedera consensus `THROTTLED_AT_CONSENSUS`"),
    ("platformnotactive", Busy, "Hedera consensus `PLATFORM_NOT_ACTIVE`"),
    ("platformtransactionnotcreated", Busy, "Hedera consensus `PLATFORM_TRANSACTION_NOT_CREATED`"),
    ("mirrornodeupstreamfailure", Busy, "Hedera `Mirror node upstream failure`"),
    // Rejected: this transaction alone.
    ("insufficientfunds", Rejected, "geth/reth/Nethermind/Erigon/anvil/Hedera `insufficient funds for gas * price + value`"),
    ("upfrontcostexceedsaccountbalance", Rejected, "Besu `Upfront cost exceeds account balance`"),
    ("balanceiszero", Rejected, "Nethermind `Balance is zero, cannot pay gas`"),
    ("insufficientaccountbalance", Rejected, "Hedera consensus `INSUFFICIENT_ACCOUNT_BALANCE`"),
    ("underpriced", Rejected, "geth/reth/Nethermind `transaction underpriced`, Erigon `FEE_TOO_LOW: underpriced`"),
    ("feetoolow", Rejected, "Nethermind `FeeTooLow`, Erigon `FEE_TOO_LOW: fee too low`"),
    ("lessthanblockbasefee", Rejected, "reth/anvil `max fee per gas less than block base fee`"),
    ("belowcurrentbasefee", Rejected, "Besu `Gas price below current base fee`"),
    ("belowminimum", Rejected, "geth `transaction gas price below minimum`, reth `priority fee below minimum`"),
    ("belowconfiguredminimum", Rejected, "Besu, Hedera `Gas price ... below configured minimum gas price`"),
    ("maxfeepergastoolow", Rejected, "Nethermind `MaxFeePerGas too low`"),
    ("insufficienttxfee", Rejected, "Hedera consensus `INSUFFICIENT_TX_FEE`"),
    ("intrinsicgas", Rejected, "geth/reth/anvil `intrinsic gas too low`, Erigon `IntrinsicGas`, Besu `Intrinsic gas exceeds gas limit`, Hedera `... insufficient of intrinsic gas required ...`"),
    ("floordatagas", Rejected, "geth `insufficient gas for floor data gas cost` (EIP-7623)"),
    ("insufficientgas", Rejected, "Hedera consensus `INSUFFICIENT_GAS`"),
    ("exceedsblockgaslimit", Rejected, "geth/reth `exceeds block gas limit`, Besu `Transaction gas limit exceeds block gas limit`"),
    ("gaslimitexceeded", Rejected, "Nethermind `GasLimitExceeded`"),
    ("gaslimitreached", Rejected, "Nethermind `gas limit reached`"),
    ("gaslimitistoohigh", Rejected, "Erigon `gas limit is too high`"),
    ("gaslimittoohigh", Rejected, "geth `transaction gas limit too high` (EIP-7825), reth `gas limit too high`"),
    ("gaslimitcapexceeded", Rejected, "Besu `Transaction gas limit cap exceeded`"),
    ("exceedsmaxtransactiongaslimit", Rejected, "reth `exceeds max transaction gas limit`"),
    ("exceedsmaxgaspersec", Rejected, "Hedera `Transaction gas limit ... exceeds max gas per sec limit`"),
    ("maxgaslimitexceeded", Rejected, "Hedera consensus `MAX_GAS_LIMIT_EXCEEDED`"),
    ("transactiontypenotsupported", Rejected, "geth/reth `transaction type not supported`"),
    ("unsupportedtransactiontype", Rejected, "Nethermind, Hedera `Unsupported transaction type`"),
    ("invalidtransactiontype", Rejected, "Besu `Invalid transaction type`"),
    ("notsupportedtxtype", Rejected, "Nethermind `NotSupportedTxType`"),
    ("invalidtxtype", Rejected, "Nethermind `InvalidTxType`"),
    ("transactiontypeisnotactivated", Rejected, "Erigon `fork supporting this transaction type is not activated yet`"),
    ("notsupportedbythecurrenthardfork", Rejected, "anvil `... not supported by the current hardfork`"),
    ("oversizeddata", Rejected, "geth/reth/Erigon `oversized data`, Hedera `Oversized data`"),
    ("transactiontoolarge", Rejected, "Nethermind `transaction too large`"),
    ("maxtxsizeexceeded", Rejected, "Nethermind `MaxTxSizeExceeded`"),
    ("rlptoolong", Rejected, "Erigon `RLPTooLong`"),
    ("initcodesizeexceeded", Rejected, "geth/reth/anvil `max initcode size exceeded`"),
    ("initcodetoolarge", Rejected, "Erigon `initcode too large`"),
    ("transactionoversize", Rejected, "Hedera consensus `TRANSACTION_OVERSIZE`"),
    ("exceedstheconfiguredcap", Rejected, "geth/reth/Erigon `tx fee (...) exceeds the configured cap`"),
    ("invalidsender", Rejected, "geth/reth `invalid sender`"),
    ("onlyreplayprotected", Rejected, "geth `only replay-protected (EIP-155) transactions allowed over RPC`"),
    ("invalidchainid", Rejected, "reth/Erigon `invalid chain id`"),
    ("wrongchainid", Rejected, "Besu `Wrong chainId`"),
    ("invalidsignature", Rejected, "Besu `Invalid signature`"),
    ("negativevalue", Rejected, "geth `negative value`"),
];

/// `message` as the patterns read it: lowercase, with no spaces, `_` or `-` (so `AlreadyKnown`,
/// `ALREADY_EXISTS` and `already known` meet).
pub fn squash(message: &str) -> String {
    message
        .chars()
        .filter(|c| !matches!(c, ' ' | '_' | '-'))
        .flat_map(char::to_lowercase)
        .collect()
}

/// The class of an error message (and `data` text), by [`PATTERNS`]; [`AnswerClass::Unrecognized`]
/// when none matches.
pub fn classify_message(message: &str) -> AnswerClass {
    let squashed = squash(message);
    PATTERNS
        .iter()
        .find(|(pattern, _, _)| squashed.contains(pattern))
        .map_or(Unrecognized, |(_, class, _)| *class)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real messages, as each node words them (see [`PATTERNS`] for the sources).
    #[rustfmt::skip]
    const MESSAGES: &[(&str, AnswerClass)] = &[
        // geth
        ("already known", AlreadyKnown),
        ("nonce too low: next nonce 5, tx nonce 3", NonceTooLow),
        ("nonce too high: tx nonce 9, gapped nonce 7", NonceTooHigh),
        ("replacement transaction underpriced", ReplacementUnderpriced),
        ("insufficient funds for gas * price + value: balance 0, tx cost 21000000, overshot 21000000", Rejected),
        ("transaction underpriced", Rejected),
        ("transaction gas price below minimum: gas tip cap 1, minimum needed 2", Rejected),
        ("intrinsic gas too low: gas 20000, minimum needed 21000", Rejected),
        ("exceeds block gas limit", Rejected),
        ("transaction type not supported: tx type 3 not supported by this pool", Rejected),
        ("oversized data: transaction size 200000, limit 131072", Rejected),
        ("txpool is full", Busy),
        ("25/second request limit reached - reduce calls per second or upgrade your account at quicknode.com", Busy),
        ("You've exceeded the RPS limit available on the current plan.", Busy),
        ("Your app has exceeded its compute units per second capacity. If you have retries enabled, you can safely ignore this message.", Busy),
        ("account limit exceeded: pooled 16 txs", Busy),
        ("known transaction: 0xabc", AlreadyKnown),
        ("only replay-protected (EIP-155) transactions allowed over RPC", Rejected),
        ("tx fee (1.20 ether) exceeds the configured cap (1.00 ether)", Rejected),
        ("nonce has max value", Rejected),
        // reth
        ("insufficient funds for gas * price + value: have 0 want 21000", Rejected),
        ("max fee per gas less than block base fee", Rejected),
        ("intrinsic gas too high", Rejected),
        ("exceeds max transaction gas limit", Rejected),
        // Nethermind, older and newer wording
        ("AlreadyKnown", AlreadyKnown),
        ("OldNonce, Current nonce: 22, nonce of rejected tx: 17", NonceTooLow),
        ("NonceGap, Future nonce. Expected nonce: 5", NonceTooHigh),
        ("FeeTooLow, MaxFeePerGas too low. MaxFeePerGas: 1, BaseFee: 7, MaxPriorityFeePerGas:1, Block number: 9", Rejected),
        ("FeeTooLowToCompete", Busy),
        ("ReplacementNotAllowed", ReplacementUnderpriced),
        ("InsufficientFunds, Account balance: 0, cumulative cost: 21000", Rejected),
        ("GasLimitExceeded, Gas limit: 30000000, gas limit of rejected tx: 40000000", Rejected),
        ("NonceTooHigh: Nonce exceeds max nonce", Rejected),
        ("pending transaction type conflict", Busy),
        ("nonce too far in future", NonceTooHigh),
        ("node is syncing", Busy),
        ("transaction too large", Rejected),
        // Erigon
        ("ALREADY_EXISTS: already known", AlreadyKnown),
        ("INTERNAL_ERROR: existing txn with same hash", AlreadyKnown),
        ("INTERNAL_ERROR: nonce too low", NonceTooLow),
        ("INTERNAL_ERROR: could not replace existing tx", ReplacementUnderpriced),
        ("FEE_TOO_LOW: replacement transaction underpriced", ReplacementUnderpriced),
        ("INTERNAL_ERROR: insufficient funds", Rejected),
        ("FEE_TOO_LOW: underpriced", Rejected),
        ("INTERNAL_ERROR: IntrinsicGas", Rejected),
        ("INTERNAL_ERROR: gas limit is too high", Rejected),
        ("INTERNAL_ERROR: pending sub-pool is full", Busy),
        ("INTERNAL_ERROR: spammer", Busy),
        ("INVALID: fork supporting this transaction type is not activated yet", Rejected),
        ("INVALID: RLPTooLong", Rejected),
        // Besu
        ("Known transaction", AlreadyKnown),
        ("Nonce too low", NonceTooLow),
        ("Nonce too high", NonceTooHigh),
        ("Transaction nonce is too distant from current sender nonce", NonceTooHigh),
        ("Replacement transaction underpriced", ReplacementUnderpriced),
        ("Upfront cost exceeds account balance", Rejected),
        ("Gas price below current base fee", Rejected),
        ("Intrinsic gas exceeds gas limit", Rejected),
        ("Transaction gas limit exceeds block gas limit", Rejected),
        ("Invalid transaction type", Rejected),
        ("Initial sync is still in progress", Busy),
        ("Internal error", Unrecognized),
        // anvil
        ("transaction already imported", AlreadyKnown),
        ("nonce too low", NonceTooLow),
        ("Insufficient funds for gas * price + value", Rejected),
        ("Unknown transaction type not supported", Rejected),
        ("intrinsic gas too high -- tx.gas_limit > env.block.gas_limit", Rejected),
        // Hedera's JSON-RPC relay and consensus statuses
        ("Nonce too low. Provided nonce: 3, current nonce: 5", NonceTooLow),
        ("Nonce too high. Provided nonce: 9, current nonce: 5", NonceTooHigh),
        ("Transaction rejected: WRONG_NONCE", WrongNonce),
        ("Transaction rejected: BUSY", Busy),
        ("Transaction rejected: THROTTLED_AT_CONSENSUS", Busy),
        ("Request timeout. Please try again.", Busy),
        ("IP Rate limit exceeded on eth_sendRawTransaction", Busy),
        ("Gas price '1' is below configured minimum gas price '710000000000'", Rejected),
        ("Transaction gas limit provided '20000' is insufficient of intrinsic gas required '21000'", Rejected),
        ("Oversized data: transaction size 140000, transaction limit 131072", Rejected),
        ("Unsupported transaction type: txType=3", Rejected),
        ("Consensus node error: DUPLICATE_TRANSACTION (11): ", AlreadyKnown),
        ("Transaction rejected: INVALID_ACCOUNT_ID", Unrecognized),
        ("execution reverted", Unrecognized),
    ];

    #[test]
    fn every_nodes_messages_land_in_their_class() {
        let wrong: Vec<String> = MESSAGES
            .iter()
            .filter(|(m, class)| classify_message(m) != *class)
            .map(|(m, class)| format!("{m:?}: {:?}, want {class:?}", classify_message(m)))
            .collect();
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn every_pattern_is_reachable_and_squashed() {
        for (i, (pattern, class, source)) in PATTERNS.iter().enumerate() {
            assert_eq!(
                pattern.to_string(),
                pattern.to_lowercase().replace([' ', '_', '-'], ""),
                "{pattern}"
            );
            assert!(!source.is_empty());
            // No earlier pattern swallows this one.
            assert_eq!(classify_message(pattern), *class, "pattern {i} {pattern}");
        }
    }

    #[test]
    fn effects() {
        assert_eq!(AlreadyKnown.effect(), NonceEffect::Advance);
        assert_eq!(Rejected.effect(), NonceEffect::Keep);
        assert_eq!(NonceTooHigh.effect(), NonceEffect::Relearn);
        assert_eq!(Unavailable.effect(), NonceEffect::Relearn);
        assert!(Unavailable.retryable() && Busy.retryable() && !Rejected.retryable());
        assert!(NonceTooLow.check_by_hash() && WrongNonce.check_by_hash());
    }
}
