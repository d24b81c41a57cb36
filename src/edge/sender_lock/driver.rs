//! The driver of one sender's machine in its Durable Object: the tickets clients wait on, the
//! sends the machine asks for (batched or alone, each a task of its own), and one timer, re-armed
//! at the machine's due time and cleared when nothing is due (a pending timer keeps the object
//! from hibernating). What keeps the object from hibernating is counted as it happens
//! ([`ObjectBill`]: each request, the timer while armed, each task with I/O under way). The
//! machine's other actions are carried out in `effects.rs`, the Worker's calls answered in
//! `routes.rs`. Nothing is decided here.

use crate::chain_id;
use crate::config::Config;
use crate::edge::platform::EdgePlatform;
use crate::edge::runtime::now_ms;
use crate::edge::sender_lock::store::{log_error, EdgeSql, Store};
use crate::log;
use crate::ordering::bill::ObjectBill;
use crate::ordering::sender::{Sender, SessionKey, Ticket};
use crate::ordering::store::{ReadError, StorageError, StorageSnapshot};
use crate::ordering::tx::SignedTx;
use crate::relay::wire::WireAnswer;
use crate::upstream::batch::{batched, post_batch, MAX_BATCH_SENDS};
use crate::upstream::route::UpstreamSet;
use crate::upstream::submit::submit_after;
use crate::upstream::{CallKind, Platform, UpstreamError, UpstreamReply};
use futures_channel::{mpsc, oneshot};
use futures_util::future::{select, Either};
use futures_util::StreamExt;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::time::Duration;
use worker::wasm_bindgen_futures::spawn_local;
use worker::{console_log, js_sys, wasm_bindgen::JsValue, Delay, Env, ScheduledTime, State};

/// The machine and everything the object's tasks share.
pub struct Driver {
    pub(super) state: Rc<State>,
    pub(super) env: Env,
    pub(super) config: Config,
    pub(super) machine: RefCell<Sender>,
    pub(super) store: Store,
    /// Each open ticket's answer channel; dropped (the client's call ends with HTTP 503) when a
    /// newer instance supersedes this one.
    pub(super) waits: RefCell<HashMap<Ticket, oneshot::Sender<WireAnswer>>>,
    pub(super) tickets: Cell<u64>,
    /// The due time the one timer is armed for, Unix ms.
    pub(super) timer_due: Cell<Option<u64>>,
    /// Tells the timer's task that the due time moved earlier; `None` until the task runs.
    pub(super) rearm: RefCell<Option<mpsc::UnboundedSender<()>>>,
    /// Storage failed: a newer instance superseded this one.
    pub(super) superseded: Cell<bool>,
    /// The chain id the object runs under, once known: `CHAIN_ID`, the one the Worker checked
    /// its transactions against (with each send), or the one stored with the rows.
    pub(super) chain_id: Cell<Option<u64>>,
    /// Whether `chain_id` is in storage (meta `chain_id`, written with the first row).
    pub(super) chain_id_stored: Cell<bool>,
    /// What an earlier instance stored, held back from the machine while the upstream's pool
    /// kind is unknown (`UPSTREAM_POOL=auto`, no chain id anywhere): nothing is sent on a guess.
    pub(super) deferred: RefCell<Option<StorageSnapshot>>,
    /// A task is asking the upstream the chain id for `deferred`.
    pub(super) learning: Cell<bool>,
    /// Whether the machine has run since the object started: what [`Driver::open`] restored
    /// (its checks of the stored transactions) starts at the first event, whatever it is.
    pub(super) started: Cell<bool>,
    /// The sends asked for in the machine's current turn ([`Driver::flush`]).
    pub(super) outbox: RefCell<Vec<Outgoing>>,
    /// The answers given in the machine's current turn, delivered once its sends have gone out
    /// ([`Driver::deliver`]): a client's answer never goes ahead of the next send.
    pub(super) replies: RefCell<Vec<(oneshot::Sender<WireAnswer>, WireAnswer)>>,
    /// What this instance could not hibernate for, and its requests and alarms.
    pub(super) bill: RefCell<ObjectBill>,
    /// Told when the machine is next quiet (the alarm handler waits for it).
    pub(super) quiet_waiters: RefCell<Vec<oneshot::Sender<()>>>,
    /// Test builds only: transactions whose send is followed by a crash of the object.
    #[cfg(feature = "test-faults")]
    pub(super) crash: RefCell<std::collections::HashSet<crate::transaction::TxHash>>,
    /// Test builds only: the object crashed (its open requests throw).
    #[cfg(feature = "test-faults")]
    pub(super) crashed: Cell<bool>,
}

