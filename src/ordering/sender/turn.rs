//! The turn: who gets the lock and when, and the one table of deadlines of the whole sender.
//!
//! The lock goes to the waiting transaction with the lowest nonce (the earliest arrival among equal
//! nonces), so transactions that overtook each other on the way in leave in nonce order. Nothing
//! is granted while the sender's next nonce is unknown: a queue never sends above a nonce it does
//! not know to be filled, except a nonce above the known next one after it waited
//! `NONCE_GAP_WAIT_MS` for the missing ones (counted from its arrival, or from the last time the
//! queue learned of the gap, whichever is later); under `UPSTREAM_POOL=strict` it is refused then
//! instead (`nonce too high`), never sent. While the next nonce can't be learned, a
//! client's transaction waits at most `LOCK_MAX_HOLD_MS` and is then answered -32002, unsent.
//!
//! Every time-driven rule has one row in [`Sender::deadlines`] (quinn-proto's timer table), and
//! each row says what brings it back ([`Keeper`]): the object's in-memory timer for what happens
//! within a send's life (a waiter's or a holder's deadline, a lookup's, the gap wait, a nonce
//! lookup to start again) and for a busy sender's tracking check; the storage alarm for an idle
//! sender's tracking check; nothing for the accepted set's pruning, which runs at each event. The
//! machine's due time ([`Sender::poll_timeout`]) is the earliest of the timer's, so an object that
//! answered a lone transaction keeps no timer: in production a pending timer keeps a Durable Object
//! from hibernating, and it is billed for duration meanwhile (Durable Objects docs, "Lifecycle of a
//! Durable Object", "Pricing"; BENCHMARKS.md, "A lone transaction's bill"). [`Sender::expire`] acts
//! on those that came; a gap wait's end, a lookup to start again, the tracking check and the
//! pruning are acted on by the rules that run after it in each step.

use super::{tagged, Holding, Phase, PoolKind, ReplacementPolicy, Sender, SessionKey};
use crate::metrics::Metric;
use crate::ordering::queue::{Place, QueuedTxId, Stage};
use crate::ordering::sender::{Action, LookupError, LookupId, Query, Refusal, Row};

/// What a deadline is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Deadline {
    /// A client's transaction has waited `LOCK_MAX_HOLD_MS` for a next nonce that can't be
    /// learned: refused, unsent.
    NonceUnknown(QueuedTxId),
    /// A lookup never reported back by its deadline and grace: it failed.
    LookupLost(LookupId),
    /// A holder (its session key) never reported back by its deadline and grace:
    /// force-released.
    HolderLost(SessionKey),
    /// The lowest waiter's wait for a missing lower nonce runs out ([`Sender::advance`]).
    GapWait,
    /// The nonce lookup may start again after a failure ([`Sender::want_nonces`]).
    NonceRetry,
    /// The tracking check is due ([`Sender::want_track`]).
    Track,
    /// Accepted transactions leave the window or expire (the step's pruning).
    Prune,
}

/// What brings a deadline back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Keeper {
    /// The object's in-memory timer ([`Sender::poll_timeout`]): the object stays in memory, and
    /// billed, until it fires.
    Timer,
    /// The storage alarm ([`Sender::keep_alarm`] sets it): the object may hibernate, or be
    /// evicted, meanwhile.
    Alarm,
    /// Nothing: it is acted on at the next event, whatever it is (a hibernated object forgot it
    /// anyway).
    Event,
}

impl Sender {
    /// When the entry's wait for a missing lower nonce runs out, Unix ms.
    fn gap_deadline_ms(&self, arrived_ms: u64) -> u64 {
        arrived_ms
            .max(self.nonces.gap_opened_ms)
            .saturating_add(self.settings.gap_wait_ms)
    }

