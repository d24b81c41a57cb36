//! What the sender's object knows of the chain, and how the upstream corrects it.
//!
//! The sender's next nonce is the upstream's pending count, raised past the transactions the
//! object accepted that the upstream still holds; when its count is below an accepted nonce, the
//! upstream is asked for those hashes before anything is decided (a lagging node still holds
//! them; a restarted node, a reset chain or another node behind a load balancer may not). The
//! upstream wins: what it no longer holds is forgotten, and sent again from its stored bytes
//! when its nonce is still free (a node that emptied its pool). The stored state is tied to the
//! chain's genesis hash (`eth_getBlockByNumber("0x0")`): on another chain it is dropped, never
//! sent. A lookup that fails is tried again after a backoff (1 s, doubling, at most 30 s); the
//! queue never goes on a guessed nonce meanwhile.

use super::{Purpose, Sender};
use crate::jsonrpc::{Answer, RpcError, RESOURCE_UNAVAILABLE};
use crate::metrics::Metric;
use crate::ordering::accepted::AcceptedTx;
use crate::ordering::queue::{QueuedTx, QueuedTxId, Stage};
use crate::ordering::route_status::{RouteStatus, FIRST_SEND_STATUS_TIMEOUT_MS, MAX_STATUS_ASKED};
use crate::ordering::sender::{Action, Found, LookupId, Outcome, Query, RowProgress, Seen};
use crate::ordering::tx::SignedTx;
use crate::transaction::TxHash;
use std::rc::Rc;

/// The first pause after a failed nonce lookup, ms; it doubles with each failure in a row.
pub const LOOKUP_BACKOFF_MS: u64 = 1_000;
/// The longest pause between failed nonce lookups, ms.
pub const LOOKUP_BACKOFF_MAX_MS: u64 = 30_000;
/// How many times a stored transaction the upstream does not have is sent again before it is
/// given up (a transaction that the upstream never keeps, or that hangs it, must not hold its
/// sender's queue for good).
pub const MAX_RESENDS: u32 = 2;

/// What a verify lookup makes of an accepted transaction the upstream does not hold
/// ([`Sender::unheld`]).
enum Unheld {
    /// Left as it is: the route holds it, its word is not had yet, or it stays pending for its
    /// public copy.
    Kept,
    /// Another transaction took its nonce in a block: its row is released.
    Used,
    /// Final (past its `maxBlockNumber`, cancelled at the route, or abandoned): its row is
    /// forgotten.
    Gone,
    /// Sent again from its stored bytes.
    Resend,
}

impl Sender {
    /// Stored transactions read back for a resend ([`Action::Load`]): each that the object does
    /// not hold already waits for the lock, in nonce order with everyone else.
    pub(super) fn on_loaded(&mut self, txs: Vec<Rc<SignedTx>>, now_ms: u64) {
        self.storage.loading = false;
        for tx in txs {
            // A client's copy queued meanwhile goes instead, and carries the relay's own (stored:
            // refused unsent, it stays followed); one found final meanwhile is done.
            if let Some(entry) = self
                .queue
                .find(&tx.hash)
                .and_then(|id| self.queue.get_mut(id))
            {
                entry.stored = true;
                continue;
            }
            if self
                .accepted
                .get(&tx.hash, now_ms)
                .is_some_and(|tx| tx.status.is_final())
                || self.is_cancelling(&tx.hash)
            {
                continue;
            }
            let (hash, nonce) = (tx.hash, tx.nonce);
            let mut entry = QueuedTx::new(tx, now_ms, None);
            entry.stored = true;
            self.queue.insert(entry);
            self.counters.resubmitted += 1;
            self.emit(
                Metric::new("tx_resubmitted", "", "upstream_forgot")
                    .value("count", 1.0)
                    .field("nonce", nonce)
                    .field("tx_hash", crate::hex::encode(&hash)),
            );
        }
    }

    pub(super) fn on_lookup(&mut self, id: LookupId, outcome: Outcome, now_ms: u64) {
        let Some((purpose, _)) = self.lookups.remove(&id) else {
            return;
        };
        match purpose {
            Purpose::Nonces => self.on_counts(outcome, now_ms),
            Purpose::Verify { pending, latest } => self.on_verify(outcome, pending, latest, now_ms),
            Purpose::Admit(entry) => self.on_entry_check(entry, outcome, now_ms),
            Purpose::Holder(key) => self.on_holder_check(key, outcome, now_ms),
            Purpose::Recover(key) => self.on_recovery(key, outcome, now_ms),
            Purpose::Track => self.on_track(outcome, now_ms),
            Purpose::TrackHashes => self.on_track_hashes(id, outcome, now_ms),
            Purpose::ReplacedBy => self.on_replaced_by(id, outcome),
        }
    }

