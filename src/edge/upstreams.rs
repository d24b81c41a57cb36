//! The core's [`Upstream`] over HTTP ([`HttpUpstream`]), and several upstreams (wasm32 only): the
//! calls the pure [`Pool`] decides. One pool per isolate (the
//! Worker's, and each Durable Object's): it learns from every request the isolate makes, with no
//! round trip to shared state; an isolate that starts learns within a few requests.
//!
//! - Before an upstream is used its `eth_chainId` is asked (in the background, once; again after a
//!   cool-down when it could not answer): on another chain than `CHAIN_ID` (or, unset, than the
//!   most preferred upstream that answered) it is never used, and an `upstream_excluded` line
//!   says why.
//! - A transaction count, a transaction or a receipt by hash ([`merge::fans_out`]) is asked of
//!   every healthy upstream at once; the first usable answer waits at most its hedge delay for the
//!   others, and the answers are merged (the highest count; any that found the transaction).
//! - Any other request goes to the best upstream; if it has not answered within the hedge delay
//!   it also goes to the next (at most two more), and a failure (connection, timeout, HTTP
//!   5xx/429, a busy node) moves it to the next at once. The first usable answer wins; for
//!   `eth_sendRawTransaction` the first acceptance (a result, "already known"), a refusal only
//!   when nobody accepted. `SEND_BROADCAST=all` sends a transaction to every healthy upstream at
//!   once. Under a strict upstream pool (`UPSTREAM_POOL`, Hedera) a send is not hedged: it moves
//!   to the next upstream only when one fails (a second copy would be a charged refusal).

use crate::config::Config;
use crate::edge::platform::{emit, now_ms};
use crate::edge::upstream::post_url;
use crate::metrics::Metric;
use crate::ordering::sender::UpstreamPool;
use crate::upstream::merge;
use crate::upstream::pool::{Attempt, Pool, HEDGE_MAX_MS};
use crate::upstream::{classify, retry, Upstream, UpstreamError, UpstreamReply};
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
    pool: Option<Pool>,
    /// Since when each upstream's chain check runs, Unix ms (0: none).
    checking: Vec<u64>,
    /// The chain id the upstreams must serve, once known.
    chain_id: Option<u64>,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
}

fn with<R>(config: &Config, f: impl FnOnce(&mut State) -> R) -> R {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let n = config.upstream_urls.len();
        if s.pool.as_ref().is_none_or(|p| p.len() != n) {
            s.pool = Some(Pool::new(n));
            s.checking = vec![0; n];
            s.chain_id = config.chain_id;
        }
        f(&mut s)
    })
}

fn pool<R>(config: &Config, f: impl FnOnce(&mut Pool) -> R) -> R {
    with(config, |s| f(s.pool.as_mut().expect("made by with")))
}

/// Whether an answer is usable (an answer of the node, not of its overload or absence).
fn usable(reply: &Result<UpstreamReply, UpstreamError>) -> bool {
    match reply {
        Ok(r) => !retry::RETRYABLE_STATUSES.contains(&r.status) && !classify(reply).0.retryable(),
        Err(_) => false,
    }
}

/// Records an attempt at `index` that began at `started_ms`; logs a cool-down it begins.
fn record(config: &Config, env: &Env, index: usize, ok: bool, started_ms: u64) {
    let now = now_ms();
    let attempt = if ok {
        Attempt::Answered {
            latency_ms: now.saturating_sub(started_ms),
        }
    } else {
        Attempt::Failed
    };
    if pool(config, |p| p.record(index, attempt, now)) {
        emit(
            env,
            &Metric::new("upstream_cooling", "", "failures")
                .value("count", 1.0)
                .field("upstream", config.upstream_name(index)),
            None,
        );
    }
}

