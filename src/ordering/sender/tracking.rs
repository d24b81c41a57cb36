//! Every accepted transaction followed to inclusion.
//!
//! While any is pending, a check runs every `TRACK_INTERVAL_S` (on the storage alarm, so an
//! evicted object comes back for it), in two steps. First the sender's counts: its mined count
//! (`latest`) and its pending count. Then, by hash (`eth_getTransactionByHash`, whose
//! `blockNumber` says whether it is in a block), only what the counts cannot tell apart, in as many
//! batches as it takes ([`crate::upstream::lookup`]): a pending transaction whose nonce the mined
//! count passed (in a block: itself, or another that took its nonce), one at or above the pending
//! count (queued above a gap, or dropped), and one the relay has not seen the upstream hold (read
//! back after a restart, or its answer lost). One between the two counts that the upstream
//! vouched for is in its pool: nothing to ask (geth's local transaction tracker reads the nonce the
//! same way). For each asked: in a block, it is included (its row deleted); held in the pool,
//! nothing to do; not held with the mined count above its nonce, another transaction took the
//! nonce: replaced, no resend; not held with its nonce still free, the pool dropped it: its
//! original bytes are sent again, lowest nonce first, through the same queue as a client's send
//! (Celestia's tx client and geth's local transaction tracker resubmit the same way, never
//! re-signing). A transaction still pending after `TRACK_TTL_S` is given up (expired).
//!
//! A check is due whenever a transaction is pending, whatever made it pending: a send's answer,
//! a client's copy answered by hash, or the rows an earlier instance stored, checked after a
//! restart ([`Sender::keep_tracking`]).
//!
//! Behind a private route ([`super::Settings::private_route`]) the node asked cannot see the
//! route's pool, so "not held" is no drop (trezor/blockbook#1572), and its pending count says
//! nothing of the route's: every pending transaction is asked by hash. With `SEND_STATUS_URL` the
//! route is asked too ([`RouteStatus`], at most [`MAX_STATUS_ASKED`] a check, lowest nonces
//! first, beside the counts): one it dropped (failed, unknown) is sent to it again from its
//! original bytes, at most [`MAX_RESENDS`] times; whatever else it says, or without a status URL,
//! the transaction stays pending until it is in a block, its nonce is used, or it expires. With
//! `SEND_PUBLIC_AFTER_BLOCKS` = N, one still not held by the read node N blocks after the head
//! of the first check that found it pending is also sent to the public mempool, once
//! ([`Action::Publish`]).

use super::knowledge::MAX_RESENDS;
use super::{Purpose, Sender};
use crate::hex;
use crate::metrics::Metric;
use crate::ordering::accepted::AcceptedTx;
use crate::ordering::accepted::Status;
use crate::ordering::answer::AnswerClass;
use crate::ordering::queue::Stage;
use crate::ordering::route_status::{RouteStatus, MAX_STATUS_ASKED};
use crate::ordering::sender::{Action, Found, LookupId, Outcome, Query, Seen, Sent};
use crate::transaction::TxHash;
use serde_json::{json, Value};

/// How many outstanding transactions make a tracking check due at once: half the pending bound
/// ([`crate::ordering::accepted::MAX_ACCEPTED`]).
pub const EARLY_CHECK_AT: usize = crate::ordering::accepted::MAX_ACCEPTED / 2;

/// The shortest time between the end of a tracking check and an early one, ms.
pub const EARLY_CHECK_GAP_MS: u64 = 1_000;

