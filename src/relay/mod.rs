//! The relay's semantics, independent of the platform: what each JSON-RPC request gets.
//!
//! - `eth_sendRawTransaction`: the raw transaction is decoded and checked
//!   ([`crate::transaction`]), its chain id compared with the configured (or learned) one, then it
//!   is handed to its sender's Durable Object ([`Backend::send_in_order`]), which sends it in nonce
//!   order, with retries and idempotency by hash. A call the runtime marks retryable is made again
//!   on a new stub within `LOCK_MAX_HOLD_MS`; an overloaded object gets -32005 with `Retry-After`
//!   (failing open there would break the order exactly under load); when the object can't be
//!   reached otherwise, the transaction is sent directly (fail-open, one `fail_open` metric each),
//!   with the same retries and answer rules ([`crate::upstream::submit`]). Nothing invalid reaches
//!   the upstream.
//! - `eth_getTransactionCount(address, "pending")`: answered by the sender's object: the
//!   upstream's count raised past the transactions the object accepted that the upstream still
//!   holds ([`pending`]); the upstream's own answer when the object can't be reached.
//! - Methods refused by the method policy ([`crate::access::methods`]) get -32601 and go nowhere.
//! - Every other method goes to the upstream unchanged and its answer comes back unchanged (no
//!   retries: it may not be idempotent); a read the read cache knows is answered from it while
//!   what it keeps holds ([`cached`], [`crate::cache`]).
//! - Batches keep request order in the answer. A sender's transactions in a batch go to its object
//!   in one call, which sorts them by nonce; senders and other requests run concurrently.
//!
//! The platform's part (HTTP to the upstream, the Durable Object stub, logging) is the
//! [`Backend`] trait, implemented by the Worker adapter.

pub mod cached;
pub mod cancel;
pub mod logs;
pub mod pending;
pub mod receipt;
pub mod send;
pub mod socket;
pub mod status;
pub mod wire;

use crate::access::keys::{self, scope::Scope};
use crate::access::rate_limit;
use crate::address::Address;
use crate::chain_id::{self, ChainIdCache, Claim};
use crate::config::Config;
use crate::jsonrpc::{self, Answer, Body, Incoming, Request, Response, RpcError};
use crate::metrics::Metric;
use crate::ordering::private_terms::{granted, header_value};
use crate::ordering::send_params::{send_params, SyncTimeouts};
use crate::ordering::tx::{SendMethod, SignedTx};
use crate::transaction::{self, TxHash};
use crate::upstream::heads::BlockNeed;
use crate::upstream::Platform;
use crate::upstream::{error_metric, CallKind};
use crate::websocket::is_subscription;
use futures_util::future::join_all;
use socket::SubscriptionCalls;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::convert::Infallible;
use std::rc::Rc;

/// Why a sender's Durable Object gave no answer (Cloudflare's Durable Objects error handling:
/// `.retryable` and `.overloaded` on the runtime's errors).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectError {
    /// Worth the same call on a new stub: the runtime marked the error retryable (the object was
    /// reset, restarted or moved, or its code was updated), or a newer instance superseded it.
    Retryable(String),
    /// The object is overloaded: calling again would make it worse.
    Overloaded(String),
    /// Anything else (the object threw, answered nonsense): the caller fails open.
    Failed(String),
}

impl ObjectError {
    /// A short name for logs and metrics: `retryable`, `overloaded`, `failed`.
    pub fn label(&self) -> &'static str {
        match self {
            ObjectError::Retryable(_) => "retryable",
            ObjectError::Overloaded(_) => "overloaded",
            ObjectError::Failed(_) => "failed",
        }
    }

    /// What went wrong.
    pub fn why(&self) -> &str {
        match self {
            ObjectError::Retryable(why)
            | ObjectError::Overloaded(why)
            | ObjectError::Failed(why) => why,
        }
    }
}

/// The platform: the upstream and clock ([`Platform`]) and the senders' Durable Objects.
#[allow(async_fn_in_trait)] // single-threaded wasm: no Send bound wanted
pub trait Backend: Platform {
    /// Hands `sender`'s transactions of one HTTP request, checked against `chain_id`, to its
    /// Durable Object, which sends them in nonce order; returns their answers in the same order;
    /// see [`wire`] for the call.
    ///
    /// # Errors
    /// [`ObjectError`]: how the call failed, which decides what the caller does next.
    async fn send_in_order(
        &self,
        sender: &Address,
        chain_id: Option<u64>,
        txs: &[&SignedTx],
    ) -> Result<Vec<wire::WireAnswer>, ObjectError>;

