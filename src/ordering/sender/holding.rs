//! The holding: the holder's check, its send's final answer, late answers, and force release.
//!
//! The holder's answer is released the moment it is recorded: every copy gets it, the accepted
//! hash joins the set, and the lock passes on with the answer's effect on the next nonce
//! ([`NonceEffect`]): advanced, kept (the waiters above get a new gap wait, so a corrected
//! transaction can take the nonce; under `UPSTREAM_POOL=strict` a terminal refusal refuses
//! them at once instead, unsent), or learned anew. Lookups and cleanup that follow are actions
//! of their own; nobody's answer waits for them.
//!
//! Each holding has its own session key. An answer under a key that is no longer the holder's
//! (its holder was force-released) is late: it answers nobody, but what it learned is kept (the
//! hash accepted, the nonce used), and a resend of that hash still waiting gets the hash without
//! a second send. A holder that never reports by its deadline (its task was lost) is
//! force-released: it gets a new session key and the upstream is asked by hash (and for the
//! sender's counts) what became of it: held, it is accepted; its nonce used by another, it is
//! refused; neither, its stored bytes are sent again (at most [`MAX_RECOVERIES`] times).

use super::{tagged, Action, Holding, Phase, PoolKind, Purpose, Sender, SessionKey};
use crate::jsonrpc::{Answer, RpcError, RESOURCE_UNAVAILABLE};
use crate::metrics::Metric;
use crate::ordering::accepted::Status;
use crate::ordering::answer::{AnswerClass, NonceEffect};
use crate::ordering::queue::{QueuedTx, Stage};
use crate::ordering::route_status::RouteStatus;
use crate::ordering::sender::{Outcome, Query, Refusal, Sent};
use crate::ordering::tx::SignedTx;
use crate::transaction::TxHash;

/// How many times a force-released holder's transaction is sent again before its clients get
/// -32002 (outcome unknown).
pub const MAX_RECOVERIES: u32 = 2;

impl Sender {
    /// The final answer (`result`, after retries) of the send made under `session_key` for
    /// `tx`: the holder's, or a late one's.
    pub(super) fn on_sent(
        &mut self,
        session_key: SessionKey,
        tx: &SignedTx,
        result: Sent,
        now_ms: u64,
    ) {
        match self.holding(session_key) {
            Some(holding) if matches!(holding.phase, Phase::Sending { .. }) => {
                self.counters.retried += u64::from(result.attempts.saturating_sub(1));
                self.settle(holding, result, now_ms);
            }
            _ => self.late(session_key, tx, result, now_ms),
        }
    }

    /// Records a holder's final answer, answers its clients and passes the lock on.
    fn settle(&mut self, holding: Holding, result: Sent, now_ms: u64) {
        self.unhold(holding.entry);
        if self.window_gap(&holding, result.class) {
            return;
        }
        let Some(entry) = self.queue.remove(holding.entry) else {
            return;
        };
        let (hash, nonce) = (entry.hash(), entry.nonce());
        let class = result.class;
        if class.went_in() {
            self.record_accepted(&entry, result.route, now_ms);
        } else if matches!(class, AnswerClass::Unavailable | AnswerClass::Unrecognized) {
            self.record_unverified(&entry, now_ms);
        } else {
            self.record_refused(hash, nonce, &result, now_ms);
        }
        self.counters.forwarded += 1;
        let answer = match class {
            // Kept, and sent again while its nonce is free: one answer for one outcome, never a
            // definite-looking refusal (an error no pattern knows, no usable answer).
            AnswerClass::Unavailable | AnswerClass::Unrecognized
                if !is_outcome_unknown(&result.answer) =>
            {
                Answer::outcome_unknown(&hash, &why(&result))
            }
            _ => result.answer.clone(),
        };
        self.answer(&entry.tickets, &answer, None);
        self.forwarded(&holding, &entry, &result, now_ms);
        let gap = self.nonces.next == Some(nonce);
        self.apply(class.effect(), nonce, now_ms);
        if class == AnswerClass::Rejected && gap && self.settings.pool == PoolKind::Strict {
            self.refuse_above(nonce);
        }
    }

