//! One sender's lock lifecycle as one pure, clock-free state machine: admission, the nonce-ordered
//! queue ([`Queue`]), the grant, the holder's send, release, retries of lookups, force release and
//! restart recovery. It does no I/O of its own (the model is quinn-proto's `Connection`).
//!
//! # The face: events in, actions and one due time out
//!
//! Events, each with the time (Unix ms):
//! - [`Sender::restore`], once, before any other: what an earlier instance stored;
//! - [`Sender::arrive`] / [`Sender::arrive_all`]: a client's transaction(s), each answered through
//!   its [`Ticket`]; [`Sender::count`]: a pending-count question;
//! - [`Sender::sent`]: the final answer of a send the machine asked for ([`Action::Send`]);
//! - [`Sender::looked_up`]: the outcome of a lookup it asked for ([`Action::Lookup`]);
//! - [`Sender::loaded`]: stored transactions read back ([`Action::Load`]);
//! - [`Sender::published`]: the answer of a send to the public mempool ([`Action::Publish`]);
//! - [`Sender::handle_timeout`]: its due time came ([`Sender::poll_timeout`]);
//! - [`Sender::alarm`]: the storage alarm fired.
//!
//! The call contract, for the Durable Object's driver and the tests alike: after every event,
//! carry out every action in order ([`Sender::run`] through [`Effects`], or
//! [`Sender::poll_action`]) before the next event; storage actions are synchronous (the
//! platform's output gate holds later sends until they are on disk); then (re)arm one timer at
//! [`Sender::poll_timeout`]. Every ticket is answered exactly once. The storage alarm stays the
//! backstop that restarts an evicted object.
//!
//! The rules, each in the file named after it:
//! - [`admit`]: copies join the first copy's answer; a vouched accepted hash is answered at once; a
//!   nonce below the mined count is checked by hash before it is refused; the queue bound refuses
//!   the highest nonce waiting, never the one that unblocks the queue.
//! - [`turn`]: the lock goes to the lowest waiting nonce; a nonce above the known next one waits up
//!   to `NONCE_GAP_WAIT_MS`; nothing is granted while the next nonce is unknown; the one table of
//!   deadlines that both the due time and the expiry read.
//! - [`holding`]: the holder's transaction is stored before its first send, sent with retries until
//!   its deadline, and its answer released at once; an answer from a holding that is no longer
//!   the holder (late) only teaches; a holder that never reports is force-released and resolved
//!   by hash.
//! - [`knowledge`]: the next nonce and the mined count come from the upstream, raised by the
//!   accepted transactions it still holds (asked by hash when its count contradicts them); the
//!   stored state is tied to the chain's genesis hash; transactions the upstream forgot are sent
//!   again from their stored bytes.
//! - [`tracking`]: every accepted transaction is followed to inclusion (one batch every
//!   `TRACK_INTERVAL_S`, on the storage alarm): included, replaced, or sent again from its stored
//!   bytes when the pool dropped it; given up after `TRACK_TTL_S`. Its state is what
//!   `GET /tx/{hash}` shows.
//! - [`storage`]: the storage alarm is set while durable work is under way or transactions are
//!   tracked, and the object's storage goes when nothing is left.
//!
//! The state they share is grouped by what it is about in [`state`].

pub mod action;
mod admit;
mod cancel;
mod holding;
mod knowledge;
pub mod refusal;
mod settings;
mod state;
mod storage;
pub(super) mod tracking;
mod turn;
mod view;

pub use action::*;
pub use refusal::Refusal;
pub use settings::{
    Counters, PoolKind, ReplacementPolicy, Settings, DEFAULT_GAP_WAIT_MS, HEDERA_CHAIN_IDS,
};

use crate::jsonrpc::Answer;
use crate::metrics::Metric;
use crate::ordering::accepted::{Accepted, MAX_ACCEPTED};
use crate::ordering::queue::{Queue, QueuedTxId};
use crate::ordering::tombstone::Tombstones;
use crate::ordering::tx::SignedTx;
use crate::transaction::TxHash;
use state::{Failure, Holding, Hole, Nonces, Phase, Purpose, Storage, Tracking};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

