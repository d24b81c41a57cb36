//! The wasm32-only platform adapters, kept thin: [`worker`] (the Worker's fetch handler and the
//! relay's backend over `fetch` and the Durable Object stub), [`sender_lock`] (the `SenderLock`
//! Durable Object: storage, alarm, the holder's upstream calls) and [`upstream`] (HTTP to the
//! upstream node).

pub mod sender_lock;
pub mod upstream;
pub mod worker;
