//! Cancelling a private transaction at the route: `eth_cancelPrivateTransaction` with
//! `[{"txHash"}]` (Flashbots', as QuickNode's and Alchemy's Protect endpoints serve it; a
//! transaction can be cancelled only through the endpoint that sent it, which the relay is). A
//! route that does not serve the method (Flashbots Protect's RPC, MEV Blocker: they cancel by a
//! transaction of the same nonce, empty data, to the sender itself) gets the client a clear
//! -32004 saying so.

use crate::hex;
use crate::jsonrpc::{self, Answer, RpcError, CANCEL_PRIVATE_TRANSACTION};
use crate::ordering::row::TakenBy;
use crate::transaction::TxHash;
use crate::upstream::retry::{post_retried, post_route_retried, RetryPolicy};
use crate::upstream::{method_not_served, CallKind, Platform, UpstreamError};
use futures_util::future::join_all;

/// The request that cancels `hash` at the route.
pub fn cancel_request(hash: &TxHash) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"{CANCEL_PRIVATE_TRANSACTION}","params":[{{"txHash":"{}"}}]}}"#,
        hex::encode(hash)
    )
}

/// Asks the route to cancel `hash` (retried while it cannot be used, as a read: cancelling twice
/// is cancelling once), by `deadline_ms` (Unix ms). Returns the route's answer (`true`: cancelled;
/// `false`: not, e.g. already included), -32004 when the route does not serve the method, or the
/// relay's error when no answer came.
pub async fn cancel_at_route<P: Platform + ?Sized>(
    upstream: &P,
    hash: &TxHash,
    policy: &RetryPolicy,
    deadline_ms: u64,
) -> Answer {
    let request = cancel_request(hash);
    let reply = post_retried(upstream, &request, CallKind::Send, policy, deadline_ms).await;
    if method_not_served(&reply) {
        return not_served();
    }
    match reply {
        Ok(reply) => Answer::parse(&reply.body)
            .unwrap_or_else(|| Answer::error(&UpstreamError::Invalid.to_rpc())),
        Err(error) => Answer::error(&error.to_rpc()),
    }
}

/// -32004 for a route that does not serve `eth_cancelPrivateTransaction`, saying how to cancel
/// there instead.
fn not_served() -> Answer {
    Answer::error(&RpcError::new(
        jsonrpc::METHOD_NOT_SUPPORTED,
        "the private route does not serve eth_cancelPrivateTransaction: cancel by sending a \
         transaction with the same nonce, empty data and a higher priority fee to your own \
         address (Flashbots Protect; MEV Blocker with softCancellations)",
    ))
}

/// The cancel of `hash` behind several routes, the one that took it known (`taken_by`): sent
/// to every one of the `route_count` routes at once (routes are tried by health, so any of them
/// may hold a copy from a send whose answer was lost), each retried while it cannot be used, by
/// `deadline_ms`; their answers combined ([`combine_cancels`]). With one route, or the taker
/// not known, as [`cancel_at_route`].
pub async fn cancel_at_routes<P: Platform + ?Sized>(
    upstream: &P,
    hash: &TxHash,
    taken_by: TakenBy,
    route_count: usize,
    policy: &RetryPolicy,
    deadline_ms: u64,
) -> Answer {
    let Some(taker) = taken_by
        .index()
        .filter(|&i| i < route_count && route_count > 1)
    else {
        return cancel_at_route(upstream, hash, policy, deadline_ms).await;
    };
    let asked = taken_by.ask_order(route_count);
    let request = cancel_request(hash);
    let answers = join_all(asked.iter().map(|&index| {
        let request = request.as_str();
        async move {
            let answer = cancel_at_one(upstream, index, request, policy, deadline_ms).await;
            (index, answer)
        }
    }))
    .await;
    combine_cancels(taker, &answers)
}