/// One sender's machine. See the module documentation.
pub struct Sender {
    settings: Settings,
    /// The sender, lowercase 0x hex (for messages and metrics).
    address: String,
    queue: Queue,
    /// The holders, in grant order (ascending nonces): one, or up to [`Settings::window`] under
    /// `UPSTREAM_POOL=mempool`.
    holders: Vec<Holding>,
    accepted: Accepted,
    nonces: Nonces,
    storage: Storage,
    tracking: Tracking,
    /// Every lookup asked and not answered: why, and its deadline (Unix ms).
    lookups: HashMap<LookupId, (Purpose, u64)>,
    /// When the storage alarm is set (Unix ms), 0 when it is not.
    alarm_until_ms: u64,
    /// The alarm's handler is running ([`Sender::alarm`] until [`Sender::alarm_done`]): the
    /// alarm is set again, if wanted, only when it returns.
    in_alarm: bool,
    /// Recent refusals and failures by hash (`GET /tx/{hash}`'s `failed`), newest last.
    failures: VecDeque<Failure>,
    /// Transactions whose cancel is with the private route ([`Action::Cancel`]): nothing of them
    /// is sent meanwhile. At most one entry per client cancel in flight.
    cancelling: std::collections::HashSet<TxHash>,
    /// The transactions the route cancelled, kept until their nonce is used.
    tombstones: Tombstones,
    actions: VecDeque<Action>,
    lookup_ids: u64,
    /// What happened since the object started.
    pub counters: Counters,
}

impl Sender {
    /// A fresh machine: nothing known, the lock free.
    pub fn new(settings: Settings) -> Self {
        Sender {
            settings,
            address: String::new(),
            queue: Queue::new(),
            holders: Vec::new(),
            accepted: Accepted::new(settings.idempotency_ttl_ms, settings.track_ttl_ms),
            nonces: Nonces::default(),
            storage: Storage::default(),
            tracking: Tracking::default(),
            lookups: HashMap::new(),
            alarm_until_ms: 0,
            in_alarm: false,
            failures: VecDeque::new(),
            cancelling: std::collections::HashSet::new(),
            tombstones: Tombstones::default(),
            actions: VecDeque::new(),
            lookup_ids: 0,
            counters: Counters::default(),
        }
    }

    // ---- Events ----

    /// Takes the state an earlier instance stored, once, before any other event: the genesis
    /// hash of its chain, the stored transactions, oldest first, and the cancels' tombstones.
    /// The transactions count as accepted but not vouched for: the first lookup asks the
    /// upstream about every one not known to be mined, and those it no longer has are sent
    /// again. A copy of a tombstone's is refused as cancelled until its nonce is used.
    pub fn restore(
        &mut self,
        chain: Option<String>,
        rows: &[RowHeader],
        tombstones: &[Tombstone],
        now_ms: u64,
    ) {
        self.storage.chain.persisted = chain.is_some();
        self.storage.chain.genesis = chain;
        self.storage.nothing_stored = rows.is_empty() && tombstones.is_empty();
        for tombstone in tombstones {
            self.tombstones.bury(*tombstone);
        }
        for row in rows {
            let pruned = self
                .accepted
                .record(row.hash, row.nonce, row.at_ms, false, row.terms);
            self.accepted.restore_progress(&row.hash, row.progress);
            self.pruned(pruned, now_ms);
        }
        let pruned = self.accepted.prune(now_ms);
        self.pruned(pruned, now_ms);
        self.storage.unverified = !self.accepted.is_empty();
        self.storage.read_back = self.storage.unverified;
        if self.settings.private_route
            && self.settings.track_interval_ms > 0
            && self.accepted.has_pending()
        {
            // Behind a private route the rows' check asks nothing of what the route took (the
            // read node cannot see it): the tracking check (the route's statuses, the block count
            // of a sender's opt-in) is what the instance was woken for, due once the rows are
            // checked, not an interval later. Elsewhere the rows' check asked each by hash.
            self.tracking.due_ms = Some(now_ms);
        }
        self.step(now_ms);
    }

    /// A client's transaction (`arrival`), answered through `ticket`, at `now_ms`
    /// ([`admit`]).
    pub fn arrive(&mut self, ticket: Ticket, arrival: Arrival, now_ms: u64) {
        self.admit(ticket, arrival, now_ms);
        self.step(now_ms);
    }

