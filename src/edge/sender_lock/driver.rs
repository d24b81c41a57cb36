//! The driver of one sender's machine in its Durable Object: the tickets clients wait on, the
//! actions carried out (storage through [`Store`], the upstream calls as tasks of their own, the
//! alarm, metrics), and the one timer at the machine's due time. Nothing is decided here.

use crate::config::Config;
use crate::edge::rotation::HttpUpstream;
use crate::edge::runtime::{emit, now_ms};
use crate::edge::sender_lock::store::{storage_error, Store};
use crate::log;
use crate::ordering::sender::{Action, Arrival, Sender, Sent, Ticket};
use crate::relay::wire::{self, WireAnswer};
#[cfg(feature = "test-faults")]
use crate::transaction::TxHash;
use crate::upstream::lookup::look_up;
use crate::upstream::submit::{submit, Sending};
use futures_util::future::join_all;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use worker::wasm_bindgen_futures::spawn_local;
use worker::{
    console_log, js_sys, wasm_bindgen::JsValue, Delay, Env, Response, ScheduledTime, State,
};

/// One client's wait for its answer; `None` when a newer instance superseded this one meanwhile.
#[derive(Default)]
struct Wait {
    answer: RefCell<Option<Option<WireAnswer>>>,
    waker: RefCell<Option<Waker>>,
}

impl Wait {
    fn resolve(&self, answer: Option<WireAnswer>) {
        *self.answer.borrow_mut() = Some(answer);
        if let Some(waker) = self.waker.borrow_mut().take() {
            waker.wake();
        }
    }
}

struct Answered(Rc<Wait>);

