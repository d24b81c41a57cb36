//! Why a transaction is answered by its sender's object without an upstream send, and the
//! JSON-RPC error it gets: EIP-1474 codes, and geth's wording for nonces
//! (`core/txpool/errors.go`, `core/error.go`).

use crate::hex;
use crate::jsonrpc::{
    RpcError, INTERNAL_ERROR, INVALID_INPUT, LIMIT_EXCEEDED, RESOURCE_UNAVAILABLE,
};
use crate::ordering::row::TooLarge;
use crate::transaction::TxHash;

/// How long a client refused for the queue bound is asked to wait before it retries, s.
pub const QUEUE_FULL_RETRY_AFTER_S: u64 = 1;

/// How long a client refused because its sender's pending transactions fill the accepted set is
/// asked to wait, s: about one slot, when the next tracking check may find some included.
pub const TRACKED_FULL_RETRY_AFTER_S: u64 = 12;

/// Why a transaction is refused (or given up) without reaching the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Its nonce is below the sender's mined transaction count and the upstream does not have its
    /// hash.
    Stale {
        /// The sender's mined transaction count (`eth_getTransactionCount(sender, "latest")`).
        mined: u64,
        /// The transaction's nonce.
        nonce: u64,
    },
    /// Another accepted transaction holds its nonce, and `REPLACEMENT_POLICY` is `reject`.
    Replacement {
        /// The nonce.
        nonce: u64,
        /// The hash of the transaction that holds it.
        holder: TxHash,
    },
    /// `MAX_QUEUE_PER_SENDER` transactions with lower nonces already wait.
    QueueFull {
        /// The limit.
        max: usize,
    },
    /// The sender's next nonce could not be learned from the upstream while it waited: it was
    /// not sent.
    NonceUnknown {
        /// How long it waited, ms.
        waited_ms: u64,
    },
    /// Whether the upstream has the transaction could not be learned (a nonce below the mined
    /// count, or its turn's check): it was not sent.
    CheckFailed {
        /// The transaction's nonce.
        nonce: u64,
    },
    /// Its nonce is above the sender's next one and the upstream refuses gaps
    /// (`UPSTREAM_POOL=strict`): not sent, because the transaction with the missing nonce was
    /// refused as terminal (`refused`) or did not arrive within `NONCE_GAP_WAIT_MS`.
    NonceTooHigh {
        /// The sender's next nonce (the missing one).
        next: u64,
        /// The transaction's nonce.
        nonce: u64,
        /// Whether the transaction with the missing nonce was refused by the upstream.
        refused: bool,
    },
    /// Too large to keep in the sender's storage ([`TooLarge`]): not sent.
    TooLarge(TooLarge),
    /// Its storage write failed for a reason of the transaction's own (the platform refused the
    /// row): not sent, and the sender's queue goes on.
    NotStored,
    /// `MAX_SENDER_BYTES`: the transactions the sender's object holds (waiting, checked or being
    /// sent) would keep more bytes than this.
    BytesFull {
        /// The limit, bytes.
        max: u64,
    },
    /// [`crate::ordering::accepted::MAX_ACCEPTED`] accepted transactions of the sender are
    /// pending: none can be forgotten, so no new one is taken until one is final.
    TrackedFull {
        /// The limit.
        max: usize,
    },
    /// Its nonce is above `refused`, a nonce of the same sender that the relay refused for a
    /// bound ([`Refusal::is_bound`]) and that is still free: taken, it would sit above a hole
    /// that may never fill. Refused with the bound's `Retry-After`, until a transaction with
    /// nonce `refused` is taken (or the upstream's counts show that nonce used).
    AboveRefused {
        /// The transaction's nonce.
        nonce: u64,
        /// The lowest nonce refused for a bound and still free.
        refused: u64,
        /// That refusal's `Retry-After`, s.
        retry_after_s: u64,
    },
    /// Its sender cancelled it at the private route (the route's `CANCELLED`, or a cancel through
    /// the relay): never sent again, anywhere.
    Cancelled,
    /// A send-and-wait call (EIP-7966) whose nonce is above the sender's next one when its turn
    /// came: not sent (the EIP forbids adding it to the pool).
    NonceGap {
        /// The sender's next nonce.
        expected: u64,
        /// The transaction's nonce.
        nonce: u64,
    },
}

/// EIP-7966's error code for a send-and-wait call refused for a nonce gap; `data` is the expected
/// nonce (hex quantity).
pub const SYNC_NONCE_GAP: i64 = 6;