    /// The transactions of one request, admitted in one turn in nonce order (a shuffled batch is
    /// sorted without gap waits; the bound refuses its highest nonces, and a batch that brings a
    /// nonce refused earlier for a bound brings the ones above it too).
    pub fn arrive_all(&mut self, mut arrivals: Vec<(Ticket, Arrival)>, now_ms: u64) {
        arrivals.sort_by_key(|(_, arrival)| arrival.tx.nonce);
        for (ticket, arrival) in arrivals {
            self.admit(ticket, arrival, now_ms);
        }
        self.step(now_ms);
    }

    /// A pending-count question (`eth_getTransactionCount(sender, "pending")`), answered through
    /// `ticket` with the upstream's count raised to the next nonce after the accepted transactions
    /// it still holds (a quantity), or -32002 when the upstream can't be asked.
    pub fn count(&mut self, ticket: Ticket, now_ms: u64) {
        self.nonces.lookup.counts.push(ticket);
        if self.nonces.lookup.running.is_none() {
            self.start_nonces(now_ms);
        }
        self.step(now_ms);
    }

    /// The final answer (`result`, after retries) of the send made under `session_key` for
    /// `tx`, at `now_ms` ([`holding`]).
    pub fn sent(&mut self, session_key: SessionKey, tx: &SignedTx, result: Sent, now_ms: u64) {
        self.on_sent(session_key, tx, result, now_ms);
        self.step(now_ms);
    }

    /// The outcome of the lookup `id`, at `now_ms`.
    pub fn looked_up(&mut self, id: LookupId, outcome: Outcome, now_ms: u64) {
        self.on_lookup(id, outcome, now_ms);
        self.step(now_ms);
    }

    /// The final answer of transaction `hash`'s send to the public mempool ([`Action::Publish`]),
    /// at `now_ms`: counted and logged (`tx_sent_public`); tracking goes on as before (the read
    /// node now sees it pending, or its nonce used).
    pub fn published(&mut self, hash: &TxHash, result: Sent, now_ms: u64) {
        self.on_published(hash, result, now_ms);
        self.step(now_ms);
    }

    /// Stored transactions read back for a resend ([`Action::Load`]): each that the object does
    /// not hold already waits for the lock, in nonce order with everyone else.
    pub fn loaded(&mut self, txs: Vec<Rc<SignedTx>>, now_ms: u64) {
        self.on_loaded(txs, now_ms);
        self.step(now_ms);
    }

    /// The platform refused to store holder `hash`'s row ([`Effects::store`]'s `Err`): its send,
    /// not carried out yet, is dropped and it is refused unsent ([`Refusal::NotStored`]); window
    /// members above it whose sends were not carried out yet go back to the queue behind the gap.
    fn unstored(&mut self, hash: TxHash, now_ms: u64) {
        self.on_unstored(hash, now_ms);
        self.step(now_ms);
    }

    /// A timer event: whatever is due at `now_ms`.
    pub fn handle_timeout(&mut self, now_ms: u64) {
        self.step(now_ms);
    }

    /// The storage alarm at `now_ms` (it fires at least once, maybe more): the same as a
    /// timeout. Until its handler returns ([`Sender::alarm_done`]) no alarm is set: the platform
    /// runs an alarm again whose handler did not return (Durable Objects docs, "Alarms":
    /// "guaranteed at-least-once execution"), and deletes it once it did unless the handler set
    /// another, so the one wanted then is set then: a check that ends within the handler and
    /// leaves nothing tracked writes no alarm at all (each `setAlarm` is a billed row).
    pub fn alarm(&mut self, now_ms: u64) {
        self.alarm_until_ms = 0;
        self.in_alarm = true;
        self.step(now_ms);
    }

    /// The alarm's handler returns at `now_ms`: the alarm is set again while work is left
    /// (stored work under way, tracked transactions).
    pub fn alarm_done(&mut self, now_ms: u64) {
        self.in_alarm = false;
        self.step(now_ms);
    }

    // ---- Output ----

