//! The head watch ([`HeadWatch`]): one upstream WebSocket per chain and isolate, subscribed to
//! `newHeads` (geth's `eth_subscribe`), whose headers move the read cache's head the moment the
//! node announces them ([`super::ReadCache::heard_head`]): a reorg makes the next read ask the
//! head before it is answered, instead of up to `CACHE_HEAD_MS` later. The polled head stays
//! the floor: a watch that stalls or cannot be opened only leaves the cache as it was without one.
//!
//! A Worker's I/O belongs to the request that made it, and outlives its response only through
//! `waitUntil`, at most 30 s in production (Cloudflare's Workers limits, "Duration"). So a watch
//! is opened by a client's request, kept alive by that request's `waitUntil`, and closed after
//! [`WATCH_MS`]; a request that finds the live watch within [`RENEW_MS`] of its end opens the
//! next one, so that under steady traffic the two overlap and no head goes unheard. With no
//! traffic there is none (and no read to answer). Pure: the edge (`edge/head_watch.rs`) opens the
//! sockets and asks this type when.

use super::header::Header;
use serde::Deserialize;
use serde_json::value::RawValue;

/// How long one watch lasts, ms: inside the 30 s that `waitUntil` keeps a request's I/O after
/// its response (Cloudflare's Workers limits).
pub const WATCH_MS: u64 = 25_000;

/// A live watch with less than this left is followed by a new one, opened by the next request,
/// ms.
pub const RENEW_MS: u64 = 5_000;

/// After a watch could not be opened, was refused its subscription or was dropped before its
/// time, none is tried for this long, ms, doubling with each failure in a row up to
/// [`RETRY_MAX_MS`]: an upstream without WebSockets is not asked at every request (the polled
/// head serves meanwhile).
pub const RETRY_MS: u64 = 30_000;

/// The longest hold after failures in a row, ms (one try an hour).
pub const RETRY_MAX_MS: u64 = 3_600_000;

/// A watch being opened for longer than this is taken as lost (its request was cancelled before
/// it could say), ms: a watch ends [`WATCH_MS`] after it was wanted, subscribed or not.
pub const OPENING_MS: u64 = WATCH_MS + 5_000;

/// A live watch that announced no block while the chain (the head asked over HTTP) moved this
/// many blocks past the last one it announced is stuck: a node behind, or a socket whose
/// notifications stopped. It ends, and the next watch starts at the next `UPSTREAM_WS_URL`.
pub const SILENT_BLOCKS: u64 = 3;

/// How often a live watch compares what it heard with the chain's head, ms.
pub const SILENCE_CHECK_MS: u64 = 1_000;

/// Whether a watch whose last announced block is `heard` (or, before any, the head when it
/// subscribed) is silent while the cache's head is `head` ([`SILENT_BLOCKS`]).
pub fn is_silent(heard: u64, head: u64) -> bool {
    head >= heard.saturating_add(SILENT_BLOCKS)
}

/// The id of the `eth_subscribe` request a watch sends.
pub const SUBSCRIBE_ID: u64 = 1;

/// The `eth_subscribe` request a watch sends on its socket.
pub const SUBSCRIBE: &str =
    r#"{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}"#;

/// One chain's head watches in one isolate: which is the newest, and whether another is wanted.
/// Each watch has a generation; only the newest one's end changes anything (an older one ending
/// while its successor runs is the overlap working).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeadWatch {
    /// The newest watch's generation (0: none yet).
    generation: u64,
    state: State,
    /// Watches that failed in a row (none since the last one subscribed).
    failures: u32,
    /// The `UPSTREAM_WS_URL` (its index) the next watch tries first: moved on past one that
    /// was silent ([`HeadWatch::silent`]).
    first_url: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum State {
    /// None running: the next request opens one.
    #[default]
    Idle,
    /// The newest is being opened since `since_ms`.
    Opening { since_ms: u64 },
    /// The newest is subscribed, and closes at `until_ms`.
    Live { until_ms: u64 },
    /// The last one failed: none is opened before `until_ms`.
    Failed { until_ms: u64 },
}

