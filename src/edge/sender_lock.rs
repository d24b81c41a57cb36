//! The `SenderLock` Durable Object (wasm32 only): one per sender, named by the sender's lowercase
//! 0x address. Its [`SenderState`] is the lock, the nonce-ordered queue and the idempotency by
//! hash; this adapter adds the platform parts:
//!
//! - the lock record `{session_key, acquired_at_ms}` under the storage key `lock` while a lock is
//!   held, and a storage alarm at `acquired_at_ms + LOCK_MAX_HOLD_MS`;
//! - the accepted hashes in the object's SQLite storage (table `accepted`: `hash` TEXT primary
//!   key, `nonce` TEXT, decimal, `at_ms` INTEGER), read back when the object starts, so a
//!   restarted object still answers them within `IDEMPOTENCY_TTL_S`;
//! - the holder's sends ([`crate::upstream::submit`]: retries with the original bytes, "already known" and
//!   "nonce too low" resolved by hash), then the release, which hands the lock on, keeps the next
//!   nonce, or looks it up anew (`eth_getTransactionCount` at `pending` and `latest`);
//! - the alarm handler, which force-releases a lock held too long, including a stale record left by
//!   a previous incarnation of the object (restored at construction).
//!
//! Storage calls that must stay in order are issued together, before any await, so a later
//! holder's writes are never overtaken by an earlier holder's deletes.

use crate::access::request_id;
use crate::config::{Config, ConfigError};
use crate::edge::backend::SENDER_HEADER;
use crate::edge::platform::{config_from_env, emit, now_ms, yield_now};
use crate::edge::upstream::HttpUpstream;
use crate::hex;
use crate::jsonrpc::{self, Answer};
use crate::log;
use crate::metrics::Metric;
use crate::ordering::queue::{Expiry, Handoff, Lock, SessionKey, Turn};
use crate::ordering::seen::TxHash;
use crate::ordering::sender::{Admission, Finished, Held, SenderState, Settings};
use crate::relay::wire::{self, WireTx};
use crate::upstream::submit::{submit, Sending};
use crate::upstream::{error_metric, Upstream};
use futures_util::future::{join, join_all, poll_fn, select, Either};
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;
use worker::{
    console_log, durable_object, js_sys, wasm_bindgen::JsValue, Delay, DurableObject, Env, Method,
    Request, Response, ScheduledTime, SqlStorageValue, State, Storage,
};

/// The storage key of the lock record.
const LOCK_KEY: &str = "lock";
/// The method that learns a sender's nonces from the upstream.
const NONCE_LOOKUP: &str = "eth_getTransactionCount";
/// How many times a nonce lookup is tried before the queue goes on without it.
const LOOKUP_ATTEMPTS: u32 = 3;
/// The pause between two tries of a nonce lookup, in ms.
const LOOKUP_RETRY_MS: u64 = 100;
/// A nonce lookup's whole budget, ms (below the queue's `LOOKUP_TIMEOUT_MS`).
const LOOKUP_BUDGET_MS: u64 = 5_000;

/// The lock record as stored, one per busy period of the lock: the session key (UUID text) and
/// acquisition time (Unix ms) of the holder that wrote it, and the lease (Unix ms) until which a
/// restarted object holds newcomers. Every holder whose deadline falls within the lease goes
/// without a write; the lease is renewed (to the holder's deadline + [`lease_extra_ms`]) when a
/// holder's deadline would pass it. After a crash, newcomers so wait at most that extra time
/// longer than the crashed holder's deadline. A record without a lease (older objects) holds until
/// `acquired_at_ms + LOCK_MAX_HOLD_MS`.
#[derive(Serialize, Deserialize)]
struct LockRecord {
    session_key: String,
    acquired_at_ms: u64,
    #[serde(default)]
    held_until_ms: Option<u64>,
}

/// How far a lock record's lease reaches past the deadline of the holder that wrote it, ms: a
/// quarter of `LOCK_MAX_HOLD_MS`, at most 5 s. A busy sender writes its record about once per
/// this much time instead of once per transaction.
fn lease_extra_ms(max_hold_ms: u64) -> u64 {
    (max_hold_ms / 4).min(5_000)
}

/// A row of the `accepted` table.
#[derive(Deserialize)]
struct AcceptedRow {
    hash: String,
    nonce: String,
    at_ms: f64,
}

