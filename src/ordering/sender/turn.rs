//! The turn: who gets the lock and when, and the one due time of the whole sender.
//!
//! The lock goes to the waiting transaction with the lowest nonce (the earliest arrival among equal
//! nonces), so transactions that overtook each other on the way in leave in nonce order. Nothing
//! is granted while the sender's next nonce is unknown: a queue never sends above a nonce it does
//! not know to be filled, except a nonce above the known next one after it waited
//! `NONCE_GAP_WAIT_MS` for the missing ones (counted from its arrival, or from the last time the
//! queue learned of the gap, whichever is later); under `UPSTREAM_POOL=strict` it is refused then
//! instead (`nonce too high`), never sent. While the next nonce can't be learned, a
//! client's transaction waits at most `LOCK_MAX_HOLD_MS` and is then answered -32002, unsent.

use super::{
    tagged, Holding, Phase, PoolKind, Purpose, ReplacementPolicy, Sender, SessionKey, Stage,
};
use crate::metrics::Metric;
use crate::ordering::sender::{Action, LookupId, Query, Refusal, Row};

impl Sender {
    /// The lowest waiting transaction: (nonce, entry), the earliest arrival among equal nonces.
    pub(super) fn lowest_waiting(&self) -> Option<(u64, u64)> {
        self.entries
            .iter()
            .filter(|(_, e)| e.stage == Stage::Waiting)
            .map(|(&id, e)| (e.nonce, id))
            .min()
    }

    /// When the entry's wait for a missing lower nonce runs out, Unix ms.
    fn gap_deadline_ms(&self, arrived_ms: u64) -> u64 {
        arrived_ms
            .max(self.gap_opened_ms)
            .saturating_add(self.settings.gap_wait_ms)
    }

    /// Grants the lock while it is free and the lowest waiter may go.
    pub(super) fn advance(&mut self, now_ms: u64) {
        while self.holder.is_none() && !self.loading {
            let Some(next) = self.next else {
                return;
            };
            let Some((nonce, id)) = self.lowest_waiting() else {
                return;
            };
            let arrived_ms = self.entries[&id].arrived_ms;
            if nonce > next && now_ms < self.gap_deadline_ms(arrived_ms) {
                return;
            }
            self.grant(id, next, now_ms);
        }
    }

    /// The lock to entry `id`, with the sender's next nonce `next` known.
    fn grant(&mut self, id: u64, next: u64, now_ms: u64) {
        let Some(entry) = self.entries.get_mut(&id) else {
            return;
        };
        entry.stage = Stage::Holding;
        let (hash, nonce, arrived_ms, sync) =
            (entry.hash, entry.nonce, entry.arrived_ms, entry.sync);
        let request_id = entry.request_id.clone();
        if self.settings.replacement == ReplacementPolicy::Reject {
            // Accepted meanwhile by another transaction with this nonce.
            if let Some(holder) = self.nonce_holder(&hash, nonce, now_ms) {
                self.refuse(id, Refusal::Replacement { nonce, holder });
                return;
            }
        }
        if nonce > next && (sync || self.settings.pool == PoolKind::Strict) {
            // EIP-7966: a send-and-wait call is not added to the pool over a nonce gap; a strict
            // upstream would refuse it (on Hedera, a charged WRONG_NONCE).
            self.refuse_over_gap(id, next, false);
            return;
        }
        if nonce > next {
            self.counters.gap_waits_expired += 1;
            self.emit(tagged(
                Metric::new("gap_wait_expired", "", "missing_nonce")
                    .value("count", 1.0)
                    .value("waited_ms", now_ms.saturating_sub(arrived_ms) as f64)
                    .field("nonce", nonce)
                    .field("expected_nonce", next),
                &request_id,
            ));
        }
        let session_key = SessionKey::new();
        let deadline_ms = now_ms.saturating_add(self.settings.max_hold_ms);
        let mut holding = Holding {
            entry: id,
            session_key,
            acquired_ms: now_ms,
            expected: next,
            phase: Phase::Sending { deadline_ms },
            recoveries: 0,
        };
        if nonce < next {
            // A replacement, or a resend of a used nonce: is that nonce mined already, and does the
            // upstream have this very transaction? (On Hedera each send of a used nonce is a
            // charged WRONG_NONCE.)
            let lookup = LookupId(self.id());
            holding.phase = Phase::Checking(lookup);
            self.holder = Some(holding);
            self.lookups
                .insert(lookup, (Purpose::Holder(session_key), deadline_ms));
            self.push(Action::Lookup {
                id: lookup,
                query: Query {
                    latest: true,
                    hashes: vec![hash],
                    ..Query::default()
                },
                deadline_ms,
            });
        } else {
            self.holder = Some(holding);
            self.send(deadline_ms, now_ms);
        }
    }