impl HeadWatch {
    /// Whether a request at `now_ms` should open a watch; if so, the new watch's generation
    /// (it is then being opened).
    pub fn want(&mut self, now_ms: u64) -> Option<u64> {
        let wanted = match self.state {
            State::Idle => true,
            State::Opening { since_ms } => now_ms.saturating_sub(since_ms) > OPENING_MS,
            State::Live { until_ms } => until_ms.saturating_sub(now_ms) < RENEW_MS,
            State::Failed { until_ms } => now_ms >= until_ms,
        };
        if !wanted {
            return None;
        }
        self.generation += 1;
        self.state = State::Opening { since_ms: now_ms };
        Some(self.generation)
    }

    /// Watch `generation`, wanted at `wanted_ms`, is subscribed: returns when it is to close,
    /// [`WATCH_MS`] after it was wanted (its request's answer), ms, however long it took to
    /// connect.
    pub fn live(&mut self, generation: u64, wanted_ms: u64) -> u64 {
        let until_ms = wanted_ms + WATCH_MS;
        if generation == self.generation {
            self.state = State::Live { until_ms };
            self.failures = 0;
        }
        until_ms
    }

    /// Watch `generation` ended at `now_ms`, at its time (`failed` false) or before it (it could
    /// not connect, its subscription was refused, the upstream dropped it). A failure holds the
    /// next one back [`RETRY_MS`], doubled for each failure in a row before it (at most
    /// [`RETRY_MAX_MS`]); returns that hold, ms (`None`: none, or not the newest watch).
    pub fn ended(&mut self, generation: u64, now_ms: u64, failed: bool) -> Option<u64> {
        if generation != self.generation {
            return None;
        }
        if !failed {
            self.state = State::Idle;
            return None;
        }
        let hold_ms = RETRY_MS
            .saturating_mul(1 << self.failures.min(16))
            .min(RETRY_MAX_MS);
        self.failures += 1;
        self.state = State::Failed {
            until_ms: now_ms + hold_ms,
        };
        Some(hold_ms)
    }
}

impl HeadWatch {
    /// The index of the `UPSTREAM_WS_URL` the next watch tries first.
    pub fn first_url(&self) -> usize {
        self.first_url
    }

    /// Watch `generation`, on the URL at `url` of `urls`, was silent ([`is_silent`]) and ended at
    /// `now_ms`: the next one starts at the next URL, at once when there is another; with one URL
    /// it is a failure ([`HeadWatch::ended`]: the polled head serves meanwhile). Returns the hold
    /// before the next, ms (`None`: none, or not the newest watch).
    pub fn silent(&mut self, generation: u64, now_ms: u64, url: usize, urls: usize) -> Option<u64> {
        if generation != self.generation {
            return None;
        }
        if urls > 1 {
            self.first_url = (url + 1) % urls;
            self.state = State::Idle;
            return None;
        }
        self.ended(generation, now_ms, true)
    }
}

/// What a message on a watch's socket says ([`WatchMessage::read`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchMessage {
    /// The answer to [`SUBSCRIBE`]: the subscription's id.
    Subscribed(String),
    /// The answer to [`SUBSCRIBE`] is an error (or no id): the upstream serves no `newHeads`;
    /// its message, or the answer, at most 200 bytes.
    Refused(String),
    /// A `newHeads` notification of subscription `.0`: the block's header.
    Head(String, Header),
    /// Anything else (a notification without a header, another id, not JSON-RPC): ignored.
    Other,
}