    /// Whether the sender's counts are wanted: the next nonce is unknown with transactions
    /// waiting, stored transactions are to be checked, or a client asks.
    pub(super) fn needs_nonces(&self) -> bool {
        (self.nonces.next.is_none() && self.queue.waiting_len() > 0)
            || self.storage.unverified
            || !self.nonces.lookup.counts.is_empty()
    }

    /// Starts the nonce lookup when it is wanted and none runs (after a failure, not before its
    /// backoff).
    pub(super) fn want_nonces(&mut self, now_ms: u64) {
        if self.nonces.lookup.running.is_none()
            && self.needs_nonces()
            && now_ms >= self.nonces.lookup.not_before_ms
        {
            self.start_nonces(now_ms);
        }
    }

    pub(super) fn start_nonces(&mut self, now_ms: u64) {
        let route_statuses = self.first_statuses();
        self.storage.first_statuses_out = !route_statuses.is_empty();
        let query = Query {
            pending: true,
            latest: true,
            genesis: !self.storage.chain.checked,
            route_status_timeout_ms: (!route_statuses.is_empty())
                .then_some(FIRST_SEND_STATUS_TIMEOUT_MS),
            route_statuses,
            ..Query::default()
        };
        self.start_nonce_lookup(Purpose::Nonces, query, now_ms);
    }

    /// Behind a private route with a status URL, an object that started with nothing stored
    /// asks, once, the route's status of the client transactions waiting (the lowest
    /// [`MAX_STATUS_ASKED`]) beside its first nonce lookup, which they wait for anyway: one the
    /// route says its sender cancelled (a rebroadcast after the object forgot its tombstone, or
    /// of a cancel that went around it) is refused ([`Sender::refuse_cancelled`]); `UNKNOWN`, or
    /// no word within [`FIRST_SEND_STATUS_TIMEOUT_MS`], lets it go.
    fn first_statuses(&self) -> Vec<TxHash> {
        let asks = self.settings.private_route && self.settings.route_status;
        if !asks || !self.storage.nothing_stored {
            return Vec::new();
        }
        let mut waiting: Vec<(u64, TxHash)> = self
            .queue
            .iter()
            .filter(|(_, e)| !e.stored && e.stage() == Stage::Waiting)
            .map(|(_, e)| (e.nonce(), e.hash()))
            .collect();
        waiting.sort_unstable();
        waiting
            .into_iter()
            .take(MAX_STATUS_ASKED)
            .map(|(_, hash)| hash)
            .collect()
    }

    /// The route's statuses that came with the first nonce lookup ([`Sender::first_statuses`]):
    /// each waiting transaction the route says its sender cancelled is refused
    /// ([`Refusal::Cancelled`](super::Refusal::Cancelled)) and its tombstone kept. Asked once:
    /// a lookup that answered (whatever the route said) ends the asking.
    fn refuse_cancelled(&mut self, found: &Found) {
        if std::mem::take(&mut self.storage.first_statuses_out) {
            self.storage.nothing_stored = false;
        }
        for (hash, status) in &found.route {
            if *status != RouteStatus::Cancelled {
                continue;
            }
            let Some(id) = self.queue.find(hash) else {
                continue;
            };
            let Some(nonce) = self
                .queue
                .get(id)
                .filter(|e| e.stage() == Stage::Waiting)
                .map(|e| e.nonce())
            else {
                continue;
            };
            self.bury(*hash, nonce);
            self.refuse(id, super::Refusal::Cancelled);
        }
    }

    fn start_nonce_lookup(&mut self, purpose: Purpose, query: Query, now_ms: u64) {
        let deadline_ms = now_ms.saturating_add(self.settings.max_hold_ms);
        let id = self.ask(purpose, query, deadline_ms);
        self.nonces.lookup.running = Some(id);
        if purpose == Purpose::Nonces {
            self.nonces.lookup.rerun = false;
        }
    }

    /// The next nonce is no longer to be trusted (a nonce error, an unknown outcome): nothing is
    /// granted until it is learned anew.
    pub(super) fn relearn(&mut self, now_ms: u64) {
        if self.nonces.next.is_some() {
            self.nonces.unknown_since_ms = now_ms;
        }
        self.nonces.next = None;
        self.counters.relearned += 1;
        if self.nonces.lookup.running.is_some() {
            self.nonces.lookup.rerun = true;
        }
    }