/// One route's answer to a cancel ([`cancel_at_routes`]): retried while it cannot be used
/// ([`post_route_retried`]).
async fn cancel_at_one<P: Platform + ?Sized>(
    upstream: &P,
    index: usize,
    request: &str,
    policy: &RetryPolicy,
    deadline_ms: u64,
) -> Result<Answer, UpstreamError> {
    let reply = post_route_retried(upstream, index, request, policy, deadline_ms).await;
    if method_not_served(&reply) {
        return Ok(not_served());
    }
    match reply? {
        reply if (200..300).contains(&reply.status) => {
            Answer::parse(&reply.body).ok_or(UpstreamError::Invalid)
        }
        reply => Err(UpstreamError::Status(reply.status, reply.retry_after_ms)),
    }
}

/// The client's answer to a cancel sent to several routes (`answers`: each route's, by its
/// position in `UPSTREAM_SEND_URL`; `taker`: the route that took the transaction): `true` only
/// when the route that took it cancelled it and every other route answered (`false` there: it
/// did not hold it, as Flashbots answers for a hash it does not know; -32004: it cancels no
/// way this relay can ask); the taker's own answer when it is not `true` (`false`, -32004, or
/// its error); -32002 naming the route that could not be asked when the taker cancelled it but
/// that one may still hold it (cancel again).
pub fn combine_cancels(taker: usize, answers: &[(usize, Result<Answer, UpstreamError>)]) -> Answer {
    let cancelled = |a: &Answer| matches!(a, Answer::Result(text) if text.trim() == "true");
    let Some((_, taker_answer)) = answers.iter().find(|(i, _)| *i == taker) else {
        return Answer::error(&UpstreamError::Invalid.to_rpc());
    };
    match taker_answer {
        Err(error) => return Answer::error(&error.to_rpc()),
        Ok(answer) if !cancelled(answer) => return answer.clone(),
        Ok(_) => {}
    }
    let answered = |a: &Answer| {
        a.error_parts()
            .is_none_or(|(code, _)| code == jsonrpc::METHOD_NOT_SUPPORTED)
    };
    let unasked = answers
        .iter()
        .find(|(i, a)| *i != taker && !a.as_ref().is_ok_and(answered));
    match unasked {
        Some((index, _)) => Answer::error(&RpcError::new(
            jsonrpc::RESOURCE_UNAVAILABLE,
            format!(
                "cancelled at route #{}, which took the transaction; route #{} could not be asked \
                 and may hold it from a send whose answer was lost: cancel again",
                taker + 1,
                index + 1
            ),
        )),
        None => Answer::Result("true".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancel_behind_several_routes_is_true_only_when_the_taker_cancelled_and_the_others_answered(
    ) {
        let yes = || Ok(Answer::Result("true".into()));
        let no = || Ok(Answer::Result("false".into()));
        let down = || Err(UpstreamError::Timeout(1_000));
        let is_true = |a: &Answer| matches!(a, Answer::Result(t) if t == "true");
        assert!(
            is_true(&combine_cancels(1, &[(1, yes()), (0, no())])),
            "the first never had it"
        );
        assert!(is_true(&combine_cancels(1, &[(1, yes()), (0, yes())])));
        assert_eq!(
            combine_cancels(1, &[(1, no()), (0, yes())]),
            Answer::Result("false".into()),
            "the taker's false"
        );
        let partial = combine_cancels(1, &[(1, yes()), (0, down())]);
        let (code, message) = partial.error_parts().unwrap();
        assert_eq!(code, jsonrpc::RESOURCE_UNAVAILABLE);
        assert!(message.contains("route #1 could not be asked"), "{message}");
        assert!(combine_cancels(1, &[(1, down()), (0, yes())])
            .error_parts()
            .is_some());
        let unserved = || Ok(not_served());
        assert!(
            is_true(&combine_cancels(1, &[(1, yes()), (0, unserved())])),
            "one that cancels no way the relay can ask holds nothing it could cancel"
        );
        assert_eq!(
            combine_cancels(0, &[(0, unserved()), (1, no())]),
            not_served()
        );
    }
}