    /// The holder's `entry` went in (answered by `route`, behind a private route): no longer a
    /// resend, its hash accepted and vouched for with its row's size, and a route's cancel
    /// transaction (one of the route's own at the same nonce, still the route's alone) cancels
    /// the one it holds.
    fn record_accepted(&mut self, entry: &QueuedTx, route: Option<usize>, now_ms: u64) {
        let (hash, nonce) = (entry.hash(), entry.nonce());
        self.storage.resends.remove(&hash);
        // A route's cancel transaction at the nonce of one the route holds: the route
        // cancels that one and sends neither (Flashbots Protect, MEV Blocker).
        let cancels = self
            .accepted
            .with_nonce(nonce, now_ms)
            .filter(|held| *held != hash && self.settings.private_route && entry.tx.self_cancel)
            .filter(|held| {
                // Still the route's alone: not sent to the public mempool, not in a block.
                self.accepted.get(held, now_ms).is_some_and(|tx| {
                    tx.status == Status::Pending
                        && !tx.route.public
                        && tx.route.status != Some(RouteStatus::Included)
                })
            });
        let pruned = self
            .accepted
            .record(hash, nonce, now_ms, true, entry.tx.terms());
        self.pruned(pruned, now_ms);
        let pruned = self
            .accepted
            .sized(&hash, entry.tx.row_len() as u64, now_ms);
        self.pruned(pruned, now_ms);
        self.route_took(&hash, route);
        if let Some(held) = cancels {
            self.cancelled_by_route_rule(&held, &hash, nonce, now_ms);
        }
    }

    /// The holder's `entry` got no usable answer (unavailable, or an error no pattern knows):
    /// its hash accepted but not vouched for, and the stored transactions to be checked.
    fn record_unverified(&mut self, entry: &QueuedTx, now_ms: u64) {
        let (hash, nonce) = (entry.hash(), entry.nonce());
        // It may be in: remembered, not vouched for, so the next lookup asks for it by hash
        // and sends it again if the upstream does not have it.
        let pruned = self
            .accepted
            .record(hash, nonce, now_ms, false, entry.tx.terms());
        self.pruned(pruned, now_ms);
        self.storage.unverified = true;
    }

    /// The holder's transaction `hash` (`nonce`) was refused (`result`): its row forgotten, a
    /// tracked resend's tracking settled ([`Sender::untrack_refused`]), and the failure kept
    /// with the upstream's message (or the class's label) for `GET /tx`.
    fn record_refused(&mut self, hash: TxHash, nonce: u64, result: &Sent, now_ms: u64) {
        self.forget_rows(vec![hash]);
        self.untrack_refused(&hash, result.class, now_ms);
        self.failed(hash, nonce, now_ms, why(result));
    }

    /// Logs `tx_forwarded` (label: the answer's class) for the holder's `entry`: how long it
    /// waited for the lock and held it, ms, the queue depth left, its nonce, attempts, copies,
    /// and whether it was the relay's own resend.
    fn forwarded(&mut self, holding: &Holding, entry: &QueuedTx, result: &Sent, now_ms: u64) {
        let waiting = self.queue.waiting_len();
        self.emit(tagged(
            Metric::new("tx_forwarded", "", result.class.label())
                .value(
                    "lock_wait_ms",
                    holding.acquired_ms.saturating_sub(entry.arrived_ms) as f64,
                )
                .value(
                    "lock_hold_ms",
                    now_ms.saturating_sub(holding.acquired_ms) as f64,
                )
                .value("queue_depth", waiting as f64)
                .field("nonce", entry.nonce())
                .field("attempts", result.attempts)
                .field("copies", entry.tickets.len().saturating_sub(1))
                .field("resubmitted", entry.tickets.is_empty()),
            &entry.request_id,
        ));
    }

