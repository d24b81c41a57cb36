//! A sender's cancel of a private transaction (`eth_cancelPrivateTransaction`, `[{"txHash"}]`),
//! taken in the object's turn with its sends: a pending transaction the route holds is cancelled
//! there ([`Action::Cancel`]), and once the route answers `true` it is final
//! ([`Status::Cancelled`]): never sent again or published, not counted, its row made its
//! tombstone, which refuses a copy until the sender's mined count passes its nonce
//! ([`crate::ordering::tombstone`]: past `IDEMPOTENCY_TTL_S`, past a restart). The
//! answer is the route's (`true` or `false`, Flashbots'); `false` at once for one this object
//! holds as final; one it does not know still goes to the route (it may have been sent around
//! the object). While the cancel is out nothing of the transaction is sent
//! ([`Sender::is_cancelling`]).
//!
//! A route's own cancel, a transaction to its sender with at most 2 bytes of data at the nonce of
//! one the route holds (Flashbots Protect's rule, MEV Blocker's soft cancellation), ends both
//! once the route took it ([`Sender::cancelled_by_route_rule`]): the route sends neither, so
//! neither is counted.

use super::{Action, Refusal, Sender, Ticket};
use crate::jsonrpc::{Answer, RpcError};
use crate::metrics::Metric;
use crate::ordering::accepted::Status;
use crate::ordering::queue::Stage;
use crate::ordering::tombstone::Tombstone;
use crate::transaction::TxHash;

impl Sender {
    /// A copy of `hash` waiting for its turn (a client's resend, the relay's own), now that its
    /// cancel is out or done: refused ([`Refusal::Cancelled`]). One holding the lock is refused at
    /// its check (`on_holder_check`); one being sent is left to finish.
    pub(super) fn drop_cancelled_copy(&mut self, hash: &TxHash) {
        let Some(id) = self.queue.find(hash) else {
            return;
        };
        if self
            .queue
            .get(id)
            .is_some_and(|e| e.stage() != Stage::Granted)
        {
            self.refuse(id, Refusal::Cancelled);
        }
    }

    /// A client's cancel of transaction `hash`, answered through `ticket` (see the module
    /// documentation). One this object holds as final gets `false` at once; one a copy of which
    /// is being sent right now gets -32002 (cancel again once that send is answered: a cancel
    /// ahead of it would be undone by it); any other goes to the route (one this object does not
    /// know may have been sent around it: fail-open, a restart's lost storage), and nothing of
    /// it is sent while the cancel is out.
    pub fn cancel(&mut self, ticket: Ticket, hash: TxHash, now_ms: u64) {
        let known = self.accepted.get(&hash, now_ms);
        let sending = self
            .queue
            .find(&hash)
            .and_then(|id| self.queue.get(id))
            .is_some_and(|e| e.stage() == Stage::Granted);
        let buried = self.tombstones.contains(&hash);
        if !self.settings.private_route || buried || known.is_some_and(|tx| tx.status.is_final()) {
            self.answer(&[ticket], &Answer::Result("false".into()), None);
        } else if sending || self.cancelling.contains(&hash) {
            let busy = RpcError::new(
                crate::jsonrpc::RESOURCE_UNAVAILABLE,
                "a copy of this transaction is being sent to the route, or cancelled, right now; \
                 cancel again once that is answered",
            );
            self.answer(&[ticket], &Answer::error(&busy), Some(1));
        } else {
            self.drop_cancelled_copy(&hash);
            self.cancelling.insert(hash);
            let deadline_ms = now_ms.saturating_add(self.settings.max_hold_ms);
            let routes = known.map(|tx| tx.route.taken_by).unwrap_or_default();
            self.push(Action::Cancel {
                ticket,
                hash,
                routes,
                deadline_ms,
            });
        }
        self.step(now_ms);
    }

    /// Whether a cancel of `hash` is with the route, or the route cancelled it (a tombstone):
    /// nothing of it is sent.
    pub(super) fn is_cancelling(&self, hash: &TxHash) -> bool {
        self.cancelling.contains(hash) || self.tombstones.contains(hash)
    }

    /// Keeps the tombstone of `hash` (`nonce`), cancelled at the route: in memory, and in
    /// storage in place of its row ([`Action::Bury`]). One that leaves for the bound is logged
    /// (`tombstone_dropped`) and its row deleted.
    pub(super) fn bury(&mut self, hash: TxHash, nonce: u64) {
        if self.tombstones.contains(&hash) {
            return;
        }
        let tombstone = Tombstone { nonce, hash };
        // The first row of a fresh object's storage: the chain it belongs to goes with it, so
        // that it is vacated once nothing is left.
        if !self.storage.chain.persisted {
            if let Some(genesis) = self.storage.chain.genesis.clone() {
                self.storage.chain.persisted = true;
                self.push(Action::StoreChain(genesis));
            }
        }
        self.push(Action::Bury(tombstone));
        if let Some(dropped) = self.tombstones.bury(tombstone) {
            self.emit(
                Metric::new("tombstone_dropped", "", "bound")
                    .value("count", 1.0)
                    .field("nonce", dropped.nonce)
                    .field("tx_hash", crate::hex::encode(&dropped.hash)),
            );
            self.push(Action::Forget(vec![dropped.hash]));
        }
    }

    /// The tombstones whose nonce the mined count passed leave (no copy of theirs can be
    /// included any more; one that arrives is refused as stale), and their rows are released.
    pub(super) fn unbury(&mut self) {
        let Some(mined) = self.nonces.mined else {
            return;
        };
        let passed: Vec<TxHash> = self
            .tombstones
            .passed(mined)
            .into_iter()
            .map(|t| t.hash)
            .collect();
        self.release_rows(passed);
    }

    /// The route's `answer` to the cancel of `hash` asked for `ticket`: `true` makes a pending
    /// one final (see the module documentation); any answer goes to the client as it is.
    pub fn cancel_answered(&mut self, ticket: Ticket, hash: TxHash, answer: Answer, now_ms: u64) {
        self.cancelling.remove(&hash);
        let cancelled = matches!(&answer, Answer::Result(text) if text.trim() == "true");
        let pending = self
            .accepted
            .get(&hash, now_ms)
            .filter(|tx| tx.status == Status::Pending);
        if let (true, Some(tx)) = (cancelled, pending) {
            self.route_cancelled(&hash, tx.nonce, now_ms);
        }
        self.answer(&[ticket], &answer, None);
        self.step(now_ms);
    }

    /// The route took `cancel`, a cancel transaction by its rule, at `nonce`, held by `held`:
    /// both are final ([`Status::Cancelled`]), neither counted or sent again, their rows made
    /// their tombstones.
    pub(super) fn cancelled_by_route_rule(
        &mut self,
        held: &TxHash,
        cancel: &TxHash,
        nonce: u64,
        now_ms: u64,
    ) {
        self.route_cancelled(held, nonce, now_ms);
        self.accepted.finish(cancel, Status::Cancelled, now_ms);
        self.bury(*cancel, nonce);
    }
}