/// A send the machine asked for ([`crate::ordering::sender::Effects::send`]), waiting for the end of its turn.
pub(super) struct Outgoing {
    pub(super) session_key: SessionKey,
    pub(super) tx: Rc<SignedTx>,
    pub(super) deadline_ms: u64,
    pub(super) request_id: Option<Rc<str>>,
}

/// A hold on the object's hibernation ([`Driver::hold`]), released when dropped.
pub(super) struct Held(Rc<Driver>);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.bill.borrow_mut().release(now_ms());
    }
}

/// A member's part of its batch's answer ([`post_batch`]), its first attempt; `None`: not
/// attempted (it goes alone at once).
type FirstAttempt = oneshot::Receiver<Option<Result<UpstreamReply, UpstreamError>>>;

impl Driver {
    /// Reads the stored state and hands it to a new machine (synchronous SQL: no event is
    /// delivered before it returns). With stored transactions and the pool kind unknown
    /// (`UPSTREAM_POOL=auto`, no `CHAIN_ID`, no chain id stored or in the rows), the rows wait for
    /// [`Driver::ready`].
    ///
    /// # Errors
    /// The stored state cannot be used ([`ReadError`]): nothing was written, and the object
    /// fails open until it can read it.
    pub fn open(state: Rc<State>, env: Env, config: Config) -> Result<Self, ReadError> {
        let store = Store::open(EdgeSql::new(state.storage().sql()));
        let mut stored = store.read()?;
        if let Some(other) = stored.of_other_chain(config.chain_id) {
            return Err(other);
        }
        let chain_id = config
            .chain_id
            .or(stored.chain_id)
            .or_else(|| store.chain_id_of_rows(&stored.rows));
        let mut machine = Sender::new(config.sender_settings(chain_id));
        let sender = stored
            .sender
            .take()
            .or_else(|| {
                let name = state.id().name()?;
                Some(
                    crate::config::chains::split_object_name(&name)
                        .1
                        .to_string(),
                )
            })
            .unwrap_or_default();
        machine.set_address(&sender);
        let chain_id_stored = stored.chain_id.is_some();
        let deferred = if config.known_pool_kind(chain_id).is_some() || stored.rows.is_empty() {
            machine.restore(
                stored.chain.take(),
                &stored.rows,
                &stored.tombstones,
                now_ms(),
            );
            None
        } else {
            console_log!(
                "{}",
                log::line(
                    "chain_id_unknown",
                    &[
                        ("sender", sender.clone().into()),
                        ("chain", serde_json::Value::Null),
                        ("stored", stored.rows.len().into())
                    ]
                )
            );
            Some(stored)
        };
        Ok(Driver {
            state,
            env,
            config,
            machine: RefCell::new(machine),
            store,
            waits: RefCell::new(HashMap::new()),
            tickets: Cell::new(0),
            timer_due: Cell::new(None),
            rearm: RefCell::new(None),
            superseded: Cell::new(false),
            chain_id: Cell::new(chain_id),
            chain_id_stored: Cell::new(chain_id_stored),
            deferred: RefCell::new(deferred),
            learning: Cell::new(false),
            started: Cell::new(false),
            outbox: RefCell::new(Vec::new()),
            replies: RefCell::new(Vec::new()),
            bill: RefCell::new(ObjectBill::default()),
            quiet_waiters: RefCell::new(Vec::new()),
            #[cfg(feature = "test-faults")]
            crash: RefCell::new(Default::default()),
            #[cfg(feature = "test-faults")]
            crashed: Cell::new(false),
        })
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Before any event: the chain id `hint` (the one the Worker checked a send against) is
    /// taken, and stored transactions held back for the chain id ([`Driver::new`]) wait for it
    /// to be learned from the upstream (`eth_chainId`) before they go to the machine; the first
    /// time, the machine runs (what was restored starts). False when the chain id could not be
    /// learned: nothing was restored and nothing is sent.
    pub async fn ready(self: &Rc<Self>, hint: Option<u64>) -> bool {
        if let Some(chain_id) = hint {
            self.take_chain_id(chain_id);
        }
        while self.deferred.borrow().is_some() {
            if self.learning.replace(true) {
                Delay::from(Duration::from_millis(20)).await;
                continue;
            }
            let asked = chain_id::ask(&self.upstream(None), self.config.upstream_timeout_ms).await;
            self.learning.set(false);
            match asked {
                Ok(chain_id) => self.take_chain_id(chain_id),
                Err(_) => return false,
            }
        }
        // A restarted object's checks of its stored transactions go out at its first event, a
        // view or a status as much as a send or the alarm.
        if !self.started.replace(true) {
            self.pump();
        }
        true
    }

    /// The object runs under `chain_id` from now on (`CHAIN_ID` wins): its settings follow
    /// (`UPSTREAM_POOL=auto`, the replacement policy), and held-back rows go to the machine.
    pub(super) fn take_chain_id(self: &Rc<Self>, chain_id: u64) {
        let chain_id = self.config.chain_id.unwrap_or(chain_id);
        if self.chain_id.replace(Some(chain_id)) != Some(chain_id) {
            self.chain_id_stored.set(false);
        }
        let settings = self.config.sender_settings(Some(chain_id));
        {
            let mut machine = self.machine.borrow_mut();
            if *machine.settings() != settings {
                machine.set_settings(settings);
            }
        }
        let deferred = self.deferred.borrow_mut().take();
        if let Some(stored) = deferred {
            self.machine.borrow_mut().restore(
                stored.chain,
                &stored.rows,
                &stored.tombstones,
                now_ms(),
            );
            self.pump();
        }
    }

    /// Sends what the machine asked for in its last turns: as one JSON-RPC batch in nonce order
    /// where [`batched`] says so (at most [`MAX_BATCH_SENDS`] a batch, and at most what the
    /// upstream takes, [`Platform::batch_limit`]; one connection where
    /// Cloudflare lets an object have six waiting for their response headers: docs/design.md, "Send
    /// window"), each member's part of the answer its first attempt, from which it goes on alone
    /// ([`submit_after`]); otherwise each alone.
    pub(super) fn flush(self: &Rc<Self>, sender: &str) {
        let mut sends = std::mem::take(&mut *self.outbox.borrow_mut());
        if self.superseded.get() {
            self.replies.borrow_mut().clear();
            return;
        }
        let pool = self.machine.borrow().settings().pool;
        let upstreams = self.config.upstreams(UpstreamSet::Send).len();
        let most = MAX_BATCH_SENDS.min(self.upstream(None).batch_limit(CallKind::Send));
        if !batched(pool, sends.len(), upstreams) || most < 2 {
            for send in sends {
                self.spawn_send(send, None, sender);
            }
            self.deliver_after_sends();
            return;
        }
        sends.sort_by_key(|s| s.tx.nonce);
        while !sends.is_empty() {
            let chunk: Vec<Outgoing> = sends.drain(..sends.len().min(most)).collect();
            if chunk.len() == 1 {
                self.spawn_send(chunk.into_iter().next().expect("one"), None, sender);
                continue;
            }
            let txs: Vec<Rc<SignedTx>> = chunk.iter().map(|s| s.tx.clone()).collect();
            let deadline_ms = chunk.iter().map(|s| s.deadline_ms).min().unwrap_or(0);
            let (parts, firsts): (Vec<_>, Vec<_>) =
                chunk.iter().map(|_| oneshot::channel()).unzip();
            let driver = self.clone();
            self.spawn(async move {
                let upstream = driver.upstream(None);
                // A batch that hangs leaves each member half the time for its own attempts.
                let now = now_ms();
                let timeout_ms = driver
                    .config
                    .retry_policy()
                    .attempt_timeout(now, deadline_ms)
                    .min(deadline_ms.saturating_sub(now) / 2);
                let refs: Vec<&SignedTx> = txs.iter().map(|tx| tx.as_ref()).collect();
                let replies = post_batch(&upstream, &refs, timeout_ms).await;
                for (part, reply) in parts.into_iter().zip(replies) {
                    let _ = part.send(reply);
                }
            });
            for (send, first) in chunk.into_iter().zip(firsts) {
                self.spawn_send(send, Some(first), sender);
            }
        }
        self.deliver_after_sends();
    }

    /// The turn's answers, once its sends have been issued: when the write before a send is on
    /// disk, the runtime (workerd 1.20261117) releases what the turn gave in order, and the
    /// answers' work (the object's reply, and locally the Worker's reply to its client on the
    /// same thread) ran before the next send reached its socket: 1.5 ms of every strict handoff
    /// (BENCHMARKS.md, "Strict handoff"). They wait for the next event instead: the send goes
    /// first, and each answer is one timer later.
    fn deliver_after_sends(self: &Rc<Self>) {
        if self.replies.borrow().is_empty() {
            return;
        }
        let driver = self.clone();
        self.spawn(async move {
            Delay::from(Duration::from_millis(0)).await;
            driver.deliver();
        });
    }

    /// Delivers the answers the machine gave ([`Driver::replies`]); after [`Driver::flush`] has
    /// spawned the turn's sends, or at the end of a turn that asked for none.
    pub(super) fn deliver(&self) {
        let replies = std::mem::take(&mut *self.replies.borrow_mut());
        if self.superseded.get() {
            return;
        }
        for (wait, answer) in replies {
            let _ = wait.send(answer);
        }
    }

    /// One send as a task of its own, reported to the machine when it has its final answer.
    pub(super) fn spawn_send(
        self: &Rc<Self>,
        send: Outgoing,
        first: Option<FirstAttempt>,
        sender: &str,
    ) {
        let driver = self.clone();
        let sender = sender.to_string();
        self.spawn(async move {
            let Outgoing {
                session_key,
                tx,
                deadline_ms,
                request_id,
            } = send;
            // A member not attempted, or whose batch never answered its part (dropped): sent
            // alone.
            let first = match first {
                Some(first) => first.await.ok().flatten(),
                None => None,
            };
            let upstream = driver.upstream(request_id.as_deref());
            let pool = driver.machine.borrow().settings().pool;
            let policy = driver.config.retry_policy();
            let sent =
                submit_after(&upstream, &tx, &sender, pool, &policy, deadline_ms, first).await;
            #[cfg(feature = "test-faults")]
            if driver.crash_after_send(&tx.hash, &sender) {
                return;
            }
            if driver.superseded.get() {
                return;
            }
            driver
                .machine
                .borrow_mut()
                .sent(session_key, &tx, sent, now_ms());
            driver.pump();
        });
    }

    /// The alarm could not be served (the chain id could not be learned): it fires again in
    /// `ms` milliseconds.
    pub async fn alarm_again_in(&self, ms: u64) {
        self.set_alarm(Some(now_ms().saturating_add(ms))).await;
    }

    /// Sets the storage alarm at `at_ms` (Unix ms), or deletes it (`None`); a failure is logged.
    pub(super) async fn set_alarm(&self, at_ms: Option<u64>) {
        let storage = self.state.storage();
        {
            let mut bill = self.bill.borrow_mut();
            match at_ms {
                Some(_) => bill.alarms_set += 1,
                None => bill.alarms_deleted += 1,
            }
        }
        let done = match at_ms {
            Some(at) => {
                let date = js_sys::Date::new(&JsValue::from_f64(at as f64));
                storage.set_alarm(ScheduledTime::new(date)).await
            }
            None => storage.delete_alarm().await,
        };
        if let Err(e) = done {
            log_error(
                self.chain_id.get(),
                &self.sender(),
                &StorageError {
                    op: "alarm",
                    message: e.to_string(),
                },
            );
        }
    }

    /// Whether a newer instance superseded this one (it sends nothing more).
    pub fn superseded(&self) -> bool {
        self.superseded.get()
    }

    /// The sender, lowercase 0x address.
    pub fn sender(&self) -> String {
        self.machine.borrow().address().to_string()
    }

    /// Names the sender (from the Worker's header), in refusals and metrics.
    pub fn set_sender(&self, sender: &str) {
        self.machine.borrow_mut().set_address(sender);
    }

    /// The upstream, its metrics tagged with `request_id` (the client request the work is for).
    pub(super) fn upstream<'a>(&'a self, request_id: Option<&'a str>) -> EdgePlatform<'a> {
        EdgePlatform {
            config: &self.config,
            env: &self.env,
            request_id,
        }
    }

    /// A new ticket and the channel its answer comes on.
    pub(super) fn ticket(&self) -> (Ticket, oneshot::Receiver<WireAnswer>) {
        self.tickets.set(self.tickets.get() + 1);
        let ticket = Ticket(self.tickets.get());
        let (answer, answered) = oneshot::channel();
        self.waits.borrow_mut().insert(ticket, answer);
        (ticket, answered)
    }

    /// The storage alarm fired: the machine is told, and its actions carried out.
    pub fn alarm(self: &Rc<Self>) {
        self.machine.borrow_mut().alarm(now_ms());
        self.pump();
    }

    /// The alarm's handler returns: the machine sets the alarm again if work is left, and that
    /// call is issued before the handler's answer (its task runs at the next microtask).
    pub async fn alarm_done(self: &Rc<Self>) {
        self.machine.borrow_mut().alarm_done(now_ms());
        self.pump();
        let yielded = js_sys::Promise::resolve(&JsValue::NULL);
        let _ = worker::wasm_bindgen_futures::JsFuture::from(yielded).await;
    }

    /// Whether nothing is in flight or waiting in the machine.
    pub fn is_quiet(&self) -> bool {
        self.machine.borrow().is_quiet()
    }

    /// This instance can no longer use its storage: every open request is told to try the
    /// current one, and nothing more is sent, stored or logged from here. Called while the
    /// machine runs (it is borrowed), so `sender` (lowercase 0x address) names it in the log line.
    pub(super) fn superseded_as(&self, sender: &str) {
        if self.superseded.replace(true) {
            return;
        }
        console_log!(
            "{}",
            log::line(
                "object_superseded",
                &[
                    ("sender", sender.into()),
                    ("chain", self.chain_id.get().into())
                ]
            )
        );
        self.waits.borrow_mut().clear();
        self.replies.borrow_mut().clear();
        self.quiet_waiters.borrow_mut().clear();
        self.rearm.borrow_mut().take();
    }

    /// A hold on the object's hibernation from now until the [`Held`] is dropped
    /// ([`ObjectBill::hold`]).
    pub(super) fn hold(self: &Rc<Self>) -> Held {
        self.bill.borrow_mut().hold(now_ms());
        Held(self.clone())
    }

    /// A request of the Worker's is served: counted, and held until its answer.
    pub(super) fn request(self: &Rc<Self>) -> Held {
        self.bill.borrow_mut().requests += 1;
        self.hold()
    }

    /// `work` as a task of its own, the object held while it runs (its I/O keeps the object
    /// from hibernating).
    pub(super) fn spawn(self: &Rc<Self>, work: impl Future<Output = ()> + 'static) {
        let held = self.hold();
        spawn_local(async move {
            work.await;
            drop(held);
        });
    }

    /// Resolves when the machine is next quiet ([`Driver::is_quiet`], told by
    /// [`Driver::pump`]), or when this instance is superseded (the sender is dropped).
    pub(super) fn when_quiet(&self) -> oneshot::Receiver<()> {
        let (tell, told) = oneshot::channel();
        self.quiet_waiters.borrow_mut().push(tell);
        told
    }

    /// Tells those waiting for the machine to be quiet, when it is.
    pub(super) fn tell_quiet(&self) {
        if self.is_quiet() {
            for tell in self.quiet_waiters.borrow_mut().drain(..) {
                let _ = tell.send(());
            }
        }
    }

    /// The one timer, re-armed at the machine's due time: a task of its own that sleeps until
    /// then, then feeds the machine a timeout. When the due time moves (earlier, later, or to
    /// none) the sleep is dropped, which clears its `setTimeout`: an object with nothing due has
    /// no timer pending, and may hibernate.
    pub(super) fn arm_timer(self: &Rc<Self>) {
        let due = self.machine.borrow().poll_timeout();
        let armed = self.timer_due.replace(due);
        if let Some(rearm) = self.rearm.borrow().as_ref() {
            if armed != due {
                let _ = rearm.unbounded_send(());
            }
            return;
        }
        if due.is_none() {
            return;
        }
        if self.superseded.get() {
            return;
        }
        let (rearm, mut rearmed) = mpsc::unbounded();
        *self.rearm.borrow_mut() = Some(rearm);
        let driver = self.clone();
        spawn_local(async move {
            loop {
                let Some(due) = driver.timer_due.get() else {
                    if rearmed.next().await.is_none() {
                        return;
                    }
                    continue;
                };
                let held = driver.hold();
                let sleep = pin!(Delay::from(Duration::from_millis(
                    due.saturating_sub(now_ms())
                )));
                let woke = select(sleep, rearmed.next()).await;
                drop(held);
                match woke {
                    Either::Left(_) => {}
                    Either::Right((Some(()), _)) => continue,
                    Either::Right((None, _)) => return, // superseded
                }
                if driver.superseded.get() {
                    return;
                }
                if driver.timer_due.get().is_some_and(|due| due <= now_ms()) {
                    driver.timer_due.set(None);
                    driver.machine.borrow_mut().handle_timeout(now_ms());
                    driver.pump();
                }
            }
        });
    }
}
