//! The upstreams' I/O and timers (wasm32 only): the posts and the timer of each call's
//! [`Race`] (the pure machine in `upstream/race.rs` decides which upstream gets the bytes and
//! which answer is the call's), the chain check of each upstream before it is used, and the
//! background probes a race asks for. The core's platform over them is
//! [`crate::edge::platform::EdgePlatform`].
//! One [`Rotation`] per isolate (the Worker's, and each Durable Object's), keyed by upstream
//! URL: it learns from every call the isolate makes, with no round trip to shared state; an
//! isolate that starts learns within a few requests.
//!
//! - Before an upstream is used its `eth_chainId` is asked ([`crate::chain_id::REQUEST`], in the
//!   background, once; again after a cool-down when it could not answer): on another chain than
//!   `CHAIN_ID` (or, unset, than the most preferred upstream that answered, which names the
//!   isolate's chain id, [`crate::chain_id::ChainIdCache::learn`]) it is never used, and an
//!   `upstream_excluded` line says why.
//! - Where a call goes is its kind's row in the [`RoutingTable`]
//!   ([`crate::upstream::route`]), raced by [`Race`] (the rules are in `upstream/race.rs`).
//! - A race's [`RaceAction::Record`] goes to the rotation (an `upstream_cooling` line when it
//!   begins a cool-down), [`RaceAction::Probe`] asks that upstream its chain id in the
//!   background ([`probe`]), judged as the relay's own, and [`RaceAction::Disagreement`] is an
//!   `upstream_disagreement` line.

use crate::chain_id;
use crate::config::Config;
use crate::edge::http::post_url;
use crate::edge::runtime::{chain_ids, chain_of, emit, now_ms};
use crate::metrics::Metric;
use crate::upstream::batch::{self, BatchAnswer, BatchLimits};
use crate::upstream::heads::{self, BlockNeed, Heads};
use crate::upstream::logs::limits::{self, LogLimits};
use crate::upstream::race::{Disagreement, Race, RaceAction};
use crate::upstream::rotation::{judge, Attempt, Rotation};
use crate::upstream::route::{UpstreamSet, Usage};
use crate::upstream::{Answerer, CallKind, UpstreamError, UpstreamReply};
use futures_util::future::{select, Either, LocalBoxFuture};
use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::time::Duration;
use worker::{Delay, Env};

/// How long a chain check may take, ms.
const CHECK_TIMEOUT_MS: u64 = 10_000;
/// How often a request waiting for the first chain check looks at it, ms.
const CHECK_POLL_MS: u64 = 5;

#[derive(Default)]
struct State {
    rotation: Rotation,
    /// Each upstream's batch limit, by URL.
    batch_limits: BatchLimits,
    /// Each upstream's `eth_getLogs` range cap, by URL.
    log_limits: LogLimits,
    /// Races whose late posts run in the background ([`run`]).
    late: usize,
    /// Each upstream's head, by URL.
    heads: Heads,
    /// Since when each upstream's chain check runs, Unix ms, by URL.
    checking: HashMap<String, u64>,
    /// The upstreams a probe runs for ([`probe`]), by URL.
    probing: HashSet<String>,
}

thread_local! {
    /// Each chain's upstream state, by its chain ([`Config::chain_key`]): one chain's
    /// misconfigured URL (another chain's node given as its upstream) is excluded from that
    /// chain alone, and neither takes the other chain's upstream down nor learns its heads.
    static STATES: RefCell<HashMap<u64, State>> = RefCell::new(HashMap::new());
}

/// Runs `f` on the upstream state of `config`'s chain.
fn with<R>(config: &Config, f: impl FnOnce(&mut State) -> R) -> R {
    STATES.with(|s| f(s.borrow_mut().entry(config.chain_key()).or_default()))
}

/// Records `attempt` at upstream `key`; logs a cool-down it begins.
fn record(config: &Config, env: &Env, key: &str, attempt: Attempt) {
    if with(config, |s| s.rotation.record(key, attempt, now_ms())) {
        emit(
            env,
            chain_of(config),
            &Metric::new("upstream_cooling", "", "failures")
                .value("count", 1.0)
                .field("upstream", config.upstream_label(key)),
            None,
        );
    }
}

