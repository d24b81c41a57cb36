//! JSON-RPC batches of a sender's sends: several transactions of one sender's send window as one
//! batch, in nonce order ([`post_batch`]): one connection instead of one each, since Cloudflare
//! lets a Worker invocation (and a Durable Object, whose concurrent requests share one I/O
//! context) have only six connections waiting for response headers and queues the rest. Each
//! member's part of the batch's answer ([`split_batch`]) is its first attempt, and it goes on from
//! there alone ([`crate::upstream::submit::submit_after`]).

use crate::ordering::sender::PoolKind;
use crate::ordering::tx::SignedTx;
use crate::upstream::{CallKind, Platform, UpstreamError, UpstreamReply};
use serde_json::Value;

/// The most transactions sent as one batch ([`post_batch`]).
pub const MAX_BATCH_SENDS: usize = 64;

/// From how many sends ready at once they go as one batch: Cloudflare's six connections waiting
/// for response headers per Worker invocation, which a Durable Object's concurrent requests share.
/// Fewer go alone, each with its own connection and answer (a lost connection loses one answer).
pub const BATCH_FROM: usize = 6;

/// Whether `ready` sends of one sender's window, asked for in one turn of its machine, go as one
/// batch: on a mempool upstream (a strict one gets one at a time anyway), [`BATCH_FROM`] or more
/// of them, and one upstream (with several, each is sent alone, hedged or broadcast, whose
/// answers are merged per transaction).
pub fn batched(pool: PoolKind, ready: usize, upstreams: usize) -> bool {
    pool == PoolKind::Mempool && ready >= BATCH_FROM && upstreams == 1
}

/// The body of a batch of sends of `txs`, in the order given (nonce order, for a window): member
/// `i` is [`SignedTx::request_with_id`] with id `i + 1`.
pub fn batch_body(txs: &[&SignedTx]) -> String {
    let members: Vec<String> = txs
        .iter()
        .enumerate()
        .map(|(i, tx)| tx.request_with_id(i as u64 + 1))
        .collect();
    format!("[{}]", members.join(","))
}

/// Squashed (lowercase, no spaces, `_` or `-`) texts of a batch member's error that says nothing
/// about the member itself: it was not attempted. Batch limits: geth `batch too large`, Erigon
/// `batch limit 100 exceeded`, Besu `Number of requests exceeds max batch size`, jsonrpsee/reth
/// `The batch request was too large`, Nethermind `Batch size limit exceeded`, Hedera's relay
/// `Batch request amount ... exceeds max ...`, and methods not served in a batch (any text naming
/// a batch); per-member rate limits: QuickNode `-32007 25/second request limit reached`,
/// Chainstack `You've exceeded the RPS limit`, Alchemy `... exceeded its compute units per second
/// capacity`, `Too Many Requests`, `rate limit`.
pub const NOT_ATTEMPTED: &[&str] = &[
    "batch",
    "ratelimit",
    "requestlimitreached",
    "rpslimit",
    "computeunits",
    "toomanyrequests",
];

/// Whether a batch member's error `message` (its text and `data`) says nothing about the member:
/// a batch limit, a rate limit, a method not served in a batch ([`NOT_ATTEMPTED`]).
pub fn not_attempted(message: &str) -> bool {
    let squashed = crate::ordering::answer::squash(message);
    NOT_ATTEMPTED.iter().any(|p| squashed.contains(p))
}

/// What an upstream's answer to a batch of `members` requests says of batches ([`judge`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchAnswer {
    /// An array of member answers: `answered` of them, of which `not_attempted` carry an error
    /// that says nothing of their member ([`not_attempted`], such as a per-member rate limit).
    Parts {
        /// Member answers in the array.
        answered: usize,
        /// Of those, errors that say nothing of their member.
        not_attempted: usize,
    },
    /// The batch refused as a whole (for its size, or for being a batch): one error object
    /// (Besu, reth, Hedera's relay, a node without batches), an array of one error for several
    /// members (geth, Erigon), or an HTTP error whose JSON names a batch (Nethermind). `limit`:
    /// the most members the upstream's text names (Erigon's `batch limit 100`).
    Refused {
        /// The upstream's limit, where its answer names it.
        limit: Option<usize>,
    },
    /// No usable answer (a transport error, an HTTP error without JSON about batches): nothing
    /// learned of batches.
    Failed,
}

