//! When a request is sent to the upstream again: the retry budget and the backoff.
//!
//! Only answers that say nothing about the request ([`AnswerClass::retryable`]: no answer, HTTP
//! 429/502/503/504, a busy node) are retried, a transaction always with its original signed bytes
//! (the same hash, so a resend can never spend twice; Celestia's tx client resubmits the same way,
//! never re-signing). Retries are bounded by time, not by count: they go on until the deadline
//! (the holder's, `LOCK_MAX_HOLD_MS` after its grant), so an upstream that is away for seconds
//! costs no transaction. The delays double from [`BASE_DELAY_MS`] to [`MAX_DELAY_MS`], each
//! jittered to between half and one and a half times that, so senders that wait on the same
//! upstream do not all come back in the same millisecond; a `Retry-After` the upstream sent is
//! waited out first. `UPSTREAM_RETRIES` may cap the count (0: no retry at all).
//!
//! [`AnswerClass::retryable`]: crate::ordering::answer::AnswerClass::retryable

use crate::upstream::batch::{self, BatchAnswer};
use crate::upstream::{CallKind, Platform, UpstreamError, UpstreamReply};

/// The retry budget of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// At most this many retries after the first try (`UPSTREAM_RETRIES`); `None`: until the
    /// deadline (the default).
    pub max_retries: Option<u32>,
    /// The first backoff, ms; retry k waits `base_delay_ms * 2^(k-1)` up to `max_delay_ms`,
    /// jittered to between half and one and a half times that.
    pub base_delay_ms: u64,
    /// The longest backoff before jitter, ms.
    pub max_delay_ms: u64,
    /// The longest one attempt may take, ms (`UPSTREAM_TIMEOUT_MS`).
    pub attempt_timeout_ms: u64,
}

/// HTTP statuses that mean "try again" whatever the body: 429 Too Many Requests, 502 Bad Gateway,
/// 503 Service Unavailable, 504 Gateway Timeout (RFC 9110, RFC 6585).
pub const RETRYABLE_STATUSES: [u16; 4] = [429, 502, 503, 504];

/// The shortest attempt worth making, ms: a retry that would have less time than this before the
/// deadline is not made.
pub const MIN_ATTEMPT_MS: u64 = 50;

/// The first backoff, ms (then 100, 200 ms... up to [`MAX_DELAY_MS`]).
pub const BASE_DELAY_MS: u64 = 50;

/// The longest backoff before jitter, ms.
pub const MAX_DELAY_MS: u64 = 1_000;

impl RetryPolicy {
    /// Retries until the deadline, with the default backoff; each attempt at most
    /// `attempt_timeout_ms`.
    pub fn until_deadline(attempt_timeout_ms: u64) -> Self {
        RetryPolicy {
            max_retries: None,
            base_delay_ms: BASE_DELAY_MS,
            max_delay_ms: MAX_DELAY_MS,
            attempt_timeout_ms,
        }
    }

    /// How long an attempt may wait for its answer when it starts at `now_ms` with the deadline
    /// at `deadline_ms` (Unix ms): the attempt timeout, cut to the time left (at least 1 ms).
    pub fn attempt_timeout(&self, now_ms: u64, deadline_ms: u64) -> u64 {
        self.attempt_timeout_ms
            .min(deadline_ms.saturating_sub(now_ms))
            .max(1)
    }

    /// The backoff before retry number `retry` (1 for the first retry), ms, with `jitter` in
    /// [0, 1): `min(base_delay_ms * 2^(retry-1), max_delay_ms) * (0.5 + jitter)`.
    pub fn backoff_ms(&self, retry: u32, jitter: f64) -> u64 {
        let base = self
            .base_delay_ms
            .saturating_mul(1u64 << retry.saturating_sub(1).min(30))
            .min(self.max_delay_ms);
        (base as f64 * (0.5 + jitter.clamp(0.0, 1.0))) as u64
    }

