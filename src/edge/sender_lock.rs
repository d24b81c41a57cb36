//! The `SenderLock` Durable Object (wasm32 only): one per sender, named by the sender's lowercase
//! 0x address. Its [`SenderQueue`] is the lock and its nonce-ordered queue; this adapter adds the
//! platform parts:
//!
//! - the lock record `{session_key, acquired_at_ms}` under the storage key `lock` while a lock is
//!   held, and a storage alarm at `acquired_at_ms + LOCK_MAX_HOLD_MS`;
//! - forwarding the holder's transaction to the upstream, then releasing (on success and on every
//!   error), which deletes the record and alarm or hands both to the next waiter;
//! - the alarm handler, which force-releases a lock held too long, including a stale record left by
//!   a previous incarnation of the object (restored at construction).
//!
//! Storage calls that must stay in order are issued together, before any await, so a later
//! holder's writes are never overtaken by an earlier holder's deletes.

use crate::config::{Config, ConfigError, DEFAULT_GAP_WAIT_MS};
use crate::edge::worker::{config_from_env, emit, now_ms, NONCE_HEADER, SENDER_HEADER};
use crate::jsonrpc::{self, RpcError};
use crate::log;
use crate::metrics::Metric;
use crate::ordering::{Expiry, Handoff, Lock, Outcome, SenderQueue, SessionKey, Turn};
use crate::relay::{self, UpstreamError};
use crate::edge::upstream;
use futures_util::future::{select, Either};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use worker::{
    console_log, durable_object, js_sys, wasm_bindgen::JsValue, Delay, DurableObject, Env, Request,
    Response, ScheduledTime, State, Storage,
};

/// The storage key of the lock record.
const LOCK_KEY: &str = "lock";
/// The method that learns a sender's next nonce from the upstream.
const NONCE_LOOKUP: &str = "eth_getTransactionCount";
/// How many times the next-nonce lookup is tried before the queue goes on without it.
const LOOKUP_ATTEMPTS: u32 = 3;
/// The pause between two tries of the next-nonce lookup, in ms.
const LOOKUP_RETRY_MS: u64 = 100;

/// The lock record as stored: the holder's session key (UUID text) and acquisition time (Unix ms).
#[derive(Serialize, Deserialize)]
struct LockRecord {
    session_key: String,
    acquired_at_ms: u64,
}

impl From<Lock> for LockRecord {
    fn from(lock: Lock) -> Self {
        LockRecord {
            session_key: lock.session_key.to_string(),
            acquired_at_ms: lock.acquired_at_ms,
        }
    }
}

fn at_ms(unix_ms: u64) -> ScheduledTime {
    ScheduledTime::new(js_sys::Date::new(&JsValue::from_f64(unix_ms as f64)))
}

/// One sender's lock. See the module documentation.
#[durable_object]
pub struct SenderLock {
    state: State,
    env: Env,
    /// The settings, read once: vars and secrets do not change during an object's life.
    config: Result<Config, ConfigError>,
    queue: Rc<RefCell<SenderQueue>>,
}

impl SenderLock {
    fn storage(&self) -> Storage {
        self.state.storage()
    }

    /// Writes `lock`'s record and its alarm, issued together, and waits until they are on disk.
    async fn persist(&self, lock: Lock, max_hold_ms: u64) {
        let storage = self.storage();
        let (put, alarm) = futures_util::future::join(
            storage.put(LOCK_KEY, LockRecord::from(lock)),
            storage.set_alarm(at_ms(lock.deadline_ms(max_hold_ms))),
        )
        .await;
        // On disk before the transaction leaves: the record is what a restarted object finds.
        if let Err(e) = put.and(alarm).and(storage.sync().await) {
            console_log!(
                "{}",
                log::line(
                    "storage_error",
                    &[("op", "persist".into()), ("error", e.to_string().into())]
                )
            );
        }
    }

    /// Clears the record and alarm after the lock went idle, issued together.
    async fn clear(&self) {
        let storage = self.storage();
        let (delete, alarm) =
            futures_util::future::join(storage.delete(LOCK_KEY), storage.delete_alarm()).await;
        if let Err(e) = delete.map(|_| ()).and(alarm) {
            console_log!(
                "{}",
                log::line(
                    "storage_error",
                    &[("op", "clear".into()), ("error", e.to_string().into())]
                )
            );
        }
    }