impl WatchMessage {
    /// Reads one text message of a watch's socket: an `eth_subscription` notification
    /// ([`crate::jsonrpc::notification_of`]), or the answer to [`SUBSCRIBE_ID`].
    pub fn read(text: &str) -> WatchMessage {
        if let Some((subscription, result)) = crate::jsonrpc::notification_of(text) {
            return serde_json::from_str(result.get())
                .ok()
                .and_then(|block| Header::of_block(&block))
                .map_or(WatchMessage::Other, |header| {
                    WatchMessage::Head(subscription, header)
                });
        }
        #[derive(Deserialize)]
        struct Message<'a> {
            id: Option<u64>,
            #[serde(borrow)]
            result: Option<&'a RawValue>,
            error: Option<serde_json::Value>,
        }
        let Ok(message) = serde_json::from_str::<Message>(text) else {
            return WatchMessage::Other;
        };
        if message.id != Some(SUBSCRIBE_ID) {
            return WatchMessage::Other;
        }
        let id = message
            .result
            .and_then(|r| serde_json::from_str::<String>(r.get()).ok());
        match (id, message.error) {
            (Some(id), None) => WatchMessage::Subscribed(id),
            (_, Some(error)) => {
                let said = error
                    .get("message")
                    .and_then(|m| m.as_str())
                    .map_or_else(|| error.to_string(), str::to_string);
                WatchMessage::Refused(said.chars().take(200).collect())
            }
            (None, None) => WatchMessage::Refused(text.chars().take(200).collect()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_silent_watch_hands_over_to_the_next_url_or_with_one_url_holds_as_a_failure() {
        assert!(!is_silent(100, 102) && is_silent(100, 103));
        let mut watch = HeadWatch::default();
        let first = watch.want(0).unwrap();
        watch.live(first, 0);
        // Two URLs: the next watch starts at the second, at once.
        assert_eq!(watch.silent(first, 5_000, 0, 2), None);
        assert_eq!(watch.first_url(), 1);
        let second = watch.want(5_001).expect("wanted at once");
        watch.live(second, 5_001);
        // Silent too: back to the first.
        assert_eq!(watch.silent(second, 9_000, 1, 2), None);
        assert_eq!(watch.first_url(), 0);
        // One URL: held as a failure.
        let third = watch.want(9_001).unwrap();
        assert_eq!(watch.silent(third, 10_000, 0, 1), Some(RETRY_MS));
        assert_eq!(watch.want(10_001), None);
        // An older watch's silence changes nothing.
        assert_eq!(watch.silent(first, 10_002, 0, 2), None);
    }

    #[test]
    fn the_first_request_opens_one_and_the_next_ones_do_not_until_it_nears_its_end() {
        let mut watch = HeadWatch::default();
        assert_eq!(watch.want(1_000), Some(1));
        assert_eq!(watch.want(1_001), None, "being opened");
        // Counted from when it was wanted: a slow connect does not carry it past its request's
        // `waitUntil`.
        let until = watch.live(1, 1_000);
        assert_eq!(until, 1_000 + WATCH_MS);
        assert_eq!(watch.want(1_300), None, "live");
        assert_eq!(watch.want(until - RENEW_MS), None, "exactly RENEW_MS left");
        // Near its end the next request opens the next one; the two overlap.
        assert_eq!(watch.want(until - RENEW_MS + 1), Some(2));
        assert_eq!(watch.want(until - RENEW_MS + 2), None);
        // The older one ending at its time changes nothing: its successor is being opened.
        assert_eq!(watch.ended(1, until, false), None);
        assert_eq!(watch.want(until + 1), None);
        watch.live(2, until - RENEW_MS + 1);
        assert_eq!(watch.want(until + 20), None, "the successor is live");
    }

    #[test]
    fn failures_in_a_row_hold_the_next_back_longer_and_one_subscribed_starts_the_count_again() {
        let mut watch = HeadWatch::default();
        let g = watch.want(0).unwrap();
        assert_eq!(watch.ended(g, 100, true), Some(RETRY_MS));
        assert_eq!(
            watch.want(100 + RETRY_MS - 1),
            None,
            "an upstream without WebSockets is not asked at every request"
        );
        let mut now = 100 + RETRY_MS;
        let mut holds = vec![];
        for _ in 0..12 {
            let g = watch.want(now).expect("due");
            let hold = watch.ended(g, now, true).unwrap();
            assert_eq!(watch.want(now + hold - 1), None);
            holds.push(hold);
            now += hold;
        }
        assert_eq!(
            &holds[..6],
            &[
                2 * RETRY_MS,
                4 * RETRY_MS,
                8 * RETRY_MS,
                16 * RETRY_MS,
                32 * RETRY_MS,
                64 * RETRY_MS
            ]
        );
        assert!(holds[6..].iter().all(|&h| h == RETRY_MAX_MS), "{holds:?}");
        // One subscribed, then ended at its time: the next request opens one, and a failure
        // after it holds the next back RETRY_MS again.
        let g = watch.want(now).unwrap();
        let until = watch.live(g, now);
        assert_eq!(watch.ended(g, until, false), None);
        let g = watch
            .want(until + 1)
            .expect("at its time: the next request opens one");
        assert_eq!(watch.ended(g, until + 2, true), Some(RETRY_MS));
    }

    #[test]
    fn one_being_opened_too_long_is_taken_as_lost() {
        let mut watch = HeadWatch::default();
        assert_eq!(watch.want(0), Some(1));
        assert_eq!(watch.want(OPENING_MS), None);
        assert_eq!(watch.want(OPENING_MS + 1), Some(2));
        // The lost one's late news changes nothing.
        watch.live(1, 0);
        assert_eq!(watch.ended(1, OPENING_MS + 3, true), None);
        assert_eq!(
            watch.want(OPENING_MS + 4),
            None,
            "the newest is still being opened"
        );
    }

    #[test]
    fn messages_are_read_as_geth_sends_them() {
        assert_eq!(
            WatchMessage::read(
                r#"{"jsonrpc":"2.0","id":1,"result":"0xcd0c3e8af590364c09d0fa6a1210faf5"}"#
            ),
            WatchMessage::Subscribed("0xcd0c3e8af590364c09d0fa6a1210faf5".into())
        );
        assert_eq!(
            WatchMessage::read(
                r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"the method eth_subscribe does not exist/is not available"}}"#
            ),
            WatchMessage::Refused(
                "the method eth_subscribe does not exist/is not available".into()
            )
        );
        assert!(matches!(
            WatchMessage::read(r#"{"jsonrpc":"2.0","id":1,"result":null}"#),
            WatchMessage::Refused(_)
        ));
        let hash = format!("0x{}", "ab".repeat(32));
        let parent = format!("0x{}", "cd".repeat(32));
        let notification = json!({
            "jsonrpc": "2.0",
            "method": "eth_subscription",
            "params": {"subscription": "0xsub", "result": {"number": "0x1b4", "hash": hash, "parentHash": parent, "miner": "0x0000000000000000000000000000000000000000"}},
        });
        assert_eq!(
            WatchMessage::read(&notification.to_string()),
            WatchMessage::Head(
                "0xsub".into(),
                Header {
                    number: 0x1b4,
                    hash: hash.clone(),
                    parent_hash: parent,
                    contents: None,
                }
            )
        );
        // A header without its parent, another id's answer, not JSON: ignored.
        let partial = json!({"jsonrpc": "2.0", "method": "eth_subscription", "params": {"subscription": "0xsub", "result": {"number": "0x1", "hash": hash}}});
        assert_eq!(
            WatchMessage::read(&partial.to_string()),
            WatchMessage::Other
        );
        assert_eq!(
            WatchMessage::read(r#"{"jsonrpc":"2.0","id":7,"result":"0x1"}"#),
            WatchMessage::Other
        );
        assert_eq!(WatchMessage::read("not json"), WatchMessage::Other);
    }
}