/// Asks upstream `key` its chain id, a question of the relay's own judged as one, after a
/// client's request to it failed in a way that says nothing of the node
/// ([`RaceAction::Probe`]): a node that hangs is found by it, a node busy with a client's wide
/// query answers it. One probe at a time per upstream, in the background.
fn probe(config: &Config, env: &Env, key: &str) {
    if !with(config, |s| s.probing.insert(key.to_string())) {
        return;
    }
    let (config, env, key) = (config.clone(), env.clone(), key.to_string());
    worker::wasm_bindgen_futures::spawn_local(async move {
        let started = now_ms();
        let timeout_ms = CHECK_TIMEOUT_MS.min(config.upstream_timeout_ms);
        let reply = post_url(&config, &key, chain_id::REQUEST, timeout_ms).await;
        let judged = judge(CallKind::OwnChainId, &reply);
        if let Some(attempt) = judged.attempt.recorded(now_ms().saturating_sub(started)) {
            record(&config, &env, &key, attempt);
        }
        with(&config, |s| s.probing.remove(&key));
    });
}

/// Whether a probe, a chain check or a race's late posts of this isolate are under way.
pub fn background_running() -> bool {
    STATES.with(|states| {
        states
            .borrow()
            .values()
            .any(|s| !s.probing.is_empty() || !s.checking.is_empty() || s.late > 0)
    })
}

/// Resolves once no probe, chain check or late post of this isolate is under way, at most after
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

/// How long a call that asks every upstream's head (`eth_blockNumber`) waits for the chain
/// checks still running, once one upstream is usable, ms: a fresh isolate's first head is then
/// the best of its upstreams', not the first checked one's (a node stuck behind listed first).
const HEAD_CHECK_WAIT_MS: u64 = 2_000;

/// Starts the chain check of every upstream of `set` not yet checked, not cooling and not being
/// checked; waits (up to [`CHECK_TIMEOUT_MS`]) while no upstream is usable yet, and for a call
/// that asks every upstream's head (`all`) while any check runs (up to [`HEAD_CHECK_WAIT_MS`]).
async fn ensure_chains(config: &Config, env: &Env, set: &[String], all: bool) {
    let now = now_ms();
    let start: Vec<usize> = with(config, |s| {
        let list: Vec<usize> = s
            .rotation
            .unchecked(set)
            .into_iter()
            .filter(|&i| !s.rotation.cooling(&set[i], now))
            .filter(|&i| {
                s.checking
                    .get(&set[i])
                    .is_none_or(|&since| now > since + CHECK_TIMEOUT_MS)
            })
            .collect();
        for &i in &list {
            s.checking.insert(set[i].clone(), now);
        }
        list
    });
    for index in start {
        let (config, env, set) = (config.clone(), env.clone(), set.to_vec());
        worker::wasm_bindgen_futures::spawn_local(async move {
            check_chain(&config, &env, &set, index).await;
        });
    }
    let until = now.saturating_add(CHECK_TIMEOUT_MS);
    let all_until = now.saturating_add(HEAD_CHECK_WAIT_MS);
    loop {
        let (usable_now, running) = with(config, |s| {
            (
                s.rotation.any_checked(set),
                set.iter().any(|k| s.checking.contains_key(k)),
            )
        });
        let waits_for_all = all && now_ms() < all_until;
        if (usable_now && !waits_for_all) || !running || now_ms() >= until {
            return;
        }
        Delay::from(Duration::from_millis(CHECK_POLL_MS)).await;
    }
}