    /// The sender's counts (and the genesis hash, until checked).
    fn on_counts(&mut self, outcome: Outcome, now_ms: u64) {
        self.nonces.lookup.running = None;
        let found = match outcome {
            Ok(found) if found.pending.is_some() => found,
            Ok(_) => return self.nonces_failed("no usable pending count", now_ms),
            Err(why) => return self.nonces_failed(&why.to_string(), now_ms),
        };
        if let Some(genesis) = &found.genesis {
            self.check_chain(genesis, now_ms);
        }
        self.refuse_cancelled(&found);
        if let Some(latest) = found.latest {
            self.mined_count(latest, now_ms);
        }
        let pending = found.pending.unwrap_or(0);
        let verify = self.to_verify(pending, now_ms);
        if verify.is_empty() {
            self.storage.unverified = false;
            self.storage.read_back = false;
            self.learned(pending, now_ms);
            return;
        }
        // Behind a private route with a status URL, nothing is sent to the route again without
        // its word: the lowest ones' statuses are asked beside (the rest at the tracking checks).
        let route_statuses = match self.settings.private_route && self.settings.route_status {
            true => verify.iter().take(MAX_STATUS_ASKED).copied().collect(),
            false => Vec::new(),
        };
        let query = Query {
            hashes: verify,
            route_statuses,
            // A `maxBlockNumber` passed while the relay was down: final, not sent again.
            head: self.settings.private_route && self.accepted.terms_need_head(),
            ..Query::default()
        };
        let purpose = Purpose::Verify {
            pending,
            latest: found.latest,
        };
        self.start_nonce_lookup(purpose, query, now_ms);
    }

    /// The accepted hashes to ask for: every one not vouched for and not known to be mined, and
    /// every one whose nonce the upstream's pending count does not cover (lowest first). Rows
    /// read back (a restart, or a wake from hibernation: the same new instance) are asked whatever
    /// their nonce: one the mined count passed is in a block or replaced, and the counts cannot
    /// tell which; settled here, not left to a tracking check that a hibernating object would
    /// never reach (each wake starts here again). Behind a private route the upstream asked
    /// cannot hold what the route accepted: only the ones not vouched for are asked (a row the
    /// route took is vouched for from its row: [`RowProgress::vouched`]), and those the mined
    /// count passed.
    fn to_verify(&self, pending: u64, now_ms: u64) -> Vec<TxHash> {
        let mined = self.nonces.mined.unwrap_or(pending).min(pending);
        let read_back = self.storage.read_back;
        let from = if read_back { 0 } else { mined };
        let uncovered_counts = !self.settings.private_route;
        self.accepted
            .from_nonce(from, now_ms)
            .into_iter()
            .filter(|(nonce, hash)| {
                (read_back && *nonce < mined)
                    || (uncovered_counts && *nonce >= pending)
                    || self.accepted.get(hash, now_ms).is_some_and(|t| !t.vouched)
            })
            .map(|(_, hash)| hash)
            .collect()
    }

    /// The accepted hashes asked by hash: held ones are vouched for; forgotten ones are
    /// forgotten here too, and sent again when their nonce is still free.
    fn on_verify(&mut self, outcome: Outcome, pending: u64, latest: Option<u64>, now_ms: u64) {
        self.nonces.lookup.running = None;
        let found: Found = match outcome {
            Ok(found) => found,
            Err(why) => return self.nonces_failed(&why.to_string(), now_ms),
        };
        let mut resend = Vec::new();
        let mut gone = Vec::new();
        let mut used = Vec::new();
        for (hash, seen) in &found.known {
            // One replaced meanwhile (in this loop too: another it answered holds its nonce) is
            // settled: never sent again.
            let Some(tx) = self
                .accepted
                .get(hash, now_ms)
                .filter(|tx| !tx.status.is_final())
            else {
                continue;
            };
            if let Seen::Included { block } = seen {
                self.included(hash, block, now_ms);
                continue;
            }
            if *seen == Seen::Pending {
                if let Some(pruned) = self.accepted.vouch(hash, now_ms) {
                    self.pruned(pruned, now_ms);
                }
                continue;
            }
            match self.unheld(hash, &tx, &found, latest, now_ms) {
                Unheld::Kept => {}
                Unheld::Used => used.push(*hash),
                Unheld::Gone => gone.push(*hash),
                Unheld::Resend => resend.push(*hash),
            }
        }
        self.forget_rows(gone);
        self.release_rows(used);
        self.storage.unverified = false;
        self.storage.read_back = false;
        if !resend.is_empty() {
            self.storage.loading = true;
            self.push(Action::Load(resend));
        }
        self.learned(pending, now_ms);
    }

