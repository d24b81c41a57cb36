//! The core's [`Platform`] over HTTP ([`HttpUpstream`]), and several upstreams (wasm32 only): the
//! calls the pure [`Rotation`] decides. One rotation per isolate (the
//! Worker's, and each Durable Object's): it learns from every request the isolate makes, with no
//! round trip to shared state; an isolate that starts learns within a few requests.
//!
//! - Before an upstream is used its `eth_chainId` is asked (in the background, once; again after a
//!   cool-down when it could not answer): on another chain than `CHAIN_ID` (or, unset, than the
//!   most preferred upstream that answered, which names the isolate's chain id,
//!   [`crate::chain_id::ChainIdCache::learn`]) it is never used, and an `upstream_excluded` line
//!   says why.
//! - Where a request goes is its [`Route`], decided from what the relay parsed (never from the
//!   text that goes out):
//!   - a transaction count, a transaction or a receipt by hash is asked of every healthy upstream
//!     at once; the first usable answer waits at most its hedge delay for the others, and the
//!     answers are merged (the highest count; any that found the transaction);
//!   - a filter method goes to the preferred upstream (the first of `UPSTREAM_RPC_URL` in the
//!     rotation), and a method that is not a known read goes to the best one: once, never hedged,
//!     never moved after it was sent;
//!   - a known read, a question of the relay's own, or a transaction goes to the best upstream;
//!     if it has not answered within the hedge delay it also goes to the next (at most two more),
//!     and a failure (connection, timeout, HTTP 5xx/429) moves it to the next at once. The first
//!     usable answer wins. For a transaction the first acceptance (a result, "already known");
//!     a refusal only once every upstream sent the bytes has answered, and when one of them
//!     failed in a way that may have let the bytes in (a lost connection, a timeout) the outcome
//!     is that failure (unknown: the sender's holder retries and checks by hash).
//!     `SEND_BROADCAST=all` sends a transaction to every healthy upstream at once, never to a
//!     cooling one while any is healthy ([`Rotation::broadcast`]). Under a strict
//!     upstream pool (`UPSTREAM_POOL`, Hedera) a send is not hedged: it moves to the next upstream
//!     only when one fails (a second copy would be a charged refusal).
//! - Health ([`judge`]): the relay's own questions judge an upstream (no answer, HTTP 5xx/429, a
//!   busy answer). A client's request counts against it only when it says the node was not there
//!   whatever the request (a refused connection, HTTP 429/503): never a timeout, an answer too
//!   large, a gateway's 502/504, nor a JSON-RPC error. After such a reply the upstream is asked its
//!   chain id in the background ([`probe`]), which is judged as the relay's own.

use crate::config::Config;
use crate::edge::http::post_url;
use crate::edge::runtime::{chain_ids, emit, now_ms};
use crate::metrics::Metric;
use crate::ordering::sender::PoolKind;
use crate::upstream::merge;
use crate::upstream::rotation::{judge, Attempt, AttemptKind, Judged, Rotation, HEDGE_MAX_MS};
use crate::upstream::route::Read;
use crate::upstream::Platform;
use crate::upstream::{classify, may_have_arrived, Route, UpstreamError, UpstreamReply};
use futures_util::future::{select, Either, LocalBoxFuture};
use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use std::cell::RefCell;
use std::time::Duration;
use worker::{Delay, Env};

/// The most upstreams one request goes to (the best and two hedges).
const MAX_TRIED_AT_ONCE: usize = 3;
/// How long a chain check may take, ms.
const CHECK_TIMEOUT_MS: u64 = 10_000;
/// How often a request waiting for the first chain check looks at it, ms.
const CHECK_POLL_MS: u64 = 5;

#[derive(Default)]
struct State {
    rotation: Option<Rotation>,
    /// Since when each upstream's chain check runs, Unix ms (0: none).
    checking: Vec<u64>,
    /// Whether a probe of each upstream runs ([`probe`]).
    probing: Vec<bool>,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
}