/// Asks upstream `index` of `set` its `eth_chainId` and admits or excludes it.
async fn check_chain(config: &Config, env: &Env, set: &[String], index: usize) {
    let key = &set[index];
    let started = now_ms();
    let reply = post_url(config, key, chain_id::REQUEST, CHECK_TIMEOUT_MS).await;
    let id = reply.as_ref().ok().and_then(chain_id::of_reply);
    let attempt = match id {
        Some(_) => Attempt::Answered {
            latency_ms: now_ms().saturating_sub(started),
        },
        None => Attempt::Failed,
    };
    record(config, env, key, attempt);
    if id.is_some() && config.chain_id.is_none() {
        // CHAIN_ID unset: the most preferred upstream that answers names the chain, so a
        // more preferred one still being asked is waited for.
        let until = now_ms().saturating_add(CHECK_TIMEOUT_MS);
        while now_ms() < until
            && chain_ids().known().is_none()
            && with(config, |s| {
                set[..index].iter().any(|k| s.checking.contains_key(k))
            })
        {
            Delay::from(Duration::from_millis(CHECK_POLL_MS)).await;
        }
    }
    let excluded = with(config, |s| {
        s.checking.remove(key);
        let id = id?;
        let want = config.chain_id.unwrap_or_else(|| chain_ids().learn(id));
        if id == want {
            s.rotation.checked(key);
            None
        } else {
            let why = format!("eth_chainId {id}, the relay's chain is {want}");
            s.rotation.exclude(key, why);
            Some((id, want))
        }
    });
    if let Some((id, want)) = excluded {
        emit(
            env,
            chain_of(config),
            &Metric::new("upstream_excluded", "", "other_chain")
                .value("count", 1.0)
                .field("upstream", config.upstream_label(key))
                .field("chain_id", id)
                .field("want", want),
            None,
        );
    }
}

type Attempting<'a> = LocalBoxFuture<'a, (usize, Result<UpstreamReply, UpstreamError>)>;

/// What a race waits for next.
enum Event {
    /// The upstream at this position of the set replied.
    Reply(usize, Result<UpstreamReply, UpstreamError>),
    /// The race's timer, due at this time (Unix ms), fired.
    Timer(u64),
    /// Nothing is in flight.
    Idle,
}

/// One call to the upstreams: what it is, how its row uses the set, its text, and for a
/// JSON-RPC batch how many members it has.
pub struct Call<'a> {
    /// The kind of call ([`CallKind`]).
    pub kind: CallKind,
    /// How the set is used ([`Usage`]).
    pub usage: Usage,
    /// The request text, made by the relay.
    pub body: &'a str,
    /// For a batch, its member count: each upstream's answer teaches its batch limit
    /// ([`batch::judge`]).
    pub members: Option<usize>,
    /// What a client's read needs of the upstreams' heads ([`BlockNeed`]; `Any` for every
    /// other call): the upstreams it may go to, and for `eth_blockNumber` the heads it teaches.
    pub need: BlockNeed,
    /// A read asked again because this upstream (its index in the chain's set) may lack the
    /// block `need` names: it goes to the others whose heads are known to have it, when there
    /// are any ([`Heads::having`]), else as any read does.
    pub avoid: Option<usize>,
}

/// Learns upstream `key`'s head from its `reply` to `eth_blockNumber`; logs an
/// `upstream_lagging` line when it begins to lag more than `MAX_HEAD_LAG` blocks behind the best.
/// A head more than `MAX_HEAD_LAG` above the read cache's (an answer that came after the cache's
/// head ask had settled for a slower node's) makes the cache's head asked again at the next read
/// ([`crate::cache::ReadCache::suspect`]), unless the cache's head ask is under way (it is that
/// ask's own answer): the head never trails the best upstream known.
fn learn_head(config: &Config, env: &Env, key: &str, reply: &Result<UpstreamReply, UpstreamError>) {
    let Some(block) = reply
        .as_ref()
        .ok()
        .filter(|r| (200..300).contains(&r.status))
        .and_then(|r| heads::head_of(&r.body))
    else {
        return;
    };
    let set = config.upstreams(UpstreamSet::Rpc);
    let lag = with(config, |s| {
        s.heads
            .learn(key, set, block, config.max_head_lag, now_ms())
    });
    let behind =
        chain_head(config).is_some_and(|head| block > head.saturating_add(config.max_head_lag));
    if behind {
        // Not while the cache's own head ask runs: its answer is this one's best, and a
        // suspicion raised during it would make it adopt nothing (an ask begun before the
        // suspicion), again at every ask.
        let cache = crate::edge::runtime::read_cache(config);
        if let Ok(mut view) = cache.try_borrow_mut() {
            let chain = config.chain_key();
            if !view.refreshing(chain) {
                view.suspect(chain, now_ms());
            }
        };
    }
    if let Some(lag) = lag {
        emit(
            env,
            chain_of(config),
            &Metric::new("upstream_lagging", "", "behind")
                .value("count", 1.0)
                .value("lag", lag as f64)
                .field("head", block)
                .field("upstream", config.upstream_label(key)),
            None,
        );
    }
}

