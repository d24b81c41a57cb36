//! The `KeyAuthority` Durable Object (wasm32 only): one per API key, named by its KV entry's name
//! (`key/v1/{hash}`, [`crate::access::keys::key::KeyHash::object_name`]; never the key). A thin
//! driver of [`Authority`]: each request's body is read, then handed to it with the time (no
//! await between reading the state and changing it), and the state written to the object's
//! storage (one row, `authority`) before the answer goes, so a lease granted is counted even if
//! the object restarts.
//!
//! Routes: `POST /lease` ([`LeaseAsk`] → [`crate::access::keys::authority::LeaseAnswer`]), `PUT
//! /record` (the admin API's [`KeyRecord`]), `GET /state` (the record, budgets and usage).

use crate::access::keys::authority::{Authority, LeaseAsk};
use crate::access::keys::KeyRecord;
use crate::edge::runtime::now_ms;
use std::cell::RefCell;
use worker::{durable_object, DurableObject, Env, Method, Request, Response, State};

/// The path of a lease ask.
pub const LEASE_PATH: &str = "/lease";
/// The path of the admin API's record.
pub const RECORD_PATH: &str = "/record";
/// The path of the object's state.
pub const STATE_PATH: &str = "/state";
/// The storage key of the object's one row.
const ROW: &str = "authority";

#[durable_object]
pub struct KeyAuthority {
    state: State,
    /// The state, read from storage by the first request; changed only between awaits, so that
    /// requests whose awaits interleave (a body read, a write) never undo each other's change.
    authority: RefCell<Option<Authority>>,
}

/// What a request asks of the object, its body read.
enum Asked {
    Lease(LeaseAsk),
    Record(KeyRecord),
    State,
}

impl KeyAuthority {
    /// Reads the stored state once (a new key's when none): a request that finds it read
    /// already, or read meanwhile by another, keeps that one.
    async fn loaded(&self) -> worker::Result<()> {
        if self.authority.borrow().is_some() {
            return Ok(());
        }
        let stored = self.state.storage().get::<Authority>(ROW).await?;
        let mut slot = self.authority.borrow_mut();
        if slot.is_none() {
            *slot = Some(stored.unwrap_or_default());
        }
        Ok(())
    }

    /// Writes the state as the object's row (the platform's output gate holds the answer until
    /// it is on disk).
    async fn save(&self) -> worker::Result<()> {
        let snapshot = self.authority.borrow().clone().unwrap_or_default();
        self.state.storage().put(ROW, &snapshot).await
    }
}

impl DurableObject for KeyAuthority {
    fn new(state: State, _env: Env) -> Self {
        KeyAuthority {
            state,
            authority: RefCell::new(None),
        }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        let asked = match (req.method(), req.path().as_str()) {
            (Method::Post, LEASE_PATH) => Asked::Lease(req.json().await?),
            (Method::Put, RECORD_PATH) => Asked::Record(req.json().await?),
            (Method::Get, STATE_PATH) => Asked::State,
            _ => return Response::error("not found", 404),
        };
        self.loaded().await?;
        // The change, with no await in it.
        let answer = {
            let mut slot = self.authority.borrow_mut();
            let authority = slot.get_or_insert_with(Authority::default);
            match asked {
                Asked::Lease(ask) => serde_json::to_value(authority.lease(ask, now_ms()))?,
                Asked::Record(record) => {
                    authority.set_record(record);
                    serde_json::to_value(&*authority)?
                }
                Asked::State => return Response::from_json(&*authority),
            }
        };
        self.save().await?;
        Response::from_json(&answer)
    }
}