impl Sender {
    /// Keeps a check due while any accepted transaction is pending (tracking on), one interval
    /// from when it became so (or at the alarm already set, when that is sooner), and none when
    /// nothing is: whatever made a transaction pending
    /// (a send's answer, a copy answered by hash, or stored rows vouched for after a restart).
    ///
    /// A sender that fills half the pending bound before its next check ([`EARLY_CHECK_AT`]
    /// outstanding) is checked at once, at most every [`EARLY_CHECK_GAP_MS`]: the mined count
    /// that settles them comes as fast as it is needed, whatever the sender's rate.
    pub(super) fn keep_tracking(&mut self, now_ms: u64) {
        if self.settings.track_interval_ms == 0 || self.tracking.running {
            return;
        }
        match (self.tracking.due_ms, self.accepted.has_pending()) {
            (None, true) => {
                // The first check rides the alarm already set for the transaction's row when
                // that comes within an interval (one interval from its store:
                // [`Sender::keep_alarm`]), rather than set another a send's round trip later.
                let interval = now_ms.saturating_add(self.settings.track_interval_ms);
                let set = self.alarm_until_ms;
                let due = match set > now_ms && set <= interval {
                    true => set,
                    false => interval,
                };
                self.tracking.due_ms = Some(due)
            }
            (Some(_), false) => self.tracking.due_ms = None,
            _ => {}
        }
        if let Some(due) = self.tracking.due_ms {
            let early = self.tracking.ended_ms.saturating_add(EARLY_CHECK_GAP_MS);
            if due > early
                && self.accepted.len() >= EARLY_CHECK_AT
                && self.accepted.outstanding(self.nonces.mined) >= EARLY_CHECK_AT
            {
                self.tracking.due_ms = Some(early.max(now_ms));
            }
        }
    }

    /// The pending transactions a check asks about (not those being sent again), lowest nonce
    /// first.
    fn tracked_now(&self) -> Vec<TxHash> {
        self.accepted
            .pending()
            .into_iter()
            .map(|(_, hash)| hash)
            .filter(|hash| self.queue.find(hash).is_none())
            .collect()
    }

    /// The [`MAX_STATUS_ASKED`] of `tracked` (nonce order) whose route status goes longest
    /// unasked, lowest nonce first among equals: every pending one gets its turn, and a
    /// decision that needs the route's word (a resend, publishing) waits for it.
    fn statuses_to_ask(&mut self, tracked: &[TxHash], now_ms: u64) -> Vec<TxHash> {
        let mut by_turn: Vec<(u64, usize, TxHash)> = tracked
            .iter()
            .enumerate()
            .map(|(i, hash)| {
                let asked = self.accepted.route_mut(hash).and_then(|r| r.asked_ms);
                (asked.unwrap_or(0), i, *hash)
            })
            .collect();
        by_turn.sort_unstable();
        let mut asked: Vec<(usize, TxHash)> = by_turn
            .into_iter()
            .take(MAX_STATUS_ASKED)
            .map(|(_, i, hash)| (i, hash))
            .collect();
        asked.sort_unstable();
        for (_, hash) in &asked {
            if let Some(route) = self.accepted.route_mut(hash) {
                route.asked_ms = Some(now_ms);
            }
        }
        asked.into_iter().map(|(_, hash)| hash).collect()
    }

    /// Starts the tracking check when it is due and none runs: its first step, the counts (and
    /// behind a private route the head and the route's statuses).
    pub(super) fn want_track(&mut self, now_ms: u64) {
        if self.tracking.running || self.tracking.due_ms.is_none_or(|due| now_ms < due) {
            return;
        }
        let tracked = self.tracked_now();
        if tracked.is_empty() {
            // Every pending one is being sent again: the next check one interval on.
            self.tracking.due_ms = Some(now_ms.saturating_add(self.settings.track_interval_ms));
            return;
        }
        self.tracking.running = true;
        // The storage alarm stays ahead while it runs (the next check, should this one's answers
        // be lost with the object), never at the past due time.
        self.tracking.due_ms = Some(now_ms.saturating_add(self.settings.track_interval_ms));
        let deadline_ms = now_ms.saturating_add(self.settings.max_hold_ms);
        let private = self.settings.private_route;
        let route_statuses = match private && self.settings.route_status {
            true => self.statuses_to_ask(&tracked, now_ms),
            false => Vec::new(),
        };
        let query = Query {
            latest: true,
            pending: !private,
            head: private && self.accepted.terms_need_head(),
            route_statuses,
            ..Query::default()
        };
        self.ask(Purpose::Track, query, deadline_ms);
    }

    /// The pending transactions the counts of `found` cannot settle, lowest nonce first (see
    /// the module documentation): behind a private route, every one.
    fn to_tell_apart(&self, found: &Found, now_ms: u64) -> Vec<TxHash> {
        let tracked = self.tracked_now();
        if self.settings.private_route {
            return tracked;
        }
        let (Some(latest), Some(pending)) = (found.latest, found.pending) else {
            return tracked;
        };
        tracked
            .into_iter()
            .filter(|hash| {
                self.accepted
                    .get(hash, now_ms)
                    .is_some_and(|tx| tx.nonce < latest || tx.nonce >= pending || !tx.vouched)
            })
            .collect()
    }

