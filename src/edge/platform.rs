//! The core's [`Platform`] on the Worker and the Durable Object (wasm32 only): the upstreams
//! (through [`crate::edge::race::run`]), a timer, the clock, randomness and metrics.

use crate::config::Config;
use crate::edge::http::get_url;
use crate::edge::race::{batch_limit, run, Call};
use crate::edge::runtime::chain_ids;
use crate::metrics::Metric;
use crate::ordering::route_status::{status_url, RouteStatus, MAX_STATUS_BYTES};
use crate::ordering::row::TakenBy;
use crate::transaction::TxHash;
use crate::upstream::heads::BlockNeed;
use crate::upstream::route::RoutingTable;
use crate::upstream::Platform;
use crate::upstream::{CallKind, UpstreamError, UpstreamReply};
use std::time::Duration;
use worker::Delay;

/// The platform of one Worker request or Durable Object call ([`Platform`]): the upstreams, the
/// clock and the metrics.
pub struct EdgePlatform<'a> {
    /// The settings (upstream URL, limits).
    pub config: &'a Config,
    /// The environment, for the metrics dataset.
    pub env: &'a worker::Env,
    /// The `X-Request-Id` of the request this work is for, added to its metrics.
    pub request_id: Option<&'a str>,
}

impl EdgePlatform<'_> {
    /// The routing table of the isolate's chain.
    fn table(&self) -> RoutingTable {
        let chain_id = chain_ids().current(self.config.chain_id);
        let table = RoutingTable::new(
            self.config.pool_kind_for(chain_id),
            self.config.send_broadcast,
        );
        if self.config.private_route() {
            table.behind_a_private_route()
        } else {
            table
        }
    }

    /// To the upstreams of `kind`'s row, raced ([`run`]); `members` for a batch, `need` for a
    /// client's read, `avoid` for a read asked again elsewhere ([`Call::avoid`]).
    async fn post_members(
        &self,
        body: &str,
        members: Option<usize>,
        need: BlockNeed,
        kind: CallKind,
        timeout_ms: u64,
        avoid: Option<usize>,
    ) -> Result<UpstreamReply, UpstreamError> {
        let route = self.table().route(kind);
        let set = self.config.upstreams(route.upstreams);
        let call = Call {
            kind,
            usage: route.usage,
            body,
            members,
            need,
            avoid,
        };
        run(self.config, self.env, set, call, timeout_ms).await
    }
}

