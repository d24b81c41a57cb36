//! What a sender's object asks the upstream about its sender ([`Query`]), as JSON-RPC batches of
//! at most [`MAX_BATCH_MEMBERS`] members, at most [`BATCHES_AT_ONCE`] of them at once, and how
//! the answers read ([`Found`]).
//!
//! Members, each with a fixed id: `eth_getTransactionCount(sender, "pending")` (id 1),
//! `eth_getTransactionCount(sender, "latest")` (id 2), `eth_getBlockByNumber("0x0", false)` (id 3,
//! for the genesis hash) and `eth_getTransactionByHash` of each hash (ids 100, 101, ...; its
//! `blockNumber` tells a pooled transaction from one in a block), and
//! `eth_getTransactionBySenderAndNonce` of each nonce (ids 10,000, 10,001, ...), and
//! `eth_blockNumber` (id 4). Answers
//! are matched by id, in any order (JSON-RPC 2.0, section 6). A member that failed is left out of
//! [`Found`], and so are the members of a batch that failed while others answered. An upstream
//! that refuses batches (it answers one error object) is asked member by member instead. Beside the batch, at the same time, a private route's status endpoint is asked
//! about each of [`Query::route_statuses`] ([`Platform::get_status`], read by
//! [`RouteStatus::of_body`]); a status that could not be had is left out.

use crate::hex;
use crate::ordering::route_status::{RouteStatus, MAX_STATUS_ASKED, STATUS_TIMEOUT_MS};
use crate::ordering::row::TakenBy;
use crate::ordering::sender::{Found, LookupError, Outcome, Query, Seen};
use crate::upstream::batch::{self, BatchAnswer};
use crate::upstream::retry::{post_batch_retried, post_retried, RetryPolicy};
use crate::upstream::Platform;
use crate::upstream::{CallKind, UpstreamError};
use futures_util::future::{join, join_all};
use futures_util::stream::{self, StreamExt};
use serde_json::{json, Value};

const PENDING: u64 = 1;
const LATEST: u64 = 2;
const GENESIS: u64 = 3;
const HEAD: u64 = 4;

// A tracking check's fetches from one Durable Object (its batch and the route's statuses) and
// the one send in flight behind a route stay within Cloudflare's six connections waiting for
// headers (`batch::BATCH_FROM`): none is queued by the platform.
const CHECK_FETCHES: usize = 1 + MAX_STATUS_ASKED;
const SENDS_IN_FLIGHT_BEHIND_A_ROUTE: usize = 1;
const _: () =
    assert!(CHECK_FETCHES + SENDS_IN_FLIGHT_BEHIND_A_ROUTE <= crate::upstream::batch::BATCH_FROM);

/// How `upstream_error` names a status `GET` that failed, or whose answer has no status word the
/// relay knows (`invalid`).
pub const STATUS_METHOD: &str = "route_status";
const FIRST_HASH: u64 = 100;
const FIRST_NONCE: u64 = 10_000;

/// The most members one batch of a lookup has before an upstream taught a lower limit
/// ([`Platform::batch_limit`]): half Erigon's default `--rpc.batch.limit` (100), the lowest
/// default of the nodes the relay meets (geth's `BatchRequestLimit` is 1,000), so that a node
/// configured below its default still takes most; a node over its limit answers the whole batch
/// with one error ([`batch::judge`]), and a lookup that needs more members (a hot sender's
/// tracking check, a restart's check of its stored transactions) sends more batches.
pub const MAX_BATCH_MEMBERS: usize = 50;

/// How many members of a lookup are asked alone at once, where a batch did not answer them.
pub const SINGLES_AT_ONCE: usize = 4;
const _: () =
    assert!(SINGLES_AT_ONCE + SENDS_IN_FLIGHT_BEHIND_A_ROUTE <= crate::upstream::batch::BATCH_FROM);

/// How many batches of one lookup are in flight at once. A tracking check's two steps run one
/// after the other, and its second (by hash, in batches) has no more fetches at once than its
/// first (the counts and a private route's statuses): the six-connection bound above holds.
pub const BATCHES_AT_ONCE: usize = 2;
const _: () = assert!(BATCHES_AT_ONCE <= CHECK_FETCHES);

