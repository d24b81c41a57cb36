//! Admission: what becomes of a transaction that arrives at its sender's object.
//!
//! In order: a copy of a hash the object holds joins it and gets its answer; an accepted hash known
//! to be in a block is answered with its hash, a pending one is asked by hash first (the pool may
//! have dropped it: then it is sent again); a
//! nonce below the mined count is asked by hash before it is refused as stale (a resend of a
//! mined transaction gets its hash; eRPC does the same since its PR #703); a replacement of an
//! accepted nonce is refused under `REPLACEMENT_POLICY=reject`, after the mined count is asked (a
//! nonce mined since is refused as too low, as geth words it); the queue bound refuses the
//! highest nonce waiting, never one that would go now or that is below every waiter; anything
//! else waits for the lock.
//!
//! A refusal for a bound never opens a gap: a nonce refused for one while it was free (nothing
//! holds or waits with it) is a hole, and every client transaction of the sender above it is
//! refused too, those waiting and those that arrive ([`Refusal::AboveRefused`], with the bound's
//! `Retry-After`), until a transaction with that nonce is taken, or the upstream's counts (asked
//! again at most every [`HOLE_RECHECK_MS`] while arrivals above it are refused) show it used.
//! Taken above the hole, a transaction would be sent after its gap wait and sit in the pool above
//! a nonce that may never come (on a strict upstream, be refused); refused, its client sends the
//! missing one again first, and everything goes in.

use super::{tagged, Hole, Purpose, ReplacementPolicy, Sender};
use crate::jsonrpc::Answer;
use crate::metrics::Metric;
use crate::ordering::accepted::{Status, MAX_ACCEPTED};
use crate::ordering::queue::{Check, QueuedTx, QueuedTxId, Stage};
use crate::ordering::route_status::RouteStatus;
use crate::ordering::sender::{Arrival, Found, Outcome, Query, Refusal, Seen, Ticket};
use crate::transaction::TxHash;
use std::rc::Rc;

/// While client transactions above a hole are refused, how often the upstream's counts are asked
/// whether its nonce was used meanwhile (sent around the relay), ms.
pub const HOLE_RECHECK_MS: u64 = 5_000;

impl Sender {
    /// A client's transaction. See the module documentation.
    pub(super) fn admit(&mut self, ticket: Ticket, arrival: Arrival, now_ms: u64) {
        let Arrival { tx, request_id } = arrival;
        if let Some(id) = self.queue.find(&tx.hash) {
            if let Some(entry) = self.queue.get_mut(id) {
                entry.tickets.push(ticket);
                self.deduplicated(tx.nonce, &tx.hash, "in_flight", &request_id);
                return;
            }
        }
        // Known to be in a block: its hash at once. Accepted and pending (it may have been dropped
        // since), or read back after a restart: asked by hash first. The upstream is the truth,
        // and a hash it still has costs no send.
        let accepted = self.accepted.get(&tx.hash, now_ms);
        if accepted.is_some_and(|tx| matches!(tx.status, Status::Included { .. })) {
            self.deduplicated(tx.nonce, &tx.hash, "accepted", &request_id);
            self.answer(&[ticket], &Answer::hash(&tx.hash), None);
            return;
        }
        // Cancelled at the private route by its sender (or its cancel is out): never sent again,
        // anywhere.
        if accepted.is_some_and(|tx| tx.status == Status::Cancelled) || self.is_cancelling(&tx.hash)
        {
            self.deduplicated(tx.nonce, &tx.hash, "cancelled", &request_id);
            let refusal = Refusal::Cancelled.to_rpc(self.address());
            self.answer(&[ticket], &Answer::error(&refusal), None);
            return;
        }
        let mut entry = QueuedTx::new(tx, now_ms, request_id);
        entry.tickets.push(ticket);
        let id = self.queue.insert(entry);
        if accepted.is_some_and(|tx| !tx.status.is_final()) {
            self.start_check(id, Check::Accepted, now_ms);
        } else {
            self.screen(id, now_ms);
        }
    }