impl Platform for EdgePlatform<'_> {
    /// To the upstreams of `kind`'s row in the [`RoutingTable`], raced ([`run`]). A send's row
    /// depends on the pool of the isolate's chain ([`Config::pool_kind_for`]).
    async fn post(
        &self,
        body: &str,
        kind: CallKind,
        timeout_ms: u64,
    ) -> Result<UpstreamReply, UpstreamError> {
        self.post_members(body, None, BlockNeed::Any, kind, timeout_ms, None)
            .await
    }

    /// [`Platform::post`], each upstream's answer judged for the batch limits ([`run`]).
    async fn post_batch(
        &self,
        body: &str,
        members: usize,
        kind: CallKind,
        timeout_ms: u64,
    ) -> Result<UpstreamReply, UpstreamError> {
        self.post_members(body, Some(members), BlockNeed::Any, kind, timeout_ms, None)
            .await
    }

    /// [`Platform::post`] with the read's need of the heads ([`run`]).
    async fn post_read(
        &self,
        body: &str,
        kind: CallKind,
        need: BlockNeed,
        timeout_ms: u64,
    ) -> Result<UpstreamReply, UpstreamError> {
        self.post_members(body, None, need, kind, timeout_ms, None)
            .await
    }

    /// [`Platform::post_read`] to another upstream than `not` whose head is known to have the
    /// block `need` names ([`Call::avoid`]).
    async fn post_read_elsewhere(
        &self,
        body: &str,
        kind: CallKind,
        need: BlockNeed,
        timeout_ms: u64,
        not: usize,
    ) -> Result<UpstreamReply, UpstreamError> {
        self.post_members(body, None, need, kind, timeout_ms, Some(not))
            .await
    }

    fn sends_to_private_route(&self) -> bool {
        self.config.private_route()
    }

    /// The lowest limit of the upstreams of `kind`'s row ([`batch_limit`]).
    fn batch_limit(&self, kind: CallKind) -> usize {
        let route = self.table().route(kind);
        batch_limit(self.config, self.config.upstreams(route.upstreams))
    }

    /// Each route's `SEND_STATUS_URL` with the hash ([`crate::edge::http::get_url`]), in route
    /// order, until one knows the transaction ([`RouteStatus::knows`]): a transaction is at the
    /// route that took it, the first unless it failed over. When none knows it, a route that
    /// could not be asked makes the answer that error (it may hold it: nothing is sent again on
    /// a guess), as does a route without a status URL; else the last route's answer that did
    /// not know it. All of it within `timeout_ms`.
    async fn get_status(
        &self,
        hash: &TxHash,
        timeout_ms: u64,
    ) -> Result<UpstreamReply, UpstreamError> {
        self.get_status_at(hash, TakenBy::default(), timeout_ms)
            .await
    }

    /// [`Platform::post_route`]: that route's URL alone.
    async fn post_route(
        &self,
        index: usize,
        body: &str,
        timeout_ms: u64,
    ) -> Result<UpstreamReply, UpstreamError> {
        let Some(url) = self.config.upstream_send_urls.get(index) else {
            return Err(UpstreamError::Unreachable(format!(
                "no route #{}",
                index + 1
            )));
        };
        crate::edge::http::post_url(self.config, url, body, timeout_ms).await
    }

    /// [`Platform::get_status`] in the order of `routes` ([`TakenBy::ask_order`]): the route
    /// that took the transaction first, so that another's word (`FAILED` at a route whose
    /// answer was lost before the next took it) is not taken for a drop.
    async fn get_status_at(
        &self,
        hash: &TxHash,
        routes: TakenBy,
        timeout_ms: u64,
    ) -> Result<UpstreamReply, UpstreamError> {
        let mut unknown = None;
        let mut failed = None;
        // One budget for all the routes asked, not `timeout_ms` each.
        let until_ms = self.now_ms().saturating_add(timeout_ms);
        let templates = &self.config.send_status_urls;
        let order = routes.ask_order(templates.len());
        for template in order.iter().filter_map(|&i| templates[i].as_ref()) {
            let left_ms = until_ms.saturating_sub(self.now_ms());
            if left_ms == 0 {
                failed.get_or_insert(Err(UpstreamError::Timeout(timeout_ms)));
                break;
            }
            let url = status_url(template, hash);
            match get_url(self.config, &url, MAX_STATUS_BYTES, left_ms).await {
                Ok(reply) if RouteStatus::knows(reply.status, &reply.body) => return Ok(reply),
                Ok(reply) if (200..300).contains(&reply.status) => unknown = Some(reply),
                Ok(reply) => {
                    failed.get_or_insert(Err(UpstreamError::Status(
                        reply.status,
                        reply.retry_after_ms,
                    )));
                }
                Err(e) => {
                    failed.get_or_insert(Err(e));
                }
            }
        }
        // A route without a status URL may hold it: the others' UNKNOWN is no word.
        if failed.is_none() && self.config.send_status_urls.iter().any(Option::is_none) {
            failed = Some(Err(UpstreamError::Unreachable(
                "a route without a status URL may hold it".into(),
            )));
        }
        match (failed, unknown) {
            (Some(error), _) => error,
            (None, Some(reply)) => Ok(reply),
            (None, None) => Err(UpstreamError::Unreachable(
                "SEND_STATUS_URL is not set".into(),
            )),
        }
    }

    async fn sleep(&self, ms: u64) {
        Delay::from(Duration::from_millis(ms)).await;
    }

    fn now_ms(&self) -> u64 {
        crate::edge::runtime::now_ms()
    }

    fn random(&self) -> f64 {
        worker::js_sys::Math::random()
    }

    fn emit(&self, metric: &Metric) {
        crate::edge::runtime::emit(
            self.env,
            crate::edge::runtime::chain_of(self.config),
            metric,
            self.request_id,
        );
    }
}