/// The batch's members: (id, request object).
fn members(sender: &str, query: &Query) -> Vec<(u64, Value)> {
    let request = |id: u64, method: &str, params: Value| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let mut out = Vec::new();
    if query.pending {
        out.push((
            PENDING,
            request(
                PENDING,
                "eth_getTransactionCount",
                json!([sender, "pending"]),
            ),
        ));
    }
    if query.latest {
        out.push((
            LATEST,
            request(LATEST, "eth_getTransactionCount", json!([sender, "latest"])),
        ));
    }
    if query.genesis {
        out.push((
            GENESIS,
            request(GENESIS, "eth_getBlockByNumber", json!(["0x0", false])),
        ));
    }
    if query.head {
        out.push((HEAD, request(HEAD, "eth_blockNumber", json!([]))));
    }
    for (i, hash) in query.hashes.iter().enumerate() {
        let id = FIRST_HASH + i as u64;
        out.push((
            id,
            request(id, "eth_getTransactionByHash", json!([hex::encode(hash)])),
        ));
    }
    for (i, nonce) in query.nonces.iter().enumerate() {
        let id = FIRST_NONCE + i as u64;
        out.push((
            id,
            request(
                id,
                "eth_getTransactionBySenderAndNonce",
                json!([sender, hex::encode_quantity(*nonce)]),
            ),
        ));
    }
    out
}

/// The batch text of `query` about `sender` (lowercase 0x address), all members in one.
pub fn batch(sender: &str, query: &Query) -> String {
    batch_of(&members(sender, query))
}

fn batch_of(members: &[(u64, Value)]) -> String {
    Value::Array(members.iter().map(|(_, m)| m.clone()).collect()).to_string()
}

/// `part` (one batch's answers) taken into `found`: a count, the genesis hash or the head the
/// first batch that has it, every transaction by hash or by nonce.
fn merge(found: &mut Found, part: Found) {
    found.pending = found.pending.or(part.pending);
    found.latest = found.latest.or(part.latest);
    found.genesis = found.genesis.take().or(part.genesis);
    found.head = found.head.or(part.head);
    found.known.extend(part.known);
    found.by_nonce.extend(part.by_nonce);
    found.route.extend(part.route);
}

/// Takes one member's response object into `found`.
fn take(query: &Query, response: &Value, found: &mut Found) {
    let Some(id) = response.get("id").and_then(Value::as_u64) else {
        return;
    };
    let Some(result) = response.get("result") else {
        return;
    };
    let quantity = || result.as_str().and_then(|q| hex::decode_quantity(q).ok());
    match id {
        PENDING => found.pending = quantity(),
        LATEST => found.latest = quantity(),
        HEAD => found.head = quantity(),
        GENESIS => {
            found.genesis = result
                .get("hash")
                .and_then(Value::as_str)
                .map(str::to_ascii_lowercase)
        }
        FIRST_NONCE.. => {
            let index = usize::try_from(id - FIRST_NONCE).ok();
            let hash = result
                .get("hash")
                .and_then(Value::as_str)
                .and_then(hex::decode_array);
            if let (Some(nonce), Some(hash)) = (index.and_then(|i| query.nonces.get(i)), hash) {
                found.by_nonce.insert(*nonce, hash);
            }
        }
        _ => {
            let index = id
                .checked_sub(FIRST_HASH)
                .and_then(|i| usize::try_from(i).ok());
            if let Some(hash) = index.and_then(|i| query.hashes.get(i)) {
                let seen = match result {
                    Value::Object(tx) => match tx.get("blockNumber").and_then(Value::as_str) {
                        Some(block) => hex::decode_quantity(block)
                            .ok()
                            .map(|block| Seen::Included { block }),
                        None => Some(Seen::Pending),
                    },
                    Value::Null => Some(Seen::Missing),
                    _ => None,
                };
                if let Some(seen) = seen {
                    found.known.insert(*hash, seen);
                }
            }
        }
    }
}