    /// A window member sent ahead that the upstream refused for a gap below it (a node that
    /// refuses gaps, or a lower member that was lost or refused): a one-at-a-time relay would not
    /// have sent it yet. It goes back to the queue, its clients unanswered, and is sent again
    /// from its bytes in its turn, never ahead again: refused then, the refusal is its answer.
    /// Returns whether it went back.
    fn window_gap(&mut self, holding: &Holding, class: AnswerClass) -> bool {
        if !holding.ahead || !matches!(class, AnswerClass::NonceTooHigh | AnswerClass::WrongNonce) {
            return false;
        }
        let Some(entry) = self.queue.get_mut(holding.entry) else {
            return false;
        };
        if entry.refused_ahead {
            return false;
        }
        entry.refused_ahead = true;
        let request_id = entry.request_id.clone();
        self.queue.set_stage(holding.entry, Stage::Waiting);
        self.counters.window_requeued += 1;
        self.emit(tagged(
            Metric::new("window_requeued", "", class.label())
                .value("count", 1.0)
                .field("nonce", holding.nonce)
                .field("expected_nonce", holding.expected),
            &request_id,
        ));
        true
    }

    /// See [`Sender::unstored`](super::Sender): the holder whose row the platform refused is
    /// refused unsent, its queued send dropped; members above it whose sends are still queued go
    /// back to wait behind the gap it leaves. Nothing is taken for supersession: the instance
    /// keeps its storage and the sender's queue goes on.
    pub(super) fn on_unstored(&mut self, hash: TxHash, now_ms: u64) {
        let Some(holding) = self
            .holders
            .iter()
            .find(|h| self.queue.get(h.entry).is_some_and(|e| e.hash() == hash))
            .copied()
        else {
            return;
        };
        let above: Vec<Holding> = self
            .holders
            .iter()
            .filter(|h| h.nonce > holding.nonce)
            .copied()
            .collect();
        let mut unsent = Vec::new();
        self.actions.retain(|action| match action {
            Action::Send { session_key, .. }
                if *session_key == holding.session_key
                    || above.iter().any(|h| h.session_key == *session_key) =>
            {
                unsent.push(*session_key);
                false
            }
            _ => true,
        });
        for h in above.iter().filter(|h| unsent.contains(&h.session_key)) {
            self.unhold(h.entry);
            self.queue.set_stage(h.entry, Stage::Waiting);
            self.nonces.gap_opened_ms = now_ms;
        }
        self.unhold(holding.entry);
        if let Some(entry) = self.queue.get_mut(holding.entry) {
            // Nothing of it is in storage: refused, it is not the relay's to follow.
            entry.stored = false;
        }
        self.refuse(holding.entry, Refusal::NotStored);
    }

    /// The sender's next nonce `next` was refused as terminal and the upstream refuses gaps: every
    /// transaction waiting above it is refused now, unsent (a send-and-wait call with EIP-7966's
    /// code 6). Those that arrive later wait for a corrected `next` as long as their gap wait.
    fn refuse_above(&mut self, next: u64) {
        let above: Vec<_> = self
            .queue
            .waiting()
            .filter(|place| place.nonce > next)
            .collect();
        for place in above {
            self.refuse_over_gap(place.entry, next, true);
        }
    }

    /// What a final answer does to the next nonce.
    fn apply(&mut self, effect: NonceEffect, nonce: u64, now_ms: u64) {
        match effect {
            NonceEffect::Advance => {
                if let Some(next) = self.nonces.next {
                    self.nonces.next = Some(next.max(nonce + 1));
                }
            }
            NonceEffect::Keep => self.nonces.gap_opened_ms = now_ms,
            NonceEffect::Relearn => self.relearn(now_ms),
        }
    }

    /// The holder `holding` is answered `refusal` without a send; the lock passes on with
    /// `effect`.
    fn release_refused(
        &mut self,
        holding: Holding,
        refusal: Refusal,
        effect: NonceEffect,
        now_ms: u64,
    ) {
        if self.unhold(holding.entry).is_some() {
            self.refuse(holding.entry, refusal);
            self.apply(effect, holding.nonce, now_ms);
        }
    }

