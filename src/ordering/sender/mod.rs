//! One sender's lock lifecycle as one pure, clock-free state machine: admission, the nonce-ordered
//! queue, the grant, the holder's send, release, retries of lookups, force release and restart
//! recovery. It does no I/O of its own (the model is quinn-proto's `Connection`): the Durable
//! Object feeds it every event with the time, carries out the [`Action`]s it hands back
//! ([`Sender::poll_action`]) and keeps one timer for the whole sender at
//! [`Sender::poll_timeout`]; the storage alarm stays the backstop that restarts an evicted object.
//!
//! Events: [`Sender::arrive`] (a client's transaction), [`Sender::count`] (a pending-count
//! question), [`Sender::looked_up`], [`Sender::sent`], [`Sender::loaded`], [`Sender::timeout`],
//! [`Sender::alarm`], and [`Sender::restore`] once when the object starts.
//!
//! The rules, each in the file named after it:
//! - [`admit`]: copies join the first copy's answer; a vouched accepted hash is answered at once; a
//!   nonce below the mined count is checked by hash before it is refused; the queue bound refuses
//!   the highest nonce waiting, never the one that unblocks the queue.
//! - [`turn`]: the lock goes to the lowest waiting nonce; a nonce above the known next one waits up
//!   to `NONCE_GAP_WAIT_MS`; nothing is granted while the next nonce is unknown; one due time for
//!   the sender.
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

pub mod action;
mod admit;
mod holding;
mod knowledge;
pub mod refusal;
mod settings;
mod tracking;
mod turn;
mod view;

pub use action::*;
pub use refusal::Refusal;
pub use settings::{
    Counters, PoolKind, ReplacementPolicy, Settings, DEFAULT_GAP_WAIT_MS, HEDERA_CHAIN_IDS,
};

use crate::jsonrpc::Answer;
use crate::metrics::Metric;
use crate::ordering::accepted::Accepted;
use crate::transaction::TxHash;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

/// Where a transaction is in its sender's object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Asked by hash before it is admitted or refused.
    Checking(LookupId, Check),
    /// Waiting for the lock.
    Waiting,
    /// Holds the lock.
    Holding,
}

/// Why an arriving transaction is asked by hash first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// Its nonce is below the mined count: known, it gets its hash; unknown, it is stale.
    Stale,
    /// Its hash was accepted but the upstream has not confirmed it in this object's life.
    Accepted,
}

/// A transaction in the object: queued, checked or holding, with every client waiting for it.
#[derive(Debug, Clone)]
struct Entry {
    hash: TxHash,
    nonce: u64,
    request: Rc<str>,
    arrived_ms: u64,
    tickets: Vec<Ticket>,
    stage: Stage,
    /// Read back from storage (a resend the relay makes itself): no row to write before its send.
    stored: bool,
    /// The `X-Request-Id` of the client request that brought it first.
    request_id: Option<Rc<str>>,
    /// A send-and-wait call: a nonce gap at its turn is refused (EIP-7966 code 6).
    sync: bool,
}

/// The lock's holder.
#[derive(Debug, Clone, Copy)]
struct Holding {
    entry: u64,
    session_key: SessionKey,
    acquired_ms: u64,
    /// The next nonce at the grant.
    expected: u64,
    phase: Phase,
    /// How many times it was force-released and resent.
    recoveries: u32,
}

/// What the holder is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Asking whether its nonce (below the next one) is mined and whether the upstream has it.
    Checking(LookupId),
    /// Its bytes are with the upstream (retried until the deadline).
    Sending { deadline_ms: u64 },
    /// Force-released: asking the upstream by hash what became of it.
    Recovering(LookupId),
}

/// Why a lookup was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    /// The sender's counts (and the genesis hash until it is checked).
    Nonces,
    /// The accepted hashes the counts contradict, with the counts already found.
    Verify { pending: u64, latest: Option<u64> },
    /// An arriving transaction's hash.
    Entry(u64),
    /// The holder's nonce below the next one: mined count and hash.
    Holder(SessionKey),
    /// A force-released holder: counts and hash.
    Recover(SessionKey),
    /// The tracking check: the mined count and the pending transactions by hash.
    Track,
    /// Which transactions took the nonces of replaced ones (by sender and nonce).
    ReplacedBy,
}