    pub(super) fn deduplicated(
        &mut self,
        nonce: u64,
        hash: &TxHash,
        label: &str,
        request_id: &Option<Rc<str>>,
    ) {
        self.counters.deduplicated += 1;
        self.emit(tagged(
            Metric::new("tx_deduplicated", "", label)
                .value("count", 1.0)
                .field("nonce", nonce)
                .field("tx_hash", crate::hex::encode(hash)),
            request_id,
        ));
    }

    /// The checks of a transaction the object does not hold: stale, replacement, the bound.
    /// Passed, it waits for the lock.
    fn screen(&mut self, id: QueuedTxId, now_ms: u64) {
        let Some(entry) = self.queue.get(id) else {
            return;
        };
        let (hash, nonce) = (entry.hash(), entry.nonce());
        if let Some(too_large) = entry.tx.unstorable() {
            self.refuse(id, Refusal::TooLarge(too_large));
            return;
        }
        if self.nonces.mined.is_some_and(|mined| nonce < mined) {
            self.start_check(id, Check::Stale, now_ms);
            return;
        }
        if let Some(refusal) = self.above_hole(nonce, now_ms) {
            self.refuse(id, refusal);
            return;
        }
        if let Some(holder) = self.nonce_holder(&hash, nonce, now_ms) {
            if self.settings.replacement == ReplacementPolicy::Reject {
                self.start_check(id, Check::Replacement { holder }, now_ms);
                return;
            }
            self.counters.replacements += 1;
        }
        let tracking = self.settings.track_interval_ms > 0;
        if tracking
            && self.accepted.get(&hash, now_ms).is_none()
            && self.accepted.is_full(self.nonces.mined)
        {
            // As many outstanding as it follows: none may be forgotten to make room.
            self.refuse(id, Refusal::TrackedFull { max: MAX_ACCEPTED });
            return;
        }
        self.queue.set_stage(id, Stage::Waiting);
        self.bound();
    }

    /// Whether `nonce` is free at `now_ms`: not below the next or mined nonce as known, no
    /// accepted transaction holds it, and none waits or is sent with it.
    fn nonce_free(&self, nonce: u64, now_ms: u64) -> bool {
        self.nonces.next.is_none_or(|next| nonce >= next)
            && self.nonces.mined.is_none_or(|mined| nonce >= mined)
            && self.accepted.with_nonce(nonce, now_ms).is_none()
            && !self.queue.iter().any(|(_, e)| e.nonce() == nonce)
    }

    /// Nonce `nonce` was refused for a bound (`refusal`) at `at_ms`: while it is free, it is a
    /// hole (the lowest one is kept), and every client transaction waiting above it is refused
    /// too.
    pub(super) fn open_hole(&mut self, nonce: u64, refusal: Refusal, at_ms: u64) {
        if !self.nonce_free(nonce, at_ms) {
            return;
        }
        let hole = match self.nonces.hole {
            Some(hole) if hole.nonce <= nonce => hole,
            _ => Hole {
                nonce,
                retry_after_s: refusal.retry_after_s().unwrap_or(1),
                checked_ms: None,
            },
        };
        self.nonces.hole = Some(hole);
        let above: Vec<(QueuedTxId, u64)> = self
            .queue
            .waiting()
            .filter(|place| place.nonce > hole.nonce)
            .filter(|place| {
                self.queue
                    .get(place.entry)
                    .is_some_and(QueuedTx::has_clients)
            })
            .map(|place| (place.entry, place.nonce))
            .collect();
        for (id, nonce) in above {
            self.refuse(id, hole.refused_above(nonce));
        }
    }