    /// Accepted transaction `hash` (`tx`, not final) that the verify lookup (`found`, with the
    /// mined count `latest` of the counts before it) found the upstream not to hold: its nonce
    /// used in a block, past its `maxBlockNumber`, cancelled at the route, kept for the route's
    /// word, or counted towards its resends ([`Sender::count_resend`]).
    fn unheld(
        &mut self,
        hash: &TxHash,
        tx: &AcceptedTx,
        found: &Found,
        latest: Option<u64>,
        now_ms: u64,
    ) -> Unheld {
        if latest.is_some_and(|l| tx.nonce < l) {
            // Another transaction took its nonce in a block. (A pending count above it is
            // no proof: the pool may have dropped it since that count, or hold another
            // transaction there that the resend may replace.)
            self.accepted.forget(hash);
            return Unheld::Used;
        }
        if let Some(head) = found.head.filter(|head| tx.route.terms.lapsed(*head)) {
            self.lapsed(hash, tx.nonce, head, now_ms);
            return Unheld::Gone;
        }
        if self.settings.private_route && self.settings.route_status {
            match self.route_word(hash, Some(found)) {
                Some(RouteStatus::Cancelled) => {
                    // Its sender cancelled it at the route: never sent again, anywhere (one
                    // published too stays pending: its public copy may be mined).
                    if self.route_cancelled(hash, tx.nonce, now_ms) {
                        return Unheld::Gone;
                    }
                    return Unheld::Kept;
                }
                // The route's word is that it dropped it: sent again below.
                Some(status) if status.dropped() => {}
                // The route holds it (or it is in a block), or its word is not had yet
                // (asked at the tracking checks): not sent again now.
                _ => return Unheld::Kept,
            }
        }
        self.count_resend(hash, tx)
    }

    /// One more resend of accepted `hash` (`tx`) the upstream does not hold, counted from what
    /// its row kept: within [`MAX_RESENDS`], the count is kept in its row and it is sent again
    /// (behind a private route it stays accepted); past it, it is abandoned (`tx_abandoned`,
    /// label `upstream_never_kept`) and its row goes.
    fn count_resend(&mut self, hash: &TxHash, tx: &AcceptedTx) -> Unheld {
        // Counted from what its row kept (a restart, or a hibernation, forgot the rest).
        let resends = self.storage.resends.entry(*hash).or_insert(tx.resent);
        *resends += 1;
        let count = *resends;
        if count <= MAX_RESENDS {
            // Kept in its row before it goes again: the cap holds across the object's memory.
            let progress = self.accepted.progress(hash).unwrap_or_default();
            self.push(Action::Progress(
                *hash,
                RowProgress {
                    resent: count,
                    ..progress
                },
            ));
        }
        if count > MAX_RESENDS {
            self.storage.resends.remove(hash);
            self.accepted.forget(hash);
            self.counters.abandoned += 1;
            self.emit(
                Metric::new("tx_abandoned", "", "upstream_never_kept")
                    .value("count", 1.0)
                    .field("nonce", tx.nonce)
                    .field("tx_hash", crate::hex::encode(hash)),
            );
            Unheld::Gone
        } else {
            // Behind a private route the node asked cannot see the route's pool: its null
            // is no sign the route lost it (a restarted object asks about every stored
            // one). It stays accepted, counted in the pending count, and is sent to the
            // route again to be sure (the route answers a copy it holds with its hash).
            if !self.settings.private_route {
                self.accepted.forget(hash);
            }
            Unheld::Resend
        }
    }

    /// `nonce` raised past every accepted nonce the upstream is known to hold from it on, in a
    /// row. Behind a private route the node asked never holds them: every pending one the route
    /// accepted counts (one whose outcome is unknown is on its way to the route again).
    fn past_held(&self, mut nonce: u64, now_ms: u64) -> u64 {
        while let Some(hash) = self.accepted.with_nonce(nonce, now_ms) {
            let counted = self.accepted.get(&hash, now_ms).is_some_and(|t| {
                t.vouched || (self.settings.private_route && !t.status.is_final())
            });
            if !counted {
                break;
            }
            nonce += 1;
        }
        nonce
    }