/// The sender's nonce lookup (one at a time) and who waits for it.
#[derive(Debug, Default)]
struct NonceLookup {
    /// The running lookup (its counts or its verification).
    running: Option<LookupId>,
    /// The next nonce became unknown after the running lookup was asked: its counts may be older
    /// than what made them unknown, so another follows.
    rerun: bool,
    /// Pending-count questions waiting for the running lookup.
    counts: Vec<Ticket>,
    /// After a failed lookup, the next one not before this time (Unix ms).
    not_before_ms: u64,
    /// Failed lookups in a row, for the backoff.
    failures: u32,
}

/// The genesis hash the stored state belongs to.
#[derive(Debug, Default)]
struct Chain {
    /// The genesis hash, as stored or as learned.
    genesis: Option<String>,
    /// Whether the upstream's genesis hash was compared with it since the object started.
    checked: bool,
    /// Whether it is in storage (written with the first stored transaction, not before: a
    /// sender that only reads its count stores nothing).
    persisted: bool,
}

/// One sender's machine. See the module documentation.
pub struct Sender {
    settings: Settings,
    /// The sender, lowercase 0x hex (for messages and metrics).
    address: String,
    entries: HashMap<u64, Entry>,
    /// The entries by hash (each hash at most once: copies join).
    by_hash: HashMap<TxHash, u64>,
    holder: Option<Holding>,
    accepted: Accepted,
    /// The sender's next nonce, when known: learned from the upstream, advanced by acceptances.
    next: Option<u64>,
    /// The sender's mined count as last learned.
    mined: Option<u64>,
    /// Since when the next nonce is unknown, Unix ms: a client's transaction waits at most
    /// `LOCK_MAX_HOLD_MS` of it.
    unknown_since_ms: u64,
    /// How many times each stored transaction was sent again because the upstream did not have it.
    resends: HashMap<TxHash, u32>,
    /// When the queue last learned of a gap below its waiters, Unix ms: their gap wait counts
    /// from then at the earliest.
    gap_opened_ms: u64,
    lookups: HashMap<LookupId, (Purpose, u64)>,
    nonces: NonceLookup,
    chain: Chain,
    /// Stored transactions not yet checked against the upstream since the object started.
    unverified: bool,
    /// Waiting for `loaded` after an [`Action::Load`]: nothing is granted meanwhile.
    loading: bool,
    /// When the storage alarm is set (Unix ms), 0 when it is not.
    alarm_until_ms: u64,
    /// When the pending transactions are next checked (Unix ms), while any are tracked.
    track_due_ms: Option<u64>,
    /// Whether the tracking check runs.
    tracking: bool,
    /// Replaced transactions (nonce, hash) whose replacements each lookup asks for.
    replaced: HashMap<LookupId, Vec<(u64, TxHash)>>,
    /// Recent refusals and failures by hash (`GET /tx/{hash}`'s `failed`), newest last.
    failures: VecDeque<(TxHash, u64, u64, String)>,
    actions: VecDeque<Action>,
    ids: u64,
    /// What happened since the object started.
    pub counters: Counters,
}