fn at_ms(unix_ms: u64) -> ScheduledTime {
    ScheduledTime::new(js_sys::Date::new(&JsValue::from_f64(unix_ms as f64)))
}

fn storage_error(op: &str, e: &worker::Error) {
    console_log!(
        "{}",
        log::line(
            "storage_error",
            &[("op", op.into()), ("error", e.to_string().into())]
        )
    );
}

/// What one call from the Worker brings with it.
#[derive(Clone, Copy)]
struct Call<'a> {
    config: &'a Config,
    /// The `X-Request-Id` of the client request behind the call, for the metrics.
    rid: Option<&'a str>,
    sender: &'a str,
    /// Test builds only: stop after the send as if the object crashed (`test-faults`).
    crash: bool,
}

/// One sender's lock. See the module documentation.
#[durable_object]
pub struct SenderLock {
    state: State,
    env: Env,
    /// The settings, read once: vars and secrets do not change during an object's life.
    config: Result<Config, ConfigError>,
    sender: RefCell<String>,
    inner: Rc<RefCell<SenderState>>,
    /// The lease of the lock record on disk (Unix ms), 0 when there is none.
    lease_until_ms: Rc<Cell<u64>>,
}

impl SenderLock {
    fn storage(&self) -> Storage {
        self.state.storage()
    }