    /// Counts a body's requests against the client's rate limits: `sends` against the
    /// transaction limit, `reads` against the other. True when the client is over either (the
    /// body is then refused). Without limits configured, always false.
    async fn over_rate_limit(&self, sends: usize, reads: usize) -> bool;

    /// Spends a body's `sends + reads` units of its API key's budget
    /// ([`crate::access::keys::budget`]): the refusal when it cannot (over budget, the key
    /// revoked since its lease). Without a key, `None`.
    async fn over_key_budget(&self, _sends: usize, _reads: usize) -> Option<keys::Refusal> {
        None
    }

    /// `sender`'s cancel of private transaction `hash` as its object answers it (see [`wire`]):
    /// the route's answer.
    ///
    /// # Errors
    /// [`ObjectError`], when the object gave no answer.
    async fn cancel_private(
        &self,
        sender: &Address,
        hash: &TxHash,
    ) -> Result<wire::WireAnswer, ObjectError>;

    /// `sender`'s pending count as its object answers it (see [`wire`]).
    ///
    /// # Errors
    /// [`ObjectError`], when the object gave no answer.
    async fn pending_count(&self, sender: &Address) -> Result<wire::WireAnswer, ObjectError>;

    /// What `sender`'s object knows of transaction `hash` (JSON text), `None` when nothing (see
    /// [`status`]).
    ///
    /// # Errors
    /// [`ObjectError`], when the object gave no answer.
    async fn tx_status(
        &self,
        sender: &Address,
        hash: &TxHash,
    ) -> Result<Option<String>, ObjectError>;

    /// The range cap, blocks per `eth_getLogs`, of the pieces asked of the read upstreams: the
    /// smallest each learned from its refusals or was set (`GETLOGS_UPSTREAM_RANGE`,
    /// [`crate::upstream::logs::limits::LogLimits::range_cap`]); `None` (the default): none is
    /// known, a range is split only after a refusal.
    fn log_range_cap(&self) -> Option<u64> {
        None
    }

    /// The isolate's read cache ([`crate::cache`]), when this platform keeps one; `None`: every
    /// read goes to the upstream. By default `None`.
    fn read_cache(&self) -> Option<Rc<RefCell<crate::cache::ReadCache>>> {
        None
    }

    /// The answer a shared cache (Cloudflare's Cache API, the data centre's) keeps as `key`
    /// ([`cached::shared_key`]): the `result` JSON text of a read whose answer holds for good.
    /// By default, and where there is none, `None`.
    async fn shared_get(&self, key: &str) -> Option<String> {
        let _ = key;
        None
    }

    /// A signal for a read waiting on another request's work (a read in flight, the cache's head
    /// ask): what wakes it, for that work to call once, and what it waits on. The platform's
    /// own, so that the waiter resumes in its own request's I/O context (workerd runs a promise's
    /// continuation in the request that registered it). `None` (the default): the waiter looks
    /// on its own timer.
    fn signal(&self) -> Option<(crate::cache::flight::Wake, cached::Waiting)> {
        None
    }

    /// Keeps `result` as `key`'s in the shared cache ([`Backend::shared_get`]); only answers
    /// that hold for good are given. By default nothing.
    async fn shared_put(&self, key: &str, result: &str) {
        let _ = (key, result);
    }
}

/// The HTTP answer to a request body.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The HTTP status: 200, 204 when every request was a notification, 429 over a rate limit.
    pub status: u16,
    /// The JSON-RPC body, rendered by the edge ([`Body::render`]); `None` when every request
    /// was a notification (HTTP 204).
    pub body: Option<Body>,
    /// The `Retry-After` header, s: over a rate limit (HTTP 429), or when a transaction was
    /// refused for a full queue or an overloaded object (the longest of them).
    pub retry_after_s: Option<u64>,
    /// Behind a private route, for a body with a send: the
    /// [`crate::ordering::private_terms::PUBLIC_AFTER_HEADER`] value
    /// (`never`, or the blocks after which the relay may publish its transactions).
    pub public_after: Option<String>,
    /// The `X-Cache` header ([`cached::CacheSeen::header`]): `HIT` when every read the cache
    /// could answer was answered from it, `MISS` when one was not, `None` without such a read.
    pub cache: Option<&'static str>,
}

/// Whether a parsed entry is a send ([`jsonrpc::is_send`]).
fn is_send_entry(entry: &&jsonrpc::ParsedRequest) -> bool {
    entry.as_ref().is_ok_and(|r| jsonrpc::is_send(&r.method))
}

