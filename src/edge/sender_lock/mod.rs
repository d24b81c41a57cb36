//! The `SenderLock` Durable Object (wasm32 only): one per sender, named by the sender's lowercase
//! 0x address. A thin driver of the sender's lifecycle machine
//! ([`Sender`](crate::ordering::sender::Sender)): it feeds it every
//! request, lookup result, send result, timer and alarm with the time, carries out the actions it
//! hands back (SQL, the upstream calls as tasks of their own), and keeps one timer at the
//! machine's due time. Nothing is decided here.
//!
//! Storage, the object's SQLite:
//! - the tables of [`crate::ordering::store`] (`sends`: each holder's transaction, written before
//!   its first send, the platform's output gate holding the send until it is on disk; `meta`:
//!   the schema version, chain, sender and chain id), over the object's SQL ([`store`]). A row
//!   the platform refuses for its size (`SQLITE_TOOBIG`) refuses that transaction unsent and is
//!   never taken for supersession; the Worker refuses one that cannot fit (2 MB a row) before it
//!   is queued. The chain id, written with the first row, tells a restarted object its pool kind
//!   (`UPSTREAM_POOL=auto`) before it sends anything; rows of earlier releases without it give
//!   their transactions' chain id, and where none has one the object asks the upstream's
//!   `eth_chainId` before it restores them ([`Driver::ready`]): nothing is ever sent on a guessed
//!   pool kind;
//! - storage the object cannot read, of a newer schema, or of another chain than the one it now
//!   serves ([`ReadError`]), is left untouched: every request is answered HTTP 500 (the Worker
//!   then fails open: the sends go straight to the upstream, counted and logged; the per-sender
//!   view of another chain's storage lists what it keeps), the alarm is set again in
//!   [`ALARM_UNUSABLE_RETRY_MS`] (for a chain it cannot serve, backing off for a day, then not:
//!   [`crate::ordering::store::unserved_retry_at`]), and each request reads the storage again
//!   (`storage_unusable` is logged each time);
//! - the storage alarm, set while durable work is under way, so an evicted or restarted object
//!   comes back to finish it. Restart recovery is the machine's
//!   ([`Sender::restore`](crate::ordering::sender::Sender::restore)): the rows
//!   are read here when the object starts, and checked against the upstream at once.
//!
//! The parts: [`driver`] (the machine's driver), [`store`] (the SQL).
//!
//! A storage call that fails (an instance that a newer one superseded is stopped the moment it
//! touches storage) ends this instance's part: it sends nothing more, and every open request gets
//! HTTP 503 with [`wire::SUPERSEDED_HEADER`], which the Worker sends again to the current instance.

pub mod driver;
mod effects;
#[cfg(feature = "test-faults")]
mod faults;
pub mod routes;
pub mod store;

use crate::access::request_id;
use crate::config::ConfigError;
use crate::edge::backend::SENDER_HEADER;
use crate::edge::runtime::{chains_from_env, now_ms};
use crate::log;
use crate::ordering::store::{unserved_retry_at, ReadError};
use crate::relay::wire;
use driver::Driver;
use futures_util::future::select;
use routes::{chain_unknown_response, superseded_response};
use std::cell::RefCell;
use std::pin::pin;
use std::rc::Rc;
use std::time::Duration;
use worker::{
    console_log, durable_object, js_sys, wasm_bindgen::JsValue, Delay, DurableObject, Env, Method,
    Request, Response, ScheduledTime, State,
};

/// When an alarm that could not learn the chain id fires again, ms.
const ALARM_RETRY_MS: u64 = 5_000;

/// When the alarm of an object whose storage it cannot use fires again, ms: its storage (of a
/// newer release, during a rollback or a gradual deployment) keeps transactions that the release
/// that wrote it follows once it runs again.
pub const ALARM_UNUSABLE_RETRY_MS: u64 = 60_000;

/// Why an object has no driver.
#[derive(Clone)]
enum Unusable {
    /// A setting is wrong: every request gets the configuration error.
    Config(ConfigError),
    /// Its storage cannot be used: left untouched, the object fails open.
    Storage(ReadError),
}