impl Refusal {
    /// The JSON-RPC error for `sender` (lowercase 0x address): -32000 with geth's
    /// `nonce too low: next nonce N, tx nonce M` for a stale nonce, -32000 with geth's
    /// `nonce too high: next nonce N, tx nonce M` and why nonce N is missing for a gap a strict
    /// upstream would refuse, -32000 naming the nonce and
    /// the holder's hash for a refused replacement, -32005 (EIP-1474 limit exceeded, with
    /// `Retry-After`) for a full queue, -32002 (resource unavailable) when the upstream could not
    /// be asked (the transaction was not sent, so sending it again is safe).
    pub fn to_rpc(&self, sender: &str) -> RpcError {
        match self {
            Refusal::Stale { mined, nonce } => RpcError::new(
                INVALID_INPUT,
                format!("nonce too low: next nonce {mined}, tx nonce {nonce}"),
            ),
            Refusal::NonceTooHigh {
                next,
                nonce,
                refused,
            } => nonce_too_high(*next, *nonce, *refused),
            Refusal::Replacement { nonce, holder } => replacement_refused(*nonce, holder),
            Refusal::QueueFull { max } => RpcError::new(
                LIMIT_EXCEEDED,
                format!(
                    "too many queued transactions for sender {sender} (at most {max} wait); retry after {QUEUE_FULL_RETRY_AFTER_S} s"
                ),
            ),
            Refusal::NonceUnknown { waited_ms } => RpcError::new(
                RESOURCE_UNAVAILABLE,
                format!(
                    "upstream unavailable: the sender's next nonce could not be learned within {waited_ms} ms; the transaction was not sent"
                ),
            ),
            Refusal::CheckFailed { nonce } => RpcError::new(
                RESOURCE_UNAVAILABLE,
                format!(
                    "upstream unavailable: could not check nonce {nonce} against the chain; the transaction was not sent"
                ),
            ),
            Refusal::TooLarge(too_large) => RpcError::new(LIMIT_EXCEEDED, too_large.to_string()),
            Refusal::Cancelled => RpcError::new(
                INVALID_INPUT,
                "transaction cancelled at the private route by its sender: not sent again",
            ),
            Refusal::NotStored => RpcError::new(
                INTERNAL_ERROR,
                "the relay could not store the transaction before its send; it was not sent",
            ),
            Refusal::BytesFull { max } => RpcError::new(
                LIMIT_EXCEEDED,
                format!(
                    "too many queued bytes for sender {sender} (at most {max} bytes of transactions wait: MAX_SENDER_BYTES); retry after {QUEUE_FULL_RETRY_AFTER_S} s"
                ),
            ),
            Refusal::TrackedFull { max } => RpcError::new(
                LIMIT_EXCEEDED,
                format!(
                    "too many pending transactions for sender {sender} (the relay follows at most {max} until they are included); retry after {TRACKED_FULL_RETRY_AFTER_S} s"
                ),
            ),
            Refusal::AboveRefused {
                nonce,
                refused,
                retry_after_s,
            } => above_refused(sender, *nonce, *refused, *retry_after_s),
            Refusal::NonceGap { expected, nonce } => nonce_gap(*expected, *nonce),
        }
    }

    /// The `Retry-After` of the answer, s: for a full queue (by count or bytes), a full
    /// accepted set, and a nonce above one refused for them.
    pub fn retry_after_s(&self) -> Option<u64> {
        match self {
            Refusal::QueueFull { .. } | Refusal::BytesFull { .. } => Some(QUEUE_FULL_RETRY_AFTER_S),
            Refusal::TrackedFull { .. } => Some(TRACKED_FULL_RETRY_AFTER_S),
            Refusal::AboveRefused { retry_after_s, .. } => Some(*retry_after_s),
            _ => None,
        }
    }

    /// Whether it refuses for one of the sender's bounds (`MAX_QUEUE_PER_SENDER`,
    /// `MAX_SENDER_BYTES`, the accepted transactions it follows): the transaction itself is fine,
    /// and the client is to send it again after `Retry-After`. Its nonce, while free, is a hole
    /// nothing above may be taken over ([`Refusal::AboveRefused`]).
    pub fn is_bound(&self) -> bool {
        matches!(
            self,
            Refusal::QueueFull { .. } | Refusal::BytesFull { .. } | Refusal::TrackedFull { .. }
        )
    }