/// The error text (message and `data`) of a JSON-RPC error response object.
fn error_text(response: &Value) -> Option<String> {
    response
        .get("error")
        .map(|error| crate::jsonrpc::error_parts_of(error).1)
}

/// Whether a batch's member `response` is an error that says nothing of its member
/// ([`not_attempted`]): the member was not attempted.
pub fn member_not_attempted(response: &Value) -> bool {
    error_text(response).is_some_and(|text| not_attempted(&text))
}

/// The limit a batch refusal's text names: the number after `batch limit` (Erigon) or `exceeds
/// max` (Hedera's relay); `None` when it names none (geth, Besu, reth, Nethermind).
fn named_limit(text: &str) -> Option<usize> {
    let lower = text.to_ascii_lowercase();
    ["batch limit ", "exceeds max "].iter().find_map(|key| {
        let rest = &lower[lower.find(key)? + key.len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok().filter(|&n| n > 0)
    })
}

/// Judges the upstream's `reply` to a batch of `members` requests ([`BatchAnswer`]).
pub fn judge(members: usize, reply: &Result<UpstreamReply, UpstreamError>) -> BatchAnswer {
    let Ok(reply) = reply else {
        return BatchAnswer::Failed;
    };
    match serde_json::from_str::<Value>(&reply.body) {
        Ok(value) => judge_value(members, reply.status, &value),
        Err(_) => BatchAnswer::Failed,
    }
}

/// [`judge`] of an answer already parsed (`value`, with its HTTP `status`).
pub fn judge_value(members: usize, status: u16, value: &Value) -> BatchAnswer {
    let ok = (200..300).contains(&status);
    match value {
        Value::Array(parts)
            if ok && !(members > 1 && parts.len() == 1 && error_text(&parts[0]).is_some()) =>
        {
            let not_attempted = parts.iter().filter(|p| member_not_attempted(p)).count();
            BatchAnswer::Parts {
                answered: parts.len(),
                not_attempted,
            }
        }
        Value::Array(parts) => refusal(parts.first().and_then(error_text), ok),
        Value::Object(_) => refusal(error_text(value), ok),
        _ if ok => BatchAnswer::Refused { limit: None },
        _ => BatchAnswer::Failed,
    }
}

/// A refusal with `text`, in an answer whose HTTP status was 2xx (`ok`) or not (then only a text
/// that names a batch: Nethermind's).
fn refusal(text: Option<String>, ok: bool) -> BatchAnswer {
    match text {
        Some(text) if ok || text.to_ascii_lowercase().contains("batch") => BatchAnswer::Refused {
            limit: named_limit(&text),
        },
        None if ok => BatchAnswer::Refused { limit: None },
        _ => BatchAnswer::Failed,
    }
}

/// Each member's first attempt of a batch of `count` sends ([`batch_body`]) from the batch's
/// `reply`: its answer object by id (in any order), with the batch's status; `None` (not
/// attempted: it goes alone at once, no retry spent) for a member the answer leaves out, whose
/// error says nothing of it ([`not_attempted`]), or when the batch had no answer at all or was
/// refused ([`judge`]): a hung or lost batch leaves each member its own attempts. A copy the node
/// already took is answered as known when it is sent again.
pub fn split_batch(
    reply: &Result<UpstreamReply, UpstreamError>,
    count: usize,
) -> Vec<Option<Result<UpstreamReply, UpstreamError>>> {
    let mut parts = vec![None; count];
    let Ok(reply) = reply else {
        return parts;
    };
    let Ok(value) = serde_json::from_str::<Value>(&reply.body) else {
        return parts;
    };
    let (BatchAnswer::Parts { .. }, Value::Array(members)) =
        (judge_value(count, reply.status, &value), value)
    else {
        return parts;
    };
    for member in members {
        if member_not_attempted(&member) {
            continue;
        }
        let index = member
            .get("id")
            .and_then(Value::as_u64)
            .and_then(|id| usize::try_from(id).ok())
            .filter(|id| (1..=count).contains(id));
        if let Some(id) = index {
            parts[id - 1] = Some(Ok(UpstreamReply {
                status: reply.status,
                body: member.to_string(),
                retry_after_ms: reply.retry_after_ms,
                answerer: reply.answerer,
            }));
        }
    }
    parts
}

/// The first attempt of several sends at once: `txs` as one batch ([`batch_body`]) within
/// `timeout_ms` ([`Platform::post_batch`], which learns the upstream's batch limit), and each
/// member's part of the answer ([`split_batch`]), for
/// [`crate::upstream::submit::submit_after`].
pub async fn post_batch<P: Platform + ?Sized>(
    upstream: &P,
    txs: &[&SignedTx],
    timeout_ms: u64,
) -> Vec<Option<Result<UpstreamReply, UpstreamError>>> {
    let reply = upstream
        .post_batch(&batch_body(txs), txs.len(), CallKind::Send, timeout_ms)
        .await;
    split_batch(&reply, txs.len())
}

/// How long an upstream that refused a batch gets none, ms.
pub const NO_BATCH_MS: u64 = 60_000;

/// What one upstream taught of batches ([`BatchLimits`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Learned {
    /// The most members of a batch it answered in full.
    largest_accepted: usize,
    /// The most members a batch to it may have; `None`: no bound learned.
    cap: Option<usize>,
    /// Until when it gets no batch, Unix ms.
    no_batch_until_ms: u64,
}

