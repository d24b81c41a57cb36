//! The machine's actions carried out by the object ([`Effects`]): storage through the
//! [`crate::edge::sender_lock::store::Store`], the upstream calls as tasks of their own, the
//! alarm, metrics. Made for one [`Driver::pump`].

use super::driver::{Driver, Outgoing};
use super::store::{log_error, log_refused};
use crate::edge::runtime::{emit, now_ms};
use crate::jsonrpc::Answer;
use crate::metrics::Metric;
use crate::ordering::sender::{
    is_deterministic, Effects, LookupId, Query, Row, RowProgress, SessionKey, TakenBy, Ticket,
    Tombstone, Unstorable,
};
use crate::ordering::store::StorageError;
use crate::ordering::tx::SignedTx;
use crate::relay::wire::WireAnswer;
use crate::transaction::TxHash;
use crate::upstream::cancel::cancel_at_routes;
use crate::upstream::lookup::look_up;
use crate::upstream::submit::publish;
use std::rc::Rc;

/// The machine's actions carried out by the object (see [`Effects`]); made for one
/// [`Driver::pump`], so that nothing here borrows the machine while it runs.
pub(super) struct Carry<'a> {
    pub(super) driver: &'a Rc<Driver>,
    /// The sender, lowercase 0x address.
    pub(super) sender: String,
}

impl Carry<'_> {
    /// After a storage call: a failure means a newer instance superseded this one (a row the
    /// platform refuses for its content is not one: [`Effects::store`]).
    fn after_write(&self, written: Result<(), StorageError>) {
        if let Err(e) = written {
            self.log_error(&e);
            self.driver.superseded_as(&self.sender);
        }
    }

    /// Logs a storage error with the object's sender and chain (`storage_error`).
    fn log_error(&self, error: &StorageError) {
        log_error(self.driver.chain_id.get(), &self.sender, error);
    }

    fn live(&self) -> bool {
        !self.driver.superseded.get()
    }

    /// Keeps the chain id with the rows, once (schema 3: in the rows written from now on, no
    /// write of its own): a restarted object knows its pool kind before it sends anything.
    fn keep_chain_id(&self) {
        let Some(chain_id) = self.driver.chain_id.get() else {
            return;
        };
        if self.live() && !self.driver.chain_id_stored.get() {
            self.after_write(self.driver.store.store_chain_id(chain_id));
            self.driver.chain_id_stored.set(self.live());
        }
    }
}