/// Reads the upstream's answer to [`batch`]: `None` when it is not a JSON array (an upstream that
/// refuses batches).
pub fn parse(query: &Query, body: &str) -> Option<Found> {
    let Ok(Value::Array(responses)) = serde_json::from_str::<Value>(body) else {
        return None;
    };
    let mut found = Found::default();
    for response in &responses {
        take(query, response, &mut found);
    }
    Some(found)
}

/// Asks `query` about `sender`, retried while the upstream can't be used, until `deadline_ms`;
/// the route's statuses at the same time, each asked once, within [`STATUS_TIMEOUT_MS`] (or the
/// query's [`Query::route_status_timeout_ms`]). A
/// status that failed, or has no word the relay knows, is left out, and the first such failure
/// is logged as an `upstream_error` of [`STATUS_METHOD`].
///
/// # Errors
/// Why the upstream could not be used by the deadline (redacted by the platform's upstream).
pub async fn look_up<U: Platform + ?Sized>(
    upstream: &U,
    sender: &str,
    query: &Query,
    policy: &RetryPolicy,
    deadline_ms: u64,
) -> Outcome {
    let statuses = join_all(query.route_statuses.iter().map(|hash| async move {
        let timeout_ms = policy
            .attempt_timeout(upstream.now_ms(), deadline_ms)
            .min(query.route_status_timeout_ms.unwrap_or(STATUS_TIMEOUT_MS));
        let routes = query
            .route_holders
            .iter()
            .find(|(h, _)| h == hash)
            .map_or(TakenBy::default(), |(_, routes)| *routes);
        let status = match upstream.get_status_at(hash, routes, timeout_ms).await {
            // Only a 2xx says the route's word: a 503 with `{"status":"failed"}` is the
            // endpoint's trouble, not a drop (which would send the transaction again).
            Ok(reply) if !(200..300).contains(&reply.status) => {
                Err(UpstreamError::Status(reply.status, reply.retry_after_ms))
            }
            Ok(reply) => RouteStatus::of_body(&reply.body).ok_or(UpstreamError::Invalid),
            Err(e) => Err(e),
        };
        (*hash, status)
    }));
    let (found, statuses) = join(
        ask_node(upstream, sender, query, policy, deadline_ms),
        statuses,
    )
    .await;
    // One that could not be had says nothing; the operator hears of it once a lookup (a wrong
    // SEND_STATUS_URL would otherwise go unseen).
    if let Some(e) = statuses
        .iter()
        .find_map(|(_, status)| status.as_ref().err())
    {
        upstream.emit(&super::error_metric(STATUS_METHOD, e));
    }
    let mut found = found?;
    found.route = statuses
        .into_iter()
        .filter_map(|(hash, status)| Some((hash, status.ok()?)))
        .collect();
    Ok(found)
}

/// The batch part of [`look_up`]: the members in batches of at most [`MAX_BATCH_MEMBERS`] (and
/// at most what the upstreams take, [`Platform::batch_limit`]), at most [`BATCHES_AT_ONCE`] at
/// once; then, alone and at most [`SINGLES_AT_ONCE`] at once, each member a batch did not answer
/// (refused as a whole, left out, or answered with an error that says nothing of it:
/// [`batch::not_attempted`]). What every answer found; an error only when nothing answered.
async fn ask_node<U: Platform + ?Sized>(
    upstream: &U,
    sender: &str,
    query: &Query,
    policy: &RetryPolicy,
    deadline_ms: u64,
) -> Outcome {
    let members = members(sender, query);
    if members.is_empty() {
        return Ok(Found::default());
    }
    let mut found = Found::default();
    let mut answered = false;
    let mut last_error = None;
    let mut alone: Vec<&(u64, Value)> = Vec::new();
    let mut rest = &members[..];
    while !rest.is_empty() {
        // What the upstreams take, learned again before each round.
        let size = MAX_BATCH_MEMBERS.min(upstream.batch_limit(CallKind::OwnCount));
        if size < 2 || rest.len() == 1 {
            alone.extend(rest);
            break;
        }
        let round_len = rest.len().min(size * BATCHES_AT_ONCE);
        let (round, after) = rest.split_at(round_len);
        rest = after;
        let asked = round
            .chunks(size)
            .map(|batch| ask_batch(upstream, query, batch, policy, deadline_ms));
        for outcome in join_all(asked).await {
            match outcome {
                Ok(BatchPart { part, unanswered }) => {
                    answered |= part != Found::default();
                    merge(&mut found, part);
                    alone.extend(unanswered);
                }
                Err(e) => last_error = Some(e),
            }
        }
    }
    let singles = stream::iter(alone)
        .map(|(_, member)| async move {
            let method = member.get("method").and_then(Value::as_str).unwrap_or("");
            let kind = CallKind::of_own_method(method);
            post_retried(upstream, &member.to_string(), kind, policy, deadline_ms).await
        })
        .buffer_unordered(SINGLES_AT_ONCE)
        .collect::<Vec<_>>()
        .await;
    for reply in singles {
        match reply {
            Ok(reply) => {
                if let Ok(response) = serde_json::from_str::<Value>(&reply.body) {
                    answered = true;
                    take(query, &response, &mut found);
                }
            }
            Err(e) => last_error = Some(LookupError::Unavailable(e.to_string())),
        }
    }
    match last_error {
        Some(e) if !answered => Err(e),
        _ => Ok(found),
    }
}

