//! The per-sender sequencer (pure, tested natively): [`queue`] holds the sender's lock and its
//! nonce-ordered waiters, [`answer`] classes the upstream's answers and their effect on the next
//! nonce, [`seen`] the idempotency by transaction hash, and
//! [`sender`] puts them together as one sender's state in its Durable Object.

pub mod answer;
pub mod queue;
pub mod seen;
pub mod sender;

pub use queue::*;