    /// The check's counts: the mined count learned, the route's statuses kept, and what they
    /// cannot settle asked by hash (the check's second step); with nothing to ask, it ends here.
    pub(super) fn on_track(&mut self, outcome: Outcome, now_ms: u64) {
        let found = match outcome {
            Ok(found) => found,
            Err(_) => return self.track_done(now_ms),
        };
        if let Some(latest) = found.latest {
            self.mined_count(latest, now_ms);
        }
        for (hash, status) in &found.route {
            if *status == RouteStatus::Cancelled && self.public_copy_left(hash) {
                continue;
            }
            // The route's word that its sender cancelled one (published: still pending) stands.
            if let Some(route) = self
                .accepted
                .route_mut(hash)
                .filter(|route| route.status != Some(RouteStatus::Cancelled))
            {
                route.status = Some(*status);
            }
        }
        let hashes = self.to_tell_apart(&found, now_ms);
        if hashes.is_empty() {
            return self.settle_tracked(&found, now_ms);
        }
        let deadline_ms = now_ms.saturating_add(self.settings.max_hold_ms);
        let query = Query {
            hashes,
            ..Query::default()
        };
        let id = self.ask(Purpose::TrackHashes, query, deadline_ms);
        self.tracking.counts.insert(id, found);
    }

    /// The check's answers by hash ([`Purpose::TrackHashes`]), read with its counts.
    pub(super) fn on_track_hashes(&mut self, id: LookupId, outcome: Outcome, now_ms: u64) {
        let mut found = self.tracking.counts.remove(&id).unwrap_or_default();
        match outcome {
            Ok(by_hash) => {
                found.known = by_hash.known;
                self.settle_tracked(&found, now_ms);
            }
            Err(_) => self.track_done(now_ms),
        }
    }

    /// The check is over: the next one interval on (none when nothing is pending any more).
    fn track_done(&mut self, now_ms: u64) {
        self.tracking.running = false;
        self.tracking.ended_ms = now_ms;
        self.tracking.due_ms = self
            .accepted
            .has_pending()
            .then(|| now_ms.saturating_add(self.settings.track_interval_ms));
    }

    /// `hash` is in `block`: included, its row no longer needed.
    pub(super) fn included(&mut self, hash: &TxHash, block: &u64, now_ms: u64) {
        let Some(tx) = self.accepted.get(hash, now_ms) else {
            return;
        };
        if !self
            .accepted
            .finish(hash, Status::Included { block: *block }, now_ms)
        {
            return;
        }
        self.counters.included += 1;
        self.emit(
            Metric::new("tx_included", "", "block")
                .value("count", 1.0)
                .value(
                    "time_to_inclusion_ms",
                    now_ms.saturating_sub(tx.at_ms) as f64,
                )
                .field("block", *block)
                .field("nonce", tx.nonce)
                .field("resent", tx.resent)
                .field("tx_hash", hex::encode(hash)),
        );
        self.release_rows(vec![*hash]);
    }

    /// What a check found (`found`: its counts and its answers by hash), settled: each pending
    /// one asked is included, vouched for (in the pool), replaced, or sent again.
    fn settle_tracked(&mut self, found: &Found, now_ms: u64) {
        self.track_done(now_ms);
        let mut resend = Vec::new();
        let mut replaced = Vec::new();
        let mut private = Vec::new();
        for (hash, seen) in &found.known {
            let Some(tx) = self.accepted.get(hash, now_ms) else {
                continue;
            };
            if tx.status.is_final() || self.queue.find(hash).is_some() {
                continue;
            }
            match seen {
                Seen::Included { block } => self.included(hash, block, now_ms),
                Seen::Pending => {
                    if let Some(pruned) = self.accepted.vouch(hash, now_ms) {
                        self.pruned(pruned, now_ms);
                    }
                }
                Seen::Missing if found.latest.is_some_and(|latest| latest > tx.nonce) => {
                    replaced.push((*hash, tx))
                }
                // Behind a private route the node asked never sees the pool: its null is no
                // drop. The route's word decides.
                Seen::Missing if self.settings.private_route => private.push((*hash, tx)),
                Seen::Missing => resend.push((tx.nonce, *hash)),
            }
        }
        self.private_missing(private, found, &mut resend, now_ms);
        if !replaced.is_empty() {
            // Their nonces are used in blocks: the rows are released.
            self.release_rows(replaced.iter().map(|(hash, _)| *hash).collect());
            let taken = replaced
                .into_iter()
                .map(|(hash, tx)| (tx.nonce, hash))
                .collect();
            self.nonces_taken(taken, now_ms);
        }
        if !resend.is_empty() {
            resend.sort_unstable();
            let hashes: Vec<TxHash> = resend.into_iter().map(|(_, hash)| hash).collect();
            for hash in &hashes {
                self.accepted.resent(hash);
                self.keep_progress(hash);
            }
            self.storage.loading = true;
            self.push(Action::Load(hashes));
        }
    }