    /// Storage work after a release: only an idle lock clears; a handed-on lock is persisted by
    /// its new holder as it wakes; an ignored release changes nothing.
    async fn after(&self, handoff: Handoff) {
        if handoff == Handoff::Idle {
            self.clear().await;
        }
    }

    /// Waits for `turn`; when its gap wait runs out first, lets the queue move on without the
    /// missing nonce ([`SenderQueue::tick`]) and keeps waiting.
    async fn wait(&self, mut turn: Turn) -> Lock {
        loop {
            let now = now_ms();
            if now >= turn.gap_deadline_ms {
                self.queue.borrow_mut().tick(now);
                return (&mut turn).await;
            }
            let delay = Delay::from(Duration::from_millis(turn.gap_deadline_ms - now));
            if let Either::Left((lock, _)) = select(&mut turn, Box::pin(delay)).await {
                return lock;
            }
        }
    }

    /// The sender's next nonce according to the upstream (`eth_getTransactionCount` at
    /// `pending`). Up to [`LOOKUP_ATTEMPTS`] tries, each within 5 s, [`LOOKUP_RETRY_MS`] apart,
    /// while the upstream can't be used (each an `upstream_error` metric); an answer without a
    /// count is not asked again. On failure a `nonce_lookup_failed` metric and `None`: the queue
    /// goes on without a known next nonce.
    async fn pending_nonce(&self, config: &Config, sender: &str) -> Option<u64> {
        let request = serde_json::json!({
            "jsonrpc": "2.0",
            "id": 1,
            "method": NONCE_LOOKUP,
            "params": [sender, "pending"],
        })
        .to_string();
        let timeout_ms = config.upstream_timeout_ms.min(5_000);
        let (mut last_error, mut tries) = (String::new(), 0);
        for attempt in 1..=LOOKUP_ATTEMPTS {
            tries = attempt;
            if attempt > 1 {
                Delay::from(Duration::from_millis(LOOKUP_RETRY_MS)).await;
            }
            match upstream::post(config, &request, timeout_ms).await {
                Ok(answer) => {
                    if let Some(next) = jsonrpc::result_quantity(&answer) {
                        return Some(next);
                    }
                    // An answer without a count (a JSON-RPC error): asking again won't change it.
                    last_error = format!("unusable answer: {answer:.200}");
                    break;
                }
                Err(e) => {
                    emit(&self.env, &relay::upstream_error_metric(NONCE_LOOKUP, &e));
                    last_error = e.to_string();
                }
            }
        }
        emit(
            &self.env,
            &Metric::new("nonce_lookup_failed", sender, "no_next_nonce")
                .value("count", 1.0)
                .field("attempts", tries)
                .field("error", config.redact(&last_error)),
        );
        None
    }

    async fn forward(&self, config: &Config, body: &str) -> Result<String, UpstreamError> {
        upstream::post(config, body, config.upstream_timeout_ms).await
    }
}