fn with<R>(config: &Config, f: impl FnOnce(&mut State) -> R) -> R {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let n = config.upstream_urls.len();
        if s.rotation.as_ref().is_none_or(|p| p.len() != n) {
            s.rotation = Some(Rotation::new(n));
            s.checking = vec![0; n];
            s.probing = vec![false; n];
        }
        f(&mut s)
    })
}

fn rotation<R>(config: &Config, f: impl FnOnce(&mut Rotation) -> R) -> R {
    with(config, |s| f(s.rotation.as_mut().expect("made by with")))
}

/// Records an attempt at `index` that began at `started_ms`; logs a cool-down it begins.
fn record(config: &Config, env: &Env, index: usize, kind: AttemptKind, started_ms: u64) {
    let now = now_ms();
    let attempt = match kind {
        AttemptKind::Answered => Attempt::Answered {
            latency_ms: now.saturating_sub(started_ms),
        },
        AttemptKind::Failed => Attempt::Failed,
        AttemptKind::Unjudged => return,
    };
    if rotation(config, |p| p.record(index, attempt, now)) {
        emit(
            env,
            &Metric::new("upstream_cooling", "", "failures")
                .value("count", 1.0)
                .field("upstream", config.upstream_name(index)),
            None,
        );
    }
}

/// Judges `reply` from upstream `index` to a request on `route` that began at `started_ms`
/// ([`judge`]), records it, and probes the upstream when the reply said nothing of its health.
fn judged(
    config: &Config,
    env: &Env,
    index: usize,
    route: Route,
    reply: &Result<UpstreamReply, UpstreamError>,
    started_ms: u64,
) -> Judged {
    let judged = judge(route, reply);
    record(config, env, index, judged.attempt, started_ms);
    if judged.probe {
        probe(config, env, index);
    }
    judged
}

/// Asks upstream `index` its chain id, a question of the relay's own judged as one, after a
/// client's request to it failed in a way that says nothing of the node ([`Judged::probe`]): a
/// node that hangs is found by it, a node busy with a client's wide query answers it. One probe
/// at a time per upstream, in the background.
fn probe(config: &Config, env: &Env, index: usize) {
    if with(config, |s| std::mem::replace(&mut s.probing[index], true)) {
        return;
    }
    let (config, env) = (config.clone(), env.clone());
    worker::wasm_bindgen_futures::spawn_local(async move {
        let started = now_ms();
        let timeout_ms = CHECK_TIMEOUT_MS.min(config.upstream_timeout_ms);
        let reply = post_url(
            &config,
            &config.upstream_urls[index],
            CHAIN_ID_REQUEST,
            timeout_ms,
        )
        .await;
        record(
            &config,
            &env,
            index,
            judge(Route::Own, &reply).attempt,
            started,
        );
        with(&config, |s| s.probing[index] = false);
    });
}

/// Whether a probe or a chain check of this isolate is under way.
pub fn background_running() -> bool {
    STATE.with(|s| {
        let s = s.borrow();
        s.probing.iter().any(|&p| p) || s.checking.iter().any(|&t| t != 0)
    })
}

/// Resolves once no probe or chain check of this isolate is under way, at most after
/// [`CHECK_TIMEOUT_MS`]. The Worker hands it to `ctx.waitUntil` when it answers a request with
/// one running: the runtime cancels a request's I/O once its response is sent, and a probe
/// started by the request's last try would otherwise never reach its upstream.
pub async fn background_done() {
    let until = now_ms().saturating_add(CHECK_TIMEOUT_MS);
    while background_running() && now_ms() < until {
        Delay::from(Duration::from_millis(BACKGROUND_POLL_MS)).await;
    }
}

/// How often [`background_done`] looks, ms.
const BACKGROUND_POLL_MS: u64 = 20;

/// The relay's chain id question.
const CHAIN_ID_REQUEST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}"#;