impl Future for Answered {
    type Output = Option<WireAnswer>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.0.answer.borrow_mut().take() {
            Some(answer) => Poll::Ready(answer),
            None => {
                *self.0.waker.borrow_mut() = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// The machine and everything the object's tasks share.
pub struct Driver {
    pub state: Rc<State>,
    pub env: Env,
    pub config: Config,
    pub machine: RefCell<Sender>,
    store: Store,
    waits: RefCell<HashMap<Ticket, Rc<Wait>>>,
    tickets: Cell<u64>,
    /// The due time of the armed timer, Unix ms.
    timer_due: Cell<Option<u64>>,
    /// Storage failed: a newer instance superseded this one.
    pub superseded: Cell<bool>,
    sender: RefCell<String>,
    /// Test builds only: transactions whose send is followed by a crash of the object.
    #[cfg(feature = "test-faults")]
    pub crash: RefCell<std::collections::HashSet<TxHash>>,
    /// Test builds only: the object crashed (its open requests throw).
    #[cfg(feature = "test-faults")]
    pub crashed: Cell<bool>,
}

impl Driver {
    /// Reads the stored state and hands it to a new machine (synchronous SQL: no event is
    /// delivered before the constructor returns).
    pub fn new(state: Rc<State>, env: Env, config: Config) -> Self {
        let mut machine = Sender::new(config.sender_settings(None));
        let store = Store::open(state.storage().sql());
        let stored = store.read();
        let sender = stored
            .sender
            .or_else(|| state.id().name())
            .unwrap_or_default();
        machine.set_address(&sender);
        machine.restore(stored.chain, &stored.rows, now_ms());
        Driver {
            state,
            env,
            config,
            machine: RefCell::new(machine),
            store,
            waits: RefCell::new(HashMap::new()),
            tickets: Cell::new(0),
            timer_due: Cell::new(None),
            superseded: Cell::new(false),
            sender: RefCell::new(sender),
            #[cfg(feature = "test-faults")]
            crash: RefCell::new(Default::default()),
            #[cfg(feature = "test-faults")]
            crashed: Cell::new(false),
        }
    }

    pub fn sender(&self) -> String {
        self.sender.borrow().clone()
    }

    /// The upstream, its metrics tagged with `request_id` (the client request the work is for).
    fn upstream<'a>(&'a self, request_id: Option<&'a str>) -> HttpUpstream<'a> {
        HttpUpstream {
            config: &self.config,
            env: &self.env,
            request_id,
        }
    }

    pub fn set_sender(&self, sender: &str) {
        if *self.sender.borrow() != sender {
            *self.sender.borrow_mut() = sender.to_string();
            self.machine.borrow_mut().set_address(sender);
        }
    }

    /// A new ticket and its wait.
    fn ticket(&self) -> (Ticket, Answered) {
        self.tickets.set(self.tickets.get() + 1);
        let ticket = Ticket(self.tickets.get());
        let wait = Rc::new(Wait::default());
        self.waits.borrow_mut().insert(ticket, wait.clone());
        (ticket, Answered(wait))
    }

    /// Carries out every action the machine has, then keeps the timer at its due time.
    pub fn pump(self: &Rc<Self>) {
        loop {
            let action = self.machine.borrow_mut().poll_action();
            let Some(action) = action else {
                break;
            };
            if !self.superseded.get() {
                self.run(action);
            }
        }
        self.arm_timer();
    }

    fn run(self: &Rc<Self>, action: Action) {
        match action {
            Action::Answer {
                ticket,
                answer,
                retry_after_s,
            } => {
                if let Some(wait) = self.waits.borrow_mut().remove(&ticket) {
                    wait.resolve(Some(WireAnswer {
                        answer,
                        retry_after_s,
                    }));
                }
            }
            Action::Store(row) => {
                let written = self.store.store(&row);
                self.stored(written);
            }
            Action::Forget(hashes) => {
                let written = self.store.forget(&hashes);
                self.stored(written);
            }
            Action::Wipe => {
                let written = self.store.wipe();
                self.stored(written);
            }
            Action::Vacate => {
                // The tables go with it; the next write makes them again (`Store`).
                let core = self.clone();
                spawn_local(async move {
                    if let Err(e) = core.state.storage().delete_all().await {
                        storage_error("vacate", &e);
                    }
                });
            }
            Action::StoreChain(genesis) => {
                let written = self.store.store_chain(&genesis, &self.sender());
                self.stored(written);
            }
            Action::Load(hashes) => match self.store.load(&hashes) {
                Ok(rows) => {
                    // What is sent again is what the relay reads in the row, never its text.
                    let rows = rows
                        .into_iter()
                        .filter_map(|mut row| {
                            match crate::relay::sync::stored_request(&row.request, &row.hash) {
                                Ok(request) => {
                                    row.request = request.into();
                                    Some(row)
                                }
                                Err(why) => {
                                    console_log!(
                                        "{}",
                                        log::line(
                                            "stored_request_refused",
                                            &[
                                                ("sender", self.sender().into()),
                                                ("tx_hash", crate::hex::encode(&row.hash).into()),
                                                ("error", why.into()),
                                            ]
                                        )
                                    );
                                    None
                                }
                            }
                        })
                        .collect();
                    self.machine.borrow_mut().loaded(rows, now_ms());
                }
                Err(()) => self.supersede(),
            },
            Action::Send {
                session_key,
                hash,
                nonce,
                request,
                deadline_ms,
                request_id,
            } => {
                let core = self.clone();
                spawn_local(async move {
                    let upstream = core.upstream(request_id.as_deref());
                    let sender = core.sender();
                    let pool = core.machine.borrow().settings().pool;
                    let sending = Sending {
                        hash: &hash,
                        nonce,
                        sender: &sender,
                        pool,
                    };
                    let policy = core.config.retry_policy();
                    let submission =
                        submit(&upstream, &request, sending, &policy, deadline_ms).await;
                    #[cfg(feature = "test-faults")]
                    if core.crash.borrow_mut().remove(&hash) {
                        // As a crash would leave it: sent, never reported; the open requests
                        // throw, and the next request meets a new instance on the same storage.
                        core.crashed.set(true);
                        core.supersede();
                        return;
                    }
                    if core.superseded.get() {
                        return;
                    }
                    let sent = Sent {
                        class: submission.class,
                        answer: submission.answer,
                        attempts: submission.attempts,
                    };
                    core.machine
                        .borrow_mut()
                        .sent(session_key, hash, nonce, sent, now_ms());
                    core.pump();
                });
            }
            Action::Lookup {
                id,
                query,
                deadline_ms,
            } => {
                let core = self.clone();
                spawn_local(async move {
                    let upstream = core.upstream(None);
                    let policy = core.config.retry_policy();
                    let sender = core.sender();
                    let outcome = look_up(&upstream, &sender, &query, &policy, deadline_ms).await;
                    if core.superseded.get() {
                        return;
                    }
                    core.machine.borrow_mut().looked_up(id, outcome, now_ms());
                    core.pump();
                });
            }
            Action::Alarm(at) => {
                let core = self.clone();
                spawn_local(async move {
                    let storage = core.state.storage();
                    let done = match at {
                        Some(at) => {
                            let date = js_sys::Date::new(&JsValue::from_f64(at as f64));
                            storage.set_alarm(ScheduledTime::new(date)).await
                        }
                        None => storage.delete_alarm().await,
                    };
                    if let Err(e) = done {
                        storage_error("alarm", &e);
                    }
                });
            }
            Action::Emit(metric) => emit(&self.env, &metric, None),
        }
    }

    /// After a storage call: a failure means a newer instance superseded this one.
    fn stored(&self, written: Result<(), ()>) {
        if written.is_err() {
            self.supersede();
        }
    }

    /// This instance can no longer use its storage: every open request is told to try the
    /// current one, and nothing more is sent from here.
    pub fn supersede(&self) {
        if self.superseded.replace(true) {
            return;
        }
        console_log!(
            "{}",
            log::line("object_superseded", &[("sender", self.sender().into())])
        );
        for (_, wait) in self.waits.borrow_mut().drain() {
            wait.resolve(None);
        }
    }

    /// One timer for the whole sender, at the machine's due time.
    fn arm_timer(self: &Rc<Self>) {
        let Some(due) = self.machine.borrow().poll_timeout() else {
            return;
        };
        if self.timer_due.get().is_some_and(|armed| armed <= due) {
            return;
        }
        self.timer_due.set(Some(due));
        let core = self.clone();
        spawn_local(async move {
            Delay::from(Duration::from_millis(due.saturating_sub(now_ms()))).await;
            if core.timer_due.get() == Some(due) {
                core.timer_due.set(None);
            }
            if core.superseded.get() {
                return;
            }
            core.machine.borrow_mut().timeout(now_ms());
            core.pump();
        });
    }

    /// A send (`POST /send`): every transaction of the request admitted in one turn, then each
    /// one's answer.
    pub async fn send(
        self: &Rc<Self>,
        body: &str,
        rid: Option<Rc<str>>,
    ) -> worker::Result<Response> {
        let txs = match wire::decode_send(body) {
            Ok(txs) => txs,
            Err(why) => return Response::error(why, 400),
        };
        // UPSTREAM_POOL=auto (and the replacement policy that follows) from the chain id.
        if let Some(chain_id) = txs.iter().find_map(|tx| tx.chain_id) {
            let settings = self.config.sender_settings(Some(chain_id));
            let mut machine = self.machine.borrow_mut();
            if *machine.settings() != settings {
                machine.set_settings(settings);
            }
        }
        let mut waits = Vec::with_capacity(txs.len());
        let mut arrivals = Vec::with_capacity(txs.len());
        for tx in txs {
            let (ticket, wait) = self.ticket();
            waits.push(wait);
            arrivals.push((
                ticket,
                Arrival {
                    hash: tx.hash,
                    nonce: tx.nonce,
                    request: tx.request.into(),
                    request_id: rid.clone(),
                    sync: tx.sync,
                },
            ));
        }
        self.machine.borrow_mut().arrive_all(arrivals, now_ms());
        self.pump();
        let answers: Option<Vec<WireAnswer>> = join_all(waits).await.into_iter().collect();
        #[cfg(feature = "test-faults")]
        if self.crashed.get() {
            return Err(worker::Error::RustError(
                "test fault: thrown after forwarding".into(),
            ));
        }
        match answers {
            Some(answers) => Response::ok(wire::encode_answers(&answers)),
            None => superseded_response(),
        }
    }

    /// The pending count (`GET /pending-count`).
    pub async fn pending_count(self: &Rc<Self>) -> worker::Result<Response> {
        let (ticket, wait) = self.ticket();
        self.machine.borrow_mut().count(ticket, now_ms());
        self.pump();
        match wait.await {
            Some(answer) => Response::ok(answer.encode()),
            None => superseded_response(),
        }
    }
}

/// HTTP 503 with [`wire::SUPERSEDED_HEADER`]: the Worker calls the current instance instead.
pub fn superseded_response() -> worker::Result<Response> {
    let response = Response::error("this Durable Object instance was superseded", 503)?;
    response.headers().set(wire::SUPERSEDED_HEADER, "1")?;
    Ok(response)
}