    /// Behind a private route, the pending transactions of `missing` that the read node does
    /// not hold: one the route dropped goes to `resend` (at most [`MAX_RESENDS`] times; dropped
    /// again after the last, it is final, [`Status::Failed`], its row gone); one the route says
    /// its sender cancelled is final ([`Status::Cancelled`], its row its tombstone), or, published
    /// already, stays pending and is never sent to a route again; neither final one is counted; one past its `maxBlockNumber` is final ([`Status::Expired`]); and one whose sender
    /// opted in (`?public_after_blocks=N`, at most `SEND_PUBLIC_AFTER_BLOCKS`) goes to the
    /// public mempool N blocks past its first check, on the route's word of that check (with a
    /// status URL), unless the route says it is included (the read node lags) or cancelled.
    fn private_missing(
        &mut self,
        mut missing: Vec<(TxHash, AcceptedTx)>,
        found: &Found,
        resend: &mut Vec<(u64, TxHash)>,
        now_ms: u64,
    ) {
        let mut publish = Vec::new();
        let mut ended = Vec::new();
        missing.sort_unstable_by_key(|(_, tx)| tx.nonce);
        for (hash, tx) in missing {
            // Published, then cancelled at the route: its public copy is followed, nothing is
            // sent to a route again (whatever a route says of it now).
            if self.route_word(&hash, Some(found)) == Some(RouteStatus::Cancelled) {
                if self.route_cancelled(&hash, tx.nonce, now_ms) {
                    ended.push(hash);
                }
                continue;
            }
            let terms = tx.route.terms;
            let included = found.route.get(&hash) == Some(&RouteStatus::Included);
            if let Some(head) = found.head.filter(|head| !included && terms.lapsed(*head)) {
                self.lapsed(&hash, tx.nonce, head, now_ms);
                ended.push(hash);
                continue;
            }
            if let Some(status) = found.route.get(&hash).filter(|s| s.dropped()) {
                match self.route_dropped(&hash, &tx, *status, now_ms) {
                    true => resend.push((tx.nonce, hash)),
                    false => ended.push(hash),
                }
                continue;
            }
            publish.extend(self.public_turn(&hash, &tx, found));
        }
        // Their nonces are free: nothing of them is sent again, after a restart either.
        self.forget_rows(ended);
        if publish.is_empty() {
            return;
        }
        self.send_public(publish, now_ms);
    }

    /// Pending transaction `hash` (`tx`), which the private route says it dropped (`status`:
    /// failed, unknown): logged (`tx_route_dropped`, label the route's status) and, within
    /// [`MAX_RESENDS`], to be sent again (true); after the last, final ([`Status::Failed`],
    /// `tx_abandoned` label `route_failed`; false).
    fn route_dropped(
        &mut self,
        hash: &TxHash,
        tx: &AcceptedTx,
        status: RouteStatus,
        now_ms: u64,
    ) -> bool {
        let again = tx.resent < MAX_RESENDS;
        self.counters.route_dropped += 1;
        self.emit(
            Metric::new("tx_route_dropped", "", status.label())
                .value("count", 1.0)
                .field("nonce", tx.nonce)
                .field("tx_hash", hex::encode(hash))
                .field("sent_again", again),
        );
        if !again {
            self.accepted.finish(hash, Status::Failed, now_ms);
            self.counters.abandoned += 1;
            self.emit(
                Metric::new("tx_abandoned", "", "route_failed")
                    .value("count", 1.0)
                    .field("nonce", tx.nonce)
                    .field("tx_hash", hex::encode(hash)),
            );
        }
        again
    }