    /// Entry `id`, above the sender's next nonce `next`, is refused without a send: a
    /// send-and-wait call with EIP-7966's code 6, any other with geth's `nonce too high` saying
    /// whether `next` was `refused` by the upstream or did not arrive in time.
    pub(super) fn refuse_over_gap(&mut self, id: u64, next: u64, refused: bool) {
        let Some(entry) = self.entries.get(&id) else {
            return;
        };
        let nonce = entry.nonce;
        let refusal = if entry.sync {
            Refusal::NonceGap {
                expected: next,
                nonce,
            }
        } else {
            Refusal::NonceTooHigh {
                next,
                nonce,
                refused,
            }
        };
        self.counters.gap_refused += 1;
        self.refuse(id, refusal);
    }

    /// The holder's transaction goes: stored first (unless it came from storage, where it is
    /// already), then sent with retries until `deadline_ms`.
    pub(super) fn send(&mut self, deadline_ms: u64, now_ms: u64) {
        let Some(holding) = self.holder.as_mut() else {
            return;
        };
        if self.settings.pool == PoolKind::Strict {
            let entry = holding.entry;
            let above = self.entries.get(&entry).map(|e| e.nonce);
            if above.is_some_and(|nonce| self.next.is_some_and(|next| nonce > next)) {
                // A force-released holder found missing while a lower nonce is missing too (the
                // pool dropped it): back to the queue behind it, with a new gap wait.
                self.holder = None;
                self.gap_opened_ms = now_ms;
                if let Some(e) = self.entries.get_mut(&entry) {
                    e.stage = Stage::Waiting;
                }
                return;
            }
        }
        holding.phase = Phase::Sending { deadline_ms };
        let session_key = holding.session_key;
        let Some(entry) = self.entries.get_mut(&holding.entry) else {
            return;
        };
        let (hash, nonce, request) = (entry.hash, entry.nonce, entry.request.clone());
        let request_id = entry.request_id.clone();
        let store = !entry.stored;
        entry.stored = true;
        if store {
            if !self.chain.persisted {
                if let Some(genesis) = self.chain.genesis.clone() {
                    self.chain.persisted = true;
                    self.push(Action::StoreChain(genesis));
                }
            }
            self.push(Action::Store(Row {
                hash,
                nonce,
                request: request.clone(),
                at_ms: now_ms,
            }));
        }
        self.push(Action::Send {
            session_key,
            hash,
            nonce,
            request,
            deadline_ms,
            request_id,
        });
    }

    /// What time alone ends: clients' waits for an unknown next nonce, lookups and holders that
    /// never reported back.
    pub(super) fn expire(&mut self, now_ms: u64) {
        if self.next.is_none() {
            let max_hold_ms = self.settings.max_hold_ms;
            let since = self.unknown_since_ms;
            let overdue: Vec<(u64, u64)> = self
                .entries
                .iter()
                .filter(|(_, e)| {
                    e.stage == Stage::Waiting
                        && !e.tickets.is_empty()
                        && now_ms >= e.arrived_ms.max(since).saturating_add(max_hold_ms)
                })
                .map(|(&id, e)| (id, now_ms.saturating_sub(e.arrived_ms)))
                .collect();
            for (id, waited_ms) in overdue {
                self.refuse(id, Refusal::NonceUnknown { waited_ms });
            }
        }
        let grace_ms = self.settings.grace_ms();
        let lost: Vec<LookupId> = self
            .lookups
            .iter()
            .filter(|(_, (_, deadline))| now_ms >= deadline.saturating_add(grace_ms))
            .map(|(&id, _)| id)
            .collect();
        for id in lost {
            self.on_lookup(id, Err("the lookup never reported back".into()), now_ms);
        }
        if let Some(holding) = self.holder {
            if let Phase::Sending { deadline_ms } = holding.phase {
                if now_ms >= deadline_ms.saturating_add(grace_ms) {
                    self.force_release(now_ms);
                }
            }
        }
    }

    /// The earliest time anything is due by time alone (see [`Sender::poll_timeout`]).
    pub(super) fn due_ms(&self) -> Option<u64> {
        let mut due: Option<u64> = None;
        let mut at = |t: u64| due = Some(due.map_or(t, |d| d.min(t)));
        if self.holder.is_none() && !self.loading {
            if let (Some(next), Some((nonce, id))) = (self.next, self.lowest_waiting()) {
                if nonce > next {
                    at(self.gap_deadline_ms(self.entries[&id].arrived_ms));
                }
            }
        }
        if self.next.is_none() {
            for e in self.entries.values() {
                if e.stage == Stage::Waiting && !e.tickets.is_empty() {
                    let since = e.arrived_ms.max(self.unknown_since_ms);
                    at(since.saturating_add(self.settings.max_hold_ms));
                }
            }
        }
        if self.nonces.running.is_none() && self.needs_nonces() {
            at(self.nonces.not_before_ms);
        }
        let grace_ms = self.settings.grace_ms();
        if let Some(Holding {
            phase: Phase::Sending { deadline_ms },
            ..
        }) = self.holder
        {
            at(deadline_ms.saturating_add(grace_ms));
        }
        for (_, deadline) in self.lookups.values() {
            at(deadline.saturating_add(grace_ms));
        }
        if let Some(track) = self.track_due_ms.filter(|_| !self.tracking) {
            at(track);
        }
        if let Some(prune) = self.accepted.next_due_ms() {
            at(prune);
        }
        due
    }
}