    /// After `attempts` attempts that all failed retryably, at `now_ms`: the wait before the next
    /// one (the backoff, or the upstream's `retry_after_ms` when longer), or `None` when the count
    /// cap is reached or the next attempt could not get [`MIN_ATTEMPT_MS`] before `deadline_ms`.
    pub fn next_retry(
        &self,
        attempts: u32,
        jitter: f64,
        now_ms: u64,
        deadline_ms: u64,
        retry_after_ms: Option<u64>,
    ) -> Option<u64> {
        if self.max_retries.is_some_and(|max| attempts > max) {
            return None;
        }
        let delay = self
            .backoff_ms(attempts, jitter)
            .max(retry_after_ms.unwrap_or(0));
        (now_ms.saturating_add(delay).saturating_add(MIN_ATTEMPT_MS) <= deadline_ms)
            .then_some(delay)
    }
}

/// A `Retry-After` header value (RFC 9110, section 10.2.3) in ms: delay-seconds only (an
/// HTTP-date, which nodes and providers do not send, is ignored).
pub fn parse_retry_after(value: &str) -> Option<u64> {
    value
        .trim()
        .parse::<u64>()
        .ok()
        .map(|s| s.saturating_mul(1_000))
}

/// POSTs `body`, a question of the relay's own of `kind` ([`CallKind::is_own`]), until the upstream gives an
/// answer worth keeping, by `deadline_ms` (Unix ms): a lost connection, a timeout, a non-JSON body
/// or HTTP 429/502/503/504 is tried again after the [`RetryPolicy`]'s backoff (or the upstream's
/// `Retry-After`). For reads whose repetition is harmless (lookups); a transaction goes through
/// [`crate::upstream::submit::submit`].
///
/// # Errors
/// The last [`UpstreamError`] when no usable answer came by the deadline.
pub async fn post_retried<U: Platform + ?Sized>(
    upstream: &U,
    body: &str,
    kind: CallKind,
    policy: &RetryPolicy,
    deadline_ms: u64,
) -> Result<UpstreamReply, UpstreamError> {
    post_retried_as(upstream, body, None, kind, policy, deadline_ms).await
}

/// [`post_retried`] of a JSON-RPC batch of `members` requests ([`Platform::post_batch`]): an
/// answer that refuses the batch ([`crate::upstream::batch::judge`], such as Nethermind's HTTP
/// 503 naming its batch limit) is kept, not tried again.
///
/// # Errors
/// As [`post_retried`].
pub async fn post_batch_retried<U: Platform + ?Sized>(
    upstream: &U,
    body: &str,
    members: usize,
    kind: CallKind,
    policy: &RetryPolicy,
    deadline_ms: u64,
) -> Result<UpstreamReply, UpstreamError> {
    post_retried_as(upstream, body, Some(members), kind, policy, deadline_ms).await
}

/// [`post_retried`] to the private route at `index` of `UPSTREAM_SEND_URL` alone
/// ([`Platform::post_route`]): a question every route that may hold a transaction must answer.
///
/// # Errors
/// As [`post_retried`].
pub async fn post_route_retried<U: Platform + ?Sized>(
    upstream: &U,
    index: usize,
    body: &str,
    policy: &RetryPolicy,
    deadline_ms: u64,
) -> Result<UpstreamReply, UpstreamError> {
    retried(upstream, policy, deadline_ms, |timeout_ms| async move {
        (upstream.post_route(index, body, timeout_ms).await, false)
    })
    .await
}

async fn post_retried_as<U: Platform + ?Sized>(
    upstream: &U,
    body: &str,
    members: Option<usize>,
    kind: CallKind,
    policy: &RetryPolicy,
    deadline_ms: u64,
) -> Result<UpstreamReply, UpstreamError> {
    retried(upstream, policy, deadline_ms, |timeout_ms| async move {
        match members {
            Some(members) => {
                let reply = upstream.post_batch(body, members, kind, timeout_ms).await;
                // A batch refused as a whole is kept, not tried again.
                let refused = matches!(batch::judge(members, &reply), BatchAnswer::Refused { .. });
                (reply, refused)
            }
            None => (upstream.post(body, kind, timeout_ms).await, false),
        }
    })
    .await
}