/// Each upstream's batch limit, learned from its answers ([`judge`]) and kept by its URL, as
/// [`crate::upstream::rotation::Rotation`] keeps its health: an upstream that refused a batch gets
/// none for [`NO_BATCH_MS`], then batches of at most the size it named, or the largest it answered
/// in full below the refused size, or half the refused size; one whose members were rate limited
/// gets batches of at most the members it served. Pure and clock-free.
#[derive(Debug, Clone, Default)]
pub struct BatchLimits {
    learned: std::collections::HashMap<String, Learned>,
}

impl BatchLimits {
    /// Learns from `answer` of upstream `key` to a batch of `members`, at `now_ms` (Unix ms).
    /// Returns the new cap when the answer lowered it (to be logged).
    pub fn learn(
        &mut self,
        key: &str,
        members: usize,
        answer: BatchAnswer,
        now_ms: u64,
    ) -> Option<usize> {
        let learned = self.learned.entry(key.to_string()).or_default();
        let before = learned.cap;
        match answer {
            BatchAnswer::Failed => return None,
            BatchAnswer::Parts {
                answered,
                not_attempted: 0,
            } if answered >= members => {
                learned.largest_accepted = learned.largest_accepted.max(members);
                return None;
            }
            BatchAnswer::Parts {
                answered,
                not_attempted,
            } => {
                let served = answered.saturating_sub(not_attempted).max(1);
                learned.cap = Some(learned.cap.map_or(served, |c| c.min(served)));
            }
            BatchAnswer::Refused { limit } => {
                let below = Some(learned.largest_accepted).filter(|&n| n > 0 && n < members);
                let cap = limit
                    .or(below)
                    .unwrap_or(members / 2)
                    .clamp(1, members.saturating_sub(1).max(1));
                learned.cap = Some(learned.cap.map_or(cap, |c| c.min(cap)));
                learned.no_batch_until_ms = now_ms.saturating_add(NO_BATCH_MS);
                return learned.cap;
            }
        }
        (learned.cap != before).then_some(learned.cap).flatten()
    }

    /// The most members a batch to upstream `key` may have at `now_ms`: 1 (no batch) while it
    /// is in its [`NO_BATCH_MS`] after a refusal; `usize::MAX` when nothing bounds it.
    pub fn limit(&self, key: &str, now_ms: u64) -> usize {
        match self.learned.get(key) {
            None => usize::MAX,
            Some(l) if now_ms < l.no_batch_until_ms => 1,
            Some(l) => l.cap.unwrap_or(usize::MAX),
        }
    }
}

#[cfg(test)]
mod tests;