/// The head of `config`'s chain as the isolate's read cache knows it (asked, or announced on a
/// WebSocket), block number: a block the chain has, whichever upstream said so. Routing takes
/// it as the best head known ([`Heads::usable`]), so a node stuck below it gets no read of it.
fn chain_head(config: &Config) -> Option<u64> {
    if !config.cache {
        return None;
    }
    crate::edge::runtime::read_cache(config)
        .borrow()
        .head_number(config.chain_key())
}

/// An upstream that answered `null` to a read (`body`) of block `n` whose `null` means no such
/// block ([`heads::null_means_behind`]), a block the chain is known to have near its head
/// (another upstream's head, or the cache's): it lacks the block, and its head is taken as below
/// it ([`Heads::lacks`]), so the next read of it goes elsewhere. Only
/// with several upstreams: one (a load balancer's URL over nodes a block apart) has nowhere else
/// to send it, and its head so lowered would only make its answers look behind.
fn learn_lack(
    config: &Config,
    key: &str,
    body: &str,
    n: u64,
    reply: &Result<UpstreamReply, UpstreamError>,
) {
    let set = config.upstreams(UpstreamSet::Rpc);
    if set.len() < 2 {
        return;
    }
    let null = reply
        .as_ref()
        .is_ok_and(|r| (200..300).contains(&r.status) && heads::answered_null(&r.body));
    if !null {
        return;
    }
    // The method asked is read only for a null (the rare answer), not for every reply.
    #[derive(serde::Deserialize)]
    struct Asked<'a> {
        #[serde(borrow)]
        method: std::borrow::Cow<'a, str>,
    }
    let method = serde_json::from_str::<Asked>(body).map(|a| a.method);
    if !method.is_ok_and(|m| heads::null_means_behind(&m)) {
        return;
    }
    let known = chain_head(config);
    let lag = config.max_head_lag;
    with(config, |s| s.heads.lacks(key, set, n, lag, known, now_ms()));
}

/// Which upstream of its chain's set `key` is, and its head as this isolate knows it now
/// ([`Answerer`]); for a send that went to the private routes (`set` is theirs), which route.
fn answerer(config: &Config, set: &[String], key: &str) -> Option<Answerer> {
    if config.private_route() && set == config.upstreams(UpstreamSet::Send) {
        let index = set.iter().position(|k| k == key)?;
        return Some(Answerer {
            index,
            head: None,
            route: true,
        });
    }
    let index = config
        .upstreams(UpstreamSet::Rpc)
        .iter()
        .position(|k| k == key)?;
    let head = with(config, |s| s.heads.head(key, now_ms()));
    Some(Answerer {
        index,
        head,
        route: false,
    })
}

/// `outcome` of an `eth_blockNumber` made to say at least the highest head known of the
/// upstreams of `set`, its chain's ([`Heads::at_least`]): through an isolate it never goes
/// backwards.
fn at_least_best(
    config: &Config,
    outcome: Result<UpstreamReply, UpstreamError>,
    set: &[String],
) -> Result<UpstreamReply, UpstreamError> {
    match outcome {
        Ok(mut reply) if (200..300).contains(&reply.status) => {
            let known = chain_head(config);
            if let Some(body) = with(config, |s| {
                s.heads.at_least(&reply.body, set, known, now_ms())
            }) {
                reply.body = body;
            }
            Ok(reply)
        }
        other => other,
    }
}