    /// The one table: every deadline the sender has now, with its time (Unix ms).
    pub(super) fn deadlines(&self) -> Vec<(Deadline, u64)> {
        let mut table = Vec::new();
        let grace_ms = self.settings.grace_ms();
        if self.nonces.next.is_none() {
            for (id, e) in self.queue.iter() {
                if e.stage() == Stage::Waiting && e.has_clients() {
                    let since = e.arrived_ms.max(self.nonces.unknown_since_ms);
                    table.push((
                        Deadline::NonceUnknown(id),
                        since.saturating_add(self.settings.max_hold_ms),
                    ));
                }
            }
        }
        for (&id, (_, deadline)) in &self.lookups {
            table.push((Deadline::LookupLost(id), deadline.saturating_add(grace_ms)));
        }
        for holding in &self.holders {
            if let Phase::Sending { deadline_ms } = holding.phase {
                table.push((
                    Deadline::HolderLost(holding.session_key),
                    deadline_ms.saturating_add(grace_ms),
                ));
            }
        }
        if self.holders.is_empty() && !self.storage.loading {
            if let (Some(next), Some(place)) = (self.nonces.next, self.queue.lowest_waiting()) {
                if place.nonce > next {
                    let arrived_ms = self.queue.get(place.entry).map_or(0, |e| e.arrived_ms);
                    table.push((Deadline::GapWait, self.gap_deadline_ms(arrived_ms)));
                }
            }
        }
        if self.nonces.lookup.running.is_none() && self.needs_nonces() {
            table.push((Deadline::NonceRetry, self.nonces.lookup.not_before_ms));
        }
        if let Some(due) = self.tracking.due_ms.filter(|_| !self.tracking.running) {
            table.push((Deadline::Track, due));
        }
        if let Some(prune) = self.accepted.next_due_ms() {
            table.push((Deadline::Prune, prune));
        }
        table
    }

    /// Whether the object has work in memory that its timer serves anyway: transactions queued
    /// or being sent, or lookups under way.
    fn busy(&self) -> bool {
        !self.queue.is_empty() || !self.holders.is_empty() || !self.lookups.is_empty()
    }

    /// What brings `deadline` back (see [`Keeper`]): the tracking check is the timer's only while
    /// the sender is busy, otherwise the storage alarm's.
    pub(super) fn keeper(&self, deadline: Deadline) -> Keeper {
        match deadline {
            Deadline::NonceUnknown(_)
            | Deadline::LookupLost(_)
            | Deadline::HolderLost(_)
            | Deadline::GapWait
            | Deadline::NonceRetry => Keeper::Timer,
            Deadline::Track if self.busy() => Keeper::Timer,
            Deadline::Track => Keeper::Alarm,
            Deadline::Prune => Keeper::Event,
        }
    }

    /// The earliest time the in-memory timer has something to do (see [`Sender::poll_timeout`]).
    pub(super) fn due_ms(&self) -> Option<u64> {
        self.deadlines()
            .into_iter()
            .filter(|(deadline, _)| self.keeper(*deadline) == Keeper::Timer)
            .map(|(_, at)| at)
            .min()
    }

    /// What time alone ends, from the table: clients' waits for an unknown next nonce, lookups
    /// and holders that never reported back.
    pub(super) fn expire(&mut self, now_ms: u64) {
        for (deadline, at) in self.deadlines() {
            if at > now_ms {
                continue;
            }
            match deadline {
                Deadline::NonceUnknown(id) => {
                    let arrived_ms = self.queue.get(id).map_or(now_ms, |e| e.arrived_ms);
                    let waited_ms = now_ms.saturating_sub(arrived_ms);
                    self.refuse(id, Refusal::NonceUnknown { waited_ms });
                }
                Deadline::LookupLost(id) => {
                    self.on_lookup(id, Err(LookupError::NeverReported), now_ms)
                }
                Deadline::HolderLost(key) => {
                    let grace_ms = self.settings.grace_ms();
                    if let Some(Holding {
                        phase: Phase::Sending { deadline_ms },
                        ..
                    }) = self.holding(key)
                    {
                        if now_ms >= deadline_ms.saturating_add(grace_ms) {
                            self.force_release(key, now_ms);
                        }
                    }
                }
                Deadline::GapWait | Deadline::NonceRetry | Deadline::Track | Deadline::Prune => {}
            }
        }
    }

