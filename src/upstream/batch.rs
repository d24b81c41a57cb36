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

/// Each member's reply of a batch of `count` sends ([`batch_body`]) from the batch's `reply`:
/// its answer object by id (in any order) with the batch's status; the batch's own failure for
/// every member when it had no usable answer (a transport error, or an HTTP error status the
/// retry rules know); [`UpstreamError::Invalid`] for a member the answer leaves out or when the
/// answer is not an array (a node that refuses batches): such a member is sent again alone, a
/// copy the node may already have being answered as known.
pub fn split_batch(
    reply: &Result<UpstreamReply, UpstreamError>,
    count: usize,
) -> Vec<Result<UpstreamReply, UpstreamError>> {
    let reply = match reply {
        Err(e) => return vec![Err(e.clone()); count],
        Ok(r) if crate::upstream::retry::RETRYABLE_STATUSES.contains(&r.status) => {
            return vec![Ok(r.clone()); count]
        }
        Ok(r) => r,
    };
    let mut parts: Vec<Result<UpstreamReply, UpstreamError>> =
        vec![Err(UpstreamError::Invalid); count];
    let Ok(Value::Array(members)) = serde_json::from_str::<Value>(&reply.body) else {
        return parts;
    };
    for member in members {
        let index = member
            .get("id")
            .and_then(Value::as_u64)
            .and_then(|id| usize::try_from(id).ok())
            .filter(|id| (1..=count).contains(id));
        if let Some(id) = index {
            parts[id - 1] = Ok(UpstreamReply {
                status: reply.status,
                body: member.to_string(),
                retry_after_ms: reply.retry_after_ms,
            });
        }
    }
    parts
}

/// The first attempt of several sends at once: `txs` as one batch ([`batch_body`]) within
/// `timeout_ms`, and each member's part of the answer ([`split_batch`]), for [`submit_after`].
pub async fn post_batch<P: Platform + ?Sized>(
    upstream: &P,
    txs: &[&SignedTx],
    timeout_ms: u64,
) -> Vec<Result<UpstreamReply, UpstreamError>> {
    let reply = upstream
        .post(&batch_body(txs), CallKind::Send, timeout_ms)
        .await;
    split_batch(&reply, txs.len())
}

#[cfg(test)]
mod tests;