/// The lowest batch limit of the upstreams of `set`, `config`'s chain's, now
/// ([`BatchLimits::limit`]).
pub fn batch_limit(config: &Config, set: &[String]) -> usize {
    let now = now_ms();
    with(config, |s| {
        set.iter()
            .map(|key| s.batch_limits.limit(key, now))
            .min()
            .unwrap_or(usize::MAX)
    })
}

/// The range cap, blocks per `eth_getLogs`, of the pieces asked of `config`'s chain's read
/// upstreams (`UPSTREAM_RPC_URL`): the smallest each learned or was set
/// (`GETLOGS_UPSTREAM_RANGE`, [`LogLimits::range_cap`]); `None` while none is known.
pub fn log_range_cap(config: &Config) -> Option<u64> {
    let set = config.upstreams(UpstreamSet::Rpc);
    let configured = &config.logs.upstream_range;
    with(config, |s| {
        s.log_limits.range_cap(
            set.iter()
                .enumerate()
                .map(|(i, key)| (key.as_str(), configured.of(i))),
        )
    })
}

/// Learns upstream `key`'s `eth_getLogs` range cap from its `reply` to `body` (one
/// `eth_getLogs`, the relay's text) when it refused the range ([`limits::taught`]: its words, and
/// the range it refused when `body` names it by numbers); logs a `getlogs_cap` line (blocks, the
/// upstream's label) when that lowered it. An answer without an error is not read.
fn learn_log_range(
    config: &Config,
    env: &Env,
    key: &str,
    body: &str,
    reply: &Result<UpstreamReply, UpstreamError>,
) {
    let Ok(reply) = reply else {
        return;
    };
    if (200..300).contains(&reply.status) && !reply.body.contains("\"error\"") {
        return;
    }
    let Some(said) = crate::upstream::logs::refusal::read(reply.status, &reply.body) else {
        return;
    };
    let asked = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|call| crate::upstream::logs::range_of(&call["params"]))
        .and_then(|(from, to)| Some((from.number()?, to.number()?)));
    let Some(cap) = limits::taught(said, asked) else {
        return;
    };
    if !with(config, |s| s.log_limits.learn_range(key, cap)) {
        return;
    }
    emit(
        env,
        chain_of(config),
        &Metric::new("getlogs_cap", "", "range")
            .value("blocks", cap as f64)
            .field("upstream", config.upstream_label(key)),
        None,
    );
}

/// Learns upstream `key`'s batch limit from its `reply` to a batch of `members`; logs an
/// `upstream_batch_limit` line when it lowered it.
fn learn_batch(
    config: &Config,
    env: &Env,
    key: &str,
    members: usize,
    reply: &Result<UpstreamReply, UpstreamError>,
) {
    // The common answer, every member answered without an error, is known without parsing it.
    let clean = reply.as_ref().is_ok_and(|r| {
        (200..300).contains(&r.status) && r.body.starts_with('[') && !r.body.contains("\"error\"")
    });
    let answer = if clean {
        BatchAnswer::Parts {
            answered: members,
            not_attempted: 0,
        }
    } else {
        batch::judge(members, reply)
    };
    let Some(cap) = with(config, |s| {
        s.batch_limits.learn(key, members, answer, now_ms())
    }) else {
        return;
    };
    let label = match answer {
        BatchAnswer::Refused { .. } => "refused",
        _ => "members_not_served",
    };
    emit(
        env,
        chain_of(config),
        &Metric::new("upstream_batch_limit", "", label)
            .value("count", 1.0)
            .value("members", members as f64)
            .value("limit", cap as f64)
            .field("upstream", config.upstream_label(key)),
        None,
    );
}

