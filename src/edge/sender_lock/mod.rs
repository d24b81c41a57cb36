//! The `SenderLock` Durable Object (wasm32 only): one per sender, named by the sender's lowercase
//! 0x address. A thin driver of the sender's lifecycle machine
//! ([`Sender`](crate::ordering::sender::Sender)): it feeds it every
//! request, lookup result, send result, timer and alarm with the time, carries out the actions it
//! hands back (SQL, the upstream calls as tasks of their own), and keeps one timer at the
//! machine's due time. Nothing is decided here.
//!
//! Storage, the object's SQLite:
//! - table `sends` (`hash` TEXT primary key, `nonce` INTEGER, `raw` BLOB, `method` TEXT, `at_ms`
//!   INTEGER; WITHOUT ROWID, so a write is one billed row): each holder's transaction, its raw
//!   bytes and its send method, written before its first send (the platform's output gate holds
//!   the send until it is on disk), deleted when it did not go in or left the idempotency window.
//!   Earlier releases kept the upstream request's text in table `txs` (`request` TEXT, twice the
//!   bytes); those rows are still read, resent and deleted. A row the platform refuses for its
//!   size (`SQLITE_TOOBIG`) refuses that transaction unsent and is never taken for
//!   supersession; the Worker refuses one that cannot fit (2 MB a row) before it is queued;
//! - table `meta` (`key`, `value`): `chain`, the genesis hash of the chain the rows belong to,
//!   `sender`, and `chain_id`, the chain id the Worker checked them against, written with the
//!   first row: a restarted object knows its pool kind (`UPSTREAM_POOL=auto`) before it sends
//!   anything. Rows of earlier releases without it give their transactions' chain id; where none
//!   has one, the object asks the upstream's `eth_chainId` before it restores them
//!   ([`Driver::ready`]): nothing is ever sent on a guessed pool kind;
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
use crate::edge::runtime::{config_from_env, now_ms};
use crate::relay::wire;
use driver::Driver;
use routes::{chain_unknown_response, superseded_response};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use worker::{durable_object, Delay, DurableObject, Env, Method, Request, Response, State};

/// When an alarm that could not learn the chain id fires again, ms.
const ALARM_RETRY_MS: u64 = 5_000;

/// How often the alarm handler looks whether the work it started is done, ms.
const ALARM_POLL_MS: u64 = 100;

/// One sender's lock. See the module documentation.
#[durable_object]
pub struct SenderLock {
    /// The object's tasks' shared state; a misconfigured object answers every request with the
    /// configuration error. (Test builds replace it after a simulated crash.)
    driver: RefCell<Result<Rc<Driver>, ConfigError>>,
}

impl SenderLock {
    fn driver(&self) -> Result<Rc<Driver>, ConfigError> {
        self.driver.borrow().clone()
    }
}

impl DurableObject for SenderLock {
    fn new(state: State, env: Env) -> Self {
        let driver =
            config_from_env(&env).map(|config| Rc::new(Driver::new(Rc::new(state), env, config)));
        SenderLock {
            driver: RefCell::new(driver),
        }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        let driver = match self.driver() {
            Ok(driver) => driver,
            Err(e) => return Response::error(e.to_string(), 500),
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
                    *self.driver.borrow_mut() = Ok(Rc::new(driver.restarted()));
                }
                response
            }
            // Every other route: stored transactions first know their chain (`Driver::ready`).
            _ if !driver.ready(None).await => chain_unknown_response(),
            (Method::Get, wire::PENDING_COUNT_PATH) => driver.pending_count().await,
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
        let Ok(driver) = self.driver() else {
            return Response::ok("");
        };
        if !driver.ready(None).await {
            driver.alarm_again_in(ALARM_RETRY_MS).await;
            return Response::ok("");
        }
        driver.alarm();
        // An object the alarm woke has no client keeping it alive: stay until the work it started
        // is done, at most one maximum hold (the machine sets the alarm again if work is left).
        let until = now_ms().saturating_add(driver.config().lock_max_hold_ms);
        while !driver.is_quiet() && !driver.superseded() && now_ms() < until {
            Delay::from(Duration::from_millis(ALARM_POLL_MS)).await;
        }
        Response::ok("")
    }
}