    /// An answer from a holding that is no longer the holder.
    fn late(&mut self, session_key: SessionKey, tx: &SignedTx, result: Sent, now_ms: u64) {
        let (hash, nonce) = (tx.hash, tx.nonce);
        self.counters.late_answers += 1;
        self.emit(
            Metric::new("late_release_ignored", "", result.class.label())
                .value("count", 1.0)
                .field("session_key", session_key.to_string())
                .field("nonce", nonce)
                .field("tx_hash", crate::hex::encode(&hash)),
        );
        if !result.class.went_in() {
            return;
        }
        let pruned = self.accepted.record(hash, nonce, now_ms, true, tx.terms());
        self.pruned(pruned, now_ms);
        self.route_took(&hash, result.route);
        if let Some(next) = self.nonces.next {
            self.nonces.next = Some(next.max(nonce + 1));
        }
        // A resend of the same bytes that is still waiting or being checked: it went in.
        let waiting = self
            .queue
            .find(&hash)
            .filter(|id| self.holders.iter().all(|holding| holding.entry != *id));
        if let Some(id) = waiting {
            if let Some(entry) = self.queue.remove(id) {
                self.lookups
                    .retain(|_, (purpose, _)| *purpose != Purpose::Admit(id));
                self.deduplicated(nonce, &hash, "late_answer", &entry.request_id);
                self.answer(&entry.tickets, &Answer::hash(&hash), None);
            }
        }
    }

    /// The holder's check of a nonce below the next one: held by the upstream, it is accepted
    /// without a send; below the mined count, it is stale; otherwise it is sent.
    pub(super) fn on_holder_check(&mut self, key: SessionKey, outcome: Outcome, now_ms: u64) {
        let Some(holding) = self
            .holding(key)
            .filter(|h| matches!(h.phase, Phase::Checking(_)))
        else {
            return;
        };
        let Some(entry) = self.queue.get(holding.entry) else {
            return;
        };
        let (hash, nonce) = (entry.hash(), entry.nonce());
        let found = match outcome {
            Ok(found) => found,
            Err(_) => {
                self.release_refused(
                    holding,
                    Refusal::CheckFailed { nonce },
                    NonceEffect::Keep,
                    now_ms,
                );
                return;
            }
        };
        if let Some(latest) = found.latest {
            self.mined_count(latest, now_ms);
        }
        // Cancelled at the route while it waited for this check: never sent.
        let cancelled = self.accepted.get(&hash, now_ms).map(|tx| tx.status);
        if cancelled == Some(Status::Cancelled) {
            self.release_refused(holding, Refusal::Cancelled, NonceEffect::Keep, now_ms);
            self.forget_rows(vec![hash]);
            return;
        }
        match found.holds(&hash) {
            Some(true) => {
                let result = Sent {
                    class: AnswerClass::AlreadyKnown,
                    answer: Answer::hash(&hash),
                    attempts: 0,
                    route: None,
                };
                self.settle(holding, result, now_ms);
            }
            _ if found.latest.is_some_and(|latest| nonce < latest) => {
                self.counters.stale_refused += 1;
                let mined = found.latest.unwrap_or(nonce + 1);
                self.release_refused(
                    holding,
                    Refusal::Stale { mined, nonce },
                    NonceEffect::Keep,
                    now_ms,
                );
            }
            Some(false) => {
                let deadline_ms = holding
                    .acquired_ms
                    .saturating_add(self.settings.max_hold_ms);
                self.send(holding.entry, deadline_ms, now_ms);
            }
            None => self.release_refused(
                holding,
                Refusal::CheckFailed { nonce },
                NonceEffect::Keep,
                now_ms,
            ),
        }
    }