    fn upstream<'a>(&'a self, config: &'a Config, rid: Option<&'a str>) -> HttpUpstream<'a> {
        HttpUpstream {
            config,
            env: &self.env,
            request_id: rid,
        }
    }

    fn sender(&self) -> String {
        let known = self.sender.borrow().clone();
        if known.is_empty() {
            self.state.id().name().unwrap_or_default()
        } else {
            known
        }
    }

    /// Makes sure a restarted object would hold newcomers until `lock`'s deadline: nothing to do
    /// when the busy period's lease (see [`LockRecord`]) covers it; otherwise writes the record
    /// with a new lease (and, at the start of a busy period, the alarm at this holder's deadline;
    /// the alarm handler moves it on to later holders' deadlines only when it fires), issued
    /// together, and waits until they are on disk, before the transaction leaves.
    async fn persist(&self, lock: Lock, max_hold_ms: u64) {
        let leased = self.lease_until_ms.get();
        if lock.deadline_ms(max_hold_ms) <= leased {
            return;
        }
        let lease = lock
            .deadline_ms(max_hold_ms)
            .saturating_add(lease_extra_ms(max_hold_ms));
        self.lease_until_ms.set(lease);
        let record = LockRecord {
            session_key: lock.session_key.to_string(),
            acquired_at_ms: lock.acquired_at_ms,
            held_until_ms: Some(lease),
        };
        let storage = self.storage();
        let put = storage.put(LOCK_KEY, record);
        let written = if leased == 0 {
            let (put, alarm) =
                join(put, storage.set_alarm(at_ms(lock.deadline_ms(max_hold_ms)))).await;
            put.and(alarm)
        } else {
            put.await
        };
        // On disk before the transaction leaves: the record is what a restarted object finds.
        if let Err(e) = written.and(storage.sync().await) {
            storage_error("persist", &e);
        }
    }

    /// Clears the record and alarm after the lock went idle, issued together.
    async fn clear(&self) {
        self.lease_until_ms.set(0);
        let storage = self.storage();
        let (delete, alarm) = join(storage.delete(LOCK_KEY), storage.delete_alarm()).await;
        if let Err(e) = delete.map(|_| ()).and(alarm) {
            storage_error("clear", &e);
        }
    }

    /// Writes an accepted hash and deletes the ones that left the set (synchronous SQL; the
    /// object's output gate holds every answer until it is on disk).
    fn store_accepted(&self, hash: &TxHash, nonce: u64, now: u64, gone: &[TxHash]) {
        let sql = self.storage().sql();
        let written = sql.exec(
            "INSERT OR REPLACE INTO accepted (hash, nonce, at_ms) VALUES (?, ?, ?)",
            vec![
                SqlStorageValue::from(hex::encode(hash)),
                SqlStorageValue::from(nonce.to_string()),
                SqlStorageValue::from(now as i64),
            ],
        );
        if let Err(e) = written {
            storage_error("accepted_insert", &e);
        }
        self.forget_accepted(gone);
    }

    fn forget_accepted(&self, gone: &[TxHash]) {
        let sql = self.storage().sql();
        for hash in gone {
            if let Err(e) = sql.exec(
                "DELETE FROM accepted WHERE hash = ?",
                vec![SqlStorageValue::from(hex::encode(hash))],
            ) {
                storage_error("accepted_delete", &e);
            }
        }
    }

    /// Storage and lookups after a step of the state machine: an idle lock clears its record; a
    /// relearn clears it and asks the upstream for the sender's nonces; a handed-on lock is
    /// persisted by its new holder as it wakes.
    async fn after(&self, config: &Config, rid: Option<&str>, handoff: Handoff) {
        match handoff {
            Handoff::Idle => self.clear().await,
            Handoff::Relearn => {
                self.clear().await;
                self.lookup(config, rid).await;
            }
            Handoff::Next(_) | Handoff::Ignored => {}
        }
    }

    /// Asks the upstream for the sender's pending and mined counts, at once, and reports them.
    async fn lookup(&self, config: &Config, rid: Option<&str>) {
        let sender = self.sender();
        let (pending, mined) = join(
            self.nonce_count(config, rid, &sender, "pending"),
            self.nonce_count(config, rid, &sender, "latest"),
        )
        .await;
        let now = now_ms();
        let handoff = match pending {
            Some(pending) => self.inner.borrow_mut().learned(pending, mined, now),
            None => self.inner.borrow_mut().lookup_failed(now),
        };
        if handoff == Handoff::Idle && self.inner.borrow().queue().holder().is_none() {
            self.clear().await;
        }
    }

    /// `eth_getTransactionCount(sender, tag)` from the upstream. Up to [`LOOKUP_ATTEMPTS`] tries,
    /// [`LOOKUP_RETRY_MS`] apart, within [`LOOKUP_BUDGET_MS`], while the upstream can't be used;
    /// an answer without a count is not asked again. On failure a `nonce_lookup_failed` metric and
    /// `None`.
    async fn nonce_count(
        &self,
        config: &Config,
        rid: Option<&str>,
        sender: &str,
        tag: &str,
    ) -> Option<u64> {
        let request = serde_json::json!({
            "jsonrpc": "2.0",
            "id": 1,
            "method": NONCE_LOOKUP,
            "params": [sender, tag],
        })
        .to_string();
        let upstream = self.upstream(config, rid);
        let deadline = now_ms().saturating_add(LOOKUP_BUDGET_MS);
        let (mut last_error, mut tries) = (String::new(), 0);
        for attempt in 1..=LOOKUP_ATTEMPTS {
            tries = attempt;
            if attempt > 1 {
                upstream.sleep(LOOKUP_RETRY_MS).await;
            }
            let timeout_ms = config
                .upstream_timeout_ms
                .min(deadline.saturating_sub(now_ms()))
                .max(1);
            match upstream.post(&request, timeout_ms).await {
                Ok(reply) => {
                    if let Some(count) = jsonrpc::result_quantity(&reply.body) {
                        return Some(count);
                    }
                    // An answer without a count (a JSON-RPC error): asking again won't change it.
                    last_error = format!("unusable answer: {:.200}", reply.body);
                    break;
                }
                Err(e) => {
                    emit(&self.env, &error_metric(NONCE_LOOKUP, &e), rid);
                    last_error = e.to_string();
                }
            }
        }
        emit(
            &self.env,
            &Metric::new("nonce_lookup_failed", sender, tag)
                .value("count", 1.0)
                .field("attempts", tries)
                .field("error", config.redact(&last_error)),
            rid,
        );
        None
    }

    /// Waits for `turn`, waking at the queue's next tick (a gap wait or a lookup running out) to
    /// let it move on ([`SenderState::tick`]), and setting that timer anew whenever the queue
    /// changes.
    async fn wait(&self, mut turn: Turn) -> Lock {
        loop {
            let (next_tick, generation) = {
                let inner = self.inner.borrow();
                (inner.next_tick_ms(), inner.queue().generation())
            };
            let now = now_ms();
            if next_tick.is_some_and(|tick| now >= tick) {
                // Time alone lets the queue move: grant the due waiter (maybe this one).
                self.inner.borrow_mut().tick(now);
            }
            let inner = &self.inner;
            let changed = poll_fn(|cx| match Pin::new(&mut turn).poll(cx) {
                Poll::Ready(lock) => Poll::Ready(Some(lock)),
                Poll::Pending if inner.borrow().queue().generation() != generation => {
                    Poll::Ready(None)
                }
                Poll::Pending => Poll::Pending,
            });
            match next_tick {
                Some(tick) if tick > now => {
                    let delay = Delay::from(Duration::from_millis(tick - now));
                    if let Either::Left((Some(lock), _)) =
                        select(Box::pin(changed), Box::pin(delay)).await
                    {
                        return lock;
                    }
                }
                _ => {
                    if let Some(lock) = changed.await {
                        return lock;
                    }
                }
            }
        }
    }

    /// A send (`POST /send`): admits every transaction in one turn, looks the nonces up if
    /// nothing is known yet, then answers each (see [`SenderState::admit`]).
    /// `crash`: test builds only, the holder stops after its send as if the object crashed,
    /// holding the lock (see the `test-faults` feature).
    async fn send(
        &self,
        config: &Config,
        rid: Option<&str>,
        body: &str,
        crash: bool,
    ) -> worker::Result<Response> {
        let txs = match wire::decode_send(body) {
            Ok(txs) => txs,
            Err(why) => return Response::error(why, 400),
        };
        let now = now_ms();
        let sender = self.sender();
        let (lookup, admissions) = {
            let mut inner = self.inner.borrow_mut();
            let lookup = inner.needs_lookup(now);
            if lookup {
                inner.begin_lookup(now);
            }
            let admissions: Vec<Admission> = txs
                .iter()
                .map(|tx| inner.admit(tx.hash, tx.nonce, now))
                .collect();
            (lookup, admissions)
        };
        if lookup {
            self.lookup(config, rid).await;
        }
        let call = Call {
            config,
            rid,
            sender: &sender,
            crash,
        };
        let answers = join_all(
            txs.iter()
                .zip(admissions)
                .map(|(tx, admission)| self.answer(&call, tx, admission)),
        )
        .await;
        if crash {
            return Err(worker::Error::RustError(
                "test fault: thrown after forwarding".into(),
            ));
        }
        Response::ok(wire::encode_answers(&answers))
    }

    async fn answer(&self, call: &Call<'_>, tx: &WireTx, admission: Admission) -> Answer {
        let (rid, sender) = (call.rid, call.sender);
        let metric = |event, label: &str| {
            Metric::new(event, sender, label)
                .value("count", 1.0)
                .field("nonce", tx.nonce)
                .field("tx_hash", hex::encode(&tx.hash))
        };
        match admission {
            Admission::Known => {
                emit(&self.env, &metric("tx_deduplicated", "accepted"), rid);
                Answer::hash(&tx.hash)
            }
            Admission::Copy(wait) => {
                emit(&self.env, &metric("tx_deduplicated", "in_flight"), rid);
                wait.await
            }
            Admission::Refused(refusal) => {
                emit(&self.env, &metric("tx_refused", refusal.label()), rid);
                Answer::error(&refusal.to_rpc(sender))
            }
            Admission::Queued(turn) => self.hold(call, tx, turn).await,
        }
    }

    /// A queued transaction: waits for the lock, sends with retries, releases.
    async fn hold(&self, call: &Call<'_>, tx: &WireTx, turn: Turn) -> Answer {
        let Call {
            config,
            rid,
            sender,
            crash,
        } = *call;
        let enqueued_at = now_ms();
        let lock = self.wait(turn).await;
        let granted_at = now_ms();
        let mut go = self
            .inner
            .borrow_mut()
            .go_ahead(&lock, tx.hash, tx.nonce, granted_at);
        if go.is_ok() && self.inner.borrow().needs_mined_count(tx.nonce) {
            // A replacement or a resend of a used nonce: is that nonce mined already?
            if let Some(mined) = self.nonce_count(config, rid, sender, "latest").await {
                let mut inner = self.inner.borrow_mut();
                inner.learned_mined(mined);
                go = inner.recheck(tx.nonce);
            }
        }
        if let Err(refusal) = go {
            let answer = Answer::error(&refusal.to_rpc(sender));
            emit(
                &self.env,
                &Metric::new("tx_refused", sender, refusal.label())
                    .value("count", 1.0)
                    .field("nonce", tx.nonce)
                    .field("tx_hash", hex::encode(&tx.hash)),
                rid,
            );
            let finished = self.inner.borrow_mut().finish(
                Held::of(&lock, tx.hash, tx.nonce),
                None,
                &answer,
                now_ms(),
            );
            self.after(config, rid, finished.handoff).await;
            return answer;
        }
        if let Some(expected) = lock.expected_nonce.filter(|&expected| tx.nonce > expected) {
            // The missing nonces did not come within NONCE_GAP_WAIT_MS: this one goes anyway.
            emit(
                &self.env,
                &Metric::new("gap_wait_expired", sender, "missing_nonce")
                    .value("count", 1.0)
                    .value("waited_ms", granted_at.saturating_sub(enqueued_at) as f64)
                    .field("nonce", tx.nonce)
                    .field("expected_nonce", expected),
                rid,
            );
        }
        self.persist(lock, config.lock_max_hold_ms).await;
        let sending = Sending {
            hash: &tx.hash,
            nonce: tx.nonce,
            sender,
        };
        let deadline = lock.deadline_ms(config.lock_max_hold_ms);
        let upstream = self.upstream(config, rid);
        let submission = submit(
            &upstream,
            &tx.request,
            sending,
            &config.retry_policy(),
            deadline,
        )
        .await;
        if crash {
            // Gone without a release, as a crash would leave it: only the alarm frees the lock.
            return submission.answer;
        }
        self.inner.borrow_mut().counters.retried += u64::from(submission.attempts - 1);
        let released_at = now_ms();
        let finished: Finished = self.inner.borrow_mut().finish(
            Held::of(&lock, tx.hash, tx.nonce),
            Some(submission.class),
            &submission.answer,
            released_at,
        );
        let queue_depth = self.inner.borrow().queue().waiting();
        if let Handoff::Next(_) = finished.handoff {
            // The next holder goes first (it was woken by the release); this one's bookkeeping
            // follows, so the handoff costs only what the platform's own calls cost.
            yield_now().await;
        }
        if finished.accepted {
            self.store_accepted(&tx.hash, tx.nonce, released_at, &finished.gone);
        }
        emit(
            &self.env,
            &Metric::new("tx_forwarded", sender, submission.class.label())
                .value(
                    "lock_wait_ms",
                    granted_at.saturating_sub(enqueued_at) as f64,
                )
                .value(
                    "lock_hold_ms",
                    released_at.saturating_sub(granted_at) as f64,
                )
                .value("queue_depth", queue_depth as f64)
                .field("nonce", tx.nonce)
                .field("attempts", submission.attempts)
                .field("copies", finished.copies),
            rid,
        );
        if finished.handoff == Handoff::Ignored {
            console_log!(
                "{}",
                log::line(
                    "late_release_ignored",
                    &[
                        ("sender", sender.into()),
                        ("session_key", lock.session_key.to_string().into()),
                        (
                            "held_ms",
                            released_at.saturating_sub(lock.acquired_at_ms).into()
                        ),
                    ]
                )
            );
        }
        self.after(config, rid, finished.handoff).await;
        submission.answer
    }
}

