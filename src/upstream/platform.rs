//! The platform as the pure core sees it ([`Platform`]): the upstream, a timer, the clock,
//! randomness and metrics.

use super::heads::BlockNeed;
use super::{CallKind, UpstreamError, UpstreamReply};
use crate::metrics::Metric;
use crate::ordering::row::TakenBy;
use crate::transaction::TxHash;

/// What the pure core needs of the platform it runs on: the upstream node (`post`), a timer
/// (`sleep`), the clock, randomness for backoff jitter and metrics. The Worker and the Durable
/// Object implement it over `fetch` (`edge/`); the native tests with scripted peers.
#[allow(async_fn_in_trait)] // single-threaded wasm: no Send bound wanted
pub trait Platform {
    /// POSTs one JSON-RPC request (or batch) text to the upstream, waiting at most `timeout_ms`
    /// for the whole answer, and returns it checked with [`super::check_upstream_body`]. `kind` says
    /// what the call is, for the upstreams it may go to ([`CallKind`],
    /// [`super::route::RoutingTable`]); `body` is always text the
    /// relay made, never a client's.
    async fn post(
        &self,
        body: &str,
        kind: CallKind,
        timeout_ms: u64,
    ) -> Result<UpstreamReply, UpstreamError>;

    /// [`Platform::post`] of a JSON-RPC batch of `members` requests, from which the platform
    /// learns what each upstream that answered takes ([`crate::upstream::batch::judge`],
    /// [`crate::upstream::batch::BatchLimits`]); by default, [`Platform::post`] alone.
    async fn post_batch(
        &self,
        body: &str,
        members: usize,
        kind: CallKind,
        timeout_ms: u64,
    ) -> Result<UpstreamReply, UpstreamError> {
        let _ = members;
        self.post(body, kind, timeout_ms).await
    }

    /// [`Platform::post`] of a client's read that needs `need` of the upstreams' heads
    /// ([`BlockNeed`]): the platform sends it only to upstreams that have what it needs
    /// ([`crate::upstream::heads::Heads::usable`]) and answers `eth_blockNumber` with at least
    /// the highest head it knows; by default, [`Platform::post`] alone.
    async fn post_read(
        &self,
        body: &str,
        kind: CallKind,
        need: BlockNeed,
        timeout_ms: u64,
    ) -> Result<UpstreamReply, UpstreamError> {
        let _ = need;
        self.post(body, kind, timeout_ms).await
    }

    /// [`Platform::post_read`] asked again because upstream `not` (its index in the chain's
    /// set, [`crate::upstream::Answerer`]) may lack the block the read needs (`need`): to another
    /// upstream whose head is known to have it when there is one, else as
    /// [`Platform::post_read`] asks (the same one, once more). By default,
    /// [`Platform::post_read`].
    async fn post_read_elsewhere(
        &self,
        body: &str,
        kind: CallKind,
        need: BlockNeed,
        timeout_ms: u64,
        not: usize,
    ) -> Result<UpstreamReply, UpstreamError> {
        let _ = not;
        self.post_read(body, kind, need, timeout_ms).await
    }

    /// Whether sends go to a private route (`UPSTREAM_SEND_URL`), whose own refusals the
    /// relay reads by the route's rules (Flashbots Protect's racing `invalid nonce`,
    /// [`crate::upstream::submit`]); by default false.
    fn sends_to_private_route(&self) -> bool {
        false
    }

    /// The most members a JSON-RPC batch of `kind` may have now: the lowest of what the
    /// upstreams of `kind` taught ([`crate::upstream::batch::BatchLimits::limit`]); 1 means no
    /// batch. By default `usize::MAX` (nothing learned).
    fn batch_limit(&self, kind: CallKind) -> usize {
        let _ = kind;
        usize::MAX
    }

    /// GETs the private routes' status of transaction `hash` (each route's `SEND_STATUS_URL` with
    /// the hash, [`crate::ordering::route_status::status_url`], in route order until one knows
    /// it), waiting at most `timeout_ms` each, the answer at most
    /// [`crate::ordering::route_status::MAX_STATUS_BYTES`] and JSON; once, never retried.
    ///
    /// # Errors
    /// [`UpstreamError`] as for `post` (a route that could not be asked, when none knows it);
    /// `Unreachable` when no `SEND_STATUS_URL` is set.
    async fn get_status(
        &self,
        hash: &TxHash,
        timeout_ms: u64,
    ) -> Result<UpstreamReply, UpstreamError>;

    /// Posts `body` to the private route at `index` of `UPSTREAM_SEND_URL` alone (a cancel
    /// that must reach each route that may hold a transaction), within `timeout_ms`; by default
    /// as a send ([`Platform::post`], the routes in order).
    ///
    /// # Errors
    /// As [`Platform::post`].
    async fn post_route(
        &self,
        index: usize,
        body: &str,
        timeout_ms: u64,
    ) -> Result<UpstreamReply, UpstreamError> {
        let _ = index;
        self.post(body, CallKind::Send, timeout_ms).await
    }

    /// [`Platform::get_status`], asking first the routes of `routes`, the route that took it
    /// first ([`TakenBy::ask_order`]); by default as `get_status` (every route in order).
    ///
    /// # Errors
    /// As [`Platform::get_status`].
    async fn get_status_at(
        &self,
        hash: &TxHash,
        routes: TakenBy,
        timeout_ms: u64,
    ) -> Result<UpstreamReply, UpstreamError> {
        let _ = routes;
        self.get_status(hash, timeout_ms).await
    }

    /// Waits `ms` milliseconds on a timer of this request's own.
    async fn sleep(&self, ms: u64);

    /// The time, Unix ms.
    fn now_ms(&self) -> u64;

    /// A random number in [0, 1), for backoff jitter.
    fn random(&self) -> f64;

    /// Records one operator metric (a log line, and a data point where a dataset is bound).
    fn emit(&self, metric: &Metric);
}
