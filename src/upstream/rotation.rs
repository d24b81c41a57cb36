//! Several upstreams (`UPSTREAM_RPC_URL` as a comma-separated list, the first preferred): each
//! one's health from its recent answers, the order in which they are tried, and the hedge delay of
//! a send: the rotation. Pure and clock-free: the platform reports every attempt with
//! [`Rotation::record`]; a [`crate::upstream::race::Race`] asks [`Rotation::order`] when it
//! starts. Health is kept per upstream, by its URL ([`Rotation`] is keyed, not positional): a
//! set of upstreams is named by its URLs in preference order at each question, so a change of
//! the list resets nothing of the upstreams it keeps.
//!
//! - Health is judged by the relay's own small questions ([`CallKind::is_own`]: counts, lookups
//!   by hash, the chain id): no answer to one (connection errors, timeouts, HTTP 5xx and 429, an answer
//!   too large or not JSON) or the node's own overload answer to one (busy, rate limited,
//!   syncing) is a failure ([`Attempt::Failed`]); so is a send's failure to answer (its text is
//!   a checked transaction's signed bytes). What a client asked for (a read) is not the node's
//!   health: a client's request that took too long, got too large an answer or made a
//!   gateway give up counts neither way; only what says the node was not there whatever the
//!   request (a refused connection, HTTP 429 or 503) counts against it. A JSON-RPC error to a
//!   client's request (a revert, invalid params, a refused transaction, whatever its text) is the
//!   node working, and counts as an answer: a client can never take an upstream out of the
//!   rotation ([`judge`]).
//! - [`FAILURES_TO_COOL`] failures in a row take an upstream out of the rotation for a cool-down
//!   ([`COOL_DOWN_MS`], doubling to [`COOL_DOWN_MAX_MS`] while it keeps failing); after it, one
//!   request tries it again. With every upstream cooling, they are still tried, in order: the
//!   rotation never refuses on its own.
//! - Order: the healthy upstreams by preference, except that one whose error rate is clearly
//!   higher, or whose median latency is more than twice another's and [`LATENCY_SLACK_MS`] more,
//!   goes behind it; then the cooling ones. A broadcast (`SEND_BROADCAST=all`) goes to the
//!   healthy ones only ([`Rotation::broadcast`]).
//! - An upstream is tried only once its `eth_chainId` was found to be the relay's
//!   ([`Rotation::checked`]); one on another chain ([`Rotation::exclude`]) never is.
//! - Hedge delay (eRPC's recipe for `eth_sendRawTransaction`): the 95th percentile of the best
//!   upstream's recent latencies, at least [`HEDGE_MIN_MS`], at most [`HEDGE_MAX_MS`].

use crate::ordering::answer::AnswerClass;
use crate::upstream::route::CallKind;
use crate::upstream::{classify, retry, UpstreamError, UpstreamReply};
use std::collections::HashMap;
use std::collections::VecDeque;

/// Failures in a row that take an upstream out of the rotation.
pub const FAILURES_TO_COOL: u32 = 3;
/// The first cool-down, ms.
pub const COOL_DOWN_MS: u64 = 5_000;
/// The longest cool-down, ms.
pub const COOL_DOWN_MAX_MS: u64 = 60_000;
/// The shortest hedge delay, ms.
pub const HEDGE_MIN_MS: u64 = 50;
/// The longest hedge delay (also the delay while nothing is known of the latencies), ms.
pub const HEDGE_MAX_MS: u64 = 1_000;
/// How many latencies are kept per upstream.
pub const LATENCY_WINDOW: usize = 64;
/// How much slower than another (beyond twice its median) an upstream must be to go behind it, ms.
pub const LATENCY_SLACK_MS: u64 = 50;
/// The weight of the newest attempt in the error rate (an exponential moving average).
const ERROR_RATE_WEIGHT: f64 = 0.2;

/// What one attempt at an upstream came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// An answer (a result or a JSON-RPC error), after `latency_ms`.
    Answered {
        /// From the request to the answer, ms.
        latency_ms: u64,
    },
    /// No usable answer: a connection error, a timeout, HTTP 5xx or 429, a busy node.
    Failed,
}

