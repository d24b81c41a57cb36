//! Test builds only (`--features test-faults`): the faults the end-to-end tests make the object
//! meet: a crash after a send, a failed write, a reset, a restart on the same storage.

use super::driver::Driver;
use super::store::FAIL_READS;
use crate::ordering::tx::SignedTx;
use crate::transaction::TxHash;
use std::rc::Rc;
use worker::State;

impl Driver {
    /// Test builds only: the object's state (a platform handle).
    pub fn state(&self) -> &Rc<State> {
        &self.state
    }

    /// Test builds only: a new instance on the same storage, as the runtime starts after a crash.
    pub fn restarted(&self) -> Result<Driver, crate::ordering::store::ReadError> {
        Driver::open(self.state.clone(), self.env.clone(), self.config.clone())
    }

    /// Test builds only: a crash of the object follows the send of each of `txs`.
    pub fn mark_crash(&self, txs: &[SignedTx]) {
        self.crash.borrow_mut().extend(txs.iter().map(|tx| tx.hash));
    }

    /// Test builds only: the object's next storage write fails.
    pub fn fail_next_write(&self) {
        self.store.sql().fail_next.set(true);
    }

    /// Test builds only: whether the object crashed (a new instance then takes its place).
    pub fn crashed(&self) -> bool {
        self.crashed.get()
    }

    /// Test builds only: after the send of `hash`, whether the object crashes there (it was
    /// marked with [`Driver::mark_crash`]): as a crash would leave it, sent and never reported;
    /// the open requests throw, and the next request meets a new instance on the same storage.
    pub(super) fn crash_after_send(&self, hash: &TxHash, sender: &str) -> bool {
        if !self.crash.borrow_mut().remove(hash) {
            return false;
        }
        self.crashed.set(true);
        self.superseded_as(sender);
        true
    }

    /// Test builds only: a request answered after the object crashed throws.
    pub(super) fn throw_if_crashed(&self) -> worker::Result<()> {
        if self.crashed.get() {
            return Err(worker::Error::RustError(
                "test fault: thrown after forwarding".into(),
            ));
        }
        Ok(())
    }
}

/// Test builds only: `x-test-fault: unreadable-restart`: the object restarts (its instance is
/// stopped, as a deploy stops it) and the next four storage reads fail: the new instance's start
/// and the next request's each meet a read that fails twice; the one after reads its storage.
pub(super) fn unreadable_restart(driver: &Driver) {
    FAIL_READS.store(4, std::sync::atomic::Ordering::SeqCst);
    let sender = driver.sender();
    driver.superseded_as(&sender);
}

/// Test builds only: the first request with `x-test-fault: storage-fails` in this isolate fails
/// the object's next write, as writes fail once a newer instance took over.
pub(super) fn storage_fails_once(driver: &Driver) {
    use std::sync::atomic::{AtomicBool, Ordering};
    static DONE: AtomicBool = AtomicBool::new(false);
    if !DONE.swap(true, Ordering::SeqCst) {
        driver.fail_next_write();
    }
}

/// Test builds only: the first request with `x-test-fault: reset-once` in this isolate resets the
/// object (`DurableObjectState.abort`), as a deploy or the runtime would; its caller gets the
/// runtime's error.
pub(super) fn reset_once(driver: &Driver) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use worker::js_sys::{Function, Promise, Reflect};
    use worker::wasm_bindgen::{JsCast, JsValue};
    static DONE: AtomicBool = AtomicBool::new(false);
    if DONE.swap(true, Ordering::SeqCst) {
        return;
    }
    let state: &JsValue = driver.state().as_raw().as_ref();
    if let Ok(abort) = Reflect::get(state, &JsValue::from_str("abort")) {
        if let Ok(abort) = abort.dyn_into::<Function>() {
            // From a microtask of its own: abort's exception can't be caught, and must not
            // unwind through this module's frames.
            let promise = Promise::resolve(&JsValue::UNDEFINED);
            if let Ok(then) = Reflect::get(&promise, &JsValue::from_str("then")) {
                if let Ok(then) = then.dyn_into::<Function>() {
                    let _ = then.call1(&promise, &abort.bind0(state));
                }
            }
        }
    }
}