    /// The refusal of a client transaction with `nonce` above the sender's hole, if there is one
    /// still free at `now_ms`; a hole found filled is closed. While it refuses, the counts are
    /// asked again every [`HOLE_RECHECK_MS`] (a nonce sent around the relay fills it too).
    fn above_hole(&mut self, nonce: u64, now_ms: u64) -> Option<Refusal> {
        let mut hole = self.nonces.hole?;
        if !self.nonce_free(hole.nonce, now_ms) {
            self.nonces.hole = None;
            return None;
        }
        if nonce <= hole.nonce {
            return None;
        }
        let due = hole
            .checked_ms
            .is_none_or(|at| now_ms >= at.saturating_add(HOLE_RECHECK_MS));
        if due && self.nonces.lookup.running.is_none() {
            hole.checked_ms = Some(now_ms);
            self.nonces.hole = Some(hole);
            self.start_nonces(now_ms);
        }
        Some(hole.refused_above(nonce))
    }

    /// The hash of another accepted transaction with this nonce, not known to be mined.
    pub(super) fn nonce_holder(&self, hash: &TxHash, nonce: u64, now_ms: u64) -> Option<TxHash> {
        if self.nonces.mined.is_some_and(|mined| nonce < mined) {
            return None;
        }
        self.accepted
            .with_nonce(nonce, now_ms)
            .filter(|holder| holder != hash)
    }

    /// `MAX_QUEUE_PER_SENDER`: with more clients' transactions waiting than the bound (the
    /// newcomer counted), the one with the highest nonce (the latest arrival among equal nonces)
    /// is refused with -32005 and `Retry-After`, before any send; then `MAX_SENDER_BYTES` the
    /// same way, by the bytes of every transaction the object holds. The lowest nonce waiting,
    /// the one that would be granted next, is never refused.
    fn bound(&mut self) {
        let waiting: Vec<QueuedTxId> = self
            .queue
            .waiting()
            .filter(|place| {
                self.queue
                    .get(place.entry)
                    .is_some_and(QueuedTx::has_clients)
            })
            .map(|place| place.entry)
            .collect();
        let over = waiting.len().saturating_sub(self.settings.max_queue);
        for &id in waiting.iter().skip(1).rev().take(over) {
            self.counters.queue_full += 1;
            self.refuse(
                id,
                Refusal::QueueFull {
                    max: self.settings.max_queue,
                },
            );
        }
        // `MAX_SENDER_BYTES`: every entry's bytes count (holders and checks too); the highest
        // nonces waiting leave until the rest fit, never the lowest one waiting.
        let max = self.settings.max_bytes;
        let mut bytes = self.queue.bytes();
        for &id in waiting.iter().skip(1).rev().skip(over) {
            if bytes <= max {
                break;
            }
            bytes -= self.queue.get(id).map_or(0, |e| e.tx.raw.len() as u64);
            self.counters.queue_full += 1;
            self.refuse(id, Refusal::BytesFull { max });
        }
    }

    /// Asks the upstream whether it has the entry's hash before deciding.
    fn start_check(&mut self, id: QueuedTxId, check: Check, now_ms: u64) {
        let Some(hash) = self.queue.get(id).map(QueuedTx::hash) else {
            return;
        };
        let deadline_ms = now_ms.saturating_add(self.settings.max_hold_ms);
        // Behind a private route a copy of an accepted one is sent again only on the route's word
        // that it dropped it: asked beside.
        let ask_route = self.settings.private_route
            && self.settings.route_status
            && matches!(check, Check::Accepted);
        let query = Query {
            hashes: vec![hash],
            // A replacement's nonce may have been mined since the count was learned.
            latest: matches!(check, Check::Replacement { .. }),
            route_statuses: if ask_route { vec![hash] } else { Vec::new() },
            ..Query::default()
        };
        let lookup = self.ask(Purpose::Admit(id), query, deadline_ms);
        self.queue.set_stage(id, Stage::Admitting(lookup, check));
    }