/// Starts the chain check of every upstream not yet checked, not cooling and not being checked;
/// waits (up to [`CHECK_TIMEOUT_MS`]) only while no upstream is usable yet.
async fn ensure_chains(config: &Config, env: &Env) {
    let now = now_ms();
    let start: Vec<usize> = with(config, |s| {
        let upstreams = s.rotation.as_ref().expect("made by with");
        let list: Vec<usize> = upstreams
            .unchecked()
            .into_iter()
            .filter(|&i| !upstreams.cooling(i, now))
            .filter(|&i| s.checking[i] == 0 || now > s.checking[i] + CHECK_TIMEOUT_MS)
            .collect();
        for &i in &list {
            s.checking[i] = now;
        }
        list
    });
    for index in start {
        let (config, env) = (config.clone(), env.clone());
        worker::wasm_bindgen_futures::spawn_local(async move {
            check_chain(&config, &env, index).await;
        });
    }
    let until = now.saturating_add(CHECK_TIMEOUT_MS);
    loop {
        let (usable_now, running) = with(config, |s| {
            let upstreams = s.rotation.as_ref().expect("made by with");
            (upstreams.any_checked(), s.checking.iter().any(|&t| t != 0))
        });
        if usable_now || !running || now_ms() >= until {
            return;
        }
        Delay::from(Duration::from_millis(CHECK_POLL_MS)).await;
    }
}

/// Asks upstream `index` its `eth_chainId` and admits or excludes it.
async fn check_chain(config: &Config, env: &Env, index: usize) {
    let started = now_ms();
    let reply = post_url(
        config,
        &config.upstream_urls[index],
        CHAIN_ID_REQUEST,
        CHECK_TIMEOUT_MS,
    )
    .await;
    let id = reply
        .as_ref()
        .ok()
        .and_then(|r| crate::jsonrpc::result_quantity(&r.body));
    let kind = if id.is_some() {
        AttemptKind::Answered
    } else {
        AttemptKind::Failed
    };
    record(config, env, index, kind, started);
    if id.is_some() && config.chain_id.is_none() {
        // CHAIN_ID unset: the most preferred upstream that answers names the chain, so a
        // more preferred one still being asked is waited for.
        let until = now_ms().saturating_add(CHECK_TIMEOUT_MS);
        while now_ms() < until
            && chain_ids().known().is_none()
            && with(config, |s| s.checking[..index].iter().any(|&t| t != 0))
        {
            Delay::from(Duration::from_millis(CHECK_POLL_MS)).await;
        }
    }
    let excluded = with(config, |s| {
        s.checking[index] = 0;
        let id = id?;
        let want = config.chain_id.unwrap_or_else(|| chain_ids().learn(id));
        let upstreams = s.rotation.as_mut().expect("made by with");
        if id == want {
            upstreams.checked(index);
            None
        } else {
            let why = format!("eth_chainId {id}, the relay's chain is {want}");
            upstreams.exclude(index, why.clone());
            Some((id, want))
        }
    });
    if let Some((id, want)) = excluded {
        emit(
            env,
            &Metric::new("upstream_excluded", "", "other_chain")
                .value("count", 1.0)
                .field("upstream", config.upstream_name(index))
                .field("chain_id", id)
                .field("want", want),
            None,
        );
    }
}

type Attempting<'a> = LocalBoxFuture<'a, (usize, u64, Result<UpstreamReply, UpstreamError>)>;

fn attempt<'a>(config: &'a Config, index: usize, body: &'a str, timeout_ms: u64) -> Attempting<'a> {
    async move {
        let started = now_ms();
        let reply = post_url(config, &config.upstream_urls[index], body, timeout_ms).await;
        (index, started, reply)
    }
    .boxed_local()
}