impl DurableObject for SenderLock {
    fn new(state: State, env: Env) -> Self {
        let config = config_from_env(&env);
        // A misconfigured object answers every request with an error; its state is never used.
        let settings = config
            .as_ref()
            .map_or(Settings::DEFAULT, Config::sender_settings);
        let inner = Rc::new(RefCell::new(SenderState::new(settings)));
        let storage = state.storage();
        // The accepted hashes, oldest first; the ones past the window or the bound are deleted.
        // WITHOUT ROWID: the hash is the table's key, so an insert is one billed row written
        // instead of two (the row and its primary-key index; measured with `rowsWritten`).
        let sql = storage.sql();
        let loaded = sql
            .exec(
                "CREATE TABLE IF NOT EXISTS accepted (hash TEXT PRIMARY KEY, nonce TEXT NOT NULL, at_ms INTEGER NOT NULL) WITHOUT ROWID",
                None,
            )
            .and_then(|_| sql.exec("SELECT hash, nonce, at_ms FROM accepted ORDER BY at_ms", None))
            .and_then(|cursor| cursor.to_array::<AcceptedRow>());
        match loaded {
            Ok(rows) => {
                let mut gone = Vec::new();
                for row in rows {
                    let hash: Option<TxHash> =
                        hex::decode(&row.hash).ok().and_then(|b| b.try_into().ok());
                    if let (Some(hash), Ok(nonce)) = (hash, row.nonce.parse::<u64>()) {
                        gone.extend(inner.borrow_mut().restore_accepted(
                            hash,
                            nonce,
                            row.at_ms as u64,
                        ));
                    }
                }
                gone.extend(inner.borrow_mut().prune_accepted(now_ms()));
                for hash in gone {
                    let _ = sql.exec(
                        "DELETE FROM accepted WHERE hash = ?",
                        vec![SqlStorageValue::from(hex::encode(&hash))],
                    );
                }
            }
            Err(e) => storage_error("accepted_load", &e),
        }
        // A lock record found here was left by a previous incarnation: restore it so newcomers
        // queue behind it until its lease ends and the alarm force-releases it. Events wait until
        // this completes.
        let restored = inner.clone();
        let max_hold_ms = config.as_ref().map_or(30_000, |c| c.lock_max_hold_ms);
        let lease_until_ms = Rc::new(Cell::new(0));
        let lease = lease_until_ms.clone();
        let _init = state.block_concurrency_while(async move {
            if let Ok(Some(record)) = storage.get::<LockRecord>(LOCK_KEY).await {
                if let Ok(key) = uuid::Uuid::parse_str(&record.session_key) {
                    let until = record
                        .held_until_ms
                        .unwrap_or(record.acquired_at_ms.saturating_add(max_hold_ms));
                    lease.set(until);
                    // Restored as acquired one maximum hold before the lease ends.
                    restored
                        .borrow_mut()
                        .restore_lock(SessionKey(key), until.saturating_sub(max_hold_ms));
                    console_log!(
                        "{}",
                        log::line(
                            "lock_restored",
                            &[
                                ("session_key", record.session_key.into()),
                                ("acquired_at_ms", record.acquired_at_ms.into()),
                            ]
                        )
                    );
                }
                // The alarm that goes with the record is still set; make sure of it.
                if storage.get_alarm().await.ok().flatten().is_none() {
                    let _ = storage.set_alarm(ScheduledTime::from(0i64)).await;
                }
            }
            Ok(())
        });
        SenderLock {
            state,
            env,
            config,
            sender: RefCell::new(String::new()),
            inner,
            lease_until_ms,
        }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        let rid = req.headers().get(request_id::HEADER)?;
        if let Some(sender) = req.headers().get(SENDER_HEADER)? {
            *self.sender.borrow_mut() = sender;
        }
        let config = match &self.config {
            Ok(config) => config,
            Err(e) => return Response::error(e.to_string(), 500),
        };
        let now = now_ms();
        match (req.method(), req.path().as_str()) {
            (Method::Post, wire::SEND_PATH) => {
                let body = req.text().await?;
                #[cfg(feature = "test-faults")]
                let crash = req
                    .headers()
                    .get(crate::edge::backend::TEST_FAULT_HEADER)?
                    .as_deref()
                    == Some("throw-after-forward");
                #[cfg(not(feature = "test-faults"))]
                let crash = false;
                self.send(config, rid.as_deref(), &body, crash).await
            }
            (Method::Get, wire::NEXT_NONCE_PATH) => Response::ok(wire::encode_next_nonce(
                self.inner.borrow().next_after_accepted(now),
            )),
            (Method::Get, wire::STATE_PATH) => {
                let mut view = self.inner.borrow().view(now);
                view["sender"] = self.sender().into();
                Response::ok(view.to_string())
            }
            _ => Response::error("not found", 404),
        }
    }

    async fn alarm(&self) -> worker::Result<Response> {
        let Ok(config) = &self.config else {
            return Response::ok("");
        };
        let now = now_ms();
        let expiry = self.inner.borrow_mut().expire(now, config.lock_max_hold_ms);
        match expiry {
            Expiry::Free => self.clear().await,
            Expiry::NotYet(deadline) => {
                self.storage().set_alarm(at_ms(deadline)).await?;
            }
            Expiry::ForceReleased(stale) => {
                emit(
                    &self.env,
                    &Metric::new("force_release", self.sender(), "max_hold")
                        .value("held_ms", now.saturating_sub(stale.acquired_at_ms) as f64)
                        .value("queue_depth", self.inner.borrow().queue().waiting() as f64)
                        .field("session_key", stale.session_key.to_string())
                        .field("nonce", stale.nonce),
                    None,
                );
                self.after(config, None, Handoff::Relearn).await;
            }
        }
        Response::ok("")
    }
}