/// What one attempt's reply means for the request and for the upstream that gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Judged {
    /// What the upstream's health records.
    pub attempt: AttemptKind,
    /// Whether the reply ends the request: an answer to it, not the node's absence or overload
    /// (then the next upstream is tried, where the route allows).
    pub usable: bool,
    /// Whether the node should be asked a question of the relay's own (its chain id) to learn
    /// its health: a client's request failed in a way that says nothing of it
    /// ([`AttemptKind::Unjudged`]), and may still mean the node hangs.
    pub probe: bool,
}

/// [`Attempt`] without its latency, or nothing to record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptKind {
    /// The node answered.
    Answered,
    /// The node is away or overloaded.
    Failed,
    /// Says nothing of the node's health: a client's request that failed in a way its own shape
    /// may have caused (see [`judge`]). Nothing is recorded.
    Unjudged,
}

impl AttemptKind {
    /// What to record of an attempt of this kind that took `latency_ms` (`None`: nothing).
    pub fn recorded(self, latency_ms: u64) -> Option<Attempt> {
        match self {
            AttemptKind::Answered => Some(Attempt::Answered { latency_ms }),
            AttemptKind::Failed => Some(Attempt::Failed),
            AttemptKind::Unjudged => None,
        }
    }
}

/// Judges `reply` to a call of `kind` (see the module documentation). For the request: no
/// reply, or HTTP 429/502/503/504 whatever the body, is not usable (the next upstream is tried
/// where the route's usage allows), and so is a send's answer that says the node is busy. For the
/// upstream's health:
///
/// - A question of the relay's own ([`CallKind::is_own`]) is small and its text the relay's: any
///   failure to answer it, or a busy answer, is the node's. So is a send's failure to answer
///   ([`CallKind::is_send`]: a timeout, a lost connection, HTTP 5xx): its text is a checked
///   transaction's signed bytes, which no client can make slow or large, so a node that hangs
///   on sends while it answers reads is cooled; a send's JSON-RPC error, busy included, is an
///   answer (the transaction's, not the node's health).
/// - A client's request (a read, a WebSocket's gap question) is judged only by what it cannot have
///   caused. A refused connection (nothing was sent: the node or its port is not there) and HTTP
///   429 or 503 (the service turns every request away: a rate limit on the relay's key, a node
///   in maintenance) say the same of any request, so they count. A timeout, an answer over
///   `MAX_UPSTREAM_RESPONSE_BYTES` or not JSON, a connection lost mid-request, and HTTP 500, 502,
///   504 or any other status without a JSON body are [`AttemptKind::Unjudged`]: a wide
///   `eth_getLogs` or a heavy `eth_call` is slow, huge or kills the gateway's wait on a healthy
///   node, so counting them would let a client cool every upstream by the shape of its
///   requests. A node that really hangs is still found: such a reply asks for a
///   [`Judged::probe`], a question of the relay's own that is judged as one. How many requests a
///   client makes is bounded by the rate limits, not here.
pub fn judge(kind: CallKind, reply: &Result<UpstreamReply, UpstreamError>) -> Judged {
    // A send's text is the relay's own too (a checked transaction's signed bytes, which no
    // client can make slow or large): its failures are the node's.
    let clients = !kind.is_own() && !kind.is_send();
    let failed = Judged {
        attempt: AttemptKind::Failed,
        usable: false,
        probe: false,
    };
    let unjudged = Judged {
        attempt: AttemptKind::Unjudged,
        usable: false,
        probe: true,
    };
    let answered = |usable| Judged {
        attempt: AttemptKind::Answered,
        usable,
        probe: false,
    };
    match reply {
        Err(e) if clients && !says_node_is_away(e) => Judged {
            // The node answered, just too much: nothing to ask it.
            probe: !matches!(e, UpstreamError::TooLarge(_)),
            ..unjudged
        },
        Err(_) => failed,
        Ok(r) if retry::RETRYABLE_STATUSES.contains(&r.status) => {
            if clients && !matches!(r.status, 429 | 503) {
                unjudged
            } else {
                failed
            }
        }
        Ok(_) => {
            let busy = || classify(reply).0 == AnswerClass::Busy;
            if kind.is_send() {
                answered(!busy())
            } else if kind.is_own() && busy() {
                failed
            } else {
                answered(true)
            }
        }
    }
}

/// Whether a failure says the node was not there whatever the request was: a refused connection
/// or a failed name lookup (nothing was sent), HTTP 429 or 503 without a JSON body.
fn says_node_is_away(error: &UpstreamError) -> bool {
    match error {
        UpstreamError::Unreachable(_) => !error.may_have_arrived(),
        UpstreamError::Status(status, _) => matches!(status, 429 | 503),
        UpstreamError::OtherChain(_) => true,
        UpstreamError::Invalid | UpstreamError::TooLarge(_) | UpstreamError::Timeout(_) => false,
    }
}