/// Runs the race of one `call` over `set`: performs its posts and its timer, applies what it
/// asks of the rotation (and, for a batch, of the batch limits), and returns its outcome. With
/// several upstreams, posts still in flight when the outcome came go on in the background (a
/// broadcast's copies, a hedge's loser) and judge their upstreams' health when they end: a node
/// that hangs on sends is cooled by the copies it swallows ([`background_done`] waits for them).
pub async fn run(
    config: &Config,
    env: &Env,
    set: &[String],
    call: Call<'_>,
    timeout_ms: u64,
) -> Result<UpstreamReply, UpstreamError> {
    let usable: Vec<String>;
    let chain_set = set;
    let set = match call.need {
        BlockNeed::Tip | BlockNeed::Number(_) if set.len() > 1 => {
            let known = chain_head(config);
            usable = with(config, |s| {
                let now = now_ms();
                let lag = config.max_head_lag;
                let elsewhere = call.avoid.and_then(|i| set.get(i)).map(|not| {
                    let mut having = s.heads.having(set, call.need, lag, known, now);
                    having.retain(|key| key != not);
                    having
                });
                match elsewhere {
                    Some(having) if !having.is_empty() => having,
                    _ => s.heads.usable(set, call.need, lag, known, now),
                }
            });
            &usable[..]
        }
        _ => set,
    };
    let outcome = race_over(config, env, set, &call, timeout_ms).await;
    if call.need == BlockNeed::Head {
        return at_least_best(config, outcome, chain_set);
    }
    outcome
}

/// [`run`] over the upstreams `set` the call may go to.
async fn race_over(
    config: &Config,
    env: &Env,
    set: &[String],
    call: &Call<'_>,
    timeout_ms: u64,
) -> Result<UpstreamReply, UpstreamError> {
    let new_race = || {
        with(config, |s| {
            let now = now_ms();
            let mut race = Race::new(
                call.kind,
                call.usage,
                &s.rotation,
                set,
                call.body,
                timeout_ms,
                now,
            );
            // Every upstream's head asked while one is not known yet (a fresh isolate): the
            // merge waits for all (up to HEAD_CHECK_WAIT_MS), so a lone first answer from a node
            // stuck behind does not stand for the chain's head.
            if call.need == BlockNeed::Head && set.iter().any(|k| s.heads.head(k, now).is_none()) {
                race.wait_for_all(HEAD_CHECK_WAIT_MS);
            }
            race
        })
    };
    // One upstream is not asked its chain id first (the upstream is the chain), but a served
    // chain's is: its id is the one its path named (README, "Several chains"), and the URL
    // beside it may be another chain's.
    if set.len() < 2 && config.named_chain.is_none() {
        let body = call.body;
        let post = |index: usize| -> Attempting<'_> {
            let url = &set[index];
            async move { (index, post_url(config, url, body, timeout_ms).await) }.boxed_local()
        };
        return drive(config, env, set, call, new_race(), post).await.0;
    }
    if call.kind == CallKind::Send && config.private_route() {
        // A private route is not asked its chain id (a route may serve no reads, or rate-limit
        // them from Cloudflare's shared addresses): every transaction carries its own, checked
        // by the relay (EIP-155).
        with(config, |s| {
            set.iter().for_each(|key| s.rotation.checked(key))
        });
    } else {
        ensure_chains(config, env, set, call.need == BlockNeed::Head).await;
    }
    let (shared, text): (Rc<Config>, Rc<str>) = (Rc::new(config.clone()), Rc::from(call.body));
    let post = |index: usize| -> Attempting<'static> {
        let (config, url, body) = (shared.clone(), set[index].clone(), text.clone());
        async move { (index, post_url(&config, &url, &body, timeout_ms).await) }.boxed_local()
    };
    let (outcome, race, running) = drive(config, env, set, call, new_race(), post).await;
    if !running.is_empty() {
        let (env, set, need) = (env.clone(), set.to_vec(), call.need);
        with(config, |s| s.late += 1);
        worker::wasm_bindgen_futures::spawn_local(async move {
            late_replies(&shared, &env, &set, need, race, running).await;
            with(&shared, |s| s.late -= 1);
        });
    }
    outcome
}

