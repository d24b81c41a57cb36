//! The settings of one sender's machine and the counters of its per-sender view.

use serde::Serialize;

/// The default `NONCE_GAP_WAIT_MS`, ms: a transaction above the sender's next nonce waits this long
/// for the missing ones (3 s: one lost TCP SYN alone delays a request by 1 s).
pub const DEFAULT_GAP_WAIT_MS: u64 = 3_000;

/// What to do with a different transaction that has the nonce of one already accepted and not
/// known to be mined (a speed-up or a cancel): `REPLACEMENT_POLICY`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplacementPolicy {
    /// Forward it through the lock, in nonce order (Ethereum pools accept one that pays more).
    Forward,
    /// Refuse it locally (upstreams without a pool, such as Hedera, where it is a charged
    /// `WRONG_NONCE`).
    Reject,
}

/// What the upstream does with a nonce gap: `UPSTREAM_POOL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolKind {
    /// A mempool that keeps a transaction above a gap until the gap fills (geth's queued pool):
    /// after `NONCE_GAP_WAIT_MS` a transaction above a gap is sent anyway.
    Mempool,
    /// No pool for gaps (Hedera's consensus nodes, where each refusal is a charged
    /// `WRONG_NONCE`): a transaction above a gap is never sent. It is refused with geth's
    /// `nonce too high: next nonce N, tx nonce M` at once when the transaction with the missing
    /// nonce is refused as terminal, and when its gap wait runs out otherwise.
    Strict,
}

/// Hedera's chain ids (mainnet 295, testnet 296, previewnet 297, local 298), where
/// `UPSTREAM_POOL=auto` means [`PoolKind::Strict`].
pub const HEDERA_CHAIN_IDS: std::ops::RangeInclusive<u64> = 295..=298;

impl PoolKind {
    /// `UPSTREAM_POOL=auto`: strict on Hedera's chain ids ([`HEDERA_CHAIN_IDS`]), a mempool
    /// otherwise (and while the chain id is unknown).
    pub fn auto(chain_id: Option<u64>) -> PoolKind {
        match chain_id {
            Some(id) if HEDERA_CHAIN_IDS.contains(&id) => PoolKind::Strict,
            _ => PoolKind::Mempool,
        }
    }

    /// The `REPLACEMENT_POLICY` when it is not set: `reject` for a strict upstream (a replacement
    /// is a charged refusal there), `forward` for a mempool.
    pub fn default_replacement(self) -> ReplacementPolicy {
        match self {
            PoolKind::Mempool => ReplacementPolicy::Forward,
            PoolKind::Strict => ReplacementPolicy::Reject,
        }
    }

    /// `mempool` or `strict`.
    pub fn label(self) -> &'static str {
        match self {
            PoolKind::Mempool => "mempool",
            PoolKind::Strict => "strict",
        }
    }
}

/// The settings of one sender's machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// `NONCE_GAP_WAIT_MS`: how long a transaction above the next nonce waits for the missing ones.
    pub gap_wait_ms: u64,
    /// `MAX_QUEUE_PER_SENDER`: the most clients' transactions that may wait for the lock.
    pub max_queue: usize,
    /// `MAX_SENDER_BYTES`: the most bytes of transactions the object holds, whatever their
    /// stage (waiting, checked, sending): past it the highest nonce waiting is refused.
    pub max_bytes: u64,
    /// `SEND_WINDOW`: how many consecutive nonces may be with a mempool upstream at once
    /// ([`Settings::window`]).
    pub send_window: usize,
    /// `IDEMPOTENCY_TTL_S` in ms: how long an accepted transaction is remembered.
    pub idempotency_ttl_ms: u64,
    /// `REPLACEMENT_POLICY`.
    pub replacement: ReplacementPolicy,
    /// `LOCK_MAX_HOLD_MS`: a holder's whole budget (its check, sends and retries), and how long a
    /// lookup may block the queue.
    pub max_hold_ms: u64,
    /// `TRACK_INTERVAL_S` in ms: how often pending transactions are checked (0: not tracked).
    pub track_interval_ms: u64,
    /// `TRACK_TTL_S` in ms: how long a transaction is tracked before it is given up (expired).
    pub track_ttl_ms: u64,
    /// `UPSTREAM_POOL`, resolved for the chain.
    pub pool: PoolKind,
    /// `UPSTREAM_SEND_URL` is set: transactions go to a private route (Flashbots Protect, MEV
    /// Blocker), which the node the relay asks about them (`UPSTREAM_RPC_URL`) cannot see. That
    /// node's null for a hash is then no sign of a drop (trezor/blockbook#1572): a transaction the
    /// route accepted stays vouched for until it is in a block, its nonce is taken in a block, or
    /// `TRACK_TTL_S` runs out.
    pub private_route: bool,
    /// `SEND_STATUS_URL` is set: tracking asks the private route about each pending
    /// transaction (at most [`crate::ordering::route_status::MAX_STATUS_ASKED`] a check) and
    /// sends one it dropped to it again.
    pub route_status: bool,
    /// `SEND_PUBLIC_AFTER_BLOCKS`: a transaction the route has not had included this many blocks
    /// after tracking first saw it pending (the head at that check) is also sent to the public
    /// mempool (`UPSTREAM_RPC_URL`), once. `None`: never.
    pub public_after_blocks: Option<u64>,
}