impl Effects for Carry<'_> {
    fn now_ms(&self) -> u64 {
        now_ms()
    }

    fn answer(&mut self, ticket: Ticket, answer: Answer, retry_after_s: Option<u64>) {
        if !self.live() {
            return;
        }
        // Delivered once the turn's sends have gone out (`Driver::deliver`).
        if let Some(wait) = self.driver.waits.borrow_mut().remove(&ticket) {
            self.driver.replies.borrow_mut().push((
                wait,
                WireAnswer {
                    answer,
                    retry_after_s,
                },
            ));
        }
    }

    fn store(&mut self, row: Row) -> Result<(), Unstorable> {
        if !self.live() {
            return Ok(());
        }
        // Before the row: schema 3 writes the chain id into it (no write of its own).
        self.keep_chain_id();
        if !self.live() {
            return Ok(());
        }
        match self.driver.store.store(&row) {
            // The platform refused this row for its content (too big for it): the instance still
            // has its storage; the machine refuses the transaction unsent. Never supersession.
            Err(e) if is_deterministic(&e.message) => {
                self.log_error(&e);
                Err(Unstorable(e.message))
            }
            written => {
                self.after_write(written);
                Ok(())
            }
        }
    }

    fn forget(&mut self, hashes: Vec<TxHash>) {
        if self.live() {
            self.after_write(self.driver.store.forget(&hashes));
        }
    }

    fn release(&mut self, hashes: Vec<TxHash>) {
        if self.live() {
            self.after_write(self.driver.store.release(&hashes));
        }
    }

    fn wipe(&mut self) {
        if self.live() {
            self.after_write(self.driver.store.wipe());
            self.driver.chain_id_stored.set(false);
        }
    }

    fn vacate(&mut self) {
        if !self.live() {
            return;
        }
        // The tables go with it; the next write makes them again (`Store`).
        self.driver.chain_id_stored.set(false);
        self.driver.store.vacated();
        let driver = self.driver.clone();
        let sender = self.sender.clone();
        self.driver.bill.borrow_mut().storage_deleted += 1;
        self.driver.spawn(async move {
            if let Err(e) = driver.state.storage().delete_all().await {
                log_error(
                    driver.chain_id.get(),
                    &sender,
                    &StorageError {
                        op: "vacate",
                        message: e.to_string(),
                    },
                );
            }
        });
    }

    fn store_chain(&mut self, genesis: String) {
        if self.live() {
            self.after_write(self.driver.store.store_chain(&genesis, &self.sender));
        }
    }

    fn progress(&mut self, hash: TxHash, progress: RowProgress) {
        if self.live() {
            self.after_write(self.driver.store.progress(&hash, progress));
        }
    }

    fn bury(&mut self, tombstone: Tombstone) {
        if !self.live() {
            return;
        }
        // A tombstone written as the first row carries the chain id too.
        self.keep_chain_id();
        if self.live() {
            self.after_write(self.driver.store.bury(&tombstone, now_ms()));
        }
    }

    fn load(&mut self, hashes: &[TxHash]) -> Vec<Rc<SignedTx>> {
        if !self.live() {
            return Vec::new();
        }
        match self.driver.store.load(hashes) {
            Ok(loaded) => loaded
                .into_iter()
                .filter_map(|tx| {
                    tx.map_err(|(hash, why)| {
                        log_refused(self.driver.chain_id.get(), &self.sender, &hash, &why)
                    })
                    .ok()
                })
                .collect(),
            Err(e) => {
                self.log_error(&e);
                self.driver.superseded_as(&self.sender);
                Vec::new()
            }
        }
    }

    fn send(
        &mut self,
        session_key: SessionKey,
        tx: Rc<SignedTx>,
        deadline_ms: u64,
        request_id: Option<Rc<str>>,
    ) {
        if !self.live() {
            return;
        }
        // Sent once this turn of the machine's is over, with the others it asks for now.
        let mut outbox = self.driver.outbox.borrow_mut();
        outbox.push(Outgoing {
            session_key,
            tx,
            deadline_ms,
            request_id,
        });
        if outbox.len() == 1 {
            let driver = self.driver.clone();
            let sender = self.sender.clone();
            self.driver.spawn(async move { driver.flush(&sender) });
        }
    }

    fn lookup(&mut self, id: LookupId, query: Query, deadline_ms: u64) {
        if !self.live() {
            return;
        }
        let driver = self.driver.clone();
        let sender = self.sender.clone();
        self.driver.spawn(async move {
            let upstream = driver.upstream(None);
            let policy = driver.config.retry_policy();
            let outcome = look_up(&upstream, &sender, &query, &policy, deadline_ms).await;
            if driver.superseded.get() {
                return;
            }
            driver.machine.borrow_mut().looked_up(id, outcome, now_ms());
            driver.pump();
        });
    }

    fn publish(&mut self, hashes: Vec<TxHash>, deadline_ms: u64) {
        // The rows are read now (synchronously, in this turn); the sends go one after another.
        let txs = self.load(&hashes);
        if txs.is_empty() {
            return;
        }
        let driver = self.driver.clone();
        let sender = self.sender.clone();
        self.driver.spawn(async move {
            let upstream = driver.upstream(None);
            let pool = driver.machine.borrow().settings().pool;
            let policy = driver.config.retry_policy();
            for tx in txs {
                let sent = publish(&upstream, &tx, &sender, pool, &policy, deadline_ms).await;
                if driver.superseded.get() {
                    return;
                }
                driver
                    .machine
                    .borrow_mut()
                    .published(&tx.hash, sent, now_ms());
                driver.pump();
            }
        });
    }

    fn cancel(&mut self, ticket: Ticket, hash: TxHash, routes: TakenBy, deadline_ms: u64) {
        if !self.live() {
            return;
        }
        let driver = self.driver.clone();
        self.driver.spawn(async move {
            let upstream = driver.upstream(None);
            let policy = driver.config.retry_policy();
            let count = driver.config.upstream_send_urls.len();
            let answer =
                cancel_at_routes(&upstream, &hash, routes, count, &policy, deadline_ms).await;
            if driver.superseded.get() {
                return;
            }
            driver
                .machine
                .borrow_mut()
                .cancel_answered(ticket, hash, answer, now_ms());
            driver.pump();
        });
    }

    fn alarm(&mut self, at_ms: Option<u64>) {
        if !self.live() {
            return;
        }
        let driver = self.driver.clone();
        self.driver
            .spawn(async move { driver.set_alarm(at_ms).await });
    }

    fn emit(&mut self, metric: Metric) {
        if self.live() {
            // The object's chain id (`CHAIN_ID` wins there too: `Driver::take_chain_id`).
            emit(&self.driver.env, self.driver.chain_id.get(), &metric, None);
        }
    }
}

impl Driver {
    /// Carries out every action the machine has ([`crate::ordering::sender::Sender::run`]), then keeps the one timer at
    /// its due time.
    pub fn pump(self: &Rc<Self>) {
        let sender = self.sender();
        self.machine.borrow_mut().run(&mut Carry {
            driver: self,
            sender,
        });
        self.arm_timer();
        // With sends asked for, `flush` delivers the answers after them.
        if self.outbox.borrow().is_empty() {
            self.deliver();
        }
        self.tell_quiet();
    }
}