/// One upstream's health.
#[derive(Debug, Clone, Default)]
struct Health {
    /// Recent latencies of answered attempts, ms, newest last.
    latencies: VecDeque<u64>,
    /// The error rate, 0 to 1 (an exponential moving average of the attempts).
    error_rate: f64,
    /// Failures since the last answer.
    failures_in_row: u32,
    /// Cool-downs since the last answer (each doubles the next).
    cool_downs: u32,
    /// Out of the rotation until then, Unix ms.
    cooling_until_ms: u64,
    /// Why it is never used (another chain), when it is not.
    excluded: Option<String>,
    /// Whether its `eth_chainId` was found to be the relay's chain: until then it is not used.
    checked: bool,
}

impl Health {
    fn median_ms(&self) -> Option<u64> {
        percentile(&self.latencies, 50)
    }
}

/// The `p`th percentile (nearest rank) of `values`; `None` when there are none.
fn percentile(values: &VecDeque<u64>, p: usize) -> Option<u64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted: Vec<u64> = values.iter().copied().collect();
    sorted.sort_unstable();
    let rank = (p * sorted.len()).div_ceil(100).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// The upstreams in rotation: each one's health, by its key (its URL). Every question names the
/// set it is about, in preference order (its first is the preferred one); positions returned
/// are positions in that set.
#[derive(Debug, Clone, Default)]
pub struct Rotation {
    health: HashMap<String, Health>,
}

impl Rotation {
    /// A rotation knowing nothing of any upstream.
    pub fn new() -> Self {
        Self::default()
    }

    fn get(&self, key: &str) -> Option<&Health> {
        self.health.get(key)
    }

    fn get_mut(&mut self, key: &str) -> &mut Health {
        self.health.entry(key.to_string()).or_default()
    }

    /// Upstream `key` serves the relay's chain: it may be used.
    pub fn checked(&mut self, key: &str) {
        self.get_mut(key).checked = true;
    }

    /// Whether any upstream of `set` was found on the relay's chain.
    pub fn any_checked(&self, set: &[String]) -> bool {
        set.iter().any(|k| self.get(k).is_some_and(|h| h.checked))
    }

    /// The positions in `set` of the upstreams whose chain is not known yet (neither checked nor
    /// excluded).
    pub fn unchecked(&self, set: &[String]) -> Vec<usize> {
        (0..set.len())
            .filter(|&i| {
                self.get(&set[i])
                    .is_none_or(|h| !h.checked && h.excluded.is_none())
            })
            .collect()
    }

    /// Never use upstream `key` again (it serves another chain); `why` is what the log says.
    pub fn exclude(&mut self, key: &str, why: impl Into<String>) {
        self.get_mut(key).excluded = Some(why.into());
    }

    /// Why upstream `key` is excluded, when it is.
    pub fn excluded(&self, key: &str) -> Option<&str> {
        self.get(key)?.excluded.as_deref()
    }

    /// Records an attempt at upstream `key` that ended at `now_ms`; whether it began a
    /// cool-down.
    pub fn record(&mut self, key: &str, attempt: Attempt, now_ms: u64) -> bool {
        let h = self.get_mut(key);
        match attempt {
            Attempt::Answered { latency_ms } => {
                if h.latencies.len() == LATENCY_WINDOW {
                    h.latencies.pop_front();
                }
                h.latencies.push_back(latency_ms);
                h.error_rate *= 1.0 - ERROR_RATE_WEIGHT;
                h.failures_in_row = 0;
                h.cool_downs = 0;
                h.cooling_until_ms = 0;
                false
            }
            Attempt::Failed => {
                h.error_rate = h.error_rate * (1.0 - ERROR_RATE_WEIGHT) + ERROR_RATE_WEIGHT;
                h.failures_in_row += 1;
                if h.failures_in_row >= FAILURES_TO_COOL {
                    let cool_ms = COOL_DOWN_MS
                        .saturating_mul(1 << h.cool_downs.min(16))
                        .min(COOL_DOWN_MAX_MS);
                    h.cooling_until_ms = now_ms.saturating_add(cool_ms);
                    h.cool_downs += 1;
                    h.failures_in_row = 0;
                    return true;
                }
                false
            }
        }
    }

