//! The machine's state, grouped by what it is about: the holder and its phase, the nonces and
//! their lookup, the object's storage (what an earlier instance stored), the tracking check, the
//! failures remembered.

use crate::ordering::identifier::{LookupId, SessionKey, Ticket};
use crate::ordering::queue::QueuedTxId;
use crate::transaction::TxHash;
use std::collections::HashMap;

/// A holder of the lock: the first of a send window, or one sent behind it (`ahead`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Holding {
    pub(super) entry: QueuedTxId,
    /// Its transaction's nonce.
    pub(super) nonce: u64,
    pub(super) session_key: SessionKey,
    pub(super) acquired_ms: u64,
    /// The next nonce at the grant.
    pub(super) expected: u64,
    /// Granted behind holders still sending (`SEND_WINDOW`), before the nonces below it were
    /// answered: a gap refusal of it may be the window's own doing.
    pub(super) ahead: bool,
    pub(super) phase: Phase,
    /// How many times it was force-released and resent.
    pub(super) recoveries: u32,
}

/// What the holder is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Asking whether its nonce (below the next one) is mined and whether the upstream has it.
    Checking(LookupId),
    /// Its bytes are with the upstream (retried until the deadline).
    Sending { deadline_ms: u64 },
    /// Force-released: asking the upstream by hash what became of it.
    Recovering(LookupId),
}

/// Why a lookup was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Purpose {
    /// The sender's counts (and the genesis hash until it is checked).
    Nonces,
    /// The accepted hashes the counts contradict, with the counts already found.
    Verify { pending: u64, latest: Option<u64> },
    /// An arriving transaction's hash, before it is admitted or refused.
    Admit(QueuedTxId),
    /// The holder's nonce below the next one: mined count and hash.
    Holder(SessionKey),
    /// A force-released holder: counts and hash.
    Recover(SessionKey),
    /// The tracking check's first step: the sender's counts (behind a private route, the head
    /// and the route's statuses).
    Track,
    /// The tracking check's second step: what the counts cannot settle, by hash.
    TrackHashes,
    /// Which transactions took the nonces of replaced ones (by sender and nonce).
    ReplacedBy,
}

/// The sender's nonce lookup (one at a time) and who waits for it.
#[derive(Debug, Default)]
pub(super) struct NonceLookup {
    /// The running lookup (its counts or its verification).
    pub(super) running: Option<LookupId>,
    /// The next nonce became unknown after the running lookup was asked: its counts may be older
    /// than what made them unknown, so another follows.
    pub(super) rerun: bool,
    /// Pending-count questions waiting for the running lookup.
    pub(super) counts: Vec<Ticket>,
    /// After a failed lookup, the next one not before this time (Unix ms).
    pub(super) not_before_ms: u64,
    /// Failed lookups in a row, for the backoff.
    pub(super) failures: u32,
}

/// What the machine knows of the sender's nonces.
#[derive(Debug, Default)]
pub(super) struct Nonces {
    /// The sender's next nonce, when known: learned from the upstream, advanced by acceptances.
    pub(super) next: Option<u64>,
    /// The sender's mined count as last learned.
    pub(super) mined: Option<u64>,
    /// Since when the next nonce is unknown, Unix ms: a client's transaction waits at most
    /// `LOCK_MAX_HOLD_MS` of it.
    pub(super) unknown_since_ms: u64,
    /// When the queue last learned of a gap below its waiters, Unix ms: their gap wait counts
    /// from then at the earliest.
    pub(super) gap_opened_ms: u64,
    /// The lookup that learns them.
    pub(super) lookup: NonceLookup,
    /// The lowest nonce refused for a bound while it was free: nothing above it is taken until
    /// it is ([`super::admit`]).
    pub(super) hole: Option<Hole>,
}

/// A nonce the sender's object refused for a bound ([`super::Refusal::is_bound`]) while it was
/// free (no transaction held or waited with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Hole {
    /// The nonce.
    pub(super) nonce: u64,
    /// The `Retry-After` of its refusal, s.
    pub(super) retry_after_s: u64,
    /// When the upstream's counts were last asked whether it is still free, Unix ms (`None`
    /// until a transaction above it was refused).
    pub(super) checked_ms: Option<u64>,
}

impl Hole {
    /// The refusal of a client transaction with `nonce` above it ([`super::Sender::refuse`]
    /// counts it).
    pub(super) fn refused_above(&self, nonce: u64) -> super::Refusal {
        super::Refusal::AboveRefused {
            nonce,
            refused: self.nonce,
            retry_after_s: self.retry_after_s,
        }
    }
}

/// What the machine knows of its object's storage: what an earlier instance stored (the chain it
/// belongs to, transactions still to check or being read back), and the resends of what the
/// upstream lost.
#[derive(Debug, Default)]
pub(super) struct Storage {
    /// The genesis hash of the chain the stored state belongs to.
    pub(super) chain: Chain,
    /// Stored transactions not yet checked against the upstream since the object started.
    pub(super) unverified: bool,
    /// The accepted transactions are rows read back (a restart, or a wake from hibernation), not
    /// yet checked: their first check asks each by hash whatever its nonce.
    pub(super) read_back: bool,
    /// Waiting for `loaded` after an [`Action::Load`]: nothing is granted meanwhile.
    pub(super) loading: bool,
    /// How many times each stored transaction was sent again because the upstream did not have it.
    pub(super) resends: HashMap<TxHash, u32>,
    /// The object started with nothing stored (no row, no tombstone) and has not asked the
    /// route yet: behind a private route its first nonce lookup asks the route's status of the
    /// transactions waiting (a cancel this object cannot remember).
    pub(super) nothing_stored: bool,
    /// The running nonce lookup carries those statuses: once it answers, they were asked.
    pub(super) first_statuses_out: bool,
}

/// The genesis hash the stored state belongs to.
#[derive(Debug, Default)]
pub(super) struct Chain {
    /// The genesis hash, as stored or as learned.
    pub(super) genesis: Option<String>,
    /// Whether the upstream's genesis hash was compared with it since the object started.
    pub(super) checked: bool,
    /// Whether it is in storage (written with the first stored transaction, not before: a
    /// sender that only reads its count stores nothing).
    pub(super) persisted: bool,
}

/// The following of accepted transactions to inclusion.
#[derive(Debug, Default)]
pub(super) struct Tracking {
    /// When the pending transactions are next checked (Unix ms), while any are tracked.
    pub(super) due_ms: Option<u64>,
    /// Whether the tracking check runs (either step).
    pub(super) running: bool,
    /// When the last check ended, Unix ms (0: none yet).
    pub(super) ended_ms: u64,
    /// The counts of the check whose second step (by hash) is asked, by that lookup.
    pub(super) counts: HashMap<LookupId, crate::ordering::sender::Found>,
    /// Replaced transactions (nonce, hash) whose replacements each lookup asks for.
    pub(super) replaced: HashMap<LookupId, Vec<(u64, TxHash)>>,
}

/// A refusal or failure remembered for `GET /tx/{hash}`.
#[derive(Debug, Clone)]
pub(super) struct Failure {
    pub(super) hash: TxHash,
    pub(super) nonce: u64,
    pub(super) at_ms: u64,
    pub(super) why: String,
}