    /// The upstream's mined count `latest`, from any lookup that asked it: every nonce below it
    /// is used, so a known next nonce below it moves up to it (and past the accepted nonces the
    /// upstream holds in a row). What tracking learns thus moves the queue: a transaction the
    /// relay could not vouch for, found in a block, no longer holds the sender's next one back.
    pub(super) fn mined_count(&mut self, latest: u64, now_ms: u64) {
        self.nonces.mined = Some(latest);
        if let Some(next) = self.nonces.next.filter(|&next| next < latest) {
            let raised = self.past_held(latest, now_ms);
            self.emit(
                Metric::new("next_nonce_raised", "", "mined")
                    .value("count", 1.0)
                    .field("from", next)
                    .field("to", raised),
            );
            self.nonces.next = Some(raised);
        }
    }

    /// The sender's next nonce from the upstream's `pending` count: raised past every accepted
    /// nonce it holds, in a row; never below the mined count. Answers the pending-count
    /// questions.
    fn learned(&mut self, pending: u64, now_ms: u64) {
        let next = self.past_held(pending.max(self.nonces.mined.unwrap_or(0)), now_ms);
        self.nonces.lookup.failures = 0;
        self.nonces.lookup.not_before_ms = 0;
        let counts = std::mem::take(&mut self.nonces.lookup.counts);
        if !counts.is_empty() {
            if next > pending {
                self.emit(
                    Metric::new("pending_nonce_raised", "", "upstream_behind")
                        .value("upstream", pending as f64)
                        .value("relay", next as f64),
                );
            }
            let quantity = Answer::Result(format!("\"{}\"", crate::hex::encode_quantity(next)));
            self.answer(&counts, &quantity, None);
        }
        if self.nonces.lookup.rerun {
            // These counts may be older than what made the next nonce unknown: ask again.
            self.start_nonces(now_ms);
            return;
        }
        if self.nonces.next != Some(next) {
            self.nonces.gap_opened_ms = now_ms;
        }
        self.nonces.next = Some(next);
    }

    fn nonces_failed(&mut self, why: &str, now_ms: u64) {
        self.nonces.lookup.failures += 1;
        let backoff = LOOKUP_BACKOFF_MS
            .saturating_mul(1 << self.nonces.lookup.failures.saturating_sub(1).min(16))
            .min(LOOKUP_BACKOFF_MAX_MS);
        self.nonces.lookup.not_before_ms = now_ms.saturating_add(backoff);
        self.emit(
            Metric::new("nonce_lookup_failed", "", "counts")
                .value("count", 1.0)
                .field("failures", self.nonces.lookup.failures)
                .field("error", why.to_string()),
        );
        let counts = std::mem::take(&mut self.nonces.lookup.counts);
        let error = Answer::error(&RpcError::new(
            RESOURCE_UNAVAILABLE,
            format!("upstream unavailable: cannot learn the sender's pending nonce ({why})"),
        ));
        self.answer(&counts, &error, None);
        if self.nonces.lookup.rerun {
            self.nonces.lookup.rerun = false;
        }
    }

    /// Compares the upstream's genesis hash with the stored one. Another chain: everything stored
    /// is dropped (nothing of it is ever sent), and the state starts anew on this chain.
    fn check_chain(&mut self, genesis: &str, now_ms: u64) {
        self.storage.chain.checked = true;
        match self.storage.chain.genesis.as_deref() {
            Some(known) if known == genesis => return,
            Some(_) => {
                self.counters.chain_changes += 1;
                let dropped = self.accepted.clear().len() + self.tombstones.clear();
                let resends: Vec<QueuedTxId> = self
                    .queue
                    .iter()
                    .filter(|(_, e)| !e.has_clients() && e.stage() == Stage::Waiting)
                    .map(|(id, _)| id)
                    .collect();
                for id in resends {
                    self.queue.remove(id);
                }
                self.emit(
                    Metric::new("chain_changed", "", "genesis")
                        .value("count", 1.0)
                        .value("dropped", dropped as f64)
                        .field("genesis", genesis.to_string()),
                );
                self.nonces.mined = None;
                self.nonces.next = None;
                self.nonces.hole = None;
                self.nonces.unknown_since_ms = now_ms;
                self.storage.unverified = false;
                self.storage.read_back = false;
                self.storage.resends.clear();
                if self.storage.chain.persisted {
                    self.push(Action::Wipe);
                    self.storage.chain.persisted = false;
                }
            }
            None => {}
        }
        self.storage.chain.genesis = Some(genesis.to_string());
    }
}