/// The relay for one Worker invocation.
pub struct Relay<'a, B: Backend> {
    config: &'a Config,
    backend: &'a B,
    /// The chain id learned from the upstream, kept for the Worker isolate's lifetime.
    chain_ids: &'a Rc<ChainIdCache>,
    /// The client's opt-in to the public mempool for this request's private sends, blocks
    /// (`?public_after_blocks=N`); `None`: never.
    opt_in: Option<u64>,
    /// `Cache-Control: no-cache`: nothing kept is used for this body's reads.
    bypass_cache: bool,
    /// What the cache did for this body's reads.
    cache_seen: Cell<cached::CacheSeen>,
    /// The request's API key's scope: each member is checked against it
    /// ([`crate::access::keys::scope`]); `None` without a key.
    key_scope: Option<&'a Scope>,
    /// Without a key under `KEYLESS=reads`: each send is refused (-32016).
    sends_need_key: bool,
    /// Held by a split `eth_getLogs` while its pieces are asked: the pieces of one request, its
    /// batch's members together, are at most [`crate::upstream::logs::MAX_IN_FLIGHT`] at once.
    log_pieces: futures_util::lock::Mutex<()>,
}

enum Plan {
    Done(Response),
    Proxy(Request),
    /// `eth_subscribe` / `eth_unsubscribe` on a WebSocket: the connection's own.
    Subscription(Request),
    Send(Address, Member),
    PendingCount(Request, Address),
    /// `eth_cancelPrivateTransaction` ([`cancel`]).
    Cancel(Request),
}

/// One transaction of a request for its sender: where it is in the request, the id its answer
/// carries, and the transaction.
pub(crate) struct Member {
    /// Its index in the request (a batch's position).
    index: usize,
    /// The id to answer with.
    id: jsonrpc::Id,
    /// The transaction.
    tx: SignedTx,
}

/// A body's plans by what answers them, each with its index in the body.
struct Planned {
    /// Each entry's response by index: known already for a [`Plan::Done`], else `None` until its
    /// task answers.
    answers: Vec<Option<Response>>,
    /// Reads for the upstream (or the read cache).
    proxied: Vec<(usize, Request)>,
    /// `eth_cancelPrivateTransaction`s, for the private route.
    cancels: Vec<(usize, Request)>,
    /// Subscription calls, for the WebSocket.
    subscribed: Vec<(usize, Request)>,
    /// Pending counts, for their address's object.
    counts: Vec<(usize, Request, Address)>,
    /// Each sender's transactions, in request order.
    by_sender: HashMap<Address, Vec<Member>>,
    /// The senders, in the order of their first transaction.
    sender_order: Vec<Address>,
}

impl Planned {
    /// Sorts a body's `plans` (in request order) by what answers them; a sender's transactions
    /// take their index in the body.
    fn of(plans: Vec<Plan>) -> Self {
        let mut answers: Vec<Option<Response>> = vec![None; plans.len()];
        let mut proxied = Vec::new();
        let mut cancels = Vec::new();
        let mut subscribed = Vec::new();
        let mut counts = Vec::new();
        let mut by_sender: HashMap<Address, Vec<Member>> = HashMap::new();
        let mut sender_order = Vec::new();
        for (i, plan) in plans.into_iter().enumerate() {
            match plan {
                Plan::Done(response) => answers[i] = Some(response),
                Plan::Proxy(req) => proxied.push((i, req)),
                Plan::Cancel(req) => cancels.push((i, req)),
                Plan::Subscription(req) => subscribed.push((i, req)),
                Plan::PendingCount(req, address) => counts.push((i, req, address)),
                Plan::Send(sender, member) => {
                    let list = by_sender.entry(sender).or_default();
                    if list.is_empty() {
                        sender_order.push(sender);
                    }
                    list.push(Member { index: i, ..member });
                }
            }
        }
        Planned {
            answers,
            proxied,
            cancels,
            subscribed,
            counts,
            by_sender,
            sender_order,
        }
    }
}

impl<'a, B: Backend> Relay<'a, B> {
    /// A relay over `backend`; `chain_ids` holds the upstream's `eth_chainId` for the isolate
    /// when `CHAIN_ID` is unset, looked up once (see [`crate::chain_id`]).
    pub fn new(config: &'a Config, backend: &'a B, chain_ids: &'a Rc<ChainIdCache>) -> Self {
        Relay {
            config,
            backend,
            chain_ids,
            opt_in: None,
            bypass_cache: false,
            cache_seen: Cell::new(cached::CacheSeen::default()),
            key_scope: None,
            sends_need_key: false,
            log_pieces: futures_util::lock::Mutex::new(()),
        }
    }

    /// The relay for a request with an API key whose scope is `scope`: a member out of it gets
    /// its own error (-32002), the rest of the body goes on.
    pub fn with_key_scope(mut self, scope: &'a Scope) -> Self {
        self.key_scope = Some(scope);
        self
    }