    /// Pending transaction `hash` (`tx`) whose sender opted in to the public mempool: the head
    /// of `found` kept as its first check's (`since_block`), and, `public_after_blocks` blocks
    /// past it while the route still holds it, marked public. Returns what is to be published:
    /// (nonce, hash, blocks since its first check, the route's status), or `None`.
    fn public_turn(
        &mut self,
        hash: &TxHash,
        tx: &AcceptedTx,
        found: &Found,
    ) -> Option<(u64, TxHash, u64, Option<RouteStatus>)> {
        // The sender's opt-in, at most what the operator allows now.
        let after = tx
            .route
            .terms
            .public_after(self.settings.public_after_blocks);
        let (Some(after), Some(head)) = (after, found.head) else {
            return None;
        };
        let route = self.accepted.route_mut(hash)?;
        let first = route.since_block.is_none();
        let since = *route.since_block.get_or_insert(head);
        // Not one the route says is in a block (the read node lags) or its sender cancelled.
        // With a status URL, only on the route's word of this check: its turn comes.
        let held = !matches!(
            route.status,
            Some(RouteStatus::Included | RouteStatus::Cancelled)
        ) && (!self.settings.route_status || found.route.contains_key(hash));
        let published = held && !route.public && head >= since.saturating_add(after);
        let mut publish = None;
        if published {
            route.public = true;
            publish = Some((tx.nonce, *hash, head - since, route.status));
        }
        if first || published {
            self.keep_progress(hash);
        }
        publish
    }

    /// The pending transactions of `publish` (nonce, hash, blocks since their first check, the
    /// route's status) sent to the public mempool, lowest nonce first: each logged
    /// (`tx_sent_public`, label `not_included`), then one [`Action::Publish`] for all.
    fn send_public(
        &mut self,
        mut publish: Vec<(u64, TxHash, u64, Option<RouteStatus>)>,
        now_ms: u64,
    ) {
        publish.sort_unstable_by_key(|(nonce, ..)| *nonce);
        let mut hashes = Vec::new();
        for (nonce, hash, blocks, status) in publish {
            self.emit(
                Metric::new("tx_sent_public", "", "not_included")
                    .value("count", 1.0)
                    .value("blocks", blocks as f64)
                    .field("nonce", nonce)
                    .field("tx_hash", hex::encode(&hash))
                    .field("route_status", status.map(RouteStatus::label)),
            );
            hashes.push(hash);
        }
        let deadline_ms = now_ms.saturating_add(self.settings.max_hold_ms);
        self.push(Action::Publish {
            hashes,
            deadline_ms,
        });
    }

    /// The private route's word on `hash`: what `found` (a lookup's answer) says, but its word
    /// that the sender cancelled one already published, which stands (kept in memory and in its
    /// row: that one stays pending, never sent to a route again).
    pub(super) fn route_word(&self, hash: &TxHash, found: Option<&Found>) -> Option<RouteStatus> {
        let kept = self
            .accepted
            .route_of(hash)
            .and_then(|route| route.status)
            .filter(|status| *status == RouteStatus::Cancelled);
        kept.or_else(|| found?.route.get(hash).copied())
    }

    /// Whether `hash`, which the route says its sender cancelled, was also sent to the public
    /// mempool (its sender's opt-in): then its route status becomes `cancelled` (logged once,
    /// `tx_cancelled` label `route_public_copy_pending`) and it stays pending
    /// ([`Sender::route_cancelled`]).
    fn public_copy_left(&mut self, hash: &TxHash) -> bool {
        let Some(tx) = self.accepted.get_mut_public(hash) else {
            return false;
        };
        let nonce = tx.nonce;
        let first = tx.route.status != Some(RouteStatus::Cancelled);
        tx.route.status = Some(RouteStatus::Cancelled);
        if first {
            // Kept in its row: never sent to a route again, after a wake either.
            self.keep_progress(hash);
            self.emit(
                Metric::new("tx_cancelled", "", "route_public_copy_pending")
                    .value("count", 1.0)
                    .field("nonce", nonce)
                    .field("tx_hash", hex::encode(hash)),
            );
        }
        true
    }

