//! The transactions a sender's upstream accepted, by hash and by nonce, followed to inclusion.
//!
//! Each starts [`Status::Pending`] and is tracked until it is included in a block, replaced (another
//! transaction took its nonce), or `TRACK_TTL_S` ran out (expired); its original bytes stay in the
//! object's storage meanwhile. A final status is remembered for `IDEMPOTENCY_TTL_S` more (resends
//! and `GET /tx/{hash}` are answered from it); at most [`MAX_ACCEPTED`] per sender, the oldest
//! final ones leaving first (a pending one is never forgotten for the bound), and at most
//! [`MAX_TRACKED_BYTES`] of stored requests tracked (blob sidecars count), the oldest expiring
//! first.
//!
//! The bound on pending ones counts what is really outstanding ([`Accepted::outstanding`]): a
//! pending one whose nonce the mined count passed is in a block (itself, or another transaction
//! with its nonce) and only waits to be told which. With [`MAX_ACCEPTED`] outstanding, or
//! [`MAX_PENDING`] pending in all, [`Accepted::is_full`] and the sender's object refuses a new
//! send while tracking runs; with tracking off nothing is followed to inclusion, so past
//! [`MAX_ACCEPTED`] the oldest pending ones are given up instead ([`Accepted::untracked_bound`]),
//! and a sender's rate is never capped.
//!
//! An accepted transaction is *vouched* for while the relay has seen the upstream hold it: it was
//! accepted in this object's life, or the upstream answered it by hash since. One read back from
//! storage after a restart, or one whose answer was lost, is not vouched for until the upstream
//! confirms it.
//!
//! One transaction holds each nonce. A transaction not vouched for (its outcome unknown) does not
//! take the nonce from the one holding it: both are followed until the upstream vouches for one,
//! which then takes the nonce, the other replaced by it.

use std::collections::{BTreeMap, HashMap};

use crate::ordering::private_terms::PrivateTerms;
use crate::ordering::route_status::RouteStatus;
use crate::ordering::row::{RowProgress, TakenBy};
use crate::transaction::TxHash;

/// The most accepted transactions one sender's object remembers; the oldest final ones leave
/// first, and a pending one never does for this bound.
pub const MAX_ACCEPTED: usize = 1024;

/// The most pending transactions one sender's object keeps in all, outstanding or mined and not
/// yet told apart (included or replaced): four times [`MAX_ACCEPTED`]. Reached only while the
/// upstream does not answer by hash (a hot sender's check tells them apart as fast as they are
/// mined), it bounds what such an upstream makes the object keep.
pub const MAX_PENDING: usize = 4 * MAX_ACCEPTED;

/// The most bytes of original requests one sender's pending transactions keep in storage (32 MiB:
/// about twenty six-blob transactions with their sidecars); past it the oldest pending ones
/// expire (no longer tracked, their rows deleted).
pub const MAX_TRACKED_BYTES: u64 = 32 * 1024 * 1024;

/// What became of an accepted transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// In the upstream's pool (as far as the relay knows): tracked.
    Pending,
    /// In a block.
    Included {
        /// The block number.
        block: u64,
    },
    /// Another transaction took its nonce.
    Replaced {
        /// That transaction, when the relay knows it (it went through the relay).
        by: Option<TxHash>,
    },
    /// Not included within `TRACK_TTL_S`, or (`eth_sendPrivateTransaction`) by its
    /// `maxBlockNumber`: no longer tracked, not counted.
    Expired,
    /// Cancelled at the private route by its sender (the route's `CANCELLED`): never sent again,
    /// not counted.
    Cancelled,
    /// Given up by the private route (`FAILED` or `UNKNOWN`) after the relay's last resend: not
    /// counted.
    Failed,
}

impl Status {
    /// Whether it is final (no longer tracked).
    pub fn is_final(self) -> bool {
        self != Status::Pending
    }

    /// Its name in `GET /tx/{hash}` and the per-sender view: `pending`, `included`, `replaced`,
    /// `expired`, `cancelled`, `failed`.
    pub fn label(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Included { .. } => "included",
            Status::Replaced { .. } => "replaced",
            Status::Expired => "expired",
            Status::Cancelled => "cancelled",
            Status::Failed => "failed",
        }
    }
}