/// The race's loop: its actions, its posts (made by `post`), its timer, until its outcome;
/// returns the outcome, the race and the posts still in flight.
async fn drive<'a>(
    config: &Config,
    env: &Env,
    set: &[String],
    call: &Call<'_>,
    mut race: Race,
    post: impl Fn(usize) -> Attempting<'a>,
) -> (
    Result<UpstreamReply, UpstreamError>,
    Race,
    FuturesUnordered<Attempting<'a>>,
) {
    let mut running: FuturesUnordered<Attempting<'a>> = FuturesUnordered::new();
    loop {
        apply_actions(config, env, set, &mut race, |index| {
            running.push(post(index))
        });
        if let Some(outcome) = race.poll_outcome() {
            return (outcome, race, running);
        }
        let reply =
            |next: Option<(usize, _)>| next.map_or(Event::Idle, |(i, r)| Event::Reply(i, r));
        let event = match race.poll_timeout() {
            Some(at) => {
                let ms = at.saturating_sub(now_ms());
                match select(running.next(), Delay::from(Duration::from_millis(ms))).await {
                    Either::Left((next, _)) => reply(next),
                    Either::Right(_) => Event::Timer(at),
                }
            }
            None => reply(running.next().await),
        };
        match event {
            Event::Reply(index, mut reply) => {
                if let Ok(reply) = reply.as_mut() {
                    reply.answerer = answerer(config, set, &set[index]);
                }
                if let BlockNeed::Number(n) = call.need {
                    learn_lack(config, &set[index], call.body, n, &reply);
                }
                if let Some(members) = call.members {
                    learn_batch(config, env, &set[index], members, &reply);
                } else if call.body.contains(r#""method":"eth_getLogs""#) {
                    learn_log_range(config, env, &set[index], call.body, &reply);
                }
                if call.need == BlockNeed::Head {
                    learn_head(config, env, &set[index], &reply);
                }
                race.handle_reply(index, reply, now_ms())
            }
            // The clock may read a little short of the time the timer was set for.
            Event::Timer(at) => race.handle_timeout(now_ms().max(at)),
            // Nothing in flight and no outcome: the machine settles before this.
            Event::Idle => {
                let timeout = Err(UpstreamError::Timeout(race.timeout_ms()));
                return (timeout, race, running);
            }
        }
    }
}

/// Applies the race's actions: a post (through `post`), a health record, a probe, a
/// disagreement.
fn apply_actions(
    config: &Config,
    env: &Env,
    set: &[String],
    race: &mut Race,
    mut post: impl FnMut(usize),
) {
    while let Some(action) = race.poll_action() {
        match action {
            RaceAction::Post(index) => post(index),
            RaceAction::Record { upstream, attempt } => {
                record(config, env, &set[upstream], attempt);
            }
            RaceAction::Probe(upstream) => probe(config, env, &set[upstream]),
            RaceAction::Disagreement {
                kind,
                first,
                second,
            } => disagreement(config, env, kind, &set[first], &set[second]),
        }
    }
}

/// The posts of a race still in flight after its outcome, each judged when it ends.
async fn late_replies(
    config: &Config,
    env: &Env,
    set: &[String],
    need: BlockNeed,
    mut race: Race,
    mut running: FuturesUnordered<Attempting<'static>>,
) {
    while let Some((index, reply)) = running.next().await {
        if need == BlockNeed::Head {
            learn_head(config, env, &set[index], &reply);
        }
        race.handle_reply(index, reply, now_ms());
        apply_actions(config, env, set, &mut race, |_| {});
    }
}

/// Logs that upstreams disagreed on a transaction ([`Disagreement`]).
fn disagreement(config: &Config, env: &Env, kind: Disagreement, first: &str, second: &str) {
    let (label, first_field, second_field) = kind.label();
    emit(
        env,
        chain_of(config),
        &Metric::new("upstream_disagreement", "", label)
            .value("count", 1.0)
            .field(first_field, config.upstream_label(first))
            .field(second_field, config.upstream_label(second)),
        None,
    );
}
