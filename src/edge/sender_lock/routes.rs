//! The object's calls from the Worker, as the driver answers them: a send, the pending count,
//! the per-sender view and a transaction's status; and the object's own HTTP 503s.

use super::driver::Driver;
use crate::edge::runtime::now_ms;
use crate::ordering::sender::Arrival;
use crate::relay::wire::{self, WireAnswer};
use crate::transaction::TxHash;
use futures_util::future::join_all;
use serde_json::Value;
use std::rc::Rc;
use worker::Response;

impl Driver {
    /// A send (`POST /send`): every transaction of the request admitted in one turn, then each
    /// one's answer.
    pub async fn send(
        self: &Rc<Self>,
        body: &str,
        rid: Option<Rc<str>>,
    ) -> worker::Result<Response> {
        let send = match wire::decode_send(body) {
            Ok(send) => send,
            Err(why) => return Response::error(why.to_string(), 400),
        };
        // UPSTREAM_POOL=auto (and the replacement policy that follows) from the chain id the
        // Worker checked them against (a Worker of the previous release: their own).
        let hint = send
            .chain_id
            .or_else(|| send.txs.iter().find_map(|tx| tx.chain_id));
        if !self.ready(hint).await {
            return chain_unknown_response();
        }
        let txs = send.txs;
        let mut waits = Vec::with_capacity(txs.len());
        let mut arrivals = Vec::with_capacity(txs.len());
        for tx in txs {
            let (ticket, wait) = self.ticket();
            waits.push(wait);
            let arrival = Arrival {
                tx: Rc::new(tx),
                request_id: rid.clone(),
            };
            arrivals.push((ticket, arrival));
        }
        self.machine.borrow_mut().arrive_all(arrivals, now_ms());
        self.pump();
        let answers: Result<Vec<WireAnswer>, _> = join_all(waits).await.into_iter().collect();
        #[cfg(feature = "test-faults")]
        self.throw_if_crashed()?;
        match answers {
            Ok(answers) => Response::ok(wire::encode_answers(&answers)),
            Err(_) => superseded_response(),
        }
    }

    /// A cancel of a private transaction (`POST /cancel`, `{"hash"}`): the route's answer
    /// ([`crate::ordering::sender::Sender::cancel`]).
    pub async fn cancel(self: &Rc<Self>, body: &str) -> worker::Result<Response> {
        let hash = match wire::decode_cancel(body) {
            Ok(hash) => hash,
            Err(why) => return Response::error(why.to_string(), 400),
        };
        let (ticket, wait) = self.ticket();
        self.machine.borrow_mut().cancel(ticket, hash, now_ms());
        self.pump();
        match wait.await {
            Ok(answer) => Response::ok(answer.encode()),
            Err(_) => superseded_response(),
        }
    }

    /// The pending count (`GET /pending-count`).
    pub async fn pending_count(self: &Rc<Self>) -> worker::Result<Response> {
        let (ticket, wait) = self.ticket();
        self.machine.borrow_mut().count(ticket, now_ms());
        self.pump();
        match wait.await {
            Ok(answer) => Response::ok(answer.encode()),
            Err(_) => superseded_response(),
        }
    }

    /// The per-sender view (`GET /state`), with the alarm as storage has it (the machine's
    /// `alarm_ms` is what it asked for), the storage's rows (`storage`: `rows_written` since the
    /// object started, the platform's billed count; `rows` in the tables, `released` of them
    /// waiting to be overwritten), what this instance cost (`bill`:
    /// [`crate::ordering::bill::ObjectBill::view`]) and the isolate's wasm memory
    /// (`wasm_memory_bytes`).
    pub async fn view(&self) -> Value {
        let now = now_ms();
        let mut view = self.machine.borrow().view(now);
        view["sender"] = self.sender().into();
        let stored = self.state.storage().get_alarm().await.ok().flatten();
        view["storage_alarm_ms"] = stored
            .map(|at| (at.max(0) as u64).saturating_sub(now))
            .into();
        // What this instance cost (docs: `crate::ordering::bill`), the view's own request not
        // counted.
        view["bill"] = self.bill.borrow().view(now, self.store.rows_written());
        view["storage"] = serde_json::json!({
            "rows_written": self.store.rows_written(),
            "rows": self.store.row_count(),
            "released": self.store.released_count(),
        });
        // The isolate's wasm memory (its objects and Worker share it), bytes.
        view["wasm_memory_bytes"] = (core::arch::wasm32::memory_size::<0>() * 65_536).into();
        view
    }

    /// What became of transaction `hash` (`GET /tx/{hash}`), `None` when the object knows
    /// nothing of it.
    pub fn status(&self, hash: &TxHash) -> Option<Value> {
        let mut status = self.machine.borrow().status(hash, now_ms())?;
        status["sender"] = self.sender().into();
        Some(status)
    }
}

/// HTTP 503: stored transactions wait for the chain id, which the upstream did not give.
pub fn chain_unknown_response() -> worker::Result<Response> {
    Response::error(
        "the chain id could not be learned from the upstream; nothing was sent",
        503,
    )
}

/// HTTP 503 with [`wire::SUPERSEDED_HEADER`]: the Worker calls the current instance instead.
pub fn superseded_response() -> worker::Result<Response> {
    let response = Response::error("this Durable Object instance was superseded", 503)?;
    response.headers().set(wire::SUPERSEDED_HEADER, "1")?;
    Ok(response)
}