/// What tracking learned of an accepted transaction behind a private route
/// (`UPSTREAM_SEND_URL`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouteTrack {
    /// The route's last word on it (`SEND_STATUS_URL`); `None` until one came.
    pub status: Option<RouteStatus>,
    /// When tracking last asked the route's status of it, Unix ms; `None`: never.
    pub asked_ms: Option<u64>,
    /// The head block at the first tracking check that found it pending: its sender's opt-in
    /// to the public mempool counts blocks from it.
    pub since_block: Option<u64>,
    /// Whether it was also sent to the public mempool (its sender's opt-in).
    pub public: bool,
    /// What its sender asked of the route: its opt-in to the public mempool, its
    /// `maxBlockNumber`.
    pub terms: PrivateTerms,
    /// Behind several routes, the one that last took it.
    pub taken_by: TakenBy,
}

/// A transaction the upstream took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceptedTx {
    /// Its nonce.
    pub nonce: u64,
    /// When it was first accepted (or stored, for one read back after a restart), Unix ms.
    pub at_ms: u64,
    /// Whether the upstream is known to hold it (see the module documentation).
    pub vouched: bool,
    /// What became of it.
    pub status: Status,
    /// When its status became final, Unix ms.
    pub final_ms: Option<u64>,
    /// How many times the relay sent it again because the upstream no longer had it.
    pub resent: u32,
    /// The size of its stored request, bytes (0 while unknown: one read back after a restart).
    pub bytes: u64,
    /// Behind a private route: what tracking learned of it there.
    pub route: RouteTrack,
}

impl AcceptedTx {
    /// As `GET /tx/{hash}` and the per-sender view show it: `{"hash", "nonce", "status",
    /// "resubmitted"}`, with `block` when included and `replaced_by` (a hash or null) when
    /// replaced.
    pub fn describe(&self, hash: &TxHash) -> serde_json::Value {
        let mut v = serde_json::json!({
            "hash": crate::hex::encode(hash),
            "nonce": self.nonce,
            "status": self.status.label(),
            "resubmitted": self.resent,
        });
        match self.status {
            Status::Included { block } => v["block"] = block.into(),
            Status::Replaced { by } => v["replaced_by"] = by.map(|h| crate::hex::encode(&h)).into(),
            Status::Pending | Status::Expired | Status::Cancelled | Status::Failed => {}
        }
        v
    }
}

/// One sender's accepted transactions. See the module documentation.
pub struct Accepted {
    by_hash: HashMap<TxHash, AcceptedTx>,
    by_nonce: BTreeMap<u64, TxHash>,
    /// `IDEMPOTENCY_TTL_S`, ms: how long a final status is remembered.
    ttl_ms: u64,
    /// `TRACK_TTL_S`, ms: how long a pending one is tracked.
    track_ttl_ms: u64,
}

/// What [`Accepted::prune`] took out.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Forgotten altogether.
    pub gone: Vec<TxHash>,
    /// Pending past `TRACK_TTL_S`: now [`Status::Expired`] (remembered, no longer tracked).
    pub expired: Vec<(TxHash, AcceptedTx)>,
    /// Pending, the oldest while the stored bytes are past [`MAX_TRACKED_BYTES`]: expired too.
    pub over_bytes: Vec<(TxHash, AcceptedTx)>,
    /// Pending, the oldest past [`MAX_ACCEPTED`] with tracking off
    /// ([`Accepted::untracked_bound`]): expired too.
    pub over_count: Vec<(TxHash, AcceptedTx)>,
    /// Pending, whose nonce another accepted transaction of the sender took (a replacement the
    /// upstream accepted): now [`Status::Replaced`], never sent again; (hash, nonce, by).
    pub replaced: Vec<(TxHash, u64, TxHash)>,
}

impl Accepted {
    /// Empty: final statuses remembered `ttl_ms`, pending ones tracked `track_ttl_ms`.
    pub fn new(ttl_ms: u64, track_ttl_ms: u64) -> Self {
        Accepted {
            by_hash: HashMap::new(),
            by_nonce: BTreeMap::new(),
            ttl_ms,
            track_ttl_ms,
        }
    }

