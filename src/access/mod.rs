//! What the public endpoint lets in, and how it tells browsers (pure, tested natively): [`cors`]
//! headers, the JSON-RPC [`methods`] policy, per-client [`rate_limit`] accounting and the
//! [`request_id`] of each request.

pub mod cors;
pub mod keys;
pub mod methods;
pub mod rate_limit;
pub mod request_id;