    /// The relay for a request without a key where sends need one (`KEYLESS=reads`): each send
    /// gets -32016, the reads go on.
    pub fn with_sends_needing_a_key(mut self) -> Self {
        self.sends_need_key = true;
        self
    }

    /// The relay with the read cache passed by for this request's reads (`Cache-Control:
    /// no-cache`): they are asked of the upstream (and what they answer is kept).
    pub fn with_cache_bypass(mut self, bypass: bool) -> Self {
        self.bypass_cache = bypass;
        self
    }

    /// The relay with the client's opt-in to the public mempool for this request's sends behind
    /// a private route (`?public_after_blocks=N`,
    /// [`crate::ordering::private_terms::opt_in_of_query`]), at most `SEND_PUBLIC_AFTER_BLOCKS`.
    pub fn with_opt_in(mut self, blocks: Option<u64>) -> Self {
        self.opt_in = blocks;
        self
    }

    /// The opt-in this request's private sends get ([`granted`]); `None` (never published)
    /// without a private route.
    fn granted_opt_in(&self) -> Option<u64> {
        granted(self.opt_in, self.config.send_public_after_blocks)
            .filter(|_| self.config.private_route())
    }

    /// Answers an HTTP request body (already bounded by `MAX_REQUEST_BYTES`). Each request in it
    /// counts against the client's rate limits first; over a limit, the whole body is refused
    /// with HTTP 429 and -32005 for each request, and nothing reaches the upstream.
    pub async fn handle(&self, body: &[u8]) -> Reply {
        self.answer_body(body, None::<&Infallible>).await
    }

    /// [`Relay::handle`], with the subscription methods answered by `subscriptions` when given
    /// (a WebSocket, [`socket`]), proxied otherwise.
    async fn answer_body<S: SubscriptionCalls>(
        &self,
        body: &[u8],
        subscriptions: Option<&S>,
    ) -> Reply {
        let parsed = jsonrpc::parse(body, self.config.max_batch);
        let (entries, batch): (Vec<&jsonrpc::ParsedRequest>, bool) = match &parsed {
            Err(_) => (Vec::new(), false),
            Ok(Incoming::Single(entry)) => (vec![entry], false),
            Ok(Incoming::Batch(entries)) => (entries.iter().collect(), true),
        };
        let (sends, reads) = rate_limit::count(&entries);
        let public_after = self.public_after(&entries, sends);
        // A body that is not JSON-RPC at all counts as one read.
        let reads = if entries.is_empty() { 1 } else { reads };
        if self.backend.over_rate_limit(sends, reads).await {
            return self.rate_limited(&parsed, &entries, batch);
        }
        if let Some(refusal) = self.backend.over_key_budget(sends, reads).await {
            let error = refusal.error();
            return Reply {
                status: refusal.status(),
                body: Some(rate_limit::refusal_with(&entries, batch, &error)),
                retry_after_s: refusal.retry_after_s(),
                public_after: None,
                cache: None,
            };
        }
        let (body, retry_after_s) = match parsed {
            Err(error) => (Some(Body::One(error.to_response())), None),
            Ok(Incoming::Single(entry)) => self.answer_single(entry, subscriptions).await,
            Ok(Incoming::Batch(entries)) => self.answer_batch(entries, subscriptions).await,
        };
        Reply {
            status: if body.is_some() { 200 } else { 204 },
            body,
            retry_after_s,
            public_after,
            cache: self.cache_seen.get().header(),
        }
    }

    /// The [`crate::ordering::private_terms::PUBLIC_AFTER_HEADER`] value for a body's `entries`
    /// with `sends` sends ([`header_value`]): behind a private route, the opt-in granted
    /// ([`Relay::granted_opt_in`]) when one of its sends is not bounded by a `maxBlockNumber`,
    /// else `never`; `None` without a send or without a private route.
    fn public_after(&self, entries: &[&jsonrpc::ParsedRequest], sends: usize) -> Option<String> {
        // Whether its transactions may go public, said on every answer to a private send (never,
        // when each is bounded by a `maxBlockNumber`).
        let bounded = |e: &&jsonrpc::ParsedRequest| {
            e.as_ref().is_ok_and(|r| {
                r.method == jsonrpc::SEND_PRIVATE_TRANSACTION
                    && !r.params[0]["maxBlockNumber"].is_null()
            })
        };
        let granted = self.granted_opt_in().filter(|_| {
            entries
                .iter()
                .filter(|e| is_send_entry(e))
                .any(|e| !bounded(e))
        });
        (sends > 0 && self.config.private_route()).then(|| header_value(granted))
    }