    /// The answer to an entry's check by hash: the upstream has it (its hash, no send); it does
    /// not (a stale nonce is refused; an accepted hash it forgot is admitted anew, and kept as
    /// the relay's own until it is sent again); the upstream could not be asked (a stale nonce is
    /// refused as unchecked, -32002; an accepted hash is answered from memory).
    pub(super) fn on_entry_check(&mut self, id: QueuedTxId, outcome: Outcome, now_ms: u64) {
        let Some(entry) = self.queue.get(id) else {
            return;
        };
        let Stage::Admitting(_, check) = entry.stage() else {
            return;
        };
        let (hash, nonce) = (entry.hash(), entry.nonce());
        let found = outcome.ok();
        let seen = found
            .as_ref()
            .and_then(|found: &Found| found.known.get(&hash).copied());
        let known = seen.map(|seen| seen != Seen::Missing);
        let latest = found.as_ref().and_then(|found| found.latest);
        if self.settings.private_route && known == Some(false) && check == Check::Accepted {
            // The read node never holds a private one: the route's word decides.
            match self.route_word(&hash, found.as_ref()) {
                // (One published too stays pending: held below, its hash answered.)
                Some(RouteStatus::Cancelled) if self.route_cancelled(&hash, nonce, now_ms) => {
                    self.refuse(id, Refusal::Cancelled);
                    return;
                }
                // Dropped: sent again below, as a copy the upstream forgot.
                Some(status) if status.dropped() => {}
                // Held, in a block, or no word (no status URL, or it could not be asked): the
                // relay holds it; nothing is sent again on a guess.
                _ => {
                    if let Some(e) = self.queue.remove(id) {
                        self.deduplicated(nonce, &hash, "route", &e.request_id);
                        self.answer(&e.tickets, &Answer::hash(&hash), None);
                    }
                    return;
                }
            }
        }
        match (known, check) {
            (Some(true), _) | (None, Check::Accepted) => {
                let entry = self.queue.remove(id);
                let terms = entry.as_ref().map(|e| e.tx.terms()).unwrap_or_default();
                let pruned = self
                    .accepted
                    .record(hash, nonce, now_ms, known.is_some(), terms);
                self.pruned(pruned, now_ms);
                if let Some(Seen::Included { block }) = seen {
                    self.included(&hash, &block, now_ms);
                }
                if let Some(e) = entry {
                    self.deduplicated(nonce, &hash, "upstream", &e.request_id);
                    self.answer(&e.tickets, &Answer::hash(&hash), None);
                }
            }
            (Some(false), Check::Stale) => {
                self.counters.stale_refused += 1;
                let mined = self.nonces.mined.unwrap_or(nonce + 1).max(nonce + 1);
                self.refuse(id, Refusal::Stale { mined, nonce });
            }
            (Some(false), Check::Accepted) => {
                // The upstream forgot it: the client's copy waits like any transaction, and the
                // relay keeps its own, no longer vouched for (should the copy be refused unsent,
                // the stored one is checked again and sent from its bytes: `refuse`).
                let terms = self.queue.get(id).map(|e| e.tx.terms()).unwrap_or_default();
                let pruned = self.accepted.record(hash, nonce, now_ms, false, terms);
                self.pruned(pruned, now_ms);
                self.screen(id, now_ms);
            }
            (None, Check::Stale) => self.refuse(id, Refusal::CheckFailed { nonce }),
            (_, Check::Replacement { holder }) => match latest {
                // Mined since: too low (geth's wording, which wallets match), not a replacement.
                Some(mined) if nonce < mined => {
                    self.nonces.mined = self.nonces.mined.max(Some(mined));
                    self.counters.stale_refused += 1;
                    self.refuse(id, Refusal::Stale { mined, nonce });
                }
                _ => {
                    self.counters.replacements += 1;
                    self.refuse(id, Refusal::Replacement { nonce, holder });
                }
            },
        }
    }
}