    /// Whether upstream `key` is in the rotation at `now_ms` (checked, not cooling).
    pub fn healthy(&self, key: &str, now_ms: u64) -> bool {
        self.get(key)
            .is_some_and(|h| h.checked && h.excluded.is_none() && now_ms >= h.cooling_until_ms)
    }

    /// The position in `set` of the preferred upstream in the rotation at `now_ms`: the first of
    /// `set` that is healthy, whatever the latencies; `None` when none is. Filters go there: a
    /// filter lives on the node that made it.
    pub fn preferred(&self, set: &[String], now_ms: u64) -> Option<usize> {
        (0..set.len()).find(|&i| self.healthy(&set[i], now_ms))
    }

    /// Whether upstream `key` is out of the rotation for a cool-down at `now_ms`.
    pub fn cooling(&self, key: &str, now_ms: u64) -> bool {
        self.get(key).is_some_and(|h| now_ms < h.cooling_until_ms)
    }

    /// Whether `a` should go behind `b` (both healthy): a clearly higher error rate, or a median
    /// latency above twice `b`'s and [`LATENCY_SLACK_MS`] more.
    fn worse(&self, a: &str, b: &str) -> bool {
        let none = Health::default();
        let (ha, hb) = (self.get(a).unwrap_or(&none), self.get(b).unwrap_or(&none));
        if ha.error_rate > hb.error_rate + 0.25 {
            return true;
        }
        if hb.error_rate > ha.error_rate + 0.25 {
            return false;
        }
        match (ha.median_ms(), hb.median_ms()) {
            (Some(la), Some(lb)) => la > lb.saturating_mul(2).saturating_add(LATENCY_SLACK_MS),
            _ => false,
        }
    }

    /// The positions in `set` of the upstreams to try at `now_ms`, best first: the healthy ones
    /// (by preference, a clearly worse one behind a better one), then the cooling ones by the end
    /// of their cool-down. Excluded and unchecked ones never appear.
    pub fn order(&self, set: &[String], now_ms: u64) -> Vec<usize> {
        let mut healthy: Vec<usize> = (0..set.len())
            .filter(|&i| self.healthy(&set[i], now_ms))
            .collect();
        // A stable insertion sort by "worse than": the preference order breaks every tie.
        for i in 1..healthy.len() {
            let mut j = i;
            while j > 0 && self.worse(&set[healthy[j - 1]], &set[healthy[j]]) {
                healthy.swap(j - 1, j);
                j -= 1;
            }
        }
        let mut cooling: Vec<(u64, usize)> = (0..set.len())
            .filter_map(|i| {
                let h = self.get(&set[i])?;
                let usable = h.checked && h.excluded.is_none() && !self.healthy(&set[i], now_ms);
                usable.then_some((h.cooling_until_ms, i))
            })
            .collect();
        cooling.sort_unstable();
        healthy.extend(cooling.into_iter().map(|(_, i)| i));
        healthy
    }

    /// The positions in `set` of the upstreams a transaction goes to at once under
    /// `SEND_BROADCAST=all` at `now_ms`: the healthy ones, best first. A cooling one is left out:
    /// one that swallows sends would make every refusal wait for it (a refusal answers only once
    /// every upstream that has the bytes answered). With every upstream cooling, all of them, in
    /// [`Rotation::order`]'s order: the rotation never refuses on its own.
    pub fn broadcast(&self, set: &[String], now_ms: u64) -> Vec<usize> {
        let order = self.order(set, now_ms);
        let healthy: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&i| self.healthy(&set[i], now_ms))
            .collect();
        if healthy.is_empty() {
            order
        } else {
            healthy
        }
    }

    /// How long a call waits for upstream `key` before it is also sent to the next, ms: the
    /// 95th percentile of its recent latencies within [`HEDGE_MIN_MS`]..=[`HEDGE_MAX_MS`]
    /// ([`HEDGE_MAX_MS`] while none is known).
    pub fn hedge_delay_ms(&self, key: &str) -> u64 {
        self.get(key)
            .and_then(|h| percentile(&h.latencies, 95))
            .map_or(HEDGE_MAX_MS, |p95| p95.clamp(HEDGE_MIN_MS, HEDGE_MAX_MS))
    }
}

#[cfg(test)]
mod tests;