    /// Transaction `hash` (nonce `nonce`), which the private route says its sender cancelled:
    /// final ([`Status::Cancelled`]: never sent again, anywhere, not counted; a copy of it waiting
    /// for its turn leaves the queue), its row made its tombstone ([`Sender::bury`]), and logged
    /// (`tx_cancelled`, label `route`); true. One its sender's opt-in sent to the public mempool
    /// too is not final: the public copy can still be mined, so it stays tracked and counted as
    /// pending, never sent to the route again, its route status `cancelled` (`GET /tx` says both;
    /// `tx_cancelled` once, label `route_public_copy_pending`); false.
    pub(super) fn route_cancelled(&mut self, hash: &TxHash, nonce: u64, now_ms: u64) -> bool {
        if self.public_copy_left(hash) {
            return false;
        }
        self.accepted.finish(hash, Status::Cancelled, now_ms);
        self.drop_cancelled_copy(hash);
        self.bury(*hash, nonce);
        self.emit(
            Metric::new("tx_cancelled", "", "route")
                .value("count", 1.0)
                .field("nonce", nonce)
                .field("tx_hash", hex::encode(hash)),
        );
        true
    }

    /// Transaction `hash` (`nonce`), not included, is past its `maxBlockNumber` at `head`: final
    /// ([`Status::Expired`], `tx_expired` label `max_block_number`), not sent again, not counted,
    /// not published.
    pub(super) fn lapsed(&mut self, hash: &TxHash, nonce: u64, head: u64, now_ms: u64) {
        self.accepted.finish(hash, Status::Expired, now_ms);
        self.counters.expired += 1;
        self.emit(
            Metric::new("tx_expired", "", "max_block_number")
                .value("count", 1.0)
                .field("nonce", nonce)
                .field("head", head)
                .field("tx_hash", hex::encode(hash)),
        );
    }

    /// The answer of transaction `hash`'s send to the public mempool: counted, and logged
    /// (`tx_public_answer`, with the answer's class).
    pub(super) fn on_published(&mut self, hash: &TxHash, result: Sent, now_ms: u64) {
        let nonce = self.accepted.get(hash, now_ms).map(|tx| tx.nonce);
        if result.class.went_in() {
            self.counters.sent_public += 1;
        }
        self.emit(
            Metric::new("tx_public_answer", "", result.class.label())
                .value("count", 1.0)
                .value("attempts", f64::from(result.attempts))
                .field("nonce", nonce)
                .field("tx_hash", hex::encode(hash))
                .field("error", result.answer.error_parts().map(|(_, why)| why)),
        );
    }

    /// A resend of tracked `hash` refused with `class`: the nonce taken (too low, or a pooled
    /// transaction the upstream will not replace with it) is replaced, and its replacement is
    /// asked for; any other refusal ends the tracking, and the failure is what `GET /tx` shows.
    pub(super) fn untrack_refused(&mut self, hash: &TxHash, class: AnswerClass, now_ms: u64) {
        let Some(tx) = self.accepted.get(hash, now_ms) else {
            return;
        };
        if tx.status.is_final() {
            return;
        }
        if matches!(
            class,
            AnswerClass::NonceTooLow | AnswerClass::ReplacementUnderpriced
        ) {
            self.nonces_taken(vec![(tx.nonce, *hash)], now_ms);
        } else {
            self.accepted.forget(hash);
        }
    }

    /// `taken` (nonce, hash) lost their nonces to other transactions: replaced, and which
    /// transactions took them is asked (for the status and the event; best effort).
    fn nonces_taken(&mut self, taken: Vec<(u64, TxHash)>, now_ms: u64) {
        for (_, hash) in &taken {
            self.accepted
                .finish(hash, Status::Replaced { by: None }, now_ms);
            self.counters.replaced += 1;
        }
        self.ask_replaced_by(taken, now_ms);
    }

    /// Asks which transactions took the nonces of `replaced` (nonce, hash); their `tx_replaced`
    /// events go out with the answer.
    fn ask_replaced_by(&mut self, replaced: Vec<(u64, TxHash)>, now_ms: u64) {
        let nonces: Vec<u64> = replaced.iter().map(|(nonce, _)| *nonce).collect();
        let deadline_ms = now_ms.saturating_add(self.settings.max_hold_ms);
        let query = Query {
            nonces,
            ..Query::default()
        };
        let id = self.ask(Purpose::ReplacedBy, query, deadline_ms);
        self.tracking.replaced.insert(id, replaced);
    }