/// POSTs `body` (a request on `route`) to the upstreams of `config` (two or more). See the module
/// documentation.
pub async fn post_rotated(
    config: &Config,
    env: &Env,
    body: &str,
    route: Route,
    timeout_ms: u64,
) -> Result<UpstreamReply, UpstreamError> {
    ensure_chains(config, env).await;
    let now = now_ms();
    let order = rotation(config, |p| p.order(now));
    if order.is_empty() {
        return Err(UpstreamError::Unreachable(
            "no upstream on the relay's chain could be reached".into(),
        ));
    }
    let once = |index| async move {
        let (index, started, reply) = attempt(config, index, body, timeout_ms).await;
        judged(config, env, index, route, &reply, started);
        reply
    };
    match route {
        Route::Read(Read::Merged) => fan_out(config, env, &order, body, route, timeout_ms).await,
        Route::Own if merge::fans_out(body) => {
            fan_out(config, env, &order, body, route, timeout_ms).await
        }
        Route::Read(Read::Filter) => {
            let preferred = rotation(config, |p| p.preferred(now)).unwrap_or(order[0]);
            once(preferred).await
        }
        Route::Read(Read::Once) => once(order[0]).await,
        Route::Send => {
            let chain_id = config.chain_id.or_else(|| chain_ids().known());
            let hedge_ms = match config.pool_kind_for(chain_id) {
                // A strict upstream charges for a copy it already has: a send moves on only on
                // failure.
                PoolKind::Strict => None,
                PoolKind::Mempool => Some(rotation(config, |p| p.hedge_delay_ms(order[0]))),
            };
            // A broadcast goes to the healthy upstreams only (every one when none is).
            let (order, at_once) = if config.send_broadcast {
                let healthy = rotation(config, |p| p.broadcast(now));
                let at_once = healthy.len();
                (healthy, at_once)
            } else {
                (order, 1)
            };
            race(
                config, env, &order, body, route, timeout_ms, at_once, hedge_ms,
            )
            .await
        }
        Route::Read(Read::Idempotent) | Route::Own => {
            let hedge_ms = Some(rotation(config, |p| p.hedge_delay_ms(order[0])));
            race(config, env, &order, body, route, timeout_ms, 1, hedge_ms).await
        }
    }
}

/// The hedged race of one request on `route` over `order`: `at_once` upstreams at first, one
/// more after each failure and each hedge delay (`hedge_ms`, none: only on failure).
#[allow(clippy::too_many_arguments)]
async fn race(
    config: &Config,
    env: &Env,
    order: &[usize],
    body: &str,
    route: Route,
    timeout_ms: u64,
    at_once: usize,
    hedge_ms: Option<u64>,
) -> Result<UpstreamReply, UpstreamError> {
    let send = route == Route::Send;
    let limit = if at_once > 1 {
        order.len()
    } else {
        order.len().min(MAX_TRIED_AT_ONCE)
    };
    let mut running: FuturesUnordered<Attempting> = FuturesUnordered::new();
    let mut next = 0;
    while next < at_once.min(limit) {
        running.push(attempt(config, order[next], body, timeout_ms));
        next += 1;
    }
    // A send's first refusal; the last failure; a send's failure that may have let the bytes in.
    let mut refused: Option<(usize, UpstreamReply)> = None;
    let mut failure: Option<Result<UpstreamReply, UpstreamError>> = None;
    let mut unknown: Option<(usize, Result<UpstreamReply, UpstreamError>)> = None;
    loop {
        let hedge = hedge_ms.filter(|_| refused.is_none() && next < limit);
        let outcome = match hedge {
            Some(ms) => {
                match select(running.next(), Delay::from(Duration::from_millis(ms))).await {
                    Either::Left((done, _)) => done,
                    Either::Right(_) => {
                        running.push(attempt(config, order[next], body, timeout_ms));
                        next += 1;
                        continue;
                    }
                }
            }
            None => running.next().await,
        };
        let Some((index, started, reply)) = outcome else {
            break; // nothing left in flight
        };
        let judged = judged(config, env, index, route, &reply, started);
        if !judged.usable {
            if send && may_have_arrived(&reply) {
                unknown = Some((index, reply.clone()));
            }
            failure = Some(reply);
            if refused.is_none() && next < limit && route.moved_on_failure() {
                running.push(attempt(config, order[next], body, timeout_ms));
                next += 1;
            }
            continue;
        }
        if !send || classify(&reply).0.went_in() {
            if let (true, Some((other, _))) = (send, &refused) {
                disagreement(config, env, "accepted_after_refusal", index, *other);
            }
            return reply;
        }
        // A refusal: the answer only once every upstream sent the bytes has answered.
        if refused.is_none() {
            refused = reply.ok().map(|r| (index, r));
        }
    }
    match (refused, unknown, failure) {
        (Some((refused_by, _)), Some((unknown_at, outcome)), _) => {
            disagreement(config, env, "refused_while_unknown", unknown_at, refused_by);
            outcome
        }
        (Some((_, reply)), None, _) => Ok(reply),
        (None, _, Some(failure)) => failure,
        (None, _, None) => Err(UpstreamError::Timeout(timeout_ms)),
    }
}