/// The settings of the chain whose sender this object is, by its name: `{chainId}:{sender}` for
/// a served chain, the sender's address alone for the default chain (as before chains, and when
/// the runtime gives no name).
///
/// # Errors
/// [`Unusable::Config`]: that chain's settings can't be read, or its chain is no longer served
/// (`CHAINS`).
fn config_of_object(env: &Env, name: Option<&str>) -> Result<crate::config::Config, Unusable> {
    let chains = chains_from_env(env).map_err(Unusable::Config)?;
    match chains.of_object(name.unwrap_or_default()) {
        Some(Ok(config)) => Ok(config.as_ref().clone()),
        Some(Err(e)) => Err(Unusable::Config(e.clone())),
        None => Err(Unusable::Config(ConfigError::new(
            "CHAINS",
            format!(
                "does not list the chain of this sender's Durable Object {:?}: its stored \
                 transactions wait until the chain is served again",
                name.unwrap_or_default()
            ),
        ))),
    }
}

/// The per-sender view of an object whose storage holds another chain's transactions
/// ([`ReadError::OtherChain`]): `{"storage": "other_chain", "stored_chain_id", "serving_chain_id",
/// "stored": [{"hash", "nonce"}]}`, the transactions kept untouched.
fn other_chain_view(other: &crate::ordering::store::OtherChain) -> serde_json::Value {
    let stored: Vec<serde_json::Value> = other
        .rows
        .iter()
        .map(
            |(hash, nonce)| serde_json::json!({ "hash": crate::hex::encode(hash), "nonce": nonce }),
        )
        .collect();
    serde_json::json!({
        "storage": "other_chain",
        "stored_chain_id": other.stored,
        "serving_chain_id": other.serving,
        "stored": stored,
    })
}

/// One sender's lock. See the module documentation.
#[durable_object]
pub struct SenderLock {
    state: Rc<State>,
    env: Env,
    /// The object's tasks' shared state, or why there is none. (Test builds replace it after a
    /// simulated crash.)
    driver: RefCell<Result<Rc<Driver>, Unusable>>,
}

impl SenderLock {
    /// A driver on the stored state, or why there is none (a storage that cannot be used is
    /// logged: `storage_unusable`).
    fn start(state: &Rc<State>, env: &Env) -> Result<Rc<Driver>, Unusable> {
        let config = config_of_object(env, state.id().name().as_deref())?;
        let chain = config.chain_id;
        Driver::open(state.clone(), env.clone(), config)
            .map(Rc::new)
            .map_err(|e| {
                console_log!(
                    "{}",
                    log::line(
                        "storage_unusable",
                        &[
                            ("sender", state.id().name().unwrap_or_default().into()),
                            ("chain", chain.into()),
                            ("label", e.label().into()),
                            ("error", e.to_string().into()),
                        ]
                    )
                );
                Unusable::Storage(e)
            })
    }

    /// Test builds only, with `TEST_HIBERNATE=1`: an object that was idle and eligible for
    /// hibernation since its last event (no request or alarm served, no timer pending, no I/O
    /// under way: [`crate::ordering::bill::ObjectBill::held`]) lost its memory, as a hibernated
    /// one does in production ("When hibernated, the in-memory state is discarded"): the next
    /// event meets a new instance on the same storage. Local workerd never hibernates an object
    /// that has no WebSocket.
    #[cfg(feature = "test-faults")]
    fn hibernate_if_idle(&self) {
        let wanted = self.env.var("TEST_HIBERNATE").ok().map(|v| v.to_string());
        if wanted.as_deref() != Some("1") {
            return;
        }
        let Ok(driver) = self.driver.borrow().clone() else {
            return;
        };
        if driver.bill.borrow().held() || driver.superseded() {
            return;
        }
        // Its timer's task (waiting for a due time) ends with it.
        driver.rearm.borrow_mut().take();
        *self.driver.borrow_mut() = driver.restarted().map(Rc::new).map_err(Unusable::Storage);
    }