impl DurableObject for SenderLock {
    fn new(state: State, env: Env) -> Self {
        let config = config_from_env(&env);
        let gap_wait_ms = config
            .as_ref()
            .map_or(DEFAULT_GAP_WAIT_MS, |c| c.nonce_gap_wait_ms);
        let queue = Rc::new(RefCell::new(SenderQueue::new(gap_wait_ms)));
        // A lock record found here was left by a previous incarnation: restore it so newcomers
        // queue behind it until its alarm force-releases it. Events wait until this completes.
        let (restored, storage) = (queue.clone(), state.storage());
        let _init = state.block_concurrency_while(async move {
            if let Ok(Some(record)) = storage.get::<LockRecord>(LOCK_KEY).await {
                if let Ok(key) = uuid::Uuid::parse_str(&record.session_key) {
                    restored
                        .borrow_mut()
                        .restore(SessionKey(key), record.acquired_at_ms);
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
            queue,
        }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        let body = req.text().await?;
        let sender = req.headers().get(SENDER_HEADER)?.unwrap_or_default();
        let config = match &self.config {
            Ok(config) => config,
            Err(e) => {
                let error = RpcError::new(jsonrpc::INTERNAL_ERROR, e.to_string());
                return Response::ok(error.response(&relay::request_id(&body)));
            }
        };
        let Some(nonce) = req
            .headers()
            .get(NONCE_HEADER)?
            .and_then(|v| v.parse::<u64>().ok())
        else {
            let error = RpcError::new(
                jsonrpc::INTERNAL_ERROR,
                "Durable Object request without a nonce",
            );
            return Response::ok(error.response(&relay::request_id(&body)));
        };
        let learn = {
            let mut queue = self.queue.borrow_mut();
            let learn = queue.needs_next_nonce();
            if learn {
                queue.begin_learning();
            }
            learn
        };
        let enqueued_at = now_ms();
        let turn = self.queue.borrow_mut().enqueue(nonce, enqueued_at);
        if learn {
            let next = self.pending_nonce(config, &sender).await;
            let mut queue = self.queue.borrow_mut();
            match next {
                Some(next) => queue.learn_next_nonce(next, now_ms()),
                None => queue.learning_failed(now_ms()),
            };
        }
        let lock = self.wait(turn).await;
        let granted_at = now_ms();
        if let Some(expected) = lock.expected_nonce.filter(|&expected| nonce > expected) {
            // The missing nonces did not come within NONCE_GAP_WAIT_MS: this one goes anyway.
            emit(
                &self.env,
                &Metric::new("gap_wait_expired", sender.clone(), "missing_nonce")
                    .value("count", 1.0)
                    .value("waited_ms", granted_at.saturating_sub(enqueued_at) as f64)
                    .field("nonce", nonce)
                    .field("expected_nonce", expected),
            );
        }
        self.persist(lock, config.lock_max_hold_ms).await;
        let result = self.forward(config, &body).await;
        #[cfg(feature = "test-faults")]
        if req
            .headers()
            .get(crate::edge::worker::TEST_FAULT_HEADER)?
            .as_deref()
            == Some("throw-after-forward")
        {
            // Throws out of the handler holding the lock, as a crash mid-processing would.
            return Err(worker::Error::RustError(
                "test fault: thrown after forwarding".into(),
            ));
        }
        let outcome = if relay::accepted(&result) {
            Outcome::Accepted
        } else {
            Outcome::Failed
        };
        let released_at = now_ms();
        let handoff = self
            .queue
            .borrow_mut()
            .release(lock.session_key, outcome, released_at);
        if let Err(e) = &result {
            emit(
                &self.env,
                &relay::upstream_error_metric(jsonrpc::SEND_RAW_TRANSACTION, e),
            );
        }
        let label = if outcome == Outcome::Accepted {
            "accepted"
        } else {
            "failed"
        };
        emit(
            &self.env,
            &Metric::new("tx_forwarded", sender.clone(), label)
                .value(
                    "lock_wait_ms",
                    granted_at.saturating_sub(enqueued_at) as f64,
                )
                .value(
                    "lock_hold_ms",
                    released_at.saturating_sub(granted_at) as f64,
                )
                .value("queue_depth", self.queue.borrow().waiting() as f64)
                .field("nonce", nonce),
        );
        if handoff == Handoff::Ignored {
            console_log!(
                "{}",
                log::line(
                    "late_release_ignored",
                    &[
                        ("sender", sender.clone().into()),
                        ("session_key", lock.session_key.to_string().into()),
                        (
                            "held_ms",
                            released_at.saturating_sub(lock.acquired_at_ms).into()
                        ),
                    ]
                )
            );
        }
        self.after(handoff).await;
        Response::ok(relay::answer_or_error(&body, result))
    }

    async fn alarm(&self) -> worker::Result<Response> {
        let max_hold_ms = self.config.as_ref().map_or(30_000, |c| c.lock_max_hold_ms);
        let now = now_ms();
        let expiry = self.queue.borrow_mut().expire(now, max_hold_ms);
        match expiry {
            Expiry::Free => self.clear().await,
            Expiry::NotYet(deadline) => {
                self.storage().set_alarm(at_ms(deadline)).await?;
            }
            Expiry::ForceReleased(stale, handoff) => {
                let sender = self.state.id().name().unwrap_or_default();
                emit(
                    &self.env,
                    &Metric::new("force_release", sender, "max_hold")
                        .value("held_ms", now.saturating_sub(stale.acquired_at_ms) as f64)
                        .value("queue_depth", self.queue.borrow().waiting() as f64)
                        .field("session_key", stale.session_key.to_string())
                        .field("handed_on", matches!(handoff, Handoff::Next(_))),
                );
                self.after(handoff).await;
            }
        }
        Response::ok("")
    }
}