/// Logs that upstreams disagreed on a transaction: `label` `accepted_after_refusal` (`first`
/// accepted what `second` refused) or `refused_while_unknown` (`second` refused, and the send to
/// `first` may have gone in: the outcome is unknown).
fn disagreement(config: &Config, env: &Env, label: &str, first: usize, second: usize) {
    let (first_field, second_field) = match label {
        "accepted_after_refusal" => ("accepted_by", "refused_by"),
        _ => ("unknown_at", "refused_by"),
    };
    emit(
        env,
        &Metric::new("upstream_disagreement", "", label)
            .value("count", 1.0)
            .field(first_field, config.upstream_name(first))
            .field(second_field, config.upstream_name(second)),
        None,
    );
}

/// Asks every healthy upstream of `order` at once and merges the usable answers that came by the
/// first one's arrival and its hedge delay.
async fn fan_out(
    config: &Config,
    env: &Env,
    order: &[usize],
    body: &str,
    route: Route,
    timeout_ms: u64,
) -> Result<UpstreamReply, UpstreamError> {
    let now = now_ms();
    let healthy: Vec<usize> = rotation(config, |p| {
        order
            .iter()
            .copied()
            .filter(|&i| p.healthy(i, now))
            .collect()
    });
    let targets = if healthy.is_empty() {
        order[..1].to_vec()
    } else {
        healthy
    };
    let mut running: FuturesUnordered<Attempting> = targets
        .iter()
        .map(|&i| attempt(config, i, body, timeout_ms))
        .collect();
    let mut answers: Vec<(usize, UpstreamReply)> = Vec::new();
    let mut failure = None;
    let mut first_at: Option<u64> = None;
    loop {
        let outcome = match first_at {
            Some(at) => {
                let hedge = rotation(config, |p| p.hedge_delay_ms(answers[0].0)).min(HEDGE_MAX_MS);
                let ms = at.saturating_add(hedge).saturating_sub(now_ms());
                match select(running.next(), Delay::from(Duration::from_millis(ms))).await {
                    Either::Left((done, _)) => done,
                    Either::Right(_) => break,
                }
            }
            None => running.next().await,
        };
        let Some((index, started, reply)) = outcome else {
            break;
        };
        let judged = judged(config, env, index, route, &reply, started);
        match reply {
            Ok(r) if judged.usable => {
                answers.push((index, r));
                first_at.get_or_insert(now_ms());
            }
            other => failure = Some(other),
        }
    }
    if answers.is_empty() {
        return failure.unwrap_or(Err(UpstreamError::Timeout(timeout_ms)));
    }
    // In preference order.
    answers.sort_by_key(|(i, _)| order.iter().position(|o| o == i));
    let bodies: Vec<&str> = answers.iter().map(|(_, r)| r.body.as_str()).collect();
    let mut reply = answers[0].1.clone();
    if let Some(merged) = merge::merge(body, &bodies) {
        reply.body = merged;
    }
    Ok(reply)
}

/// The upstream, the clock and the metrics of one Worker request or Durable Object call.
pub struct HttpUpstream<'a> {
    /// The settings (upstream URL, limits).
    pub config: &'a Config,
    /// The environment, for the metrics dataset.
    pub env: &'a worker::Env,
    /// The `X-Request-Id` of the request this work is for, added to its metrics.
    pub request_id: Option<&'a str>,
}

impl Platform for HttpUpstream<'_> {
    /// One upstream: straight to it. Several: through the isolate's rotation, by `route` (see the
    /// module documentation).
    async fn post(
        &self,
        body: &str,
        route: Route,
        timeout_ms: u64,
    ) -> Result<UpstreamReply, UpstreamError> {
        match self.config.upstream_urls.as_slice() {
            [one] => post_url(self.config, one, body, timeout_ms).await,
            _ => post_rotated(self.config, self.env, body, route, timeout_ms).await,
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
        crate::edge::runtime::emit(self.env, metric, self.request_id);
    }
}