    /// Grants the lock while it is free and the lowest waiter may go, and widens the send window
    /// while the lowest waiter may join it.
    pub(super) fn advance(&mut self, now_ms: u64) {
        while !self.storage.loading {
            let Some(next) = self.nonces.next else {
                return;
            };
            let Some(place) = self.queue.lowest_waiting() else {
                return;
            };
            if self.holders.is_empty() {
                let arrived_ms = self.queue.get(place.entry).map_or(0, |e| e.arrived_ms);
                if place.nonce > next && now_ms < self.gap_deadline_ms(arrived_ms) {
                    return;
                }
                self.grant(place.entry, next, false, now_ms);
            } else if self.joins_window(place, next) {
                self.grant(place.entry, next, true, now_ms);
            } else {
                return;
            }
        }
    }

    /// Whether the lowest waiter `place` may be sent now, behind the holders still sending
    /// (`SEND_WINDOW`, never under `UPSTREAM_POOL=strict`): the window has room; every holder's
    /// bytes are with the upstream (none is being checked or recovered); the holders hold every
    /// nonce from the next one `next` up, and its nonce is the one right above theirs (no gap
    /// and no replacement is ever sent ahead); and it is neither a send-and-wait call (EIP-7966:
    /// not added to a pool over a gap, and the nonce below it is not in yet) nor a member the
    /// upstream refused for a gap below it.
    fn joins_window(&self, place: Place, next: u64) -> bool {
        if self.holders.len() >= self.settings.window()
            || !self
                .holders
                .iter()
                .all(|h| matches!(h.phase, Phase::Sending { .. }))
        {
            return false;
        }
        let highest = self.holders.iter().map(|h| h.nonce).max();
        // No gap below it: every nonce from the next one up to the highest holder's is held (a
        // member refused inside the window stops it widening; those above wait as they would).
        let unbroken = highest.is_some_and(|highest| {
            (next..=highest).all(|n| self.holders.iter().any(|h| h.nonce == n))
        });
        // A member the upstream refused for a gap below it waits until the nonces below are
        // answered.
        let held_back = self
            .queue
            .get(place.entry)
            .is_none_or(|e| e.tx.method.is_sync() || e.refused_ahead);
        unbroken
            && highest.and_then(|n| n.checked_add(1)) == Some(place.nonce)
            && place.nonce >= next
            && !held_back
    }

    /// The lock to entry `id`, with the sender's next nonce `next` known; `ahead`: behind holders
    /// still sending ([`Sender::joins_window`]).
    fn grant(&mut self, id: QueuedTxId, next: u64, ahead: bool, now_ms: u64) {
        let Some(entry) = self.queue.get(id) else {
            return;
        };
        let (hash, nonce, arrived_ms, sync) = (
            entry.hash(),
            entry.nonce(),
            entry.arrived_ms,
            entry.tx.method.is_sync(),
        );
        let request_id = entry.request_id.clone();
        self.queue.set_stage(id, Stage::Granted);
        if self.settings.replacement == ReplacementPolicy::Reject {
            // Accepted meanwhile by another transaction with this nonce.
            if let Some(holder) = self.nonce_holder(&hash, nonce, now_ms) {
                self.refuse(id, Refusal::Replacement { nonce, holder });
                return;
            }
        }
        if nonce > next && !ahead && (sync || self.settings.pool == PoolKind::Strict) {
            // EIP-7966: a send-and-wait call is not added to the pool over a nonce gap; a strict
            // upstream would refuse it (on Hedera, a charged WRONG_NONCE).
            self.refuse_over_gap(id, next, false);
            return;
        }
        if nonce > next && !ahead {
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
            nonce,
            session_key,
            acquired_ms: now_ms,
            expected: next,
            ahead,
            phase: Phase::Sending { deadline_ms },
            recoveries: 0,
        };
        if nonce < next {
            // A replacement, or a resend of a used nonce: is that nonce mined already, and does the
            // upstream have this very transaction? (On Hedera each send of a used nonce is a
            // charged WRONG_NONCE.)
            let query = Query {
                latest: true,
                hashes: vec![hash],
                ..Query::default()
            };
            let lookup = self.ask(super::Purpose::Holder(session_key), query, deadline_ms);
            holding.phase = Phase::Checking(lookup);
            self.holders.push(holding);
        } else {
            self.holders.push(holding);
            self.send(id, deadline_ms, now_ms);
        }
    }

