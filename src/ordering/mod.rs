//! The per-sender sequencer (pure, tested natively). [`sender`] is one sender's whole lock
//! lifecycle as one clock-free state machine (admission, the nonce-ordered [`queue`] and its grant,
//! the holder's send and release, lookups, force release and restart recovery) that its Durable
//! Object drives; [`answer`] classes the upstream's answers and their effect on the next nonce,
//! and [`route_status`] a private route's word on a transaction;
//! [`accepted`] keeps the transactions the upstream took, by hash and nonce; [`tx`] is the one
//! transaction type that travels from the Worker to the upstream, [`send_params`] reads it from
//! the params of a send, and [`row`] is its row in its sender's storage, kept in the tables of
//! [`store`]; [`private_terms`] is what a client asked of a private route for one transaction;
//! [`identifier`] names the machine's ids; [`bill`] is what the sender's object costs on
//! Cloudflare's bill, as the object counts it; [`tombstone`] is what it keeps of a transaction
//! the route cancelled, until its nonce is used.

pub mod accepted;
pub mod answer;
pub mod bill;
pub mod identifier;
pub mod private_terms;
pub mod queue;
pub mod route_status;
pub mod row;
pub mod send_method;
pub mod send_params;
pub mod sender;
pub mod store;
pub mod tombstone;
pub mod tx;