impl Settings {
    /// The defaults (`NONCE_GAP_WAIT_MS` 3000, `MAX_QUEUE_PER_SENDER` 64, `MAX_SENDER_BYTES`
    /// 8 MiB, `SEND_WINDOW` 16,
    /// `IDEMPOTENCY_TTL_S` 300, `REPLACEMENT_POLICY` forward, `LOCK_MAX_HOLD_MS` 30000,
    /// `TRACK_INTERVAL_S` 12, `TRACK_TTL_S` 600, `UPSTREAM_POOL` mempool, no `UPSTREAM_SEND_URL`,
    /// `SEND_STATUS_URL` or `SEND_PUBLIC_AFTER_BLOCKS`).
    pub const DEFAULT: Settings = Settings {
        gap_wait_ms: DEFAULT_GAP_WAIT_MS,
        max_queue: 64,
        max_bytes: 8 * 1024 * 1024,
        send_window: 16,
        idempotency_ttl_ms: 300_000,
        replacement: ReplacementPolicy::Forward,
        max_hold_ms: 30_000,
        track_interval_ms: 12_000,
        track_ttl_ms: 600_000,
        pool: PoolKind::Mempool,
        private_route: false,
        route_status: false,
        public_after_blocks: None,
    };

    /// How long past a holder's deadline (or a lookup's) the machine waits for its report before
    /// it treats the task as lost, ms: a quarter of `LOCK_MAX_HOLD_MS`, at most 5 s.
    pub fn grace_ms(&self) -> u64 {
        (self.max_hold_ms / 4).clamp(1, 5_000)
    }

    /// How many holders may be sending at once: `SEND_WINDOW` (at least 1) on a mempool
    /// upstream, which keeps a nonce above a gap queued and promotes it when the gap fills
    /// (geth's and reth's queued pools); always 1 on a strict one, which refuses (on Hedera,
    /// charges) every nonce sent ahead of an unanswered one, and 1 behind a private route: a
    /// route takes a nonce only next to one it already has (Flashbots Protect accepts at most
    /// its cached highest + 1, cached after it answered, and refuses others `invalid nonce`;
    /// integrators found MEV Blocker needs one transaction at a time), so each send waits for
    /// the route's answer to the one before.
    pub fn window(&self) -> usize {
        if self.private_route || self.pool == PoolKind::Strict {
            1
        } else {
            self.send_window.max(1)
        }
    }
}

/// What happened to a sender's transactions since its object started (the per-sender view).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// Transactions that went to the upstream and got a final answer.
    pub forwarded: u64,
    /// Copies answered from another copy's answer, the accepted hashes or the upstream's
    /// answer by hash, without a send.
    pub deduplicated: u64,
    /// Sends retried after an answer that said nothing about the transaction.
    pub retried: u64,
    /// Transactions refused locally because their nonce is below the mined count.
    pub stale_refused: u64,
    /// Replacements: forwarded (policy forward) or refused (policy reject).
    pub replacements: u64,
    /// Transactions that went with a lower nonce still missing after `NONCE_GAP_WAIT_MS`.
    pub gap_waits_expired: u64,
    /// Transactions above a nonce gap refused without a send (`UPSTREAM_POOL=strict`, or a
    /// send-and-wait call).
    pub gap_refused: u64,
    /// Holders whose task never reported, resolved by hash after their deadline.
    pub force_releases: u64,
    /// Transactions refused for `MAX_QUEUE_PER_SENDER` or `MAX_SENDER_BYTES`.
    pub queue_full: u64,
    /// Client transactions refused because a lower nonce of the sender was refused for a bound
    /// and is still missing (a refusal never opens a gap).
    pub above_refused: u64,
    /// Next-nonce lookups made after a nonce error or an unknown outcome.
    pub relearned: u64,
    /// Stored transactions sent again because the upstream no longer had them.
    pub resubmitted: u64,
    /// Stored transactions given up after `MAX_RESENDS` resends the upstream never kept.
    pub abandoned: u64,
    /// Tracked transactions found in a block.
    pub included: u64,
    /// Tracked transactions whose nonce another transaction took.
    pub replaced: u64,
    /// Tracked transactions given up after `TRACK_TTL_S`.
    pub expired: u64,
    /// Tracked transactions the private route said it dropped (`SEND_STATUS_URL`: failed or
    /// unknown), each time it said so.
    pub route_dropped: u64,
    /// Transactions sent to the public mempool after `SEND_PUBLIC_AFTER_BLOCKS`.
    pub sent_public: u64,
    /// Answers of holdings that were no longer the holder.
    pub late_answers: u64,
    /// Window members refused for a gap below them and sent again in their turn.
    pub window_requeued: u64,
    /// Times the upstream's genesis hash differed from the stored one (the stored state dropped).
    pub chain_changes: u64,
}