    /// The answer to [`Purpose::ReplacedBy`]: each replaced transaction learns which took its
    /// nonce (an upstream without `eth_getTransactionBySenderAndNonce` leaves it unknown), and
    /// its `tx_replaced` event goes out.
    pub(super) fn on_replaced_by(&mut self, id: LookupId, outcome: Outcome) {
        let asked = self.tracking.replaced.remove(&id).unwrap_or_default();
        let found = outcome.unwrap_or_default();
        for (nonce, hash) in asked {
            let by = found
                .by_nonce
                .get(&nonce)
                .filter(|by| **by != hash)
                .copied();
            if let Some(by) = by {
                self.accepted.replaced_by(&hash, by);
            }
            self.emit(
                Metric::new("tx_replaced", "", "nonce_taken")
                    .value("count", 1.0)
                    .field("nonce", nonce)
                    .field("tx_hash", hex::encode(&hash))
                    .field("replaced_by", by.map(|by| hex::encode(&by))),
            );
        }
    }

    /// What became of transaction `hash`, for `GET /tx/{hash}`: `{"hash", "nonce", "status", ...}`
    /// with `status` one of `queued` (waiting for its turn, or asked by hash first), `sent` (its
    /// bytes with the upstream), `pending` (accepted, in the pool: `resubmitted` says how often
    /// it was sent again), `included` (`block`), `replaced` (`replaced_by` when the relay knows
    /// the transaction that took its nonce), `expired` (not included within `TRACK_TTL_S`, or by
    /// its `maxBlockNumber`), `cancelled` (at the private route) or `failed` (`error`: why).
    /// Behind a private route also `route`: `private`, or `private_then_public` once its
    /// sender's opt-in sent it to the public mempool too; `route_status`: the route's last word
    /// on it ([`RouteStatus::label`]; null until one came, or without `SEND_STATUS_URL`);
    /// `public_after_blocks`: its opt-in as honoured (null: never published); and
    /// `max_block_number` when it has one. `None` when the object knows nothing of it.
    pub fn status(&self, hash: &TxHash, now_ms: u64) -> Option<Value> {
        let mut v = self.describe(hash, now_ms)?;
        if self.settings.private_route {
            let route = self
                .accepted
                .get(hash, now_ms)
                .map(|tx| tx.route)
                .unwrap_or_default();
            v["route"] = if route.public {
                "private_then_public"
            } else {
                "private"
            }
            .into();
            v["route_status"] = route.status.map(RouteStatus::label).into();
            // What its sender asked: publishing after N blocks (null: never), its bound.
            v["public_after_blocks"] = route
                .terms
                .public_after(self.settings.public_after_blocks)
                .into();
            if let Some(max) = route.terms.max_block_number {
                v["max_block_number"] = max.into();
            }
        }
        Some(v)
    }

    /// [`Sender::status`] without the route.
    fn describe(&self, hash: &TxHash, now_ms: u64) -> Option<Value> {
        let text = hex::encode(hash);
        if let Some(entry) = self.queue.find(hash).and_then(|id| self.queue.get(id)) {
            let status = match entry.stage() {
                Stage::Waiting | Stage::Admitting(..) => "queued",
                Stage::Granted => "sent",
            };
            let resent = self.accepted.get(hash, now_ms).map_or(0, |tx| tx.resent);
            return Some(json!({
                "hash": text, "nonce": entry.nonce(), "status": status, "resubmitted": resent,
            }));
        }
        if let Some(tx) = self.accepted.get(hash, now_ms) {
            let mut v = tx.describe(hash);
            v["accepted_ms_ago"] = now_ms.saturating_sub(tx.at_ms).into();
            return Some(v);
        }
        if let Some(nonce) = self.tombstones.nonce_of(hash) {
            return Some(json!({ "hash": text, "nonce": nonce, "status": "cancelled" }));
        }
        let failure = self.failures.iter().rev().find(|f| f.hash == *hash)?;
        Some(json!({
            "hash": text, "nonce": failure.nonce, "status": "failed", "error": failure.why,
            "failed_ms_ago": now_ms.saturating_sub(failure.at_ms),
        }))
    }
}