    /// The reply to a body over the client's rate limits: HTTP 429 with -32005 for each of its
    /// `entries` (`batch`: as a batch), or for the body itself (null id) when `parsed` is not
    /// JSON-RPC; `Retry-After` the limits' period, s.
    fn rate_limited(
        &self,
        parsed: &Result<Incoming, jsonrpc::RequestError>,
        entries: &[&jsonrpc::ParsedRequest],
        batch: bool,
    ) -> Reply {
        let body = match parsed {
            Err(_) => Body::One(Response::error(
                &jsonrpc::Id::null(),
                &rate_limit::exceeded(),
            )),
            Ok(_) => rate_limit::refusal(entries, batch),
        };
        Reply {
            status: 429,
            body: Some(body),
            retry_after_s: Some(self.config.rate_limit_period_s),
            public_after: None,
            cache: None,
        }
    }

    /// A single request's body ([`Relay::answer_all`]): its response, `None` for a notification;
    /// and its `Retry-After`, s.
    async fn answer_single<S: SubscriptionCalls>(
        &self,
        entry: jsonrpc::ParsedRequest,
        subscriptions: Option<&S>,
    ) -> (Option<Body>, Option<u64>) {
        let notification = entry.as_ref().is_ok_and(|r| r.id.is_none());
        let (answers, retry_after_s) = self.answer_all(vec![entry], subscriptions).await;
        let body = answers
            .into_iter()
            .next()
            .filter(|_| !notification)
            .map(Body::One);
        (body, retry_after_s)
    }

    /// A batch's body ([`Relay::answer_all`]): its members' responses in order, its
    /// notifications' left out, `None` when every member was one; and the longest `Retry-After`
    /// among them, s.
    async fn answer_batch<S: SubscriptionCalls>(
        &self,
        entries: Vec<jsonrpc::ParsedRequest>,
        subscriptions: Option<&S>,
    ) -> (Option<Body>, Option<u64>) {
        let wanted: Vec<bool> = entries
            .iter()
            .map(|e| e.as_ref().map_or(true, |r| r.id.is_some()))
            .collect();
        let (answers, retry_after_s) = self.answer_all(entries, subscriptions).await;
        let kept: Vec<Response> = answers
            .into_iter()
            .zip(wanted)
            .filter_map(|(a, w)| w.then_some(a))
            .collect();
        (
            (!kept.is_empty()).then_some(Body::Batch(kept)),
            retry_after_s,
        )
    }

    /// Each entry's response in order, and the longest `Retry-After` among them, s.
    async fn answer_all<S: SubscriptionCalls>(
        &self,
        entries: Vec<jsonrpc::ParsedRequest>,
        subscriptions: Option<&S>,
    ) -> (Vec<Response>, Option<u64>) {
        let chain_id = self.sends_chain_id(&entries).await;
        let plans: Vec<Plan> = entries
            .into_iter()
            .map(|entry| self.plan(entry, &chain_id, subscriptions.is_some()))
            .collect();
        // One task per proxied request and per sender (its transactions in one call).
        self.answer_planned(Planned::of(plans), subscriptions).await
    }

    /// The chain id the sends among `entries` are checked against ([`Relay::chain_id`]), looked
    /// up only when there is one; without a send, an internal error (-32603) no entry is given.
    async fn sends_chain_id(&self, entries: &[jsonrpc::ParsedRequest]) -> Result<u64, RpcError> {
        let needs_chain_id = entries.iter().any(|e| is_send_entry(&e));
        if needs_chain_id {
            self.chain_id().await
        } else {
            Err(RpcError::new(
                jsonrpc::INTERNAL_ERROR,
                "chain id not looked up",
            ))
        }
    }

    /// What answers `entry` ([`Plan`]): a parse error, a method the policy refuses (-32601), or
    /// a member its key refuses ([`Relay::key_refusal`]), at once; a subscription call on a WebSocket (`on_socket`), the connection; a cancel, its
    /// route ([`cancel`]); a pending count with ordering on, its sender's object; another read,
    /// the upstream; a send checked against `chain_id` ([`Relay::check`]), its sender's object,
    /// and one that fails the check, its refusal.
    fn plan(
        &self,
        entry: jsonrpc::ParsedRequest,
        chain_id: &Result<u64, RpcError>,
        on_socket: bool,
    ) -> Plan {
        match entry {
            Err(error) => Plan::Done(error.to_response()),
            Ok(req) if !self.config.methods.allows(&req.method) => Plan::Done(Response::error(
                &req.response_id(),
                &RpcError::new(
                    jsonrpc::METHOD_NOT_FOUND,
                    format!("method not allowed: {}", req.method),
                ),
            )),
            Ok(req) => match self.key_refusal(&req) {
                Some(error) => Plan::Done(Response::error(&req.response_id(), &error)),
                None => self.plan_checked(req, chain_id, on_socket),
            },
        }
    }