    /// When `tx` is to be forgotten (final) or expired (pending), Unix ms.
    fn until_ms(&self, tx: &AcceptedTx) -> u64 {
        match tx.final_ms {
            Some(at) => at.saturating_add(self.ttl_ms),
            None => tx.at_ms.saturating_add(self.track_ttl_ms),
        }
    }

    /// The accepted transaction with this hash (pruned ones excluded at `now_ms`).
    pub fn get(&self, hash: &TxHash, now_ms: u64) -> Option<AcceptedTx> {
        self.by_hash
            .get(hash)
            .copied()
            .filter(|tx| now_ms < self.until_ms(tx) || !tx.status.is_final())
    }

    /// The hash accepted with `nonce` that still holds it (pending or included), if any.
    pub fn with_nonce(&self, nonce: u64, now_ms: u64) -> Option<TxHash> {
        let hash = self.by_nonce.get(&nonce)?;
        self.get(hash, now_ms).map(|_| *hash)
    }

    /// The hashes with a nonce at or above `from` that hold it or may (pending, not vouched
    /// for), lowest nonce first.
    pub fn from_nonce(&self, from: u64, now_ms: u64) -> Vec<(u64, TxHash)> {
        self.in_nonce_order(|hash, tx| {
            tx.nonce >= from
                && self.get(hash, now_ms).is_some()
                && (self.by_nonce.get(&tx.nonce) == Some(hash) || tx.status == Status::Pending)
        })
    }

    /// The pending (tracked) ones, lowest nonce first (the one holding a nonce before one that
    /// is not vouched for).
    pub fn pending(&self) -> Vec<(u64, TxHash)> {
        self.in_nonce_order(|_, tx| tx.status == Status::Pending)
    }

    /// The hashes `keep` keeps, lowest nonce first, the one holding a nonce before the others
    /// with it.
    fn in_nonce_order(&self, keep: impl Fn(&TxHash, &AcceptedTx) -> bool) -> Vec<(u64, TxHash)> {
        let mut found: Vec<(u64, bool, TxHash)> = self
            .by_hash
            .iter()
            .filter(|(hash, tx)| keep(hash, tx))
            .map(|(hash, tx)| (tx.nonce, self.by_nonce.get(&tx.nonce) != Some(hash), *hash))
            .collect();
        found.sort_unstable();
        found
            .into_iter()
            .map(|(nonce, _, hash)| (nonce, hash))
            .collect()
    }

    /// The `count` most recently accepted, newest first.
    pub fn recent(&self, count: usize, now_ms: u64) -> Vec<(TxHash, AcceptedTx)> {
        let mut all: Vec<(TxHash, AcceptedTx)> = self
            .by_hash
            .iter()
            .filter(|(hash, _)| self.get(hash, now_ms).is_some())
            .map(|(hash, tx)| (*hash, *tx))
            .collect();
        all.sort_by(|a, b| b.1.at_ms.cmp(&a.1.at_ms).then(b.1.nonce.cmp(&a.1.nonce)));
        all.truncate(count);
        all
    }

    /// Whether any is pending (tracked).
    pub fn has_pending(&self) -> bool {
        self.by_hash.values().any(|tx| tx.status == Status::Pending)
    }

    /// How many pending ones are outstanding: their nonce at or above the mined count `mined`
    /// (every one when it is unknown). One below it is in a block, itself or another with its
    /// nonce, and only waits to be told which.
    pub fn outstanding(&self, mined: Option<u64>) -> usize {
        let floor = mined.unwrap_or(0);
        self.by_hash
            .values()
            .filter(|tx| tx.status == Status::Pending && tx.nonce >= floor)
            .count()
    }

    /// Whether [`MAX_ACCEPTED`] are outstanding with the mined count `mined`
    /// ([`Accepted::outstanding`]), or [`MAX_PENDING`] are pending in all: none can leave for
    /// the bound, so the sender's object takes no new transaction until one is final.
    pub fn is_full(&self, mined: Option<u64>) -> bool {
        let pending = self
            .by_hash
            .values()
            .filter(|tx| tx.status == Status::Pending)
            .count();
        pending >= MAX_PENDING || self.outstanding(mined) >= MAX_ACCEPTED
    }

