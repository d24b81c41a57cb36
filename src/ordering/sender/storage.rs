//! The object's storage and its alarm: the alarm set while durable work is under way or
//! transactions are tracked, the storage vacated when nothing is left, and the rows pruning
//! frees deleted.

use super::{Action, Sender, TakenBy};
use crate::metrics::Metric;
use crate::ordering::accepted::Pruned;
use crate::transaction::TxHash;

impl Sender {
    /// Releases the rows of `hashes`, whose nonces are used in a block ([`Action::Release`]),
    /// but for those in the queue (see [`Sender::forget_rows`]).
    pub(super) fn release_rows(&mut self, mut hashes: Vec<TxHash>) {
        hashes.retain(|hash| self.queue.find(hash).is_none() && !self.tombstones.contains(hash));
        if !hashes.is_empty() {
            self.push(Action::Release(hashes));
        }
    }

    /// Keeps what tracking learned of `hash` in its row ([`Action::Progress`]): it outlasts the
    /// object's memory.
    pub(super) fn keep_progress(&mut self, hash: &TxHash) {
        if let Some(progress) = self.accepted.progress(hash) {
            self.push(Action::Progress(*hash, progress));
        }
    }

    /// A send of `hash` went in: behind a private route, whose pool the read node never sees,
    /// that the route took it, and which route (`route`, its position in `UPSTREAM_SEND_URL`,
    /// [`TakenBy`]), is kept in its row, so a new instance (a wake, a restart) does not send it
    /// to the route again and asks its status there first.
    pub(super) fn route_took(&mut self, hash: &TxHash, route: Option<usize>) {
        if !self.settings.private_route {
            return;
        }
        if let (Some(index), Some(track)) = (route, self.accepted.route_mut(hash)) {
            track.taken_by = TakenBy::route(index);
        }
        self.keep_progress(hash);
    }

    /// Deletes the rows of `hashes`, but for those in the queue: a transaction waiting or being
    /// sent (a client's copy of a replaced transaction, the relay's own resend) needs its bytes
    /// until it leaves the queue, and went in, must be found after a restart and sent again
    /// should the pool drop it.
    pub(super) fn forget_rows(&mut self, mut hashes: Vec<TxHash>) {
        // A tombstone's row stays until its nonce is used ([`Sender::unbury`]).
        hashes.retain(|hash| self.queue.find(hash).is_none() && !self.tombstones.contains(hash));
        if !hashes.is_empty() {
            self.push(Action::Forget(hashes));
        }
    }

    /// Whether durable work is under way, work an evicted object must come back to: a stored
    /// transaction queued or being sent, stored transactions to check or to load. Waiters and
    /// lookups alone are not: their clients' requests end with the object, and a read (a
    /// pending-count question, a transaction's status) must not write to storage (the alarm is
    /// storage).
    fn durable(&self) -> bool {
        self.queue.iter().any(|(_, e)| e.stored) || self.storage.unverified || self.storage.loading
    }

    /// The storage alarm at the earliest time it is wanted: while durable work is under way, a
    /// backstop one maximum hold and its grace ahead, or one tracking interval when that is
    /// sooner (a stored transaction is tracked once accepted, and its first check rides this
    /// alarm: [`Sender::keep_tracking`]; an alarm already set serves); while transactions are
    /// tracked, the next tracking check. Set only when none is set, an earlier one is wanted, or
    /// the one set is past its time without having fired here (each set is a billed write);
    /// deleted when nothing is wanted. While the alarm's handler runs nothing is set (see
    /// [`Sender::alarm`]).
    pub(super) fn keep_alarm(&mut self, now_ms: u64) {
        if self.in_alarm {
            return;
        }
        let backstop = self.durable().then(|| {
            if self.alarm_until_ms > now_ms {
                self.alarm_until_ms
            } else {
                let hold = self
                    .settings
                    .max_hold_ms
                    .saturating_add(self.settings.grace_ms());
                let first_check = match self.settings.track_interval_ms {
                    0 => hold,
                    interval => interval,
                };
                now_ms.saturating_add(hold.min(first_check))
            }
        });
        let wanted = match (backstop, self.tracking.due_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // An alarm whose time passed without firing here (lost, or not delivered yet) is not
        // trusted: the wanted one is set again.
        let lapsed = self.alarm_until_ms != 0 && self.alarm_until_ms <= now_ms;
        match wanted {
            Some(at) if self.alarm_until_ms == 0 || lapsed || at < self.alarm_until_ms => {
                self.alarm_until_ms = at;
                self.push(Action::Alarm(Some(at)));
            }
            None if self.alarm_until_ms != 0 => {
                self.alarm_until_ms = 0;
                self.push(Action::Alarm(None));
            }
            _ => {}
        }
    }

    /// With nothing queued, in flight, tracked or stored left, the object's storage goes (the
    /// chain's genesis hash and the sender with it, and the alarm: no `deleteAlarm` follows): a
    /// sender seen once costs nothing for good. A cancel's tombstone stays (its row, no alarm)
    /// until its nonce is used.
    pub(super) fn keep_storage(&mut self) {
        if self.storage.chain.persisted
            && self.is_quiet()
            && !self.accepted.has_pending()
            && self.tombstones.is_empty()
        {
            self.storage.chain.persisted = false;
            // The alarm goes with the storage (`deleteAll`, compatibility date 2026-02-24 on).
            self.alarm_until_ms = 0;
            self.push(Action::Vacate);
        }
    }

    /// Carries out what pruning the accepted set did: rows no longer needed are deleted, expired
    /// ones reported.
    pub(super) fn pruned(&mut self, pruned: Pruned, now_ms: u64) {
        // A replacement the upstream accepted took an accepted transaction's nonce: the one
        // replaced is never sent again, and says so (`GET /tx` shows it `replaced`).
        for (hash, nonce, by) in &pruned.replaced {
            self.emit(
                Metric::new("tx_replaced", "", "replacement_accepted")
                    .value("count", 1.0)
                    .field("nonce", *nonce)
                    .field("tx_hash", crate::hex::encode(hash))
                    .field("replaced_by", crate::hex::encode(by)),
            );
        }
        self.forget_rows(pruned.gone);
        let mut rows = Vec::new();
        let expired = pruned.expired.into_iter().map(|e| ("track_ttl", e));
        let over_bytes = pruned.over_bytes.into_iter().map(|e| ("tracked_bytes", e));
        let over_count = pruned
            .over_count
            .into_iter()
            .map(|e| ("untracked_bound", e));
        // Every give-up is logged, with why.
        for (why, (hash, tx)) in expired.chain(over_bytes).chain(over_count) {
            self.counters.expired += 1;
            self.emit(
                Metric::new("tx_expired", "", why)
                    .value("count", 1.0)
                    .value("tracked_ms", now_ms.saturating_sub(tx.at_ms) as f64)
                    .field("nonce", tx.nonce)
                    .field("resent", tx.resent)
                    .field("tx_hash", crate::hex::encode(&hash)),
            );
            rows.push(hash);
        }
        self.forget_rows(rows);
    }
}
