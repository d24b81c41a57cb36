//! When a transaction's holder sends its bytes again: the retry budget and the backoff.
//!
//! Only answers that say nothing about the transaction ([`AnswerClass::retryable`]: no answer,
//! HTTP 429/502/503/504, a busy node) are retried, always with the original signed bytes (the
//! same hash, so a resend can never spend twice; Celestia's tx client resubmits the same way, never
//! re-signing). The delays double from `base_delay_ms` with jitter, and no attempt may run past the
//! holder's deadline (the sender's maximum hold).
//!
//! [`AnswerClass::retryable`]: crate::ordering::answer::AnswerClass::retryable

/// The retry budget of one transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// How many more times the bytes may be sent after the first attempt (`UPSTREAM_RETRIES`).
    pub retries: u32,
    /// The first backoff, ms; retry k waits `base_delay_ms * 2^(k-1)`, jittered to between half
    /// and one and a half times that.
    pub base_delay_ms: u64,
    /// The longest one attempt may take, ms (`UPSTREAM_TIMEOUT_MS`).
    pub attempt_timeout_ms: u64,
}

/// The shortest attempt worth making, ms: a retry that would have less time than this before the
/// deadline is not made.
pub const MIN_ATTEMPT_MS: u64 = 50;

/// The default first backoff, ms (then 100, 200 ms...).
pub const BASE_DELAY_MS: u64 = 50;

impl RetryPolicy {
    /// How long attempt may wait for its answer when it starts at `now_ms` with the holder's
    /// deadline at `deadline_ms` (Unix ms): the attempt timeout, cut to the time left (at least
    /// 1 ms).
    pub fn attempt_timeout(&self, now_ms: u64, deadline_ms: u64) -> u64 {
        self.attempt_timeout_ms
            .min(deadline_ms.saturating_sub(now_ms))
            .max(1)
    }

    /// The backoff before retry number `retry` (1 for the first retry), ms, with `jitter` in
    /// [0, 1): `base_delay_ms * 2^(retry-1) * (0.5 + jitter)`.
    pub fn backoff_ms(&self, retry: u32, jitter: f64) -> u64 {
        let base = self
            .base_delay_ms
            .saturating_mul(1u64 << (retry.saturating_sub(1)).min(20));
        (base as f64 * (0.5 + jitter.clamp(0.0, 1.0))) as u64
    }

    /// After `attempts` attempts that all failed retryably, at `now_ms`: the backoff before the
    /// next one, or `None` when the budget is spent or the next attempt could not get
    /// [`MIN_ATTEMPT_MS`] before `deadline_ms`.
    pub fn next_retry(
        &self,
        attempts: u32,
        jitter: f64,
        now_ms: u64,
        deadline_ms: u64,
    ) -> Option<u64> {
        if attempts > self.retries {
            return None;
        }
        let delay = self.backoff_ms(attempts, jitter);
        (now_ms.saturating_add(delay).saturating_add(MIN_ATTEMPT_MS) <= deadline_ms)
            .then_some(delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: RetryPolicy = RetryPolicy {
        retries: 3,
        base_delay_ms: 50,
        attempt_timeout_ms: 60_000,
    };

    #[test]
    fn backoff_doubles_with_jitter() {
        assert_eq!(POLICY.backoff_ms(1, 0.5), 50);
        assert_eq!(POLICY.backoff_ms(2, 0.5), 100);
        assert_eq!(POLICY.backoff_ms(3, 0.5), 200);
        assert_eq!(POLICY.backoff_ms(1, 0.0), 25);
        assert_eq!(POLICY.backoff_ms(3, 0.999), 299);
        // Large retry counts saturate instead of overflowing.
        assert!(POLICY.backoff_ms(200, 0.5) > 0);
    }

    #[test]
    fn at_most_the_budget_and_never_past_the_deadline() {
        let far = 1_000_000;
        assert_eq!(POLICY.next_retry(1, 0.5, 0, far), Some(50));
        assert_eq!(POLICY.next_retry(3, 0.5, 0, far), Some(200));
        assert_eq!(
            POLICY.next_retry(4, 0.5, 0, far),
            None,
            "3 retries after the first try"
        );
        // 50 ms of backoff and 50 ms of attempt must fit before the deadline.
        assert_eq!(POLICY.next_retry(1, 0.5, 900, 1_000), Some(50));
        assert_eq!(POLICY.next_retry(1, 0.5, 901, 1_000), None);
        let none = RetryPolicy {
            retries: 0,
            ..POLICY
        };
        assert_eq!(none.next_retry(1, 0.5, 0, far), None);
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