impl Sender {
    /// A fresh machine: nothing known, the lock free.
    pub fn new(settings: Settings) -> Self {
        Sender {
            settings,
            address: String::new(),
            entries: HashMap::new(),
            by_hash: HashMap::new(),
            holder: None,
            accepted: Accepted::new(settings.idempotency_ttl_ms, settings.track_ttl_ms),
            next: None,
            mined: None,
            unknown_since_ms: 0,
            resends: HashMap::new(),
            gap_opened_ms: 0,
            lookups: HashMap::new(),
            nonces: NonceLookup::default(),
            chain: Chain::default(),
            unverified: false,
            loading: false,
            alarm_until_ms: 0,
            track_due_ms: None,
            tracking: false,
            replaced: HashMap::new(),
            failures: VecDeque::new(),
            actions: VecDeque::new(),
            ids: 0,
            counters: Counters::default(),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// New settings, from the next event on: the object resolves `UPSTREAM_POOL=auto` (and the
    /// replacement policy that follows from it) once it learns the chain id from a send.
    pub fn set_settings(&mut self, settings: Settings) {
        self.settings = settings;
    }

    /// Names the sender (lowercase 0x address) in refusals and metrics.
    pub fn set_address(&mut self, address: &str) {
        if self.address != address {
            self.address = address.to_string();
        }
    }

    /// The next action to carry out, in order; `None` when there is nothing to do.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// The earliest time (Unix ms) at which [`Sender::timeout`] has something to do: a gap wait
    /// or a waiter's wait running out, a lookup to start again, a holder or lookup that never
    /// reported. `None` when only an event can change anything.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.due_ms()
    }

    /// Whether nothing is in flight or waiting: no holder, no entry, no lookup, nothing to
    /// verify or load.
    pub fn is_quiet(&self) -> bool {
        self.holder.is_none()
            && self.entries.is_empty()
            && self.lookups.is_empty()
            && !self.unverified
            && !self.loading
    }

    /// The sender's next nonce as known, and its mined count as last learned.
    pub fn nonces(&self) -> (Option<u64>, Option<u64>) {
        (self.next, self.mined)
    }

    /// Takes the state an earlier instance stored, once, before any other event: the genesis
    /// hash of its chain and the stored transactions (`hash`, `nonce`, stored at Unix ms), oldest
    /// first. They count as accepted but not vouched for: the first lookup asks the upstream
    /// about every one not known to be mined, and those it no longer has are sent again.
    pub fn restore(&mut self, chain: Option<String>, rows: &[(TxHash, u64, u64)], now_ms: u64) {
        self.chain.persisted = chain.is_some();
        self.chain.genesis = chain;
        for &(hash, nonce, at_ms) in rows {
            let pruned = self.accepted.record(hash, nonce, at_ms, false);
            self.pruned(pruned, now_ms);
        }
        let pruned = self.accepted.prune(now_ms);
        self.pruned(pruned, now_ms);
        self.unverified = !self.accepted.is_empty();
        self.step(now_ms);
    }

    /// A timer event: whatever is due at `now_ms`.
    pub fn timeout(&mut self, now_ms: u64) {
        self.step(now_ms);
    }

    /// The storage alarm at `now_ms` (it fires at least once, maybe more): the same as a
    /// timeout, and the alarm set again while work is left (a holder, waiters, lookups, stored
    /// transactions to check, tracked ones), or deleted.
    pub fn alarm(&mut self, now_ms: u64) {
        self.alarm_until_ms = 0;
        self.step(now_ms);
    }

    fn id(&mut self) -> u64 {
        self.ids += 1;
        self.ids
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

    /// Answers every ticket of the entry with `refusal`; the entry leaves. The relay's own
    /// transaction is not lost with it: a copy of one the relay accepted and still follows, or
    /// the relay's stored resend refused for the queue's sake (its next nonce unknown, a check
    /// that failed, a gap), stays followed, checked again with the next counts and sent from its
    /// stored bytes while the upstream lacks it. Only a stale nonce or a refused replacement
    /// settles it.
    fn refuse(&mut self, entry: u64, refusal: Refusal) {
        if let Some(e) = self.remove_entry(entry) {
            let at_ms = e.arrived_ms;
            let settles = matches!(refusal, Refusal::Stale { .. } | Refusal::Replacement { .. });
            if e.stored && !settles && self.accepted.get(&e.hash, at_ms).is_none() {
                let pruned = self.accepted.record(e.hash, e.nonce, at_ms, false);
                self.pruned(pruned, at_ms);
            }
            if self
                .accepted
                .get(&e.hash, at_ms)
                .is_some_and(|tx| !tx.status.is_final())
            {
                self.unverified = true;
            }
            self.emit(tagged(
                Metric::new("tx_refused", "", refusal.label())
                    .value("count", 1.0)
                    .field("nonce", e.nonce)
                    .field("tx_hash", crate::hex::encode(&e.hash)),
                &e.request_id,
            ));
            let error = refusal.to_rpc(&self.address);
            self.failed(e.hash, e.nonce, e.arrived_ms, error.message.clone());
            self.answer(&e.tickets, &Answer::error(&error), refusal.retry_after_s());
        }
    }

    fn remove_entry(&mut self, entry: u64) -> Option<Entry> {
        let e = self.entries.remove(&entry)?;
        if self.by_hash.get(&e.hash) == Some(&entry) {
            self.by_hash.remove(&e.hash);
        }
        Some(e)
    }

    fn forget_rows(&mut self, hashes: Vec<TxHash>) {
        if !hashes.is_empty() {
            self.push(Action::Forget(hashes));
        }
    }

    /// Remembers a failure of `hash` (for `GET /tx/{hash}`), the newest 256.
    fn failed(&mut self, hash: TxHash, nonce: u64, now_ms: u64, why: String) {
        if self.failures.len() >= 256 {
            self.failures.pop_front();
        }
        self.failures.push_back((hash, nonce, now_ms, why));
    }

    /// After every event: prunes, expires, starts lookups and the tracking check, grants, and
    /// keeps the alarm and the storage.
    fn step(&mut self, now_ms: u64) {
        let pruned = self.accepted.prune(now_ms);
        self.pruned(pruned, now_ms);
        self.expire(now_ms);
        self.want_nonces(now_ms);
        self.want_track(now_ms);
        self.advance(now_ms);
        self.keep_storage();
        self.keep_alarm(now_ms);
    }

    /// Whether durable work is under way, work an evicted object must come back to: a stored
    /// transaction queued or being sent, stored transactions to check or to load. Waiters and
    /// lookups alone are not: their clients' requests end with the object, and a read (a
    /// pending-count question, a transaction's status) must not write to storage (the alarm is
    /// storage).
    fn durable(&self) -> bool {
        self.entries.values().any(|e| e.stored) || self.unverified || self.loading
    }

    /// The storage alarm at the earliest time it is wanted: while durable work is under way, a
    /// backstop one maximum hold and its grace ahead (an alarm already set serves); while
    /// transactions are tracked, the next tracking check. Set only when none is set or an
    /// earlier one is wanted (each set is a billed write); deleted when nothing is wanted.
    fn keep_alarm(&mut self, now_ms: u64) {
        let backstop = self.durable().then(|| {
            if self.alarm_until_ms > now_ms {
                self.alarm_until_ms
            } else {
                now_ms
                    .saturating_add(self.settings.max_hold_ms)
                    .saturating_add(self.settings.grace_ms())
            }
        });
        let wanted = match (backstop, self.track_due_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match wanted {
            Some(at) if self.alarm_until_ms == 0 || at < self.alarm_until_ms => {
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
    /// chain's genesis hash and the sender with it): a sender seen once costs nothing for good.
    fn keep_storage(&mut self) {
        if self.chain.persisted && self.is_quiet() && self.accepted.pending().is_empty() {
            self.chain.persisted = false;
            self.push(Action::Vacate);
        }
    }

    /// Carries out what pruning the accepted set did: rows no longer needed are deleted, expired
    /// ones reported.
    fn pruned(&mut self, pruned: crate::ordering::accepted::Pruned, now_ms: u64) {
        self.forget_rows(pruned.gone);
        let mut rows = Vec::new();
        for (hash, tx) in pruned.expired {
            self.counters.expired += 1;
            self.emit(
                Metric::new("tx_expired", "", "track_ttl")
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

/// `metric` with the client request's id, when there is one.
fn tagged(metric: Metric, request_id: &Option<Rc<str>>) -> Metric {
    match request_id {
        Some(id) => metric.field("request_id", id.as_ref()),
        None => metric,
    }
}

#[cfg(test)]
mod tests;