/// The loop of the retried posts: `post` (given each attempt's timeout, ms; its `true` keeps
/// its reply as it is) until a reply worth keeping, by `deadline_ms`.
async fn retried<U, F, Fut>(
    upstream: &U,
    policy: &RetryPolicy,
    deadline_ms: u64,
    post: F,
) -> Result<UpstreamReply, UpstreamError>
where
    U: Platform + ?Sized,
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = (Result<UpstreamReply, UpstreamError>, bool)>,
{
    let mut attempts = 0;
    loop {
        attempts += 1;
        let timeout_ms = policy.attempt_timeout(upstream.now_ms(), deadline_ms);
        let (reply, keep) = post(timeout_ms).await;
        if keep {
            return reply;
        }
        let retry_after_ms = match &reply {
            Ok(r) if RETRYABLE_STATUSES.contains(&r.status) => r.retry_after_ms,
            Ok(_) => return reply,
            Err(UpstreamError::TooLarge(_)) => return reply,
            Err(e) => e.retry_after_ms(),
        };
        let now = upstream.now_ms();
        let jitter = upstream.random();
        match policy.next_retry(attempts, jitter, now, deadline_ms, retry_after_ms) {
            Some(delay_ms) => upstream.sleep(delay_ms).await,
            None => {
                return match reply {
                    Ok(r) => Err(UpstreamError::Status(r.status, r.retry_after_ms)),
                    Err(e) => Err(e),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: RetryPolicy = RetryPolicy {
        max_retries: None,
        base_delay_ms: 50,
        max_delay_ms: 1_000,
        attempt_timeout_ms: 60_000,
    };

    #[test]
    fn backoff_doubles_to_the_cap_with_jitter() {
        assert_eq!(POLICY.backoff_ms(1, 0.5), 50);
        assert_eq!(POLICY.backoff_ms(2, 0.5), 100);
        assert_eq!(POLICY.backoff_ms(3, 0.5), 200);
        assert_eq!(POLICY.backoff_ms(5, 0.5), 800);
        assert_eq!(POLICY.backoff_ms(6, 0.5), 1_000, "capped");
        assert_eq!(POLICY.backoff_ms(60, 0.5), 1_000, "no overflow");
        assert_eq!(POLICY.backoff_ms(1, 0.0), 25);
        assert_eq!(POLICY.backoff_ms(9, 0.999), 1_499);
    }

    #[test]
    fn until_the_deadline_or_the_cap() {
        let far = 1_000_000;
        assert_eq!(POLICY.next_retry(1, 0.5, 0, far, None), Some(50));
        assert_eq!(
            POLICY.next_retry(1_000, 0.5, 0, far, None),
            Some(1_000),
            "no count limit by default"
        );
        // 50 ms of backoff and 50 ms of attempt must fit before the deadline.
        assert_eq!(POLICY.next_retry(1, 0.5, 900, 1_000, None), Some(50));
        assert_eq!(POLICY.next_retry(1, 0.5, 901, 1_000, None), None);
        let three = RetryPolicy {
            max_retries: Some(3),
            ..POLICY
        };
        assert_eq!(three.next_retry(3, 0.5, 0, far, None), Some(200));
        assert_eq!(three.next_retry(4, 0.5, 0, far, None), None);
        let off = RetryPolicy {
            max_retries: Some(0),
            ..POLICY
        };
        assert_eq!(off.next_retry(1, 0.5, 0, far, None), None);
    }

    #[test]
    fn retry_after_is_waited_out_within_the_deadline() {
        assert_eq!(
            POLICY.next_retry(1, 0.5, 0, 10_000, Some(2_000)),
            Some(2_000)
        );
        assert_eq!(
            POLICY.next_retry(1, 0.5, 0, 2_000, Some(2_000)),
            None,
            "past the deadline: the answer is final"
        );
        assert_eq!(parse_retry_after(" 3 "), Some(3_000));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2026 07:28:00 GMT"), None);
    }

    #[test]
    fn attempts_are_cut_to_the_time_left() {
        assert_eq!(POLICY.attempt_timeout(0, 30_000), 30_000);
        assert_eq!(POLICY.attempt_timeout(29_990, 30_000), 10);
        assert_eq!(POLICY.attempt_timeout(31_000, 30_000), 1);
        let short = RetryPolicy {
            attempt_timeout_ms: 500,
            ..POLICY
        };
        assert_eq!(short.attempt_timeout(0, 30_000), 500);
    }
}