    /// A short name for logs and metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Refusal::Stale { .. } => "stale_nonce",
            Refusal::NonceTooHigh { .. } => "nonce_too_high",
            Refusal::Replacement { .. } => "replacement_refused",
            Refusal::QueueFull { .. } => "queue_full",
            Refusal::NonceUnknown { .. } => "nonce_unknown",
            Refusal::CheckFailed { .. } => "check_failed",
            Refusal::NonceGap { .. } => "nonce_gap",
            Refusal::TooLarge(_) => "too_large",
            Refusal::NotStored => "not_stored",
            Refusal::Cancelled => "cancelled",
            Refusal::BytesFull { .. } => "bytes_full",
            Refusal::TrackedFull { .. } => "tracked_full",
            Refusal::AboveRefused { .. } => "above_refused",
        }
    }
}

/// [`Refusal::NonceTooHigh`]'s error: -32000 with geth's `nonce too high: next nonce N, tx nonce
/// M`, and why nonce `next` is missing (`refused` by the upstream, or it did not arrive in time).
fn nonce_too_high(next: u64, nonce: u64, refused: bool) -> RpcError {
    RpcError::new(
        INVALID_INPUT,
        format!(
            "nonce too high: next nonce {next}, tx nonce {nonce}; not sent: nonce {next} {}, and the upstream refuses nonce gaps (UPSTREAM_POOL=strict)",
            if refused {
                "was refused"
            } else {
                "did not arrive within NONCE_GAP_WAIT_MS"
            }
        ),
    )
}

/// [`Refusal::Replacement`]'s error: -32000 naming `nonce` and the hash of `holder`, the
/// accepted transaction that holds it.
fn replacement_refused(nonce: u64, holder: &TxHash) -> RpcError {
    RpcError::new(
        INVALID_INPUT,
        format!(
            "replacement transaction refused: nonce {nonce} is already used by {} (REPLACEMENT_POLICY=reject)",
            hex::encode(holder)
        ),
    )
}

/// [`Refusal::AboveRefused`]'s error for `sender`: -32005 naming `nonce`, the missing nonce
/// `refused` to send again first, and the `Retry-After`, s.
fn above_refused(sender: &str, nonce: u64, refused: u64, retry_after_s: u64) -> RpcError {
    RpcError::new(
        LIMIT_EXCEEDED,
        format!(
            "nonce {nonce} not taken: nonce {refused} of sender {sender} was refused for a limit and is still missing; send nonce {refused} again first, retry after {retry_after_s} s"
        ),
    )
}

/// [`Refusal::NonceGap`]'s error: EIP-7966's code 6 with geth's `nonce too high` wording, its
/// `data` the `expected` nonce (hex quantity).
fn nonce_gap(expected: u64, nonce: u64) -> RpcError {
    RpcError {
        code: SYNC_NONCE_GAP,
        message: format!(
            "nonce too high: next nonce {expected}, tx nonce {nonce}; the transaction was not sent"
        ),
        data: Some(crate::hex::encode_quantity(expected).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wording_codes_and_retry_after() {
        let stale = Refusal::Stale { mined: 5, nonce: 4 };
        assert_eq!(
            stale.to_rpc("0xab").message,
            "nonce too low: next nonce 5, tx nonce 4"
        );
        assert_eq!(stale.to_rpc("0xab").code, -32000);
        assert_eq!(stale.retry_after_s(), None);
        let full = Refusal::QueueFull { max: 3 };
        let e = full.to_rpc("0xabc");
        assert_eq!(e.code, -32005);
        assert!(e
            .message
            .starts_with("too many queued transactions for sender 0xabc (at most 3 wait)"));
        assert_eq!(full.retry_after_s(), Some(1));
        let unknown = Refusal::NonceUnknown { waited_ms: 30_000 }.to_rpc("0xab");
        assert_eq!(unknown.code, -32002);
        assert!(unknown.message.contains("was not sent"));
        let gap = Refusal::NonceGap {
            expected: 5,
            nonce: 7,
        }
        .to_rpc("0xab");
        assert_eq!((gap.code, gap.data), (6, Some("0x5".into())));
        let high = Refusal::NonceTooHigh {
            next: 2,
            nonce: 5,
            refused: true,
        }
        .to_rpc("0xab");
        assert_eq!(high.code, -32000);
        assert!(
            high.message.starts_with(
                "nonce too high: next nonce 2, tx nonce 5; not sent: nonce 2 was refused"
            ),
            "{}",
            high.message
        );
        let replaced = Refusal::Replacement {
            nonce: 0,
            holder: [1; 32],
        }
        .to_rpc("0xab");
        assert!(replaced.message.contains(&hex::encode(&[1; 32])));
    }
}
