//! nonce-relay: an edge JSON-RPC relay that keeps each sender's `eth_sendRawTransaction` calls in
//! order by routing them through a per-sender Durable Object.
//!
//! The pure core (no `worker` crate, tested natively): [`transaction`] decoding with
//! [`signature`] recovery over [`canonical_rlp`], each fork's stateless rules in [`hardfork`], the per-sender [`ordering`] state machine, the
//! [`upstream`] node (answers, [`upstream::submit`] with retries, the [`upstream::Platform`] it is
//! reached through),
//! the request semantics in [`relay`] with the [`chain_id`] learned once, [`jsonrpc`] types and errors, [`config`] parsing,
//! structured [`log`] lines and operator [`metrics`], JSON-RPC over [`websocket`] (limits, subscriptions). The wasm32-only adapters, in `edge/`:
//! `worker` (the Worker's fetch handler), `sender_lock` (the Durable Object), `http`, `race` and `platform`
//! (HTTP to the upstreams), `websocket` (a client's WebSocket) and `runtime` (settings, clock,
//! metrics).

pub mod access;
pub mod address;
pub mod admin;
pub mod cache;
pub mod canonical_rlp;
pub mod chain_id;
pub mod config;
pub mod hardfork;
pub mod hex;
pub mod jsonrpc;
pub mod log;
pub mod metrics;
pub mod ordering;
pub mod relay;
pub mod signature;
pub mod transaction;
pub mod upstream;
pub mod websocket;

#[cfg(target_arch = "wasm32")]
mod edge;