    /// What answers `req`, a request the method policy and its key let through ([`Relay::plan`]).
    fn plan_checked(
        &self,
        req: Request,
        chain_id: &Result<u64, RpcError>,
        on_socket: bool,
    ) -> Plan {
        if on_socket && is_subscription(&req.method) {
            return Plan::Subscription(req);
        }
        if req.method == jsonrpc::CANCEL_PRIVATE_TRANSACTION {
            return Plan::Cancel(req);
        }
        if !jsonrpc::is_send(&req.method) {
            return match pending::pending_count_of(&req)
                .filter(|_| self.config.enable_nonce_ordering)
            {
                Some(address) => Plan::PendingCount(req, address),
                None => Plan::Proxy(req),
            };
        }
        match chain_id
            .clone()
            .and_then(|chain_id| self.check(&req, chain_id))
        {
            Ok((sender, tx)) => Plan::Send(
                sender,
                Member {
                    index: 0,
                    id: req.response_id(),
                    tx,
                },
            ),
            Err(error) => Plan::Done(Response::error(&req.response_id(), &error)),
        }
    }

    /// Runs `planned`'s tasks concurrently: one per proxied read, cancel, pending count and
    /// subscription call, and one per sender (its transactions in one call,
    /// [`Relay::send_group`]). Returns each entry's response in order (empty text where none
    /// came), and the longest `Retry-After` among the sends' answers, s.
    async fn answer_planned<S: SubscriptionCalls>(
        &self,
        planned: Planned,
        subscriptions: Option<&S>,
    ) -> (Vec<Response>, Option<u64>) {
        let Planned {
            mut answers,
            proxied,
            cancels,
            subscribed,
            counts,
            mut by_sender,
            sender_order,
        } = planned;
        let proxy_tasks = proxied
            .into_iter()
            .map(|(i, req)| async move { (i, self.read(&req).await) })
            .map(futures_util::future::Either::Left)
            .chain(cancels.into_iter().map(|(i, req)| {
                futures_util::future::Either::Right(async move { (i, self.cancel(&req).await) })
            }));
        let count_tasks = counts
            .into_iter()
            .map(|(i, req, address)| async move { (i, self.pending_count(&req, &address).await) });
        let send_tasks = sender_order.into_iter().map(|sender| {
            let txs = by_sender.remove(&sender).unwrap_or_default();
            async move { self.send_group(&sender, txs).await }
        });
        let subscription_tasks = subscribed.into_iter().filter_map(|(i, req)| {
            subscriptions.map(|s| async move { (i, Response::Text(s.call(&req).await)) })
        });
        let (sent, proxied, (counted, subscribed)) = futures_util::future::join3(
            join_all(send_tasks),
            join_all(proxy_tasks),
            futures_util::future::join(join_all(count_tasks), join_all(subscription_tasks)),
        )
        .await;
        if !sent.is_empty() {
            self.after_sends();
        }
        let mut retry_after_s: Option<u64> = None;
        for (i, response, retry_after) in sent.into_iter().flatten() {
            answers[i] = Some(response);
            retry_after_s = retry_after_s.max(retry_after);
        }
        for (i, response) in proxied.into_iter().chain(counted).chain(subscribed) {
            answers[i] = Some(response);
        }
        let responses = answers
            .into_iter()
            .map(|a| a.unwrap_or_else(|| Response::Text(String::new())))
            .collect();
        (responses, retry_after_s)
    }