    /// With tracking off (`TRACK_INTERVAL_S=0`) nothing is followed to inclusion: past
    /// [`MAX_ACCEPTED`] pending ones, the oldest expire at `now_ms` (in `over_count`), so that
    /// the bound never refuses a sender.
    pub fn untracked_bound(&mut self, now_ms: u64) -> Pruned {
        let mut pruned = Pruned::default();
        let mut pending: Vec<(u64, u64, TxHash)> = self
            .by_hash
            .iter()
            .filter(|(_, tx)| tx.status == Status::Pending)
            .map(|(hash, tx)| (tx.at_ms, tx.nonce, *hash))
            .collect();
        let Some(over) = pending.len().checked_sub(MAX_ACCEPTED).filter(|&o| o > 0) else {
            return pruned;
        };
        pending.sort_unstable();
        for (_, _, hash) in pending.into_iter().take(over) {
            if let Some(tx) = self.by_hash.get(&hash).copied() {
                self.finish(&hash, Status::Expired, now_ms);
                pruned.over_count.push((hash, tx));
            }
        }
        pruned
    }

    /// How many are remembered.
    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }

    /// Records that the upstream took `hash` with `nonce` at `at_ms` (pending), or may have
    /// (`vouched` false: its outcome unknown). A vouched one takes the nonce: another hash
    /// holding it is replaced. One not vouched for takes it only from nobody (or from one no
    /// longer pending). Returns the hashes whose stored bytes are no longer needed (the replaced
    /// one), and prunes at `at_ms`. `terms` are what its sender asked of a private route
    /// ([`PrivateTerms`]), kept as the first send that carried terms asked: a later copy of the
    /// same bytes (a plain resend, a resend with another opt-in) neither lifts a
    /// `maxBlockNumber` nor opts it in.
    pub fn record(
        &mut self,
        hash: TxHash,
        nonce: u64,
        at_ms: u64,
        vouched: bool,
        terms: PrivateTerms,
    ) -> Pruned {
        let mut pruned = Pruned::default();
        let holder = self.by_nonce.get(&nonce).copied().filter(|h| *h != hash);
        let holder_pending = holder
            .and_then(|h| self.by_hash.get(&h))
            .is_some_and(|tx| tx.status == Status::Pending);
        if vouched || !holder_pending {
            self.take_nonce(hash, nonce, at_ms, &mut pruned);
        }
        // Recorded again (a resend went in): it keeps its first time, resends and size.
        let before = self.by_hash.get(&hash).copied();
        self.by_hash.insert(
            hash,
            AcceptedTx {
                nonce,
                at_ms: before.map_or(at_ms, |tx| tx.at_ms.min(at_ms)),
                vouched,
                status: Status::Pending,
                final_ms: None,
                resent: before.map_or(0, |tx| tx.resent),
                bytes: before.map_or(0, |tx| tx.bytes),
                route: before.map_or_else(RouteTrack::default, |tx| tx.route),
            },
        );
        if let Some(route) = self.route_mut(&hash) {
            if route.terms == PrivateTerms::default() {
                route.terms = terms;
            }
        }
        let more = self.prune(at_ms);
        pruned.gone.extend(more.gone);
        pruned.expired.extend(more.expired);
        pruned.over_bytes.extend(more.over_bytes);
        pruned.over_count.extend(more.over_count);
        pruned
    }

    /// `hash` takes `nonce`: the hash holding it before is replaced by it (its stored bytes
    /// listed in `pruned` while it was pending).
    fn take_nonce(&mut self, hash: TxHash, nonce: u64, at_ms: u64, pruned: &mut Pruned) {
        if let Some(previous) = self.by_nonce.insert(nonce, hash) {
            if previous != hash {
                if let Some(tx) = self.by_hash.get_mut(&previous) {
                    if !tx.status.is_final() {
                        pruned.gone.push(previous);
                        pruned.replaced.push((previous, nonce, hash));
                    }
                    tx.status = Status::Replaced { by: Some(hash) };
                    tx.final_ms.get_or_insert(at_ms);
                }
            }
        }
    }

    /// Marks `hash` as held by the upstream (it answered it by hash) at `now_ms`: it takes its
    /// nonce, and another hash that held it is replaced (in `gone` when its stored bytes are no
    /// longer needed). `None` when it is not here.
    pub fn vouch(&mut self, hash: &TxHash, now_ms: u64) -> Option<Pruned> {
        let tx = self.by_hash.get_mut(hash)?;
        tx.vouched = true;
        let nonce = tx.nonce;
        let mut pruned = Pruned::default();
        if tx.status == Status::Pending {
            self.take_nonce(*hash, nonce, now_ms, &mut pruned);
        }
        Some(pruned)
    }

    /// Records `by` as the transaction that took the nonce of the replaced `hash`. False when
    /// `hash` is not here or not replaced.
    pub fn replaced_by(&mut self, hash: &TxHash, by: TxHash) -> bool {
        match self.by_hash.get_mut(hash) {
            Some(tx) if matches!(tx.status, Status::Replaced { .. }) => {
                tx.status = Status::Replaced { by: Some(by) };
                true
            }
            _ => false,
        }
    }

    /// Records the size of `hash`'s stored request, bytes; past [`MAX_TRACKED_BYTES`] the oldest
    /// pending ones expire at `now_ms` (the only place stored bytes grow, so the only check).
    pub fn sized(&mut self, hash: &TxHash, bytes: u64, now_ms: u64) -> Pruned {
        let mut pruned = Pruned::default();
        if let Some(tx) = self.by_hash.get_mut(hash) {
            tx.bytes = bytes;
        }
        let mut stored: u64 = self
            .by_hash
            .values()
            .filter(|tx| !tx.status.is_final())
            .map(|tx| tx.bytes)
            .sum();
        if stored > MAX_TRACKED_BYTES {
            let mut oldest: Vec<(u64, TxHash)> = self
                .by_hash
                .iter()
                .filter(|(_, tx)| !tx.status.is_final())
                .map(|(h, tx)| (tx.at_ms, *h))
                .collect();
            oldest.sort_unstable();
            for (_, hash) in oldest {
                if stored <= MAX_TRACKED_BYTES {
                    break;
                }
                let Some(tx) = self.by_hash.get(&hash).copied() else {
                    continue;
                };
                stored -= tx.bytes;
                self.finish(&hash, Status::Expired, now_ms);
                pruned.over_bytes.push((hash, tx));
            }
        }
        pruned
    }

    /// Whether a pending one's terms need the chain's head ([`PrivateTerms::needs_head`]).
    pub fn terms_need_head(&self) -> bool {
        self.by_hash
            .values()
            .any(|tx| tx.status == Status::Pending && tx.route.terms.needs_head())
    }

    /// What tracking learned of `hash` behind a private route; `None` when it is not here.
    pub fn route_of(&self, hash: &TxHash) -> Option<&RouteTrack> {
        self.by_hash.get(hash).map(|tx| &tx.route)
    }

    /// What tracking learned of `hash` behind a private route, to update; `None` when it is not
    /// here.
    pub fn route_mut(&mut self, hash: &TxHash) -> Option<&mut RouteTrack> {
        self.by_hash.get_mut(hash).map(|tx| &mut tx.route)
    }

    /// `hash` when it is pending and was also sent to the public mempool (its sender's opt-in,
    /// [`RouteTrack::public`]), to update; `None` otherwise.
    pub fn get_mut_public(&mut self, hash: &TxHash) -> Option<&mut AcceptedTx> {
        self.by_hash
            .get_mut(hash)
            .filter(|tx| tx.status == Status::Pending && tx.route.public)
    }

    /// What of `hash` must outlast the object's memory ([`RowProgress`]); `None` when it is not
    /// here.
    pub fn progress(&self, hash: &TxHash) -> Option<RowProgress> {
        self.by_hash.get(hash).map(|tx| RowProgress {
            resent: tx.resent,
            since_block: tx.route.since_block,
            public: tx.route.public,
            vouched: tx.vouched,
            taken_by: tx.route.taken_by,
            route_cancelled: tx.route.status == Some(RouteStatus::Cancelled),
        })
    }

    /// `hash`, read back from its row, takes what its row kept of it ([`RowProgress`]).
    pub fn restore_progress(&mut self, hash: &TxHash, progress: RowProgress) {
        if let Some(tx) = self.by_hash.get_mut(hash) {
            tx.resent = tx.resent.max(progress.resent);
            tx.route.since_block = tx.route.since_block.or(progress.since_block);
            tx.route.public |= progress.public;
            tx.vouched |= progress.vouched;
            if progress.taken_by.index().is_some() {
                tx.route.taken_by = progress.taken_by;
            }
            if progress.route_cancelled {
                tx.route.status = Some(RouteStatus::Cancelled);
            }
        }
    }

    /// Counts one more resend of `hash`; returns how many there were.
    pub fn resent(&mut self, hash: &TxHash) -> u32 {
        self.by_hash.get_mut(hash).map_or(0, |tx| {
            tx.resent += 1;
            tx.resent
        })
    }

    /// Sets a final status at `now_ms`; a replaced or expired one gives up its nonce. False when
    /// it is not here.
    pub fn finish(&mut self, hash: &TxHash, status: Status, now_ms: u64) -> bool {
        let Some(tx) = self.by_hash.get_mut(hash) else {
            return false;
        };
        tx.status = status;
        tx.final_ms = Some(now_ms);
        tx.vouched = matches!(status, Status::Included { .. });
        let nonce = tx.nonce;
        if !matches!(status, Status::Included { .. }) && self.by_nonce.get(&nonce) == Some(hash) {
            self.by_nonce.remove(&nonce);
        }
        true
    }

    /// Forgets `hash` (the upstream no longer has it, or its chain is gone). False when it was
    /// not here.
    pub fn forget(&mut self, hash: &TxHash) -> bool {
        let Some(tx) = self.by_hash.remove(hash) else {
            return false;
        };
        if self.by_nonce.get(&tx.nonce) == Some(hash) {
            self.by_nonce.remove(&tx.nonce);
        }
        true
    }

    /// Forgets everything; returns the hashes that left.
    pub fn clear(&mut self) -> Vec<TxHash> {
        self.by_nonce.clear();
        self.by_hash.drain().map(|(hash, _)| hash).collect()
    }

    /// At `now_ms`: final statuses older than `IDEMPOTENCY_TTL_S` are forgotten, pending ones
    /// older than `TRACK_TTL_S` expire, and the oldest final ones beyond [`MAX_ACCEPTED`] are
    /// forgotten.
    pub fn prune(&mut self, now_ms: u64) -> Pruned {
        let mut pruned = Pruned::default();
        let due: Vec<TxHash> = self
            .by_hash
            .iter()
            .filter(|(_, tx)| now_ms >= self.until_ms(tx))
            .map(|(hash, _)| *hash)
            .collect();
        for hash in due {
            let Some(tx) = self.by_hash.get(&hash).copied() else {
                continue;
            };
            if tx.status.is_final() {
                self.forget(&hash);
                pruned.gone.push(hash);
            } else {
                self.finish(&hash, Status::Expired, now_ms);
                pruned.expired.push((hash, tx));
            }
        }
        if self.by_hash.len() > MAX_ACCEPTED {
            // Only final ones: a pending one is still tracked (resent should the pool drop it).
            let mut oldest: Vec<(u64, TxHash)> = self
                .by_hash
                .iter()
                .filter(|(_, tx)| tx.status.is_final())
                .map(|(h, tx)| (tx.at_ms, *h))
                .collect();
            oldest.sort_unstable();
            let over = self.by_hash.len() - MAX_ACCEPTED;
            for (_, hash) in oldest.into_iter().take(over) {
                self.forget(&hash);
                pruned.gone.push(hash);
            }
        }
        pruned
    }

    /// When [`Accepted::prune`] next has something to do, Unix ms.
    pub fn next_due_ms(&self) -> Option<u64> {
        self.by_hash.values().map(|tx| self.until_ms(tx)).min()
    }
}

#[cfg(test)]
mod tests;