    /// The holder with `session_key` never reported by its deadline: a new session key, and the
    /// upstream asked what became of its transaction.
    pub(super) fn force_release(&mut self, session_key: SessionKey, now_ms: u64) {
        let Some(mut holding) = self.holding(session_key) else {
            return;
        };
        let Some(entry) = self.queue.get(holding.entry) else {
            self.unhold(holding.entry);
            return;
        };
        let (hash, nonce, request_id) = (entry.hash(), entry.nonce(), entry.request_id.clone());
        self.counters.force_releases += 1;
        let waiting = self.queue.waiting_len();
        self.emit(tagged(
            Metric::new("force_release", "", "max_hold")
                .value("held_ms", now_ms.saturating_sub(holding.acquired_ms) as f64)
                .value("queue_depth", waiting as f64)
                .field("session_key", holding.session_key.to_string())
                .field("nonce", nonce),
            &request_id,
        ));
        let session_key = SessionKey::new();
        let deadline_ms = now_ms.saturating_add(self.settings.max_hold_ms);
        let query = Query {
            pending: true,
            latest: true,
            genesis: false,
            hashes: vec![hash],
            ..Query::default()
        };
        let lookup = self.ask(Purpose::Recover(session_key), query, deadline_ms);
        holding.session_key = session_key;
        holding.phase = Phase::Recovering(lookup);
        holding.recoveries += 1;
        self.rehold(holding);
    }

    /// What the upstream says of a force-released holder's transaction.
    pub(super) fn on_recovery(&mut self, key: SessionKey, outcome: Outcome, now_ms: u64) {
        let Some(holding) = self
            .holding(key)
            .filter(|h| matches!(h.phase, Phase::Recovering(_)))
        else {
            return;
        };
        let Some(entry) = self.queue.get(holding.entry) else {
            self.unhold(holding.entry);
            return;
        };
        let (hash, nonce) = (entry.hash(), entry.nonce());
        let found = outcome.ok();
        let known = found.as_ref().and_then(|f| f.holds(&hash));
        let latest = found.as_ref().and_then(|f| f.latest);
        if let Some(latest) = latest {
            self.mined_count(latest, now_ms);
        }
        match known {
            Some(true) => {
                let result = Sent {
                    class: AnswerClass::AlreadyKnown,
                    answer: Answer::hash(&hash),
                    attempts: 0,
                    route: None,
                };
                self.settle(holding, result, now_ms);
            }
            Some(false) if latest.is_some_and(|latest| nonce < latest) => {
                // Another transaction took the nonce in a block: refused, its row released.
                self.counters.stale_refused += 1;
                let mined = latest.unwrap_or(nonce + 1);
                self.release_refused(
                    holding,
                    Refusal::Stale { mined, nonce },
                    NonceEffect::Relearn,
                    now_ms,
                );
                self.release_rows(vec![hash]);
            }
            Some(false) if holding.recoveries <= MAX_RECOVERIES => {
                let deadline_ms = now_ms.saturating_add(self.settings.max_hold_ms);
                self.send(holding.entry, deadline_ms, now_ms);
            }
            _ => {
                // Nothing to go on: the outcome stays unknown. Remembered, not vouched for.
                self.unhold(holding.entry);
                if let Some(entry) = self.queue.remove(holding.entry) {
                    let pruned = self
                        .accepted
                        .record(hash, nonce, now_ms, false, entry.tx.terms());
                    self.pruned(pruned, now_ms);
                    self.storage.unverified = true;
                    let unknown = Answer::error(&RpcError::new(
                        RESOURCE_UNAVAILABLE,
                        format!(
                            "transaction outcome unknown: the sender's lock was force-released after {} ms",
                            now_ms.saturating_sub(holding.acquired_ms)
                        ),
                    ));
                    self.answer(&entry.tickets, &unknown, None);
                }
                self.relearn(now_ms);
            }
        }
    }
}

/// Why a send's `result` did not go in: the upstream's error message, or the answer class's label
/// when there is none.
fn why(result: &Sent) -> String {
    result
        .answer
        .error_parts()
        .map_or_else(|| result.class.label().to_string(), |(_, message)| message)
}

/// Whether `answer` already is [`Answer::outcome_unknown`]'s.
fn is_outcome_unknown(answer: &Answer) -> bool {
    answer.error_parts().is_some_and(|(code, message)| {
        code == RESOURCE_UNAVAILABLE && message.starts_with("transaction outcome unknown")
    })
}
