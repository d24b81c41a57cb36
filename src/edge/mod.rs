//! The wasm32-only platform adapters, kept thin: [`worker`] (the Worker's fetch handler: routes,
//! CORS, request ids, limits), [`backend`] (the relay core's backend over `fetch`, the Durable
//! Object stubs and the rate limit bindings), [`sender_lock`] (the `SenderLock` Durable Object:
//! storage, alarm, the holder's upstream calls), [`http`] (HTTP to one upstream node),
//! [`race`] (the posts and timers of a call's race over several upstreams, chain checks,
//! probes), [`platform`] (the core's platform over them), [`websocket`] (a
//! client's WebSocket, held by the Worker, and the upstream's WebSocket for its subscriptions),
//! [`head_watch`] (the read cache's `newHeads` socket per chain and isolate), [`keys`] and
//! [`key_authority`] (API keys: the isolate's leases, the key's Durable Object, the admin API) and [`runtime`] (settings, clock and metrics shared by the Worker and the object).

pub mod admin_keys;
pub mod backend;
pub mod head_watch;
pub mod http;
pub mod key_authority;
pub mod keys;
pub mod platform;
pub mod race;
pub mod runtime;
pub mod sender_lock;
pub mod websocket;
pub mod worker;

/// The heap allocator of the wasm worker: talc instead of Rust's default dlmalloc. Measured with
/// `make bench-e2e` on workerd (BENCHMARKS.md): about 0.6 ms less workerd CPU per transaction at 50
/// senders, 0.2-0.5 ms less per proxied read.
#[global_allocator]
static TALC: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();