    /// Makes a call to `sender`'s object with `call`, again on a new stub (each call gets one)
    /// while the error is [`ObjectError::Retryable`], with the upstream retries' backoff, within
    /// `LOCK_MAX_HOLD_MS`. Each error is counted and logged by name (`object_error`, label
    /// `retryable`, `overloaded` or `failed`).
    async fn retry_object_call<T, F, Fut>(
        &self,
        sender: &Address,
        call: F,
    ) -> Result<T, ObjectError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, ObjectError>>,
    {
        let deadline_ms = self
            .backend
            .now_ms()
            .saturating_add(self.config.lock_max_hold_ms);
        let policy = self.config.retry_policy();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let error = match call().await {
                Ok(answer) => return Ok(answer),
                Err(error) => error,
            };
            self.backend.emit(
                &Metric::new("object_error", sender.to_string(), error.label())
                    .value("count", 1.0)
                    .field("attempt", attempts)
                    .field("error", self.config.redact(error.why())),
            );
            let ObjectError::Retryable(_) = error else {
                return Err(error);
            };
            let now = self.backend.now_ms();
            let jitter = self.backend.random();
            match policy.next_retry(attempts, jitter, now, deadline_ms, None) {
                Some(delay_ms) => self.backend.sleep(delay_ms).await,
                None => return Err(error),
            }
        }
    }

    /// The chain id transactions must carry: `CHAIN_ID`, or the upstream's `eth_chainId` learned
    /// once; requests that arrive during the lookup wait for it, so it does not reorder a burst
    /// ([`crate::chain_id`]).
    async fn chain_id(&self) -> Result<u64, RpcError> {
        if let Some(id) = self.config.chain_id {
            return Ok(id);
        }
        // The lookup's own upstream call gives up after UPSTREAM_TIMEOUT_MS; waiters a second later.
        let give_up_after_ms = self.config.upstream_timeout_ms.saturating_add(1_000);
        match self.chain_ids.claim(self.backend.now_ms()) {
            Claim::Known(id) => Ok(id),
            Claim::Wait(wait) => loop {
                if let Some(result) = wait.result(self.backend.now_ms(), give_up_after_ms) {
                    return result;
                }
                self.backend.sleep(chain_id::CHECK_EVERY_MS).await;
            },
            Claim::Lookup(lookup) => {
                lookup.finish(chain_id::ask(self.backend, self.config.upstream_timeout_ms).await)
            }
        }
    }

    /// The chain id as far as it is known without asking: `CHAIN_ID`, or the one learned (every
    /// send was checked against it, so a send always finds it known).
    fn known_chain_id(&self) -> Option<u64> {
        self.chain_ids.current(self.config.chain_id)
    }

    /// The error a member gets for its key before it is planned: a send without a key where
    /// sends need one (-32016), a read out of the key's scope (-32002; a send's scope is checked
    /// once it is decoded, [`Relay::check`]).
    fn key_refusal(&self, req: &Request) -> Option<RpcError> {
        if jsonrpc::is_send(&req.method) {
            return self
                .sends_need_key
                .then(|| RpcError::new(keys::UNAUTHORIZED, "a send needs an API key here"));
        }
        let why = self.key_scope?.check_read(&req.method, &req.params).err()?;
        Some(why.error())
    }

    /// Decodes and checks a send request (any of [`jsonrpc::is_send`]) against the chain id policy
    /// and the rules of `HARDFORK` ([`crate::hardfork`]; a transaction that breaks them is
    /// refused -32000 with geth's message and a `tx_refused` metric, never sent).
    fn check(&self, req: &Request, chain_id: u64) -> Result<(Address, SignedTx), RpcError> {
        let timeouts = SyncTimeouts {
            default_ms: self.config.sync_timeout_ms,
            max_ms: self.config.sync_timeout_max_ms,
        };
        let (raw, method) = send_params(req, timeouts)?;
        self.check_route(&method)?;
        let tx = transaction::decode(&raw)
            .map_err(|e| RpcError::new(jsonrpc::INVALID_PARAMS, format!("invalid params: {e}")))?;
        self.check_chain_id(tx.chain_id, chain_id)?;
        if let Some(scope) = self.key_scope {
            scope
                .check_send(&req.method, &tx.sender, tx.to.as_ref())
                .map_err(|why| why.error())?;
        }
        // A refusal the operator counts (`tx_refused`, by `label`).
        let refused = |label: &str, error: RpcError| {
            self.backend.emit(
                &Metric::new("tx_refused", tx.sender.to_string(), label)
                    .value("count", 1.0)
                    .field("nonce", tx.nonce)
                    .field("tx_hash", crate::hex::encode(&tx.hash)),
            );
            Err(error)
        };
        if let Some(Err(broken)) = self.config.hardfork.map(|fork| fork.check(&tx)) {
            return refused(
                broken.label(),
                RpcError::new(jsonrpc::INVALID_INPUT, broken.to_string()),
            );
        }
        let signed = SignedTx {
            hash: tx.hash,
            nonce: tx.nonce,
            chain_id: tx.chain_id,
            // One bounded by a `maxBlockNumber` is never published: the public mempool would
            // keep it past its bound.
            public_after_blocks: self
                .granted_opt_in()
                .filter(|_| method.max_block_number().is_none()),
            self_cancel: tx.is_self_cancel(),
            raw,
            method,
        };
        // Its sender's object stores it before its send: one that cannot be stored is refused
        // here, before anything is held for it.
        if let Some(too_large) = signed
            .unstorable()
            .filter(|_| self.config.enable_nonce_ordering)
        {
            return refused(
                "too_large",
                RpcError::new(jsonrpc::LIMIT_EXCEEDED, too_large.to_string()),
            );
        }
        Ok((tx.sender, signed))
    }

    /// Refuses a send whose `method` this relay's route cannot take, unsent (-32004): a private
    /// send without a private route, a conditional one (ERC-7796) behind one.
    fn check_route(&self, method: &SendMethod) -> Result<(), RpcError> {
        if matches!(method, SendMethod::Private { .. }) && !self.config.private_route() {
            // A read node would publish it: refused, unsent.
            return Err(RpcError::new(
                jsonrpc::METHOD_NOT_SUPPORTED,
                "eth_sendPrivateTransaction needs a private route (UPSTREAM_SEND_URL), and this \
                 relay has none: nothing was sent; send it with eth_sendRawTransaction to publish it",
            ));
        }
        if matches!(method, SendMethod::Conditional { .. }) && self.config.private_route() {
            // No private route serves ERC-7796, and Flashbots Protect passes a method it does
            // not know to a public node: sent as a plain send it would lose its conditions,
            // sent as it is it could leak. Refused, unsent.
            return Err(RpcError::new(
                jsonrpc::METHOD_NOT_SUPPORTED,
                "eth_sendRawTransactionConditional is not served behind a private route \
                 (UPSTREAM_SEND_URL): the route does not take its conditions and might pass it \
                 to a public node; send it with eth_sendRawTransaction",
            ));
        }
        Ok(())
    }

    /// Refuses (-32000) a transaction whose chain id `tx_chain_id` is not `chain_id`, and one
    /// without (not replay-protected, EIP-155) unless `ALLOW_UNPROTECTED_TXS`.
    fn check_chain_id(&self, tx_chain_id: Option<u64>, chain_id: u64) -> Result<(), RpcError> {
        match tx_chain_id {
            None if !self.config.allow_unprotected_txs => Err(RpcError::new(
                jsonrpc::INVALID_INPUT,
                "only replay-protected (EIP-155) transactions allowed over RPC",
            )),
            Some(have) if have != chain_id => Err(RpcError::new(
                jsonrpc::INVALID_INPUT,
                format!("invalid chain id for signer: have {have} want {chain_id}"),
            )),
            _ => Ok(()),
        }
    }

    /// Answers a read: a served chain's `eth_chainId` and `net_version` from its configured id
    /// (its path named it: an upstream URL of another chain must not answer for it); else through
    /// the isolate's read cache when `CACHE` is on and the platform keeps one
    /// ([`Relay::cached_read`]), else from the upstream ([`Relay::proxy`]).
    async fn read(&self, req: &Request) -> Response {
        if let Some(id) = self.config.named_chain {
            let own = match req.method.as_str() {
                "eth_chainId" => Some(format!("\"{}\"", crate::hex::encode_quantity(id))),
                "net_version" => Some(format!("\"{id}\"")),
                _ => None,
            };
            if let Some(result) = own {
                return Response::new(&req.response_id(), Answer::Result(result));
            }
        }
        if req.method == "eth_getLogs" {
            return self.get_logs(req).await;
        }
        self.read_as_asked(req).await
    }

    /// Sends a request to the upstream, made anew from what was parsed ([`Request::to_json`]) and
    /// routed by its method ([`CallKind::of_method`]) and the block it needs ([`BlockNeed::of`]), and returns its answer unchanged, or the
    /// JSON-RPC error when there was no usable one ([`Relay::proxied_response`]).
    async fn proxy(&self, req: &Request) -> Response {
        let kind = CallKind::of_method(&req.method);
        let need = BlockNeed::of(&req.method, &req.params);
        match self
            .backend
            .post_read(&req.to_json(), kind, need, self.config.upstream_timeout_ms)
            .await
        {
            Ok(reply) => self.proxied_response(req, reply.body),
            Err(e) => {
                self.backend.emit(&error_metric(&req.method, &e));
                Response::error(&req.response_id(), &e.to_rpc())
            }
        }
    }

    /// The upstream's answer `body` to `req`, unchanged; an id the upstream was not sent as it
    /// is (a number beyond 64 bits, a fraction: [`jsonrpc::Id::sent_as_is`]) is put back in it.
    fn proxied_response(&self, req: &Request, body: String) -> Response {
        // A result the upstream says it cut short is an error ([`Answer::parse`]).
        if body.contains("\"_streamStatus\"") {
            if let Some(answer) = Answer::parse(&body) {
                return Response::new(&req.response_id(), answer);
            }
        }
        match &req.id {
            Some(id) if !id.sent_as_is() => match Answer::parse(&body) {
                Some(answer) => Response::new(id, answer),
                None => Response::Text(body),
            },
            _ => Response::Text(body),
        }
    }
}