    /// When the alarm of an object without a driver comes back, Unix ms: storage it cannot read
    /// or of a newer release, [`ALARM_UNUSABLE_RETRY_MS`]; a chain it cannot serve (no longer in
    /// `CHAINS`, a wrong setting, storage of another chain), backing off from its newest stored
    /// transaction ([`unserved_retry_at`]), and `None` past a day: logged once
    /// (`object_unserved`), the storage kept for its sender's next request.
    fn retry_unusable(&self, unusable: &Unusable) -> Option<u64> {
        let now = now_ms();
        let newest_ms = match unusable {
            Unusable::Storage(ReadError::OtherChain(other)) => other.newest_ms,
            Unusable::Storage(_) => return Some(now.saturating_add(ALARM_UNUSABLE_RETRY_MS)),
            Unusable::Config(_) => {
                let store = crate::ordering::store::Store::open(store::EdgeSql::new(
                    self.state.storage().sql(),
                ));
                match store.read() {
                    // Nothing to come back for (tombstones need no alarm): it stops.
                    Ok(stored) => stored.rows.iter().map(|r| r.at_ms).max().unwrap_or(0),
                    Err(_) => return Some(now.saturating_add(ALARM_UNUSABLE_RETRY_MS)),
                }
            }
        };
        let at = unserved_retry_at(now, newest_ms);
        if at.is_none() {
            let why = match unusable {
                Unusable::Config(e) => e.to_string(),
                Unusable::Storage(e) => e.to_string(),
            };
            console_log!(
                "{}",
                log::line(
                    "object_unserved",
                    &[
                        ("sender", self.state.id().name().unwrap_or_default().into()),
                        ("error", why.into()),
                    ]
                )
            );
        }
        at
    }

    /// The driver; an object whose storage could not be used reads it again first.
    fn driver(&self) -> Result<Rc<Driver>, Unusable> {
        #[cfg(feature = "test-faults")]
        self.hibernate_if_idle();
        let current = self.driver.borrow().clone();
        if let Err(Unusable::Storage(_)) = current {
            let again = Self::start(&self.state, &self.env);
            *self.driver.borrow_mut() = again.clone();
            return again;
        }
        current
    }

    /// Test builds only: a request with `x-test-fault: unreadable-restart` restarts the object on
    /// storage it cannot read (the next four reads): its instance is stopped, as a deploy stops
    /// it ([`faults::unreadable_restart`]), and the object is left without a driver.
    ///
    /// # Errors
    /// The runtime's, when the request's headers can't be read.
    #[cfg(feature = "test-faults")]
    fn unreadable_restart_if_asked(&self, req: &Request) -> worker::Result<()> {
        if req
            .headers()
            .get(crate::edge::backend::TEST_FAULT_HEADER)?
            .as_deref()
            == Some("unreadable-restart")
        {
            if let Ok(driver) = self.driver() {
                faults::unreadable_restart(&driver);
            }
            *self.driver.borrow_mut() = Err(Unusable::Storage(ReadError::Unreadable(
                crate::ordering::store::StorageError {
                    op: "read",
                    message: "test fault".into(),
                },
            )));
        }
        Ok(())
    }
}

/// The answer to `req` of an object without a driver (`unusable`, why): HTTP 500 with the
/// configuration error, or with the storage's error (the Worker then fails open); the per-sender
/// view of an object keeping another chain's transactions lists them ([`other_chain_view`]).
///
/// # Errors
/// The runtime's, when the response can't be made.
fn unusable_response(req: &Request, unusable: Unusable) -> worker::Result<Response> {
    match unusable {
        // Another chain's transactions, kept untouched: the per-sender view lists them.
        Unusable::Storage(ReadError::OtherChain(other)) if req.path() == wire::STATE_PATH => {
            Response::ok(other_chain_view(&other).to_string())
        }
        Unusable::Config(e) => Response::error(e.to_string(), 500),
        // The Worker fails open on it: the sends go straight to the upstream.
        Unusable::Storage(e) => {
            Response::error(format!("{e}; the Worker sends directly (fail-open)"), 500)
        }
    }
}