    /// Entry `id`, above the sender's next nonce `next`, is refused without a send: a
    /// send-and-wait call with EIP-7966's code 6, any other with geth's `nonce too high` saying
    /// whether `next` was `refused` by the upstream or did not arrive in time.
    pub(super) fn refuse_over_gap(&mut self, id: QueuedTxId, next: u64, refused: bool) {
        let Some(entry) = self.queue.get(id) else {
            return;
        };
        let nonce = entry.nonce();
        let refusal = if entry.tx.method.is_sync() {
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

    /// Holder `id`'s transaction goes: stored first (unless it came from storage, where it is
    /// already), then sent with retries until `deadline_ms`.
    pub(super) fn send(&mut self, id: QueuedTxId, deadline_ms: u64, now_ms: u64) {
        let Some(at) = self.holders.iter().position(|h| h.entry == id) else {
            return;
        };
        let Some(next) = self.nonces.next else {
            // The next nonce became unknown since the grant (another window member's answer):
            // nothing is sent on a guessed nonce; back to the queue until it is learned.
            self.holders.remove(at);
            self.queue.set_stage(id, Stage::Waiting);
            return;
        };
        let holding = self.holders[at];
        // A window member sent ahead is sent (again: a force-released one found missing) only
        // while every nonce below it from the next one is still with the upstream.
        let window_gone = holding.ahead
            && !(next..holding.nonce).all(|n| {
                self.holders.iter().any(|h| {
                    h.nonce == n
                        && h.entry != holding.entry
                        && matches!(h.phase, Phase::Sending { .. })
                })
            });
        if holding.nonce > next && (holding.nonce <= holding.expected || window_gone) {
            // Not above the next nonce when it was granted, above it now: a checked nonce below
            // the next one, or a force-released holder found missing, while the upstream's count
            // showed a lower nonce missing (a pool that dropped it, or kept it queued above a
            // gap); or a window member whose lower members are no longer being sent (answered
            // without going in, or lost with a restart). It was never let wait for that gap:
            // back to the queue behind it, with a new gap wait (under UPSTREAM_POOL=strict it is
            // then refused, never sent).
            self.holders.remove(at);
            self.nonces.gap_opened_ms = now_ms;
            self.queue.set_stage(id, Stage::Waiting);
            return;
        }
        let holding = &mut self.holders[at];
        holding.phase = Phase::Sending { deadline_ms };
        let session_key = holding.session_key;
        let Some(entry) = self.queue.get_mut(id) else {
            return;
        };
        let tx = entry.tx.clone();
        let request_id = entry.request_id.clone();
        let store = !entry.stored;
        entry.stored = true;
        if store {
            if !self.storage.chain.persisted {
                if let Some(genesis) = self.storage.chain.genesis.clone() {
                    self.storage.chain.persisted = true;
                    self.push(Action::StoreChain(genesis));
                }
            }
            self.push(Action::Store(Row {
                tx: tx.clone(),
                at_ms: now_ms,
            }));
        }
        self.push(Action::Send {
            session_key,
            tx,
            deadline_ms,
            request_id,
        });
    }
}
