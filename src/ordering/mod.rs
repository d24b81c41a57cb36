//! The per-sender sequencer (pure, tested natively): [`queue`] holds the sender's lock and its
//! nonce-ordered waiters.

pub mod queue;

pub use queue::*;