/// What one batch of a lookup answered, and its members it did not.
struct BatchPart<'a> {
    part: Found,
    unanswered: Vec<&'a (u64, Value)>,
}

/// One batch of a lookup's `members`, retried until `deadline_ms`: what its answer found, and
/// the members it did not answer ([`batch::judge`]: all of them when the upstream refused the
/// batch).
async fn ask_batch<'a, U: Platform + ?Sized>(
    upstream: &U,
    query: &Query,
    members: &'a [(u64, Value)],
    policy: &RetryPolicy,
    deadline_ms: u64,
) -> Result<BatchPart<'a>, LookupError> {
    // A batch asking a count or a transaction by hash is merged over the upstreams.
    let kind = if members.iter().any(|(_, m)| {
        let method = m.get("method").and_then(Value::as_str).unwrap_or("");
        crate::upstream::merge::FAN_OUT_METHODS.contains(&method)
    }) {
        CallKind::OwnCount
    } else {
        CallKind::OwnOther
    };
    let body = batch_of(members);
    let reply = post_batch_retried(upstream, &body, members.len(), kind, policy, deadline_ms)
        .await
        .map_err(|e| LookupError::Unavailable(e.to_string()))?;
    let value = serde_json::from_str::<Value>(&reply.body).unwrap_or(Value::Null);
    let answer = batch::judge_value(members.len(), reply.status, &value);
    let responses = match (answer, value) {
        (BatchAnswer::Parts { .. }, Value::Array(responses)) => responses,
        (BatchAnswer::Refused { .. }, _) => {
            return Ok(BatchPart {
                part: Found::default(),
                unanswered: members.iter().collect(),
            })
        }
        _ => {
            return Err(LookupError::Unavailable(format!(
                "upstream answered a batch with HTTP {} and no member answers",
                reply.status
            )))
        }
    };
    let mut part = Found::default();
    let mut served = std::collections::HashSet::new();
    for response in &responses {
        if batch::member_not_attempted(response) {
            continue;
        }
        if let Some(id) = response.get("id").and_then(Value::as_u64) {
            served.insert(id);
        }
        take(query, response, &mut part);
    }
    Ok(BatchPart {
        part,
        unanswered: members
            .iter()
            .filter(|(id, _)| !served.contains(id))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transaction::TxHash;
    use crate::upstream::UpstreamReply;

    fn query() -> Query {
        Query {
            pending: true,
            latest: true,
            genesis: true,
            hashes: vec![[1; 32], [2; 32], [3; 32]],
            nonces: vec![7],
            head: true,
            route_statuses: Vec::new(),
            route_holders: Vec::new(),
            route_status_timeout_ms: None,
        }
    }

    #[test]
    fn one_batch_with_fixed_ids() {
        let text = batch("0xab", &query());
        let v: Value = serde_json::from_str(&text).unwrap();
        let methods: Vec<(u64, &str)> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (m["id"].as_u64().unwrap(), m["method"].as_str().unwrap()))
            .collect();
        assert_eq!(
            methods,
            vec![
                (1, "eth_getTransactionCount"),
                (2, "eth_getTransactionCount"),
                (3, "eth_getBlockByNumber"),
                (4, "eth_blockNumber"),
                (100, "eth_getTransactionByHash"),
                (101, "eth_getTransactionByHash"),
                (102, "eth_getTransactionByHash"),
                (10_000, "eth_getTransactionBySenderAndNonce"),
            ]
        );
        assert_eq!(v[7]["params"], json!(["0xab", "0x7"]));
        assert_eq!(v[1]["params"], json!(["0xab", "latest"]));
        assert_eq!(v[4]["params"][0], hex::encode(&[1; 32]));
    }

    #[test]
    fn answers_by_id_in_any_order_and_failed_members_left_out() {
        let body = r#"[
            {"jsonrpc":"2.0","id":101,"result":null},
            {"jsonrpc":"2.0","id":2,"result":"0x4"},
            {"jsonrpc":"2.0","id":3,"result":{"hash":"0xABCD","number":"0x0"}},
            {"jsonrpc":"2.0","id":1,"result":"0x7"},
            {"jsonrpc":"2.0","id":4,"result":"0x2a"},
            {"jsonrpc":"2.0","id":100,"result":{"hash":"0x01","blockNumber":"0x10"}},
            {"jsonrpc":"2.0","id":102,"error":{"code":-32000,"message":"busy"}},
            {"jsonrpc":"2.0","id":10000,"result":{"hash":"0x0505050505050505050505050505050505050505050505050505050505050505","nonce":"0x7"}}
        ]"#;
        let found = parse(&query(), body).unwrap();
        assert_eq!((found.pending, found.latest), (Some(7), Some(4)));
        assert_eq!(found.genesis.as_deref(), Some("0xabcd"));
        assert_eq!(found.head, Some(42));
        assert_eq!(
            found.known.get(&[1; 32]),
            Some(&Seen::Included { block: 16 })
        );
        assert_eq!(found.known.get(&[2; 32]), Some(&Seen::Missing));
        assert_eq!(found.known.get(&[3; 32]), None);
        assert_eq!(found.by_nonce.get(&7), Some(&[5; 32]));
        assert!(parse(&query(), r#"{"error":{"code":-32600}}"#).is_none());
    }

    /// Yields once (waking itself), so that several posts are in flight together.
    struct YieldOnce(bool);
    impl std::future::Future for YieldOnce {
        type Output = ();
        fn poll(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<()> {
            if self.0 {
                return std::task::Poll::Ready(());
            }
            self.0 = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }

    /// A node in front of which a batch over `limit` members is refused as geth does (an array of
    /// one error), and members past `served` of a batch get QuickNode's rate limit; it counts
    /// every transaction asked by hash as mined in block 9, and learns like the edge does.
    struct Node {
        limit: usize,
        served: usize,
        limits: std::cell::RefCell<crate::upstream::batch::BatchLimits>,
        in_flight: std::cell::Cell<usize>,
        most_in_flight: std::cell::Cell<usize>,
        posts: std::cell::RefCell<Vec<usize>>,
    }

    impl Node {
        fn new(limit: usize, served: usize) -> Self {
            Node {
                limit,
                served,
                limits: Default::default(),
                in_flight: Default::default(),
                most_in_flight: Default::default(),
                posts: Default::default(),
            }
        }
        fn answer(request: &Value) -> Value {
            let id = request["id"].clone();
            match request["method"].as_str() {
                Some("eth_getTransactionByHash") => {
                    json!({"jsonrpc": "2.0", "id": id, "result": {"blockNumber": "0x9"}})
                }
                _ => json!({"jsonrpc": "2.0", "id": id, "result": "0x5"}),
            }
        }
    }

    impl Platform for Node {
        async fn post(
            &self,
            body: &str,
            _kind: CallKind,
            _timeout_ms: u64,
        ) -> Result<UpstreamReply, UpstreamError> {
            self.in_flight.set(self.in_flight.get() + 1);
            self.most_in_flight
                .set(self.most_in_flight.get().max(self.in_flight.get()));
            YieldOnce(false).await;
            self.in_flight.set(self.in_flight.get() - 1);
            let request: Value = serde_json::from_str(body).unwrap();
            let answer = match &request {
                Value::Array(members) => {
                    self.posts.borrow_mut().push(members.len());
                    if members.len() > self.limit {
                        json!([{"jsonrpc": "2.0", "id": members[0]["id"], "error": {"code": -32600, "message": "batch too large"}}])
                    } else {
                        Value::Array(members.iter().enumerate().map(|(i, m)| {
                            if i < self.served {
                                Node::answer(m)
                            } else {
                                json!({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32007, "message": "25/second request limit reached - reduce calls per second or upgrade your account at quicknode.com"}})
                            }
                        }).collect())
                    }
                }
                single => {
                    self.posts.borrow_mut().push(1);
                    Node::answer(single)
                }
            };
            Ok(UpstreamReply::ok(answer.to_string()))
        }
        async fn post_batch(
            &self,
            body: &str,
            members: usize,
            kind: CallKind,
            timeout_ms: u64,
        ) -> Result<UpstreamReply, UpstreamError> {
            let reply = self.post(body, kind, timeout_ms).await;
            let answer = crate::upstream::batch::judge(members, &reply);
            self.limits.borrow_mut().learn("node", members, answer, 0);
            reply
        }
        fn batch_limit(&self, _kind: CallKind) -> usize {
            self.limits.borrow().limit("node", 0)
        }
        async fn get_status(
            &self,
            _hash: &TxHash,
            _timeout_ms: u64,
        ) -> Result<UpstreamReply, UpstreamError> {
            Err(UpstreamError::Invalid)
        }
        async fn sleep(&self, _ms: u64) {}
        fn now_ms(&self) -> u64 {
            0
        }
        fn random(&self) -> f64 {
            0.5
        }
        fn emit(&self, _metric: &crate::metrics::Metric) {}
    }

    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        use std::task::{Context, Poll, Waker};
        let mut future = std::pin::pin!(future);
        loop {
            if let Poll::Ready(v) = future
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()))
            {
                return v;
            }
        }
    }

    fn hashes(n: u8) -> Query {
        Query {
            latest: true,
            hashes: (0..n).map(|i| [i; 32]).collect(),
            ..Query::default()
        }
    }

    /// A tracking check of 150 behind a node that refuses batches over 5 (geth's array of one
    /// error): never a success that knows nothing; every member asked alone, at most 4 at once,
    /// and after the first refusals no batch again.
    #[test]
    fn a_refused_batch_is_asked_member_by_member_at_most_four_at_once() {
        let node = Node::new(5, usize::MAX);
        let policy = RetryPolicy::until_deadline(1_000);
        let found = block_on(look_up(&node, "0xab", &hashes(150), &policy, 1_000)).unwrap();
        assert_eq!(found.latest, Some(5));
        assert_eq!(found.known.len(), 150, "every one confirmed");
        assert!(found
            .known
            .values()
            .all(|s| *s == Seen::Included { block: 9 }));
        let posts = node.posts.borrow();
        assert_eq!(
            &posts[..2],
            [MAX_BATCH_MEMBERS, MAX_BATCH_MEMBERS],
            "the first round"
        );
        assert_eq!(
            posts.iter().filter(|&&n| n > 1).count(),
            2,
            "no batch after the refusal"
        );
        assert_eq!(posts.len(), 2 + 151);
        assert!(
            node.most_in_flight.get() <= SINGLES_AT_ONCE,
            "{}",
            node.most_in_flight.get()
        );
        assert_eq!(node.most_in_flight.get(), SINGLES_AT_ONCE);
    }

    /// Erigon's limit 100 takes the batches of 50; a node whose batches answer only their
    /// first 20 members (the rest rate limited, QuickNode's -32007) has the rest asked alone.
    #[test]
    fn a_partial_answer_is_completed_member_by_member() {
        let policy = RetryPolicy::until_deadline(1_000);
        let erigon = Node::new(100, usize::MAX);
        let found = block_on(look_up(&erigon, "0xab", &hashes(150), &policy, 1_000)).unwrap();
        assert_eq!(found.known.len(), 150);
        assert_eq!(*erigon.posts.borrow(), [50, 50, 50, 1]);
        let limited = Node::new(usize::MAX, 20);
        let found = block_on(look_up(&limited, "0xab", &hashes(60), &policy, 1_000)).unwrap();
        assert_eq!((found.latest, found.known.len()), (Some(5), 60));
        // Batches of 50 (20 answered) and 11 (all answered), then the 30 left, alone; then the
        // batches are cut to 20.
        assert_eq!(
            limited.posts.borrow().iter().filter(|&&n| n == 1).count(),
            30
        );
        assert_eq!(limited.batch_limit(CallKind::OwnCount), 20);
    }

    /// The read node answers the batch; the route's status endpoint answers by hash.
    struct Peers {
        statuses: Vec<(TxHash, Result<UpstreamReply, UpstreamError>)>,
        asked: std::cell::RefCell<Vec<TxHash>>,
        metrics: std::cell::RefCell<Vec<String>>,
    }

    impl Platform for Peers {
        async fn post(
            &self,
            _body: &str,
            _kind: CallKind,
            _timeout_ms: u64,
        ) -> Result<UpstreamReply, UpstreamError> {
            Ok(UpstreamReply::ok(
                r#"[{"jsonrpc":"2.0","id":2,"result":"0x3"},{"jsonrpc":"2.0","id":100,"result":null}]"#,
            ))
        }
        async fn get_status(
            &self,
            hash: &TxHash,
            _timeout_ms: u64,
        ) -> Result<UpstreamReply, UpstreamError> {
            self.asked.borrow_mut().push(*hash);
            let (_, reply) = self.statuses.iter().find(|(h, _)| h == hash).unwrap();
            reply.clone()
        }
        async fn sleep(&self, _ms: u64) {}
        fn now_ms(&self) -> u64 {
            0
        }
        fn random(&self) -> f64 {
            0.5
        }
        fn emit(&self, metric: &crate::metrics::Metric) {
            self.metrics.borrow_mut().push(metric.log_line());
        }
    }

    #[test]
    fn the_routes_statuses_come_beside_the_batch_and_one_that_failed_says_nothing() {
        use std::future::Future;
        use std::pin::pin;
        use std::task::{Context, Poll, Waker};
        let peers = Peers {
            statuses: vec![
                ([1; 32], Ok(UpstreamReply::ok(r#"{"status":"FAILED"}"#))),
                ([2; 32], Err(UpstreamError::Timeout(10))),
                ([3; 32], Ok(UpstreamReply::ok(r#"{"status":"PENDING"}"#))),
                (
                    [4; 32],
                    Ok(UpstreamReply {
                        status: 503,
                        body: r#"{"status":"FAILED"}"#.into(),
                        retry_after_ms: None,
                        answerer: None,
                    }),
                ),
            ],
            asked: Default::default(),
            metrics: Default::default(),
        };
        let query = Query {
            latest: true,
            hashes: vec![[1; 32]],
            route_statuses: vec![[1; 32], [2; 32], [3; 32], [4; 32]],
            ..Query::default()
        };
        let policy = RetryPolicy::until_deadline(1_000);
        let future = pin!(look_up(&peers, "0xab", &query, &policy, 1_000));
        let Poll::Ready(found) = future.poll(&mut Context::from_waker(Waker::noop())) else {
            panic!("the peers never wait");
        };
        let found = found.unwrap();
        assert_eq!(found.latest, Some(3));
        assert_eq!(found.known.get(&[1; 32]), Some(&Seen::Missing));
        assert_eq!(peers.asked.borrow().len(), 4, "each asked once");
        assert_eq!(found.route.get(&[1; 32]), Some(&RouteStatus::Failed));
        assert_eq!(found.route.get(&[2; 32]), None);
        assert_eq!(found.route.get(&[3; 32]), Some(&RouteStatus::Pending));
        assert_eq!(
            found.route.get(&[4; 32]),
            None,
            "a status is read only from a 2xx"
        );
        let logged = peers.metrics.borrow();
        assert_eq!(logged.len(), 1, "{logged:?}");
        assert!(logged[0].contains("upstream_error") && logged[0].contains("route_status"));
    }
}