/// Starts the chain check of every upstream not yet checked, not cooling and not being checked;
/// waits (up to [`CHECK_TIMEOUT_MS`]) only while no upstream is usable yet.
async fn ensure_chains(config: &Config, env: &Env) {
    let now = now_ms();
    let start: Vec<usize> = with(config, |s| {
        let pool = s.pool.as_ref().expect("made by with");
        let list: Vec<usize> = pool
            .unchecked()
            .into_iter()
            .filter(|&i| !pool.cooling(i, now))
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
            let pool = s.pool.as_ref().expect("made by with");
            (pool.any_checked(), s.checking.iter().any(|&t| t != 0))
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
    let request = r#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}"#;
    let reply = post_url(
        config,
        &config.upstream_urls[index],
        request,
        CHECK_TIMEOUT_MS,
    )
    .await;
    let id = reply
        .as_ref()
        .ok()
        .and_then(|r| crate::jsonrpc::result_quantity(&r.body));
    record(config, env, index, id.is_some(), started);
    if id.is_some() && config.chain_id.is_none() {
        // CHAIN_ID unset: the most preferred upstream that answers names the chain, so a
        // more preferred one still being asked is waited for.
        let until = now_ms().saturating_add(CHECK_TIMEOUT_MS);
        while now_ms() < until
            && with(config, |s| {
                s.chain_id.is_none() && s.checking[..index].iter().any(|&t| t != 0)
            })
        {
            Delay::from(Duration::from_millis(CHECK_POLL_MS)).await;
        }
    }
    let excluded = with(config, |s| {
        s.checking[index] = 0;
        let id = id?;
        let want = *s.chain_id.get_or_insert(id);
        let pool = s.pool.as_mut().expect("made by with");
        if id == want {
            pool.checked(index);
            None
        } else {
            let why = format!("eth_chainId {id}, the relay's chain is {want}");
            pool.exclude(index, why.clone());
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

/// POSTs `body` to the upstreams of `config` (two or more). See the module documentation.
pub async fn post_pooled(
    config: &Config,
    env: &Env,
    body: &str,
    timeout_ms: u64,
) -> Result<UpstreamReply, UpstreamError> {
    ensure_chains(config, env).await;
    let order = pool(config, |p| p.order(now_ms()));
    if order.is_empty() {
        return Err(UpstreamError::Unreachable(
            "no upstream on the relay's chain could be reached".into(),
        ));
    }
    if merge::fans_out(body) {
        return fan_out(config, env, &order, body, timeout_ms).await;
    }
    let send = body.contains("\"eth_sendRawTransaction\"");
    let chain_id = with(config, |s| s.chain_id);
    let hedge_ms = if send && config.upstream_pool_for(chain_id) == UpstreamPool::Strict {
        // A strict upstream charges for a copy it already has: a send moves on only on failure.
        None
    } else {
        Some(pool(config, |p| p.hedge_delay_ms(order[0])))
    };
    let at_once = if send && config.send_broadcast {
        order.len()
    } else {
        1
    };
    race(
        config, env, &order, body, timeout_ms, send, at_once, hedge_ms,
    )
    .await
}

/// The hedged race of one request over `order`.
#[allow(clippy::too_many_arguments)]
async fn race(
    config: &Config,
    env: &Env,
    order: &[usize],
    body: &str,
    timeout_ms: u64,
    send: bool,
    at_once: usize,
    hedge_ms: Option<u64>,
) -> Result<UpstreamReply, UpstreamError> {
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
    // A usable answer that is not an acceptance (a send's refusal), and the last failure.
    let mut refused: Option<(usize, UpstreamReply)> = None;
    let mut failure: Option<Result<UpstreamReply, UpstreamError>> = None;
    let mut refused_at: Option<u64> = None;
    loop {
        let wait_ms = match (refused_at, hedge_ms) {
            (Some(at), _) => Some(
                at.saturating_add(hedge_ms.unwrap_or(HEDGE_MAX_MS))
                    .saturating_sub(now_ms()),
            ),
            (None, Some(ms)) if next < limit => Some(ms),
            _ => None,
        };
        let outcome = match wait_ms {
            Some(ms) => {
                match select(running.next(), Delay::from(Duration::from_millis(ms))).await {
                    Either::Left((done, _)) => done,
                    Either::Right(_) => {
                        if refused_at.is_some() {
                            break;
                        }
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
        let ok = usable(&reply);
        record(config, env, index, ok, started);
        if !ok {
            failure = Some(reply);
            if next < limit && refused_at.is_none() {
                running.push(attempt(config, order[next], body, timeout_ms));
                next += 1;
            }
            continue;
        }
        if !send || classify(&reply).0.went_in() {
            if let (true, Some((other, _))) = (send, &refused) {
                emit(
                    env,
                    &Metric::new("upstream_disagreement", "", "accepted_after_refusal")
                        .value("count", 1.0)
                        .field("accepted_by", config.upstream_name(index))
                        .field("refused_by", config.upstream_name(*other)),
                    None,
                );
            }
            return reply;
        }
        // A refusal: the answer unless one still in flight accepts within the hedge delay.
        if refused.is_none() {
            refused = reply.ok().map(|r| (index, r));
            refused_at = Some(now_ms());
        }
        if running.is_empty() {
            break;
        }
    }
    match (refused, failure) {
        (Some((_, reply)), _) => Ok(reply),
        (None, Some(failure)) => failure,
        (None, None) => Err(UpstreamError::Timeout(timeout_ms)),
    }
}

/// Asks every healthy upstream of `order` at once and merges the usable answers that came by the
/// first one's arrival and its hedge delay.
async fn fan_out(
    config: &Config,
    env: &Env,
    order: &[usize],
    body: &str,
    timeout_ms: u64,
) -> Result<UpstreamReply, UpstreamError> {
    let now = now_ms();
    let healthy: Vec<usize> = pool(config, |p| {
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
                let hedge = pool(config, |p| p.hedge_delay_ms(answers[0].0)).min(HEDGE_MAX_MS);
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
        let ok = usable(&reply);
        record(config, env, index, ok, started);
        match reply {
            Ok(r) if ok => {
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

impl Upstream for HttpUpstream<'_> {
    /// One upstream: straight to it. Several: through the isolate's pool (see the module
    /// documentation).
    async fn post(&self, body: &str, timeout_ms: u64) -> Result<UpstreamReply, UpstreamError> {
        match self.config.upstream_urls.as_slice() {
            [one] => post_url(self.config, one, body, timeout_ms).await,
            _ => post_pooled(self.config, self.env, body, timeout_ms).await,
        }
    }

    async fn sleep(&self, ms: u64) {
        Delay::from(Duration::from_millis(ms)).await;
    }

    fn now_ms(&self) -> u64 {
        crate::edge::platform::now_ms()
    }

    fn random(&self) -> f64 {
        worker::js_sys::Math::random()
    }

    fn emit(&self, metric: &Metric) {
        crate::edge::platform::emit(self.env, metric, self.request_id);
    }
}