impl DurableObject for SenderLock {
    fn new(state: State, env: Env) -> Self {
        let state = Rc::new(state);
        let driver = Self::start(&state, &env);
        SenderLock {
            state,
            env,
            driver: RefCell::new(driver),
        }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        // Test builds only: the object restarts on storage it cannot read (the next four reads).
        #[cfg(feature = "test-faults")]
        self.unreadable_restart_if_asked(&req)?;
        let driver = match self.driver() {
            Ok(driver) => driver,
            Err(unusable) => return unusable_response(&req, unusable),
        };
        if driver.superseded() {
            return superseded_response();
        }
        // Test builds only: `x-test-fault` (read once) makes this request meet a fault.
        #[cfg(feature = "test-faults")]
        let fault = req.headers().get(crate::edge::backend::TEST_FAULT_HEADER)?;
        #[cfg(feature = "test-faults")]
        match fault.as_deref() {
            Some("reset-once") => faults::reset_once(&driver),
            Some("storage-fails") => faults::storage_fails_once(&driver),
            _ => {}
        }
        // Every request but the per-sender view is counted and holds the object until answered.
        let _held = (req.path() != wire::STATE_PATH).then(|| driver.request());
        if let Some(sender) = req.headers().get(SENDER_HEADER)? {
            driver.set_sender(&sender);
        }
        let rid: Option<Rc<str>> = req.headers().get(request_id::HEADER)?.map(Rc::from);
        match (req.method(), req.path().as_str()) {
            (Method::Post, wire::SEND_PATH) => {
                let body = req.text().await?;
                #[cfg(feature = "test-faults")]
                if fault.as_deref() == Some("throw-after-forward") {
                    if let Ok(send) = wire::decode_send(&body) {
                        driver.mark_crash(&send.txs);
                    }
                }
                let response = driver.send(&body, rid).await;
                // Test builds only: after a crash or a failed write, the next request meets a new
                // instance on the same storage, as the runtime starts one.
                #[cfg(feature = "test-faults")]
                if driver.crashed() || driver.superseded() {
                    *self.driver.borrow_mut() =
                        driver.restarted().map(Rc::new).map_err(Unusable::Storage);
                }
                response
            }
            // Every other route: stored transactions first know their chain (`Driver::ready`).
            _ if !driver.ready(None).await => chain_unknown_response(),
            (Method::Get, wire::PENDING_COUNT_PATH) => driver.pending_count().await,
            (Method::Post, wire::CANCEL_PATH) => driver.cancel(&req.text().await?).await,
            (Method::Get, wire::STATE_PATH) => Response::ok(driver.view().await.to_string()),
            (Method::Get, path) if path.starts_with(wire::TX_PREFIX) => {
                let hash = crate::relay::status::hash_of_path(path).and_then(Result::ok);
                match hash.and_then(|hash| driver.status(&hash)) {
                    Some(status) => Response::ok(status.to_string()),
                    None => Response::error("unknown transaction", 404),
                }
            }
            _ => Response::error("not found", 404),
        }
    }

    async fn alarm(&self) -> worker::Result<Response> {
        let driver = match self.driver() {
            Ok(driver) => driver,
            Err(unusable) => {
                // Its storage is left as it is; the alarm comes back for it (a newer release's
                // storage, a setting put right, or its chain served again, by a redeploy), for a
                // chain it cannot serve at most a day.
                let Some(at) = self.retry_unusable(&unusable) else {
                    return Response::ok("");
                };
                let date = js_sys::Date::new(&JsValue::from_f64(at as f64));
                let _ = self
                    .state
                    .storage()
                    .set_alarm(ScheduledTime::new(date))
                    .await;
                return Response::ok("");
            }
        };
        let _held = driver.hold();
        driver.bill.borrow_mut().alarms_fired += 1;
        if !driver.ready(None).await {
            driver.alarm_again_in(ALARM_RETRY_MS).await;
            return Response::ok("");
        }
        driver.alarm();
        // An object the alarm woke has no client keeping it alive: stay until the work it started
        // is done (told when the machine is quiet, not polled), at most one maximum hold (the
        // machine sets the alarm again if work is left).
        let until = now_ms().saturating_add(driver.config().lock_max_hold_ms);
        while !driver.is_quiet() && !driver.superseded() && now_ms() < until {
            let quiet = driver.when_quiet();
            let limit = pin!(Delay::from(Duration::from_millis(
                until.saturating_sub(now_ms())
            )));
            select(quiet, limit).await;
        }
        if !driver.superseded() {
            driver.alarm_done().await;
        }
        Response::ok("")
    }
}