    /// The next action to carry out, in order; `None` when there is nothing to do.
    #[must_use]
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Carries out every action the machine has, in order, through `effects` (a `Load`'s
    /// transactions are fed back at once, with `effects`' clock).
    pub fn run(&mut self, effects: &mut impl Effects) {
        while let Some(action) = self.poll_action() {
            self.carry(action, effects);
        }
    }

    /// Carries out one `action` (from [`Sender::poll_action`]) through `effects`: for a driver
    /// that looks at the machine between actions (the property tests); others call
    /// [`Sender::run`].
    pub fn carry(&mut self, action: Action, effects: &mut impl Effects) {
        match action {
            Action::Answer {
                ticket,
                answer,
                retry_after_s,
            } => effects.answer(ticket, answer, retry_after_s),
            Action::Store(row) => {
                let hash = row.tx.hash;
                if effects.store(row).is_err() {
                    self.unstored(hash, effects.now_ms());
                }
            }
            Action::Forget(hashes) => effects.forget(hashes),
            Action::Release(hashes) => effects.release(hashes),
            Action::Wipe => effects.wipe(),
            Action::Vacate => effects.vacate(),
            Action::StoreChain(genesis) => effects.store_chain(genesis),
            Action::Progress(hash, progress) => effects.progress(hash, progress),
            Action::Bury(tombstone) => effects.bury(tombstone),
            Action::Load(hashes) => {
                let txs = effects.load(&hashes);
                self.loaded(txs, effects.now_ms());
            }
            Action::Send {
                session_key,
                tx,
                deadline_ms,
                request_id,
            } => effects.send(session_key, tx, deadline_ms, request_id),
            Action::Lookup {
                id,
                query,
                deadline_ms,
            } => effects.lookup(id, query, deadline_ms),
            Action::Publish {
                hashes,
                deadline_ms,
            } => effects.publish(hashes, deadline_ms),
            Action::Cancel {
                ticket,
                hash,
                routes,
                deadline_ms,
            } => effects.cancel(ticket, hash, routes, deadline_ms),
            Action::Alarm(at_ms) => effects.alarm(at_ms),
            Action::Emit(metric) => effects.emit(metric),
        }
    }

    /// The earliest time (Unix ms) at which [`Sender::handle_timeout`] has something to do that
    /// the in-memory timer must bring: a gap wait or a waiter's wait running out, a lookup to
    /// start again, a holder or lookup that never reported, a busy sender's tracking check.
    /// `None` when only an event can change anything: an idle sender's tracking check comes with
    /// the storage alarm ([`Sender::alarm`]), the accepted set's pruning at the next event
    /// (`Keeper` in `turn.rs`).
    #[must_use]
    pub fn poll_timeout(&self) -> Option<u64> {
        self.due_ms()
    }

    // ---- Queries ----

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// New settings, from the next event on: the object resolves `UPSTREAM_POOL=auto` (and the
    /// replacement policy that follows from it) once it learns the chain id from a send.
    pub fn set_settings(&mut self, settings: Settings) {
        self.settings = settings;
    }

    /// The sender, lowercase 0x address (empty until named).
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Names the sender (lowercase 0x address) in refusals and metrics.
    pub fn set_address(&mut self, address: &str) {
        if self.address != address {
            self.address = address.to_string();
        }
    }

    /// Whether nothing is in flight or waiting: no holder, no entry, no lookup, nothing to
    /// verify or load.
    pub fn is_quiet(&self) -> bool {
        self.holders.is_empty()
            && self.queue.is_empty()
            && self.lookups.is_empty()
            && !self.storage.unverified
            && !self.storage.loading
    }

    /// The sender's next nonce as known, and its mined count as last learned.
    pub fn nonces(&self) -> (Option<u64>, Option<u64>) {
        (self.nonces.next, self.nonces.mined)
    }

    // ---- What the rules share ----

    /// The holding with `session_key`.
    fn holding(&self, session_key: SessionKey) -> Option<Holding> {
        self.holders
            .iter()
            .find(|h| h.session_key == session_key)
            .copied()
    }

    /// Takes the holding of entry `entry` out of the holders.
    fn unhold(&mut self, entry: QueuedTxId) -> Option<Holding> {
        let at = self.holders.iter().position(|h| h.entry == entry)?;
        Some(self.holders.remove(at))
    }

    /// Puts `holding` back in place of its entry's (a new session key or phase).
    fn rehold(&mut self, holding: Holding) {
        match self.holders.iter_mut().find(|h| h.entry == holding.entry) {
            Some(h) => *h = holding,
            None => self.holders.push(holding),
        }
    }

    fn lookup_id(&mut self) -> LookupId {
        self.lookup_ids += 1;
        LookupId(self.lookup_ids)
    }

    fn push(&mut self, action: Action) {
        self.actions.push_back(action);
    }

    fn emit(&mut self, mut metric: Metric) {
        if metric.sender.is_empty() {
            metric.sender.clone_from(&self.address);
        }
        self.push(Action::Emit(metric));
    }

    fn answer(&mut self, tickets: &[Ticket], answer: &Answer, retry_after_s: Option<u64>) {
        for &ticket in tickets {
            self.push(Action::Answer {
                ticket,
                answer: answer.clone(),
                retry_after_s,
            });
        }
    }

    /// Asks a lookup for `purpose` until `deadline_ms`.
    fn ask(&mut self, purpose: Purpose, mut query: Query, deadline_ms: u64) -> LookupId {
        // A status is asked first of the routes that may hold it.
        query.route_holders = query
            .route_statuses
            .iter()
            .filter_map(|hash| {
                let taken_by = self.accepted.route_mut(hash)?.taken_by;
                taken_by.index().is_some().then_some((*hash, taken_by))
            })
            .collect();
        let id = self.lookup_id();
        self.lookups.insert(id, (purpose, deadline_ms));
        self.push(Action::Lookup {
            id,
            query,
            deadline_ms,
        });
        id
    }

    /// Answers every ticket of the entry with `refusal`; the entry leaves. The relay's own
    /// transaction is not lost with it: a copy of one the relay accepted and still follows, or
    /// the relay's stored resend refused for the queue's sake (its next nonce unknown, a check
    /// that failed, a gap), stays followed, checked again with the next counts and sent from its
    /// stored bytes while the upstream lacks it. Only a stale nonce or a refused replacement
    /// settles it.
    fn refuse(&mut self, entry: QueuedTxId, refusal: Refusal) {
        let Some(e) = self.queue.remove(entry) else {
            return;
        };
        let (hash, nonce, at_ms) = (e.hash(), e.nonce(), e.arrived_ms);
        let settles = matches!(refusal, Refusal::Stale { .. } | Refusal::Replacement { .. });
        if e.stored && !settles && self.accepted.get(&hash, at_ms).is_none() {
            let pruned = self
                .accepted
                .record(hash, nonce, at_ms, false, e.tx.terms());
            self.pruned(pruned, at_ms);
        }
        if self
            .accepted
            .get(&hash, at_ms)
            .is_some_and(|tx| !tx.status.is_final())
        {
            self.storage.unverified = true;
        }
        self.emit(tagged(
            Metric::new("tx_refused", "", refusal.label())
                .value("count", 1.0)
                .field("nonce", nonce)
                .field("tx_hash", crate::hex::encode(&hash)),
            &e.request_id,
        ));
        let error = refusal.to_rpc(&self.address);
        self.failed(hash, nonce, at_ms, error.message.clone());
        self.answer(&e.tickets, &Answer::error(&error), refusal.retry_after_s());
        if refusal.is_bound() {
            self.open_hole(nonce, refusal, at_ms);
        }
        if let Refusal::AboveRefused { .. } = refusal {
            self.counters.above_refused += 1;
        }
    }

    /// Remembers a failure of `hash` (for `GET /tx/{hash}`), the newest 256.
    fn failed(&mut self, hash: TxHash, nonce: u64, at_ms: u64, why: String) {
        if self.failures.len() >= 256 {
            self.failures.pop_front();
        }
        self.failures.push_back(Failure {
            hash,
            nonce,
            at_ms,
            why,
        });
    }

    /// After every event: prunes, expires, starts lookups and the tracking check, grants, and
    /// keeps the alarm and the storage.
    fn step(&mut self, now_ms: u64) {
        let pruned = self.accepted.prune(now_ms);
        self.pruned(pruned, now_ms);
        self.unbury();
        if self.settings.track_interval_ms == 0 && self.accepted.len() > MAX_ACCEPTED {
            // Tracking off: nothing is followed to inclusion, so the bound gives up the oldest
            // pending ones instead of refusing the sender.
            let pruned = self.accepted.untracked_bound(now_ms);
            self.pruned(pruned, now_ms);
        }
        self.expire(now_ms);
        self.want_nonces(now_ms);
        self.keep_tracking(now_ms);
        self.want_track(now_ms);
        self.advance(now_ms);
        self.keep_storage();
        self.keep_alarm(now_ms);
    }
}

/// `metric` with the client request's id, when there is one.
fn tagged(metric: Metric, request_id: &Option<Rc<str>>) -> Metric {
    match request_id {
        Some(id) => metric.field("request_id", id.as_ref()),
        None => metric,
    }
}

#[cfg(test)]
mod tests;
